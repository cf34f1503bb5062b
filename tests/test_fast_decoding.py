"""The CPU decoding fast paths (issue 4): MKL-prepacked weights in decoding steps, and beam search that leaves the
cross-attention cache as it is. Each must give what the plain path gives; the speed is scripts/benchmark.py's."""

import copy
import io

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config
from transformers import GenerationMixin
from transformers.cache_utils import DynamicCache

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer import modeling_vanilla_transformer as modeling
from hf_vanilla_transformer.modeling_vanilla_transformer import PrepackedLinear

needs_mkl = pytest.mark.skipif(not modeling.MKL_PACKED_GEMM, reason="this torch has no MKL packed GEMM")


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return VanillaTransformerForConditionalGeneration(tiny_config()).eval()


def prepackable(model):
    return {name: module for name, module in model.named_modules() if isinstance(module, PrepackedLinear)}


def generate(model, batch, num_beams, **options):
    return model.generate(
        batch["input_ids"],
        attention_mask=batch["attention_mask"],
        num_beams=num_beams,
        max_new_tokens=8,
        min_new_tokens=8,
        output_scores=True,
        return_dict_in_generate=True,
        **options,
    )


def test_the_decoder_projections_and_the_output_projection_are_prepackable():
    model = tiny_model()
    names = set(prepackable(model))
    for i in range(2):
        layer = f"model.decoder.layers.{i}"
        assert {
            f"{layer}.self_attn.qkv_proj",
            f"{layer}.self_attn.out_proj",
            f"{layer}.encoder_attn.q_proj",
            f"{layer}.encoder_attn.out_proj",
            f"{layer}.ffn.fc1",
            f"{layer}.ffn.fc2",
        } <= names
    assert "lm_head" in names
    # the encoder runs once per call on whole sentences, and so do the cross-attention K/V: nothing to reuse
    assert not any(name.startswith("model.encoder") or name.endswith(".kv_proj") for name in names)
    assert len(names) == 2 * 6 + 1


@needs_mkl
@pytest.mark.parametrize("num_beams", [1, 3])
def test_generate_packs_each_weight_once_and_matches_the_plain_path(batch, num_beams, monkeypatch):
    model = tiny_model()
    monkeypatch.setattr(modeling, "MKL_PACKED_GEMM", False)
    plain = generate(model, batch, num_beams)
    assert all(module._packed is None for module in prepackable(model).values())

    monkeypatch.setattr(modeling, "MKL_PACKED_GEMM", True)
    packings = []
    reorder = torch.ops.mkl._mkl_reorder_linear_weight
    monkeypatch.setattr(torch.ops.mkl, "_mkl_reorder_linear_weight", lambda *a: packings.append(a) or reorder(*a))
    fast = generate(model, batch, num_beams)

    assert torch.equal(fast.sequences, plain.sequences)
    for fast_scores, plain_scores in zip(fast.scores, plain.scores, strict=True):
        torch.testing.assert_close(fast_scores, plain_scores, rtol=1e-5, atol=1e-5)
    rows = batch["input_ids"].shape[0] * num_beams
    assert len(packings) == len(prepackable(model))  # once per weight, not once per step
    assert all(module._packed[0] == rows for module in prepackable(model).values())

    generate(model, batch, num_beams)  # the next call with as many rows reuses them
    assert len(packings) == len(prepackable(model))


@needs_mkl
def test_a_packed_weight_follows_the_weight_and_the_row_count():
    torch.manual_seed(0)
    linear = PrepackedLinear(16, 24).eval()
    with torch.no_grad():
        for rows in (3, 5, 3):
            x = torch.randn(rows, 1, 16)
            torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))
            assert linear._packed[0] == rows
        linear.weight.mul_(-2.0)  # an in-place change (an optimizer step, load_state_dict) is seen
        torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))
        linear.weight = torch.nn.Parameter(torch.randn(24, 16))  # so is a new tensor
        torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))


@needs_mkl
@pytest.mark.parametrize(
    "case",
    ["grad enabled", "training", "several positions", "float64", "bfloat16", "wrapped weight", "inference weight"],
)
def test_everything_but_a_cpu_fp32_no_grad_decoding_step_takes_the_plain_path(case):
    torch.manual_seed(0)
    linear = PrepackedLinear(16, 24).train(case == "training")
    x = torch.randn(3, 4 if case == "several positions" else 1, 16)
    if case in ("float64", "bfloat16"):
        dtype = torch.float64 if case == "float64" else torch.bfloat16
        linear, x = linear.to(dtype), x.to(dtype)
    if case == "wrapped weight":  # a tensor subclass, as quantization libraries put in nn.Linear: MKL can't pack it
        from torch.testing._internal.two_tensor import TwoTensor

        weight = linear.weight.detach()
        linear.weight = torch.nn.Parameter(TwoTensor(weight, weight.clone()))
    if case == "inference weight":  # a model built under torch.inference_mode(): its weights have no version counter
        with torch.inference_mode():
            linear = PrepackedLinear(16, 24).eval()
    with torch.set_grad_enabled(case == "grad enabled"):
        out = linear(x)
    assert linear._packed is None
    torch.testing.assert_close(out, F.linear(x, linear.weight, linear.bias), check_dtype=False)
    if case == "grad enabled":
        out.sum().backward()
        assert linear.weight.grad is not None


@needs_mkl
def test_copies_pickles_train_and_moves_drop_the_packed_weights(batch):
    model = tiny_model()
    generate(model, batch, 2)
    assert all(module._packed is not None for module in prepackable(model).values())

    clone = copy.deepcopy(model)  # the packed copy is an opaque MKL buffer that cannot be copied or pickled
    assert all(module._packed is None for module in prepackable(clone).values())
    torch.save(model, io.BytesIO())
    torch.testing.assert_close(generate(clone, batch, 2).sequences, generate(model, batch, 2).sequences)

    model.to(torch.float64)
    assert all(module._packed is None for module in prepackable(model).values())
    model.to(torch.float32)
    generate(model, batch, 2)
    model.train()
    assert all(module._packed is None for module in prepackable(model).values())


def reorder_both(past_key_values, beam_idx):
    past_key_values.reorder_cache(beam_idx)
    return past_key_values


@pytest.fixture
def plain_generation(monkeypatch):
    """Switches to transformers' own beam bookkeeping: a copy of the encoder output per beam, every cache reordered."""

    def switch():
        cls = VanillaTransformerForConditionalGeneration
        monkeypatch.setattr(cls, "_expand_inputs_for_generation", GenerationMixin._expand_inputs_for_generation)
        monkeypatch.setattr(cls, "_reorder_cache", staticmethod(reorder_both))

    return switch


def test_beam_search_reorders_the_self_attention_cache_only(batch, monkeypatch, plain_generation):
    """The cross-attention cache holds the memory's keys/values, the same for all beams of a sentence, and beams are
    only chosen among a sentence's own: reordering it would copy it and change nothing."""
    model = tiny_model()
    reordered = []
    reorder = DynamicCache.reorder_cache
    monkeypatch.setattr(DynamicCache, "reorder_cache", lambda self, idx: reordered.append(self) or reorder(self, idx))

    ours = generate(model, batch, 3)
    assert reordered, "beam search reordered nothing"
    assert all(cache is not ours.past_key_values.cross_attention_cache for cache in reordered)

    plain_generation()
    reordered.clear()
    plain = generate(model, batch, 3)
    assert any(cache is plain.past_key_values.cross_attention_cache for cache in reordered)
    assert torch.equal(ours.sequences, plain.sequences)
    torch.testing.assert_close(ours.sequences_scores, plain.sequences_scores)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_beams_share_one_copy_of_the_encoder_output(batch, attention, plain_generation):
    model = tiny_model()
    model.set_attn_implementation(attention)
    projected = []
    for layer in model.model.decoder.layers:
        layer.encoder_attn.kv_proj.register_forward_hook(lambda module, args, out: projected.append(args[0].shape[0]))
    options = dict(output_attentions=True)

    ours = generate(model, batch, 3, **options)
    sources = batch["input_ids"].shape[0]
    assert projected == [sources] * len(model.model.decoder.layers)  # once per source, not once per beam
    assert ours.past_key_values.cross_attention_cache.layers[0].keys.shape[0] == sources

    plain_generation()
    plain = generate(model, batch, 3, **options)
    assert torch.equal(ours.sequences, plain.sequences)
    torch.testing.assert_close(ours.sequences_scores, plain.sequences_scores)
    for ours_step, plain_step in zip(ours.cross_attentions, plain.cross_attentions, strict=True):
        for ours_layer, plain_layer in zip(ours_step, plain_step, strict=True):
            assert ours_layer.shape == plain_layer.shape  # (sources x beams, heads, 1, source length)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_decoder_batch_that_is_a_multiple_of_the_sources_attends_to_its_own_source(batch, attention):
    """Rows i*k ... i*k+k-1 of the decoder batch attend to source i: the same as repeating each source k times."""
    model = tiny_model()
    model.set_attn_implementation(attention)
    encoder_outputs = model.model.encoder(batch["input_ids"], batch["attention_mask"])
    k = 3
    decoder_input_ids = torch.randint(3, 99, (2 * k, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        grouped = model(
            attention_mask=batch["attention_mask"],
            encoder_outputs=encoder_outputs,
            decoder_input_ids=decoder_input_ids,
            output_attentions=True,
        )
        repeated = model(
            attention_mask=batch["attention_mask"].repeat_interleave(k, 0),
            encoder_outputs=(encoder_outputs.last_hidden_state.repeat_interleave(k, 0),),
            decoder_input_ids=decoder_input_ids,
            output_attentions=True,
        )
    torch.testing.assert_close(grouped.logits, repeated.logits)
    if attention == "eager":
        for grouped_weights, repeated_weights in zip(grouped.cross_attentions, repeated.cross_attentions, strict=True):
            torch.testing.assert_close(grouped_weights, repeated_weights)
