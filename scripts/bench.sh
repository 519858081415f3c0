#!/usr/bin/env bash
# Builds the benchmarks (Release) and runs each, passing the arguments through:
#   scripts/bench.sh [--benchmark_min_time=0.5] [--benchmark_filter=...] ...
# The build directory is build-bench/ unless BLOCKSCALE_BUILD_DIR says otherwise.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

blockscale_install_missing cmake g++ make libbenchmark-dev
build=${BLOCKSCALE_BUILD_DIR:-$blockscale_root/build-bench}

cmake -S "$blockscale_root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBLOCKSCALE_BUILD_TESTS=OFF \
  -DBLOCKSCALE_BUILD_BENCHMARKS=ON -DBLOCKSCALE_BUILD_EXAMPLES=OFF
cmake --build "$build" --parallel "$blockscale_jobs" --target blockscale_benchmarks
shopt -s nullglob
benchmarks=("$build"/bench/blockscale_bench_*)
if ((${#benchmarks[@]} == 0)); then
  echo "error: no benchmarks in $build/bench" >&2
  exit 1
fi
for benchmark in "${benchmarks[@]}"; do
  echo "== ${benchmark##*/}"
  "$benchmark" "$@"
done
