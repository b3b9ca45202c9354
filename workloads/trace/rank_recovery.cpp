#include "workloads/trace/rank_recovery.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sim/formats/parse_error.h"
#include "sim/formats/text.h"
#include "workloads/trace/trace_host_overheads.h"

namespace upsim::trace_build {

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

bool contains_nocase(std::string_view s, std::string_view what) {
  return std::search(s.begin(), s.end(), what.begin(), what.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != s.end();
}

bool is_nccl_kernel(std::string_view name) {
  return contains_nocase(name, "nccl");
}

bool is_stream_sync(std::string_view name) {
  return name == "cudaStreamSynchronize" || name == "cuStreamSynchronize" ||
         name == "cudaEventSynchronize" || name == "cuEventSynchronize";
}

bool is_device_sync(std::string_view name) {
  return name == "cudaDeviceSynchronize" || name == "cuCtxSynchronize";
}

bool is_stream_wait_event(std::string_view name) {
  return name == "cudaStreamWaitEvent" || name == "cuStreamWaitEvent";
}

/// Bytes per element of a Kineto "Input type" name.
int64_t kineto_type_bytes(std::string_view t) {
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "double" || t == "long int" || t == "long" || t == "c10::complex<float>") return 8;
  if (t == "c10::Half" || t == "c10::BFloat16" || t == "short" || t == "Half" || t == "BFloat16") {
    return 2;
  }
  if (t == "signed char" || t == "unsigned char" || t == "bool" || t == "c10::Float8_e4m3fn" ||
      t == "c10::Float8_e5m2") {
    return 1;
  }
  return -1;
}

std::optional<CollectiveKind> kind_from_collective_name(std::string_view n) {
  if (n.find("all_to_all") != std::string_view::npos ||
      n.find("alltoall") != std::string_view::npos)
    return CollectiveKind::kAllToAll;
  if (n.find("reduce_scatter") != std::string_view::npos) return CollectiveKind::kReduceScatter;
  if (n.find("allgather") != std::string_view::npos ||
      n.find("all_gather") != std::string_view::npos)
    return CollectiveKind::kAllGather;
  if (n.find("allreduce") != std::string_view::npos ||
      n.find("all_reduce") != std::string_view::npos || n == "reduce" || n == "barrier")
    return CollectiveKind::kAllReduce;
  if (n.find("broadcast") != std::string_view::npos) return CollectiveKind::kBroadcast;
  if (n == "send" || n == "recv") return CollectiveKind::kSendRecv;
  return std::nullopt;
}

CollectiveKind kind_from_kernel_name(std::string_view n) {
  if (n.find("AllReduce") != std::string_view::npos) return CollectiveKind::kAllReduce;
  if (n.find("AllGather") != std::string_view::npos) return CollectiveKind::kAllGather;
  if (n.find("ReduceScatter") != std::string_view::npos) return CollectiveKind::kReduceScatter;
  if (n.find("Broadcast") != std::string_view::npos) return CollectiveKind::kBroadcast;
  if (n.find("SendRecv") != std::string_view::npos || n.find("Send") != std::string_view::npos ||
      n.find("Recv") != std::string_view::npos)
    return CollectiveKind::kSendRecv;
  return CollectiveKind::kAllReduce;
}

std::vector<int64_t> ints_of(const JsonValue& v) {
  std::vector<int64_t> out;
  if (v.is_array()) {
    for (const JsonValue& i : v.items) {
      if (i.is_number()) out.push_back(i.integer);
    }
  } else if (v.is_string()) {
    // A number beyond int64 reads as -1, which no rank or size is.
    int64_t x = 0;
    bool in = false;
    bool overflow = false;
    for (char c : v.string) {
      if (c >= '0' && c <= '9') {
        overflow = overflow || !append_decimal_digit(x, c);
        in = true;
      } else if (in) {
        out.push_back(overflow ? -1 : x);
        x = 0;
        in = false;
        overflow = false;
      }
    }
    if (in) out.push_back(overflow ? -1 : x);
  }
  return out;
}

void RankRecovery::collect_threads_and_streams() {
  std::map<std::pair<int64_t, int64_t>, uint32_t> thread_of;
  first_ps_ = INT64_MAX;
  last_ps_ = INT64_MIN;
  thread_of_event_.assign(events_.size(), kNone);
  stream_of_.assign(events_.size(), 0);
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> host_by_thread;
  for (uint32_t i = 0; i < events_.size(); ++i) {
    const KinetoEvent& e = events_[i];
    first_ps_ = std::min(first_ps_, e.ts_ps);
    last_ps_ = std::max(last_ps_, e.end_ps());
    if (is_gpu_category(e.category)) {
      gpu_events_.push_back(i);
      stream_index_.emplace(std::make_pair(static_cast<int64_t>(e.device), e.stream), 0);
    } else if (is_host_category(e.category)) {
      host_by_thread[{e.pid, e.tid}].push_back(i);
    }
  }
  if (gpu_events_.empty() && host_by_thread.empty()) {
    throw ParseError(kineto_.file, "the trace holds no CPU or GPU activity");
  }
  uint16_t si = 0;
  for (auto& [key, index] : stream_index_)
    index = si++;
  if (stream_index_.size() > 60000) throw ParseError(kineto_.file, "too many CUDA streams");
  for (uint32_t gi : gpu_events_)
    stream_of_[gi] = stream_index_.at({events_[gi].device, events_[gi].stream});
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
    const auto index = static_cast<uint32_t>(threads_.size());
    for (uint32_t i : t.host)
      thread_of_event_[i] = index;
    threads_.push_back(std::move(t));
  }
  std::sort(gpu_events_.begin(), gpu_events_.end(), [&](uint32_t a, uint32_t b) {
    return events_[a].ts_ps != events_[b].ts_ps ? events_[a].ts_ps < events_[b].ts_ps : a < b;
  });
}

void RankRecovery::link_gpu_work() {
  for (uint32_t i = 0; i < events_.size(); ++i) {
    const KinetoEvent& e = events_[i];
    if (e.category == KinetoCategory::kCudaSync && e.correlation >= 0) {
      sync_record_.emplace(e.correlation, i);
    }
    if ((e.category == KinetoCategory::kCudaRuntime || e.category == KinetoCategory::kCudaDriver) &&
        e.correlation >= 0) {
      call_of_correlation_.emplace(e.correlation, i);
    }
  }
  // Flow fallback for GPU work without a correlation arg: "f" at the GPU event, "s" at the call.
  std::unordered_map<int64_t, const KinetoFlow*> flow_start;
  std::map<std::pair<int64_t, int64_t>, int64_t> flow_end_at;  // (tid, ts) -> id
  bool need_flows = false;
  for (uint32_t gi : gpu_events_)
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
  launcher_.assign(events_.size(), kNone);
  for (uint32_t gi : gpu_events_) {
    const KinetoEvent& g = events_[gi];
    uint32_t call = kNone;
    if (g.correlation >= 0) {
      if (const auto it = call_of_correlation_.find(g.correlation);
          it != call_of_correlation_.end())
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
    if (call != kNone && thread_of_event_[call] != kNone) {
      launcher_[gi] = call;
      launched_[call].push_back(gi);
    } else {
      orphans_.push_back(gi);
    }
  }
  for (ThreadData& t : threads_) {
    for (uint32_t i : t.host) {
      if (launched_.count(i)) t.launches.push_back(i);
    }
  }
  // Per stream, GPU work in enqueue order (the launch call's start; untraced: the GPU start).
  launch_ts_.assign(events_.size(), 0);
  stream_queue_.assign(stream_index_.size(), {});
  for (uint32_t gi : gpu_events_) {
    launch_ts_[gi] = launcher_[gi] != kNone ? events_[launcher_[gi]].ts_ps : events_[gi].ts_ps;
    stream_queue_[stream_of_[gi]].push_back(gi);
  }
  for (auto& q : stream_queue_) {
    std::stable_sort(q.begin(), q.end(), [&](uint32_t a, uint32_t b) {
      if (launch_ts_[a] != launch_ts_[b]) return launch_ts_[a] < launch_ts_[b];
      return events_[a].ts_ps < events_[b].ts_ps;
    });
  }
  // The typical cost of a non-blocking launch call: what a blocking copy's launch costs.
  std::vector<int64_t> durations;
  for (const auto& [call, gpus] : launched_) {
    if (events_[gpus.front()].category == KinetoCategory::kKernel)
      durations.push_back(events_[call].dur_ps);
  }
  if (!durations.empty()) {
    std::nth_element(durations.begin(), durations.begin() + durations.size() / 2, durations.end());
    median_launch_ps_ = durations[durations.size() / 2];
  }
}

void RankRecovery::compute_nesting() {
  parent_.assign(events_.size(), kNone);
  std::vector<uint32_t> stack;
  for (const ThreadData& t : threads_) {
    stack.clear();
    for (uint32_t i : t.host) {
      // An event nests in the innermost open one it starts inside (Kineto rounds both ends to
      // microseconds, so a child may appear to end after its parent).
      while (!stack.empty() && events_[stack.back()].end_ps() <= events_[i].ts_ps)
        stack.pop_back();
      if (!stack.empty()) parent_[i] = stack.back();
      stack.push_back(i);
    }
  }
}

void RankRecovery::find_markers() {
  std::vector<uint32_t> found;
  for (const ThreadData& t : threads_) {
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
      if (ok && (markers_.empty() || step > markers_.back().id))
        id = step;
      else
        id = markers_.empty() ? 0 : markers_.back().id + 1;
    }
    markers_.push_back(Marker{found[i], id});
  }
  for (size_t i = 0; i < markers_.size(); ++i) {
    const KinetoEvent& e = events_[markers_[i].event];
    TraceIteration it;
    it.start_mark = markers_[i].id;
    it.label = std::string(kineto_.name_of(e));
    if (!profiler_steps) it.label += "[" + std::to_string(i) + "]";
    if (i + 1 < markers_.size()) {
      it.end_mark = markers_[i + 1].id;
      it.measured = Duration::from_ps(events_[markers_[i + 1].event].ts_ps - e.ts_ps);
    } else if (profiler_steps) {
      it.end_mark = markers_[i].id + 1;
      it.measured = Duration::from_ps(e.dur_ps);
      end_mark_ = Marker{markers_[i].event, it.end_mark};
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
    iterations_.push_back(it);
  }
  if (iterations_.empty()) {
    throw ParseError(kineto_.file, "only one `" + options_.iteration_marker +
                                       "` annotation: no complete iteration to measure");
  }
}

void RankRecovery::collect_nccl() {
  const EtLink* link = trace_.et ? &trace_.link : nullptr;
  std::map<std::string, int> pg_ordinal;
  std::map<std::pair<std::string, int64_t>, uint32_t> sub_count;
  for (uint32_t gi : gpu_events_) {
    const KinetoEvent& g = events_[gi];
    if (g.category != KinetoCategory::kKernel || !is_nccl_kernel(kineto_.name_of(g))) continue;
    NcclKernel n;
    n.gpu = gi;
    n.op_name = std::string(kineto_.name_of(g));
    uint32_t rpc = kNone;
    uint32_t annotation = kNone;
    for (uint32_t p = launcher_[gi] == kNone ? kNone : parent_[launcher_[gi]]; p != kNone;
         p = parent_[p]) {
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
    nccl_.push_back(std::move(n));
  }
  // Launch order decides the position of kernels without a sequence number.
  std::stable_sort(nccl_.begin(), nccl_.end(), [&](const NcclKernel& a, const NcclKernel& b) {
    return launch_ts_[a.gpu] < launch_ts_[b.gpu];
  });
}

void RankRecovery::read_comm_args(uint32_t rpc, NcclKernel& n) {
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

uint32_t RankRecovery::last_enqueued_before(uint16_t stream, int64_t t) const {
  const auto& q = stream_queue_[stream];
  const auto it = std::lower_bound(q.begin(), q.end(), t,
                                   [&](uint32_t g, int64_t x) { return launch_ts_[g] < x; });
  if (it == q.begin()) return kNone;
  return *(it - 1);
}

uint32_t RankRecovery::first_enqueued_after(uint16_t stream, int64_t t) const {
  const auto& q = stream_queue_[stream];
  const auto it = std::upper_bound(q.begin(), q.end(), t,
                                   [&](int64_t x, uint32_t g) { return x < launch_ts_[g]; });
  return it == q.end() ? kNone : *it;
}

SyncInfo RankRecovery::infer_sync(const ThreadData& t, uint32_t call) const {
  const KinetoEvent& c = events_[call];
  SyncInfo s;
  if (const auto r = sync_record(call); r && r->stream >= 0) {
    // Recorded by Kineto: "Stream Sync" names the stream, "Event Sync" the event's stream.
    const int64_t stream = r->wait_on_stream >= 0 ? r->wait_on_stream : r->stream;
    if (const auto st = stream_index(r->device, stream)) {
      s.target = *st;
      s.done_ts = c.ts_ps;
      const uint32_t p = last_enqueued_before(*st, c.ts_ps);
      if (p != kNone) s.done_ts = std::max(s.done_ts, events_[p].end_ps());
      return s;
    }
  }
  if (is_device_sync(kineto_.name_of(c))) {
    s.target = kAllStreams;
    s.done_ts = c.ts_ps;
    for (uint16_t st = 0; st < stream_queue_.size(); ++st) {
      const uint32_t p = last_enqueued_before(st, c.ts_ps);
      if (p != kNone) s.done_ts = std::max(s.done_ts, events_[p].end_ps());
    }
    return s;
  }
  int64_t best_end = INT64_MIN;
  for (uint16_t st = 0; st < stream_queue_.size(); ++st) {
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
  if (it != t.launches.begin()) s.target = stream_of_[launched_.at(*(it - 1)).front()];
  return s;
}

std::optional<uint16_t> RankRecovery::stream_index(int64_t device, int64_t stream) const {
  const auto it = stream_index_.find({device, stream});
  if (it == stream_index_.end()) return std::nullopt;
  return it->second;
}

std::optional<RankRecovery::SyncRecord> RankRecovery::sync_record(uint32_t call) const {
  if (events_[call].correlation < 0) return std::nullopt;
  const auto it = sync_record_.find(events_[call].correlation);
  if (it == sync_record_.end()) return std::nullopt;
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

std::optional<StreamWaitInfo> RankRecovery::exact_stream_wait(uint32_t call,
                                                              const SyncRecord& r) const {
  const auto waiting = stream_index(r.device, r.stream);
  const auto producer_stream = stream_index(r.device, r.wait_on_stream);
  if (!waiting || !producer_stream || *waiting == *producer_stream) return std::nullopt;
  int64_t recorded_at = events_[call].ts_ps;
  if (const auto it = call_of_correlation_.find(r.record_correlation);
      it != call_of_correlation_.end()) {
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

std::optional<StreamWaitInfo> RankRecovery::infer_stream_wait(const ThreadData& t,
                                                              uint32_t call) const {
  const KinetoEvent& c = events_[call];
  if (const auto r = sync_record(call); r && r->wait_on_stream >= 0) {
    return exact_stream_wait(call, *r);
  }
  const auto next = std::upper_bound(t.launches.begin(), t.launches.end(), c.ts_ps,
                                     [&](int64_t x, uint32_t l) { return x < events_[l].ts_ps; });
  if (next == t.launches.end()) return std::nullopt;
  const uint16_t wait_stream = stream_of_[launched_.at(*next).front()];
  const uint32_t waiter = first_enqueued_after(wait_stream, c.ts_ps);
  if (waiter == kNone) return std::nullopt;
  // Candidates: per other stream, the last task enqueued before the call that ended before
  // the waiter started (a later-ending one contradicts the measured start).
  const int64_t start = events_[waiter].ts_ps;
  std::vector<uint32_t> candidates;
  for (uint16_t st = 0; st < stream_queue_.size(); ++st) {
    if (st == wait_stream) continue;
    const auto& q = stream_queue_[st];
    auto it = std::lower_bound(q.begin(), q.end(), c.ts_ps,
                               [&](uint32_t g, int64_t x) { return launch_ts_[g] < x; });
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
  int64_t free_at = launcher_[waiter] != kNone ? events_[launcher_[waiter]].end_ps() : start;
  const auto& wq = stream_queue_[wait_stream];
  const auto pos = std::upper_bound(wq.begin(), wq.end(), c.ts_ps, [&](int64_t x, uint32_t g) {
    return x < launch_ts_[g];
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
      if (best == kNone || launch_ts_[p] > launch_ts_[best]) best = p;
    }
  }
  if (best == kNone) return std::nullopt;
  StreamWaitInfo w;
  w.call = call;
  w.producer = best;
  w.stream = wait_stream;
  return w;
}

void RankRecovery::plan_points() {
  for (uint32_t ti = 0; ti < threads_.size(); ++ti) {
    ThreadData& t = threads_[ti];
    for (uint32_t i : t.host) {
      const KinetoEvent& e = events_[i];
      if (e.category != KinetoCategory::kCudaRuntime && e.category != KinetoCategory::kCudaDriver)
        continue;
      const std::string_view name = kineto_.name_of(e);
      if (const auto it = launched_.find(i); it != launched_.end()) {
        const KinetoEvent& g = events_[it->second.front()];
        const bool copy = g.category == KinetoCategory::kGpuMemcpy;
        const std::string_view gn = kineto_.name_of(g);
        const bool sync_api = name.find("Memcpy") != std::string_view::npos &&
                              name.find("Async") == std::string_view::npos;
        const bool pageable = gn.find("Pageable") != std::string_view::npos;
        const bool blocking = copy && (sync_api || (pageable && e.end_ps() >= g.ts_ps));
        t.points.push_back(
            Point{e.ts_ps, blocking ? PointKind::kBlockingCopy : PointKind::kLaunch, i, 0});
      } else if (is_stream_sync(name) || is_device_sync(name)) {
        const SyncInfo s = infer_sync(t, i);
        syncs_.emplace(i, s);
        t.points.push_back(Point{e.ts_ps, PointKind::kSync, i, 0});
      } else if (is_stream_wait_event(name)) {
        if (const auto w = infer_stream_wait(t, i)) {
          t.points.push_back(
              Point{e.ts_ps, PointKind::kStreamWait, i, static_cast<uint32_t>(waits_.size())});
          waits_.push_back(*w);
        } else {
          ++waits_dropped_;
        }
      }
    }
  }
  // Iteration marks on the markers' thread.
  const uint32_t mt = thread_of_event_[markers_.front().event];
  for (const Marker& m : markers_)
    threads_[mt].points.push_back(Point{events_[m.event].ts_ps, PointKind::kMark, m.event, m.id});
  if (end_mark_.event != kNone) {
    threads_[mt].points.push_back(
        Point{events_[end_mark_.event].end_ps(), PointKind::kMark, end_mark_.event, end_mark_.id});
  }
}

void RankRecovery::plan_handoffs() {
  if (threads_.size() < 2) return;
  // Activity of each thread: intervals of ops and runtime calls, instants of annotation starts.
  struct End {
    int64_t ts;
    uint32_t thread;
  };
  std::vector<End> ends;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> activity(threads_.size());
  for (uint32_t ti = 0; ti < threads_.size(); ++ti) {
    for (uint32_t i : threads_[ti].host) {
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
  for (uint32_t ti = 0; ti < threads_.size(); ++ti) {
    auto& act = activity[ti];
    std::sort(act.begin(), act.end());
    int64_t busy_until = first_ps_;
    for (const auto& [b, e] : act) {
      if (b - busy_until >= kIdleGap.ps()) consider_handoff(ti, busy_until, b, ends);
      busy_until = std::max(busy_until, e);
    }
  }
}

template <typename Ends>
void RankRecovery::consider_handoff(uint32_t thread, int64_t idle_begin, int64_t resume,
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
    const auto index = static_cast<uint32_t>(handoffs_.size());
    handoffs_.push_back(h);
    threads_[it->thread].points.push_back(Point{it->ts, PointKind::kSplit, kNone, index});
    threads_[thread].points.push_back(Point{resume, PointKind::kResume, kNone, index});
    return;
  }
}

void RankRecovery::plan_ops() {
  top_op_.assign(events_.size(), kNone);
  for (ThreadData& t : threads_) {
    for (uint32_t i : t.host) {
      for (uint32_t p = i; p != kNone; p = parent_[p]) {
        const KinetoEvent& e = events_[p];
        if (e.category == KinetoCategory::kCpuOp &&
            !is_host_overhead_label(e.category, kineto_.name_of(e))) {
          top_op_[i] = p;
        }
      }
    }
    std::vector<Point> starts;
    for (uint32_t i : t.host) {
      if (top_op_[i] == i) starts.push_back(Point{events_[i].ts_ps, PointKind::kOpStart, i, 0});
    }
    for (const Point& p : t.points) {
      const bool call = p.kind == PointKind::kLaunch || p.kind == PointKind::kBlockingCopy ||
                        p.kind == PointKind::kSync;
      if (call && top_op_[p.event] != kNone && counts_as_launch(p.event)) {
        op_launches_.insert(top_op_[p.event]);
      }
    }
    t.points.insert(t.points.end(), starts.begin(), starts.end());
  }
}

bool RankRecovery::counts_as_launch(uint32_t call) const {
  return is_host_overhead_launch(events_[call].category, kineto_.name_of(events_[call]));
}

}  // namespace upsim::trace_build
