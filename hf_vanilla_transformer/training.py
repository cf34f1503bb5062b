"""The main job: train, evaluate and translate with Seq2SeqTrainer and the paper's recipe (section 5).

`scripts/train_translation.py` is a thin wrapper over `main()`. Arguments are parsed by HfArgumentParser over
`ModelArguments`, `DataArguments` and `TokenBatchingSeq2SeqTrainingArguments` (the Trainer's own
`Seq2SeqTrainingArguments` plus `--max_tokens_per_batch` and the script's flags: `--bucket_shapes`,
`--average_last_checkpoints`, ...), in the style of transformers' translation example. The paper's recipe is the
default; every part of it is a usual Trainer flag, and a flag given on the command line wins.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import torch
import transformers
from accelerate.utils import broadcast_object_list
from tokenizers import Tokenizer
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    DataCollatorForSeq2Seq,
    HfArgumentParser,
    MarianMTModel,
    Seq2SeqTrainer,
    get_scheduler,
    set_seed,
)
from transformers.hf_argparser import string_to_bool
from transformers.integrations import get_available_reporting_integrations
from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
from transformers.trainer_utils import IntervalStrategy, SaveStrategy

from .batching import BucketPaddingCollator
from .checkpoint_averaging import load_averaged_weights
from .checkpoints import (
    SENTENCE_BATCH_ARGUMENTS,
    check_resumable,
    checkpoint_step,
    complete_checkpoints,
    holds_weights_only,
    is_complete_checkpoint,
    last_complete_checkpoint,
    new_folder,
    resume_checkpoint,
    resumes,
    run_checkpoints,
    run_settings,
)
from .configuration_vanilla_transformer import BIG_SIZES, VanillaTransformerConfig
from .conversion import converted_marian
from .data import (
    DATA_SOURCES,
    TranslationDataArguments,
    check_languages_given,
    check_token_ids_fit,
    data_source_description,
    load_translation_datasets,
    rows_with_text,
    tokenize_translation_datasets,
)
from .distributed import (
    check_fsdp_launch,
    check_replicas_agree,
    fsdp_requested,
    holds_whole_fsdp_weights,
    whole_fsdp_weights_advice,
)
from .errors import InputError, first_line, interrupts_deferred, one_line_errors, shown_list, sibling_script
from .file_permissions import readable_weights
from .hub import (
    check_push_account,
    check_push_target,
    hub_error_message,
    hub_host,
    hub_unreachable,
    loading_from,
    model_location,
    push_from_training_args,
    push_repo_id,
)
from .metrics import (
    bleu_tokenizer,
    decoded_texts,
    language_code,
    make_compute_metrics,
    reference_texts,
    sacrebleu_signatures,
    warn_if_written_without_spaces,
)
from .model_card import CARD_INPUTS_FILE, decoding_description, pairs_description, save_model_card, warms_up
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from .number_words import NUMBER_MAGNITUDES, number_words_normalizer
from .pipeline_translation import save_translation_pipeline
from .tokenization import (
    MARIAN_TOKENIZER_FILES,
    SPECIAL_TOKENS,
    TOKENIZER_FILES,
    append_eos,
    check_decodes_to_text,
    check_special_tokens,
    decoding_sample,
    drop_length_limit,
    load_tokenizer,
    special_token_ids,
    train_bpe_tokenizer,
    translation_texts,
)
from .trainer import (
    TokenBatchingSeq2SeqTrainer,
    TokenBatchingSeq2SeqTrainingArguments,
    close_progress_bar,
)
from .training_curves import plot_training_curves

logger = logging.getLogger(__name__)

# Section 5.3 and 5.4: Adam(0.9, 0.98, 1e-9), lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) with 4000
# warmup steps (transformers' "inverse_sqrt" schedule with the peak lr d_model^-0.5 * warmup^-0.5), label smoothing
# 0.1. Evaluation decodes as the model does, by its generation config: a new model's is the paper's beam 4 and length
# penalty 0.6 (section 6.1), and a trained one scored or fine-tuned keeps its own (a default --generation_num_beams
# 4 scored a greedy model's translations with beams that translate.py and generate() do not use).
PAPER_RECIPE = {
    "adam_beta1": "0.9",
    "adam_beta2": "0.98",
    "adam_epsilon": "1e-9",
    "lr_scheduler_type": "inverse_sqrt",
    "warmup_steps": "4000",
    "label_smoothing_factor": "0.1",
    "predict_with_generate": "true",
    "per_device_eval_batch_size": "128",  # evaluation generates: the Trainer's default of 8 would dominate a GPU run
    "eval_strategy": "epoch",
    "save_strategy": "epoch",
    "save_total_limit": "5",
    "logging_steps": "50",
    "logging_nan_inf_filter": "false",  # log a NaN loss as NaN; the filter also reads every step's loss (a sync)
    "report_to": "none",
    # the Trainer writes this into the model's config, saved with every checkpoint: transformers' default (False)
    # left the saved model without a cache for hand-written decoding loops (training steps never build one here)
    "use_cache": "true",
}

# On a GPU the step is short and the host must keep up: batches in a few shapes (so that --torch_compile, with
# --torch_compile_mode reduce-overhead for CUDA graphs, captures each once), loaded by worker processes into pinned
# memory and copied to the GPU without waiting for it. (The Trainer's own defaults give fused AdamW and pinned
# memory.)
GPU_DEFAULTS = {
    "bucket_shapes": "true",
    "dataloader_num_workers": "2",
    "dataloader_persistent_workers": "true",
    "accelerator_config": '{"non_blocking": true}',
}

# The built-in number-words corpus is tiny next to WMT: a small model learns it in minutes on a laptop CPU, and
# with 10k training pairs of batch 64 a 4000-step warmup would be most of the run, so warmup is shorter. A
# 550-token vocabulary splits German numbers into their parts (drei|undneunzigtausend|zwei|hundertvier|...) and
# keeps "million" whole (with 500 it was 7 letters the model had to copy, and came out "mililion"). The
# paper's peak rate for this model and warmup, 4.4e-3, made the last epochs jumpy and the rare words (zwölf, null)
# a matter of luck; half of it, with the last 3 epochs averaged (6.1), gave 99.1 validation BLEU instead of 95.7.
BUILTIN_RUN = {
    "builtin_dataset": "number_words",
    "source_lang": "de",
    "target_lang": "en",
    "num_train_epochs": "5",
    "per_device_train_batch_size": "64",
    "warmup_steps": "400",
    "learning_rate": "2e-3",
    "average_last_checkpoints": "3",
    "vocab_size": "550",
    "overwrite_output_dir": "true",  # `./run.sh main` again replaces the demo's run
}
TINY_MODEL = dict(
    d_model=128, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
    encoder_ffn_dim=512, decoder_ffn_dim=512,
)


@dataclass
class ModelArguments:
    """Which model to train: a fresh one (a preset plus size flags, or `--config_name`) or an existing one."""

    _argument_group_name = "model flags: a new model's size (a preset, then single sizes), or the model to fine-tune"

    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Fine-tune this model (a directory or Hub id) instead of training a new one."}
    )
    config_name: str | None = field(default=None, metadata={"help": "Config (directory, file or Hub id) of a new model."})
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "Reuse this tokenizer instead of training a BPE tokenizer on the data."}
    )
    preset: str | None = field(
        default=None,
        metadata={"help": "'base' or 'big' (Table 3), or 'tiny' (d_model 128, 3+3 layers). Default: base, or tiny "
                  "for the built-in corpus."},
    )
    d_model: int | None = field(default=None, metadata={"help": "Override the preset's d_model."})
    layers: int | None = field(default=None, metadata={"help": "Override the number of encoder and decoder layers."})
    attention_heads: int | None = field(default=None, metadata={"help": "Override the number of heads."})
    ffn_dim: int | None = field(default=None, metadata={"help": "Override d_ff."})
    dropout: float | None = field(default=None, metadata={"help": "Override the residual dropout P_drop."})
    normalize_before: bool = field(default=False, metadata={
        "help": "Pre-LN instead of the paper's post-LN (default: post-LN, or --config_name's)."})
    attn_implementation: str = field(default="sdpa",
                                     metadata={"help": "'eager' or 'sdpa' (or 'flex_attention' on GPUs)."})
    vocab_size: int = field(
        default=8000,
        metadata={"help": "Size of the shared BPE vocabulary trained on the data (at least 260: 256 bytes, 4 special)."},
    )


@dataclass
class DataArguments(TranslationDataArguments):
    """Data sources (see TranslationDataArguments) plus lengths, sample limits and printing."""

    _argument_group_name = ("data flags: one source (prefixes of plain text, files, a datasets folder or Hub id), "
                            "its languages, limits")

    max_source_length: int = field(default=256, metadata={"help": "Truncate sources to this many tokens."})
    max_target_length: int = field(
        default=256,
        metadata={"help": "Truncate training targets to this many tokens (validation and test references are scored "
                          "whole)."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training pairs."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation pairs."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Use only the first N test pairs."})
    num_samples_to_print: int = field(default=5, metadata={"help": "Sample translations printed at the end."})
    bleu_tokenize: str | None = field(
        default=None,
        metadata={"help": "sacrebleu's tokenization for BLEU (13a, zh, ja-mecab, ko-mecab, char, intl, ...). Default: "
                          "the one sacrebleu's -l chooses for --target_lang: zh for Chinese, ja-mecab for Japanese, "
                          "ko-mecab for Korean (where MeCab is not installed: char for Japanese, 13a for Korean), "
                          "char for Thai, Lao, Khmer, Burmese, Tibetan and Dzongkha (written without spaces, which "
                          "-l leaves to 13a), 13a otherwise."},
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})


def parse_arguments(argv: list[str]) -> tuple[ModelArguments, DataArguments, TokenBatchingSeq2SeqTrainingArguments]:
    """Parse `argv` with the paper's recipe (and, for the built-in corpus, the small run) as defaults. A single
    `.json`, `.yaml` or `.yml` file in place of the flags holds them (`{"output_dir": "runs/x", ...}`), as in
    transformers' examples; it gets the same defaults and checks as flags."""
    check_launch()
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        argv = flags_from_file(argv[0])
    given = {arg.split("=")[0].lstrip("-").replace("-", "_") for arg in argv if arg.startswith("--")}  # both spellings
    given_phases = given_booleans(argv, *PHASES)
    phases = chosen_phases(given_phases)
    cpu_off = given_booleans(argv, "use_cpu").get("use_cpu") is False  # the default: on a GPU, its settings
    defaults = recipe_defaults(given - {"use_cpu"} if cpu_off else given)
    if not phases["do_eval"]:
        asked = given_values(argv, "eval_strategy").get("eval_strategy", "no")
        if given_phases.get("do_eval") is False and asked != "no":
            raise InputError("--do_eval false leaves out evaluation, but --eval_strategy asks for it during training: "
                             "give one of the two.")
        defaults["eval_strategy"] = "no"
    if given_booleans(argv, "load_best_model_at_end").get("load_best_model_at_end"):
        defaults.update(best_model_defaults(argv, defaults))
    default_argv = [token for name, value in defaults.items() if name not in given for token in (f"--{name}", value)]
    parser = one_line_errors(HfArgumentParser((ModelArguments, DataArguments, TokenBatchingSeq2SeqTrainingArguments)))
    parser.allow_abbrev = False  # every flag has two spellings, so "--lr" or "--vocab" was "ambiguous" between them
    if {"-h", "--help"} & set(argv):
        show_run_defaults_in_help(parser, defaults, builtin=is_builtin_run(given))
    try:
        *parsed, unknown = parser.parse_args_into_dataclasses(args=default_argv + argv, return_remaining_strings=True)
    except ValueError as error:  # raised by the arguments' own checks, e.g. TrainingArguments.__post_init__
        message = str(error).rstrip(".")
        if "doesn't support bf16/gpu" in message:  # the GPU recipes' --bf16, run where there is no GPU
            flags = [flag for flag in ("--bf16", "--bf16_full_eval") if flag[2:] in given] or ["--bf16"]
            message = (f"{' and '.join(flags)} ask{'s' if len(flags) == 1 else ''} for a GPU and torch sees none "
                       f"here: leave {' and '.join(flags)} out to train and evaluate in float32, or add --use_cpu to "
                       "use bf16 on the CPU")
        raise InputError(f"{message}. Fix that flag (`--help` describes every flag).") from error
    if unknown:
        raise InputError(_unknown_flags_message(unknown, parser))
    model_args, data_args, training_args = parsed
    if "normalize_before" not in given:  # not given: --config_name's, where given ("false" was taken for unset)
        model_args.normalize_before = None
    d_model = model_d_model(model_args, data_args)  # also checks a model folder, before any data work
    check_new_model_flags(model_args, data_args, given)
    check_data_flags(model_args, data_args)
    try:
        data_args.bleu_tokenize = bleu_tokenizer(data_args.target_lang, data_args.bleu_tokenize)
    except ValueError as error:
        raise InputError(f"--bleu_tokenize: {error}") from error
    check_training_flags(training_args)
    if training_args.dataloader_persistent_workers and training_args.dataloader_num_workers == 0:
        if "dataloader_persistent_workers" in given:  # torch's DataLoader would refuse it, in a traceback
            raise InputError("--dataloader_persistent_workers keeps the dataloader's worker processes between epochs, "
                             "and --dataloader_num_workers 0 asks for none: give workers, or leave it out.")
        training_args.dataloader_persistent_workers = False  # the GPU default, which goes with workers only
    for flag, runs in phases.items():
        setattr(training_args, flag, runs or getattr(training_args, flag))  # --eval_strategy implies --do_eval
    if model_args.attn_implementation == "flex_attention" and training_args.do_train \
            and training_args.device.type == "cpu":  # a NotImplementedError traceback at the first step
        raise InputError("--attn_implementation flex_attention trains on GPUs only (torch's FlexAttention has no "
                         "backward pass on the CPU): leave it out here (sdpa, the default) or pass eager.")
    check_phases(model_args, data_args, training_args, given_true={flag for flag, v in given_phases.items() if v})
    asked = given_values(argv, "eval_strategy").get("eval_strategy") or ("steps" if "eval_steps" in given else None)
    if given_values(argv, "eval_steps").get("eval_steps") in ("0", "0.0"):  # transformers reads it as unset
        raise InputError("--eval_steps 0: give the steps between evaluations (1 or more, or a share of the training "
                         "steps below 1); transformers would evaluate every --logging_steps instead.")
    named = named_splits(data_args)
    if asked not in (None, "no") and training_args.do_train and named is not None and "validation" not in named:
        raise InputError(  # without it, a warning and a run that exits 0 with no scores
            f"--eval_strategy {asked} evaluates on the validation split during training, and no validation data is "
            "given: pass --validation_prefix or --validation_file, or leave --eval_strategy out."
        )
    default_rate = "learning_rate" not in given and "learning_rate" not in defaults
    if "warmup_steps" not in given and model_args.model_name_or_path:  # the paper's 4000 steps (and the built-in
        training_args.warmup_steps = FINE_TUNING_WARMUP  # run's 400) were most or all of a fine-tuning's steps
    if "learning_rate" not in given and model_args.model_name_or_path:  # the paper's formula (and the built-in
        training_args.learning_rate = FINE_TUNING_LEARNING_RATE  # run's 2e-3) are for a model trained from scratch
    elif default_rate:
        warmup = default_rate_warmup_steps(training_args)
        if warmup < 1:
            raise InputError(
                f"--warmup_steps {training_args.warmup_steps:g} leaves the default learning rate, the paper's peak "
                "d_model^-0.5 * warmup^-0.5, without a value (it grows without bound as the warmup shrinks): give "
                "--learning_rate with it, or some warmup steps."
            )
        training_args.learning_rate = d_model**-0.5 * warmup**-0.5
        if training_args.do_train and not training_args.max_tokens_per_batch \
                and "per_device_train_batch_size" not in given:
            logger.warning(
                "A new model trained in batches of %d sentences (the Trainer's --per_device_train_batch_size) at the "
                "paper's peak learning rate (%.2g), which the paper used with batches of ~25,000 tokens: pass "
                "--max_tokens_per_batch (e.g. 4096 a device, as the README's recipes do), or a "
                "--per_device_train_batch_size or --learning_rate of your own.",
                training_args.per_device_train_batch_size, training_args.learning_rate,
            )
    if "average_last_checkpoints" not in given and not default_averaging_fits(training_args, given):
        training_args.average_last_checkpoints = None  # the built-in run's averaging yields to the user's flags
    if resumes(training_args) and given_booleans(argv, "overwrite_output_dir").get("overwrite_output_dir"):
        raise InputError(  # resuming took precedence, without a word
            "--overwrite_output_dir true deletes --output_dir's earlier run, and --resume_from_checkpoint continues "
            "one: give one of the two."
        )
    if "overwrite_output_dir" not in given and training_args.overwrite_output_dir \
            and not builtin_overwrite_fits(model_args, data_args, training_args):
        training_args.overwrite_output_dir = False  # so is its overwriting, to what --output_dir holds
    check_averaging(training_args, keep_limit="save_total_limit" in given)
    check_fsdp_saving(training_args)
    check_output_dir_is_no_input(model_args, training_args)
    warn_about_another_direction(model_args.model_name_or_path, data_args, training_args.do_train)
    warmup = training_args.get_warmup_steps(training_args.max_steps)
    if training_args.do_train and 0 < training_args.max_steps <= warmup and warms_up(training_args):
        logger.warning(
            "--warmup_steps %d is not below --max_steps %d: the learning rate rises for the whole run and never reaches "
            "its peak (%.3g). For a short run, such as a fine-tuning, give fewer --warmup_steps%s.",
            warmup, training_args.max_steps, training_args.learning_rate,
            " and a --learning_rate: the default peak, d_model^-0.5 * warmup^-0.5, grows as the warmup shrinks"
            if default_rate and not model_args.model_name_or_path else "",
        )
    check_best_model_flags(training_args, data_args)
    for name, why in IGNORED_FLAGS.items():
        if name in given and (name not in SENTENCE_BATCH_ARGUMENTS or training_args.max_tokens_per_batch):
            logger.warning("--%s has no effect here: %s", name, why)
    if not training_args.push_to_hub and (named := [flag for flag in ("hub_model_id", "hub_revision",
                                                                      "hub_private_repo") if flag in given]):
        logger.warning("%s without --push_to_hub: nothing is pushed (the model card's snippets name --hub_model_id "
                       "all the same). Add --push_to_hub true, or push the run later with scripts/push_to_hub.py.",
                       ", ".join(f"--{flag}" for flag in named))
    return model_args, data_args, training_args


FINE_TUNING_LEARNING_RATE = 5e-5
"""The peak learning rate of a fine-tuning (`--model_name_or_path`) without `--learning_rate`: the Trainer's own
default. The paper's, d_model^-0.5 * warmup^-0.5, is for training from scratch, and with the few warmup steps a short
fine-tuning needs it is large enough to wreck a trained model (0.04 at d_model 128 and 5 warmup steps)."""

FINE_TUNING_WARMUP = 0.1
"""The warmup of a fine-tuning (`--model_name_or_path`) without `--warmup_steps`: a tenth of its training steps (a
fraction, as transformers reads a `warmup_steps` below 1). The paper's 4,000 steps are for training from scratch: a
fine-tuning of 1,000 steps at 5e-5 never got above 1.25e-5."""

IGNORED_FLAGS = {
    "hub_strategy": "the script pushes the run once, at its end, with its model card",
    "sortish_sampler": "transformers 5 no longer reads it (--max_tokens_per_batch batches sentences of like length)",
    "train_sampling_strategy": "--max_tokens_per_batch draws length-bucketed batches of its own",
    "per_device_train_batch_size": "--max_tokens_per_batch fills each batch with sentences up to its token count",
    "dataloader_drop_last": "--max_tokens_per_batch keeps every batch, each a whole one by its token count",
}
"""Trainer flags that this script's run does not use, with the reason a warning gives; those that make batches of
sentences (`SENTENCE_BATCH_ARGUMENTS`) only beside --max_tokens_per_batch."""


def best_model_defaults(argv: list[str], defaults: dict[str, str]) -> dict[str, str]:
    """For --load_best_model_at_end, which chooses among the checkpoints: a checkpoint at each evaluation. Where the
    flags set one of the two, saving or evaluation, the other follows it: the Trainer keeps a best evaluation only
    where a checkpoint is saved at its step (and refuses strategies that differ), and evaluates every --logging_steps
    where no --eval_steps is given. --save_strategy best saves at each better evaluation already."""
    values = given_values(argv, "eval_strategy", "eval_steps", "save_strategy", "save_steps", "logging_steps")
    eval_strategy = values.get("eval_strategy", defaults["eval_strategy"])
    save_strategy = values.get("save_strategy", defaults["save_strategy"])
    if "save_strategy" not in values and "save_steps" not in values:  # saving follows evaluation
        steps = values.get("eval_steps", values.get("logging_steps", defaults["logging_steps"]))
        return {"save_strategy": eval_strategy, "save_steps": steps}
    if save_strategy == "best" or "eval_steps" in values:  # the Trainer checks that the steps go together
        return {}
    # evaluation follows saving, unless turned off (--do_eval false) or set
    follows = {} if "eval_strategy" in values or eval_strategy == "no" else {"eval_strategy": save_strategy}
    if follows.get("eval_strategy", eval_strategy) == "steps":  # not every --logging_steps, between checkpoints
        follows["eval_steps"] = values.get("save_steps", defaults.get(
            "save_steps", str(TokenBatchingSeq2SeqTrainingArguments.__dataclass_fields__["save_steps"].default)))
    return follows


def given_values(argv: list[str], *names: str) -> dict[str, str]:
    """The values of the flags `names` in `argv` (either spelling), before the main parser: what other defaults
    depend on."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for name in names:
        parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name)
    try:
        values, _ = parser.parse_known_args(argv)
    except argparse.ArgumentError:
        return {}
    return {name: value for name, value in vars(values).items() if value is not None}


def check_best_model_flags(training_args, data_args) -> None:
    """--save_strategy best, --load_best_model_at_end and --metric_for_best_model: an evaluation during training to
    choose by, a metric that evaluation reports (the Trainer looks it up only after the first evaluation, with a
    KeyError), and no checkpoint averaging, which would replace the best model without a word."""
    metric = training_args.metric_for_best_model
    named = named_splits(data_args)
    no_validation = named is not None and "validation" not in named
    evaluates_none = training_args.eval_strategy == IntervalStrategy.NO or no_validation
    if training_args.save_strategy == SaveStrategy.BEST:  # transformers: a traceback, after the data work
        if evaluates_none:
            raise InputError(
                "--save_strategy best saves a checkpoint when an evaluation scores best, and there is none during "
                "training (--eval_strategy no, or no validation data): give --eval_strategy epoch or steps and "
                "validation data (--validation_prefix or --validation_file)."
            )
        if metric is None:
            raise InputError(
                "--save_strategy best saves a checkpoint when an evaluation scores best by --metric_for_best_model: "
                "name one (bleu, chrf or loss)."
            )
    if metric is not None and training_args.eval_strategy != IntervalStrategy.NO:
        known = ["loss", "bleu", "chrf", "gen_len"]
        if data_args.builtin_dataset:
            known += ["exact_match"] + [f"exact_match_{group}" for group in NUMBER_MAGNITUDES]
        if metric.removeprefix("eval_") not in known:
            raise InputError(
                f"--metric_for_best_model {metric}: evaluation reports {', '.join(known)} (with or without eval_); "
                "choose one of those."
            )
    if training_args.load_best_model_at_end and training_args.do_train and evaluates_none:
        raise InputError(  # the Trainer would keep the last model, without a word
            "--load_best_model_at_end keeps the checkpoint that scored best at an evaluation during training, and "
            "this run evaluates none (--eval_strategy no, or no validation data): give --eval_strategy epoch or "
            "steps and validation data (--validation_prefix or --validation_file), or leave --load_best_model_at_end "
            "out."
        )
    if training_args.load_best_model_at_end and training_args.average_last_checkpoints:
        raise InputError(
            "--load_best_model_at_end and --average_last_checkpoints both choose the run's model: pass "
            "--average_last_checkpoints 0 to keep the best checkpoint, or leave --load_best_model_at_end out to "
            "average the last ones."
        )


def check_launch() -> None:
    """`accelerate launch --num_processes N` that started one process: its simple launcher (`--cpu`, or no
    `--multi_gpu` and no config) sets a rendezvous address for N > 1 processes but starts this one alone, which
    would train by itself, without FSDP, where several processes were asked for."""
    launched_by_accelerate = "ACCELERATE_MIXED_PRECISION" in os.environ
    if launched_by_accelerate and "MASTER_ADDR" in os.environ and "WORLD_SIZE" not in os.environ:
        raise InputError(
            "accelerate launch was asked for several processes but started one (its --cpu launcher, or one without "
            "--multi_gpu, starts a single process): use accelerate launch --multi_gpu --num_processes N (CPU "
            "processes over gloo where there is no GPU), a --config_file, or torchrun --nproc_per_node N."
        )


def default_rate_warmup_steps(training_args) -> int:
    """The warmup in steps, for the paper's peak rate d_model^-0.5 * warmup^-0.5: `--warmup_steps` below 1 is a
    fraction of the training steps (transformers 5), known here for `--max_steps` only."""
    if training_args.warmup_steps >= 1 or training_args.warmup_steps == 0:
        return int(training_args.warmup_steps)
    if training_args.max_steps > 0:
        return training_args.get_warmup_steps(training_args.max_steps)
    raise InputError(
        f"--warmup_steps {training_args.warmup_steps} is a fraction of the training steps, but the default learning "
        "rate (the paper's peak, d_model^-0.5 * warmup^-0.5) needs the warmup in steps, which the epochs do not say "
        "before the data is batched: give --warmup_steps in steps (e.g. 4000), --max_steps, or --learning_rate."
    )


def flags_from_file(path: str) -> list[str]:
    """The command-line flags that a JSON or YAML file of `{flag: value}` stands for (a list: one flag, its values;
    a mapping, such as `fsdp_config`: its JSON; null: the flag left out)."""
    import yaml  # huggingface_hub's dependency

    try:
        text = Path(path).read_text(encoding="utf-8")
        values = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except OSError as error:
        raise InputError(f"Cannot read the flags file {path}: {error.strerror or error}.") from error
    except (ValueError, yaml.YAMLError) as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        mark = getattr(error, "problem_mark", None)  # YAML's, whose message spans lines
        reason = f"{error.problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else error
        raise InputError(f"{path} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: {reason}.") from error
    if not isinstance(values, dict):
        raise InputError(f"{path} must hold one mapping of flag names to values, like {{\"output_dir\": \"runs/x\"}}.")
    argv = []
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, dict):
            value = json.dumps(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        argv += [f"--{name}", *map(str, value if isinstance(value, list) else [value])]
    return argv


PHASES = {"do_train": "train", "do_eval": "validation", "do_predict": "test"}
"""The script's phases (the Trainer's flags) and the split each one needs."""


def given_booleans(argv: list[str], *flags: str) -> dict[str, bool]:
    """The values of the boolean `flags` in `argv` (a bare flag is true), e.g. --do_train/--do_eval/--do_predict; a
    value that is not a boolean is left to the main parser to report."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for flag in flags:
        parser.add_argument(f"--{flag}", f"--{flag.replace('_', '-')}", dest=flag, type=string_to_bool, nargs="?",
                            const=True)  # both spellings, as HfArgumentParser takes them
    try:
        values, _ = parser.parse_known_args(argv)
    except argparse.ArgumentError:
        return {}
    return {flag: value for flag, value in vars(values).items() if value is not None}


def chosen_phases(given: dict[str, bool]) -> dict[str, bool]:
    """Which phases run. By default all three (train, evaluate on validation, translate the test split) where the
    data has the split; as in transformers' translation example, naming phases true (`--do_eval --do_predict`) runs
    those alone; naming phases false (`--do_predict false`) leaves those out."""
    if any(given.values()):
        return {flag: given.get(flag, False) for flag in PHASES}
    return {flag: given.get(flag, True) for flag in PHASES}


def check_phases(model_args: ModelArguments, data_args: DataArguments, training_args, given_true: set[str]) -> None:
    """The chosen phases can run: something to do, a model to evaluate when there is no training, training for at
    least a step, and the data each phase needs (training always, the others where named; a Hub dataset's splits are
    known only once loaded)."""
    if not any(getattr(training_args, flag) for flag in PHASES):
        raise InputError("--do_train, --do_eval and --do_predict are all false: there is nothing to do.")
    if not training_args.do_train:
        if not model_args.model_name_or_path:
            raise InputError(
                "Without training (--do_train false, or only --do_eval/--do_predict) there is no model to evaluate: "
                "name one with --model_name_or_path (a run's folder or a Hub id)."
            )
        if training_args.push_to_hub:
            raise InputError(
                "--push_to_hub pushes the model this run trains, but it does not train (--do_train false): push a "
                f"saved model with `python {sibling_script('push_to_hub.py')} MODEL_DIR REPO_ID`."
            )
    if training_args.max_steps < -1:  # the Trainer reads any negative value as -1, the default: train by epochs
        raise InputError(
            f"--max_steps {training_args.max_steps} is no step count: give a positive one, or leave it out (-1) to "
            "train for --num_train_epochs."
        )
    if training_args.do_train:  # the Trainer counts steps when --max_steps >= 0 (so 0 means no step), else epochs
        flag, steps = ("--max_steps", training_args.max_steps) if training_args.max_steps >= 0 else (
            "--num_train_epochs", training_args.num_train_epochs)
        if not steps > 0:
            raise InputError(
                f"{flag} {steps:g} trains for no step: give a positive --max_steps, or leave it out and give a "
                "positive --num_train_epochs (--do_train false evaluates a --model_name_or_path without training)."
            )
    named = named_splits(data_args)
    for flag, split in PHASES.items():
        if named is None or split in named or not getattr(training_args, flag):
            continue
        if flag in given_true:
            raise InputError(f"--{flag} needs {split} data, and none is given: pass --{split}_prefix or --{split}_file.")
        if flag == "do_train":  # evaluation and test run by default only where the data has them
            raise InputError(
                "Training needs training data, and none is given: pass --train_prefix, --train_file or --dataset_name, "
                "or --do_train false to evaluate --model_name_or_path without training."
            )
    scores = [flag for flag in ("do_eval", "do_predict")
              if getattr(training_args, flag) and (named is None or PHASES[flag] in named)]
    if not training_args.predict_with_generate and scores:
        raise InputError(
            "--predict_with_generate false: this script scores validation and test data by the BLEU and chrF of "
            "translations the model generates, so it needs it true. For less evaluation time use --eval_strategy no "
            "(validation once, after training), --max_eval_samples or --generation_num_beams 1; --do_eval false "
            "--do_predict false skips evaluation."
        )
    whole_set_flags = {
        "prediction_loss_only": (True, "true", "gives the evaluation's loss alone, without the translations"),
        "eval_do_concat_batches": (False, "false", "hands over the translations batch by batch"),
        "batch_eval_metrics": (True, "true", "asks for scores batch by batch"),
    }
    for flag, (value, shown, effect) in whole_set_flags.items():
        if scores and getattr(training_args, flag) == value:
            raise InputError(
                f"--{flag} {shown} {effect}, and this script scores validation and test data by the BLEU and chrF of "
                f"the whole set's translations: leave --{flag} out. (--do_eval false --do_predict false skips "
                "evaluation.)"
            )
    if not training_args.do_train and not scores:
        raise InputError(
            "Without training (--do_train false) the run evaluates on validation data and translates test data, and "
            "neither is given: pass --validation_prefix/--validation_file or --test_prefix/--test_file."
        )


def named_splits(data_args: DataArguments) -> set[str] | None:
    """The splits the data flags name (None for a Hub dataset, whose splits are known once loaded)."""
    if data_args.dataset_name:
        return None
    if data_args.builtin_dataset:
        return set(PHASES.values())
    return {split for split in PHASES.values()
            if getattr(data_args, f"{split}_prefix") or getattr(data_args, f"{split}_file")}


def show_run_defaults_in_help(parser: HfArgumentParser, defaults: dict[str, str], *, builtin: bool) -> None:
    """Make `--help` show the defaults this command line runs with (the paper's recipe, the built-in run's), not
    the dataclasses' (transformers' label smoothing 0.0, Adam's beta2 0.999, ...)."""
    parser.set_defaults(**defaults)
    for action in parser._actions:  # argparse keeps no public list; `%(default)s` reads action.default
        if action.dest == "learning_rate" and "learning_rate" not in defaults:
            action.default = ("d_model^-0.5 * warmup_steps^-0.5, the paper's peak (section 5.3); "
                              f"{FINE_TUNING_LEARNING_RATE:g} with --model_name_or_path, the Trainer's default")
        if action.dest == "generation_num_beams":
            action.default = "the model's generation config: 4 for a new model, as in the paper (section 6.1)"
        if action.dest == "warmup_steps":
            action.default = (f"{defaults.get('warmup_steps', action.default)}; {FINE_TUNING_WARMUP * 100:g}% of the "
                              "training steps with --model_name_or_path")
    phases = ("By default every phase runs where the data has its split: train, evaluate on validation, translate "
              "the test split; --do_X false leaves one out, and naming phases true (--do_eval --do_predict) runs those "
              "alone.")
    own_help = {
        "do_train": f"Train. {phases}", "do_eval": "Evaluate (BLEU, chrF) on the validation split.",
        "do_predict": "Translate and score the test split.",
        "resume_from_checkpoint": ("true: go on from the last complete checkpoint in --output_dir, with the flags the "
                                   "run started with; or the path of one checkpoint-<step> folder."),
        "push_to_hub": "Push the run's model, tokenizer and card to the Hub once, at the end (--hub_model_id names "
                       "the repository; default: the output folder's name).",
    }
    for action in parser._actions:
        if action.dest in own_help:
            action.help = own_help[action.dest]
        if action.dest in PHASES:  # the dataclass's False is not what runs
            action.default = "true where its split is there, unless other phases are named true"
    parser.usage = ("%(prog)s --output_dir DIR [data flags] [model flags] [training flags]\n"
                    "       %(prog)s FLAGS.json (or .yaml: the same flags as a file)")
    run = ("the built-in number-words run's (name a data flag, e.g. `--train_prefix data/train --help`, to see a "
           "run on your data's)" if builtin else "a run on your data's")
    parser.description = (
        f"Train a Transformer for translation. The defaults shown are {run}: the paper's recipe (Adam 0.9/0.98/1e-9, "
        "the inverse square root schedule, label smoothing 0.1, beam 4) where transformers' defaults differ, and "
        "the settings of this machine.")


def recipe_defaults(given: set[str]) -> dict[str, str]:
    """The flags the run gets unless `given`: the paper's recipe, the small run when no data is named, and the
    settings of the machine it runs on."""
    defaults = dict(PAPER_RECIPE)
    if is_builtin_run(given):
        defaults.update(BUILTIN_RUN)
    for kind in ("save", "eval"):  # --save_steps alone means saving by steps, as with transformers' own defaults
        if f"{kind}_steps" in given:
            defaults[f"{kind}_strategy"] = "steps"
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.accelerator.is_available():
        # `accelerate launch --multi_gpu` on a machine without GPUs: accelerate runs DDP over gloo on CPU processes
        # only when told to use the CPU; otherwise each process would train alone.
        defaults["use_cpu"] = "true"
    elif torch.cuda.is_available() and "use_cpu" not in given:
        defaults.update(GPU_DEFAULTS)
    if not torch.accelerator.is_available():  # pinned memory speeds copies to an accelerator; without one torch warns
        defaults["dataloader_pin_memory"] = "false"
    return defaults


def is_builtin_run(given: set[str]) -> bool:
    """Whether a run with the flags `given` trains on the built-in corpus: it names no data, or the corpus itself."""
    return not (given & DATA_SOURCE_FLAGS) - {"builtin_dataset"}


def default_averaging_fits(training_args, given: set[str]) -> bool:
    """Whether a default `--average_last_checkpoints` fits the user's flags (`given`): the run saves and keeps the
    checkpoints it averages, is not under FSDP, which does not average, and does not keep its best checkpoint as its
    model (--load_best_model_at_end) or saves only its best ones (--save_strategy best: averaging those mixes steps
    far apart). A --save_total_limit of 0 keeps them all, as in transformers."""
    count, limit = training_args.average_last_checkpoints, training_args.save_total_limit
    if training_args.save_strategy in (SaveStrategy.NO, SaveStrategy.BEST) or fsdp_requested(training_args):
        return False
    if training_args.load_best_model_at_end:  # the best checkpoint is the run's model
        return False
    return count is None or "save_total_limit" not in given or limit is None or limit <= 0 or limit >= count


def builtin_overwrite_fits(model_args, data_args, training_args) -> bool:
    """Whether the built-in run's default --overwrite_output_dir may replace what --output_dir holds: nothing of a
    run, or a finished run of the built-in corpus trained from scratch (`./run.sh main` again). A fine-tuning, a
    folder with another run in it (another corpus, a fine-tuning) or a run stopped before its end (its checkpoints
    may be resumed: hours of training, deleted by the same command run again) is not emptied unasked: the run stops
    there as any other does, saying to resume it or to pass --overwrite_output_dir true."""
    if model_args.model_name_or_path:
        return False
    folder, corpus = Path(training_args.output_dir), data_source_description(data_args)

    def only_the_builtin_run() -> bool:
        if (folder / CARD_INPUTS_FILE).is_file():  # a finished run: its card's inputs say what it trained on
            try:
                inputs = json.loads((folder / CARD_INPUTS_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return False
            return isinstance(inputs, dict) and inputs.get("dataset_description") == corpus \
                and not inputs.get("base_model")
        if run_checkpoints(folder):  # a run stopped before its end (Ctrl-C): resumable, not deleted unasked
            return False
        return not any((folder / name).is_file() for name in ("model.safetensors", *RESULT_FILES))

    return _as_the_main_process_sees(training_args, only_the_builtin_run)


def check_output_dir_is_no_input(model_args, training_args) -> None:
    """The run's folder does not hold what the run starts from (--model_name_or_path, --config_name,
    --tokenizer_name: the folder itself, one of its checkpoints or a file in it): training would replace that model,
    and --overwrite_output_dir (the built-in run's default) delete it before it is read; scoring would replace the
    run's results with a checkpoint's while its card keeps the old ones."""
    output_dir = Path(training_args.output_dir).resolve()
    for flag in ("model_name_or_path", "config_name", "tokenizer_name"):
        given = getattr(model_args, flag)
        if not given or not os.path.exists(given) or not Path(given).resolve().is_relative_to(output_dir):
            continue
        what = ("training into it would replace it, and --overwrite_output_dir delete it before it is read"
                if training_args.do_train else "scoring into it would replace the run's results while its card "
                "keeps the old ones")
        raise InputError(
            f"--{flag} {given} lies in --output_dir {training_args.output_dir}: {what}. Give another --output_dir, "
            f"e.g. {new_folder(Path(training_args.output_dir) / ('tuned' if training_args.do_train else 'scored'))}."
        )


def warn_about_another_direction(model: str | None, data_args, training: bool) -> None:
    """Warn when a saved model (a run's folder or one of its checkpoints) was trained on another language direction
    than the flags give, as its card inputs record: scored with --source_lang and --target_lang swapped, the
    Multi30k model wrote German gibberish for German sources and scored BLEU 0.9, without a word."""
    if not model or not os.path.isdir(model):
        return
    folder = Path(model)
    candidates = [folder, folder.parent] if re.fullmatch(r"checkpoint-\d+", folder.name) else [folder]
    # the run's card inputs, else the tokenizer's languages (an opus-mt model's MarianTokenizer records them)
    for candidate in [*(c / CARD_INPUTS_FILE for c in candidates), folder / "tokenizer_config.json"]:
        try:
            inputs = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(inputs, dict):
            continue
        learned = (inputs.get("source_lang"), inputs.get("target_lang"))
        given = (data_args.source_lang, data_args.target_lang)
        codes = [language_code(code) for code in (*learned, *given)]
        if codes[:2] == codes[2:] or not all(len(code) == 2 and code.isalpha() for code in codes):
            return  # the same languages, or ids that cannot be compared (opus-mt's groups `mul`, `ROMANCE`)
        swapped = " (the other way round)" if codes[:2] == codes[2:][::-1] else ""
        why = ("fine-tuning starts from a model of that direction" if training else
               "it translates as it learned, and these scores will say little about it")
        if getattr(data_args, "builtin_dataset", None):  # no data flags given: the user named no languages
            data = inputs.get("dataset_name") or inputs.get("dataset_description")
            logger.warning(
                "%s was trained to translate %s -> %s%s, and this run, given no data flags, %s the built-in %s corpus "
                "(%s -> %s): %s. Give the data with --train_prefix, --validation_prefix or --test_prefix (or the "
                "--*_file flags, or --dataset_name) and its --source_lang and --target_lang.",
                model, *learned, f" on {data}" if data else "", "fine-tunes it on" if training else "scores it on",
                data_args.builtin_dataset, *given, why,
            )
            return
        logger.warning(
            "%s was trained to translate %s -> %s, and this run gives --source_lang %s --target_lang %s%s: %s. "
            "Check the two flags.", model, *learned, *given, swapped, why,
        )
        return


def check_fsdp_saving(training_args) -> None:
    """The Trainer under FSDP writes no --save_only_model checkpoint: it fails at the first one."""
    if training_args.save_only_model and fsdp_requested(training_args):
        raise InputError(
            "--save_only_model under FSDP: the Trainer fails at the first checkpoint of a sharded model without its "
            "optimizer state. Leave --save_only_model out under FSDP (its checkpoints are shards, quick to write)."
        )


def check_averaging(training_args, keep_limit: bool) -> None:
    """`--average_last_checkpoints N` needs N checkpoints on disk at the end: say so before training, not after."""
    count = training_args.average_last_checkpoints
    if count == 0:  # how to turn a default averaging off
        training_args.average_last_checkpoints = None
    if not count:
        return
    if count < 0:
        raise InputError(f"--average_last_checkpoints must be 0 (no averaging) or more, got {count}.")
    if training_args.save_strategy == SaveStrategy.NO:
        raise InputError(
            "--average_last_checkpoints averages saved checkpoints, but --save_strategy is 'no': use 'epoch' or "
            "'steps' (with --save_steps)."
        )
    limit = training_args.save_total_limit
    if limit is not None and 0 < limit < count:  # 0 (or less) keeps every checkpoint, as in transformers
        if keep_limit:
            raise InputError(
                f"--average_last_checkpoints {count} needs {count} checkpoints, but --save_total_limit {limit} keeps "
                f"only {limit}: raise --save_total_limit to at least {count}."
            )
        training_args.save_total_limit = count


def _unknown_flags_message(unknown: list[str], parser: HfArgumentParser) -> str:
    """Name the arguments the parser did not take, with the closest known flag for each misspelt one."""
    files = [arg for arg in unknown if arg.endswith((".json", ".yaml", ".yml")) and not arg.startswith("-")]
    if files:
        return (f"{files[0]} looks like a file of flags: such a file must be the only argument (put every flag in "
                "it), or give the flags on the command line alone.")
    known = [option for action in parser._actions for option in action.option_strings]
    hints = []
    for index, arg in enumerate(unknown):
        if not arg.startswith("--"):
            continue
        flag, _, value = arg.partition("=")
        if not value and index + 1 < len(unknown) and not unknown[index + 1].startswith("--"):
            value = unknown[index + 1]
        name = flag.lstrip("-").replace("-", "_")
        hint = RENAMED_FLAGS.get(name) or OTHER_TOOLKITS_FLAGS.get(name.lower(), "")
        close = hint.format(value=value or "0.1") or next(  # the value given, where the hint shows one
            iter(difflib.get_close_matches(flag, known, n=1)), None)
        hints.append(f"{flag} (did you mean {close}?)" if close else flag)
    return (
        f"Unknown arguments: {' '.join(hints) if hints else ' '.join(unknown)}. `python "
        f"{sibling_script('train_translation.py')} --help` lists every flag."
    )


RENAMED_FLAGS = {
    "group_by_length": "--train_sampling_strategy group_by_length",
    "warmup_ratio": "--warmup_steps {value} (below 1, a fraction of the training steps)",
    "logging_dir": "the TENSORBOARD_LOGGING_DIR environment variable",
    "evaluation_strategy": "--eval_strategy",
}
"""transformers 4 flags that transformers 5 renamed or removed, and what replaced them."""

OTHER_TOOLKITS_FLAGS = {
    **dict.fromkeys(("lr",), "--learning_rate"),
    **dict.fromkeys(("pre_ln", "pre_norm", "prenorm", "pre_layer_norm", "encoder_normalize_before"),
                    "--normalize_before true"),
    **dict.fromkeys(("beam", "beam_size", "num_beams", "beam_width"), "--generation_num_beams"),
    **dict.fromkeys(("batch_size", "bsz", "train_batch_size"),
                    "--per_device_train_batch_size, or --max_tokens_per_batch for batches by tokens"),
    **dict.fromkeys(("max_tokens", "batch_tokens", "tokens_per_batch"), "--max_tokens_per_batch"),
    **dict.fromkeys(("epochs", "num_epochs", "max_epoch", "train_epochs"), "--num_train_epochs"),
    **dict.fromkeys(("max_update", "train_steps", "num_steps"), "--max_steps"),
    **dict.fromkeys(("warmup", "warmup_updates", "warmup_iters"), "--warmup_steps"),
    **dict.fromkeys(("src_lang", "source", "src", "source_language"), "--source_lang"),
    **dict.fromkeys(("tgt_lang", "target", "tgt", "target_language"), "--target_lang"),
    **dict.fromkeys(("clip_norm", "clip_grad", "max_norm"), "--max_grad_norm"),
    **dict.fromkeys(("label_smoothing", "smoothing"), "--label_smoothing_factor"),
    **dict.fromkeys(("vocab", "bpe_size", "vocab_size_bpe"), "--vocab_size"),
    **dict.fromkeys(("num_layers", "n_layers", "encoder_layers", "decoder_layers"), "--layers"),
    **dict.fromkeys(("heads", "num_heads", "n_heads", "nhead", "encoder_attention_heads"), "--attention_heads"),
    **dict.fromkeys(("d_ff", "dim_feedforward", "encoder_ffn_dim", "ffn_embed_dim"), "--ffn_dim"),
    **dict.fromkeys(("hidden_size", "embed_dim", "encoder_embed_dim", "model_dim"), "--d_model"),
}
"""Names other toolkits (fairseq, OpenNMT, Marian, tensor2tensor) or the paper use for a flag, and this script's
flag: difflib's nearest spelling pointed `--pre_ln` at --target_lang and `--beam` at --label_names."""


DATA_SOURCE_FLAGS = {name for fields in DATA_SOURCES.values() for name in fields}


def model_d_model(model_args: ModelArguments, data_args: DataArguments) -> int:
    """d_model of the model to train, for the paper's peak learning rate d_model^-0.5 * warmup^-0.5."""
    name = model_args.model_name_or_path or model_args.config_name
    if name and not (model_args.config_name and model_args.d_model):
        location = _pretrained(name)  # "No model directory at ..." for a path that is none
        with loading_from(location, "a model's config"):
            return AutoConfig.from_pretrained(location).d_model
    return model_args.d_model or model_sizes(model_args, data_args).get("d_model", VanillaTransformerConfig().d_model)


SIZE_FLAGS = ("preset", "d_model", "layers", "attention_heads", "ffn_dim", "normalize_before")
"""The flags that shape a new model (`--dropout` also applies to a fine-tuned one)."""


ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
"""What --attn_implementation takes: transformers' backends that this model supports (not flash attention, see
`VanillaTransformerPreTrainedModel._supports_flash_attn`)."""


def check_new_model_flags(model_args: ModelArguments, data_args: DataArguments, given: set[str]) -> None:
    """The size flags of a new model make a possible model: say so at once, not after the tokenizer's training.
    A fine-tuned model has its own size and vocabulary, and a config its own preset: flags that would be silently
    ignored are an error. --attn_implementation is one this model runs."""
    if model_args.attn_implementation not in ATTENTION_IMPLEMENTATIONS:
        flash = "flash" in str(model_args.attn_implementation)
        flash = " (flash attention drops cross-attention rows of padded sources)" if flash else ""
        raise InputError(f"--attn_implementation {model_args.attn_implementation}: this model runs "
                         f"{', '.join(ATTENTION_IMPLEMENTATIONS)}{flash}.")
    if model_args.model_name_or_path:
        ignored = [f"--{flag}" for flag in (*SIZE_FLAGS, "vocab_size", "config_name") if flag in given]
        if ignored:
            raise InputError(
                f"{', '.join(ignored)} {'shape' if len(ignored) > 1 else 'shapes'} a new model, but "
                f"--model_name_or_path {model_args.model_name_or_path} "
                "loads a trained model, which has its size and vocabulary already: leave them out (--dropout may be "
                "changed), or leave out --model_name_or_path to train a new model."
            )
        return
    if model_args.config_name:
        if "preset" in given:
            raise InputError(
                "--preset and --config_name both say what model to train: give one (the size flags, such as "
                "--d_model, change either)."
            )
        check_config_with_flags(model_args)
        return
    if model_args.tokenizer_name and "vocab_size" in given:
        raise InputError(
            f"--vocab_size sizes a tokenizer trained on the data, but --tokenizer_name {model_args.tokenizer_name} "
            "gives one, whose size is the model's vocabulary: leave out one of them."
        )
    vocab_size = VanillaTransformerConfig().vocab_size if model_args.tokenizer_name else model_args.vocab_size
    try:
        model_config(model_args, data_args, vocab_size)
    except ValueError as error:
        raise InputError(
            f"The model flags make an impossible model: {str(error).rstrip('.')}. Fix --vocab_size, --preset, "
            "--d_model, --layers, --attention_heads, --ffn_dim or --dropout (`--help` describes them)."
        ) from error


def check_config_with_flags(model_args: ModelArguments) -> None:
    """A local --config_name with the size flags given beside it makes a possible model: said at once, not in a
    traceback after the tokenizer's training (a Hub id is read when the model is made)."""
    overrides = size_overrides(model_args)
    if not overrides or not Path(model_args.config_name).exists():
        return
    with loading_from(model_args.config_name, "a model's config"):
        config = AutoConfig.from_pretrained(_pretrained(model_args.config_name))
    if not isinstance(config, VanillaTransformerConfig):
        return  # another kind of model: refused, with its own message, where the model is made
    try:
        for name, value in overrides.items():
            setattr(config, name, value)
        config.check_values()
    except ValueError as error:
        raise InputError(
            f"The model flags make an impossible model of --config_name {model_args.config_name}: "
            f"{str(error).rstrip('.')}. Fix --d_model, --layers, --attention_heads, --ffn_dim or --dropout."
        ) from error


def check_data_flags(model_args: ModelArguments, data_args: DataArguments) -> None:
    """Lengths, sample limits and a vocabulary size that would train on nothing, fail deep inside `datasets`, or be
    silently replaced: one message each, before any work."""
    check_languages_given(data_args)
    if data_args.source_lang == data_args.target_lang:
        raise InputError(
            f"--source_lang and --target_lang are both {data_args.source_lang!r}: name the language translated from "
            "and the one translated into."
        )
    if data_args.num_samples_to_print < 0:
        raise InputError(f"--num_samples_to_print must be 0 or more, got {data_args.num_samples_to_print}.")
    for name in ("max_source_length", "max_target_length"):  # a sentence cut to 1 token is its end token alone
        if getattr(data_args, name) < 2:
            raise InputError(f"--{name} must be at least 2 tokens (a word and the end token), got "
                             f"{getattr(data_args, name)}.")
    for name in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
        value = getattr(data_args, name)
        if value is not None and value < 1:
            raise InputError(f"--{name} must be at least 1, got {value}; leave it out to use the whole split.")
    for name in ("number_words_train_size", "number_words_eval_size"):  # the built-in corpus' splits
        if getattr(data_args, name) < 1:
            raise InputError(f"--{name} must be at least 1 pair, got {getattr(data_args, name)}.")
    if data_args.max_length_chars is not None and data_args.max_length_chars < 1:
        raise InputError(f"--max_length_chars must be at least 1 character, got {data_args.max_length_chars}; leave it "
                         "out to train on pairs of any length.")
    smallest = 256 + len(SPECIAL_TOKENS)  # a byte-level BPE starts from every byte
    if not (model_args.tokenizer_name or model_args.model_name_or_path) and model_args.vocab_size < smallest:
        raise InputError(
            f"--vocab_size {model_args.vocab_size} is smaller than the byte-level BPE's alphabet (256 bytes and "
            f"{len(SPECIAL_TOKENS)} special tokens): give at least {smallest}."
        )
    if model_args.vocab_size > LARGEST_VOCABULARY:  # the BPE trainer's allocation for 10^9 aborted the process
        raise InputError(
            f"--vocab_size {model_args.vocab_size:,} is more than a translation vocabulary needs (the paper's: 37,000 "
            f"tokens) and than the BPE trainer can hold: give at most {LARGEST_VOCABULARY:,}."
        )


LARGEST_VOCABULARY = 2**20
"""The largest --vocab_size taken: more than any translation model uses (the paper's 37,000; the largest language
models' about 256,000), and at 10^9 the BPE trainer aborted the process on its allocation, with a Rust backtrace."""


def check_training_flags(training_args) -> None:
    """Values the Trainer would take and then fail on (a traceback from the optimizer, a file where the run's folder
    goes): one message each, before any work."""
    output_dir = training_args.output_dir
    if output_dir and os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise InputError(f"--output_dir {output_dir} is a file: give a folder for the run (made if missing).")
    warmup = training_args.warmup_steps
    if warmup > 1 and not float(warmup).is_integer():  # the Trainer warms up int(1.5) = 1 step, the card said 1.5
        raise InputError(f"--warmup_steps {warmup}: give a whole number of steps, or a share of the training steps "
                         "below 1 (0.1 is a tenth of them).")
    if training_args.max_grad_norm is not None and training_args.max_grad_norm < 0:  # no clipping, the card said -1
        raise InputError(f"--max_grad_norm {training_args.max_grad_norm}: give the gradient norm to clip at (the "
                         "default 1.0), or 0 for no clipping.")
    available = get_available_reporting_integrations()
    # the command line takes one value: several are a comma list ("tensorboard,wandb"), which the Trainer reads as
    # one name
    training_args.report_to = [name.strip() for item in training_args.report_to for name in item.split(",")
                               if name.strip()]
    unknown = [name for name in training_args.report_to if name not in INTEGRATION_TO_CALLBACK]
    if unknown:
        raise InputError(
            f"--report_to {','.join(unknown)}: transformers reports to none of that name; it knows "
            f"{', '.join(sorted(INTEGRATION_TO_CALLBACK))}, all and none (several: a comma list, e.g. "
            "tensorboard,wandb)."
        )
    missing = [name for name in training_args.report_to if name not in available]
    if missing:
        raise InputError(
            f"--report_to {' '.join(missing)}: not installed here (found: {', '.join(available) or 'none'}). Install "
            f"it (e.g. `pip install {missing[0]}`), or leave it out of --report_to."
        )
    if not training_args.learning_rate >= 0:  # NaN too
        raise InputError(f"--learning_rate must be 0 or more, got {training_args.learning_rate}.")
    for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
        if getattr(training_args, name) < 1:
            raise InputError(f"--{name} must be at least 1, got {getattr(training_args, name)}.")
    tokens = training_args.max_tokens_per_batch
    if tokens is not None and tokens < 1:
        raise InputError(
            f"--max_tokens_per_batch must be at least 1 token, got {tokens}; leave it out to batch "
            "--per_device_train_batch_size sentences."
        )
    if tokens is not None and training_args.auto_find_batch_size:
        raise InputError(
            "--auto_find_batch_size halves --per_device_train_batch_size after running out of memory, and "
            "--max_tokens_per_batch batches by tokens instead, so it would fail at every size: give a smaller "
            "--max_tokens_per_batch, or leave --max_tokens_per_batch out."
        )
    if not 0 <= training_args.label_smoothing_factor < 1:
        raise InputError(
            "--label_smoothing_factor is the probability spread from the reference token over the vocabulary "
            f"(the paper: 0.1) and must lie in [0, 1), got {training_args.label_smoothing_factor}."
        )
    for name in ("adam_beta1", "adam_beta2"):
        value = getattr(training_args, name)
        if not 0 <= value < 1:
            raise InputError(f"--{name} must lie in [0, 1) (the paper: 0.9 and 0.98), got {value}.")
    for name in ("adam_epsilon", "weight_decay"):
        value = getattr(training_args, name)
        if not value >= 0:
            raise InputError(f"--{name} must be 0 or more, got {value}.")
    beams, length = training_args.generation_num_beams, training_args.generation_max_length
    if beams is not None and beams < 1:
        raise InputError(f"--generation_num_beams must be at least 1 (1: greedy search), got {beams}.")
    if length is not None and length < 2:
        raise InputError(
            f"--generation_max_length counts the start token, so it must be at least 2, got {length}; leave it out "
            "for the paper's limit (source length + 50)."
        )
    if training_args.fp16 and training_args.device.type == "cpu":
        raise InputError(
            "--fp16 is float16 with loss scaling on a GPU, and this run is on the CPU, where accelerate would train "
            "in float32 without a word: leave --fp16 out, or use --bf16 --use_cpu for 16-bit training on the CPU."
        )
    check_optimizer_and_schedule(training_args)
    for kind in ("eval", "save", "logging"):  # every N steps, or a fraction (< 1) of the training steps
        strategy, steps = getattr(training_args, f"{kind}_strategy"), getattr(training_args, f"{kind}_steps")
        if strategy == "steps" and steps is not None and not steps > 0:
            raise InputError(
                f"--{kind}_steps must be above 0 with --{kind}_strategy steps, got {steps} (a number of steps, or "
                "below 1 a fraction of the training steps)."
            )


def check_optimizer_and_schedule(training_args) -> None:
    """--optim and --lr_scheduler_type (with --optim_args, --lr_scheduler_kwargs) can be made: the Trainer makes them
    after the data is loaded and tokenized, and a missing package or setting was a traceback then."""
    try:
        Seq2SeqTrainer.get_optimizer_cls_and_kwargs(training_args)
    except (ImportError, ValueError, TypeError) as error:
        needs_the_model = "pass a model" in str(error) or "pass a `model`" in str(error)  # GaLore, Apollo, LOMO
        if not needs_the_model:  # (those the Trainer checks, with the model)
            name = getattr(training_args.optim, "value", training_args.optim)
            raise InputError(f"--optim {name}: {first_line(error)}") from error
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)  # a stand-in, for the schedule's checks
    try:
        get_scheduler(training_args.lr_scheduler_type, optimizer, num_warmup_steps=1, num_training_steps=10,
                      scheduler_specific_kwargs=training_args.lr_scheduler_kwargs)
    except (ValueError, TypeError) as error:
        raise InputError(
            f"--lr_scheduler_type {getattr(training_args.lr_scheduler_type, 'value', training_args.lr_scheduler_type)}: "
            f"{first_line(error)} Give its settings with "
            "--lr_scheduler_kwargs (a JSON object of them), or choose another schedule."
        ) from error


def check_push_flags(training_args) -> None:
    """`--push_to_hub` can push: a valid repository id, a token, the Hub not switched off and its host name known
    (no request), then the token's account, its right to write and the repository's model type (one request each,
    `check_push_account`). Checked when the run starts rather than when parsing, so that a command line parses on
    any machine."""
    repo_id = push_repo_id(training_args)
    try:
        check_push_target(repo_id, training_args.hub_token, token_flag="--hub_token")
    except InputError as error:
        raise InputError(f"--push_to_hub: {error}") from None
    if hub_unreachable():  # a name lookup, no request: the push at the end would fail after all the training
        raise InputError(
            f"--push_to_hub: the Hub ({hub_host()}) cannot be reached from here (no network, no name service, or no connection), so "
            "the run could not be pushed at its end: train without --push_to_hub and push the saved run later, from "
            f"a machine that reaches the Hub: python {sibling_script('push_to_hub.py')} {training_args.output_dir} "
            f"{repo_id}"
        )
    check_push_account(repo_id, training_args.hub_token, training_args.hub_revision)


def model_sizes(model_args: ModelArguments, data_args: DataArguments) -> dict:
    """The preset's sizes ('base' unless the built-in corpus, then 'tiny')."""
    preset = model_args.preset or ("tiny" if data_args.builtin_dataset else "base")
    presets = {"base": {}, "big": BIG_SIZES, "tiny": TINY_MODEL}
    if preset not in presets:
        raise InputError(f"--preset must be one of {sorted(presets)}, got {preset!r}.")
    return dict(presets[preset])


def size_overrides(model_args: ModelArguments) -> dict:
    """The config fields the size flags set (those given)."""
    overrides = {
        "d_model": model_args.d_model,
        "encoder_layers": model_args.layers,
        "decoder_layers": model_args.layers,
        "encoder_attention_heads": model_args.attention_heads,
        "decoder_attention_heads": model_args.attention_heads,
        "encoder_ffn_dim": model_args.ffn_dim,
        "decoder_ffn_dim": model_args.ffn_dim,
        "dropout": model_args.dropout,
        "normalize_before": model_args.normalize_before,
    }
    return {name: value for name, value in overrides.items() if value is not None}


def model_config(model_args: ModelArguments, data_args: DataArguments, vocab_size: int, **token_ids):
    """A new model's config: the preset, then the size flags, then the tokenizer's vocabulary and special ids."""
    fields = {**model_sizes(model_args, data_args), **size_overrides(model_args)}
    return VanillaTransformerConfig(
        **fields, vocab_size=vocab_size, attn_implementation=model_args.attn_implementation, **token_ids
    )


def load_or_train_tokenizer(model_args, data_args, training_args, raw_datasets, resume_from: str | None = None):
    """The given tokenizer; when resuming, the checkpoint's (else the run folder's); else a new BPE one, trained on
    the training data and saved in output_dir. A tokenizer left in output_dir by an earlier run is not reused unless
    resuming: its vocabulary may not be what the flags ask for now. Under several processes the main process
    chooses or trains it and sends it to the others: on other machines the run's folder may hold an earlier run's,
    or nothing (no shared disk). A given tokenizer must have the special tokens the model needs (InputError, before
    any tokenizing), is made to end its encodings with eos where it does not (`append_eos`), and must give text back
    (`check_decodes_to_text`)."""
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if name:
        given = model_args.tokenizer_name is not None
        with loading_from(name, "a tokenizer"):
            tokenizer = load_tokenizer(name, remedy="Give --tokenizer_name a folder written by `tokenizer."
                                       "save_pretrained(folder)`, or a Hub id, or leave it out to train a tokenizer "
                                       "on the data." if given else None)
        needed = ["pad_token", "eos_token"] + ([] if model_args.model_name_or_path else ["bos_token"])
        check_special_tokens(tokenizer, needed, name,
                             remedy="Or leave --tokenizer_name out to train a tokenizer on the data." if given else "")
        append_eos(tokenizer, name)
        if given and not model_args.model_name_or_path:  # a new model, which has no table of positions
            drop_length_limit(tokenizer, name)
        if given:  # a model's own tokenizer is the one it learned: evaluating or fine-tuning it is not refused
            check_decodes_to_text(tokenizer, decoding_sample(raw_datasets, data_args.target_lang), name)
        if resume_from:
            check_resumed_tokenizer(tokenizer, name, resume_from)
        return tokenizer
    return _as_the_main_process_sees(
        training_args, lambda: resumed_or_new_tokenizer(model_args, data_args, training_args, raw_datasets, resume_from)
    )


def check_resumed_tokenizer(tokenizer, name: str, checkpoint: str) -> None:
    """A run resumed with a tokenizer given (--tokenizer_name, or the fine-tuned model's) goes on with the one its
    checkpoint was trained with: with another, each id would mean another token to the half-trained weights."""
    if not (Path(checkpoint) / "tokenizer.json").is_file():  # a checkpoint of an older version, or none saved
        return
    saved = load_tokenizer(checkpoint)
    special = ("pad_token_id", "eos_token_id", "bos_token_id")
    vocabulary, saved_vocabulary = tokenizer.get_vocab(), saved.get_vocab()
    if vocabulary == saved_vocabulary and all(getattr(tokenizer, i) == getattr(saved, i) for i in special):
        return
    moved = sum(vocabulary.get(token) != index for token, index in saved_vocabulary.items())
    if len(vocabulary) != len(saved_vocabulary):  # "0 of its 300 tokens have another id" for a larger one
        differs = f"{len(vocabulary)} tokens, the checkpoint's {len(saved_vocabulary)}"
    elif moved:
        differs = f"{moved} of its {len(saved_vocabulary)} tokens have another id"
    else:
        differs = "other special tokens: " + ", ".join(f"{i} {getattr(tokenizer, i)} (the checkpoint's: "
                                                       f"{getattr(saved, i)})" for i in special
                                                       if getattr(tokenizer, i) != getattr(saved, i))
    raise InputError(
        f"The tokenizer of {name} is not the one {checkpoint} was trained with ({differs}): the resumed model would "
        "read each id as another token. "
        "Resume with the run's own tokenizer (leave --tokenizer_name out: the checkpoint's is used), or train anew."
    )


def resumed_or_new_tokenizer(model_args, data_args, training_args, raw_datasets, resume_from: str | None):
    """`load_or_train_tokenizer`'s work in the main process."""
    output_dir = Path(training_args.output_dir)
    for folder in [Path(resume_from), output_dir] if resume_from else []:
        if (folder / "tokenizer.json").exists():
            logger.info("Reusing the tokenizer saved in %s", folder)
            return load_tokenizer(folder)
    texts = translation_texts(raw_datasets["train"], data_args.source_lang, data_args.target_lang)
    normalizer = number_words_normalizer() if data_args.builtin_dataset else None
    tokenizer = train_bpe_tokenizer(texts, model_args.vocab_size, normalizer=normalizer)
    tokenizer.save_pretrained(output_dir)
    logger.info("Trained a shared BPE vocabulary of %d tokens", len(tokenizer))
    if len(tokenizer) < 0.9 * model_args.vocab_size:
        logger.warning(
            "The BPE vocabulary has %d tokens, fewer than --vocab_size %d: the training text has no more merges "
            "to learn. The model's vocabulary is the tokenizer's.", len(tokenizer), model_args.vocab_size,
        )
    return tokenizer


def _pretrained(name_or_path: str) -> str:
    """A model (or config) folder or Hub id, checked: a local folder must hold a saved config."""
    if os.path.isfile(name_or_path) and name_or_path.endswith(".json"):
        return name_or_path  # --config_name may name the config file itself
    return model_location(name_or_path)


def load_or_build_model(model_args, data_args, tokenizer):
    """The model to train or score: --model_name_or_path's (its dropout changed by --dropout), one built from
    --config_name, or a new one of the preset and size flags; with the tokenizer's vocabulary and special tokens."""
    if model_args.model_name_or_path:
        dropout = {} if model_args.dropout is None else {"dropout": model_args.dropout}
        with loading_from(model_args.model_name_or_path):
            model = AutoModelForSeq2SeqLM.from_pretrained(
                _pretrained(model_args.model_name_or_path), attn_implementation=model_args.attn_implementation,
                **dropout,
            )
        if len(tokenizer) < 0.9 * model.config.vocab_size:  # a larger one is caught on the data's token ids
            raise InputError(
                f"The tokenizer {model_args.tokenizer_name or model_args.model_name_or_path} has {len(tokenizer)} "
                f"tokens and the model {model_args.model_name_or_path} a vocabulary of {model.config.vocab_size}: it "
                "is not the tokenizer the model learned, whose ids would mean other words. Leave --tokenizer_name "
                "out to use the model's own."
            )
        if model_args.tokenizer_name:
            check_the_models_own_tokenizer(tokenizer, model_args)
        return this_packages_model(model, model_args.model_name_or_path, model_args.attn_implementation)
    ids = special_token_ids(tokenizer)
    vocabulary = vocabulary_size(tokenizer)
    if model_args.config_name:
        with loading_from(model_args.config_name, "a model's config"):
            config = AutoConfig.from_pretrained(
                _pretrained(model_args.config_name), vocab_size=vocabulary, **ids, **size_overrides(model_args)
            )
        model = AutoModelForSeq2SeqLM.from_config(config, attn_implementation=model_args.attn_implementation)
        return this_packages_model(model, model_args.config_name, model_args.attn_implementation)
    return VanillaTransformerForConditionalGeneration(model_config(model_args, data_args, vocabulary, **ids))


def vocabulary_size(tokenizer) -> int:
    """The rows a new model's embedding needs for `tokenizer`: its largest id + 1, which is more than its number of
    tokens where its ids leave gaps (a vocabulary pruned by hand, say)."""
    return max(len(tokenizer), max(tokenizer.get_vocab().values(), default=-1) + 1)


def check_the_models_own_tokenizer(tokenizer, model_args) -> None:
    """--tokenizer_name beside a model folder that holds its own tokenizer (tokenizer.json) gives each token the id
    the model learned it by: tokens added at the end are fine, another vocabulary of the same size is not (its ids
    would mean other words, and the size check passes it)."""
    own_file = Path(model_location(model_args.model_name_or_path)) / "tokenizer.json"
    if not own_file.is_file():
        return
    own = Tokenizer.from_file(str(own_file)).get_vocab(with_added_tokens=True)
    given = tokenizer.get_vocab()
    moved = [token for token, index in own.items() if given.get(token, index) != index]
    missing = [token for token in own if token not in given]
    if moved or missing:
        example = (f"{moved[0]!r} is {given[moved[0]]} there and {own[moved[0]]} in the model's" if moved
                   else f"{missing[0]!r} is missing from it")
        raise InputError(
            f"--tokenizer_name {model_args.tokenizer_name} is not the tokenizer the model "
            f"{model_args.model_name_or_path} learned: {len(moved) + len(missing)} of its {len(own)} tokens have "
            f"another id or none ({example}), so the ids would mean other words. Leave --tokenizer_name out to use "
            "the model's own."
        )


def this_packages_model(model, name: str, attn_implementation: str | None):
    """The model to train, as this package's: a MarianMTModel (an opus-mt model, the same network) converted with
    `from_marian`, which computes the same function; another kind refused, since the run's code, model card and
    scripts are the paper's model's (transformers' own translation example trains those)."""
    if model.config.model_type == VanillaTransformerConfig.model_type:
        return model
    if isinstance(model, MarianMTModel):
        converted = converted_marian(model, name)
        if attn_implementation:
            converted.set_attn_implementation(attn_implementation)
        return converted
    raise InputError(
        f"{name} is a {model.config.model_type!r} model ({type(model).__name__}), not the Transformer of this "
        "package, which this script trains: give a model saved by it (or a MarianMTModel, which it converts), or "
        "fine-tune this one with transformers' own examples (run_translation.py)."
    )


def setup_logging(training_args) -> None:
    """Logs to stdout at the Trainer's levels (--log_level, --log_level_replica) for transformers, datasets and this
    package, and the progress bars of the main process."""
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    level = training_args.get_process_log_level()
    # this module's logger and the package's others: their few info lines (the model's size, the vocabulary trained,
    # where the translations went) shown by the main process unless --log_level says otherwise
    ours = logging.INFO if training_args.log_level == "passive" and training_args.should_log else level
    if not training_args.should_log and training_args.log_level_replica == "warning":  # the default: every process
        ours = logging.ERROR  # checks the same data and model, and the main process says what it found, once
    logging.getLogger(__package__).setLevel(ours)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.enable_explicit_format()
    logging.getLogger("transformers.trainer_utils").addFilter(not_the_mtime_warning)
    if training_args.disable_tqdm:  # no bars at all, not only the Trainer's: none from tokenizing or saving either
        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()
    elif not training_args.should_log:  # the data's bars once, from the main process, as the Trainer's are
        datasets.disable_progress_bars()


def not_the_mtime_warning(record: logging.LogRecord) -> bool:
    """False for the Trainer's warning that file modification times "may not be reliable": it orders checkpoints by
    their times to delete the oldest, and where these lie within a second (checkpoints saved in quick succession, as
    on a GPU) orders them by step, which is what this script wants, and no fault of the file system."""
    return not record.getMessage().startswith("mtime may not be reliable")


def main(argv: list[str] | None = None) -> dict:
    """Train, evaluate on validation (BLEU, chrF with beam 4), translate the test split; returns all metrics."""
    if int(os.environ.get("RANK") or 0) > 0:  # another process of a launch: the flags' warnings are the first's to
        logging.getLogger(__package__).setLevel(logging.ERROR)  # give, once, as setup_logging has it for later ones
    model_args, data_args, training_args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if training_args.push_to_hub:  # a push that cannot happen fails now, not after the training
        check_push_flags(training_args)
    setup_logging(training_args)
    check_fsdp_launch(training_args)  # before any work (an FSDP launch that cannot run stops here)
    where = f"process {training_args.process_index} of {training_args.world_size}" if training_args.world_size > 1 \
        else "running"
    print(f"{where} on {training_args.device}", flush=True)
    set_seed(training_args.seed)
    resume_from = None
    if training_args.do_train:
        resume_from = resume_checkpoint(training_args)  # before the data work: a wrong folder fails at once
        if resume_from is None:
            clear_earlier_checkpoints(training_args)
            if training_args.overwrite_output_dir:
                clear_earlier_model(training_args)
    if resume_from is None:
        clear_earlier_results(training_args)

    # validation and test keep their blank pairs in place: their translations are written out line for line
    loaded = load_translation_datasets(data_args, keep_blank_evaluation_pairs=True)
    for flag, split in PHASES.items():
        if not getattr(training_args, flag) and split in loaded:
            del loaded[split]  # a phase that does not run needs no tokenizing
    split_sizes = {}  # split -> (pairs kept, pairs in the split) where --max_*_samples cut it
    for split, limit in (
        ("train", data_args.max_train_samples),
        ("validation", data_args.max_eval_samples),
        ("test", data_args.max_predict_samples),
    ):
        if limit is not None and split in loaded:
            split_sizes[split] = (min(limit, len(loaded[split])), len(loaded[split]))  # for the model card
            loaded[split] = loaded[split].select(range(min(limit, len(loaded[split]))))
    scored_rows = {split: rows_with_text(loaded[split], data_args.source_lang, data_args.target_lang)
                   for split in ("validation", "test") if split in loaded}
    for split, rows in scored_rows.items():
        if not rows:  # the split has pairs (load_translation_datasets checks), but not among the first ones
            flag = "--max_eval_samples" if split == "validation" else "--max_predict_samples"
            kept = split_sizes[split][0]
            raise InputError(f"{flag} {kept} keeps the first {kept} {split} pair{'s' * (kept != 1)}, and "
                             f"{'all are' if kept != 1 else 'it is'} blank: there is nothing to translate and score. "
                             f"Raise {flag}.")
    raw_datasets = datasets.DatasetDict(loaded)  # the pairs translated and scored
    for split, rows in scored_rows.items():
        if len(rows) < len(loaded[split]):
            raw_datasets[split] = loaded[split].select(rows)
    if scored_rows and training_args.should_log:  # once, for the first split scored
        split = next(iter(scored_rows))
        references = [pair[data_args.target_lang] for pair in raw_datasets[split][:1000]["translation"]]
        warn_if_written_without_spaces(references, data_args.bleu_tokenize,
                                       f"The {split} references (--target_lang {data_args.target_lang})")
    if "train" not in raw_datasets and training_args.do_train:
        raise InputError(
            f"{data_args.dataset_name or 'The data'} has no train split: give one, or pass --do_train false to "
            "evaluate --model_name_or_path without training."
        )

    tokenizer = load_or_train_tokenizer(model_args, data_args, training_args, raw_datasets, resume_from)
    model = load_or_build_model(model_args, data_args, tokenizer)
    if resume_from:
        check_resumable(resume_from, model, training_args, data_args)
    count = model.num_parameters()
    logger.info("Model: %s with %s parameters", type(model).__name__,
                f"{count / 1e6:.1f}M" if count >= 100_000 else f"{count:,}")

    with training_args.main_process_first(desc="tokenizing"):
        tokenized = tokenize_translation_datasets(
            raw_datasets,
            tokenizer,
            source_lang=data_args.source_lang,
            target_lang=data_args.target_lang,
            max_source_length=data_args.max_source_length,
            max_target_length=data_args.max_target_length,
            num_proc=data_args.preprocessing_num_workers,
        )

    check_token_ids_fit(tokenized, model.config.vocab_size)

    # The Trainer's own push would upload its generic model card; this script pushes once, at the end, with ours.
    push_to_hub, training_args.push_to_hub = training_args.push_to_hub, False
    # nor is --hub_token kept in the arguments the Trainer pickles into training_args.bin, the run's and every
    # checkpoint's, in plain text: it is given back for the push at the end
    hub_token, training_args.hub_token = training_args.hub_token, None
    if "validation" not in tokenized and training_args.eval_strategy != IntervalStrategy.NO:
        if training_args.do_train:  # a run that does not train has nothing to say about it
            scored = "the test split is scored at the end" if "test" in tokenized else (
                "the model is not scored at all (no BLEU, no results in its card)")
            logger.warning(
                "No validation data: the run does not evaluate while it trains, and %s. Give --validation_prefix or "
                "--validation_file (or a dataset with a 'validation' split) to score the model as it trains.", scored)
        training_args.eval_strategy = IntervalStrategy.NO
    # each evaluation split scored against its own references: texts that tokenize alike (under a lowercasing
    # tokenizer, say) in validation and test must not lend each other theirs
    references = scored_references(raw_datasets, tokenized, data_args.target_lang, tokenizer.pad_token_id)
    groups = reference_groups(raw_datasets, data_args.target_lang)
    scoring = {split: make_compute_metrics(tokenizer, groups, references=references.get(split),
                                           bleu_tokenize=data_args.bleu_tokenize)
               for split in ("validation", "test")}
    trainer = TokenBatchingSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized.get("train"),
        eval_dataset=tokenized.get("validation"),
        processing_class=tokenizer,
        data_collator=training_collator(training_args, tokenizer, model),
        compute_metrics=scoring["validation"],
        run_settings=run_settings(data_args),
    )

    all_metrics = train(trainer, resume_from) if training_args.do_train else {}
    if training_args.do_train and trainer.is_world_process_zero():  # rendered again with the scores; a Ctrl-C
        try:  # while scoring keeps it
            save_run_card(trainer, model, model_args, data_args, raw_datasets, all_metrics, split_sizes=split_sizes)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(not_scored(training_args.output_dir)) from None

    # Validation and test are translated once each: the last one's translations are written out and shown.
    translations, samples_split = [], None
    signatures = sacrebleu_signatures(bleu_tokenize=data_args.bleu_tokenize)  # how every split is scored
    for split, prefix in (("validation", "eval"), ("test", "predict")):
        if split not in tokenized:
            continue
        trainer.compute_metrics = scoring[split]
        try:
            prediction = trainer.predict(tokenized[split], metric_key_prefix=prefix)
        except KeyboardInterrupt:  # Ctrl-C while scoring: the trained model is saved already
            close_progress_bar(trainer)
            if not training_args.do_train:
                raise
            raise KeyboardInterrupt(not_scored(training_args.output_dir)) from None
        metrics = {**prediction.metrics, f"{prefix}_samples": len(tokenized[split])}
        if blank := len(loaded[split]) - len(scored_rows[split]):  # pairs with a blank side: not translated, not scored
            metrics[f"{prefix}_blank_pairs"] = blank
        if prefix == "eval" and training_args.do_train:
            warn_if_averaging_scored_less(trainer.state.log_history, metrics, all_metrics.get("averaged_checkpoints"))
            trainer.log(metrics)  # the final point of the training curves
        trainer.log_metrics(prefix, metrics)
        # the results files say how their scores were computed, as the card does: a score is comparable only with
        # its signature, its decoding and its data beside it (a run that only scores writes no card)
        trainer.save_metrics(prefix, {
            **metrics, **{f"{prefix}_{name}_signature": signature for name, signature in signatures.items()},
            f"{prefix}_decoding": decoding_description(model.generation_config.to_diff_dict(), training_args),
            f"{prefix}_data": scored_data_description(data_args, split, len(tokenized[split]), split_sizes, blank),
        })
        all_metrics.update(metrics)
        translations, samples_split = decoded_texts(tokenizer, prediction.predictions), split
        if trainer.is_world_process_zero():
            warn_if_all_empty(translations, split)
            warn_if_cut_short(prediction.predictions, model.generation_config.eos_token_id, split, training_args,
                              model.generation_config.to_diff_dict())
    signatures = signatures if samples_split else None  # of the scores, where there are any
    output_dir = Path(training_args.output_dir)
    with interrupts_deferred() as interrupted:  # Ctrl-C waits for the run's files, each written in a moment
        if translations and trainer.is_world_process_zero():
            path = output_dir / "generated_predictions.txt"
            lines = [""] * len(loaded[samples_split])  # a blank pair's line stays empty: line i translates line i
            for row, translation in zip(scored_rows[samples_split], translations, strict=True):
                lines[row] = translation
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            logger.info("Wrote %d %s translations to %s", len(translations), samples_split, path)
        if training_args.do_train and trainer.is_world_process_zero():
            trainer.save_state()  # trainer_state.json's log history ends with the final evaluation
            # the card and curves; a model evaluated without training keeps the card it came with
            save_run_card(trainer, model, model_args, data_args, raw_datasets, all_metrics, signatures,
                          split_sizes=split_sizes)
            logger.info("Wrote the training curves, translation pipeline and model card to %s", output_dir)
    if interrupted:
        raise KeyboardInterrupt(f"the run's results are saved in {output_dir}"
                                + (", not pushed to the Hub" if push_to_hub else "") + ".")
    if trainer.is_world_process_zero():
        print_samples(raw_datasets.get(samples_split), translations, data_args)
        print_exact_match(all_metrics)
        if signatures:
            print("sacreBLEU signatures: BLEU {bleu}, chrF {chrf}".format(**signatures))
        if training_args.do_train:
            print("\n" + where_the_run_is(output_dir, samples_split))
        if push_to_hub:
            try:
                training_args.hub_token = hub_token
                commit = push_from_training_args(training_args)
            except Exception as error:
                repo_id = push_repo_id(training_args)
                # the Hub's refusal, or ours (a repository of another model type)
                message = str(error) if isinstance(error, InputError) else hub_error_message(error, repo_id)
                if message is None:
                    raise
                raise InputError(
                    f"The run is saved in {output_dir}, but pushing it failed. {message} Push it once that is fixed: "
                    f"python {sibling_script('push_to_hub.py')} {output_dir} {repo_id}"
                ) from error
            print(f"Pushed {output_dir} to the Hub: {commit.commit_url}")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # every process done first (rank 0 writes the card and pushes last): a process that tore its group down and
        # exited while another still ran was once aborted in gloo's teardown, and the other waited for it until killed
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()  # as torch asks of a distributed program before it exits
    return all_metrics


def scored_data_description(data_args, split: str, pairs: int, split_sizes: dict, blank: int = 0) -> str:
    """What a results file says a split's scores were computed on: the data in the card's words (local files by
    their names), the split, and how many of its pairs ("the first 20 of 1,014"), and how many pairs with a blank
    side were left out (sacrebleu on the files would score them: as empty translations, or of empty references)."""
    config = f" ({data_args.dataset_config_name})" if data_args.dataset_config_name else ""
    source = data_source_description(data_args, split) or f"`{data_args.dataset_name}`{config}"
    left_out = f", and {blank} with a blank side left out" if blank else ""
    return f"{source}, {split} split: {pairs_description(pairs, split_sizes.get(split))} pairs{left_out}"


def not_scored(output_dir: str) -> str:
    """What Ctrl-C after the training says: the model is saved, and how to score it."""
    return (f"the run's model is saved in {output_dir}, not scored: score it with this run's data flags and "
            f"--model_name_or_path {output_dir} --do_train false --output_dir {Path(output_dir) / 'scored'}.")


def warn_if_all_empty(translations: list[str], split: str) -> None:
    """A model that ends every translation at once (early in training) scores BLEU 0 and chrF 0: say why."""
    if translations and not any(translations):
        logger.warning("Every %s translation is empty: the model ends each one at once, as a model does early in "
                       "training. Train for longer (more --max_steps or --num_train_epochs).", split)


def warn_if_cut_short(generated, eos_token_id: int | list[int], split: str, training_args, generation: dict) -> None:
    """Warn where translations (`generated`: the ids Seq2SeqTrainer's evaluation returns) stopped at the length
    limit before their end token: cut short, they score lower, and a limit set too low (max_new_tokens 3) cut every
    one without a word. Under the model's own limit, source length + 50 tokens, a few are a model repeating itself;
    any under a limit given (`--generation_max_length`, a generation config's `max_new_tokens` or `max_length`)."""
    rows = np.asarray(generated)
    if rows.ndim != 2 or not len(rows):
        return
    unended = int((~np.isin(rows, eos_token_id).any(axis=1)).sum())
    # the limit generate() applied: max_new_tokens wins over a max_length, which the flag passes over the config's
    given = [f"the generation config's max_new_tokens {generation['max_new_tokens']}"
             if generation.get("max_new_tokens") else None,
             f"--generation_max_length {training_args.generation_max_length}"
             if training_args.generation_max_length else None,
             f"the generation config's max_length {generation['max_length']}" if generation.get("max_length") else None]
    limit = next(filter(None, given), None)
    if not unended or (limit is None and unended < 0.01 * len(rows)):
        return
    advice = ("Raise it (--generation_max_length) where translations need more tokens; a model that repeats itself up "
              "to it needs more training." if limit else
              "The model has not learnt to end them, as early in training: train for longer.")
    logger.warning("%d of the %d %s translations stopped at the length limit (%s) before their end token: cut short, "
                   "they score lower. %s", unended, len(rows), split, limit or "source length + 50 tokens", advice)


def warn_if_averaging_scored_less(log_history: list[dict], final: dict, averaged: int | None) -> None:
    """Warn where the run's model, the average of its last checkpoints, scores lower validation BLEU than the last
    evaluation during training did: a short run's checkpoints still far apart, which averaging pulls back (the card
    and the console gave only the lower score, and the plot a point below the curve)."""
    last = next((entry for entry in reversed(log_history) if "eval_bleu" in entry), None)
    if not averaged or last is None or "eval_bleu" not in final or final["eval_bleu"] >= last["eval_bleu"] - 0.5:
        return
    logger.warning(
        "The run's model, the average of its last %d checkpoints, scores BLEU %.2f on validation, below the %.2f of "
        "the model at step %d: its checkpoints are still far apart (averaging is for a run's end, where they differ "
        "little: the paper averaged the last 5 of 100,000 steps). Train longer, save checkpoints closer together "
        "(--save_steps), or keep the last weights with --average_last_checkpoints 0.",
        averaged, final["eval_bleu"], last["eval_bleu"], last.get("step", 0),
    )


def where_the_run_is(output_dir: Path, translated_split: str | None) -> str:
    """The run's last line: what is in its folder, and how to translate with the model."""
    results = output_dir / "all_results.json"  # a run that only trains writes its training figures there
    scored = results.is_file() and any(key.endswith("_bleu") for key in json.loads(results.read_text()))
    kept = ["scores"] * scored + [what for name, what in (
        ("training_curves.png", "training curves"), ("generated_predictions.txt", f"{translated_split} translations"),
    ) if (output_dir / name).is_file()]
    with_these = f", with its {', '.join(kept[:-1]) + ' and ' if len(kept) > 1 else ''}{kept[-1]}" if kept else ""
    return (f"The run's model, tokenizer and model card are in {output_dir}{with_these}. Translate a file with "
            f"python {sibling_script('translate.py')} {output_dir} input.txt -o output.txt, or load the model with "
            f"AutoModelForSeq2SeqLM.from_pretrained({str(output_dir)!r}) after import hf_vanilla_transformer.")


def save_run_card(trainer, model, model_args, data_args, raw_datasets, metrics: dict,
                  signatures: dict | None = None, split_sizes: dict | None = None) -> None:
    """The run's training curves, translation pipeline and model card (with `metrics`, the scores' sacreBLEU
    `signatures`) in its output folder."""
    training_args = trainer.args
    output_dir = Path(training_args.output_dir)
    averaged, best = metrics.get("averaged_checkpoints"), metrics.get("best_model_step")
    final_label = (f"the run's model (average of the last {averaged} checkpoints)" if averaged else
                   f"the run's model (the best checkpoint, step {best})" if best else "the run's model")
    plot_training_curves(trainer.state.log_history, output_dir / "training_curves.png", final_label=final_label,
                         num_beams=training_args.generation_num_beams or model.generation_config.num_beams,
                         label_smoothing=training_args.label_smoothing_factor, final_step=best)
    save_translation_pipeline(output_dir)
    save_model_card(
        output_dir,
        source_lang=data_args.source_lang,
        target_lang=data_args.target_lang,
        metrics=metrics,
        dataset_name=data_args.dataset_name,
        dataset_description=data_source_description(data_args),
        evaluation_descriptions={split: data_source_description(data_args, split)
                                 for split in ("validation", "test")},
        dataset_config=data_args.dataset_config_name,
        training_args=training_args,
        repo_id=training_args.hub_model_id,
        metric_signatures=signatures,
        example=card_example(raw_datasets, data_args.source_lang),
        tokenizer_from=model_args.tokenizer_name or model_args.model_name_or_path,
        base_model=model_args.model_name_or_path,
        split_sizes=split_sizes,
    )


def train(trainer, resume_from: str | None) -> dict:
    """Train (from `resume_from`, a checkpoint, if given), average the last checkpoints if asked, save the run's
    model and state; returns the training metrics."""
    resumed_at = checkpoint_step(resume_from) if resume_from else None  # now: the checkpoint limit may delete it
    try:
        train_result = trainer.train(resume_from_checkpoint=resume_from)
    except KeyboardInterrupt:  # Ctrl-C: say what is kept and how to go on
        close_progress_bar(trainer)
        last = last_complete_checkpoint(trainer.args.output_dir)
        if last is None and (unfinished := run_checkpoints(trainer.args.output_dir)):
            message = (f"no checkpoint was saved whole yet ({unfinished[-1].name} was being written), so nothing can "
                       "be resumed: run the same command with --overwrite_output_dir true to start again.")
        elif last is None:
            message = "no checkpoint was saved yet (--save_strategy, --save_steps say when one is), so nothing is kept."
        elif holds_weights_only(last):
            message = (f"the last complete checkpoint is {last}, weights only (--save_only_model), which cannot be "
                       f"resumed: fine-tune from it with --model_name_or_path {last}.")
        elif holds_whole_fsdp_weights(last):
            message = (f"the last complete checkpoint is {last}, whole FSDP weights (FULL_STATE_DICT), which cannot "
                       f"be resumed: {whole_fsdp_weights_advice(last)}.")
        else:
            message = (f"the last complete checkpoint is {last}; continue the run with the same command plus "
                       "--resume_from_checkpoint true.")
        raise KeyboardInterrupt(message) from None
    except RuntimeError as error:  # torch.OutOfMemoryError on a GPU; the CPU allocator's own message
        if not isinstance(error, torch.OutOfMemoryError) and "can't allocate memory" not in str(error):
            raise
        close_progress_bar(trainer)
        raise InputError(out_of_memory_message(trainer.args, trainer.state.global_step)) from error
    check_replicas_agree(trainer)
    metrics = {**train_result.metrics, "train_samples": len(trainer.train_dataset)}
    if resumed_at is not None:  # the Trainer's train_runtime and train_loss cover the steps after it: the card says so
        metrics["resumed_from_step"] = resumed_at
    try:
        if trainer.args.average_last_checkpoints:
            metrics["averaged_checkpoints"] = average_last_checkpoints(trainer, resume_from)
        elif trainer.args.load_best_model_at_end and trainer.state.best_model_checkpoint is not None:
            metrics["best_model_step"] = checkpoint_step(trainer.state.best_model_checkpoint)  # the model kept
        if trainer.is_fsdp_enabled:  # checkpoints may hold shards; the run's model is saved whole, for from_pretrained
            trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
        trainer.save_model()
        if trainer.is_world_process_zero():  # a MarianMTModel fine-tuned leaves them -rw-------
            readable_weights(trainer.args.output_dir)
        trainer.log_metrics("train", metrics)
        trainer.save_metrics("train", metrics)
        trainer.save_state()
    except KeyboardInterrupt:  # Ctrl-C while averaging or saving the model: the checkpoints hold the training
        raise KeyboardInterrupt(
            "the training is complete and its checkpoints are saved, but the run's model is not: run the same "
            "command with --resume_from_checkpoint true, which says how to finish it."
        ) from None
    return metrics


def out_of_memory_message(args, step: int) -> str:
    """What to say of a training step that ran out of memory: the batch's size flag, and how to keep the tokens of a
    step with less memory."""
    size = (f"--max_tokens_per_batch {args.max_tokens_per_batch}" if args.max_tokens_per_batch else
            f"--per_device_train_batch_size {args.per_device_train_batch_size}")
    return (f"Out of memory in training step {step + 1}, with {size}: lower it, and raise --gradient_accumulation_steps "
            "as much to keep the tokens of an optimizer step (the paper's ~25,000 a step need not fit at once).")


def training_collator(training_args, tokenizer, model) -> DataCollatorForSeq2Seq:
    """The batches' collator: padding to the bucketed shapes `TokenBatchSampler` counts under --bucket_shapes (the
    default on CUDA), else to the batch's longest sequence; labels padded with -100, which the loss skips."""
    collator_class = BucketPaddingCollator if training_args.bucket_shapes else DataCollatorForSeq2Seq
    return collator_class(tokenizer, model=model, label_pad_token_id=-100)


def average_last_checkpoints(trainer, resumed_from: str | None = None) -> int:
    """Give the trained model the mean weights of the run's last `--average_last_checkpoints` complete checkpoints
    (section 6.1); returns how many were averaged. Fewer are averaged, with a warning, if fewer were saved. A run
    resumed from another folder's checkpoint averages that folder's checkpoints up to it too, as the run would have
    had them."""
    args = trainer.args
    trainer.accelerator.wait_for_everyone()  # every checkpoint is on disk
    # not those past the run's end, of a run resumed from an earlier step before
    checkpoints = [c for c in complete_checkpoints(args.output_dir) if checkpoint_step(c) <= trainer.state.global_step]
    if resumed_from and (earlier := Path(resumed_from).resolve().parent) != Path(args.output_dir).resolve():
        step = checkpoint_step(resumed_from)
        checkpoints = [c for c in complete_checkpoints(earlier) if checkpoint_step(c) <= step] + checkpoints
    checkpoints = checkpoints[-args.average_last_checkpoints :]
    if len(checkpoints) < 2:  # one is the run's last weights (the Trainer saves at the end): nothing to average
        if trainer.is_world_process_zero():  # once, not per process
            logger.warning("Averaging the last %d checkpoints (--average_last_checkpoints, section 6.1), but the run "
                           "saved %s complete checkpoint: the model is the run's last weights, not an average.",
                           args.average_last_checkpoints, "only 1" if checkpoints else "no")
        args.average_last_checkpoints = None  # what the model card reports: no averaging
        return 0
    if len(checkpoints) < args.average_last_checkpoints and trainer.is_world_process_zero():
        logger.warning("Averaging the last %d checkpoints (--average_last_checkpoints, section 6.1), but the run saved "
                       "only %d complete ones: averaging those.", args.average_last_checkpoints, len(checkpoints))
    load_averaged_weights(trainer.model, checkpoints)
    args.average_last_checkpoints = len(checkpoints)  # what the model card reports
    logger.info("The model is the average of %s", ", ".join(c.name for c in checkpoints))
    return len(checkpoints)


def card_example(raw_datasets, source_lang: str) -> str | None:
    """A source sentence of the run's own data for the model card's code: among the first ten of validation (else
    test, else training), the first of at most 30 words, else the shortest."""
    for split in ("validation", "test", "train"):
        dataset = raw_datasets.get(split)
        if dataset is None:
            continue
        pairs = dataset.select(range(min(10, len(dataset))))["translation"]
        sources = [pair[source_lang].strip() for pair in pairs if pair[source_lang].strip()]
        if sources:
            return next((text for text in sources if len(text.split()) <= 30), min(sources, key=len))
    return None


def scored_references(raw_datasets, tokenized, target_lang: str, pad_token_id: int) -> dict[str, dict]:
    """Split -> its references as the data holds them, keyed by their labels (`reference_texts`), for validation
    and test: BLEU and chrF score against the text, not the labels decoded."""
    return {
        split: reference_texts(tokenized[split]["labels"],
                               [pair[target_lang] for pair in raw_datasets[split]["translation"]], pad_token_id)
        for split in ("validation", "test") if split in tokenized
    }


def reference_groups(raw_datasets, target_lang: str) -> dict[str, str] | None:
    """Reference translation -> group from the evaluation splits' `magnitude` column (the built-in corpus has one),
    for exact-match accuracy per magnitude; None without such a column."""
    groups = {}
    for split in ("validation", "test"):
        dataset = raw_datasets.get(split)
        if dataset is not None and "magnitude" in dataset.column_names:
            groups.update(zip((pair[target_lang] for pair in dataset["translation"]), dataset["magnitude"]))
    return groups or None


def print_exact_match(metrics: dict) -> None:
    """One line per split with exact-match accuracy overall and per group, when the metrics have it."""
    for prefix in ("eval", "predict"):
        scores = {key.removeprefix(f"{prefix}_exact_match").lstrip("_") or "all": value
                  for key, value in metrics.items() if key.startswith(f"{prefix}_exact_match")}
        if scores:
            split = "validation" if prefix == "eval" else "test"
            print(f"Exact match, {split} (%): " + ", ".join(f"{name} {value:.1f}" for name, value in scores.items()))


def clear_earlier_checkpoints(training_args) -> None:
    """A new run (not resumed) must not find checkpoints of an earlier one in its --output_dir: the Trainer would
    leave those with higher steps in place, and they would be averaged, and resumed, as this run's. They are deleted
    with --overwrite_output_dir; otherwise the run stops before any work and says what to do, as it does for the
    model of a run saved without checkpoints, which this run would replace."""
    folder = Path(training_args.output_dir)
    earlier, saved = _as_the_main_process_sees(
        training_args, lambda: (run_checkpoints(folder), (folder / "model.safetensors").is_file()))
    if not earlier and saved and not training_args.overwrite_output_dir:  # a run saved without checkpoints
        raise InputError(
            f"--output_dir {training_args.output_dir} holds the model of an earlier run (model.safetensors). Train "
            "into a new --output_dir, or pass --overwrite_output_dir true to replace it."
        )
    if earlier and not training_args.overwrite_output_dir:
        names = ", ".join(c.name for c in earlier[:3]) + (f", ... {earlier[-1].name}" if len(earlier) > 3 else "")
        if not any(map(is_complete_checkpoint, earlier)):  # a run stopped while writing its first checkpoint
            raise InputError(
                f"--output_dir {training_args.output_dir} holds only incomplete checkpoints ({names}) of an earlier "
                "run stopped while saving, which cannot be resumed: pass --overwrite_output_dir true to delete them "
                "and start again, or train into a new --output_dir."
            )
        if any((folder / name).is_file() for name in (CARD_INPUTS_FILE, "trainer_state.json")):  # saved at its end
            raise InputError(  # said to continue it, which then found its training complete
                f"--output_dir {training_args.output_dir} holds a finished run (its model, and checkpoints {names}). "
                "Train into a new --output_dir, or pass --overwrite_output_dir true to replace it."
            )
        raise InputError(
            f"--output_dir {training_args.output_dir} holds checkpoints of an earlier run ({names}). Continue that "
            "run with --resume_from_checkpoint true, train into a new --output_dir, or pass --overwrite_output_dir "
            "to delete them first."
        )
    _delete_earlier(training_args, earlier, "checkpoints")


EARLIER_MODEL_PATTERNS = (
    "model*.safetensors", "model.safetensors.index.json", "pytorch_model*.bin", "config.json", "generation_config.json",
    *TOKENIZER_FILES, *MARIAN_TOKENIZER_FILES, "special_tokens_map.json", CARD_INPUTS_FILE, "training_curves.png",
    "trainer_state.json", "training_args.bin",
)
"""What a finished run saved beside its checkpoints: a new run replaces it only when it saves its own, so one
stopped before that (Ctrl-C, a crash) left the earlier model beside its own new tokenizer, which translated
gibberish."""


def clear_earlier_model(training_args) -> None:
    """With --overwrite_output_dir, a new training run deletes the model, tokenizer and card an earlier run saved
    in --output_dir, before anything is written there; the card only if the earlier run's card inputs say it is one
    of this package's. (What the run starts from never lies there: `check_output_dir_is_no_input`.)"""
    folder = Path(training_args.output_dir)

    def listing():
        found = sorted({path for pattern in EARLIER_MODEL_PATTERNS for path in folder.glob(pattern) if path.is_file()})
        card = folder / "README.md"
        return found + [card] if (folder / CARD_INPUTS_FILE).is_file() and card.is_file() else found

    _delete_earlier(training_args, _as_the_main_process_sees(training_args, listing), "model")


RESULT_FILES = ("all_results.json", "train_results.json", "eval_results.json", "predict_results.json",
                "generated_predictions.txt")
"""What a run writes of its scores and translations: the Trainer's `save_metrics` adds to an `all_results.json`
it finds, so a second run into the folder would report the first one's scores beside its own."""


def clear_earlier_results(training_args) -> None:
    """A new run (not resumed) must not find an earlier run's results in its --output_dir: with
    --overwrite_output_dir they are deleted, otherwise the run stops before any work."""
    folder = Path(training_args.output_dir)
    earlier = _as_the_main_process_sees(
        training_args, lambda: [folder / name for name in RESULT_FILES if (folder / name).is_file()])
    if earlier and not training_args.overwrite_output_dir:
        raise InputError(
            f"--output_dir {training_args.output_dir} holds the results of an earlier run "
            f"({', '.join(path.name for path in earlier)}), which this run's would be mixed with (all_results.json "
            "adds them up). Give a new --output_dir, or pass --overwrite_output_dir true to replace them."
        )
    _delete_earlier(training_args, earlier, "results")


def _as_the_main_process_sees(training_args, listing):
    """`listing()` as the main process finds it, on every process: each then makes the same choice (to stop, to
    delete, to wait at the same barriers), also where --output_dir is not on a disk every machine shares."""
    if training_args.world_size == 1:
        return listing()
    return broadcast_object_list([listing() if training_args.process_index == 0 else None], from_process=0)[0]


def _delete_earlier(training_args, paths: list[Path], what: str) -> None:
    """Delete an earlier run's `paths` (files or checkpoint folders) in the main process, with a warning naming
    them; every process waits for it (the same `paths` on each: `_as_the_main_process_sees`)."""
    if not paths:
        return
    with training_args.main_process_first(desc=f"deleting an earlier run's {what}"):
        if training_args.process_index == 0:
            shown = shown_list((path.name for path in paths), 8)
            logger.warning("--overwrite_output_dir: deleting the earlier run's %s in %s: %s", what,
                           training_args.output_dir, shown)
            for path in paths:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()


def print_samples(dataset, translations: list[str], data_args: DataArguments) -> None:
    """The first --num_samples_to_print pairs of `dataset` with their translations: source, reference, hypothesis."""
    if dataset is None or not translations or data_args.num_samples_to_print <= 0:
        return
    print(f"\nSample translations ({data_args.source_lang} -> {data_args.target_lang}):")
    for pair, hypothesis in list(zip(dataset["translation"], translations))[: data_args.num_samples_to_print]:
        print(f"  source:     {pair[data_args.source_lang]}")
        print(f"  reference:  {pair[data_args.target_lang]}")
        print(f"  hypothesis: {hypothesis}\n")
