"""A tiny saved translation model (2+2 layers, d_model 32, 4 heads, random weights) with a BPE tokenizer trained on a
few sentences: what `scripts/train_translation.py` writes to its output directory, built in a second."""

from __future__ import annotations

from pathlib import Path

import torch

SENTENCES = [
    "Ein Hund läuft über die Wiese.",
    "A dog runs across the meadow.",
    "Zwei Kinder spielen im Park.",
    "Two children are playing in the park.",
    "Eine Frau liest ein Buch.",
    "A woman is reading a book.",
    "Der Mann fährt mit dem Fahrrad.",
    "The man is riding a bicycle.",
]

SOURCES = ["Ein Hund läuft.", "Zwei Kinder spielen im Park und lachen laut.", "Eine Frau liest.", "Der Mann."]


def make_tiny_model_dir(path: str | Path, *, seed: int = 0, max_new_tokens: int | None = 6) -> Path:
    """Save model, tokenizer and generation config to `path` (as `save_pretrained` does: no card) and return it."""
    from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer

    path = Path(path)
    tokenizer = train_bpe_tokenizer(SENTENCES, vocab_size=300, min_frequency=1)
    config = VanillaTransformerConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=128,
        **special_token_ids(tokenizer),
    )
    torch.manual_seed(seed)
    model = VanillaTransformerForConditionalGeneration(config).eval()
    if max_new_tokens is not None:  # keeps beam search over random weights short
        model.generation_config.max_new_tokens = max_new_tokens
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def load_script(name: str):
    """`scripts/<name>.py` as a module, to call its `main(argv)` in-process."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
