"""Attention heatmaps (encoder self-, decoder self-, cross-attention) and the position-encoding plot."""

import matplotlib.image
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer.visualization import compute_attention, plot_attention, plot_positional_encoding
from tiny_translation_model import SOURCES, load_script, make_tiny_model_dir

SENTENCE = SOURCES[0]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_model_dir(tmp_path_factory.mktemp("plot") / "model")


@pytest.fixture(scope="module")
def model_and_tokenizer(model_dir):
    return AutoModelForSeq2SeqLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def maps(model_and_tokenizer):
    return compute_attention(*model_and_tokenizer, SENTENCE)


def test_attention_maps(maps, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert model.config._attn_implementation == "eager"  # switched from sdpa, which returns no weights
    source, target = len(maps.source_tokens), len(maps.target_tokens)
    assert source == len(tokenizer(SENTENCE)["input_ids"]) and maps.source_tokens[-1] == "</s>"
    assert maps.target_tokens[0] == "<s>" and "</s>" not in maps.target_tokens
    assert maps.encoder.shape == (2, 4, source, source)
    assert maps.decoder.shape == (2, 4, target, target)
    assert maps.cross.shape == (2, 4, target, source)
    for weights in (maps.encoder, maps.decoder, maps.cross):
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert torch.equal(maps.decoder, maps.decoder.tril())  # masked: no position attends to a later one


def test_attention_maps_of_a_given_target(model_and_tokenizer):
    maps = compute_attention(*model_and_tokenizer, SENTENCE, target="A dog runs.")
    assert "".join(maps.target_tokens[1:]).replace("␣", "") == "Adogruns."
    with pytest.raises(ValueError, match="empty"):
        compute_attention(*model_and_tokenizer, "  ")


def test_pieces_of_a_character_are_labelled_by_their_bytes(model_and_tokenizer):
    """An emoji or a Chinese character falls into byte pieces, each of which decodes to U+FFFD (an empty box on the
    axis): such a piece keeps its byte-level form."""
    from hf_vanilla_transformer.visualization import token_labels

    _, tokenizer = model_and_tokenizer
    ids = tokenizer("Hund 🐶 中文", add_special_tokens=False)["input_ids"]
    labels = token_labels(tokenizer, ids)
    assert "".join(labels).startswith("Hund") and not any("\ufffd" in label for label in labels)


def test_plot_attention_grid(maps, tmp_path):
    everything = matplotlib.image.imread(plot_attention(maps, "cross", tmp_path / "all.png"))
    chosen = matplotlib.image.imread(plot_attention(maps, "cross", tmp_path / "one.png", layers=[2], heads=[1, 3]))
    assert everything.shape[0] > chosen.shape[0] and everything.shape[1] > chosen.shape[1]
    with pytest.raises(ValueError, match="layers from 1 to 2"):
        plot_attention(maps, "encoder", tmp_path / "bad.png", layers=[3])
    with pytest.raises(ValueError, match="Unknown attention kind"):
        plot_attention(maps, "self", tmp_path / "bad.png")


def test_plot_positional_encoding(tmp_path):
    image = matplotlib.image.imread(plot_positional_encoding(32, tmp_path / "pe.png", max_positions=50))
    assert image.ndim == 3 and image.shape[0] > 400
    with pytest.raises(ValueError, match="outside 0..31"):
        plot_positional_encoding(32, tmp_path / "bad.png", dimensions=[40])


def test_script_writes_the_four_pictures(model_dir, tmp_path, capsys):
    written = load_script("plot_attention").main(
        [str(model_dir), SENTENCE, "-o", str(tmp_path), "--layers", "1", "2", "--heads", "1", "4"])
    names = {path.name for path in written}
    assert names == {"encoder_self_attention.png", "decoder_self_attention.png", "cross_attention.png",
                     "positional_encoding.png"}
    for path in written:
        assert matplotlib.image.imread(path).shape[0] > 100
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["MISSING", SENTENCE], "No model directory at"),
        (["MODEL", " "], "The sentence is empty"),
        (["MODEL", SENTENCE, "--heads", "5"], "Choose heads from 1 to 4"),
        (["MODEL", SENTENCE, "--max_positions", "0"], "--max_positions must be at least 1, got 0"),
        (["MODEL", SENTENCE, "-o", "FILE"], "is a file: give a folder for the PNGs"),
        (["MODEL", SENTENCE, "-o", "FILE/plots"], "Cannot write the plots into"),
        (["MODEL", SENTENCE, "--target", " "], "--target is empty"),
        (["MODEL", SENTENCE, "--revision", "v1"], "but MODEL is a folder here, which has one version"),
        (["MODEL", SENTENCE, "-o", "NEW/attention.png"], "looks like a file name, but -o names the folder"),
    ],
)
def test_script_errors(model_dir, tmp_path, capsys, args, message):
    (tmp_path / "a_file").write_text("not a folder")
    names = {"MISSING": tmp_path / "missing", "MODEL": model_dir, "FILE": tmp_path / "a_file"}
    args = [str(names[a]) if a in names else a.replace("FILE", str(names["FILE"])) for a in args]
    args = [a.replace("NEW", str(tmp_path / "new")) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        load_script("plot_attention").main(args if "-o" in args else [*args, "-o", str(tmp_path)])
    assert exit_info.value.code == 2 and message.replace("MODEL", str(model_dir)) in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # nothing made for a command refused


def test_a_long_sentence_makes_a_picture_of_bounded_size(model_and_tokenizer, tmp_path):
    """300 source tokens at 0.22 inch each would be a 66-inch heatmap, 8 of them a row: a PNG of hundreds of
    megapixels that image viewers refuse. The figure stays within MAX_FIGURE_INCHES and labels fewer tokens."""
    from hf_vanilla_transformer.visualization import MAX_FIGURE_INCHES, attention_figure

    long_sentence = " ".join([SENTENCE] * 40)
    maps = compute_attention(*model_and_tokenizer, long_sentence, target=SENTENCE)
    assert len(maps.source_tokens) > 200
    figure = attention_figure(maps, "encoder")
    width, height = figure.get_size_inches()
    assert width <= MAX_FIGURE_INCHES + 2 and height <= MAX_FIGURE_INCHES + 2
    labels = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    assert 0 < len(labels) < len(maps.source_tokens) / 2
    assert "labelled" in figure.axes[0].get_ylabel()
    short = attention_figure(compute_attention(*model_and_tokenizer, SENTENCE), "encoder")
    assert "labelled" not in short.axes[0].get_ylabel()  # every token of a short sentence keeps its label
