"""A training run's checkpoints: which were written whole (`trainer.MarkCheckpointComplete` marks them), which a
run resumes from or averages, and whether a command line can go on from one as the run would have: the same model,
flags, languages and data, with steps left to train.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
import zipfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from .data import TranslationDataArguments, data_source_description
from .distributed import check_launch_resumes, fsdp_requested
from .errors import InputError, sibling_script

logger = logging.getLogger(__name__)


CHECKPOINT_COMPLETE = "checkpoint_complete.json"

RESUMED_ARGUMENTS = ("learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "optim", "optim_args",
                     "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "label_smoothing_factor",
                     "max_grad_norm", "seed", "data_seed", "gradient_accumulation_steps", "per_device_train_batch_size",
                     "max_tokens_per_batch", "bucket_shapes", "dataloader_drop_last", "train_sampling_strategy")
"""The training arguments a resumed run must keep: the optimizer's settings and the schedule are restored from the
checkpoint (a changed --learning_rate was ignored while the model card reported it), and the others change the run's
batches, their order or its loss from the step it resumes at."""
SENTENCE_BATCH_ARGUMENTS = ("per_device_train_batch_size", "dataloader_drop_last", "train_sampling_strategy")
"""Those of `RESUMED_ARGUMENTS` that make batches of sentences only: --max_tokens_per_batch replaces them (the
training script warns that they have no effect beside it)."""


def is_complete_checkpoint(folder: str | Path) -> bool:
    return (Path(folder) / CHECKPOINT_COMPLETE).is_file()


def checkpoint_record(folder: str | Path) -> dict:
    """What a complete checkpoint's marker records (`MarkCheckpointComplete`): `run` (the run's settings) and
    `arguments` (`RESUMED_ARGUMENTS`), both {} where it was saved by an older version, which recorded neither."""
    try:
        record = json.loads((Path(folder) / CHECKPOINT_COMPLETE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"run": {}, "arguments": {}}
    record = record if isinstance(record, dict) else {}
    return {**record, "run": record.get("run") or {}, "arguments": record.get("arguments") or {}}


def run_checkpoints(run_dir: str | Path) -> list[Path]:
    """The Trainer's `checkpoint-<step>` folders in `run_dir`, oldest first (none if it does not exist)."""
    found = [p for p in Path(run_dir).glob("checkpoint-*") if p.is_dir() and re.fullmatch(r"checkpoint-\d+", p.name)]
    return sorted(found, key=folder_step)


def complete_checkpoints(run_dir: str | Path) -> list[Path]:
    """The checkpoints of `run_dir` that were written whole (`MarkCheckpointComplete`), oldest first: those a run
    resumes from, averages and names as safe."""
    return [folder for folder in run_checkpoints(run_dir) if is_complete_checkpoint(folder)]


def folder_step(checkpoint: Path) -> int:
    """The step in a `checkpoint-<step>` folder's name."""
    return int(checkpoint.name.split("-")[1])


def order_checkpoint_times_by_step(run_dir: str | Path) -> None:
    """Give the run's checkpoint folders modification times in the order of their steps, where they are not. The
    Trainer (transformers 5) deletes the checkpoints beyond `save_total_limit` oldest first by these times: in a
    copied run (`cp -r`, `scp -r`) they are the copy's order, and resuming it deleted later checkpoints than it kept,
    and averaged those (`--average_last_checkpoints`)."""
    checkpoints = run_checkpoints(run_dir)
    times = [folder.stat().st_mtime for folder in checkpoints]
    if times == sorted(times) and len(set(times)) == len(times):
        return
    logger.info("Dating the checkpoints of %s in the order of their steps, so that the oldest steps are the ones "
                "--save_total_limit deletes", run_dir)
    now = time.time()  # and before the checkpoints this run saves
    for age, folder in enumerate(reversed(checkpoints), 1):  # a second apart, as file systems keep whole seconds
        os.utime(folder, (now - age, now - age))


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    """The latest `checkpoint-<step>` in `output_dir` that was written whole; incomplete ones are named in a warning."""
    complete = complete_checkpoints(output_dir)
    if not complete:
        return None
    skipped = [folder.name for folder in run_checkpoints(output_dir) if folder_step(folder) > folder_step(complete[-1])]
    if skipped:
        logger.warning("Skipping incomplete checkpoints (the run was stopped while saving): %s", skipped[::-1])
    return complete[-1]


def resumes(training_args) -> bool:
    """Whether --resume_from_checkpoint asks to resume (`true`, or a checkpoint), not `false` or nothing."""
    return training_args.resume_from_checkpoint not in (None, False, "False", "false")


def resume_checkpoint(training_args) -> str | None:
    """`--resume_from_checkpoint` as given; `true` means the last complete checkpoint in output_dir."""
    resume = training_args.resume_from_checkpoint
    if not resumes(training_args):
        return None
    if resume in (True, "True", "true"):
        last = last_complete_checkpoint(training_args.output_dir)
        if last is None:
            raise InputError(
                f"--resume_from_checkpoint true, but {training_args.output_dir} has no complete checkpoint-*."
            )
        check_not_weights_only(last)
        check_launch_resumes(last, fsdp=fsdp_requested(training_args))
        check_undamaged(last)
        return str(last)
    if not Path(resume).is_dir():
        meant = (" (`true` resumes --output_dir's last complete checkpoint)"
                 if str(resume).lower() in ("yes", "y", "1", "on", "true", "last") else "")
        raise InputError(f"--resume_from_checkpoint {resume}: no such checkpoint folder{meant}.")
    if not is_complete_checkpoint(resume):
        if run_checkpoints(resume):  # a run's folder, not one of its checkpoints
            last = last_complete_checkpoint(resume)
            raise InputError(
                f"--resume_from_checkpoint {resume} is a run's folder: name one of its checkpoints"
                + (f" (the last complete one: {last})" if last else "")
                + f", or pass --resume_from_checkpoint true with --output_dir {resume}."
            )
        folder = Path(resume)
        whole = all((folder / name).is_file() for name in ("trainer_state.json", "scheduler.pt")) and any(
            folder.glob("optimizer*"))
        if whole:  # all the Trainer writes is there, but not our marker
            raise InputError(
                f"{resume} has no {CHECKPOINT_COMPLETE}, which this script writes when a checkpoint is complete: it "
                "was saved by another script (a Seq2SeqTrainer of your own?), or stopped before the marker was "
                "written. Fine-tune from it with --model_name_or_path into a new --output_dir, or resume from a "
                "checkpoint of this script."
            )
        if not re.fullmatch(r"checkpoint-\d+", folder.name):  # no checkpoint at all: an empty, data or model folder
            model = " (a saved model: fine-tune it with --model_name_or_path)" if (folder / "config.json").is_file() \
                else ""
            raise InputError(
                f"--resume_from_checkpoint {resume} is not a training checkpoint{model}: give a checkpoint-<step> "
                "folder of a run, or --resume_from_checkpoint true to pick --output_dir's last complete one."
            )
        raise InputError(
            f"{resume} is incomplete: the run was stopped while writing it. Resume from an earlier checkpoint, or "
            "pass `--resume_from_checkpoint true` to pick the last complete one."
        )
    check_not_weights_only(resume)
    check_launch_resumes(resume, fsdp=fsdp_requested(training_args))
    check_undamaged(resume)
    return resume


def check_no_later_checkpoints(checkpoint: str, output_dir: str) -> None:
    """A run resumed from an earlier checkpoint than --output_dir's last complete one would save its own steps over
    the later ones, one by one, and until then resume from them (`--resume_from_checkpoint true`) and average them
    (`--average_last_checkpoints`) as its own. So would a run resumed from another folder's checkpoint into an
    --output_dir that holds checkpoints: those are another run's."""
    if Path(checkpoint).resolve().parent != Path(output_dir).resolve() and (held := complete_checkpoints(output_dir)):
        names = ", ".join(folder.name for folder in held[:3]) + (f", ... {held[-1].name}" if len(held) > 3 else "")
        raise InputError(
            f"--output_dir {output_dir} holds checkpoints of a run ({names}), and --resume_from_checkpoint "
            f"{checkpoint} is another folder's: the resumed run would save its checkpoints beside them, and average "
            "or resume from them as its own. Resume into a new or empty --output_dir, or continue the run whose "
            "checkpoints those are with --resume_from_checkpoint true."
        )
    step = checkpoint_step(checkpoint)
    later = [folder for folder in complete_checkpoints(output_dir) if checkpoint_step(folder) > step]
    if later:
        names, aside = ", ".join(folder.name for folder in later), Path(output_dir) / "later"
        raise InputError(
            f"--output_dir {output_dir} holds checkpoints past {checkpoint} (step {step}): {names}. A run resumed from "
            f"it would save its own steps over them, and average or resume from them as its own until then. Move "
            f"them out of {output_dir} first (mkdir {aside} && mv {' '.join(map(str, later))} {aside}), or train "
            "into a new --output_dir."
        )


def holds_weights_only(checkpoint: str | Path) -> bool:
    """Whether `checkpoint` was saved with --save_only_model: no optimizer state and no learning-rate schedule (the
    Trainer writes scheduler.pt in every other case, and optimizer.pt, optimizer.bin or a sharded optimizer_*)."""
    folder = Path(checkpoint)
    return not (folder / "scheduler.pt").exists() and not any(folder.glob("optimizer*"))


def check_not_weights_only(checkpoint: str | Path) -> None:
    """Resuming from weights alone would start Adam's moments and the warmup again, silently: a run that does not end
    as the uninterrupted one would."""
    if holds_weights_only(checkpoint):
        raise InputError(
            f"{checkpoint} holds the weights only (--save_only_model): without the optimizer's state and the "
            "learning-rate schedule a resumed run would start its warmup again. Fine-tune from it into a new folder "
            f"instead (--model_name_or_path {checkpoint}), or train without --save_only_model for checkpoints that "
            "can be resumed."
        )


def check_undamaged(checkpoint: str | Path) -> None:
    """A checkpoint written whole may have been damaged since (`checkpoint_damage`): the Trainer would meet that as a
    traceback, or start the optimizer or the schedule anew without a word."""
    if damage := checkpoint_damage(checkpoint):
        folder = Path(checkpoint)
        earlier = [other for other in complete_checkpoints(folder.parent) if folder_step(other) < folder_step(folder)
                   and not checkpoint_damage(other)] if re.fullmatch(r"checkpoint-\d+", folder.name) else []
        aside = folder.parent / "damaged"
        advice = (f"Resume from the one before it: move it out of the run's folder (mkdir {aside} && mv {folder} "
                  f"{aside}), then pass --resume_from_checkpoint true, which picks the last complete one "
                  f"({earlier[-1].name})" if earlier else
                  "Copy it again from where it came from, or fine-tune from an undamaged model into a new --output_dir")
        raise InputError(
            f"{checkpoint} is damaged: {damage}. A copy stopped midway (cp, scp, rsync) or files deleted by hand leave "
            f"such a checkpoint, which would not resume as the run was. {advice}."
        )


def checkpoint_damage(checkpoint: str | Path) -> str | None:
    """What is missing or damaged in a checkpoint that was written whole, said in words; None where nothing is. Its
    state, config and weights must be there and readable, each file of torch.save's whole (a zip archive's end is
    there), and the optimizer's state and the schedule both there or both not (weights only): the Trainer loads them
    together, and starts both anew where one is missing. Reads the files' headers and ends only."""
    folder = Path(checkpoint)
    for name in ("trainer_state.json", "config.json"):
        try:
            json.loads((folder / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            if name == "trainer_state.json":
                return "it has no trainer_state.json (the step and the logs)"
        except (OSError, ValueError):
            return f"its {name} cannot be read as JSON"
    if not any(any(folder.glob(pattern)) for pattern in ("model*.safetensors", "pytorch_model*.bin",
                                                         "pytorch_model_fsdp*")):
        return "it holds no model weights (model.safetensors)"
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except (SafetensorError, OSError) as error:
            return f"its {path.name} is truncated or corrupt ({error})"
    for path in sorted(path for pattern in ("*.pt", "*.pth", "*.bin") for path in folder.glob(pattern)):
        if path.is_file() and not zipfile.is_zipfile(path):
            return f"its {path.name} is truncated or corrupt (not all of what torch.save wrote)"
    optimizer, schedule = any(folder.glob("optimizer*")), (folder / "scheduler.pt").is_file()
    if optimizer and not schedule:
        return "it has no scheduler.pt (the learning-rate schedule, which would start its warmup again)"
    if schedule and not optimizer:
        return "it has no optimizer.pt (Adam's moments, which would start from zero)"
    return None


RESUMED_CONFIG = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
                  "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "normalize_before",
                  "tie_word_embeddings", "dropout", "attention_dropout", "activation_dropout")
"""The config fields a checkpoint's model and the model the flags build must agree on to resume: its shape, and
its dropout, without which the run would not go on as it was."""


def checkpoint_step(checkpoint: str | Path) -> int:
    """The global step a checkpoint was saved at (its trainer_state.json's; 0 without one)."""
    return checkpoint_state(checkpoint).get("global_step", 0)


def checkpoint_state(checkpoint: str | Path) -> dict:
    """A checkpoint's trainer_state.json (global_step, epoch, max_steps, num_train_epochs, ...); {} without one."""
    state = Path(checkpoint) / "trainer_state.json"
    return json.loads(state.read_text()) if state.exists() else {}


def check_resumable(checkpoint: str, model, training_args, data_args) -> None:
    """The checkpoint holds the model the flags build (its shape and dropout), was saved with the training flags and
    languages given (`check_same_run`), and lies before --max_steps and --output_dir's later checkpoints: otherwise
    resuming would be a size mismatch or a traceback inside torch, a run going on unlike itself, or a step past the
    steps asked for (whether this launch can resume FSDP's checkpoints is `check_launch_resumes`'). Another number of
    processes than the checkpoint's is a warning."""
    config = Path(checkpoint) / "config.json"
    saved = json.loads(config.read_text()) if config.exists() else {}
    differ = [f"{name} {saved[name]} (the flags: {getattr(model.config, name, None)})" for name in RESUMED_CONFIG
              if name in saved and saved[name] != getattr(model.config, name, None)]
    if differ:
        raise InputError(
            f"{checkpoint} holds a model with {', '.join(differ)}: resume with the model flags the run started with "
            "(the same --model_name_or_path for a fine-tuning run; a new model's sizes and dropout are in the "
            "checkpoint's config.json), or train into a new --output_dir."
        )
    check_same_run(checkpoint, training_args, data_args)
    check_training_left(checkpoint, training_args)
    check_no_later_checkpoints(checkpoint, training_args.output_dir)
    saved_by = len(list(Path(checkpoint).glob("rng_state*.pth")))  # one per process
    if saved_by and saved_by != training_args.world_size:
        logger.warning(
            "%s was saved by %d process%s and this run has %d: the batches an optimizer step sums change, and so "
            "do the epoch count and the schedule's pace. Resume with as many processes for the run it would have "
            "been.", checkpoint, saved_by, "es" * (saved_by != 1), training_args.world_size,
        )


def run_settings(data_args: TranslationDataArguments) -> dict:
    """What each checkpoint records of the run's data (`MarkCheckpointComplete`), for a resumed run to check against:
    its languages, its training data in words (names, not paths: the data may move) and how much of it is used."""
    data = data_source_description(data_args) or " ".join(
        name for name in (data_args.dataset_name, data_args.dataset_config_name) if name)
    settings = {"source_lang": data_args.source_lang, "target_lang": data_args.target_lang, "train_data": data or None,
                "max_train_samples": data_args.max_train_samples, "max_source_length": data_args.max_source_length,
                "max_target_length": data_args.max_target_length, "max_length_chars": data_args.max_length_chars}
    if data_args.builtin_dataset:  # the corpus is made: its size is the data
        settings["number_words_train_size"] = data_args.number_words_train_size
    return settings


def check_same_run(checkpoint: str, training_args, data_args) -> None:
    """The checkpoint was saved with the training flags (`RESUMED_ARGUMENTS`) and languages given: the Trainer
    restores the optimizer's settings and the schedule from the checkpoint, so a changed --learning_rate was ignored
    while the model card reported it, and other languages would make another model of the half-trained one. Other
    training data (or limits on it) is a warning: the same files may have other names now. A checkpoint saved by an
    older version records neither: its schedule's learning rate (scheduler.pt) is checked alone."""
    record = checkpoint_record(checkpoint)
    now = json.loads(json.dumps(training_args.to_dict(), default=str))  # as the record holds them
    state, saved_warmup = checkpoint_state(checkpoint), record["arguments"].get("warmup_steps")
    steps = training_args.max_steps if training_args.max_steps > 0 else None
    if steps is None and state.get("max_steps") and state.get("num_train_epochs"):  # by epochs: the steps as many
        steps = math.ceil(state["max_steps"] / state["num_train_epochs"] * training_args.num_train_epochs)
    if steps and isinstance(saved_warmup, (int, float)) and float(saved_warmup).is_integer():
        now["warmup_steps"] = training_args.get_warmup_steps(steps)  # in steps, as recorded: a share (0.1) of a
        # longer run is more of them
    arguments = record["arguments"]
    if not arguments and (rate := scheduled_learning_rate(checkpoint)) is not None:
        arguments = {"learning_rate": rate}
    batched_by_tokens = arguments.get("max_tokens_per_batch") and now.get("max_tokens_per_batch")
    changed = []
    for name, saved in arguments.items():
        given = now.get(name, saved)
        if name == "optim":  # torch's AdamW, fused (the GPU default) or not, keeps the same state
            saved, given = (value.removesuffix("_fused") if isinstance(value, str) else value
                            for value in (saved, given))
        if same_value(given, saved) or (name in SENTENCE_BATCH_ARGUMENTS and batched_by_tokens) \
                or (name == "bucket_shapes" and not batched_by_tokens):  # the padding alone, not the batches
            continue
        changed.append(f"--{name} {shown(given)} (the run's: {shown(saved)})")
        if name == "learning_rate":  # given or not: the paper's rate depends on --warmup_steps, a share of the steps
            changed[-1] += (f": give --learning_rate {shown(saved)} (a rate not given is computed from d_model and the "
                            "warmup steps, which a --warmup_steps below 1, a share of the steps, changes)")
        if name == "warmup_steps" and training_args.warmup_steps < 1:
            changed[-1] = (f"--warmup_steps {shown(training_args.warmup_steps)}, {shown(given)} of these steps (the "
                           f"run's: {shown(saved)}): give --warmup_steps {shown(saved)} to keep the run's")
    if (length := changed_length(state, training_args)) and schedule_follows_length(training_args):
        changed.append(f"{length}: the {schedule_name(training_args)} schedule's learning rate follows the run's "
                       "length, and would jump at the step resumed from")
    saved_run, this_run = record["run"], run_settings(data_args)
    languages = [saved_run.get(name) for name in ("source_lang", "target_lang")]
    if all(languages) and languages != [data_args.source_lang, data_args.target_lang]:
        changed.append(f"--source_lang {data_args.source_lang} --target_lang {data_args.target_lang} (the run's: "
                       f"{languages[0]} -> {languages[1]})")
    if changed:
        raise InputError(
            f"{checkpoint} was saved by a run with other flags than these: {'; '.join(changed)}. A resumed run takes "
            "the optimizer's settings and the learning-rate schedule from its checkpoint, and goes on with the "
            "run's batches and languages: resume with the flags the run started with, or fine-tune from the "
            f"checkpoint into a new --output_dir (--model_name_or_path {checkpoint}), with a new optimizer and "
            "schedule."
        )
    data = [f"{name} {saved_run[name]} (now: {this_run[name]})" for name in this_run
            if name in saved_run and name not in ("source_lang", "target_lang") and saved_run[name] != this_run[name]]
    if data:
        logger.warning("%s was trained with other data than this run gives: %s. The resumed steps train on the "
                       "data given now, and the model card names that alone.", checkpoint, "; ".join(data))


SCHEDULES_WITHOUT_END = ("constant", "constant_with_warmup", "inverse_sqrt", "reduce_lr_on_plateau")
"""The learning-rate schedules that do not look at the run's length (the paper's, inverse_sqrt, among them): a run
resumed under one of them may train for longer than it was started for."""


def schedule_name(training_args) -> str:
    return str(getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type))


def schedule_follows_length(training_args) -> bool:
    """Whether the run's learning rate depends on its length (--max_steps, --num_train_epochs): linear, cosine, ...
    decay to their end, which the Trainer computes anew for a resumed run."""
    return schedule_name(training_args) not in SCHEDULES_WITHOUT_END


def changed_length(state: dict, training_args) -> str | None:
    """The flag that gives a resumed run another length than its checkpoint's (trainer_state.json), with both
    values; None where it is the same, or unknown."""
    if training_args.max_steps > 0:
        saved = state.get("max_steps")
        return None if saved in (None, training_args.max_steps) else \
            f"--max_steps {training_args.max_steps} (the run's: {saved})"
    saved = state.get("num_train_epochs")
    return None if saved in (None, training_args.num_train_epochs) else \
        f"--num_train_epochs {shown(training_args.num_train_epochs)} (the run's: {shown(saved)})"


def scheduled_learning_rate(checkpoint: str) -> float | None:
    """The peak learning rate of a checkpoint's schedule (scheduler.pt's base_lrs), which the Trainer restores
    whatever --learning_rate says; None where it cannot be read."""
    try:
        rates = torch.load(Path(checkpoint) / "scheduler.pt", weights_only=True).get("base_lrs")
        return float(max(rates))
    except Exception:  # noqa: BLE001 - no schedule, or one of another kind: nothing to check it against
        return None


def same_value(given, saved) -> bool:
    """Whether a flag's value now is the one a checkpoint recorded: numbers within a millionth (a rate computed
    again from the same flags, a value typed from a message)."""
    numbers = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in (given, saved))
    if numbers and (isinstance(given, float) or isinstance(saved, float)):  # a seed or a batch size: exactly
        return math.isclose(given, saved, rel_tol=1e-6)
    return given == saved


def shown(value) -> str:
    """A flag's value as a user types it, whole: 100 for a float 100.0 (warmup_steps), 0.07905694150420949 for a
    computed learning rate (what the message shows is what resumes)."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def check_training_left(checkpoint: str, training_args) -> None:
    """The checkpoint lies before the end of the training asked for (--max_steps, else --num_train_epochs): from a
    checkpoint at or past it the Trainer would train nothing (or, at --max_steps, a step more), then write a
    training loss of 0 over the run's results and card."""
    state = checkpoint_state(checkpoint)
    step = state.get("global_step", 0)
    if training_args.max_steps > 0:
        if step > training_args.max_steps:
            raise InputError(
                f"{checkpoint} is at step {step}, past --max_steps {training_args.max_steps}: there is nothing left to "
                f"train. {_train_on(training_args, f'Give --max_steps above {step}', checkpoint)}, or resume from an "
                "earlier checkpoint, moving the later ones out of the folder first."
            )
        if step == training_args.max_steps:  # the Trainer would train one step more
            raise InputError(
                f"{checkpoint} is at step {step}, the end of --max_steps {step}: the training is complete (the run "
                f"stopped after saving its last checkpoint). {finish_without_training(checkpoint, training_args)}; or "
                f"{_train_on(training_args, f'give --max_steps above {step}', checkpoint)}."
            )
        return
    epochs, done = training_args.num_train_epochs, state.get("epoch") or 0
    if done > epochs + 1e-6:
        raise InputError(
            f"{checkpoint} is at epoch {done:g}, past --num_train_epochs {epochs:g}: there is nothing left to train. "
            f"{_train_on(training_args, f'Give --num_train_epochs above {done:g}', checkpoint)}, or resume from an "
            "earlier checkpoint, moving the later ones out of the folder first."
        )
    finished = state.get("num_train_epochs") == epochs and step >= state.get("max_steps", step + 1)
    if finished or done >= epochs - 1e-6:
        raise InputError(
            f"{checkpoint} is at step {step}, the end of --num_train_epochs {epochs:g}: the training is complete "
            "(the run stopped after saving its last checkpoint). "
            f"{finish_without_training(checkpoint, training_args)}; or "
            f"{_train_on(training_args, f'give --num_train_epochs above {epochs:g}', checkpoint)}."
        )


def _train_on(training_args, longer: str, checkpoint: str) -> str:
    """How to train on past a run's end: `longer` (a longer run's flag) where the schedule does not look at the
    run's length, else a fine-tuning from the checkpoint, since the schedule would jump."""
    if not schedule_follows_length(training_args):
        return f"{longer} to train on"
    fine_tune = (f"fine-tune from it into a new --output_dir to train on (--model_name_or_path {checkpoint}; resumed "
                 f"longer, the {schedule_name(training_args)} schedule's learning rate would jump)")
    return fine_tune[0].upper() + fine_tune[1:] if longer[0].isupper() else fine_tune


def finish_without_training(checkpoint: str, training_args) -> str:
    """How to finish a run whose training is complete: score the model it saved (it was stopped in the final
    evaluation), else the model it would have saved, the average of its last checkpoints where it averages them."""
    run, step = Path(checkpoint).parent, checkpoint_step(checkpoint)
    if (run / "model.safetensors").is_file() and checkpoint_state(run).get("global_step") == step:
        return (f"Its model is saved in {run}: score it with --model_name_or_path {run} --do_train false "
                f"--output_dir {new_folder(run / 'scored')}")
    count = training_args.average_last_checkpoints
    if not count:
        return (f"Finish it without training: score its last checkpoint with --model_name_or_path {checkpoint} "
                f"--do_train false --output_dir {new_folder(run / 'scored')}")
    averaged = new_folder(run / "averaged")
    script = sibling_script("average_checkpoints.py")
    return (f"Finish it without training: average the last checkpoints (python {script} {run} "
            f"--last {count} --output_dir {averaged}) and score the average with --model_name_or_path "
            f"{averaged} --do_train false")


def new_folder(path: Path) -> Path:
    """`path`, or `path-2`, `path-3`, ... where it exists: a folder that a suggested command can write into (one
    holding an earlier scoring's results would be refused)."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate
