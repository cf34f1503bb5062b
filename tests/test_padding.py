"""A sentence's translation does not depend on the batch it is in: positions count real tokens only, so padding on
either side (tokenizer.padding_side "right" or "left") changes nothing."""

import pytest
import torch
from conftest import tiny_config

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration

SOURCES = [[5, 6, 7, 8, 9, 10, 11, 2], [12, 13, 2], [14, 15, 16, 17, 2], [18, 2]]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.0)).eval()


def pad(rows: list[list[int]], side: str, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    ids, mask = [], []
    for row in rows:
        fill = [pad_id] * (width - len(row))
        ids.append(row + fill if side == "right" else fill + row)
        mask.append([1] * len(row) + [0] * len(fill) if side == "right" else [0] * len(fill) + [1] * len(row))
    return torch.tensor(ids), torch.tensor(mask)


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("side", ["right", "left"])
def test_translation_is_the_same_alone_and_in_a_padded_batch(model, side, num_beams):
    settings = dict(num_beams=num_beams, max_new_tokens=8, min_new_tokens=8, early_stopping=True)
    alone = [model.generate(torch.tensor([row]), **settings)[0].tolist() for row in SOURCES]
    ids, mask = pad(SOURCES, side)
    batched = model.generate(ids, attention_mask=mask, **settings).tolist()
    assert batched == alone


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_ids_without_their_mask_translate_as_with_it(model, side, num_beams):
    """`generate(input_ids)` alone, as many examples call it: the mask comes from the pad token (transformers 5
    infers it for decoder-only models only)."""
    settings = dict(num_beams=num_beams, max_new_tokens=8, min_new_tokens=8, early_stopping=True)
    ids, mask = pad(SOURCES, side)
    with_mask = model.generate(ids, attention_mask=mask, **settings).tolist()
    assert model.generate(ids, **settings).tolist() == with_mask
    assert model.generate(input_ids=ids, **settings).tolist() == with_mask
    scores = {  # a mask that is given wins: attending to the padding changes the first step's scores
        name: model.generate(ids, **given, **settings, return_dict_in_generate=True, output_scores=True).scores[0]
        for name, given in (("inferred", {}), ("all ones", {"attention_mask": torch.ones_like(ids)}))
    }
    assert not torch.allclose(scores["inferred"], scores["all ones"])


def test_encoder_states_of_real_tokens_do_not_depend_on_padding_side(model):
    right_ids, right_mask = pad(SOURCES, "right")
    left_ids, left_mask = pad(SOURCES, "left")
    right = model.get_encoder()(right_ids, attention_mask=right_mask).last_hidden_state
    left = model.get_encoder()(left_ids, attention_mask=left_mask).last_hidden_state
    for i, row in enumerate(SOURCES):
        n = len(row)
        torch.testing.assert_close(right[i, :n], left[i, -n:], atol=1e-5, rtol=1e-5)


def test_left_padded_decoder_inputs_with_their_mask(model):
    """Teacher-forced decoder inputs padded on the left give the logits of the unpadded inputs."""
    source = torch.tensor([SOURCES[0]])
    target = [1, 20, 21, 22]
    plain = model(source, decoder_input_ids=torch.tensor([target])).logits
    padded = model(
        source,
        decoder_input_ids=torch.tensor([[0, 0] + target]),
        decoder_attention_mask=torch.tensor([[0, 0, 1, 1, 1, 1]]),
    ).logits
    torch.testing.assert_close(padded[:, 2:], plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_generate_continues_left_padded_prompts_as_unpadded_ones(model, cache_implementation, num_beams):
    """Decoder prompts padded on the left, with their mask, continue as each prompt alone. With a static cache
    transformers turns the mask into a 4-D one before the forward, and positions counted the padding."""
    prompts = [[1, 20, 21, 22], [1, 30]]
    settings = dict(num_beams=num_beams, max_new_tokens=6, min_new_tokens=6, cache_implementation=cache_implementation)
    sources = torch.tensor([SOURCES[0]] * 2)
    alone = [model.generate(sources[:1], decoder_input_ids=torch.tensor([p]), **settings)[0].tolist() for p in prompts]
    ids, mask = pad(prompts, "left")
    batched = model.generate(sources, decoder_input_ids=ids, decoder_attention_mask=mask, **settings).tolist()
    assert [row[ids.shape[1] - len(p):] for row, p in zip(batched, prompts)] == alone


def test_decoder_position_ids_go_with_a_prepared_4d_mask(model):
    """A prepared 4-D decoder mask (as generate() makes for a static cache) tells no positions: the ones given in
    `decoder_position_ids` are taken, and a left-padded target then gives the logits of the unpadded one."""
    source = torch.tensor([SOURCES[0]])
    target = [1, 20, 21, 22]
    plain = model(source, decoder_input_ids=torch.tensor([target])).logits
    padding = torch.tensor([0, 1, 1, 1, 1], dtype=torch.bool)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril() & padding
    mask = torch.zeros(1, 1, 5, 5).masked_fill(~allowed, torch.finfo(torch.float32).min)
    padded = dict(decoder_input_ids=torch.tensor([[0] + target]), decoder_attention_mask=mask)
    positioned = model(source, **padded, decoder_position_ids=torch.tensor([[0, 0, 1, 2, 3]])).logits
    torch.testing.assert_close(positioned[:, 1:], plain, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(model(source, **padded).logits[:, 1:], plain, atol=1e-3)  # positions from 0 on


class EndFirstSentenceAt(torch.nn.Module):
    """A logits processor that ends the first sentence's beams with the end token at decoder length `length`."""

    def __init__(self, beams: int, length: int, eos: int):
        super().__init__()
        self.beams, self.length, self.eos = beams, length, eos

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] == self.length:
            scores[: self.beams] = float("-inf")
            scores[: self.beams, self.eos] = 0.0
        return scores


@pytest.mark.parametrize("eos_in_the_call", [False, True])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_a_translation_that_ends_early_is_padded_with_the_pad_token(model, num_beams, eos_in_the_call):
    """transformers' beam search fills shorter outputs with `pad_token_id or eos_token_id`: with pad id 0 that was
    the end token, over and over, where greedy search pads (a course's `np.count_nonzero(preds != pad)` then counted
    a finished translation as long as the longest). An end token given in the call is the end token too."""
    from transformers import LogitsProcessorList

    ids, mask = pad(SOURCES[:2], "right")
    eos, pad_id = model.config.eos_token_id, model.config.pad_token_id
    given = {}
    if eos_in_the_call:  # e.g. the end of a sentence: the period's token
        eos = given["eos_token_id"] = 7
    sequences = model.generate(
        ids, attention_mask=mask, num_beams=num_beams, max_new_tokens=8, min_new_tokens=1,
        logits_processor=LogitsProcessorList([EndFirstSentenceAt(num_beams, 3, eos)]),
        return_dict_in_generate=True,  # the output's `sequences` as well as a plain tensor
        **given,
    ).sequences
    assert sequences[0, 3].item() == eos and sequences.shape[1] > 5
    assert sequences[0, 4:].tolist() == [pad_id] * (sequences.shape[1] - 4)
    assert pad_id not in sequences[1].tolist()  # the longer one is not cut or padded
