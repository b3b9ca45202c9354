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
// fused ops; the reduce-scatter of the summed input gradients stays. Under torchao's float8
// (torchao_float8.h) every linear's operands are cast around its GEMMs, the attention's and the
// MLP's inputs (and wo's and w2's output gradients) under float8 TP before their all-gathers.
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

void LayerEmitter::float8_steps(const std::vector<Float8Step>& steps, bool backward) {
  for (const Float8Step& step : steps) {
    if (step.kernel == 0) {
      // The amax of a TP-sharded DTensor: one fp32 value, all-reduced (max) before the cast.
      tp_collective(CollectiveKind::kAllReduce, kFp32Bytes, "_c10d_functional::all_reduce");
    } else {
      ops_.op(backward ? "CompiledFunctionBackward" : "CompiledFunction", step.kernel_name,
              step.kernel);
    }
  }
}

void LayerEmitter::torchtitan_enter_forward(const Float8Cast& input) {
  if (config_.float8_tensor_parallel()) {
    // PrepareFloat8ModuleInput: the shard cast, then one byte per element gathered.
    float8_steps(input.forward, false);
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h, "c10d::_allgather_base");
    return;
  }
  tp_enter_forward();
  float8_steps(input.forward, false);
}

void LayerEmitter::torchtitan_attention_forward(int64_t layer) {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  const TorchaoFloat8Kernels& f = d.float8;
  norm_forward();
  const std::string q = pytorch::gemm_kernel_name(gemm_dt_, "q");
  const std::string kk = pytorch::gemm_kernel_name(gemm_dt_, "k");
  const std::string v = pytorch::gemm_kernel_name(gemm_dt_, "v");
  if (config_.parallelism.async_tp) {
    async_tp_all_gather_matmuls({{q, k.wq_fwd_chunk}, {kk, k.wkv_fwd_chunk}, {v, k.wkv_fwd_chunk}});
  } else {
    replicated_input_linears_forward(
        f.attn_in,
        {{q, k.wq_fwd, f.wq_weight}, {kk, k.wkv_fwd, f.wkv_weight}, {v, k.wkv_fwd, f.wkv_weight}});
  }
  qk_norm_forward();
  torchtitan_rotary(false);
  if (k.repeat_kv != 0) {
    ops_.op("aten::reshape", "repeat_kv_copy", k.repeat_kv);
    ops_.op("aten::reshape", "repeat_kv_copy", k.repeat_kv);
  }
  core_attention_flash(false, config_.windowed_layer(layer));
  ops_.op("aten::contiguous", "transpose_copy", k.transpose_copy);
  torchtitan_row_parallel_forward("proj", k.wo_fwd_chunk, f.wo_in, f.wo_weight, d.proj_fwd,
                                  d.proj_fwd_split);
  if (!config_.compile) ops_.op("aten::add", "residual_fwd", d.residual_fwd);
}

void LayerEmitter::torchtitan_attention_backward(int64_t layer) {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  const TorchaoFloat8Kernels& f = d.float8;
  residual_backward();
  torchtitan_row_parallel_backward({k.wo_dgrad_chunk, d.proj_dgrad, d.proj_dgrad_chunk,
                                    d.proj_wgrad, f.wo_dy, f.wo_weight, f.wo_in, f.wo_rescale});
  // The output gradient arrives transposed; the fused attention's backward copies it
  // contiguous.
  ops_.op("ScaledDotProductFlashAttentionBackward0", "transpose_copy", k.transpose_copy);
  core_attention_flash(true, config_.windowed_layer(layer));
  if (k.repeat_kv_bwd != 0) {
    ops_.op("ExpandBackward0", "repeat_kv_sum", k.repeat_kv_bwd);
    ops_.op("ExpandBackward0", "repeat_kv_sum", k.repeat_kv_bwd);
  }
  torchtitan_rotary(true);
  qk_norm_backward();
  replicated_input_linears_backward(
      {{k.wkv_dgrad, k.wkv_wgrad, f.wkv_dy, f.wkv_weight, f.wkv_rescale},
       {k.wkv_dgrad, k.wkv_wgrad, f.wkv_dy, f.wkv_weight, f.wkv_rescale},
       {k.wq_dgrad, k.wq_wgrad, f.wq_dy, f.wq_weight, f.wq_rescale}},
      f.attn_in);
  norm_backward_and_residual_gradient();
}

void LayerEmitter::torchtitan_mlp_forward() {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  const TorchaoFloat8Kernels& f = d.float8;
  const std::string w1 = pytorch::gemm_kernel_name(gemm_dt_, "w1");
  const std::string w3 = pytorch::gemm_kernel_name(gemm_dt_, "w3");
  if (config_.parallelism.async_tp) {
    async_tp_all_gather_matmuls({{w1, k.w13_fwd_chunk}, {w3, k.w13_fwd_chunk}});
  } else {
    replicated_input_linears_forward(
        f.ffn_in, {{w1, k.w13_fwd, f.w13_weight}, {w3, k.w13_fwd, f.w13_weight}});
  }
  silu_mul_forward(k.silu_fwd, k.gate_mul);
  torchtitan_row_parallel_forward("fc2", k.w2_fwd_chunk, f.w2_in, f.w2_weight, d.fc2_fwd,
                                  d.fc2_fwd_split);
}

void LayerEmitter::torchtitan_mlp_backward() {
  const LayerKernels& d = kernels_;
  const TorchtitanLayerKernels& k = d.torchtitan;
  const TorchaoFloat8Kernels& f = d.float8;
  torchtitan_row_parallel_backward({k.w2_dgrad_chunk, d.fc2_dgrad, d.fc2_dgrad_chunk, d.fc2_wgrad,
                                    f.w2_dy, f.w2_weight, f.w2_in, f.w2_rescale});
  silu_mul_backward(k.silu_bwd, k.gate_mul);
  replicated_input_linears_backward(
      {{k.w13_dgrad, k.w13_wgrad, f.w13_dy, f.w13_weight, f.w13_rescale},
       {k.w13_dgrad, k.w13_wgrad, f.w13_dy, f.w13_weight, f.w13_rescale}},
      f.ffn_in);
}

void LayerEmitter::silu_mul_forward(KernelDescId silu, KernelDescId mul) {
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_silu_mul", silu);
    return;
  }
  ops_.op("aten::silu", "silu_fwd", silu);
  ops_.op("aten::mul", "gate_mul", mul);
}

void LayerEmitter::silu_mul_backward(KernelDescId silu_bwd, KernelDescId mul) {
  if (config_.compile) {
    ops_.op("CompiledFunctionBackward", "triton_fused_silu_mul_bwd", silu_bwd);
    return;
  }
  // The product's gradients to both factors, then silu's backward.
  ops_.op("MulBackward0", "gate_mul", mul);
  ops_.op("MulBackward0", "gate_mul", mul);
  ops_.op("SiluBackward0", "silu_bwd", silu_bwd);
}

void LayerEmitter::torchtitan_row_parallel_forward(std::string_view gemm, KernelDescId async_chunk,
                                                   const Float8Cast& input,
                                                   const Float8Cast& weight, KernelDescId full,
                                                   KernelDescId split) {
  if (config_.parallelism.async_tp) {
    async_tp_matmul_reduce_scatter(pytorch::gemm_kernel_name(gemm_dt_, gemm), async_chunk);
    return;
  }
  float8_steps(input.forward, false);
  float8_steps(weight.forward, false);
  row_parallel_forward(gemm, Fp8Cast{}, full, split);
}

void LayerEmitter::torchtitan_row_parallel_backward(const RowParallelBackward& linear) {
  const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(config_.wgrad_dtype(), "wgrad");
  if (config_.parallelism.async_tp) {
    async_tp_all_gather_matmuls({{dgrad, linear.async_dgrad_chunk}},
                                std::make_pair(std::string_view(wgrad), linear.wgrad));
    return;
  }
  if (config_.float8_tensor_parallel()) {
    // Float8RowwiseParallel: the output gradient cast on its sequence shard, gathered in float8.
    float8_steps(linear.dy.backward, true);
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h, "c10d::_allgather_base");
    float8_steps(linear.dy.after_gather, true);
  } else {
    tp_exit_backward();
    float8_steps(linear.dy.backward, true);
  }
  float8_steps(linear.weight.backward, true);
  float8_steps(linear.input.backward, true);
  ops_.op2("MmBackward0", dgrad, linear.dgrad, wgrad, linear.wgrad);
  float8_rescale(linear.rescale);
}

void LayerEmitter::float8_rescale(const Float8Rescale& rescale) {
  if (rescale.dgrad != 0) {
    ops_.op("CompiledFunctionBackward", "float8_rowwise_rescale", rescale.dgrad);
  }
  if (rescale.wgrad != 0) {
    ops_.op("CompiledFunctionBackward", "float8_rowwise_rescale", rescale.wgrad);
  }
}

void LayerEmitter::replicated_input_linears_forward(
    const Float8Cast& input, std::initializer_list<ReplicatedForward> linears) {
  torchtitan_enter_forward(input);
  for (const ReplicatedForward& linear : linears) {
    float8_steps(linear.weight.forward, false);
    ops_.op("aten::linear", linear.kernel_name, linear.gemm);
  }
}

void LayerEmitter::replicated_input_linears_backward(
    std::initializer_list<ReplicatedLinear> linears, const Float8Cast& input) {
  const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(config_.wgrad_dtype(), "wgrad");
  bool first = true;
  for (const ReplicatedLinear& linear : linears) {
    float8_steps(linear.dy.backward, true);
    float8_steps(linear.weight.backward, true);
    if (first) float8_steps(input.backward, true);
    ops_.op2("MmBackward0", dgrad, linear.dgrad, wgrad, linear.wgrad);
    float8_rescale(linear.rescale);
    if (!first) ops_.op("aten::add", "input_grad_add", kernels_.torchtitan.input_grad_add);
    first = false;
  }
  // The backward of the input's all-gather (or of its replication without SP) is the same
  // reduction a row-parallel output leaves the TP region with.
  tp_exit_forward();
}

}  // namespace upsim::transformer_emit
