#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz/ with clang (into build-fuzz/: every library
# instrumented, ASan + UBSan), seeds a corpus per harness from configs/ and test/data, and runs
# each harness. Findings (crashing, leaking, slow or memory-hungry inputs) are written to
# build-fuzz/fuzz-findings/<harness>/; a run that finds any exits non-zero. Per harness it prints
# executions and findings.
#
# Usage: scripts/fuzz.sh [SECONDS]          each harness for SECONDS (default 60)
#        UPSIM_FUZZ_RUNS=N scripts/fuzz.sh  each harness for N inputs instead (the CI smoke run)
#        UPSIM_FUZZ_HARNESSES="fuzz_traces fuzz_hdf5" scripts/fuzz.sh 600   only these
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${UPSIM_FUZZ_BUILD_DIR:-build-fuzz}
harnesses=${UPSIM_FUZZ_HARNESSES:-fuzz_yaml_configs fuzz_scenario fuzz_traces fuzz_measurements fuzz_hdf5 fuzz_outputs fuzz_study fuzz_dlrm_inputs}

CXX=${UPSIM_FUZZ_CXX:-clang++} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DUPSIM_FUZZ=ON -DUPSIM_BUILD_TESTS=OFF -DUPSIM_BUILD_BENCHMARKS=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" --target upsim $harnesses

# Seeds: the shipped inputs of each format (gzipped traces unpacked: the parsers read bytes),
# named after their path so that equal names in different folders do not collide.
seeds=$build/fuzz-seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{fuzz_yaml_configs,fuzz_scenario,fuzz_traces,fuzz_measurements,fuzz_hdf5,fuzz_outputs,fuzz_study,fuzz_dlrm_inputs}
seed() { cp "$2" "$seeds/$1/${2//\//_}"; }
while IFS= read -r f; do seed fuzz_yaml_configs "$f"; done < <(find configs -name '*.yaml' | sort)
# Shipped scenarios, but not the two that build 16 M-task graphs and not the trace scenarios,
# which read megabytes of traces per input (over libFuzzer's 10 s slow-unit mark under ASan;
# fuzz_traces fuzzes those readers).
while IFS= read -r f; do seed fuzz_scenario "$f"; done < <(
  find configs -maxdepth 1 -name '*.yaml' ! -name 'gpt3_175b_1024gpu.yaml' \
    ! -name 'llama3_70b_64gpu.yaml' ! -name 'trace_*.yaml' | sort)
# Traces: small cuts of the shipped traces (test/fuzz/seeds/traces/SOURCES.md), not the whole
# megabyte files, which run at a few executions per second.
cp test/fuzz/seeds/traces/*.json test/fuzz/seeds/traces/*.et "$seeds/fuzz_traces/"
while IFS= read -r f; do seed fuzz_measurements "$f"; done < <(
  find test/data test/unit -type f \( -name '*.log' -o -name '*.csv' \) -size -1M | sort)
"$build/upsim" convert kernels --llmcompass test/data/llmcompass \
  --out "$seeds/fuzz_hdf5/llmcompass.h5" >/dev/null
# What upsim plot and diff read back: a run folder's tables and summary, a sweep's results table.
outputs=$build/fuzz-outputs
rm -rf "$outputs"
"$build/upsim" run test/unit/tools/data/tiny.yaml --out "$outputs/run" --no-trace >/dev/null 2>&1
"$build/upsim" sweep test/unit/tools/data/study_small.yaml --out "$outputs/sweep" >/dev/null 2>&1
for f in "$outputs"/run/{summary.json,ranks.csv,links.csv,ops.csv} "$outputs/sweep/results.csv"; do
  seed fuzz_outputs "$f"
done
# Studies: the shipped ones, and the records a small sweep writes (its manifest and two rows).
while IFS= read -r f; do seed fuzz_study "$f"; done < <(find configs/studies -name '*.yaml' | sort)
rm -rf "$build/fuzz-sweep"
"$build/upsim" sweep test/unit/tools/data/study_small.yaml --out "$build/fuzz-sweep" >/dev/null 2>&1
cp "$build/fuzz-sweep/study.points" "$seeds/fuzz_study/study.points"
cp "$build/fuzz-sweep/points/0.row" "$build/fuzz-sweep/points/11.row" "$seeds/fuzz_study/"
rm -rf "$build/fuzz-sweep"
# DLRM inputs: tables files in each format (test/fuzz/seeds/dlrm/SOURCES.md) and the sharding plan
# `upsim shard` writes for configs/dlrm_4gpu.yaml, whose model the harness plans for.
cp test/fuzz/seeds/dlrm/tables* "$seeds/fuzz_dlrm_inputs/"
"$build/upsim" shard configs/dlrm_4gpu.yaml --out "$seeds/fuzz_dlrm_inputs/plan_dlrm_4gpu.yaml" \
  >/dev/null

export LSAN_OPTIONS=suppressions=$PWD/test/fuzz/lsan_suppressions.txt
status=0
for h in $harnesses; do
  corpus=$build/fuzz-corpus/$h
  findings=$build/fuzz-findings/$h
  mkdir -p "$corpus" "$findings"
  # The smoke run is deterministic (fixed seed), so that CI fails only for a real finding.
  if [[ -n "${UPSIM_FUZZ_RUNS:-}" ]]; then
    limit=(-runs="$UPSIM_FUZZ_RUNS" -seed=1)
  else
    limit=(-max_total_time="$seconds")
  fi
  # Inputs may grow to a few times the largest seed (the HDF5 seed is 19 KB, a trace cut 60 KB).
  case $h in
    fuzz_traces | fuzz_measurements) max_len=262144 ;;
    *) max_len=65536 ;;
  esac
  # The HDF5 reader runs libhdf5 in a forked child, which inherits libFuzzer's malloc hook: a
  # corrupt header makes libhdf5 ask for gigabytes there (2.3 GB, and 8 GiB for an object header
  # in H5C_protect under H5Gopen2), and libFuzzer would file the child's single malloc as a
  # finding although the parent turns the child's failure into an error naming the file. The
  # limit for one malloc is therefore off for that harness (1 TiB: AddressSanitizer's own
  # allocation limit ends such a child first); the parent's RSS limit stays.
  # Those children also crash inside libhdf5 (the reader turns that into an error), and each
  # would symbolize its AddressSanitizer report with a fresh llvm-symbolizer (about 0.3 s a
  # crash, half the harness's time): its reports stay unsymbolized (rerun a finding to read one).
  # A fork copies the parent's page tables, so the parent is kept small: AddressSanitizer's
  # quarantine of freed memory (256 MB by default, which the parent filled) is cut to 1 MB, and
  # fresh blocks are not pre-filled (libhdf5 callocs them anyway): about 25% more executions/s.
  malloc_limit=2048
  asan_options=${ASAN_OPTIONS:-}
  if [[ $h == fuzz_hdf5 ]]; then
    malloc_limit=1048576
    asan_options=${asan_options:+$asan_options:}symbolize=0:quarantine_size_mb=1:max_malloc_fill_size=0
  fi
  log=$build/fuzz-$h.log
  set +e
  ASAN_OPTIONS=$asan_options "$build/test/fuzz/$h" "${limit[@]}" -rss_limit_mb=2048 -malloc_limit_mb="$malloc_limit" -timeout=20 \
    -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$seeds/$h" \
    >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  found=$(find "$findings" -type f | wc -l)
  echo "$h: ${execs:-0} executions, $found findings (exit $rc; log $log)"
  if [[ $rc -ne 0 || $found -ne 0 ]]; then status=1; fi
done
exit $status
