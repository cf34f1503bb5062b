"""scripts/average_checkpoints.py: it leaves a non-empty --output_dir alone unless --overwrite, skips the checkpoints a
stopped run left incomplete, and says in one line (exit status 2) what is wrong with a checkpoint it cannot load or a
folder it cannot write."""

import json
import os
import runpy
import shutil
import sys

import pytest
import torch
from safetensors.torch import load_file

from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE
from tiny_translation_model import load_script, make_tiny_model_dir

from conftest import REPO

SCRIPT = REPO / "scripts" / "average_checkpoints.py"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A run folder with three complete checkpoints of one model (other weights in each)."""
    run = tmp_path_factory.mktemp("average") / "run"
    for step in (1, 2, 3):
        make_tiny_model_dir(run / f"checkpoint-{step}", seed=step)
        (run / f"checkpoint-{step}" / CHECKPOINT_COMPLETE).write_text(json.dumps({"global_step": step}))
    return run


@pytest.fixture
def run(finished_run, tmp_path):
    return shutil.copytree(finished_run, tmp_path / "run")


def average(*args, monkeypatch, capsys):
    """Run `python scripts/average_checkpoints.py args` in this process; return (exit status, stdout, stderr)."""
    monkeypatch.delenv("HF_VANILLA_TRANSFORMER_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *map(str, args)])
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
        status = 0
    except SystemExit as exit_info:
        status = exit_info.code
    out, err = capsys.readouterr()
    return status, out, err


def mean_of(*checkpoints):
    weights = [load_file(checkpoint / "model.safetensors") for checkpoint in checkpoints]
    return {name: sum(w[name] for w in weights) / len(weights) for name in weights[0]}


def assert_holds(model_dir, expected):
    saved = load_file(model_dir / "model.safetensors")
    assert saved and all(torch.allclose(tensor, expected[name], atol=1e-6) for name, tensor in saved.items())
    umask = os.umask(0)
    os.umask(umask)  # readable as the run's other files are, not safetensors' -rw-------
    assert (model_dir / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask


def test_help_shows_that_last_defaults_to_5(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_script("average_checkpoints").main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert exit_info.value.code == 0 and "checkpoints to average (default: 5)" in help_text


def test_an_earlier_average_is_replaced_only_with_overwrite(run, tmp_path, monkeypatch, capsys):
    avg = tmp_path / "avg3"
    assert average(run, "--last", "3", "--output_dir", avg, monkeypatch=monkeypatch, capsys=capsys)[0] == 0
    before = (avg / "model.safetensors").read_bytes()

    status, _, err = average(run, "--last", "2", "--output_dir", avg, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"average_checkpoints.py: error: --output_dir {avg} is not empty (")
    assert err.endswith(", ...), so it is not overwritten: give a new or empty folder, or pass --overwrite to replace "
                        "the model there and its card.\n")
    assert (avg / "model.safetensors").read_bytes() == before

    status, out, _ = average(run, "--last", "2", "--output_dir", avg, "--overwrite", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 0 and "Averaged checkpoint-2, checkpoint-3 into" in out
    assert_holds(avg, mean_of(run / "checkpoint-2", run / "checkpoint-3"))


def test_overwriting_a_finished_run_removes_its_card_and_results(run, tmp_path, monkeypatch, capsys):
    other = make_tiny_model_dir(tmp_path / "other", seed=9)  # a copy of another finished run's model
    describing = ["README.md", "all_results.json", "eval_results.json", "generated_predictions.txt"]
    for name in describing:
        (other / name).write_text("about the model of seed 9\n")

    status, _, err = average(run, "--last", "3", "--output_dir", other, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "Traceback" not in err
    assert ("pass --overwrite to replace the model there and its card, and remove all_results.json, "
            "eval_results.json, generated_predictions.txt, which describe the model there now.") in err
    assert all((other / name).exists() for name in describing)

    status, _, err = average(run, "--last", "3", "--output_dir", other, "--overwrite", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 0
    removed = [name for name in sorted(describing) if name != "README.md"]  # the card is written anew
    assert f"Removed {', '.join(removed)} from {other}: they described the model replaced." in err
    assert not any((other / name).exists() for name in removed)
    assert "seed 9" not in (other / "README.md").read_text()
    assert_holds(other, mean_of(*(run / f"checkpoint-{step}" for step in (1, 2, 3))))


def test_the_averaged_model_has_a_card_of_the_runs_data_and_recipe(run, tmp_path, monkeypatch, capsys, caplog):
    """The averaged folder had no card and no card inputs: its push rendered a card of an unknown run, and a scoring
    run with --source_lang and --target_lang swapped was not warned, as it is for the run's own model."""
    import logging

    from hf_vanilla_transformer.model_card import CARD_INPUTS_FILE
    from hf_vanilla_transformer.training import parse_arguments, warn_about_another_direction

    averaged_row = "Checkpoints averaged into the model (section 6.1)"
    (run / CARD_INPUTS_FILE).write_text(json.dumps({
        "source_lang": "de", "target_lang": "en", "metrics": {"train_samples": 120, "eval_bleu": 31.5},
        "training_args": [["Seed", "42"], [averaged_row, "3"]]}))
    assert average(run, "--last", "2", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch, capsys=capsys)[0] == 0
    inputs = json.loads((tmp_path / "avg" / CARD_INPUTS_FILE).read_text())
    assert (inputs["source_lang"], inputs["target_lang"], inputs["metrics"]) == ("de", "en", {"train_samples": 120})
    assert inputs["training_args"] == [["Seed", "42"], [averaged_row, "checkpoint-2, checkpoint-3 "
                                                                      "(scripts/average_checkpoints.py)"]]
    card = (tmp_path / "avg" / "README.md").read_text()
    assert "German → English" in card and "This model has not been evaluated." in card and "31.5" not in card
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    assert average(run, "--last", "2", "--output_dir", tmp_path / "linked" / "avg", monkeypatch=monkeypatch,
                   capsys=capsys)[0] == 0
    linked = (tmp_path / "linked" / "avg" / "README.md").read_text()
    assert f'model="{tmp_path / "linked" / "avg"}"' in linked and "real" not in linked  # as given, not resolved
    _, data_args, _ = parse_arguments(["--output_dir", str(tmp_path / "scored"), "--source_lang", "en",
                                       "--target_lang", "de", "--train_prefix", "x"])
    with caplog.at_level(logging.WARNING):
        warn_about_another_direction(str(tmp_path / "avg"), data_args, training=False)
    assert any("was trained to translate de -> en" in message for message in caplog.messages)

    (run / CARD_INPUTS_FILE).unlink()  # a run not finished: its settings are not recorded
    assert average(run, "--last", "2", "--output_dir", tmp_path / "avg2", monkeypatch=monkeypatch,
                   capsys=capsys)[0] == 0
    assert "The training data is not recorded with this model." in (tmp_path / "avg2" / "README.md").read_text()


def test_an_empty_output_folder_is_used(run, tmp_path, monkeypatch, capsys):
    (tmp_path / "avg").mkdir()
    status, _, err = average(run, "--last", "2", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 0 and (tmp_path / "avg" / "model.safetensors").is_file()
    assert "Writing model shards" not in err and "Loading weights" not in err  # transformers' bars, of one model


def test_whole_fsdp_checkpoints_are_averaged(run, tmp_path, monkeypatch, capsys):
    """FSDP with whole checkpoints (accelerate launch --fsdp_state_dict_type FULL_STATE_DICT) writes
    pytorch_model_fsdp.bin beside model.safetensors: it was refused as sharded, while the refusal to resume such a
    checkpoint sent the user here."""
    for step in (2, 3):
        (run / f"checkpoint-{step}" / "pytorch_model_fsdp.bin").write_bytes(b"FSDP's own copy")
    status, out, err = average(run, "--last", "2", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                               capsys=capsys)
    assert status == 0, err
    assert "Averaged checkpoint-2, checkpoint-3 into" in out
    assert_holds(tmp_path / "avg", mean_of(run / "checkpoint-2", run / "checkpoint-3"))


@pytest.mark.parametrize("left", ["an empty folder", "a model without the marker"])
def test_incomplete_checkpoints_are_skipped_as_resuming_skips_them(left, run, tmp_path, monkeypatch, capsys):
    (run / "checkpoint-4").mkdir()  # where the run was stopped while saving
    if left == "a model without the marker":
        make_tiny_model_dir(run / "checkpoint-4", seed=4)
    status, out, err = average(run, "--last", "2", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                               capsys=capsys)
    assert status == 0, err
    assert "Skipping incomplete checkpoints (the run was stopped while saving): checkpoint-4\n" in err
    assert "Averaged checkpoint-2, checkpoint-3 into" in out
    assert_holds(tmp_path / "avg", mean_of(run / "checkpoint-2", run / "checkpoint-3"))


def no_weights(run):
    (run / "checkpoint-3" / "model.safetensors").unlink()
    return "checkpoint-3 has no *.safetensors weights"


def empty_folder(run):
    shutil.rmtree(run / "checkpoint-3")
    (run / "checkpoint-3").mkdir()
    return "checkpoint-3 has no config.json"


def truncated_weights(step):
    def damage(run):
        weights = run / f"checkpoint-{step}" / "model.safetensors"
        os.truncate(weights, weights.stat().st_size // 2)
        return f"The weights in {weights} are truncated or corrupt"

    return damage


def no_config(run):
    (run / "checkpoint-3" / "config.json").unlink()
    return "checkpoint-3 has no config.json"


def sharded(run):  # what the Trainer writes under FSDP by default: shards, no config.json or safetensors
    for name in ("config.json", "model.safetensors"):
        (run / "checkpoint-3" / name).unlink()
    (run / "checkpoint-3" / "pytorch_model_fsdp_0").mkdir()
    return ("checkpoint-3 is a sharded FSDP checkpoint (pytorch_model_fsdp_*): averaging needs whole weights. For "
            "checkpoints to average, train under FSDP with whole ones: accelerate launch --fsdp_state_dict_type "
            "FULL_STATE_DICT")


def damaged_generation_config(run):  # was an OSError's traceback
    (run / "checkpoint-3" / "generation_config.json").write_text('{"num_beams": ')
    return "checkpoint-3 holds no loadable generation config"


def damaged_tokenizer(run):  # was a JSONDecodeError's traceback, or "hold different tokenizers"
    (run / "checkpoint-3" / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    return "checkpoint-3 holds no loadable tokenizer"


@pytest.mark.parametrize("damage", [no_weights, empty_folder, truncated_weights(3), truncated_weights(2), no_config,
                                    sharded, damaged_generation_config, damaged_tokenizer],
                         ids=["no weights", "empty folder", "last truncated", "earlier truncated", "no config",
                              "sharded", "damaged generation config", "damaged tokenizer"])
def test_a_checkpoint_that_cannot_be_loaded_is_one_message(damage, run, tmp_path, monkeypatch, capsys):
    for marker in run.glob(f"checkpoint-*/{CHECKPOINT_COMPLETE}"):  # a run that marks no checkpoint complete
        marker.unlink()
    expected = damage(run)
    status, _, err = average(run, "--last", "3", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert expected in err
    assert damage is sharded or "move it out of the run's folder to average the others." in err
    assert not (tmp_path / "avg").exists()  # the folder made for the model is removed with what it held


@pytest.mark.parametrize("output", ["under a file", "/proc/avg"])
def test_an_unwritable_output_folder_is_one_message(output, run, tmp_path, monkeypatch, capsys):
    if output == "under a file":
        (tmp_path / "file").write_text("")
        output = tmp_path / "file" / "avg"
    elif not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    status, _, err = average(run, "--last", "2", "--output_dir", output, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and err.strip().splitlines() == [
        f"average_checkpoints.py: error: Cannot write the averaged model to {output}: "
        f"{'Not a directory' if 'file' in str(output) else 'No such file or directory'}."
    ]


def test_an_output_folder_named_as_a_checkpoint_of_the_run_is_refused(run, monkeypatch, capsys):
    """RUN/checkpoint-9999 was accepted, and later runs of the script called it an incomplete checkpoint (as the
    Trainer's rotation and resuming would take it for one)."""
    status, _, err = average(run, "--last", "2", "--output_dir", run / "checkpoint-9999", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "is named as a checkpoint of the run" in err and str(run / "averaged") in err
    assert not (run / "checkpoint-9999").exists()


@pytest.mark.parametrize("change", ["activation_function", "tokenizer"])
def test_checkpoints_of_different_models_are_not_averaged(change, run, tmp_path, monkeypatch, capsys):
    """Weights of the same names and shapes, but relu in one checkpoint and gelu in the other (or another
    tokenizer), were averaged without a word, into a model with the last one's config: nonsense. What only records
    how a checkpoint was saved (transformers_version, dtype, ...) may differ."""
    config_file = run / "checkpoint-2" / "config.json"
    config = json.loads(config_file.read_text())
    config["transformers_version"] = "0.0.1"  # bookkeeping: no reason to refuse
    config_file.write_text(json.dumps(config))
    assert average(run, "--last", "2", "--output_dir", tmp_path / "same", monkeypatch=monkeypatch,
                   capsys=capsys)[0] == 0
    if change == "activation_function":
        config["activation_function"] = "gelu"
        config_file.write_text(json.dumps(config))
        expected = ("checkpoint-2 and checkpoint-3 are checkpoints of different models: their config.json differ "
                    "(activation_function 'gelu' vs 'relu').")
    else:
        tokenizer = json.loads((run / "checkpoint-2" / "tokenizer.json").read_text())
        # the truncation a save records changes with --max_source_length in a resumed run: the same tokenizer
        tokenizer["truncation"] = {"direction": "Right", "max_length": 7, "strategy": "LongestFirst", "stride": 0}
        (run / "checkpoint-2" / "tokenizer.json").write_text(json.dumps(tokenizer))
        assert average(run, "--last", "2", "--output_dir", tmp_path / "truncated", monkeypatch=monkeypatch,
                       capsys=capsys)[0] == 0
        vocab = tokenizer["model"]["vocab"]
        first, second = list(vocab)[10:12]
        vocab[first], vocab[second] = vocab[second], vocab[first]  # two tokens' ids swapped: another tokenizer
        (run / "checkpoint-2" / "tokenizer.json").write_text(json.dumps(tokenizer))
        expected = "checkpoint-2 and checkpoint-3 hold different tokenizers (tokenizer.json)"
    status, _, err = average(run, "--last", "2", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and expected in err
    assert not (tmp_path / "avg").exists()
    assert average(run, "--last", "1", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                   capsys=capsys)[0] == 0  # as the message advises


def test_a_folder_without_checkpoints_is_not_a_run(tmp_path, monkeypatch, capsys):
    """Not "has 0 checkpoints, fewer than --last 5: lower --last": no --last helps there."""
    (tmp_path / "run").mkdir()
    status, _, err = average(tmp_path / "run", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 2 and "lower --last" not in err
    assert f"{tmp_path / 'run'} has no checkpoints (checkpoint-<step> folders): it is not a training run's" in err


@pytest.fixture(scope="module")
def opus_mt_tokenizer(tmp_path_factory):
    """The files of a MarianTokenizer (vocab.json, source.spm, target.spm, tokenizer_config.json; no tokenizer.json),
    as runs started from an opus-mt model save them in each checkpoint."""
    pytest.importorskip("sentencepiece")
    from test_marian_finetuning import make_opus_mt_dir

    model_dir = make_opus_mt_dir(tmp_path_factory.mktemp("opus"))
    return {name: (model_dir / name).read_bytes()
            for name in ("vocab.json", "source.spm", "target.spm", "tokenizer_config.json")}


def another_sentencepiece_model(run):
    import sentencepiece

    text = run / "text.txt"
    text.write_text("\n".join(["Ein Hund läuft über die Wiese.", "A dog runs across the meadow."] * 20) + "\n")
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(run / "other"), vocab_size=40,
                                             model_type="bpe", bos_id=-1, eos_id=2, unk_id=1, pad_id=-1,
                                             minloglevel=2)
    return (run / "other.model").read_bytes()


@pytest.mark.parametrize("change", [None, "vocabulary", "target.spm"])
def test_checkpoints_with_different_sentencepiece_tokenizers_are_not_averaged(change, opus_mt_tokenizer, run, tmp_path,
                                                                              monkeypatch, capsys):
    """Only tokenizer.json was compared: checkpoints of a run started from a Marian model hold a MarianTokenizer
    (vocab.json and sentencepiece models) instead, and those of two vocabularies were averaged without a word."""
    for step in (2, 3):
        (run / f"checkpoint-{step}" / "tokenizer.json").unlink()
        for name, content in opus_mt_tokenizer.items():
            (run / f"checkpoint-{step}" / name).write_bytes(content)
    if change == "vocabulary":
        vocab_file = run / "checkpoint-2" / "vocab.json"
        vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
        first, second = list(vocab)[10:12]
        vocab[first], vocab[second] = vocab[second], vocab[first]  # two tokens' ids swapped
        vocab_file.write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    elif change == "target.spm":  # the same vocabulary, but the text split into other pieces
        (run / "checkpoint-2" / "target.spm").write_bytes(another_sentencepiece_model(tmp_path))
    status, out, err = average(run, "--last", "2", "--output_dir", tmp_path / "avg", monkeypatch=monkeypatch,
                               capsys=capsys)
    if change is None:
        assert status == 0 and "Averaged checkpoint-2, checkpoint-3 into" in out, err
        assert (tmp_path / "avg" / "source.spm").read_bytes() == opus_mt_tokenizer["source.spm"]
        return
    expected = "other vocabularies" if change == "vocabulary" else "target.spm"
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert f"checkpoint-2 and checkpoint-3 hold different tokenizers ({expected}), whose token ids mean" in err
    assert not (tmp_path / "avg").exists()


@pytest.mark.parametrize("inside", ["", "avg"])
def test_an_output_folder_that_is_or_lies_in_another_runs_checkpoint_is_refused(run, tmp_path, monkeypatch, capsys,
                                                                                  inside):
    """Another run's checkpoint-12 with --overwrite got the averaged weights beside its own optimizer state and
    trainer_state.json: resuming that run went on from them without a word. A folder inside a checkpoint is deleted
    with it by the Trainer's checkpoint rotation."""
    victim = tmp_path / "other_run" / "checkpoint-12"
    make_tiny_model_dir(victim, seed=12)
    (victim / "trainer_state.json").write_text(json.dumps({"global_step": 12}))
    before = (victim / "model.safetensors").read_bytes()
    output = victim / inside if inside else victim
    capsys.readouterr()
    status, _, err = average(run, "--last", "2", "--output_dir", output, "--overwrite", monkeypatch=monkeypatch,
                             capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{output} {'is' if not inside else f'lies in {victim},'} a training run's checkpoint: resuming" in err
    assert (victim / "model.safetensors").read_bytes() == before and not (victim / "avg").exists()


def test_checkpoints_of_a_marian_model_are_averaged(tmp_path, monkeypatch, capsys):
    """A MarianMTModel computes its sinusoid table rather than saving it: averaging its checkpoints (a Seq2SeqTrainer
    of one's own saves them) stopped in a traceback saying the table's weights were missing."""
    from transformers import AutoTokenizer, MarianConfig, MarianMTModel

    tokenizer = AutoTokenizer.from_pretrained(make_tiny_model_dir(tmp_path / "tiny"))
    run_dir = tmp_path / "marian_run"
    for step in (1, 2):
        torch.manual_seed(step)
        MarianMTModel(MarianConfig(
            vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0, eos_token_id=2,
            decoder_start_token_id=1)).save_pretrained(run_dir / f"checkpoint-{step}")
        tokenizer.save_pretrained(run_dir / f"checkpoint-{step}")
    status, out, err = average(run_dir, "--last", "2", "--output_dir", tmp_path / "averaged", monkeypatch=monkeypatch,
                               capsys=capsys)
    assert status == 0, err
    assert_holds(tmp_path / "averaged", mean_of(run_dir / "checkpoint-1", run_dir / "checkpoint-2"))
    sinusoids = [MarianMTModel.from_pretrained(folder).model.encoder.embed_positions.weight
                 for folder in (tmp_path / "averaged", run_dir / "checkpoint-1")]
    torch.testing.assert_close(*sinusoids)
