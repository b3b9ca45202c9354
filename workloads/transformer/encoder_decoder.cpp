#include "workloads/transformer/encoder_decoder.h"

#include <algorithm>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/model_flops.h"

namespace upsim {

TransformerConfig decoder_stack_config(const TransformerConfig& c) {
  TransformerConfig decoder = c;
  decoder.layers = c.decoder_layers;
  decoder.seq = c.decoder_seq;
  decoder.causal = true;
  decoder.decoder_layers = 0;
  decoder.decoder_seq = 0;
  decoder.sequences = SequenceLengths{};
  return decoder;
}

int64_t first_decoder_stage(const TransformerConfig& c) {
  return c.parallelism.pipeline > 1 ? c.parallelism.encoder_stages : 0;
}

int64_t cross_attention_parameters(const TransformerConfig& c, int64_t tensor) {
  const int64_t h = c.hidden;
  const int64_t q_width = c.heads / tensor * c.head_dim();
  const int64_t kv_width = 2 * std::max<int64_t>(1, c.kv_heads / tensor) * c.head_dim();
  int64_t params = h * q_width + h * kv_width + q_width * h + transformer_norm_parameters(c);
  if (c.bias) params += q_width + kv_width + h;
  return params;
}

int64_t cross_attention_activation_bytes(const TransformerConfig& c) {
  if (c.recompute == Recompute::kFull) return 0;
  const int64_t e = dtype_bytes(c.activation_dtype());
  const int64_t r = dtype_bytes(c.residual_dtype());
  const int64_t mask = c.dropout > 0.0 ? 1 : 0;
  const int64_t t = c.parallelism.tensor;
  const int64_t h = c.hidden;
  const int64_t d = c.head_dim();
  const int64_t q_local = c.heads / t;
  const int64_t kv_local = std::max<int64_t>(1, c.kv_heads / t);
  const int64_t decoder_tokens = c.micro_batch * c.decoder_seq;
  const int64_t encoder_tokens = c.micro_batch * c.seq;
  int64_t bytes = r * decoder_tokens * h;          // norm input
  bytes += e * decoder_tokens * h;                 // query projection input
  bytes += e * decoder_tokens * q_local * d;       // Q
  bytes += 2 * e * encoder_tokens * kv_local * d;  // K, V
  if (c.attention == AttentionImpl::kUnfused) {
    // softmax output, dropout mask and dropout output over decoder x encoder positions
    const int64_t scores = q_local * c.micro_batch * c.decoder_seq * c.seq;
    bytes += scores * (e + mask * (1 + e));
  } else {
    bytes += 4 * q_local * decoder_tokens;  // fused attention's fp32 log-sum-exp
  }
  bytes += e * decoder_tokens * q_local * d;  // output projection input
  bytes += mask * decoder_tokens * h;         // output dropout mask
  return bytes;
}

int64_t encoder_output_bytes(const TransformerConfig& c) {
  return dtype_bytes(c.activation_dtype()) * c.micro_batch * c.seq * c.hidden;
}

double decoder_stack_flops_per_micro_batch(const TransformerConfig& c) {
  TransformerConfig decoder = decoder_stack_config(c);
  decoder.global_batch = decoder.micro_batch;  // one micro-batch
  const double h = static_cast<double>(c.hidden);
  const double q = static_cast<double>(c.heads * c.head_dim());
  const double kv = static_cast<double>(c.kv_heads * c.head_dim());
  const double decoder_tokens = static_cast<double>(c.micro_batch * c.decoder_seq);
  const double encoder_tokens = static_cast<double>(c.micro_batch * c.seq);
  const double cross_per_decoder_token =
      6.0 * h * q + 6.0 * q * h + 12.0 * static_cast<double>(c.seq) * q;
  const double cross_per_encoder_token = 6.0 * h * 2.0 * kv;
  return transformer_model_flops(decoder) +
         static_cast<double>(c.decoder_layers) *
             (cross_per_decoder_token * decoder_tokens + cross_per_encoder_token * encoder_tokens);
}

namespace {

/// Adds the descriptions in build() order (after the decoder layer's own).
class CrossAttentionKernelBuilder {
 public:
  CrossAttentionKernelBuilder(const TransformerConfig& decoder, const LayerSizes& sizes,
                              int64_t encoder_seq, TaskGraph& graph)
      : config_(decoder),
        sizes_(sizes),
        encoder_seq_(encoder_seq),
        graph_(graph),
        gemm_dt_(decoder.dtype),
        act_dt_(decoder.activation_dtype()),
        res_dt_(decoder.residual_dtype()) {}

  CrossAttentionKernels build() {
    CrossAttentionKernels k;
    const LayerSizes& z = sizes_;
    k.encoder_tokens = z.b * encoder_seq_;
    const pytorch::LinearGemms q = pytorch::linear_gemms(gemm_dt_, z.tokens, z.h, z.attn_out);
    k.q_fwd = add(q.forward);
    k.q_dgrad = add(q.grad_input);
    k.q_wgrad = add(q.grad_weight);
    const int64_t kv_out = 2 * z.kv_heads * z.head_dim;
    const pytorch::LinearGemms kv = pytorch::linear_gemms(gemm_dt_, k.encoder_tokens, z.h, kv_out);
    k.kv_fwd = add(kv.forward);
    k.kv_dgrad = add(kv.grad_input);
    k.kv_wgrad = add(kv.grad_weight);
    const int64_t s_q = z.s;
    const int64_t s_kv = encoder_seq_;
    if (config_.attention == AttentionImpl::kFlash) {
      k.attn_fwd = add(pytorch::attention_kernel(act_dt_, shape(false)));
      k.attn_bwd = add(pytorch::attention_kernel(act_dt_, shape(true)));
    } else {
      // Megatron's CoreAttention on decoder queries and encoder keys: baddbmm q k^T, the
      // padding-masked softmax, dropout, bmm p v (the self-attention's unfused path with
      // seq_q != seq_kv; gemm_kernel's batch x (m x k) x (k x n)).
      const int64_t bh = z.b * z.heads;
      const int64_t hd = z.head_dim;
      k.score_fwd = gemm(bh, s_q, s_kv, hd);
      k.score_dgrad_q = gemm(bh, s_q, hd, s_kv);
      k.score_dgrad_k = gemm(bh, s_kv, hd, s_q);
      k.softmax_fwd = add(pytorch::rowwise(MemoryOp::kSoftmax, res_dt_, bh * s_q, s_kv, 5, 1, 1));
      k.softmax_bwd = add(pytorch::rowwise(MemoryOp::kSoftmax, res_dt_, bh * s_q, s_kv, 3, 2, 1));
      const double scores = as_double(bh * s_q * s_kv);
      k.dropout_fwd = add(pytorch::pointwise(MemoryOp::kDropout, res_dt_, scores, 2, 1, 2));
      k.dropout_bwd = add(pytorch::pointwise(MemoryOp::kDropout, res_dt_, scores, 1, 2, 1));
      k.av_fwd = gemm(bh, s_q, hd, s_kv);
      k.av_dgrad_p = gemm(bh, s_q, s_kv, hd);
      k.av_dgrad_v = gemm(bh, s_kv, hd, s_q);
    }
    k.encoder_grad_add = add(
        pytorch::pointwise(MemoryOp::kBinary, act_dt_, as_double(k.encoder_tokens * z.h), 1, 2, 1));
    return k;
  }

 private:
  KernelDescId add(const KernelDesc& d) { return graph_.add_kernel_desc(d); }
  KernelDescId gemm(int64_t batch, int64_t m, int64_t n, int64_t k) {
    return add(gemm_kernel(act_dt_, batch, m, n, k));
  }
  /// Decoder queries over all of the encoder's keys: no causal mask.
  AttentionShape shape(bool backward) const {
    return AttentionShape{
        sizes_.b,        sizes_.heads, sizes_.kv_heads, sizes_.s, encoder_seq_,
        sizes_.head_dim, false,        backward,        true,     config_.attention_kernel};
  }

  const TransformerConfig& config_;
  const LayerSizes& sizes_;
  int64_t encoder_seq_;
  TaskGraph& graph_;
  DType gemm_dt_;
  DType act_dt_;
  DType res_dt_;
};

}  // namespace

CrossAttentionKernels add_cross_attention_kernels(const TransformerConfig& decoder,
                                                  const LayerSizes& decoder_sizes,
                                                  int64_t encoder_seq, TaskGraph& graph) {
  return CrossAttentionKernelBuilder(decoder, decoder_sizes, encoder_seq, graph).build();
}

}  // namespace upsim
