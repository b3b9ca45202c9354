#include "workloads/trace/rank_dependencies.h"

#include <algorithm>

#include "sim/formats/json_reader.h"
#include "workloads/trace/kineto_names.h"
#include "workloads/trace/trace_host_overheads.h"

namespace upsim::trace_build {

RankDependencies DependencyInference::infer() {
  deps_.points.assign(timeline_.threads.size(), {});
  plan_points();
  plan_handoffs();
  if (options_.host == TraceHost::kModelled) plan_ops();
  for (std::vector<Point>& points : deps_.points) {
    std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
      if (a.ts != b.ts) return a.ts < b.ts;
      return a.kind < b.kind;
    });
  }
  return std::move(deps_);
}

uint32_t DependencyInference::last_enqueued_before(uint16_t stream, int64_t t) const {
  const auto& q = timeline_.stream_queue[stream];
  const auto it = std::lower_bound(
      q.begin(), q.end(), t, [&](uint32_t g, int64_t x) { return timeline_.launch_ts[g] < x; });
  if (it == q.begin()) return kNone;
  return *(it - 1);
}

uint32_t DependencyInference::first_enqueued_after(uint16_t stream, int64_t t) const {
  const auto& q = timeline_.stream_queue[stream];
  const auto it = std::upper_bound(
      q.begin(), q.end(), t, [&](int64_t x, uint32_t g) { return x < timeline_.launch_ts[g]; });
  return it == q.end() ? kNone : *it;
}

SyncInfo DependencyInference::infer_sync(const ThreadData& t, uint32_t call) const {
  const KinetoEvent& c = events_[call];
  SyncInfo s;
  if (const auto r = sync_record(call); r && r->stream >= 0) {
    // Recorded by Kineto: "Stream Sync" names the stream, "Event Sync" the event's stream.
    const int64_t stream = r->wait_on_stream >= 0 ? r->wait_on_stream : r->stream;
    if (const auto st = stream_index(r->device, stream)) {
      s.target = *st;
      s.done_ts = std::max(c.ts_ps, waits_released_by(*st, c.ts_ps));
      const uint32_t p = last_enqueued_before(*st, c.ts_ps);
      if (p != kNone) s.done_ts = std::max(s.done_ts, events_[p].end_ps());
      return s;
    }
  }
  if (is_device_sync(kineto_.name_of(c))) {
    s.target = kAllStreams;
    s.done_ts = c.ts_ps;
    for (uint16_t st = 0; st < timeline_.stream_queue.size(); ++st) {
      s.done_ts = std::max(s.done_ts, waits_released_by(st, c.ts_ps));
      const uint32_t p = last_enqueued_before(st, c.ts_ps);
      if (p != kNone) s.done_ts = std::max(s.done_ts, events_[p].end_ps());
    }
    return s;
  }
  int64_t best_end = INT64_MIN;
  for (uint16_t st = 0; st < timeline_.stream_queue.size(); ++st) {
    const uint32_t p = last_enqueued_before(st, c.ts_ps);
    if (p == kNone) continue;
    const int64_t end = events_[p].end_ps();
    if (end > c.ts_ps && end <= c.end_ps() + kClockTolerance.ps() && end > best_end) {
      best_end = end;
      s.target = st;
    }
  }
  if (best_end != INT64_MIN) {
    s.done_ts = best_end;
    return s;
  }
  // Nothing was pending: the call only cost host time. Target the thread's last stream.
  s.done_ts = c.ts_ps;
  s.target = 0;
  const auto it = std::lower_bound(t.launches.begin(), t.launches.end(), c.ts_ps,
                                   [&](uint32_t l, int64_t x) { return events_[l].ts_ps < x; });
  if (it != t.launches.begin())
    s.target = timeline_.stream_of[timeline_.launched.at(*(it - 1)).front()];
  return s;
}

int64_t DependencyInference::waits_released_by(uint16_t stream, int64_t t) const {
  if (stream >= waits_by_stream_.size()) return INT64_MIN;
  // A stream's waits release in the order they were enqueued: the latest one called before
  // `t` releases last.
  const std::vector<uint32_t>& waits = waits_by_stream_[stream];
  for (auto it = waits.rbegin(); it != waits.rend(); ++it) {
    const StreamWaitInfo& w = deps_.waits[*it];
    if (events_[w.call].ts_ps < t) return events_[w.producer].end_ps();
  }
  return INT64_MIN;
}

std::optional<uint16_t> DependencyInference::stream_index(int64_t device, int64_t stream) const {
  const auto it = timeline_.stream_index.find({device, stream});
  if (it == timeline_.stream_index.end()) return std::nullopt;
  return it->second;
}

std::optional<DependencyInference::SyncRecord> DependencyInference::sync_record(
    uint32_t call) const {
  if (events_[call].correlation < 0) return std::nullopt;
  const auto it = timeline_.sync_record.find(events_[call].correlation);
  if (it == timeline_.sync_record.end()) return std::nullopt;
  const KinetoEvent& e = events_[it->second];
  SyncRecord r;
  r.device = e.device;
  r.stream = e.stream;
  const std::string_view args = kineto_.args_of(e);
  if (!args.empty()) {
    JsonCursor cur(args, kineto_.file);
    const JsonValue v = read_json_value(cur);
    if (const JsonValue* w = v.find("wait_on_stream"); w && w->is_number()) {
      r.wait_on_stream = w->integer;
    }
    if (const JsonValue* c = v.find("wait_on_cuda_event_record_corr_id"); c && c->is_number()) {
      r.record_correlation = c->integer;
    }
  }
  return r;
}

std::optional<StreamWaitInfo> DependencyInference::exact_stream_wait(uint32_t call,
                                                                     const SyncRecord& r) const {
  const auto waiting = stream_index(r.device, r.stream);
  const auto producer_stream = stream_index(r.device, r.wait_on_stream);
  if (!waiting || !producer_stream || *waiting == *producer_stream) return std::nullopt;
  int64_t recorded_at = events_[call].ts_ps;
  if (const auto it = timeline_.call_of_correlation.find(r.record_correlation);
      it != timeline_.call_of_correlation.end()) {
    recorded_at = events_[it->second].ts_ps;
  }
  const uint32_t producer = last_enqueued_before(*producer_stream, recorded_at);
  if (producer == kNone) return std::nullopt;
  StreamWaitInfo w;
  w.call = call;
  w.producer = producer;
  w.stream = *waiting;
  w.exact = true;
  return w;
}

std::optional<StreamWaitInfo> DependencyInference::infer_stream_wait(const ThreadData& t,
                                                                     uint32_t call) const {
  const KinetoEvent& c = events_[call];
  if (const auto r = sync_record(call); r && r->wait_on_stream >= 0) {
    return exact_stream_wait(call, *r);
  }
  const auto next = std::upper_bound(t.launches.begin(), t.launches.end(), c.ts_ps,
                                     [&](int64_t x, uint32_t l) { return x < events_[l].ts_ps; });
  if (next == t.launches.end()) return std::nullopt;
  const uint16_t wait_stream = timeline_.stream_of[timeline_.launched.at(*next).front()];
  const uint32_t waiter = first_enqueued_after(wait_stream, c.ts_ps);
  if (waiter == kNone) return std::nullopt;
  // Candidates: per other stream, the last task enqueued before the call that ended before
  // the waiter started (a later-ending one contradicts the measured start).
  const int64_t start = events_[waiter].ts_ps;
  std::vector<uint32_t> candidates;
  for (uint16_t st = 0; st < timeline_.stream_queue.size(); ++st) {
    if (st == wait_stream) continue;
    const auto& q = timeline_.stream_queue[st];
    auto it = std::lower_bound(q.begin(), q.end(), c.ts_ps,
                               [&](uint32_t g, int64_t x) { return timeline_.launch_ts[g] < x; });
    for (int look = 0; it != q.begin() && look < kMaxWaitLookBack; ++look) {
      --it;
      if (events_[*it].end_ps() <= start + kClockTolerance.ps()) {
        candidates.push_back(*it);
        break;
      }
    }
  }
  if (candidates.empty()) return std::nullopt;
  // The waiter started later than its launch and its stream predecessor allowed: the wait held
  // it, and the event is the candidate that ended last (just before the start). Otherwise the
  // timeline cannot tell; the event was recorded after the work the thread enqueued last.
  int64_t free_at =
      timeline_.launcher[waiter] != kNone ? events_[timeline_.launcher[waiter]].end_ps() : start;
  const auto& wq = timeline_.stream_queue[wait_stream];
  const auto pos = std::upper_bound(wq.begin(), wq.end(), c.ts_ps, [&](int64_t x, uint32_t g) {
    return x < timeline_.launch_ts[g];
  });  // the waiter (first_enqueued_after)
  if (pos != wq.begin()) free_at = std::max(free_at, events_[*(pos - 1)].end_ps());
  uint32_t best = kNone;
  if (start > free_at + kWaitBindSlack.ps()) {
    for (uint32_t p : candidates) {
      if (best == kNone || events_[p].end_ps() > events_[best].end_ps()) best = p;
    }
    if (events_[best].end_ps() < start - kWaitBindSlack.ps()) best = kNone;
  }
  if (best == kNone) {
    for (uint32_t p : candidates) {
      if (best == kNone || timeline_.launch_ts[p] > timeline_.launch_ts[best]) best = p;
    }
  }
  if (best == kNone) return std::nullopt;
  StreamWaitInfo w;
  w.call = call;
  w.producer = best;
  w.stream = wait_stream;
  return w;
}

void DependencyInference::plan_points() {
  for (uint32_t ti = 0; ti < timeline_.threads.size(); ++ti) {
    const ThreadData& t = timeline_.threads[ti];
    std::vector<Point>& points = deps_.points[ti];
    for (uint32_t i : t.host) {
      const KinetoEvent& e = events_[i];
      if (e.category != KinetoCategory::kCudaRuntime && e.category != KinetoCategory::kCudaDriver)
        continue;
      const std::string_view name = kineto_.name_of(e);
      if (const auto it = timeline_.launched.find(i); it != timeline_.launched.end()) {
        const KinetoEvent& g = events_[it->second.front()];
        const bool copy = g.category == KinetoCategory::kGpuMemcpy;
        const std::string_view gn = kineto_.name_of(g);
        const bool sync_api = name.find("Memcpy") != std::string_view::npos &&
                              name.find("Async") == std::string_view::npos;
        const bool pageable = gn.find("Pageable") != std::string_view::npos;
        const bool blocking = copy && (sync_api || (pageable && e.end_ps() >= g.ts_ps));
        points.push_back(
            Point{e.ts_ps, blocking ? PointKind::kBlockingCopy : PointKind::kLaunch, i, 0});
      } else if (is_stream_sync(name) || is_device_sync(name)) {
        const SyncInfo s = infer_sync(t, i);
        deps_.syncs.emplace(i, s);
        points.push_back(Point{e.ts_ps, PointKind::kSync, i, 0});
      } else if (is_stream_wait_event(name)) {
        if (const auto w = infer_stream_wait(t, i)) {
          points.push_back(
              Point{e.ts_ps, PointKind::kStreamWait, i, static_cast<uint32_t>(deps_.waits.size())});
          if (w->stream >= waits_by_stream_.size()) waits_by_stream_.resize(w->stream + 1);
          waits_by_stream_[w->stream].push_back(static_cast<uint32_t>(deps_.waits.size()));
          deps_.waits.push_back(*w);
        } else {
          ++deps_.waits_dropped;
        }
      }
    }
  }
  // Iteration marks on the markers' thread.
  const uint32_t mt = timeline_.thread_of_event[timeline_.markers.front().event];
  for (const Marker& m : timeline_.markers)
    deps_.points[mt].push_back(Point{events_[m.event].ts_ps, PointKind::kMark, m.event, m.id});
  if (timeline_.end_mark.event != kNone) {
    deps_.points[mt].push_back(Point{events_[timeline_.end_mark.event].end_ps(), PointKind::kMark,
                                     timeline_.end_mark.event, timeline_.end_mark.id});
  }
}

void DependencyInference::plan_handoffs() {
  if (timeline_.threads.size() < 2) return;
  // Activity of each thread: intervals of ops and runtime calls, instants of annotation starts.
  struct End {
    int64_t ts;
    uint32_t thread;
  };
  std::vector<End> ends;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> activity(timeline_.threads.size());
  for (uint32_t ti = 0; ti < timeline_.threads.size(); ++ti) {
    for (uint32_t i : timeline_.threads[ti].host) {
      const KinetoEvent& e = events_[i];
      if (e.category == KinetoCategory::kPythonFunction) continue;
      if (e.category == KinetoCategory::kUserAnnotation) {
        activity[ti].emplace_back(e.ts_ps, e.ts_ps);
        continue;
      }
      activity[ti].emplace_back(e.ts_ps, e.end_ps());
      ends.push_back(End{e.end_ps(), ti});
    }
  }
  std::sort(ends.begin(), ends.end(), [](const End& a, const End& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.thread < b.thread;
  });
  for (uint32_t ti = 0; ti < timeline_.threads.size(); ++ti) {
    auto& act = activity[ti];
    std::sort(act.begin(), act.end());
    int64_t busy_until = timeline_.first_ps;
    for (const auto& [b, e] : act) {
      if (b - busy_until >= kIdleGap.ps()) consider_handoff(ti, busy_until, b, ends);
      busy_until = std::max(busy_until, e);
    }
  }
}

template <typename Ends>
void DependencyInference::consider_handoff(uint32_t thread, int64_t idle_begin, int64_t resume,
                                           const Ends& ends) {
  auto it = std::upper_bound(ends.begin(), ends.end(), resume,
                             [](int64_t x, const auto& e) { return x < e.ts; });
  while (it != ends.begin()) {
    --it;
    if (it->ts < idle_begin || resume - it->ts > kMaxHandoffLatency.ps()) return;
    if (it->thread == thread) continue;
    Handoff h;
    h.idle_begin = idle_begin;
    h.trigger_ts = it->ts;
    h.resume_ts = resume;
    const auto index = static_cast<uint32_t>(deps_.handoffs.size());
    deps_.handoffs.push_back(h);
    deps_.points[it->thread].push_back(Point{it->ts, PointKind::kSplit, kNone, index});
    deps_.points[thread].push_back(Point{resume, PointKind::kResume, kNone, index});
    return;
  }
}

void DependencyInference::plan_ops() {
  deps_.top_op.assign(events_.size(), kNone);
  for (uint32_t ti = 0; ti < timeline_.threads.size(); ++ti) {
    const ThreadData& t = timeline_.threads[ti];
    std::vector<Point>& points = deps_.points[ti];
    for (uint32_t i : t.host) {
      for (uint32_t p = i; p != kNone; p = timeline_.parent[p]) {
        const KinetoEvent& e = events_[p];
        if (e.category == KinetoCategory::kCpuOp &&
            !is_host_overhead_label(e.category, kineto_.name_of(e))) {
          deps_.top_op[i] = p;
        }
      }
    }
    std::vector<Point> starts;
    for (uint32_t i : t.host) {
      if (deps_.top_op[i] == i)
        starts.push_back(Point{events_[i].ts_ps, PointKind::kOpStart, i, 0});
    }
    for (const Point& p : points) {
      const bool call = p.kind == PointKind::kLaunch || p.kind == PointKind::kBlockingCopy ||
                        p.kind == PointKind::kSync;
      if (call && deps_.top_op[p.event] != kNone && counts_as_launch(kineto_, p.event)) {
        deps_.op_launches.insert(deps_.top_op[p.event]);
      }
    }
    points.insert(points.end(), starts.begin(), starts.end());
  }
}

bool counts_as_launch(const KinetoTrace& kineto, uint32_t call) {
  return is_host_overhead_launch(kineto.events[call].category, kineto.name_of(kineto.events[call]));
}

}  // namespace upsim::trace_build
