"""Translation data: parallel text, JSON lines, Hub datasets, a built-in offline corpus, and tokenization.

Every loader returns `datasets` objects with a `translation` column of `{source_lang: ..., target_lang: ...}`
dicts, the format of transformers' translation example (`examples/pytorch/translation/run_translation.py`), so
`tokenize_translation_datasets` and the training script treat all sources alike.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import difflib
import glob
import gzip
import io
import json
import logging
import os
import re
import shlex
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, Features, Value, load_dataset, load_from_disk
from datasets.exceptions import DatasetGenerationError
from datasets.table import CastError

from .errors import USER_ERRORS, InputError, MissingFileError, shown_list
from .hub import loading_from
from .metrics import LANGUAGE_NAMES, language_code
from .pipeline_translation import normalize_text, normalize_whitespace, reads_special_tokens_as_text

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
        """Number of line pairs not read as a sentence pair: left out, or with `keep_blank` kept as a blank pair."""
        return self.num_lines - self.num_kept


def _open_binary(path: Path) -> BinaryIO:
    """Open a plain or gzip-compressed file for reading bytes."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _decode_line(raw: bytes, path: Path, line_number: int) -> str:
    """Decode one line as UTF-8, stripped of surrounding whitespace; raise InputError saying where and how to fix
    (bytes that are not UTF-8, or old Mac line ends: carriage returns alone)."""
    if has_cr_line_ends(raw.removesuffix(b"\r\n") if raw.endswith(b"\r\n") else raw.removesuffix(b"\n")):
        raise InputError(cr_line_ends_message(path, line_number))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(_not_utf8_message(path, line_number, raw, error.start)) from error
    if "\0" in text:  # valid UTF-8, but no sentence holds NUL: UTF-16 without its byte-order mark, or binary
        raise InputError(_not_utf8_message(path, line_number, raw, raw.index(b"\0")))
    # a UTF-8 byte-order mark is not part of the sentence: on line 1, or on the first line of a file joined on (cat)
    return text.removeprefix("\ufeff").strip()


def _converting_command(path: Path, encoding: str) -> str:
    """The shell command that re-encodes `path` from `encoding` to UTF-8 in place (a .gz file unpacked and packed
    again: iconv on its compressed bytes would garble it)."""
    converted = _shell(path, ".utf8")
    if path.name.endswith(".gz"):
        return (f"gzip -dc {_shell(path)} | iconv -f {encoding} -t UTF-8 | gzip > {converted} && mv {converted} "
                f"{_shell(path)}")
    return f"iconv -f {encoding} -t UTF-8 {_shell(path)} > {converted} && mv {converted} {_shell(path)}"


def _not_utf8_message(path: Path, line_number: int, line: bytes, offset: int) -> str:
    if (encoding := utf16_encoding(line)) and line_number == 1:
        notepad = ' (as Windows Notepad saves "Unicode")' if encoding == "UTF-16" else ""
        return (
            f"{path} is UTF-16 text{notepad}, not UTF-8. Convert it to UTF-8, keeping its name, e.g. "
            f"`{_converting_command(path, encoding)}`."
        )
    if encoding:
        return (
            f"{path} is UTF-16 text (as Windows Notepad saves \"Unicode\") from line {line_number} on, not UTF-8: a "
            "UTF-16 file was joined to it. Convert that file to UTF-8 (`iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8`) "
            "and join the files again."
        )
    if b"\0" in line:  # no text encoding has NUL bytes in sentences: a binary file (a model, an archive)
        return nul_bytes_message(f"{path} is not a text file", line_number)
    return (
        f"{path}: line {line_number} is not valid UTF-8 (byte {line[offset:offset + 1]!r} at byte offset {offset} "
        f"of the line). Re-encode the file as UTF-8, keeping its name, e.g. `{_converting_command(path, 'CP1252')}`."
    )


def nul_bytes_message(what: str, line_number: int) -> str:
    """The message for a file or standard input (`what`: "FILE is not a text file") whose line `line_number` holds
    NUL bytes, which no text encoding puts in sentences and a tokenizer would read as a token of their own."""
    return f"{what} (line {line_number} holds NUL bytes): give UTF-8 text, one sentence a line."


def _shell(path: Path, suffix: str = "") -> str:
    """`path` (plus `suffix`) as a shell command names it, quoted where needed: the commands the messages suggest
    run as pasted, from the folder the path was given in."""
    return shlex.quote(f"{path}{suffix}")


def utf16_encoding(line: bytes) -> str | None:
    """The encoding of a line that is not UTF-8 (or holds NUL) where it is UTF-16, for iconv: "UTF-16" when it starts
    with UTF-16's byte-order mark (FF FE or FE FF), "UTF-16LE" or "UTF-16BE" when every other byte is NUL (Latin
    script without the mark: iconv's "UTF-16" would take it for big-endian), not a binary line of NULs; None
    otherwise."""
    if line.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16"
    line = line.removesuffix(b"\n")
    for encoding, nul_bytes, text in (("UTF-16LE", line[1::2], line[0::2]), ("UTF-16BE", line[0::2], line[1::2])):
        if len(line) >= 4 and nul_bytes.count(0) == len(nul_bytes) and 0 not in text:
            return encoding
    return None


def has_cr_line_ends(line: str | bytes) -> bool:
    """Whether a line read at line feeds (its own line end removed) holds old Mac line ends, carriage returns alone:
    one inside a line may be a stray; two are line ends."""
    return line.count("\r" if isinstance(line, str) else b"\r") >= 2


def cr_line_ends_message(path: Path | str, line_number: int) -> str:
    """What to say of a file ("-": standard input, for translate.py) whose lines end in carriage returns alone."""
    if str(path) == "-":
        return (
            f"Standard input uses CR line ends (old Mac): line {line_number} holds several carriage returns and no "
            "line feed between them, so its sentences would be read as one. Convert them to line feeds, e.g. "
            "`tr '\\r' '\\n' < input.txt | python scripts/translate.py MODEL`."
        )
    path = Path(path)
    fixed = _shell(path, ".fixed")
    convert = (f"gzip -dc {_shell(path)} | tr '\\r' '\\n' | gzip > {fixed}" if path.suffix == ".gz"
               else f"tr '\\r' '\\n' < {_shell(path)} > {fixed}")
    return (
        f"{path} uses CR line ends (old Mac): line {line_number} holds several carriage returns and no line feed "
        f"between them, so its sentences would be read as one. Convert it to line feeds, keeping its name, e.g. "
        f"`{convert} && mv {fixed} {_shell(path)}`."
    )


def decode_utf8_text(data: bytes, path: str | Path) -> str:
    """`data` decoded as UTF-8, without a leading byte-order mark (Windows editors write one; it is not part of the
    first line's text); InputError naming the file and line of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        line_end = data.find(b"\n", error.start)
        line = data[line_start : None if line_end < 0 else line_end]
        line_number = data.count(b"\n", 0, error.start) + 1
        raise InputError(_not_utf8_message(Path(path), line_number, line, error.start - line_start)) from error


def text_lines(text: str) -> list[str]:
    """`text` split at line feeds only, as the training data is read (each line's Windows "\r" before them dropped):
    `str.splitlines` also splits at U+2028, form feeds and a lone "\r", which would put translations out of line
    with their sources."""
    *ended, last = text.split("\n")
    return [line.removesuffix("\r") for line in ended] + ([last] if last else [])  # no line feed: no Windows end


_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def _raw_lines(path: Path) -> Iterator[bytes]:
    """The lines of a plain or gzip file as bytes; InputError when a .gz file is truncated or not gzip."""
    try:
        with _open_binary(path) as handle:
            yield from handle
    except _GZIP_ERRORS as error:
        raise _damaged_gzip_error(path, error) from error


def _damaged_gzip_error(path: Path, error: BaseException) -> InputError:
    return InputError(
        f"{path} is not a complete gzip file ({error}): it was cut off or is not gzip-compressed. Download or "
        f"compress it again (`gzip -t {_shell(path)}` checks it), or give the uncompressed file without .gz."
    )


def _read_line_pairs(source_path: Path, target_path: Path) -> Iterator[tuple[int, str, str]]:
    """Yield (1-based line number, source, target), splitting on b"\\n" only; raise InputError on unequal counts.

    Line counts that differ only by blank lines at the files' ends are no error: an editor's extra line end is no
    sentence, and the lines the files share are read as always."""
    source_count = target_count = last_source_text = last_target_text = 0
    source, target = _raw_lines(source_path), _raw_lines(target_path)
    for line_number, (raw_source, raw_target) in enumerate(zip_longest(source, target), start=1):
        source_count += raw_source is not None
        target_count += raw_target is not None
        if raw_source is not None and not raw_source.isspace():
            last_source_text = line_number
        if raw_target is not None and not raw_target.isspace():
            last_target_text = line_number
        if source_count == target_count == line_number:
            yield (
                line_number,
                _decode_line(raw_source, source_path, line_number),
                _decode_line(raw_target, target_path, line_number),
            )
    if source_count != target_count and last_source_text != last_target_text:
        raise InputError(
            f"Parallel files have different line counts: {source_path} has {source_count} lines"
            f"{_without_trailing_blanks(source_count, last_source_text)}, {target_path} has {target_count}"
            f"{_without_trailing_blanks(target_count, last_target_text)}. Line i of one must translate line i of the "
            "other; fix the files (e.g. compare `wc -l` and look for a sentence split over two lines) before training."
        )


def _without_trailing_blanks(count: int, last_text: int) -> str:
    """The note " (N without the blank lines at its end)" for a file that ends with blank lines; "" otherwise."""
    return f" ({last_text} without the blank lines at its end)" if last_text < count else ""


def _warn_about_skipped(report: ParallelTextReport, keep_blank: bool = False) -> None:
    """Log one warning per kind of skipped (or, with `keep_blank`, kept blank) line, naming the file and the first
    few line numbers."""
    reasons = (
        (report.empty_source_lines, report.source_file, "empty line"),
        (report.empty_target_lines, report.target_file, "empty line"),
        (report.too_long_lines, f"{report.source_file} / {report.target_file}", "over-long line pair"),
    )
    for line_numbers, file_name, what in reasons:
        if line_numbers:
            count = len(line_numbers)
            counted = f"{count} {what}{'s' if count > 1 else ''} in {file_name}"
            where = f"line{'s' if count > 1 else ''} {shown_list(line_numbers, _SHOWN_LINE_NUMBERS)}"
            if keep_blank and what == "empty line":
                kept = "that pair is" if count == 1 else "those pairs are"
                logger.warning(
                    f"{counted} ({where}): {kept} kept in place, so that translations line up with the lines, but "
                    "neither translated nor scored."
                )
                continue
            logger.warning(
                f"Skipped {counted} ({where}); the other side of each was skipped with it, so the pairs stay aligned."
            )


def load_parallel_text(
    source_file: str | Path,
    target_file: str | Path,
    *,
    source_lang: str,
    target_lang: str,
    max_length_chars: int | None = None,
    keep_blank: bool = False,
) -> tuple[Dataset, ParallelTextReport]:
    """Read line-aligned UTF-8 text files (`.gz` allowed) into a Dataset with a `translation` column.

    Pairs where either side is empty (or whitespace only) are skipped (with `keep_blank`, kept in place: evaluation
    data whose translations must line up with its lines), as are pairs where either side is longer than
    `max_length_chars` (training data only: it cannot go with `keep_blank`); the report lists their line numbers
    and a warning is logged. Unequal line counts or bytes that are not UTF-8 raise ValueError. Returns
    `(dataset, report)`.
    """
    if keep_blank and max_length_chars is not None:
        raise ValueError("keep_blank keeps every line in place, and max_length_chars would leave lines out: an "
                         "evaluation split's translations must line up with its lines, so give one of the two.")
    source_path, target_path = Path(source_file), Path(target_file)
    report = ParallelTextReport(str(source_path), str(target_path))
    kept_source: list[str] = []
    kept_target: list[str] = []
    for line_number, source, target in _read_line_pairs(source_path, target_path):
        report.num_lines = line_number
        if not source or not normalize_text(source):  # invisible characters alone are read as nothing too
            source = ""
            report.empty_source_lines.append(line_number)
        if not target or not normalize_text(target):  # a zero-width space alone is no reference to learn or score
            target = ""
            report.empty_target_lines.append(line_number)
        if not source or not target:
            if keep_blank:
                kept_source.append(source)
                kept_target.append(target)
            continue
        if max_length_chars is not None and max(len(source), len(target)) > max_length_chars:
            report.too_long_lines.append(line_number)
            continue
        kept_source.append(source)
        kept_target.append(target)
    report.num_kept = sum(bool(source and target) for source, target in zip(kept_source, kept_target))
    _warn_about_skipped(report, keep_blank)
    return translation_dataset(kept_source, kept_target, source_lang, target_lang), report


def translation_dataset(sources: list[str], targets: list[str], source_lang: str, target_lang: str) -> Dataset:
    """Build a Dataset whose `translation` column is a struct {source_lang, target_lang} of strings."""
    column = pa.StructArray.from_arrays(
        [pa.array(sources, pa.large_string()), pa.array(targets, pa.large_string())],
        names=[source_lang, target_lang],
    )
    return Dataset(pa.table({"translation": column}))


def resolve_parallel_files(
    prefix: str | Path, source_lang: str, target_lang: str, split: str | None = None
) -> tuple[Path, Path]:
    """Return the files `{prefix}.{lang}` or `{prefix}.{lang}.gz` for both languages (fairseq's `--trainpref`);
    MissingFileError otherwise, in one line that says what is wrong with the prefix (`--{split}_prefix` where
    `split` is given) and how to fix it: a folder that is not there (a relative path, with the current directory it
    is read from), a folder given for a prefix (the prefixes in it), a prefix that ends with the language, a name
    without files (the names there like it), or languages the files are not in (the ones they are in)."""
    files = [_language_file(prefix, lang) for lang in (source_lang, target_lang)]
    if files[0] is not None and files[1] is not None:
        return files[0], files[1]
    missing = list(dict.fromkeys(lang for lang, file in zip((source_lang, target_lang), files) if file is None))
    flag = f"--{split}_prefix" if split else "prefix"
    if folders := [f"{prefix}.{lang}{gz}" for lang in missing for gz in ("", ".gz")
                   if Path(f"{prefix}.{lang}{gz}").is_dir()]:  # was "its files are in en, not de"
        raise MissingFileError(f"{folders[0]} is a folder, not the {missing[0]} side of {flag} {prefix}: the prefix "
                               f"names two files, {prefix}.{source_lang} and {prefix}.{target_lang} (or .gz). Give "
                               "the prefix of the files in that folder, or rename it.")
    raise MissingFileError(_missing_side_message(str(prefix), source_lang, target_lang, missing, flag))


def _language_file(prefix: str | Path, lang: str) -> Path | None:
    """`{prefix}.{lang}` if it is a file, else `{prefix}.{lang}.gz` if it is one; None otherwise. Where both are, a
    warning (once) says which is read: they may not hold the same text."""
    plain, packed = Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")
    if plain.is_file() and packed.is_file():
        _warn_once(f"{plain} and {packed} are both there: {plain} is read. Remove or move the other if it is not the "
                   "same text.")
    return next((path for path in (plain, packed) if path.is_file()), None)


@lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    logger.warning(message)


_NOT_LANGUAGES = {"csv", "tsv", "json", "jsonl", "txt", "parquet", "md", "py", "sh", "log", "bak", "orig", "tmp",
                  "zip", "tar", "tgz", "bz2", "xz", "model", "vocab", "arrow", "pt", "bin", "safetensors", "yaml"}
"""File name endings that say a format, not a language: `train.txt` is no `train` prefix's side."""


def _prefix_languages(prefix: str | Path) -> dict[str, Path]:
    """The languages that files `{prefix}.{lang}` or `{prefix}.{lang}.gz` are there for, sorted, each with its
    file (`en` -> train.en.gz)."""
    prefix = Path(prefix)
    found = {}
    if not prefix.name or not prefix.parent.is_dir():
        return found
    for path in sorted(prefix.parent.glob(f"{glob.escape(prefix.name)}.*")):
        lang = path.name[len(prefix.name) + 1:].removesuffix(".gz")
        if lang and "." not in lang and lang.lower() not in _NOT_LANGUAGES and path.is_file():
            found.setdefault(lang, path)
    return dict(sorted(found.items()))


def _meant_language(lang: str, found: list[str]) -> str | None:
    """The one of `found` (the languages the files are there for) that `lang` names in other words or letter case
    (english or EN for en, deu for de); None where none or several do."""
    meant = [each for each in found if language_code(each) == language_code(lang)]  # english, EN, en_US: en
    return meant[0] if len(meant) == 1 else None


def _missing_side_message(prefix: str, source_lang: str, target_lang: str, missing: list[str], flag: str) -> str:
    """Why `prefix` names no file for the languages in `missing`, and what to give instead, in one line."""
    path = Path(prefix)
    looked = f"{prefix}.{missing[0]} or {prefix}.{missing[0]}.gz"
    folder = path.parent
    if not folder.is_dir():
        return _no_folder_message(prefix, folder, flag, looked)
    if path.is_dir():
        return _folder_for_prefix_message(path, flag, source_lang, target_lang)
    ending = next((ending for lang in (source_lang, target_lang) for ending in (f".{lang}.gz", f".{lang}")
                   if prefix.endswith(ending)), None)
    if ending is not None:  # `data/train.en` given: one of the files, not their prefix
        shorter = prefix.removesuffix(ending)
        return (
            f"No {missing[0]!r} side for prefix {prefix!r}: looked for {prefix}.{missing[0]} and "
            f"{prefix}.{missing[0]}.gz. A prefix names line-aligned files `<prefix>.<source_lang>` and "
            f"`<prefix>.<target_lang>` (optionally .gz). The prefix {prefix!r} ends with the language ({ending}): "
            f"give the prefix without it, {shorter!r}, which names {shorter}.{source_lang} and "
            f"{shorter}.{target_lang} (or .gz)."
        )
    found = _prefix_languages(path)
    if not found:
        return _no_such_prefix_message(path, flag, looked, source_lang, target_lang)
    names = ", ".join(file.name for file in found.values())
    sides = [("--source_lang", source_lang), ("--target_lang", target_lang)]
    meant = [(option, lang, _meant_language(lang, list(found))) for option, lang in sides if lang in missing]
    if all(guess for _, _, guess in meant):
        fix = "did you mean " + " ".join(f"{option} {guess}" for option, _, guess in meant) + "?"
    else:
        files = ", and ".join(f"{prefix}.{lang} or {prefix}.{lang}.gz" for _, lang, guess in meant if not guess)
        fix = (f"give --source_lang and --target_lang among {_joined(list(found))} (as the files name them), or add "
               f"{files}.")
    return (
        f"No {_joined(list(map(repr, missing)))} side{'s' if len(missing) > 1 else ''} for {flag} {prefix}: its files "
        f"are in "
        f"{_joined(list(found))} ({names}), not {' or '.join(missing)}; {fix}"
    )


def _joined(words: list[str]) -> str:
    """a, b and c."""
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _no_folder_message(prefix: str, folder: Path, flag: str, looked: str) -> str:
    """The message for a prefix whose folder is not there: where a relative path was looked for (the current
    directory it is read from, the absolute path it came to) and how far that path exists."""
    absolute = Path(os.path.abspath(folder))
    there = next(path for path in (absolute, *absolute.parents) if path.exists())  # how far the path exists
    why = (f"{there} has no {absolute.relative_to(there).parts[0]!r}" if there.is_dir()
           else f"{there} is a file, not a folder")
    if prefix.startswith("~"):
        where, fix = why, ("The shell did not expand ~ (it does not after = or inside quotes): write $HOME/... or "
                           "the full path")
    elif folder.is_absolute() or not there.is_dir():
        where, fix = why, "Check the path"
    else:
        where = (f"the path is relative to the current directory, {Path.cwd()}, so it is {absolute}, and {why}")
        fix = ("Run the command from the folder the path is relative to, or give the path from the current "
               "directory or an absolute one")
    return f"No folder {folder} for {flag} {prefix} (looked for {looked}): {where}. {fix}."


def _folder_for_prefix_message(folder: Path, flag: str, source_lang: str, target_lang: str) -> str:
    """The message for a folder given as a prefix: the prefixes of the plain parallel text in it, as flags."""
    text = _parallel_text_in_folder(folder, source_lang, target_lang)
    about = ("(a prefix is the files' path without the language: <prefix>.<source_lang> and "
             "<prefix>.<target_lang>, .gz or not)")
    if text is None:
        example = folder / "train"
        return (f"{flag} {folder} is a folder, not a prefix, and holds no <name>.<lang> files of parallel text: "
                f"give the prefix of the files, e.g. {flag} {_shell(example)} for {example}.{source_lang} and "
                f"{example}.{target_lang} {about}.")
    shown, given, languages = text
    return (f"{flag} {folder} is a folder, not a prefix: it holds plain parallel text ({shown}), so give {given} "
            f"{about}.{languages}")


def _no_such_prefix_message(prefix: Path, flag: str, looked: str, source_lang: str, target_lang: str) -> str:
    """The message for a prefix that names no file in its folder: the prefixes there whose names are like it (a
    typo, `training` for `train`, `validation` for `val`), else those there are."""
    stems = _parallel_text_stems(prefix.parent)
    name = prefix.name.lower()

    def like(stem: str) -> bool:
        split = _PREFIX_SPLITS.get(re.split(r"[._-]", stem)[0].lower())
        return (stem.lower().startswith(name) or name.startswith(stem.lower())
                or bool(difflib.get_close_matches(name, [stem.lower()], cutoff=0.7))
                or (split is not None and split == _PREFIX_SPLITS.get(re.split(r"[._-]", name)[0])))

    paired = [stem for stem, langs in stems.items() if {source_lang, target_lang} <= langs]
    close = [stem for stem in (paired or list(stems)) if like(stem)][:2]
    folder = prefix.parent
    if close:
        names = {stem: ", ".join(file.name for file in _prefix_languages(folder / stem).values()) for stem in close}
        shown = " or ".join(f"{flag} {_shell(folder / stem)} ({names[stem]})" for stem in close)
        return f"No file {looked}: {folder} has no {prefix.name}.<lang> file; did you mean {shown}?"
    if stems:
        shown = ", ".join(f"{stem}.* ({', '.join(sorted(langs))})" for stem, langs in list(stems.items())[:5])
        return (f"No file {looked}: {folder} has no {prefix.name}.<lang> file, and its plain parallel text is "
                f"{shown}{', ...' if len(stems) > 5 else ''}: check the name, or give {flag} one of those prefixes "
                f"({folder}/<name>).")
    return (f"No file {looked}: {folder} holds no <name>.<lang> files of parallel text. A prefix names line-aligned "
            f"files <prefix>.<source_lang> and <prefix>.<target_lang> (optionally .gz): check the path.")


# ---- choosing a source: Hub, JSON lines, plain text, or built-in ----


@dataclass
class TranslationDataArguments:
    """Where the parallel data comes from; give exactly one of dataset_name, *_file, *_prefix, builtin_dataset.

    Field names follow transformers' translation example so its command lines carry over; `*_prefix` adds plain
    parallel text (`--train_prefix data/train --source_lang en --target_lang de` reads `data/train.en(.gz)` and
    `data/train.de(.gz)`), and `builtin_dataset number_words` needs no files nor network.
    """

    source_lang: str | None = field(default=None, metadata={"help": "Source language id, e.g. 'en'."})
    target_lang: str | None = field(default=None, metadata={"help": "Target language id, e.g. 'de'."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset, e.g. 'wmt/wmt14' (network)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset config, e.g. 'de-en'."})
    train_file: str | None = field(
        default=None,
        metadata={"help": "JSON lines with a 'translation' field or a field per language, or a CSV/TSV file whose "
                          "header names the languages' columns."},
    )
    validation_file: str | None = field(default=None, metadata={"help": "as train_file"})
    test_file: str | None = field(default=None, metadata={"help": "as train_file"})
    train_prefix: str | None = field(
        default=None, metadata={"help": "Plain parallel text: '<prefix>.<lang>' files, optionally '.gz'."}
    )
    validation_prefix: str | None = field(default=None, metadata={"help": "As train_prefix, e.g. 'data/val'."})
    test_prefix: str | None = field(default=None, metadata={"help": "As train_prefix, e.g. 'data/test'."})
    max_length_chars: int | None = field(
        default=None,
        metadata={"help": "Leave out training pairs with a side longer than this many characters (validation and "
                          "test keep every pair)."},
    )
    builtin_dataset: str | None = field(
        default=None, metadata={"help": "'number_words': German->English number words, generated offline."}
    )
    number_words_train_size: int = field(default=10_000, metadata={"help": "number_words training pairs."})
    number_words_eval_size: int = field(default=500, metadata={"help": "number_words validation and test pairs."})
    cache_dir: str | None = field(default=None, metadata={"help": "Cache directory for datasets.load_dataset."})


BUILTIN_DATASETS = ("number_words",)


def check_languages_given(args: TranslationDataArguments) -> None:
    """Both languages named; an InputError that suggests them from the files of a `*_prefix` otherwise."""
    if args.source_lang is not None and args.target_lang is not None:
        return
    hint = ""
    if prefix := args.train_prefix or args.validation_prefix or args.test_prefix:
        found = list(_prefix_languages(prefix))
        if len(found) == 2:
            hint = (f" ({prefix}.{found[0]} and {prefix}.{found[1]} are there: e.g. --source_lang {found[0]} "
                    f"--target_lang {found[1]})")
    raise InputError(
        "Give --source_lang and --target_lang with your own data: the ids of the language translated from and into, "
        f"as the files or columns name them{hint}."
    )


def load_translation_datasets(args: TranslationDataArguments, keep_blank_evaluation_pairs: bool = False) -> DatasetDict:
    """Load the splits `args` names (train/validation/test, as given) as a DatasetDict with a `translation` column
    (made from a text column per language where the data has those instead).

    Pairs without text on a side are left out with a warning; with `keep_blank_evaluation_pairs`, the validation and
    test splits keep them in place (a missing side made "") so that translations written out line up with the
    data's lines: `rows_with_text` says which rows to translate and score. Training pairs with a side longer than
    `max_length_chars` are left out too, in every form of data; validation and test keep theirs."""
    check_languages_given(args)
    chosen = _chosen_sources(args)
    files = _split_paths(args.train_file, args.validation_file, args.test_file)
    if chosen == ["file", "prefix"] and all(_plain_text_side_prefix(path, (args.source_lang, args.target_lang))
                                            for path in files.values()):  # `--train_file data/train.en` with prefixes
        raise InputError(_plain_text_as_data_file_message(*next(iter(files.items())), args))
    if len(chosen) != 1:
        raise InputError(
            f"Give exactly one data source, got {chosen or 'none'}: --dataset_name (Hub), --train_file/"
            "--validation_file/--test_file (JSON lines, CSV, TSV), --train_prefix/--validation_prefix/--test_prefix "
            "(plain parallel text), or --builtin_dataset number_words."
        )
    loaders = {
        "dataset_name": _load_hub_dataset,
        "file": _load_data_files,
        "prefix": partial(_load_prefix_datasets, keep_blank_evaluation_pairs=keep_blank_evaluation_pairs),
        "builtin_dataset": _load_builtin_dataset,
    }
    datasets = loaders[chosen[0]](args)
    for split, dataset in datasets.items():
        dataset = _with_translation_column(dataset, args.source_lang, args.target_lang)
        _check_translation_column(dataset, split, args.source_lang, args.target_lang)
        if keep_blank_evaluation_pairs and split != "train":
            dataset = _blank_where_text_is_missing(dataset, split, args.source_lang, args.target_lang,
                                                   warn=chosen[0] != "prefix")  # plain text's lines were named
            has_pairs = bool(rows_with_text(dataset, args.source_lang, args.target_lang))
        else:
            dataset = _without_pairs_lacking_text(dataset, split, args.source_lang, args.target_lang)
            if split == "train" and args.max_length_chars is not None and chosen[0] != "prefix" and len(dataset):
                dataset = _without_too_long_pairs(dataset, args.max_length_chars, args.source_lang, args.target_lang)
            has_pairs = len(dataset) > 0  # (a training split of millions of pairs is not read row by row here)
        datasets[split] = dataset
        if not has_pairs:
            raise InputError(f"The {split} split has no sentence pairs: give it data, or leave the split out.")
        _warn_if_sides_are_the_same(dataset, split, args.source_lang, args.target_lang)
    _warn_about_evaluation_data(datasets, args.source_lang, args.target_lang)
    return datasets


def data_source_description(data_args: TranslationDataArguments, split: str = "train") -> str | None:
    """How the model card names, in words, the `split` (train, validation, test) of data that did not come from the
    Hub (None for a Hub dataset, or a split whose files are not named): local files and folders by their names
    alone, since the card is published with the model and a full path shows the user's folders (/home/alice/...)."""
    if data_args.builtin_dataset:
        return f"the built-in `{data_args.builtin_dataset}` corpus (number words generated with num2words)"
    prefix, file = getattr(data_args, f"{split}_prefix"), getattr(data_args, f"{split}_file")
    if prefix:
        try:  # the files read, .gz or not
            files = resolve_parallel_files(prefix, data_args.source_lang, data_args.target_lang)
        except FileNotFoundError:  # gone since
            files = [Path(f"{prefix}.{lang}") for lang in (data_args.source_lang, data_args.target_lang)]
        return "local files " + " and ".join(f"`{path.name}`" for path in files)
    if file:
        return f"the local file `{Path(file).name}`"
    if data_args.dataset_name and os.path.exists(data_args.dataset_name):
        return f"the local `datasets` folder `{Path(data_args.dataset_name).resolve().name}`"
    return None


def rows_with_text(dataset: Dataset, source_lang: str, target_lang: str) -> list[int]:
    """The rows of a `translation` dataset whose source and target both hold text (`pair_has_text`)."""
    return [row for row, pair in enumerate(dataset["translation"]) if pair_has_text(pair, source_lang, target_lang)]


def pair_has_text(pair: dict | None, source_lang: str, target_lang: str) -> bool:
    """Whether a `translation` pair's source and target are both strings and not blank. A side of invisible
    characters only (a zero-width space), which `normalize_text` removes, is blank too: a source as the translation
    pipeline reads it, a target as nothing to learn or score."""
    return (isinstance(pair, dict)  # None: a JSON line without "translation" among lines with it
            and all(isinstance(pair.get(lang), str) for lang in (source_lang, target_lang))
            and bool(normalize_text(pair[source_lang]) and normalize_text(pair[target_lang])))


DATA_SOURCES = {
    "dataset_name": ("dataset_name",),
    "file": ("train_file", "validation_file", "test_file"),
    "prefix": ("train_prefix", "validation_prefix", "test_prefix"),
    "builtin_dataset": ("builtin_dataset",),
}
"""The kinds of data source, each with the `TranslationDataArguments` fields that give it."""


def _chosen_sources(args: TranslationDataArguments) -> list[str]:
    """Names of the kinds of data source that `args` sets."""
    return [kind for kind, fields in DATA_SOURCES.items() if any(getattr(args, name) is not None for name in fields)]


def _load_hub_dataset(args: TranslationDataArguments) -> DatasetDict:
    """`datasets.load_dataset(dataset_name, dataset_config_name)`; needs the network or a warm cache. A folder
    written by `save_to_disk` is read into the cache (`_into_cache`); a local folder of JSON lines, CSV or TSV files
    is read as `--train_file` reads them (`_load_folder_files`); a local folder's unreadable file is an InputError."""
    folder = Path(args.dataset_name)
    if folder.is_file():  # else taken for a Hub id: the Hub's retries, then "Couldn't reach ... on the Hub"
        raise InputError(
            f"--dataset_name {args.dataset_name} is a file: --dataset_name takes a Hub id or a folder (of a dataset "
            f"saved with save_to_disk, or of data files named for their splits: --dataset_name {folder.parent}), and "
            "--train_file, --validation_file and --test_file take JSON lines or CSV/TSV files."
        )
    if (folder / "dataset_dict.json").is_file():
        return _load_saved_splits(folder, args.cache_dir)
    if (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file():
        # one Dataset saved with `save_to_disk`: its rows are the train split
        logger.info("%s holds one dataset saved with save_to_disk: it is the train split", folder)
        _refuse_empty_saved_splits(folder, [""])
        with loading_from(folder, "the dataset"):
            return _into_cache({"train": load_from_disk(str(folder))}, args.cache_dir)
    by_names = folder.is_dir() and not _folder_card_names_its_data(folder)  # splits taken from the file names
    files = _folder_data_files(folder) if by_names else None
    if by_names and files is None:
        _refuse_parallel_text_folder(folder, args.source_lang, args.target_lang)
    if files and not args.dataset_config_name and all(
        _data_file_format(path) for paths in files.values() for path in paths
    ):
        datasets = _load_folder_files(folder, files, args)
    else:
        with loading_from(args.dataset_name, "the dataset"):  # offline, a misspelt id or config: one line says so
            try:
                with _quiet_file_readers():
                    datasets = load_dataset(args.dataset_name, args.dataset_config_name, cache_dir=args.cache_dir)
            except (DatasetGenerationError, *_GZIP_ERRORS) as error:
                if not folder.is_dir():
                    raise
                raise InputError(f"Cannot load the dataset from {folder}: {_folder_problem(folder, error)}") from error
    if files is not None:
        _warn_about_guessed_splits(folder, files)
        _warn_about_plain_text_beside(folder, files, (args.source_lang, args.target_lang))
    return datasets


def _warn_about_plain_text_beside(folder: Path, files: dict[str, list[Path]], languages: tuple[str, str]) -> None:
    """Warn where a folder of data files also holds plain parallel text (`val.de`, `val.en`), which
    `load_dataset` does not read: a run went on without that split, and without a word."""
    read = {path.name for paths in files.values() for path in paths}
    sides = sorted(path.name for path in folder.iterdir() if path.is_file() and path.name not in read
                   and Path(path.name.removesuffix(".gz")).suffix[1:] in languages)
    if sides:
        logger.warning(
            f"{folder}: the plain text files {', '.join(sides)} are not read: --dataset_name reads a folder's JSON "
            f"lines, CSV or TSV files ({', '.join(sorted(read))}). Give all the data as plain text (--train_prefix, "
            "--validation_prefix, --test_prefix), or write those pairs into a file of the others' kind."
        )


def _folder_data_files(folder: Path) -> dict[str, list[Path]] | None:
    """The data files `load_dataset` takes from a local folder, by the split their names give (`train.jsonl`,
    `valid.csv`, `test-00001.tsv.gz`); None where it finds none."""
    from datasets.data_files import DataFilesDict, get_data_patterns

    try:  # the suffixes `load_dataset` takes for data files (a private name: without it, any file's)
        from datasets.load import _ALL_ALLOWED_EXTENSIONS as allowed
    except ImportError:
        allowed = None
    try:
        resolved = DataFilesDict.from_patterns(get_data_patterns(str(folder)), base_path=str(folder),
                                               allowed_extensions=allowed)
    except FileNotFoundError:  # no file datasets knows by its name
        return None
    return {str(split): [Path(file) for file in files] for split, files in resolved.items() if files} or None


def _folder_card_names_its_data(folder: Path) -> bool:
    """Whether a local folder's dataset card (README.md's YAML header, or .huggingface.yaml) says which files make
    which split or config: `load_dataset` reads the folder as the card says."""
    from huggingface_hub import DatasetCard

    readme = folder / "README.md"
    return (folder / ".huggingface.yaml").is_file() or (readme.is_file() and "configs" in DatasetCard.load(readme).data)


def _load_folder_files(folder: Path, files: dict[str, list[Path]], args: TranslationDataArguments) -> DatasetDict:
    """A local folder's JSON lines, CSV and TSV files (`files`, by split), each read as `--train_file` reads it
    (`_FILE_FORMATS`: every CSV/TSV cell is text, in TSV quotes are text, JSON numbers are their text); all of the
    folder's CSV/TSV files need the first one's header row, as `load_dataset` wants one set of columns."""
    header = None
    splits = {}
    for split, paths in files.items():
        if len({str(_data_file_format(path)) for path in paths}) > 1:
            raise InputError(
                f"Cannot load the dataset from {folder}: its {split} split is made of files of different formats "
                f"({', '.join(path.name for path in paths)}). Keep one format a split, or give the files with "
                "--train_file/--validation_file/--test_file."
            )
        for path in paths:
            if _is_blank(path):
                raise InputError(f"{path} is empty: give it data, or move it out of {folder}.")
            if _data_file_format(path)[0] == "csv":
                columns = _csv_header(path, _data_file_format(path)[1])
                header = header or (path, columns)
                if columns != header[1]:
                    raise InputError(f"Cannot load the dataset from {folder}: "
                                     f"{_different_columns_message(path, columns, header[1])}")
        try:
            splits[split] = _read_data_files(split, paths, args, header and header[1])
        except (DatasetGenerationError, ValueError, *_GZIP_ERRORS) as error:
            if isinstance(error, USER_ERRORS):
                raise
            raise InputError(f"Cannot load the dataset from {folder}: {_folder_problem(folder, error)}") from error
    return DatasetDict(splits)


_PREFIX_SPLITS = {"train": "train", "val": "validation", "valid": "validation", "validation": "validation",
                  "dev": "validation", "test": "test"}


def _refuse_parallel_text_folder(folder: Path, source_lang: str, target_lang: str) -> None:
    """An InputError that says to give `--train_prefix` where a folder without data files `load_dataset` reads
    holds plain parallel text (`train.en` and `train.de`, or Multi30k's `train.en.gz`), and which languages it has
    where they are not `source_lang` and `target_lang`; nothing otherwise."""
    if (text := _parallel_text_in_folder(folder, source_lang, target_lang)) is None:
        return
    shown, given, languages = text
    raise InputError(
        f"{folder} holds plain parallel text ({shown}), which --dataset_name does not read: give it with {given} "
        f"(a prefix names the files <prefix>.<source_lang> and <prefix>.<target_lang>, .gz or not).{languages}"
    )


def _parallel_text_stems(folder: Path) -> dict[str, set[str]]:
    """The prefixes (file names without the language) of the plain text files in `folder`, each with its
    languages: {"train": {"en", "de"}} for `train.en` and `train.de.gz`."""
    stems = {}
    for path in sorted(folder.iterdir()):
        stem, _, lang = path.name.removesuffix(".gz").rpartition(".")
        if stem and lang and lang.lower() not in _NOT_LANGUAGES and path.is_file():
            stems.setdefault(stem, set()).add(lang)
    return stems


def _parallel_text_in_folder(folder: Path, source_lang: str, target_lang: str) -> tuple[str, str, str] | None:
    """What a message says of the plain parallel text in `folder`: (the files, "train.en and train.de, val.en and
    val.de"; the prefix flags to give, "--train_prefix F/train --validation_prefix F/val"; "" or a sentence
    naming its languages where they are not `source_lang` and `target_lang`); None where it holds none."""
    stems = _parallel_text_stems(folder)
    matching = sorted(stem for stem, langs in stems.items() if {source_lang, target_lang} <= langs)
    prefixes = matching or sorted(stem for stem, langs in stems.items() if len(langs) >= 2)
    if not prefixes:
        return None
    flags = {}
    for stem in prefixes:  # the split each prefix's name says: train, val (valid, dev, validation), test
        if split := _PREFIX_SPLITS.get(re.split(r"[._-]", stem)[0].lower()):
            flags.setdefault(split, stem)
    flags = dict(sorted(flags.items(), key=lambda item: SPLITS.index(item[0]))) or {"train": prefixes[0]}
    given = " ".join(f"--{split}_prefix {_shell(folder / stem)}" for split, stem in flags.items())
    if matching:
        return ", ".join(f"{stem}.{source_lang} and {stem}.{target_lang}" for stem in prefixes), given, ""
    found = sorted(set().union(*(stems[stem] for stem in prefixes)))
    missing = " and ".join(f"{lang!r}" for lang in (source_lang, target_lang) if lang not in found)
    shown = f"{', '.join(stem + '.*' for stem in prefixes)} in {', '.join(found)}"
    return shown, given, (f" It has no {missing} files: give --source_lang and --target_lang among its languages "
                          f"({', '.join(found)}).")


def _warn_about_guessed_splits(folder: Path, files: dict[str, list[Path]]) -> None:
    """Warn, naming the files, where `load_dataset` took a local folder's splits (`files`, from
    `_folder_data_files`) from file names that do not say them plainly: `mytrain.jsonl` and `holdout.jsonl` both
    trained on, `eval.jsonl` made test, `valid.jsonl` and `dev.jsonl` merged, `extra.jsonl` not read."""
    names = {split: sorted(path.name for path in paths) for split, paths in files.items()}
    read = {path.name for paths in files.values() for path in paths}
    suffixes = {Path(name).suffix for name in read}
    unread = sorted(path.name for path in folder.iterdir() if path.suffix in suffixes and path.name not in read)
    stems = {split: sorted({re.split(r"[.-]", name)[0] for name in files}) for split, files in names.items()}
    # valid.jsonl (or dev) alone is validation, as the README says; beside each other they are merged
    if not unread and all(len(found) == 1 and _SPLIT_ALIASES.get(found[0], found[0]) == split
                          for split, found in stems.items()):
        return
    shown = "; ".join(f"{split} = {', '.join(files)}" for split, files in names.items())
    logger.warning(
        f"{folder}: datasets took the splits from the file names, as {shown}"
        f"{'; not read: ' + ', '.join(unread) if unread else ''}. Check that no held-out file is trained on: name "
        "the files train, validation and test (.jsonl, .csv, ...), or give them with --train_file/--validation_file"
        "/--test_file."
    )


_SPLIT_ALIASES = {"valid": "validation", "dev": "validation"}


def _load_saved_splits(folder: Path, cache_dir: str | None) -> DatasetDict:
    """A DatasetDict saved with `save_to_disk`, its splits named train, validation and test (`valid` or `dev` taken
    for validation, with a word); InputError for any other name, which `load_dataset` would guess at (`holdout`
    trained on, `eval` made test, `extra` dropped)."""
    splits = []
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # else load_from_disk says what is wrong
        splits = list(json.loads((folder / "dataset_dict.json").read_text())["splits"])
    _refuse_empty_saved_splits(folder, splits)
    with loading_from(folder, "the dataset"):
        saved = load_from_disk(str(folder))  # memory-mapped, for its split names; read into the cache once named
    names = {name: _SPLIT_ALIASES.get(name, name) for name in saved}
    unknown = [name for name, split in names.items() if split not in SPLITS]
    doubled = [name for name, split in names.items() if split in SPLITS and list(names.values()).count(split) > 1]
    if unknown or doubled:
        free = iter(split for split in SPLITS if split not in names.values())
        renamed = {}  # the example: each split name once, an unknown split given a free one, in order
        for name in saved:
            split = next(free, None) if name in unknown else names[name]
            if split is not None and split not in renamed:
                renamed[split] = name
        example = ", ".join(f'"{split}": d["{name}"]' for split, name in renamed.items())
        problem = (f"{_joined(list(map(repr, doubled)))} would both be {names[doubled[0]]}" if doubled else
                   f"{_joined(list(map(repr, unknown)))} "
                   f"{'is no split name' if len(unknown) == 1 else 'are no split names'}")
        raise InputError(
            f"{folder} holds the splits {list(saved)}: {problem} here. Training reads the splits train, validation "
            "and test (valid or dev as validation), and will not guess which data to train on or hold out. Save "
            f"them again under those names, e.g. `d = load_from_disk(\"{folder}\"); DatasetDict({{{example}}})"
            f".save_to_disk(\"{folder}-renamed\")`, leaving out the ones not to use."
        )
    for name, split in names.items():
        if name != split:
            logger.warning(f"{folder}: its split {name!r} is read as the {split} split.")
    with loading_from(folder, "the dataset"):
        return _into_cache({names[name]: dataset for name, dataset in saved.items()}, cache_dir)


def _refuse_empty_saved_splits(folder: Path, splits: list[str]) -> None:
    """InputError for the splits of a `save_to_disk` folder that hold no rows ("" for one Dataset's folder): datasets
    saves such a split with no data file, and its `load_from_disk` then fails with an IndexError deep inside."""
    def holds_no_file(split: str) -> bool:
        try:
            return not json.loads((folder / split / "state.json").read_text())["_data_files"]
        except (OSError, ValueError, KeyError, TypeError):  # load_from_disk says what is wrong with it
            return False

    empty = [split for split in splits if holds_no_file(split)]
    if empty == [""]:
        raise InputError(f"{folder} holds no sentence pairs: it was saved with save_to_disk from an empty dataset.")
    if empty:
        raise InputError(
            f"{folder}: its {_joined(list(map(repr, empty)))} split{'s' if len(empty) > 1 else ''} "
            f"hold{'' if len(empty) > 1 else 's'} no sentence pairs (save_to_disk wrote no data file, and datasets "
            "cannot read such a split back). Save the data again without "
            f"{'them' if len(empty) > 1 else 'it'}, or delete {_joined([str(folder / split) for split in empty])} "
            f"and {'their names' if len(empty) > 1 else 'its name'} in {folder / 'dataset_dict.json'}."
        )


def _into_cache(saved: dict[str, Dataset], cache_dir: str | None) -> DatasetDict:
    """Splits `load_from_disk` gave, read again as `load_dataset("arrow")` reads their files: into the cache
    (`cache_dir`, else datasets'), where the filters and maps that follow write their copies too, as for data files.
    Loaded from disk, datasets writes its processed copies beside the files it read: new cache-*.arrow files in the
    user's data folder on each run with other settings (an OSError where it is read-only), which `--dataset_name` on
    the folder above then took for data."""
    files = {name: [each["filename"] for each in split.cache_files] for name, split in saved.items()}
    return load_dataset("arrow", data_files=files, cache_dir=cache_dir)


@contextlib.contextmanager
def _quiet_file_readers() -> Iterator[None]:
    """Silence the error log line that `datasets`' JSON and CSV readers write before raising: the InputError made of
    their exception says it once, in one line."""
    loggers = [logging.getLogger(f"datasets.packaged_modules.{kind}.{kind}") for kind in ("json", "csv")]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def _folder_problem(folder: Path, error: BaseException) -> str:
    """Why `load_dataset` could not read a local folder of data files, in one line naming the file where it can."""
    data_files = [path for path in sorted(folder.rglob("*")) if path.is_file() and _data_file_format(path)
                  and not any(part.startswith(".") for part in path.relative_to(folder).parts)]
    cause = error.__cause__ or error.__context__
    if isinstance(cause, CastError):  # a file whose columns differ from the first file's
        odd = next((str(path) for path in data_files if _columns(path) == cause.table_column_names), "a file")
        return _different_columns_message(odd, cause.table_column_names, cause.requested_column_names)
    for path in data_files:
        if bad_line := _first_bad_line(path, _data_file_format(path)[0]):
            return f"in {path}, {bad_line}."
    return _one_line(cause or error)


def _different_columns_message(path: str | Path, columns: list[str], first_columns: list[str]) -> str:
    """What to say of a data file of a folder whose columns are not the first file's."""
    return (
        f"its data files must all have the same columns, but {path} has {columns} where the first has "
        f"{first_columns}. Give every file the same header row or fields (a CSV file without a header row takes its "
        "first pair for column names)."
    )


def _data_file_format(path: Path) -> tuple[str, dict] | None:
    """The `datasets` builder and options for a `--*_file` (by its suffix, `.gz` allowed); None for other files. A
    TSV file whose fields are quoted as CSV writers quote them (`_quoted_as_csv`) is read with their quoting."""
    found = _FILE_FORMATS.get(Path(path.name.removesuffix(".gz")).suffix.lower())
    if found and found[1].get("quoting") == csv.QUOTE_NONE and path.is_file() \
            and _quoted_as_csv(path, path.stat().st_mtime_ns):
        return found[0], {**found[1], "quoting": csv.QUOTE_MINIMAL}
    return found


_CSV_QUOTED_FIELD = re.compile(r'"(?:[^"]|"")*""(?:[^"]|"")*"')


@lru_cache(maxsize=64)
def _quoted_as_csv(path: Path, mtime_ns: int) -> bool:
    """Whether a TSV file quotes its fields as CSV writers do (pandas' `to_csv(sep="\\t")`, Python's csv module,
    `Dataset.to_csv`): a field in quotes with its own quotes doubled, `"He said ""hi""."`. TSV corpora mostly hold
    quotes as text, which is how the others are read. The whole file is looked at: pandas quotes only the fields
    that need it, and the first may come late. (`mtime_ns`: the file's, so that a file rewritten is looked at
    again.)"""
    with io.TextIOWrapper(_open_binary(path), encoding="utf-8-sig", errors="replace", newline="") as text:
        for line in text:
            if '""' not in line:
                continue
            fields = line.rstrip("\r\n").split("\t")
            if any(_CSV_QUOTED_FIELD.fullmatch(field) for field in fields):
                logger.info("%s quotes its fields as CSV does (%s): read so, its quotes taken out and doubled "
                            "quotes made one", path, next(f for f in fields if _CSV_QUOTED_FIELD.fullmatch(f))[:40])
                return True
    return False


def _columns(path: Path) -> list[str] | None:
    """The column names of a CSV/TSV file's header row, or the fields of a JSON lines file's first row."""
    builder, options = _data_file_format(path)
    if builder == "csv":
        return _csv_header(path, options)
    with io.TextIOWrapper(_open_binary(path), encoding="utf-8-sig", errors="replace") as text:
        try:
            return list(json.loads(next((line for line in text if line.strip()), "")))
        except (ValueError, TypeError):
            return None


def _one_line(error: BaseException) -> str:
    """A library's error message in one line, without pyarrow's "in row N" (0-based, and counted within a block of
    the file, so no line number of it)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return re.sub(r" in row \d+", "", text).removesuffix(".") + "."


def _first_bad_line(path: Path, builder: str) -> str | None:
    """The first line of a data file that cannot be read, as "line N is ..." (1-based); None if none is found.

    In JSON lines, lines that are not one JSON object each; a file that starts as one JSON document (a list, or an
    object over many lines) is checked as one. Raises InputError for a damaged .gz, and for a line that is not UTF-8
    (`_not_utf8_message`: the command that converts the file)."""
    document: list[str] | None = None  # the lines of a file that is one JSON document, from its first line on
    seen_text = False
    for line_number, raw in enumerate(_raw_lines(path), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:  # the whole message, with the command that converts the file
            raise InputError(_not_utf8_message(path, line_number, raw, error.start)) from error
        text = line.strip().removeprefix("\ufeff")
        if builder != "json" or not (text or document):
            continue
        if not seen_text and (text.startswith("[") or text == "{"):
            document, first_line = [], line_number
        seen_text = True
        if document is not None:
            document.append(line.removeprefix("\ufeff"))
            continue
        try:
            row = json.loads(line.removeprefix("\ufeff").rstrip("\r\n"))  # columns counted as in the file
        except json.JSONDecodeError as error:
            return f"line {line_number} is not valid JSON ({error.msg} at column {error.colno})"
        if not isinstance(row, dict):
            return f"line {line_number} is not a JSON object {{...}}"
        if (big := _too_big_number(row)) is not None:  # pyarrow's "Value is too big! at position 14"
            return (f"line {line_number} holds the number {big}, larger than pyarrow reads (64 bits): write a number "
                    f"meant as text as a string, \"{big}\"")
    if document:
        try:
            json.loads("".join(document))
        except json.JSONDecodeError as error:
            return f"line {first_line + error.lineno - 1} is not valid JSON ({error.msg} at column {error.colno})"
    return None


def _too_big_number(value) -> int | None:
    """The first integer in a JSON value that a 64-bit integer cannot hold, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if not -2**63 <= value < 2**64 else None
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((big for child in children if (big := _too_big_number(child)) is not None), None)


_FILE_FORMATS = {
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".csv": ("csv", {"na_filter": False, "encoding": "utf-8-sig", "index_col": False}),  # "null", "NA": words here
    ".tsv": ("csv", {"na_filter": False, "encoding": "utf-8-sig", "index_col": False, "delimiter": "\t",
                     "quoting": csv.QUOTE_NONE}),
}
"""`--*_file` suffixes (each also with `.gz`): the `datasets` builder and its options. CSV and TSV: every value is
text (no missing-value words), a byte order mark (spreadsheets write one) is no part of the first column's name, in
TSV quotes are text (but see `_quoted_as_csv`), and no column is taken for the rows' index (pandas takes the first
where the first data row has a field more than the header row names: the English then read as the index, the German
as the English, and a score column as the German; `_csv_columns` refuses such a file)."""


def _load_data_files(args: TranslationDataArguments) -> DatasetDict:
    """Load `--train_file/--validation_file/--test_file`: JSON lines (`.json`, `.jsonl`, as in transformers'
    translation example), or CSV/TSV (`.csv`, `.tsv`) whose header row names the columns; optionally `.gz`."""
    splits = {}
    for split, path in _split_paths(args.train_file, args.validation_file, args.test_file).items():
        suffix = Path(path.removesuffix(".gz")).suffix.lower()
        if suffix not in _FILE_FORMATS:
            raise InputError(_plain_text_as_data_file_message(split, path, args))
        if not Path(path).is_file():
            raise MissingFileError(f"No file {path}: check the --{split}_file path.")
        if _is_blank(Path(path)):  # `datasets` would fail on it with a bare StopIteration
            raise InputError(f"{path} is empty: the {split} split has no sentence pairs. Give it data, or leave "
                             f"--{split}_file out.")
        try:
            splits[split] = _read_data_files(split, [Path(path)], args)
        except (DatasetGenerationError, ValueError, *_GZIP_ERRORS) as error:
            if isinstance(error, USER_ERRORS):
                raise
            builder, options = _FILE_FORMATS[suffix]
            if builder == "csv" and (message := _row_past_the_header(Path(path), options, args)):
                raise InputError(message) from error  # pandas' "Expected 2 fields in line 4, saw 3", and why
            raise _unreadable_file_error(Path(path), builder, error) from error
    return DatasetDict(splits)


def _row_past_the_header(path: Path, options: dict, args: TranslationDataArguments,
                         named: list[str] | None = None) -> str | None:
    """What to say of the first row of a CSV/TSV file with text in fields past the columns its header row names
    (`named`, else its own: `_named_columns`), or None where there is none (`_unnamed_fields_message`)."""
    try:
        rows = _csv_rows(path, options)
        header = next(rows, (0, []))[1]
        named = _named_columns(header) if named is None else named
        for line_number, row in rows:
            if any(field.strip() for field in row[len(named):]):
                return _unnamed_fields_message(path, line_number, row, named, options, args)
    except (csv.Error, *_GZIP_ERRORS):  # a damaged .gz file, or not CSV: `_unreadable_file_error` says what
        pass
    return None


def _plain_text_side_prefix(path: str, languages: tuple[str | None, ...] = ()) -> tuple[Path, dict[str, Path]] | None:
    """Where `path` is one side of plain parallel text (`data/train.en.gz`: its ending a language, with a file of
    another language beside it, one of `languages`, or a language id this package knows), its prefix and the
    languages there for it (`data/train`, {"de": ..., "en": ...}); None otherwise (`notes.txt`)."""
    stem, _, lang = Path(path).name.removesuffix(".gz").rpartition(".")
    if not stem or not lang or lang.lower() in _NOT_LANGUAGES:
        return None
    prefix = Path(path).parent / stem
    found = _prefix_languages(prefix)
    known = lang in languages or language_code(lang) in LANGUAGE_NAMES
    if len(found) < 2 and not known:
        return None
    return prefix, found


def _tab_separated(path: Path, lines: int = 20) -> bool:
    """Whether the first lines of a text file each hold one tab: pairs, in a file not named .tsv."""
    try:
        with io.TextIOWrapper(_open_binary(path), encoding="utf-8", errors="replace") as text:
            first = [line.rstrip("\r\n") for _, line in zip(range(lines), text)]
    except (OSError, EOFError):
        return False
    first = [line for line in first if line.strip()]
    return bool(first) and all(line.count("\t") == 1 for line in first)


def _plain_text_as_data_file_message(split: str, path: str, args: TranslationDataArguments) -> str:
    """What to say of a `--{split}_file` that is no JSON lines, CSV or TSV file: where it is a side of plain
    parallel text, the `--*_prefix` flags (with the languages) that read it and the other `--*_file`s given alike."""
    side = _plain_text_side_prefix(path, (args.source_lang, args.target_lang))
    if Path(path).suffix.lower() in (".parquet", ".arrow"):  # `datasets` reads them, from a folder (no header row)
        return (f"{path}: --{split}_file reads JSON lines (.json/.jsonl) or CSV/TSV (.csv/.tsv); Parquet and Arrow "
                f"files are read from a folder that holds them named for their splits: --dataset_name "
                f"{_shell(Path(path).parent)} (train{Path(path).suffix}, validation{Path(path).suffix}, ...).")
    if side is None and _tab_separated(Path(path)):
        return (f"{path}: --{split}_file reads a file by its name's ending, and this one's lines seem to hold "
                "tab-separated pairs: name it .tsv, with a header row naming the languages' columns (e.g. "
                f"{args.source_lang or 'de'}<TAB>{args.target_lang or 'en'}).")
    if side is None:
        return (f"{path}: --{split}_file expects JSON lines (.json/.jsonl) or CSV/TSV with a header row (.csv/.tsv); "
                f"use --{split}_prefix for plain text, one sentence a line.")
    given = _split_paths(args.train_file, args.validation_file, args.test_file)
    sides = {each: _plain_text_side_prefix(file, (args.source_lang, args.target_lang)) for each, file in given.items()}
    sides = {each: side for each, side in sides.items() if side is not None}
    languages = []
    for option, lang in (("--source_lang", args.source_lang), ("--target_lang", args.target_lang)):
        if lang is not None:
            languages.append(f"{option} {_meant_language(lang, list(side[1])) or lang}")
    flags = " ".join([*(f"--{each}_prefix {_shell(prefix)}" for each, (prefix, _) in sides.items()), *languages])
    files = f" ({', '.join(file.name for file in side[1].values())})" if side[1] else ""
    return (f"{path} is one side of plain parallel text, which --{split}_file does not read (it reads JSON lines, "
            f"CSV or TSV): give {flags} in place of {'/'.join(f'--{each}_file' for each in sides)}; a prefix names "
            f"the files <prefix>.<lang>, .gz or not, here {side[0]}.*{files}.")


def _read_data_files(split: str, paths: list[Path], args: TranslationDataArguments,
                     header: list[str] | None = None) -> Dataset:
    """One split's data files, all of one format (`_FILE_FORMATS`), read with `load_dataset`: CSV/TSV with every
    column of the first file's header row (or `header`) read as text, and the empty fields that rows may end with
    (`_csv_columns`) read and dropped; JSON with its language fields read as text (`_json_files_as_text`) where
    `datasets` read them as something else. A ValueError (which the callers make an InputError naming the line) for
    JSON text that is not UTF-8."""
    for path in paths:  # UTF-16 (as Excel saves "Unicode Text"): read as UTF-8, its header was names full of NULs
        first = next(_raw_lines(path), b"")
        if utf16_encoding(first) or b"\0" in first:
            raise InputError(_not_utf8_message(path, 1, first, first.find(b"\0")))
    builder, options = _data_file_format(paths[0])
    trailing, unnamed = [], []
    if builder == "csv":  # every column read as text, so that a column of numbers is not made integers
        named, trailing = _csv_columns(paths, options, header or _csv_header(paths[0], options), args)
        if numbers := [column for column, name in enumerate(named, 1) if not name.strip()]:
            logger.info("%s: its header row leaves column %s without a name (the rows' index, which pandas' to_csv() "
                        "writes without index=False): not read", paths[0], " and ".join(map(str, numbers)))
            named = [name if name.strip() else f"(unnamed column {column})" for column, name in enumerate(named, 1)]
            unnamed = [f"(unnamed column {column})" for column in numbers]
        options = {**options, "features": Features.from_dict(
            {name: {"dtype": "string", "_type": "Value"} for name in named + trailing})}
        if trailing or unnamed:  # the header row's names, and names for the fields it leaves unnamed
            options |= {"names": named + trailing, "header": 0}
    with _quiet_file_readers():
        dataset = load_dataset(builder, data_files={split: [str(path) for path in paths]}, cache_dir=args.cache_dir,
                               **options)[split]
    if trailing:
        _refuse_text_in_trailing_fields(dataset, paths, options, named, trailing, args)
    if trailing or unnamed:
        dataset = dataset.remove_columns(trailing + unnamed)
    if builder == "json":  # pyarrow's JSON reader keeps bytes that are not UTF-8 in its strings, where they failed
        dataset.data.table.validate(full=True)  # when first read, in a traceback: ArrowInvalid (a ValueError) here
    if builder == "json" and not _language_fields_are_text(dataset.features, args.source_lang, args.target_lang):
        dataset = _json_files_as_text(paths, args.source_lang, args.target_lang) or dataset
    return dataset


def _csv_columns(paths: list[Path], options: dict, header: list[str],
                 args: TranslationDataArguments) -> tuple[list[str], list[str]]:
    """The columns a split's CSV/TSV files are read with: the names of the `header` row, and names for the empty
    fields past them that the rows end with where a tool writes a delimiter at the end of each row (`en<TAB>de<TAB>`
    above `Hello<TAB>Hallo<TAB>`): the header row's empty names at its end, and the first data row's fields past the
    named columns, where they are empty. Where a first data row has text in a field past the named columns (a score
    column without a name, or a sentence split at a comma), InputError naming the line: which fields are the
    columns' is not clear, and pandas read such a file with the English taken for an index and a score for the
    German."""
    named = _named_columns(header)
    width = len(header)
    for path in paths:
        rows = _csv_rows(path, options)
        next(rows, None)  # the header row
        line_number, row = next(rows, (0, []))
        if any(field.strip() for field in row[len(named):]):
            raise InputError(_unnamed_fields_message(path, line_number, row, named, options, args))
        width = max(width, len(row))
    return named, [f"(unnamed field {column})" for column in range(len(named) + 1, width + 1)]


def _refuse_text_in_trailing_fields(dataset: Dataset, paths: list[Path], options: dict, named: list[str],
                                    trailing: list[str], args: TranslationDataArguments) -> None:
    """InputError naming the first line whose fields past the named columns hold text, where the first data row's
    were empty (`_csv_columns`): a row with a field too many, which would be read without it."""
    if not any(pc.max(pc.utf8_length(pc.utf8_trim_whitespace(dataset.data.column(name)))).as_py()
               for name in trailing):
        return
    for path in paths:
        if message := _row_past_the_header(path, options, args, named):
            raise InputError(message)
    raise InputError(_unnamed_fields_message(paths[0], None, [], named, options, args))  # not found again


def _named_columns(header: list[str]) -> list[str]:
    """A CSV/TSV header row's names without the empty ones at its end (a delimiter ending the row)."""
    named = list(header)
    while named and not named[-1].strip():
        named.pop()
    return named


def _unnamed_fields_message(path: Path, line_number: int | None, row: list[str], named: list[str], options: dict,
                            args: TranslationDataArguments) -> str:
    """What to say of a CSV/TSV row with text in fields past the columns its header row names."""
    texts = [field if len(field) <= 40 else field[:40] + "..." for field in row[len(named):] if field.strip()]
    where = (f"line {line_number} has {len(row)} fields, but the header row names {len(named)} columns {named}: "
             f"no column is named for its field{'s' if len(texts) > 1 else ''} {', '.join(map(repr, texts))}"
             if line_number is not None else f"a row has more fields than the header row names columns ({named})")
    comma = " (a field holding a comma goes in double quotes)" if options.get("delimiter", ",") == "," else ""
    if len(named) == 1 and (other := next((mark for mark in (";", "\t", "|") if mark in named[0]), None)):
        shown = {"\t": "tabs"}.get(other, repr(other))
        return (f"{path}: its header row {named[0]!r} is one column: the file separates its fields with {shown}, "
                f"not {'commas' if options.get('delimiter', ',') == ',' else 'tabs'} (a spreadsheet in a language "
                "that writes decimal commas saves CSV with ';'). Save it as CSV with commas (a field holding a comma "
                "in double quotes), or with tabs as .tsv.")
    return (f"{path}: {where}. Name every column in the header row (an extra one e.g. score: columns other than "
            f"{args.source_lang} and {args.target_lang} are not read), or remove the extra field{comma}.")


def _language_fields_are_text(features: Features, source_lang: str, target_lang: str) -> bool:
    """Whether `datasets` read the language fields of JSON data (a `translation` dict's, or the top level's) as
    text: a field that holds a number once is read as `Json`, which decodes the strings "1", "true" and "null" of
    its other rows into a number, a boolean and None, and a field of numbers only as integers."""
    places = [features["translation"]] if "translation" in features else []
    if not places or source_lang in features or target_lang in features:  # the flat rows of a file mixing forms too
        places.append(features)
    return all(
        isinstance(fields, dict)  # not `Json`: rows whose translation dicts have different keys
        and all(isinstance(fields[lang], Value) and fields[lang].dtype in ("string", "large_string")
                for lang in (source_lang, target_lang) if lang in fields)
        for fields in places
    )


_JSON_NUMBERS_AS_TEXT = {"parse_int": str, "parse_float": str, "parse_constant": str}
"""`json.loads` options that read a number as the text the file writes it in: 1999 -> "1999", 1.50 -> "1.50"."""


def _json_rows(path: Path) -> tuple[str, list] | None:
    """The rows of a JSON lines file, or of a file that is one JSON list, numbers read as their text, with what
    says where a row is: ("line", [(line number, row), ...]) or ("item", [(item number, row), ...]), counted from 1;
    None for a file of another layout."""
    text = b"".join(_raw_lines(path)).decode("utf-8").removeprefix("\ufeff")  # not UTF-8: the callers say where
    try:
        if text.lstrip().startswith("["):
            document = json.loads(text, **_JSON_NUMBERS_AS_TEXT)
            return ("item", list(enumerate(document, start=1))) if isinstance(document, list) else None
        return "line", [(number, json.loads(line, **_JSON_NUMBERS_AS_TEXT))
                        for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
    except ValueError:
        return None


def _json_files_as_text(paths: list[Path], source_lang: str, target_lang: str) -> Dataset | None:
    """JSON data files read again with every value as text, as a CSV cell is: a string as it is, a number as the
    file writes it, true and false as those words; null is missing, and so is a list or an object, which is not
    text: a warning names those of the language fields, with their lines. None where a file is neither JSON lines
    nor one JSON list."""
    rows, places = [], []  # places: (file, "line" or "item", number) of each row
    for path in paths:
        if (read := _json_rows(path)) is None:
            return None
        word, numbered = read
        rows += [row if isinstance(row, dict) else {} for _, row in numbered]
        places += [(path, word, number) for number, _ in numbered]
    not_text = {}  # (file, "line" or "item", language, "a list" or "an object") -> [line or item numbers]

    def as_text(value: object, lang: str | None, row: int) -> str | None:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, dict)):
            if lang is not None:
                path, word, number = places[row]
                not_text.setdefault((path, word, lang, "a list" if isinstance(value, list) else "an object"),
                                    []).append(number)
            return None
        return value  # a string, a number's text, or None

    names = list(dict.fromkeys(name for row in rows for name in row))
    # a row's languages are its translation dict's fields where it has one, else its top level's (a file may mix both)
    nested = [isinstance(row.get("translation"), dict) for row in rows]
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        if name != "translation" or not any(isinstance(value, dict) and value for value in values):
            language = name in (source_lang, target_lang)
            columns[name] = pa.array([as_text(value, name if language and not nested[row] else None, row)
                                      for row, value in enumerate(values)], pa.string())
            continue
        pairs = [value if isinstance(value, dict) else None for value in values]
        keys = list(dict.fromkeys(key for pair in pairs if pair for key in pair))
        children = [pa.array([as_text((pair or {}).get(key), key if key in (source_lang, target_lang) else None, row)
                              for row, pair in enumerate(pairs)], pa.string()) for key in keys]
        missing = pa.array([pair is None for pair in pairs])
        columns[name] = pa.StructArray.from_arrays(children, names=keys, mask=missing)
    _warn_about_values_that_are_not_text(not_text)
    return Dataset(pa.table(columns))


def _warn_about_values_that_are_not_text(not_text: dict[tuple[Path, str, str, str], list[int]]) -> None:
    """A warning for each file, language and kind (list, object) of values that are not text, naming their lines
    (or items, in a file that is one JSON list)."""
    for (path, word, lang, kind), numbers in not_text.items():
        shown = shown_list(numbers, _SHOWN_LINE_NUMBERS)
        said = (f"the {lang} value of {word} {shown} is not text but {kind}: it is read as missing, so its pair"
                if len(numbers) == 1 else f"{len(numbers)} {lang} values ({word}s {shown}) are not text but "
                f"{kind.split()[1]}s: each is read as missing, so its pair")
        logger.warning(f"{path}: {said} has no {lang} side. Give each side of a pair as one string.")


def _unreadable_file_error(path: Path, builder: str, error: BaseException) -> InputError:
    """An InputError in one line for a data file `load_dataset` could not read: a damaged .gz file said so, else the
    first bad line named (1-based) where it can be found, else the library's reason."""
    cause = error.__cause__ or error
    if isinstance(cause, _GZIP_ERRORS):
        return _damaged_gzip_error(path, cause)
    reason = _first_bad_line(path, builder) or _one_line(cause)  # a damaged .gz raises its own InputError here
    format_name = Path(path.name.removesuffix(".gz")).suffix[1:].upper()
    example = ('one JSON object such as {"translation": {"de": "...", "en": "..."}} a line' if builder == "json"
               else f"a header row naming the columns (e.g. {'de<TAB>en' if format_name == 'TSV' else 'de,en'}), "
               "then one pair a row")
    if "corresponds to no data" in reason:  # datasets' words for a file of no rows: a header alone, a list []
        return InputError(f"{path} holds no sentence pairs ({'a header row alone' if builder == 'csv' else 'no rows'})"
                          f": it needs {example}.")
    return InputError(f"Cannot read {path} as {format_name} ({reason.removesuffix('.')}): it needs {example}, in "
                      "UTF-8, and a .gz file complete.")


def _is_blank(path: Path) -> bool:
    """Whether a plain or gzip file holds nothing but white space."""
    try:
        with _open_binary(path) as handle:
            while chunk := handle.read(1 << 16):
                if chunk.strip():
                    return False
    except _GZIP_ERRORS:
        return False  # a damaged .gz file: reading it says so
    return True


def _csv_header(path: Path, options: dict) -> list[str]:
    """The column names in the first row of a CSV/TSV file."""
    return next(_csv_rows(path, options), (0, []))[1]


def _csv_rows(path: Path, options: dict) -> Iterator[tuple[int, list[str]]]:
    """The rows of a CSV/TSV file with the (1-based) line each starts on, blank lines left out as pandas leaves
    them out."""
    with io.TextIOWrapper(_open_binary(path), encoding=options["encoding"], errors="replace", newline="") as text:
        reader = csv.reader(text, delimiter=options.get("delimiter", ","),
                            quoting=options.get("quoting", csv.QUOTE_MINIMAL))
        start = 1
        for row in reader:
            if row:
                yield start, row
            start = reader.line_num + 1


def _load_prefix_datasets(args: TranslationDataArguments, keep_blank_evaluation_pairs: bool = False) -> DatasetDict:
    """Load plain parallel text named by `--train_prefix/--validation_prefix/--test_prefix` (validation and test
    keeping their blank pairs in place with `keep_blank_evaluation_pairs`)."""
    prefixes = _split_paths(args.train_prefix, args.validation_prefix, args.test_prefix)
    files = {split: resolve_parallel_files(prefix, args.source_lang, args.target_lang, split)  # all, before reading
             for split, prefix in prefixes.items()}
    splits = {}
    for split, (source_file, target_file) in files.items():
        splits[split], report = load_parallel_text(
            source_file,
            target_file,
            source_lang=args.source_lang,
            target_lang=args.target_lang,
            max_length_chars=args.max_length_chars if split == "train" else None,  # evaluation keeps every line
            keep_blank=keep_blank_evaluation_pairs and split != "train",
        )
        if report.num_kept == 0 and report.too_long_lines:
            raise InputError(_all_too_long_message(len(report.too_long_lines), args.max_length_chars))
        if report.num_kept == 0:
            raise InputError(
                f"{source_file} and {target_file} hold no sentence pairs ({report.num_lines} lines, none with text "
                f"on both sides): --{split}_prefix must name files with one sentence a line."
            )
    return DatasetDict(splits)


def _all_too_long_message(count: int, max_length_chars: int) -> str:
    """What to say when `--max_length_chars` left out every one of the `count` training pairs."""
    return (f"Each of the {count} training pairs with text has a side longer than --max_length_chars "
            f"{max_length_chars} characters, so none is left to train on: raise --max_length_chars, or leave it out.")


def _without_too_long_pairs(dataset: Dataset, max_length_chars: int, source_lang: str, target_lang: str) -> Dataset:
    """The training pairs whose sides are at most `max_length_chars` characters long (without the whitespace around
    them, as a plain-text line is measured), the others counted in a warning; InputError when none is left."""

    def short_enough(batch: dict) -> list[bool]:
        return [max(len(pair[source_lang].strip()), len(pair[target_lang].strip())) <= max_length_chars
                for pair in batch["translation"]]

    kept = dataset.filter(short_enough, batched=True, desc="Leaving out over-long training pairs")
    if not len(kept):
        raise InputError(_all_too_long_message(len(dataset), max_length_chars))
    if len(kept) < len(dataset):
        logger.warning(f"Left out {len(dataset) - len(kept)} of {len(dataset)} training pairs with a side longer "
                       f"than --max_length_chars {max_length_chars} characters.")
    return kept


def _load_builtin_dataset(args: TranslationDataArguments) -> DatasetDict:
    """Generate a built-in corpus; its languages must match --source_lang/--target_lang."""
    if args.builtin_dataset not in BUILTIN_DATASETS:
        raise InputError(f"Unknown --builtin_dataset {args.builtin_dataset!r}; choose one of {BUILTIN_DATASETS}.")
    if (args.source_lang, args.target_lang) != ("de", "en"):
        raise InputError(
            "--builtin_dataset number_words translates German to English: use --source_lang de --target_lang en "
            f"(got {args.source_lang!r} -> {args.target_lang!r})."
        )
    from .number_words import number_words_corpus  # which builds on this module

    return number_words_corpus(
        train_size=args.number_words_train_size,
        validation_size=args.number_words_eval_size,
        test_size=args.number_words_eval_size,
    )


def _split_paths(train: str | None, validation: str | None, test: str | None) -> dict[str, str]:
    """Map split names to the paths given, leaving out the ones that are None."""
    return {split: path for split, path in zip(SPLITS, (train, validation, test)) if path is not None}


def _with_translation_column(dataset: Dataset, source_lang: str, target_lang: str) -> Dataset:
    """A dataset with a text column per language (`{"en": ..., "de": ...}` rows, as bentrevett/multi30k on the Hub)
    turned into one with the `translation` column of {language: text} dicts that the rest expects; where a
    `translation` column is there too (a JSON lines file mixing both row forms), its rows without one take their
    pair from the language columns. A dataset that lacks a language's column, or whose every row has a
    `translation`, is returned as it is."""
    if not {source_lang, target_lang} <= set(dataset.column_names):
        return dataset
    has_translation = "translation" in dataset.column_names
    if has_translation and not dataset.data.column("translation").null_count:
        return dataset

    def pair_up(batch: dict) -> dict:
        pairs = batch["translation"] if has_translation else [None] * len(batch[source_lang])
        return {"translation": [pair if pair is not None else {source_lang: source, target_lang: target}
                                for pair, source, target in zip(pairs, batch[source_lang], batch[target_lang],
                                                                strict=True)]}

    # the pairs' types are the columns' own, not those of the first batch's values: a batch of 1,000 rows whose
    # target is null throughout typed it null, and the first string after it failed to cast ("string to null")
    features = None if has_translation else Features(
        {"translation": {lang: dataset.features[lang] for lang in (source_lang, target_lang)}})
    return dataset.map(pair_up, batched=True, remove_columns=dataset.column_names, features=features,
                       desc="Pairing the language columns")


def _without_pairs_lacking_text(dataset: Dataset, split: str, source_lang: str, target_lang: str) -> Dataset:
    """Leave out (and count, in a warning) the pairs whose source or target is missing (null), not a string, or
    blank, as empty lines of plain text are: they teach nothing, and a missing one would stop tokenization."""

    def has_text(batch: dict) -> list[bool]:
        return [pair_has_text(pair, source_lang, target_lang) for pair in batch["translation"]]

    if not len(dataset):  # no batch to map: no column of flags
        return dataset
    flags = dataset.map(lambda batch: {"has_text": has_text(batch)}, batched=True, remove_columns=dataset.column_names,
                        desc=f"Checking the {split} pairs").with_format("numpy")[:]["has_text"]
    if flags.all():
        return dataset
    logger.warning(
        f"Left out {int((~flags).sum())} of {len(dataset)} {split} pairs whose {source_lang} or {target_lang} side "
        f"is missing or empty ({_rows_named(np.flatnonzero(~flags))})."
    )
    return dataset.select(np.flatnonzero(flags))


def _rows_named(rows: Sequence[int]) -> str:
    """The rows without text (indices from 0), as a warning names them: "rows 4, 17, ..." of the split's rows,
    counted from 1 (a data file's lines are not counted: a CSV's header row, JSON lines' blank lines and a quoted
    field's line breaks are no rows)."""
    numbers = [int(row) + 1 for row in rows[:_SHOWN_LINE_NUMBERS + 1]]  # shown_list shows that many, then "..."
    return f"row{'s' * (len(rows) > 1)} {shown_list(numbers, _SHOWN_LINE_NUMBERS)} of the split, counted from 1"


def _blank_where_text_is_missing(
    dataset: Dataset, split: str, source_lang: str, target_lang: str, warn: bool = True
) -> Dataset:
    """An evaluation split with each pair kept in place, a missing (null) or non-string side made "", and (`warn`) a
    warning that counts the pairs without text on a side: they are neither translated nor scored."""

    def filled(batch: dict) -> dict:
        return {"translation": [
            {lang: (pair or {}).get(lang) if isinstance((pair or {}).get(lang), str) else ""
             for lang in (source_lang, target_lang)}
            for pair in batch["translation"]]}

    dataset = dataset.map(filled, batched=True, desc=f"Checking the {split} pairs")
    scored = set(rows_with_text(dataset, source_lang, target_lang))
    if len(scored) < len(dataset) and warn:
        logger.warning(
            f"{len(dataset) - len(scored)} of {len(dataset)} {split} pairs have a missing or empty {source_lang} or "
            f"{target_lang} side ({_rows_named([row for row in range(len(dataset)) if row not in scored])}): they "
            "are kept in place, so that translations line up with the data, but are neither translated nor scored."
        )
    return dataset


def _warn_if_sides_are_the_same(dataset: Dataset, split: str, source_lang: str, target_lang: str) -> None:
    """Warn when most of the split's first 1,000 pairs have the same text on both sides: one file or column given
    for both languages, a user's slip that would otherwise train a model to copy its input without a word said."""
    pairs = [pair for pair in dataset[:1000]["translation"] if pair[source_lang].strip()]
    same = sum(pair[source_lang].strip() == pair[target_lang].strip() for pair in pairs)
    if same > len(pairs) / 2:
        logger.warning(
            f"{same} of the first {len(pairs)} {split} pairs have the same {source_lang} and {target_lang} text: "
            "check that the two languages do not come from one file or column (a model trained on them learns to "
            "copy its input)."
        )


LANGUAGE_SAMPLE = 5000
"""Training pairs whose words stand for each language in `_warn_about_evaluation_data` (spread over the split)."""


def _warn_about_evaluation_data(datasets: DatasetDict, source_lang: str, target_lang: str) -> None:
    """Warn where validation or test data cannot say much about a model trained on the train split: its two sides
    in each other's language (swapped files or columns: the Multi30k model scored BLEU 0 on such a split, without a
    word), or a fifth of its pairs or more also training pairs (the scores then measure memory more than
    translation). A side is taken for the other language where more of its words are training words of that one
    than of its own, by 20 points or more: related languages, whose words the two sides share, are never flagged."""
    train = datasets.get("train")
    if train is None or not len(train):
        return
    rows = sorted({row * len(train) // LANGUAGE_SAMPLE for row in range(min(LANGUAGE_SAMPLE, len(train)))})
    sample = train.select(rows)["translation"]
    vocabulary = {lang: {word for pair in sample for word in _words(pair[lang])} for lang in (source_lang, target_lang)}
    for split in ("validation", "test"):
        dataset = datasets.get(split)
        if dataset is None or not len(dataset):
            continue
        pairs = dataset[:LANGUAGE_SAMPLE]["translation"]
        misread = []
        for lang, other in ((source_lang, target_lang), (target_lang, source_lang)):
            words = [word for pair in pairs for word in _words(pair[lang])]
            own, others = (sum(word in vocabulary[each] for word in words) / max(len(words), 1)
                           for each in (lang, other))
            if others >= own + 0.2:
                misread.append(f"{lang} side reads as {other} ({others:.0%} of its words are {other} training "
                               f"words, {own:.0%} {lang} ones)")
        if misread:
            logger.warning("The %s split's %s: it and the training data disagree about which side is which, so the "
                           "files or columns of one are swapped (the training data's just as well: check both). "
                           "Scored so, a model's BLEU says nothing of it.", split, " and its ".join(misread))
        known = _pairs_also_in(dataset, train, source_lang, target_lang)
        scored = len(rows_with_text(dataset, source_lang, target_lang))
        if known >= max(1, scored / 5):  # of the pairs scored: blank ones are kept in place, not translated
            logger.warning(
                "%d of the %d %s pairs are training pairs too: its scores measure how well the model remembers "
                "them more than how it translates. Hold out pairs that are not in the training data.",
                known, scored, split,
            )


def _words(text: str | None) -> list[str]:
    return re.findall(r"\w+", text.lower()) if isinstance(text, str) else []


def _pairs_also_in(dataset: Dataset, train: Dataset, source_lang: str, target_lang: str) -> int:
    """How many of `dataset`'s pairs are, text for text, pairs of `train` too."""
    wanted: dict[str, set] = {}
    for pair in dataset["translation"]:
        wanted.setdefault(pair[source_lang], set()).add(pair[target_lang])
    found = {(source, target) for source, target in _pairs_with_sources(train, wanted, source_lang, target_lang)
             if target in wanted[source]}
    return sum((pair[source_lang], pair[target_lang]) in found for pair in dataset["translation"])


def _pairs_with_sources(train: Dataset, sources, source_lang: str, target_lang: str) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of `train` whose source is one of `sources`: looked up by pyarrow a batch at a
    time (quick for millions of pairs), or one by one where the column is not a struct (datasets' Json)."""
    if not pa.types.is_struct(train.features.arrow_schema.field("translation").type):
        yield from ((pair[source_lang], pair[target_lang]) for pair in train["translation"]
                    if pair[source_lang] in sources)
        return
    value_set = pa.array([source for source in sources if isinstance(source, str)], type=pa.string())
    for batch in train.with_format("arrow").iter(batch_size=100_000):
        column = batch.column("translation").combine_chunks()
        train_sources, train_targets = column.field(source_lang), column.field(target_lang)
        hits = pc.indices_nonzero(pc.fill_null(pc.is_in(train_sources, value_set=value_set), False))
        yield from zip(pc.take(train_sources, hits).to_pylist(), pc.take(train_targets, hits).to_pylist())


_LANGUAGE_COLUMN = re.compile(r"[A-Za-z][\w-]{0,34}")
"""A column name that could name a language (en, de_DE, english, source): no spaces, no sentence."""


def _check_translation_column(dataset: Dataset, split: str, source_lang: str, target_lang: str) -> None:
    """Raise ValueError unless `dataset` has a `translation` column holding both languages."""
    feature = dataset.features.get("translation")
    languages = set(getattr(feature, "languages", None) or (feature.keys() if isinstance(feature, dict) else []))
    if feature is not None and not languages:  # a schema-less column (datasets' Json, for rows of differing keys)
        languages = {key for pair in dataset["translation"] if isinstance(pair, dict) for key in pair}
    if {source_lang, target_lang} <= languages:
        return
    columns = dataset.column_names
    has = f"it has columns {columns}"
    if feature is not None:
        has += f" (translation languages: {sorted(languages)})"
    separator = next((mark for mark in ";|" if len(columns) == 1 and mark in columns[0]), None)
    if separator:  # Excel writes CSV so where the comma is the decimal mark
        fix = (f"The file's fields seem separated by {separator!r}, not commas: save it with commas (CSV) or tabs "
               "(.tsv).")
    elif feature is None and len(columns) >= 2 and not all(_LANGUAGE_COLUMN.fullmatch(name) for name in columns[:2]):
        padded = [name for name in columns if name.strip() != name and _LANGUAGE_COLUMN.fullmatch(name.strip())]
        fix = (f"Its header names {padded} have spaces around them: write the header without (e.g. "
               f"{source_lang},{target_lang})." if padded else
               f"The file seems to have no header row, so its first pair was taken for the column names: add a header "
               f"row naming the languages' columns ({source_lang}, {target_lang}).")
    elif feature is None and len(columns) >= 2 and all(dataset.features[name] == Value("string")
                                                       for name in columns[:2]):
        fix = (f"Name the columns for the languages ({source_lang}, {target_lang}), or give their names: "
               f"--source_lang {columns[0]} --target_lang {columns[1]}.")
    else:
        found = sorted(languages) if feature is not None else columns
        meant = [(option, _meant_language(lang, found)) for option, lang in
                 (("--source_lang", source_lang), ("--target_lang", target_lang)) if lang not in found]
        fix = ("Did you mean " + " ".join(f"{option} {guess}" for option, guess in meant) + "?"
               if meant and all(guess for _, guess in meant) else
               "Check --source_lang/--target_lang or the file's fields.")
    raise InputError(
        f"The {split} split needs a 'translation' column of {{{source_lang!r}: ..., {target_lang!r}: ...}} dicts, "
        f"or a text column for each language ({source_lang!r} and {target_lang!r}); {has}. {fix}"
    )


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
    """Tokenize each split: source -> input_ids/attention_mask, target -> labels (`text_target=`).

    Sources are normalized as the translation pipeline normalizes its input (`normalize_text`: NFC, invisible
    characters removed, whitespace): a run of spaces, a tab, a zero-width space or a decomposed umlaut would
    otherwise be other byte-level tokens than the model learnt, and translate otherwise. Targets get their
    whitespace normalized only (`normalize_whitespace`), so that the model writes the Unicode form the corpus
    writes, the one its references are scored in (NFC would change Hindi's precomposed nukta letters, or every
    accent of an NFD corpus). Special tokens typed in the text read as text where `reads_special_tokens_as_text`
    says so, as in the pipeline. Sources are truncated to `max_source_length` tokens, and the training split's
    targets to `max_target_length`;
    the other splits' targets are the references their translations are scored against, so they are kept whole (a
    BLEU against cut references would credit translations cut as short). The tokenizer's truncation keeps the eos it
    appends; the number of truncated sources and targets of each split is logged as a warning. All other columns
    are removed.
    """

    def tokenize(batch: dict, target_limit: int | None) -> dict:
        sources = [normalize_text(pair[source_lang]) for pair in batch["translation"]]
        targets = [normalize_whitespace(pair[target_lang]) for pair in batch["translation"]]
        with _backend_settings_kept(tokenizer):
            model_inputs = tokenizer(sources, max_length=max_source_length, truncation=True,
                                     split_special_tokens=as_text)
            labels = tokenizer(text_target=targets, max_length=target_limit, truncation=target_limit is not None,
                               split_special_tokens=as_text)
        model_inputs["labels"] = labels["input_ids"]
        model_inputs["source_truncated"] = _truncated_flags(
            model_inputs, max_source_length, lambda rows: tokenizer(rows, split_special_tokens=as_text), sources
        )
        model_inputs["target_truncated"] = _truncated_flags(
            labels, target_limit, lambda rows: tokenizer(text_target=rows, split_special_tokens=as_text), targets
        )
        return dict(model_inputs)

    as_text = reads_special_tokens_as_text(tokenizer)
    tokenized = DatasetDict()
    for split, dataset in datasets.items():
        flagged = dataset.map(
            tokenize,
            fn_kwargs={"target_limit": max_target_length if split == "train" else None},
            batched=True,
            num_proc=num_proc,
            remove_columns=dataset.column_names,
            desc=f"Tokenizing {split}",
        )
        _warn_about_truncation(flagged, split, max_source_length, max_target_length)
        tokenized[split] = flagged.remove_columns(["source_truncated", "target_truncated"])
        if split == "train":
            _warn_about_unknown_tokens(tokenized[split], tokenizer.unk_token_id, source_lang, target_lang)
    return tokenized


@contextlib.contextmanager
def _backend_settings_kept(tokenizer) -> Iterator[None]:
    """Restore a fast tokenizer's backend truncation and padding after the calls inside: transformers leaves the
    last call's `max_length` set there, which `save_pretrained` writes into tokenizer.json (where `tokenizers`
    users then silently cut long inputs), and which makes the `datasets` fingerprint of the next map differ."""
    backend = getattr(tokenizer, "backend_tokenizer", None)  # None for a slow (sentencepiece) tokenizer
    if backend is None:
        yield
        return
    truncation, padding = backend.truncation, backend.padding
    try:
        yield
    finally:
        backend.no_truncation()
        if truncation is not None:
            backend.enable_truncation(**truncation)
        backend.no_padding()
        if padding is not None:
            backend.enable_padding(**padding)


def _truncated_flags(encoding, limit: int | None, tokenize, texts: list[str]) -> list[bool]:
    """Per example, whether the tokenizer cut tokens off `texts` at `limit`: a fast tokenizer says so (its
    `overflowing` encodings are non-empty); for another (MarianTokenizer, sentencepiece-based, the only one the
    opus-mt models have) the examples that reached the limit are tokenized again whole with `tokenize`."""
    if encoding.encodings is not None:
        return [bool(item.overflowing) for item in encoding.encodings]
    flags = [False] * len(texts)
    at_limit = [row for row, ids in enumerate(encoding["input_ids"]) if limit is not None and len(ids) >= limit]
    if at_limit:
        whole = tokenize([texts[row] for row in at_limit])["input_ids"]
        for row, ids in zip(at_limit, whole):
            flags[row] = len(ids) > limit
    return flags


def _warn_about_truncation(dataset: Dataset, split: str, max_source_length: int, max_target_length: int) -> None:
    """Log how many sources and targets of a split were truncated."""
    for side, limit in (("source", max_source_length), ("target", max_target_length)):
        count = int(np.sum(dataset.with_format("numpy")[f"{side}_truncated"])) if len(dataset) else 0
        if count:
            logger.warning(
                f"Truncated {count} of {len(dataset)} {split} {side}s to max_{side}_length={limit} tokens; raise "
                f"--max_{side}_length to keep them whole."
            )


UNKNOWN_TOKEN_WARNING_RATE = 0.01
"""The share of a training side's tokens that may be the tokenizer's unknown token before a warning says so."""


def _warn_about_unknown_tokens(dataset: Dataset, unk_token_id: int | None, source_lang: str, target_lang: str) -> None:
    """Warn, for each side, when more than `UNKNOWN_TOKEN_WARNING_RATE` of the training tokens are the unknown token:
    a tokenizer that does not cover the language's script (a word-level English one on Chinese) reads it as nothing,
    and a model trained so translates into nothing."""
    if unk_token_id is None or not len(dataset):
        return
    table = dataset.with_format("arrow")[:]
    for column, side, lang in (("input_ids", "source", source_lang), ("labels", "target", target_lang)):
        tokens = pc.list_flatten(table[column])
        unknown = pc.sum(pc.equal(tokens, unk_token_id)).as_py() or 0
        if len(tokens) and unknown / len(tokens) > UNKNOWN_TOKEN_WARNING_RATE:
            logger.warning(
                f"{unknown / len(tokens):.1%} of the training {side} tokens ({lang}) are the tokenizer's unknown "
                f"token: it does not cover this {lang} text, which the model cannot learn to read or write. Train a "
                "tokenizer on this data: leave out --tokenizer_name (a model given with --model_name_or_path keeps its "
                "own)."
            )


def check_token_ids_fit(tokenized: DatasetDict, vocab_size: int) -> None:
    """Every token id of every split is below the model's `vocab_size`: checked once here, where the data is made,
    so that the model need not read its inputs back from the GPU at every step (InputError otherwise)."""
    for split, dataset in tokenized.items():
        table = dataset.with_format("arrow")[:]
        for column in ("input_ids", "labels"):
            if column not in table.column_names:
                continue
            largest = pc.max(pc.list_flatten(table[column])).as_py()
            if largest is not None and largest >= vocab_size:
                raise InputError(
                    f"The tokenizer gives the {split} split's {column} id {largest}, but the model's vocabulary has "
                    f"{vocab_size} entries: train with the model's own tokenizer (or a new model for this one)."
                )
