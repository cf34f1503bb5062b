"""The label-smoothed loss [5.4] is computed a chunk of tokens at a time: the Trainer's `LabelSmoother` loss and
gradients (0, not NaN, over no labels), with no float32 copy of all the logits."""

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config
from torch.utils._python_dispatch import TorchDispatchMode
from transformers.trainer_pt_utils import LabelSmoother

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration, chunked_loss
from hf_vanilla_transformer.modeling_vanilla_transformer import translation_loss

VOCAB = 99


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 4 tokens, so that a tiny batch spans several, the last one short."""
    monkeypatch.setattr(chunked_loss, "CPU_CHUNK_ELEMENTS", 4 * VOCAB)
    monkeypatch.setattr(chunked_loss, "CHUNK_ELEMENTS", 4 * VOCAB)


def logits_and_labels(dtype, batch=3, length=7):
    generator = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(batch, length, VOCAB, generator=generator)).to(dtype).requires_grad_()
    labels = torch.randint(0, VOCAB, (batch, length), generator=generator)
    labels[0, 4:] = -100
    labels[2, 1] = -100
    return logits, labels


class LargestNewTensor(TorchDispatchMode):
    """Records the most elements of any tensor (of `dtype`, if given) that an op makes: views are not counted."""

    def __init__(self, dtype=None):
        super().__init__()
        self.dtype, self.largest = dtype, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            for tensor in torch.utils._pytree.tree_leaves(out):
                if isinstance(tensor, torch.Tensor) and self.dtype in (None, tensor.dtype):
                    self.largest = max(self.largest, tensor.numel())
        return out


@pytest.mark.parametrize("num_items_in_batch", [None, 40, torch.tensor(40)], ids=["count", "int", "tensor"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_and_gradients_are_the_label_smoothers(dtype, smoothing, num_items_in_batch):
    logits, labels = logits_and_labels(dtype)
    reference_logits = logits.detach().clone().requires_grad_()
    # the Trainer's LabelSmoother over float32 logits, as under autocast
    expected = LabelSmoother(epsilon=smoothing)({"logits": reference_logits.float()}, labels, num_items_in_batch=num_items_in_batch)
    expected.backward(torch.tensor(0.5))
    loss = translation_loss(logits, labels, num_items_in_batch, label_smoothing=smoothing)
    loss.backward(torch.tensor(0.5))
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-4)
    torch.testing.assert_close(logits.grad, reference_logits.grad)
    assert logits.grad[0, 4:].eq(0).all() and logits.grad[2, 1].eq(0).all()
    if smoothing == 0:  # and the model's loss before label smoothing moved into it
        flat = logits.detach().flatten(0, 1).float()
        plain = F.cross_entropy(flat, labels.flatten(), ignore_index=-100, reduction="sum")
        count = labels.ne(-100).sum() if num_items_in_batch is None else num_items_in_batch
        torch.testing.assert_close(loss, plain / count, rtol=0, atol=1e-4)


def test_no_labels_give_zero_loss_and_zero_gradients():
    logits, labels = logits_and_labels(torch.float32)
    loss = translation_loss(logits, torch.full_like(labels, -100), label_smoothing=0.1)
    loss.backward()
    assert loss.item() == 0.0 and logits.grad.eq(0).all()


def test_no_float32_copy_of_all_the_logits():
    logits, labels = logits_and_labels(torch.bfloat16)
    with LargestNewTensor(torch.float32) as plain:
        LabelSmoother(epsilon=0.1)({"logits": logits.float()}, labels).backward()
    assert plain.largest == logits.numel()  # the probe sees today's copy
    with LargestNewTensor(torch.float32) as chunked:
        translation_loss(logits, labels, label_smoothing=0.1).backward()
    assert chunked.largest <= 4 * VOCAB


def test_no_gradient_is_kept_without_grad():
    logits, labels = logits_and_labels(torch.bfloat16)
    with torch.no_grad(), LargestNewTensor() as probe:
        translation_loss(logits, labels, label_smoothing=0.1)
    assert probe.largest <= 4 * VOCAB


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_no_host_device_sync_on_cuda():
    """No `.item()` or the like: the loss and its backward can run inside a CUDA graph."""
    logits, labels = logits_and_labels(torch.bfloat16)
    logits, labels = logits.detach().cuda().requires_grad_(), labels.cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = translation_loss(logits, labels, labels.ne(-100).sum(), label_smoothing=0.1)
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    cpu_logits = logits.detach().cpu().requires_grad_()
    expected = LabelSmoother(epsilon=0.1)({"logits": cpu_logits.float()}, labels.cpu())
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected, rtol=0, atol=1e-4)
    torch.testing.assert_close(logits.grad.cpu(), cpu_logits.grad)


def test_skip_logits_returns_the_loss_alone(batch):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    out = model(**batch, label_smoothing=0.1, skip_logits=True)
    assert out.logits is None
    torch.testing.assert_close(out.loss, model(**batch, label_smoothing=0.1).loss)
    with pytest.raises(ValueError, match="needs `labels`"):
        model(batch["input_ids"], decoder_input_ids=batch["labels"], skip_logits=True)
