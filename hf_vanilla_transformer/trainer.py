"""`Seq2SeqTrainer` that batches training examples by token count (`TokenBatchSampler`), under DDP and FSDP too."""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path

import datasets
import torch
from accelerate import PartialState
from accelerate.utils import DynamoBackend
from torch.utils.data import DataLoader, SequentialSampler
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.trainer_pt_utils import LengthGroupedSampler
from transformers.trainer_utils import rotate_checkpoints, seed_worker

from transformers.utils import logging

from .batching import BucketPaddingCollator, SeededLengthGroupedSampler, TokenBatchSampler
from .checkpoints import (
    CHECKPOINT_COMPLETE,
    RESUMED_ARGUMENTS,
    checkpoint_step,
    complete_checkpoints,
    folder_step,
    order_checkpoint_times_by_step,
)
from .chunked_loss import cross_entropy_sum
from .distributed import (
    check_fsdp_version,
    check_launch_resumes,
    enable_requested_fsdp,
    own_class,
    share_one_embedding_module,
    sharding_summary,
)
from .errors import InputError
from .file_permissions import readable_weights
from .model_card import warms_up
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

logger = logging.get_logger(__name__)


@dataclass
class TokenBatchingSeq2SeqTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` plus `--max_tokens_per_batch` (per device; the paper used ~25k over 8 GPUs), which
    `TokenBatchingSeq2SeqTrainer` reads, and the training script's own flags (`SCRIPT_FLAGS`), which the script acts
    on: a trainer made by hand ignores them, with a warning."""

    _argument_group_name = ("training flags: Seq2SeqTrainingArguments, then this package's (--max_tokens_per_batch, "
                            "--bucket_shapes, --average_last_checkpoints, ...) at the end")

    max_tokens_per_batch: int | None = field(
        default=None,
        metadata={
            "help": "Batch training examples by padded token count (source and target each at most this many per "
            "device and step) instead of per_device_train_batch_size. The paper's ~25000 is for the whole step: "
            "divide by world size x gradient_accumulation_steps."
        },
    )

    bucket_shapes: bool = field(
        default=False,
        metadata={
            "help": "Pad each training batch to one of a handful of shapes (lengths bucketed: multiples of 8 up to "
            "128 tokens, coarser beyond), so that --torch_compile and CUDA graphs capture each shape once. The "
            "training script's default on a GPU."
        },
    )

    average_last_checkpoints: int | None = field(
        default=None,
        metadata={
            "help": "After training, average the weights of the last N saved checkpoints (the paper: 5 for the base "
            "model, 20 for big; section 6.1), evaluate that model and save it as the run's model. Needs checkpoints "
            "(--save_strategy steps or epoch); --save_total_limit is raised to N unless given. 0: no averaging."
        },
    )

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Delete what an earlier run left in --output_dir before training anew: its checkpoint-* folders, "
            "model, tokenizer, card and results (a run that only scores deletes the results), as transformers 4's "
            "flag of this name allowed. Without it such a folder is refused unless resuming: its checkpoints would "
            "be averaged and resumed as if they were this run's, and its results added to this run's. The built-in "
            "run's default."
        },
    )

    hub_private_repo: bool | None = field(
        default=None,
        metadata={
            "help": "With --push_to_hub: make the repository private, whether the push creates it or it exists and "
            "is public (then made private before the upload, with a warning). Unset: a new repository gets the "
            "Hub's default, an existing one keeps its visibility."
        },
    )

    ddp_find_unused_parameters: bool | None = field(
        default=False,
        metadata={
            "help": "DDP's find_unused_parameters. False here (the Trainer's default is True): every parameter of "
            "this model takes part in every step, so DDP need not search the autograd graph for unused ones each "
            "step. Pass true for a model that leaves some unused."
        },
    )

    def _process_fsdp_args(self) -> dict | None:
        """The Trainer's `--fsdp` settings, with checkpoints in shards unless `fsdp_config` says otherwise (the
        Trainer's default is whole ones, gathered on rank 0, which FSDP cannot resume for this model; see
        `distributed.share_one_embedding_module`). accelerate's FSDP2 saves in shards by default too."""
        plugin_args = super()._process_fsdp_args()
        if plugin_args is not None and "state_dict_type" not in self.fsdp_config:
            plugin_args["state_dict_type"] = "SHARDED_STATE_DICT"
        return plugin_args

    @cached_property
    def _setup_devices(self) -> torch.device:
        """The Trainer's device setup, with --ddp_timeout for CPU processes too (transformers passes it only on
        accelerators): how long a process waits for a lost or hung peer before the job ends."""
        configured = getattr(self.accelerator_config, "use_configured_state", False)
        if self.use_cpu and not configured and not torch.distributed.is_initialized():
            PartialState._reset_state()  # as the Trainer's setup does: no state of earlier arguments is reused
            PartialState(cpu=True, backend=self.ddp_backend, timeout=self.ddp_timeout_delta)
        return super()._setup_devices


SCRIPT_FLAGS = ("bucket_shapes", "average_last_checkpoints", "overwrite_output_dir")
"""The flags of `TokenBatchingSeq2SeqTrainingArguments` that the training script (`training.main`) acts on: it builds
the bucketing collator, averages the checkpoints and clears the output folder."""


class TokenBatchingSeq2SeqTrainer(Seq2SeqTrainer):
    """Seq2SeqTrainer whose training batches hold at most `max_tokens_per_batch` padded tokens per side.

    `max_tokens_per_batch` comes from the constructor, else from `args.max_tokens_per_batch`; when it is None this
    is a plain Seq2SeqTrainer. `per_device_train_batch_size` is then ignored for training. The training dataset must
    be a tokenized `datasets.Dataset` with `input_ids` and `labels`. FSDP, asked for by the launcher or `--fsdp`,
    runs or stops with an error, never falls back to DDP (see `distributed.py`). `run_settings` (JSON values: the
    data's languages and source, say) are recorded in each checkpoint, with the arguments a resumed run must keep
    (`RESUMED_ARGUMENTS`), for it to check against.
    """

    def __init__(self, *args, max_tokens_per_batch: int | None = None, run_settings: dict | None = None,
                 **kwargs) -> None:
        training_args = kwargs["args"] if "args" in kwargs else args[1] if len(args) > 1 else None
        # known before the Trainer builds its Accelerator, which compiles for dynamic lengths with token batching
        self.max_tokens_per_batch = max_tokens_per_batch or getattr(training_args, "max_tokens_per_batch", None)
        ignored = [name for name in SCRIPT_FLAGS if getattr(training_args, name, None)]  # 0 averages nothing
        if isinstance(kwargs.get("data_collator"), BucketPaddingCollator):  # the bucketing built by hand too
            ignored = [name for name in ignored if name != "bucket_shapes"]
        if ignored and run_settings is None:  # the training script always passes its run's settings
            logger.warning(
                "%s: %s of the training script (scripts/train_translation.py), which a trainer made by hand ignores: "
                "the script builds the bucketing collator, averages checkpoints after training and clears the output "
                "folder.", ", ".join(f"--{name}" for name in ignored), "a flag" if len(ignored) == 1 else "flags"
            )
        self._model_is_ours: tuple[torch.nn.Module, bool] | None = None  # (model, whether it is ours), see compute_loss
        super().__init__(*args, **kwargs)
        self.add_callback(MarkCheckpointComplete(run_settings))
        self.add_callback(StopOnNonFiniteLoss(self))
        self.add_callback(WarnAboutEndlessWarmup())
        self._token_batch_sampler: TokenBatchSampler | None = None
        self._sentences_trained = 0
        self._target_tokens: torch.Tensor | int = 0  # trained on since the last training log (see `log`)
        self._interval_start: float | None = None
        self._seconds_outside_training = 0.0  # since then: evaluating and saving checkpoints
        self._evaluation_token_loss: torch.Tensor | None = None  # during evaluation: summed token losses, tokens
        self._length_grouped_sampler: SeededLengthGroupedSampler | None = None
        self.resumed_step: int | None = None  # the step of the checkpoint train() resumes from
        self.add_callback(_EpochToSamplerCallback(self))
        if self.is_fsdp_enabled:
            share_one_embedding_module(self.model)
            self.add_callback(_LogSharding())

    def _build_accelerator_args(self, **kwargs) -> dict:
        """The Trainer's Accelerator arguments; with token batching and a compiled model (`--torch_compile`, or
        accelerate launch's dynamo backend), compiled for any batch shape from the first step (`dynamic=True`): the
        shape changes at almost every step, and torch.compile would otherwise compile the first shape alone, then
        everything again for dynamic shapes at the second. `accelerate launch` exports
        ACCELERATE_DYNAMO_USE_DYNAMIC=False unless told otherwise, which would compile every shape anew until
        torch's recompile limit (8), then run the rest uncompiled: it is overridden too. (Neuron compiles static
        shapes only.)"""
        accelerator_args = super()._build_accelerator_args(**kwargs)
        dynamo = accelerator_args.get("dynamo_plugin")
        compiled = dynamo is not None and dynamo.backend not in (DynamoBackend.NO, DynamoBackend.NEURON)
        if self.max_tokens_per_batch and compiled and not dynamo.dynamic:
            dynamo.dynamic = True
        if compiled and dynamo.use_regional_compilation and dynamo.mode == "reduce-overhead":
            logger.warning(
                "Regional compilation with --torch_compile_mode reduce-overhead records a CUDA graph for each layer, "
                "and torch runs them off its fast path while earlier layers' backward is pending (its warning "
                "'Unable to hit fast path of CUDAGraphs'): on an H100 the base model's Multi30k steps ran at 31 a "
                "second this way, against 65 with one graph for the whole model. For CUDA graphs leave regional "
                "compilation out (ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION, --dynamo_use_regional_compilation)."
            )
        return accelerator_args

    def create_accelerator_and_postprocess(self) -> None:
        """The Trainer's Accelerator, with FSDP wherever it was asked for (see `distributed.enable_requested_fsdp`)."""
        check_fsdp_version(self.args)
        super().create_accelerator_and_postprocess()
        self.is_fsdp_enabled = enable_requested_fsdp(self.accelerator, self.args)
        if self.is_fsdp_enabled and self.args.average_last_checkpoints:
            raise InputError(
                "--average_last_checkpoints does not work under FSDP. Save whole checkpoints (state_dict_type "
                "FULL_STATE_DICT: --fsdp_state_dict_type for accelerate launch, in --fsdp_config for --fsdp) and "
                "average them after the run: scripts/average_checkpoints.py RUN_DIR --last N --output_dir OUT."
            )

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs):
        if self.is_fsdp_enabled and isinstance(resume_from_checkpoint, str):
            check_launch_resumes(resume_from_checkpoint)
        self.resumed_step = checkpoint_step(resume_from_checkpoint) if isinstance(resume_from_checkpoint, str) else None
        self._parameters_for_flops = None  # counted again for each run, once
        self._sentences_trained = 0  # this call's: the Trainer's speed metrics count only this call's steps
        self._target_tokens, self._interval_start = 0, None
        if resume_from_checkpoint and self.args.should_save:
            order_checkpoint_times_by_step(self.args.output_dir)
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def get_batch_samples(self, epoch_iterator, num_batches: int, device: torch.device):
        """The Trainer's batches for one optimizer step. Their target tokens are counted for the training logs'
        `target_tokens_per_second`, where they are (on the device: no sync); with token batching their sentences
        are counted for `train_samples_per_second` (each batch's first dimension: a size the host knows)."""
        if self._interval_start is None:  # the first step after a log: evaluations and saves since are left out
            self._interval_start, self._seconds_outside_training = time.perf_counter(), 0.0
        batch_samples, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        for batch in batch_samples:
            if isinstance(batch.get("labels"), torch.Tensor):
                self._target_tokens = self._target_tokens + batch["labels"].ne(-100).sum()
        if self.max_tokens_per_batch:
            self._sentences_trained += sum(len(batch["input_ids"]) for batch in batch_samples)
        return batch_samples, num_items_in_batch

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """The Trainer's log. A training log (with `loss`) gets `target_tokens_per_second`: the target tokens (not
        padding) all processes trained on since the previous one, per second of training (fairseq's "wps"; the
        Trainer's own token count, `--include_num_input_tokens_seen`, reads the device at every step, and counts
        source tokens). With token batching, the end of training's `train_samples_per_second` is the sentences
        trained on (all processes') per second: the Trainer counts `per_device_train_batch_size` sentences a batch,
        a size token batching does not use."""
        if "loss" in logs and self._interval_start is not None:  # read from the device once a log
            counted = torch.as_tensor(self._target_tokens, device=self.args.device)
            tokens = self.accelerator.reduce(counted, reduction="sum").item()
            seconds = max(time.perf_counter() - self._interval_start - self._seconds_outside_training, 1e-9)
            logs["target_tokens_per_second"] = round(tokens / seconds, 1)
            self._target_tokens, self._interval_start = 0, None
        if self.max_tokens_per_batch and "train_samples_per_second" in logs and logs.get("train_runtime"):
            counted = torch.tensor(self._sentences_trained, device=self.args.device)
            sentences = self.accelerator.reduce(counted, reduction="sum").item()  # once, at the end of training
            logs["train_samples_per_second"] = round(sentences / logs["train_runtime"], 3)
        super().log(logs, start_time)

    def evaluate(self, *args, **kwargs):
        with self._outside_training_time():
            return super().evaluate(*args, **kwargs)

    def _save_checkpoint(self, model, trial) -> None:
        """The Trainer's checkpoint, without its deleting the checkpoints past --save_total_limit: that waits for the
        new one to be marked complete (`MarkCheckpointComplete` deletes them then). A run killed in between kept
        neither the old checkpoints nor a new one to resume from."""
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            with self._outside_training_time():
                super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit

    def set_initial_training_values(self, args, dataloader):
        """The Trainer's count of the run's steps; a run by epochs resumed at or past them (its data now gives fewer
        steps than the checkpoint's run had) stops with an InputError, where the Trainer would train nothing and
        report a training loss of 0."""
        values = super().set_initial_training_values(args, dataloader)
        max_steps, step = values[-1], self.resumed_step
        if args.max_steps <= 0 and step is not None and step >= max_steps:
            raise InputError(
                f"The checkpoint resumed from is at step {step}, and --num_train_epochs {args.num_train_epochs:g} of "
                f"the training data given now makes {max_steps} steps: there is nothing left to train. The data is not "
                "the run's (see the warning above): resume with the run's data and limits (--max_train_samples), or "
                "fine-tune from the checkpoint into a new --output_dir (--model_name_or_path)."
            )
        return values

    @contextlib.contextmanager
    def _outside_training_time(self):
        """An evaluation or a checkpoint during training: its time is left out of `target_tokens_per_second`. The
        device first finishes the training steps queued, whose time is training (no step waits on it otherwise)."""
        if self.args.device.type != "cpu":
            torch.accelerator.synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds_outside_training += time.perf_counter() - start

    def floating_point_ops(self, inputs: dict) -> int:
        """The Trainer's estimate for `total_flos` (6 x source tokens x parameters outside the embeddings), with the
        parameters counted once per run: the Trainer counts them at every step, a walk over every module that costs
        about a millisecond for the base model, on the host, while the accelerator waits for the next step."""
        main_input = getattr(self.model, "main_input_name", "input_ids")
        if main_input not in inputs or not hasattr(self.model, "num_parameters"):
            return 0
        if getattr(self, "_parameters_for_flops", None) is None:
            self._parameters_for_flops = self.model.num_parameters(exclude_embeddings=True)
        return 6 * inputs[main_input].numel() * self._parameters_for_flops

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """The Trainer's save; under FSDP2 with the model under its own class (see `own_class`) and each tied weight
        once: the gathered state dict holds a copy under every name of a tied weight, where save_pretrained looks for
        names that share memory. Without transformers' "Writing model shards" bar, which drew a finished bar of one
        shard into the training's output at every checkpoint."""
        if self.is_fsdp_enabled and state_dict is not None:
            tied = self.model.all_tied_weights_keys
            state_dict = {name: weight for name, weight in state_dict.items() if name not in tied}
        with own_class(self.model), no_progress_bars():
            super()._save(output_dir, state_dict)

    def _issue_warnings_after_load(self, load_result) -> None:
        """The Trainer's warnings after loading a checkpoint, without the tied names (the embedding's other names and
        the output projection): the checkpoint stores the shared weight once, and they load with it."""
        tied = self.model.all_tied_weights_keys
        missing = [name for name in load_result.missing_keys if name not in tied]
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    def get_train_dataloader(self) -> DataLoader:
        """A DataLoader over token-count batches, prepared by accelerate without re-sharding the batches."""
        if not self.max_tokens_per_batch:
            return super().get_train_dataloader()
        if not isinstance(self.train_dataset, datasets.Dataset):
            raise TypeError("max_tokens_per_batch needs train_dataset to be a tokenized datasets.Dataset.")
        sampler = TokenBatchSampler.from_dataset(
            self.train_dataset,
            self.max_tokens_per_batch,
            seed=self.args.data_seed if self.args.data_seed is not None else self.args.seed,
            bucket_shapes=isinstance(self.data_collator, BucketPaddingCollator),
            num_replicas=max(1, self.args.world_size),
            rank=self.args.process_index,
        )
        self._token_batch_sampler = sampler
        if len(sampler) <= self.args.gradient_accumulation_steps and self.args.max_steps != 1 \
                and self.is_world_process_zero():
            logger.warning(
                "--max_tokens_per_batch %d holds all %d training pairs in one step: every step is an epoch (with the "
                "evaluation and checkpoint of one, where those are per epoch), and needs the memory of the whole "
                "set. Give fewer tokens a batch.", self.max_tokens_per_batch, len(self.train_dataset),
            )
        loader = DataLoader(
            self._remove_unused_columns(self.train_dataset, description="Training"),
            batch_sampler=sampler,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
            persistent_workers=self.args.dataloader_persistent_workers,
            prefetch_factor=self.args.dataloader_prefetch_factor,
            multiprocessing_context=self.args.dataloader_multiprocessing_context,
            in_order=self.args.dataloader_in_order,
            worker_init_fn=partial(
                seed_worker, num_workers=self.args.dataloader_num_workers, rank=self.args.process_index
            ),
            generator=self._workers_seed_generator(),
        )
        return keep_rank_aware_batches(self.accelerator.prepare(loader), sampler)

    def _get_train_sampler(self, train_dataset=None):
        """The Trainer's sampler; under --train_sampling_strategy group_by_length a `SeededLengthGroupedSampler`,
        whose order the run's seed and the epoch give, so that a resumed run trains on the batches of the run it
        continues."""
        sampler = super()._get_train_sampler(train_dataset)
        if type(sampler) is LengthGroupedSampler:
            seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
            sampler = SeededLengthGroupedSampler(sampler.batch_size, sampler.lengths, seed)
            self._length_grouped_sampler = sampler
        return sampler

    def _workers_seed_generator(self) -> torch.Generator:
        """A training DataLoader's own generator for the seed each pass draws for its workers. Drawn from torch's,
        it took a number from the training's dropout at every epoch, but at the first alone where the workers are
        persistent, so a run resumed at an epoch's start did not end as the run it continued."""
        return torch.Generator().manual_seed(self.args.data_seed if self.args.data_seed is not None else self.args.seed)

    def _get_dataloader(self, dataset, description, batch_size, sampler_fn=None, is_training=False,
                        dataloader_key=None) -> DataLoader:
        """The Trainer's, with --dataloader_drop_last for training batches alone: the Trainer drops an evaluation's
        last batch too, which scored part of the validation set, left translations out of generated_predictions.txt
        and, for a set smaller than one batch, gave compute_metrics nothing to score. With the bucketing collator,
        evaluation batches are padded as `DataCollatorForSeq2Seq` pads them, each side to its own longest: bucketed,
        a batch's sources were padded to its longest reference, and generate()'s length limit (the padded source
        length + 50) grew with the references, which changed the scores and translations. A training DataLoader
        gets a generator of its own (see `_workers_seed_generator`)."""
        drop_last, collator = self.args.dataloader_drop_last, self.data_collator
        self.args.dataloader_drop_last = drop_last and is_training
        if isinstance(collator, BucketPaddingCollator) and not is_training:
            self.data_collator = collator.each_side_to_its_longest()
        try:
            loader = super()._get_dataloader(dataset, description, batch_size, sampler_fn=sampler_fn,
                                             is_training=is_training, dataloader_key=dataloader_key)
        finally:
            self.args.dataloader_drop_last, self.data_collator = drop_last, collator
        base = getattr(loader, "base_dataloader", loader)  # the DataLoader that accelerate's wrapper iterates
        if is_training and base.generator is None:
            base.generator = self._workers_seed_generator()  # read by each pass (evaluation: see evaluation_loop)
        return loader

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix="eval"):
        """The Trainer's loop, gathering with accelerate's `gather_for_metrics` again, where Seq2SeqTrainer's
        evaluate() and predict() chose a plain gather: under several processes that kept the sentences accelerate
        repeats to give every process full batches, so metrics and translations counted them twice or more.

        The loss it reports is the mean over the evaluation's target tokens. The Trainer's is the mean of the
        batches' token means, weighted by sentences, so it changed with the batch size and the process count.

        The training's random numbers are as they were after it: each pass over a DataLoader draws its workers' seed
        from torch's generator, except on a persistent worker loader's later passes, so the dropout of the training
        that followed changed with the evaluations, with the worker settings, and in a resumed run (which draws at
        its first evaluation again)."""
        self.gather_function = self.accelerator.gather_for_metrics
        self._evaluation_token_loss = torch.zeros(2, device=self.args.device)  # summed token losses, tokens
        try:
            with self._training_random_numbers_kept():
                output = super().evaluation_loop(
                    dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix)
            total, tokens = self._evaluation_token_loss.tolist()
        finally:
            self._evaluation_token_loss = None
        if f"{metric_key_prefix}_loss" in output.metrics and tokens > 0 and math.isfinite(total):
            output.metrics[f"{metric_key_prefix}_loss"] = total / tokens
        return output

    def _training_random_numbers_kept(self) -> contextlib.AbstractContextManager:
        """torch's random number generators (CPU, and the accelerator's) restored on leaving."""
        device = self.args.device
        on_accelerator = device.type not in ("cpu", "meta")
        return torch.random.fork_rng(devices=[device] if on_accelerator else [],
                                     device_type=device.type if on_accelerator else "cuda")

    def _get_eval_sampler(self, eval_dataset):
        """The evaluation's sentences in the data's order: the Trainer grouped them by length under
        --train_sampling_strategy group_by_length, a training setting, and generated_predictions.txt came out in that
        order (line i no longer translated line i)."""
        if self.args.train_sampling_strategy != "group_by_length" or eval_dataset is None:
            return super()._get_eval_sampler(eval_dataset)
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        """Seq2SeqTrainer's step, leaving the model's generation config as it was.

        After each batch, transformers' Seq2SeqTrainer fills the generation config's unset fields with transformers'
        defaults (`max_length=20` among them). The model reads an unset length as the paper's limit, source length
        + 50 [6.1], so from the second batch on every translation would be cut at 20 tokens, in evaluation, in a
        later `generate()` and in every saved `generation_config.json`. The fields unset before the step are unset
        again after it.

        A batch without targets (DataCollatorForSeq2Seq sets `labels` to None for sources alone) is translated
        without a loss: Seq2SeqTrainer takes the key's presence for targets and runs the model on none.
        """
        if "labels" in inputs and inputs["labels"] is None:
            inputs = {name: value for name, value in inputs.items() if name != "labels"}
        config = self.model.generation_config
        unset = [name for name in config._get_default_generation_params() if getattr(config, name, None) is None]
        try:
            loss, outputs, labels = super().prediction_step(
                model, inputs, prediction_loss_only, ignore_keys=ignore_keys, **gen_kwargs)
        finally:
            for name in unset:
                setattr(config, name, None)
        targets = inputs.get("labels")
        if loss is not None and targets is not None and self._evaluation_token_loss is not None:
            # each sentence's summed loss and its tokens, gathered as the translations are: without the sentences
            # accelerate repeats to fill the last batch of an evaluation set that the processes do not divide
            tokens = (targets != -100).sum(dim=-1).float()
            state = self.accelerator.gradient_state
            if self.args.world_size > 1 and state.end_of_dataloader and state.remainder > 0:
                summed = self._sentence_losses(model, inputs)  # the batch's mean counts the repeated sentences too
            else:
                summed = loss.detach().float() * tokens  # the batch's token mean: its sum, shared by tokens
            shares = self.gather_function(torch.stack([summed, tokens], dim=-1))
            self._evaluation_token_loss += shares.sum(dim=0)
        return loss, outputs, labels

    def _sentence_losses(self, model, inputs) -> torch.Tensor:
        """Each sentence's summed token loss (with the label smoothing the evaluation's loss has), from one more
        forward pass of the batch: for the last batch of an evaluation under several processes."""
        targets = inputs["labels"]
        smoothing = self.label_smoother.epsilon if self.label_smoother is not None else 0.0
        with torch.no_grad(), self.compute_loss_context_manager():
            logits = model(**inputs).logits
        # the model's own chunked loss, a sentence at a time: no float32 copy of the batch's logits
        return torch.stack([cross_entropy_sum(row, target, smoothing) for row, target in zip(logits, targets)])

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """Trainer's loss, with `label_smoothing_factor` [5.4] handed to the model, which computes it a chunk of
        tokens at a time, instead of to the Trainer's `LabelSmoother`, which holds float32 copies of all the logits.

        The same loss and gradients. A training step asks for no logits (`skip_logits`): accelerate would convert
        them to float32. The rest (`num_items_in_batch`, gradient accumulation, averaging over devices) is the
        Trainer's own, run with the label smoother set aside. Other models keep the `LabelSmoother`.
        """
        if self._model_is_ours is None or self._model_is_ours[0] is not model:  # unwrapping costs ~0.5 ms a step
            unwrapped = self.accelerator.unwrap_model(model, keep_torch_compile=False)
            self._model_is_ours = (model, isinstance(unwrapped, VanillaTransformerForConditionalGeneration))
        ours = self._model_is_ours[1]
        if self.compute_loss_func is not None or "labels" not in inputs or not ours:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        smoother, self.label_smoother = self.label_smoother, None
        try:
            label_smoothing = 0.0 if smoother is None else smoother.epsilon
            inputs = {"skip_logits": not return_outputs, **inputs, "label_smoothing": label_smoothing}
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        finally:
            self.label_smoother = smoother


def keep_rank_aware_batches(prepared: DataLoader, sampler: TokenBatchSampler) -> DataLoader:
    """Undo accelerate's re-sharding of an already rank-aware batch sampler (as Trainer does for BatchRebalanceSampler).

    Under several processes `accelerator.prepare` wraps the batch sampler in a `BatchSamplerShard` that would hand
    each rank every world_size-th of *its own* batches; made a pass-through, each rank keeps its whole share.
    """
    shard = getattr(prepared, "batch_sampler", None)
    if shard is not sampler and getattr(shard, "batch_sampler", None) is sampler:
        shard.num_processes = 1
        shard.process_index = 0
    return prepared


class _LogSharding(TrainerCallback):
    """Say, once the model is sharded, what each process holds of it."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        logger.info(sharding_summary(model))


class _EpochToSamplerCallback(TrainerCallback):
    """Set the sampler's epoch at each epoch start, also when a resumed run wraps the loader to skip batches."""

    def __init__(self, trainer: TokenBatchingSeq2SeqTrainer) -> None:
        self.trainer = trainer

    def on_epoch_begin(self, args, state, control, **kwargs):
        """Epoch e starts at state.epoch == e (or e + fraction when resuming mid-epoch)."""
        for sampler in (self.trainer._token_batch_sampler, self.trainer._length_grouped_sampler):
            if sampler is not None:
                sampler.set_epoch(int(state.epoch or 0))


class WarnAboutEndlessWarmup(TrainerCallback):
    """Warn when the warmup lasts the whole run, which a run counted in epochs shows only once its data is batched:
    the learning rate would rise throughout and never reach the peak the model card reports (a run of 250 steps
    with the paper's 4000 warmup steps trains at 6% of it at most). A run of --max_steps is warned about sooner, by
    the training script."""

    def on_train_begin(self, args, state, control, **kwargs):
        warmup = args.get_warmup_steps(state.max_steps)
        if args.max_steps <= 0 and 0 < state.max_steps <= warmup and warms_up(args) and state.is_world_process_zero:
            logger.warning(
                "--warmup_steps %d is not below the run's %d steps (%g epoch%s): the learning rate rises for the whole "
                "run and never reaches its peak (%.3g). Give fewer --warmup_steps (e.g. %d, a tenth of the steps), or "
                "more --num_train_epochs.", warmup, state.max_steps, args.num_train_epochs,
                "" if args.num_train_epochs == 1 else "s", args.learning_rate, max(1, state.max_steps // 10),
            )


class TrainingDivergedError(InputError):
    """The training loss became NaN or infinite: the run's settings (learning rate, warmup, clipping) let it diverge.
    An InputError, so that the training script reports it in one line and exits with status 2."""


class StopOnNonFiniteLoss(TrainerCallback):
    """Stop training at the first logged training loss that is NaN or infinite, with a `TrainingDivergedError` out of
    `train()`: the Trainer would go on to save, evaluate and publish a model of NaNs.

    Only the logged loss is read, a number the Trainer has already brought to the host (no device sync per step).
    Steps that fp16 loss scaling skips log a finite loss (the unscaled one) and a non-finite `grad_norm`, which is
    not read. With `logging_nan_inf_filter` (the Trainer's default; the training script turns it off) the Trainer
    leaves non-finite steps out of the logged loss, so a divergence shows here only when that filter is off.
    """

    def __init__(self, trainer: TokenBatchingSeq2SeqTrainer) -> None:
        self.trainer = trainer
        self.finite_until = 0  # the last step of a logged finite loss: every step up to it had a finite loss

    def on_train_begin(self, args, state, control, **kwargs):
        self.finite_until = state.global_step

    def on_log(self, args, state, control, logs=None, lr_scheduler=None, **kwargs):
        loss = (logs or {}).get("loss", (logs or {}).get("train_loss"))  # train_loss: the end, after unlogged steps
        if loss is None:
            return
        if math.isfinite(loss):
            self.finite_until = state.global_step
            return
        learning_rate = logs.get("learning_rate")
        if learning_rate is None and lr_scheduler is not None:
            learning_rate = lr_scheduler.get_last_lr()[0]
        close_progress_bar(self.trainer)  # the message on a line of its own
        raise TrainingDivergedError(
            divergence_message(loss, self.finite_until + 1, state.global_step, learning_rate, args)
        )


def close_progress_bar(trainer) -> None:
    """Close the Trainer's progress bars (training's, as the end of training does, and an evaluation's), so that a
    message printed next is on a line of its own (tqdm would otherwise draw a bar again after it, as it closes the
    bar at exit)."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, ProgressCallback) and callback.prediction_bar is not None:
            callback.prediction_bar.close()
            callback.prediction_bar = None
        if isinstance(callback, ProgressCallback) and callback.training_bar is not None:
            callback.on_train_end(trainer.args, trainer.state, trainer.control)


def divergence_message(loss: float, first: int, last: int, learning_rate: float | None, args) -> str:
    """What `StopOnNonFiniteLoss` says: where the loss became `loss` (a step, or the logged steps it lies among),
    the learning rate then, what to try, and the last checkpoint whose weights still gave a finite loss."""
    steps = f"at step {last}" if first == last else f"between steps {first} and {last}"
    rate = f" (learning rate {learning_rate:.3g})" if learning_rate is not None else ""
    advice = ["a lower --learning_rate", "more --warmup_steps"]
    if not 0 < (args.max_grad_norm or 0) <= 1:
        advice.append("--max_grad_norm 1 (gradient clipping)")
    message = f"Training diverged: the training loss became {loss} {steps}{rate}. Try {', '.join(advice[:-1])} " \
              f"or {advice[-1]}."
    # checkpoint-<step> holds the weights after that step, which the next step's loss is computed from
    saved = complete_checkpoints(args.output_dir)
    before = [c for c in saved if folder_step(c) < first - 1]
    if before:
        message += f" The last checkpoint saved before it is {before[-1]}"
        message += "; later ones may hold diverged weights." if len(before) < len(saved) else "."
    else:
        message += " No checkpoint was saved before it."
    return message


class MarkCheckpointComplete(TrainerCallback):
    """Mark a checkpoint complete once the Trainer has written all of it (`on_save` runs after the last file), then
    delete the checkpoints past --save_total_limit, as the Trainer would have before.

    The Trainer writes a checkpoint's files one by one into `checkpoint-<step>`; a run killed in the middle leaves a
    folder that looks like a checkpoint but lacks, say, the optimizer state, and resuming from it would silently
    restart the optimizer. Only checkpoints with this marker are resumed from (`last_complete_checkpoint`). Under
    several processes each writes its own files (its random number generators' state, its shards of the weights),
    so the marker waits for all of them: a process lost before that leaves the checkpoint unmarked. It records the
    arguments that a run resumed from the checkpoint must keep, and the `run_settings` given (`checkpoint_record`).
    """

    def __init__(self, run_settings: dict | None = None):
        self.run_settings = run_settings or {}

    def on_save(self, args, state, control, **kwargs):
        PartialState().wait_for_everyone()
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            readable_weights(folder)
            staging = folder / f".{CHECKPOINT_COMPLETE}.tmp"
            arguments = args.to_dict()
            arguments["warmup_steps"] = args.get_warmup_steps(state.max_steps)  # in steps: a share (0.1) is of them
            record = {"global_step": state.global_step, "run": self.run_settings,
                      "arguments": {name: arguments[name] for name in RESUMED_ARGUMENTS if name in arguments}}
            staging.write_text(json.dumps(record, indent=2, default=str))
            os.replace(staging, folder / CHECKPOINT_COMPLETE)  # atomic: the marker is there whole or not at all
        if args.should_save:  # what the Trainer's save left to do (see `_save_checkpoint`): the new one is complete
            rotate_checkpoints(output_dir=args.output_dir, save_total_limit=args.save_total_limit,
                               best_model_checkpoint=state.best_model_checkpoint, use_mtime=True)


@contextlib.contextmanager
def no_progress_bars():
    """transformers' progress bars off for a while: its "Writing model shards" bar draws a finished bar of one shard
    at every save."""
    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            logging.enable_progress_bar()
