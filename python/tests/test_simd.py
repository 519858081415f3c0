"""The AVX-512 build of the extension gives the portable build's bits, option for option."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import blockscale as bs

SCRIPT = """
import sys, numpy as np, blockscale as bs
rng = np.random.default_rng(7)
x = rng.standard_normal((96, 160)).astype(np.float32)
x[rng.random(x.shape) < 0.02] *= 1e4
x[3, :32] = 0; x[5, 7] = np.nan; x[6, :16] *= 1e-30
out = {"simd": np.array(bs.simd)}
cases = [("nvfp4", {}), ("ue5m3_fp4", {}), ("mxfp4", {"rule": "rceil"}), ("mxfp8", {}),
         ("nvfp4", {"columnwise": True, "hadamard": True, "rounding": "stochastic", "seed": 3}),
         ("nvfp4", {"shape": "tile", "layout": "tensor_core"}),
         ("ue5m3_fp4", {"rounding": "stochastic", "offset": 11, "columnwise": True})]
for i, (fmt, opts) in enumerate(cases):
    q = bs.quantize(x, fmt, encode_scale=37.5 if fmt != "mxfp4" else 1.0, **opts)
    out[f"e{i}"], out[f"s{i}"], out[f"d{i}"] = q.elements, q.scales, q.dequantize()
codes = rng.integers(0, 2**32, 100000, dtype=np.uint64).astype(np.uint32).view(np.float32)
for f in ("e2m1", "e4m3", "ue5m3", "ue8m0"):
    out["c" + f] = bs.convert(codes, f)
np.savez(sys.argv[1], **out)
"""


def run(tmp_path, name, simd):
    env = dict(os.environ, BLOCKSCALE_SIMD=simd)
    path = tmp_path / f"{name}.npz"
    subprocess.run([sys.executable, "-c", SCRIPT, str(path)], check=True, env=env,
                   cwd=tmp_path)
    return np.load(path)


def test_simd_builds_agree(tmp_path):
    if bs.simd != "avx512":
        pytest.skip("this CPU or build has no AVX-512 extension: only the portable build runs")
    fast = run(tmp_path, "fast", "auto")
    portable = run(tmp_path, "portable", "portable")
    assert str(fast["simd"]) == "avx512" and str(portable["simd"]) == "portable"
    for key in fast.files:
        if key != "simd":
            np.testing.assert_array_equal(fast[key], portable[key], err_msg=key)
