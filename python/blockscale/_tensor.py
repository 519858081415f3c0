"""QuantizedTensor and the array plumbing between numpy / torch and the C++ core."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from ._native import core as _core

try:  # bfloat16 for numpy
    import ml_dtypes

    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    ml_dtypes = None
    _BFLOAT16 = None

# The library's closed lists (contract/registry.hpp): the preset block formats with their parts, and
# the scalar formats with their properties. _PARTS also gains the formats extension modules register.
_REGISTRY = _core.registry()
_PARTS = dict(_REGISTRY["block_formats"])
BLOCK_FORMATS = tuple(_PARTS)  # the presets
SCALAR_FORMATS = tuple(_REGISTRY["scalar_formats"])
# Each scalar format's properties by name: bits, signed, exponent_bits, mantissa_bits, bias,
# subnormals, specials ("none", "nan_only" or "inf_and_nan") and max (the largest finite value).
SCALAR_FORMAT_TRAITS = {name: dict(traits)
                        for name, traits in _REGISTRY["scalar_format_traits"].items()}


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "numpy") and hasattr(x, "dtype")


def as_matrix(x: Any, name: str = "x") -> tuple[np.ndarray, str]:
    """A 2-D input as a numpy array sharing x's memory, and its element type's name.

    numpy arrays (float32, float16, ml_dtypes.bfloat16), torch CPU tensors (float32, float16,
    bfloat16), DLPack producers and buffer-protocol objects are read in place; bfloat16 travels as its 16-bit patterns. Only an array whose rows
    are not each contiguous and in order (a transposed or reversed view) is copied.
    """
    if _is_torch(x):
        import torch

        if x.device.type != "cpu":
            raise ValueError(f"{name} is on {x.device}; blockscale's Python package runs on the CPU")
        t = x.detach()
        if t.dtype == torch.bfloat16:
            array, element = t.view(torch.int16).numpy(), "bfloat16"
        elif t.dtype in (torch.float32, torch.float16):
            array = t.numpy()
            element = "float32" if t.dtype == torch.float32 else "float16"
        else:
            raise ValueError(f"{name} must be float32, float16 or bfloat16, not {t.dtype}")
    else:
        if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
            x = np.from_dlpack(x)  # any DLPack producer on the CPU (JAX, CuPy host, ...)
        array = np.asarray(x)  # numpy, or the buffer protocol
        if array.dtype == np.float32:
            element = "float32"
        elif array.dtype == np.float16:
            element = "float16"
        elif _BFLOAT16 is not None and array.dtype == _BFLOAT16:
            array, element = array.view(np.uint16), "bfloat16"
        else:
            raise ValueError(
                f"{name} must be float32, float16 or bfloat16, not {array.dtype} "
                f"(convert it with {name}.astype(numpy.float32) first)"
            )
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, not {array.ndim}-D (shape {array.shape})")
    rows, cols = array.shape
    unit_columns = cols <= 1 or array.strides[1] == array.itemsize
    forward_rows = rows <= 1 or (array.strides[0] >= cols * array.itemsize
                                 and array.strides[0] % array.itemsize == 0)
    aligned = array.ctypes.data % array.itemsize == 0
    if not (unit_columns and forward_rows and aligned):  # e.g. a transposed or reversed view
        array = np.array(array, order="C")  # a fresh, aligned copy
    return array, element


def check_block_format(format: str) -> str:
    if format not in _PARTS:
        raise ValueError(f"unknown block format {format!r} (one of {', '.join(_PARTS)})")
    return format


def block_format_parts(format: str) -> dict:
    """A block format's parts: element and scale format names, block size (the registry's)."""
    return _PARTS[check_block_format(format)]


def block_formats() -> tuple[str, ...]:
    """The block formats the package knows: the presets (BLOCK_FORMATS), then those registered."""
    return tuple(_PARTS)


def register_block_formats(module: Any) -> tuple[str, ...]:
    """Makes the block formats an extension module was compiled for usable by every function of the
    package, by name; returns their names. The module's `block_format_ops()` returns a capsule of
    tables made by host/format_ops.hpp from the same version of the headers (docs/python.md, "Block
    formats outside the presets"). Registering a module again changes nothing."""
    ops = getattr(module, "block_format_ops", None)
    if ops is None:
        raise ValueError(f"{getattr(module, '__name__', module)!r} has no block_format_ops(): it is "
                         "not a blockscale format module")
    names = tuple(_core.register_block_formats(ops()))
    _PARTS.update(_core.registry()["block_formats"])
    return names


@dataclass
class QuantizedTensor:
    """A block-scaled matrix: element codes, block-scale codes and the decode scale s_dec.

    elements: uint8 [rows, row_bytes]; FP4 packs two codes per byte, element 2i in the low nibble;
        rows are padded with zero codes to a multiple of the block size.
    scales: uint8 codes of the scale format; [rows, blocks_per_row] in the row-major layout (a 16x16
        tile repeats its code on each of its rows), the padded 1-D buffer in the tensor-core layout.
    A decoded value is element * block scale * decode_scale.
    """

    format: str
    shape_info: _core.QuantizedShape
    elements: np.ndarray
    scales: np.ndarray
    decode_scale_array: np.ndarray = field(repr=False)
    stats: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, format: str, shape: _core.QuantizedShape, device: Any = None) -> "QuantizedTensor":
        """Zero-filled storage for a quantized matrix of `format` and `shape`: numpy arrays, or
        with `device` (a CUDA device, or a CUDA tensor whose device to use) torch CUDA tensors."""
        need = _core.storage(check_block_format(format), shape)
        rows = shape.rows
        row_bytes, blocks = need["row_bytes"], need["blocks_per_row"]
        scale_shape = ((rows, blocks) if shape.layout == _core.scale_layout.row_major
                       else (need["scale_bytes"],))
        if device is not None and not (isinstance(device, str) and device == "cpu"):
            import torch

            from . import _device

            if _device.is_torch(device):
                where = device.device
            elif _device.is_device_array(device):  # another producer: the current device
                where = torch.device("cuda", torch.cuda.current_device())
            else:
                where = torch.device(device)
            elements = torch.zeros((rows, row_bytes), dtype=torch.uint8, device=where)
            scales = torch.zeros(scale_shape, dtype=torch.uint8, device=where)
            return cls(format, shape, elements, scales, torch.ones(1, dtype=torch.float32, device=where))
        elements = np.zeros((rows, row_bytes), np.uint8)
        scales = np.zeros(scale_shape, np.uint8)
        assert elements.size == need["element_bytes"] and scales.size == need["scale_bytes"]
        return cls(format, shape, elements, scales, np.ones(1, np.float32))

    @classmethod
    def from_arrays(
        cls,
        format: str,
        elements: Any,
        scales: Any,
        decode_scale: float,
        cols: int,
        *,
        shape: str = "rowwise",
        layout: str = "row_major",
        columnwise: bool = False,
        hadamard: bool = False,
        hadamard_sign_mask: Optional[int] = None,
    ) -> "QuantizedTensor":
        """Wraps existing codes (from a checkpoint, another library) without copying them.

        elements: C-contiguous uint8 [rows, row_bytes] (torch float4_e2m1fn_x2 / float8 tensors
        are viewed as uint8); scales: [rows, blocks_per_row] in the row-major layout, the padded
        buffer in the tensor-core layout. Read-only arrays can be dequantized and multiplied.
        """
        from ._quantize import _enum, _integer

        info = _core.QuantizedShape()
        e, s = _as_codes(elements, "elements"), _as_codes(scales, "scales")
        if e.ndim != 2:
            raise ValueError(f"elements must be 2-D [rows, row_bytes], not shape {e.shape}")
        info.rows, info.cols = e.shape[0], _integer(cols, "cols", 0, 1 << 62)
        info.blocks = _enum(_core.block_shape, shape, "shape")
        info.layout = _enum(_core.scale_layout, layout, "layout")
        info.columnwise, info.hadamard = bool(columnwise), bool(hadamard)
        if hadamard_sign_mask is not None:
            info.hadamard_sign_mask = _integer(hadamard_sign_mask, "hadamard_sign_mask", 0, 1 << 16)
        d = np.float32(decode_scale)
        if not (np.isfinite(d) and d > 0):
            raise ValueError(f"decode_scale must be finite and positive in float32, not {decode_scale!r}")
        need = _core.storage(check_block_format(format), info)
        if e.shape != (info.rows, need["row_bytes"]):
            raise ValueError(f"{format} {info.rows}x{info.cols}: elements must be "
                             f"[{info.rows}, {need['row_bytes']}] uint8, not {list(e.shape)} "
                             f"(needs {need['element_bytes']} element bytes)")
        want = ((info.rows, need["blocks_per_row"]) if info.layout == _core.scale_layout.row_major
                else (need["scale_bytes"],))
        if s.shape != want and not (s.size == need["scale_bytes"] and s.ndim == 1):
            raise ValueError(f"{format} {info.rows}x{info.cols}: scales must be {list(want)} uint8 "
                             f"({need['scale_bytes']} bytes), not {list(s.shape)}")
        return cls(format, info, e, s, np.array([d], np.float32))

    # -- metadata --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.shape_info.rows, self.shape_info.cols)

    @property
    def decode_scale(self) -> float:
        """s_dec (for a tensor on a CUDA device, reading it waits for the device)."""
        return float(self.decode_scale_array[0])

    @property
    def device(self) -> str:
        """Where the codes live: "cpu", or the CUDA device's name ("cuda:0")."""
        return "cpu" if isinstance(self.elements, np.ndarray) else str(self.elements.device)

    @property
    def is_cuda(self) -> bool:
        return self.device != "cpu"

    def to(self, device: Any) -> "QuantizedTensor":
        """The same codes on `device` ("cpu", "cuda", "cuda:1", a torch.device): self when they
        already live there, else a copy (torch's copy, in its current stream)."""
        import torch

        where = torch.device(device)
        if where.type == "cpu":
            if not self.is_cuda:
                return self
            parts = [t.cpu().numpy() for t in (self.elements, self.scales, self.decode_scale_array)]
        else:
            if where.index is None:  # "cuda": the current device
                where = torch.device("cuda", torch.cuda.current_device())
            if self.is_cuda and self.elements.device == where:
                return self
            parts = [torch.as_tensor(a).to(where) for a in
                     (self.elements, self.scales, self.decode_scale_array)]
        return QuantizedTensor(self.format, self.shape_info, *parts, dict(self.stats))

    def cpu(self) -> "QuantizedTensor":
        return self.to("cpu")

    def cuda(self, device: Any = "cuda") -> "QuantizedTensor":
        return self.to(device)

    @property
    def element_format(self) -> str:
        return _PARTS[self.format]["element"]

    @property
    def scale_format(self) -> str:
        return _PARTS[self.format]["scale"]

    @property
    def block_size(self) -> int:
        return _PARTS[self.format]["block_size"]

    @property
    def blocks_per_row(self) -> int:
        return -(-self.shape_info.cols // self.block_size)

    @property
    def layout(self) -> str:
        return self.shape_info.layout.name

    @property
    def blocks(self) -> str:
        return self.shape_info.blocks.name

    @property
    def columnwise(self) -> bool:
        return self.shape_info.columnwise

    @property
    def hadamard(self) -> bool:
        return self.shape_info.hadamard

    def __repr__(self) -> str:
        extra = "".join(
            f", {flag}" for flag in ("columnwise", "hadamard") if getattr(self, flag)
        )
        return (
            f"QuantizedTensor({self.format}, {self.shape[0]}x{self.shape[1]}, {self.blocks}, "
            f"{self.layout}{extra}, decode_scale={self.decode_scale!r})"
        )

    # -- values ----------------------------------------------------------------------------
    def decoded_scales(self) -> np.ndarray:
        """The block scales' values (without decode_scale), float32 [rows, blocks_per_row]."""
        from ._scalar import decode

        if self.is_cuda:
            return self.to("cpu").decoded_scales()
        rows, blocks = self.shape_info.rows, self.blocks_per_row
        if self.shape_info.layout == _core.scale_layout.row_major:
            codes = self.scales.reshape(rows, blocks)
        else:
            codes = self.scales[scale_offsets(self.shape_info.layout, rows, blocks)]
        return decode(codes, self.scale_format)

    def ue4m3_shift_census(self, tile_rows: int = 128, target: str = "normals") -> dict:
        """How many rows, and tiles of `tile_rows` consecutive rows, have block scales that one
        power of two per row turns into UE4M3 codes exactly (C++ block/scale_shift.hpp):
        target "normals" (normal numbers of both formats: what NVFP4's block-scaled tensor cores
        run bit for bit) or "values" (any UE4M3 code). A dict of "rows", "fitting_rows", "tiles",
        "fitting_tiles"; for UE5M3 and UE4M3 scales (ValueError for others). A CUDA tensor's
        scales are read from a CPU copy."""
        from ._quantize import _integer

        if self.is_cuda:
            return self.to("cpu").ue4m3_shift_census(tile_rows, target)
        tile_rows = _integer(tile_rows, "tile_rows", 1, 1 << 62)
        return _core.ue4m3_shift_census(self.format, self.shape_info, self.elements, self.scales,
                                        tile_rows, target)

    def element_codes(self) -> np.ndarray:
        """The element codes unpacked, uint8 [rows, padded_cols] (numpy, on the CPU)."""
        if self.is_cuda:
            return self.to("cpu").element_codes()
        if self.element_format != "e2m1":
            return self.elements.copy()
        out = np.empty((self.elements.shape[0], self.elements.shape[1] * 2), np.uint8)
        out[:, 0::2] = self.elements & 0x0F
        out[:, 1::2] = self.elements >> 4
        return out

    def dequantize(self, dtype: Any = "float32", *, padded: bool = False, threads: int = 1,
                   stream: Any = None):
        """The decoded matrix [rows, cols] (or [rows, padded_cols]) as float32, bfloat16 or float16
        (on q's device)."""
        return dequantize(self, dtype, padded=padded, threads=threads, stream=stream)

    # -- torch -----------------------------------------------------------------------------
    def torch_elements(self):
        """The elements as a torch tensor sharing memory: float4_e2m1fn_x2 for FP4 (uint8 where
        torch lacks it), float8_e4m3fn for MXFP8."""
        import torch

        t = self.elements if self.is_cuda else torch.from_numpy(self.elements)
        name = "float4_e2m1fn_x2" if self.element_format == "e2m1" else "float8_e4m3fn"
        return t.view(getattr(torch, name)) if hasattr(torch, name) else t

    def torch_scales(self):
        """The block scales as a torch tensor sharing memory: float8_e4m3fn (UE4M3, the sign bit is
        always 0), float8_e8m0fnu (UE8M0), uint8 (UE5M3: no framework has the dtype)."""
        import torch

        t = self.scales if self.is_cuda else torch.from_numpy(self.scales)
        name = {"ue4m3": "float8_e4m3fn", "ue8m0": "float8_e8m0fnu"}.get(self.scale_format)
        return t.view(getattr(torch, name)) if name and hasattr(torch, name) else t


def _as_codes(x: Any, name: str) -> np.ndarray:
    if _is_torch(x):
        import torch

        x = x.detach().view(torch.uint8).numpy()
    array = np.asarray(x)
    if array.dtype != np.uint8:
        array = array.view(np.uint8) if array.dtype.itemsize == 1 else array
    if array.dtype != np.uint8:
        raise ValueError(f"{name} must hold uint8 codes, not {array.dtype}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (it is wrapped, not copied)")
    return array


def scale_offsets(layout: Any, rows: int, blocks: int) -> np.ndarray:
    """Index of each (row, block) scale code in a scale buffer of `layout`, int64 [rows, blocks]
    (the C++ scale_offset rule; the tensor-core layout is cuBLASLt's 128x4 tiles)."""
    from ._quantize import _enum, _integer

    layout = _enum(_core.scale_layout, layout, "layout")
    out = np.empty((_integer(rows, "rows", 0, 1 << 40), _integer(blocks, "blocks", 0, 1 << 40)), np.int64)
    _core.scale_offsets(layout, out)
    return out


def _out_dtype(dtype: Any) -> tuple[np.dtype, str]:
    if isinstance(dtype, str):
        names = {"float32": np.float32, "float16": np.float16, "bfloat16": _BFLOAT16}
        if dtype not in names:
            raise ValueError(f"dtype must be float32, bfloat16 or float16, not {dtype!r}")
        dtype = names[dtype]
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return dtype, "float32"
    if dtype == np.float16:
        return dtype, "float16"
    if _BFLOAT16 is not None and dtype == _BFLOAT16:
        return dtype, "bfloat16"
    raise ValueError(f"dtype must be float32, bfloat16 or float16, not {dtype}")


def dequantize(q: QuantizedTensor, dtype: Any = "float32", *, padded: bool = False, threads: int = 1,
               stream: Any = None):
    """The decoded matrix of q: float32, ml_dtypes.bfloat16 or float16 numpy array; for q on a CUDA
    device, a torch CUDA tensor (float32, bfloat16 or float16) decoded there, queued on `stream`
    (torch's current stream by default).

    padded=True keeps the zero padding of each row (padded_cols columns), as a GEMM reads it.
    """
    from ._quantize import _integer

    if not isinstance(q, QuantizedTensor):
        raise ValueError(f"q must be a QuantizedTensor (from quantize or QuantizedTensor.from_arrays), "
                         f"not {type(q).__name__}")
    if q.is_cuda:
        return _dequantize_on_device(q, dtype, padded, stream)
    np_dtype, element = _out_dtype(dtype)
    threads = _integer(threads, "threads (0: all cores)", 0, 1 << 32)
    need = _core.storage(q.format, q.shape_info)  # check the sizes before allocating the result
    if q.elements.size < need["element_bytes"] or q.scales.size < need["scale_bytes"]:
        raise ValueError(f"{q.format} {q.shape[0]}x{q.shape[1]}: elements holds {q.elements.size} "
                         f"bytes and scales {q.scales.size}, the matrix needs "
                         f"{need['element_bytes']} and {need['scale_bytes']}")
    cols = q.blocks_per_row * q.block_size if padded else q.shape_info.cols
    out = np.empty((q.shape_info.rows, cols), np_dtype)
    view = out.view(np.uint16) if element == "bfloat16" else out
    _core.dequantize(
        q.format, q.shape_info, q.elements, q.scales, q.decode_scale, view, element, padded, threads
    )
    return out


Operand = Union[QuantizedTensor, np.ndarray]


def _dequantize_on_device(q: QuantizedTensor, dtype: Any, padded: bool, stream: Any):
    import torch

    from . import _device

    names = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
    if isinstance(dtype, torch.dtype):
        if dtype not in names:
            raise ValueError(f"dtype must be float32, bfloat16 or float16, not {dtype}")
        element = names[dtype]
    else:
        element = _out_dtype(dtype)[1]  # a name, or a numpy / ml_dtypes dtype
    cuda = _device.cuda_module()
    cols = q.blocks_per_row * q.block_size if padded else q.shape_info.cols
    handle = _device.stream_handle(q.elements, stream)
    with _device.on_device(q.elements, handle):
        out = _device.empty((q.shape_info.rows, cols), element, q.elements)
        cuda.dequantize(q.format, q.shape_info, q.elements, q.scales, q.decode_scale_array, out,
                        element, bool(padded), handle)
    return out
