"""The global-scale conventions of other libraries, as named adapters."""

import numpy as np
import pytest

import blockscale as bs
from blockscale import conventions as cv


def test_divisors_are_the_encode_scale_and_multipliers_the_decode_scale():
    amax = np.float32(3.7)
    g = cv.global_scale(amax, "compressed_tensors")
    assert g == (np.float32(1) / amax) * np.float32(2688)  # as torch computes 2688 / tensor
    assert cv.encode_scale(g, "compressed_tensors") == g
    assert cv.global_scale(amax, "flashinfer") == g
    assert cv.global_scale(amax, "transformer_engine") == np.float32(2688) / amax
    m = cv.global_scale(amax, "modelopt")
    assert m == amax / np.float32(2688) == cv.global_scale(amax, "torchao")
    assert cv.decode_scale(m, "modelopt") == m
    assert cv.encode_scale(m, "torchao") == np.float32(1) / np.float32(m)


def test_round_trip_through_quantize():
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    amax = np.abs(x).max()
    g = cv.global_scale(amax, "compressed_tensors")
    q = bs.quantize(x, "nvfp4", encode_scale=cv.encode_scale(g, "compressed_tensors"))
    # a current tensor scale computes the same s_enc
    p = bs.CurrentTensorScale("nvfp4")
    r = bs.quantize(x, "nvfp4", policy=p)
    np.testing.assert_array_equal(q.elements, r.elements)
    assert cv.from_blockscale(p.encode_scale, "compressed_tensors") == g
    assert cv.from_blockscale(p.encode_scale, "modelopt") == q.decode_scale


def test_degenerate_amax_gives_one():
    for convention in cv.CONVENTIONS:
        zero = np.finfo(np.float32).max if convention == "transformer_engine" else 1.0
        assert cv.global_scale(0.0, convention) == zero
        assert cv.global_scale(float("nan"), convention) == 1.0
        assert cv.global_scale(float("inf"), convention) == 1.0
    # Transformer Engine's rule is CurrentTensorScale's
    for amax in (0.0, np.inf, np.nan, 1e-40, 3.5):
        p = bs.CurrentTensorScale("nvfp4")
        bs.quantize(np.full((1, 16), amax, np.float32), "nvfp4", policy=p)
        assert p.encode_scale == cv.global_scale(amax, "transformer_engine") or np.isnan(amax)


def test_bad_values():
    with pytest.raises(ValueError, match="unknown convention"):
        cv.kind("vllm")
    for f in (cv.encode_scale, cv.decode_scale, cv.from_blockscale):
        with pytest.raises(ValueError):
            f(0.0, "modelopt")
        with pytest.raises(ValueError):
            f(float("inf"), "compressed_tensors")


def test_reciprocal_form_differs_from_the_quotient_sometimes():
    amaxes = np.random.default_rng(3).uniform(0.1, 100, 2000).astype(np.float32)
    ct = np.array([cv.global_scale(a, "compressed_tensors") for a in amaxes], np.float32)
    te = np.array([cv.global_scale(a, "transformer_engine") for a in amaxes], np.float32)
    differ = ct != te
    assert 0 < differ.sum() < len(amaxes) // 2
    assert (np.abs(ct[differ].view(np.int32) - te[differ].view(np.int32)) == 1).all()  # one ulp


def _bfloat16_amaxes():
    """Every bfloat16 bit pattern as a float32: zeros of both signs, negatives, subnormals, Inf
    and NaN included."""
    bits = np.arange(1 << 16, dtype=np.uint32) << 16
    return bits.view(np.float32)


def _oracle(amax, convention, numerator=np.float32(2688)):
    """Each convention's rule written from its definition in float32 numpy (vectorized), as an
    independent check of the library's `global_scale`."""
    f32 = np.float32
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if convention in ("compressed_tensors", "flashinfer"):
            g = (f32(1) / amax).astype(f32) * numerator
        elif convention == "transformer_engine":
            q = np.float64(numerator) / np.abs(amax).astype(np.float64)  # -0 is a magnitude 0
            capped = np.minimum(q, np.float64(np.finfo(f32).max)).astype(f32)
            return np.where(np.isnan(q) | (capped == 0), f32(1), capped)
        else:
            g = (amax / numerator).astype(f32)
    return np.where((g > 0) & np.isfinite(g), g, f32(1)).astype(f32)


@pytest.mark.parametrize("convention", list(cv.CONVENTIONS))
def test_every_bfloat16_amax_against_an_independent_rule(convention):
    amaxes = _bfloat16_amaxes()
    want = _oracle(amaxes, convention)
    got = np.array([cv.global_scale(float(a), convention) for a in amaxes], np.float32)
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{convention}: {bad.size} amaxes differ, first {amaxes[bad[0]]!r}"


def test_negative_zero_and_negative_amax_follow_the_library():
    # An amax is a magnitude for Transformer Engine's rule: -0 is 0 (FLT_MAX), -2 is 2.
    assert cv.global_scale(-0.0, "transformer_engine") == np.finfo(np.float32).max
    assert cv.global_scale(-2.0, "transformer_engine") == 1344.0
    # The other conventions compute a negative quotient, which gives 1.
    for convention in ("compressed_tensors", "flashinfer", "modelopt", "torchao"):
        assert cv.global_scale(-2.0, convention) == 1.0


def test_conventions_come_from_the_library():
    assert cv.CONVENTIONS == bs._core.registry()["conventions"]
    assert set(cv.CONVENTIONS.values()) == {"divisor", "multiplier"}
