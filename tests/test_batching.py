"""Tests for token-count batching: packing, length grouping, epochs, DDP shares, accelerate and the Trainer."""

import logging

import numpy as np
import pytest
from accelerate.data_loader import prepare_data_loader
from datasets import Dataset
from torch.utils.data import DataLoader
from transformers import BartConfig, BartForConditionalGeneration, DataCollatorForSeq2Seq, TrainingArguments

from hf_vanilla_transformer.batching import TokenBatchSampler
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer
from hf_vanilla_transformer.trainer import (
    TokenBatchingSeq2SeqTrainer,
    TokenBatchingSeq2SeqTrainingArguments,
    keep_rank_aware_batches,
)

RNG = np.random.default_rng(0)
SOURCE = RNG.integers(2, 40, size=500)
TARGET = np.clip(SOURCE + RNG.integers(-5, 15, size=500), 2, None)
MAX_TOKENS = 200
TOKENIZER = train_bpe_tokenizer(["ein Mann", "a man"], vocab_size=300)  # pad id 0; only used for padding


def padded_size(batch: list[int], lengths: np.ndarray) -> int:
    """Tokens a padding collator materialises for one side of a batch."""
    return len(batch) * int(lengths[batch].max())


def test_batches_stay_within_max_tokens_and_cover_every_example_once():
    sampler = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, sort_chunk_size=128)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert all(padded_size(b, SOURCE) <= MAX_TOKENS and padded_size(b, TARGET) <= MAX_TOKENS for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(SOURCE)))


def test_length_grouping_wastes_less_padding_than_random_batches():
    sampler = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, sort_chunk_size=128)
    real = int(SOURCE.sum())
    grouped = sum(padded_size(b, SOURCE) for b in sampler)
    sizes = [len(b) for b in sampler]
    shuffled = RNG.permutation(len(SOURCE))
    random_batches = np.split(shuffled, np.cumsum(sizes)[:-1])
    random = sum(padded_size(list(b), SOURCE) for b in random_batches)
    assert grouped < 1.25 * real < random
    assert np.mean([padded_size(b, TARGET) for b in sampler]) > 0.7 * MAX_TOKENS  # batches are well filled


def test_set_epoch_reshuffles_batch_order_deterministically():
    sampler = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, seed=1)
    first, again = list(sampler), list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert first == again and first != second
    assert sorted(map(tuple, first)) == sorted(map(tuple, second))  # same batches, new order
    rebuilt = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, seed=1)
    rebuilt.set_epoch(1)
    assert list(rebuilt) == second


def test_no_shuffle_yields_length_sorted_batches():
    sampler = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, shuffle=False, sort_chunk_size=10**6)
    longest = [int(SOURCE[b].max()) for b in sampler]
    assert longest == sorted(longest)


def shares(num_replicas: int, source=SOURCE, target=TARGET, epoch=0) -> list[list[list[int]]]:
    """The batches each simulated rank gets."""
    result = []
    for rank in range(num_replicas):
        sampler = TokenBatchSampler(source, target, MAX_TOKENS, seed=7, num_replicas=num_replicas, rank=rank)
        sampler.set_epoch(epoch)
        result.append(list(sampler))
    return result


def examples(batches: list[list[int]]) -> set[int]:
    """The example indices in some batches."""
    return {i for batch in batches for i in batch}


def test_ranks_get_disjoint_equal_shares_covering_the_data():
    total = len(TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, seed=7))
    rank0, rank1 = shares(2)
    assert len(rank0) == len(rank1) == -(-total // 2)
    assert examples(rank0) | examples(rank1) == set(range(len(SOURCE)))
    if total % 2 == 0:
        assert not examples(rank0) & examples(rank1)
    else:  # one batch repeated so both ranks take the same number of steps
        assert len(examples(rank0) & examples(rank1)) <= max(map(len, rank0))


def test_odd_batch_count_is_padded_by_repeating_a_batch():
    source = np.full(7, 50)  # 4 examples per batch at most: batches of 4 and 3
    sampler = TokenBatchSampler(source, source, 200, seed=0)
    assert len(sampler.batches) == 2
    rank_shares = shares(3, source, source)
    assert [len(share) for share in rank_shares] == [1, 1, 1]
    assert examples(rank_shares[0] + rank_shares[1]) == set(range(7))
    assert rank_shares[2][0] in (rank_shares[0][0], rank_shares[1][0])


def test_rank_defaults_to_single_process_and_is_checked():
    sampler = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS)
    assert (sampler.num_replicas, sampler.rank) == (1, 0)
    with pytest.raises(ValueError, match="rank"):
        TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, num_replicas=2, rank=2)


def test_too_long_example_is_an_error_that_says_what_to_do():
    with pytest.raises(ValueError, match="max_tokens=30.*max_source_length"):
        TokenBatchSampler([10, 31], [5, 5], 30)


@pytest.mark.parametrize("length, max_tokens, options, message", [
    (100, 100, {"bucket_shapes": True}, "An example has 100 tokens (104 as padded to its bucket), more than "
     "max_tokens=100 per batch: raise max_tokens (--max_tokens_per_batch) to at least 104 or truncate to at most 96 "
     "tokens (--max_source_length / --max_target_length), or pass --bucket_shapes false."),
    (12, 10, {"pad_to_multiple_of": 8}, "An example has 12 tokens (16 as padded to a multiple of 8), more than "
     "max_tokens=10 per batch: raise max_tokens (--max_tokens_per_batch) to at least 16 or truncate to at most 8"),
])
def test_an_example_too_long_once_padded_is_told_its_own_length_and_what_fits(length, max_tokens, options, message):
    """Under --bucket_shapes the error gave the bucketed length as the example's ("An example has 104 tokens" for
    100), and advised truncating to max_tokens, which still did not fit."""
    with pytest.raises(ValueError) as error:
        TokenBatchSampler([length], [3], max_tokens, **options)
    assert str(error.value).startswith(message)


def test_pad_to_multiple_of_counts_the_padded_length():
    sampler = TokenBatchSampler([9] * 8, None, 64, pad_to_multiple_of=8)
    assert {len(b) for b in sampler.batches} == {4}  # 4 x 16 padded tokens, not 7 x 9


def tokenized_dataset(n: int = 300) -> Dataset:
    """Random token ids shaped like a tokenized translation dataset, with an extra unused column."""
    source = RNG.integers(2, 30, size=n)
    target = np.clip(source + RNG.integers(-3, 8, size=n), 2, None)
    return Dataset.from_dict({
        "input_ids": [RNG.integers(4, 60, size=s).tolist() + [2] for s in source],
        "attention_mask": [[1] * (s + 1) for s in source],
        "labels": [RNG.integers(4, 60, size=t).tolist() + [2] for t in target],
        "translation": [{"de": str(i), "en": str(i)} for i in range(n)],
    })


def test_from_dataset_reads_lengths_through_index_mappings():
    dataset = tokenized_dataset(50).shuffle(seed=0).select(range(20))
    sampler = TokenBatchSampler.from_dataset(dataset, 400)
    for batch in sampler:
        rows = dataset.select(batch)
        assert len(batch) * max(map(len, rows["input_ids"])) <= 400
        assert len(batch) * max(map(len, rows["labels"])) <= 400
    with pytest.raises(ValueError, match="tokenize it first"):
        TokenBatchSampler.from_dataset(dataset.remove_columns("labels"), 400)


def accelerate_share(rank: int, fix: bool) -> list[list[int]]:
    """Example ids one of two ranks sees through accelerate's prepare_data_loader (as Trainer uses it)."""
    dataset = Dataset.from_dict({"id": list(range(len(SOURCE)))})
    sampler = TokenBatchSampler(SOURCE, TARGET, MAX_TOKENS, seed=3, num_replicas=2, rank=rank)
    prepared = prepare_data_loader(
        DataLoader(dataset, batch_sampler=sampler), num_processes=2, process_index=rank, put_on_device=False
    )
    if fix:
        keep_rank_aware_batches(prepared, sampler)
    return [batch["id"].tolist() for batch in prepared]


def test_accelerate_prepare_keeps_each_rank_share_whole_once_unsharded():
    rank0, rank1 = accelerate_share(0, fix=True), accelerate_share(1, fix=True)
    assert len(rank0) == len(rank1) == len(shares(2)[0])
    assert examples(rank0) | examples(rank1) == set(range(len(SOURCE)))
    assert len(examples(rank0) & examples(rank1)) <= max(map(len, rank0))  # at most the one repeated batch
    broken = accelerate_share(0, fix=False)
    assert len(broken) < len(rank0)  # what the fix is for: accelerate would halve each rank's share again


def trainer_for(tmp_path, dataset: Dataset, eval_dataset: Dataset | None = None,
                **arguments) -> TokenBatchingSeq2SeqTrainer:
    """A token-batching trainer around a tiny BART (the model family does not matter to batching)."""
    config = BartConfig(
        vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
    )
    model = BartForConditionalGeneration(config)
    args = TokenBatchingSeq2SeqTrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", save_strategy="no", seed=5, **arguments
    )
    collator = DataCollatorForSeq2Seq(TOKENIZER, model=model)  # pads input_ids with pad id 0, labels with -100
    return TokenBatchingSeq2SeqTrainer(model=model, args=args, train_dataset=dataset, eval_dataset=eval_dataset,
                                       data_collator=collator)


def example_ids(batch) -> list[tuple[int, ...]]:
    """Each example of a collated batch as its unpadded input ids (random ids: unique in practice)."""
    return [tuple(row[mask.bool()].tolist()) for row, mask in zip(batch["input_ids"], batch["attention_mask"])]


def test_trainer_batches_by_tokens_and_trains_an_epoch_per_pass(tmp_path):
    dataset = tokenized_dataset(40)
    trainer = trainer_for(tmp_path, dataset, max_tokens_per_batch=160, num_train_epochs=2, learning_rate=1e-3)
    loader = trainer.get_train_dataloader()
    batches = list(loader)
    assert len(batches) == len(trainer._token_batch_sampler) > 1
    assert all(b["input_ids"].numel() <= 160 and b["labels"].numel() <= 160 for b in batches)
    assert sum(len(b["input_ids"]) for b in batches) == len(dataset)
    epochs_seen = []
    original_iter = TokenBatchSampler.__iter__

    def recording_iter(sampler):
        epochs_seen.append(sampler.epoch)
        return original_iter(sampler)

    TokenBatchSampler.__iter__ = recording_iter
    try:
        result = trainer.train()
    finally:
        TokenBatchSampler.__iter__ = original_iter
    assert trainer.state.global_step == 2 * len(batches)
    assert epochs_seen == [0, 1]
    assert np.isfinite(result.training_loss)


def test_trainer_without_max_tokens_is_a_plain_seq2seq_trainer(tmp_path):
    trainer = trainer_for(tmp_path, tokenized_dataset(40), per_device_train_batch_size=8)
    assert trainer.max_tokens_per_batch is None
    assert [len(b["input_ids"]) for b in trainer.get_train_dataloader()] == [8] * 5


def test_a_trainer_made_by_hand_says_it_ignores_the_scripts_flags(tmp_path, caplog):
    """--bucket_shapes, --average_last_checkpoints and --overwrite_output_dir are the training script's: a trainer
    made by hand took them without a word, and trained unbucketed, unaveraged, over an earlier run's files."""
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.trainer"):
        trainer_for(tmp_path, tokenized_dataset(40))
        assert "flags, which a trainer made by hand ignores" not in caplog.text
        trainer_for(tmp_path, tokenized_dataset(40), average_last_checkpoints=3, overwrite_output_dir=True)
    assert "--average_last_checkpoints, --overwrite_output_dir: flags of the training script" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.trainer"):
        trainer_for(tmp_path, tokenized_dataset(40), average_last_checkpoints=0)  # "0: no averaging"
    assert "made by hand ignores" not in caplog.text


def test_trainer_under_two_simulated_ranks_gives_disjoint_equal_shares(tmp_path, monkeypatch):
    dataset = tokenized_dataset()
    seen = []
    for rank in range(2):
        trainer = trainer_for(tmp_path, dataset, max_tokens_per_batch=120)
        monkeypatch.setattr(TrainingArguments, "world_size", property(lambda self: 2))
        monkeypatch.setattr(TrainingArguments, "process_index", property(lambda self, r=rank: r))
        monkeypatch.setattr(
            trainer.accelerator,
            "prepare",
            lambda loader, r=rank: prepare_data_loader(loader, num_processes=2, process_index=r, put_on_device=False),
        )
        seen.append([example_ids(batch) for batch in trainer.get_train_dataloader()])
        monkeypatch.undo()
    assert len(seen[0]) == len(seen[1]) > 1
    total = len(TokenBatchSampler.from_dataset(dataset, 120, seed=5))
    assert len(seen[0]) == -(-total // 2)
    rank0, rank1 = ({example for batch in share for example in batch} for share in seen)
    assert len(rank0 | rank1) == len(dataset)
    assert len(rank0 & rank1) <= (0 if total % 2 == 0 else max(len(batch) for batch in seen[0]))


def test_epoch_callback_sets_the_sampler_epoch_when_resuming_mid_epoch(tmp_path):
    trainer = trainer_for(tmp_path, tokenized_dataset(20), max_tokens_per_batch=160)
    trainer.get_train_dataloader()
    trainer.state.epoch = 2.5  # a checkpoint saved half-way through epoch 2
    trainer.callback_handler.on_epoch_begin(trainer.args, trainer.state, trainer.control)
    assert trainer._token_batch_sampler.epoch == 2


@pytest.mark.parametrize("batching", [{"max_tokens_per_batch": 160}, {"per_device_train_batch_size": 8}])
def test_data_loading_and_evaluation_leave_the_trainings_random_numbers_alone(tmp_path, batching):
    """Each pass over a DataLoader drew its workers' seed from torch's generator, except a persistent worker
    loader's later passes: the training's dropout changed with the evaluations and the worker settings, and a run
    resumed at an epoch's start or before an evaluation did not end as the run it continued (checked end to end:
    0 and 2 workers, and a resumed run, now log the same losses)."""
    import torch

    dataset = tokenized_dataset(40)
    trainer = trainer_for(tmp_path, dataset, eval_dataset=dataset, **batching)
    before = torch.get_rng_state()
    next(iter(trainer.get_train_dataloader()))
    trainer.evaluate()
    assert torch.equal(torch.get_rng_state(), before)


def test_evaluation_keeps_the_datas_order_under_group_by_length(tmp_path):
    """transformers' Trainer groups evaluation sentences by length under --train_sampling_strategy group_by_length,
    a training setting: generated_predictions.txt came out in that order, line i no longer translating line i."""
    dataset = tokenized_dataset(40)
    trainer = trainer_for(tmp_path, dataset, train_sampling_strategy="group_by_length", per_device_eval_batch_size=8)
    order = [ids for batch in trainer.get_eval_dataloader(dataset) for ids in example_ids(batch)]
    assert order == [tuple(ids) for ids in dataset["input_ids"]]


def test_group_by_length_batches_come_from_the_seed_and_the_epoch_alone(tmp_path):
    """transformers' LengthGroupedSampler drew each epoch's order from torch's generator: a run resumed from a
    checkpoint (which restores that generator's state mid-epoch) trained on other batches than the run it continued,
    and each draw took a number from the dropout's."""
    import torch

    dataset = tokenized_dataset(40)

    def batches(epoch: int, torch_seed: int) -> list:
        trainer = trainer_for(tmp_path, dataset, per_device_train_batch_size=8,
                              train_sampling_strategy="group_by_length")
        loader = trainer.get_train_dataloader()
        loader.set_epoch(epoch)  # as the Trainer does at each epoch's start
        torch.manual_seed(torch_seed)  # whatever torch's generator holds at the epoch's start
        before = torch.get_rng_state()
        order = [example_ids(batch) for batch in loader]
        assert torch.equal(torch.get_rng_state(), before)
        return order

    assert batches(1, torch_seed=0) == batches(1, torch_seed=1) != batches(0, torch_seed=0)
    assert sorted(ids for batch in batches(1, 0) for ids in batch) == sorted(
        tuple(ids) for ids in dataset["input_ids"])
