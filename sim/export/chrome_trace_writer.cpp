#include "sim/export/chrome_trace_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/export/gzip_stream.h"
#include "sim/export/json_members.h"
#include "sim/parallel_dim.h"

namespace upsim {

namespace {

/// Buffered output is written to the .tmp file once it reaches this size.
constexpr size_t kFlushBytes = size_t{4} << 20;
/// begin_ps_ value of a task that is not running.
constexpr int64_t kNotRunning = -1;
/// begin_ps_ of a task that began outside ChromeTraceOptions::iterations: not drawn.
constexpr int64_t kOutsideIterations = -2;
/// Version of this file's event layout; bump it when names, args or tracks change.
constexpr int kFormatVersion = 2;
/// Smallest tid stride: a rank's tids are pid * stride + track index.
constexpr uint64_t kMinTidStride = 1000;

std::string error_text(int err) {
  return std::generic_category().message(err);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

std::string format_rank_list(std::vector<RankId> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out.push_back(',');
    if (j == i) {
      fmt::format_to(std::back_inserter(out), "{}", ranks[i]);
    } else {
      fmt::format_to(std::back_inserter(out), "{}-{}", ranks[i], ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

class ChromeTraceWriter::Impl {
 public:
  Impl(std::filesystem::path path, ChromeTraceOptions options)
      : path_(std::move(path)), options_(std::move(options)) {
    tmp_path_ = path_;
    tmp_path_ += ".tmp";
  }

  ~Impl() {
    discard_tmp();
    end_gzip();
  }

  const std::filesystem::path& path() const { return path_; }
  bool finished() const { return finished_; }

  void add_metadata(std::string key, std::string value) {
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  void run_begin(const TaskGraph& graph) {
    discard_tmp();
    if (options_.ranks) {
      for (const RankId r : *options_.ranks) {
        if (r >= graph.rank_count()) {
          throw std::invalid_argument(
              fmt::format("Chrome trace rank filter: rank {} is not in the graph (ranks 0-{})", r,
                          graph.rank_count() == 0 ? 0 : graph.rank_count() - 1));
        }
      }
    }
    drawn_.assign(graph.rank_count(), options_.ranks ? 0 : 1);
    if (options_.ranks) {
      for (const RankId r : *options_.ranks)
        drawn_[r] = 1;
    }
    graph_ = &graph;
    finished_ = false;
    first_event_ = true;
    last_ps_ = 0;
    buf_.clear();
    begin_ps_.assign(graph.task_count(), kNotRunning);
    marks_seen_.assign(graph.rank_count(), 0);
    collective_begin_ps_.assign(graph.collective_count(), kNotRunning);

    uint64_t widest = 0;
    for (RankId r = 0; r < graph.rank_count(); ++r) {
      const RankInfo& info = graph.rank(r);
      widest = std::max<uint64_t>(widest, info.cpu_threads + info.stream_names.size());
    }
    tid_stride_ = kMinTidStride;
    while (widest >= tid_stride_)
      tid_stride_ *= 10;

    // Never through a symbolic link planted at the temporary name, and only onto a regular file
    // (O_NONBLOCK: a pipe planted there without a reader fails the open instead of blocking it).
    const int fd = ::open(tmp_path_.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) fail(errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(EINVAL);
    }
    std::FILE* f = ::fdopen(fd, "wb");
    if (f == nullptr) {
      const int err = errno;
      ::close(fd);
      fail(err);
    }
    file_.reset(f);
    tmp_exists_ = true;
    start_gzip();

    buf_ += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
    write_metadata();
    flush_if_full();
  }

  void task_begin(TaskId task, Time at) {
    note_time(at);
    const Task& t = graph_->task(task);
    if (!drawn(t.rank)) return;
    if (options_.iterations) {
      // An iteration mark starts the iteration after the ones its rank has seen.
      const uint32_t iteration = marks_seen_[t.rank] + (t.kind == TaskKind::kIterationMark ? 1 : 0);
      if (iteration < options_.iterations->first || iteration > options_.iterations->second) {
        begin_ps_.at(task) = kOutsideIterations;
        return;
      }
    }
    begin_ps_.at(task) = at.ps();
  }

  void task_end(TaskId task, Time at) {
    note_time(at);
    const Task& t = graph_->task(task);
    if (t.kind == TaskKind::kIterationMark && !marks_seen_.empty()) ++marks_seen_[t.rank];
    if (!drawn(t.rank)) return;
    int64_t& begin = begin_ps_.at(task);
    if (begin == kOutsideIterations) {
      begin = kNotRunning;
      return;
    }
    // An end without a begin (an observer attached mid-run) is drawn as an instant slice.
    const int64_t begin_ps = begin == kNotRunning ? at.ps() : begin;
    begin = kNotRunning;
    emit_task(task, begin_ps, at.ps(), /*unfinished=*/false);
    flush_if_full();
  }

  void collective_begin(CollectiveId collective, Time at) {
    note_time(at);
    collective_begin_ps_.at(collective) = at.ps();
  }

  void links_declared(std::span<const LinkInfo> links) {
    links_.assign(links.begin(), links.end());
    link_seen_.assign(links.size(), false);
    link_samples_.assign(links.size(), LinkSample{});
    // A trace of some ranks draws the links of their nodes and the links between nodes.
    link_drawn_.assign(links.size(), 1);
    if (options_.ranks) {
      std::vector<int64_t> devices;
      for (const RankId r : *options_.ranks)
        devices.push_back(graph_->device_of(r));
      std::vector<int32_t> nodes;
      for (const LinkInfo& l : links_) {
        if (l.gpu >= 0 && l.node >= 0 &&
            std::find(devices.begin(), devices.end(), l.gpu) != devices.end()) {
          nodes.push_back(l.node);
        }
      }
      for (size_t i = 0; i < links_.size(); ++i) {
        const int32_t node = links_[i].node;
        link_drawn_[i] = node < 0 || std::find(nodes.begin(), nodes.end(), node) != nodes.end();
      }
    }
    start_event();
    JsonMembers name(buf_);
    name.str("name", "process_name").str("ph", "M").uinteger("pid", links_pid());
    JsonMembers(name.object("args")).str("name", "fabric links");
    buf_ += "}}";
    start_event();
    JsonMembers sort(buf_);
    sort.str("name", "process_sort_index").str("ph", "M").uinteger("pid", links_pid());
    JsonMembers(sort.object("args")).integer("sort_index", links_pid());
    buf_ += "}}";
  }

  /// One counter track per link that is ever used, in the "fabric links" process: the link's
  /// total rate in GB/s and its utilisation in percent of capacity.
  void link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) {
    note_time(at);
    if (link >= links_.size() || !link_drawn_[link]) return;
    if (!link_seen_[link] && rate.bytes_per_second() <= 0.0) return;
    link_seen_[link] = true;
    const int64_t interval = options_.link_sample_interval.ps();
    if (interval > 0) {
      // Decimated: a change within the interval after the last sample waits as the link's
      // pending sample (a later one replaces it); the next change after the interval writes
      // the pending sample first, so a level the link held is never skipped over.
      LinkSample& s = link_samples_[link];
      if (s.written && at.ps() - s.last_ps < interval) {
        s.pending = true;
        s.pending_ps = at.ps();
        s.pending_rate = rate;
        s.pending_flows = flows;
        return;
      }
      if (s.pending && s.pending_ps > s.last_ps) {
        write_link_sample(link, s.pending_ps, s.pending_rate, s.pending_flows);
      }
      s = LinkSample{};
      s.written = true;
      s.last_ps = at.ps();
    }
    write_link_sample(link, at.ps(), rate, flows);
  }

  /// The pending samples of decimated links, at the end of the run.
  void flush_link_samples() {
    for (uint32_t l = 0; l < link_samples_.size(); ++l) {
      LinkSample& s = link_samples_[l];
      if (s.pending && s.pending_ps > s.last_ps) {
        write_link_sample(l, s.pending_ps, s.pending_rate, s.pending_flows);
      }
      s.pending = false;
    }
  }

  void write_link_sample(uint32_t link, int64_t at_ps, Bandwidth rate, uint32_t flows) {
    const LinkInfo& info = links_[link];
    start_event();
    JsonMembers event(buf_);
    event.str("name", info.name).str("cat", "link").str("ph", "C").uinteger("pid", links_pid());
    event.us("ts", at_ps);
    JsonMembers args(event.object("args"));
    // Rounded to 1e-6 so that floating-point noise of the rate computation stays out of the file.
    auto rounded = [](double v) { return std::round(v * 1e6) / 1e6; };
    args.real("GB/s", rounded(rate.gigabytes_per_second()));
    const double capacity = info.capacity.bytes_per_second();
    args.real("utilization_%",
              rounded(capacity > 0 ? 100.0 * rate.bytes_per_second() / capacity : 0.0));
    args.uinteger("flows", flows);
    buf_ += "}}";
    flush_if_full();
  }

  void run_end(Time at) {
    note_time(at);
    finish();
  }

  void finish() {
    if (graph_ == nullptr) {
      throw std::logic_error("ChromeTraceWriter::finish called before on_run_begin");
    }
    if (finished_) return;
    if (!file_) {
      // A previous finish() failed after closing the file; the run cannot be written again.
      fail(EIO);
    }
    for (TaskId t = 0; t < begin_ps_.size(); ++t) {
      if (begin_ps_[t] < 0) continue;  // not running, or outside the iterations drawn
      emit_task(t, begin_ps_[t], last_ps_, /*unfinished=*/true);
      flush_if_full();
    }
    flush_link_samples();
    buf_ += "\n],\"otherData\":{";
    JsonMembers other(buf_);
    other.str("generator", "upsim").integer("format_version", kFormatVersion);
    if (options_.ranks) {
      other.str("ranks_drawn",
                fmt::format("{} of {}", format_rank_list(*options_.ranks), graph_->rank_count()));
    }
    for (const auto& [key, value] : metadata_)
      other.str(key, value);
    buf_ += "}}\n";
    write_buffer(/*last=*/true);
    end_gzip();

    std::FILE* f = file_.release();
    if (std::fclose(f) != 0) {
      const int err = errno;
      discard_tmp();
      fail(err);
    }
    std::error_code ec;
    std::filesystem::rename(tmp_path_, path_, ec);
    if (ec) {
      discard_tmp();
      throw std::runtime_error(
          fmt::format("cannot write Chrome trace '{}': {}", path_.string(), ec.message()));
    }
    tmp_exists_ = false;
    finished_ = true;
    begin_ps_ = {};
    collective_begin_ps_ = {};
  }

 private:
  // ---- tracks ------------------------------------------------------------------------------
  bool drawn(RankId rank) const { return drawn_[rank] != 0; }
  static uint64_t pid(RankId rank) { return uint64_t{rank} + 1; }
  /// The "fabric links" process sorts after every rank.
  uint64_t links_pid() const { return pid(static_cast<RankId>(graph_->rank_count())); }
  uint64_t cpu_tid(RankId rank, uint16_t thread) const { return pid(rank) * tid_stride_ + thread; }
  uint64_t stream_tid(RankId rank, uint16_t stream) const {
    return pid(rank) * tid_stride_ + graph_->rank(rank).cpu_threads + stream;
  }
  uint64_t tid_of(const Task& t) const {
    return is_gpu_task(t.kind) ? stream_tid(t.rank, t.resource) : cpu_tid(t.rank, t.resource);
  }
  std::string stream_label(RankId rank, uint16_t stream) const {
    const std::string& name = graph_->rank(rank).stream_names[stream];
    return name.empty() ? fmt::format("stream {}", stream)
                        : fmt::format("stream {}: {}", stream, name);
  }

  void write_metadata() {
    for (RankId r = 0; r < graph_->rank_count(); ++r) {
      if (!drawn(r)) continue;
      const RankInfo& info = graph_->rank(r);
      metadata_event("process_name", pid(r), std::nullopt).str("name", info.name);
      buf_ += "}}";
      metadata_event("process_sort_index", pid(r), std::nullopt).integer("sort_index", r);
      buf_ += "}}";
      for (uint16_t t = 0; t < info.cpu_threads; ++t) {
        metadata_event("thread_name", pid(r), cpu_tid(r, t))
            .str("name", fmt::format("CPU thread {}", t));
        buf_ += "}}";
        metadata_event("thread_sort_index", pid(r), cpu_tid(r, t)).integer("sort_index", t);
        buf_ += "}}";
      }
      for (size_t s = 0; s < info.stream_names.size(); ++s) {
        const auto stream = static_cast<uint16_t>(s);
        metadata_event("thread_name", pid(r), stream_tid(r, stream))
            .str("name", stream_label(r, stream));
        buf_ += "}}";
        metadata_event("thread_sort_index", pid(r), stream_tid(r, stream))
            .integer("sort_index", int64_t{info.cpu_threads} + stream);
        buf_ += "}}";
      }
    }
  }

  /// Opens `{"name":...,"ph":"M","pid":...[,"tid":...],"args":{` and returns the args writer;
  /// the caller closes with "}}".
  JsonMembers metadata_event(std::string_view name, uint64_t pid, std::optional<uint64_t> tid) {
    start_event();
    JsonMembers event(buf_);
    event.str("name", name).str("ph", "M").uinteger("pid", pid);
    if (tid) event.uinteger("tid", *tid);
    return JsonMembers(event.object("args"));
  }

  // ---- events ------------------------------------------------------------------------------
  void start_event() {
    buf_ += first_event_ ? "\n{" : ",\n{";
    first_event_ = false;
  }

  /// Opens an "X" event and returns its args writer; the caller closes with "}}".
  JsonMembers slice(std::string_view prefix, std::string_view name, std::string_view cat,
                    const Task& t, int64_t begin_ps, int64_t end_ps) {
    start_event();
    JsonMembers event(buf_);
    event.str("name", prefix, name)
        .str("cat", cat)
        .str("ph", "X")
        .uinteger("pid", pid(t.rank))
        .uinteger("tid", tid_of(t))
        .us("ts", begin_ps)
        .us("dur", end_ps - begin_ps);
    return JsonMembers(event.object("args"));
  }

  void emit_task(TaskId id, int64_t begin_ps, int64_t end_ps, bool unfinished) {
    const Task& t = graph_->task(id);
    const std::string_view name = graph_->name(t.name);
    const std::string_view cat = task_kind_name(t.kind);
    if (t.kind == TaskKind::kCpuOp && t.phase == HostPhase::kMarker && begin_ps == end_ps &&
        !unfinished) {
      // A zero-duration marker ("forward mb 3"): an instant on its CPU thread.
      start_event();
      JsonMembers event(buf_);
      event.str("name", name)
          .str("cat", "marker")
          .str("ph", "i")
          .str("s", "t")
          .uinteger("pid", pid(t.rank))
          .uinteger("tid", tid_of(t))
          .us("ts", begin_ps);
      JsonMembers(event.object("args")).uinteger("task", id).str("op", graph_->name(t.op_name));
      buf_ += "}}";
      return;
    }
    switch (t.kind) {
      case TaskKind::kIterationMark: {
        start_event();
        JsonMembers event(buf_);
        event.str("name", fmt::format("iteration {}", graph_->iteration_of(id)))
            .str("cat", cat)
            .str("ph", "i")
            .str("s", "p")
            .uinteger("pid", pid(t.rank))
            .uinteger("tid", tid_of(t))
            .us("ts", begin_ps);
        JsonMembers(event.object("args"))
            .uinteger("task", id)
            .integer("iteration", graph_->iteration_of(id));
        buf_ += "}}";
        return;
      }
      case TaskKind::kCollective:
        emit_collective(id, t, begin_ps, end_ps, unfinished);
        break;
      default: {
        JsonMembers args = slice("", name, cat, t, begin_ps, end_ps);
        args.uinteger("task", id).str("op", graph_->name(t.op_name));
        task_args(args, id, t);
        if (unfinished) args.boolean("unfinished", true);
        buf_ += "}}";
        break;
      }
    }
    // A flow needs both ends drawn (launch and GPU task are on the same rank in every shipped
    // workload, but the graph does not promise it).
    if (t.kind == TaskKind::kLaunch && !unfinished) {
      const TaskId gpu = graph_->launched_task(id);
      if (drawn(graph_->task(gpu).rank)) {
        flow('s', gpu, t, begin_ps + (end_ps - begin_ps) / 2);
      }
    }
    // A graph launch's flow ends at the first task it enqueues.
    if (is_gpu_task(t.kind)) {
      const TaskId launcher = graph_->launcher_of(id);
      if (launcher != kNoTask && graph_->launched_task(launcher) == id &&
          drawn(graph_->task(launcher).rank)) {
        flow('f', id, t, begin_ps);
      }
    }
  }

  void emit_collective(TaskId id, const Task& t, int64_t begin_ps, int64_t end_ps,
                       bool unfinished) {
    const CollectiveId group = graph_->collective_of(id);
    const std::string_view name = graph_->collective_name(group);
    const int64_t group_ps = collective_begin_ps_[group];
    // Transfer start: when the last member arrived. A finished task without that callback is
    // all transfer; an unfinished one whose group never began is all waiting.
    const bool began = group_ps != kNotRunning && group_ps >= begin_ps;
    const bool has_transfer = began || !unfinished;
    int64_t transfer_ps = begin_ps;
    if (began) {
      transfer_ps = std::min(group_ps, end_ps);
    } else if (unfinished) {
      transfer_ps = end_ps;
    }
    // A pipeline stage waiting for its neighbour is the pipeline bubble.
    const ParallelDim dim = graph_->collective(group).parallel_dim;
    const bool bubble = dim == ParallelDim::kPipeline;
    if (transfer_ps > begin_ps || !has_transfer) {
      JsonMembers args = slice(bubble ? "bubble: " : "wait: ", name,
                               bubble ? "bubble" : "rendezvous", t, begin_ps, transfer_ps);
      args.uinteger("task", id).str("op", graph_->name(t.op_name)).uinteger("group", group);
      if (dim != ParallelDim::kOther) args.str("parallel_dim", parallel_dim_name(dim));
      if (unfinished && !has_transfer) args.boolean("unfinished", true);
      buf_ += "}}";
    }
    if (has_transfer) {
      JsonMembers args = slice("", name, task_kind_name(t.kind), t, transfer_ps, end_ps);
      args.uinteger("task", id).str("op", graph_->name(t.op_name));
      task_args(args, id, t);
      if (dim != ParallelDim::kOther) args.str("parallel_dim", parallel_dim_name(dim));
      if (unfinished) args.boolean("unfinished", true);
      buf_ += "}}";
    }
  }

  /// Kind-specific args after "task" and "op".
  void task_args(JsonMembers& args, TaskId id, const Task& t) const {
    switch (t.kind) {
      case TaskKind::kCpuOp:
        args.str("phase", host_phase_name(t.phase));
        break;
      case TaskKind::kLaunch: {
        const TaskId gpu = graph_->launched_task(id);
        const Task& g = graph_->task(gpu);
        args.integer("launch_index", t.launch_index)
            .uinteger("gpu_task", gpu)
            .str("stream", stream_label(g.rank, g.resource));
        if (t.phase == HostPhase::kGraphLaunch) {
          args.uinteger("gpu_tasks", graph_->launched_tasks(id).size());
        }
        break;
      }
      case TaskKind::kHostSync: {
        const uint16_t target = graph_->sync_target(id);
        args.str("target",
                 target == kAllStreams ? std::string("all streams") : stream_label(t.rank, target));
        break;
      }
      case TaskKind::kKernel:
        kernel_args(args, graph_->kernel(id));
        break;
      case TaskKind::kMemcpy: {
        const TransferDesc& x = graph_->transfer(id);
        args.str("kind", transfer_kind_name(x.kind)).integer("bytes", x.bytes);
        break;
      }
      case TaskKind::kCollective:
        collective_args(args, graph_->device_of(t.rank),
                        graph_->collective(graph_->collective_of(id)));
        break;
      case TaskKind::kIterationMark:
      case TaskKind::kEventRecord:
      case TaskKind::kStreamWait:
        break;
    }
    if (t.fixed_ps >= 0) args.boolean("fixed_duration", true);
  }

  static void kernel_args(JsonMembers& args, const KernelDesc& k) {
    args.str("class", kernel_class_name(k.cls)).str("dtype", dtype_name(k.dtype));
    switch (k.cls) {
      case KernelClass::kGemm:
        args.integer("batch", k.batch).integer("m", k.m).integer("n", k.n).integer("k", k.k);
        break;
      case KernelClass::kMemoryBound:
        args.real("bytes_read", k.bytes_read)
            .real("bytes_written", k.bytes_written)
            .real("flops", k.flops);
        break;
      case KernelClass::kEmbeddingForward:
      case KernelClass::kEmbeddingBackward:
        args.integer("batch", k.embedding.batch)
            .integer("tables", k.embedding.tables)
            .integer("rows", k.embedding.rows)
            .integer("dim", k.embedding.dim)
            .real("pooling", k.embedding.pooling);
        if (k.embedding.update != EmbeddingUpdate::kFusedDeduplicated) {
          args.str("update", embedding_update_name(k.embedding.update));
        }
        break;
      case KernelClass::kAttention:
        args.integer("batch", k.attention.batch)
            .integer("heads", k.attention.heads)
            .integer("kv_heads", k.attention.kv_heads)
            .integer("seq_q", k.attention.seq_q)
            .integer("seq_kv", k.attention.seq_kv)
            .integer("head_dim", k.attention.head_dim)
            .boolean("causal", k.attention.causal)
            .boolean("backward", k.attention.backward);
        break;
    }
  }

  static void collective_args(JsonMembers& args, RankId rank, const CollectiveDesc& c) {
    const size_t n = c.members.size();
    args.str("kind", collective_kind_name(c.kind)).integer("bytes", c.bytes).uinteger("members", n);
    if (c.kind != CollectiveKind::kAllToAll || c.send_bytes.members() != n) return;
    // This rank's row sum (what it sends) and column sum (what it receives), its own chunk
    // included: its send and receive buffer sizes.
    for (size_t i = 0; i < n; ++i) {
      if (c.members[i] != rank) continue;
      args.integer("send_bytes", c.send_bytes.sent_by(i))
          .integer("recv_bytes", c.send_bytes.received_by(i));
      return;
    }
  }

  /// A flow event `phase` ('s' or 'f') with id `flow_id` on the track of `t` at `at_ps`.
  void flow(char phase, TaskId flow_id, const Task& t, int64_t at_ps) {
    start_event();
    JsonMembers event(buf_);
    event.str("name", "launch")
        .str("cat", "launch")
        .str("ph", std::string_view(&phase, 1))
        .uinteger("id", flow_id)
        .uinteger("pid", pid(t.rank))
        .uinteger("tid", tid_of(t))
        .us("ts", at_ps);
    if (phase == 'f') event.str("bp", "e");
    buf_ += '}';
  }

  // ---- files -------------------------------------------------------------------------------
  void note_time(Time at) { last_ps_ = std::max(last_ps_, at.ps()); }

  void flush_if_full() {
    if (buf_.size() >= kFlushBytes) write_buffer();
  }

  void write_buffer(bool last = false) {
    if (buf_.empty() && !(last && gzip_)) return;
    // The file is gone after an earlier write failure aborted the run.
    if (!file_) fail(EBADF);
    if (gzip_) {
      int err = gzip_stream_->write(buf_);
      if (err == 0 && last) err = gzip_stream_->finish();
      if (err != 0) {
        discard_tmp();
        fail(err);
      }
    } else {
      write_bytes(buf_.data(), buf_.size());
    }
    buf_.clear();
  }

  void write_bytes(const char* data, size_t size) {
    if (std::fwrite(data, 1, size, file_.get()) != size) {
      const int err = errno;
      discard_tmp();
      fail(err);
    }
  }

  /// gzip output (a path ending in .gz, which Perfetto opens): the buffers go through
  /// deflate on GzipStream's thread, beside the simulation.
  void start_gzip() {
    end_gzip();
    gzip_ = options_.gzip.value_or(path_.extension() == ".gz");
    if (gzip_) gzip_stream_ = std::make_unique<GzipStream>(file_.get());
  }

  /// Stops the compressing thread (before the file it writes is closed).
  void end_gzip() noexcept { gzip_stream_.reset(); }

  /// Closes and removes the .tmp file of an unfinished run, if any. Never throws.
  void discard_tmp() noexcept {
    end_gzip();
    file_.reset();
    if (!tmp_exists_) return;
    tmp_exists_ = false;
    std::error_code ignored;
    std::filesystem::remove(tmp_path_, ignored);
  }

  [[noreturn]] void fail(int err) const {
    throw std::runtime_error(
        fmt::format("cannot write Chrome trace '{}': {}", path_.string(), error_text(err)));
  }

  std::vector<LinkInfo> links_;
  std::vector<uint8_t> link_drawn_;
  std::vector<bool> link_seen_;
  /// Per link, with ChromeTraceOptions::link_sample_interval: the last written sample and the
  /// pending one.
  struct LinkSample {
    bool written = false;
    int64_t last_ps = 0;
    bool pending = false;
    int64_t pending_ps = 0;
    Bandwidth pending_rate;
    uint32_t pending_flows = 0;
  };
  std::vector<LinkSample> link_samples_;
  std::filesystem::path path_;
  ChromeTraceOptions options_;
  /// Per graph rank: 1 when its process is written.
  std::vector<uint8_t> drawn_;
  std::filesystem::path tmp_path_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  const TaskGraph* graph_ = nullptr;
  std::unique_ptr<std::FILE, FileCloser> file_;
  /// Iteration marks each rank has ended (ChromeTraceOptions::iterations).
  std::vector<uint32_t> marks_seen_;
  bool gzip_ = false;
  std::unique_ptr<GzipStream> gzip_stream_;
  std::string buf_;
  /// Per task: start time in ps while it runs, else kNotRunning.
  std::vector<int64_t> begin_ps_;
  /// Per collective group: the on_collective_begin time in ps, or kNotRunning.
  std::vector<int64_t> collective_begin_ps_;
  int64_t last_ps_ = 0;
  uint64_t tid_stride_ = kMinTidStride;
  bool first_event_ = true;
  /// The .tmp file exists and is this writer's to remove.
  bool tmp_exists_ = false;
  bool finished_ = false;
};

ChromeTraceWriter::ChromeTraceWriter(std::filesystem::path path, ChromeTraceOptions options)
    : impl_(std::make_unique<Impl>(std::move(path), std::move(options))) {}

ChromeTraceWriter::~ChromeTraceWriter() = default;

const std::filesystem::path& ChromeTraceWriter::path() const {
  return impl_->path();
}

void ChromeTraceWriter::add_metadata(std::string key, std::string value) {
  impl_->add_metadata(std::move(key), std::move(value));
}

void ChromeTraceWriter::on_run_begin(const TaskGraph& graph) {
  impl_->run_begin(graph);
}

void ChromeTraceWriter::on_task_begin(TaskId task, Time at) {
  impl_->task_begin(task, at);
}

void ChromeTraceWriter::on_task_end(TaskId task, Time at) {
  impl_->task_end(task, at);
}

void ChromeTraceWriter::on_collective_begin(CollectiveId collective, Time at) {
  impl_->collective_begin(collective, at);
}

void ChromeTraceWriter::on_links_declared(std::span<const LinkInfo> links) {
  impl_->links_declared(links);
}

void ChromeTraceWriter::on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) {
  impl_->link_rate(link, at, rate, flows);
}

void ChromeTraceWriter::on_run_end(Time at) {
  impl_->run_end(at);
}

void ChromeTraceWriter::finish() {
  impl_->finish();
}

bool ChromeTraceWriter::finished() const {
  return impl_->finished();
}

}  // namespace upsim
