"""Configuration of the original Transformer (Vaswani et al., 2017, "Attention Is All You Need")."""

import dataclasses
import difflib
import math
import numbers

from transformers import PreTrainedConfig
from transformers.activations import ACT2FN
from transformers.utils import logging

logger = logging.get_logger(__name__)

# The "big" model's departures from the base defaults (Table 3)
BIG_SIZES = dict(
    d_model=1024,
    encoder_attention_heads=16,
    decoder_attention_heads=16,
    encoder_ffn_dim=4096,
    decoder_ffn_dim=4096,
    dropout=0.3,
)


# Names for a size of both stacks (the training script's flag first, then other libraries'), and the fields' suffix
_BOTH_STACKS = {
    ("layers", "num_layers", "n_layers"): "layers",
    ("attention_heads", "heads", "num_heads", "n_heads", "nhead"): "attention_heads",
    ("ffn_dim", "d_ff", "dim_feedforward", "intermediate_size", "ff_dim"): "ffn_dim",
}
# Other libraries' names for a field (PyTorch's `norm_first`, BERT's and T5's dropouts): the model would not read them
_OTHER_NAMES = {
    "normalize_before": ("norm_first", "pre_ln", "pre_norm", "prenorm", "pre_layer_norm", "pre_layernorm"),
    "dropout": ("dropout_rate", "hidden_dropout_prob", "hidden_dropout", "residual_dropout", "dropout_prob"),
    "attention_dropout": ("attention_probs_dropout_prob", "attn_dropout", "attn_pdrop", "attention_probs_dropout"),
    "activation_function": ("hidden_act", "activation"),
}
# Both stacks' N and h: set through these names, they set the encoder's and the decoder's (read, the encoder's)
_SHARED_SIZES = {"num_hidden_layers": "layers", "num_attention_heads": "attention_heads"}


def _meant(name: str) -> str | None:
    """What a keyword that is no field plainly meant, said as advice: a size of both stacks (the training script's
    flag names `layers`, `attention_heads`, `ffn_dim`, and other libraries' names for them), a field named as other
    libraries name it, or the training script's --preset. None for any other name."""
    for alias, suffix in _BOTH_STACKS.items():
        if name in alias:
            return f"give `encoder_{suffix}` and `decoder_{suffix}` (the training script's --{alias[0]} sets both)"
    for field, alias in _OTHER_NAMES.items():
        if name in alias:
            return f"its name here is `{field}`"
    if name == "preset":
        return ("the big model's config is `VanillaTransformerConfig.big()` (the training script's --preset big), the "
                "base model's the defaults (`VanillaTransformerConfig.base()`)")
    return None


def is_integer(value) -> bool:
    """An int, or numpy's integer types (not bool): what a size or token id may be."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An int or float (numpy's too), not a bool or a string (as a value read from YAML or a command line may be)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def plain_number(value):
    """A number of numpy's (`np.float32(0.1)`, from an array) as the int or float that JSON holds; else the value."""
    if is_integer(value) and not isinstance(value, int):
        return int(value)
    if is_number(value) and not isinstance(value, (int, float)):
        try:
            return float(str(value))  # np.float32(0.1) is 0.1, not 0.10000000149011612
        except ValueError:  # a Fraction, "1/10"
            return float(value)
    return value


class VanillaTransformerConfig(PreTrainedConfig):
    r"""
    Configuration of [`VanillaTransformerModel`] and [`VanillaTransformerForConditionalGeneration`].

    The defaults are the paper's base model (Table 3): N=6 encoder and decoder layers, d_model=512, h=8 heads,
    d_ff=2048, P_drop=0.1, ReLU, one shared source/target vocabulary (37000 BPE tokens for WMT En-De) whose
    embedding is also the pre-softmax projection, embeddings scaled by sqrt(d_model), post-LN residual blocks.
    `VanillaTransformerConfig.big()` gives the "big" model.

    Field names follow BART/Marian so that tools written for those models work unchanged. transformers' names
    `hidden_size`, `num_hidden_layers` and `num_attention_heads` read d_model and the encoder's N and h; given, the
    last two set both stacks'. Other libraries' names for a field (`norm_first`, `hidden_dropout_prob`) are refused.

    Args:
        vocab_size: size of the shared source/target vocabulary.
        d_model: width of the residual stream (d_model).
        encoder_layers, decoder_layers: number of layers (N) in each stack.
        encoder_attention_heads, decoder_attention_heads: number of heads (h); must divide `d_model`.
        encoder_ffn_dim, decoder_ffn_dim: inner width of the position-wise feed-forward networks (d_ff).
        dropout: residual dropout (P_drop), applied to each sub-layer's output and to embeddings + encodings.
        attention_dropout: dropout on the attention weights (not in the paper, hence 0).
        activation_dropout: dropout after the feed-forward activation (not in the paper, hence 0).
        activation_function: the feed-forward non-linearity, a key of `transformers.activations.ACT2FN`.
        max_position_embeddings: positions whose encodings are precomputed; longer inputs are still encoded.
        scale_embedding: multiply token embeddings by sqrt(d_model) (section 3.4).
        normalize_before: pre-LN `x + Sublayer(LayerNorm(x))` with a final LayerNorm per stack instead of the
            paper's post-LN `LayerNorm(x + Sublayer(x))`.
        layer_norm_eps: epsilon of every LayerNorm.
        init_std: if set, every weight is drawn from N(0, init_std); if None (default), each linear layer as stored
            gets Xavier uniform and the embedding N(0, d_model^-0.5) (tensor2tensor's embedding). The paper names
            no initialization. Stored fused, the self-attention's Q, K and V projections (one 3d x d matrix) start
            at bound sqrt(6 / 4d), fairseq's scale for them, the cross-attention's K and V (2d x d) at
            sqrt(6 / 3d), and its Q and the output projections (d x d) at sqrt(6 / 2d).
        tie_word_embeddings: share the embedding with the pre-softmax projection (section 3.4). The encoder and
            decoder always share one embedding matrix.
        output_bias: give the pre-softmax projection a bias (a learned logit per token, untied). The paper's has
            none; models converted from a MarianMTModel (`from_marian`) carry Marian's `final_logits_bias` in it, as
            the opus-mt models have one.
    """

    model_type = "vanilla_transformer"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # the name since transformers 5.24, and before
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    vocab_size: int = 37000
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    dropout: float | int = 0.1
    attention_dropout: float | int = 0.0
    activation_dropout: float | int = 0.0
    activation_function: str = "relu"
    max_position_embeddings: int = 1024
    scale_embedding: bool = True
    normalize_before: bool = False
    layer_norm_eps: float = 1e-5
    init_std: float | None = None
    use_cache: bool = True
    is_encoder_decoder: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    decoder_start_token_id: int | None = 1
    tie_word_embeddings: bool = True
    output_bias: bool = False

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs) -> "VanillaTransformerConfig":
        """`PreTrainedConfig.from_dict`, refusing the config of another model type instead of guessing."""
        model_type = config_dict.get("model_type", cls.model_type)
        if model_type != cls.model_type:
            hint = (
                " Convert a MarianMTModel with `hf_vanilla_transformer.from_marian(MarianMTModel.from_pretrained(path))`."
                if model_type == "marian"
                else ""
            )
            raise ValueError(
                f"This config is for model type {model_type!r}, not {cls.model_type!r}: its weights would not fit "
                f"this model. Load it with its own class (AutoModelForSeq2SeqLM picks it).{hint}"
            )
        if unread := sorted(name for name in config_dict if _meant(name)):  # set by hand in a config.json
            logger.warning("The config holds %s, which VanillaTransformerConfig does not read: the model is built from "
                           "its fields alone, and the names are left out.", ", ".join(f"`{name}`" for name in unread))
            config_dict = {name: value for name, value in config_dict.items() if name not in unread}
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def base(cls, **kwargs) -> "VanillaTransformerConfig":
        """The paper's base model (Table 3): the defaults, 63M parameters with a 37000-token vocabulary (the paper
        says 65M, counted in a way it does not give)."""
        return cls(**kwargs)

    @classmethod
    def big(cls, **kwargs) -> "VanillaTransformerConfig":
        """The paper's "big" model (Table 3): d_model 1024, 16 heads, d_ff 4096, dropout 0.3 (its English-German
        model's; the English-French one used 0.1 [6.1]); 214M parameters with a 37000-token vocabulary (the paper says
        213M)."""
        return cls(**{**BIG_SIZES, **kwargs})

    def __post_init__(self, **kwargs):
        self._check_names(kwargs)
        super().__post_init__(**kwargs)
        self.check_values()

    def _check_names(self, extra: dict) -> None:
        """A ValueError for a keyword that is no field but plainly meant one (`_meant`); a warning for one spelt
        like a field (`d_modle`), which may also be a tool's own setting (transformers' tests set
        `layer_norm_epsilon` on every config and save it). Any extra keyword is kept, as PreTrainedConfig keeps them."""
        fields = {field.name for field in dataclasses.fields(self)} | set(self.attribute_map)
        for name in set(extra) - fields:  # attribute_map's names come here, to be mapped
            if meant := _meant(name):
                raise ValueError(f"`{name}` is not a VanillaTransformerConfig field: {meant}.")
            if close := difflib.get_close_matches(name, fields, n=1, cutoff=0.85):
                logger.warning("`%s` is not a VanillaTransformerConfig field, and the model does not read it: did you "
                               "mean `%s`?", name, close[0])

    def __setattr__(self, key, value):
        """`num_hidden_layers` and `num_attention_heads` (transformers' names) set N or h of both stacks, as the
        paper has one of each; read, they are the encoder's (`attribute_map`)."""
        if key in _SHARED_SIZES:
            super().__setattr__(f"encoder_{_SHARED_SIZES[key]}", value)
            key = f"decoder_{_SHARED_SIZES[key]}"
        super().__setattr__(key, value)

    def validate(self):
        """Checks run before `save_pretrained` writes the config, so later edits are validated too."""
        super().validate()
        self.check_values()

    def check_values(self):
        """Raise a ValueError naming the field, the value and what is allowed, for any impossible setting. numpy's
        numbers (a size from an array's shape, `np.float32(0.1)`) become plain ones, as JSON holds."""
        for field in dataclasses.fields(self):
            if (value := plain_number(getattr(self, field.name))) is not getattr(self, field.name):
                setattr(self, field.name, value)
        self._check_sizes()
        self._check_probabilities()
        self._check_activation()
        self._check_special_tokens()

    def _check_sizes(self):
        """Sizes must be positive and every head count must divide d_model."""
        for name in (
            "vocab_size",
            "d_model",
            "encoder_layers",
            "decoder_layers",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
        for name in ("encoder_attention_heads", "decoder_attention_heads"):
            heads = getattr(self, name)
            if self.d_model % heads:
                raise ValueError(
                    f"`{name}`={heads} does not divide `d_model`={self.d_model}: each of the h heads attends in "
                    f"d_model / h dimensions (section 3.2.2). Choose a head count among the divisors of d_model, "
                    f"e.g. {[h for h in (1, 2, 4, 8, 16, 32) if self.d_model % h == 0]}."
                )
        if not is_number(self.layer_norm_eps) or not 0 < self.layer_norm_eps < math.inf:  # NaN fails too
            raise ValueError(f"`layer_norm_eps` must be a finite number > 0, got {self.layer_norm_eps!r}.")
        if self.init_std is not None and (not is_number(self.init_std) or not 0 <= self.init_std < math.inf):
            raise ValueError(f"`init_std` must be None or a finite number >= 0, got {self.init_std!r}.")
        for name in ("scale_embedding", "normalize_before", "tie_word_embeddings", "output_bias", "use_cache",
                     "is_encoder_decoder"):  # "false" would be read as True
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"`{name}` must be True or False, got {getattr(self, name)!r}.")
        if not self.is_encoder_decoder:
            raise ValueError("`is_encoder_decoder` must be True, got False: the Transformer is an encoder-decoder "
                             "model, and generate() would give the decoder no source.")

    def _check_probabilities(self):
        """Dropout probabilities lie in [0, 1)."""
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            if not is_number(value) or not 0 <= value < 1:
                raise ValueError(f"`{name}` is a probability and must be a number in [0, 1), got {value!r}.")

    def _check_activation(self):
        """The feed-forward activation must be one transformers knows."""
        if self.activation_function not in ACT2FN:
            raise ValueError(
                f"`activation_function`={self.activation_function!r} is unknown; use one of "
                f"{sorted(ACT2FN)} (the paper uses 'relu')."
            )

    def _check_special_tokens(self):
        """Special token ids must index the vocabulary."""
        for name in ("pad_token_id", "bos_token_id", "decoder_start_token_id", "eos_token_id"):
            value = getattr(self, name)
            if isinstance(value, list) and not value:  # generate() reads its first id
                raise ValueError(f"`{name}` must be a token id, a non-empty list of them, or None, got [].")
            for token_id in value if isinstance(value, list) else [value]:
                if token_id is not None and (isinstance(token_id, bool) or not is_integer(token_id)):
                    raise ValueError(f"`{name}` must be a token id (an integer) or None, got {value!r}.")
                if token_id is not None and not 0 <= token_id < self.vocab_size:
                    raise ValueError(
                        f"`{name}`={value!r} lies outside the vocabulary [0, {self.vocab_size - 1}]: set it to the "
                        f"id your tokenizer gives that token, or enlarge `vocab_size`."
                    )


__all__ = ["VanillaTransformerConfig"]
