// Timeline recovery of one rank of a Kineto trace (the first step of the trace graph builder,
// trace_graph.h): its threads and streams, which runtime call launched which GPU work, the
// nesting of host events, the iteration markers and its NCCL kernels, as one plain RankTimeline.
// Dependency inference (rank_dependencies.h) and emission (rank_builder.h) read it; nothing here
// infers a wait or adds a task.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cost_models.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

/// No event (an index into KinetoTrace::events).
constexpr uint32_t kNone = UINT32_MAX;

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

/// One host thread of the rank.
struct ThreadData {
  int64_t pid = -1;
  int64_t tid = -1;
  std::vector<uint32_t> host;      // host events, by (ts, -dur)
  std::vector<uint32_t> launches;  // runtime calls that launch GPU work, by ts
};

/// An iteration marker: its event and the IterationMark id it starts.
struct Marker {
  uint32_t event = kNone;
  uint32_t id = 0;
};

/// The structure of one rank's trace. Event indices are into KinetoTrace::events; per-event
/// vectors have one entry per event.
struct RankTimeline {
  /// Earliest and latest instants of the rank's activity (trace clock, rank-local ps).
  int64_t first_ps = 0;
  int64_t last_ps = 0;
  /// Host threads, the one with the iteration markers (else the most cpu ops) first, then by
  /// first event.
  std::vector<ThreadData> threads;
  std::vector<uint32_t> thread_of_event;  // host event -> index into `threads` (kNone: none)
  /// (device, CUDA stream) -> stream index, numbered in key order.
  std::map<std::pair<int64_t, int64_t>, uint16_t> stream_index;
  std::vector<uint16_t> stream_of;   // GPU event -> its stream index
  std::vector<uint32_t> gpu_events;  // by (ts, index)
  std::vector<uint32_t> launcher;    // GPU event -> the traced call that launched it (kNone)
  std::unordered_map<uint32_t, std::vector<uint32_t>> launched;  // call -> its GPU events
  std::vector<uint32_t> orphans;  // GPU events whose launch call is not in the trace
  /// GPU event -> when it was enqueued: its launch call's start (untraced: its GPU start).
  std::vector<int64_t> launch_ts;
  std::vector<std::vector<uint32_t>> stream_queue;  // per stream, GPU events in enqueue order
  /// The median duration of a kernel launch call: what a blocking copy's launch is taken to cost.
  int64_t median_launch_ps = 5'000'000;
  /// Host event -> the innermost host event of the same thread that encloses it (kNone).
  std::vector<uint32_t> parent;
  std::vector<Marker> markers;  // in time order
  Marker end_mark;              // where the last ProfilerStep ends (event kNone: no such mark)
  std::vector<TraceIteration> iterations;
  std::vector<NcclKernel> nccl;                               // in launch order
  std::unordered_map<int64_t, uint32_t> call_of_correlation;  // correlation -> runtime call
  std::unordered_map<int64_t, uint32_t> sync_record;  // runtime correlation -> cuda_sync event
};

/// Recovers the RankTimeline of one rank. Throws ParseError naming the file when the trace holds
/// no activity, has no (or a single) iteration marker, or an iteration that is not positive.
class TimelineRecovery {
 public:
  TimelineRecovery(const RankTrace& trace, const TraceGraphOptions& options)
      : trace_(trace), kineto_(trace.kineto), events_(trace.kineto.events), options_(options) {}

  RankTimeline recover() { return recover_with(true); }

  /// The same without iteration markers (markers and iterations stay empty): for reading what
  /// the kernels of a trace are, which needs no iteration (traced_kernels.h).
  RankTimeline recover_kernels_only() { return recover_with(false); }

 private:
  RankTimeline recover_with(bool markers) {
    collect_threads_and_streams();
    link_gpu_work();
    compute_nesting();
    if (markers) find_markers();
    collect_nccl();
    return std::move(timeline_);
  }

  void collect_threads_and_streams();

  void link_gpu_work();

  /// RankTimeline::parent: innermost host event of the same thread that encloses host event e.
  void compute_nesting();

  void find_markers();

  /// Innermost enclosing record_param_comms / nccl:* ops of a launch call.
  void collect_nccl();

  void read_comm_args(uint32_t rpc, NcclKernel& n);

  const RankTrace& trace_;
  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const TraceGraphOptions& options_;
  RankTimeline timeline_;
};

}  // namespace upsim::trace_build
