// The emitter of one transformer training step per rank (transformer_generator.h): the rank's
// process groups and gradient buffers, then per iteration the pipeline schedule's forward and
// backward steps, the gradient synchronisation's hooks around each unit, and the optimizer step.
// It composes the pieces that emit: OpEmitter (op_emitter.h: host ops on the rank's thread and
// streams), LayerEmitter (layer_emitter.h: one layer's ops), PipelineP2p (pipeline_p2p.h: sends
// and receives between stages), GradientSync (gradient_sync.h: DDP / ZeRO / FSDP), over
// ModelParameters (model_parameters.h: the units' parameter tensors).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "sim/task_graph.h"
#include "sim/units.h"
#include "workloads/transformer/encoder_decoder.h"
#include "workloads/transformer/gradient_sync.h"
#include "workloads/transformer/layer_emitter.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/model_parameters.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/pipeline_p2p.h"
#include "workloads/transformer/process_groups.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim::transformer_emit {

/// Emits every simulated rank's iterations into the graph (run()).
class TransformerEmitter {
 public:
  TransformerEmitter(const TransformerConfig& c, const TransformerGraphInputs& in, TaskGraph& g);

  TransformerGraph run();

 private:
  // ---- per rank -----------------------------------------------------------------------------
  /// Makes the rank's process groups (in the same order on every rank) and points the emitters
  /// at it.
  void begin_rank(int64_t global, RankId graph_rank);

  bool sharded_optimizer() const;
  /// Multi-token prediction layer `k`'s gradient-sync unit (the embedding is -1, the head -2)
  /// and parameters (mtp_emitter.cpp).
  static int64_t mtp_unit(int64_t k) { return -3 - k; }
  LayerParams mtp_params(int64_t k) const;
  /// Whether `stage` is an encoder-decoder model's first decoder stage holding its own copy of
  /// the word embedding (neither the first nor the last stage, which hold one anyway).
  bool embedding_copy_stage(int64_t stage) const;
  /// Ranks that hold the same parameters (ParallelLayout::replica_group): the gradient
  /// reduction's group size and the ZeRO / FSDP shard count.
  int64_t virtual_stage(int64_t chunk) const;
  int64_t virtual_stages() const { return config_.parallelism.pipeline * chunks_; }
  int64_t first_layer(int64_t chunk) const {
    return config_.chunk_layers(virtual_stage(chunk)).first;
  }
  /// Layers of `chunk` on this rank (TransformerConfig::chunk_layers).
  int64_t chunk_layer_count(int64_t chunk) const {
    return config_.chunk_layers(virtual_stage(chunk)).count;
  }

  // ---- one iteration --------------------------------------------------------------------------
  void iteration(uint32_t it);
  /// One forward or backward step of the pipeline schedule: its receive, the chunk's layers
  /// (with the embedding and the head on the first and last virtual stage), its send.
  void schedule_step(const PipelineStep& step, uint32_t it);
  /// The step's zero-cost marker "forward mb <i> chunk <c>" (transformer_generator.h).
  void step_marker(const PipelineStep& step);
  /// The step's compute alone: the chunk's layers with the embedding and the head.
  void step_compute(const PipelineStep& step, uint32_t it);
  /// The schedule under Megatron's synchronous exchanges (pipeline_exchanges.h): the steps
  /// with a batched exchange and a synchronize between them where Megatron has one.
  void synchronous_schedule(const std::vector<PipelineStep>& steps, PipelineSchedule schedule,
                            uint32_t it);

  // ---- Megatron-Core's combined 1F1B schedule (moe.a2a_overlap; combined_1f1b.cpp) -----------
  /// Where one micro-batch's chain of layer nodes has got to: the event recorded after its last
  /// node and that node's stream (Megatron-Core's ScheduleNode: each node waits for its chain's
  /// event on its own stream, runs, and records it again).
  struct NodeChain {
    TaskId done = 0;  ///< valid once chain_record has run (combined_step records first)
    uint16_t stream = kCompute;
  };
  /// A forward step and the backward step after it, run together (model_chunk_schedule_plan.py,
  /// TransformerModelChunkSchedulePlan.run): the forward's embedding, the backward's head,
  /// then layer by layer (the forward's i-th with the backward's i-th from the top) the eight
  /// nodes in TransformerLayerSchedulePlan.run's order, then the forward's head and the
  /// backward's embedding; under interleaved pipelines the forward's receive and send and the
  /// backward's around them (combined_1f1b_schedule_for_interleaved_pipelining's pre_forward,
  /// pre_backward, post_forward, post_backward).
  void combined_step(const PipelineStep& forward, const PipelineStep& backward);
  /// Node `node` of `layer` on `stream`, after the chain's previous node.
  void chain_node(NodeChain& chain, uint16_t stream, LayerEmitter::LayerNode node, bool backward,
                  int64_t layer);
  /// One layer of a model chunk's schedule plan: decoder layer `layer`, or (mtp >= 0) MTP
  /// layer `mtp`, whose transformer layer is like `layer`, the model's last.
  struct ChunkEntry {
    int64_t layer = 0;
    int64_t mtp = -1;
  };
  /// `chunk`'s layers in forward order: its decoder layers, then on the last virtual stage the
  /// MTP layers (TransformerModelChunkSchedulePlan builds the MTP block's plans after them).
  std::vector<ChunkEntry> chunk_entries(int64_t chunk) const;
  /// chain_node for an entry: an MTP layer's pre-dispatch node wraps its transformer layer's
  /// with the MTP prologue (LayerEmitter::mtp_prologue_forward / _backward).
  void entry_node(NodeChain& chain, uint16_t stream, LayerEmitter::LayerNode node, bool backward,
                  const ChunkEntry& entry);
  /// An MTP layer's post-process node on the compute stream (its final norm, output layer and
  /// loss; the forward's after its combine, the backward's first); nothing for a decoder layer.
  void mtp_post_process(NodeChain& chain, bool backward, const ChunkEntry& entry);
  /// The chain's next work on `stream` waits for its previous node when that ran elsewhere; the
  /// chain goes on on `stream` (the next node on another stream follows a chain_record).
  void chain_join(NodeChain& chain, uint16_t stream);
  /// Records the chain's event after work just issued on `stream`.
  void chain_record(NodeChain& chain, uint16_t stream);
  /// moe.delay_wgrad: the weight gradients the last backward nodes deferred (nothing
  /// otherwise), on the compute stream.
  void deferred_weight_gradients();

  void forward_layer(int64_t layer, int64_t last_layer);
  /// One MTP layer of the last chunk (mtp_emitter.cpp): its prologue, a transformer layer like
  /// the model's last (in CUDA graphs as the decoder's layers are), its final norm; and its
  /// backward.
  void mtp_layer_forward();
  void mtp_layer_backward();
  /// Whether layer `layer`'s MLP block starts inside its CUDA graph (cuda_graph_scope: the
  /// whole layer, mlp on a dense layer, moe or moe_router on a MoE layer). Its backward under
  /// moe_router starts eagerly (the graph begins inside moe_backward).
  bool mlp_block_graphed(int64_t layer) const;
  /// The ops from here on are captured (`captured`) or run eagerly: ends an open capture with
  /// its replay, or begins one.
  void graph_scope_begin(bool captured);

  /// `forward_index`: how many forwards the layer ran before this micro-batch's, since the run
  /// began (recompute: op alternates what it saves with it).
  void backward_layer(int64_t layer, int64_t first_layer_of_chunk, bool last_micro_batch,
                      int64_t forward_index);
  /// An encoder-decoder model's decoder layer `layer` (config_.layers and on): its
  /// recomputation, then the backward of its MLP, cross-attention and self-attention.
  void backward_decoder_layer(int64_t layer);

  // ---- data-parallel gradient and parameter traffic -------------------------------------------
  /// Bytes per gradient element in the data-parallel reduction (TransformerConfig::
  /// gradient_dtype()).
  int64_t grad_bytes() const { return dtype_bytes(config_.gradient_dtype()); }

  /// The parameter tensors of `buffer` on this rank in the order their gradients become ready:
  /// the backward visits the virtual stages' last micro-batch from the output layer down to the
  /// embedding, each layer's tensors last-first (PyTorch DDP's rebuilt bucket order).
  std::vector<int64_t> gradient_ready_bytes(const std::vector<PipelineStep>& steps,
                                            GradBufferIndex buffer) const;

  /// PyTorch DDP's buckets over each gradient buffer's tensors in ready order
  /// (workloads/pytorch/ddp_buckets.h): 1 MiB first, then ddp_bucket each.
  void assign_gradient_buckets(const std::vector<PipelineStep>& steps);

  void finish_gradients();

  /// The parameter units of `chunk` on this rank in forward order: the embedding on the first
  /// virtual stage, its layers, then on the last its MTP layers and the head.
  void for_each_chunk_unit(int64_t chunk,
                           const std::function<void(const LayerParams&)>& visit) const;
  /// Parameter elements per gradient buffer of this rank's model chunks 0 .. `chunk` in forward
  /// order.
  PerBuffer forward_elements_through(int64_t chunk) const;
  /// A forward step begins (after its receive): ParallelismConfig::align_param_gather's
  /// dispatch of the next model chunk's parameter all-gathers when this step is where Megatron's
  /// schedule launches them (forward_step_helper_preprocess).
  void begin_forward_step();

  void optimizer_step();
  /// torchtitan's MoE load balancing (layer_kernels torchtitan with moe): the optimizer's
  /// step pre-hook _update_expert_bias (torchtitan/components/optimizer.py): the MoE layers'
  /// token counts stacked and all-reduced over the data x context ranks (blocking, on the
  /// compute stream), then per MoE layer the bias update's small kernels.
  void expert_bias_update();

  const TransformerConfig& config_;
  TransformerGraphInputs inputs_;
  TaskGraph& graph_;
  ParallelLayout layout_;
  LayerSizes sizes_;
  LayerKernels layer_kernels_;
  DType act_dt_ = DType::kBf16;
  int64_t act_elem_bytes_ = 2;
  int64_t micro_batches_ = 1;
  int64_t chunks_ = 1;
  bool mirror_ = false;
  /// Forward steps emitted so far in this iteration (Megatron's virtual micro-batch id).
  int64_t forward_steps_ = 0;

  ProcessGroups groups_;
  ModelParameters params_;

  // The rank being emitted, and what emits on it.
  int64_t rank_ = 0;
  RankThreads threads_;
  ParallelCoords coords_;
  OpEmitter ops_;
  LayerEmitter layers_;
  // Encoder-decoder models (encoder_decoder.h): the decoder stack's config, sizes and kernels,
  // its layers' emitter and their cross-attention kernels. `layers_` then emits the encoder;
  // layers from config_.layers on are the decoder's. Otherwise no kernel of theirs is added.
  TransformerConfig decoder_config_;
  LayerSizes decoder_sizes_;
  LayerKernels decoder_kernels_;
  CrossAttentionKernels cross_kernels_;
  LayerEmitter decoder_layers_;
  /// The emitter of the last layers and the head: the decoder stack's, or layers_.
  LayerEmitter& head_layers() { return config_.encoder_decoder() ? decoder_layers_ : layers_; }
  PipelineP2p p2p_;
  uint32_t dp_pg_ = 0, mp_pg_ = 0, emb_pg_ = 0;
  std::array<GradBuffer, kGradBuffers> grad_buffers_;
  std::unique_ptr<GradientSync> grad_sync_;
  struct StepDescs {
    KernelDescId norm = 0, scale = 0, update = 0, copy = 0;
  };
  /// Optimizer-step kernels by the number of local parameter elements.
  std::map<int64_t, StepDescs> step_descs_;
};

}  // namespace upsim::transformer_emit
