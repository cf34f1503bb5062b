"""Translation metrics: corpus BLEU and chrF from sacrebleu, for `Seq2SeqTrainer` and `evaluate`."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import sacrebleu

from .pipeline_translation import normalize_whitespace

logger = logging.getLogger(__name__)

BLEU_TOKENIZERS = tuple(sacrebleu.BLEU.TOKENIZERS)
"""The tokenizations sacrebleu's BLEU knows: `13a` (its default), `zh`, `ja-mecab`, `ko-mecab`, `char`, `intl`,
`flores200`, `none`, ..."""

# ISO 639-2/3 codes, as OPUS, Tatoeba and opus-mt tokenizers write some languages ("eng", "deu", "zho"), by their
# ISO 639-1 codes; the Chinese languages' own codes (Mandarin `cmn`, Cantonese `yue`, ...) are written in Chinese
# characters as `zh` is
_ISO_639_3 = {
    "ara": "ar", "bul": "bg", "cat": "ca", "ces": "cs", "cze": "cs", "chi": "zh", "dan": "da", "deu": "de", "dut": "nl",
    "ell": "el", "eng": "en", "est": "et", "fas": "fa", "fin": "fi", "fra": "fr", "fre": "fr", "ger": "de", "gre": "el",
    "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "ind": "id", "ita": "it", "jpn": "ja", "kor": "ko", "lav": "lv",
    "lit": "lt", "nld": "nl", "nor": "no", "per": "fa", "pol": "pl", "por": "pt", "ron": "ro", "rum": "ro", "rus": "ru",
    "slk": "sk", "slo": "sk", "slv": "sl", "spa": "es", "srp": "sr", "swe": "sv", "tha": "th", "tur": "tr", "ukr": "uk",
    "vie": "vi", "zho": "zh", "guj": "gu", "kaz": "kk", "lao": "lo", "khm": "km", "mya": "my", "bur": "my",
    "bod": "bo", "tib": "bo", "dzo": "dz",
    **dict.fromkeys(["cmn", "yue", "wuu", "nan", "hak", "gan", "hsn", "cjy", "cdo", "lzh"], "zh"),
}


LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "bo": "Tibetan", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "dz": "Dzongkha", "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "fa": "Persian",
    "fi": "Finnish", "fr": "French", "gu": "Gujarati", "he": "Hebrew", "hi": "Hindi", "hr": "Croatian",
    "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "kk": "Kazakh", "km": "Khmer",
    "ko": "Korean", "lo": "Lao", "lt": "Lithuanian", "lv": "Latvian", "my": "Burmese", "nl": "Dutch",
    "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak",
    "sl": "Slovenian", "sr": "Serbian", "sv": "Swedish", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian",
    "vi": "Vietnamese", "zh": "Chinese",
}
"""The languages this package knows by name (ISO 639-1 code -> English name): for model cards, and for the names a
user may give in place of codes (`--target_lang chinese`, a CSV column `english`)."""

_CODE_BY_NAME = {
    **{name.lower(): code for code, name in LANGUAGE_NAMES.items()},
    "deutsch": "de", "francais": "fr", "français": "fr", "espanol": "es", "español": "es", "italiano": "it",
    "farsi": "fa", "mandarin": "zh", "cantonese": "zh",
    "jp": "ja", "cn": "zh",  # the countries' codes, often written for the languages'
}


def language_code(code: str | None) -> str:
    """A language id's base code, lower case, two letters where it has them: "de" for "de", "de_DE", "DE-at", "deu",
    "ger", "German" and "deutsch"; "zh" for "zh-CN", "zho", "cmn" and "chinese"; other ids as they are ("mul",
    "romance"); "" for none."""
    text = (code or "").strip().lower()
    if text in _CODE_BY_NAME:
        return _CODE_BY_NAME[text]
    base = re.split(r"[-_]", text)[0]
    return _ISO_639_3.get(base, base)


BLEU_CHRF_METRIC_PATH = str(Path(__file__).parent / "evaluate_metrics" / "bleu_chrf.py")
"""The `evaluate` metric module shipped in the package: `evaluate.load(BLEU_CHRF_METRIC_PATH)` works offline."""


UNSPACED_LANGUAGES = {"th": "Thai", "lo": "Lao", "km": "Khmer", "my": "Burmese", "bo": "Tibetan", "dz": "Dzongkha"}
"""Languages written without spaces between words that sacrebleu's `-l` leaves to 13a (a perfect Thai translation
scored BLEU 0 with chrF 95): scored by characters instead."""


def bleu_tokenizer(target_lang: str | None = None, tokenize: str | None = None) -> str:
    """The tokenization BLEU uses: `tokenize` if given, else the one sacrebleu chooses for the target language, as
    its command line does with `-l`: `zh` for Chinese, `ja-mecab` for Japanese, `ko-mecab` for Korean (codes such as
    `zh-CN`, `zh_Hant`, `cmn`, `yue` or `jpn` included: `language_code`), `char` for Thai and the other
    `UNSPACED_LANGUAGES` (with a warning), `13a` for the rest. 13a splits text at spaces and punctuation, so a
    language written without spaces would be scored by whole sentences: BLEU 0 for a perfect translation.
    `ja-mecab`/`ko-mecab` need `pip install "sacrebleu[ja]"` / `"sacrebleu[ko]"`; without it, `char` (each character
    a token) for Japanese and `13a` for Korean, which is written with spaces, with a warning. ValueError for a
    tokenizer sacrebleu does not know or cannot run here."""
    if tokenize is not None and tokenize not in BLEU_TOKENIZERS:
        raise ValueError(f"sacrebleu has no BLEU tokenizer {tokenize!r}; choose one of {', '.join(BLEU_TOKENIZERS)}.")
    language = language_code(target_lang)
    if tokenize is None and language in UNSPACED_LANGUAGES:  # sacrebleu's -l would give 13a: BLEU 0 for them
        logger.warning("BLEU for target language %r: %s is written without spaces between words, which 13a needs; "
                       "scoring characters (`char`). --bleu_tokenize chooses another.", target_lang,
                       UNSPACED_LANGUAGES[language])
        return "char"
    chosen = tokenize or sacrebleu.BLEU._TOKENIZER_MAP.get(language, sacrebleu.BLEU.TOKENIZER_DEFAULT)
    try:
        sacrebleu.BLEU(tokenize=chosen)  # the name, not its signature ("ja-mecab-0.996-IPA"), is what BLEU takes
        return chosen
    except (ImportError, RuntimeError) as error:  # MeCab's or sentencepiece's package is not installed
        reason = " ".join(str(error).split())
        if tokenize is not None:
            raise ValueError(f"BLEU's {tokenize!r} tokenizer cannot run here: {reason}") from error
        # Korean puts spaces between words, as 13a needs (characters would score far above the usual figures);
        # Japanese does not
        fallback = "13a" if language == "ko" else "char"
        logger.warning("BLEU for target language %r: sacrebleu's tokenizer for it cannot run here (%s). Scoring %s "
                       "instead.", target_lang, reason,
                       "with 13a, at its spaces and punctuation" if fallback == "13a" else "characters (`char`)")
        return fallback
    except OSError as error:  # the SentencePiece tokenizers (spm, flores101, flores200) download their model once
        reason = " ".join(str(error).split())
        raise ValueError(
            f"BLEU's {chosen!r} tokenizer needs its SentencePiece model, which sacrebleu downloads on first use into "
            f"~/.sacrebleu (or $SACREBLEU), and the download failed ({reason}). Run once where the network is "
            "reachable, or choose a tokenizer that needs no download (13a, intl, char, zh)."
        ) from error


def compute_translation_metrics(
    predictions: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    *,
    bleu_tokenize: str = "13a",
    **bleu_options,
) -> dict[str, float]:
    """Corpus BLEU and chrF (sacrebleu defaults; BLEU's tokenization `bleu_tokenize`, see `bleu_tokenizer`) of
    detokenized predictions against references. `bleu_options` are other settings of `sacrebleu.BLEU`
    (`lowercase=True`, `smooth_method=...`): this package's own scores keep its defaults.

    `references` holds one string per prediction, or a list of strings per prediction (the same number for each).
    """
    scores, _ = score_translations(predictions, references, bleu_tokenize=bleu_tokenize, **bleu_options)
    return {name: score.score for name, score in scores.items()}


def score_translations(
    predictions: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    *,
    bleu_tokenize: str = "13a",
    chrf_options: Mapping | None = None,
    **bleu_options,
) -> tuple[dict, dict[str, str]]:
    """sacrebleu's corpus scores ({"bleu": BLEUScore, "chrf": CHRFScore}: the score, and BLEU's n-gram counts,
    precisions and brevity penalty) and their signatures, as `compute_translation_metrics` takes its arguments;
    `chrf_options` are settings of `sacrebleu.CHRF` (`word_order=2` for chrF++, `lowercase=True`). ValueError or
    TypeError, naming the item, for predictions or references that are not text."""
    check_sentence_lists(predictions, references)
    if not predictions:
        raise ValueError("No predictions to score: give at least one translation and its reference.")
    for index, prediction in enumerate(predictions):
        _check_text(prediction, f"predictions[{index}]")
    reference_streams = _reference_streams(references)
    metrics = _metrics(bleu_tokenize, chrf_options, **bleu_options)
    scores = {name: metric.corpus_score(list(predictions), reference_streams) for name, metric in metrics.items()}
    return scores, {name: str(metric.get_signature()) for name, metric in metrics.items()}


def _check_text(value, where: str, expected: str = "a string") -> None:
    """TypeError unless `value` is a string: sacrebleu failed deep inside on None, bytes or numbers."""
    if isinstance(value, str):
        return
    advice = " (decode bytes first: text.decode('utf-8'))" if isinstance(value, bytes) else ""
    raise TypeError(f"{where} is {'None' if value is None else f'{type(value).__name__} {value!r:.40}'}, not "
                    f"{expected}{advice}: give text, one string per sentence.")


def _metrics(bleu_tokenize: str, chrf_options: Mapping | None = None, **bleu_options) -> dict:
    """The metrics, each with sacrebleu's default settings but BLEU's tokenization (exponential smoothing; chrF's
    character n-grams need no tokenization) and any other BLEU and chrF settings given."""
    return {"bleu": sacrebleu.BLEU(tokenize=bleu_tokenize, **bleu_options),
            "chrf": sacrebleu.CHRF(**(chrf_options or {}))}


def check_sentence_lists(predictions, references) -> None:
    """TypeError for predictions or references that are no list: one string (a sequence too, which sacrebleu and
    `evaluate` would take for a sentence a character), or None; ValueError for lists that do not pair up (`evaluate`
    failed with an IndexError where one was empty)."""
    for name, value in (("predictions", predictions), ("references", references)):
        if isinstance(value, str):
            raise TypeError(f"{name} must be a list of strings, one per sentence, got one string: [{value!r}].")
        if value is None:
            raise TypeError(f"{name} must be a list of strings, one per sentence, got None.")
    if len(predictions) != len(references):
        raise ValueError(f"Got {len(predictions)} predictions but {len(references)} references; they must pair up.")


def sacrebleu_signatures(references_per_sentence: int = 1, *, bleu_tokenize: str = "13a") -> dict[str, str]:
    """The sacreBLEU signatures of `compute_translation_metrics`' BLEU and chrF, e.g. BLEU's
    `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.5.1`: the settings, reference count and sacrebleu
    version that a reported score needs beside it to be comparable with others' (Post, 2018)."""
    signatures = {}
    for name, metric in _metrics(bleu_tokenize).items():
        metric.corpus_score(["."], [["."]] * references_per_sentence)  # sacrebleu learns the reference count here
        signatures[name] = str(metric.get_signature())
    return signatures


def _reference_streams(references: Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    """Transpose per-prediction references into sacrebleu's list of reference streams."""
    per_prediction = []
    for index, reference in enumerate(references):
        if isinstance(reference, str):
            per_prediction.append([reference])
            continue
        if isinstance(reference, (bytes, bytearray)) or not isinstance(reference, Iterable):
            _check_text(reference, f"references[{index}]", "a string or a list of strings")
        texts = list(reference)  # a list, a tuple, a numpy array of strings
        if not texts:
            raise ValueError(f"references[{index}] is an empty list: give each prediction at least one reference.")
        for number, text in enumerate(texts):
            _check_text(text, f"references[{index}][{number}]")
        per_prediction.append(texts)
    counts = {len(item) for item in per_prediction}
    if len(counts) > 1:
        raise ValueError(f"Every prediction needs the same number of references; got counts {sorted(counts)}.")
    return [list(stream) for stream in zip(*per_prediction)]


def exact_match_by_group(
    predictions: Sequence[str], references: Sequence[str], reference_groups: Mapping[str, str]
) -> dict[str, float]:
    """Percent of predictions equal to their reference: `exact_match` over all, and `exact_match_<group>` for the
    predictions whose reference `reference_groups` puts in that group (references it does not know count only in
    the total)."""
    matches = defaultdict(list)
    for prediction, reference in zip(predictions, references, strict=True):
        correct = prediction == reference
        matches["exact_match"].append(correct)
        if reference in reference_groups:
            matches[f"exact_match_{reference_groups[reference]}"].append(correct)
    return {name: 100.0 * float(np.mean(values)) for name, values in sorted(matches.items())}


def make_compute_metrics(
    tokenizer,
    reference_groups: Mapping[str, str] | None = None,
    references: Mapping[tuple[int, ...], Sequence[str]] | None = None,
    *,
    bleu_tokenize: str = "13a",
) -> Callable[[object], dict[str, float]]:
    """A `compute_metrics` for `Seq2SeqTrainer` with `predict_with_generate=True`: bleu, chrf and gen_len, and with
    `reference_groups` (reference text -> group name, e.g. the built-in corpus' magnitudes) exact-match accuracy
    overall and per group (see `exact_match_by_group`). gen_len is the mean number of generated tokens per sentence
    (the start token, end token and padding not counted).

    The references are the labels decoded, or with `references` (see `reference_texts`) the texts the labels were
    made from, as sacrebleu on the files scores them: a tokenizer that lowercases, strips accents, maps unseen
    characters to its unknown token or reads a typed `</s>` as its end token changes the decoded labels, and a
    score against them is not the score of the text. BLEU tokenizes with `bleu_tokenize` (see `bleu_tokenizer`: `zh`
    for Chinese targets, ...).
    """
    not_text = np.array(sorted({*tokenizer.all_special_ids, tokenizer.pad_token_id}))

    def compute_metrics(eval_prediction) -> dict[str, float]:
        predictions = _token_ids(eval_prediction.predictions, tokenizer.pad_token_id)
        labels = _token_ids(eval_prediction.label_ids, tokenizer.pad_token_id)
        decoded_predictions, decoded_labels = decoded_texts(tokenizer, predictions), decoded_texts(tokenizer, labels)
        if references is not None:
            decoded_labels = _reference_texts_of(labels, decoded_labels, references, tokenizer.pad_token_id)
        metrics = compute_translation_metrics(decoded_predictions, decoded_labels, bleu_tokenize=bleu_tokenize)
        metrics["gen_len"] = float(np.mean(np.sum(~np.isin(predictions, not_text), axis=-1)))
        if reference_groups is not None:
            metrics.update(exact_match_by_group(decoded_predictions, decoded_labels, reference_groups))
        return metrics

    return compute_metrics


def reference_texts(labels: Sequence[Sequence[int]], texts: Sequence[str], pad_token_id: int) -> dict:
    """Label ids (padding left out) -> the reference texts they were tokenized from, in their order, for
    `make_compute_metrics(references=...)`. Texts that tokenize alike (e.g. under a lowercasing tokenizer) share
    a key; evaluation predicts in the data's order, so the n-th such label is given the n-th text."""
    found = defaultdict(list)
    for ids, text in zip(labels, texts, strict=True):
        found[tuple(int(token) for token in ids if token != pad_token_id and token != -100)].append(text.strip())
    return dict(found)


def _reference_texts_of(
    labels: np.ndarray, decoded: list[str], references: Mapping[tuple[int, ...], Sequence[str]], pad_token_id: int
) -> list[str]:
    """The text each label row was made from (see `reference_texts`); the decoded row where it is not known."""
    used = defaultdict(int)
    texts = []
    for row, fallback in zip(labels.tolist(), decoded):
        key = tuple(token for token in row if token != pad_token_id)
        candidates = references.get(key)
        if candidates:
            texts.append(candidates[used[key] % len(candidates)])
            used[key] += 1
        else:
            texts.append(fallback)
    return texts


_UNSPACED_SCRIPTS = re.compile(r"[\u0E00-\u0FFF\u1000-\u109F\u1780-\u17FF\u2E80-\u9FFF\uF900-\uFAFF]")
"""Letters of scripts written without spaces between words: Thai, Lao, Tibetan, Myanmar, Khmer, and Chinese and
Japanese (CJK ideographs, kana). Not Hangul: Korean puts spaces between its words."""


def warn_if_written_without_spaces(references: Sequence[str], bleu_tokenize: str, what: str) -> None:
    """Warn where BLEU tokenizes at spaces and punctuation (13a) and most of `references` (`what` names them) are long
    texts without a space, as Chinese, Japanese or Thai are written: 13a scores them by whole sentences, BLEU 0 for
    any translation not perfect. The target language's code chooses another tokenization (`bleu_tokenizer`); this
    catches the languages it does not know, or a --target_lang that is a column's name."""
    if bleu_tokenize != "13a":
        return
    texts = [text.strip() for text in references[:1000] if text and text.strip()]
    unspaced = [text for text in texts if not re.search(r"\s", text)
                and (len(text) >= 12 or len(_UNSPACED_SCRIPTS.findall(text)) >= 3)]
    if len(unspaced) > len(texts) / 2:  # most of them
        logger.warning(
            "%s: %d of %d are written without spaces (e.g. %r), and BLEU tokenizes with 13a, which splits text at "
            "spaces and punctuation: a translation would be scored as one word, BLEU 0 unless it is perfect. Give "
            "--bleu_tokenize zh for Chinese, ja-mecab for Japanese, char for others.", what, len(unspaced),
            len(texts), unspaced[0][:30],
        )


def decoded_texts(tokenizer, ids) -> list[str]:
    """Generated ids or labels (padded with -100 or pad) as text, one line each, as the scores read them and
    generated_predictions.txt holds them: special tokens left out, whitespace as every target the package trains on
    has it (`normalize_whitespace`: a line break that a model learnt from its data would split the line), in the
    Unicode form the model wrote."""
    texts = tokenizer.batch_decode(_token_ids(ids, tokenizer.pad_token_id), skip_special_tokens=True)
    return [normalize_whitespace(text) for text in texts]


def _token_ids(array, pad_token_id: int) -> np.ndarray:
    """Generated ids or labels as a 2-D integer array, -100 (the Trainer's padding and ignore index) made pad."""
    if isinstance(array, tuple):
        array = array[0]
    array = np.asarray(array)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            f"compute_metrics expects generated token ids (a 2-D integer array), got shape {array.shape} of "
            f"{array.dtype}: set `predict_with_generate=True` in Seq2SeqTrainingArguments."
        )
    return np.where(array == -100, pad_token_id, array)
