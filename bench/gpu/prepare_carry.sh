#!/usr/bin/env bash
# Run on the machine the device session starts from (not on the device machine), before the device
# call: copies what the device build needs and the device image may lack into build-gpu-deps/
# (ignored by .gitignore's /build*/), which the device call then names in `carry`:
#
#   bash bench/gpu/prepare_carry.sh
#   device run: command "bash bench/gpu/run.sh", carry ["build-gpu-deps"], timeout_s about 560
#
# Today that is Catch2 (the tests' framework; v2 is header-only, so the copy works on any x86-64
# Linux): the installed package's headers, CMake package files and library, in the same layout
# under build-gpu-deps/prefix, which run.sh passes as CMAKE_PREFIX_PATH. Google Benchmark is not
# carried: the CUDA benchmark builds without it (bench/gpu/CMakeLists.txt stands alone).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest=$root/build-gpu-deps/prefix

if ! command -v dpkg-query >/dev/null ||
  [[ $(dpkg-query -W -f='${Status}' catch2 2>/dev/null) != "install ok installed" ]]; then
  echo "error: the Debian package catch2 is not installed here (apt-get install catch2)" >&2
  exit 1
fi

rm -rf "$root/build-gpu-deps"
mkdir -p "$dest"
copied=0
while IFS= read -r file; do
  [[ -f $file ]] || continue
  case $file in
  /usr/include/* | /usr/lib/*)
    mkdir -p "$dest$(dirname "${file#/usr}")"
    cp -p "$file" "$dest${file#/usr}"
    copied=$((copied + 1))
    ;;
  esac
done < <(dpkg-query -L catch2)
version=$(dpkg-query -W -f='${Version}' catch2)
echo "catch2 $version: $copied files in $dest ($(du -sh "$root/build-gpu-deps" | cut -f1))"
