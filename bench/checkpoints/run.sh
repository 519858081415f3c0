#!/usr/bin/env bash
# Times blockscale-convert and blockscale-inspect on a generated Llama-shaped BF16 checkpoint
# (bench/checkpoints/make_checkpoint.py) and prints wall time, input throughput, the ratio to the
# baseline measured in the same run (cat of the shards to /dev/null: reading the input) and peak
# RSS (/usr/bin/time -v) as a Markdown table, with a warm page cache and, when run as root where
# /proc/sys/vm/drop_caches is writable, a cold one.
#   bench/checkpoints/run.sh [--gigabytes G] [--work DIR]
#   --gigabytes G   size of the generated checkpoint (default 1.5)
#   --work DIR      where the checkpoint and outputs go (default build-bench-checkpoints/); the
#                   checkpoint is kept there and reused by later runs of the same size
# Builds the tools (Release) into build/ unless BLOCKSCALE_BUILD_DIR says otherwise.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"

gigabytes=1.5
work=$blockscale_root/build-bench-checkpoints
while (($#)); do
  case $1 in
  --gigabytes) gigabytes=$2 && shift ;;
  --work) work=$2 && shift ;;
  -h | --help) sed -n '2,11s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" && exit 0 ;;
  *) echo "unknown argument $1" >&2 && exit 2 ;;
  esac
  shift
done

blockscale_install_missing cmake g++ make nlohmann-json3-dev time python3 python3-venv
build=${BLOCKSCALE_BUILD_DIR:-$blockscale_root/build}
cmake -S "$blockscale_root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBLOCKSCALE_BUILD_EXAMPLES=ON \
  >/dev/null
cmake --build "$build" --parallel "$blockscale_jobs" --target blockscale_convert blockscale_inspect
tools=$build/examples/tools
python=$(blockscale_python_env "$blockscale_root/python/requirements-test.txt")

mkdir -p "$work"
input=$work/llama-${gigabytes}GB
if [[ ! -f $input/config.json ]]; then
  rm -rf "$input"
  "$python" "$blockscale_root/bench/checkpoints/make_checkpoint.py" "$input" --gigabytes "$gigabytes"
fi
bytes=$(du -cb "$input"/*.safetensors | tail -n 1 | cut -f1)

drop_caches() {
  sync
  { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
}
can_drop=no
drop_caches && can_drop=yes

# measure <label> <cache> <command...>: one Markdown row; the first row of a cache state is the
# baseline the others are divided by.
baseline=
measure() {
  local label=$1 cache=$2
  shift 2
  [[ $cache == cold ]] && drop_caches
  /usr/bin/time -v "$@" >"$work/stdout.txt" 2>"$work/time.txt"
  local wall rss
  wall=$(awk -F': ' '/Elapsed/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time.txt")
  [[ -z $baseline ]] && baseline=$wall
  awk -v l="$label" -v c="$cache" -v w="$wall" -v r="$rss" -v b="$bytes" -v base="$baseline" \
    'BEGIN {printf "| %s | %s | %.2f | %.0f | %.3f | %.0f |\n", l, c, w, b / 1e6 / w, base / w, r / 1024}'
}

echo
echo "Checkpoint: $input ($(awk -v b="$bytes" 'BEGIN {printf "%.2f GB", b / 1e9}'), $(nproc) cores)"
echo
echo "| tool | page cache | wall s | MB/s of input | x reading the input | peak RSS MB |"
echo "|---|---|---|---|---|---|"
for cache in warm $([[ $can_drop == yes ]] && echo cold); do
  [[ $cache == warm ]] && cat "$input"/*.safetensors >/dev/null
  baseline=
  measure "baseline: cat of the shards" "$cache" bash -c 'cat "$@" >/dev/null' cat \
    "$input"/*.safetensors
  rm -rf "$work/out"
  measure "blockscale-convert (compressed-tensors NVFP4)" "$cache" "$tools/blockscale-convert" \
    "$input" "$work/out"
  rm -rf "$work/out"
  [[ $cache == warm ]] && cat "$input"/*.safetensors >/dev/null
  measure "blockscale-inspect (4 formats x 2 transforms)" "$cache" "$tools/blockscale-inspect" \
    "$input" --csv "$work/inspect.csv"
done
