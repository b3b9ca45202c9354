#include "workloads/trace/trace_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "sim/formats/json_reader.h"
#include "sim/formats/parse_error.h"
#include "sim/formats/text.h"
#include "workloads/trace/cross_rank_collectives.h"
#include "workloads/trace/kineto_names.h"
#include "workloads/trace/rank_dependencies.h"
#include "workloads/trace/rank_kernel_descs.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_host_overheads.h"
#include "workloads/trace/trace_kernel_desc.h"

namespace upsim {

namespace {

using namespace trace_build;

/// Builds one rank: emit() adds the tasks of its recovered timeline and dependencies.
class RankBuilder {
 public:
  RankBuilder(const RankTrace& trace, const RankTimeline& timeline, const RankDependencies& deps,
              const TraceGraphOptions& options)
      : kineto_(trace.kineto),
        events_(trace.kineto.events),
        options_(options),
        timeline_(timeline),
        deps_(deps),
        kernels_(trace, timeline) {}

  /// Adds the rank to the graph, running on GPU `gpu` (kNoDevice: its rank id).
  /// `collective_of[i]` is the group of nccl()[i], `collective_ps[i]` its measured duration and
  /// `collective_alone[i]` whether its group has no other member (model mode keeps it
  /// measured); `origin_ps` is time zero on this rank's clock.
  TraceRankSummary emit(TaskGraph& g, const std::vector<CollectiveId>& collective_of,
                        const std::vector<int64_t>& collective_ps,
                        const std::vector<uint8_t>& collective_alone, int64_t origin_ps,
                        uint32_t gpu) {
    TraceRankSummary s;
    s.file = kineto_.file;
    s.trace_rank = kineto_.distributed.rank;
    s.device = kineto_.devices.empty() ? "GPU" : kineto_.devices.front().name;
    for (const KinetoDevice& d : kineto_.devices) {
      if (!timeline_.gpu_events.empty() && d.id == events_[timeline_.gpu_events.front()].device)
        s.device = d.name;
    }
    RankInfo info;
    info.name = "rank " + std::to_string(g.rank_count()) + " (" + file_name(kineto_.file) + ")";
    const bool orphan_thread = !timeline_.orphans.empty();
    info.cpu_threads = static_cast<uint16_t>(timeline_.threads.size() + (orphan_thread ? 1 : 0));
    const bool many_devices =
        !timeline_.stream_index.empty() &&
        timeline_.stream_index.begin()->first.first != timeline_.stream_index.rbegin()->first.first;
    for (const auto& entry : timeline_.stream_index) {
      const auto& [device, stream] = entry.first;
      info.stream_names.push_back(
          "stream " + std::to_string(stream) +
          (many_devices ? " (device " + std::to_string(device) + ")" : std::string()));
    }
    info.device = gpu;
    rank_ = g.add_rank(info);
    s.rank = rank_;
    s.cpu_threads = info.cpu_threads;
    s.streams = static_cast<uint16_t>(info.stream_names.size());
    graph_ = &g;
    origin_ = origin_ps;

    // GPU tasks first: launches name them.
    gpu_task_.assign(events_.size(), kNoTask);
    std::unordered_map<uint32_t, size_t> nccl_pos;
    for (size_t i = 0; i < timeline_.nccl.size(); ++i)
      nccl_pos.emplace(timeline_.nccl[i].gpu, i);
    for (uint32_t gi : timeline_.gpu_events) {
      const KinetoEvent& e = events_[gi];
      const uint16_t stream = timeline_.stream_of[gi];
      const std::string_view op = op_name_of_launch(timeline_.launcher[gi]);
      TaskId t = kNoTask;
      const bool model = options_.mode == TraceMode::kModel;
      if (const auto it = nccl_pos.find(gi); it != nccl_pos.end()) {
        t = g.add_collective(rank_, stream, collective_of[it->second],
                             timeline_.nccl[it->second].op_name);
        // Model mode keeps a collective measured when nobody else is known to take part.
        const bool keep = model && collective_alone[it->second] != 0;
        if (!model || keep) g.set_fixed_duration(t, Duration::from_ps(collective_ps[it->second]));
        if (keep) ++s.collectives_kept_measured;
        ++s.collectives;
        gpu_task_[gi] = t;
        continue;
      }
      bool measured = !model;
      if (e.category == KinetoCategory::kGpuMemcpy) {
        TransferDesc td;
        td.rank = rank_;
        td.bytes = std::max<int64_t>(0, e.bytes);
        const std::string_view n = kineto_.name_of(e);
        td.kind = n.find("HtoD") != std::string_view::npos   ? TransferKind::kHostToDevice
                  : n.find("DtoH") != std::string_view::npos ? TransferKind::kDeviceToHost
                                                             : TransferKind::kDeviceToDevice;
        t = g.add_memcpy(rank_, stream, n, op, td);
        ++s.copies;
      } else if (e.category == KinetoCategory::kGpuMemset) {
        KernelDesc kd;
        kd.cls = KernelClass::kMemoryBound;
        kd.bytes_written = static_cast<double>(std::max<int64_t>(0, e.bytes));
        t = g.add_kernel(rank_, stream, kineto_.name_of(e), op, kd);
        ++s.memsets;
      } else {
        std::optional<KernelDesc> kd;
        KeptReason why = KeptReason::kShapes;
        if (model) kd = kernels_.kernel_desc(gi, why);
        if (!kd) {
          kd = KernelDesc{};
          measured = true;
          if (model) ++s.kernels_kept_measured;
          if (why == KeptReason::kCompiled) ++s.kernels_compiled_kept_measured;
          if (why == KeptReason::kNonAten) ++s.kernels_non_aten_kept_measured;
        }
        t = g.add_kernel(rank_, stream, kineto_.name_of(e), op, *kd);
        ++s.kernels;
      }
      if (measured) g.set_fixed_duration(t, Duration::from_ps(e.dur_ps));
      gpu_task_[gi] = t;
    }
    // Event records after the producers of stream waits, then the waits.
    record_task_.clear();
    wait_task_.clear();
    for (const StreamWaitInfo& w : deps_.waits) {
      auto it = record_task_.find(w.producer);
      if (it == record_task_.end()) {
        it = record_task_
                 .emplace(w.producer, g.add_event_record(rank_, timeline_.stream_of[w.producer]))
                 .first;
      }
      wait_task_.push_back(g.add_stream_wait(rank_, w.stream, it->second));
    }
    s.stream_waits = deps_.waits.size();
    s.stream_waits_exact = static_cast<uint64_t>(std::count_if(
        deps_.waits.begin(), deps_.waits.end(), [](const StreamWaitInfo& w) { return w.exact; }));
    s.stream_waits_dropped = deps_.waits_dropped;
    std::vector<int64_t> cuda_stream(timeline_.stream_index.size());
    for (const auto& [key, index] : timeline_.stream_index)
      cuda_stream[index] = key.second;
    for (const StreamWaitInfo& w : deps_.waits) {
      s.stream_wait_edges.push_back(TraceStreamWaitEdge{
          events_[w.call].correlation, events_[w.producer].correlation, cuda_stream[w.stream],
          cuda_stream[timeline_.stream_of[w.producer]], w.exact});
    }

    handoff_tasks_.assign(deps_.handoffs.size(), HandoffTasks{});
    for (uint32_t t = 0; t < timeline_.threads.size(); ++t) {
      if (options_.host == TraceHost::kModelled)
        emit_thread_modelled(t, s);
      else
        emit_thread(t, s);
    }
    if (orphan_thread) emit_orphans(static_cast<uint16_t>(timeline_.threads.size()), s);
    for (const HandoffTasks& h : handoff_tasks_) {
      if (h.wait_task == kNoTask) continue;
      if (h.trigger_task != kNoTask) {
        g.add_dependency(h.trigger_task, h.wait_task);
        ++s.handoffs;
      } else {
        // No task of the other thread ends at the trigger: keep the measured idle time instead.
        g.set_fixed_duration(h.wait_task, Duration::from_ps(h.wait_fallback_ps));
      }
    }
    s.iterations = timeline_.iterations;
    return s;
  }

 private:
  // ---- emission ----------------------------------------------------------------------------

  /// Name of the innermost cpu op around host event `e` (annotation if no op), for display and
  /// CPU cost lookup.
  std::string_view op_name_of(uint32_t e) const {
    uint32_t annotation = kNone;
    for (uint32_t p = e; p != kNone; p = timeline_.parent[p]) {
      const KinetoCategory c = events_[p].category;
      if (c == KinetoCategory::kCpuOp && p != e) return kineto_.name_of(events_[p]);
      if (c == KinetoCategory::kUserAnnotation && annotation == kNone && p != e) annotation = p;
    }
    return annotation != kNone ? kineto_.name_of(events_[annotation]) : std::string_view("host");
  }

  std::string_view op_name_of_launch(uint32_t call) const {
    return call == kNone ? std::string_view("untraced launch") : op_name_of(call);
  }

  /// The innermost host event of thread `t` that is open at `ts` (for naming host gaps).
  std::string_view op_at(const ThreadData& t, int64_t ts) const {
    const auto it = std::upper_bound(t.host.begin(), t.host.end(), ts,
                                     [&](int64_t x, uint32_t i) { return x < events_[i].ts_ps; });
    if (it == t.host.begin()) return "host";
    for (uint32_t p = *(it - 1); p != kNone; p = timeline_.parent[p]) {
      const KinetoEvent& e = events_[p];
      if (e.end_ps() >= ts &&
          (e.category == KinetoCategory::kCpuOp || e.category == KinetoCategory::kUserAnnotation)) {
        return kineto_.name_of(e);
      }
    }
    return "host";
  }

  struct Cursor {
    uint16_t thread = 0;
    int64_t at = 0;  // rank-local ps
    TaskId last = kNoTask;
    uint32_t launch_op = kNone;
    uint32_t launch_index = 0;
  };

  void host_work(Cursor& c, int64_t until, std::string_view name) {
    if (until <= c.at) return;
    const TaskId t = graph_->add_cpu_op(rank_, c.thread, name, HostPhase::kOpBody);
    graph_->set_fixed_duration(t, Duration::from_ps(until - c.at));
    c.at = until;
    c.last = t;
  }

  void fixed(TaskId t, int64_t ps) {
    graph_->set_fixed_duration(t, Duration::from_ps(std::max<int64_t>(0, ps)));
  }

  uint32_t next_launch_index(Cursor& c, uint32_t call) {
    const uint32_t op = timeline_.parent[call];
    if (op != c.launch_op || op == kNone) {
      c.launch_op = op;
      c.launch_index = 0;
    } else {
      ++c.launch_index;
    }
    return c.launch_index;
  }

  /// Launch of every GPU event of `call`; the call's duration goes to the first (`first_ps`).
  void emit_launches(Cursor& c, uint32_t call, int64_t first_ps) {
    const std::string_view api = kineto_.name_of(events_[call]);
    const std::string_view op = op_name_of(call);
    bool first = true;
    for (uint32_t gi : timeline_.launched.at(call)) {
      const TaskId l =
          graph_->add_launch(rank_, c.thread, api, op, next_launch_index(c, call), gpu_task_[gi]);
      fixed(l, first ? first_ps : 0);
      first = false;
      c.last = l;
      emit_record(c, gi, op);
    }
  }

  void emit_record(Cursor& c, uint32_t gi, std::string_view op) {
    const auto r = record_task_.find(gi);
    if (r == record_task_.end()) return;
    const TaskId l =
        graph_->add_launch(rank_, c.thread, "cudaEventRecord (inferred)", op, 0, r->second);
    fixed(l, 0);
    c.last = l;
  }

  void emit_thread(uint32_t ti, TraceRankSummary& s) {
    const ThreadData& t = timeline_.threads[ti];
    const std::vector<Point>& points = deps_.points[ti];
    Cursor c;
    c.thread = static_cast<uint16_t>(ti);
    c.at = origin_;
    for (const Point& p : points)
      emit_measured(c, t, p, s);
  }

  /// Point `p` of thread `t` on the measured timeline: the host time since the cursor keeps its
  /// measured duration.
  void emit_measured(Cursor& c, const ThreadData& t, const Point& p, TraceRankSummary& s) {
    switch (p.kind) {
      case PointKind::kSplit: {
        host_work(c, p.ts, op_at(t, p.ts - 1));
        handoff_tasks_[p.aux].trigger_task = c.last;
        break;
      }
      case PointKind::kResume: {
        const Handoff& h = deps_.handoffs[p.aux];
        host_work(c, h.idle_begin, op_at(t, h.idle_begin - 1));
        if (h.trigger_ts < c.at) break;  // the gap was already spent: no hand-off
        const TaskId w = graph_->add_cpu_op(rank_, c.thread, "wait for thread", HostPhase::kOpBody);
        fixed(w, 0);
        handoff_tasks_[p.aux].wait_task = w;
        handoff_tasks_[p.aux].wait_fallback_ps = h.trigger_ts - c.at;
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
        const TaskId l =
            graph_->add_launch(rank_, c.thread, kineto_.name_of(e), op_name_of(p.event),
                               next_launch_index(c, p.event), wait_task_[p.aux]);
        fixed(l, e.dur_ps);
        c.last = l;
        c.at = std::max(c.at, e.end_ps());
        break;
      }
    }
  }

  /// TraceHost::kModelled: the thread's host work as T1-T5 phases priced by the CpuCostModel
  /// (the contract is TraceHost's); only the calls, waits and marks of the measured timeline
  /// remain, in their measured order. Before the rank's first iteration mark the timeline stays
  /// measured: each thread starts the first iteration at its measured instant, so the ranks keep
  /// their measured skew and the GPU work queued before it.
  void emit_thread_modelled(uint32_t ti, TraceRankSummary& s) {
    const ThreadData& t = timeline_.threads[ti];
    const std::vector<Point>& points = deps_.points[ti];
    Cursor c;
    c.thread = static_cast<uint16_t>(ti);
    c.at = origin_;
    const int64_t modelled_from = events_[timeline_.markers.front().event].ts_ps;
    bool modelled = false;
    int64_t busy_until = modelled_from;  // measured end of the thread's host work so far
    uint32_t previous_op = kNone;        // the last top-level op that started
    const auto long_gap = Duration::from_us_f(kSeedT1MaxGapUs).ps();
    uint32_t op = kNone;    // the open top-level op
    uint32_t launches = 0;  // its launch calls so far
    auto close_op = [&] {
      if (op != kNone && deps_.op_launches.count(op)) {
        c.last =
            graph_->add_cpu_op(rank_, c.thread, kineto_.name_of(events_[op]), HostPhase::kOpEnd);
      }
      op = kNone;
    };
    // A point outside the open op closes it: a call by nesting, an instant by time.
    auto reach = [&](const Point& p) {
      if (op == kNone) return;
      if (p.event != kNone && p.kind != PointKind::kMark ? deps_.top_op[p.event] != op
                                                         : p.ts >= events_[op].end_ps()) {
        close_op();
      }
    };
    auto op_name = [&](uint32_t call) {
      return op != kNone ? kineto_.name_of(events_[op]) : op_name_of(call);
    };
    // The launches of `call`: the first priced (T4, + T5 after the op's first launch) when the
    // extraction counts the call as a launch, the rest of its GPU work at no host cost.
    auto launch = [&](uint32_t call) {
      const bool priced = counts_as_launch(kineto_, call);
      const uint32_t index = priced && op != kNone ? launches++ : 0;
      bool first = true;
      for (uint32_t gi : timeline_.launched.at(call)) {
        const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(events_[call]),
                                            op_name(call), index, gpu_task_[gi]);
        if (!priced || !first) fixed(l, 0);
        first = false;
        c.last = l;
        emit_record(c, gi, op_name(call));
      }
    };
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
      reach(p);
      if (p.kind == PointKind::kOpStart || p.kind == PointKind::kLaunch ||
          p.kind == PointKind::kBlockingCopy || p.kind == PointKind::kSync ||
          p.kind == PointKind::kStreamWait) {
        // Gaps T1 does not describe keep their measured duration: idle longer than T1's range
        // and not explained by a hand-off, and the gap between ops of different parents (module
        // boundaries: T1 samples only gaps between ops of one parent).
        const bool boundary = p.kind == PointKind::kOpStart && previous_op != kNone &&
                              timeline_.parent[p.event] != timeline_.parent[previous_op];
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
      switch (p.kind) {
        case PointKind::kSplit:
          handoff_tasks_[p.aux].trigger_task = c.last;
          break;
        case PointKind::kResume: {
          const Handoff& h = deps_.handoffs[p.aux];
          const TaskId w =
              graph_->add_cpu_op(rank_, c.thread, "wait for thread", HostPhase::kOpBody);
          fixed(w, 0);
          handoff_tasks_[p.aux].wait_task = w;
          handoff_tasks_[p.aux].wait_fallback_ps = h.trigger_ts - h.idle_begin;
          c.last = w;
          break;
        }
        case PointKind::kMark:
          c.last = graph_->add_iteration_mark(rank_, c.thread, p.aux);
          break;
        case PointKind::kOpStart:
          close_op();
          op = p.event;
          previous_op = p.event;
          launches = 0;
          c.last = graph_->add_cpu_op(
              rank_, c.thread, kineto_.name_of(events_[op]),
              deps_.op_launches.count(op) ? HostPhase::kOpBegin : HostPhase::kOpBody);
          break;
        case PointKind::kLaunch:
          launch(p.event);
          break;
        case PointKind::kBlockingCopy: {
          launch(p.event);
          c.last = graph_->add_host_sync(
              rank_, c.thread, timeline_.stream_of[timeline_.launched.at(p.event).front()],
              op_name(p.event));
          ++s.host_syncs;
          ++s.blocking_copies;
          break;
        }
        case PointKind::kSync: {
          if (op != kNone && counts_as_launch(kineto_, p.event)) ++launches;
          c.last = graph_->add_host_sync(rank_, c.thread, deps_.syncs.at(p.event).target,
                                         op_name(p.event));
          ++s.host_syncs;
          break;
        }
        case PointKind::kStreamWait: {
          const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(events_[p.event]),
                                              op_name(p.event), 0, wait_task_[p.aux]);
          fixed(l, 0);
          c.last = l;
          break;
        }
      }
    }
    close_op();
  }

  /// GPU work whose launch is not in the trace: launched at its measured start by a thread of
  /// zero-time launches.
  void emit_orphans(uint16_t thread, TraceRankSummary& s) {
    Cursor c;
    c.thread = thread;
    c.at = origin_;
    std::vector<uint32_t> order = timeline_.orphans;
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return events_[a].ts_ps < events_[b].ts_ps; });
    for (uint32_t gi : order) {
      host_work(c, events_[gi].ts_ps, "untraced host work");
      const TaskId l = graph_->add_launch(rank_, c.thread, "untraced launch", "untraced launch", 0,
                                          gpu_task_[gi]);
      fixed(l, 0);
      c.last = l;
      emit_record(c, gi, "untraced launch");
      ++s.untraced_launches;
    }
  }

  /// The tasks emission attaches to hand-off `i` of RankDependencies::handoffs.
  struct HandoffTasks {
    TaskId trigger_task = kNoTask;
    TaskId wait_task = kNoTask;
    int64_t wait_fallback_ps = 0;  // the measured wait, used when no trigger task exists
  };

  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const TraceGraphOptions& options_;
  const RankTimeline& timeline_;
  const RankDependencies& deps_;
  RankKernelDescs kernels_;
  TaskGraph* graph_ = nullptr;
  RankId rank_ = 0;
  int64_t origin_ = 0;
  std::vector<TaskId> gpu_task_;
  std::unordered_map<uint32_t, TaskId> record_task_;
  std::vector<TaskId> wait_task_;            // per RankDependencies::waits: its StreamWait
  std::vector<HandoffTasks> handoff_tasks_;  // per RankDependencies::handoffs
};

/// The traces on one clock: rank r's local ps + offset[r] = ps since the earliest base, and the
/// origin (the earliest activity of any rank on that clock). Traces that do not overlap in time
/// are not of one run: an error naming both.
struct ClockAlignment {
  std::vector<int64_t> offset;
  int64_t origin = INT64_MAX;
};

ClockAlignment align_clocks(const std::vector<RankTrace>& traces,
                            const std::vector<RankTimeline>& timelines) {
  ClockAlignment out;
  std::vector<int64_t>& offset = out.offset;
  int64_t base = INT64_MAX;
  for (const RankTrace& t : traces)
    base = std::min(base, t.kineto.base_us);
  offset.assign(traces.size(), 0);
  for (size_t r = 0; r < traces.size(); ++r)
    offset[r] = (traces[r].kineto.base_us - base) * 1'000'000;
  if (traces.size() > 1) {
    // The ranks of one job overlap in time; traces of different runs (or machines with
    // unrelated clocks) do not.
    int64_t latest_first = INT64_MIN;
    int64_t earliest_last = INT64_MAX;
    size_t late = 0;
    size_t early = 0;
    for (size_t r = 0; r < traces.size(); ++r) {
      if (timelines[r].first_ps + offset[r] > latest_first) {
        latest_first = timelines[r].first_ps + offset[r];
        late = r;
      }
      if (timelines[r].last_ps + offset[r] < earliest_last) {
        earliest_last = timelines[r].last_ps + offset[r];
        early = r;
      }
    }
    if (latest_first > earliest_last) {
      throw ParseError(traces[late].kineto.file,
                       "this trace starts after " + file_name(traces[early].kineto.file) +
                           " ends: the traces are not of the same run (or their clocks differ)");
    }
  }
  for (size_t r = 0; r < traces.size(); ++r)
    out.origin = std::min(out.origin, timelines[r].first_ps + offset[r]);
  return out;
}

}  // namespace

TraceGraphInfo build_replay_graph(const std::vector<RankTrace>& traces, TaskGraph& graph,
                                  const TraceGraphOptions& options) {
  if (traces.empty()) throw ParseError("(no file)", "no trace to build a graph from");
  std::vector<RankTimeline> timelines;
  timelines.reserve(traces.size());
  for (const RankTrace& t : traces)
    timelines.push_back(TimelineRecovery(t, options).recover());
  const ClockAlignment clock = align_clocks(traces, timelines);
  const std::vector<int64_t>& offset = clock.offset;
  const int64_t origin = clock.origin;

  // The GPU each trace runs on: its global rank for one trace of a larger job (model mode), else
  // its position.
  const bool partial_job =
      options.mode == TraceMode::kModel && timelines.size() == 1 && options.job_world_size > 1;
  std::vector<RankId> device(timelines.size());
  for (size_t r = 0; r < timelines.size(); ++r)
    device[r] = static_cast<RankId>(r);
  if (partial_job) {
    const int32_t global = traces[0].kineto.distributed.rank;
    if (global < 0 || static_cast<uint32_t>(global) >= options.job_world_size) {
      throw ParseError(traces[0].kineto.file, "distributedInfo.rank " + std::to_string(global) +
                                                  " is not a rank of the job's " +
                                                  std::to_string(options.job_world_size) +
                                                  " (world_size)");
    }
    device[0] = static_cast<RankId>(global);
  }
  const RankCollectives collectives =
      add_cross_rank_collectives(traces, timelines, device, partial_job, options, graph);
  TraceGraphInfo info;
  info.collective_groups = collectives.groups;
  for (size_t r = 0; r < timelines.size(); ++r) {
    const RankDependencies deps = DependencyInference(traces[r], timelines[r], options).infer();
    info.ranks.push_back(RankBuilder(traces[r], timelines[r], deps, options)
                             .emit(graph, collectives.of[r], collectives.ps[r],
                                   collectives.alone[r], origin - offset[r],
                                   partial_job ? device[r] : kNoDevice));
    info.ranks.back().collectives_over_job = collectives.over_job[r];
    info.ranks.back().collectives_world_assumed = collectives.world_assumed[r];
  }
  return info;
}

}  // namespace upsim
