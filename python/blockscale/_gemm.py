"""The GEMMs: the exact reference on the host, and the device GEMM on CUDA operands."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._native import core as _core
from ._tensor import QuantizedTensor, block_format_parts

_EMPTY = np.zeros((0, 0), np.float32)


def _operand(x: Any, name: str) -> tuple:
    if isinstance(x, QuantizedTensor):
        return (x.format, x.shape_info, x.elements, x.scales, x.decode_scale, _EMPTY)
    array = np.asarray(x)
    if array.dtype != np.float32 or array.ndim != 2:
        raise ValueError(f"{name} must be a QuantizedTensor or a 2-D float32 array")
    if array.shape[1] > 1 and array.strides[1] != 4 or array.shape[0] > 1 and array.strides[0] < 4 * array.shape[1]:
        array = np.ascontiguousarray(array)
    return ("", _core.QuantizedShape(), np.zeros(0, np.uint8), np.zeros(0, np.uint8), 1.0, array)


def gemm_reference(a: Any, b: Any, *, alpha: float = 1.0, beta: float = 0.0,
                   c: Optional[np.ndarray] = None, threads: int = 1) -> np.ndarray:
    """C = alpha * A @ B.T + beta * C, summed exactly and rounded once to float32.

    a (M x K) and b (N x K) are QuantizedTensors quantized along K (one may be a float32 matrix);
    a Hadamard transform must be on both or neither. c (M x N float32) is updated in place when
    given (beta == 0: not read), else a new array is returned. Bit-identical for any threads.
    """
    ops = (_operand(a, "a"), _operand(b, "b"))  # checked before anything is read or allocated
    transformed = [x.hadamard for x in (a, b) if isinstance(x, QuantizedTensor)]
    if len(transformed) == 1 and transformed[0]:
        raise ValueError("gemm_reference: the quantized operand is Hadamard-transformed and the float "
                         "one is not; quantize both with hadamard=True so that the transform cancels")
    if not (isinstance(threads, (int, np.integer)) and 0 <= threads < 2**32):
        raise ValueError(f"threads must be an integer >= 0 (0: all cores), not {threads!r}")
    m, n = (a.shape[0], b.shape[0])
    if c is None:
        c = np.zeros((m, n), np.float32)
    elif not (isinstance(c, np.ndarray) and c.dtype == np.float32 and c.shape == (m, n)):
        raise ValueError(f"c must be a float32 array of shape {(m, n)}")
    elif not c.flags.writeable:
        raise ValueError("c is read-only")
    elif n > 1 and c.strides[1] != 4 or m > 1 and c.strides[0] < 4 * n:
        raise ValueError("c must have contiguous rows in order (unit stride along its last axis)")
    _core.gemm_reference(*ops[0], *ops[1], c, float(alpha), float(beta), int(threads))
    return c


# The output dtypes of the device GEMM (cuda/gemm.cuh: FP32 or BF16 out).
_GEMM_OUTPUTS = ("float32", "bfloat16")


def gemm_takes(a: Any, b: Any) -> bool:
    """Whether `gemm` multiplies a and b: QuantizedTensors on one CUDA device, of one block format
    with E2M1 elements (nvfp4, mxfp4, ue5m3_fp4), the same K, a multiple of the block size, and
    the same Hadamard transform (on both with the same signs, or on neither)."""
    return _gemm_refusal(a, b) is None


def _gemm_refusal(a: Any, b: Any) -> Optional[str]:
    """Why `gemm` refuses a and b, or None."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, QuantizedTensor):
            return f"{name} must be a QuantizedTensor, not {type(x).__name__}"
        if not x.is_cuda:
            return (f"{name} is on the CPU: gemm runs the device GEMM on CUDA QuantizedTensors "
                    f"(gemm_reference is the exact GEMM on the host)")
    if a.elements.device != b.elements.device:
        return f"a is on {a.device} and b on {b.device}"
    if a.shape[1] != b.shape[1]:
        return f"a is {a.shape[0]} x {a.shape[1]} but b is {b.shape[0]} x {b.shape[1]}: both need the same K"
    refusal = _format_refusal(("a", "b"), (a.format, b.format), a.shape[1])
    if refusal is not None:
        return refusal
    if a.hadamard != b.hadamard or a.hadamard and \
            a.shape_info.hadamard_sign_mask != b.shape_info.hadamard_sign_mask:
        return "a and b disagree on the Hadamard transform"
    return None


def _format_refusal(names: tuple, formats: tuple, k: int) -> Optional[str]:
    """Why the device GEMM refuses operands `names` of block formats `formats` over K = `k`, or
    None: what both the quantized tensors (`gemm_takes`) and a recipe's operands before
    quantization (blockscale.torch) decide it by."""
    (name_a, name_b), (format_a, format_b) = names, formats
    if format_a != format_b:
        return f"{name_a} is {format_a} and {name_b} {format_b}: the device GEMM takes one format for both"
    parts = block_format_parts(format_a)
    if parts["element"] != "e2m1":
        return f"{format_a} has {parts['element']} elements: the device GEMM takes E2M1 formats only"
    if k % parts["block_size"] != 0:
        return f"K = {k} is not a multiple of the block size {parts['block_size']}"
    return None


def gemm(a: QuantizedTensor, b: QuantizedTensor, *, alpha: float = 1.0, beta: float = 0.0,
         c: Any = None, dtype: Any = "float32", stream: Any = None):
    """C = alpha * A @ B.T + beta * C on a CUDA device: the block-scaled GEMM of cuda/gemm.cuh,
    queued on `stream` (torch's current stream by default); nothing waits for it.

    a (M x K) and b (N x K) are CUDA QuantizedTensors that `gemm_takes`. c, when given, is a
    float32 or bfloat16 torch CUDA tensor of shape (M, N) with contiguous rows, updated in place
    (beta == 0: not read); else a new tensor of `dtype` ("float32" or "bfloat16") is returned.
    The device chooses the kernel: Hopper's warpgroup MMA where the extension was built for sm_90a,
    the sm_120a block-scaled MMA for NVFP4 and MXFP4, else the BF16 MMA on dequantized operands.
    The first call on a device asks it, once, which of them its code has (a synchronisation).
    """
    import torch

    from . import _device

    refusal = _gemm_refusal(a, b)
    if refusal is not None:
        raise ValueError(f"gemm: {refusal}")
    m, n = a.shape[0], b.shape[0]
    names = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
    handle = _device.stream_handle(a.elements, stream)
    with _device.on_device(a.elements, handle):  # c allocated on the stream the GEMM runs on
        if c is None:
            element = _output_name(dtype, names)
            if beta != 0:
                raise ValueError("gemm: beta is nonzero but no c was given to accumulate into")
            c = _device.empty((m, n), element, a.elements)
        else:
            if not (_device.is_torch(c) and c.device == a.elements.device and c.dtype in names):
                raise ValueError(f"gemm: c must be a float32 or bfloat16 torch tensor on {a.device}")
            if tuple(c.shape) != (m, n):
                raise ValueError(f"gemm: c must have shape {(m, n)}, not {tuple(c.shape)}")
            if c.requires_grad:
                raise ValueError("gemm: c requires grad, and gemm writes it in place (pass "
                                 "c.detach() or no c)")
            element = names[c.dtype]
        _device.cuda_module().gemm(a.format, a.shape_info, a.elements, a.scales,
                                   a.decode_scale_array, b.shape_info, b.elements, b.scales,
                                   b.decode_scale_array, c, element, float(alpha), float(beta),
                                   handle)
    return c


def _output_name(dtype: Any, names: dict) -> str:
    """The name of a GEMM output dtype: "float32" or "bfloat16", given by name, torch dtype or
    numpy / ml_dtypes dtype."""
    if dtype in names:
        return names[dtype]
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in _GEMM_OUTPUTS:
        raise ValueError(f"gemm: dtype must be float32 or bfloat16, not {dtype!r}")
    return name
