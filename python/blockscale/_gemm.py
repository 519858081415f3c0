"""The exact reference GEMM."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._native import core as _core
from ._tensor import QuantizedTensor

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
