"""Attention heatmaps (encoder self-, decoder self-, cross-attention) and the position-encoding plot."""

import math

import matplotlib.image
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer.errors import run_command
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
    assert "".join(maps.target_tokens[1:]).replace("␣", "").replace("##", "") == "Adogruns."
    with pytest.raises(ValueError, match="empty"):
        compute_attention(*model_and_tokenizer, "  ")


def test_pieces_of_a_character_are_labelled_by_their_bytes(model_and_tokenizer):
    """An emoji or a Chinese character falls into byte pieces, each of which decodes to U+FFFD (an empty box on the
    axis): such a piece keeps its byte-level form."""
    from hf_vanilla_transformer.visualization import token_labels

    _, tokenizer = model_and_tokenizer
    ids = tokenizer("Hund 🐶 中文", add_special_tokens=False)["input_ids"]
    labels = token_labels(tokenizer, ids)
    assert "".join(labels).replace("##", "").startswith("Hund") and not any("\ufffd" in label for label in labels)
    # the pieces after a character's bytes go on the same word: "Ölfass" read "Ã ĸ l ##f ##ass", a word "l"
    ids = tokenizer("Ölfass", add_special_tokens=False)["input_ids"]
    pieces = [tokenizer.convert_ids_to_tokens(i) for i in ids]
    assert "\ufffd" in tokenizer.decode(ids[:1])  # this tokenizer splits the Ö into its bytes
    labels = token_labels(tokenizer, ids)
    assert labels[0] == pieces[0] and all(label.startswith("##") for label in labels[1:]), labels


def test_a_sentence_of_30_tokens_is_labelled_whole_in_the_paper_models_8_heads():
    """At 0.22 inch a token labels were thinned ("1 token in 2 labelled") from 23 tokens on with 8 heads, where a
    7-point label has room: 0.12 inch is enough."""
    from hf_vanilla_transformer.visualization import AttentionMaps, attention_figure

    tokens = [f"w{i}" for i in range(30)]
    weights = torch.rand(1, 8, 30, 30).softmax(-1)
    maps = AttentionMaps(source_tokens=tokens, target_tokens=tokens, encoder=weights, decoder=weights, cross=weights)
    figure = attention_figure(maps, "encoder")
    labelled = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    assert labelled == tokens and "labelled" not in figure.axes[0].get_ylabel()


def test_white_space_and_control_tokens_get_labels_that_say_which(model_and_tokenizer, caplog):
    """A line break, a tab and a carriage return were all labelled ␣ as a space is, and a control character (a random
    model's output) was drawn raw as a box, with advice to install a CJK font."""
    from hf_vanilla_transformer.visualization import label_font_families, token_labels

    _, tokenizer = model_and_tokenizer
    pieces = ("Ċ", "ĉ", "č", "Ĉ", "Ġ")  # byte-level BPE's \n \t \r \x08 and space
    ids = [tokenizer.convert_tokens_to_ids(piece) for piece in pieces]
    labels = token_labels(tokenizer, ids)
    assert labels == ["⏎", "⇥", "\\r", "\\x08", "␣"]
    with caplog.at_level("WARNING"):
        label_font_families(labels)
    assert not caplog.records  # matplotlib's own font has them all


def test_pieces_that_go_on_a_word_are_marked(model_and_tokenizer):
    """Byte-level BPE marks a word's start by a space; stripped, "the meadow" read as "the me ad ow"."""
    from hf_vanilla_transformer.visualization import token_labels

    _, tokenizer = model_and_tokenizer
    for text in ("Ein Hundehalter läuft.", "dreihundertzweiundvierzig"):
        labels = token_labels(tokenizer, tokenizer(text, add_special_tokens=False)["input_ids"])
        words = " ".join(label for label in labels if label != "␣").replace(" ##", "").split()
        assert [word for word in words if word != "."] == text.rstrip(".").split(), labels

    # a word after punctuation with no space between goes on it: "forty-two" read as "forty - two"
    labels = token_labels(tokenizer, tokenizer("forty-two", add_special_tokens=False)["input_ids"])
    assert labels[labels.index("-") + 1].startswith("##"), labels

    # SentencePiece (converted Marian models, T5): a lone "▁cat" decodes without its space, yet starts a word
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    metaspace = Tokenizer(models.BPE(unk_token="<unk>"))
    metaspace.pre_tokenizer, metaspace.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    metaspace.train_from_iterator(["the cat sat on the mat", "a meadow is green"] * 20, trainers.BpeTrainer(
        vocab_size=40, special_tokens=["<pad>", "<s>", "</s>", "<unk>"], show_progress=False))
    sentencepiece = PreTrainedTokenizerFast(tokenizer_object=metaspace, pad_token="<pad>", eos_token="</s>")
    ids = sentencepiece("the cat sat on the meadow", add_special_tokens=False)["input_ids"]
    assert " ".join(token_labels(sentencepiece, ids)).replace(" ##", "") == "the cat sat on the meadow"


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


@pytest.mark.parametrize("d_model", [16, 128, 512, 1024])
def test_the_default_encoding_curves_show_the_wavelengths_growing(d_model):
    """The default curves were dimensions 4-7, as the Annotated Transformer drew them at d_model 20: at 512 their
    wavelengths are all about 7 positions, four zigzags alike. Now four spread over d_model: 2 pi, ~20, ~63, ~200."""
    from hf_vanilla_transformer.visualization import positional_encoding_figure, wavelength

    figure = positional_encoding_figure(d_model)
    curves = next(ax for ax in figure.axes if ax.get_title().startswith("Encoding of chosen dimensions"))
    labels = [line.get_label() for line in curves.get_lines()]
    dimensions = [int(label.split()[1]) for label in labels]
    lengths = [wavelength(dimension, d_model) for dimension in dimensions]
    assert dimensions[0] == 0 and len(dimensions) == 4 and all(d % 2 == 0 for d in dimensions)
    assert lengths == pytest.approx([2 * math.pi, 19.9, 62.8, 198.7], rel=0.3 if d_model == 16 else 0.05)
    assert labels[1] == f"dim {dimensions[1]} (wavelength {lengths[1]:.3g})"
    many = positional_encoding_figure(d_model, dimensions=range(0, 16, 1) if d_model >= 16 else [0])
    colours = [tuple(line.get_color()) if not isinstance(line.get_color(), str) else line.get_color()
               for line in next(ax for ax in many.axes if ax.get_title().startswith("Encoding")).get_lines()]
    assert len(set(colours)) == len(colours)  # more than 10 curves: no colour twice


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
        (["MODEL", SENTENCE, "--max_positions", "0"], "--max_positions must be at least 2 (a curve needs two "
         "positions), got 0"),
        (["MODEL", SENTENCE, "--max_positions", "1"], "--max_positions must be at least 2"),
        (["MODEL", SENTENCE, "--max_positions", "100000000"], "--max_positions must be at most 10,000"),  # 25 GB
        (["MODEL", "vier\udce4zig"], "The sentence is not UTF-8 text"),  # a Latin-1 terminal's bytes: a traceback
        (["MODEL", SENTENCE, "--target", "for\udce4ty"], "--target is not UTF-8 text"),
        (["MODEL", SENTENCE, "-o", "FILE"], "is a file: give a folder for the PNGs"),
        (["MODEL", SENTENCE, "-o", "FILE/plots"], "lies in FILE, which is a file: give a folder for the PNGs"),
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
        run_command(lambda: load_script("plot_attention").main(args if "-o" in args else [*args, "-o", str(tmp_path)]),
                    name="plot_attention.py")
    message = message.replace("MODEL", str(model_dir)).replace("FILE", str(names["FILE"]))
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
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


def test_text_is_read_as_the_pipeline_reads_it(model_dir, model_and_tokenizer):
    """The raw sentence was tokenized: runs of spaces, a decomposed umlaut (as macOS types it) and a typed "</s>"
    gave other tokens, junk labels ("zw o Ì Ī lf") and another translation than translate.py's. Now the plotted
    translation is the pipeline's, token for token."""
    from transformers import pipeline

    from hf_vanilla_transformer.pipeline_translation import TASK
    from hf_vanilla_transformer.visualization import token_labels

    model, tokenizer = model_and_tokenizer
    translator = pipeline(TASK, model=str(model_dir))
    for sentence in ["  Ein   Hund\tla\u0308uft. ", "Ein Hund </s> läuft."]:
        maps = compute_attention(model, tokenizer, sentence)
        if "</s>" in sentence:
            assert maps.source_tokens.count("</s>") == 1 and maps.source_tokens[-1] == "</s>"
            assert "".join(maps.source_tokens[:-1]).replace("␣", "").replace("##", "") == "EinHund</s>läuft."
        else:
            assert maps.source_tokens == compute_attention(model, tokenizer, "Ein Hund läuft.").source_tokens
        ids = translator(sentence, return_tensors=True)[0]["translation_token_ids"].tolist()
        special = {model.config.decoder_start_token_id, model.config.pad_token_id, model.config.eos_token_id}
        assert maps.target_tokens[1:] == token_labels(tokenizer, [i for i in ids if i not in special])
    given = compute_attention(model, tokenizer, "Ein Hund.", target="  A   dog </s> runs. ")
    assert given.target_tokens[1:] == token_labels(
        tokenizer, tokenizer(text_target="A dog </s> runs.", split_special_tokens=True)["input_ids"][:-1])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dimensions", "4", "500"], "Dimensions [500] are outside 0..31."),
        (["--layers", "3"], "Choose layers from 1 to 2 (numbered from 1); got [3]."),
        (["--heads", "1", "5"], "Choose heads from 1 to 4 (numbered from 1); got [1, 5]."),
    ],
)
def test_choices_are_checked_before_the_model_loads_and_nothing_is_written(model_dir, tmp_path, monkeypatch,
                                                                            capsys, args, message):
    """A bad --dimensions was found after the model loaded, translated and 3 of the 4 PNGs were written, with
    "source:/target:" printed before the error; a bad --layers or --heads after the beam search."""
    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(AutoModelForSeq2SeqLM, "from_pretrained", no_loading)
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: load_script("plot_attention").main([str(model_dir), SENTENCE, "-o", str(tmp_path / "plots"),
                                                               *args]), name="plot_attention.py")
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and out == "" and err.endswith(f": error: {message}\n")
    assert not (tmp_path / "plots").exists()


def test_a_tokenizer_larger_than_the_models_vocabulary_is_one_line(model_dir, tmp_path, monkeypatch, capsys):
    """Another tokenizer saved into a model's folder, with ids past the model's vocabulary, failed in the model with
    a traceback (`input_ids` holds ids outside the vocabulary), status 1: now one line, before the model loads."""
    import shutil

    folder = shutil.copytree(model_dir, tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(["Hund"])  # an id the model has no embedding for
    tokenizer.save_pretrained(folder)

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(AutoModelForSeq2SeqLM, "from_pretrained", no_loading)
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: load_script("plot_attention").main([str(folder), SENTENCE, "-o", str(tmp_path / "plots")]),
                    name="plot_attention.py")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert f"has ids up to {len(tokenizer) - 1} and the model a vocabulary of {len(tokenizer) - 1}" in err
    assert f"Save the tokenizer the model was trained with into {folder}" in err
    assert not (tmp_path / "plots").exists()


def test_a_layer_head_or_dimension_given_twice_is_drawn_once(maps):
    from hf_vanilla_transformer.visualization import attention_figure, check_choices, positional_encoding_figure

    heatmaps = [ax for ax in attention_figure(maps, "cross", layers=[1, 1], heads=[2, 2]).axes if ax.get_title()]
    assert [ax.get_title() for ax in heatmaps] == ["layer 1/2, head 2/4"]
    figure = positional_encoding_figure(32, dimensions=[4, 4, 5])
    curves = next(ax for ax in figure.axes if ax.get_title().startswith("Encoding of chosen dimensions"))
    assert [line.get_label() for line in curves.get_lines()] == ["dim 4 (wavelength 19.9)", "dim 5 (wavelength 19.9)"]
    # the legend in a row under the curves (inside the axes it hid the peaks of the curves)
    assert curves.get_legend() is None and [text.get_text() for text in figure.legends[0].get_texts()] == [
        "dim 4 (wavelength 19.9)", "dim 5 (wavelength 19.9)"]
    from hf_vanilla_transformer import VanillaTransformerConfig

    small = VanillaTransformerConfig(d_model=32, encoder_layers=3, decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4)
    assert check_choices(small, ["encoder"], layers=[3, 1, 3], dimensions=[5, 5]) == ([3, 1], None, [5])
    with pytest.raises(ValueError, match=r"from 1 to 2 \(numbered from 1; the decoder has 2\); got \[3\]"):
        check_choices(small, ["encoder", "cross"], layers=[3])


def test_each_axis_is_thinned_by_its_own_length(model_and_tokenizer):
    """With an 84-token source and a 19-token target, the target axis also showed 1 token in 2: each axis now
    keeps every label that fits it."""
    from hf_vanilla_transformer.visualization import attention_figure

    maps = compute_attention(*model_and_tokenizer, " ".join([SENTENCE] * 40), target=SENTENCE)
    figure = attention_figure(maps, "cross")
    targets = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    sources = [label.get_text() for label in figure.axes[-2].get_xticklabels()]
    assert targets == maps.target_tokens and "labelled" not in figure.axes[0].get_ylabel()
    assert 0 < len(sources) < len(maps.source_tokens) / 2 and "labelled" in figure.axes[-2].get_xlabel()


def test_labels_in_scripts_the_default_font_lacks_fall_back_to_a_font_that_has_them(tmp_path, caplog, recwarn):
    """A Chinese or Japanese target drew its labels as boxes, with 18 matplotlib warnings of "Glyph ... missing": an
    installed font with the glyphs is used where there is one, and one warning names the characters where none is."""
    import logging

    from matplotlib import font_manager

    from hf_vanilla_transformer.visualization import AttentionMaps, _glyphs, label_font_families, plot_attention

    default = font_manager.get_font(font_manager.findfont(font_manager.FontProperties())).family_name
    assert label_font_families(["ein", "Hund"]) == [default]
    elsewhere = next((chr(code) for font in font_manager.fontManager.ttflist if not font.name.startswith("Last")
                      for code in sorted(_glyphs(font.fname) - _glyphs(font_manager.findfont(
                          font_manager.FontProperties()))) if chr(code).isalpha()), None)
    if elsewhere is not None:  # matplotlib's own STIX fonts have letters DejaVu Sans lacks ("ᶁ")
        families = label_font_families(["a", elsewhere])
        assert families[0] == default and len(families) == 2
    tokens = ["猫", "坐", "在", "垫子", "上"]
    covered = any({ord(char) for char in "猫坐在垫子上"} <= _glyphs(font.fname)
                  for font in font_manager.fontManager.ttflist if not font.name.startswith("Last"))
    weights = torch.rand(1, 1, 5, 5).softmax(-1)
    maps = AttentionMaps(source_tokens=tokens, target_tokens=tokens, encoder=weights, decoder=weights, cross=weights)
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.visualization"):
        plot_attention(maps, "cross", tmp_path / "cross.png")
    assert not [warning for warning in recwarn if "missing from font" in str(warning.message)]
    if not covered:  # as on this project's CI machines: no CJK font
        assert caplog.messages == [
            "No font installed here has glyphs for 猫坐在垫子上 (6 characters of the tokens): their labels show as "
            "boxes. Install a font that has them, e.g. Noto Sans CJK (fonts-noto-cjk) for Chinese and Japanese."]


def test_the_debug_variable_shows_the_traceback_of_a_refused_model(tmp_path, monkeypatch):
    """HF_VANILLA_TRANSFORMER_DEBUG=1 shows the traceback behind a one-line error, as in the other scripts; this
    script called argparse's error directly, which no variable turned off."""
    from hf_vanilla_transformer.errors import DEBUG_VARIABLE, MissingFileError

    monkeypatch.setenv(DEBUG_VARIABLE, "1")
    with pytest.raises(MissingFileError, match="No model directory at"):
        run_command(lambda: load_script("plot_attention").main([str(tmp_path / "missing"), SENTENCE, "-o",
                                                                str(tmp_path / "plots")]), name="plot_attention.py")


def test_a_short_target_beside_a_long_source_gets_short_rows(model_and_tokenizer):
    """One cell size for both axes, from the longer: 12 target rows beside 150 source tokens drew a square, each row
    some 280 pixels tall under 7-point labels."""
    from hf_vanilla_transformer.visualization import MAX_FIGURE_INCHES, attention_figure

    maps = compute_attention(*model_and_tokenizer, " ".join([SENTENCE] * 25), target=SENTENCE)
    assert len(maps.source_tokens) > 5 * len(maps.target_tokens)
    width, height = attention_figure(maps, "cross", layers=[1], heads=[1]).get_size_inches()
    assert height <= max(2.4, 0.22 * len(maps.target_tokens)) + 1
    assert width >= min(0.22 * len(maps.source_tokens), MAX_FIGURE_INCHES)


@pytest.mark.parametrize("count", [4, 12])
def test_the_encoding_curves_legend_fits_the_figure(count):
    """Legend entries in rows of 8 ran past both edges of the figure: dims 1-7 and 21-23 of 12 were cut off."""
    from hf_vanilla_transformer.visualization import positional_encoding_figure

    figure = positional_encoding_figure(512, dimensions=list(range(1, 2 * count, 2)))
    figure.canvas.draw()  # Figure has an Agg canvas once drawn through its own savefig; here, lay it out
    legend = figure.legends[0].get_window_extent()
    box = figure.bbox
    assert box.x0 <= legend.x0 and legend.x1 <= box.x1 and box.y0 <= legend.y0
    assert len(figure.legends[0].get_texts()) == count
    # "nearest" drew moiré checkerboards where many positions share a pixel: patterns the encoding does not have
    assert figure.axes[0].get_images()[0].get_interpolation() == "antialiased"


def test_the_script_draws_a_kind_once_and_the_encodings_of_this_packages_models_only(model_dir, tmp_path, capsys):
    """--kinds cross cross wrote and reported cross_attention.png twice; a MarianMTModel (sines in the first half of
    the dimensions, cosines in the second) got this package's interleaved encodings drawn as its own."""
    from transformers import MarianConfig, MarianMTModel

    written = load_script("plot_attention").main([str(model_dir), SENTENCE, "-o", str(tmp_path / "ours"), "--kinds",
                                                  "cross", "cross", "--layers", "1", "--heads", "1"])
    assert [path.name for path in written] == ["cross_attention.png", "positional_encoding.png"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    marian = tmp_path / "marian"
    MarianMTModel(MarianConfig(vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
                               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                               decoder_ffn_dim=32, pad_token_id=0, eos_token_id=2, decoder_start_token_id=1,
                               max_length=8)).save_pretrained(marian)
    tokenizer.save_pretrained(marian)
    capsys.readouterr()
    written = load_script("plot_attention").main([str(marian), SENTENCE, "-o", str(tmp_path / "marian_plots"),
                                                  "--kinds", "cross"])
    assert [path.name for path in written] == ["cross_attention.png"]
    assert ("positional_encoding.png not drawn: it shows this package's encodings, not a marian model's"
            in capsys.readouterr().out)


@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")  # the min_length that runs into the table
def test_a_model_with_a_table_of_positions_is_kept_within_it(model_dir):
    """A MarianMTModel holds its positions in a table: a longer sentence or target, or a translation generated past
    it (its max_length larger than the table), was an IndexError traceback. Translations end within the table, and a
    sentence or target longer than it is one line."""
    from transformers import MarianConfig, MarianMTModel

    from hf_vanilla_transformer.errors import InputError

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    marian = MarianMTModel(MarianConfig(
        vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0, eos_token_id=2,
        decoder_start_token_id=1, max_position_embeddings=12, max_length=64))
    marian.generation_config.update(max_length=64, min_length=64)  # it would run past the table, if let
    maps = compute_attention(marian, tokenizer, "sieben")
    assert len(maps.target_tokens) <= 12
    for sentence, target, what in ((" ".join(["siebenhundertsiebenundsiebzig"] * 5), None, "The sentence"),
                                   ("sieben", " ".join(["seven"] * 20), "The target")):
        with pytest.raises(InputError, match=f"{what} has .* tokens, and this model's table of positions holds 12"):
            compute_attention(marian, tokenizer, sentence, target=target)
