#!/usr/bin/env bash
# Runs upsim's CUDA microbenchmarks (bench/gpu/gpu_microbench.cu) on the GPU of this machine and
# writes every table under OUT_DIR: gemm.csv, memory.csv, launch.csv, nvidia-smi.txt and run.log.
# Needs nvcc, cuBLASLt and a GPU, nothing else (no CMake, no upsim build); takes a few minutes,
# at most 7 (the benchmark is stopped after UPSIM_GPU_BENCH_SECONDS, default 420).
# Usage: scripts/gpu_microbench.sh [OUT_DIR] [--quick]     (OUT_DIR defaults to $OUT)
# Then, on any machine with upsim built (bench/gpu/README.md):
#   build/upsim calibrate kernels --llmcompass '' --csv OUT_DIR/gemm.csv --csv OUT_DIR/memory.csv \
#     --hardware configs/hardware/h200_sxm_141gb.yaml --out configs/calibration/h200_measured.yaml
#   build/upsim calibrate launch --csv OUT_DIR/launch.csv
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:?give OUT_DIR or set OUT}}
quick=${2:-}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
command -v nvcc >/dev/null || PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "nvcc not found (CUDA toolkit)"; exit 2; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: no NVIDIA driver here"; exit 2; }
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvcc --version | tail -1)"
{
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu,persistence_mode,compute_mode \
    --format=csv
  nvidia-smi -q -d CLOCK,PERFORMANCE,POWER
} > "$out/nvidia-smi.txt"
cat "$out/nvidia-smi.txt" | head -3
bin=$(mktemp -d)/gpu_microbench
arch=${UPSIM_CUDA_ARCH:-native}
echo "== build (nvcc -arch=$arch)"
nvcc -O3 -std=c++17 -arch="$arch" -Xcompiler=-Wall,-Wextra bench/gpu/gpu_microbench.cu \
  -lcublasLt -o "$bin"
echo "== run"
start=$(date +%s)
timeout "${UPSIM_GPU_BENCH_SECONDS:-420}" "$bin" all "$out" $quick
echo "== done in $(( $(date +%s) - start )) s"
wc -l "$out"/*.csv
