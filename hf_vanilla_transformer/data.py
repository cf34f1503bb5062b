"""Translation data: parallel text, JSON lines, Hub datasets, a built-in offline corpus, and tokenization.

Every loader returns `datasets` objects with a `translation` column of `{source_lang: ..., target_lang: ...}`
dicts, the format of transformers' translation example (`examples/pytorch/translation/run_translation.py`), so
`tokenize_translation_datasets` and the training script treat all sources alike.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
from datasets import Dataset, DatasetDict, load_dataset

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
_SHOWN_LINE_NUMBERS = 5


# ---- plain parallel text ----


@dataclass
class ParallelTextReport:
    """What `load_parallel_text` kept and skipped; line numbers are 1-based."""

    source_file: str
    target_file: str
    num_lines: int = 0
    num_kept: int = 0
    empty_source_lines: list[int] = field(default_factory=list)
    empty_target_lines: list[int] = field(default_factory=list)
    too_long_lines: list[int] = field(default_factory=list)

    @property
    def num_skipped(self) -> int:
        """Number of line pairs left out for any reason."""
        return self.num_lines - self.num_kept


def _open_binary(path: Path) -> BinaryIO:
    """Open a plain or gzip-compressed file for reading bytes."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _decode_line(raw: bytes, path: Path, line_number: int) -> str:
    """Decode one line as UTF-8, stripped of surrounding whitespace; raise ValueError saying where and how to fix."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}: line {line_number} is not valid UTF-8 (byte {raw[error.start:error.start + 1]!r} at byte "
            f"offset {error.start} of the line). Re-encode the file as UTF-8, e.g. "
            f"`iconv -f LATIN1 -t UTF-8 {path.name} > {path.name}.utf8`, and point to the re-encoded file."
        ) from error
    if line_number == 1:
        text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is not part of the sentence
    return text.strip()


def _read_line_pairs(source_path: Path, target_path: Path) -> Iterator[tuple[int, str, str]]:
    """Yield (1-based line number, source, target), splitting on b"\\n" only; raise ValueError on unequal counts."""
    source_count = target_count = 0
    with _open_binary(source_path) as source, _open_binary(target_path) as target:
        for line_number, (raw_source, raw_target) in enumerate(zip_longest(source, target), start=1):
            source_count += raw_source is not None
            target_count += raw_target is not None
            if source_count == target_count == line_number:
                yield (
                    line_number,
                    _decode_line(raw_source, source_path, line_number),
                    _decode_line(raw_target, target_path, line_number),
                )
    if source_count != target_count:
        raise ValueError(
            f"Parallel files have different line counts: {source_path} has {source_count} lines, {target_path} has "
            f"{target_count}. Line i of one must translate line i of the other; fix the files (e.g. compare "
            "`wc -l` and look for a sentence split over two lines) before training."
        )


def _warn_about_skipped(report: ParallelTextReport) -> None:
    """Log one warning per kind of skipped line, naming the file and the first few line numbers."""
    reasons = (
        (report.empty_source_lines, report.source_file, "empty lines in"),
        (report.empty_target_lines, report.target_file, "empty lines in"),
        (report.too_long_lines, f"{report.source_file} / {report.target_file}", "over-long line pairs in"),
    )
    for line_numbers, file_name, what in reasons:
        if line_numbers:
            shown = ", ".join(map(str, line_numbers[:_SHOWN_LINE_NUMBERS]))
            more = ", ..." if len(line_numbers) > _SHOWN_LINE_NUMBERS else ""
            logger.warning(
                f"Skipped {len(line_numbers)} {what} {file_name} (lines {shown}{more}); the other side of each was "
                "skipped with it, so the pairs stay aligned."
            )


def load_parallel_text(
    source_file: str | Path,
    target_file: str | Path,
    *,
    source_lang: str,
    target_lang: str,
    max_length_chars: int | None = None,
) -> tuple[Dataset, ParallelTextReport]:
    """Read line-aligned UTF-8 text files (`.gz` allowed) into a Dataset with a `translation` column.

    Pairs where either side is empty (or whitespace only) are skipped, as are pairs where either side is longer
    than `max_length_chars`; the report lists their line numbers and a warning is logged. Unequal line counts or
    bytes that are not UTF-8 raise ValueError. Returns `(dataset, report)`.
    """
    source_path, target_path = Path(source_file), Path(target_file)
    report = ParallelTextReport(str(source_path), str(target_path))
    kept_source: list[str] = []
    kept_target: list[str] = []
    for line_number, source, target in _read_line_pairs(source_path, target_path):
        report.num_lines = line_number
        if not source:
            report.empty_source_lines.append(line_number)
        if not target:
            report.empty_target_lines.append(line_number)
        if not source or not target:
            continue
        if max_length_chars is not None and max(len(source), len(target)) > max_length_chars:
            report.too_long_lines.append(line_number)
            continue
        kept_source.append(source)
        kept_target.append(target)
    report.num_kept = len(kept_source)
    _warn_about_skipped(report)
    return _translation_dataset(kept_source, kept_target, source_lang, target_lang), report


def _translation_dataset(sources: list[str], targets: list[str], source_lang: str, target_lang: str) -> Dataset:
    """Build a Dataset whose `translation` column is a struct {source_lang, target_lang} of strings."""
    column = pa.StructArray.from_arrays(
        [pa.array(sources, pa.large_string()), pa.array(targets, pa.large_string())],
        names=[source_lang, target_lang],
    )
    return Dataset(pa.table({"translation": column}))


def resolve_parallel_files(prefix: str | Path, source_lang: str, target_lang: str) -> tuple[Path, Path]:
    """Return the files `{prefix}.{lang}` or `{prefix}.{lang}.gz` for both languages (fairseq's `--trainpref`)."""
    return _resolve_language_file(prefix, source_lang), _resolve_language_file(prefix, target_lang)


def _resolve_language_file(prefix: str | Path, lang: str) -> Path:
    """Return `{prefix}.{lang}` if it exists, else `{prefix}.{lang}.gz`; raise FileNotFoundError naming both."""
    candidates = [Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"No {lang!r} side for prefix {str(prefix)!r}: looked for {candidates[0]} and {candidates[1]}. A prefix "
        "names line-aligned files `<prefix>.<source_lang>` and `<prefix>.<target_lang>` (optionally .gz)."
    )


# ---- choosing a source: Hub, JSON lines, plain text, or built-in ----


@dataclass
class TranslationDataArguments:
    """Where the parallel data comes from; give exactly one of dataset_name, *_file, *_prefix, builtin_dataset.

    Field names follow transformers' translation example so its command lines carry over; `*_prefix` adds plain
    parallel text (`--train_prefix data/train --source_lang en --target_lang de` reads `data/train.en(.gz)` and
    `data/train.de(.gz)`), and `builtin_dataset number_words` needs no files nor network.
    """

    source_lang: str = field(metadata={"help": "Source language id, e.g. 'en'."})
    target_lang: str = field(metadata={"help": "Target language id, e.g. 'de'."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset, e.g. 'wmt/wmt14' (network)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset config, e.g. 'de-en'."})
    train_file: str | None = field(default=None, metadata={"help": "JSON lines with a 'translation' field."})
    validation_file: str | None = field(default=None, metadata={"help": "JSON lines, as train_file."})
    test_file: str | None = field(default=None, metadata={"help": "JSON lines, as train_file."})
    train_prefix: str | None = field(
        default=None, metadata={"help": "Plain parallel text: '<prefix>.<lang>' files, optionally '.gz'."}
    )
    validation_prefix: str | None = field(default=None, metadata={"help": "As train_prefix, e.g. 'data/val'."})
    test_prefix: str | None = field(default=None, metadata={"help": "As train_prefix, e.g. 'data/test'."})
    max_length_chars: int | None = field(
        default=None, metadata={"help": "Skip plain-text pairs with a side longer than this many characters."}
    )
    builtin_dataset: str | None = field(
        default=None, metadata={"help": "'number_words': German->English number words, generated offline."}
    )
    number_words_train_size: int = field(default=10_000, metadata={"help": "number_words training pairs."})
    number_words_eval_size: int = field(default=500, metadata={"help": "number_words validation and test pairs."})
    cache_dir: str | None = field(default=None, metadata={"help": "Cache directory for datasets.load_dataset."})


BUILTIN_DATASETS = ("number_words",)


def load_translation_datasets(args: TranslationDataArguments) -> DatasetDict:
    """Load the splits `args` names (train/validation/test, as given) as a DatasetDict with a `translation` column."""
    chosen = _chosen_sources(args)
    if len(chosen) != 1:
        raise ValueError(
            f"Give exactly one data source, got {chosen or 'none'}: --dataset_name (Hub), --train_file/"
            "--validation_file/--test_file (JSON lines), --train_prefix/--validation_prefix/--test_prefix (plain "
            "parallel text), or --builtin_dataset number_words."
        )
    loaders = {
        "dataset_name": _load_hub_dataset,
        "file": _load_json_datasets,
        "prefix": _load_prefix_datasets,
        "builtin_dataset": _load_builtin_dataset,
    }
    datasets = loaders[chosen[0]](args)
    for split, dataset in datasets.items():
        _check_translation_column(dataset, split, args.source_lang, args.target_lang)
    return datasets


def _chosen_sources(args: TranslationDataArguments) -> list[str]:
    """Names of the kinds of data source that `args` sets."""
    kinds = {
        "dataset_name": [args.dataset_name],
        "file": [args.train_file, args.validation_file, args.test_file],
        "prefix": [args.train_prefix, args.validation_prefix, args.test_prefix],
        "builtin_dataset": [args.builtin_dataset],
    }
    return [kind for kind, values in kinds.items() if any(value is not None for value in values)]


def _load_hub_dataset(args: TranslationDataArguments) -> DatasetDict:
    """`datasets.load_dataset(dataset_name, dataset_config_name)`; needs the network or a warm cache."""
    return load_dataset(args.dataset_name, args.dataset_config_name, cache_dir=args.cache_dir)


def _load_json_datasets(args: TranslationDataArguments) -> DatasetDict:
    """Load JSON-lines files (`.json`, `.jsonl`, optionally `.gz`) as in transformers' translation example."""
    files = _split_paths(args.train_file, args.validation_file, args.test_file)
    for path in files.values():
        if not path.removesuffix(".gz").endswith((".json", ".jsonl")):
            raise ValueError(f"{path}: --*_file expects JSON lines (.json/.jsonl); use --*_prefix for plain text.")
    return load_dataset("json", data_files=files, cache_dir=args.cache_dir)


def _load_prefix_datasets(args: TranslationDataArguments) -> DatasetDict:
    """Load plain parallel text named by `--train_prefix/--validation_prefix/--test_prefix`."""
    prefixes = _split_paths(args.train_prefix, args.validation_prefix, args.test_prefix)
    splits = {}
    for split, prefix in prefixes.items():
        source_file, target_file = resolve_parallel_files(prefix, args.source_lang, args.target_lang)
        splits[split], _ = load_parallel_text(
            source_file,
            target_file,
            source_lang=args.source_lang,
            target_lang=args.target_lang,
            max_length_chars=args.max_length_chars,
        )
    return DatasetDict(splits)


def _load_builtin_dataset(args: TranslationDataArguments) -> DatasetDict:
    """Generate a built-in corpus; its languages must match --source_lang/--target_lang."""
    if args.builtin_dataset not in BUILTIN_DATASETS:
        raise ValueError(f"Unknown --builtin_dataset {args.builtin_dataset!r}; choose one of {BUILTIN_DATASETS}.")
    if (args.source_lang, args.target_lang) != ("de", "en"):
        raise ValueError(
            "--builtin_dataset number_words translates German to English: use --source_lang de --target_lang en "
            f"(got {args.source_lang!r} -> {args.target_lang!r})."
        )
    return number_words_corpus(
        train_size=args.number_words_train_size,
        validation_size=args.number_words_eval_size,
        test_size=args.number_words_eval_size,
    )


def _split_paths(train: str | None, validation: str | None, test: str | None) -> dict[str, str]:
    """Map split names to the paths given, leaving out the ones that are None."""
    return {split: path for split, path in zip(SPLITS, (train, validation, test)) if path is not None}


def _check_translation_column(dataset: Dataset, split: str, source_lang: str, target_lang: str) -> None:
    """Raise ValueError unless `dataset` has a `translation` column holding both languages."""
    feature = dataset.features.get("translation")
    languages = set(getattr(feature, "languages", None) or (feature.keys() if isinstance(feature, dict) else []))
    if not {source_lang, target_lang} <= languages:
        raise ValueError(
            f"The {split} split needs a 'translation' column of {{{source_lang!r}: ..., {target_lang!r}: ...}} "
            f"dicts; it has columns {dataset.column_names} (translation languages: {sorted(languages) or 'none'}). "
            "Check --source_lang/--target_lang or the file's fields."
        )


# ---- built-in offline corpus ----


def number_words_corpus(
    train_size: int = 10_000,
    validation_size: int = 500,
    test_size: int = 500,
    *,
    max_number: int = 100_000,
    seed: int = 0,
) -> DatasetDict:
    """German -> English number words from num2words ("dreihundertzweiundvierzig" -> "three hundred and forty-two").

    Integers are drawn without replacement below `max_number`, so no number is in two splits; test and validation
    come first in the seeded permutation, so they stay the same when only `train_size` changes.
    """
    total = train_size + validation_size + test_size
    if total > max_number:
        raise ValueError(f"Asked for {total} distinct numbers below max_number={max_number}; raise max_number.")
    numbers = np.random.default_rng(seed).permutation(max_number)[:total].tolist()
    test, validation, train = np.split(numbers, [test_size, test_size + validation_size])
    splits = {"train": train, "validation": validation, "test": test}
    return DatasetDict({split: _number_words_dataset(chosen.tolist()) for split, chosen in splits.items()})


def _number_words_dataset(numbers: list[int]) -> Dataset:
    """German and English words for each number, as a translation Dataset."""
    from num2words import num2words

    german = [num2words(n, lang="de") for n in numbers]
    english = [num2words(n, lang="en") for n in numbers]
    return _translation_dataset(german, english, "de", "en")


# ---- tokenization ----


def tokenize_translation_datasets(
    datasets: DatasetDict,
    tokenizer,
    *,
    source_lang: str,
    target_lang: str,
    max_source_length: int = 256,
    max_target_length: int = 256,
    num_proc: int | None = None,
) -> DatasetDict:
    """Tokenize each split: source -> input_ids/attention_mask, target -> labels (`text_target=`), truncating.

    The tokenizer's truncation keeps the eos it appends; the number of truncated sources and targets of each split
    is logged as a warning. All other columns are removed.
    """

    def tokenize(batch: dict) -> dict:
        sources = [pair[source_lang] for pair in batch["translation"]]
        targets = [pair[target_lang] for pair in batch["translation"]]
        model_inputs = tokenizer(sources, max_length=max_source_length, truncation=True)
        labels = tokenizer(text_target=targets, max_length=max_target_length, truncation=True)
        model_inputs["labels"] = labels["input_ids"]
        model_inputs["source_truncated"] = _truncated_flags(model_inputs)
        model_inputs["target_truncated"] = _truncated_flags(labels)
        return dict(model_inputs)

    tokenized = DatasetDict()
    for split, dataset in datasets.items():
        flagged = dataset.map(
            tokenize,
            batched=True,
            num_proc=num_proc,
            remove_columns=dataset.column_names,
            desc=f"Tokenizing {split}",
        )
        _warn_about_truncation(flagged, split, max_source_length, max_target_length)
        tokenized[split] = flagged.remove_columns(["source_truncated", "target_truncated"])
    return tokenized


def _truncated_flags(encoding) -> list[bool]:
    """Per example, whether the fast tokenizer cut tokens off (its `overflowing` encodings are non-empty)."""
    if encoding.encodings is None:
        raise TypeError("tokenize_translation_datasets needs a fast (tokenizers-backed) tokenizer.")
    return [bool(item.overflowing) for item in encoding.encodings]


def _warn_about_truncation(dataset: Dataset, split: str, max_source_length: int, max_target_length: int) -> None:
    """Log how many sources and targets of a split were truncated."""
    for side, limit in (("source", max_source_length), ("target", max_target_length)):
        count = int(np.sum(dataset.with_format("numpy")[f"{side}_truncated"])) if len(dataset) else 0
        if count:
            logger.warning(
                f"Truncated {count} of {len(dataset)} {split} {side}s to max_{side}_length={limit} tokens; raise "
                f"--max_{side}_length to keep them whole."
            )
