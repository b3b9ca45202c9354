// The host ops of the transformer rank being emitted: its CPU thread and streams, markers, ops
// that launch kernels, and collectives that block the compute stream. Shared by the layer
// emitter, the pipeline p2p and the step's iteration loop.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/transformer/process_groups.h"

namespace upsim::transformer_emit {

using pytorch::HostOp;
using pytorch::RankThreads;

/// The rank's one CPU thread and its streams (RankInfo::stream_names in the same order).
constexpr uint16_t kCpuThread = 0;
constexpr uint16_t kCompute = 0;
constexpr uint16_t kDpComm = 1;
constexpr uint16_t kTpComm = 2;
constexpr uint16_t kActIn = 3;
constexpr uint16_t kActOut = 4;
constexpr uint16_t kGradIn = 5;
constexpr uint16_t kGradOut = 6;
/// Megatron-Core's MoE side stream, taken by one of two options that Megatron-Core refuses
/// together: the shared experts' stream (moe.shared_expert_overlap) or the combined 1F1B
/// schedule's communication stream (moe.a2a_overlap, combined_1f1b.cpp).
constexpr uint16_t kMoeSide = 7;
constexpr uint16_t kSharedExperts = kMoeSide;
constexpr uint16_t kEpComm = kMoeSide;
/// The all-to-all dispatcher's device-to-host copy stream (MoEAlltoAllTokenDispatcher
/// .cuda_dtoh_stream; moe.a2a_overlap only).
constexpr uint16_t kEpDtoH = 8;
/// The host op that replays a layer's captured graph (torch.cuda.CUDAGraph.replay, called by
/// Megatron-Core's CudaGraphManager / TE's graphed callables).
inline constexpr std::string_view kGraphReplay = "torch.cuda.CUDAGraph.replay";
/// Bytes of an fp32 value (gradient norms, cross-entropy statistics).
constexpr int64_t kFp32Bytes = 4;

/// Emits host ops on the thread `threads` names (the rank being emitted: the caller updates
/// `threads` from rank to rank; the references stay valid for the emitter's lifetime).
class OpEmitter {
 public:
  OpEmitter(TaskGraph& graph, ProcessGroups& groups, const RankThreads& threads)
      : graph_(graph), groups_(groups), threads_(threads) {}

  TaskGraph& graph() { return graph_; }
  const RankThreads& threads() const { return threads_; }

  /// A host op, begun (captured while a capture is open); the caller adds its launches and
  /// ends it.
  HostOp host_op(std::string_view name) { return HostOp(graph_, threads_, name, capture()); }

  /// CUDA graph capture (torch.cuda.graph): from begin_capture, host ops are captured instead of
  /// run (no host work, no launches, no markers); end_capture adds the replay, one
  /// cudaGraphLaunch by host op `op`. A host sync while capturing is a std::logic_error (CUDA
  /// forbids synchronising a capturing stream): the config refuses what would need one.
  void begin_capture() { capturing_ = true; }
  TaskId end_capture(std::string_view op);
  bool capturing() const { return capturing_; }

  /// The stream op(), op2() and blocking() put their kernels and collectives on: kCompute,
  /// or what a StreamScope set.
  uint16_t stream() const { return stream_; }
  /// Puts op(), op2() and blocking() on `stream` until the scope ends (a module run under
  /// torch.cuda.stream(...)).
  class StreamScope {
   public:
    StreamScope(OpEmitter& ops, uint16_t stream) : ops_(ops), previous_(ops.stream_) {
      ops_.stream_ = stream;
    }
    ~StreamScope() { ops_.stream_ = previous_; }
    StreamScope(const StreamScope&) = delete;
    StreamScope& operator=(const StreamScope&) = delete;

   private:
    OpEmitter& ops_;
    uint16_t previous_;
  };
  /// `to` waits for the work issued so far on `from` (torch.cuda.Stream.wait_stream): an event
  /// recorded on `from`, waited on by `to`, in a host op named `name`.
  void wait_stream(uint16_t to, uint16_t from, std::string_view name);

  /// A marker op (a record_function range with no kernel); none while capturing.
  void marker(std::string_view name);
  /// An op that launches one kernel, or two.
  void op(std::string_view name, std::string_view kernel_name, KernelDescId kernel);
  void op2(std::string_view name, std::string_view kernel1, KernelDescId desc1,
           std::string_view kernel2, KernelDescId desc2);
  /// This rank's next call on process group `pg` (ProcessGroups::call).
  CollectiveId call(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                    std::vector<int64_t> send_bytes = {}, int32_t sms = -1);
  /// A collective that blocks the compute stream (torch.distributed on the current stream);
  /// nothing on a group of one. `sms`: the SMs its kernel holds (CollectiveDesc::sms; -1: the
  /// network model's).
  void blocking(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                std::string_view op_name, std::vector<int64_t> send_bytes = {}, int32_t sms = -1);

 private:
  pytorch::GraphCapture* capture() { return capturing_ ? &capture_ : nullptr; }

  TaskGraph& graph_;
  ProcessGroups& groups_;
  const RankThreads& threads_;
  bool capturing_ = false;
  uint16_t stream_ = kCompute;
  pytorch::GraphCapture capture_;
};

}  // namespace upsim::transformer_emit
