"""What `scripts/push_to_hub.py` (and `push_model_dir`) upload from a run's folder and from one of its Trainer
checkpoints: the model, tokenizer, code, card and the run's results, never the training state (optimizer, scheduler,
RNG state, trainer_state.json, training_args.bin) nor checkpoints; a checkpoint gets a card with its own scores. The
pushed folder is left as it is; the repository ends up holding what the push uploaded, and nothing of another kind
of model is replaced without --overwrite, nor pushed from a folder; --private makes a public repository private; a
network failure is one line."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_vanilla_transformer.errors import InputError, run_command
from hf_vanilla_transformer.hub import checkpoint_card, left_out_of_push, push_model_dir
from hf_vanilla_transformer.model_card import CARD_INPUTS_FILE, create_model_card, save_model_card
from hub_server import hub_server  # noqa: F401  (fixture)
from tiny_translation_model import load_script, make_tiny_model_dir

REPO = Path(__file__).resolve().parents[1]
CHECKPOINT_STATE = ["checkpoint_complete.json", "optimizer.pt", "rng_state.pth", "scheduler.pt", "trainer_state.json",
                    "training_args.bin"]
MODEL_FILES = {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "configuration_vanilla_transformer.py", "modeling_vanilla_transformer.py", "pipeline_translation.py",
               "README.md"}


@pytest.fixture
def run_dir(tmp_path):
    """A finished run, as the training script leaves it (model, card, results, plot, the Trainer's trainer_state.json
    and training_args.bin), with a checkpoint at step 10 that was evaluated there."""
    run = make_tiny_model_dir(tmp_path / "run")
    checkpoint = run / "checkpoint-10"
    shutil.copytree(run, checkpoint)
    for name in CHECKPOINT_STATE:
        (checkpoint / name).write_bytes(b"\x80\x04state")
    log_history = [{"loss": 3.5, "step": 5, "epoch": 1.0},
                   {"eval_bleu": 12.5, "eval_chrf": 30.25, "step": 10, "epoch": 2.0}]
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 10, "max_steps": 20, "epoch": 2.0,
                                                               "log_history": log_history}))
    metrics = {"eval_bleu": 55.5, "eval_chrf": 70.0, "eval_samples": 8, "train_samples": 100, "epoch": 4.0}
    (run / "all_results.json").write_text(json.dumps(metrics))
    (run / "training_curves.png").write_bytes(b"\x89PNG")
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 20, "log_history": []}))
    (run / "training_args.bin").write_bytes(b"\x80\x04args")
    save_model_card(run, source_lang="de", target_lang="en", metrics=metrics,
                    training_args={"learning_rate": 0.002, "average_last_checkpoints": 2, "seed": 1})
    return run


def test_left_out_of_push(run_dir):
    assert left_out_of_push(run_dir) == ["checkpoint-10/", "trainer_state.json", "training_args.bin"]
    assert left_out_of_push(run_dir / "checkpoint-10") == CHECKPOINT_STATE


def test_subfolders_training_state_and_models_are_not_pushed(run_dir, tmp_path):
    """A checkpoint copied to run/best was pushed whole, its optimizer state and its training_args.bin (which holds
    --hub_token) with it, while the script said "Not uploaded: ... training_args.bin"; an average saved in
    run/averaged, as average_checkpoints.py's help suggests, was pushed as a second model with a card naming its
    local path."""
    from hf_vanilla_transformer.hub import stage_upload

    shutil.copytree(run_dir / "checkpoint-10", run_dir / "best")
    make_tiny_model_dir(run_dir / "averaged")
    (run_dir / "notes").mkdir()
    (run_dir / "notes" / "optimizer.pt").write_bytes(b"\x80\x04state")
    (run_dir / "notes" / "about.txt").write_text("how the run went\n")
    assert left_out_of_push(run_dir) == ["averaged/", "best/", "checkpoint-10/", "notes/optimizer.pt",
                                         "trainer_state.json", "training_args.bin"]
    stage_upload(run_dir, tmp_path / "staging")
    staged = {path.relative_to(tmp_path / "staging").as_posix() for path in (tmp_path / "staging").rglob("*")
              if not path.is_dir()}
    assert "notes/about.txt" in staged and MODEL_FILES - {"README.md"} <= staged
    assert not [name for name in staged if name.startswith(("best/", "averaged/", "checkpoint-"))
                or name.endswith((".pt", ".bin", "trainer_state.json"))]


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (through links), with its content's sha256."""
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def push_script(hub_server, home: Path, *args: str) -> subprocess.CompletedProcess:  # noqa: F811
    return subprocess.run([sys.executable, str(REPO / "scripts" / "push_to_hub.py"), *map(str, args)],
                          env=hub_server.env(home, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=300)


def repo_files(hub_server, repo_id: str, home: Path) -> set[str]:  # noqa: F811
    proc = hub_server.run_python(
        f"import json; from huggingface_hub import HfApi; print(json.dumps(HfApi().list_repo_files({repo_id!r})))",
        hf_home=home)
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_push_uploads_no_training_state(hub_server, run_dir, tmp_path):  # noqa: F811
    before = tree(run_dir)
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "push_to_hub.py"), str(run_dir / "checkpoint-10"), "user/step-10"],
        env=hub_server.env(tmp_path / "push_home", PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert ", ".join(CHECKPOINT_STATE) in proc.stderr
    proc = hub_server.run_python(f"""
import json
from huggingface_hub import HfApi, ModelCard, hf_hub_download
from hf_vanilla_transformer.hub import push_model_dir

push_model_dir({str(run_dir)!r}, "user/run")
card = ModelCard.load(hf_hub_download("user/step-10", "README.md"))
print(json.dumps({{"run": HfApi().list_repo_files("user/run"), "checkpoint": HfApi().list_repo_files("user/step-10"),
                   "card": card.text, "language": card.data.language}}))
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(REPO)})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    run_files, checkpoint_files = set(result["run"]), set(result["checkpoint"])

    assert MODEL_FILES | {"all_results.json", "training_curves.png"} <= run_files
    assert not run_files & {"trainer_state.json", "training_args.bin"}
    assert not [name for name in run_files if name.startswith("checkpoint-")]
    assert MODEL_FILES <= checkpoint_files
    assert not checkpoint_files & set(CHECKPOINT_STATE)

    # the checkpoint's card: the run's languages and recipe, its own score at step 10, not the run's final one
    assert result["language"] == ["de", "en"]
    assert "| validation | 12.50 | 30.25 |" in result["card"] and "55.50" not in result["card"]
    assert "| Checkpoint | step 10 of the training run |" in result["card"] and "Learning rate" in result["card"]
    assert "Checkpoints averaged" not in result["card"]
    assert tree(run_dir) == before  # the card and pipeline were rendered for the push, not into the folder
    assert hub_server.unhandled == []


def test_push_replaces_what_the_repository_held(hub_server, tmp_path):  # noqa: F811
    """Pushed over another model, then again with sharded weights: the repository holds only what the last push
    uploaded (stale weights and tokenizer files would be loaded from it), after an --overwrite for the other kind of
    model. The folder pushed, links into a Hub-cache-like blob store, is left as it is."""
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    other = {"config.json": '{"model_type": "gpt2"}', "vocab.json": "{}", "merges.txt": "#v\n",
             "special_tokens_map.json": '{"eos_token": "<|endoftext|>"}', "predict_results.json": "{}",
             "model.safetensors": "old weights", "plots/old.png": "png"}
    for name, text in other.items():
        (gpt2 / name).parent.mkdir(exist_ok=True)
        (gpt2 / name).write_text(text)
    hub_server.run_python(f"""
from huggingface_hub import HfApi
HfApi().upload_folder(repo_id=HfApi().create_repo("user/mirror").repo_id, folder_path={str(gpt2)!r})
""", hf_home=tmp_path / "home")

    model, blobs, snapshot = make_tiny_model_dir(tmp_path / "model"), tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    snapshot.mkdir()
    for path in model.iterdir():  # as snapshot_download leaves a model: links to blobs named by their content
        blob = blobs / hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copyfile(path, blob)
        os.symlink(blob, snapshot / path.name)
    stored = tree(blobs)

    refused = push_script(hub_server, tmp_path / "home", snapshot, "user/mirror")
    assert refused.returncode == 2 and "'gpt2'" in refused.stderr and "--overwrite" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert repo_files(hub_server, "user/mirror", tmp_path / "home") == {".gitattributes", *other}

    pushed = push_script(hub_server, tmp_path / "home", snapshot, "user/mirror", "--overwrite")
    assert pushed.returncode == 0, pushed.stderr
    uploaded = set(repo_files(hub_server, "user/mirror", tmp_path / "home"))
    assert uploaded == {".gitattributes", "README.md", "model_card_inputs.json", *tree(model)}
    deleted = sorted(set(other) - uploaded)
    assert f"Deleted from user/mirror (branch main), as {snapshot} does not have them: {', '.join(deleted)}" in \
        pushed.stderr
    assert tree(blobs) == stored and sorted(os.listdir(snapshot)) == sorted(os.listdir(model))

    hub_server.run_python(f"""
import hf_vanilla_transformer
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained({str(model)!r})
model.save_pretrained({str(tmp_path / "sharded")!r}, max_shard_size="100KB")
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(REPO)})
    shutil.copytree(model, tmp_path / "sharded", dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.safetensors"))
    pushed = push_script(hub_server, tmp_path / "home", tmp_path / "sharded", "user/mirror")
    assert pushed.returncode == 0, pushed.stderr
    files = repo_files(hub_server, "user/mirror", tmp_path / "home")
    assert "model.safetensors.index.json" in files and "model.safetensors" not in files
    assert "does not have them: model.safetensors" in pushed.stderr
    assert hub_server.unhandled == []


def test_a_pull_request_to_a_branch_is_one_message(run_dir, capsys):
    """huggingface_hub opens pull requests against the default branch only: its ValueError was a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        load_script("push_to_hub").main([str(run_dir), "user/x", "--create_pr", "--revision", "v1"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--create_pr opens a pull request against the default branch" in error


@pytest.mark.parametrize("flag", ["--source_lang", "--license", "--commit_message", "--revision"])
def test_an_empty_value_is_refused(run_dir, capsys, flag):
    """--source_lang "" took the language out of the card, --license "" was ignored, --commit_message "" gave
    huggingface_hub's title, --revision "" a 404 from the Hub."""
    with pytest.raises(SystemExit) as exit_info:
        load_script("push_to_hub").main([str(run_dir), "user/x", flag, " "])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"{flag} is empty: give a value, or leave the flag out" in error


def test_damaged_checkpoint_state_is_one_message(run_dir, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_unused")
    (run_dir / "checkpoint-10" / "trainer_state.json").write_text('{"global_step": 1')
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: load_script("push_to_hub").main([str(run_dir / "checkpoint-10"), "user/x"]))
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Cannot read" in error and "trainer_state.json" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("name", [CARD_INPUTS_FILE, "all_results.json", "generation_config.json"])
def test_a_damaged_card_input_is_one_message_before_the_repository_is_made(hub_server, run_dir, tmp_path,  # noqa: F811
                                                                          name):
    """A JSONDecodeError traceback, after an empty repository had been made on the Hub."""
    (run_dir / name).write_text('{"source_lang": "de",')
    refused = push_script(hub_server, tmp_path / "home", run_dir, "user/damaged")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"Cannot read {run_dir / name}: " in refused.stderr
    exists = hub_server.run_python(
        "from huggingface_hub import HfApi; print(HfApi().repo_exists('user/damaged'))", hf_home=tmp_path / "home")
    assert exists.stdout.strip().splitlines()[-1] == "False"


def test_push_model_dir_without_the_network_is_one_line_not_a_traceback(run_dir, monkeypatch):
    """`push_model_dir(...)` called from Python without the network ended in huggingface_hub's 69-line traceback
    ("ConnectError: Name or service not known"), where the scripts said "Cannot reach the Hub"."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(InputError, match=r"^Cannot reach the Hub at http://127.0.0.1:9 \(.*Connection refused\): "
                                         "check the network connection, or HF_ENDPOINT.$"):
        push_model_dir(run_dir, "user/x", token="hf_unused")


@pytest.mark.parametrize("drop", ["refused", "closed"])
def test_network_failure_during_upload_is_one_message(run_dir, monkeypatch, capsys, drop):
    """huggingface_hub wraps a failed LFS upload in RuntimeError("Error while uploading ..."): from the connection
    error, or from httpx's "client has been closed", where another upload's connection error closed the client."""
    import httpx2
    from huggingface_hub import constants

    from hf_vanilla_transformer import hub

    def push_model_dir(*args, **kwargs):
        try:
            if drop == "refused":
                raise httpx2.ConnectError("[Errno 111] Connection refused")
            client = httpx2.Client()
            client.close()
            client.get("http://127.0.0.1:9/")
        except (httpx2.ConnectError, RuntimeError) as error:
            raise RuntimeError("Error while uploading 'model.safetensors' to the Hub.") from error

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_unused")
    monkeypatch.setattr(hub, "push_model_dir", push_model_dir)
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: load_script("push_to_hub").main([str(run_dir), "user/x"]))
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Cannot reach the Hub" in error and "model.safetensors" in error
    assert "Traceback" not in error
    assert "Not uploaded" not in error  # nothing was: the files left out are named after a push, not before a refusal


def test_a_push_to_a_new_branch_that_fails_leaves_no_branch(hub_server, run_dir, tmp_path):  # noqa: F811
    """The branch was made from main before the upload: when the upload failed, `revision="v2"` served main's model
    and card under the new branch's name, without an error."""
    proc = hub_server.run_python(f"""
import json
from huggingface_hub import HfApi
from hf_vanilla_transformer.hub import push_model_dir

push_model_dir({str(run_dir)!r}, "user/branched")

def dropped(*args, **kwargs):
    raise ConnectionError("the connection dropped")

HfApi.upload_folder = dropped
try:
    push_model_dir({str(run_dir)!r}, "user/branched", revision="v2")
except ValueError as error:  # InputError: "Cannot reach the Hub ..."
    assert "the connection dropped" in str(error)
print(json.dumps([ref.name for ref in HfApi().list_repo_refs("user/branched").branches]))
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(REPO)})
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["main"], proc.stderr


def test_pushing_again_leaves_the_users_hub_cache_as_it_was(hub_server, run_dir, tmp_path):  # noqa: F811
    """The check of the repository's model type downloaded its config.json into the user's Hub cache, which moved
    the cached `main` to a snapshot of config.json alone: the model downloaded before no longer loaded offline ("does
    not appear to have a file named ... model.safetensors")."""
    proc = hub_server.run_python(f"""
import json, os
from pathlib import Path
from huggingface_hub import snapshot_download
from hf_vanilla_transformer.hub import push_model_dir

run = Path({str(run_dir)!r})
push_model_dir(run, "user/cached")
snapshot_download("user/cached")
for number in (1, 2):  # two new commits: the second push checks the first's
    (run / "all_results.json").write_text(json.dumps({{"eval_bleu": 50.0 + number, "eval_chrf": 70.0}}))
    push_model_dir(run, "user/cached")
import huggingface_hub.constants
huggingface_hub.constants.HF_HUB_OFFLINE = True
print(json.dumps(sorted(os.listdir(snapshot_download("user/cached")))))
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(REPO)})
    assert "model.safetensors" in json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_push_to_an_open_pull_request_updates_it(hub_server, run_dir, tmp_path):  # noqa: F811
    """`--revision refs/pr/1`, huggingface_hub's way to add a commit to a pull request, failed with "The Hub refused
    the push ...: Bad request": the push tried to make a branch of that name first."""
    proc = hub_server.run_python(f"""
import json
from huggingface_hub import HfApi
from hf_vanilla_transformer.hub import push_model_dir

push_model_dir({str(run_dir)!r}, "user/reviewed")
pull = push_model_dir({str(run_dir)!r}, "user/reviewed", create_pr=True, card_overrides={{"license": "mit"}})
ref = "refs/pr/" + pull.pr_url.rstrip("/").split("/")[-1]
push_model_dir({str(run_dir)!r}, "user/reviewed", revision=ref, card_overrides={{"license": "cc-by-4.0"}})
api = HfApi()
try:
    push_model_dir({str(run_dir)!r}, "user/reviewed", revision="refs/pr/99")
    missing = None
except Exception as error:
    missing = str(error)
print(json.dumps([ref, [b.name for b in api.list_repo_refs("user/reviewed").branches],
                  "cc-by-4.0" in open(api.hf_hub_download("user/reviewed", "README.md", revision=ref)).read(),
                  missing]))
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(REPO)})
    ref, branches, updated, missing = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ref.startswith("refs/pr/") and branches == ["main"] and updated, proc.stderr
    assert missing == ("user/reviewed has no pull request refs/pr/99: give an open one's ref, or --create_pr to open "
                       "a new one.")


def test_the_card_of_a_checkpoint_of_an_unfinished_run_does_not_guess(run_dir):
    """Before the run has finished, its folder has no card inputs: a checkpoint pushed then had a card saying
    "Parallel text, from local files." (for any data, the built-in corpus too) and that a BPE vocabulary was learned."""
    (run_dir / CARD_INPUTS_FILE).unlink()
    (run_dir / "README.md").unlink()
    checkpoint = run_dir / "checkpoint-10"
    text = create_model_card(checkpoint, repo_id="user/step-10", **checkpoint_card(checkpoint)).text
    assert "The training data is not recorded with this model." in text and "from local files" not in text
    assert "is learned" not in text
    assert "| Checkpoint | step 10 of 20; the run's other settings are not recorded with it |" in text
    assert "| validation | 12.50 | 30.25 |" in text  # its own evaluation, from its trainer_state.json


def test_the_card_of_a_checkpoint_of_an_unfinished_run_names_the_data_its_marker_records(run_dir):
    """Each complete checkpoint records its run's languages and training data (checkpoint_complete.json): the card of
    one pushed, or of an average of them, before the run finished said "The training data is not recorded" and had
    no languages in its metadata."""
    from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE
    from hf_vanilla_transformer.hub import averaged_card

    (run_dir / CARD_INPUTS_FILE).unlink()
    (run_dir / "README.md").unlink()
    checkpoint = run_dir / "checkpoint-10"
    (checkpoint / CHECKPOINT_COMPLETE).write_text(json.dumps({"global_step": 10, "run": {
        "source_lang": "de", "target_lang": "en", "train_data": "local files `train.de` and `train.en`"}}))
    for card in (checkpoint_card(checkpoint), averaged_card(run_dir, [checkpoint])):
        model_card = create_model_card(checkpoint, repo_id="user/step-10", **card)
        text = model_card.text
        assert "Parallel text from local files `train.de` and `train.en`, German source and English target." in text
        assert model_card.data.language == ["de", "en"] and "The training data is not recorded" not in text
        assert "the run's other settings are not recorded" in text or "scripts/average_checkpoints.py" in text


def make_other_model_dir(path: Path, model_type: str) -> Path:
    """A folder saved by another library: config.json of `model_type`, weights and a tokenizer (this package's)."""
    from transformers import MarianConfig, MarianMTModel

    tokenizer_source = make_tiny_model_dir(path.parent / f"{path.name}-tokenizer")
    if model_type == "marian":
        config = MarianConfig(vocab_size=300, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                              decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, pad_token_id=0,
                              decoder_start_token_id=0)
        MarianMTModel(config).save_pretrained(path)
    else:
        shutil.copytree(tokenizer_source, path)
        (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_source / name, path / name)
    return path


@pytest.mark.parametrize("model_type", ["marian", "gpt2"])
def test_a_folder_holding_another_kind_of_model_is_not_pushed(hub_server, tmp_path, model_type):  # noqa: F811
    """A saved MarianMTModel was pushed with this package's card and custom_pipelines, which it cannot serve."""
    folder = make_other_model_dir(tmp_path / "other", model_type)
    before = tree(folder)
    refused = push_script(hub_server, tmp_path / "home", folder, f"user/{model_type}")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert f"{folder} holds a {model_type!r} model (its config.json's model_type), not this package's " \
           "'vanilla_transformer'" in refused.stderr
    conversion = f"hf_vanilla_transformer.from_marian(MarianMTModel.from_pretrained({str(folder)!r}))"
    assert (conversion in refused.stderr) == (model_type == "marian")
    exists = hub_server.run_python(
        f"from huggingface_hub import HfApi; print(HfApi().repo_exists('user/{model_type}'))", hf_home=tmp_path / "home")
    assert exists.stdout.strip().splitlines()[-1] == "False" and tree(folder) == before
    with pytest.raises(InputError, match="not this package's"):  # the library call refuses it too, before the Hub
        push_model_dir(folder, "user/x")


def test_private_makes_a_public_repository_private(hub_server, run_dir, tmp_path):  # noqa: F811
    """--private (and the Trainer's --hub_private_repo) left an existing public repository public, without a word."""
    hub_server.run_python("""
from huggingface_hub import HfApi
for name in ("user/public", "user/public-trainer"):
    HfApi().create_repo(name, private=False)
""", hf_home=tmp_path / "home")
    pushed = push_script(hub_server, tmp_path / "home", run_dir, "user/public", "--private")
    assert pushed.returncode == 0, pushed.stderr
    assert "user/public was public: made it private, as asked, before uploading." in pushed.stderr
    proc = hub_server.run_python(f"""
from huggingface_hub import HfApi
from transformers import Seq2SeqTrainingArguments
from hf_vanilla_transformer.hub import push_from_training_args

push_from_training_args(Seq2SeqTrainingArguments(output_dir={str(run_dir)!r}, hub_model_id="user/public-trainer",
                                                 hub_private_repo=True, report_to=[]))
print([HfApi().model_info(name).private for name in ("user/public", "user/public-trainer")])
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(REPO)})
    assert proc.stdout.strip().splitlines()[-1] == "[True, True]"
    assert "user/public-trainer was public: made it private" in proc.stderr
    public = push_script(hub_server, tmp_path / "home", run_dir, "user/public")  # without --private: as it is
    assert public.returncode == 0 and "made it private" not in public.stderr, public.stderr
    assert hub_server.unhandled == []
