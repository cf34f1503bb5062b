"""A PNG of the training and validation loss and the validation BLEU over steps, from the Trainer's log history."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def curves(log_history: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """(step, value) series: `loss` (training), `eval_loss`, `eval_bleu` during training, and `final_bleu`, the
    evaluation logged after training ended (of the run's model: the average of the last checkpoints, if averaged)."""
    end = next((i for i, entry in enumerate(log_history) if "train_runtime" in entry), len(log_history))
    series = {"loss": [], "eval_loss": [], "eval_bleu": [], "final_bleu": []}
    for i, entry in enumerate(log_history):
        after = i > end
        if "loss" in entry:
            series["loss"].append((entry["step"], entry["loss"]))
        if "eval_loss" in entry and not after:  # the final model's loss is no point of the training curve
            series["eval_loss"].append((entry["step"], entry["eval_loss"]))
        if "eval_bleu" in entry:
            series["final_bleu" if after else "eval_bleu"].append((entry["step"], entry["eval_bleu"]))
    return series


def plot_training_curves(log_history: list[dict], path: str | Path, final_label: str = "the run's model") -> Path | None:
    """Training and validation loss (left axis) and validation BLEU (right axis) against the optimizer step, the
    final model's BLEU marked apart (`final_label` names it); None if nothing was logged."""
    series = curves(log_history)
    if not any(series.values()):
        return None
    figure, loss_axis = plt.subplots(figsize=(7, 4), dpi=120)
    lines, top_axis = [], loss_axis
    if series["loss"]:
        lines += loss_axis.plot(*zip(*series["loss"]), color="tab:blue", label="training loss")
    if series["eval_loss"]:
        lines += loss_axis.plot(*zip(*series["eval_loss"]), color="tab:blue", linestyle="--", marker=".",
                                label="validation loss")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("loss (label-smoothed)", color="tab:blue")
    bleus = series["eval_bleu"] + series["final_bleu"]
    if bleus:
        bleu_axis = top_axis = loss_axis.twinx()
        if series["eval_bleu"]:
            lines += bleu_axis.plot(*zip(*series["eval_bleu"]), color="tab:orange", marker="o",
                                    label="validation BLEU")
        if series["final_bleu"]:
            lines += bleu_axis.plot(*zip(*series["final_bleu"]), color="tab:red", marker="*", markersize=12,
                                    linestyle="none", label=f"validation BLEU, {final_label}")
        bleu_axis.set_ylabel("validation BLEU (beam 4)", color="tab:orange")
        bleu_axis.set_ylim(0, min(100, max(value for _, value in bleus) * 1.15 + 1))
    loss_axis.set_title("Training and validation loss, validation BLEU")
    loss_axis.grid(alpha=0.3)
    top_axis.legend(lines, [line.get_label() for line in lines], loc="center right", fontsize="small")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path)
    plt.close(figure)
    return path
