"""The main job, end to end on tiny models: data sources, the paper's recipe as defaults, token batching, metrics,
outputs, checkpoint averaging and fine-tuning (several processes: test_distributed_training.py)."""

import gzip
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch
from conftest import REPO, SHARED_DATA
from tiny_translation_model import make_tiny_model_dir
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig, pipeline

from hf_vanilla_transformer import VanillaTransformerConfig
from hf_vanilla_transformer.checkpoint_averaging import average_checkpoints
from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer
from hf_vanilla_transformer.checkpoints import run_checkpoints
from hf_vanilla_transformer.training import card_example, load_or_build_model, main, model_config, parse_arguments
from hf_vanilla_transformer.training_curves import curves, plot_training_curves

SCRIPT = str(REPO / "scripts" / "train_translation.py")
TINY = ["--d_model", "32", "--layers", "1", "--attention_heads", "4", "--ffn_dim", "64", "--vocab_size", "300"]
FEW_NUMBERS = ["--number_words_train_size", "300", "--number_words_eval_size", "16"]


def run_script(*args, launcher=(sys.executable,), timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(
        [*launcher, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout + result.stderr


def run_main(*args, capsys) -> str:
    """The script's `main()` in this process (no new interpreter to start and import into: seconds less a run), on
    one thread as `run_script`'s processes (so that sums add up in the same order); returns what it printed."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        main(list(map(str, args)))
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    return captured.out + captured.err


@pytest.fixture(scope="module")
def builtin_run(tmp_path_factory):
    """The built-in corpus with a tiny model, token batching and a checkpoint every 10 steps."""
    out = tmp_path_factory.mktemp("run")
    log = run_script(
        "--output_dir", out, *FEW_NUMBERS, *TINY, "--num_train_epochs", "2", "--max_tokens_per_batch", "400",
        "--save_strategy", "steps", "--save_steps", "10", "--logging_steps", "5", "--warmup_steps", "20",
        "--average_last_checkpoints", "3", "--per_device_eval_batch_size", "4",
    )
    return out, log


def test_builtin_run_writes_everything(builtin_run):
    out, log = builtin_run
    results = json.loads((out / "all_results.json").read_text())
    for key in ("eval_bleu", "eval_chrf", "predict_bleu", "predict_chrf", "train_loss", "train_samples"):
        assert key in results, key
    assert len((out / "generated_predictions.txt").read_text(encoding="utf-8").splitlines()) == 16
    assert (out / "training_curves.png").stat().st_size > 10_000
    umask = os.umask(0)
    os.umask(umask)
    for weights in [out / "model.safetensors", *out.glob("checkpoint-*/model.safetensors")]:  # not safetensors' 0600
        assert weights.stat().st_mode & 0o777 == 0o666 & ~umask, weights
    last_logged = json.loads((out / "trainer_state.json").read_text())["log_history"][-1]
    assert last_logged["eval_bleu"] == results["eval_bleu"]  # the final evaluation, saved after it was made
    assert "Sample translations (de -> en)" in log and "hypothesis:" in log
    assert "eval_bleu" in log  # the Trainer's metric tables
    assert "Writing model shards" not in log  # transformers' bar of one shard, at every checkpoint
    assert "Model: VanillaTransformerForConditionalGeneration with" in log  # the run's info lines, shown
    translate = Path(SCRIPT).with_name("translate.py")  # beside the training script, as the command named it
    assert f"The run's model, tokenizer and model card are in {out}, with its scores, training curves and test " \
           f"translations. Translate a file with python {translate} {out} input.txt -o output.txt, or load the model " \
           f"with AutoModelForSeq2SeqLM.from_pretrained('{out}') after import hf_vanilla_transformer." \
        in log  # where it all went
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert type(model).__name__ == "VanillaTransformerForConditionalGeneration"
    assert model.config.d_model == 32 and model.config.vocab_size == len(tokenizer)
    assert model.config.pad_token_id == tokenizer.pad_token_id and model.config.eos_token_id == tokenizer.eos_token_id
    assert GenerationConfig.from_pretrained(out).num_beams == 4
    assert model.config.use_cache  # the Trainer's use_cache=False was saved into the config (and checkpoints')
    assert all(json.loads((c / "config.json").read_text())["use_cache"] for c in out.glob("checkpoint-*"))
    card = (out / "README.md").read_text()
    assert "model-index" in card and "pipeline_tag: translation" in card and "library_name: transformers" in card
    assert f"{results['eval_bleu']:.2f}"[:4] in card or str(round(results["eval_bleu"], 2)) in card
    signature = f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    assert f"BLEU `{signature}`" in card and f"sacreBLEU signatures: BLEU {signature}, chrF nrefs:1|" in log
    assert (out / "pipeline_translation.py").exists()
    assert "translation" in json.loads((out / "config.json").read_text())["custom_pipelines"]
    # the card's code translates a sentence of the run's own data (the first validation source)
    assert f'translator(["{card_example_of(out)}"]' in card and "Fahrrad" not in card


def card_example_of(out):
    inputs = json.loads((out / "model_card_inputs.json").read_text())
    example = inputs["example"]
    assert re.fullmatch(r"[a-zäöüß]+( [a-zäöüß]+)*", example), example  # a German number word
    return example


def test_checkpoints_saved_within_a_second_raise_no_file_system_warning(tmp_path):
    """transformers warned "mtime may not be reliable on this filesystem" whenever the checkpoints it rotates were
    saved within a second, as on a GPU, and then did what the script wants (ordered them by step)."""
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "train_translation.py"), "--output_dir", str(tmp_path / "run"),
         "--number_words_train_size", "200", "--number_words_eval_size", "8", "--d_model", "32", "--layers", "1",
         "--attention_heads", "4", "--ffn_dim", "64", "--vocab_size", "300", "--max_steps", "4", "--save_steps", "1",
         "--save_total_limit", "2", "--eval_strategy", "no", "--average_last_checkpoints", "0",
         "--max_predict_samples", "2", "--max_eval_samples", "2", "--disable_tqdm", "true"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert sorted(path.name for path in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-4"]
    assert "mtime" not in run.stdout + run.stderr


def test_the_card_example_is_a_short_source_sentence_of_the_data():
    from datasets import Dataset, DatasetDict

    def split(*sources):
        return Dataset.from_dict({"translation": [{"en": text, "de": "x"} for text in sources]})

    data = DatasetDict({"train": split("the first training sentence"),
                        "validation": split("  ", " ".join(["word"] * 31), " A dog runs. ")})
    assert card_example(data, "en") == "A dog runs."  # not blank, at most 30 words, stripped
    data["validation"] = split(" ".join(["word"] * 40), " ".join(["word"] * 35))
    assert card_example(data, "en") == " ".join(["word"] * 35)  # else the shortest
    del data["validation"]
    assert card_example(data, "en") == "the first training sentence"


def test_the_training_curves_show_validation_loss_and_the_final_model_apart(tmp_path):
    history = [{"loss": 5.0, "step": 50}, {"loss": 3.0, "step": 100}, {"eval_loss": 3.2, "eval_bleu": 20.0, "step": 100},
               {"loss": 2.5, "step": 150}, {"eval_loss": 2.9, "eval_bleu": 30.0, "step": 200},
               {"train_runtime": 9.0, "train_loss": 3.0, "step": 200},
               {"eval_loss": 2.8, "eval_bleu": 31.5, "eval_samples": 10, "step": 200}]  # the averaged model's
    assert curves(history) == {"loss": [(50, 5.0), (100, 3.0), (150, 2.5)], "eval_loss": [(100, 3.2), (200, 2.9)],
                               "eval_bleu": [(100, 20.0), (200, 30.0)], "final_bleu": [(200, 31.5)],
                               "mean_loss": []}  # losses were logged: no run's mean in their place
    assert plot_training_curves(history, tmp_path / "curves.png", final_label="the average").stat().st_size > 10_000
    assert plot_training_curves([], tmp_path / "none.png") is None


def test_a_run_that_keeps_its_best_checkpoint_says_which(tmp_path, capsys):
    """With --load_best_model_at_end the run's model is the best checkpoint: the curves put its BLEU at its step (it
    was at the last step, off the curve) and the card names the step (it named the training steps alone)."""
    import json

    out = tmp_path / "run"
    run_main("--output_dir", out, *FEW_NUMBERS, *TINY, "--max_steps", "6", "--eval_steps", "2", "--warmup_steps", "2",
             "--learning_rate", "3e-3", "--load_best_model_at_end", "true", "--metric_for_best_model", "loss",
             "--greater_is_better", "true", "--do_predict", "false", capsys=capsys)  # the worst loss: not the last
    state = json.loads((out / "trainer_state.json").read_text())
    best = state["best_global_step"]
    assert best < 6 and state["best_model_checkpoint"].endswith(f"checkpoint-{best}")
    card = (out / "README.md").read_text()
    assert f"- Step of the checkpoint kept as the model (the best on validation): {best}\n" in card
    final = curves(state["log_history"], final_step=best)["final_bleu"]
    assert [step for step, _ in final] == [best]
    assert curves(state["log_history"])["final_bleu"][0][0] == 6  # where it was drawn


def test_the_run_model_averages_the_last_checkpoints(builtin_run):
    """--average_last_checkpoints 3: the saved model is the mean of the last 3 checkpoints, and the card says so."""
    out, _ = builtin_run
    checkpoints = run_checkpoints(out)[-3:]
    members = [AutoModelForSeq2SeqLM.from_pretrained(c) for c in checkpoints]
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    for name, weight in model.state_dict().items():
        torch.testing.assert_close(weight, torch.stack([m.state_dict()[name] for m in members]).mean(0), msg=name)
    assert json.loads((out / "all_results.json").read_text())["averaged_checkpoints"] == 3
    assert "| Checkpoints averaged into the model (section 6.1) | 3 |" in (out / "README.md").read_text()


def test_no_saved_generation_config_cuts_translations(builtin_run):
    """Evaluation ran every epoch over batches of 4 before most checkpoints were saved: none of them, nor the final
    model, carries transformers' placeholder max_length=20."""
    out, _ = builtin_run
    folders = [out, *run_checkpoints(out)]
    assert len(folders) > 3
    for folder in folders:
        saved = json.loads((folder / "generation_config.json").read_text())
        assert "max_length" not in saved and "max_new_tokens" not in saved, folder
        assert saved["num_beams"] == 4


def test_disable_tqdm_means_no_progress_bars_at_all(tmp_path):
    """--disable_tqdm true (for logs and batch jobs) also silences the bars of tokenizing and of saving checkpoints."""
    log = run_script(
        "--output_dir", tmp_path, *FEW_NUMBERS, *TINY, "--max_steps", "4", "--save_strategy", "steps",
        "--save_steps", "2", "--eval_strategy", "no", "--num_samples_to_print", "0", "--disable_tqdm", "true",
    )
    assert (tmp_path / "checkpoint-4").is_dir() and "'train_runtime'" in log
    for bar in ("Tokenizing", "Writing model shards", "%|"):
        assert bar not in log, bar
    assert "Sample translations" not in log  # --num_samples_to_print 0: not even the heading


def test_averaging_needs_checkpoints(tmp_path):
    base = ["--output_dir", str(tmp_path), "--average_last_checkpoints", "8"]
    assert parse_arguments(base)[2].save_total_limit == 8  # raised from the recipe's 5
    with pytest.raises(ValueError, match="--save_total_limit 3 keeps only 3"):
        parse_arguments([*base, "--save_total_limit", "3"])
    with pytest.raises(ValueError, match="--save_strategy is 'no'"):
        parse_arguments([*base, "--save_strategy", "no"])
    with pytest.raises(ValueError, match="must be 0 \\(no averaging\\) or more, got -1"):
        parse_arguments(["--output_dir", str(tmp_path), "--average_last_checkpoints", "-1"])
    off = parse_arguments(["--output_dir", str(tmp_path), "--average_last_checkpoints", "0", "--save_strategy", "no"])
    assert off[2].average_last_checkpoints is None  # 0 turns the built-in run's averaging off


@pytest.mark.parametrize("flags, phases, evaluates_each_epoch", [
    ([], (True, True, True), True),  # train, evaluate, translate the test split
    (["--do_predict", "false"], (True, True, False), True),
    (["--do_eval=false"], (True, False, True), False),
    (["--do_train", "--do_eval"], (True, True, False), True),  # as in transformers' translation example
    (["--do_train"], (True, False, False), False),
    (["--do_train", "false"], (False, True, True), True),
    (["--do_predict"], (False, False, True), False),
    (["--do-predict", "--do-eval=yes"], (False, True, True), True),  # HfArgumentParser's other spelling
])
def test_the_do_flags_choose_the_phases(tmp_path, builtin_run, flags, phases, evaluates_each_epoch):
    model = [] if phases[0] else ["--model_name_or_path", str(builtin_run[0])]
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), *model, *flags])
    assert (args.do_train, args.do_eval, args.do_predict) == phases
    assert (args.eval_strategy == "epoch") == evaluates_each_epoch


def test_a_model_is_evaluated_without_training(builtin_run, tmp_path, capsys):
    """`--do_predict` alone (or `--do_train false`) translates and scores an existing model: no training, no new
    model, and only the phases asked for."""
    model_dir, _ = builtin_run
    out = tmp_path / "scored"
    log = run_main("--output_dir", out, "--model_name_or_path", model_dir, *FEW_NUMBERS, "--do_predict",
                   "--per_device_eval_batch_size", "8", capsys=capsys)
    results = json.loads((out / "all_results.json").read_text())
    assert "predict_bleu" in results and not any(key.startswith(("train_", "eval_")) for key in results)
    assert results["predict_bleu"] == json.loads((model_dir / "all_results.json").read_text())["predict_bleu"]
    # how the scores were computed, beside them: this run writes no model card, where the signatures also are
    for saved in (results, json.loads((out / "predict_results.json").read_text())):
        assert saved["predict_bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
        assert saved["predict_chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    assert len((out / "generated_predictions.txt").read_text().splitlines()) == 16
    assert not (out / "model.safetensors").exists() and not (out / "README.md").exists()
    assert "Sample translations (de -> en)" in log and "***** train metrics *****" not in log
    assert "The run's model" not in log  # no model was saved

    # scoring again into the folder, the validation split this time: all_results.json added the two runs' scores up
    with pytest.raises(InputError, match="holds the results of an earlier run .*all_results.json"):
        main(["--output_dir", str(out), "--model_name_or_path", str(model_dir), *FEW_NUMBERS, "--do_eval",
              "--overwrite_output_dir", "false"])  # the built-in corpus' default is true
    run_main("--output_dir", out, "--model_name_or_path", model_dir, *FEW_NUMBERS, "--do_eval",
             "--per_device_eval_batch_size", "8", "--overwrite_output_dir", "true", capsys=capsys)
    results = json.loads((out / "all_results.json").read_text())
    assert "eval_bleu" in results and not any(key.startswith("predict_") for key in results)
    assert not (out / "predict_results.json").exists()


def test_the_card_and_curves_name_the_decoding_evaluation_used(tmp_path, capsys, monkeypatch):
    """--generation_num_beams 1 scores with greedy search: the card said "beam search (4 beams ...)" (the saved
    generation config's) and the curves' BLEU axis "beam 4"."""
    from hf_vanilla_transformer import training

    drawn = []
    monkeypatch.setattr(training, "plot_training_curves", lambda *args, **kwargs: drawn.append(kwargs))
    out = tmp_path / "greedy"
    run_main("--output_dir", out, *FEW_NUMBERS, *TINY, "--max_steps", "2", "--generation_num_beams", "1",
             "--generation_max_length", "12", "--average_last_checkpoints", "0", capsys=capsys)
    assert drawn[0]["num_beams"] == 1 and drawn[0]["label_smoothing"] == pytest.approx(0.1)
    card = " ".join((out / "README.md").read_text().split())
    assert "decoded with greedy search, at most 12 tokens (the start token included)." in card


def test_scoring_a_model_decodes_as_its_generation_config_says(builtin_run, tmp_path, capsys, monkeypatch):
    """A model saved with greedy decoding (num_beams 1) was scored with --generation_num_beams 4, the recipe's
    default: the scores and generated_predictions.txt were of translations that translate.py, the pipeline and
    generate() never give, without a word."""
    from hf_vanilla_transformer.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

    out, _ = builtin_run
    greedy = shutil.copytree(out, tmp_path / "greedy", ignore=shutil.ignore_patterns("checkpoint-*"))
    config = json.loads((greedy / "generation_config.json").read_text())
    (greedy / "generation_config.json").write_text(json.dumps({**config, "num_beams": 1}))
    beams, generate = [], VanillaTransformerForConditionalGeneration.generate

    def recording(self, *args, **kwargs):
        beams.append(kwargs.get("num_beams", self.generation_config.num_beams))
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(VanillaTransformerForConditionalGeneration, "generate", recording)
    run_main("--output_dir", tmp_path / "scored", "--model_name_or_path", greedy, "--do_train", "false",
             *FEW_NUMBERS, "--max_eval_samples", "10", capsys=capsys)
    assert beams and set(beams) == {1}
    # the results files, all a scoring run writes, say how and on what it scored (they gave only the numbers)
    results = json.loads((tmp_path / "scored" / "eval_results.json").read_text())
    assert results["eval_decoding"] == "greedy search, at most source length + 50 new tokens"
    assert results["eval_data"] == ("the built-in `number_words` corpus (number words generated with num2words), "
                                    "validation split: the first 10 of 16 pairs")
    assert json.loads((tmp_path / "scored" / "all_results.json").read_text())["predict_data"].endswith(
        "test split: 16 pairs")
    from hf_vanilla_transformer.training import scored_data_description

    _, data_args, _ = parse_arguments(["--output_dir", str(tmp_path / "x"), "--train_prefix", "data/train",
                                       "--validation_prefix", "data/val", "--source_lang", "en", "--target_lang", "de"])
    assert scored_data_description(data_args, "validation", 17, {"validation": (20, 1014)}, blank=3) == (
        "local files `val.en` and `val.de`, validation split: 17, from the first 20 of 1,014 pairs, and 3 with a "
        "blank side left out")


def test_scoring_a_model_without_data_flags_says_the_built_in_corpus_is_used(tmp_path, caplog):
    """The Multi30k en->de model given with no data flags was scored on the built-in German number words, and the
    warning said "this run gives --source_lang de --target_lang en ... Check the two flags", flags never given."""
    from hf_vanilla_transformer.model_card import CARD_INPUTS_FILE
    from hf_vanilla_transformer.training import warn_about_another_direction

    model = make_tiny_model_dir(tmp_path / "m30k")
    (model / CARD_INPUTS_FILE).write_text(json.dumps({
        "source_lang": "en", "target_lang": "de", "dataset_description": "local files `train.en` and `train.de`"}))
    _, data_args, _ = parse_arguments(["--output_dir", str(tmp_path / "scored"), "--model_name_or_path", str(model),
                                       "--do_train", "false"])
    with caplog.at_level(logging.WARNING):
        warn_about_another_direction(str(model), data_args, training=False)
    assert caplog.messages[-1] == (
        f"{model} was trained to translate en -> de on local files `train.en` and `train.de`, and this run, given no "
        "data flags, scores it on the built-in number_words corpus (de -> en): it translates as it learned, and these "
        "scores will say little about it. Give the data with --train_prefix, --validation_prefix or --test_prefix (or "
        "the --*_file flags, or --dataset_name) and its --source_lang and --target_lang.")


def test_translations_cut_short_by_the_length_limit_are_warned_about(caplog):
    """A generation config's max_new_tokens 3 cut every translation short, and the scores were given without a
    word; under the model's own limit (source length + 50) a model repeating itself is said only where it is common."""
    from types import SimpleNamespace

    from hf_vanilla_transformer.training import warn_if_cut_short

    ended, unended = [1, 5, 6, 2, 0], [1, 5, 6, 7, 8]  # eos is 2, pad 0
    args = SimpleNamespace(generation_max_length=None)
    with caplog.at_level(logging.WARNING):
        warn_if_cut_short([unended, unended, ended], 2, "validation", args, {"max_new_tokens": 4})
        assert caplog.messages[-1] == (
            "2 of the 3 validation translations stopped at the length limit (the generation config's max_new_tokens "
            "4) before their end token: cut short, they score lower. Raise it (--generation_max_length) where "
            "translations need more tokens; a model that repeats itself up to it needs more training.")
        caplog.clear()
        warn_if_cut_short([unended] + [ended] * 199, 2, "test", SimpleNamespace(generation_max_length=5), {})
        assert "(--generation_max_length 5) before their end token" in caplog.messages[-1]
        caplog.clear()  # generate() takes max_new_tokens over a max_length given
        warn_if_cut_short([unended], 2, "test", SimpleNamespace(generation_max_length=5), {"max_new_tokens": 3})
        assert "(the generation config's max_new_tokens 3)" in caplog.messages[-1]
        caplog.clear()
        warn_if_cut_short([unended] + [ended] * 199, 2, "test", args, {})  # 1 in 200 under the model's own limit
        assert caplog.messages == []
        warn_if_cut_short([unended] * 3 + [ended] * 97, 2, "test", args, {})
        assert caplog.messages[-1].endswith("(source length + 50 tokens) before their end token: cut short, they "
                                            "score lower. The model has not learnt to end them, as early in training: "
                                            "train for longer.")


def test_the_hub_token_is_not_saved_with_the_run(tmp_path, capsys):
    """--hub_token was pickled in plain text into training_args.bin, the run's and every checkpoint's: a pushed
    checkpoint folder, or a copy of one, published it."""
    out = tmp_path / "run"
    run_main("--output_dir", out, *FEW_NUMBERS, *TINY, "--max_steps", "2", "--save_strategy", "steps",
             "--save_steps", "1", "--average_last_checkpoints", "0", "--hub_token", "hf_secret_for_this_test",
             capsys=capsys)
    saved = sorted(out.rglob("training_args.bin"))
    assert len(saved) >= 2  # the run's and its checkpoints'
    assert not [path for path in saved if b"hf_secret_for_this_test" in path.read_bytes()]


def test_hub_flags_without_push_to_hub_are_warned_about(tmp_path, caplog):
    """--hub_model_id user/x without --push_to_hub pushed nothing and said nothing, while the card's snippets named
    user/x."""
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        parse_arguments(["--output_dir", str(tmp_path / "run"), "--hub_model_id", "user/x", "--hub_revision", "v1"])
    assert ("--hub_model_id, --hub_revision without --push_to_hub: nothing is pushed (the model card's snippets name "
            "--hub_model_id all the same). Add --push_to_hub true, or push the run later with scripts/push_to_hub.py."
            ) in caplog.messages


def test_token_batching_bounds_every_batch(builtin_run):
    out, _ = builtin_run
    state = json.loads((out / "trainer_state.json").read_text())
    # 300 pairs of ~6 and ~12 tokens in batches of <= 400 padded tokens per side: far more steps than 300 / 8
    assert state["global_step"] >= 2 * 300 * 10 // 400


def test_average_checkpoints(builtin_run, tmp_path):
    out, _ = builtin_run
    checkpoints = run_checkpoints(out)[-3:]
    assert len(checkpoints) == 3
    average_checkpoints(checkpoints, tmp_path / "averaged")
    averaged = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "averaged")
    members = [AutoModelForSeq2SeqLM.from_pretrained(c) for c in checkpoints]
    for name, weight in averaged.state_dict().items():
        expected = torch.stack([m.state_dict()[name] for m in members]).mean(0)
        torch.testing.assert_close(weight, expected, msg=name)
    assert averaged.lm_head.weight is averaged.model.shared.weight
    assert AutoTokenizer.from_pretrained(tmp_path / "averaged").pad_token == "<pad>"
    script = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "average_checkpoints.py"), str(out), "--last", "99",
         "--output_dir", str(tmp_path / "x")], capture_output=True, text=True,
    )
    assert script.returncode != 0 and "fewer than --last 99" in script.stderr


def write_lines(path, lines, compress=False):
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if compress else data)


def test_plain_text_files_and_fine_tuning(builtin_run, tmp_path):
    """Plain parallel text (.gz too) and --model_name_or_path: fine-tune the built-in run's model on new data."""
    out, _ = builtin_run
    pairs = [("zwei", "two"), ("drei", "three"), ("vier", "four"), ("fünf", "five")] * 4
    for split in ("train", "val"):
        write_lines(tmp_path / f"{split}.de.gz", [de for de, _ in pairs], compress=True)
        write_lines(tmp_path / f"{split}.en", [en for _, en in pairs])
    log = run_script(
        "--output_dir", tmp_path / "tuned", "--model_name_or_path", out, "--train_prefix", tmp_path / "train",
        "--validation_prefix", tmp_path / "val", "--source_lang", "de", "--target_lang", "en", "--max_steps", "3",
        "--per_device_train_batch_size", "8", "--dropout", "0.25",
    )
    results = json.loads((tmp_path / "tuned" / "all_results.json").read_text())
    assert "eval_bleu" in results and "predict_bleu" not in results
    tuned, trained = (json.loads((folder / "config.json").read_text()) for folder in (tmp_path / "tuned", out))
    assert tuned["dropout"] == 0.25 and tuned["d_model"] == trained["d_model"]  # --dropout applies when fine-tuning
    assert len((tmp_path / "tuned" / "generated_predictions.txt").read_text().splitlines()) == 16
    assert "Reusing" not in log  # the tokenizer came from the fine-tuned model
    card = " ".join((tmp_path / "tuned" / "README.md").read_text().split())
    assert f"Fine-tuned from the local model `{out.name}`" in card and str(out) not in card  # by name: the card is published


def test_a_run_without_validation_data_says_what_it_will_not_do(tmp_path, capsys, caplog):
    """Training data alone: the run said "No validation split: evaluation during training is off.", and ended with
    no scores and no word of how to get them."""
    pairs = [("zwei Hunde", "two dogs"), ("drei Katzen", "three cats"), ("vier Mäuse", "four mice")] * 4
    write_lines(tmp_path / "train.de", [de for de, _ in pairs])
    write_lines(tmp_path / "train.en", [en for _, en in pairs])
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        run_main("--output_dir", tmp_path / "run", "--train_prefix", tmp_path / "train", "--source_lang", "de",
                 "--target_lang", "en", *TINY, "--max_steps", "2", "--per_device_train_batch_size", "4",
                 "--learning_rate", "1e-3", capsys=capsys)
    assert ("No validation data: the run does not evaluate while it trains, and the model is not scored at all (no "
            "BLEU, no results in its card). Give --validation_prefix or --validation_file (or a dataset with a "
            "'validation' split) to score the model as it trains.") in caplog.messages


def test_evaluation_files_are_translated_line_for_line_as_translate_py_reads_them(tmp_path, capsys):
    """Blank lines in validation or test files were dropped, so generated_predictions.txt no longer lined up with
    the files (sacrebleu refused them); a run of spaces or a tab in a line was translated otherwise than
    translate.py translates it; and BLEU was scored against the references as the tokenizer decodes them."""
    model_dir = make_tiny_model_dir(tmp_path / "model")  # random weights: some tokens for every source
    sources = ["Ein Hund läuft.", "", "Eine Frau liest.", "Zwei  Kinder\tspielen im Park.", "Der Mann.", "Ein Buch.",
               "Die Wiese.", ""]
    references = ["A dog runs.", "gap", "A woman reads.", "Two children play in the park.", "", "A book.",
                  "The meadow.", "end"]
    write_lines(tmp_path / "test.de", sources)
    write_lines(tmp_path / "test.en", references)
    run_main("--output_dir", tmp_path / "scored", "--model_name_or_path", model_dir, "--test_prefix",
             tmp_path / "test", "--source_lang", "de", "--target_lang", "en", "--do_predict", capsys=capsys)
    lines = (tmp_path / "scored" / "generated_predictions.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == len(sources) and lines[1] == lines[4] == lines[7] == ""
    assert all(lines[row] for row in (0, 2, 3, 5, 6))
    translator = pipeline("machine-translation", model=str(model_dir))
    assert lines[3] == translator("Zwei Kinder spielen im Park.")[0]["translation_text"]
    results = json.loads((tmp_path / "scored" / "all_results.json").read_text())
    scored = [0, 2, 3, 5, 6]
    assert results["predict_samples"] == len(scored) and results["predict_blank_pairs"] == 3  # said on the card
    expected = sacrebleu.corpus_bleu([lines[row] for row in scored], [[references[row] for row in scored]]).score
    assert results["predict_bleu"] == pytest.approx(expected)


def test_chinese_targets_are_scored_with_sacrebleus_chinese_tokenization(tmp_path, capsys, monkeypatch):
    """13a splits at spaces and punctuation, so a perfect Chinese translation scored BLEU 0: the target language
    chooses BLEU's tokenization as sacrebleu's -l does, the scores and the printed signature alike."""
    from hf_vanilla_transformer import training

    chosen = []
    compute_metrics = training.make_compute_metrics
    monkeypatch.setattr(training, "make_compute_metrics",
                        lambda *args, **kwargs: chosen.append(kwargs["bleu_tokenize"]) or compute_metrics(*args, **kwargs))
    model_dir = make_tiny_model_dir(tmp_path / "model")
    write_lines(tmp_path / "test.de", ["Ein Hund läuft.", "Eine Frau liest."])
    write_lines(tmp_path / "test.zh", ["一只狗在跑。", "一个女人在看书。"])
    flags = ["--model_name_or_path", model_dir, "--test_prefix", tmp_path / "test", "--source_lang", "de",
             "--do_predict"]
    printed = run_main("--output_dir", tmp_path / "zh", *flags, "--target_lang", "zh", capsys=capsys)
    assert set(chosen) == {"zh"} and "tok:zh" in printed
    with pytest.raises(InputError, match="--bleu_tokenize: sacrebleu has no BLEU tokenizer 'words'"):
        parse_arguments(["--output_dir", str(tmp_path / "x"), *map(str, flags), "--target_lang", "zh",
                         "--bleu_tokenize", "words"])
    _, data_args, _ = parse_arguments(["--output_dir", str(tmp_path / "x"), *map(str, flags), "--target_lang", "zh",
                                       "--bleu_tokenize", "char"])
    assert data_args.bleu_tokenize == "char"


def test_json_lines_files(tmp_path, capsys):
    rows = [{"translation": {"en": f"{n} apples", "fr": f"{n} pommes"}} for n in range(40)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_main(
        "--output_dir", tmp_path / "out", "--train_file", tmp_path / "train.jsonl", "--validation_file",
        tmp_path / "train.jsonl", "--source_lang", "en", "--target_lang", "fr", *TINY, "--vocab_size", "260",
        "--max_steps", "2", "--per_device_train_batch_size", "8", "--max_eval_samples", "8", capsys=capsys,
    )
    assert "eval_bleu" in json.loads((tmp_path / "out" / "all_results.json").read_text())
    # the user's text keeps its case and letters (only the built-in corpus' tokenizer reads numbers without them)
    assert AutoTokenizer.from_pretrained(tmp_path / "out").backend_tokenizer.normalizer is None


def test_paper_recipe_is_the_default(tmp_path):
    _, data, args = parse_arguments(
        ["--output_dir", str(tmp_path), "--train_prefix", "x/train", "--source_lang", "en", "--target_lang", "de"]
    )
    assert (args.adam_beta1, args.adam_beta2, args.adam_epsilon) == (0.9, 0.98, 1e-9)
    assert args.lr_scheduler_type == "inverse_sqrt" and args.warmup_steps == 4000
    assert args.learning_rate == pytest.approx(512**-0.5 * 4000**-0.5)
    assert args.label_smoothing_factor == 0.1
    assert args.predict_with_generate and data.builtin_dataset is None
    # evaluation decodes by the model's generation config: beam 4 for a new model (section 6.1), and a trained
    # model's own where one is scored or fine-tuned (4 beams scored a greedy model's translations)
    assert args.generation_num_beams is None
    from hf_vanilla_transformer.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

    model = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig(
        vocab_size=40, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32))
    assert (model.generation_config.num_beams, model.generation_config.length_penalty) == (4, 0.6)


def flag_default_in_help(help_text: str, flag: str) -> str:
    """The `(default: ...)` that `--help` prints for `flag`, its line breaks joined."""
    entry = help_text.split(f"\n  --{flag} ", 1)[1].split("\n  --", 1)[0]
    return " ".join(entry.split("(default:", 1)[1].split()).removesuffix(")")


def test_help_shows_the_defaults_the_run_gets(capsys):
    """`--help` says label smoothing 0.1 and Adam's beta2 0.98, what the run uses, not transformers' 0.0 and 0.999;
    with a data flag the paper's learning rate formula, without one the built-in run's flags."""
    for argv, learning_rate, epochs in [
        (["--train_prefix", "x/train", "--help"], "d_model^-0.5 * warmup_steps^-0.5, the paper's peak (section 5.3); "
         "5e-05 with --model_name_or_path, the Trainer's default", "3.0"),
        (["--help"], "2e-3", "5"),
        (["--builtin_dataset", "number_words", "--help"], "2e-3", "5"),  # named, it is still the built-in run
    ]:
        with pytest.raises(SystemExit) as exit_:
            parse_arguments(argv)
        help_text = capsys.readouterr().out
        assert exit_.value.code == 0
        assert flag_default_in_help(help_text, "label_smoothing_factor") == "0.1"
        assert flag_default_in_help(help_text, "adam_beta2") == "0.98"
        assert flag_default_in_help(help_text, "generation_num_beams") == ("the model's generation config: 4 for a "
                                                                           "new model, as in the paper (section 6.1)")
        assert flag_default_in_help(help_text, "learning_rate") == learning_rate
        assert flag_default_in_help(help_text, "num_train_epochs") == epochs
        description = " ".join(help_text.split())
        assert ("The defaults shown are the built-in number-words run's" in description) is (epochs == "5")


def test_an_average_that_scores_less_than_the_last_evaluation_is_warned_about(caplog):
    """A short run averaged checkpoints 100-300 into a model of BLEU 1.42 where step 300 had scored 2.25: the card
    and the console gave only the lower score."""
    from hf_vanilla_transformer.training import warn_if_averaging_scored_less

    history = [{"loss": 5.0, "step": 100}, {"eval_bleu": 1.1, "step": 200}, {"eval_bleu": 2.25, "step": 300}]
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        warn_if_averaging_scored_less(history, {"eval_bleu": 2.0}, 5)  # within 0.5: noise
        warn_if_averaging_scored_less(history, {"eval_bleu": 1.42}, None)  # not averaged: the last weights
        assert caplog.text == ""
        warn_if_averaging_scored_less(history, {"eval_bleu": 1.42}, 5)
    assert "the average of its last 5 checkpoints, scores BLEU 1.42 on validation, below the 2.25 of the model at " \
           "step 300" in caplog.text and "--average_last_checkpoints 0" in caplog.text


def test_other_processes_leave_the_packages_warnings_and_data_bars_to_the_main_one(monkeypatch):
    """Under 2 processes each printed the same data warnings and "Checking the train pairs" bars: once now, from the
    main process, unless --log_level_replica asks the others for them."""
    from types import SimpleNamespace

    import datasets

    from hf_vanilla_transformer import training

    disabled = []
    monkeypatch.setattr(datasets, "disable_progress_bars", lambda: disabled.append(True))
    import transformers

    package = logging.getLogger("hf_vanilla_transformer")
    levels = package.level, transformers.logging.get_verbosity(), datasets.logging.get_verbosity()
    try:
        for main_process, replica, expected in [(True, "warning", logging.INFO), (False, "warning", logging.ERROR),
                                                (False, "info", logging.INFO)]:
            disabled.clear()
            args = SimpleNamespace(log_level="passive", log_level_replica=replica, should_log=main_process,
                                   disable_tqdm=False, get_process_log_level=lambda: logging.WARNING if main_process
                                   else {"warning": logging.WARNING, "info": logging.INFO}[replica])
            training.setup_logging(args)
            assert package.level == expected and bool(disabled) is not main_process
    finally:
        package.setLevel(levels[0])
        transformers.logging.set_verbosity(levels[1])
        datasets.logging.set_verbosity(levels[2])


def test_help_groups_the_flags_and_says_what_the_script_does_with_them(capsys):
    """`--help` was 800 lines of one flat list behind a 157-line usage block, the script's own flags last among
    GaLore's, and it said the phases default to False and --push_to_hub pushes at every save: the flags are in
    groups (model, data, training), the usage is two lines, and those flags say what this script does."""
    with pytest.raises(SystemExit):
        parse_arguments(["--help"])
    help_text = capsys.readouterr().out
    usage = help_text.split("\n\n", 1)[0]
    assert usage.startswith("usage: ") and len(usage.splitlines()) == 2
    groups = [line for line in help_text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert [group.split(":")[0] for group in groups] == ["options", "model flags", "data flags", "training flags"]
    assert help_text.index("\n  --train_prefix ") < help_text.index("\n  --learning_rate ")
    assert flag_default_in_help(help_text, "do_eval") == "true where its split is there, unless other phases are " \
                                                          "named true"
    push = help_text.split("\n  --push_to_hub ", 1)[1].split("\n  --", 1)[0]
    assert "once, at the end" in " ".join(push.split())
    assert "last complete checkpoint" in help_text.split("\n  --resume_from_checkpoint ", 1)[1].split("\n  --")[0]


def test_a_fine_tuning_without_warmup_steps_warms_up_over_a_tenth_of_its_steps(tmp_path, caplog):
    """A fine-tuning took the paper's 4,000 warmup steps (the built-in corpus' 400): a run of 1,000 steps at 5e-5
    never got above 1.25e-5, and the model card showed the peak of 5e-5 all the same."""
    from hf_vanilla_transformer.model_card import _recipe

    model_dir = make_tiny_model_dir(tmp_path / "model")
    own_data = ["--output_dir", str(tmp_path / "run"), "--train_prefix", "x", "--source_lang", "en", "--target_lang",
                "de", "--model_name_or_path", str(model_dir)]
    _, _, args = parse_arguments(own_data)
    assert args.warmup_steps == 0.1 and args.get_warmup_steps(1000) == 100
    assert ("Warmup steps", "10% of the training steps") in _recipe(args)
    _, _, args = parse_arguments(["--output_dir", str(tmp_path / "b"), "--model_name_or_path", str(model_dir)])
    assert args.warmup_steps == 0.1  # on the built-in corpus too
    _, _, args = parse_arguments([*own_data, "--warmup_steps", "50"])
    assert args.warmup_steps == 50
    _, _, args = parse_arguments(own_data[:-2])  # a new model: the paper's
    assert args.warmup_steps == 4000
    with caplog.at_level(logging.WARNING):
        parse_arguments([*own_data, "--max_steps", "20"])
    assert "never reaches its peak" not in caplog.text


def test_a_fine_tuning_without_a_learning_rate_gets_the_trainers_not_the_papers(tmp_path, caplog):
    """The paper's peak d_model^-0.5 * warmup^-0.5 is for training from scratch: a short fine-tuning that followed the
    warning's advice (fewer --warmup_steps) got 0.04 at d_model 128 and 5 warmup steps, and BLEU 27 fell to 0.
    --warmup_steps 0 left the formula without a value (it was read as 1: the largest rate of all)."""
    model_dir = make_tiny_model_dir(tmp_path / "model")
    own_data = ["--output_dir", str(tmp_path / "run"), "--train_prefix", "x", "--source_lang", "en", "--target_lang",
                "de"]
    for warmup in ("4000", "5", "0"):
        _, _, args = parse_arguments([*own_data, "--model_name_or_path", str(model_dir), "--warmup_steps", warmup])
        assert args.learning_rate == 5e-5
    _, _, args = parse_arguments([*own_data, "--model_name_or_path", str(model_dir), "--learning_rate", "1e-3"])
    assert args.learning_rate == 1e-3
    _, _, args = parse_arguments(["--output_dir", str(tmp_path / "b"), "--model_name_or_path", str(model_dir)])
    assert args.learning_rate == 5e-5  # the built-in run's 2e-3 is a new model's too
    with pytest.raises(InputError, match=r"--warmup_steps 0 leaves the default learning rate, the paper's peak "
                                         r"d_model\^-0.5 \* warmup\^-0.5, without a value .* give --learning_rate"):
        parse_arguments([*own_data, "--warmup_steps", "0"])
    _, _, args = parse_arguments([*own_data, "--warmup_steps", "0", "--learning_rate", "1e-3"])
    assert args.learning_rate == 1e-3
    with caplog.at_level(logging.WARNING):
        parse_arguments([*own_data, "--max_steps", "20"])
    assert "give fewer --warmup_steps and a --learning_rate: the default peak" in caplog.text


def test_a_new_model_in_small_sentence_batches_at_the_papers_rate_is_warned_about(tmp_path, caplog):
    """A corpus of files with the defaults trained in the Trainer's batches of 8 sentences at the paper's peak rate,
    which is for batches of ~25,000 tokens, without a word: the README's recipes pass --max_tokens_per_batch."""
    own_data = ["--output_dir", str(tmp_path / "run"), "--train_prefix", "x", "--source_lang", "en",
                "--target_lang", "de"]
    expected = ("A new model trained in batches of 8 sentences (the Trainer's --per_device_train_batch_size) at the "
                "paper's peak learning rate (0.0007), which the paper used with batches of ~25,000 tokens: pass "
                "--max_tokens_per_batch (e.g. 4096 a device, as the README's recipes do), or a "
                "--per_device_train_batch_size or --learning_rate of your own.")
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        parse_arguments(own_data)
    assert [record.getMessage() for record in caplog.records] == [expected]
    for chosen in (["--max_tokens_per_batch", "4096"], ["--per_device_train_batch_size", "64"],
                   ["--learning_rate", "1e-4"], ["--model_name_or_path", str(make_tiny_model_dir(tmp_path / "m"))]):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
            parse_arguments([*own_data, *chosen])
        assert "batches of ~25,000 tokens" not in caplog.text, chosen
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        parse_arguments(["--output_dir", str(tmp_path / "builtin")])  # the built-in run's own batch and rate
    assert "batches of ~25,000 tokens" not in caplog.text


def test_a_warmup_fraction_gives_the_default_rate_of_its_steps(tmp_path):
    """transformers 5 reads --warmup_steps below 1 as a fraction of the training steps: the paper's default rate
    took 0.1 for 1 step (63 times too high a rate for the base model with --warmup_steps 0.04 over 100k steps)."""
    own_data = ["--output_dir", str(tmp_path), "--train_prefix", "x", "--source_lang", "en", "--target_lang", "de"]
    _, _, args = parse_arguments([*own_data, "--warmup_steps", "0.1", "--max_steps", "1000"])
    assert args.learning_rate == pytest.approx(512**-0.5 * 100**-0.5)  # 100 of the 1,000 steps
    with pytest.raises(InputError, match=r"--warmup_steps 0.1 is a fraction of the training steps, but the default "
                                         r"learning rate .* give --warmup_steps in steps \(e.g. 4000\), --max_steps, "
                                         r"or --learning_rate"):
        parse_arguments([*own_data, "--warmup_steps", "0.1"])
    _, _, args = parse_arguments([*own_data, "--warmup_steps", "0.1", "--learning_rate", "5e-4"])
    assert args.learning_rate == 5e-4


@pytest.mark.parametrize("flags, message", [
    (["--fp16", "true"], "--fp16 is float16 with loss scaling on a GPU, and this run is on the CPU"),
    (["--lr_scheduler_type", "cosine_with_min_lr"], "--lr_scheduler_type cosine_with_min_lr: One of min_lr or "
     "min_lr_rate should be set through the `lr_scheduler_kwargs`. Give its settings with --lr_scheduler_kwargs"),
    (["--lr_scheduler_type", "warmup_stable_decay"], "--lr_scheduler_type warmup_stable_decay: get_wsd_schedule() "
     "missing 1 required positional argument: 'num_decay_steps'."),
    (["--optim", "adamw_bnb_8bit"], "--optim adamw_bnb_8bit: You need to install `bitsandbytes`"),
    (["--eval_strategy", "steps", "--load_best_model_at_end", "true", "--metric_for_best_model", "rouge"],
     "--metric_for_best_model rouge: evaluation reports loss, bleu, chrf, gen_len, exact_match, "),
    (["--do_eval", "false", "--eval_strategy", "steps"], "--do_eval false leaves out evaluation, but --eval_strategy"),
    (["--eval_strategy", "steps", "--load_best_model_at_end", "true", "--average_last_checkpoints", "2"],
     "--load_best_model_at_end and --average_last_checkpoints both choose the run's model"),
    (["--group_by_length", "true"], "--group_by_length (did you mean --train_sampling_strategy group_by_length?)"),
    (["--warmup_ratio", "0.1"], "--warmup_ratio (did you mean --warmup_steps 0.1 (below 1, a fraction"),
    (["--warmup_ratio=0.25"], "--warmup_ratio (did you mean --warmup_steps 0.25 (below 1, a fraction"),  # was 0.1
    (["--load_best_model_at_end", "true", "--eval_strategy", "no"],  # the last model kept, without a word
     "--load_best_model_at_end keeps the checkpoint that scored best at an evaluation during training, and this run "
     "evaluates none (--eval_strategy no, or no validation data)"),
    (["--load_best_model_at_end", "true", "--train_prefix", "data/train", "--source_lang", "de", "--target_lang",
      "en"], "--load_best_model_at_end keeps the checkpoint that scored best"),  # no validation data: no evaluation
    (["run.yaml", "--max_steps", "5"], "run.yaml looks like a file of flags: such a file must be the only argument"),
])
def test_trainer_flags_that_would_fail_or_be_ignored_later_are_refused_at_once(tmp_path, flags, message):
    """Each was a traceback after the data was loaded and tokenized (a schedule's or optimizer's missing setting, a
    best-model metric evaluation does not report), or silently not what was asked (--fp16 trained in float32 on a
    CPU and the card said fp16; --do_eval false still evaluated; the average replaced the best model)."""
    with pytest.raises(InputError) as error:
        parse_arguments(["--output_dir", str(tmp_path), *flags])
    assert message in str(error.value)


def test_the_flags_warnings_come_from_the_first_process_of_a_launch_alone(tmp_path, caplog, monkeypatch):
    """Under `accelerate launch --num_processes 2` every process printed them, before its logging was set up."""
    import hf_vanilla_transformer.training as training

    class Parsed(Exception):
        pass

    def parsed(training_args):
        raise Parsed

    monkeypatch.setattr(training, "setup_logging", parsed)
    package = logging.getLogger("hf_vanilla_transformer")
    monkeypatch.setattr(package, "level", package.level)  # as it was, after the test
    for rank, said in (("1", False), ("0", True)):
        monkeypatch.setenv("RANK", rank)
        package.setLevel(logging.NOTSET)  # each process runs main once
        caplog.clear()
        with caplog.at_level(logging.WARNING), pytest.raises(Parsed):
            main(["--output_dir", str(tmp_path), "--hub_strategy", "every_save"])
        assert ("--hub_strategy has no effect here" in caplog.text) is said, rank


def test_flags_that_imply_others_get_them(tmp_path, caplog):
    """--save_steps alone saves by steps (the script's default is by epoch; transformers' by steps); keeping the best
    checkpoint saves at each evaluation and does not average; flags this run does not use are named."""
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--save_steps", "5", "--eval_steps", "10"])
    assert (args.save_strategy, args.save_steps, args.eval_strategy, args.eval_steps) == ("steps", 5, "steps", 10)
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--eval_strategy", "steps", "--eval_steps", "5",
                                  "--load_best_model_at_end", "true", "--metric_for_best_model", "eval_bleu"])
    assert (args.save_strategy, args.save_steps) == ("steps", 5) and args.average_last_checkpoints is None
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        parse_arguments(["--output_dir", str(tmp_path), "--hub_strategy", "every_save", "--max_tokens_per_batch",
                         "500", "--train_sampling_strategy", "group_by_length"])
    assert "--hub_strategy has no effect here: the script pushes the run once, at its end" in caplog.text
    assert "--train_sampling_strategy has no effect here: --max_tokens_per_batch draws" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        parse_arguments(["--output_dir", str(tmp_path), "--sortish_sampler", "--max_tokens_per_batch", "500",
                         "--per_device_train_batch_size", "16", "--dataloader_drop_last", "true"])
    for flag in ("sortish_sampler", "per_device_train_batch_size", "dataloader_drop_last"):
        assert f"--{flag} has no effect here" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        parse_arguments(["--output_dir", str(tmp_path), "--per_device_train_batch_size", "16"])
    assert "has no effect" not in caplog.text  # sentence batches: it is their size


@pytest.mark.parametrize("flags, expected", [
    (["--save_steps", "2"], ("steps", 2, "steps", 2)),  # --save_steps was dropped: saved and evaluated each epoch
    (["--eval_strategy", "steps", "--logging_steps", "3"], ("steps", 3, "steps", 3)),  # saved every 500 steps
    (["--eval_strategy", "steps", "--save_steps", "10"], ("steps", 10, "steps", 10)),  # evaluated every 50 steps
    (["--eval_steps", "5"], ("steps", 5, "steps", 5)),
    (["--save_strategy", "steps"], ("steps", 500, "steps", 500)),  # the Trainer's 500 steps a checkpoint
    (["--save_strategy", "steps", "--eval_strategy", "steps"], ("steps", 500, "steps", 500)),
    ([], ("epoch", None, "epoch", None)),
    (["--save_strategy", "epoch"], ("epoch", None, "epoch", None)),
    (["--save_strategy", "best", "--metric_for_best_model", "loss"], ("best", None, "epoch", None)),
])
def test_keeping_the_best_model_saves_at_each_evaluation(tmp_path, flags, expected):
    """--load_best_model_at_end chooses among checkpoints, and the Trainer keeps a best evaluation only where it saved
    a checkpoint at that step: with saving or evaluation set by the flags, the other follows it."""
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--load_best_model_at_end", "true", *flags])
    save_steps, eval_steps = (steps if strategy == "steps" else None for strategy, steps in (
        (args.save_strategy, args.save_steps), (args.eval_strategy, args.eval_steps)))
    assert (args.save_strategy, save_steps, args.eval_strategy, eval_steps) == expected
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--load_best_model_at_end", "false", "--save_steps",
                                  "7"])  # saving alone by steps, as without the flag
    assert (args.save_strategy, args.save_steps, args.eval_strategy) == ("steps", 7, "epoch")


def test_trainer_flags_override_the_recipe(tmp_path):
    model, _, args = parse_arguments(
        ["--output_dir", str(tmp_path), "--train_prefix", "x", "--source_lang", "en", "--target_lang", "de",
         "--warmup_steps", "100", "--adam_beta2", "0.999", "--label_smoothing_factor", "0", "--preset", "big"]
    )
    assert args.warmup_steps == 100 and args.adam_beta2 == 0.999 and args.label_smoothing_factor == 0
    assert args.learning_rate == pytest.approx(1024**-0.5 * 100**-0.5)  # big: d_model 1024
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--learning_rate", "3e-4"])
    assert args.learning_rate == 3e-4
    _, data, args = parse_arguments(  # HfArgumentParser's other spelling is as given
        ["--output_dir", str(tmp_path), "--train-prefix", "x", "--source-lang", "en", "--target-lang", "de",
         "--learning-rate", "1e-5", "--warmup-steps", "1", "--label-smoothing-factor", "0"])
    assert (args.learning_rate, args.warmup_steps, args.label_smoothing_factor) == (1e-5, 1, 0)
    assert data.train_prefix == "x" and data.builtin_dataset is None
    _, _, args = parse_arguments(  # nothing to score: generating is not needed
        ["--output_dir", str(tmp_path), "--train_prefix", "x", "--source_lang", "en", "--target_lang", "de",
         "--predict_with_generate", "false"])
    assert not args.predict_with_generate


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_flags_file_is_the_same_command_line(tmp_path, suffix):
    """`train_translation.py flags.json` (as in transformers' examples) gets the recipe's defaults and the checks."""
    flags = {"output_dir": str(tmp_path / "run"), "train_prefix": "x/train", "source_lang": "en", "target_lang": "de",
             "preset": "tiny", "warmup_steps": 100, "bf16": False, "report_to": ["none"],
             "lr_scheduler_type": "cosine_with_restarts", "lr_scheduler_kwargs": {"num_cycles": 2},
             "max_train_samples": None}
    path = tmp_path / f"flags{suffix}"
    path.write_text(json.dumps(flags))  # JSON is YAML too
    from_file = parse_arguments([str(path)])
    from_flags = parse_arguments(["--output_dir", str(tmp_path / "run"), "--train_prefix", "x/train", "--source_lang",
                                  "en", "--target_lang", "de", "--preset", "tiny", "--warmup_steps", "100", "--bf16",
                                  "false", "--report_to", "none", "--lr_scheduler_type", "cosine_with_restarts",
                                  "--lr_scheduler_kwargs", '{"num_cycles": 2}'])
    assert from_file[:2] == from_flags[:2] and from_file[2].to_dict() == from_flags[2].to_dict()
    args = from_file[2]
    assert args.adam_beta2 == 0.98 and args.learning_rate == pytest.approx(128**-0.5 * 100**-0.5)  # the recipe's
    path.write_text(json.dumps({**flags, "label_smoothing_factor": 2}))
    with pytest.raises(InputError, match="--label_smoothing_factor"):
        parse_arguments([str(path)])


@pytest.mark.parametrize("flags, sizes", [
    (["--preset", "big"], (1024, 6, 16, 4096, 0.3)),
    (["--preset", "big", "--layers", "2", "--dropout", "0.1"], (1024, 2, 16, 4096, 0.1)),
    (["--preset", "base"], (512, 6, 8, 2048, 0.1)),
    (["--preset", "tiny", "--attention_heads", "2"], (128, 3, 2, 512, 0.1)),
])
def test_a_preset_and_size_flags_make_the_new_models_config(tmp_path, flags, sizes):
    model_args, data_args, _ = parse_arguments(
        ["--output_dir", str(tmp_path), "--train_prefix", "x", "--source_lang", "en", "--target_lang", "de", *flags]
    )
    config = model_config(model_args, data_args, 1000, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    assert (config.d_model, config.encoder_layers, config.encoder_attention_heads, config.encoder_ffn_dim,
            config.dropout) == sizes
    assert (config.decoder_layers, config.decoder_attention_heads, config.decoder_ffn_dim) == sizes[1:4]
    assert config.vocab_size == 1000 and not config.normalize_before


def test_size_flags_change_a_config_name(tmp_path):
    """--config_name, then the size flags, as for a preset; the paper's learning rate follows the d_model asked."""
    VanillaTransformerConfig(d_model=64, encoder_layers=2, decoder_layers=2).save_pretrained(tmp_path / "config")
    model_args, data_args, args = parse_arguments(
        ["--output_dir", str(tmp_path / "run"), "--config_name", str(tmp_path / "config"), "--d_model", "32",
         "--ffn_dim", "48", "--normalize_before", "--train_prefix", "x", "--source_lang", "en", "--target_lang", "de"])
    assert args.learning_rate == pytest.approx(32**-0.5 * 4000**-0.5)
    tokenizer = train_bpe_tokenizer(["a small text", "ein kleiner Text"], vocab_size=270, min_frequency=1)
    config = load_or_build_model(model_args, data_args, tokenizer).config
    assert (config.d_model, config.encoder_ffn_dim, config.encoder_layers, config.normalize_before) == (32, 48, 2, True)


def test_a_new_models_vocabulary_reaches_the_tokenizers_largest_id(tmp_path):
    """A tokenizer whose ids leave gaps (800 tokens, ids up to 1099: a vocabulary pruned by hand) made a model of 800
    rows, and the run stopped saying the tokenizer did not fit the model it had just built for it."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocabulary = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "ein": 4, "Text": 9}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocabulary, "<unk>")),
                                        pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    assert len(tokenizer) == 6
    for flags in ([], ["--config_name", str(tmp_path / "config")]):
        VanillaTransformerConfig(d_model=16).save_pretrained(tmp_path / "config")
        model_args, data_args, _ = parse_arguments(
            ["--output_dir", str(tmp_path / "run"), "--train_prefix", "x", "--source_lang", "en", "--target_lang",
             "de", "--d_model", "16", "--layers", "1", "--attention_heads", "2", "--ffn_dim", "32", *flags])
        assert load_or_build_model(model_args, data_args, tokenizer).config.vocab_size == 10


def test_no_data_arguments_means_the_builtin_corpus(tmp_path, monkeypatch):
    model, data, args = parse_arguments(["--output_dir", str(tmp_path)])
    assert data.builtin_dataset == "number_words" and (data.source_lang, data.target_lang) == ("de", "en")
    assert args.warmup_steps == 400 and args.learning_rate == 2e-3 and args.average_last_checkpoints == 3
    # naming it is the same run (it asked for --source_lang and --target_lang "with your own data")
    _, named, named_args = parse_arguments(["--output_dir", str(tmp_path), "--builtin_dataset", "number_words"])
    assert (named.source_lang, named.target_lang, named_args.warmup_steps) == ("de", "en", 400)
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--save_strategy", "no"])
    assert args.average_last_checkpoints is None  # the run's averaging yields to the user's saving
    _, _, args = parse_arguments(["--output_dir", str(tmp_path), "--save_total_limit", "1", "--warmup_steps", "100"])
    assert args.average_last_checkpoints is None and args.save_total_limit == 1
    assert args.learning_rate == 2e-3  # the built-in run's rate, not the paper's formula
    with pytest.raises(InputError, match="raise --save_total_limit to at least 3"):
        parse_arguments(["--output_dir", str(tmp_path), "--save_total_limit", "1", "--average_last_checkpoints", "3"])
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # accelerate launch --use_fsdp: FSDP does not average
    assert parse_arguments(["--output_dir", str(tmp_path)])[2].average_last_checkpoints is None


MULTI30K = SHARED_DATA / "multi30k"


@pytest.mark.skipif(not MULTI30K.is_dir(), reason="../shared/data/multi30k is absent")
def test_multi30k_recipe(tmp_path):
    """The README's Multi30k recipe, cut to a subset and 60 steps: it learns, the run's model averages its last two
    checkpoints, and evaluation over several batches translates whole sentences, as the saved model does.

    A model trained this briefly ends its sentences early, so the run's generation config asks for at least 25 new
    tokens: more than transformers' placeholder max_length=20, which used to cut every batch after the first."""
    GenerationConfig(
        num_beams=4, length_penalty=0.6, early_stopping=True, min_new_tokens=25, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1,
    ).save_pretrained(tmp_path / "generation")
    run_script(
        "--generation_config", tmp_path / "generation",
        "--output_dir", tmp_path, "--train_prefix", MULTI30K / "train", "--validation_prefix", MULTI30K / "val",
        "--source_lang", "en", "--target_lang", "de", "--preset", "base", "--d_model", "64", "--layers", "2",
        "--ffn_dim", "128", "--vocab_size", "2000", "--max_train_samples", "2000", "--max_eval_samples", "24",
        "--max_tokens_per_batch", "1500", "--max_steps", "60", "--warmup_steps", "10", "--logging_steps", "10",
        "--save_strategy", "steps", "--save_steps", "20", "--average_last_checkpoints", "2",
        "--per_device_eval_batch_size", "8", "--eval_strategy", "no",
    )
    results = json.loads((tmp_path / "all_results.json").read_text())
    assert results["eval_samples"] == 24 and "eval_chrf" in results and results["averaged_checkpoints"] == 2
    losses = [entry["loss"] for entry in json.loads((tmp_path / "trainer_state.json").read_text())["log_history"]
              if "loss" in entry]
    assert losses[-1] < min(7.0, losses[0] - 0.5)  # it learns: an untrained model scores about 8.1

    # generated_predictions.txt (trainer.predict over 3 batches of 8) is what the saved model translates alone
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
    sources = gzip.open(MULTI30K / "val.en.gz", "rt", encoding="utf-8").read().splitlines()[:24]
    expected = []
    for source in sources:
        output = model.generate(**tokenizer([source], return_tensors="pt"))
        expected.append(tokenizer.decode(output[0], skip_special_tokens=True).strip())
    predicted = (tmp_path / "generated_predictions.txt").read_text(encoding="utf-8").splitlines()
    assert predicted == expected
    assert results["eval_gen_len"] >= 25
    assert "max_length" not in json.loads((tmp_path / "generation_config.json").read_text())


def readme_training_commands():
    """The complete `python scripts/train_translation.py ...` commands of the README's code blocks (continuation
    lines joined; the sketches ending in "..." left out)."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), flags=re.S)
    commands = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line.split("#")[0]) for line in commands
            if line.startswith("python scripts/train_translation.py") and "..." not in line]


def test_the_readme_training_commands_parse(tmp_path, builtin_run):
    """Each recipe in the README names only flags the script has, with values it takes (a typo fails here, not
    after a user has set up the data)."""
    commands = readme_training_commands()
    assert any("--train_prefix" in command for command in commands), "the Multi30k recipes are gone from README.md"
    for command in commands:
        args = command[2:]
        args[args.index("--output_dir") + 1] = str(tmp_path)
        if "--model_name_or_path" in args:  # a run the README trained before: here, a tiny one
            args[args.index("--model_name_or_path") + 1] = str(builtin_run[0])
        if "--bf16" in args and not torch.cuda.is_available():
            args += ["--use_cpu", "true"]  # a GPU recipe: transformers refuses --bf16 without a GPU unless told
        model_args, _, training_args = parse_arguments(args)
        assert training_args.output_dir == str(tmp_path) and model_args.vocab_size > 0


def test_tokenizer_name_reuses_a_tokenizer(builtin_run, tmp_path, capsys):
    out, _ = builtin_run
    run_main("--output_dir", tmp_path, "--tokenizer_name", out, *FEW_NUMBERS, *TINY[:-2],  # its size is the vocabulary
             "--max_steps", "1", "--per_device_train_batch_size", "8", capsys=capsys)
    given, saved = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(tmp_path)
    assert saved.get_vocab() == given.get_vocab()  # not a newly trained vocabulary
    assert AutoModelForSeq2SeqLM.from_pretrained(tmp_path).config.vocab_size == len(given)
    # --vocab_size beside it was ignored without a word; it sizes a tokenizer trained on the data
    with pytest.raises(InputError, match=rf"--vocab_size sizes a tokenizer trained on the data, but --tokenizer_name "
                                         rf"{re.escape(str(out))} gives one, whose size is the model's vocabulary: "
                                         r"leave out one of them\.$"):
        parse_arguments(["--output_dir", str(tmp_path / "b"), "--tokenizer_name", str(out), *FEW_NUMBERS,
                         "--vocab_size", "999"])


def test_a_smaller_tokenizer_than_the_model_is_refused(builtin_run, tmp_path):
    """A fine-tuning run given another model's tokenizer of fewer tokens trained on (its ids fit the vocabulary)
    and translated gibberish, exit 0."""
    out, _ = builtin_run
    small = tmp_path / "small"
    train_bpe_tokenizer(["ein kleiner Text", "a small text"] * 5, 260, min_frequency=1).save_pretrained(small)
    model_args, data_args, _ = parse_arguments(["--output_dir", str(tmp_path / "run"), "--model_name_or_path",
                                                str(out), "--tokenizer_name", str(small), *FEW_NUMBERS])
    from hf_vanilla_transformer.tokenization import load_tokenizer

    with pytest.raises(InputError, match=rf"The tokenizer {re.escape(str(small))} has \d+ tokens and the model .* a "
                                         r"vocabulary of \d+: it is not the tokenizer the model learned"):
        load_or_build_model(model_args, data_args, load_tokenizer(small))
    assert load_or_build_model(model_args, data_args, load_tokenizer(out)).config.vocab_size > 0  # its own: fine


def test_another_tokenizer_of_the_models_size_is_refused(tmp_path):
    """A fine-tuning given another tokenizer of the same size (its ids mean other words) passed the size check:
    BLEU 12.0 fell to 0.37 and the broken model was saved with the foreign tokenizer, exit 0."""
    from hf_vanilla_transformer.tokenization import load_tokenizer

    model_dir = make_tiny_model_dir(tmp_path / "model")
    own = load_tokenizer(model_dir)
    other = tmp_path / "other"
    words = [f"{word}{n}" for n in range(40) for word in ("ein", "a", "zwei", "two")]
    train_bpe_tokenizer(words, len(own), min_frequency=1).save_pretrained(other)
    assert len(load_tokenizer(other)) >= 0.9 * len(own)  # passes the size check
    extended = tmp_path / "extended"  # tokens added at the end: the model's ids keep their words
    own.add_tokens(["<new>"])
    own.save_pretrained(extended)
    args = ["--output_dir", str(tmp_path / "run"), "--model_name_or_path", str(model_dir), *FEW_NUMBERS]
    for tokenizer, refused in ((other, True), (extended, False), (model_dir, False)):
        model_args, data_args, _ = parse_arguments([*args, "--tokenizer_name", str(tokenizer)])
        if refused:
            with pytest.raises(InputError, match=rf"--tokenizer_name {re.escape(str(other))} is not the tokenizer the "
                                                 rf"model {re.escape(str(model_dir))} learned: \d+ of its \d+ tokens "
                                                 r"have another id or none \('.*' is (missing from it|\d+ "
                                                 r"there and \d+ in the model's)\), so the ids would mean other "
                                                 r"words\. Leave "
                                                 r"--tokenizer_name out to use the model's own\.$"):
                load_or_build_model(model_args, data_args, load_tokenizer(tokenizer))
        else:
            assert load_or_build_model(model_args, data_args, load_tokenizer(tokenizer)).config.vocab_size > 0


# Every German example in README.md with the English it must print after the main job.
README_EXAMPLES = {
    "zweiundvierzig": "forty-two",
    "dreihundertzwölf": "three hundred and twelve",
    "dreiundzwanzig": "twenty-three",
    "neunzehntausendzweihundertsiebzehn": "nineteen thousand, two hundred and seventeen",
    "sieben": "seven",
    "einhundertfünf": "one hundred and five",
    "zweitausend": "two thousand",
    "dreihundertzweiundvierzig": "three hundred and forty-two",
    # the first words a person tries, which the README says come out right
    "null": "zero",
    "fünf": "five",
    "zwölf": "twelve",
    "Zweiundvierzig": "forty-two",
    "Hundert": "one hundred",
    "ZWEI": "two",  # the built-in run's tokenizer reads text without case, and umlauts spelt out as typed in ASCII
    "fuenfzehn": "fifteen",
    "eine Million": "one million",
    "EINE MILLION": "one million",
    "neunhundertneunundneunzigtausendneunhundertneunundneunzig": "nine hundred and ninety-nine thousand, nine hundred "
                                                                 "and ninety-nine",  # 999,999, the README says
}


@pytest.mark.skipif(not os.environ.get("RUN_MAIN_JOB"), reason="set RUN_MAIN_JOB=1: the README's main job, ~2-8 min")
def test_readme_main_job_reaches_bleu_80_within_10_minutes_and_translates_the_readme_examples(tmp_path):
    """`python scripts/train_translation.py --output_dir DIR`, exactly as the README gives it; then every README
    example through the snippet's generate(), the pipeline and translate.py."""
    import time

    from hf_vanilla_transformer.pipeline_translation import TASK
    from transformers import pipeline

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for german, english in README_EXAMPLES.items():
        assert german in readme, german
    start = time.monotonic()
    result = subprocess.run([sys.executable, SCRIPT, "--output_dir", str(tmp_path)], capture_output=True, text=True,
                            cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert time.monotonic() - start < 600
    results = json.loads((tmp_path / "all_results.json").read_text())
    assert results["eval_bleu"] >= 80
    assert {f"eval_exact_match_{m}" for m in ("digits_1_2", "digits_3", "digits_6", "round")} <= results.keys()
    assert "Sample translations (de -> en)" in result.stdout and "Exact match, validation (%)" in result.stdout

    sources, expected = list(README_EXAMPLES), list(README_EXAMPLES.values())
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    assert tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True) == expected
    translator = pipeline(TASK, model=str(tmp_path))
    assert [row["translation_text"] for row in translator(sources, batch_size=32)] == expected
    script = subprocess.run([sys.executable, str(REPO / "scripts" / "translate.py"), str(tmp_path), "-q"],
                            input="\n".join(sources) + "\n", capture_output=True, text=True, cwd=REPO, timeout=300)
    assert script.stdout.splitlines() == expected, script.stderr


def test_a_tokenizer_left_in_the_output_folder_is_reused_only_when_resuming(tmp_path):
    """A rerun into the same --output_dir with another --vocab_size gets the vocabulary it asks for; resuming gets
    the checkpoint's tokenizer, whose ids the checkpoint's weights were trained on."""
    import random

    from datasets import Dataset, DatasetDict

    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer
    from hf_vanilla_transformer.training import load_or_train_tokenizer

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(400)]
    pairs = [{"de": " ".join(rng.sample(words, 6)), "en": " ".join(rng.sample(words, 6))} for _ in range(500)]
    raw = DatasetDict(train=Dataset.from_dict({"translation": pairs}))
    stale = train_bpe_tokenizer([p["de"] for p in pairs], vocab_size=260)
    stale.save_pretrained(tmp_path / "run")
    stale.save_pretrained(tmp_path / "run" / "checkpoint-5")
    args = parse_arguments(["--output_dir", str(tmp_path / "run"), "--train_prefix", str(tmp_path / "unused"),
                            "--source_lang", "de", "--target_lang", "en", "--vocab_size", "400"])
    fresh = load_or_train_tokenizer(*args, raw)
    assert len(fresh) > len(stale) and len(AutoTokenizer.from_pretrained(tmp_path / "run")) == len(fresh)
    stale.save_pretrained(tmp_path / "run")
    resumed = load_or_train_tokenizer(*args, raw, resume_from=str(tmp_path / "run" / "checkpoint-5"))
    assert resumed.get_vocab() == stale.get_vocab()
    # a tokenizer given for the resumed run must be the checkpoint's: another one was taken (of the same size, it
    # went on without a word), and each id then meant another token to the half-trained weights
    larger = train_bpe_tokenizer([p["en"] for p in pairs], vocab_size=300)
    larger.save_pretrained(tmp_path / "larger")
    fresh.save_pretrained(tmp_path / "same")
    stale.save_pretrained(tmp_path / "same")
    assert len(stale) == 260 and len(larger) == 300
    # it said "0 of its 260 tokens have another id, or other special tokens": the size differs
    for tokenizer, said in (("larger", r"\(300 tokens, the checkpoint's 260\)"), ("same", None)):
        given = parse_arguments(["--output_dir", str(tmp_path / "run"), "--train_prefix", str(tmp_path / "unused"),
                                 "--source_lang", "de", "--target_lang", "en", "--tokenizer_name",
                                 str(tmp_path / tokenizer)])
        resume = str(tmp_path / "run" / "checkpoint-5")
        if said:
            with pytest.raises(InputError, match=f"The tokenizer of {tmp_path / tokenizer} is not the one {resume} was "
                                                 f"trained with {said}: the resumed model would read"):
                load_or_train_tokenizer(*given, raw, resume_from=resume)
        else:
            assert load_or_train_tokenizer(*given, raw, resume_from=resume).get_vocab() == stale.get_vocab()


def test_the_builtin_runs_overwriting_replaces_only_its_own_earlier_runs(tmp_path):
    """The built-in run overwrites --output_dir by default, so that `./run.sh main` runs again; an --output_dir
    holding another run (another corpus, a fine-tuning) is not emptied unasked: the run stops as any other."""
    from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE
    from hf_vanilla_transformer.model_card import CARD_INPUTS_FILE

    builtin = "the built-in `number_words` corpus (number words generated with num2words)"
    (tmp_path / "empty").mkdir()
    assert parse_arguments(["--output_dir", str(tmp_path / "empty")])[2].overwrite_output_dir
    for name, card_inputs, fits in (("demo", {"dataset_description": builtin, "base_model": None}, True),
                                    ("fine-tuned", {"dataset_description": builtin, "base_model": "runs/a"}, False),
                                    ("multi30k", {"dataset_description": "local files `train.en`"}, False)):
        (tmp_path / name).mkdir()
        (tmp_path / name / CARD_INPUTS_FILE).write_text(json.dumps(card_inputs))
        assert parse_arguments(["--output_dir", str(tmp_path / name)])[2].overwrite_output_dir == fits, name
        given = parse_arguments(["--output_dir", str(tmp_path / name), "--overwrite_output_dir", "true"])
        assert given[2].overwrite_output_dir, name  # asked for, it is done
    stopped = tmp_path / "stopped"  # a run stopped before its end: its checkpoints say what it trained on
    for step, data in ((10, builtin), (20, "local files `train.en` and `train.de`")):
        (stopped / f"checkpoint-{step}").mkdir(parents=True)
        (stopped / f"checkpoint-{step}" / CHECKPOINT_COMPLETE).write_text(json.dumps({"run": {"train_data": data}}))
    with pytest.raises(InputError, match="holds checkpoints of an earlier run .*--overwrite_output_dir"):
        main(["--output_dir", str(stopped)])
    assert (stopped / "checkpoint-20").is_dir()
    # the same command again after Ctrl-C: it deleted the stopped run's checkpoints, hours of training, with a warning
    stopped = tmp_path / "stopped-builtin"
    for step in (10, 20):
        (stopped / f"checkpoint-{step}").mkdir(parents=True)
        (stopped / f"checkpoint-{step}" / CHECKPOINT_COMPLETE).write_text(json.dumps({"run": {"train_data": builtin}}))
    assert not parse_arguments(["--output_dir", str(stopped)])[2].overwrite_output_dir
    with pytest.raises(InputError, match=r"holds checkpoints of an earlier run \(checkpoint-10, checkpoint-20\). "
                                         "Continue that run with --resume_from_checkpoint true"):
        main(["--output_dir", str(stopped)])
    assert (stopped / "checkpoint-20").is_dir()


def test_an_earlier_runs_checkpoints_are_refused_or_deleted_never_averaged(tmp_path):
    """A new run into a folder with an earlier run's checkpoints: the Trainer would keep those of higher steps, and
    averaging and resuming would take them for this run's. Refused, unless --overwrite_output_dir deletes them."""
    from hf_vanilla_transformer.training import main

    from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE

    (tmp_path / "checkpoint-30").mkdir()  # all a run stopped while writing its first checkpoint leaves
    flags = ["--output_dir", str(tmp_path), "--train_prefix", str(tmp_path / "unused"), "--source_lang", "de",
             "--target_lang", "en"]
    with pytest.raises(InputError, match=r"holds only incomplete checkpoints \(checkpoint-30\) of an earlier run "
                                         "stopped while saving, which cannot be resumed: pass --overwrite_output_dir"):
        main(flags)  # it said to resume it, which then found "no complete checkpoint-*"
    for step in (10, 20):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / CHECKPOINT_COMPLETE).write_text("{}")
    with pytest.raises(InputError, match="holds checkpoints of an earlier run .*checkpoint-10.*--overwrite_output_dir"):
        main(flags)
    (tmp_path / "trainer_state.json").write_text("{}")  # a finished run's: it said to continue it, then "complete"
    with pytest.raises(InputError, match=r"holds a finished run \(its model, and checkpoints checkpoint-10, "
                                         r"checkpoint-20, checkpoint-30\). Train into a new --output_dir, or pass "
                                         "--overwrite_output_dir true to replace it."):
        main(flags)
    main(["--output_dir", str(tmp_path), "--overwrite_output_dir", *FEW_NUMBERS, *TINY, "--max_steps", "2",
          "--save_strategy", "steps", "--save_steps", "1", "--average_last_checkpoints", "2", "--eval_strategy", "no",
          "--num_samples_to_print", "0", "--max_eval_samples", "4", "--max_predict_samples", "4"])
    assert sorted(c.name for c in run_checkpoints(tmp_path)) == ["checkpoint-1", "checkpoint-2"]
    # the built-in run, which `./run.sh main` repeats into one folder, deletes them by default
    assert parse_arguments(["--output_dir", str(tmp_path)])[2].overwrite_output_dir
    assert not parse_arguments(flags)[2].overwrite_output_dir


def test_the_model_of_a_run_saved_without_checkpoints_is_not_replaced_unasked(tmp_path):
    """`--save_strategy no` leaves no checkpoint-* folders, only the model: a new run into that folder stops too."""
    from hf_vanilla_transformer.training import main

    (tmp_path / "model.safetensors").write_bytes(b"an earlier run's weights")
    flags = ["--output_dir", str(tmp_path), "--train_prefix", str(tmp_path / "unused"), "--source_lang", "de",
             "--target_lang", "en"]
    with pytest.raises(InputError, match="holds the model of an earlier run .*--overwrite_output_dir true"):
        main(flags)
    assert (tmp_path / "model.safetensors").read_bytes() == b"an earlier run's weights"


def test_save_only_model_under_fsdp_is_refused_before_training(tmp_path, monkeypatch):
    """The Trainer under FSDP failed at the first checkpoint with --save_only_model (FileNotFoundError on rank 0,
    a gloo error on the others), after the data work and the first steps."""
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # accelerate launch --use_fsdp
    with pytest.raises(InputError, match="--save_only_model under FSDP: the Trainer fails at the first checkpoint"):
        parse_arguments(["--output_dir", str(tmp_path), "--save_only_model", "true"])


def test_accelerate_launch_that_started_one_of_several_processes_is_refused(tmp_path, monkeypatch):
    """`accelerate launch --cpu --num_processes 2` (or without --multi_gpu) starts one process, with a rendezvous
    address but no WORLD_SIZE: it trained alone, and under an FSDP config without FSDP, exit status 0."""
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(InputError, match="accelerate launch was asked for several processes but started one"):
        parse_arguments(["--output_dir", str(tmp_path)])
    monkeypatch.setenv("WORLD_SIZE", "1")  # what its multi-process launchers set: a run goes ahead
    parse_arguments(["--output_dir", str(tmp_path)])


def test_fine_tuning_flags_that_were_ignored_or_mixed_results(tmp_path, caplog):
    """--config_name beside --model_name_or_path was ignored without a word; scoring a model into its own folder
    mixed the new data's scores into its results; a warmup as long as the run (the paper's 4,000 steps in a
    20-step fine-tuning) never reached the peak rate."""
    model = tmp_path / "model"
    VanillaTransformerConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                             decoder_attention_heads=2).save_pretrained(model)
    own_data = ["--train_prefix", "x", "--source_lang", "en", "--target_lang", "de"]
    with pytest.raises(InputError, match="--config_name shapes a new model, but --model_name_or_path"):
        parse_arguments(["--output_dir", str(tmp_path / "run"), "--model_name_or_path", str(model), "--config_name",
                         str(model), *own_data])
    with pytest.raises(InputError, match="lies in --output_dir .*: scoring into it would replace the run's results"):
        parse_arguments(["--output_dir", str(model), "--model_name_or_path", str(model), "--do_train", "false",
                         "--validation_prefix", "x", "--source_lang", "en", "--target_lang", "de"])
    with pytest.raises(InputError, match="lies in --output_dir .*: training into it would replace it"):
        parse_arguments(["--output_dir", str(model), "--model_name_or_path", str(model), *own_data,
                         "--overwrite_output_dir", "true"])
    # one of the run's own checkpoints, its config or its tokenizer: --overwrite_output_dir deleted them before they
    # were read (the run then failed with nothing left), and scoring a checkpoint replaced the run's results
    shutil.copytree(model, model / "checkpoint-30")
    for flags in (["--model_name_or_path", str(model / "checkpoint-30"), "--do_train", "false",
                   "--validation_prefix", "x", "--source_lang", "en", "--target_lang", "de"],
                  ["--config_name", str(model), *own_data], ["--tokenizer_name", str(model), *own_data]):
        with pytest.raises(InputError, match=f"lies in --output_dir {model}"):
            parse_arguments(["--output_dir", str(model), *flags])
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        parse_arguments(["--output_dir", str(tmp_path / "run"), "--model_name_or_path", str(model), *own_data,
                         "--max_steps", "20", "--warmup_steps", "4000"])  # given: the default is a tenth of the steps
    assert "--warmup_steps 4000 is not below --max_steps 20: the learning rate rises for the whole run" in caplog.text
    caplog.clear()
    for schedule in ("constant", "reduce_lr_on_plateau"):  # no warmup: the rate is flat from the first step
        with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
            parse_arguments(["--output_dir", str(tmp_path / "run"), "--model_name_or_path", str(model), *own_data,
                             "--max_steps", "20", "--lr_scheduler_type", schedule])
    assert "is not below --max_steps" not in caplog.text


def test_translations_keep_the_unicode_form_the_model_wrote():
    """The translations' decoding NFC-normalized the model's output while references were scored as the data holds them:
    a perfect model of a corpus not in NFC (Hindi's precomposed nukta letters, which NFC changes) scored BLEU 79."""
    import numpy as np

    from hf_vanilla_transformer.metrics import decoded_texts

    texts = ["\u095c\u095d\u095e \u0921\u093c", "Gro\u0308\u00dfe  u\u0308ber"]  # not NFC
    tokenizer = train_bpe_tokenizer(texts, 300, min_frequency=1)
    rows = [tokenizer(text)["input_ids"] for text in texts]
    width = max(map(len, rows))
    predictions = np.array([row + [-100] * (width - len(row)) for row in rows])
    assert decoded_texts(tokenizer, predictions) == [texts[0], "Gro\u0308\u00dfe u\u0308ber"]


@pytest.mark.parametrize("value", ["0", "-1"])
def test_max_length_chars_below_one_is_refused(tmp_path, value):
    """-1 filtered out every pair and then blamed the files."""
    with pytest.raises(InputError, match=f"--max_length_chars must be at least 1 character, got {value}; leave it "
                                         "out to train on pairs of any length."):
        parse_arguments(["--output_dir", str(tmp_path), "--max_length_chars", value])


def given_tokenizer(tmp_path, name):
    """`load_or_train_tokenizer` for the flags `--tokenizer_name name` (a new model on the built-in corpus)."""
    from hf_vanilla_transformer.training import load_or_train_tokenizer

    arguments = parse_arguments(["--output_dir", str(tmp_path / "run"), "--tokenizer_name", str(name), *FEW_NUMBERS])
    return load_or_train_tokenizer(*arguments, raw_datasets=None)


def plain_tokenizer(**special_tokens):
    """A BPE tokenizer as a `tokenizers` user saves one: no post-processor (so no </s> appended)."""
    from transformers import PreTrainedTokenizerFast

    backend = train_bpe_tokenizer(["ein Mann", "a man"] * 5, 270, min_frequency=1).backend_tokenizer
    backend.post_processor = None
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", **special_tokens)


def test_a_given_tokenizer_that_does_not_append_eos_is_made_to(tmp_path, caplog):
    """The model trained on its targets never learnt to stop: it wrote "он пьёт водугуу водуууууууууу..." up to
    the length limit."""
    plain_tokenizer(pad_token="<pad>", bos_token="<s>", eos_token="</s>").save_pretrained(tmp_path / "tok")
    assert AutoTokenizer.from_pretrained(tmp_path / "tok")("a man")["input_ids"][-1] != 2
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tokenization"):
        tokenizer = given_tokenizer(tmp_path, tmp_path / "tok")
    assert tokenizer("a man")["input_ids"][-1] == tokenizer(text_target="a")["input_ids"][-1] == 2
    assert any("did not end what it encodes with its end token '</s>'" in message for message in caplog.messages)


def test_a_given_tokenizers_length_limit_is_not_kept_for_a_new_model(tmp_path, caplog):
    """A tokenizer saved with model_max_length 16 (another model's limit) kept it in the run's folder: transformers
    then warned of "indexing errors" for longer sentences, and a pipeline's truncation=True cut sources at 16
    tokens, though this model's positions are computed for any length."""
    from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

    tokenizer = train_bpe_tokenizer(["ein Mann", "a man"] * 5, 270, min_frequency=1, model_max_length=16)
    tokenizer.save_pretrained(tmp_path / "tok")
    with caplog.at_level(logging.INFO, logger="hf_vanilla_transformer.tokenization"):
        given = given_tokenizer(tmp_path, tmp_path / "tok")
    assert given.model_max_length == VERY_LARGE_INTEGER
    assert any("says its model reads at most 16 tokens" in message for message in caplog.messages)
    given.save_pretrained(tmp_path / "saved")
    assert AutoTokenizer.from_pretrained(tmp_path / "saved").model_max_length == VERY_LARGE_INTEGER


def test_a_given_tokenizer_without_the_special_tokens_a_model_needs_is_one_message(tmp_path, capsys):
    """A ValueError traceback, exit 1, after the data was loaded; a tokenizer.json given as a file was "Repo id must
    be in the form ..."; a folder without a tokenizer said to pass --tokenizer_name, the flag the user had passed."""
    plain_tokenizer(pad_token="<pad>", eos_token="</s>").save_pretrained(tmp_path / "nobos")
    with pytest.raises(InputError) as error:
        run_main("--output_dir", tmp_path / "run", "--tokenizer_name", tmp_path / "nobos", *FEW_NUMBERS,
                 *TINY[:-2], "--max_steps", "1", capsys=capsys)
    assert str(error.value).startswith(f"The tokenizer {tmp_path / 'nobos'} has no bos token (bos_token_id)")
    assert str(error.value).endswith(".save_pretrained(\"" + str(tmp_path / "nobos") + "\")` (a token its "
                                     "vocabulary lacks is added to it), and give that folder. Or leave "
                                     "--tokenizer_name out to train a tokenizer on the data.")
    with pytest.raises(InputError, match=r"has no bos token"):
        given_tokenizer(tmp_path, tmp_path / "nobos" / "tokenizer.json")  # the file: read as its folder
    train_bpe_tokenizer(["ein Mann", "a man"] * 5, 270, min_frequency=1).save_pretrained(tmp_path / "good")
    assert len(given_tokenizer(tmp_path, tmp_path / "good" / "tokenizer.json")) == len(AutoTokenizer.from_pretrained(
        tmp_path / "good"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as error:
        given_tokenizer(tmp_path, tmp_path / "empty")
    assert str(error.value) == (
        f"{tmp_path / 'empty'} has no tokenizer (no tokenizer.json or tokenizer_config.json). Give --tokenizer_name "
        "a folder written by `tokenizer.save_pretrained(folder)`, or a Hub id, or leave it out to train a tokenizer "
        "on the data.")


def test_scoring_a_model_in_another_direction_is_warned_about(builtin_run, tmp_path, capsys, caplog):
    """Scoring the de -> en model with the languages swapped wrote gibberish and a BLEU near 0, without a word."""
    model_dir, _ = builtin_run
    write_lines(tmp_path / "test.en", ["two", "three"])
    write_lines(tmp_path / "test.de", ["zwei", "drei"])
    flags = ["--model_name_or_path", model_dir / "checkpoint-10", "--test_prefix", tmp_path / "test", "--do_predict"]
    run_main("--output_dir", tmp_path / "swapped", *flags, "--source_lang", "en", "--target_lang", "de",
             capsys=capsys)
    assert "was trained to translate de -> en, and this run gives --source_lang en --target_lang de (the other way " \
           "round)" in caplog.text
    caplog.clear()
    run_main("--output_dir", tmp_path / "right", *flags, "--source_lang", "de", "--target_lang", "en", capsys=capsys)
    assert "was trained to translate" not in caplog.text


def test_the_card_names_the_files_read(tmp_path):
    """Multi30k's train.de.gz was named `train.de` in the card."""
    from hf_vanilla_transformer.data import data_source_description

    write_lines(tmp_path / "train.de.gz", ["zwei"], compress=True)
    write_lines(tmp_path / "train.en", ["two"])
    _, data_args, _ = parse_arguments(["--output_dir", str(tmp_path / "out"), "--train_prefix", str(tmp_path / "train"),
                                       "--source_lang", "de", "--target_lang", "en"])
    assert data_source_description(data_args) == "local files `train.de.gz` and `train.en`"


def test_a_new_run_over_a_finished_one_leaves_no_earlier_model_beside_its_tokenizer(builtin_run, tmp_path,
                                                                                    monkeypatch):
    """--overwrite_output_dir deleted the earlier checkpoints and results, not the model: a new run with another
    vocabulary, stopped before its own save, left the old model beside the new tokenizer (translating gibberish)."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer

    out = tmp_path / "run"
    shutil.copytree(builtin_run[0], out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(list(map(str, ["--output_dir", out, *FEW_NUMBERS, *TINY, "--vocab_size", "280", "--max_steps", "2"])))
    left = {path.name for path in out.iterdir()}
    assert not left & {"model.safetensors", "config.json", "README.md", "all_results.json", "model_card_inputs.json"}
    assert not any(name.startswith("checkpoint-") for name in left)


def test_ctrl_c_while_the_first_checkpoint_is_written_says_nothing_can_be_resumed(tmp_path, monkeypatch):
    """Ctrl-C while the first checkpoint was written said "no checkpoint was saved yet, so nothing is kept", beside
    the half-written checkpoint-N that then stopped the same command from starting again."""
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer

    out = tmp_path / "run"

    def stopped_while_saving(self, *args, **kwargs):
        (out / "checkpoint-30").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(TokenBatchingSeq2SeqTrainer, "train", stopped_while_saving)
    with pytest.raises(KeyboardInterrupt) as interrupted:
        main(list(map(str, ["--output_dir", out, *FEW_NUMBERS, *TINY, "--max_steps", "2"])))
    assert str(interrupted.value) == ("no checkpoint was saved whole yet (checkpoint-30 was being written), so nothing "
                                      "can be resumed: run the same command with --overwrite_output_dir true to start "
                                      "again.")


def test_validation_and_test_are_each_scored_against_their_own_references(tmp_path, capsys):
    """References that the tokenizer reads alike (here under a lowercasing tokenizer) in validation and test: the
    test split was scored against the validation's texts, the first of each kind found."""
    from tokenizers import normalizers

    model_dir = make_tiny_model_dir(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    tokenizer.save_pretrained(model_dir)
    sources = ["Ein Hund läuft.", "Eine Frau liest.", "Der Mann.", "Ein Buch."]
    write_lines(tmp_path / "first.de", sources)
    write_lines(tmp_path / "first.en", ["x"] * len(sources))
    run_main("--output_dir", tmp_path / "first", "--model_name_or_path", model_dir, "--validation_prefix",
             tmp_path / "first", "--source_lang", "de", "--target_lang", "en", "--do_eval", capsys=capsys)
    translations = (tmp_path / "first" / "generated_predictions.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert any(text.lower() != text.upper() for text in translations)  # letters, whose case the references change
    for split, references in (("val", translations), ("test", [text.upper() for text in translations])):
        write_lines(tmp_path / f"{split}.de", sources)
        write_lines(tmp_path / f"{split}.en", references)
    run_main("--output_dir", tmp_path / "scored", "--model_name_or_path", model_dir, "--validation_prefix",
             tmp_path / "val", "--test_prefix", tmp_path / "test", "--source_lang", "de", "--target_lang", "en",
             "--do_eval", "--do_predict", capsys=capsys)
    results = json.loads((tmp_path / "scored" / "all_results.json").read_text())
    upper = [text.upper() for text in translations]
    assert results["eval_chrf"] == pytest.approx(100)
    assert results["predict_chrf"] == pytest.approx(sacrebleu.corpus_chrf(translations, [upper]).score)
    assert results["predict_chrf"] < 100


def test_a_bleu_tokenizer_whose_download_fails_is_one_message(tmp_path, monkeypatch):
    """flores200 (and spm, flores101) download a SentencePiece model on first use: offline that was a URLError
    traceback while the arguments were read."""
    import urllib.error
    import urllib.request

    import sacrebleu.tokenizers.tokenizer_spm as spm

    def no_network(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(spm, "SACREBLEU_DIR", str(tmp_path / "sacrebleu"))  # no model downloaded before
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    flags = ["--output_dir", str(tmp_path / "x"), "--train_prefix", str(tmp_path / "train"), "--source_lang", "de",
             "--target_lang", "en", "--bleu_tokenize", "flores200"]
    with pytest.raises(InputError, match="--bleu_tokenize: BLEU's 'flores200' tokenizer needs its SentencePiece model"
                                         r".* \(13a, intl, char, zh\)"):
        parse_arguments(flags)


@pytest.mark.parametrize("main_process", [True, False])
def test_too_few_checkpoints_to_average_is_said_once_not_by_every_process(tmp_path, caplog, main_process):
    """Under torchrun every rank warned that the run saved fewer checkpoints than --average_last_checkpoints."""
    from types import SimpleNamespace

    from hf_vanilla_transformer.training import average_last_checkpoints

    trainer = SimpleNamespace(
        args=SimpleNamespace(output_dir=str(tmp_path), average_last_checkpoints=3),
        state=SimpleNamespace(global_step=10), accelerator=SimpleNamespace(wait_for_everyone=lambda: None),
        is_world_process_zero=lambda: main_process,
    )
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        assert average_last_checkpoints(trainer) == 0
    assert ("Averaging the last 3 checkpoints (--average_last_checkpoints, section 6.1), but the run saved no "
            "complete checkpoint" in caplog.text) is main_process


@pytest.mark.parametrize("flags, message", [
    # a ValueError traceback after the tokenizer's training
    (["--attention_heads", "5"], "The model flags make an impossible model of --config_name {config}: "
                                 "`encoder_attention_heads`=5 does not divide `d_model`=32"),
    # NotImplementedError "FlexAttention does not support backward on CPU" at the first step
    (["--attn_implementation", "flex_attention"], "--attn_implementation flex_attention trains on GPUs only"),
    (["--warmup_steps", "1.5"], "--warmup_steps 1.5: give a whole number of steps"),  # 1 step, the card said 1.5
    (["--max_grad_norm", "-1"], "--max_grad_norm -1.0: give the gradient norm to clip at"),  # the card said -1
    (["--eval_steps", "0"], "--eval_steps 0: give the steps between evaluations"),  # evaluated every logging step
])
def test_model_and_recipe_flags_refused_before_any_work(tmp_path, flags, message):
    config = tmp_path / "config"
    VanillaTransformerConfig(d_model=32, encoder_attention_heads=2, decoder_attention_heads=2).save_pretrained(config)
    with pytest.raises(InputError, match=re.escape(message.format(config=config))):
        parse_arguments(["--output_dir", str(tmp_path / "run"), "--config_name", str(config), *flags])


def test_the_default_averaging_reads_the_checkpoint_flags_as_transformers_does(tmp_path):
    """`--save_total_limit 0` keeps every checkpoint in transformers, but was read as "keeps 0": beside
    --average_last_checkpoints 3 it was refused, and alone it turned the built-in run's averaging off. With
    `--save_strategy best` the default averaging mixed the best checkpoints, steps apart, into the model."""
    run = ["--output_dir", str(tmp_path / "run")]
    for flags, averaged, limit in ((["--save_total_limit", "0", "--average_last_checkpoints", "3"], 3, 0),
                                   (["--save_total_limit", "0"], 3, 0),
                                   (["--save_strategy", "best", "--metric_for_best_model", "bleu", "--eval_strategy",
                                     "steps", "--eval_steps", "5"], None, 5)):
        training_args = parse_arguments([*run, *flags])[2]
        assert (training_args.average_last_checkpoints, training_args.save_total_limit) == (averaged, limit), flags


def test_normalize_before_false_beside_a_pre_ln_config_is_taken(tmp_path):
    """`--config_name <pre-LN> --normalize_before false` trained a pre-LN model: false was taken for "not given"."""
    from hf_vanilla_transformer.training import size_overrides

    config = tmp_path / "config"
    VanillaTransformerConfig(normalize_before=True).save_pretrained(config)
    for flags, expected in ((["--normalize_before", "false"], {"normalize_before": False}),
                            (["--normalize_before"], {"normalize_before": True}), ([], {})):
        model_args = parse_arguments(["--output_dir", str(tmp_path / "run"), "--config_name", str(config), *flags])[0]
        assert size_overrides(model_args) == expected


def test_one_checkpoint_is_not_called_an_average(tmp_path, caplog):
    """A short run that saved one checkpoint: the built-in run's default averaging "averaged" it, warned about a flag
    the user never gave, and the card said "Checkpoints averaged into the model | 1", "average of the last 1"."""
    from types import SimpleNamespace

    from hf_vanilla_transformer.checkpoints import CHECKPOINT_COMPLETE
    from hf_vanilla_transformer.training import average_last_checkpoints

    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / CHECKPOINT_COMPLETE).write_text("{}")
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text('{"global_step": 10}')
    trainer = SimpleNamespace(
        args=SimpleNamespace(output_dir=str(tmp_path), average_last_checkpoints=3), model=None,
        state=SimpleNamespace(global_step=10), accelerator=SimpleNamespace(wait_for_everyone=lambda: None),
        is_world_process_zero=lambda: True,
    )
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        assert average_last_checkpoints(trainer) == 0
    assert "saved only 1 complete checkpoint: the model is the run's last weights, not an average." in caplog.text
    assert trainer.args.average_last_checkpoints is None  # the card reports no averaging


def test_the_last_line_names_scores_only_where_the_run_scored(tmp_path):
    """A run that only trains writes all_results.json with its training figures: its last line said "with its
    scores and training curves"."""
    from hf_vanilla_transformer.training import where_the_run_is

    (tmp_path / "all_results.json").write_text(json.dumps({"train_loss": 3.2, "epoch": 1.0}))
    (tmp_path / "training_curves.png").write_bytes(b"")
    assert f"are in {tmp_path}, with its training curves. Translate" in where_the_run_is(tmp_path, None)
    (tmp_path / "all_results.json").write_text(json.dumps({"train_loss": 3.2, "eval_bleu": 20.1}))
    assert f"are in {tmp_path}, with its scores and training curves. Translate" in where_the_run_is(tmp_path, None)


def test_a_model_that_translates_nothing_is_told_to_train_longer(caplog):
    """50 steps gave BLEU 0, chrF 0 and eval_gen_len 0 with every translation empty, and no word of why."""
    from hf_vanilla_transformer.training import warn_if_all_empty

    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.training"):
        warn_if_all_empty(["", "a dog"], "validation")
        warn_if_all_empty([], "validation")
        assert caplog.messages == []
        warn_if_all_empty(["", ""], "validation")
    assert caplog.messages == ["Every validation translation is empty: the model ends each one at once, as a model "
                               "does early in training. Train for longer (more --max_steps or --num_train_epochs)."]
