"""Push a trained model folder to a Hub-API-compatible server on 127.0.0.1 (tests/hub_server.py), pull it back with
`from_pretrained` and `pipeline` with the package imported and, where it cannot be imported, with
`trust_remote_code=True` only: the same translations. Real huggingface_hub and transformers code paths, in
subprocesses whose only link to the server is HF_ENDPOINT and HF_TOKEN."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import pipeline

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer.model_card import save_model_card
from hf_vanilla_transformer.pipeline_translation import TASK
from hub_server import hub_server  # noqa: F401  (fixture)
from tiny_translation_model import SOURCES, load_script, make_tiny_model_dir

REPO = Path(__file__).resolve().parents[1]
REPO_ID = "user/vanilla-transformer-de-en"

TRANSLATE = f"""
import json
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

SOURCES = {SOURCES!r}

def generated(model, tokenizer):
    return [tokenizer.decode(model.generate(**tokenizer(s, return_tensors="pt"))[0], skip_special_tokens=True)
            for s in SOURCES]

def piped(translator):
    return [record["translation_text"] for record in translator(SOURCES, batch_size=2)]
"""


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    """The main model (with a card, as training leaves it) and a second one for branch v1; their translations."""
    root = tmp_path_factory.mktemp("roundtrip")
    main = make_tiny_model_dir(root / "main", seed=0)
    save_model_card(main, source_lang="de", target_lang="en", metrics={"eval_bleu": 1.5, "eval_chrf": 10.25})
    (main / "checkpoint-10").mkdir()  # left out of the upload, as by Trainer.push_to_hub
    (main / "checkpoint-10" / "optimizer.pt").write_bytes(b"0" * 16)
    v1 = make_tiny_model_dir(root / "v1", seed=1)
    expected = {name: [r["translation_text"] for r in pipeline(TASK, model=str(path))(SOURCES)]
                for name, path in (("main", main), ("v1", v1))}
    assert expected["main"] != expected["v1"]
    return main, v1, expected


def test_push_and_pull_back(hub_server, model_dirs, tmp_path):  # noqa: F811
    main, v1, expected = model_dirs
    with_package = {"PYTHONPATH": str(REPO)}

    # 1. the push script, private, to main
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "push_to_hub.py"), str(main), REPO_ID, "--private"],
        env=hub_server.env(tmp_path / "push_home", **with_package), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(hub_server.url)

    # 2. with the package: from_pretrained and the registered pipeline; then push another model to a new branch
    proc = hub_server.run_python(TRANSLATE + f"""
import hf_vanilla_transformer
from huggingface_hub import HfApi, ModelCard, hf_hub_download
from transformers import Seq2SeqTrainingArguments
from hf_vanilla_transformer.hub import push_from_training_args

model = AutoModelForSeq2SeqLM.from_pretrained({REPO_ID!r})
assert type(model) is hf_vanilla_transformer.VanillaTransformerForConditionalGeneration, type(model)
tokenizer = AutoTokenizer.from_pretrained({REPO_ID!r})
card = ModelCard.load(hf_hub_download({REPO_ID!r}, "README.md"))
result = {{
    "private": HfApi().model_info({REPO_ID!r}).private,
    "files": sorted(HfApi().list_repo_files({REPO_ID!r})),
    "generated": generated(model, tokenizer),
    "piped": piped(pipeline({TASK!r}, model={REPO_ID!r})),
    "card": [card.data.pipeline_tag, card.data.library_name, card.data.language, card.data.model_name,
             'pipeline(model="{REPO_ID}", trust_remote_code=True)' in card.text],
}}
# what the training script does with --push_to_hub --hub_model_id ... --hub_revision v1
push_from_training_args(Seq2SeqTrainingArguments(output_dir={str(v1)!r}, hub_model_id={REPO_ID!r}, hub_revision="v1",
                                                 report_to=[]))
print(json.dumps(result))
""", hf_home=tmp_path / "package_home", env=with_package)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["private"] is True
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "README.md", "configuration_vanilla_transformer.py", "modeling_vanilla_transformer.py",
            "pipeline_translation.py"} <= set(result["files"])
    assert not any(name.startswith("checkpoint-") for name in result["files"])
    assert result["card"] == ["translation", "transformers", ["de", "en"], REPO_ID.split("/")[1], True]
    assert result["generated"] == expected["main"]
    assert result["piped"] == expected["main"]

    # 3. without the package: trust_remote_code=True only, main and branch v1; the card's code, where a question
    # ("Do you wish to run the custom code? [y/N]") would find no answer
    proc = hub_server.run_python(TRANSLATE + f"""
import os, re, sys
from huggingface_hub import HfApi, hf_hub_download

card = open(hf_hub_download({REPO_ID!r}, "README.md"), encoding="utf-8").read()
sys.stdin = open(os.devnull)
card_code = {{}}
exec(re.findall(r"```python\\n(.*?)```", card, flags=re.S)[1], card_code)  # the code without the package
assert "tokenizer" in card_code, "the card's code loads no tokenizer"
card_v1 = open(hf_hub_download({REPO_ID!r}, "README.md", revision="v1"), encoding="utf-8").read()
card_code_v1 = {{}}  # the branch's card loads the branch: main may hold another model, or none
exec(re.findall(r"```python\\n(.*?)```", card_v1, flags=re.S)[1], card_code_v1)

model = AutoModelForSeq2SeqLM.from_pretrained({REPO_ID!r}, trust_remote_code=True)
assert type(model).__module__.startswith("transformers_modules"), type(model)
tokenizer = AutoTokenizer.from_pretrained({REPO_ID!r}, trust_remote_code=True)
translator = pipeline(model={REPO_ID!r}, trust_remote_code=True)
assert type(translator).__module__.startswith("transformers_modules"), type(translator)
print(json.dumps({{
    "generated": generated(model, tokenizer),
    "piped": piped(translator),
    "v1": piped(pipeline(model={REPO_ID!r}, revision="v1", trust_remote_code=True)),
    "v1_card": piped(card_code_v1["translator"]),
    "main_card_revision": "revision=" in card,
    "branches": sorted(branch.name for branch in HfApi().list_repo_refs({REPO_ID!r}).branches),
}}))
""", hf_home=tmp_path / "remote_home", hide_modules=("hf_vanilla_transformer",))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["generated"] == expected["main"]
    assert result["piped"] == expected["main"]
    assert result["v1"] == result["v1_card"] == expected["v1"] and not result["main_card_revision"]
    assert result["branches"] == ["main", "v1"]
    assert hub_server.unhandled == []


def test_push_script_errors(tmp_path, capsys):
    from hf_vanilla_transformer.errors import run_command

    push_script = load_script("push_to_hub")
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: push_script.main([str(tmp_path / "nope"), "user/x"]), name="push_to_hub.py")
    assert exit_info.value.code == 2 and "No model directory" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        run_command(lambda: push_script.main([str(tmp_path), "user/x"]), name="push_to_hub.py")
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "lacks the weights" in error and "tokenizer" in error


def test_training_script_pushes_with_its_card(hub_server, tmp_path):  # noqa: F811
    """`--push_to_hub --hub_model_id` on the training script: model, tokenizer, generation config, code, pipeline and
    this package's card (not the Trainer's) reach the Hub, and load back without the package."""
    out = tmp_path / "run"
    args = [
        str(REPO / "scripts" / "train_translation.py"), "--output_dir", str(out), "--number_words_train_size", "200",
        "--number_words_eval_size", "8", "--d_model", "32", "--layers", "1", "--attention_heads", "4", "--ffn_dim",
        "64", "--vocab_size", "300", "--max_steps", "3", "--push_to_hub", "--hub_model_id", "user/numbers-de-en",
        "--hub_private_repo", "true",
    ]
    proc = subprocess.run([sys.executable, *args], env=hub_server.env(tmp_path / "home", PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"Pushed {out} to the Hub: {hub_server.url}/user/numbers-de-en/commit/" in proc.stdout  # it said nothing
    pulled = hub_server.run_python(
        TRANSLATE + """
from huggingface_hub import HfApi
files = set(HfApi().list_repo_files("user/numbers-de-en"))
model = AutoModelForSeq2SeqLM.from_pretrained("user/numbers-de-en", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("user/numbers-de-en")
card = open(__import__("huggingface_hub").hf_hub_download("user/numbers-de-en", "README.md")).read()
print(json.dumps({"files": sorted(files), "card": card, "type": type(model).__name__}))
""",
        hf_home=tmp_path / "pull",
        hide_modules=("hf_vanilla_transformer",),
    )
    assert "{\"files\"" in pulled.stdout, pulled.stdout[-3000:] + pulled.stderr[-3000:]
    result = json.loads(pulled.stdout[pulled.stdout.index('{"files"'):].splitlines()[0])
    for name in ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                 "modeling_vanilla_transformer.py", "configuration_vanilla_transformer.py", "pipeline_translation.py",
                 "README.md", "all_results.json"):
        assert name in result["files"], name
    assert not [f for f in result["files"] if f.startswith("checkpoint-")]
    assert "model-index" in result["card"] and "vanilla_transformer" in result["card"]
    assert result["type"] == "VanillaTransformerForConditionalGeneration"


def test_training_script_refuses_a_repository_of_another_model_type_before_training(hub_server, tmp_path):  # noqa: F811
    """--hub_model_id naming a repository that holds another kind of model was refused by the push at the end, after
    all the training."""
    hub_server.run_python("""
import json, tempfile, pathlib
from huggingface_hub import HfApi
folder = pathlib.Path(tempfile.mkdtemp())
(folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
HfApi().create_repo("user/gpt2-before-training")
HfApi().upload_folder(repo_id="user/gpt2-before-training", folder_path=folder)
""", hf_home=tmp_path / "home")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "train_translation.py"), "--output_dir", str(out),
         "--number_words_train_size", "100", "--number_words_eval_size", "4", "--d_model", "16", "--layers", "1",
         "--attention_heads", "2", "--ffn_dim", "32", "--vocab_size", "280", "--max_steps", "2", "--push_to_hub",
         "--hub_model_id", "gpt2-before-training", "--hub_revision", "v2"],  # the token's namespace; a new branch
        env=hub_server.env(tmp_path / "home", PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=300,
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "--push_to_hub, checked before training: user/gpt2-before-training holds " \
        "another kind of model (model_type 'gpt2'" in last, proc.stderr[-2000:]
    assert not out.exists()  # before any work


def tree(folder: Path) -> dict[str, str]:
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def push_folder(hub_server, folder: Path, repo_id: str, home: Path) -> subprocess.CompletedProcess:  # noqa: F811
    """`scripts/push_to_hub.py folder repo_id` against the local Hub; it must succeed."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "push_to_hub.py"), str(folder), repo_id],
        env=hub_server.env(home, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_folder_saved_without_the_code_is_pushed_with_it(hub_server, tmp_path):  # noqa: F811
    """A model folder without the model's code files and config.json's `auto_map` (an older version's, or another
    tool's save) was pushed without them: the card's `trust_remote_code=True` loading failed. The push adds this
    package's, in its staging copy; the folder stays as it is."""
    folder = make_tiny_model_dir(tmp_path / "no-code")
    for code in folder.glob("*.py"):
        code.unlink()
    config = json.loads((folder / "config.json").read_text())
    del config["auto_map"]
    config.pop("custom_pipelines", None)
    (folder / "config.json").write_text(json.dumps(config))
    before = tree(folder)
    expected = [r["translation_text"] for r in pipeline(TASK, model=str(folder))(SOURCES)]

    proc = push_folder(hub_server, folder, "user/no-code", tmp_path / "push_home")
    assert f"{folder} lacks the model's code for trust_remote_code=True loading: pushed with this package's " \
        "(configuration_vanilla_transformer.py, modeling_vanilla_transformer.py, " in proc.stderr
    assert "auto_map: AutoConfig, AutoModel, AutoModelForSeq2SeqLM)" in proc.stderr
    assert tree(folder) == before

    proc = hub_server.run_python(TRANSLATE + """
from huggingface_hub import HfApi, hf_hub_download

model = AutoModelForSeq2SeqLM.from_pretrained("user/no-code", trust_remote_code=True)
assert type(model).__module__.startswith("transformers_modules"), type(model)
tokenizer = AutoTokenizer.from_pretrained("user/no-code", trust_remote_code=True)
print(json.dumps({
    "auto_map": json.load(open(hf_hub_download("user/no-code", "config.json")))["auto_map"],
    "files": HfApi().list_repo_files("user/no-code"),
    "generated": generated(model, tokenizer),
    "piped": piped(pipeline(model="user/no-code", trust_remote_code=True)),
}))
""", hf_home=tmp_path / "remote_home", hide_modules=("hf_vanilla_transformer",))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["auto_map"] == {
        "AutoConfig": "configuration_vanilla_transformer.VanillaTransformerConfig",
        "AutoModel": "modeling_vanilla_transformer.VanillaTransformerModel",
        "AutoModelForSeq2SeqLM": "modeling_vanilla_transformer.VanillaTransformerForConditionalGeneration",
    }
    assert {"configuration_vanilla_transformer.py", "modeling_vanilla_transformer.py",
            "pipeline_translation.py"} <= set(result["files"])
    assert result["generated"] == result["piped"] == expected
    assert hub_server.unhandled == []


def test_an_older_versions_code_is_pushed_as_this_packages(hub_server, tmp_path):  # noqa: F811
    """A folder saved by an older version holds that version's code, which may not run under the installed
    transformers (5.24 renamed the cache generate() passes, and such code translated without it) and was pushed as it
    was: the push gives the staging copy this package's code; the folder stays as it is."""
    folder = make_tiny_model_dir(tmp_path / "older")
    modeling = folder / "modeling_vanilla_transformer.py"
    modeling.write_text(modeling.read_text() + '\nraise ImportError("an older version\'s code")\n')
    before = tree(folder)
    expected = [r["translation_text"] for r in pipeline(TASK, model=str(folder))(SOURCES)]

    proc = push_folder(hub_server, folder, "user/older", tmp_path / "push_home")
    assert f"{folder} holds the model's code of another version than this package's, which loads it here: pushed " \
        "with this package's instead (modeling_vanilla_transformer.py)." in proc.stderr
    assert "lacks the model's code" not in proc.stderr
    assert tree(folder) == before

    proc = hub_server.run_python(TRANSLATE + """
model = AutoModelForSeq2SeqLM.from_pretrained("user/older", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("user/older", trust_remote_code=True)
print(json.dumps(generated(model, tokenizer)))
""", hf_home=tmp_path / "remote_home", hide_modules=("hf_vanilla_transformer",))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected
    assert hub_server.unhandled == []
