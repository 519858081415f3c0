#!/usr/bin/env python3
"""Static checks and reports of blockscale's CUDA kernels, read from compiled code (no GPU).

  cuda_static.py check --archs "80;90;100a;120a" [--expect-gemm] OBJECT...
      The ctest `blockscale_cuda_static` (label `static`): reads the kernels of the OBJECTs (the
      object files of tests/cuda/kernels.cu and gemm_kernels.cu, one cubin per architecture, also
      given as one argument separated by semicolons) with cuobjdump and fails when any kernel of
      any architecture has a stack frame or local memory (STACK or LOCAL in
      --dump-resource-usage; LDL/STL, which need one, are counted in the SASS of those): a
      register spill always needs a frame, so this finds every spill (and local arrays too, which
      cost the same in these kernels). For the GEMM kernels it reads the SASS of the main loop and
      fails on any QMMA, on HMMA per k-tile other than the warp tile's on the bf16 paths, and on
      OMMA per k-tile other than the warp tile's for the block-scaled path on sm_120a (a trap
      elsewhere); it prints their instructions per dequantized element (docs/cuda-static.md, "GEMM
      kernels"). --expect-gemm fails when there is no GEMM kernel. With nvdisasm, it also counts
      the executed sm_90 SASS per element of the budgeted quantize, amax and dequantize kernels
      along their common path (BUDGETS; the object is compiled with -lineinfo) and fails when
      one is over its budget (or, for a budget not met yet, over its UNMET ceiling), when one is
      missing, or when the analysis cannot count it without doubt. Exits 77 (ctest: skipped) when
      there is no cuobjdump.

  cuda_static.py report --cubin sm_90=FILE ... [--ptxas-log sm_90=FILE ...] [--sass-arch sm_90]
                        [--gemm-cubin sm_90=FILE ... [--gemm-ptxas-log sm_90=FILE ...]]
      The tables of scripts/cuda_static_report.sh and docs/cuda-static.md: per architecture, each
      kernel's registers, shared memory, stack and spills; for the --sass-arch architectures
      (one or several, side by side), the executed SASS instructions per element of the
      quantize, amax and dequantize kernels along the common path, with the budgets, and for the
      first of them each kernel's breakdown by source region (see docs/cuda-static.md,
      "Counting instructions"); and
      for the GEMM cubins, the main loop's figures per architecture.

cuobjdump and nvdisasm are found in this order: --cuobjdump / --nvdisasm, the environment
variables BLOCKSCALE_CUOBJDUMP / BLOCKSCALE_NVDISASM, the virtual environment that
scripts/cuda_static_report.sh installs them into (BLOCKSCALE_CUDA_TOOLS_VENV, default
~/.cache/blockscale/cuda-tools), PATH, and --toolkit-bin.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import tempfile
import sys

SKIP = 77

# ---- finding the tools --------------------------------------------------------------------------


def tools_venv():
    venv = os.environ.get("BLOCKSCALE_CUDA_TOOLS_VENV")
    if venv:
        return venv
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "blockscale", "cuda-tools")


def find_tool(name, explicit=None, toolkit_bin=None):
    """The path of a CUDA binary tool (cuobjdump, nvdisasm), or None."""
    candidates = [explicit, os.environ.get("BLOCKSCALE_" + name.upper())]
    venv = tools_venv()
    lib = os.path.join(venv, "lib")
    if os.path.isdir(lib):
        for python in sorted(os.listdir(lib)):
            site = os.path.join(lib, python, "site-packages", "nvidia")
            if os.path.isdir(site):
                for sub in sorted(os.listdir(site)):
                    candidates.append(os.path.join(site, sub, "bin", name))
    candidates.append(shutil.which(name))
    if toolkit_bin:
        candidates.append(os.path.join(toolkit_bin, name))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def tool_version(path):
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release [0-9.]+, V([0-9.]+)", out)
    return m.group(1) if m else "unknown"


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"error: {' '.join(args)} exited with {result.returncode}")
    return result.stdout


# ---- names --------------------------------------------------------------------------------------


def demangle(names):
    """Demangled names (c++filt from binutils; the names themselves where it is missing)."""
    names = list(names)
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True,
                         text=True).stdout.split("\n")
    return {n: (d if d else n) for n, d in zip(names, out)}


def parse_template(text):
    """A demangled C++ name as a tree: (name, [arguments]) for name<arguments...>."""
    pos = 0

    def skip_spaces():
        nonlocal pos
        while pos < len(text) and text[pos] == " ":
            pos += 1

    def node():
        nonlocal pos
        skip_spaces()
        start = pos
        while pos < len(text) and text[pos] not in "<>,()":
            pos += 1
        name = text[start:pos].strip()
        args = []
        if pos < len(text) and text[pos] == "<":
            pos += 1
            while True:
                skip_spaces()
                if pos < len(text) and text[pos] == ">":
                    pos += 1
                    break
                args.append(node())
                skip_spaces()
                if pos >= len(text):
                    break
                if text[pos] == ",":
                    pos += 1
                    continue
                if text[pos] == ">":
                    pos += 1
                    break
                pos += 1
            # A name may continue after its arguments (a nested name: a<b>::c).
            while pos < len(text) and text[pos] == ":":
                rest = node()
                name += "<...>" + rest[0]
                args = rest[1] or args
        return (name, args)

    return node()


def strip_ns(name):
    name = name.replace("blockscale::v0::", "").replace("cuda::", "")
    return name.split("::")[-1] if "::" in name else name


# ---- names the library declares ----------------------------------------------------------------
# The preset block formats (block/block_format.hpp) and the GEMM shapes (cuda/gemm.hpp) are read
# from their declarations, so that a kernel is named as the library names its template arguments
# and a new preset or shape needs no edit here.
INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "include",
                       "blockscale")


def read_declarations(header, pattern, what):
    """The matches of `pattern` in include/blockscale/<header>, in order; an error when none."""
    with open(os.path.join(INCLUDE, header), encoding="utf-8") as f:
        found = re.findall(pattern, f.read())
    if not found:
        raise SystemExit(f"cuda_static.py: no {what} declared in include/blockscale/{header}")
    return found


# (element, block size, scale) -> preset name, e.g. ("e2m1", "16", "ue4m3") -> "nvfp4".
FORMATS = {(element, size, scale): name for name, element, size, scale in read_declarations(
    "block/block_format.hpp", r"using (\w+) = block_format<(\w+), (\d+), (\w+)>;",
    "preset block formats")}
# The block size of each preset, by name.
BLOCK_SIZES = {name: int(size) for (_, size, _), name in FORMATS.items()}
# (path, BM, BN, WM, WN, stages) -> shape name without "gemm_", in the order declared.
GEMM_SHAPES = {(path, int(bm), int(bn), int(wm), int(wn), int(stages)): name
               for name, path, bm, bn, wm, wn, stages in read_declarations(
                   "cuda/gemm.hpp",
                   r"using gemm_(\w+) = gemm_shape<warp::(\w+), (\d+), (\d+), (\d+), (\d+), "
                   r"(\d+)>;", "GEMM shapes")}
GEMM_ORDER = {name: i for i, name in enumerate(GEMM_SHAPES.values())}

TYPES = {"float": "f32", "half_storage<bfloat16_layout>": "bf16",
         "half_storage<float16_layout>": "f16"}
ROUNDINGS = {"round_nearest_even": "rne", "round_up": "up", "round_down": "down",
             "round_stochastic": "sr", "round_toward_zero": "rz"}


def render(tree):
    name, args = tree
    name = strip_ns(name)
    if not args:
        return name
    return name + "<" + ", ".join(render(a) for a in args) + ">"


def short_format(tree):
    name, args = tree
    if strip_ns(name) == "block_format" and len(args) == 3:
        parts = tuple(strip_ns(render(a)).replace("minifloat<", "").replace("_format>", "")
                      for a in args)
        return FORMATS.get(parts, "/".join(parts))
    return render(tree)


def short_type(tree):
    text = render(tree)
    return TYPES.get(text, text)


def short_policy(tree):
    """policy_finish<periodic_tensor_scale> -> periodic."""
    name, args = tree
    if args:
        return render(args[0]).replace("_tensor_scale", "")
    return strip_ns(name)


def short_name(demangled):
    """A readable name for a program_kernel: kind, format, input type, direction, rounding."""
    text = demangled
    if "(" in text:
        text = text[:text.index("(")]
    text = re.sub(r"^void\s+", "", text).strip()
    tree = parse_template(text)
    gemm = gemm_short_name(text)
    if gemm:
        return gemm
    if strip_ns(tree[0]) == "block_scaled_mma_probe":
        return "gemm probe (block_scaled_mma_probe)"
    if strip_ns(tree[0]) not in ("program_kernel", "looped_program_kernel") or not tree[1]:
        return render(tree)
    program = tree[1][0]
    kind, args = strip_ns(program[0]), program[1]
    if kind == "quantize_program" and len(args) in (4, 5):
        t, row, column, completion = args[:4]
        general = len(args) == 5 and strip_ns(args[4][0]) == "general_case"
        outputs = [o for o in (row, column) if strip_ns(o[0]) == "quantize_output"]
        direction = ("pair" if len(outputs) == 2
                     else "row" if strip_ns(row[0]) == "quantize_output" else "col")
        formats = sorted({short_format(o[1][0]) for o in outputs})
        rounding = sorted({ROUNDINGS.get(render(o[1][1]), render(o[1][1])) + "/" +
                           ROUNDINGS.get(render(o[1][2]), render(o[1][2])) for o in outputs})
        name = f"quantize {'+'.join(formats)} {short_type(t)} {direction} {'+'.join(rounding)}"
        done = strip_ns(completion[0])
        if done == "policy_finish":
            name += f" +finish({short_policy(completion)})"
        elif done == "pair_finish":
            name += " +finish(" + ",".join(short_policy(a) for a in completion[1]) + ")"
        elif done != "no_completion":
            name += f" +{render(completion)}"
        if general:
            name += " (general)"
        return name
    if kind == "amax_program" and len(args) == 3:
        t, gate, completion = args
        name = f"amax {short_type(t)}"
        if strip_ns(gate[0]) != "always_measure":
            name += f" gated({short_policy(gate)})"
        if strip_ns(completion[0]) == "policy_apply":
            name += f" +apply({short_policy(completion)})"
        elif strip_ns(completion[0]) != "no_completion":
            name += f" +{render(completion)}"
        return name
    if kind == "dequantize_program" and len(args) == 2:
        return f"dequantize {short_format(args[0])} -> {short_type(args[1])}"
    return render(program)


def gemm_geometry(demangled):
    """The template arguments of a GEMM kernel, looped_program_kernel<gemm_program<FormatA,
    FormatB, Out, gemm_shape<Path, BM, BN, WM, WN, Stages>>> (cuda/kernels/gemm.hpp), as a dict,
    or None for any other kernel."""
    text = demangled
    if "(" in text:
        text = text[:text.index("(")]
    tree = parse_template(re.sub(r"^void\s+", "", text).strip())
    if strip_ns(tree[0]) != "looped_program_kernel" or not tree[1]:
        return None
    program = tree[1][0]
    if strip_ns(program[0]) != "gemm_program" or len(program[1]) != 4:
        return None
    fa, fb, out, shape = program[1]
    if strip_ns(shape[0]) != "gemm_shape" or len(shape[1]) != 6:
        return None
    try:
        path = strip_ns(render(shape[1][0]))
        bm, bn, wm, wn, stages = (int(render(a)) for a in shape[1][1:])
    except ValueError:
        return None
    key = (path, bm, bn, wm, wn, stages)
    return {"a": short_format(fa), "b": short_format(fb), "out": short_type(out), "path": path,
            "bm": bm, "bn": bn, "wm": wm, "wn": wn, "stages": stages,
            "shape": GEMM_SHAPES.get(key, f"{path} {bm}x{bn}/{wm}x{wn}/{stages}")}


def gemm_short_name(demangled):
    g = gemm_geometry(demangled)
    if g is None:
        return None
    return f"gemm {g['a']} x {g['b']} -> {g['out']} {g['shape']}"


def sort_key(short):
    kind_order = {"quantize": 0, "amax": 1, "dequantize": 2, "gemm": 3}
    parts = short.split()
    return (kind_order.get(parts[0], 3), short)


# ---- cuobjdump ----------------------------------------------------------------------------------


def normalize_arch(arch):
    """'90', '90-real', 'sm_90', 'compute_90' -> 'sm_90'; None for a virtual-only entry."""
    arch = arch.strip()
    if arch.endswith("-virtual"):
        return None
    arch = re.sub(r"-real$", "", arch)
    arch = re.sub(r"^(sm_|compute_)", "", arch)
    return "sm_" + arch


def resource_usage(cuobjdump, path, arch=None):
    """{arch: {mangled: {"REG": n, "STACK": n, "SHARED": n, "LOCAL": n}}} of an object or cubin."""
    out = run([cuobjdump, "--dump-resource-usage", path])
    usage = collections.defaultdict(dict)
    current_arch, function = arch, None
    for line in out.splitlines():
        m = re.match(r"\s*arch = (\S+)", line)
        if m:
            current_arch = m.group(1)
            continue
        m = re.match(r"\s*Function (\S+):\s*$", line)
        if m:
            function = m.group(1)
            continue
        if function and "REG:" in line:
            fields = dict(re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line))
            usage[current_arch or "unknown"][function] = {
                k: int(fields.get(k, 0)) for k in ("REG", "STACK", "SHARED", "LOCAL")}
            function = None
    return usage


def sass_local_accesses(cuobjdump, path, arch=None, functions=None):
    """{arch: {mangled: number of LDL/STL instructions}} from cuobjdump -sass: of every kernel, or
    of `functions` (names) of architecture `arch` only."""
    command = [cuobjdump, "-sass"]
    if functions is not None:
        if not functions:
            return collections.defaultdict(dict)
        command += ["-fun", ",".join(sorted(functions))]
        if arch:
            command += ["-arch", arch]
    out = run(command + [path])
    counts = collections.defaultdict(dict)
    current_arch, function = arch, None
    for line in out.splitlines():
        m = re.match(r"\s*code for (sm_\w+)", line)
        if m:
            current_arch = m.group(1)
            continue
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            function = m.group(1)
            counts[current_arch or "unknown"].setdefault(function, 0)
            continue
        if function and re.search(r"\*/\s+(@!?U?P\w+\s+)?(LDL|STL)\b", line):
            counts[current_arch or "unknown"][function] += 1
    return counts


def ptxas_log(path):
    """{mangled: {"stack": n, "spill_stores": n, "spill_loads": n, "smem": n, "regs": n}} from
    the output of ptxas -v (nvcc -Xptxas=-v) for one architecture."""
    info, function = {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"Compiling entry function '(\S+)'", line)
            if m:
                function = m.group(1)
                info[function] = {"stack": 0, "spill_stores": 0, "spill_loads": 0, "smem": 0,
                                  "regs": 0}
                continue
            if function is None:
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                          r"loads", line)
            if m:
                info[function].update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                                      spill_loads=int(m.group(3)))
            m = re.search(r"Used (\d+) registers", line)
            if m:
                info[function]["regs"] = int(m.group(1))
                s = re.search(r"(\d+) bytes smem", line)
                info[function]["smem"] = int(s.group(1)) if s else 0
    return info


# ---- the ctest ----------------------------------------------------------------------------------


def command_check(args):
    cuobjdump = find_tool("cuobjdump", args.cuobjdump, args.toolkit_bin)
    if cuobjdump is None:
        print("SKIP: no cuobjdump (the CUDA toolkit here lacks it; scripts/cuda_static_report.sh "
              "installs the nvidia-cuda-cuobjdump wheel into " + tools_venv() + ")")
        return SKIP
    print(f"cuobjdump {tool_version(cuobjdump)}: {cuobjdump}")
    # $<TARGET_OBJECTS:...> reaches us as one argument, the objects separated by semicolons.
    args.object = [p for arg in args.object for p in arg.split(";") if p]
    # The kernels of every object, by architecture, and which object holds each.
    usage, owner = collections.defaultdict(dict), {}
    for path in args.object:
        for arch, functions in resource_usage(cuobjdump, path).items():
            usage[arch].update(functions)
            for f in functions:
                owner[(arch, f)] = path
    # Local loads and stores address a frame that ptxas declares (STACK) or local memory (LOCAL),
    # so only kernels with one can have any: the SASS of those is read to count them (reading all
    # of it takes half a minute).
    local = collections.defaultdict(dict)
    for arch, functions in usage.items():
        for path in args.object:
            flagged = {f for f, u in functions.items()
                       if (u["STACK"] or u["LOCAL"]) and owner[(arch, f)] == path}
            local[arch].update(sass_local_accesses(cuobjdump, path, arch, flagged).get(arch, {}))
    names = demangle({f for per_arch in usage.values() for f in per_arch})
    failures = []
    expected = [a for a in (normalize_arch(x) for x in re.split(r"[;,\s]+", args.archs)
                            if x.strip()) if a]
    if any(not re.fullmatch(r"sm_[0-9]+[a-z]?", a) for a in expected):
        expected = []  # CMake's special values (all, all-major, native, OFF): no list to compare
    for arch in expected:
        if arch not in usage:
            failures.append(f"{arch}: no cubin in {', '.join(args.object)} (found "
                            f"{', '.join(sorted(usage))})")
    kernel_sets = {arch: set(functions) for arch, functions in usage.items()}
    if kernel_sets:
        reference = max(kernel_sets.values(), key=len)
        for arch, kernels in sorted(kernel_sets.items()):
            for missing in sorted(reference - kernels):
                failures.append(f"{arch}: {short_name(names[missing])} is missing")
    for arch in sorted(usage):
        functions = usage[arch]
        regs = [u["REG"] for u in functions.values()]
        print(f"{arch}: {len(functions)} kernels, registers {min(regs)}..{max(regs)}")
        if not functions:
            failures.append(f"{arch}: no kernels")
        for function, u in sorted(functions.items(), key=lambda kv: short_name(names[kv[0]])):
            ldl_stl = local.get(arch, {}).get(function, 0)
            known = known_spill(arch, short_name(names[function]), u)
            if known and (u["STACK"] or ldl_stl):
                print(f"  known, allowed: {arch}: {short_name(names[function])}: stack frame "
                      f"{u['STACK']} bytes, {ldl_stl} LDL/STL ({known})")
            elif not known and (u["STACK"] or u["LOCAL"] or ldl_stl):
                failures.append(f"{arch}: {short_name(names[function])}: stack frame "
                                f"{u['STACK']} bytes, local {u['LOCAL']} bytes, {ldl_stl} LDL/STL "
                                f"(registers {u['REG']})")
    failures += check_gemm(cuobjdump, args, usage, owner, names)
    failures += check_budgets(cuobjdump, args, usage, owner, names)
    if failures:
        print("FAILED: spills or local memory, kernels missing, GEMM main loops that are not "
              "what the warp tile issues, or kernels over their instruction budget (every "
              "kernel should keep its state in registers; scripts/cuda_static_report.sh shows "
              "ptxas's spill counts, the GEMM figures and the per-element counts):")
        for f in failures:
            print("  " + f)
        return 1
    print("no spills, no local memory" + (", GEMM main loops as expected" if any(
        gemm_geometry(n) for n in names.values()) else ""))
    return 0


def check_gemm(cuobjdump, args, usage, owner, names):
    """The GEMM part of the ctest: reads the SASS of the GEMM kernels, prints their figures and
    returns the failures of gemm_failures (and one if --expect-gemm finds none)."""
    geometry = {f: gemm_geometry(n) for f, n in names.items()}
    geometry = {f: g for f, g in geometry.items() if g}
    if not geometry:
        return ["no GEMM kernel found (expected those of tests/cuda/gemm_kernels.cu)"] \
            if args.expect_gemm else []
    shorts = {f: short_name(names[f]) for f in geometry}
    failures, analyses = [], {}
    for path in args.object:
        wanted = {arch: {f for f in functions if f in geometry and owner[(arch, f)] == path}
                  for arch, functions in usage.items()}
        for arch, functions in gemm_kernels(cuobjdump, path, wanted).items():
            for f in wanted[arch]:
                if f not in functions:
                    failures.append(f"{arch}: {shorts[f]}: not in cuobjdump -sass")
                    continue
                a = analyse_gemm(functions[f], geometry[f], arch)
                analyses.setdefault(arch, {})[f] = a
                failures += gemm_failures(arch, shorts[f], geometry[f], a)
    print()
    print("GEMM kernels: the main loop, per k-tile of 128 columns of K (MMAs per warp, other "
          "counts per thread; per element: per E2M1 element the thread dequantizes; target for "
          f"the dequantization itself <= {DEQUANT_TARGET:g}; docs/cuda-static.md, \"GEMM "
          "kernels\"):")
    keys = ["mma", "qmma", "elements", "dequant", "scales", "stores", "moves", "compute",
            "per_mma"]
    heads = ["MMA/k-tile", "QMMA", "elem", "dequant/elem", "scales", "stores", "moves",
             "non-MMA/k-tile", "/MMA"]
    rows = []
    for arch in sorted(analyses):
        for f in sorted(analyses[arch], key=lambda f: shorts[f]):
            x = gemm_figures(arch, geometry[f], analyses[arch][f], usage[arch][f])
            rows.append([arch, shorts[f].replace("gemm ", ""), x["registers"]] +
                        [x[k].replace("**", "") for k in keys])
            for note in gemm_notes(arch, geometry[f], analyses[arch][f]):
                rows.append(["", "  note: " + note] + [""] * (len(keys) + 1))
    table_rows = [r for r in rows if not r[1].startswith("  note:")]
    widths = [max(len(str(r[c])) for r in table_rows + [["arch", "kernel", "regs"] + heads])
              for c in range(len(heads) + 3)]
    for r in [["arch", "kernel", "regs"] + heads] + rows:
        if r[1].startswith("  note:"):
            print("  " + r[0].ljust(widths[0]) + "  " + r[1])
            continue
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print()
    return failures


def gemm_notes(arch, g, a):
    """The analysis's warnings worth printing (none for a block-scaled kernel that is a trap)."""
    if g["path"] == "block_scaled_path" and not has_native_mma(arch):
        return []
    notes = list(a["notes"])
    pe = a.get("per_element")
    if pe and pe["dequant"] > DEQUANT_TARGET:
        notes.append(f"dequantization {pe['dequant']:.2f} instructions per element, over the "
                     f"target of {DEQUANT_TARGET:g}")
    return notes


def gemm_figures(arch, g, a, u):
    """One kernel's figures, as the columns of GEMM_COLUMNS (strings)."""
    native = g["path"] == "block_scaled_path"
    f = {"registers": str(u.get("REG", "?")), "stack": str(u.get("STACK", "?")),
         "local": str(a["local"]), "qmma": str(a["total"]["QMMA"])}
    blank = {k: "-" for k in ("mma", "elements", "dequant", "scales", "stores", "moves",
                              "compute", "per_mma", "copy")}
    if native and not has_native_mma(arch):
        blank["mma"] = f"trap ({a['traps']} BPT.TRAP, {a['total']['OMMA']} OMMA)"
        return {**f, **blank}
    if a["loop"] is None:
        blank["mma"] = "no main loop found"
        return {**f, **blank}
    want = gemm_expected(g)
    op = "OMMA" if native else "HMMA"
    mma = a["per_ktile"][op]
    f["mma"] = f"{mma:g} {op}" + ("" if mma == want[op] else f" (expected {want[op]})")
    f["compute"] = str(a["compute_non_mma"])
    f["per_mma"] = f"{a['compute_non_mma'] / mma:.1f}" if mma else "-"
    f["copy"] = f"{a['copy_static']} ({a['copy_ldgsts']} LDGSTS)"
    pe = a.get("per_element")
    if pe:
        f["elements"] = str(a["elements"])
        f["dequant"] = (f"**{pe['dequant']:.2f}** = {pe['shifts']:.2f} + {pe['LOP3']:.2f} + "
                        f"{pe['multiply']:.2f}")
        f["scales"] = f"{pe['dequant+scales'] - pe['dequant']:.2f}"
        f["stores"] = f"{pe['stores']:.2f}" if pe["stores"] else "-"
        f["moves"] = f"{pe['fragment moves']:.2f}" if pe["fragment moves"] else "-"
        f["compute"] += f" ({pe['compute non-MMA']:.2f}/element)"
    else:
        blank_keys = ("elements", "dequant", "scales", "stores", "moves")
        f.update({k: "-" for k in blank_keys})
    return f


GEMM_COLUMNS = [
    ("registers", "registers"),
    ("stack", "stack (bytes)"),
    ("local", "LDL+STL"),
    ("mma", "MMA per k-tile per warp"),
    ("qmma", "QMMA"),
    ("elements", "elements dequantized per thread per k-tile"),
    ("dequant", "dequant per element: shifts + LOP3 + multiply"),
    ("scales", "scale decode per element"),
    ("stores", "staged copy: STS and moves per element"),
    ("moves", "fragment moves per element"),
    ("compute", "compute part: non-MMA per k-tile per thread"),
    ("per_mma", "compute part: non-MMA per MMA"),
    ("copy", "wait + copy code (static)"),
]


# Spills found by this test and not yet fixed, each with the largest frame allowed: printed on
# every run, never silently passed, and any other spill still fails. (arch regex, kernel regex,
# bytes of stack frame, why.)
KNOWN_SPILLS = [
    (r"sm_(80|90)", r"quantize mxfp8 bf16 col (down|rne|up)/rne$", 8,
     "MXFP8 columnwise, common case, every scale rounding: at 128 registers ptxas spills up to "
     "12 bytes (a lane holds a 32-row block's 32 words and 32 floats); open"),
    (r"sm_120a", r"quantize mxfp4 bf16 pair (down|up)/sr$", 16,
     "MXFP4 pair, stochastic, common case: ptxas keeps it at 128 registers and spills 20 bytes; "
     "open"),
    # Found when the check moved to the device test's objects (all scale roundings and input
    # types, 372 kernels per architecture instead of 113): 8-byte frames, two LDL/STL each, in
    # variants kernels.cu does not instantiate. Open.
    (r"sm_90", r"quantize (nvfp4|ue5m3_fp4) bf16 pair down/sr$", 8,
     "NVFP4 / UE5M3-FP4 pair, scales rounded down, stochastic: 8 bytes at 128 registers; open"),
    (r"sm_90", r"quantize mxfp4 f32 pair rne/sr$", 8,
     "MXFP4 pair from float, stochastic: 8 bytes at 80 registers; open"),
    (r"sm_90", r"quantize mxfp8 bf16 row rne/sr$", 8,
     "MXFP8 rowwise, stochastic: 8 bytes at 80 registers; open"),
]


def known_spill(arch, name, usage):
    for arch_pattern, name_pattern, frame, why in KNOWN_SPILLS:
        if (re.fullmatch(arch_pattern, arch) and re.match(name_pattern, name)
                and usage["STACK"] <= frame and not usage["LOCAL"]):
            return why
    return None


# ---- SASS: parsing and the control-flow graph ---------------------------------------------------


class Instruction:
    __slots__ = ("address", "predicate", "opcode", "operands", "chain", "text")

    def __init__(self, address, predicate, opcode, operands, chain, text):
        self.address = address
        self.predicate = predicate
        self.opcode = opcode
        self.operands = operands
        self.chain = chain  # [(file, line)], innermost first
        self.text = text

    @property
    def base(self):
        return self.opcode.split(".")[0]


def parse_nvdisasm(text):
    """{mangled: [Instruction or label string]} from `nvdisasm -c -gi` output."""
    functions = {}
    current, pending, chain = None, [], []
    for line in text.splitlines():
        m = re.match(r"^//-+ \.text\.(\S+) -+$", line)
        if m:
            current = functions.setdefault(m.group(1), [])
            pending, chain = [], []
            continue
        if current is None:
            continue
        m = re.match(r'\s*//## File "([^"]+)", line (\d+)', line)
        if m:
            pending.append((os.path.normpath(m.group(1)), int(m.group(2))))
            continue
        m = re.match(r"^(\.L_x_\d+|\$[\w$.]+):", line)
        if m:
            current.append(m.group(1))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*$", line)
        if m:
            if pending:
                chain, pending = pending, []
            body = m.group(2).rstrip(";").strip()
            predicate = ""
            p = re.match(r"(@!?U?P[T0-9]+)\s+(.*)", body)
            if p:
                predicate, body = p.group(1), p.group(2)
            parts = body.split(None, 1)
            opcode = parts[0] if parts else ""
            operands = parts[1] if len(parts) > 1 else ""
            current.append(Instruction(int(m.group(1), 16), predicate, opcode, operands, chain,
                                       body))
    return functions


class Block:
    def __init__(self, index, instructions, labels):
        self.index = index
        self.instructions = instructions
        self.labels = labels
        self.successors = []
        self.calls = []

    @property
    def start(self):
        return self.instructions[0].address

    @property
    def end(self):
        return self.instructions[-1].address


def branch_target(instruction):
    m = re.search(r"`\(([^)]+)\)", instruction.operands)
    return m.group(1) if m else None


CONTROL = {"BRA", "EXIT", "RET", "BRX", "JMP", "JMX", "KILL"}


def build_cfg(items):
    """Basic blocks of one function, with successors (BRA.DIV targets left out: they run only in
    a divergent warp) and call targets."""
    blocks, current, labels, pending_labels = [], [], {}, []

    def close():
        nonlocal current, pending_labels
        if current:
            blocks.append(Block(len(blocks), current, pending_labels))
            for label in pending_labels:
                labels[label] = blocks[-1].index
            current, pending_labels = [], []

    for item in items:
        if isinstance(item, str):
            close()
            pending_labels.append(item)
            continue
        current.append(item)
        if item.base in CONTROL:
            close()
    close()
    for block in blocks:
        last = block.instructions[-1]
        fallthrough = block.index + 1 if block.index + 1 < len(blocks) else None
        succ = []
        if last.base == "BRA":
            target = labels.get(branch_target(last))
            divergent_only = last.opcode.startswith("BRA.DIV")
            conditional = bool(last.predicate) or divergent_only or re.match(
                r"!?U?P[T0-9]+\s*,", last.operands)
            if target is not None and not divergent_only:
                succ.append(target)
            if conditional and fallthrough is not None:
                succ.append(fallthrough)
        elif last.base in ("EXIT", "RET", "KILL"):
            if last.predicate and fallthrough is not None:
                succ.append(fallthrough)
        elif fallthrough is not None:
            succ.append(fallthrough)
        block.successors = succ
        for instruction in block.instructions:
            if instruction.base == "CALL":
                target = labels.get(branch_target(instruction))
                if target is not None:
                    block.calls.append(target)
    return blocks


# ---- SASS: weighting by the common path ---------------------------------------------------------


class Sources:
    """Source lines by (file, line), read once."""

    def __init__(self):
        self.files = {}

    def line(self, path, number):
        if path not in self.files:
            try:
                with open(path, encoding="utf-8") as f:
                    self.files[path] = f.read().split("\n")
            except OSError:
                self.files[path] = []
        lines = self.files[path]
        return lines[number - 1] if 0 < number <= len(lines) else ""


class Rule:
    """Matches an instruction when a frame of its inline chain is in a file whose name ends with
    `file` and the source line matches `pattern`."""

    def __init__(self, file, pattern, what):
        self.file = file
        self.pattern = re.compile(pattern)
        self.what = what

    def matches(self, instruction, sources):
        for path, number in instruction.chain:
            if path.endswith(self.file) and self.pattern.search(sources.line(path, number)):
                return True
        return False


class FunctionRule(Rule):
    """Matches the lines of the body of the function whose definition line matches `signature`
    (up to the closing brace indented as that line), less those matching `exclude`. Only the
    innermost frame in `file` counts: code that the compiler merged into a call of the function
    from elsewhere in the file is not the function's."""

    def __init__(self, file, signature, exclude, what):
        super().__init__(file, r".", what)
        self.signature = re.compile(signature)
        self.exclude = re.compile(exclude)
        self.ranges = {}

    def body(self, path, sources):
        if path not in self.ranges:
            sources.line(path, 1)
            lines = sources.files.get(path, [])
            start = next((n for n, text in enumerate(lines, 1) if self.signature.search(text)),
                         None)
            end = None
            if start is not None:
                text = lines[start - 1]
                close = text[:len(text) - len(text.lstrip())] + "}"
                end = next((n for n in range(start, len(lines) + 1) if lines[n - 1] == close),
                           None)
            self.ranges[path] = (start, end) if start and end else None
        return self.ranges[path]

    def matches(self, instruction, sources):
        for path, number in instruction.chain:
            if not path.endswith(self.file):
                continue
            span = self.body(path, sources)
            return bool(span and span[0] < number <= span[1] and
                        not self.exclude.search(sources.line(path, number)))
        return False


# ---- the quantize, amax and dequantize kernels: executed instructions per element -------------
#
# cuda/kernels/quantize.hpp's programs are looped: a CTA walks tiles of 64 input rows x 512 bytes
# (64 values per thread for 16-bit input, 32 for float), and the body of the step loop runs once
# per tile. The count per element is that body on the common path, divided by the values a thread
# handles per tile. The common path: a full tile (inside the matrix), no Hadamard transform,
# 1 x B blocks, row-major scales, no counters, no completion action, finite data, a converged
# warp. What it leaves out is recognised by source line (the rules below), through the whole
# inlining chain, so that code inlined at the call `rows_pass<false>(...)` (the ragged tiles'
# predicated path) is left out as a whole. Code outside the step loop runs once per CTA (the
# factor table, the first tile's coordinates, the decode scale): reported apart, not per element.

# Code that the common case never runs. A block of which most instructions match is left out, with
# what only it leads to.
COLD = [
    Rule("block/hadamard.hpp", r".", "the Hadamard transform (options.hadamard)"),
    Rule("cuda/kernels/quantize.hpp", r"transform\(params|transform\(rowwise|transform\(column",
         "the Hadamard transform (options.hadamard)"),
    Rule("cuda/kernels/quantize.hpp", r"max_over\(most|most\[lane\]", "the B x B tile amax "
         "(block_shape::tile)"),
    Rule("cuda/kernels/quantize.hpp", r"decode_scale_data\(\) = ", "the decode scale, written by "
         "the grid's first thread"),
    Rule("cuda/kernels/quantize.hpp", r"tensor_core_padding", "the tensor-core layout's padding"),
    Rule("block/scale_layout.hpp", r"tile \* 512|\(m / 128\)|padded_blocks|in_rows|i -= in_rows",
         "tensor-core scale offsets (scale_layout::tensor_core)"),
    Rule("cuda/kernels/quantize.hpp", r"atomic_add\(done|completion\(warp\)|\*done = 0",
         "the completion action of the last CTA"),
    Rule("cuda/kernels/amax.hpp", r"atomic_add\(done|completion\(warp\)|\*done = 0",
         "the completion action of the last CTA"),
    Rule("cuda/kernels/amax.hpp", r"x\(r0 \+ i, c\)|transform\.forward",
         "the amax of a columnwise or transformed tile"),
    Rule("cuda/kernels/amax.hpp", r"tile_amax\[r0", "the tile amaxes (tile_amax set)"),
    Rule("cuda/kernels/dequantize.hpp", r"block<Warp>\(r, first \+ static_cast",
         "the blocks of a lane one by one (a ragged or misaligned end, tensor-core scales, a NaN "
         "or Inf scale, a huge s_dec)"),
    Rule("cuda/memory.hpp", r"to\[i\] = from\[i\]", "the byte-by-byte store"),
]
# Two-way branches whose one arm the common case never takes: (the branch's line, the arm's
# lines, what), or (the branch's line, HotArm(the other arm's lines), what). The arm is the
# successor whose instructions (and those of the blocks it falls into: arm_blocks) match the
# arm's lines the more; the branch block itself stays (the compiler hoists some of either arm
# above the branch, and that code runs).


class HotArm:
    """The lines of the arm that the common case takes (the other arm is left out)."""

    def __init__(self, rule):
        self.rule = rule


COLD_ARMS = [
    (Rule("cuda/kernels/quantize.hpp", r"^\s*if \(full\)( \{)?$", ""),
     Rule("cuda/kernels/quantize.hpp", r"load_words_checked|x\(r, col\)|bits << \(16 \* h\)|"
          r"std::uint32_t (bits|word) = 0|col < x\.cols|w\[k\] = word|r < x\.rows", ""),
     "the value-by-value loads of a ragged or misaligned tile"),
    (Rule("cuda/kernels/amax.hpp", r"^\s*if \(hadamard\) \{$", ""),
     HotArm(Rule("cuda/kernels/amax.hpp", r"packs\(r0, c0, valid\)|r < tile && r0 \+ r < x\.rows",
                 "")),
     "the amax of a transformed tile"),
    (Rule("cuda/kernels/amax.hpp", r"\} else if \(packs\(r0, c0, valid\)\) \{", ""),
     HotArm(Rule("cuda/kernels/amax.hpp", r"packed_tile_amax\(x\.row", "")),
     "a ragged or misaligned 16-bit tile (value by value)"),
    (Rule("cuda/memory.hpp", r"if \(bytes % 16 == 0 && valid == N", ""),
     Rule("cuda/memory.hpp", r"j < valid \? static_cast", ""),
     "a ragged or misaligned row (value by value)"),
]

# The counters (general case, with a `stats` pointer): left out for the plain count.
STATS = [
    FunctionRule("cuda/kernels/quantize.hpp", r"void publish_counts\(",
                 r"stats == nullptr|^\s*return;|^\s*}", "publishing the counters"),
    Rule("cuda/kernels/quantize.hpp", r"output\.stats != nullptr|count_blocks|c\.\w+ [+=]|"
         r"c\.amax_bits|quantize_stats one|const std::uint32_t a = amax\[lane\]|"
         r"step_index \+ 1 == steps", "counting the blocks"),
]
# Blocks that call these subroutines are the slow paths of 64-bit division and of IEEE
# reciprocals of subnormal or huge values.
COLD_CALLS = re.compile(r"slowpath|div_u64|rem_u64|div_s64|rem_s64|udiv|urem")

# Regions of the source, for the breakdown (first match, innermost frame first).
REGIONS = [
    ("dequantize: E2M1 x S in bf16 pairs (warp::dequantize8)",
     Rule("cuda/warp/dequant.hpp", r".", "")),
    ("dequantize: x s_dec and narrowing", Rule("cuda/kernels/dequantize.hpp",
                                                r"\* wide_s_dec|narrow_pair|__floats2|"
                                                r"bit_cast<std::uint32_t>\(decoded", "")),
    ("dequantize: scale codes and the short-body test",
     Rule("cuda/kernels/dequantize.hpp", r"codes\[k\]|short_body|is_finite|magnitude_mask|"
          r"finite = ", "")),
    ("dequantize: 16-byte loads and stores", Rule("cuda/kernels/dequantize.hpp",
                                                   r"copy16|from \+ 4|to\) \+ 4", "")),
    ("Philox (stochastic bits)", Rule("numeric/random.hpp", r".", "")),
    ("E2M1 rounding: clamp, three roundings, minimum",
     Rule("block/codec_e2m1.hpp", r"e2m1_clamped_magnitude|fminf|a <= 6|magic|below_|up_to_6|"
          r"const std::uint32_t [abc] = |return low|const std::uint32_t low", "")),
    ("E2M1 stochastic rounding", Rule("block/codec_e2m1.hpp", r"biased|significand|shift|"
                                      r"twice_e|\(t \+ r\)|const int e =|return \(\(t", "")),
    ("E2M1 packing and signs", Rule("block/codec_e2m1.hpp", r".", "")),
    ("x * f_b", Rule("cuda/kernels/quantize.hpp", r"\* entry\.factor", "")),
    ("stochastic bytes", Rule("cuda/kernels/quantize.hpp", r"rounding_byte|blocks\[j / 16\]", "")),
    ("block scale code", Rule("block/codec.hpp", r"scale_code|capped|min_keeping_nan|"
                              r"const float [cq] = |power|magic|offset|code -= |c == c|"
                              r"return static_cast<std::uint8_t>", "")),
    ("factor table lookup", Rule("cuda/kernels/quantize.hpp", r"factors\[code\]", "")),
    ("block amax", Rule("", r"amax_bits|magnitude_bits|max\.NaN|min\.NaN|most|least|"
                            r"amax_value|acc = ", "")),
    ("widening the input", Rule("cuda/kernels/quantize.hpp", r"widen_half|__half2float|"
                                r"word << 16|0xFFFF0000", "")),
    ("input loads (16-byte)", Rule("", r"load_row_words|copy16\(w \+ k", "")),
    ("shared memory (tile)", Rule("cuda/kernels/quantize.hpp", r"store_words|shared\.tile", "")),
    ("stores (elements, scale)", Rule("", r"store_bytes|copy8|copy16\(to|\*at\.scale = ", "")),
    ("addresses (tile origin + offsets)", Rule("cuda/kernels/quantize.hpp",
                                               r"tile_origin|origin\.at|row_bytes|"
                                               r"blocks_per_row|padded_cols|elements \+ row", "")),
    ("tile loop (coordinates, full-tile test)", Rule("", r"tile_row|tile_col|step_rows|"
                                                     r"step_cols|const bool full|if \(full\)|"
                                                     r"steps\)|for \(int step", "")),
]

CATEGORIES = [
    ("global load", lambda op: op in ("LDG", "LD")),
    ("shared load", lambda op: op in ("LDS", "LDSM")),
    ("constant load", lambda op: op in ("LDC", "ULDC")),
    ("global store", lambda op: op in ("STG", "ST")),
    ("shared store", lambda op: op == "STS"),
    ("atomic", lambda op: op in ("ATOMG", "ATOM", "RED", "ATOMS", "REDG")),
    ("local load/store", lambda op: op in ("LDL", "STL")),
    ("shuffle", lambda op: op == "SHFL"),
    ("FP32 arithmetic", lambda op: op in ("FADD", "FMUL", "FFMA", "MUFU", "FCHK", "FSWZADD")),
    ("FP compare/select/minmax", lambda op: op in ("FSETP", "FSEL", "FMNMX", "FSET")),
    ("FP16x2", lambda op: op in ("HADD2", "HMUL2", "HFMA2", "HSETP2", "HMNMX2", "VHMNMX")),
    ("conversion", lambda op: op in ("F2F", "F2I", "I2F", "I2FP", "F2FP", "FRND", "I2I",
                                     "F2IP")),
    ("integer compare/select/minmax", lambda op: op in ("ISETP", "SEL", "IMNMX", "VIMNMX",
                                                        "VIMNMX3", "PLOP3", "ICMP")),
    ("moves", lambda op: op in ("MOV", "CS2R", "S2R", "P2R", "R2P", "MOV32I", "S2UR", "R2UR",
                                "SHFL.IDX")),
    ("integer arithmetic/logic", lambda op: op in ("IMAD", "IADD3", "VIADD", "LOP3", "SHF",
                                                   "LEA", "PRMT", "POPC", "FLO", "IABS", "BMSK",
                                                   "SGXT", "BREV", "IADD", "IMUL", "LOP",
                                                   "SHL", "SHR", "BFE", "BFI", "VIADDMNMX",
                                                   "IDP", "IMNMX3")),
    ("uniform datapath", lambda op: op.startswith("U") and op not in ("ULDC",)),
    ("branch/sync/control", lambda op: op in ("BRA", "BSSY", "BSYNC", "EXIT", "CALL", "RET",
                                              "WARPSYNC", "BAR", "NOP", "MEMBAR", "ERRBAR",
                                              "CGAERRBAR", "CCTL", "ENDCOLLECTIVE", "ELECT",
                                              "VOTE", "VOTEU", "YIELD", "BPT", "DEPBAR",
                                              "FENCE", "CCTLL")),
]


def category(instruction):
    op = instruction.base
    if instruction.opcode.startswith("IMAD.MOV") or instruction.opcode.startswith("IMAD.U32") \
            and re.match(r"R\d+, RZ, RZ, ", instruction.operands):
        return "moves"
    for name, test in CATEGORIES:
        if test(op):
            return name
    return "other"


def region(instruction, sources):
    for name, rule in REGIONS:
        for path, number in instruction.chain:
            if rule.file and not path.endswith(rule.file):
                continue
            if rule.pattern.search(sources.line(path, number)):
                return name
    return "indexing and control"


class Loop:
    def __init__(self, header, latch, body):
        self.header, self.latch, self.body = header, latch, body
        self.trips, self.what = 1, "unknown loop"


def arm_blocks(blocks, first):
    """The blocks that open a branch's arm: `first`, and while a block has one successor, its
    successor too (up to the arm's first branch, and at most 8 blocks): an arm may open with a few
    instructions that the debug lines give to another statement."""
    out, b = [first], first
    while len(blocks[b].successors) == 1 and len(out) < 8:
        b = blocks[b].successors[0]
        out.append(b)
    return out


def analyse(items, sources, trip_rules, extra_cold=()):
    """Weights of the blocks of one kernel: 0 for code off the common path, else the product of
    the trip counts of the loops holding the block. trip_rules: [(Rule, trips)]; extra_cold: more
    rules like COLD's. Returns (blocks, weights, loops, left-out blocks with their reasons,
    branches whose two arms are both counted)."""
    blocks = build_cfg(items)
    cold_reason = {}
    for block in blocks:
        real = [i for i in block.instructions
                if i.base not in ("BSYNC", "BSSY", "NOP", "BRA", "WARPSYNC") and i.chain]
        if any(i.base == "CALL" and COLD_CALLS.search(i.operands) for i in block.instructions):
            cold_reason[block.index] = "a slow path out of line (a CALL)"
            continue
        if not real:
            continue
        for rule in list(COLD) + list(extra_cold):
            if sum(rule.matches(i, sources) for i in real) * 2 > len(real):
                cold_reason[block.index] = rule.what
                break
    for block in blocks:
        last = block.instructions[-1]
        if last.base != "BRA" or len(block.successors) != 2:
            continue
        for branch, arm, what in COLD_ARMS:
            if not any(branch.matches(i, sources) for i in block.instructions[-2:]):
                continue
            rule = arm.rule if isinstance(arm, HotArm) else arm
            score = [sum(rule.matches(i, sources) for x in arm_blocks(blocks, s)
                         for i in blocks[x].instructions) for s in block.successors]
            if score[0] != score[1]:
                pick = max if not isinstance(arm, HotArm) else min
                cold_reason[block.successors[score.index(pick(score))]] = what
    # A loop whose back edge leaves from a cold block never iterates on the common path: its body
    # (the blocks that reach the latch without passing the header) is cold too, all but the
    # header, whose test runs. (The compiler may unswitch `if (hadamard)` out of a loop into a
    # second copy of it, whose other blocks no rule names.)
    preds = {b.index: [] for b in blocks}
    for block in blocks:
        for s in block.successors:
            preds[s].append(block.index)
    for block in blocks:
        for header in block.successors:
            if header > block.index or block.index not in cold_reason:
                continue
            body, stack = set(), [block.index]
            while stack:
                x = stack.pop()
                if x == header or x in body:
                    continue
                body.add(x)
                stack.extend(preds[x])
            for x in body:
                cold_reason.setdefault(x, "inside a loop that does not iterate on the common "
                                          "path (" + cold_reason[block.index] + ")")
    # Reachable from the entry without entering a cold block (calls count as edges).
    hot, stack = set(), [0]
    while stack:
        b = stack.pop()
        if b in hot or b in cold_reason:
            continue
        hot.add(b)
        stack.extend(blocks[b].successors)
        stack.extend(blocks[b].calls)
    # Loops: a hot edge to a block at or before its source; the body is the hot blocks laid out
    # between the header and the latch.
    loops = []
    for b in sorted(hot):
        for s in blocks[b].successors:
            if s in hot and s <= b:
                body = [x for x in range(s, b + 1) if x in hot]
                loops.append(Loop(s, b, body))
    for loop in loops:
        # A loop is recognised by its latch, the block of its back edge, where the loop
        # statement's own increment and test are (an inner loop's lines would match its outer
        # loops' bodies too).
        for rule, trips in trip_rules:
            if any(rule.matches(i, sources) for i in blocks[loop.latch].instructions[-2:]):
                loop.trips, loop.what = trips, rule.what
                break
    # An if/else whose two arms both stay on the path would be counted twice: a hot two-way
    # branch forward to t whose fall-through side ends in a jump past t, with hot code (more than
    # reconvergence) on both sides. None is expected; the report lists any.
    both_arms = []
    for b in sorted(hot):
        succ = blocks[b].successors
        if len(succ) != 2 or not all(s in hot and s > b for s in succ):
            continue
        then, other = sorted(succ)
        for x in range(then, other):
            last = blocks[x].instructions[-1]
            if x in hot and last.base == "BRA" and not last.predicate and blocks[x].successors:
                join = blocks[x].successors[0]
                if join > other and any(y in hot and any(
                        i.base not in ("BSYNC", "BSSY", "NOP", "BRA", "WARPSYNC")
                        for i in blocks[y].instructions) for y in range(other, join)):
                    both_arms.append(blocks[b].instructions[-1])
                break
    weight = {}
    for b in range(len(blocks)):
        if b not in hot:
            weight[b] = 0
            continue
        w = 1
        for loop in loops:
            if b in loop.body:
                w *= loop.trips
        weight[b] = w
    return blocks, weight, loops, cold_reason, both_arms


def kernel_kind(short):
    return short.split()[0]


def input_type(short):
    return short.split()[2] if kernel_kind(short) == "quantize" else short.split()[1]


def per_element_divisor(short):
    """Values one thread handles per trip of the counted loop: per tile for quantize (64 rows x
    512 bytes over 256 threads), per unit for amax (a 16 x 16 tile per lane) and dequantize (32
    values per lane)."""
    kind = kernel_kind(short)
    if kind == "quantize":
        return 32 if input_type(short) == "f32" else 64
    if kind == "amax":
        return 256
    if kind == "dequantize":
        return 32  # blocks of 16 two per lane, blocks of 32 one
    raise ValueError(short)


def trip_rules_for(short):
    """The loops inside the counted loop of a quantize kernel, with their trips (the geometry of
    cuda/kernels/quantize.hpp: tiles of 64 rows x 512 bytes, 8 warps; the rows pass's units are
    B x B for a rowwise output, else a tile row; the columns pass takes 32 rows per lane in blocks
    of B, each of a word's columns in turn)."""
    if kernel_kind(short) == "amax":
        return [(Rule("cuda/kernels/amax.hpp", r"r < tile && r0 \+ r < x\.rows", "the rows of a "
                      "tile, value by value"), 16)]
    if kernel_kind(short) != "quantize":
        return []
    parts = short.split()
    b = BLOCK_SIZES.get(parts[1], 16)
    size = 4 if parts[2] == "f32" else 2
    tile_cols = 512 // size
    direction = parts[3]
    if direction in ("row", "pair"):
        height, width = b, b
    else:
        height, width = 1, 16 // size
    unit_cols = 32 // height * width
    units_per_warp = 64 // height * (tile_cols // unit_cols) // 8
    return [
        (Rule("cuda/kernels/quantize.hpp", r"i < units_per_warp", "the rows pass's units"),
         units_per_warp),
        (Rule("cuda/kernels/quantize.hpp", r"k < column_rows / b", "the columns pass's blocks "
              "down 32 rows"), 32 // b),
        (Rule("cuda/kernels/quantize.hpp", r"h < per_word", "the columns of a word"),
         4 // size),
    ]


# The loop whose body is counted, recognised by a line of its body.
LOOP_OF_KIND = {
    "quantize": Rule("cuda/kernels/quantize.hpp", r"rows_pass\(warp", "the step loop (one tile)"),
    "amax": Rule("cuda/kernels/amax.hpp", r"row_amax\(acc\[lane\]", "the unit loop (16 x 16 per "
                 "lane)"),
    "dequantize": Rule("cuda/kernels/dequantize.hpp", r"lane_blocks<Warp>\(r, first", "the unit loop (a block "
                       "per lane)"),
}


def analyse_per_element(items, sources, short, with_stats=False):
    """The executed instructions per element of a quantize, amax or dequantize kernel on the common
    path (see above): a dict with the count per trip, the per-element figure, the per-CTA count
    outside the loop, the categories and regions, and anything that makes the figure doubtful
    (`problems`)."""
    extra = [] if with_stats else STATS
    blocks, weight, loops, cold, both_arms = analyse(items, sources, trip_rules_for(short), extra)
    rule = LOOP_OF_KIND[kernel_kind(short)]
    counted = None
    for loop in loops:
        if any(rule.matches(i, sources) for x in loop.body for i in blocks[x].instructions):
            if counted is None or len(loop.body) > len(counted.body):
                counted = loop
    problems = []
    if counted is None:
        problems.append(f"no loop holding '{rule.pattern.pattern}' on the common path")
        body = set()
    else:
        body = set(counted.body)
        unknown = [loop for loop in loops if loop is not counted and set(loop.body) <= body and
                   loop.what == "unknown loop"]
        if unknown:
            problems.append(f"{len(unknown)} loop(s) inside {rule.what} with no known trip "
                            "count")
    if both_arms:
        problems.append("if/else with both arms counted at " +
                        ", ".join(f"{i.address:#06x}" for i in both_arms))
    result = {"per_trip": 0, "per_cta": 0, "static": 0, "local": 0, "barriers": 0,
              "by": collections.Counter(), "regions": collections.Counter(),
              "problems": problems, "blocks": blocks, "weight": weight, "cold": cold,
              "body": body, "loop": counted}
    for block in blocks:
        hot = weight[block.index] > 0
        for i in block.instructions:
            if i.base == "NOP":
                continue
            result["static"] += 1
            if i.base in ("LDL", "STL"):
                result["local"] += 1
            if not hot:
                continue
            w = weight[block.index]
            if block.index in body:
                result["per_trip"] += w
                result["by"][category(i)] += w
                result["regions"][region(i, sources)] += w
                if i.base == "BAR":
                    result["barriers"] += w
            else:
                result["per_cta"] += w
    result["per_element"] = result["per_trip"] / per_element_divisor(short)
    return result


# Budgets: executed sm_90 SASS per input element on the common path (no stats), the targets of
# docs/cuda-static.md. The pair's counts both outputs. A kernel over its budget fails the ctest.
BUDGETS = {}
for _f, _scale in (("nvfp4", "rne"), ("ue5m3_fp4", "rne"), ("mxfp4", "down")):
    BUDGETS[f"quantize {_f} bf16 row {_scale}/rne"] = 16.0
    BUDGETS[f"quantize {_f} bf16 col {_scale}/rne"] = 20.0
    BUDGETS[f"quantize {_f} bf16 pair {_scale}/rne"] = 24.0
    BUDGETS[f"quantize {_f} bf16 row {_scale}/sr"] = 28.0
    BUDGETS[f"quantize {_f} bf16 col {_scale}/sr"] = 28.0
    BUDGETS[f"dequantize {_f} -> bf16"] = 8.0
BUDGETS["amax bf16"] = 4.0
BUDGET_ARCH = "sm_90"
# Budgets not met yet: the ctest holds these kernels to a ceiling at today's count instead, so
# that they cannot regress, and the report marks them (docs/cuda-static.md says why).
UNMET = {}
for _f, _scale in (("nvfp4", "rne"), ("ue5m3_fp4", "rne")):
    UNMET[f"quantize {_f} bf16 pair {_scale}/rne"] = 26.0


def ceiling(short):
    """The count the ctest allows a budgeted kernel: its budget, or its UNMET ceiling."""
    return UNMET.get(short, BUDGETS[short])


def budget_failures(functions, names, sources):
    """Failures of the per-element budgets in one architecture's disassembly (nvdisasm -c -gi):
    every budgeted kernel must be there, counted without doubt, and within its budget."""
    by_short = {short_name(names.get(f, f)): f for f in functions}
    failures, lines = [], []
    for short, budget in BUDGETS.items():
        function = by_short.get(short)
        if function is None:
            failures.append(f"{short}: not found in the {BUDGET_ARCH} code")
            continue
        a = analyse_per_element(functions[function], sources, short)
        figure = a["per_element"]
        limit = ceiling(short)
        note = f", not met: ceiling {limit:g}" if figure > budget else ""
        lines.append(f"  {short}: {figure:.2f} per element (budget {budget:g}{note})")
        for problem in a["problems"]:
            failures.append(f"{short}: {problem}")
        if figure > limit:
            failures.append(f"{short}: {figure:.2f} executed instructions per element on "
                            f"{BUDGET_ARCH}, over its " +
                            (f"ceiling of {limit:g} (budget {budget:g})" if short in UNMET
                             else f"budget of {budget:g}"))
    return failures, lines


# ---- GEMM kernels: the main loop in the SASS ----------------------------------------------------
#
# Read from `cuobjdump -sass` (no line information needed, so the ctest can run it on the object
# file of the CMake build). The looped GEMM kernel (cuda/runner.cuh, looped_program_kernel) runs
# one k-tile of 128 columns per trip of its main loop: phase 0 waits for the tile's cp.async group
# (DEPBAR), the CTA barrier (BAR.SYNC, the only one in the loop), phase 1 issues the copies of a
# later tile (LDGSTS, in copy loops), commits them (LDGDEPBAR) and multiplies the tile (straight-
# line code: fragment loads, on the bf16 path the in-register dequantization, the MMAs). So:
#   - the main loop is the loop holding the MMAs (or, without any, the barrier);
#   - its k-tiles per trip is the number of BAR.SYNC in it (1 unless the compiler unrolled it);
#   - its "compute part" runs from the block of its LDGDEPBAR to its end: no copies and no inner
#     loop there, and every branch in it skips forward over code of the finite-scale path (the NaN
#     scale code), so each of its instructions runs once per k-tile on the common path;
#   - the rest of the loop body (wait, barrier, copy loops with their divisions by the run-time
#     chunk count) runs a data-dependent number of trips; it is given as a static count.
# On the bf16 path, a def-use slice classifies the compute part: "dequant" is what is computed
# from the packed elements (the 64-bit LDS) and feeds an MMA operand (the E2M1 -> bf16 unpack,
# shifts and LOP3, and the scale multiply, HMUL2 or on sm_80 HFMA2); "scale decode" is what is
# computed from the scale codes (LDS.U8) or feeds the multiply without touching the elements (the
# bf16 multiplier of a UE4M3/UE5M3/UE8M0 code and its NaN test).

NO_DESTINATION = {"ST", "STS", "STG", "STL", "STSM", "RED", "REDG", "REDS", "LDGSTS", "BAR",
                  "BRA", "BRX", "JMP", "BSSY", "BSYNC", "EXIT", "RET", "CALL", "DEPBAR",
                  "LDGDEPBAR", "NOP", "WARPSYNC", "MEMBAR", "ERRBAR", "CGAERRBAR", "CCTL", "BPT",
                  "YIELD", "KILL", "FENCE", "ARRIVES", "SYNCS", "UBLKCP", "UTMALDG", "UTMASTG"}
MMA_OPCODES = ("HMMA", "OMMA", "QMMA", "IMMA", "DMMA", "HGMMA", "QGMMA", "IGMMA", "UTCHMMA",
               "UTCQMMA", "UTCOMMA", "UTCIMMA")
REGISTER = re.compile(r"(?<![\w.])(U?R\d+|U?P\d+)(\.64)?(?![\w])")


class SassInstruction:
    __slots__ = ("address", "predicate", "opcode", "operands", "text", "base", "_registers")

    def __init__(self, address, predicate, opcode, operands, text):
        self.address, self.predicate, self.opcode = address, predicate, opcode
        self.operands, self.text = operands, text
        self.base = opcode.split(".")[0]
        self._registers = None

    def _operands(self):
        if self._registers is None:  # parsed when a slice first asks
            self._registers = register_operands(self)
        return self._registers

    @property
    def defs(self):
        return self._operands()[0]

    @property
    def srcs(self):
        return self._operands()[1]


def split_operands(text):
    """Operands at bracket depth 0, split at commas."""
    out, depth, current = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def registers_of(operand, width=1):
    """Register names (R, UR, P, UP; RZ, URZ, PT and UPT left out) that an operand names;
    `width` consecutive registers for a bare register operand, two for Rn.64."""
    names = set()
    bare = re.fullmatch(r"[-!~|]*(U?R)(\d+)(\.\w+)*\|?", operand)
    for m in REGISTER.finditer(operand):
        reg = m.group(1)
        kind, number = re.match(r"(U?[RP])(\d+)", reg).groups()
        count = 2 if m.group(2) else (width if bare else 1)
        for k in range(count):
            names.add(f"{kind}{int(number) + k}")
    return names


def mma_widths(opcode):
    """(A, B, C/D) register counts of an MMA opcode (m16n8k16 and k8 of HMMA, m16n8k32/k64 of
    QMMA and OMMA)."""
    shape = re.search(r"\.(\d{4,5})\.", opcode)
    shape = shape.group(1) if shape else ""
    d = 4 if ".F32" in opcode else 2
    if opcode.startswith("HMMA") and shape == "1688":
        return 2, 1, d
    return 4, 2, d


def register_operands(ins):
    """(defined registers, read registers) of one instruction; the guard predicate is read."""
    ops = split_operands(ins.operands)
    base = ins.base
    srcs = set()
    if ins.predicate:
        srcs |= registers_of(ins.predicate.lstrip("@"))
    if base in NO_DESTINATION or not ops:
        for k, op in enumerate(ops):
            width = 1
            if base in ("STS", "STG", "ST", "STL") and k == len(ops) - 1:
                width = 4 if ".128" in ins.opcode else 2 if ".64" in ins.opcode else 1
            srcs |= registers_of(op, width)
        return set(), srcs
    defs, first_src = set(), 1
    if base in MMA_OPCODES:
        wa, wb, wd = mma_widths(ins.opcode)
        defs = registers_of(ops[0], wd)
        for k, op in enumerate(ops[1:], 1):
            srcs |= registers_of(op, {1: wa, 2: wb, 3: wd}.get(k, 1))
        return defs, srcs
    width = 1
    if base in ("LDS", "LDG", "LD", "LDL", "LDC", "ULDC", "LDSM", "LDCU", "IMAD", "MOV", "UMOV"):
        if ".128" in ins.opcode or re.search(r"\.(M88|MT88)\.4", ins.opcode):
            width = 4
        elif ".64" in ins.opcode or ".WIDE" in ins.opcode or re.search(r"\.(M88|MT88)\.2",
                                                                          ins.opcode):
            width = 2
    defs |= registers_of(ops[0], width)
    is_predicate = lambda op: re.fullmatch(r"U?P(\d+|T)", op) is not None
    # Second results: a predicate after the first (carry-out, ISETP's second predicate), or the
    # register result of a LOP3 that also writes a predicate.
    if len(ops) > 1 and (is_predicate(ops[1]) or (is_predicate(ops[0]) and base in ("LOP3",
                                                                                      "ULOP3"))):
        defs |= registers_of(ops[1])
        first_src = 2
        if len(ops) > 2 and base in ("IADD3", "UIADD3") and is_predicate(ops[2]):
            defs |= registers_of(ops[2])
            first_src = 3
    for op in ops[first_src:]:
        srcs |= registers_of(op)
    return defs, srcs


def parse_cuobjdump_sass(text):
    """{arch: {mangled: [SassInstruction]}} from `cuobjdump -sass` output."""
    functions = collections.defaultdict(dict)
    arch, current = "unknown", None
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("/* ") or not stripped:  # an encoding line, or nothing
            continue
        m = re.match(r"\s*code for (sm_\w+)", line)
        if m:
            arch, current = m.group(1), None
            continue
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = functions[arch].setdefault(m.group(1), [])
            continue
        if current is None:
            continue
        m = re.match(r"\s*/\*([0-9a-f]+)\*/\s+([^;]*?)\s*;", line)
        if not m:
            continue
        body = m.group(2).strip()
        predicate = ""
        p = re.match(r"(@!?U?P[T0-9]+)\s+(.*)", body)
        if p:
            predicate, body = p.group(1), p.group(2)
        parts = body.split(None, 1)
        if not parts:
            continue
        current.append(SassInstruction(int(m.group(1), 16), predicate, parts[0],
                                       parts[1] if len(parts) > 1 else "", body))
    return functions


class SassBlock:
    def __init__(self, index, instructions):
        self.index, self.instructions = index, instructions
        self.successors = []

    @property
    def start(self):
        return self.instructions[0].address

    @property
    def end(self):
        return self.instructions[-1].address


def sass_branch_target(ins):
    m = re.search(r"(0x[0-9a-f]+)\s*$", ins.operands)
    return int(m.group(1), 16) if m else None


def build_sass_cfg(instructions):
    """Basic blocks of a cuobjdump listing, with successors (BRA targets are addresses)."""
    instructions = [i for i in instructions if i.base != "NOP"]
    leaders = {instructions[0].address} if instructions else set()
    for k, ins in enumerate(instructions):
        if ins.base in ("BRA", "EXIT", "RET", "BRX", "JMP", "KILL") or ins.opcode == "BPT.TRAP":
            if ins.base == "BRA":
                target = sass_branch_target(ins)
                if target is not None:
                    leaders.add(target)
            if k + 1 < len(instructions):
                leaders.add(instructions[k + 1].address)
    blocks, current = [], []
    for ins in instructions:
        if ins.address in leaders and current:
            blocks.append(SassBlock(len(blocks), current))
            current = []
        current.append(ins)
    if current:
        blocks.append(SassBlock(len(blocks), current))
    at = {b.start: b.index for b in blocks}
    for b in blocks:
        last = b.instructions[-1]
        fall = b.index + 1 if b.index + 1 < len(blocks) else None
        succ = []
        if last.base == "BRA":
            target = at.get(sass_branch_target(last))
            if target is not None and not last.opcode.startswith("BRA.DIV"):
                succ.append(target)
            if (last.predicate or last.opcode.startswith("BRA.DIV")) and fall is not None:
                succ.append(fall)
        elif last.base in ("EXIT", "RET", "KILL") or last.opcode == "BPT.TRAP":
            if last.predicate and fall is not None:
                succ.append(fall)
        elif fall is not None:
            succ.append(fall)
        b.successors = succ
    return blocks


def natural_loops(blocks):
    """[(header, latch, body)]: an edge to a block at or before its source, the body every block
    that reaches the latch without passing the header."""
    preds = collections.defaultdict(set)
    for b in blocks:
        for s in b.successors:
            preds[s].add(b.index)
    loops = []
    for b in blocks:
        for h in b.successors:
            if h > b.index:
                continue
            body, stack = {h}, [b.index]
            while stack:
                x = stack.pop()
                if x in body:
                    continue
                body.add(x)
                stack.extend(preds[x])
            loops.append((h, b.index, body))
    return loops


def gemm_expected(g):
    """MMAs per k-tile of 128 per warp that the warp tile issues (cuda/warp/tile.hpp): the bf16
    path (warp_m/16)(warp_n/8) m16n8k16 per k16, the block-scaled path (warp_m/16)(warp_n/8)
    m16n8k64 per k64."""
    atoms = (g["wm"] // 16) * (g["wn"] // 8)
    if g["path"] == "block_scaled_path":
        return {"HMMA": 0, "OMMA": atoms * 128 // 64}
    return {"HMMA": atoms * 128 // 16, "OMMA": 0}


def gemm_threads(g):
    return (g["bm"] // g["wm"]) * (g["bn"] // g["wn"]) * 32


def gemm_elements_per_thread(g):
    """E2M1 elements one thread dequantizes per k-tile. bf16_path (cuda/warp/tile.hpp, step_bf16):
    per k64 step, 16 consecutive k of each of 2 rows per m16 atom of A and of 1 row per n8 atom
    of B, so (warp_m + warp_n) x 128 per warp, 4 (warp_m + warp_n) per thread. bf16_staged_path
    (cuda/kernels/gemm.hpp, dequantize_tile): the CTA dequantizes its (BM + BN) x 128 elements
    once, spread over its threads."""
    if g["path"] == "bf16_staged_path":
        return (g["bm"] + g["bn"]) * 128 // gemm_threads(g)
    return 4 * (g["wm"] + g["wn"])


def gemm_barriers_per_ktile(g):
    """BAR.SYNC per k-tile: between the loop's phases (wait | refill and multiply; the staged
    path: wait | refill and dequantize | multiply)."""
    return 2 if g["path"] == "bf16_staged_path" else 1


def has_native_mma(arch):
    return arch in ("sm_120a", "sm_121a", "sm_120f", "sm_121f")


def complement(guard):
    """@P2 <-> @!P2."""
    return guard.replace("@!", "@") if guard.startswith("@!") else guard.replace("@", "@!", 1)


def forward_slice(blocks, order, seeds):
    """{(block, position)} of the instructions computed from the registers that the `seeds`
    ({(block, position)}) write: a forward data flow over the blocks `order` (in address order;
    edges back to an earlier block are left out), sets joined at merges. A definition ends the
    register's previous value unless it is predicated; two definitions under complementary
    predicates in one block (@P and @!P, the compiler's if/else) end it together."""
    inside = set(order)
    state_in = {b: set() for b in order}
    derived = set()
    for b in order:
        tainted = set(state_in[b])
        # Registers written under a predicate in this block: {"base": derived before, guard:
        # derived under that guard}; a read under the same guard sees that arm's value.
        arms = {}
        for n, ins in enumerate(blocks[b].instructions):
            g = ins.predicate
            hit = (b, n) in seeds or any(
                arms[r][g] if g and r in arms and g in arms[r] else r in tainted
                for r in ins.srcs)
            if hit:
                derived.add((b, n))
            for r in ins.defs:
                if not g:
                    (tainted.add if hit else tainted.discard)(r)
                    arms.pop(r, None)
                    continue
                arm = arms.setdefault(r, {"base": r in tainted})
                arm[g] = hit
                other = complement(g)
                now = (hit or arm[other]) if other in arm else (hit or arm["base"])
                (tainted.add if now else tainted.discard)(r)
        for s in blocks[b].successors:
            if s in inside and s > b:
                state_in[s] |= tainted
    return derived


def backward_slice(blocks, order, sinks):
    """{(block, position)} of the instructions whose results reach the registers that `sinks`
    ({(block, position): registers}) read: the backward data flow of forward_slice."""
    inside = set(order)
    needed_out = {b: set() for b in order}
    feeds = set()
    for b in reversed(order):
        needed = set()
        for s in blocks[b].successors:
            if s in inside and s > b:
                needed |= needed_out.get(s, set())
        arms = {}
        for n in range(len(blocks[b].instructions) - 1, -1, -1):
            ins = blocks[b].instructions[n]
            if ins.defs & needed:
                feeds.add((b, n))
                if ins.base in LOADS:  # the loaded value, not the address, is the data
                    needed -= ins.defs
                    continue
                for r in ins.defs & needed:
                    if not ins.predicate:
                        needed.discard(r)
                    elif arms.get(r) == complement(ins.predicate):
                        needed.discard(r)
                    else:
                        arms[r] = ins.predicate
                # A guard predicate chooses which value arrives; it is not data of it.
                needed |= ins.srcs - (registers_of(ins.predicate.lstrip("@!"))
                                      if ins.predicate else set())
            if (b, n) in sinks:
                needed |= sinks[(b, n)]
        needed_out[b] = needed
    return feeds


SHIFTS = ("SHF", "SHL", "SHR", "USHF")
LOADS = ("LDS", "LDSM", "LDG", "LD", "LDC", "ULDC", "LDCU", "LDL")


def analyse_gemm(instructions, g, arch):
    """The SASS figures of one GEMM kernel (see the comment above)."""
    result = {"notes": [], "kind": "native" if g["path"] == "block_scaled_path" else "bf16"}
    ops = collections.Counter(i.base for i in instructions)
    result["total"] = {k: ops[k] for k in ("HMMA", "OMMA", "QMMA")}
    result["traps"] = sum(1 for i in instructions if i.opcode == "BPT.TRAP")
    result["local"] = ops["LDL"] + ops["STL"]
    result["loop"] = None
    blocks = build_sass_cfg(instructions)
    if not blocks:
        result["notes"].append("no instructions")
        return result
    loops = natural_loops(blocks)
    in_body = lambda body, test: sum(1 for x in body for i in blocks[x].instructions if test(i))
    is_mma = lambda i: i.base in MMA_OPCODES
    is_bar = lambda i: i.opcode.startswith("BAR.SYNC")
    candidates = [l for l in loops if in_body(l[2], is_bar)] or loops
    main = max(candidates, key=lambda l: (in_body(l[2], is_mma), len(l[2])), default=None)
    if main is None:
        result["notes"].append("no loop found")
        return result
    header, latch, body = main
    body_blocks = sorted(body)
    body_ins = [i for x in body_blocks for i in blocks[x].instructions]
    loop_ops = collections.Counter(i.base for i in body_ins)
    bars = in_body(body, is_bar)
    result["loop"] = (blocks[header].start, blocks[latch].end)
    result["barriers"] = bars
    result["ktiles_per_trip"] = bars / gemm_barriers_per_ktile(g)
    per = result["ktiles_per_trip"] or 1
    result["in_loop"] = {k: loop_ops[k] for k in ("HMMA", "OMMA", "QMMA")}
    inner = [l for l in loops if l[0] in body and l[0] != header]
    inner_blocks = set().union(*(l[2] for l in inner)) if inner else set()
    if any(x in inner_blocks for x in body if in_body([x], is_mma)):
        result["notes"].append("MMAs inside an inner loop of the main loop: the counts per k-tile "
                               "are static counts")
    # The compute part: from the block of the last LDGDEPBAR of the loop on.
    commits = [i.address for i in body_ins if i.base == "LDGDEPBAR"]
    if commits:
        start = next(blocks[x].start for x in body_blocks
                     if blocks[x].start <= commits[-1] <= blocks[x].end)
    else:
        result["notes"].append("no LDGDEPBAR in the main loop: the compute part is the whole body")
        start = blocks[header].start
    compute_blocks = [x for x in body_blocks if blocks[x].start >= start]
    compute = [i for x in compute_blocks for i in blocks[x].instructions]
    if any(i.base == "LDGSTS" for i in compute):
        result["notes"].append("cp.async (LDGSTS) after the commit: the compute part holds copies")
    # Loops of the compute part: the staged path's dequantization loops (A's rows, then B's),
    # whose trips follow from the chunks each thread dequantizes and the packed loads per trip.
    weight = {x: 1 for x in compute_blocks}
    compute_loops = sorted({(l[0], l[1]): l for l in inner if l[0] in compute_blocks}.values())
    if compute_loops:
        if g["path"] == "bf16_staged_path" and len(compute_loops) == 2:
            threads = gemm_threads(g)
            for (h, t, lbody), rows in zip(compute_loops, (g["bm"], g["bn"])):
                chunks = -(-rows * 8 // threads)  # 16-element chunks of this operand per thread
                loads = in_body(lbody, lambda i: i.base == "LDS" and ".64" in i.opcode)
                if loads == 0 or chunks % loads:
                    result["notes"].append(f"a dequantization loop with {loads} packed loads for "
                                           f"{chunks} chunks per thread: counted once")
                    continue
                for x in lbody:
                    weight[x] = chunks // loads
        else:
            result["notes"].append(f"{len(compute_loops)} loop(s) in the compute part: counted "
                                   f"once (static)")
    executed = lambda test: sum(weight[x] for x in compute_blocks
                                for i in blocks[x].instructions if test(i))
    result["per_ktile"] = {k: (in_body(body, lambda i, k=k: i.base == k) - in_body(
        compute_blocks, lambda i, k=k: i.base == k) + executed(lambda i, k=k: i.base == k)) / per
        for k in ("HMMA", "OMMA", "QMMA")}
    result["compute_static"] = len(compute)
    result["compute_non_mma"] = executed(lambda i: not is_mma(i))
    result["body_static"] = len(body_ins)
    result["body_non_mma"] = sum(1 for i in body_ins if not is_mma(i))
    result["copy_static"] = len(body_ins) - len(compute)
    result["copy_ldgsts"] = loop_ops["LDGSTS"]
    categories = collections.Counter()
    at = lambda k: blocks[k[0]].instructions[k[1]]
    where = [(b, n) for b in compute_blocks for n in range(len(blocks[b].instructions))]
    packed = {k for k in where if at(k).base == "LDS" and re.search(r"\.64\b", at(k).opcode)}
    scale_loads = {k for k in where if at(k).base == "LDS"
                   and re.search(r"\.(U8|S8|U16|S16)\b", at(k).opcode)}
    result["packed_elements"] = sum(16 * weight[k[0]] for k in packed)
    if result["kind"] == "bf16":
        sinks = {}
        for k in where:
            i, o = at(k), split_operands(at(k).operands)
            if is_mma(i):
                wa, wb, _ = mma_widths(i.opcode)
                sinks[k] = registers_of(o[1], wa) | registers_of(o[2], wb)
            elif i.base == "STS" and len(o) >= 2:  # the staged copy's stores
                sinks[k] = registers_of(o[-1], 4 if ".128" in i.opcode else
                                        2 if ".64" in i.opcode else 1)
        fragments = {k for k in where if at(k).base in ("LDS", "LDSM")
                     and k not in packed and k not in scale_loads}
        from_elements = forward_slice(blocks, body_blocks, packed)
        from_scales = forward_slice(blocks, body_blocks, scale_loads)
        from_fragments = forward_slice(blocks, body_blocks, fragments)
        feeds = backward_slice(blocks, body_blocks, sinks)
        for k in where:
            i, w = at(k), weight[k[0]]
            if is_mma(i):
                c = "mma"
            elif k in packed or k in scale_loads:
                c = "LDS of packed elements and scale codes"
            elif i.base in ("LDS", "LDSM"):
                c = "LDS of bf16 fragments (staged copy)"
            elif i.base == "STS":
                c = "STS of the staged copy"
            elif k in from_elements and k in feeds and (i.base == "MOV" or
                                                        i.opcode.startswith("IMAD.MOV")):
                c = "moves of dequantized pairs"
            elif k in from_elements and k in feeds:
                c = ("dequant: scale multiply" if i.base in ("HMUL2", "HFMA2") else
                     "dequant: shifts" if i.base in SHIFTS or i.opcode.startswith("IMAD.SHL")
                     else "dequant: LOP3" if i.base == "LOP3" else "dequant: other")
            elif k in from_fragments and k not in from_elements and k not in from_scales:
                c = "moves of staged fragments into MMA registers"
            elif k in from_scales or (k in feeds and k not in from_elements):
                c = "scale decode"
            else:
                c = "other (addresses, loop control, branch sync)"
            categories[c] += w
        e = gemm_elements_per_thread(g)
        result["elements"] = e
        if result["packed_elements"] != e:
            result["notes"].append(f"the compute part loads {result['packed_elements']} packed "
                                   f"elements per thread, the kernel dequantizes {e}")
        dequant = sum(n for c, n in categories.items() if c.startswith("dequant"))
        result["dequant"] = dequant
        result["per_element"] = {
            "dequant": dequant / e,
            "dequant+scales": (dequant + categories["scale decode"]) / e,
            "compute non-MMA": result["compute_non_mma"] / e,
            "loop non-MMA (static)": result["body_non_mma"] / e,
            "shifts": categories["dequant: shifts"] / e,
            "LOP3": categories["dequant: LOP3"] / e,
            "multiply": categories["dequant: scale multiply"] / e,
            "stores": (categories["STS of the staged copy"] +
                       categories["moves of dequantized pairs"]) / e,
            "fragment moves": categories["moves of staged fragments into MMA registers"] / e,
        }
    else:
        for k in where:
            i = at(k)
            categories["mma" if is_mma(i) else "LDS of fragments and scales"
                       if i.base in ("LDS", "LDSM") else
                       "other (addresses, loop control)"] += weight[k[0]]
    result["categories"] = categories
    return result


# The target of the in-register dequantization (unpack and scale multiply), per element.
DEQUANT_TARGET = 3.0


def gemm_failures(arch, short, g, a):
    """What the ctest enforces on one GEMM kernel: no QMMA, and the MMAs of the warp tile per
    k-tile (HMMA on the bf16 path everywhere; OMMA on the block-scaled path where the pass has the
    instruction, a trap and no MMA elsewhere)."""
    failures = []
    want = gemm_expected(g)
    where = f"{arch}: {short}"
    if a["total"]["QMMA"]:
        failures.append(f"{where}: {a['total']['QMMA']} QMMA; expected none in an FP4 GEMM (the "
                        f"bf16 path issues HMMA, the block-scaled path OMMA)")
    native_here = g["path"] == "block_scaled_path" and has_native_mma(arch)
    if g["path"] == "block_scaled_path" and not native_here:
        if a["total"]["OMMA"] or a["total"]["HMMA"]:
            failures.append(f"{where}: {a['total']['OMMA']} OMMA and {a['total']['HMMA']} HMMA; "
                            f"expected none (this pass has no block-scaled MMA)")
        if not a["traps"]:
            failures.append(f"{where}: no BPT.TRAP; expected the block-scaled MMA to compile to "
                            f"a trap where the pass lacks it")
        return failures
    if a["loop"] is None:
        failures.append(f"{where}: no main loop found in the SASS (expected a loop holding the "
                        f"MMAs and one BAR.SYNC per k-tile)")
        return failures
    if a["ktiles_per_trip"] != 1:
        failures.append(f"{where}: the main loop holds {a['barriers']} BAR.SYNC; expected "
                        f"{gemm_barriers_per_ktile(g)} (one k-tile per trip). The analysis "
                        f"assumes one k-tile per trip: a compiler that unrolls the loop needs "
                        f"cuda_static.py (analyse_gemm) taught to split it")
    for op in ("HMMA", "OMMA"):
        got, expected = a["per_ktile"][op], want[op]
        if got != expected:
            failures.append(
                f"{where}: {got:g} {op} per k-tile in the main loop; expected {expected} "
                f"(warp tile {g['wm']} x {g['wn']}: ({g['wm']}/16)·({g['wn']}/8)·" +
                ("(128/16)" if op == "HMMA" else "2") + " per warp" +
                (")" if expected else "; none on this path)"))
        if a["total"][op] != a["in_loop"][op]:
            failures.append(f"{where}: {a['total'][op] - a['in_loop'][op]} {op} outside the main "
                            f"loop; expected all in it")
    return failures


def gemm_kernels(cuobjdump, path, names_by_arch):
    """{arch: {mangled: [SassInstruction]}} of the GEMM kernels (names_by_arch: {arch: names}).
    One `cuobjdump -sass` of the whole object: selecting the kernels with -fun makes it three
    times slower."""
    if not any(names_by_arch.values()):
        return {}
    parsed = parse_cuobjdump_sass(run([cuobjdump, "-sass", path]))
    return {arch: {f: i for f, i in parsed.get(arch, {}).items() if f in names}
            for arch, names in names_by_arch.items() if names}


def check_budgets(cuobjdump, args, usage, owner, names):
    """The per-element budgets (BUDGETS) on BUDGET_ARCH, when the objects hold its code: the cubin
    is extracted from the object (cuobjdump -xelf) and disassembled with line information
    (nvdisasm -c -gi; the target compiles with -lineinfo, which leaves the SASS as it is)."""
    if BUDGET_ARCH not in usage:
        print(f"budgets: no {BUDGET_ARCH} code in the objects, not checked")
        return []
    by_short = {short_name(names[f]): f for f in usage[BUDGET_ARCH]}
    owners = {owner[(BUDGET_ARCH, by_short[s])] for s in BUDGETS if s in by_short}
    if not owners:
        return [f"budgets: none of the budgeted kernels is in the {BUDGET_ARCH} code"]
    nvdisasm = find_tool("nvdisasm", args.nvdisasm, args.toolkit_bin)
    if nvdisasm is None:
        return ["budgets: no nvdisasm to read the SASS with its source lines "
                "(scripts/cuda_static_report.sh --install-only installs it)"]
    functions = {}
    with tempfile.TemporaryDirectory() as directory:
        for path in sorted(owners):
            before = set(os.listdir(directory))
            subprocess.run([cuobjdump, "-xelf", "all", os.path.abspath(path)], cwd=directory,
                           check=True, stdout=subprocess.DEVNULL)
            arch_number = BUDGET_ARCH.split("_")[1]
            for name in sorted(set(os.listdir(directory)) - before):
                if re.search(rf"\.sm_{arch_number}\.cubin$", name):
                    functions.update(parse_nvdisasm(run([nvdisasm, "-c", "-gi",
                                                         os.path.join(directory, name)])))
    if not functions:
        return [f"budgets: no {BUDGET_ARCH} cubin came out of {', '.join(sorted(owners))}"]
    names_here = demangle(list(functions))
    failures, lines = budget_failures(functions, names_here, Sources())
    print(f"executed instructions per element on {BUDGET_ARCH}, common path:")
    for line in lines:
        print(line)
    return failures


# ---- the report ---------------------------------------------------------------------------------


def table(headers, rows, align=None):
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


REPORTED = []
for _f, _scale, _name in (("nvfp4", "rne", "NVFP4"), ("ue5m3_fp4", "rne", "UE5M3-FP4"),
                          ("mxfp4", "down", "MXFP4")):
    REPORTED += [
        (f"quantize {_f} bf16 row {_scale}/rne", f"bf16 -> {_name} rowwise, nearest-even"),
        (f"quantize {_f} bf16 col {_scale}/rne", f"bf16 -> {_name} columnwise, nearest-even"),
        (f"quantize {_f} bf16 pair {_scale}/rne", f"bf16 -> {_name} pair (both outputs), "
         "nearest-even"),
        (f"quantize {_f} bf16 row {_scale}/sr", f"bf16 -> {_name} rowwise, stochastic"),
        (f"quantize {_f} bf16 col {_scale}/sr", f"bf16 -> {_name} columnwise, stochastic"),
        (f"quantize {_f} bf16 pair {_scale}/sr", f"bf16 -> {_name} pair (both outputs), "
         "stochastic"),
    ]
REPORTED += [
    ("quantize mxfp8 bf16 row down/rne", "bf16 -> MXFP8 rowwise, nearest-even"),
    ("quantize nvfp4 f32 row rne/rne", "float -> NVFP4 rowwise, nearest-even"),
    ("quantize nvfp4 f16 row rne/rne", "float16 -> NVFP4 rowwise, nearest-even"),
    ("amax bf16", "amax pass, bf16"),
    ("amax f32", "amax pass, float"),
    ("dequantize nvfp4 -> bf16", "dequantize NVFP4 -> bf16"),
    ("dequantize ue5m3_fp4 -> bf16", "dequantize UE5M3-FP4 -> bf16"),
    ("dequantize mxfp4 -> bf16", "dequantize MXFP4 -> bf16"),
    ("dequantize nvfp4 -> f32", "dequantize NVFP4 -> float"),
]


def count(blocks, weight, sources):
    """Static and weighted instruction counts, by category and by source region."""
    result = {"static": 0, "total": 0, "local": 0, "barriers": 0,
              "static_by": collections.Counter(), "by": collections.Counter(),
              "regions": collections.Counter()}
    for block in blocks:
        w = weight[block.index]
        for i in block.instructions:
            if i.base == "NOP":
                continue
            c = category(i)
            result["static_by"][c] += 1
            result["static"] += 1
            if i.base in ("LDL", "STL"):
                result["local"] += 1
            if w:
                result["by"][c] += w
                result["total"] += w
                result["regions"][region(i, sources)] += w
                if i.base == "BAR":
                    result["barriers"] += w
    return result


def write_listing(directory, short, arch, blocks, weight, cold, sources):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, short.replace(" ", "_").replace("/", "-") + ".txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# {short} ({arch}): executions per thread on the common path (no stats), "
                f"address, instruction, source region, innermost source lines\n")
        for block in blocks:
            w = weight[block.index]
            note = f"  [left out: {cold[block.index]}]" if block.index in cold else ""
            labels = " " + " ".join(block.labels) if block.labels else ""
            f.write(f"-- block {block.index}{labels}{note}\n")
            for i in block.instructions:
                where = " < ".join(f"{os.path.basename(p)}:{n}" for p, n in i.chain[:3])
                text = (i.predicate + " " + i.text).strip()
                f.write(f"{w:3d} {i.address:05x} {text:58s} "
                        f"| {region(i, sources) if w else '':28.28s} | {where}\n")


def command_report(args):
    if args.cubin:
        report_quantize(args)
    if args.gemm_cubin:
        report_gemm(args)
    return 0


def report_quantize(args):
    cuobjdump = find_tool("cuobjdump", args.cuobjdump, args.toolkit_bin)
    nvdisasm = find_tool("nvdisasm", args.nvdisasm, args.toolkit_bin)
    if cuobjdump is None:
        raise SystemExit("error: no cuobjdump (scripts/cuda_static_report.sh installs it)")
    cubins = dict(x.split("=", 1) for x in args.cubin)
    logs = dict(x.split("=", 1) for x in (args.ptxas_log or []))
    print(f"cuobjdump {tool_version(cuobjdump)}" +
          (f", nvdisasm {tool_version(nvdisasm)}" if nvdisasm else ""))
    print()

    # Resources per architecture.
    per_arch, all_names = {}, set()
    for arch, path in cubins.items():
        usage = resource_usage(cuobjdump, path, arch)
        usage = usage.get(arch) or next(iter(usage.values()), {})
        local = sass_local_accesses(cuobjdump, path, arch)
        local = local.get(arch) or next(iter(local.values()), {})
        ptxas = ptxas_log(logs[arch]) if arch in logs else {}
        per_arch[arch] = (usage, local, ptxas)
        all_names.update(usage)
    names = demangle(all_names)
    shorts = {n: short_name(names[n]) for n in all_names}
    # All architectures in one table: registers, shared memory, and what is wrong where.
    archs = list(cubins)
    rows = []
    for function in sorted(all_names, key=lambda f: sort_key(shorts[f])):
        registers, shared, notes = [], set(), []
        for arch in archs:
            usage, local, ptxas = per_arch[arch]
            u, p = usage.get(function), ptxas.get(function)
            if u is None:
                registers.append("-")
                continue
            registers.append(str(u["REG"]))
            shared.add(p["smem"] if p else u["SHARED"])
            ldl = local.get(function, 0)
            if u["STACK"] or u["LOCAL"] or ldl or (p and (p["spill_stores"] or p["spill_loads"])):
                spill = (f", spills {p['spill_stores']}/{p['spill_loads']} B" if p and
                         (p["spill_stores"] or p["spill_loads"]) else ", no spills" if p else "")
                notes.append(f"{arch}: {u['STACK']} B frame{spill}, {ldl} LDL/STL")
        rows.append([f"`{shorts[function]}`"] + registers +
                     ["/".join(str(x) for x in sorted(shared)), "; ".join(notes) or "-"])
    print("### Registers per architecture, static shared memory, stack frames and spills")
    print()
    print(table(["kernel"] + [f"{a} registers" for a in archs] +
                ["shared (bytes)", "stack frame, spills (stores/loads), local accesses"], rows,
                ["l"] + ["r"] * len(archs) + ["r", "l"]))
    print()
    print("Shared memory is the static shared memory ptxas reports (cuobjdump's SHARED adds the "
          "1 KiB that sm_90 and later reserve per CTA).")
    print()

    for arch in cubins:
        usage, local, ptxas = per_arch[arch]
        rows, trouble = [], 0
        for function in sorted(usage, key=lambda f: sort_key(shorts[f])):
            u, p = usage[function], ptxas.get(function)
            spills = f"{p['spill_stores']}/{p['spill_loads']}" if p else "?"
            ldl = local.get(function, 0)
            flag = ""
            if u["STACK"] or u["LOCAL"] or ldl or (p and (p["spill_stores"] or p["spill_loads"])):
                flag, trouble = " **!**", trouble + 1
            rows.append([f"`{shorts[function]}`{flag}", u["REG"], u["SHARED"], u["STACK"], spills,
                         ldl])
        print(f"### {arch}: {len(usage)} kernels, {trouble} with a stack frame, spills or local "
              f"memory")
        print()
        print(table(["kernel", "registers", "shared (bytes)", "stack (bytes)",
                     "spill stores/loads (bytes)", "LDL+STL"], rows))
        print()

    if not args.sass_arch:
        return 0
    if nvdisasm is None:
        raise SystemExit("error: no nvdisasm for the SASS counts")
    sources = Sources()
    sass_archs = [a for a in re.split(r"[,\s]+", args.sass_arch) if a]
    disassembled = {}
    for arch in sass_archs:
        if arch not in cubins:
            raise SystemExit(f"error: no cubin for {arch}")
        disassembled[arch] = parse_nvdisasm(run([nvdisasm, "-c", "-gi", cubins[arch]]))
    # Every architecture side by side: executed instructions per input element.
    rows = []
    figures = {}
    for short, title in REPORTED:
        row = [title]
        for arch in sass_archs:
            functions = disassembled[arch]
            by_short = {shorts.get(f, short_name(names.get(f, f))): f for f in functions}
            function = by_short.get(short)
            if function is None:
                row.append("-")
                continue
            a = analyse_per_element(functions[function], sources, short)
            figures[(arch, short)] = a
            cell = f"{a['per_element']:.1f}"
            if arch == BUDGET_ARCH and short in BUDGETS:
                cell = f"**{cell}** (≤ {BUDGETS[short]:g}" + (
                    f", not met; ceiling {UNMET[short]:g})" if short in UNMET else ")")
            if a["problems"]:
                cell += " (?)"
            row.append(cell)
        rows.append(row)
    print("### Executed SASS instructions per input element, common path")
    print()
    print(table(["kernel"] + sass_archs, rows, ["l"] + ["r"] * len(sass_archs)))
    print()
    print("The common path: full tiles, 1 x B blocks, row-major scales, no transform, no "
          "counters (docs/cuda-static.md). Quantize kernels per input element (the pair: both "
          "outputs), amax per input element, dequantize per output element. Budgets on "
          f"{BUDGET_ARCH} in bold, checked by the ctest; (?) marks a count the analysis doubts.")
    print()
    for arch in sass_archs[:1]:
        for short, title in REPORTED:
            a = figures.get((arch, short))
            if a is None:
                continue
            divisor = per_element_divisor(short)
            lines = [f"#### {arch}: {title} (`{short}`)", ""]
            lines.append(f"{a['static']} static instructions; {a['per_trip']} executed per thread "
                         f"per trip of {LOOP_OF_KIND[kernel_kind(short)].what} ({divisor} values "
                         f"per thread): **{a['per_element']:.2f} per element**; {a['per_cta']} "
                         f"more once per CTA outside it. LDL/STL: {a['local']}.")
            if kernel_kind(short) == "quantize" and a["barriers"] != (2 if " col " in short or
                                                                   " pair " in short else 0):
                lines.append("")
                lines.append(f"**Warning: {a['barriers']} barriers in the step loop.**")
            for problem in a["problems"]:
                lines.append("")
                lines.append(f"**Warning: {problem}.**")
            lines.append("")
            rows = [[name, n, f"{n / divisor:.2f}"]
                    for name, n in sorted(a["by"].items(), key=lambda kv: -kv[1])]
            lines.append(table(["instructions by kind", "per trip", "per element"], rows))
            lines.append("")
            rows = [[name, n, f"{n / divisor:.2f}", f"{100.0 * n / max(1, a['per_trip']):.0f} %"]
                    for name, n in a["regions"].most_common()]
            lines.append(table(["instructions by source", "per trip", "per element", "share"],
                               rows))
            lines.append("")
            print("\n".join(lines))
            if args.listing:
                write_listing(args.listing, short, arch, a["blocks"],
                              {b.index: (1 if b.index in a["body"] and a["weight"][b.index] else 0)
                               for b in a["blocks"]}, a["cold"], sources)
    return 0


# The kernels whose compute part the report breaks down by category.
GEMM_BREAKDOWN = ["gemm nvfp4 x nvfp4 -> f32 small_m", "gemm nvfp4 x nvfp4 -> f32 large_m",
                  "gemm nvfp4 x nvfp4 -> f32 large_m_in_register",
                  "gemm mxfp4 x mxfp4 -> f32 large_m_in_register",
                  "gemm nvfp4 x nvfp4 -> f32 block_scaled"]


def report_gemm_summary(archs, kernels, geometry, shorts, usage, analyses, ptxas):
    """The two tables of docs/cuda-static.md: per kernel, registers and MMAs per architecture;
    per bf16-path kernel, the instructions per dequantized element per architecture."""
    print("### GEMM kernels: registers, spills, MMAs per k-tile")
    print()
    rows = []
    for f in kernels:
        g = geometry[f]
        want = gemm_expected(g)
        regs = [str(usage[a][f]["REG"]) if f in usage[a] else "-" for a in archs]
        spills = []
        for a in archs:
            u, p = usage[a].get(f), ptxas[a].get(f)
            if u and (u["STACK"] or u["LOCAL"] or analyses[a][f]["local"] or
                      (p and (p["spill_stores"] or p["spill_loads"]))):
                spills.append(f"{a}: {u['STACK']} B")
        mma = []
        for a in archs:
            x = analyses[a].get(f)
            if x is None:
                mma.append("-")
            elif g["path"] == "block_scaled_path" and not has_native_mma(a):
                mma.append("trap" if x["traps"] and not x["total"]["OMMA"] else "?")
            elif x["loop"] is None:
                mma.append("?")
            else:
                op = "OMMA" if g["path"] == "block_scaled_path" else "HMMA"
                mma.append(f"{x['per_ktile'][op]:g} {op}")
        qmma = sum(analyses[a][f]["total"]["QMMA"] for a in archs if f in analyses[a])
        op = "OMMA" if g["path"] == "block_scaled_path" else "HMMA"
        rows.append([f"`{shorts[f].replace('gemm ', '')}`", g["path"].replace("_path", ""),
                     f"{g['wm']} x {g['wn']}"] + regs + ["; ".join(spills) or "none"] + mma +
                    [f"{want[op]} {op}", str(qmma)])
    print(table(["kernel", "path", "warp tile"] + [f"{a} registers" for a in archs] +
                ["stack, spills, local"] + [f"{a} MMA per k-tile" for a in archs] +
                ["expected (per warp)", "QMMA (all)"], rows,
                ["l", "l", "l"] + ["r"] * len(archs) + ["l"] + ["r"] * (len(archs) + 2)))
    print()
    print("### GEMM kernels, bf16 paths: instructions per dequantized element")
    print()
    rows = []
    for f in kernels:
        g = geometry[f]
        if g["path"] == "block_scaled_path":
            continue
        pes = [analyses[a][f].get("per_element") if f in analyses[a] else None for a in archs]
        dequant = sorted({f"{p['dequant']:.2f}" for p in pes if p})
        parts = sorted({f"{p['shifts']:.3f} + {p['LOP3']:.3f} + {p['multiply']:.3f}"
                        for p in pes if p})
        e = analyses[archs[0]][f].get("elements", "-") if f in analyses[archs[0]] else "-"
        def per_arch(value):
            cells = [value(p) if p else "-" for p in pes]
            return "-" if all(c == "-" for c in cells) else " / ".join(cells)
        hmma = [analyses[a][f]["compute_non_mma"] / analyses[a][f]["per_ktile"]["HMMA"]
                if f in analyses[a] and analyses[a][f].get("per_ktile", {}).get("HMMA")
                else None for a in archs]
        rows.append([f"`{shorts[f].replace('gemm ', '')}`", str(e),
                     "/".join(f"**{d}**" for d in dequant), " / ".join(parts),
                     per_arch(lambda p: f"{p['dequant+scales'] - p['dequant']:.2f}"),
                     per_arch(lambda p: f"{p['stores'] + p['fragment moves']:.2f}"
                              if p["stores"] + p["fragment moves"] else "-"),
                     per_arch(lambda p: f"{p['compute non-MMA']:.2f}"),
                     " / ".join(f"{h:.1f}" if h else "-" for h in hmma)])
    arch_list = " / ".join(archs)
    print(table(["kernel", "elements per thread per k-tile", "dequant per element (every arch)",
                 "= shifts + LOP3 + multiply", f"scale decode per element ({arch_list})",
                 f"staged copy: stores and moves per element ({arch_list})",
                 f"compute part, non-MMA per element ({arch_list})",
                 f"compute part, non-MMA per HMMA ({arch_list})"], rows))
    print()


def report_gemm_breakdown(arch, names, kernels, geometry, shorts, analyses):
    """The compute part of the kernels `names` (short names) on `arch`, by category."""
    if arch not in analyses:
        return
    chosen = [f for name in names for f in kernels
              if shorts[f] == name and f in analyses[arch] and
              (geometry[f]["path"] != "block_scaled_path" or has_native_mma(arch))]
    if not chosen:
        return
    print(f"### GEMM kernels, the compute part by category: {arch}, per k-tile per thread")
    print()
    order = ["mma", "dequant: shifts", "dequant: LOP3", "dequant: scale multiply",
             "dequant: other", "scale decode", "LDS of packed elements and scale codes",
             "LDS of fragments and scales", "STS of the staged copy",
             "moves of dequantized pairs", "LDS of bf16 fragments (staged copy)",
             "moves of staged fragments into MMA registers"]
    cats = []
    for f in chosen:
        for c in analyses[arch][f]["categories"]:
            if c not in cats:
                cats.append(c)
    cats = [c for c in order if c in cats] + [c for c in cats if c not in order]
    rows = []
    for c in cats:
        row = [c]
        for f in chosen:
            a = analyses[arch][f]
            n, e = a["categories"].get(c, 0), a.get("elements")
            row.append(f"{n}" + (f" ({n / e:.2f})" if e and n else ""))
        rows.append(row)
    rows.append(["**total**"] + [f"**{sum(analyses[arch][f]['categories'].values())}**"
                                 for f in chosen])
    print(table(["instructions" + (" (per dequantized element)" if any(
        analyses[arch][f].get("elements") for f in chosen) else "")] +
                [f"`{shorts[f].replace('gemm ', '')}`" for f in chosen], rows))
    print()


def report_gemm(args):
    """The GEMM tables of docs/cuda-static.md: resources per architecture, the main loop's
    figures per architecture, and the breakdown of the compute part of a few kernels."""
    cuobjdump = find_tool("cuobjdump", args.cuobjdump, args.toolkit_bin)
    if cuobjdump is None:
        raise SystemExit("error: no cuobjdump (scripts/cuda_static_report.sh installs it)")
    cubins = dict(x.split("=", 1) for x in args.gemm_cubin)
    logs = dict(x.split("=", 1) for x in (args.gemm_ptxas_log or []))
    usage, analyses, ptxas, geometry, shorts = {}, {}, {}, {}, {}
    for arch, path in cubins.items():
        u = resource_usage(cuobjdump, path, arch)
        usage[arch] = u.get(arch) or next(iter(u.values()), {})
        ptxas[arch] = ptxas_log(logs[arch]) if arch in logs else {}
        names = demangle(set(usage[arch]))
        for f, n in names.items():
            g = gemm_geometry(n)
            if g:
                geometry[f], shorts[f] = g, short_name(n)
        parsed = parse_cuobjdump_sass(run([cuobjdump, "-sass", path]))
        functions = parsed.get(arch) or next(iter(parsed.values()), {})
        analyses[arch] = {f: analyse_gemm(functions[f], geometry[f], arch)
                          for f in functions if f in geometry}
    archs = list(cubins)
    kernels = sorted(geometry, key=lambda f: (GEMM_ORDER.get(geometry[f]["shape"], 9),
                                              shorts[f]))
    report_gemm_summary(archs, kernels, geometry, shorts, usage, analyses, ptxas)
    for arch in archs:
        print(f"### GEMM kernels, the main loop: {arch}")
        print()
        rows = []
        for f in kernels:
            a = analyses[arch].get(f)
            if a is None:
                continue
            x = gemm_figures(arch, geometry[f], a, usage[arch][f])
            rows.append([f"`{shorts[f].replace('gemm ', '')}`"] +
                        [x[k] for k, _ in GEMM_COLUMNS])
        print(table(["kernel"] + [h for _, h in GEMM_COLUMNS], rows))
        print()
        notes = [(shorts[f], n) for f in kernels if f in analyses[arch]
                 for n in gemm_notes(arch, geometry[f], analyses[arch][f])]
        for short, n in notes:
            print(f"- `{short}`: {n}")
        if notes:
            print()
    bf16_names = [n for n in GEMM_BREAKDOWN if "block_scaled" not in n]
    native_names = [n for n in GEMM_BREAKDOWN if "block_scaled" in n] + [
        "gemm mxfp4 x mxfp4 -> f32 block_scaled"]
    report_gemm_breakdown(args.gemm_breakdown_arch, bf16_names, kernels, geometry, shorts,
                          analyses)
    for arch in archs:
        if has_native_mma(arch):
            report_gemm_breakdown(arch, native_names, kernels, geometry, shorts, analyses)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuobjdump")
    parser.add_argument("--nvdisasm")
    parser.add_argument("--toolkit-bin", help="the CUDA toolkit's bin directory (a last resort)")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check")
    check.add_argument("--archs", default="", help="CMAKE_CUDA_ARCHITECTURES")
    check.add_argument("--expect-gemm", action="store_true",
                       help="fail when the objects hold no GEMM kernel")
    check.add_argument("object", nargs="+", help="object files (or cubins)")
    report = sub.add_parser("report")
    report.add_argument("--cubin", action="append", help="ARCH=FILE (kernels.cu)")
    report.add_argument("--gemm-cubin", action="append", help="ARCH=FILE (gemm_kernels.cu)")
    report.add_argument("--gemm-ptxas-log", action="append", help="ARCH=FILE (nvcc -Xptxas=-v)")
    report.add_argument("--gemm-breakdown-arch", default="sm_90",
                        help="architecture of the GEMM breakdown tables")
    report.add_argument("--ptxas-log", action="append", help="ARCH=FILE (nvcc -Xptxas=-v)")
    report.add_argument("--sass-arch", help="architecture whose SASS is counted, e.g. sm_90")
    report.add_argument("--listing", help="directory for the weighted SASS of each counted kernel")
    args = parser.parse_args()
    if args.command == "check":
        return command_check(args)
    return command_report(args)


if __name__ == "__main__":
    sys.exit(main())
