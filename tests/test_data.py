"""Tests for hf_vanilla_transformer.data: parallel text robustness, data sources, number words, tokenization."""

import copy
import gzip
import json
import logging
import re
import unicodedata
from pathlib import Path

from collections import Counter

import pytest
from datasets import Dataset, DatasetDict, load_from_disk
from num2words import num2words

from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.data import (
    TranslationDataArguments,
    load_parallel_text,
    load_translation_datasets,
    resolve_parallel_files,
    rows_with_text,
    tokenize_translation_datasets,
)
from hf_vanilla_transformer.number_words import (
    NUMBER_MAGNITUDES,
    number_magnitude,
    number_words_corpus,
    number_words_normalizer,
)
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer, translation_texts

MULTI30K = Path(__file__).resolve().parents[2] / "shared/data/multi30k"
GERMAN = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Die Straße ist groß."]
ENGLISH = ["A man rides a bike.", "Two dogs play in the snow.", "The street is big."]


def write_lines(path: Path, lines: list[str], *, encoding: str = "utf-8", newline: str = "\n") -> Path:
    """Write lines to a plain or (by suffix) gzip file."""
    data = "".join(line + newline for line in lines).encode(encoding)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def pairs(dataset, source_lang="de", target_lang="en"):
    """The (source, target) tuples of a dataset's translation column."""
    return [(row[source_lang], row[target_lang]) for row in dataset["translation"]]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_load_parallel_text_reads_aligned_pairs(tmp_path, suffix):
    source = write_lines(tmp_path / f"train.de{suffix}", GERMAN)
    target = write_lines(tmp_path / f"train.en{suffix}", ENGLISH)
    dataset, report = load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert pairs(dataset) == list(zip(GERMAN, ENGLISH))
    assert dataset.column_names == ["translation"]
    assert (report.num_lines, report.num_kept, report.num_skipped) == (3, 3, 0)


def test_crlf_bom_and_surrounding_spaces_are_not_part_of_sentences(tmp_path):
    source = write_lines(tmp_path / "a.de", ["\ufeff" + GERMAN[0], "  " + GERMAN[1] + " "], newline="\r\n")
    target = write_lines(tmp_path / "a.en", ENGLISH[:2])
    dataset, _ = load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert pairs(dataset) == list(zip(GERMAN[:2], ENGLISH[:2]))


def test_a_byte_order_mark_of_a_file_joined_on_is_not_part_of_its_first_sentence(tmp_path):
    """`cat a.de b.de`, each saved with a byte-order mark: the second one starts a line inside the file. As a
    reference it once stayed in the text ("\ufeffDrei" matched no word of any translation: BLEU went down)."""
    source = write_lines(tmp_path / "joined.de", [GERMAN[0], "\ufeff" + GERMAN[1], "\ufeff " + GERMAN[2]])
    target = write_lines(tmp_path / "joined.en", ["\ufeff" + sentence for sentence in ENGLISH])
    dataset, _ = load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert pairs(dataset) == list(zip(GERMAN, ENGLISH))


@pytest.mark.parametrize("suffix, lines", [("", 3), (".gz", 3), ("", 2)])  # 2: the last "\r" counts as an end too
def test_cr_line_ends_are_refused_with_how_to_convert(tmp_path, suffix, lines):
    """Old Mac files end lines with a lone "\r": read at line feeds, the whole file was one pair (cut to
    max_source_length tokens, with only a truncation warning)."""
    source = write_lines(tmp_path / f"m.de{suffix}", GERMAN[:lines], newline="\r")
    target = write_lines(tmp_path / "m.en", ENGLISH)
    with pytest.raises(InputError, match=r"m\.de(\.gz)? uses CR line ends .*line 1 .*tr '\\r' '\\n'"):
        load_parallel_text(source, target, source_lang="de", target_lang="en")


@pytest.mark.parametrize("source_count, target_count", [(3, 2), (2, 3)])
def test_mismatched_line_counts_name_both_files_and_counts(tmp_path, source_count, target_count):
    source = write_lines(tmp_path / "x.de", GERMAN[:source_count])
    target = write_lines(tmp_path / "x.en.gz", ENGLISH[:target_count])
    with pytest.raises(ValueError) as error:
        load_parallel_text(source, target, source_lang="de", target_lang="en")
    message = str(error.value)
    assert f"{source} has {source_count} lines" in message
    assert f"{target} has {target_count}" in message


@pytest.mark.parametrize("longer", ["source", "target"])
def test_blank_lines_at_the_end_of_one_file_are_not_counted(tmp_path, longer):
    """An editor's extra line end at the end of train.en (2001 lines against 2000) stopped the run with "look for a
    sentence split over two lines"; blank lines inside the files still pair up and are skipped."""
    german, english = ["eins", "", "drei"], ["one", "two", "three"]
    trailing = {"source": (["", "  "], []), "target": ([], ["", "\r"])}[longer]
    source = write_lines(tmp_path / "t.de", german + trailing[0])
    target = write_lines(tmp_path / "t.en", english + trailing[1])
    dataset, report = load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert pairs(dataset) == [("eins", "one"), ("drei", "three")]
    assert report.empty_source_lines == [2] and (report.num_lines, report.num_kept) == (3, 2)


def test_line_counts_that_differ_in_text_say_the_counts_without_the_blank_lines_at_the_end(tmp_path):
    source = write_lines(tmp_path / "t.de", ["eins", "zwei", "drei", "", ""])
    target = write_lines(tmp_path / "t.en", ["one", "two", "", "", "", ""])
    with pytest.raises(InputError) as error:
        load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert (f"{source} has 5 lines (3 without the blank lines at its end), {target} has 6 (2 without the blank lines "
            "at its end). Line i of one must translate line i of the other") in str(error.value)


def test_line_separator_inside_a_sentence_does_not_split_it(tmp_path):
    source = write_lines(tmp_path / "x.de", ["eins\u2028zwei\rdrei", "vier"])
    target = write_lines(tmp_path / "x.en", ["one two three", "four"])
    dataset, _ = load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert pairs(dataset)[1] == ("vier", "four")


def test_undecodable_bytes_name_file_line_and_fix(tmp_path):
    source = write_lines(tmp_path / "latin.de", GERMAN, encoding="latin-1")  # "fährt" on line 1 is not UTF-8
    target = write_lines(tmp_path / "latin.en", ENGLISH)
    with pytest.raises(ValueError) as error:
        load_parallel_text(source, target, source_lang="de", target_lang="en")
    message = str(error.value)
    assert str(source) in message and "line 1 " in message and "re-encode" in message.lower()


def test_undecodable_line_number_is_one_based_in_gzip(tmp_path):
    lines = ENGLISH[:2] + ["caf\xe9"]
    source = write_lines(tmp_path / "x.de", GERMAN)
    target = tmp_path / "x.en.gz"
    target.write_bytes(gzip.compress("\n".join(lines[:2]).encode() + b"\ncaf\xe9\n"))
    with pytest.raises(ValueError, match=r"x\.en\.gz: line 3 is not valid UTF-8"):
        load_parallel_text(source, target, source_lang="de", target_lang="en")


def test_empty_lines_are_skipped_counted_and_logged_keeping_alignment(tmp_path, caplog):
    german = ["eins", "", "drei", "vier", "  ", "sechs", "sieben"]
    english = ["one", "two", "three", "", "", "six", "\u200b"]  # a zero-width space alone: was a target learnt
    source = write_lines(tmp_path / "e.de", german)
    target = write_lines(tmp_path / "e.en", english)
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        dataset, report = load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert pairs(dataset) == [("eins", "one"), ("drei", "three"), ("sechs", "six")]
    assert report.empty_source_lines == [2, 5]
    assert report.empty_target_lines == [4, 5, 7]
    assert (report.num_lines, report.num_kept, report.num_skipped) == (7, 3, 4)
    assert any(str(source) in message and "lines 2, 5" in message for message in caplog.messages)
    assert any(str(target) in message and "lines 4, 5, 7" in message for message in caplog.messages)


def test_max_length_chars_skips_long_pairs(tmp_path):
    source = write_lines(tmp_path / "l.de", ["kurz", "ein sehr langer Satz", "auch kurz"])
    target = write_lines(tmp_path / "l.en", ["short", "a long sentence", "long on this side only"])
    dataset, report = load_parallel_text(source, target, source_lang="de", target_lang="en", max_length_chars=10)
    assert pairs(dataset) == [("kurz", "short")]
    assert report.too_long_lines == [2, 3]


def test_resolve_parallel_files_prefers_plain_then_gz_and_explains_missing(tmp_path):
    write_lines(tmp_path / "train.de.gz", GERMAN)
    write_lines(tmp_path / "train.en", ENGLISH)
    assert resolve_parallel_files(tmp_path / "train", "de", "en") == (tmp_path / "train.de.gz", tmp_path / "train.en")
    with pytest.raises(FileNotFoundError, match=r"train\.fr\.gz"):
        resolve_parallel_files(tmp_path / "train", "de", "fr")
    (tmp_path / "train.fr").mkdir()  # was "its files are in de, en, not fr", beside a folder named train.fr
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path / 'train.fr'} is a folder, not the fr side of "
                                                          f"prefix {tmp_path / 'train'}: the prefix names two files")):
        resolve_parallel_files(tmp_path / "train", "de", "fr")


def test_load_translation_datasets_from_prefixes(tmp_path):
    for split in ("train", "val"):
        write_lines(tmp_path / f"{split}.de.gz", GERMAN)
        write_lines(tmp_path / f"{split}.en.gz", ENGLISH)
    args = TranslationDataArguments(
        source_lang="de", target_lang="en", train_prefix=str(tmp_path / "train"),
        validation_prefix=str(tmp_path / "val"),
    )
    datasets = load_translation_datasets(args)
    assert list(datasets) == ["train", "validation"]
    assert pairs(datasets["validation"]) == list(zip(GERMAN, ENGLISH))


def test_the_same_text_on_both_sides_is_warned_about(tmp_path, caplog):
    """train.en copied over train.de (or one CSV column named twice) would train a model to copy, silently."""
    write_lines(tmp_path / "train.de", ENGLISH)
    write_lines(tmp_path / "train.en", ENGLISH)
    write_lines(tmp_path / "val.de", GERMAN)
    write_lines(tmp_path / "val.en", ENGLISH)
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_prefix=str(tmp_path / "train"),
                                    validation_prefix=str(tmp_path / "val"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        load_translation_datasets(args)
    warnings = [message for message in caplog.messages if "have the same de and en text" in message]
    assert warnings == [f"{len(ENGLISH)} of the first {len(ENGLISH)} train pairs have the same de and en text: "
                        "check that the two languages do not come from one file or column (a model trained on "
                        "them learns to copy its input)."]  # the validation split, a real translation, is not named


def test_validation_data_in_each_others_language_or_from_the_training_data_is_warned_about(tmp_path, caplog):
    """val.en holding the German (files or columns swapped) was scored as it was: BLEU 0 for the Multi30k model,
    without a word; a validation split of training pairs scores memory. Both are said; a sound split is not."""
    subjects = [("Der Hund", "The dog"), ("Die Katze", "The cat"), ("Ein Mann", "A man"), ("Eine Frau", "A woman"),
                ("Das Kind", "The child"), ("Ein Vogel", "A bird")]
    verbs = [("läuft", "runs"), ("schläft", "sleeps"), ("singt", "sings"), ("isst", "eats"), ("spielt", "plays")]
    places = [("im Park", "in the park"), ("zu Hause", "at home"), ("am Strand", "on the beach"),
              ("im Garten", "in the garden")]
    pairs = [(f"{s_de} {v_de} {p_de}.", f"{s_en} {v_en} {p_en}.")
             for s_de, s_en in subjects for v_de, v_en in verbs for p_de, p_en in places]
    train, validation = pairs[::2], pairs[1::2]
    write_lines(tmp_path / "train.de", [de for de, _ in train])
    write_lines(tmp_path / "train.en", [en for _, en in train])

    def warnings_for(validation_pairs):
        write_lines(tmp_path / "val.de", [de for de, _ in validation_pairs])
        write_lines(tmp_path / "val.en", [en for _, en in validation_pairs])
        args = TranslationDataArguments(source_lang="de", target_lang="en", train_prefix=str(tmp_path / "train"),
                                        validation_prefix=str(tmp_path / "val"))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
            load_translation_datasets(args, keep_blank_evaluation_pairs=True)  # as the training script loads them
        return caplog.messages

    assert warnings_for(validation) == []
    swapped = warnings_for([(en, de) for de, en in validation])
    assert len(swapped) == 1 and swapped[0].startswith("The validation split's de side reads as en (")
    assert "% de ones) and its en side reads as de (" in swapped[0]
    # which of the two is swapped the words cannot say: the advice was to swap the validation files, and where
    # the training files were the swapped ones, that made the run score "well" a model of the other direction
    assert ("it and the training data disagree about which side is which, so the files or columns of one are "
            "swapped (the training data's just as well: check both)") in swapped[0]
    known = warnings_for(train[:30] + validation[:10])
    assert known == ["30 of the 40 validation pairs are training pairs too: its scores measure how well the model "
                     "remembers them more than how it translates. Hold out pairs that are not in the training data."]
    assert warnings_for(train[:3] + validation[:27]) == []  # a few in 30: as real corpora have
    assert warnings_for(train[:6] + [("", "")] * 30)[-1:] == [  # of the pairs scored: blank ones are not
        "6 of the 6 validation pairs are training pairs too: its scores measure how well the model remembers them "
        "more than how it translates. Hold out pairs that are not in the training data."]


def test_load_translation_datasets_from_json_lines(tmp_path):
    rows = [{"translation": {"en": en, "de": de}} for de, en in zip(GERMAN, ENGLISH)]
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    args = TranslationDataArguments(
        source_lang="en",
        target_lang="de",
        train_file=str(tmp_path / "train.jsonl"),
        test_file=str(tmp_path / "test.jsonl"),
        cache_dir=str(tmp_path / "cache"),
    )
    datasets = load_translation_datasets(args)
    assert list(datasets) == ["train", "test"]
    assert pairs(datasets["test"], "en", "de") == list(zip(ENGLISH, GERMAN))
    args.source_lang = "fr"
    with pytest.raises(ValueError, match="translation"):
        load_translation_datasets(args)


def test_a_text_column_per_language_is_paired_up(tmp_path):
    """Rows of {"en": ..., "de": ...}, as many Hub datasets (bentrevett/multi30k) and JSON files have them."""
    rows = [{"en": en, "de": de, "id": i} for i, (de, en) in enumerate(zip(GERMAN, ENGLISH))]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / "train.jsonl"),
                                    cache_dir=str(tmp_path / "cache"))
    train = load_translation_datasets(args)["train"]
    assert train.column_names == ["translation"] and pairs(train) == list(zip(GERMAN, ENGLISH))
    args.target_lang = "fr"
    with pytest.raises(ValueError, match="or a text column for each language \\('de' and 'fr'\\)"):
        load_translation_datasets(args)


@pytest.mark.parametrize("split", ["train", "test"])
def test_json_lines_that_mix_both_row_forms_read_every_row(tmp_path, split):
    """`{"translation": {...}}` rows and `{"de": ..., "en": ...}` rows in one file: the rows of one form were all
    left out as "missing or empty"."""
    rows = [{"translation": {"de": de, "en": en}} if row % 2 else {"de": de, "en": en}
            for row, (de, en) in enumerate(zip(GERMAN, ENGLISH))]
    path = write_jsonl(tmp_path / f"{split}.jsonl", rows)
    assert load_pairs("de", "en", tmp_path, split, **{f"{split}_file": path}) == list(zip(GERMAN, ENGLISH))


def test_json_lines_that_mix_both_row_forms_with_numbers_and_lists(tmp_path, caplog):
    """A number or a list in a flat row of a file that mixes both row forms was a pyarrow traceback ("Could not
    convert ... tried to convert to int64", "cannot mix list and non-list"): read as in a file of one form, the
    number as its text, the list as missing, with the warning naming its line."""
    rows = [{"translation": {"de": de, "en": en}} if row % 2 else {"de": de, "en": en}
            for row, (de, en) in enumerate(zip(GERMAN, ENGLISH))]
    rows += [{"de": 1.50, "en": 1999}, {"de": ["a"], "en": "b"}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows).replace("1.5,", "1.50,"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        loaded = load_pairs("de", "en", tmp_path, train_file=tmp_path / "train.jsonl")
    assert loaded == [*zip(GERMAN, ENGLISH), ("1.50", "1999")]
    assert f"{tmp_path / 'train.jsonl'}: the de value of line 5 is not text but a list" in caplog.text


def test_datasets_saved_with_save_to_disk(tmp_path):
    """A DatasetDict's folder gives its splits; one Dataset's folder (datasets asked for load_from_disk, which a
    command line cannot call) is the train split."""
    from datasets import Dataset, DatasetDict

    rows = Dataset.from_dict({"translation": [{"de": de, "en": en} for de, en in zip(GERMAN, ENGLISH)]})
    rows.save_to_disk(str(tmp_path / "one"))
    DatasetDict({"train": rows, "validation": rows.select([0])}).save_to_disk(str(tmp_path / "splits"))
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(tmp_path / "one"),
                                    cache_dir=str(tmp_path / "cache"))
    loaded = load_translation_datasets(args)
    assert list(loaded) == ["train"] and pairs(loaded["train"]) == list(zip(GERMAN, ENGLISH))
    args.dataset_name = str(tmp_path / "splits")
    loaded = load_translation_datasets(args)
    assert sorted(loaded) == ["train", "validation"] and pairs(loaded["validation"]) == [(GERMAN[0], ENGLISH[0])]
    loaded["train"].map(lambda row: {"length": len(row["translation"]["de"])})  # as the tokenizing does
    # the filters and maps wrote cache-*.arrow files into the user's data folder, a new set for each setting
    assert not list((tmp_path / "one").rglob("cache-*")) and not list((tmp_path / "splits").rglob("cache-*"))
    assert loaded["train"].cache_files[0]["filename"].startswith(str(tmp_path / "cache"))


def test_a_saved_dataset_with_an_empty_split_is_refused_in_one_line(tmp_path):
    """datasets saves a split of no rows with no data file and cannot load it back: an IndexError deep inside its
    load_from_disk (datasets 5.2)."""
    rows = Dataset.from_dict({"translation": [{"de": de, "en": en} for de, en in zip(GERMAN, ENGLISH)]})
    empty = rows.select([])
    DatasetDict({"train": rows, "validation": empty}).save_to_disk(str(tmp_path / "splits"))
    empty.save_to_disk(str(tmp_path / "one"))
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(tmp_path / "splits"),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError, match=re.escape(
        f"{tmp_path / 'splits'}: its 'validation' split holds no sentence pairs (save_to_disk wrote no data file, "
        f"and datasets cannot read such a split back). Save the data again without it, or delete "
        f"{tmp_path / 'splits' / 'validation'} and its name in {tmp_path / 'splits' / 'dataset_dict.json'}.")):
        load_translation_datasets(args)
    args.dataset_name = str(tmp_path / "one")
    with pytest.raises(InputError, match="one holds no sentence pairs: it was saved with save_to_disk from an empty"):
        load_translation_datasets(args)


def save_splits(folder: Path, names) -> str:
    """A DatasetDict with the split `names` (each the three pairs) saved with save_to_disk in `folder`."""
    from datasets import Dataset

    rows = Dataset.from_dict({"translation": [{"de": de, "en": en} for de, en in zip(GERMAN, ENGLISH)]})
    DatasetDict({name: rows for name in names}).save_to_disk(str(folder))
    return str(folder)


@pytest.mark.parametrize("names, problem, example", [
    (["mytrain", "holdout"], "'mytrain' and 'holdout' are no split names",
     '`d = load_from_disk("{folder}"); DatasetDict({"train": d["mytrain"], "validation": d["holdout"]})'),
    (["train", "eval"], "'eval' is no split name", 'DatasetDict({"train": d["train"], "validation": d["eval"]})'),
    (["train", "extra"], "'extra' is no split name", 'd["extra"]'),
    (["train", "validation", "test_2016", "test_2017"], "'test_2016' and 'test_2017' are no split names",
     '"test": d["test_2016"]'),
    (["train", "valid", "dev"], "'valid' and 'dev' would both be validation", '"validation": d["valid"]})'),
])
def test_a_saved_dataset_dict_with_other_split_names_is_refused(tmp_path, names, problem, example):
    """load_dataset guessed at a saved DatasetDict's split names: `mytrain` and `holdout` both trained on (held-out
    data leaked into training), `eval` made test, `valid` and `dev` merged, `extra` dropped, without a word."""
    folder = save_splits(tmp_path / "saved", names)
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=folder,
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError) as error:
        load_translation_datasets(args)
    message = str(error.value)
    assert message.startswith(f"{folder} holds the splits {names}: {problem} here.") and "\n" not in message
    assert example.replace("{folder}", folder) in message


def test_a_saved_dataset_dicts_dev_split_is_validation_with_a_word(tmp_path, caplog):
    folder = save_splits(tmp_path / "saved", ["train", "dev"])
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=folder,
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        loaded = load_translation_datasets(args)
    assert list(loaded) == ["train", "validation"] and pairs(loaded["validation"]) == list(zip(GERMAN, ENGLISH))
    assert f"{folder}: its split 'dev' is read as the validation split." in caplog.messages


def test_a_saved_dataset_in_a_folder_that_cannot_be_written_to_is_read_without_writing_there(tmp_path, monkeypatch):
    """`datasets` writes the results of its filters beside the data it read: on a read-only mount the run failed with
    OSError: [Errno 30] Read-only file system (checked by hand with a read-only bind mount; here, os.access says so,
    which the loading no longer needs to ask: the folder is read into the cache, and nothing is written beside it)."""
    import os

    from datasets import Dataset

    folder = tmp_path / "saved"
    rows = Dataset.from_dict({"translation": [{"de": "", "en": "nothing"}] + [{"de": de, "en": en}
                                                                               for de, en in zip(GERMAN, ENGLISH)]})
    DatasetDict({"train": rows, "validation": rows}).save_to_disk(str(folder))
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: (
        False if mode == os.W_OK and Path(path).is_relative_to(folder) else access(path, mode, **kwargs)))
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(folder),
                                    cache_dir=str(tmp_path / "cache"))
    loaded = load_translation_datasets(args)  # filters the blank pair out of train
    assert pairs(loaded["train"]) == list(zip(GERMAN, ENGLISH))
    assert not list(folder.rglob("cache-*")), "written into the read-only folder"


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


TRANSLATIONS = [{"translation": {"de": de, "en": en}} for de, en in zip(GERMAN, ENGLISH)]


def test_a_dataset_whose_languages_are_written_otherwise_than_the_flags_says_which(tmp_path):
    """`--source_lang de-DE` on a dataset of 'de' and 'en' pairs was told "Check --source_lang/--target_lang or the
    file's fields", where plain text files were told which language to give."""
    DatasetDict(train=Dataset.from_list(TRANSLATIONS)).save_to_disk(str(tmp_path / "folder"))
    for source, target, fix in (("de-DE", "en", "Did you mean --source_lang de?"),
                                ("DE", "english", "Did you mean --source_lang de --target_lang en?"),
                                ("fr", "en", "Check --source_lang/--target_lang or the file's fields.")):
        args = TranslationDataArguments(source_lang=source, target_lang=target, dataset_name=str(tmp_path / "folder"),
                                        cache_dir=str(tmp_path / "cache"))
        with pytest.raises(InputError) as error:
            load_translation_datasets(args)
        assert str(error.value).endswith(f"(translation languages: ['de', 'en']). {fix}")


def test_a_file_given_as_dataset_name_is_one_message_not_a_hub_lookup(tmp_path, monkeypatch):
    """`--dataset_name j/train.parquet` was taken for a Hub id: 25 s of retries, then "Couldn't reach
    'j/train.parquet' on the Hub"."""
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("looked up on the Hub")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    path = write_jsonl(tmp_path / "data" / "train.jsonl", TRANSLATIONS)
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(path))
    with pytest.raises(InputError, match=re.escape(
            f"--dataset_name {path} is a file: --dataset_name takes a Hub id or a folder (of a dataset saved with "
            f"save_to_disk, or of data files named for their splits: --dataset_name {tmp_path / 'data'}), and "
            "--train_file, --validation_file and --test_file take JSON lines or CSV/TSV files.")):
        load_translation_datasets(args)


def test_a_first_thousand_rows_without_a_target_is_left_out_not_a_traceback(tmp_path, caplog):
    """1,000 rows whose `en` is null, then rows with text: pairing the columns typed the pairs by the first batch's
    values (null), and the first string after it was "TypeError: Couldn't cast array of type string to null", in a
    traceback, from a JSON lines file or a datasets folder alike. 999 such rows were left out, with a warning."""
    rows = [{"de": "ein Hund", "en": None}] * 1000 + [{"de": de, "en": en} for de, en in zip(GERMAN, ENGLISH)]
    write_jsonl(tmp_path / "late.jsonl", rows)
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "folder"))
    for given in ({"train_file": str(tmp_path / "late.jsonl")}, {"dataset_name": str(tmp_path / "folder")}):
        args = TranslationDataArguments(source_lang="de", target_lang="en", cache_dir=str(tmp_path / "cache"), **given)
        with caplog.at_level(logging.WARNING):
            loaded = load_translation_datasets(args)
        assert pairs(loaded["train"]) == [(de, en) for de, en in zip(GERMAN, ENGLISH) if de.strip() and en.strip()]
        assert any("Left out 1000 of" in message for message in caplog.messages)
        caplog.clear()


def test_a_folder_of_data_files_says_how_its_files_became_splits(tmp_path, caplog):
    """load_dataset takes a folder's splits from its file names: `holdout.jsonl` beside `mytrain.jsonl` is trained
    on, and `extra.jsonl` is not read; a warning names them. Files named for their splits load without one."""
    for name in ("mytrain", "holdout"):
        write_jsonl(tmp_path / "guessed" / f"{name}.jsonl", TRANSLATIONS)
    for name in ("train", "validation", "extra"):
        write_jsonl(tmp_path / "named" / f"{name}.jsonl", TRANSLATIONS)
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(tmp_path / "guessed"),
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        assert len(load_translation_datasets(args)["train"]) == 6
        assert any("as train = holdout.jsonl, mytrain.jsonl. Check that no held-out file is trained on" in message
                   for message in caplog.messages)
        caplog.clear()
        args.dataset_name = str(tmp_path / "named")
        load_translation_datasets(args)
        assert [message for message in caplog.messages if "file names" in message] == [
            f"{args.dataset_name}: datasets took the splits from the file names, as train = train.jsonl; validation = "
            "validation.jsonl; not read: extra.jsonl. Check that no held-out file is trained on: name the files "
            "train, validation and test (.jsonl, .csv, ...), or give them with --train_file/--validation_file"
            "/--test_file."]
        caplog.clear()
        (tmp_path / "named" / "extra.jsonl").unlink()
        load_translation_datasets(args)
        assert not any("file names" in message for message in caplog.messages)
        (tmp_path / "named" / "validation.jsonl").rename(tmp_path / "named" / "valid.jsonl")  # as the README says
        load_translation_datasets(args)
        assert not any("file names" in message for message in caplog.messages)
        write_jsonl(tmp_path / "named" / "dev.jsonl", TRANSLATIONS)  # two files merged into one split
        assert len(load_translation_datasets(args)["validation"]) == 2 * len(TRANSLATIONS)
        assert any("as train = train.jsonl; validation = dev.jsonl, valid.jsonl." in message
                   for message in caplog.messages)


def test_a_side_there_both_plain_and_gzipped_says_which_is_read(tmp_path, caplog):
    """train.de beside a different train.de.gz: the plain one was read without a word."""
    (tmp_path / "train.de").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "train.de.gz").write_bytes(gzip.compress("drei\nvier\n".encode()))
    (tmp_path / "train.en").write_text("one\ntwo\n", encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_prefix=str(tmp_path / "train"),
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        assert pairs(load_translation_datasets(args)["train"]) == [("eins", "one"), ("zwei", "two")]
    assert caplog.messages == [f"{tmp_path / 'train.de'} and {tmp_path / 'train.de.gz'} are both there: "
                               f"{tmp_path / 'train.de'} is read. Remove or move the other if it is not the same text."]


def test_plain_text_beside_a_folders_data_files_is_said_to_be_left_unread(tmp_path, caplog):
    """train.jsonl beside val.de and val.en trained without validation, and without a word."""
    write_jsonl(tmp_path / "data" / "train.jsonl", TRANSLATIONS)
    (tmp_path / "data" / "val.de").write_text("zwei\n", encoding="utf-8")
    (tmp_path / "data" / "val.en.gz").write_bytes(gzip.compress(b"two\n"))
    (tmp_path / "data" / "notes.txt").write_text("not data\n", encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(tmp_path / "data"),
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        assert list(load_translation_datasets(args)) == ["train"]
    assert caplog.messages == [
        f"{tmp_path / 'data'}: the plain text files val.de, val.en.gz are not read: --dataset_name reads a folder's "
        "JSON lines, CSV or TSV files (train.jsonl). Give all the data as plain text (--train_prefix, "
        "--validation_prefix, --test_prefix), or write those pairs into a file of the others' kind."]


@pytest.mark.parametrize("files, expected", [
    ({"train.jsonl": '{"translation": {"de": "eins", "en": "one"}}\n\n{"translation": {"de": "zwei"\n'},
     r"Cannot load the dataset from .*folder: in .*train\.jsonl, line 3 is not valid JSON \(Expecting ',' delimiter "
     r"at column 30\)\.$"),
    ({"train.csv": "de,en\neins,one\n", "validation.csv": "zwei,two\ndrei,three\n"},
     r"Cannot load the dataset from .*folder: its data files must all have the same columns, but .*validation\.csv "
     r"has \['zwei', 'two'\] where the first has \['de', 'en'\]\."),
    ({"train.jsonl.gz": gzip.compress(json.dumps(TRANSLATIONS[0]).encode() * 50)[:-20]},
     r".*train\.jsonl\.gz is not a complete gzip file"),
])
def test_a_local_folder_with_an_unreadable_file_is_one_message(tmp_path, files, expected):
    for name, content in files.items():
        path = tmp_path / "folder" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    args = TranslationDataArguments(source_lang="de", target_lang="en", dataset_name=str(tmp_path / "folder"),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError, match=expected) as error:
        load_translation_datasets(args)
    assert "\n" not in str(error.value)


def test_pairs_without_text_on_a_side_are_left_out_and_counted(tmp_path, caplog):
    rows = [{"translation": {"de": "ein Hund", "en": "a dog"}}, {"translation": {"de": None, "en": "a cat"}},
            {"translation": {"de": "eine Maus", "en": "  "}}, {"translation": {"en": "no German at all"}},
            {"de": "flach", "en": ""}, {"id": 7},  # no "translation": its pair is the flat fields, or none
            {"translation": {"de": "\ufeff\u200b", "en": "invisible German"}},  # blank, as the pipeline reads it
            {"translation": {"de": "unsichtbar", "en": "\u200b"}}]  # a zero-width space: nothing to learn, was kept
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / "train.jsonl"),
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        train = load_translation_datasets(args)["train"]
    assert pairs(train) == [("ein Hund", "a dog")]
    # which rows, as plain text's warnings name its lines (a file's or folder's rows were only counted)
    assert ("Left out 7 of 8 train pairs whose de or en side is missing or empty (rows 2, 3, 4, 5, 6, ... of the "
            "split, counted from 1).") in caplog.messages
    (tmp_path / "train.jsonl").write_text(json.dumps(rows[1]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="The train split has no sentence pairs"):
        load_translation_datasets(args)
    # evaluation data keeps them in place (translations written out line up with its lines), as blanks
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", test_file=str(tmp_path / "test.jsonl"),
                                    cache_dir=str(tmp_path / "cache"))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        test = load_translation_datasets(args, keep_blank_evaluation_pairs=True)["test"]
    assert any("pairs have a missing or empty de or en side (rows 2, 3, 4, 5, 6, ... of the split, counted from 1)"
               in message for message in caplog.messages)
    assert pairs(test)[:4] == [("ein Hund", "a dog"), ("", "a cat"), ("eine Maus", "  "), ("", "no German at all")]
    assert len(test) == 8 and rows_with_text(test, "de", "en") == [0]


def load_pairs(source_lang: str, target_lang: str, tmp_path: Path, split: str = "train", **sources):
    """The (source, target) pairs `load_translation_datasets` reads for one split of `sources`."""
    args = TranslationDataArguments(source_lang=source_lang, target_lang=target_lang, cache_dir=str(tmp_path / "cache"),
                                    **{key: str(value) for key, value in sources.items()})
    return pairs(load_translation_datasets(args, keep_blank_evaluation_pairs=True)[split], source_lang, target_lang)


JSON_VALUES = ['"1"', "2", '"true"', "true", '"null"', '"42"', "1999", "1.50", '"[1]"', '"\\"Stop!\\""']
JSON_TEXTS = ["1", "2", "true", "true", "null", "42", "1999", "1.50", "[1]", '"Stop!"']


@pytest.mark.parametrize("layout", ['{"translation": {"de": "wort %d", "digits": %s}}',
                                    '{"de": "wort %d", "digits": %s}'], ids=["translation", "flat"])
@pytest.mark.parametrize("name", ["train.jsonl", "train.json"])
def test_json_numbers_and_strings_that_look_like_json_are_read_as_text(tmp_path, layout, name):
    """A number in a language field made `datasets` read the whole field as `Json`, which decoded "1", "true" and
    "null" of the other rows into a number, a boolean and None: ten digit targets, one of them a number, were all
    left out as "missing or empty". Every value is text, as a CSV cell is: a number as the file writes it."""
    rows = [layout % (row, value) for row, value in enumerate(JSON_VALUES)]
    text = "".join(row + "\n" for row in rows) if name.endswith("l") else "[\n" + ",\n".join(rows) + "\n]\n"
    (tmp_path / name).write_text(text, encoding="utf-8")
    expected = [(f"wort {row}", digits) for row, digits in enumerate(JSON_TEXTS)]
    assert load_pairs("de", "digits", tmp_path, train_file=tmp_path / name) == expected
    (tmp_path / name).write_text("".join(layout % (row, row) + "\n" for row in range(10)), encoding="utf-8")
    numbers = load_pairs("de", "digits", tmp_path, train_file=tmp_path / name)  # a field of numbers only
    assert numbers == [(f"wort {n}", str(n)) for n in range(10)]


@pytest.mark.parametrize("name, where", [("train.jsonl", "line"), ("train.json", "item")])
def test_json_values_that_are_not_text_are_named_with_their_lines(tmp_path, caplog, name, where):
    """A list or an object is not text: the warning says so, and where, instead of only "missing or empty"."""
    values = ['"eins"', '["zwei"]', '"drei"', '{"text": "vier"}', '["fünf", "sechs"]', "7"]
    rows = [f'{{"translation": {{"de": {value}, "en": "{row}"}}}}' for row, value in enumerate(values, start=1)]
    text = "".join(row + "\n" for row in rows) if where == "line" else "[" + ",\n".join(rows) + "]\n"
    (tmp_path / name).write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        assert load_pairs("de", "en", tmp_path, train_file=tmp_path / name) == [("eins", "1"), ("drei", "3"),
                                                                                 ("7", "6")]
    assert (f"{tmp_path / name}: 2 de values ({where}s 2, 5) are not text but lists: each is read as missing, so its "
            "pair has no de side. Give each side of a pair as one string.") in caplog.messages
    assert (f"{tmp_path / name}: the de value of {where} 4 is not text but an object: it is read as missing, so its "
            "pair has no de side. Give each side of a pair as one string.") in caplog.messages
    # evaluation data keeps their pairs in place, blank on that side
    assert load_pairs("de", "en", tmp_path, "test", test_file=tmp_path / name)[:4] == [
        ("eins", "1"), ("", "2"), ("drei", "3"), ("", "4")]


TSV_TEXT = 'en\tde\n"Hello," he said.\t"Hallo", sagte er.\nA 5" screen\tEin 5" Bildschirm\nnull\tNA\n'
NUMBERS_CSV = "de,digits\n" + "".join(f"w{n},{n}\n" for n in range(1, 20)) + "w20,020\n"
NUMBERS_JSON = "".join(json.dumps({"translation": {"de": f"w{n}", "digits": n if n % 2 else str(n)}}) + "\n"
                       for n in range(1, 20))


@pytest.mark.parametrize("name, text, languages", [
    ("train.tsv", TSV_TEXT, ("en", "de")),
    ("train.tsv.gz", TSV_TEXT, ("en", "de")),
    ("train.csv", NUMBERS_CSV, ("de", "digits")),
    ("train.jsonl", NUMBERS_JSON, ("de", "digits")),
], ids=["tsv", "tsv.gz", "csv", "jsonl"])
def test_a_folder_of_data_files_reads_them_as_train_file_does(tmp_path, name, text, languages):
    """`--dataset_name <folder>` read CSV/TSV with pandas' defaults: TSV quotes removed, "null" and "NA" pairs
    dropped, a column of numbers dropped whole (020 made 20); and JSON numbers as --train_file did."""
    path = tmp_path / "folder" / name
    path.parent.mkdir()
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    expected = load_pairs(*languages, tmp_path, train_file=path)
    assert load_pairs(*languages, tmp_path, dataset_name=path.parent) == expected
    if name.startswith("train.tsv"):
        assert expected == [('"Hello," he said.', '"Hallo", sagte er.'), ('A 5" screen', 'Ein 5" Bildschirm'),
                            ("null", "NA")]
    else:
        numbers = [(f"w{n}", str(n)) for n in range(1, 20)]
        assert expected == (numbers + [("w20", "020")] if name == "train.csv" else numbers)


def test_a_folder_of_data_files_reads_each_split_and_refuses_mixed_formats(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "train.tsv").write_text(TSV_TEXT, encoding="utf-8")
    (folder / "validation.tsv").write_text("en\tde\n42\t\"zweiundvierzig\"\n", encoding="utf-8")
    assert load_pairs("en", "de", tmp_path, "validation", dataset_name=folder) == [("42", '"zweiundvierzig"')]
    (folder / "train.jsonl").write_text(json.dumps({"en": "one", "de": "eins"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"its train split is made of files of different formats \(train\.jsonl, "
                                         r"train\.tsv\)\. Keep one format a split"):
        load_pairs("en", "de", tmp_path, dataset_name=folder)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_folder_of_plain_parallel_text_says_to_give_its_prefixes(tmp_path, suffix):
    """`--dataset_name` of Multi30k's folder (train.en.gz, ...) said "No (supported) data files found"."""
    folder = tmp_path / "multi30k"
    folder.mkdir()
    for stem in ("train", "val"):
        write_lines(folder / f"{stem}.de{suffix}", GERMAN)
        write_lines(folder / f"{stem}.en{suffix}", ENGLISH)
    with pytest.raises(InputError) as error:
        load_pairs("en", "de", tmp_path, dataset_name=folder)
    assert str(error.value) == (
        f"{folder} holds plain parallel text (train.en and train.de, val.en and val.de), which --dataset_name does "
        f"not read: give it with --train_prefix {folder}/train --validation_prefix {folder}/val (a prefix names the "
        "files <prefix>.<source_lang> and <prefix>.<target_lang>, .gz or not).")
    with pytest.raises(InputError, match=r"\(train\.\*, val\.\* in de, en\), .* It has no 'fr' files: give "
                                         r"--source_lang and --target_lang among its languages \(de, en\)\.$"):
        load_pairs("en", "fr", tmp_path, dataset_name=folder)
    assert load_pairs("en", "de", tmp_path, train_prefix=folder / "train") == list(zip(ENGLISH, GERMAN))


@pytest.mark.parametrize("ending", [".en", ".de", ".en.gz"])
def test_a_prefix_that_ends_with_a_language_says_to_leave_it_out(tmp_path, ending):
    """`--train_prefix data/train.en` looked for data/train.en.en, and said only that."""
    write_lines(tmp_path / "train.en", ENGLISH)
    write_lines(tmp_path / "train.de", GERMAN)
    prefix = f"{tmp_path / 'train'}{ending}"
    with pytest.raises(FileNotFoundError) as error:
        load_pairs("en", "de", tmp_path, train_prefix=prefix)
    assert str(error.value).endswith(
        f"The prefix {prefix!r} ends with the language ({ending}): give the prefix without it, "
        f"{str(tmp_path / 'train')!r}, which names {tmp_path / 'train'}.en and {tmp_path / 'train'}.de (or .gz).")


def parallel_text_folder(folder: Path, stems=("train", "val")) -> Path:
    """A folder laid out as Multi30k's: `train.de.gz`, `train.en.gz`, `val.de.gz`, `val.en.gz`."""
    folder.mkdir(parents=True)
    for stem in stems:
        write_lines(folder / f"{stem}.de.gz", GERMAN)
        write_lines(folder / f"{stem}.en.gz", ENGLISH)
    return folder


def prefix_error(source_lang: str, target_lang: str, tmp_path: Path, **sources) -> str:
    """The one-line message of the MissingFileError (a FileNotFoundError) that loading `sources` raises."""
    with pytest.raises(FileNotFoundError) as error:
        load_pairs(source_lang, target_lang, tmp_path, **sources)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_prefix_whose_folder_is_not_there_says_so_and_where_a_relative_path_was_looked_for(tmp_path, monkeypatch):
    """The README's `--train_prefix ../shared/data/multi30k/train`, run from another folder than the repository's,
    said only "No 'en' side for prefix ...": not that the folder is not there, nor where a relative path leads."""
    tmp_path = tmp_path.resolve()
    parallel_text_folder(tmp_path / "shared/data/multi30k")
    repository = tmp_path / "main"
    (repository / "scripts").mkdir(parents=True)
    monkeypatch.chdir(repository / "scripts")  # the command's path is relative to `main`
    message = prefix_error("en", "de", tmp_path, train_prefix="../shared/data/multi30k/train")
    assert message == (
        "No folder ../shared/data/multi30k for --train_prefix ../shared/data/multi30k/train (looked for "
        "../shared/data/multi30k/train.en or ../shared/data/multi30k/train.en.gz): the path is relative to the "
        f"current directory, {repository / 'scripts'}, so it is {repository / 'shared/data/multi30k'}, and "
        f"{repository} has no 'shared'. Run the command from the folder the path is relative to, or give the path "
        "from the current directory or an absolute one.")
    monkeypatch.chdir(repository)  # from the right folder, the same command reads the files
    assert load_pairs("en", "de", tmp_path, train_prefix="../shared/data/multi30k/train") == list(zip(ENGLISH, GERMAN))
    message = prefix_error("en", "de", tmp_path, train_prefix="../shared/data/multi30k/train",
                           test_prefix=tmp_path / "elsewhere/data/test")  # an absolute path: no current directory
    assert message == (
        f"No folder {tmp_path}/elsewhere/data for --test_prefix {tmp_path}/elsewhere/data/test (looked for "
        f"{tmp_path}/elsewhere/data/test.en or {tmp_path}/elsewhere/data/test.en.gz): {tmp_path} has no 'elsewhere'. "
        "Check the path.")
    monkeypatch.chdir(tmp_path)  # `--train_prefix=~/data/train` or in quotes: the shell leaves ~ as it is
    assert prefix_error("en", "de", tmp_path, train_prefix="~/data/train").endswith(
        f"{tmp_path} has no '~'. The shell did not expand ~ (it does not after = or inside quotes): write $HOME/... "
        "or the full path.")


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_a_folder_given_as_a_prefix_says_which_prefixes_to_give(tmp_path, split):
    """`--train_prefix ../shared/data/multi30k` (the folder) looked for multi30k.en and said only that; now it says,
    as `--dataset_name` of the folder does, which prefixes to give."""
    folder = parallel_text_folder(tmp_path / "multi30k")
    sources = {"train_prefix": folder / "train", f"{split}_prefix": folder}
    message = prefix_error("en", "de", tmp_path, **sources)
    assert message == (
        f"--{split}_prefix {folder} is a folder, not a prefix: it holds plain parallel text (train.en and train.de, "
        f"val.en and val.de), so give --train_prefix {folder}/train --validation_prefix {folder}/val (a prefix is the "
        "files' path without the language: <prefix>.<source_lang> and <prefix>.<target_lang>, .gz or not).")


@pytest.mark.parametrize("source_lang, target_lang, expected", [
    ("english", "de", "not english; did you mean --source_lang en?"),
    ("EN", "de", "not EN; did you mean --source_lang en?"),
    ("eng", "de", "not eng; did you mean --source_lang en?"),
    ("en", "deu", "not deu; did you mean --target_lang de?"),
    ("en", "ger", "not ger; did you mean --target_lang de?"),
    ("en", "German", "not German; did you mean --target_lang de?"),
    ("english", "german", "not english or german; did you mean --source_lang en --target_lang de?"),
    ("en", "fr", "not fr; give --source_lang and --target_lang among de and en (as the files name them), or add "
                 "{prefix}.fr or {prefix}.fr.gz."),
])
def test_languages_without_files_list_those_with_files_and_the_one_meant(tmp_path, source_lang, target_lang,
                                                                         expected):
    """`--source_lang english` (or EN, eng) said "No 'english' side for prefix ...", not which languages the files
    are in (en, de), as the message for no language flags does."""
    folder = parallel_text_folder(tmp_path / "multi30k")
    for split in ("train", "validation", "test"):
        stem = "train" if split == "train" else "val"
        message = prefix_error(source_lang, target_lang, tmp_path, **{f"{split}_prefix": folder / stem})
        assert message.startswith(f"No '{source_lang if source_lang != 'en' else target_lang}'")
        assert f" for --{split}_prefix {folder}/{stem}: its files are in de and en ({stem}.de.gz, {stem}.en.gz), " in (
            message)
        assert message.endswith(expected.format(prefix=folder / stem)), message


@pytest.mark.parametrize("typed, split, expected", [
    ("training", "train", "; did you mean --train_prefix {folder}/train (train.de.gz, train.en.gz)?"),
    ("Train", "train", "; did you mean --train_prefix {folder}/train (train.de.gz, train.en.gz)?"),
    ("validation", "validation", "; did you mean --validation_prefix {folder}/val (val.de.gz, val.en.gz)?"),
    ("dev", "validation", "; did you mean --validation_prefix {folder}/val (val.de.gz, val.en.gz)?"),
    ("test2016", "test", ", and its plain parallel text is train.* (de, en), val.* (de, en): check the name, or "
                         "give --test_prefix one of those prefixes ({folder}/<name>)."),
])
def test_a_prefix_that_names_no_file_suggests_those_in_its_folder(tmp_path, typed, split, expected):
    """`--train_prefix data/training` where the files are data/train.en.gz said only that data/training.en was not
    there."""
    folder = parallel_text_folder(tmp_path / "multi30k")
    sources = {"train_prefix": folder / "train", f"{split}_prefix": folder / typed}
    message = prefix_error("en", "de", tmp_path, **sources)
    assert message == (f"No file {folder}/{typed}.en or {folder}/{typed}.en.gz: {folder} has no {typed}.<lang> "
                       f"file{expected.format(folder=folder)}")


def test_a_side_of_plain_parallel_text_given_as_a_data_file_says_which_prefix_to_give(tmp_path):
    """`--train_file data/train.en.gz` said to "use --train_prefix", not which prefix: `data/train`."""
    folder = parallel_text_folder(tmp_path / "multi30k")
    with pytest.raises(InputError) as error:
        load_pairs("en", "de", tmp_path, train_file=folder / "train.en.gz")
    assert str(error.value) == (
        f"{folder}/train.en.gz is one side of plain parallel text, which --train_file does not read (it reads JSON "
        f"lines, CSV or TSV): give --train_prefix {folder}/train --source_lang en --target_lang de in place of "
        f"--train_file; a prefix names the files <prefix>.<lang>, .gz or not, here {folder}/train.* (train.de.gz, "
        "train.en.gz).")
    with pytest.raises(InputError, match=(
            rf"give --train_prefix {folder}/train --validation_prefix {folder}/val --source_lang en --target_lang de "
            r"in place of --train_file/--validation_file; ")):
        load_pairs("english", "de", tmp_path, train_file=folder / "train.de.gz", validation_file=folder / "val.en")
    with pytest.raises(InputError, match=(  # not "Give exactly one data source", with the README's other prefix
            rf"^{folder}/train.en.gz is one side of plain parallel text, .*: give --train_prefix {folder}/train "
            r"--source_lang en --target_lang de in place of --train_file; ")):
        load_pairs("en", "de", tmp_path, train_file=folder / "train.en.gz", validation_prefix=folder / "val")


@pytest.mark.parametrize(
    "sources",
    [{}, {"dataset_name": "wmt/wmt14", "train_prefix": "data/train"}, {"train_file": "a.json", "builtin_dataset": "x"}],
)
def test_load_translation_datasets_wants_exactly_one_source(sources):
    with pytest.raises(ValueError, match="exactly one data source"):
        load_translation_datasets(TranslationDataArguments(source_lang="de", target_lang="en", **sources))


def test_load_translation_datasets_rejects_plain_text_as_train_file():
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file="train.txt")
    with pytest.raises(ValueError, match="--train_file expects JSON lines .* or CSV/TSV .* use --train_prefix"):
        load_translation_datasets(args)


def test_tab_separated_pairs_in_a_txt_file_are_told_to_be_named_tsv(tmp_path):
    """They were told to use --train_prefix for plain text, which would have read each line, tab and all, as one
    sentence."""
    (tmp_path / "corpus.txt").write_text("ein Hund\ta dog\nzwei\ttwo\n", encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / "corpus.txt"))
    with pytest.raises(InputError) as error:
        load_translation_datasets(args)
    assert str(error.value) == (
        f"{tmp_path / 'corpus.txt'}: --train_file reads a file by its name's ending, and this one's lines seem to hold "
        "tab-separated pairs: name it .tsv, with a header row naming the languages' columns (e.g. de<TAB>en).")


@pytest.mark.parametrize("name, text", [
    ("train.csv", 'de,en\nnull,zero\n42,forty-two\n"Hallo, Welt",hello world\nNA,\n'),
    ("train.tsv.gz", 'de\ten\nnull\tzero\n42\tforty-two\n"Hallo", sagte er\t"Hello," he said\nNA\t\n'),
    # a spreadsheet's "CSV UTF-8": a byte order mark before the header, Windows line ends
    ("train.csv", '\ufeffde,en\r\nnull,zero\r\n42,forty-two\r\n"Hallo, Welt",hello world\r\nNA,\r\n'),
])
def test_csv_and_tsv_files_with_a_header(tmp_path, name, text, caplog):
    """Each cell is text: "null" and "NA" are words, a column of numbers stays strings, and in TSV quotes are text."""
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(path),
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        train = load_translation_datasets(args)["train"]
    third = ("Hallo, Welt", "hello world") if name == "train.csv" else ('"Hallo", sagte er', '"Hello," he said')
    assert pairs(train) == [("null", "zero"), ("42", "forty-two"), third]
    assert any("Left out 1 of 4 train pairs" in message for message in caplog.messages)  # NA with no English


def test_a_tsv_file_that_pandas_or_the_csv_module_wrote_is_read_with_their_quoting(tmp_path):
    """pandas' `to_csv(sep="\\t")` quotes a field with a quote in it and doubles its quotes: read with quotes as text,
    8 of 2,000 Multi30k pairs kept the quotes around them and their inner quotes doubled, without a word."""
    import csv

    rows = [("de", "en"), ('Er sagt: "Willkommen."', 'He says "Welcome."'), ("zwei", "two"),
            ('"Hallo", sagte er', '"Hello," he said')]
    with open(tmp_path / "train.tsv", "w", newline="", encoding="utf-8") as file:
        csv.writer(file, delimiter="\t").writerows(rows)
    assert '"He says ""Welcome."""' in (tmp_path / "train.tsv").read_text()
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / "train.tsv"),
                                    cache_dir=str(tmp_path / "cache"))
    assert pairs(load_translation_datasets(args)["train"]) == rows[1:]
    late = [rows[0]] + [(f"Zeile {n}", f"line {n}") for n in range(12_000)] + rows[1:]  # only the first 10,000 lines
    with open(tmp_path / "late.tsv", "w", newline="", encoding="utf-8") as file:  # were looked at
        csv.writer(file, delimiter="\t").writerows(late)
    args.train_file = str(tmp_path / "late.tsv")
    assert pairs(load_translation_datasets(args)["train"])[-3:] == rows[1:]


def test_a_csv_file_with_pandas_index_column_is_read_without_it(tmp_path):
    """`to_csv()` without `index=False` writes ",en,de" above "0,a dog,ein Hund": a traceback-like message about a
    field "" before."""
    (tmp_path / "train.csv").write_text(",de,en\n0,ein Hund,a dog\n1,zwei,two\n", encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / "train.csv"),
                                    cache_dir=str(tmp_path / "cache"))
    train = load_translation_datasets(args)["train"]
    assert pairs(train) == [("ein Hund", "a dog"), ("zwei", "two")] and train.column_names == ["translation"]


@pytest.mark.parametrize("text, advice", [
    ("de;en\nein Hund;a dog\n", "it has columns ['de;en']. The file's fields seem separated by ';', not commas: save "
                                "it with commas (CSV) or tabs (.tsv)."),  # Excel's CSV where the comma is a decimal
    # with a comma in a sentence, the rows had fields past the one column: "line 2 has 3 fields, but the header row
    # names 1 columns ['de;en']", which names no ';'
    ("de;en\nHallo, Welt;hello, world\n", "its header row 'de;en' is one column: the file separates its fields "
                                          "with ';', not commas (a spreadsheet in a language that writes decimal "
                                          "commas saves CSV with ';'). Save it as CSV with commas (a field holding a "
                                          "comma in double quotes), or with tabs as .tsv."),
    ("source,target\nein Hund,a dog\n", "it has columns ['source', 'target']. Name the columns for the languages (de, "
                                        "en), or give their names: --source_lang source --target_lang target."),
    # these were told to give their column names as languages: "--source_lang Ein Hund. --target_lang A dog.."
    ("Ein Hund.,A dog.\nZwei.,Two.\n", "it has columns ['Ein Hund.', 'A dog.']. The file seems to have no header row, "
                                      "so its first pair was taken for the column names: add a header row naming the "
                                      "languages' columns (de, en)."),
    ("de, en\nein Hund, a dog\n", "it has columns ['de', ' en']. Its header names [' en'] have spaces around them: "
                                  "write the header without (e.g. de,en)."),  # "--target_lang  en" did not match
    ('{"version": 1, "data": [1, 2]}\n', "it has columns ['version', 'data']. Check --source_lang/--target_lang or "
                                         "the file's fields."),
    # a file of no pairs: "Cannot read ... (Instruction "train" corresponds to no data!): it needs a header row"
    ("de,en\n", "train.csv holds no sentence pairs (a header row alone): it needs a header row naming the columns "
                "(e.g. de,en), then one pair a row."),
    ("de\ten\n", "train.tsv holds no sentence pairs (a header row alone): it needs a header row naming the columns "
                 "(e.g. de<TAB>en), then one pair a row."),
])
def test_csv_columns_that_are_not_the_languages_get_advice_that_fits(tmp_path, text, advice):
    name = "train.jsonl" if text.startswith("{") else "train.tsv" if "\t" in text else "train.csv"
    (tmp_path / name).write_text(text, encoding="utf-8")
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / name),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError) as error:
        load_translation_datasets(args)
    assert str(error.value).endswith(advice)


def test_a_malformed_data_file_is_one_message(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"translation": {"de": "eins", "en": "one"}}\n{"translation": \n')
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / "train.jsonl"),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="Cannot read .*train.jsonl as JSONL .* one JSON object such as"):
        load_translation_datasets(args)


@pytest.mark.parametrize("name, text, reason", [
    # pyarrow counts rows from 0, within a block, and without blank lines: it said "row 2" of this line 4
    ("train.jsonl", '{"translation": {"de": "eins", "en": "one"}}\n\n{"de": "zwei", "en": "two"}\n{"de": "drei"\n',
     "line 4 is not valid JSON (Expecting ',' delimiter at column 14)"),
    ("train.jsonl", '{"de": "eins", "en": "one"}\n["zwei", "two"]\n', "line 2 is not a JSON object {...}"),
    ("train.json", '[\n  {"de": "eins", "en": "one"},\n  {"de": "zwei" "en": "two"}\n]\n',
     "line 3 is not valid JSON (Expecting ',' delimiter at column 17)"),
    # pyarrow: "Value is too big! at position 14", no line
    ("train.jsonl", '{"de": "eins", "en": "one"}\n{"de": "r", "en": 123456789012345678901234567890}\n',
     'line 2 holds the number 123456789012345678901234567890, larger than pyarrow reads (64 bits): write a number '
     'meant as text as a string, "123456789012345678901234567890"'),
])
def test_a_malformed_data_file_names_its_line_in_one_line(tmp_path, caplog, name, text, reason):
    (tmp_path / name).write_bytes(text.encode("latin-1"))
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / name),
                                    cache_dir=str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING), pytest.raises(InputError) as error:
        load_translation_datasets(args)
    assert f"{tmp_path / name} as {name.split('.')[1].upper()} ({reason}): it needs " in str(error.value)
    assert "\n" not in str(error.value)
    assert not any(record.name.startswith("datasets") for record in caplog.records)  # said once, by the InputError


@pytest.mark.parametrize("name, data, expected", [
    ("train.csv", "de,en\nfährt,rides\n".encode("latin-1"),
     "{path}: line 2 is not valid UTF-8 (byte b'\\xe4' at byte offset 1 of the line). Re-encode the file as UTF-8, "
     "keeping its name, e.g. `iconv -f CP1252 -t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}`."),
    # Excel's "Unicode Text" and Notepad's "Unicode": the header's names were read as '��d\x00e\x00'
    ("train.tsv", "de\ten\nfährt\trides\n".encode("utf-16"),
     '{path} is UTF-16 text (as Windows Notepad saves "Unicode"), not UTF-8. Convert it to UTF-8, keeping its name, '
     "e.g. `iconv -f UTF-16 -t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}`."),
    ("train.jsonl.gz", gzip.compress('{"de": "fährt", "en": "rides"}\n'.encode("utf-16")),
     '{path} is UTF-16 text (as Windows Notepad saves "Unicode"), not UTF-8. Convert it to UTF-8, keeping its name, '
     "e.g. `gzip -dc {path} | iconv -f UTF-16 -t UTF-8 | gzip > {path}.utf8 && mv {path}.utf8 {path}`."),
], ids=["latin1_csv", "utf16_tsv", "utf16_jsonl_gz"])
def test_a_data_file_that_is_not_utf8_is_told_how_to_convert_it(tmp_path, name, data, expected):
    """Plain text was told its encoding and given the iconv command; a CSV, TSV or JSON lines file only "line 2 is
    not valid UTF-8", or, in UTF-16, that its header row named columns ['��d\x00e\x00', '\x00e\x00n\x00']."""
    (tmp_path / name).write_bytes(data)
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / name),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError) as error:
        load_translation_datasets(args)
    assert str(error.value) == expected.format(path=tmp_path / name)


@pytest.mark.parametrize("name, text, line, field", [
    ("train.tsv", "de\ten\nfährt\trides\t0.9\nHund\tdog\t0.8\n", 2, "0.9"),  # a score column without a name
    ("train.csv.gz", "de,en\nfährt,rides,Notiz\nHund,dog\n", 2, "Notiz"),  # on the first row only
    ("train.csv", "de,en\n\nEin Hund, eine Katze,a dog and a cat\nHund,dog\n", 3, "a dog and a cat"),  # no quotes
    ("train.tsv", "de\ten\nfährt\trides\t\nHund\tdog\tNotiz\n", 3, "Notiz"),  # past a first row's empty field
    ("train.csv", "de,en\neins,one\nzwei,two,drei\n", 3, "drei"),  # a later row: pandas' "Expected 2 fields"
], ids=["score_column", "first_row_only", "unquoted_comma", "after_empty_fields", "later_row"])
def test_a_field_past_the_columns_the_header_row_names_is_refused_naming_its_line(tmp_path, name, text, line, field):
    """pandas took the first column for the rows' index where the first data row had a field more than the header
    row names: with a score after every pair, the English was read as the index, the German as the English and the
    score as the German, and trained on without a word; with a note on the first row only, every other pair was left
    out as having no English."""
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(path),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError) as error:
        load_translation_datasets(args)
    assert str(error.value).startswith(f"{path}: line {line} has 3 fields, but the header row names 2 columns "
                                       f"['de', 'en']: no column is named for its field {field!r}. Name every column "
                                       "in the header row (an extra one e.g. score: columns other than de and en are "
                                       "not read), or remove the extra field")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name, text", [
    ("train.tsv", "de\ten\nfährt\trides\t\nHund\tdog\t\n"),  # a tab at the end of each row
    ("train.csv.gz", "de,en,\r\nfährt,rides,\r\nHund,dog\r\n"),  # and of the header row; one row without it
    ("train.tsv", "de\ten\tscore\nfährt\trides\t0.9\nHund\tdog\t0.8\n"),  # a column with a name is not read
], ids=["every_row", "header_row_too", "named_column"])
def test_empty_fields_at_the_end_of_the_rows_are_read_past(tmp_path, name, text):
    """A delimiter at the end of every row, as some tools write, made the English the index and the empty last
    field the German: "The train split has no sentence pairs". With one at the end of the header row too, the
    file could not be read ('Field "" does not exist in schema'). An empty field holds no text to lose."""
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(path),
                                    cache_dir=str(tmp_path / "cache"))
    assert pairs(load_translation_datasets(args)["train"]) == [("fährt", "rides"), ("Hund", "dog")]


@pytest.mark.parametrize("split", ["train", "validation"])
@pytest.mark.parametrize("name, row", [
    ("data.jsonl", {"de": "fährt", "en": "rides"}),
    ("data.jsonl.gz", {"translation": {"de": "fährt", "en": "rides"}}),
    ("data.json", {"translation": {"de": "fährt", "en": "rides"}}),
])
def test_json_lines_that_are_not_utf8_name_the_line(tmp_path, caplog, split, name, row):
    """JSON lines saved as Latin-1 were read by pyarrow with the bytes that are not UTF-8 in its strings, and
    training stopped with a UnicodeDecodeError traceback where the language columns were paired up; CSV, TSV and
    plain text said which line to fix."""
    text = "".join(json.dumps(each, ensure_ascii=False) + "\n" for each in (TRANSLATIONS[1], row))
    path = tmp_path / name
    data = text.encode("latin-1")
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    args = TranslationDataArguments(source_lang="de", target_lang="en", cache_dir=str(tmp_path / "cache"),
                                    **{f"{split}_file": str(path)})
    with caplog.at_level(logging.WARNING), pytest.raises(InputError) as error:
        load_translation_datasets(args)
    # the whole message plain text gets: with the command that converts the file (a .gz one unpacked and packed)
    converting = (f"gzip -dc {path} | iconv -f CP1252 -t UTF-8 | gzip > {path}.utf8 && mv {path}.utf8 {path}"
                  if name.endswith(".gz") else f"iconv -f CP1252 -t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}")
    assert str(error.value) == (f"{path}: line 2 is not valid UTF-8 (byte b'\\xe4' at byte offset "
                                f"{str(error.value).split('byte offset ')[1].split(' ')[0]} of the line). Re-encode the "
                                f"file as UTF-8, keeping its name, e.g. `{converting}`.")
    assert "\n" not in str(error.value)
    assert not any(record.name.startswith("datasets") for record in caplog.records)


@pytest.mark.parametrize("name, content", [
    ("train.jsonl.gz", gzip.compress(json.dumps(TRANSLATIONS[0]).encode() * 50)[:-20]),  # cut off
    ("train.jsonl.gz", json.dumps(TRANSLATIONS[0]).encode()),  # not gzip
    ("train.csv.gz", b"de,en\neins,one\n"),
])
def test_a_damaged_gzip_data_file_is_named(tmp_path, name, content):
    """As with --train_prefix: the file named, not an EOFError or BadGzipFile traceback."""
    (tmp_path / name).write_bytes(content)
    args = TranslationDataArguments(source_lang="de", target_lang="en", train_file=str(tmp_path / name),
                                    cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError, match=f"^{tmp_path / name} is not a complete gzip file .*`gzip -t {tmp_path / name}`"):
        load_translation_datasets(args)


def test_builtin_number_words_through_arguments():
    args = TranslationDataArguments(
        source_lang="de", target_lang="en", builtin_dataset="number_words", number_words_train_size=20,
        number_words_eval_size=5,
    )
    datasets = load_translation_datasets(args)
    assert {split: len(dataset) for split, dataset in datasets.items()} == {"train": 20, "validation": 5, "test": 5}
    args.source_lang, args.target_lang = "en", "de"
    with pytest.raises(ValueError, match="--source_lang de"):
        load_translation_datasets(args)


def test_num2words_gives_the_documented_words():
    assert num2words(342, lang="de") == "dreihundertzweiundvierzig"
    assert num2words(342, lang="en") == "three hundred and forty-two"


UNITS = {num2words(n, lang="en"): n for n in range(100)}


def english_number(words: str) -> int:
    """The number that num2words' English words name ("twenty-four thousand, seven hundred and thirty" -> 24730)."""
    total = current = 0
    for word in words.replace(",", "").split():
        if word in UNITS:
            current += UNITS[word]
        elif word == "hundred":
            current *= 100
        elif word in ("thousand", "million"):
            total, current = total + current * (1000 if word == "thousand" else 10**6), 0
    return total + current


def numbers_of(split) -> list[int]:
    return [english_number(pair["en"]) for pair in split["translation"]]


def test_number_words_corpus_is_deterministic_disjoint_and_correct():
    corpus = number_words_corpus(300, 60, 60, seed=3)
    assert {split: len(dataset) for split, dataset in corpus.items()} == {"train": 300, "validation": 60, "test": 60}
    assert pairs(corpus["train"]) == pairs(number_words_corpus(300, 60, 60, seed=3)["train"])
    assert pairs(corpus["train"]) != pairs(number_words_corpus(300, 60, 60, seed=4)["train"])
    numbers = {split: numbers_of(corpus[split]) for split in corpus}
    for split, dataset in corpus.items():
        for number, pair, magnitude in zip(numbers[split], dataset["translation"], dataset["magnitude"]):
            assert pair["en"] == num2words(number, lang="en")
            german = pair["de"][0].lower() + pair["de"][1:]  # every 4th source capitalized, as a sentence starts
            written = num2words(number, lang="de").replace("einstausend", "eintausend")  # num2words' mistake
            assert german in (written, written.removeprefix("ein"))
            assert magnitude == number_magnitude(number)
    train, validation, test = (set(numbers[split]) for split in ("train", "validation", "test"))
    assert not (train & validation or train & test or validation & test)
    assert pairs(number_words_corpus(100, 60, 60, seed=3)["test"]) == pairs(corpus["test"])
    with pytest.raises(ValueError, match="--number_words_eval_size"):
        number_words_corpus(100, 200_000, 10)


def test_the_number_words_are_german_where_num2words_is_not():
    """num2words writes 101,000 "einhunderteinstausend": the model learned that form alone, and translated the German
    "einhunderteintausend" (every number from X01,000 to X01,999) with the "one" left out."""
    from hf_vanilla_transformer.number_words import german_words

    assert german_words(101_000) == "einhunderteintausend"
    assert german_words(901_234) == "neunhunderteintausendzweihundertvierunddreißig"
    assert german_words(1_001) == "eintausendeins" and german_words(21_000) == "einundzwanzigtausend"
    corpus = number_words_corpus(3000, 10, 10, seed=0)["train"]
    assert not any("einstausend" in pair["de"].lower() for pair in corpus["translation"])


def test_number_words_corpus_covers_every_magnitude_alike():
    """As many training pairs of each magnitude, small and round numbers included; every magnitude evaluated."""
    corpus = number_words_corpus(6000, 300, 300)
    assert Counter(corpus["train"]["magnitude"]) == {magnitude: 1000 for magnitude in NUMBER_MAGNITUDES}
    for split in ("validation", "test"):
        counts = Counter(corpus[split]["magnitude"])
        assert set(counts) == set(NUMBER_MAGNITUDES) and min(counts.values()) >= 10, counts
    train = numbers_of(corpus["train"])
    assert len({n for n in train if n < 100}) >= 80 and max(train) <= 10**6
    german = {pair["de"].lower() for pair in corpus["train"]["translation"]}
    assert {"eine million", "zweitausend", "hundert", "tausend", "dreihundert"} <= german
    # the words that stand alone are trained on, never held out: "fünf" held out came out as "fifteen"
    words = set(range(21)) | set(range(30, 100, 10)) | {d * 10**z for d in range(1, 10) for z in range(2, 6)} | {10**6}
    assert words <= set(train)
    assert words <= set(numbers_of(number_words_corpus(300, 60, 60)["train"]))  # a small training set keeps them too
    sources = corpus["train"]["translation"]
    assert sum(pair["de"][0].isupper() for pair in sources) == len(sources) // 4  # "Zweiundvierzig", as a sentence starts
    for split in ("validation", "test"):
        assert sum(pair["de"][0].isupper() for pair in corpus[split]["translation"]) == len(corpus[split]) // 4
    assert {number_magnitude(n) for n in (7, 42, 312, 4096, 12345, 654321)} == set(NUMBER_MAGNITUDES) - {"round"}
    assert {number_magnitude(n) for n in (100, 2000, 25_000, 300_000, 10**6)} == {"round"}


def test_the_words_that_stand_alone_are_trained_on_as_often_as_any_number():
    """"eine Million" is the only pair with "Million": with a round number's share of training (6 of 10,000) the
    main job translated it as "one hundred and ninety-one"; each such word now comes as often as "zweiundvierzig"."""
    corpus = number_words_corpus(10_000, 500, 500)
    counts = Counter(numbers_of(corpus["train"]))
    words = set(range(21)) | set(range(30, 100, 10)) | {d * 10**z for d in range(1, 10) for z in range(2, 6)} | {10**6}
    assert min(counts[word] for word in words) >= max(counts.values()) >= 20
    per_magnitude = Counter(corpus["train"]["magnitude"]).values()
    assert len(per_magnitude) == len(NUMBER_MAGNITUDES) and max(per_magnitude) - min(per_magnitude) <= 1  # still alike


def test_the_builtin_vocabulary_keeps_million_whole_and_reads_no_case_or_umlauts():
    """The main job's tokenizer (its corpus, vocabulary size and normalizer): "million" is one token (at 500 it was
    seven letters the model had to copy, "one mililion"), and "ZWEI", "Zwei", "fuenf" read as "zwei" and "fünf"
    (with case kept, "ZWEI" came out "ten thousand, one hundred and eight"). The English targets decode unchanged."""
    from hf_vanilla_transformer.training import BUILTIN_RUN

    corpus = number_words_corpus(10_000, 500, 500)
    tokenizer = train_bpe_tokenizer(translation_texts(corpus["train"], "de", "en"), int(BUILTIN_RUN["vocab_size"]),
                                    normalizer=number_words_normalizer())
    assert tokenizer.tokenize("one million") == ["one", "Ġmillion"]
    assert tokenizer.tokenize("eine Million")[-1] == "Ġmillion"
    for spellings in (["zwei", "Zwei", "ZWEI"], ["fünf", "Fünf", "FÜNF", "fuenf"], ["zwölf", "zwoelf"],
                      ["dreißig", "dreissig", "DREISSIG"], ["eine Million", "EINE MILLION", "eine million"]):
        assert len({tuple(tokenizer(spelling)["input_ids"]) for spelling in spellings}) == 1, spellings
    targets = [pair["en"] for split in corpus.values() for pair in split["translation"]]
    assert [tokenizer.decode(tokenizer(target)["input_ids"], skip_special_tokens=True) for target in targets] == targets


def tokenized_numbers(caplog, **lengths):
    """A small number-words corpus, a tokenizer trained on it, and the corpus tokenized with `lengths` (warnings
    logged to `caplog`)."""
    corpus = number_words_corpus(60, 10, 10)
    tokenizer = train_bpe_tokenizer(translation_texts(corpus["train"], "de", "en"), vocab_size=300)
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        tokenized = tokenize_translation_datasets(corpus, tokenizer, source_lang="de", target_lang="en", **lengths)
    return corpus, tokenizer, tokenized


def test_tokenize_translation_datasets_makes_labels_and_counts_truncation(caplog):
    corpus, tokenizer, tokenized = tokenized_numbers(caplog, max_source_length=4, max_target_length=64)
    train = tokenized["train"]
    assert train.column_names == ["input_ids", "attention_mask", "labels"]
    assert all(len(ids) <= 4 and ids[-1] == tokenizer.eos_token_id for ids in train["input_ids"])
    first = corpus["train"][0]["translation"]
    assert tokenizer.decode(train[0]["labels"], skip_special_tokens=True) == first["en"]
    long_sources = sum(len(tokenizer(pair["de"])["input_ids"]) > 4 for pair in corpus["train"]["translation"])
    assert long_sources > 0
    assert any(f"Truncated {long_sources} of 60 train sources" in message for message in caplog.messages)
    assert not any("targets" in message for message in caplog.messages)


def test_only_training_targets_are_truncated(caplog):
    """Validation and test targets are the references translations are scored against: kept whole."""
    corpus, tokenizer, tokenized = tokenized_numbers(caplog, max_source_length=64, max_target_length=3)
    assert all(len(labels) <= 3 for labels in tokenized["train"]["labels"])
    assert any("train targets to max_target_length=3" in message for message in caplog.messages)
    for split in ("validation", "test"):
        references = [pair["en"] for pair in corpus[split]["translation"]]
        assert max(len(labels) for labels in tokenized[split]["labels"]) > 3
        assert tokenizer.batch_decode(list(tokenized[split]["labels"]), skip_special_tokens=True) == references
        assert not any(f"{split} targets" in message for message in caplog.messages)


def test_tokenizing_leaves_the_tokenizers_truncation_and_padding_as_it_found_them(tmp_path, caplog):
    """Tokenizing the training targets left their max_length set on the backend tokenizer; a run whose validation
    map came from the `datasets` cache did not reset it, so the same command saved a tokenizer.json that cut inputs
    to 256 tokens (`tokenizers.Tokenizer.from_file`) or not, by the state of the cache."""
    corpus, fresh, _ = tokenized_numbers(caplog)
    corpus["train_more"] = corpus["train"].select(range(30))
    for name, dataset in corpus.items():  # from disk, so that `datasets` caches each map
        dataset.save_to_disk(str(tmp_path / name))
    corpus = {name: load_from_disk(str(tmp_path / name)) for name in corpus}
    for train in ("train", "train_more"):  # the second run's validation map is the first run's, from the cache
        tokenizer = copy.deepcopy(fresh)
        splits = DatasetDict(train=corpus[train], validation=corpus["validation"])
        tokenize_translation_datasets(splits, tokenizer, source_lang="de", target_lang="en", max_target_length=32)
        assert tokenizer.backend_tokenizer.truncation is None and tokenizer.backend_tokenizer.padding is None
    tokenizer.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved/tokenizer.json").read_text(encoding="utf-8"))
    assert saved["truncation"] is None and saved["padding"] is None
    tokenizer.backend_tokenizer.enable_truncation(512)  # a tokenizer that comes with its own keeps it
    tokenize_translation_datasets(DatasetDict(train=corpus["train"]), tokenizer, source_lang="de", target_lang="en")
    assert tokenizer.backend_tokenizer.truncation["max_length"] == 512


def test_multi30k_prefixes_load_aligned():
    if not (MULTI30K / "train.de.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    args = TranslationDataArguments(
        source_lang="de", target_lang="en", train_prefix=str(MULTI30K / "train"),
        validation_prefix=str(MULTI30K / "val"),
    )
    datasets = load_translation_datasets(args)
    assert len(datasets["train"]) == 29000 and len(datasets["validation"]) == 1014
    first = datasets["train"][0]["translation"]
    assert first["en"].startswith("Two young") and first["de"].startswith("Zwei junge")


def test_runs_of_spaces_tabs_and_decomposed_letters_tokenize_as_the_pipeline_reads_them(caplog):
    """A double space or a tab inside a line (Multi30k's train.de has 44 such lines) tokenized into other byte-level
    tokens than the one space the translation pipeline leaves: the training script's evaluation translated such a
    line otherwise than translate.py, and scored otherwise."""
    corpus, tokenizer, _ = tokenized_numbers(caplog)
    spaced = corpus["validation"].map(lambda row: {"translation": {  # NFD too: "ü" as "u" + combining diaeresis
        side: "  " + unicodedata.normalize("NFD", text).replace(" ", " \t  ") + " "
        for side, text in row["translation"].items()}})
    assert spaced[0]["translation"] != corpus["validation"][0]["translation"]
    plain = tokenize_translation_datasets(DatasetDict(validation=corpus["validation"]), tokenizer, source_lang="de",
                                          target_lang="en")["validation"]
    spaced = tokenize_translation_datasets(DatasetDict(validation=spaced), tokenizer, source_lang="de",
                                           target_lang="en")["validation"]
    assert spaced["input_ids"] == plain["input_ids"] and spaced["labels"] == plain["labels"]


def long_and_short_prefixes(tmp_path: Path) -> dict[str, str]:
    """Plain text train/val/test prefixes whose line 2 is over 20 characters long on the German side."""
    german = ["kurz", "ein sehr langer deutscher Satz", "auch kurz"]
    english = ["short", "a long sentence", "short too"]
    for split in ("train", "val", "test"):
        write_lines(tmp_path / f"{split}.de", german)
        write_lines(tmp_path / f"{split}.en", english)
    return {f"{split}_prefix": str(tmp_path / name) for split, name in
            (("train", "train"), ("validation", "val"), ("test", "test"))}


def test_max_length_chars_leaves_out_training_pairs_only(tmp_path, caplog):
    """It left out validation and test lines too: generated_predictions.txt went out of line with the test file
    from the first long line on, and the scores silently left out the longest sentences."""
    args = TranslationDataArguments(source_lang="de", target_lang="en", max_length_chars=20,
                                    **long_and_short_prefixes(tmp_path))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        datasets = load_translation_datasets(args, keep_blank_evaluation_pairs=True)
    assert pairs(datasets["train"]) == [("kurz", "short"), ("auch kurz", "short too")]
    for split in ("validation", "test"):
        assert len(datasets[split]) == 3 and pairs(datasets[split])[1][0] == "ein sehr langer deutscher Satz"
    assert [message for message in caplog.messages if "over-long" in message] == [
        f"Skipped 1 over-long line pair in {tmp_path / 'train.de'} / {tmp_path / 'train.en'} (line 2); the other "
        "side of each was skipped with it, so the pairs stay aligned."]
    with pytest.raises(ValueError, match="keep_blank keeps every line in place"):
        load_parallel_text(tmp_path / "val.de", tmp_path / "val.en", source_lang="de", target_lang="en",
                           max_length_chars=20, keep_blank=True)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_max_length_chars_applies_to_training_data_files_too(tmp_path, caplog, suffix):
    """--train_file (and --dataset_name) ignored it without a word."""
    rows = [{"de": "kurz", "en": "short"}, {"de": "ein sehr langer deutscher Satz", "en": "a long one"}]
    for split in ("train", "val"):
        if suffix == ".csv":
            write_lines(tmp_path / f"{split}.csv", ["de,en"] + [f"{row['de']},{row['en']}" for row in rows])
        else:
            write_jsonl(tmp_path / f"{split}.jsonl", rows)
    args = TranslationDataArguments(source_lang="de", target_lang="en", max_length_chars=20,
                                    train_file=str(tmp_path / f"train{suffix}"),
                                    validation_file=str(tmp_path / f"val{suffix}"))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        datasets = load_translation_datasets(args, keep_blank_evaluation_pairs=True)
    assert pairs(datasets["train"]) == [("kurz", "short")] and len(datasets["validation"]) == 2
    assert "Left out 1 of 2 training pairs with a side longer than --max_length_chars 20 characters." in caplog.messages


@pytest.mark.parametrize("source", ["prefix", "file"])
def test_max_length_chars_that_leaves_no_training_pair_says_to_raise_it(tmp_path, source):
    """The message blamed the files ("--train_prefix must name files with one sentence a line"), not the flag."""
    write_lines(tmp_path / "train.de", ["ein Satz", "noch ein Satz"])
    write_lines(tmp_path / "train.en", ["a sentence", "one more sentence"])
    write_jsonl(tmp_path / "train.jsonl", [{"de": "ein Satz", "en": "a sentence"}])
    data = {"train_prefix": str(tmp_path / "train")} if source == "prefix" else {
        "train_file": str(tmp_path / "train.jsonl")}
    args = TranslationDataArguments(source_lang="de", target_lang="en", max_length_chars=3, **data)
    with pytest.raises(InputError, match=r"Each of the \d training pairs with text has a side longer than "
                                         r"--max_length_chars 3 characters, so none is left to train on: raise "
                                         "--max_length_chars, or leave it out."):
        load_translation_datasets(args)


@pytest.mark.parametrize("encoding, iconv", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16LE"),
                                             ("utf-16-be", "UTF-16BE")])
def test_a_utf16_file_is_named_as_such_with_the_command_that_converts_it(tmp_path, encoding, iconv):
    """Windows Notepad's "Unicode" was "not a text file (line 1 holds NUL bytes)"; without a byte-order mark it
    was read as UTF-8 text with NUL between the letters, and trained on."""
    source = write_lines(tmp_path / "u.de", GERMAN, encoding=encoding, newline="\r\n")
    target = write_lines(tmp_path / "u.en", ENGLISH)
    with pytest.raises(InputError) as error:
        load_parallel_text(source, target, source_lang="de", target_lang="en")
    assert str(error.value).startswith(f"{source} is UTF-16 text")
    # the paths as given: the command runs as pasted, from the folder the file was named in (it said `u.de`)
    assert f"`iconv -f {iconv} -t UTF-8 {source} > {source}.utf8 && mv {source}.utf8 {source}`" in str(error.value)


def test_a_count_of_one_is_said_in_the_singular(tmp_path, caplog):
    source = write_lines(tmp_path / "s.de", ["eins", "", "drei"])
    target = write_lines(tmp_path / "s.en", ["one", "two", "three"])
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        load_parallel_text(source, target, source_lang="de", target_lang="en")
        load_parallel_text(source, target, source_lang="de", target_lang="en", keep_blank=True)
    assert caplog.messages == [
        f"Skipped 1 empty line in {source} (line 2); the other side of each was skipped with it, so the pairs stay "
        "aligned.",
        f"1 empty line in {source} (line 2): that pair is kept in place, so that translations line up with the "
        "lines, but neither translated nor scored.",
    ]


def test_a_source_of_invisible_characters_alone_is_counted_as_an_empty_line(tmp_path, caplog):
    """A line holding only a zero-width space and a soft hyphen is read as nothing (the pipeline removes them), so it
    was left untranslated like an empty line, but the warning named the empty line alone."""
    source = write_lines(tmp_path / "s.de", ["eins", "\u200b\u00ad", "", "vier"])
    target = write_lines(tmp_path / "s.en", ["one", "two", "three", "four"])
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        dataset, report = load_parallel_text(source, target, source_lang="de", target_lang="en", keep_blank=True)
    assert report.empty_source_lines == [2, 3] and f"2 empty lines in {source} (lines 2, 3)" in caplog.text
    assert [pair["de"] for pair in dataset["translation"]] == ["eins", "", "", "vier"]


def test_targets_keep_the_corpus_unicode_form_and_sources_are_nfc(caplog):
    """Targets were NFC-normalized for training, references scored as the data holds them: a corpus not in NFC
    (Hindi's precomposed nukta letters, which NFC changes; any NFD text) scored a perfect model down (BLEU 79)."""
    hindi = "\u095c\u095d\u095e \u0921\u093c"  # three precomposed nukta letters (composition exclusions), one not
    german = unicodedata.normalize("NFD", "Größe über")
    assert unicodedata.normalize("NFC", hindi) != hindi
    data = DatasetDict(validation=Dataset.from_dict({"translation": [
        {"en": "  a \t b ", "hi": hindi + "  x"}, {"en": german, "hi": german}]}))
    tokenizer = train_bpe_tokenizer([hindi, german, "a b"], vocab_size=300, min_frequency=1)
    tokenized = tokenize_translation_datasets(data, tokenizer, source_lang="en", target_lang="hi")["validation"]
    labels = tokenizer.batch_decode(list(tokenized["labels"]), skip_special_tokens=True)
    assert labels == [hindi + " x", german]  # whitespace normalized, the Unicode form kept
    sources = tokenizer.batch_decode(list(tokenized["input_ids"]), skip_special_tokens=True)
    assert sources == ["a b", unicodedata.normalize("NFC", german)]


def test_invisible_characters_are_removed_from_sources_but_not_joiners(caplog):
    """A byte-order mark at a line's start (files joined with cat), a zero-width space, a soft hyphen or a word
    joiner were tokens of their own: "zwei\\u200b" translated as a five-digit number."""
    invisible = "\ufeffzwei\u200b drei\u00adundvier\u2060zig"
    joined = "\U0001f468\u200d\U0001f469 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # emoji ZWJ, Persian ZWNJ
    data = DatasetDict(train=Dataset.from_dict({"translation": [{"de": invisible, "en": "x"},
                                                                 {"de": joined, "en": "y"}]}))
    tokenizer = train_bpe_tokenizer([invisible, joined], vocab_size=300, min_frequency=1)
    tokenized = tokenize_translation_datasets(data, tokenizer, source_lang="de", target_lang="en")["train"]
    sources = tokenizer.batch_decode(list(tokenized["input_ids"]), skip_special_tokens=True)
    assert sources == ["zwei dreiundvierzig", joined]
    blank = Dataset.from_dict({"translation": [{"de": "\ufeff\u200b", "en": "x"}, {"de": "\u200d", "en": "y"}]})
    assert rows_with_text(blank, "de", "en") == [1]  # neither translated nor scored, as the pipeline leaves it blank


def word_level_tokenizer(words: list[str]):
    """An English word-level tokenizer (as a `tokenizers` user builds one) that reads any other word as <unk>."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<pad>", "<s>", "</s>", "<unk>", *words])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", add_eos_token=True)


def test_a_tokenizer_that_reads_the_training_text_as_unknown_is_warned_about(caplog):
    """An English word-level tokenizer on Chinese targets trained, without a word, into a model of empty output."""
    tokenizer = word_level_tokenizer(["a", "cat", "sleeps", "dog", "runs"])
    data = DatasetDict(train=Dataset.from_dict({"translation": [
        {"en": "a cat sleeps", "zh": "猫在睡觉"}, {"en": "a dog runs", "zh": "狗在跑"}] * 50}),
        validation=Dataset.from_dict({"translation": [{"en": "a cat", "zh": "猫"}]}))
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.data"):
        tokenize_translation_datasets(data, tokenizer, source_lang="en", target_lang="zh")
    assert caplog.messages == [
        "50.0% of the training target tokens (zh) are the tokenizer's unknown token: it does not cover this zh text, "
        "which the model cannot learn to read or write. Train a tokenizer on this data: leave out --tokenizer_name "
        "(a model given with --model_name_or_path keeps its own)."]
