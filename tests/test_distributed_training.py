"""The main job over several processes: DDP and FSDP settings, checked in this process in a world of one."""

import json
import socket
from datetime import timedelta

import pytest
import torch
from accelerate.state import AcceleratorState
from conftest import tiny_config

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer
from hf_vanilla_transformer.training import parse_arguments


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_trainer(tmp_path, *flags):
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--eval_strategy", "no", *flags])
    return TokenBatchingSeq2SeqTrainer(model=VanillaTransformerForConditionalGeneration(tiny_config()), args=args)


def test_ddp_does_not_look_for_unused_parameters_unless_asked(tmp_path):
    assert tiny_trainer(tmp_path).accelerator.ddp_handler.find_unused_parameters is False
    asked = tiny_trainer(tmp_path, "--ddp_find_unused_parameters", "true")
    assert asked.accelerator.ddp_handler.find_unused_parameters is True


@pytest.fixture
def fsdp_unset(monkeypatch):
    """No FSDP request from the environment, and none left behind: the Accelerator sets ACCELERATE_USE_FSDP when it
    is given an FSDP plugin."""
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    return monkeypatch


@pytest.mark.parametrize("request_by", ["trainer_flag", "accelerate_launch"])
def test_fsdp_in_one_process_is_an_error_not_a_fallback(tmp_path, fsdp_unset, request_by):
    if request_by == "accelerate_launch":
        fsdp_unset.setenv("ACCELERATE_USE_FSDP", "true")
        fsdp_unset.setenv("FSDP_VERSION", "2")
    with pytest.raises(InputError, match="this is one process: start it with `accelerate launch --use_fsdp"):
        tiny_trainer(tmp_path, *(["--fsdp"] if request_by == "trainer_flag" else []))


@pytest.mark.parametrize("request_by", ["trainer_flag", "accelerate_launch"])
def test_fsdp1_on_cpu_is_an_error(tmp_path, fsdp_unset, request_by):
    if request_by == "accelerate_launch":  # whose --fsdp_version defaults to 1
        fsdp_unset.setenv("ACCELERATE_USE_FSDP", "true")
        fsdp_unset.setenv("FSDP_VERSION", "1")
        flags = []
    else:
        (tmp_path / "fsdp.json").write_text(json.dumps({"version": 1}))
        flags = ["--fsdp", "--fsdp_config", str(tmp_path / "fsdp.json")]
    with pytest.raises(InputError, match="FSDP1 needs GPUs; on CPU processes use FSDP2"):
        tiny_trainer(tmp_path, *flags)


@pytest.fixture
def one_cpu_process(fsdp_unset):
    """The environment a launcher gives a CPU process, in a world of one: the Trainer starts torch.distributed
    over gloo in this process."""
    environment = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    for name, value in environment.items():
        fsdp_unset.setenv(name, value)
    yield
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    AcceleratorState._reset_state(reset_partial_state=True)


def test_ddp_timeout_bounds_waits_on_cpu_processes_too(tmp_path, one_cpu_process):
    parse_arguments(["--output_dir", str(tmp_path), "--use_cpu", "true", "--ddp_timeout", "77"])
    gloo = torch.distributed.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    assert gloo.options._timeout == timedelta(seconds=77)  # torch's default would be 30 minutes


def test_fsdp_runs_on_cpu_processes_where_the_backend_has_its_collectives(tmp_path, one_cpu_process, monkeypatch):
    trainer = tiny_trainer(tmp_path, "--use_cpu", "true", "--fsdp")
    assert trainer.is_fsdp_enabled and trainer.accelerator.is_fsdp2  # accelerate alone would have run DDP

    def lacking(*args, **kwargs):
        raise RuntimeError("reduce_scatter_single is not supported")

    monkeypatch.setattr(torch.distributed, "reduce_scatter_single", lacking)
    with pytest.raises(InputError, match="FSDP cannot run on the 'gloo' backend: it lacks"):
        tiny_trainer(tmp_path, "--use_cpu", "true", "--fsdp")


def test_fsdp_checkpoints_are_sharded_and_whole_ones_not_resumed(tmp_path, one_cpu_process):
    trainer = tiny_trainer(tmp_path, "--use_cpu", "true", "--fsdp")
    assert trainer.accelerator.state.fsdp_plugin.state_dict_type.name == "SHARDED_STATE_DICT"  # the Trainer's: FULL
    whole = tmp_path / "checkpoint-5"
    whole.mkdir()
    (whole / "pytorch_model_fsdp.bin").touch()
    with pytest.raises(InputError, match="holds whole FSDP weights"):
        trainer.train(resume_from_checkpoint=str(whole))
    (tmp_path / "fsdp.json").write_text(json.dumps({"state_dict_type": "FULL_STATE_DICT"}))
    asked = tiny_trainer(tmp_path, "--use_cpu", "true", "--fsdp", "--fsdp_config", str(tmp_path / "fsdp.json"))
    assert asked.accelerator.state.fsdp_plugin.state_dict_type.name == "FULL_STATE_DICT"
    with pytest.raises(InputError, match="--average_last_checkpoints does not work under FSDP"):
        tiny_trainer(tmp_path, "--use_cpu", "true", "--fsdp", "--average_last_checkpoints", "2")
