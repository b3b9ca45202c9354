#!/usr/bin/env bash
# Installs upsim's build dependencies (Debian 12 packages only) and builds it into build/.
# Usage: scripts/setup.sh [extra cmake -D options...]
# Environment: UPSIM_BUILD_DIR (default: build), UPSIM_JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

# clang and libclang-rt-14-dev (libFuzzer, sanitizer runtimes) build the fuzz harnesses; Open MPI
# distributes `upsim sweep` under mpirun; gnuplot draws `upsim plot`; libssl-dev's libcrypto hashes
# a sweep's points (SHA-256); protoc and libprotobuf read Chakra execution traces (sim/formats/).
packages=(g++ cmake ninja-build pkg-config clang-format clang libclang-rt-14-dev
          libfmt-dev libyaml-cpp-dev libboost-program-options-dev libboost-graph-dev zlib1g-dev
          protobuf-compiler libprotobuf-dev
          googletest libgtest-dev libbenchmark-dev libhdf5-dev libssl-dev
          libopenmpi-dev openmpi-bin gnuplot-nox)
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
cmake --build "$build_dir" -j "$jobs"
