#include "workloads/trace/modelled_host_emitter.h"

#include <algorithm>
#include <vector>

#include "workloads/trace/trace_host_overheads.h"

namespace upsim::trace_build {

void ModelledHostEmitter::emit_thread_modelled(uint32_t ti, TraceRankSummary& s) {
  const ThreadData& t = timeline_.threads[ti];
  const std::vector<Point>& points = deps_.points[ti];
  Cursor c = start_of_thread(ti);
  const int64_t modelled_from = events_[timeline_.markers.front().event].ts_ps;
  bool modelled = false;
  thread_ = ModelledThread{};
  thread_.busy_until = modelled_from;
  for (const Point& p : points) {
    if (!modelled) {
      const bool first_mark =
          p.kind == PointKind::kMark && p.event == timeline_.markers.front().event;
      if (p.ts < modelled_from || first_mark) {
        emit_measured(c, t, p, s);
        continue;
      }
      host_work(c, modelled_from, op_at(t, modelled_from));
      modelled = true;
    }
    reach(c, p);
    keep_undescribed_gap(c, t, p);
    emit_modelled(c, p, s);
  }
  close_op(c);
}

void ModelledHostEmitter::close_op(Cursor& c) {
  const uint32_t op = thread_.op;
  if (op != kNone && deps_.op_launches.count(op)) {
    c.last = graph_->add_cpu_op(rank_, c.thread, kineto_.name_of(events_[op]), HostPhase::kOpEnd);
  }
  thread_.op = kNone;
}

void ModelledHostEmitter::reach(Cursor& c, const Point& p) {
  const uint32_t op = thread_.op;
  if (op == kNone) return;
  if (p.event != kNone && p.kind != PointKind::kMark ? deps_.top_op[p.event] != op
                                                     : p.ts >= events_[op].end_ps()) {
    close_op(c);
  }
}

std::string_view ModelledHostEmitter::op_name(uint32_t call) const {
  const uint32_t op = thread_.op;
  return op != kNone ? kineto_.name_of(events_[op]) : op_name_of(call);
}

void ModelledHostEmitter::launch(Cursor& c, uint32_t call) {
  // A graph replay is priced by the CPU model as one graph launch (HostPhase::kGraphLaunch).
  if (emit_graph_launch(c, call) != kNoTask) return;
  const bool priced = counts_as_launch(kineto_, call);
  const uint32_t index = priced && thread_.op != kNone ? thread_.launches++ : 0;
  bool first = true;
  for (uint32_t gi : timeline_.launched.at(call)) {
    const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(events_[call]),
                                        op_name(call), index, tasks_.gpu_task[gi]);
    if (!priced || !first) fixed(l, 0);
    first = false;
    c.last = l;
    emit_record(c, gi, op_name(call));
  }
}

void ModelledHostEmitter::keep_undescribed_gap(Cursor& c, const ThreadData& t, const Point& p) {
  const auto long_gap = Duration::from_us_f(kSeedT1MaxGapUs).ps();
  int64_t& busy_until = thread_.busy_until;
  if (p.kind == PointKind::kOpStart || p.kind == PointKind::kLaunch ||
      p.kind == PointKind::kBlockingCopy || p.kind == PointKind::kSync ||
      p.kind == PointKind::kStreamWait) {
    // Gaps T1 does not describe keep their measured duration: idle longer than T1's range
    // and not explained by a hand-off, and the gap between ops of different parents (module
    // boundaries: T1 samples only gaps between ops of one parent).
    const bool boundary = p.kind == PointKind::kOpStart && thread_.previous_op != kNone &&
                          timeline_.parent[p.event] != timeline_.parent[thread_.previous_op];
    if (p.ts - busy_until >= long_gap || (boundary && p.ts > busy_until)) {
      const TaskId w =
          graph_->add_cpu_op(rank_, c.thread, op_at(t, busy_until), HostPhase::kOpBody);
      fixed(w, p.ts - busy_until);
      c.last = w;
    }
    busy_until = std::max(busy_until, events_[p.event].end_ps());
  } else if (p.kind == PointKind::kResume || p.kind == PointKind::kMark) {
    busy_until = std::max(busy_until, p.ts);
  }
}

void ModelledHostEmitter::emit_modelled(Cursor& c, const Point& p, TraceRankSummary& s) {
  switch (p.kind) {
    case PointKind::kSplit:
      tasks_.handoff_tasks[p.aux].trigger_task = c.last;
      break;
    case PointKind::kResume: {
      const Handoff& h = deps_.handoffs[p.aux];
      const TaskId w = graph_->add_cpu_op(rank_, c.thread, "wait for thread", HostPhase::kOpBody);
      fixed(w, 0);
      tasks_.handoff_tasks[p.aux].wait_task = w;
      tasks_.handoff_tasks[p.aux].wait_fallback_ps = h.trigger_ts - h.idle_begin;
      c.last = w;
      break;
    }
    case PointKind::kMark:
      c.last = graph_->add_iteration_mark(rank_, c.thread, p.aux);
      break;
    case PointKind::kOpStart:
      close_op(c);
      thread_.op = p.event;
      thread_.previous_op = p.event;
      thread_.launches = 0;
      c.last = graph_->add_cpu_op(
          rank_, c.thread, kineto_.name_of(events_[thread_.op]),
          deps_.op_launches.count(thread_.op) ? HostPhase::kOpBegin : HostPhase::kOpBody);
      break;
    case PointKind::kLaunch:
      launch(c, p.event);
      break;
    case PointKind::kBlockingCopy: {
      launch(c, p.event);
      c.last = graph_->add_host_sync(rank_, c.thread,
                                     timeline_.stream_of[timeline_.launched.at(p.event).front()],
                                     op_name(p.event));
      ++s.host_syncs;
      ++s.blocking_copies;
      break;
    }
    case PointKind::kSync: {
      if (thread_.op != kNone && counts_as_launch(kineto_, p.event)) ++thread_.launches;
      c.last =
          graph_->add_host_sync(rank_, c.thread, deps_.syncs.at(p.event).target, op_name(p.event));
      ++s.host_syncs;
      break;
    }
    case PointKind::kStreamWait: {
      const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(events_[p.event]),
                                          op_name(p.event), 0, tasks_.wait_task[p.aux]);
      fixed(l, 0);
      c.last = l;
      break;
    }
  }
}

}  // namespace upsim::trace_build
