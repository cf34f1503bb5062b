"""The main job over several CPU processes (gloo), as the README's "Many GPUs and machines" runs it: DDP over two
machines, FSDP2 sharding, and a rank killed mid-run whose job ends at once and resumes to the same loss.

Three launches of a tiny model, each two processes: two machines (one process each, side by side on 127.0.0.1),
then FSDP killed after a checkpoint, then FSDP resumed. The FSDP run is compared with the DDP one: the same data,
seed and steps give the same losses and the same model. The other tests run in this process, in a world of one.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from types import SimpleNamespace

import psutil
import pytest
import torch
from accelerate.state import AcceleratorState
from conftest import REPO, tiny_config
from safetensors.torch import load_file
from test_train_translation import FEW_NUMBERS, SCRIPT, TINY, run_main, run_script
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.batching import TokenBatchSampler
from hf_vanilla_transformer.data import load_translation_datasets, tokenize_translation_datasets
from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE, last_complete_checkpoint, resume_checkpoint
from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer
from hf_vanilla_transformer.training import main, parse_arguments, train
from tiny_translation_model import make_tiny_model_dir

ACCELERATE = shutil.which("accelerate", path=os.path.dirname(sys.executable))
CONFIGS = REPO / "configs" / "accelerate"  # the README's accelerate config files
MAX_TOKENS, EPOCHS, SAVE_STEPS = 200, 3, 8
RUN = [
    *FEW_NUMBERS, *TINY, "--max_tokens_per_batch", MAX_TOKENS, "--num_train_epochs", EPOCHS, "--save_strategy",
    "steps", "--save_steps", SAVE_STEPS, "--logging_steps", "1", "--eval_strategy", "no", "--max_eval_samples", "7",
    "--max_predict_samples", "7", "--per_device_eval_batch_size", "4", "--include_num_input_tokens_seen", "true",
    "--average_last_checkpoints", "0",  # the built-in run's averaging off: DDP and FSDP models are compared
    "--log_level", "info", "--log_level_replica", "info",
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_launch(config, *options):
    return (ACCELERATE, "launch", "--config_file", str(CONFIGS / config), *map(str, options))


def fsdp_launch():
    return accelerate_launch("fsdp.yaml", "--main_process_port", free_port())


def start(launcher, out, log_path, *extra):
    """Start a launch in its own process group (so that a failing test can end all of it), its output in a file."""
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [*launcher, SCRIPT, "--output_dir", str(out), *map(str, RUN), *extra], stdout=log,
            stderr=subprocess.STDOUT, env=ENV, cwd=REPO, start_new_session=True,
        )


def end(process):
    """Kill what is left of a launch: the launcher and its workers."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def losses(out):
    state = json.loads((out / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """`accelerate launch --config_file configs/accelerate/multi_node.yaml --machine_rank 0|1 ...` started side by
    side: DDP over gloo, one process a machine, one output folder (as on a shared file system)."""
    root = tmp_path_factory.mktemp("two_machines")
    # an earlier run's tokenizer in the folder (another vocabulary): machine 1 trained with it, machine 0 a new one
    train_bpe_tokenizer(["an earlier run's text", "ein früherer Text"] * 10, 270, min_frequency=1).save_pretrained(
        root / "run")
    port = free_port()
    machines = [
        start(accelerate_launch("multi_node.yaml", "--machine_rank", rank, "--main_process_port", port),
              root / "run", root / f"machine{rank}.log")
        for rank in (0, 1)
    ]
    try:
        for machine in machines:
            machine.wait(timeout=300)
    finally:
        for machine in machines:
            end(machine)
    logs = [(root / f"machine{rank}.log").read_text() for rank in (0, 1)]
    assert [m.returncode for m in machines] == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    return root / "run", logs


def test_two_machines_train_one_model_and_rank_0_alone_writes_it(two_machines):
    out, (log0, log1) = two_machines
    assert "process 0 of 2" in log0 and "process 1 of 2" in log1
    assert "Reusing the tokenizer" not in log0 + log1  # rank 0 trained one, and sent it to rank 1
    # both ranks compared their weights at the end (the check raises on any difference) and print the same sum
    same = [re.findall(r"All 2 processes hold identical weights \(sum (\S+)\)", log) for log in (log0, log1)]
    assert same[0] and same[0] == same[1]
    for written in ("Model weights saved in", "Configuration saved in", "Saving model checkpoint to",
                    "Wrote the training curves, translation pipeline and model card"):
        assert written in log0 and written not in log1, written
    assert (out / "model.safetensors").exists() and (out / "README.md").exists()
    assert (out / "pipeline_translation.py").exists()
    assert "eval_bleu" in json.loads((out / "all_results.json").read_text())
    assert len((out / "generated_predictions.txt").read_text().splitlines()) == 7  # each test sentence once
    # DDP no longer searches the autograd graph for unused parameters every step
    assert "find_unused_parameters=True" not in log0 + log1
    # every training log read both processes' token counts (a collective each rank joins at the same steps)
    logged = [entry for entry in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in entry]
    assert logged and all(entry["target_tokens_per_second"] > 0 for entry in logged)


def test_two_machines_score_as_one_process_does(two_machines, tmp_path, capsys):
    """7 evaluation sentences, 4 a batch on each of 2 processes: accelerate repeats one to fill the last batch. The
    losses leave it out, as the translations and scores do (the repeated sentence's loss was in its batch's mean)."""
    out, _ = two_machines
    ran = json.loads((out / "all_results.json").read_text())
    flags = [*FEW_NUMBERS, "--max_eval_samples", "7", "--max_predict_samples", "7", "--per_device_eval_batch_size",
             "4", "--model_name_or_path", str(out), "--do_train", "false"]
    run_main("--output_dir", tmp_path / "alone", *flags, capsys=capsys)
    alone = json.loads((tmp_path / "alone" / "all_results.json").read_text())
    for name in ("eval_loss", "predict_loss", "eval_bleu", "predict_bleu"):
        assert ran[name] == pytest.approx(alone[name], rel=1e-6, abs=1e-6), name


def test_two_machines_split_the_token_batches_without_overlap(two_machines):
    """The run saw each rank's share of the token-count batches once: together, every training example once an
    epoch (a repeated batch aside, so that both ranks take as many steps)."""
    out, _ = two_machines
    _, data_args, _ = parse_arguments(["--output_dir", str(out), *map(str, RUN)])
    raw = load_translation_datasets(data_args)
    train = tokenize_translation_datasets(
        raw, AutoTokenizer.from_pretrained(out), source_lang="de", target_lang="en"
    )["train"]
    lengths = [len(ids) for ids in train["input_ids"]]
    shares = [TokenBatchSampler.from_dataset(train, MAX_TOKENS, seed=42, num_replicas=2, rank=r) for r in (0, 1)]
    padded_tokens = 0  # source tokens of the padded batches, as the Trainer counts them (input_ids.numel())
    for epoch in range(EPOCHS):
        for share in shares:
            share.set_epoch(epoch)
        batches = [list(share) for share in shares]
        examples = [{i for batch in share for i in batch} for share in batches]
        repeated = 2 * len(shares[0]) - len(shares[0].batches)  # 0 or 1
        assert len(examples[0] & examples[1]) <= repeated * max(map(len, shares[0].batches))
        assert examples[0] | examples[1] == set(range(len(train)))
        padded_tokens += sum(len(batch) * max(lengths[i] for i in batch) for share in batches for batch in share)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == EPOCHS * len(shares[0])
    assert state["num_input_tokens_seen"] == padded_tokens  # gathered over both ranks at every step


@pytest.fixture(scope="module")
def fsdp_killed_and_resumed(tmp_path_factory):
    """FSDP2 over two processes, rank 1 killed (SIGKILL) once a checkpoint is complete, then resumed."""
    root = tmp_path_factory.mktemp("fsdp")
    out = root / "run"
    job = start(fsdp_launch(), out, root / "killed.log")
    try:
        deadline = time.time() + 300
        while not (out / f"checkpoint-{SAVE_STEPS}" / CHECKPOINT_COMPLETE).exists():
            assert job.poll() is None and time.time() < deadline, (root / "killed.log").read_text()[-3000:]
            time.sleep(0.02)
        (rank1,) = [p for p in psutil.Process(job.pid).children(recursive=True) if p.environ().get("RANK") == "1"]
        rank1.kill()
        killed_at = time.time()
        job.wait(timeout=120)
        ended_after = time.time() - killed_at
    finally:
        end(job)
    killed = {"log": (root / "killed.log").read_text(), "returncode": job.returncode, "ended_after": ended_after,
              "resumed_from": last_complete_checkpoint(out), "finished": (out / "trainer_state.json").exists()}
    resumed_log = run_script("--output_dir", out, *RUN, "--resume_from_checkpoint", "true", launcher=fsdp_launch())
    return out, killed, resumed_log


def test_a_killed_rank_ends_the_job_at_once_naming_it(fsdp_killed_and_resumed):
    _, killed, _ = fsdp_killed_and_resumed
    assert killed["returncode"] != 0 and killed["ended_after"] < 30
    # torchrun's elastic agent stops the other process and names the lost one
    assert re.search(r"Root Cause[^\n]*\n(?:.*\n){0,4}\s*rank\s*: 1 \(local_rank: 1\)\n.*SIGKILL", killed["log"])
    assert not killed["finished"]


def test_fsdp_resumes_to_the_same_losses_and_model_as_ddp(fsdp_killed_and_resumed, two_machines):
    """The killed FSDP job resumed from its last complete checkpoint ends as the uninterrupted DDP run does: FSDP2 is
    the same data parallelism, with the weights sharded."""
    out, killed, log = fsdp_killed_and_resumed
    ddp_out, _ = two_machines
    step = int(killed["resumed_from"].name.split("-")[1])
    expected = losses(ddp_out)
    assert step < max(expected)
    assert re.search(rf"Resuming training from checkpoint with epoch \d+ and global step {step}\b", log)
    assert "Didn't find an RNG file" not in log  # every process's part of the checkpoint was there
    got = losses(out)
    assert got.keys() == expected.keys()
    for s in expected:
        assert got[s] == pytest.approx(expected[s], rel=1e-4, abs=1e-4), s
    fsdp_weights, ddp_weights = load_file(out / "model.safetensors"), load_file(ddp_out / "model.safetensors")
    assert fsdp_weights.keys() == ddp_weights.keys()  # the tied weight once
    for name, weight in fsdp_weights.items():
        torch.testing.assert_close(without_key_bias(name, weight), without_key_bias(name, ddp_weights[name]), msg=name)


def without_key_bias(name, weight, d_model=32):
    """A weight without the part that is the keys' bias. That bias gets no gradient (softmax ignores a shift of all
    scores), only float noise, which Adam scales up to steps of the learning rate's size: they differ with the
    order in which DDP and FSDP sum the gradients, the rest of the model does not."""
    if name.endswith("qkv_proj.bias"):
        return torch.cat([weight[:d_model], weight[2 * d_model :]])
    return weight[d_model:] if name.endswith("kv_proj.bias") else weight


def test_fsdp_shards_by_layer_keeps_tying_and_saves_a_whole_model(fsdp_killed_and_resumed, two_machines):
    out, _, log = fsdp_killed_and_resumed
    shards = re.findall(
        r"FSDP2: process (\d) of 2 holds ([\d,]+) of the model's ([\d,]+) parameter values; modules sharded as "
        r"units: (.*); embedding and output projection (\w+)", log,
    )
    assert sorted(s[0] for s in shards) == ["0", "1"]
    for _, held, total, units, tied in shards:
        held, total = int(held.replace(",", "")), int(total.replace(",", ""))
        assert held < total and abs(held - total / 2) < 0.05 * total  # each holds about half
        assert "1 VanillaTransformerEncoderLayer" in units and "1 VanillaTransformerDecoderLayer" in units
        assert tied == "tied"
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert type(model).__name__ == "VanillaTransformerForConditionalGeneration"
    assert model.lm_head.weight is model.model.shared.weight
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].startswith("modeling_vanilla_transformer.")
    assert not list(out.glob("_fsdp*.py"))  # torch's files are not the model's code
    # it translates as the DDP run's model does, alone and in the run's own evaluation
    ddp_out, _ = two_machines
    tokenizer = AutoTokenizer.from_pretrained(out)
    batch = tokenizer(["dreihundertzwölf", "zweiundvierzig"], return_tensors="pt", padding=True)
    ddp_model = AutoModelForSeq2SeqLM.from_pretrained(ddp_out)
    assert torch.equal(model.generate(**batch), ddp_model.generate(**batch))
    predictions = (out / "generated_predictions.txt").read_text().splitlines()
    assert len(predictions) == 7 and predictions == (ddp_out / "generated_predictions.txt").read_text().splitlines()


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
    ddp = tmp_path / "checkpoint-6"  # a DDP or one-process run's: whole weights, no shards
    ddp.mkdir()
    (ddp / "model.safetensors").touch()
    with pytest.raises(InputError, match="was saved without FSDP"):
        trainer.train(resume_from_checkpoint=str(ddp))


@pytest.mark.parametrize("request_by", ["trainer_flag", "accelerate_launch"])
def test_scoring_under_fsdp_leaves_fsdp_off_and_scores_as_without_it(tmp_path, one_cpu_process, monkeypatch,
                                                                     request_by, capsys, caplog):
    """FSDP2 prepares a model only with an optimizer: a run that does not train crashed on every rank."""
    model = make_tiny_model_dir(tmp_path / "model")
    flags = ["--model_name_or_path", model, "--do_train", "false", "--use_cpu", "true", *FEW_NUMBERS,
             "--max_eval_samples", "5", "--max_predict_samples", "5", "--per_device_eval_batch_size", "2"]
    run_main("--output_dir", tmp_path / "whole", *flags, capsys=capsys)
    if request_by == "accelerate_launch":
        monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
        monkeypatch.setenv("FSDP_VERSION", "2")
    run_main("--output_dir", tmp_path / "fsdp", *flags, *(["--fsdp"] if request_by == "trainer_flag" else []),
             capsys=capsys)
    assert "FSDP was asked for, but this run does not train (--do_train false)" in caplog.text
    skipped = "runtime|per_second|preparation_time|signature|_decoding$|_data$"  # the scores alone
    whole, fsdp = ({name: value for name, value in json.loads((tmp_path / run / "all_results.json").read_text()).items()
                    if not re.search(skipped, name)} for run in ("whole", "fsdp"))
    assert "eval_bleu" in fsdp and fsdp == pytest.approx(whole, rel=1e-6, abs=1e-6)
    assert (tmp_path / "fsdp" / "generated_predictions.txt").read_text() == (
        tmp_path / "whole" / "generated_predictions.txt").read_text()


@pytest.mark.parametrize("refusal", ["one process", "FSDP1 on CPU"])
def test_an_fsdp_launch_that_cannot_run_stops_before_any_work(tmp_path, fsdp_unset, refusal):
    """The refusal came when the Trainer was made: after the data was loaded and a tokenizer trained and saved into
    a new --output_dir."""
    fsdp_unset.setenv("ACCELERATE_USE_FSDP", "true")
    fsdp_unset.setenv("FSDP_VERSION", "2" if refusal == "one process" else "1")
    message = "this is one process" if refusal == "one process" else "FSDP1 needs GPUs"
    with pytest.raises(InputError, match=message):
        main(["--output_dir", str(tmp_path / "out"), *FEW_NUMBERS, *TINY])
    assert not (tmp_path / "out").exists()


def fake_checkpoint(run, saved_by, step=4):
    """A complete checkpoint's files as `saved_by` writes them (holding nothing: their names are looked at, and
    whether they are whole files of their kinds)."""
    from safetensors.torch import save_file

    checkpoint = run / f"checkpoint-{step}"
    checkpoint.mkdir(parents=True)
    for name in ("scheduler.pt", CHECKPOINT_COMPLETE, "trainer_state.json", *{
        "ddp": ["model.safetensors", "optimizer.pt"],
        "whole fsdp": ["model.safetensors", "pytorch_model_fsdp.bin", "optimizer.bin"],
        "sharded fsdp": ["pytorch_model_fsdp_0/", "optimizer_0/"],
        "local fsdp1": ["pytorch_model_fsdp_rank0.bin", "pytorch_model_fsdp_rank1.bin", "optimizer_0/"],
    }[saved_by]):
        if name.endswith("/"):
            (checkpoint / name).mkdir()
        elif name.endswith(".safetensors"):
            save_file({}, checkpoint / name)
        elif name.endswith((".pt", ".bin")):
            torch.save({}, checkpoint / name)
        else:
            (checkpoint / name).write_text("{}")
    return checkpoint


WHOLE_FSDP = "holds whole FSDP weights (FULL_STATE_DICT), which cannot be resumed"


@pytest.mark.parametrize("saved_by, under_fsdp, refused", [
    ("ddp", True, "was saved without FSDP (by DDP or one process"),  # was 234 lines of torch's DCP tracebacks
    ("whole fsdp", True, WHOLE_FSDP),  # refused too, but only once the data was loaded and tokenized
    ("whole fsdp", False, WHOLE_FSDP),  # was told to resume it under FSDP, which refused it
    ("sharded fsdp", False, "was saved under FSDP (its weights are sharded in pytorch_model_fsdp_*): resume it"),
    ("ddp", False, None),
    ("sharded fsdp", True, None),
    ("local fsdp1", False, "was saved under FSDP"),  # FSDP1's LOCAL_STATE_DICT: a file a rank, no folder
])
def test_a_checkpoint_is_resumed_only_by_a_launch_that_can(tmp_path, one_cpu_process, monkeypatch, saved_by,
                                                           under_fsdp, refused):
    if under_fsdp:
        monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
        monkeypatch.setenv("FSDP_VERSION", "2")
    checkpoint = fake_checkpoint(tmp_path, saved_by)
    for resume in ("true", str(checkpoint)):
        _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--use_cpu", "true", "--resume_from_checkpoint",
                                      resume])
        if refused is None:
            assert resume_checkpoint(args) == str(checkpoint)  # before any data is loaded
            continue
        with pytest.raises(InputError, match=re.escape(f"{checkpoint} {refused}")) as error:
            resume_checkpoint(args)
        if refused == WHOLE_FSDP:
            assert f"python scripts/average_checkpoints.py {tmp_path} --output_dir {tmp_path / 'averaged'}" in str(
                error.value)


def test_ctrl_c_in_a_run_with_whole_fsdp_checkpoints_says_to_average_them(tmp_path):
    """It said to resume with --resume_from_checkpoint true, which such checkpoints cannot."""
    checkpoint = fake_checkpoint(tmp_path, "whole fsdp")

    class Interrupted:
        args = SimpleNamespace(output_dir=str(tmp_path))
        callback_handler = SimpleNamespace(callbacks=[])  # no progress bar to close

        def train(self, resume_from_checkpoint=None):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as interrupt:
        train(Interrupted(), None)
    assert str(interrupt.value) == (
        f"the last complete checkpoint is {checkpoint}, whole FSDP weights (FULL_STATE_DICT), which cannot be "
        f"resumed: average the run's checkpoints (python scripts/average_checkpoints.py {tmp_path} --output_dir "
        f"{tmp_path / 'averaged'}), or fine-tune from it into a new --output_dir (--model_name_or_path {checkpoint}).")
