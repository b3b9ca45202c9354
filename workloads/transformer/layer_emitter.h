// The ops of one transformer layer on the rank being emitted, forward and backward: attention
// (flash with ring steps over context parallel, or unfused), the MLP, the MoE block (router,
// permutation, expert all-to-all, grouped expert GEMMs, shared experts), the embedding and the
// output layer with its vocab-parallel cross-entropy, and the tensor-parallel collectives around
// them (Megatron's column- and row-parallel linears, with and without sequence parallel).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/transformer/encoder_decoder.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::transformer_emit {

/// SMs Transformer Engine's userbuffers kernels hold under TP overlap, TE's defaults
/// (transformer_engine/pytorch/module/base.py, initialize_ub, get_default_config): 16 for the
/// pipelined and bulk overlaps, whose GEMMs TE launches on the SMs left (set_sm_margin, so
/// their collectives carry CollectiveDesc::gemm_sm_margin); none for the ring exchange, whose
/// copies run on the copy engines (use_ce) and whose GEMMs TE launches on every SM
/// (set_sm_margin false; its num_sm 1 is the SM path's, unused with use_ce).
inline constexpr int32_t kUserbuffersRingExchangeSms = 0;
inline constexpr int32_t kUserbuffersSms = 16;

/// An all-to-all's send sizes (members x members, row-major) for a ring shift: every member
/// sends `bytes` to the next member of the group, nothing else (ring attention's K/V exchange,
/// Transformer Engine's ring-exchange TP overlap).
std::vector<int64_t> ring_shift_sizes(int64_t members, int64_t bytes);

/// The process groups of the rank being emitted that a layer's ops call.
struct LayerGroups {
  uint32_t tensor = 0;
  uint32_t context = 0;
  uint32_t expert = 0;
  /// The rank's place in its context-parallel group (which sequence chunks it holds).
  int64_t context_index = 0;
  /// The node of each member of the expert-parallel group, in group order (moe.dispatcher flex:
  /// DeepEP forwards across nodes); empty when the platform does not say where nodes end (then
  /// 8 consecutive members a node, DeepEP's numbering).
  std::vector<uint32_t> expert_nodes;
};

/// DeepEP's send sizes on the rank's expert-parallel group (moe.dispatcher flex; deepep.h),
/// members x members each: the count exchange before a dispatch (notify_dispatch), the forward
/// dispatch (hidden rows with their top-k indices and weights) and combine (hidden rows), and
/// their gradients: the combine's backward is a dispatch of the rows' gradients, the
/// dispatch's a combine of them with the weights' gradients.
struct FlexRoutes {
  std::vector<int64_t> notify, dispatch, combine, combine_grad, dispatch_grad;
  /// SMs each kernel holds (flex_dispatch_sms).
  int32_t sms = 0;
};

/// The kernels of Megatron's unfused CoreAttention (baddbmm q k^T, the masked softmax, dropout,
/// bmm p v) and of their backward, of a self- or a cross-attention.
struct UnfusedAttentionKernels {
  KernelDescId score_fwd, softmax_fwd, dropout_fwd, av_fwd;
  KernelDescId av_dgrad_p, av_dgrad_v, dropout_bwd, softmax_bwd, score_dgrad_q, score_dgrad_k;
  /// T5's relative bias added to the scores and its gradient's sum (0: none; relative_bias.h).
  KernelDescId bias_add = 0, bias_grad_sum = 0;
};

class LayerEmitter {
 public:
  /// The references must outlive the emitter; `ops` emits on the rank being emitted.
  LayerEmitter(const TransformerConfig& config, const LayerSizes& sizes,
               const LayerKernels& kernels, OpEmitter& ops);

  /// A new rank is emitted: its process groups.
  void begin_rank(const LayerGroups& groups);

  /// T5's relative attention bias (relative_bias.h): before the stack's first layer on a
  /// micro-batch, its buckets and gather; after that layer's backward, the table's scatter.
  void relative_bias_forward();
  void relative_bias_backward();
  /// The attention block's forward.
  void attention_forward(int64_t layer);
  /// The attention block's backward, with the forward of what selective recomputation reruns
  /// before the backward that needs it (TransformerConfig::selective_modules: the core
  /// attention, latent attention's input norm).
  void attention_backward(int64_t layer);
  /// The MLP block (an MoE block on the config's MoE layers).
  void mlp_forward(int64_t layer);
  /// Its backward, with what selective recomputation reruns (the dense MLP, the MoE layer, its
  /// pre-MLP norm, expert activation or shared experts).
  void mlp_backward(int64_t layer);
  void embedding_forward();
  void embedding_backward();
  /// The forward ops of a layer that torchtitan's per-op checkpointing policy did not save in
  /// the layer's forward number `forward_index`, rerun before its backward (recompute: op;
  /// op_recompute.h, op_recompute_emitter.cpp).
  void op_recompute(int64_t forward_index);
  /// The final norm and the task head (head_emitter.cpp).
  void head_forward();
  void head_backward();
  /// The vocabulary-parallel output layer and its cross-entropy on every token, without the
  /// final norm: the language-model head's, and each MTP layer's own (head_emitter.cpp).
  void vocabulary_output_forward();
  void vocabulary_output_backward();
  /// A multi-token prediction layer (TransformerConfig::mtp_layers; mtp_emitter.cpp) is its
  /// prologue (its embedding, enorm and hnorm, their concatenation, eh_proj and their
  /// tensor-parallel gathers), a transformer layer like the model's last (which the caller
  /// emits, in or out of CUDA graphs as the decoder's), and its final norm; the backward runs
  /// them in reverse. The combined 1F1B schedule puts the prologue in the layer's pre-dispatch
  /// node (combined_1f1b.cpp).
  void mtp_prologue_forward();
  void mtp_prologue_backward();
  void mtp_final_norm_forward();
  void mtp_final_norm_backward();
  /// The combined schedule's MTP post-process node: the MTP layer's final norm and its own
  /// output layer and loss (vocabulary_output_forward), and their backward.
  void mtp_post_process_forward();
  void mtp_post_process_backward();

  // Encoder-decoder models (encoder_decoder.h; cross_attention_emitter.cpp), on the emitter of
  // the decoder stack (the cross-attention) or of the encoder (its final norm).
  /// A decoder layer's cross-attention block after its self-attention: norm, query projection
  /// on the decoder's tokens, key/value projection on the encoder's output, attention of the
  /// decoder's queries over the encoder's keys, output projection, residual add.
  void cross_attention_forward(const CrossAttentionKernels& k);
  /// Its backward; `accumulate`: the encoder output's gradient from an earlier-run decoder
  /// layer's backward is there to add this layer's to (every decoder layer's backward but the
  /// first to run).
  void cross_attention_backward(const CrossAttentionKernels& k, bool accumulate);
  /// The encoder's final norm (after its last layer, before the decoder reads its output).
  void final_norm_forward();
  void final_norm_backward();

  /// A collective over the tensor-parallel group that blocks the compute stream.
  void tp_collective(CollectiveKind kind, int64_t bytes, std::string_view op_name);

  /// The four pieces of a decoder layer that Megatron-Core's combined 1F1B schedule runs apart
  /// (moe.a2a_overlap; megatron/core/models/gpt/fine_grained_callables.py,
  /// build_transformer_layer_callables; layer_nodes.cpp):
  ///  - kPreDispatch (computation): attention, the pre-MLP norm, router and top-k, the shared
  ///    experts, the dispatcher's preprocess; a dense layer's attention;
  ///  - kDispatch (communication): the dispatch all-to-all; nothing on a dense layer;
  ///  - kMlp (computation): the routed experts between the dispatch and the combine; a dense
  ///    layer's norm, MLP and residual add;
  ///  - kCombine (communication): the combine all-to-all, unpermute and the residual add;
  ///    nothing on a dense layer.
  enum class LayerNode : uint8_t { kPreDispatch, kDispatch, kMlp, kCombine };
  /// Node `node` of `layer`, forward or backward, on the current stream (the caller puts it on
  /// its stream, OpEmitter::StreamScope). The backward of a node holds what recomputation
  /// reruns for it.
  void layer_node(LayerNode node, bool backward, int64_t layer);
  /// moe.delay_wgrad (Megatron-Core's delay_wgrad_compute): the weight gradients that the
  /// backward of the kMlp and kPreDispatch nodes left out, on the current stream (the nodes'
  /// backward_dw: the experts' grouped GEMMs, a dense MLP's, the attention's and the shared
  /// experts' linears, latent attention's projections, under tensor parallel as Transformer
  /// Engine's Linear defers them); nothing when none is pending.
  void flush_weight_gradients();

 private:
  void emit_layer_node(LayerNode node, bool backward, int64_t layer);
  void moe_node_forward(LayerNode node);
  void moe_node_backward(LayerNode node);
  /// The pre-MLP norm: its kernel, or compiled the residual add fused with it.
  void pre_mlp_norm_forward();
  /// Megatron-Core's router: its linear and top-k; backward, their gradients.
  void router_forward();
  void router_backward();
  /// The local experts' grouped GEMMs and activation (with their fp8 casts); backward, with
  /// the activation rerun under the moe_act recompute module.
  void routed_experts_forward();
  void routed_experts_backward();
  /// An expert grouped GEMM's backward: its input and weight gradients, or while a backward
  /// node defers (moe.delay_wgrad) the input gradient alone.
  void grouped_gemm_backward(KernelDescId dgrad, KernelDescId wgrad);
  /// A weight gradient `desc` (kernel `kernel`) kept for flush_weight_gradients while a
  /// backward node defers (true), or nothing (false: the caller emits it).
  bool defer_weight_gradient(std::string_view kernel, KernelDescId desc);
  struct DeferredWeightGradient {
    std::string kernel;
    KernelDescId desc = 0;
  };
  /// Set while layer_node emits a kMlp or kPreDispatch backward under moe.delay_wgrad.
  bool deferring_ = false;
  std::vector<DeferredWeightGradient> deferred_;
  /// Column-parallel linear backward (Megatron's LinearWithGradAccumulationAndAsyncCommunication):
  /// with SP the input is all-gathered again while the input gradient is computed, and the input
  /// gradient is reduce-scattered while the weight gradient is computed; without SP the input
  /// gradient is all-reduced while the weight gradient is computed.
  /// `dtype` names the GEMM kernels (the layer's GEMM dtype unless given); `rows`: the input's
  /// rows (the layer's tokens unless given: a cross-attention's key/value projection runs on
  /// the encoder's).
  void column_parallel_backward(std::string_view name, KernelDescId dgrad, KernelDescId weight_grad,
                                std::optional<DType> dtype = std::nullopt,
                                std::optional<int64_t> rows = std::nullopt);

  // LoRA fine-tuning (lora.h; lora_emitter.cpp).
  /// Whether the base model is frozen (LoRA): its linears run no weight-gradient GEMM.
  bool frozen_base() const { return config_.lora.enabled(); }
  /// The adapter of `target`, after the base linear's forward (and, for a row-parallel base,
  /// its output's reduction; each target's call site emits it); nothing when the target is not
  /// adapted.
  void lora_forward(LoraTarget target);
  /// Its backward, before the base linear's.
  void lora_backward(LoraTarget target);

  // torchtitan's modules (layer_kernels torchtitan; torchtitan_layer.h,
  // torchtitan_layer_emitter.cpp): the attention block and the MLP between the norm and the
  // residual add, forward and backward.
  void torchtitan_attention_forward(int64_t layer);
  void torchtitan_attention_backward(int64_t layer);
  void torchtitan_mlp_forward();
  void torchtitan_mlp_backward();
  /// torchtitan's rotary on q and k (eager: casts and complex multiplies; compiled: one kernel).
  void torchtitan_rotary(bool backward);
  /// torchao float8 (TransformerConfig::torchao_float8; torchao_float8.h): a cast's steps,
  /// compiled kernels and the TP all-reduces of amaxes, on the compute stream (none for an
  /// empty list: every other run).
  void float8_steps(const std::vector<Float8Step>& steps, bool backward);
  /// The entry of the attention or the MLP into its TP region with its input's float8 casts:
  /// cast on the sequence shard and all-gathered in float8 under float8 TP; else the bf16
  /// all-gather (SP) and the casts on the gathered input.
  void torchtitan_enter_forward(const Float8Cast& input);
  /// wo / w2 (RowwiseParallel) with their float8 input and weight casts: row_parallel_forward,
  /// or under async TP the fused matmul + reduce-scatter on `async_chunk`.
  void torchtitan_row_parallel_forward(std::string_view gemm, KernelDescId async_chunk,
                                       const Float8Cast& input, const Float8Cast& weight,
                                       KernelDescId full, KernelDescId split);
  /// Their backward: the output gradient's all-gather (SP; in float8 under float8 TP, after its
  /// cast) and the float8 casts, then dgrad and wgrad; under async TP the output gradient's
  /// fused all-gather + dgrad (`async_dgrad_chunk`), then the wgrad on the gathered gradient.
  struct RowParallelBackward {
    KernelDescId async_dgrad_chunk = 0, dgrad = 0, dgrad_chunk = 0, wgrad = 0;
    const Float8Cast& dy;
    const Float8Cast& weight;
    const Float8Cast& input;
    const Float8Rescale& rescale;
  };
  void torchtitan_row_parallel_backward(const RowParallelBackward& linear);
  /// One of the linears sharing a replicated input in the forward: its GEMM's kernel name and
  /// description, and its weight's float8 casts.
  struct ReplicatedForward {
    std::string_view kernel_name;
    KernelDescId gemm = 0;
    const Float8Cast& weight;
  };
  /// The forward of linears that share one replicated input (wq, wk, wv; w1, w3): the input's
  /// entry into the TP region with its float8 casts (torchtitan_enter_forward), then each
  /// linear's weight casts and GEMM.
  void replicated_input_linears_forward(const Float8Cast& input,
                                        std::initializer_list<ReplicatedForward> linears);
  /// One of the linears sharing a replicated input: its GEMMs and float8 casts.
  struct ReplicatedLinear {
    KernelDescId dgrad = 0, wgrad = 0;
    const Float8Cast& dy;
    const Float8Cast& weight;
    const Float8Rescale& rescale;
  };
  /// The rowwise recipe's rescales after a linear's backward GEMMs (none otherwise).
  void float8_rescale(const Float8Rescale& rescale);
  /// The backward of linears that share one replicated input (wq, wk, wv; w1, w3), in the
  /// order autograd runs them: their casts and GEMMs (the shared input's backward casts before
  /// the first weight gradient), autograd's sum of their input gradients, then tensor
  /// parallel's reduction of it (the backward of the input's all-gather under SP, an
  /// all-reduce without).
  void replicated_input_linears_backward(std::initializer_list<ReplicatedLinear> linears,
                                         const Float8Cast& input);

  /// Megatron's unfused core attention, forward or backward (dropout only with dropout > 0).
  void unfused_attention(const UnfusedAttentionKernels& k, bool backward);
  UnfusedAttentionKernels unfused_self_attention() const;

  /// The backward of a block's residual add (its dropout's, or none when compiled without).
  void residual_backward();
  /// A norm's backward and the add of its input gradient to the residual stream's gradient
  /// (one fused kernel when compiled).
  void norm_backward_and_residual_gradient();

  /// An fp8 GEMM operand's quantisation kernels (Fp8Cast), when the layer has them.
  void fp8_cast(const Fp8Cast& cast, bool backward);
  /// torch.autocast's casts before a linear's GEMM (its weight, and its fp32 input) and after
  /// its backward GEMMs (the gradients back to fp32); nothing without autocast (autocast.h).
  void autocast_forward(const AutocastCasts& casts);
  void autocast_backward(const AutocastCasts& casts);

  /// A column-parallel linear's forward (`gemm`: qkv, fc1): its input all-gathered first under
  /// SP, or the ring exchange under TP overlap; `cast`: its fp8 input quantisation.
  void column_parallel_forward(std::string_view gemm, const Fp8Cast& cast, KernelDescId full,
                               KernelDescId chunk);
  /// A row-parallel linear's forward (proj, fc2) and its reduce-scatter / all-reduce, or the
  /// pipelined GEMM + reduce-scatter under TP overlap.
  void row_parallel_forward(std::string_view gemm, const Fp8Cast& cast, KernelDescId full,
                            KernelDescId split);
  /// A row-parallel linear's backward: its output gradient all-gathered under SP (the ring
  /// exchange under TP overlap), then the input and weight gradients.
  void row_parallel_backward(const Fp8Cast& dy, KernelDescId dgrad, KernelDescId dgrad_chunk,
                             KernelDescId wgrad);

  /// Entering a tensor-parallel region (before a column-parallel linear): SP all-gather.
  void tp_enter_forward();
  /// Leaving it (after a row-parallel linear): SP reduce-scatter or all-reduce.
  void tp_exit_forward();
  /// The backward of tp_exit_forward: SP all-gathers the output gradient; an all-reduce's
  /// backward is the identity.
  void tp_exit_backward();

  // torchtitan's async tensor parallel (parallelism.async_tp; async_tp_emitter.cpp): the ops
  // Inductor's micro-pipeline TP pass puts in place of an all-gather feeding matmuls and of a
  // matmul feeding a reduce-scatter, as torch.distributed._symmetric_memory runs them.
  /// fused_all_gather_matmul: the local shard copied into the symmetric-memory buffer, its
  /// `consumers` (kernel name, description; one rank's token shard each), then tensor - 1 steps,
  /// each a peer's shard copied by the copy engines (no SMs) and its consumers run once it has
  /// arrived; step s's copy follows step s - 2's matmuls (the two streams the pipeline
  /// alternates); then the local shard copied into the gathered output (kept for the wgrad),
  /// and `after` (the wgrad on it) when given.
  void async_tp_all_gather_matmuls(
      std::initializer_list<std::pair<std::string_view, KernelDescId>> consumers,
      std::optional<std::pair<std::string_view, KernelDescId>> after = {});
  /// fused_matmul_reduce_scatter: tensor - 1 steps, each the output chunk for one peer
  /// (`chunk`, one rank's token shard) computed and copied to it by the copy engines, a step
  /// waiting for the copy two steps back (two buffers); the local chunk; once every copy has
  /// arrived, the sum of the partial chunks.
  void async_tp_matmul_reduce_scatter(std::string_view kernel_name, KernelDescId chunk);
  /// One step of a symmetric-memory pipeline on the TP-comm stream: every rank's `bytes` to the
  /// rank `step` before it, on the copy engines (no SMs).
  void async_tp_peer_copy(HostOp& h, int64_t step, int64_t bytes);

  // Tensor-parallel communication overlapped with the GEMMs (parallelism.tp_comm_overlap,
  // Transformer Engine's userbuffers; tp_comm_overlap.cpp).
  /// A GEMM on the all-gathered tokens as TE's ring exchange: tensor - 1 peer-to-peer steps on
  /// the TP-comm stream (copy engines, 1 SM), the GEMM `chunk` once per token chunk, each after
  /// its chunk has arrived (the local one first); then `after` (a wgrad on the gathered
  /// tokens) when given.
  void ring_exchange_gemm(std::string_view op, std::string_view kernel_name, KernelDescId chunk,
                          std::optional<std::pair<std::string_view, KernelDescId>> after = {});
  /// A GEMM followed by the reduce-scatter of its output as TE's pipelined overlap: the GEMM in
  /// kTpOverlapSplits row splits, each split's reduce-scatter (16 SMs) beside the next split.
  void gemm_reduce_scatter_pipelined(std::string_view kernel_name, KernelDescId split);
  /// Bytes of one rank's share of an all-gathered activation (fp8 buffers under fp8, as TE's
  /// all-gather overlaps keep them).
  int64_t tp_chunk_bytes() const;

  std::string_view norm_op(bool backward) const;
  /// A transformer norm (tokens x hidden, the sequence shard under SP) forward or backward: the
  /// norm kernel, or the composite RMSNorm's ops (rms_norm_kernel composite).
  void norm(bool backward);
  void norm_forward();
  void norm_backward();
  /// The per-head query and key norms (qk_norm; nothing otherwise), after the projections.
  void qk_norm_forward();
  void qk_norm_backward();
  std::string_view act_op(bool backward) const;

  /// Flash attention over the local sequence, with ring attention steps over context parallel:
  /// each step's K/V exchange (a ring shift over the CP group) overlaps the previous step's
  /// attention on the TP-comm stream.
  void core_attention_flash(bool backward, bool windowed);
  /// Latent attention's projections (TransformerConfig::mla; latent_attention_emitter.cpp).
  void latent_projections_forward();
  void latent_projections_backward();
  /// The query and key/value up projections and rotary alone: what recompute module
  /// mla_up_proj reruns before the core attention's backward.
  void latent_up_projections_forward();
  /// Context-parallel attention with context_comm all_gather and a2a (context_attention.cpp).
  void gathered_context_attention(bool backward);
  void all_to_all_context_attention(bool backward);

  /// The all-to-all dispatcher's token counts (MoEAlltoAllTokenDispatcher.preprocess,
  /// megatron/core/transformer/moe/token_dispatcher.py): how many tokens each expert receives is
  /// known only on the GPU, and the host needs it (the all-to-all's split sizes, the permutation's
  /// output size, the grouped GEMM's m_splits are host lists): the per-expert counts are
  /// all-gathered over the EP group, copied to the host, which synchronises (cuda_sync_point):
  /// dropless before the all-to-all, with a capacity factor before the first permutation. Only
  /// inputs padded to the capacity (moe.pad_to_capacity) skip it. The host cannot run ahead of
  /// the GPU past this point.
  void expert_count_sync();
  /// The per-expert counts all-gathered over the EP group (nothing without expert parallel:
  /// OpEmitter::blocking on a group of one); the bytes the host then copies.
  int64_t gather_expert_counts();
  /// The host copies `bytes` of token counts from the GPU on the current stream and waits for
  /// them.
  void host_waits_for_expert_counts(int64_t bytes);
  /// Under moe.a2a_overlap, the same split in two as Megatron-Core runs it
  /// (MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize): the counts all-gathered on the
  /// current stream and copied to the host on kEpDtoH once they are there (cuda_dtoh_point);
  /// later, the host waits for that copy (cuda_sync_point), not for the stream it came from.
  /// `gathered`: the counts were all-gathered already (in a moe_preprocess graph).
  void expert_counts_to_host(bool gathered = false);
  void host_waits_for_counts_copy();
  /// moe.dispatcher allgather (MoEAllGatherTokenDispatcher.token_permutation): the routing map,
  /// the routing probabilities and the hidden states all-gathered over the EP group, then the
  /// local experts' token counts to the host (.cpu()), which waits, with or without a capacity.
  void allgather_dispatch();
  /// Its token_unpermutation: unpermute into the gathered shape, the reduce-scatter of the sum
  /// in the probabilities' dtype back to each rank's tokens; backward: the reverse.
  void allgather_combine(bool backward);
  /// The gradients of allgather_dispatch's gathers: permute's gradient in the gathered shape
  /// reduce-scattered, and the probabilities' gradient.
  void allgather_dispatch_backward();

  /// moe.dispatcher flex (Megatron-Core's MoEFlexTokenDispatcher, deepep.h), forward: DeepEP's
  /// second top-k of the routing (setup_metadata's token indices), dispatch layout, count
  /// exchange and the host's wait for the receive counts (its CPU spin before the dispatch
  /// kernel; Megatron-Core: "not compatible with CUDA graph"), or HybridEP's routing-map
  /// all-gather, layout scan and count sync; the dispatch, the receiver's permutation;
  /// flex_combine: unpermute (each token's local experts summed), the combine. The backward's
  /// dispatch and combine (in moe_backward) reuse the forward's layout: no host wait.
  /// `with_metadata` false: without DeepEP's top-k (the combined 1F1B schedule runs it in the
  /// pre-dispatch node, layer_nodes.cpp).
  void flex_dispatch(bool with_metadata = true);
  void flex_combine();
  /// The pieces of the shared experts that moe.shared_expert_overlap runs on the side stream
  /// (Megatron-Core's SharedExpertMLP: pre_forward_comm, linear_fc1_forward_and_act,
  /// linear_fc2_forward with post_forward_comm, and their backward as autograd orders it).
  enum class SharedExpertPart : uint8_t { kEnter, kFc1, kFc2Exit, kFc2Backward, kFc1Backward };
  /// One such piece on the current stream (shared_experts_forward and the backward without the
  /// overlap run them in turn).
  void shared_experts_part(SharedExpertPart part);
  /// One such piece on kSharedExperts (the caller has the side stream wait where Megatron-Core
  /// does).
  void shared_experts_on_side(SharedExpertPart part);
  /// One dispatch or combine kernel of the flex backend over the EP group on the compute stream
  /// (Megatron-Core waits for DeepEP's communication stream at once; HybridEP runs on the
  /// current stream), holding FlexRoutes::sms SMs.
  void flex_collective(std::string_view name, std::string_view op_name,
                       const std::vector<int64_t>& send_bytes);
  /// The op name of moe.flex_backend's: `deepep` or `hybridep`.
  std::string_view flex_op(std::string_view deepep, std::string_view hybridep) const;
  /// The rank's FlexRoutes (empty unless moe.dispatcher flex with expert parallel).
  FlexRoutes flex_routes() const;
  /// The share of a rank's routed rows each EP member receives: member 0 holds the busiest
  /// experts (moe_busiest_rank_load), the others share the rest evenly, each at most the
  /// capacity; padded to capacity, each the same.
  std::vector<double> dispatch_shares() const;

  /// The all-to-all of routed tokens over the EP group: EP rank i sends rank j the tokens routed
  /// to j's experts. Rank 0 of each group holds the busiest experts (moe_busiest_rank_load);
  /// the others share the rest evenly, each at most the capacity. Dropped tokens are not sent
  /// (Megatron-Core's router drops them before the dispatch).
  /// `row_bytes`: the bytes of one routed row (a token's hidden state, or its probability).
  std::vector<int64_t> dispatch_matrix(bool combine, int64_t row_bytes) const;
  /// That all-to-all of the routed tokens (combine: back to their ranks) over the EP group;
  /// nothing without expert parallel.
  void expert_all_to_all(bool combine);
  /// Megatron-Core's dispatcher sends each routed row's probability with it (the experts'
  /// activation applies it: dispatch_all_to_all's global_probs), fp32 (kRouterProbBytes); its
  /// gradient goes back the same way in the backward, after the rows'. Nothing without expert
  /// parallel.
  void expert_probs_all_to_all(bool backward);
  /// Expert tensor parallel = tensor > 1 (Megatron-Core's default): forward, the tensor ranks
  /// all-gather the rows their all-to-all brought (dispatch_postprocess); backward, the
  /// gradient of expert_tp_reduce_scatter's, an all-gather in the probabilities' dtype between
  /// its casts. Nothing with tensor 1 or expert tensor parallel 1.
  void expert_tp_all_gather(bool backward);
  /// Forward, the experts' outputs reduce-scattered back to their tensor ranks in the
  /// probabilities' dtype, cast to it and back (combine_preprocess); backward, the gradient of
  /// the dispatch's all-gather.
  void expert_tp_reduce_scatter(bool backward);
  /// Over `group` of `members` ranks, `rows` hidden-state rows a rank: forward, the
  /// reduce-scatter of the members' rows in the routing probabilities' dtype between `casts`
  /// (Megatron-Core's MoE combine; `forward_op` names it); backward, its gradient, the
  /// all-gather of the rank's rows in that dtype between the casts' gradients.
  void reduce_scatter_in_prob_dtype(uint32_t group, int64_t members, int64_t rows,
                                    const ProbDtypeCasts& casts, bool backward,
                                    std::string_view forward_op);

  /// The core attention's forward: flash attention (with its context-parallel exchanges) or
  /// the unfused scores, softmax, dropout and weighted sum.
  void core_attention_forward(int64_t layer);
  /// A dense MLP's ops between the pre-MLP norm and the residual add: fc1 (with its
  /// sequence-parallel all-gather), activation, fc2 (with its reduce-scatter).
  void dense_mlp_forward();
  void moe_forward();
  void moe_backward();
  /// cuda_graph_scope moe_router: the end of the router's graph, with the dispatcher's
  /// preprocess in it under moe_preprocess (the all-to-all dispatcher's count all-gather and
  /// first permutation, DeepEP's top-k token indices); whether that preprocess ran.
  bool moe_router_graph_end();
  /// The shared experts' forward (MoE layers with moe.shared_experts).
  void shared_experts_forward();
  /// torchtitan's MoE module (layer_kernels torchtitan; torchtitan_moe.h,
  /// torchtitan_moe_emitter.cpp): router, reorderer, dispatch, grouped experts, combine and its
  /// shared experts (FeedForward), forward and backward.
  void torchtitan_moe_forward();
  void torchtitan_moe_backward();
  void torchtitan_shared_experts_forward();
  void torchtitan_shared_experts_backward();
  /// Expert parallel under torchtitan: the token counts' all-to-all, their copy to the host and
  /// .tolist(), which the host waits for (ExpertParallel._token_dispatch).
  void torchtitan_moe_split_sync();
  /// torchtitan's F.silu(w1(x)) * w3(x) after its GEMMs: eager silu then the product (`mul`),
  /// compiled one fused kernel (`silu` holds it); the backward: eager the product's gradients
  /// to both factors then silu's, compiled one kernel.
  void silu_mul_forward(KernelDescId silu, KernelDescId mul);
  void silu_mul_backward(KernelDescId silu_bwd, KernelDescId mul);

  /// The pooler on each sample's first token, tanh, the classifier and its loss (mlm's
  /// next-sentence head, the classification head).
  void classifier_forward();
  void classifier_backward();
  /// The vocabulary cross-entropy's backward: the fused kernel, or the eager one's three.
  void cross_entropy_backward();

  const TransformerConfig& config_;
  const LayerSizes& sizes_;
  const LayerKernels& kernels_;
  OpEmitter& ops_;
  DType gemm_dt_ = DType::kBf16;
  DType act_dt_ = DType::kBf16;
  /// The GEMMs fp8 training keeps in bf16 (output layer, router): layer_kernels.cpp.
  DType linear_dt_ = DType::kBf16;
  int64_t act_elem_bytes_ = 2;
  LayerGroups groups_;
  /// moe.dispatcher flex with expert parallel: the rank's group's DeepEP sizes (begin_rank).
  FlexRoutes flex_;
};

}  // namespace upsim::transformer_emit
