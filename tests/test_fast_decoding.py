"""The CPU decoding fast paths: packed weights in decoding steps (MKL's on Intel, oneDNN's on other x86 CPUs), int8
weights after quantize_int8, and beam search that leaves the cross-attention cache as it is. Each must give what the
plain path gives; the speed is scripts/benchmark.py's."""

import copy
import dataclasses
import io

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config
from transformers import GenerationMixin
from transformers.cache_utils import DynamicCache

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer import packed_linear
from hf_vanilla_transformer.modeling_vanilla_transformer import CACHE_NAME
from hf_vanilla_transformer.packed_linear import MKL, ONEDNN, PrepackedLinear, choose_fp32_gemm, quantize_int8

HAS_MKL = torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
HAS_ONEDNN = torch.backends.mkldnn.is_available()
GEMMS = [
    pytest.param(MKL, marks=pytest.mark.skipif(not HAS_MKL, reason="this torch has no MKL packed GEMM"), id="mkl"),
    pytest.param(ONEDNN, marks=pytest.mark.skipif(not HAS_ONEDNN, reason="this torch has no oneDNN"), id="onednn"),
]
needs_int8 = pytest.mark.skipif(not packed_linear.INT8_AVAILABLE, reason="no fbgemm int8 kernels here")


@pytest.fixture(autouse=True)
def pack_every_size(monkeypatch):
    """Tiny models' weights are below `MIN_PACKED_WEIGHT`: here they are packed, to test the packed paths."""
    monkeypatch.setattr(packed_linear, "MIN_PACKED_WEIGHT", {})


@pytest.mark.skipif(not HAS_ONEDNN, reason="this torch has no oneDNN")
def test_onednn_packs_only_weights_large_enough_to_gain(monkeypatch, batch):
    """oneDNN's packed GEMM costs some 15 us a call more than sgemm: a d_model 64 model decoded 1.4x slower with
    every layer packed. Small weights take the plain path; large ones (the base model's, every one) are packed."""
    monkeypatch.setattr(packed_linear, "MIN_PACKED_WEIGHT", {"onednn": 100_000})
    monkeypatch.setattr(packed_linear, "FP32_GEMM", ONEDNN)
    model = tiny_model()
    generate(model, batch, num_beams=1)
    assert packed(model) == set()
    big = VanillaTransformerForConditionalGeneration(tiny_config(d_model=256, encoder_ffn_dim=512, decoder_ffn_dim=512,
                                                                 encoder_layers=1, decoder_layers=1)).eval()
    generate(big, batch, num_beams=1)
    large = {name for name, module in prepackable(big).items() if module.weight.numel() >= 100_000}
    assert packed(big) == large and "model.encoder.layers.0.ffn.fc1" in large
    assert "model.encoder.layers.0.self_attn.out_proj" not in large  # 256 x 256: plain


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return VanillaTransformerForConditionalGeneration(tiny_config()).eval()


def prepackable(model):
    return {name: module for name, module in model.named_modules() if isinstance(module, PrepackedLinear)}


def packed(model):
    return {name for name, module in prepackable(model).items() if module._packed is not None}


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


def counting(gemm, packings):
    """`gemm` that records each packing."""
    return dataclasses.replace(gemm, pack=lambda *args: packings.append(args) or gemm.pack(*args))


DECODING_STEP_LAYERS = {
    f"model.decoder.layers.{i}.{name}"
    for i in range(2)
    for name in ("self_attn.qkv_proj", "self_attn.out_proj", "encoder_attn.q_proj", "encoder_attn.out_proj",
                 "ffn.fc1", "ffn.fc2")
} | {"lm_head"}


def test_every_linear_layer_is_prepackable():
    model = tiny_model()
    linears = {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    assert set(prepackable(model)) == linears
    assert len(linears) == 2 * 4 + 2 * 7 + 1  # encoder layers, decoder layers (with cross K/V), output projection


@pytest.mark.parametrize(
    "machine, vendor, expected",
    [
        ("x86_64", "GenuineIntel", MKL if HAS_MKL else ONEDNN),  # measured fastest on Intel: MKL's packing
        ("x86_64", "AuthenticAMD", ONEDNN),  # MKL takes generic code paths on AMD: oneDNN's
        ("AMD64", "Intel64 Family 6 Model 85 Stepping 7, GenuineIntel", MKL if HAS_MKL else ONEDNN),  # Windows
        ("x86_64", "HygonGenuine", ONEDNN),
        ("aarch64", "", None),  # neither measured there: the plain path
        ("arm64", "", None),
    ],
)
def test_the_packed_gemm_is_chosen_by_the_cpu(machine, vendor, expected):
    if expected is ONEDNN and not HAS_ONEDNN:
        expected = None
    assert choose_fp32_gemm(machine, vendor) is expected


def test_without_onednn_other_vendors_take_the_plain_path(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert choose_fp32_gemm("x86_64", "AuthenticAMD") is None


def test_without_a_packed_gemm_nothing_is_packed(batch, monkeypatch):
    monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
    model = tiny_model()
    generate(model, batch, 2)
    assert not packed(model)


@pytest.mark.parametrize("gemm", GEMMS)
@pytest.mark.parametrize("num_beams", [1, 3])
def test_generate_packs_each_weight_once_and_matches_the_plain_path(batch, num_beams, gemm, monkeypatch):
    model = tiny_model()
    monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
    plain = generate(model, batch, num_beams)
    assert not packed(model)

    packings = []
    monkeypatch.setattr(packed_linear, "FP32_GEMM", counting(gemm, packings))
    fast = generate(model, batch, num_beams)

    # MKL's packed sgemm gives the plain path's results; oneDNN sums in another order: equal to float rounding
    assert torch.equal(fast.sequences, plain.sequences)
    for fast_scores, plain_scores in zip(fast.scores, plain.scores, strict=True):
        torch.testing.assert_close(fast_scores, plain_scores, rtol=1e-5, atol=1e-5)
    # MKL packs for decoding steps only (for a row count); oneDNN's packing serves whole sequences too
    expected = DECODING_STEP_LAYERS if gemm.per_row_count else set(prepackable(model))
    assert packed(model) == expected
    assert len(packings) == len(expected)  # once per weight, not once per step
    if gemm.per_row_count:
        rows = batch["input_ids"].shape[0] * num_beams
        assert all(rows_packed == rows for _, _, rows_packed in packings)

    generate(model, batch, num_beams)  # the next call with as many rows reuses them
    assert len(packings) == len(expected)


@pytest.mark.parametrize("gemm", GEMMS)
def test_a_packed_weight_follows_the_weight_and_the_row_count(gemm, monkeypatch):
    packings = []
    monkeypatch.setattr(packed_linear, "FP32_GEMM", counting(gemm, packings))
    torch.manual_seed(0)
    linear = PrepackedLinear(16, 24).eval()
    with torch.no_grad():
        for rows in (3, 5, 3):
            x = torch.randn(rows, 1, 16)
            torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))
        assert len(packings) == (3 if gemm.per_row_count else 1)  # MKL packs for a row count, oneDNN for any
        linear.weight.mul_(-2.0)  # an in-place change (an optimizer step, load_state_dict) is seen
        torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))
        linear.bias.add_(1.0)
        torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))
        linear.weight = torch.nn.Parameter(torch.randn(24, 16))  # so is a new tensor
        torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias))
        # a smaller new weight where the old one was, at the same version (as resize_token_embeddings' can be, for
        # the output projection, which has no bias)
        projection = PrepackedLinear(16, 24, bias=False).eval()
        projection(x)
        packed_version = projection.weight._version
        projection.weight = torch.nn.Parameter(projection.weight.data[:20])
        while projection.weight._version < packed_version:
            projection.weight.add_(0.0)
        assert projection.weight.data_ptr() == projection._packed[0][2][0]
        projection.forget_packed_if_edited()  # the model's check before new input: no stale sample positions
        torch.testing.assert_close(projection(x), F.linear(x, projection.weight))


@pytest.mark.parametrize("gemm", GEMMS)
def test_weights_edited_through_data_are_used_by_the_next_call(batch, gemm, monkeypatch):
    """`weight.data += delta` (PEFT's LoRA merge, some EMA code) bumps no version counter: the next generate() or
    forward still sees the edit, as nn.Linear would."""
    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    model = tiny_model()
    generate(model, batch, 2)
    assert packed(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data.mul_(-0.5)
    edited = generate(model, batch, 2)
    monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
    expected = generate(copy.deepcopy(model), batch, 2)
    assert torch.equal(edited.sequences, expected.sequences)
    for edited_scores, expected_scores in zip(edited.scores, expected.scores, strict=True):
        torch.testing.assert_close(edited_scores, expected_scores, rtol=1e-5, atol=1e-5)

    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    step = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                decoder_input_ids=torch.ones_like(batch["input_ids"][:, :1]))  # a decoding step: packed by both
    with torch.no_grad():
        model(**step)
        model.lm_head.weight.data.add_(0.25)  # the tied embedding, the output projection's weight
        model.model.decoder.layers[0].ffn.fc2.bias.data.zero_()
        logits = model(**step).logits
        monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
        torch.testing.assert_close(logits, model(**step).logits, rtol=1e-5, atol=1e-5)

    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)  # a smaller new weight after packing: no stale positions
    vocab = model.config.vocab_size
    with torch.no_grad():
        model(**step)
        model.resize_token_embeddings(vocab - 3)
        assert model(**{**step, "input_ids": step["input_ids"].clamp(max=vocab - 4)}).logits.shape[-1] == vocab - 3


@pytest.mark.parametrize("gemm", GEMMS)
def test_weights_edited_through_data_are_used_by_a_decoding_loop_on_a_given_encoder_output(batch, gemm, monkeypatch):
    """A hand-written decoding loop: the encoder run once (`model.get_encoder()`), then forwards given its output,
    one position at a time with a cache. A decoder weight, or the output projection's, edited through `.data`
    between two such decodings is used from the next decoding's first position on (the packed copies kept the old
    weights: only generate() and forwards that ran the encoder looked)."""
    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    model = tiny_model()
    sources = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    start = torch.full_like(batch["input_ids"][:, :1], model.config.decoder_start_token_id)

    def decode(steps=3):
        with torch.no_grad():
            encoder_outputs, cache, ids, logits = model.get_encoder()(**sources), None, start, []
            for _ in range(steps):
                output = model(encoder_outputs=encoder_outputs, attention_mask=sources["attention_mask"],
                               decoder_input_ids=ids[:, -1:], cache=cache, use_cache=True)
                cache = getattr(output, CACHE_NAME)
                logits.append(output.logits[:, -1])
                ids = torch.cat([ids, output.logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            return torch.stack(logits, 1)

    decode()
    assert packed(model)
    with torch.no_grad():
        model.model.decoder.layers[0].ffn.fc2.weight.data[:, :5] = 0
        model.lm_head.weight.data[7] += 0.5
    edited = decode()
    monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
    torch.testing.assert_close(edited, decode(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("edit", ["ablate", "permute"])
@pytest.mark.parametrize("gemm", GEMMS)
def test_units_ablated_or_permuted_through_data_are_used_by_the_next_call(batch, gemm, edit, monkeypatch):
    """An ablation study's edit: a few FFN units zeroed (`fc2.weight.data[:, units] = 0`) or moved within the rows,
    in every layer, after a generate() call. The 64 entries the packed copies used to compare (here in 2 of fc2's
    256 columns) missed them, and the next calls decoded with the old weights."""
    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(encoder_ffn_dim=256, decoder_ffn_dim=256)).eval()
    before = generate(model, batch, 1)
    assert packed(model)
    with torch.no_grad():
        for layer in [*model.model.encoder.layers, *model.model.decoder.layers]:
            weight = layer.ffn.fc2.weight.data
            if edit == "ablate":
                weight[:, [3, 10, 17]] = 0
            else:
                weight[:] = weight[:, torch.randperm(weight.shape[1], generator=torch.Generator().manual_seed(0))]
    edited = generate(model, batch, 1)
    monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
    expected = generate(copy.deepcopy(model), batch, 1)
    assert not torch.allclose(before.scores[0], expected.scores[0])  # the edit matters
    assert torch.equal(edited.sequences, expected.sequences)
    for edited_scores, expected_scores in zip(edited.scores, expected.scores, strict=True):
        torch.testing.assert_close(edited_scores, expected_scores, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gemm", GEMMS)
def test_one_token_row_edited_through_data_is_used_by_the_next_call(batch, gemm, monkeypatch):
    """Setting one token's embedding row through `.data` (a new token's vector) after a generate() call: the next
    call decodes with it, though none of the 64 entries spread over the weight lies in that row."""
    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    model = tiny_model()
    before = generate(model, batch, 1).sequences
    weight = model.lm_head.weight
    rows, columns = weight.shape
    spread = set((torch.linspace(0, weight.numel() - 1, 64).long() // columns).tolist())
    token = next(row for row in range(rows - 1, 0, -1) if row not in spread and row not in before)
    weight.data[token] = weight.data[before[0, 1]] * 3  # outscores the first token chosen: it comes out now
    edited = generate(model, batch, 1).sequences
    monkeypatch.setattr(packed_linear, "FP32_GEMM", None)
    assert torch.equal(edited, generate(model, batch, 1).sequences)
    assert (edited == token).any()


@pytest.mark.parametrize("int8", [False, pytest.param(True, marks=needs_int8)], ids=["fp32", "int8"])
@pytest.mark.parametrize(
    "case",
    ["grad enabled", "training", "several positions", "float64", "bfloat16", "wrapped weight", "inference weight",
     "empty"],
)
def test_everything_but_cpu_fp32_no_grad_inference_takes_the_plain_path(case, int8, monkeypatch):
    if case == "several positions" and (int8 or not HAS_MKL):
        pytest.skip("only MKL's packing (for one row count) is for decoding steps alone")
    gemm = MKL if case == "several positions" else ONEDNN if HAS_ONEDNN else MKL
    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    torch.manual_seed(0)
    linear = PrepackedLinear(16, 24).train(case == "training")
    linear.int8 = int8
    x = torch.randn(0 if case == "empty" else 3, 4 if case == "several positions" else 1, 16)
    if case in ("float64", "bfloat16"):
        dtype = torch.float64 if case == "float64" else torch.bfloat16
        linear, x = linear.to(dtype), x.to(dtype)
    if case == "wrapped weight":  # a tensor subclass, as quantization libraries put in nn.Linear: it can't be packed
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


@pytest.mark.parametrize("gemm", GEMMS)
def test_copies_pickles_train_and_moves_drop_the_packed_weights(batch, gemm, monkeypatch):
    monkeypatch.setattr(packed_linear, "FP32_GEMM", gemm)
    model = tiny_model()
    generate(model, batch, 2)
    assert packed(model) == (DECODING_STEP_LAYERS if gemm.per_row_count else set(prepackable(model)))

    clone = copy.deepcopy(model)  # the packed copy is an opaque buffer that cannot be copied or pickled
    assert not packed(clone)
    torch.save(model, io.BytesIO())
    torch.testing.assert_close(generate(clone, batch, 2).sequences, generate(model, batch, 2).sequences)

    model.to(torch.float64)
    assert not packed(model)
    model.to(torch.float32)
    generate(model, batch, 2)
    model.train()
    assert not packed(model)


@needs_int8
def test_int8_quantizes_every_linear_layer_and_stays_close_to_fp32(batch):
    model = tiny_model()
    with torch.no_grad():
        fp32 = model(**batch).logits
        quantize_int8(model)
        int8 = model(**batch).logits  # a whole-sequence forward: every layer, not only decoding steps
    assert packed(model) == set(prepackable(model))
    assert all(module._packed[0][0] == "int8" for module in prepackable(model).values())
    assert not torch.equal(int8, fp32)
    assert (int8 - fp32).norm() / fp32.norm() < 0.05
    assert generate(model, batch, 3).sequences.shape == generate(tiny_model(), batch, 3).sequences.shape

    with torch.no_grad():
        assert torch.equal(quantize_int8(model, enabled=False)(**batch).logits, fp32)  # back to fp32


def test_autocast_on_the_cpu_computes_in_its_dtype(batch):
    """Under torch.autocast("cpu", torch.bfloat16) in inference the packed fp32 GEMMs ran instead, in float32:
    MarianMTModel's linear layers give bfloat16 there, as ours do with grad enabled."""
    model = tiny_model()
    dtypes = []
    fc1 = model.model.decoder.layers[0].ffn.fc1
    fc1.register_forward_hook(lambda module, args, output: dtypes.append(output.dtype))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        generate(model, batch, 2)
    assert set(dtypes) == {torch.bfloat16} and not packed(model)


@needs_int8
def test_int8_of_a_model_in_bfloat16_is_refused_with_the_fix(batch):
    """A model saved in bf16 loads in bf16 (dtype="auto"): quantize_int8 set its flag, and the fp32-only packed path
    left the model as it was, without a word; translate.py --quantize int8 loads such a model in fp32."""
    model = tiny_model().to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"packs float32 weights, and the model's are torch.bfloat16.*\.float\(\)"):
        quantize_int8(model)
    quantize_int8(model.float())
    generate(model, batch, 2)
    assert all(module._packed[0][0] == "int8" for module in prepackable(model).values() if module._packed)


@needs_int8
def test_int8_keeps_the_tied_fp32_weights_for_saving_and_training(batch, tmp_path):
    model = quantize_int8(tiny_model())
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    generate(model, batch, 2)
    assert model.lm_head.weight is model.model.shared.weight  # still tied
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, state[name]), name  # the fp32 model, as it was
    assert loaded.lm_head.weight is loaded.model.shared.weight

    model.train()
    model(**batch).loss.backward()  # training takes the fp32 path, with gradients
    assert model.lm_head.weight.grad is not None and not packed(model)


def test_an_untied_output_projection_made_anew_by_resizing_keeps_the_packed_path(batch):
    """`resize_token_embeddings` makes an untied model's new output projection a plain `nn.Linear`; the model keeps
    it a `PrepackedLinear`, so that int8 and the packed fp32 path cover it as they cover one loaded from a file."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(tie_word_embeddings=False, output_bias=True)).eval()
    model.resize_token_embeddings(model.config.vocab_size + 8, mean_resizing=False)
    head = model.get_output_embeddings()
    assert type(head) is PrepackedLinear and head.weight.shape == (model.config.vocab_size, model.config.d_model)
    assert head.bias is not None and head.bias.shape == (model.config.vocab_size,)
    assert head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()  # still untied
    with torch.no_grad():
        fp32 = model(**batch).logits
        assert quantize_int8(model).lm_head.int8
        torch.testing.assert_close(model(**batch).logits, fp32, rtol=0.05, atol=0.05)


def test_int8_refuses_what_it_cannot_do(monkeypatch):
    with pytest.raises(ValueError, match="no PrepackedLinear layers"):
        quantize_int8(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    monkeypatch.setattr(packed_linear, "INT8_AVAILABLE", False)
    with pytest.raises(RuntimeError, match="fbgemm"):
        quantize_int8(tiny_model())


def reorder_both(cache, beam_idx):
    cache.reorder_cache(beam_idx)
    return cache


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
    assert all(cache is not getattr(ours, CACHE_NAME).cross_attention_cache for cache in reordered)

    plain_generation()
    reordered.clear()
    plain = generate(model, batch, 3)
    assert any(cache is getattr(plain, CACHE_NAME).cross_attention_cache for cache in reordered)
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
    assert getattr(ours, CACHE_NAME).cross_attention_cache.layers[0].keys.shape[0] == sources

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
