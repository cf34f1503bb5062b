#!/usr/bin/env python
"""Speed of our model against MarianMTModel (the same network inside transformers), and of its CTranslate2 export.

    python scripts/benchmark.py                          # the paper's base size, vocab 8000, batch 32 x 32 tokens
    python scripts/benchmark.py --json bench.json --repeats 7
    python scripts/benchmark.py --d_model 64 --layers 2 --ffn_dim 128 --vocab_size 500 --repeats 2  # quick look
    python scripts/benchmark.py --device cuda --dtype bfloat16            # a GPU: bf16, sdpa attention, with MFU
    python scripts/benchmark.py --device cuda --dtype bfloat16 --compile  # the same under torch.compile
    python scripts/benchmark.py --device cuda --dtype bfloat16 --amp --compile --tokens_per_batch 25000 \\
        --seq_len 32 --skip greedy beam memory    # training at the paper's scale, bare loop and training script

Both models get the same weights (ours is `from_marian(marian)`) and run alternately in one process, so that a
machine that speeds up or slows down affects both; each figure is the median over --repeats rounds and the ratio
is the median of the per-round ratios. Figures, by default fp32 on the CPU with --threads threads (--device,
--dtype, --attn_implementation and --compile apply to both models alike):
  training tokens/s: target tokens per second of forward + backward + AdamW step, train mode (dropout on); in
      bf16/fp16 the model itself is in that dtype (weights, gradients and AdamW state; no autocast, no fp32 copy);
      With --amp the models stay in fp32 and run under torch.autocast to --dtype, as the Trainer's --bf16 does;
  training script tokens/s (ours): the same batches through the training script's own loop, after the bare loop:
      TokenBatchingSeq2SeqTrainer with the script's arguments and defaults for the device (token-count sampler,
      its collator, the label-smoothed loss, the Trainer's fused AdamW, schedule and clipping; --torch_compile
      with --compile), timed over the same number of steps; its last column is its rate / ours' bare loop;
  model FLOPs utilization: training tokens/s x model FLOPs per target token (see training_flops_per_token) / the
      device's peak FLOP/s: --peak_tflops, or a table of known GPUs' bf16/fp16 dense peaks; n/a without a peak;
  greedy / beam-4 sentences/s: generate() of --gen_sentences sources of --gen_source_len tokens into exactly
      --gen_tokens new tokens (min = max new tokens, so that both produce the same amount of work); with
      --compile, transformers' compiled generation: a static cache, and generate() compiles the decoding step's
      forward (greedy; its beam search keeps the eager forward, with the static cache);
  peak training memory: the highest resident set size while training minus the size just before the first step
      (weights, gradients, optimizer state and activations; each model in a fresh subprocess, peak reset through
      /proc/self/clear_refs), and the absolute peak; on an accelerator, memory allocated by tensors instead
      (torch.cuda.max_memory_allocated and its kin, reset per model);
  ours int8 (CPU, fp32 only, not with --compile, whose code multiplies in fp32): greedy and beam 4 of our model
      after quantize_int8 (dynamic int8 quantization of the linear layers, PyTorch's fbgemm kernels), same sources
      and lengths;
  CTranslate2 (CPU, fp32 only): our model exported with export_ctranslate2, fp32 and int8 weights, greedy and
      beam 4, same sources and lengths, --threads intra-op threads; in rounds of their own after the PyTorch
      engines' (a CTranslate2 translator that has run slows PyTorch beside it), compared with ours by medians.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.append(str(REPO))

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CPU = torch.device("cpu")


def parse_arguments(argv=None):
    from hf_vanilla_transformer.errors import command_parser

    parser = command_parser(__doc__)
    size = parser.add_argument_group("model size (defaults: the paper's base model with an 8000-token vocabulary)")
    size.add_argument("--vocab_size", type=int, default=8000)
    size.add_argument("--d_model", type=int, default=512)
    size.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    size.add_argument("--heads", type=int, default=8)
    size.add_argument("--ffn_dim", type=int, default=2048)
    work = parser.add_argument_group("work")
    work.add_argument("--batch_size", type=int, default=32, help="training sentences per step")
    work.add_argument("--tokens_per_batch", type=int, default=None,
                      help="training tokens per side and step instead of --batch_size (the paper: about 25000)")
    work.add_argument("--seq_len", type=int, default=32, help="training source and target length")
    work.add_argument("--train_steps", type=int, default=3, help="timed training steps per model per round")
    work.add_argument("--warmup_steps", type=int, default=1, help="untimed training steps per model first")
    work.add_argument("--gen_sentences", type=int, default=16)
    work.add_argument("--gen_source_len", type=int, default=30)
    work.add_argument("--gen_tokens", type=int, default=30, help="new tokens per sentence (min and max)")
    work.add_argument("--repeats", type=int, default=5, help="alternating rounds; figures are medians over them")
    work.add_argument("--memory_steps", type=int, default=2,
                      help="training steps in each memory measurement (the second has the optimizer state too)")
    run = parser.add_argument_group("run")
    run.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, xpu, ...")
    run.add_argument("--dtype", default="float32", choices=list(DTYPES), help="of the models' weights and compute")
    run.add_argument("--attn_implementation", default="sdpa", choices=["sdpa", "eager"])
    run.add_argument("--sdpa_backend", choices=sorted(SDPA_BACKENDS),
                     help="the one kernel sdpa attention may use (torch.nn.attention.sdpa_kernel; default: torch's "
                          "choice per call); flash and math on the CPU")
    run.add_argument("--amp", action="store_true",
                     help="train fp32 models under autocast to --dtype (as the Trainer's --bf16) instead of models "
                     "in --dtype")
    run.add_argument("--compile", action="store_true",
                     help="torch.compile training (forward and backward) and generation (static cache)")
    run.add_argument("--compile_backend", default="inductor", help="torch.compile backend (eager, aot_eager: tests)")
    run.add_argument("--compile_mode", default=None, choices=COMPILE_MODES,
                     help="inductor's mode for training, in the bare loop and the training script's "
                          "(--torch_compile_mode): reduce-overhead runs each step's forward and backward as CUDA "
                          "graphs (default: torch's, no CUDA graphs)")
    run.add_argument("--peak_tflops", type=float, default=None,
                     help="the device's peak TFLOP/s in --dtype, for model FLOPs utilization (default: from a table "
                          "of known GPUs for bf16/fp16; none for the CPU)")
    run.add_argument("--threads", type=int, default=None, help="torch and CTranslate2 threads (default: all cores)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--skip", nargs="*", default=[],
                     choices=["train", "script", "greedy", "beam", "memory", "int8", "ctranslate2"],
                     help="figures to leave out")
    run.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    run.add_argument("--profile", metavar="PATH",
                     help="also write to PATH torch.profiler's table of --train_steps more steps of our bare training "
                          "loop: where a step's time goes, by device time on an accelerator (CPU time on the CPU)")
    run.add_argument("--memory_worker", choices=["ours", "marian"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_arguments(args, parser)
    return args


COMPILE_MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "math": "MATH"}
POSITIVE = ("vocab_size", "d_model", "layers", "heads", "ffn_dim", "batch_size", "tokens_per_batch", "seq_len",
            "train_steps", "gen_sentences", "gen_source_len", "gen_tokens", "repeats", "memory_steps", "threads")


def check_arguments(args, parser) -> None:
    """Exit with argparse's usage error (status 2) for values the benchmark cannot run with."""
    for name in POSITIVE:
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1, got {value}.")
    if args.vocab_size < 4:  # ids 0-2 are <pad>, <s>, </s>: the sentences are drawn from the ids above them
        parser.error(f"--vocab_size must be at least 4 (3 special tokens and a word), got {args.vocab_size}.")
    if args.warmup_steps < 0:
        parser.error(f"--warmup_steps must be 0 or more, got {args.warmup_steps}.")
    if {"train", "greedy", "beam", "memory"} <= set(args.skip):  # int8, ctranslate2, script: parts of those
        parser.error("--skip leaves nothing to measure: keep at least one of train, greedy, beam, memory.")
    from hf_vanilla_transformer.errors import InputError, device_from_name, output_file_problem, unwritable

    try:
        device_from_name(args.device)
    except InputError as error:
        parser.error(str(error))
    if args.d_model % args.heads:
        parser.error(f"--heads {args.heads} must divide --d_model {args.d_model}.")
    for flag, example in (("json", "bench.json"), ("profile", "profile.txt")):  # checked now, not after minutes
        if (value := getattr(args, flag)) is None:
            continue
        path = Path(value)
        if problem := output_file_problem(path, f"--{flag} {value}", str(path / example)):
            parser.error(problem)
        if reason := unwritable(path):
            parser.error(f"--{flag} {value} cannot be written: {reason}.")
    if args.sdpa_backend is not None:
        if args.attn_implementation != "sdpa":
            parser.error("--sdpa_backend chooses sdpa attention's kernel: leave --attn_implementation sdpa.")
        if device_from_name(args.device).type == "cpu" and args.sdpa_backend not in ("flash", "math"):
            parser.error(f"--sdpa_backend {args.sdpa_backend} is a GPU kernel: on the CPU sdpa has flash and math.")
    if args.profile and "train" in args.skip:
        parser.error("--profile profiles the training steps: leave train out of --skip.")
    if args.compile_backend not in torch._dynamo.list_backends(exclude_tags=()):
        known = sorted({*torch._dynamo.list_backends(), "eager", "aot_eager"})
        parser.error(f"--compile_backend {args.compile_backend} is no torch.compile backend: {', '.join(known)}.")
    if args.peak_tflops is not None and not 0 < args.peak_tflops < math.inf:  # NaN and inf too
        parser.error(f"--peak_tflops must be positive, got {args.peak_tflops}.")
    if args.compile_mode is not None and not (args.compile and args.compile_backend == "inductor"):
        parser.error("--compile_mode is inductor's: give it with --compile and the default --compile_backend.")
    if args.amp and args.dtype == "float32":
        parser.error("--amp trains under autocast to --dtype: give --dtype bfloat16 or float16.")
    if args.tokens_per_batch is not None:
        if args.tokens_per_batch < args.seq_len:
            parser.error(f"--tokens_per_batch {args.tokens_per_batch} is less than one sentence of --seq_len "
                         f"{args.seq_len} tokens.")
        args.batch_size = args.tokens_per_batch // args.seq_len


# ---------------------------------------------------------------------------------------------------------- models


def marian_config(args):
    from transformers import MarianConfig

    return MarianConfig(
        vocab_size=args.vocab_size,
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_ffn_dim=args.ffn_dim,
        decoder_ffn_dim=args.ffn_dim,
        max_position_embeddings=max(256, args.seq_len, args.gen_source_len, args.gen_tokens + 1),
        dropout=0.1,
        activation_function="relu",
        scale_embedding=True,
        pad_token_id=0,
        eos_token_id=EOS_TOKEN_ID,
        bos_token_id=1,
        decoder_start_token_id=1,
        forced_eos_token_id=None,  # Marian's default forces token 0, its own </s>; ours is 2, and the paper forces none
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )


def build_models(args):
    """(ours, marian) with the same weights; ours computes the same function as Marian."""
    from transformers import MarianMTModel

    from hf_vanilla_transformer import from_marian

    torch.manual_seed(args.seed)
    marian = MarianMTModel(marian_config(args))
    ours = from_marian(marian)
    for model in (ours, marian):
        model.generation_config.max_length = None
    return place(args, ours), place(args, marian)


def build_one(args, which):
    """One model for a memory subprocess; ours is built from the converted config, without a Marian beside it."""
    from transformers import MarianMTModel

    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.conversion import _config_from_marian

    torch.manual_seed(args.seed)
    if which == "marian":
        return place(args, MarianMTModel(marian_config(args)))
    return place(args, VanillaTransformerForConditionalGeneration(_config_from_marian(marian_config(args))))


def place(args, model):
    """The model on --device, in --dtype (fp32 with --amp), with --attn_implementation."""
    model.set_attn_implementation(args.attn_implementation)
    return model.to(device=args.device, dtype=torch.float32 if args.amp else DTYPES[args.dtype])


def for_training(args, model):
    """With --compile, the model torch.compile'd (its forward, and so its backward); else the model itself."""
    if not args.compile:
        return model
    return torch.compile(model, backend=args.compile_backend, mode=args.compile_mode)


EOS_TOKEN_ID = 2


def training_batch(args, generator):
    input_ids = torch.randint(3, args.vocab_size, (args.batch_size, args.seq_len), generator=generator)
    labels = torch.randint(3, args.vocab_size, (args.batch_size, args.seq_len), generator=generator)
    labels[:, -1] = EOS_TOKEN_ID  # sentences end as a tokenizer ends them (the model warns of labels that never do)
    batch = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
    return {name: tensor.to(args.device) for name, tensor in batch.items()}


def generation_batch(args, generator):
    input_ids = torch.randint(3, args.vocab_size, (args.gen_sentences, args.gen_source_len), generator=generator)
    input_ids = input_ids.to(args.device)
    return input_ids, torch.ones_like(input_ids)


class Trainer:
    """Forward, backward and AdamW step on a fixed batch (under autocast to `amp_dtype` when given)."""

    def __init__(self, model, batch, amp_dtype=None):
        self.model, self.batch = model.train(), batch
        device_type = next(model.parameters()).device.type
        fused = True if device_type == "cuda" else None  # as the training script's default there (adamw_torch_fused)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
        self.autocast = functools.partial(
            torch.autocast, device_type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None
        )

    def step(self):
        with self.autocast():
            loss = self.model(**self.batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def synchronize(device: torch.device):
    """Wait for the work queued on an accelerator, so that a timer sees it done; nothing to wait for on the CPU."""
    if device.type != "cpu":
        torch.get_device_module(device).synchronize(device)


def timed(function, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    function()
    synchronize(device)
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------------------- memory


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_memory(device: torch.device) -> float:
    """Memory in use now, MiB, which becomes the peak: the resident set size on the CPU, else the memory allocated
    by tensors on the device."""
    if device.type == "cpu":
        now = _status_kib("VmRSS") / 1024
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak RSS, to the current RSS
        return now
    backend = torch.get_device_module(device)
    synchronize(device)
    backend.reset_peak_memory_stats(device)
    return backend.memory_allocated(device) / 2**20


def peak_memory(device: torch.device) -> float:
    """The peak since `reset_peak_memory`, MiB."""
    if device.type == "cpu":
        return _status_kib("VmHWM") / 1024
    synchronize(device)
    return torch.get_device_module(device).max_memory_allocated(device) / 2**20


def training_memory(args, which) -> dict:
    """Build one model and its optimizer, train --memory_steps steps: memory before the first step and the peak."""
    device = torch.device(args.device)
    model = for_training(args, build_one(args, which))
    trainer = Trainer(model, training_batch(args, torch.Generator().manual_seed(args.seed)), amp_dtype(args))
    gc.collect()
    before = reset_peak_memory(device)
    for _ in range(args.memory_steps):
        trainer.step()
    peak = peak_memory(device)
    return {"before_mib": before, "peak_mib": peak, "training_mib": peak - before}


def memory_worker(args):
    """In a fresh process: the training memory of one model, printed as JSON."""
    torch.set_num_threads(args.threads or torch.get_num_threads())
    print(json.dumps(training_memory(args, args.memory_worker)))


def measure_memory(args, which) -> dict:
    """On the CPU, in a fresh process per model (the peak RSS counts everything the process ever held); on an
    accelerator, in this one."""
    if torch.device(args.device).type != "cpu":
        torch.compiler.reset()  # compiled code may hold on to models measured or timed before
        gc.collect()
        return training_memory(args, which)
    command = [sys.executable, str(Path(__file__).resolve()), "--memory_worker", which]
    for name in ("vocab_size", "d_model", "layers", "heads", "ffn_dim", "batch_size", "seq_len", "memory_steps",
                 "seed", "threads", "device", "dtype", "attn_implementation", "sdpa_backend", "compile_backend",
                 "compile_mode"):
        value = getattr(args, name)
        if value is not None:
            command += [f"--{name}", str(value)]
    if args.compile:
        command.append("--compile")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
    return json.loads(output.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------------- figures


def alternate(rounds: int, runners: dict, device: torch.device = CPU) -> dict[str, list[float]]:
    """Time each runner once per round, reversing the order every other round."""
    times = {name: [] for name in runners}
    names = list(runners)
    for round_index in range(rounds):
        for name in names if round_index % 2 == 0 else names[::-1]:
            times[name].append(timed(runners[name], device))
    return times


def figure(work: float, times: dict[str, list[float]]) -> dict:
    """Median rate (work / time) of each runner; `ours_ratio`: the median over rounds of ours' rate / Marian's;
    `<name>_vs_ours`: the median over rounds of each other runner's rate / ours'."""

    def ratio(name, reference):
        return statistics.median(other / time for time, other in zip(times[name], times[reference]))

    result = {name: work / statistics.median(values) for name, values in times.items()}
    if "marian" in times:
        result["ours_ratio"] = ratio("ours", "marian")
    for name in times:
        if name != "ours":
            result[f"{name}_vs_ours"] = ratio(name, "ours")
    result["rounds"] = {name: [work / value for value in values] for name, values in times.items()}
    return result


UNSTEADY_SPREAD = 1.5  # rounds whose ratios differ by more than this factor: the machine was not steady


def unsteady_rounds(results: dict) -> list[str]:
    """A note for each figure whose rounds disagree (ours / Marian from one round to the next differs by more than
    `UNSTEADY_SPREAD` times), where the median ratio of a few rounds may not even agree with the two medians beside
    it: other work on the machine, or too few --repeats."""
    labels = {"train_tokens_per_s": "training tokens/s", "greedy_sentences_per_s": "greedy sentences/s",
              "beam4_sentences_per_s": "beam-4 sentences/s"}
    notes = []
    for key, label in labels.items():
        rounds = results.get(key, {}).get("rounds", {})
        if "ours" not in rounds or "marian" not in rounds:
            continue
        ratios = [ours / marian for ours, marian in zip(rounds["ours"], rounds["marian"])]
        if len(ratios) > 1 and max(ratios) > UNSTEADY_SPREAD * min(ratios):
            notes.append(f"note: {label}: the rounds' ratios range from {min(ratios):.2f}x to {max(ratios):.2f}x, so "
                         "the machine was not steady (other work, or too few rounds): rerun it idle, with more "
                         "--repeats.")
    return notes


def run_training(args, ours, marian):
    batch = training_batch(args, torch.Generator().manual_seed(args.seed))
    trainers = {
        name: Trainer(for_training(args, model), batch, amp_dtype(args))
        for name, model in (("ours", ours), ("marian", marian))
    }
    for trainer in trainers.values():
        for _ in range(args.warmup_steps):
            trainer.step()

    def runner(trainer):
        def steps():
            for _ in range(args.train_steps):
                trainer.step()

        return steps

    runners = {name: runner(trainer) for name, trainer in trainers.items()}
    times = alternate(args.repeats, runners, torch.device(args.device))
    if args.profile:
        try:
            table = profile_table(runners["ours"], torch.device(args.device))
        except RuntimeError as error:  # the profiler's own failure (CUPTI, say) costs the profile, not the figures
            table = f"torch.profiler failed: {error}\n"
            print(f"--profile: {table}", file=sys.stderr, end="")
        Path(args.profile).write_text(table)
    for model in (ours, marian):
        model.eval()
        model.zero_grad(set_to_none=True)
    del trainers
    gc.collect()
    return figure(args.batch_size * args.seq_len * args.train_steps, times)


def profile_table(steps, device: torch.device) -> str:
    """torch.profiler's operators and kernels over `steps`, the most time-consuming first: by self time on the
    device where it has one (the kernels' time), else by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type != "cpu" and (on_device := getattr(ProfilerActivity, device.type.upper(), None)) is not None:
        activities.append(on_device)
    with profile(activities=activities) as profiler:
        steps()
        synchronize(device)
    sort_by = "self_device_time_total" if len(activities) > 1 else "self_cpu_time_total"
    return profiler.key_averages().table(sort_by=sort_by, row_limit=40, max_name_column_width=90) + "\n"


def amp_dtype(args):
    return DTYPES[args.dtype] if args.amp else None


def run_training_script_loop(args, model) -> float:
    """Target tokens/s of the training script's loop on the bare loop's batches: its arguments as parsed from a
    command line (the paper's recipe and the device's defaults), token batches of --batch_size x --seq_len."""
    from datasets import Dataset
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast, PrinterCallback, TrainerCallback

    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer
    from hf_vanilla_transformer.checkpoints import run_settings
    from hf_vanilla_transformer.training import parse_arguments, training_collator

    warmup, timed_steps = max(args.warmup_steps, 1), args.train_steps * args.repeats
    generator = torch.Generator().manual_seed(args.seed + 2)
    ids = torch.randint(3, args.vocab_size, (2, args.batch_size * (warmup + timed_steps), args.seq_len),
                        generator=generator)
    ids[..., -1] = EOS_TOKEN_ID
    dataset = Dataset.from_dict({"input_ids": ids[0].tolist(), "labels": ids[1].tolist()})
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<pad>": 0}, "<pad>")))
    tokenizer.pad_token = "<pad>"

    class Clock(TrainerCallback):
        """The time at the end of the warm-up steps and at the end of the run, the device's work done."""

        def __init__(self):
            self.marks = []

        def on_step_end(self, training_args, state, control, **kwargs):
            if state.global_step in (warmup, warmup + timed_steps):
                synchronize(torch.device(args.device))
                self.marks.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as output_dir:
        flags = ["--output_dir", output_dir, "--train_file", "benchmark", "--source_lang", "x", "--target_lang", "y",
                 "--max_steps", str(warmup + timed_steps),
                 "--warmup_steps", "0", "--learning_rate", "1e-4",  # a schedule for this short run: no warning
                 "--max_tokens_per_batch", str(args.batch_size * args.seq_len), "--save_strategy", "no",
                 "--eval_strategy", "no", "--logging_strategy", "no", "--disable_tqdm", "true",
                 "--seed", str(args.seed)]
        if torch.device(args.device).type == "cpu":
            flags.append("--use_cpu")
        if args.amp:
            flags.append("--bf16" if args.dtype == "bfloat16" else "--fp16")
        if args.compile:
            flags += ["--torch_compile", "--torch_compile_backend", args.compile_backend]
            if args.compile_mode is not None:
                flags += ["--torch_compile_mode", args.compile_mode]
        _, data_args, training_args = parse_arguments(flags)
        trainer = TokenBatchingSeq2SeqTrainer(
            model=model.train(), args=training_args, train_dataset=dataset,
            data_collator=training_collator(training_args, tokenizer, model), callbacks=[clock := Clock()],
            run_settings=run_settings(data_args),  # as the script makes it (without: a warning for its own flags)
        )
        trainer.remove_callback(PrinterCallback)  # its summary line would cut into the benchmark's output
        trainer.train()
    start, end = clock.marks
    model.zero_grad(set_to_none=True)
    return args.batch_size * args.seq_len * timed_steps / (end - start)


def generation_runners(args, ours, marian, num_beams, ours_int8=None):
    """Runners for each PyTorch engine, and the warm-up's translations of each (what equal ones mean: the same work)."""
    input_ids, attention_mask = generation_batch(args, torch.Generator().manual_seed(args.seed + 1))
    options = {
        "attention_mask": attention_mask,
        "num_beams": num_beams,
        "do_sample": False,
        "max_new_tokens": args.gen_tokens,
        "min_new_tokens": args.gen_tokens,
    }
    if num_beams > 1:
        options.update(length_penalty=0.6, early_stopping=True)
    if args.compile:  # generate() compiles the decoding step's forward when its cache has static shapes
        options.update(cache_implementation="static", compile_config=generation_compile_config(args))

    @torch.inference_mode()
    def generate(model):
        return model.generate(input_ids, **options)[:, 1:].tolist()  # without the start token

    runners = {"ours": lambda: generate(ours), "marian": lambda: generate(marian)}
    if ours_int8 is not None:
        runners["ours_int8"] = lambda: generate(ours_int8)
    return runners, {name: runner() for name, runner in runners.items()}  # also the warm-up


def ctranslate2_runners(args, num_beams, translators):
    """Runners for each CTranslate2 translator, on generation_runners' sources, and the warm-up's translations."""
    input_ids, _ = generation_batch(args, torch.Generator().manual_seed(args.seed + 1))
    source = [[str(i) for i in row] for row in input_ids.tolist()]
    options = {
        "beam_size": num_beams,
        "length_penalty": 0.6 if num_beams > 1 else 0.0,
        "max_decoding_length": args.gen_tokens,
        "min_decoding_length": args.gen_tokens,
        "return_end_token": True,
    }

    def translate(translator):
        results = translator.translate_batch(source, **options)
        return [[int(token) for token in result.hypotheses[0]] for result in results]

    runners = {name: functools.partial(translate, translator) for name, translator in translators.items()}
    return runners, {name: runner() for name, runner in runners.items()}


def measure_generation(args, ours, marian, num_beams, device, ours_int8=None, ctranslate2_models=None) -> dict:
    """`figure` of the PyTorch engines' alternating rounds, then of CTranslate2's in rounds of their own, with
    translators made for them and freed after: a CTranslate2 translator that has translated keeps the cores busy
    while it lives (PyTorch's decoding ran ~40% slower beside one, Marian's a little less), which would skew the
    PyTorch figures and flatter CTranslate2's ratios. CTranslate2's `<name>_vs_ours` compare medians."""
    runners, outputs = generation_runners(args, ours, marian, num_beams, ours_int8)
    result = figure(args.gen_sentences, alternate(args.repeats, runners, device))
    result["same_translations_as_ours"] = {name: output == outputs["ours"] for name, output in outputs.items()
                                           if name != "ours"}
    if ctranslate2_models:
        translators = ctranslate2_translators(args, ctranslate2_models)
        runners, translations = ctranslate2_runners(args, num_beams, translators)
        times = alternate(args.repeats, runners, device)
        del runners, translators
        gc.collect()
        for name, values in times.items():
            result[name] = args.gen_sentences / statistics.median(values)
            result[f"{name}_vs_ours"] = result[name] / result["ours"]
            result["rounds"][name] = [args.gen_sentences / value for value in values]
            result["same_translations_as_ours"][name] = translations[name] == outputs["ours"]
    return result


def generation_compile_config(args):
    """transformers' settings for compiling the decoding step: its default mode (CUDA graphs) under inductor."""
    from transformers import CompileConfig

    mode = "reduce-overhead" if args.compile_backend == "inductor" else None  # other backends take no mode
    config = CompileConfig(backend=args.compile_backend, mode=mode)
    config._compile_all_devices = True  # generate() compiles by itself on cuda, xpu, ... only; this says: here too
    return config


def ctranslate2_exports(args, ours, directory) -> dict[str, tuple[Path, str]]:
    """Our model exported to CTranslate2 in `directory`, fp32 and int8: name -> (folder, compute type)."""
    from hf_vanilla_transformer.export import export_ctranslate2

    vocabulary = [str(i) for i in range(args.vocab_size)]
    exports = {}
    for name, quantization in (("ctranslate2_fp32", None), ("ctranslate2_int8", "int8")):
        out_dir = export_ctranslate2(ours, Path(directory) / name, quantization=quantization, vocabulary=vocabulary)
        exports[name] = (out_dir, "float32" if quantization is None else "int8")
    return exports


def ctranslate2_translators(args, exports: dict[str, tuple[Path, str]]) -> dict:
    import ctranslate2

    threads = args.threads or torch.get_num_threads()
    return {name: ctranslate2.Translator(str(folder), device="cpu", compute_type=compute_type, intra_threads=threads)
            for name, (folder, compute_type) in exports.items()}


def machine_description(args) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import transformers

    from hf_vanilla_transformer.packed_linear import FP32_GEMM

    description = {
        "cpu": cpu,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # AVX2, AVX512: "AMD EPYC" names several CPUs
        "cores": os.cpu_count(),
        "threads": args.threads or torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "load_average_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "device": device_name(torch.device(args.device)),
        "fp32_packed_gemm": FP32_GEMM.name if FP32_GEMM is not None else "none",
    }
    try:
        import ctranslate2

        description["ctranslate2"] = ctranslate2.__version__
    except ImportError:
        pass
    return description


# ----------------------------------------------------------------------------------------- model FLOPs utilization

# Dense (no sparsity) bf16/fp16 tensor-core peaks from NVIDIA's data sheets, TFLOP/s, by a part of the device name.
PEAK_TFLOPS = (
    ("H200", 989.4),
    ("H100 PCIe", 756.0),
    ("H100 SXM", 989.4),
    ("H100 80GB HBM3", 989.4),  # the SXM part's name in torch.cuda.get_device_name
    ("A100", 312.0),
)


def training_flops_per_token(args) -> float:
    """Model FLOPs of a training step per target token: the usual 6N + attention estimate (Kaplan et al. 2020,
    "Scaling laws", section 2.1; PaLM, appendix B), written out for an encoder-decoder.

    Multiplying an (m x k) by a (k x n) matrix is 2mkn FLOPs, and backward is twice forward (the gradients of both
    factors), so a training step is 3 x forward: 6 FLOPs per weight per token that passes through it (the 6N) plus
    3 x 4 x (keys attended) x d_model per token per attention layer (QK^T and AV). With d = d_model, f = ffn_dim,
    n layers per stack, V vocabulary, S source and T target tokens per sentence, forward FLOPs per sentence are

        encoder   S * n * (2 * (4d^2 + 2df) + 4Sd)         Q, K, V, output projections and FFN; self-attention
        decoder   T * n * (2 * (6d^2 + 2df) + 4Td + 4Sd)   the same with cross-attention's Q and output projection;
                                                            causal self-attention counted in full, as kernels run it
                  + S * n * 2 * 2d^2                       cross-attention's K, V of the encoder output
        output    T * 2dV                                  logits (the projection tied to the embedding)

    Embedding lookups, biases, norms, softmax, dropout and the loss are left out, and so is recomputation such as
    a flash-attention backward's (model FLOPs, not hardware FLOPs). Ours and Marian are the same network: one count.
    """
    d, f, n, vocabulary = args.d_model, args.ffn_dim, args.layers, args.vocab_size
    source = target = args.seq_len
    encoder = source * n * (2 * (4 * d * d + 2 * d * f) + 4 * source * d)
    decoder = target * n * (2 * (6 * d * d + 2 * d * f) + 4 * (target + source) * d) + source * n * 2 * 2 * d * d
    output = target * 2 * d * vocabulary
    return 3 * (encoder + decoder + output) / target


def device_name(device: torch.device) -> str:
    if device.type == "cpu":
        return "CPU"
    return torch.get_device_module(device).get_device_name(device)


def peak_tflops(args) -> tuple[float | None, str]:
    """The peak TFLOP/s that model FLOPs utilization divides by, and where it comes from (or why there is none)."""
    if args.peak_tflops is not None:
        return args.peak_tflops, "--peak_tflops"
    device = torch.device(args.device)
    if device.type == "cpu":
        return None, "no known peak for the CPU: pass --peak_tflops"
    name = device_name(device)
    if args.dtype in ("bfloat16", "float16"):
        for part, tflops in PEAK_TFLOPS:
            if part.lower() in name.lower():
                return tflops, f"assumed: {part}'s dense {args.dtype} peak"
    return None, f"no known {args.dtype} peak for {name}: pass --peak_tflops"


def flops_utilization(args, training: dict) -> dict:
    """Model FLOPs utilization of each model's median training tokens/s; None without a peak."""
    flops = training_flops_per_token(args)
    peak, source = peak_tflops(args)
    result = {"flops_per_token": flops, "peak_tflops": peak, "peak_source": source}
    for name in ("ours", "marian"):
        result[name] = None if peak is None else training[name] * flops / (peak * 1e12)
    result["ours_ratio"] = training["ours_ratio"]  # MFU is proportional to tokens/s
    return result


# ---------------------------------------------------------------------------------------------------------- report


def format_table(results: dict) -> str:
    rows = [("figure", "ours", "Marian", "ours / Marian")]

    def number(value, digits=1):
        return "-" if value is None else f"{value:,.{digits}f}"

    labels = {
        "train_tokens_per_s": "training tokens/s",
        "greedy_sentences_per_s": "greedy sentences/s",
        "beam4_sentences_per_s": "beam-4 sentences/s",
    }
    for key, label in labels.items():
        if key in results:
            entry = results[key]
            rows.append((label, number(entry["ours"]), number(entry["marian"]), f"{entry['ours_ratio']:.2f}x"))
        if key != "train_tokens_per_s":
            continue
        utilization = results.get("model_flops_utilization", {})
        if utilization.get("ours") is not None:
            rows.append(("model FLOPs utilization", f"{utilization['ours']:.1%}", f"{utilization['marian']:.1%}",
                         f"{utilization['ours_ratio']:.2f}x"))
        if "train_script_tokens_per_s" in results:
            entry = results["train_script_tokens_per_s"]
            rows.append(("training tokens/s, training script", number(entry["ours"]), "-",
                         f"{entry['vs_bare_loop']:.2f}x ours' bare loop"))
            if utilization.get("ours_script") is not None:
                rows.append(("model FLOPs utilization, training script", f"{utilization['ours_script']:.1%}", "-",
                             f"{entry['vs_bare_loop']:.2f}x ours' bare loop"))
    memory_labels = {
        "peak_training_memory_mib": "peak training memory, MiB (above model)",
        "peak_rss_mib": "peak RSS while training, MiB",
        "peak_memory_allocated_mib": "peak memory allocated while training, MiB",
    }
    for key, label in memory_labels.items():
        if key in results:
            entry = results[key]
            rows.append((label, number(entry["ours"], 0), number(entry["marian"], 0), f"{entry['ours_ratio']:.2f}x"))
    lines = [_markdown(rows)]
    engines = [name for name in ("ours_int8", "ctranslate2_fp32", "ctranslate2_int8")
               if any(name in results.get(key, {}) for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"))]
    if engines:
        rows = [("inference, sentences/s", "greedy", "greedy / ours", "beam-4", "beam-4 / ours",
                 "same translations as ours (greedy, beam-4)")]
        for name in ["ours", "marian", *engines]:
            names = {"ours": "ours (PyTorch)", "marian": "Marian (PyTorch)", "ours_int8": "ours int8 (PyTorch)"}
            cells = [names.get(name, name.replace("_", " "))]
            same = []
            for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"):
                entry = results.get(key, {})
                rate = entry.get(name)
                vs_ours = 1.0 if name == "ours" else entry.get(f"{name}_vs_ours")
                cells += [number(rate), "-" if rate is None else f"{vs_ours:.2f}x"]
                equal = entry.get("same_translations_as_ours", {}).get(name)
                same.append("-" if equal is None else "yes" if equal else "no")
            rows.append((*cells, "-" if name == "ours" else ", ".join(same)))
        lines.append(_markdown(rows))
    return "\n\n".join(lines)


def _markdown(rows) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


PRECISION = {
    "float32": "fp32",
    "bfloat16": "bf16 (the models themselves: weights, gradients, AdamW state; no autocast, no fp32 copy)",
    "float16": "fp16 (the models themselves: weights, gradients, AdamW state; no autocast, no loss scaling)",
}


def precision(args) -> str:
    if args.amp:
        return f"fp32 models under {args.dtype} autocast (as the Trainer's --{PRECISION[args.dtype][:4]})"
    return PRECISION[args.dtype]


def execution_line(args, results) -> str:
    """Device, attention, compilation, and the model FLOPs utilization's terms."""
    device = torch.device(args.device)
    where = "device cpu" if device.type == "cpu" else f"device {args.device} ({device_name(device)})"
    compiled = "no torch.compile"
    if args.compile:
        compiled = f"torch.compile ({args.compile_backend}{', ' + args.compile_mode if args.compile_mode else ''})"
    backend = f" ({args.sdpa_backend} kernels only)" if args.sdpa_backend else ""
    line = f"{where}, {args.attn_implementation} attention{backend}, {compiled}"
    if "model_flops_utilization" in results:
        entry = results["model_flops_utilization"]
        line += f"; training {entry['flops_per_token'] / 1e9:.3g} GFLOP per target token (6N + attention); MFU "
        if entry["peak_tflops"] is None:
            line += f"n/a ({entry['peak_source']})"
        else:
            line += f"against {entry['peak_tflops']:g} TFLOP/s ({entry['peak_source']})"
    return line


def main(argv=None):
    args = parse_arguments(argv)
    with sdpa_kernels(args.sdpa_backend):
        return run_benchmark(args)


def sdpa_kernels(backend: str | None):
    """Within it, sdpa attention runs `backend`'s kernel alone (torch's own choice for None)."""
    if backend is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[backend]))


def run_benchmark(args):
    from hf_vanilla_transformer.errors import usable_device

    if args.memory_worker:
        return memory_worker(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = usable_device(args.device)  # here, not when parsing: a GPU command line parses on any machine
    if (device.type, args.dtype) != ("cpu", "float32"):  # the int8 and CTranslate2 figures are the CPU's, from fp32
        args.skip = [*args.skip, *({"int8", "ctranslate2"} - set(args.skip))]
    if args.compile and "int8" not in args.skip:  # compiled code takes the float32 path: the row would be mislabelled
        args.skip = [*args.skip, "int8"]
    settings = {name: value for name, value in vars(args).items() if name != "memory_worker"}
    results = {"machine": machine_description(args), "settings": settings}
    started = time.perf_counter()
    ours, marian = build_models(args)

    def log(message):
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    ours.eval()
    marian.eval()
    ours_int8 = None
    if "int8" not in args.skip:
        from hf_vanilla_transformer.packed_linear import quantize_int8

        ours_int8 = quantize_int8(copy.deepcopy(ours))
    with tempfile.TemporaryDirectory() as directory:  # generation first, while both models hold the same weights
        exports = {}
        if "ctranslate2" not in args.skip:
            try:
                import ctranslate2  # noqa: F401

                exports = ctranslate2_exports(args, ours, directory)
            except ImportError:
                log("ctranslate2 is not installed: no CTranslate2 figures")
        for key, num_beams, skip in (("greedy_sentences_per_s", 1, "greedy"), ("beam4_sentences_per_s", 4, "beam")):
            if skip in args.skip:
                continue
            log(f"generation, {num_beams} beam(s)")
            results[key] = measure_generation(args, ours, marian, num_beams, device, ours_int8, exports)
        del ours_int8
    if "train" not in args.skip:  # the models' weights part here: their dropout masks differ
        log("training")
        results["train_tokens_per_s"] = run_training(args, ours, marian)
        results["model_flops_utilization"] = flops_utilization(args, results["train_tokens_per_s"])
        if "script" not in args.skip:
            log("training, the training script's loop")
            script = run_training_script_loop(args, ours)
            bare = results["train_tokens_per_s"]["ours"]
            results["train_script_tokens_per_s"] = {"ours": script, "vs_bare_loop": script / bare}
            utilization = results["model_flops_utilization"]
            if utilization["ours"] is not None:
                utilization["ours_script"] = utilization["ours"] * script / bare
    del ours, marian  # an accelerator's memory is measured in this process, with one model at a time
    if "memory" not in args.skip:
        on_cpu = device.type == "cpu"
        log("peak training memory" + (" (a subprocess per model)" if on_cpu else ""))
        memory = {name: measure_memory(args, name) for name in ("ours", "marian")}
        absolute = "peak_rss_mib" if on_cpu else "peak_memory_allocated_mib"
        for key, field in (("peak_training_memory_mib", "training_mib"), (absolute, "peak_mib")):
            results[key] = {name: memory[name][field] for name in memory}
            results[key]["ours_ratio"] = results[key]["ours"] / results[key]["marian"]
    results["machine"]["load_average_at_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results["seconds"] = time.perf_counter() - started
    log("done")

    machine = results["machine"]
    print(f"{machine['cpu']}, {machine['cpu_capability']} (packed fp32 GEMM {machine['fp32_packed_gemm']}), "
          f"{machine['cores']} cores, {machine['threads']} threads, torch {machine['torch']}, "
          f"transformers {machine['transformers']}, ctranslate2 {machine.get('ctranslate2', '-')}; load average "
          f"{machine['load_average_at_start']:.1f} at start, {machine['load_average_at_end']:.1f} at end")
    print(f"vocab {args.vocab_size}, d_model {args.d_model}, {args.layers}+{args.layers} layers, {args.heads} heads, "
          f"d_ff {args.ffn_dim}; training batch {args.batch_size} x {args.seq_len} tokens; generation "
          f"{args.gen_sentences} sentences of {args.gen_source_len} tokens -> {args.gen_tokens} tokens; "
          f"{precision(args)}; medians of {args.repeats} alternating rounds; a ratio is the median of the "
          "rounds' ratios")
    print(execution_line(args, results) + "\n")
    print(format_table(results))
    for note in unsteady_rounds(results):
        print(note)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    from hf_vanilla_transformer.errors import run_command

    run_command(main)
