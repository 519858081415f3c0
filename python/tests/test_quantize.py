"""quantize / dequantize: the stored codes, their decoding, directions, tiles, layouts, policies."""

import ml_dtypes
import numpy as np
import pytest

import blockscale as bs
from conftest import heavy_tailed

FP4 = ("nvfp4", "mxfp4", "ue5m3_fp4")


def nvfp4_like_numpy(x, s_enc, scale_dtype, block=16):
    """The NVFP4 rule (Transformer Engine's operation order) in float32 numpy and ml_dtypes:
    S_b = rne(amax_b * (s_enc * fp32(1/6))), q = e2m1_rne(clamp(x * (1 / (S_b * s_dec)), +-6))."""
    f32 = np.float32
    rows, cols = x.shape
    xb = x.reshape(rows, cols // block, block)
    amax = np.abs(xb).max(axis=2)
    m = f32(s_enc) * (f32(1.0) / f32(6.0))
    scale = (amax * m).astype(scale_dtype).astype(f32)
    s_dec = f32(1.0) / f32(s_enc)
    with np.errstate(divide="ignore"):
        factor = np.where(scale == 0, f32(0), f32(1.0) / (scale * s_dec))
    q = np.clip(xb * factor[:, :, None], -6, 6).astype(ml_dtypes.float4_e2m1fn)
    return q.astype(f32).reshape(rows, cols), scale


@pytest.mark.parametrize("format", FP4 + ("mxfp8",))
def test_dequantize_is_codes_times_scales(rng, format):
    x = heavy_tailed(rng, 48, 96)
    q = bs.quantize(x, format, encode_scale=3.0 if format != "mxfp4" else 1.0)
    codes = q.element_codes()[:, : q.shape[1]]
    values = bs.decode(codes, q.element_format)
    scales = np.repeat(q.decoded_scales(), q.block_size, axis=1)[:, : q.shape[1]]
    expect = (values * scales).astype(np.float32) * np.float32(q.decode_scale)
    np.testing.assert_array_equal(q.dequantize(), expect)
    assert q.decode_scale == np.float32(1) / np.float32(3.0 if format != "mxfp4" else 1.0)
    assert q.elements.dtype == np.uint8 and q.elements.shape == (48, q.blocks_per_row * q.block_size // (2 if format != "mxfp8" else 1))
    assert q.scales.shape == (48, q.blocks_per_row)


def test_nvfp4_matches_the_rule_in_numpy(rng):
    x = heavy_tailed(rng, 64, 128)
    s_enc = np.float32(448 * 6) / np.abs(x).max()
    q = bs.quantize(x, "nvfp4", encode_scale=float(s_enc))
    values, scales = nvfp4_like_numpy(x, s_enc, ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(q.decoded_scales(), scales)
    np.testing.assert_array_equal(bs.decode(q.element_codes(), "e2m1"), values)


def test_packing_low_nibble_first():
    x = np.zeros((1, 16), np.float32)
    x[0, 0], x[0, 1] = 6.0, -0.5  # codes 0b0111 and 0b1001 under a scale of 1
    q = bs.quantize(x, "nvfp4")
    assert q.decoded_scales()[0, 0] == 1.0
    assert q.elements[0, 0] == 0x97
    assert list(q.element_codes()[0, :2]) == [0x7, 0x9]


@pytest.mark.parametrize("format", FP4)
def test_columnwise_is_rowwise_of_the_transpose(rng, format):
    x = heavy_tailed(rng, 64, 48)
    a = bs.quantize(x, format, columnwise=True)
    b = bs.quantize(np.ascontiguousarray(x.T), format)
    assert a.shape == (48, 64) and a.columnwise
    np.testing.assert_array_equal(a.elements, b.elements)
    np.testing.assert_array_equal(a.scales, b.scales)


def test_tiles_share_one_scale_in_both_directions(rng):
    x = heavy_tailed(rng, 40, 64)
    r = bs.quantize(x, "nvfp4", shape="tile")
    c = bs.quantize(x, "nvfp4", shape="tile", columnwise=True)
    s = r.decoded_scales()
    for t in range(0, 40, 16):
        assert (s[t : t + 16] == s[t]).all()
    # the columnwise copy holds the same scale for the transposed tile, and the same values
    np.testing.assert_array_equal(c.decoded_scales()[::16, : (40 + 15) // 16], s[::16].T)
    np.testing.assert_array_equal(c.dequantize(), r.dequantize().T)


def test_ragged_rows_are_padded_with_zero_codes(rng):
    x = rng.standard_normal((3, 20)).astype(np.float32)
    q = bs.quantize(x, "nvfp4")
    assert q.elements.shape == (3, 16) and q.blocks_per_row == 2
    assert (q.element_codes()[:, 20:] == 0).all()
    assert q.dequantize(padded=True).shape == (3, 32)
    np.testing.assert_array_equal(q.dequantize(padded=True)[:, :20], q.dequantize())


def test_tensor_core_layout_holds_the_same_scales(rng):
    x = heavy_tailed(rng, 130, 96)
    a = bs.quantize(x, "nvfp4")
    b = bs.quantize(x, "nvfp4", layout="tensor_core")
    assert b.scales.ndim == 1 and b.scales.size == 256 * 8  # 2 x 2 tiles of 128 x 4
    np.testing.assert_array_equal(a.elements, b.elements)
    np.testing.assert_array_equal(a.decoded_scales(), b.decoded_scales())
    offsets = bs.scale_offsets("tensor_core", 130, 6)
    np.testing.assert_array_equal(b.scales[offsets], a.scales)
    assert offsets[1, 0] == 16 and offsets[32, 0] == 4 and offsets[0, 1] == 1
    padding = np.ones(b.scales.size, bool)
    padding[offsets.ravel()] = False
    assert (b.scales[padding] == 0).all()
    np.testing.assert_array_equal(a.dequantize(), b.dequantize())


@pytest.mark.parametrize("input_type", ["float16", "bfloat16"])
def test_half_inputs_equal_their_float32_values(rng, input_type):
    x = heavy_tailed(rng, 32, 64)
    dtype = np.float16 if input_type == "float16" else ml_dtypes.bfloat16
    h = x.astype(dtype)
    a = bs.quantize(h, "ue5m3_fp4")
    b = bs.quantize(h.astype(np.float32), "ue5m3_fp4")
    np.testing.assert_array_equal(a.elements, b.elements)
    np.testing.assert_array_equal(a.scales, b.scales)
    out = a.dequantize(input_type)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, a.dequantize().astype(dtype))


def test_strided_rows_are_read_in_place(rng):
    big = heavy_tailed(rng, 32, 100)
    view = big[:, :64]  # row stride 100
    a = bs.quantize(view, "nvfp4")
    b = bs.quantize(np.ascontiguousarray(view), "nvfp4")
    np.testing.assert_array_equal(a.elements, b.elements)
    from blockscale._tensor import as_matrix

    assert np.shares_memory(as_matrix(view)[0], big)


def test_threads_give_identical_bits(rng):
    x = heavy_tailed(rng, 256, 512)
    for format in FP4:
        a = bs.quantize(x, format, rounding="stochastic", seed=5, offset=9)
        b = bs.quantize(x, format, rounding="stochastic", seed=5, offset=9, threads=2)
        np.testing.assert_array_equal(a.elements, b.elements)
        np.testing.assert_array_equal(a.dequantize(threads=2), b.dequantize())


def test_stochastic_rounding_is_unbiased_and_seeded():
    x = np.full((64, 256), 0.3, np.float32)  # between E2M1 values 0.25*... under scale choice
    x[:, ::16] = 6.0  # pin each block's scale to 1
    runs = [bs.quantize(x, "nvfp4", rounding="stochastic", seed=1, offset=k).dequantize() for k in range(20)]
    same = bs.quantize(x, "nvfp4", rounding="stochastic", seed=1, offset=0).dequantize()
    np.testing.assert_array_equal(runs[0], same)
    assert not np.array_equal(runs[0], runs[1])
    values = np.stack(runs)[:, :, 1:16]
    assert set(np.unique(values)) == {0.0, 0.5}
    # 0.3 rounds up with probability 0.6: the mean of 20 * 64 * 240 draws is 0.3 within 5 sigma
    sigma = 0.5 * np.sqrt(0.6 * 0.4 / values.size)
    assert abs(values.mean() - 0.3) < 5 * sigma


def test_hadamard_quantizes_the_transformed_rows(rng):
    x = heavy_tailed(rng, 16, 64)
    q = bs.quantize(x, "nvfp4", hadamard=True)
    assert q.hadamard
    h = np.array([[1.0]])
    for _ in range(4):
        h = np.block([[h, h], [h, -h]])
    signs = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], np.float64)
    transform = (signs[:, None] * h) / 4.0
    y = (x.astype(np.float64).reshape(16, 4, 16) @ transform).reshape(16, 64)
    # the dequantized values approximate the transformed ones (NVFP4's error, not the input's)
    err = np.abs(q.dequantize() - y) / (np.abs(y).max() + 1e-30)
    assert err.max() < 0.2 and not np.allclose(q.dequantize(), x, atol=0.1)
    other = bs.quantize(x, "nvfp4", hadamard=True, hadamard_signs=[1] * 16)
    assert not np.array_equal(other.elements, q.elements)


def test_rules_floor_and_rceil(rng):
    x = rng.standard_normal((8, 64)).astype(np.float32)
    floor = bs.quantize(x, "mxfp4")  # default: OCP floor
    rceil = bs.quantize(x, "mxfp4", rule="rceil")
    amax = np.abs(x).reshape(8, 2, 32).max(axis=2)
    np.testing.assert_array_equal(floor.decoded_scales(), 2.0 ** (np.floor(np.log2(amax)) - 2))
    np.testing.assert_array_equal(rceil.decoded_scales(), 2.0 ** np.ceil(np.log2(amax / 6)))
    assert bs.default_rule("mxfp4").target == 4.0
    assert bs.scale_rule(("6", "up")).rounding == bs.scale_rule("rceil").rounding


def test_policies_count_their_amax_passes(rng):
    x = heavy_tailed(rng, 32, 64)
    current = bs.CurrentTensorScale("nvfp4")
    periodic = bs.PeriodicTensorScale("ue5m3_fp4", interval=4, headroom=8)
    delayed = bs.DelayedTensorScale("nvfp4", history=2)
    for _ in range(10):
        q = bs.quantize(x, "nvfp4", policy=current)
        bs.quantize(x, "ue5m3_fp4", policy=periodic)
        bs.quantize(x, "nvfp4", policy=delayed)
    assert (current.calls, current.amax_measurements) == (10, 10)
    assert (periodic.calls, periodic.amax_measurements) == (10, 3)  # calls 1, 5, 9
    amax = np.abs(x).max()
    assert current.encode_scale == np.float32(np.float32(448 * 6) / amax)
    assert q.decode_scale == np.float32(1) / np.float32(current.encode_scale)
    assert periodic.encode_scale == np.float32(np.float32(6 * 114688 / 256) / amax)
    assert delayed.encode_scale == current.encode_scale and delayed.calls == 10
    assert bs.measure_amax(x, "nvfp4") == amax
    assert bs.NoTensorScale().encode_scale == 1.0


def test_quantize_into_reuses_storage(rng):
    x = heavy_tailed(rng, 16, 32)
    q = bs.quantize(x, "nvfp4")
    elements = q.elements
    stats = bs.quantize_into(2 * x, q)
    assert q.elements is elements and stats["blocks"] == 32
    np.testing.assert_array_equal(q.dequantize(), bs.quantize(2 * x, "nvfp4").dequantize())


def test_from_arrays_round_trips(rng):
    x = heavy_tailed(rng, 16, 64)
    q = bs.quantize(x, "nvfp4", encode_scale=0.5)
    r = bs.QuantizedTensor.from_arrays("nvfp4", q.elements, q.scales, q.decode_scale, cols=64)
    np.testing.assert_array_equal(r.dequantize(), q.dequantize())


def test_stats(rng):
    x = np.zeros((2, 32), np.float32)
    x[1, :16] = 1e30
    x[1, 16] = np.nan
    q = bs.quantize(x, "nvfp4")
    assert q.stats["blocks"] == 4 and q.stats["zero_scales"] == 2
    assert q.stats["saturated_scales"] == 1 and q.stats["nan_scales"] == 1
    assert np.isnan(q.stats["amax"])


def test_the_gil_is_released_while_quantizing(rng):
    import threading

    x = rng.standard_normal((2048, 4096)).astype(np.float32)
    done = threading.Event()
    worker = threading.Thread(target=lambda: [bs.quantize(x, "nvfp4") for _ in range(3)] and done.set())
    ticks = 0
    worker.start()
    while not done.is_set() and worker.is_alive():
        ticks += 1  # runs only while the worker's C++ code has let go of the GIL
    worker.join()
    assert ticks > 100


def test_dlpack_and_buffer_protocol_inputs(rng):
    x = heavy_tailed(rng, 16, 32)

    class Producer:  # a DLPack producer that is not a numpy array
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    from blockscale._tensor import as_matrix

    assert np.shares_memory(as_matrix(Producer(x))[0], x)
    assert np.shares_memory(as_matrix(memoryview(x))[0], x)
    expect = bs.quantize(x, "nvfp4").elements
    np.testing.assert_array_equal(bs.quantize(Producer(x), "nvfp4").elements, expect)
    np.testing.assert_array_equal(bs.quantize(memoryview(x), "nvfp4").elements, expect)


def test_reversed_and_transposed_views_are_copied_not_refused(rng):
    x = heavy_tailed(rng, 32, 64)
    for view in (x[::-1], x[:, ::-1], np.asfortranarray(x), x.T.T[::2]):
        np.testing.assert_array_equal(bs.quantize(view, "nvfp4").elements,
                                      bs.quantize(np.ascontiguousarray(view), "nvfp4").elements)


def test_ue4m3_shift_census():
    """Rows whose block scales span more than UE4M3 holds are counted out, and the tiles holding
    them; the rule is the C++ library's (block/scale_shift.hpp)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 256)).astype(np.float32)
    wide = [3, 140, 141]
    for r in wide:  # one block 10^4 times larger and one 10^2 times smaller: 20 binades apart
        x[r, :16] *= 1e4
        x[r, -16:] *= 1e-2
    for layout in ("row_major", "tensor_core"):
        q = bs.quantize(x, "ue5m3_fp4", layout=layout)
        assert q.ue4m3_shift_census() == dict(rows=300, fitting_rows=297, tiles=3, fitting_tiles=1)
        assert q.ue4m3_shift_census(tile_rows=1)["fitting_tiles"] == 297
    # UE4M3 scales are UE4M3 codes already; the tiny blocks' subnormal scales are not normals.
    nv = bs.quantize(x, "nvfp4")
    assert nv.ue4m3_shift_census(target="values")["fitting_rows"] == 300
    assert nv.ue4m3_shift_census()["fitting_rows"] == 297
    with pytest.raises(ValueError, match="target must be"):
        nv.ue4m3_shift_census(target="codes")
    with pytest.raises(ValueError, match="ue8m0 scales do not shift onto UE4M3"):
        bs.quantize(x, "mxfp4").ue4m3_shift_census()
    with pytest.raises(ValueError, match="tile_rows"):
        bs.quantize(x, "ue5m3_fp4").ue4m3_shift_census(tile_rows=0)
