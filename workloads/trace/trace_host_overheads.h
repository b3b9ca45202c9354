// The seed method's host overheads T1-T5 (Lin et al., TPDS 2024) extracted from Kineto
// traces, written as a host-overhead calibration file (the schema of configs/host/*.yaml that
// calibration/host_overhead_cpu_cost.h reads, so workload generators can use them).
//
// The definitions are those of scripts/extract_host_overheads.py (its docstring states them in
// full), implemented again here so that `upsim` needs no Python; for the same traces the two
// print the same file body (a test checks it against configs/host/v100_pytorch_kineto.yaml):
//  - host events (cpu_op, user_annotation, cuda_runtime minus kIgnoredRuntime) nest by interval
//    containment per thread, sorted by (start, -duration); a root of a secondary thread nests
//    under the deepest main-thread label (user_annotation, or a cpu_op named like a module marker)
//    that contains it; ops are cpu ops with no op ancestor;
//  - events from a DataLoader event longer than 100 us to the next "## forward ##" are dropped;
//    the DataLoader event itself is one body sample of its name (its duration less 2 us per host
//    event of its thread inside it): fetching a batch, a launch-free op of its own that is not
//    pooled into the default body;
//  - launches are cudaLaunchKernel, cudaMemcpyAsync and cudaStreamSynchronize under the op;
//    2 us of profiler overhead (kSeedCpuEventOverheadUs) is taken off per traced sub-event
//    counted before a launch;
//  - T2 = first launch start - op start - 2 n_before; T3 = max(0, op end - last launch end -
//    2 n_after); T5 = the gaps between launches (0 for single-launch ops), or the whole body
//    minus 2 per sub-event for ops without launches (aten::to without sub-events skipped);
//    T1 = gap - 2 between consecutive ops of one thread with the same parent, 2 < gap < 200 us;
//    T4 = the mean measured cudaLaunchKernel duration;
//  - negative samples clamp to 0, then Tukey's rule per (op, T) and for T1; defaults pool every
//    cleaned sample (T5 between launches and the bodies of launch-free ops separately).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"
#include "workloads/trace/kineto_trace.h"

namespace upsim {

/// Cleaned samples of one op name, in microseconds.
struct OpOverheadSamples {
  std::vector<double> t2;
  std::vector<double> t3;
  std::vector<double> t5;
  bool launches = false;  ///< the op launched GPU work (its T5 are gaps, not bodies)
};

struct ExtractedHostOverheads {
  std::vector<std::string> sources;  ///< file names of the traces
  std::vector<double> t1;            ///< cleaned, us
  std::vector<double> t1_raw;
  std::vector<double> launch_kernel_us;  ///< cudaLaunchKernel durations (T4)
  std::vector<double> memcpy_async_us;   ///< cudaMemcpyAsync durations
  std::map<std::string, OpOverheadSamples> ops;
  std::vector<double> default_t2;  ///< pooled over ops with launches
  std::vector<double> default_t3;
  std::vector<double> default_t5;
  std::vector<double> default_body;  ///< pooled over ops without launches
};

/// The seed's profiler overhead per traced CPU event (analysis/utils.py CPU_EVENT_OVERHEAD),
/// taken off the samples so that they describe the run without the profiler.
inline constexpr double kSeedCpuEventOverheadUs = 2.0;
/// T1 samples only gaps shorter than this (analysis/trace_utils.py get_overheads).
inline constexpr double kSeedT1MaxGapUs = 200.0;

/// `cpu_event_overhead_us` is taken off per traced sub-event (and off every T1 gap): the seed's
/// 2 us describes the untraced run; 0 keeps the profiler's cost, to predict the traced run
/// itself (what `upsim validate traces` compares with).
ExtractedHostOverheads extract_host_overheads(
    const std::vector<const KinetoTrace*>& traces,
    double cpu_event_overhead_us = kSeedCpuEventOverheadUs);

/// A label of the extraction's event tree (user_annotation, or a cpu_op named like a module
/// marker: "##", "__", "module::", "DLRM ", "DistributedDataParallel"): not an op; ops under it
/// are top-level.
bool is_host_overhead_label(KinetoCategory category, std::string_view name);
/// A runtime call that the extraction counts as a launch (cudaLaunchKernel, cudaMemcpyAsync,
/// cudaStreamSynchronize): the boundaries of T2, T5 and T3.
bool is_host_overhead_launch(KinetoCategory category, std::string_view name);

/// Means of the cleaned samples: the parameters of the host-overhead CPU model, what the
/// calibration file holds (before its rounding to 3 decimals). An op's value without samples is
/// absent; a global value without samples is 0.
HostOverheads host_overheads_of(const ExtractedHostOverheads& overheads);

/// How T4 is summarised. kMean: the mean of every cudaLaunchKernel duration (the definition
/// of scripts/extract_host_overheads.py and of configs/host/v100_pytorch_kineto.yaml).
/// kCleanedMean: the mean after Tukey's rule, as for T1-T3 and T5: for GPU-bound runs, where
/// a launch blocks while the launch queue is full and a few blocked calls (up to milliseconds)
/// would dominate the mean of a call that otherwise takes microseconds.
enum class LaunchStatistic : uint8_t { kMean, kCleanedMean };

/// The calibration file (YAML, values in microseconds with units, sample counts in comments).
std::string format_host_overheads_yaml(const ExtractedHostOverheads& overheads,
                                       LaunchStatistic t4 = LaunchStatistic::kMean);

}  // namespace upsim
