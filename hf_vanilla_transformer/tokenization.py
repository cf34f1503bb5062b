"""One BPE vocabulary shared by source and target, as the paper's shared source-target vocabulary [5.1].

Byte-level BPE (GPT-2's pre-tokenizer, no prefix space): every string encodes without `<unk>` and decodes back
to itself, spaces, umlauts and all, "</s>" typed in a sentence too (the special tokens are ids the tokenizer adds,
never read from text). The post-processor appends `</s>` to every sequence, source and target; the model starts
decoding from `<s>` (`decoder_start_token_id`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from .errors import InputError

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN]  # ids 0, 1, 2, 3 in this order


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    model_max_length: int | None = None,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts` (source and target sentences together) and wrap it for transformers.

    Special tokens get ids pad=0, bos=1, eos=2, unk=3. The result is `save_pretrained`-able and reloads with
    `AutoTokenizer.from_pretrained`. `vocab_size` counts them and the 256 bytes of the base alphabet.
    """
    if isinstance(texts, (str, bytes)):  # iterated, a file name or a corpus in one string is its characters
        raise TypeError(
            "train_bpe_tokenizer takes the sentences, an iterable of strings (a list, a generator over a file's "
            f"lines), got one {type(texts).__name__}: {str(texts)[:60]!r}."
        )
    least = len(SPECIAL_TOKENS) + len(pre_tokenizers.ByteLevel.alphabet())
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < least:
        raise ValueError(f"vocab_size must be an integer of at least {least} (the special tokens and the 256 bytes), "
                         f"got {vocab_size!r}.")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"min_frequency must be an integer >= 0, got {min_frequency!r}.")
    backend = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    eos_id = backend.token_to_id(EOS_TOKEN)
    backend.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS_TOKEN}", pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}", special_tokens=[(EOS_TOKEN, eos_id)]
    )
    optional = {} if model_max_length is None else {"model_max_length": model_max_length}
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        split_special_tokens=True,  # "</s>" or "<pad>" in a sentence is text, not an end or padding (saved with it)
        **optional,
    )


def translation_texts(dataset, source_lang: str, target_lang: str, batch_size: int = 1000) -> Iterator[str]:
    """Yield the source and target sentence of each row of a Dataset with a `translation` column (pass train only)."""
    for batch in dataset.iter(batch_size=batch_size):
        for pair in batch["translation"]:
            yield pair[source_lang]
            yield pair[target_lang]


def special_token_ids(tokenizer) -> dict[str, int]:
    """The ids a model config needs: pad, bos, eos, and decoder_start (= bos `<s>`)."""
    ids = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.bos_token_id,
    }
    missing = [name for name, value in ids.items() if value is None]
    if missing:
        raise ValueError(f"The tokenizer has no {missing}; set pad_token, bos_token and eos_token on it.")
    return ids


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def load_tokenizer(name_or_path: str | Path, **kwargs):
    """`AutoTokenizer.from_pretrained(name_or_path, **kwargs)`, with a clear error when a local model folder has no
    tokenizer, or a tokenizer config without the files it needs."""
    path = Path(name_or_path)
    remedy = (f"Save the tokenizer the model was trained with into it (`tokenizer.save_pretrained('{path}')`; the "
              "training script also takes one with --tokenizer_name).")
    if path.is_dir() and not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise InputError(f"{path} has no tokenizer (no tokenizer.json or tokenizer_config.json). {remedy}")
    for name in ("tokenizer.json", "tokenizer_config.json"):  # a damaged file: named, not JSON's bare complaint
        if path.is_dir() and (path / name).is_file():
            try:
                json.loads((path / name).read_bytes())
            except ValueError as error:
                raise InputError(f"{path / name} is damaged (not JSON: {error}). {remedy}") from error
    try:
        return AutoTokenizer.from_pretrained(name_or_path, **kwargs)
    except ValueError as error:
        if "backend tokenizer" not in str(error):
            raise
        if path.is_dir():  # a tokenizer_config.json without tokenizer.json
            raise InputError(f"{path} has a tokenizer config but not the tokenizer (tokenizer.json). {remedy}") from error
        raise InputError(  # a Hub repository without tokenizer files: transformers names none of them
            f"{name_or_path} has no tokenizer (no tokenizer.json, nor the files of another tokenizer kind): push the "
            "tokenizer the model was trained with beside it (`tokenizer.push_to_hub(...)`, or scripts/push_to_hub.py "
            "on the training run's folder)."
        ) from error
