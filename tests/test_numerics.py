"""Numerics: masks use the dtype's minimum; padded rows, half precision and very long inputs stay finite; a loss
over no labels is 0, not NaN."""

import pytest
import torch
from conftest import tiny_config

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer import modeling_vanilla_transformer as modeling


def make(dtype=torch.float32, **overrides):
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config(**overrides)).eval().to(dtype)


def padded_batch():
    input_ids = torch.randint(3, 99, (3, 9), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 5:] = 0
    attention_mask[2] = 0  # a source that is all padding
    labels = torch.randint(3, 99, (3, 6), generator=torch.Generator().manual_seed(1))
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_padding_masks_use_the_dtype_minimum(dtype, monkeypatch):
    seen, eager = [], modeling.eager_attention_forward

    def recording_eager(module, query, key, value, attention_mask, **kwargs):
        seen.append(attention_mask)
        return eager(module, query, key, value, attention_mask, **kwargs)

    model = make(dtype, attn_implementation="eager")
    monkeypatch.setattr(modeling, "eager_attention_forward", recording_eager)
    with torch.no_grad():
        model(**padded_batch())
    masks = [m for m in seen if m is not None]
    assert masks and all(m.dtype == dtype for m in masks)
    assert all(m.min() == torch.finfo(dtype).min and m.max() == 0 for m in masks)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_padded_rows_and_half_precision_are_finite(dtype, attn_implementation):
    model = make(dtype, attn_implementation=attn_implementation)
    batch = padded_batch()
    with torch.no_grad():
        out = model(**batch)
        generated = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=4)
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    assert generated.shape[0] == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_very_long_inputs_are_finite(dtype):
    model = make(dtype, max_position_embeddings=16)
    ids = torch.randint(3, 99, (1, 2048))
    with torch.no_grad():
        logits = model(input_ids=ids, decoder_input_ids=ids[:, :1024]).logits
    assert torch.isfinite(logits).all()


def test_a_loss_over_no_labels_is_zero_with_zero_gradients():
    model = make().train()
    batch = padded_batch()
    batch["labels"][:] = -100
    loss = model(**batch).loss
    assert loss.item() == 0.0
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_trainer_style_normalisation_by_items_in_batch():
    model = make()
    batch = padded_batch()
    count = (batch["labels"] != -100).sum()
    torch.testing.assert_close(model(**batch, num_items_in_batch=count).loss, model(**batch).loss)
    # under gradient accumulation the Trainer passes the count over all micro-batches: the sum is divided by it
    torch.testing.assert_close(model(**batch, num_items_in_batch=3 * count).loss, model(**batch).loss / 3)
    torch.testing.assert_close(model(**batch, num_items_in_batch=int(3 * count)).loss, model(**batch).loss / 3)
    assert model(**{**batch, "labels": torch.full_like(batch["labels"], -100)}, num_items_in_batch=0).loss == 0


def test_a_model_cast_to_bfloat16_and_back_has_float32_position_encodings(tmp_path):
    """The encodings are computed [3.5], not learned: a model loaded in bfloat16 (or cast to it) and cast back to
    float32 computes them again in float32, as a model made in float32 has them, not bfloat16's rounding of them."""
    made = make()
    made.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path, dtype=torch.bfloat16)
    for model in (make().to(torch.bfloat16).float(), loaded.float()):
        for stack in (model.model.encoder, model.model.decoder):
            table = stack.embed_positions.table
            assert table.dtype == torch.float32
            assert torch.equal(table, made.model.encoder.embed_positions.table)


def test_a_model_made_on_the_meta_device_and_given_memory_has_its_position_encodings():
    """Made on the meta device, then `to_empty()` and `load_state_dict()` (accelerate's and torch's way to load a
    large model): the table, not saved, was left as uninitialised memory, and the model translated garbage."""
    made = make()
    with torch.device("meta"):
        model = VanillaTransformerForConditionalGeneration(made.config)
    model.to_empty(device="cpu")
    model.load_state_dict(made.state_dict())
    for stack in (model.model.encoder, model.model.decoder):
        assert torch.equal(stack.embed_positions.table, made.model.encoder.embed_positions.table)
    ids = torch.tensor([[5, 6, 7, 2]])
    torch.testing.assert_close(model.eval()(ids, labels=ids).logits, made.eval()(ids, labels=ids).logits)
