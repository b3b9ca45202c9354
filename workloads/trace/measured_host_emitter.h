// TraceHost::kMeasured emission of one rank's host threads (trace_graph.h): each thread's cut
// points (rank_dependencies.h) become its calls, waits, marks and hand-offs, and the host time
// between them keeps its measured duration; GPU work whose launch is not in the trace is
// launched by a thread of its own.
#pragma once

#include <cstdint>

#include "workloads/trace/host_emission.h"
#include "workloads/trace/rank_dependencies.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

/// Emits host threads on the measured timeline.
class MeasuredHostEmitter : public HostEmission {
 public:
  using HostEmission::HostEmission;

  /// Thread `ti` of RankTimeline::threads on the measured timeline, from the rank's time zero.
  void emit_thread(uint32_t ti, TraceRankSummary& s);

  /// GPU work whose launch is not in the trace: launched at its measured start by a thread of
  /// zero-time launches.
  void emit_orphans(uint16_t thread, TraceRankSummary& s);

 protected:
  /// Point `p` of thread `t` on the measured timeline: the host time since the cursor keeps its
  /// measured duration.
  void emit_measured(Cursor& c, const ThreadData& t, const Point& p, TraceRankSummary& s);
};

}  // namespace upsim::trace_build
