#!/usr/bin/env python
"""Push a saved translation model (a training run's --output_dir) to the Hugging Face Hub.

    python scripts/push_to_hub.py runs/de-en your-name/transformer-de-en
    python scripts/push_to_hub.py runs/de-en your-org/transformer-de-en --private --revision v1

Uploads the model, tokenizer, generation config, the model's code (for trust_remote_code=True), the translation
pipeline, the model card (README.md, rendered again with the repository's id) and the run's results and plots,
leaving out checkpoints and the training state (optimizer, scheduler, RNG state, trainer_state.json,
training_args.bin). DIR may be a checkpoint-* folder: its card then says so, with its own scores. DIR itself is
left as it is; where it lacks the model's code or config.json's auto_map (saved by an older version or another
tool), the push adds this package's. DIR must hold this package's model (model_type vanilla_transformer; convert a
MarianMTModel with hf_vanilla_transformer.from_marian first). The repository (or branch) then holds what DIR has:
the files of an earlier push that DIR does not have are deleted in the same commit, and named. A repository holding
another kind of model (another model_type in its config.json) is refused unless --overwrite is given. --private
makes an existing public repository private. The token is HF_TOKEN or the one `hf auth login` saved, unless
--token is given; HF_ENDPOINT selects another Hub.
"""

from __future__ import annotations

import argparse
import sys


def parse_arguments(argv: list[str] | None = None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    from hf_vanilla_transformer.errors import command_parser

    parser = command_parser(__doc__)
    parser.add_argument("model_dir", metavar="DIR", help="the saved model directory")
    parser.add_argument("repo_id", metavar="REPO_ID", help="the Hub repository, namespace/name (created if needed)")
    parser.add_argument("--private", action="store_true", default=None,
                        help="make the repository private (created so, or an existing public one made private)")
    parser.add_argument("--revision", default=None, help="branch to push to, created from main if needed")
    parser.add_argument("--token", default=None, help="a Hub token (default: HF_TOKEN or `hf auth login`'s)")
    parser.add_argument("--commit_message", default="Upload translation model", help="the commit's title")
    parser.add_argument("--create_pr", action="store_true", help="open a pull request instead of committing")
    parser.add_argument("--overwrite", action="store_true",
                        help="push even into a repository that holds another kind of model, replacing it")
    card = parser.add_argument_group("model card", "fill in or correct what the card says (else: as saved)")
    card.add_argument("--source_lang", help="source language code, e.g. de")
    card.add_argument("--target_lang", help="target language code, e.g. en")
    card.add_argument("--dataset_name", help="the training data's Hub dataset id")
    card.add_argument("--license", help="the model's license (default: as saved: the license of the model a run "
                      "fine-tuned or converted, else apache-2.0)")
    args = parser.parse_args(argv)
    for flag in ("revision", "commit_message", "source_lang", "target_lang", "dataset_name", "license"):
        if getattr(args, flag) is not None and not getattr(args, flag).strip():  # "" blanked the card's language
            parser.error(f"--{flag} is empty: give a value, or leave the flag out to keep what is saved.")
    if args.create_pr and args.revision not in (None, "main"):  # huggingface_hub raises it after the card work
        parser.error(f"--create_pr opens a pull request against the default branch: leave out --revision "
                     f"{args.revision}, or push to that branch without --create_pr.")
    return args, parser


def main(argv: list[str] | None = None):
    args, _ = parse_arguments(argv)
    from hf_vanilla_transformer.errors import InputError
    from hf_vanilla_transformer.hub import (
        check_model_dir, check_push_target, check_saved_model_type, hub_error_message, left_out_of_push,
        push_model_dir,
    )

    check_model_dir(args.model_dir)  # the folder first: what is wrong with it, before whether one may push
    check_saved_model_type(args.model_dir)
    check_push_target(args.repo_id, args.token)
    card_overrides = {key: value for key in ("source_lang", "target_lang", "dataset_name", "license")
                      if (value := getattr(args, key)) is not None}
    try:
        commit = push_model_dir(
            args.model_dir,
            args.repo_id,
            token=args.token,
            private=args.private,
            revision=args.revision,
            commit_message=args.commit_message,
            create_pr=args.create_pr,
            card_overrides=card_overrides,
            overwrite=args.overwrite,
        )
    except Exception as error:
        message = hub_error_message(error, args.repo_id)
        if message is None:
            raise
        raise InputError(message) from error
    if left_out := left_out_of_push(args.model_dir):  # said once pushed: a refused push uploads nothing at all
        print(f"Not uploaded (training state, checkpoints, private _* files, and models in subfolders, each of which "
              f"is pushed on its own): {', '.join(left_out)}", file=sys.stderr)
    print(commit.pr_url or commit.commit_url)
    return commit


if __name__ == "__main__":
    try:
        from hf_vanilla_transformer.errors import run_command
    except KeyboardInterrupt:  # Ctrl-C while transformers loads: one line as well, not a traceback
        print("\npush_to_hub.py: interrupted.", file=sys.stderr)
        sys.exit(130)
    run_command(main)
