// Dependency recovery of one rank of a Kineto trace (the first half of the trace graph builder,
// trace_graph.h): its threads and streams, which runtime call launched which GPU work, the
// nesting of host events, the iteration markers, its NCCL kernels, and then the plan of where
// each thread's measured timeline is cut into tasks (calls, inferred stream and event waits,
// hand-offs between threads). Emission (trace_graph.cpp) reads what is recovered here; nothing
// here adds a task.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sim/formats/json_reader.h"
#include "sim/task_graph.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

/// No event (an index into KinetoTrace::events).
constexpr uint32_t kNone = UINT32_MAX;
/// Inferred stream waits: tasks looked at per stream, back from the call, for one consistent with
/// the waiter's start.
constexpr int kMaxWaitLookBack = 64;
/// A waiter that starts this much later than its launch and stream predecessor allowed was held
/// by its wait (GPU launch latency is a few microseconds).
constexpr Duration kWaitBindSlack = Duration::from_us(10);

/// Kineto event names and values as the builder reads them: NCCL kernels, synchronisations,
/// stream waits, collective kinds from op and kernel names, element sizes of Kineto type names,
/// integer lists of args.
std::string file_name(const std::string& path);
bool contains_nocase(std::string_view s, std::string_view what);
bool is_nccl_kernel(std::string_view name);
bool is_stream_sync(std::string_view name);
bool is_device_sync(std::string_view name);
bool is_stream_wait_event(std::string_view name);
int64_t kineto_type_bytes(std::string_view t);
std::optional<CollectiveKind> kind_from_collective_name(std::string_view n);
CollectiveKind kind_from_kernel_name(std::string_view n);
std::vector<int64_t> ints_of(const JsonValue& v);

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

/// One rank's recovered dependencies. Use: analyse() (threads, streams, launches, nesting,
/// iterations, NCCL kernels), then the caller groups the NCCL kernels of all ranks, then plan()
/// (the cut points of every thread: calls, inferred waits and hand-offs).
class RankRecovery {
 public:
  RankRecovery(const RankTrace& trace, const TraceGraphOptions& options)
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

 protected:
  // ---- analysis ----------------------------------------------------------------------------

  void collect_threads_and_streams();

  void link_gpu_work();

  /// parent_[e]: innermost host event of the same thread that encloses host event e.
  void compute_nesting();

  void find_markers();

  /// Innermost enclosing record_param_comms / nccl:* ops of a launch call.
  void collect_nccl();

  void read_comm_args(uint32_t rpc, NcclKernel& n);

  // ---- planning ----------------------------------------------------------------------------

  /// Last GPU event on `stream` enqueued before `t` (kNone if none).
  uint32_t last_enqueued_before(uint16_t stream, int64_t t) const;

  /// First GPU event on `stream` enqueued after `t` (kNone if none).
  uint32_t first_enqueued_after(uint16_t stream, int64_t t) const;

  SyncInfo infer_sync(const ThreadData& t, uint32_t call) const;

  /// The stream index of (device, stream), if the rank has GPU work on it.
  std::optional<uint16_t> stream_index(int64_t device, int64_t stream) const;

  /// The cuda_sync record ("Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync") of
  /// runtime call `call` (newer Kineto with enable_cuda_sync_events): the stream it concerns, and
  /// for event waits the stream and the record call of the event.
  struct SyncRecord {
    int64_t device = -1;
    int64_t stream = -1;
    int64_t wait_on_stream = -1;
    int64_t record_correlation = -1;
  };
  std::optional<SyncRecord> sync_record(uint32_t call) const;

  /// A cudaStreamWaitEvent with its cuda_sync record: both ends are known. The event's task is
  /// the last GPU task enqueued on the recorded stream before the record call.
  std::optional<StreamWaitInfo> exact_stream_wait(uint32_t call, const SyncRecord& r) const;

  std::optional<StreamWaitInfo> infer_stream_wait(const ThreadData& t, uint32_t call) const;

  void plan_points();

  void plan_handoffs();

  template <typename Ends>
  void consider_handoff(uint32_t thread, int64_t idle_begin, int64_t resume, const Ends& ends);

  /// TraceHost::kModelled: the top-level op of every host event (the outermost cpu_op that is
  /// not a label, trace_host_overheads.h), an kOpStart point per top-level op, and which of them
  /// launch (a launch-type call of the extraction under them).
  void plan_ops();

  bool counts_as_launch(uint32_t call) const;

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
  std::unordered_map<int64_t, uint32_t> sync_record_;  // runtime correlation -> cuda_sync event
  std::vector<StreamWaitInfo> waits_;
  uint64_t waits_dropped_ = 0;
  std::vector<Handoff> handoffs_;
  std::vector<uint32_t> top_op_;              // TraceHost::kModelled: host event -> its op
  std::unordered_set<uint32_t> op_launches_;  // TraceHost::kModelled: top-level ops that launch
};

}  // namespace upsim::trace_build
