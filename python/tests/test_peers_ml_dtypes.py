"""Peer oracle: blockscale.convert / blockscale.decode against ml_dtypes' casts.

ml_dtypes (the numpy dtypes of JAX) implements E2M1, E2M3, E3M2, E4M3FN, E5M2 and E8M0FNU as
numpy dtypes; `x.astype(ml_dtypes.float4_e2m1fn)` rounds to nearest, ties to even. This file
runs both on every float16 value, every bfloat16 value (each widened exactly to float32) and on
10^7 random float32 bit patterns plus a list of special values, and compares code for code.

ml_dtypes' behaviour at the edges, as observed (ml_dtypes 0.5-0.7) and asserted below:
  * overflow: E2M1/E2M3/E3M2 (no Inf, no NaN) saturate to +-max, Inf included; E4M3FN gives NaN
    (sign kept) for anything that rounds above 448 and for +-Inf; E5M2 gives +-Inf; E8M0FNU gives
    NaN (0xFF) for anything that rounds above 2^127. So we compare against
    overflow="saturate" for the FP4/FP6 formats and overflow="nonfinite" for E4M3, E5M2, UE8M0.
  * the formats agree everywhere except in these classes (each one a predicate on the input):
      E2M1/E2M3/E3M2  NaN        theirs: a zero with the NaN's sign flipped (+NaN -> 0b1000,
                                 -0), ours: +max (E2M1 0b0111 = +6, like CUDA's
                                 __nv_cvt_float_to_fp4; E2M3 0x1F = 7.5; E3M2 0x1F = 28)
      E4M3            -NaN       theirs 0xFF (NaN keeps its sign), ours 0x7F (one positive NaN)
      E5M2            NaN        theirs 0x7E | sign (quiet NaN, sign kept), ours 0x7F
      UE8M0           x <= 0     theirs 0xFF (NaN: E8M0 has no zero and no sign), ours 0x00
                                 (the smallest value 2^-127: "negative or zero input to an
                                 unsigned format gives its smallest code")
      UE8M0           ties       x = 1.5 * 2^k exactly, k + 127 >= 0 even: the e8m0 rounding rule
                                 differs. ml_dtypes rounds every tie up (away from zero: with no
                                 mantissa bit its "even" test sees the implicit bit), ours rounds
                                 ties to the even code (the last exponent bit), so ours gives
                                 code k + 127 and theirs k + 128.
  * decode: every code decodes to the same float32 (NaN codes: both NaN).
The test asserts that every differing input lies in exactly one class, that both libraries give
that class's codes on every member of it, and that the counts on the exhaustive sets are the
ones derived in EXHAUSTIVE_COUNTS.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
blockscale = pytest.importorskip("blockscale")

# (our format, ml_dtypes type, our overflow mode matching theirs)
PAIRS = [
    ("e2m1", ml_dtypes.float4_e2m1fn, "saturate"),
    ("e2m3", ml_dtypes.float6_e2m3fn, "saturate"),
    ("e3m2", ml_dtypes.float6_e3m2fn, "saturate"),
    ("e4m3", ml_dtypes.float8_e4m3fn, "nonfinite"),
    ("e5m2", ml_dtypes.float8_e5m2, "nonfinite"),
    ("ue8m0", ml_dtypes.float8_e8m0fnu, "nonfinite"),
]
BITS = {fmt: blockscale.SCALAR_FORMAT_TRAITS[fmt]["bits"] for fmt, _, _ in PAIRS}
RANDOM_COUNT = 10_000_000
SEED = 20240611

# Differences on the exhaustive sets, derived by hand:
#  float16 has 2 * 1023 NaNs (1023 negative); bfloat16 2 * 127 (127 negative).
#  UE8M0 "x <= 0": the non-NaN values with the sign bit set, plus +0:
#    float16 32768 - 1023 + 1 = 31746, bfloat16 32768 - 127 + 1 = 32642.
#  UE8M0 ties 1.5 * 2^k with k odd (k + 127 even) and k >= -127:
#    float16 holds 1.5 * 2^k for k in [-23, 15] (normal: k in [-14, 15], subnormal 3 * 2^j *
#    2^-24 for j <= 8: k in [-23, -15]): 20 odd k;
#    bfloat16 for k in [-132, 127] (subnormal: k in [-132, -127]): odd k >= -127: 128.
EXHAUSTIVE_COUNTS = {
    "float16": {
        "e2m1": {"nan": 2046},
        "e2m3": {"nan": 2046},
        "e3m2": {"nan": 2046},
        "e4m3": {"negative_nan": 1023},
        "e5m2": {"nan": 2046},
        "ue8m0": {"zero_or_negative": 31746, "tie": 20},
    },
    "bfloat16": {
        "e2m1": {"nan": 254},
        "e2m3": {"nan": 254},
        "e3m2": {"nan": 254},
        "e4m3": {"negative_nan": 127},
        "e5m2": {"nan": 254},
        "ue8m0": {"zero_or_negative": 32642, "tie": 128},
    },
}


# ---- inputs ------------------------------------------------------------------------------------

def all_float16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def all_bfloat16() -> np.ndarray:
    # bfloat16 is the top half of a float32: widening is a shift.
    return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


def special_float32() -> np.ndarray:
    bits = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # +-0, +-Inf
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000,
        0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
    ]
    specials = np.array(bits, dtype=np.uint32).view(np.float32)
    # each format's max, the midpoints above and below it, and neighbours of those
    values = []
    for v in (6.0, 7.5, 28.0, 448.0, 464.0, 480.0, 57344.0, 61440.0, 65536.0, 2.0**127,
              1.5 * 2.0**127, 2.0**-127, 1.5 * 2.0**-127, 2.0**-126, 2.0**-149, 0.25, 0.75, 5.0):
        f = np.float32(v)
        values += [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(0))]
    values = np.array(values, dtype=np.float32)
    return np.concatenate([specials, values, -values])


# binades (unbiased float exponents) where each format rounds: its subnormals to past its max
RANGES = {"e2m1": (-3, 4), "e2m3": (-5, 4), "e3m2": (-6, 6), "e4m3": (-11, 10),
          "e5m2": (-18, 17), "ue8m0": (-150, 128)}
IN_RANGE_COUNT = 2_000_000


def random_in_range(fmt: str) -> np.ndarray:
    """Random float32 of both signs with random mantissas, in the binades where `fmt` rounds:
    almost every value is inexact, and ties occur where the mantissa's low bits are zero."""
    rng = np.random.Generator(np.random.PCG64([SEED, BITS[fmt], len(fmt)]))
    lo, hi = RANGES[fmt]
    exponent = rng.integers(max(lo, -126), min(hi, 127) + 1, size=IN_RANGE_COUNT)
    mantissa = rng.integers(0, 1 << 23, size=IN_RANGE_COUNT, dtype=np.uint32)
    # a quarter of them with only the top 4 mantissa bits random: exact values and ties
    mantissa[: IN_RANGE_COUNT // 4] &= np.uint32(0x780000)
    sign = rng.integers(0, 2, size=IN_RANGE_COUNT, dtype=np.uint32) << 31
    bits = sign | ((exponent + 127).astype(np.uint32) << 23) | mantissa
    return bits.view(np.float32)


def random_float32() -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(SEED))
    bits = rng.integers(0, 1 << 32, size=RANDOM_COUNT, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), special_float32()])


# ---- the explained differences -------------------------------------------------------------------

def difference_classes(fmt: str, x: np.ndarray):
    """The classes of inputs on which ml_dtypes and blockscale differ by design, each as
    (name, mask over x, our codes, their codes) with the codes given on the masked inputs."""
    nan = np.isnan(x)
    sign = np.signbit(x)
    if blockscale.SCALAR_FORMAT_TRAITS[fmt]["specials"] == "none":
        bits = BITS[fmt]
        sign_bit = np.uint8(1 << (bits - 1))
        max_code = np.uint8(sign_bit - 1)
        m = nan
        theirs = np.where(sign[m], np.uint8(0), sign_bit).astype(np.uint8)
        ours = np.full(m.sum(), max_code, np.uint8)
        return [("nan", m, ours, theirs)]
    if fmt == "e4m3":
        m = nan & sign
        return [("negative_nan", m, np.full(m.sum(), 0x7F, np.uint8),
                 np.full(m.sum(), 0xFF, np.uint8))]
    if fmt == "e5m2":
        m = nan
        theirs = np.where(sign[m], np.uint8(0xFE), np.uint8(0x7E)).astype(np.uint8)
        return [("nan", m, np.full(m.sum(), 0x7F, np.uint8), theirs)]
    if fmt == "ue8m0":
        zero_or_negative = ~nan & (sign | (x == 0))
        with np.errstate(invalid="ignore"):  # signalling NaNs (excluded below) warn on the cast
            mantissa, exponent = np.frexp(x.astype(np.float64))  # x = mantissa * 2^exponent exactly
        lower_code = exponent.astype(np.int64) + 126  # x = 1.5 * 2^k, k = exponent - 1
        tie = (~nan & ~sign & np.isfinite(x) & (mantissa == 0.75) & (lower_code >= 0)
               & (lower_code % 2 == 0))
        lower = lower_code[tie].astype(np.uint8)
        return [
            ("zero_or_negative", zero_or_negative, np.zeros(zero_or_negative.sum(), np.uint8),
             np.full(zero_or_negative.sum(), 0xFF, np.uint8)),
            ("tie", tie, lower, (lower + 1).astype(np.uint8)),
        ]
    raise AssertionError(fmt)


def compare(fmt: str, peer_type, overflow: str, x: np.ndarray) -> dict:
    """Runs both conversions on x and checks every difference against the classes; returns the
    count of each class (and of the equal inputs)."""
    ours = blockscale.convert(x, fmt, overflow=overflow)
    theirs = x.astype(peer_type).view(np.uint8)
    assert ours.shape == theirs.shape == x.shape
    explained = np.zeros(x.shape, bool)
    counts = {}
    for name, mask, ours_expected, theirs_expected in difference_classes(fmt, x):
        assert not np.any(explained & mask), f"{fmt}: class {name} overlaps another"
        explained |= mask
        assert np.all(ours_expected != theirs_expected), f"{fmt}: class {name} has no difference"
        bad_ours = np.flatnonzero(ours[mask] != ours_expected)
        bad_theirs = np.flatnonzero(theirs[mask] != theirs_expected)
        assert bad_ours.size == 0, (
            f"{fmt} {name}: ours differs from the class's code at x = "
            f"{x[mask][bad_ours[:5]]!r} (ours {ours[mask][bad_ours[:5]]})")
        assert bad_theirs.size == 0, (
            f"{fmt} {name}: ml_dtypes differs from the class's code at x = "
            f"{x[mask][bad_theirs[:5]]!r} (theirs {theirs[mask][bad_theirs[:5]]})")
        counts[name] = int(mask.sum())
    unexplained = np.flatnonzero(~explained & (ours != theirs))
    assert unexplained.size == 0, (
        f"{fmt}: {unexplained.size} unexplained differences, e.g. x bits "
        f"{[hex(b) for b in x[unexplained[:8]].view(np.uint32)]}, ours "
        f"{[hex(c) for c in ours[unexplained[:8]]]}, theirs "
        f"{[hex(c) for c in theirs[unexplained[:8]]]}")
    # every explained input differs, so the differences are exactly the class members
    assert int((ours != theirs).sum()) == sum(counts.values())
    counts["equal"] = int((ours == theirs).sum())
    return counts


# ---- the tests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("source", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt,peer_type,overflow", PAIRS, ids=[p[0] for p in PAIRS])
def test_convert_exhaustive_16bit(source, fmt, peer_type, overflow):
    x = all_float16() if source == "float16" else all_bfloat16()
    counts = compare(fmt, peer_type, overflow, x)
    expected = EXHAUSTIVE_COUNTS[source][fmt]
    assert {k: v for k, v in counts.items() if k != "equal"} == expected
    assert counts["equal"] == x.size - sum(expected.values())
    print(f"[peers ml_dtypes] convert {source} -> {fmt}: {x.size} values, {counts}")


@pytest.fixture(scope="module")
def random_inputs():
    return random_float32()


@pytest.mark.parametrize("fmt,peer_type,overflow", PAIRS, ids=[p[0] for p in PAIRS])
def test_convert_random_float32(random_inputs, fmt, peer_type, overflow):
    x = random_inputs
    start = time.perf_counter()
    counts = compare(fmt, peer_type, overflow, x)
    # The classes are not empty on this set: it holds ~2^22 / 2^32 NaNs, half of them negative,
    # half of all inputs negative, and the specials list holds ties and NaNs of both signs.
    for name, count in counts.items():
        assert count > 0, f"{fmt}: class {name} never met"
    print(f"[peers ml_dtypes] convert random float32 -> {fmt}: {x.size} values, {counts}, "
          f"{time.perf_counter() - start:.2f} s")


@pytest.mark.parametrize("fmt,peer_type,overflow", PAIRS, ids=[p[0] for p in PAIRS])
def test_convert_random_in_range(fmt, peer_type, overflow):
    x = random_in_range(fmt)
    counts = compare(fmt, peer_type, overflow, x)
    # no NaN here: only the sign class of UE8M0 and its ties can occur
    if fmt == "ue8m0":
        assert set(counts) == {"zero_or_negative", "tie", "equal"} and counts["tie"] > 0
    else:
        assert counts == {counts_key(fmt): 0, "equal": x.size}
    print(f"[peers ml_dtypes] convert in-range float32 -> {fmt}: {x.size} values, {counts}")


def counts_key(fmt: str) -> str:
    return "negative_nan" if fmt == "e4m3" else "nan"


@pytest.mark.parametrize("fmt,peer_type,overflow", PAIRS, ids=[p[0] for p in PAIRS])
def test_overflow_modes_are_the_peers(fmt, peer_type, overflow):
    """The overflow mode chosen above is ml_dtypes' behaviour: the other mode differs on values
    just beyond the max (where that mode exists)."""
    big = np.array([1e30, -1e30, np.inf, -np.inf], np.float32)
    if fmt == "ue8m0":  # unsigned, and 1e30 is within its range
        big = np.array([3e38, np.inf], np.float32)
    ours = blockscale.convert(big, fmt, overflow=overflow)
    theirs = big.astype(peer_type).view(np.uint8)
    np.testing.assert_array_equal(ours, theirs)
    if overflow == "nonfinite":
        saturated = blockscale.convert(big, fmt, overflow="saturate")
        assert np.all(saturated != theirs)


@pytest.mark.parametrize("fmt,peer_type,overflow", PAIRS, ids=[p[0] for p in PAIRS])
def test_decode_every_code(fmt, peer_type, overflow):
    codes = np.arange(1 << BITS[fmt], dtype=np.uint8)
    ours = blockscale.decode(codes, fmt)
    theirs = codes.view(peer_type).astype(np.float32)
    assert ours.dtype == np.float32
    nan_ours, nan_theirs = np.isnan(ours), np.isnan(theirs)
    np.testing.assert_array_equal(nan_ours, nan_theirs)
    # bit for bit on the numbers (so -0 decodes to -0 in both)
    np.testing.assert_array_equal(ours[~nan_ours].view(np.uint32), theirs[~nan_theirs].view(np.uint32))
    expected_nans = {"e2m1": 0, "e2m3": 0, "e3m2": 0, "e4m3": 2, "e5m2": 6, "ue8m0": 1}[fmt]
    assert int(nan_ours.sum()) == expected_nans
    print(f"[peers ml_dtypes] decode {fmt}: {codes.size} codes equal ({expected_nans} NaN codes)")
