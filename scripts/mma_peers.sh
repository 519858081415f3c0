#!/usr/bin/env bash
# The long sweep of MMA-Sim against the emulated tensor-core MMAs (python/tests/test_peers_mma.py):
# every instruction × architecture × input mix with CASES cases each (default 10,000; CI's share
# is 1,000), the agreement table printed and written to build/mma_peers.json.
#   scripts/mma_peers.sh [CASES]
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

cases=${1:-10000}
[[ $cases =~ ^[0-9]+$ ]] || {
  echo "error: CASES must be a count, not '$cases'" >&2
  exit 2
}
blockscale_install_missing g++ python3 python3-venv python3-dev
interpreter=$(blockscale_python_env "$blockscale_root/python/requirements-peers.txt")
out=$blockscale_root/build
mkdir -p "$out"
# The case writer is one translation unit over the headers.
"${CXX:-g++}" -std=c++17 -O2 -I"$blockscale_root/include" -I"$blockscale_root/tests/support" \
  "$blockscale_root/tests/peers/mma_cases.cpp" -o "$out/blockscale_mma_cases"
rm -f "$out/mma_peers.json"
BLOCKSCALE_MMA_CASES=$out/blockscale_mma_cases BLOCKSCALE_MMA_PEER_CASES=$cases \
  BLOCKSCALE_PEERS_SUMMARY=$out/mma_peers.json \
  "$interpreter" -m pytest -q -s -p no:cacheprovider --rootdir="$blockscale_root/python" \
  "$blockscale_root/python/tests/test_peers_mma.py"
echo "summary: $out/mma_peers.json"
