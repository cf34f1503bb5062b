"""The model card: Hub metadata (license, languages, datasets, tags, library, pipeline tag, model-index with BLEU and
chrF) and a body with the architecture, recipe, data, loading instructions and limitations."""

import ast
import json
import re
import shutil

import pytest
import sacrebleu
from huggingface_hub import ModelCard
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainingArguments

import hf_vanilla_transformer  # noqa: F401
from hf_vanilla_transformer.model_card import (
    CARD_INPUTS_FILE,
    count_parameters,
    create_model_card,
    save_model_card,
    update_model_card,
)
from hf_vanilla_transformer.metrics import sacrebleu_signatures
from tiny_translation_model import make_tiny_model_dir

METRICS = {"eval_bleu": 27.3456, "eval_chrf": 55.5, "eval_samples": 1014, "test_bleu": 26.0, "test_chrf": 54.25,
           "test_samples": 1000, "train_samples": 29000, "epoch": 12.0, "train_loss": 3.21}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_model_dir(tmp_path_factory.mktemp("card") / "model")


@pytest.fixture(scope="module")
def training_args(tmp_path_factory):
    return Seq2SeqTrainingArguments(
        output_dir=str(tmp_path_factory.mktemp("run")), learning_rate=7e-4, lr_scheduler_type="inverse_sqrt",
        warmup_steps=4000, adam_beta2=0.98, adam_epsilon=1e-9, label_smoothing_factor=0.1, max_steps=100_000,
        num_train_epochs=3, report_to=[],
    )


@pytest.fixture(scope="module")
def card(model_dir, training_args):
    path = save_model_card(model_dir, source_lang="de", target_lang="en", dataset_name="bentrevett/multi30k",
                           metrics=METRICS, training_args=training_args, repo_id="user/transformer-de-en",
                           tags=["multi30k"])
    assert path == model_dir / "README.md"
    return ModelCard.load(path)


def test_metadata(card):
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0"
    assert data["language"] == ["de", "en"]
    assert data["datasets"] == ["bentrevett/multi30k"]
    assert data["library_name"] == "transformers"
    assert data["pipeline_tag"] == "translation"
    assert {"translation", "multi30k"} <= set(data["tags"])


def test_languages_given_by_name_or_other_codes_are_iso_codes_and_names_in_the_card(model_dir, training_args):
    """A CSV with columns `english` and `chinese` is trained with --source_lang english --target_lang chinese: the
    card's metadata said `language: [english, chinese]`, which the Hub does not read; Korean showed as "ko"."""
    from hf_vanilla_transformer.model_card import create_model_card

    for source, target, codes, words in [("english", "chinese", ["en", "zh"], "English → Chinese"),
                                         ("eng", "ko", ["en", "ko"], "English → Korean"),
                                         ("en", "zh-CN", ["en", "zh"], "English → Chinese"),
                                         ("en", "tlh", ["en", "tlh"], "English → tlh")]:  # unknown: as given
        card = create_model_card(model_dir, source_lang=source, target_lang=target, training_args=training_args)
        assert card.data.to_dict()["language"] == codes and words in card.text, (source, target)


def test_model_index_has_bleu_and_chrf(card):
    results = {(r.dataset_split, r.metric_type): r for r in card.data.eval_results}
    assert card.data.model_name == "transformer-de-en"
    assert {key: r.metric_value for key, r in results.items()} == {
        ("validation", "bleu"): 27.35, ("validation", "chrf"): 55.5, ("test", "bleu"): 26.0, ("test", "chrf"): 54.25}
    bleu = results["validation", "bleu"]
    assert (bleu.task_type, bleu.dataset_type, bleu.metric_name) == ("translation", "bentrevett/multi30k", "BLEU")
    assert "| validation | 27.35 | 55.50 | 1,014 |" in card.text


def test_body_architecture(card, model_dir):
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    assert count_parameters(model_dir) == model.num_parameters()
    for row in ("| Encoder / decoder layers | 2 / 2 |", "| d_model | 32 |",
                "| Attention heads (encoder / decoder) | 4 / 4 |", "| d_ff (encoder / decoder) | 64 / 64 |", f"| Parameters | {model.num_parameters():,} |",
                "post-LN, as in the paper", "| Vocabulary | 300 tokens, byte-level BPE"):
        assert row in card.text, row


def test_body_recipe_data_usage_limitations(card):
    text = card.text
    for row in ("| Learning rate | 0.0007 |", "| Learning-rate schedule | inverse_sqrt |", "| Warmup steps | 4000 |",
                "| Adam beta2 | 0.98 |", "| Label smoothing | 0.1 |", "| Training steps | 100000 |",
                "- Training sentence pairs: 29,000"):
        assert row in text, row
    assert "| Epochs |" not in text  # max_steps wins over num_train_epochs in the Trainer
    assert "German → English" in text and "https://huggingface.co/datasets/bentrevett/multi30k" in text
    assert 'pipeline("machine-translation", model="user/transformer-de-en")' in text
    assert 'pipeline(model="user/transformer-de-en", trust_remote_code=True)' in text
    assert 'AutoModelForSeq2SeqLM.from_pretrained("user/transformer-de-en", trust_remote_code=True)' in text
    assert "## Limitations" in text and "Attention Is All You Need" in text
    assert "One BPE vocabulary is learned on source and target text together" in text


@pytest.fixture(scope="module")
def paper_model_dir(tmp_path_factory):
    """A model whose generation config sets no length: the paper's beam search, at most source length + 50 tokens."""
    return make_tiny_model_dir(tmp_path_factory.mktemp("card") / "paper", max_new_tokens=None)


def run_arguments(tmp_path, **arguments) -> Seq2SeqTrainingArguments:
    return Seq2SeqTrainingArguments(output_dir=str(tmp_path / "run"), report_to=[], **arguments)


def decoding_words(text: str) -> str:
    return re.search(r"decoded with\s+(.*?)\.(?:\s|$)", text, flags=re.S).group(1)


BEAM_4 = "beam search (4 beams, length penalty 0.6)"
PAPER_WORDS = f"{BEAM_4}, at most source length + 50 new tokens, as in the paper's section 6.1"


@pytest.mark.parametrize("arguments, words", [
    ({}, PAPER_WORDS),
    ({"generation_num_beams": 4}, PAPER_WORDS),  # the training script's default
    ({"generation_num_beams": 1}, "greedy search, at most source length + 50 new tokens"),
    ({"generation_num_beams": 2}, "beam search (2 beams, length penalty 0.6), at most source length + 50 new tokens"),
    ({"generation_max_length": 5}, f"{BEAM_4}, at most 5 tokens (the start token included)"),
    ({"generation_num_beams": 1, "generation_max_length": 5},
     "greedy search, at most 5 tokens (the start token included)"),
])
def test_the_card_says_how_evaluation_decoded_the_scores(paper_model_dir, tmp_path, arguments, words):
    """--generation_num_beams and --generation_max_length are what Seq2SeqTrainer's evaluation passes to generate(),
    over the saved generation config (4 beams, length penalty 0.6)."""
    card = create_model_card(paper_model_dir, source_lang="de", target_lang="en", metrics=METRICS,
                             training_args=run_arguments(tmp_path, **arguments))
    assert decoding_words(card.text) == words


def test_a_generation_config_length_wins_over_generation_max_length(model_dir, tmp_path):
    """generate() prefers the generation config's max_new_tokens (6 here) to a max_length passed in."""
    card = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS,
                             training_args=run_arguments(tmp_path, generation_max_length=5))
    assert decoding_words(card.text) == f"{BEAM_4}, at most 6 new tokens"


def test_the_decoding_survives_rendering_the_card_again(paper_model_dir, tmp_path):
    model_dir = shutil.copytree(paper_model_dir, tmp_path / "model")
    save_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS,
                    training_args=run_arguments(tmp_path, generation_num_beams=1, generation_max_length=40))
    update_model_card(model_dir, repo_id="org/greedy")
    text = (model_dir / "README.md").read_text()
    assert 'model="org/greedy"' in text
    assert decoding_words(text) == "greedy search, at most 40 tokens (the start token included)"


@pytest.mark.parametrize("schedule, optim, warmup", [
    ("constant", "adamw_torch", False),
    ("reduce_lr_on_plateau", "adamw_torch", False),
    ("linear", "adamw_torch", True),
    ("constant_with_warmup", "adamw_torch", True),
    ("inverse_sqrt", "adamw_torch", True),
    ("constant", "schedule_free_adamw", True),  # the optimizer warms up by itself
])
def test_warmup_is_listed_only_where_the_run_warmed_up(model_dir, tmp_path, schedule, optim, warmup):
    arguments = run_arguments(tmp_path, lr_scheduler_type=schedule, optim=optim, warmup_steps=400,
                              eval_strategy="epoch")  # reduce_lr_on_plateau needs evaluations
    text = create_model_card(model_dir, training_args=arguments).text
    assert f"| Learning-rate schedule | {schedule} |" in text
    assert ("| Warmup steps | 400 |" in text) == warmup


def test_a_warmup_given_as_a_fraction_is_listed_as_one(model_dir, tmp_path):
    """transformers reads --warmup_steps below 1 as a fraction of the training steps: the card said "Warmup steps |
    0.5" of a run that warmed up over half of them."""
    text = create_model_card(model_dir, training_args=run_arguments(tmp_path, warmup_steps=0.05)).text
    assert "| Warmup steps | 5% of the training steps |" in text


def test_pairs_left_out_of_the_scores_as_blank_are_counted(model_dir):
    """A test pair with a blank source but a reference is neither translated nor scored: sacrebleu over the files
    counts it as an empty translation, and the card gave the scored pairs' count alone."""
    metrics = {**METRICS, "eval_blank_pairs": 1, "test_blank_pairs": 4}
    text = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=metrics).text
    assert "1 validation pair has a blank source or reference: left out of the scores, not translated." in text
    assert "4 test pairs have a blank source or reference: left out of the scores, not translated." in text
    assert "blank source" not in create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS).text


ADAM_ROWS = {"Adam beta1": "0.9", "Adam beta2": "0.98", "Adam epsilon": "1e-09"}


@pytest.mark.parametrize("optim, rows", [
    ("adamw_torch", set(ADAM_ROWS)),
    ("adamw_torch_fused", set(ADAM_ROWS)),
    ("paged_adamw_8bit", set(ADAM_ROWS)),
    ("ademamix", set(ADAM_ROWS)),
    ("schedule_free_radam", set(ADAM_ROWS)),
    ("lion_32bit", {"Adam beta1", "Adam beta2"}),  # betas, no epsilon
    ("sgd", set()),
    ("adafactor", set()),
    ("adagrad", set()),
    ("rmsprop", set()),
    ("galore_adamw", set()),  # GaLore gets none of the Trainer's Adam arguments
    ("grokadamw", set()),
])
def test_adam_settings_are_listed_only_for_optimizers_that_use_them(model_dir, tmp_path, optim, rows):
    arguments = run_arguments(tmp_path, optim=optim, adam_beta2=0.98, adam_epsilon=1e-9)
    text = create_model_card(model_dir, training_args=arguments).text
    assert f"| Optimizer | {optim} |" in text
    assert {name for name in ADAM_ROWS if f"| {name} |" in text} == rows
    assert all(f"| {name} | {ADAM_ROWS[name]} |" in text for name in rows)


@pytest.mark.parametrize("launched_with", [None, "bf16", "fp16", "no"])
def test_the_card_says_the_precision_a_launcher_chose(model_dir, tmp_path, monkeypatch, launched_with):
    """`accelerate launch --mixed_precision bf16` (or `mixed_precision: bf16` in its config file) trains in bf16
    without --bf16: the card said nothing of it."""
    if launched_with is not None:
        monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", launched_with)
    else:
        monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    text = create_model_card(model_dir, training_args=run_arguments(tmp_path)).text
    assert ("| bf16 | yes |" in text) == (launched_with == "bf16")
    assert ("| fp16 | yes |" in text) == (launched_with == "fp16")
    assert "| bf16 | no |" not in text and "| fp16 | no |" not in text


def test_a_reused_vocabulary_is_not_said_to_be_learned(model_dir):
    text = create_model_card(model_dir, source_lang="de", target_lang="en", tokenizer_from="runs/base").text
    assert "The vocabulary is the one of `runs/base`, reused" in text and "is learned" not in text


def test_a_vocabulary_that_reads_text_lower_cased_says_so(model_dir, tmp_path):
    """The built-in corpus' tokenizer lower-cases and respells umlauts: a reader of the card would otherwise wonder
    why the model's translations have no capitals."""
    from tokenizers import Tokenizer

    from hf_vanilla_transformer.number_words import number_words_normalizer

    folder = tmp_path / "model"
    shutil.copytree(model_dir, folder)
    assert "reading text" not in create_model_card(folder, source_lang="de", target_lang="en").text
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.normalizer = number_words_normalizer()
    tokenizer.save(str(folder / "tokenizer.json"))
    text = " ".join(create_model_card(folder, source_lang="de", target_lang="en").text.split())
    assert "byte-level BPE shared by source and target, reading text lower-cased with ä as ae, ö as oe, ü as ue, " \
           "ß as ss |" in text


def test_a_fine_tuned_model_names_its_base_model(model_dir, tmp_path):
    """The card of a fine-tuning run said nothing of the model it started from."""
    card = create_model_card(model_dir, source_lang="en", target_lang="de", base_model="Helsinki-NLP/opus-mt-en-de")
    assert card.data.base_model == "Helsinki-NLP/opus-mt-en-de"  # Hub metadata: the model tree links them
    assert "Fine-tuned from `Helsinki-NLP/opus-mt-en-de`: its weights were the starting point" in card.text
    local = create_model_card(model_dir, source_lang="en", target_lang="de", base_model=str(model_dir),
                              repo_id="user/x")
    assert local.data.base_model is None and "Fine-tuned from the local model `model`" in local.text  # no Hub id
    assert str(model_dir.parent) not in local.text
    assert "Fine-tuned from" not in create_model_card(model_dir, source_lang="en", target_lang="de").text
    # not evaluated (an average of a fine-tuning's checkpoints): "the results below are this model's", then "This
    # model has not been evaluated."
    unscored = create_model_card(model_dir, source_lang="en", target_lang="de", base_model="Helsinki-NLP/opus-mt-en-de",
                                 metrics={}).text
    assert "its weights were the starting point." in unscored and "results below" not in unscored
    scored = create_model_card(model_dir, source_lang="en", target_lang="de", base_model="Helsinki-NLP/opus-mt-en-de",
                               metrics={"eval_bleu": 30.0, "eval_chrf": 55.0, "eval_samples": 10}).text
    assert "its weights were the starting point, and the\nresults below are this model's." in scored


def test_a_fine_tuned_model_keeps_its_base_models_license(model_dir, tmp_path):
    """A fine-tuned opus-mt model (CC-BY 4.0) was published as apache-2.0, this package's license."""
    base = tmp_path / "opus-mt-en-de"
    shutil.copytree(model_dir, base)
    (base / "README.md").write_text("---\nlicense: cc-by-4.0\nlanguage: [en, de]\n---\n# opus-mt-en-de\n")
    assert create_model_card(model_dir, source_lang="en", target_lang="de", base_model=str(base)).data.license == \
        "cc-by-4.0"
    assert create_model_card(model_dir, base_model=str(base), license="mit").data.license == "mit"  # said, it wins
    tuned = tmp_path / "tuned"
    shutil.copytree(model_dir, tuned)
    save_model_card(tuned, source_lang="en", target_lang="de", base_model=str(base))
    shutil.rmtree(base)  # rendered again (as push_to_hub.py does) where the base model's folder is gone
    update_model_card(tuned, repo_id="user/tuned")
    assert ModelCard.load(tuned / "README.md").data.license == "cc-by-4.0"
    assert create_model_card(model_dir, base_model=str(base)).data.license == "apache-2.0"  # no card to read
    assert create_model_card(model_dir, base_model="Helsinki-NLP/opus-mt-en-de").data.license == "apache-2.0"  # offline


def test_a_license_not_found_offline_is_looked_up_again_at_the_next_render(model_dir, tmp_path, monkeypatch, caplog):
    """Fine-tuned offline from a Hub model, the card said apache-2.0 and saved it as found: a push from a machine
    online kept it, where the base model's card says CC-BY 4.0."""
    from hf_vanilla_transformer import model_card

    folder = tmp_path / "tuned"
    shutil.copytree(model_dir, folder)
    model_card._hub_card_license.cache_clear()
    with caplog.at_level("WARNING", logger="hf_vanilla_transformer.model_card"):
        save_model_card(folder, base_model="Helsinki-NLP/opus-mt-en-de", revision="v1")  # HF_HUB_OFFLINE=1 here
    assert ModelCard.load(folder / "README.md").data.license == "apache-2.0"
    assert "Could not read the license on Helsinki-NLP/opus-mt-en-de's card" in caplog.text
    saved = json.loads((folder / CARD_INPUTS_FILE).read_text())
    assert saved["license"] is None and "revision" not in saved  # neither is the folder's: a push renders them again
    model_card._hub_card_license.cache_clear()  # a later process, online
    monkeypatch.setattr(model_card.ModelCard, "load", lambda name: ModelCard("---\nlicense: cc-by-4.0\n---\n"))
    update_model_card(folder, repo_id="user/tuned")
    monkeypatch.undo()
    assert ModelCard.load(folder / "README.md").data.license == "cc-by-4.0"
    model_card._hub_card_license.cache_clear()


def test_a_card_pushed_to_a_branch_loads_that_branch(model_dir):
    """Pushed with --revision v1 to a new repository, the card's code loaded main, which held no model."""
    text = create_model_card(model_dir, repo_id="user/m", revision="v1").text
    assert text.count('"user/m", revision="v1"') == 6 and "on the branch `v1`" in text
    assert "translate.py user/m --revision v1 input.txt" in text
    for revision in (None, "main"):
        assert "revision" not in create_model_card(model_dir, repo_id="user/m", revision=revision).text


def test_local_paths_are_not_published(model_dir, tmp_path):
    """`--model_name_or_path /home/alice/runs/x` put the user's folders in the published card ("Fine-tuned from
    `/home/alice/runs/x`", "The vocabulary is the one of `/home/...`") and in model_card_inputs.json, pushed with it;
    a card rendered again from such stored inputs showed them too."""
    base = tmp_path / "alice" / "runs" / "base-run"
    base.mkdir(parents=True)
    folder = shutil.copytree(model_dir, tmp_path / "model",
                             ignore=shutil.ignore_patterns("README.md", CARD_INPUTS_FILE))
    save_model_card(folder, repo_id="user/x", source_lang="de", target_lang="en", base_model=str(base),
                    tokenizer_from=str(base),
                    dataset_name=str(tmp_path / "alice" / "corpus"), dataset_description="the local file `train.jsonl`")
    stored = (folder / CARD_INPUTS_FILE).read_text()
    for text in ((folder / "README.md").read_text(), stored):
        assert str(tmp_path) not in text and "alice" not in text
    text = (folder / "README.md").read_text()
    assert "Fine-tuned from the local model `base-run`" in text
    assert "The vocabulary is the one of the local folder `base-run`, reused" in text
    update_model_card(folder, repo_id="user/x")  # rendered again, from the stored inputs, where the folder is not
    card = ModelCard.load(folder / "README.md")
    assert card.data.base_model is None and "Fine-tuned from the local model `base-run`" in card.text
    # an older run's stored inputs, with the paths of the machine it trained on, which do not exist here
    older = {"base_model": "/home/alice/runs/x", "tokenizer_from": "/home/alice/runs/x",
             "dataset_description": "local files `../shared/data/train.de` and `/home/alice/data/train.en`"}
    (folder / CARD_INPUTS_FILE).write_text(json.dumps({"source_lang": "de", "target_lang": "en", **older}))
    update_model_card(folder, repo_id="user/x")
    for text in ((folder / "README.md").read_text(), (folder / CARD_INPUTS_FILE).read_text()):
        assert "/home/alice" not in text and "../shared" not in text
    text = (folder / "README.md").read_text()
    assert "Fine-tuned from the local model `x`" in text and "the one of the local folder `x`" in text
    assert "local files `train.de` and `train.en`" in text
    assert ModelCard.load(folder / "README.md").data.base_model is None


def test_a_model_fine_tuned_from_a_checkpoint_names_the_run_it_came_from(model_dir, tmp_path):
    """Fine-tuned from runs/base-run/checkpoint-400, the card said "Fine-tuned from the local model
    `checkpoint-400`", which names no run; rendered again from its stored inputs it must say the same."""
    checkpoint = tmp_path / "runs" / "base-run" / "checkpoint-400"
    checkpoint.mkdir(parents=True)
    folder = shutil.copytree(model_dir, tmp_path / "model",
                             ignore=shutil.ignore_patterns("README.md", CARD_INPUTS_FILE))
    save_model_card(folder, source_lang="de", target_lang="en", base_model=str(checkpoint))
    assert json.loads((folder / CARD_INPUTS_FILE).read_text())["base_model"] == "./base-run/checkpoint-400"
    shutil.rmtree(tmp_path / "runs")  # rendered again where the run is not
    update_model_card(folder, repo_id="user/x")
    text = (folder / "README.md").read_text()
    assert "Fine-tuned from the local model `base-run/checkpoint-400`" in text and str(tmp_path) not in text
    assert ModelCard.load(folder / "README.md").data.base_model is None  # no Hub id, though it looks like one


def test_a_tokenizer_given_as_its_tokenizer_json_is_named_by_its_folder(model_dir, tmp_path):
    """--tokenizer_name takes a folder or its tokenizer.json: the card said "the local folder `tokenizer.json`"."""
    (tmp_path / "multi30k").mkdir()
    (tmp_path / "multi30k" / "tokenizer.json").write_text("{}")
    folder = shutil.copytree(model_dir, tmp_path / "model",
                             ignore=shutil.ignore_patterns("README.md", CARD_INPUTS_FILE))
    save_model_card(folder, source_lang="de", target_lang="en",
                    tokenizer_from=str(tmp_path / "multi30k" / "tokenizer.json"))
    assert "The vocabulary is the one of the local folder `multi30k`, reused" in (folder / "README.md").read_text()
    assert json.loads((folder / CARD_INPUTS_FILE).read_text())["tokenizer_from"] == "./multi30k"


def test_pre_ln_and_no_metrics(tmp_path):
    model_dir = make_tiny_model_dir(tmp_path / "model")
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, "normalize_before": True}))
    card = create_model_card(model_dir, source_lang="en", target_lang="fr")
    assert "pre-LN" in card.text and "post-LN" not in card.text
    assert "has not been evaluated" in card.text and card.data.eval_results is None
    assert card.data.to_dict()["language"] == ["en", "fr"]


def test_a_card_shows_the_training_curves_and_claims_no_training_it_does_not_know(tmp_path):
    """The training curves were pushed beside the card but never shown in it; a model whose training is not recorded
    (a conversion, a model saved by hand) was said to be trained on "local files" with a BPE vocabulary learned."""
    model_dir = make_tiny_model_dir(tmp_path / "model")
    unknown = create_model_card(model_dir, source_lang="en", target_lang="de").text
    assert "training_curves.png" not in unknown and "from local files" not in unknown
    assert "is learned" not in unknown and "The training data is not recorded with this model." in unknown
    (model_dir / "training_curves.png").write_bytes(b"\x89PNG")
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path / "run"), report_to=[])
    trained = create_model_card(model_dir, source_lang="en", target_lang="de", metrics=METRICS,
                                training_args=args).text
    assert "](training_curves.png)" in trained
    assert "from local files" in trained and "One BPE vocabulary is learned" in trained


def test_metrics_default_to_all_results_json(tmp_path):
    model_dir = make_tiny_model_dir(tmp_path / "model")
    (model_dir / "all_results.json").write_text(json.dumps({"eval_bleu": 12.5, "eval_chrf": 40.0}))
    card = create_model_card(model_dir, source_lang="de", target_lang="en")
    assert sorted(r.metric_value for r in card.data.eval_results) == [12.5, 40.0]


def test_update_model_card_renders_again_with_a_repo_id(model_dir, card):
    inputs = json.loads((model_dir / CARD_INPUTS_FILE).read_text())
    assert inputs["source_lang"] == "de" and inputs["metrics"]["eval_bleu"] == METRICS["eval_bleu"]
    update_model_card(model_dir, repo_id="org/renamed")
    updated = ModelCard.load(model_dir / "README.md")
    assert updated.data.model_name == "renamed" and 'model="org/renamed"' in updated.text
    assert "| Learning rate | 0.0007 |" in updated.text  # the recipe survives without the training arguments
    assert [r.metric_value for r in updated.data.eval_results] == [r.metric_value for r in card.data.eval_results]


def test_the_scores_sacrebleu_signatures_are_stated_when_known(model_dir):
    signatures = sacrebleu_signatures()
    card = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS,
                             metric_signatures=signatures)
    assert f"sacreBLEU signatures: BLEU `{signatures['bleu']}`, chrF\n`{signatures['chrf']}`." in card.text
    assert "tok:13a" in signatures["bleu"] and f"version:{sacrebleu.__version__}" in signatures["chrf"]
    assert "BLEU's tokenization `13a`" in card.text
    chinese = create_model_card(model_dir, source_lang="de", target_lang="zh", metrics=METRICS,
                                metric_signatures=sacrebleu_signatures(bleu_tokenize="zh"))
    assert "BLEU's tokenization `zh`" in chinese.text and "13a" not in chinese.text
    # a card rendered from a folder's metrics alone does not claim the settings or version they were computed with
    alone = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS).text
    assert "signature" not in alone and "tokenization" not in alone
    # unless the metrics hold them, as a run's results files do now (all_results.json: a folder's card, rendered
    # again without its saved inputs, once left them out)
    recorded = {**METRICS, **{f"eval_{name}_signature": signature for name, signature in signatures.items()}}
    again = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=recorded).text
    assert f"sacreBLEU signatures: BLEU `{signatures['bleu']}`, chrF\n`{signatures['chrf']}`." in again


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("example", ['Er sagte: "Hallo!"', "C:\\Pfad\\zur Datei, 50 % & <b>", "zweiundvierzig"])
def test_the_code_translates_the_example_sentence_whatever_it_holds(model_dir, example):
    text = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS, example=example).text
    blocks = python_blocks(text)
    assert len(blocks) == 2
    for block in blocks:
        calls = [node for node in ast.walk(ast.parse(block)) if isinstance(node, ast.List)]  # the code is Python
        assert calls and all(ast.literal_eval(node) == [example] for node in calls)


def test_update_keeps_a_foreign_card_unless_told_more(tmp_path):
    model_dir = make_tiny_model_dir(tmp_path / "model")
    (model_dir / "README.md").write_text("# a card written by hand\n")
    assert update_model_card(model_dir, repo_id="user/x") is None
    assert (model_dir / "README.md").read_text() == "# a card written by hand\n"
    update_model_card(model_dir, repo_id="user/x", source_lang="de", target_lang="en")
    assert ModelCard.load(model_dir / "README.md").data.language == ["de", "en"]


def test_missing_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        create_model_card(tmp_path)


@pytest.mark.parametrize("data, words", [
    (dict(dataset_description="local files `data/train.de` and `data/train.en`"), "local files `data/train.de`"),
    (dict(dataset_name="data/train"), None),  # a local prefix given as a name: a path, not a Hub id
    (dict(dataset_description="the built-in `number_words` corpus (number words generated with num2words)"),
     "the built-in `number_words` corpus"),
    (dict(dataset_name="built-in number_words (num2words)"), "built-in number_words (num2words)"),  # older runs
])
def test_data_not_on_the_hub_is_named_in_words_without_link_or_datasets_entry(tmp_path, data, words):
    model_dir = make_tiny_model_dir(tmp_path / "model")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train").write_text("")  # the prefix exists as a path here
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        card = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS, **data)
    metadata = card.data.to_dict()
    assert "datasets" not in metadata
    assert {r.dataset_type for r in card.data.eval_results} == {"custom"}
    words = words or "data/train"
    assert "huggingface.co/datasets" not in card.text and f"[{words}" not in card.text
    assert f"German → English** on {words}" in card.text and f"Parallel text from {words}" in card.text


def test_a_hub_dataset_is_linked_and_listed(model_dir):
    card = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS, dataset_name="wmt/wmt14",
                             dataset_config="de-en")
    assert card.data.to_dict()["datasets"] == ["wmt/wmt14"]
    assert {r.dataset_type for r in card.data.eval_results} == {"wmt/wmt14"}
    assert "on [wmt/wmt14](https://huggingface.co/datasets/wmt/wmt14) (de-en)" in card.text


def test_the_training_script_describes_its_data(tmp_path):
    from hf_vanilla_transformer.training import data_source_description, parse_arguments

    _, builtin, _ = parse_arguments(["--output_dir", str(tmp_path)])
    assert "built-in `number_words` corpus" in data_source_description(builtin)
    _, prefix, _ = parse_arguments(["--output_dir", str(tmp_path), "--train_prefix", "data/train", "--source_lang",
                                    "de", "--target_lang", "en"])
    assert data_source_description(prefix) == "local files `train.de` and `train.en`"
    _, splits, _ = parse_arguments(["--output_dir", str(tmp_path), "--train_prefix", "data/train", "--validation_file",
                                    "data/val.jsonl", "--source_lang", "de", "--target_lang", "en"])
    assert data_source_description(splits, "validation") == "the local file `val.jsonl`"  # not the training files
    assert data_source_description(splits, "test") is None
    # the card is published: a local path by its name alone, not the user's folders
    _, absolute, _ = parse_arguments(["--output_dir", str(tmp_path), "--train_file", "/home/alice/corpus/train.jsonl",
                                      "--source_lang", "de", "--target_lang", "en"])
    assert data_source_description(absolute) == "the local file `train.jsonl`"
    (tmp_path / "saved").mkdir()
    _, folder, _ = parse_arguments(["--output_dir", str(tmp_path), "--dataset_name", str(tmp_path / "saved"),
                                    "--source_lang", "de", "--target_lang", "en"])
    assert data_source_description(folder) == "the local `datasets` folder `saved`"
    _, hub, _ = parse_arguments(["--output_dir", str(tmp_path), "--dataset_name", "wmt/wmt14", "--source_lang", "de",
                                 "--target_lang", "en"])
    assert data_source_description(hub) is None


def test_the_output_projection_bias_of_a_converted_marian_model_is_in_the_architecture(tmp_path):
    model_dir = make_tiny_model_dir(tmp_path / "model")
    assert "has a bias" not in create_model_card(model_dir).text
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, "output_bias": True}))
    row = next(line for line in create_model_card(model_dir).text.splitlines() if line.startswith("| Embeddings |"))
    assert "the output projection has a bias (not in the paper: a converted Marian model's" in row


def test_a_converted_marian_model_names_where_it_came_from(tmp_path):
    """A converted opus-mt model pushed as it is had a card that named neither the model it came from nor its Hub
    id as base_model; a local folder is named by its name alone."""
    from test_conversion import make_marian

    from hf_vanilla_transformer import from_marian

    marian = make_marian()
    marian.name_or_path = "Helsinki-NLP/opus-mt-en-de"  # as from_pretrained sets it
    from_marian(marian).save_pretrained(tmp_path / "hub")
    card = create_model_card(tmp_path / "hub")
    assert "Converted from the MarianMTModel `Helsinki-NLP/opus-mt-en-de` with `from_marian`" in card.text
    assert card.data.base_model == "Helsinki-NLP/opus-mt-en-de"
    (tmp_path / "home" / "alice" / "opus-mt-en-fr").mkdir(parents=True)
    marian.name_or_path = str(tmp_path / "home" / "alice" / "opus-mt-en-fr")
    from_marian(marian).save_pretrained(tmp_path / "local")
    card = create_model_card(tmp_path / "local")
    assert "the MarianMTModel in the local folder `opus-mt-en-fr`" in card.text and "alice" not in card.text
    assert card.data.base_model is None and "alice" not in (tmp_path / "local" / "config.json").read_text()


def test_the_code_without_the_package_loads_the_tokenizer_as_remote_code(model_dir):
    """Without trust_remote_code=True, AutoTokenizer asks "Do you wish to run the custom code? [y/N]" for this
    model type, which a notebook waits on."""
    text = create_model_card(model_dir, repo_id="user/x", source_lang="de", target_lang="en").text
    without_package = python_blocks(text)[1]
    assert 'AutoTokenizer.from_pretrained("user/x", trust_remote_code=True)' in without_package
    assert "model.generate(**inputs)" in without_package and "import hf_vanilla_transformer" not in without_package


def test_the_install_line_links_the_project_only_where_its_address_is_known(model_dir, monkeypatch):
    from email.message import Message
    from importlib import metadata

    def install_line(**card):
        text = create_model_card(model_dir, source_lang="de", target_lang="en", **card).text
        return next(line for line in text.splitlines() if "pip install hf-vanilla-transformer" in line)

    package = Message()
    monkeypatch.setattr(metadata, "metadata", lambda name: package)  # metadata without any address: no link made up
    assert "](" not in install_line()
    assert "[its source](https://example.org/hf-vanilla-transformer)" in install_line(
        project_url="https://example.org/hf-vanilla-transformer")
    package["Project-URL"] = "Source, https://example.org/source"
    assert "`pip install hf-vanilla-transformer`; [its source](https://example.org/source)" in install_line()


@pytest.mark.parametrize("data, generated", [
    (dict(dataset_description="the built-in `number_words` corpus (number words generated with num2words)"), True),
    (dict(dataset_name="built-in number_words (num2words)"), True),  # as older runs named it
    (dict(dataset_description="local files `train.de` and `train.en`"), False),
    (dict(dataset_name="bentrevett/multi30k"), False),
])
def test_the_limitations_fit_the_training_data(model_dir, data, generated):
    """The built-in corpus is number words that num2words generates, not web or crowd-sourced text."""
    text = create_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS, **data).text
    limitations = text.split("## Limitations")[1].split("## Citation")[0]
    assert ("web or crowd-sourced text" in limitations) is not generated
    assert ("number words that a program generated (num2words)" in limitations) is generated
    assert "Do not use it where a mistranslation causes harm" in limitations


def test_a_card_of_an_unrecorded_run_guesses_neither_data_nor_vocabulary_nor_decoding(model_dir):
    """A checkpoint pushed before its run finished has figures (its step, epoch, evaluation) but no record of the
    run's data or settings: its card said "Parallel text, from local files." and that a BPE vocabulary was learned."""
    text = create_model_card(model_dir, metrics={"eval_bleu": 1.0, "epoch": 2.0}, run_recorded=False,
                             training_args=[("Checkpoint", "step 10 of 20")]).text
    assert "The training data is not recorded with this model." in text and "from local files" not in text
    assert "is learned" not in text and "One vocabulary serves source and target text" in text
    assert "(the run's evaluation settings are not recorded)" in decoding_words(text)
    recorded = create_model_card(model_dir, metrics={"eval_bleu": 1.0, "epoch": 2.0},
                                 training_args=[("Checkpoint", "step 10 of 20")]).text
    assert "from local files" in recorded and "not recorded" not in decoding_words(recorded)


def test_each_split_is_credited_to_its_own_files_in_the_model_index(tmp_path):
    """The model-index named the training files as the data of the validation and test scores."""
    model_dir = make_tiny_model_dir(tmp_path / "model")
    card = create_model_card(model_dir, source_lang="de", target_lang="en",
                             metrics={"eval_bleu": 30.0, "predict_bleu": 28.0},
                             dataset_description="local files `train.de` and `train.en`",
                             evaluation_descriptions={"validation": "the local file `/home/alice/val.jsonl`",
                                                      "test": "local files `test.de` and `test.en`"})
    named = {result.dataset_split: result.dataset_name for result in card.data.eval_results}
    save_model_card(model_dir, source_lang="de", target_lang="en", metrics={"eval_bleu": 30.0},
                    evaluation_descriptions={"validation": "the local file `/home/alice/val.jsonl`"})
    stored = json.loads((model_dir / "model_card_inputs.json").read_text())  # published with the model
    assert stored["evaluation_descriptions"] == {"validation": "the local file `val.jsonl`"}
    assert named == {"validation": "the local file `val.jsonl` de-en",
                     "test": "local files `test.de` and `test.en` de-en"}


def test_the_training_curves_caption_says_which_curves_were_drawn(tmp_path):
    """The card's picture was "Training and validation loss and validation BLEU over the training steps" whatever
    the plot drew: a run without evaluation during training (--eval_strategy no) draws no validation loss."""
    from hf_vanilla_transformer.training_curves import plot_training_curves

    model_dir = make_tiny_model_dir(tmp_path / "model")
    training = [{"loss": 8.0 - step / 100, "step": step} for step in range(50, 301, 50)]
    final = [{"train_runtime": 9.0, "train_loss": 6.0, "step": 300},
             {"eval_bleu": 2.0, "eval_samples": 10, "step": 300}]
    text = create_model_card(model_dir, metrics=METRICS).text
    assert "training_curves.png" not in text and "![" not in text  # no plot written (a run shorter than a log step)
    plot_training_curves(training + final, model_dir / "training_curves.png")
    text = save_model_card(model_dir, source_lang="de", target_lang="en", metrics=METRICS).read_text()
    assert ("![Training loss over the training steps, and the validation BLEU of the run's model]"
            "(training_curves.png)") in text
    assert "validation loss" not in text
    evaluated = [{"eval_loss": 7.0, "eval_bleu": 1.0, "step": 300} if entry["step"] == 300 else entry
                 for entry in training] + training[-1:] + final
    plot_training_curves(evaluated, model_dir / "training_curves.png")
    text = update_model_card(model_dir, repo_id="user/x").read_text()  # a push renders it again: the file's caption
    assert ("![Training and validation loss and validation BLEU over the training steps, and the validation BLEU of "
            "the run's model](training_curves.png)") in text
    (model_dir / "training_curves.png").write_bytes(b"\x89PNG")  # a plot without a caption claims no curve
    text = create_model_card(model_dir, metrics=METRICS).text
    assert "![The training run's curves over the training steps](training_curves.png)" in text


def test_a_split_cut_to_its_first_pairs_says_of_how_many(tmp_path):
    """--max_eval_samples 200 and --max_train_samples 5000 made a card say "validation ... 200" and "Training
    sentence pairs: 5,000", not that these were the first 200 of 1,014 and the first 5,000 of 29,000."""
    model_dir = make_tiny_model_dir(tmp_path / "model")
    metrics = {**METRICS, "eval_samples": 200, "train_samples": 4990}  # 10 over-long training pairs left out
    sizes = {"train": (5000, 29000), "validation": (200, 1014), "test": (1000, 1000)}  # the test split whole
    save_model_card(model_dir, source_lang="de", target_lang="en", metrics=metrics, split_sizes=sizes)
    for text in (ModelCard.load(model_dir / "README.md").text,
                 update_model_card(model_dir, repo_id="user/x").read_text()):  # rendered again from the JSON
        assert "| validation | 27.35 | 55.50 | the first 200 of 1,014 |" in text
        assert "| test | 26.00 | 54.25 | 1,000 |" in text
        assert ("The validation scores are of the first 200 of the split's 1,014 sentence pairs only: they are not "
                "comparable with scores on the whole split.") in text
        assert "The test scores" not in text
        assert "- Validation sentence pairs: the first 200 of 1,014\n" in text
        assert "- Training sentence pairs: 4,990, from the first 5,000 of 29,000\n" in text
        assert "- Test sentence pairs: 1,000\n" in text
        # the Hub's metadata said "split: validation" for the first 200: a slice, as `datasets` writes one
        splits = [result.dataset_split for result in ModelCard.load(model_dir / "README.md").data.eval_results]
        assert splits == ["validation[:200]", "validation[:200]", "test", "test"]
    whole = create_model_card(model_dir, metrics=METRICS).text  # no sizes given: the counts alone, as before
    assert "| validation | 27.35 | 55.50 | 1,014 |" in whole and "- Training sentence pairs: 29,000\n" in whole
    assert "the first" not in whole and "not comparable" not in whole


def test_exact_match_accuracy_is_in_the_card_where_the_run_measured_it(tmp_path):
    """The built-in run's card gave BLEU and chrF alone, while its console, the README and all_results.json give
    exact-match accuracy, overall and per magnitude, as the figure that counts for numbers."""
    model_dir = make_tiny_model_dir(tmp_path / "model")
    metrics = {**METRICS, "eval_exact_match": 99.2, "eval_exact_match_digits_3": 100.0,
               "eval_exact_match_round": 97.22, "test_exact_match": 99.6, "test_exact_match_round": 97.22}
    text = create_model_card(model_dir, metrics=metrics).text
    assert "| Split | BLEU | chrF | Exact match (%) | Sentences |" in text
    assert "| validation | 27.35 | 55.50 | 99.2 | 1,014 |" in text
    assert "Exact match by group, validation (%): digits_3 100.0, round 97.2." in text
    assert "Exact match" not in create_model_card(model_dir, metrics=METRICS).text  # none measured: no column


def test_the_saved_card_inputs_keep_counts_as_integers(model_dir, training_args, tmp_path):
    """numpy counts (the Trainer's, a dataset's len as np.int64) were saved as floats: "train_samples": 29000.0."""
    import shutil

    import numpy as np

    folder = shutil.copytree(model_dir, tmp_path / "model")
    save_model_card(folder, source_lang="de", target_lang="en", training_args=training_args,
                    metrics={"train_samples": np.int64(29000), "eval_bleu": np.float32(27.5)})
    saved = json.loads((folder / CARD_INPUTS_FILE).read_text())["metrics"]
    assert saved == {"train_samples": 29000, "eval_bleu": 27.5} and isinstance(saved["train_samples"], int)


def test_the_recipe_names_bucketed_batches_where_the_run_had_them(model_dir, tmp_path):
    """--bucket_shapes (on by default on a GPU) packs other batches than the same run elsewhere: the card said
    nothing of it, and a run reproduced from its card on another machine trained on other batches."""
    from hf_vanilla_transformer.model_card import create_model_card
    from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainingArguments

    def recipe(**arguments):
        args = TokenBatchingSeq2SeqTrainingArguments(output_dir=str(tmp_path), report_to=[], max_tokens_per_batch=4096,
                                                     **arguments)
        return create_model_card(model_dir, source_lang="de", target_lang="en", training_args=args).text

    assert "| Batches padded to bucketed lengths | yes |" in recipe(bucket_shapes=True)
    assert "bucketed" not in recipe(bucket_shapes=False)
