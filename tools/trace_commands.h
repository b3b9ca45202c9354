// `upsim validate traces DIR`: replay a directory of per-rank PyTorch traces with their measured
// durations and compare each rank's predicted iteration time with the measured one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "calibration/host_overhead_cpu_cost.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::cli {

/// The seed's host overheads T1-T5 of the trace set itself (extract_host_overheads over every
/// rank's Kineto trace, means of the cleaned samples, unrounded) as the CpuCostModel of
/// TraceHost::kModelled. Unlike `upsim calibrate host-overheads` (the seed's 2 us per traced
/// event taken off, to describe the run without the profiler), nothing is taken off: the
/// iterations it predicts are the traced ones.
HostOverheadCpuCost trace_host_cost(const std::vector<RankTrace>& traces);

/// Returns the exit code; bad input throws (TraceError names the file) for main to report.
int validate_traces_main(const std::vector<std::string>& args, std::ostream& out);

/// `upsim calibrate host-overheads TRACE... --out FILE`: the seed's T1-T5 host overheads
/// extracted from Kineto traces into a host-overhead file (configs/host/ schema).
int calibrate_host_overheads_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
