#!/usr/bin/env bash
# Regenerates test/golden/<scenario>.summary.txt from the current build (build/upsim).
# Run after an intended model change; review the diff and explain it in the commit message.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in dlrm_4gpu dlrm_8gpu trace_dlrm_v100; do
  tmp=$(mktemp -d)
  build/upsim run "configs/$scenario.yaml" --out "$tmp" --no-trace --quiet >/dev/null
  cp "$tmp/summary.txt" "test/golden/$scenario.summary.txt"
  rm -rf "$tmp"
  echo "updated test/golden/$scenario.summary.txt"
done
