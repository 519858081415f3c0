"""Host throughput of the Python package, as ratios to baselines measured in the same run.

    python bench/python/bench_python.py [--rows 4096] [--cols 4096] [--repeats 7]

Baselines: numpy's copy of the same float32 bytes (memory bandwidth), and, where torchao is
installed, torchao's CPU quantizers (NVFP4Tensor.to_nvfp4, MXTensor.to_mx) on the same tensor:
the alternative a PyTorch user has today. Each figure is the median of --repeats runs after a
warm-up. Prints a markdown table (docs/performance.md quotes it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Callable

import numpy as np

import blockscale as bs


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: page in, first-touch, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    x = np.random.default_rng(0).standard_normal((args.rows, args.cols)).astype(np.float32)
    copy = np.empty_like(x)
    gbytes = x.nbytes / 1e9
    amax = float(np.abs(x).max())
    s_enc = bs.conventions.global_scale(amax, "transformer_engine")
    cores = os.cpu_count() or 1

    cases: list[tuple[str, Callable[[], object]]] = [
        ("numpy copy (baseline)", lambda: np.copyto(copy, x)),
        ("nvfp4, 1 thread", lambda: bs.quantize(x, "nvfp4", encode_scale=s_enc)),
        (f"nvfp4, {cores} threads", lambda: bs.quantize(x, "nvfp4", encode_scale=s_enc, threads=0)),
        ("nvfp4 + current tensor scale (amax pass), 1 thread",
         lambda: bs.quantize(x, "nvfp4", policy=bs.CurrentTensorScale("nvfp4"))),
        ("ue5m3_fp4, 1 thread", lambda: bs.quantize(x, "ue5m3_fp4", encode_scale=s_enc)),
        ("mxfp4, 1 thread", lambda: bs.quantize(x, "mxfp4")),
        ("nvfp4 stochastic, 1 thread",
         lambda: bs.quantize(x, "nvfp4", encode_scale=s_enc, rounding="stochastic", seed=1)),
        ("nvfp4 columnwise, 1 thread",
         lambda: bs.quantize(x, "nvfp4", encode_scale=s_enc, columnwise=True)),
    ]
    q = bs.quantize(x, "nvfp4", encode_scale=s_enc)
    cases.append(("nvfp4 dequantize to float32, 1 thread", lambda: q.dequantize()))

    try:
        import torch
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
        from torchao.prototype.mx_formats.mx_tensor import MXTensor
        from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor

        torch.set_num_threads(cores)
        t = torch.from_numpy(x)
        pts = torch.tensor(amax / (448.0 * 6.0), dtype=torch.float32)
        cases.append((f"torchao NVFP4Tensor.to_nvfp4 (torch, {cores} threads)",
                      lambda: NVFP4Tensor.to_nvfp4(t, per_tensor_scale=pts)))
        cases.append((f"torchao MXTensor.to_mx fp4 floor (torch, {cores} threads)",
                      lambda: MXTensor.to_mx(t, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode.FLOOR)))
    except ImportError:
        pass

    results = [(name, median_seconds(fn, args.repeats)) for name, fn in cases]
    baseline = results[0][1]
    print(f"{args.rows}x{args.cols} float32 ({gbytes * 1e3:.0f} MB), {platform.processor() or platform.machine()}, "
          f"{cores} cores, median of {args.repeats}\n")
    print("| case | ms | GB/s of float32 input | ratio to numpy copy |")
    print("|---|---:|---:|---:|")
    for name, seconds in results:
        print(f"| {name} | {seconds * 1e3:.2f} | {gbytes / seconds:.2f} | {baseline / seconds:.2f} |")


if __name__ == "__main__":
    main()
