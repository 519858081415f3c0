#!/usr/bin/env bash
# Builds and runs the main demo, recipe_compare: trains a small MLP under high precision, NVFP4,
# UE5M3-FP4 and MXFP4 and compares loss and cost (time: docs/training.md; --help lists its
# options, --quick is a few seconds). scripts/demo.sh [arguments for the example...]
# The build directory is build-demo/ unless BLOCKSCALE_BUILD_DIR says otherwise.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

blockscale_install_missing cmake g++ make
build=${BLOCKSCALE_BUILD_DIR:-$blockscale_root/build-demo}

log=$build/demo-build.log
mkdir -p "$build"
# Quiet unless the build fails.
if ! {
  cmake -S "$blockscale_root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBLOCKSCALE_BUILD_TESTS=OFF \
    -DBLOCKSCALE_BUILD_BENCHMARKS=OFF -DBLOCKSCALE_BUILD_EXAMPLES=ON &&
    cmake --build "$build" --parallel "$blockscale_jobs" --target blockscale_example_recipe_compare
} >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
"$build/examples/blockscale_example_recipe_compare" "$@"
