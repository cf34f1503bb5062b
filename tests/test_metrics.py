"""Tests for hf_vanilla_transformer.metrics: sacrebleu BLEU/chrF, Seq2SeqTrainer compute_metrics, offline evaluate."""

import logging
import socket
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from num2words import num2words
from transformers import EvalPrediction

from hf_vanilla_transformer.metrics import (
    BLEU_CHRF_METRIC_PATH,
    bleu_tokenizer,
    compute_translation_metrics,
    exact_match_by_group,
    make_compute_metrics,
    reference_texts,
    sacrebleu_signatures,
)
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

REPO = Path(__file__).resolve().parents[1]
HYPOTHESES = ["the cat sat on the mat", "a dog runs in the park", "two birds sing"]
REFERENCES = ["the cat sat on the mat", "a dog is running in the park", "two small birds are singing"]


def test_compute_translation_metrics_matches_sacrebleu():
    metrics = compute_translation_metrics(HYPOTHESES, REFERENCES)
    assert metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert metrics["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert 0 < metrics["bleu"] < 100 and 0 < metrics["chrf"] < 100
    assert compute_translation_metrics(REFERENCES, REFERENCES) == pytest.approx({"bleu": 100.0, "chrf": 100.0})


def test_sacrebleu_signatures_name_the_settings_of_the_scores():
    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()  # sacrebleu's defaults, as compute_translation_metrics uses
    bleu.corpus_score(HYPOTHESES, [REFERENCES, HYPOTHESES])
    chrf.corpus_score(HYPOTHESES, [REFERENCES, HYPOTHESES])
    assert sacrebleu_signatures(2) == {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}
    expected = f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    assert sacrebleu_signatures()["bleu"] == expected


CHINESE = ["我们在公园里散步。", "一只猫坐在垫子上。", "两只小鸟在唱歌。"]


def test_bleu_tokenizes_as_sacrebleu_does_for_the_target_language(caplog):
    """13a splits at spaces and punctuation: a Chinese sentence is one token, and a perfect translation scored 0."""
    assert compute_translation_metrics(CHINESE, CHINESE)["bleu"] == pytest.approx(0.0)
    for language in ("zh", "zh-CN", "zh_Hant", "ZH", "zho", "cmn", "cmn_Hans", "yue", "chinese", "Chinese", "cn"):
        assert bleu_tokenizer(language) == "zh"  # names too: a CSV's column `chinese` (13a scored BLEU 0 before)
    for language in ("de", "en", "ru", "ar", None):
        assert bleu_tokenizer(language) == "13a"
    assert bleu_tokenizer("de", "intl") == "intl"
    chinese = compute_translation_metrics(CHINESE, CHINESE, bleu_tokenize=bleu_tokenizer("zh"))
    assert chinese == pytest.approx({"bleu": 100.0, "chrf": 100.0})
    close = ["我们在公园里走路。", *CHINESE[1:]]
    assert compute_translation_metrics(close, CHINESE, bleu_tokenize="zh")["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(close, [CHINESE], tokenize="zh").score)
    assert "tok:zh" in sacrebleu_signatures(bleu_tokenize="zh")["bleu"]
    try:
        import MeCab  # noqa: F401
    except ImportError:  # sacrebleu's Japanese tokenizer needs it: characters instead, with a warning
        assert bleu_tokenizer("ja") == "char" and "sacrebleu[ja]" in caplog.text
    else:
        assert bleu_tokenizer("ja") == "ja-mecab"
    try:
        import mecab_ko  # noqa: F401
    except ImportError:  # Korean is written with spaces: 13a, not characters, which scored far above 13a or MeCab
        assert bleu_tokenizer("ko") == "13a" and "Scoring with 13a" in caplog.text
    else:
        assert bleu_tokenizer("ko") == "ko-mecab"
    with pytest.raises(ValueError, match="no BLEU tokenizer 'spaces'.*13a"):
        bleu_tokenizer("de", "spaces")
    # Thai is written without spaces too, and sacrebleu's -l leaves it to 13a: a perfect translation scored 0
    thai = ["สี่หมื่นสองพันสามร้อยสิบสอง", "เก้าหมื่นสี่พันแปดร้อยยี่สิบห้า"]
    assert compute_translation_metrics(thai, thai)["bleu"] == pytest.approx(0.0)
    assert bleu_tokenizer("th") == bleu_tokenizer("th_TH") == "char" and bleu_tokenizer("th", "13a") == "13a"
    for code in ("tha", "thai", "lo", "lao", "lao_Laoo", "khm", "mya", "bur", "bod", "dzo_Tibt"):  # the others
        assert bleu_tokenizer(code) == "char", code
    assert "Thai is written without spaces between words" in caplog.text
    assert compute_translation_metrics(thai, thai, bleu_tokenize="char")["bleu"] == pytest.approx(100.0)


def test_references_written_without_spaces_scored_by_13a_are_warned_about(caplog):
    """A CSV column `mandarin_text` as --target_lang gave 13a, and BLEU 0 for every run, without a word."""
    from hf_vanilla_transformer.metrics import warn_if_written_without_spaces

    numbers = [num2words(n) for n in range(1, 400, 7)]  # "seventeen", "forty-three": words alone are no sentences
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.metrics"):
        for references in (REFERENCES, numbers, ["Donaudampfschifffahrt", "ein Haus"]):
            warn_if_written_without_spaces(references, "13a", "The validation references")
        warn_if_written_without_spaces(CHINESE, "zh", "The validation references")
        assert caplog.text == ""
        warn_if_written_without_spaces(CHINESE + ["", "ok"], "13a", "The validation references (--target_lang text)")
    assert caplog.messages == [
        f"The validation references (--target_lang text): 3 of 4 are written without spaces (e.g. {CHINESE[0]!r}), and "
        "BLEU tokenizes with 13a, which splits text at spaces and punctuation: a translation would be scored as one "
        "word, BLEU 0 unless it is perfect. Give --bleu_tokenize zh for Chinese, ja-mecab for Japanese, char for "
        "others."]


def test_the_bleu_tokenizer_chosen_is_a_name_bleu_takes(monkeypatch):
    """With MeCab installed, sacrebleu's Japanese tokenizer signs as "ja-mecab-0.996-IPA": that was returned, and
    the first evaluation failed on it (KeyError), after the whole training. A stand-in MeCab here."""
    import types

    class Tagger:
        def __init__(self, *args, **kwargs):
            pass

        def version(self):
            return "0.996"

        def dictionary_info(self):
            return types.SimpleNamespace(size=392126, next=None)

        def parse(self, text):
            return " ".join(text)

    from sacrebleu.tokenizers import tokenizer_ja_mecab

    monkeypatch.setattr(tokenizer_ja_mecab, "MeCab", types.SimpleNamespace(Tagger=Tagger), raising=False)
    monkeypatch.setattr(tokenizer_ja_mecab, "ipadic", types.SimpleNamespace(MECAB_ARGS=""), raising=False)
    for chosen in (bleu_tokenizer("ja"), bleu_tokenizer("de", "ja-mecab")):
        assert chosen == "ja-mecab"
        assert compute_translation_metrics(["猫が好き"], ["猫が好き"], bleu_tokenize=chosen)["chrf"] == 100


def test_multiple_references_per_prediction():
    references = [[reference, hypothesis] for reference, hypothesis in zip(REFERENCES, HYPOTHESES)]
    assert compute_translation_metrics(HYPOTHESES, references)["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="same number of references"):
        compute_translation_metrics(HYPOTHESES[:2], [["a"], ["b", "c"]])


@pytest.mark.parametrize("predictions, references, error, message", [
    (["a dog"], [[]], ValueError, r"references\[0\] is an empty list: give each prediction at least one reference"),
    (["a dog"], [[None]], TypeError, r"references\[0\]\[0\] is None, not a string"),
    (["a dog"], [123], TypeError, r"references\[0\] is int 123, not a string or a list of strings"),
    (["a dog"], [b"a dog"], TypeError, r"references\[0\] is bytes b'a dog', .*decode bytes first"),
    ([None], ["a dog"], TypeError, r"predictions\[0\] is None, not a string"),
])
def test_references_and_predictions_that_are_not_text_are_named(predictions, references, error, message):
    """sacrebleu's IndexError and TypeErrors from deep inside (`'NoneType' is not iterable`), or ours from
    `zip`, named neither the item nor what was wrong with it."""
    with pytest.raises(error, match=message):
        compute_translation_metrics(predictions, references)


def test_predictions_and_references_must_pair_up():
    with pytest.raises(ValueError, match="3 predictions but 2 references"):
        compute_translation_metrics(HYPOTHESES, REFERENCES[:2])
    with pytest.raises(ValueError, match="No predictions to score"):  # an empty evaluation set: not an IndexError
        compute_translation_metrics([], [])


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer(HYPOTHESES + REFERENCES, vocab_size=300, min_frequency=1)


def padded(rows: list[list[int]], value: int) -> np.ndarray:
    """Right-pad integer rows to one length."""
    width = max(map(len, rows))
    return np.array([row + [value] * (width - len(row)) for row in rows])


def test_make_compute_metrics_decodes_generated_ids_and_labels(tokenizer):
    start = [tokenizer.bos_token_id]  # generate() output begins with decoder_start_token_id
    generated = [start + ids for ids in tokenizer(HYPOTHESES)["input_ids"]]
    labels = tokenizer(text_target=REFERENCES)["input_ids"]
    generated_padded = padded(generated, tokenizer.pad_token_id)
    generated_padded = np.concatenate([generated_padded, np.full((3, 2), -100)], axis=1)  # gathered batches
    prediction = EvalPrediction(predictions=generated_padded, label_ids=padded(labels, -100))
    metrics = make_compute_metrics(tokenizer)(prediction)
    assert metrics["bleu"] == pytest.approx(compute_translation_metrics(HYPOTHESES, REFERENCES)["bleu"])
    assert metrics["chrf"] == pytest.approx(compute_translation_metrics(HYPOTHESES, REFERENCES)["chrf"])
    # the start and end tokens are not part of the translation's length
    assert metrics["gen_len"] == pytest.approx(np.mean([len(ids) - 2 for ids in generated]))
    assert all(ids[-1] == tokenizer.eos_token_id for ids in generated)


def test_exact_match_overall_and_per_group(tokenizer):
    groups = {REFERENCES[0]: "short", REFERENCES[1]: "long", REFERENCES[2]: "long"}
    assert exact_match_by_group(HYPOTHESES, REFERENCES, groups) == {
        "exact_match": pytest.approx(100 / 3), "exact_match_long": 0.0, "exact_match_short": 100.0}
    generated = [[tokenizer.bos_token_id] + ids for ids in tokenizer(HYPOTHESES)["input_ids"]]
    labels = tokenizer(text_target=REFERENCES)["input_ids"]
    prediction = EvalPrediction(predictions=padded(generated, tokenizer.pad_token_id), label_ids=padded(labels, -100))
    metrics = make_compute_metrics(tokenizer, groups)(prediction)
    assert (metrics["exact_match_short"], metrics["exact_match_long"]) == (100.0, 0.0)
    assert "exact_match" not in make_compute_metrics(tokenizer)(prediction)


def test_translations_are_scored_as_generated_predictions_txt_writes_them(tokenizer):
    """The scores read a translation with its whitespace as decoded (a doubled space, a line break inside it), the
    predictions file with it made single spaces: an exact match there was a miss in the scores."""
    from hf_vanilla_transformer.metrics import decoded_texts

    hypothesis = HYPOTHESES[0].replace(" ", "  ", 1) + "\n"
    generated = padded([[tokenizer.bos_token_id] + tokenizer(hypothesis)["input_ids"]], tokenizer.pad_token_id)
    labels = padded([tokenizer(text_target=REFERENCES[0])["input_ids"]], -100)
    assert decoded_texts(tokenizer, generated) == [" ".join(hypothesis.split())]
    metrics = make_compute_metrics(tokenizer, {REFERENCES[0]: "short"})(EvalPrediction(generated, labels))
    assert HYPOTHESES[0] == REFERENCES[0] and metrics["exact_match"] == 100.0 and metrics["bleu"] == pytest.approx(100)


def test_references_are_scored_as_the_data_holds_them_not_as_the_tokenizer_decodes_them():
    """A tokenizer that lowercases (or maps characters to its unknown token) changes the decoded labels: scored
    against them, a lowercased translation got 100 where sacrebleu on the files gives less."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<s>", "</s>", "<unk>"] + sorted({w for text in REFERENCES for w in text.lower().split()})
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.normalizer, backend.pre_tokenizer = normalizers.Lowercase(), pre_tokenizers.WhitespaceSplit()
    lowering = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>",
                                       eos_token="</s>", unk_token="<unk>")
    cased = [text.capitalize() for text in REFERENCES]  # "The cat sat on the mat", ...
    lowered = [text.lower() for text in REFERENCES]
    generated = [[lowering.bos_token_id] + lowering(text)["input_ids"] for text in lowered]
    labels = lowering(text_target=cased)["input_ids"]
    prediction = EvalPrediction(predictions=padded(generated, 0), label_ids=padded(labels, -100))
    assert make_compute_metrics(lowering)(prediction)["bleu"] == pytest.approx(100)  # the labels decoded: lowercase
    references = reference_texts(labels, cased, lowering.pad_token_id)
    metrics = make_compute_metrics(lowering, references=references)(prediction)
    assert metrics["bleu"] == pytest.approx(sacrebleu.corpus_bleu(lowered, [cased]).score)
    assert metrics["bleu"] < 90
    assert metrics["chrf"] == pytest.approx(sacrebleu.corpus_chrf(lowered, [cased]).score)
    # texts that tokenize alike keep their order: the n-th such label gets the n-th text
    twice = reference_texts([[5, 2], [5, 2]], ["A", "a"], pad_token_id=0)
    assert twice == {(5, 2): ["A", "a"]}


def test_one_string_instead_of_a_list_is_refused():
    with pytest.raises(TypeError, match="list of strings, one per sentence"):
        compute_translation_metrics("Ein Hund läuft.", "Ein Kind läuft.")


def test_make_compute_metrics_asks_for_predict_with_generate_on_logits(tokenizer):
    logits = np.zeros((3, 5, len(tokenizer)), dtype=np.float32)
    with pytest.raises(ValueError, match="predict_with_generate=True"):
        make_compute_metrics(tokenizer)(EvalPrediction(predictions=(logits,), label_ids=np.zeros((3, 5), int)))


def refuse_network(*args, **kwargs):
    """Stand-in for socket.connect: any network access fails the test."""
    raise AssertionError("evaluate.load tried to use the network")


def test_evaluate_load_works_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import evaluate  # slow to import (pipelines); only this test needs it

    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True)
    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", tmp_path / "modules")
    # first on sys.path, before the user's modules cache, where transformers' remote code (another test, in this
    # process) put it and where an `evaluate_modules` of an earlier load of the metric, by another hash, may lie
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    for name in [name for name in sys.modules if name.split(".")[0] == "evaluate_modules"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(socket.socket, "connect", refuse_network)
    metric = evaluate.load(BLEU_CHRF_METRIC_PATH, cache_dir=str(tmp_path / "cache"))
    scores = metric.compute(predictions=HYPOTHESES, references=REFERENCES)
    expected = compute_translation_metrics(HYPOTHESES, REFERENCES)
    assert {key: scores[key] for key in ("bleu", "chrf", "score")} == pytest.approx(
        {**expected, "score": expected["bleu"]})
    # what evaluate's sacrebleu returns beside the score (code that reads them got a KeyError), and the signatures
    reference = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    for key in ("counts", "totals", "precisions", "bp", "sys_len", "ref_len"):
        assert scores[key] == pytest.approx(getattr(reference, key)), key
    assert scores["bleu_signature"] == sacrebleu_signatures()["bleu"]
    multi = metric.compute(predictions=HYPOTHESES, references=[[r, h] for r, h in zip(REFERENCES, HYPOTHESES)])
    assert multi["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="No predictions to score"):  # evaluate failed inside: IndexError
        metric.compute(predictions=[], references=[])
    with pytest.raises(TypeError, match="one string"):  # evaluate took it for a sentence a character
        metric.compute(predictions="Ein Hund läuft.", references="Ein Kind läuft.")
    metric.add_batch(predictions=HYPOTHESES, references=REFERENCES)
    assert metric.compute() == scores
    assert metric.compute(predictions=CHINESE, references=CHINESE, bleu_tokenize="zh")["bleu"] == pytest.approx(100)
    # in place of evaluate.load("sacrebleu"), as transformers' run_translation.py uses it: its key and settings
    shouted = [h.upper() for h in HYPOTHESES]
    lowercased = metric.compute(predictions=shouted, references=[[r] for r in REFERENCES], lowercase=True)
    assert lowercased["score"] == pytest.approx(scores["bleu"])
    assert lowercased["score"] == pytest.approx(sacrebleu.corpus_bleu(shouted, [REFERENCES], lowercase=True).score)
    assert metric.compute(predictions=CHINESE, references=CHINESE, tokenize="zh")["score"] == pytest.approx(100)
    effective = metric.compute(predictions=["a dog"], references=["a dog runs"], use_effective_order=True)["score"]
    assert effective == pytest.approx(sacrebleu.sentence_bleu("a dog", ["a dog runs"]).score)  # its default: True
    with pytest.raises(ValueError, match="one setting"):
        metric.compute(predictions=CHINESE, references=CHINESE, tokenize="zh", bleu_tokenize="13a")
    # one list empty, None, a tokenizer's name misspelt: evaluate's IndexError and TypeError, sacrebleu's KeyError
    with pytest.raises(ValueError, match="Got 0 predictions but 3 references; they must pair up"):
        metric.compute(predictions=[], references=REFERENCES)
    with pytest.raises(ValueError, match="Got 3 predictions but 0 references"):
        metric.compute(predictions=HYPOTHESES, references=[])
    with pytest.raises(TypeError, match="references must be a list of strings, one per sentence, got None"):
        metric.compute(predictions=HYPOTHESES, references=None)
    with pytest.raises(ValueError, match="sacrebleu has no BLEU tokenizer '13A'; choose one of"):
        metric.compute(predictions=HYPOTHESES, references=REFERENCES, tokenize="13A")
    # lowercase made BLEU alone case-insensitive; chrF's settings (word_order=2: chrF++) were BLEU's TypeError
    both = metric.compute(predictions=shouted, references=REFERENCES, lowercase=True, word_order=2)
    assert both["chrf"] == pytest.approx(sacrebleu.CHRF(word_order=2, lowercase=True).corpus_score(
        shouted, [REFERENCES]).score)
    assert "case:lc" in both["chrf_signature"] and "nw:2" in both["chrf_signature"]
    with pytest.raises(ValueError, match=r"Unknown setting n_gram: BLEU takes tokenize, lowercase, .*"
                                         r"use_effective_order; chrF takes lowercase, char_order, word_order"):
        metric.compute(predictions=HYPOTHESES, references=REFERENCES, n_gram=2)


def test_metric_module_and_card_template_are_package_data():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert Path(BLEU_CHRF_METRIC_PATH).is_file()
    for package, file in (("evaluate_metrics", Path(BLEU_CHRF_METRIC_PATH).name), ("model_cards", "translation_model_card.md")):
        name = f"hf_vanilla_transformer.{package}"
        assert name in setuptools["packages"]
        assert any(fnmatch(file, pattern) for pattern in setuptools["package-data"][name])
