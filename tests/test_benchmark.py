"""scripts/benchmark.py on tiny sizes: every figure is measured for both models and printed with its ratio."""

import importlib.util
import json
import shlex
import tempfile
import weakref
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
TINY = shlex.split(
    "--vocab_size 120 --d_model 32 --layers 2 --heads 4 --ffn_dim 48 --batch_size 4 --seq_len 6 --train_steps 1 "
    "--warmup_steps 1 --gen_sentences 3 --gen_source_len 5 --gen_tokens 4 --repeats 2 --memory_steps 2 --threads 1"
)


def load_benchmark():
    spec = importlib.util.spec_from_file_location("benchmark_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def benchmark():
    return load_benchmark()


def run(benchmark, directory, *options):
    """main() on the tiny sizes plus `options`: the results it returns and those it wrote as JSON."""
    threads = torch.get_num_threads()
    path = directory / "results.json"
    try:
        results = benchmark.main([*TINY, *options, "--json", str(path)])
    finally:
        torch.set_num_threads(threads)
    return results, json.loads(path.read_text())


@pytest.fixture(scope="module")
def tiny_run(benchmark, tmp_path_factory):
    return run(benchmark, tmp_path_factory.mktemp("bench"))


def test_every_figure_for_both_models(tiny_run):
    _, written = tiny_run
    for key in ("train_tokens_per_s", "greedy_sentences_per_s", "beam4_sentences_per_s", "peak_training_memory_mib"):
        entry = written[key]
        assert entry["ours"] > 0 and entry["marian"] > 0 and entry["ours_ratio"] > 0, key
    for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"):
        assert len(written[key]["rounds"]["ours"]) == 2  # --repeats
        assert written[key]["same_translations_as_ours"]["marian"]  # the same work: the same translations
    assert written["machine"]["threads"] == 1 and written["settings"]["d_model"] == 32
    assert written["peak_rss_mib"]["ours"] > written["peak_training_memory_mib"]["ours"]
    script = written["train_script_tokens_per_s"]
    assert script["ours"] > 0 and script["vs_bare_loop"] == pytest.approx(
        script["ours"] / written["train_tokens_per_s"]["ours"])


def test_ctranslate2_figures(tiny_run):
    pytest.importorskip("ctranslate2")
    _, written = tiny_run
    for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"):
        for engine in ("ctranslate2_fp32", "ctranslate2_int8"):
            assert written[key][engine] > 0
        assert written[key]["same_translations_as_ours"]["ctranslate2_fp32"]


def test_ctranslate2_runs_in_rounds_of_its_own_after_pytorch(benchmark, monkeypatch):
    """A CTranslate2 translator that has translated slowed PyTorch's decoding beside it by ~40% (its threads keep
    the cores busy while it lives): the PyTorch engines' rounds run with no translator alive, CTranslate2's after."""
    pytest.importorskip("ctranslate2")
    args = benchmark.parse_arguments(TINY)
    ours, marian = (model.eval() for model in benchmark.build_models(args))
    alive, rounds = [], []
    make_translators = benchmark.ctranslate2_translators

    def tracked_translators(*arguments):
        translators = make_translators(*arguments)
        alive.extend(weakref.ref(translator) for translator in translators.values())
        return translators

    def recorded_alternate(repeats, runners, device):
        rounds.append((sorted(runners), sum(ref() is not None for ref in alive)))
        return {name: [1.0] * repeats for name in runners}

    monkeypatch.setattr(benchmark, "ctranslate2_translators", tracked_translators)
    monkeypatch.setattr(benchmark, "alternate", recorded_alternate)
    with tempfile.TemporaryDirectory() as directory:
        exports = benchmark.ctranslate2_exports(args, ours, directory)
        result = benchmark.measure_generation(args, ours, marian, 1, torch.device("cpu"), None, exports)
    assert rounds == [(["marian", "ours"], 0), (["ctranslate2_fp32", "ctranslate2_int8"], 2)]
    assert not any(ref() is not None for ref in alive)  # freed after their rounds
    assert result["ctranslate2_fp32_vs_ours"] == pytest.approx(result["ctranslate2_fp32"] / result["ours"])
    assert result["same_translations_as_ours"]["ctranslate2_fp32"]


def test_int8_figures_next_to_ctranslate2(benchmark, tiny_run):
    results, written = tiny_run
    for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"):
        assert written[key]["ours_int8"] > 0 and written[key]["ours_int8_vs_ours"] > 0
    assert "ours int8 (PyTorch)" in benchmark.format_table(results)
    assert written["machine"]["fp32_packed_gemm"] in ("mkl", "onednn", "none")


def test_printed_table(benchmark, tiny_run):
    results, _ = tiny_run
    # "AMD EPYC" names CPUs of AVX2 and of AVX-512, whose figures differ: the instruction set goes with it
    assert results["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    table = benchmark.format_table(results)
    for label in ("training tokens/s", "greedy sentences/s", "beam-4 sentences/s", "peak training memory",
                  "ours / Marian"):
        assert label in table
    assert f"{results['train_tokens_per_s']['ours_ratio']:.2f}x" in table
    script = results["train_script_tokens_per_s"]
    row = next(line for line in table.splitlines() if line.startswith("| training tokens/s, training script "))
    assert f"| {script['ours']:,.1f} " in row
    assert f"{script['vs_bare_loop']:.2f}x ours' bare loop" in table


def test_the_training_script_loop_runs_the_scripts_trainer_on_the_same_batches(benchmark, monkeypatch, caplog):
    """Its Trainer: TokenBatchingSeq2SeqTrainer with the script's recipe (label smoothing, fused AdamW, its collator)
    over token batches of --batch_size x --seq_len, each of which it trains once."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer

    seen = []
    train = TokenBatchingSeq2SeqTrainer.train

    def spy(self, *args, **kwargs):
        seen.append((self.args, [batch["labels"].shape for batch in self.get_train_dataloader()]))
        return train(self, *args, **kwargs)

    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "train", spy)
    args = benchmark.parse_arguments([*TINY, "--train_steps", "2"])
    ours, _ = benchmark.build_models(args)
    assert benchmark.run_training_script_loop(args, ours) > 0
    (training_args, shapes), = seen
    assert training_args.label_smoothing_factor == 0.1 and training_args.optim == "adamw_torch_fused"
    assert training_args.max_steps == 1 + 2 * 2 and shapes == [(4, 6)] * 5  # warm-up + steps x repeats
    assert "is not below --max_steps" not in caplog.text  # the paper's 4000 warmup steps, warned about in a short run
    # random labels never ended with </s>: the model's warning about a tokenizer that appends none, on every run
    assert "ends with the end token" not in caplog.text
    batch = benchmark.training_batch(args, torch.Generator().manual_seed(0))
    assert (batch["labels"][:, -1] == ours.config.eos_token_id).all()


def test_tokens_per_batch_sets_the_sentences_per_batch(benchmark, capsys):
    assert benchmark.parse_arguments(["--tokens_per_batch", "25000", "--seq_len", "32"]).batch_size == 781
    for flags, message in ((["--tokens_per_batch", "20"], "less than one sentence"),
                           (["--amp"], "--amp trains under autocast to --dtype"),
                           (["--device", "gpu"], "--device gpu: not a device name")):
        with pytest.raises(SystemExit) as exit_info:
            benchmark.parse_arguments(flags)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_profile_writes_where_the_bare_loops_step_spends_its_time(benchmark, tmp_path, capsys):
    profile = tmp_path / "profile.txt"
    run(benchmark, tmp_path, "--skip", "greedy", "beam", "memory", "script", "--profile", str(profile))
    table = profile.read_text()
    assert "Self CPU" in table and "aten::mm" in table and "Optimizer.step#AdamW.step" in table
    for flags, message in ((["--profile", str(tmp_path)], f"--profile {tmp_path} is a folder"),
                           (["--profile", str(profile), "--skip", "train"], "leave train out of --skip")):
        with pytest.raises(SystemExit) as exit_info:
            benchmark.parse_arguments([*TINY, *flags])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["math", "flash"])
def test_sdpa_backend_picks_the_attention_kernel(benchmark, tmp_path, capsys, backend):
    profile = tmp_path / "profile.txt"
    run(benchmark, tmp_path, "--skip", "greedy", "beam", "memory", "script", "--profile", str(profile),
        "--sdpa_backend", backend)
    table = profile.read_text()
    assert ("aten::_scaled_dot_product_flash_attention_for_cpu " in table) == (backend == "flash")
    assert ("aten::_softmax " in table) == (backend == "math")  # the math kernel is matmuls and a softmax
    assert f"sdpa attention ({backend} kernels only)" in capsys.readouterr().out
    for flags, message in ((["--sdpa_backend", "cudnn"], "--sdpa_backend cudnn is a GPU kernel"),
                           (["--sdpa_backend", "math", "--attn_implementation", "eager"],
                            "leave --attn_implementation")):
        with pytest.raises(SystemExit) as exit_info:
            benchmark.parse_arguments([*TINY, *flags])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_amp_trains_fp32_models_under_autocast(benchmark, tmp_path, capsys):
    args = benchmark.parse_arguments([*TINY, "--dtype", "bfloat16", "--amp"])
    for model in benchmark.build_models(args):
        assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}
    _, written = run(benchmark, tmp_path, "--dtype", "bfloat16", "--amp", "--skip", "greedy", "beam", "memory")
    assert written["train_tokens_per_s"]["ours"] > 0 and written["train_script_tokens_per_s"]["ours"] > 0
    assert "fp32 models under bfloat16 autocast (as the Trainer's --bf16)" in capsys.readouterr().out


def test_ratio_is_the_median_of_per_round_ratios(benchmark):
    figure = benchmark.figure(10, {"ours": [1.0, 2.0, 4.0], "marian": [2.0, 2.0, 2.0], "engine": [1.0, 1.0, 1.0]})
    assert figure["ours"] == 5.0 and figure["marian"] == 5.0  # work / median time
    assert figure["ours_ratio"] == 1.0  # median of 2.0, 1.0, 0.5
    assert figure["marian_vs_ours"] == 1.0 and figure["engine_vs_ours"] == 2.0  # median of 1, 2, 4
    assert figure["rounds"]["ours"] == [10.0, 5.0, 2.5]


def test_rounds_that_disagree_get_a_note(benchmark):
    """Two rounds of a busy machine printed 133 tokens/s for ours and 607 for Marian, and beside them a ratio of
    3.28x: the median of two rounds' ratios is their mean, which one outlier round decides. The table now says so."""
    busy = benchmark.figure(10, {"ours": [0.1, 0.002], "marian": [0.01, 0.02]})
    steady = benchmark.figure(10, {"ours": [1.0, 1.1, 1.0], "marian": [1.2, 1.3, 1.2]})
    notes = benchmark.unsteady_rounds({"train_tokens_per_s": busy, "greedy_sentences_per_s": steady})
    assert notes == ["note: training tokens/s: the rounds' ratios range from 0.10x to 10.00x, so the machine was not "
                     "steady (other work, or too few rounds): rerun it idle, with more --repeats."]


@pytest.mark.parametrize("size", ["1", "3"])
def test_a_vocabulary_without_room_for_words_is_one_message(benchmark, capsys, size):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.parse_arguments(["--vocab_size", size])
    assert exit_info.value.code == 2
    assert f"--vocab_size must be at least 4 (3 special tokens and a word), got {size}." in capsys.readouterr().err


def test_rounds_alternate_the_order(benchmark):
    calls = []
    benchmark.alternate(3, {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")})
    assert calls == ["a", "b", "b", "a", "a", "b"]


def test_same_function(benchmark):
    """The benchmark compares the same network: our converted model gives Marian's logits."""
    args = benchmark.parse_arguments(TINY)
    ours, marian = benchmark.build_models(args)
    batch = benchmark.training_batch(args, torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(**batch).logits, marian.eval()(**batch).logits, atol=1e-4, rtol=1e-4)


def test_models_on_the_device_in_the_dtype_with_the_attention(benchmark):
    args = benchmark.parse_arguments([*TINY, "--dtype", "bfloat16", "--attn_implementation", "eager"])
    for model in benchmark.build_models(args):
        assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}
        assert model.config._attn_implementation == "eager"
    assert benchmark.training_batch(args, torch.Generator())["input_ids"].device.type == "cpu"


def test_bfloat16_on_the_cpu(benchmark, tmp_path, capsys):
    _, written = run(benchmark, tmp_path, "--dtype", "bfloat16", "--skip", "memory")
    for key in ("train_tokens_per_s", "greedy_sentences_per_s", "beam4_sentences_per_s"):
        assert written[key]["ours"] > 0 and written[key]["marian"] > 0, key
    assert "ctranslate2_fp32" not in written["greedy_sentences_per_s"]  # CTranslate2 figures: fp32 only
    assert "ours_int8" not in written["greedy_sentences_per_s"]  # int8 figures: from fp32 only
    assert written["settings"]["dtype"] == "bfloat16"
    assert "; bf16 (the models themselves: weights, gradients, AdamW state; no autocast" in capsys.readouterr().out


def test_compiled_training(benchmark, tmp_path, monkeypatch):
    compile_, compiled = torch.compile, []

    def spy(model, **options):
        compiled.append((type(model).__name__, options["backend"]))
        return compile_(model, **options)

    monkeypatch.setattr(torch, "compile", spy)
    torch.compiler.reset()
    _, written = run(benchmark, tmp_path, "--compile", "--compile_backend", "aot_eager",
                     "--skip", "greedy", "beam", "memory", "ctranslate2", "script")
    torch.compiler.reset()
    assert written["train_tokens_per_s"]["ours"] > 0 and written["train_tokens_per_s"]["marian"] > 0
    assert sorted(compiled) == [("MarianMTModel", "aot_eager"),
                                ("VanillaTransformerForConditionalGeneration", "aot_eager")]


def test_compile_mode_reaches_both_training_loops(benchmark, monkeypatch):
    """--compile_mode reduce-overhead (CUDA graphs) compiles the bare loop's model in that mode and gives the training
    script's loop the same --torch_compile_mode, so that the two are measured alike."""
    args = benchmark.parse_arguments([*TINY, "--compile", "--compile_mode", "reduce-overhead"])
    options = []
    monkeypatch.setattr(torch, "compile", lambda model, **given: options.append(given) or model)
    benchmark.for_training(args, torch.nn.Linear(2, 2))
    assert options == [{"backend": "inductor", "mode": "reduce-overhead"}]

    class Parsed(Exception):
        pass

    def parse_arguments(flags):
        raise Parsed(flags)

    monkeypatch.setattr("hf_vanilla_transformer.training.parse_arguments", parse_arguments)
    with pytest.raises(Parsed) as parsed:
        benchmark.run_training_script_loop(args, None)
    flags = parsed.value.args[0]
    assert flags[flags.index("--torch_compile_mode") + 1] == "reduce-overhead"
    assert "torch.compile (inductor, reduce-overhead)" in benchmark.execution_line(args, {})


@pytest.mark.parametrize("flags", [["--compile_mode", "reduce-overhead"],
                                   ["--compile", "--compile_backend", "eager", "--compile_mode", "max-autotune"]])
def test_compile_mode_is_inductors(benchmark, flags, capsys):
    with pytest.raises(SystemExit) as exit_:
        benchmark.parse_arguments([*TINY, *flags])
    assert exit_.value.code == 2
    assert "--compile_mode is inductor's: give it with --compile and the default --compile_backend." in \
        capsys.readouterr().err


def test_compiled_generation(benchmark):
    """--compile: a static cache, so that generate() compiles each model's decoding step (into `_compiled_call`)."""
    args = benchmark.parse_arguments([*TINY, "--compile", "--compile_backend", "eager", "--gen_tokens", "2"])
    ours, marian = (model.eval() for model in benchmark.build_models(args))
    torch.compiler.reset()
    _, outputs = benchmark.generation_runners(args, ours, marian, 1)
    torch.compiler.reset()
    assert outputs["marian"] == outputs["ours"]
    assert hasattr(ours, "_compiled_call") and hasattr(marian, "_compiled_call")


def test_no_int8_row_under_compile(benchmark, tmp_path):
    """Compiled code multiplies in fp32 (the packed int8 path is eager's): the "ours int8" row measured a compiled
    fp32 decoding under int8's name."""
    results, _ = run(benchmark, tmp_path, "--compile", "--compile_backend", "eager", "--gen_tokens", "2", "--skip",
                     "train", "beam", "memory", "ctranslate2")
    torch.compiler.reset()
    assert "ours_int8" not in results["greedy_sentences_per_s"] and "int8" in results["settings"]["skip"]


def test_flops_per_token_against_a_flop_counter(benchmark):
    """The analytic count against torch's count of the matmul FLOPs of a training step's forward and backward, for
    ours and Marian. Eager attention, whose matmuls torch counts (it has no formula for the CPU's sdpa kernel); 24
    tokens, so that attention is a fifth of the count."""
    from torch.utils.flop_counter import FlopCounterMode

    args = benchmark.parse_arguments([*TINY, "--seq_len", "24", "--attn_implementation", "eager"])
    batch = benchmark.training_batch(args, torch.Generator().manual_seed(0))
    for model in benchmark.build_models(args):
        with FlopCounterMode(display=False) as counter:
            model.train()(**batch).loss.backward()
        per_token = counter.get_total_flops() / (args.batch_size * args.seq_len)
        assert benchmark.training_flops_per_token(args) == pytest.approx(per_token, rel=0.01)


def test_model_flops_utilization_from_peak_tflops(benchmark, tmp_path, capsys):
    _, written = run(benchmark, tmp_path, "--peak_tflops", "0.002", "--skip", "greedy", "beam", "memory", "ctranslate2")
    flops = benchmark.training_flops_per_token(benchmark.parse_arguments(TINY))
    utilization = written["model_flops_utilization"]
    assert utilization["flops_per_token"] == flops and utilization["peak_tflops"] == 0.002
    for name in ("ours", "marian"):
        assert utilization[name] == pytest.approx(written["train_tokens_per_s"][name] * flops / 2e9)
    output = capsys.readouterr().out
    assert "| model FLOPs utilization" in output and "MFU against 0.002 TFLOP/s (--peak_tflops)" in output


def test_no_model_flops_utilization_on_the_cpu_without_a_peak(benchmark, tiny_run):
    results, written = tiny_run
    assert written["model_flops_utilization"]["ours"] is None
    assert "model FLOPs utilization" not in benchmark.format_table(results)  # the default table as it was
    line = benchmark.execution_line(benchmark.parse_arguments(TINY), results)
    assert "MFU n/a (no known peak for the CPU: pass --peak_tflops)" in line


@pytest.mark.parametrize(
    ("name", "dtype", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "bfloat16", 989.4),
        ("NVIDIA H100 PCIe", "float16", 756.0),
        ("NVIDIA H200", "bfloat16", 989.4),
        ("NVIDIA A100-SXM4-80GB", "bfloat16", 312.0),
        ("NVIDIA H100 80GB HBM3", "float32", None),  # no fp32 peaks in the table
        ("NVIDIA L4", "bfloat16", None),
    ],
)
def test_peak_of_known_accelerators(benchmark, monkeypatch, name, dtype, peak):
    monkeypatch.setattr(benchmark, "device_name", lambda device: name)
    args = benchmark.parse_arguments(["--device", "cuda", "--dtype", dtype])
    assert benchmark.peak_tflops(args)[0] == peak
    args.peak_tflops = 500.0
    assert benchmark.peak_tflops(args) == (500.0, "--peak_tflops")


def test_help_shows_the_gpu_command_lines(benchmark, capsys):
    with pytest.raises(SystemExit):
        benchmark.parse_arguments(["--help"])
    output = capsys.readouterr().out
    assert "python scripts/benchmark.py --device cuda --dtype bfloat16 " in output
    assert "python scripts/benchmark.py --device cuda --dtype bfloat16 --compile" in output
    assert "--tokens_per_batch 25000 \\\n        --seq_len 32" in output  # a command on two lines, as written
