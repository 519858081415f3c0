#!/usr/bin/env bash
# The Python package's device session: one call of well under 8 minutes, run from the repository
# root on the device machine (its image has python3 with torch, nanobind, scikit-build-core,
# ml_dtypes, numpy and pytest; nothing is downloaded):
#
#   bash bench/gpu/python.sh        (device tool: timeout_s about 480)
#
# Steps, each logged with its time and cut to what is left of the budget (BLOCKSCALE_GPU_BUDGET
# seconds, default 450); a failed step does not stop the next:
#   1. the machine: date, nvidia-smi, python3, torch;
#   2. the package with its CUDA extension for the device's architecture, into /tmp/blockscale-site
#      (pip, no build isolation, all cores: the five device translation units side by side);
#   3. the device tests (python/tests/test_cuda.py) and the CPU recipe tests beside them;
#   4. the recipe comparison at GPU scale: examples/python/tiny_lm.py --device cuda, the four
#      recipes, about 22 M parameters, BLOCKSCALE_LM_STEPS steps (default 2000), seed 1;
#   5. a summary. With $OUT set, the logs and tiny_lm's outputs are copied there.
set -u
set -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
budget=${BLOCKSCALE_GPU_BUDGET:-450}
deadline=$((SECONDS + budget))
logs=$root/build-gpu-python
site=/tmp/blockscale-site
mkdir -p "$logs"
failed=()
summary=()

step() { # step <name> <seconds at most> <command...>
  local name=$1 limit=$2 left=$((deadline - SECONDS))
  shift 2
  ((left < limit)) && limit=$left
  if ((limit <= 5)); then
    summary+=("$name: skipped (budget spent)")
    failed+=("$name")
    return
  fi
  local start=$SECONDS rc=0
  echo "==== $name (at most ${limit} s) ===="
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  tail -n 25 "$logs/$name.log"
  summary+=("$name: rc $rc in $((SECONDS - start)) s")
  ((rc == 0)) || failed+=("$name")
}

machine() {
  date -u
  nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv
  python3 -c "import sys, torch; print(sys.version); print('torch', torch.__version__,
    torch.cuda.get_device_name(0))"
}

build() {
  local cap
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
  rm -rf "$site"
  BLOCKSCALE_CUDA_ARCHITECTURES=${BLOCKSCALE_GPU_ARCH:-$cap} CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    python3 -m pip install -v --no-build-isolation --no-deps --no-index --target "$site" \
    -C cmake.define.BLOCKSCALE_PYTHON_CUDA=ON -C cmake.define.BLOCKSCALE_PYTHON_AVX512=OFF \
    ./python
}

tests() {
  cd /tmp && PYTHONPATH=$site python3 -m pytest -q -p no:cacheprovider --rootdir="$root/python" \
    "$root/python/tests/test_cuda.py" "$root/python/tests/test_torch_linear.py" -rs
}

language_model() {
  cd /tmp && PYTHONPATH=$site PYTHONUNBUFFERED=1 python3 "$root/examples/python/tiny_lm.py" \
    --device cuda --d-model 512 --layers 7 --heads 8 --context 256 --batch-size 32 \
    --steps "${BLOCKSCALE_LM_STEPS:-2000}" --eval-every 100 --eval-batches 8 --seeds 1 \
    --max-bytes 4000000 --out "$logs/tiny_lm_gpu"
}

step machine 30 machine
step build 200 build
step tests 120 tests
step language_model 330 language_model

echo "==== summary ===="
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
[[ -f $logs/tiny_lm_gpu/summary.txt ]] && cat "$logs/tiny_lm_gpu/summary.txt"
if [[ -n ${OUT:-} ]]; then
  cp -r "$logs"/. "$OUT"/ 2>/dev/null || true
fi
((${#failed[@]} == 0)) || {
  echo "failed: ${failed[*]}"
  exit 1
}
