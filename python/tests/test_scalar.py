"""convert / decode of arrays: every format, every rounding, overflow handling."""

import numpy as np
import pytest

import blockscale as bs

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_decode_every_code_of_every_format():
    for format in bs.SCALAR_FORMATS:
        traits = bs.SCALAR_FORMAT_TRAITS[format]
        codes = np.arange(1 << traits["bits"], dtype=np.uint8)
        values = bs.decode(codes, format)
        assert np.nanmax(values[np.isfinite(values)]) == traits["max"], format
        # decoding then converting back gives the code (NaN codes give a NaN code)
        overflow = "saturate" if traits["specials"] == "none" else "nonfinite"
        back = bs.convert(values, format, overflow=overflow)
        finite = np.isfinite(values)
        np.testing.assert_array_equal(back[finite], codes[finite], err_msg=format)
        assert np.isnan(bs.decode(back[~finite & np.isnan(values)], format)).all()


def test_e2m1_values_and_ties():
    np.testing.assert_array_equal(bs.decode(np.arange(8, dtype=np.uint8), "e2m1"), E2M1)
    x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, 7.0, -0.0], np.float32)
    assert list(bs.convert(x, "e2m1")) == [0, 2, 2, 4, 4, 6, 6, 14, 7, 8]
    assert list(bs.convert(x, "e2m1", "nearest_away")) == [1, 2, 3, 4, 5, 6, 7, 15, 7, 8]
    assert list(bs.convert(x[:4], "e2m1", "toward_zero")) == [0, 1, 2, 3]
    assert list(bs.convert(x[:4], "e2m1", "up")) == [1, 2, 3, 4]
    assert list(bs.convert(x[:4], "e2m1", "down")) == [0, 1, 2, 3]
    assert list(bs.convert(np.float32([0.3, 1.2]), "e2m1", "to_odd")) == [1, 3]


@pytest.mark.parametrize("rounding", bs.ROUNDINGS[:-1])
def test_roundings_bracket_the_value(rng, rounding):
    x = rng.uniform(-440, 440, 4096).astype(np.float32)
    v = bs.decode(bs.convert(x, "e4m3", rounding), "e4m3")
    lo = bs.decode(bs.convert(x, "e4m3", "down"), "e4m3")
    hi = bs.decode(bs.convert(x, "e4m3", "up"), "e4m3")
    assert ((v == lo) | (v == hi)).all()
    assert (lo <= x).all() and (hi >= x).all()


def test_float64_input_is_rounded_once():
    # 1 + 2^-4 + 2^-40 rounds up in E4M3 (3 mantissa bits), although float32(x) is the tie 1.0625
    x = np.array([1.0 + 2**-4 + 2**-40], np.float64)
    assert bs.decode(bs.convert(x, "e4m3"), "e4m3")[0] == 1.125
    assert bs.decode(bs.convert(x.astype(np.float32), "e4m3"), "e4m3")[0] == 1.0


def test_stochastic_needs_bits_and_uses_them():
    x = np.full(4, 0.75, np.float32)  # halfway between E2M1 0.5 and 1.0
    bits = np.array([0, 2**31 - 1, 2**31, 2**32 - 1], np.uint32)
    assert list(bs.convert(x, "e2m1", "stochastic", random_bits=bits)) == [1, 1, 2, 2]
    with pytest.raises(ValueError, match="random_bits"):
        bs.convert(x, "e2m1", "stochastic")
    with pytest.raises(ValueError, match="random_bits"):
        bs.convert(x, "e2m1", random_bits=bits)


def test_overflow():
    x = np.array([1e6, -1e6, np.inf, np.nan], np.float32)
    assert list(bs.decode(bs.convert(x, "e4m3"), "e4m3")[:3]) == [448, -448, 448]
    nonfinite = bs.decode(bs.convert(x, "e4m3", overflow="nonfinite"), "e4m3")
    assert np.isnan(nonfinite).all()
    e5m2 = bs.decode(bs.convert(x, "e5m2", overflow="nonfinite"), "e5m2")
    assert list(e5m2[:3]) == [np.inf, -np.inf, np.inf] and np.isnan(e5m2[3])
    with pytest.raises(ValueError, match="no Inf or NaN"):
        bs.convert(x, "e2m1", overflow="nonfinite")
    assert bs.decode(bs.convert(np.float32([1e9]), "ue5m3"), "ue5m3")[0] == 114688


def test_shapes_are_kept():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    codes = bs.convert(x, "e2m3")
    assert codes.shape == (2, 3, 4) and bs.decode(codes, "e2m3").shape == (2, 3, 4)
