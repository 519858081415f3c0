"""Scalar conversion of whole arrays: float -> codes of a format, and codes -> float32."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._native import core as _core

# The library's rounding tags by name (contract/registry.hpp), and stochastic rounding beside them.
ROUNDINGS = tuple(_core.registry()["convert_roundings"]) + ("stochastic",)


def convert(
    x: Any,
    format: str,
    rounding: str = "nearest_even",
    overflow: str = "saturate",
    random_bits: Optional[Any] = None,
) -> np.ndarray:
    """The codes (uint8, x's shape) of x converted to the scalar `format`, correctly rounded.

    x: float32 or float64 values (float16 and bfloat16 widen to float32 exactly first).
    rounding: nearest_even, nearest_away, toward_zero, up, down, to_odd, or stochastic (which
        needs `random_bits`, one uint32 per element: round away iff fraction + bits >= 2^32).
    overflow: "saturate" (to the largest finite value) or "nonfinite" (to Inf, or NaN where the
        format has no Inf; only for formats that have one of them).
    NaN gives the format's NaN (its largest finite value where it has none); negative values
    convert to an unsigned format's smallest code.
    """
    array = _numpy(x)
    if array.dtype not in (np.float32, np.float64):
        if array.dtype == np.float16 or array.dtype.name == "bfloat16":
            array = array.astype(np.float32)
        else:
            raise ValueError(f"x must hold floating-point values, not {array.dtype}")
    shape = array.shape
    array = np.ascontiguousarray(array).reshape(-1)
    codes = np.empty(shape, np.uint8)
    bits = None
    if random_bits is not None:
        bits = _numpy(random_bits)
        if bits.dtype != np.uint32 or bits.shape != shape:
            raise ValueError(f"random_bits must be a uint32 array of x's shape {shape}, not "
                             f"{bits.dtype} {bits.shape}")
        bits = np.ascontiguousarray(bits)
    _core.convert(array, codes.reshape(-1), format, rounding, overflow,
                  None if bits is None else bits.reshape(-1))
    return codes


def decode(codes: Any, format: str) -> np.ndarray:
    """The float32 values of the codes (uint8 array of any shape) of the scalar `format`."""
    array = _numpy(codes)
    shape = array.shape
    array = np.ascontiguousarray(array).reshape(-1)
    if array.dtype != np.uint8:
        if array.dtype.itemsize == 1:
            array = array.view(np.uint8)
        else:
            raise ValueError(f"codes must be uint8, not {array.dtype}")
    values = np.empty(shape, np.float32)
    _core.decode(array, values.reshape(-1), format)
    return values


def _numpy(x: Any) -> np.ndarray:
    """numpy arrays as they are; torch tensors (any device is refused but the CPU) through numpy,
    bfloat16 widened to float32 and FP8 viewed as its codes."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        import torch

        t = x.detach()
        if t.device.type != "cpu":
            raise ValueError(f"tensor is on {t.device}; blockscale's Python package runs on the CPU")
        if t.dtype == torch.bfloat16:
            t = t.float()
        elif t.element_size() == 1 and t.dtype not in (torch.uint8, torch.int8):
            t = t.view(torch.uint8)
        return t.numpy()
    array = np.asarray(x)
    if array.dtype.byteorder == ">":
        raise ValueError("big-endian arrays are not supported; use .astype(native dtype)")
    return array
