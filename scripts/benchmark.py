#!/usr/bin/env python
"""Speed of our model against MarianMTModel (the same network inside transformers), and of its CTranslate2 export.

    python scripts/benchmark.py                          # the paper's base size, vocab 8000, batch 32 x 32 tokens
    python scripts/benchmark.py --json bench.json --repeats 7
    python scripts/benchmark.py --d_model 64 --layers 2 --ffn_dim 128 --vocab_size 500 --repeats 2  # quick look

Both models get the same weights (ours is `from_marian(marian)`) and run alternately in one process, so that a
machine that speeds up or slows down affects both; each figure is the median over --repeats rounds and the ratio
is the median of the per-round ratios. Figures, all fp32 on the CPU with --threads threads:
  training tokens/s: target tokens per second of forward + backward + AdamW step, train mode (dropout on);
  greedy / beam-4 sentences/s: generate() of --gen_sentences sources of --gen_source_len tokens into exactly
      --gen_tokens new tokens (min = max new tokens, so that both produce the same amount of work);
  peak training memory: the highest resident set size while training minus the size just before the first step
      (weights, gradients, optimizer state and activations; each model in a fresh subprocess, peak reset through
      /proc/self/clear_refs), and the absolute peak;
  CTranslate2: our model exported with export_ctranslate2, fp32 and int8 weights, greedy and beam 4, same sources
      and lengths, --threads intra-op threads.
"""

from __future__ import annotations

import argparse
import gc
import json
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


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    size = parser.add_argument_group("model size (defaults: the paper's base model with an 8000-token vocabulary)")
    size.add_argument("--vocab_size", type=int, default=8000)
    size.add_argument("--d_model", type=int, default=512)
    size.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    size.add_argument("--heads", type=int, default=8)
    size.add_argument("--ffn_dim", type=int, default=2048)
    work = parser.add_argument_group("work")
    work.add_argument("--batch_size", type=int, default=32, help="training sentences per step")
    work.add_argument("--seq_len", type=int, default=32, help="training source and target length")
    work.add_argument("--train_steps", type=int, default=3, help="timed training steps per model per round")
    work.add_argument("--warmup_steps", type=int, default=1, help="untimed training steps per model first")
    work.add_argument("--gen_sentences", type=int, default=16)
    work.add_argument("--gen_source_len", type=int, default=30)
    work.add_argument("--gen_tokens", type=int, default=30, help="new tokens per sentence (min and max)")
    work.add_argument("--repeats", type=int, default=5, help="alternating rounds; figures are medians over them")
    work.add_argument("--memory_steps", type=int, default=2,
                      help="training steps in each memory subprocess (the second has the optimizer state too)")
    run = parser.add_argument_group("run")
    run.add_argument("--threads", type=int, default=None, help="torch and CTranslate2 threads (default: all cores)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--skip", nargs="*", default=[], choices=["train", "greedy", "beam", "memory", "ctranslate2"],
                     help="figures to leave out")
    run.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    run.add_argument("--memory_worker", choices=["ours", "marian"], help=argparse.SUPPRESS)
    return parser.parse_args(argv)


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
        eos_token_id=2,
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
    return ours, marian


def build_one(args, which):
    """One model for a memory subprocess; ours is built from the converted config, without a Marian beside it."""
    from transformers import MarianMTModel

    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.conversion import _config_from_marian

    torch.manual_seed(args.seed)
    if which == "marian":
        return MarianMTModel(marian_config(args))
    return VanillaTransformerForConditionalGeneration(_config_from_marian(marian_config(args)))


def training_batch(args, generator):
    input_ids = torch.randint(3, args.vocab_size, (args.batch_size, args.seq_len), generator=generator)
    labels = torch.randint(3, args.vocab_size, (args.batch_size, args.seq_len), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}


def generation_batch(args, generator):
    input_ids = torch.randint(3, args.vocab_size, (args.gen_sentences, args.gen_source_len), generator=generator)
    return input_ids, torch.ones_like(input_ids)


class Trainer:
    """Forward, backward and AdamW step on a fixed batch."""

    def __init__(self, model, batch):
        self.model, self.batch = model.train(), batch
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(self):
        loss = self.model(**self.batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def timed(function, *args, **kwargs) -> float:
    start = time.perf_counter()
    function(*args, **kwargs)
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------------------- memory


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def memory_worker(args):
    """In a fresh process: build one model and its optimizer, reset the peak RSS, train, print the peak."""
    torch.set_num_threads(args.threads or torch.get_num_threads())
    model = build_one(args, args.memory_worker)
    trainer = Trainer(model, training_batch(args, torch.Generator().manual_seed(args.seed)))
    gc.collect()
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak RSS, to the current RSS
    for _ in range(args.memory_steps):
        trainer.step()
    peak = _status_kib("VmHWM")
    print(json.dumps({"before_mib": before / 1024, "peak_mib": peak / 1024, "training_mib": (peak - before) / 1024}))


def measure_memory(args, which) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--memory_worker", which]
    for name in ("vocab_size", "d_model", "layers", "heads", "ffn_dim", "batch_size", "seq_len", "memory_steps",
                 "seed", "threads"):
        value = getattr(args, name)
        if value is not None:
            command += [f"--{name}", str(value)]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
    return json.loads(output.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------------- figures


def alternate(rounds: int, runners: dict) -> dict[str, list[float]]:
    """Time each runner once per round, reversing the order every other round."""
    times = {name: [] for name in runners}
    names = list(runners)
    for round_index in range(rounds):
        for name in names if round_index % 2 == 0 else names[::-1]:
            times[name].append(timed(runners[name]))
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


def run_training(args, ours, marian):
    batch = training_batch(args, torch.Generator().manual_seed(args.seed))
    trainers = {"ours": Trainer(ours, batch), "marian": Trainer(marian, batch)}
    for trainer in trainers.values():
        for _ in range(args.warmup_steps):
            trainer.step()

    def runner(trainer):
        def steps():
            for _ in range(args.train_steps):
                trainer.step()

        return steps

    times = alternate(args.repeats, {name: runner(trainer) for name, trainer in trainers.items()})
    for model in (ours, marian):
        model.eval()
        model.zero_grad(set_to_none=True)
    del trainers
    gc.collect()
    return figure(args.batch_size * args.seq_len * args.train_steps, times)


def generation_runners(args, ours, marian, num_beams, translators):
    """Runners for each engine, and whether each one's warm-up translations equal ours (the same work)."""
    input_ids, attention_mask = generation_batch(args, torch.Generator().manual_seed(args.seed + 1))
    options = dict(
        attention_mask=attention_mask,
        num_beams=num_beams,
        do_sample=False,
        max_new_tokens=args.gen_tokens,
        min_new_tokens=args.gen_tokens,
    )
    if num_beams > 1:
        options.update(length_penalty=0.6, early_stopping=True)

    @torch.inference_mode()
    def generate(model):
        return model.generate(input_ids, **options)[:, 1:].tolist()  # without the start token

    runners = {"ours": lambda: generate(ours), "marian": lambda: generate(marian)}
    if translators:
        source = [[str(i) for i in row] for row in input_ids.tolist()]
        ct2_options = dict(
            beam_size=num_beams,
            length_penalty=0.6 if num_beams > 1 else 0.0,
            max_decoding_length=args.gen_tokens,
            min_decoding_length=args.gen_tokens,
            return_end_token=True,
        )

        def translate(translator):
            results = translator.translate_batch(source, **ct2_options)
            return [[int(token) for token in result.hypotheses[0]] for result in results]

        for name, translator in translators.items():
            runners[name] = (lambda t: lambda: translate(t))(translator)
    outputs = {name: runner() for name, runner in runners.items()}  # also the warm-up
    same = {name: output == outputs["ours"] for name, output in outputs.items() if name != "ours"}
    return runners, same


def ctranslate2_translators(args, ours, directory):
    import ctranslate2

    from hf_vanilla_transformer.export import export_ctranslate2

    vocabulary = [str(i) for i in range(args.vocab_size)]
    threads = args.threads or torch.get_num_threads()
    translators = {}
    for name, quantization in (("ctranslate2_fp32", None), ("ctranslate2_int8", "int8")):
        out_dir = export_ctranslate2(ours, Path(directory) / name, quantization=quantization, vocabulary=vocabulary)
        translators[name] = ctranslate2.Translator(
            str(out_dir), device="cpu", compute_type="float32" if quantization is None else "int8",
            intra_threads=threads,
        )
    return translators


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

    description = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": args.threads or torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "load_average_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    try:
        import ctranslate2

        description["ctranslate2"] = ctranslate2.__version__
    except ImportError:
        pass
    return description


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
    if "peak_training_memory_mib" in results:
        entry = results["peak_training_memory_mib"]
        rows.append(("peak training memory, MiB (above model)", number(entry["ours"], 0), number(entry["marian"], 0),
                     f"{entry['ours_ratio']:.2f}x"))
        entry = results["peak_rss_mib"]
        rows.append(("peak RSS while training, MiB", number(entry["ours"], 0), number(entry["marian"], 0),
                     f"{entry['ours_ratio']:.2f}x"))
    lines = [_markdown(rows)]
    engines = [name for name in ("ctranslate2_fp32", "ctranslate2_int8")
               if any(name in results.get(key, {}) for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"))]
    if engines:
        rows = [("inference, sentences/s", "greedy", "greedy / ours", "beam-4", "beam-4 / ours",
                 "same translations as ours (greedy, beam-4)")]
        for name in ["ours", "marian", *engines]:
            cells = [{"ours": "ours (PyTorch)", "marian": "Marian (PyTorch)"}.get(name, name.replace("_", " "))]
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


def main(argv=None):
    args = parse_arguments(argv)
    if args.memory_worker:
        return memory_worker(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = {name: value for name, value in vars(args).items() if name != "memory_worker"}
    results = {"machine": machine_description(args), "settings": settings}
    started = time.perf_counter()
    ours, marian = build_models(args)

    def log(message):
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    ours.eval()
    marian.eval()
    with tempfile.TemporaryDirectory() as directory:  # generation first, while both models hold the same weights
        translators = {}
        if "ctranslate2" not in args.skip:
            try:
                translators = ctranslate2_translators(args, ours, directory)
            except ImportError:
                log("ctranslate2 is not installed: no CTranslate2 figures")
        for key, num_beams, skip in (("greedy_sentences_per_s", 1, "greedy"), ("beam4_sentences_per_s", 4, "beam")):
            if skip in args.skip:
                continue
            log(f"generation, {num_beams} beam(s)")
            runners, same = generation_runners(args, ours, marian, num_beams, translators)
            results[key] = figure(args.gen_sentences, alternate(args.repeats, runners))
            results[key]["same_translations_as_ours"] = same
        del translators
    if "train" not in args.skip:  # the models' weights part here: their dropout masks differ
        log("training")
        results["train_tokens_per_s"] = run_training(args, ours, marian)
    if "memory" not in args.skip:
        log("peak training memory (a subprocess per model)")
        memory = {name: measure_memory(args, name) for name in ("ours", "marian")}
        for key, field in (("peak_training_memory_mib", "training_mib"), ("peak_rss_mib", "peak_mib")):
            results[key] = {name: memory[name][field] for name in memory}
            results[key]["ours_ratio"] = results[key]["ours"] / results[key]["marian"]
    results["machine"]["load_average_at_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results["seconds"] = time.perf_counter() - started
    log("done")

    machine = results["machine"]
    print(f"{machine['cpu']}, {machine['cores']} cores, {machine['threads']} threads, torch {machine['torch']}, "
          f"transformers {machine['transformers']}, ctranslate2 {machine.get('ctranslate2', '-')}; load average "
          f"{machine['load_average_at_start']:.1f} at start, {machine['load_average_at_end']:.1f} at end")
    print(f"vocab {args.vocab_size}, d_model {args.d_model}, {args.layers}+{args.layers} layers, {args.heads} heads, "
          f"d_ff {args.ffn_dim}; training batch {args.batch_size} x {args.seq_len} tokens; generation "
          f"{args.gen_sentences} sentences of {args.gen_source_len} tokens -> {args.gen_tokens} tokens; fp32; "
          f"medians of {args.repeats} alternating rounds; a ratio is the median of the rounds' ratios\n")
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
