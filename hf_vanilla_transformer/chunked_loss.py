"""The label-smoothed cross-entropy [5.4] computed a chunk of tokens at a time: the model's loss machinery, kept out
of the modeling file, which imports it relatively so that `save_pretrained` ships it with the model.

Cross-entropy over bf16 logits is computed in float32, and the plain way (`log_softmax(logits.float())`) makes
float32 copies of all the logits and keeps one for backward: with 25k tokens a step and a 37k vocabulary, each copy
is 3.7 GB. `cross_entropy_sum` takes one chunk of rows at a time: its float32 log-softmax, its loss, and the
gradient with respect to its logits (softmax minus the smoothed target), written in the logits' dtype and kept for
backward, which only scales it. Nothing syncs with the device, so loss and backward can run inside a CUDA graph."""

import torch
import torch.nn.functional as F

CPU_CHUNK_ELEMENTS = 2**20  # logits upcast at a time on the CPU: 4 MiB in float32 stay in its caches (fastest)
CHUNK_ELEMENTS = 2**24  # and on accelerators: 64 MiB in float32, few kernel launches


class ChunkedCrossEntropy(torch.autograd.Function):
    """Sum over rows whose label is not -100 of (1 - s) * -log p(label) + s * mean over the vocabulary of -log p."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, smoothing: float, with_grad: bool) -> torch.Tensor:
        rows, vocab = logits.shape
        size = max(1, (CPU_CHUNK_ELEMENTS if logits.device.type == "cpu" else CHUNK_ELEMENTS) // vocab)
        total = logits.new_zeros((), dtype=torch.float32)
        grad = torch.empty_like(logits) if with_grad else None
        for start in range(0, rows, size):
            end = start + size
            log_probs = torch.log_softmax(logits[start:end], dim=1, dtype=torch.float32)
            kept = labels[start:end].ne(-100)
            target = labels[start:end].clamp(min=0).unsqueeze(1)
            loss = (smoothing - 1) * log_probs.gather(1, target).squeeze(1) - smoothing * log_probs.mean(dim=1)
            total = total + torch.where(kept, loss, 0.0).sum()
            if grad is not None:  # softmax - ((1 - s) * one_hot(label) + s / vocab), 0 on rows left out
                probs = log_probs.exp_().scatter_add_(1, target, log_probs.new_full(target.shape, smoothing - 1))
                weight = kept.to(probs.dtype).unsqueeze(1)
                torch.addcmul(weight * (-smoothing / vocab), probs, weight, out=grad[start:end])
        if grad is not None:
            ctx.save_for_backward(grad)
        return total

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        # The kept gradient is scaled in place, so that backward makes no second tensor the size of the logits: it
        # serves one backward, of the first order.
        if torch.is_grad_enabled():
            raise RuntimeError(
                "The model's loss cannot be differentiated twice (create_graph=True): it computes its gradient in "
                f"the forward pass. {COMPUTE_IT_YOURSELF}"
            )
        if getattr(ctx, "used", False):
            raise RuntimeError(
                "The model's loss was already backpropagated through (retain_graph=True keeps the graph, but the "
                f"loss's gradient serves one backward). {COMPUTE_IT_YOURSELF}"
            )
        ctx.used = True
        (grad,) = ctx.saved_tensors
        return grad.mul_(grad_output), None, None, None


COMPUTE_IT_YOURSELF = (
    "For gradients of gradients or several backward passes, compute the loss from the logits: call the model "
    "without `labels` (with `decoder_input_ids`, e.g. from `model.prepare_decoder_input_ids_from_labels(labels)`) and "
    "take `F.cross_entropy(outputs.logits.flatten(0, 1).float(), labels.flatten(), label_smoothing=...)`."
)


def cross_entropy_sum(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """The label-smoothed cross-entropy of `logits` (rows, vocab) summed over `labels` (rows,) that are not -100, in
    float32 (with `label_smoothing` 0, `F.cross_entropy(logits.float(), labels, reduction="sum")`).

    Under torch.compile the formula is written out instead: the compiler fuses the upcast into its softmax kernels,
    and the chunk loop would make it compile anew for every number of chunks. So it is under torch.func's transforms
    (`torch.func.grad`), which take the formula's derivatives, not a gradient made in forward."""
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum", label_smoothing=label_smoothing)
    with_grad = torch.is_grad_enabled() and logits.requires_grad
    return ChunkedCrossEntropy.apply(logits, labels, label_smoothing, with_grad)
