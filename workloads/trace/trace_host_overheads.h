// The seed method's host overheads T1-T5 (seed-method.md section 1.3) extracted from Kineto
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
//  - launches are cudaLaunchKernel, cudaMemcpyAsync and cudaStreamSynchronize under the op;
//    2 us of profiler overhead is taken off per traced sub-event counted before a launch;
//  - T2 = first launch start - op start - 2 n_before; T3 = max(0, op end - last launch end -
//    2 n_after); T5 = the gaps between launches (0 for single-launch ops), or the whole body
//    minus 2 per sub-event for ops without launches (aten::to without sub-events skipped);
//    T1 = gap - 2 between consecutive ops of one thread with the same parent, 2 < gap < 200 us;
//    T4 = the mean measured cudaLaunchKernel duration;
//  - negative samples clamp to 0, then Tukey's rule per (op, T) and for T1; defaults pool every
//    cleaned sample (T5 between launches and the bodies of launch-free ops separately).
#pragma once

#include <map>
#include <string>
#include <vector>

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

ExtractedHostOverheads extract_host_overheads(const std::vector<const KinetoTrace*>& traces);

/// The calibration file (YAML, values in microseconds with units, sample counts in comments).
std::string format_host_overheads_yaml(const ExtractedHostOverheads& overheads);

}  // namespace upsim
