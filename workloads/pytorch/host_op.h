// PyTorch-shaped host work (ARCHITECTURE.md "workloads/pytorch/"): one host op on a rank's CPU
// thread with its runtime calls, in the seed method's phases (Lin et al., TPDS 2024): kOpBegin (T1
// + T2), one Launch per GPU task (T4, + T5 from the second), kOpEnd (T3). Every workload family
// emits its launches through this class, so host overheads are priced alike everywhere.
//
// Contract: construction adds the kOpBegin task, each kernel()/copy()/collective()/record()/
// wait() adds the GPU task and the Launch that enqueues it (launch_index 0, 1, ...), end() adds
// kOpEnd. An op that launches nothing is one kOpBody task (body()).
// Under CUDA graph capture (a GraphCapture given): the op runs no host work and launches nothing;
// its GPU tasks join the capture, which one graph launch replays (GraphCapture::launch).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"

namespace upsim::pytorch {

// Runtime calls, as Kineto names them. NCCL launches its kernels with cudaLaunchKernelExC.
inline constexpr std::string_view kLaunchKernel = "cudaLaunchKernel";
inline constexpr std::string_view kLaunchMemcpy = "cudaMemcpyAsync";
inline constexpr std::string_view kLaunchNccl = "cudaLaunchKernelExC";
inline constexpr std::string_view kLaunchRecord = "cudaEventRecord";
inline constexpr std::string_view kLaunchWait = "cudaStreamWaitEvent";
inline constexpr std::string_view kLaunchGraph = "cudaGraphLaunch";

/// Where a rank's host ops run and launch by default.
struct RankThreads {
  RankId rank = 0;
  uint16_t cpu_thread = 0;
  uint16_t compute_stream = 0;
  /// The stream collectives run on (ProcessGroupNCCL's stream).
  uint16_t comm_stream = 1;
};

/// A host op without launches: one kOpBody task.
TaskId body(TaskGraph& graph, const RankThreads& at, std::string_view op_name);

/// The GPU tasks captured into one CUDA graph (torch.cuda.graph), in capture order.
struct GraphCapture {
  std::vector<TaskId> gpu_tasks;
  /// The graph's replay (torch.cuda.CUDAGraph.replay: one cudaGraphLaunch) by host op `op_name`
  /// on `at`'s CPU thread: one graph launch of the captured tasks; the capture is emptied.
  TaskId launch(TaskGraph& graph, const RankThreads& at, std::string_view op_name);
};

class HostOp {
 public:
  /// The op name is interned, so callers may pass a temporary. With `capture`, the op is
  /// captured (see the contract): no host tasks, its GPU tasks appended to it.
  HostOp(TaskGraph& graph, const RankThreads& at, std::string_view name,
         GraphCapture* capture = nullptr);

  /// A kernel on the compute stream (or `stream`).
  TaskId kernel(std::string_view kernel_name, std::string_view aten_op, const KernelDesc& desc);
  TaskId kernel(std::string_view kernel_name, std::string_view aten_op, KernelDescId desc);
  TaskId kernel_on(uint16_t stream, std::string_view kernel_name, std::string_view aten_op,
                   KernelDescId desc);
  TaskId kernel_on(uint16_t stream, std::string_view kernel_name, std::string_view aten_op,
                   const KernelDesc& desc);
  /// A copy on the compute stream (the stream PyTorch's aten::to uses), or on `stream`.
  TaskId copy(std::string_view copy_name, TransferKind kind, int64_t bytes);
  TaskId copy_on(uint16_t stream, std::string_view copy_name, TransferKind kind, int64_t bytes);
  TaskId record(uint16_t stream);
  TaskId wait(uint16_t stream, TaskId event);
  /// A collective on the comm stream (or `stream`).
  TaskId collective(CollectiveId group, std::string_view aten_op);
  TaskId collective_on(uint16_t stream, CollectiveId group, std::string_view aten_op);
  void end();

 private:
  TaskId launch(std::string_view api, TaskId gpu_task);

  TaskGraph& graph_;
  RankThreads at_;
  /// Points into the graph's name table, which never moves its strings.
  std::string_view name_;
  uint32_t launches_ = 0;
  GraphCapture* capture_ = nullptr;
};

}  // namespace upsim::pytorch
