// The throughput and utilisation of a run, as LLM and recommender users read them: tokens (or
// samples) per second, model and hardware FLOP/s per GPU, MFU and HFU.
//
// Contract:
//  - From the scenario's IterationWork (workloads/workload.h), its sealed graph and the run's
//    predicted iteration time; nullopt when the workload states no work (a trace).
//  - units/s = the iteration's units / the predicted iteration time; per GPU, over the GPUs the
//    graph stands for (mirrored replicas included).
//  - Model FLOP/s per GPU = the workload's model FLOPs / iteration time / GPUs (Megatron-LM's
//    count: transformer_model_flops); MFU = that / the dense peak of IterationWork::peak_dtype on
//    the run's GPU (its hardware profile, at its clock). Absent when the workload counts none.
//  - Hardware FLOP/s per GPU = the FLOPs of every kernel the graph runs (recomputation
//    included; each kernel's arithmetic from its shape, roofline_work), summed per simulated rank,
//    averaged over the ranks and the graph's iterations, over the iteration time; HFU = that / the
//    same peak. Absent without a peak for the dtype. A fused causal attention computes half the
//    scores, which Megatron-LM's model count counts whole: at long sequences the hardware rate can
//    fall below the model rate.
//  - Deterministic: the same run gives the same numbers.
#pragma once

#include <optional>
#include <string>

#include "sim/cost_models.h"
#include "sim/export/run_summary.h"
#include "tools/scenario.h"

namespace upsim::cli {

struct RunMetrics {
  std::string unit;  ///< "tokens" or "samples"
  double units_per_s = 0.0;
  double units_per_gpu_per_s = 0.0;
  std::optional<double> model_tflops_per_gpu;
  std::optional<double> mfu;  ///< fraction (0.417 = 41.7%)
  double hardware_tflops_per_gpu = 0.0;
  std::optional<double> hfu;
  /// The dense peak the utilisations are against, and its dtype.
  double peak_tflops = 0.0;
  DType peak_dtype = DType::kBf16;
};

/// The rank that sets the predicted iteration time (the first of equals); `summary` has ranks.
const RankBreakdown& slowest_rank(const RunSummary& summary);

/// `total`, summed over `rank`'s measured iterations, per iteration.
Duration per_iteration(const RankBreakdown& rank, Duration total);

/// The metrics of `scenario` at `summary`'s predicted iteration time (see the contract).
std::optional<RunMetrics> run_metrics(const Scenario& scenario, const RunSummary& summary);

/// One summary line: "throughput: 134.2 k tokens/s (2.10 k per GPU); model 412.3 TFLOP/s per GPU
/// (MFU 41.7% of the 989.4 TFLOP/s bf16 dense peak), hardware 530.1 TFLOP/s per GPU (HFU 53.6%)".
std::string format_run_metrics(const RunMetrics& metrics);

/// The metrics as a JSON object's members (no braces), for summary.json.
std::string run_metrics_json(const RunMetrics& metrics);

}  // namespace upsim::cli
