"""Tests for hf_vanilla_transformer.tokenization: shared byte-level BPE, eos post-processing, save/reload."""

import json
import re

import pytest
from datasets import Dataset
from transformers import AutoTokenizer

from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer, translation_texts

CORPUS = [
    "Ein Mann fährt mit dem Fahrrad über die Straße.",
    "A man rides his bike across the street.",
    "Zwei Hunde spielen im Schnee, während es schneit.",
    "Two dogs are playing in the snow while it is snowing.",
    "Die Kinder essen Äpfel und trinken Saft.",
    "The children eat apples and drink juice.",
] * 20
SENTENCES = [
    "Ein Mann fährt mit dem Fahrrad über die Straße.",
    "Two dogs are playing in the snow.",
    "Größere Übungen: „Öl“ kostet 3,50 € – oder nicht?",
    "It's a well-known fact (isn't it?) that 1 + 1 = 2.",
    "Unseen characters stay intact: Ærø, 東京, naïve café.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


def test_special_tokens_have_fixed_ids(tokenizer):
    assert [tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token, tokenizer.unk_token] == [
        "<pad>", "<s>", "</s>", "<unk>"
    ]
    assert special_token_ids(tokenizer) == {
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 1
    }


@pytest.mark.parametrize("sentence", SENTENCES)
def test_decode_encode_round_trips_without_unk(tokenizer, sentence):
    ids = tokenizer(sentence)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == sentence


def test_eos_is_appended_to_sources_and_targets_and_nothing_prepended(tokenizer):
    source = tokenizer(["Ein Mann.", "Zwei Hunde spielen."])["input_ids"]
    target = tokenizer(text_target=["A man."])["input_ids"]
    for ids in source + target:
        assert ids[-1] == tokenizer.eos_token_id and ids.count(tokenizer.eos_token_id) == 1
        assert tokenizer.bos_token_id not in ids


def test_training_learns_merges_for_frequent_words(tokenizer):
    assert len(tokenizer("Fahrrad")["input_ids"]) < len("Fahrrad".encode()) + 1
    assert len(tokenizer) <= 400


def test_save_pretrained_reloads_with_auto_tokenizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert special_token_ids(reloaded) == special_token_ids(tokenizer)
    batch = reloaded(SENTENCES, text_target=SENTENCES)
    assert batch["input_ids"] == tokenizer(SENTENCES)["input_ids"] == batch["labels"]
    assert reloaded.batch_decode(batch["input_ids"], skip_special_tokens=True) == SENTENCES


def test_translation_texts_yields_both_sides():
    dataset = Dataset.from_dict({"translation": [{"de": "eins", "en": "one"}, {"de": "zwei", "en": "two"}]})
    assert list(translation_texts(dataset, "de", "en", batch_size=1)) == ["eins", "one", "zwei", "two"]


def test_the_tokenizer_learns_from_the_text_the_model_is_given():
    """A corpus in NFD (as macOS writes files) taught merges of decomposed umlauts, while the sources are tokenized in
    NFC: every "Männer" of the sources came apart into bytes. Sources are normalized as the model gets them (NFC,
    invisible characters and extra whitespace gone), targets' whitespace alone, as the model writes the corpus."""
    import unicodedata

    german = ["Männer spielen Fußball.", "Zwei Männer gehen.", "Die Männer lächeln.", "Ein Mädchen läuft."] * 20
    pairs = [{"de": unicodedata.normalize("NFD", text) + "\u200b  ", "en": " Men\u0301  play. "} for text in german]
    texts = list(translation_texts(Dataset.from_dict({"translation": pairs}), "de", "en"))
    assert texts[:2] == [german[0], "Men\u0301 play."]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300, min_frequency=2)
    assert "ĠMÃ¤nner" in tokenizer.get_vocab()  # " Männer" as one token, in the NFC the sources are tokenized in


def test_special_token_ids_explain_missing_tokens(tokenizer):
    broken = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer)
    broken.pad_token = None
    with pytest.raises(ValueError, match="pad_token_id"):
        special_token_ids(broken)


LOAD_WITHOUT_THE_PACKAGE = """
import json, sys
sys.modules["hf_vanilla_transformer"] = None  # this environment cannot import the package
from transformers import AutoTokenizer, PreTrainedTokenizerFast
folder = sys.argv[1]
loaded = [AutoTokenizer.from_pretrained(folder, trust_remote_code=True),
          PreTrainedTokenizerFast.from_pretrained(folder)]
print(json.dumps([tokenizer("zweiundvierzig").input_ids for tokenizer in loaded]))
"""


def test_a_saved_model_folder_loads_its_tokenizer_without_the_package_prompt_or_warning(tmp_path):
    """As the README's no-package snippet: no "Do you wish to run the custom code? [y/N]" (stdin is closed, so a
    prompt would also end in a fallback and a warning) and nothing at all on stderr."""
    import json
    import os
    import subprocess
    import sys

    from conftest import REPO
    from tiny_translation_model import make_tiny_model_dir

    folder = make_tiny_model_dir(tmp_path / "model")
    expected = AutoTokenizer.from_pretrained(folder)("zweiundvierzig").input_ids
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_THE_PACKAGE, str(folder)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "custom code" not in proc.stdout + proc.stderr and proc.stderr == ""
    assert json.loads(proc.stdout) == [expected, expected]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert 'tokenizer = AutoTokenizer.from_pretrained("runs/numbers", trust_remote_code=True)' in readme


@pytest.mark.parametrize("texts, vocab_size, options, error, message", [
    ("data/train.en", 4000, {}, TypeError, "an iterable of strings.*got one str"),  # trained on its characters
    (b"a corpus", 4000, {}, TypeError, "got one bytes"),
    (["a b c"] * 3, 100, {}, ValueError, "vocab_size must be an integer of at least 260"),  # silently 260
    (["a b c"] * 3, -5, {}, ValueError, "at least 260"),  # OverflowError inside tokenizers
    (["a b c"] * 3, 300, {"min_frequency": -1}, ValueError, "min_frequency must be an integer >= 0"),
    (None, 300, {}, TypeError, "an iterable of strings.*got one NoneType"),
    # items that are not strings: the tokenizers library's TypeError named neither the item nor its place
    (["a b", None], 300, {}, TypeError, r"takes strings, got None as sentence 1\.$"),
    (["a b", b"c d"], 300, {}, TypeError, r"got bytes b'c d' as sentence 1 \(decode bytes first"),
    ([1, 2], 300, {}, TypeError, "got int 1 as sentence 0"),
    # nothing to learn from: a tokenizer of the bytes alone, without a word
    (iter([]), 300, {}, ValueError, "given no text to learn from: no sentences"),
    (["", " \n"], 300, {}, ValueError, "given no text to learn from: all 2 sentences are empty"),
])
def test_train_bpe_tokenizer_refuses_what_it_would_train_wrongly_on(texts, vocab_size, options, error, message):
    with pytest.raises(error, match=message):
        train_bpe_tokenizer(texts, vocab_size, **options)


def plain_tokenizer(**special_tokens):
    """A word-level tokenizer as a `tokenizers` user builds one: no post-processor (so no </s> appended), and only
    the given special tokens set."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<pad>", "<s>", "</s>", "<unk>", "a", "man", "ein", "Mann"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", **special_tokens)


def test_missing_special_tokens_are_named_with_how_to_add_them():
    """A tokenizer without pad/bos/eos was a ValueError traceback (exit 1) once all the data was tokenized."""
    from hf_vanilla_transformer.errors import InputError

    with pytest.raises(InputError) as error:
        special_token_ids(plain_tokenizer(pad_token="<pad>", eos_token="</s>"), "toks/t5like")
    assert str(error.value) == (
        "The tokenizer toks/t5like has no bos token (bos_token_id), which a new model starts each translation from "
        '(its decoder_start_token_id). Add it and save the tokenizer, e.g. `tok = AutoTokenizer.from_pretrained('
        '"toks/t5like"); tok.add_special_tokens({"bos_token": "<s>"}); tok.save_pretrained("toks/t5like")` (a token '
        "its vocabulary lacks is added to it), and give that folder.")
    with pytest.raises(InputError, match=r"has no pad token \(pad_token_id\), which pads batches, nor bos token .*, "
                                         r'nor eos token .*\{"pad_token": "<pad>", "bos_token": "<s>", "eos_token": '
                                         r'"</s>"\}'):
        special_token_ids(plain_tokenizer())


def test_a_bert_tokenizer_is_told_to_use_its_own_tokens_and_a_config_without_vocabulary_is_named(tmp_path):
    """A BERT tokenizer was told to add "</s>" and "<s>" (new tokens, with no meaning learnt) beside its [SEP] and
    [CLS]; a folder of a BertTokenizer config alone loaded as five special tokens, every word unknown, and was then
    refused for lacking eos and bos."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.tokenization import load_tokenizer

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.train_from_iterator(CORPUS, trainers.WordPieceTrainer(
        vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    bert = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    with pytest.raises(InputError, match=re.escape('tok.add_special_tokens({"bos_token": "[CLS]", "eos_token": '
                                                   '"[SEP]"})')):
        special_token_ids(bert, "toks/bert")
    (tmp_path / "config_only").mkdir()
    (tmp_path / "config_only" / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer"}')
    with pytest.raises(InputError, match=r"has no vocabulary, only its special tokens \(\[CLS\], \[MASK\], \[PAD\], "
                                         r"\[SEP\], \[UNK\]\): the BertTokenizer of .*tokenizer_config\.json lacks "
                                         r"the files it reads its vocabulary from"):
        load_tokenizer(tmp_path / "config_only")


@pytest.mark.parametrize("puts_bos_first", [False, True])
def test_a_tokenizer_that_does_not_append_eos_is_given_a_post_processor_saved_with_it(tmp_path, caplog,
                                                                                      puts_bos_first):
    """Trained on targets without </s> (a `tokenizers`-built tokenizer given with --tokenizer_name), a model never
    learnt to stop: its translations ran on to the length limit."""
    import logging

    from hf_vanilla_transformer.tokenization import append_eos, ends_with_eos

    tokenizer = plain_tokenizer(pad_token="<pad>", bos_token="<s>", eos_token="</s>", add_bos_token=puts_bos_first)
    assert tokenizer("a man")["input_ids"] == [1] * puts_bos_first + [4, 5] and not ends_with_eos(tokenizer)
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tokenization"):
        append_eos(tokenizer, "toks/plain")
    assert caplog.messages == [
        "The tokenizer toks/plain did not end what it encodes with its end token '</s>', so a model trained on it "
        "would never learn to stop: it now appends it (a TemplateProcessing post-processor, saved with the run's "
        "tokenizer, so that the saved model translates as it was trained)."]
    tokenizer.save_pretrained(tmp_path)
    for each in (tokenizer, AutoTokenizer.from_pretrained(tmp_path)):
        assert each("a man")["input_ids"] == [1] * puts_bos_first + [4, 5, 2]
        assert each(text_target="ein Mann")["input_ids"] == [1] * puts_bos_first + [6, 7, 2]
    caplog.clear()
    append_eos(tokenizer, "toks/plain")  # one that appends eos is left as it is
    assert caplog.messages == [] and tokenizer("a")["input_ids"] == [1] * puts_bos_first + [4, 2]


def test_load_tokenizer_takes_a_tokenizer_file(tmp_path):
    """`--tokenizer_name DIR/tokenizer.json` was "Repo id must be in the form 'repo_name' or 'namespace/repo_name'"."""
    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.tokenization import load_tokenizer

    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300, min_frequency=1)
    tokenizer.save_pretrained(tmp_path / "saved")
    from_file = load_tokenizer(tmp_path / "saved" / "tokenizer.json")
    assert special_token_ids(from_file) == special_token_ids(tokenizer)  # with its folder's tokenizer_config.json
    tokenizer.backend_tokenizer.save(str(tmp_path / "mine.json"))  # what a `tokenizers` user saves
    assert load_tokenizer(tmp_path / "mine.json")(SENTENCES[0])["input_ids"] == tokenizer(SENTENCES[0])["input_ids"]
    # a bare tokenizers file names no special tokens: those of this package's that its vocabulary holds are taken
    assert special_token_ids(load_tokenizer(tmp_path / "mine.json")) == special_token_ids(tokenizer)
    (tmp_path / "config.json").write_text('{"d_model": 512}')
    with pytest.raises(InputError, match=r"config\.json is a file that is not a tokenizer \(.*\): give the folder "
                                         r"that holds the tokenizer \(tokenizer\.json, tokenizer_config\.json\)"):
        load_tokenizer(tmp_path / "config.json")
    (tmp_path / "saved" / "tokenizer.json").write_text('{"version": "1.0", "trunc')  # the advice names the folder
    with pytest.raises(InputError, match=re.escape(f"`tokenizer.save_pretrained('{tmp_path / 'saved'}')`")):
        load_tokenizer(tmp_path / "saved" / "tokenizer.json")
    # a bare file saved under the usual name, alone in its folder, is read as a bare file (it was refused for
    # "no pad token" while the same file as mine.json trained), given as the file or as its folder
    (tmp_path / "bare").mkdir()
    tokenizer.backend_tokenizer.save(str(tmp_path / "bare" / "tokenizer.json"))
    for given in (tmp_path / "bare", tmp_path / "bare" / "tokenizer.json"):
        assert special_token_ids(load_tokenizer(given)) == special_token_ids(tokenizer)
    # JSON that tokenizers cannot read as a tokenizer, beside a config: one message, not a KeyError's traceback
    saved = json.loads((tmp_path / "mine.json").read_text())
    del saved["added_tokens"]
    tokenizer.save_pretrained(tmp_path / "damaged")
    (tmp_path / "damaged" / "tokenizer.json").write_text(json.dumps(saved))
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'damaged'} holds a tokenizer that cannot be loaded "
                                                   "(KeyError: 'added_tokens')")):
        load_tokenizer(tmp_path / "damaged")
    # a tokenizer model's files alone, as `tokenizers`' save_model writes them: it was told it had a tokenizer config
    (tmp_path / "model_files").mkdir()
    tokenizer.backend_tokenizer.model.save(str(tmp_path / "model_files"))
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'model_files'} holds merges.txt, vocab.json but no "
                                                   "tokenizer.json or tokenizer_config.json")):
        load_tokenizer(tmp_path / "model_files")


GERMAN_TARGETS = [
    "Ein kleines Kind fotografiert mit einer Kamera auf einem Stativ.",
    "Zwei Hunde spielen im Schnee, während es schneit.",
    "Ein Mädchen rutscht eine rot-weiße Rutsche herunter.",
    "Die Kinder essen Äpfel und trinken Saft.",
    "Ein Mann in Jeans lädt Baumwolle auf einen Lastwagen.",
    "Größere Übungen: „Öl“ kostet 3,50 € – oder nicht?",
]


def quicktour_tokenizer(pre_tokenizer=None, decoder=None, model=None):
    """A BPE tokenizer built as in the `tokenizers` quicktour: a Whitespace pre-tokenizer and no decoder (or the
    given ones), trained on `CORPUS` and `GERMAN_TARGETS`, special tokens in this package's order."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(model or models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizer or pre_tokenizers.Whitespace()
    if decoder is not None:
        backend.decoder = decoder
    alphabet = pre_tokenizers.ByteLevel.alphabet() if isinstance(pre_tokenizer, pre_tokenizers.ByteLevel) else []
    trainer = (trainers.WordPieceTrainer if isinstance(model, models.WordPiece) else trainers.BpeTrainer)(
        vocab_size=len(alphabet) + 120, special_tokens=["<pad>", "<s>", "</s>", "<unk>"], initial_alphabet=alphabet,
        show_progress=False)  # too few merges for whole words: the words of the German targets are split
    backend.train_from_iterator(CORPUS + GERMAN_TARGETS * 5, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


@pytest.mark.parametrize("folding, warned", [("Lowercase", True), ("StripAccents", True), ("NFKC", False),
                                             (None, False)])
def test_a_tokenizer_that_lowercases_or_strips_accents_is_warned_about(folding, warned, caplog):
    """Such a tokenizer was taken without a word: the model then translated "ein madchen schlaft.", and scored
    against the references as written (BLEU 26 for a perfect lowercase copy of Multi30k's validation)."""
    from tokenizers import decoders, normalizers, pre_tokenizers

    from hf_vanilla_transformer.tokenization import check_decodes_to_text

    tokenizer = quicktour_tokenizer(pre_tokenizers.ByteLevel(), decoders.ByteLevel())
    if folding is not None:
        steps = [normalizers.NFD(), normalizers.StripAccents()] if folding == "StripAccents" else \
            [getattr(normalizers, folding)()]
        tokenizer.backend_tokenizer.normalizer = normalizers.Sequence(steps)
    with caplog.at_level("WARNING"):
        check_decodes_to_text(tokenizer, GERMAN_TARGETS, "toks/folding")
    assert ("The tokenizer toks/folding lowercases or strips accents from what it reads" in caplog.text) == warned
    caplog.clear()
    with caplog.at_level("WARNING"):  # this package's own tokenizers (NFC) keep both
        check_decodes_to_text(train_bpe_tokenizer(CORPUS + GERMAN_TARGETS, vocab_size=300, min_frequency=1),
                              GERMAN_TARGETS, "ours")
    assert "lowercases or strips accents" not in caplog.text


def test_a_tokenizer_that_does_not_give_text_back_is_refused():
    """A quicktour tokenizer given with --tokenizer_name (no decoder; a Whitespace pre-tokenizer, which drops the
    spaces) was accepted: translations read "lä d t Baum wo l le", and a perfect model scored BLEU 30."""
    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.tokenization import check_decodes_to_text

    tokenizer = quicktour_tokenizer()
    decoded = tokenizer.decode(tokenizer(text_target=GERMAN_TARGETS[4])["input_ids"], skip_special_tokens=True)
    assert decoded != GERMAN_TARGETS[4]  # spaces between the subwords
    with pytest.raises(InputError) as error:
        check_decodes_to_text(tokenizer, GERMAN_TARGETS * 3, "toks/quicktour.json")
    message = str(error.value)
    assert message.startswith("The tokenizer toks/quicktour.json does not give text back: ")
    assert f"{repr(GERMAN_TARGETS[3])} -> " in message  # the shortest sentence that does not come back
    assert message.endswith(
        ", and so would the model's translations. Its Whitespace pre-tokenizer drops the spaces, which no decoder "
        "brings back: train it again with a ByteLevel pre-tokenizer and decoders.ByteLevel() (or a Metaspace one and "
        "decoders.Metaspace()), or leave --tokenizer_name out to train a tokenizer on the data.")
    assert "\n" not in message
    from tokenizers import decoders, pre_tokenizers

    metaspace = quicktour_tokenizer(pre_tokenizers.Metaspace(), decoders.Fuse())  # a decoder, the wrong one
    with pytest.raises(InputError, match=r"does not give text back: 18 of 18 .* Give it the decoder that matches "
                                         r"its pre-tokenizer \(decoders\.ByteLevel\(\) for a ByteLevel one, "
                                         r"decoders\.Metaspace\(\) for a Metaspace one\) and save it, or leave "):
        check_decodes_to_text(metaspace, GERMAN_TARGETS * 3, "toks/fused")
    assert isinstance(metaspace.backend_tokenizer.decoder, decoders.Fuse)  # a decoder given is not replaced


@pytest.mark.parametrize("kind", ["package", "package lowercasing", "byte-level", "metaspace", "unknown words"])
def test_tokenizers_that_give_text_back_pass(kind, caplog):
    """This package's tokenizers (the built-in corpus' lowercases and spells "ä" as "ae": its normalizer's text
    counts as given back, and its targets have no capitals), a byte-level or Metaspace one with its decoder, and
    texts the tokenizer reads as `<unk>` (the unknown-token warning's business) pass without a word."""
    import logging

    from tokenizers import decoders, normalizers, pre_tokenizers

    from hf_vanilla_transformer.number_words import number_words_normalizer
    from hf_vanilla_transformer.tokenization import check_decodes_to_text

    texts = GERMAN_TARGETS * 3
    if kind.startswith("package"):
        normalizer = number_words_normalizer() if kind == "package lowercasing" else None
        tokenizer = train_bpe_tokenizer(CORPUS + GERMAN_TARGETS, 400, min_frequency=1, normalizer=normalizer)
        if normalizer is not None:  # its targets, English number words, have no capitals: nothing to warn about
            texts = ["twenty-three", "one hundred and five", "nineteen thousand, two hundred and seventeen"] * 3
    elif kind == "byte-level":
        tokenizer = quicktour_tokenizer(pre_tokenizers.ByteLevel(add_prefix_space=True), decoders.ByteLevel())
    elif kind == "metaspace":
        tokenizer = quicktour_tokenizer(pre_tokenizers.Metaspace(), decoders.Metaspace())
        tokenizer.backend_tokenizer.normalizer = normalizers.NFKC()
    else:
        tokenizer = plain_tokenizer(pad_token="<pad>", bos_token="<s>", eos_token="</s>")
        texts = ["ein Mann", "ein Hund", "a dog", "Mann", "ein Mann"]  # "Hund", "dog" and "d": unknown
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tokenization"):
        check_decodes_to_text(tokenizer, texts, "toks/fine")
    assert caplog.messages == []
    if kind == "package lowercasing":
        assert tokenizer.decode(tokenizer(text_target="Die Kinder essen Äpfel")["input_ids"],
                                skip_special_tokens=True) == "die kinder essen aepfel"


def test_an_opus_mt_tokenizer_passes(tmp_path):
    """A MarianTokenizer (sentencepiece, a slow tokenizer: no `tokenizers` normalizer to ask)."""
    pytest.importorskip("sentencepiece")
    from test_marian_finetuning import PAIRS, make_opus_mt_dir

    from hf_vanilla_transformer.tokenization import _decoding_failures, check_decodes_to_text, load_tokenizer

    tokenizer = load_tokenizer(make_opus_mt_dir(tmp_path / "opus"))
    targets = [de for _, de in PAIRS]
    checked, other, spacing = _decoding_failures(tokenizer, targets)
    assert checked > 0 and other == spacing == []
    check_decodes_to_text(tokenizer, targets, "opus-mt-en-de")


def test_a_sentencepiece_model_is_told_what_transformers_needs_to_read_it(tmp_path):
    """A folder of a SentencePiece model (spiece.model, tokenizer.model) without protobuf installed got transformers'
    advice to install tiktoken; tokenizer.model alone was "no tokenizer"; a .model file given as the tokenizer was
    "not a tokenizer (stream did not contain valid UTF-8)"."""
    sentencepiece = pytest.importorskip("sentencepiece")
    from transformers.utils import is_protobuf_available

    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.tokenization import load_tokenizer

    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS))
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"), model_prefix=str(tmp_path / "m"), vocab_size=60, pad_id=0, bos_id=1,
        eos_id=2, unk_id=3, pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>", unk_piece="<unk>", minloglevel=2)
    with pytest.raises(InputError, match=r"m\.model is a SentencePiece model, which transformers reads from a "
                                         r"folder: give the folder it came from, or put it alone in a folder as "
                                         r"tokenizer\.model and give that"):
        load_tokenizer(tmp_path / "m.model")
    for name in ("spiece.model", "tokenizer.model"):
        (tmp_path / name.split(".")[0]).mkdir()
        (tmp_path / "m.model").rename(tmp_path / name.split(".")[0] / name)
        if name == "spiece.model":
            (tmp_path / "spiece" / "tokenizer_config.json").write_text('{"tokenizer_class": "T5Tokenizer"}')
        if is_protobuf_available():  # transformers reads it
            assert load_tokenizer(tmp_path / name.split(".")[0]).eos_token == "</s>"
        else:
            with pytest.raises(InputError, match=rf"is a SentencePiece model \({re.escape(name)}\), which transformers "
                                                 r"reads with the protobuf library: install it \(`pip install "):
                load_tokenizer(tmp_path / name.split(".")[0])
        (tmp_path / name.split(".")[0] / name).rename(tmp_path / "m.model")


@pytest.mark.parametrize("kind", ["byte-level", "metaspace", "wordpiece"])
def test_a_tokenizer_without_the_decoder_its_pre_tokenizer_calls_for_is_given_it(kind, tmp_path, caplog):
    """Without a decoder, a byte-level tokenizer decodes "ĠHund", a Metaspace one "▁Hund", a WordPiece one
    "Hund ##e": the one decoder that gives the text back is set, with a warning, and saved with the tokenizer."""
    import logging

    from tokenizers import models, pre_tokenizers

    from hf_vanilla_transformer.tokenization import check_decodes_to_text

    tokenizer = {
        "byte-level": lambda: quicktour_tokenizer(pre_tokenizers.ByteLevel(add_prefix_space=False)),
        "metaspace": lambda: quicktour_tokenizer(pre_tokenizers.Metaspace()),
        "wordpiece": lambda: quicktour_tokenizer(pre_tokenizers.WhitespaceSplit(),
                                                 model=models.WordPiece(unk_token="<unk>")),
    }[kind]()
    assert tokenizer.backend_tokenizer.decoder is None
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tokenization"):
        check_decodes_to_text(tokenizer, GERMAN_TARGETS * 3, "toks/nodecoder")
    assert len(caplog.messages) == 1 and caplog.messages[0].startswith("The tokenizer toks/nodecoder has no decoder")
    expected = {"byte-level": "ByteLevel decoder that its ByteLevel pre-tokenizer",
                "metaspace": "Metaspace decoder that its Metaspace pre-tokenizer",
                "wordpiece": "WordPiece decoder that its model's continuing-subword prefix '##'"}[kind]
    assert f"It now decodes with the {expected} calls for" in caplog.messages[0]
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    for text in GERMAN_TARGETS:
        assert reloaded.decode(reloaded(text_target=text)["input_ids"], skip_special_tokens=True) == text


def word_level_tokenizer(texts, pre_tokenizer, normalizer=None):
    """A word-level `tokenizers` tokenizer with `pre_tokenizer` (and `normalizer`) and no decoder, trained on
    `texts`."""
    from tokenizers import Tokenizer, models, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizer
    if normalizer is not None:
        backend.normalizer = normalizer
    backend.train_from_iterator(texts, trainers.WordLevelTrainer(
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"], show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def test_a_tokenizer_that_changes_only_the_spaces_at_punctuation_is_warned_about(caplog):
    """A word-level tokenizer with a Whitespace pre-tokenizer decodes "Straße ." for "Straße.": no decoder can put
    the spaces back, but the words are the words, so a warning, not a refusal. So for a character-level Chinese
    tokenizer, which decodes "我 爱 你 。" for "我爱你。" (was refused)."""
    import logging

    from tokenizers import Regex, normalizers, pre_tokenizers

    from hf_vanilla_transformer.tokenization import check_decodes_to_text

    tokenizer = word_level_tokenizer(GERMAN_TARGETS, pre_tokenizers.Whitespace())
    chinese = ["我爱你。", "今天天气很好。", "他们在公园里玩。"]
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tokenization"):
        characters = word_level_tokenizer(chinese, pre_tokenizers.Split(Regex("."), behavior="isolated"))
        check_decodes_to_text(characters, chinese, "zh-chars")
        assert "The tokenizer zh-chars decodes 3 of 3 training targets with other spaces" in caplog.text
        assert "'我爱你。' -> '我 爱 你 。'" in caplog.text
        caplog.clear()  # BERT's Chinese normalizer pads each character with spaces: its form does not excuse them
        bert = word_level_tokenizer(chinese, pre_tokenizers.BertPreTokenizer(),
                                    normalizers.BertNormalizer(handle_chinese_chars=True, lowercase=False))
        check_decodes_to_text(bert, chinese, "bert-zh")
        assert "The tokenizer bert-zh decodes 3 of 3 training targets with other spaces" in caplog.text
        caplog.clear()
        check_decodes_to_text(tokenizer, GERMAN_TARGETS, "toks/words")
    assert caplog.messages == [
        "The tokenizer toks/words decodes 6 of 6 training targets with other spaces at punctuation or between "
        "Chinese or Japanese characters, e.g. "
        "'Die Kinder essen Äpfel und trinken Saft.' -> 'Die Kinder essen Äpfel und trinken Saft .', and so will the "
        "model's translations read (and be scored). A tokenizer whose pre-tokenizer keeps the spaces (ByteLevel, "
        "Metaspace) gives text back as it is; leaving --tokenizer_name out trains one on the data."]


def test_the_decoding_sample_is_spread_over_the_training_targets():
    from datasets import DatasetDict

    from hf_vanilla_transformer.tokenization import decoding_sample

    rows = [{"de": f"Satz {i}", "en": "" if i % 7 == 0 else f"sentence {i}"} for i in range(1000)]
    data = DatasetDict(train=Dataset.from_dict({"translation": rows}),
                       validation=Dataset.from_dict({"translation": rows[:3]}))
    sample = decoding_sample(data, "en")
    assert sample == decoding_sample(data, "en")  # the same rows each time
    assert sample[0] == "sentence 5" and sample[-1] == "sentence 995" and len(sample) == 200 - 29  # blank left out
    assert decoding_sample(DatasetDict(validation=data["validation"]), "de") == ["Satz 0", "Satz 1", "Satz 2"]
    assert decoding_sample(None, "en") == []


def test_the_training_script_refuses_a_tokenizer_that_does_not_give_text_back(tmp_path):
    """End to end, as /tmp's reproduction: `--tokenizer_name quicktour.json` (a `Tokenizer.save` file) is refused
    before any training, in one message."""
    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.training import main

    quicktour_tokenizer().backend_tokenizer.save(str(tmp_path / "quicktour.json"))
    english = [line for line in CORPUS[:6] if line.startswith(("A ", "Two", "The"))]
    for split in ("train", "val"):
        (tmp_path / f"{split}.en").write_text("\n".join(english * 4) + "\n", encoding="utf-8")
        (tmp_path / f"{split}.de").write_text("\n".join(GERMAN_TARGETS[:3] * 4) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"The tokenizer .*quicktour\.json does not give text back: 12 of 12 "):
        main(["--output_dir", str(tmp_path / "run"), "--tokenizer_name", str(tmp_path / "quicktour.json"),
              "--train_prefix", str(tmp_path / "train"), "--validation_prefix", str(tmp_path / "val"),
              "--source_lang", "en", "--target_lang", "de", "--d_model", "32", "--layers", "1",
              "--attention_heads", "2", "--ffn_dim", "64", "--max_steps", "1", "--disable_tqdm", "true"])
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_the_decoding_check_leaves_the_tokenizers_settings_as_they_were():
    """transformers turns a backend's truncation and padding off for a call without them, and the run saves its
    tokenizer after the check: a tokenizer.json's settings must come through it."""
    from hf_vanilla_transformer.tokenization import check_decodes_to_text

    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300, min_frequency=1)
    tokenizer.backend_tokenizer.enable_truncation(max_length=50)
    tokenizer.backend_tokenizer.enable_padding(length=60, pad_id=0, pad_token="<pad>")
    before = tokenizer.backend_tokenizer.truncation, tokenizer.backend_tokenizer.padding
    check_decodes_to_text(tokenizer, CORPUS[:6], "toks/settings")
    assert (tokenizer.backend_tokenizer.truncation, tokenizer.backend_tokenizer.padding) == before
    assert tokenizer.backend_tokenizer.decoder is not None
