#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: format check, warnings-as-errors build and
# ctest, then the same tests under address + undefined-behaviour sanitizers, then a short smoke
# run of every fuzz harness (scripts/fuzz.sh: its seeds and a few hundred mutations each).
# Usage: scripts/test.sh            (UPSIM_SKIP_SANITIZE=1 skips the sanitizer pass,
#                                    UPSIM_SKIP_FUZZ=1 the fuzz smoke run)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format check (clang-format, .clang-format)"
mapfile -t sources < <(git ls-files '*.h' '*.cpp')
clang-format --dry-run --Werror "${sources[@]}"

echo "== build (warnings are errors) and test"
UPSIM_BUILD_DIR=build scripts/setup.sh --all -DUPSIM_WARNINGS_AS_ERRORS=ON -DUPSIM_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure -j "$(nproc)"

if [[ "${UPSIM_SKIP_SANITIZE:-0}" != 1 ]]; then
  echo "== build and test with address + undefined-behaviour sanitizers"
  UPSIM_BUILD_DIR=build-sanitize scripts/setup.sh --all -DUPSIM_WARNINGS_AS_ERRORS=ON \
    -DUPSIM_SANITIZE=ON -DUPSIM_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug
  ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)"
fi

if [[ "${UPSIM_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== fuzz smoke run (scripts/fuzz.sh; long runs: scripts/fuzz.sh SECONDS)"
  UPSIM_FUZZ_RUNS=${UPSIM_FUZZ_RUNS:-300} scripts/fuzz.sh
fi
