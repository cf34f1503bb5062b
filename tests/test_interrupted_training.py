"""Interrupted training: a run killed with SIGKILL resumes and ends where an uninterrupted run ends, and a
checkpoint left half-written by a kill is never resumed from."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO

from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.checkpoints import (
    CHECKPOINT_COMPLETE,
    check_same_run,
    check_training_left,
    finish_without_training,
    is_complete_checkpoint,
    last_complete_checkpoint,
    resume_checkpoint,
    run_checkpoints,
)
from hf_vanilla_transformer.training import main, parse_arguments

SCRIPT = str(REPO / "scripts" / "train_translation.py")
RUN = [
    "--number_words_train_size", "400", "--number_words_eval_size", "8", "--d_model", "32", "--layers", "1",
    "--attention_heads", "4", "--ffn_dim", "64", "--vocab_size", "300", "--max_steps", "120", "--save_strategy",
    "steps", "--save_steps", "20", "--logging_steps", "1", "--eval_strategy", "no", "--warmup_steps", "20",
    "--per_device_train_batch_size", "16", "--seed", "7", "--save_total_limit", "10",
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def command(output_dir, *extra):
    return [sys.executable, SCRIPT, "--output_dir", str(output_dir), *RUN, *extra]


def losses(output_dir):
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    subprocess.run(command(out), check=True, capture_output=True, env=ENV, cwd=REPO, timeout=600)
    return out


def test_sigkill_then_resume_ends_with_the_same_loss(uninterrupted, tmp_path):
    out = tmp_path / "killed"
    process = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
    deadline = time.time() + 300
    while not (out / "checkpoint-40" / CHECKPOINT_COMPLETE).exists():
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "trainer_state.json").exists()  # it did not finish
    resumed_from = last_complete_checkpoint(out)
    assert resumed_from is not None and int(resumed_from.name.split("-")[1]) < 120

    checkpoints = run_checkpoints(out)
    for age, folder in enumerate(checkpoints):  # dated as a copy may date them (cp -r): the latest step oldest
        os.utime(folder, (time.time() - 100 - age, time.time() - 100 - age))
    resumed = subprocess.run(
        # --save_total_limit 2: the checkpoint resumed from is deleted before the run ends (its step is read first)
        command(out, "--resume_from_checkpoint", "true", "--log_level", "info", "--save_total_limit", "2"), check=True,
        capture_output=True,
        text=True, env=ENV, cwd=REPO, timeout=600,
    )
    # the second process started at the checkpoint's step (a deterministic run that ignored the flag would log the
    # same losses from step 1)
    step = int(resumed_from.name.split("-")[1])
    log = resumed.stdout + resumed.stderr
    assert re.search(rf"Resuming training from checkpoint with epoch \d+ and global step {step}\b", log)
    assert "Dating the checkpoints of" in log  # in step order, for --save_total_limit (test below)
    # the card's training time and mean loss are the second process's, and say so
    card = (out / "README.md").read_text()
    assert f"Training time, evaluations included, after resuming at step {step} (s)" in card
    assert f"Mean training loss, after resuming at step {step}" in card
    assert "Training time, evaluations included (s)" in (uninterrupted / "README.md").read_text()
    expected, got = losses(uninterrupted), losses(out)
    assert max(got) == max(expected) == 120
    for step in range(int(resumed_from.name.split("-")[1]) + 1, 121):
        assert got[step] == pytest.approx(expected[step], rel=1e-4, abs=1e-4), step


def test_half_written_checkpoints_are_not_resumed_from(uninterrupted, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    last = out / "checkpoint-120"
    assert is_complete_checkpoint(last)
    # what a kill during saving leaves: some files written, the optimizer state and the marker not
    (last / CHECKPOINT_COMPLETE).unlink()
    (last / "optimizer.pt").unlink()
    assert last_complete_checkpoint(out) == out / "checkpoint-100"

    _, _, args = parse_arguments(["--output_dir", str(out), "--resume_from_checkpoint", "true"])
    assert resume_checkpoint(args) == str(out / "checkpoint-100")
    _, _, args = parse_arguments(["--output_dir", str(out), "--resume_from_checkpoint", str(last)])
    with pytest.raises(ValueError, match="incomplete"):
        resume_checkpoint(args)
    _, _, args = parse_arguments(["--output_dir", str(tmp_path / "empty"), "--resume_from_checkpoint", "true"])
    with pytest.raises(ValueError, match="no complete checkpoint"):
        resume_checkpoint(args)
    # the run's folder named instead of a checkpoint; a whole checkpoint without this script's marker
    _, _, args = parse_arguments(["--output_dir", str(tmp_path / "new"), "--resume_from_checkpoint", str(out)])
    with pytest.raises(ValueError, match=f"{out} is a run's folder: name one of its checkpoints \\(the last complete "
                                         f"one: {out / 'checkpoint-100'}\\), or pass --resume_from_checkpoint true"):
        resume_checkpoint(args)
    (out / "checkpoint-100" / CHECKPOINT_COMPLETE).unlink()
    _, _, args = parse_arguments(["--output_dir", str(out), "--resume_from_checkpoint", str(out / "checkpoint-100")])
    with pytest.raises(ValueError, match="has no checkpoint_complete.json, .* saved by another script"):
        resume_checkpoint(args)
    # a folder that is no checkpoint at all (empty, of data, a saved model) was called one the run stopped writing
    model = tmp_path / "model"
    shutil.copytree(out, model, ignore=shutil.ignore_patterns("checkpoint-*"))
    (tmp_path / "data").mkdir()
    for folder, said in ((tmp_path / "data", ""), (model, " (a saved model: fine-tune it with --model_name_or_path)")):
        _, _, args = parse_arguments(["--output_dir", str(tmp_path / "new"), "--resume_from_checkpoint", str(folder)])
        with pytest.raises(ValueError) as error:
            resume_checkpoint(args)
        assert str(error.value).startswith(f"--resume_from_checkpoint {folder} is not a training checkpoint{said}: ")


def cut(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("damage, said", [
    (lambda last: cut(last / "model.safetensors"), "its model.safetensors is truncated or corrupt (Error while "
                                                   "deserializing header"),
    (lambda last: (last / "model.safetensors").unlink(), "it holds no model weights (model.safetensors)"),
    (lambda last: cut(last / "optimizer.pt"), "its optimizer.pt is truncated or corrupt"),
    (lambda last: cut(last / "scheduler.pt"), "its scheduler.pt is truncated or corrupt"),
    (lambda last: cut(last / "rng_state.pth"), "its rng_state.pth is truncated or corrupt"),
    (lambda last: cut(last / "trainer_state.json"), "its trainer_state.json cannot be read as JSON"),
    (lambda last: (last / "trainer_state.json").unlink(), "it has no trainer_state.json"),
    (lambda last: cut(last / "config.json"), "its config.json cannot be read as JSON"),
    # deleted to save disk: a new optimizer, or the warmup again, without a word
    (lambda last: (last / "optimizer.pt").unlink(), "it has no optimizer.pt (Adam's moments"),
    (lambda last: (last / "scheduler.pt").unlink(), "it has no scheduler.pt (the learning-rate schedule"),
])
def test_a_damaged_checkpoint_is_named_not_resumed(uninterrupted, tmp_path, damage, said):
    """A checkpoint written whole, then damaged (a copy stopped midway, files deleted by hand): a truncated file was a
    traceback from safetensors, torch.load or json; a missing trainer_state.json said to move the earlier checkpoints
    out; a missing optimizer.pt or scheduler.pt resumed with a new optimizer or a new warmup, without a word."""
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    last = out / "checkpoint-120"
    damage(last)
    for resume in ("true", str(last)):
        _, _, args = parse_arguments(["--output_dir", str(out), "--resume_from_checkpoint", resume])
        with pytest.raises(InputError) as error:
            resume_checkpoint(args)
        message = str(error.value)
        assert message.startswith(f"{last} is damaged: {said}"), message
        aside = out / "damaged"
        assert message.endswith(f"Resume from the one before it: move it out of the run's folder (mkdir {aside} && mv "
                                f"{last} {aside}), then pass --resume_from_checkpoint true, which picks the last "
                                "complete one (checkpoint-100).")
    shutil.move(str(last), str(tmp_path / "aside"))  # as the message says
    _, _, args = parse_arguments(["--output_dir", str(out), "--resume_from_checkpoint", "true"])
    assert resume_checkpoint(args) == str(out / "checkpoint-100")


def test_resume_from_checkpoint_yes_is_pointed_at_true(tmp_path):
    for value in ("yes", "TRUE", "1"):
        _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--resume_from_checkpoint", value])
        with pytest.raises(InputError, match=re.escape(f"--resume_from_checkpoint {value}: no such checkpoint folder "
                                                       "(`true` resumes --output_dir's last complete checkpoint).")):
            resume_checkpoint(args)


@pytest.mark.parametrize("flags, said", [
    (["--learning_rate", "0.01"], "--learning_rate 0.01 (the run's: 0.002)"),  # ignored: the optimizer's state has it
    (["--weight_decay", "0.5"], "--weight_decay 0.5 (the run's: 0)"),
    (["--adam_beta2", "0.5"], "--adam_beta2 0.5 (the run's: 0.98)"),
    (["--warmup_steps", "100"], "--warmup_steps 100 (the run's: 20)"),  # took effect mid-run
    # a share of the steps: 20 of 120 as the run had them, but 40 of a run extended to 240
    (["--warmup_steps", "0.1666", "--max_steps", "240"],
     "--warmup_steps 0.1666, 40 of these steps (the run's: 20): give --warmup_steps 20 to keep the run's"),
    (["--lr_scheduler_type", "linear"], "--lr_scheduler_type linear (the run's: inverse_sqrt)"),
    (["--seed", "8"], "--seed 8 (the run's: 7)"),  # other batches from the step it resumes at
    (["--per_device_train_batch_size", "8"], "--per_device_train_batch_size 8 (the run's: 16)"),
    (["--label_smoothing_factor", "0.2"], "--label_smoothing_factor 0.2 (the run's: 0.1)"),
    (["--dataloader_drop_last", "true"], "--dataloader_drop_last true (the run's: false)"),  # other batches, silently
    (["--train_sampling_strategy", "group_by_length"], "--train_sampling_strategy group_by_length (the run's: random)"),
])
def test_resuming_with_other_training_flags_is_refused(uninterrupted, flags, said):
    """A changed --learning_rate, --weight_decay or Adam beta was ignored on resuming (the Trainer restores them
    with the optimizer's state) while the model card reported it; --warmup_steps or another schedule, the seed or the
    batch size changed the run from the step it resumed at. Each without a word."""
    checkpoint = uninterrupted / "checkpoint-100"
    _, data_args, training_args = parse_arguments(["--output_dir", str(uninterrupted), *RUN, *flags])
    with pytest.raises(InputError, match="was saved by a run with other flags than these: ") as error:
        check_same_run(str(checkpoint), training_args, data_args)
    assert said in str(error.value) and f"--model_name_or_path {checkpoint}" in str(error.value)


def test_resuming_token_batches_with_bucket_shapes_switched_is_refused(uninterrupted, tmp_path):
    """--bucket_shapes (on by default on a GPU) packs token batches as they will be padded: switched on resuming
    (a GPU run resumed with --use_cpu), the epoch had other batches and the Trainer skipped the wrong ones."""
    checkpoint = tmp_path / "checkpoint-100"
    shutil.copytree(uninterrupted / "checkpoint-100", checkpoint)
    record = json.loads((checkpoint / CHECKPOINT_COMPLETE).read_text())
    record["arguments"].update(max_tokens_per_batch=1000, bucket_shapes=False)  # as a token-batched run saves it
    (checkpoint / CHECKPOINT_COMPLETE).write_text(json.dumps(record))
    _, data_args, training_args = parse_arguments(
        ["--output_dir", str(tmp_path), *RUN, "--max_tokens_per_batch", "1000", "--bucket_shapes", "true"])
    with pytest.raises(InputError, match=r"--bucket_shapes true \(the run's: false\)"):
        check_same_run(str(checkpoint), training_args, data_args)
    _, data_args, training_args = parse_arguments(["--output_dir", str(tmp_path), *RUN, "--bucket_shapes", "true"])
    record["arguments"].update(max_tokens_per_batch=None)  # a batch size in sentences: the padding alone changes
    (checkpoint / CHECKPOINT_COMPLETE).write_text(json.dumps(record))
    check_same_run(str(checkpoint), training_args, data_args)


def test_a_longer_resumed_run_is_refused_where_the_schedule_follows_the_length(uninterrupted, tmp_path):
    """The README's CPU recipe decays linearly to its last step: resumed with a larger --max_steps, the Trainer made
    the schedule anew and the learning rate jumped at the step resumed from (1.0e-3 -> 1.3e-3), without a word. The
    paper's inverse_sqrt does not look at the length: a longer run resumes."""
    import dataclasses

    _, data_args, training_args = parse_arguments(["--output_dir", str(uninterrupted), *RUN])
    assert training_args.lr_scheduler_type == "inverse_sqrt"
    check_same_run(str(uninterrupted / "checkpoint-100"), dataclasses.replace(training_args, max_steps=400), data_args)
    linear = tmp_path / "checkpoint-100"
    shutil.copytree(uninterrupted / "checkpoint-100", linear)
    record = json.loads((linear / CHECKPOINT_COMPLETE).read_text())
    record["arguments"]["lr_scheduler_type"] = "linear"
    (linear / CHECKPOINT_COMPLETE).write_text(json.dumps(record))
    saved_steps = json.loads((linear / "trainer_state.json").read_text())["max_steps"]
    as_run = dataclasses.replace(training_args, lr_scheduler_type="linear", max_steps=saved_steps)
    check_same_run(str(linear), as_run, data_args)
    with pytest.raises(InputError, match=rf"--max_steps 400 \(the run's: {saved_steps}\): the linear schedule's learning "
                                         "rate follows the run's length, and would jump at the step resumed from"):
        check_same_run(str(linear), dataclasses.replace(as_run, max_steps=400), data_args)
    with pytest.raises(InputError, match=r"or fine-tune from it into a new --output_dir to train on \(--model_name_or_"
                                         r"path .*; resumed longer, the linear schedule's learning rate would jump\)"):
        check_training_left(str(linear), dataclasses.replace(as_run, max_steps=100))


def test_resuming_with_the_same_flags_other_languages_or_data(uninterrupted, tmp_path, caplog):
    """The flags the run started with resume, with AdamW fused (the GPU default) or not; other languages are
    refused (the checkpoint says it learned de -> en); other training data is a warning; a checkpoint saved by an
    older version, whose mark records neither, is not checked."""
    import dataclasses

    checkpoint = str(uninterrupted / "checkpoint-100")
    _, data_args, training_args = parse_arguments(["--output_dir", str(uninterrupted), *RUN])
    record = json.loads((uninterrupted / "checkpoint-100" / CHECKPOINT_COMPLETE).read_text())
    assert record["run"]["source_lang"] == "de" and record["arguments"]["learning_rate"] == 0.002
    with caplog.at_level("WARNING", logger="hf_vanilla_transformer.checkpoints"):
        check_same_run(checkpoint, training_args, data_args)
        check_same_run(checkpoint, dataclasses.replace(training_args, optim="adamw_torch"), data_args)  # not fused
        check_same_run(checkpoint, dataclasses.replace(training_args, learning_rate=0.002 * (1 + 1e-9)), data_args)
        check_same_run(checkpoint, dataclasses.replace(training_args, warmup_steps=0.1666), data_args)  # 20 of 120
    dated = tmp_path / "dated" / "checkpoint-100"  # a date for a seed: integers compare exactly, not within 1e-6
    dated.mkdir(parents=True)
    (dated / CHECKPOINT_COMPLETE).write_text(json.dumps({**record, "arguments": {**record["arguments"],
                                                                                "seed": 20240101}}))
    with pytest.raises(InputError, match=r"--seed 20240102 \(the run's: 20240101\)"):
        check_same_run(str(dated), dataclasses.replace(training_args, seed=20240102), data_args)
    record_by_epochs = json.loads((uninterrupted / "checkpoint-100" / "trainer_state.json").read_text())
    assert record_by_epochs["max_steps"] == 120  # a run by epochs: the steps of as many epochs as given now
    by_epochs = dataclasses.replace(training_args, max_steps=-1, warmup_steps=0.1666,
                                    num_train_epochs=record_by_epochs["num_train_epochs"])
    check_same_run(checkpoint, by_epochs, data_args)
    with pytest.raises(InputError, match=r"--warmup_steps 0.1666, 40 of these steps \(the run's: 20\)"):
        check_same_run(checkpoint, dataclasses.replace(by_epochs, num_train_epochs=2 * by_epochs.num_train_epochs),
                       data_args)
    assert record["arguments"]["optim"] == training_args.optim == "adamw_torch_fused" and caplog.text == ""
    swapped = dataclasses.replace(data_args, source_lang="en", target_lang="de")
    with pytest.raises(InputError, match=r"--source_lang en --target_lang de \(the run's: de -> en\)"):
        check_same_run(checkpoint, training_args, swapped)
    with caplog.at_level("WARNING", logger="hf_vanilla_transformer.checkpoints"):
        check_same_run(checkpoint, training_args, dataclasses.replace(data_args, max_train_samples=100))
    assert "was trained with other data than this run gives: max_train_samples None (now: 100)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="hf_vanilla_transformer.checkpoints"):  # the built-in corpus's size, and
        # the pairs left out as too long: other data under the same description, which went unnoticed
        check_same_run(checkpoint, training_args, dataclasses.replace(data_args, number_words_train_size=500,
                                                                      max_length_chars=20))
    assert "max_length_chars None (now: 20); number_words_train_size 400 (now: 500)" in caplog.text
    old = tmp_path / "checkpoint-100"
    old.mkdir()
    (old / CHECKPOINT_COMPLETE).write_text(json.dumps({"global_step": 100}))
    check_same_run(str(old), dataclasses.replace(training_args, learning_rate=0.5), swapped)
    # but its schedule's rate, which the Trainer restores: a new --learning_rate was ignored, and then recorded
    shutil.copy(uninterrupted / "checkpoint-100" / "scheduler.pt", old)
    with pytest.raises(InputError, match=r"--learning_rate 0.5 \(the run's: 0.002\): give --learning_rate 0.002 \("):
        check_same_run(str(old), dataclasses.replace(training_args, learning_rate=0.5), swapped)


def test_resuming_from_a_checkpoint_before_later_ones_is_refused(uninterrupted, tmp_path, monkeypatch):
    """Resumed from checkpoint-60 (as the message for a checkpoint past --max_steps advises), a run with
    checkpoints up to 120 averaged checkpoints 100 and 120 into its model at step 80, and a later
    --resume_from_checkpoint true picked checkpoint-120. The later ones must be moved away first; and averaging takes
    none past the run's last step."""
    from types import SimpleNamespace

    from hf_vanilla_transformer import checkpoints, training

    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    with pytest.raises(InputError, match=f"holds checkpoints past {out / 'checkpoint-60'} \\(step 60\\): "
                                         "checkpoint-80, checkpoint-100, checkpoint-120. "):
        main(list(map(str, ["--output_dir", out, *RUN, "--resume_from_checkpoint", out / "checkpoint-60"])))
    later = tmp_path / "later"
    later.mkdir()
    for step in (80, 100, 120):
        shutil.move(out / f"checkpoint-{step}", later)
    checkpoints.check_no_later_checkpoints(str(out / "checkpoint-60"), str(out))
    for step in (100, 120):  # as they were when averaging followed a resume from checkpoint-60 to step 80
        shutil.move(later / f"checkpoint-{step}", out)
    averaged = []
    monkeypatch.setattr(training, "load_averaged_weights", lambda model, checkpoints: averaged.extend(checkpoints))
    trainer = SimpleNamespace(args=SimpleNamespace(output_dir=str(out), average_last_checkpoints=3), model=None,
                              state=SimpleNamespace(global_step=80), is_world_process_zero=lambda: True,
                              accelerator=SimpleNamespace(wait_for_everyone=lambda: None))
    shutil.move(later / "checkpoint-80", out)
    assert training.average_last_checkpoints(trainer) == 3
    assert [folder.name for folder in averaged] == ["checkpoint-40", "checkpoint-60", "checkpoint-80"]


def test_a_run_resumed_into_a_new_folder_averages_the_checkpoints_it_resumed_after(uninterrupted, tmp_path,
                                                                                    monkeypatch):
    """Resumed from runs/a/checkpoint-80 into a new runs/b, a run averaging its last 3 checkpoints averaged b's 2 (a
    warning said it saved only 2), where the uninterrupted run averages checkpoints 80, 100 and 120."""
    from types import SimpleNamespace

    from hf_vanilla_transformer import training

    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(uninterrupted, first, ignore=shutil.ignore_patterns("checkpoint-100", "checkpoint-120"))
    for step in (100, 120):  # what the resumed run saved
        shutil.copytree(uninterrupted / f"checkpoint-{step}", second / f"checkpoint-{step}")
    averaged = []
    monkeypatch.setattr(training, "load_averaged_weights", lambda model, checkpoints: averaged.extend(checkpoints))
    trainer = SimpleNamespace(args=SimpleNamespace(output_dir=str(second), average_last_checkpoints=3), model=None,
                              state=SimpleNamespace(global_step=120), is_world_process_zero=lambda: True,
                              accelerator=SimpleNamespace(wait_for_everyone=lambda: None))
    assert training.average_last_checkpoints(trainer, str(first / "checkpoint-80")) == 3
    assert averaged == [first / "checkpoint-80", second / "checkpoint-100", second / "checkpoint-120"]


def test_a_run_resumed_from_another_folder_into_one_with_checkpoints_is_refused(uninterrupted, tmp_path):
    """Resumed from another folder's checkpoint into an --output_dir holding a run's checkpoints, the run saved its
    own beside them and averaged checkpoint-30 of the one with checkpoint-50 of the other, without a word."""
    from hf_vanilla_transformer import checkpoints

    other = tmp_path / "other"
    other.mkdir()
    shutil.copytree(uninterrupted / "checkpoint-20", other / "checkpoint-20")  # another run's, as far as it goes
    with pytest.raises(InputError, match=f"--output_dir {other} holds checkpoints of a run \\(checkpoint-20\\), and "
                                         f"--resume_from_checkpoint {uninterrupted / 'checkpoint-60'} is another"):
        main(list(map(str, ["--output_dir", other, *RUN, "--resume_from_checkpoint", uninterrupted / "checkpoint-60"])))
    assert sorted(path.name for path in other.iterdir()) == ["checkpoint-20"]
    checkpoints.check_no_later_checkpoints(str(uninterrupted / "checkpoint-60"), str(tmp_path / "empty"))  # allowed


def test_model_weights_are_only_written_as_safetensors(uninterrupted):
    files = [p for p in uninterrupted.rglob("*") if p.is_file()]
    assert any(p.name == "model.safetensors" for p in files)
    # the Trainer's own optimizer/scheduler/RNG/arguments state is torch-pickled; no model weights are
    trainer_state = {"optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"}
    pickled = {p.name for p in files if p.suffix in {".bin", ".pt", ".pth", ".pkl", ".ckpt", ".h5", ".msgpack"}}
    assert pickled <= trainer_state, pickled - trainer_state


def test_a_run_that_trained_all_its_epochs_is_not_resumed_into_a_training_loss_of_0(tmp_path):
    """--resume_from_checkpoint true on a run by epochs whose last checkpoint is its last step trained nothing, then
    wrote train_loss 0.0 over its results and its card ("Mean training loss, after resuming at step 8: 0"), as a run
    by --max_steps no longer does."""
    out = tmp_path / "run"
    run = ["--output_dir", out, "--number_words_train_size", "64", "--number_words_eval_size", "4", "--d_model", "16",
           "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32", "--per_device_train_batch_size", "16",
           "--num_train_epochs", "2", "--save_strategy", "epoch", "--disable_tqdm", "true", "--do_eval", "false",
           "--do_predict", "false", "--average_last_checkpoints", "0"]
    main(list(map(str, run)))
    results = {name: (out / name).read_text() for name in ("all_results.json", "train_results.json", "README.md")}
    first, last = run_checkpoints(out)
    steps = [int(checkpoint.name.split("-")[1]) for checkpoint in (first, last)]
    for flags, message, advice in [
        ([], f"{last} is at step {steps[1]}, the end of --num_train_epochs 2: the training is complete",
         f"Its model is saved in {out}: score it with --model_name_or_path {out} --do_train false"),
        (["--num_train_epochs", "1"], f"{last} is at epoch 2, past --num_train_epochs 1: there is nothing left", ""),
        (["--resume_from_checkpoint", first, "--num_train_epochs", "1"],  # the run's model is another step's
         f"{first} is at step {steps[0]}, the end of --num_train_epochs 1: the training is complete",
         f"score its last checkpoint with --model_name_or_path {first} --do_train false"),
    ]:
        with pytest.raises(InputError, match=re.escape(message)) as error:
            main(list(map(str, [*run, "--resume_from_checkpoint", "true", *flags])))
        assert advice in str(error.value)
    assert results == {name: (out / name).read_text() for name in results}
    _, _, args = parse_arguments(list(map(str, run)))
    check_training_left(str(first), args)  # an epoch left to train
    # a run that averages its last checkpoints is finished by averaging as many (the default --last is 5)
    _, _, args = parse_arguments(list(map(str, [*run, "--average_last_checkpoints", "2"])))
    assert f"average_checkpoints.py {out} --last 2 --output_dir" in finish_without_training(str(first), args)


def test_a_run_by_epochs_resumed_on_less_data_is_not_reported_as_trained(tmp_path):
    """Resumed with less data (--max_train_samples, a smaller corpus), a run by epochs whose checkpoint lay past the
    steps the new data makes trained nothing, then wrote a training loss of 0 into its results and card, and
    averaged its checkpoints as the finished model."""
    run = ["--number_words_train_size", "64", "--number_words_eval_size", "4", "--d_model", "16", "--layers", "1",
           "--attention_heads", "2", "--ffn_dim", "32", "--per_device_train_batch_size", "16",
           "--num_train_epochs", "2", "--save_strategy", "epoch", "--disable_tqdm", "true", "--do_eval", "false",
           "--do_predict", "false", "--average_last_checkpoints", "0"]
    main(["--output_dir", str(tmp_path / "run"), *run])
    first = run_checkpoints(tmp_path / "run")[0]
    step = int(first.name.split("-")[1])
    with pytest.raises(InputError, match=re.escape(
            f"The checkpoint resumed from is at step {step}, and --num_train_epochs 2 of the training data given now "
            "makes 2 steps: there is nothing left to train.")):
        main(["--output_dir", str(tmp_path / "resumed"), *run, "--number_words_train_size", "16",
              "--resume_from_checkpoint", str(first)])
    assert not (tmp_path / "resumed" / "all_results.json").exists()


def test_a_kill_between_saving_a_checkpoint_and_marking_it_leaves_the_earlier_one(tmp_path, monkeypatch):
    """The Trainer deleted the checkpoints past --save_total_limit as it saved a new one, before the new one was
    marked complete: a run killed in between kept no checkpoint to resume from."""
    from hf_vanilla_transformer.trainer import MarkCheckpointComplete

    mark = MarkCheckpointComplete.on_save

    def killed_at_step_2(self, args, state, control, **kwargs):
        if state.global_step == 2:
            raise KeyboardInterrupt
        return mark(self, args, state, control, **kwargs)

    monkeypatch.setattr(MarkCheckpointComplete, "on_save", killed_at_step_2)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        main(["--output_dir", str(out), *TINY_RUN, "--average_last_checkpoints", "0", "--save_total_limit", "1"])
    assert last_complete_checkpoint(out) == out / "checkpoint-1"
    monkeypatch.setattr(MarkCheckpointComplete, "on_save", mark)
    main(["--output_dir", str(out), *TINY_RUN, "--average_last_checkpoints", "0", "--save_total_limit", "1",
          "--max_steps", "3", "--overwrite_output_dir", "true"])
    assert [folder.name for folder in run_checkpoints(out)] == ["checkpoint-3"]  # the limit still holds


def test_a_copied_runs_checkpoints_are_deleted_by_step(tmp_path):
    """transformers 5 deletes checkpoints beyond --save_total_limit oldest first by their folders' times: in a run
    copied with `cp -r` those are the copy's order, and resuming kept checkpoint-15 over checkpoint-20."""
    from transformers.trainer_utils import rotate_checkpoints

    from hf_vanilla_transformer.checkpoints import order_checkpoint_times_by_step

    steps = [5, 10, 15, 20, 25]
    for age, step in zip([3, 1, 5, 4, 2], steps):  # as a copy dated them
        (tmp_path / f"checkpoint-{step}").mkdir()
        os.utime(tmp_path / f"checkpoint-{step}", (time.time() - 100 * age, time.time() - 100 * age))
    order_checkpoint_times_by_step(tmp_path)
    (tmp_path / "checkpoint-30").mkdir()  # the resumed run's next save
    rotate_checkpoints(str(tmp_path), save_total_limit=3, use_mtime=True)  # as Trainer._save_checkpoint calls it
    assert [p.name for p in run_checkpoints(tmp_path)] == ["checkpoint-20", "checkpoint-25", "checkpoint-30"]


def test_ctrl_c_while_scoring_the_trained_model_says_it_is_saved(tmp_path, monkeypatch):
    """The model is saved before the final evaluation: Ctrl-C there said only "interrupted", and left no model card
    beside the model (one without scores now, rendered again once they are made)."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer

    def predict(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "predict", predict)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt, match=re.escape(f"the run's model is saved in {out}, not scored: score it "
                                                          f"with this run's data flags and --model_name_or_path {out} "
                                                          "--do_train false")):
        main(list(map(str, ["--output_dir", out, "--number_words_train_size", "32", "--number_words_eval_size", "4",
                            "--d_model", "16", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32",
                            "--max_steps", "1", "--save_strategy", "no", "--eval_strategy", "no",
                            "--average_last_checkpoints", "0", "--disable_tqdm", "true"])))
    assert (out / "model.safetensors").is_file()
    assert (out / "model_card_inputs.json").is_file()
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "built-in `number_words` corpus" in card and "eval_bleu" not in card
    from hf_vanilla_transformer import training

    def card(*args, **kwargs):  # Ctrl-C while the card is written, before the scoring: said "interrupted." alone
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "save_run_card", card)
    with pytest.raises(KeyboardInterrupt, match=re.escape(f"the run's model is saved in {out}, not scored")):
        main(list(map(str, ["--output_dir", out, "--number_words_train_size", "32", "--number_words_eval_size", "4",
                            "--d_model", "16", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32",
                            "--max_steps", "1", "--save_strategy", "no", "--eval_strategy", "no",
                            "--average_last_checkpoints", "0", "--disable_tqdm", "true", "--overwrite_output_dir"])))


TINY_RUN = ["--number_words_train_size", "32", "--number_words_eval_size", "4", "--d_model", "16", "--layers", "1",
            "--attention_heads", "2", "--ffn_dim", "32", "--max_steps", "2", "--save_strategy", "steps",
            "--save_steps", "1", "--eval_strategy", "no", "--average_last_checkpoints", "2", "--disable_tqdm", "true"]


def test_ctrl_c_after_the_training_says_what_is_saved_and_how_to_finish(tmp_path, monkeypatch):
    """Ctrl-C while averaging the last checkpoints (or saving the model), and while the card was written after the
    scoring, said "interrupted." alone; in the second case the card was left without the scores beside it."""
    import signal

    from hf_vanilla_transformer import training

    out = tmp_path / "run"
    averaging = training.average_last_checkpoints

    def stopped_averaging(trainer, resumed_from=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "average_last_checkpoints", stopped_averaging)
    with pytest.raises(KeyboardInterrupt, match=re.escape(
            "the training is complete and its checkpoints are saved, but the run's model is not: run the same "
            "command with --resume_from_checkpoint true, which says how to finish it.")):
        main(["--output_dir", str(out), *TINY_RUN])
    monkeypatch.setattr(training, "average_last_checkpoints", averaging)

    writing = training.save_run_card
    calls = []

    def ctrl_c_while_writing(*args, **kwargs):  # a real SIGINT, in the second card's writing (the scored one)
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return writing(*args, **kwargs)

    monkeypatch.setattr(training, "save_run_card", ctrl_c_while_writing)
    with pytest.raises(KeyboardInterrupt, match=re.escape(f"the run's results are saved in {out}.")):
        main(["--output_dir", str(out), *TINY_RUN, "--overwrite_output_dir", "true"])
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| Split | BLEU | chrF | Exact match (%) | Sentences |" in card  # written whole, with the scores (none before the scoring)
    assert (out / "generated_predictions.txt").is_file()
