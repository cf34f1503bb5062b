"""Linear layers that multiply by a packed copy of their weight in CPU inference: the model's speed machinery,
kept out of the modeling file, which imports it relatively so that `save_pretrained` ships it with the model.

A decoding step multiplies a few rows (batch x beams) by each weight matrix, and a plain sgemm call spends much of
that repacking the weight into the layout its kernel reads. `PrepackedLinear` packs the weight once and reuses it
until the weight changes, with the GEMM library that measured fastest on the CPU at hand (`FP32_GEMM`):

- "mkl": MKL's packed sgemm on Intel CPUs, where it measured fastest (the op Inductor uses for frozen fp32 weights).
  Its packing is for one row count, so it serves decoding steps (one new position per sequence) only; results are
  the plain path's. MKL takes generic code paths on other vendors' CPUs, where it gained nothing.
- "onednn": oneDNN's packed weights (as Inductor packs bf16/fp16 weights) on other x86 CPUs: oneDNN picks its
  kernels by instruction set, not vendor. One packing serves every row count, so it also serves the encoder and
  the cross-attention keys/values. Each call costs some 15 us more than sgemm's, which a small weight does not win
  back (`MIN_PACKED_WEIGHT`). Results equal the plain path's within float rounding (another library sums in
  another order), about 1e-6 relative.
- None: elsewhere (ARM, no MKL/oneDNN in this torch): `nn.Linear` as usual.

`quantize_int8(model)` switches the layers to dynamic int8 quantization instead (PyTorch's fbgemm kernels, as
`torch.ao.quantization.quantize_dynamic` uses): int8 per-channel weights, activations quantized per call.
"""

import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers.cache_utils import Cache
from transformers.utils import is_torchdynamo_compiling


@dataclass(frozen=True)
class PackedGemm:
    """How a GEMM library packs a weight (for a row count, if `per_row_count`) and multiplies by the packed copy."""

    name: str
    pack: Callable  # (weight, bias, rows) -> packed
    linear: Callable  # (input, packed, weight, bias) -> output
    per_row_count: bool = False


def _int8_pack(weight: torch.Tensor, bias: torch.Tensor | None, rows: int):
    """Symmetric per-output-channel int8 weights, packed with the bias for fbgemm."""
    scales = (weight.abs().amax(dim=1) / 127).clamp(min=1e-8).double()
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # fbgemm's packing takes a quantized tensor, a type torch deprecates (#184982)
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, bias)


MKL = PackedGemm(
    "mkl",
    pack=lambda weight, bias, rows: torch.ops.mkl._mkl_reorder_linear_weight(weight, rows),
    linear=lambda x, packed, weight, bias: torch.ops.mkl._mkl_linear(x, packed, weight, bias, x.shape[:-1].numel()),
    per_row_count=True,
)
ONEDNN = PackedGemm(
    "onednn",
    pack=lambda weight, bias, rows: torch.ops.mkldnn._reorder_linear_weight(weight),
    linear=lambda x, packed, weight, bias: torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], ""),
)
# reduce_range: 7-bit activations, so that AVX2's pairwise int8 products cannot saturate (as quantize_dynamic does)
INT8 = PackedGemm(
    "int8",
    pack=_int8_pack,
    linear=lambda x, packed, weight, bias: torch.ops.quantized.linear_dynamic(x, packed, True),
)


def cpu_vendor() -> str:
    """The CPU's vendor id (GenuineIntel, AuthenticAMD, ...), or '' where the system does not say."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()  # Windows: "Intel64 Family 6 Model 85 Stepping 7, GenuineIntel"


def choose_fp32_gemm(machine: str | None = None, vendor: str | None = None) -> PackedGemm | None:
    """MKL's packing on Intel x86 CPUs, oneDNN's on other x86 CPUs, none elsewhere."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return None
    vendor = cpu_vendor() if vendor is None else vendor
    if "GenuineIntel" in vendor and torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear"):
        return MKL
    if torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return ONEDNN
    return None


FP32_GEMM = choose_fp32_gemm()
MIN_PACKED_WEIGHT = {"onednn": 100_000}
"""The fewest weight entries a GEMM's packing is used for. oneDNN on an AMD EPYC (AVX-512, 2 threads), 4 to 64 rows:
0.3-0.95x sgemm's speed at 65,536 entries (256 x 256, 128 x 512) and below, 1.06-1.7x at 131,072 (256 x 512,
128 x 1024), 1.2-4.7x at 262,144 and above; a d_model 64 model decoded 1.4x slower with every layer packed."""
INT8_AVAILABLE = bool({"fbgemm", "x86"} & set(torch.backends.quantized.supported_engines))


def is_decoding_step(hidden_states: torch.Tensor) -> bool:
    """One new position per sequence: (batch, 1, features)."""
    return hidden_states.dim() == 3 and hidden_states.shape[1] == 1


class PrepackedLinear(nn.Linear):
    """`nn.Linear` that, in inference on the CPU (eval, fp32, no grad), multiplies by a packed copy of its weight:
    `FP32_GEMM`'s (MKL's in decoding steps only), or int8 weights once `quantize_int8` has switched it. The copy is
    made on first use and kept until the weight changes (in place, or through `.data`: see `forget_packed_if_edited`),
    the module is moved, or `train()`/`eval()` is called; the weight itself stays an fp32 Parameter (saving, tied
    weights and training are unchanged). Inductor packs weights itself under `torch.compile`, so compiled code takes
    the plain path.
    """

    int8: bool = False
    _packed: tuple | None = None  # (key: rows, weight and bias storage and version; packed; checksum)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        gemm = self._packed_gemm(hidden_states)
        if gemm is None:
            return super().forward(hidden_states)
        packed = self._packed_weight(gemm, hidden_states.shape[:-1].numel())
        return gemm.linear(hidden_states, packed, self.weight, self.bias)

    def _packed_gemm(self, hidden_states: torch.Tensor) -> PackedGemm | None:
        """The packed GEMM for this input, or None for the plain path."""
        if not (
            not (self.training or torch.is_grad_enabled() or is_torchdynamo_compiling())
            and hidden_states.device.type == "cpu"
            and hidden_states.dtype == self.weight.dtype == torch.float32
            and hidden_states.numel() > 0
            and not torch.is_autocast_enabled("cpu")  # autocast's lower precision, which the packed GEMMs skip
            and type(self.weight.data) is torch.Tensor  # not a quantized or otherwise wrapped weight
            and not self.weight.is_inference()  # made under inference_mode: no version counter to see changes by
        ):
            return None
        if self.int8:
            return INT8
        if FP32_GEMM is None or (FP32_GEMM.per_row_count and not is_decoding_step(hidden_states)) \
                or self.weight.numel() < MIN_PACKED_WEIGHT.get(FP32_GEMM.name, 0):
            return None
        return FP32_GEMM

    def _weight_identity(self) -> tuple:
        """The weight's and bias's storage, version and shape: what an in-place change or a new tensor changes (a
        smaller new weight, `resize_token_embeddings`'s, may start where the old one did, at the same version)."""
        tensors = (self.weight,) if self.bias is None else (self.weight, self.bias)
        return tuple((t.data_ptr(), t._version, t.shape) for t in tensors)

    def _packed_weight(self, gemm: PackedGemm, rows: int):
        key = (gemm.name, rows if gemm.per_row_count else None, *self._weight_identity())
        if self._packed is None or self._packed[0] != key:
            self._packed = (key, gemm.pack(self.weight, self.bias, rows), self._weight_checksum())
        return self._packed[1]

    def _weight_checksum(self) -> torch.Tensor:
        """Each row of the weight times one fixed vector of distinct values, and the bias: what
        `forget_packed_if_edited` compares. Changing any entry changes its row's value, and so does moving entries
        within a row (a permutation of units), but for an exact cancellation. One pass over the weight, as a
        decoding step makes."""
        weight = self.weight.detach()
        mix = torch.linspace(1.0, 2.0, weight.shape[1], dtype=weight.dtype, device=weight.device)
        checksum = weight @ mix
        return checksum if self.bias is None else torch.cat([checksum, self.bias.detach()])

    def forget_packed_if_edited(self) -> None:
        """Drop the packed copy if the weight changed without torch counting it: an in-place edit through `.data`
        (`weight.data += delta`, as PEFT merges LoRA weights and some EMA code updates, or `fc2.weight.data[:, units]
        = 0`, an ablation) leaves the version counter as it was. A checksum of every row (`_weight_checksum`) shows
        any such edit. The model calls this when it starts on new input: the encoder at each call, the decoder and
        the output projection at the first position of a decoding."""
        if self._packed is None:
            return
        if type(self.weight.data) is not torch.Tensor or self._packed[0][2:] != self._weight_identity():
            self._packed = None  # sharded (FSDP's DTensor between forwards) or replaced: packed anew when used
        elif not torch.equal(self._packed[2], self._weight_checksum()):
            self._packed = None

    def train(self, mode: bool = True):
        self._packed = None  # releases the packed copy
        return super().train(mode)

    def _apply(self, fn, recurse=True):
        self._packed = None
        return super()._apply(fn, recurse)

    def __getstate__(self):  # copy.deepcopy and pickle: the packed copy is an opaque buffer, rebuilt on use
        return {**super().__getstate__(), "_packed": None}


def forget_edited_packed_weights(model: nn.Module) -> None:
    """`PrepackedLinear.forget_packed_if_edited` for each of the model's layers holding a packed copy. A training
    step skips the walk: `train()` dropped every packed copy, and compiled code never uses them."""
    if model.training or is_torchdynamo_compiling():
        return
    for module in model.modules():
        if isinstance(module, PrepackedLinear) and module._packed is not None:
            module.forget_packed_if_edited()


def forget_weights_edited_before_new_input(
    module: nn.Module, inputs: torch.Tensor | None, cache: Cache | None = None
) -> None:
    """`forget_edited_packed_weights` for a part of the model that starts on new input: the encoder at every call,
    the decoder and the output projection at the first position of a decoding (an empty cache, or none: every
    forward that scores whole targets). So `generate()` and a hand-written decoding loop on a given encoder output
    see a weight edited through `.data` since the last call. Skipped where nothing is packed (training, torch.compile,
    off the CPU), so that a static cache's length is never read from an accelerator."""
    if module.training or is_torchdynamo_compiling() or inputs is None or inputs.device.type != "cpu":
        return
    if cache is None or int(cache.get_seq_length()) == 0:
        forget_edited_packed_weights(module)


def quantize_int8(model: nn.Module, enabled: bool = True) -> nn.Module:
    """Dynamic int8 quantization of the model's linear layers for inference on the CPU (in place; returns the model).

    Each `PrepackedLinear` multiplies by int8 per-channel weights (made on first use) with activations quantized
    per call, in eval mode without grad on the CPU in fp32: what generate(), the pipeline and translate.py run. The
    fp32 weights stay as they are, so the output projection stays tied to the embedding, `save_pretrained` saves
    the fp32 model, and training (grad enabled) uses them. `quantize_int8(model, False)` switches back.
    """
    if enabled and not INT8_AVAILABLE:
        raise RuntimeError(
            "int8 quantization needs PyTorch's fbgemm kernels (x86 CPUs with AVX2), which this torch or CPU lacks "
            f"(quantized engines: {torch.backends.quantized.supported_engines})."
        )
    layers = [module for module in model.modules() if isinstance(module, PrepackedLinear)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no PrepackedLinear layers to quantize.")
    if enabled and (dtype := layers[0].weight.dtype) != torch.float32:  # the packed path is fp32's: it did nothing
        raise ValueError(f"int8 quantization packs float32 weights, and the model's are {dtype} (a model saved so "
                         "loads so): convert it first with model.float().")
    for layer in layers:
        layer.int8 = enabled
        layer._packed = None
    return model
