"""One BPE vocabulary shared by source and target, as the paper's shared source-target vocabulary [5.1].

Byte-level BPE (GPT-2's pre-tokenizer, no prefix space): every string encodes without `<unk>` and decodes back
to itself, spaces, umlauts and all, "</s>" typed in a sentence too (the special tokens are ids the tokenizer adds,
never read from text). The post-processor appends `</s>` to every sequence, source and target; the model starts
decoding from `<s>` (`decoder_start_token_id`).
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from transformers import AutoTokenizer, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import LARGE_INTEGER, VERY_LARGE_INTEGER
from transformers.utils import is_protobuf_available

from .errors import InputError
from .pipeline_translation import normalize_text, normalize_whitespace, reads_special_tokens_as_text

logger = logging.getLogger(__name__)

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN]  # ids 0, 1, 2, 3 in this order


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    model_max_length: int | None = None,
    normalizer: normalizers.Normalizer | None = None,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts` (source and target sentences together) and wrap it for transformers.

    Special tokens get ids pad=0, bos=1, eos=2, unk=3. The result is `save_pretrained`-able and reloads with
    `AutoTokenizer.from_pretrained`. `vocab_size` counts them and the 256 bytes of the base alphabet. A `normalizer`
    (a `tokenizers` one) changes text before it is learnt from and encoded, e.g. the built-in corpus' lower-casing:
    text it changes no longer decodes back to itself. Special tokens typed in a sentence ("</s>") are read as text
    (`split_special_tokens=True`, saved with it), and so are any added later with `add_special_tokens` (a language
    tag, "<2de>"): add such tokens with `tokenizer.add_tokens(["<2de>"])` to have them matched as one token, or set
    `tokenizer.split_special_tokens = False`.
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):  # a string iterates as its characters
        raise TypeError(
            "train_bpe_tokenizer takes the sentences, an iterable of strings (a list, a generator over a file's "
            f"lines), got one {type(texts).__name__}: {str(texts)[:60]!r}."
        )
    least = len(SPECIAL_TOKENS) + len(pre_tokenizers.ByteLevel.alphabet())
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < least:
        raise ValueError(f"vocab_size must be an integer of at least {least} (the special tokens and the 256 bytes), "
                         f"got {vocab_size!r}.")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"min_frequency must be an integer >= 0, got {min_frequency!r}.")
    backend = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    if normalizer is not None:
        backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    counts = Counter()
    backend.train_from_iterator(_checked_sentences(texts, counts), trainer=trainer)
    if not counts["with_text"]:
        given = f"all {counts['sentences']} sentences are empty" if counts["sentences"] else "no sentences"
        raise ValueError(f"train_bpe_tokenizer was given no text to learn from: {given}.")
    eos_id = backend.token_to_id(EOS_TOKEN)
    backend.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS_TOKEN}", pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}", special_tokens=[(EOS_TOKEN, eos_id)]
    )
    optional = {} if model_max_length is None else {"model_max_length": model_max_length}
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        split_special_tokens=True,  # "</s>" or "<pad>" in a sentence is text, not an end or padding (saved with it)
        **optional,
    )


def _checked_sentences(texts: Iterable[str], counts: Counter) -> Iterator[str]:
    """`texts`, each checked to be a string (the tokenizers library's TypeError names neither the item nor where it
    is), counted in `counts` ("sentences", "with_text")."""
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            described = "None" if text is None else f"{type(text).__name__} {text!r:.60}"
            advice = " (decode bytes first: text.decode('utf-8'))" if isinstance(text, bytes) else ""
            raise TypeError(f"train_bpe_tokenizer takes strings, got {described} as sentence {index}{advice}.")
        counts["sentences"] += 1
        counts["with_text"] += bool(text.strip())
        yield text


def translation_texts(dataset, source_lang: str, target_lang: str, batch_size: int = 1000) -> Iterator[str]:
    """Yield the source and target sentence of each row of a Dataset with a `translation` column (pass train only),
    as the model is given them (`data.tokenize_translation_datasets`, the translation pipeline): sources normalized
    (`normalize_text`: a corpus in NFD would teach merges of decomposed letters that no source holds once in NFC),
    targets with their whitespace normalized."""
    for batch in dataset.iter(batch_size=batch_size):
        for pair in batch["translation"]:
            yield normalize_text(pair[source_lang])
            yield normalize_whitespace(pair[target_lang])


SPECIAL_TOKEN_ROLES = {
    "pad_token": (PAD_TOKEN, "which pads batches"),
    "bos_token": (BOS_TOKEN, "which a new model starts each translation from (its decoder_start_token_id)"),
    "eos_token": (EOS_TOKEN, "which ends every sentence, so that a model learns where to stop"),
}
"""The special tokens a translation model needs of its tokenizer: the token this package's tokenizers use for
each, and what it is for."""


def special_token_ids(tokenizer, name: str | Path | None = None) -> dict[str, int]:
    """The ids a model config needs: pad, bos, eos, and decoder_start (= bos `<s>`); an InputError naming the
    tokens `tokenizer` (called `name` in it) lacks, and how to add them."""
    check_special_tokens(tokenizer, SPECIAL_TOKEN_ROLES, name)
    return {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.bos_token_id,
    }


def check_special_tokens(tokenizer, needed: Iterable[str], name: str | Path | None = None, remedy: str = "") -> None:
    """An InputError unless `tokenizer` has each of the `needed` special tokens (keys of `SPECIAL_TOKEN_ROLES`),
    saying what each missing one is for and how to add it (and `remedy`, another way out)."""
    missing = [token for token in needed if getattr(tokenizer, f"{token}_id") is None]
    if not missing:
        return
    what = ", nor ".join(f"{token.removesuffix('_token')} token ({token}_id), {SPECIAL_TOKEN_ROLES[token][1]}"
                         for token in missing)
    added = ", ".join(f'"{token}": "{_suggested_token(tokenizer, token)}"' for token in missing)
    if name is not None and Path(name).is_file() and Path(name).name != "tokenizer.json":  # a bare tokenizers file
        folder = Path(name).with_suffix("")
        load = f'PreTrainedTokenizerFast(tokenizer_file="{name}")'
    else:
        folder = "FOLDER" if name is None else Path(name).parent if Path(name).is_file() else name
        load = f'AutoTokenizer.from_pretrained("{folder}")'
    raise InputError(
        f"The tokenizer{f' {name}' if name is not None else ''} has no {what}. Add "
        f"{'it' if len(missing) == 1 else 'them'} and save the tokenizer, e.g. `tok = {load}; "
        f'tok.add_special_tokens({{{added}}}); tok.save_pretrained("{folder}")` (a token its vocabulary lacks is '
        f"added to it), and give that folder.{' ' + remedy if remedy else ''}"
    )


SPECIAL_TOKEN_NAMES = {
    "pad_token": ("[PAD]", "<|pad|>"),
    "bos_token": ("cls_token", "[CLS]", "[BOS]", "<bos>", "<|startoftext|>", "<|begin_of_text|>"),
    "eos_token": ("sep_token", "[SEP]", "[EOS]", "<eos>", "<|endoftext|>", "<|end_of_text|>"),
}
"""For each special token a model needs, what other tokenizers (BERT's [CLS] and [SEP], GPT's <|endoftext|>) hold
in its place: an attribute naming a token, or a token."""


def _suggested_token(tokenizer, role: str) -> str:
    """The token `check_special_tokens` suggests for `role`: one the vocabulary holds in its place, else this
    package's (which `add_special_tokens` adds to the vocabulary)."""
    vocabulary = tokenizer.get_vocab()
    for candidate in (SPECIAL_TOKEN_ROLES[role][0], *SPECIAL_TOKEN_NAMES[role]):
        token = getattr(tokenizer, candidate, None) if candidate.endswith("_token") else candidate
        if isinstance(token, str) and token in vocabulary:
            return token
    return SPECIAL_TOKEN_ROLES[role][0]


def ends_with_eos(tokenizer) -> bool:
    """Whether `tokenizer` ends what it encodes, sources and targets, with its eos token."""
    eos = [tokenizer.eos_token_id]
    return tokenizer("a")["input_ids"][-1:] == eos and tokenizer(text_target="a")["input_ids"][-1:] == eos


def append_eos(tokenizer, name: str | Path) -> None:
    """Make `tokenizer` end every encoding with its eos token where it does not (a tokenizer built with the
    `tokenizers` library has no post-processor that adds one), with a warning: trained on targets without it, a
    model never learns to stop. transformers' `add_eos_token` gives it a `TemplateProcessing` post-processor that
    appends eos (and keeps a bos it put first), saved in its tokenizer.json; InputError for a tokenizer without a
    `tokenizers` backend to change."""
    if ends_with_eos(tokenizer):
        return
    if not hasattr(tokenizer, "update_post_processor"):  # not a tokenizers-backed (fast) tokenizer
        raise InputError(
            f"The tokenizer {name} does not end what it encodes with its end token {tokenizer.eos_token!r}, and is "
            "not a `tokenizers` one whose post-processor could append it: a model trained on it would never learn "
            "to stop. Give a tokenizer that appends its eos token (e.g. saved with a TemplateProcessing "
            "post-processor), or leave --tokenizer_name out to train one on the data."
        )
    puts_bos_first = tokenizer.bos_token_id is not None and tokenizer("a")["input_ids"][:1] == [tokenizer.bos_token_id]
    tokenizer.add_bos_token = puts_bos_first
    tokenizer.add_eos_token = True
    logger.warning(
        f"The tokenizer {name} did not end what it encodes with its end token {tokenizer.eos_token!r}, so a model "
        "trained on it would never learn to stop: it now appends it (a TemplateProcessing post-processor, saved "
        "with the run's tokenizer, so that the saved model translates as it was trained)."
    )


def drop_length_limit(tokenizer, name: str | Path) -> None:
    """Clear the `model_max_length` a given tokenizer brings from the model it was made for (a BERT tokenizer's
    512, or any limit saved with it): a new model here computes its position encodings for any length, and the
    limit, saved with the run's tokenizer, would make transformers warn of "indexing errors" that cannot happen and
    cut a pipeline's `truncation=True` there. The run's own limits are --max_source_length and --max_target_length."""
    if tokenizer.model_max_length >= LARGE_INTEGER:  # no limit set: transformers' VERY_LARGE_INTEGER
        return
    logger.info(f"The tokenizer {name} says its model reads at most {tokenizer.model_max_length} tokens; this "
                "model's position encodings are computed for any length, so the run's tokenizer is saved without "
                "that limit.")
    tokenizer.model_max_length = VERY_LARGE_INTEGER


DECODING_SAMPLE_SIZE = 200
"""How many training targets `decoding_sample` picks for `check_decodes_to_text`."""

DECODING_FAILURE_RATE = 0.05
"""The share of the sampled targets that may decode to other text before `check_decodes_to_text` says so: a
tokenizer without the decoder its pre-tokenizer needs fails on nearly every sentence."""


def decoding_sample(datasets, target_lang: str, size: int = DECODING_SAMPLE_SIZE) -> list[str]:
    """Up to `size` non-blank target sentences of `datasets` (a DatasetDict with a `translation` column, or None),
    spread evenly over the training split (the first split where there is none), for `check_decodes_to_text`."""
    if not datasets:
        return []
    dataset = datasets["train"] if "train" in datasets else next(iter(datasets.values()))
    count = len(dataset)
    rows = sorted({row * count // size for row in range(size)}) if count > size else range(count)
    texts = (pair.get(target_lang) for pair in dataset.select(rows)["translation"])
    return [text for text in texts if isinstance(text, str) and text.strip()]


def _spaced(text: str) -> str:
    """`text` as `check_decodes_to_text` compares it: in NFKC (a sentencepiece tokenizer's normalization, out of
    reach in a slow tokenizer), without case, its whitespace normalized."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_UNSPACED_SCRIPTS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # kana, CJK ideographs
_SPACE_AT_PUNCTUATION = re.compile(rf"\s+(?=[^\w\s]|[{_UNSPACED_SCRIPTS}])|(?<=[^\w\s]|[{_UNSPACED_SCRIPTS}])\s+")


def _unspaced(text: str) -> str:
    """`_spaced(text)` without the spaces next to punctuation or a Chinese or Japanese character: where a tokenizer
    that splits punctuation off words (a Whitespace or BERT pre-tokenizer) decodes "Straße ." or "rot - weiß", a
    cleaning decoder "Mädchen, das" of a corpus's "Mädchen , das", or a character-level Chinese one "我 爱 你"."""
    return _SPACE_AT_PUNCTUATION.sub("", _spaced(text))


def _case_or_accents_folded(tokenizer, texts: list[str]) -> list[tuple[str, str]]:
    """[(text, normalized)] for the `texts` that the tokenizer's normalizer changes in case or accents alone (its
    Lowercase, StripAccents), not in its Unicode form (NFC, NFKC) or otherwise."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.normalizer is None:
        return []

    def folded(text: str) -> str:
        return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))

    found = []
    for text in map(normalize_whitespace, texts):
        normalized = backend.normalizer.normalize_str(text)
        unicode_forms = {text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFKC", text)}
        if normalized not in unicode_forms and folded(normalized) == folded(text):
            found.append((text, normalized))
    return found


def _decoding_failures(tokenizer, texts: list[str]) -> tuple[int, list[tuple[str, str]], list[tuple[str, str]]]:
    """(how many of `texts` were checked, [(text, decoded)] for those that decode to other text, [(text, decoded)]
    for those that decode otherwise only in the spaces at punctuation). Encoded as the package encodes targets
    (`text_target=`, typed special tokens read as `reads_special_tokens_as_text` says) and decoded as it decodes
    translations (special tokens skipped; with the tokenizer's cleanup of spaces, as the training script's
    `decoded_texts`, and without, as the pipeline). A text decodes to itself when it does so in either way,
    as it is or as the tokenizer's normalizer writes it. Texts with the unknown token are not checked: `data`
    warns about a tokenizer that does not cover the text."""
    texts = [normalize_whitespace(text) for text in texts]
    backend = getattr(tokenizer, "backend_tokenizer", None)  # None for a slow (sentencepiece) tokenizer
    # transformers turns the backend's own truncation and padding off for a call without them (and save_pretrained
    # would write it so): put them back
    truncation, padding = (backend.truncation, backend.padding) if backend is not None else (None, None)
    try:
        encoded = tokenizer(text_target=texts, split_special_tokens=reads_special_tokens_as_text(tokenizer))
    finally:
        if truncation is not None:
            backend.enable_truncation(**truncation)
        if padding is not None:
            backend.enable_padding(**padding)
    encoded = encoded["input_ids"]
    normalizer = backend.normalizer if backend is not None else None
    unknown = {tokenizer.unk_token_id}
    if backend is not None and isinstance(getattr(backend.model, "unk_token", None), str):
        unknown.add(backend.token_to_id(backend.model.unk_token))  # one the transformers tokenizer does not name
    checked = [(text, ids) for text, ids in zip(texts, encoded) if not unknown.intersection(ids)]
    rows = [ids for _, ids in checked]
    decodings = [tokenizer.batch_decode(rows, skip_special_tokens=True)]
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        decodings.append(tokenizer.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=False))
    other, spacing = [], []
    for (text, _), *decoded in zip(checked, *decodings):
        normalized = normalizer.normalize_str(text) if normalizer is not None else text
        # the normalizer's form where it changes more than spaces (and case): BERT's pads each Chinese character
        # with spaces, which the translations would then have
        unspaced = ["".join(_spaced(each).split()) for each in (text, normalized)]
        expected = [text] + ([normalized] if unspaced[0] != unspaced[1] else [])
        if {_spaced(each) for each in decoded} & {_spaced(each) for each in expected}:
            continue
        near = {_unspaced(each) for each in decoded} & {_unspaced(each) for each in expected}
        (spacing if near else other).append((text, normalize_whitespace(decoded[-1])))  # as the pipeline writes it
    return len(checked), other, spacing


def _decoders_to_try(backend) -> list[tuple[object, str]]:
    """(decoder, what calls for it) for a `tokenizers` backend without a decoder: ByteLevel's or Metaspace's (with
    its settings) for such a pre-tokenizer, WordPiece's for a model's continuing-subword prefix ("##"), BPE's for
    its end-of-word suffix ("</w>")."""
    pre_tokenizer = backend.pre_tokenizer
    parts = list(pre_tokenizer) if isinstance(pre_tokenizer, pre_tokenizers.Sequence) else [pre_tokenizer]
    candidates = []
    for part in parts:
        if isinstance(part, pre_tokenizers.ByteLevel):
            candidates.append((decoders.ByteLevel(), "its ByteLevel pre-tokenizer"))
        elif isinstance(part, pre_tokenizers.Metaspace):
            candidates.append((decoders.Metaspace(replacement=part.replacement, prepend_scheme=part.prepend_scheme,
                                                  split=part.split), "its Metaspace pre-tokenizer"))
    if prefix := getattr(backend.model, "continuing_subword_prefix", None):
        candidates.append((decoders.WordPiece(prefix=prefix, cleanup=False),
                           f"its model's continuing-subword prefix {prefix!r}"))
    if suffix := getattr(backend.model, "end_of_word_suffix", None):
        candidates.append((decoders.BPEDecoder(suffix=suffix), f"its model's end-of-word suffix {suffix!r}"))
    return candidates


def _space_dropping_pre_tokenizer(backend) -> str | None:
    """The name of a `tokenizers` backend's pre-tokenizer that splits words at spaces and drops them (Whitespace,
    WhitespaceSplit, BERT's), after which no decoder knows where a word ended; None for another."""
    pre_tokenizer = getattr(backend, "pre_tokenizer", None)
    parts = list(pre_tokenizer) if isinstance(pre_tokenizer, pre_tokenizers.Sequence) else [pre_tokenizer]
    dropping = (pre_tokenizers.Whitespace, pre_tokenizers.WhitespaceSplit, pre_tokenizers.BertPreTokenizer)
    return next((type(part).__name__ for part in parts if isinstance(part, dropping)), None)


def _shown(text: str, limit: int = 100) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def check_decodes_to_text(tokenizer, texts: list[str], name: str | Path) -> None:
    """InputError where `tokenizer` does not give text back: where more than `DECODING_FAILURE_RATE` of `texts`
    (training targets, `decoding_sample`) decode to other text, as a tokenizer built as in the `tokenizers`
    quicktour (a BPE model and a Whitespace pre-tokenizer, no decoder) decodes "lädt Baumwolle" as "lä d t Baum wo
    l le": the model's translations would read so, and be scored so. What its normalizer changes on purpose (lower
    case, "ä" spelt "ae"), a sentencepiece tokenizer's NFKC and spacing, and texts with its unknown token do not
    count (`_decoding_failures`). A `tokenizers` tokenizer without a decoder is given the one its pre-tokenizer or
    model calls for where that one gives the text back (with a warning; the run saves it with its tokenizer).
    Texts that come back but for the spaces at punctuation ("Straße ." for "Straße.") are warned about."""
    if not texts:
        return
    checked, other, spacing = _decoding_failures(tokenizer, texts)
    limit = DECODING_FAILURE_RATE * checked
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if len(other) > limit and backend is not None and backend.decoder is None:
        for decoder, reason in _decoders_to_try(backend):
            backend.decoder = decoder
            _, still_other, still_spacing = _decoding_failures(tokenizer, texts)
            if len(still_other) <= limit:
                text, decoded = min(other, key=lambda pair: len(pair[0]))
                logger.warning(
                    f"The tokenizer {name} has no decoder: it decoded {_shown(text)} as {_shown(decoded)}. It now "
                    f"decodes with the {type(decoder).__name__} decoder that {reason} calls for (saved with the "
                    "run's tokenizer, so that the saved model's translations read as text)."
                )
                other, spacing = still_other, still_spacing
                break
        else:
            backend.decoder = None
    if len(other) > limit:
        text, decoded = min(other, key=lambda pair: len(pair[0]))
        dropping = _space_dropping_pre_tokenizer(backend)
        fix = (f"Its {dropping} pre-tokenizer drops the spaces, which no decoder brings back: train it again with a "
               "ByteLevel pre-tokenizer and decoders.ByteLevel() (or a Metaspace one and decoders.Metaspace())"
               if dropping else
               "Give it the decoder that matches its pre-tokenizer (decoders.ByteLevel() for a ByteLevel one, "
               "decoders.Metaspace() for a Metaspace one) and save it")
        raise InputError(
            f"The tokenizer {name} does not give text back: {len(other)} of {checked} training targets decode to "
            f"other text, e.g. {_shown(text)} -> {_shown(decoded)}, and so would the model's translations. {fix}, "
            "or leave --tokenizer_name out to train a tokenizer on the data."
        )
    if len(folded := _case_or_accents_folded(tokenizer, texts)) > limit:
        text, normalized = min(folded, key=lambda pair: len(pair[0]))
        logger.warning(
            f"The tokenizer {name} lowercases or strips accents from what it reads ({len(folded)} of {len(texts)} "
            f"training targets, e.g. {_shown(text)} -> {_shown(normalized)}): the model's translations will read so, "
            "and be scored against references as they are written (a lowercased perfect translation of Multi30k's "
            "validation scores BLEU 26). Give a tokenizer whose normalizer keeps them, or leave --tokenizer_name out "
            "to train one on the data; or lowercase the references too, to score as it translates."
        )
    if len(spacing) > limit:
        text, decoded = min(spacing, key=lambda pair: len(pair[0]))
        logger.warning(
            f"The tokenizer {name} decodes {len(spacing)} of {checked} training targets with other spaces at "
            f"punctuation or between Chinese or Japanese characters, e.g. {_shown(text)} -> {_shown(decoded)}, and so will the model's translations read (and "
            "be scored). A tokenizer whose pre-tokenizer keeps the spaces (ByteLevel, Metaspace) gives text back as "
            "it is; leaving --tokenizer_name out trains one on the data."
        )


TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model"
)


MARIAN_TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
"""What a saved MarianTokenizer (the opus-mt models') reads beside its tokenizer_config.json."""


def check_marian_tokenizer_files(folder: Path, remedy: str) -> None:
    """InputError naming the files a folder's MarianTokenizer config needs and the folder lacks (transformers fails
    on them with a TypeError about None inside the tokenizer)."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_bytes())
    except (OSError, ValueError):
        return
    if not isinstance(config, dict) or config.get("tokenizer_class") != "MarianTokenizer":
        return
    if missing := [name for name in MARIAN_TOKENIZER_FILES if not (folder / name).is_file()]:
        raise InputError(f"{folder} holds a MarianTokenizer config without {', '.join(missing)}, the sentencepiece "
                         f"models and vocabulary it reads. {remedy}")


def load_tokenizer(name_or_path: str | Path, *, remedy: str | None = None, **kwargs):
    """`AutoTokenizer.from_pretrained(name_or_path, **kwargs)`, with a clear error when a local model folder has no
    tokenizer, or a tokenizer config without the files it needs (`remedy` says what to do then; by default, to
    save the model's tokenizer into it). A `tokenizer.json` file stands for the folder it is in; another JSON file
    of the `tokenizers` library (`Tokenizer.save("my.json")`) is read on its own."""
    path = Path(name_or_path)
    if path.is_file() and path.name == "tokenizer.json" and (path.parent / "tokenizer_config.json").is_file():
        return load_tokenizer(path.parent, remedy=remedy, **kwargs)
    if (path / "tokenizer.json").is_file() and not any((path / name).is_file() for name in (
            "tokenizer_config.json", "special_tokens_map.json")):  # `Tokenizer.save(".../tokenizer.json")`: a bare
        path = path / "tokenizer.json"  # file, which names no special tokens
    remedy = remedy or (f"Save the tokenizer the model was trained with into it (`tokenizer.save_pretrained("
                        f"'{path}')`; the training script also takes one with --tokenizer_name).")
    if path.is_file():
        try:
            tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(path))
        except Exception as error:  # tokenizers' own exception types: not JSON, or not a tokenizer's
            if path.suffix in (".model", ".spm"):
                raise InputError(
                    f"{path} is a SentencePiece model, which transformers reads from a folder: give the folder it "
                    "came from, or put it alone in a folder as tokenizer.model and give that (transformers reads it "
                    "with the protobuf library: `pip install protobuf`)."
                ) from error
            raise InputError(f"{path} is a file that is not a tokenizer ({str(error).strip() or type(error).__name__}):"
                             " give the folder that holds the tokenizer (tokenizer.json, tokenizer_config.json), "
                             "or a Hub id.") from error
        # a bare tokenizers file names no special tokens: this package's, where its vocabulary has them
        vocabulary = tokenizer.get_vocab()
        tokenizer.add_special_tokens({f"{role}_token": token for role, token in zip(
            ("pad", "bos", "eos", "unk"), SPECIAL_TOKENS) if token in vocabulary})
        return tokenizer
    if path.is_dir() and not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise InputError(f"{path} has no tokenizer (no tokenizer.json or tokenizer_config.json). {remedy}")
    for name in ("tokenizer.json", "tokenizer_config.json"):  # a damaged file: named, not JSON's bare complaint
        if path.is_dir() and (path / name).is_file():
            try:
                json.loads((path / name).read_bytes())
            except ValueError as error:
                raise InputError(f"{path / name} is damaged (not JSON: {error}). {remedy}") from error
    if path.is_dir():
        check_marian_tokenizer_files(path, remedy)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, **kwargs)
    except ImportError as error:  # a tokenizer of another kind, whose library is not installed: transformers' 4 lines
        needed = re.search(r"requires the (\w+) library", str(error))
        library = needed.group(1) if needed else "a library that is not installed"
        hint = (" (`pip install sentencepiece`, or the package's extra: "
                "`pip install \"hf-vanilla-transformer[marian]\"`)"
                if library.lower() == "sentencepiece" else "")
        raise InputError(f"The tokenizer of {name_or_path} needs {library}: install it{hint}.") from error
    except ValueError as error:
        if "backend tokenizer" not in str(error):
            if path.is_dir():
                raise _protobuf_missing(path, name_or_path) or _unloadable(path, error, remedy) from error
            raise
        if path.is_dir() and (path / "tokenizer_config.json").is_file():  # a config without tokenizer.json
            raise InputError(f"{path} has a tokenizer config but not the tokenizer (tokenizer.json). {remedy}") from error
        if path.is_dir():  # vocab.json (and merges.txt) alone, as `tokenizers`' save_model writes them
            held = ", ".join(sorted(name for name in TOKENIZER_FILES + ("merges.txt",) if (path / name).is_file()))
            raise InputError(
                f"{path} holds {held} but no tokenizer.json or tokenizer_config.json: the files of a tokenizer's model "
                "alone (as `tokenizers`' save_model writes them). Load them into a tokenizer (e.g. "
                "`ByteLevelBPETokenizer(vocab, merges)`), save it with `.save(\"FOLDER/tokenizer.json\")`, and give "
                "that folder."
            ) from error
        raise InputError(  # a Hub repository without tokenizer files: transformers names none of them
            f"{name_or_path} has no tokenizer (no tokenizer.json, nor the files of another tokenizer kind): push the "
            "tokenizer the model was trained with beside it (`tokenizer.push_to_hub(...)`, or scripts/push_to_hub.py "
            "on the training run's folder)."
        ) from error
    except Exception as error:  # a tokenizer.json of the right JSON but not loadable: tokenizers' own exceptions,
        if not path.is_dir():  # or a KeyError for a part missing ('added_tokens')
            raise
        raise _unloadable(path, error, remedy) from error
    _check_has_a_vocabulary(tokenizer, name_or_path, remedy)
    return tokenizer


SENTENCEPIECE_MODEL_FILES = ("spiece.model", "tokenizer.model", "sentencepiece.bpe.model")
"""The names the SentencePiece-based tokenizers that transformers converts to `tokenizers` (T5, Llama, XLM-R) give
their model file (MarianTokenizer's source.spm is read by sentencepiece itself, without protobuf)."""


def _protobuf_missing(path: Path, name_or_path) -> InputError | None:
    """The InputError for a folder with a SentencePiece model that transformers reads into a fast tokenizer with the
    protobuf library, where that is not installed: transformers then tries tiktoken and advises installing it."""
    held = [name for name in SENTENCEPIECE_MODEL_FILES if (path / name).is_file()]
    if not held or is_protobuf_available():
        return None
    return InputError(f"The tokenizer of {name_or_path} is a SentencePiece model ({held[0]}), which transformers "
                      "reads with the protobuf library: install it (`pip install protobuf`).")


def _check_has_a_vocabulary(tokenizer, name_or_path, remedy: str) -> None:
    """InputError for a tokenizer of special tokens alone: what transformers 5 makes of a tokenizer_config.json
    whose class reads a vocabulary file the folder lacks (a BertTokenizer without vocab.txt), which reads every
    word as unknown."""
    specials = set(tokenizer.all_special_tokens)
    if any(token not in specials for token in tokenizer.get_vocab()):
        return
    held = f" of {Path(name_or_path, 'tokenizer_config.json')}" if Path(name_or_path).is_dir() else ""
    raise InputError(
        f"The tokenizer of {name_or_path} has no vocabulary, only its special tokens "
        f"({', '.join(sorted(specials)) or 'none'}): the {type(tokenizer).__name__}{held} lacks the files it reads "
        f"its vocabulary from (tokenizer.json, or its own, e.g. vocab.txt). {remedy}"
    )


def _unloadable(path: Path, error: Exception, remedy: str) -> InputError:
    reason = f"{type(error).__name__}: {error}" if isinstance(error, KeyError) else str(error).strip()
    return InputError(f"{path} holds a tokenizer that cannot be loaded ({reason or type(error).__name__}). {remedy}")


def check_tokenizer_fits_model(tokenizer, vocab_size: int, name: str | Path) -> None:
    """InputError where `tokenizer` has ids past the model's vocabulary of `vocab_size` (`name`: the model's folder
    or Hub id): another tokenizer than the one it was trained with, whose ids mean other words, and whose larger ids
    failed deep in the model, or in the export, with a traceback. Called where a script loads the two."""
    largest = max(tokenizer.get_vocab().values(), default=-1)
    if largest < vocab_size:
        return
    if Path(name).is_dir():
        remedy = f'Save the tokenizer the model was trained with into {name} (`tokenizer.save_pretrained("{name}")`).'
    else:
        remedy = f'Push the tokenizer the model was trained with to {name} (`tokenizer.push_to_hub("{name}")`).'
    raise InputError(
        f"The tokenizer of {name} has ids up to {largest} and the model a vocabulary of {vocab_size} (ids 0 to "
        f"{vocab_size - 1}): it is not the tokenizer the model learned, whose ids would mean other words. {remedy}"
    )
