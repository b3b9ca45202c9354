// Dependency inference of one rank of a Kineto trace (the second step of the trace graph builder,
// trace_graph.h), from its recovered timeline (rank_timeline.h): the plan of where each thread's
// measured timeline is cut into tasks (calls, marks, inferred synchronisations, stream and event
// waits, hand-offs between threads) as one plain RankDependencies. Emission (rank_builder.h)
// reads it; nothing here adds a task.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/task_graph.h"
#include "sim/time.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

/// Inferred stream waits: tasks looked at per stream, back from the call, for one consistent with
/// the waiter's start.
constexpr int kMaxWaitLookBack = 64;
/// A waiter that starts this much later than its launch and stream predecessor allowed was held
/// by its wait (GPU launch latency is a few microseconds).
constexpr Duration kWaitBindSlack = Duration::from_us(10);

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
  uint32_t aux = 0;  // kSplit, kResume: the hand-off; kMark: the mark id; kStreamWait: the wait
};

/// A thread idle since `idle_begin` resumes at `resume_ts` after another thread's event that
/// ends at `trigger_ts` (rank-local ps).
struct Handoff {
  int64_t idle_begin = 0;
  int64_t trigger_ts = 0;
  int64_t resume_ts = 0;
};

/// A cudaStreamWaitEvent call with the GPU event the awaited CUDA event follows.
struct StreamWaitInfo {
  uint32_t call = kNone;      // the cudaStreamWaitEvent event
  uint32_t producer = kNone;  // GPU event the wait depends on
  uint16_t stream = 0;        // waiting stream
  bool exact = false;         // from a cuda_sync record, not inferred
};

/// What a synchronize call waited for.
struct SyncInfo {
  uint16_t target = kAllStreams;
  int64_t done_ts = 0;  // when the awaited work finished in the trace
};

/// The inferred dependencies of one rank: the cut points of every thread and what they refer to.
struct RankDependencies {
  /// Per thread of RankTimeline::threads, its cut points in time order (PointKind order at
  /// equal times).
  std::vector<std::vector<Point>> points;
  std::unordered_map<uint32_t, SyncInfo> syncs;  // synchronize call -> what it waited for
  std::vector<StreamWaitInfo> waits;             // thread by thread, in call order
  uint64_t waits_dropped = 0;  // cudaStreamWaitEvent calls with no consistent event
  std::vector<Handoff> handoffs;
  std::vector<uint32_t> top_op;              // TraceHost::kModelled: host event -> its op
  std::unordered_set<uint32_t> op_launches;  // TraceHost::kModelled: top-level ops that launch
};

/// Whether the T1-T5 extraction counts runtime call `call` as a launch
/// (is_host_overhead_launch, trace_host_overheads.h).
bool counts_as_launch(const KinetoTrace& kineto, uint32_t call);

/// Infers the RankDependencies of one rank from its timeline.
class DependencyInference {
 public:
  DependencyInference(const RankTrace& trace, const RankTimeline& timeline,
                      const TraceGraphOptions& options)
      : kineto_(trace.kineto),
        events_(trace.kineto.events),
        timeline_(timeline),
        options_(options) {}

  RankDependencies infer();

 private:
  /// Last GPU event on `stream` enqueued before `t` (kNone if none).
  uint32_t last_enqueued_before(uint16_t stream, int64_t t) const;

  /// First GPU event on `stream` enqueued after `t` (kNone if none).
  uint32_t first_enqueued_after(uint16_t stream, int64_t t) const;

  SyncInfo infer_sync(const ThreadData& t, uint32_t call) const;
  /// When the stream waits (cudaStreamWaitEvent) called on `stream` before `t`, among those
  /// inferred so far, release it: the end of the latest awaited GPU event (INT64_MIN if none).
  /// A synchronize of a stream held by such a wait returns only after it (a stream waiting for
  /// a pipeline receive on another).
  int64_t waits_released_by(uint16_t stream, int64_t t) const;

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

  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const RankTimeline& timeline_;
  /// Per stream, the indices into deps_.waits of its waits, in the order they were inferred.
  std::vector<std::vector<uint32_t>> waits_by_stream_;
  const TraceGraphOptions& options_;
  RankDependencies deps_;
};

}  // namespace upsim::trace_build
