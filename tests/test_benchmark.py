"""scripts/benchmark.py on tiny sizes: every figure is measured for both models and printed with its ratio."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
TINY = (
    "--vocab_size 120 --d_model 32 --layers 2 --heads 4 --ffn_dim 48 --batch_size 4 --seq_len 6 --train_steps 1 "
    "--warmup_steps 1 --gen_sentences 3 --gen_source_len 5 --gen_tokens 4 --repeats 2 --memory_steps 2 --threads 1"
).split()


def load_benchmark():
    spec = importlib.util.spec_from_file_location("benchmark_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def benchmark():
    return load_benchmark()


@pytest.fixture(scope="module")
def tiny_run(benchmark, tmp_path_factory):
    threads = torch.get_num_threads()
    path = tmp_path_factory.mktemp("bench") / "results.json"
    try:
        results = benchmark.main([*TINY, "--json", str(path)])
    finally:
        torch.set_num_threads(threads)
    return results, json.loads(path.read_text())


def test_every_figure_for_both_models(tiny_run):
    results, written = tiny_run
    for key in ("train_tokens_per_s", "greedy_sentences_per_s", "beam4_sentences_per_s", "peak_training_memory_mib"):
        entry = written[key]
        assert entry["ours"] > 0 and entry["marian"] > 0 and entry["ours_ratio"] > 0, key
    for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"):
        assert len(written[key]["rounds"]["ours"]) == 2  # --repeats
        assert written[key]["same_translations_as_ours"]["marian"]  # the same work: the same translations
    assert written["machine"]["threads"] == 1 and written["settings"]["d_model"] == 32
    assert written["peak_rss_mib"]["ours"] > written["peak_training_memory_mib"]["ours"]


def test_ctranslate2_figures(tiny_run):
    pytest.importorskip("ctranslate2")
    _, written = tiny_run
    for key in ("greedy_sentences_per_s", "beam4_sentences_per_s"):
        for engine in ("ctranslate2_fp32", "ctranslate2_int8"):
            assert written[key][engine] > 0
        assert written[key]["same_translations_as_ours"]["ctranslate2_fp32"]


def test_printed_table(benchmark, tiny_run):
    results, _ = tiny_run
    table = benchmark.format_table(results)
    for label in ("training tokens/s", "greedy sentences/s", "beam-4 sentences/s", "peak training memory",
                  "ours / Marian"):
        assert label in table
    assert f"{results['train_tokens_per_s']['ours_ratio']:.2f}x" in table


def test_ratio_is_the_median_of_per_round_ratios(benchmark):
    figure = benchmark.figure(10, {"ours": [1.0, 2.0, 4.0], "marian": [2.0, 2.0, 2.0], "engine": [1.0, 1.0, 1.0]})
    assert figure["ours"] == 5.0 and figure["marian"] == 5.0  # work / median time
    assert figure["ours_ratio"] == 1.0  # median of 2.0, 1.0, 0.5
    assert figure["marian_vs_ours"] == 1.0 and figure["engine_vs_ours"] == 2.0  # median of 1, 2, 4
    assert figure["rounds"]["ours"] == [10.0, 5.0, 2.5]


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
