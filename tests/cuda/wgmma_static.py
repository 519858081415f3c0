#!/usr/bin/env python3
"""The ctest blockscale_wgmma_static: reads the sm_90a SASS of wgmma_kernels.cu's and
async_kernels.cu's objects and fails unless each kernel wgmma_ss_then_rs<N> holds exactly one
HGMMA.64xNx16.F32.BF16 reading A through a descriptor (gdesc) and one reading A from registers,
the warp-specialised ring program's kernel holds every instruction of the asynchronous units it
uses (ASYNC_SASS), the warp-specialised GEMM's kernel both HGMMA.64x32x16.F32.BF16 forms and
setmaxnreg (GEMM_SASS), and no kernel uses local memory. Skips (77) without cuobjdump, found as
cuda_static.py finds it."""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_static import demangle, find_tool, resource_usage, run  # noqa: E402

N_VALUES = (8, 16, 32, 64, 128, 256)

# The SASS of each asynchronous operation of cuda/warp/async.hpp, as ptxas 13 writes it for sm_90a:
# mbarrier_init, mbarrier_arrive(_expect_tx), mbarrier_wait, tma_load_2d, tma_store_2d and
# fence_proxy_async in the ring; setmaxnreg_inc and _dec in the GEMM (whose warpgroups are whole).
ASYNC_SASS = ("SYNCS.EXCH.64", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT",
              "UTMALDG.2D", "UTMASTG.2D", "FENCE.VIEW.ASYNC.S")
GEMM_SASS = ("USETMAXREG.TRY_ALLOC", "USETMAXREG.DEALLOC")
ASYNC_KERNEL = "specialized_program_kernel<blockscale_test::async_ring::ring_program>"
# The warp-specialised GEMM issues wgmma m64n32k16 with A by descriptor or in registers.
GEMM_KERNEL = "specialized_program_kernel<blockscale_test::async_gemm::gemm_program>"


def main() -> int:
    objects = sys.argv[1:]
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        print("SKIP: no cuobjdump (scripts/cuda_static_report.sh --install-only installs it)")
        return 77
    failures = []
    seen = {}
    texts = {}
    for path in objects:
        function = None
        for line in run([cuobjdump, "-sass", "-arch", "sm_90a", path]).splitlines():
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                function = m.group(1)
                seen[function] = []
                continue
            if function:
                texts.setdefault(function, []).append(line)
            m = re.search(r"HGMMA\.64x(\d+)x16\.F32\.BF16 \S+, (\S+),", line)
            if m and function:
                seen[function].append((int(m.group(1)), m.group(2).startswith("gdesc")))
        for arch, functions in resource_usage(cuobjdump, path).items():
            for mangled, usage in functions.items():
                if usage["LOCAL"] or usage["STACK"]:
                    failures.append(f"{arch} {mangled}: local memory {usage['LOCAL']}, stack {usage['STACK']}")
    names = demangle(seen)
    for n in N_VALUES:
        kernel = [m for m, d in names.items() if f"wgmma_ss_then_rs<{n}>" in d]
        if len(kernel) != 1:
            failures.append(f"wgmma_ss_then_rs<{n}>: {len(kernel)} kernels in the sm_90a SASS, not 1")
            continue
        forms = sorted(seen[kernel[0]])
        if forms != [(n, False), (n, True)]:
            failures.append(f"wgmma_ss_then_rs<{n}>: HGMMA (N, A by descriptor) {forms}, "
                            f"want [({n}, False), ({n}, True)]")
        else:
            print(f"wgmma_ss_then_rs<{n}>: HGMMA.64x{n}x16.F32.BF16 with A by descriptor and in registers")
    kernel = [m for m, d in names.items() if ASYNC_KERNEL in d]
    if len(kernel) != 1:
        failures.append(f"{ASYNC_KERNEL}: {len(kernel)} kernels in the sm_90a SASS, not 1")
    else:
        sass = "\n".join(texts.get(kernel[0], []))
        missing = [op for op in ASYNC_SASS if op not in sass]
        if missing:
            failures.append(f"{ASYNC_KERNEL}: no {', '.join(missing)} in its SASS")
        else:
            print(f"{ASYNC_KERNEL}: {', '.join(ASYNC_SASS)}")
    kernel = [m for m, d in names.items() if GEMM_KERNEL in d]
    if len(kernel) != 1:
        failures.append(f"{GEMM_KERNEL}: {len(kernel)} kernels in the sm_90a SASS, not 1")
    elif sorted(set(seen[kernel[0]])) != [(32, False), (32, True)]:
        failures.append(f"{GEMM_KERNEL}: HGMMA (N, A by descriptor) {sorted(set(seen[kernel[0]]))}, "
                        "want [(32, False), (32, True)]")
    else:
        sass = "\n".join(texts.get(kernel[0], []))
        missing = [op for op in GEMM_SASS if op not in sass]
        if missing:
            failures.append(f"{GEMM_KERNEL}: no {', '.join(missing)} in its SASS")
        else:
            print(f"{GEMM_KERNEL}: HGMMA.64x32x16.F32.BF16 with A by descriptor and in registers, "
                  f"{', '.join(GEMM_SASS)}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
