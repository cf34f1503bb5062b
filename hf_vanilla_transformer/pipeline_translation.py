"""A translation pipeline for transformers v5, which removed `pipeline("translation")` and "text2text-generation".

Two ways to reach it:

* with this package imported, through the pipeline registry, no remote code involved:
  `pipeline("machine-translation", model=DIR_OR_REPO)`;
* without the package, from the copy of this file that `save_translation_pipeline` puts next to every saved model
  (recorded under `custom_pipelines` in its config.json): `pipeline(model=DIR_OR_REPO, trust_remote_code=True)`,
  or `pipeline("translation", model=DIR_OR_REPO, trust_remote_code=True)`.

The two task names differ on purpose. transformers looks a task up in the model's `custom_pipelines` before its
registry, and there it insists on `trust_remote_code=True`, even for a registered class: under one shared name the
registry could never be used without remote code. For the same reason `pipeline(model=DIR)`, which takes its task
from `custom_pipelines`, asks for `trust_remote_code=True` with the package imported too. The registry refuses
"translation" ("removed in v5"); a custom pipeline may take that name, which gives remote-code users the v4 one.

This module imports only the standard library, torch and transformers (and its dependency tqdm), so that it works as
remote code from the Hub.
"""

import json
import shutil
import unicodedata
import warnings
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, GenerationConfig, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

TASK = "machine-translation"
"""The name registered with `PIPELINE_REGISTRY` (used with the package imported)."""

SAVED_TASK = "translation"
"""The name recorded in a saved model's `config.json` `custom_pipelines` (used with `trust_remote_code=True`)."""


class TranslationPipeline(Pipeline):
    """Translate text with an encoder-decoder's `generate()`: beam search with the model's generation config
    (the paper's 4 beams and length penalty 0.6 for this package's models), 4 beams where it sets none.

    >>> translator = pipeline("machine-translation", model="path/to/model")  # doctest: +SKIP
    >>> translator(["Ein Hund läuft.", "Zwei Katzen schlafen."], batch_size=16)  # doctest: +SKIP
    [{'translation_text': 'A dog runs.'}, {'translation_text': 'Two cats sleep.'}]

    Outputs follow transformers v4's TranslationPipeline: one string gives a list of `num_return_sequences` dicts;
    a list of strings gives one dict per string (a list of dicts each when `num_return_sequences > 1`). Pass
    `return_tensors=True` for `translation_token_ids` instead of text (v4's `return_text` is taken and, as there,
    ignored), `truncation=True` to cut a source at the tokenizer's `model_max_length` or the model's
    `max_position_embeddings`, the shorter (this package's tokenizers set no limit), and any `generate()`
    argument (`num_beams`, `max_new_tokens`, `length_penalty`, ...) to the constructor or the call. Text is normalized as the
    training data is: a source by `normalize_text` (NFC, invisible characters removed, whitespace), a translation
    by `normalize_whitespace` (tabs and runs of spaces become one space, none around the text); "</s>" or "<pad>"
    in a sentence is text. A blank string (empty or only whitespace) translates to "" (no token ids), as a blank
    line does in `translate_sentences`: a model asked to translate nothing would otherwise make something up.
    """

    _load_processor = False
    _load_image_processor = False
    _load_video_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True
    _pipeline_calls_generate = True
    _default_generation_config = GenerationConfig(num_beams=4)
    return_name = "translation"
    unended_translations = 0
    """How many of the translations made stopped at the length limit before their end token (cut short, or a model
    repeating itself), counted as each is returned: `translate_sentences` names their sentences."""

    def _sanitize_parameters(
        self, truncation=None, return_tensors=None, clean_up_tokenization_spaces=None, return_text=None,
        src_lang=None, tgt_lang=None, **generate_kwargs
    ):
        # v4's TranslationPipeline took these too: return_text it ignored (return_tensors chooses), and src_lang and
        # tgt_lang chose the direction of multilingual tokenizers only; this model translates the one it learned
        if src_lang is not None or tgt_lang is not None:
            warnings.warn(
                f"src_lang={src_lang!r}, tgt_lang={tgt_lang!r}: this model translates the one direction it was trained "
                "in, whatever they say (they choose a direction only for multilingual models, as in transformers v4).",
                stacklevel=4,
            )
        preprocess_params = {} if truncation is None else {"truncation": truncation}
        postprocess_params = {}
        if return_tensors is not None:
            postprocess_params["return_tensors"] = return_tensors
        if clean_up_tokenization_spaces is not None:
            postprocess_params["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess_params, generate_kwargs, postprocess_params

    def __call__(self, inputs, **kwargs):
        """Translate one string or a list of strings; `batch_size=N` batches a list (padding each batch)."""
        column = type(inputs).__name__ == "Column" and type(inputs).__module__.startswith("datasets.")  # ds["de"]
        if isinstance(inputs, tuple) or column:
            inputs = list(inputs)
        if isinstance(inputs, list) and not inputs:
            return []
        result = super().__call__(inputs, **kwargs)
        if isinstance(inputs, list) and all(len(records) == 1 for records in result):
            return [records[0] for records in result]
        return result

    def preprocess(self, text, truncation=False):
        if not isinstance(text, str):
            raise TypeError(f"{type(self).__name__} translates strings, got {type(text).__name__}: {text!r}")
        text = normalize_text(text)  # as the training data was
        limit = None
        if truncation:  # at the tokenizer's limit or the model's positions, the shorter ("no limit" is 1e30)
            positions = getattr(self.model.config, "max_position_embeddings", None) or self.tokenizer.model_max_length
            limit = min(self.tokenizer.model_max_length, positions)
        encoded = self.tokenizer(text, truncation=truncation, max_length=limit, return_tensors="pt",
                                 split_special_tokens=reads_special_tokens_as_text(self.tokenizer))
        blank = torch.tensor([not text])
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "blank": blank}

    def _forward(self, model_inputs, **generate_kwargs):
        blank = model_inputs.pop("blank")
        generate_kwargs = self._prepare_generate_kwargs(generate_kwargs)
        output = self.model.generate(**model_inputs, **generate_kwargs)
        output_ids = output if isinstance(output, torch.Tensor) else output.sequences
        batch_size = model_inputs["input_ids"].shape[0]
        return {"output_ids": output_ids.reshape(batch_size, -1, output_ids.shape[-1]), "blank": blank}

    def postprocess(self, model_outputs, return_tensors=False, clean_up_tokenization_spaces=False):
        records = []
        end = self.model.generation_config.eos_token_id
        for output_ids in model_outputs["output_ids"][0]:
            if model_outputs["blank"][0]:
                output_ids = output_ids[:0]  # nothing to translate, nothing translated
            elif end is not None and not torch.isin(output_ids, torch.tensor(end).flatten()).any():
                self.unended_translations += 1
            if return_tensors:
                records.append({f"{self.return_name}_token_ids": output_ids})
            else:
                text = self.tokenizer.decode(
                    output_ids, skip_special_tokens=True, clean_up_tokenization_spaces=clean_up_tokenization_spaces
                )
                # a byte-level BPE hypothesis may begin with a space-prefixed token, or hold runs of spaces
                records.append({f"{self.return_name}_text": normalize_whitespace(text)})
        return records

    def save_pretrained(self, save_directory, **kwargs):
        """Save the model and tokenizer, then this pipeline as the folder's custom pipeline (`SAVED_TASK`)."""
        self.model.save_pretrained(save_directory, **kwargs)
        self.tokenizer.save_pretrained(save_directory, **kwargs)
        save_translation_pipeline(save_directory)


INVISIBLE_CHARACTERS = "\ufeff\u200b\u00ad\u2060"
"""Characters that show nothing and mean nothing in a sentence to translate, removed from sources: the byte-order
mark U+FEFF (at the start of each file joined with `cat`), the zero-width space U+200B, the soft hyphen U+00AD and
the word joiner U+2060 (from web pages and word processors). Byte-level BPE would read each as tokens of its own,
unseen or rare in training, and translate otherwise. The zero-width joiner and non-joiner (U+200D, U+200C) stay:
they shape emoji, Persian and Indic script."""

_WITHOUT_INVISIBLE = str.maketrans(dict.fromkeys(INVISIBLE_CHARACTERS))


def normalize_whitespace(text: str) -> str:
    """`text` without the whitespace around it, each run of spaces, tabs or other whitespace inside it made one
    space: the form of every target sentence this package trains on, and of every translation it writes, so that
    the model writes what the corpus writes (its Unicode form included), and references are scored as they are.
    A byte order mark (U+FEFF) goes too: inside a file it is the start of another one joined on (`cat`), no text."""
    return " ".join(text.replace("\ufeff", "").split())


def normalize_text(text: str) -> str:
    """A source sentence as this package tokenizes it (training, evaluation, this pipeline): in Unicode NFC (a
    decomposed "u" + combining diaeresis is the one character "ü", as most text has it, and not other byte-level
    tokens), without `INVISIBLE_CHARACTERS`, and with its whitespace normalized (`normalize_whitespace`). Defined
    here, in the code saved with every model, and used by the training data."""
    # the invisible characters first: one between a letter and its combining mark would keep them apart in NFC
    return normalize_whitespace(unicodedata.normalize("NFC", text.translate(_WITHOUT_INVISIBLE)))


def reads_special_tokens_as_text(tokenizer) -> bool:
    """Whether to tokenize with `split_special_tokens=True`, so that `"</s>"` or `"<pad>"` typed in a sentence is
    text: the tokenizer's own setting (this package's tokenizers save True), and True for one saved before this
    package set it too, unless it has special tokens of its own (language tags added with `add_special_tokens`),
    which only a tokenizer that reads special tokens in text can match. The training data is tokenized by the same
    rule (`data.tokenize_translation_datasets`)."""
    if getattr(tokenizer, "split_special_tokens", False):
        return True
    return not set(tokenizer.all_special_tokens) - {"<pad>", "<s>", "</s>", "<unk>"}


def translate_sentences(translator, sentences, *, batch_size=32, progress=False, cut_short=None, **call_kwargs):
    """Translate `sentences` with `translator` (a `TranslationPipeline`) in batches of similar length, longest
    first, and return one line per sentence in input order: blank sentences stay blank, line breaks in a
    translation become spaces. `progress` shows a tqdm bar on stderr, or is one to advance and leave open: a caller
    translating a file in parts shows one bar over the whole file. The bar advances a batch at a time, when the
    batch's first result comes out: the pipeline translates the whole batch for it, and the rest follow at once
    (advanced one by one, it read 1/200 after the first batch, and an ETA 32 times too long). `cut_short`, a list,
    gets the indices of the sentences whose translation stopped at the length limit before its end token."""
    from contextlib import nullcontext

    from tqdm.auto import tqdm

    todo = [i for i, sentence in enumerate(sentences) if sentence.strip()]
    if not todo:  # nothing to measure or translate (the tokenizer fails on no sentences)
        return [""] * len(sentences)
    lengths = translator.tokenizer([sentences[i] for i in todo], add_special_tokens=False, return_length=True)["length"]
    order = [i for _, i in sorted(zip(lengths, todo), key=lambda pair: -pair[0])]
    translations = [""] * len(sentences)
    own_bar = not hasattr(progress, "update")
    with tqdm(total=len(order), unit="sentence", disable=not progress) if own_bar else nullcontext(progress) as bar:
        outputs = translator((sentences[i] for i in order), batch_size=batch_size, **call_kwargs)
        step = batch_size or 1
        unended = getattr(translator, "unended_translations", 0)
        for done, (i, records) in enumerate(zip(order, outputs)):
            translations[i] = records[0]["translation_text"]  # one line: the pipeline leaves no line breaks
            if cut_short is not None and getattr(translator, "unended_translations", 0) > unended:
                cut_short.append(i)  # counted as its record was made, just now
                unended = translator.unended_translations
            if done % step == 0:
                bar.update(min(step, len(order) - done))
    return translations


def save_translation_pipeline(model_dir) -> Path:
    """Attach the translation pipeline to a saved model folder: copy this file into it and record it under
    `custom_pipelines` in its config.json, so that `pipeline(model=model_dir, trust_remote_code=True)` translates
    where this package is not installed. Idempotent; call it after every `save_pretrained` of the model (which
    keeps `custom_pipelines` in the config but does not copy this file). Returns the copied file's path."""
    model_dir = Path(model_dir)
    config_file = model_dir / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"No config.json in {model_dir}: save the model there (save_pretrained) first.")
    source = Path(__file__)
    target = model_dir / source.name
    if not target.exists() or not target.samefile(source):
        shutil.copyfile(source, target)
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["custom_pipelines"] = {**config.get("custom_pipelines", {}), **custom_pipeline_entry()}
    write_config_json(config_file, config)
    return target


def write_config_json(config_file: Path, config: dict) -> None:
    """Write a config.json in the layout of PreTrainedConfig.to_json_file, so that a later save_pretrained rewrites
    the file unchanged."""
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def custom_pipeline_entry() -> dict:
    """What a saved model's config.json records under `custom_pipelines` for this pipeline (task `SAVED_TASK`)."""
    impl = f"{Path(__file__).stem}.{TranslationPipeline.__name__}"
    return {SAVED_TASK: {"impl": impl, "pt": ["AutoModelForSeq2SeqLM"], "type": "text"}}


def register_translation_pipeline() -> None:
    """Register `TranslationPipeline` as `TASK`; done on import, a no-op when the task is registered already (by
    the package, or by a copy of this file loaded as remote code)."""
    if TASK not in PIPELINE_REGISTRY.supported_tasks:
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
        )


register_translation_pipeline()
