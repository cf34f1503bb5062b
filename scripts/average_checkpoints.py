#!/usr/bin/env python
"""Average the last N checkpoints of a training run into one loadable model (the paper: 5 for base, 20 for big).

    python scripts/average_checkpoints.py runs/wmt --last 5 --output_dir runs/wmt/averaged
"""

import argparse
import os
import sys

try:
    import hf_vanilla_transformer  # noqa: F401  (registers the model with the Auto classes)
    from hf_vanilla_transformer.checkpoint_averaging import average_checkpoints, run_checkpoints
    from hf_vanilla_transformer.errors import InputError, MissingFileError, run_command
except KeyboardInterrupt:  # Ctrl-C while torch and transformers load: one line as well, not a traceback
    print("\naverage_checkpoints.py: interrupted.", file=sys.stderr)
    sys.exit(130)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="the training run's --output_dir, holding checkpoint-<step> folders")
    parser.add_argument("--last", type=int, default=5, help="how many of the latest checkpoints to average")
    parser.add_argument("--output_dir", required=True, help="where to save the averaged model")
    args = parser.parse_args(argv)
    if args.last < 1:
        parser.error("--last must be at least 1.")
    if not os.path.isdir(args.run_dir):
        raise MissingFileError(f"No run folder at {args.run_dir}: give a training run's --output_dir.")
    checkpoints = run_checkpoints(args.run_dir)
    run_dir = os.path.normpath(args.run_dir)
    if not checkpoints and os.path.basename(run_dir).startswith("checkpoint-"):
        raise InputError(f"{args.run_dir} is a checkpoint, not a run: give the run's folder, {os.path.dirname(run_dir)}.")
    if len(checkpoints) < args.last:
        raise InputError(
            f"{args.run_dir} has {len(checkpoints)} checkpoints, fewer than --last {args.last}: lower --last or keep "
            "more with --save_total_limit when training."
        )
    chosen = checkpoints[-args.last :]
    output = os.path.realpath(args.output_dir)
    if os.path.exists(output) and not os.path.isdir(output):
        parser.error(f"--output_dir {args.output_dir} is a file: give a folder for the averaged model.")
    if output in (os.path.realpath(folder) for folder in [args.run_dir, *checkpoints]):
        parser.error(
            f"--output_dir {args.output_dir} would overwrite the model of the run or of a checkpoint; give a new "
            f"folder, e.g. {os.path.join(args.run_dir, 'averaged')}."
        )
    average_checkpoints(chosen, args.output_dir)
    print(f"Averaged {', '.join(c.name for c in chosen)} into {args.output_dir}")


if __name__ == "__main__":
    run_command(main)
