"""Pictures of a trained model, as the Annotated Transformer draws them: attention weights of the encoder's
self-attention, the decoder's masked self-attention and the decoder's attention over the source (cross-attention)
as heatmaps, one per layer and head, and the sinusoidal position encodings [3.5].

Layers and heads are numbered from 1 here, as in the paper's figures ("layer 5 of 6"). Figures are built with
matplotlib's object-oriented API, not pyplot: no backend is switched, and PNGs are drawn by Agg.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import torch
from matplotlib import font_manager
from matplotlib.figure import Figure

from .errors import InputError
from .modeling_vanilla_transformer import sinusoidal_encoding
from .pipeline_translation import normalize_text, normalize_whitespace, reads_special_tokens_as_text

logger = logging.getLogger(__name__)

KINDS = {
    "encoder": ("Encoder self-attention", "source", "source"),
    "decoder": ("Decoder self-attention (masked)", "target (decoder input)", "target (decoder input)"),
    "cross": ("Decoder cross-attention over the source", "target (decoder input)", "source"),
}
"""kind -> (title, query axis, key axis)."""

MAX_FIGURE_INCHES = 40.0
"""The longest side of an attention figure (4,400 pixels at the 110 dpi PNGs are saved with)."""


@dataclass
class AttentionMaps:
    """Attention weights of one sentence pair, each of shape (layers, heads, queries, keys)."""

    source_tokens: list[str]
    target_tokens: list[str]
    encoder: torch.Tensor
    decoder: torch.Tensor
    cross: torch.Tensor

    def weights(self, kind: str) -> tuple[torch.Tensor, list[str], list[str]]:
        """(weights, query tokens, key tokens) of `kind`: "encoder", "decoder" or "cross"."""
        if kind == "encoder":
            return self.encoder, self.source_tokens, self.source_tokens
        if kind == "decoder":
            return self.decoder, self.target_tokens, self.target_tokens
        if kind == "cross":
            return self.cross, self.target_tokens, self.source_tokens
        raise ValueError(f"Unknown attention kind {kind!r}; choose from {sorted(KINDS)}.")


def check_within_positions(what: str, tokens: int, positions: int | None) -> None:
    """An InputError for `tokens` past a model's table of `positions` (None: positions computed, any length)."""
    if positions is not None and tokens > positions:
        raise InputError(f"{what} has {tokens} tokens, and this model's table of positions holds {positions}: give "
                         "a shorter one (one sentence).")


@torch.no_grad()
def compute_attention(model, tokenizer, sentence: str, target: str | None = None, **generate_kwargs) -> AttentionMaps:
    """Attention weights for `sentence` and its translation: `target` if given, else the model's own (`generate`
    with `generate_kwargs`), fed to the decoder in one teacher-forced pass. The decoder's inputs are the start
    token and the translation's tokens (without the final `</s>`); the source keeps its `</s>`.

    Text is read as the translation pipeline and the training data read it: the sentence normalized by
    `normalize_text`, a target by `normalize_whitespace`, "</s>" typed in either as text where
    `reads_special_tokens_as_text` says so; the model's own translation is then the pipeline's (and translate.py's).
    The model is switched to eager attention, the one implementation that returns its weights.
    """
    sentence = normalize_text(sentence)
    if not sentence:
        raise ValueError("The sentence to translate is empty.")
    model.eval()
    if model.config._attn_implementation != "eager":
        model.set_attn_implementation("eager")
    as_text = reads_special_tokens_as_text(tokenizer)
    source = tokenizer(sentence, return_tensors="pt", split_special_tokens=as_text).to(model.device)
    start = model.config.decoder_start_token_id
    # a model of another type (Marian) may hold its positions in a table: past it, an IndexError inside torch
    positions = None if model.config.model_type == "vanilla_transformer" else model.config.max_position_embeddings
    check_within_positions("The sentence", source["input_ids"].shape[1], positions)
    if target is None:
        if positions:  # its translation ends within the table too
            generate_kwargs = {"max_length": min(model.generation_config.max_length or positions, positions),
                               **generate_kwargs}
        generated = model.generate(**source, **generate_kwargs)[0].tolist()
        target_ids = [token for token in generated[1:] if token != model.config.pad_token_id]
    else:
        target_ids = tokenizer(text_target=normalize_whitespace(target), split_special_tokens=as_text)["input_ids"]
    if target_ids and target_ids[-1] == model.config.eos_token_id:
        target_ids = target_ids[:-1]
    check_within_positions("The target", len(target_ids) + 1, positions)  # with the start token
    decoder_input_ids = torch.tensor([[start, *target_ids]], device=model.device)
    outputs = model(**source, decoder_input_ids=decoder_input_ids, output_attentions=True, use_cache=False)

    def stack(per_layer):
        return torch.stack([layer[0] for layer in per_layer]).float().cpu()

    return AttentionMaps(
        source_tokens=token_labels(tokenizer, source["input_ids"][0].tolist()),
        target_tokens=token_labels(tokenizer, decoder_input_ids[0].tolist()),
        encoder=stack(outputs.encoder_attentions),
        decoder=stack(outputs.decoder_attentions),
        cross=stack(outputs.cross_attentions),
    )


def token_labels(tokenizer, ids: Sequence[int]) -> list[str]:
    """Readable labels for token ids: each token decoded on its own (byte-level pieces become text), stripped, and a
    piece that goes on the word before it (no space in front: "meadow" as "me", "##ad", "##ow"; "forty-two" as
    "forty", "-", "##two") marked with "##", as BERT's tokenizers write them (punctuation, which goes on a word
    without a space as a rule, is left unmarked); a token holding part of a character's bytes (an emoji's, a Chinese
    character's), which decodes to U+FFFD and draws as an empty box, keeps its byte-level form; white space alone is
    ␣ (a space), ⏎, \\r or ⇥, and a control character an escape (\\x08)."""
    special = set(tokenizer.all_special_ids)
    labels, after_word = [], False
    for token_id in ids:
        decoded, piece = tokenizer.decode([token_id]), tokenizer.convert_ids_to_tokens(token_id)
        text = decoded.strip()
        if token_id in special:
            labels.append(piece)
            after_word = False
            continue
        # a word starts with a space: byte-level BPE's "Ġ", SentencePiece's "▁" (which a lone token decodes without)
        starts_word = decoded[:1].isspace() or piece[:1] in ("Ġ", "▁")
        if "\ufffd" in text:  # part of a character's bytes: its byte-level form, on the word as any piece
            labels.append(f"##{piece}" if after_word and not starts_word else piece)
            after_word = True
            continue
        continues = after_word and not starts_word and text[:1].isalnum()
        if text:
            labels.append(f"##{_visible(text)}" if continues else _visible(text))
        else:  # white space alone: a line break, a tab and a space each by its own sign
            labels.append(next((sign for mark, sign in _WHITE_SPACE_SIGNS.items() if mark in decoded), "␣"))
        after_word = bool(text)
    return labels


_WHITE_SPACE_SIGNS = {"\n": "⏎", "\r": "\\r", "\t": "⇥"}  # signs DejaVu Sans, matplotlib's font, has


def _visible(text: str) -> str:
    """`text` with control characters (U+0000-U+001F, U+007F), which no font draws, written as escapes (\\x08)."""
    return "".join(f"\\x{ord(mark):02x}" if ord(mark) < 32 or ord(mark) == 127 else mark for mark in text)


def plot_attention(
    maps: AttentionMaps,
    kind: str,
    path: str | os.PathLike,
    *,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
) -> Path:
    """Save `attention_figure(maps, kind, layers=layers, heads=heads)` as a PNG at `path`; returns the path."""
    return _save(attention_figure(maps, kind, layers=layers, heads=heads), path)


def attention_figure(
    maps: AttentionMaps, kind: str, *, layers: Sequence[int] | None = None, heads: Sequence[int] | None = None
) -> Figure:
    """A grid of heatmaps of `kind` attention ("encoder", "decoder", "cross"): a row per layer, a column per head
    (numbered from 1; default all). Rows of a heatmap are the attending positions (queries), columns the
    attended ones (keys); each row sums to 1."""
    weights, query_tokens, key_tokens = maps.weights(kind)
    title, query_axis, key_axis = KINDS[kind]
    num_layers, num_heads = weights.shape[:2]
    layers = _check_indices(layers, num_layers, "layer")
    heads = _check_indices(heads, num_heads, "head")

    # 0.22 inch a token, at least 2.4 inches a heatmap, and at most MAX_FIGURE_INCHES a side: a long sentence
    # labels every `step`-th token instead of making a PNG no viewer opens (a 60-word sentence drew 230 megapixels);
    # each axis by its own length, so that a long source leaves a short translation's rows short and every one of
    # its tokens labelled (a square cell made 12 rows of 280 pixels each beside 150 source tokens). A 7-point label
    # needs 0.12 inch: a smaller cell still labels every token where they fit.
    height = min(max(2.4, 0.22 * len(query_tokens)), MAX_FIGURE_INCHES / len(layers))
    width = min(max(2.4, 0.22 * len(key_tokens)), MAX_FIGURE_INCHES / len(heads))
    query_step, key_step = (max(1, math.ceil(0.12 * len(tokens) / inches))
                            for tokens, inches in ((query_tokens, height), (key_tokens, width)))
    if query_step > 1:
        query_axis = f"{query_axis} (1 token in {query_step} labelled)"
    if key_step > 1:
        key_axis = f"{key_axis} (1 token in {key_step} labelled)"
    families = label_font_families([*query_tokens, *key_tokens])
    figure = Figure(figsize=(width * len(heads) + 1.2, height * len(layers) + 0.9), layout="constrained")
    axes = figure.subplots(len(layers), len(heads), squeeze=False)
    image = None
    for row, layer in enumerate(layers):
        for column, head in enumerate(heads):
            ax = axes[row][column]
            image = ax.imshow(weights[layer - 1, head - 1].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_title(f"layer {layer}/{num_layers}, head {head}/{num_heads}", fontsize=9)
            ax.set_xticks(range(0, len(key_tokens), key_step))
            ax.set_yticks(range(0, len(query_tokens), query_step))
            ax.set_xticklabels(key_tokens[::key_step] if row == len(layers) - 1 else [], rotation=90, fontsize=7,
                               fontfamily=families)
            ax.set_yticklabels(query_tokens[::query_step] if column == 0 else [], fontsize=7, fontfamily=families)
            ax.tick_params(length=0)
        axes[row][0].set_ylabel(query_axis, fontsize=8)
    for column in range(len(heads)):
        axes[-1][column].set_xlabel(key_axis, fontsize=8)
    figure.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    figure.suptitle(title)
    return figure


def label_font_families(labels: Sequence[str]) -> list[str]:
    """Font families for token labels: matplotlib's default font, then installed fonts with the glyphs it lacks (for
    Chinese, Japanese or Thai tokens), which matplotlib falls back to character by character. Where no installed font
    has some of them, one warning names them; matplotlib's own is a warning per character, and the labels boxes."""
    default = font_manager.findfont(font_manager.FontProperties())
    missing = {ord(char) for char in "".join(labels)} - _glyphs(default) - {ord("\n")}
    families = [font_manager.get_font(default).family_name]
    for font in sorted(font_manager.fontManager.ttflist, key=lambda font: font.fname):
        if not missing:
            break
        covered = missing & _glyphs(font.fname)
        if covered and font.name not in families and not font.name.startswith("Last Resort"):  # it draws boxes
            families.append(font.name)
            missing -= covered
    if missing:
        shown = "".join(dict.fromkeys(char for char in "".join(labels) if ord(char) in missing))[:10]  # in order
        logger.warning("No font installed here has glyphs for %s (%d characters of the tokens): their labels show "
                       "as boxes. Install a font that has them, e.g. Noto Sans CJK (fonts-noto-cjk) for Chinese and "
                       "Japanese.", shown, len(missing))
    return families


@functools.lru_cache(maxsize=None)
def _glyphs(font_file: str) -> frozenset[int]:
    """The code points a font file has glyphs for."""
    try:
        return frozenset(font_manager.get_font(font_file).get_charmap())
    except (OSError, RuntimeError):  # a font file FreeType cannot read
        return frozenset()


def plot_positional_encoding(
    d_model: int,
    path: str | os.PathLike,
    *,
    max_positions: int = 100,
    dimensions: Sequence[int] | None = None,
) -> Path:
    """Save `positional_encoding_figure(...)` as a PNG at `path`; returns the path."""
    return _save(positional_encoding_figure(d_model, max_positions=max_positions, dimensions=dimensions), path)


def spread_dimensions(d_model: int) -> list[int]:
    """Four sine dimensions at 0, 1/8, 1/4 and 3/8 of `d_model` (fewer below d_model 16), whose wavelengths grow
    geometrically [3.5] from 2*pi to about 20, 63 and 200 positions at any d_model: the curves that show it. (The
    Annotated Transformer's 4-7 do at its d_model of 20; at 512 their wavelengths are all about 7 positions.)"""
    return sorted({2 * round(fraction * d_model / 2) for fraction in (0, 1 / 8, 1 / 4, 3 / 8)})


def wavelength(dimension: int, d_model: int) -> float:
    """The wavelength in positions of an encoding dimension: 2*pi * 10000^(2i/d_model) for dimensions 2i and 2i+1."""
    return 2 * math.pi * 10000 ** (2 * (dimension // 2) / d_model)


def positional_encoding_figure(
    d_model: int, *, max_positions: int = 100, dimensions: Sequence[int] | None = None
) -> Figure:
    """The sinusoidal encodings [3.5] of positions 0..max_positions-1: a heatmap of all `d_model` dimensions, and
    the curves of `dimensions` (default `spread_dimensions`; sine for even, cosine for odd ones), each labelled with
    its wavelength."""
    dimensions = check_dimensions(spread_dimensions(d_model) if dimensions is None else dimensions, d_model)
    encoding = sinusoidal_encoding(torch.arange(max_positions), d_model).numpy()
    figure = Figure(figsize=(10, 8), layout="constrained")
    heatmap, curves = figure.subplots(2, 1)
    # antialiased: many positions in few pixels drew moiré checkerboards with "nearest", patterns not in the encoding
    image = heatmap.imshow(encoding, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="antialiased")
    heatmap.set_xlabel("dimension (even: sin, odd: cos)")
    heatmap.set_ylabel("position")
    heatmap.set_title(f"Sinusoidal position encodings, d_model = {d_model}")
    figure.colorbar(image, ax=heatmap, label="value")
    palette = matplotlib.colormaps["tab10" if len(dimensions) <= 10 else "viridis"]  # no colour twice
    for index, dimension in enumerate(dimensions):
        colour = palette(index if len(dimensions) <= 10 else index / (len(dimensions) - 1))
        curves.plot(range(max_positions), encoding[:, dimension], color=colour,
                    label=f"dim {dimension} (wavelength {wavelength(dimension, d_model):.3g})")
    curves.set_xlabel("position")
    curves.set_ylabel("value")
    curves.set_title("Encoding of chosen dimensions by position")
    # under the curves, not over them; in rows of 4, each of which fits the figure's width (8 ran past its edges)
    figure.legend(*curves.get_legend_handles_labels(), loc="outside lower center", ncols=min(len(dimensions), 4))
    curves.set_xlim(0, max_positions - 1)
    return figure


def _check_indices(chosen: Sequence[int] | None, count: int, name: str, where: str = "") -> list[int]:
    """`chosen` (numbered from 1; default: all `count`), each once, in the order given; ValueError for one out of
    range."""
    if chosen is None:
        return list(range(1, count + 1))
    bad = [index for index in chosen if not 1 <= index <= count]
    if bad or not chosen:
        raise ValueError(f"Choose {name}s from 1 to {count} (numbered from 1{where}); got {list(chosen)}.")
    return list(dict.fromkeys(chosen))


def check_dimensions(dimensions: Sequence[int], d_model: int) -> list[int]:
    """`dimensions` of the position encodings, each once; ValueError for one outside 0..d_model-1."""
    bad = [d for d in dimensions if not 0 <= d < d_model]
    if bad:
        raise ValueError(f"Dimensions {bad} are outside 0..{d_model - 1}.")
    return list(dict.fromkeys(dimensions))


def check_choices(
    config, kinds: Sequence[str], *, layers=None, heads=None, dimensions: Sequence[int] | None = None
) -> tuple[list[int] | None, list[int] | None, list[int] | None]:
    """(layers, heads, dimensions) as `plot_attention` and `plot_positional_encoding` take them, checked against a
    model's `config` before anything is computed: layers and heads (numbered from 1) within those of every one of
    `kinds` (the encoder's for "encoder", the decoder's for "decoder" and "cross"), dimensions within d_model;
    each once. ValueError for one out of range. (A config without these BART-family fields is checked when drawing.)"""
    stacks = sorted({"encoder" if kind == "encoder" else "decoder" for kind in kinds or KINDS})
    for name, chosen in (("layer", layers), ("head", heads)):
        counts = {stack: _field(config, *_COUNT_FIELDS[name, stack]) for stack in stacks}
        if chosen is None or None in counts.values():
            continue
        stack, count = min(counts.items(), key=lambda item: item[1])
        _check_indices(chosen, count, name, f"; the {stack} has {count}" if len(set(counts.values())) > 1 else "")
    d_model = _field(config, "d_model", "hidden_size")
    return (
        None if layers is None else list(dict.fromkeys(layers)),
        None if heads is None else list(dict.fromkeys(heads)),
        None if dimensions is None else list(dict.fromkeys(dimensions)) if d_model is None
        else check_dimensions(dimensions, d_model),
    )


_COUNT_FIELDS = {
    ("layer", "encoder"): ("encoder_layers", "num_layers"),  # BART family's names, then T5's
    ("layer", "decoder"): ("decoder_layers", "num_decoder_layers"),
    ("head", "encoder"): ("encoder_attention_heads", "num_heads"),
    ("head", "decoder"): ("decoder_attention_heads", "num_heads"),
}


def _field(config, *names):
    """The first of the config fields `names` it has, or None."""
    return next((value for name in names if isinstance(value := getattr(config, name, None), int)), None)


def _save(figure: Figure, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # one per missing glyph; `label_font_families` says it once
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        figure.savefig(path, dpi=110)
    return path
