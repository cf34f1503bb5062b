"""A PNG of the training and validation loss and the validation BLEU over steps, from the Trainer's log history.

The PNG carries a caption that names the curves drawn (`curves_caption`, in the text chunk `CAPTION_KEY`): the model
card shows the picture with it, so that a run without evaluation during training is not said to show any.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.backends.backend_agg  # noqa: E402, F401  (now: a Ctrl-C while it loads was an ImportError)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

_FEW_POINTS = 10  # training losses drawn as points too below this many
_LEGEND_COLUMN_CHARS = 48  # the longest legend label that fits in half the figure's width
CAPTION_KEY = "Description"  # the PNG text chunk of the caption (a keyword the PNG specification defines)


def curves(log_history: list[dict], final_step: int | None = None) -> dict[str, list[tuple[int, float]]]:
    """(step, value) series: `loss` (training), `eval_loss`, `eval_bleu` during training, and `final_bleu`, the
    evaluation logged after training ended (of the run's model: the average of the last checkpoints, if averaged), at
    `final_step` where given (the step of the best checkpoint, kept as the model), else at the step it was logged at.
    A run that logged no training loss during training (fewer steps than --logging_steps, or --logging_strategy no)
    has `mean_loss` instead: the run's mean (`train_loss`), at its last step."""
    end = next((i for i, entry in enumerate(log_history) if "train_runtime" in entry), len(log_history))
    series = {"loss": [], "eval_loss": [], "eval_bleu": [], "final_bleu": [], "mean_loss": []}
    for i, entry in enumerate(log_history):
        after = i > end
        if "loss" in entry:
            series["loss"].append((entry["step"], entry["loss"]))
        if "eval_loss" in entry and not after:  # the final model's loss is no point of the training curve
            series["eval_loss"].append((entry["step"], entry["eval_loss"]))
        if "eval_bleu" in entry:
            step = final_step if after and final_step is not None else entry["step"]
            series["final_bleu" if after else "eval_bleu"].append((step, entry["eval_bleu"]))
    if not series["loss"] and end < len(log_history) and "train_loss" in log_history[end]:
        series["mean_loss"] = [(log_history[end]["step"], log_history[end]["train_loss"])]
    return series


def plot_training_curves(
    log_history: list[dict], path: str | Path, final_label: str = "the run's model", *, num_beams: int | None = None,
    label_smoothing: float | None = None, final_step: int | None = None,
) -> Path | None:
    """Save `draw_training_curves`' figure to `path` (a PNG), with `curves_caption` in its `CAPTION_KEY` text chunk;
    None, and no file, if nothing was logged."""
    figure = draw_training_curves(log_history, final_label, num_beams=num_beams, label_smoothing=label_smoothing,
                                  final_step=final_step)
    if figure is None:
        return None
    path = Path(path)
    figure.savefig(path, metadata={CAPTION_KEY: curves_caption(log_history, final_label)})
    plt.close(figure)
    return path


def draw_training_curves(
    log_history: list[dict], final_label: str = "the run's model", *, num_beams: int | None = None,
    label_smoothing: float | None = None, final_step: int | None = None,
) -> Figure | None:
    """Training and validation loss (left axis) and validation BLEU (right axis) against the optimizer step, the
    final model's BLEU marked apart (`final_label` names it), the legend below the axes, clear of the curves; None if
    nothing was logged. `num_beams`: the beams evaluation decoded with (1: greedy), named on the BLEU axis;
    `label_smoothing`: the loss's, named on the loss axis; `final_step`: the step of the final model where it is not
    the last (the best checkpoint, kept as the model). The title names the curves drawn. The figure is pyplot's:
    close it (`matplotlib.pyplot.close`) when done."""
    series = curves(log_history, final_step)
    if not any(series.values()):
        return None
    figure, loss_axis = plt.subplots(figsize=(7, 4.5), dpi=120, layout="constrained")
    lines = []
    if series["mean_loss"]:
        lines += loss_axis.plot(*zip(*series["mean_loss"]), color="tab:blue", marker="o", linestyle="none",
                                label="training loss, the run's mean (none logged during training)")
    if series["loss"]:  # a line through a few points hides them (one point draws nothing): mark them
        few = len(series["loss"]) < _FEW_POINTS
        lines += loss_axis.plot(*zip(*series["loss"]), color="tab:blue", marker="o" if few else None, markersize=4,
                                label="training loss")
    if series["eval_loss"]:
        lines += loss_axis.plot(*zip(*series["eval_loss"]), color="tab:blue", linestyle="--", marker=".",
                                label="validation loss")
    loss_axis.set_xlabel("step")
    loss_axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # a short run's axis had steps 0.5, 1.5, ...
    last_step = max(step for points in series.values() for step, _ in points)
    if last_step > 0:  # from the start of training, with room for the last point's marker
        loss_axis.set_xlim(0, last_step * 1.04)
    if series["loss"] or series["eval_loss"] or series["mean_loss"]:
        loss_axis.set_ylabel(_loss_axis_label(label_smoothing), color="tab:blue")
    else:  # no loss to read off it
        loss_axis.set_yticks([])
    bleus = series["eval_bleu"] + series["final_bleu"]
    if bleus:
        bleu_axis = loss_axis.twinx()
        if series["eval_bleu"]:
            lines += bleu_axis.plot(*zip(*series["eval_bleu"]), color="tab:orange", marker="o",
                                    label="validation BLEU")
        if series["final_bleu"]:
            lines += bleu_axis.plot(*zip(*series["final_bleu"]), color="tab:red", marker="*", markersize=12,
                                    linestyle="none", label=f"validation BLEU, {final_label}")
        bleu_axis.set_ylabel(_bleu_axis_label(num_beams), color="tab:orange")
        top = max(value for _, value in bleus) * 1.15 + 1
        top = top if top <= 100 else 105  # room above 100 for the final star's upper half
        bottom = -0.04 * top  # room below 0 for the lower half of a point at BLEU 0
        bleu_axis.set_ylim(bottom, top)
        bleu_axis.set_yticks([tick for tick in bleu_axis.get_yticks() if 0 <= tick <= min(top, 100)])
        bleu_axis.set_ylim(bottom, top)  # setting ticks widens the axis to the last one
    drawn = [name for name, shown in (("training loss", series["loss"] or series["mean_loss"]),
                                      ("validation loss", series["eval_loss"]), ("validation BLEU", bleus)) if shown]
    title = ", ".join(drawn)
    loss_axis.set_title(title[0].upper() + title[1:])
    loss_axis.grid(alpha=0.3)
    labels = [line.get_label() for line in lines]
    columns = 2 if max(map(len, labels)) <= _LEGEND_COLUMN_CHARS else 1  # long labels side by side would be cut
    figure.legend(lines, labels, loc="outside lower center", ncols=columns, fontsize="small", frameon=False)
    return figure


def curves_caption(log_history: list[dict], final_label: str = "the run's model") -> str | None:
    """Words for what `draw_training_curves` draws from `log_history`, for a caption: "Training and validation loss
    and validation BLEU over the training steps, and the validation BLEU of the run's model", "Training loss over
    the training steps, and the validation BLEU of the run's model" for a run that did not evaluate while training
    (--eval_strategy no); None where it draws nothing."""
    series = curves(log_history)
    series["loss"] = series["loss"] or series["mean_loss"]
    losses = [name for name, key in (("training", "loss"), ("validation", "eval_loss")) if series[key]]
    drawn = [" and ".join(losses) + " loss"] if losses else []
    drawn += ["validation BLEU"] if series["eval_bleu"] else []
    words = [" and ".join(drawn) + " over the training steps"] if drawn else []
    words += [f"the validation BLEU of {final_label}"] if series["final_bleu"] else []
    if not words:
        return None
    caption = ", and ".join(words)
    return caption[0].upper() + caption[1:]


def _loss_axis_label(label_smoothing: float | None) -> str:
    """The loss axis' label: "loss (cross-entropy)", with the label smoothing where there is some, "loss" when the
    smoothing is not known."""
    if label_smoothing is None:
        return "loss"
    if not label_smoothing:
        return "loss (cross-entropy)"
    return f"loss (cross-entropy, label smoothing {label_smoothing:g})"


def _bleu_axis_label(num_beams: int | None) -> str:
    """The BLEU axis' label: "validation BLEU (beam 4)", "(greedy)" for one beam, no decoding named when unknown."""
    if num_beams is None:
        return "validation BLEU"
    return f"validation BLEU ({'greedy' if num_beams == 1 else f'beam {num_beams}'})"
