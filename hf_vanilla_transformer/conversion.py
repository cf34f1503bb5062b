"""Conversion between MarianMTModel and VanillaTransformerForConditionalGeneration.

MarianMTModel is the same network laid out differently: separate Q, K, V projections where we fuse them, and
sinusoidal encodings with all sines in the first half of the vector and all cosines in the second, where the paper
(and this package) interleaves them (sin on even, cos on odd dimensions, section 3.5). Every other operation on the
residual stream is permutation-equivariant (LayerNorm normalises over all dimensions; linear maps can have their
input columns or output rows permuted), so permuting the residual-stream dimensions of every weight turns Marian's
encodings into ours and the converted model computes the same function.
"""

import logging
import os
from pathlib import Path

import torch
from transformers import GenerationConfig, MarianMTModel

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .errors import InputError
from .generation import PAPER_DECODING
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration


logger = logging.getLogger(__name__)


def marian_to_paper_permutation(d_model: int) -> torch.Tensor:
    """Index `perm` with ours[k] = marian[perm[k]]: our dimension 2i is Marian's i, 2i+1 is Marian's d/2 + i."""
    half = torch.arange(d_model // 2)
    return torch.stack([half, half + d_model // 2], dim=1).flatten()


def _config_from_marian(marian_config, output_bias: bool = False) -> VanillaTransformerConfig:
    if not marian_config.share_encoder_decoder_embeddings:
        raise ValueError(
            "This Marian model has separate source and target vocabularies (share_encoder_decoder_embeddings=False); "
            "the Transformer of the paper shares one vocabulary, so it cannot be converted."
        )
    if marian_config.d_model % 2:
        raise ValueError(f"d_model must be even to convert sinusoidal encodings, got {marian_config.d_model}.")
    fields = (
        "vocab_size d_model encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads "
        "encoder_ffn_dim decoder_ffn_dim dropout attention_dropout activation_dropout activation_function "
        "max_position_embeddings scale_embedding pad_token_id bos_token_id eos_token_id decoder_start_token_id "
        "tie_word_embeddings"
    ).split()
    return VanillaTransformerConfig(
        **{name: getattr(marian_config, name) for name in fields}, normalize_before=False, output_bias=output_bias
    )


def _converted_state_dict(marian: MarianMTModel, config: VanillaTransformerConfig) -> dict[str, torch.Tensor]:
    """Marian's weights renamed, Q/K/V fused, and permuted on every residual-stream dimension."""
    perm = marian_to_paper_permutation(config.d_model)
    source = {name: tensor.detach() for name, tensor in marian.state_dict().items()}

    def reads(name):  # a linear map reading the residual stream: permute its input columns
        return source[name][:, perm]

    def writes(name):  # a linear map or LayerNorm writing/scaling the residual stream: permute its outputs
        return source[name][perm]

    def fused(prefix, parts, suffix):
        tensors = [source[f"{prefix}.{part}_proj.{suffix}"] for part in parts]
        return torch.cat([t[:, perm] if suffix == "weight" else t for t in tensors])

    state = {"model.shared.weight": reads("model.encoder.embed_tokens.weight")}
    if not config.tie_word_embeddings:
        state["lm_head.weight"] = reads("lm_head.weight")
    if config.output_bias:
        state["lm_head.bias"] = source["final_logits_bias"].reshape(-1)
    for stack, layers in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        for i in range(layers):
            p = f"model.{stack}.layers.{i}"
            attentions = {"self_attn": ("qkv", "qkv")}
            if stack == "decoder":
                attentions["encoder_attn"] = ("kv", "kv")
            for attn, (name, parts) in attentions.items():
                for suffix in ("weight", "bias"):
                    state[f"{p}.{attn}.{name}_proj.{suffix}"] = fused(f"{p}.{attn}", parts, suffix)
                if attn == "encoder_attn":
                    state[f"{p}.{attn}.q_proj.weight"] = reads(f"{p}.{attn}.q_proj.weight")
                    state[f"{p}.{attn}.q_proj.bias"] = source[f"{p}.{attn}.q_proj.bias"]
                state[f"{p}.{attn}.out_proj.weight"] = writes(f"{p}.{attn}.out_proj.weight")
                state[f"{p}.{attn}.out_proj.bias"] = writes(f"{p}.{attn}.out_proj.bias")
            state[f"{p}.ffn.fc1.weight"] = reads(f"{p}.fc1.weight")
            state[f"{p}.ffn.fc1.bias"] = source[f"{p}.fc1.bias"]
            state[f"{p}.ffn.fc2.weight"] = writes(f"{p}.fc2.weight")
            state[f"{p}.ffn.fc2.bias"] = writes(f"{p}.fc2.bias")
            norms = ["self_attn_layer_norm", "final_layer_norm"]
            if stack == "decoder":
                norms.append("encoder_attn_layer_norm")
            for norm in norms:
                for suffix in ("weight", "bias"):
                    state[f"{p}.{norm}.{suffix}"] = writes(f"{p}.{norm}.{suffix}")
    return state


@torch.no_grad()
def from_marian(marian: MarianMTModel) -> VanillaTransformerForConditionalGeneration:
    """A VanillaTransformerForConditionalGeneration computing the same function as `marian` (post-LN, any
    activation), with Marian's generation config. A non-zero `final_logits_bias` becomes the output projection's
    bias (`output_bias=True`). The config records where the model came from (`converted_from`: the Hub id, or a
    local folder's name), which the model card names. Layerdrop, a training-time option, is not carried over."""
    if not isinstance(marian, MarianMTModel):
        raise TypeError(f"from_marian expects a transformers.MarianMTModel, got {type(marian).__name__}.")
    # Marian's output layer has a trained bias (the opus-mt models' is non-zero); the paper's has none, so the
    # converted model takes one only where it is needed to compute the same function
    config = _config_from_marian(marian.config, output_bias=bool(marian.final_logits_bias.abs().max() > 0))
    encoder_embedding, decoder_embedding = marian.model.encoder.embed_tokens, marian.model.decoder.embed_tokens
    if not torch.equal(encoder_embedding.weight, decoder_embedding.weight):
        raise ValueError(
            "This Marian model's encoder and decoder embeddings differ; the paper's model shares one embedding "
            "matrix between them, so it cannot be converted."
        )
    model = VanillaTransformerForConditionalGeneration(config).to(marian.dtype)
    missing, unexpected = model.load_state_dict(_converted_state_dict(marian, config), strict=False)
    tied = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if config.tie_word_embeddings:
        tied.add("lm_head.weight")
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"Conversion bug: missing {sorted(set(missing) - tied)}, unexpected {unexpected}.")
    model.tie_weights()
    if source := marian.name_or_path:  # for the model card; a local folder by its name alone (the card is published)
        model.config.converted_from = f"./{Path(source).resolve().name}" if os.path.exists(source) else source
    if marian.generation_config is not None:
        model.generation_config = GenerationConfig.from_dict(marian.generation_config.to_dict())
        # what Marian leaves unset decodes with transformers' defaults; said explicitly, so that a saved and reloaded
        # model does not take the paper's beam search for them (as this package's models do) and decodes as Marian.
        # Not the length: without a max_length (opus-mt models set 512) the model decodes up to the source length +
        # 50 new tokens, where Marian would stop at transformers' 20 tokens in all, mid-sentence
        defaults = GenerationConfig._get_default_generation_params()
        for name in PAPER_DECODING:
            if getattr(model.generation_config, name, None) is None:
                setattr(model.generation_config, name, defaults[name])
    return model.to(marian.device).train(marian.training)


def converted_marian(marian: MarianMTModel, name: str) -> VanillaTransformerForConditionalGeneration:
    """`from_marian(marian)` for the scripts, which take a Marian folder where they take this package's model: said
    in a warning naming `name`, and an InputError (one message at the command line) where the paper's model cannot
    take it over (separate vocabularies)."""
    try:
        model = from_marian(marian)
    except ValueError as error:
        raise InputError(f"{name} is a MarianMTModel that the paper's model cannot take over: {error}") from error
    logger.warning("%s is a MarianMTModel: converted with from_marian (the same network and function).", name)
    return model

