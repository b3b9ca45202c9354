#include "workloads/trace/rank_timeline.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/formats/parse_error.h"
#include "sim/formats/text.h"
#include "workloads/trace/kineto_names.h"

namespace upsim::trace_build {

void TimelineRecovery::collect_threads_and_streams() {
  std::map<std::pair<int64_t, int64_t>, uint32_t> thread_of;
  timeline_.first_ps = INT64_MAX;
  timeline_.last_ps = INT64_MIN;
  timeline_.thread_of_event.assign(events_.size(), kNone);
  timeline_.stream_of.assign(events_.size(), 0);
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> host_by_thread;
  for (uint32_t i = 0; i < events_.size(); ++i) {
    const KinetoEvent& e = events_[i];
    timeline_.first_ps = std::min(timeline_.first_ps, e.ts_ps);
    timeline_.last_ps = std::max(timeline_.last_ps, e.end_ps());
    if (is_gpu_category(e.category)) {
      timeline_.gpu_events.push_back(i);
      timeline_.stream_index.emplace(std::make_pair(static_cast<int64_t>(e.device), e.stream), 0);
    } else if (is_host_category(e.category)) {
      host_by_thread[{e.pid, e.tid}].push_back(i);
    }
  }
  if (timeline_.gpu_events.empty() && host_by_thread.empty()) {
    throw ParseError(kineto_.file, "the trace holds no CPU or GPU activity");
  }
  uint16_t si = 0;
  for (auto& [key, index] : timeline_.stream_index)
    index = si++;
  if (timeline_.stream_index.size() > 60000)
    throw ParseError(kineto_.file, "too many CUDA streams");
  for (uint32_t gi : timeline_.gpu_events)
    timeline_.stream_of[gi] = timeline_.stream_index.at({events_[gi].device, events_[gi].stream});
  // Main thread: the one with the iteration markers, else the one with the most cpu ops.
  std::pair<int64_t, int64_t> main{-1, -1};
  size_t best_ops = 0;
  for (auto& [key, events] : host_by_thread) {
    size_t ops = 0;
    for (uint32_t i : events) {
      if (kineto_.name_of(events_[i]).starts_with(options_.iteration_marker)) ops = SIZE_MAX;
      if (ops != SIZE_MAX && events_[i].category == KinetoCategory::kCpuOp) ++ops;
    }
    if (main.first < 0 || ops > best_ops) {
      main = key;
      best_ops = ops;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> order;
  for (auto& [key, events] : host_by_thread) {
    if (key != main) order.push_back(key);
  }
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const int64_t fa = events_[host_by_thread[a].front()].ts_ps;
    const int64_t fb = events_[host_by_thread[b].front()].ts_ps;
    return fa != fb ? fa < fb : a < b;
  });
  if (main.first >= 0 || main.second >= 0) order.insert(order.begin(), main);
  if (order.size() > 60000) throw ParseError(kineto_.file, "too many host threads");
  for (const auto& key : order) {
    ThreadData t;
    t.pid = key.first;
    t.tid = key.second;
    t.host = std::move(host_by_thread[key]);
    std::stable_sort(t.host.begin(), t.host.end(), [&](uint32_t a, uint32_t b) {
      if (events_[a].ts_ps != events_[b].ts_ps) return events_[a].ts_ps < events_[b].ts_ps;
      return events_[a].dur_ps > events_[b].dur_ps;
    });
    const auto index = static_cast<uint32_t>(timeline_.threads.size());
    for (uint32_t i : t.host)
      timeline_.thread_of_event[i] = index;
    timeline_.threads.push_back(std::move(t));
  }
  std::sort(timeline_.gpu_events.begin(), timeline_.gpu_events.end(), [&](uint32_t a, uint32_t b) {
    return events_[a].ts_ps != events_[b].ts_ps ? events_[a].ts_ps < events_[b].ts_ps : a < b;
  });
}

void TimelineRecovery::link_gpu_work() {
  for (uint32_t i = 0; i < events_.size(); ++i) {
    const KinetoEvent& e = events_[i];
    if (e.category == KinetoCategory::kCudaSync && e.correlation >= 0) {
      timeline_.sync_record.emplace(e.correlation, i);
    }
    if ((e.category == KinetoCategory::kCudaRuntime || e.category == KinetoCategory::kCudaDriver) &&
        e.correlation >= 0) {
      timeline_.call_of_correlation.emplace(e.correlation, i);
    }
  }
  // Flow fallback for GPU work without a correlation arg: "f" at the GPU event, "s" at the call.
  std::unordered_map<int64_t, const KinetoFlow*> flow_start;
  std::map<std::pair<int64_t, int64_t>, int64_t> flow_end_at;  // (tid, ts) -> id
  bool need_flows = false;
  for (uint32_t gi : timeline_.gpu_events)
    need_flows |= events_[gi].correlation < 0;
  std::map<std::pair<int64_t, int64_t>, uint32_t> call_at;  // (tid, ts) -> call
  if (need_flows) {
    for (const KinetoFlow& f : kineto_.flows) {
      if (f.start) {
        flow_start.emplace(f.id, &f);
      } else {
        flow_end_at.emplace(std::make_pair(f.tid, f.ts_ps), f.id);
      }
    }
    for (uint32_t i = 0; i < events_.size(); ++i) {
      if (events_[i].category == KinetoCategory::kCudaRuntime ||
          events_[i].category == KinetoCategory::kCudaDriver) {
        call_at.emplace(std::make_pair(events_[i].tid, events_[i].ts_ps), i);
      }
    }
  }
  timeline_.launcher.assign(events_.size(), kNone);
  for (uint32_t gi : timeline_.gpu_events) {
    const KinetoEvent& g = events_[gi];
    uint32_t call = kNone;
    if (g.correlation >= 0) {
      if (const auto it = timeline_.call_of_correlation.find(g.correlation);
          it != timeline_.call_of_correlation.end())
        call = it->second;
    } else if (need_flows) {
      const auto f = flow_end_at.find({g.stream, g.ts_ps});
      if (f != flow_end_at.end()) {
        if (const auto s = flow_start.find(f->second); s != flow_start.end()) {
          const auto c = call_at.find({s->second->tid, s->second->ts_ps});
          if (c != call_at.end()) call = c->second;
        }
      }
    }
    if (call != kNone && timeline_.thread_of_event[call] != kNone) {
      timeline_.launcher[gi] = call;
      timeline_.launched[call].push_back(gi);
    } else {
      timeline_.orphans.push_back(gi);
    }
  }
  for (ThreadData& t : timeline_.threads) {
    for (uint32_t i : t.host) {
      if (timeline_.launched.count(i)) t.launches.push_back(i);
    }
  }
  // Per stream, GPU work in enqueue order (the launch call's start; untraced: the GPU start).
  timeline_.launch_ts.assign(events_.size(), 0);
  timeline_.stream_queue.assign(timeline_.stream_index.size(), {});
  for (uint32_t gi : timeline_.gpu_events) {
    timeline_.launch_ts[gi] =
        timeline_.launcher[gi] != kNone ? events_[timeline_.launcher[gi]].ts_ps : events_[gi].ts_ps;
    timeline_.stream_queue[timeline_.stream_of[gi]].push_back(gi);
  }
  for (auto& q : timeline_.stream_queue) {
    std::stable_sort(q.begin(), q.end(), [&](uint32_t a, uint32_t b) {
      if (timeline_.launch_ts[a] != timeline_.launch_ts[b])
        return timeline_.launch_ts[a] < timeline_.launch_ts[b];
      return events_[a].ts_ps < events_[b].ts_ps;
    });
  }
  // The typical cost of a non-blocking launch call: what a blocking copy's launch costs.
  std::vector<int64_t> durations;
  for (const auto& [call, gpus] : timeline_.launched) {
    if (events_[gpus.front()].category == KinetoCategory::kKernel)
      durations.push_back(events_[call].dur_ps);
  }
  if (!durations.empty()) {
    std::nth_element(durations.begin(), durations.begin() + durations.size() / 2, durations.end());
    timeline_.median_launch_ps = durations[durations.size() / 2];
  }
}

void TimelineRecovery::compute_nesting() {
  timeline_.parent.assign(events_.size(), kNone);
  std::vector<uint32_t> stack;
  for (const ThreadData& t : timeline_.threads) {
    stack.clear();
    for (uint32_t i : t.host) {
      // An event nests in the innermost open one it starts inside (Kineto rounds both ends to
      // microseconds, so a child may appear to end after its parent).
      while (!stack.empty() && events_[stack.back()].end_ps() <= events_[i].ts_ps)
        stack.pop_back();
      if (!stack.empty()) timeline_.parent[i] = stack.back();
      stack.push_back(i);
    }
  }
}

void TimelineRecovery::find_markers() {
  std::vector<uint32_t> found;
  for (const ThreadData& t : timeline_.threads) {
    for (uint32_t i : t.host) {
      const KinetoEvent& e = events_[i];
      if ((e.category == KinetoCategory::kUserAnnotation || e.category == KinetoCategory::kCpuOp) &&
          kineto_.name_of(e).starts_with(options_.iteration_marker)) {
        found.push_back(i);
      }
    }
    if (!found.empty()) break;  // markers of the first thread that has them
  }
  if (found.empty()) {
    throw ParseError(kineto_.file,
                     "no `" + options_.iteration_marker +
                         "` annotation: cannot tell where iterations begin (profile "
                         "with torch.profiler and step(), or name the annotation that "
                         "starts an iteration)");
  }
  std::sort(found.begin(), found.end(),
            [&](uint32_t a, uint32_t b) { return events_[a].ts_ps < events_[b].ts_ps; });
  const bool profiler_steps = options_.iteration_marker.starts_with("ProfilerStep#");
  for (size_t i = 0; i < found.size(); ++i) {
    uint32_t id = static_cast<uint32_t>(i);
    if (profiler_steps) {
      const std::string_view n = kineto_.name_of(events_[found[i]]);
      const size_t hash = n.find('#');
      uint32_t step = 0;
      bool ok = hash != std::string_view::npos && hash + 1 < n.size();
      for (size_t c = hash + 1; ok && c < n.size(); ++c) {
        if (n[c] < '0' || n[c] > '9')
          ok = false;
        else
          step = step * 10 + static_cast<uint32_t>(n[c] - '0');
      }
      if (ok && (timeline_.markers.empty() || step > timeline_.markers.back().id))
        id = step;
      else
        id = timeline_.markers.empty() ? 0 : timeline_.markers.back().id + 1;
    }
    timeline_.markers.push_back(Marker{found[i], id});
  }
  for (size_t i = 0; i < timeline_.markers.size(); ++i) {
    const KinetoEvent& e = events_[timeline_.markers[i].event];
    TraceIteration it;
    it.start_mark = timeline_.markers[i].id;
    it.label = std::string(kineto_.name_of(e));
    if (!profiler_steps) it.label += "[" + std::to_string(i) + "]";
    if (i + 1 < timeline_.markers.size()) {
      it.end_mark = timeline_.markers[i + 1].id;
      it.measured = Duration::from_ps(events_[timeline_.markers[i + 1].event].ts_ps - e.ts_ps);
    } else if (profiler_steps) {
      it.end_mark = timeline_.markers[i].id + 1;
      it.measured = Duration::from_ps(e.dur_ps);
      timeline_.end_mark = Marker{timeline_.markers[i].event, it.end_mark};
    } else {
      continue;
    }
    // A step measured as taking no time (a ProfilerStep with dur 0, two markers at one
    // instant, or the next marker earlier) has no iteration time to compare a prediction with.
    if (it.measured <= Duration::zero()) {
      throw ParseError(
          kineto_.file,
          fmt::format("iteration {} (at {:.3f} us into the trace) lasts "
                      "{:.3f} us: a measured step must take a positive "
                      "time",
                      quoted_field(it.label), Duration::from_ps(e.ts_ps).us(), it.measured.us()));
    }
    timeline_.iterations.push_back(it);
  }
  if (timeline_.iterations.empty()) {
    throw ParseError(kineto_.file, "only one `" + options_.iteration_marker +
                                       "` annotation: no complete iteration to measure");
  }
}

void TimelineRecovery::collect_nccl() {
  const EtLink* link = trace_.et ? &trace_.link : nullptr;
  std::map<std::string, int> pg_ordinal;
  std::map<std::pair<std::string, int64_t>, uint32_t> sub_count;
  for (uint32_t gi : timeline_.gpu_events) {
    const KinetoEvent& g = events_[gi];
    if (g.category != KinetoCategory::kKernel || !is_nccl_kernel(kineto_.name_of(g))) continue;
    NcclKernel n;
    n.gpu = gi;
    n.op_name = std::string(kineto_.name_of(g));
    uint32_t rpc = kNone;
    uint32_t annotation = kNone;
    for (uint32_t p = timeline_.launcher[gi] == kNone ? kNone
                                                      : timeline_.parent[timeline_.launcher[gi]];
         p != kNone; p = timeline_.parent[p]) {
      const std::string_view pn = kineto_.name_of(events_[p]);
      if (rpc == kNone && pn == "record_param_comms") rpc = p;
      if (annotation == kNone && pn.starts_with("nccl:")) annotation = p;
    }
    if (annotation != kNone)
      n.op_name = std::string(kineto_.name_of(events_[annotation]));
    else if (rpc != kNone)
      n.op_name = "record_param_comms";
    // 1. The execution trace's record_param_comms.
    if (link && rpc != kNone) {
      if (const auto it = link->node_of_event.find(rpc); it != link->node_of_event.end()) {
        if (const auto c = et_collective(trace_.et->nodes[it->second])) {
          n.kind = kind_from_collective_name(c->name);
          n.seq = c->seq;
          n.pg = c->pg;
          n.pg_size = c->pg_size;
          n.pg_ranks = c->pg_ranks;
          n.bytes = c->in_bytes;
          if (!c->in_split.empty() && c->in_bytes > 0) {
            int64_t total = 0;
            for (int64_t x : c->in_split)
              total += x;
            if (total > 0) {
              for (int64_t x : c->in_split)
                n.send_bytes.push_back(x * c->in_bytes / total);
            }
          }
        }
      }
    }
    // 2. Kineto args of record_param_comms (PyTorch >= 2.1).
    if (rpc != kNone && n.seq < 0) read_comm_args(rpc, n);
    // 3. The nccl:* annotation's input dims, 4. the kernel name.
    if (annotation != kNone) {
      const std::string_view an = kineto_.name_of(events_[annotation]);
      if (!n.kind) n.kind = kind_from_collective_name(an.substr(5));
      if (n.bytes < 0) {
        const KinetoOpInputs in = kineto_op_inputs(kineto_, events_[annotation]);
        if (!in.dims.empty() && !in.types.empty()) {
          int64_t elems = 1;
          for (int64_t d : in.dims.front())
            elems *= d;
          const int64_t b = kineto_type_bytes(in.types.front());
          if (b > 0) n.bytes = elems * b;
        }
      }
    }
    if (!n.kind) n.kind = kind_from_kernel_name(kineto_.name_of(g));
    // Group key: process group and sequence number, else the kernel's position.
    if (n.seq >= 0) {
      std::string pg = n.pg;
      const bool address = pg.size() >= 7 && std::all_of(pg.begin(), pg.end(), [](char c) {
                             return c >= '0' && c <= '9';
                           });
      if (address) {
        const auto [it, inserted] = pg_ordinal.emplace(pg, static_cast<int>(pg_ordinal.size()));
        (void)inserted;
        pg = "pg" + std::to_string(it->second);
      }
      const uint32_t sub = sub_count[{pg, n.seq}]++;
      n.key = pg + "/" + std::to_string(n.seq) + "/" + std::to_string(sub);
      n.pg = pg;
    }
    timeline_.nccl.push_back(std::move(n));
  }
  // Launch order decides the position of kernels without a sequence number.
  std::stable_sort(timeline_.nccl.begin(), timeline_.nccl.end(),
                   [&](const NcclKernel& a, const NcclKernel& b) {
                     return timeline_.launch_ts[a.gpu] < timeline_.launch_ts[b.gpu];
                   });
}

void TimelineRecovery::read_comm_args(uint32_t rpc, NcclKernel& n) {
  const std::string_view args = kineto_.args_of(events_[rpc]);
  if (args.empty()) return;
  JsonCursor cur(args, kineto_.file);
  const JsonValue v = read_json_value(cur);
  int64_t elem_bytes = -1;
  int64_t in_elems = -1;
  int64_t rank_start = -1;
  int64_t rank_stride = -1;
  std::vector<int64_t> split;
  for (const auto& [key, value] : v.members) {
    if (key == "Process Group Ranks") {
      // PyTorch writes the list as a string ("[0, 1, 2, 3]"); an array reads too.
      n.pg_ranks = ints_of(value);
    } else if (key == "Global rank start" && value.is_number()) {
      rank_start = value.integer;
    } else if (key == "Global rank stride" && value.is_number()) {
      rank_stride = value.integer;
    }
    if (key == "Collective name" && value.is_string()) {
      n.kind = kind_from_collective_name(value.string);
    } else if (key == "Process Group Name" && value.is_string()) {
      n.pg = value.string;
    } else if (key == "Group size" && value.is_number()) {
      n.pg_size = value.integer;
    } else if ((key == "Seq" || key == "seq") && value.is_number()) {
      n.seq = value.integer;
    } else if (key == "In msg nelems" && value.is_number()) {
      in_elems = value.integer;
    } else if (key == "dtype" && value.is_string()) {
      const std::string& d = value.string;
      elem_bytes = d == "Float" || d == "Int"                  ? 4
                   : d == "Double" || d == "Long"              ? 8
                   : d == "Half" || d == "BFloat16"            ? 2
                   : d == "Byte" || d == "Char" || d == "Bool" ? 1
                                                               : -1;
    } else if (key == "In split size") {
      split = ints_of(value);
    }
  }
  if (n.pg_ranks.empty() && rank_start >= 0 && rank_stride > 0 && n.pg_size > 0 &&
      n.pg_size <= (int64_t{1} << 20)) {
    for (int64_t i = 0; i < n.pg_size; ++i)
      n.pg_ranks.push_back(rank_start + i * rank_stride);
  }
  if (in_elems >= 0 && elem_bytes > 0) n.bytes = in_elems * elem_bytes;
  if (!split.empty() && elem_bytes > 0 && in_elems > 0) {
    int64_t total = 0;
    for (int64_t x : split)
      total += x;
    if (total > 0) {
      for (int64_t x : split)
        n.send_bytes.push_back(x * in_elems / total * elem_bytes);
    }
  }
}

}  // namespace upsim::trace_build
