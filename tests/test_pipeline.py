"""The translation pipeline: registered under a task name transformers v5 accepts, saved with the model as custom code,
batched beam search with the same results as `generate()`, and loadable without the package (trust_remote_code)."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
from transformers.pipelines import PIPELINE_REGISTRY, check_task, get_supported_tasks

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer.pipeline_translation import (
    SAVED_TASK,
    TASK,
    TranslationPipeline,
    save_translation_pipeline,
    translate_sentences,
)
from tiny_translation_model import SOURCES, make_tiny_model_dir

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = make_tiny_model_dir(tmp_path_factory.mktemp("tiny") / "model")
    save_translation_pipeline(path)
    return path


@pytest.fixture(scope="module")
def translator(model_dir):
    return pipeline(TASK, model=str(model_dir))


@pytest.fixture(scope="module")
def reference(model_dir):
    """Each source translated on its own by generate() with the model's generation config (4 beams)."""
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert model.generation_config.num_beams == 4
    outputs = []
    for source in SOURCES:
        with torch.no_grad():
            ids = model.generate(**tokenizer(source, return_tensors="pt"))
        outputs.append(tokenizer.decode(ids[0], skip_special_tokens=True).strip())
    assert len(set(outputs)) > 1, "the tiny model translates every source alike: a weak reference"
    return outputs


def test_v5_removed_translation_and_accepts_ours():
    with pytest.raises(KeyError, match="removed"):
        check_task("translation")
    assert TASK in get_supported_tasks()
    assert PIPELINE_REGISTRY.supported_tasks[TASK]["impl"] is TranslationPipeline
    assert check_task(TASK)[1]["pt"] == (AutoModelForSeq2SeqLM,)


def test_registered_pipeline_matches_generate(translator, reference):
    assert type(translator) is TranslationPipeline
    assert translator(SOURCES) == [{"translation_text": text} for text in reference]


def test_a_loaded_model_and_tokenizer_go_in_as_objects(model_dir, reference):
    """The README's way for objects in hand (transformers finds a model's own pipeline only through a name)."""
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)
    translator = pipeline(TASK, model=model, tokenizer=tokenizer)
    assert type(translator) is TranslationPipeline
    assert translator(SOURCES) == [{"translation_text": text} for text in reference]


def test_batches_give_the_same_translations(translator, reference):
    for batch_size in (2, len(SOURCES)):
        assert [r["translation_text"] for r in translator(SOURCES, batch_size=batch_size)] == reference


def test_beam_search_by_default(translator):
    params = translator._get_set_generation_params(translator._prepare_generate_kwargs({}))
    assert params["num_beams"] == 4 and params["length_penalty"] == 0.6
    greedy = translator(SOURCES, num_beams=1)
    assert len(greedy) == len(SOURCES)  # generate arguments pass through the call


def test_output_formats(translator, reference):
    assert translator(SOURCES[0]) == [{"translation_text": reference[0]}]
    assert translator([]) == []
    two = translator(SOURCES[:2], num_return_sequences=2, batch_size=2)
    assert [len(records) for records in two] == [2, 2] and two[0][0] == {"translation_text": reference[0]}
    ids = translator(SOURCES[0], return_tensors=True)[0]["translation_token_ids"]
    assert translator.tokenizer.decode(ids, skip_special_tokens=True) == reference[0]
    with pytest.raises(TypeError, match="translates strings"):
        translator([1, 2])
    column = datasets.Dataset.from_dict({"de": SOURCES[:2]})["de"]  # datasets 4's Column, as `ds["de"]` gives
    assert translator(column) == translator(SOURCES[:2])


def test_a_hypothesis_that_begins_with_a_space_token_has_no_leading_space(translator):
    ids = translator.tokenizer(" Hund läuft", add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    assert translator.tokenizer.decode(ids).startswith(" ")  # a space-prefixed first token, as beams can end up with
    (record,) = translator.postprocess({"output_ids": ids[None, None], "blank": [False]})
    assert record == {"translation_text": "Hund läuft"}


def test_whitespace_and_typed_special_tokens_are_text(translator, reference):
    """Spaces around a sentence, tabs and runs of spaces made other translations than the sentence typed plainly
    (byte-level BPE has a token for each); "</s>" or "<pad>" typed in a sentence became the end or pad id."""
    messy = "  " + SOURCES[0].replace(" ", " \t  ") + "\t "
    assert translator([messy, SOURCES[0]]) == [{"translation_text": reference[0]}] * 2
    model_inputs = translator.preprocess(f"{SOURCES[0]} </s> <pad>")
    ids = model_inputs["input_ids"][0].tolist()
    assert ids.count(translator.tokenizer.eos_token_id) == 1 and ids[-1] == translator.tokenizer.eos_token_id
    assert translator.tokenizer.pad_token_id not in ids
    (record,) = translator.postprocess({"output_ids": translator.tokenizer(
        "Ein  Hund \u00a0 läuft", add_special_tokens=False, return_tensors="pt")["input_ids"][None], "blank": [False]})
    assert record == {"translation_text": "Ein Hund läuft"}


def test_a_new_tokenizer_reads_typed_special_tokens_as_text(tmp_path):
    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["a man runs here", "ein Mann läuft hier"] * 5, 300, min_frequency=1)
    tokenizer.save_pretrained(tmp_path)
    for loaded in (tokenizer, AutoTokenizer.from_pretrained(tmp_path)):
        ids = loaded("a man </s> runs <pad>")["input_ids"]
        assert ids.count(loaded.eos_token_id) == 1 and loaded.pad_token_id not in ids
        assert loaded.decode(ids, skip_special_tokens=True) == "a man </s> runs <pad>"


def test_decomposed_umlauts_translate_as_composed_ones(translator, reference):
    """NFD text ("a" + combining diaeresis, as some macOS tools write) was other byte-level tokens, and another
    translation (the Multi30k model: "Ein Café im Café amüsiert sich ..." for "A café near the Brücke.")."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", SOURCES[0])
    assert decomposed != SOURCES[0] and "ä" in SOURCES[0]
    assert translator(decomposed) == [{"translation_text": reference[0]}]
    assert torch.equal(translator.preprocess(decomposed)["input_ids"], translator.preprocess(SOURCES[0])["input_ids"])


def test_language_tags_added_as_special_tokens_are_matched_where_the_tokenizer_reads_them(translator, tmp_path):
    """A tokenizer saved before this package set `split_special_tokens` reads "</s>" in text as text in the
    pipeline and in the training data alike; one that has special tokens of its own (a "<2de>" tag, as Marian and
    mBART users add them) and reads them matches them, where the pipeline forced them apart into characters."""
    from hf_vanilla_transformer.data import tokenize_translation_datasets

    old = copy.deepcopy(translator.tokenizer)
    old.split_special_tokens = False  # as saved before this package set it
    data = datasets.DatasetDict(
        validation=datasets.Dataset.from_list([{"translation": {"de": "ein </s> Hund", "en": "a dog"}}]))
    pipeline_ids = TranslationPipeline(model=translator.model, tokenizer=old).preprocess("ein </s> Hund")["input_ids"]
    data_ids = tokenize_translation_datasets(data, old, source_lang="de", target_lang="en")["validation"][0]
    assert pipeline_ids[0].tolist() == data_ids["input_ids"] and data_ids["input_ids"].count(old.eos_token_id) == 1

    tagged = copy.deepcopy(translator.tokenizer)
    tagged.add_special_tokens({"additional_special_tokens": ["<2de>"]})
    tagged.split_special_tokens = False  # how a tokenizer reads its tags
    tag = tagged.convert_tokens_to_ids("<2de>")
    pipeline_ids = TranslationPipeline(model=translator.model, tokenizer=tagged).preprocess("<2de> ein Hund")
    assert pipeline_ids["input_ids"][0].tolist()[0] == tag


def test_blank_strings_translate_to_blank(translator, reference):
    assert translator("") == [{"translation_text": ""}]
    for batch_size in (1, 2):
        got = translator(["", SOURCES[0], " \t ", SOURCES[1]], batch_size=batch_size)
        assert got == [{"translation_text": text} for text in ("", reference[0], "", reference[1])]
    (records,) = translator(["  "], num_return_sequences=2)
    assert records == [{"translation_text": ""}] * 2
    assert translator("", return_tensors=True)[0]["translation_token_ids"].numel() == 0


def test_translate_sentences_keeps_order_and_blank_lines(translator, reference):
    lines = [SOURCES[1], "", SOURCES[0], "   ", SOURCES[3], SOURCES[2]]
    expected = [reference[1], "", reference[0], "", reference[3], reference[2]]
    assert translate_sentences(translator, lines, batch_size=3) == [" ".join(t.split()) for t in expected]
    assert translate_sentences(translator, ["", " \t "]) == ["", ""]  # the tokenizer failed on no sentences
    assert translate_sentences(translator, []) == []


def test_the_progress_bar_advances_a_batch_at_a_time(translator, monkeypatch):
    """A batch's translations come out of the pipeline together, once the whole batch is translated: advanced one by
    one, a bar of 200 sentences read 1/200 after the first batch of 32, with an ETA 32 times too long."""
    generate = translator.model.generate
    batches = []

    def counting(*args, **kwargs):
        batches.append(len(kwargs["input_ids"]))
        return generate(*args, **kwargs)

    class Bar:
        updates = []

        def update(self, n=1):
            self.updates.append((n, len(batches)))  # how many sentences, after how many batches

    monkeypatch.setattr(translator.model, "generate", counting)
    translate_sentences(translator, [*SOURCES, "", SOURCES[0]], batch_size=2, progress=Bar())
    assert batches == [2, 2, 1] and Bar.updates == [(2, 1), (2, 2), (1, 3)]  # the blank line is no sentence to count


def test_every_save_pretrained_ships_the_pipeline(tmp_path):
    """A model saved by its own save_pretrained (not only by the training script) carries the pipeline's code and
    names it in config.json; other custom pipelines there are kept."""
    model = AutoModelForSeq2SeqLM.from_pretrained(make_tiny_model_dir(tmp_path / "plain"))
    model.config.custom_pipelines = {"other-task": {"impl": "other.OtherPipeline", "pt": [], "type": "text"}}
    model.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert set(config["custom_pipelines"]) == {"other-task", SAVED_TASK}
    assert (tmp_path / "saved" / "pipeline_translation.py").read_text() == Path(
        hf_vanilla_transformer.pipeline_translation.__file__).read_text()


def test_saved_as_custom_pipeline(model_dir, tmp_path):
    config = json.loads((model_dir / "config.json").read_text())
    assert config["custom_pipelines"] == {
        SAVED_TASK: {
            "impl": "pipeline_translation.TranslationPipeline", "pt": ["AutoModelForSeq2SeqLM"], "type": "text"
        }
    }
    assert (model_dir / "pipeline_translation.py").read_text() == Path(
        hf_vanilla_transformer.pipeline_translation.__file__).read_text()
    before = (model_dir / "config.json").read_text()
    save_translation_pipeline(model_dir)  # idempotent
    assert (model_dir / "config.json").read_text() == before
    with pytest.raises(FileNotFoundError, match="config.json"):
        save_translation_pipeline(tmp_path)


def test_pipeline_save_pretrained_records_the_custom_pipeline(translator, tmp_path):
    translator.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert list(config["custom_pipelines"]) == [SAVED_TASK]
    assert (tmp_path / "pipeline_translation.py").is_file() and (tmp_path / "tokenizer.json").is_file()


def test_custom_task_needs_trust_remote_code_with_the_package(model_dir, reference):
    """transformers checks `custom_pipelines` before its registry and asks for trust_remote_code there; with the
    package, the registered name works without it, and trust_remote_code=True works too."""
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline(model=str(model_dir))
    remote = pipeline(model=str(model_dir), trust_remote_code=True)
    assert type(remote).__module__.startswith("transformers_modules")
    assert [r["translation_text"] for r in remote(SOURCES, batch_size=2)] == reference


def test_pipeline_without_the_package(model_dir, reference, tmp_path):
    code = f"""
import json, sys
sys.modules["hf_vanilla_transformer"] = None  # import hf_vanilla_transformer now raises ImportError
try:
    import hf_vanilla_transformer
except ImportError:
    pass
else:
    raise AssertionError("the package is importable")
from transformers import pipeline
translator = pipeline(model={str(model_dir)!r}, trust_remote_code=True)
assert type(translator).__module__.startswith("transformers_modules"), type(translator)
assert type(translator.model).__module__.startswith("transformers_modules"), type(translator.model)
by_name = pipeline({SAVED_TASK!r}, model={str(model_dir)!r}, trust_remote_code=True)
translator.model.save_pretrained("again")  # saved by the remote code: the pipeline goes with it again
translator.tokenizer.save_pretrained("again")
again = pipeline(model="again", trust_remote_code=True)
print(json.dumps([translator({SOURCES!r}, batch_size=2), by_name({SOURCES!r}[:1]), again({SOURCES!r}[:1])]))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    batched, single, again = json.loads(proc.stdout.strip().splitlines()[-1])
    assert batched == [{"translation_text": text} for text in reference]
    assert single == again == [{"translation_text": reference[0]}]


def test_invisible_characters_in_a_source_are_not_read(translator, reference):
    """A byte-order mark at a line's start (`cat a.txt b.txt` of Windows files), a zero-width space, a soft hyphen or
    a word joiner were tokens of their own: the number-words model translated "zwei\\u200b" as a five-digit number."""
    invisible = "\ufeff" + SOURCES[0].replace(" ", "\u200b ", 1).replace("ä", "\u00ad\u2060ä")
    assert invisible != SOURCES[0]
    assert torch.equal(translator.preprocess(invisible)["input_ids"], translator.preprocess(SOURCES[0])["input_ids"])
    assert translator(invisible) == [{"translation_text": reference[0]}]
    assert translator("\u200b\ufeff") == [{"translation_text": ""}]  # nothing to translate


def test_sources_and_translations_are_normalized_as_the_training_data_is():
    """Sources: NFC, invisible characters removed, whitespace; translations and training targets: whitespace only,
    so that a model writes the Unicode form of its corpus (Hindi's precomposed nukta letters, which NFC changes)."""
    from hf_vanilla_transformer.pipeline_translation import normalize_text, normalize_whitespace

    hindi = "\u095c\u095d\u095e"
    assert normalize_whitespace(f" \t{hindi}  \u0921\u093c\n") == f"{hindi} \u0921\u093c"
    assert normalize_whitespace("\ufeffZwei Hunde \ufeff spielen.") == "Zwei Hunde spielen."  # files joined by cat
    assert normalize_text(f" \ufeff{hindi}\u200b ") == "\u0921\u093c\u0922\u093c\u092b\u093c"  # NFC decomposes them
    joined = "\U0001f468\u200d\U0001f469 \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # emoji ZWJ, Persian ZWNJ
    assert normalize_text(joined) == joined
    # a soft hyphen or zero-width space between a letter and its combining mark: it kept them apart in NFC
    assert normalize_text("Mu\u00ad\u0308ller Cafe\u200b\u0301") == "M\u00fcller Caf\u00e9"


def test_v4_translation_arguments_are_taken(translator, reference):
    """return_text and src_lang/tgt_lang (v4's TranslationPipeline took them) failed deep in generate(): "model_kwargs
    are not used by the model"."""
    assert translator(SOURCES[0], return_text=True) == translator(SOURCES[0])  # v4 ignored it: return_tensors chooses
    assert translator(SOURCES[0], return_text=False) == translator(SOURCES[0])
    with pytest.warns(UserWarning, match="translates the one direction it was trained in"):
        translated = translator(SOURCES[0], src_lang="de", tgt_lang="en")
    assert translated == translator(SOURCES[0])


def test_truncation_cuts_at_the_models_positions_where_the_tokenizer_sets_no_limit(translator):
    """The tokenizers this package trains have no model_max_length (1e30), so truncation=True cut nothing."""
    long_text = " ".join(["Hund"] * 3000)
    limit = translator.model.config.max_position_embeddings
    assert translator.preprocess(long_text)["input_ids"].shape[1] > limit
    assert translator.preprocess(long_text, truncation=True)["input_ids"].shape[1] == limit
    shorter = copy.copy(translator)  # a model of fewer positions than its tokenizer's limit (a Marian model's table)
    shorter.model = copy.copy(translator.model)
    shorter.model.config = copy.deepcopy(translator.model.config)
    shorter.model.config.max_position_embeddings = 7
    shorter.tokenizer = copy.deepcopy(translator.tokenizer)
    shorter.tokenizer.model_max_length = 50
    assert shorter.preprocess(long_text, truncation=True)["input_ids"].shape[1] == 7
