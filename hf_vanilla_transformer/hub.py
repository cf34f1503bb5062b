"""Push a saved translation model folder to the Hugging Face Hub, and tell a local model folder from a Hub id.

The token comes from huggingface_hub's usual places unless given: `HF_TOKEN`, then the token `hf auth login`
stored. `HF_ENDPOINT` points everything at another Hub-compatible server.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from huggingface_hub import CommitInfo, HfApi, constants
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .errors import USER_ERRORS, InputError, MissingFileError, first_line
from .model_card import CARD_INPUTS_FILE, RECIPE_FIELDS, read_json, update_model_card
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration, VanillaTransformerModel
from .pipeline_translation import save_translation_pipeline, write_config_json

logger = logging.getLogger(__name__)

# The Trainer's state for resuming a run, in a checkpoint and (the last two) in a run's folder: pickles most of them,
# the optimizer's twice the model's size; and this package's complete-checkpoint mark (checkpoints.CHECKPOINT_COMPLETE).
TRAINING_STATE_FILES = ["optimizer.pt", "optimizer.bin", "scheduler.pt", "scaler.pt", "rng_state*.pth",
                        "checkpoint_complete.json", "trainer_state.json", "training_args.bin"]
# Never pushed: that state (at any depth: "*" matches "/" too), checkpoints and private files ("_*"; the last two as
# the Trainer's push_to_hub). Nor a model of its own in a subfolder (`nested_model_patterns`).
UPLOAD_IGNORE_PATTERNS = ["_*", "checkpoint-*", "*/checkpoint-*", *TRAINING_STATE_FILES,
                          *(f"*/{pattern}" for pattern in TRAINING_STATE_FILES)]
# Linked, not copied, into a push's staging folder: nothing rewrites them.
WEIGHT_PATTERNS = ["*.safetensors", "*.bin"]
# The classes a saved model's config.json names under `auto_map` for trust_remote_code=True, as save_pretrained
# writes them (`register_for_auto_class`).
AUTO_MAP_CLASSES = {"AutoConfig": VanillaTransformerConfig, "AutoModel": VanillaTransformerModel,
                    "AutoModelForSeq2SeqLM": VanillaTransformerForConditionalGeneration}


def push_model_dir(
    model_dir: str | os.PathLike,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str = "Upload translation model",
    create_pr: bool = False,
    card_overrides: dict | None = None,
    overwrite: bool = False,
) -> CommitInfo:
    """Upload a model folder (model, tokenizer, generation config, code named by `auto_map`, card, the run's results
    and plots) to `repo_id`, without the training state and checkpoints (`left_out_of_push` names them). The
    repository (the branch `revision`, or the pull request's) then holds what the push uploads: its other files,
    an earlier push's weights or tokenizer files for instance, are deleted in the same commit and logged, all but
    `.gitattributes`. A folder holding another kind of model than this package's is refused (InputError,
    `check_saved_model_type`), and so is a repository holding one, unless `overwrite`.

    The folder may be a Trainer checkpoint: then a card it lacks takes the run's card inputs (`checkpoint_card`).
    The folder is left as it is: the translation pipeline (`save_translation_pipeline`) and the model card rendered
    again with the repository's id and branch (`update_model_card`, with `card_overrides`; an existing README.md
    without saved card inputs is kept) go into a staging copy (`stage_upload`), with the model's code and
    `auto_map` where the folder lacks them or holds another version's code (`add_model_code`). Creates the
    repository if needed (`private=None` keeps the Hub's default or the existing visibility; `private=True` makes an
    existing public repository private, with a warning) and the branch `revision` if it does not exist. Returns the
    commit's info. What a user can fix (no network, a token the Hub refuses, a name it does not take) is an
    InputError of one line (`hub_error_message`), not huggingface_hub's traceback.
    """
    try:
        return _push_model_dir(model_dir, repo_id, token=token, private=private, revision=revision,
                               commit_message=commit_message, create_pr=create_pr, card_overrides=card_overrides,
                               overwrite=overwrite)
    except InputError:
        raise
    except Exception as error:
        if (message := hub_error_message(error, repo_id)) is None:
            raise
        raise InputError(message) from error


def _push_model_dir(model_dir, repo_id, *, token, private, revision, commit_message, create_pr, card_overrides,
                    overwrite) -> CommitInfo:
    """`push_model_dir`'s work."""
    model_dir = Path(model_dir)
    check_model_dir(model_dir)
    check_saved_model_type(model_dir)
    card_inputs = {**checkpoint_card(model_dir), **(card_overrides or {})}
    for name in (CARD_INPUTS_FILE, "all_results.json", "generation_config.json"):  # what the card is made of: a
        read_json(model_dir / name, optional=True)  # damaged one is an error before the repository is made
    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    if private and not api.repo_info(repo_id).private:  # create_repo leaves an existing repository as it is
        api.update_repo_settings(repo_id, private=True)
        logger.warning("%s was public: made it private, as asked, before uploading.", repo_id)
    base = "main" if create_pr or revision is None else revision  # what the commit replaces, as upload_folder reads it
    new_branch = False
    try:
        in_repo = api.list_repo_files(repo_id, revision=base)
    except RevisionNotFoundError as error:  # a new branch, made from main below
        if revision.startswith("refs/pr/"):
            raise InputError(f"{repo_id} has no pull request {revision}: give an open one's ref, or --create_pr to "
                             "open a new one.") from error
        base, in_repo, new_branch = "main", api.list_repo_files(repo_id), True
    if not overwrite:
        check_model_type(api, repo_id, base, in_repo)
    if revision is not None and revision != "main" and not revision.startswith("refs/pr/"):  # a pull request's
        api.create_branch(repo_id, branch=revision, exist_ok=True)  # ref is pushed to as it is, not made a branch
    try:
        commit, uploaded = _upload(api, model_dir, repo_id, card_inputs, revision, commit_message, create_pr)
    except BaseException:
        if new_branch:  # made from main for this push: left, it served main's model under the branch's name
            with contextlib.suppress(Exception):
                api.delete_branch(repo_id, branch=revision)
        raise
    if deleted := sorted(set(in_repo) - set(uploaded) - {".gitattributes"}):
        where = "the pull request" if create_pr else f"branch {revision or 'main'}"
        logger.warning("Deleted from %s (%s), as %s does not have them: %s", repo_id, where, model_dir,
                       ", ".join(deleted))
    return commit


def _upload(api, model_dir: Path, repo_id: str, card_inputs: dict, revision: str | None, commit_message: str,
            create_pr: bool) -> tuple[CommitInfo, list[str]]:
    """Stage `model_dir` as `push_model_dir` pushes it and upload it as one commit: the commit, and the files."""
    with tempfile.TemporaryDirectory(prefix="push_") as staging:
        stage_upload(model_dir, Path(staging))
        added, replaced = add_model_code(Path(staging))
        if added:
            logger.warning("%s lacks the model's code for trust_remote_code=True loading: pushed with this package's "
                           "(%s).", model_dir, ", ".join(added))
        if replaced:
            logger.warning("%s holds the model's code of another version than this package's, which loads it here: "
                           "pushed with this package's instead (%s).", model_dir, ", ".join(replaced))
        save_translation_pipeline(staging)
        # the card's code loads the branch pushed to (a pull request's goes to main once merged)
        update_model_card(staging, **{**card_inputs, "repo_id": repo_id, "revision": None if create_pr else revision})
        uploaded = _files(Path(staging))
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=staging,
            revision=revision,
            commit_message=commit_message,
            create_pr=create_pr,
            delete_patterns="*",  # all the repository's files that this push does not upload, but .gitattributes
        )
    return commit, uploaded


def stage_upload(model_dir: Path, staging: Path) -> None:
    """Put in `staging` what a push uploads from `model_dir` (all but `UPLOAD_IGNORE_PATTERNS` and git's and
    huggingface_hub's own folders): the weights as links, the rest as copies, which the push may rewrite (config.json,
    the card) with `model_dir` left as it is, even where its files are links, as in a Hub cache snapshot."""
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    ignored = push_ignore_patterns(model_dir) + DEFAULT_IGNORE_PATTERNS
    names = list(filter_repo_objects(_files(model_dir), ignore_patterns=ignored))
    weights = set(filter_repo_objects(names, allow_patterns=WEIGHT_PATTERNS))
    for name in names:
        source, target = (model_dir / name).resolve(), staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in weights:
            try:
                target.symlink_to(source)
                continue
            except OSError:  # no links here (Windows without developer mode): a copy
                pass
        shutil.copyfile(source, target)


def add_model_code(folder: Path) -> tuple[list[str], list[str]]:
    """Give a saved model `folder` this package's code for `trust_remote_code=True` loading: its configuration and
    modeling modules and the modules they import relatively (`get_relative_import_files`, as `save_pretrained` copies
    them), where the folder lacks them (a model saved by another tool) or holds other copies (saved by another
    version), so that the Hub's users run the code that loads the model here; another version's may not run under the
    installed transformers (5.24 renamed the cache that generate() passes, and code saved before it translated
    without it). Also the `auto_map` entries of config.json it lacks (`AUTO_MAP_CLASSES`). Returns what was added
    (file names, and "auto_map: ..." with the entries) and the names of the files replaced."""
    from transformers.dynamic_module_utils import get_relative_import_files

    entry_points = [Path(inspect.getfile(cls)) for cls in AUTO_MAP_CLASSES.values()]
    imported = {Path(file) for module in entry_points for file in get_relative_import_files(module)}
    sources = [*entry_points, *sorted(imported)]
    added, replaced = [], []
    for source in dict.fromkeys(sources):  # in order, once each
        target = folder / source.name
        if not target.exists():
            added.append(source.name)
        elif target.read_bytes() != source.read_bytes():
            replaced.append(source.name)
        else:
            continue
        shutil.copyfile(source, target)
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    auto_map = config.get("auto_map") or {}
    missing = {auto: f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}" for auto, cls in AUTO_MAP_CLASSES.items()
               if auto not in auto_map}
    if missing:
        config["auto_map"] = {**auto_map, **missing}
        write_config_json(config_file, config)
        added.append(f"auto_map: {', '.join(missing)}")
    return added, replaced


def check_saved_model_type(model_dir: str | os.PathLike) -> None:
    """InputError unless the model saved in `model_dir` is this package's (its config.json's `model_type`): a push
    gives it this package's card, code and pipeline. A MarianMTModel's message says how to convert it."""
    config_file = Path(model_dir) / "config.json"
    config = read_json(config_file)
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type == VanillaTransformerConfig.model_type:
        return
    what = f"a {model_type!r} model" if model_type else "a model of no model_type"
    if model_type == "marian":
        how = (f"convert it first, with its tokenizer: `model = hf_vanilla_transformer.from_marian(MarianMTModel."
               f"from_pretrained({str(model_dir)!r}))`, `model.save_pretrained(NEW_DIR)`, `AutoTokenizer."
               f"from_pretrained({str(model_dir)!r}).save_pretrained(NEW_DIR)`, and push NEW_DIR.")
    else:
        how = "push it with its own library (model.push_to_hub), which writes its own card."
    raise InputError(
        f"{model_dir} holds {what} (its config.json's model_type), not this package's "
        f"{VanillaTransformerConfig.model_type!r}, whose card, code and pipeline this push would give it: {how}"
    )


def check_repo_model_type(repo_id: str, *, token: str | None = None, revision: str | None = None) -> None:
    """Before a push (the training script checks it before training): InputError if `repo_id`, at the branch
    `revision` where it exists, else at main, holds another kind of model (`check_model_type`). Nothing to check in
    a repository that does not exist yet."""
    api = HfApi(token=token)
    try:
        try:
            in_repo = api.list_repo_files(repo_id, revision=revision)
        except RevisionNotFoundError:  # a new branch, made from main
            revision, in_repo = None, api.list_repo_files(repo_id)
    except RepositoryNotFoundError:
        return
    check_model_type(api, repo_id, revision or "main", in_repo)


def check_model_type(api: HfApi, repo_id: str, revision: str, in_repo: list[str]) -> None:
    """InputError if `repo_id` at `revision` (whose files are `in_repo`) holds a model of another type than this
    package's, by its config.json's `model_type`: a push would replace it."""
    if "config.json" not in in_repo:
        return
    # into a cache of its own: in the user's Hub cache, the download moved the repository's `main` to a snapshot of
    # config.json alone, and the model cached before could no longer be loaded offline
    with tempfile.TemporaryDirectory(prefix="push_check_") as cache:
        path = Path(api.hf_hub_download(repo_id, "config.json", revision=revision, cache_dir=cache))
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:  # not JSON, or not UTF-8
            config = None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != VanillaTransformerConfig.model_type:
        raise InputError(
            f"{repo_id} holds another kind of model (model_type {model_type!r} in its config.json, not "
            f"{VanillaTransformerConfig.model_type!r}), which this push would replace, files and all: push to another "
            "repository, or give scripts/push_to_hub.py --overwrite to replace it."
        )


def _files(folder: Path) -> list[str]:
    """The paths of the files under `folder`, relative to it, sorted."""
    return [path.relative_to(folder).as_posix() for path in sorted(folder.rglob("*")) if path.is_file()]


def push_ignore_patterns(model_dir: str | os.PathLike) -> list[str]:
    """What a push of `model_dir` leaves out: `UPLOAD_IGNORE_PATTERNS`, and its subfolders holding a model of their
    own (`nested_model_patterns`)."""
    return UPLOAD_IGNORE_PATTERNS + nested_model_patterns(model_dir)


def nested_model_patterns(model_dir: str | os.PathLike) -> list[str]:
    """Ignore patterns for the subfolders of `model_dir` that hold a model of their own (a config.json: an averaged
    model, a scoring run's or a copied checkpoint's folder, a CTranslate2 export): a push of the folder uploaded them
    whole, their training state and a card naming a local path with them. Each is pushed on its own."""
    folder = Path(model_dir)
    nested = sorted({config.parent.relative_to(folder).as_posix() for config in folder.rglob("config.json")
                     if config.parent != folder})
    return [f"{name}/*" for name in nested]


def left_out_of_push(model_dir: str | os.PathLike) -> list[str]:
    """What `push_model_dir` leaves out of `model_dir`, sorted: its top-level files and folders ("checkpoint-10/")
    that `UPLOAD_IGNORE_PATTERNS` or `nested_model_patterns` match, and a subfolder's files they match by their path
    ("best/optimizer.pt", where "best/" is not left out whole)."""
    from huggingface_hub.utils import filter_repo_objects

    files = _files(Path(model_dir))
    kept = set(filter_repo_objects(files, ignore_patterns=push_ignore_patterns(model_dir)))
    pushed_folders = {name.split("/")[0] for name in kept if "/" in name}
    # a top-level folder none of whose files is pushed is named as the folder, else its files left out are
    return sorted({f"{name.split('/')[0]}/" if "/" in name and name.split("/")[0] not in pushed_folders else name
                   for name in files if name not in kept})


def _data_sizes_of(run: dict) -> dict:
    """The data-size metrics (`train_samples`, `eval_samples`, ...) of a run's card inputs, without its scores: what
    the card of one of its checkpoints or of an average of them keeps of the run's results."""
    return {key: value for key, value in (run.get("metrics") or {}).items() if key.endswith("_samples")}


def checkpoint_card(model_dir: Path) -> dict:
    """For a Trainer checkpoint (`checkpoint-<step>` with its trainer_state.json) without a card of its own, what its
    card is rendered from: the run's card inputs (the parent folder's, once the run has finished) with this
    checkpoint's evaluation at its step in place of the run's final scores, and its step in the recipe. Without
    the run's inputs (a run not finished yet), the card says that its data and settings are not recorded
    (`run_recorded=False`) and gives the step of the run's steps. Else {}."""
    state_file = model_dir / "trainer_state.json"
    if (not re.fullmatch(r"checkpoint-\d+", model_dir.resolve().name) or not state_file.is_file()
            or (model_dir / "README.md").exists() or (model_dir / CARD_INPUTS_FILE).exists()):
        return {}
    run_inputs = model_dir.parent / CARD_INPUTS_FILE
    run, state = read_json(run_inputs) if run_inputs.is_file() else {}, read_json(state_file)
    step = state.get("global_step")
    metrics = _data_sizes_of(run)
    for entry in state.get("log_history", []):
        if entry.get("step") == step:  # the logs and evaluation of this checkpoint's model
            metrics.update((key, value) for key, value in entry.items() if key.startswith("eval_") or key == "epoch")
    if not run:
        of = f" of {state['max_steps']}" if state.get("max_steps") else ""
        return {**_recorded_data(model_dir), "metrics": metrics, "run_recorded": False, "training_args": [
            ("Checkpoint", f"step {step}{of}; the run's other settings are not recorded with it")]}
    recipe = [row for row in run.get("training_args", []) if row[0] != RECIPE_FIELDS["average_last_checkpoints"]]
    return {**run, "metrics": metrics, "training_args": [*recipe, ("Checkpoint", f"step {step} of the training run")]}


def _recorded_data(checkpoint: Path) -> dict:
    """The card inputs a checkpoint of a run not finished records (`checkpoints.checkpoint_record`): the languages
    and the training data in words, where it has them ({} for one of an older version)."""
    from .checkpoints import checkpoint_record  # which builds on this module

    run = checkpoint_record(checkpoint)["run"]
    found = {"source_lang": run.get("source_lang"), "target_lang": run.get("target_lang"),
             "dataset_description": run.get("train_data")}
    return {key: value for key, value in found.items() if isinstance(value, str) and value}


def averaged_card(run_dir: Path, checkpoints: list[Path]) -> dict:
    """What the card of a model averaged from a run's `checkpoints` (scripts/average_checkpoints.py) is rendered
    from: the run's card inputs (its data, languages, tokenizer and recipe), the averaged checkpoints in the recipe,
    and no scores, for it has not been evaluated. Without the run's inputs (a run not finished), the card says that
    its data and settings are not recorded."""
    averaged = (RECIPE_FIELDS["average_last_checkpoints"],
                f"{', '.join(checkpoint.name for checkpoint in checkpoints)} (scripts/average_checkpoints.py)")
    run_inputs = run_dir / CARD_INPUTS_FILE
    if not run_inputs.is_file():
        return {**_recorded_data(checkpoints[-1]), "metrics": {}, "run_recorded": False, "training_args": [averaged]}
    run = read_json(run_inputs)
    metrics = _data_sizes_of(run)
    recipe = [row for row in run.get("training_args", []) if row[0] != averaged[0]]
    return {**run, "metrics": metrics, "metric_signatures": None, "training_args": [*recipe, averaged]}


def check_push_account(repo_id: str, token: str | None, revision: str | None = None) -> None:
    """The Hub accepts the token, which may write, `repo_id`'s namespace is its account's or one of its
    organizations', and the repository (at `revision`) holds no other kind of model: asked before the training,
    which a refused push at the end would waste."""
    from huggingface_hub import HfApi

    try:
        account = HfApi(token=token).whoami()
    except Exception as error:  # noqa: BLE001 - the user's errors become one line, others keep their traceback
        message = hub_error_message(error, repo_id)
        if message is None:
            raise
        raise InputError(f"--push_to_hub, checked before training: {message}") from None
    name = account.get("name")
    role = (account.get("auth") or {}).get("accessToken", {}).get("role")
    if role == "read":
        raise InputError(f"--push_to_hub: the token of {name} is read-only: give a token with write access "
                         "(--hub_token, HF_TOKEN or `hf auth login`).")
    namespace = repo_id.split("/")[0] if "/" in repo_id else name
    organizations = sorted(org.get("name") for org in account.get("orgs") or [] if org.get("name"))
    if name is not None and namespace not in {name, *organizations}:
        of = f"neither it nor one of its organizations ({', '.join(organizations)})" if organizations else \
            "not it and belongs to no organization"
        raise InputError(
            f"--push_to_hub: {repo_id} is in the namespace {namespace!r}, and the token's account {name} is {of}: "
            f"give --hub_model_id {name}/{repo_id.split('/')[-1]}, or a token of {namespace}."
        )
    try:
        check_repo_model_type(repo_id if "/" in repo_id or not name else f"{name}/{repo_id}", token=token,
                              revision=revision)
    except InputError as error:
        raise InputError(f"--push_to_hub, checked before training: {error}") from None
    except Exception as error:  # noqa: BLE001 - as for whoami above
        if (message := hub_error_message(error, repo_id)) is None:
            raise
        raise InputError(f"--push_to_hub, checked before training: {message}") from None


def check_push_target(repo_id: str | None, token: str | None = None, token_flag: str = "--token") -> None:
    """What can be known about a push before any work, without the network: `repo_id` (None: named later) is one
    the Hub accepts, the Hub is not switched off (HF_HUB_OFFLINE), and there is a token (the error names the command
    line's `token_flag`). InputError otherwise."""
    from huggingface_hub import get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if repo_id is not None:
        try:
            validate_repo_id(repo_id)
        except HFValidationError as error:
            raise InputError(f"{repo_id!r} is not a Hub repository id (name or namespace/name): {error}") from None
    if constants.HF_HUB_OFFLINE:
        raise InputError("HF_HUB_OFFLINE is set, so nothing can be pushed: unset it to push, or do not ask for a push.")
    if token is None and get_token() is None:
        raise InputError(f"Pushing needs a Hub token: run `hf auth login`, set HF_TOKEN, or pass {token_flag}.")


def hub_error_message(error: Exception, repo_id: str) -> str | None:
    """One line saying why talking to the Hub about `repo_id` failed, for the errors a user can fix (network,
    token, permissions, names); None for any other exception (a bug, which keeps its traceback)."""
    from huggingface_hub import constants
    from huggingface_hub.errors import HFValidationError, HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(error, HFValidationError):
        return f"{repo_id!r} is not a Hub repository id: {error}"
    if isinstance(error, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set, so nothing can be pushed: unset it to push."
    if isinstance(error, HfHubHTTPError):
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status == 401:
            return (f"The Hub did not accept the token (401 Unauthorized) for {repo_id}: run `hf auth login`, set "
                    "HF_TOKEN, or pass a valid token.")
        if status == 403:
            return (f"The token may not write to {repo_id} (403 Forbidden): use a token with write access to its "
                    "namespace, or push to your own namespace.")
        return f"The Hub refused the push to {repo_id}: {first_line(error)}"
    if (network := network_failure(error)) is not None:
        reason = str(network) if network is error else f"{str(error).rstrip('.')}: {network}"
        return f"Cannot reach the Hub at {constants.ENDPOINT} ({reason}): check the network connection, or HF_ENDPOINT."
    return None


def network_failure(error: BaseException) -> BaseException | None:
    """The network failure behind `error`: itself, or an exception it was raised from or while handling (a failed
    LFS upload comes as huggingface_hub's RuntimeError "Error while uploading ..."); None if there is none."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        transport = any(  # httpx's (huggingface_hub 1.x) or httpx2's (2.x) network errors
            cls.__name__ == "TransportError" and cls.__module__.startswith("httpx") for cls in type(error).__mro__
        )
        # httpx's answer to an upload thread whose client huggingface_hub closed after another's ConnectError
        closed_client = isinstance(error, RuntimeError) and "client has been closed" in str(error)
        if transport or closed_client or isinstance(error, ConnectionError):
            return error
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return None


def push_from_training_args(training_args) -> CommitInfo:
    """`push_model_dir` of `output_dir` with the Trainer's `--push_to_hub` arguments: repository `push_repo_id`,
    `hub_token`, `hub_private_repo`, `hub_revision`. Build the Trainer with `push_to_hub=False` and call this at the
    end: the Trainer's own pushes would replace this package's model card with its generic one."""
    return push_model_dir(
        training_args.output_dir,
        push_repo_id(training_args),
        token=training_args.hub_token,
        private=training_args.hub_private_repo,
        revision=training_args.hub_revision,
    )


def push_repo_id(training_args) -> str:
    """The repository `--push_to_hub` pushes to: `hub_model_id`, else the output folder's name (in the token owner's
    namespace)."""
    return training_args.hub_model_id or Path(training_args.output_dir).resolve().name


def check_model_dir(model_dir: str | os.PathLike) -> Path:
    """Raise MissingFileError (a FileNotFoundError), saying what is missing, unless `model_dir` holds a saved model
    and tokenizer."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise MissingFileError(f"No model directory at {model_dir}.")
    missing = []
    if not (model_dir / "config.json").is_file():
        missing.append("config.json (model.save_pretrained)")
    if not any(model_dir.glob("*.safetensors")) and not any(model_dir.glob("*.bin")):
        missing.append("the weights, *.safetensors (model.save_pretrained)")
    if not (model_dir / "tokenizer_config.json").is_file():
        missing.append("the tokenizer, tokenizer_config.json (tokenizer.save_pretrained)")
    if missing:
        raise MissingFileError(f"{model_dir} is not a saved translation model: it lacks {', '.join(missing)}.")
    return model_dir


def model_location(name_or_path: str, revision: str | None = None) -> str:
    """`name_or_path` if it is a saved model folder or could be a Hub repo id; MissingFileError (a FileNotFoundError)
    with a clear message for a missing folder, a folder that is not a saved model, or a file, and InputError for a
    `revision` (a version of a Hub repo) asked of a folder here, which transformers would ignore without a word."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            checkpoints = sorted((folder for folder in path.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+",
                                  folder.name) and (folder / "config.json").is_file()), key=lambda f: int(f.name[11:]))
            names = ", ".join(folder.name for folder in checkpoints)
            run = (f" It holds the checkpoints of a training run not finished ({names}): give one of them (the last: "
                   f"{checkpoints[-1]}), or finish the run with the training command and --resume_from_checkpoint true."
                   if checkpoints else "")
            raise MissingFileError(f"{name_or_path} is a directory but not a saved model: it has no config.json.{run}")
        if (path / "model.bin").is_file() and (path / "shared_vocabulary.json").is_file():
            raise InputError(
                f"{name_or_path} is a CTranslate2 export (model.bin), which transformers cannot load: translate with "
                "ctranslate2.Translator (`python scripts/export_ctranslate2.py --help` shows how), or give the model "
                "folder it was exported from."
            )
        if revision is not None:
            raise InputError(
                f"--revision {revision} picks a version of a Hub repo, but {name_or_path} is a folder here, which "
                "has one version: leave --revision out (or, for the Hub repo of that id, run from another folder)."
            )
        return str(path)
    if path.exists():
        raise MissingFileError(f"{name_or_path} is a file: give the directory the model was saved to.")
    if (why := no_repo_id_either(name_or_path)) is not None:
        raise MissingFileError(f"No model directory at {name_or_path}{why}.")
    return name_or_path


def no_repo_id_either(name_or_path: str | os.PathLike) -> str | None:
    """For a name that is no folder here: None where it could be a Hub repo id (`name` or `namespace/name`), else
    why not, to follow "No ... at NAME": "" for a path (`/data/x`, `./x`), or that a folder here lacks it (`runs/x`,
    where runs/ is a folder here)."""
    name = str(name_or_path)
    parts = name.split("/")
    if len(parts) > 2 or not all(parts) or name.startswith((".", "~")):
        return ""
    if len(parts) == 2 and Path(parts[0]).expanduser().is_dir():
        return f": the folder {parts[0]} has no {parts[1]} (to load the Hub repo of that id, run from another folder)"
    return None


def hub_host() -> str:
    """The Hub's host name: huggingface.co, or `HF_ENDPOINT`'s."""
    return urlparse(constants.ENDPOINT).hostname


HUB_CONNECT_TIMEOUT = 3.0
"""Seconds `hub_unreachable` waits for the Hub's host to take a connection."""


@functools.cache
def hub_unreachable() -> bool:
    """Whether the Hub cannot be reached from here: its host has no address (no network, or no name service), or,
    where no proxy is set, takes no connection within `HUB_CONNECT_TIMEOUT` seconds (refused, or dropped by a
    firewall: huggingface_hub then retried each file for about 25 seconds). Asked once a process."""
    endpoint = urlparse(constants.ENDPOINT)
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.getaddrinfo(hub_host(), port)
    except OSError:
        return True
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                                             "all_proxy")):
        return False  # the requests go through the proxy: a connection of our own says nothing of them
    try:
        socket.create_connection((hub_host(), port), timeout=HUB_CONNECT_TIMEOUT).close()
    except OSError:  # refused, timed out, no route
        return True
    return False


def use_the_cache_if_the_hub_is_unreachable(name: str | os.PathLike) -> None:
    """Before loading `name` from the Hub: if the Hub cannot be reached, load from the local Hub cache only, as
    `HF_HUB_OFFLINE=1` does, with a warning. Otherwise huggingface_hub retries every file five times, for about 25
    seconds each (a model and its tokenizer: a minute), before it looks in the cache or says it cannot connect."""
    if constants.HF_HUB_OFFLINE or Path(name).expanduser().exists() or not hub_unreachable():
        return
    logger.warning("%s cannot be reached from here: looking for %s in the local Hub cache only (as HF_HUB_OFFLINE=1).",
                   hub_host(), name)
    os.environ["HF_HUB_OFFLINE"] = "1"  # for processes started from this one
    constants.HF_HUB_OFFLINE = True  # read at each call by huggingface_hub and transformers
    if "datasets" in sys.modules:  # datasets copies it when imported
        sys.modules["datasets"].config.HF_HUB_OFFLINE = True


@contextmanager
def loading_from(name_or_path: str | os.PathLike, what: str = "a model") -> Iterator[None]:
    """Around loading `what` from `name_or_path` with transformers: its OSError or ValueError becomes an InputError
    that says why, and, for a name that is no folder here (so transformers took it for a Hub repo id), that both
    were tried; a transformers message of many lines is cut to its first. A name that is no folder here is looked
    for in the local Hub cache only when the Hub cannot be reached (`use_the_cache_if_the_hub_is_unreachable`)."""
    if not Path(name_or_path).expanduser().exists() and (why := no_repo_id_either(name_or_path)) is not None:
        raise MissingFileError(f"Cannot load {what} from {name_or_path}{why or ': no such folder'}.")
    use_the_cache_if_the_hub_is_unreachable(name_or_path)
    try:
        yield
    except USER_ERRORS:
        raise
    except (OSError, ValueError) as error:
        reason = first_line(error)
        if Path(name_or_path).expanduser().exists():
            raise InputError(f"Cannot load {what} from {name_or_path}: {reason}") from error
        # transformers' second line, cut with the rest, said a private repository needs a token
        private = (" If it is a private repository, log in (`hf auth login`) or set HF_TOKEN to a token that can read "
                   "it." if "private repository" in str(error) else "")
        raise InputError(
            f"Cannot load {what} from {name_or_path}: there is no such folder here, and as a Hub repo id: {reason} "
            f"Check the path, or the id and the network.{private}"
        ) from error
