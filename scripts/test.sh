#!/usr/bin/env bash
# Builds blockscale (Release) and runs its test suite, except the `exhaustive` label.
#   scripts/test.sh [--exhaustive] [ctest arguments...]
#   --exhaustive   also run the exhaustive sweeps (times: docs/testing.md)
# The build directory is build/ unless BLOCKSCALE_BUILD_DIR says otherwise. Missing Debian packages
# are installed when run as root.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

exclude=(--label-exclude exhaustive)
ctest_args=()
for arg in "$@"; do
  case $arg in
  --exhaustive) exclude=() ;;
  -h | --help)
    sed -n '2,6s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) ctest_args+=("$arg") ;;
  esac
done

blockscale_install_missing cmake g++ make catch2 libbenchmark-dev
blockscale_find_nvcc
build=${BLOCKSCALE_BUILD_DIR:-$blockscale_root/build}

cmake -S "$blockscale_root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBLOCKSCALE_BUILD_TESTS=ON \
  -DBLOCKSCALE_BUILD_BENCHMARKS=ON -DBLOCKSCALE_BUILD_EXAMPLES=ON
cmake --build "$build" --parallel "$blockscale_jobs"
ctest --test-dir "$build" --output-on-failure --no-tests=error --parallel "$blockscale_jobs" \
  "${exclude[@]}" "${ctest_args[@]}"
