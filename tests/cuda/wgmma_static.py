#!/usr/bin/env python3
"""The ctest blockscale_wgmma_static: reads the sm_90a SASS of wgmma_kernels.cu's and
async_kernels.cu's objects and fails unless each kernel wgmma_ss_then_rs<N> holds exactly one
HGMMA.64xNx16.F32.BF16 reading A through a descriptor (gdesc) and one reading A from registers,
the warp-specialised ring program's kernel holds every instruction of the asynchronous units it
uses (ASYNC_SASS), the warp-specialised GEMM's kernel both HGMMA.64x32x16.F32.BF16 forms and
setmaxnreg (GEMM_SASS), each warpgroup-MMA GEMM kernel (cuda/kernels/gemm_w4a16.hpp: W4A16
and FP4 x FP4) HGMMA with A in registers only, no HMMA, setmaxnreg, and a main loop that waits
on its ring and dequantizes in at most W4A16_LIMIT instructions per element (w4a16_report), and
no kernel uses local memory. Skips (77) without cuobjdump, found as cuda_static.py finds it."""

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


# The W4A16 and FP4 x FP4 kernels: HGMMA.64xNx16 with A from registers, the dequantization's
# instructions per element at most this in the main loop (one bf16 multiply per pair; UE8M0
# scales need two).
W4A16_KERNEL = "gemm_wgmma_program<"
W4A16_LIMIT = {"one multiply": 3.0, "ue8m0": 3.5}
# FP4 x FP4: the producer warps' dequantization of the shared operand into the swizzled buffer,
# scale lookup and index arithmetic included, at most this many instructions per element.
X_OPERAND_LIMIT = 7.5
# What the dequantization is made of (cuda/warp/dequant.hpp, e2m1_byte_pair and byte_of): a PRMT
# per byte, two IMAD and two LOP3 by the spreading constants, an HMUL2 (two for UE8M0) per pair.
DEQUANT_OPS = re.compile(r"\b(PRMT|HMUL2)\b|\bIMAD\b.*(0x40040|0x1001000)|"
                         r"\bLOP3\.LUT\b.*(0x1c001c0|0x80008000)")


def parse(lines: list[str]) -> list[tuple[int, str]]:
    """(address, instruction text) of each SASS instruction line."""
    out = []
    for line in lines:
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def w4a16_report(name: str, lines: list[str]) -> tuple[list[str], str]:
    """Failures and a one-line report for one W4A16 kernel: the main loop is the innermost loop
    around the HGMMA (from the backward branch after the last one to its target)."""
    code = parse(lines)
    failures = []
    mmas = [i for i, (_, text) in enumerate(code) if text.startswith("HGMMA")]
    if not mmas:
        return [f"{name}: no HGMMA"], ""
    if any(re.match(r"HGMMA\S* \S+, gdesc", code[i][1]) for i in mmas):
        failures.append(f"{name}: an HGMMA reads A by descriptor; the weights must be in registers")
    if any(re.match(r"(@!?U?P\w+\s+)?HMMA", text) for _, text in code):
        failures.append(f"{name}: HMMA (the Ampere MMA) in a warpgroup-MMA kernel")
    body = []
    for address, text in code[mmas[-1]:]:
        m = re.search(r"\bBRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) <= code[mmas[0]][0]:
            start = int(m.group(1), 16)
            body = [t for a, t in code if start <= a <= address]
            break
    if not body:
        return failures + [f"{name}: no loop around the HGMMA"], ""
    loop_mmas = sum(t.startswith("HGMMA") for t in body)
    elements = 32 * loop_mmas // 4  # per thread: two rows of a 64-column k-tile per four HGMMA
    dequant = sum(bool(DEQUANT_OPS.search(t)) for t in body)
    waits = sum("SYNCS.PHASECHK" in t for t in body)
    per_element = dequant / elements if elements else float("inf")
    limit = W4A16_LIMIT["ue8m0" if "ue8m0" in name else "one multiply"]
    if waits == 0:
        failures.append(f"{name}: the main loop never waits on the ring's barriers")
    bytes_read = sum(t.startswith("PRMT") for t in body)
    if bytes_read < 16 * loop_mmas // 4:
        failures.append(f"{name}: {bytes_read} PRMT in the main loop, fewer than the 16 per k-tile "
                        "that dequantizing every k-tile takes")
    if per_element > limit:
        failures.append(f"{name}: {per_element:.2f} dequantization instructions per element in "
                        f"the main loop, more than {limit}")
    if not all(op in "\n".join(lines) for op in GEMM_SASS):
        failures.append(f"{name}: no setmaxnreg ({', '.join(GEMM_SASS)})")
    report = (f"{loop_mmas} HGMMA, {len(body)} instructions in the main loop "
              f"({(len(body) - loop_mmas) / loop_mmas:.1f} others per HGMMA), "
              f"dequantization {per_element:.2f} per element (limit {limit})")
    if "gemm_wgmma_program<block_format" in name:
        producer_failures, producer = x_operand_report(name, code)
        failures += producer_failures
        report += f"; {producer}"
    return failures, report


def x_operand_report(name: str, code: list[tuple[int, str]]) -> tuple[list[str], str]:
    """FP4 x FP4: the producer warps' loop that dequantizes the shared operand, 16 elements (two
    STS.128) an iteration: the innermost loop around the STS.128, its instructions per element
    (every branch counted: the scale layouts' both index paths are in it)."""
    stores = [i for i, (_, text) in enumerate(code) if text.startswith("STS.128")]
    if len(stores) < 2:
        return [f"{name}: no STS.128 of the shared operand's dequantization"], ""
    for address, text in code[stores[-1]:]:
        m = re.search(r"\bBRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) <= code[stores[0]][0]:
            start = int(m.group(1), 16)
            body = [t for a, t in code if start <= a <= address]
            break
    else:
        return [f"{name}: no loop around the shared operand's STS.128"], ""
    stored = sum(t.startswith("STS.128") for t in body)
    per_element = len(body) / (8 * stored)
    failures = []
    if per_element > X_OPERAND_LIMIT:
        failures.append(f"{name}: the producer's dequantization of the shared operand takes "
                        f"{per_element:.2f} instructions per element, more than {X_OPERAND_LIMIT}")
    return failures, (f"producer: {len(body)} instructions per {8 * stored} elements of the "
                      f"shared operand ({per_element:.2f} per element, limit {X_OPERAND_LIMIT})")


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
    w4a16 = {m: d for m, d in names.items() if W4A16_KERNEL in d}
    if len(w4a16) < 6:
        failures.append(f"{W4A16_KERNEL}: {len(w4a16)} kernels in the sm_90a SASS, want 6 "
                        "(four W4A16, two FP4 x FP4)")
    for mangled, demangled in sorted(w4a16.items(), key=lambda item: item[1]):
        short = re.sub(r"blockscale::v0::|minifloat<|_format>", "", demangled)
        short = short[short.find(W4A16_KERNEL):].split(">(")[0]
        found, report = w4a16_report(short, texts.get(mangled, []))
        failures += found
        if not found:
            print(f"{short}: {report}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
