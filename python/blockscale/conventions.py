"""Named adapters between blockscale's tensor scale and other libraries' global scales.

blockscale takes the *encode* scale s_enc (``quantize(..., encode_scale=s_enc)``: x is multiplied
by it before block scales are chosen) and stores the *decode* scale s_dec = 1 / s_enc
(``QuantizedTensor.decode_scale``: value = element * block scale * s_dec). Libraries store one
of the two under other names:

===================== ==================================== ============ ============================
convention            where                                kind         value for amax
===================== ==================================== ============ ============================
compressed_tensors    ``weight_global_scale``,             divisor      448 * 6 / amax (*)
                      ``input_global_scale``
flashinfer            ``fp4_quantize(global_scale=...)``   divisor      448 * 6 / amax (*)
transformer_engine    NVFP4 ``s_enc``                      divisor      min(448 * 6 / amax, FLT_MAX)
modelopt              ``weight_scale_2``, ``input_scale``  multiplier   amax / (448 * 6)
torchao               ``NVFP4Tensor.per_tensor_scale``     multiplier   amax / (448 * 6)
===================== ==================================== ============ ============================

(*) computed in torch as fp32(1 / amax) * 2688, see `global_scale`.

A divisor is s_enc itself (q = x / (S_b / G) = x * G / S_b). A multiplier is s_dec. The two are
reciprocals only up to float32 rounding: 1 / (amax / 2688) need not equal 2688 / amax, so
``encode_scale(m, "modelopt")`` is within an ulp of what the peer quantized with. To decode a
peer's checkpoint exactly, build the tensor with its own value: ``QuantizedTensor.from_arrays(...,
decode_scale=decode_scale(value, convention))``.
"""

from __future__ import annotations

import math

import numpy as np

from ._native import core as _core

# The conventions and their kinds, from the library (contract/registry.hpp, block/global_scale.hpp).
CONVENTIONS = dict(_core.registry()["conventions"])


def kind(convention: str) -> str:
    """"divisor" (the value is s_enc) or "multiplier" (the value is s_dec)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r} (one of {', '.join(CONVENTIONS)})")
    return CONVENTIONS[convention]


def _float32(value: float, name: str) -> float:
    """`value` as the float32 the library computes with."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, not {value!r}") from None
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def _positive(value: float, name: str) -> float:
    v = _float32(value, name)
    if not (v > 0.0 and math.isfinite(v)):
        raise ValueError(f"{name} must be finite and positive in float32, not {value!r}")
    return v


def encode_scale(value: float, convention: str) -> float:
    """The s_enc to pass as ``quantize(..., encode_scale=...)`` for a global scale given in
    `convention` (float32 arithmetic)."""
    kind(convention)
    return _core.encode_scale_from_global(_positive(value, "a global scale"), convention)


def decode_scale(value: float, convention: str) -> float:
    """The s_dec (``QuantizedTensor.decode_scale``) for a global scale given in `convention`: the
    value itself for a multiplier, fp32(1 / value) for a divisor."""
    kind(convention)
    return _core.decode_scale_from_global(_positive(value, "a global scale"), convention)


def from_blockscale(encode: float, convention: str) -> float:
    """The value `convention` stores for a tensor quantized with s_enc = `encode`: s_enc for a
    divisor, 1 / s_enc (blockscale's decode_scale, bit for bit) for a multiplier."""
    kind(convention)
    return _core.global_scale_from_encode(_positive(encode, "encode scale"), convention)


def global_scale(amax: float, convention: str, numerator: float = 448.0 * 6.0) -> float:
    """The global scale `convention` computes from a tensor amax, as that library computes it in
    float32 (the C++ ``global_scale``, bit for bit):

    - compressed_tensors, flashinfer: ``2688 / amax_tensor`` in torch, which torch evaluates as
      fp32(1 / amax) * 2688 (two roundings; an ulp from the correctly rounded quotient for about
      a quarter of amaxes), and 1 where that is not finite or not positive (compressed-tensors'
      nan_to_num);
    - transformer_engine: the correctly rounded quotient of the magnitude, capped at FLT_MAX (so
      amax = 0 and -0 give FLT_MAX), 1 where it is 0 or NaN: CurrentTensorScale's rule, bit for
      bit;
    - modelopt, torchao: fp32(amax / 2688), 1 where that is zero, negative or not finite.
    """
    kind(convention)
    return _core.global_scale(_float32(amax, "amax"), convention,
                              _float32(numerator, "numerator"))
