"""training_curves.png: the BLEU axis names the decoding evaluation used, a training loss logged once or a few times
shows, and the legend hides no data."""

import math

import matplotlib.pyplot as plt
import pytest

from hf_vanilla_transformer.training_curves import draw_training_curves, plot_training_curves


def typical_history(steps: int = 5000) -> list[dict]:
    """A run logging its loss every 50 steps and evaluating every 500: losses fall, BLEU rises; then the final model's
    evaluation."""
    history = []
    for step in range(50, steps + 1, 50):
        history.append({"loss": 2.0 + 7.0 * math.exp(-step / 800), "step": step})
        if step % 500 == 0:
            history.append({"eval_loss": 2.4 + 6.0 * math.exp(-step / 900),
                            "eval_bleu": 35 * (1 - math.exp(-step / 1500)), "step": step})
    return history + [{"train_runtime": 100.0, "train_loss": 3.0, "step": steps},
                      {"eval_loss": 2.5, "eval_bleu": 33.8, "eval_samples": 1014, "step": steps}]


# --max_steps 80 --logging_steps 50: one training loss, one evaluation at the end, then the final model's
SHORT_HISTORY = [{"loss": 7.9, "step": 50}, {"eval_loss": 7.5, "eval_bleu": 0.4, "step": 80},
                 {"train_runtime": 9.0, "train_loss": 7.8, "step": 80},
                 {"eval_loss": 7.5, "eval_bleu": 0.4, "eval_samples": 10, "step": 80}]


@pytest.fixture
def draw():
    figures = []

    def draw(*args, **kwargs):
        figures.append(draw_training_curves(*args, **kwargs))
        return figures[-1]

    yield draw
    for figure in figures:
        plt.close(figure)


@pytest.mark.parametrize("num_beams, label", [
    (None, "validation BLEU"), (1, "validation BLEU (greedy)"), (4, "validation BLEU (beam 4)"),
    (6, "validation BLEU (beam 6)"),
])
def test_the_bleu_axis_names_the_decoding_evaluation_used(draw, tmp_path, num_beams, label):
    kwargs = {} if num_beams is None else {"num_beams": num_beams}
    loss_axis, bleu_axis = draw(typical_history(), **kwargs).axes
    assert bleu_axis.get_ylabel() == label
    assert plot_training_curves(typical_history(), tmp_path / "curves.png", **kwargs).stat().st_size > 10_000


def training_loss_line(figure):
    (line,) = [line for line in figure.axes[0].get_lines() if line.get_label() == "training loss"]
    return line


def test_a_training_loss_logged_once_shows_as_a_point(draw):
    figure = draw(SHORT_HISTORY, num_beams=1)
    assert training_loss_line(figure).get_marker() not in (None, "None", "", " ")  # a line of one point draws nothing
    assert "training loss" in [text.get_text() for legend in legends(figure) for text in legend.get_texts()]
    few = [{"loss": 8.0 - step / 100, "step": step} for step in (50, 100, 150)]
    assert training_loss_line(draw(few)).get_marker() not in (None, "None", "", " ")
    assert training_loss_line(draw(typical_history())).get_marker() in (None, "None", "", " ")  # many: a line alone


def legends(figure):
    return [*figure.legends, *(axis.get_legend() for axis in figure.axes if axis.get_legend() is not None)]


@pytest.mark.parametrize("history, final_label", [
    (typical_history(), "the run's model (average of the last 5 checkpoints)"),
    (SHORT_HISTORY, "the run's model (average of the last 5 checkpoints)"),
    (typical_history()[:-2], "the run's model (average of the last 5 checkpoints)"),
    (SHORT_HISTORY[1:], "the run's model (the best checkpoint, step 80)"),  # long labels in both columns were cut
], ids=["typical", "short", "no final evaluation", "mean loss, best checkpoint"])
def test_the_legend_lies_outside_the_curves(draw, history, final_label):
    figure = draw(history, final_label, num_beams=4)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    (legend,) = legends(figure)
    labels = [text.get_text() for text in legend.get_texts()]
    assert len(labels) == len({line.get_label() for axis in figure.axes for line in axis.get_lines()})
    box = legend.get_window_extent(renderer)
    assert figure.bbox.contains(box.x0, box.y0) and figure.bbox.contains(box.x1, box.y1)  # not cut off
    for axis in figure.axes:
        assert not box.overlaps(axis.get_window_extent(renderer)), (labels, axis.get_ylabel())


@pytest.mark.parametrize("label_smoothing, label", [
    (None, "loss"), (0.0, "loss (cross-entropy)"), (0.1, "loss (cross-entropy, label smoothing 0.1)"),
])
def test_the_loss_axis_names_the_label_smoothing_trained_with(draw, label_smoothing, label):
    """--label_smoothing_factor 0 was drawn as "loss (label-smoothed)"."""
    assert draw(typical_history(), label_smoothing=label_smoothing).axes[0].get_ylabel() == label


def test_the_title_names_only_the_curves_drawn(draw):
    """A run without evaluation (--eval_strategy no) was titled "Training and validation loss, validation BLEU"."""
    training_only = [entry for entry in typical_history()[:-2] if "loss" in entry]
    assert draw(training_only).axes[0].get_title() == "Training loss"
    assert draw(typical_history()).axes[0].get_title() == "Training loss, validation loss, validation BLEU"


def test_a_final_bleu_near_100_is_drawn_whole(draw, tmp_path):
    """Near BLEU 100 the axis ended at 100, cutting the final model's star in half; its ticks stay at most 100."""
    history = [{**entry, "eval_bleu": 99.5} if "eval_bleu" in entry else entry for entry in typical_history()]
    bleu_axis = draw(history).axes[1]
    assert bleu_axis.get_ylim()[1] > 101
    assert max(bleu_axis.get_yticks()) == 100
    top = max(entry["eval_bleu"] for entry in typical_history() if "eval_bleu" in entry) * 1.15 + 1
    assert draw(typical_history()).axes[1].get_ylim()[1] == pytest.approx(top)  # not widened to the next tick
    plot_training_curves(history, tmp_path / "curves.png", num_beams=4, label_smoothing=0.1)


def test_the_png_carries_a_caption_naming_the_curves_drawn(tmp_path):
    """The model card showed every plot as "Training and validation loss and validation BLEU over the training steps",
    also that of a run without evaluation during training (--eval_strategy no, the laptop recipe): the plot names
    what it draws in the PNG, for the card to say."""
    from PIL import Image

    from hf_vanilla_transformer.training_curves import CAPTION_KEY, curves_caption

    training_only = [entry for entry in typical_history()[:-1] if "eval_bleu" not in entry] + typical_history()[-1:]
    averaged = "the run's model (average of the last 5 checkpoints)"
    assert curves_caption(training_only, averaged) == (
        "Training loss over the training steps, and the validation BLEU of the run's model (average of the last 5 "
        "checkpoints)")
    assert curves_caption(typical_history()) == (
        "Training and validation loss and validation BLEU over the training steps, and the validation BLEU of the "
        "run's model")
    assert curves_caption(typical_history()[:-2]) == (  # before the final evaluation
        "Training and validation loss and validation BLEU over the training steps")
    assert curves_caption([entry for entry in training_only if "loss" in entry]) == (
        "Training loss over the training steps")
    assert curves_caption(typical_history()[-2:]) == (  # no loss logged: the run's mean is drawn
        "Training loss over the training steps, and the validation BLEU of the run's model")
    no_loss = [{"train_runtime": 1.0, "step": 3}, {"eval_bleu": 1.0, "step": 3}]
    assert curves_caption(no_loss) == "The validation BLEU of the run's model"
    assert curves_caption([]) is None
    path = plot_training_curves(training_only, tmp_path / "curves.png", averaged, num_beams=4)
    with Image.open(path) as image:
        assert image.text[CAPTION_KEY] == curves_caption(training_only, averaged)


def test_a_run_shorter_than_its_logging_steps_shows_its_mean_training_loss(draw):
    """--max_steps 8 with --logging_steps 50 logs no training loss: the plot had an empty loss axis labelled as one,
    a step axis from 7.6 to 8.4 and a half-drawn star; it shows the run's mean loss (train_loss) at its last step."""
    history = [{"train_runtime": 3.0, "train_loss": 6.2, "step": 8},
               {"eval_loss": 6.0, "eval_bleu": 0.0, "eval_samples": 30, "step": 8}]
    loss_axis, bleu_axis = draw(history).axes
    (line,) = [line for line in loss_axis.get_lines() if line.get_label().startswith("training loss, the run's mean")]
    assert list(line.get_xydata()[0]) == [8, 6.2] and line.get_marker() == "o"
    assert loss_axis.get_xlim()[0] == 0 and loss_axis.get_xlim()[1] > 8
    assert loss_axis.get_title() == "Training loss, validation BLEU"
    assert bleu_axis.get_ylim()[0] < 0  # a BLEU of 0 is drawn whole, not half under the axis
    from hf_vanilla_transformer.training_curves import curves_caption

    assert curves_caption(history).startswith("Training loss over the training steps")
    no_loss = [{"train_runtime": 3.0, "step": 8}, {"eval_bleu": 0.0, "eval_samples": 30, "step": 8}]
    assert not draw(no_loss).axes[0].get_yticks().size  # nothing on the loss axis: no ticks as if there were


@pytest.mark.parametrize("steps", [1, 4, 5000])
def test_the_step_axis_counts_whole_steps(draw, steps):
    """A 4-step run's axis was labelled 0.5, 1.5, ..., a 1-step run's 0.2, 0.4, ...: steps are whole numbers."""
    history = [{"loss": 3.0, "step": step} for step in range(1, steps + 1, max(1, steps // 50))]
    history += [{"eval_loss": 2.9, "eval_bleu": 1.0, "step": steps}, {"train_runtime": 1.0, "step": steps}]
    figure = draw(history)
    ticks = [tick for tick in figure.axes[0].get_xticks() if 0 <= tick <= steps]
    assert len(ticks) >= 2 and all(tick == int(tick) for tick in ticks), ticks
