#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: format check, warnings-as-errors build and
# ctest, then the same tests under address + undefined-behaviour sanitizers.
# Usage: scripts/test.sh            (UPSIM_SKIP_SANITIZE=1 skips the sanitizer pass)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format check (clang-format, .clang-format)"
mapfile -t sources < <(git ls-files '*.h' '*.cpp')
clang-format --dry-run --Werror "${sources[@]}"

echo "== build (warnings are errors) and test"
UPSIM_BUILD_DIR=build scripts/setup.sh -DUPSIM_WARNINGS_AS_ERRORS=ON -DUPSIM_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure -j "$(nproc)"

if [[ "${UPSIM_SKIP_SANITIZE:-0}" != 1 ]]; then
  echo "== build and test with address + undefined-behaviour sanitizers"
  UPSIM_BUILD_DIR=build-sanitize scripts/setup.sh -DUPSIM_WARNINGS_AS_ERRORS=ON \
    -DUPSIM_SANITIZE=ON -DUPSIM_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug
  ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)"
fi
