"""Shared fixtures: tiny configs so every unit test runs in seconds."""

import os
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # helper modules of the tests (hub_server, ...)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(min(2, torch.get_num_threads()))


def tiny_config(**overrides):
    """A 2+2-layer, d_model 32 model over a 99-token vocabulary (pad 0, bos/start 1, eos 2)."""
    from hf_vanilla_transformer import VanillaTransformerConfig

    sizes = dict(
        vocab_size=99,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        max_position_embeddings=64,
    )
    return VanillaTransformerConfig(**{**sizes, **overrides})


@pytest.fixture
def config_factory():
    return tiny_config


@pytest.fixture
def batch():
    """Two source sentences (the second padded) and their targets."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, 99, (2, 9), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0
    input_ids[1, 6:] = 0
    labels = torch.randint(3, 99, (2, 7), generator=generator)
    labels[:, -1] = 2
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
