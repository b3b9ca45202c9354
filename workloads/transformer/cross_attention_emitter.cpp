// An encoder-decoder model's cross-attention and encoder final norm (encoder_decoder.h), as
// Megatron-LM's ParallelTransformerLayer runs a decoder layer's inter_attention (pre-LN: its
// post_attention_layernorm, then ParallelAttention with attention_type cross_attn, then
// bias-dropout-add): the query projection is a column-parallel linear on the decoder's tokens,
// the key/value projection a column-parallel linear on the encoder's output, the output
// projection row parallel. Without sequence parallel (check_encoder_decoder) a column-parallel
// linear's forward needs no communication and its backward all-reduces its input gradient; the
// row-parallel output projection all-reduces its output.
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

namespace {

UnfusedAttentionKernels unfused_cross_attention(const CrossAttentionKernels& k) {
  return {k.score_fwd,  k.softmax_fwd, k.dropout_fwd, k.av_fwd,        k.av_dgrad_p,
          k.av_dgrad_v, k.dropout_bwd, k.softmax_bwd, k.score_dgrad_q, k.score_dgrad_k};
}

}  // namespace

void LayerEmitter::cross_attention_forward(const CrossAttentionKernels& k) {
  const LayerKernels& d = kernels_;
  norm_forward();
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "q"), k.q_fwd);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "kv"), k.kv_fwd);
  if (config_.attention == AttentionImpl::kFlash) {
    ops_.op("aten::_scaled_dot_product_flash_attention", "flash_fwd_kernel", k.attn_fwd);
  } else {
    unfused_attention(unfused_cross_attention(k), false);
  }
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "proj"), d.proj_fwd);
  tp_exit_forward();
  ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
}

void LayerEmitter::cross_attention_backward(const CrossAttentionKernels& k, bool accumulate) {
  const LayerKernels& d = kernels_;
  residual_backward();
  ops_.op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.proj_dgrad,
           pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.proj_wgrad);
  if (config_.attention == AttentionImpl::kFlash) {
    ops_.op("ScaledDotProductFlashAttentionBackward0", "flash_bwd_kernel", k.attn_bwd);
  } else {
    unfused_attention(unfused_cross_attention(k), true);
  }
  // The key/value projection's input gradient is the encoder output's, summed over the
  // decoder's layers by autograd.
  column_parallel_backward("LinearBackward", k.kv_dgrad, k.kv_wgrad, std::nullopt,
                           k.encoder_tokens);
  if (accumulate) ops_.op("aten::add", "encoder_grad_add", k.encoder_grad_add);
  column_parallel_backward("LinearBackward", k.q_dgrad, k.q_wgrad);
  norm_backward_and_residual_gradient();
}

void LayerEmitter::final_norm_forward() {
  norm_forward();
}

void LayerEmitter::final_norm_backward() {
  norm_backward();
}

}  // namespace upsim::transformer_emit
