// Emission of one rank of a Kineto trace (the last step of the trace graph builder,
// trace_graph.h), from its recovered timeline (rank_timeline.h) and inferred dependencies
// (rank_dependencies.h): the rank, its GPU tasks (measured, or priced in model mode where
// rank_kernel_descs.h describes them), the EventRecords and StreamWaits of its stream waits, its
// host threads (measured_host_emitter.h, or modelled_host_emitter.h for TraceHost::kModelled)
// and the hand-offs between them.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/trace/host_emission.h"
#include "workloads/trace/kineto_trace.h"
#include "workloads/trace/rank_dependencies.h"
#include "workloads/trace/rank_kernel_descs.h"
#include "workloads/trace/rank_timeline.h"
#include "workloads/trace/trace_graph.h"

namespace upsim::trace_build {

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
        names_(trace.kineto, timeline),
        kernels_(trace, timeline) {}

  /// Adds the rank to the graph, running on GPU `gpu` (kNoDevice: its rank id).
  /// `collective_of[i]` is the group of nccl()[i], `collective_ps[i]` its measured duration and
  /// `collective_alone[i]` whether its group has no other member (model mode keeps it
  /// measured); `origin_ps` is time zero on this rank's clock.
  TraceRankSummary emit(TaskGraph& g, const std::vector<CollectiveId>& collective_of,
                        const std::vector<int64_t>& collective_ps,
                        const std::vector<uint8_t>& collective_alone, int64_t origin_ps,
                        uint32_t gpu);

 private:
  /// The rank on GPU `gpu`: one CPU thread per traced thread (and one for untraced launches),
  /// one stream per (device, CUDA stream); the summary's file, device, threads and streams.
  void add_rank(TaskGraph& g, uint32_t gpu, TraceRankSummary& s);

  /// One task per GPU event, in RankTimeline::gpu_events order: the NCCL kernels as collectives
  /// of their groups, then copies, memsets and kernels.
  void add_gpu_tasks(const std::vector<CollectiveId>& collective_of,
                     const std::vector<int64_t>& collective_ps,
                     const std::vector<uint8_t>& collective_alone, TraceRankSummary& s);

  /// Event records after the producers of stream waits, then the waits.
  void add_stream_waits(TraceRankSummary& s);

  /// The host threads (TraceHost), then the thread of untraced launches.
  void emit_threads(TraceRankSummary& s);

  /// Each hand-off's wait after its trigger, else its measured idle time.
  void connect_handoffs(TraceRankSummary& s);

  const KinetoTrace& kineto_;
  const std::vector<KinetoEvent>& events_;
  const TraceGraphOptions& options_;
  const RankTimeline& timeline_;
  const RankDependencies& deps_;
  const HostOpNames names_;
  RankKernelDescs kernels_;
  RankTasks tasks_;
};

}  // namespace upsim::trace_build
