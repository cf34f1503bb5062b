"""The model against the paper: configuration, encodings, tying, attention, residual blocks, generation, saving."""

import json
import logging
import math
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config
from safetensors import safe_open
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, GenerationConfig

from hf_vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
)
from hf_vanilla_transformer.modeling_vanilla_transformer import (
    CACHE_NAME,
    VanillaTransformerResidualLayer,
    sinusoidal_encoding,
)


def make_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return VanillaTransformerForConditionalGeneration(tiny_config(**overrides)).eval()


def count_parameters(config):
    with torch.device("meta"):
        model = VanillaTransformerForConditionalGeneration(config)
    return sum(p.numel() for p in model.parameters())  # tied weights are counted once


# --- configuration ---------------------------------------------------------------------------------------------


def test_defaults_are_the_paper_base_model():
    config = VanillaTransformerConfig()
    assert (config.encoder_layers, config.decoder_layers) == (6, 6)
    assert (config.d_model, config.encoder_attention_heads, config.decoder_attention_heads) == (512, 8, 8)
    assert (config.encoder_ffn_dim, config.decoder_ffn_dim) == (2048, 2048)
    assert config.dropout == 0.1 and config.activation_function == "relu" and config.vocab_size == 37000
    assert config.scale_embedding and config.tie_word_embeddings and not config.normalize_before
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers) == (512, 8, 6)


def test_big_preset():
    config = VanillaTransformerConfig.big()
    assert (config.d_model, config.encoder_attention_heads, config.encoder_ffn_dim, config.dropout) == (
        1024,
        16,
        4096,
        0.3,
    )
    assert VanillaTransformerConfig.big(dropout=0.1).dropout == 0.1


@pytest.mark.parametrize("preset, paper_millions", [("base", 65), ("big", 213)])
def test_parameter_counts_match_table_3(preset, paper_millions):
    count = count_parameters(getattr(VanillaTransformerConfig, preset)())
    assert abs(count / 1e6 - paper_millions) / paper_millions < 0.04, count


def test_auto_classes_are_registered():
    sizes = {k: v for k, v in tiny_config().to_diff_dict().items() if k != "model_type"}
    config = AutoConfig.for_model("vanilla_transformer", **sizes)
    assert isinstance(config, VanillaTransformerConfig)
    assert type(AutoModel.from_config(config)) is VanillaTransformerModel
    assert type(AutoModelForSeq2SeqLM.from_config(config)) is VanillaTransformerForConditionalGeneration


# --- position encodings ------------------------------------------------------------------------------------------


def paper_encoding(position, i, d_model):
    """Section 3.5, one entry at a time."""
    angle = position / 10000 ** (2 * (i // 2) / d_model)
    return math.sin(angle) if i % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [16, 15])
def test_sinusoidal_encoding_is_the_paper_formula(d_model):
    table = sinusoidal_encoding(torch.arange(50), d_model)
    expected = torch.tensor([[paper_encoding(p, i, d_model) for i in range(d_model)] for p in range(50)])
    torch.testing.assert_close(table, expected, atol=1e-5, rtol=0)


def test_torch_export_keeps_batch_and_lengths_dynamic_with_a_padding_mask():
    """torch.export (non-strict) of the forward with a padding mask and dynamic batch and lengths, as MarianMTModel
    exports: the encodings of positions counted from the mask read no size (a `len()` fixed batch x length)."""
    model = make_model().eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, decoder_input_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              decoder_input_ids=decoder_input_ids, use_cache=False).logits

    ids = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    # decoder inputs without a mask take the encodings from the table, up to max_position_embeddings
    batch, source = torch.export.Dim("batch", max=64), torch.export.Dim("source")
    target = torch.export.Dim("target", max=model.config.max_position_embeddings)
    exported = torch.export.export(
        Logits(), (ids, (ids != 0).long(), torch.tensor([[1, 5, 6], [1, 7, 8]])),
        dynamic_shapes=({0: batch, 1: source}, {0: batch, 1: source}, {0: batch, 1: target}),
    )
    other = torch.tensor([[5, 6, 7, 8, 9, 2], [8, 2, 0, 0, 0, 0], [4, 4, 2, 0, 0, 0]])
    inputs = (other, (other != 0).long(), torch.tensor([[1, 5], [1, 7], [1, 9]]))
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(*inputs), Logits()(*inputs))


def test_no_learned_position_parameters():
    model = make_model()
    assert not [name for name, _ in model.named_parameters() if "position" in name]
    assert not [name for name in model.state_dict() if "position" in name]


def test_inputs_longer_than_max_position_embeddings():
    model = make_model(max_position_embeddings=8)
    encoding = model.model.encoder.embed_positions(20, offset=5)
    expected = torch.tensor([[paper_encoding(p, i, 32) for i in range(32)] for p in range(5, 25)])
    torch.testing.assert_close(encoding, expected, atol=1e-5, rtol=0)
    ids = torch.randint(3, 99, (1, 30))
    out = model(input_ids=ids, decoder_input_ids=ids)
    assert out.logits.shape == (1, 30, 99) and torch.isfinite(out.logits).all()


def test_generating_past_max_position_embeddings_gives_no_warning(caplog):
    """transformers warns that an output longer than `max_position_embeddings` may fail; these encodings do not."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.get_logger("x").warning_once.cache_clear()  # the warning is logged once per process
    model = make_model(max_position_embeddings=8)
    model.generation_config.eos_token_id = None
    with caplog.at_level(logging.WARNING):
        transformers_logging.enable_propagation()
        try:
            out = model.generate(torch.randint(3, 99, (1, 5)), num_beams=1, max_new_tokens=12)
        finally:
            transformers_logging.disable_propagation()
    assert out.shape[1] == 13 and not [r for r in caplog.records if "predefined maximum length" in r.getMessage()]


def test_cached_decoding_uses_the_position_offset(batch):
    model = make_model()
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    full = model(batch["input_ids"], batch["attention_mask"], decoder_input_ids=decoder_input_ids).logits
    encoder_outputs = model.get_encoder()(batch["input_ids"], batch["attention_mask"])
    cache, steps = None, []
    for t in range(decoder_input_ids.shape[1]):
        out = model(
            attention_mask=batch["attention_mask"],
            encoder_outputs=encoder_outputs,
            decoder_input_ids=decoder_input_ids[:, t : t + 1],
            cache=cache,
            use_cache=True,
        )
        cache = getattr(out, CACHE_NAME)
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_the_cache_is_taken_by_either_name(batch):
    """transformers 5.24 renamed `past_key_values` to `cache`; its generate() passes `cache`, earlier releases' and
    code written for them `past_key_values`. Either name continues a decoding; given both, `cache` is taken."""
    model = make_model()
    sources = dict(attention_mask=batch["attention_mask"],
                   encoder_outputs=model.get_encoder()(batch["input_ids"], batch["attention_mask"]))
    first, second = batch["labels"][:, :2], batch["labels"][:, 2:3]
    logits = []
    for name in ("cache", "past_key_values"):
        cache = getattr(model(**sources, decoder_input_ids=first, use_cache=True), CACHE_NAME)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logits.append(model(**sources, decoder_input_ids=second, use_cache=True, **{name: cache}).logits)
        deprecated = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
        assert len(deprecated) == (name == "past_key_values" and CACHE_NAME == "cache")
    full = model(**sources, decoder_input_ids=batch["labels"][:, :3]).logits[:, 2:3]
    torch.testing.assert_close(logits[0], full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[1], full, atol=1e-5, rtol=1e-5)
    with pytest.warns(FutureWarning, match="Both `past_key_values` and `cache` are set"):
        both = model(**sources, decoder_input_ids=second, use_cache=True, cache=cache, past_key_values=object())
    assert getattr(both, CACHE_NAME) is cache  # as transformers' models: the old name is dropped


def test_position_ids_are_refused_in_one_line(batch):
    """`position_ids=` failed with "got multiple values for keyword argument 'position_ids'" after the decoder's whole
    repr (1.6 KB), in forward and in generate()."""
    model = make_model()
    positions = torch.arange(batch["input_ids"].shape[1])[None]
    for call in (lambda: model(**batch, position_ids=positions),
                 lambda: model.generate(batch["input_ids"], position_ids=positions, max_new_tokens=2)):
        with pytest.raises(ValueError, match=r"^`position_ids` is not an input of this model: its encoder numbers the "
                                             r"source's positions from 0 itself, and the decoder's are "
                                             r"`decoder_position_ids` \(batch, target length\)\.$"):
            call()
    assert model(**batch, position_ids=None).logits.isfinite().all()  # None, as code passing every input gives it


# --- embeddings --------------------------------------------------------------------------------------------------


def test_one_embedding_matrix_in_memory_and_on_disk(tmp_path):
    model = make_model()
    shared = model.model.shared.weight
    for weight in (model.model.encoder.embed_tokens.weight, model.model.decoder.embed_tokens.weight):
        assert weight is shared
    assert model.lm_head.weight is shared
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        vocab_sized = [k for k in f.keys() if f.get_slice(k).get_shape() == [99, 32]]
    assert vocab_sized == ["model.shared.weight"]
    reloaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    assert reloaded.lm_head.weight is reloaded.model.shared.weight
    assert reloaded.model.encoder.embed_tokens.weight is reloaded.model.shared.weight


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = make_model(dropout=0.0)
    ids = torch.tensor([[5, 6, 7]])
    expected = model.model.shared(ids) * math.sqrt(32) + sinusoidal_encoding(torch.arange(3), 32)
    torch.testing.assert_close(model.model.encoder.embed(ids, None), expected)


def test_untied_output_projection(tmp_path):
    model = make_model(tie_word_embeddings=False)
    assert model.lm_head.weight is not model.model.shared.weight
    assert model.model.encoder.embed_tokens.weight is model.model.shared.weight  # the vocabulary stays shared
    with torch.no_grad():
        model.lm_head.weight.mul_(2)
    model.save_pretrained(tmp_path)
    reloaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    torch.testing.assert_close(reloaded.lm_head.weight, model.lm_head.weight)
    torch.testing.assert_close(reloaded.model.shared.weight, model.model.shared.weight)
    assert reloaded.model.decoder.embed_tokens.weight is reloaded.model.shared.weight


# --- attention and residual blocks ---------------------------------------------------------------------------------


def test_eager_and_sdpa_agree(batch):
    eager = make_model(attn_implementation="eager")
    sdpa = make_model(attn_implementation="sdpa")
    assert eager.config._attn_implementation == "eager" and sdpa.config._attn_implementation == "sdpa"
    torch.testing.assert_close(eager(**batch).logits, sdpa(**batch).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["flash_attention_2", "flash_attention_3", "kernels-community/flash-attn2"])
def test_flash_attention_is_refused_with_the_reason(name, tmp_path):
    """transformers' flash attention unpads the queries by the key mask: in cross-attention, a padded source drops
    target rows (in training, and every beam but the first of a grouped beam search), without an error. transformers'
    own refusal asked to "request support" on a Hub page made of the local folder's path."""
    reason = (f'does not run attn_implementation="{name}": transformers\' flash path unpads the queries by the '
              "source's padding mask, which drops cross-attention's target rows where a source is padded. Use "
              '"sdpa" (the default), "eager" or "flex_attention".')
    model = make_model()
    model.save_pretrained(tmp_path)
    new = VanillaTransformerForConditionalGeneration._from_config
    for make in (lambda: new(tiny_config(), attn_implementation=name),
                 lambda: AutoModelForSeq2SeqLM.from_pretrained(tmp_path, attn_implementation=name),
                 lambda: model.set_attn_implementation(name)):
        with pytest.raises(ValueError) as error:
            make()
        assert str(error.value).endswith(reason) and "huggingface.co" not in str(error.value)
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_padding_is_masked(batch, attn_implementation):
    model = make_model(attn_implementation=attn_implementation)
    changed = batch["input_ids"].clone()
    changed[1, 6:] = 42  # different tokens under the padding
    a = model(**batch).logits
    b = model(**{**batch, "input_ids": changed}).logits
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_decoder_is_causal(batch, attn_implementation):
    model = make_model(attn_implementation=attn_implementation)
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    changed = decoder_input_ids.clone()
    changed[:, 4:] = 17
    a = model(batch["input_ids"], batch["attention_mask"], decoder_input_ids=decoder_input_ids).logits
    b = model(batch["input_ids"], batch["attention_mask"], decoder_input_ids=changed).logits
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_all_padding_source_row_is_finite(batch, attn_implementation):
    model = make_model(attn_implementation=attn_implementation)
    batch["attention_mask"][1] = 0
    out = model(**batch)
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)


def reference_attention(attn, x, memory=None, causal=False):
    """Multi-head attention [3.2.2] from the module's weights with torch's own scaled_dot_product_attention."""
    d, h = x.shape[-1], attn.num_heads
    if memory is None:
        wq, wk, wv = attn.qkv_proj.weight.split(d)
        bq, bk, bv = attn.qkv_proj.bias.split(d)
        memory = x
    else:
        wq, bq = attn.q_proj.weight, attn.q_proj.bias
        wk, wv = attn.kv_proj.weight.split(d)
        bk, bv = attn.kv_proj.bias.split(d)

    def heads(t):
        return t.view(t.shape[0], t.shape[1], h, d // h).transpose(1, 2)

    q, k, v = heads(F.linear(x, wq, bq)), heads(F.linear(memory, wk, bk)), heads(F.linear(memory, wv, bv))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2).reshape(x.shape)
    return attn.out_proj(out)


@pytest.mark.parametrize("normalize_before", [False, True])
def test_residual_blocks_follow_the_formula(normalize_before):
    model = make_model(dropout=0.0, normalize_before=normalize_before, encoder_layers=1, decoder_layers=1)
    enc, dec = model.model.encoder, model.model.decoder
    src, tgt = torch.randint(3, 99, (2, 6)), torch.randint(3, 99, (2, 5))

    def block(x, norm, sublayer):
        return x + sublayer(norm(x)) if normalize_before else norm(x + sublayer(x))

    layer = enc.layers[0]
    x = enc.embed(src, None)
    x = block(x, layer.self_attn_layer_norm, lambda t: reference_attention(layer.self_attn, t))
    x = block(x, layer.final_layer_norm, layer.ffn)
    memory = enc.layer_norm(x) if normalize_before else x
    assert (enc.layer_norm is not None) == normalize_before and (dec.layer_norm is not None) == normalize_before

    layer = dec.layers[0]
    y = dec.embed(tgt, None)
    y = block(y, layer.self_attn_layer_norm, lambda t: reference_attention(layer.self_attn, t, causal=True))
    y = block(y, layer.encoder_attn_layer_norm, lambda t: reference_attention(layer.encoder_attn, t, memory))
    y = block(y, layer.final_layer_norm, layer.ffn)
    if normalize_before:
        y = dec.layer_norm(y)
    out = model(input_ids=src, decoder_input_ids=tgt)
    torch.testing.assert_close(out.encoder_last_hidden_state, memory, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.logits, F.linear(y, model.model.shared.weight), atol=1e-5, rtol=1e-5)


def test_a_hook_on_the_input_embeddings_sees_the_forward(batch):
    """transformers' NEFTune (Trainer's --neftune_noise_alpha) adds noise through a hook on get_input_embeddings(),
    which was `shared`, a module no forward called (the stacks embed with modules of their own holding its weight):
    the plain Seq2SeqTrainer trained without noise. It is the encoder's, as MarianMTModel's."""
    from transformers.integrations.neftune import activate_neftune, deactivate_neftune

    model = make_model(dropout=0.0).train()
    plain = model(**batch).loss
    handle = activate_neftune(model, 50.0)
    assert model(**batch).loss != plain
    deactivate_neftune(model, handle)
    assert model(**batch).loss == plain
    assert model.get_input_embeddings().weight is model.model.shared.weight is model.lm_head.weight


def test_gradient_checkpointing_gives_the_same_gradients(batch):
    def gradients(checkpointing):
        model = make_model(dropout=0.0).train()
        if checkpointing:
            model.activation_checkpointing_enable()
        model(**batch).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    plain, checkpointed = gradients(False), gradients(True)
    for name in plain:
        torch.testing.assert_close(plain[name], checkpointed[name], msg=name)


def test_gradient_checkpointing_in_training_returns_no_cache(batch):
    """As MarianMTModel: the checkpointed layers fill no cache, so none is returned (it was an empty one, whose
    length 0 would have numbered the next positions from the start)."""
    model = make_model().train()
    model.activation_checkpointing_enable()
    sources = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    assert getattr(model(**sources, decoder_input_ids=batch["labels"][:, :2], use_cache=True), CACHE_NAME) is None
    model.eval()
    assert getattr(model(**sources, decoder_input_ids=batch["labels"][:, :2], use_cache=True), CACHE_NAME) is not None
    model.train()  # without gradients no layer is checkpointed, and the cache is filled, as transformers' layers do
    with torch.no_grad():
        cache = getattr(model(**sources, decoder_input_ids=batch["labels"][:, :2], use_cache=True), CACHE_NAME)
    assert cache is not None and cache.get_seq_length() == 2


def test_loss_ignores_minus_100_labels(batch):
    model = make_model()
    labels = batch["labels"].clone()
    labels[0, 3:] = -100
    out = model(batch["input_ids"], batch["attention_mask"], labels=labels)
    logits = out.logits.flatten(0, 1)
    torch.testing.assert_close(out.loss, F.cross_entropy(logits, labels.flatten(), ignore_index=-100))
    labels[:] = -100
    assert model(batch["input_ids"], batch["attention_mask"], labels=labels).loss.item() == 0.0


# --- generation ----------------------------------------------------------------------------------------------------


def test_default_generation_config_is_the_paper_decoding():
    config = make_model().generation_config
    assert config.num_beams == 4 and config.length_penalty == 0.6 and config.early_stopping is True


def test_default_length_limit_is_source_length_plus_50(batch):
    model = make_model()
    model.generation_config.eos_token_id = None  # never stop early
    out = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=1)
    assert out.shape[1] == 1 + batch["input_ids"].shape[1] + 50


def test_the_length_limit_holds_for_a_given_generation_config_without_a_warning(batch, monkeypatch):
    """generate(generation_config=GenerationConfig(...)) gets source length + 50 too, on a copy of the config (a
    length added to the call's arguments beside it was transformers' deprecation warning)."""
    import transformers.generation.utils
    from transformers import GenerationConfig

    warnings = []
    monkeypatch.setattr(transformers.generation.utils.logger, "warning_once", warnings.append)
    model = make_model()
    config = GenerationConfig(num_beams=1, eos_token_id=None)  # never stop early
    out = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], generation_config=config)
    assert out.shape[1] == 1 + batch["input_ids"].shape[1] + 50
    assert config.max_new_tokens is None  # the caller's config is as it was
    assert not [message for message in warnings if "generation_config" in message], warnings


def test_a_given_generation_config_keeps_the_models_length_limit(batch):
    """transformers fills a given config's unset fields from the model's: a saved max_new_tokens holds with it (the
    default source length + 50 was put in its place)."""
    from transformers import GenerationConfig

    model = make_model()
    model.generation_config.eos_token_id = None  # never stop early
    model.generation_config.max_new_tokens = 6
    out = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"],
                         generation_config=GenerationConfig(num_beams=1))
    assert out.shape[1] == 1 + 6


def test_a_prompt_holding_the_end_token_is_kept(batch):
    """A decoder prompt with an end token in it (a previous sentence as context, then `</s>`): everything after that
    end token, the rest of the prompt and the translation, came back as padding; the padding after the end begins
    after the prompt."""
    model = make_model()
    eos = model.config.eos_token_id
    prompt = torch.tensor([[model.config.decoder_start_token_id, 5, eos, 6]]).expand(2, -1)
    sources = dict(input_ids=batch["input_ids"][:2], attention_mask=batch["attention_mask"][:2])
    for beams in (1, 3):
        out = model.generate(**sources, decoder_input_ids=prompt, num_beams=beams, max_new_tokens=4, min_new_tokens=4)
        assert torch.equal(out[:, :4], prompt) and out.shape[1] == 8
        assert (out[:, 4] != model.config.pad_token_id).all()  # at least one new token: min_new_tokens
        # ending with the end token, without the start token, which transformers puts in front
        context = torch.tensor([[5, 6, eos]]).expand(2, -1)
        out = model.generate(**sources, decoder_input_ids=context, num_beams=beams, max_new_tokens=4,
                             min_new_tokens=4)
        assert torch.equal(out[:, 1:4], context) and (out[:, 4] != model.config.pad_token_id).all()


@pytest.mark.parametrize("num_beams", [1, 3])
@pytest.mark.parametrize("turned_off_in", ["call", "model_config"])
def test_an_end_token_turned_off_leaves_every_generated_token(batch, num_beams, turned_off_in):
    """`generate(eos_token_id=None)` (or None in the model's generation config) turns the end token off, and
    transformers goes on past it: the end tokens generated came back as padding after the first one, with the rest of
    each translation, since the padding after the end fell back to config.json's end token."""
    model = make_model(output_bias=True, tie_word_embeddings=False)
    with torch.no_grad():
        model.lm_head.bias[2] = 100.0  # the end token, at every step
    call = {"eos_token_id": None} if turned_off_in == "call" else {}
    if turned_off_in == "model_config":
        model.generation_config.eos_token_id = None
    out = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=num_beams,
                         max_new_tokens=5, **call)
    assert out[:, 1:].tolist() == [[2] * 5, [2] * 5]


def test_input_ids_given_as_none_beside_embeddings_keep_the_default_length_limit(batch):
    """`generate(input_ids=None, inputs_embeds=...)`, as wrapper code passes both, ended at transformers' placeholder
    max_length=20: the source length was looked up under `input_ids` alone."""
    model = make_model()
    model.generation_config.eos_token_id = None  # never stop early
    embeds = model.get_input_embeddings()(batch["input_ids"])
    out = model.generate(input_ids=None, inputs_embeds=embeds, attention_mask=batch["attention_mask"], num_beams=1)
    assert out.shape[1] == 1 + batch["input_ids"].shape[1] + 50


def test_the_dummy_inputs_run_a_forward(batch):
    """`model(**model.dummy_inputs)`, which tools call to trace or summarise a model, runs as MarianMTModel's does:
    PreTrainedModel's dummy inputs have no decoder inputs."""
    for vocab_size in (99, 5):
        model = make_model(vocab_size=vocab_size)
        logits = model(**model.dummy_inputs).logits
        assert logits.shape[0] == 2 and logits.shape[-1] == vocab_size and torch.isfinite(logits).all()


@pytest.mark.parametrize("encoder_layers, decoder_layers", [(2, 3), (3, 2)])
def test_a_hidden_state_chosen_by_index_counts_in_its_own_stack(batch, encoder_layers, decoder_layers):
    """`output_hidden_states=-1` gave the decoder's hidden state at the encoder's depth (and None at its last) where
    the stacks differ in depth: negative indices were counted with config.num_hidden_layers, the encoder's."""
    model = make_model(encoder_layers=encoder_layers, decoder_layers=decoder_layers)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "labels": batch["labels"]}
    every = model(**inputs, output_hidden_states=True)
    last = model(**inputs, output_hidden_states=-1)
    for name in ("encoder_hidden_states", "decoder_hidden_states"):
        assert torch.equal(getattr(last, name)[-1], getattr(every, name)[-1]), name


def test_printing_the_model_shows_what_its_modules_do_by_functions():
    """`print(model)` showed no head count, dropout, residual order or position table, and a pre-LN stack's final
    LayerNorm above its layers, with no word that it runs after them."""
    text = str(make_model(normalize_before=True))
    for shown in ("embeddings scaled by 5.65685, dropout=0.1, layer_norm after the last layer",
                  "sinusoidal, d_model=32, a table of 64 positions, computed beyond",
                  "pre-LN: x + Dropout(Sublayer(LayerNorm(x))), dropout=0.1",
                  "causal self-attention, heads=4, head_dim=8", "cross-attention, heads=4"):
        assert shown in text, shown
    assert "post-LN: LayerNorm(x + Dropout(Sublayer(x)))" in str(make_model())
    assert "activation_dropout=0.2" in str(make_model(activation_dropout=0.2))  # the one dropout it did not show


def test_the_calls_pad_token_id_masks_the_sources(batch):
    """Without an attention_mask, the padding a source mask is inferred from is the call's `pad_token_id`, as
    transformers pads with it; it was the generation config's."""
    model = make_model()
    ids, mask = batch["input_ids"].clone(), batch["attention_mask"]
    ids[mask == 0] = 7  # padded with another id, given in the call
    options = dict(pad_token_id=7, num_beams=1, max_new_tokens=5, output_scores=True, return_dict_in_generate=True)
    expected = model.generate(ids, attention_mask=mask, **options)
    inferred = model.generate(ids, **options)
    assert torch.equal(inferred.sequences, expected.sequences)
    torch.testing.assert_close(inferred.scores, expected.scores)


def test_unset_beam_settings_decode_alike_before_a_save_and_after(batch, tmp_path):
    """A beam search whose generation config leaves the length penalty and early stopping unset gets the paper's, in
    memory as loading fills them in: a model assigned GenerationConfig(num_beams=5), or turned to greedy search and
    saved, translated otherwise after the save than before it."""
    from transformers import GenerationConfig

    sources = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=8)
    model = make_model()
    model.generation_config = GenerationConfig(num_beams=5, **{name: getattr(model.config, name) for name in (
        "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")})
    before = model.generate(**sources, output_scores=True, return_dict_in_generate=True)
    model.save_pretrained(tmp_path / "five")
    after = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "five").generate(
        **sources, output_scores=True, return_dict_in_generate=True)
    assert torch.equal(before.sequences, after.sequences)
    torch.testing.assert_close(before.sequences_scores, after.sequences_scores)
    paper = make_model().generate(**sources, num_beams=5, length_penalty=0.6, early_stopping=True,
                                  output_scores=True, return_dict_in_generate=True)
    torch.testing.assert_close(before.sequences_scores, paper.sequences_scores)

    model = make_model()
    model.generation_config.num_beams = 1
    model.save_pretrained(tmp_path / "greedy")
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "greedy")
    for beams in (1, 4):
        assert torch.equal(model.generate(**sources, num_beams=beams), reloaded.generate(**sources, num_beams=beams))


def test_greedy_search_is_not_warned_about_the_papers_beam_settings(batch, caplog):
    """One beam, asked for with a GenerationConfig: transformers warned that length_penalty and early_stopping (the
    paper's, merged from the model's config, not the caller's) are not valid beside it."""
    from transformers import GenerationConfig
    from transformers.utils import logging as transformers_logging

    transformers_logging.get_logger("x").warning_once.cache_clear()
    model = make_model()
    sources = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    with caplog.at_level(logging.WARNING):
        transformers_logging.enable_propagation()
        try:
            model.generate(**sources, generation_config=GenerationConfig(num_beams=1, max_new_tokens=4))
            model.generate(**sources, num_beams=1, max_new_tokens=4)
        finally:
            transformers_logging.disable_propagation()
    assert not [r for r in caplog.records if "length_penalty" in r.getMessage()], caplog.text


def test_a_prompt_per_source_is_needed(batch):
    """Fewer decoder_input_ids rows than sources: beam search matched them up across sources and returned fewer
    translations than sources, without a word."""
    model = make_model()
    prompt = torch.tensor([[model.config.decoder_start_token_id, 5]])
    with pytest.raises(ValueError, match=r"decoder_input_ids has 1 rows for 2 sources: give one prompt row per"):
        model.generate(batch["input_ids"][:2], attention_mask=batch["attention_mask"][:2], decoder_input_ids=prompt,
                       num_beams=2, max_new_tokens=3)
    out = model.generate(batch["input_ids"][:2], attention_mask=batch["attention_mask"][:2],
                         decoder_input_ids=prompt.expand(2, -1), num_beams=2, max_new_tokens=3)
    assert out.shape[0] == 2 and out[:, 1].tolist() == [5, 5]


def test_a_greedy_generation_config_loads_and_saves_again(tmp_path):
    """A model made greedy (beam settings unset, as transformers asks) and saved came back with the paper's length
    penalty and early stopping beside num_beams 1: warnings at each generate(), and saving it again failed."""
    model = make_model()
    config = model.generation_config
    config.num_beams, config.length_penalty, config.early_stopping = 1, None, None
    model.save_pretrained(tmp_path / "greedy")
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "greedy")
    assert loaded.generation_config.num_beams == 1 and loaded.generation_config.length_penalty is None
    loaded.save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "generation_config.json").read_text())["num_beams"] == 1


@pytest.mark.parametrize("minimum", [dict(min_new_tokens=80), dict(min_length=81)])
def test_a_minimum_length_beyond_the_default_limit_is_met(batch, minimum, recwarn):
    """A minimum longer than source length + 50, with no maximum given: the default limit makes room for it
    (transformers would otherwise warn that the lengths conflict and stop at the limit)."""
    out = make_model().generate(batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=1, **minimum)
    assert out.shape[1] == 1 + 80
    assert not [w for w in recwarn if "min" in str(w.message)]


def test_the_length_limit_holds_for_a_given_encoder_output(batch):
    """generate(encoder_outputs=...) without ids gets source length + 50 too, not transformers' 20."""
    model = make_model()
    model.generation_config.eos_token_id = None
    encoder_outputs = model.get_encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    out = model.generate(encoder_outputs=encoder_outputs, attention_mask=batch["attention_mask"], num_beams=1)
    assert out.shape[1] == 1 + batch["input_ids"].shape[1] + 50


def test_a_folder_without_a_generation_config_decodes_as_the_paper(tmp_path):
    """Weights and config.json alone (no generation_config.json) load with the paper's beam search, not greedy."""
    make_model().save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").unlink()
    config = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path).generation_config
    assert (config.num_beams, config.length_penalty, config.early_stopping) == (4, 0.6, True)
    saved = make_model()
    saved.generation_config.num_beams = 2  # a saved choice wins
    saved.save_pretrained(tmp_path / "two")
    assert VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "two").generation_config.num_beams == 2


def test_config_return_dict_false_gives_tuples(batch):
    """`config.return_dict = False` (as in older code): forward returns tuples and generate() still works."""
    model = make_model()
    expected = model(**batch)
    model.config.return_dict = False
    loss, logits, *_ = model(**batch)
    torch.testing.assert_close(loss, expected.loss)
    torch.testing.assert_close(logits, expected.logits)
    base = VanillaTransformerModel(model.config)
    assert isinstance(base(batch["input_ids"], batch["attention_mask"], decoder_input_ids=batch["labels"]), tuple)
    assert model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=3).shape[0] == 2


@pytest.mark.parametrize(
    "mode", [dict(num_beams=1, do_sample=False), dict(num_beams=4), dict(num_beams=1, do_sample=True, top_k=5)]
)
def test_generate_is_the_same_with_and_without_cache(batch, mode):
    model = make_model()
    outputs = []
    for use_cache in (True, False):
        torch.manual_seed(1)
        outputs.append(
            model.generate(
                batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=8, use_cache=use_cache, **mode
            )
        )
    assert torch.equal(*outputs)


def test_cross_attention_keys_values_are_computed_once_per_generate_call(batch):
    model = make_model()
    calls = []
    for layer in model.model.decoder.layers:
        layer.encoder_attn.kv_proj.register_forward_hook(lambda *args: calls.append(1))
    model.eos_token_id = None
    out = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=6, num_beams=2)
    assert out.shape[1] > 2
    assert len(calls) == len(model.model.decoder.layers)


def test_generate_returns_attentions_hidden_states_and_scores(batch):
    model = make_model(attn_implementation="eager")
    out = model.generate(
        batch["input_ids"],
        attention_mask=batch["attention_mask"],
        max_new_tokens=4,
        min_new_tokens=4,
        num_beams=2,
        return_dict_in_generate=True,
        output_attentions=True,
        output_hidden_states=True,
        output_scores=True,
    )
    assert len(out.encoder_attentions) == 2 and out.encoder_attentions[0].shape == (2, 4, 9, 9)  # before beam expansion
    assert len(out.encoder_hidden_states) == 3
    assert len(out.decoder_attentions) == 4 and len(out.cross_attentions) == 4
    assert out.cross_attentions[0][0].shape[-1] == 9
    assert len(out.decoder_hidden_states) == 4 and len(out.decoder_hidden_states[0]) == 3
    assert len(out.scores) == 4 and out.scores[0].shape == (4, 99)
    assert out.sequences_scores.shape == (2,)


# --- saving and remote code -----------------------------------------------------------------------------------------


def test_save_pretrained_writes_auto_map_and_code(tmp_path):
    make_model().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("VanillaTransformerForConditionalGeneration")
    assert config["auto_map"]["AutoConfig"].endswith("VanillaTransformerConfig")
    assert config["auto_map"]["AutoModel"] == "modeling_vanilla_transformer.VanillaTransformerModel"
    assert (tmp_path / "modeling_vanilla_transformer.py").exists()
    assert (tmp_path / "configuration_vanilla_transformer.py").exists()
    assert (tmp_path / "packed_linear.py").exists()  # imported relatively by the modeling file: shipped with it
    assert (tmp_path / "chunked_loss.py").exists()
    assert (tmp_path / "input_checks.py").exists() and (tmp_path / "generation.py").exists()
    assert GenerationConfig.from_pretrained(tmp_path).num_beams == 4
    assert (tmp_path / "file_permissions.py").exists()


@pytest.mark.parametrize("model_class", [VanillaTransformerForConditionalGeneration, VanillaTransformerModel])
def test_save_pretrained_leaves_the_weights_readable(model_class, tmp_path):
    """`model.save_pretrained(folder)` left model.safetensors (and each shard) -rw------- (safetensors writes through a
    temporary file), while the training script's model beside the same files was -rw-r--r--: another user, or a
    container running as one, could not load it."""
    import os

    umask = os.umask(0o022)
    try:
        model_class(tiny_config()).save_pretrained(tmp_path / "whole")
        model_class(tiny_config()).save_pretrained(save_directory=tmp_path / "shards", max_shard_size="20KB")
    finally:
        os.umask(umask)
    weights = [*(tmp_path / "whole").glob("*.safetensors"), *(tmp_path / "shards").glob("*.safetensors")]
    assert len(weights) > 2 and all(path.stat().st_mode & 0o777 == 0o644 for path in weights)


REMOTE_CODE_LOAD = """
import sys
sys.modules["hf_vanilla_transformer"] = None  # this environment cannot import the package
import torch
from transformers import AutoModelForSeq2SeqLM
try:
    import hf_vanilla_transformer
    raise SystemExit("the package is importable")
except ImportError:
    pass
model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
inputs = torch.load(sys.argv[2])
with torch.no_grad():
    logits = model(**inputs).logits
sequences = model.generate(inputs["input_ids"], attention_mask=inputs["attention_mask"], max_new_tokens=8)
from transformers import AutoModel
base = AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
assert type(base).__name__ == "VanillaTransformerModel", type(base)
torch.save({"logits": logits, "sequences": sequences}, sys.argv[3])
"""


def test_trust_remote_code_without_the_package(tmp_path, batch):
    model = make_model()
    model.save_pretrained(tmp_path / "model")
    torch.save(batch, tmp_path / "inputs.pt")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [sys.executable, "-c", REMOTE_CODE_LOAD, tmp_path / "model", tmp_path / "inputs.pt", tmp_path / "out.pt"],
        check=True,
        cwd=tmp_path,
        env=env,
    )
    remote = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(remote["logits"], model(**batch).logits)
    expected = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=8)
    assert torch.equal(remote["sequences"], expected)


def test_a_plain_trainer_loads_a_checkpoint_without_warning_about_tied_weights(tmp_path, monkeypatch):
    """Seq2SeqTrainer's resuming and load_best_model_at_end load a checkpoint, which stores the shared embedding once,
    and warned "There were missing keys in the checkpoint model loaded: [...embed_tokens..., lm_head.weight]"."""
    import transformers.trainer
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    saved = make_model(seed=1)
    saved.save_pretrained(tmp_path / "checkpoint-1")
    model = make_model()
    trainer = Seq2SeqTrainer(model=model, args=Seq2SeqTrainingArguments(output_dir=str(tmp_path), report_to="none"))
    warnings = []
    monkeypatch.setattr(transformers.trainer.logger, "warning", warnings.append)
    trainer._load_from_checkpoint(str(tmp_path / "checkpoint-1"))
    assert not [message for message in warnings if "missing keys" in message], warnings
    assert torch.equal(model.model.shared.weight, saved.model.shared.weight)
    assert model.lm_head.weight is model.model.shared.weight  # still tied
    assert model.model.encoder.embed_tokens.weight is model.model.shared.weight


def test_linear_layers_start_at_the_xavier_bounds_the_config_names():
    """The config's `init_std` docstring names each projection's starting scale: Xavier uniform of the matrix as
    stored, so fused Q/K/V (3d x d) at sqrt(6 / 4d), cross-attention K/V (2d x d) at sqrt(6 / 3d), d x d at
    sqrt(6 / 2d)."""
    torch.manual_seed(0)
    d = 64
    layer = VanillaTransformerForConditionalGeneration(
        VanillaTransformerConfig(vocab_size=50, d_model=d, encoder_layers=1, decoder_layers=1,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                 decoder_ffn_dim=128)).model.decoder.layers[0]
    for weight, fan_sum in ((layer.self_attn.qkv_proj.weight, 4 * d), (layer.encoder_attn.kv_proj.weight, 3 * d),
                            (layer.encoder_attn.q_proj.weight, 2 * d), (layer.self_attn.out_proj.weight, 2 * d)):
        bound = math.sqrt(6 / fan_sum)
        assert bound * 0.95 < weight.abs().max().item() <= bound


def test_an_output_projection_untied_after_construction_is_saved(tmp_path):
    """PEFT's merge_and_unload with modules_to_save=["lm_head"] (or untying by hand) leaves a projection of its own
    and tie_word_embeddings False: it was left out of the save as a tied name, and loading made it up at random."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    model.save_pretrained(tmp_path / "tied")
    with safe_open(str(tmp_path / "tied" / "model.safetensors"), "pt") as saved:
        assert "lm_head.weight" not in saved.keys()  # tied: the shared weight once
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach() * 1.5)  # the config still says tied
    model.save_pretrained(tmp_path / "untied")
    assert json.loads((tmp_path / "untied" / "config.json").read_text())["tie_word_embeddings"] is False
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "untied").eval()
    assert torch.equal(reloaded.lm_head.weight, model.lm_head.weight)
    assert torch.equal(reloaded.model.shared.weight, model.model.shared.weight)
    ids = torch.tensor([[5, 6, 7, 2]])
    logits = reloaded(input_ids=ids, decoder_input_ids=ids).logits
    assert torch.equal(logits, model(input_ids=ids, decoder_input_ids=ids).logits)


def test_a_model_turned_to_greedy_search_saves(tmp_path):
    """num_beams = 1 beside the paper's length_penalty and early_stopping (filled in for every model): transformers
    refused to save the generation config, after writing config.json, so the folder had no weights."""
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    model.generation_config.num_beams = None  # transformers' default: one beam
    model.save_pretrained(tmp_path / "unset")
    assert (tmp_path / "unset" / "model.safetensors").is_file()
    model.generation_config.num_beams = 1
    model.save_pretrained(tmp_path / "greedy")
    assert (tmp_path / "greedy" / "model.safetensors").is_file()
    assert model.generation_config.length_penalty == 0.6  # in memory still: generate(num_beams=4) as the paper
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "greedy")
    assert reloaded.generation_config.num_beams == 1
    assert reloaded.generation_config.length_penalty is None and not reloaded.generation_config.early_stopping


def test_every_dropout_is_fixed_when_the_model_is_made(batch, tmp_path):
    """As in transformers' models, a config edit after the model is made changes none of its dropout rates (the
    embedding dropout once read the config at every forward while the layers kept theirs: mixed rates); saved and
    loaded, the model takes the new ones everywhere."""
    model = VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.1)).train()

    def loss(model):
        torch.manual_seed(0)
        return model(**batch).loss

    before = loss(model)
    model.config.dropout = 0.5
    torch.testing.assert_close(loss(model), before, rtol=0, atol=0)
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path).train()
    assert {stack.dropout for stack in (loaded.model.encoder, loaded.model.decoder)} == {0.5}
    assert {layer.dropout for layer in loaded.modules() if isinstance(layer, VanillaTransformerResidualLayer)} == {0.5}
