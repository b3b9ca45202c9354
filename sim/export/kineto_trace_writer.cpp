#include "sim/export/kineto_trace_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "sim/export/chunked_file.h"
#include "sim/export/json_members.h"
#include "sim/export/kineto_collectives.h"

namespace upsim {

namespace {

/// Version of this writer's event layout; bump it when names, args or tracks change.
constexpr int kFormatVersion = 1;
/// begin_ps_ of a task that is not running.
constexpr int64_t kNotRunning = -1;
/// begin_ps_ of a task that began outside KinetoTraceOptions::iterations: not written.
constexpr int64_t kOutsideIterations = -2;
/// The host process of a rank: this + the rank's GPU (above every GPU index, as an OS process id
/// is above the device ids Kineto uses as the GPUs' pids).
constexpr int64_t kHostPidBase = 1'000'000;
/// CUDA stream id of a rank's stream 0 (CUPTI numbers the default stream 7).
constexpr int64_t kFirstStreamId = 7;
/// Kineto's tid offset of "Stream Sync" rows (libkineto output_json.h kSyncStreamTidOffset).
constexpr int64_t kSyncTidOffset = 1'000'000;
/// A rank's buffer is appended to its file at this size: the budget shared by the ranks written,
/// within these bounds.
constexpr size_t kMinRankBuffer = size_t{64} << 10;
constexpr size_t kMaxRankBuffer = size_t{4} << 20;

/// CUPTI's name of a copy (libkineto memcpyName); host memory is taken as pinned, as
/// DataLoader(pin_memory=True) and the non-blocking copies of training loops use it.
std::string_view memcpy_name(TransferKind kind) {
  switch (kind) {
    case TransferKind::kHostToDevice:
      return "Memcpy HtoD (Pinned -> Device)";
    case TransferKind::kDeviceToHost:
      return "Memcpy DtoH (Device -> Pinned)";
    case TransferKind::kDeviceToDevice:
      return "Memcpy DtoD (Device -> Device)";
  }
  return "Memcpy DtoD (Device -> Device)";
}

bool has_gpu_event(TaskKind kind) {
  return kind == TaskKind::kKernel || kind == TaskKind::kMemcpy || kind == TaskKind::kCollective;
}

}  // namespace

std::string kineto_trace_file_name(uint32_t global_rank, bool gzip) {
  return fmt::format("rank_{}.json{}", global_rank, gzip ? ".gz" : "");
}

class KinetoTraceWriter::Impl {
 public:
  Impl(std::vector<KinetoRankFile> files, KinetoTraceOptions options)
      : files_(std::move(files)), options_(std::move(options)) {}

  void add_metadata(std::string key, std::string value) {
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  bool finished() const { return finished_; }

  void run_begin(const TaskGraph& graph) {
    check_files(graph);
    graph_ = &graph;
    finished_ = false;
    last_ps_ = 0;
    next_external_ = 1;
    begin_ps_.assign(graph.task_count(), kNotRunning);
    marks_seen_.assign(graph.rank_count(), 0);
    last_end_.assign(graph.rank_count(), 0);
    launched_external_.clear();
    world_size_ = world_size(graph);
    groups_ = kineto_process_groups(graph, world_size_);
    out_index_.assign(graph.rank_count(), kNotDrawn);
    ranks_.clear();
    ranks_.reserve(files_.size());
    for (const KinetoRankFile& f : files_) {
      out_index_[f.rank] = static_cast<uint32_t>(ranks_.size());
      const bool gzip = options_.gzip.value_or(f.path.extension() == ".gz");
      ranks_.push_back(
          RankOut{f.rank, graph.device_of(f.rank), ChunkedFile(f.path, gzip, "Kineto trace"), {}});
    }
    buffer_limit_ = std::clamp(kKinetoBufferBudget / std::max<size_t>(1, ranks_.size()),
                               kMinRankBuffer, kMaxRankBuffer);
    for (RankOut& r : ranks_) {
      r.ops.assign(graph.rank(r.rank).cpu_threads, {});
      r.sync_named.assign(graph.rank(r.rank).stream_names.size(), 0);
      r.file.create();
      write_header(r);
      write_track_names(r);
      flush(r);
    }
  }

  void task_begin(TaskId task, Time at) {
    note_time(at);
    const Task& t = graph_->task(task);
    RankOut* r = out_of(t.rank);
    if (r == nullptr) return;
    if (options_.iterations) {
      // An iteration mark starts the iteration after the ones its rank has seen.
      const uint32_t iteration = marks_seen_[t.rank] + (t.kind == TaskKind::kIterationMark ? 1 : 0);
      if (iteration < options_.iterations->first || iteration > options_.iterations->second) {
        begin_ps_[task] = kOutsideIterations;
        return;
      }
    }
    begin_ps_[task] = at.ps();
    if (t.kind == TaskKind::kCpuOp && t.phase == HostPhase::kOpBegin) {
      r->ops[t.resource].push_back(OpenOp{t.op_name, at.ps(), next_external_++, {}});
    }
  }

  void task_end(TaskId task, Time at) {
    note_time(at);
    const Task& t = graph_->task(task);
    last_end_[t.rank] = std::max(last_end_[t.rank], at.ps());
    if (t.kind == TaskKind::kIterationMark) ++marks_seen_[t.rank];
    RankOut* r = out_of(t.rank);
    if (r == nullptr) return;
    const int64_t begin = begin_ps_[task];
    begin_ps_[task] = kNotRunning;
    if (t.kind == TaskKind::kIterationMark) {
      mark(*r, task, t, at.ps(), begin != kOutsideIterations);
      return;
    }
    if (begin == kOutsideIterations) {
      launched_external_.erase(task);
      return;
    }
    // An end without a begin (an observer attached mid-run) is written as an instant.
    emit_task(*r, task, begin == kNotRunning ? at.ps() : begin, at.ps(), /*unfinished=*/false);
    flush_if_full(*r);
  }

  void run_end(Time at) {
    note_time(at);
    finish();
  }

  void finish() {
    if (graph_ == nullptr) {
      throw std::logic_error("KinetoTraceWriter::finish called before on_run_begin");
    }
    if (finished_) return;
    for (TaskId t = 0; t < begin_ps_.size(); ++t) {
      if (begin_ps_[t] < 0) continue;  // not running, or outside the iterations written
      RankOut* r = out_of(graph_->task(t).rank);
      last_end_[graph_->task(t).rank] = last_ps_;
      if (r != nullptr) emit_task(*r, t, begin_ps_[t], last_ps_, /*unfinished=*/true);
    }
    for (RankOut& r : ranks_) {
      for (uint16_t thread = 0; thread < r.ops.size(); ++thread) {
        while (!r.ops[thread].empty())
          close_top_op(r, thread, last_ps_, /*unfinished=*/true);
      }
      if (r.step) close_step(r, last_end_[r.rank]);
      r.buf += "\n]}\n";
      flush(r);
    }
    for (RankOut& r : ranks_)
      r.file.commit();
    finished_ = true;
    begin_ps_ = {};
    launched_external_.clear();
  }

 private:
  static constexpr uint32_t kNotDrawn = UINT32_MAX;

  /// An op open on a CPU thread: its events wait in `children` until it closes, so that the op
  /// is written before what it encloses.
  struct OpenOp {
    NameId name = 0;
    int64_t begin_ps = 0;
    uint64_t external_id = 0;
    std::string children;
  };
  /// A ProfilerStep begun at an iteration mark, written when the next mark (or the run) ends it.
  struct OpenStep {
    uint32_t iteration = 0;
    uint16_t thread = 0;
    int64_t begin_ps = 0;
    uint64_t external_id = 0;
  };
  struct RankOut {
    RankId rank = 0;
    uint32_t device = 0;
    ChunkedFile file;
    std::string buf{};
    /// Per CPU thread, the open ops, innermost last.
    std::vector<std::vector<OpenOp>> ops{};
    std::optional<OpenStep> step{};
    /// Per stream: its "Stream Sync" row is named.
    std::vector<uint8_t> sync_named{};
  };

  // ---- set-up ------------------------------------------------------------------------------
  void check_files(const TaskGraph& graph) const {
    std::vector<uint8_t> seen(graph.rank_count(), 0);
    for (const KinetoRankFile& f : files_) {
      if (f.rank >= graph.rank_count()) {
        throw std::invalid_argument(
            fmt::format("Kineto trace: rank {} is not in the graph (ranks 0-{})", f.rank,
                        graph.rank_count() == 0 ? 0 : graph.rank_count() - 1));
      }
      if (seen[f.rank] != 0) {
        throw std::invalid_argument(fmt::format("Kineto trace: rank {} is listed twice", f.rank));
      }
      seen[f.rank] = 1;
    }
    const size_t devices = options_.devices.size();
    if (devices > 1 && devices < graph.rank_count()) {
      throw std::invalid_argument(
          fmt::format("Kineto trace: {} device profiles for {} ranks (give one, or one per rank)",
                      devices, graph.rank_count()));
    }
  }

  static uint32_t world_size(const TaskGraph& graph) {
    uint32_t highest = 0;
    for (RankId r = 0; r < graph.rank_count(); ++r)
      highest = std::max(highest, graph.device_of(r));
    for (CollectiveId c = 0; c < graph.collective_count(); ++c) {
      for (const RankId m : graph.collective(c).members)
        highest = std::max(highest, m);
    }
    return highest + 1;
  }

  void write_header(RankOut& r) {
    std::string& out = r.buf;
    out += "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [";
    if (!options_.devices.empty()) {
      const DeviceProfile& d = options_.devices[options_.devices.size() == 1 ? 0 : r.rank];
      out += '{';
      JsonMembers props(out);
      props.uinteger("id", r.device).str("name", d.name).integer("totalGlobalMem", d.hbm_bytes);
      if (d.compute_capability > 0) {
        props.integer("computeMajor", d.compute_capability / 10)
            .integer("computeMinor", d.compute_capability % 10);
      }
      props.integer("numSms", d.sm_count);
      out += '}';
    }
    // Spaces after the colons: HTA reads a file's rank with `"rank":\s+(\d+)`.
    fmt::format_to(std::back_inserter(out),
                   "],\n  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, "
                   "\"world_size\": {}}},\n  \"otherData\": {{",
                   r.device, world_size_);
    JsonMembers other(out);
    other.str("generator", "upsim").integer("format_version", kFormatVersion);
    for (const auto& [key, value] : metadata_)
      other.str(key, value);
    out +=
        "},\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": 0,\n  "
        "\"traceEvents\": [";
  }

  /// process_name / thread_name metadata of the rank's host process, threads, GPU and streams.
  /// The first event of the array (no comma before it); every later one starts with ",\n".
  void write_track_names(RankOut& r) {
    const RankInfo& info = graph_->rank(r.rank);
    std::string& out = r.buf;
    out += '\n';
    name_event(out, "process_name", host_pid(r), 0, info.name, /*first=*/true);
    for (uint16_t t = 0; t < info.cpu_threads; ++t) {
      name_event(out, "thread_name", host_pid(r), cpu_tid(r, t),
                 fmt::format("thread {} (upsim)", cpu_tid(r, t)));
    }
    name_event(out, "process_name", r.device, 0, fmt::format("GPU {}", r.device));
    for (size_t s = 0; s < info.stream_names.size(); ++s) {
      const int64_t id = stream_id(static_cast<uint16_t>(s));
      name_event(out, "thread_name", r.device, id,
                 info.stream_names[s].empty()
                     ? fmt::format("stream {}", id)
                     : fmt::format("stream {} {}", id, info.stream_names[s]));
    }
  }

  void name_event(std::string& out, std::string_view what, int64_t pid, int64_t tid,
                  std::string_view name, bool first = false) {
    out += first ? "{" : ",\n{";
    JsonMembers e(out);
    e.str("name", what).str("ph", "M").us("ts", 0).integer("pid", pid).integer("tid", tid);
    JsonMembers(e.object("args")).str("name", name);
    out += "}}";
  }

  // ---- tracks ------------------------------------------------------------------------------
  RankOut* out_of(RankId rank) {
    const uint32_t i = out_index_[rank];
    return i == kNotDrawn ? nullptr : &ranks_[i];
  }
  static int64_t host_pid(const RankOut& r) { return kHostPidBase + r.device; }
  static int64_t cpu_tid(const RankOut& r, uint16_t thread) { return host_pid(r) + thread; }
  static int64_t stream_id(uint16_t stream) { return kFirstStreamId + stream; }

  /// Where a host event of `thread` goes: its innermost open op, else the rank's buffer.
  static std::string& host_target(RankOut& r, uint16_t thread) {
    std::vector<OpenOp>& ops = r.ops[thread];
    return ops.empty() ? r.buf : ops.back().children;
  }

  /// Opens `,\n{"ph":"X","cat":..,"name":..,"pid":..,"tid":..,"ts":..,"dur":..,"args":{` (the
  /// order Kineto writes) and returns the args writer; the caller closes with "}}".
  static JsonMembers complete(std::string& out, std::string_view cat, std::string_view name,
                              int64_t pid, int64_t tid, int64_t begin_ps, int64_t end_ps) {
    out += ",\n{";
    JsonMembers e(out);
    e.str("ph", "X")
        .str("cat", cat)
        .str("name", name)
        .integer("pid", pid)
        .integer("tid", tid)
        .us("ts", begin_ps)
        .us("dur", end_ps - begin_ps);
    return JsonMembers(e.object("args"));
  }

  /// An ac2g flow end: 's' at a runtime call, 'f' (binding to the enclosing slice) at GPU work.
  static void flow(std::string& out, char phase, int64_t id, int64_t pid, int64_t tid,
                   int64_t at_ps) {
    out += ",\n{";
    JsonMembers e(out);
    e.str("ph", std::string_view(&phase, 1))
        .integer("id", id)
        .integer("pid", pid)
        .integer("tid", tid)
        .us("ts", at_ps)
        .str("cat", "ac2g")
        .str("name", "ac2g");
    if (phase == 'f') e.str("bp", "e");
    out += '}';
  }

  // ---- events ------------------------------------------------------------------------------
  void emit_task(RankOut& r, TaskId id, int64_t begin_ps, int64_t end_ps, bool unfinished) {
    const Task& t = graph_->task(id);
    switch (t.kind) {
      case TaskKind::kCpuOp:
        emit_cpu_op(r, t, begin_ps, end_ps, unfinished);
        break;
      case TaskKind::kLaunch:
        emit_launch(r, id, t, begin_ps, end_ps, unfinished);
        break;
      case TaskKind::kHostSync:
        emit_sync(r, id, t, begin_ps, end_ps, unfinished);
        break;
      case TaskKind::kKernel:
      case TaskKind::kMemcpy:
      case TaskKind::kCollective:
        emit_gpu(r, id, t, begin_ps, end_ps, unfinished);
        break;
      case TaskKind::kStreamWait:
        emit_stream_wait(r, id, t, begin_ps, end_ps, unfinished);
        break;
      case TaskKind::kIterationMark:  // mark()
      case TaskKind::kEventRecord:    // its cudaEventRecord call is its launch's event
        break;
    }
  }

  void emit_cpu_op(RankOut& r, const Task& t, int64_t begin_ps, int64_t end_ps, bool unfinished) {
    switch (t.phase) {
      case HostPhase::kOpBegin:  // opened in task_begin
        return;
      case HostPhase::kOpEnd:
        close_op(r, t.resource, t.op_name, end_ps);
        return;
      default:
        break;
    }
    const bool label = t.phase == HostPhase::kMarker;
    JsonMembers args = complete(host_target(r, t.resource), label ? "user_annotation" : "cpu_op",
                                graph_->name(label ? t.name : t.op_name), host_pid(r),
                                cpu_tid(r, t.resource), begin_ps, end_ps);
    args.uinteger("External id", next_external_++);
    if (unfinished) args.boolean("unfinished", true);
    host_target(r, t.resource) += "}}";
  }

  /// A runtime call's op: the innermost open one, or (none open) a cpu_op of the call's span
  /// named by the task's op, written before the call. Returns its External id.
  uint64_t enclosing_op(RankOut& r, const Task& t, int64_t begin_ps, int64_t end_ps) {
    std::vector<OpenOp>& ops = r.ops[t.resource];
    if (!ops.empty()) return ops.back().external_id;
    const uint64_t external = next_external_++;
    JsonMembers args = complete(r.buf, "cpu_op", graph_->name(t.op_name), host_pid(r),
                                cpu_tid(r, t.resource), begin_ps, end_ps);
    args.uinteger("External id", external);
    r.buf += "}}";
    return external;
  }

  void emit_launch(RankOut& r, TaskId id, const Task& t, int64_t begin_ps, int64_t end_ps,
                   bool unfinished) {
    const uint64_t external = enclosing_op(r, t, begin_ps, end_ps);
    std::string& out = host_target(r, t.resource);
    const TaskId first = graph_->launched_task(id);
    const Task& g = graph_->task(first);
    if (g.kind == TaskKind::kCollective) {
      // PyTorch's record_param_comms around the NCCL launch, holding the collective's metadata.
      JsonMembers args = complete(out, "cpu_op", "record_param_comms", host_pid(r),
                                  cpu_tid(r, t.resource), begin_ps, end_ps);
      args.uinteger("External id", next_external_++);
      append_collective_metadata(args, *graph_, graph_->collective_of(first), r.device, groups_);
      args.uinteger("Rank", r.device);
      out += "}}";
    }
    JsonMembers args = complete(out, "cuda_runtime", graph_->name(t.name), host_pid(r),
                                cpu_tid(r, t.resource), begin_ps, end_ps);
    args.uinteger("External id", external).uinteger("correlation", uint64_t{id} + 1);
    if (unfinished) args.boolean("unfinished", true);
    out += "}}";
    if (unfinished) return;
    for (const TaskId gpu : graph_->launched_tasks(id)) {
      if (has_gpu_event(graph_->task(gpu).kind)) launched_external_[gpu] = external;
    }
    if (has_gpu_event(g.kind))
      flow(out, 's', int64_t{id} + 1, host_pid(r), cpu_tid(r, t.resource), begin_ps);
  }

  void emit_sync(RankOut& r, TaskId id, const Task& t, int64_t begin_ps, int64_t end_ps,
                 bool unfinished) {
    const uint64_t external = enclosing_op(r, t, begin_ps, end_ps);
    const uint16_t target = graph_->sync_target(id);
    const bool all = target == kAllStreams;
    std::string& out = host_target(r, t.resource);
    JsonMembers args =
        complete(out, "cuda_runtime", all ? "cudaDeviceSynchronize" : "cudaStreamSynchronize",
                 host_pid(r), cpu_tid(r, t.resource), begin_ps, end_ps);
    args.uinteger("External id", external).uinteger("correlation", uint64_t{id} + 1);
    if (unfinished) args.boolean("unfinished", true);
    out += "}}";
    if (all) return;
    // The stream it waited for, as Kineto's enable_cuda_sync_events records it.
    const int64_t stream = stream_id(target);
    if (r.sync_named[target] == 0) {
      r.sync_named[target] = 1;
      name_event(r.buf, "thread_name", r.device, stream + kSyncTidOffset,
                 fmt::format("stream {} (sync)", stream));
    }
    JsonMembers sync = complete(r.buf, "cuda_sync", "Stream Sync", r.device,
                                stream + kSyncTidOffset, begin_ps, end_ps);
    sync.str("cuda_sync_kind", "Stream Sync")
        .integer("stream", stream)
        .uinteger("correlation", uint64_t{id} + 1)
        .uinteger("device", r.device)
        .integer("context", 1);
    r.buf += "}}";
  }

  void emit_gpu(RankOut& r, TaskId id, const Task& t, int64_t begin_ps, int64_t end_ps,
                bool unfinished) {
    const TaskId launcher = graph_->launcher_of(id);
    const auto launch = launched_external_.find(id);
    const bool launch_written = launch != launched_external_.end();
    std::string name;
    std::string_view cat = "kernel";
    if (t.kind == TaskKind::kMemcpy) {
      name = memcpy_name(graph_->transfer(id).kind);
      cat = "gpu_memcpy";
    } else if (t.kind == TaskKind::kCollective) {
      name = nccl_kernel_name(graph_->collective(graph_->collective_of(id)));
    } else {
      name = graph_->name(t.name);
    }
    const int64_t stream = stream_id(t.resource);
    JsonMembers args = complete(r.buf, cat, name, r.device, stream, begin_ps, end_ps);
    if (launch_written) args.uinteger("External id", launch->second);
    args.integer("queued", 0)
        .uinteger("device", r.device)
        .integer("context", 1)
        .integer("stream", stream);
    if (launcher != kNoTask) args.uinteger("correlation", uint64_t{launcher} + 1);
    if (t.kind == TaskKind::kMemcpy) args.integer("bytes", graph_->transfer(id).bytes);
    if (t.kind == TaskKind::kCollective) {
      append_collective_metadata(args, *graph_, graph_->collective_of(id), r.device, groups_);
    }
    if (unfinished) args.boolean("unfinished", true);
    r.buf += "}}";
    if (launch_written) {
      launched_external_.erase(launch);
      // A graph launch's flow ends at the first task it enqueues.
      if (graph_->launched_task(launcher) == id) {
        flow(r.buf, 'f', int64_t{launcher} + 1, r.device, stream, begin_ps);
      }
    }
  }

  void emit_stream_wait(RankOut& r, TaskId id, const Task& t, int64_t begin_ps, int64_t end_ps,
                        bool unfinished) {
    const TaskId record = graph_->awaited_record(id);
    const TaskId record_launch = graph_->launcher_of(record);
    const TaskId launcher = graph_->launcher_of(id);
    const int64_t stream = stream_id(t.resource);
    JsonMembers args =
        complete(r.buf, "cuda_sync", "Stream Wait Event", r.device, stream, begin_ps, end_ps);
    args.str("cuda_sync_kind", "Stream Wait Event")
        .integer("wait_on_stream", stream_id(graph_->task(record).resource))
        .integer("wait_on_cuda_event_record_corr_id",
                 record_launch == kNoTask ? -1 : int64_t{record_launch} + 1)
        .integer("stream", stream)
        .integer("correlation", launcher == kNoTask ? -1 : int64_t{launcher} + 1)
        .uinteger("device", r.device)
        .integer("context", 1);
    if (unfinished) args.boolean("unfinished", true);
    r.buf += "}}";
  }

  /// Closes op `name` on `thread` (the innermost open op of that name, and any left open inside
  /// it) at `end_ps`. An op that is not open (its begin was outside the iterations) is skipped.
  void close_op(RankOut& r, uint16_t thread, NameId name, int64_t end_ps) {
    const std::vector<OpenOp>& ops = r.ops[thread];
    auto it =
        std::find_if(ops.rbegin(), ops.rend(), [&](const OpenOp& o) { return o.name == name; });
    if (it == ops.rend()) return;
    const size_t keep = static_cast<size_t>(ops.rend() - it) - 1;
    while (r.ops[thread].size() > keep)
      close_top_op(r, thread, end_ps, /*unfinished=*/r.ops[thread].size() > keep + 1);
  }

  /// Writes the innermost open op of `thread`, then its children, into what encloses it.
  void close_top_op(RankOut& r, uint16_t thread, int64_t end_ps, bool unfinished) {
    OpenOp op = std::move(r.ops[thread].back());
    r.ops[thread].pop_back();
    std::string& out = host_target(r, thread);
    JsonMembers args = complete(out, "cpu_op", graph_->name(op.name), host_pid(r),
                                cpu_tid(r, thread), op.begin_ps, std::max(end_ps, op.begin_ps));
    args.uinteger("External id", op.external_id);
    if (unfinished) args.boolean("unfinished", true);
    out += "}}";
    out += op.children;
  }

  /// An iteration mark: it ends the rank's open ProfilerStep and, when written, begins the next.
  void mark(RankOut& r, TaskId id, const Task& t, int64_t at_ps, bool written) {
    if (r.step) close_step(r, at_ps);
    if (!written) return;
    r.step = OpenStep{graph_->iteration_of(id), t.resource, at_ps, next_external_++};
  }

  void close_step(RankOut& r, int64_t end_ps) {
    const OpenStep& s = *r.step;
    JsonMembers args =
        complete(r.buf, "user_annotation", fmt::format("ProfilerStep#{}", s.iteration), host_pid(r),
                 cpu_tid(r, s.thread), s.begin_ps, std::max(end_ps, s.begin_ps));
    args.uinteger("External id", s.external_id);
    r.buf += "}}";
    r.step.reset();
    flush_if_full(r);
  }

  // ---- files -------------------------------------------------------------------------------
  void note_time(Time at) { last_ps_ = std::max(last_ps_, at.ps()); }

  void flush_if_full(RankOut& r) {
    if (r.buf.size() >= buffer_limit_) flush(r);
  }

  void flush(RankOut& r) {
    if (r.buf.empty()) return;
    r.file.append(r.buf);
    r.buf.clear();
  }

  std::vector<KinetoRankFile> files_;
  KinetoTraceOptions options_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  const TaskGraph* graph_ = nullptr;
  uint32_t world_size_ = 1;
  KinetoProcessGroups groups_;
  /// Per graph rank: its index in ranks_, or kNotDrawn.
  std::vector<uint32_t> out_index_;
  std::vector<RankOut> ranks_;
  size_t buffer_limit_ = kMinRankBuffer;
  /// Per task: its start in ps while it runs, else kNotRunning (or kOutsideIterations).
  std::vector<int64_t> begin_ps_;
  /// Per graph rank: iteration marks ended, and the latest task end (ps).
  std::vector<uint32_t> marks_seen_;
  std::vector<int64_t> last_end_;
  /// GPU tasks whose launch was written, with its op's External id, until they are written.
  std::unordered_map<TaskId, uint64_t> launched_external_;
  uint64_t next_external_ = 1;
  int64_t last_ps_ = 0;
  bool finished_ = false;
};

KinetoTraceWriter::KinetoTraceWriter(std::vector<KinetoRankFile> files, KinetoTraceOptions options)
    : impl_(std::make_unique<Impl>(std::move(files), std::move(options))) {}

KinetoTraceWriter::~KinetoTraceWriter() = default;

void KinetoTraceWriter::add_metadata(std::string key, std::string value) {
  impl_->add_metadata(std::move(key), std::move(value));
}

void KinetoTraceWriter::on_run_begin(const TaskGraph& graph) {
  impl_->run_begin(graph);
}

void KinetoTraceWriter::on_task_begin(TaskId task, Time at) {
  impl_->task_begin(task, at);
}

void KinetoTraceWriter::on_task_end(TaskId task, Time at) {
  impl_->task_end(task, at);
}

void KinetoTraceWriter::on_run_end(Time at) {
  impl_->run_end(at);
}

void KinetoTraceWriter::finish() {
  impl_->finish();
}

bool KinetoTraceWriter::finished() const {
  return impl_->finished();
}

}  // namespace upsim
