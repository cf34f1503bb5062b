"""Loading: truncated or corrupt weights, a config of another model type and a missing tokenizer give clear errors."""

import shutil
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from hub_server import hub_server  # noqa: F401  (fixture)
from transformers import AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel

from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.tokenization import load_tokenizer


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    VanillaTransformerForConditionalGeneration(tiny_config()).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_weights_say_so(saved, tmp_path, damage):
    shutil.copytree(saved, tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\0" * 512)
    for load in (AutoModelForSeq2SeqLM.from_pretrained, VanillaTransformerForConditionalGeneration.from_pretrained):
        with pytest.raises(OSError, match="truncated or corrupt.*Save or download the model again"):
            load(tmp_path / "m")


def test_config_of_another_model_type_is_refused(tmp_path):
    MarianConfig(  # small, so that the last line builds its MarianMTModel in a moment
        vocab_size=99, pad_token_id=98, decoder_start_token_id=98, d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=64,
    ).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model type 'marian', not 'vanilla_transformer'.*from_marian"):
        VanillaTransformerConfig.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model type 'marian'"):
        VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    assert isinstance(AutoModelForSeq2SeqLM.from_config(MarianConfig.from_pretrained(tmp_path)), MarianMTModel)


def test_missing_tokenizer_is_named(saved):
    with pytest.raises(ValueError, match="has no tokenizer.*--tokenizer_name"):
        load_tokenizer(saved)


def test_training_script_reports_a_model_without_tokenizer(saved, tmp_path):
    from hf_vanilla_transformer.training import main

    with pytest.raises(ValueError, match="has no tokenizer"):
        main(["--output_dir", str(tmp_path), "--model_name_or_path", str(saved), "--max_steps", "1"])


def test_good_checkpoint_still_loads(saved):
    model = AutoModelForSeq2SeqLM.from_pretrained(saved)
    assert isinstance(model, VanillaTransformerForConditionalGeneration)
    assert torch.equal(model.lm_head.weight, model.model.shared.weight)


def test_a_hub_id_without_a_network_looks_in_the_cache_at_once(saved, monkeypatch, caplog):
    """Offline, huggingface_hub tries each file six times over ~25 s before it looks in its cache: a model and its
    tokenizer were a minute's wait for a mistyped folder. Where the Hub's host has no address, the cache is used
    at once, as with HF_HUB_OFFLINE=1, and the error still says both were tried."""
    import socket
    from urllib.parse import urlparse

    import datasets
    from huggingface_hub import constants
    from transformers import AutoConfig

    from hf_vanilla_transformer import hub
    from hf_vanilla_transformer.errors import InputError

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as on a user's machine (conftest sets it for tests)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    lookups = []

    def no_network(host, *args, **kwargs):
        lookups.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    hub.hub_unreachable.cache_clear()
    try:
        with hub.loading_from(saved):  # a folder here: no lookup, nothing switched
            AutoConfig.from_pretrained(saved)
        assert lookups == [] and constants.HF_HUB_OFFLINE is False
        with pytest.raises(InputError, match="there is no such folder here, and as a Hub repo id: .*cached files"):
            with hub.loading_from("no-such-user/no-such-model"):
                AutoConfig.from_pretrained("no-such-user/no-such-model")
    finally:
        hub.hub_unreachable.cache_clear()
    host = urlparse(constants.ENDPOINT).hostname
    assert lookups == [host]  # one look, no retries of requests
    assert constants.HF_HUB_OFFLINE is True and datasets.config.HF_HUB_OFFLINE is True
    assert any(f"{host} cannot be reached from here: looking for no-such-user/no-such-model in the local Hub cache "
               "only" in message for message in caplog.messages)


def test_a_hub_that_takes_no_connection_is_unreachable(monkeypatch):
    """A Hub host with an address that refused connections (or a firewall that dropped them) was taken for reachable:
    translate.py printed five "Retrying" lines and waited 27 s for its one-line error. Behind a proxy, a connection
    of our own says nothing: the requests go through the proxy."""
    import socket

    from hf_vanilla_transformer import hub

    attempts = []

    def refused(address, timeout=None):
        attempts.append((address, timeout))
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: [("address",)])
    monkeypatch.setattr(socket, "create_connection", refused)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    hub.hub_unreachable.cache_clear()
    try:
        assert hub.hub_unreachable() is True and attempts == [((hub.hub_host(), 443), hub.HUB_CONNECT_TIMEOUT)]
        hub.hub_unreachable.cache_clear()
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
        assert hub.hub_unreachable() is False and len(attempts) == 1
    finally:
        hub.hub_unreachable.cache_clear()


def test_a_private_repository_is_said_to_need_a_token():
    """transformers' second line, "If this is a private repository, make sure to pass a token ...", was cut off with
    the rest: a user without a token read only that the id was not valid."""
    from hf_vanilla_transformer import hub
    from hf_vanilla_transformer.errors import InputError

    with pytest.raises(InputError, match=r"Check the path, or the id and the network\. If it is a private repository, "
                                         r"log in \(`hf auth login`\) or set HF_TOKEN to a token that can read it\.$"):
        with hub.loading_from("someone/private-model"):
            raise OSError("someone/private-model is not a local folder and is not a valid model identifier listed on "
                          "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a "
                          "token having permission to this repo")


def test_a_hub_repository_without_tokenizer_is_named(saved, hub_server, tmp_path):  # noqa: F811
    """transformers said "Couldn't instantiate the backend tokenizer from one of: ." for a repository pushed with
    the model alone, naming no file."""
    proc = hub_server.run_python(f"""
from huggingface_hub import HfApi
HfApi().create_repo("user/no-tokenizer", exist_ok=True)
HfApi().upload_folder(repo_id="user/no-tokenizer", folder_path={str(saved)!r})
from hf_vanilla_transformer.tokenization import load_tokenizer
try:
    load_tokenizer("user/no-tokenizer")
except ValueError as error:
    print(type(error).__name__, error)
""", hf_home=tmp_path / "home", env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert proc.stdout.startswith("InputError user/no-tokenizer has no tokenizer (no tokenizer.json"), proc.stdout
