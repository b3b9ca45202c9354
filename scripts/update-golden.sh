#!/usr/bin/env bash
# Regenerates test/golden/<scenario>.summary.txt for every shipped scenario configs/*.yaml from
# the current build ($UPSIM, default build/upsim). Run after an intended model change; review
# the diff and explain it in the commit message.
set -euo pipefail
cd "$(dirname "$0")/.."
upsim=${UPSIM:-build/upsim}
for config in configs/*.yaml; do
  scenario=$(basename "$config" .yaml)
  tmp=$(mktemp -d)
  "$upsim" run "$config" --out "$tmp" --no-trace --quiet >/dev/null
  cp "$tmp/summary.txt" "test/golden/$scenario.summary.txt"
  rm -rf "$tmp"
  echo "updated test/golden/$scenario.summary.txt"
done
