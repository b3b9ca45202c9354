// The op-emission helpers that the phases of one DLRM rank's step share (RankOps): host ops on
// the rank's CPU thread with one kernel or none, blocking copies and host syncs, dtype
// conversions, fp32 master weights' casts and gradient accumulation, and collectives launched on
// the comm stream after the compute stream's work; with the rank's threads and streams.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/task_graph.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/pytorch/kernels.h"

namespace upsim::dlrm_emit {

using pytorch::DdpBucket;
using pytorch::HostOp;
using pytorch::pointwise;

constexpr uint16_t kCpuThread = 0;
constexpr uint16_t kComputeStream = 0;
constexpr uint16_t kCommStream = 1;
/// input: prefetch only: the stream the next batch's copies run on.
constexpr uint16_t kDataStream = 2;
/// train_pipeline: sparse_dist only: the stream the next batch's input distribution runs on.
constexpr uint16_t kDataDistStream = 3;
/// Embedding weights, pooled embeddings, all-to-all payloads, dense inputs, labels and the
/// loss are fp32 in the DLRM script.
constexpr int64_t kFp32Bytes = 4;

/// Emits ops on one DLRM rank (DLRM rank `index` of `built`).
class RankOps {
 public:
  RankOps(const DlrmConfig& config, const DlrmGraph& built, uint32_t index, TaskGraph& graph);

  const DlrmConfig& config() const { return config_; }
  /// More than one rank: the run has collectives and DDP.
  bool distributed() const { return distributed_; }

  /// A host op on the rank's CPU thread, begun; the caller adds its launches and ends it.
  /// Captured while a CUDA graph capture is open (begin_capture).
  HostOp host_op(std::string_view op) { return HostOp(graph_, threads_, op, capture()); }

  /// A host op that launches nothing (none while capturing: a replay runs no host code).
  void body(std::string_view op) {
    if (!capturing_) pytorch::body(graph_, threads_, op);
  }

  /// CUDA graph capture (torch.cuda.graph): from begin_capture, ops are captured instead of run;
  /// end_capture adds the graph's replay (one cudaGraphLaunch by `op`). A host sync or a
  /// blocking copy while capturing is a std::logic_error (CUDA forbids synchronising a capturing
  /// stream): the config's checks refuse what would need one.
  void begin_capture() { capturing_ = true; }
  TaskId end_capture(std::string_view op);

  void single_kernel(std::string_view op, std::string_view kernel_name, std::string_view aten_op,
                     const KernelDesc& desc);

  /// The host waits for `stream`'s work so far (kAllStreams: every stream's).
  void host_sync(uint16_t stream, std::string_view op);

  /// Marks the start of iteration `it` on the CPU thread.
  void iteration_mark(uint32_t it);

  /// A blocking aten::to: the copy, then the host waits for the compute stream.
  void blocking_copy(std::string_view copy_name, TransferKind kind, int64_t bytes);

  /// A dtype conversion of `elements` values (aten::to: one read of `from`, one write of `to`),
  /// only where the two store differently (tf32 stores fp32).
  void convert(DType from, DType to, int64_t elements);

  static DType storage_dtype(DType dtype) { return dtype == DType::kTf32 ? DType::kFp32 : dtype; }

  /// Launches a collective (`op` names the host op and the collective) after the work so far
  /// of the compute stream (or `after`); returns the comm-stream event that marks its end.
  TaskId launch_collective(CollectiveId group, std::string_view op,
                           uint16_t after = kComputeStream);

  /// A DDP all-reduce of `elements` gradient values of `dtype` (one nccl:all_reduce op): the
  /// pre-scale by 1 / world size on the compute stream, then the all-reduce `group` on the comm
  /// stream after it; returns the comm-stream event that marks its end.
  TaskId scaled_all_reduce(CollectiveId group, DType dtype, int64_t elements);

  /// The compute stream waits for `comm_event`.
  void wait_for(std::string_view op, TaskId comm_event);

  /// torch.autocast: an fp32 parameter of `elements` is cast to the compute dtype where an op
  /// uses it (aten::_to_copy; one read of 4 B, one write of 2 B an element).
  void cast_parameter(HostOp& h, int64_t elements);

  /// AccumulateGrad of a 16-bit gradient into an fp32 parameter's .grad (a cast kernel); with
  /// the parameters in the compute dtype it steals the gradient and launches nothing.
  void accumulate_grad(int64_t elements);

 private:
  const DlrmConfig& config_;
  TaskGraph& graph_;
  RankId rank_;
  pytorch::RankThreads threads_;
  bool distributed_;
  pytorch::GraphCapture* capture() { return capturing_ ? &capture_ : nullptr; }
  bool capturing_ = false;
  pytorch::GraphCapture capture_;
};

}  // namespace upsim::dlrm_emit
