"""Evaluation with Seq2SeqTrainer translates whole sentences: the paper's length limit (source length + 50 new
tokens) holds over many batches, in a later generate() and in the saved generation config."""

import copy
import json

import datasets
import pytest
import torch
from conftest import tiny_config
from transformers import DataCollatorForSeq2Seq, GenerationConfig, PreTrainedTokenizerFast, Seq2SeqTrainer
from tokenizers import Tokenizer, models

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.metrics import make_compute_metrics
from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

LONG = 25  # every translation has at least this many tokens, more than transformers' placeholder max_length=20


def word_level_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, vocab_size)}}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<pad>")),
        pad_token="<pad>", bos_token="<s>", eos_token="</s>",
    )


@pytest.fixture(params=[TokenBatchingSeq2SeqTrainer, Seq2SeqTrainer])
def trainer(request, tmp_path):
    """This package's trainer, and transformers' own Seq2SeqTrainer as a user would take it."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    # random weights: no translation ends early, and each is made of ordinary tokens
    model.generation_config.min_new_tokens = LONG
    model.generation_config.suppress_tokens = [0, 1]
    tokenizer = word_level_tokenizer(model.config.vocab_size)
    generator = torch.Generator().manual_seed(1)
    rows = [
        {"input_ids": torch.randint(3, 99, (length,), generator=generator).tolist() + [2], "labels": [5, 6, 2]}
        for length in (3, 5, 4, 6, 2, 7)
    ]
    args = TokenBatchingSeq2SeqTrainingArguments(
        output_dir=str(tmp_path), per_device_eval_batch_size=2, predict_with_generate=True,
        generation_num_beams=1, report_to="none", use_cpu=True,
    )
    return request.param(
        model=model, args=args, eval_dataset=datasets.Dataset.from_list(rows), processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        compute_metrics=make_compute_metrics(tokenizer),
    )


def generated_lengths(trainer, ids) -> list[int]:
    special = {0, 1, 2}
    return [sum(token not in special and token >= 0 for token in row) for row in ids.tolist()]


def test_every_batch_translates_past_20_tokens(trainer, tmp_path):
    """3 batches of 2 sources, evaluated twice and predicted: no translation is cut at 20 tokens."""
    for _ in range(2):
        metrics = trainer.evaluate()
        assert metrics["eval_gen_len"] >= LONG
    prediction = trainer.predict(trainer.eval_dataset)
    lengths = generated_lengths(trainer, prediction.predictions)
    assert len(lengths) == 6 and min(lengths) >= LONG
    assert prediction.metrics["test_gen_len"] == pytest.approx(sum(lengths) / len(lengths))

    model = trainer.model
    if isinstance(trainer, TokenBatchingSeq2SeqTrainer):  # it leaves the config as it was; the model copes either way
        assert model.generation_config.max_length is None and model.generation_config.max_new_tokens is None
    source = torch.tensor([[5, 6, 7, 2]])
    model.generation_config.min_new_tokens = None
    model.generation_config.suppress_tokens = [0, 1, 2]  # never ends: runs to the paper's limit, 4 + 50 new tokens
    assert model.generate(source).shape[1] == 1 + 4 + 50

    model.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "generation_config.json").read_text())
    assert "max_length" not in saved and "max_new_tokens" not in saved
    assert GenerationConfig.from_pretrained(tmp_path / "saved").num_beams == 4


def test_a_length_the_user_sets_still_wins(trainer):
    trainer.model.generation_config.min_new_tokens = None
    trainer.args.generation_max_length = 12
    prediction = trainer.predict(trainer.eval_dataset)
    assert max(generated_lengths(trainer, prediction.predictions)) <= 12
    trainer.args.generation_max_length = None
    trainer.model.generation_config.max_new_tokens = 30
    lengths = generated_lengths(trainer, trainer.predict(trainer.eval_dataset).predictions)
    assert max(lengths) == 30
    assert trainer.model.generation_config.max_new_tokens == 30


def test_a_max_length_of_20_set_by_hand_is_kept(trainer, tmp_path):
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    model.generation_config.max_length = 20
    model.generation_config.suppress_tokens = [0, 1, 2]  # never ends
    assert model.generate(torch.tensor([[5, 6, 7, 2]])).shape[1] == 20
    assert model.generation_config.max_length == 20

    # after an evaluation, which fills the config with transformers' defaults, and once generate() has undone that
    trainer.evaluate()
    model, source = trainer.model, torch.tensor([[5, 6, 7, 2]])
    model.generation_config.min_new_tokens = None
    model.generation_config.suppress_tokens = [0, 1, 2]
    assert model.generate(source).shape[1] == 1 + 4 + 50
    model.generation_config.max_length = 20
    assert model.generate(source).shape[1] == 20

    # a generation config that a Seq2SeqTrainer saved with every default filled in (placeholder length or not)
    for placeholder in (20, None):
        model.generation_config.max_length = None
        filled = {name: value for name, value in GenerationConfig._get_default_generation_params().items()
                  if value is not None}
        model.generation_config.update(**{**filled, "max_length": placeholder}, defaults_only=True)
        filled_config = copy.deepcopy(model.generation_config)
        model.save_pretrained(tmp_path / "trainer_saved")
        filled_config.save_pretrained(tmp_path / "trainer_saved")  # as written before this package's save undoes it
        assert json.loads((tmp_path / "trainer_saved" / "generation_config.json").read_text())["top_k"] == 50
        loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "trainer_saved").eval()
        assert loaded.generation_config.max_length is None and loaded.generation_config.top_k is None
        assert loaded.generation_config.num_beams == 4 and loaded.generation_config.length_penalty == 0.6
        loaded.generation_config.max_length = 20
        assert loaded.generate(source, suppress_tokens=[0, 1, 2], num_beams=1).shape[1] == 20


def test_a_max_length_of_20_set_before_an_evaluation_is_kept(trainer, tmp_path):
    """`generation_config.max_length = 20` set before Seq2SeqTrainer's predict(): the first predict stopped at 20
    tokens, the second at the paper's limit, and the saved config had no max_length, where MarianMTModel keeps 20.
    (After the first batch the config held all of transformers' defaults, and was taken for a filled one.)"""
    config = trainer.model.generation_config
    config.min_new_tokens, config.suppress_tokens, config.max_length = None, [0, 1, 2], 20  # never ends
    for _ in range(2):
        lengths = generated_lengths(trainer, trainer.predict(trainer.eval_dataset).predictions)
        assert max(lengths) == 19  # and the start token
    assert trainer.model.generation_config.max_length == 20
    trainer.model.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "generation_config.json").read_text())["max_length"] == 20


def test_sources_without_targets_are_translated(trainer):
    """predict() on sources alone: DataCollatorForSeq2Seq sets `labels` to None, which transformers' Seq2SeqTrainer
    takes for targets and fails on ("The decoder needs its inputs"); this package's trainer translates them."""
    sources = trainer.eval_dataset.remove_columns("labels")
    if not isinstance(trainer, TokenBatchingSeq2SeqTrainer):
        pytest.skip("transformers' Seq2SeqTrainer (5.23) runs the model on the None labels")
    trainer.compute_metrics = None  # nothing to score against
    prediction = trainer.predict(sources)
    assert prediction.label_ids is None and len(prediction.predictions) == len(sources)
    assert min(generated_lengths(trainer, prediction.predictions)) >= LONG


def test_the_evaluation_loss_is_the_mean_over_target_tokens_whatever_the_batch_size(tmp_path):
    """The Trainer averaged the batches' token means by sentences: eval_loss changed with the batch size (Multi30k
    validation: 2.865 at 128, 2.841 at 7), and so did the comparisons people make with it."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    tokenizer = word_level_tokenizer(model.config.vocab_size)
    generator = torch.Generator().manual_seed(2)
    rows = [{"input_ids": torch.randint(3, 99, (4,), generator=generator).tolist() + [2],
             "labels": torch.randint(3, 99, (length,), generator=generator).tolist() + [2]}
            for length in (1, 9, 2, 14, 3, 6, 1)]
    losses = []
    for batch_size in (1, 3, 7):
        args = TokenBatchingSeq2SeqTrainingArguments(
            output_dir=str(tmp_path), per_device_eval_batch_size=batch_size, report_to="none", use_cpu=True)
        trainer = TokenBatchingSeq2SeqTrainer(
            model=model, args=args, eval_dataset=datasets.Dataset.from_list(rows), processing_class=tokenizer,
            data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100))
        losses.append(trainer.evaluate()["eval_loss"])
    batch = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)(rows)
    with torch.no_grad():
        expected = model(**batch).loss.item()  # one batch: the mean over all target tokens
    assert losses == pytest.approx([expected] * 3, rel=1e-5)
