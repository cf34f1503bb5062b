"""The model card (README.md) of a trained translation model, rendered from `model_cards/translation_model_card.md`
with huggingface_hub's `ModelCard` / `ModelCardData`.

Metadata: license, languages, datasets, tags, `library_name: transformers`, `pipeline_tag: translation` and a
`model-index` with BLEU and chrF. Body: architecture (from config.json and the weights), training recipe and data,
loading with and without the package, limitations. What the card was rendered from is kept in
`model_card_inputs.json`, so that pushing to a repository renders it again with that repository's id.
"""

from __future__ import annotations

import functools
import json
import logging
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .errors import InputError, MissingFileError, first_line
from .generation import PAPER_DECODING
from .metrics import LANGUAGE_NAMES, language_code

logger = logging.getLogger(__name__)


def _template_location() -> Path:
    """Where the card's template is: in the installed package (pyproject maps the repository's model_cards/ into
    it), else, in a source tree on `sys.path` (a checkout not installed, or one hiding the installed copy), beside
    the package."""
    try:
        return Path(str(resources.files("hf_vanilla_transformer.model_cards") / "translation_model_card.md"))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "model_cards" / "translation_model_card.md"


TEMPLATE_PATH = _template_location()
CARD_INPUTS_FILE = "model_card_inputs.json"
DEFAULT_TAGS = ("translation", "seq2seq", "transformer", "attention-is-all-you-need", "vanilla-transformer")
DEFAULT_LICENSE = "apache-2.0"  # this package's, for a model trained from scratch with it

# Trainer arguments that make up the recipe, with their names in the card.
RECIPE_FIELDS = {
    "optim": "Optimizer",
    "learning_rate": "Learning rate",
    "lr_scheduler_type": "Learning-rate schedule",
    "lr_scheduler_kwargs": "Schedule arguments",
    "warmup_steps": "Warmup steps",
    "warmup_ratio": "Warmup ratio",
    "adam_beta1": "Adam beta1",
    "adam_beta2": "Adam beta2",
    "adam_epsilon": "Adam epsilon",
    "weight_decay": "Weight decay",
    "max_grad_norm": "Gradient clipping (max norm)",
    "label_smoothing_factor": "Label smoothing",
    "max_tokens_per_batch": "Tokens per batch (per device)",
    "bucket_shapes": "Batches padded to bucketed lengths",
    "per_device_train_batch_size": "Sentences per batch (per device)",
    "gradient_accumulation_steps": "Gradient accumulation steps",
    "world_size": "Devices",
    "num_train_epochs": "Epochs",
    "max_steps": "Training steps",
    "average_last_checkpoints": "Checkpoints averaged into the model (section 6.1)",
    "bf16": "bf16",
    "fp16": "fp16",
    "seed": "Seed",
}
# Values that mean "not used": left out of the recipe table.
_UNSET = {"lr_scheduler_kwargs": ({},), "max_steps": (-1,), "warmup_steps": (0,), "warmup_ratio": (0.0,),
          "bf16": (False,), "fp16": (False,), "max_grad_norm": (0.0,), "bucket_shapes": (False,)}
# Schedules that take no warmup (transformers' get_scheduler passes them no num_warmup_steps), and the optimizers that
# warm up by themselves with `warmup_steps` whatever the schedule (trainer_optimizer.py).
_SCHEDULES_WITHOUT_WARMUP = {"constant", "reduce_lr_on_plateau", "greedy"}
_OPTIMIZERS_WITH_WARMUP = {"schedule_free_adamw", "schedule_free_sgd"}
# Optimizers that the Trainer gives `adam_beta1`, `adam_beta2` and `adam_epsilon` (transformers 5.23's and 5.24's
# trainer_optimizer.py; the Lion ones take the betas alone); the others (sgd, adafactor, adagrad, rmsprop, galore,
# lomo, grokadamw, ...) ignore them. A name unknown here counts as Adam if it starts with "adam".
_ADAM_OPTIMIZERS = {
    "adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused", "adamw_anyprecision",
    "adamw_torch_4bit", "adamw_torch_8bit", "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_32bit", "paged_adamw_8bit",
    "ademamix", "ademamix_8bit", "paged_ademamix_32bit", "paged_ademamix_8bit", "apollo_adamw",
    "apollo_adamw_layerwise", "schedule_free_adamw", "schedule_free_radam", "stable_adamw",
}
_LION_OPTIMIZERS = {"lion_8bit", "lion_32bit", "paged_lion_8bit", "paged_lion_32bit"}
# Splits reported in the model-index: (split label, metric prefixes in all_results.json).
_SPLITS = (("validation", ("eval_",)), ("test", ("test_", "predict_")))
TRAINING_CURVES = "training_curves.png"
"""The training script's plot of the run, shown in the card where the model's folder has it (a relative link: the
file is pushed beside README.md, and the Hub shows it in place)."""
_CAPTION_KEY = "Description"  # training_curves.CAPTION_KEY: the PNG text chunk that names the curves drawn
_CURVES_CAPTION = "The training run's curves over the training steps"  # for a PNG that names none
# The split behind each count of sentence pairs in the metrics (`split_sizes`' keys).
_SIZE_SPLITS = {"train_samples": "train", "eval_samples": "validation", "test_samples": "test",
                "predict_samples": "test"}
_SIZES = {"train_samples": "Training sentence pairs", "eval_samples": "Validation sentence pairs",
          "test_samples": "Test sentence pairs", "predict_samples": "Test sentence pairs",
          "epoch": "Epochs trained", "train_runtime": "Training time, evaluations included (s)",
          "train_loss": "Mean training loss",
          "best_model_step": "Step of the checkpoint kept as the model (the best on validation)"}
_EXAMPLES = {"de": "Ein Mann fährt mit dem Fahrrad durch die Stadt.", "en": "A man rides a bicycle through the city.",
             "fr": "Un homme traverse la ville à vélo.", "es": "Un hombre va en bicicleta por la ciudad."}


def create_model_card(
    model_dir: str | os.PathLike,
    *,
    source_lang: str | None = None,
    target_lang: str | None = None,
    metrics: Mapping[str, float] | None = None,
    dataset_name: str | None = None,
    dataset_config: str | None = None,
    dataset_description: str | None = None,
    evaluation_descriptions: Mapping[str, str | None] | None = None,
    eval_split: str = "validation",
    training_args: Any = None,
    decoding: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
    revision: str | None = None,
    model_name: str | None = None,
    license: str | None = None,
    tags: Sequence[str] = (),
    example: str | None = None,
    tokenizer_from: str | None = None,
    base_model: str | None = None,
    project_url: str | None = None,
    metric_signatures: Mapping[str, str] | None = None,
    run_recorded: bool = True,
    split_sizes: Mapping[str, Sequence[int]] | None = None,
    template_path: str | os.PathLike | None = None,
) -> ModelCard:
    """Render the card of the model saved in `model_dir` (config.json, weights; tokenizer.json if there).

    `dataset_name`: the training data's Hub dataset id, linked and listed under `datasets:` and in the model-index;
    data that is not on the Hub (local files, a built-in corpus) is named in words by `dataset_description` instead
    (a `dataset_name` that is no Hub id is taken as such a description). `evaluation_descriptions`: split ->
    such words for the data a split was scored on, where it is not the training data's (a local validation file).
    `metrics`: the run's metrics, `Trainer` style (`eval_bleu`, `eval_chrf`, `test_bleu`, `train_samples`, ...);
    by default those of `model_dir/all_results.json`. `eval_split` names the split behind the `eval_` metrics.
    `training_args`: the run's `(Seq2Seq)TrainingArguments` (or a dict of their values) for the recipe table and
    for how the scores were decoded: their `generation_num_beams` and `generation_max_length`, where set, are what
    Seq2SeqTrainer's evaluation passed to generate() over the saved generation config.
    `decoding`: such settings given directly (`num_beams`, `max_length`); they win over `training_args`'.
    `repo_id` goes into the loading examples (default: `model_dir`), with `revision=` where the card is pushed to a
    branch other than main (`revision`); `example` is a source sentence for them (the
    training script gives one from its data; without it, a sentence in the source language).
    `tokenizer_from`: the model or tokenizer whose vocabulary the run reused (fine-tuning, `--tokenizer_name`); by
    default the card says one was learned on the training data.
    `base_model`: the model a fine-tuning run started from (a folder or Hub id), named in the card, and in its
    `base_model:` metadata when it is a Hub id. A `base_model` or `tokenizer_from` that is a folder here, or no Hub
    id, is named by its folder's name alone: the card is published, and a path shows the user's folders.
    `license`: the model's; by default the license of the model it was fine-tuned or converted from, where that
    model's card says one (a folder's README.md, or the Hub's card when online), else `DEFAULT_LICENSE`: a
    fine-tuned opus-mt model keeps its CC-BY terms.
    `project_url`: the package's web page, linked where the card names it (default: the installed package's
    metadata's, where it has one).
    `metric_signatures`: the sacreBLEU signatures of the scores (`metrics.sacrebleu_signatures()` where they were
    computed), stated under the results; by default those `metrics` hold (`eval_bleu_signature`, ...), where any.
    `run_recorded=False`: the training run left no record of its data and settings (a checkpoint pushed before its
    run finished): the card says so rather than guessing them from the figures it has.
    `split_sizes`: split ("train", "validation", "test") -> (pairs kept, pairs in the split) for the splits that the
    run cut to their first pairs (`--max_train_samples`, `--max_eval_samples`, `--max_predict_samples`): the card
    says so where it gives their sizes, and that such scores are not the whole split's.
    """
    model_dir = Path(model_dir)
    example = example or _EXAMPLES.get(language_code(source_lang), "A sentence to translate.")
    if dataset_name and not _is_hub_id(dataset_name):
        dataset_name, dataset_description = None, dataset_description or dataset_name
    dataset_description = _without_folders(dataset_description)
    evaluation_descriptions = {split: _without_folders(words)
                               for split, words in (evaluation_descriptions or {}).items()}
    config = read_json(model_dir / "config.json", "the model's config: save the model there first")
    if metrics is None:
        metrics = read_json(model_dir / "all_results.json", optional=True)
    if metric_signatures is None and metrics:  # a run's results files hold them beside the scores
        found = {name: metrics.get(f"{prefix}_{name}_signature") for prefix in ("predict", "eval")
                 for name in ("bleu", "chrf") if metrics.get(f"{prefix}_{name}_signature")}
        metric_signatures = found if len(found) == 2 else None
    repo_id = repo_id or str(model_dir)
    model_name = model_name or repo_id.rstrip("/").split("/")[-1]
    split_sizes = _cut_splits(split_sizes)
    results = _results(metrics, eval_split, split_sizes)
    decoding_words = _decoding(
        read_json(model_dir / "generation_config.json", optional=True), _evaluation_decoding(training_args, decoding)
    )
    if not run_recorded:
        decoding_words += ", by the saved generation config (the run's evaluation settings are not recorded)"
    languages = [_language_metadata(lang) for lang in (source_lang, target_lang) if lang]
    base_model_shown, tokenizer_shown = _local_folder_name(base_model), _local_folder_name(tokenizer_from)
    converted_from = config.get("converted_from")  # a MarianMTModel's Hub id or folder name (`from_marian`)
    converted_shown = _local_folder_name(converted_from)
    card_data = ModelCardData(
        language=languages or None,
        license=license or _inherited_license(base_model, converted_from) or DEFAULT_LICENSE,
        library_name="transformers",
        pipeline_tag="translation",
        tags=list(dict.fromkeys([*DEFAULT_TAGS, *tags])),
        datasets=[dataset_name] if dataset_name else None,
        base_model=(base_model if base_model and not base_model_shown else
                    converted_from if not base_model and converted_from and not converted_shown else None),
        metrics=["bleu", "chrf"],
        model_name=model_name,
        eval_results=_eval_results(
            results, dataset_name, dataset_description, dataset_config, source_lang, target_lang,
            evaluation_descriptions,
        ) or None,
    )
    return ModelCard.from_template(
        card_data,
        template_path=str(template_path or _template_path()),
        model_name=model_name,
        repo_id=repo_id,
        revision=revision if revision not in (None, "main") else None,
        revision_arg=f", revision={json.dumps(revision)}" if revision not in (None, "main") else "",
        source_lang=source_lang,
        target_lang=target_lang,
        source_language=_language_name(source_lang),
        target_language=_language_name(target_lang),
        dataset_name=dataset_name,
        dataset_config=dataset_config,
        dataset_description=dataset_description,
        dataset_link=f"[{dataset_name}](https://huggingface.co/datasets/{dataset_name})" if dataset_name else None,
        project_url=project_url or _project_url(),
        generated_data=_is_builtin_corpus(dataset_name or dataset_description),
        run_recorded=run_recorded,
        results=results,
        decoding=decoding_words,
        arch=_architecture(model_dir, config),
        tokenizer=_tokenizer_description(model_dir),
        tokenizer_from=tokenizer_shown or tokenizer_from,
        tokenizer_from_local=bool(tokenizer_shown),
        base_model=base_model_shown or base_model,
        base_model_local=bool(base_model_shown),
        converted_from=converted_shown or converted_from,
        converted_from_local=bool(converted_shown),
        recipe=_recipe(training_args),
        curves=TRAINING_CURVES if (model_dir / TRAINING_CURVES).is_file() else None,
        curves_caption=_curves_caption(model_dir / TRAINING_CURVES),
        data_sizes=_data_sizes(metrics, split_sizes),
        example=example,
        example_literal=json.dumps(example, ensure_ascii=False),  # a Python string literal for the code blocks
        metric_signatures=metric_signatures,
    )


def _data_sizes(metrics: Mapping[str, float], split_sizes: Mapping[str, tuple[int, int]] | None = None
                ) -> list[tuple[str, str]]:
    """The card's rows of data sizes and training figures. A resumed run's time and mean loss are the Trainer's for
    the steps after the checkpoint it resumed from (`resumed_from_step`), and say so. A split the run cut to its
    first pairs (`split_sizes`, as `_cut_splits` gives them) says of how many."""
    resumed = metrics.get("resumed_from_step")
    rows = []
    for key, label in _SIZES.items():
        if key not in metrics:
            continue
        if resumed and key in ("train_runtime", "train_loss"):
            label = label.replace(" (s)", "") + f", after resuming at step {int(resumed)}" + (
                " (s)" if key == "train_runtime" else "")
        if key in _SIZE_SPLITS:
            rows.append((label, _pairs(metrics[key], (split_sizes or {}).get(_SIZE_SPLITS[key]))))
            continue
        rows.append((label, _number(metrics[key])))
    return rows


def _cut_splits(split_sizes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, int]]:
    """split -> (pairs kept, pairs in the split) for the splits of `split_sizes` that were cut (fewer kept than
    the split has); a JSON round trip's lists are taken as pairs too."""
    cut = {}
    for split, sizes in (split_sizes or {}).items():
        try:
            kept, total = (int(size) for size in sizes)
        except (TypeError, ValueError):  # not a (kept, total) pair: nothing to say
            continue
        if 0 <= kept < total:
            cut[split] = (kept, total)
    return cut


def _pairs(count: Any, cut: tuple[int, int] | None) -> str:
    """A count of sentence pairs for the card: "1,014"; "the first 200 of 1,014" for a split cut to its first 200
    pairs; "198, from the first 200 of 1,014" where the run left some of those out (blank, over-long)."""
    if cut is None or count is None:
        return _number(count)
    kept, total = cut
    if isinstance(count, numbers.Real) and count == kept:
        return f"the first {kept:,} of {total:,}"
    return f"{_number(count)}, from the first {kept:,} of {total:,}"


def _curves_caption(path: Path) -> str | None:
    """The training curves' caption: the one the training script wrote into the PNG (which curves it drew), on one
    line and without brackets (it is the image's text in Markdown), else words that claim no curve; None for no
    file."""
    if not path.is_file():
        return None
    caption = None
    try:
        from PIL import Image

        with Image.open(path) as image:
            caption = getattr(image, "text", {}).get(_CAPTION_KEY)
    except Exception:  # noqa: BLE001 - no PNG, a damaged one, no Pillow: the words that claim no curve
        pass
    if isinstance(caption, str):
        caption = " ".join(re.sub(r"[\[\]\\]", " ", caption).split())[:300]  # brackets would end the image's text
    return caption or _CURVES_CAPTION


def save_model_card(model_dir: str | os.PathLike, **card_kwargs) -> Path:
    """Render the card (see `create_model_card` for the arguments) into `model_dir/README.md` and keep its inputs in
    `model_dir/model_card_inputs.json` for `update_model_card`. Call it at the end of every training run.
    Returns the README path."""
    model_dir = Path(model_dir)
    card = create_model_card(model_dir, **card_kwargs)
    # a push's own settings stay out: the folder's card is rendered again for each push
    inputs = {key: value for key, value in card_kwargs.items()
              if key not in ("training_args", "template_path", "revision")}
    for key in ("base_model", "tokenizer_from"):  # published with the model: a folder here by its name alone
        if name := _local_folder_name(inputs.get(key)):
            inputs[key] = f"./{name}"  # which no Hub id looks like: rendered again, it is still a local folder's
    name = inputs.get("dataset_name")
    if name and not _is_hub_id(name) and inputs.get("dataset_description"):  # the description stands in for it
        inputs["dataset_name"] = None
    inputs["dataset_description"] = _without_folders(inputs.get("dataset_description"))
    if inputs.get("evaluation_descriptions"):
        inputs["evaluation_descriptions"] = {
            split: _without_folders(words) for split, words in inputs["evaluation_descriptions"].items()}
    inputs["training_args"] = _recipe(card_kwargs.get("training_args"))  # the recipe rows stand in for the arguments
    inputs["decoding"] = _evaluation_decoding(card_kwargs.get("training_args"), card_kwargs.get("decoding"))
    if inputs.get("metrics") is not None:
        inputs["metrics"] = {key: _plain(value) for key, value in inputs["metrics"].items()}
    inputs["tags"] = list(inputs.get("tags", ()))
    # the license given or found (a base model's folder is no longer at hand when the card is rendered again), not
    # the default: a push from where the Hub can be reached looks again
    config = read_json(model_dir / "config.json")
    inputs["license"] = card_kwargs.get("license") or _inherited_license(card_kwargs.get("base_model"),
                                                                          config.get("converted_from"))
    (model_dir / CARD_INPUTS_FILE).write_text(json.dumps(inputs, indent=2, default=str) + "\n", encoding="utf-8")
    card.save(model_dir / "README.md")
    return model_dir / "README.md"


def update_model_card(model_dir: str | os.PathLike, **overrides) -> Path | None:
    """Render `model_dir/README.md` again from the saved inputs with `overrides` (e.g. `repo_id=...` before a push).
    Without saved inputs, render one from what the folder holds (config, weights, all_results.json) and
    `overrides`, unless a README.md is there and `overrides` only give the `repo_id` and `revision`: then keep it
    (returns None)."""
    model_dir = Path(model_dir)
    inputs_file = model_dir / CARD_INPUTS_FILE
    if inputs_file.is_file():
        inputs = read_json(inputs_file)
    elif (model_dir / "README.md").is_file() and not overrides.keys() - {"repo_id", "revision"}:
        return None
    else:
        inputs = {}
    inputs.update(overrides)
    return save_model_card(model_dir, **inputs)


def _inherited_license(*models: str | None) -> str | None:
    """The license in the card of the first of `models` (folders or Hub ids) that has a card saying one."""
    return next(filter(None, map(_card_license, dict.fromkeys(filter(None, models)))), None)


def _card_license(name: str) -> str | None:
    """The license that the card of `name` (a folder here, or a Hub id) says, or None. "./name" is the name a
    published card gives a folder of the machine it was made on: nothing to look up."""
    if name.startswith("./"):
        return None
    if (Path(name) / "README.md").is_file():
        try:
            return ModelCard.load(Path(name) / "README.md").data.license
        except Exception:  # noqa: BLE001 - a README without metadata says no license
            return None
    return _hub_card_license(name) if _is_hub_id(name) and not Path(name).exists() else None


@functools.lru_cache(maxsize=16)
def _hub_card_license(repo_id: str) -> str | None:
    """The license on the Hub card of `repo_id`, looked up once a process: a run renders its card twice, and without
    network huggingface_hub retries for many seconds."""
    try:
        return ModelCard.load(repo_id).data.license
    except Exception as error:  # noqa: BLE001 - offline, no card, no metadata: the card says the default
        logger.warning("Could not read the license on %s's card (%s): the model card says %s until it is rendered "
                       "again where the Hub can be reached (push_to_hub.py does), or is given one (--license).",
                       repo_id, first_line(error), DEFAULT_LICENSE)
        return None


def _template_path() -> Path:
    if not TEMPLATE_PATH.is_file():
        raise FileNotFoundError(
            f"The model card template is not at {TEMPLATE_PATH} (the package ships it: a damaged installation?): "
            "pass template_path=..., or install the package again."
        )
    return TEMPLATE_PATH


def _evaluation_decoding(training_args: Any, decoding: Mapping[str, Any] | None) -> dict:
    """What evaluation passed to generate() over the saved generation config: Seq2SeqTrainer's `num_beams` and
    `max_length` from `generation_num_beams` and `generation_max_length` where set, under `decoding`'s entries."""
    passed = {"num_beams": _argument(training_args, "generation_num_beams"),
              "max_length": _argument(training_args, "generation_max_length"), **(decoding or {})}
    return {key: value for key, value in passed.items() if value is not None}


def _decoding(generation: Mapping[str, Any], evaluation: Mapping[str, Any]) -> str:
    """The card's words for how the scores were decoded: the saved generation config (the paper's beam search [6.1]
    where it sets none, as the model loads it) under what evaluation passed to generate()."""
    config = {**PAPER_DECODING, **{key: value for key, value in generation.items() if value is not None}}
    beams, penalty = evaluation.get("num_beams", config["num_beams"]), config["length_penalty"]
    max_length = evaluation.get("max_length", config.get("max_length"))
    search = "greedy search" if beams == 1 else f"beam search ({beams} beams, length penalty {_setting(penalty)})"
    if config.get("max_new_tokens") is not None:  # generate() prefers it to any max_length
        limit = f"at most {config['max_new_tokens']} new tokens"
    elif max_length is not None:
        limit = f"at most {max_length} tokens (the start token included)"
    else:  # the model's generate() default
        paper = (beams, penalty) == (PAPER_DECODING["num_beams"], PAPER_DECODING["length_penalty"])
        limit = "at most source length + 50 new tokens" + (", as in the paper's section 6.1" if paper else "")
    return f"{search}, {limit}"


def decoding_description(generation: Mapping[str, Any], training_args: Any) -> str:
    """The card's words for how evaluation decoded (`_decoding`): a model's generation config as it saves it
    (`GenerationConfig.to_diff_dict()`, the values set), under the run's `generation_num_beams` and
    `generation_max_length`. The training script writes them into the results files too."""
    return _decoding(generation, _evaluation_decoding(training_args, None))


def pairs_description(count: Any, split_size: Sequence[int] | None) -> str:
    """A split's count of scored pairs, as the card gives it: "1,014", or "the first 20 of 1,014" for a split cut
    to its first pairs (`split_size`: (pairs kept, pairs in the split))."""
    return _pairs(count, _cut_splits({"split": split_size}).get("split") if split_size else None)


def read_json(path: Path, what: str | None = None, optional: bool = False) -> dict:
    """A JSON file of a model's folder (`what` says what it is, for the error where it is missing; {} where it is
    `optional` and missing); InputError where it is damaged or not UTF-8."""
    if optional and not path.is_file():
        return {}
    if not path.is_file():
        raise MissingFileError(f"No {path.name} in {path.parent}" + (f" ({what})." if what else "."))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"Cannot read {path}: {error}") from None


def _results(metrics: Mapping[str, float], eval_split: str,
             split_sizes: Mapping[str, tuple[int, int]] | None = None) -> list[dict]:
    """One row per split with a BLEU or chrF score: split, bleu, chrf, samples (formatted; of how many pairs, for a
    split cut to its first pairs), cut ((pairs kept, pairs in the split) for such a split, else None), blank (the
    pairs with a blank side, left out of the scores)."""
    rows = []
    for split, prefixes in _SPLITS:
        for prefix in prefixes:
            bleu, chrf = metrics.get(f"{prefix}bleu"), metrics.get(f"{prefix}chrf")
            if bleu is None and chrf is None:
                continue
            rows.append({
                "split": eval_split if split == "validation" else split,
                "bleu": "–" if bleu is None else f"{bleu:.2f}", "chrf": "–" if chrf is None else f"{chrf:.2f}",
                "bleu_value": bleu, "chrf_value": chrf,
                "samples": _pairs(metrics.get(f"{prefix}samples"), (split_sizes or {}).get(split)),
                "cut": (split_sizes or {}).get(split),
                "blank": int(metrics.get(f"{prefix}blank_pairs") or 0),
                # exact-match accuracy, where the run measured it (the built-in corpus: overall and per magnitude)
                "exact": None if metrics.get(f"{prefix}exact_match") is None else
                f"{metrics[f'{prefix}exact_match']:.1f}",
                "exact_groups": ", ".join(
                    f"{key.removeprefix(f'{prefix}exact_match_')} {value:.1f}" for key, value in metrics.items()
                    if key.startswith(f"{prefix}exact_match_") and isinstance(value, numbers.Real)),
            })
            break
    return rows


def _eval_results(
    results, dataset_name, dataset_description, dataset_config, source_lang, target_lang, split_descriptions=None
) -> list[EvalResult]:
    """The model-index entries; `dataset.type` is the Hub dataset id, or "custom" for data that is not on the Hub,
    named by the split's own files where `split_descriptions` has them (not by the training files)."""
    pair = f"{source_lang}-{target_lang}" if source_lang and target_lang else None
    evals = []
    for row in results:
        description = (split_descriptions or {}).get(row["split"]) or dataset_description
        for metric, name in (("bleu", "BLEU"), ("chrf", "chrF")):
            if row[f"{metric}_value"] is None:
                continue
            evals.append(EvalResult(
                task_type="translation",
                task_name=f"Translation {pair}" if pair else "Translation",
                dataset_type=dataset_name or "custom",
                dataset_name=f"{dataset_name or description or 'custom data'} {pair or ''}".strip(),
                dataset_config=dataset_config,
                # a split cut to its first pairs, in the slice notation of `datasets` ("validation[:50]"): Hub
                # readers of the metadata took the score for the whole split's
                dataset_split=f"{row['split']}[:{row['cut'][0]}]" if row["cut"] else row["split"],
                metric_type=metric,
                metric_name=name,
                metric_value=round(float(row[f"{metric}_value"]), 2),
            ))
    return evals


def _architecture(model_dir: Path, config: Mapping[str, Any]) -> dict:
    arch = {key: config.get(key) for key in (
        "encoder_layers", "decoder_layers", "d_model", "encoder_attention_heads", "decoder_attention_heads",
        "encoder_ffn_dim", "decoder_ffn_dim", "activation_function", "dropout", "attention_dropout",
        "activation_dropout", "vocab_size")}
    arch["tie_word_embeddings"] = config.get("tie_word_embeddings", True)
    arch["output_bias"] = config.get("output_bias", False)
    if config.get("normalize_before"):
        arch["norm"] = "pre-LN: x + Sublayer(LayerNorm(x)), final LayerNorm on each stack"
    else:
        arch["norm"] = "post-LN, as in the paper: LayerNorm(x + Sublayer(x))"
    count = count_parameters(model_dir)
    arch["parameters"] = "unknown" if not count else f"{count:,} ({count / 1e6:.1f}M)" if count >= 1e6 else f"{count:,}"
    return arch


def count_parameters(model_dir: str | os.PathLike) -> int | None:
    """Number of parameters stored in the folder's safetensors files (tied weights count once), read from their
    headers without loading the tensors; None when there are none."""
    from safetensors import safe_open

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with safe_open(str(file), framework="pt") as weights:
            for name in weights.keys():
                shape = weights.get_slice(name).get_shape()
                size = 1
                for dim in shape:
                    size *= dim
                total += size
    return total


def _tokenizer_description(model_dir: Path) -> str | None:
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        return None
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    model = (tokenizer.get("model") or {}).get("type", "")
    pre = tokenizer.get("pre_tokenizer") or {}
    byte_level = pre.get("type") == "ByteLevel" or any(
        p.get("type") == "ByteLevel" for p in pre.get("pretokenizers", []) or [])
    if model == "BPE":
        described = "byte-level BPE shared by source and target" if byte_level else "BPE shared by source and target"
    elif model:
        described = f"{model} shared by source and target"
    else:
        return None
    return described + _normalizer_description(tokenizer.get("normalizer"))


def _normalizer_description(normalizer: Mapping[str, Any] | None) -> str:
    """What a tokenizer's normalizer changes that a reader would notice in its translations (case, respelt letters),
    as the end of the vocabulary's description; "" for none, or one that only normalizes Unicode."""
    steps = (normalizer or {}).get("normalizers", [normalizer]) if normalizer else []
    changes = ["lower-cased" for step in steps if step.get("type") == "Lowercase"][:1]
    respelt = [(step["pattern"]["String"], step["content"]) for step in steps
               if step.get("type") == "Replace" and "String" in (step.get("pattern") or {})]
    if respelt:
        changes.append("with " + ", ".join(f"{letter} as {spelt or 'nothing'}" for letter, spelt in respelt))
    return ", reading text " + " ".join(changes) if changes else ""


def _recipe(training_args: Any) -> list[tuple[str, str]]:
    """(name, value) rows of the recipe from training arguments, a dict of their values, or rows already made. The
    bf16 and fp16 rows say what the run trained in: the arguments' `mixed_precision`, where they have it, which the
    Trainer gives its Accelerator; it holds a launcher's choice too (`accelerate launch --mixed_precision bf16`, or
    `mixed_precision: bf16` in its config file), which `bf16` and `fp16` do not show."""
    if training_args is None:
        return []
    if isinstance(training_args, (list, tuple)):  # rows, as save_model_card keeps them
        return [tuple(row) for row in training_args]
    ignored = _unused_fields(training_args)
    precision = _argument(training_args, "mixed_precision")  # "no", "bf16", "fp16", ... (TrainingArguments' own)
    rows = []
    for field, label in RECIPE_FIELDS.items():
        value = _argument(training_args, field)
        if field in ("bf16", "fp16") and precision is not None:
            value = precision == field
        if value is None or field in ignored or value in _UNSET.get(field, ()):
            continue
        if field == "warmup_steps" and 0 < value < 1:  # transformers' fraction of the training steps
            rows.append((label, f"{value * 100:g}% of the training steps"))
            continue
        rows.append((label, _setting(value)))
    return rows


def _unused_fields(training_args: Any) -> set[str]:
    """Recipe fields the Trainer ignores under the run's other arguments: left out of the card."""
    def get(field):
        return _argument(training_args, field)

    unused = set()
    if (get("max_steps") or -1) > 0:
        unused.add("num_train_epochs")  # the Trainer ignores it then
    if get("max_tokens_per_batch"):
        unused.add("per_device_train_batch_size")  # token batching replaces it
    optim = get("optim")
    if not warms_up(training_args):
        unused |= {"warmup_steps", "warmup_ratio"}
    if optim in _LION_OPTIMIZERS:
        unused.add("adam_epsilon")
    elif optim is not None and optim not in _ADAM_OPTIMIZERS and not optim.startswith("adam"):
        unused |= {"adam_beta1", "adam_beta2", "adam_epsilon"}
    return unused


def warms_up(training_args: Any) -> bool:
    """Whether the run's learning rate warms up over `warmup_steps`: its schedule takes a warmup (not constant,
    reduce_lr_on_plateau or greedy), or its optimizer warms up by itself (schedule-free)."""
    return (_argument(training_args, "lr_scheduler_type") not in _SCHEDULES_WITHOUT_WARMUP
            or _argument(training_args, "optim") in _OPTIMIZERS_WITH_WARMUP)


def _argument(training_args: Any, field: str) -> Any:
    """A training argument's value (an enum's as its value) from the arguments or a dict of their values; None from
    recipe rows (as save_model_card keeps them) or no arguments."""
    if training_args is None or isinstance(training_args, (list, tuple)):
        return None
    value = training_args.get(field) if isinstance(training_args, Mapping) else getattr(training_args, field, None)
    return value.value if isinstance(value, Enum) else value


def _plain(value: Any) -> Any:
    """A metric value as JSON can hold it: numpy scalars become Python numbers, integers staying integers."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else value


def _number(value: Any) -> str:
    """A score or count for the card: 35.12, 29,000; a dash for none."""
    if value is None:
        return "–"
    if isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer()):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        return f"{value:.2f}"
    return str(value)


def _setting(value: Any) -> str:
    """A hyperparameter as written on a command line: 0.0007, 1e-09, 0.98, yes."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value.value if isinstance(value, Enum) else value)


def _language_name(code: str | None) -> str | None:
    """The language's English name where this package knows it ("German" for de, deu or german), else `code`."""
    return LANGUAGE_NAMES.get(language_code(code), code) if code else None


def _language_metadata(code: str) -> str:
    """The code the Hub's `language:` metadata takes (ISO 639-1 where known: "en" for english or eng), else `code`."""
    return language_code(code) if language_code(code) in LANGUAGE_NAMES else code


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def _is_hub_id(name: str) -> bool:
    """Whether a dataset name has the form of a Hub id ("wmt14", "bentrevett/multi30k") and is no local path."""
    return bool(_HUB_ID.fullmatch(name)) and not os.path.exists(name)


def _local_folder_name(name: str | None) -> str | None:
    """The folder's name alone ("x" for /home/alice/runs/x, and for its file x/tokenizer.json, as --tokenizer_name
    takes; "x/checkpoint-400" for a checkpoint of the run x) for a model or tokenizer named by a local path: one
    that exists here, or no Hub id (a path on the machine the card was first rendered on, or "./name" as a saved
    card names it); None for a Hub id or none."""
    if not name or _is_hub_id(name):
        return None
    path = Path(name).expanduser()
    if name.startswith("./") and not path.exists():  # the name a card already gave it
        return name[2:] or "a local folder"
    path = path.resolve() if path.exists() else path
    if path.is_file() or path.suffix == ".json":
        path = path.parent
    if re.fullmatch(r"checkpoint-\d+", path.name) and path.parent.name:  # which run's checkpoint
        return f"{path.parent.name}/{path.name}"
    return path.name or "a local folder"


_QUOTED_PATH = re.compile(r"`[/~.][^`]*/([^`/]+)`")


def _without_folders(description: str | None) -> str | None:
    """A data description with the local paths it quotes (`../data/train.de`, `/home/alice/train.de`, as older runs
    wrote them) cut to their file names (`train.de`)."""
    return _QUOTED_PATH.sub(r"`\1`", description) if description else description


_BUILTIN_CORPUS = re.compile(r"built-in\W+number_words")


def _is_builtin_corpus(data: str | None) -> bool:
    """Whether the training data, as the card names it, is the built-in number-words corpus (generated with
    num2words, no text written by people): as the training script describes it, or as older runs named it."""
    return bool(data and _BUILTIN_CORPUS.search(data))


def _project_url() -> str | None:
    """The installed package's web page, from its metadata (a Project-URL, or Home-page); None where it has none."""
    from importlib import metadata

    try:
        package = metadata.metadata("hf-vanilla-transformer")
    except metadata.PackageNotFoundError:
        return None
    urls = [entry.split(",", 1)[-1].strip() for entry in package.get_all("Project-URL") or []]
    urls.append(package.get("Home-page"))
    return next((url for url in urls if url and url.startswith(("https://", "http://"))), None)
