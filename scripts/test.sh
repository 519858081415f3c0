#!/usr/bin/env bash
# Builds blockscale (Release) and the Python package, and runs the test suite except the
# `exhaustive` label.
#   scripts/test.sh [--exhaustive] [--peers] [--no-python] [--benchmarks] [--cuda-archs LIST]
#                   [--bench-cuda-archs LIST] [--device-tests] [ctest arguments...]
#   --exhaustive        also run the exhaustive sweeps (times: docs/testing.md)
#   --peers             also run the torch-based peers as oracles (label peers; a cached ~6 GB venv)
#   --no-python         skip the Python package and its tests
#   --benchmarks        also build the benchmarks (bench/, bench/gpu/); CI does
#   --cuda-archs LIST   the CUDA architectures the device code is compiled for (CMake's list, e.g.
#                       "80;90;100a;120a", as CI does); default 90, or $BLOCKSCALE_CUDA_ARCHS
#   --bench-cuda-archs LIST  those of the CUDA benchmarks (bench/gpu/) alone; default the above
#   --device-tests      also build, on a machine without a GPU, what runs only on one or only
#                       compiles device code: the device tests, the CUDA examples, the CUDA header
#                       checks and the .cu package consumers (built by default only where
#                       nvidia-smi lists a GPU; CI passes this, so all of it compiles there)
# The build directory is build/ unless BLOCKSCALE_BUILD_DIR says otherwise. Missing Debian packages
# are installed when run as root; Python packages go into cached virtual environments
# (python/requirements-*.txt, scripts/common.sh).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

exclude=(--label-exclude exhaustive)
ctest_args=()
python=on
peers=OFF
benchmarks=OFF
device_tests=OFF
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then device_tests=ON; fi
cuda_archs=${BLOCKSCALE_CUDA_ARCHS:-90}
bench_cuda_archs=
while (($# > 0)); do
  case $1 in
  --exhaustive) exclude=() ;;
  --peers) peers=ON ;;
  --no-python) python=off ;;
  --benchmarks) benchmarks=ON ;;
  --device-tests) device_tests=ON ;;
  --cuda-archs | --bench-cuda-archs)
    (($# > 1)) || {
      echo "error: $1 needs a list, e.g. $1 \"80;90\"" >&2
      exit 2
    }
    if [[ $1 == --cuda-archs ]]; then cuda_archs=$2; else bench_cuda_archs=$2; fi
    shift
    ;;
  -h | --help)
    sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) ctest_args+=("$1") ;;
  esac
  shift
done

blockscale_install_missing cmake g++ make catch2 libbenchmark-dev nlohmann-json3-dev
blockscale_find_nvcc
build=${BLOCKSCALE_BUILD_DIR:-$blockscale_root/build}

python_args=(-DBLOCKSCALE_PYTHON_EXECUTABLE=)
if [[ $python == on ]]; then
  blockscale_install_missing python3 python3-venv python3-dev
  requirements=$blockscale_root/python/requirements-test.txt
  [[ $peers == ON ]] && requirements=$blockscale_root/python/requirements-peers.txt
  interpreter=$(blockscale_python_env_path "$requirements")
  te=$(dirname "$(dirname "$interpreter")")/transformer_engine
  # The virtual environment (made once, then cached) and the package are made on the side while
  # CMake builds the rest, so that neither the downloads nor the package's compile hold up the
  # build; the tests wait for them (below).
  echo "Making the Python environment and the package (pip install ./python) beside the build"
  python_log=$(mktemp)
  (
    blockscale_python_env "$requirements" >/dev/null
    if [[ $peers == ON ]] && ! compgen -G "$te/transformer_engine-*.whl" >/dev/null; then
      # Transformer Engine's NVFP4 reference quantizer is pure PyTorch, but TE itself cannot be
      # imported without CUDA: the peer test runs the reference file from TE's wheel (not
      # installed).
      "$interpreter" -m pip download -q --no-deps -d "$te" transformer_engine==2.20.2
    fi
    # The CUDA extension (blockscale._cuda) is built for the local GPU where there is one; with
    # --device-tests and no GPU (CI), for sm_90, to prove it compiles (about 4 CPU-minutes).
    if [[ $device_tests == ON && -z ${BLOCKSCALE_CUDA_ARCHITECTURES:-} ]] &&
      ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
      export BLOCKSCALE_CUDA_ARCHITECTURES=90
    fi
    "$interpreter" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
      "$blockscale_root/python"
  ) >"$python_log" 2>&1 &
  python_build=$!
  trap 'kill "$python_build" 2>/dev/null || true; rm -f "$python_log"' EXIT
  python_args=(-DBLOCKSCALE_PYTHON_EXECUTABLE="$interpreter" -DBLOCKSCALE_PYTHON_PEERS=$peers)
fi

[[ $device_tests == ON ]] ||
  echo "No GPU listed by nvidia-smi: the device tests, CUDA examples, CUDA header checks and .cu" \
    "package consumers are not built (--device-tests builds them)"
cmake -S "$blockscale_root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBLOCKSCALE_BUILD_TESTS=ON \
  -DBLOCKSCALE_BUILD_BENCHMARKS=$benchmarks -DBLOCKSCALE_BUILD_EXAMPLES=ON \
  -DBLOCKSCALE_BUILD_DEVICE_TESTS=$device_tests \
  "-DCMAKE_CUDA_ARCHITECTURES=$cuda_archs" "-DBLOCKSCALE_BENCH_CUDA_ARCHITECTURES=$bench_cuda_archs" \
  "${python_args[@]}"
cmake --build "$build" --parallel "$blockscale_jobs"
if [[ -n ${python_build:-} ]]; then
  if ! wait "$python_build"; then
    cat "$python_log" >&2
    echo "error: making the Python environment or the package failed; its output is above" >&2
    exit 1
  fi
  cat "$python_log"
  if [[ $peers == ON ]]; then
    BLOCKSCALE_TE_SOURCE=$(compgen -G "$te/transformer_engine-*.whl" | head -n 1)
    export BLOCKSCALE_TE_SOURCE
  fi
fi
ctest --test-dir "$build" --output-on-failure --no-tests=error --parallel "$blockscale_jobs" \
  "${exclude[@]}" "${ctest_args[@]}"
