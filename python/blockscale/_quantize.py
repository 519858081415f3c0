"""quantize / quantize_into / measure_amax: the C++ quantize_options as keyword arguments."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _device
from ._native import core as _core
from ._tensor import QuantizedTensor, as_matrix, check_block_format

ScaleRule = _core.ScaleRule
Policy = Union[
    _core.NoTensorScale, _core.CurrentTensorScale, _core.PeriodicTensorScale, _core.DelayedTensorScale
]

# The scale-rule presets by name, as the library resolves them for FP4 elements (ocp_floor's
# target is 2^emax of the element format and rceil's its largest value, so for MXFP8's E4M3
# elements they are 256 and 448: `scale_rule(name, format)` resolves them per format).
RULES = {
    name: (rule.target, rule.rounding.name)
    for name in _core.registry()["scale_rules"]
    for rule in (_core.scale_rule_named(name, "nvfp4"),)
}


def scale_rule(rule: Union[str, ScaleRule, tuple], format: str = "nvfp4") -> ScaleRule:
    """A ScaleRule from a preset name (resolved for `format`'s elements), a ScaleRule, or a
    (target, rounding) pair."""
    if isinstance(rule, ScaleRule):
        return rule
    if isinstance(rule, str):
        return _core.scale_rule_named(rule, check_block_format(format))
    try:
        target, rounding = rule
    except (TypeError, ValueError):
        raise ValueError(f"rule must be a preset name, a ScaleRule or a (target, rounding) pair, "
                         f"not {rule!r}") from None
    return ScaleRule(float(target), _enum(_core.scale_rounding, rounding, "rule rounding"))


def _enum(kind: Any, value: Any, name: str) -> Any:
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value in kind.__members__:
        return kind.__members__[value]
    raise ValueError(f"{name} must be one of {', '.join(kind.__members__)}, not {value!r}")


def _sign_mask(signs: Union[None, int, Sequence[int]]) -> int:
    if signs is None:
        return _core.default_hadamard_sign_mask()
    if isinstance(signs, bool) or isinstance(signs, float):
        raise ValueError(f"hadamard_signs must be 16 values of +1 or -1 or a 16-bit mask, not {signs!r}")
    if isinstance(signs, (int, np.integer)):
        if not 0 <= int(signs) < 1 << 16:
            raise ValueError(f"hadamard_signs as a mask must fit 16 bits, not {signs}")
        return int(signs)
    values = [int(v) for v in signs]
    if len(values) != 16 or any(v not in (1, -1) for v in values):
        raise ValueError("hadamard_signs must be 16 values of +1 or -1 (or a 16-bit mask)")
    return sum(1 << i for i, v in enumerate(values) if v == -1)


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value < high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}), not {value!r}")
    return int(value)


def options(
    *,
    format: str = "nvfp4",
    shape: str = "rowwise",
    columnwise: bool = False,
    rule: Union[None, str, ScaleRule, tuple] = None,
    rounding: str = "nearest_even",
    seed: int = 0,
    offset: int = 0,
    hadamard: bool = False,
    hadamard_signs: Union[None, int, Sequence[int]] = None,
    encode_scale: float = 1.0,
    layout: str = "row_major",
    threads: int = 1,
) -> _core.QuantizeOptions:
    """The C++ quantize_options from keyword arguments (the defaults are the C++ defaults)."""
    o = _core.QuantizeOptions()
    o.shape = _enum(_core.block_shape, shape, "shape")
    o.columnwise = bool(columnwise)
    o.rule = None if rule is None else scale_rule(rule, format)
    o.rounding = _enum(_core.element_rounding, rounding, "rounding")
    o.seed, o.offset = _integer(seed, "seed", 0, 1 << 64), _integer(offset, "offset", 0, 1 << 64)
    o.hadamard = bool(hadamard)
    o.hadamard_sign_mask = _sign_mask(hadamard_signs)
    o.encode_scale = float(encode_scale)
    o.layout = _enum(_core.scale_layout, layout, "layout")
    o.threads = _integer(threads, "threads (0: all cores)", 0, 1 << 32)
    return o


def quantize(x: Any, format: str, *, policy: Optional[Policy] = None, stream: Any = None,
             **kwargs: Any) -> QuantizedTensor:
    """Quantizes the 2-D matrix x (numpy or torch CPU; float32, float16 or bfloat16, read in place)
    into `format` ("nvfp4", "mxfp4", "ue5m3_fp4", "mxfp8"). Blocks run along the last axis; with
    columnwise=True they run down the columns and the result holds the transpose.

    Keyword arguments are the C++ quantize_options: shape ("rowwise" | "tile"), columnwise, rule
    (preset name, ScaleRule or (target, rounding)), rounding ("nearest_even" | "stochastic"),
    seed, offset, hadamard, hadamard_signs, encode_scale (s_enc), layout ("row_major" |
    "tensor_core"), threads (0: all cores). With a tensor-scale `policy` the encode scale comes
    from the policy, which counts the call.

    A CUDA x (torch, CuPy, DLPack) is quantized on its device by the same rules, queued on
    `stream` (torch's current stream by default): the result's arrays are torch CUDA tensors, and
    the policy, if any, is a `device_policy` (its state on the device). The bits equal the CPU's.
    """
    if _device.is_device_array(x):
        t, element = _device.device_input(x)
        check_block_format(format)
        opts = _options(format, policy, kwargs)
        _core.check_options(format, t.shape[0], t.shape[1], opts)
        with _device.on_device(t, _device.stream_handle(t, stream)):  # the result on that stream
            out = QuantizedTensor.empty(format, opts.quantized_shape(t.shape[0], t.shape[1]),
                                        device=t)
            _quantize_on_device(t, element, out, opts, policy, stream)
        return out
    _refuse_stream(stream)
    array, element = as_matrix(x)
    check_block_format(format)
    opts = _options(format, policy, kwargs)
    _core.check_options(format, array.shape[0], array.shape[1], opts)
    out = QuantizedTensor.empty(format, opts.quantized_shape(array.shape[0], array.shape[1]))
    _quantize(array, element, out, opts, policy)
    return out


def quantize_into(x: Any, out: QuantizedTensor, *, policy: Optional[Policy] = None, stream: Any = None,
                  **kwargs: Any) -> dict:
    """Quantizes x into existing storage (made for x and the same options); returns the stats (on a
    CUDA device: an empty dict, as reading the counters would wait for the device; a device
    policy's `read()` has its last step's)."""
    if _device.is_device_array(x):
        if not out.is_cuda:
            raise ValueError("x is on a CUDA device and out is not: make out with "
                             "QuantizedTensor.empty(format, shape, device=x) or out.to(x.device)")
        t, element = _device.device_input(x)
        _quantize_on_device(t, element, out, _options(out.format, policy, kwargs), policy, stream)
        return {}
    _refuse_stream(stream)
    if out.is_cuda:
        raise ValueError(f"out is on {out.device} and x is not: quantize a CUDA x into it")
    array, element = as_matrix(x)
    for name in ("elements", "scales", "decode_scale_array"):
        if not getattr(out, name).flags.writeable:
            raise ValueError(f"out.{name} is read-only")
    return _quantize(array, element, out, _options(out.format, policy, kwargs), policy)


def _options(format: str, policy: Any, kwargs: dict) -> Any:
    if policy is not None and "encode_scale" in kwargs:
        raise ValueError("give either encode_scale or a policy (which sets the encode scale)")
    return options(format=format, **kwargs)


def _refuse_stream(stream: Any) -> None:
    if stream is not None:
        raise ValueError("stream is for CUDA inputs; x is on the CPU")


def _quantize_on_device(t: Any, element: str, out: QuantizedTensor, opts: Any, policy: Any,
                        stream: Any) -> None:
    cuda = _device.cuda_module()
    handle = _device.stream_handle(t, stream)
    if policy is not None and not isinstance(policy, _device.DevicePolicy):
        raise ValueError(f"policy is a host {type(policy).__name__}; a CUDA x takes a policy whose "
                         f"state is on the device: blockscale.device_policy(policy)")
    if policy is not None and _device.is_torch(t) and policy.device != t.device:
        raise ValueError(f"policy lives on {policy.device} and x on {t.device}")
    if policy is not None and policy.amax_hook is not None:
        # The hook's path updates the policy before the quantization checks out: check it first.
        want = opts.quantized_shape(t.shape[0], t.shape[1])
        have = out.shape_info
        fields = ("rows", "cols", "blocks", "layout", "columnwise", "hadamard")
        if any(getattr(want, f) != getattr(have, f) for f in fields):
            raise ValueError("out was made for another shape or other options than x's")
    arrays = (out.shape_info, out.elements, out.scales, out.decode_scale_array)
    with _device.on_device(t):
        if policy is None:
            cuda.quantize_into(t, element, out.format, *arrays, opts, None, handle)
        elif policy.amax_hook is None:
            cuda.quantize_into(t, element, out.format, *arrays, opts, policy._state, handle)
        else:  # measure, let the hook all-reduce the amax, apply, quantize
            cuda.policy_measure(t, element, out.format, opts, policy._state, handle)
            policy.amax_hook(policy.amax)
            cuda.policy_apply(out.format, opts, policy._state, handle)
            cuda.quantize_applied(t, element, out.format, *arrays, opts, policy._state, handle)
    out.stats = {}


def _quantize(array: np.ndarray, element: str, out: QuantizedTensor, opts: Any, policy: Any) -> dict:
    if isinstance(policy, _device.DevicePolicy):
        raise ValueError("policy is a device_policy and x is on the CPU: use the host policy")
    stats = _core.quantize_into(
        array, element, out.format, out.shape_info, out.elements, out.scales,
        out.decode_scale_array, opts, policy,
    )
    out.stats = stats
    return stats


def measure_amax(x: Any, format: str, *, stream: Any = None, **kwargs: Any) -> Any:
    """The tensor amax of x as quantizing it with these options sees it (after the Hadamard
    transform when enabled); NaN if any value is NaN. For a CUDA x, a float32 CUDA tensor of one
    element, measured on the device without waiting (float() of it waits)."""
    if _device.is_device_array(x):
        torch = _device._torch()
        opts = options(format=format, **kwargs)
        check_block_format(format)
        t, element = _device.device_input(x)
        handle = _device.stream_handle(t, stream)
        with _device.on_device(t, handle):
            bits = _device.empty((1,), "int32", t).zero_()
            _device.cuda_module().measure_amax(t, element, opts, bits, handle)
        return bits.view(torch.float32)
    _refuse_stream(stream)
    array, element = as_matrix(x)
    return _core.measure_amax(array, element, check_block_format(format),
                              options(format=format, **kwargs))


def fake_quantize(x: Any, format: str, *, dtype: Any = "float32", policy: Optional[Policy] = None,
                  stream: Any = None, **kwargs: Any) -> Any:
    """dequantize(quantize(x, ...)): the values a GEMM on the quantized x would see (for a
    columnwise quantization, those of the transpose); a torch CUDA tensor for a CUDA x."""
    q = quantize(x, format, policy=policy, stream=stream, **kwargs)
    return q.dequantize(dtype, threads=kwargs.get("threads", 1), stream=stream)
