#!/usr/bin/env python3
"""The layers of include/blockscale (docs/design.md): each header's includes, followed through
every header they include, stay in the folders its own folder may use. Exit 1, naming the header
and the chain of includes that leaves its layer.

    python3 tests/headers/check_layers.py [include-directory]
"""
import os
import re
import sys

# What each folder may reach (itself included), transitively. config.hpp and the umbrella
# blockscale.hpp sit at the top level.
ALLOWED = {
    "detail": {"detail"},
    "numeric": {"numeric", "detail"},
    "block": {"block", "numeric", "detail"},
    "contract": {"contract", "block", "numeric", "detail"},
    "host": {"host", "contract", "block", "numeric", "detail"},
    "training": {"training", "host", "contract", "block", "numeric", "detail"},
    "io": {"io", "host", "contract", "block", "numeric", "detail"},
    "cuda": {"cuda", "contract", "block", "numeric", "detail"},
    "emulation": {"emulation", "cuda", "contract", "block", "numeric", "detail"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder(path, root):
    rel = os.path.relpath(path, root).split(os.sep)
    return rel[0] if len(rel) > 1 else ""  # "" for config.hpp and blockscale.hpp


def includes(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    here = os.path.dirname(path)
    return [os.path.normpath(os.path.join(here, name)) for name in INCLUDE.findall(text)]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", "..", "include",
                                        "blockscale"))
    headers = []
    for directory, _, files in os.walk(root):
        headers += [os.path.join(directory, f) for f in files if f.endswith((".hpp", ".cuh"))]
    failures = []
    for header in sorted(headers):
        layer = folder(header, root)
        if layer not in ALLOWED:
            continue  # the top level: config.hpp, the umbrella
        allowed = ALLOWED[layer] | {""}
        # Depth-first over the include graph, remembering how each header was reached.
        seen, stack = set(), [(header, [header])]
        while stack:
            current, chain = stack.pop()
            for included in includes(current):
                if included in seen or not included.startswith(root):
                    continue
                seen.add(included)
                if folder(included, root) not in allowed:
                    failures.append(" -> ".join(os.path.relpath(p, root) for p in chain +
                                                [included]))
                    continue
                stack.append((included, chain + [included]))
    if failures:
        print("FAILED: headers that reach a layer above or beside their own (docs/design.md):")
        for f in failures:
            print("  " + f)
        return 1
    print(f"{len(headers)} headers, each within its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
