// Gradient synchronisation of a transformer step over the data-parallel ranks, behind one
// interface whose hooks the generator calls around each unit (a layer, the embedding, the output
// layer): DDP and ZeRO-1/2 (bucketed all-reduce or reduce-scatter of the gradients as they become
// ready, Megatron-Core's DistributedDataParallel; ZeRO-1/2 then all-gather the updated
// parameters) and ZeRO-3 / FSDP (each unit's parameters all-gathered before use with a one-unit
// prefetch, its gradients reduce-scattered after its backward).
//
// Contract: collectives run on the rank's communication stream (RankThreads::comm_stream) after
// the compute stream's work so far; the compute stream waits only where the framework does
// (before a gathered unit is used, at the end of the backward, after the parameter gather).
// Collectives are called in the same order on every rank of a group (ProcessGroups matches
// calls by order).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/pytorch/ddp_buckets.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/transformer/process_groups.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// The gradient buffers of Megatron-Core's DistributedDataParallel (megatron/core/distributed/
/// distributed_data_parallel.py): `buffers` for the dense parameters, reduced over the data x
/// context ranks, and `expert_parallel_buffers` for the routed experts' parameters when expert
/// > 1 (their `allreduce` attribute is false), reduced over the expert data-parallel ranks.
enum GradBufferIndex : size_t { kDenseBuffer = 0, kExpertBuffer = 1 };
constexpr size_t kGradBuffers = 2;
/// Elements of something per gradient buffer.
using PerBuffer = std::array<int64_t, kGradBuffers>;

/// Parameters of one unit on one GPU, as the optimizer sees them (one entry per tensor), by
/// gradient buffer.
struct LayerParams {
  std::array<std::vector<int64_t>, kGradBuffers> tensors;
  PerBuffer elements{};
  void add(int64_t n, GradBufferIndex buffer = kDenseBuffer) {
    if (n <= 0) return;
    tensors[buffer].push_back(n);
    elements[buffer] += n;
  }
};

/// One gradient buffer of the rank being emitted: its process group, the ranks that share
/// (and with ZeRO / FSDP shard) its parameters, and its DDP buckets in ready order.
struct GradBuffer {
  uint32_t pg = 0;
  int64_t replicas = 1;
  /// HSDP (ParallelismConfig::shard_group): the group of the ranks holding the same shard in
  /// the other shard groups, and how many there are (1: plain sharding, no such group).
  uint32_t replicate_pg = 0;
  int64_t shard_replicas = 1;
  std::vector<pytorch::DdpBucket> buckets;
  /// Tensors in ready order up to the end of each bucket.
  std::vector<size_t> bucket_end;
  size_t next_bucket = 0;
  size_t tensors_ready = 0;
};
using GradBuffers = std::array<GradBuffer, kGradBuffers>;

/// A unit and its parameter elements per buffer (the next one to prefetch).
using UnitElements = std::pair<int64_t, PerBuffer>;

/// What a gradient synchronisation emits with. The references stay valid for its lifetime; the
/// generator updates `threads` and `buffers` as it moves from rank to rank.
struct GradSyncRank {
  TaskGraph& graph;
  const pytorch::RankThreads& threads;
  ProcessGroups& groups;
  GradBuffers& buffers;
  int64_t param_elem_bytes = 2;  ///< parameters as gathered (the activation dtype)
  int64_t grad_elem_bytes = 2;   ///< gradients as reduced
  /// FSDP2 float8 all-gather (TransformerConfig::fp8_fsdp_all_gather): a layer's parameters
  /// are gathered at this many bytes each (0: param_elem_bytes), after `layer_gather_cast` (a
  /// kernel on the communication stream: torchao's fsdp_pre_all_gather casting the shard).
  int64_t layer_param_elem_bytes = 0;
  KernelDescId layer_gather_cast = 0;
};

class GradientSync {
 public:
  explicit GradientSync(GradSyncRank rank) : rank_(rank) {}
  virtual ~GradientSync() = default;
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  /// A new iteration of the rank being emitted begins.
  virtual void begin_iteration() { last_event_ = kNoTask; }
  /// Before the forward of `unit` (a layer; -1 the embedding, -2 the output layer), whose
  /// parameters are `elements`; `next`: the unit that follows it in this chunk.
  virtual void before_forward(int64_t /*unit*/, const PerBuffer& /*elements*/,
                              const std::optional<UnitElements>& /*next*/) {}
  /// ParallelismConfig::align_param_gather: the schedule dispatches the parameter all-gathers
  /// (not dispatched yet) of the buckets, in forward order, that start within the first
  /// `through_elements` parameters of the forward order (per buffer): those of the model chunks
  /// it starts. Nothing otherwise.
  virtual void dispatch_param_gather(const PerBuffer& /*through_elements*/) {}
  /// Whether before_backward() does anything (the generator skips describing `next` if not).
  virtual bool gathers_for_backward() const { return false; }
  /// Before the backward of layer `unit`; `next`: the layer the backward visits after it.
  virtual void before_backward(int64_t /*unit*/, const PerBuffer& /*elements*/,
                               const std::optional<UnitElements>& /*next*/) {}
  /// After the backward of `unit` (as in before_forward), whose parameters are `params`;
  /// `last_micro_batch`: its gradients are final for this iteration.
  virtual void after_backward(int64_t unit, const LayerParams& params, bool last_micro_batch) = 0;
  /// After the pipeline flush: what is still outstanding, then the compute stream waits for the
  /// last data-parallel collective ("ddp.reducer::finalize_backward").
  virtual void finish_backward();
  /// After the optimizer step.
  virtual void after_optimizer_step() {}

 protected:
  /// A collective on `pg` on the communication stream after the compute stream's work so far;
  /// returns the event of its completion.
  TaskId collective(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view op_name);
  /// The compute stream waits for `event` (nothing if kNoTask).
  void wait_compute(TaskId event, std::string_view op_name);

  GradSyncRank rank_;
  TaskId last_event_ = kNoTask;
};

/// The synchronisation `parallelism` asks for (DDP and ZeRO-1/2, or ZeRO-3 and FSDP).
std::unique_ptr<GradientSync> make_gradient_sync(const ParallelismConfig& parallelism,
                                                 GradSyncRank rank);

}  // namespace upsim
