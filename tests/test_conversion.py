"""from_marian: MarianMTModel is an independent implementation of the same network, so equal outputs on random
weights show the architecture is right."""

import pytest
import torch
from transformers import MarianConfig, MarianMTModel

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration, from_marian
from hf_vanilla_transformer.conversion import marian_to_paper_permutation
from hf_vanilla_transformer.modeling_vanilla_transformer import sinusoidal_encoding


def make_marian(seed=0, **overrides):
    torch.manual_seed(seed)
    config = MarianConfig(
        **{
            **dict(
                vocab_size=99,
                d_model=32,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=37,
                decoder_ffn_dim=37,
                max_position_embeddings=64,
                pad_token_id=98,
                decoder_start_token_id=98,
                eos_token_id=0,
                scale_embedding=True,
            ),
            **overrides,
        }
    )
    return MarianMTModel(config).eval()


def marian_batch():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 98, (3, 11), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    input_ids[1, 7:], attention_mask[1, 7:] = 98, 0
    return input_ids, attention_mask


def test_permutation_maps_marian_encodings_to_the_papers():
    d_model = 32
    positions = torch.arange(40)
    marian_layout = torch.cat(
        [sinusoidal_encoding(positions, d_model)[:, 0::2], sinusoidal_encoding(positions, d_model)[:, 1::2]], dim=1
    )
    marian = make_marian()
    torch.testing.assert_close(marian.model.encoder.embed_positions.weight[:40], marian_layout, atol=1e-5, rtol=0)
    perm = marian_to_paper_permutation(d_model)
    torch.testing.assert_close(marian_layout[:, perm], sinusoidal_encoding(positions, d_model))


@pytest.mark.parametrize("activation", ["relu", "gelu", "swish", "gelu_new", "silu"])
def test_same_logits_and_translations(activation):
    marian = make_marian(activation_function=activation)
    ours = from_marian(marian)
    assert isinstance(ours, VanillaTransformerForConditionalGeneration) and not ours.training
    input_ids, attention_mask = marian_batch()
    labels = torch.randint(1, 98, (3, 8))
    with torch.no_grad():
        a = marian(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        b = ours(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    assert (a.logits - b.logits).abs().max() <= 1e-4
    torch.testing.assert_close(a.loss, b.loss)
    for mode in (dict(num_beams=1, do_sample=False), dict(num_beams=4)):
        expected = marian.generate(input_ids, attention_mask=attention_mask, max_new_tokens=15, **mode)
        got = ours.generate(input_ids, attention_mask=attention_mask, max_new_tokens=15, **mode)
        assert torch.equal(expected, got), mode


def test_untied_output_projection_is_converted():
    marian = make_marian(tie_word_embeddings=False)  # transformers v5 then unties all three matrices
    marian.model.encoder.embed_tokens = marian.model.decoder.embed_tokens = marian.model.shared
    ours = from_marian(marian)
    assert ours.lm_head.weight is not ours.model.shared.weight
    input_ids, attention_mask = marian_batch()
    decoder_input_ids = torch.randint(1, 98, (3, 5))
    with torch.no_grad():
        a = marian(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
        b = ours(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    assert (a - b).abs().max() <= 1e-4


def test_generation_config_is_carried_over():
    marian = make_marian()
    marian.generation_config.num_beams = 6
    marian.generation_config.max_length = 77
    marian.generation_config.bad_words_ids = [[98]]
    ours = from_marian(marian)
    assert ours.generation_config.num_beams == 6 and ours.generation_config.max_length == 77
    assert ours.generation_config.bad_words_ids == [[98]]
    assert ours.config.decoder_start_token_id == 98 and ours.config.eos_token_id == 0


def test_a_saved_and_reloaded_conversion_decodes_as_marian(tmp_path):
    """Marian leaves length_penalty and early_stopping (and here num_beams) unset, which transformers decodes with
    its defaults; a converted model saved and reloaded took the paper's beam search for them instead."""
    from transformers import AutoModelForSeq2SeqLM

    marian = make_marian().eval()
    from_marian(marian).save_pretrained(tmp_path)
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    config = reloaded.generation_config
    assert (config.num_beams, config.length_penalty, config.early_stopping) == (1, 1.0, False)
    ids, mask = marian_batch()
    options = dict(attention_mask=mask, max_new_tokens=6)
    assert torch.equal(reloaded.generate(ids, **options), marian.generate(ids, **options))


def test_an_output_bias_is_carried_over(tmp_path):
    """The opus-mt models' final_logits_bias is trained, not zero: it becomes the output projection's bias, which
    survives saving, loading and the packed CPU inference path."""
    from transformers import AutoModelForSeq2SeqLM

    marian = make_marian()
    marian.final_logits_bias.copy_(torch.randn_like(marian.final_logits_bias) * 3)
    ours = from_marian(marian)
    assert ours.config.output_bias and not from_marian(make_marian()).config.output_bias
    ours.save_pretrained(tmp_path)
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(reloaded.lm_head.bias, marian.final_logits_bias[0])
    input_ids, attention_mask = marian_batch()
    decoder_input_ids = torch.randint(1, 98, (3, 5))
    with torch.no_grad():
        expected = marian(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
        for model in (ours, reloaded):
            got = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
            assert (expected.logits - got.logits).abs().max() <= 1e-4
    for mode in (dict(num_beams=1, do_sample=False), dict(num_beams=4)):
        want = marian.generate(input_ids, attention_mask=attention_mask, max_new_tokens=15, **mode)
        assert torch.equal(reloaded.generate(input_ids, attention_mask=attention_mask, max_new_tokens=15, **mode),
                           want), mode


def test_unconvertible_models_are_refused():
    with pytest.raises(ValueError, match="separate source and target vocabularies"):
        from_marian(make_marian(share_encoder_decoder_embeddings=False))
    with pytest.raises(ValueError, match="encoder and decoder embeddings differ"):
        from_marian(make_marian(tie_word_embeddings=False))
    with pytest.raises(TypeError, match="MarianMTModel"):
        from_marian(torch.nn.Linear(2, 2))
