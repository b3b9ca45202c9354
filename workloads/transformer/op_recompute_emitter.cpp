// The recomputation before a layer's backward under torchtitan's per-op checkpointing policy
// (op_recompute.h): the block's forward runs again, every op the policy saved returning its
// saved output (the saved matmuls, the attention, the row-parallel reduce-scatters) and every
// other op running: the norms, the sequence-parallel all-gathers before the column-parallel
// projections, the unsaved matmuls, rotary, the activation and the residual adds.
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"
#include "workloads/transformer/op_recompute.h"

namespace upsim::transformer_emit {

void LayerEmitter::op_recompute(int64_t forward_index) {
  const LayerKernels& d = kernels_;
  const auto rerun = [&](BlockMatmul m, std::string_view gemm, KernelDescId kernel) {
    if (op_policy_saves(config_, forward_index, m)) return;
    ops_.op("aten::mm", pytorch::gemm_kernel_name(gemm_dt_, gemm), kernel);
  };
  ops_.op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
  tp_enter_forward();
  rerun(BlockMatmul::kQuery, "wq", d.query_fwd);
  rerun(BlockMatmul::kKey, "wk", d.key_value_fwd);
  rerun(BlockMatmul::kValue, "wv", d.key_value_fwd);
  const bool torchtitan_modules = config_.layer_kernels == LayerKernelSet::kTorchtitan;
  const TorchtitanLayerKernels& k = d.torchtitan;
  if (torchtitan_modules) {
    // Its eager rotary, repeat_kv's copies and the output's transpose are not saved either.
    torchtitan_rotary(false);
    if (k.repeat_kv != 0) {
      ops_.op("aten::reshape", "repeat_kv_copy", k.repeat_kv);
      ops_.op("aten::reshape", "repeat_kv_copy", k.repeat_kv);
    }
    ops_.op("aten::contiguous", "transpose_copy", k.transpose_copy);
  } else if (config_.position == TransformerPosition::kRotary) {
    ops_.op("apply_rotary_pos_emb", "rotary_fwd", d.rotary_fwd);
  }
  rerun(BlockMatmul::kOutput, "wo", d.proj_fwd);
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_add_norm", d.add_norm_fwd);
  } else {
    ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
    ops_.op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
  }
  tp_enter_forward();
  const bool gated = gated_activation(config_.activation);
  rerun(BlockMatmul::kGate, "w1", gated ? d.gate_fwd : d.fc1_fwd);
  if (gated) rerun(BlockMatmul::kUp, "w3", d.gate_fwd);
  if (torchtitan_modules && config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_silu_mul", k.silu_fwd);
  } else if (torchtitan_modules) {
    ops_.op("aten::silu", "silu_fwd", k.silu_fwd);
    ops_.op("aten::mul", "gate_mul", k.gate_mul);
  } else {
    ops_.op(act_op(false), "activation_fwd", d.act_fwd);
  }
  rerun(BlockMatmul::kDown, "w2", d.fc2_fwd);
  ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
}

}  // namespace upsim::transformer_emit
