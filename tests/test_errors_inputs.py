"""Input validation in forward: a ValueError saying what was passed and what was expected, never an IndexError
from inside torch."""

import pytest
import torch
from conftest import tiny_config

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config()).eval()


IDS = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
TARGET = torch.tensor([[10, 11, 2], [12, 2, 0]])


@pytest.mark.parametrize(
    "inputs, message",
    [
        (dict(input_ids=IDS.clone().index_fill_(1, torch.tensor([0]), 99), labels=TARGET), r"outside the vocabulary \[0, 98\].*max 99"),
        (dict(input_ids=IDS - 6, labels=TARGET), r"outside the vocabulary.*min -6"),
        (dict(input_ids=IDS, decoder_input_ids=TARGET + 90), r"decoder_input_ids.*outside the vocabulary"),
        (dict(input_ids=IDS.float(), labels=TARGET), r"integer token ids.*torch.float32"),
        (dict(input_ids=IDS[0], labels=TARGET), r"shape \(batch, length\), got \(4,\)"),
        (dict(input_ids=IDS[:, :0], labels=TARGET), r"`input_ids` is empty"),
        (dict(input_ids=IDS, decoder_input_ids=TARGET[:, :0]), r"`decoder_input_ids` is empty"),
        (dict(input_ids=IDS, attention_mask=MASK[:, :3], labels=TARGET), r"`attention_mask` has shape \(2, 3\).*\(2, 4\)"),
        (dict(input_ids=IDS, attention_mask=MASK[:1], labels=TARGET), r"`attention_mask` has shape \(1, 4\)"),
        (dict(input_ids=IDS, decoder_input_ids=TARGET, decoder_attention_mask=MASK), r"decoder_attention_mask.*\(2, 3\)"),
        (dict(input_ids=IDS), r"decoder needs its inputs.*decoder_input_ids.*labels.*DataCollatorForSeq2Seq\(tokenizer, "
         r"model=model\)"),
        (dict(input_ids=IDS, labels=TARGET + 200), r"`labels` must be token ids in \[0, 98\] or -100 \(ignored\); "
         r"got values \[200, 202, 210, 211, 212\]: ids of 99 and above come from a tokenizer larger than the model's "
         r"vocabulary: build the model with vocab_size=len\(tokenizer\)"),
        (dict(input_ids=IDS, labels=TARGET.masked_fill(TARGET == 0, -1)), r"got values \[-1\]: pad labels with -100"),
        (dict(input_ids=IDS[:0], labels=TARGET[:0]), r"`input_ids` is an empty batch \(0 sequences\)"),
        (dict(input_ids=IDS, decoder_input_ids=TARGET, labels=TARGET[:, :2]), r"`labels` has shape \(2, 2\)"),
        (dict(input_ids=IDS, decoder_input_ids=TARGET[:1]), r"decoder inputs have batch size 1 but the sources 2"),
        # a multiple, as generate()'s beams, paired targets with other sources without a word, where the encoder runs
        (dict(input_ids=IDS, decoder_input_ids=TARGET.repeat(2, 1)), r"batch size 4 but the sources 2: give one"),
        (dict(inputs_embeds=torch.zeros(2, 4, 7), labels=TARGET), r"d_model=32.*\(2, 4, 7\)"),
        (dict(input_ids=IDS, inputs_embeds=torch.zeros(2, 4, 32), labels=TARGET), r"exactly one of"),
        # what the tokenizer gives without return_tensors="pt", or with "np"
        (dict(input_ids=IDS.tolist(), labels=TARGET), r"`input_ids` must be a torch tensor, got a list: .*return_tensors"),
        (dict(input_ids=IDS.numpy(), labels=TARGET), r"`input_ids` must be a torch tensor, got a numpy.ndarray"),
        (dict(input_ids=IDS, labels=TARGET.tolist()), r"`labels` must be a torch tensor, got a list"),
        (dict(input_ids=IDS, attention_mask=MASK.tolist(), labels=TARGET), r"`attention_mask` must be a torch tensor"),
        (dict(input_ids=IDS, labels=TARGET[0]), r"`labels` must have shape \(batch, length\), got \(3,\)"),
        (dict(input_ids=IDS, labels=TARGET.float()), r"`labels` must hold integer token ids.*torch.float32"),
        (dict(input_ids=IDS, labels=TARGET.repeat(2, 1)), r"`labels` has batch size 4 but the sources 2: give one"),
        (dict(input_ids=IDS, labels=TARGET, decoder_position_ids=TARGET[:, :2]),
         r"`decoder_position_ids` has shape \(2, 2\) but must be \(batch, length\) = \(2, 3\)"),
        (dict(input_ids=IDS, labels=TARGET, decoder_position_ids=[[0, 1, 2]] * 2),
         r"`decoder_position_ids` must be a torch tensor, got a list"),
        # torch's "Expected tensor for argument #1 'indices' to have one of the following scalar types" before
        (dict(input_ids=IDS.to(torch.uint8), labels=TARGET), r"`input_ids` must hold token ids as torch.long \(or "
         r"torch.int32\), got dtype torch.uint8: convert them with `.long\(\)`"),
        (dict(input_ids=IDS, decoder_input_ids=TARGET.short()), r"`decoder_input_ids` .*got dtype torch.int16"),
        # torch's "Expected attn_mask dtype to be bool or float"
        (dict(input_ids=IDS, attention_mask=torch.ones(2, 1, 4, 4, dtype=torch.long), labels=TARGET),
         r"`attention_mask` is a 4-D mask of dtype torch.int64: a prepared mask is boolean"),
        # one sentence's embeddings without the batch dimension: "decoder inputs have batch size 2 but the sources 4"
        (dict(inputs_embeds=torch.zeros(4, 32), decoder_input_ids=TARGET), r"`inputs_embeds` must have shape \(batch, "
         r"length, d_model=32\), got \(4, 32\)"),
        (dict(inputs_embeds=torch.zeros(4, 32), labels=TARGET), r"`inputs_embeds` must have shape"),
        (dict(input_ids=IDS, decoder_inputs_embeds=torch.zeros(3, 32)), r"`decoder_inputs_embeds` must have shape"),
        # torch's "mat1 and mat2 shapes cannot be multiplied"; a dict's keys were unpacked as the outputs
        (dict(encoder_outputs=(torch.zeros(2, 4, 16),), decoder_input_ids=TARGET),
         r"`encoder_outputs` must hold the encoder's last hidden state, a tensor of shape \(batch, source length, "
         r"d_model=32\), first; got \(2, 4, 16\)"),
        (dict(encoder_outputs={"hidden": torch.zeros(2, 4, 32)}, labels=TARGET),
         r"`encoder_outputs` given as a dict holds the encoder's outputs by name .* not \['hidden'\]"),
    ],
)
def test_bad_inputs_raise_value_errors_that_explain(model, inputs, message):
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_generate_checks_its_inputs_too(model):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.generate(IDS + 95, max_new_tokens=3)
    with pytest.raises(ValueError, match=r"got \(4,\): add the batch dimension"):  # one sentence's ids, unbatched
        model.generate(IDS[0])
    with pytest.raises(ValueError, match="`input_ids` must be a torch tensor, got a list"):
        model.generate(input_ids=IDS.tolist(), attention_mask=MASK.tolist())
    with pytest.raises(ValueError, match="`attention_mask` must be a torch tensor, got a numpy.ndarray"):
        model.generate(input_ids=IDS, attention_mask=MASK.numpy())
    with pytest.raises(ValueError, match=r"`input_ids` is an empty batch"):  # not a ZeroDivisionError
        model.generate(IDS[:0], max_new_tokens=3)
    with pytest.raises(ValueError, match=r"`num_beams` must be at least 1 \(1: greedy search\), got 0"):
        model.generate(IDS, num_beams=0)  # transformers' own: ZeroDivisionError
    # what transformers does for decoder-only models alone: errors about the decoder's inputs before
    with pytest.raises(ValueError, match=r"guidance_scale=1.5: .*decoder-only.*Leave guidance_scale out"):
        model.generate(IDS, guidance_scale=1.5, max_new_tokens=3)
    with pytest.raises(ValueError, match=r"decoder_inputs_embeds: .*pass it as `decoder_input_ids`"):
        model.generate(IDS, decoder_inputs_embeds=torch.zeros(2, 1, 32), max_new_tokens=3)
    model.generate(IDS, guidance_scale=1.0, max_new_tokens=3)  # no guidance: runs


def test_encoder_outputs_may_be_a_dict_or_a_tensor(model):
    """`encoder_outputs={"last_hidden_state": h}` failed with "'str' object has no attribute 'shape'" (the dict's keys
    were taken as its outputs), and a bare tensor's rows were; both now give the logits of a tuple or of no
    `encoder_outputs`."""
    states = model.get_encoder()(IDS, attention_mask=MASK).last_hidden_state
    expected = model(input_ids=IDS, attention_mask=MASK, decoder_input_ids=TARGET).logits
    for given in ((states,), {"last_hidden_state": states}, states):
        logits = model(encoder_outputs=given, attention_mask=MASK, decoder_input_ids=TARGET).logits
        torch.testing.assert_close(logits, expected)
    loss = model(encoder_outputs={"last_hidden_state": states}, attention_mask=MASK, labels=TARGET).loss
    torch.testing.assert_close(loss, model(input_ids=IDS, attention_mask=MASK, labels=TARGET).loss)
    generated = model.generate(encoder_outputs={"last_hidden_state": states}, attention_mask=MASK, max_new_tokens=3)
    assert torch.equal(generated, model.generate(IDS, attention_mask=MASK, max_new_tokens=3))


def test_valid_inputs_still_run(model):
    out = model(input_ids=IDS, attention_mask=MASK, labels=TARGET.masked_fill(TARGET == 0, -100))
    assert torch.isfinite(out.loss)
    model(input_ids=IDS.int(), attention_mask=MASK.bool(), decoder_input_ids=TARGET)  # int32 ids and bool masks


def bare_bpe_tokenizer(append_eos: bool):
    """A byte-level BPE as a `tokenizers` user trains one: it appends no end token, unless given a post-processor."""
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast

    backend = ByteLevelBPETokenizer()
    backend.train_from_iterator(["Ein Hund läuft.", "A dog runs."] * 20, vocab_size=280,
                                special_tokens=["<pad>", "<s>", "</s>", "<unk>"])
    if append_eos:
        backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


@pytest.mark.parametrize("append_eos", [False, True])
def test_labels_without_the_end_token_are_warned_about(append_eos, caplog):
    """A tokenizer that appends no </s> trained a model that never stops, without a word from the model, the collator
    or the Trainer; the collator's call (and a forward given labels) warns now."""
    from transformers import DataCollatorForSeq2Seq
    from transformers.utils import logging as transformers_logging

    transformers_logging.get_logger("x").warning_once.cache_clear()  # the warning is logged once per process
    tokenizer = bare_bpe_tokenizer(append_eos)
    model = VanillaTransformerForConditionalGeneration(tiny_config(vocab_size=len(tokenizer)))
    rows = [tokenizer("A dog runs.", text_target="Ein Hund läuft."), tokenizer("A dog.", text_target="Ein Hund.")]
    with caplog.at_level("WARNING"):
        batch = DataCollatorForSeq2Seq(tokenizer, model=model)(rows)
        model(**batch)
    warned = [record.getMessage() for record in caplog.records if "ends with the end token" in record.getMessage()]
    assert warned == ([] if append_eos else [
        'No row of `labels` ends with the end token (eos_token_id 2): a model trained on them never learns to stop, '
        "and translates until the length limit. Make the tokenizer append it to the targets (transformers' "
        "translation tokenizers and `hf_vanilla_transformer.tokenization.train_bpe_tokenizer` do; a bare "
        '`tokenizers` BPE needs a post-processor, `TemplateProcessing(single="$A </s>", ...)`).'])


def test_labels_that_end_with_a_pad_that_is_the_end_token_are_not_warned_about(caplog):
    """A tokenizer whose pad token is its end token: the labels end with it, and the check took it for padding."""
    from transformers.utils import logging as transformers_logging

    from hf_vanilla_transformer.input_checks import warn_if_labels_never_end

    transformers_logging.get_logger("x").warning_once.cache_clear()
    labels = torch.tensor([[5, 6, 2, -100], [5, 6, 7, 2]])
    with caplog.at_level("WARNING"):
        warn_if_labels_never_end(labels, eos_token_id=2, pad_token_id=2)
        warn_if_labels_never_end(torch.tensor([[5, 6, 2, 2]]), eos_token_id=2, pad_token_id=2)  # padded with it
    assert "ends with the end token" not in caplog.text
    with caplog.at_level("WARNING"):
        warn_if_labels_never_end(torch.tensor([[5, 6, -100]]), eos_token_id=2, pad_token_id=2)
    assert "No row of `labels` ends with the end token" in caplog.text
