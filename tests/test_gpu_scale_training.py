"""Training at GPU scale (issue 11): batches in a handful of shapes, steps that never wait on the device, the GPU
defaults of the training script, and --torch_compile without a recompile per step. The CUDA tests skip on a CPU."""

import contextlib
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import REPO, tiny_config
from datasets import Dataset, DatasetDict
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerFast, TrainerCallback
from tokenizers import Tokenizer, models

import hf_vanilla_transformer.generation as generation
import hf_vanilla_transformer.input_checks as input_checks
from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.batching import BucketPaddingCollator, TokenBatchSampler, bucket_length
from hf_vanilla_transformer.data import check_token_ids_fit
from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.training import GPU_DEFAULTS, main, parse_arguments, recipe_defaults

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TINY_RUN = [
    "--number_words_train_size", "2000", "--number_words_eval_size", "8", "--d_model", "32", "--layers", "1",
    "--attention_heads", "4", "--ffn_dim", "64", "--vocab_size", "300", "--eval_strategy", "no",
    "--save_strategy", "no", "--num_samples_to_print", "0", "--max_eval_samples", "4", "--max_predict_samples", "4",
]


def test_bucket_lengths_are_multiples_of_8_at_most_7_tokens_or_an_eighth_longer():
    lengths = range(1, 1025)
    buckets = [bucket_length(n) for n in lengths]
    assert [bucket_length(n) for n in (1, 8, 9, 17, 64, 65, 128, 129, 144, 145, 256, 257, 1000)] == [
        8, 8, 16, 24, 64, 72, 128, 144, 144, 160, 256, 288, 1024]
    assert all(b % 8 == 0 and n <= b <= max(n + 7, 1.125 * n) for n, b in zip(lengths, buckets))
    assert buckets == sorted(buckets)
    assert len(set(buckets)) == 16 + 8 + 8 + 8  # up to 128 by 8, to 256 by 16, to 512 by 32, to 1024 by 64


def wmt_like_lengths(count=100_000, seed=1):
    """Sentence lengths as in WMT news text (median ~28 tokens, up to 256), targets close to their sources."""
    rng = np.random.default_rng(seed)
    source = np.clip(rng.lognormal(np.log(28), 0.6, count).astype(int), 2, 256)
    target = np.clip((source * rng.lognormal(0.05, 0.15, count)).astype(int), 2, 256)
    return source, target


@pytest.mark.parametrize("max_tokens", [4096, 25_000])
def test_bucketed_batches_take_a_handful_of_shapes_for_a_few_percent_more_padding(max_tokens):
    """Against batches padded to a multiple of 8 on each side (what a GPU run pads to without buckets): at most 6%
    more padded tokens, and at most 30 shapes, half as many or fewer."""
    source, target = wmt_like_lengths()
    plain = TokenBatchSampler(source, target, max_tokens, pad_to_multiple_of=8, seed=0)
    plain_shapes = [(len(b), int(source[b].max() + 7) // 8 * 8, int(target[b].max() + 7) // 8 * 8)
                    for b in plain.batches]
    bucketed = TokenBatchSampler(source, target, max_tokens, bucket_shapes=True, seed=0)
    bucketed_tokens = sum(2 * len(b) * int(bucketed.lengths[b].max()) for b in bucketed.batches)
    assert bucketed_tokens <= 1.06 * sum(rows * (s + t) for rows, s, t in plain_shapes)
    assert len(bucketed.shapes) <= 30 and len(set(plain_shapes)) >= 2 * len(bucketed.shapes)
    assert sorted(np.concatenate(bucketed.batches).tolist()) == list(range(len(source)))
    assert all(rows * length <= max_tokens for rows, length in bucketed.shapes)


def tokenizer():
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, 99)}}
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="w3")))
    fast.pad_token, fast.eos_token = "<pad>", "</s>"
    return fast


def test_the_bucket_collator_pads_both_sides_to_the_bucket_of_the_longest():
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    features = [{"input_ids": [5] * 10 + [2], "labels": [6] * 3 + [2]}, {"input_ids": [7, 2], "labels": [8] * 12 + [2]}]
    batch = BucketPaddingCollator(tokenizer(), model=model)(features)
    assert batch["input_ids"].shape == batch["labels"].shape == batch["decoder_input_ids"].shape == (2, 16)
    assert batch["attention_mask"].sum().item() == 13 and (batch["labels"] == -100).sum().item() == 2 * 16 - 17
    plain = DataCollatorForSeq2Seq(tokenizer(), model=model)(features)
    assert torch.equal(batch["input_ids"][:, :11], plain["input_ids"]) and torch.equal(
        batch["labels"][:, :13], plain["labels"])


def test_trainer_batches_have_the_sampler_shapes_with_the_bucket_collator(tmp_path):
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

    rng = np.random.default_rng(0)
    rows = [{"input_ids": rng.integers(3, 99, n).tolist() + [2], "labels": rng.integers(3, 99, m).tolist() + [2]}
            for n, m in rng.integers(1, 40, (300, 2))]
    model = VanillaTransformerForConditionalGeneration(tiny_config(max_position_embeddings=128))
    args = TokenBatchingSeq2SeqTrainingArguments(tmp_path, max_tokens_per_batch=256, report_to="none", use_cpu=True)
    trainer = TokenBatchingSeq2SeqTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(rows),
        data_collator=BucketPaddingCollator(tokenizer(), model=model),
    )
    loader = trainer.get_train_dataloader()
    shapes = {tuple(batch["input_ids"].shape) for batch in loader}
    assert shapes == set(trainer._token_batch_sampler.shapes)
    assert all(batch_rows * length <= 256 for batch_rows, length in shapes) and len(shapes) <= 12


def test_evaluation_batches_are_not_bucketed_so_the_references_do_not_lengthen_the_translations(tmp_path):
    """The bucketing collator padded an evaluation batch's sources to the bucket of its longest reference, and
    generate()'s limit (the padded source length + 50) grew with it: 146 new tokens for 8-token sources, not 58."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

    rng = np.random.default_rng(1)
    rows = [{"input_ids": rng.integers(3, 99, n).tolist() + [2], "labels": rng.integers(3, 99, m).tolist() + [2]}
            for n, m in zip(rng.integers(1, 8, 16), rng.integers(1, 90, 16))]
    model = VanillaTransformerForConditionalGeneration(tiny_config(max_position_embeddings=256))
    model.generation_config.update(num_beams=1, eos_token_id=None)  # translations run to the limit
    args = TokenBatchingSeq2SeqTrainingArguments(tmp_path, max_tokens_per_batch=256, report_to="none", use_cpu=True,
                                                 predict_with_generate=True, per_device_eval_batch_size=8)
    trainer = TokenBatchingSeq2SeqTrainer(model=model, args=args, data_collator=BucketPaddingCollator(tokenizer(),
                                                                                                      model=model))
    predictions = trainer.predict(Dataset.from_list(rows)).predictions
    longest_source = max(len(row["input_ids"]) for row in rows)
    assert predictions.shape == (16, 1 + longest_source + 50)  # the start token, then the source length + 50
    assert isinstance(trainer.data_collator, BucketPaddingCollator)  # training batches stay bucketed


def test_the_parameters_are_counted_once_a_run_for_the_flops_not_at_every_step(tmp_path, monkeypatch):
    """The Trainer's `total_flos` (6 x source tokens x non-embedding parameters) without walking every module at
    every step, on the host, while the device waits."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

    rng = np.random.default_rng(0)
    rows = [{"input_ids": rng.integers(3, 99, n).tolist() + [2], "labels": rng.integers(3, 99, n).tolist() + [2]}
            for n in rng.integers(1, 20, 200)]
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    parameters = model.num_parameters(exclude_embeddings=True)
    counted, source_tokens = [], []
    count = VanillaTransformerForConditionalGeneration.num_parameters
    monkeypatch.setattr(VanillaTransformerForConditionalGeneration, "num_parameters",
                        lambda self, *a, **k: counted.append(k) or count(self, *a, **k))
    args = TokenBatchingSeq2SeqTrainingArguments(tmp_path, max_tokens_per_batch=200, max_steps=12, report_to="none",
                                                 use_cpu=True, save_strategy="no", disable_tqdm=True)
    trainer = TokenBatchingSeq2SeqTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                          data_collator=DataCollatorForSeq2Seq(tokenizer(), model=model))
    flops = trainer.floating_point_ops
    monkeypatch.setattr(trainer, "floating_point_ops",
                        lambda inputs: source_tokens.append(inputs["input_ids"].numel()) or flops(inputs))
    trainer.train()
    assert len(source_tokens) == 12 and len(counted) == 1 and counted[0].get("exclude_embeddings")
    assert trainer.state.total_flos == 6 * sum(source_tokens) * parameters


def test_training_logs_give_the_target_tokens_a_second_of_training(tmp_path, monkeypatch):
    """Each training log's `target_tokens_per_second`: the target tokens (not padding) trained on since the previous
    log over the time the steps took; the time of an evaluation or a save in between is not counted."""
    from hf_vanilla_transformer import trainer as trainer_module
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

    clock = [1000.0]  # seconds: each step takes 1, each evaluation 100, each checkpoint 50
    monkeypatch.setattr(trainer_module, "time", SimpleNamespace(perf_counter=lambda: clock[0], time=time.time))
    rng = np.random.default_rng(0)
    rows = [{"input_ids": rng.integers(3, 99, n).tolist() + [2], "labels": rng.integers(3, 99, m).tolist() + [2]}
            for n, m in rng.integers(1, 20, (200, 2))]
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    args = TokenBatchingSeq2SeqTrainingArguments(
        tmp_path, max_tokens_per_batch=200, max_steps=6, gradient_accumulation_steps=2, logging_steps=3,
        eval_strategy="steps", eval_steps=2, save_strategy="steps", save_steps=2, report_to="none", use_cpu=True,
        disable_tqdm=True)  # evaluations and saves between the logs, not only after them
    trainer = TokenBatchingSeq2SeqTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                                          eval_dataset=Dataset.from_list(rows[:8]),
                                          data_collator=DataCollatorForSeq2Seq(tokenizer(), model=model))
    trained, compute_loss, save = [], trainer.compute_loss, trainer._save

    def counting_loss(model, inputs, *args, **kwargs):
        if model.training:
            trained.append((trainer.state.global_step, int(inputs["labels"].ne(-100).sum())))
        return compute_loss(model, inputs, *args, **kwargs)

    def slow_save(*args, **kwargs):
        clock[0] += 50.0
        return save(*args, **kwargs)

    def advance(seconds):
        return lambda self, *args, **kwargs: clock.__setitem__(0, clock[0] + seconds)

    monkeypatch.setattr(trainer, "compute_loss", counting_loss)
    monkeypatch.setattr(trainer, "_save", slow_save)
    trainer.add_callback(type("Clock", (TrainerCallback,), {"on_step_end": advance(1.0), "on_evaluate": advance(100.0)}))
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in logged] == [3, 6] and len(trained) == 12  # 2 batches a step
    for entry in logged:
        tokens = sum(count for step, count in trained if entry["step"] - 3 <= step < entry["step"])
        assert entry["target_tokens_per_second"] == pytest.approx(tokens / 3, abs=0.1)


def test_a_training_step_never_reads_a_value_back_from_the_device():
    """On the meta device a tensor has no values: anything that would read one on the host (`.item()`, `if
    tensor:`, `nonzero`), a host-device sync on a GPU, raises. Forward, backward, clipping and an AdamW step run."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).train().to("meta")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    mask = torch.ones(4, 9, dtype=torch.long, device="meta")
    batch = dict(input_ids=torch.zeros(4, 9, dtype=torch.long, device="meta"), attention_mask=mask,
                 labels=torch.zeros(4, 7, dtype=torch.long, device="meta"))
    for decoder_mask in (None, torch.ones(4, 7, dtype=torch.long, device="meta")):
        loss = model(**batch, decoder_attention_mask=decoder_mask).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()


def test_off_the_host_the_id_checks_run_on_the_device(monkeypatch, batch):
    """What a GPU does (an asynchronous device assert, no sync), tried on the CPU: the message still names the ids."""
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    monkeypatch.setattr(input_checks, "on_host", lambda tensor: False)
    with pytest.raises(RuntimeError, match="outside the vocabulary"):
        model(**{**batch, "input_ids": batch["input_ids"] + 100})
    with pytest.raises(RuntimeError, match="-100"):
        model(**{**batch, "labels": batch["labels"] - 200})


def test_generate_on_a_device_checks_ids_once_with_the_clear_error(monkeypatch, batch):
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    on_host = lambda tensor: tensor.device.type == "cpu" and tensor.numel() <= 2  # noqa: E731
    monkeypatch.setattr(input_checks, "on_host", on_host)
    monkeypatch.setattr(generation, "on_host", on_host)
    with pytest.raises(ValueError, match=r"outside the vocabulary \[0, 98\] \(min 10\d, max 1\d\d\)"):
        model.generate(batch["input_ids"] + 100, max_new_tokens=2)


def test_the_training_script_checks_token_ids_where_it_makes_the_data():
    data = DatasetDict(train=Dataset.from_dict({"input_ids": [[5, 2]], "labels": [[120, 2]]}))
    check_token_ids_fit(data, 121)
    with pytest.raises(InputError, match="train split's labels id 120, but the model's vocabulary has 100 entries"):
        check_token_ids_fit(data, 100)


def test_on_a_gpu_the_script_defaults_to_bucketed_shapes_and_workers_and_keeps_fused_adamw(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without one (this test runs
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)  # on GPU machines too)
    _, _, on_cpu = parse_arguments(["--output_dir", str(tmp_path)])
    assert not on_cpu.bucket_shapes and on_cpu.dataloader_num_workers == 0
    assert on_cpu.optim == "adamw_torch_fused" and not on_cpu.logging_nan_inf_filter
    assert not on_cpu.dataloader_pin_memory  # without an accelerator, torch warns about pinning
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    on_gpu = recipe_defaults(set())
    assert {**on_gpu, **GPU_DEFAULTS} == on_gpu and GPU_DEFAULTS["bucket_shapes"] == "true"
    assert GPU_DEFAULTS["dataloader_num_workers"] == "2" and GPU_DEFAULTS["dataloader_persistent_workers"] == "true"
    assert "bucket_shapes" not in recipe_defaults({"use_cpu"})
    from hf_vanilla_transformer import training

    asked = []  # the flags given as recipe_defaults sees them: --use_cpu false is the GPU's default, not a CPU run
    monkeypatch.setattr(training, "recipe_defaults", lambda given, defaults=training.recipe_defaults: asked.append(
        given) or defaults(given))
    for flags, on_cpu in [(["--use_cpu", "false"], False), (["--use_cpu=no"], False), (["--use_cpu"], True),
                          (["--use_cpu", "true"], True)]:
        with contextlib.suppress(Exception):  # the run itself may want a real GPU
            parse_arguments(["--output_dir", str(tmp_path), *flags])
        assert ("use_cpu" in asked.pop()) is on_cpu, flags
    monkeypatch.undo()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    assert on_gpu.get("dataloader_pin_memory", "true") == "true"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _, _, as_on_gpu = parse_arguments(["--output_dir", str(tmp_path), *(f"--{k}={v}" for k, v in on_gpu.items())])
    assert as_on_gpu.bucket_shapes and as_on_gpu.dataloader_num_workers == 2 and as_on_gpu.optim == "adamw_torch_fused"
    assert as_on_gpu.accelerator_config.non_blocking  # a batch's copy to the GPU does not wait for the GPU
    # --dataloader_num_workers 0 on a GPU: torch's DataLoader refused the default persistent workers, in a traceback
    monkeypatch.setattr(training, "recipe_defaults", lambda given, defaults=training.recipe_defaults: {
        **defaults(given), **{k: v for k, v in GPU_DEFAULTS.items() if k not in given}})  # a GPU's, on any machine
    _, _, no_workers = parse_arguments(["--output_dir", str(tmp_path), "--dataloader_num_workers", "0"])
    assert no_workers.dataloader_num_workers == 0 and not no_workers.dataloader_persistent_workers
    with pytest.raises(InputError, match="--dataloader_num_workers 0 asks for none"):
        parse_arguments(["--output_dir", str(tmp_path), "--dataloader_num_workers", "0",
                         "--dataloader_persistent_workers", "true"])


@pytest.mark.parametrize("launcher_dynamic", [None, "False"], ids=["python", "accelerate-launch-default"])
def test_torch_compile_compiles_once_in_20_token_batched_steps(tmp_path, monkeypatch, launcher_dynamic):
    """Token-count batches change shape almost every step; torch.compile (aot_eager here, as on a GPU with inductor)
    must compile once for dynamic lengths and batch sizes, not for each new shape, nor for the first shape alone and
    then again at the second. (Bucketed shapes are fewer of the same kind.) `accelerate launch` exports
    ACCELERATE_DYNAMO_USE_DYNAMIC=False by default, which compiled every shape until the recompile limit."""
    if launcher_dynamic is not None:
        monkeypatch.setenv("ACCELERATE_DYNAMO_USE_DYNAMIC", launcher_dynamic)
    shapes = []
    collate = DataCollatorForSeq2Seq.__call__

    def recording_collate(self, features, return_tensors=None):
        collated = collate(self, features, return_tensors)
        shapes.append((tuple(collated["input_ids"].shape), tuple(collated["labels"].shape)))
        return collated

    monkeypatch.setattr(DataCollatorForSeq2Seq, "__call__", recording_collate)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    main(["--output_dir", str(tmp_path), *TINY_RUN, "--max_tokens_per_batch", "300", "--max_steps", "20",
          "--torch_compile", "--torch_compile_backend", "aot_eager", "--bucket_shapes", "false",
          "--dataloader_num_workers", "0"])  # on a GPU machine too: workers would collate out of this process's sight
    compiled = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    assert len(set(shapes[:20])) >= 3
    assert compiled == 1, f"{compiled} compilations for {len(set(shapes))} shapes"


def test_regional_compilation_compiles_each_kind_of_layer_once(tmp_path, monkeypatch):
    """accelerate's regional compilation (ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION=1, or `accelerate launch
    --dynamo_use_regional_compilation`) compiles one encoder layer and one decoder layer for all of them, a
    compilation that does not grow with depth; the run saves the model it trained, under its own names."""
    monkeypatch.setenv("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "1")
    graphs = {}
    for layers in (1, 3):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        main(["--output_dir", str(tmp_path / str(layers)), *TINY_RUN, "--layers", str(layers),
              "--max_tokens_per_batch", "300", "--max_steps", "2", "--do_eval", "false", "--do_predict", "false",
              "--torch_compile", "--torch_compile_backend", "aot_eager", "--dataloader_num_workers", "0"])
        stats = torch._dynamo.utils.counters["stats"]
        graphs[layers] = stats["unique_graphs"], stats["calls_captured"]  # graphs, and operations traced in all
    torch._dynamo.reset()
    assert graphs[3] == graphs[1], graphs  # the whole model compiled traces three layers' operations for 3
    model = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "3")
    assert len(model.model.encoder.layers) == 3 and not any("_orig_mod" in name for name in model.state_dict())


@pytest.mark.parametrize("mode", ["reduce-overhead", "default"])
def test_regional_compilation_with_cuda_graphs_is_warned_against(tmp_path, monkeypatch, caplog, mode):
    """Regional compilation records a CUDA graph per layer, which torch runs off its fast path (measured on an
    H100: half the steps a second of one graph for the whole model); the trainer says so when both are asked for."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

    monkeypatch.setenv("ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "1")
    args = TokenBatchingSeq2SeqTrainingArguments(tmp_path, max_tokens_per_batch=256, report_to="none", use_cpu=True,
                                                 torch_compile=True, torch_compile_mode=mode)
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    with caplog.at_level("WARNING", logger="hf_vanilla_transformer"):
        TokenBatchingSeq2SeqTrainer(model=model, args=args, data_collator=BucketPaddingCollator(tokenizer(), model))
    warned = "For CUDA graphs leave regional compilation out" in caplog.text
    assert warned == (mode == "reduce-overhead"), caplog.text


def test_a_training_step_does_not_unwrap_the_model(tmp_path, monkeypatch):
    """Looking through the Trainer's wrappers for the model's class walks every module (~0.5 ms for the base model):
    done once, not at every step, whose host time a GPU running CUDA graphs waits for."""
    from accelerate import Accelerator

    unwrapped = []
    unwrap = Accelerator.unwrap_model

    def counting_unwrap(self, model, *args, **kwargs):
        unwrapped.append(model)
        return unwrap(self, model, *args, **kwargs)

    monkeypatch.setattr(Accelerator, "unwrap_model", counting_unwrap)
    main(["--output_dir", str(tmp_path), *TINY_RUN, "--max_tokens_per_batch", "300", "--max_steps", "12",
          "--do_eval", "false", "--dataloader_num_workers", "0"])
    assert (tmp_path / "model.safetensors").exists()
    assert len(unwrapped) < 6, f"the model was unwrapped {len(unwrapped)} times in 12 steps"


@needs_cuda
def test_a_cuda_training_step_makes_no_host_device_sync():
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).train().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    lengths = torch.tensor([16, 12, 9, 5])
    batch = {
        "input_ids": torch.randint(3, 99, (4, 16), device="cuda"),
        "attention_mask": (torch.arange(16) < lengths[:, None]).long().cuda(),  # right padding
        "labels": torch.randint(3, 99, (4, 16), device="cuda"),
    }
    model(**batch).loss.backward()  # warm-up: lazy initialisation may sync once
    optimizer.step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@needs_cuda
def test_a_compiled_bf16_training_step_matches_eager():
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.0)).train().cuda()
    batch = {
        "input_ids": torch.randint(3, 99, (8, 24), device="cuda"),
        "attention_mask": torch.ones(8, 24, dtype=torch.long, device="cuda"),
        "labels": torch.randint(3, 99, (8, 16), device="cuda"),
    }
    batch["attention_mask"][1, 20:] = 0
    grads = []
    for forward in (model, torch.compile(model, mode="reduce-overhead")):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(**batch).loss
        loss.backward()
        grads.append((loss.detach().float(), {n: p.grad.float().clone() for n, p in model.named_parameters()}))
        model.zero_grad(set_to_none=True)
    (eager_loss, eager), (compiled_loss, compiled) = grads
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=2e-2, atol=2e-2)
    for name in eager:
        torch.testing.assert_close(compiled[name], eager[name], rtol=5e-2, atol=5e-3, msg=name)


@needs_cuda
@pytest.mark.parametrize("num_beams", [1, 4])
def test_generate_on_cuda_gives_the_cpu_ids(batch, num_beams, monkeypatch):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    kwargs = dict(num_beams=num_beams, max_new_tokens=12, do_sample=False)
    on_cpu = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], **kwargs)
    model.cuda()
    # fp32 products in fp32, as on the CPU (the Trainer turns TF32 on for the process under --torch_compile)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    on_gpu = model.generate(batch["input_ids"].cuda(), attention_mask=batch["attention_mask"].cuda(), **kwargs)
    assert torch.equal(on_gpu.cpu(), on_cpu)


@needs_cuda
def test_the_benchmark_runs_on_cuda():
    result = subprocess.run(
        [sys.executable, "scripts/benchmark.py", "--device", "cuda", "--dtype", "bfloat16", "--amp", "--repeats", "1",
         "--d_model", "64", "--layers", "1", "--ffn_dim", "128", "--tokens_per_batch", "4096",
         "--skip", "memory", "greedy", "beam"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "model FLOPs utilization, training script" in result.stdout


def test_neftune_noise_reaches_the_embeddings(tmp_path):
    """--neftune_noise_alpha hooks the Trainer's noise onto get_input_embeddings(), which was a module (`shared`) that
    the encoder and decoder did not call (they embed with modules of their own holding its weight): no noise at all."""
    losses = {}
    for alpha in (None, 50.0):
        flags = [] if alpha is None else ["--neftune_noise_alpha", str(alpha)]
        main(["--output_dir", str(tmp_path / str(alpha)), *TINY_RUN, "--dropout", "0", "--max_tokens_per_batch", "300",
              "--max_steps", "3", "--logging_steps", "1", "--do_eval", "false", "--do_predict", "false",
              "--dataloader_num_workers", "0", *flags])
        state = json.loads((tmp_path / str(alpha) / "trainer_state.json").read_text())
        losses[alpha] = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert losses[None][0] != losses[50.0][0]  # the first step's loss, same weights and batch: noise makes it differ
    reloaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "50.0")
    assert reloaded.model.encoder.embed_tokens.weight is reloaded.model.shared.weight
