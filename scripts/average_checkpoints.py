#!/usr/bin/env python
"""Average the last N checkpoints of a training run into one loadable model (the paper: 5 for base, 20 for big).

    python scripts/average_checkpoints.py runs/wmt --last 5 --output_dir runs/wmt/averaged
"""

import functools
import json
import os
import shutil
import sys
from pathlib import Path

try:
    import hf_vanilla_transformer  # noqa: F401  (registers the model with the Auto classes)
    from hf_vanilla_transformer.checkpoint_averaging import average_checkpoints
    from hf_vanilla_transformer.errors import InputError, MissingFileError, run_command, shown_list
    from hf_vanilla_transformer.hub import averaged_card
    from hf_vanilla_transformer.model_card import CARD_INPUTS_FILE, save_model_card
    from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE, complete_checkpoints, run_checkpoints
except KeyboardInterrupt:  # Ctrl-C while torch and transformers load: one line as well, not a traceback
    print("\naverage_checkpoints.py: interrupted.", file=sys.stderr)
    sys.exit(130)


BOOKKEEPING = {"transformers_version", "_name_or_path", "architectures", "auto_map", "custom_pipelines", "dtype",
               "torch_dtype", "use_cache", "dropout", "attention_dropout", "activation_dropout"}
"""config.json fields checkpoints of one model may differ in: what saved them and how, and the training-only
dropout rates (a resumed run may change them), none of which changes what the weights compute."""


def _config(checkpoint):
    """The checkpoint's config.json as a dict; None where it is missing or damaged (the averaging names it)."""
    try:
        config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def check_one_model(checkpoints):
    """InputError unless the `checkpoints`' configs (and tokenizers, where saved) are the last one's, whose the
    averaged model gets: weights of equal shapes but another activation, normalization or tokenizer would average
    into nonsense without a word."""
    last = checkpoints[-1]
    expected = _config(last)
    for checkpoint in checkpoints[:-1]:
        config = _config(checkpoint)
        if expected is not None and config is not None:
            fields = sorted(k for k in (config.keys() | expected.keys()) - BOOKKEEPING
                            if config.get(k) != expected.get(k))
            if fields:
                shown = "; ".join(f"{k} {config.get(k)!r} vs {expected.get(k)!r}" for k in fields[:3])
                raise InputError(
                    f"{checkpoint.name} and {last.name} are checkpoints of different models: their config.json "
                    f"differ ({shown}{'; ...' if len(fields) > 3 else ''}). Average the checkpoints of one model "
                    "(a lower --last leaves the older ones out)."
                )
        if differing := _tokenizer_difference(checkpoint, last):
            raise InputError(
                f"{checkpoint.name} and {last.name} hold different tokenizers ({differing}), whose token ids mean "
                "other tokens: their weights cannot be averaged. Average the checkpoints of one model (a lower --last "
                "leaves the older ones out)."
            )


SENTENCEPIECE_MODELS = ("source.spm", "target.spm", "spiece.model", "sentencepiece.bpe.model")
"""The sentencepiece models a tokenizer saved without tokenizer.json reads (a MarianTokenizer's source.spm and
target.spm, as runs started from an opus-mt model save it): they split the text into the vocabulary's tokens."""


def _tokenizer_difference(checkpoint: Path, last: Path) -> str | None:
    """What differs between the tokenizers saved in two checkpoints (None where they are the same, or either has
    none): their tokenizer.json where both have one; else (a MarianTokenizer, as runs started from an opus-mt model
    save it) their vocabularies (`get_vocab()`) and the sentencepiece models either has."""
    fast = [(folder / "tokenizer.json").is_file() for folder in (checkpoint, last)]
    if all(fast):
        read = _tokenizer(checkpoint / "tokenizer.json"), _tokenizer(last / "tokenizer.json")
        return None if read[0] == read[1] or None in read else "tokenizer.json"  # a damaged one: see averaging
    if not all((folder / "tokenizer_config.json").is_file() for folder in (checkpoint, last)):
        return None
    if _vocabulary(checkpoint) != _vocabulary(last):
        return "other vocabularies"
    if any(fast):  # a fast and a slow tokenizer of one vocabulary: the same token ids
        return None
    models = [name for name in SENTENCEPIECE_MODELS if _bytes(checkpoint / name) != _bytes(last / name)]
    return ", ".join(models) or None


def _tokenizer(path: Path) -> dict | None:
    """A tokenizer.json without the truncation and padding it was last called with, which a save records too (a
    resumed run with another --max_source_length), though the tokens and their ids are the same; None for a damaged
    one (the last checkpoint's is loaded by the averaging, which says what is wrong with it; another's is not used)."""
    try:
        return {key: value for key, value in json.loads(path.read_text(encoding="utf-8")).items()
                if key not in ("truncation", "padding")}
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):  # AttributeError: JSON but no object
        return None


@functools.cache
def _vocabulary(checkpoint: Path) -> dict | bytes | None:
    """The checkpoint's tokenizer's `get_vocab()` (token -> id); the bytes of its vocab.json where the tokenizer does
    not load (the averaging says what is wrong with the last one's)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(checkpoint).get_vocab()
    except (OSError, ValueError, TypeError, ImportError):
        return _bytes(checkpoint / "vocab.json")


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def checkpoint_holding(folder: str) -> Path | None:
    """The training checkpoint (a checkpoint-<step> folder with a run's state or completion mark, of any run) that
    `folder` is or lies in; None where there is none."""
    for path in (Path(folder), *Path(folder).parents):
        name = path.name
        if name.startswith("checkpoint-") and name[len("checkpoint-"):].isdigit() and any(
                (path / state).is_file() for state in ("trainer_state.json", CHECKPOINT_COMPLETE)):
            return path
    return None


def main(argv=None):
    from hf_vanilla_transformer.errors import command_parser

    parser = command_parser(__doc__)
    parser.add_argument("run_dir", help="the training run's --output_dir, holding checkpoint-<step> folders")
    parser.add_argument("--last", type=int, default=5,
                        help="how many of the latest complete checkpoints to average (default: 5)")
    parser.add_argument("--output_dir", required=True, help="where to save the averaged model (a new or empty folder)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the model and its card in a non-empty --output_dir, and remove its "
                             "*_results.json and generated_predictions.txt, which describe the model replaced")
    args = parser.parse_args(argv)
    if args.last < 1:
        parser.error("--last must be at least 1.")
    if not os.path.isdir(args.run_dir):
        raise MissingFileError(f"No run folder at {args.run_dir}: give a training run's --output_dir.")
    checkpoints = run_checkpoints(args.run_dir)
    run_dir = os.path.normpath(args.run_dir)
    if not checkpoints and os.path.basename(run_dir).startswith("checkpoint-"):
        raise InputError(f"{args.run_dir} is a checkpoint, not a run: give the run's folder, {os.path.dirname(run_dir)}.")
    complete = complete_checkpoints(args.run_dir)  # those the run marked as written whole
    if not complete:  # a run of an older version, which marked none
        complete = checkpoints
    elif incomplete := [c.name for c in checkpoints if c not in complete]:  # skipped, as resuming skips them
        print(f"Skipping incomplete checkpoints (the run was stopped while saving): {', '.join(incomplete)}",
              file=sys.stderr)
    if not complete:  # not "lower --last": there is nothing to average at all
        raise InputError(
            f"{args.run_dir} has no checkpoints (checkpoint-<step> folders): it is not a training run's folder. Give "
            "the --output_dir of a run that saved checkpoints (see --save_steps and --save_total_limit)."
        )
    if len(complete) < args.last:
        raise InputError(
            f"{args.run_dir} has {len(complete)} checkpoint{'s' * (len(complete) != 1)}, fewer than --last "
            f"{args.last}: lower --last or keep more with --save_total_limit when training."
        )
    chosen = complete[-args.last :]
    check_one_model(chosen)
    output = os.path.realpath(args.output_dir)
    if os.path.exists(output) and not os.path.isdir(output):
        parser.error(f"--output_dir {args.output_dir} is a file: give a folder for the averaged model.")
    if output in (os.path.realpath(folder) for folder in [args.run_dir, *checkpoints]):
        parser.error(
            f"--output_dir {args.output_dir} would overwrite the model of the run or of a checkpoint; give a new "
            f"folder, e.g. {os.path.join(args.run_dir, 'averaged')}."
        )
    if os.path.dirname(output) == os.path.realpath(run_dir) and os.path.basename(output).startswith("checkpoint-"):
        parser.error(
            f"--output_dir {args.output_dir} is named as a checkpoint of the run, which later averaging, resuming and "
            f"the Trainer's checkpoint rotation would take for one: give another name, e.g. "
            f"{os.path.join(args.run_dir, 'averaged')}."
        )
    if (checkpoint := checkpoint_holding(output)) is not None:
        where = "is" if str(checkpoint) == output else f"lies in {checkpoint},"
        parser.error(
            f"--output_dir {args.output_dir} {where} a training run's checkpoint: resuming that run "
            "would start from the average, and the Trainer's checkpoint rotation deletes the folder. Give a folder "
            f"outside checkpoints, e.g. {os.path.join(args.run_dir, 'averaged')}."
        )
    entries = sorted(os.listdir(output)) if os.path.isdir(output) else []
    # what describes the model there (its card, scores, translations) is stale once another model is saved there
    stale = [n for n in entries if n in ("README.md", CARD_INPUTS_FILE, "generated_predictions.txt")
             or n.endswith("_results.json")]  # the card inputs too: a push renders the card again from them
    card = [name for name in stale if name in ("README.md", CARD_INPUTS_FILE)]  # written anew for the average
    removed = [name for name in stale if name not in card]
    if entries and not args.overwrite:
        shown = shown_list(entries, 4)
        also = f", and remove {', '.join(removed)}, which describe the model there now" if removed else ""
        raise InputError(
            f"--output_dir {args.output_dir} is not empty ({shown}), so it is not overwritten: give a new or empty "
            f"folder, or pass --overwrite to replace the model there{' and its card' if card else ''}{also}."
        )
    made = not os.path.isdir(output)
    try:
        os.makedirs(output, exist_ok=True)  # before the averaging, which can take minutes
    except OSError as error:
        raise InputError(f"Cannot write the averaged model to {args.output_dir}: {error.strerror or error}.") from error
    try:
        average_checkpoints(chosen, args.output_dir)
    except BaseException:  # a damaged checkpoint, Ctrl-C: no folder left behind that looks like a model's
        if made:
            shutil.rmtree(output, ignore_errors=True)
        raise
    for name in stale:
        Path(output, name).unlink()
    if removed:
        print(f"Removed {', '.join(removed)} from {args.output_dir}: they described the model replaced.",
              file=sys.stderr)
    # a card of its own: the run's data, languages and recipe (which the direction warnings of a later scoring run
    # read), the checkpoints averaged, and no scores yet
    save_model_card(args.output_dir, **averaged_card(Path(args.run_dir), chosen))  # as given: the card's snippets
    # name the folder as the user does (the resolved path showed the user's folders); a push names the repository
    print(f"Averaged {', '.join(c.name for c in chosen)} into {args.output_dir}")


if __name__ == "__main__":
    run_command(main)
