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

void LayerEmitter::cross_attention_forward(const CrossAttentionKernels& k) {
  const LayerKernels& d = kernels_;
  ops_.op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "q"), k.q_fwd);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "kv"), k.kv_fwd);
  if (config_.attention == AttentionImpl::kFlash) {
    ops_.op("aten::_scaled_dot_product_flash_attention", "flash_fwd_kernel", k.attn_fwd);
  } else {
    ops_.op("aten::baddbmm", pytorch::gemm_kernel_name(act_dt_, "qk"), k.score_fwd);
    ops_.op("scaled_masked_softmax", "softmax_fwd", k.softmax_fwd);
    if (config_.dropout > 0) ops_.op("aten::dropout", "dropout_fwd", k.dropout_fwd);
    ops_.op("aten::bmm", pytorch::gemm_kernel_name(act_dt_, "pv"), k.av_fwd);
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
    ops_.op2("BmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), k.av_dgrad_p,
             pytorch::gemm_kernel_name(act_dt_, "wgrad"), k.av_dgrad_v);
    if (config_.dropout > 0) ops_.op("NativeDropoutBackward0", "dropout_bwd", k.dropout_bwd);
    ops_.op("ScaledMaskedSoftmaxBackward", "softmax_bwd", k.softmax_bwd);
    ops_.op2("BaddbmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), k.score_dgrad_q,
             pytorch::gemm_kernel_name(act_dt_, "wgrad"), k.score_dgrad_k);
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
  ops_.op(norm_op(false), "layer_norm_fwd", kernels_.norm_fwd);
}

void LayerEmitter::final_norm_backward() {
  ops_.op(norm_op(true), "layer_norm_bwd", kernels_.norm_bwd);
}

}  // namespace upsim::transformer_emit
