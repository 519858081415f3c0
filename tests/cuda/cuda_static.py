#!/usr/bin/env python3
"""Static checks and reports of blockscale's CUDA kernels, read from compiled code (no GPU).

  cuda_static.py check --archs "80;90;100a;120a" OBJECT
      The ctest `blockscale_cuda_static` (label `static`): reads the kernels of OBJECT (the object
      file of tests/cuda/kernels.cu, one cubin per architecture) with cuobjdump and fails when any
      kernel of any architecture has a stack frame or local memory (STACK or LOCAL in
      --dump-resource-usage; LDL/STL, which need one, are counted in the SASS of those): a
      register spill always needs a frame, so this finds every spill (and local arrays too, which
      cost the same in these kernels). Exits 77 (ctest: skipped) when there is no cuobjdump.

  cuda_static.py report --cubin sm_90=FILE ... [--ptxas-log sm_90=FILE ...] [--sass-arch sm_90]
      The tables of scripts/cuda_static_report.sh and docs/cuda-static.md: per architecture, each
      kernel's registers, shared memory, stack and spills; for one architecture, the SASS
      instruction counts of the bf16 -> NVFP4 quantize kernels, static and weighted by execution
      along the common path, per element (see docs/cuda-static.md, "Counting instructions").

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


FORMATS = {
    ("e2m1", "16", "ue4m3"): "nvfp4",
    ("e2m1", "32", "ue8m0"): "mxfp4",
    ("e2m1", "16", "ue5m3"): "ue5m3_fp4",
    ("e4m3", "32", "ue8m0"): "mxfp8",
}
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
    if strip_ns(tree[0]) != "program_kernel" or not tree[1]:
        return render(tree)
    program = tree[1][0]
    kind, args = strip_ns(program[0]), program[1]
    if kind == "quantize_program" and len(args) == 4:
        t, row, column, completion = args
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


def sort_key(short):
    kind_order = {"quantize": 0, "amax": 1, "dequantize": 2}
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
    usage = resource_usage(cuobjdump, args.object)
    # Local loads and stores address a frame that ptxas declares (STACK) or local memory (LOCAL),
    # so only kernels with one can have any: the SASS of those is read to count them (reading all
    # of it takes half a minute).
    local = collections.defaultdict(dict)
    for arch, functions in usage.items():
        flagged = {f for f, u in functions.items() if u["STACK"] or u["LOCAL"]}
        local[arch] = sass_local_accesses(cuobjdump, args.object, arch, flagged).get(arch, {})
    names = demangle({f for per_arch in usage.values() for f in per_arch})
    failures = []
    expected = [a for a in (normalize_arch(x) for x in re.split(r"[;,\s]+", args.archs)
                            if x.strip()) if a]
    if any(not re.fullmatch(r"sm_[0-9]+[a-z]?", a) for a in expected):
        expected = []  # CMake's special values (all, all-major, native, OFF): no list to compare
    for arch in expected:
        if arch not in usage:
            failures.append(f"{arch}: no cubin in {args.object} (found {', '.join(sorted(usage))})")
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
            if known:
                print(f"  known, allowed: {arch}: {short_name(names[function])}: stack frame "
                      f"{u['STACK']} bytes, {ldl_stl} LDL/STL ({known})")
            elif u["STACK"] or u["LOCAL"] or ldl_stl:
                failures.append(f"{arch}: {short_name(names[function])}: stack frame "
                                f"{u['STACK']} bytes, local {u['LOCAL']} bytes, {ldl_stl} LDL/STL "
                                f"(registers {u['REG']})")
    if failures:
        print("FAILED: spills or local memory, or kernels missing (every kernel should keep its "
              "state in registers; scripts/cuda_static_report.sh shows ptxas's spill counts):")
        for f in failures:
            print("  " + f)
        return 1
    print("no spills, no local memory")
    return 0


# Spills found by this test and not yet fixed, each with the largest frame allowed: printed on
# every run, never silently passed, and any other spill still fails. (arch regex, kernel regex,
# bytes of stack frame, why.)
KNOWN_SPILLS = [
    (r"sm_(80|90)", r"quantize mxfp8 bf16 .*/rne", 8,
     "MXFP8 nearest-even: ptxas spills one register (4 bytes) at 80 registers; open"),
    (r"sm_120a", r"quantize nvfp4 f16 pair rne/rne", 8,
     "NVFP4 from float16, pair, sm_120a: an 8-byte frame, 2 LDL/STL; open"),
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
    (up to its closing brace at column 0), less those matching `exclude`. Only the innermost frame
    in `file` counts: code that the compiler merged into a call of the function from elsewhere in
    the file is not the function's."""

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
                end = next((n for n in range(start, len(lines) + 1) if lines[n - 1] == "}"), None)
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


# Without a `stats` pointer (cuda::quantize_into's default) the counters are never published.
NO_STATS = FunctionRule("cuda/kernels/quantize.hpp", r"void publish_counts\(",
                        r"stats == nullptr|^\s*return;|^\s*}", "publishing the counters "
                        "(stats == nullptr)")

# Code that the common case never runs: an interior tile of an aligned input, row-major scales,
# 1 x B blocks, no Hadamard transform, finite data, a converged warp, not the grid's first
# thread, no completion action. A block of which most instructions come from such code is left
# out, with what only it leads to.
COLD = [
    Rule("block/hadamard.hpp", r".", "the Hadamard transform (options.hadamard)"),
    Rule("cuda/memory.hpp", r"out\[j\] = j < valid", "the element-by-element load of a ragged or "
         "misaligned chunk"),
    Rule("cuda/memory.hpp", r"to\[i\] = from\[i\]", "the byte-by-byte store"),
    Rule("cuda/kernels/quantize.hpp", r"warp\.max_over\(amax, b\)", "the B x B tile amax "
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
    Rule("numeric/random.hpp", r"out\[i\] = random_bits", "the words before the first and after "
         "the last whole Philox block (random_index is a multiple of 4 here)"),
]
# Blocks that call these subroutines are the slow paths of 64-bit division and of IEEE
# reciprocals of subnormal or huge values.
COLD_CALLS = re.compile(r"slowpath|div_u64|rem_u64|div_s64|rem_s64|udiv|urem")

# Regions of the source, for the breakdown (first match, innermost frame first).
REGIONS = [
    # effective_params() copies the params, and the compiler computes the transform's 16 signs
    # (I2FP + 2 FADD each) there, hoisted out of `if (shape.hadamard)`: they run without it too.
    ("params copy + Hadamard signs (hoisted)",
     Rule("cuda/kernels/quantize.hpp", r"quantize_params p = params", "")),
    ("Philox (stochastic bits)", Rule("numeric/random.hpp", r".", "")),
    ("element encode: x*f_b and rounding", Rule("block/codec.hpp",
                                                r"convert<Element>|encode_element<element_type>",
                                                "")),
    ("block scale: S_b, 1/(S_b*s_dec)", Rule("block/codec.hpp",
                                             r"scale_code|decide_scale|encode_factor|capped|"
                                             r"1\.0f / \(scale \* s_dec\)|keeps_elements|"
                                             r"inverse < FLT_MAX|saturates<scale_type>\(scaled|"
                                             r"static_cast<float>\(scale\)|const float scaled",
                                             "")),
    ("statistics: count_blocks, publish_counts",
     Rule("cuda/kernels/quantize.hpp", r"count_blocks|publish_counts|c\.\w+ [+=]|"
          r"c\.amax_bits|reduce\(|counts\[lane\]|value\[lane\]|atomic_|lane != 0|"
          r"c\.blocks != 0|warp\.fence|stats == nullptr|max_over\(value|sum_over\(value|"
          r"quantize_stats one", "")),
    ("pack nibbles + store", Rule("", r"store_block|store_bytes|pack_nibble|copy8|copy16\(to",
                                  "")),
    ("block amax", Rule("block/codec.hpp", r"amax_bits|magnitude_bits|acc = ", "")),
    ("phase 0: load, convert to float, STS",
     Rule("", r"load_floats|shared\.tile\[row\]\[col|static_cast<float>\(staged|"
          r"staged\[N\]|copy16\(reinterpret_cast<unsigned char\*>\(staged|const int row = q|"
          r"const std::size_t [rc] = [rc]0 \+|const int valid = r <|q < tile_rows", "")),
    ("phase 1: LDS of the block", Rule("cuda/kernels/quantize.hpp",
                                       r"values\[lane\]\[j\] =|Columnwise \? shared", "")),
    ("scale address + store", Rule("", r"scale_index|scale_offset|out\.scales\(\)\[", "")),
    ("tile origin (cta.index / tiles_across)",
     Rule("cuda/kernels/quantize.hpp", r"const std::size_t r0 = cta\.index|tiles_across\(\)|"
          r"const std::size_t across = tiles_across", "")),
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
    ("FP16x2", lambda op: op in ("HADD2", "HMUL2", "HFMA2", "HSETP2", "HMNMX2")),
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
            cold_reason[block.index] = "slow path of a division or reciprocal (a CALL)"
            continue
        if not real:
            continue
        for rule in list(COLD) + list(extra_cold):
            if sum(rule.matches(i, sources) for i in real) * 2 > len(real):
                cold_reason[block.index] = rule.what
                break
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
        for rule, trips in trip_rules:
            if any(rule.matches(i, sources) for x in loop.body for i in blocks[x].instructions):
                loop.trips, loop.what = trips, rule.what
                break
    # An if/else whose two arms both stay on the path would be counted twice: a hot two-way
    # branch forward to t whose fall-through side ends in a jump past t, with hot code on both
    # sides. None is expected; the report lists any.
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
                if join > other and any(y in hot for y in range(other, join)):
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


def quantize_geometry(short):
    """Tile rows, input elements per thread, load-loop and unit-loop trips of a quantize kernel
    (cuda/kernels/quantize.hpp: 256 threads, 8 warps, tiles of max(32, 4B) x 64, chunks of 8)."""
    formats = {"nvfp4": 16, "ue5m3_fp4": 16, "mxfp4": 32, "mxfp8": 32}
    parts = short.split()
    b = max(formats.get(f, 16) for f in parts[1].split("+"))
    tile_rows = max(32, 4 * b)
    elements = tile_rows * 64 // 256
    load_trips = tile_rows * (64 // 8) // 256
    row_units = (tile_rows // 32) * (64 // b)
    column_units = (64 // 32) * (tile_rows // b)
    return {"block": b, "tile_rows": tile_rows, "elements": elements, "load_trips": load_trips,
            "row_unit_trips": max(1, row_units // 8),
            "column_unit_trips": max(1, column_units // 8)}


def trip_rules_for(short):
    g = quantize_geometry(short)
    unit_trips = max(g["row_unit_trips"], g["column_unit_trips"])
    return [
        (Rule("cuda/kernels/quantize.hpp", r"detail::load_floats<chunk>",
              f"phase 0 load loop ({g['tile_rows']} x 64 tile, 256 threads x chunks of 8)"),
         g["load_trips"]),
        # Before the Philox rule: the unit loop holds Philox's code too when that is unrolled.
        (Rule("cuda/kernels/quantize.hpp", r"codec::encode_block",
              "phase 1 unit loop (units / warps)"), unit_trips),
        (Rule("numeric/random.hpp", r"philox4x32_10::generate\(detail::philox_counter\(first_block",
              "Philox blocks of one block's words (B / 4)"), g["block"] // 4),
    ]


# ---- the report ---------------------------------------------------------------------------------


def table(headers, rows, align=None):
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


REPORTED = [
    ("quantize nvfp4 bf16 row rne/rne", "bf16 -> NVFP4 rowwise, nearest-even"),
    ("quantize nvfp4 bf16 row rne/sr", "bf16 -> NVFP4 rowwise, stochastic"),
    ("quantize nvfp4 bf16 col rne/rne", "bf16 -> NVFP4 columnwise, nearest-even"),
    ("quantize nvfp4 bf16 col rne/sr", "bf16 -> NVFP4 columnwise, stochastic"),
    ("quantize nvfp4 bf16 pair rne/rne", "bf16 -> NVFP4 pair (both outputs), nearest-even"),
    ("quantize nvfp4 bf16 pair rne/sr", "bf16 -> NVFP4 pair (both outputs), stochastic"),
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
    arch = args.sass_arch
    if nvdisasm is None:
        raise SystemExit("error: no nvdisasm for the SASS counts")
    text = run([nvdisasm, "-c", "-gi", cubins[arch]])
    functions = parse_nvdisasm(text)
    by_short = {shorts.get(f, f): f for f in functions}
    sources = Sources()
    summary, details = [], []
    for short, title in REPORTED:
        function = by_short.get(short)
        if function is None:
            details.append(f"{title}: `{short}` not found in the {arch} cubin\n")
            continue
        items = functions[function]
        rules = trip_rules_for(short)
        g = quantize_geometry(short)
        elements = g["elements"]
        outputs = 2 if " pair " in short else 1
        blocks, weight, loops, cold, both_arms = analyse(items, sources, rules, [NO_STATS])
        counted = count(blocks, weight, sources)
        with_stats = count(*analyse(items, sources, rules)[:2], sources)
        total, published = counted["total"], with_stats["total"]
        per_element, per_element_stats = total / elements, published / elements
        summary.append([title, counted["static"], f"{total} / {published}",
                        f"{elements}" + (f" x {outputs} outputs" if outputs == 2 else ""),
                        f"**{per_element:.1f}** / {per_element_stats:.1f}" +
                        (f" ({total / (elements * outputs):.1f} / "
                         f"{published / (elements * outputs):.1f} per output)"
                         if outputs == 2 else ""),
                        counted["local"]])
        lines = [f"#### {title} (`{short}`)", ""]
        lines.append(f"Tile {g['tile_rows']} x 64, 256 threads: each thread loads {elements} "
                     f"input elements and quantizes {elements} per output. "
                     f"{counted['static']} static instructions (NOPs left out); on the common "
                     f"path without a `stats` pointer each thread executes {total}, "
                     f"**{per_element:.1f} per input element**; with one (the policy steps, or "
                     f"a caller who passes `stats`) {published}, {per_element_stats:.1f} per "
                     f"element. Barriers on the path: {counted['barriers']} (expected 2). "
                     f"LDL/STL: {counted['local']}.")
        if counted["barriers"] != 2:
            lines.append("")
            lines.append("**Warning: the path misses a phase barrier: code was left out that "
                         "runs; the rules of cuda_static.py need a look.**")
        lines.append("")
        rows = []
        for name, _ in CATEGORIES + [("other", None)]:
            st, dy = counted["static_by"][name], counted["by"][name]
            if st or dy:
                rows.append([name, st, dy, f"{dy / elements:.2f}"])
        rows.append(["**total**", counted["static"], total, f"**{per_element:.1f}**"])
        lines.append(table(["instructions (no stats)", "static", "executed per thread",
                            "per element"], rows))
        lines.append("")
        regions = counted["regions"]
        extra = published - total
        rows = [[name, n, f"{n / elements:.2f}", f"{100.0 * n / total:.0f} %"]
                for name, n in regions.most_common()]
        rows.append(["(with `stats`: publishing the counters, 5 warp reductions and atomics)",
                     f"+{extra}", f"+{extra / elements:.2f}", ""])
        lines.append(table(["executed instructions by source", "per thread", "per element",
                            "share"], rows))
        lines.append("")
        loop_rows = [[loop.what, f"{blocks[loop.header].start:#06x}-{blocks[loop.latch].end:#06x}",
                      loop.trips] for loop in loops]
        if loop_rows:
            lines.append(table(["loop left in the SASS", "addresses", "trips"], loop_rows))
            lines.append("")
        cold_counts = collections.Counter()
        for b, reason in cold.items():
            cold_counts[reason] += len(blocks[b].instructions)
        unreachable = sum(len(b.instructions) for b in blocks
                          if weight[b.index] == 0 and b.index not in cold)
        rows = [[reason, n] for reason, n in cold_counts.most_common()]
        rows.append(["only reachable through the above, or in a divergent warp (BRA.DIV)",
                     unreachable])
        lines.append(table(["left out (off the common path)", "static instructions"], rows))
        lines.append("")
        if both_arms:
            lines.append("Warning: if/else branches with both arms counted (an overestimate): " +
                         ", ".join(f"{i.address:#06x}" for i in both_arms))
            lines.append("")
        details.append("\n".join(lines))
        if args.listing:
            write_listing(args.listing, short, arch, blocks, weight, cold, sources)
    print(f"### {arch} SASS of the bf16 -> NVFP4 quantize kernels")
    print()
    print(table(["kernel", "static instructions", "executed per thread (no stats / stats)",
                 "input elements per thread", "executed per input element (no stats / stats)",
                 "LDL+STL"], summary, ["l", "r", "r", "r", "r", "r"]))
    print()
    for d in details:
        print(d)
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
    check.add_argument("object")
    report = sub.add_parser("report")
    report.add_argument("--cubin", action="append", required=True, help="ARCH=FILE")
    report.add_argument("--ptxas-log", action="append", help="ARCH=FILE (nvcc -Xptxas=-v)")
    report.add_argument("--sass-arch", help="architecture whose SASS is counted, e.g. sm_90")
    report.add_argument("--listing", help="directory for the weighted SASS of each counted kernel")
    args = parser.parse_args()
    if args.command == "check":
        return command_check(args)
    return command_report(args)


if __name__ == "__main__":
    sys.exit(main())
