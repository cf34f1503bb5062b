"""Fine-tuning an opus-mt model with the training script, as a user who starts from one does: a MarianMTModel folder
with its MarianTokenizer (sentencepiece, the only tokenizer transformers v5 has for it) and a trained, non-zero
output bias. The script converts the model (`from_marian`), tokenizes with the slow tokenizer, and saves this
package's model; another kind of model is refused."""

import json
from pathlib import Path

import pytest
import torch

from hf_vanilla_transformer.errors import InputError
from tiny_translation_model import SENTENCES
from test_train_translation import run_main, write_lines

spm = pytest.importorskip("sentencepiece")
from transformers import AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel, MarianTokenizer  # noqa: E402

PAIRS = [("A dog runs across the meadow.", "Ein Hund läuft über die Wiese."),
         ("Two children are playing in the park.", "Zwei Kinder spielen im Park."),
         ("A woman is reading a book.", "Eine Frau liest ein Buch."),
         ("The man is riding a bicycle.", "Der Mann fährt mit dem Fahrrad.")]


def make_opus_mt_dir(path: Path) -> Path:
    """A tiny opus-mt-like folder: sentencepiece vocabulary, Marian's ids (</s> 0, <unk> 1, <pad> last, the decoder
    start), its generation config (beam 4, max_length 512, bad_words_ids [[pad]]), and a non-zero output bias."""
    path.mkdir(parents=True, exist_ok=True)
    text = path / "text.txt"
    text.write_text("\n".join(SENTENCES * 4 + [s for pair in PAIRS for s in pair]) + "\n")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(path / "sp"), vocab_size=90, model_type="bpe",
                                   bos_id=-1, eos_id=2, unk_id=1, pad_id=-1, minloglevel=2)
    pieces = spm.SentencePieceProcessor(model_file=str(path / "sp.model"))
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(pieces.get_piece_size()):
        vocab.setdefault(pieces.id_to_piece(i), len(vocab))
    vocab["<pad>"] = pad = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    tokenizer = MarianTokenizer(str(path / "sp.model"), str(path / "sp.model"), str(path / "vocab.json"),
                                source_lang="en", target_lang="de")  # as opus-mt-en-de's records them
    model_dir = path / "opus-mt-en-de"
    tokenizer.save_pretrained(model_dir)
    torch.manual_seed(0)
    marian = MarianMTModel(MarianConfig(
        vocab_size=pad + 1, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=512,
        activation_function="swish", pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=0, scale_embedding=True, share_encoder_decoder_embeddings=True))
    with torch.no_grad():
        marian.final_logits_bias.normal_()
    marian.generation_config.update(num_beams=4, max_length=512, bad_words_ids=[[pad]])
    marian.save_pretrained(model_dir)
    return model_dir


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory):
    return make_opus_mt_dir(tmp_path_factory.mktemp("opus"))


def test_a_marian_model_and_its_sentencepiece_tokenizer_are_fine_tuned(opus_mt, tmp_path, capsys, caplog):
    """Was a TypeError ("needs a fast (tokenizers-backed) tokenizer") before any training; the run now converts
    the model, counts truncated sentences with the slow tokenizer, and saves this package's model with the bias."""
    for split in ("train", "val"):
        write_lines(tmp_path / f"{split}.en", [en for en, _ in PAIRS] * 3)
        write_lines(tmp_path / f"{split}.de", [de for _, de in PAIRS] * 3)
    out = tmp_path / "tuned"
    log = run_main(
        "--output_dir", out, "--model_name_or_path", opus_mt, "--train_prefix", tmp_path / "train",
        "--validation_prefix", tmp_path / "val", "--source_lang", "en", "--target_lang", "de", "--max_steps", "2",
        "--per_device_train_batch_size", "4", "--max_source_length", "17", "--generation_max_length", "8",
        "--eval_strategy", "no", "--save_strategy", "no", capsys=capsys,
    ) + caplog.text
    assert "is a MarianMTModel: converted with from_marian" in log
    lengths = [len(MarianTokenizer.from_pretrained(opus_mt)(en)["input_ids"]) for en, _ in PAIRS]
    assert 17 in lengths and max(lengths) > 17  # one sentence at the limit, whole, and one cut
    assert f"Truncated {3 * sum(length > 17 for length in lengths)} of 12 train sources" in log
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "vanilla_transformer" and config["output_bias"] is True
    tuned = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert tuned.lm_head.bias is not None and "eval_bleu" in json.loads((out / "all_results.json").read_text())
    assert isinstance(AutoModelForSeq2SeqLM.from_pretrained(out).generate(
        MarianTokenizer.from_pretrained(out)(["A dog runs."], return_tensors="pt")["input_ids"], max_new_tokens=3),
        torch.Tensor)


def test_another_kind_of_model_is_refused(tmp_path, capsys):
    """A BART folder trained silently under this package's card and code: one message now."""
    from transformers import BartConfig, BartForConditionalGeneration

    from hf_vanilla_transformer.training import this_packages_model

    bart = BartForConditionalGeneration(BartConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1,
                                                   encoder_attention_heads=2, decoder_attention_heads=2,
                                                   encoder_ffn_dim=32, decoder_ffn_dim=32))
    with pytest.raises(InputError, match="is a 'bart' model .*not the Transformer of this package"):
        this_packages_model(bart, "facebook/bart-tiny", "sdpa")


def test_a_missing_tokenizer_library_is_one_message(opus_mt, monkeypatch):
    """Without sentencepiece, transformers' ImportError (four lines, a traceback at the command line) became an
    InputError saying what to install."""
    from hf_vanilla_transformer import tokenization

    def from_pretrained(*args, **kwargs):
        raise ImportError("\nMarianTokenizer requires the SentencePiece library but it was not found in your "
                          "environment. Check out the instructions on the\ninstallation page of its repo: ...")

    monkeypatch.setattr(tokenization.AutoTokenizer, "from_pretrained", from_pretrained)
    with pytest.raises(InputError, match=r"needs SentencePiece: install it \(`pip install sentencepiece`"):
        tokenization.load_tokenizer(opus_mt)


def test_a_marian_tokenizer_without_its_sentencepiece_files_is_one_message(opus_mt, tmp_path):
    """transformers failed with `TypeError: expected str, bytes or os.PathLike object, not NoneType`."""
    import shutil

    from hf_vanilla_transformer.tokenization import load_tokenizer

    broken = tmp_path / "broken"
    shutil.copytree(opus_mt, broken)
    (broken / "target.spm").unlink()
    with pytest.raises(InputError, match="holds a MarianTokenizer config without target.spm"):
        load_tokenizer(broken)


def test_translate_py_translates_an_opus_mt_folder_as_marian_does_and_quantizes_it(opus_mt, monkeypatch, capsys):
    """translate.py converts the MarianMTModel (the same function): the same translations as Marian's own
    generate(), and --quantize int8, which a MarianMTModel has no layers for, works."""
    import io
    import sys

    from tiny_translation_model import load_script

    from hf_vanilla_transformer import packed_linear

    sources = ["A dog runs across the meadow.", "Two children are playing."]
    marian, tokenizer = MarianMTModel.from_pretrained(opus_mt).eval(), MarianTokenizer.from_pretrained(opus_mt)
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    expected = [" ".join(text.split()) for text in tokenizer.batch_decode(
        marian.generate(**batch, max_new_tokens=8), skip_special_tokens=True)]
    script = load_script("translate")
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(sources) + "\n"))
    script.main([str(opus_mt), "-q", "--max_new_tokens", "8", "--batch_size", "2"])
    assert capsys.readouterr().out.splitlines() == expected
    if packed_linear.INT8_AVAILABLE:
        monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(sources) + "\n"))
        script.main([str(opus_mt), "-q", "--max_new_tokens", "8", "--quantize", "int8"])
        assert len(capsys.readouterr().out.splitlines()) == 2


def test_translate_py_keeps_a_marian_model_it_cannot_convert_within_its_positions(opus_mt, tmp_path, monkeypatch,
                                                                                  capsys):
    """A MarianMTModel with separate vocabularies translates as it is, with a table of positions: a source or a
    translation longer than it was an IndexError traceback. Sources are cut there and translations end there; a
    --max_new_tokens past it and --quantize int8 (this package's model only) are refused in one line each."""
    import io
    import shutil
    import sys

    from tiny_translation_model import load_script

    kept = tmp_path / "separate-vocabularies"
    shutil.copytree(opus_mt, kept)
    marian = MarianMTModel.from_pretrained(opus_mt)
    config = marian.config.to_dict() | {"share_encoder_decoder_embeddings": False, "max_position_embeddings": 12}
    torch.manual_seed(0)
    MarianMTModel(MarianConfig(**config)).save_pretrained(kept)
    script = load_script("translate")
    long_line = " ".join(["A dog runs across the meadow."] * 6)
    monkeypatch.setattr(sys, "stdin", io.StringIO(long_line + "\nA dog.\n"))
    script.main([str(kept), "-q"])
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert "cannot take over" in captured.err
    assert "it translates as it is, sources cut at its 12 positions" in captured.err
    for flags, message in ((["--max_new_tokens", "12"], "has 12 positions, so its translations end by 11 new tokens"),
                           (["--quantize", "int8"], "--quantize int8 quantizes this package's model, and")):
        monkeypatch.setattr(sys, "stdin", io.StringIO("A dog.\n"))
        with pytest.raises(SystemExit) as exit_info:
            script.main([str(kept), "-q", *flags])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_scoring_an_opus_mt_model_the_other_way_round_is_warned_about(opus_mt, caplog):
    """An opus-mt model records its languages in its tokenizer's config only (no card inputs of this package)."""
    from types import SimpleNamespace

    from hf_vanilla_transformer.training import warn_about_another_direction

    warn_about_another_direction(str(opus_mt), SimpleNamespace(source_lang="de", target_lang="en"), training=False)
    assert "was trained to translate en -> de, and this run gives --source_lang de --target_lang en (the other " \
           "way round)" in caplog.text
    caplog.clear()
    warn_about_another_direction(str(opus_mt), SimpleNamespace(source_lang="en", target_lang="de"), training=False)
    assert "was trained to translate" not in caplog.text
    # opus-mt tokenizers record three-letter codes (eng, zho) or groups (mul): no warning for the same languages
    import json

    config = json.loads((opus_mt / "tokenizer_config.json").read_text())
    for recorded in (("eng", "deu"), ("en", "mul")):
        (opus_mt / "tokenizer_config.json").write_text(json.dumps({**config, "source_lang": recorded[0],
                                                                   "target_lang": recorded[1]}))
        warn_about_another_direction(str(opus_mt), SimpleNamespace(source_lang="en", target_lang="de"),
                                     training=False)
        assert "was trained to translate" not in caplog.text
    (opus_mt / "tokenizer_config.json").write_text(json.dumps(config))

