"""The original Transformer (Vaswani et al., 2017, "Attention Is All You Need") as a transformers model.

Section numbers in docstrings refer to the paper. Data flow:
source ids -> shared embedding * sqrt(d_model) [3.4] + sinusoidal encoding [3.5] -> dropout -> N encoder layers
(self-attention, feed-forward; each in a residual block) = memory. Target ids shifted right -> the same embedding and
encoding at the cached offset -> N decoder layers (masked self-attention, cross-attention over memory,
feed-forward) -> pre-softmax projection tied to the embedding -> logits.
"""

import copy
import inspect
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from safetensors import SafetensorError  # a dependency of transformers itself, so remote code has it too
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.generation.stopping_criteria import MaxLengthCriteria
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.processing_utils import Unpack
from transformers.pytorch_utils import id_tensor_storage
from transformers.utils import TransformersKwargs, can_return_tuple, is_torchdynamo_compiling
from transformers.utils.deprecation import deprecate_kwarg
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .chunked_loss import cross_entropy_sum
from .configuration_vanilla_transformer import VanillaTransformerConfig
from .packed_linear import PrepackedLinear, forget_edited_packed_weights

# transformers 5.24 renamed the KV cache `past_key_values` to `cache`: in the forward arguments generate() passes, in
# the output classes and in the mask helpers. The model speaks the installed release's name and takes either: the old
# one is deprecated since 5.24 (transformers' own decorator, as its models use it, which warns), and before it is the
# name generate() passes (the decorator renames it without a word: it is "deprecated" since a release long past).
CACHE_NAME = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"
takes_past_key_values = deprecate_kwarg(
    "past_key_values", "6.0.0" if CACHE_NAME == "cache" else "5.0.0", new_name="cache"
)


def on_host(tensor: torch.Tensor) -> bool:
    """Whether reading the tensor's values is free. On an accelerator it waits for the device (a host-device sync,
    which stalls training and breaks CUDA graphs): there the checks below run on the device instead, and the
    training script checks its data where it makes it."""
    return tensor.device.type == "cpu"


def may_skip_mask(padding_mask: torch.Tensor | None) -> bool:
    """transformers drops a padding mask without padding (so SDPA can pick its fastest kernel) after reading all of
    it; on an accelerator that read is a sync, so there the mask is kept."""
    return padding_mask is None or on_host(padding_mask)


def forget_weights_edited_before_new_input(
    module: nn.Module, inputs: torch.Tensor | None, cache: Cache | None = None
) -> None:
    """`forget_edited_packed_weights` for a part of the model that starts on new input: the encoder at every call,
    the decoder and the output projection at the first position of a decoding (an empty cache, or none: every
    forward that scores whole targets). So `generate()` and a hand-written decoding loop on a given encoder output
    see a weight edited through `.data` since the last call. Skipped where nothing is packed (training, torch.compile,
    off the CPU), so that a static cache's length is never read from an accelerator."""
    if module.training or is_torchdynamo_compiling() or inputs is None or not on_host(inputs):
        return
    if cache is None or int(cache.get_seq_length()) == 0:
        forget_edited_packed_weights(module)


def check_is_tensor(name: str, value) -> None:
    """Inputs are torch tensors: a ValueError saying how to get them (the tokenizer's lists, or numpy arrays, fail
    deep inside torch or transformers otherwise)."""
    if not isinstance(value, torch.Tensor):
        module = type(value).__module__.split(".")[0]
        kind = type(value).__name__ if module == "builtins" else f"{module}.{type(value).__name__}"
        raise ValueError(
            f"`{name}` must be a torch tensor, got a {kind}: call the tokenizer with return_tensors=\"pt\", or "
            "convert it with torch.as_tensor."
        )


def check_ids_shape(name: str, ids) -> None:
    """Ids are a tensor of integers of shape (batch, length > 0)."""
    check_is_tensor(name, ids)
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer token ids (torch.long), got dtype {ids.dtype}.")
    if ids.dim() != 2:
        hint = ": add the batch dimension (`ids[None]`), or tokenize a list of sentences" if ids.dim() == 1 else ""
        raise ValueError(f"`{name}` must have shape (batch, length), got {tuple(ids.shape)}{hint}.")
    if ids.shape[1] == 0:
        raise ValueError(f"`{name}` is empty (length 0): every sequence needs at least one token.")
    if ids.shape[0] == 0:
        raise ValueError(f"`{name}` is an empty batch (0 sequences): give at least one sentence.")


def check_token_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Token ids are integers in [0, vocab_size) of shape (batch, length > 0): a ValueError saying so, not an
    IndexError deep inside torch. One min/max reduction; skipped under torch.compile."""
    check_ids_shape(name, ids)
    if ids.numel() == 0 or is_torchdynamo_compiling():
        return
    low, high = torch.aminmax(ids)
    outside = (low < 0) | (high >= vocab_size)
    if not on_host(ids):
        torch._assert_async(~outside, f"`{name}` holds ids outside the vocabulary [0, {vocab_size - 1}]")
    elif outside:
        raise ValueError(
            f"`{name}` holds ids outside the vocabulary [0, {vocab_size - 1}] (min {low.item()}, max {high.item()}): "
            "encode the text with this model's tokenizer, or check `config.vocab_size`."
        )


def check_labels(labels: torch.Tensor, vocab_size: int) -> None:
    """Labels are token ids in [0, vocab_size) or -100 (left out of the loss), of shape (batch, length)."""
    check_is_tensor("labels", labels)
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"`labels` must hold integer token ids (torch.long), got dtype {labels.dtype}.")
    if labels.dim() != 2:
        raise ValueError(f"`labels` must have shape (batch, length), got {tuple(labels.shape)}.")
    if is_torchdynamo_compiling():
        return
    valid = (labels == -100) | ((labels >= 0) & (labels < vocab_size))
    if not on_host(labels):
        torch._assert_async(valid.all(), f"`labels` must be token ids in [0, {vocab_size - 1}] or -100")
    elif not valid.all():
        bad = labels[~valid].unique()
        hint = (  # a tokenizer larger than the model's vocabulary: a first model built by hand
            f"ids of {vocab_size} and above come from a tokenizer larger than the model's vocabulary: build the "
            "model with vocab_size=len(tokenizer), or encode the targets with this model's tokenizer"
            if (bad >= vocab_size).any() else "pad labels with -100 (as DataCollatorForSeq2Seq does), not another value"
        )
        raise ValueError(
            f"`labels` must be token ids in [0, {vocab_size - 1}] or -100 (ignored); got values {bad[:5].tolist()}: "
            f"{hint}."
        )


def check_mask(name: str, mask: torch.Tensor | None, expected: tuple[int, int]) -> None:
    """A 2-D padding mask has the (batch, length) of what it masks; 4-D masks are taken as prepared. Skipped under
    torch.compile, where a static cache's length is a tensor."""
    if mask is None:
        return
    check_is_tensor(name, mask)
    if mask.dim() == 4 or is_torchdynamo_compiling():
        return
    expected = tuple(int(size) for size in expected)
    if tuple(mask.shape) != expected:
        raise ValueError(
            f"`{name}` has shape {tuple(mask.shape)} but must be (batch, length) = {expected}: 1 for tokens to "
            "attend to, 0 for padding."
        )


def sinusoidal_encoding(positions: torch.Tensor, d_model: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)) [3.5]."""
    exponents = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32) / d_model
    angles = positions.to(torch.float32)[:, None] / 10000.0**exponents
    # interleaved (sin, cos) pairs; no size read from the tensor, so that torch.export keeps the length dynamic. In
    # `dtype`, else the default one, as a model made under another one (from_pretrained's dtype=) makes its tensors.
    encoding = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(-2)[:, :d_model]
    return encoding.to(dtype or torch.get_default_dtype())


class VanillaTransformerPositionalEncoding(nn.Module):
    """Fixed sinusoidal position encodings [3.5]: a table for the first positions, the formula beyond it."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.d_model = config.d_model
        table = sinusoidal_encoding(torch.arange(config.max_position_embeddings), config.d_model)
        self.register_buffer("table", table, persistent=False)

    def _apply(self, fn, recurse=True):
        """Moves and casts as any module's buffers, but a new dtype recomputes the table from the formula: a model
        loaded in bfloat16 and cast back to float32 gets float32 encodings, not bfloat16's rounding of them."""
        dtype = self.table.dtype
        super()._apply(fn, recurse)
        if self.table.dtype != dtype and self.table.is_floating_point() and not self.table.is_meta:
            table = sinusoidal_encoding(torch.arange(len(self.table)), self.d_model, torch.float32)  # as made
            self.table = table.to(self.table.device, self.table.dtype)
        return self

    def forward(
        self, length: int, offset: int | torch.Tensor = 0, padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Encodings of positions offset, ..., offset + length - 1, shape (length, d_model). A tensor offset (a static
        cache's length) takes the formula, so that torch.compile sees no branch on its value.

        With a (batch, offset + length) padding mask, a position counts the real tokens before it, so that padding
        on either side leaves a sentence's encodings as they are; shape (batch, length, d_model)."""
        if padding_mask is not None:
            positions = (padding_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -length:]
            encoding = sinusoidal_encoding(positions.flatten(), self.d_model).to(self.table.dtype)
            return encoding.view(*positions.shape, self.d_model)
        if not isinstance(offset, torch.Tensor) and offset + length <= self.table.shape[0]:
            return self.table[offset : offset + length]
        positions = torch.arange(length, device=self.table.device) + offset
        return sinusoidal_encoding(positions, self.d_model).to(self.table.dtype)


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention [3.2.1]: softmax(QK^T / sqrt(d_k) + mask) V, written out (with dropout on the
    weights where `attention_dropout` asks for it, which the paper does not)."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = F.dropout(scores.softmax(dim=-1), p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


class VanillaTransformerAttention(nn.Module):
    """Multi-head attention [3.2.2]; self-attention projects Q, K, V in one matmul, cross-attention K, V in one."""

    def __init__(
        self,
        config: VanillaTransformerConfig,
        num_heads: int,
        is_causal: bool = False,
        is_cross_attention: bool = False,
        layer_idx: int | None = None,
    ):
        super().__init__()
        self.config = config
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = config.attention_dropout
        self.is_causal = is_causal
        self.is_cross_attention = is_cross_attention
        self.layer_idx = layer_idx
        d_model = config.d_model
        if is_cross_attention:
            self.q_proj = PrepackedLinear(d_model, d_model)
            self.kv_proj = PrepackedLinear(d_model, 2 * d_model)
        else:
            self.qkv_proj = PrepackedLinear(d_model, 3 * d_model)
        self.out_proj = PrepackedLinear(d_model, d_model)

    def _split_heads(self, projected: torch.Tensor, parts: int) -> tuple[torch.Tensor, ...]:
        """(batch, length, parts * d_model) -> `parts` tensors of shape (batch, heads, length, head_dim)."""
        batch, length, _ = projected.shape
        return projected.view(batch, length, parts, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.is_cross_attention:
            (query,) = self._split_heads(self.q_proj(hidden_states), 1)
            memory_cache = cache.cross_attention_cache if cache is not None else None
            if memory_cache is not None and cache.is_updated.get(self.layer_idx):
                key, value = memory_cache.layers[self.layer_idx].keys, memory_cache.layers[self.layer_idx].values
            else:
                key, value = self._split_heads(self.kv_proj(memory), 2)
                if memory_cache is not None:  # memory is fixed during generation: project it once per call
                    key, value = memory_cache.update(key, value, self.layer_idx)
                    cache.is_updated[self.layer_idx] = True
        else:
            query, key, value = self._split_heads(self.qkv_proj(hidden_states), 3)
            if cache is not None:
                key, value = cache.self_attention_cache.update(key, value, self.layer_idx)

        group = query.shape[0] // key.shape[0]
        if group > 1:  # several decoder rows (beams) per source: attend to its memory in one call, not `group` copies
            query = query.unflatten(0, (-1, group)).transpose(1, 2).flatten(2, 3)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        output, weights = attention(
            self,
            query,
            key,
            value,
            attention_mask,
            scaling=self.scaling,
            dropout=self.dropout if self.training else 0.0,
            **kwargs,
        )
        if group > 1 and weights is not None:
            weights = weights.unflatten(2, (group, -1)).transpose(1, 2).flatten(0, 1)
        output = output.reshape(*hidden_states.shape[:-1], -1)
        return self.out_proj(output), weights


class VanillaTransformerFeedForward(nn.Module):
    """Position-wise feed-forward network [3.3]: FFN(x) = max(0, x W1 + b1) W2 + b2."""

    def __init__(self, config: VanillaTransformerConfig, ffn_dim: int):
        super().__init__()
        self.fc1 = PrepackedLinear(config.d_model, ffn_dim)
        self.activation = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout
        self.fc2 = PrepackedLinear(ffn_dim, config.d_model)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.activation(self.fc1(hidden_states))
        hidden_states = F.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        return self.fc2(hidden_states)


class VanillaTransformerResidualLayer(GradientCheckpointingLayer):
    """A layer of residual blocks [3.1; dropout 5.4]: post-LN LayerNorm(x + Dropout(Sublayer(x))) as in the paper, or pre-LN
    x + Dropout(Sublayer(LayerNorm(x))) with `normalize_before`."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.dropout = config.dropout
        self.normalize_before = config.normalize_before

    def residual(self, hidden_states: torch.Tensor, norm: nn.LayerNorm, sublayer: Callable) -> torch.Tensor:
        if self.normalize_before:
            return hidden_states + F.dropout(sublayer(norm(hidden_states)), p=self.dropout, training=self.training)
        return norm(hidden_states + F.dropout(sublayer(hidden_states), p=self.dropout, training=self.training))


class VanillaTransformerEncoderLayer(VanillaTransformerResidualLayer):
    """Encoder layer [3.1]: self-attention, then the feed-forward network."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.self_attn = VanillaTransformerAttention(config, config.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ffn = VanillaTransformerFeedForward(config, config.encoder_ffn_dim)
        self.final_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        def self_attention(x):
            return self.self_attn(x, attention_mask=attention_mask, **kwargs)[0]

        hidden_states = self.residual(hidden_states, self.self_attn_layer_norm, self_attention)
        return self.residual(hidden_states, self.final_layer_norm, self.ffn)


class VanillaTransformerDecoderLayer(VanillaTransformerResidualLayer):
    """Decoder layer [3.1]: masked self-attention, cross-attention over the encoder output, feed-forward."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__(config)
        heads = config.decoder_attention_heads
        self.self_attn = VanillaTransformerAttention(config, heads, is_causal=True, layer_idx=layer_idx)
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.encoder_attn = VanillaTransformerAttention(config, heads, is_cross_attention=True, layer_idx=layer_idx)
        self.encoder_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ffn = VanillaTransformerFeedForward(config, config.decoder_ffn_dim)
        self.final_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> torch.Tensor:
        def self_attention(x):
            return self.self_attn(x, attention_mask=attention_mask, cache=cache, **kwargs)[0]

        def cross_attention(x):
            return self.encoder_attn(
                x,
                attention_mask=encoder_attention_mask,
                memory=encoder_hidden_states,
                cache=cache,
                **kwargs,
            )[0]

        hidden_states = self.residual(hidden_states, self.self_attn_layer_norm, self_attention)
        hidden_states = self.residual(hidden_states, self.encoder_attn_layer_norm, cross_attention)
        return self.residual(hidden_states, self.final_layer_norm, self.ffn)


class VanillaTransformerPreTrainedModel(PreTrainedModel):
    config: VanillaTransformerConfig
    config_class = VanillaTransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["VanillaTransformerEncoderLayer", "VanillaTransformerDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _can_compile_fullgraph = True

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, with an error that says what to do about a damaged weights file."""
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except SafetensorError as error:
            raise OSError(
                f"The weights in {pretrained_model_name_or_path} are truncated or corrupt ({error}). Save or download "
                "the model again; a checkpoint-* folder of a run that was killed may be incomplete (the training "
                "script's --resume_from_checkpoint true picks the last complete one)."
            ) from error

    @torch.no_grad()
    def _init_weights(self, module: nn.Module):
        """Xavier-uniform linear layers, each as stored (fused Q/K/V as one matrix: see `init_std` in the config),
        and N(0, d_model^-0.5) embeddings as tensor2tensor's, unless `init_std`."""
        std = self.config.init_std
        if isinstance(module, nn.Linear):
            if std is None:
                init.xavier_uniform_(module.weight)
            else:
                init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5 if std is None else std)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, VanillaTransformerPositionalEncoding):
            init.copy_(module.table, sinusoidal_encoding(torch.arange(len(module.table)), module.d_model))


class VanillaTransformerStack(VanillaTransformerPreTrainedModel):
    """What the encoder and decoder share: the scaled embedding plus position encoding [3.4, 3.5], dropout, and
    the final LayerNorm of a pre-LN stack."""

    is_decoder = False

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = VanillaTransformerPositionalEncoding(config)
        self.dropout = config.dropout  # fixed when the model is made, as every layer's (a later config edit: save, load)
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.normalize_before else None

    def embed(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        offset: int = 0,
        padding_mask: torch.Tensor | None = None,
    ):
        """Token embedding times sqrt(d_model) plus the position encodings from `offset` on, then dropout. Positions
        skip the padding of a 2-D `padding_mask` (batch, offset + length)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        prefix = "decoder_" if self.is_decoder else ""
        if inputs_embeds is None:
            check_token_ids(f"{prefix}input_ids", input_ids, self.config.vocab_size)
            inputs_embeds = self.embed_tokens(input_ids)
        elif inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.d_model:
            raise ValueError(
                f"inputs_embeds must have shape (batch, length, d_model={self.config.d_model}), got "
                f"{tuple(inputs_embeds.shape)}."
            )
        batch, length = inputs_embeds.shape[:2]
        check_mask(f"{prefix}attention_mask", padding_mask, (batch, offset + length))
        if padding_mask is not None and padding_mask.dim() != 2:
            padding_mask = None  # a prepared 4-D mask: positions from the offset
        positions = self.embed_positions(length, offset, padding_mask)
        hidden_states = inputs_embeds * self.embed_scale + positions
        return F.dropout(hidden_states, p=self.dropout, training=self.training)

    def finish(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states if self.layer_norm is None else self.layer_norm(hidden_states)


class VanillaTransformerEncoder(VanillaTransformerStack):
    """The encoder [3.1]: N identical layers over the embedded source."""

    _can_record_outputs = {
        "hidden_states": VanillaTransformerEncoderLayer,
        "attentions": VanillaTransformerAttention,
    }

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.layers = nn.ModuleList(VanillaTransformerEncoderLayer(config) for _ in range(config.encoder_layers))
        self.post_init()

    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        hidden_states = self.embed(input_ids, inputs_embeds, padding_mask=attention_mask)
        forget_weights_edited_before_new_input(self, hidden_states)
        attention_mask = create_bidirectional_mask(
            self.config, hidden_states, attention_mask, allow_is_bidirectional_skip=may_skip_mask(attention_mask)
        )
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask, **kwargs)
        return BaseModelOutput(last_hidden_state=self.finish(hidden_states))


class VanillaTransformerDecoder(VanillaTransformerStack):
    """The decoder [3.1]: N identical layers over the embedded, right-shifted target, attending to the memory."""

    _can_record_outputs = {
        "hidden_states": VanillaTransformerDecoderLayer,
        "attentions": OutputRecorder(VanillaTransformerAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(VanillaTransformerAttention, index=1, layer_name="encoder_attn"),
    }

    is_decoder = True

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.layers = nn.ModuleList(
            VanillaTransformerDecoderLayer(config, layer_idx=i) for i in range(config.decoder_layers)
        )
        self.post_init()

    @merge_with_config_defaults
    @capture_outputs
    @takes_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs `encoder_hidden_states`, the encoder output it attends to.")
        if use_cache and self.training and torch.is_grad_enabled() and self.layers[0].gradient_checkpointing:
            use_cache = False  # checkpointed layers fill no cache (GradientCheckpointingLayer drops it): none returned
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        elif isinstance(cache, DynamicCache):  # a bare self-attention cache: give it a cross-attention one
            cache = EncoderDecoderCache(cache, DynamicCache(config=self.config))
        offset = cache.get_seq_length() if cache is not None else 0

        hidden_states = self.embed(input_ids, inputs_embeds, offset, padding_mask=attention_mask)
        forget_weights_edited_before_new_input(self, hidden_states, cache)
        batch, length = hidden_states.shape[:2]
        sources = encoder_hidden_states.shape[0]
        if batch % sources:
            raise ValueError(
                f"The decoder inputs have batch size {batch} but `encoder_hidden_states` {sources}: they must be "
                "equal, or a multiple (rows i*k ... i*k+k-1 attend to source i, as generate() decodes k beams per "
                "source)."
            )
        check_mask("attention_mask", encoder_attention_mask, tuple(encoder_hidden_states.shape[:2]))
        causal_mask = create_causal_mask(
            config=self.config,
            inputs_embeds=hidden_states,
            attention_mask=attention_mask,
            **{CACHE_NAME: cache.self_attention_cache if cache is not None else None},
            allow_is_causal_skip=may_skip_mask(attention_mask),
        )
        encoder_attention_mask = create_bidirectional_mask(
            config=self.config,
            inputs_embeds=hidden_states.reshape(sources, -1, hidden_states.shape[-1]),  # queries grouped by source
            attention_mask=encoder_attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            allow_is_bidirectional_skip=may_skip_mask(encoder_attention_mask),
        )
        for layer in self.layers:
            hidden_states = layer(
                hidden_states,
                causal_mask,
                encoder_hidden_states,  # positional, for gradient checkpointing
                encoder_attention_mask=encoder_attention_mask,
                cache=cache,
                **kwargs,
            )
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=self.finish(hidden_states), **{CACHE_NAME: cache}
        )


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs for teacher forcing: labels shifted one position right, starting with the start token."""
    if decoder_start_token_id is None or pad_token_id is None:
        raise ValueError("Set `config.decoder_start_token_id` and `config.pad_token_id` to train from labels.")
    shifted = labels.new_full(labels.shape, decoder_start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill_(shifted == -100, pad_token_id)


class VanillaTransformerModel(VanillaTransformerPreTrainedModel):
    """The encoder-decoder without the output projection; returns the decoder's last hidden states."""

    # One shared source/target vocabulary [3.4]: the encoder and decoder use the same embedding matrix.
    _shared_embedding_keys = {"encoder.embed_tokens.weight": "shared.weight", "decoder.embed_tokens.weight": "shared.weight"}
    _tied_weights_keys = _shared_embedding_keys

    def __init__(self, config: VanillaTransformerConfig):
        config.check_values()  # fields set after the config was made (config.d_model = 30) are checked here too
        super().__init__(config)
        # padding_idx: the pad row starts at zero and gets no gradient (not in the paper; as Marian's, fairseq's)
        self.shared = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.encoder = VanillaTransformerEncoder(config)
        self.decoder = VanillaTransformerDecoder(config)
        self.post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """`tie_word_embeddings` unties only the output projection: the encoder and decoder always share `shared`."""
        tied = super().get_expanded_tied_weights_keys(all_submodels)
        return tied if all_submodels else {**self._shared_embedding_keys, **tied}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def set_input_embeddings(self, embeddings: nn.Embedding):
        self.shared = self.encoder.embed_tokens = self.decoder.embed_tokens = embeddings

    @can_return_tuple
    @takes_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        r"""
        input_ids: source token ids, (batch, source_length). attention_mask: 1 for real tokens, 0 for padding.
        decoder_input_ids: target ids shifted right, starting with `decoder_start_token_id`; with a cache, only
            the new tokens. encoder_outputs: reuse a computed encoder output (as `generate()` does).
        cache: the decoder's keys and values so far (`past_key_values`, its name before transformers 5.24, works too).
        """
        if encoder_outputs is None:
            targets = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
            sources = input_ids if input_ids is not None else inputs_embeds
            if isinstance(targets, torch.Tensor) and isinstance(sources, torch.Tensor) and targets.dim() > 1 \
                    and sources.dim() > 1 and targets.shape[0] != sources.shape[0]:
                # a decoder batch several times the sources' is generate()'s beams, given the encoder output
                raise ValueError(
                    f"The decoder inputs have batch size {targets.shape[0]} but the sources {sources.shape[0]}: give "
                    "one target row per source (beams of a source share its encoder output only in generate())."
                )
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, return_dict=True,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):  # a tuple passed in
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError(
                "The decoder needs its inputs: pass `decoder_input_ids` (the target shifted right, starting with "
                "`config.decoder_start_token_id`) or `labels` to VanillaTransformerForConditionalGeneration. (With "
                "label smoothing, Seq2SeqTrainer takes `labels` out of the batch before the forward: collate with "
                "DataCollatorForSeq2Seq(tokenizer, model=model), which adds the `decoder_input_ids`.)"
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            return_dict=True,  # whatever config.return_dict says; this forward's decorator makes the tuple
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **{CACHE_NAME: getattr(decoder_outputs, CACHE_NAME)},
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


def _same_storage(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Whether two tensors are one weight (tied): the same object, or views of the same memory (transformers'
    storage id, which knows DTensors' local shards; all meta tensors count as one)."""
    return first is second or id_tensor_storage(first)[:2] == id_tensor_storage(second)[:2]


PAPER_DECODING = {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True}
"""Beam search with beam size 4 and length penalty 0.6 [6.1], transformers' penalty `score / length^0.6` (the paper's,
GNMT's `((5 + length) / 6)^0.6`, is not one a generation config can choose)."""


class VanillaTransformerForConditionalGeneration(VanillaTransformerPreTrainedModel, GenerationMixin):
    """The Transformer for sequence-to-sequence tasks: logits over the shared vocabulary, loss and `generate()`."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.model = VanillaTransformerModel(config)
        self.lm_head = PrepackedLinear(config.d_model, config.vocab_size, bias=config.output_bias)
        self.post_init()
        self._default_to_the_papers_decoding()
        # The tied names are never saved (the shared weight is, once). Said here too, the Trainer's checkpoint loading
        # (resuming, load_best_model_at_end) ties them instead of warning that they are missing.
        self._keys_to_ignore_on_save = set(self.all_tied_weights_keys)

    def set_output_embeddings(self, projection: nn.Linear):
        """Keeps the packed CPU path of a projection transformers makes anew as a plain `nn.Linear`
        (`resize_token_embeddings` of a model whose output projection is not tied)."""
        if type(projection) is nn.Linear:
            projection.__class__ = PrepackedLinear  # a subclass with no state of its own: weights, flags, hooks kept
        self.lm_head = projection

    def _default_to_the_papers_decoding(self) -> None:
        """The paper's beam search [6.1] where the generation config sets none; a saved generation config wins. A
        config that chose greedy search (`num_beams` 1) is left without the beam settings, which transformers
        refuses beside it when the config is saved."""
        config = self.generation_config
        if config is None or (config.num_beams is not None and config.num_beams <= 1):
            return
        for name, value in PAPER_DECODING.items():
            if getattr(config, name, None) is None:
                setattr(config, name, value)

    def adjust_generation_fn(self, *args, **kwargs):
        """Loading: the saved generation config, or, where the folder has none (a model saved without it, weights
        and config.json alone), one made from config.json, which holds no decoding settings: the paper's then. A
        config that a Seq2SeqTrainer saved with all of transformers' defaults filled in is read without them."""
        super().adjust_generation_fn(*args, **kwargs)
        self._forget_placeholder_max_length()
        self._default_to_the_papers_decoding()

    def generate(self, inputs: torch.Tensor | None = None, generation_config=None, **kwargs):
        """`GenerationMixin.generate` with the paper's length limit [6.1] as the default: at most source length + 50
        new tokens (or the minimum asked for, `min_new_tokens` or `min_length`, if more), unless `max_length` or
        `max_new_tokens` is set in the call, the generation config given or the model's. In a padded batch the
        source length is the padded one, as in fairseq.

        Source ids without an `attention_mask` get the mask their padding implies (ids other than `pad_token_id`, the
        call's or the config's), as transformers 4 and fairseq did: transformers 5 infers it for decoder-only models
        only, so a padded batch without its mask would attend to the padding and translate its shorter sentences
        differently. A beam search gets the paper's length penalty and early stopping where its settings leave them
        unset (`_beam_settings`), and every token after a translation's end token is `pad_token_id`, the decoder
        prompt (`decoder_input_ids`) left as it is (`_pad_after_the_end`)."""
        self._forget_placeholder_max_length()
        config = generation_config if generation_config is not None else self.generation_config

        def setting(name):  # as transformers merges them: the call, the config given, the model's config
            for value in (kwargs.get(name), getattr(config, name, None), getattr(self.generation_config, name, None)):
                if value is not None:
                    return value
            return None

        limits = (setting("max_length"), setting("max_new_tokens"))
        beams = setting("num_beams")
        if beams is not None and beams < 1:  # transformers divides by it
            raise ValueError(f"`num_beams` must be at least 1 (1: greedy search), got {beams}.")
        chosen = self._beam_settings(setting, beams or 1, kwargs)
        source = inputs if inputs is not None else kwargs.get("input_ids", kwargs.get("inputs_embeds"))
        if source is not None and kwargs.get("inputs_embeds") is None:
            check_ids_shape("input_ids", source)
        if kwargs.get("attention_mask") is not None:
            check_is_tensor("attention_mask", kwargs["attention_mask"])
        prompts = kwargs.get("decoder_input_ids")
        if isinstance(prompts, torch.Tensor) and prompts.dim() == 2 and source is not None and source.dim() >= 2 \
                and prompts.shape[0] != source.shape[0]:  # beam search would match them up across sources
            raise ValueError(
                f"decoder_input_ids has {prompts.shape[0]} rows for {source.shape[0]} sources: give one prompt row "
                "per source (repeat a shared prompt, e.g. prompt.expand(len(sources), -1))."
            )
        if all(limit is None for limit in limits):
            encoder_outputs = kwargs.get("encoder_outputs")
            source_length = source.shape[1] if source is not None else encoder_output_length(encoder_outputs)
            if source_length is not None:  # and room for a minimum length asked for (min_length counts the start)
                least = max(setting("min_new_tokens") or 0, (setting("min_length") or 0) - 1)
                chosen["max_new_tokens"] = max(source_length + 50, least)
        if generation_config is None:
            kwargs.update(chosen)
        elif chosen:  # the caller's config, copied: with it, settings in kwargs are a deprecation warning
            generation_config = copy.deepcopy(generation_config)
            for name, value in chosen.items():
                setattr(generation_config, name, value)
        pad, eos = (setting(name) if setting(name) is not None else getattr(self.config, name)
                    for name in ("pad_token_id", "eos_token_id"))
        if kwargs.get("attention_mask") is None and kwargs.get("encoder_outputs") is None:
            mask = self._padding_mask_of(source, pad, eos)
            if mask is not None:
                kwargs["attention_mask"] = mask
        if source is not None and not on_host(source) and not source.is_floating_point() and source.numel():
            # one sync per call for the error a CPU model gives; the forward passes check on the device
            check_token_ids("input_ids", torch.stack(torch.aminmax(source)).view(1, 2).cpu(), self.config.vocab_size)
        output = super().generate(inputs, generation_config=generation_config, **kwargs)
        start = setting("decoder_start_token_id")
        prompt_length = self._prompt_length(prompts, setting("bos_token_id") if start is None else start)
        self._pad_after_the_end(output if isinstance(output, torch.Tensor) else output.sequences, pad, eos,
                                prompt_length)
        return output

    @staticmethod
    def _prompt_length(prompts: torch.Tensor | None, start: int | None) -> int:
        """The length of the decoder prompt that generate() continues: the start token alone, or the
        `decoder_input_ids` given, with the start token that transformers puts in front of them where no row begins
        with it."""
        if not isinstance(prompts, torch.Tensor) or prompts.dim() != 2:
            return 1
        prepended = start is not None and bool((prompts[:, 0] != torch.as_tensor(start, device=prompts.device)).all())
        return prompts.shape[1] + prepended

    @staticmethod
    def _beam_settings(setting: Callable, beams: int, kwargs: dict) -> dict:
        """The paper's length penalty and early stopping [6.1] for a beam search that leaves them unset, as they are
        read back from a saved model (`_default_to_the_papers_decoding`): a model decodes alike before its save and
        after. For one beam, where neither has an effect, transformers' neutral values instead of those merged from
        the model's config, which transformers warns about as if the caller had set them."""
        chosen = {}
        for name, neutral in (("length_penalty", 1.0), ("early_stopping", False)):
            value = setting(name)
            if beams > 1 and value is None:
                chosen[name] = PAPER_DECODING[name]
            elif beams == 1 and kwargs.get(name) is None and value not in (None, neutral):
                chosen[name] = neutral
        return chosen

    def _pad_after_the_end(
        self, sequences: torch.Tensor, pad: int | None, eos: int | list[int] | None, prompt_length: int = 1
    ) -> None:
        """Make every token after a translation's end token (`eos`, the call's or the config's) `pad`, in place. Beam
        search (transformers 5.23) fills the rest of its shorter outputs with `pad_token_id or eos_token_id`: with
        this package's pad id, 0, that is the end token, repeated, where greedy search pads, and a length counted as
        `np.count_nonzero(preds != pad)` counts them. The decoder prompt (the start token, or `decoder_input_ids`
        given, which may hold end tokens: a previous sentence as context) is left as it is."""
        if pad != 0 or eos is None or sequences.dim() != 2 or sequences.shape[1] - prompt_length < 2:
            return  # transformers fills with pad_token_id where it is not 0
        generated = sequences[:, prompt_length:]
        ends = torch.isin(generated, torch.tensor(eos, device=generated.device))
        generated.masked_fill_(ends.cumsum(1) - ends.long() > 0, pad)  # strictly after the first end

    def _get_stopping_criteria(self, *args, **kwargs):
        """GenerationMixin's, without the warning that an output past `max_position_embeddings` may fail: the
        sinusoidal encodings [3.5] are computed for any position, so the length limits alone end a translation."""
        criteria = super()._get_stopping_criteria(*args, **kwargs)
        for criterion in criteria:
            if isinstance(criterion, MaxLengthCriteria):
                criterion.max_position_embeddings = None
        return criteria

    def save_pretrained(self, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the translation pipeline among the code it ships (this relative
        import makes `pipeline_translation.py` one of the files copied next to this one) and named in config.json, so
        that `pipeline(model=DIR, trust_remote_code=True)` translates wherever the saved model goes; `auto_map` names
        the base model for `AutoModel` too."""
        from .pipeline_translation import custom_pipeline_entry

        self.config.check_values()  # before transformers writes anything (the code files first)
        self._forget_placeholder_max_length()
        # a tied name is left out where it is the shared weight; one untied since (PEFT's merge_and_unload with
        # modules_to_save=["lm_head"], or by hand) is saved, or loading would make it up at random
        named = dict(self.named_parameters(remove_duplicate=False))
        shared = self.model.shared.weight
        self._keys_to_ignore_on_save = {name for name in self.all_tied_weights_keys
                                         if name not in named or _same_storage(named[name], shared)}
        if "lm_head.weight" not in self._keys_to_ignore_on_save and self.config.tie_word_embeddings:
            self.config.tie_word_embeddings = False  # what the weights saved are: loading must not tie them again
        others = getattr(self.config, "custom_pipelines", None) or {}
        self.config.custom_pipelines = {**others, **custom_pipeline_entry()}
        module = VanillaTransformerModel.__module__.rsplit(".", 1)[-1]  # AutoModel loads the encoder-decoder alone
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}),
                                "AutoModel": f"{module}.{VanillaTransformerModel.__name__}"}
        beam_settings = self._beam_settings_beside_greedy_search()
        try:
            return super().save_pretrained(*args, **kwargs)
        finally:  # kept in memory: a later generate(num_beams=4) still decodes as the paper does
            for name, value in beam_settings.items():
                setattr(self.generation_config, name, value)

    def _beam_settings_beside_greedy_search(self) -> dict:
        """Unset, and return, the paper's beam settings (`_default_to_the_papers_decoding`) in a generation config
        turned to greedy search since (`num_beams = 1`): transformers refuses to save `length_penalty` and
        `early_stopping` beside one beam, after it has written config.json (a folder without weights)."""
        config = self.generation_config
        if config is None or (config.num_beams is not None and config.num_beams > 1):  # None: one beam
            return {}
        unset = {name: value for name, value in PAPER_DECODING.items()
                 if name != "num_beams" and getattr(config, name, None) == value}
        for name in unset:
            setattr(config, name, None)
        return unset

    def _forget_placeholder_max_length(self) -> None:
        """Undo what Seq2SeqTrainer writes into the generation config: after every evaluation batch it fills each
        unset field with transformers' default, and the placeholder `max_length=20` among them would cut every later
        translation, and every saved model's, at 20 tokens. Recognised by all ~30 defaults being set (`max_length` to
        20 or, where this ran before, unset), which no one does by hand. The fields holding their default are unset
        again, as they were, so that a length set by hand later (even 20) is not taken for the placeholder; the
        paper's decoding settings stay, since unset they would mean the paper's values (`PAPER_DECODING`)."""
        config = self.generation_config
        if config is None or config.max_length not in (None, 20):
            return
        defaults = config._get_default_generation_params()
        if not all(getattr(config, name, None) is not None for name, value in defaults.items()
                   if value is not None and name != "max_length"):
            return
        for name, value in defaults.items():
            if value is not None and name not in PAPER_DECODING and getattr(config, name) == value:
                setattr(config, name, None)

    @staticmethod
    def _padding_mask_of(source: torch.Tensor | None, pad: int | None, eos: int | list[int] | None
                         ) -> torch.Tensor | None:
        """`source` ids' attention mask, 0 at `pad` (the call's `pad_token_id`, else the generation config's or the
        model's); None for embeddings, or without a pad token distinct from the end token (then padding cannot be told
        from text)."""
        if source is None or source.is_floating_point() or source.dim() != 2:
            return None
        if pad is None or pad in (eos if isinstance(eos, list) else [eos]):
            return None
        return source.ne(pad).long()

    def _expand_inputs_for_generation(self, expand_size=1, is_encoder_decoder=False, input_ids=None, **model_kwargs):
        """Beams (and returned sequences) of a source share its encoder output and mask instead of copies of them:
        the cross-attention keys/values are projected once per source, and its beams' queries attend together."""
        names = ("encoder_outputs", "attention_mask")
        shared = {name: model_kwargs.pop(name) for name in names if name in model_kwargs}
        input_ids, model_kwargs = super()._expand_inputs_for_generation(expand_size, False, input_ids, **model_kwargs)
        return input_ids, {**model_kwargs, **shared}

    @staticmethod
    def _reorder_cache(cache: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search keeps the self-attention cache of the chosen beams. The cross-attention cache stays as it is:
        it holds one copy of each source's memory keys/values, shared by the source's beams (see
        `_expand_inputs_for_generation`), and beams are only chosen among a source's own."""
        if isinstance(cache, EncoderDecoderCache):
            cache.self_attention_cache.reorder_cache(beam_idx)
        else:
            cache.reorder_cache(beam_idx)
        return cache

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """Used by DataCollatorForSeq2Seq so that the Trainer's label smoother gets decoder inputs."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @can_return_tuple
    @takes_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        r"""
        labels: target ids, (batch, target_length); -100 marks positions left out of the loss. Given labels and
            no decoder inputs, the decoder inputs are the labels shifted right.
        label_smoothing (keyword, default 0): the loss's label smoothing [5.4], the Trainer's
            `label_smoothing_factor`. skip_logits (keyword, default False): return the loss without the logits, as
            a training step needs, so that nothing (accelerate's autocast wrapper) makes a float32 copy of them.
        """
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        label_smoothing = kwargs.pop("label_smoothing", 0.0)
        skip_logits = kwargs.pop("skip_logits", False)
        if skip_logits and labels is None:
            raise ValueError("`skip_logits=True` returns only the loss, which needs `labels`.")
        if labels is not None:
            check_labels(labels, self.config.vocab_size)
            check_one_target_per_source(labels, input_ids, inputs_embeds, encoder_outputs)
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        decoder_inputs = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
        if isinstance(decoder_inputs, torch.Tensor):  # the encoder and decoder check their own layers
            forget_weights_edited_before_new_input(self.lm_head, decoder_inputs, cache)
        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            return_dict=True,
            **kwargs,
        )
        logits = self.lm_head(outputs.last_hidden_state)
        loss = None if labels is None else translation_loss(logits, labels, num_items_in_batch, label_smoothing)
        rest = {name: value for name, value in outputs.items() if name != "last_hidden_state"}
        return Seq2SeqLMOutput(loss=loss, logits=None if skip_logits else logits, **rest)


def check_one_target_per_source(labels, input_ids, inputs_embeds, encoder_outputs) -> None:
    """Labels pair with sources row by row: the decoder's batch may be a multiple of the encoder's (beams, for
    generate()), but a loss over such a batch would quietly pair targets with the wrong sources."""
    sources = input_ids if input_ids is not None else inputs_embeds
    if sources is None and encoder_outputs is not None:
        sources = encoder_outputs[0]
    if isinstance(sources, torch.Tensor) and sources.dim() > 1 and sources.shape[0] != labels.shape[0]:
        raise ValueError(
            f"`labels` has batch size {labels.shape[0]} but the sources {sources.shape[0]}: give one target per "
            "source (repeat a source to train on several targets of it)."
        )


def encoder_output_length(encoder_outputs) -> int | None:
    """The source length of an encoder output passed to `generate()` (a BaseModelOutput or a tuple), if any."""
    return None if encoder_outputs is None else encoder_outputs[0].shape[1]


def translation_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    num_items_in_batch: int | torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Token cross-entropy summed over labels that are not -100 and divided by their number, or by
    `num_items_in_batch` where the Trainer gives it (the tokens of all the micro-batches of a step); 0, not NaN, with
    no tokens. Label smoothing [5.4] as the Trainer's `LabelSmoother` computes it; in float32, a chunk of tokens at a
    time (`chunked_loss.py`)."""
    labels = labels.to(logits.device)
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"`labels` has shape {tuple(labels.shape)}, expected (batch, target_length) = {tuple(logits.shape[:-1])}.")
    total = cross_entropy_sum(logits.flatten(0, 1), labels.flatten(), label_smoothing)
    count = labels.ne(-100).sum() if num_items_in_batch is None else num_items_in_batch
    return total / torch.as_tensor(count, device=total.device).clamp(min=1)


__all__ = [
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
]
