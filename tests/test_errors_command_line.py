"""The scripts turn expected user errors into one message naming the file or flag, exit status 2 and no traceback;
HF_VANILLA_TRANSFORMER_DEBUG=1 shows the traceback; real bugs keep theirs."""

import gzip
import json
import os
import shutil
import runpy
import subprocess
import sys

import pytest
import torch

from hf_vanilla_transformer import VanillaTransformerConfig
from hf_vanilla_transformer.errors import InputError, run_command
from hub_server import hub_server  # noqa: F401  (fixture)
from tiny_translation_model import make_tiny_model_dir

from conftest import REPO

SCRIPTS = REPO / "scripts"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_model_dir(tmp_path_factory.mktemp("errors") / "model")


def run_script(name, *args, monkeypatch, capsys):
    """Run scripts/<name>.py as `python scripts/<name>.py args` would, in this process; return (status, stderr)."""
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / f"{name}.py"), *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(SCRIPTS / f"{name}.py"), run_name="__main__")
    return exit_info.value.code, capsys.readouterr().err


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def empty_prefix(tmp):
    write(tmp / "empty.de", b"")
    write(tmp / "empty.en", b"")
    return ["--train_prefix", tmp / "empty"], ["empty.de", "empty.en", "no sentence pairs"]


def truncated_gzip(tmp):
    write(tmp / "cut.de.gz", gzip.compress("eins\nzwei\n".encode() * 200)[:-30])
    write(tmp / "cut.en", b"one\ntwo\n" * 200)
    return ["--train_prefix", tmp / "cut"], ["cut.de.gz", "not a complete gzip file"]


def misspelt_flag(tmp):
    return ["--lerning_rate", "3e-4"], ["--lerning_rate", "did you mean --learning_rate"]


def negative_warmup(tmp):
    return ["--warmup_steps", "-5"], ["warmup_steps", "-5", ">= 0"]


def missing_prefix(tmp):
    return ["--train_prefix", "/nonexistent/x"], ["/nonexistent/x.de", "/nonexistent/x.de.gz"]


def json_without_target(tmp):
    rows = [{"translation": {"de": "eins"}}, {"translation": {"de": "zwei"}}]
    write(tmp / "train.jsonl", "".join(json.dumps(row) + "\n" for row in rows).encode())
    return ["--train_file", tmp / "train.jsonl"], ["'translation' column", "'en'"]


def resume_without_checkpoint(tmp):
    return ["--resume_from_checkpoint", "true"], ["has no complete checkpoint"]


def model_folder_without_model(tmp):
    (tmp / "nothing").mkdir()
    return ["--model_name_or_path", tmp / "nothing"], ["nothing", "no config.json"]


def heads_that_do_not_divide_d_model(tmp):
    return ["--d_model", "100", "--attention_heads", "8"], ["impossible model", "does not divide `d_model`=100",
                                                            "--attention_heads"]


def dropout_out_of_range(tmp):
    return ["--dropout", "1.5"], ["impossible model", "`dropout`", "1.5", "--dropout"]


def no_layers(tmp):
    return ["--layers", "0"], ["impossible model", "`encoder_layers` must be a positive integer, got 0", "--layers"]


def batches_smaller_than_a_sentence(tmp):
    write(tmp / "s.de", "eine ziemlich lange Zeile mit vielen Wörtern darin\n".encode() * 50)
    write(tmp / "s.en", b"a rather long line with many words in it\n" * 50)
    return ["--train_prefix", tmp / "s", "--vocab_size", "300", "--max_tokens_per_batch", "5"], [
        "more than max_tokens=5", "--max_tokens_per_batch", "--max_source_length"]


def output_dir_that_is_a_file(tmp):
    write(tmp / "notes.txt", b"my notes")
    return ["--output_dir", tmp / "notes.txt"], ["notes.txt is a file: give a folder"]


def negative_learning_rate(tmp):
    return ["--learning_rate", "-1"], ["--learning_rate must be 0 or more, got -1.0"]


def no_eval_batch(tmp):
    return ["--per_device_eval_batch_size", "0"], ["--per_device_eval_batch_size must be at least 1, got 0"]


def a_new_model_trained_for_no_step(tmp):
    return ["--num_train_epochs", "0"], ["--num_train_epochs 0 trains for no step", "--max_steps"]


def no_step_meant_as_no_limit(tmp):  # the Trainer would train no step, then evaluate and save the untrained model
    return ["--max_steps", "0"], ["--max_steps 0 trains for no step", "positive --num_train_epochs"]


def a_negative_step_count(tmp):  # the Trainer would quietly train by epochs instead
    return ["--max_steps", "-5"], ["--max_steps -5 is no step count", "leave it out (-1)"]


def an_empty_json_lines_file(tmp):  # `datasets` fails on it with a bare StopIteration
    write(tmp / "train.jsonl", b"")
    return ["--train_file", tmp / "train.jsonl"], ["train.jsonl is empty: the train split has no sentence pairs"]


def a_model_fine_tuned_for_no_step(tmp):
    model = make_tiny_model_dir(tmp / "model")
    return ["--model_name_or_path", model, "--num_train_epochs", "0"], ["trains for no step", "--do_train false"]


def fine_tuning_with_size_flags(tmp):  # they were silently ignored: the fine-tuned model keeps its size
    model = make_tiny_model_dir(tmp / "model")
    return ["--model_name_or_path", model, "--d_model", "64", "--vocab_size", "1000"], [
        "--d_model, --vocab_size shape a new model", "loads a trained model, which has its size",
        "leave them out (--dropout may be changed)"]  # "fine-tunes" was wrong where --do_train false only scores it


def a_preset_and_a_config(tmp):
    VanillaTransformerConfig(d_model=16, encoder_ffn_dim=16, decoder_ffn_dim=16).save_pretrained(tmp / "config")
    return ["--config_name", tmp / "config", "--preset", "big"], ["--preset and --config_name both say"]


def evaluating_without_a_model(tmp):
    return ["--do_train", "false"], ["no model to evaluate", "--model_name_or_path"]


def nothing_to_do(tmp):
    return ["--do_train", "false", "--do_eval", "false", "--do_predict=no"], ["all false: there is nothing to do"]


def evaluating_with_training_data_only(tmp):
    model = make_tiny_model_dir(tmp / "model")
    return ["--model_name_or_path", model, "--do_train", "false", "--train_prefix", tmp / "train"], [
        "Without training (--do_train false)", "neither is given", "--validation_prefix"]


def scoring_without_generating(tmp):  # the metrics need generated ids: refused before training, not after it
    return ["--predict_with_generate", "false"], ["--predict_with_generate false", "needs it true"]


def evaluating_during_training_without_validation_data(tmp):  # a warning, and a run with no scores
    write(tmp / "t.de", "eins\nzwei\n".encode())
    write(tmp / "t.en", b"one\ntwo\n")
    return ["--train_prefix", tmp / "t", "--eval_strategy", "steps", "--eval_steps", "10"], [
        "--eval_strategy steps evaluates on the validation split during training, and no validation data is given: "
        "pass --validation_prefix or --validation_file"]


def training_without_training_data(tmp):
    return ["--validation_prefix", tmp / "val"], ["Training needs training data", "--do_train false"]


def predicting_without_test_data(tmp):
    return ["--train_prefix", tmp / "train", "--do_train", "--do_predict"], ["--do_predict needs test data",
                                                                             "--test_prefix"]


def pushing_without_training(tmp):
    VanillaTransformerConfig(d_model=16, encoder_ffn_dim=16, decoder_ffn_dim=16).save_pretrained(tmp / "model")
    return ["--model_name_or_path", tmp / "model", "--do_eval", "--push_to_hub"], ["does not train",
                                                                                     "scripts/push_to_hub.py"]


def a_model_neither_here_nor_on_the_hub(tmp):
    # a name of the form a/b that is no folder here is a Hub id to transformers: offline or not, it is not found
    return ["--model_name_or_path", "no-such-user/no-such-run"], [
        "Cannot load a model's config from no-such-user/no-such-run: there is no such folder here, and as a Hub repo id"]


def a_dataset_neither_here_nor_on_the_hub(tmp):  # offline, or a misspelt id: not found either way
    return ["--dataset_name", "no-such-user/no-such-dataset"], [
        "Cannot load the dataset from no-such-user/no-such-dataset: there is no such folder here, and as a Hub repo id",
        "Check the path, or the id and the network."]


def a_dataset_folder_without_data(tmp):
    (tmp / "dataset").mkdir()
    return ["--dataset_name", tmp / "dataset"], [f"Cannot load the dataset from {tmp / 'dataset'}: "]


def a_tokenizer_neither_here_nor_on_the_hub(tmp):
    return ["--tokenizer_name", "no-such-user/no-such-run", "--number_words_train_size", "20"], [
        "Cannot load a tokenizer from no-such-user/no-such-run: there is no such folder here"]


def a_tokenizer_path_that_is_no_folder(tmp):
    # was "Repo id must be in the form 'repo_name' or 'namespace/repo_name'", after a warning that the Hub was away
    return ["--tokenizer_name", tmp / "nope", "--number_words_train_size", "20"], [
        f"Cannot load a tokenizer from {tmp / 'nope'}: no such folder."]


def a_reporting_tool_not_installed(tmp):
    from transformers.integrations import get_available_reporting_integrations

    absent = next(name for name in ("clearml", "dvclive", "swanlab", "tensorboard", "wandb")
                  if name not in get_available_reporting_integrations())
    return ["--report_to", absent], [f"--report_to {absent}: not installed here", "pip install"]


def no_source_tokens(tmp):
    return ["--max_source_length", "0"], ["--max_source_length must be at least 2 tokens (a word and the end token), "
                                          "got 0"]


def targets_cut_to_their_end_token(tmp):  # every label was `</s>` alone: a run trained on nothing, and exited 0
    return ["--max_target_length", "1"], ["--max_target_length must be at least 2 tokens (a word and the end token), "
                                          "got 1"]


def no_training_pairs(tmp):
    return ["--max_train_samples", "0"], ["--max_train_samples must be at least 1, got 0", "leave it out"]


def a_vocabulary_smaller_than_the_bytes(tmp):
    return ["--vocab_size", "100"], ["--vocab_size 100 is smaller than the byte-level BPE's alphabet", "at least 260"]


def a_vocabulary_past_what_bpe_training_holds(tmp):  # 10^9 aborted the process in the Rust BPE trainer
    return ["--vocab_size", "1000000000"], ["--vocab_size 1,000,000,000 is more than a translation vocabulary needs",
                                            "give at most 1,048,576"]


def evaluation_pairs_kept_all_blank(tmp):  # the empty split failed in `datasets` with a KeyError-like traceback
    write(tmp / "t.de", "eins\nzwei\n".encode() * 20)
    write(tmp / "t.en", b"one\ntwo\n" * 20)
    write(tmp / "v.de", "\ndrei\nvier\n".encode())
    write(tmp / "v.en", b"\nthree\nfour\n")
    return ["--train_prefix", tmp / "t", "--validation_prefix", tmp / "v", "--max_eval_samples", "1"], [
        "--max_eval_samples 1 keeps the first 1 validation pair, and it is blank", "Raise --max_eval_samples."]


def a_parquet_file(tmp):  # `datasets` reads it from a folder: --dataset_name, which the message gives
    write(tmp / "train.parquet", b"PAR1")
    return ["--train_file", tmp / "train.parquet"], [
        "train.parquet: --train_file reads JSON lines", f"--dataset_name {tmp} (train.parquet, validation.parquet"]


def flags_case(name, args, expected):
    """A case made of flags alone, named for its test id."""
    def make_case(tmp):
        return list(args), list(expected)
    make_case.__name__ = name
    return make_case


# values the Trainer, torch or generate() would take and then fail on (some after training) or silently misuse
OUT_OF_RANGE = [
    flags_case("one_language_on_both_sides", ["--target_lang", "de"], ["--source_lang and --target_lang are both 'de'"]),
    flags_case("no_tokens_a_batch", ["--max_tokens_per_batch", "0"], [
        "--max_tokens_per_batch must be at least 1 token, got 0", "--per_device_train_batch_size"]),
    flags_case("smoothing_not_a_probability", ["--label_smoothing_factor", "1.5"], [
        "--label_smoothing_factor", "must lie in [0, 1), got 1.5"]),
    flags_case("adam_beta_not_below_1", ["--adam_beta2", "1.5"], ["--adam_beta2 must lie in [0, 1)", "got 1.5"]),
    flags_case("negative_weight_decay", ["--weight_decay", "-0.1"], ["--weight_decay must be 0 or more, got -0.1"]),
    flags_case("negative_number_words_size", ["--number_words_eval_size", "-1"], [  # gave 899,909 pairs
        "--number_words_eval_size must be at least 1 pair, got -1"]),
    flags_case("flash_attention", ["--attn_implementation", "flash_attention_2"], [  # a traceback from transformers
        "--attn_implementation flash_attention_2: this model runs eager, sdpa, flex_attention (flash attention drops "
        "cross-attention rows of padded sources)."]),
    flags_case("no_beams", ["--generation_num_beams", "0"], ["--generation_num_beams must be at least 1", "got 0"]),
    flags_case("room_for_no_token", ["--generation_max_length", "1"], [
        "--generation_max_length counts the start token, so it must be at least 2, got 1"]),
    flags_case("saving_every_0_steps", ["--save_strategy", "steps", "--save_steps", "0"], [
        "--save_steps must be above 0 with --save_strategy steps"]),
    flags_case("negative_samples_to_print", ["--num_samples_to_print", "-1"], [
        "--num_samples_to_print must be 0 or more, got -1"]),
    flags_case("best_without_a_metric", ["--save_strategy", "best"], [
        "--save_strategy best saves a checkpoint when an evaluation scores best by --metric_for_best_model"]),
    flags_case("best_without_evaluations", ["--save_strategy", "best", "--eval_strategy", "no",
                                            "--metric_for_best_model", "bleu"], [
        "--save_strategy best saves a checkpoint when an evaluation scores best, and there is none"]),
    flags_case("an_unknown_reporting_tool", ["--report_to", "tensorboard,wandbb"], [
        "--report_to wandbb: transformers reports to none of that name", "a comma list, e.g. tensorboard,wandb"]),
    flags_case("auto_batch_size_with_token_batches", ["--auto_find_batch_size", "--max_tokens_per_batch", "500"], [
        "--auto_find_batch_size halves --per_device_train_batch_size", "give a smaller --max_tokens_per_batch"]),
    # the scores are of the whole set: these failed after training (no scores, no card) or scored nothing
    flags_case("loss_only", ["--prediction_loss_only", "true"], [
        "--prediction_loss_only true gives the evaluation's loss alone", "leave --prediction_loss_only out"]),
    flags_case("batches_not_concatenated", ["--eval_do_concat_batches", "false"], [
        "--eval_do_concat_batches false hands over the translations batch by batch"]),
    flags_case("metrics_batch_by_batch", ["--batch_eval_metrics", "true"], [
        "--batch_eval_metrics true asks for scores batch by batch"]),
]


@pytest.mark.parametrize("make_case", [
    a_reporting_tool_not_installed, no_source_tokens, no_training_pairs, a_vocabulary_smaller_than_the_bytes,
    a_vocabulary_past_what_bpe_training_holds, targets_cut_to_their_end_token,
    a_model_neither_here_nor_on_the_hub, a_tokenizer_neither_here_nor_on_the_hub, a_tokenizer_path_that_is_no_folder,
    a_dataset_neither_here_nor_on_the_hub, a_dataset_folder_without_data,
    fine_tuning_with_size_flags, a_preset_and_a_config, evaluating_without_a_model, evaluating_with_training_data_only, scoring_without_generating, nothing_to_do, training_without_training_data, predicting_without_test_data,
    pushing_without_training, output_dir_that_is_a_file, negative_learning_rate, no_eval_batch,
    a_new_model_trained_for_no_step, no_step_meant_as_no_limit, a_negative_step_count, a_model_fine_tuned_for_no_step,
    an_empty_json_lines_file,
    empty_prefix, truncated_gzip, misspelt_flag, negative_warmup, missing_prefix, json_without_target,
    resume_without_checkpoint, model_folder_without_model, heads_that_do_not_divide_d_model, dropout_out_of_range,
    no_layers, batches_smaller_than_a_sentence, evaluation_pairs_kept_all_blank, a_parquet_file, evaluating_during_training_without_validation_data,
    *OUT_OF_RANGE,
])
def test_train_translation_user_errors(make_case, tmp_path, monkeypatch, capsys):
    args, expected = make_case(tmp_path)
    status, err = run_script("train_translation", "--output_dir", tmp_path / "out", "--source_lang", "de",
                             "--target_lang", "en", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    message = err.strip().splitlines()[-1]  # after the progress bars, if any
    assert message.startswith("train_translation.py: error: ")
    for text in expected:
        assert text in message, (text, err)


def test_a_tokenizer_missing_from_a_folder_here_is_named_so(tmp_path, monkeypatch, capsys):
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    status, err = run_script("train_translation", "--output_dir", tmp_path / "out", "--tokenizer_name", "runs/nope",
                             "--number_words_train_size", "20", monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and err.strip().splitlines()[-1] == (
        "train_translation.py: error: Cannot load a tokenizer from runs/nope: the folder runs has no nope (to load "
        "the Hub repo of that id, run from another folder).")


def test_own_data_without_languages_is_one_line_that_suggests_them(tmp_path, monkeypatch, capsys):
    """Not argparse's 'the following arguments are required' after a usage block of some 150 lines."""
    write(tmp_path / "train.de", b"eins\n")
    write(tmp_path / "train.en", b"one\n")
    write(tmp_path / "train.yaml", b"notes: two files of a format beside them are no languages\n")
    write(tmp_path / "train.md", b"# notes\n")
    status, err = run_script("train_translation", "--output_dir", tmp_path / "out", "--train_prefix",
                             tmp_path / "train", monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "Give --source_lang and --target_lang with your own data" in err
    assert "e.g. --source_lang de --target_lang en" in err


def test_argument_errors_are_one_line_without_the_usage_block(tmp_path, monkeypatch, capsys):
    status, err = run_script("train_translation", "--output_dir", monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and err.strip() == "train_translation.py: error: argument --output_dir/--output-dir: expected one argument"


@pytest.mark.skipif(torch.cuda.is_available() or torch.backends.mps.is_available(), reason="a GPU is here")
def test_the_gpu_recipes_bf16_on_a_cpu_says_what_to_do(tmp_path, monkeypatch, capsys):
    status, err = run_script("train_translation", "--output_dir", tmp_path, "--bf16", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert "--bf16 asks for a GPU and torch sees none here: leave --bf16 out to train and evaluate in float32" in err
    status, err = run_script("train_translation", "--output_dir", tmp_path, "--bf16_full_eval",
                             monkeypatch=monkeypatch, capsys=capsys)  # the message named --bf16, not given
    assert status == 2 and "--bf16_full_eval asks for a GPU and torch sees none here: leave --bf16_full_eval out" in err


@pytest.mark.parametrize("name, text, expected", [
    ("flags.json", '{"output_dir": "runs/x",}', "flags.json is not valid JSON: Expecting property name"),
    ("flags.yaml", "output_dir: [runs/x",
     "flags.yaml is not valid YAML: expected ',' or ']', but got '<stream end>' at line 1"),
    ("flags.json", '["--output_dir", "runs/x"]', "must hold one mapping of flag names to values"),
    ("flags.json", '{"output_dir": "runs/x", "lerning_rate": 0.1}', "did you mean --learning_rate"),
    ("missing.json", None, "Cannot read the flags file"),
])
def test_a_bad_flags_file_is_one_message(name, text, expected, tmp_path, monkeypatch, capsys):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    status, err = run_script("train_translation", path, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert expected in err.strip().splitlines()[-1], err


def test_translate_names_the_line_that_is_not_utf8(model_dir, tmp_path, monkeypatch, capsys):
    """The command it gives converts a Windows file (Notepad's, Excel's: CP1252) whole: `iconv -f LATIN1` made its
    „quotes“, € and – invisible control characters, which were then read without a word."""
    source = write(tmp_path / "windows.de", "zwei\n„fünf“ – 5 €\n".encode("cp1252"))
    status, err = run_script("translate", model_dir, source, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert f"{source}: line 2 is not valid UTF-8" in err and "`iconv -f CP1252 -t UTF-8 " in err
    if shutil.which("iconv"):
        converted = subprocess.run(["iconv", "-f", "CP1252", "-t", "UTF-8", str(source)], capture_output=True)
        assert converted.stdout.decode() == "zwei\n„fünf“ – 5 €\n"


def test_export_ctranslate2_refuses_a_folder_without_a_model(tmp_path, monkeypatch, capsys):
    pytest.importorskip("ctranslate2")
    (tmp_path / "empty").mkdir()
    status, err = run_script("export_ctranslate2", tmp_path / "empty", tmp_path / "out",
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert f"{tmp_path / 'empty'}" in err and "config.json" in err


def test_translating_a_stopped_runs_folder_points_at_its_checkpoints(tmp_path, monkeypatch, capsys):
    """translate.py given the folder of a run stopped before its end said only "not a saved model: it has no
    config.json", though its checkpoints are models."""
    for step in (20, 100, 40):
        (tmp_path / "run" / f"checkpoint-{step}").mkdir(parents=True)
        (tmp_path / "run" / f"checkpoint-{step}" / "config.json").write_text("{}")
    status, err = run_script("translate", tmp_path / "run", "zwei", monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and err.strip() == (
        f"translate.py: error: {tmp_path / 'run'} is a directory but not a saved model: it has no config.json. It "
        "holds the checkpoints of a training run not finished (checkpoint-20, checkpoint-40, checkpoint-100): give one "
        f"of them (the last: {tmp_path / 'run' / 'checkpoint-100'}), or finish the run with the training command and "
        "--resume_from_checkpoint true.")


def run(tmp_path):
    """A run folder with two (empty) checkpoints."""
    for step in (1, 2):
        (tmp_path / "run" / f"checkpoint-{step}").mkdir(parents=True, exist_ok=True)
    return tmp_path / "run"


def run_of_two_models(tmp_path):
    """A run folder whose two checkpoints hold models of different sizes (the weights' names alike)."""
    from safetensors.torch import load_file, save_file

    last = make_tiny_model_dir(tmp_path / "run2" / "checkpoint-2")
    weights = load_file(last / "model.safetensors")
    name = next(name for name in weights if name.endswith("fc1.weight"))
    weights[name] = weights[name][:-1]
    (tmp_path / "run2" / "checkpoint-1").mkdir()
    save_file(weights, tmp_path / "run2" / "checkpoint-1" / "model.safetensors")
    return tmp_path / "run2"


@pytest.mark.parametrize("name, make_args, expected", [
    ("average_checkpoints", lambda d, t: [t, "--output_dir", t / "avg"], "has no checkpoints (checkpoint-<step> folders)"),
    ("average_checkpoints", lambda d, t: [t / "missing", "--output_dir", t / "avg"], "No run folder at"),
    ("average_checkpoints", lambda d, t: [t, "--last", "0", "--output_dir", t / "avg"], "--last must be at least 1"),
    ("average_checkpoints", lambda d, t: [run(t), "--last", "2", "--output_dir", run(t)], "would overwrite the model"),
    ("average_checkpoints", lambda d, t: [run(t), "--last", "2", "--output_dir", run(t) / "checkpoint-2"],
     "would overwrite the model of the run or of a checkpoint; give a new folder"),
    ("average_checkpoints", lambda d, t: [run(t), "--last", "2", "--output_dir", d / "config.json"], "is a file"),
    ("average_checkpoints", lambda d, t: [run_of_two_models(t), "--last", "2", "--output_dir", t / "avg"],
     "checkpoint-2 holds other weights than"),
    ("average_checkpoints", lambda d, t: [run(t) / "checkpoint-2", "--output_dir", t / "avg"],
     "is a checkpoint, not a run: give the run's folder"),
    ("push_to_hub", lambda d, t: [t, "user/repo"], "is not a saved translation model"),
    ("plot_attention", lambda d, t: [t, "zwei"], "not a saved model"),
    ("plot_attention", lambda d, t: [d, "zwei", "--layers", "9"], "Choose layers from 1 to 2"),
    ("plot_attention", lambda d, t: ["no-such-user/no-such-run", "zwei"], "there is no such folder here, and as a Hub"),
    ("translate", lambda d, t: [t / "missing", "-"], "No model directory at"),
    ("translate", lambda d, t: [d, "-", "-o", d / "config.json" / "out.txt"],  # was "the folder ... does not exist"
     "config.json is a file, not a folder"),
    ("export_ctranslate2", lambda d, t: [d, t / "out", "--max_positions", "0"], "--max_positions must be at least 1"),
    ("export_ctranslate2", lambda d, t: [d, d / "config.json" / "out"],  # a traceback once the model had loaded
     "config.json/out lies in"),
    ("export_ctranslate2", lambda d, t: ["no-such-user/missing", t / "out"], "Cannot load a model from no-such-user/missing: there is no such folder here"),
    ("benchmark", lambda d, t: ["--repeats", "0"], "--repeats must be at least 1"),
    ("benchmark", lambda d, t: ["--device", f"cuda:{torch.cuda.device_count()}"], "--device cuda:"),
    ("benchmark", lambda d, t: ["--d_model", "30", "--heads", "8"], "--heads 8 must divide --d_model 30"),
    ("benchmark", lambda d, t: ["--skip", "train", "greedy", "beam", "memory"], "--skip leaves nothing to measure"),
    # these failed with a traceback once the measuring was done, minutes later, and the JSON was lost
    ("benchmark", lambda d, t: ["--json", str(t)], "is a folder: give a file name, e.g."),
    ("benchmark", lambda d, t: ["--device", "cuda", "--peak_tflops", "nan"], "--peak_tflops must be positive"),
    ("benchmark", lambda d, t: ["--json", str(d / "config.json" / "b.json")], "config.json is a file, not a folder"),
    ("benchmark", lambda d, t: ["--compile", "--compile_backend", "nosuch"],  # torch's InvalidBackend traceback
     "--compile_backend nosuch is no torch.compile backend: aot_eager,"),
])
def test_other_scripts_user_errors(name, make_args, expected, model_dir, tmp_path, monkeypatch, capsys):
    status, err = run_script(name, *make_args(model_dir, tmp_path), monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert expected in err, err


@pytest.mark.parametrize("typed, suggested", [
    # other toolkits' names: difflib's nearest spelling pointed them at unrelated flags
    ("--pre_ln", "--normalize_before true"),  # was --target_lang
    ("--pre-norm", "--normalize_before true"),  # was --max_grad_norm
    ("--beam", "--generation_num_beams"),  # was --label_names
    ("--beam_size", "--generation_num_beams"),  # was --vocab_size
    ("--batch_size", "--per_device_train_batch_size, or --max_tokens_per_batch for batches by tokens"),
    # abbreviations: argparse called them ambiguous between a flag's two spellings, or between flags
    ("--lr", "--learning_rate"),
    ("--vocab", "--vocab_size"),
    ("--warmup", "--warmup_steps"),
    ("--warmup_st", "--warmup_steps"),  # was taken as --warmup_steps without a word
])
def test_a_flag_known_by_another_name_gets_this_scripts_name(typed, suggested, tmp_path):
    from hf_vanilla_transformer.training import parse_arguments

    with pytest.raises(InputError) as error:
        parse_arguments(["--output_dir", str(tmp_path), typed, "1"])
    assert str(error.value).startswith(f"Unknown arguments: {typed} (did you mean {suggested}?). `python ")


def test_a_real_subprocess_shows_one_line(tmp_path):
    command = [sys.executable, str(SCRIPTS / "train_translation.py"), "--output_dir", str(tmp_path), "--lerning_rate",
               "1"]
    env = {key: value for key, value in os.environ.items() if key != "HF_VANILLA_TRANSFORMER_DEBUG"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "train_translation.py: error: Unknown arguments: --lerning_rate (did you mean --learning_rate?). `python "
        f"{SCRIPTS / 'train_translation.py'} --help` lists every flag."  # the script as it was run
    ]


def training_stopped_at_step_3(stop, tmp_path, monkeypatch, capsys):
    """The training script run in this process, `stop()` called at step 3 (it saves every 2): (status, stderr)."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer

    step = TokenBatchingSeq2SeqTrainer.training_step

    def stopped_at_step_3(self, *args, **kwargs):
        if self.state.global_step == 3:
            stop()
        return step(self, *args, **kwargs)

    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "training_step", stopped_at_step_3)
    return run_script("train_translation", "--output_dir", tmp_path / "run", "--number_words_train_size", "200",
                      "--number_words_eval_size", "8", "--max_steps", "10", "--save_strategy", "steps",
                      "--save_steps", "2", "--disable_tqdm", "true", monkeypatch=monkeypatch, capsys=capsys)


def test_ctrl_c_says_how_to_resume_without_a_traceback(tmp_path, monkeypatch, capsys):
    def ctrl_c():
        raise KeyboardInterrupt  # what Ctrl-C raises in the main thread

    status, err = training_stopped_at_step_3(ctrl_c, tmp_path, monkeypatch, capsys)
    assert status == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"train_translation.py: interrupted: the last complete checkpoint is {tmp_path / 'run' / 'checkpoint-2'}; "
        "continue the run with the same command plus --resume_from_checkpoint true.")


def test_sigterm_says_how_to_resume_as_ctrl_c_does(tmp_path, monkeypatch, capsys):
    """SIGTERM (a scheduler's time limit, `kill`, `docker stop`) ended the run without a word: no line saying which
    checkpoint to resume from. It is taken as Ctrl-C, with the shell's status for SIGTERM."""
    import signal

    handler = signal.getsignal(signal.SIGTERM)
    status, err = training_stopped_at_step_3(lambda: signal.raise_signal(signal.SIGTERM), tmp_path, monkeypatch,
                                             capsys)
    assert status == 143 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"train_translation.py: terminated (SIGTERM): the last complete checkpoint is "
        f"{tmp_path / 'run' / 'checkpoint-2'}; continue the run with the same command plus --resume_from_checkpoint "
        "true.")
    assert signal.getsignal(signal.SIGTERM) is handler  # put back


def test_ctrl_c_closes_the_progress_bar_before_its_message(tmp_path, monkeypatch, capsys):
    """The message was printed into the training's progress bar, which tqdm drew again after it at exit."""
    from transformers.trainer_callback import ProgressCallback

    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    closed = []
    end = ProgressCallback.on_train_end
    monkeypatch.setattr(ProgressCallback, "on_train_end",
                        lambda self, *args, **kwargs: closed.append(self) or end(self, *args, **kwargs))
    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "training_step", interrupted)
    status, err = run_script("train_translation", "--output_dir", tmp_path / "run", "--number_words_train_size", "200",
                             "--number_words_eval_size", "8", "--max_steps", "10", "--disable_tqdm", "false",
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 130 and closed and closed[0].training_bar is None
    assert err.splitlines()[-1].startswith("train_translation.py: interrupted: no checkpoint was saved yet")


def test_ctrl_c_while_scoring_closes_the_scorings_progress_bar_before_its_message(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the final translation of validation: tqdm drew the scoring's bar again after the message."""
    from transformers.trainer_callback import ProgressCallback

    bars = []
    step = ProgressCallback.on_prediction_step

    def interrupted_at_the_second_batch(self, args, state, control, eval_dataloader=None, **kwargs):
        step(self, args, state, control, eval_dataloader=eval_dataloader, **kwargs)
        bars.append(self)
        if len(bars) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(ProgressCallback, "on_prediction_step", interrupted_at_the_second_batch)
    status, err = run_script("train_translation", "--output_dir", tmp_path / "run", "--number_words_train_size", "200",
                             "--number_words_eval_size", "40", "--max_steps", "2", "--eval_strategy", "no",
                             "--per_device_eval_batch_size", "8", "--save_strategy", "no", "--disable_tqdm", "false",
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 130 and bars[-1].prediction_bar is None
    assert err.splitlines()[-1].startswith("train_translation.py: interrupted: the run's model is saved in")


@pytest.mark.parametrize("script", [
    "train_translation", "translate", "average_checkpoints", "plot_attention", "push_to_hub", "export_ctranslate2",
])
def test_ctrl_c_while_the_libraries_load_is_one_line_too(script, tmp_path):
    """Ctrl-C in the first second, while torch and transformers are imported (before `run_command` is running)."""
    import signal
    import time

    process = subprocess.Popen(
        [sys.executable, str(SCRIPTS / f"{script}.py"), "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's foreground job
    )
    time.sleep(0.7)  # the imports take seconds; the interpreter has started
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in err
    assert err.strip() == f"{script}.py: interrupted."


@pytest.mark.parametrize("script", [
    "train_translation", "translate", "average_checkpoints", "plot_attention", "push_to_hub", "export_ctranslate2",
    "benchmark",
])
def test_an_unknown_flag_is_one_line_and_status_2(script, monkeypatch, capsys):
    """argparse's own errors too (here an unknown flag, or the arguments missing beside it): one line, no usage
    block (the benchmark printed one)."""
    status, err = run_script(script, "--no_such_flag", monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and err.startswith(f"{script}.py: error: "), err


def test_ctrl_c_elsewhere_is_one_line_too(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.delenv("HF_VANILLA_TRANSFORMER_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_command(interrupted, name="translate.py")
    assert exit_info.value.code == 130 and capsys.readouterr().err.strip() == "translate.py: interrupted."


def test_debug_variable_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_VANILLA_TRANSFORMER_DEBUG", "1")
    monkeypatch.setattr(sys, "argv", ["train_translation.py", "--output_dir", str(tmp_path), "--lerning_rate", "1"])
    with pytest.raises(InputError, match="--lerning_rate"):
        runpy.run_path(str(SCRIPTS / "train_translation.py"), run_name="__main__")


def test_bugs_keep_their_traceback():
    def buggy():
        return [][1]

    with pytest.raises(IndexError):
        run_command(buggy)

    def user_error():
        raise InputError("the file x is empty")

    with pytest.raises(SystemExit) as exit_info:
        run_command(user_error, name="tool")
    assert exit_info.value.code == 2


@pytest.mark.parametrize("case, expected", [
    ("offline", "HF_HUB_OFFLINE is set, so nothing can be pushed"),
    ("no token", "Pushing needs a Hub token: run `hf auth login`, set HF_TOKEN, or pass --token"),
    ("bad id", "'not a repo id' is not a Hub repository id"),
    ("unreachable", "Cannot reach the Hub at http://127.0.0.1:9"),
])
def test_push_to_hub_says_why_it_cannot_push(case, expected, model_dir, tmp_path, monkeypatch, capsys):
    """What a push needs (a valid id, a token, the Hub switched on and reachable) is one message and exit 2."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", case == "offline")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no_token"))  # no `hf auth login` token
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: connection refused
    if case == "no token":
        monkeypatch.delenv("HF_TOKEN", raising=False)
    else:
        monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    repo_id = "not a repo id" if case == "bad id" else "user/numbers"
    status, err = run_script("push_to_hub", model_dir, repo_id, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert expected in err, err


def test_training_script_checks_its_push_before_training(tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the tests' conftest sets it
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no_token"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    status, err = run_script("train_translation", "--output_dir", tmp_path / "out", "--push_to_hub",
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "--push_to_hub: Pushing needs a Hub token" in err and "--hub_token" in err
    assert not (tmp_path / "out").exists()  # before any work
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")  # the repository is named after the output folder
    status, err = run_script("train_translation", "--output_dir", tmp_path / "my run", "--push_to_hub",
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "'my run' is not a Hub repository id" in err


def test_training_script_with_a_push_and_no_network_stops_before_training(tmp_path, monkeypatch, capsys):
    """The push at the end would fail after all the training (the built-in run: minutes; a real one: days)."""
    import socket

    from huggingface_hub import constants

    from hf_vanilla_transformer import hub

    def no_network(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the tests' conftest sets it
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    hub.hub_unreachable.cache_clear()
    try:
        status, err = run_script("train_translation", "--output_dir", tmp_path / "out", "--push_to_hub",
                                 "--hub_model_id", "me/numbers", monkeypatch=monkeypatch, capsys=capsys)
    finally:
        hub.hub_unreachable.cache_clear()
    assert status == 2 and err.strip().splitlines()[-1] == (
        f"train_translation.py: error: --push_to_hub: the Hub ({hub.hub_host()}) cannot be reached from here (no "
        "network, no name service, or no connection), so the run could not be pushed at its end: train without --push_to_hub and "
        "push the saved run later, from a machine that reaches the Hub: python "
        f"{SCRIPTS / 'push_to_hub.py'} {tmp_path / 'out'} me/numbers")  # the scripts folder the user ran from
    assert not (tmp_path / "out").exists()  # before any work


@pytest.mark.parametrize("token, repo_id, message", [
    ("hf_wrong_token", "user/numbers", "The Hub did not accept the token (401 Unauthorized) for user/numbers"),
    (True, "somebody/numbers", "the token's account user is neither it nor one of its organizations (org): give "
                               "--hub_model_id user/numbers, or a token of somebody"),  # the account itself not named
])
def test_a_push_the_hub_would_refuse_stops_before_training(hub_server, tmp_path, token, repo_id, message):  # noqa: F811
    """A wrong token or another account's namespace was found out by the push at the end, after all the training."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "train_translation.py"), "--output_dir", str(tmp_path / "out"),
         "--push_to_hub", "--hub_model_id", repo_id],
        env=hub_server.env(tmp_path / "home", token=token, PYTHONPATH=str(REPO)), capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and message in proc.stderr.strip().splitlines()[-1], proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()  # before any work


def test_a_push_that_fails_after_training_says_the_run_is_saved(tmp_path, monkeypatch):
    """The push at the end fails (a repository of another model type, made during the training; a refusal of the
    Hub's): the message said so, but not that the trained run is saved, nor how to push it. (A repository of another
    model type before the training is refused then: tests/test_hub_roundtrip.py.)"""
    from hf_vanilla_transformer import training

    def refuse(training_args):
        raise InputError("user/a-gpt2 holds another kind of model (model_type 'gpt2' in its config.json).")

    monkeypatch.setattr(training, "check_push_flags", lambda training_args: None)
    monkeypatch.setattr(training, "push_from_training_args", refuse)
    out = tmp_path / "out"
    with pytest.raises(InputError) as error:
        training.main(["--output_dir", str(out), "--number_words_train_size", "100", "--number_words_eval_size", "4",
                       "--d_model", "16", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32",
                       "--vocab_size", "280", "--max_steps", "2", "--push_to_hub", "--hub_model_id", "user/a-gpt2",
                       "--disable_tqdm", "true"])
    assert str(error.value).startswith(f"The run is saved in {out}, but pushing it failed.")
    assert "another kind of model (model_type 'gpt2'" in str(error.value) and (out / "model.safetensors").exists()
    assert f"python scripts/push_to_hub.py {out} user/a-gpt2" in str(error.value)


def test_resuming_with_other_model_flags_or_past_max_steps_is_one_message(tmp_path, monkeypatch, capsys, caplog):
    """A checkpoint of another size was a 55-line size-mismatch traceback from torch; one past --max_steps trained a
    step more than asked. Both are one message now."""
    run = ["--output_dir", tmp_path / "run", "--number_words_train_size", "64", "--number_words_eval_size", "4",
           "--d_model", "16", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32", "--save_strategy", "steps",
           "--save_steps", "2", "--disable_tqdm", "true", "--do_eval", "false", "--do_predict", "false",
           "--do_train", "--average_last_checkpoints", "0"]
    from hf_vanilla_transformer.training import main

    main([*map(str, run), "--max_steps", "4"])
    resume = ["--resume_from_checkpoint", "true", "--overwrite_output_dir", "false"]
    status, err = run_script("train_translation", *run, "--max_steps", "8", "--d_model", "32", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert f"{tmp_path / 'run' / 'checkpoint-4'} holds a model with d_model 16 (the flags: 32)" in err
    status, err = run_script("train_translation", *run, "--max_steps", "8", "--dropout", "0.3", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)  # it went on with another dropout, silently
    assert status == 2 and "holds a model with dropout 0.1 (the flags: 0.3)" in err
    status, err = run_script("train_translation", *run, "--max_steps", "8", "--learning_rate", "0.01", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)  # ignored (the optimizer's state has the rate)
    assert status == 2 and "was saved by a run with other flags than these: --learning_rate 0.01 (the run's: " in err
    status, err = run_script("train_translation", *run, "--max_steps", "3", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "is at step 4, past --max_steps 3: there is nothing left to train" in err
    # a run stopped after its last checkpoint, resumed: the Trainer trained a step past --max_steps
    status, err = run_script("train_translation", *run, "--max_steps", "4", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "is at step 4, the end of --max_steps 4: the training is complete" in err
    assert f"Its model is saved in {tmp_path / 'run'}: score it with --model_name_or_path {tmp_path / 'run'}" in err
    assert f"--output_dir {tmp_path / 'run' / 'scored'}; or give" in err
    (tmp_path / "run" / "scored").mkdir()  # an earlier scoring's: the command suggested would be refused there
    status, err = run_script("train_translation", *run, "--max_steps", "4", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and f"--output_dir {tmp_path / 'run' / 'scored-2'}; or give" in err
    last = tmp_path / "run" / "checkpoint-4"
    (last / "pytorch_model_fsdp_0").mkdir()  # a sharded FSDP checkpoint, resumed without FSDP: a traceback
    status, err = run_script("train_translation", *run, "--max_steps", "8", *resume,
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and f"{last} was saved under FSDP (its weights are sharded" in err
    (last / "pytorch_model_fsdp_0").rmdir()
    shutil.copy(last / "rng_state.pth", last / "rng_state_1.pth")  # as if two processes had saved it
    caplog.clear()
    main([*map(str, run), "--max_steps", "6", *resume])  # resuming as the run started: no warning about tied names
    assert (tmp_path / "run" / "checkpoint-6").is_dir() and "missing keys" not in caplog.text
    assert f"{last} was saved by 2 processes and this run has 1" in caplog.text


def test_resuming_from_weights_only_checkpoints_is_refused(tmp_path, monkeypatch, capsys):
    """--save_only_model checkpoints lack the optimizer and the schedule: resuming from one restarted the warmup
    without a word (the learning rate fell to 0 mid-run). Ctrl-C in such a run says how to go on instead."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer
    from hf_vanilla_transformer.training import main

    run = ["--output_dir", tmp_path / "run", "--number_words_train_size", "64", "--number_words_eval_size", "4",
           "--d_model", "16", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32", "--save_strategy", "steps",
           "--save_steps", "2", "--disable_tqdm", "true", "--do_eval", "false", "--do_predict", "false",
           "--do_train", "--average_last_checkpoints", "0", "--save_only_model", "true"]
    main([*map(str, run), "--max_steps", "4"])
    last = tmp_path / "run" / "checkpoint-4"
    for resume in ("true", str(last)):
        status, err = run_script("train_translation", *run, "--max_steps", "8", "--resume_from_checkpoint", resume,
                                 "--overwrite_output_dir", "false", monkeypatch=monkeypatch, capsys=capsys)
        assert status == 2 and err.strip().splitlines() == [
            f"train_translation.py: error: {last} holds the weights only (--save_only_model): without the optimizer's "
            "state and the learning-rate schedule a resumed run would start its warmup again. Fine-tune from it into "
            f"a new folder instead (--model_name_or_path {last}), or train without --save_only_model for checkpoints "
            "that can be resumed."]

    step = TokenBatchingSeq2SeqTrainer.training_step

    def interrupted_at_step_3(self, *args, **kwargs):
        if self.state.global_step == 3:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "training_step", interrupted_at_step_3)
    other = tmp_path / "other"
    status, err = run_script("train_translation", *run[2:], "--output_dir", other, "--max_steps", "8",
                             monkeypatch=monkeypatch, capsys=capsys)
    assert status == 130 and err.strip().splitlines()[-1] == (
        f"train_translation.py: interrupted: the last complete checkpoint is {other / 'checkpoint-2'}, weights only "
        f"(--save_only_model), which cannot be resumed: fine-tune from it with --model_name_or_path "
        f"{other / 'checkpoint-2'}.")


def test_overwriting_and_resuming_together_is_one_message(tmp_path):
    """--overwrite_output_dir true with --resume_from_checkpoint resumed, and ignored the overwrite without a word;
    the built-in run's default overwriting yields to a resume as before."""
    from hf_vanilla_transformer.training import parse_arguments

    for resume in ("true", str(tmp_path / "checkpoint-4")):
        with pytest.raises(InputError, match="--overwrite_output_dir true deletes --output_dir's earlier run, and "
                                             "--resume_from_checkpoint continues one: give one of the two."):
            parse_arguments(["--output_dir", str(tmp_path), "--overwrite_output_dir", "--resume_from_checkpoint",
                             resume])
    parse_arguments(["--output_dir", str(tmp_path), "--resume_from_checkpoint", "true"])
