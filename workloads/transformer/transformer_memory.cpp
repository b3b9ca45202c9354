#include "workloads/transformer/transformer_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "workloads/transformer/autocast.h"
#include "workloads/transformer/deepep.h"
#include "workloads/transformer/encoder_decoder.h"
#include "workloads/transformer/op_recompute.h"
#include "workloads/transformer/relative_bias.h"
#include "workloads/transformer/torchtitan_layer.h"
#include "workloads/transformer/torchtitan_moe.h"

namespace upsim {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Key/value heads one tensor-parallel rank holds: kv_heads / tensor, or one replicated head
/// when kv_heads < tensor (Megatron-LM replicates the query groups then).
int64_t local_kv_heads(const TransformerConfig& c) {
  return std::max<int64_t>(1, c.kv_heads / c.parallelism.tensor);
}

/// One MLP of inner width `ffn` on one tensor rank: column-parallel input projection(s) (two
/// for SwiGLU: gate and up), row-parallel output projection whose bias is replicated.
/// An MLP of width `ffn` split over `split` ranks (the tensor ranks unless given: the routed
/// experts' are the expert tensor ranks).
int64_t local_mlp_parameters(const TransformerConfig& c, int64_t ffn, int64_t split = 0) {
  const int64_t local = ffn / (split > 0 ? split : c.parallelism.tensor);
  const int64_t in_projections = gated_activation(c.activation) ? 2 : 1;
  int64_t params = (in_projections + 1) * c.hidden * local;
  if (c.bias) params += in_projections * local + c.hidden;
  return params;
}

/// Attention and norms of one layer on one tensor rank: fused QKV (column parallel), output
/// projection (row parallel, bias replicated), the two norms (replicated).
int64_t local_attention_and_norm_parameters(const TransformerConfig& c) {
  if (c.mla.enabled()) {
    return latent_attention_parameters(c.mla, c.hidden, c.heads, c.parallelism.tensor) +
           2 * transformer_norm_parameters(c);
  }
  const int64_t d = c.head_dim();
  const int64_t qkv_width = (c.heads / c.parallelism.tensor + 2 * local_kv_heads(c)) * d;
  const int64_t out_in = c.heads / c.parallelism.tensor * d;
  int64_t params = c.hidden * qkv_width + out_in * c.hidden + 2 * transformer_norm_parameters(c);
  if (c.bias) params += qkv_width + c.hidden;
  if (c.attention_sinks) params += c.heads / c.parallelism.tensor;  // split with the heads
  return params;
}

/// A decoder-only model's layer `layer` on one GPU: its attention and norms, and its dense MLP,
/// or its router h x experts (replicated), shared experts (dense, tensor split) and routed
/// experts (experts / expert per rank, each split over the expert tensor ranks).
StageParameters local_layer_parameters(const TransformerConfig& c, int64_t layer) {
  StageParameters one;
  one.dense = local_attention_and_norm_parameters(c);
  if (c.is_moe_layer(layer)) {
    one.dense +=
        c.hidden * c.moe.experts + c.moe.shared_experts * local_mlp_parameters(c, c.moe.expert_ffn);
    one.expert = c.moe.experts / c.parallelism.expert *
                 local_mlp_parameters(c, c.moe.expert_ffn, c.parallelism.expert_tensor_parallel());
  } else {
    one.dense += local_mlp_parameters(c, c.ffn);
  }
  return one;
}

/// One multi-token prediction layer on one GPU of the last stage (mtp_emitter.cpp): a layer
/// like the last, its three norms and eh_proj (2h x h / tensor), and for the first MTP layer on
/// a stage other than the first the word embedding's copy when the output layer is not the
/// embedding's (untied).
StageParameters local_mtp_parameters(const TransformerConfig& c, bool first_mtp_layer) {
  const ParallelismConfig& p = c.parallelism;
  StageParameters mtp = local_layer_parameters(c, c.layers - 1);
  mtp.dense += 3 * transformer_norm_parameters(c) + 2 * c.hidden * (c.hidden / p.tensor);
  if (first_mtp_layer && p.pipeline > 1 && !c.tied_embeddings) {
    mtp.dense += c.padded_vocab() / p.tensor * c.hidden;
  }
  return mtp;
}

/// The layers of `stage`: model chunk k x pipeline + stage for each virtual stage k, each of
/// layers / (pipeline x virtual_stages) consecutive layers (Megatron's interleaved placement;
/// one chunk without interleaving).
/// The layers of `stage` in model order; an encoder-decoder model's from `layers` on are its
/// decoder's (encoder_decoder.h; TransformerConfig::chunk_layers).
std::vector<int64_t> stage_layers(const TransformerConfig& c, int64_t stage) {
  const ParallelismConfig& p = c.parallelism;
  std::vector<int64_t> layers;
  for (int64_t k = 0; k < p.virtual_stages; ++k) {
    const TransformerConfig::LayerRange chunk = c.chunk_layers(k * p.pipeline + stage);
    for (int64_t i = 0; i < chunk.count; ++i)
      layers.push_back(chunk.first + i);
  }
  return layers;
}

/// The model chunk of `stage` that holds `layer` (one of stage_layers(c, stage)).
int64_t chunk_of_stage_layer(const TransformerConfig& c, int64_t stage, int64_t layer) {
  const ParallelismConfig& p = c.parallelism;
  for (int64_t k = 0; k < p.virtual_stages; ++k) {
    const TransformerConfig::LayerRange chunk = c.chunk_layers(k * p.pipeline + stage);
    if (layer >= chunk.first && layer < chunk.first + chunk.count) return k;
  }
  return 0;
}

/// Interleaved 1F1B: how many of rank `stage`'s warm-up forwards (and the one before its first
/// backward) run each model chunk. Megatron-Core's get_model_chunk_id (schedules.py): forward
/// i runs chunk (i mod (pipeline x v)) / pipeline, so the chunks take turns in groups of
/// pipeline micro-batches.
std::vector<int64_t> chunk_forwards_in_flight(const TransformerConfig& c, int64_t stage) {
  const ParallelismConfig& p = c.parallelism;
  const int64_t v = p.virtual_stages;
  const int64_t warmup =
      std::min(v * c.micro_batches(), 2 * (p.pipeline - stage - 1) + (v - 1) * p.pipeline + 1);
  std::vector<int64_t> forwards(static_cast<size_t>(v), 0);
  for (int64_t i = 0; i < warmup; ++i)
    ++forwards[static_cast<size_t>((i % (p.pipeline * v)) / p.pipeline)];
  return forwards;
}

void check_stage(const TransformerConfig& c, int64_t stage) {
  if (stage < 0 || stage >= c.parallelism.pipeline) {
    throw std::invalid_argument(
        fmt::format("pipeline stage {} is outside 0..{}", stage, c.parallelism.pipeline - 1));
  }
}

/// Bytes per element of what the step keeps, following the Megatron-LM distributed-optimizer
/// table (docs "Distributed Optimizer": bytes per parameter, non-distributed / distributed over
/// d ranks: fp16 params + fp16 grads 20 / 4 + 16/d; bf16 params + fp32 grads 18 / 6 + 12/d; fp32
/// params + fp32 grads 16 / 8 + 8/d).
struct StateBytes {
  int64_t param = 0;
  int64_t grad = 0;
  int64_t optimizer = 0;
};

StateBytes state_bytes(const TransformerConfig& c) {
  StateBytes b;
  // fp8 training (Transformer Engine) keeps bf16 weights and casts them to fp8 per GEMM;
  // autocast keeps the model in fp32 (its casts are autocast_weight_copy_bytes).
  b.param = c.autocast ? 4 : dtype_bytes(c.activation_dtype());
  const bool sixteen_bit = b.param < 4;
  // TransformerConfig::gradient_dtype(): Megatron-LM accumulates main_grad in fp32 for bf16
  // (arguments.py forces accumulate_allreduce_grads_in_fp32), in the param dtype for fp16.
  b.grad = dtype_bytes(c.gradient_dtype());
  const bool fp32_grads = b.grad == 4;
  // Moments: Adam(W) keeps m and v, SGD with momentum one buffer; fp32 with master weights.
  const int64_t moments = c.optimizer == TransformerOptimizer::kSgd ? 1 : 2;
  if (c.master_weights && sixteen_bit) {
    b.optimizer =
        4 /* fp32 master weights */ + (fp32_grads ? 0 : 4) /* fp32 grad copy */ + 4 * moments;
  } else {
    b.optimizer = b.param * moments;
  }
  return b;
}

/// Ranks that split one dense / one expert parameter's sharded state: Megatron-LM's
/// distributed optimizer shards over the data-parallel group including context parallel (HSDP:
/// over one shard group, ParallelismConfig::shard_group); experts replicate over the expert
/// data-parallel group (ParallelismConfig::expert_data).
int64_t dense_replicas(const ParallelismConfig& p) {
  return p.shard_ranks();
}
int64_t expert_replicas(const ParallelismConfig& p) {
  return p.expert_data();
}

bool shards_optimizer(const ParallelismConfig& p) {
  return p.zero >= 1 || p.fsdp != FsdpMode::kNone;
}
/// Sharded parameters that keep unsharded gradients and stay gathered across micro-batches
/// (ParallelismConfig::gradient_sync kLastMicroBatch, with more than one micro-batch).
bool holds_unsharded_across_micro_batches(const TransformerConfig& c) {
  return c.parallelism.gradient_sync == ShardedGradientSync::kLastMicroBatch &&
         c.micro_batches() > 1;
}
bool shards_gradients(const TransformerConfig& c) {
  const ParallelismConfig& p = c.parallelism;
  return (p.zero >= 2 || p.fsdp != FsdpMode::kNone) && !holds_unsharded_across_micro_batches(c);
}
bool shards_weights(const TransformerConfig& c) {
  const ParallelismConfig& p = c.parallelism;
  return (p.zero >= 3 || p.fsdp == FsdpMode::kFullShard) &&
         !holds_unsharded_across_micro_batches(c);
}

/// Bytes of `params` (dense and expert) at `bytes_per` each, split over the replicas if
/// `sharded`.
int64_t state_of(const StageParameters& params, int64_t bytes_per, bool sharded,
                 const ParallelismConfig& p) {
  if (!sharded) return params.total() * bytes_per;
  return ceil_div(params.dense, dense_replicas(p)) * bytes_per +
         ceil_div(params.expert, expert_replicas(p)) * bytes_per;
}

/// NCCL keeps a buffer of NCCL_BUFFSIZE (4 MiB default, NCCL environment-variable docs) per
/// channel and peer connection; assumed: 8 channels x 2 connections (ring send / receive) per
/// communicator this GPU uses. An estimate; real counts depend on the topology NCCL detects.
constexpr int64_t kNcclBytesPerCommunicator = 8 * 2 * (4LL << 20);

}  // namespace

StageParameters transformer_stage_parameters(const TransformerConfig& c, int64_t pipeline_stage) {
  check_stage(c, pipeline_stage);
  const ParallelismConfig& p = c.parallelism;
  StageParameters params;
  const TransformerConfig decoder = c.encoder_decoder() ? decoder_stack_config(c) : c;
  const int64_t word_embedding = c.padded_vocab() / p.tensor * c.hidden;
  for (const int64_t layer : stage_layers(c, pipeline_stage)) {
    // T5's relative bias table of each stack, with its first layer (relative_bias.h).
    if (c.position == TransformerPosition::kRelative && (layer == 0 || layer == c.layers)) {
      params.dense += kRelativeBiasBuckets * (c.heads / p.tensor);
    }
    if (layer >= c.layers) {
      // A decoder layer with its cross-attention (encoder_decoder.h).
      params.dense += local_attention_and_norm_parameters(decoder) +
                      local_mlp_parameters(decoder, decoder.ffn) +
                      cross_attention_parameters(c, p.tensor);
      if (layer == c.layers) {
        // The decoder's embedding: its positions, and on a first decoder stage that is not
        // the first (one stage) or the last (whose copy serves it) a copy of the word
        // embedding.
        if (c.position == TransformerPosition::kLearned) params.dense += c.seq * c.hidden;
        if (pipeline_stage != 0 && pipeline_stage != p.pipeline - 1) {
          params.dense += word_embedding;
        }
      }
      continue;
    }
    // The encoder's final norm ends its last layer.
    if (c.encoder_decoder() && layer == c.layers - 1) {
      params.dense += transformer_norm_parameters(c);
    }
    const StageParameters one = local_layer_parameters(c, layer);
    params.dense += one.dense;
    params.expert += one.expert;
  }
  // Vocabulary-parallel word embedding (padded vocabulary / tensor rows), learned positions.
  if (pipeline_stage == 0) {
    params.dense += word_embedding;
    if (c.position == TransformerPosition::kLearned) params.dense += c.seq * c.hidden;
  }
  if (c.lora.enabled()) {
    // The adapters beside the frozen base (lora.h).
    params.dense += lora_layer_parameters(c, p.tensor) *
                    static_cast<int64_t>(stage_layers(c, pipeline_stage).size());
  }
  if (pipeline_stage == p.pipeline - 1) {
    params.dense += transformer_norm_parameters(c);
    // Untied: the output layer. Tied with pipeline > 1: Megatron-LM keeps a copy of the word
    // embedding on the last stage and all-reduces their gradients (the "embedding group").
    if (c.has_output_layer() && (!c.tied_embeddings || p.pipeline > 1)) {
      params.dense += word_embedding;
    }
    // The task head's own (replicated; the masked-LM decoder bias is split like the vocabulary).
    for (const int64_t n : task_head_tensors(c, p.tensor))
      params.dense += n;
    // Multi-token prediction (mtp_emitter.cpp): per MTP layer a layer like the last, three
    // norms and eh_proj (2h x h / tensor); and the word embedding's copy when this stage is not
    // the first and the output layer is not the embedding's.
    for (int64_t k = 0; k < c.mtp_layers; ++k) {
      const StageParameters mtp = local_mtp_parameters(c, k == 0);
      params.dense += mtp.dense;
      params.expert += mtp.expert;
    }
  }
  return params;
}

namespace {

/// What torchtitan's per-op checkpointing policy keeps of one dense layer and micro-batch of
/// `tokens` tokens (op_recompute.h), in the forward whose saved matmuls take the most: the
/// block's input (the checkpoint's argument, sharded by SP), each saved matmul's output at
/// its full token count (the row-parallel ones before their reduce-scatter), scaled-dot-
/// product attention's output and fp32 log-sum-exp, and under SP both reduce-scatters'
/// outputs (in the save list).
int64_t op_policy_layer_bytes(const TransformerConfig& c, int64_t tokens) {
  const ParallelismConfig& p = c.parallelism;
  const int64_t e = dtype_bytes(c.activation_dtype());
  const int64_t t = p.tensor;
  const int64_t split = p.sequence ? t : 1;
  const int64_t h = c.hidden;
  const int64_t q_width = c.heads / t * c.head_dim();
  const int64_t kv_width = local_kv_heads(c) * c.head_dim();
  const int64_t ffn = c.ffn / t;
  const auto output_width = [&](BlockMatmul m) -> int64_t {
    switch (m) {
      case BlockMatmul::kQuery:
        return q_width;
      case BlockMatmul::kKey:
      case BlockMatmul::kValue:
        return kv_width;
      case BlockMatmul::kOutput:
      case BlockMatmul::kDown:
        return h;
      case BlockMatmul::kGate:
      case BlockMatmul::kUp:
        return ffn;
    }
    return 0;
  };
  int64_t saved_matmuls = 0;
  for (const int64_t forward : {0, 1}) {
    int64_t bytes = 0;
    for (const BlockMatmul m : block_matmuls(c)) {
      if (op_policy_saves(c, forward, m)) bytes += e * tokens * output_width(m);
    }
    saved_matmuls = std::max(saved_matmuls, bytes);
  }
  int64_t bytes = ceil_div(e * tokens * h, split) + saved_matmuls;
  bytes += e * tokens * q_width + 4 * tokens * (c.heads / t);  // attention output, lse
  if (t > 1 && p.sequence) bytes += 2 * ceil_div(e * tokens * h, t);
  return bytes;
}

}  // namespace

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
// (arXiv 2205.05198), section 4.1 counts the bytes one layer stores for its backward with
// 16-bit activations and 1-byte dropout masks, per micro-batch (s tokens per sequence, b
// sequences, h hidden, a heads):
//   attention block 11 s b h + 5 a s^2 b: QKV input 2sbh, Q and K 4sbh, softmax output 2as^2b,
//     its dropout mask as^2b, dropout output 2as^2b, V 2sbh, output-projection input 2sbh,
//     output dropout mask sbh;
//   MLP 19 s b h: fc1 input 2sbh, GeLU input 8sbh, fc2 input 8sbh, dropout mask sbh;
//   two layer norms 4 s b h;
// total s b h (34 + 5 a s / h) (Table 2, no parallelism). Tensor parallelism divides the parts
// inside the column/row-parallel pair by t (24 sbh and the 5 a s^2 b core) and leaves the
// norm, dropout and GEMM inputs (10 sbh) replicated: sbh (10 + 24/t + 5as/(ht)); sequence
// parallelism splits those over t as well: sbh/t (34 + 5as/h). Selective recomputation drops
// the 5as^2b core (recomputed in backward; here each module of recompute_modules.h drops what
// it reruns); full recomputation keeps only the layer input,
// 2 sbh (/ t with sequence parallel).
// Generalised here term by term: activation bytes e (2 for fp16/bf16/fp8, 4 for fp32), mask
// bytes only when dropout > 0, Q/K/V widths from heads and kv_heads (grouped-query
// attention), the MLP width ffn (SwiGLU stores gate and up: 2 ffn at the activation), context
// parallelism dividing the tokens by cp (its queries meet the whole sequence's keys), and
// flash attention (Dao et al. 2022, arXiv 2205.14135) never storing the s x s scores: it keeps
// an fp32 log-sum-exp per query and head instead and regenerates dropout from the RNG state.
int64_t transformer_layer_activation_bytes(const TransformerConfig& c, bool moe_layer) {
  const ParallelismConfig& p = c.parallelism;
  const int64_t e = dtype_bytes(c.activation_dtype());
  // The residual stream and the norms' inputs (fp32 under autocast, autocast.h).
  const int64_t r = dtype_bytes(c.residual_dtype());
  const int64_t mask = c.dropout > 0.0 ? 1 : 0;
  const int64_t t = p.tensor;
  const int64_t split = p.sequence ? t : 1;  // divisor of the TP-replicated parts
  const int64_t s_local = c.seq / p.context;
  const int64_t tokens = c.micro_batch_tokens() / p.context;
  const int64_t h = c.hidden;
  const int64_t d = c.head_dim();
  const int64_t q_local = c.heads / t;
  const int64_t kv_local = local_kv_heads(c);

  if (c.recompute == Recompute::kFull) return ceil_div(r * tokens * h, split);
  if (c.recompute == Recompute::kOp) return op_policy_layer_bytes(c, tokens);
  // Selective recomputation (recompute_modules.h) drops what its modules rerun.
  const RecomputeModules rerun = c.selective_modules();

  // torchtitan's modules keep more than the fused ones (torchtitan_layer.h).
  int64_t bytes = torchtitan_extra_activation_bytes(c);
  bytes += ceil_div(2 * r * tokens * h, split);  // two norm inputs
  // QKV GEMM input; under autocast each of the query, key and value linears saves its own
  // 16-bit copy of the fp32 norm output (autocast.h). Latent attention's input norm stands
  // alone, and layernorm recomputation frees its output.
  if (!(rerun.layernorm && c.mla.enabled())) {
    bytes += ceil_div((c.autocast ? kAutocastQkvInputCasts : 1) * e * tokens * h, split);
  }
  if (const LatentAttentionConfig& m = c.mla; m.enabled()) {
    // Latent attention: the latents (the up projections' and the rope key's inputs), then Q
    // and K of qk_head_dim and V of v_head_dim per head.
    bytes += e * tokens * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim);
    // mla_up_proj frees them after the core attention and recomputes them from the latents.
    if (!rerun.mla_up_proj) bytes += e * tokens * q_local * (2 * m.qk_head_dim() + m.v_head_dim);
  } else {
    bytes += e * tokens * (q_local + 2 * kv_local) * d;  // Q, K, V
    // qk_norm: the query and key norms keep their inputs (the projections' Q and K).
    if (c.qk_norm) bytes += e * tokens * (q_local + kv_local) * d;
  }
  if (!rerun.core_attn) {
    if (c.attention == AttentionImpl::kUnfused) {
      // softmax output, dropout mask and dropout output over the local queries x all keys;
      // under autocast the softmax's fp32 output, the mask, and the 16-bit copy the p v bmm
      // casts (of the dropout output, or of the softmax output without dropout) and saves
      const int64_t scores = q_local * c.micro_batch * s_local * c.seq;
      bytes += c.autocast ? scores * (4 + mask + e) : scores * (e + mask * (1 + e));
    } else {
      bytes += 4 * q_local * tokens;  // flash attention's fp32 log-sum-exp
    }
  }
  bytes += e * tokens * q_local * (c.mla.enabled() ? c.mla.v_head_dim : d);  // out-proj input
  bytes += ceil_div(mask * tokens * h, split);  // attention dropout mask

  // MLP (or MoE) after the second norm.
  const int64_t act_factor = gated_activation(c.activation) ? 2 : 1;
  const auto mlp_inner = [&](int64_t rows, int64_t ffn) {
    const int64_t local = ffn / t;
    return e * rows * local * act_factor /* activation input */ + e * rows * local /* fc2 in */;
  };
  bytes += ceil_div(mask * tokens * h, split);  // MLP dropout mask
  if (!moe_layer) {
    // The mlp checkpoint keeps only its input, the residual stream (the norm input above).
    if (!rerun.mlp) bytes += ceil_div(e * tokens * h, split) + mlp_inner(tokens, c.ffn);
    return bytes;
  }
  // A MoE layer's pre-MLP norm stands alone: its output (the router's and permutation's input)
  // is freed under layernorm recomputation, and is all the moe checkpoint keeps.
  if (!rerun.layernorm) bytes += ceil_div(e * tokens * h, split);
  if (rerun.moe) return bytes;
  // Mixture of experts (Megatron-LM core MoE): the expert tensor ranks gather their sequence
  // shards after the expert-parallel all-to-all, so the experts hold rows of et / t of the
  // layer's tokens (all of them at Megatron-Core's default et = t), with their fp32 router
  // probabilities; each token reaches top_k experts, the local experts of the busiest
  // expert-parallel rank receive those tokens x top_k times its load (moe_busiest_rank_load:
  // the imbalance, capped as the generator's timing caps it); each stores its permuted input,
  // activation input and fc2 input on 1 / et of the expert width. Shared experts run on every
  // token like a dense MLP of their total width.
  const int64_t et = p.expert_tensor_parallel();
  const int64_t moe_rows = et == t ? tokens : ceil_div(tokens, t) * et;
  bytes += 4 * moe_rows * c.moe.experts;
  const auto routed = static_cast<int64_t>(
      std::ceil(static_cast<double>(moe_rows * c.moe.top_k) * moe_busiest_rank_load(c)));
  const int64_t expert_local = c.moe.expert_ffn / et;
  bytes += e * routed * h + e * routed * expert_local * (act_factor + 1);
  // moe_act frees the activation's output, the experts' fc2 input.
  if (rerun.moe_act) bytes -= e * routed * expert_local;
  if (c.moe.shared_experts > 0 && !rerun.shared_experts) {
    bytes += mlp_inner(tokens, c.moe.shared_experts * c.moe.expert_ffn);
  }
  return bytes + torchtitan_moe_extra_activation_bytes(c);
}

// Micro-batches in flight at a stage's peak (counting its whole layer set as one):
//  - no pipeline: one (gradient accumulation runs each micro-batch's backward before the next
//    forward); under moe.a2a_overlap (L + 1) / L of the L layers (combined_1f1b.cpp: the next
//    forward's layers are stored as the previous backward frees its own);
//  - GPipe (Huang et al. 2019, arXiv 1811.06965): every micro-batch's forward runs before any
//    backward: all M;
//  - 1F1B (PipeDream-Flush, Narayanan et al. SC21, arXiv 2104.04473 section 2.2.1): stage p of P
//    runs P - p warm-up forwards before its first backward: min(M, P - p);
//  - interleaved 1F1B with v model chunks per stage (same paper, section 2.2.2; Megatron-LM
//    schedules.py forward_backward_pipelining_with_interleaving): rank p runs
//    2 (P - p - 1) + (v - 1) P warm-up chunk forwards, then one more before the first
//    backward: min(v M, 2 (P - p - 1) + (v - 1) P + 1) chunks of L / (P v) layers, i.e. that
//    count / v stage-sets. For p = 0 this is P (1 + (P - 1) / (P v)), the first stage's
//    figure in Korthikanti et al. 2022, section 4.2.3. Under moe.a2a_overlap one layer of a
//    chunk more (combined_1f1b.cpp: one more warm-up forward, then the forward's layers stored
//    as the paired backward frees its own).
double transformer_micro_batches_in_flight(const TransformerConfig& c, int64_t pipeline_stage) {
  check_stage(c, pipeline_stage);
  const ParallelismConfig& p = c.parallelism;
  const int64_t m = c.micro_batches();
  // Megatron-Core's combined 1F1B schedule (moe.a2a_overlap, one stage) runs a micro-batch's
  // forward layer by layer beside the previous one's backward from the top: after the i-th
  // pair the forward holds i + 1 layers and the backward still L - i, one layer more than a
  // micro-batch's L.
  if (p.pipeline == 1) {
    return c.moe.a2a_overlap && m > 1
               ? static_cast<double>(c.layers + 1) / static_cast<double>(c.layers)
               : 1.0;
  }
  switch (p.schedule) {
    case PipelineSchedule::kGpipe:
      return static_cast<double>(m);
    case PipelineSchedule::k1F1B:
      return static_cast<double>(std::min(m, p.pipeline - pipeline_stage));
    case PipelineSchedule::kInterleaved1F1B: {
      const int64_t v = p.virtual_stages;
      const int64_t chunks =
          std::min(v * m, 2 * (p.pipeline - pipeline_stage - 1) + (v - 1) * p.pipeline + 1);
      // moe.a2a_overlap: one more warm-up forward, then each steady forward's layers stored as
      // the backward beside it frees its own: one layer of a chunk more, when there is a steady
      // state.
      const double paired_layer =
          c.moe.a2a_overlap && v * m > chunks
              ? static_cast<double>(p.pipeline * v) / static_cast<double>(c.layers)
              : 0.0;
      return (static_cast<double>(chunks) + paired_layer) / static_cast<double>(v);
    }
  }
  return 1.0;
}

MemoryFootprint transformer_memory(const TransformerConfig& c, int64_t pipeline_stage) {
  check_stage(c, pipeline_stage);
  const ParallelismConfig& p = c.parallelism;
  const StageParameters params = transformer_stage_parameters(c, pipeline_stage);
  const StateBytes bytes = state_bytes(c);
  const bool first = pipeline_stage == 0;
  const bool last = pipeline_stage == p.pipeline - 1;

  MemoryFootprint f;
  f.owner = fmt::format("pipeline stage {}", pipeline_stage);
  // ZeRO (Rajbhandari et al. SC20, arXiv 1910.02054): stage 1 shards the optimizer state over
  // the data-parallel ranks, stage 2 also the gradients, stage 3 also the weights; PyTorch FSDP
  // (Zhao et al. VLDB 2023, arXiv 2304.11277) SHARD_GRAD_OP ~ stage 2, FULL_SHARD ~ stage 3.
  f.parts.push_back({"weights", state_of(params, bytes.param, shards_weights(c), p)});
  // LoRA (lora.h): gradients and optimizer state for the adapters only.
  StageParameters trained = params;
  if (c.lora.enabled()) {
    trained.dense = lora_layer_parameters(c, p.tensor) *
                    static_cast<int64_t>(stage_layers(c, pipeline_stage).size());
    trained.expert = 0;
  }
  f.parts.push_back({"gradients", state_of(trained, bytes.grad, shards_gradients(c), p)});
  f.parts.push_back(
      {"optimizer state", state_of(trained, bytes.optimizer, shards_optimizer(p), p)});
  // The step's short-lived allocations, over which the caching allocator reserves (below).
  int64_t short_lived = 0;
  if (c.autocast) {
    const int64_t copies = autocast_weight_copy_bytes(c, params.total());
    f.parts.push_back({"autocast weight copies", copies});
    short_lived += copies;
  }

  // Activations: per layer per micro-batch, summed over the stage's layers, times the
  // micro-batches in flight.
  const std::vector<int64_t> layers = stage_layers(c, pipeline_stage);
  int64_t per_micro_batch = 0;
  int64_t largest_layer = 0;
  TransformerConfig stored = c;
  stored.recompute = Recompute::kNone;
  // An encoder-decoder model's decoder layers (encoder_decoder.h) store what a decoder-only
  // stack of them would, each with its cross-attention, and the encoder's output they all read
  // (once per micro-batch on a stage with decoder layers). The output layer and loss below run
  // on the decoder's tokens.
  const TransformerConfig decoder = c.encoder_decoder() ? decoder_stack_config(c) : c;
  TransformerConfig stored_decoder = decoder;
  stored_decoder.recompute = Recompute::kNone;
  const int64_t stored_decoder_layer =
      c.encoder_decoder() ? transformer_layer_activation_bytes(stored_decoder, false) +
                                cross_attention_activation_bytes(stored)
                          : 0;
  bool holds_decoder = false;
  // What one micro-batch stores in each of the stage's model chunks (an uneven split's chunks
  // differ; chunk_forwards_in_flight weighs them).
  std::vector<int64_t> chunk_bytes(static_cast<size_t>(p.virtual_stages), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    const int64_t layer = layers[i];
    int64_t stored_bytes = 0;
    if (layer >= c.layers) {
      holds_decoder = true;
      if (decoder.recomputes_layer(layer - c.layers)) {
        stored_bytes = transformer_layer_activation_bytes(decoder, false);
        largest_layer = std::max(largest_layer, stored_decoder_layer);
      } else {
        stored_bytes = stored_decoder_layer;
      }
    } else if (c.recomputes_layer(layer) || c.recompute == Recompute::kOp) {
      stored_bytes = transformer_layer_activation_bytes(c, c.is_moe_layer(layer));
      largest_layer = std::max(largest_layer,
                               transformer_layer_activation_bytes(stored, c.is_moe_layer(layer)));
    } else {
      // A layer outside recompute_layers stores what it would without recomputation.
      stored_bytes = transformer_layer_activation_bytes(
          c.recompute == Recompute::kFull ? stored : c, c.is_moe_layer(layer));
    }
    per_micro_batch += stored_bytes;
    chunk_bytes[static_cast<size_t>(chunk_of_stage_layer(c, pipeline_stage, layer))] +=
        stored_bytes;
  }
  const int64_t e = dtype_bytes(c.activation_dtype());
  const int64_t split = p.sequence ? p.tensor : 1;
  const int64_t tokens = c.micro_batch_tokens() / p.context;
  if (last && c.mtp_layers > 0) {
    // Multi-token prediction on the last chunk (mtp_emitter.cpp): per MTP layer a layer like
    // the last, the enorm, hnorm and final norm inputs (the residual stream's dtype) and
    // eh_proj's 2 hidden wide input (sequence-parallel shards).
    const int64_t mtp =
        c.mtp_layers *
        (transformer_layer_activation_bytes(c, c.is_moe_layer(c.layers - 1)) +
         ceil_div((3 * dtype_bytes(c.residual_dtype()) + 2 * e) * tokens * c.hidden, split));
    per_micro_batch += mtp;
    chunk_bytes.back() += mtp;
  }
  if (holds_decoder) per_micro_batch += encoder_output_bytes(c);
  // T5's relative bias: each stack's bucket indices (relative_bias.h).
  per_micro_batch += relative_bias_activation_bytes(c);
  if (holds_decoder) per_micro_batch += relative_bias_activation_bytes(decoder);
  const double in_flight = transformer_micro_batches_in_flight(c, pipeline_stage);
  const int64_t head_tokens = decoder.micro_batch_tokens() / p.context;
  auto activations =
      static_cast<int64_t>(std::llround(static_cast<double>(per_micro_batch) * in_flight));
  if (!p.chunk_layer_offsets.empty() && p.virtual_stages > 1) {
    // Uneven chunks: each chunk's bytes times its own forwards in flight; what in_flight holds
    // beyond them (moe.a2a_overlap's paired layer) at the stage's mean chunk.
    const std::vector<int64_t> forwards = chunk_forwards_in_flight(c, pipeline_stage);
    double weighted = 0.0;
    int64_t chunk_forwards = 0;
    for (size_t k = 0; k < forwards.size(); ++k) {
      weighted += static_cast<double>(chunk_bytes[k]) * static_cast<double>(forwards[k]);
      chunk_forwards += forwards[k];
    }
    const double beyond =
        in_flight - static_cast<double>(chunk_forwards) / static_cast<double>(p.virtual_stages);
    activations = static_cast<int64_t>(
        std::llround(weighted + beyond * static_cast<double>(per_micro_batch)));
  }
  // Full recomputation rematerialises one layer's activations (one micro-batch) during its
  // backward, on top of the stored layer inputs.
  activations += largest_layer;
  if (first && c.dropout > 0.0) {
    // Korthikanti et al. 2022 (section 4.3): the embedding's dropout mask, s b h p / t bytes for
    // the p micro-batches the first stage holds (/ t with sequence parallel).
    activations += static_cast<int64_t>(
        std::ceil(static_cast<double>(ceil_div(tokens * c.hidden, split)) * in_flight));
  }
  if (c.encoder_decoder() && c.dropout > 0.0 && pipeline_stage == first_decoder_stage(c)) {
    // The decoder embedding's own, on the first decoder stage.
    activations += static_cast<int64_t>(
        std::ceil(static_cast<double>(ceil_div(head_tokens * c.hidden, split)) * in_flight));
  }
  if (last) {
    // The final norm's input (the residual stream) and the output layer's input (Megatron-LM
    // keeps the sequence-parallel shard and gathers it again in backward).
    activations += ceil_div((dtype_bytes(c.residual_dtype()) + e) * head_tokens * c.hidden, split);
  }
  f.parts.push_back({"activations", activations});
  short_lived += activations;

  if (last) {
    // Megatron-LM's vocabulary-parallel cross entropy works on fp32 logits and keeps the
    // softmax for its backward: 4 s b V / t bytes (Korthikanti et al. 2022, section 4.3) per
    // micro-batch whose backward has not run: all of them under GPipe, one under 1F1B (the last
    // stage runs each micro-batch's backward right after its forward).
    const int64_t held =
        p.pipeline > 1 && p.schedule == PipelineSchedule::kGpipe ? c.micro_batches() : 1;
    // The eager cross-entropy (task_head.h) holds 12 bytes per logit at its backward's peak.
    const int64_t rows = ceil_div(decoder.vocabulary_rows(), p.context);
    const int64_t per_logit = c.head.eager_loss ? 12 : 4;
    if (rows > 0) {
      // Each multi-token prediction layer keeps its own logits until the backward.
      const int64_t logits =
          per_logit * rows * (c.padded_vocab() / p.tensor) * held * (1 + c.mtp_layers);
      f.parts.push_back({"output logits", logits});
      short_lived += logits;
    }
  }

  // Buffers.
  int64_t buffers = 0;
  if (shards_gradients(c)) {
    // ZeRO-2/3 and FSDP reduce-scatter gradients out of a bucket (DeepSpeed reduce_bucket_size;
    // here parallelism.ddp_bucket) before sharding them. DDP and ZeRO-1 (Megatron-LM's
    // contiguous grad buffer) reduce in place: their buckets are views of the gradients.
    buffers += p.ddp_bucket_bytes;
  }
  if (shards_weights(c)) {
    // ZeRO-3 / FULL_SHARD gather each unit (a transformer layer, the usual wrapping policy)
    // before use: the unit in use plus the prefetched next one (FSDP's rate limiter allows two
    // all-gathers in flight, Zhao et al. 2023 section 4.4), and the unit's unsharded gradients
    // before their reduce-scatter.
    int64_t unit = 0;
    for (const int64_t layer : layers)
      unit = std::max(unit, local_layer_parameters(c, layer).total());
    if (first || last) unit = std::max(unit, c.padded_vocab() / p.tensor * c.hidden);
    // An MTP layer's unit (mtp_emitter.cpp): a layer like the last, its norms and eh_proj, and
    // on a later stage than the first the word embedding's copy when untied.
    if (last && c.mtp_layers > 0) unit = std::max(unit, local_mtp_parameters(c, true).total());
    buffers += 2 * unit * bytes.param + unit * bytes.grad;
  }
  // Megatron-Core's all-gather dispatcher gathers the hidden states into its global memory
  // buffer (gather_from_sequence_parallel_region(..., use_global_buffer=True)): expert x the
  // rank's tokens x hidden, kept for the run (tensor 1: the dispatcher is refused with more).
  if (c.moe.dispatcher == MoeDispatcher::kAllGather && p.expert > 1 &&
      std::any_of(layers.begin(), layers.end(),
                  [&c](int64_t layer) { return c.is_moe_layer(layer); })) {
    buffers += p.expert * tokens * c.hidden * e;
  }
  // The flex dispatcher's NVLink and RDMA buffers, allocated once for the expert group: DeepEP's
  // (fused_a2a.py get_buffer, hidden bytes = hidden x max(element bytes, 2)) or HybridEP's
  // (init_hybrid_ep_buffer, for the rank's tokens).
  if (c.moe.dispatcher == MoeDispatcher::kFlex && p.expert > 1 &&
      std::any_of(layers.begin(), layers.end(),
                  [&c](int64_t layer) { return c.is_moe_layer(layer); })) {
    buffers += c.moe.flex_backend == FlexBackend::kDeepEp
                   ? deepep_buffer_bytes(p.expert, c.hidden * std::max<int64_t>(e, 2),
                                         flex_dispatch_sms(false, c.moe.flex_sms, false))
                   : hybridep_buffer_bytes(p.expert, tokens, c.hidden, c.moe.experts / p.expert);
  }
  // Tensor, context, expert, data x context (dense gradients), expert data parallel (the
  // experts' gradients, with expert > 1 only) and pipeline.
  int64_t communicators = 0;
  const int64_t expert_data = p.expert > 1 ? expert_replicas(p) : 1;
  for (const int64_t size :
       {p.tensor, p.context, p.expert, dense_replicas(p), expert_data, p.pipeline}) {
    if (size > 1) ++communicators;
  }
  if (p.shard_ranks() < p.data * p.context) ++communicators;  // HSDP's replicate group
  buffers += communicators * kNcclBytesPerCommunicator;
  f.parts.push_back({"buffers", buffers});

  if (c.allocator == CudaAllocator::kCaching) {
    // Reserve = short-lived peak / (1 - fragmentation) (kCachingAllocatorFragmentation).
    const double frag = kCachingAllocatorFragmentation;
    f.parts.push_back({std::string(MemoryFootprint::kAllocatorReserve),
                       std::llround(static_cast<double>(short_lived) * frag / (1.0 - frag))});
  }
  return f;
}

MemoryFootprint transformer_peak_memory(const TransformerConfig& c) {
  MemoryFootprint peak = transformer_memory(c, 0);
  for (int64_t stage = 1; stage < c.parallelism.pipeline; ++stage) {
    MemoryFootprint f = transformer_memory(c, stage);
    if (f.total_bytes() > peak.total_bytes()) peak = std::move(f);
  }
  return peak;
}

}  // namespace upsim
