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
#include "workloads/pytorch/kernels.h"
#include "workloads/trace/trace_host_overheads.h"

namespace upsim {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
/// Inferred stream waits: tasks looked at per stream, back from the call, for one consistent with
/// the waiter's start.
constexpr int kMaxWaitLookBack = 64;
/// A waiter that starts this much later than its launch and stream predecessor allowed was held
/// by its wait (GPU launch latency is a few microseconds).
constexpr Duration kWaitBindSlack = Duration::from_us(10);

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

/// What one rank knows about one of its NCCL kernels.
struct NcclKernel {
  uint32_t gpu = kNone;  // event index
  std::string key;       // group key, comparable across ranks
  std::string pg;
  int64_t seq = -1;
  std::string op_name;  // "nccl:all_to_all", "record_param_comms", or the kernel name
  std::optional<CollectiveKind> kind;
  int64_t bytes = -1;
  int64_t pg_size = -1;
  std::vector<int64_t> pg_ranks;    // the group's global ranks, when recorded
  std::vector<int64_t> send_bytes;  // all-to-all: bytes to each peer
};

/// Where a thread's measured timeline is cut into tasks. At equal times points are taken in
/// this order: a hand-off trigger ends before anything starts, a resumption precedes the work it
/// resumes, an iteration mark precedes the calls of its iteration.
enum class PointKind : uint8_t {
  kSplit,         // another thread's hand-off trigger ends here: cut the host work
  kResume,        // the thread resumes after waiting for another thread
  kMark,          // an iteration marker starts (or the last ProfilerStep ends)
  kOpStart,       // TraceHost::kModelled: a top-level op starts
  kLaunch,        // a runtime call that enqueues GPU work
  kBlockingCopy,  // a memcpy call that returns after its copy
  kSync,          // stream / event / device synchronize
  kStreamWait,    // cudaStreamWaitEvent with a known event
};

/// One cut of a thread's timeline.
struct Point {
  int64_t ts = 0;  // rank-local ps (trace clock)
  PointKind kind = PointKind::kLaunch;
  uint32_t event = kNone;
  uint32_t aux = 0;
};

/// A thread idle since `idle_begin` resumes at `resume_ts` after another thread's task that ends
/// at `trigger_ts` (trigger_task).
struct Handoff {
  int64_t idle_begin = 0;
  int64_t trigger_ts = 0;
  int64_t resume_ts = 0;
  TaskId trigger_task = kNoTask;
  TaskId wait_task = kNoTask;
  int64_t wait_fallback_ps = 0;  // the measured wait, used when no trigger task exists
};

struct StreamWaitInfo {
  uint32_t call = kNone;      // the cudaStreamWaitEvent event
  uint32_t producer = kNone;  // GPU event the wait depends on
  uint16_t stream = 0;        // waiting stream
  bool exact = false;         // from a cuda_sync record, not inferred
  TaskId task = kNoTask;
};

struct SyncInfo {
  uint16_t target = kAllStreams;
  int64_t done_ts = 0;  // when the awaited work finished in the trace
};

struct ThreadData {
  int64_t pid = -1;
  int64_t tid = -1;
  std::vector<uint32_t> host;      // host events, by (ts, -dur)
  std::vector<uint32_t> launches;  // runtime calls that launch GPU work, by ts
  std::vector<Point> points;
};

struct Marker {
  uint32_t event = kNone;
  uint32_t id = 0;
};

/// aten::convolution, cudnn_convolution, conv2d, _conv_depthwise2d, convolution_backward, ...:
/// ops no kernel model prices (not "convert", "conversion").
bool is_convolution_op(std::string_view op) {
  for (size_t at = op.find("conv"); at != std::string_view::npos; at = op.find("conv", at + 4)) {
    const std::string_view rest = op.substr(at + 4);
    if (rest.starts_with("olution") || rest.starts_with("_") ||
        (!rest.empty() && rest.front() >= '1' && rest.front() <= '3')) {
      return true;
    }
  }
  return false;
}

struct GemmShape {
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

std::optional<GemmShape> gemm_shape(std::string_view op, const KinetoOpInputs& in) {
  auto dims = [&](size_t i) -> const std::vector<int64_t>& { return in.dims[i]; };
  const size_t n_in = in.dims.size();
  GemmShape g;
  if ((op == "aten::mm" || op == "aten::matmul") && n_in >= 2 && dims(0).size() == 2 &&
      dims(1).size() == 2) {
    g.m = dims(0)[0];
    g.k = dims(0)[1];
    g.n = dims(1)[1];
  } else if (op == "aten::addmm" && n_in >= 3 && dims(1).size() == 2 && dims(2).size() == 2) {
    g.m = dims(1)[0];
    g.k = dims(1)[1];
    g.n = dims(2)[1];
  } else if ((op == "aten::bmm" || op == "aten::matmul") && n_in >= 2 && dims(0).size() == 3 &&
             dims(1).size() == 3) {
    g.batch = dims(0)[0];
    g.m = dims(0)[1];
    g.k = dims(0)[2];
    g.n = dims(1)[2];
  } else if (op == "aten::baddbmm" && n_in >= 3 && dims(1).size() == 3 && dims(2).size() == 3) {
    g.batch = dims(1)[0];
    g.m = dims(1)[1];
    g.k = dims(1)[2];
    g.n = dims(2)[2];
  } else if (op == "aten::linear" && n_in >= 2 && !dims(0).empty() && dims(1).size() == 2) {
    g.m = 1;
    for (size_t i = 0; i + 1 < dims(0).size(); ++i)
      g.m *= dims(0)[i];
    g.k = dims(0).back();
    g.n = dims(1)[0];
  } else {
    return std::nullopt;
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return std::nullopt;
  return g;
}

/// Builds one rank. Use: analyse() (threads, streams, launches, nesting, iterations, NCCL
/// kernels), then the caller groups the NCCL kernels of all ranks, then plan() (the cut points of
/// every thread: calls, inferred waits and hand-offs), then emit() (the tasks).
class RankBuilder {
 public:
  RankBuilder(const RankTrace& trace, const TraceGraphOptions& options)
      : trace_(trace), kineto_(trace.kineto), events_(trace.kineto.events), options_(options) {}

  void analyse() {
    collect_threads_and_streams();
    link_gpu_work();
    compute_nesting();
    find_markers();
    collect_nccl();
  }

  /// Earliest and latest instants of the rank's activity (trace clock, rank-local ps).
  int64_t first_ps() const { return first_ps_; }
  int64_t last_ps() const { return last_ps_; }
  const std::vector<NcclKernel>& nccl() const { return nccl_; }
  const KinetoTrace& kineto() const { return kineto_; }
  std::vector<NcclKernel>& nccl_mut() { return nccl_; }

  void plan() {
    plan_points();
    plan_handoffs();
    if (options_.host == TraceHost::kModelled) plan_ops();
    for (ThreadData& t : threads_) {
      std::stable_sort(t.points.begin(), t.points.end(), [](const Point& a, const Point& b) {
        if (a.ts != b.ts) return a.ts < b.ts;
        return a.kind < b.kind;
      });
    }
  }

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
      if (!gpu_events_.empty() && d.id == events_[gpu_events_.front()].device) s.device = d.name;
    }
    RankInfo info;
    info.name = "rank " + std::to_string(g.rank_count()) + " (" + file_name(kineto_.file) + ")";
    const bool orphan_thread = !orphans_.empty();
    info.cpu_threads = static_cast<uint16_t>(threads_.size() + (orphan_thread ? 1 : 0));
    const bool many_devices = !stream_index_.empty() && stream_index_.begin()->first.first !=
                                                            stream_index_.rbegin()->first.first;
    for (const auto& entry : stream_index_) {
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
    for (size_t i = 0; i < nccl_.size(); ++i)
      nccl_pos.emplace(nccl_[i].gpu, i);
    for (uint32_t gi : gpu_events_) {
      const KinetoEvent& e = events_[gi];
      const uint16_t stream = stream_of_[gi];
      const std::string_view op = op_name_of_launch(launcher_[gi]);
      TaskId t = kNoTask;
      const bool model = options_.mode == TraceMode::kModel;
      if (const auto it = nccl_pos.find(gi); it != nccl_pos.end()) {
        t = g.add_collective(rank_, stream, collective_of[it->second], nccl_[it->second].op_name);
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
        if (model) kd = kernel_desc(gi, why);
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
    for (StreamWaitInfo& w : waits_) {
      auto it = record_task_.find(w.producer);
      if (it == record_task_.end()) {
        it = record_task_.emplace(w.producer, g.add_event_record(rank_, stream_of_[w.producer]))
                 .first;
      }
      w.task = g.add_stream_wait(rank_, w.stream, it->second);
    }
    s.stream_waits = waits_.size();
    s.stream_waits_exact = static_cast<uint64_t>(std::count_if(
        waits_.begin(), waits_.end(), [](const StreamWaitInfo& w) { return w.exact; }));
    s.stream_waits_dropped = waits_dropped_;
    std::vector<int64_t> cuda_stream(stream_index_.size());
    for (const auto& [key, index] : stream_index_)
      cuda_stream[index] = key.second;
    for (const StreamWaitInfo& w : waits_) {
      s.stream_wait_edges.push_back(
          TraceStreamWaitEdge{events_[w.call].correlation, events_[w.producer].correlation,
                              cuda_stream[w.stream], cuda_stream[stream_of_[w.producer]], w.exact});
    }

    for (uint32_t t = 0; t < threads_.size(); ++t) {
      if (options_.host == TraceHost::kModelled)
        emit_thread_modelled(t, s);
      else
        emit_thread(t, s);
    }
    if (orphan_thread) emit_orphans(static_cast<uint16_t>(threads_.size()), s);
    for (Handoff& h : handoffs_) {
      if (h.wait_task == kNoTask) continue;
      if (h.trigger_task != kNoTask) {
        g.add_dependency(h.trigger_task, h.wait_task);
        ++s.handoffs;
      } else {
        // No task of the other thread ends at the trigger: keep the measured idle time instead.
        g.set_fixed_duration(h.wait_task, Duration::from_ps(h.wait_fallback_ps));
      }
    }
    s.iterations = iterations_;
    return s;
  }

  const std::vector<TraceIteration>& iterations() const { return iterations_; }

 private:
  // ---- analysis ----------------------------------------------------------------------------

  void collect_threads_and_streams() {
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

  void link_gpu_work() {
    for (uint32_t i = 0; i < events_.size(); ++i) {
      const KinetoEvent& e = events_[i];
      if (e.category == KinetoCategory::kCudaSync && e.correlation >= 0) {
        sync_record_.emplace(e.correlation, i);
      }
      if ((e.category == KinetoCategory::kCudaRuntime ||
           e.category == KinetoCategory::kCudaDriver) &&
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
      std::nth_element(durations.begin(), durations.begin() + durations.size() / 2,
                       durations.end());
      median_launch_ps_ = durations[durations.size() / 2];
    }
  }

  /// parent_[e]: innermost host event of the same thread that encloses host event e.
  void compute_nesting() {
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

  void find_markers() {
    std::vector<uint32_t> found;
    for (const ThreadData& t : threads_) {
      for (uint32_t i : t.host) {
        const KinetoEvent& e = events_[i];
        if ((e.category == KinetoCategory::kUserAnnotation ||
             e.category == KinetoCategory::kCpuOp) &&
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

  /// Innermost enclosing record_param_comms / nccl:* ops of a launch call.
  void collect_nccl() {
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

  void read_comm_args(uint32_t rpc, NcclKernel& n) {
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

  // ---- planning ----------------------------------------------------------------------------

  /// Last GPU event on `stream` enqueued before `t` (kNone if none).
  uint32_t last_enqueued_before(uint16_t stream, int64_t t) const {
    const auto& q = stream_queue_[stream];
    const auto it = std::lower_bound(q.begin(), q.end(), t,
                                     [&](uint32_t g, int64_t x) { return launch_ts_[g] < x; });
    if (it == q.begin()) return kNone;
    return *(it - 1);
  }

  /// First GPU event on `stream` enqueued after `t` (kNone if none).
  uint32_t first_enqueued_after(uint16_t stream, int64_t t) const {
    const auto& q = stream_queue_[stream];
    const auto it = std::upper_bound(q.begin(), q.end(), t,
                                     [&](int64_t x, uint32_t g) { return x < launch_ts_[g]; });
    return it == q.end() ? kNone : *it;
  }

  SyncInfo infer_sync(const ThreadData& t, uint32_t call) const {
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

  /// The stream index of (device, stream), if the rank has GPU work on it.
  std::optional<uint16_t> stream_index(int64_t device, int64_t stream) const {
    const auto it = stream_index_.find({device, stream});
    if (it == stream_index_.end()) return std::nullopt;
    return it->second;
  }

  /// The cuda_sync record ("Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync") of
  /// runtime call `call` (newer Kineto with enable_cuda_sync_events): the stream it concerns, and
  /// for event waits the stream and the record call of the event.
  struct SyncRecord {
    int64_t device = -1;
    int64_t stream = -1;
    int64_t wait_on_stream = -1;
    int64_t record_correlation = -1;
  };
  std::optional<SyncRecord> sync_record(uint32_t call) const {
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

  /// A cudaStreamWaitEvent with its cuda_sync record: both ends are known. The event's task is
  /// the last GPU task enqueued on the recorded stream before the record call.
  std::optional<StreamWaitInfo> exact_stream_wait(uint32_t call, const SyncRecord& r) const {
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

  std::optional<StreamWaitInfo> infer_stream_wait(const ThreadData& t, uint32_t call) const {
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

  void plan_points() {
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
      threads_[mt].points.push_back(Point{events_[end_mark_.event].end_ps(), PointKind::kMark,
                                          end_mark_.event, end_mark_.id});
    }
  }

  void plan_handoffs() {
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
  void consider_handoff(uint32_t thread, int64_t idle_begin, int64_t resume, const Ends& ends) {
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

  /// TraceHost::kModelled: the top-level op of every host event (the outermost cpu_op that is
  /// not a label, trace_host_overheads.h), an kOpStart point per top-level op, and which of them
  /// launch (a launch-type call of the extraction under them).
  void plan_ops() {
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

  bool counts_as_launch(uint32_t call) const {
    return is_host_overhead_launch(events_[call].category, kineto_.name_of(events_[call]));
  }

  // ---- model mode: kernel descriptors from op shapes -------------------------------------

  /// Shapes and element types of the inputs of host op `op`: Kineto "Input Dims" (record_shapes),
  /// else the linked execution-trace node.
  KinetoOpInputs op_inputs(uint32_t op) const {
    KinetoOpInputs in = kineto_op_inputs(kineto_, events_[op]);
    if (!in.dims.empty() || !trace_.et) return in;
    const auto it = trace_.link.node_of_event.find(op);
    if (it == trace_.link.node_of_event.end()) return in;
    const EtNode& n = trace_.et->nodes[it->second];
    for (size_t i = 0; i < n.input_shapes.items.size(); ++i) {
      std::vector<int64_t> shape;
      for (const JsonValue& d : n.input_shapes.items[i].items) {
        if (d.is_number()) shape.push_back(d.integer);
      }
      in.dims.push_back(std::move(shape));
      std::string type = i < n.input_types.size() ? n.input_types[i] : "";
      // ET types read "Tensor(float)", "Tensor(c10::Half)".
      if (type.starts_with("Tensor(") && type.ends_with(")"))
        type = type.substr(7, type.size() - 8);
      in.types.push_back(std::move(type));
    }
    return in;
  }

  /// Why model mode keeps a kernel measured, beyond its op having no shapes or kernel model.
  enum class KeptReason : uint8_t { kShapes, kCompiled, kNonAten };

  /// What kernel `gi` computes (op_kernel_desc), from the innermost cpu op that launched it;
  /// `reason` says why not when that op's shapes are not the kernel's.
  std::optional<KernelDesc> kernel_desc(uint32_t gi, KeptReason& reason) {
    reason = KeptReason::kShapes;
    const uint32_t call = launcher_[gi];
    if (call == kNone) return std::nullopt;
    uint32_t op = kNone;
    for (uint32_t p = parent_[call]; p != kNone; p = parent_[p]) {
      if (events_[p].category == KinetoCategory::kCpuOp) {
        op = p;
        break;
      }
    }
    const std::string_view op_name =
        op == kNone ? std::string_view() : kineto_.name_of(events_[op]);
    if (is_inductor_kernel(kineto_.name_of(events_[gi])) ||
        (op != kNone && is_compiled_region_op(op_name))) {
      reason = KeptReason::kCompiled;
      return std::nullopt;
    }
    if (op == kNone) return std::nullopt;
    if (!is_registered_operator(op_name)) {
      // Inside a compiled region, an op that is no operator is the region's own code.
      reason = KeptReason::kNonAten;
      for (uint32_t p = parent_[op]; p != kNone; p = parent_[p]) {
        if (is_compiled_region_op(kineto_.name_of(events_[p]))) reason = KeptReason::kCompiled;
      }
      return std::nullopt;
    }
    const bool gemm_taken = gemm_done_.count(op) > 0;
    std::optional<KernelDesc> kd = op_kernel_desc(
        kineto_.name_of(events_[op]), kineto_.name_of(events_[gi]), op_inputs(op), gemm_taken);
    if (kd && kd->cls == KernelClass::kGemm) gemm_done_.insert(op);
    return kd;
  }

  // ---- emission ----------------------------------------------------------------------------

  /// Name of the innermost cpu op around host event `e` (annotation if no op), for display and
  /// CPU cost lookup.
  std::string_view op_name_of(uint32_t e) const {
    uint32_t annotation = kNone;
    for (uint32_t p = e; p != kNone; p = parent_[p]) {
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
    for (uint32_t p = *(it - 1); p != kNone; p = parent_[p]) {
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
    const uint32_t op = parent_[call];
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
    for (uint32_t gi : launched_.at(call)) {
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
    const ThreadData& t = threads_[ti];
    Cursor c;
    c.thread = static_cast<uint16_t>(ti);
    c.at = origin_;
    for (const Point& p : t.points)
      emit_measured(c, t, p, s);
  }

  /// Point `p` of thread `t` on the measured timeline: the host time since the cursor keeps its
  /// measured duration.
  void emit_measured(Cursor& c, const ThreadData& t, const Point& p, TraceRankSummary& s) {
    switch (p.kind) {
      case PointKind::kSplit: {
        host_work(c, p.ts, op_at(t, p.ts - 1));
        handoffs_[p.aux].trigger_task = c.last;
        break;
      }
      case PointKind::kResume: {
        Handoff& h = handoffs_[p.aux];
        host_work(c, h.idle_begin, op_at(t, h.idle_begin - 1));
        if (h.trigger_ts < c.at) break;  // the gap was already spent: no hand-off
        const TaskId w = graph_->add_cpu_op(rank_, c.thread, "wait for thread", HostPhase::kOpBody);
        fixed(w, 0);
        h.wait_task = w;
        h.wait_fallback_ps = h.trigger_ts - c.at;
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
        const uint32_t gi = launched_.at(p.event).front();
        const KinetoEvent& g = events_[gi];
        const int64_t launch_ps =
            std::min(median_launch_ps_, std::max<int64_t>(0, g.ts_ps - e.ts_ps));
        emit_launches(c, p.event, launch_ps);
        const std::string_view op = op_name_of(p.event);
        c.last = graph_->add_host_sync(rank_, c.thread, stream_of_[gi], op);
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
        const SyncInfo& si = syncs_.at(p.event);
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
                               next_launch_index(c, p.event), waits_[p.aux].task);
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
    const ThreadData& t = threads_[ti];
    Cursor c;
    c.thread = static_cast<uint16_t>(ti);
    c.at = origin_;
    const int64_t modelled_from = events_[markers_.front().event].ts_ps;
    bool modelled = false;
    int64_t busy_until = modelled_from;  // measured end of the thread's host work so far
    uint32_t previous_op = kNone;        // the last top-level op that started
    const auto long_gap = Duration::from_us_f(kSeedT1MaxGapUs).ps();
    uint32_t op = kNone;    // the open top-level op
    uint32_t launches = 0;  // its launch calls so far
    auto close_op = [&] {
      if (op != kNone && op_launches_.count(op)) {
        c.last =
            graph_->add_cpu_op(rank_, c.thread, kineto_.name_of(events_[op]), HostPhase::kOpEnd);
      }
      op = kNone;
    };
    // A point outside the open op closes it: a call by nesting, an instant by time.
    auto reach = [&](const Point& p) {
      if (op == kNone) return;
      if (p.event != kNone && p.kind != PointKind::kMark ? top_op_[p.event] != op
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
      const bool priced = counts_as_launch(call);
      const uint32_t index = priced && op != kNone ? launches++ : 0;
      bool first = true;
      for (uint32_t gi : launched_.at(call)) {
        const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(events_[call]),
                                            op_name(call), index, gpu_task_[gi]);
        if (!priced || !first) fixed(l, 0);
        first = false;
        c.last = l;
        emit_record(c, gi, op_name(call));
      }
    };
    for (const Point& p : t.points) {
      if (!modelled) {
        const bool first_mark = p.kind == PointKind::kMark && p.event == markers_.front().event;
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
                              parent_[p.event] != parent_[previous_op];
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
          handoffs_[p.aux].trigger_task = c.last;
          break;
        case PointKind::kResume: {
          Handoff& h = handoffs_[p.aux];
          const TaskId w =
              graph_->add_cpu_op(rank_, c.thread, "wait for thread", HostPhase::kOpBody);
          fixed(w, 0);
          h.wait_task = w;
          h.wait_fallback_ps = h.trigger_ts - h.idle_begin;
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
          c.last =
              graph_->add_cpu_op(rank_, c.thread, kineto_.name_of(events_[op]),
                                 op_launches_.count(op) ? HostPhase::kOpBegin : HostPhase::kOpBody);
          break;
        case PointKind::kLaunch:
          launch(p.event);
          break;
        case PointKind::kBlockingCopy: {
          launch(p.event);
          c.last = graph_->add_host_sync(rank_, c.thread, stream_of_[launched_.at(p.event).front()],
                                         op_name(p.event));
          ++s.host_syncs;
          ++s.blocking_copies;
          break;
        }
        case PointKind::kSync: {
          if (op != kNone && counts_as_launch(p.event)) ++launches;
          c.last =
              graph_->add_host_sync(rank_, c.thread, syncs_.at(p.event).target, op_name(p.event));
          ++s.host_syncs;
          break;
        }
        case PointKind::kStreamWait: {
          const TaskId l = graph_->add_launch(rank_, c.thread, kineto_.name_of(events_[p.event]),
                                              op_name(p.event), 0, waits_[p.aux].task);
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
    std::vector<uint32_t> order = orphans_;
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

  const RankTrace& trace_;
  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const TraceGraphOptions& options_;

  int64_t first_ps_ = 0;
  int64_t last_ps_ = 0;
  std::vector<ThreadData> threads_;
  std::vector<uint32_t> thread_of_event_;
  std::map<std::pair<int64_t, int64_t>, uint16_t> stream_index_;
  std::vector<uint16_t> stream_of_;
  std::vector<uint32_t> gpu_events_;
  std::vector<uint32_t> launcher_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> launched_;
  std::vector<uint32_t> orphans_;
  std::vector<int64_t> launch_ts_;
  std::vector<std::vector<uint32_t>> stream_queue_;
  int64_t median_launch_ps_ = 5'000'000;
  std::vector<uint32_t> parent_;
  std::vector<Marker> markers_;
  Marker end_mark_;
  std::vector<TraceIteration> iterations_;
  std::vector<NcclKernel> nccl_;
  std::unordered_map<uint32_t, SyncInfo> syncs_;
  std::unordered_map<int64_t, uint32_t> call_of_correlation_;
  std::unordered_set<uint32_t> gemm_done_;  // model mode: ops whose GEMM kernel was assigned
  std::unordered_map<int64_t, uint32_t> sync_record_;  // runtime correlation -> cuda_sync event
  std::vector<StreamWaitInfo> waits_;
  uint64_t waits_dropped_ = 0;
  std::vector<Handoff> handoffs_;
  std::vector<uint32_t> top_op_;              // TraceHost::kModelled: host event -> its op
  std::unordered_set<uint32_t> op_launches_;  // TraceHost::kModelled: top-level ops that launch

  TaskGraph* graph_ = nullptr;
  RankId rank_ = 0;
  int64_t origin_ = 0;
  std::vector<TaskId> gpu_task_;
  std::unordered_map<uint32_t, TaskId> record_task_;
};

std::string join(const std::vector<size_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  return out;
}

}  // namespace

std::vector<uint32_t> job_collective_members(const std::vector<int64_t>& recorded_ranks,
                                             int64_t group_size, uint32_t rank, uint32_t world,
                                             bool& assumed_world) {
  assumed_world = false;
  std::vector<uint32_t> out;
  if (!recorded_ranks.empty()) {
    for (const int64_t r : recorded_ranks) {
      if (r < 0 || r >= static_cast<int64_t>(world)) return {};
      out.push_back(static_cast<uint32_t>(r));
    }
  } else if (group_size <= 0 || group_size == static_cast<int64_t>(world)) {
    assumed_world = group_size <= 0;
    for (uint32_t r = 0; r < world; ++r)
      out.push_back(r);
  }
  if (std::find(out.begin(), out.end(), rank) == out.end()) return {};
  return out;
}

bool is_compiled_region_op(std::string_view op) {
  return op == "CompiledFunction" || op == "CompiledFunctionBackward" ||
         op.ends_with(": CompiledFunctionBackward") || op.starts_with("Torch-Compiled Region") ||
         op.starts_with("## Call CompiledFxGraph") || op.starts_with("CompiledFxGraph");
}

bool is_inductor_kernel(std::string_view kernel) {
  return kernel.starts_with("triton_");
}

bool is_registered_operator(std::string_view op) {
  const size_t colons = op.find("::");
  if (colons == std::string_view::npos || colons == 0) return false;
  if (op.starts_with("torch::autograd::") || op.starts_with("autograd::")) return false;
  return op.find_first_of(" <>#:", colons + 2) == std::string_view::npos &&
         op.substr(0, colons).find_first_of(" <>#") == std::string_view::npos;
}

std::optional<KernelDesc> op_kernel_desc(std::string_view op, std::string_view kernel,
                                         const KinetoOpInputs& in, bool gemm_taken) {
  if (!is_registered_operator(op) || is_inductor_kernel(kernel)) return std::nullopt;
  if (op.find("embedding") != std::string_view::npos) return std::nullopt;
  if (is_convolution_op(op)) return std::nullopt;
  if (in.dims.empty()) return std::nullopt;
  auto elem_bytes = [&](size_t i) {
    const int64_t b = i < in.types.size() ? kineto_type_bytes(in.types[i]) : -1;
    return b > 0 ? b : 4;
  };
  auto elems = [&](size_t i) {
    int64_t n = 1;
    for (int64_t d : in.dims[i])
      n *= std::max<int64_t>(d, 0);
    return n;
  };
  KernelDesc kd;
  const std::string_view type = in.types.empty() ? std::string_view("float") : in.types.front();
  kd.dtype = type == "c10::Half"       ? DType::kFp16
             : type == "c10::BFloat16" ? DType::kBf16
                                       : DType::kFp32;
  const bool gemm_named = contains_nocase(kernel, "gemm") || contains_nocase(kernel, "gemv");
  if (gemm_named && !gemm_taken) {
    if (const auto g = gemm_shape(op, in)) return gemm_kernel(kd.dtype, g->batch, g->m, g->n, g->k);
  }
  kd.cls = KernelClass::kMemoryBound;
  double largest = 0.0;
  double max_elems = 0.0;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (in.dims[i].empty()) continue;  // a scalar or a non-tensor argument
    const auto bytes = static_cast<double>(elems(i) * elem_bytes(i));
    kd.bytes_read += bytes;
    largest = std::max(largest, bytes);
    max_elems = std::max(max_elems, static_cast<double>(elems(i)));
  }
  kd.bytes_written = largest;
  kd.flops = max_elems;
  // The op's family, as the generators name it (workloads/pytorch/kernels.h), so a traced op is
  // priced on the same curve as a generated one; row-wise ops work on rows of the first input's
  // last dimension.
  kd.memory_op = pytorch::memory_op_of_aten(op);
  if (pytorch::is_rowwise(kd.memory_op) && !in.dims.front().empty()) {
    kd.row_elements = std::max<int64_t>(in.dims.front().back(), 0);
  }
  return kd;
}

TraceGraphInfo build_replay_graph(const std::vector<RankTrace>& traces, TaskGraph& graph,
                                  const TraceGraphOptions& options) {
  if (traces.empty()) throw ParseError("(no file)", "no trace to build a graph from");
  std::vector<RankBuilder> builders;
  builders.reserve(traces.size());
  for (const RankTrace& t : traces) {
    builders.emplace_back(t, options);
    builders.back().analyse();
  }
  // One clock: rank r's local ps + offset[r] = ps since the earliest base.
  int64_t base = INT64_MAX;
  for (const RankTrace& t : traces)
    base = std::min(base, t.kineto.base_us);
  std::vector<int64_t> offset(traces.size());
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
      if (builders[r].first_ps() + offset[r] > latest_first) {
        latest_first = builders[r].first_ps() + offset[r];
        late = r;
      }
      if (builders[r].last_ps() + offset[r] < earliest_last) {
        earliest_last = builders[r].last_ps() + offset[r];
        early = r;
      }
    }
    if (latest_first > earliest_last) {
      throw ParseError(traces[late].kineto.file,
                       "this trace starts after " + file_name(traces[early].kineto.file) +
                           " ends: the traces are not of the same run (or their clocks differ)");
    }
  }
  int64_t origin = INT64_MAX;
  for (size_t r = 0; r < traces.size(); ++r)
    origin = std::min(origin, builders[r].first_ps() + offset[r]);

  // Collectives across ranks.
  bool keyed = true;
  for (const RankBuilder& b : builders) {
    for (const NcclKernel& n : b.nccl())
      keyed &= !n.key.empty();
  }
  for (RankBuilder& b : builders) {
    auto& kernels = b.nccl_mut();
    for (size_t i = 0; i < kernels.size(); ++i) {
      if (!keyed) kernels[i].key = "#" + std::to_string(i);
    }
  }
  struct Member {
    size_t rank;
    size_t index;
  };
  std::vector<std::string> group_keys;
  std::map<std::string, std::vector<Member>> groups;
  for (size_t r = 0; r < builders.size(); ++r) {
    const auto& kernels = builders[r].nccl();
    for (size_t i = 0; i < kernels.size(); ++i) {
      auto [it, inserted] = groups.try_emplace(kernels[i].key);
      if (inserted) group_keys.push_back(kernels[i].key);
      it->second.push_back(Member{r, i});
    }
  }
  // The GPU each trace runs on: its global rank for one trace of a larger job (model mode), else
  // its position.
  const bool partial_job =
      options.mode == TraceMode::kModel && builders.size() == 1 && options.job_world_size > 1;
  std::vector<RankId> device(builders.size());
  for (size_t r = 0; r < builders.size(); ++r)
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
  std::vector<uint64_t> job_collectives(builders.size(), 0);
  std::vector<uint64_t> world_assumed(builders.size(), 0);
  std::vector<std::vector<CollectiveId>> collective_of(builders.size());
  std::vector<std::vector<int64_t>> collective_ps(builders.size());
  std::vector<std::vector<uint8_t>> collective_alone(builders.size());
  for (size_t r = 0; r < builders.size(); ++r) {
    collective_of[r].assign(builders[r].nccl().size(), 0);
    collective_ps[r].assign(builders[r].nccl().size(), 0);
    collective_alone[r].assign(builders[r].nccl().size(), 0);
  }
  TraceGraphInfo info;
  for (const std::string& key : group_keys) {
    const std::vector<Member>& members = groups.at(key);
    const NcclKernel& first = builders[members.front().rank].nccl()[members.front().index];
    std::vector<size_t> present;
    for (const Member& m : members)
      present.push_back(m.rank);
    const bool whole_group =
        first.pg_size > 0 && static_cast<size_t>(first.pg_size) == members.size();
    if (builders.size() > 1 && members.size() != builders.size() && !whole_group) {
      std::vector<size_t> missing;
      for (size_t r = 0; r < builders.size(); ++r) {
        if (std::find(present.begin(), present.end(), r) == present.end()) missing.push_back(r);
      }
      const size_t blame = missing.empty() ? members.front().rank : missing.front();
      throw ParseError(traces[blame].kineto.file,
                       "collective `" + first.op_name + "` (" +
                           (keyed ? "process group " + first.pg + ", sequence number " +
                                        std::to_string(first.seq)
                                  : "NCCL kernel " + key) +
                           ") is in the traces of ranks " + join(present) + " but not of ranks " +
                           join(missing) + ": the traces do not belong to one run");
    }
    CollectiveDesc desc;
    desc.kind = first.kind.value_or(CollectiveKind::kAllReduce);
    int64_t duration = INT64_MAX;
    for (const Member& m : members) {
      desc.members.push_back(device[m.rank]);
      const NcclKernel& n = builders[m.rank].nccl()[m.index];
      duration = std::min(duration, builders[m.rank].kineto().events[n.gpu].dur_ps);
      desc.bytes = std::max(desc.bytes, n.bytes);
    }
    // One trace of a larger job: the group's GPUs, the traced rank first, mirrored by the others.
    bool over_job = false;
    if (partial_job) {
      bool assumed_world = false;
      const std::vector<uint32_t> gpus = job_collective_members(
          first.pg_ranks, first.pg_size, device[0], options.job_world_size, assumed_world);
      if (gpus.size() > 1) {
        over_job = true;
        desc.members = {device[0]};
        for (const uint32_t g : gpus) {
          if (g != device[0]) desc.members.push_back(g);
        }
        desc.simulated_members = 1;
        ++job_collectives[0];
        if (assumed_world) ++world_assumed[0];
      }
    }
    if (desc.kind == CollectiveKind::kAllToAll) {
      const size_t n = desc.members.size();
      std::vector<int64_t> sizes(n * n, 0);
      for (size_t i = 0; i < n; ++i) {
        // Mirrored members send as the traced rank does (its split rotated to their position).
        const Member& m = members[over_job ? 0 : i];
        const NcclKernel& k = builders[m.rank].nccl()[m.index];
        for (size_t j = 0; j < n; ++j) {
          sizes[i * n + j] = k.send_bytes.size() == n
                                 ? k.send_bytes[(j + n - i) % n]
                                 : std::max<int64_t>(0, k.bytes) / static_cast<int64_t>(n);
          if (!over_job && k.send_bytes.size() == n) sizes[i * n + j] = k.send_bytes[j];
        }
      }
      desc.send_bytes = AllToAllSizes::dense(n, std::move(sizes));
    }
    const CollectiveId id = graph.add_collective_group(desc, first.op_name + " " + key);
    ++info.collective_groups;
    for (const Member& m : members) {
      collective_of[m.rank][m.index] = id;
      collective_ps[m.rank][m.index] = duration;
      collective_alone[m.rank][m.index] = desc.members.size() == 1 ? 1 : 0;
    }
  }
  for (size_t r = 0; r < builders.size(); ++r) {
    builders[r].plan();
    info.ranks.push_back(builders[r].emit(graph, collective_of[r], collective_ps[r],
                                          collective_alone[r], origin - offset[r],
                                          partial_job ? device[r] : kNoDevice));
    info.ranks.back().collectives_over_job = job_collectives[r];
    info.ranks.back().collectives_world_assumed = world_assumed[r];
  }
  return info;
}

}  // namespace upsim
