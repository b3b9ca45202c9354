// TraceHost::kModelled emission of one rank's host threads (trace_graph.h): the seed's T1-T5
// phases priced by the run's CpuCostModel in place of the measured host time between the calls;
// before the rank's first iteration mark, the measured timeline (measured_host_emitter.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "workloads/trace/host_emission.h"
#include "workloads/trace/measured_host_emitter.h"
#include "workloads/trace/rank_dependencies.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

/// Emits host threads as T1-T5 phases.
class ModelledHostEmitter : public MeasuredHostEmitter {
 public:
  using MeasuredHostEmitter::MeasuredHostEmitter;

  /// TraceHost::kModelled: the thread's host work as T1-T5 phases priced by the CpuCostModel
  /// (the contract is TraceHost's); only the calls, waits and marks of the measured timeline
  /// remain, in their measured order. Before the rank's first iteration mark the timeline stays
  /// measured: each thread starts the first iteration at its measured instant, so the ranks keep
  /// their measured skew and the GPU work queued before it.
  void emit_thread_modelled(uint32_t ti, TraceRankSummary& s);

 private:
  /// Where the modelled part of one thread's emission stands.
  struct ModelledThread {
    int64_t busy_until = 0;        // measured end of the thread's host work so far
    uint32_t previous_op = kNone;  // the last top-level op that started
    uint32_t op = kNone;           // the open top-level op
    uint32_t launches = 0;         // its launch calls so far
  };

  /// Closes the open top-level op: its kOpEnd task (T3) when it launches.
  void close_op(Cursor& c);

  /// A point outside the open op closes it: a call by nesting, an instant by time.
  void reach(Cursor& c, const Point& p);

  /// The op name of the tasks of `call`: the open top-level op's, else op_name_of.
  std::string_view op_name(uint32_t call) const;

  /// The launches of `call`: the first priced (T4, + T5 after the op's first launch) when the
  /// extraction counts the call as a launch, the rest of its GPU work at no host cost.
  void launch(Cursor& c, uint32_t call);

  /// Before point `p`: the host time since the thread's host work last ended, where T1 does not
  /// describe it, as a CpuOp of its measured duration; then the end of the host work so far.
  void keep_undescribed_gap(Cursor& c, const ThreadData& t, const Point& p);

  /// The tasks of point `p` of the modelled part.
  void emit_modelled(Cursor& c, const Point& p, TraceRankSummary& s);

  ModelledThread thread_;
};

}  // namespace upsim::trace_build
