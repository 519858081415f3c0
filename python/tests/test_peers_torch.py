"""Peer oracles on the CPU: blockscale's block quantization against torchao, compressed-tensors and
Transformer Engine's pure-PyTorch NVFP4 reference, run on the same inputs.

Method, for every peer and case:
  1. run the peer and blockscale on the same input (float32 or bfloat16);
  2. recompute the peer's formula and ours in float32 numpy (casts by ml_dtypes, which
     test_peers_ml_dtypes.py shows equal to ours on finite values), and assert that each
     emulation reproduces its library bit for bit (element codes and scale codes);
  3. the predicted differences are then where the two formulas disagree; assert that the
     libraries differ exactly there (same positions, so the same count), and sort every
     difference into a named class whose predicate is a statement about the formulas
     (e.g. "the scale codes differ because the peer computes amax / 6 / p and we compute
     amax * (s_enc * fp32(1/6))"). A difference outside every class fails the test.
Nibble order: torchao (pack_uint4), compressed-tensors (pack_fp4_to_uint8) and TE
(cast_to_fp4x2) all put element 2i in the low nibble, as we do; the tests compare packed bytes.

Run with BLOCKSCALE_PEERS_SUMMARY=path.json to collect the counts of every case in a file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.peers

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")
blockscale = pytest.importorskip("blockscale")

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max
E4M3_TINY = F32(2.0**-6)  # torch.finfo(torch.float8_e4m3fn).tiny: the smallest normal E4M3

SUMMARY: dict = {}


@pytest.fixture(scope="module", autouse=True)
def _write_summary():
    yield
    path = os.environ.get("BLOCKSCALE_PEERS_SUMMARY")
    if path and SUMMARY:
        old = {}
        if os.path.exists(path):
            with open(path) as f:
                old = json.load(f)
        old.update(SUMMARY)
        with open(path, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)


def record(key: str, counts: dict) -> None:
    SUMMARY[key] = counts
    print(f"[peers torch] {key}: {counts}")


# ---- inputs ------------------------------------------------------------------------------------

DISTRIBUTIONS = ["normal", "outliers", "zero_blocks", "wide", "tiny", "boundary_e4m3",
                 "boundary_pow2", "signed_zeros"]
SHAPES = [(16, 128), (96, 320), (256, 1024)]
CASES = [(d, s) for d in DISTRIBUTIONS for s in SHAPES] + [("normal", (1, 64)), ("bf16", (64, 256)),
                                                          ("bf16", (256, 1024))]


def e4m3_midpoints() -> np.ndarray:
    values = np.arange(0x08, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return (values[:-1] + values[1:]) / 2  # between neighbouring normal E4M3 values


def nudged(target: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """float32(target) moved by `steps` ulps."""
    bits = target.astype(F32).view(np.int32).astype(np.int64) + steps
    return bits.astype(np.int32).view(F32)


def make_input(dist: str, shape: tuple, seed: int = 7) -> np.ndarray:
    """float32 input of a distribution; for "bf16" values exact in bfloat16."""
    rows, cols = shape
    rng = np.random.Generator(np.random.PCG64([seed, DISTRIBUTIONS.index(dist) if dist in
                                               DISTRIBUTIONS else 99, rows, cols]))
    x = rng.standard_normal(shape).astype(F32)
    if dist == "outliers":
        x[rng.random(shape) < 0.005] *= F32(200)
        x.flat[rng.integers(x.size)] = F32(1e4)
    elif dist == "zero_blocks":
        view = x.reshape(rows, cols // 32, 32)
        view[rng.random((rows, cols // 32)) < 0.3] = 0
        x[0] = 0
    elif dist == "wide":  # block magnitudes over 2^-40 .. 2^24: E4M3 subnormal and clamped scales
        x *= np.repeat(np.exp2(rng.uniform(-40, 24, (rows, cols // 16))).astype(F32), 16, axis=1)
    elif dist == "tiny":  # float32 subnormals and values near 2^-126: UE8M0 code 0 and 1
        x *= np.repeat(np.exp2(rng.uniform(-150, -118, (rows, cols // 16))).astype(F32), 16, axis=1)
        # a 32-block whose amax is 2^-124 - 2^-148: amax * 0.25 is a subnormal tie that rounds
        # up to 2^-126 (UE8M0 floor code 1), while amax's exponent field says code 0
        x[0, :32] = rng.uniform(-1, 1, 32).astype(F32) * F32(2.0**-130)
        x[0, 5] = F32(2.0**-124 - 2.0**-148)
    elif dist in ("boundary_e4m3", "boundary_pow2"):
        block = 16 if dist == "boundary_e4m3" else 32
        nb = cols // block
        if dist == "boundary_e4m3":  # block amax / 6 next to the midpoint of two E4M3 values
            mids = e4m3_midpoints()
            target = 6.0 * mids[rng.integers(0, mids.size, (rows, nb))]
        else:  # block amax next to 4 * 2^k or 6 * 2^k: where FLOOR and RCEIL change code
            target = rng.choice([4.0, 6.0], (rows, nb)) * np.exp2(rng.integers(-40, 40, (rows, nb)))
        amax = nudged(target, rng.integers(-3, 4, (rows, nb)))
        values = rng.uniform(-1, 1, (rows, nb, block)).astype(F32) * amax[..., None]
        where = rng.integers(0, block, (rows, nb))
        np.put_along_axis(values, where[..., None],
                          (amax * rng.choice(np.array([-1, 1], F32), (rows, nb)))[..., None], axis=2)
        x = values.reshape(rows, cols)
    elif dist == "signed_zeros":  # -0.0 entries, and whole blocks of +-0
        x[rng.random(shape) < 0.05] = F32(-0.0)
        view = x.reshape(rows, cols // 32, 32)
        view[rng.random((rows, cols // 32)) < 0.1] = F32(-0.0)
    elif dist == "bf16":
        x[rng.random(shape) < 0.01] *= F32(100)
        x = x.astype(ml_dtypes.bfloat16).astype(F32)
    return np.ascontiguousarray(x)


def as_torch(x: np.ndarray, dist: str):
    t = torch.from_numpy(x.copy())
    return t.to(torch.bfloat16) if dist == "bf16" else t


def as_ours(x: np.ndarray, dist: str):
    return as_torch(x, dist)  # blockscale reads torch CPU tensors (bfloat16 too) in place


# ---- float32 formula pieces (numpy) --------------------------------------------------------------

def e4m3_code(v: np.ndarray) -> np.ndarray:
    """E4M3 codes of non-negative float32 values, nearest-even, saturating at 448."""
    return np.minimum(v, F32(448)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def e4m3_value(codes: np.ndarray) -> np.ndarray:
    return codes.view(ml_dtypes.float8_e4m3fn).astype(F32)


def e2m1_code(v: np.ndarray) -> np.ndarray:
    """E2M1 codes of float32 values (no NaN), nearest-even, saturating at +-6."""
    return v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)


def ue8m0_value(codes: np.ndarray) -> np.ndarray:
    return np.ldexp(F32(1), codes.astype(np.int32) - 127).astype(F32)


def unpack(packed: np.ndarray) -> np.ndarray:
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out


def block_amax(x: np.ndarray, block: int, tile: bool = False) -> np.ndarray:
    """max |x| of each block of `block` along the rows, or of each 16x16 tile repeated on its
    16 rows (rows a multiple of 16)."""
    rows, cols = x.shape
    a = np.abs(x).reshape(rows, cols // block, block).max(axis=2)
    if tile:
        a = np.repeat(a.reshape(rows // 16, 16, -1).max(axis=1), 16, axis=0)
    return a


def widen(per_block: np.ndarray, block: int) -> np.ndarray:
    return np.repeat(per_block, block, axis=1)


def ours_formula(x: np.ndarray, block: int, scale_kind: str, target: float, rounding: str,
                 s_enc: float = 1.0, tile: bool = False):
    """Our rule (block/codec.hpp): m = s_enc * fp32(1/target); S = scale(min(amax * m, FLT_MAX));
    f = min(1 / (S * s_dec), FLT_MAX), s_dec = fp32(1 / s_enc); q = e2m1(x * f), zero codes where
    S is 0. Returns (element codes, scale codes, f)."""
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        enc = F32(s_enc)
        m = enc * (F32(1) / F32(target))
        scaled = np.minimum(block_amax(x, block, tile) * m, FLT_MAX)
        if scale_kind == "ue4m3":
            assert rounding == "nearest_even"
            codes = e4m3_code(scaled)
            value = e4m3_value(codes)
        else:  # ue8m0, rounded down or up to a power of two, no zero: code 0 is 2^-127
            mantissa, exponent = np.frexp(scaled)
            k = exponent.astype(np.int64) - 1  # floor(log2)
            if rounding == "up":
                k = np.where(mantissa == 0.5, k, k + 1)
            k = np.where(scaled == 0, -127, k)
            codes = np.clip(k + 127, 0, 254).astype(np.uint8)
            value = ue8m0_value(codes)
        s_dec = F32(1) / enc
        f = np.minimum(F32(1) / (value * s_dec), FLT_MAX)
        q = e2m1_code(x * widen(f, block))
    q[widen(value == 0, block)] = 0
    return q, codes, f


# ---- classification ----------------------------------------------------------------------------

def check_against_formulas(name: str, block: int, ours, theirs, ours_formula_out, theirs_formula_out,
                           block_classes: dict, element_classes: dict) -> dict:
    """ours/theirs: (element codes [M, K], scale codes [M, nb]) from the libraries; the *_formula_out
    the same from the float32 recomputations. block_classes: name -> bool [M, nb], disjoint,
    blocks whose scale (and so perhaps elements) the formulas treat differently; element_classes:
    name -> bool [M, K], elements outside those blocks that the formulas round differently.
    Asserts emulation == library on both sides, library differences == formula differences, and
    that every difference lies in a class. Returns the counts."""
    (oq, os_), (tq, ts) = ours, theirs
    (eoq, eos), (etq, ets) = ours_formula_out, theirs_formula_out
    np.testing.assert_array_equal(oq, eoq, err_msg=f"{name}: blockscale != our formula (elements)")
    np.testing.assert_array_equal(os_, eos, err_msg=f"{name}: blockscale != our formula (scales)")
    np.testing.assert_array_equal(tq, etq, err_msg=f"{name}: the peer != its formula (elements)")
    np.testing.assert_array_equal(ts, ets, err_msg=f"{name}: the peer != its formula (scales)")
    element_diff = oq != tq
    scale_diff = os_ != ts
    counts = {"elements": int(oq.size), "blocks": int(os_.size),
              "element_diffs": int(element_diff.sum()), "scale_diffs": int(scale_diff.sum())}
    covered_blocks = np.zeros(os_.shape, bool)
    for cname, mask in block_classes.items():
        assert not np.any(covered_blocks & mask), f"{name}: class {cname} overlaps"
        covered_blocks |= mask
        wide = widen(mask, block)
        counts[cname] = {"blocks": int(mask.sum()), "scale_diffs": int((scale_diff & mask).sum()),
                         "element_diffs": int((element_diff & wide).sum())}
    assert not np.any(scale_diff & ~covered_blocks), (
        f"{name}: {(scale_diff & ~covered_blocks).sum()} scale differences in no class")
    covered_elements = widen(covered_blocks, block)
    for cname, mask in element_classes.items():
        mask = mask & ~covered_elements
        assert not np.any(covered_elements & mask)
        covered_elements |= mask
        counts[cname] = {"element_diffs": int((element_diff & mask).sum())}
        # an element class is a set of elements that the formulas round differently: all differ
        assert np.all(element_diff[mask]), f"{name}: class {cname} holds equal elements"
    stray = element_diff & ~covered_elements
    assert not np.any(stray), (
        f"{name}: {stray.sum()} element differences in no class, e.g. at {np.argwhere(stray)[:4]}")
    counts["equal_elements"] = int((~element_diff).sum())
    counts["equal_scales"] = int((~scale_diff).sum())
    return counts


# ==== torchao ===================================================================================

def torchao_nvfp4_formula(x: np.ndarray, p):
    """torchao nvfp4_quantize: S = e4m3(clamp(amax / 6 [/ p], tiny, 448)); q = e2m1(clamp(x * f))
    with f = 1 / S, or (1 / p) / S with a per-tensor scale p. Returns codes, scale codes, f and
    the unclamped scale value."""
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        bs = block_amax(x, 16) / F32(6)
        if p is not None:
            bs = bs / F32(p)
        codes = e4m3_code(np.clip(bs, E4M3_TINY, F32(448)))
        value = e4m3_value(codes)
        f = (F32(1) / value) if p is None else (F32(1) / F32(p)) / value
        y = np.clip(x * widen(f, 16), F32(-6), F32(6))
        nan = np.isnan(y)  # 0 * inf where f overflowed: torchao's bit arithmetic gives 0b?011
        q = e2m1_code(np.where(nan, F32(0), y))
        q[nan] = np.where(np.signbit(y[nan]), 0b1011, 0b0011)
    return q, codes, f, bs


@pytest.mark.parametrize("two_level", [False, True], ids=["single_level", "per_tensor_scale"])
@pytest.mark.parametrize("dist,shape", CASES, ids=[f"{d}-{s[0]}x{s[1]}" for d, s in CASES])
def test_torchao_nvfp4(dist, shape, two_level):
    nvfp4_tensor = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
    x = make_input(dist, shape)
    xt = as_torch(x, dist)
    p = None
    if two_level:
        p_t = nvfp4_tensor.per_tensor_amax_to_scale(torch.max(torch.abs(xt)))  # amax / (448 * 6)
        p = F32(p_t.item())
        assert p == np.abs(x).max() / F32(2688)
        assert blockscale.conventions.global_scale(float(np.abs(x).max()), "torchao") == p
    peer = nvfp4_tensor.NVFP4Tensor.to_nvfp4(xt, block_size=16,
                                              per_tensor_scale=None if p is None else p_t)
    tq = unpack(peer.qdata.view(torch.uint8).numpy())
    ts = peer.scale.view(torch.uint8).numpy()
    # torchao's p multiplies, ours divides: s_enc = fp32(1 / p) (blockscale.conventions)
    s_enc = 1.0 if p is None else blockscale.conventions.encode_scale(float(p), "torchao")
    if not np.isfinite(s_enc):
        # tensor amax ~1e-38: p = amax / 2688 is so small that 1 / p overflows; torchao then
        # multiplies by inf, and blockscale refuses the encode scale
        with pytest.raises(ValueError, match="encode_scale"):
            blockscale.quantize(as_ours(x, dist), "nvfp4", encode_scale=s_enc)
        record(f"torchao_nvfp4/two_level/{dist}/{shape[0]}x{shape[1]}",
               {"refused": "1/p overflows float32"})
        return
    q = blockscale.quantize(as_ours(x, dist), "nvfp4", encode_scale=s_enc)
    oq, os_ = q.element_codes(), q.scales

    eoq, eos, f_ours = ours_formula(x, 16, "ue4m3", 6.0, "nearest_even", s_enc)
    etq, ets, f_theirs, unclamped = torchao_nvfp4_formula(x, p)
    overflow = np.isinf(f_theirs)
    floor = ~overflow & (unclamped < E4M3_TINY)
    with np.errstate(over="ignore", under="ignore"):
        ours_scaled = block_amax(x, 16) * (F32(s_enc) * (F32(1) / F32(6)))
    order = ~overflow & ~floor & (eos != ets)
    factor = widen(~overflow & ~floor & ~order & (f_ours != f_theirs), 16) & (eoq != etq)
    counts = check_against_formulas(
        f"torchao nvfp4 {dist} {shape}", 16, (oq, os_), (tq, ts), (eoq, eos), (etq, ets),
        {
            # torchao's factor (1 / p) / S overflows to inf (tensor amax near float32's
            # subnormals): its zeros become 0 * inf = NaN, which its f32_to_f4_unpacked turns
            # into 0b1011; ours caps f at FLT_MAX
            "peer_factor_overflow": overflow,
            # torchao clamps the block scale from below at E4M3's smallest normal 2^-6
            # (finfo.tiny); ours keeps E4M3's subnormal scales and 0 (a zero block: zero codes)
            "scale_floor_at_tiny": floor,
            # amax / 6 [/ p] (torchao) vs amax * (s_enc * fp32(1/6)) (ours) round to different
            # E4M3 codes: the two float32 values lie on either side of an E4M3 midpoint
            "scale_op_order": order,
        },
        {
            # same scale code, but f = (1 / p) / S (torchao) vs 1 / (S * fp32(1 / s_enc)) (ours)
            # differ in float32 and x * f falls on different sides of an E2M1 decision point
            "factor_op_order": factor,
        })
    # the op-order scale class is exactly the blocks whose two float32 scale values differ
    # across a rounding point: check that its members' float32 values do differ
    if order.any():
        assert np.all(ours_scaled[order] != unclamped[order])
    if p is None:
        assert counts["factor_op_order"]["element_diffs"] == 0  # f = 1 / S on both sides
    record(f"torchao_nvfp4/{'two_level' if two_level else 'single'}/{dist}/{shape[0]}x{shape[1]}",
           counts)

    # Dequantization: torchao's values q * (p * S) against ours decoding torchao's own codes
    # with s_dec = p: (q * S) * p. They can differ only where q * (p * S) rounds twice.
    deq_theirs = peer.dequantize(torch.float32).numpy()
    mine = blockscale.QuantizedTensor.from_arrays(
        "nvfp4", peer.qdata.view(torch.uint8).numpy(), ts, 1.0 if p is None else float(p),
        shape[1])
    deq_ours = mine.dequantize("float32")
    values = tq.view(ml_dtypes.float4_e2m1fn).astype(F32)
    S = widen(e4m3_value(ts), 16)
    with np.errstate(under="ignore"):
        predicted_theirs = values * (S if p is None else F32(p) * S)
        predicted_ours = (values * S) * F32(1.0 if p is None else p)
    np.testing.assert_array_equal(deq_theirs.view(np.uint32), predicted_theirs.view(np.uint32))
    np.testing.assert_array_equal(deq_ours.view(np.uint32), predicted_ours.view(np.uint32))
    differ = deq_ours.view(np.uint32) != deq_theirs.view(np.uint32)
    if p is None:
        assert not differ.any()
    else:
        # one float32 ulp apart, and only where q is +-1.5, +-3 or +-6 (3 * 2^k: q * (p * S)
        # rounds p * S first and then the product by 3; q * S is exact)
        # Where p * S is a float32 subnormal it loses bits, and the gap can be a few ulps.
        gap = np.abs(deq_ours.view(np.int32).astype(np.int64) - deq_theirs.view(np.int32))
        with np.errstate(under="ignore"):
            subnormal = (F32(p) * S) < F32(2.0**-126)
        normal = differ & ~subnormal
        assert np.all(gap[normal] == 1)
        assert np.all(np.isin(np.abs(values[normal]), [1.5, 3.0, 6.0]))
        SUMMARY[f"torchao_nvfp4_dequant/two_level/{dist}/{shape[0]}x{shape[1]}"] = {
            "values": int(differ.size), "diffs_1ulp_q_3x2^k": int(normal.sum()),
            "diffs_subnormal_p_times_S": int((differ & subnormal).sum())}


def torchao_mx_formula(x: np.ndarray, mode: str):
    """torchao to_mx for float4_e2m1fn_x2.
    FLOOR: code = clamp(exponent field of amax - 127 - 2, -127, 128) + 127, scale value
      max(2^(code - 127), 2^-126) (F32_MIN_NORMAL), q = e2m1(x / scale).
    RCEIL: code = clamp(ceil(torch.log2(amax / 6)), -127, 127) + 127, q = e2m1(clamp(x * r)),
      r = 2^(127 - code), but 1.0 for code 0.
    Returns codes, scale codes, and the exact code of the peer's rule (without log2's rounding)."""
    amax = block_amax(x, 32)
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        if mode == "floor":
            field = (amax.view(np.uint32) >> 23) & 0xFF
            codes = (np.clip(field.astype(np.int64) - 127 - 2, -127, 128) + 127).astype(np.uint8)
            scale = np.maximum(ue8m0_value(codes), F32(2.0**-126))
            q = e2m1_code(x / widen(scale, 32))
            exact = codes
        else:
            descale = amax / F32(6)
            log2 = torch.log2(torch.from_numpy(descale)).numpy()  # the peer's own primitive
            codes = (np.clip(np.ceil(log2), -127, 127) + 127).astype(np.uint8)
            r = np.where(codes == 0, F32(1), np.ldexp(F32(1), 127 - codes.astype(np.int32))).astype(F32)
            q = e2m1_code(np.clip(x * widen(r, 32), F32(-6), F32(6)))
            mantissa, exponent = np.frexp(descale)
            k = np.where(mantissa == 0.5, exponent - 1, exponent).astype(np.int64)
            k = np.where(descale == 0, -127, k)
            exact = (np.clip(k, -127, 127) + 127).astype(np.uint8)
    return q, codes, exact


@pytest.mark.parametrize("mode", ["floor", "rceil"])
@pytest.mark.parametrize("dist,shape", CASES, ids=[f"{d}-{s[0]}x{s[1]}" for d, s in CASES])
def test_torchao_mxfp4(dist, shape, mode):
    mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    x = make_input(dist, shape)
    scaling = ScaleCalculationMode.FLOOR if mode == "floor" else ScaleCalculationMode.RCEIL
    peer = mx_tensor.MXTensor.to_mx(as_torch(x, dist), torch.float4_e2m1fn_x2, 32,
                                    scaling_mode=scaling)
    tq = unpack(peer.qdata.view(torch.uint8).numpy())
    ts = peer.scale.view(torch.uint8).numpy().reshape(shape[0], -1)
    rule = "ocp_floor" if mode == "floor" else "rceil"
    q = blockscale.quantize(as_ours(x, dist), "mxfp4", rule=rule)
    oq, os_ = q.element_codes(), q.scales

    target, rounding = (4.0, "down") if mode == "floor" else (6.0, "up")
    eoq, eos, _ = ours_formula(x, 32, "ue8m0", target, rounding)
    etq, ets, exact = torchao_mx_formula(x, mode)
    if mode == "floor":
        classes = {
            # amax * 0.25 rounded in float32 (ours) vs the exponent field of amax minus 2 (torchao):
            # they differ only below 2^-124, where amax * 0.25 is a float32 subnormal that can round
            # up to the next power of two
            "scale_subnormal_quarter": (eos != ets) & (block_amax(x, 32) < F32(2.0**-124)),
            # both store code 0 (2^-127), but torchao divides by max(2^-127, 2^-126) = 2^-126
            # (F32_MIN_NORMAL clamp), ours multiplies by 1 / 2^-127 = 2^127: a factor of 2
            "code0_divides_by_2^-126": (eos == ets) & (ets == 0),
        }
    else:
        classes = {
            # torch.log2 in float32 returns the integer k for amax / 6 a few ulps above 2^k
            # (|k| >= 4), so ceil gives k: torchao's scale is one binade below the exact RCEIL
            "log2_rounding": ets != exact,
            # amax / 6 (torchao) vs amax * fp32(1/6) (ours) fall on either side of a power of two
            "descale_op_order": (ets == exact) & (eos != ets),
            # both store code 0, but torchao multiplies by 1.0 instead of 2^127
            "code0_unit_factor": (eos == ets) & (ets == 0),
        }
    counts = check_against_formulas(f"torchao mxfp4 {mode} {dist} {shape}", 32, (oq, os_), (tq, ts),
                                    (eoq, eos), (etq, ets), classes, {})
    if mode == "floor":
        assert np.all(block_amax(x, 32)[eos != ets] < F32(2.0**-124))
    record(f"torchao_mxfp4/{mode}/{dist}/{shape[0]}x{shape[1]}", counts)


# ==== compressed-tensors =========================================================================

def ct_formula(x: np.ndarray, g: np.float32):
    """compressed-tensors NVFP4 (calculate_qparams + NVFP4PackedCompressor on the CPU):
    S = e4m3(g * (amax / 6)), 0 replaced by 0.125; q = cast_to_fp4(clamp(x / (S / g))), which
    rounds to nearest-even but writes +0 for -0.0 (sign from torch.sign, which is 0 there)."""
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        s = g * (block_amax(x, 16) / F32(6))
        codes = e4m3_code(np.clip(s, F32(-448), F32(448)))
        value = e4m3_value(codes)
        value = np.where(value == 0, F32(0.125), value)
        codes = e4m3_code(value)
        y = np.clip(x / widen(value / g, 16), F32(-6), F32(6))
        q = e2m1_code(y)
        q[(y == 0) & np.signbit(y)] = 0
    return q, codes


def ct_scheme():
    from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme

    return preset_name_to_scheme("NVFP4A16", ["Linear"])


def ct_compress(xt):
    """compressed-tensors' own path: global scale from generate_gparam, block scales from
    calculate_qparams, then NVFP4PackedCompressor.compress (CPU fallback of quantize_and_pack)."""
    from compressed_tensors.compressors import NVFP4PackedCompressor
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

    scheme = ct_scheme()
    g = generate_gparam(xt.min(), xt.max())
    rows, cols = xt.shape
    groups = xt.reshape(rows, cols // 16, 16)
    scale, zp = calculate_qparams(groups.amin(-1), groups.amax(-1), scheme.weights, global_scale=g)
    out = NVFP4PackedCompressor.compress(
        {"weight": xt, "weight_scale": scale, "weight_global_scale": g, "weight_zero_point": zp},
        scheme)
    return out, g, scheme


# compressed-tensors computes a bfloat16 weight's scales in bfloat16 arithmetic; NVFP4 checkpoints
# are made from float32 scales, so the comparison uses float32 weights.
CT_CASES = [c for c in CASES if c[0] != "bf16"]


@pytest.mark.parametrize("dist,shape", CT_CASES, ids=[f"{d}-{s[0]}x{s[1]}" for d, s in CT_CASES])
def test_compressed_tensors_nvfp4(dist, shape):
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors import NVFP4PackedCompressor

    x = make_input(dist, shape)
    xt = as_torch(x, dist)
    out, g_t, scheme = ct_compress(xt)
    g = F32(g_t.item())
    # generate_gparam computes 448 * 6 / amax as python-float / tensor, which torch evaluates as
    # reciprocal(amax) * 2688: two float32 roundings, not one division
    # (and 1 where that is not finite: nan_to_num)
    amax_t = np.abs(x).max()
    with np.errstate(over="ignore", divide="ignore"):
        g_formula = (F32(1) / amax_t) * F32(2688)
    assert g == (g_formula if np.isfinite(g_formula) else F32(1))
    # blockscale's adapter computes compressed-tensors' value bit for bit
    assert blockscale.conventions.global_scale(float(amax_t), "compressed_tensors") == g
    SUMMARY.setdefault("compressed_tensors_global_scale", {"cases": 0, "differs_from_2688/amax": 0})
    SUMMARY["compressed_tensors_global_scale"]["cases"] += 1
    with np.errstate(over="ignore", divide="ignore"):
        one_division = F32(2688) / amax_t
    SUMMARY["compressed_tensors_global_scale"]["differs_from_2688/amax"] += int(
        bool(np.isfinite(g_formula) and g != one_division))
    packed_theirs = out["weight_packed"].numpy()
    ts = out["weight_scale"].view(torch.uint8).numpy()
    s_enc = blockscale.conventions.encode_scale(float(g), "compressed_tensors")
    assert s_enc == float(g)
    q = blockscale.quantize(as_ours(x, dist), "nvfp4", encode_scale=s_enc)
    oq, os_ = q.element_codes(), q.scales
    tq = unpack(packed_theirs)

    eoq, eos, f_ours = ours_formula(x, 16, "ue4m3", 6.0, "nearest_even", s_enc)
    etq, ets = ct_formula(x, g)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        amax = block_amax(x, 16)
        their_scaled = g * (amax / F32(6))
        zero_guard = e4m3_code(np.clip(their_scaled, 0, F32(448))) == 0
        scale_order = ~zero_guard & (eos != ets)
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        y_theirs = x / widen(e4m3_value(ets) / g, 16)
        y_ours = x * widen(f_ours, 16)
    negative_zero = widen(~zero_guard & ~scale_order, 16) & (y_theirs == 0) & np.signbit(y_theirs)
    same_scale = widen(~zero_guard & ~scale_order, 16)
    factor = same_scale & ~negative_zero & (y_ours != y_theirs) & (eoq != etq)
    with np.errstate(under="ignore", divide="ignore"):
        S_theirs = e4m3_value(ets)
        tiny_intermediate = widen((S_theirs / g < F32(2.0**-126))
                                  | (S_theirs * (F32(1) / g) < F32(2.0**-126)), 16)
    factor_subnormal = factor & tiny_intermediate
    factor = factor & ~tiny_intermediate
    counts = check_against_formulas(
        f"compressed-tensors nvfp4 {dist} {shape}", 16, (oq, os_), (tq, ts), (eoq, eos), (etq, ets),
        {
            # a block scale that rounds to 0 becomes 0.125 (calculate_qparams' division guard,
            # _get_dtype_eps for FP8); ours stays 0 and stores zero codes
            "zero_scale_replaced_by_0.125": zero_guard,
            # g * (amax / 6) (compressed-tensors) vs amax * (g * fp32(1/6)) (ours) round to
            # different E4M3 codes
            "scale_op_order": scale_order,
        },
        {
            # x * s_enc / S = 0 exactly and negative: cast_to_fp4 takes the sign from
            # torch.sign(-0.0) = 0 and writes +0 (0b0000); ours keeps -0 (0b1000)
            "negative_zero": negative_zero,
            # same scale code; x / (S / g) vs x * (1 / (S * fp32(1 / g))) differ in float32 and
            # land on different sides of an E2M1 decision point
            "factor_op_order": factor,
            # the same, where S / g or S * fp32(1 / g) is a float32 subnormal (g near FLT_MAX
            # for a tensor amax near 1e-35): the intermediate has lost bits, so the two factors
            # can be far apart
            "factor_subnormal_intermediate": factor_subnormal,
        })
    # byte for byte on the blocks that no class touches
    untouched = ~np.repeat(zero_guard | scale_order, 8, axis=1)
    touched = negative_zero | factor | factor_subnormal
    untouched &= ~(touched[:, 0::2] | touched[:, 1::2])
    np.testing.assert_array_equal(q.elements[untouched], packed_theirs[untouched])
    counts["equal_bytes"] = int((q.elements == packed_theirs).sum())
    counts["bytes"] = int(packed_theirs.size)
    record(f"compressed_tensors_nvfp4/{dist}/{shape[0]}x{shape[1]}", counts)

    # Its decompressor on our bytes: weight = bf16(q * (S / g)) with S our scale codes as
    # float8_e4m3fn and g = s_enc; ours: (q * S) * s_dec, rounded to bf16.
    ours_state = {"weight_packed": torch.from_numpy(q.elements.copy()),
                  "weight_scale": torch.from_numpy(q.scales.copy()).view(torch.float8_e4m3fn),
                  "weight_global_scale": torch.tensor([g], dtype=torch.float32)}
    back = NVFP4PackedCompressor.decompress(ours_state, scheme)["weight"]
    assert back.dtype == torch.bfloat16
    theirs_deq = back.view(torch.int16).numpy().view(np.uint16)
    ours_deq = q.dequantize("bfloat16").view(np.uint16)
    values = blockscale.decode(oq, "e2m1")
    S = widen(e4m3_value(os_), 16)
    with np.errstate(under="ignore"):
        pred_theirs = (values * (S / g)).astype(ml_dtypes.bfloat16).view(np.uint16)
        pred_ours = ((values * S) * F32(q.decode_scale)).astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(theirs_deq, pred_theirs)
    np.testing.assert_array_equal(ours_deq, pred_ours)
    differ = theirs_deq != ours_deq
    # where they differ, the float32 products (q * S) * fp32(1/g) and q * (S / g) differ, and
    # the bfloat16 results are neighbours
    with np.errstate(under="ignore"):
        f32_theirs = values * (S / g)
        f32_ours = (values * S) * F32(q.decode_scale)
    assert np.all(f32_theirs[differ] != f32_ours[differ])
    gap = np.abs(theirs_deq.astype(np.int64) - ours_deq.astype(np.int64))
    assert np.all(gap[differ] == 1)
    SUMMARY[f"compressed_tensors_decompress/{dist}/{shape[0]}x{shape[1]}"] = {
        "values": int(differ.size), "bf16_diffs_1ulp": int(differ.sum())}


# ==== Transformer Engine's NVFP4 reference (pure PyTorch) =======================================

TE_FILE = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py"
TE_UTILS = "transformer_engine/pytorch/custom_recipes/reference_utils.py"
TE_WHY = (
    "`import transformer_engine.pytorch` needs the compiled extension transformer_engine_torch "
    "(PyPI has only an sdist, built with nvcc against CUDA and PyTorch) and libtransformer_engine "
    "from transformer_engine_cu12/cu13; the meta wheel alone raises 'Found empty "
    "transformer-engine meta package installed'. reference_nvfp4.py itself is pure PyTorch: set "
    "BLOCKSCALE_TE_SOURCE to the transformer_engine wheel (pip download --no-deps "
    "transformer_engine), an unpacked copy or a TE checkout, or install that wheel with --no-deps.")


def _te_sources():
    """(reference_nvfp4.py text, reference_utils.py text, where) or None."""
    candidates = []
    env = os.environ.get("BLOCKSCALE_TE_SOURCE")
    if env:
        candidates.append(Path(env))
    spec = importlib.util.find_spec("transformer_engine")  # locates without importing
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p).parent for p in spec.submodule_search_locations]
    for c in candidates:
        if c.is_file() and c.suffix == ".whl":
            with zipfile.ZipFile(c) as z:
                names = set(z.namelist())
                if TE_FILE in names and TE_UTILS in names:
                    return z.read(TE_FILE).decode(), z.read(TE_UTILS).decode(), str(c)
        for root in (c, c / "transformer_engine" / ".."):
            if (root / TE_FILE).is_file() and (root / TE_UTILS).is_file():
                return (root / TE_FILE).read_text(), (root / TE_UTILS).read_text(), str(root)
    return None


@pytest.fixture(scope="module")
def te_reference():
    """Transformer Engine's reference_nvfp4 module. Imported normally where TE works; otherwise
    its file is executed with its three TE imports supplied: reference_utils (TE's own file),
    and for gemm / quantized_tensor (C++-backed, used only for GEMMs and as base classes)
    minimal stand-ins. The quantizer's arithmetic is all in the file itself."""
    try:
        from transformer_engine.pytorch.custom_recipes import reference_nvfp4

        return reference_nvfp4, "import"
    except Exception as error:  # noqa: BLE001 - any import failure means: not usable as is
        import_error = f"{type(error).__name__}: {error}"
    found = _te_sources()
    if found is None:
        pytest.skip(f"Transformer Engine's NVFP4 reference is not available ({import_error}). "
                    + TE_WHY)
    text, utils_text, where = found

    class Quantizer:  # the two attributes the reference reads
        def __init__(self, *, rowwise: bool, columnwise: bool) -> None:
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise
            self.internal = False

    class QuantizedTensorStorage:
        pass

    names = ["transformer_engine", "transformer_engine.pytorch",
             "transformer_engine.pytorch.custom_recipes",
             "transformer_engine.pytorch.custom_recipes.gemm",
             "transformer_engine.pytorch.custom_recipes.reference_utils",
             "transformer_engine.pytorch.quantized_tensor"]
    saved = {n: sys.modules.get(n) for n in names}
    try:
        for n in names[:3]:
            package = types.ModuleType(n)
            package.__path__ = []
            sys.modules[n] = package
        # gemm: names used only by the GEMM method (annotations and a default argument)
        class Anything(type):
            def __getattr__(cls, attr):
                return attr

        gemm = types.ModuleType(names[3])
        gemm.__dict__["__getattr__"] = lambda attr: Anything(attr, (), {})
        sys.modules[names[3]] = gemm
        utils = types.ModuleType(names[4])
        exec(compile(utils_text, f"{where}:{TE_UTILS}", "exec"), utils.__dict__)
        sys.modules[names[4]] = utils
        qt = types.ModuleType(names[5])
        qt.Quantizer, qt.QuantizedTensorStorage = Quantizer, QuantizedTensorStorage
        sys.modules[names[5]] = qt
        sys.modules[names[2]].gemm = sys.modules[names[3]]
        sys.modules[names[2]].reference_utils = utils
        module = types.ModuleType("_blockscale_te_reference_nvfp4")
        module.__file__ = f"{where}:{TE_FILE}"
        sys.modules[module.__name__] = module  # dataclasses look their module up there
        exec(compile(text, module.__file__, "exec"), module.__dict__)
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
    return module, f"file {where} ({import_error})"


def widen_back(mask: np.ndarray, block: int = 16) -> np.ndarray:
    """Whether any element of each block is set."""
    return mask.reshape(mask.shape[0], -1, block).any(axis=2)


def te_formula_fixup(q_ours_formula: np.ndarray, x_scaled: np.ndarray) -> np.ndarray:
    """TE's cast_to_fp4x2 assigns codes by comparisons; -0.0 fails `x < -0.0` and gets code 0."""
    q = q_ours_formula.copy()
    q[(x_scaled == 0) & np.signbit(x_scaled)] = 0
    return q


TE_CASES = [(d, s) for d in ["normal", "outliers", "zero_blocks", "wide", "boundary_e4m3",
                             "signed_zeros", "bf16"] for s in [(16, 128), (256, 1024)]]


@pytest.mark.parametrize("tile", [False, True], ids=["1x16", "16x16"])
@pytest.mark.parametrize("columnwise", [False, True], ids=["rowwise", "columnwise"])
@pytest.mark.parametrize("dist,shape", TE_CASES, ids=[f"{d}-{s[0]}x{s[1]}" for d, s in TE_CASES])
def test_transformer_engine_reference_nvfp4(te_reference, dist, shape, columnwise, tile):
    module, how = te_reference
    x = make_input(dist, shape)
    quantizer = module.NVFP4QuantizerRef(
        dtype=module.reference_utils.Fp4Formats.E2M1, rowwise=not columnwise,
        columnwise=columnwise, quant_tile_shape=(16, 16) if tile else (1, 16), with_rht=False)
    qx, sx, qx_t, sx_t, amax_row, amax_col = quantizer._quantize(as_torch(x, dist))
    data, scale, amax_t = (qx_t, sx_t, amax_col) if columnwise else (qx, sx, amax_row)
    tq = unpack(data.numpy())
    ts = scale.view(torch.uint8).numpy()
    xm = np.ascontiguousarray(x.T) if columnwise else x
    amax = F32(amax_t.item())
    assert amax == np.abs(x).max()
    # TE's s_enc: min(448 * 6 / amax, FLT_MAX), 1 where that is 0; ours from the same amax
    s_enc = blockscale.conventions.global_scale(float(amax), "transformer_engine")
    policy = blockscale.CurrentTensorScale("nvfp4")
    q = blockscale.quantize(as_ours(x, dist), "nvfp4", shape="tile" if tile else "rowwise",
                            columnwise=columnwise, policy=policy)
    assert policy.encode_scale == s_enc  # our current-scaling policy computes TE's s_enc
    oq, os_ = q.element_codes(), q.scales
    eoq, eos, f = ours_formula(xm, 16, "ue4m3", 6.0, "nearest_even", s_enc, tile=tile)
    with np.errstate(over="ignore", under="ignore"):
        scaled = xm * widen(f, 16)
    # TE's formula is ours, but for -0.0 and for blocks whose scale is 0: TE multiplies them
    # by f = FLT_MAX (the capped 1 / 0) and writes those codes, ours writes zero codes
    etq = te_formula_fixup(e2m1_code(scaled), scaled)
    zero_scale = e4m3_value(eos) == 0
    counts = check_against_formulas(
        f"TE reference {dist} {shape}", 16, (oq, os_), (tq, ts), (eoq, eos), (etq, eos),
        {"zero_scale_block": zero_scale & widen_back(np.abs(xm) > 0)},
        {
            # x * f = -0.0: TE's cast_to_fp4x2 tests `x < -0.0`, false for -0.0, and writes
            # +0 (0b0000); ours keeps the sign (0b1000), as IEEE conversion and ml_dtypes do
            "negative_zero": (scaled == 0) & np.signbit(scaled) & widen(e4m3_value(eos) > 0, 16),
        })
    assert counts["scale_diffs"] == 0
    record(f"te_reference/{'tile' if tile else '1x16'}/{'col' if columnwise else 'row'}/{dist}/"
           f"{shape[0]}x{shape[1]}", dict(counts, how="import" if how == "import" else "file"))


@pytest.mark.parametrize("shape", [(32, 64), (128, 256)])
def test_transformer_engine_reference_rht(te_reference, shape):
    """Columnwise NVFP4 with TE's random Hadamard transform (signs 0xD7E8). The inputs are
    integers times a power of two per column, so that every sum of the transform is exact in
    float32 whatever order TE's matmul adds in: the results must then agree bit for bit, which
    pins down the matrix, the sign vector, its side and the 1/4 scale."""
    module, _ = te_reference
    rng = np.random.default_rng([3, *shape])
    x = rng.integers(-1000, 1001, shape).astype(F32)
    x *= np.exp2(rng.integers(-6, 7, (1, shape[1]))).astype(F32)
    quantizer = module.NVFP4QuantizerRef(
        dtype=module.reference_utils.Fp4Formats.E2M1, rowwise=False, columnwise=True,
        quant_tile_shape=(1, 16), with_rht=True)
    _, _, qx_t, sx_t, _, amax_col = quantizer._quantize(torch.from_numpy(x))
    q = blockscale.quantize(x, "nvfp4", columnwise=True, hadamard=True,
                            encode_scale=blockscale.conventions.global_scale(
                                float(amax_col.item()), "transformer_engine"))
    assert blockscale.measure_amax(x, "nvfp4", columnwise=True, hadamard=True) == amax_col.item()
    np.testing.assert_array_equal(q.elements, qx_t.numpy())
    np.testing.assert_array_equal(q.scales, sx_t.view(torch.uint8).numpy())
    record(f"te_reference_rht/{shape[0]}x{shape[1]}",
           {"elements": int(q.elements.size * 2), "blocks": int(q.scales.size), "diffs": 0})
