"""A block format outside the presets through the bindings: UE6M2-FP4 (E2M1 elements in blocks of
16, unsigned E6M2 scales: 2^-32 .. 1.5 * 2^32), compiled by an extension module the way a downstream
project compiles one (tests/package/python_extension/ue6m2_module.cpp) and registered with the package. The values
are checked against numpy decoders written here from the formats' definitions, not the library's."""

from __future__ import annotations

import importlib
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import blockscale as bs

_DIR = os.environ.get("BLOCKSCALE_TEST_EXTENSION_DIR")
pytestmark = pytest.mark.skipif(
    not _DIR, reason="the test extension is built by CMake (tests/CMakeLists.txt) and named by "
                     "BLOCKSCALE_TEST_EXTENSION_DIR; ctest sets it")

FORMAT = "ue6m2_fp4"
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


@pytest.fixture(scope="module")
def ext():
    sys.path.insert(0, _DIR)
    try:
        module = importlib.import_module("blockscale_test_ue6m2")
    finally:
        sys.path.remove(_DIR)
    assert bs.register_block_formats(module) == (FORMAT,)
    return module


def ue6m2_values(codes: np.ndarray) -> np.ndarray:
    """UE6M2 codes as float64: bias 31, subnormals, 0xFF NaN."""
    c = codes.astype(np.int64)
    e, m = c >> 2, c & 3
    v = np.where(e == 0, m / 4 * 2.0 ** (1 - 31), (1 + m / 4) * 2.0 ** (e - 31))
    return np.where(c == 0xFF, np.nan, v)


def element_codes(q: bs.QuantizedTensor) -> np.ndarray:
    """The E2M1 codes of q, unpacked: element 2i in the low nibble."""
    packed = q.elements
    codes = np.empty((packed.shape[0], packed.shape[1] * 2), np.int64)
    codes[:, 0::2], codes[:, 1::2] = packed & 0xF, packed >> 4
    return codes[:, :q.shape[1]]


def wide_rows(rows: int = 8, cols: int = 64, seed: int = 1) -> np.ndarray:
    """Row r's magnitudes near 2^(-27 + 62 r / (rows - 1)): 62 binades from the first row to the
    last, more than UE4M3 (17) or UE5M3 (33) spans, inside UE6M2 (64)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (rows, cols)) * 2.0 ** (-27 + 62 * np.arange(rows) / (rows - 1))[:, None]
    return x.astype(np.float32)


def test_registered_parts(ext):
    assert FORMAT in bs.block_formats() and FORMAT not in bs.BLOCK_FORMATS
    assert bs.block_formats()[:len(bs.BLOCK_FORMATS)] == bs.BLOCK_FORMATS
    parts = bs._core.registry()["block_formats"][FORMAT]
    assert dict(parts) == {"element": "e2m1", "scale": "ue6m2", "block_size": 16, "element_bits": 4}
    assert bs.register_block_formats(ext) == (FORMAT,)  # again: nothing changes
    assert bs.block_formats().count(FORMAT) == 1


def test_quantize_spans_62_binades(ext):
    x = wide_rows()
    q = bs.quantize(x, FORMAT)
    assert (q.element_format, q.scale_format, q.block_size) == ("e2m1", "ue6m2", 16)
    assert q.stats["saturated_scales"] == 0 and q.stats["zero_scales"] == 0
    assert q.decode_scale == 1.0
    scales = ue6m2_values(q.scales).repeat(16, axis=1)[:, :x.shape[1]]
    amax = np.abs(x.astype(np.float64)).reshape(x.shape[0], -1, 16).max(axis=2).repeat(16, axis=1)
    # Each scale is a UE6M2 value nearest amax / 6 (within half of UE6M2's 2^-2 relative spacing)...
    assert np.all(np.abs(scales / (amax / 6) - 1) <= 2.0 ** -3)
    # ... and each element a nearest E2M1 value of x / S: off by at most half the E2M1 spacing there.
    values = E2M1[element_codes(q)]
    ratio = x / scales
    spacing = np.where(np.abs(values) < 2, 0.5, np.where(np.abs(values) < 4, 1.0, 2.0))
    assert np.all(np.abs(ratio - values) <= spacing / 2 + 1e-12)
    # Dequantized, every value is q * S exactly, in each output type.
    expect = (values * scales).astype(np.float32)
    assert np.array_equal(q.dequantize("float32"), expect)
    with np.errstate(over="ignore"):  # rows beyond float16's range become +-inf in both
        assert np.array_equal(q.dequantize("float16"), expect.astype(np.float16))
    assert np.array_equal(q.dequantize("bfloat16").view(np.uint16),
                          expect.astype(ml_dtypes.bfloat16).view(np.uint16))
    # NVFP4 cannot hold these rows under one tensor scale: the same input saturates or flushes.
    nv = bs.quantize(x, "nvfp4")
    assert nv.stats["saturated_scales"] + nv.stats["zero_scales"] > 0


def test_inputs_layouts_and_amax(ext):
    x = wide_rows(rows=4, cols=48, seed=2)
    q = bs.quantize(x, FORMAT)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        h = (x / 2**20).astype(dtype)  # inside float16's range
        assert np.array_equal(bs.quantize(h, FORMAT).dequantize("float32"),
                              bs.quantize(h.astype(np.float32), FORMAT).dequantize("float32"))
    t = bs.quantize(x, FORMAT, layout="tensor_core")
    assert np.array_equal(t.dequantize("float32"), q.dequantize("float32"))
    c = bs.quantize(x, FORMAT, columnwise=True)
    assert np.array_equal(c.dequantize("float32"), bs.quantize(x.T.copy(), FORMAT).dequantize("float32"))
    assert bs.measure_amax(x, FORMAT) == np.abs(x).max()
    assert np.array_equal(bs.fake_quantize(x, FORMAT), q.dequantize("float32"))


def test_policies(ext):
    p = bs.CurrentTensorScale(FORMAT)
    assert p.numerator == 6 * 1.5 * 2.0**32  # E2M1's max times UE6M2's
    x = wide_rows(rows=2, cols=32, seed=3) / np.float32(2**20)
    q = bs.quantize(x, FORMAT, policy=p)
    amax = float(np.abs(x).max())
    assert p.calls == 1 and p.encode_scale == np.float32(p.numerator / amax)
    assert bs.PeriodicTensorScale(FORMAT, interval=4, headroom=64).numerator == 6 * 1.5 * 2.0**-32
    with pytest.raises(ValueError, match="between 0 and 64 binades"):
        bs.PeriodicTensorScale(FORMAT, headroom=65)
    with pytest.raises(ValueError, match="made for nvfp4"):
        bs.quantize(x, FORMAT, policy=bs.DelayedTensorScale("nvfp4"))
    assert np.isfinite(q.dequantize("float32")).all()


def test_gemm_reference_with_presets_and_floats(ext):
    rng = np.random.default_rng(4)
    # Magnitudes 2^-4 .. 2^4: every product and sum is exact in float64, so numpy is an oracle.
    a = (rng.uniform(-1, 1, (5, 64)) * 2.0 ** rng.integers(-4, 5, (5, 64))).astype(np.float32)
    b = (rng.uniform(-1, 1, (3, 64)) * 2.0 ** rng.integers(-4, 5, (3, 64))).astype(np.float32)
    qa = bs.quantize(a, FORMAT)
    da = qa.dequantize("float32").astype(np.float64)
    for other in (FORMAT, "nvfp4", "mxfp4", "ue5m3_fp4", "mxfp8"):
        qb = bs.quantize(b, other)
        db = qb.dequantize("float32").astype(np.float64)
        expect = (da @ db.T).astype(np.float32)
        assert np.array_equal(bs.gemm_reference(qa, qb), expect), other
        assert np.array_equal(bs.gemm_reference(qb, qa), expect.T), other
    assert np.array_equal(bs.gemm_reference(qa, b), (da @ b.astype(np.float64).T).astype(np.float32))
    assert np.array_equal(bs.gemm_reference(b, qa), (b.astype(np.float64) @ da.T).astype(np.float32))


def test_refusals(ext):
    with pytest.raises(ValueError, match="unknown block format 'ue7m1_fp4'.*ue6m2_fp4"):
        bs.quantize(np.ones((1, 16), np.float32), "ue7m1_fp4")
    with pytest.raises(ValueError, match="'nvfp4' is already known"):
        bs._core.register_block_formats(ext.clashing_ops())
    with pytest.raises(ValueError, match="rebuild the module"):
        bs._core.register_block_formats(ext.stale_ops())
    with pytest.raises(ValueError, match="'ue6m2_twice' is given to tables 0 and 1"):
        bs._core.register_block_formats(ext.twice_ops())
    with pytest.raises(ValueError, match="must be named 'blockscale.block_format_ops'"):
        bs._core.register_block_formats(ext.unnamed_capsule())
    with pytest.raises(ValueError, match="not a blockscale format module"):
        bs.register_block_formats(np)
    # The refused lists left the known formats as they were.
    assert bs.block_formats() == bs.BLOCK_FORMATS + (FORMAT,)
