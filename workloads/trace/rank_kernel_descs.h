// Model mode (TraceMode::kModel), one rank of a Kineto trace: what each GPU kernel computes
// (op_kernel_desc, trace_kernel_desc.h) from the innermost cpu op that launched it and that op's
// input shapes (Kineto "Input Dims", else the linked execution-trace node), and why a kernel has
// no description. The rank builder (rank_builder.h) prices the kernels it describes.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

#include "sim/cost_models.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

/// Why model mode keeps a kernel measured, beyond its op having no shapes or kernel model.
enum class KeptReason : uint8_t { kShapes, kCompiled, kNonAten };

/// The kernel descriptions of one rank. It remembers the ops whose GEMM kernel was assigned: of
/// the kernels asked for, the first GEMM-named one of an op is that op's GEMM.
class RankKernelDescs {
 public:
  RankKernelDescs(const RankTrace& trace, const RankTimeline& timeline)
      : trace_(trace), kineto_(trace.kineto), events_(trace.kineto.events), timeline_(timeline) {}

  /// What kernel `gi` computes (op_kernel_desc), from the innermost cpu op that launched it;
  /// `reason` says why not when that op's shapes are not the kernel's.
  std::optional<KernelDesc> kernel_desc(uint32_t gi, KeptReason& reason);

 private:
  /// Shapes and element types of the inputs of host op `op`: Kineto "Input Dims" (record_shapes),
  /// else the linked execution-trace node.
  KinetoOpInputs op_inputs(uint32_t op) const;

  const RankTrace& trace_;
  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const RankTimeline& timeline_;
  std::unordered_set<uint32_t> gemm_done_;  // ops whose GEMM kernel was assigned
};

}  // namespace upsim::trace_build
