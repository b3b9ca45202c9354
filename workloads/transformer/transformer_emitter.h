// The emitter of one transformer training step per rank (transformer_generator.h): the rank's
// process groups and gradient buffers, then per iteration the pipeline schedule's forward and
// backward steps. By concern: transformer_generator.cpp (ranks, parameters, the iteration loop and
// the optimizer step), transformer_layers.cpp (the ops of one layer: attention, MLP, MoE,
// embedding, output layer, and their tensor-parallel collectives), transformer_pipeline_p2p.cpp
// (pipeline sends and receives, and the check that they match).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/task_graph.h"
#include "sim/units.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/transformer/gradient_sync.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/process_groups.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim::transformer_emit {

using pytorch::HostOp;
using pytorch::RankThreads;

constexpr uint16_t kCpuThread = 0;
constexpr uint16_t kCompute = 0;
constexpr uint16_t kDpComm = 1;
constexpr uint16_t kTpComm = 2;
constexpr uint16_t kActIn = 3;
constexpr uint16_t kActOut = 4;
constexpr uint16_t kGradIn = 5;
constexpr uint16_t kGradOut = 6;
constexpr int64_t kFp32Bytes = 4;

/// Emits every simulated rank's iterations into the graph (run()).
class TransformerEmitter {
 public:
  TransformerEmitter(const TransformerConfig& c, const TransformerGraphInputs& in, TaskGraph& g);

  TransformerGraph run();

 private:
  KernelDescId add(const KernelDesc& d) { return graph_.add_kernel_desc(d); }

  // ---- parameters ---------------------------------------------------------------------------
  /// A norm's tensors: the gain, and the bias of a LayerNorm with biases
  /// (transformer_norm_parameters()).
  void add_norm(LayerParams& p) const;

  /// The parameter tensors of `layer` on one GPU, as transformer_memory.h counts them: column-
  /// and row-parallel weights split over tensor (row-parallel biases and norms replicated),
  /// routed experts split over expert and tensor parallel (Megatron's expert tensor parallel =
  /// tensor). The expert GEMMs run unsplit on tokens / tensor instead: the same flops.
  LayerParams layer_params(int64_t layer) const;

  LayerParams embedding_params() const;

  LayerParams head_params() const;

  // ---- process groups -----------------------------------------------------------------------
  uint32_t process_group(ParallelDim dim, const std::vector<int64_t>& members,
                         std::string_view channel = {}, std::string_view name = {});
  CollectiveId call(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                    std::vector<int64_t> send_bytes = {});

  // ---- per rank -----------------------------------------------------------------------------
  void begin_rank(int64_t global, RankId graph_rank);

  bool sharded_optimizer() const;
  /// Ranks that hold the same parameters (ParallelLayout::replica_group): the gradient
  /// reduction's group size and the ZeRO / FSDP shard count.
  int64_t replicas() const { return config_.parallelism.data * config_.parallelism.context; }
  int64_t virtual_stage(int64_t chunk) const;
  int64_t virtual_stages() const { return config_.parallelism.pipeline * chunks_; }
  int64_t first_layer(int64_t chunk) const { return virtual_stage(chunk) * layers_per_chunk_; }

  // ---- emission helpers ---------------------------------------------------------------------
  void marker(std::string_view name);
  void op(std::string_view name, std::string_view kernel_name, KernelDescId k);
  void op2(std::string_view name, std::string_view k1, KernelDescId d1, std::string_view k2,
           KernelDescId d2);
  /// A collective that blocks the compute stream (torch.distributed on the current stream).
  void blocking(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                std::string_view op_name, std::vector<int64_t> send_bytes = {});
  void tp_collective(CollectiveKind kind, int64_t bytes, std::string_view op_name);

  /// Column-parallel linear backward (Megatron's LinearWithGradAccumulationAndAsyncCommunication):
  /// with SP the input is all-gathered again while the input gradient is computed, and the input
  /// gradient is reduce-scattered while the weight gradient is computed; without SP the input
  /// gradient is all-reduced while the weight gradient is computed.
  void column_parallel_backward(std::string_view name, KernelDescId dgrad, KernelDescId wgrad);

  /// Entering a tensor-parallel region (before a column-parallel linear): SP all-gather.
  void tp_enter_forward();
  /// Leaving it (after a row-parallel linear): SP reduce-scatter or all-reduce.
  void tp_exit_forward();
  /// The backward of tp_exit_forward: SP all-gathers the output gradient; an all-reduce's
  /// backward is the identity.
  void tp_exit_backward();

  std::string_view norm_op(bool backward) const;
  std::string_view act_op(bool backward) const;

  // ---- layer forward / backward -------------------------------------------------------------
  void attention_forward(bool recompute_core_only);

  /// Flash attention over the local sequence, with ring attention steps over context parallel:
  /// each step's K/V exchange (a ring shift over the CP group) overlaps the previous step's
  /// attention on the TP-comm stream.
  void core_attention_flash(bool backward);

  void attention_backward();

  void mlp_forward(int64_t layer);

  void mlp_backward(int64_t layer);

  /// The all-to-all of routed tokens over the EP group: EP rank i sends rank j the tokens routed
  /// to j's experts. Rank 0 of each group holds the busiest experts (moe_busiest_rank_load);
  /// the others share the rest evenly, each at most the capacity. Dropped tokens are not sent
  /// (Megatron-Core's router drops them before the dispatch).
  std::vector<int64_t> dispatch_matrix(bool combine) const;

  void moe_forward();

  void moe_backward();

  void embedding_forward();

  void embedding_backward();

  void head_forward();

  void head_backward();

  // ---- data-parallel gradient and parameter traffic -------------------------------------------
  /// Bytes per gradient element in the data-parallel reduction (TransformerConfig::
  /// gradient_dtype()).
  int64_t grad_bytes() const { return dtype_bytes(config_.gradient_dtype()); }

  /// The parameter tensors of `buffer` on this rank in the order their gradients become ready:
  /// the backward visits the virtual stages' last micro-batch from the output layer down to the
  /// embedding, each layer's tensors last-first (PyTorch DDP's rebuilt bucket order).
  std::vector<int64_t> gradient_ready_bytes(const std::vector<PipelineStep>& steps,
                                            GradBufferIndex buffer) const;

  // ---- one iteration --------------------------------------------------------------------------
  void forward_layer(int64_t layer, int64_t last_layer);

  void backward_layer(int64_t layer, int64_t first_layer_of_chunk, bool last_micro_batch);

  /// Pipeline p2p: posts the receive of this step's input on its stream and makes the compute
  /// stream wait for it.
  /// Bytes of one pipeline message on the network: the activation (or its gradient) of one
  /// micro-batch, split over the TP ranks with the scatter/gather optimisation.
  int64_t p2p_bytes() const;
  bool scatter_gather() const;

  void receive(bool forward, int64_t micro_batch, int64_t chunk);

  void send(bool forward, int64_t micro_batch, int64_t chunk);

  void iteration(uint32_t it);

  /// PyTorch DDP's buckets over each gradient buffer's tensors in ready order
  /// (workloads/pytorch/ddp_buckets.h): 1 MiB first, then ddp_bucket each.
  void assign_gradient_buckets(const std::vector<PipelineStep>& steps);

  void finish_gradients();

  void optimizer_step();

  // ---- checks ---------------------------------------------------------------------------------
  struct Message {
    int64_t from = 0;
    int64_t to = 0;
    bool forward = true;
    int64_t micro_batch = 0;
    int64_t virtual_stage = 0;  ///< the receiver's
  };

  /// Every pipeline message must be received in the order it was sent (messages on a directed
  /// pair are matched by order); a schedule that breaks this would pair the wrong messages.
  void check_p2p_order() const;

  const TransformerConfig& config_;
  TransformerGraphInputs inputs_;
  TaskGraph& graph_;
  ParallelLayout layout_;
  LayerSizes sizes_;
  LayerKernels layer_kernels_{};
  DType gemm_dt_ = DType::kBf16;
  DType act_dt_ = DType::kBf16;
  int64_t act_elem_bytes_ = 2;
  int64_t micro_batches_ = 1;
  int64_t chunks_ = 1;
  int64_t layers_per_chunk_ = 1;
  bool mirror_ = false;

  ProcessGroups groups_;

  // The rank being emitted.
  int64_t rank_ = 0;
  RankThreads threads_;
  ParallelCoords coords_;
  uint32_t tp_pg_ = 0, cp_pg_ = 0, dp_pg_ = 0, ep_pg_ = 0, mp_pg_ = 0, emb_pg_ = 0;
  uint32_t to_next_ = 0, from_prev_ = 0, to_prev_ = 0, from_next_ = 0;
  int64_t prev_ = 0, next_ = 0;
  std::array<GradBuffer, kGradBuffers> grad_buffers_;
  std::unique_ptr<GradientSync> grad_sync_;
  struct StepDescs {
    KernelDescId norm = 0, scale = 0, update = 0, copy = 0;
  };
  /// Optimizer-step kernels by the number of local parameter elements.
  std::map<int64_t, StepDescs> step_descs_;
  std::vector<Message> sent_;
  std::vector<Message> received_;
};

}  // namespace upsim::transformer_emit
