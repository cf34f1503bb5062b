#!/usr/bin/env python
"""Export a saved model to CTranslate2, a fast C++ inference engine (CPU and GPU, int8 quantization).

    python scripts/export_ctranslate2.py runs/de-en runs/de-en-ct2
    python scripts/export_ctranslate2.py runs/de-en runs/de-en-ct2-int8 --quantization int8

The output directory holds model.bin, config.json, the shared vocabulary (the model's tokenizer tokens),
generation.json (beam size, length penalty) and the tokenizer, which reads "</s>" typed in a sentence as text, as
the translation pipeline does (split_special_tokens in its tokenizer_config.json). Translate with it:

    import ctranslate2, transformers
    from hf_vanilla_transformer.export import ctranslate2_options
    tokenizer = transformers.AutoTokenizer.from_pretrained("runs/de-en-ct2/tokenizer")
    translator = ctranslate2.Translator("runs/de-en-ct2")
    source = tokenizer.convert_ids_to_tokens(tokenizer("Ein Hund läuft.").input_ids)
    result = translator.translate_batch([source], **ctranslate2_options(max_new_tokens=60))
    print(tokenizer.decode(tokenizer.convert_tokens_to_ids(result[0].hypotheses[0]), skip_special_tokens=True))

With `ctranslate2_options` (beam 4, length penalty 0.6, end token counted in the length, end token allowed at
the first step) the fp32 translations equal `model.generate()`'s.

A MarianMTModel's folder (an opus-mt model) is converted with `hf_vanilla_transformer.from_marian` first and exported
with its own tokenizer (MarianTokenizer). Its generation config never generates <pad> (bad_words_ids): give
translate_batch `suppress_sequences=[["<pad>"]]` too, or translate with `CTranslate2Translator` (of
hf_vanilla_transformer.export), which reads generation.json and warns about what CTranslate2 cannot follow (Marian's
forced_eos_token_id and early_stopping=False).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.append(str(REPO))

QUANTIZATIONS = ["int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"]
MAX_POSITIONS = 100_000


def parse_arguments(argv=None):
    from hf_vanilla_transformer.errors import command_parser, file_above

    parser = command_parser(__doc__)
    parser.add_argument("model", help="a directory written by save_pretrained (with its tokenizer), or a Hub repo id: "
                                      "this package's model, or a MarianMTModel, which is converted")
    parser.add_argument("output_dir", help="where to write the CTranslate2 model")
    parser.add_argument("--quantization", choices=QUANTIZATIONS, default=None,
                        help="weight type (default: float32 weights; a model can also be quantized when loaded)")
    parser.add_argument("--max_positions", type=int, default=None,
                        help="position encodings to store: the longest source or translation CTranslate2 accepts "
                             "(default: the config's max_position_embeddings)")
    parser.add_argument("--revision", default=None,
                        help="branch, tag or commit of a Hub model (as translate.py takes it; default: main)")
    parser.add_argument("--no_overwrite", action="store_true",
                        help="fail if output_dir holds anything, an earlier export too (a missing or empty folder "
                             "is written to; by default an earlier export there is replaced; a folder holding "
                             "anything else is never overwritten)")
    args = parser.parse_args(argv)
    if args.max_positions is not None and args.max_positions < 1:
        parser.error("--max_positions must be at least 1.")
    if args.max_positions is not None and args.max_positions > MAX_POSITIONS:
        parser.error(f"--max_positions must be at most {MAX_POSITIONS:,} (a table of encodings that long takes "
                     f"gigabytes, for sentences no model translates), got {args.max_positions:,}.")
    output_dir = Path(args.output_dir)  # checked before the model loads: a traceback once it had
    if file := file_above(output_dir):
        parser.error(f"{args.output_dir} lies in {file}, which is a file: give a folder for the export.")
    return args


HUB_FILES = ["*.json", "*.safetensors", "pytorch_model*.bin", "*.spm", "*.model", "*.txt"]
"""What the export reads of a Hub repository: configs, PyTorch weights, tokenizer files. Not an opus-mt
repository's TensorFlow, Flax and Rust weights, which would triple the download."""


def main(argv=None) -> Path:
    args = parse_arguments(argv)
    from hf_vanilla_transformer.errors import InputError, first_line
    from hf_vanilla_transformer.export import CTRANSLATE2_MISSING, ExportTargetExists, export_ctranslate2
    from hf_vanilla_transformer.hub import check_model_dir, loading_from, model_location

    try:
        import ctranslate2  # noqa: F401
    except ImportError as error:
        raise InputError(CTRANSLATE2_MISSING) from error
    model = model_location(args.model, args.revision)  # a --revision of a folder here: refused
    if Path(model).is_dir():
        check_model_dir(model)
    else:  # a Hub repo id: download it first
        from huggingface_hub import snapshot_download

        with loading_from(args.model):  # one sentence for not found, offline (OSErrors) or not an id (ValueError)
            model = snapshot_download(model, revision=args.revision, allow_patterns=HUB_FILES)
    try:
        out_dir = export_ctranslate2(
            model,
            args.output_dir,
            quantization=args.quantization,
            max_positions=args.max_positions,
            force=not args.no_overwrite,
        )
    except ExportTargetExists as error:
        raise InputError(
            f"{args.output_dir} exists and --no_overwrite is given: give a new folder, or leave the flag out."
        ) from error
    except FileExistsError as error:
        raise InputError(str(error)) from error
    except OSError as error:  # a folder that cannot be made or written (a read-only place), or a damaged model
        out, where = Path(args.output_dir).resolve(), Path(error.filename or "").resolve()
        if not error.filename or not (where == out or where in out.parents or out in where.parents):
            raise InputError(f"Cannot load the model from {args.model}: {first_line(error)}") from error
        raise InputError(f"Cannot write the export into {args.output_dir}: {error.strerror or error}.") from error
    print(f"wrote {out_dir} ({args.quantization or 'float32'} weights)")
    return out_dir


if __name__ == "__main__":
    try:
        from hf_vanilla_transformer.errors import run_command
    except KeyboardInterrupt:  # Ctrl-C while transformers loads: one line as well, not a traceback
        print("\nexport_ctranslate2.py: interrupted.", file=sys.stderr)
        sys.exit(130)
    run_command(main)
