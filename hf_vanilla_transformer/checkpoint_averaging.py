"""Average the weights of a run's last N checkpoints into one model, as the paper did (5 for base, 20 for big; 6.1)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig

from .errors import InputError
from .trainer import run_checkpoints  # noqa: F401  (re-exported for scripts/average_checkpoints.py)


def _load_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    files = sorted(checkpoint.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{checkpoint} has no *.safetensors weights.")
    weights = {}
    for file in files:
        weights.update(load_file(file))
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


@torch.no_grad()
def load_averaged_weights(model, checkpoints: list[str | Path]):
    """Give `model` the mean of the weights in `checkpoints` (in its own dtypes, tied weights kept tied)."""
    dtypes = {name: tensor.dtype for name, tensor in model.state_dict().items()}
    averaged = {name: tensor.to(dtypes[name]) for name, tensor in averaged_weights(checkpoints).items()}
    missing, unexpected = model.load_state_dict(averaged, strict=False)
    untied = set(missing) - set(model.all_tied_weights_keys)
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
    model = load_averaged_weights(AutoModelForSeq2SeqLM.from_pretrained(last), checkpoints)
    model.save_pretrained(output_dir)
    GenerationConfig.from_pretrained(last).save_pretrained(output_dir)
    tokenizer_dir = last if (last / "tokenizer_config.json").exists() else last.parent
    if (tokenizer_dir / "tokenizer_config.json").exists():
        AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(output_dir)
    return model
