"""Average the weights of a run's last N checkpoints into one model, as the paper did (5 for base, 20 for big; 6.1)."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig

from .distributed import holds_fsdp_shards
from .errors import InputError, MissingFileError, first_line
from .file_permissions import readable_weights
from .trainer import no_progress_bars

UNUSABLE = ("a run stopped while saving can leave such a checkpoint; move it out of the run's folder to average the "
            "others")


def _check_not_sharded(checkpoint: Path) -> None:
    """A checkpoint of FSDP's sharded state dict holds shards (pytorch_model_fsdp_0/, ...), not a model's weights to
    average; one of its whole state dict (FULL_STATE_DICT: pytorch_model_fsdp.bin) holds model.safetensors too."""
    if holds_fsdp_shards(checkpoint):
        raise InputError(
            f"{checkpoint} is a sharded FSDP checkpoint (pytorch_model_fsdp_*): averaging needs whole weights. For "
            "checkpoints to average, train under FSDP with whole ones: accelerate launch --fsdp_state_dict_type "
            "FULL_STATE_DICT ..., or \"state_dict_type\": \"FULL_STATE_DICT\" in the --fsdp_config of the Trainer's "
            "--fsdp (they are averaged, not resumed)."
        )


def _load_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    _check_not_sharded(checkpoint)
    files = sorted(checkpoint.glob("*.safetensors"))
    if not files:
        raise MissingFileError(f"{checkpoint} has no *.safetensors weights: {UNUSABLE}.")
    weights = {}
    for file in files:
        try:
            weights.update(load_file(file))
        except SafetensorError as error:
            raise InputError(f"The weights in {file} are truncated or corrupt ({error}): {UNUSABLE}.") from error
    return weights


@torch.no_grad()
def averaged_weights(checkpoints: list[str | Path]) -> dict[str, torch.Tensor]:
    """Every weight's mean over `checkpoints`, in float64 (the callers cast it back to the model's dtypes)."""
    if not checkpoints:
        raise ValueError("No checkpoints to average.")
    checkpoints = [Path(c) for c in checkpoints]
    total = None
    for checkpoint in checkpoints:
        weights = _load_weights(checkpoint)
        if total is None:
            total = {name: tensor.double() for name, tensor in weights.items()}
        elif weights.keys() != total.keys() or any(weights[name].shape != total[name].shape for name in total):
            raise InputError(
                f"{checkpoint} holds other weights than {checkpoints[0]} (other names or sizes): they are not "
                "checkpoints of one model. Average the checkpoints of one run."
            )
        else:
            for name, tensor in weights.items():
                total[name] += tensor.double()
    return {name: tensor / len(checkpoints) for name, tensor in total.items()}


def load_averaged_weights(model, checkpoints: list[str | Path]):
    """Give `model` the mean of the weights in `checkpoints` (in its own dtypes, tied weights kept tied)."""
    return _load_weights_into(model, averaged_weights(checkpoints))


@torch.no_grad()
def _load_weights_into(model, weights: dict[str, torch.Tensor]):
    dtypes = {name: tensor.dtype for name, tensor in model.state_dict().items()}
    averaged = {name: tensor.to(dtypes[name]) for name, tensor in weights.items()}
    missing, unexpected = model.load_state_dict(averaged, strict=False)
    # tied weights, and those a model computes rather than saves (a MarianMTModel's table of sinusoids)
    computed = getattr(model, "_keys_to_ignore_on_load_missing", None) or []
    untied = {name for name in set(missing) - set(model.all_tied_weights_keys)
              if not any(re.search(pattern, name) for pattern in computed)}
    if untied or unexpected:
        raise ValueError(f"Averaged weights do not fit the model: missing {sorted(untied)}, unexpected {unexpected}.")
    model.tie_weights()
    return model


def average_checkpoints(checkpoints: list[str | Path], output_dir: str | Path):
    """Save, to `output_dir`, the model whose every weight is the mean over `checkpoints` (with the last one's config,
    generation config and tokenizer); returns the averaged model."""
    if not checkpoints:
        raise ValueError("No checkpoints to average.")
    last = Path(checkpoints[-1])
    _check_not_sharded(last)
    if not (last / "config.json").is_file():
        raise MissingFileError(f"{last} has no config.json: {UNUSABLE}.")
    weights = averaged_weights(checkpoints)  # first: it names a checkpoint whose weights are missing or damaged
    try:
        with no_progress_bars():  # transformers' "Loading weights" bar, of weights replaced at once
            model = AutoModelForSeq2SeqLM.from_pretrained(last)
    except (OSError, ValueError) as error:  # a damaged config.json, or another kind of model's
        raise InputError(f"{last} holds no loadable model ({error}): {UNUSABLE}.") from error
    model = _load_weights_into(model, weights)
    with no_progress_bars():
        model.save_pretrained(output_dir)
    readable_weights(output_dir)  # a MarianMTModel's are left -rw-------
    try:
        GenerationConfig.from_pretrained(last).save_pretrained(output_dir)
    except (OSError, ValueError) as error:  # a damaged generation_config.json
        raise InputError(f"{last} holds no loadable generation config ({first_line(error)}): {UNUSABLE}.") from error
    tokenizer_dir = last if (last / "tokenizer_config.json").exists() else last.parent
    if (tokenizer_dir / "tokenizer_config.json").exists():
        try:
            tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        except (OSError, ValueError, TypeError) as error:  # a damaged tokenizer.json (a JSONDecodeError: a ValueError)
            advice = f": {UNUSABLE}" if tokenizer_dir == last else ""
            raise InputError(f"{tokenizer_dir} holds no loadable tokenizer ({first_line(error)}){advice}.") from error
        tokenizer.save_pretrained(output_dir)
    return model
