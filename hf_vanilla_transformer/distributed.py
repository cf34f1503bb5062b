"""Training over several processes: FSDP2 where accelerate leaves it out, an error where FSDP cannot run, what FSDP2
needs of this model (one module for the tied embedding, saving under the model's own class), and a check that
data-parallel replicas end with the same weights. `TokenBatchingSeq2SeqTrainer` calls these.

accelerate turns an FSDP request (`accelerate launch --use_fsdp`, or the Trainer's `--fsdp`) into FSDP only on
accelerators; on CPU processes over gloo it drops it and runs DDP, although torch's FSDP2 (`fully_shard`) works
there. `enable_requested_fsdp` makes the request hold: FSDP2 through accelerate's own plugin on CPU processes, and
an `InputError` where it cannot run (one process, FSDP1 without GPUs, a backend without FSDP's collectives). The
training script checks the first two before any work (`check_fsdp_launch`), and leaves FSDP off in a run that only
scores. `check_launch_resumes` refuses a checkpoint the launch cannot resume (FSDP's in a launch without it, and the
other way round).
"""

from __future__ import annotations

import os
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import torch
from accelerate import PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin, parse_flag_from_env
from accelerate.utils.constants import FSDP_MODEL_NAME
from transformers.utils import logging

from .errors import InputError, sibling_script

logger = logging.get_logger(__name__)


def fsdp_requested(args) -> bool:
    """FSDP asked for by the Trainer's `--fsdp` or by `accelerate launch --use_fsdp` (or an accelerate config)."""
    return args.fsdp_plugin_args is not None or parse_flag_from_env("ACCELERATE_USE_FSDP")


def fsdp_version(args) -> int:
    """The FSDP version asked for (accelerate launch's --fsdp_version defaults to 1, the Trainer's to 2)."""
    if args.fsdp_plugin_args is not None:
        return int(args.fsdp_plugin_args["fsdp_version"])
    return int(os.environ.get("FSDP_VERSION", "1"))


def check_fsdp_version(args) -> None:
    """Before the Accelerator: FSDP1 needs GPUs (accelerate's FSDP1 plugin fails without one)."""
    if fsdp_requested(args) and args.device.type == "cpu" and fsdp_version(args) != 2:
        raise InputError(
            "FSDP1 needs GPUs; on CPU processes use FSDP2: `accelerate launch --use_fsdp --fsdp_version 2 ...`, or "
            "`--fsdp` with `\"version\": 2` in --fsdp_config."
        )


ONE_PROCESS = (
    "FSDP shards the model over several processes, but this is one process: start it with `accelerate launch "
    "--use_fsdp --fsdp_version 2 --num_processes N ...` (or torchrun --nproc_per_node N)."
)


def check_fsdp_launch(args) -> None:
    """Before any work (the training script calls it once its flags are parsed): an FSDP request that cannot run
    stops here, before the data is loaded and a tokenizer trained, rather than when the Trainer is made (FSDP1
    without GPUs, one process); and a run that does not train leaves FSDP off, since FSDP2 prepares a model only
    with its optimizer: each process scores its share of the sentences with the whole model, as under DDP."""
    if not fsdp_requested(args):
        return
    if not args.do_train:
        if args.process_index == 0:
            logger.warning(
                "FSDP was asked for, but this run does not train (--do_train false): FSDP shards a model for "
                "training, so each process scores its share of the sentences with the whole model, as under DDP."
            )
        args.fsdp, args.fsdp_plugin_args = False, None
        os.environ["ACCELERATE_USE_FSDP"] = "false"  # the launcher's request, which the Accelerator reads
        return
    check_fsdp_version(args)  # which sets the processes up (args.device)
    if args.distributed_state.distributed_type == DistributedType.NO:
        raise InputError(ONE_PROCESS)


def enable_requested_fsdp(accelerator, args) -> bool:
    """After the Accelerator: make an FSDP request hold, or stop. Returns whether FSDP is on.

    On accelerators accelerate has already set FSDP up. On CPU processes (DistributedType.MULTI_CPU) it has quietly
    chosen DDP; this switches its state to FSDP with the same plugin accelerate builds from the launcher's settings
    (or the Trainer's `fsdp_config`), so that accelerate's FSDP2 preparation, checkpointing and state dicts apply.
    """
    state = accelerator.state
    if not fsdp_requested(args) or state.distributed_type == DistributedType.FSDP:
        return state.distributed_type == DistributedType.FSDP
    if state.distributed_type == DistributedType.NO:
        raise InputError(ONE_PROCESS)
    if state.distributed_type != DistributedType.MULTI_CPU:
        raise InputError(f"FSDP was asked for, but accelerate runs {state.distributed_type.value} here, not FSDP.")
    check_fsdp_collectives()
    plugin = FullyShardedDataParallelPlugin(**(args.fsdp_plugin_args or {}))
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    state.fsdp_plugin = plugin
    state.distributed_type = PartialState._shared_state["distributed_type"] = DistributedType.FSDP  # as accelerate does
    return True


def check_fsdp_collectives() -> None:
    """FSDP2 gathers parameters and scatters gradients with two collectives that not every backend has."""
    world = torch.distributed.get_world_size()
    try:
        torch.distributed.all_gather_single(torch.zeros(world), torch.zeros(1))
        torch.distributed.reduce_scatter_single(torch.zeros(1), torch.zeros(world))
    except (RuntimeError, NotImplementedError) as error:
        raise InputError(
            f"FSDP cannot run on the {torch.distributed.get_backend()!r} backend: it lacks all_gather_single or "
            f"reduce_scatter_single ({error}). Use --ddp_backend gloo, or data parallelism without --use_fsdp/--fsdp."
        ) from error


def share_one_embedding_module(model) -> None:
    """Make the encoder, the decoder and `shared` one embedding module rather than three that hold the same weight
    (as the model is built and loaded). FSDP2 shards a weight within one group of
    modules, and accelerate groups the input embedding with the output projection only: the encoder's and decoder's
    modules would put the weight in a second group. transformers' encoder-decoders' set_input_embeddings (Marian's,
    BART's, ours) sets the one module everywhere.

    One module under three names has a cost: torch 2.13 loads a whole (FULL_STATE_DICT) FSDP checkpoint by the
    module's first name only and fails on the others, so such checkpoints are not resumed (`check_launch_resumes`);
    sharded ones are."""
    model.set_input_embeddings(model.get_input_embeddings())


def holds_whole_fsdp_weights(checkpoint) -> bool:
    """Whether `checkpoint` was saved under FSDP with whole weights (FULL_STATE_DICT: pytorch_model_fsdp.bin, beside
    the model.safetensors that averaging reads), not in shards (pytorch_model_fsdp_0/, ...)."""
    return (Path(checkpoint) / f"{FSDP_MODEL_NAME}.bin").is_file()


def holds_fsdp_shards(checkpoint) -> bool:
    """Whether `checkpoint` holds FSDP's sharded weights: SHARDED_STATE_DICT's pytorch_model_fsdp_0/ folders, or
    FSDP1's LOCAL_STATE_DICT, a pytorch_model_fsdp_rank<N>.bin file a process."""
    return any(path.is_dir() or path.name.startswith(f"{FSDP_MODEL_NAME}_rank")
               for path in Path(checkpoint).glob(f"{FSDP_MODEL_NAME}_*"))


def whole_fsdp_weights_advice(checkpoint) -> str:
    """What to do with a checkpoint of whole FSDP weights, which nothing resumes (see `check_launch_resumes`)."""
    run = Path(checkpoint).parent
    return (f"average the run's checkpoints (python {sibling_script('average_checkpoints.py')} {run} --output_dir "
            f"{run / 'averaged'}), or fine-tune from it into a new --output_dir (--model_name_or_path {checkpoint})")


def check_launch_resumes(checkpoint, fsdp: bool = True) -> None:
    """Refuse, before any work, a checkpoint that this launch (under FSDP or not, `fsdp`) cannot resume, where
    torch or the Trainer would fail with a traceback: whole FSDP weights (FULL_STATE_DICT) in any launch (under
    FSDP, see `share_one_embedding_module`; without it, the Trainer looks for a plain optimizer.pt), FSDP's shards
    without FSDP, and the whole weights of a DDP or one-process run under FSDP (which loads its own shards only)."""
    if not checkpoint:
        return
    if holds_whole_fsdp_weights(checkpoint):
        raise InputError(
            f"{checkpoint} holds whole FSDP weights (FULL_STATE_DICT), which cannot be resumed (FSDP cannot load "
            "them into this model, whose shared embedding is one module under three names): "
            f"{whole_fsdp_weights_advice(checkpoint)}. FSDP resumes the checkpoints it saves in shards, its default "
            "here: for a run to resume, leave FULL_STATE_DICT out (accelerate launch's --fsdp_state_dict_type, the "
            "state_dict_type of --fsdp_config)."
        )
    sharded = holds_fsdp_shards(checkpoint)
    if sharded and not fsdp:
        raise InputError(
            f"{checkpoint} was saved under FSDP (its weights are sharded in pytorch_model_fsdp_*): resume it under "
            "the same FSDP launch (e.g. accelerate launch --config_file configs/accelerate/fsdp.yaml ...)."
        )
    if not sharded and fsdp:
        raise InputError(
            f"{checkpoint} was saved without FSDP (by DDP or one process: its weights are whole, with no "
            "pytorch_model_fsdp_* shards), and FSDP resumes only its own sharded checkpoints: resume it as it was "
            "launched, without FSDP (e.g. accelerate launch --multi_gpu ...), or fine-tune from it under FSDP into a "
            f"new --output_dir (--model_name_or_path {checkpoint})."
        )


def sharding_summary(model) -> str:
    """What this process holds of an FSDP2-sharded model, and which modules are the units of sharding."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor

    parameters = list(model.parameters())
    held = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in parameters)
    total = sum(p.numel() for p in parameters)
    units = Counter(type(m).__name__.removeprefix("FSDP") for m in model.modules() if isinstance(m, FSDPModule))
    output, input_ = model.get_output_embeddings(), model.get_input_embeddings()
    tied = output is not None and output.weight is input_.weight
    return (
        f"FSDP2: process {torch.distributed.get_rank()} of {torch.distributed.get_world_size()} holds {held:,} of "
        f"the model's {total:,} parameter values; modules sharded as units: "
        + ", ".join(f"{count} {name}" for name, count in sorted(units.items()))
        + f"; embedding and output projection {'tied' if tied else 'untied'}"
    )


@contextmanager
def own_class(model):
    """Present an FSDP2-sharded model as its own class for a while: `fully_shard` turns its class into a subclass
    that torch makes, FSDP<Model>, which transformers' save_pretrained would name in config.json's auto_map and whose
    torch files it would copy as the model's code."""
    from torch.distributed.fsdp import FSDPModule

    sharded = type(model)
    if isinstance(model, FSDPModule):
        model.__class__ = next(base for base in sharded.__bases__ if not issubclass(base, FSDPModule))
    try:
        yield model
    finally:
        model.__class__ = sharded


@torch.no_grad()
def check_replicas_agree(trainer) -> None:
    """Under DDP every process must end with rank 0's weights, since rank 0 alone saves them: compare per-parameter
    sums (float64) across processes and raise on any difference."""
    if trainer.args.world_size < 2 or trainer.is_fsdp_enabled:
        return
    names, parameters = zip(*trainer.model.named_parameters())
    sums = torch.stack([p.detach().double().sum() for p in parameters]).to(trainer.args.device)
    unequal = trainer.accelerator.gather(sums[None]) != sums  # (processes, parameters)
    if unequal.any():
        ranks = unequal.any(dim=1).nonzero().flatten().tolist()
        params = [name for name, differs in zip(names, unequal.any(dim=0).tolist()) if differs]
        raise RuntimeError(
            f"Processes {ranks} ended with other weights than process {trainer.args.process_index} in {params[:5]}."
        )
    logger.info("All %d processes hold identical weights (sum %.10g).", trainer.args.world_size, sums.sum().item())
