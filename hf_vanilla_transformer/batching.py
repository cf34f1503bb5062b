"""Batches by token count, as the paper's ~25k source + ~25k target tokens per batch [5.1].

`TokenBatchSampler` sorts examples by length within large shuffled chunks, packs consecutive examples while
`n_examples * longest` stays within `max_tokens` on both sides (what a padding collator will materialise), and
shuffles the order of the batches every epoch with `seed + epoch`. The batches themselves are packed once, as
fairseq does, so every epoch has the same number of steps and the Trainer's step count stays exact. Under DDP each
rank takes a disjoint, equally long share of the batches.

With `bucket_shapes=True` (the training script's default on GPUs) an example counts as `bucket_length` of its longer
side on both sides, and `BucketPaddingCollator` pads each batch to that length: a run's batches then take a handful
of shapes (`TokenBatchSampler.shapes`), so torch.compile and CUDA graphs capture each shape once instead of meeting
a new one every step.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow.compute as pc
import torch
from torch.utils.data import Sampler
from transformers import DataCollatorForSeq2Seq
from transformers.trainer_pt_utils import LengthGroupedSampler

from .errors import InputError


def bucket_length(length: int) -> int:
    """The padded length of a batch whose longest sequence has `length` tokens: a multiple of 8 up to 128, of 16 up
    to 256, of 32 up to 512, and so on: at most 7 tokens or an eighth more, and a handful of lengths per corpus."""
    step = max(8, 1 << max(0, (int(length) - 1).bit_length() - 4))
    return -(-int(length) // step) * step


class TokenBatchSampler(Sampler[list[int]]):
    """Yield lists of example indices whose padded source and target sizes each stay within `max_tokens`.

    Pass it to `DataLoader(dataset, batch_sampler=...)`. `num_replicas`/`rank` default to torch.distributed's
    world size and rank when it is initialized, else 1 and 0; each rank must be built with the same `seed`.
    """

    def __init__(
        self,
        source_lengths: Sequence[int],
        target_lengths: Sequence[int] | None,
        max_tokens: int,
        *,
        sort_chunk_size: int = 100_000,
        shuffle: bool = True,
        seed: int = 0,
        pad_to_multiple_of: int | None = None,
        bucket_shapes: bool = False,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        source = _padded_lengths(source_lengths, pad_to_multiple_of)
        target = source if target_lengths is None else _padded_lengths(target_lengths, pad_to_multiple_of)
        if len(source) != len(target):
            raise ValueError(f"Got {len(source)} source lengths but {len(target)} target lengths.")
        longest = max(source_lengths, default=0) if target_lengths is None else max(
            max(source_lengths, default=0), max(target_lengths, default=0))
        if bucket_shapes:  # as BucketPaddingCollator pads: both sides to the bucket of the longer one
            source = target = np.array([bucket_length(n) for n in np.maximum(source, target).tolist()], np.int64)
        self.lengths = np.maximum(source, target)
        _check_fits(int(longest), self.lengths, max_tokens, pad_to_multiple_of, bucket_shapes)
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas, self.rank = _replica_placement(num_replicas, rank)
        self.epoch = 0
        order = _length_sorted_order(source, target, sort_chunk_size, np.random.default_rng(seed) if shuffle else None)
        self.batches = _pack(order, source, target, max_tokens)

    @classmethod
    def from_dataset(
        cls,
        dataset,
        max_tokens: int,
        *,
        source_column: str = "input_ids",
        target_column: str | None = "labels",
        **kwargs,
    ) -> TokenBatchSampler:
        """Build from a tokenized `datasets.Dataset`, reading sequence lengths from its Arrow columns."""
        table = dataset.with_format("arrow")[:]
        missing = [column for column in (source_column, target_column) if column and column not in table.column_names]
        if missing:
            raise ValueError(f"The dataset lacks column(s) {missing} (has {table.column_names}); tokenize it first.")
        source = pc.list_value_length(table[source_column]).to_numpy()
        target = pc.list_value_length(table[target_column]).to_numpy() if target_column else None
        return cls(source, target, max_tokens, **kwargs)

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The distinct (examples, longest length) of the batches, as padded to their longest example."""
        return sorted({(len(batch), int(self.lengths[batch].max())) for batch in self.batches})

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose batch order the next iteration yields."""
        self.epoch = epoch

    def __len__(self) -> int:
        """Batches per rank per epoch (the same on every rank)."""
        return math.ceil(len(self.batches) / self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        """This rank's batches for the current epoch."""
        order = np.arange(len(self.batches))
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(order)
        padded = np.resize(order, len(self) * self.num_replicas)  # repeats from the start so all ranks step alike
        for batch_index in padded[self.rank :: self.num_replicas]:
            yield self.batches[batch_index]


def _padded_lengths(lengths: Sequence[int], multiple: int | None) -> np.ndarray:
    """Lengths as an int64 array, rounded up to a multiple (the collator's `pad_to_multiple_of`) when given."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return lengths if not multiple else -(-lengths // multiple) * multiple


def _check_fits(longest: int, padded: np.ndarray, max_tokens: int, multiple: int | None, bucketed: bool) -> None:
    """Raise InputError (a ValueError) if an example alone exceeds `max_tokens` on a side, as padded (`padded`: each
    example's longer side padded to a `multiple` and, if `bucketed`, to its bucket; `longest`: the longest side)."""
    most = int(padded.max(initial=0))
    if most <= max_tokens:
        return
    padding = " and ".join([f"to a multiple of {multiple}"] * bool(multiple) + ["to its bucket"] * bucketed)
    padded_as = f" ({most} as padded {padding})" if most != longest else ""
    fits = [n for n in range(max_tokens, 0, -1)
            if (bucket_length if bucketed else int)(_padded_lengths([n], multiple)[0]) <= max_tokens][:1]
    shorter = f"to at most {fits[0]} tokens" if fits else "shorter"
    raise InputError(
        f"An example has {longest} tokens{padded_as}, more than max_tokens={max_tokens} per batch: raise max_tokens "
        f"(--max_tokens_per_batch) to at least {most} or truncate {shorter} (--max_source_length / "
        f"--max_target_length){', or pass --bucket_shapes false' if bucketed else ''}."
    )


def _replica_placement(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """(world size, rank) as given, else from torch.distributed when initialized, else (1, 0)."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if num_replicas is None:
        num_replicas = torch.distributed.get_world_size() if distributed else 1
    if rank is None:
        rank = torch.distributed.get_rank() if distributed else 0
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, {num_replicas}), got {rank}.")
    return num_replicas, rank


def _length_sorted_order(
    source: np.ndarray, target: np.ndarray, chunk_size: int, rng: np.random.Generator | None
) -> np.ndarray:
    """Indices shuffled (if `rng`), then sorted by (source, target) length within consecutive chunks."""
    order = rng.permutation(len(source)) if rng is not None else np.arange(len(source))
    chunks = [order[start : start + chunk_size] for start in range(0, len(order), chunk_size)]
    return np.concatenate([chunk[np.lexsort((target[chunk], source[chunk]))] for chunk in chunks] or [order])


def _pack(order: np.ndarray, source: np.ndarray, target: np.ndarray, max_tokens: int) -> list[list[int]]:
    """Greedily cut `order` into batches where count * longest stays within `max_tokens` for source and target."""
    batches: list[list[int]] = []
    batch: list[int] = []
    longest_source = longest_target = 0
    source, target = source.tolist(), target.tolist()  # Python ints: much faster to index one by one
    for index in order.tolist():
        new_source, new_target = max(longest_source, source[index]), max(longest_target, target[index])
        if batch and (len(batch) + 1) * max(new_source, new_target) > max_tokens:
            batches.append(batch)
            batch, new_source, new_target = [], source[index], target[index]
        batch.append(index)
        longest_source, longest_target = new_source, new_target
    if batch:
        batches.append(batch)
    return batches


class SeededLengthGroupedSampler(LengthGroupedSampler):
    """transformers' `LengthGroupedSampler` (--train_sampling_strategy group_by_length with sentence batches), its
    order drawn from `seed` and the epoch alone (`set_epoch`), as `TokenBatchSampler`'s is. The Trainer's drew it
    from torch's generator at each epoch's start: a resumed run trained on other batches than the run it continued,
    and each draw took a number from the dropout's."""

    def __init__(self, batch_size: int, lengths: list[int], seed: int) -> None:
        super().__init__(batch_size, lengths=lengths)
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        self.generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return super().__iter__()


@dataclasses.dataclass
class BucketPaddingCollator(DataCollatorForSeq2Seq):
    """`DataCollatorForSeq2Seq` that pads source and labels to one length, `bucket_length` of the batch's longest
    sequence, as `TokenBatchSampler(bucket_shapes=True)` counts them."""

    def __call__(self, features, return_tensors=None):
        longest = max(len(feature[key]) for feature in features for key in ("input_ids", "labels") if key in feature)
        to_bucket = dataclasses.replace(self, padding="max_length", max_length=bucket_length(longest))
        return DataCollatorForSeq2Seq.__call__(to_bucket, features, return_tensors)

    def each_side_to_its_longest(self) -> DataCollatorForSeq2Seq:
        """The same collator without the buckets: for evaluation, whose batches generate() translates."""
        return DataCollatorForSeq2Seq(**{each.name: getattr(self, each.name) for each in dataclasses.fields(self)})
