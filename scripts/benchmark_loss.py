#!/usr/bin/env python
"""Memory and time of the label-smoothed training loss [5.4]: the model's chunked `translation_loss` against the
Trainer's `LabelSmoother` over float32 logits (how a bf16 training step computed it before: accelerate hands the
Trainer the logits in float32).

    python scripts/benchmark_loss.py                                  # CPU, bf16 logits, 4096 tokens, vocab 37000
    python scripts/benchmark_loss.py --device cuda --tokens 25000     # a GPU: the paper's ~25k tokens a step

A step takes the loss of random logits (tokens, vocab) and backpropagates it to them. Memory: the peak above the
logits, on the CPU the resident set size in a fresh process per loss, on an accelerator the memory allocated by
tensors. Time: medians over alternating rounds, and the median of the rounds' ratios.
"""

import argparse
import json
import statistics
import subprocess
import sys

import torch
from benchmark import DTYPES, alternate, machine_description, peak_memory, reset_peak_memory
from transformers.trainer_pt_utils import LabelSmoother

from hf_vanilla_transformer.errors import InputError, device_from_name, usable_device
from hf_vanilla_transformer.modeling_vanilla_transformer import translation_loss

LOSSES = {
    "label_smoother": lambda logits, labels, eps: LabelSmoother(epsilon=eps)({"logits": logits.float()}, labels),
    "chunked": lambda logits, labels, eps: translation_loss(logits, labels, label_smoothing=eps),
}


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=4096, help="target tokens a step")
    parser.add_argument("--vocab_size", type=int, default=37000)
    parser.add_argument("--label_smoothing", type=float, default=0.1)
    parser.add_argument("--dtype", default="bfloat16", choices=list(DTYPES), help="of the logits")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory_worker", choices=list(LOSSES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("tokens", "vocab_size", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}.")
    if not 0 <= args.label_smoothing <= 1:
        parser.error(f"--label_smoothing must be in [0, 1], got {args.label_smoothing}.")
    try:
        device_from_name(args.device)
    except InputError as error:
        parser.error(str(error))
    return args


def inputs(args):
    generator = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(1, args.tokens, args.vocab_size, generator=generator)
    labels = torch.randint(0, args.vocab_size, (1, args.tokens), generator=generator)
    labels[:, -args.tokens // 10 :] = -100  # padding
    dtype, device = DTYPES[args.dtype], torch.device(args.device)
    return logits.to(device, dtype).requires_grad_(), labels.to(device)


def step(args, name, logits, labels):
    LOSSES[name](logits, labels, args.label_smoothing).backward()
    logits.grad = None


def loss_memory(args, name) -> float:
    """MiB above the logits at the peak of one step; on the CPU in a fresh process."""
    device = torch.device(args.device)
    if device.type == "cpu" and args.memory_worker is None:
        command = [sys.executable, __file__, "--memory_worker", name]
        for option in ("tokens", "vocab_size", "label_smoothing", "dtype", "device"):
            command += [f"--{option}", str(getattr(args, option))]
        return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    tensors = inputs(args)
    step(args, name, *tensors)  # warm-up: kernels, allocator caches
    before = reset_peak_memory(device)
    step(args, name, *tensors)
    return peak_memory(device) - before


def main(argv=None):
    args = parse_arguments(argv)
    if args.memory_worker:
        print(json.dumps(loss_memory(args, args.memory_worker)))
        return
    device = usable_device(args.device)  # here, not when parsing: a GPU command line parses on any machine
    memory = {name: loss_memory(args, name) for name in LOSSES}
    tensors = inputs(args)
    times = alternate(args.repeats, {name: lambda name=name: step(args, name, *tensors) for name in LOSSES}, device)
    ratio = statistics.median(old / new for old, new in zip(times["label_smoother"], times["chunked"]))
    logits_mib = args.tokens * args.vocab_size * DTYPES[args.dtype].itemsize / 2**20
    machine = machine_description(argparse.Namespace(threads=None, device=args.device))
    threads = machine["threads"]
    where = machine["device"] if device.type != "cpu" else f"{machine['cpu']}, {threads} thread{'s' * (threads != 1)}"
    print(f"{where}; {args.tokens} tokens x vocab {args.vocab_size}, {args.dtype} logits ({logits_mib:.1f} MiB), "
          f"label smoothing {args.label_smoothing}")
    for name in LOSSES:
        milliseconds = statistics.median(times[name]) * 1e3
        print(f"  {name:15s} peak {memory[name]:8.1f} MiB above the logits, {milliseconds:8.1f} ms a step (loss and "
              "backward)")
    base = memory["label_smoother"]  # 0 when too small for the resident set size to show it
    compared = f"{memory['chunked'] / base:.2f}x the memory" if base > 0 else "memory too small to compare"
    print(f"  chunked: {compared}, {ratio:.2f}x the speed")


if __name__ == "__main__":
    from hf_vanilla_transformer.errors import run_command

    run_command(main)
