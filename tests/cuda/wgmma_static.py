#!/usr/bin/env python3
"""The ctest blockscale_wgmma_static: reads the sm_90a SASS of wgmma_kernels.cu's object and fails
unless each kernel wgmma_ss_then_rs<N> holds exactly one HGMMA.64xNx16.F32.BF16 reading A through
a descriptor (gdesc) and one reading A from registers, and uses no local memory. Skips (77)
without cuobjdump, found as cuda_static.py finds it."""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_static import demangle, find_tool, resource_usage, run  # noqa: E402

N_VALUES = (8, 16, 32, 64, 128, 256)


def main() -> int:
    objects = sys.argv[1:]
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        print("SKIP: no cuobjdump (scripts/cuda_static_report.sh --install-only installs it)")
        return 77
    failures = []
    seen = {}
    for path in objects:
        function = None
        for line in run([cuobjdump, "-sass", "-arch", "sm_90a", path]).splitlines():
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                function = m.group(1)
                seen[function] = []
                continue
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
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
