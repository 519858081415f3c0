# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
# Helpers shared by scripts/*.sh (sourced, not run).

blockscale_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# blockscale_install_missing <debian package>...: installs those of the packages that are missing
# (apt-get, as root); without root, fails naming them. A package counts as present when its
# command is on PATH (cmake, g++, make, ...) or dpkg lists it installed; without dpkg, libraries
# are left for CMake to find.
blockscale_install_missing() {
  local missing=() package
  for package in "$@"; do
    case $package in
    cmake | g++ | make | git | clang-format)
      command -v "$package" >/dev/null && continue
      ;;
    esac
    command -v dpkg-query >/dev/null || continue
    if [[ $(dpkg-query -W -f='${Status}' "$package" 2>/dev/null) == "install ok installed" ]]; then
      continue
    fi
    missing+=("$package")
  done
  ((${#missing[@]} == 0)) && return 0
  if ((EUID != 0)) || ! command -v apt-get >/dev/null; then
    echo "error: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    return 1
  fi
  echo "Installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# Points CMake at the CUDA toolkit's nvcc when it is installed but not on PATH, so that the CUDA
# tests (BLOCKSCALE_ENABLE_CUDA=AUTO) are compiled wherever nvcc exists.
blockscale_find_nvcc() {
  if [[ -z ${CUDACXX:-} && -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
}

# blockscale_python_env_path <requirements file>: prints the interpreter blockscale_python_env
# gives for those requirements, without making its environment.
blockscale_python_env_path() {
  local requirements=$1 base=${BLOCKSCALE_PYTHON:-python3} key
  key=$({ "$base" --version 2>&1; cat "$blockscale_root"/python/requirements-*.txt; } |
    sha256sum | cut -c1-16)
  local cache=${BLOCKSCALE_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/blockscale}
  echo "$cache/$(basename "$requirements" .txt)-$key/bin/python"
}

# blockscale_python_env <requirements file>: prints the interpreter of a virtual environment that
# holds the requirements, made once and cached under ~/.cache/blockscale (BLOCKSCALE_VENV_CACHE),
# keyed by the Python version and the contents of python/requirements-*.txt. A failed install
# leaves no environment behind.
blockscale_python_env() {
  local requirements=$1 base=${BLOCKSCALE_PYTHON:-python3} venv
  venv=$(dirname "$(dirname "$(blockscale_python_env_path "$requirements")")")
  if [[ ! -f $venv/.complete ]]; then
    rm -rf "$venv"
    local start=$SECONDS
    echo "Making $venv (pip install -r ${requirements#"$blockscale_root"/})" >&2
    "$base" -m venv "$venv" >&2 &&
      "$venv/bin/python" -m pip install -q -r "$requirements" >&2 || {
      rm -rf "$venv"
      return 1
    }
    touch "$venv/.complete"
    echo "Made $venv in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))" >&2
  fi
  echo "$venv/bin/python"
}

blockscale_jobs=$(nproc 2>/dev/null || echo 2)
