#!/usr/bin/env bash
# Static report of the CUDA kernels, no GPU needed (docs/cuda-static.md): compiles
# tests/cuda/kernels.cu and tests/cuda/gemm_kernels.cu for each architecture with nvcc
# (-Xptxas=-v, -lineinfo), installs cuobjdump and nvdisasm from their pip wheels into a cached
# virtual environment, and prints per architecture each kernel's registers, shared memory, stack
# frame and spills, for one architecture the SASS instruction counts of the bf16 -> NVFP4
# quantize kernels, and for every architecture the SASS figures of the GEMM main loops.
#   scripts/cuda_static_report.sh [--archs "80 90 100a 120a"] [--sass-arch 90] [--all-kernels]
#                                 [--gemm-only | --no-gemm]
#   scripts/cuda_static_report.sh --install-only
#   --archs         architectures to compile for (default: 80 90 100a 120a, as CMake's default)
#   --sass-arch     the architectures whose SASS is counted, side by side (default 90; e.g.
#                   "90 100a 120a"; the first also gets the breakdowns; "none" to skip)
#   --all-kernels   every kernel the launchers can choose (several minutes per architecture)
#   --gemm-only     only the GEMM kernels (about 15 CPU-seconds per architecture)
#   --no-gemm       only the kernels of kernels.cu
#   --install-only  only install the tools (then the ctest blockscale_cuda_static runs, not skips)
# Output (cubins, ptxas logs, report.md, the weighted SASS listings) goes to build-static/ unless
# BLOCKSCALE_STATIC_DIR says otherwise; cubins are rebuilt only when a source is newer. The tools'
# virtual environment is BLOCKSCALE_CUDA_TOOLS_VENV (default ~/.cache/blockscale/cuda-tools).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

archs="80 90 100a 120a"
sass_arch=90
all_kernels=0
install_only=0
quantize=1
gemm=1
while (($# > 0)); do
  case $1 in
  --archs)
    archs=$2
    shift
    ;;
  --sass-arch)
    sass_arch=$2
    shift
    ;;
  --all-kernels) all_kernels=1 ;;
  --gemm-only) quantize=0 ;;
  --no-gemm) gemm=0 ;;
  --install-only) install_only=1 ;;
  -h | --help)
    sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *)
    echo "error: unknown argument $1 (see --help)" >&2
    exit 2
    ;;
  esac
  shift
done

# The tools come from pip's default index, pinned so that the tables stay comparable.
tools_version=${BLOCKSCALE_CUDA_TOOLS_VERSION:-13.5.37}
venv=${BLOCKSCALE_CUDA_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/blockscale/cuda-tools}
stamp=$venv/.blockscale-tools-$tools_version
if [[ ! -f $stamp ]]; then
  echo "Installing nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm $tools_version into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "nvidia-cuda-cuobjdump==$tools_version" "nvidia-cuda-nvdisasm==$tools_version"
  touch "$stamp"
fi
export BLOCKSCALE_CUDA_TOOLS_VENV=$venv
((install_only)) && exit 0

blockscale_find_nvcc
nvcc=${CUDACXX:-$(command -v nvcc || true)}
if [[ -z $nvcc ]]; then
  echo "error: no nvcc (set CUDACXX or install the CUDA toolkit)" >&2
  exit 1
fi
out=${BLOCKSCALE_STATIC_DIR:-$blockscale_root/build-static}
mkdir -p "$out"
# The flags of the CMake target (Release, warnings as errors), plus line info for the listings
# (it does not change the SASS) and ptxas's resource report.
flags=(-std=c++17 -O3 -DNDEBUG -I "$blockscale_root/include" "-Xcompiler=-Wall,-Wextra,-Werror"
  --Werror=all-warnings -lineinfo -Xptxas=-v "-DBLOCKSCALE_STATIC_ALL_KERNELS=$all_kernels")
suffix=
((all_kernels)) && suffix=.all

# What to compile: kernels.cu into kernels.sm_ARCH[.all].cubin, gemm_kernels.cu into
# gemm.sm_ARCH.cubin (ptxas logs beside them).
units=()
((quantize)) && units+=("kernels:kernels.cu:$suffix")
((gemm)) && units+=("gemm:gemm_kernels.cu:")

newest_source() {
  find "$blockscale_root/include" "$2" -type f -newer "$1" -print -quit
}

# One nvcc per architecture and file, as many at a time as there are cores.
compiled=()
for unit in "${units[@]}"; do
  IFS=: read -r name file tag <<<"$unit"
  source=$blockscale_root/tests/cuda/$file
  for arch in $archs; do
    cubin=$out/$name.sm_$arch$tag.cubin
    if [[ -f $cubin && -z $(newest_source "$cubin" "$source") ]]; then
      continue
    fi
    while (($(jobs -rp | wc -l) >= blockscale_jobs)); do
      wait -n || true
    done
    echo "Compiling tests/cuda/$file for sm_$arch"
    compiled+=("$name.sm_$arch$tag")
    rm -f "$out/rc.$name.sm_$arch$tag"
    (
      start=$SECONDS
      rc=0
      "$nvcc" "${flags[@]}" -cubin -gencode "arch=compute_$arch,code=sm_$arch" "$source" \
        -o "$cubin.tmp" 2>"$out/ptxas.$name.sm_$arch$tag.log" || rc=$?
      if ((rc == 0)); then
        mv "$cubin.tmp" "$cubin"
        echo "  $file sm_$arch: $((SECONDS - start)) s"
      fi
      echo "$rc" >"$out/rc.$name.sm_$arch$tag"
    ) &
  done
done
wait
for what in "${compiled[@]}"; do
  if [[ $(cat "$out/rc.$what" 2>/dev/null) != 0 ]]; then
    echo "error: nvcc failed for $what (see $out/ptxas.$what.log)" >&2
    exit 1
  fi
done

report=(python3 "$blockscale_root/tests/cuda/cuda_static.py" report --listing "$out/sass")
for arch in $archs; do
  if ((quantize)); then
    report+=(--cubin "sm_$arch=$out/kernels.sm_$arch$suffix.cubin")
    report+=(--ptxas-log "sm_$arch=$out/ptxas.kernels.sm_$arch$suffix.log")
  fi
  if ((gemm)); then
    report+=(--gemm-cubin "sm_$arch=$out/gemm.sm_$arch.cubin")
    report+=(--gemm-ptxas-log "sm_$arch=$out/ptxas.gemm.sm_$arch.log")
  fi
done
if [[ $sass_arch != none ]] && ((quantize)); then
  sass_list=""
  for arch in $sass_arch; do sass_list+="sm_$arch "; done
  report+=(--sass-arch "$sass_list")
fi
if [[ $sass_arch != none ]]; then
  first_sass=${sass_arch%% *}
  report+=(--gemm-breakdown-arch "sm_$first_sass")
fi
name=report$suffix
((quantize)) || name=report.gemm
{
  echo "# CUDA static report, $(date -u +%Y-%m-%d)"
  echo
  kernels="the kernels of tests/cuda/kernels.cu"
  ((all_kernels)) && kernels="every kernel the launchers can choose"
  ((quantize)) || kernels=
  if ((gemm)); then
    kernels="${kernels:+$kernels and }the GEMM kernels of tests/cuda/gemm_kernels.cu"
  fi
  commit=$(git -C "$blockscale_root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  dirty=$(git -C "$blockscale_root" status --porcelain -- include tests/cuda 2>/dev/null | head -1)
  echo "$("$nvcc" --version | grep release); cuobjdump and nvdisasm $tools_version; $kernels;" \
    "tree at $commit${dirty:+ with local changes}."
  echo
  "${report[@]}"
} | tee "$out/$name.md"
echo
echo "Written to $out/$name.md; weighted SASS listings in $out/sass/"
