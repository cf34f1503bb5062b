"""What the trainer guards and reports about a run as a whole: a diverged run stops at the first NaN/inf loss it
logs, and token-batched runs report the sentences they trained on per second."""

import math

import numpy as np
import pytest
import torch
from conftest import tiny_config
from datasets import Dataset
from transformers import DataCollatorForSeq2Seq, TrainerCallback, TrainerControl, TrainerState

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.errors import InputError, run_command
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer
from hf_vanilla_transformer.trainer import (
    TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments, TrainingDivergedError, WarnAboutEndlessWarmup,
)
from hf_vanilla_transformer.training import main

TOKENIZER = train_bpe_tokenizer(["ein Mann", "a man"], vocab_size=300)  # pad id 0, as tiny_config; only pads
TINY = ["--d_model", "32", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "64", "--vocab_size", "300"]
FEW_NUMBERS = ["--number_words_train_size", "300", "--number_words_eval_size", "16"]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tokenized_dataset(n: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 30, size=(n, 2))
    return Dataset.from_dict({
        "input_ids": [rng.integers(4, 60, size=s).tolist() + [2] for s, _ in lengths],
        "labels": [rng.integers(4, 60, size=t).tolist() + [2] for _, t in lengths],
    })


def trainer_for(tmp_path, dataset: Dataset, callbacks=(), **arguments) -> TokenBatchingSeq2SeqTrainer:
    """Our tiny model under the trainer, logging NaN losses as NaN (as the training script does)."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(encoder_layers=1, decoder_layers=1))
    arguments = {"logging_nan_inf_filter": False, "save_strategy": "no", "lr_scheduler_type": "constant", **arguments}
    args = TokenBatchingSeq2SeqTrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", seed=5, disable_tqdm=True, **arguments
    )
    collator = DataCollatorForSeq2Seq(TOKENIZER, model=model)
    return TokenBatchingSeq2SeqTrainer(
        model=model, args=args, train_dataset=dataset, data_collator=collator, callbacks=list(callbacks)
    )


class PoisonWeights(TrainerCallback):
    """Make the model's weights NaN after optimizer step `step` (so from step `step` + 1 on the loss is NaN)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.step:
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.fill_(math.nan)


def test_a_diverged_run_stops_with_one_line_and_writes_no_model_card_or_results(tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["--output_dir", out, *FEW_NUMBERS, *TINY, "--max_steps", "20", "--learning_rate", "1e4",
             "--max_grad_norm", "0", "--optim", "sgd", "--logging_steps", "2", "--warmup_steps", "0"]
    with pytest.raises(SystemExit) as exit_:
        run_command(lambda: main(list(map(str, flags))), name="train_translation.py")
    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("train_translation.py: error: Training diverged: the training loss became nan ")
    for advice in ("a lower --learning_rate", "more --warmup_steps", "--max_grad_norm 1"):
        assert advice in error
    assert "No checkpoint was saved before it." in error
    for written in ("model.safetensors", "README.md", "all_results.json", "train_results.json", "config.json"):
        assert not (out / written).exists(), written


@pytest.mark.parametrize("logging_steps, steps, last_good", [(1, "at step 4", 2), (2, "between steps 3 and 4", 1)])
def test_the_error_names_the_step_the_learning_rate_and_the_last_good_checkpoint(
    tmp_path, logging_steps, steps, last_good
):
    trainer = trainer_for(
        tmp_path, tokenized_dataset(80), [PoisonWeights(step=3)], max_tokens_per_batch=200, max_steps=10,
        learning_rate=1e-3, logging_steps=logging_steps, save_strategy="steps", save_steps=1, max_grad_norm=1.0,
    )
    with pytest.raises(TrainingDivergedError) as error:
        trainer.train()
    assert isinstance(error.value, InputError)
    message = str(error.value)
    assert f"the training loss became nan {steps} (learning rate 0.001)." in message
    assert "--max_grad_norm" not in message  # it clips already
    assert f"The last checkpoint saved before it is {tmp_path / f'checkpoint-{last_good}'}; later ones" in message
    assert trainer.state.global_step == 4  # stopped at the first NaN logged, before step 4's checkpoint
    assert math.isnan(trainer.state.log_history[-1]["loss"]) and trainer.state.log_history[-1]["step"] == 4
    assert not (tmp_path / "checkpoint-4").exists()


def test_a_nan_after_the_last_logged_loss_stops_the_run_at_the_end(tmp_path):
    trainer = trainer_for(
        tmp_path, tokenized_dataset(80), [PoisonWeights(step=3)], max_tokens_per_batch=200, max_steps=5,
        learning_rate=1e-3, logging_steps=10, max_grad_norm=0.0,
    )
    with pytest.raises(TrainingDivergedError, match=r"between steps 1 and 5 \(learning rate 0.001\)\. .*"
                                                    r"--max_grad_norm 1 .* No checkpoint was saved before it\."):
        trainer.train()


def test_steps_skipped_by_fp16_loss_scaling_do_not_stop_the_run(tmp_path):
    """A loss scale so large that every scaled gradient overflows: each step is skipped and logs a NaN gradient
    norm, but the loss it logs is the unscaled, finite one. (accelerate makes no scaler on a CPU: one is set here.)"""
    trainer = trainer_for(
        tmp_path, tokenized_dataset(40), max_tokens_per_batch=200, max_steps=3, learning_rate=1e-3, fp16=True,
        logging_steps=1, max_grad_norm=1.0,
    )
    trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127)
    trainer.accelerator.native_amp = True
    result = trainer.train()
    assert trainer.state.global_step == 3 and trainer.accelerator.scaler.get_scale() < 2.0**127  # steps skipped
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert all(math.isfinite(entry["loss"]) and not math.isfinite(entry["grad_norm"]) for entry in logged)
    assert math.isfinite(result.training_loss)


@pytest.mark.parametrize("batch_size", [1, 64])
def test_token_batched_runs_report_the_sentences_trained_on_per_second(tmp_path, batch_size):
    dataset = tokenized_dataset(60)
    trainer = trainer_for(
        tmp_path, dataset, max_tokens_per_batch=200, learning_rate=1e-3, per_device_train_batch_size=batch_size
    )
    trainer.get_train_dataloader()
    sampler = trainer._token_batch_sampler
    sampler.set_epoch(1)
    second_epoch = list(sampler)
    trainer.args.max_steps = len(second_epoch) + 2  # an epoch and two batches of the next
    result = trainer.train()
    sentences = len(dataset) + len(second_epoch[0]) + len(second_epoch[1])
    metrics = result.metrics
    assert metrics["train_samples_per_second"] == pytest.approx(sentences / metrics["train_runtime"], abs=2e-3)
    runtime_rounding = 5e-5 / metrics["train_runtime"]  # the Trainer rounds the runtime to 4 decimals
    assert metrics["train_steps_per_second"] == pytest.approx(
        trainer.args.max_steps / metrics["train_runtime"], rel=1e-4 + runtime_rounding
    )  # the Trainer's own
    assert trainer.state.log_history[-1]["train_samples_per_second"] == metrics["train_samples_per_second"]


def test_without_token_batching_samples_per_second_is_the_trainers(tmp_path):
    trainer = trainer_for(tmp_path, tokenized_dataset(40), learning_rate=1e-3, per_device_train_batch_size=8,
                          max_steps=3)
    metrics = trainer.train().metrics
    assert metrics["train_samples_per_second"] == pytest.approx(8 * metrics["train_steps_per_second"], rel=1e-4)


def test_a_run_by_epochs_whose_warmup_outlasts_it_is_warned_about(tmp_path, caplog):
    """250 steps of an epoch under the paper's 4000 warmup steps trained at 6% of the peak rate without a word (a
    run of --max_steps is warned about when its flags are parsed)."""
    import logging

    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.trainer"):
        for warmup, epochs in [(100, 1), (2, 1), (100, 100)]:
            trainer_for(tmp_path, tokenized_dataset(24), num_train_epochs=epochs, per_device_train_batch_size=8,
                        warmup_steps=warmup, lr_scheduler_type="inverse_sqrt").train()
        for schedule in ("constant", "reduce_lr_on_plateau"):  # schedules without warmup: a flat rate from step 1
            args = TokenBatchingSeq2SeqTrainingArguments(str(tmp_path), warmup_steps=100, lr_scheduler_type=schedule,
                                                         eval_strategy="epoch", report_to="none")
            WarnAboutEndlessWarmup().on_train_begin(args, TrainerState(max_steps=3), TrainerControl())
    warned = [message for message in caplog.messages if "warmup_steps" in message]
    assert warned == ["--warmup_steps 100 is not below the run's 3 steps (1 epoch): the learning rate rises for the "
                      "whole run and never reaches its peak (5e-05). Give fewer --warmup_steps (e.g. 1, a tenth of the "
                      "steps), or more --num_train_epochs."]


@pytest.mark.parametrize("error", [
    RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 15999552000 bytes."),
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 14.90 GiB."),
])
def test_running_out_of_memory_in_training_is_one_line_naming_the_batch_flag(error):
    """--max_tokens_per_batch 1000000 on Multi30k ended in the allocator's traceback."""
    from types import SimpleNamespace

    from hf_vanilla_transformer.training import train

    def out_of_memory(**kwargs):
        raise error

    args = SimpleNamespace(max_tokens_per_batch=1_000_000, per_device_train_batch_size=8)
    trainer = SimpleNamespace(train=out_of_memory, args=args, state=SimpleNamespace(global_step=1),
                              callback_handler=SimpleNamespace(callbacks=[]))
    with pytest.raises(InputError) as raised:
        train(trainer, None)
    assert str(raised.value) == (
        "Out of memory in training step 2, with --max_tokens_per_batch 1000000: lower it, and raise "
        "--gradient_accumulation_steps as much to keep the tokens of an optimizer step (the paper's ~25,000 a step "
        "need not fit at once).")
    trainer.train = lambda **kwargs: (_ for _ in ()).throw(RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):  # other errors keep their traceback
        train(trainer, None)


def test_a_token_batch_that_holds_the_whole_training_set_is_warned_about(tmp_path, caplog):
    """--max_tokens_per_batch 1000000 on 2,000 pairs made each step an epoch: 20 evaluations and checkpoints for 20
    steps, without a word (and on all of Multi30k, an allocation of 16 GB)."""
    import logging

    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.trainer"):
        trainer_for(tmp_path, tokenized_dataset(24), max_tokens_per_batch=200, max_steps=2).train()
        assert not [message for message in caplog.messages if "holds all" in message]
        trainer_for(tmp_path, tokenized_dataset(24), max_tokens_per_batch=100_000, max_steps=2).train()
    assert [message for message in caplog.messages if "holds all" in message] == [
        "--max_tokens_per_batch 100000 holds all 24 training pairs in one step: every step is an epoch (with the "
        "evaluation and checkpoint of one, where those are per epoch), and needs the memory of the whole set. Give "
        "fewer tokens a batch."]


def test_drop_last_drops_training_batches_only(tmp_path):
    """--dataloader_drop_last dropped an evaluation's last batch too: part of the validation set went unscored and
    untranslated (generated_predictions.txt one line short a batch), and a set smaller than one batch was a
    traceback in compute_metrics."""
    trainer = trainer_for(tmp_path, tokenized_dataset(24), dataloader_drop_last=True, per_device_train_batch_size=8,
                          per_device_eval_batch_size=4, max_steps=1)
    assert sum(len(batch["input_ids"]) for batch in trainer.get_eval_dataloader(tokenized_dataset(5))) == 5
    assert sum(len(batch["input_ids"]) for batch in trainer.get_test_dataloader(tokenized_dataset(3))) == 3
    assert all(len(batch["input_ids"]) == 8 for batch in trainer.get_train_dataloader())
    assert trainer.args.dataloader_drop_last
