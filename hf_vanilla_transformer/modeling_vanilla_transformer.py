"""The original Transformer (Vaswani et al., 2017, "Attention Is All You Need") as a transformers model.

Section numbers in docstrings refer to the paper. Data flow:
source ids -> shared embedding * sqrt(d_model) [3.4] + sinusoidal encoding [3.5] -> dropout -> N encoder layers
(self-attention, feed-forward; each in a residual block) = memory. Target ids shifted right -> the same embedding and
encoding at the cached offset -> N decoder layers (masked self-attention, cross-attention over memory,
feed-forward) -> pre-softmax projection tied to the embedding -> logits.

What is not the paper lives beside this file, imported relatively so that `save_pretrained` ships it: the checks of
the inputs (`input_checks.py`), what `generate()` adds to transformers' (`generation.py`), the loss's float32 chunks
(`chunked_loss.py`), the CPU's packed matrix multiplications (`packed_linear.py`) and the saved weights' permissions
(`file_permissions.py`).
"""

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
from transformers.utils import TransformersKwargs, can_return_tuple
from transformers.utils.deprecation import deprecate_kwarg
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .chunked_loss import cross_entropy_sum
from .configuration_vanilla_transformer import VanillaTransformerConfig
from .file_permissions import readable_weights
from .generation import TranslationGenerationMixin
from .input_checks import (
    as_encoder_output,
    batch_of,
    check_is_tensor,
    check_labels,
    check_mask,
    check_one_target_per_source,
    check_token_ids,
    may_skip_mask,
    warn_if_labels_never_end,
)
from .packed_linear import PrepackedLinear, forget_weights_edited_before_new_input

# transformers 5.24 renamed the KV cache `past_key_values` to `cache`: in the forward arguments generate() passes, in
# the output classes and in the mask helpers. The model speaks the installed release's name and takes either: the old
# one is deprecated since 5.24 (transformers' own decorator, as its models use it, which warns), and before it is the
# name generate() passes (the decorator renames it without a word: it is "deprecated" since a release long past).
CACHE_NAME = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"
takes_past_key_values = deprecate_kwarg(
    "past_key_values", "6.0.0" if CACHE_NAME == "cache" else "5.0.0", new_name="cache"
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

    def extra_repr(self) -> str:
        return f"sinusoidal, d_model={self.d_model}, a table of {len(self.table)} positions, computed beyond"

    def _apply(self, fn, recurse=True):
        """Moves and casts as any module's buffers, but the table is recomputed from the formula where its values
        would be rounded or lost: a new dtype (a model loaded in bfloat16 and cast back to float32 gets float32
        encodings, not bfloat16's rounding of them), or memory given to a table made on the meta device (`to_empty`
        leaves it uninitialised, and `load_state_dict` has no table to load: it is not saved)."""
        before = self.table
        super()._apply(fn, recurse)
        after = self.table
        if after.is_floating_point() and not after.is_meta and (before.is_meta or after.dtype != before.dtype):
            table = sinusoidal_encoding(torch.arange(len(after)), self.d_model, torch.float32)  # as made
            self.table = table.to(after.device, after.dtype)
        return self

    @staticmethod
    def count_positions(padding_mask: torch.Tensor, length: int) -> torch.Tensor:
        """The positions of the last `length` of a (batch, offset + length) padding mask's tokens, each the number of
        real tokens before it: padding on either side leaves a sentence's positions as they are."""
        return (padding_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -length:]

    def forward(
        self,
        length: int,
        offset: int | torch.Tensor = 0,
        padding_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Encodings of positions offset, ..., offset + length - 1, shape (length, d_model). A tensor offset (a static
        cache's length) takes the formula, so that torch.compile sees no branch on its value.

        With a (batch, offset + length) padding mask, a position counts the real tokens before it, so that padding
        on either side leaves a sentence's encodings as they are; `position_ids` (batch, length) give them instead.
        Shape (batch, length, d_model) then."""
        if position_ids is None and padding_mask is not None:
            position_ids = self.count_positions(padding_mask, length)
        if position_ids is not None:
            encoding = sinusoidal_encoding(position_ids.flatten(), self.d_model).to(self.table.dtype)
            return encoding.view(*position_ids.shape, self.d_model)
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

    def extra_repr(self) -> str:
        """What `print(model)` shows beside the projections: the heads and their width, the mask, the dropout."""
        kind = "cross-attention" if self.is_cross_attention else "causal self-attention" if self.is_causal else \
            "self-attention"
        return f"{kind}, heads={self.num_heads}, head_dim={self.head_dim}, attention_dropout={self.dropout}"

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

    def extra_repr(self) -> str:
        return f"activation_dropout={self.activation_dropout}"

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.activation(self.fc1(hidden_states))
        hidden_states = F.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        return self.fc2(hidden_states)


class VanillaTransformerResidualLayer(GradientCheckpointingLayer):
    """A layer of residual blocks [3.1; dropout 5.4]: post-LN LayerNorm(x + Dropout(Sublayer(x))) as in the paper,
    or pre-LN x + Dropout(Sublayer(LayerNorm(x))) with `normalize_before`."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.dropout = config.dropout
        self.normalize_before = config.normalize_before

    def extra_repr(self) -> str:
        """The residual blocks' order and dropout, which are functions, not modules `print(model)` lists."""
        order = "pre-LN: x + Dropout(Sublayer(LayerNorm(x)))" if self.normalize_before else \
            "post-LN: LayerNorm(x + Dropout(Sublayer(x)))"
        return f"{order}, dropout={self.dropout}"

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
    _supports_flash_attn = False  # transformers unpads cross-attention queries by the source mask: wrong rows
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

    def save_pretrained(self, save_directory, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, leaving the weights readable as the user's other files are (safetensors
        writes them -rw-------; the training script's model and checkpoints were already readable)."""
        saved = super().save_pretrained(save_directory, *args, **kwargs)
        readable_weights(save_directory)
        return saved

    def _check_and_adjust_attn_implementation(self, attn_implementation, *args, **kwargs):
        """transformers' check, with the reason flash attention is refused (its own message points at a Hub page
        made of the local folder's path)."""
        if isinstance(attn_implementation, str) and "flash" in attn_implementation:
            raise ValueError(
                f'{type(self).__name__} does not run attn_implementation="{attn_implementation}": transformers\' '
                "flash path unpads the queries by the source's padding mask, which drops cross-attention's target rows "
                'where a source is padded. Use "sdpa" (the default), "eager" or "flex_attention".'
            )
        return super()._check_and_adjust_attn_implementation(attn_implementation, *args, **kwargs)

    @property
    def dummy_inputs(self) -> dict[str, torch.Tensor]:
        """A padded batch of two sources with their decoder inputs, so that `model(**model.dummy_inputs)` runs, as
        for MarianMTModel (PreTrainedModel's are source ids alone, which the decoder cannot go without)."""
        config = self.config
        words = [min(token, config.vocab_size - 1) for token in (5, 6, 7)]
        pad, end, start = config.pad_token_id or 0, config.eos_token_id or 0, config.decoder_start_token_id or 0
        input_ids = torch.tensor([[*words, end], [words[0], end, pad, pad]], device=self.device)
        decoder_input_ids = torch.tensor([[start, *words[:2]], [start, words[2], end]], device=self.device)
        return {"input_ids": input_ids, "attention_mask": (input_ids != pad).long(),
                "decoder_input_ids": decoder_input_ids}

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
        self.dropout = config.dropout  # read once, as in every layer: a later edit of the config takes a save and load
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.normalize_before else None

    def extra_repr(self) -> str:
        """The embedding's scale and dropout, and where a pre-LN stack's `layer_norm` (listed first) runs."""
        after = ", layer_norm after the last layer" if self.layer_norm is not None else ""
        return f"embeddings scaled by {self.embed_scale:g}, dropout={self.dropout}{after}"

    def embed(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        offset: int = 0,
        padding_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ):
        """Token embedding times sqrt(d_model) plus the position encodings from `offset` on, then dropout. Positions
        skip the padding of a 2-D `padding_mask` (batch, offset + length), or are the `position_ids` given."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        prefix = "decoder_" if self.is_decoder else ""
        if inputs_embeds is None:
            check_token_ids(f"{prefix}input_ids", input_ids, self.config.vocab_size)
            inputs_embeds = self.embed_tokens(input_ids)
        elif inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.d_model:
            raise ValueError(
                f"`{prefix}inputs_embeds` must have shape (batch, length, d_model={self.config.d_model}), got "
                f"{tuple(inputs_embeds.shape)}."
            )
        batch, length = inputs_embeds.shape[:2]
        check_mask(f"{prefix}attention_mask", padding_mask, (batch, offset + length))
        if position_ids is not None:
            check_is_tensor(f"{prefix}position_ids", position_ids)
            if tuple(position_ids.shape) != (batch, length):
                raise ValueError(
                    f"`{prefix}position_ids` has shape {tuple(position_ids.shape)} but must be (batch, length) = "
                    f"{(batch, length)}, a position for each input token."
                )
        if padding_mask is not None and padding_mask.dim() != 2:
            padding_mask = None  # a prepared 4-D mask: positions from the offset, or the ids given
        positions = self.embed_positions(length, offset, padding_mask, position_ids)
        hidden_states = inputs_embeds * self.embed_scale + positions
        return F.dropout(hidden_states, p=self.dropout, training=self.training)

    def finish(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states if self.layer_norm is None else self.layer_norm(hidden_states)


class VanillaTransformerEncoder(VanillaTransformerStack):
    """The encoder [3.1]: N identical layers over the embedded source."""

    _can_record_outputs = {
        "hidden_states": OutputRecorder(VanillaTransformerEncoderLayer, num_hidden_layers_key="encoder_layers"),
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
        "hidden_states": OutputRecorder(VanillaTransformerDecoderLayer, num_hidden_layers_key="decoder_layers"),
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
        position_ids: torch.Tensor | None = None,
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

        hidden_states = self.embed(input_ids, inputs_embeds, offset, attention_mask, position_ids)
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
    _shared_embedding_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }
    _tied_weights_keys = _shared_embedding_keys

    def __init__(self, config: VanillaTransformerConfig):
        config.check_values()  # fields set after the config was made (config.d_model = 30) are checked here too
        super().__init__(config)
        # padding_idx (not in the paper; as in Marian, fairseq): the pad row starts at 0, lookups give it no gradient
        self.shared = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.encoder = VanillaTransformerEncoder(config)
        self.decoder = VanillaTransformerDecoder(config)
        self.post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """`tie_word_embeddings` unties only the output projection: the encoder and decoder always share `shared`."""
        tied = super().get_expanded_tied_weights_keys(all_submodels)
        return tied if all_submodels else {**self._shared_embedding_keys, **tied}

    def get_input_embeddings(self) -> nn.Embedding:
        """The encoder's embedding module, which holds the shared weight, as MarianMTModel's: the one of the three
        names that a forward calls, so that a hook on it (the Trainer's NEFTune noise) sees the source's lookups."""
        return self.encoder.embed_tokens

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
        decoder_position_ids: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        r"""
        input_ids: source token ids, (batch, source_length). attention_mask: 1 for real tokens, 0 for padding.
        decoder_input_ids: target ids shifted right, starting with `decoder_start_token_id`; with a cache, only
            the new tokens. encoder_outputs: reuse a computed encoder output (as `generate()` does).
        cache: the decoder's keys and values so far (`past_key_values`, its name before transformers 5.24, works too).
        decoder_position_ids: the positions of the decoder inputs (batch, length); by default counted from
            `decoder_attention_mask`, else from the cache's length (generate() gives them with a static cache).
        """
        if kwargs.get("position_ids") is not None:  # was "got multiple values for keyword argument", after the
            raise ValueError(  # whole decoder's repr; MarianMTModel ignores them without a word
                "`position_ids` is not an input of this model: its encoder numbers the source's positions from 0 "
                "itself, and the decoder's are `decoder_position_ids` (batch, target length)."
            )
        kwargs.pop("position_ids", None)
        if encoder_outputs is None:
            check_one_target_per_source("The decoder inputs have", batch_of(decoder_input_ids, decoder_inputs_embeds),
                                        batch_of(input_ids, inputs_embeds))
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, return_dict=True,
                **kwargs,
            )
        else:  # generate()'s, or one passed in
            encoder_outputs = as_encoder_output(encoder_outputs, self.config.d_model)
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
            position_ids=decoder_position_ids,
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


class VanillaTransformerForConditionalGeneration(VanillaTransformerPreTrainedModel, TranslationGenerationMixin):
    """The Transformer for sequence-to-sequence tasks: logits over the shared vocabulary, the loss, and `generate()`
    with the paper's decoding (`generation.py`)."""

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

    def save_pretrained(self, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the translation pipeline among the code it ships (this relative
        import makes `pipeline_translation.py` one of the files copied next to this one) and named in config.json, so
        that `pipeline(model=DIR, trust_remote_code=True)` translates wherever the saved model goes; `auto_map` names
        the base model for `AutoModel` too."""
        from .pipeline_translation import custom_pipeline_entry

        self.config.check_values()  # before transformers writes anything (the code files first)
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
        with self._generation_config_as_saved():
            return super().save_pretrained(*args, **kwargs)

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """Used by DataCollatorForSeq2Seq so that the Trainer's label smoother gets decoder inputs; warns where the
        labels teach no end of sentence."""
        warn_if_labels_never_end(labels, self.config.eos_token_id, self.config.pad_token_id)
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
        decoder_position_ids: torch.LongTensor | None = None,
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
            if encoder_outputs is not None:
                encoder_outputs = as_encoder_output(encoder_outputs, self.config.d_model)
            sources = batch_of(input_ids, inputs_embeds) if encoder_outputs is None else encoder_outputs[0]
            check_one_target_per_source("`labels` has", labels, sources)
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
            decoder_position_ids=decoder_position_ids,
            return_dict=True,
            **kwargs,
        )
        logits = self.lm_head(outputs.last_hidden_state)
        loss = None if labels is None else translation_loss(logits, labels, num_items_in_batch, label_smoothing)
        rest = {name: value for name, value in outputs.items() if name != "last_hidden_state"}
        return Seq2SeqLMOutput(loss=loss, logits=None if skip_logits else logits, **rest)


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
        raise ValueError(
            f"`labels` has shape {tuple(labels.shape)}, expected (batch, target_length) = {tuple(logits.shape[:-1])}."
        )
    total = cross_entropy_sum(logits.flatten(0, 1), labels.flatten(), label_smoothing)
    count = labels.ne(-100).sum() if num_items_in_batch is None else num_items_in_batch
    if isinstance(count, torch.Tensor):
        return total / count.to(total.device).clamp(min=1)
    return total / max(count, 1)  # a number: no tensor made from it on the device (a copy that waits for it)


__all__ = [
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
]
