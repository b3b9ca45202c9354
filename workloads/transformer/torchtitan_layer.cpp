#include "workloads/transformer/torchtitan_layer.h"

#include <algorithm>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_kernels.h"

namespace upsim {

SiluMulKernels add_silu_mul_kernels(const TransformerConfig& config, double elements,
                                    TaskGraph& graph) {
  const DType act = config.activation_dtype();
  const auto add = [&](double flops, double reads, double writes, MemoryOp op) {
    return graph.add_kernel_desc(pytorch::pointwise(op, act, elements, flops, reads, writes));
  };
  SiluMulKernels k;
  if (config.compile) {
    // Inductor's fused silu(a) * b and its backward: the fused SwiGLU's bytes.
    k.fwd = add(5, 2, 1, MemoryOp::kSwiglu);
    k.bwd = add(8, 3, 2, MemoryOp::kSwiglu);
  } else {
    // silu alone: the fused SwiGLU's operations (5 forward, 8 backward) less the gate's
    // multiply (1 forward, 2 backward), on one input.
    k.fwd = add(4, 1, 1, MemoryOp::kSwiglu);
    k.bwd = add(6, 2, 1, MemoryOp::kSwiglu);
    k.mul = add(1, 2, 1, MemoryOp::kBinary);
  }
  return k;
}

TorchtitanLayerKernels add_torchtitan_layer_kernels(const TransformerConfig& config,
                                                    const LayerSizes& z, TaskGraph& graph) {
  TorchtitanLayerKernels k;
  const auto add = [&](const KernelDesc& d) { return graph.add_kernel_desc(d); };
  const DType gemm_dt = config.dtype;
  const DType act_dt = config.activation_dtype();
  const int64_t kv_out = z.kv_heads * z.head_dim;
  const pytorch::LinearGemms wq = pytorch::linear_gemms(gemm_dt, z.tokens, z.h, z.attn_out);
  const pytorch::LinearGemms wkv = pytorch::linear_gemms(gemm_dt, z.tokens, z.h, kv_out);
  const pytorch::LinearGemms w13 = pytorch::linear_gemms(gemm_dt, z.tokens, z.h, z.ffn);
  k.wq_fwd = add(wq.forward);
  k.wq_dgrad = add(wq.grad_input);
  const DType wgrad_dt = config.wgrad_dtype();
  k.wq_wgrad = add(pytorch::linear_gemms(wgrad_dt, z.tokens, z.h, z.attn_out).grad_weight);
  k.wkv_fwd = add(wkv.forward);
  k.wkv_dgrad = add(wkv.grad_input);
  k.wkv_wgrad = add(pytorch::linear_gemms(wgrad_dt, z.tokens, z.h, kv_out).grad_weight);
  k.w13_fwd = add(w13.forward);
  k.w13_dgrad = add(w13.grad_input);
  k.w13_wgrad = add(pytorch::linear_gemms(wgrad_dt, z.tokens, z.h, z.ffn).grad_weight);
  if (!config.compile && config.position == TransformerPosition::kRotary) {
    // In fp32 units: a cast reads half an element and writes one (up) or the reverse (down),
    // none with fp32 activations; the complex multiply reads and writes one (freqs_cis
    // broadcast over batch and heads), 6 FLOPs per complex pair.
    const bool casts = dtype_bytes(act_dt) == 2;
    const auto rotary = [&](int64_t width, KernelDescId& up, KernelDescId& rotate,
                            KernelDescId& down) {
      const double n = as_double(z.tokens * width);
      if (casts) up = add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, n, 0, 0.5, 1));
      rotate = add(pytorch::pointwise(MemoryOp::kBinary, DType::kFp32, n, 3, 1, 1));
      if (casts) down = add(pytorch::pointwise(MemoryOp::kCopy, DType::kFp32, n, 0, 1, 0.5));
    };
    rotary(z.attn_out, k.q_upcast, k.q_rotate, k.q_downcast);
    rotary(kv_out, k.k_upcast, k.k_rotate, k.k_downcast);
  }
  const double q_elements = as_double(z.tokens * z.attn_out);
  if (z.kv_heads < z.heads) {
    const double kv_share = as_double(z.kv_heads) / as_double(z.heads);
    k.repeat_kv = add(pytorch::pointwise(MemoryOp::kCopy, act_dt, q_elements, 0, kv_share, 1));
    k.repeat_kv_bwd = add(pytorch::pointwise(MemoryOp::kSum, act_dt, q_elements, 1, 1, kv_share));
  }
  k.transpose_copy = add(pytorch::pointwise(MemoryOp::kCopy, act_dt, q_elements, 0, 1, 1));
  const SiluMulKernels silu = add_silu_mul_kernels(config, as_double(z.tokens * z.ffn), graph);
  k.silu_fwd = silu.fwd;
  k.silu_bwd = silu.bwd;
  k.gate_mul = silu.mul;
  k.input_grad_add = add(pytorch::pointwise(MemoryOp::kBinary, config.residual_dtype(),
                                            as_double(z.tokens * z.h), 1, 2, 1));
  if (config.rms_norm_composite) {
    // In fp32 units over the norm's rows x hidden (n) or its rows (per-row scalars); the
    // weight and per-row factors broadcast (read once per row or column: not counted).
    const double rows = as_double(z.sp_tokens);
    const double n = rows * as_double(z.h);
    const auto f32 = [&](MemoryOp op, double elements, double flops, double reads, double writes) {
      return add(pytorch::pointwise(op, DType::kFp32, elements, flops, reads, writes));
    };
    const KernelDescId up = f32(MemoryOp::kCopy, n, 0, 0.5, 1);
    const KernelDescId down = f32(MemoryOp::kCopy, n, 0, 1, 0.5);
    const KernelDescId unary = f32(MemoryOp::kBinary, n, 1, 1, 1);
    const KernelDescId binary = f32(MemoryOp::kBinary, n, 1, 2, 1);
    const KernelDescId per_row = f32(MemoryOp::kBinary, rows, 1, 1, 1);
    const KernelDescId row_sum = add(pytorch::rowwise(MemoryOp::kSum, DType::kFp32, z.sp_tokens,
                                                      z.h, 1, 1, 1.0 / as_double(z.h)));
    // The weight's gradient: grad x normed summed over the rows (one output per column).
    const KernelDescId column_sum = f32(MemoryOp::kSum, as_double(z.h), rows, rows, 1);
    k.rms_norm_fwd = {
        {"aten::_to_copy", "cast_to_fp32", up},     {"aten::pow", "rms_norm_pow", unary},
        {"aten::mean", "rms_norm_mean", row_sum},   {"aten::add_", "rms_norm_eps", per_row},
        {"aten::rsqrt", "rms_norm_rsqrt", per_row}, {"aten::mul", "rms_norm_scale", unary},
        {"aten::mul", "rms_norm_weight", unary},    {"aten::_to_copy", "cast_from_fp32", down}};
    k.rms_norm_bwd = {{"ToCopyBackward0", "cast_to_fp32", up},
                      {"MulBackward0", "rms_norm_weight_bwd", unary},
                      {"MulBackward0", "rms_norm_weight_grad", binary},
                      {"MulBackward0", "rms_norm_weight_grad_sum", column_sum},
                      {"MulBackward0", "rms_norm_scale_bwd", unary},
                      {"MulBackward0", "rms_norm_rsqrt_grad", binary},
                      {"MulBackward0", "rms_norm_rsqrt_grad_sum", row_sum},
                      {"RsqrtBackward0", "rms_norm_rsqrt_bwd", per_row},
                      {"MeanBackward1", "rms_norm_mean_bwd", f32(MemoryOp::kBinary, n, 1, 0, 1)},
                      {"PowBackward0", "rms_norm_pow_bwd", binary},
                      {"AddBackward0", "rms_norm_grad_add", binary},
                      {"ToCopyBackward0", "cast_from_fp32", down}};
  }
  if (config.parallelism.async_tp) {
    // Appended last, so that a run without async TP keeps its descriptions' ids.
    const int64_t shard = z.sp_tokens;
    k.wq_fwd_chunk = add(pytorch::linear_gemms(gemm_dt, shard, z.h, z.attn_out).forward);
    k.wkv_fwd_chunk = add(pytorch::linear_gemms(gemm_dt, shard, z.h, kv_out).forward);
    k.w13_fwd_chunk = add(pytorch::linear_gemms(gemm_dt, shard, z.h, z.ffn).forward);
    const pytorch::LinearGemms wo = pytorch::linear_gemms(gemm_dt, shard, z.attn_out, z.h);
    const pytorch::LinearGemms w2 = pytorch::linear_gemms(gemm_dt, shard, z.ffn, z.h);
    k.wo_fwd_chunk = add(wo.forward);
    k.wo_dgrad_chunk = add(wo.grad_input);
    k.w2_fwd_chunk = add(w2.forward);
    k.w2_dgrad_chunk = add(w2.grad_input);
    const double shard_elements = as_double(shard * z.h);
    k.shard_copy = add(pytorch::pointwise(MemoryOp::kCopy, act_dt, shard_elements, 0, 1, 1));
    // One add per partial after the first, each element read once per partial.
    const double partials = as_double(z.t);
    k.partial_sum =
        add(pytorch::pointwise(MemoryOp::kSum, act_dt, shard_elements, partials - 1, partials, 1));
  }
  return k;
}

int64_t torchtitan_extra_activation_bytes(const TransformerConfig& config) {
  if (config.layer_kernels != LayerKernelSet::kTorchtitan) return 0;
  if (config.recompute == Recompute::kFull) return 0;
  const int64_t t = config.parallelism.tensor;
  const int64_t tokens = config.micro_batch_tokens() / config.parallelism.context;
  int64_t bytes = 0;
  if (config.rms_norm_composite) {
    // Each of the two norms keeps its fp32 upcast input (pow's and the first multiply's) and
    // its fp32 normalised output (the weight multiply's) in place of its input.
    const int64_t split = config.parallelism.sequence ? t : 1;
    const int64_t rows = (tokens + split - 1) / split;
    bytes += 2 * (2 * 4 - dtype_bytes(config.residual_dtype())) * rows * config.hidden;
  }
  const int64_t q_local = config.heads / t;
  const int64_t kv_local = std::max<int64_t>(1, config.kv_heads / t);
  if (kv_local >= q_local) return bytes;
  return bytes + 2 * dtype_bytes(config.activation_dtype()) * tokens * (q_local - kv_local) *
                     config.head_dim();
}

}  // namespace upsim
