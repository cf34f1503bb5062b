#!/usr/bin/env python
"""Draw a model's attention on one sentence and its position encodings, as PNG files.

    python scripts/plot_attention.py runs/de-en "Ein Hund läuft über die Wiese."
    python scripts/plot_attention.py runs/de-en "Ein Hund läuft." --layers 1 6 --heads 1 2 3 4 -o plots/
    python scripts/plot_attention.py runs/de-en "Ein Hund läuft." --target "A dog runs."

Writes to --output_dir: encoder_self_attention.png, decoder_self_attention.png, cross_attention.png (a heatmap per
chosen layer and head; rows attend, columns are attended to) and, for this package's models, positional_encoding.png.
The target is the model's own beam-search translation unless --target gives one. Layers and heads are numbered from 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FILES = {
    "encoder": "encoder_self_attention.png",
    "decoder": "decoder_self_attention.png",
    "cross": "cross_attention.png",
}

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".pdf", ".svg"}
MAX_PLOTTED_POSITIONS = 10_000


def parse_arguments(argv: list[str] | None = None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    from hf_vanilla_transformer.errors import command_parser, file_above

    parser = command_parser(__doc__)
    parser.add_argument("model", metavar="MODEL", help="a saved model directory or a Hub repo id")
    parser.add_argument("sentence", metavar="SENTENCE", help="the source sentence")
    parser.add_argument("--target", help="a translation to draw instead of the model's own")
    parser.add_argument("-o", "--output_dir", default="attention_plots", help="where to write the PNGs")
    parser.add_argument("--layers", type=int, nargs="+", metavar="N", help="layers to draw, from 1 (default: all)")
    parser.add_argument("--heads", type=int, nargs="+", metavar="N", help="heads to draw, from 1 (default: all)")
    parser.add_argument("--kinds", nargs="+", choices=sorted(FILES), default=["encoder", "decoder", "cross"],
                        help="which attentions to draw (default: all three)")
    parser.add_argument("--max_positions", type=int, default=100,
                        help="positions in the position-encoding plot (default: 100)")
    parser.add_argument("--dimensions", type=int, nargs="+", metavar="D",
                        help="encoding dimensions to draw as curves (default: four at 0, 1/8, 1/4 and 3/8 of d_model, "
                             "whose wavelengths grow from 2 pi to about 200 positions)")
    parser.add_argument("--revision", default=None, help="branch, tag or commit of a Hub model")
    args = parser.parse_args(argv)
    from hf_vanilla_transformer.pipeline_translation import normalize_text

    for name, text in (("The sentence", args.sentence), ("--target", args.target)):
        try:
            (text or "").encode("utf-8")
        except UnicodeEncodeError:  # bytes the terminal's encoding did not decode, kept as surrogates by Python
            parser.error(f"{name} is not UTF-8 text: write it in UTF-8 (or set the terminal's locale to UTF-8).")
    if not normalize_text(args.sentence):  # as the pipeline reads it: blank, or invisible characters only
        parser.error("The sentence is empty.")
    if args.target is not None and not args.target.strip():
        parser.error("--target is empty: give a translation to draw, or leave --target out to draw the model's own.")
    if args.max_positions < 2:
        parser.error(f"--max_positions must be at least 2 (a curve needs two positions), got {args.max_positions}.")
    if args.max_positions > MAX_PLOTTED_POSITIONS:
        parser.error(f"--max_positions must be at most {MAX_PLOTTED_POSITIONS:,} (a plot shows no more; the encodings "
                     f"of longer inputs are computed alike), got {args.max_positions:,}.")
    args.kinds = list(dict.fromkeys(args.kinds))  # each drawn once
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        parser.error(f"-o {args.output_dir} is a file: give a folder for the PNGs (made if missing).")
    if file := file_above(output_dir):
        parser.error(f"-o {args.output_dir} lies in {file}, which is a file: give a folder for the PNGs (made if "
                     "missing).")  # before the model is loaded and translates
    if not output_dir.exists() and output_dir.suffix.lower() in IMAGE_SUFFIXES:
        parser.error(f"-o {args.output_dir} looks like a file name, but -o names the folder the {len(args.kinds) + 1} "
                     f"PNGs are written into: e.g. -o {output_dir.with_suffix('')}.")
    return args, parser


def main(argv: list[str] | None = None) -> list[Path]:
    args, _ = parse_arguments(argv)
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    import hf_vanilla_transformer  # noqa: F401  (registers the model)
    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.hub import loading_from, model_location
    from hf_vanilla_transformer.tokenization import check_tokenizer_fits_model, load_tokenizer
    from hf_vanilla_transformer.visualization import (
        check_choices,
        compute_attention,
        plot_attention,
        plot_positional_encoding,
    )

    location = model_location(args.model, args.revision)
    with loading_from(args.model):
        config = AutoConfig.from_pretrained(location, revision=args.revision)
    try:  # against the config, before the model is loaded and translates, and before any file is written
        layers, heads, dimensions = check_choices(
            config, args.kinds, layers=args.layers, heads=args.heads, dimensions=args.dimensions
        )
    except ValueError as error:
        raise InputError(str(error)) from error
    with loading_from(args.model):
        tokenizer = load_tokenizer(location, revision=args.revision)
        check_tokenizer_fits_model(tokenizer, config.vocab_size, args.model)  # before the model loads
        model = AutoModelForSeq2SeqLM.from_pretrained(location, revision=args.revision, attn_implementation="eager")

    maps = compute_attention(model, tokenizer, args.sentence, target=args.target)
    print(f"source: {' '.join(maps.source_tokens)}")
    print(f"target: {' '.join(maps.target_tokens)}")
    output_dir = Path(args.output_dir)
    written = []
    try:
        for kind in args.kinds:
            written.append(plot_attention(maps, kind, output_dir / FILES[kind], layers=layers, heads=heads))
        if model.config.model_type == "vanilla_transformer":  # Marian lays its sines and cosines out otherwise
            written.append(plot_positional_encoding(
                model.config.d_model, output_dir / "positional_encoding.png",
                max_positions=args.max_positions, dimensions=dimensions,
            ))
        else:
            print(f"positional_encoding.png not drawn: it shows this package's encodings, not a "
                  f"{model.config.model_type} model's")
    except OSError as error:  # a folder that cannot be made or written
        raise InputError(f"Cannot write the plots into {args.output_dir}: {error.strerror or error}.") from error
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    try:
        from hf_vanilla_transformer.errors import run_command
    except KeyboardInterrupt:  # Ctrl-C while transformers loads: one line as well, not a traceback
        print("\nplot_attention.py: interrupted.", file=sys.stderr)
        sys.exit(130)
    run_command(main)
