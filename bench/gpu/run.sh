#!/usr/bin/env bash
# The one prepared script for a device session: builds what needs a GPU, checks it and measures it,
# in one call of well under 8 minutes. Run from the repository root on the device machine:
#
#   bash bench/gpu/run.sh        (device tool: timeout_s about 560, carry ["build-gpu-deps"])
#
# build-gpu-deps/ holds the Catch2 that the device image may lack; make it first, on a machine
# that has Catch2, with bench/gpu/prepare_carry.sh. Steps, each logged with its time and run under
# a limit cut to what is left of the budget (BLOCKSCALE_GPU_BUDGET seconds, default 450); a step
# that fails does not stop the next, and the script exits nonzero at the end if any step failed,
# timed out or had to be skipped:
#   1. the machine: date, nvidia-smi, tool versions;
#   2. Catch2 (for the tests) from build-gpu-deps/ or the system, else apt-get where that works
#      (Google Benchmark is not needed: the CUDA benchmark also builds on its own);
#   3. configure build-gpu/: tests, benchmarks and examples on (AUTO for a missing package), CUDA
#      for the device's architecture (nvidia-smi's compute_cap: 9.0 -> 90a); when that build has no
#      CUDA benchmark target, build-gpu-bench/ from bench/gpu/ on its own, built alongside;
#   4. build only the targets needed, in parallel: the tests labelled `cuda` (tests/unit/*.cu ->
#      blockscale_test_<area>, and the CUDA examples), the other examples whose names contain
#      "cuda", blockscale_bench_gemm_cuda and blockscale_bench_quantize_cuda (a benchmark that
#      fails to build is tried once more on its own with warnings not errors);
#   5. the benchmarks, their tables written with --out (first: their numbers are what the session
#      is for, and they check each configuration against the host themselves): the GEMM against
#      cuBLASLt (at most 90 s), then quantization (at most 240 s);
#   6. ctest -L cuda --output-on-failure without the GEMM test, then the GEMM test
#      (blockscale_test_cuda_gemm) as a step of its own, then those other examples;
#   7. compute-sanitizer --tool memcheck, then --tool racecheck (--error-exitcode 86), on the
#      quantization benchmark's --quick run and on each test labelled cuda (its command line),
#      smallest first, 4 at a time, with BLOCKSCALE_TEST_QUICK=1 (the GEMM test's short list);
#      memcheck also on the GEMM benchmark's --quick run (one timed call each), last;
#   8. a summary, printed last; with $OUT set, summary.txt, bench_gemm_cuda.md,
#      bench_quantize_cuda.md and logs.tar.gz (every log) are copied there.
# Idempotent: the build trees are reused (an incremental build), the logs are made afresh.
#
# Environment: BLOCKSCALE_GPU_BUDGET (seconds, default 450); BLOCKSCALE_GPU_STAGES, the stages
# after the build to run (default "tests gemm bench sanitize": "gemm" is the GEMM benchmark,
# "bench" the quantization one; e.g. "gemm" for a rerun of the GEMM benchmark alone);
# BLOCKSCALE_BENCH_ARGS, more arguments for the quantization benchmark (e.g. "--only MoE");
# BLOCKSCALE_GEMM_BENCH_ARGS, for the GEMM one (e.g. "--only x14336"); BLOCKSCALE_GPU_ARCH, the
# CUDA architecture (default: the device's); BLOCKSCALE_GPU_SANITIZE_JOBS, sanitizer runs side by
# side (default 4).
set -u
set -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

budget=${BLOCKSCALE_GPU_BUDGET:-450}
stages=" ${BLOCKSCALE_GPU_STAGES:-tests gemm bench sanitize} "
read -r -a extra_bench_args <<<"${BLOCKSCALE_BENCH_ARGS:-}"
read -r -a extra_gemm_bench_args <<<"${BLOCKSCALE_GEMM_BENCH_ARGS:-}"
start=$SECONDS
deadline=$((start + budget))
jobs=$(nproc 2>/dev/null || echo 4)
build=$root/build-gpu
bench_build=$root/build-gpu-bench
deps=$root/build-gpu-deps/prefix
logs=$root/build-gpu-logs
bench_name=blockscale_bench_quantize_cuda
gemm_bench_name=blockscale_bench_gemm_cuda
gemm_test_name=blockscale_test_cuda_gemm
sanitizer_error=86

rm -rf "$logs"
mkdir -p "$logs"
arch=

step_names=()
step_results=()
step_seconds=()
failures=0

log() {
  printf '[run.sh %3ds] %s\n' "$((SECONDS - start))" "$*" | tee -a "$logs/run.log"
}

# record NAME RESULT SECONDS: a line of the summary; any RESULT but "ok" counts as a failure.
record() {
  step_names+=("$1")
  step_results+=("$2")
  step_seconds+=("$3")
  [[ $2 == ok ]] || failures=$((failures + 1))
}

have() { command -v "$1" >/dev/null 2>&1; }
stage() { [[ $stages == *" $1 "* ]]; }

# The time a step may take: CAP, or what is left of the budget if less.
limit_for() {
  local cap=$1 left=$((deadline - SECONDS))
  echo $((cap < left ? cap : left))
}

# outcome NAME STATUS LIMIT SECONDS: records how a step ended and prints its log's tail if badly.
outcome() {
  local name=$1 rc=$2 limit=$3 took=$4 result=ok
  if ((rc == 124 || rc == 137)); then
    result="TIMED OUT after ${limit}s"
  elif ((rc == sanitizer_error)) && [[ $name == sanitize-* ]]; then
    result="SANITIZER ERRORS (exit $rc)"
  elif ((rc != 0)); then
    result="FAILED (exit $rc)"
  fi
  record "$name" "$result" "$took"
  log "<== $name: $result (${took}s)"
  if [[ $result != ok ]]; then
    tail -n 25 "$logs/$name.log" | sed 's/^/    | /'
  fi
}

# run_step NAME CAP COMMAND...: runs COMMAND (a program, not a shell function) with its output in
# $logs/NAME.log, for at most CAP seconds and never past the deadline (timeout kills its whole
# process group). Returns the command's status.
run_step() {
  local name=$1 cap=$2
  shift 2
  local limit
  limit=$(limit_for "$cap")
  if ((limit < 15)); then
    log "SKIP $name: the time budget is spent"
    record "$name" "SKIPPED (no time left)" 0
    return 1
  fi
  log "==> $name (limit ${limit}s): $*"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  outcome "$name" "$rc" "$limit" $((SECONDS - t0))
  return "$rc"
}

# Writes the summary, copies the results to $OUT (4 files; at most 8 come back) and exits; also
# on an early exit (the EXIT trap), so that what ran is reported.
finished=0
finish() {
  ((finished)) && return
  finished=1
  {
    echo "bench/gpu/run.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $((SECONDS - start))s of a" \
      "${budget}s budget, CUDA architecture ${arch:-?}"
    printf '%-60s %-34s %s\n' step result seconds
    local i
    for i in "${!step_names[@]}"; do
      printf '%-60s %-34s %s\n' "${step_names[$i]}" "${step_results[$i]}" "${step_seconds[$i]}"
    done
    echo "failures: $failures"
  } >"$logs/summary.txt"
  if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    cp "$logs/summary.txt" "$OUT/summary.txt"
    [[ -f $logs/bench_gemm_cuda.md ]] && cp "$logs/bench_gemm_cuda.md" "$OUT/"
    [[ -f $logs/bench_quantize_cuda.md ]] && cp "$logs/bench_quantize_cuda.md" "$OUT/"
    # Sanitizer logs can be long: at most 4 MiB of each goes into the archive.
    local packed=$root/build-gpu-logs-packed f
    rm -rf "$packed"
    mkdir -p "$packed/logs"
    for f in "$logs"/*; do
      [[ -f $f ]] && head -c 4194304 "$f" >"$packed/logs/${f##*/}"
    done
    tar -czf "$OUT/logs.tar.gz" -C "$packed" logs
    rm -rf "$packed"
  fi
  echo
  echo "=================================== summary ==================================="
  cat "$logs/summary.txt"
  if [[ -f $logs/bench_quantize_cuda.md ]]; then
    echo
    cat "$logs/bench_quantize_cuda.md"
  fi
  if [[ -f $logs/bench_gemm_cuda.md ]]; then
    echo
    cat "$logs/bench_gemm_cuda.md"
  fi
  if ((failures == 0)); then
    exit 0
  fi
  exit 1
}

trap 'log "interrupted"; exit 130' INT TERM
on_exit() {
  local status=$?
  if ((!finished)); then
    log "stopped early (status $status)"
    record run.sh "STOPPED EARLY" 0
    finish
  fi
}
trap on_exit EXIT

# ---------------------------------------------------------------------------------------------
# 1. The machine.

log "bench/gpu/run.sh in $root: budget ${budget}s, $jobs cores"
if [[ -z ${CUDACXX:-} ]] && ! have nvcc && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
if [[ -d /usr/local/cuda/bin ]]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi
if ! have timeout; then
  echo "error: 'timeout' (coreutils) is needed" >&2
  exit 1
fi

{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  uname -a
  echo "cores: $jobs"
  have nvidia-smi && nvidia-smi
  have nvidia-smi && nvidia-smi --format=csv \
    --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw
  have nvcc && nvcc --version | tail -n 2
  have cmake && cmake --version | head -n 1
  have ninja && echo "ninja $(ninja --version)"
  have compute-sanitizer && compute-sanitizer --version | tail -n 2
  have g++ && g++ --version | head -n 1
  have python3 && python3 --version
  free -g
  df -h "$root"
  have git && git -C "$root" rev-parse HEAD && git -C "$root" status --short | head -n 40
} >"$logs/machine.log" 2>&1
cat "$logs/machine.log"

arch=${BLOCKSCALE_GPU_ARCH:-}
if [[ -z $arch ]]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .\r')
  case $cap in
  '' | *[!0-9]*) arch=90 ;;
  1[0-9][0-9]) arch=${cap}a ;; # 10.0 -> 100a, 12.0 -> 120a, as the project's default list
  9[0-9]) arch=${cap}a ;;    # 9.0 -> 90a: the warpgroup MMA and setmaxnreg are `a` features
  *) arch=$cap ;;              # 8.0 -> 80, 8.6 -> 86
  esac
fi
log "CUDA architecture: $arch"

generator="Unix Makefiles"
keep_going=(-k)
if have ninja; then
  generator=Ninja
  keep_going=(-k 0)
fi

# ---------------------------------------------------------------------------------------------
# 2. Packages.

prefix_args=()
if [[ -d $deps ]]; then
  prefix_args=("-DCMAKE_PREFIX_PATH=$deps")
  log "carried packages: $deps"
fi

# found HEADER: whether HEADER is under the carried prefix or the system's include directories.
found() {
  local d
  for d in "$deps/include" /usr/include /usr/local/include; do
    [[ -f $d/$1 ]] && return 0
  done
  return 1
}
catch2_found() { found catch2/catch.hpp || found catch2/catch_all.hpp; }
benchmark_found() { found benchmark/benchmark.h; }

if ! catch2_found; then
  if ((EUID == 0)) && have apt-get; then
    log "Catch2 is missing: trying apt-get (the device machines usually have no network)"
    if run_step apt-get-update 40 apt-get update -qq; then
      run_step apt-get-install 120 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends catch2 libbenchmark-dev
    fi
  fi
fi
tests_option=ON
if ! catch2_found; then
  log "no Catch2: the cuda tests cannot be built (carry build-gpu-deps/, made by" \
    "bench/gpu/prepare_carry.sh where Catch2 is installed)"
  record catch2 "MISSING: cuda tests not built" 0
  tests_option=AUTO
fi
benchmarks_option=ON
if ! benchmark_found; then
  log "no Google Benchmark: the host benchmarks are skipped; the CUDA one builds on its own"
  benchmarks_option=AUTO
fi

# ---------------------------------------------------------------------------------------------
# 3. Configure.

# A build tree made by another generator or from another source directory is remade.
stale() {
  [[ -f $1/CMakeCache.txt ]] || return 1
  grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$1/CMakeCache.txt" &&
    grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$2" "$1/CMakeCache.txt" && return 1
  return 0
}
if stale "$build" "$root"; then
  log "removing $build (another generator or source directory)"
  rm -rf "$build"
fi
if stale "$bench_build" "$root/bench/gpu"; then
  log "removing $bench_build (another generator or source directory)"
  rm -rf "$bench_build"
fi

main_ok=0
if run_step configure 120 cmake -S "$root" -B "$build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
  "-DBLOCKSCALE_BUILD_TESTS=$tests_option" "-DBLOCKSCALE_BUILD_BENCHMARKS=$benchmarks_option" \
  -DBLOCKSCALE_BUILD_EXAMPLES=ON ${prefix_args[@]+"${prefix_args[@]}"}; then
  main_ok=1
fi

# has_target DIR TARGET: whether the build in DIR knows TARGET (a dry run of building it).
has_target() { cmake --build "$1" --target "$2" -- -n >/dev/null 2>&1; }

targets=()
examples=()
declare -A wanted=()
want() {
  if [[ -z ${wanted[$1]:-} ]]; then
    wanted[$1]=1
    targets+=("$1")
  fi
}
# cuda_tests FILE: the tests labelled cuda (tests/unit/*.cu, the CUDA examples), one line each:
# the test's name (its target's, in this project), then, once it is built, its command line;
# tab-separated. From ctest's JSON; without python3, tests/unit/*.cu by the naming rule.
cuda_tests() {
  : >"$1"
  if have python3; then
    ctest --test-dir "$build" -L cuda --show-only=json-v1 2>/dev/null | python3 -c '
import json, sys
try:
    data = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for test in data.get("tests", []):
    print("\t".join([test.get("name", "")] + (test.get("command") or [])))
' >"$1"
  fi
  if [[ ! -s $1 ]]; then
    local f stem
    for f in "$root"/tests/unit/test_*.cu; do
      [[ -f $f ]] || continue
      stem=${f##*/}
      stem=${stem%.cu}
      stem=blockscale_test_${stem#test_}
      if [[ -x $build/tests/$stem ]]; then
        printf '%s\t%s\n' "$stem" "$build/tests/$stem" >>"$1"
      else
        printf '%s\n' "$stem" >>"$1"
      fi
    done
  fi
}
need_tests=0
if stage tests || stage sanitize; then
  need_tests=1
fi
if ((main_ok && need_tests)); then
  cuda_tests "$logs/cuda-tests-before-build.tsv"
  while IFS=$'\t' read -r name _; do
    [[ -n $name ]] || continue
    if has_target "$build" "$name"; then
      want "$name"
    else
      log "no target $name in $build (is CUDA enabled there?)"
    fi
  done <"$logs/cuda-tests-before-build.tsv"
  log "tests labelled cuda: $(wc -l <"$logs/cuda-tests-before-build.tsv")"
  # Examples named *cuda* that the label did not bring in (host-only ones) run by name.
  for f in "$root"/examples/*cuda*; do
    [[ -f $f ]] || continue
    stem=${f##*/}
    stem=${stem%.*}
    t=blockscale_example_$stem
    if [[ -z ${wanted[$t]:-} ]] && has_target "$build" "$t"; then
      want "$t"
      examples+=("$t")
    fi
  done
fi

bench_exe=
gemm_bench_exe=
bench_in_main=0
if ((main_ok)) && has_target "$build" "$bench_name"; then
  bench_in_main=1
  want "$bench_name"
  # An older tree has the quantization benchmark alone.
  has_target "$build" "$gemm_bench_name" && want "$gemm_bench_name"
fi
# The executables of an earlier run go first: a build that fails must not leave an old one to be
# run (with ninja only the link is redone).
for b in "$bench_name" "$gemm_bench_name"; do
  rm -f "$build/bench/gpu/$b" "$bench_build/$b" "$root/build-gpu-bench-relaxed/$b"
done
for t in ${targets[@]+"${targets[@]}"}; do
  [[ -d $build ]] && find "$build" -maxdepth 3 -type f -name "$t" -delete
done

bench_pid=
bench_limit=0
bench_t0=0
if ((!bench_in_main)); then
  log "the CUDA benchmark builds on its own in $bench_build"
  if run_step configure-bench 60 cmake -S "$root/bench/gpu" -B "$bench_build" -G "$generator" \
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$arch"; then
    bench_limit=$(limit_for 300)
    bench_t0=$SECONDS
    log "==> build-bench (limit ${bench_limit}s, in the background)"
    bench_targets=("$bench_name")
    has_target "$bench_build" "$gemm_bench_name" && bench_targets+=("$gemm_bench_name")
    timeout --kill-after=10 "$bench_limit" cmake --build "$bench_build" --parallel "$jobs" \
      --target "${bench_targets[@]}" -- "${keep_going[@]}" >"$logs/build-bench.log" 2>&1 &
    bench_pid=$!
  fi
fi

# ---------------------------------------------------------------------------------------------
# 4. Build (begun above for a benchmark built on its own).

if ((${#targets[@]} > 0)); then
  run_step build 300 cmake --build "$build" --parallel "$jobs" --target "${targets[@]}" -- \
    "${keep_going[@]}"
elif ((main_ok && need_tests)); then
  log "nothing CUDA to build in $build"
  record build "NOTHING TO BUILD (no CUDA targets)" 0
fi
if [[ -n $bench_pid ]]; then
  rc=0
  wait "$bench_pid" || rc=$?
  outcome build-bench "$rc" "$bench_limit" $((SECONDS - bench_t0))
fi
if ((bench_in_main)); then
  bench_exe=$build/bench/gpu/$bench_name
  gemm_bench_exe=$build/bench/gpu/$gemm_bench_name
else
  bench_exe=$bench_build/$bench_name
  gemm_bench_exe=$bench_build/$gemm_bench_name
fi
# A second try at the benchmarks that did not build, on their own, warnings not errors (a newer
# compiler may warn where the project's does not): the measurements matter more here than the
# warning policy.
relaxed_targets=()
if [[ ! -x $bench_exe ]] && { stage bench || stage sanitize; }; then
  relaxed_targets+=("$bench_name")
fi
if [[ ! -x $gemm_bench_exe ]] && { stage gemm || stage sanitize; } &&
  [[ -f $root/bench/gpu/bench_gemm_cuda.cu ]]; then
  relaxed_targets+=("$gemm_bench_name")
fi
if ((${#relaxed_targets[@]} > 0)); then
  relaxed=$root/build-gpu-bench-relaxed
  if stale "$relaxed" "$root/bench/gpu"; then
    rm -rf "$relaxed"
  fi
  log "not built: ${relaxed_targets[*]}: trying again in $relaxed with -DBLOCKSCALE_BENCH_WERROR=OFF"
  if run_step configure-bench-relaxed 60 cmake -S "$root/bench/gpu" -B "$relaxed" \
    -G "$generator" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
    -DBLOCKSCALE_BENCH_WERROR=OFF; then
    run_step build-bench-relaxed 240 cmake --build "$relaxed" --parallel "$jobs" \
      --target "${relaxed_targets[@]}" -- "${keep_going[@]}"
    [[ -x $relaxed/$bench_name && ! -x $bench_exe ]] && bench_exe=$relaxed/$bench_name
    [[ -x $relaxed/$gemm_bench_name && ! -x $gemm_bench_exe ]] &&
      gemm_bench_exe=$relaxed/$gemm_bench_name
  fi
fi

# ---------------------------------------------------------------------------------------------
# 5. The benchmarks, first: their numbers are what a device session is for, and they check their
# own configurations against the host. The GEMM's first (the newer), with a bounded share.

if ! stage gemm; then
  log "stage 'gemm' not asked for (BLOCKSCALE_GPU_STAGES)"
elif [[ -x $gemm_bench_exe ]]; then
  nvidia-smi --format=csv --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw \
    >"$logs/gpu-before-gemm-bench.log" 2>&1
  run_step gemm-bench 90 "$gemm_bench_exe" --out "$logs/bench_gemm_cuda.md" \
    ${extra_gemm_bench_args[@]+"${extra_gemm_bench_args[@]}"}
  nvidia-smi --format=csv --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw \
    >"$logs/gpu-after-gemm-bench.log" 2>&1
else
  log "no GEMM benchmark executable ($gemm_bench_exe)"
  record gemm-bench "NOT BUILT" 0
fi

if ! stage bench; then
  log "stage 'bench' not asked for (BLOCKSCALE_GPU_STAGES)"
elif [[ -x $bench_exe ]]; then
  nvidia-smi --format=csv --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw \
    >"$logs/gpu-before-bench.log" 2>&1
  run_step bench 240 "$bench_exe" --out "$logs/bench_quantize_cuda.md" \
    ${extra_bench_args[@]+"${extra_bench_args[@]}"}
  nvidia-smi --format=csv --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw \
    >"$logs/gpu-after-bench.log" 2>&1
else
  log "no benchmark executable ($bench_exe)"
  record bench "NOT BUILT" 0
fi

# ---------------------------------------------------------------------------------------------
# 6. Tests and examples.

runnable=() # the command lines (tab-separated) of the tests labelled cuda that were built
if ((main_ok && need_tests)); then
  cuda_tests "$logs/cuda-tests.tsv"
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    name=${line%%$'\t'*}
    command=${line#*$'\t'}
    if [[ $command != "$line" && -x ${command%%$'\t'*} ]]; then
      runnable+=("$command")
    else
      log "not built: $name"
      record "built $name" "NOT BUILT" 0
    fi
  done <"$logs/cuda-tests.tsv"
fi
if ! stage tests; then
  log "stage 'tests' not asked for (BLOCKSCALE_GPU_STAGES)"
elif ((${#runnable[@]} > 0)); then
  gemm_test_built=0
  for line in "${runnable[@]}"; do
    exe=${line%%$'\t'*}
    [[ ${exe##*/} == "$gemm_test_name" ]] && gemm_test_built=1
  done
  if ((${#runnable[@]} > gemm_test_built)); then
    run_step ctest-cuda 200 ctest --test-dir "$build" -L cuda -E "^$gemm_test_name\$" \
      --output-on-failure --no-tests=error --timeout 180 --parallel 4
  fi
  if ((gemm_test_built)); then
    run_step ctest-cuda-gemm 120 ctest --test-dir "$build" -R "^$gemm_test_name\$" \
      --output-on-failure --no-tests=error --timeout 110
  fi
fi
stage tests || examples=()
for e in ${examples[@]+"${examples[@]}"}; do
  run_step "example-$e" 60 ctest --test-dir "$build" -R "^$e\$" --output-on-failure \
    --no-tests=error
done

# ---------------------------------------------------------------------------------------------
# 7. compute-sanitizer: memcheck on everything, then racecheck, smallest executable first, a few
# runs at a time (BLOCKSCALE_GPU_SANITIZE_JOBS, default 4: mostly host-bound, so running them
# side by side covers more before the deadline).

sanitize_jobs=${BLOCKSCALE_GPU_SANITIZE_JOBS:-4}
declare -A job_name=() job_limit=() job_start=()
running=()
# Records the sanitizer runs that have ended.
reap() {
  local still=() pid rc
  for pid in ${running[@]+"${running[@]}"}; do
    if kill -0 "$pid" 2>/dev/null; then
      still+=("$pid")
    else
      rc=0
      wait "$pid" || rc=$?
      outcome "${job_name[$pid]}" "$rc" "${job_limit[$pid]}" $((SECONDS - job_start[$pid]))
    fi
  done
  running=(${still[@]+"${still[@]}"})
}
if ! stage sanitize; then
  log "stage 'sanitize' not asked for (BLOCKSCALE_GPU_STAGES)"
elif have compute-sanitizer; then
  by_size=()
  if ((${#runnable[@]} > 0)); then
    while IFS= read -r line; do
      by_size+=("${line#*$'\t'}")
    done < <(for line in "${runnable[@]}"; do
      printf '%s\t%s\n' "$(stat -c %s "${line%%$'\t'*}")" "$line"
    done | sort -n)
  fi
  queue=() # name, then the command, tab-separated
  for tool in memcheck racecheck; do
    # BLOCKSCALE_TEST_QUICK=1: the tests that know it (the GEMM test) run their short list.
    sanitizer=$'env\tBLOCKSCALE_TEST_QUICK=1\tcompute-sanitizer\t--tool\t'"$tool"
    sanitizer+=$'\t--error-exitcode\t'"$sanitizer_error"
    if [[ -x $bench_exe ]]; then
      queue+=("sanitize-$tool-bench-quick"$'\t'"$sanitizer"$'\t'"$bench_exe"$'\t--quick')
    fi
    for line in ${by_size[@]+"${by_size[@]}"}; do
      exe=${line%%$'\t'*}
      queue+=("sanitize-$tool-${exe##*/}"$'\t'"$sanitizer"$'\t'"$line")
    done
    # The GEMM benchmark under memcheck only (racecheck would mostly watch cuBLAS's kernels).
    if [[ $tool == memcheck && -x $gemm_bench_exe ]]; then
      queue+=("sanitize-$tool-gemm-bench-quick"$'\t'"$sanitizer"$'\t'"$gemm_bench_exe"$'\t--quick\t--iterations\t1')
    fi
  done
  for entry in ${queue[@]+"${queue[@]}"}; do
    IFS=$'\t' read -r -a parts <<<"$entry"
    name=${parts[0]}
    while ((${#running[@]} >= sanitize_jobs)); do
      wait -n 2>/dev/null || sleep 1
      reap
    done
    limit=$(limit_for 200)
    if ((limit < 15)); then
      log "SKIP $name: the time budget is spent"
      record "$name" "SKIPPED (no time left)" 0
      continue
    fi
    log "==> $name (limit ${limit}s, alongside ${#running[@]} more): ${parts[*]:1}"
    timeout --kill-after=10 "$limit" "${parts[@]:1}" >"$logs/$name.log" 2>&1 &
    pid=$!
    job_name[$pid]=$name
    job_limit[$pid]=$limit
    job_start[$pid]=$SECONDS
    running+=("$pid")
  done
  while ((${#running[@]} > 0)); do
    wait -n 2>/dev/null || sleep 1
    reap
  done
else
  log "compute-sanitizer not found"
  record compute-sanitizer "NOT FOUND" 0
fi

finish
