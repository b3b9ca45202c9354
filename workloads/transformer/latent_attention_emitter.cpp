// Latent attention's projections on the rank being emitted (latent_attention.h), forward and
// backward, with their tensor-parallel communication: the down projections run replicated on
// the sequence-parallel all-gathered tokens (gathered again in the backward for their weight
// gradients); the up projections' input gradients are partial sums over the ranks' heads, so
// each latent's gradient is all-reduced before its norm's backward (Megatron's copy to the
// tensor-parallel region); the input gradient that follows is then whole on every rank and goes
// back to the sequence-parallel shards by a split.
#include <string>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::latent_projections_forward() {
  const LayerKernels& d = kernels_;
  const std::string gemm = pytorch::gemm_kernel_name(gemm_dt_, "mla");
  tp_enter_forward();
  fp8_cast(d.qkv_in, false);
  if (config_.mla.q_lora_rank > 0) {
    ops_.op("aten::linear", gemm, d.q_down_fwd);
    ops_.op(norm_op(false), "rms_norm_fwd", d.q_norm_fwd);
  }
  ops_.op("aten::linear", gemm, d.q_up_fwd);
  ops_.op("aten::linear", gemm, d.kv_down_fwd);
  ops_.op(norm_op(false), "rms_norm_fwd", d.kv_norm_fwd);
  ops_.op("aten::linear", gemm, d.kv_up_fwd);
}

void LayerEmitter::latent_up_projections_forward() {
  const LayerKernels& d = kernels_;
  const std::string gemm = pytorch::gemm_kernel_name(gemm_dt_, "mla");
  ops_.op("aten::linear", gemm, d.q_up_fwd);
  ops_.op("aten::linear", gemm, d.kv_up_fwd);
  if (config_.position == TransformerPosition::kRotary) {
    ops_.op("apply_rotary_pos_emb", "rotary_fwd", d.rotary_fwd);
  }
}

void LayerEmitter::latent_projections_backward() {
  const LayerKernels& d = kernels_;
  const LatentAttentionConfig& m = config_.mla;
  const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(gemm_dt_, "wgrad");
  const bool tp = sizes_.t > 1;
  if (tp && config_.parallelism.sequence) {
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h * act_elem_bytes_,
                  "c10d::_allgather_base");
  }
  const auto latent_all_reduce = [&](int64_t width) {
    if (tp) {
      tp_collective(CollectiveKind::kAllReduce, sizes_.tokens * width * act_elem_bytes_,
                    "c10d::all_reduce");
    }
  };
  // Each projection is a Transformer Engine linear: its weight gradient deferred inside a
  // deferring node (moe.delay_wgrad) as any other.
  const auto linear_backward = [&](KernelDescId dgrad_desc, KernelDescId wgrad_desc) {
    if (defer_weight_gradient(wgrad, wgrad_desc)) {
      ops_.op("LinearBackward", dgrad, dgrad_desc);
    } else {
      ops_.op2("LinearBackward", dgrad, dgrad_desc, wgrad, wgrad_desc);
    }
  };
  linear_backward(d.kv_up_dgrad, d.kv_up_wgrad);
  latent_all_reduce(m.kv_lora_rank);
  ops_.op(norm_op(true), "rms_norm_bwd", d.kv_norm_bwd);
  linear_backward(d.kv_down_dgrad, d.kv_down_wgrad);
  linear_backward(d.q_up_dgrad, d.q_up_wgrad);
  if (m.q_lora_rank > 0) {
    latent_all_reduce(m.q_lora_rank);
    ops_.op(norm_op(true), "rms_norm_bwd", d.q_norm_bwd);
    linear_backward(d.q_down_dgrad, d.q_down_wgrad);
  } else {
    // Without a q latent the queries' up projection reads the hidden state: its input gradient
    // is the partial sum, all-reduced as the column-parallel linear's.
    latent_all_reduce(sizes_.h);
  }
}

}  // namespace upsim::transformer_emit
