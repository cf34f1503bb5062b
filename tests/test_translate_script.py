"""scripts/translate.py: a file or stdin, batched beam search, output in input order, clear errors."""

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig, pipeline

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer import packed_linear, pipeline_translation
from hf_vanilla_transformer.errors import DEBUG_VARIABLE, InputError, run_command
from hf_vanilla_transformer.pipeline_translation import TASK
from tiny_translation_model import SOURCES, make_tiny_model_dir

REPO = Path(__file__).resolve().parents[1]
LINES = [SOURCES[2], SOURCES[0], "", SOURCES[1], SOURCES[3], SOURCES[0]]


def without_cut_short(err: str) -> str:
    """Standard error without the warning that translations stopped at the length limit, which every one of the tiny
    model's does: its random weights never end one before its max_new_tokens 6."""
    return "".join(line for line in err.splitlines(keepends=True) if "stopped at the length limit" not in line)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_model_dir(tmp_path_factory.mktemp("translate") / "model")


@pytest.fixture(scope="module")
def expected(model_dir):
    """Each line translated on its own by the pipeline (4 beams), blank lines blank."""
    translator = pipeline(TASK, model=str(model_dir))
    return [" ".join(translator(line)[0]["translation_text"].split()) if line else "" for line in LINES]


@pytest.fixture(scope="module")
def script():
    """scripts/translate.py's code: its main(argv), and the functions it is made of."""
    from hf_vanilla_transformer import file_translation

    return file_translation


def test_file_to_output_file_in_input_order(script, model_dir, expected, tmp_path, capsys):
    source = tmp_path / "source.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    script.main([str(model_dir), str(source), "-o", str(tmp_path / "out.txt"), "--batch_size", "2"])
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == expected
    assert "sentence" in capsys.readouterr().err  # the progress bar


def test_stdin_to_stdout(script, model_dir, expected, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(LINES)))
    script.main([str(model_dir), "--quiet", "--batch_size", "3"])
    captured = capsys.readouterr()
    assert captured.out.splitlines() == expected and without_cut_short(captured.err) == ""


def test_a_byte_order_mark_and_windows_line_ends_are_not_text(script, tmp_path, monkeypatch):
    """What Windows editors save: a UTF-8 byte-order mark and CRLF. The mark once went into the first sentence
    (the numbers model translated "zwei" after it as "one thousand, three hundred and two")."""
    text = "\ufeff" + "\r\n".join(LINES) + "\r\n"
    (tmp_path / "windows.txt").write_bytes(text.encode("utf-8"))
    assert script.read_lines(str(tmp_path / "windows.txt")) == LINES
    monkeypatch.setattr(sys, "stdin", io.StringIO(text, newline=""))
    assert script.read_lines("-") == LINES


def test_cr_line_ends_are_refused_with_how_to_convert(script, tmp_path, monkeypatch):
    """Old Mac files end lines with a lone "\r": read at line feeds, three sentences were translated as one, with
    exit status 0 (the training data's reader already refused such a file)."""
    for text in ("\r".join(LINES) + "\r", "\r".join(LINES[:2]) + "\r"):  # two lines: the last "\r" is an end too
        (tmp_path / "mac.txt").write_bytes(text.encode("utf-8"))
        with pytest.raises(InputError, match=r"mac\.txt uses CR line ends .*line 1 .*tr '\\r' '\\n' < \S*mac\.txt"):
            script.read_lines(str(tmp_path / "mac.txt"))
        monkeypatch.setattr(sys, "stdin", io.StringIO(text, newline=""))
        with pytest.raises(InputError, match=r"Standard input uses CR line ends .*tr '\\r' '\\n' < input\.txt \|"):
            script.read_lines("-")


def test_lines_are_split_at_line_feeds_only(script, tmp_path, monkeypatch):
    """A line separator (U+2028), a form feed, NEL or a lone carriage return inside a line does not split it: one
    translation for each line, in line with the input (str.splitlines split at each, making 8 lines of 5)."""
    lines = ["A dog runs.", "", "Two men\u2028are talking.", "A cat\x0csleeps.", "NEL\x85here, a lone\rreturn."]
    text = "\n".join(lines) + "\n"
    (tmp_path / "odd.txt").write_bytes(text.encode("utf-8"))
    assert script.read_lines(str(tmp_path / "odd.txt")) == lines
    monkeypatch.setattr(sys, "stdin", io.StringIO(text, newline=""))
    assert script.read_lines("-") == lines
    (tmp_path / "last.txt").write_bytes(b"no final line feed")
    assert script.read_lines(str(tmp_path / "last.txt")) == ["no final line feed"]
    piped = subprocess.run([sys.executable, "-c", "from hf_vanilla_transformer.file_translation import read_lines; "
                            "print(read_lines('-'))"],
                           input=text.encode("utf-8"), capture_output=True, check=True)
    assert piped.stdout.decode("utf-8").strip() == repr(lines)  # real standard input: bytes, not universal newlines


def test_translations_stopped_at_the_length_limit_are_named(script, model_dir, tmp_path, capsys):
    """`--max_new_tokens 3` cut every translation at 3 tokens, and a model repeating itself ran to source length + 50,
    with exit status 0 and nothing on standard error (the training script's scoring warns of them)."""
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    script.main([str(model_dir), str(tmp_path / "in.txt"), "-q", "--max_new_tokens", "3", "--batch_size", "2"])
    assert capsys.readouterr().err == (
        "translate.py: warning: 5 of the 5 translations stopped at the length limit (--max_new_tokens 3) before the "
        "end token (lines 1, 2, 4, 5, 6): cut short, or a model repeating itself. Raise --max_new_tokens where "
        "translations need more tokens; a model that repeats itself needs more training.\n")
    translator = pipeline(TASK, model=str(model_dir), num_beams=1)
    translator.model.generation_config.suppress_tokens = [2]  # never ends; the blank line is not translated
    cut = []
    pipeline_translation.translate_sentences(translator, ["", SOURCES[0], SOURCES[1]], cut_short=cut,
                                             max_new_tokens=3)
    assert sorted(cut) == [1, 2]
    translator.model.generation_config.suppress_tokens = None
    translator.model.generation_config.forced_eos_token_id = 2  # an end token at the limit: ended
    cut = []
    pipeline_translation.translate_sentences(translator, [SOURCES[0], SOURCES[1]], cut_short=cut, max_new_tokens=3)
    assert cut == []


def test_generation_options_pass_through(script, model_dir, monkeypatch, capsys):
    greedy = pipeline(TASK, model=str(model_dir), num_beams=1, max_new_tokens=3)
    monkeypatch.setattr(sys, "stdin", io.StringIO(SOURCES[1]))
    script.main([str(model_dir), "-q", "--num_beams", "1", "--max_new_tokens", "3"])
    assert capsys.readouterr().out == " ".join(greedy(SOURCES[1])[0]["translation_text"].split()) + "\n"


def test_max_new_tokens_replaces_the_models_max_length_without_a_warning(script, tmp_path, monkeypatch, capsys,
                                                                         caplog):
    """A converted Marian model's generation config holds max_length 512: --max_new_tokens beside it made transformers
    warn "Both `max_new_tokens` and `max_length` seem to have been set" at every batch."""
    model_dir = make_tiny_model_dir(tmp_path / "model", max_new_tokens=None)
    config = GenerationConfig.from_pretrained(model_dir)
    config.max_length = 40
    config.save_pretrained(model_dir)
    monkeypatch.setattr(sys, "stdin", io.StringIO(SOURCES[1]))
    script.main([str(model_dir), "-q", "--num_beams", "1", "--max_new_tokens", "3"])
    greedy = pipeline(TASK, model=str(model_dir), num_beams=1, max_new_tokens=3, max_length=None)
    assert capsys.readouterr().out == " ".join(greedy(SOURCES[1])[0]["translation_text"].split()) + "\n"
    assert "seem to have been set" not in caplog.text


@pytest.mark.skipif(not packed_linear.INT8_AVAILABLE, reason="no fbgemm int8 kernels here")
def test_quantize_int8(script, model_dir, monkeypatch, capsys, tmp_path):
    """--quantize int8 translates with the pipeline's model after quantize_int8, as a user would by hand."""
    translator = pipeline(TASK, model=str(model_dir))
    packed_linear.quantize_int8(translator.model)
    int8_expected = [" ".join(translator(line)[0]["translation_text"].split()) if line else "" for line in LINES]
    quantized = []
    quantize = packed_linear.quantize_int8
    monkeypatch.setattr(script, "quantize_int8", lambda model: quantized.append(model) or quantize(model))
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(LINES)))
    script.main([str(model_dir), "-q", "--quantize", "int8", "--device", "cpu"])
    assert capsys.readouterr().out.splitlines() == int8_expected
    assert len(quantized) == 1 and all(layer.int8 for layer in quantized[0].modules() if hasattr(layer, "int8"))
    # a model saved in bf16 loads in bf16, which int8 is not made from (it translated in bf16, without a word)
    bf16 = tmp_path / "bf16"
    AutoModelForSeq2SeqLM.from_pretrained(model_dir, dtype=torch.bfloat16).save_pretrained(bf16)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(bf16)
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(LINES)))
    script.main([str(bf16), "-q", "--quantize", "int8", "--device", "cpu"])
    capsys.readouterr()
    assert quantized[-1].dtype == torch.float32 and quantized[-1].model.shared.weight.dtype == torch.float32
    # the README's command, without --device, on a machine with a GPU: the CPU, which int8 runs on (it was refused)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(LINES)))
    script.main([str(model_dir), "-q", "--quantize", "int8"])
    assert capsys.readouterr().out.splitlines() == int8_expected and quantized[-1].device.type == "cpu"


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda d, t: [str(t / "missing_model"), str(t / "in.txt")], "No model directory at"),
        (lambda d, t: [str(t), str(t / "in.txt")], "not a saved model"),
        (lambda d, t: [str(d), str(t / "missing.txt")], "Cannot read"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--batch_size", "0"], "--batch_size must be at least 1"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--quantize", "int8", "--device", "cuda"], "runs on the CPU"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--num_beams", "0"], "--num_beams must be at least 1, got 0"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--max_new_tokens", "-1"], "--max_new_tokens must be at least 1"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--length_penalty", "nan"], "--length_penalty must be a finite"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--device", "gpu"], "--device gpu: not a device name"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--device", "meta"], "--device meta: the meta device holds shapes"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--revision", "v1"], "--revision v1 picks a version of a Hub repo"),
        (lambda d, t: [str(d), str(t / "in.txt"), "--device", f"cuda:{torch.cuda.device_count()}"], "--device cuda:"),
        (lambda d, t: [str(d), str(t / "in.txt"), "-o", str(t)], "is a folder: give a file name"),
        (lambda d, t: [str(d), str(t / "in.txt"), "-o", str(t / "no" / "out.txt")], "does not exist; create it"),
        (lambda d, t: [str(d), str(t / "in.txt"), "-o", str(t / "." / "in.txt")], "is the input file"),
        (lambda d, t: [str(d), str(t / "model.bin")], "model.bin is not a text file (line 1 holds NUL bytes)"),
        (lambda d, t: [str(t / "ct2"), str(t / "in.txt")], "ct2 is a CTranslate2 export (model.bin), which "
         "transformers cannot load: translate with ctranslate2.Translator"),
    ],
)
def test_errors(script, model_dir, tmp_path, capsys, make_args, message):
    (tmp_path / "in.txt").write_text("Ein Satz.\n")
    (tmp_path / "model.bin").write_bytes(b"PK\x03\x04\x00\x00\xff\xfe\n")
    (tmp_path / "ct2").mkdir()  # what export_ctranslate2.py writes (and a tokenizer/ folder)
    for name in ("config.json", "model.bin", "shared_vocabulary.json"):
        (tmp_path / "ct2" / name).write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        script.main(make_args(model_dir, tmp_path))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "in.txt").read_text() == "Ein Satz.\n"  # never replaced by its translation


def test_lines_of_several_sentences_are_warned_about(script, model_dir, tmp_path, capsys):
    """A paragraph on one line came back as one short sentence, the rest left out without a word; two sentences
    too (the Multi30k model left "A dog runs in the park." out of "A man is sleeping. A dog runs in the park.")."""
    paragraph = "Ein Hund läuft. Die Sonne scheint! Zwei Kinder spielen im Park."
    lines = ["Ein Hund läuft.", paragraph, "Dr. Meier liest gern.", "Dr. Meier liest. Eine Frau liest."]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    script.main([str(model_dir), str(tmp_path / "in.txt"), "-q", "-o", str(tmp_path / "out.txt")])
    assert without_cut_short(capsys.readouterr().err) == (
        "translate.py: warning: 2 lines hold several sentences (lines 2, 4); the model translates one sentence a line and "
        "may leave sentences out: split the text into sentences first, one a line.\n")
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 4  # translated all the same


def test_several_sentences_are_found_in_other_scripts_too(script):
    lines = ["Собака бежит. Кошка спит.", "Ο σκύλος τρέχει. Η γάτα κοιμάται.", "狗在跑。猫在睡觉。", "犬が走る。猫が寝る。",
             "Собака бежит.", "我爱你。", "「你好！」", "Ein Hund läuft."]
    assert script.several_sentences(lines) == [1, 2, 3, 4]


def test_nothing_to_translate_is_no_translations_as_a_filter_gives(script, model_dir, tmp_path, capsys):
    """An empty file, or blank lines only: as many blank lines out (none for an empty file), status 0 and a note on
    standard error, as `sort` or `sed` take an empty input (it was an error with status 2)."""
    (tmp_path / "blank.txt").write_text("\n  \n")
    (tmp_path / "empty.txt").write_text("")
    script.main([str(model_dir), str(tmp_path / "blank.txt"), "-o", str(tmp_path / "blank.out")])
    assert (tmp_path / "blank.out").read_text() == "\n\n"
    assert capsys.readouterr().err == f"translate.py: nothing to translate: {tmp_path / 'blank.txt'} has no text.\n"
    script.main([str(model_dir), str(tmp_path / "empty.txt"), "-q"])
    assert capsys.readouterr() == ("", "")  # -q: not even the note


@pytest.mark.parametrize(
    "damage, message",
    [
        (["tokenizer.json", "tokenizer_config.json"], "has no tokenizer (no tokenizer.json or tokenizer_config.json)"),
        (["tokenizer.json"], "has a tokenizer config but not the tokenizer (tokenizer.json)"),
        (["model.safetensors"], "no file named model.safetensors"),
        ("truncate", "are truncated or corrupt"),
        ("tokenizer.json", "tokenizer.json is damaged (not JSON: "),  # JSON's complaint named no file
    ],
)
def test_a_damaged_model_folder_says_what_is_missing(script, model_dir, tmp_path, capsys, damage, message):
    """Not the pipeline's 'Could not load model ... with any of the following classes' with no reason after it."""
    import shutil

    damaged = shutil.copytree(model_dir, tmp_path / "model")
    if damage == "truncate":
        weights = damaged / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    elif damage == "tokenizer.json":
        (damaged / damage).write_text('{"version": "1.0", "trunc')
    else:
        for name in damage:
            (damaged / name).unlink()
    (tmp_path / "in.txt").write_text("Ein Satz.\n")
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(damaged), str(tmp_path / "in.txt")])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_mistyped_local_folder_is_not_looked_up_on_the_hub(script, tmp_path, monkeypatch, capsys):
    """`runs/nosuch` where runs/ is a folder here: at once, not after the Hub's retries (about 30 s offline)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "in.txt").write_text("Ein Satz.\n")
    with pytest.raises(SystemExit) as exit_info:
        script.main(["runs/nosuch", "in.txt"])
    assert exit_info.value.code == 2 and "the folder runs has no nosuch" in capsys.readouterr().err


class FullDisk(io.StringIO):
    def write(self, text):
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    "stdin, stdout, message",
    [
        (None, "keep", "Standard input is closed: give the FILE"),  # `translate.py MODEL <&-`
        ("Ein Satz.", None, "Cannot write the translations to standard output: it is closed."),  # `>&-`
        ("Ein Satz.", FullDisk(), "Cannot write the translations to standard output: No space left on device."),
    ],
)
def test_closed_or_full_standard_streams_are_one_message(script, model_dir, monkeypatch, capsys, stdin, stdout,
                                                         message):
    monkeypatch.setattr(sys, "stdin", None if stdin is None else io.StringIO(stdin))
    if stdout != "keep":
        monkeypatch.setattr(sys, "stdout", stdout)
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(model_dir), "-q"])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_file_after_the_options_and_utf8_out_whatever_the_locale(model_dir, expected, tmp_path):
    """`translate.py MODEL --quiet FILE` was refused (argparse's optional positional after options), and under a
    legacy encoding (PYTHONIOENCODING=cp1252, a Windows redirect) a character it lacks ended the run in a traceback
    after translating: the translations are written as UTF-8, as the input is read and -o writes."""
    source = tmp_path / "source.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PYTHONIOENCODING": "cp1252"}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "translate.py"), str(model_dir), "--quiet",
                           "--batch_size", "2", str(source)], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout == "".join(line + "\n" for line in expected).encode("utf-8")
    printed = subprocess.run(  # the training script's sample translations print through run_command
        [sys.executable, "-c", "from hf_vanilla_transformer.errors import run_command; run_command(lambda: "
         "print('hypothesis: Ein Hund \\U0001f600'))"], env=env, capture_output=True, timeout=120)
    assert printed.returncode == 0 and printed.stdout.strip() == rb"hypothesis: Ein Hund \U0001f600"


def test_command_line(model_dir, expected):
    """The real command: stdin piped in, translations out."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "translate.py"), str(model_dir), "-"],
                          input="\n".join(LINES), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == expected
    help_text = subprocess.run([sys.executable, str(REPO / "scripts" / "translate.py"), "--help"], env=env,
                               capture_output=True, text=True, timeout=120).stdout
    assert "MODEL" in help_text and "standard input" in help_text and "--batch_size" in help_text


def read_only_folder(tmp_path):
    """A file in a folder no one may write to: /sys refuses new files to root too; a chmod-ed folder to others."""
    if os.geteuid() != 0:
        (tmp_path / "locked").mkdir(mode=0o500)
        return tmp_path / "locked" / "out.txt"
    if not os.path.isdir("/sys") or os.access("/sys", os.W_OK) and not os.path.isdir("/sys/kernel"):
        pytest.skip("as root, only sysfs refuses to make a file")
    return Path("/sys/out.txt")


def test_an_output_file_that_cannot_be_written_is_refused_before_the_model_loads(script, model_dir, tmp_path,
                                                                                   monkeypatch, capsys):
    """-o in a folder one may not write to was found out only after translating everything (hours for a big
    file), when the translations were to be written."""
    from transformers import AutoModelForSeq2SeqLM

    output = read_only_folder(tmp_path)
    (tmp_path / "in.txt").write_text("Ein Satz.\n")

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(AutoModelForSeq2SeqLM, "from_pretrained", no_loading)
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(model_dir), str(tmp_path / "in.txt"), "-q", "-o", str(output)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(f": error: -o {output} cannot be written (permission denied): give a file "
                                            "in a folder you may write to.\n")


def test_checking_the_output_file_leaves_it_as_it_was(script, model_dir, tmp_path, capsys):
    """The check opens -o for appending: an existing file keeps its text until the translations replace it, and a
    new one is not left behind, empty, by a run that fails."""
    (tmp_path / "nul.txt").write_bytes(b"Ein Satz.\x00\n")
    (tmp_path / "old.txt").write_text("earlier translations\n")
    for output in (tmp_path / "old.txt", tmp_path / "new.txt"):
        with pytest.raises(SystemExit):
            script.main([str(model_dir), str(tmp_path / "nul.txt"), "-q", "-o", str(output)])
    assert (tmp_path / "old.txt").read_text() == "earlier translations\n" and not (tmp_path / "new.txt").exists()
    assert "nul.txt is not a text file (line 1 holds NUL bytes)" in capsys.readouterr().err
    # -o /dev/stdout with standard output a pipe: a link to "pipe:[N]", which resolving it to a path made unwritable
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "translate.py"), str(model_dir), "-q",
                           str(tmp_path / "old.txt"), "-o", "/dev/stdout"], capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1, proc.stderr.decode(errors="replace")
    (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")  # a link to a file not made yet: it was deleted
    with pytest.raises(SystemExit):
        script.main([str(model_dir), str(tmp_path / "nul.txt"), "-q", "-o", str(tmp_path / "link.txt")])
    assert (tmp_path / "link.txt").is_symlink() and not (tmp_path / "target.txt").exists()


def byte_stdin(data: bytes):
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


@pytest.mark.parametrize("where", ["file", "stdin"])
@pytest.mark.parametrize(
    "encoding, named",
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16BE"), ("utf-16-le", "UTF-16LE"), ("utf-32", "UTF-32")],
)
def test_utf16_input_is_named_with_the_command_that_converts_it(script, model_dir, tmp_path, monkeypatch, capsys,
                                                                 where, encoding, named):
    """What Windows Notepad saves as "Unicode" (UTF-16 with a byte-order mark, FF FE) was "not a text file (line 1
    holds NUL bytes)" in a file, and on standard input "not valid UTF-8 ... `iconv -f LATIN1`", advice that turned
    it into junk."""
    data = (("\ufeff" if encoding == "utf-32" else "") + "Ein Hund läuft.\r\nZwei Kinder.\r\n").encode(encoding)
    (tmp_path / "in.txt").write_bytes(data)
    monkeypatch.setattr(sys, "stdin", byte_stdin(data))
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(model_dir), *([str(tmp_path / "in.txt")] if where == "file" else []), "-q"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    source = tmp_path / "in.txt" if where == "file" else "input.txt"
    assert f" is {named} text (it " in err
    assert f"not UTF-8: convert it first, e.g. `iconv -f {named} -t UTF-8 {source} | python scripts/translate.py " \
           "MODEL`." in err


def test_standard_input_that_is_not_utf8_is_named_by_its_line(script, model_dir, monkeypatch, capsys):
    """A file's error named the line; standard input's gave the byte in the whole input ("at byte 13")."""
    monkeypatch.setattr(sys, "stdin", byte_stdin("zwei\ndrei\nf\u00fcnf\n".encode("cp1252")))
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(model_dir), "-q"])
    assert exit_info.value.code == 2 and "Standard input is not valid UTF-8 (line 3: invalid start byte at " \
        "byte 1 of the line): re-encode it, e.g. `iconv -f CP1252 -t UTF-8 input.txt |" in capsys.readouterr().err


def test_a_nul_byte_on_standard_input_is_refused_as_in_a_file(script, model_dir, monkeypatch, capsys):
    """`printf 'zwei\\x00drei'` on standard input was translated ("sixty-two"), where a file was refused."""
    monkeypatch.setattr(sys, "stdin", byte_stdin(b"Ein Hund.\nZwei\x00Kinder.\n"))
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(model_dir), "-q"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and out == "" and err.endswith(
        ": error: Standard input is not text (line 2 holds NUL bytes): give UTF-8 text, one sentence a line.\n")


def test_lines_too_long_for_the_model_are_warned_about(script, model_dir, tmp_path, capsys):
    """Lines of thousands of tokens took minutes and gigabytes and came out as nonsense, without a word: one
    warning names them. The tiny model's max_position_embeddings (128) is below the 256 tokens trained on."""
    lines = [SOURCES[0], " ".join(["zwei Kinder spielen"] * 40), SOURCES[2], " ".join(["ein Hund läuft"] * 50)]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    script.main([str(model_dir), str(tmp_path / "in.txt"), "-q", "-o", str(tmp_path / "out.txt")])
    assert without_cut_short(capsys.readouterr().err) == (
        "translate.py: warning: 2 lines are longer than 128 tokens (lines 2, 4), the model's "
        "max_position_embeddings: the model translates such a line slowly, with much memory, and often cut short or "
        "into nonsense. Split long lines into sentences, one a line.\n")
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 4  # translated all the same
    # a model whose table of positions ends at the 256 tokens trained on (a Marian model's max_position_embeddings)
    # was said to be limited by train_translation.py's --max_source_length, which it may never have met
    script.warn_about_long_lines([" ".join(["ein Hund läuft"] * 150)], AutoTokenizer.from_pretrained(model_dir), 256)
    assert "longer than 256 tokens (line 1), the model's max_position_embeddings:" in capsys.readouterr().err


def test_ctrl_c_keeps_the_translations_written_so_far(script, model_dir, expected, tmp_path, monkeypatch, capsys):
    """Ctrl-C lost everything, hours of it for a big file: all lines were translated before one was written. Each lot
    of BUFFER_LINES lines is written when it is done, and Ctrl-C in the second lot leaves the first in -o, one line
    on stderr saying so, and the shell's status 130."""
    translate = pipeline_translation.translate_sentences
    lots = []

    def ctrl_c_in_the_second_lot(translator, sentences, **kwargs):
        lots.append(sentences)
        if len(lots) == 2:
            raise KeyboardInterrupt
        return translate(translator, sentences, **kwargs)

    monkeypatch.setattr(script, "translate_sentences", ctrl_c_in_the_second_lot)
    monkeypatch.setattr(script, "BUFFER_LINES", 4, raising=False)
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    output.write_text("an earlier run's translations\n")
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: script.main([str(model_dir), str(source), "-o", str(output), "--batch_size", "2", "-q"]),
                    name="translate.py")
    assert exit_info.value.code == 130 and lots == [LINES[:4], LINES[4:]]
    assert output.read_text(encoding="utf-8") == "".join(line + "\n" for line in expected[:4])
    assert capsys.readouterr().err == f"\ntranslate.py: interrupted: the first 4 of 6 translations are in {output}.\n"


@pytest.mark.parametrize("where", ["at the end of the first lot", "before the second lot's first batch"])
def test_a_ctrl_c_that_python_drops_stops_the_run_all_the_same(script, model_dir, expected, tmp_path, monkeypatch,
                                                               capsys, where):
    """Ctrl-C while the garbage collector ran a __del__ (regex's Group.__del__, on transformers' import-time garbage)
    raised its KeyboardInterrupt there, where Python prints "Exception ignored" and drops it: the run translated
    everything and exited 0. The press is noted too, and the run stops at the next batch or lot, with what was
    written kept and status 130, and Python's own SIGINT handler back."""
    translate = pipeline_translation.translate_sentences
    lots = []

    def dropped_ctrl_c():
        try:  # as a __del__ run by the garbage collector would
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass

    def ctrl_c_dropped(translator, sentences, **kwargs):
        lots.append(sentences)
        if len(lots) == 2 and where.startswith("before"):
            dropped_ctrl_c()
        translations = translate(translator, sentences, **kwargs)
        if len(lots) == 1 and where.startswith("at the end"):
            dropped_ctrl_c()
        return translations

    monkeypatch.setattr(script, "translate_sentences", ctrl_c_dropped)
    monkeypatch.setattr(script, "BUFFER_LINES", 4, raising=False)
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: script.main([str(model_dir), str(source), "-o", str(output), "--batch_size", "2", "-q"]),
                    name="translate.py")
    assert exit_info.value.code == 130 and len(lots) == (1 if where.startswith("at the end") else 2)
    assert output.read_text(encoding="utf-8") == "".join(line + "\n" for line in expected[:4])
    assert capsys.readouterr().err == f"\ntranslate.py: interrupted: the first 4 of 6 translations are in {output}.\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_tokenizer_larger_than_the_models_vocabulary_is_one_line(script, model_dir, tmp_path, capsys):
    """Another tokenizer saved into a model's folder, with ids past the model's vocabulary, failed deep in the model
    with a traceback (`input_ids` holds ids outside the vocabulary), status 1."""
    import shutil

    from transformers import AutoTokenizer

    folder = shutil.copytree(model_dir, tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(["Hund", "Kinder"])  # ids the model has no embeddings for
    tokenizer.save_pretrained(folder)
    (tmp_path / "in.txt").write_text(SOURCES[0] + "\n")
    with pytest.raises(SystemExit) as exit_info:
        script.main([str(folder), str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt"), "-q"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    size = len(tokenizer) - 2
    assert f"has ids up to {size + 1} and the model a vocabulary of {size} (ids 0 to {size - 1})" in err
    assert f"Save the tokenizer the model was trained with into {folder}" in err
    assert not (tmp_path / "out.txt").exists()


def test_a_hub_repo_without_a_model_says_so_not_that_it_lacks_a_tokenizer(script, tmp_path, monkeypatch, capsys):
    """A model pushed to a branch left main with only .gitattributes: translate.py on main said it had no
    tokenizer, which sent the user looking for the wrong file."""
    from transformers import AutoModelForSeq2SeqLM

    def no_model(*args, **kwargs):
        raise OSError("user/numbers does not appear to have a file named config.json.")

    def no_tokenizer(*args, **kwargs):
        raise InputError("user/numbers has no tokenizer.")

    monkeypatch.setattr(AutoModelForSeq2SeqLM, "from_pretrained", no_model)
    monkeypatch.setattr(script, "load_tokenizer", no_tokenizer)
    (tmp_path / "in.txt").write_text(SOURCES[0] + "\n")
    with pytest.raises(SystemExit) as exit_info:
        script.main(["user/numbers", str(tmp_path / "in.txt"), "-q"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "config.json" in err and "tokenizer" not in err, err


def test_a_long_input_is_translated_and_written_a_lot_at_a_time(script, model_dir, expected, monkeypatch, capsys):
    """Lots of BUFFER_LINES lines, each sorted by length in itself, give the translations of one call over the whole
    input, in input order; each lot is written before the next is translated (a lot of blank lines too), under one
    progress bar over all the sentences."""
    translate = pipeline_translation.translate_sentences
    captured = []

    def recording(translator, sentences, **kwargs):
        captured.append(capsys.readouterr())
        return translate(translator, sentences, **kwargs)

    monkeypatch.setattr(script, "translate_sentences", recording)
    monkeypatch.setattr(script, "BUFFER_LINES", 2, raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join([*LINES, "", "  ", LINES[0]])))
    script.main([str(model_dir), "--batch_size", "2"])
    captured.append(capsys.readouterr())
    assert "".join(part.out for part in captured).splitlines() == [*expected, "", "", expected[0]]
    assert [part.out.count("\n") for part in captured] == [0, 2, 2, 2, 2, 1]  # (1, 2), (3, 4), (5, 6), (7, 8), (9)
    bar_totals = re.findall(r"\| *\d+/(\d+) \[", "".join(part.err for part in captured))
    assert bar_totals and set(bar_totals) == {"6"}


def test_ctrl_c_while_a_lot_is_written_to_a_file_waits_for_it(script, tmp_path):
    """A lot goes into a file whole, and is counted, or not at all; to a pipe, whose reader may never read, Ctrl-C
    stops the writing at once."""
    steps = []
    with open(tmp_path / "out.txt", "w") as output, pytest.raises(KeyboardInterrupt):
        with script.interrupt_held(output):
            signal.raise_signal(signal.SIGINT)
            steps.append("written and counted")
    read_end, write_end = os.pipe()
    with open(read_end), open(write_end, "w") as pipe, pytest.raises(KeyboardInterrupt):
        with script.interrupt_held(pipe):
            signal.raise_signal(signal.SIGINT)
            steps.append("the pipe's lot")
    assert steps == ["written and counted"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("make_args, message", [
    (lambda d, t: [str(d), str(t / "nul.txt")], "nul.txt is not a text file (line 1 holds NUL bytes)"),
    (lambda d, t: [str(d), str(t / "nul.txt"), "--device", "gpu"], "--device gpu: not a device name"),
])
def test_the_debug_variable_shows_the_traceback_of_a_mistake_too(script, model_dir, tmp_path, monkeypatch, capsys,
                                                                 make_args, message):
    """HF_VANILLA_TRANSFORMER_DEBUG=1 shows a traceback wherever run_command reports a mistake in one line, but
    translate.py turned its own into parser.error's line, the traceback lost."""
    (tmp_path / "nul.txt").write_bytes(b"Ein Satz.\x00\n")
    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    with pytest.raises(InputError, match=re.escape(message)):
        run_command(lambda: script.main([*make_args(model_dir, tmp_path), "-q"]))
    monkeypatch.setenv(DEBUG_VARIABLE, "0")
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: script.main([*make_args(model_dir, tmp_path), "-q"]))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and ": error: " in err and message in err


class TypedLines:
    """Standard input that is a terminal: `typed` (bytes, or an exception to raise, as Ctrl-C does), read a line at a
    time, what was written before each read kept in `seen` (capsys's readouterr)."""

    def __init__(self, typed, capsys):
        self.typed, self.capsys, self.seen = list(typed), capsys, []
        self.buffer = self

    def isatty(self):
        return True

    def readline(self):
        self.seen.append(self.capsys.readouterr())
        line = self.typed.pop(0) if self.typed else b""  # b"": Ctrl-D
        if isinstance(line, BaseException):
            raise line
        return line

    def read(self):  # to Ctrl-D, as translate.py once read a terminal
        return b"".join(iter(self.readline, b""))


def test_lines_typed_at_a_terminal_are_translated_as_they_are_entered(script, model_dir, expected, monkeypatch,
                                                                       capsys):
    """`translate.py MODEL` at a terminal, as the training script's last message suggests, showed nothing and read
    to Ctrl-D before it translated anything: it looked hung. It says what it waits for (with -q too: that is about
    progress bars) and writes each translation as soon as its line is entered; a line that is not UTF-8 is named and
    has a blank translation, Windows' CRLF and a last line without its line end (Ctrl-D twice) are lines."""
    typed = TypedLines([LINES[0].encode() + b"\n", b"\n", b"\xe4x\n", LINES[3].encode() + b"\r\n", LINES[1].encode()],
                       capsys)
    monkeypatch.setattr(sys, "stdin", typed)
    script.main([str(model_dir), "-q"])
    typed.seen.append(capsys.readouterr())
    # what was written before each line was read (the last: Ctrl-D), and at the end
    assert [part.out for part in typed.seen] == ["", *(line + "\n" for line in [expected[0], "", "", expected[3],
                                                                                 expected[1]]), ""]
    assert typed.seen[0].err == script.TERMINAL_NOTE + "\n"
    assert script.TERMINAL_NOTE.startswith("translate.py: reading sentences from the terminal") and "Ctrl-D" in \
        script.TERMINAL_NOTE
    assert [without_cut_short(part.err) for part in typed.seen[1:]] == ["", "", (
        "translate.py: line 3 is not valid UTF-8 (invalid continuation byte at byte 0), so it is left untranslated (a "
        "blank line): set the terminal's character encoding to UTF-8.\n"), "", "", ""]


def test_ctrl_c_at_a_terminal_is_one_line(script, model_dir, expected, tmp_path, monkeypatch, capsys):
    """Ctrl-C while translate.py waits for a line: run_command's one line and status 130; with -o, how many
    translations the file holds."""
    monkeypatch.delenv(DEBUG_VARIABLE, raising=False)
    written = f": 1 translation is in {tmp_path / 'out.txt'}."
    for output, said in [([], "."), (["-o", str(tmp_path / "out.txt")], written)]:
        monkeypatch.setattr(sys, "stdin", TypedLines([LINES[0].encode() + b"\n", KeyboardInterrupt()], capsys))
        with pytest.raises(SystemExit) as exit_info:
            run_command(lambda: script.main([str(model_dir), "-q", *output]), name="translate.py")
        assert exit_info.value.code == 130 and capsys.readouterr().err == f"\ntranslate.py: interrupted{said}\n"
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == expected[0] + "\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def read_available(fd: int, seconds: float) -> bytes:
    """What `fd` (a pipe, or a pty's master) gives within `seconds`, or until it ends (a pty: OSError once the
    child has gone)."""
    import select
    import time

    data, end = b"", time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if select.select([fd], [], [], min(left, 0.2))[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data


def read_until(fd: int, ending: bytes, seconds: float) -> bytes:
    """What the pipe `fd` gives until it ends with `ending`, for `seconds` at most, or until it is closed."""
    import select
    import time

    data, end = b"", time.monotonic() + seconds
    while not data.endswith(ending) and time.monotonic() < end:
        if select.select([fd], [], [], 0.2)[0]:
            if not (chunk := os.read(fd, 65536)):
                break
            data += chunk
    return data


def screen_lines(output: bytes) -> list[str]:
    """The lines a terminal shows for `output`: a carriage return goes back to the line's start, text overwrites,
    escape sequences (tqdm's cursor moves) are left out, trailing blanks too."""
    lines, column = [[]], 0
    for piece in re.split(r"(\x1b\[[0-9;]*[A-Za-z]|\r|\n)", output.decode("utf-8", "replace")):
        if piece == "\r":
            column = 0
        elif piece == "\n":
            lines.append([])
            column = 0
        elif piece and not piece.startswith("\x1b"):
            line = lines[-1]
            for character in piece:
                line[column:column + 1] = [character]
                column += 1
    return ["".join(line).rstrip() for line in lines]


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminals here")
def test_the_command_at_a_terminal_says_what_it_waits_for_and_translates_each_line(model_dir, expected):
    """The real command, its standard input a terminal (a pty): the note before anything is typed, each translation
    on standard output as soon as its line is entered, Ctrl-D ends the run (status 0), nothing else on stderr."""
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "translate.py"), str(model_dir), "-q"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    try:
        note = read_until(proc.stderr.fileno(), b"\n", 60)
        assert note.startswith(b"translate.py: reading sentences from the terminal, one a line") and b"Ctrl-D" in note
        os.write(master, LINES[0].encode() + b"\n")
        assert read_until(proc.stdout.fileno(), b"\n", 60) == expected[0].encode() + b"\n"  # before Ctrl-D
        os.write(master, b"\n" + LINES[3].encode() + b"\n")
        assert read_until(proc.stdout.fileno(), expected[3].encode() + b"\n", 60) == (
            b"\n" + expected[3].encode() + b"\n")
        os.write(master, b"\x04")  # Ctrl-D
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == b"" and without_cut_short(err.decode()) == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminals here")
def test_translations_and_the_progress_bar_on_one_terminal_keep_to_their_own_lines(model_dir, expected, tmp_path):
    """stdout and stderr one terminal, as in `translate.py MODEL FILE` typed without a redirect: the first
    translation went onto the end of the progress bar's line, and the bar was drawn again below the translations.
    The bar is cleared while translations are written, and drawn again once, below them."""
    import fcntl
    import struct
    import termios

    source = tmp_path / "source.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "translate.py"), str(model_dir), str(source)],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    try:
        screen = screen_lines(read_available(master, 120))
        assert proc.wait(timeout=60) == 0, screen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    bars = [number for number, line in enumerate(screen) if re.search(r"\| *\d+/5 \[", line)]
    assert len(bars) == 1, screen  # drawn once, below the translations
    assert screen[bars[0] - len(expected) : bars[0]] == expected, screen
