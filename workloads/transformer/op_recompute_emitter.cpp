// The recomputation before a layer's backward under torchtitan's per-op checkpointing policy
// (op_recompute.h): the block's forward runs again, every op the policy saved returning its
// saved output (the saved matmuls, the attention, the row-parallel reduce-scatters) and every
// other op running: the norms, the sequence-parallel all-gathers before the column-parallel
// projections, the unsaved matmuls, rotary, the activation and the residual adds; under torchao
// float8 the unsaved matmuls' operand casts, not their amaxes (aten.max is saved).
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"
#include "workloads/transformer/op_recompute.h"

namespace upsim::transformer_emit {

void LayerEmitter::op_recompute(int64_t forward_index) {
  const LayerKernels& d = kernels_;
  const TorchaoFloat8Kernels& f = d.float8;
  const auto saved = [&](BlockMatmul m) { return op_policy_saves(config_, forward_index, m); };
  // torchao float8: an unsaved matmul's operands are cast again (the amax, aten.max, is in the
  // policy's save list, so only the casts rerun).
  const auto recast = [&](const Float8Cast& cast) {
    float8_steps(float8_recomputed_steps(cast.forward), false);
  };
  const auto rerun = [&](BlockMatmul m, std::string_view gemm, KernelDescId kernel,
                         const Float8Cast& weight) {
    if (saved(m)) return;
    recast(weight);
    ops_.op("aten::mm", pytorch::gemm_kernel_name(gemm_dt_, gemm), kernel);
  };
  // The block's input gathered again (its all-gather is not saved), in float8 under float8 TP
  // after its cast; its casts for the unsaved matmuls that read it.
  const auto enter = [&](const Float8Cast& input, bool any_rerun) {
    if (config_.float8_tensor_parallel()) {
      recast(input);
      tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h,
                    "c10d::_allgather_base");
      return;
    }
    tp_enter_forward();
    if (any_rerun) recast(input);
  };
  norm_forward();
  enter(f.attn_in,
        !saved(BlockMatmul::kQuery) || !saved(BlockMatmul::kKey) || !saved(BlockMatmul::kValue));
  rerun(BlockMatmul::kQuery, "wq", d.query_fwd, f.wq_weight);
  rerun(BlockMatmul::kKey, "wk", d.key_value_fwd, f.wkv_weight);
  rerun(BlockMatmul::kValue, "wv", d.key_value_fwd, f.wkv_weight);
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
  if (!saved(BlockMatmul::kOutput)) recast(f.wo_in);
  rerun(BlockMatmul::kOutput, "wo", d.proj_fwd, f.wo_weight);
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_add_norm", d.add_norm_fwd);
  } else {
    ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
    norm_forward();
  }
  const bool gated = gated_activation(config_.activation);
  enter(f.ffn_in, !saved(BlockMatmul::kGate) || (gated && !saved(BlockMatmul::kUp)));
  rerun(BlockMatmul::kGate, "w1", gated ? d.gate_fwd : d.fc1_fwd, f.w13_weight);
  if (gated) rerun(BlockMatmul::kUp, "w3", d.gate_fwd, f.w13_weight);
  if (torchtitan_modules && config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_silu_mul", k.silu_fwd);
  } else if (torchtitan_modules) {
    ops_.op("aten::silu", "silu_fwd", k.silu_fwd);
    ops_.op("aten::mul", "gate_mul", k.gate_mul);
  } else {
    ops_.op(act_op(false), "activation_fwd", d.act_fwd);
  }
  if (!saved(BlockMatmul::kDown)) recast(f.w2_in);
  rerun(BlockMatmul::kDown, "w2", d.fc2_fwd, f.w2_weight);
  ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
}

}  // namespace upsim::transformer_emit
