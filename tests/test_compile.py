"""torch.compile (issue 4): the layers and the whole model trace into one graph each, with no graph breaks, in
training and in cached decoding; compiled and eager results agree."""

import pytest
import torch
from conftest import tiny_config
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration


@pytest.fixture
def model():
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config()).eval()


def explain(function, *args, **kwargs):
    torch._dynamo.reset()
    return torch._dynamo.explain(function)(*args, **kwargs)


def assert_one_graph(explanation):
    reasons = [str(reason.reason) for reason in explanation.break_reasons]
    assert explanation.graph_break_count == 0, reasons
    assert explanation.graph_count == 1


def cache_after_prompt(model, batch, memory, length=3):
    """A decoder cache that has seen `length` target tokens, as in the middle of generate()."""
    config = model.config
    cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
    with torch.no_grad():
        model.model.decoder(
            input_ids=batch["labels"][:, :length],
            encoder_hidden_states=memory,
            encoder_attention_mask=batch["attention_mask"],
            cache=cache,
            use_cache=True,
        )
    return cache


@pytest.mark.parametrize("position_dependent_mask", [False, True])
def test_a_decoder_layer_decoding_step_has_no_graph_breaks(model, batch, position_dependent_mask):
    memory = model.model.encoder(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    cache = cache_after_prompt(model, batch, memory)
    layer = model.model.decoder.layers[1]
    hidden = torch.randn(2, 1, model.config.d_model)
    cross_mask = None
    if position_dependent_mask:  # padding in the source, as a 4-D additive mask
        cross_mask = torch.zeros(2, 1, 1, memory.shape[1])
        cross_mask[1, ..., 6:] = torch.finfo(torch.float32).min
    with torch.no_grad():
        assert_one_graph(explain(layer, hidden, None, memory, encoder_attention_mask=cross_mask, cache=cache))


def test_an_encoder_layer_has_no_graph_breaks(model):
    hidden = torch.randn(2, 5, model.config.d_model)
    assert_one_graph(explain(model.model.encoder.layers[0].train(), hidden))


def test_the_training_forward_has_no_graph_breaks(model, batch):
    assert_one_graph(explain(model.train(), **batch))


def test_a_cached_decoding_step_of_the_whole_model_has_no_graph_breaks(model, batch):
    encoder_outputs = model.model.encoder(batch["input_ids"], batch["attention_mask"])
    cache = cache_after_prompt(model, batch, encoder_outputs.last_hidden_state)
    with torch.no_grad():
        explanation = explain(
            model,
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["labels"][:, 3:4],
            encoder_outputs=encoder_outputs,
            cache=cache,
            use_cache=True,
        )
    assert_one_graph(explanation)


def test_a_decoding_step_with_a_static_cache_has_no_graph_breaks(model, batch):
    """generate(cache_implementation="static"), the cache of compiled decoding, counts its length in a tensor: the
    position encodings and mask checks must not branch on it."""
    encoder_outputs = model.model.encoder(batch["input_ids"], batch["attention_mask"])
    source_length = batch["input_ids"].shape[1]
    cache = EncoderDecoderCache(
        StaticCache(config=model.config, max_cache_len=16),
        StaticCache(config=model.config, max_cache_len=source_length),
    )
    step = dict(attention_mask=batch["attention_mask"], encoder_outputs=encoder_outputs, use_cache=True)
    with torch.no_grad():
        model(decoder_input_ids=batch["labels"][:, :3], cache=cache, **step)
        assert isinstance(cache.get_seq_length(), torch.Tensor)
        assert_one_graph(explain(model, decoder_input_ids=batch["labels"][:, 3:4], cache=cache, **step))


def test_static_cache_generation_matches_the_dynamic_cache(model, batch):
    kwargs = dict(max_new_tokens=8, num_beams=1, output_scores=True, return_dict_in_generate=True)
    dynamic = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], **kwargs)
    static = model.generate(
        batch["input_ids"], attention_mask=batch["attention_mask"], cache_implementation="static", **kwargs
    )
    assert torch.equal(static.sequences, dynamic.sequences)
    for static_scores, dynamic_scores in zip(static.scores, dynamic.scores, strict=True):
        torch.testing.assert_close(static_scores, dynamic_scores, rtol=1e-5, atol=1e-5)


def test_flex_attention_with_a_static_cache_is_refused_not_decoded_wrongly(model, batch):
    """With flex attention, generate()'s static cache hands the decoder a BlockMask with which this model and
    MarianMTModel alike decode other tokens than with sdpa (transformers 5.24, torch 2.13): refused, saying what to
    use instead, rather than translated wrongly or failing with "must be a torch tensor"."""
    model.set_attn_implementation("flex_attention")
    with pytest.raises(ValueError, match="is a flex attention BlockMask.*or sdpa with the static cache"):
        model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=3,
                       cache_implementation="static")


@pytest.mark.parametrize("offset", [0, 5, 62, 100])
def test_a_tensor_offset_gives_the_same_position_encodings(model, offset):
    encodings = model.model.decoder.embed_positions
    torch.testing.assert_close(encodings(3, torch.tensor(offset)), encodings(3, offset))


def test_compiled_training_step_matches_eager(batch):
    """fullgraph=True turns any graph break into an error; aot_eager traces the backward as well. Without dropout,
    whose random draws differ between eager and compiled code."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.0)).train()
    eager_loss = model(**batch).loss
    eager_loss.backward()
    eager_grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    torch._dynamo.reset()
    compiled_loss = torch.compile(model, fullgraph=True, backend="aot_eager")(**batch).loss
    compiled_loss.backward()
    torch.testing.assert_close(compiled_loss, eager_loss)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(parameter.grad, eager_grads[name], msg=name)
