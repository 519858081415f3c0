"""blockscale: exact 4-bit block-scaled floating point (NVFP4, MXFP4, UE5M3-FP4, MXFP8).

Bindings over the blockscale C++ library: every value is computed by the same code as its C++
API. `simd` says which build of the extension runs ("avx512" or "portable"; the same bits).
CUDA tensors run on their device through the CUDA extension where it was built
(`cuda_available()`); `blockscale.torch` holds the recipe Linear.
See docs/python.md in the repository.
"""

from . import conventions
from ._native import core as _core
from ._native import simd

CurrentTensorScale = _core.CurrentTensorScale
DelayedTensorScale = _core.DelayedTensorScale
NoTensorScale = _core.NoTensorScale
PeriodicTensorScale = _core.PeriodicTensorScale
QuantizedShape = _core.QuantizedShape
ScaleRule = _core.ScaleRule
default_rule = _core.default_rule
from ._device import DevicePolicy, cuda_available, device_policy
from ._gemm import gemm, gemm_reference, gemm_takes
from ._quantize import RULES, fake_quantize, measure_amax, options, quantize, quantize_into, scale_rule
from ._scalar import ROUNDINGS, convert, decode
from ._tensor import (BLOCK_FORMATS, SCALAR_FORMAT_TRAITS, SCALAR_FORMATS, QuantizedTensor,
                      block_formats, dequantize, register_block_formats, scale_offsets)

# One version for the library and the package: include/blockscale/config.hpp, read by the build
# (pyproject.toml) and compiled into the extension.
__version__ = _core.registry()["version"]

__all__ = [
    "BLOCK_FORMATS", "SCALAR_FORMATS", "SCALAR_FORMAT_TRAITS", "ROUNDINGS", "RULES",
    "QuantizedTensor", "QuantizedShape", "ScaleRule",
    "NoTensorScale", "CurrentTensorScale", "PeriodicTensorScale", "DelayedTensorScale",
    "quantize", "quantize_into", "measure_amax", "fake_quantize", "dequantize", "options",
    "scale_rule", "default_rule", "convert", "decode", "gemm", "gemm_reference", "gemm_takes",
    "scale_offsets",
    "block_formats", "register_block_formats", "conventions", "simd",
    "DevicePolicy", "device_policy", "cuda_available",
]
