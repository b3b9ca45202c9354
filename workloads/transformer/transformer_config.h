// Transformer training workload description: the model, its parallel layout and the training
// recipe, as read from `workload: {model: transformer, ...}`.
//
// Schema (every key but the model shape has a default; configs/gpt3_175b_1024gpu.yaml is the
// reference example):
//   model: transformer
//   architecture: gpt          # gpt | llama | bert | mpt: sets the defaults below (table in
//                              #   transformer_config.cpp); any key given overrides them
//   layers: 96                 # transformer blocks
//   hidden: 12288
//   heads: 96
//   head_dim: 128              # one attention head's width; default hidden / heads (which must
//                              #   then divide hidden); Q is heads x head_dim wide, the output
//                              #   projection maps it back to hidden
//   mla:                       # optional: multi-head latent attention (DeepSeek-V2/V3;
//                              #   latent_attention.h) instead of the q, k, v projections;
//                              #   kv_heads = heads, no head_dim, no biases
//     q_lora_rank: 1536        # 0: queries projected directly
//     kv_lora_rank: 512
//     qk_nope_head_dim: 128
//     qk_rope_head_dim: 64
//     v_head_dim: 128
//   sliding_window: 0          # keys each query attends to at most (Mistral 4096, GPT-OSS 128);
//                              #   0: full attention (flash / cudnn attention; not with context
//                              #   parallel)
//   full_attention_every: 0    # with sliding_window: every k-th layer attends fully (GPT-OSS,
//                              #   Gemma 2: 2); 0: every layer in the window
//   attention_sinks: false     # a learned logit per head in every softmax's denominator
//                              #   (GPT-OSS's `sinks`; Megatron-Core's softmax_type learnable,
//                              #   which Transformer Engine runs on cuDNN's fused attention):
//                              #   heads parameters per layer; attention: cudnn or unfused (no
//                              #   FlashAttention-2/-3 release takes them); priced as the
//                              #   attention without them (one more logit per query row)
//   kv_heads: 96               # grouped-query attention (Llama 2/3 70B: 8); default: heads.
//                              #   Fewer than tensor: each is replicated tensor / kv_heads times
//   ffn: 49152                 # MLP inner width; default 4 x hidden (gelu), Llama's
//                              #   round(8/3 x hidden) to a multiple of 256 (swiglu)
//   vocab: 51200               # padded as Megatron does: padded_vocab()
//   seq: 2048
//   micro_batch: 1             # sequences per micro-batch per data-parallel rank
//   sequences:                 # optional: the samples' real lengths and how a micro-batch holds
//                              #   them (sequence_lengths.h); default padded samples of seq
//     layout: padded           # padded | unpadded (padding removed: GEMMs on the real tokens,
//                              #   variable-length attention) | packed (samples concatenated
//                              #   into rows of seq tokens, attention inside each sample;
//                              #   micro_batch and global_batch then count rows)
//     mean_length: 512         # the samples' mean length in tokens, 1 .. seq; default seq
//     length_std: 0            # their standard deviation (the attention's work grows with
//                              #   mean^2 + std^2 per sample); unpadded and packed need a fused
//                              #   attention and no context parallel
//   global_batch: 1536         # sequences per iteration; micro-batches per iteration =
//                              #   global_batch / (micro_batch x data); default
//                              #   micro_batch x data x pipeline (one micro-batch per stage)
//   dtype: fp16                # fp32 | tf32 | fp16 | bf16 | fp8 (fp8: GEMMs in fp8, the rest
//                              #   bf16); default bf16
//   fp8_recipe: delayed        # dtype fp8 only: how Transformer Engine quantises each fp8
//                              #   GEMM's operands (transformer_engine/common/recipe): delayed
//                              #   (DelayedScaling, TE's and Megatron-Core's default: one read
//                              #   per quantisation, scale from the amax history) | current
//                              #   (Float8CurrentScaling: an amax pass, then the cast: two
//                              #   reads) | block (Float8BlockScaling 1x128 / MXFP8BlockScaling:
//                              #   per-block scales found in the cast's one read); the kernels:
//                              #   layer_kernels.h, Fp8Cast. With layer_kernels torchtitan,
//                              #   torchao's float8 recipes (torchao_float8.h; compile needed):
//                              #   tensorwise (its default: dynamic per-tensor scales, float8
//                              #   all-gathers under TP) | rowwise | rowwise_with_gw_hp
//                              #   (rowwise, the weight gradient in bf16)
//   fp8_fsdp_all_gather: false # torchao tensorwise under FSDP2: weights cast to float8 before
//                              #   FSDP's all-gather, with scales precomputed after the
//                              #   optimizer step (torchtitan's enable_fsdp_float8_all_gather
//                              #   with precompute_float8_dynamic_scale_for_fsdp)
//   causal: true               # decoder (true) or encoder (false) attention mask; with
//                              #   `decoder`, the encoder's: false (its default there)
//   decoder:                   # optional: an encoder-decoder model (T5; Raffel et al., JMLR
//                              #   2020, arXiv 1910.10683): `layers` are then the encoder's,
//                              #   attending bidirectionally over `seq` tokens, and the decoder
//                              #   runs after it (encoder_decoder.h); over pipeline stages
//                              #   the encoder on the first parallelism.encoder_stages, the
//                              #   decoder on the rest (Megatron's split rank; no
//                              #   interleaving), no context, sequence or expert parallel
//     layers: 24               # decoder layers: causal self-attention over decoder seq tokens,
//                              #   cross-attention over the encoder's output, then the MLP
//     seq: 128                 # decoder (target) tokens per sample; the output layer and loss
//                              #   run on them
//   norm: layernorm            # layernorm | rms_norm
//   activation: gelu           # gelu | swiglu | geglu | squared_relu
//   position: learned          # learned | rotary | alibi | none | relative (T5's relative
//                              #   attention bias, 32 buckets per head and stack, added to
//                              #   the unfused attention's scores: relative_bias.h)
//   attention: flash           # fused kernel: flash (= flash2: FlashAttention-2, flash-attn
//                              #   2.x, PyTorch SDPA's flash backend) | flash3 (FlashAttention-3,
//                              #   sm90) | cudnn (cuDNN fused attention: Transformer Engine's
//                              #   FusedAttention, SDPA's cuDNN backend); or unfused (bmm +
//                              #   softmax + dropout + bmm); default flash. The fused kernels
//                              #   take 16-bit inputs: fp32 and tf32 need unfused
//   bias: true                 # linear layers carry biases
//   tied_embeddings: true      # output layer shares the input embedding's weights
//   head: lm                   # lm (the vocabulary projection on every token) | mlm (BERT
//                              #   pretraining as NVIDIA runs it: the masked-LM head on the
//                              #   predicted positions only, and next-sentence prediction) |
//                              #   classification (pooler + classifier, fine-tuning); task_head.h
//   predictions: 76            # mlm: predicted positions per sample; default 15% of seq
//   labels: 2                  # classification: classes
//   loss: fused                # the vocabulary cross-entropy: fused (Megatron's vocab-parallel
//                              #   kernel on fp32 logits) | eager (F.cross_entropy on the logits
//                              #   cast to fp32: torchtitan, HuggingFace; 12 bytes per logit at
//                              #   its backward's peak); task_head.h
//   dropout: 0.1               # > 0 adds dropout kernels; default 0.1 (gpt, bert), 0 (llama, mpt)
//   moe:                       # optional: every `every`-th layer's MLP becomes a mixture of
//   experts
//     experts: 8
//     top_k: 2
//     capacity_factor: 1.25    # most tokens per expert = capacity_factor x tokens x top_k /
//                              #   experts, the rest dropped; 0 = dropless. Default 1.25
//                              #   (Megatron-Core's); with layer_kernels torchtitan 0, the
//                              #   only routing its MoE module has (torchtitan_moe.h)
//     score_before_experts: false  # the routing scores scale the experts' inputs rather than
//                              #   their outputs: torchtitan's MoEArgs default (true with
//                              #   layer_kernels torchtitan; its Qwen3 configs set false);
//                              #   Megatron-Core's layers apply them after (true refused)
//     shared_experts: 0        # DeepSeek-style always-on experts
//     expert_ffn: 14336        # default: ffn
//     every: 1
//     first_dense: 0           # the first N layers stay dense (DeepSeek-V3: 3)
//     imbalance: 0.0           # the busiest EP rank's experts get (1 + imbalance) x the
//                              #   mean, at most all of its EP group's tokens and at most
//                              #   their capacity (moe_busiest_rank_load: timing and memory)
//     a2a_overlap: false       # Megatron-Core's overlap_moe_expert_parallel_comm: the
//                              #   combined 1F1B schedule (combined_1f1b.cpp); needs expert > 1,
//                              #   alltoall or flex, bf16 / fp16, virtual_stages > 1 with
//                              #   pipeline > 1, no full or moe recompute
//     delay_wgrad: false       # a2a_overlap: weight gradients deferred past the next
//                              #   communication node (Megatron-Core's delay_wgrad_compute)
//   parallelism:
//     tensor: 8                # Megatron column/row split inside a layer
//     sequence: true           # sequence parallel (needs tensor > 1): norms/dropout on s/t
//     pipeline: 8
//     virtual_stages: 1        # interleaved 1F1B when > 1 (layers / (pipeline x this) per chunk)
//     schedule: 1f1b           # gpipe | 1f1b (interleaved when virtual_stages > 1)
//     data: 16                 # default: gpus / (tensor x pipeline x context)
//     context: 1               # context parallel: the sequence split over ranks
//     context_comm: p2p        # p2p (ring attention) | all_gather (K / V all-gathered) | a2a
//                              #   (Ulysses: heads / context per rank, needs heads and kv_heads
//                              #   per tensor rank divisible by context): Megatron-Core's
//                              #   --cp-comm-type
//     expert: 1                # expert parallel, carved out of data x context (Megatron-Core's
//                              #   expert rank layout: RankLayout below)
//     zero: 0                  # 0 (DDP) | 1 | 2 | 3 (DeepSpeed / Megatron distributed optimizer)
//     fsdp: none               # none | full_shard | shard_grad_op (PyTorch FSDP; excludes zero;
//                              #   FSDP2's reshard_after_forward true | false)
//     shard_group: 0           # fsdp / zero 3: HSDP, shard over groups of this many DP ranks
//                              #   and replicate across them (0: shard over all of them)
//     gradient_sync: every_micro_batch   # fsdp / zero 3 under gradient accumulation:
//                              #   every_micro_batch (FSDP's default) | last_micro_batch (FSDP2's
//                              #   set_requires_gradient_sync(False) and reshard_after_backward
//                              #   False on all but the last micro-batch, as
//                              #   torch.distributed.pipelining does: one reduce-scatter per step,
//                              #   unsharded gradients and parameters held across micro-batches)
//     order: tp-cp-ep-dp-pp    # rank order, innermost first (Megatron's default)
//     ddp_bucket: 25MiB        # gradient bucket for DDP / ZeRO reduction
//     overlap_grad_reduce: true  # buckets reduced during the last backward (false: after it)
//     overlap_param_gather: false  # zero 1 / 2 with overlap_grad_reduce: the updated parameters
//                              #   all-gathered during the next iteration's first forward
//                              #   (Megatron-Core --overlap-param-gather; NeMo's recipes:
//                              #   optim.overlap_param_sync: true)
//     tp_comm_overlap: false   # Megatron-Core --tp-comm-overlap with Transformer Engine's
//                              #   userbuffers (needs sequence: true): all-gather + GEMM as a
//                              #   ring exchange of TP chunks, GEMM + reduce-scatter pipelined in
//                              #   4 splits, the column-parallel backward's bulk overlap on
//                              #   16 SMs (ParallelismConfig::tp_comm_overlap)
//     async_tp: false          # torchtitan's async tensor parallel (enable_async_tensor_parallel:
//                              #   Inductor's micro-pipeline TP over symmetric memory; needs
//                              #   layer_kernels torchtitan, compile: true, tensor > 1 and
//                              #   sequence: true): all-gather + matmul and matmul +
//                              #   reduce-scatter as tensor chunks, the peer copies on the copy
//                              #   engines (ParallelismConfig::async_tp)
//     p2p_scatter_gather: true # pipeline sends split over TP ranks, all-gathered on arrival
//                              #   (Megatron; only with tensor > 1 and no sequence parallel)
//     p2p_synchronous: true    # Megatron-Core's batch_p2p_comm with batch_p2p_sync: sends and
//                              #   receives in batches where its schedule exchanges
//                              #   (pipeline_exchanges.h), each ended by torch.cuda.synchronize():
//                              #   the host waits for all the GPU's work. Default: true for 1F1B
//                              #   without interleaving (Megatron forces overlap_p2p_comm off
//                              #   there), false for the interleaved schedule (overlap_p2p_comm
//                              #   on), gpipe and layer_kernels torchtitan
//     align_param_gather: true # overlap_param_gather under the interleaved schedule: the
//                              #   schedule dispatches each model chunk's parameter all-gathers
//                              #   (Megatron-LM's default; false: each bucket's forward pre-hook
//                              #   dispatches the next, --no-align-param-gather)
//   recompute: none            # none | selective (Megatron-Core's modules: recompute_modules) |
//                              #   full (whole layer) |
//                              #   op (torchtitan's per-op selective checkpointing: every
//                              #   second matmul and the attention saved, the rest recomputed;
//                              #   op_recompute.h; fused attention, dense layers)
//   recompute_modules: [core_attn] # with selective: Megatron-Core's --recompute-modules,
//                              #   any of core_attn (default; with flash attention too: its
//                              #   forward reruns in the backward), layernorm, mlp, moe_act,
//                              #   moe, shared_experts (recompute_modules.h)
//   recompute_layers: 8        # with full: the first N layers of each model chunk recompute,
//                              #   the others store their activations (Megatron's
//                              #   --recompute-method block --recompute-num-layers N);
//                              #   default: every layer
//   optimizer: adam            # adam | adamw | sgd | lamb (Apex FusedLAMB, as NVIDIA's BERT
//                              #   pretraining runs it: its own gradient-norm clipping; fused
//                              #   only)
//   optimizer_impl: fused      # fused | foreach
//   grad_reduce_dtype: fp32    # fp32 | bf16 | fp16: gradients accumulated and reduced over data
//                              #   parallel; default: TransformerConfig::gradient_dtype()'s rule
//   master_weights: true       # fp32 master copy for fp16/bf16 training (mixed precision);
//                              #   default true for fp16 / bf16 / fp8, false for fp32 / tf32
//   autocast: false            # torch.autocast over an fp32 model (HuggingFace Trainer's
//                              #   fp16 / bf16, DeepLearningExamples' --amp): fp32 weights,
//                              #   gradients and residual stream, LayerNorm and softmax in fp32,
//                              #   matmuls in dtype on weights cast once per forward; no master
//                              #   copy (autocast.h); eager dense models only
//   allocator: caching         # caching | expandable_segments: PyTorch's CUDA caching
//                              #   allocator as run (torchtitan's run_train.sh sets
//                              #   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); the
//                              #   memory estimate adds the default one's reserve above the
//                              #   peak allocation (transformer_memory.h)
//   lora:                      # optional: LoRA fine-tuning as Megatron-Bridge runs it (lora.h):
//                              #   the base model frozen (no weight gradients, reduction or
//                              #   optimizer state for it, no embedding backward), an adapter
//                              #   beside each target linear (in the activation dtype under
//                              #   fp8); dense layers, fused layer kernels, no TP overlap,
//                              #   autocast or FSDP / ZeRO-3, the lm head
//     rank: 32                 # adapter rank (Megatron-Bridge's dim); a multiple of tensor
//     targets: [linear_qkv, linear_proj, linear_fc1, linear_fc2]   # default: all four
//   layer_kernels: fused       # the kernels a layer's modules launch: fused (Megatron-Core
//                              #   with Transformer Engine: one QKV GEMM, fused rotary and
//                              #   SwiGLU kernels) | torchtitan (its Llama model in PyTorch:
//                              #   wq, wk, wv and w1, w3 as separate GEMMs, rotary as fp32
//                              #   complex multiplies between casts, silu then mul, repeat_kv
//                              #   and the attention output's transpose materialised;
//                              #   torchtitan_layer.h). torchtitan needs swiglu, rms_norm and
//                              #   a fused attention, no TP overlap or autocast, recompute
//                              #   none, full or op; MoE layers run its MoE module (router,
//                              #   reorderer, index copies, grouped_mm for w1, w3 and w2;
//                              #   torchtitan_moe.h) in bf16 without tensor parallel
//   qk_norm: false             # true: a norm (the model's `norm`) over each query and key
//                              #   head after the QKV projections, before rotary: Megatron-Core's
//                              #   --qk-layernorm (TENorm of kv_channels), Qwen3's q_norm /
//                              #   k_norm (nn.RMSNorm of head_dim); one kernel each, forward and
//                              #   backward; not with mla, encoder-decoder models, recompute op
//                              #   or rms_norm_kernel composite
//   rms_norm_kernel: fused     # nn.RMSNorm's kernels under layer_kernels torchtitan, eager:
//                              #   fused (aten::_fused_rms_norm, PyTorch 2.9 on: one kernel
//                              #   each way) | composite (PyTorch 2.8 and before: the cast to
//                              #   fp32, pow, mean, add, rsqrt, two muls and the cast back,
//                              #   and their autograd backward: torchtitan_layer.h); needs
//                              #   norm rms_norm, layer_kernels torchtitan, compile false
//   compile: false             # torch.compile per transformer block (torchtitan's
//                              #   --compile.enable; both it and Megatron-Core run eager by
//                              #   default): residual add + next norm, and norm backward +
//                              #   residual-gradient add, each one fused kernel
//                              #   (compiled_fusion.h)
//   cuda_graphs: false         # true: each transformer layer's forward and its backward run
//                              #   as captured CUDA graphs, one cudaGraphLaunch per layer,
//                              #   micro-batch and direction (Megatron-Core's per-layer
//                              #   graphs: --cuda-graph-impl local / transformer_engine with
//                              #   the full-layer scope, TE make_graphed_callables): the
//                              #   layer's kernels and its tensor-, context- and
//                              #   expert-parallel collectives are replayed without host work;
//                              #   embedding, head, pipeline sends, gradient reduction and
//                              #   optimizer stay eager. Refused where a MoE layer's graph
//                              #   would hold the host's wait for the token counts (unless
//                              #   padded to capacity: use cuda_graph_scope). The graphs'
//                              #   static buffers are not in the memory estimate.
//   cuda_graph_scope: [attn, moe_router, moe_preprocess]  # what those graphs capture
//                              #   (Megatron-Core's cuda_graph_modules with Transformer
//                              #   Engine graphs): attn, mlp (dense layers), moe (a whole
//                              #   MoE block), moe_router (norm, shared experts, router),
//                              #   moe_preprocess (with moe_router: the dispatcher's
//                              #   preprocess); default: the whole layer (cuda_graph_scope.h)
//   mirror_data_parallel: true # simulate one data-parallel replica and mirror the others
//                              #   (identical work; their traffic still crosses the fabric);
//                              #   false = simulate every GPU
// Ranges (an error naming the key outside them; beyond every model trained so far): layers
// 1 .. 4096, hidden 1 .. 2^20, heads and kv_heads 1 .. 2^16, ffn and expert_ffn 1 .. 2^22,
// vocab and seq 1 .. 2^24, micro_batch 1 .. 2^20, global_batch 1 .. 2^31, experts 1 .. 2^16,
// each parallel degree 1 .. 2^24 and tensor x pipeline x context at most 2^24; products:
// micro_batch x seq at most 2^32 tokens, tokens x seq x hidden and tokens x widest layer at
// most 2^56, parameters at most 2^50.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/cost_models.h"
#include "workloads/transformer/cuda_graph_scope.h"
#include "workloads/transformer/latent_attention.h"
#include "workloads/transformer/lora.h"
#include "workloads/transformer/pipeline_split.h"
#include "workloads/transformer/recompute_modules.h"
#include "workloads/transformer/sequence_lengths.h"
#include "workloads/transformer/task_head.h"

namespace upsim {

enum class TransformerNorm : uint8_t { kLayerNorm, kRmsNorm };
/// The MLP's activation: GeLU, SwiGLU and GeGLU (gated: two input projections, silu(a) * b and
/// gelu(a) * b; Shazeer, "GLU Variants Improve Transformer", arXiv 2002.05202: T5 v1.1, Gemma),
/// squared ReLU (relu(x)^2, ungated: Nemotron-4, So et al. "Primer", arXiv 2109.08668).
enum class TransformerActivation : uint8_t { kGelu, kSwiglu, kSquaredRelu, kGeglu };
/// Whether the MLP's first linear layer has two projections (gate and up), fc1 2 x ffn wide.
constexpr bool gated_activation(TransformerActivation activation) {
  return activation == TransformerActivation::kSwiglu ||
         activation == TransformerActivation::kGeglu;
}
/// Position information: learned absolute, rotary, ALiBi, none, or T5's relative attention
/// bias (relative_bias.h).
enum class TransformerPosition : uint8_t { kLearned, kRotary, kAlibi, kNone, kRelative };
/// Buckets of T5's relative attention bias per head and stack (relative_attention_num_buckets,
/// 32 in every released T5 and T5 v1.1 config).
inline constexpr int64_t kRelativeBiasBuckets = 32;
/// The kernels a layer's modules launch (the `layer_kernels` key; torchtitan_layer.h).
enum class LayerKernelSet : uint8_t { kFused, kTorchtitan };
enum class AttentionImpl : uint8_t { kFlash, kUnfused };
enum class PipelineSchedule : uint8_t { kGpipe, k1F1B, kInterleaved1F1B };
enum class FsdpMode : uint8_t { kNone, kFullShard, kShardGradOp };
/// How context-parallel attention exchanges the sequence (the `context_comm` key; Megatron-Core's
/// --cp-comm-type, Transformer Engine's attention with context parallel: transformer_engine/
/// pytorch/attention, AttnFuncWithCPAndKVP2P, ...KVAllGather, ...QKVOA2A).
enum class ContextComm : uint8_t {
  /// Ring attention: K / V passed around the ring, each step's exchange beside the previous
  /// step's attention (Megatron-Core's default).
  kP2p,
  /// K / V all-gathered before the attention (and again in the backward, whose dK / dV are
  /// reduce-scattered); each rank's two load-balanced query chunks attend to the keys before
  /// them.
  kAllGather,
  /// DeepSpeed-Ulysses: Q, K, V all-to-all'ed from sequence shards to head shards, the attention
  /// on the whole sequence with heads / context heads, the output all-to-all'ed back.
  kAllToAll,
};

/// When sharded parameters' gradients are reduce-scattered under gradient accumulation (the
/// `gradient_sync` key; see ParallelismConfig::gradient_sync).
enum class ShardedGradientSync : uint8_t { kEveryMicroBatch, kLastMicroBatch };
/// Activation recomputation: none; Megatron-Core's selective (the modules of
/// recompute_modules.h, the core attention by default); full (whole layers); op (torchtitan's
/// per-op selective checkpointing, op_recompute.h).
enum class Recompute : uint8_t { kNone, kSelective, kFull, kOp };
enum class TransformerOptimizer : uint8_t { kAdam, kAdamW, kSgd, kLamb };
/// PyTorch's CUDA caching allocator as the run configures it (the `allocator` key): its default
/// segments, or expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).
enum class CudaAllocator : uint8_t { kCaching, kExpandableSegments };
/// The fp8 scaling recipe (the `fp8_recipe` key): Transformer Engine's (delayed, current,
/// block), or torchao's float8 training under torchtitan (tensorwise, rowwise,
/// rowwise_with_gw_hp: torchao/float8/config.py, Float8LinearRecipeName).
enum class Fp8Recipe : uint8_t {
  kDelayed,
  kCurrent,
  kBlock,
  kTensorwise,
  kRowwise,
  kRowwiseWithGwHp
};

/// The dimensions a rank layout orders (sim/parallel_dim.h: all of them but kOther).
inline constexpr size_t kLayoutDimCount = 5;

/// How a Megatron-Core MoE layer moves tokens to its experts (the `moe.dispatcher` key;
/// megatron/core/transformer/moe/token_dispatcher.py).
enum class MoeDispatcher : uint8_t {
  /// MoEAlltoAllTokenDispatcher: each rank sends the expert-parallel ranks the tokens routed to
  /// their experts (all-to-all), and receives their outputs back.
  kAllToAll,
  /// MoEAllGatherTokenDispatcher: the routing map, the routing probabilities and the hidden
  /// states are all-gathered over the expert-parallel group, each rank permutes the gathered
  /// tokens routed to its local experts, and the outputs come back by a reduce-scatter in the
  /// probabilities' dtype; the local experts' token counts go to the host (.cpu()) every layer.
  /// Tensor parallel 1 only: Megatron-Core gathers over the tensor x expert ranks.
  kAllGather,
  /// MoEFlexTokenDispatcher (deepep.h) on MoeConfig::flex_backend: each token goes once to
  /// each rank (and across nodes once to each node) its experts are on, with its routing; the
  /// receiver permutes; the host waits for the token counts in every forward dispatch; the
  /// kernels hold MoeConfig::flex_sms SMs. Tensor parallel 1 only: its group spans the expert
  /// tensor x expert ranks.
  kFlex,
};

/// The flex dispatcher's communication library (moe_flex_dispatcher_backend).
enum class FlexBackend : uint8_t {
  /// DeepEP's normal kernels (Megatron-Core's default): a count exchange (notify_dispatch), then
  /// the host spins on the receive counts; each token carries its top-k int64 indices and fp32
  /// weights.
  kDeepEp,
  /// HybridEP (DeepEP's hybrid-ep branch): the routing map is all-gathered over the group
  /// (NCCL), a scan kernel builds the layout, the host synchronises on the per-expert counts;
  /// each token carries the fp32 probabilities of its destination node's experts.
  kHybridEp,
};

struct MoeConfig {
  int64_t experts = 0;  ///< 0 = dense model
  int64_t top_k = 2;
  double capacity_factor = 1.25;
  int64_t shared_experts = 0;
  int64_t expert_ffn = 0;
  int64_t every = 1;
  /// The first this many layers keep their dense MLP (DeepSeek-V3's first_k_dense_replace: 3).
  int64_t first_dense = 0;
  double imbalance = 0.0;
  /// The routing scores scale the experts' inputs (torchtitan's MoEArgs.score_before_experts)
  /// rather than their outputs (Megatron-Core's default, moe_apply_probs_on_input False).
  bool score_before_experts = false;
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
  /// Every expert's input padded to its capacity (Megatron-Core's
  /// moe_pad_expert_input_to_capacity, capacity_factor > 0, the all-to-all dispatcher): every
  /// expert computes capacity rows, the all-to-all moves them, and nothing waits for the token
  /// counts (their sizes are fixed), so CUDA graphs can capture the layer.
  bool pad_to_capacity = false;
  FlexBackend flex_backend = FlexBackend::kDeepEp;
  /// The shared experts run on a side stream beside the dispatcher's communication (Megatron-
  /// Core's moe_shared_expert_overlap, default False): the input gather and fc1 beside the
  /// dispatch, fc2 and the output's reduce-scatter beside the combine, and their backward beside
  /// the combine's and the dispatch's; shared experts with the alltoall or flex dispatcher only.
  bool shared_expert_overlap = false;
  /// SMs the flex dispatcher's kernels take (moe_flex_dispatcher_num_sms); 0: the backend's
  /// default (flex_dispatch_sms).
  int32_t flex_sms = 0;
  /// Megatron-Core's EP all-to-all overlap (overlap_moe_expert_parallel_comm, Megatron-Bridge's
  /// moe_a2a_overlap; default False): the combined 1F1B schedule runs one micro-batch's forward
  /// beside another's backward, layer by layer, the dispatch and combine on a communication
  /// stream beside the other micro-batch's attention and experts (combined_1f1b.cpp).
  bool a2a_overlap = false;
  /// Under a2a_overlap, weight gradients deferred (Megatron-Core's delay_wgrad_compute, default
  /// False; Megatron-Bridge's performance scripts set it with moe_a2a_overlap): the experts'
  /// (or a dense MLP's) past the forward's dispatch, so that the dispatch's backward waits for
  /// the input gradients only; the attention's and shared experts' past their node, the
  /// chunk's last layer's past the backward's send (combined_1f1b.cpp).
  bool delay_wgrad = false;
};

struct ParallelismConfig {
  int64_t tensor = 1;
  bool sequence = false;
  int64_t pipeline = 1;
  int64_t virtual_stages = 1;
  /// An encoder-decoder model over pipeline stages: the first this many hold the encoder, the
  /// rest the decoder (Megatron-LM's --pipeline-model-parallel-split-rank; encoder_decoder.h).
  /// As read, 0 asks for the stages an even split of all the layers gives the encoder, which
  /// the parsed config then holds; 0 when the model has one stack or one stage.
  int64_t encoder_stages = 0;
  /// Megatron-Core's uneven split of the decoder layers over the model chunks (pipeline_layout,
  /// account_for_embedding / _loss, first / last_stage_layers; pipeline_split.h), as read.
  PipelineSplit split;
  /// Under a stated split: where each model chunk's layers begin (index chunk x pipeline + rank,
  /// one more entry for the end); empty: the even split.
  std::vector<int64_t> chunk_layer_offsets;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t data = 1;
  int64_t context = 1;
  ContextComm context_comm = ContextComm::kP2p;
  int64_t expert = 1;
  int zero = 0;
  FsdpMode fsdp = FsdpMode::kNone;
  /// Sharded parameters (fsdp, or zero 3) under gradient accumulation. kEveryMicroBatch: each
  /// micro-batch's backward reduce-scatters its gradients and reshards (FSDP's default, FSDP2
  /// with requires_gradient_sync left true). kLastMicroBatch: only the last micro-batch
  /// reduce-scatters; the others accumulate unsharded gradients and keep their parameters
  /// gathered after their backward (FSDP2's set_requires_gradient_sync(False) with
  /// set_reshard_after_backward(False), as torch.distributed.pipelining's schedules call them
  /// on every micro-batch but the last: pytorch/pytorch torch/distributed/pipelining/stage.py,
  /// backward_maybe_with_nosync). With shard_grad_op (reshard_after_forward=False) a unit is
  /// then gathered once per step; with full_shard it is resharded after each forward and
  /// gathered again for each backward, but not for the next micro-batch's forward.
  ShardedGradientSync gradient_sync = ShardedGradientSync::kEveryMicroBatch;
  /// HSDP (the `shard_group` key): sharded parameters are sharded over groups of this many
  /// consecutive data-parallel ranks and replicated across the groups (FSDP2's 2-D device mesh
  /// (replicate, shard), FSDP1's HYBRID_SHARD): gathers and reduce-scatters stay inside a
  /// group, and each group's gradient shards are all-reduced with the other groups'. 0: one
  /// group of every data-parallel rank (plain FSDP).
  int64_t shard_group = 0;
  /// Ranks one sharded parameter is split over: shard_group, or data x context.
  int64_t shard_ranks() const { return shard_group > 0 ? shard_group : data * context; }
  /// Rank order, innermost (fastest-varying) dimension first. Expert parallelism is carved out
  /// of the data x context ranks: global ranks have (tp, cp, dp, pp) coordinates, and where ep
  /// sits places the EP groups in the expert rank layout (RankLayout).
  std::array<ParallelDim, kLayoutDimCount> order{ParallelDim::kTensor, ParallelDim::kContext,
                                                 ParallelDim::kExpert, ParallelDim::kData,
                                                 ParallelDim::kPipeline};
  int64_t ddp_bucket_bytes = 25LL << 20;
  /// Reduce gradient buckets while the last micro-batch's backward runs (PyTorch DDP,
  /// Megatron-Core --overlap-grad-reduce); false: after the whole backward (Megatron-LM SC21).
  bool overlap_grad_reduce = true;
  /// ZeRO-1/2 (Megatron-Core's distributed optimizer) with --overlap-param-gather: the updated
  /// parameters are all-gathered bucket by bucket during the next iteration's first forward,
  /// each layer waiting for its buckets (megatron/core/distributed/distributed_data_parallel.py,
  /// the forward pre-hook), instead of after the optimizer step. Off by default in Megatron-Core;
  /// NeMo's recipes set it (optim.overlap_param_sync: true).
  bool overlap_param_gather = false;
  /// Narayanan et al. SC21 section 4.1: each TP rank sends 1/tensor of a pipeline message
  /// over the network and the receivers all-gather it over NVLink (Megatron's
  /// scatter_gather_tensors_in_pipeline, default on). Applies with tensor > 1 without SP.
  bool p2p_scatter_gather = true;
  /// Megatron's _communicate() with batch_p2p_comm and batch_p2p_sync (p2p_communication.py;
  /// in 2021 always) waits for every batch_isend_irecv and calls torch.cuda.synchronize() ("to
  /// protect against race condition"): the sends and receives go in batches at the points of
  /// Megatron's 1F1B and interleaved schedules (pipeline_exchanges.h), and after each the host
  /// waits for all the device's streams, the sends included (GPipe and the combined 1F1B
  /// schedule: after each receive, for the compute and data-parallel streams). false: each
  /// message is posted by itself and only the receiver's compute stream waits for it. The
  /// reader's default follows Megatron's rule (read_parallelism).
  bool p2p_synchronous = false;
  /// Megatron-LM's --align-param-gather (on by default, only with the interleaved schedule and
  /// overlap_param_gather): each model chunk's parameter all-gathers are dispatched by the
  /// schedule (chunks 0 and 1 before the first forward, chunk c + 1 at the forward of virtual
  /// micro-batch c x pipeline - stage; schedules.py, forward_backward_pipelining_with_
  /// interleaving), the buckets' pre-hooks only wait. false: each pre-hook dispatches the next
  /// bucket as the forward reaches it.
  bool align_param_gather = false;
  /// Tensor-parallel communication overlapped with the GEMMs as Transformer Engine's
  /// userbuffers do it under Megatron-Core's --tp-comm-overlap (off by default there;
  /// NeMo's large-model recipes turn it on). TE's defaults (NVIDIA/TransformerEngine
  /// transformer_engine/pytorch/module/base.py, initialize_ub: `methods`, get_default_config):
  /// ring_exchange for qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad (the all-gather as tensor - 1
  /// peer-to-peer steps on the copy engines, num_sm 1, the GEMM split into `tensor` token
  /// chunks, each run once its chunk has arrived); pipeline for proj_fprop, fc2_fprop (the GEMM
  /// in 4 splits, each split's reduce-scatter on 16 SMs while the next computes); bulk for the
  /// column-parallel backward (its all-gather and reduce-scatter beside the dgrad and wgrad
  /// GEMMs, 16 SMs). Needs sequence parallel (Megatron refuses it without).
  bool tp_comm_overlap = false;
  /// torchtitan's async TP (parallelism.enable_async_tensor_parallel: torch._inductor's
  /// micro-pipeline TP pass, torch/distributed/_symmetric_memory): Inductor rewrites an
  /// all-gather feeding matmuls into fused_all_gather_matmul (the local shard's matmuls, then
  /// each peer's shard copied over NVLink by the copy engines and consumed while the next is
  /// copied) and a matmul feeding a reduce-scatter into fused_matmul_reduce_scatter (the output
  /// chunk for each peer computed and copied while the next is computed, then the partial sums
  /// reduced). In torchtitan's Llama it fuses the attention's and the MLP's input all-gather
  /// with wq, wk, wv and w1, w3, wo's and w2's reduce-scatter, and in the backward the
  /// all-gather of wo's and w2's output gradient with their dgrad; the reduce-scatter of the
  /// summed input gradients of wq, wk, wv (w1, w3) follows adds, not a matmul, and stays.
  bool async_tp = false;

  int64_t model_parallel() const { return tensor * pipeline * context; }
  int64_t gpus() const { return tensor * pipeline * context * data; }
  /// Megatron-Core's expert_tensor_parallel_size (the `expert_tensor` key): the routed experts'
  /// tensor parallel, tensor (its default) or 1 (each expert whole on a rank, the tensor ranks
  /// then expert-parallel ranks too, as Megatron-Bridge's Qwen3 and DeepSeek-V3 recipes set it).
  /// 0 as read: tensor.
  int64_t expert_tensor = 0;
  int64_t expert_tensor_parallel() const { return expert_tensor > 0 ? expert_tensor : tensor; }
  /// Ranks holding the same experts: Megatron-Core's expert_data_parallel_size = GPUs /
  /// (expert tensor x expert x pipeline).
  int64_t expert_data() const {
    return tensor * data * context / (expert_tensor_parallel() * expert);
  }
};

/// The two rank layouts of Megatron-Core (megatron/core/parallel_state.py of NVIDIA/Megatron-LM
/// at commit 00caa53a, initialize_model_parallel): both lay the global ranks out in the same
/// `order`, innermost first. The dense one (decoder_rank_generator: attention, dense MLPs,
/// embeddings) has sizes tp = tensor, cp = context, dp = data, pp = pipeline and ep = 1; the
/// expert one (expert_decoder_rank_generator: the routed experts' all-to-all) has tp = expert
/// tensor parallel (ParallelismConfig::expert_tensor_parallel), ep = expert, dp =
/// expert_data(), pp = pipeline and cp = 1. Expert-parallel groups are the expert layout's ep
/// groups, so they span the context- and data-parallel ranks of a stage (an axis of size 1
/// takes no room), and with expert tensor parallel 1 the tensor ranks too.
enum class RankLayout : uint8_t { kDense, kExpert };

/// The global-rank stride of `axis` in `layout`: the product of the sizes of the axes before it
/// in parallelism.order.
int64_t rank_stride(const ParallelismConfig& p, RankLayout layout, ParallelDim axis);

/// Megatron-LM's default --make-vocab-size-divisible-by.
inline constexpr int64_t kVocabPadMultiple = 128;

struct TransformerConfig {
  std::string architecture = "gpt";
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;
  int64_t seq = 0;
  int64_t micro_batch = 1;
  int64_t global_batch = 0;
  /// The samples' lengths and layout (the `sequences` key).
  SequenceLengths sequences;
  /// What the last stage computes after the layers (the `head` key).
  TaskHead head;
  /// Multi-token prediction layers (the `mtp_layers` key; Megatron-Core's mtp_num_layers,
  /// DeepSeek-V3's one MTP module; mtp_emitter.cpp): on the last model chunk, each embeds the
  /// tokens once more, normalises that and the hidden state, projects their concatenation
  /// (2 hidden -> hidden), runs one more transformer layer of the last layer's kind and a
  /// norm, and ends in its own pass of the output layer and loss.
  int64_t mtp_layers = 0;
  /// GEMM dtype; everything else runs in `activation_dtype()` (bf16 for fp8 training).
  DType dtype = DType::kBf16;
  /// How fp8 GEMM operands are quantised (dtype fp8 only).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  /// torchao tensorwise under FSDP2: float8 weight all-gathers (the `fp8_fsdp_all_gather` key).
  bool fp8_fsdp_all_gather = false;
  bool causal = true;
  /// Encoder-decoder models (the `decoder` key; encoder_decoder.h): decoder layers after the
  /// `layers` encoder layers, on decoder_seq tokens per sample; 0: decoder- or encoder-only.
  int64_t decoder_layers = 0;
  int64_t decoder_seq = 0;
  bool encoder_decoder() const { return decoder_layers > 0; }
  TransformerNorm norm = TransformerNorm::kLayerNorm;
  TransformerActivation activation = TransformerActivation::kGelu;
  TransformerPosition position = TransformerPosition::kLearned;
  AttentionImpl attention = AttentionImpl::kFlash;
  /// The fused kernel (attention kFlash).
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;
  bool bias = true;
  bool tied_embeddings = true;
  double dropout = 0.0;
  MoeConfig moe;
  ParallelismConfig parallelism;
  Recompute recompute = Recompute::kNone;
  /// With kSelective: the modules rerun (recompute_modules.h; default core_attn alone).
  RecomputeModules recompute_modules;
  /// With kFull: layers recomputed at the start of each model chunk (Megatron's block method:
  /// megatron/core/transformer/transformer_block.py, _checkpointed_forward, recompute_method
  /// 'block' checkpoints layers 0 .. recompute_num_layers - 1 of the block); 0 = every layer.
  int64_t recompute_layers = 0;
  TransformerOptimizer optimizer = TransformerOptimizer::kAdam;
  OptimizerImpl optimizer_impl = OptimizerImpl::kFused;
  bool master_weights = true;
  /// Element type of the gradients that are accumulated and reduced over data parallel;
  /// nullopt = gradient_dtype()'s rule.
  std::optional<DType> grad_reduce_dtype;
  bool mirror_data_parallel = true;
  /// Each layer's forward and backward replayed as CUDA graphs (the `cuda_graphs` key).
  bool cuda_graphs = false;
  /// What those graphs capture (the `cuda_graph_scope` key; cuda_graph_scope.h): the whole
  /// layer by default.
  CudaGraphScope cuda_graph_scope;
  /// torch.compile of each transformer block (the `compile` key; compiled_fusion.h): the
  /// memory-bound kernels Inductor fuses run as one kernel each.
  bool compile = false;
  /// LoRA fine-tuning (the `lora` key; lora.h): the base frozen, adapters trained.
  LoraConfig lora;
  /// Which modules a layer runs, and so which kernels (the `layer_kernels` key).
  LayerKernelSet layer_kernels = LayerKernelSet::kFused;
  /// Per-head norms of the queries and keys after their projections, before rotary (the `qk_norm`
  /// key: Megatron-Core's --qk-layernorm, Qwen3's q_norm / k_norm).
  bool qk_norm = false;
  /// nn.RMSNorm as PyTorch before 2.9 runs it eager: its CompositeImplicit decomposition into
  /// fp32 pointwise ops and a mean (the `rms_norm_kernel: composite` key; torchtitan_layer.h).
  bool rms_norm_composite = false;
  /// torch.autocast around the forward of an fp32 model (the `autocast` key; autocast.h):
  /// fp32 parameters, gradients and residual stream, matmuls in `dtype`.
  bool autocast = false;
  /// The caching allocator's configuration (the `allocator` key; transformer_memory.h prices its
  /// reserve above the peak allocation).
  CudaAllocator allocator = CudaAllocator::kCaching;

  /// Sliding-window attention (the `sliding_window` key): each query attends to at most this
  /// many preceding keys; 0: full attention. `full_attention_every` k > 0: every k-th layer
  /// (layers k-1, 2k-1, ...) attends fully, the others in the window (GPT-OSS and Gemma 2
  /// alternate, k = 2; Gemma 3 has one global layer in 6); 0: every layer has the window.
  int64_t sliding_window = 0;
  /// Attention sinks (the `attention_sinks` key): one learned logit per head and layer.
  bool attention_sinks = false;
  int64_t full_attention_every = 0;
  /// Whether `layer` (0-based) attends in the sliding window.
  bool windowed_layer(int64_t layer) const {
    if (sliding_window <= 0) return false;
    return full_attention_every <= 0 || (layer + 1) % full_attention_every != 0;
  }
  /// The `head_dim` key; 0: hidden / heads.
  int64_t explicit_head_dim = 0;
  /// Multi-head latent attention (the `mla` key; disabled unless given).
  LatentAttentionConfig mla;
  /// Dimension of one attention head: the `head_dim` key when given (Gemma, Qwen3 and others
  /// use heads x head_dim != hidden), else hidden / heads; with latent attention the mean of
  /// the query / key and value widths, which prices the attention core exactly.
  int64_t head_dim() const {
    if (mla.enabled()) return mla.attention_head_dim();
    return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads;
  }
  /// Layers of one model chunk (a pipeline stage's share, per virtual stage); under an uneven
  /// split (parallelism.split) the largest chunk's.
  int64_t layers_per_chunk() const {
    const std::vector<int64_t>& offsets = parallelism.chunk_layer_offsets;
    int64_t most = 0;
    for (size_t i = 1; i < offsets.size(); ++i)
      most = std::max(most, offsets[i] - offsets[i - 1]);
    return offsets.empty() ? layers / (parallelism.pipeline * parallelism.virtual_stages) : most;
  }
  /// Where `layer` (0-based, model order, decoder-only) sits in its model chunk: 0 for the
  /// chunk's first layer.
  int64_t layer_in_chunk(int64_t layer) const {
    const std::vector<int64_t>& offsets = parallelism.chunk_layer_offsets;
    if (offsets.empty()) return layer % layers_per_chunk();
    const auto after = std::upper_bound(offsets.begin(), offsets.end(), layer);
    return layer - *(after - 1);
  }
  /// The modules selective recomputation reruns: recompute_modules under kSelective, none
  /// otherwise.
  RecomputeModules selective_modules() const {
    if (recompute == Recompute::kSelective) return recompute_modules;
    RecomputeModules none;
    none.core_attn = false;
    return none;
  }
  /// Whether `layer` (0-based, model order) runs its forward again in its backward.
  bool recomputes_layer(int64_t layer) const {
    if (recompute != Recompute::kFull) return false;
    return recompute_layers == 0 || layer_in_chunk(layer) < recompute_layers;
  }
  /// The vocabulary as Megatron allocates it: rounded up to a multiple of
  /// kVocabPadMultiple x tensor so every tensor-parallel rank holds an equal slice
  /// (Megatron-LM `_vocab_size_with_padding`, --make-vocab-size-divisible-by 128).
  int64_t padded_vocab() const {
    const int64_t multiple = kVocabPadMultiple * parallelism.tensor;
    return (vocab + multiple - 1) / multiple * multiple;
  }
  /// Tokens of one micro-batch through the GEMMs, before a context-parallel split
  /// (sequence_lengths.h: micro_batch x seq unless unpadded).
  int64_t micro_batch_tokens() const {
    return upsim::micro_batch_tokens(sequences, micro_batch, seq);
  }
  /// Samples in one micro-batch (packed rows hold several).
  double samples_per_micro_batch() const {
    return upsim::samples_per_micro_batch(sequences, micro_batch, seq);
  }
  /// Whether the last stage projects onto the vocabulary (every head but classification).
  bool has_output_layer() const { return head.kind != TaskHeadKind::kClassification; }
  /// Rows one micro-batch puts through the vocabulary projection, before a context-parallel
  /// split: every token (lm), the predicted positions of its samples (mlm), none
  /// (classification).
  int64_t vocabulary_rows() const {
    switch (head.kind) {
      case TaskHeadKind::kLanguageModel:
        return micro_batch_tokens();
      case TaskHeadKind::kMaskedLm: {
        const double rows = samples_per_micro_batch() * static_cast<double>(head.predictions);
        return rows < 1.0 ? 1 : static_cast<int64_t>(rows + 0.5);
      }
      case TaskHeadKind::kClassification:
        return 0;
    }
    return 0;
  }
  /// The attention sequences of one micro-batch, before a context-parallel split.
  AttentionSequences attention_sequences() const {
    return upsim::attention_sequences(sequences, micro_batch, seq);
  }
  DType activation_dtype() const { return dtype == DType::kFp8 ? DType::kBf16 : dtype; }
  /// The layers of model chunk `virtual_stage` (model order; an encoder-decoder model's
  /// decoder layers from `layers` on): [first, first + count). Every chunk holds as many,
  /// except over an encoder-decoder model's stages, where the encoder's split its layers evenly
  /// and the decoder's theirs (parallelism.encoder_stages), and under a stated uneven split
  /// (parallelism.chunk_layer_offsets; a chunk may hold none).
  struct LayerRange {
    int64_t first = 0;
    int64_t count = 0;
  };
  LayerRange chunk_layers(int64_t virtual_stage) const {
    const ParallelismConfig& p = parallelism;
    if (encoder_decoder() && p.pipeline > 1 && p.encoder_stages > 0) {
      if (virtual_stage < p.encoder_stages) {
        const int64_t per = layers / p.encoder_stages;
        return {virtual_stage * per, per};
      }
      const int64_t per = decoder_layers / (p.pipeline - p.encoder_stages);
      return {layers + (virtual_stage - p.encoder_stages) * per, per};
    }
    if (!p.chunk_layer_offsets.empty()) {
      const auto vs = static_cast<size_t>(virtual_stage);
      return {p.chunk_layer_offsets[vs], p.chunk_layer_offsets[vs + 1] - p.chunk_layer_offsets[vs]};
    }
    const int64_t per = (layers + decoder_layers) / (p.pipeline * p.virtual_stages);
    return {virtual_stage * per, per};
  }
  /// The weight gradients' GEMM dtype: bf16 under torchao's rowwise_with_gw_hp, else dtype.
  DType wgrad_dtype() const {
    return dtype == DType::kFp8 && fp8_recipe == Fp8Recipe::kRowwiseWithGwHp ? DType::kBf16 : dtype;
  }
  /// fp8 GEMMs as torchao's Float8Linear runs them (layer_kernels torchtitan).
  bool torchao_float8() const {
    return dtype == DType::kFp8 && layer_kernels == LayerKernelSet::kTorchtitan;
  }
  /// torchao's float8 tensor parallel (Float8ColwiseParallel, Float8RowwiseParallel,
  /// PrepareFloat8ModuleInput): activations cast to float8 before their all-gathers, tensorwise
  /// only (torchtitan's apply_tp: enable_float8_tensorwise_tp).
  bool float8_tensor_parallel() const {
    return torchao_float8() && fp8_recipe == Fp8Recipe::kTensorwise && parallelism.tensor > 1 &&
           parallelism.sequence;
  }
  /// The element type of the residual stream, the norms and the softmax: fp32 under autocast
  /// (its fp32 op list: layer_norm, softmax; an add of a 16-bit and an fp32 tensor is fp32),
  /// else activation_dtype().
  DType residual_dtype() const { return autocast ? DType::kFp32 : activation_dtype(); }
  /// The gradients' element type: grad_reduce_dtype when given, else Megatron-LM's rule
  /// (arguments.py: bf16 training forces accumulate_allreduce_grads_in_fp32; fp16 training
  /// keeps fp16 gradients; fp32 / tf32 training has fp32 ones), which is also PyTorch FSDP's
  /// mixed precision with reduce_dtype fp32 for bf16 (Composer's DEFAULT).
  DType gradient_dtype() const {
    if (grad_reduce_dtype) return *grad_reduce_dtype;
    if (autocast) return DType::kFp32;  // the fp32 parameters' .grad
    const DType a = activation_dtype();
    if (dtype_bytes(a) == 4) return DType::kFp32;
    return master_weights && a == DType::kBf16 ? DType::kFp32 : a;
  }
  /// Micro-batches per iteration on each pipeline (gradient accumulation steps).
  /// (Context-parallel ranks share a micro-batch: `data` excludes them, as in Megatron.)
  int64_t micro_batches() const { return global_batch / (micro_batch * parallelism.data); }
  bool is_moe_layer(int64_t layer) const {
    return moe.experts > 0 && layer >= moe.first_dense && (layer + 1) % moe.every == 0;
  }
};

/// Tokens the local experts of the busiest expert-parallel rank process in one MoE layer and
/// micro-batch, in units of the mean load (the tokens x top_k that each rank's router sends):
/// 1 + imbalance, at most `expert` (the busiest rank cannot receive more than every token its
/// EP group routes) and, with a capacity factor, at most capacity_factor (an expert takes
/// capacity_factor x its mean share; the rest is dropped).
/// The one rule for the generator's expert GEMMs and all-to-all and the memory model's expert
/// activations.
double moe_busiest_rank_load(const TransformerConfig& config);

/// Why fused-attention kernel `kernel` has no build for a GPU of CUDA compute capability
/// `compute_capability` (major x 10 + minor; 0 = not stated: nothing is checked), or nullopt
/// when it has one: FlashAttention-2 and cuDNN's fused attention need 8.0 or later
/// (Dao-AILab/flash-attention README: "Ampere, Ada, or Hopper GPUs"; cuDNN's fused flash
/// attention, sm80 and later), FlashAttention-3 exactly 9.0 (flash-attn's hopper/ build: "H100 /
/// H800 GPU"), FlashAttention v1 7.5 or later (its v1.0.9 README: "Turing or Ampere GPUs";
/// it also runs on H100, whose figure in the repository measures it), the Triton FlashAttention
/// 8.0 or later (flash_attn_triton.py: "only been tested on A100"; bf16 needs Ampere).
std::optional<std::string> attention_kernel_unsupported(AttentionKernel kernel,
                                                        int32_t compute_capability);

/// Reads `workload:` (model: transformer) for a platform of `gpus` GPUs (0 = unknown: `data`
/// must then be given or defaults to 1). Every inconsistency is a ConfigError naming the key:
///   heads % tensor, ffn % tensor                      -> workload.heads / workload.ffn
///   hidden % heads                                    -> workload.hidden
///   kv_heads not dividing heads; kv_heads >= tensor but not a multiple of it; kv_heads <
///     tensor but not dividing it                      -> workload.kv_heads
///   layers % (pipeline x virtual_stages)              -> workload.layers
///   global_batch % (micro_batch x data); interleaved 1F1B with micro-batches % pipeline
///                                                     -> workload.global_batch
///   seq % (2 x context) when context > 1              -> workload.seq
///   attention unfused with context > 1 (no ring exchange; Megatron-Core refuses it too)
///                                                     -> workload.attention
///   unknown dtype / architecture / norm / ...         -> that key (lists the valid values)
///   tensor x pipeline x context x data != gpus        -> workload.parallelism.data, or
///     workload.parallelism when data is defaulted and gpus % (tensor x pipeline x context)
///   sequence without tensor > 1; virtual_stages > 1 without pipeline > 1 (or with gpipe);
///   zero outside 0..3; zero and fsdp both set; bad order -> that parallelism key
///   experts % expert; expert not dividing data x context; expert > 1 without moe
///                                                     -> workload.parallelism.expert
///   an order whose pipeline stride differs between the dense and the expert rank layout (the
///     expert-parallel groups would span pipeline stages; Megatron-Core asserts the same)
///                                                     -> workload.parallelism.order
///   top_k > experts                                   -> workload.moe.top_k
/// A vocabulary not divisible by tensor is padded (padded_vocab()), not rejected.
TransformerConfig parse_transformer_config(const ConfigNode& workload, uint32_t gpus);

/// What each key above means, one line each (sim/config/key_meaning.h), relative to `workload`.
std::span<const KeyMeaning> transformer_key_meanings();

/// Parameters of the whole model (embeddings included, tied ones once; the word embedding and
/// an untied output layer counted at padded_vocab(); the task head's own, task_head_parameters).
int64_t transformer_parameters(const TransformerConfig& config);

/// Parameters of one norm: gain and bias for a LayerNorm with biases, else the gain only.
int64_t transformer_norm_parameters(const TransformerConfig& config);

/// The task head's parameter tensors beyond the output layer on one of `tensor` tensor-parallel
/// ranks (element counts; replicated over tensor parallel but the masked-LM decoder's bias,
/// which is split over the vocabulary): mlm, the transform (h x h, h), its LayerNorm (h, h), the
/// decoder bias (padded vocabulary / tensor), the pooler (h x h, h) and the 2-way classifier
/// (2h, 2); classification, the pooler and the labels-wide classifier; lm, none.
std::vector<int64_t> task_head_tensors(const TransformerConfig& config, int64_t tensor);

/// The task head's parameters, all ranks together: task_head_tensors at tensor 1, summed.
int64_t task_head_parameters(const TransformerConfig& config);

}  // namespace upsim
