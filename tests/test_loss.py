"""The label-smoothed loss [5.4] is computed a chunk of tokens at a time: the Trainer's `LabelSmoother` loss and
gradients (0, not NaN, over no labels), with no float32 copy of all the logits, also in a Trainer step."""

import copy
import importlib.util

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, tiny_config
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import Seq2SeqTrainer
from transformers.trainer_pt_utils import LabelSmoother

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration, chunked_loss
from hf_vanilla_transformer.errors import InputError
from hf_vanilla_transformer.modeling_vanilla_transformer import translation_loss
from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

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
    # the Trainer's LabelSmoother over float32 logits, as accelerate's autocast wrapper hands them over
    smoother = LabelSmoother(epsilon=smoothing)
    expected = smoother({"logits": reference_logits.float()}, labels, num_items_in_batch=num_items_in_batch)
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


def test_a_second_backward_or_a_gradient_of_the_gradient_is_refused_saying_what_to_do():
    """The gradient made in forward serves one first-order backward: a second one (retain_graph) or a graph of the
    gradient (create_graph: gradient penalties, MAML) would be silently wrong; each says how to get it instead."""
    logits, labels = logits_and_labels(torch.float32)
    loss = translation_loss(logits, labels, label_smoothing=0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="already backpropagated through .* compute the loss from the logits"):
        loss.backward()
    loss = translation_loss(logits, labels, label_smoothing=0.1)
    with pytest.raises(RuntimeError, match="cannot be differentiated twice .* compute the loss from the logits"):
        torch.autograd.grad(loss, logits, create_graph=True)


def test_torch_func_transforms_take_the_formulas_derivatives(batch):
    """Under `torch.func.grad` (and `vmap` over it: per-example gradients) the loss is the formula, not a gradient
    made in forward, which those transforms cannot use: the gradients a plain backward gives."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.0))
    batch = {**batch, "label_smoothing": 0.1}
    model(**batch).loss.backward()
    expected = {name: parameter.grad for name, parameter in model.named_parameters()}
    parameters = {name: parameter.detach() for name, parameter in model.named_parameters()}
    gradients = torch.func.grad(lambda p: torch.func.functional_call(model, p, (), batch).loss)(parameters)
    for name, gradient in gradients.items():
        torch.testing.assert_close(gradient, expected[name], rtol=1e-4, atol=1e-6, msg=name)


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


def make_trainer(tmp_path, **args):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.0))
    args = TokenBatchingSeq2SeqTrainingArguments(
        output_dir=str(tmp_path), label_smoothing_factor=0.1, report_to="none", use_cpu=True, **args
    )
    return TokenBatchingSeq2SeqTrainer(model=model, args=args)


def seq2seq_batch(model, batch=4, length=12):
    """As DataCollatorForSeq2Seq makes it. More target tokens (48) than d_model (32): all the logits outnumber any
    weight or its gradient."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, VOCAB, (batch, 9), generator=generator)
    labels = torch.randint(3, VOCAB, (batch, length), generator=generator)
    labels[1, 8:] = -100
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
    return dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels,
                decoder_input_ids=decoder_input_ids)


class NotCalled:
    epsilon = 0.1

    def __call__(self, *args, **kwargs):
        raise AssertionError("the LabelSmoother ran on the full logits")


@pytest.mark.parametrize("accumulated", [1, 3])
def test_trainer_step_hands_label_smoothing_to_the_model(tmp_path, accumulated):
    """Same loss and gradients as the Trainer's LabelSmoother path, also normalised over accumulated micro-batches."""
    trainer = make_trainer(tmp_path)
    batch = seq2seq_batch(trainer.model)
    count = accumulated * batch["labels"].ne(-100).sum()
    reference = copy.deepcopy(trainer.model)
    expected = Seq2SeqTrainer.compute_loss(trainer, reference, dict(batch), num_items_in_batch=count)
    expected.backward()

    trainer.label_smoother = NotCalled()
    loss = trainer.training_step(trainer.model, dict(batch), num_items_in_batch=count)
    torch.testing.assert_close(loss, expected.detach(), rtol=0, atol=1e-4)
    for (name, parameter), expected_parameter in zip(trainer.model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(parameter.grad, expected_parameter.grad, msg=name)


def test_evaluation_loss_is_the_label_smoothers(tmp_path):
    trainer = make_trainer(tmp_path)
    batch = seq2seq_batch(trainer.model)
    model = trainer.model.eval()
    with torch.no_grad():
        logits = model(**{name: value for name, value in batch.items() if name != "labels"}).logits
    expected = LabelSmoother(epsilon=0.1)({"logits": logits}, batch["labels"])
    trainer.label_smoother = NotCalled()
    loss, _, _ = trainer.prediction_step(model, dict(batch), prediction_loss_only=True)
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-4)


def test_bf16_trainer_step_makes_no_float32_copy_of_all_the_logits(tmp_path):
    trainer = make_trainer(tmp_path, bf16=True)
    model = trainer.accelerator.prepare_model(trainer.model)  # its forward under bf16 autocast, as in train()
    batch = seq2seq_batch(model)
    count = batch["labels"].ne(-100).sum()
    with LargestNewTensor(torch.float32) as probe:
        loss = trainer.training_step(model, dict(batch), num_items_in_batch=count)
    assert torch.isfinite(loss)
    assert 0 < probe.largest < batch["labels"].numel() * VOCAB


def test_benchmark_script_refuses_what_it_cannot_run(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("benchmark_loss", REPO / "scripts" / "benchmark_loss.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for flags, message in ((["--tokens", "0"], "--tokens must be at least 1, got 0"),
                           (["--label_smoothing", "1.5"], "--label_smoothing must be in [0, 1]"),
                           (["--device", "gpu"], "--device gpu: not a device name")):
        with pytest.raises(SystemExit) as exit_info:
            script.parse_arguments(flags)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(InputError, match="--device cuda:"):  # one line and exit 2 at the command line
        script.main(["--device", f"cuda:{torch.cuda.device_count()}", "--tokens", "8", "--vocab_size", "8"])


def test_benchmark_script_measures_both_losses(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("benchmark_loss", REPO / "scripts" / "benchmark_loss.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--tokens", "64", "--vocab_size", "500", "--repeats", "1"])
    output = capsys.readouterr().out
    assert "64 tokens x vocab 500, bfloat16 logits (0.1 MiB)" in output  # was "(0 MiB)"
    assert "label_smoother  peak" in output and "chunked         peak" in output and "x the speed" in output
    assert "n/a the memory" not in output and " 1 threads" not in output  # words, also for tiny sizes and 1 thread
