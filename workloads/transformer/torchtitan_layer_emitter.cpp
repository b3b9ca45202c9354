// A layer's attention block and MLP as torchtitan's Llama modules run them (layer_kernels
// torchtitan; the kernels and their sources: torchtitan_layer.h). Tensor parallel as
// torchtitan's plan for the model applies it (torchtitan/models/llama3/infra/parallelize.py,
// apply_tp): the norms on sequence shards, PrepareModuleInput all-gathering the attention's and
// the MLP's input once (the backward reduce-scatters its gradient), wq / wk / wv and w1 / w3
// ColwiseParallel, wo and w2 RowwiseParallel reduce-scattering their output; without sequence
// parallel the same with all-reduces. DTensor's collectives are waited for where their result
// is used, so none overlaps a GEMM. Under async TP (parallelism.async_tp, async_tp_emitter.cpp)
// the input all-gathers with wq, wk, wv and w1, w3, wo's and w2's reduce-scatter and, in the
// backward, the all-gather of their output gradient with their dgrad run as symmetric memory's
// fused ops; the reduce-scatter of the summed input gradients stays.
#include <string>
#include <tuple>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::torchtitan_rotary(bool backward) {
  if (config_.position != TransformerPosition::kRotary) return;
  const LayerKernels& d = kernels_;
  if (config_.compile) {
    ops_.op(backward ? "CompiledFunctionBackward" : "CompiledFunction", "triton_fused_rotary",
            backward ? d.rotary_bwd : d.rotary_fwd);
    return;
  }
  const TorchtitanLayerKernels& k = d.torchtitan;
  // Forward: x.float(), the complex multiply, type_as; backward: type_as's (up), the multiply
  // by the conjugate, float()'s (down): the same shapes.
  for (const auto& [up, rotate, down] : {std::tuple{k.q_upcast, k.q_rotate, k.q_downcast},
                                         std::tuple{k.k_upcast, k.k_rotate, k.k_downcast}}) {
    if (up != 0) ops_.op(backward ? "ToCopyBackward0" : "aten::_to_copy", "cast_to_fp32", up);
    ops_.op(backward ? "MulBackward0" : "aten::mul", "complex_mul", rotate);
    if (down != 0) ops_.op(backward ? "ToCopyBackward0" : "aten::_to_copy", "cast_from_fp32", down);
  }
}

void LayerEmitter::torchtitan_attention_forward(int64_t layer) {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  ops_.op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
  const std::string q = pytorch::gemm_kernel_name(gemm_dt_, "q");
  const std::string kk = pytorch::gemm_kernel_name(gemm_dt_, "k");
  const std::string v = pytorch::gemm_kernel_name(gemm_dt_, "v");
  if (config_.parallelism.async_tp) {
    async_tp_all_gather_matmuls({{q, k.wq_fwd_chunk}, {kk, k.wkv_fwd_chunk}, {v, k.wkv_fwd_chunk}});
  } else {
    tp_enter_forward();
    ops_.op("aten::linear", q, k.wq_fwd);
    ops_.op("aten::linear", kk, k.wkv_fwd);
    ops_.op("aten::linear", v, k.wkv_fwd);
  }
  torchtitan_rotary(false);
  if (k.repeat_kv != 0) {
    ops_.op("aten::reshape", "repeat_kv_copy", k.repeat_kv);
    ops_.op("aten::reshape", "repeat_kv_copy", k.repeat_kv);
  }
  core_attention_flash(false, config_.windowed_layer(layer));
  ops_.op("aten::contiguous", "transpose_copy", k.transpose_copy);
  torchtitan_row_parallel_forward("proj", k.wo_fwd_chunk, d.proj_in, d.proj_fwd, d.proj_fwd_split);
  if (!config_.compile) ops_.op("aten::add", "residual_fwd", d.residual_fwd);
}

void LayerEmitter::torchtitan_attention_backward(int64_t layer) {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  residual_backward();
  torchtitan_row_parallel_backward(k.wo_dgrad_chunk, d.proj_dy, d.proj_dgrad, d.proj_dgrad_chunk,
                                   d.proj_wgrad);
  // The output gradient arrives transposed; the fused attention's backward copies it
  // contiguous.
  ops_.op("ScaledDotProductFlashAttentionBackward0", "transpose_copy", k.transpose_copy);
  core_attention_flash(true, config_.windowed_layer(layer));
  if (k.repeat_kv_bwd != 0) {
    ops_.op("ExpandBackward0", "repeat_kv_sum", k.repeat_kv_bwd);
    ops_.op("ExpandBackward0", "repeat_kv_sum", k.repeat_kv_bwd);
  }
  torchtitan_rotary(true);
  replicated_input_linears_backward(
      {{k.wkv_dgrad, k.wkv_wgrad}, {k.wkv_dgrad, k.wkv_wgrad}, {k.wq_dgrad, k.wq_wgrad}});
  norm_backward_and_residual_gradient();
}

void LayerEmitter::torchtitan_mlp_forward() {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  const std::string w1 = pytorch::gemm_kernel_name(gemm_dt_, "w1");
  const std::string w3 = pytorch::gemm_kernel_name(gemm_dt_, "w3");
  if (config_.parallelism.async_tp) {
    async_tp_all_gather_matmuls({{w1, k.w13_fwd_chunk}, {w3, k.w13_fwd_chunk}});
  } else {
    tp_enter_forward();
    ops_.op("aten::linear", w1, k.w13_fwd);
    ops_.op("aten::linear", w3, k.w13_fwd);
  }
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_silu_mul", k.silu_fwd);
  } else {
    ops_.op("aten::silu", "silu_fwd", k.silu_fwd);
    ops_.op("aten::mul", "gate_mul", k.gate_mul);
  }
  torchtitan_row_parallel_forward("fc2", k.w2_fwd_chunk, d.fc2_in, d.fc2_fwd, d.fc2_fwd_split);
}

void LayerEmitter::torchtitan_mlp_backward() {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  torchtitan_row_parallel_backward(k.w2_dgrad_chunk, d.fc2_dy, d.fc2_dgrad, d.fc2_dgrad_chunk,
                                   d.fc2_wgrad);
  if (config_.compile) {
    ops_.op("CompiledFunctionBackward", "triton_fused_silu_mul_bwd", k.silu_bwd);
  } else {
    // The product's gradients to both factors, then silu's backward.
    ops_.op("MulBackward0", "gate_mul", k.gate_mul);
    ops_.op("MulBackward0", "gate_mul", k.gate_mul);
    ops_.op("SiluBackward0", "silu_bwd", k.silu_bwd);
  }
  replicated_input_linears_backward({{k.w13_dgrad, k.w13_wgrad}, {k.w13_dgrad, k.w13_wgrad}});
}

void LayerEmitter::torchtitan_row_parallel_forward(std::string_view gemm, KernelDescId async_chunk,
                                                   const Fp8Cast& cast, KernelDescId full,
                                                   KernelDescId split) {
  if (config_.parallelism.async_tp) {
    async_tp_matmul_reduce_scatter(pytorch::gemm_kernel_name(gemm_dt_, gemm), async_chunk);
    return;
  }
  row_parallel_forward(gemm, cast, full, split);
}

void LayerEmitter::torchtitan_row_parallel_backward(KernelDescId async_dgrad_chunk,
                                                    const Fp8Cast& dy, KernelDescId dgrad,
                                                    KernelDescId dgrad_chunk, KernelDescId wgrad) {
  if (config_.parallelism.async_tp) {
    async_tp_all_gather_matmuls(
        {{pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), async_dgrad_chunk}},
        std::make_pair(std::string_view(pytorch::gemm_kernel_name(gemm_dt_, "wgrad")), wgrad));
    return;
  }
  row_parallel_backward(dy, dgrad, dgrad_chunk, wgrad);
}

void LayerEmitter::replicated_input_linears_backward(
    std::initializer_list<std::pair<KernelDescId, KernelDescId>> linears) {
  const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(gemm_dt_, "wgrad");
  bool first = true;
  for (const auto& [input_grad, weight_grad] : linears) {
    ops_.op2("MmBackward0", dgrad, input_grad, wgrad, weight_grad);
    if (!first) ops_.op("aten::add", "input_grad_add", kernels_.torchtitan.input_grad_add);
    first = false;
  }
  // The backward of the input's all-gather (or of its replication without SP) is the same
  // reduction a row-parallel output leaves the TP region with.
  tp_exit_forward();
}

}  // namespace upsim::transformer_emit
