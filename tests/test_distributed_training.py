"""The main job over several processes: DDP and FSDP settings, checked in this process in a world of one."""

import socket
from datetime import timedelta

import pytest
import torch
from accelerate.state import AcceleratorState
from conftest import tiny_config

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
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
