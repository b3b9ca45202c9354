#!/usr/bin/env bash
# Installs upsim's build dependencies (Debian 12 packages only) and builds it into build/.
# Usage: scripts/setup.sh [--all] [extra cmake -D options...]
#   default: what `upsim run` and `import upsim` need (the upsim program and the Python package);
#   --all:   every target (unit tests, benchmarks; scripts/test.sh builds this way).
# Environment: UPSIM_BUILD_DIR (default: build), UPSIM_JOBS (default: number of cores),
# UPSIM_NO_PYTHON_PATH=1 (do not add the package to the user's site-packages, see the end).
set -euo pipefail
cd "$(dirname "$0")/.."
build_all=0
if [[ "${1:-}" == --all ]]; then
  build_all=1
  shift
fi

# clang and libclang-rt-14-dev (libFuzzer, sanitizer runtimes) build the fuzz harnesses; Open MPI
# distributes `upsim sweep` under mpirun; gnuplot draws `upsim plot`; libssl-dev's libcrypto hashes
# a sweep's points (SHA-256); protobuf (protoc at build time) reads Chakra traces; simdjson and
# nlohmann-json are measured against upsim's JSON reader (bench/json_library_bench.cpp); pybind11,
# python3-dev, pandas and pytest build and test the Python package (python/), and PyTables
# (python3-tables) lets its tests read a sweep's results.h5 with pandas.read_hdf.
packages=(g++ cmake ninja-build pkg-config clang-format clang libclang-rt-14-dev
          libfmt-dev libyaml-cpp-dev libboost-program-options-dev libboost-graph-dev zlib1g-dev
          googletest libgtest-dev libbenchmark-dev libhdf5-dev libssl-dev
          libopenmpi-dev openmpi-bin gnuplot-nox protobuf-compiler libprotobuf-dev
          libsimdjson-dev nlohmann-json3-dev python3-dev pybind11-dev python3-pandas python3-pytest
          python3-tables)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build_dir=${UPSIM_BUILD_DIR:-build}
jobs=${UPSIM_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
if ((build_all)); then
  cmake --build "$build_dir" -j "$jobs"
else
  targets=(upsim)
  # The list whole first: `grep -q` leaving a pipe early would fail it under pipefail.
  all_targets=$(ninja -C "$build_dir" -t targets all)
  if grep -q '^upsim_python:' <<<"$all_targets"; then targets+=(upsim_python); fi
  cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
fi

# `import upsim` from any folder: a .pth file in Debian python3's user site-packages naming
# <build>/python, as `pip install --user -e` would add one. Written only when absent; one that
# names another checkout's build is left as it is, with a note.
package_dir=$(cd "$build_dir" && pwd)/python
if [[ -f "$package_dir/upsim/__init__.py" && "${UPSIM_NO_PYTHON_PATH:-0}" != 1 ]] &&
   [[ -x /usr/bin/python3 ]]; then
  site_dir=$(/usr/bin/python3 -m site --user-site)
  pth="$site_dir/upsim.pth"
  if [[ ! -e "$pth" ]]; then
    mkdir -p "$site_dir"
    printf '%s\n' "$package_dir" > "$pth"
    echo "setup: python3 imports upsim from $package_dir (through $pth)"
  elif [[ "$(cat "$pth")" != "$package_dir" ]]; then
    echo "setup: note: $pth names $(cat "$pth"), not this build; left as it is" \
         "(remove it and run setup again to import this one, or set PYTHONPATH=$package_dir)"
  fi
fi
