// Kineto trace (+ execution trace) of each rank -> one task graph that replays the measured run.
//
// Per rank, the graph has one CPU thread per host thread that appears in the trace (the thread
// with the iteration markers first), plus one "untraced launches" thread when GPU work appears
// whose launch call is not in the trace, and one stream per CUDA (device, stream) seen. Rank r
// of the input is graph rank r (in input order; the caller orders ranks).
//
// Dependencies recovered (the rules; each is applied to the measured timeline):
//  - CPU thread order: a thread's tasks are its trace in time order. Host time between the
//    recognised runtime calls is kept as CpuOp tasks with the measured gap as fixed duration
//    (named after the innermost cpu op around it), so the CPU timeline is reproduced
//    (TraceHost::kModelled prices it instead: see TraceHost).
//  - Launch -> GPU work: a runtime/driver call and the kernel, memcpy or memset with its
//    correlation id (ac2g flows when args carry none) become a Launch (fixed: the call's
//    duration) and its GPU task (fixed: the measured duration). Same-stream order is the stream's.
//  - Blocking copies: a memcpy call that is synchronous (cudaMemcpy) or copies from/to pageable
//    host memory and was still running when its copy started: Launch, then HostSync on the
//    copy's stream, then the measured time from the copy's end to the call's return.
//  - Synchronisation: cudaStreamSynchronize / cudaEventSynchronize -> HostSync on the stream
//    whose work (enqueued before the call) finished last but no later than the call returned
//    (the stream it waited for); cudaDeviceSynchronize -> HostSync on all streams; each followed
//    by the measured return latency.
//  - cudaStreamWaitEvent: when Kineto recorded it (cuda_sync "Stream Wait Event", PyTorch's
//    enable_cuda_sync_events), the waiting stream is its `stream` and the event is the last GPU
//    task enqueued on `wait_on_stream` before the cudaEventRecord call whose correlation is
//    `wait_on_cuda_event_record_corr_id`; cuda_sync "Stream Sync" / "Event Sync" likewise name
//    the stream a synchronize call waited for. Otherwise (older Kineto versions record neither
//    the event nor the stream of these calls) the waiting stream is the stream of the calling
//    thread's next launch;
//    the candidates are, per other stream, the last GPU task enqueued before the call whose end
//    is consistent with the measured start of the waiter (the first task after the wait on the
//    waiting stream): it ends no later than that start, within kClockTolerance. When the waiter
//    started more than 10 us after its launch returned and its stream predecessor ended, the
//    wait held it: the event is the latest-ending candidate (if it ended within 10 us of that
//    start); otherwise it is the candidate enqueued last. It becomes an EventRecord after that
//    task (launched right after it by a zero-time "cudaEventRecord") and a StreamWait enqueued
//    by the cudaStreamWaitEvent call. When no candidate is consistent the call is host time
//    only. (Checked against exact waits: test/unit/trace/trace_stream_wait_test.cpp.)
//  - Thread hand-offs (autograd engine, DataLoader): when a thread resumes after at least
//    kIdleGap without activity, and another thread of the rank finished an event during that
//    gap no more than kMaxHandoffLatency before the resumption, the resumption waits for that
//    event (zero-time CpuOp with an edge) and then takes the measured latency.
//  - NCCL kernels are Collective tasks. The k-th kernel of collective (process group, sequence
//    number) is matched across ranks, the sequence number and process group coming from the
//    record_param_comms op around the launch (execution trace, or Kineto args in newer
//    versions); without them the k-th NCCL kernel of every rank forms one group. Kind and bytes
//    come from the same record (or the nccl:* annotation's input dims, or the kernel name). The
//    group's fixed duration is the shortest measured kernel among its members: the rank that
//    arrived last waited least, so its kernel time is the transfer time after the rendezvous.
//  - Iterations: IterationMark tasks where the marker annotations start (by default
//    ProfilerStep#N, iteration N, plus a mark N+1 where the last step ends). An iteration's
//    measured time is from its marker to the next (the last ProfilerStep: its own dur); one that
//    is not positive is a ParseError naming the file and the step.
//
// Time: each rank's events are placed on one clock: Kineto timestamps of the ranks of one job
// share the host clock (checked: the ranks' spans must overlap), and the run's time zero is the
// earliest event of any rank, so ranks start at their measured offsets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "sim/time.h"
#include "workloads/trace/execution_trace.h"
#include "workloads/trace/kineto_trace.h"

namespace upsim {

/// Tolerance for comparing host and GPU timestamps (Kineto writes whole microseconds).
inline constexpr Duration kClockTolerance = Duration::from_us(1);
/// A thread silent for at least this long may have waited for another thread.
inline constexpr Duration kIdleGap = Duration::from_us(50);
/// Longest time from another thread's event to a resumption that is taken as a hand-off.
inline constexpr Duration kMaxHandoffLatency = Duration::from_us(250);

/// One rank's inputs. `et`, when present, has been checked to belong to `kineto` and `link` links
/// them.
struct RankTrace {
  KinetoTrace kineto;
  std::optional<ExecutionTrace> et;
  EtLink link;
};

/// Replay: every GPU task takes its measured duration. Model: GPU kernels whose op shapes are
/// known (Kineto input dims or the execution trace), copies and collectives are priced by the
/// run's models (what-if on another GPU or fabric); unclassified kernels (embedding lookups, ops
/// without shapes) and all dependencies stay as measured. Host time is chosen by TraceHost.
enum class TraceMode : uint8_t { kReplay, kModel };

/// How host (CPU) time is costed.
///  - kMeasured: the measured timeline: every host interval between the cut points (runtime
///    calls, marks, hand-offs) keeps its measured duration, and so does every call.
///  - kModelled: the seed method's T1-T5 (Lin et al., TPDS 2024) price the host work through the
///    run's CpuCostModel (HostPhase). Per top-level op of a thread (the extraction's ops:
///    trace_host_overheads.h; op_name = that op's name): an op with launches (cudaLaunchKernel,
///    cudaMemcpyAsync, cudaStreamSynchronize anywhere under it) is a kOpBegin task (T1 + T2) at
///    its start, one kLaunch task per launch call (T4, + T5 from the second launch on;
///    launch_index counts them), and a kOpEnd task (T3) after its last launch; an op without
///    launches is one kOpBody task (T1 + T5 body). A cudaStreamSynchronize counts as a launch
///    but costs no host time besides its wait (the seed gives it no T4). Every other runtime
///    call (cudaStreamWaitEvent, cudaMemsetAsync, synchronous copies and other syncs) costs no
///    host time of its own: the extraction counts it inside the T2/T5/T3 gap around it. Host
///    time between ops is T1, as in the seed, except the gaps T1 does not describe, which keep
///    their measured duration: a gap between ops of different parents (a module boundary: T1
///    samples only gaps between ops of one parent; the next op's T1 is added to it) and idle
///    time of at least kSeedT1MaxGapUs not ended by a thread hand-off. Before the rank's first
///    iteration mark the timeline is the measured one (each thread starts the first iteration
///    at its measured instant). Waits (syncs, blocking copies, thread hand-offs) and GPU work
///    are unchanged.
enum class TraceHost : uint8_t { kMeasured, kModelled };

struct TraceGraphOptions {
  TraceMode mode = TraceMode::kReplay;
  TraceHost host = TraceHost::kMeasured;
  /// Name prefix of the annotations (user_annotation or cpu_op) that start an iteration.
  /// "ProfilerStep#" markers span their iteration; any other marker starts one, and the next
  /// marker starts the next.
  std::string iteration_marker = "ProfilerStep#";
  /// Model mode, one trace of a larger job: the job's world size (distributedInfo.world_size;
  /// 0 = the traces are the whole job). The traced rank runs on GPU distributedInfo.rank, and
  /// each collective is priced over its process group's GPUs (job_collective_members,
  /// cross_rank_collectives.h), the absent members mirroring the traced one
  /// (CollectiveDesc::simulated_members).
  uint32_t job_world_size = 0;
};

/// One complete iteration of a rank: from IterationMark `start_mark` to IterationMark
/// `end_mark`, and how long it took in the trace.
struct TraceIteration {
  uint32_t start_mark = 0;
  uint32_t end_mark = 0;
  std::string label;  ///< "ProfilerStep#10", "Optimizer.zero_grad#SGD.zero_grad[3]"
  Duration measured;
  /// Why `measured` is not the iteration's length (one clause), or "" when it is. Kineto steps
  /// always are; a Chakra trace without node start times is not (chakra_trace.h).
  std::string not_an_iteration;
};

/// A cudaStreamWaitEvent call turned into a StreamWait: Kineto correlation ids of the call and
/// of the GPU task the awaited event follows, and the CUDA stream ids.
struct TraceStreamWaitEdge {
  int64_t call_correlation = -1;
  int64_t producer_correlation = -1;
  int64_t waiting_stream = -1;
  int64_t producer_stream = -1;
  bool exact = false;  ///< from a cuda_sync record, not inferred
};

struct TraceRankSummary {
  RankId rank = 0;
  std::string file;
  int32_t trace_rank = -1;  ///< distributedInfo.rank, -1 if absent
  std::string device;       ///< the GPU's name (deviceProperties), "GPU" if absent
  uint16_t cpu_threads = 0;
  uint16_t streams = 0;
  uint64_t kernels = 0;
  uint64_t kernels_kept_measured = 0;  ///< model mode: kernels without a descriptor, of which
  /// ... launched inside a torch.compile region (is_compiled_region_op: the innermost op's
  /// inputs are the region's, not the kernel's) or Inductor-generated (triton_*)
  uint64_t kernels_compiled_kept_measured = 0;
  /// ... launched by an op that is not one registered operator (is_registered_operator:
  /// autograd nodes and Functions, record_function ranges, whose inputs need not be the kernel's)
  uint64_t kernels_non_aten_kept_measured = 0;
  /// Model mode: collectives kept at their measured duration: their group has one rank in the
  /// trace set and the job's world size (TraceGraphOptions::job_world_size) or the group's
  /// ranks are unknown, so there is nothing for the network to move.
  uint64_t collectives_kept_measured = 0;
  /// Model mode, one trace of a larger job: collectives priced over their process group's GPUs,
  /// and of those, the ones whose group was not recorded and taken as the whole world.
  uint64_t collectives_over_job = 0;
  uint64_t collectives_world_assumed = 0;
  uint64_t copies = 0;
  uint64_t memsets = 0;
  uint64_t collectives = 0;
  uint64_t host_syncs = 0;
  uint64_t blocking_copies = 0;
  uint64_t stream_waits = 0;          ///< cudaStreamWaitEvent calls turned into StreamWaits
  uint64_t stream_waits_exact = 0;    ///< of which Kineto recorded both ends (cuda_sync events)
  uint64_t stream_waits_dropped = 0;  ///< calls with no consistent event (host time only)
  std::vector<TraceStreamWaitEdge> stream_wait_edges;  ///< one per StreamWait, in call order
  uint64_t handoffs = 0;
  uint64_t untraced_launches = 0;
  std::vector<TraceIteration> iterations;
};

struct TraceGraphInfo {
  std::vector<TraceRankSummary> ranks;
  uint32_t collective_groups = 0;
};

/// Adds every rank of `traces` to `graph` (unsealed; the caller seals it). Throws ParseError
/// naming the file when a rank has no iteration marker, when the ranks' collectives do not
/// match, or when the ranks' time spans do not overlap (traces of different runs).
TraceGraphInfo build_replay_graph(const std::vector<RankTrace>& traces, TaskGraph& graph,
                                  const TraceGraphOptions& options = {});

}  // namespace upsim
