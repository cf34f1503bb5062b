"""export_ctranslate2: the CTranslate2 model computes our function and its beam search returns generate()'s output."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from conftest import tiny_config

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.modeling_vanilla_transformer import sinusoidal_encoding

ctranslate2 = pytest.importorskip("ctranslate2")
from hf_vanilla_transformer.export import (  # noqa: E402
    CTranslate2Translator,
    ctranslate2_spec,
    export_ctranslate2,
    placeholder_vocabulary,
)

EOS = 2
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "export_ctranslate2.py"


def export_script():
    spec = importlib.util.spec_from_file_location("export_ctranslate2_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reversal_batch(generator, size=32, max_length=10):
    """Sources of 0..max_length tokens (then </s>, then padding) whose targets are the tokens reversed."""
    lengths = torch.randint(0, max_length + 1, (size,), generator=generator).tolist()
    input_ids = torch.zeros(size, max_length + 1, dtype=torch.long)
    labels = torch.full((size, max_length + 1), -100)
    for row, length in enumerate(lengths):
        tokens = torch.randint(3, 20, (length,), generator=generator)
        input_ids[row, :length], input_ids[row, length] = tokens, EOS
        labels[row, :length], labels[row, length] = tokens.flip(0), EOS
    return input_ids, input_ids.ne(0).long(), labels


def partly_trained(normalize_before, steps=60):
    """A tiny model trained a little on reversal: its translations end at many different lengths, and beams
    disagree, so the length penalty and the stopping rule decide the outputs. One thread: tiny matmuls gain
    nothing from two, and lose much to their synchronisation when the machine is busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(normalize_before, steps)
    finally:
        torch.set_num_threads(threads)


def _train(normalize_before, steps):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(normalize_before=normalize_before, dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        input_ids, attention_mask, labels = reversal_batch(generator)
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


@pytest.fixture(scope="module", params=[False, True], ids=["post-LN", "pre-LN"])
def exported(request, tmp_path_factory):
    model = partly_trained(request.param)
    out_dir = export_ctranslate2(model, tmp_path_factory.mktemp("ct2"))
    return model, out_dir


@pytest.fixture(scope="module")
def sources():
    """Sources of 1..12 tokens and </s>, padded; the last is `</s> </s>`, which the models translate to `</s>`
    alone (CTranslate2 forbids that unless min_decoding_length=0). A source of `</s>` alone is left out:
    CTranslate2 takes it for an empty sentence and returns an empty translation."""
    input_ids, attention_mask, _ = reversal_batch(torch.Generator().manual_seed(5), size=24, max_length=12)
    keep = attention_mask.sum(1) > 1
    input_ids, attention_mask = input_ids[keep][:15], attention_mask[keep][:15]
    empty = torch.zeros(1, input_ids.shape[1], dtype=torch.long)
    empty[0, :2] = EOS
    return torch.cat([input_ids, empty]), torch.cat([attention_mask, empty.ne(0).long()])


def up_to_eos(ids, eos=EOS):
    """generate()'s row without the start token, cut after the first </s> (what follows is padding)."""
    ids = ids[1:]
    return ids[: ids.index(eos) + 1] if eos in ids else ids


def test_writes_a_ctranslate2_model(exported):
    _, out_dir = exported
    files = {path.name for path in out_dir.iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", "generation.json"} <= files
    config = json.loads((out_dir / "config.json").read_text())
    assert config["decoder_start_token"] == "<s>" and config["eos_token"] == "</s>"
    generation = json.loads((out_dir / "generation.json").read_text())
    assert generation["num_beams"] == 4 and generation["length_penalty"] == 0.6


def test_same_log_probabilities(exported, sources):
    """CTranslate2's teacher-forced scores equal our log-softmax, padding included."""
    model, out_dir = exported
    input_ids, attention_mask = sources
    labels = torch.randint(3, 20, (len(input_ids), 7), generator=torch.Generator().manual_seed(3))
    labels[:, -1] = EOS
    translator = CTranslate2Translator(out_dir)
    lengths = attention_mask.sum(1).tolist()
    source = [[translator.tokens[i] for i in row[:length]] for row, length in zip(input_ids.tolist(), lengths)]
    target = [[translator.tokens[i] for i in row[:-1]] for row in labels.tolist()]  # CTranslate2 appends </s>
    scores = translator.translator.score_batch(source, target)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits
    ours = logits.log_softmax(-1).gather(-1, labels[..., None])[..., 0]
    theirs = torch.tensor([result.log_probs for result in scores])
    torch.testing.assert_close(theirs, ours, atol=2e-4, rtol=0)


@pytest.mark.parametrize("num_beams, length_penalty", [(4, 0.6), (4, 0.0), (4, 1.0), (1, 1.0)])
def test_same_translations_as_generate(exported, sources, num_beams, length_penalty):
    """Beam 4 with the paper's length penalty 0.6 and early stopping (our defaults), other penalties, and greedy:
    the same ids."""
    model, out_dir = exported
    input_ids, attention_mask = sources
    options = dict(num_beams=num_beams, length_penalty=length_penalty, max_new_tokens=20)
    ours = model.generate(input_ids, attention_mask=attention_mask, **options)
    theirs = CTranslate2Translator(out_dir).translate(input_ids, attention_mask, **options)
    ours = [up_to_eos(row) for row in ours.tolist()]
    assert theirs == ours
    lengths = {len(row) for row in ours}
    assert len(lengths) >= 4 and [EOS] in ours  # the test exercises stopping at many lengths, the first included


def test_default_options_follow_the_generation_config(exported, sources):
    """Without options: the exported generation config (beam 4, length penalty 0.6), source length + 50 tokens."""
    model, out_dir = exported
    input_ids, attention_mask = sources
    ours = [up_to_eos(row) for row in model.generate(input_ids[:4], attention_mask=attention_mask[:4]).tolist()]
    assert CTranslate2Translator(out_dir).translate(input_ids[:4], attention_mask[:4]) == ours


def left_padded(input_ids, attention_mask):
    """The same batch padded on the left, as a tokenizer with `padding_side="left"` pads it."""
    lengths = attention_mask.sum(1).tolist()
    return (torch.stack([row.roll(row.numel() - n) for row, n in zip(input_ids, lengths)]),
            torch.stack([row.roll(row.numel() - n) for row, n in zip(attention_mask, lengths)]))


@pytest.mark.parametrize("side", ["right", "left"])
def test_left_or_right_padding_translates_as_generate_does(exported, sources, side):
    """Each source is the tokens the attention mask keeps: a left-padded batch was translated from its pad tokens,
    with the sentence's end cut off ("zwei" -> "sixty-five thousand, ...")."""
    model, out_dir = exported
    input_ids, attention_mask = sources if side == "right" else left_padded(*sources)
    assert side == "right" or attention_mask[:, 0].eq(0).any()  # the left-padded batch starts with padding
    options = dict(num_beams=4, length_penalty=0.6, max_new_tokens=20)
    ours = [up_to_eos(row) for row in model.generate(input_ids, attention_mask=attention_mask, **options).tolist()]
    right = [up_to_eos(row) for row in model.generate(sources[0], attention_mask=sources[1], **options).tolist()]
    assert ours == right  # the model reads both paddings alike
    assert CTranslate2Translator(out_dir).translate(input_ids, attention_mask, **options) == ours


def test_position_table_is_the_papers_interleaved_encoding():
    """CTranslate2's built-in encodings are laid out sines first, cosines second: ours are stored explicitly."""
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    spec = ctranslate2_spec(model, placeholder_vocabulary(model.config), max_positions=40)
    for stack in (spec.encoder, spec.decoder):
        torch.testing.assert_close(stack.position_encodings.encodings, sinusoidal_encoding(torch.arange(40), 32))


def test_the_position_table_length_is_a_clear_limit(exported, sources, tmp_path):
    """With --max_positions 8, a long source or translation ended in CTranslate2's own error ("No position encodings
    are defined for positions >= 8"); the length stored beside the export went unread."""
    model, _ = exported
    out_dir = export_ctranslate2(model, tmp_path / "short", max_positions=8)
    input_ids, attention_mask = sources
    short = attention_mask.sum(1) <= 6
    translations = CTranslate2Translator(out_dir).translate(input_ids[short], attention_mask[short], max_new_tokens=20)
    assert all(len(row) <= 7 for row in translations)  # the start token and 7 more fill the 8 positions
    with pytest.raises(ValueError, match=r"A source of \d+ tokens is longer than the export's position table \(8 "
                                         r"positions\): export the model again with a larger --max_positions"):
        CTranslate2Translator(out_dir).translate(input_ids, attention_mask)


def test_int8_export_translates_and_leaves_the_model_alone(exported, sources, tmp_path):
    model, _ = exported
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    out_dir = export_ctranslate2(model, tmp_path / "int8", quantization="int8")
    assert all(torch.equal(tensor, weights[name]) for name, tensor in model.state_dict().items())
    input_ids, attention_mask = sources
    translations = CTranslate2Translator(out_dir).translate(input_ids, attention_mask, max_new_tokens=20)
    assert len(translations) == len(input_ids) and all(0 < len(row) <= 20 for row in translations)


def test_script_exports_a_saved_directory_with_its_tokenizer(tmp_path):
    """scripts/export_ctranslate2.py on a directory from save_pretrained: the tokenizer's tokens become the
    CTranslate2 vocabulary, and the tokenizer is saved beside the model."""
    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    texts = ["ein Hund spielt im Park", "a dog plays in the park", "zwei Kinder lesen", "two children read"] * 5
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    config = tiny_config(vocab_size=len(tokenizer), **special_token_ids(tokenizer))
    model = VanillaTransformerForConditionalGeneration(config).eval()
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    out_dir = export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2")])
    assert (out_dir / "tokenizer" / "tokenizer.json").exists()
    vocabulary = json.loads((out_dir / "shared_vocabulary.json").read_text())
    assert vocabulary[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert vocabulary == [tokenizer.convert_ids_to_tokens(i) for i in range(len(tokenizer))]
    batch = tokenizer(["ein Hund spielt", "two children"], return_tensors="pt", padding=True)
    ours = model.generate(**batch, num_beams=4, max_new_tokens=8)
    theirs = CTranslate2Translator(out_dir).translate(batch["input_ids"], batch["attention_mask"], max_new_tokens=8)
    assert theirs == [up_to_eos(row) for row in ours.tolist()]


def test_a_model_object_is_exported_with_the_tokenizer_of_its_folder_or_a_warning(tmp_path, caplog):
    """A model object was exported with placeholder tokens (<id_N>) and no tokenizer, without a word, though the
    folder it was loaded from held one: CTranslate2's translate_batch then gave '<id_390>'s."""
    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["ein Hund spielt", "a dog plays"] * 5, vocab_size=270)
    VanillaTransformerForConditionalGeneration(tiny_config(vocab_size=len(tokenizer), **special_token_ids(tokenizer))
                                               ).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    model = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "model")
    out_dir = export_ctranslate2(model, tmp_path / "ct2")
    assert (out_dir / "tokenizer" / "tokenizer.json").exists()
    vocabulary = json.loads((out_dir / "shared_vocabulary.json").read_text())
    assert vocabulary == [tokenizer.convert_ids_to_tokens(i) for i in range(len(tokenizer))]
    with caplog.at_level("WARNING", logger="hf_vanilla_transformer.export"):
        out_dir = export_ctranslate2(VanillaTransformerForConditionalGeneration(tiny_config()), tmp_path / "bare")
    assert not (out_dir / "tokenizer").exists() and "the export's tokens are placeholders (<id_N>)" in caplog.text


def test_refusals(tmp_path):
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    with pytest.raises(ValueError, match="99 distinct tokens"):
        export_ctranslate2(model, tmp_path / "a", vocabulary=["x"] * 99)
    with pytest.raises(TypeError, match="expects a VanillaTransformerForConditionalGeneration"):
        export_ctranslate2(object(), tmp_path / "b")
    model.config.activation_function = "tanh"
    with pytest.raises(ValueError, match="no `tanh` activation"):
        export_ctranslate2(model, tmp_path / "c")


def test_a_tokenizer_larger_than_the_models_vocabulary_is_one_line(tmp_path, monkeypatch, capsys):
    """A tokenizer saved into a model's folder with ids past the model's vocabulary (another one than the model
    learned) was a ValueError's traceback, status 1: now the one line of a user's mistake, status 2."""
    from hf_vanilla_transformer.errors import DEBUG_VARIABLE, run_command
    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

    VanillaTransformerForConditionalGeneration(tiny_config()).save_pretrained(tmp_path / "model")
    tokenizer = train_bpe_tokenizer(["ein Hund", "a dog"], vocab_size=260)
    tokenizer.save_pretrained(tmp_path / "model")
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2")]),
                    name="export_ctranslate2.py")
    assert exit_info.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == (  # after any loading bars
        f"export_ctranslate2.py: error: The tokenizer of {tmp_path / 'model'} has ids up to {len(tokenizer) - 1} and "
        "the model a vocabulary of 99 (ids 0 to 98): it is not the tokenizer the model learned, whose ids would mean "
        f"other words. Save the tokenizer the model was trained with into {tmp_path / 'model'} "
        f"(`tokenizer.save_pretrained(\"{tmp_path / 'model'}\")`).")
    assert not (tmp_path / "ct2").exists()


@pytest.mark.parametrize("damaged, message", [
    ("tokenizer.json", "tokenizer"),  # was exported with placeholder tokens <id_N>, status 0
    ("config.json", "Cannot load a model's config from"),  # was an OSError's traceback
    ("model.safetensors", "Cannot load the model from"),  # was an OSError's traceback too
])
def test_a_damaged_file_of_the_folder_is_one_line_and_no_export(tmp_path, monkeypatch, capsys, damaged, message):
    from hf_vanilla_transformer.errors import DEBUG_VARIABLE, run_command
    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["ein Hund", "a dog"], vocab_size=300)
    VanillaTransformerForConditionalGeneration(tiny_config(vocab_size=len(tokenizer), **special_token_ids(
        tokenizer))).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / damaged).write_text('{"version": "1.0", "trunc')
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2")]),
                    name="export_ctranslate2.py")
    error = capsys.readouterr().err.splitlines()[-1]
    assert exit_info.value.code == 2 and error.startswith("export_ctranslate2.py: error: ") and message in error
    assert not (tmp_path / "ct2").exists()


def test_only_an_earlier_export_is_ever_replaced(tmp_path):
    """The output folder is deleted and rewritten only when it holds an earlier export: the model's own folder, a
    folder of runs or a file is refused, and left as it was."""
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    model.save_pretrained(tmp_path / "runs" / "model")
    before = sorted(p.name for p in (tmp_path / "runs" / "model").iterdir())
    for target in (tmp_path / "runs" / "model", tmp_path / "runs"):
        with pytest.raises(FileExistsError, match="is not a CTranslate2 export .* not overwritten"):
            export_ctranslate2(tmp_path / "runs" / "model", target)
    assert sorted(p.name for p in (tmp_path / "runs" / "model").iterdir()) == before
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="is a file"):
        export_ctranslate2(model, tmp_path / "file")
    export_ctranslate2(model, tmp_path / "ct2")
    (tmp_path / "ct2" / "model.bin").write_bytes(b"stale")
    export_ctranslate2(model, tmp_path / "ct2")  # an earlier export: replaced
    assert (tmp_path / "ct2" / "model.bin").stat().st_size > 5
    with pytest.raises(FileExistsError, match="exists; pass force=True"):
        export_ctranslate2(model, tmp_path / "ct2", force=False)
    (tmp_path / "empty").mkdir()
    export_ctranslate2(model, tmp_path / "empty", force=False)  # an empty folder is not in the way
    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

    train_bpe_tokenizer(["ein Hund", "a dog"], vocab_size=260).save_pretrained(tmp_path / "runs" / "model")
    with pytest.raises(InputError, match="not overwritten"):  # the script's one-line error, exit status 2
        export_script().main([str(tmp_path / "runs" / "model"), str(tmp_path / "runs")])
    with pytest.raises(InputError, match="exists and --no_overwrite is given"):
        export_script().main([str(tmp_path / "runs" / "model"), str(tmp_path / "ct2"), "--no_overwrite"])


def test_no_overwrite_help_says_what_it_does(tmp_path, capsys):
    """--no_overwrite said "fail if output_dir exists" but wrote into an existing empty folder: the help now says
    that a missing or empty folder is written to, and anything in it is refused."""
    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["ein Hund", "a dog"], vocab_size=260)
    config = tiny_config(vocab_size=len(tokenizer), **special_token_ids(tokenizer))
    VanillaTransformerForConditionalGeneration(config).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    with pytest.raises(SystemExit):
        export_script().parse_arguments(["--help"])
    assert "fail if output_dir holds anything" in " ".join(capsys.readouterr().out.split())
    (tmp_path / "empty").mkdir()
    export_script().main([str(tmp_path / "model"), str(tmp_path / "empty"), "--no_overwrite"])
    assert (tmp_path / "empty" / "model.bin").is_file()


def test_an_unreachable_hub_id_is_one_sentence(tmp_path, monkeypatch):
    """huggingface_hub's error for an id it cannot fetch spans lines ("Got: ConnectError ...\\nAn error happened
    ..."): the script says it in one line, as translate.py does."""
    import huggingface_hub

    from hf_vanilla_transformer import hub
    from hf_vanilla_transformer.errors import InputError

    def offline(repo_id, **kwargs):
        raise OSError("Got: ConnectError: [Errno -2] Name or service not known\nAn error happened while trying to "
                      "locate the files on the Hub.")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    monkeypatch.setattr(hub, "hub_unreachable", lambda: False)  # no switch to HF_HUB_OFFLINE for later tests
    with pytest.raises(InputError) as error:
        export_script().main(["someone/no-such-model", str(tmp_path / "ct2")])
    assert "\n" not in str(error.value) and "someone/no-such-model" in str(error.value)
    assert not (tmp_path / "ct2").exists()


def test_a_hub_model_is_downloaded_without_the_weights_of_other_frameworks(tmp_path, monkeypatch):
    """An opus-mt repository holds TensorFlow, Flax and Rust weights beside PyTorch's: the whole repository was
    downloaded for an export that reads the PyTorch weights alone."""
    from fnmatch import fnmatch

    import huggingface_hub

    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["ein Hund", "a dog"], vocab_size=300)
    VanillaTransformerForConditionalGeneration(tiny_config(vocab_size=len(tokenizer), **special_token_ids(
        tokenizer))).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    asked = {}
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo_id, **kwargs: asked.update(kwargs) or str(tmp_path / "model"))
    export_script().main(["someone/model", str(tmp_path / "ct2")])
    repository = ["config.json", "generation_config.json", "model.safetensors", "pytorch_model.bin", "source.spm",
                  "vocab.json", "tokenizer.json", "tf_model.h5", "flax_model.msgpack", "rust_model.ot", "README.md"]
    fetched = [name for name in repository if any(fnmatch(name, pattern) for pattern in asked["allow_patterns"])]
    assert fetched == repository[:7]
    # a branch, tag or commit, as translate.py takes it (a version pushed with --revision could not be exported)
    from hf_vanilla_transformer.errors import InputError

    export_script().main(["someone/model", str(tmp_path / "ct2-v2"), "--revision", "v2"])
    assert asked["revision"] == "v2"
    with pytest.raises(InputError, match="--revision v2 picks a version of a Hub repo, but .* is a folder here"):
        export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2-v3"), "--revision", "v2"])


def test_a_converted_marian_model_with_an_output_bias_translates_as_generate_does(tmp_path):
    """opus-mt models have a trained final_logits_bias and generate up to max_length 512 (not source + 50): the
    export carries both (without the bias every logit was off by it)."""
    from test_conversion import make_marian

    from hf_vanilla_transformer import from_marian

    marian = make_marian()
    with torch.no_grad():
        marian.final_logits_bias.copy_(torch.randn_like(marian.final_logits_bias) * 4)
    marian.generation_config.max_length = 9
    model = from_marian(marian).eval()
    model.generation_config.early_stopping = True  # CTranslate2's only stopping rule
    model.generation_config.forced_eos_token_id = None  # Marian's; CTranslate2 has no such option
    out_dir = export_ctranslate2(model, tmp_path / "ct2", vocabulary=[f"t{i}" for i in range(99)])
    generator = torch.Generator().manual_seed(4)
    input_ids = torch.randint(1, 98, (6, 7), generator=generator)
    input_ids[:, -1] = 0  # Marian's </s>
    for num_beams in (1, 4):
        ours = model.generate(input_ids, num_beams=num_beams, length_penalty=1.0, pad_token_id=98)
        assert ours.shape[1] == 9  # max_length, not source length + 50
        ours = [row[1:][: row[1:].index(0) + 1] if 0 in row[1:] else row[1:] for row in ours.tolist()]
        theirs = CTranslate2Translator(out_dir).translate(input_ids, num_beams=num_beams, length_penalty=1.0)
        assert theirs == ours, num_beams
    settings = json.loads((out_dir / "generation.json").read_text())
    (out_dir / "generation.json").write_text(json.dumps({**settings, "num_beams": 4, "early_stopping": False}))
    with pytest.warns(UserWarning, match="early_stopping=False"):  # Marian's own, which CTranslate2 cannot follow
        CTranslate2Translator(out_dir)


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory):
    """A saved MarianMTModel with its MarianTokenizer (sentencepiece), as an opus-mt model comes."""
    pytest.importorskip("sentencepiece")
    from test_marian_finetuning import make_opus_mt_dir

    return make_opus_mt_dir(tmp_path_factory.mktemp("opus"))


def test_script_converts_a_saved_marian_model_and_keeps_its_tokenizer(opus_mt, tmp_path, caplog):
    """An opus-mt model's folder was a 20-line traceback ("This config is for model type 'marian'"): the model is
    converted with from_marian, which the script says, and exported with the folder's own MarianTokenizer; CTranslate2
    translates as MarianMTModel.generate() does under the settings it follows."""
    from transformers import MarianMTModel, MarianTokenizer

    with caplog.at_level("WARNING"):
        out_dir = export_script().main([str(opus_mt), str(tmp_path / "ct2")])
    assert f"{opus_mt} is a MarianMTModel: converted with from_marian" in caplog.text
    assert {"source.spm", "target.spm", "vocab.json"} <= {path.name for path in (out_dir / "tokenizer").iterdir()}
    tokenizer = MarianTokenizer.from_pretrained(out_dir / "tokenizer")
    assert tokenizer.get_vocab() == MarianTokenizer.from_pretrained(opus_mt).get_vocab()
    # a typed "</s>" is text, as the pipeline reads it (`reads_special_tokens_as_text`), not Marian's end token 0
    assert tokenizer.split_special_tokens and tokenizer("A dog </s> runs.")["input_ids"].count(0) == 1
    vocabulary = json.loads((out_dir / "shared_vocabulary.json").read_text())
    assert vocabulary == [tokenizer.convert_ids_to_tokens(i) for i in range(len(tokenizer))]
    assert vocabulary[0] == "</s>" and vocabulary[-1] == "<pad>"
    marian = MarianMTModel.from_pretrained(opus_mt).eval()
    batch = tokenizer(["A dog runs.", "Two children are playing in the park."], return_tensors="pt", padding=True)
    ours = marian.generate(**batch, max_new_tokens=8, early_stopping=True, forced_eos_token_id=None,
                           renormalize_logits=True)
    with pytest.warns(UserWarning, match="early_stopping=False .* forced_eos_token_id=0"):  # Marian's own
        translator = CTranslate2Translator(out_dir)
    theirs = translator.translate(batch["input_ids"], batch["attention_mask"], max_new_tokens=8)
    assert theirs == [up_to_eos(row, eos=0) for row in ours.tolist()]
    from_object = export_ctranslate2(marian, tmp_path / "from_object", vocabulary=vocabulary)  # a MarianMTModel too
    assert (from_object / "model.bin").read_bytes() == (out_dir / "model.bin").read_bytes()


def test_script_refuses_another_kind_of_model_in_one_message(tmp_path):
    """Another kind of model than ours or Marian's (a BART) was the same traceback: now one sentence that names
    CTranslate2's own converter, and no output folder."""
    from transformers import BartConfig, BartForConditionalGeneration

    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

    sizes = dict(d_model=16, encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=32)
    config = BartConfig(vocab_size=260, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                        decoder_attention_heads=2, **sizes)
    BartForConditionalGeneration(config).save_pretrained(tmp_path / "bart")
    train_bpe_tokenizer(["ein Hund", "a dog"], vocab_size=260).save_pretrained(tmp_path / "bart")
    with pytest.raises(InputError, match="holds a 'bart' model .*: export it with CTranslate2's own converter"):
        export_script().main([str(tmp_path / "bart"), str(tmp_path / "ct2")])
    assert not (tmp_path / "ct2").exists()


def test_a_marian_models_generation_config_is_followed_or_warned_about(tmp_path):
    """Marian's generation config never generates <pad> (bad_words_ids [[pad]], renormalize_logits), which CTranslate2
    put in its beams: the export carries it, and CTranslate2 suppresses it. Marian's forced_eos_token_id (</s> at the
    length limit), which CTranslate2 cannot follow, is warned about: the translations that end before the limit are
    generate()'s."""
    from test_conversion import make_marian

    from hf_vanilla_transformer import from_marian

    marian = make_marian()
    generator = torch.Generator().manual_seed(12)
    with torch.no_grad():
        for name, parameter in marian.named_parameters():
            if parameter.dim() > 1 and "embed_positions" not in name:  # large enough for translations to vary
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
        bias = torch.randn(99, generator=generator) * 0.3
        bias[98], bias[0] = 4.0, 3.0  # <pad> the likeliest token at most steps; </s> likely enough to end early
        marian.final_logits_bias.copy_(bias)
    # Marian's generation config, with a shorter limit and CTranslate2's early stopping
    marian.generation_config.update(num_beams=4, max_length=30, bad_words_ids=[[98]], forced_eos_token_id=0,
                                    renormalize_logits=True, early_stopping=True)
    out_dir = export_ctranslate2(from_marian(marian), tmp_path / "ct2", vocabulary=[f"t{i}" for i in range(99)])
    settings = json.loads((out_dir / "generation.json").read_text())
    assert settings["bad_words_ids"] == [[98]] and settings["forced_eos_token_id"] == 0
    input_ids = torch.randint(1, 98, (12, 9), generator=generator)
    input_ids[:, -1] = 0  # Marian's </s>
    ours = [up_to_eos(row, eos=0) for row in marian.generate(input_ids).tolist()]
    with pytest.warns(UserWarning) as warned:
        translator = CTranslate2Translator(out_dir)
    message = " ".join(str(warning.message) for warning in warned)
    assert "forced_eos_token_id=0 (generate() ends a translation that reaches the length limit with t0" in message
    assert "early_stopping" not in message and "renormalize_logits" not in message
    theirs = translator.translate(input_ids)
    ended = [i for i, row in enumerate(ours) if len(row) < 29]
    assert [theirs[i] for i in ended] == [ours[i] for i in ended]
    assert len({len(ours[i]) for i in ended}) >= 4 and len(ended) < len(ours)  # lengths vary; some reach the limit
    for i in set(range(len(ours))) - set(ended):  # there generate() forced </s>, which CTranslate2 cannot
        assert ours[i][-1] == 0 and len(theirs[i]) == 29 and theirs[i][-1] != 0
    assert sum(98 in row for row in translator.translate(input_ids, suppress_sequences=None)) >= 6  # as before
    (out_dir / "generation.json").write_text(json.dumps({**settings, "renormalize_logits": False}))
    with pytest.warns(UserWarning, match="bad_words_ids without renormalize_logits"):  # generate() scores otherwise
        CTranslate2Translator(out_dir)


def test_the_exported_tokenizer_reads_a_typed_end_token_as_text_as_the_pipeline_does(tmp_path):
    """A model whose tokenizer_config.json has no split_special_tokens (saved before this package wrote it, as
    runs/multi30k-cpu): the pipeline reads "</s>" typed in a source as text (`reads_special_tokens_as_text`), but
    the exported tokenizer read it as the end token, and CTranslate2 translated the source cut there."""
    from transformers import AutoTokenizer

    from hf_vanilla_transformer.pipeline_translation import reads_special_tokens_as_text
    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(["ein Hund </s> spielt", "a dog plays"] * 5, vocab_size=300)
    config = tiny_config(vocab_size=len(tokenizer), **special_token_ids(tokenizer))
    VanillaTransformerForConditionalGeneration(config).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    settings = tmp_path / "model" / "tokenizer_config.json"
    settings.write_text(json.dumps({key: value for key, value in json.loads(settings.read_text()).items()
                                    if key != "split_special_tokens"}))
    saved = AutoTokenizer.from_pretrained(tmp_path / "model")
    assert not saved.split_special_tokens and reads_special_tokens_as_text(saved)
    source = "ein Hund </s> spielt"
    as_the_pipeline_reads = saved(source, split_special_tokens=True)["input_ids"]
    assert as_the_pipeline_reads.count(tokenizer.eos_token_id) == 1  # only the end token it appends
    out_dir = export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2")])
    assert json.loads((out_dir / "tokenizer" / "tokenizer_config.json").read_text())["split_special_tokens"] is True
    exported = AutoTokenizer.from_pretrained(out_dir / "tokenizer")  # as the script's docstring loads it
    assert exported(source)["input_ids"] == as_the_pipeline_reads
    assert exported.decode(exported(source)["input_ids"], skip_special_tokens=True) == source
    unchanged = export_ctranslate2(tmp_path / "model", tmp_path / "ct2-again")  # the library does the same
    assert AutoTokenizer.from_pretrained(unchanged / "tokenizer")(source)["input_ids"] == as_the_pipeline_reads


def test_a_missing_ctranslate2_is_one_line_naming_the_export_extra(tmp_path, monkeypatch):
    """The script said `pip install -e ".[export]"` (only right in a checkout), the library `pip install
    ctranslate2`: both now say the same, and the extra they name is the package's."""
    import re
    import sys

    from hf_vanilla_transformer.errors import InputError

    pyproject = (SCRIPT.parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^name = "hf-vanilla-transformer"$', pyproject, re.M)
    assert re.search(r'^export = \["ctranslate2\b', pyproject, re.M)  # the extra named brings ctranslate2
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed
    expected = ("Exporting needs CTranslate2: install it (`pip install ctranslate2`, or the package's extra: "
                '`pip install "hf-vanilla-transformer[export]"`).')
    with pytest.raises(InputError) as error:
        export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2")])
    assert str(error.value) == expected
    with pytest.raises(ImportError) as error:
        export_ctranslate2(VanillaTransformerForConditionalGeneration(tiny_config()), tmp_path / "ct2")
    assert str(error.value) == expected and not (tmp_path / "ct2").exists()


def test_a_position_table_past_any_sentence_is_refused_before_the_model_loads(tmp_path, capsys):
    """--max_positions 100000000 was killed for memory (status 137, no message)."""
    with pytest.raises(SystemExit) as exit_info:
        export_script().main([str(tmp_path / "model"), str(tmp_path / "ct2"), "--max_positions", "100000000"])
    assert exit_info.value.code == 2 and "--max_positions must be at most 100,000" in capsys.readouterr().err
