#include "workloads/transformer/layer_kernels.h"

#include <algorithm>
#include <cmath>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/compiled_fusion.h"

namespace upsim {

namespace {

/// Adds the descriptions in build(), in their order.
class LayerKernelBuilder {
 public:
  LayerKernelBuilder(const TransformerConfig& config, const LayerSizes& sizes, TaskGraph& graph)
      : config_(config),
        sizes_(sizes),
        graph_(graph),
        gemm_dt_(config.dtype),
        act_dt_(config.activation_dtype()),
        res_dt_(config.residual_dtype()) {}

  LayerKernels build() {
    build_descs();
    return kernels_;
  }

 private:
  KernelDescId add(const KernelDesc& d) { return graph_.add_kernel_desc(d); }
  KernelDescId gemm(DType dt, int64_t batch, int64_t m, int64_t n, int64_t k) {
    return add(gemm_kernel(dt, batch, m, n, k));
  }
  KernelDescId grouped_gemm(int64_t groups, int64_t m, int64_t n, int64_t k, GroupedRows rows) {
    KernelDesc d = gemm_kernel(gemm_dt_, groups, m, n, k);
    d.grouped = rows;
    return add(d);
  }
  GroupedRows expert_rows(int64_t local) const { return moe_expert_rows(config_, sizes_, local); }
  KernelDescId pw(MemoryOp op, double elements, double flops, double reads, double writes) {
    return add(pytorch::pointwise(op, act_dt_, elements, flops, reads, writes));
  }
  KernelDescId pw(MemoryOp op, double elements, PerElement work) {
    return pw(op, elements, work.flops, work.reads, work.writes);
  }
  /// A pointwise kernel on the residual stream (res_dt_).
  KernelDescId pw_res(MemoryOp op, double elements, double flops, double reads, double writes) {
    return add(pytorch::pointwise(op, res_dt_, elements, flops, reads, writes));
  }
  KernelDescId pw_res(MemoryOp op, double elements, PerElement work) {
    return pw_res(op, elements, work.flops, work.reads, work.writes);
  }
  KernelDescId row(MemoryOp op, int64_t rows, int64_t cols, PerElement work, DType dt) {
    return row(op, rows, cols, work.flops, work.reads, work.writes, dt);
  }
  KernelDescId row(MemoryOp op, int64_t rows, int64_t cols, double flops, double reads,
                   double writes, DType dt) {
    return add(pytorch::rowwise(op, dt, rows, cols, flops, reads, writes));
  }
  AttentionShape attention_shape(int64_t seq_q, bool causal, bool backward,
                                 int64_t window = 0) const {
    return AttentionShape{
        sizes_.b, sizes_.heads, sizes_.kv_heads,          seq_q, sizes_.s, sizes_.head_dim, causal,
        backward, true,         config_.attention_kernel, window};
  }

  /// The GEMM pieces of parallelism.tp_comm_overlap (LayerKernels). Appended after the others,
  /// so that a run without the overlap keeps its descriptions' ids.
  void build_tp_overlap_descs() {
    LayerKernels& d = kernels_;
    const LayerSizes& z = sizes_;
    const int64_t chunk = z.sp_tokens;
    const int64_t split = (z.tokens + kTpOverlapSplits - 1) / kTpOverlapSplits;
    d.qkv_fwd_chunk = add(pytorch::linear_gemms(gemm_dt_, chunk, z.h, z.qkv_out).forward);
    d.fc1_fwd_chunk = add(pytorch::linear_gemms(gemm_dt_, chunk, z.h, z.fc1_out).forward);
    d.proj_dgrad_chunk = add(pytorch::linear_gemms(gemm_dt_, chunk, z.attn_out, z.h).grad_input);
    d.fc2_dgrad_chunk = add(pytorch::linear_gemms(gemm_dt_, chunk, z.ffn, z.h).grad_input);
    d.proj_fwd_split = add(pytorch::linear_gemms(gemm_dt_, split, z.attn_out, z.h).forward);
    d.fc2_fwd_split = add(pytorch::linear_gemms(gemm_dt_, split, z.ffn, z.h).forward);
  }

  void build_descs() {
    LayerKernels& d = kernels_;
    const LayerSizes& z = sizes_;
    const double sp_elems = as_double(z.sp_tokens * z.h);
    const MemoryOp norm = norm_memory_op(config_);
    d.norm_fwd = row(norm, z.sp_tokens, z.h, kNormForward, res_dt_);
    d.norm_bwd = row(norm, z.sp_tokens, z.h, kNormBackward, res_dt_);
    const pytorch::LinearGemms qkv = pytorch::linear_gemms(gemm_dt_, z.tokens, z.h, z.qkv_out);
    d.qkv_fwd = add(qkv.forward);
    d.qkv_dgrad = add(qkv.grad_input);
    d.qkv_wgrad = add(qkv.grad_weight);
    const double rotary_elems = as_double(z.tokens * (z.heads + z.kv_heads) * z.head_dim);
    d.rotary_fwd = pw(MemoryOp::kRotary, rotary_elems, 3, 2, 1);
    d.rotary_bwd = pw(MemoryOp::kRotary, rotary_elems, 3, 2, 1);
    const int64_t cp = config_.parallelism.context;
    d.attn_fwd =
        add(pytorch::attention_kernel(act_dt_, attention_shape(z.s, config_.causal, false)));
    d.attn_bwd =
        add(pytorch::attention_kernel(act_dt_, attention_shape(z.s, config_.causal, true)));
    // Ring attention (Liu et al., arXiv 2310.01889; Megatron-LM's load-balanced context
    // parallel): step 0 is the local, diagonal block; with a causal mask every later step
    // computes half a block (the sequence is split into 2 cp chunks, zig-zag).
    for (int64_t step = 1; step < cp; ++step) {
      const int64_t seq_q = config_.causal ? z.s / 2 : z.s;
      d.attn_ring_fwd.push_back(
          add(pytorch::attention_kernel(act_dt_, attention_shape(seq_q, false, false))));
      d.attn_ring_bwd.push_back(
          add(pytorch::attention_kernel(act_dt_, attention_shape(seq_q, false, true))));
    }
    // Unfused attention: baddbmm q k^T, masked softmax, dropout, bmm p v (Megatron's
    // CoreAttention), per head; grouped kv heads are expanded to the query heads first.
    const int64_t bh = z.b * z.heads;
    const int64_t s = z.s;
    d.score_fwd = gemm(act_dt_, bh, s, s, z.head_dim);
    d.score_dgrad_q = gemm(act_dt_, bh, s, z.head_dim, s);
    d.score_dgrad_k = gemm(act_dt_, bh, s, z.head_dim, s);
    d.softmax_fwd = row(MemoryOp::kSoftmax, bh * s, s, 5, 1, 1, res_dt_);
    d.softmax_bwd = row(MemoryOp::kSoftmax, bh * s, s, 3, 2, 1, res_dt_);
    d.attn_dropout_fwd = pw_res(MemoryOp::kDropout, as_double(bh * s * s), 2, 1, 2);
    d.attn_dropout_bwd = pw_res(MemoryOp::kDropout, as_double(bh * s * s), 1, 2, 1);
    d.av_fwd = gemm(act_dt_, bh, s, z.head_dim, s);
    d.av_dgrad_p = gemm(act_dt_, bh, s, s, z.head_dim);
    d.av_dgrad_v = gemm(act_dt_, bh, s, z.head_dim, s);
    const pytorch::LinearGemms proj = pytorch::linear_gemms(gemm_dt_, z.tokens, z.attn_out, z.h);
    const pytorch::LinearGemms proj_wgrad =
        pytorch::linear_gemms(config_.wgrad_dtype(), z.tokens, z.attn_out, z.h);
    d.proj_fwd = add(proj.forward);
    d.proj_dgrad = add(proj.grad_input);
    d.proj_wgrad = add(proj_wgrad.grad_weight);
    // Megatron's fused bias-dropout-add (or a plain residual add without dropout).
    // Under autocast the sublayer's output it reads is 16-bit: half an fp32 element.
    PerElement dropout_add = kResidualDropoutAdd;
    PerElement plain_add = kResidualAdd;
    if (res_dt_ != act_dt_) {
      const double narrow = as_double(dtype_bytes(act_dt_)) / as_double(dtype_bytes(res_dt_));
      dropout_add.reads = dropout_add.reads - 1 + narrow;
      plain_add.reads = plain_add.reads - 1 + narrow;
    }
    d.residual_fwd = config_.dropout > 0 ? pw_res(MemoryOp::kDropout, sp_elems, dropout_add)
                                         : pw_res(MemoryOp::kBinary, sp_elems, plain_add);
    d.residual_bwd = config_.dropout > 0 ? pw_res(MemoryOp::kDropout, sp_elems, 1, 2, 1)
                                         : pw_res(MemoryOp::kCopy, sp_elems, 0, 1, 1);
    d.grad_add = pw_res(MemoryOp::kBinary, sp_elems, kResidualGradientAdd);
    const pytorch::LinearGemms fc1 = pytorch::linear_gemms(gemm_dt_, z.tokens, z.h, z.fc1_out);
    const pytorch::LinearGemms fc2 = pytorch::linear_gemms(gemm_dt_, z.tokens, z.ffn, z.h);
    d.fc1_fwd = add(fc1.forward);
    d.fc1_dgrad = add(fc1.grad_input);
    d.fc1_wgrad = add(fc1.grad_weight);
    d.fc2_fwd = add(fc2.forward);
    d.fc2_dgrad = add(fc2.grad_input);
    d.fc2_wgrad =
        add(pytorch::linear_gemms(config_.wgrad_dtype(), z.tokens, z.ffn, z.h).grad_weight);
    d.act_fwd = activation(z.tokens * z.ffn, false);
    d.act_bwd = activation(z.tokens * z.ffn, true);
    if (config_.moe.experts > 0) build_moe_descs();
    if (config_.parallelism.tp_comm_overlap) build_tp_overlap_descs();
    if (config_.layer_kernels == LayerKernelSet::kTorchtitan) {
      d.torchtitan = add_torchtitan_layer_kernels(config_, sizes_, graph_);
      if (config_.moe.experts > 0) {
        d.torchtitan_moe = add_torchtitan_moe_kernels(config_, sizes_, graph_);
      }
    }
    if (config_.lora.enabled()) d.lora = add_lora_kernels(config_, sizes_, graph_);
    d.relative_bias = add_relative_bias_kernels(config_, sizes_, graph_);
    if (config_.qk_norm) {
      // The model's norm over each local query / key head (rows of head_dim), in the
      // activation dtype (TENorm of kv_channels; nn.RMSNorm(head_dim)).
      const MemoryOp qk = norm_memory_op(config_);
      d.q_norm_head_fwd = row(qk, z.tokens * z.heads, z.head_dim, kNormForward, act_dt_);
      d.q_norm_head_bwd = row(qk, z.tokens * z.heads, z.head_dim, kNormBackward, act_dt_);
      d.k_norm_head_fwd = row(qk, z.tokens * z.kv_heads, z.head_dim, kNormForward, act_dt_);
      d.k_norm_head_bwd = row(qk, z.tokens * z.kv_heads, z.head_dim, kNormBackward, act_dt_);
    }
    if (config_.sliding_window > 0) {
      const int64_t w = config_.sliding_window;
      d.attn_window_fwd =
          add(pytorch::attention_kernel(act_dt_, attention_shape(z.s, config_.causal, false, w)));
      d.attn_window_bwd =
          add(pytorch::attention_kernel(act_dt_, attention_shape(z.s, config_.causal, true, w)));
    }
    // Embedding lookup (a gather of rows), learned positions added; the backward scatters the
    // gradients into the table (embedding_dense_backward: sort + index_add).
    d.embed_fwd = pw(MemoryOp::kIndex, as_double(z.tokens * z.h), 0, 1, 1);
    d.embed_bwd = pw(MemoryOp::kIndex, as_double(z.tokens * z.h), 1, 2, 1);
    d.pos_add = pw(MemoryOp::kBinary, as_double(z.tokens * z.h), 1, 2, 1);
    // The output layer stays in bf16 under fp8 training: Megatron-Core's output_layer is its own
    // ColumnParallelLinear, not a Transformer Engine module; torchao's float8 conversion skips
    // `output` (torchtitan's default filter).
    // Its rows: every token, or the masked-LM head's predicted positions (none for a classifier).
    if (z.vocab_rows > 0) {
      const pytorch::LinearGemms head =
          pytorch::linear_gemms(linear_dt(), z.vocab_rows, z.h, z.vocab);
      d.head_fwd = add(head.forward);
      d.head_dgrad = add(head.grad_input);
      d.head_wgrad = add(head.grad_weight);
      // Vocab-parallel cross-entropy on fp32 logits (Megatron casts them): max, exp-sum, loss;
      // the backward writes softmax - one-hot.
      d.xent_fwd = row(MemoryOp::kCrossEntropy, z.vocab_rows, z.vocab, 5, 2, 1, DType::kFp32);
      d.xent_bwd = row(MemoryOp::kCrossEntropy, z.vocab_rows, z.vocab, 2, 1, 1, DType::kFp32);
    }
    if (config_.mtp_layers > 0) {
      d.mtp_cat = pw(MemoryOp::kCat, 2.0 * sp_elems, 0, 1, 1);
      const pytorch::LinearGemms eh = pytorch::linear_gemms(gemm_dt_, z.tokens, 2 * z.h, z.h / z.t);
      d.mtp_proj_fwd = add(eh.forward);
      d.mtp_proj_dgrad = add(eh.grad_input);
      d.mtp_proj_wgrad = add(eh.grad_weight);
    }
    if (config_.torchao_float8()) {
      const int64_t pipeline = config_.parallelism.pipeline;
      d.float8 = add_torchao_float8_kernels(config_, sizes_,
                                            (config_.layers + pipeline - 1) / pipeline, graph_);
    } else if (gemm_dt_ == DType::kFp8) {
      build_fp8_casts();
    }
    if (config_.compile) {
      const CompiledFusionKernels fused = add_compiled_fusion_kernels(config_, sizes_, graph_);
      d.add_norm_fwd = fused.add_norm_fwd;
      d.norm_bwd_add = fused.norm_bwd_add;
    }
    d.task = add_task_head_kernels(config_, sizes_, graph_);
    if (config_.head.eager_loss && z.vocab_rows > 0) {
      // Element counts in fp32 logits; a 16-bit read or write is half an element.
      const double logits = as_double(z.vocab_rows * z.vocab);
      const double half = as_double(dtype_bytes(act_dt_)) / 4.0;
      d.logits_upcast = add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, logits, 0, half, 1));
      d.log_softmax_fwd = row(MemoryOp::kSoftmax, z.vocab_rows, z.vocab, 4, 1, 1, DType::kFp32);
      d.nll_grad = add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, logits, 0, 0, 1));
      d.log_softmax_bwd = row(MemoryOp::kSoftmax, z.vocab_rows, z.vocab, 3, 2, 1, DType::kFp32);
      d.logits_downcast =
          add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, logits, 0, 1, half));
    }
    if (config_.parallelism.context > 1) build_context_comm_descs();
    if (config_.mla.enabled()) build_latent_attention_descs();
    if (config_.autocast) build_autocast_casts();
    if (config_.recompute == Recompute::kOp) {
      d.query_fwd =
          add(pytorch::linear_gemms(gemm_dt_, z.tokens, z.h, z.heads * z.head_dim).forward);
      d.key_value_fwd =
          add(pytorch::linear_gemms(gemm_dt_, z.tokens, z.h, z.kv_heads * z.head_dim).forward);
      d.gate_fwd = add(pytorch::linear_gemms(gemm_dt_, z.tokens, z.h, z.ffn).forward);
    }
  }

  /// The attention kernels of context_comm all_gather and a2a (LayerKernels). Transformer
  /// Engine's KV all-gather (AttnFuncWithCPAndKVAllGather) gives CP rank i the sequence chunks i
  /// and 2 cp - 1 - i of seq / (2 cp) tokens each; under a causal mask chunk k attends to the
  /// k chunks before it and to itself causally (bottom-right), k + 1/2 chunks of keys per query
  /// on average, priced as that many keys without a mask.
  void build_context_comm_descs() {
    LayerKernels& d = kernels_;
    const LayerSizes& z = sizes_;
    const ParallelismConfig& p = config_.parallelism;
    const int64_t cp = p.context;
    if (p.context_comm == ContextComm::kAllGather) {
      const int64_t chunk = config_.seq / (2 * cp);
      const auto keys = [&](int64_t k) {
        return config_.causal
                   ? std::max<int64_t>(1, std::llround(as_double(chunk) * (as_double(k) + 0.5)))
                   : config_.seq;
      };
      for (int64_t i = 0; i < cp; ++i) {
        std::array<KernelDescId, 2> fwd{};
        std::array<KernelDescId, 2> bwd{};
        const std::array<int64_t, 2> chunks = {i, 2 * cp - 1 - i};
        for (size_t j = 0; j < 2; ++j) {
          AttentionShape a = attention_shape(chunk, false, false);
          a.seq_kv = keys(chunks[j]);
          fwd[j] = add(pytorch::attention_kernel(act_dt_, a));
          a.backward = true;
          bwd[j] = add(pytorch::attention_kernel(act_dt_, a));
        }
        d.attn_gather_fwd.push_back(fwd);
        d.attn_gather_bwd.push_back(bwd);
      }
    }
    if (p.context_comm == ContextComm::kAllToAll) {
      AttentionShape a = attention_shape(config_.seq, config_.causal, false);
      a.seq_kv = config_.seq;
      a.heads = z.heads / cp;
      a.kv_heads = std::max<int64_t>(1, z.kv_heads / cp);
      d.attn_a2a_fwd = add(pytorch::attention_kernel(act_dt_, a));
      a.backward = true;
      d.attn_a2a_bwd = add(pytorch::attention_kernel(act_dt_, a));
    }
  }

  /// Latent attention's projections and norms (LayerKernels; latent_attention.h): the down
  /// projections replicated over tensor parallel, the up projections over this rank's heads.
  void build_latent_attention_descs() {
    LayerKernels& d = kernels_;
    const LayerSizes& z = sizes_;
    const LatentAttentionConfig& m = config_.mla;
    const auto linear = [&](int64_t in, int64_t out, KernelDescId& fwd, KernelDescId& dgrad,
                            KernelDescId& wgrad) {
      const pytorch::LinearGemms g = pytorch::linear_gemms(gemm_dt_, z.tokens, in, out);
      fwd = add(g.forward);
      dgrad = add(g.grad_input);
      wgrad = add(g.grad_weight);
    };
    const int64_t q_width = z.heads * m.qk_head_dim();
    if (m.q_lora_rank > 0) {
      linear(z.h, m.q_lora_rank, d.q_down_fwd, d.q_down_dgrad, d.q_down_wgrad);
      d.q_norm_fwd = row(MemoryOp::kRmsNorm, z.tokens, m.q_lora_rank, kNormForward, act_dt_);
      d.q_norm_bwd = row(MemoryOp::kRmsNorm, z.tokens, m.q_lora_rank, kNormBackward, act_dt_);
      linear(m.q_lora_rank, q_width, d.q_up_fwd, d.q_up_dgrad, d.q_up_wgrad);
    } else {
      linear(z.h, q_width, d.q_up_fwd, d.q_up_dgrad, d.q_up_wgrad);
    }
    linear(z.h, m.kv_lora_rank + m.qk_rope_head_dim, d.kv_down_fwd, d.kv_down_dgrad,
           d.kv_down_wgrad);
    d.kv_norm_fwd = row(MemoryOp::kRmsNorm, z.tokens, m.kv_lora_rank, kNormForward, act_dt_);
    d.kv_norm_bwd = row(MemoryOp::kRmsNorm, z.tokens, m.kv_lora_rank, kNormBackward, act_dt_);
    linear(m.kv_lora_rank, z.heads * (m.qk_nope_head_dim + m.v_head_dim), d.kv_up_fwd,
           d.kv_up_dgrad, d.kv_up_wgrad);
    // Rotary on the queries' rope dimensions and the one shared rope key per token.
    const double rope = as_double(z.tokens * (z.heads + 1) * m.qk_rope_head_dim);
    d.rotary_fwd = pw(MemoryOp::kRotary, rope, 3, 2, 1);
    d.rotary_bwd = pw(MemoryOp::kRotary, rope, 3, 2, 1);
  }

  /// torch.autocast's casts (autocast.h) around the four linears of a layer and the output
  /// layer: weights and biases as the parameter count has them on this rank; the QKV and fc1
  /// GEMMs, and the output layer, take the fp32 residual stream / norm output as input.
  void build_autocast_casts() {
    LayerKernels& d = kernels_;
    const LayerSizes& z = sizes_;
    const int64_t bias = config_.bias ? 1 : 0;
    d.qkv_cast = autocast_casts(graph_, act_dt_, (z.h + bias) * z.qkv_out, z.tokens * z.h);
    d.qkv_cast.input_casts = kAutocastQkvInputCasts;
    d.proj_cast = autocast_casts(graph_, act_dt_, z.attn_out * z.h + bias * z.h, 0);
    d.fc1_cast = autocast_casts(graph_, act_dt_, (z.h + bias) * z.fc1_out, z.tokens * z.h);
    d.fc2_cast = autocast_casts(graph_, act_dt_, z.ffn * z.h + bias * z.h, 0);
    if (z.vocab_rows > 0) {
      d.head_cast = autocast_casts(graph_, act_dt_, z.vocab * z.h, z.vocab_rows * z.h);
    }
  }

  /// bf16 for the GEMMs fp8 training keeps in higher precision (output layer, router), else
  /// the GEMM dtype.
  DType linear_dt() const { return gemm_dt_ == DType::kFp8 ? act_dt_ : gemm_dt_; }

  /// Fp8Cast (layer_kernels.h) of an operand of `elements` bf16 values: a cast that reads 2
  /// bytes and writes 1 + 1 per element (MemoryOp::kTranspose: TE's cast_transpose), after an
  /// amax reduction reading 2 bytes per element for current scaling.
  Fp8Cast fp8_cast(int64_t elements) {
    Fp8Cast q;
    q.present = true;
    q.amax_pass = config_.fp8_recipe == Fp8Recipe::kCurrent;
    if (q.amax_pass) q.amax = pw(MemoryOp::kSum, as_double(elements), 1, 1, 0);
    q.cast = pw(MemoryOp::kTranspose, as_double(elements), 2, 1, 1);
    return q;
  }

  void build_fp8_casts() {
    LayerKernels& d = kernels_;
    const LayerSizes& z = sizes_;
    d.qkv_in = fp8_cast(z.tokens * z.h);
    d.proj_in = fp8_cast(z.tokens * z.attn_out);
    d.fc1_in = fp8_cast(z.tokens * z.h);
    d.fc2_in = fp8_cast(z.tokens * z.ffn);
    d.qkv_dy = fp8_cast(z.tokens * z.qkv_out);
    d.proj_dy = fp8_cast(z.tokens * z.h);
    d.fc1_dy = fp8_cast(z.tokens * z.fc1_out);
    d.fc2_dy = fp8_cast(z.tokens * z.h);
    if (config_.moe.experts == 0) return;
    const MoeConfig& m = config_.moe;
    // The experts' inputs gathered over the expert tensor ranks, their widths split
    // (build_moe_descs).
    const int64_t rows = moe_rank_rows(config_, z) * z.et;
    const int64_t e_ffn = m.expert_ffn / z.et;
    const int64_t e_fc1 = gated_activation(config_.activation) ? 2 * e_ffn : e_ffn;
    d.expert_fc1_in = fp8_cast(rows * z.h);
    d.expert_fc2_in = fp8_cast(rows * e_ffn);
    d.expert_fc1_dy = fp8_cast(rows * e_fc1);
    d.expert_fc2_dy = fp8_cast(rows * z.h);
    if (m.shared_experts == 0) return;
    // The shared experts split over the (dense) tensor ranks.
    const int64_t s_ffn = m.shared_experts * (m.expert_ffn / z.t);
    const int64_t s_fc1 = gated_activation(config_.activation) ? 2 * s_ffn : s_ffn;
    d.shared_fc1_in = fp8_cast(z.tokens * z.h);
    d.shared_fc2_in = fp8_cast(z.tokens * s_ffn);
    d.shared_fc1_dy = fp8_cast(z.tokens * s_fc1);
    d.shared_fc2_dy = fp8_cast(z.tokens * z.h);
  }

  KernelDescId activation(int64_t elements, bool backward) {
    if (config_.activation == TransformerActivation::kSwiglu) {
      // silu(a) * b: reads a and b, writes one; the backward reads a, b and the output gradient
      // and writes both input gradients.
      return backward ? pw(MemoryOp::kSwiglu, as_double(elements), 8, 3, 2)
                      : pw(MemoryOp::kSwiglu, as_double(elements), 5, 2, 1);
    }
    if (config_.activation == TransformerActivation::kGeglu) {
      // gelu(a) * b moves SwiGLU's bytes (a and b read, one written; the backward reads a, b
      // and the output gradient and writes both input gradients), so it takes the gated
      // family's price; gelu's tanh costs a few more operations than silu's exp (gelu's 8
      // and 10 plus the gate's multiply).
      return backward ? pw(MemoryOp::kSwiglu, as_double(elements), 12, 3, 2)
                      : pw(MemoryOp::kSwiglu, as_double(elements), 9, 2, 1);
    }
    if (config_.activation == TransformerActivation::kSquaredRelu) {
      // relu(x)^2 reads x, writes one; the backward 2 relu(x) dy reads x and dy, writes dx
      // (Liger-Kernel's relu_squared, whose H100 rows fit the `relu` op).
      return backward ? pw(MemoryOp::kRelu, as_double(elements), 3, 2, 1)
                      : pw(MemoryOp::kRelu, as_double(elements), 2, 1, 1);
    }
    return backward ? pw(MemoryOp::kGelu, as_double(elements), 10, 2, 1)
                    : pw(MemoryOp::kGelu, as_double(elements), 8, 1, 1);
  }

  void build_moe_descs() {
    LayerKernels& d = kernels_;
    const MoeConfig& m = config_.moe;
    const int64_t tk = sizes_.moe_tokens;
    const pytorch::LinearGemms router = pytorch::linear_gemms(linear_dt(), tk, sizes_.h, m.experts);
    d.router_fwd = add(router.forward);
    d.router_dgrad = add(router.grad_input);
    d.router_wgrad = add(router.grad_weight);
    d.topk = row(MemoryOp::kSoftmax, tk, m.experts, 6, 1, 1, DType::kFp32);
    d.topk_bwd = row(MemoryOp::kSoftmax, tk, m.experts, 3, 2, 1, DType::kFp32);
    // The routed rows, or padded to capacity every expert's capacity (capacity_factor x the
    // mean share of the rank's routed rows).
    const double permuted =
        as_double(tk * m.top_k * sizes_.h) * (m.pad_to_capacity ? m.capacity_factor : 1.0);
    d.permute = pw(MemoryOp::kIndex, permuted, 0, 1, 1);
    d.unpermute = pw(MemoryOp::kIndex, permuted, 2, 2, 1);
    // Expert tensor parallel et (tensor, Megatron-Core's default, or 1): after the expert-
    // parallel all-to-all the expert tensor ranks all-gather their tokens
    // (MoEAlltoAllTokenDispatcher's dispatch_postprocess), so each expert runs et x the rank's
    // tokens on 1 / et of its width.
    const int64_t t = sizes_.et;
    const int64_t per_expert = tokens_per_local_expert(config_, sizes_) * t;
    const int64_t local = m.experts / config_.parallelism.expert;
    const int64_t e_ffn = m.expert_ffn / t;
    const int64_t e_fc1 = gated_activation(config_.activation) ? 2 * e_ffn : e_ffn;
    // Grouped GEMM over the local experts (Megatron-Core's GroupedMLP, TE's GroupedLinear): one
    // group per expert, m = tokens per expert. The forward and data-gradient GEMMs tile each
    // expert's own tokens, which the router spreads unevenly (expert_rows); the weight
    // gradients (tokens in K) are priced at the mean count.
    GroupedRows routed = expert_rows(local);
    routed.routed *= t;
    routed.cap *= t;
    d.expert_fc1_fwd = grouped_gemm(local, per_expert, e_fc1, sizes_.h, routed);
    d.expert_fc1_dgrad = grouped_gemm(local, per_expert, sizes_.h, e_fc1, routed);
    d.expert_fc1_wgrad = gemm(gemm_dt_, local, e_fc1, sizes_.h, per_expert);
    d.expert_act_fwd = activation(local * per_expert * e_ffn, false);
    d.expert_act_bwd = activation(local * per_expert * e_ffn, true);
    d.expert_fc2_fwd = grouped_gemm(local, per_expert, sizes_.h, e_ffn, routed);
    d.expert_fc2_dgrad = grouped_gemm(local, per_expert, e_ffn, sizes_.h, routed);
    d.expert_fc2_wgrad = gemm(gemm_dt_, local, sizes_.h, e_ffn, per_expert);
    if (m.shared_experts > 0) {
      // The shared experts: a tensor-parallel MLP (SharedExpertMLP, the dense tensor ranks) on
      // the layer's tokens.
      const int64_t s_ffn = m.shared_experts * (m.expert_ffn / sizes_.t);
      const int64_t s_fc1 = gated_activation(config_.activation) ? 2 * s_ffn : s_ffn;
      const pytorch::LinearGemms f1 =
          pytorch::linear_gemms(gemm_dt_, sizes_.tokens, sizes_.h, s_fc1);
      const pytorch::LinearGemms f2 =
          pytorch::linear_gemms(gemm_dt_, sizes_.tokens, s_ffn, sizes_.h);
      d.shared_fc1_fwd = add(f1.forward);
      d.shared_fc1_dgrad = add(f1.grad_input);
      d.shared_fc1_wgrad = add(f1.grad_weight);
      d.shared_fc2_fwd = add(f2.forward);
      d.shared_fc2_dgrad = add(f2.grad_input);
      d.shared_fc2_wgrad = add(f2.grad_weight);
      d.shared_act_fwd = activation(sizes_.tokens * s_ffn, false);
      d.shared_act_bwd = activation(sizes_.tokens * s_ffn, true);
    }
    if (m.dispatcher == MoeDispatcher::kAllToAll && t > 1) {
      // The experts' outputs go back to their tensor ranks (combine_preprocess).
      d.moe_tp_combine_casts = prob_dtype_casts(t, moe_rank_rows(config_, sizes_));
    }
    const int64_t ep = config_.parallelism.expert;
    if (m.dispatcher == MoeDispatcher::kFlex && m.flex_backend == FlexBackend::kDeepEp) {
      // Per routed entry: its int64 index read (two fp32 words), and the layout's bool row of
      // ep entries per token written (ep / (4 top_k) fp32 words per entry).
      d.flex_layout =
          add(pytorch::pointwise(MemoryOp::kIndex, DType::kFp32, as_double(tk * m.top_k), 0, 2,
                                 as_double(ep) / as_double(4 * m.top_k)));
    }
    if (m.dispatcher == MoeDispatcher::kFlex && m.flex_backend == FlexBackend::kHybridEp) {
      // The scan reads the gathered [ep x tokens, experts] bool routing map once (a quarter of
      // an fp32 word per entry); its maps are a few int32 per token.
      d.flex_layout = add(pytorch::pointwise(MemoryOp::kIndex, DType::kFp32,
                                             as_double(ep * tk * m.experts), 0, 0.25, 0));
    }
    if (m.dispatcher == MoeDispatcher::kAllGather && ep > 1) {
      // The all-gather dispatcher's gathered shape (ep x the rank's tokens): unpermute's zeros
      // (and in the backward permute's), then its sum's reduce-scatter.
      d.moe_gathered_fill = pw(MemoryOp::kCopy, as_double(ep * tk * sizes_.h), 0, 0, 1);
      d.moe_ep_combine_casts = prob_dtype_casts(ep, tk);
    }
  }

  /// ProbDtypeCasts of a group of `members` ranks, `rows` hidden-state rows each.
  ProbDtypeCasts prob_dtype_casts(int64_t members, int64_t rows) {
    const double per_prob = as_double(dtype_bytes(act_dt_)) / as_double(kRouterProbBytes);
    const double rank = as_double(rows * sizes_.h);
    return {add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, as_double(members) * rank, 0,
                                   per_prob, 1)),
            add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, rank, 0, 1, per_prob))};
  }

  const TransformerConfig& config_;
  const LayerSizes& sizes_;
  TaskGraph& graph_;
  DType gemm_dt_;
  DType act_dt_;
  /// The residual stream's, the norms' and the softmax's (fp32 under autocast).
  DType res_dt_;
  LayerKernels kernels_{};
};

}  // namespace

LayerSizes layer_sizes(const TransformerConfig& config) {
  const ParallelismConfig& p = config.parallelism;
  LayerSizes sizes;
  const AttentionSequences attention = config.attention_sequences();
  sizes.b = attention.batch;
  sizes.s = attention.length / p.context;
  sizes.h = config.hidden;
  sizes.t = p.tensor;
  sizes.et = p.expert_tensor_parallel();
  sizes.tokens = config.micro_batch_tokens() / p.context;
  // Unpadded tokens need not divide by tensor: the last rank's shard is padded (Megatron-Core
  // pads THD batches to a multiple of the TP size under sequence parallel).
  sizes.sp_tokens = p.sequence ? (sizes.tokens + sizes.t - 1) / sizes.t : sizes.tokens;
  sizes.heads = config.heads / sizes.t;
  sizes.kv_heads = std::max<int64_t>(1, config.kv_heads / sizes.t);
  sizes.head_dim = config.head_dim();
  sizes.qkv_out = (sizes.heads + 2 * sizes.kv_heads) * sizes.head_dim;
  sizes.attn_out = sizes.heads * sizes.head_dim;
  if (const LatentAttentionConfig& m = config.mla; m.enabled()) {
    sizes.qkv_out = sizes.heads * (m.qk_head_dim() + m.qk_nope_head_dim + m.v_head_dim);
    sizes.attn_out = sizes.heads * m.v_head_dim;
  }
  sizes.ffn = config.ffn / sizes.t;
  sizes.fc1_out = gated_activation(config.activation) ? 2 * sizes.ffn : sizes.ffn;
  const int64_t vocab_multiple = 128 * sizes.t;
  sizes.vocab = (config.vocab + vocab_multiple - 1) / vocab_multiple * vocab_multiple / sizes.t;
  sizes.moe_tokens = sizes.t > 1 ? sizes.tokens / sizes.t : sizes.tokens;
  sizes.vocab_rows = (config.vocabulary_rows() + p.context - 1) / p.context;
  sizes.samples = std::max<int64_t>(1, std::llround(config.samples_per_micro_batch()));
  return sizes;
}

GroupedRows moe_expert_rows(const TransformerConfig& config, const LayerSizes& sizes,
                            int64_t local) {
  // Padded to capacity, every expert computes the same rows.
  if (local <= 1 || config.moe.pad_to_capacity) return {};
  const MoeConfig& m = config.moe;
  const double mean_rows = as_double(sizes.moe_tokens * m.top_k);
  const double received = mean_rows * moe_busiest_rank_load(config);
  GroupedRows rows;
  rows.routed = std::max<int64_t>(1, std::llround(received));
  if (m.capacity_factor > 0.0) {
    rows.cap = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(m.capacity_factor * mean_rows / as_double(local))));
  }
  return rows;
}

int64_t moe_rank_rows(const TransformerConfig& config, const LayerSizes& sizes) {
  return config.moe.experts / config.parallelism.expert * tokens_per_local_expert(config, sizes);
}

int64_t tokens_per_local_expert(const TransformerConfig& config, const LayerSizes& sizes) {
  const MoeConfig& m = config.moe;
  const int64_t local_experts = m.experts / config.parallelism.expert;
  const double received = as_double(sizes.moe_tokens * m.top_k) * moe_busiest_rank_load(config);
  return std::max<int64_t>(1, static_cast<int64_t>(received / as_double(local_experts) + 0.5));
}

LayerKernels add_layer_kernels(const TransformerConfig& config, const LayerSizes& sizes,
                               TaskGraph& graph) {
  return LayerKernelBuilder(config, sizes, graph).build();
}

}  // namespace upsim
