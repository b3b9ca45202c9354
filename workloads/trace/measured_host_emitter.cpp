#include "workloads/trace/measured_host_emitter.h"

#include <algorithm>
#include <vector>

namespace upsim::trace_build {

void MeasuredHostEmitter::emit_thread(uint32_t ti, TraceRankSummary& s) {
  const ThreadData& t = timeline_.threads[ti];
  const std::vector<Point>& points = deps_.points[ti];
  Cursor c = start_of_thread(ti);
  for (const Point& p : points)
    emit_measured(c, t, p, s);
}

void MeasuredHostEmitter::emit_measured(Cursor& c, const ThreadData& t, const Point& p,
                                        TraceRankSummary& s) {
  switch (p.kind) {
    case PointKind::kSplit: {
      host_work(c, p.ts, op_at(t, p.ts - 1));
      tasks_.handoff_tasks[p.aux].trigger_task = c.last;
      break;
    }
    case PointKind::kResume: {
      const Handoff& h = deps_.handoffs[p.aux];
      host_work(c, h.idle_begin, op_at(t, h.idle_begin - 1));
      if (h.trigger_ts < c.at) break;  // the gap was already spent: no hand-off
      const TaskId w = graph_->add_cpu_op(rank_, c.thread, "wait for thread", HostPhase::kOpBody);
      fixed(w, 0);
      tasks_.handoff_tasks[p.aux].wait_task = w;
      tasks_.handoff_tasks[p.aux].wait_fallback_ps = h.trigger_ts - c.at;
      c.last = w;
      c.at = h.trigger_ts;
      host_work(c, h.resume_ts, op_at(t, h.resume_ts));
      break;
    }
    case PointKind::kMark: {
      host_work(c, p.ts, op_at(t, p.ts));
      c.last = graph_->add_iteration_mark(rank_, c.thread, p.aux);
      break;
    }
    case PointKind::kOpStart:  // TraceHost::kModelled only
      break;
    case PointKind::kLaunch: {
      const KinetoEvent& e = events_[p.event];
      host_work(c, e.ts_ps, op_at(t, e.ts_ps));
      emit_launches(c, p.event, e.dur_ps);
      c.at = std::max(c.at, e.end_ps());
      break;
    }
    case PointKind::kBlockingCopy: {
      const KinetoEvent& e = events_[p.event];
      host_work(c, e.ts_ps, op_at(t, e.ts_ps));
      const uint32_t gi = timeline_.launched.at(p.event).front();
      const KinetoEvent& g = events_[gi];
      const int64_t launch_ps =
          std::min(timeline_.median_launch_ps, std::max<int64_t>(0, g.ts_ps - e.ts_ps));
      emit_launches(c, p.event, launch_ps);
      const std::string_view op = op_name_of(p.event);
      c.last = graph_->add_host_sync(rank_, c.thread, timeline_.stream_of[gi], op);
      ++s.host_syncs;
      ++s.blocking_copies;
      const int64_t back = e.end_ps() - std::max(g.end_ps(), e.ts_ps + launch_ps);
      if (back > 0) {
        c.last = graph_->add_cpu_op(rank_, c.thread, op, HostPhase::kOpBody);
        fixed(c.last, back);
      }
      c.at = std::max(c.at, e.end_ps());
      break;
    }
    case PointKind::kSync: {
      const KinetoEvent& e = events_[p.event];
      host_work(c, e.ts_ps, op_at(t, e.ts_ps));
      const SyncInfo& si = deps_.syncs.at(p.event);
      const std::string_view op = op_name_of(p.event);
      c.last = graph_->add_host_sync(rank_, c.thread, si.target, op);
      ++s.host_syncs;
      const int64_t back =
          std::clamp<int64_t>(e.end_ps() - std::max(e.ts_ps, si.done_ts), 0, e.dur_ps);
      if (back > 0) {
        c.last = graph_->add_cpu_op(rank_, c.thread, kineto_.name_of(e), HostPhase::kOpBody);
        fixed(c.last, back);
      }
      c.at = std::max(c.at, e.end_ps());
      break;
    }
    case PointKind::kStreamWait: {
      const KinetoEvent& e = events_[p.event];
      host_work(c, e.ts_ps, op_at(t, e.ts_ps));
      const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(e), op_name_of(p.event),
                                          next_launch_index(c, p.event), tasks_.wait_task[p.aux]);
      fixed(l, e.dur_ps);
      c.last = l;
      c.at = std::max(c.at, e.end_ps());
      break;
    }
  }
}

void MeasuredHostEmitter::emit_orphans(uint16_t thread, TraceRankSummary& s) {
  Cursor c = start_of_thread(thread);
  std::vector<uint32_t> order = timeline_.orphans;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return events_[a].ts_ps < events_[b].ts_ps; });
  for (uint32_t gi : order) {
    host_work(c, events_[gi].ts_ps, "untraced host work");
    const TaskId l = graph_->add_launch(rank_, c.thread, "untraced launch", "untraced launch", 0,
                                        tasks_.gpu_task[gi]);
    fixed(l, 0);
    c.last = l;
    emit_record(c, gi, "untraced launch");
    ++s.untraced_launches;
  }
}

}  // namespace upsim::trace_build
