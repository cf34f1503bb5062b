"""The local Hub server (tests/hub_server.py) against the real huggingface_hub and transformers, in subprocesses
whose only link to the server is HF_ENDPOINT (and HF_TOKEN)."""

import hashlib
import json
import os
import textwrap

import pytest

from hub_server import hub_server  # noqa: F401  (fixture)


TINY_MARIAN = """
import torch
from transformers import MarianConfig, MarianMTModel

def tiny_marian(seed):
    torch.manual_seed(seed)
    config = MarianConfig(vocab_size=100, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                          decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                          max_position_embeddings=64, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    return MarianMTModel(config).eval()

def logits(model):
    ids = torch.tensor([[5, 6, 7, 8, 1], [9, 10, 11, 1, 0]])
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=(ids != 0).long(), decoder_input_ids=ids[:, :3]).logits
"""

# A model whose code exists only in the pushing process: pulled back with trust_remote_code=True.
REMOTE_CODE = {
    "__init__.py": "",
    "configuration_tinyremote.py": """
        from transformers import PretrainedConfig

        class TinyRemoteConfig(PretrainedConfig):
            model_type = "tinyremote"

            def __init__(self, width=8, **kwargs):
                self.width = width
                super().__init__(**kwargs)
    """,
    "modeling_tinyremote.py": """
        import torch
        from transformers import PreTrainedModel

        from .configuration_tinyremote import TinyRemoteConfig

        class TinyRemoteModel(PreTrainedModel):
            config_class = TinyRemoteConfig

            def __init__(self, config):
                super().__init__(config)
                self.proj = torch.nn.Linear(config.width, config.width)
                self.post_init()

            def forward(self, x):
                return self.proj(x).tanh()
    """,
}


@pytest.fixture(autouse=True)
def every_request_is_implemented(hub_server):  # noqa: F811
    yield
    assert hub_server.unhandled == []


@pytest.fixture(scope="module")
def pushed(hub_server, tmp_path_factory):  # noqa: F811
    """One pushing process: `user/tiny` (private MarianMT + tokenizer on main, another model on branch v1)
    and `user/tiny-remote` (custom code). Returns the folder holding the reference outputs."""
    root = tmp_path_factory.mktemp("push")
    package = root / "code" / "tinyremote"
    package.mkdir(parents=True)
    for name, source in REMOTE_CODE.items():
        (package / name).write_text(textwrap.dedent(source))
    code = TINY_MARIAN + f"""
import json
from huggingface_hub import HfApi
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from tinyremote.configuration_tinyremote import TinyRemoteConfig
from tinyremote.modeling_tinyremote import TinyRemoteModel

out = {str(root)!r}
main = tiny_marian(0)
main.push_to_hub("user/tiny", private=True)
torch.save(logits(main), out + "/main.pt")

vocab = {{"<pad>": 0, "</s>": 1, "<unk>": 2, **{{w: i + 3 for i, w in enumerate("the cat sat on a mat".split())}}}}
backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
backend.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
tokenizer.push_to_hub("user/tiny")
json.dump(tokenizer("the cat sat on the mat")["input_ids"], open(out + "/ids.json", "w"))

HfApi().create_branch("user/tiny", branch="v1")
v1 = tiny_marian(1)
v1.push_to_hub("user/tiny", revision="v1")
torch.save(logits(v1), out + "/v1.pt")

TinyRemoteConfig.register_for_auto_class()
TinyRemoteModel.register_for_auto_class("AutoModel")
torch.manual_seed(0)
remote = TinyRemoteModel(TinyRemoteConfig()).eval()
remote.push_to_hub("user/tiny-remote")
torch.save(remote(torch.linspace(-1, 1, 8)).detach(), out + "/remote.pt")
"""
    hub_server.run_python(code, hf_home=root / "hf_home", env={"PYTHONPATH": str(root / "code")})
    return root


def test_upload_folder_and_snapshot_download_private(hub_server, tmp_path):  # noqa: F811
    folder = tmp_path / "folder"
    (folder / "weights").mkdir(parents=True)
    (folder / "notes.txt").write_text("a small text file\n")
    (folder / "weights" / "model.safetensors").write_bytes(os.urandom(3 * 1024 * 1024))
    expected = {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in folder.rglob("*") if p.is_file()}
    hub_server.run_python(f"""
from huggingface_hub import HfApi
api = HfApi()
assert api.whoami()["name"] == "user"
api.create_repo("user/test", private=True)
api.upload_folder(repo_id="user/test", folder_path={str(folder)!r}, commit_message="add files")
info = api.model_info("user/test", files_metadata=True)
assert info.private
lfs = {{s.rfilename: s.lfs for s in info.siblings}}
assert lfs["weights/model.safetensors"] is not None and lfs["notes.txt"] is None, lfs  # went through LFS
""", hf_home=tmp_path / "push_home")
    proc = hub_server.run_python("""
import hashlib, json, pathlib
from huggingface_hub import HfApi, snapshot_download
root = pathlib.Path(snapshot_download("user/test"))
print(json.dumps({p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                  for p in root.rglob("*") if p.is_file()}))
assert sorted(HfApi().list_repo_files("user/test")) == [".gitattributes", "notes.txt", "weights/model.safetensors"]
""", hf_home=tmp_path / "pull_home")
    pulled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: pulled[k] for k in expected} == expected


def test_push_to_hub_then_from_pretrained_main_and_branch(hub_server, pushed, tmp_path):  # noqa: F811
    hub_server.run_python(TINY_MARIAN + f"""
import json
from huggingface_hub import HfApi
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, MarianMTModel
model = MarianMTModel.from_pretrained("user/tiny")
assert torch.equal(logits(model), torch.load({str(pushed / "main.pt")!r}))
auto = AutoModelForSeq2SeqLM.from_pretrained("user/tiny")
assert type(auto) is MarianMTModel and torch.equal(logits(auto), logits(model))
tokenizer = AutoTokenizer.from_pretrained("user/tiny")
assert tokenizer("the cat sat on the mat")["input_ids"] == json.load(open({str(pushed / "ids.json")!r}))

# the model pushed with revision="v1" after create_branch
assert sorted(b.name for b in HfApi().list_repo_refs("user/tiny").branches) == ["main", "v1"]
v1 = MarianMTModel.from_pretrained("user/tiny", revision="v1")
assert torch.equal(logits(v1), torch.load({str(pushed / "v1.pt")!r}))
assert not torch.equal(logits(v1), logits(model))
""", hf_home=tmp_path / "hf_home")


def test_trust_remote_code_without_the_code_importable(hub_server, pushed, tmp_path):  # noqa: F811
    hub_server.run_python(f"""
import torch
from transformers import AutoModel
try:
    import tinyremote
except ImportError:
    pass
else:
    raise AssertionError("hide_modules did not hide tinyremote")
model = AutoModel.from_pretrained("user/tiny-remote", trust_remote_code=True).eval()
assert type(model).__name__ == "TinyRemoteModel" and type(model).__module__.startswith("transformers_modules")
assert torch.equal(model(torch.linspace(-1, 1, 8)).detach(), torch.load({str(pushed / "remote.pt")!r}))
""", hf_home=tmp_path / "hf_home", env={"PYTHONPATH": str(pushed / "code")}, hide_modules=("tinyremote",))


def test_private_repo_needs_the_token(hub_server, pushed, tmp_path):  # noqa: F811
    anonymous = """
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import RepositoryNotFoundError
for call in (lambda: HfApi().model_info("user/tiny"), lambda: hf_hub_download("user/tiny", "config.json")):
    try:
        call()
    except RepositoryNotFoundError as err:
        print(err.response.status_code)
    else:
        raise AssertionError("read a private repo")
assert HfApi().model_info("user/tiny-remote").private is False  # public repos stay readable
"""
    proc = hub_server.run_python(anonymous, hf_home=tmp_path / "anonymous", token=None)
    assert proc.stdout.split() == ["401", "401"]
    proc = hub_server.run_python(anonymous, hf_home=tmp_path / "other", token=hub_server.other_token)
    assert proc.stdout.split() == ["404", "404"]
    hub_server.run_python("""
from transformers import AutoConfig
try:
    AutoConfig.from_pretrained("user/tiny")
except OSError as err:
    assert "user/tiny" in str(err) and "token" in str(err), err
else:
    raise AssertionError("read a private repo")
""", hf_home=tmp_path / "anonymous_transformers", token=None)
