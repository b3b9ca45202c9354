#include "workloads/trace/traced_kernels.h"

#include <unordered_set>

#include "workloads/trace/rank_kernel_descs.h"
#include "workloads/trace/rank_timeline.h"

namespace upsim {

std::vector<TracedKernel> traced_kernels(const RankTrace& trace) {
  const TraceGraphOptions options;
  const trace_build::RankTimeline timeline =
      trace_build::TimelineRecovery(trace, options).recover_kernels_only();
  std::unordered_set<uint32_t> nccl;
  for (const trace_build::NcclKernel& k : timeline.nccl)
    nccl.insert(k.gpu);
  trace_build::RankKernelDescs descs(trace, timeline);
  std::vector<TracedKernel> out;
  for (const uint32_t gi : timeline.gpu_events) {
    const KinetoEvent& e = trace.kineto.events[gi];
    if (e.category != KinetoCategory::kKernel) continue;
    TracedKernel k;
    k.name = std::string(trace.kineto.name_of(e));
    k.duration = Duration::from_ps(e.dur_ps);
    k.collective = nccl.contains(gi);
    if (!k.collective) {
      trace_build::KeptReason why = trace_build::KeptReason::kShapes;
      k.desc = descs.kernel_desc(gi, why);
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace upsim
