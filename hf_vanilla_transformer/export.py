"""Export to CTranslate2, a fast C++ inference engine for Transformer models (CPU and GPU, int8 quantization).

The model spec is written directly with `ctranslate2.specs`, so no converter guesses the layout: our fused Q/K/V
projection is CTranslate2's fused self-attention projection, our fused K/V its fused cross-attention memory
projection, and the sinusoidal encodings are stored as an explicit position table, because CTranslate2's own
encodings put all sines before all cosines where the paper (and this package) interleaves them [3.5].

`ctranslate2_options` gives the `translate_batch` options under which CTranslate2's beam search returns what
`generate()` returns (see there). One difference remains: a source that is only the end token `</s>` is an empty
sentence to CTranslate2, which returns an empty translation without running the model. A MarianMTModel (an opus-mt
model) is exported converted with `from_marian`; of its generation config CTranslate2 follows `bad_words_ids` (never
`<pad>`, as `suppress_sequences`), but not `forced_eos_token_id` (`</s>` at the length limit) or
`early_stopping=False`, which `CTranslate2Translator` warns about.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .conversion import converted_marian
from .errors import InputError, shown_list
from .hub import loading_from
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration, sinusoidal_encoding
from .pipeline_translation import reads_special_tokens_as_text
from .tokenization import TOKENIZER_FILES, check_tokenizer_fits_model, load_tokenizer

logger = logging.getLogger(__name__)


# transformers activation name -> ctranslate2 Activation member name
_ACTIVATIONS = {
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_python": "GELU",
    "gelu_new": "GELUTanh",
    "gelu_fast": "GELUTanh",
    "gelu_pytorch_tanh": "GELUTanh",
    "quick_gelu": "GELUSigmoid",
    "silu": "SWISH",
    "swish": "SWISH",
}


CTRANSLATE2_MISSING = ("Exporting needs CTranslate2: install it (`pip install ctranslate2`, or the package's extra: "
                       '`pip install "hf-vanilla-transformer[export]"`).')
"""What to do where ctranslate2, an optional dependency, is not installed (the library's ImportError, the export
script's one line)."""


def _import_ctranslate2():
    try:
        import ctranslate2
    except ImportError as error:  # an optional dependency
        raise ImportError(CTRANSLATE2_MISSING) from error
    return ctranslate2


def _load(model_or_dir, vocabulary_given: bool = False):
    """(model, tokenizer or None) from a model or a directory written by `save_pretrained`. A MarianMTModel (an
    opus-mt model, the same network) is converted with `from_marian`; the tokenizer of its folder is its own
    (MarianTokenizer), saved with the export as it is."""
    from transformers import MarianMTModel

    if isinstance(model_or_dir, (VanillaTransformerForConditionalGeneration, MarianMTModel)):
        model = model_or_dir if isinstance(model_or_dir, VanillaTransformerForConditionalGeneration) else \
            converted_marian(model_or_dir, "The model")
        return model, None if vocabulary_given else _tokenizer_of_the_folder(model_or_dir)
    if isinstance(model_or_dir, (str, os.PathLike)):
        from transformers import AutoTokenizer, PreTrainedConfig

        with loading_from(model_or_dir, "a model's config"):  # a damaged config.json: one message
            model_type = PreTrainedConfig.get_config_dict(model_or_dir)[0].get("model_type")
        if model_type not in ("marian", VanillaTransformerConfig.model_type):
            raise InputError(
                f"{model_or_dir} holds {f'a {model_type!r} model' if model_type else 'a model of no model_type'} "
                f"(its config.json's model_type), not this package's {VanillaTransformerConfig.model_type!r} or a "
                "MarianMTModel, which it converts: export it with CTranslate2's own converter "
                f"(`ct2-transformers-converter --model {model_or_dir} --output_dir ...`)."
            )
        tokenizer, local = None, os.path.isdir(model_or_dir)
        if any(Path(model_or_dir, name).is_file() for name in TOKENIZER_FILES) if local else model_type == "marian":
            # the folder's tokenizer, or an opus-mt repository's MarianTokenizer (sentencepiece): a damaged or
            # missing file, or a missing library, is one message, not an export with placeholder tokens
            tokenizer = load_tokenizer(model_or_dir)
        elif not local:  # a Hub repository may hold no tokenizer
            try:
                tokenizer = AutoTokenizer.from_pretrained(model_or_dir)
            except (OSError, ValueError, TypeError):
                pass
        if model_type == "marian":
            model = converted_marian(MarianMTModel.from_pretrained(model_or_dir), str(model_or_dir))
        else:
            model = VanillaTransformerForConditionalGeneration.from_pretrained(model_or_dir)
        if tokenizer is not None:
            check_tokenizer_fits_model(tokenizer, model.config.vocab_size, model_or_dir)
        return model, tokenizer
    raise TypeError(
        "export_ctranslate2 expects a VanillaTransformerForConditionalGeneration, a MarianMTModel or a directory "
        f"either was saved to, got {type(model_or_dir).__name__}."
    )


def _tokenizer_of_the_folder(model):
    """The tokenizer saved beside a model object loaded from a folder (`model.name_or_path`), if it fits its
    vocabulary; else None, with a warning: the export's tokens are then placeholders, which CTranslate2 cannot
    encode text to (a model object was exported so without a word, its folder's tokenizer left out)."""
    folder = getattr(model, "name_or_path", "") or ""
    if folder and os.path.isdir(folder) and any(Path(folder, name).is_file() for name in TOKENIZER_FILES):
        try:
            tokenizer = load_tokenizer(folder)
            check_tokenizer_fits_model(tokenizer, model.config.vocab_size, folder)
            return tokenizer
        except (OSError, ValueError) as error:
            logger.warning("The tokenizer in %s is not exported with the model: %s", folder, error)
    logger.warning(
        "export_ctranslate2 was given a model without its tokenizer: the export's tokens are placeholders "
        "(<id_N>), which CTranslate2 cannot encode text to. Export the model's folder, or pass vocabulary=[token "
        "strings by id] (and save the tokenizer beside the export)."
    )
    return None


def placeholder_vocabulary(config) -> list[str]:
    """Token strings for a model without a tokenizer: `<pad>`, `<s>`, `</s>` at the config's special ids and
    `<id_N>` elsewhere, so that CTranslate2 token i is our token id i."""
    tokens = [f"<id_{i}>" for i in range(config.vocab_size)]
    eos = config.eos_token_id[0] if isinstance(config.eos_token_id, list) else config.eos_token_id
    for token_id, name in ((config.pad_token_id, "<pad>"), (config.bos_token_id, "<s>"), (eos, "</s>")):
        if token_id is not None:
            tokens[token_id] = name
    return tokens


def _vocabulary(config, tokenizer, vocabulary: Sequence[str] | None) -> list[str]:
    if vocabulary is None and tokenizer is not None:
        by_id = {index: token for token, index in tokenizer.get_vocab().items()}  # within it: `_load` checked
        vocabulary = [by_id.get(i, f"<id_{i}>") for i in range(config.vocab_size)]
    if vocabulary is None:
        return placeholder_vocabulary(config)
    vocabulary = list(vocabulary)
    if len(vocabulary) != config.vocab_size or len(set(vocabulary)) != len(vocabulary):
        raise ValueError(
            f"`vocabulary` must hold {config.vocab_size} distinct tokens (config.vocab_size), got {len(vocabulary)} "
            f"with {len(set(vocabulary))} distinct."
        )
    return vocabulary


def _copy(tensor: torch.Tensor) -> torch.Tensor:
    """A float32 copy: quantizing the spec works in place, and must not touch the model's weights."""
    return tensor.detach().to(torch.float32, copy=True).contiguous()


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None = None):
    spec.weight = _copy(weight)
    if bias is not None:
        spec.bias = _copy(bias)


def _layer_norm(spec, norm: torch.nn.LayerNorm):
    spec.gamma = _copy(norm.weight)
    spec.beta = _copy(norm.bias)


def _attention(spec, attention):
    """Self-attention: one fused (3d, d) projection; cross-attention: query, then fused (2d, d) key/value."""
    if attention.is_cross_attention:
        _linear(spec.linear[0], attention.q_proj.weight, attention.q_proj.bias)
        _linear(spec.linear[1], attention.kv_proj.weight, attention.kv_proj.bias)
    else:
        _linear(spec.linear[0], attention.qkv_proj.weight, attention.qkv_proj.bias)
    _linear(spec.linear[-1], attention.out_proj.weight, attention.out_proj.bias)


def _stack(spec, stack, embedding: torch.Tensor, positions: int):
    spec.scale_embeddings = float(stack.embed_scale)
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = embedding
    spec.position_encodings.encodings = sinusoidal_encoding(torch.arange(positions), stack.config.d_model)
    if stack.layer_norm is not None:
        _layer_norm(spec.layer_norm, stack.layer_norm)
    for layer_spec, layer in zip(spec.layer, stack.layers):
        _attention(layer_spec.self_attention, layer.self_attn)
        _layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
        if hasattr(layer, "encoder_attn"):
            _attention(layer_spec.attention, layer.encoder_attn)
            _layer_norm(layer_spec.attention.layer_norm, layer.encoder_attn_layer_norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.fc1.weight, layer.ffn.fc1.bias)
        _linear(layer_spec.ffn.linear_1, layer.ffn.fc2.weight, layer.ffn.fc2.bias)
        _layer_norm(layer_spec.ffn.layer_norm, layer.final_layer_norm)


def ctranslate2_spec(model: VanillaTransformerForConditionalGeneration, vocabulary: Sequence[str], max_positions=None):
    """The `ctranslate2.specs.TransformerSpec` of `model` with `vocabulary` (token i = id i) registered."""
    _import_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    config = model.config
    if config.activation_function not in _ACTIVATIONS:
        raise ValueError(
            f"CTranslate2 has no `{config.activation_function}` activation; exportable: {sorted(_ACTIVATIONS)}."
        )
    if config.encoder_attention_heads != config.decoder_attention_heads:
        raise ValueError("CTranslate2's TransformerSpec needs the same head count in the encoder and decoder.")
    activation = getattr(common_spec.Activation, _ACTIVATIONS[config.activation_function])
    spec = transformer_spec.TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers),
        config.encoder_attention_heads,
        pre_norm=config.normalize_before,
        activation=activation,
    )
    positions = max_positions or config.max_position_embeddings
    embedding = _copy(model.get_input_embeddings().weight)
    _stack(spec.encoder, model.model.encoder, embedding, positions)
    _stack(spec.decoder, model.model.decoder, embedding, positions)
    projection = model.get_output_embeddings()
    _linear(spec.decoder.projection, projection.weight, projection.bias)  # a bias only where `output_bias` is set

    vocabulary = list(vocabulary)
    eos = config.eos_token_id[0] if isinstance(config.eos_token_id, list) else config.eos_token_id
    spec.config.bos_token = vocabulary[config.bos_token_id if config.bos_token_id is not None else eos]
    spec.config.eos_token = vocabulary[eos]
    spec.config.decoder_start_token = vocabulary[config.decoder_start_token_id]
    spec.config.unk_token = "<unk>" if "<unk>" in vocabulary else vocabulary[config.pad_token_id or 0]
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    spec.register_source_vocabulary(vocabulary)
    spec.register_target_vocabulary(vocabulary)
    return spec


def _is_export_file(name: str) -> bool:
    """Whether a file name is one that `export_ctranslate2` (or CTranslate2's converter) writes."""
    return name in ("model.bin", "config.json", "generation.json", "tokenizer") or (
        name.endswith(("_vocabulary.json", "_vocabulary.txt"))
    )


class ExportTargetExists(FileExistsError):
    """The export's folder holds something and `force` is False (the script's `--no_overwrite`)."""


def _check_export_target(out_dir: Path, force: bool) -> bool:
    """Whether an earlier export in `out_dir` must be deleted first (only with `force`, else ExportTargetExists); a
    FileExistsError for anything else there (a file, a model folder, a folder of runs), which is never deleted.
    False where `out_dir` is missing or empty."""
    if not out_dir.exists():
        return False
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} is a file: give a folder for the CTranslate2 model.")
    entries = sorted(entry.name for entry in out_dir.iterdir())
    if not entries:
        return False
    if not force:
        raise ExportTargetExists(f"{out_dir} exists; pass force=True to overwrite it.")
    others = [name for name in entries if not _is_export_file(name)]
    if others or "model.bin" not in entries:
        shown = shown_list(others, 4) if others else "no model.bin"
        raise FileExistsError(
            f"{out_dir} is not a CTranslate2 export ({shown}), so it is not overwritten: give a new or empty folder "
            "for the export."
        )
    return True


def export_ctranslate2(
    model_or_dir,
    out_dir: str | os.PathLike,
    quantization: str | None = None,
    vocabulary: Sequence[str] | None = None,
    max_positions: int | None = None,
    force: bool = True,
) -> Path:
    """Write `model_or_dir` (a model, or a directory from `save_pretrained`) as a CTranslate2 model to `out_dir`. A
    MarianMTModel, or its folder, is converted with `from_marian` first (and said so); another kind of model is an
    InputError.

    quantization: None (float32 weights) or a CTranslate2 weight type: "int8", "int8_float32", "int16",
        "float16", "bfloat16", "int8_float16", "int8_bfloat16". A model can also be quantized when loaded
        (`ctranslate2.Translator(out_dir, compute_type="int8")`).
    vocabulary: token strings by id; default: the tokenizer saved with the model (for a model object, in the folder
        it was loaded from), else `placeholder_vocabulary`, with a warning.
    max_positions: length of the stored position table, the longest source and translation CTranslate2 can
        handle (default `config.max_position_embeddings`).
    Also writes `generation.json` with the model's beam size, length penalty, limits and the tokens it never
    generates (`bad_words_ids`), which `CTranslate2Translator` reads.
    """
    out_dir = Path(out_dir)
    replace = _check_export_target(out_dir, force)  # before any work
    model, tokenizer = _load(model_or_dir, vocabulary_given=vocabulary is not None)
    tokens = _vocabulary(model.config, tokenizer, vocabulary)
    spec = ctranslate2_spec(model, tokens, max_positions)
    spec.validate()
    spec.optimize(quantization=quantization)
    if replace:
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(out_dir))
    generation = model.generation_config
    settings = {
        "num_beams": generation.num_beams or 1,
        "length_penalty": generation.length_penalty if generation.length_penalty is not None else 1.0,
        "early_stopping": generation.early_stopping,
        # where set (a converted Marian model's 512), generate()'s limit instead of source length + 50
        "max_length": generation.max_length,
        "max_new_tokens": generation.max_new_tokens,
        "max_position_embeddings": max_positions or model.config.max_position_embeddings,
        # a converted Marian model's: never <pad> ([[pad]], followed as CTranslate2's suppress_sequences, which
        # renormalizes as renormalize_logits does), and </s> forced at the length limit, which CTranslate2 cannot do
        # (CTranslate2Translator warns about what it cannot follow)
        "bad_words_ids": generation.bad_words_ids,
        "renormalize_logits": generation.renormalize_logits,
        "forced_eos_token_id": generation.forced_eos_token_id,
    }
    (out_dir / "generation.json").write_text(json.dumps(settings, indent=2) + "\n")
    if tokenizer is not None:
        _save_tokenizer_as_the_pipeline_reads(tokenizer, out_dir / "tokenizer")
    return out_dir


def _save_tokenizer_as_the_pipeline_reads(tokenizer, folder: str | os.PathLike) -> None:
    """Save `tokenizer` to `folder` so that it reads text as the translation pipeline does: where
    `reads_special_tokens_as_text` says so (this package's tokenizers, one saved before they recorded it, a
    MarianTokenizer), with `split_special_tokens=True` in its tokenizer_config.json, so that "</s>" typed in a
    source is text to `AutoTokenizer.from_pretrained(folder)` too, and not the end token, which cut the
    CTranslate2 model's source there."""
    if reads_special_tokens_as_text(tokenizer) and not tokenizer.split_special_tokens:
        tokenizer.split_special_tokens = True
        tokenizer.init_kwargs["split_special_tokens"] = True  # what save_pretrained writes
    tokenizer.save_pretrained(folder)


def ctranslate2_options(
    num_beams: int = 4, length_penalty: float = 0.6, max_new_tokens: int = 256, early_stopping=True, **extra
) -> dict:
    """`Translator.translate_batch` options under which CTranslate2 returns what `generate(num_beams=...,
    length_penalty=..., max_new_tokens=..., early_stopping=True)` returns (fp32, same inputs). generate()'s own limit,
    without `max_new_tokens`, is the padded source length + 50 tokens: pass that as `max_new_tokens` (the default,
    256, is an absolute limit of CTranslate2's), as `CTranslate2Translator` does.

    - Both rank a finished hypothesis by log-probability / length**length_penalty; CTranslate2 counts the end token
      in the length only when it returns it (`return_end_token=True`), as generate() always counts it.
    - CTranslate2 forbids the end token at the first step by default (`min_decoding_length=1`, which also
      renormalises that step's probabilities); generate() does not, hence `min_decoding_length=0`.
    - CTranslate2 stops a sentence once beam_size * patience hypotheses finished: `early_stopping=True` with
      patience 1. generate()'s other `early_stopping` values have no CTranslate2 equivalent.
    - With no length (and coverage) penalty CTranslate2 stops as soon as its best beam finishes, where generate()
      still waits for `num_beams` finished hypotheses; a negligible penalty (1e-9) keeps CTranslate2 waiting.
    """
    if early_stopping is not True and num_beams > 1:
        raise ValueError("CTranslate2's beam search stops like generate(early_stopping=True) only.")
    if num_beams == 1:
        length_penalty = 0.0  # one hypothesis: nothing to rank
    elif length_penalty == 0:
        length_penalty = 1e-9
    return dict(
        beam_size=num_beams,
        length_penalty=length_penalty,
        patience=1.0,
        max_decoding_length=max_new_tokens,
        min_decoding_length=0,
        return_end_token=True,
        **extra,
    )


def _vocabulary_of(model_dir: Path) -> list[str]:
    for name in ("shared_vocabulary.json", "target_vocabulary.json"):
        if (model_dir / name).exists():
            return json.loads((model_dir / name).read_text())
    for name in ("shared_vocabulary.txt", "target_vocabulary.txt"):
        if (model_dir / name).exists():
            return (model_dir / name).read_text(encoding="utf-8").split("\n")[:-1]
    raise FileNotFoundError(f"No CTranslate2 vocabulary in {model_dir}.")


class CTranslate2Translator:
    """A CTranslate2 translator working on token ids, as `generate()` does: `translate(input_ids, attention_mask)`
    returns the translations' ids, one unpadded list a sentence (without the start token; with the end token). Each
    source is the ids its `attention_mask` keeps, so a batch may be padded on the right or on the left. The exported
    generation config's `bad_words_ids` (a converted Marian model's `<pad>`) are never generated; what of it
    CTranslate2 cannot follow is warned about when the translator is made."""

    def __init__(self, model_dir, compute_type: str = "default", intra_threads: int = 0, **kwargs):
        ctranslate2 = _import_ctranslate2()
        self.model_dir = Path(model_dir)
        self.translator = ctranslate2.Translator(
            str(self.model_dir), device="cpu", compute_type=compute_type, intra_threads=intra_threads, **kwargs
        )
        self.tokens = _vocabulary_of(self.model_dir)
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        settings = self.model_dir / "generation.json"
        self.settings = json.loads(settings.read_text()) if settings.exists() else {}
        if differences := self._differences():
            warnings.warn(
                f"{model_dir}'s generation config decodes with settings that CTranslate2 cannot follow (a converted "
                f"Marian model's), so a translation may differ from generate()'s: {'; '.join(differences)}.",
                stacklevel=2,
            )

    def _differences(self) -> list[str]:
        """What generate() does under the exported generation config and CTranslate2's beam search cannot."""
        differences = []
        beams = self.settings.get("num_beams", 4) > 1
        if self.settings.get("early_stopping") is False and beams:
            differences.append(
                "early_stopping=False (CTranslate2's beam search stops as generate(early_stopping=True) does, where "
                "a longer hypothesis could still win)"
            )
        if self.settings.get("bad_words_ids") and not self.settings.get("renormalize_logits") and beams:
            differences.append(
                "bad_words_ids without renormalize_logits (generate() scores hypotheses with the banned tokens' "
                "share of the probability left out; CTranslate2 renormalizes over the tokens allowed)"
            )
        forced_eos = self.settings.get("forced_eos_token_id")
        if forced_eos is not None:
            token = self.tokens[forced_eos[0] if isinstance(forced_eos, list) else forced_eos]
            differences.append(
                f"forced_eos_token_id={forced_eos} (generate() ends a translation that reaches the length limit with "
                f"{token}; CTranslate2 cuts it there, without it)"
            )
        return differences

    def translate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        num_beams: int | None = None,
        length_penalty: float | None = None,
        max_new_tokens: int | None = None,
        max_batch_size: int = 0,
        **options,
    ) -> list[list[int]]:
        num_beams = num_beams or self.settings.get("num_beams", 4)
        if length_penalty is None:
            length_penalty = self.settings.get("length_penalty", 1.0)
        rows = input_ids.tolist()
        masks = [[1] * len(ids) for ids in rows] if attention_mask is None else attention_mask.tolist()
        # the tokens the mask keeps, wherever the padding is (right, or left as `padding_side="left"` puts it)
        source = [[self.tokens[i] for i, keep in zip(ids, mask) if keep] for ids, mask in zip(rows, masks)]
        if max_new_tokens is None:  # the exported generation config's limit, as generate() takes it
            max_new_tokens = self.settings.get("max_new_tokens")
        if max_new_tokens is None and self.settings.get("max_length") is not None:
            max_new_tokens = self.settings["max_length"] - 1  # generate()'s max_length counts the start token
        if max_new_tokens is None:  # generate()'s default: source length + 50
            max_new_tokens = input_ids.shape[1] + 50
        positions = self.settings.get("max_position_embeddings")  # the stored table's length (--max_positions)
        if positions and max(map(len, source), default=0) > positions:
            raise ValueError(
                f"A source of {max(map(len, source))} tokens is longer than the export's position table ({positions} "
                "positions): export the model again with a larger --max_positions (max_positions=...)."
            )
        if positions and max_new_tokens >= positions:  # CTranslate2 would stop there with an error
            max_new_tokens = positions - 1
        if self.settings.get("bad_words_ids") and "suppress_sequences" not in options:  # Marian's [[pad]]
            options["suppress_sequences"] = [[self.tokens[i] for i in ids] for ids in self.settings["bad_words_ids"]]
        results = self.translator.translate_batch(
            source,
            max_batch_size=max_batch_size,
            **ctranslate2_options(num_beams, length_penalty, max_new_tokens, **options),
        )
        return [[self.ids[token] for token in result.hypotheses[0]] for result in results]


__all__ = ["CTranslate2Translator", "ctranslate2_options", "export_ctranslate2"]
