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

import numpy as np

CONVENTIONS = {
    "compressed_tensors": "divisor",
    "flashinfer": "divisor",
    "transformer_engine": "divisor",
    "modelopt": "multiplier",
    "torchao": "multiplier",
}

_F32 = np.float32
_FLT_MAX = np.finfo(np.float32).max


def kind(convention: str) -> str:
    """"divisor" (the value is s_enc) or "multiplier" (the value is s_dec)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r} (one of {', '.join(CONVENTIONS)})")
    return CONVENTIONS[convention]


def _reciprocal(value: float) -> float:
    with np.errstate(divide="ignore", over="ignore"):
        return float(_F32(1.0) / _F32(value))


def encode_scale(value: float, convention: str) -> float:
    """The s_enc to pass as ``quantize(..., encode_scale=...)`` for a global scale given in
    `convention` (float32 arithmetic)."""
    v = float(_F32(value))
    if not (v > 0.0 and np.isfinite(v)):
        raise ValueError(f"a global scale must be finite and positive, not {value}")
    return v if kind(convention) == "divisor" else _reciprocal(v)


def decode_scale(value: float, convention: str) -> float:
    """The s_dec (``QuantizedTensor.decode_scale``) for a global scale given in `convention`."""
    v = float(_F32(value))
    if not (v > 0.0 and np.isfinite(v)):
        raise ValueError(f"a global scale must be finite and positive, not {value}")
    return v if kind(convention) == "multiplier" else _reciprocal(v)


def from_blockscale(encode: float, convention: str) -> float:
    """The value `convention` stores for a tensor quantized with s_enc = `encode`: s_enc for a
    divisor, 1 / s_enc (blockscale's decode_scale, bit for bit) for a multiplier."""
    e = float(_F32(encode))
    if not (e > 0.0 and np.isfinite(e)):
        raise ValueError(f"encode scale must be finite and positive, not {encode}")
    return e if kind(convention) == "divisor" else _reciprocal(e)


def global_scale(amax: float, convention: str, numerator: float = 448.0 * 6.0) -> float:
    """The global scale `convention` computes from a tensor amax, as that library computes it in
    float32:

    - compressed_tensors, flashinfer: ``2688 / amax_tensor`` in torch, which torch evaluates as
      fp32(1 / amax) * 2688 (two roundings; an ulp from the correctly rounded quotient for about
      a quarter of amaxes), and 1 where that is not finite (compressed-tensors' nan_to_num);
    - transformer_engine: the correctly rounded quotient capped at FLT_MAX (so amax = 0 gives
      FLT_MAX), 1 where it is 0 or NaN: CurrentTensorScale's rule, bit for bit;
    - modelopt, torchao: fp32(amax / 2688), 1 where that is zero or not finite.
    """
    a = _F32(amax)
    n = _F32(numerator)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if convention in ("compressed_tensors", "flashinfer"):
            g = float((_F32(1.0) / a) * n)
        elif convention == "transformer_engine":
            g = min(float(n / a), float(_FLT_MAX))
            return g if g > 0.0 else 1.0  # 0 (amax = Inf) and NaN give 1
        else:
            g = float(a / n) if kind(convention) == "multiplier" else float(n / a)
    return g if (g > 0.0 and np.isfinite(g)) else 1.0
