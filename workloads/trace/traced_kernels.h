// The GPU kernels of a traced rank as kernel measurements: each kernel's measured duration
// (Kineto `dur`, the kernel's own GPU time) beside what model mode says it computes
// (RankKernelDescs, trace_kernel_desc.h), for `upsim convert traces`, which writes them as a
// measurement table to calibrate the kernel model on (calibration/fitting/kernel_measurements.h).
//
// Contract: every GPU kernel of the rank in GPU start order (not copies or memsets); NCCL
// kernels are marked `collective` and carry no description; a kernel model mode keeps measured
// (embedding lookups, convolutions, ops without shapes, torch.compile regions) has no
// description. Needs no iteration marker. Pure: the trace is only read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/cost_models.h"
#include "sim/time.h"
#include "workloads/trace/trace_graph.h"

namespace upsim {

struct TracedKernel {
  std::string name;                ///< the kernel's name in the trace
  std::optional<KernelDesc> desc;  ///< model mode's description; nullopt: none
  Duration duration;               ///< measured
  bool collective = false;         ///< an NCCL kernel
};

std::vector<TracedKernel> traced_kernels(const RankTrace& trace);

}  // namespace upsim
