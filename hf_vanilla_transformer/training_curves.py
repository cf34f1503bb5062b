"""A PNG of the training loss and the eval BLEU over steps, from the Trainer's log history."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_training_curves(log_history: list[dict], path: str | Path) -> Path | None:
    """Training loss (left axis) and eval BLEU (right axis) against the optimizer step; None if nothing was logged."""
    losses = [(entry["step"], entry["loss"]) for entry in log_history if "loss" in entry]
    bleus = [(entry["step"], entry["eval_bleu"]) for entry in log_history if "eval_bleu" in entry]
    if not losses and not bleus:
        return None
    figure, loss_axis = plt.subplots(figsize=(7, 4), dpi=120)
    if losses:
        loss_axis.plot(*zip(*losses), color="tab:blue", label="training loss")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("training loss (label-smoothed)", color="tab:blue")
    if bleus:
        bleu_axis = loss_axis.twinx()
        bleu_axis.plot(*zip(*bleus), color="tab:orange", marker="o", label="eval BLEU")
        bleu_axis.set_ylabel("eval BLEU (beam 4)", color="tab:orange")
        bleu_axis.set_ylim(0, 100)
    loss_axis.set_title("Training loss and validation BLEU")
    loss_axis.grid(alpha=0.3)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path)
    plt.close(figure)
    return path
