"""The model's checks of what it is given: a ValueError that says what was wrong and how to fix it, where torch or
transformers would fail deep inside (an IndexError in the embedding) or compute something wrong without a word (a mask
of the wrong shape). Kept out of the modeling file, which imports it relatively so that `save_pretrained` ships it.

On the CPU a check reads the values; on an accelerator that read would wait for the device (a host-device sync,
which stalls training and breaks CUDA graphs), so there a check runs on the device (`torch._assert_async`), and the
training script checks its data where it makes it. Under torch.compile the value checks are skipped.
"""

from collections.abc import Mapping

import torch
from torch.nn.attention.flex_attention import BlockMask
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import is_torchdynamo_compiling, logging

logger = logging.get_logger(__name__)


def on_host(tensor: torch.Tensor) -> bool:
    """Whether reading the tensor's values is free (on the CPU), not a host-device sync."""
    return tensor.device.type == "cpu"


def may_skip_mask(padding_mask: torch.Tensor | None) -> bool:
    """transformers drops a padding mask without padding (so SDPA can pick its fastest kernel) after reading all of
    it; on an accelerator that read is a sync, so there the mask is kept."""
    return padding_mask is None or on_host(padding_mask)


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


def check_id_matrix(name: str, ids) -> None:
    """Ids (token ids, labels) are a tensor of integers of shape (batch, length)."""
    check_is_tensor(name, ids)
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer token ids (torch.long), got dtype {ids.dtype}.")
    if ids.dtype not in (torch.long, torch.int32):  # what an embedding indexes with; uint8 holds ids below 256 only
        raise ValueError(f"`{name}` must hold token ids as torch.long (or torch.int32), got dtype {ids.dtype}: convert "
                         "them with `.long()`.")
    if ids.dim() != 2:
        hint = ": add the batch dimension (`ids[None]`), or tokenize a list of sentences" if ids.dim() == 1 else ""
        raise ValueError(f"`{name}` must have shape (batch, length), got {tuple(ids.shape)}{hint}.")


def check_id_batch(name: str, ids) -> None:
    """Input ids are a tensor of integers of shape (batch > 0, length > 0)."""
    check_id_matrix(name, ids)
    if ids.shape[1] == 0:
        raise ValueError(f"`{name}` is empty (length 0): every sequence needs at least one token.")
    if ids.shape[0] == 0:
        raise ValueError(f"`{name}` is an empty batch (0 sequences): give at least one sentence.")


def check_token_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Token ids are integers in [0, vocab_size) of shape (batch, length > 0): a ValueError saying so, not an
    IndexError deep inside torch. One min/max reduction; skipped under torch.compile."""
    check_id_batch(name, ids)
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
    check_id_matrix("labels", labels)
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


def warn_if_labels_never_end(labels: torch.Tensor, eos_token_id, pad_token_id) -> None:
    """A warning (once) where no row of labels ends with the end token: a model trained on them never learns to
    stop, and translates to the length limit. A bare `tokenizers` BPE appends none; transformers' translation
    tokenizers (Marian's, this package's `train_bpe_tokenizer`) do. Read on the CPU only (the collator's labels)."""
    if eos_token_id is None or not isinstance(labels, torch.Tensor) or not on_host(labels) or labels.numel() == 0 \
            or is_torchdynamo_compiling():
        return
    end_ids = torch.tensor(eos_token_id).flatten()
    real = labels != -100
    if pad_token_id is not None and pad_token_id not in end_ids:
        real &= labels != pad_token_id  # padding; a pad that is the end token too ends the rows it pads
    last = torch.where(real, torch.arange(labels.shape[1]), -1).amax(dim=1)  # each row's last real label
    rows = last >= 0
    if not rows.any():
        return
    ends = labels[rows, last[rows]]
    if not torch.isin(ends, end_ids).any():
        logger.warning_once(
            f"No row of `labels` ends with the end token (eos_token_id {eos_token_id}): a model trained on them "
            "never learns to stop, and translates until the length limit. Make the tokenizer append it to the "
            "targets (transformers' translation tokenizers and `hf_vanilla_transformer.tokenization."
            "train_bpe_tokenizer` do; a bare `tokenizers` BPE needs a post-processor, `TemplateProcessing(single="
            "\"$A </s>\", ...)`)."
        )


def check_mask(name: str, mask: torch.Tensor | None, expected: tuple[int, int]) -> None:
    """A 2-D padding mask has the (batch, length) of what it masks; 4-D masks are taken as prepared. Skipped under
    torch.compile, where a static cache's length is a tensor. Flex attention's BlockMask, which generate() prepares
    for a static cache, is refused: with it the model (and MarianMTModel) decodes other tokens than with sdpa."""
    if mask is None:
        return
    if isinstance(mask, BlockMask):
        raise ValueError(
            f"`{name}` is a flex attention BlockMask, as generate() passes with attn_implementation="
            "\"flex_attention\" and cache_implementation=\"static\": that combination decodes other tokens than "
            "sdpa and eager do (transformers 5.24 and torch 2.13; MarianMTModel as well). Use flex attention with "
            "the default (dynamic) cache, or sdpa with the static cache."
        )
    check_is_tensor(name, mask)
    if mask.dim() == 4 and not (mask.dtype == torch.bool or mask.dtype.is_floating_point):
        raise ValueError(
            f"`{name}` is a 4-D mask of dtype {mask.dtype}: a prepared mask is boolean (True where a query may attend) "
            "or float (added to the attention scores: 0, or -inf where masked). A padding mask of 1s and 0s is 2-D, "
            "(batch, length)."
        )
    if mask.dim() == 4 or is_torchdynamo_compiling():
        return
    expected = tuple(int(size) for size in expected)
    if tuple(mask.shape) != expected:
        raise ValueError(
            f"`{name}` has shape {tuple(mask.shape)} but must be (batch, length) = {expected}: 1 for tokens to "
            "attend to, 0 for padding."
        )


def as_encoder_output(encoder_outputs, d_model: int) -> BaseModelOutput:
    """`encoder_outputs` as a BaseModelOutput: given as one, as a tuple (the last hidden state first), a dict of the
    encoder's outputs or the last hidden state alone. A ValueError where that state is no (batch, source length,
    d_model) tensor, which torch would meet as "mat1 and mat2 shapes cannot be multiplied"."""
    if isinstance(encoder_outputs, torch.Tensor):
        encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs)
    elif isinstance(encoder_outputs, Mapping) and not isinstance(encoder_outputs, BaseModelOutput):
        if unknown := sorted(set(encoder_outputs) - {"last_hidden_state", "hidden_states", "attentions"}):
            raise ValueError(f"`encoder_outputs` given as a dict holds the encoder's outputs by name "
                             f"(`last_hidden_state`, `hidden_states`, `attentions`), not {unknown}.")
        encoder_outputs = BaseModelOutput(**encoder_outputs)
    elif not isinstance(encoder_outputs, BaseModelOutput):
        encoder_outputs = BaseModelOutput(*encoder_outputs)
    states = encoder_outputs.last_hidden_state
    if not isinstance(states, torch.Tensor) or states.dim() != 3 or states.shape[-1] != d_model:
        got = tuple(states.shape) if isinstance(states, torch.Tensor) else type(states).__name__
        raise ValueError(f"`encoder_outputs` must hold the encoder's last hidden state, a tensor of shape (batch, "
                         f"source length, d_model={d_model}), first; got {got}.")
    return encoder_outputs


def batch_of(ids, embeds) -> torch.Tensor | None:
    """The ids (batch, length) or embeddings (batch, length, d_model) given, to compare batch sizes by; None where
    they are missing or of another shape, which their own check names."""
    if isinstance(ids, torch.Tensor):
        return ids if ids.dim() == 2 else None
    if isinstance(embeds, torch.Tensor):
        return embeds if embeds.dim() == 3 else None
    return None


def check_one_target_per_source(subject: str, targets, sources) -> None:
    """Targets (decoder inputs, labels) pair with sources row by row. The decoder's batch may be a multiple of the
    encoder's in generate() (a source's beams share its encoder output), but elsewhere such a batch would pair
    targets with the wrong sources, quietly. `subject` starts the message: "`labels` has"."""
    if isinstance(targets, torch.Tensor) and isinstance(sources, torch.Tensor) and targets.dim() > 1 \
            and sources.dim() > 1 and targets.shape[0] != sources.shape[0]:
        raise ValueError(
            f"{subject} batch size {targets.shape[0]} but the sources {sources.shape[0]}: give one target per source "
            "(repeat a source to train on several targets of it)."
        )
