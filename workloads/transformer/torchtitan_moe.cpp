#include "workloads/transformer/torchtitan_moe.h"

#include <cmath>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/torchtitan_layer.h"

namespace upsim {
namespace {

/// _permute's row alignment: every local expert's group padded to a multiple of this
/// (torchtitan/models/moe/utils.py, TOKEN_GROUP_ALIGN_SIZE_M for bf16).
constexpr int64_t kGroupAlignRows = 8;
/// torch.argsort(stable=True) of the int64 slots: CUB's radix sort of (key, index) pairs, 8-bit
/// digits over the 64-bit keys: 8 passes, each reading and writing a key and a value.
constexpr double kSortPasses = 8.0;
constexpr double kSortPairFp32Units = 4.0;  // an int64 key and an int64 index, in 4-byte units

}  // namespace

TorchtitanMoeKernels add_torchtitan_moe_kernels(const TransformerConfig& config,
                                                const LayerSizes& z, TaskGraph& graph) {
  TorchtitanMoeKernels k;
  const auto add = [&](const KernelDesc& d) { return graph.add_kernel_desc(d); };
  const MoeConfig& m = config.moe;
  const DType act = config.activation_dtype();
  const DType gemm_dt = config.dtype;
  const DType wgrad_dt = config.wgrad_dtype();
  const auto pw = [&](MemoryOp op, DType dt, double elements, double flops, double reads,
                      double writes) {
    return add(pytorch::pointwise(op, dt, elements, flops, reads, writes));
  };
  const int64_t tokens = z.moe_tokens;
  const double h = as_double(z.h);
  const double scores = as_double(tokens * m.experts);
  const double slots = as_double(tokens * m.top_k);
  const double slot_elements = slots * h;
  const double token_elements = as_double(tokens) * h;

  // Router: scores.to(float32), sigmoid, + expert_bias (compiled: one kernel), topk over the
  // experts (values and indices), histc over the slots (an int64 read each), the argsort.
  if (config.compile) {
    k.router_scores = pw(MemoryOp::kSigmoid, DType::kFp32, scores, 5, 0.5, 1);
    k.score_act_bwd = pw(MemoryOp::kSigmoid, DType::kFp32, scores, 3, 2, 0.5);
  } else {
    k.score_cast = pw(MemoryOp::kCopy, DType::kFp32, scores, 0, 0.5, 1);
    k.score_act = pw(MemoryOp::kSigmoid, DType::kFp32, scores, 4, 1, 1);
    k.bias_add = pw(MemoryOp::kBinary, DType::kFp32, scores, 1, 1, 1);
    k.score_act_bwd = pw(MemoryOp::kSigmoid, DType::kFp32, scores, 3, 2, 1);
    k.score_cast_bwd = pw(MemoryOp::kCopy, DType::kFp32, scores, 0, 1, 0.5);
  }
  k.score_scatter = pw(MemoryOp::kIndex, DType::kFp32, scores, 0, 0, 1);
  k.topk = add(pytorch::rowwise(MemoryOp::kSoftmax, DType::kFp32, tokens, m.experts, 2, 1,
                                3.0 * as_double(m.top_k) / as_double(m.experts)));
  k.histc = pw(MemoryOp::kIndex, DType::kFp32, slots, 1, 2, 0);
  k.argsort = pw(MemoryOp::kIndex, DType::kFp32, slots, 0, kSortPasses * kSortPairFp32Units,
                 kSortPasses * kSortPairFp32Units);

  // Dispatch: the slots' gather; the score multiply and its backward.
  k.slot_gather = pw(MemoryOp::kIndex, act, slot_elements, 0, 1, 1);
  k.slot_upcast = pw(MemoryOp::kCopy, DType::kFp32, slot_elements, 0, 0.5, 1);
  k.slot_downcast = pw(MemoryOp::kCopy, DType::kFp32, slot_elements, 0, 1, 0.5);
  if (m.score_before_experts) {
    if (config.compile) {
      k.score_scale = pw(MemoryOp::kBinary, act, slot_elements, 1, 1, 1);
      k.score_scale_bwd = k.score_scale;
      k.score_grad_reduce =
          add(pytorch::rowwise(MemoryOp::kSum, act, tokens * m.top_k, z.h, 2, 2, 1.0 / h));
    } else {
      k.score_mul = pw(MemoryOp::kBinary, DType::kFp32, slot_elements, 1, 1, 1);
      k.score_grad_reduce =
          add(pytorch::rowwise(MemoryOp::kSum, DType::kFp32, tokens * m.top_k, z.h, 2, 2, 1.0 / h));
    }
  }
  k.token_zeros = pw(MemoryOp::kCopy, act, token_elements, 0, 0, 1);
  k.token_scatter_add = pw(MemoryOp::kIndex, act, slot_elements, 1, 2, 1);

  // _permute / _unpermute on the rows the busiest EP rank's experts receive, padded per group.
  const int64_t local = m.experts / config.parallelism.expert;
  const int64_t per_expert = tokens_per_local_expert(config, z);
  const double rows = as_double(local * per_expert);
  const double padded =
      as_double((local * per_expert + local * kGroupAlignRows + kGroupAlignRows - 1) /
                kGroupAlignRows * kGroupAlignRows);
  k.rows_copy = pw(MemoryOp::kCat, act, (rows + 1.0) * h, 0, 1, 1);
  k.rows_gather = pw(MemoryOp::kIndex, act, padded * h, 0, 1, 1);
  k.rows_scatter = pw(MemoryOp::kIndex, act, padded * h, 0, 1, 1);
  k.rows_zeros = pw(MemoryOp::kCopy, act, (rows + 1.0) * h, 0, 0, 1);
  k.rows_scatter_add = pw(MemoryOp::kIndex, act, padded * h, 1, 2, 1);

  // Grouped experts: w1 and w3 [experts, ffn, h], w2 [experts, h, ffn]; each expert's rows as
  // the router spreads them (moe_expert_rows); weight gradients at the mean count.
  const int64_t ffn = m.expert_ffn;
  const GroupedRows routed = moe_expert_rows(config, z, local);
  const auto grouped = [&](int64_t n, int64_t kk) {
    KernelDesc d = gemm_kernel(gemm_dt, local, per_expert, n, kk);
    d.grouped = routed;
    return add(d);
  };
  k.w13_fwd = grouped(ffn, z.h);
  k.w13_dgrad = grouped(z.h, ffn);
  k.w13_wgrad = add(gemm_kernel(wgrad_dt, local, ffn, z.h, per_expert));
  k.w2_fwd = grouped(z.h, ffn);
  k.w2_dgrad = grouped(ffn, z.h);
  k.w2_wgrad = add(gemm_kernel(wgrad_dt, local, z.h, ffn, per_expert));
  const auto silu = [&](double elements, KernelDescId& fwd, KernelDescId& bwd, KernelDescId& mul) {
    const SiluMulKernels kernels = add_silu_mul_kernels(config, elements, graph);
    fwd = kernels.fwd;
    bwd = kernels.bwd;
    mul = kernels.mul;
  };
  silu(rows * as_double(ffn), k.silu_fwd, k.silu_bwd, k.gate_mul);
  k.rows_grad_add = pw(MemoryOp::kBinary, act, rows * h, 1, 2, 1);

  // Combine.
  k.slot_zeros = pw(MemoryOp::kCopy, act, slot_elements, 0, 0, 1);
  k.slot_scatter = pw(MemoryOp::kIndex, act, slot_elements, 0, 1, 1);
  const double top_k = as_double(m.top_k);
  if (m.score_before_experts) {
    k.slot_sum = pw(MemoryOp::kSum, act, token_elements, top_k, top_k, 1);
  } else {
    // routed_output_unsorted.float(), bmm(top_scores [1 x k], slots [k x h]) per token, .to().
    k.combine_upcast = k.slot_upcast;
    k.combine_bmm = pw(MemoryOp::kSum, DType::kFp32, token_elements, 2 * top_k, top_k, 1);
    k.combine_downcast = pw(MemoryOp::kCopy, DType::kFp32, token_elements, 0, 1, 0.5);
    // The bmm's gradients: to the slots (each token's gradient times its k scores), to the
    // scores (each slot's row dotted with its token's gradient).
    k.combine_bmm_bwd = pw(MemoryOp::kBinary, DType::kFp32, slot_elements, 1, 1.0 / top_k, 1);
    k.combine_score_grad = add(pytorch::rowwise(MemoryOp::kSum, DType::kFp32, tokens * m.top_k, z.h,
                                                2, 1 + 1.0 / top_k, 1.0 / h));
  }

  // Shared experts: FeedForward(h, expert_ffn x shared_experts).
  if (m.shared_experts > 0) {
    const int64_t s_ffn = m.shared_experts * ffn;
    const pytorch::LinearGemms w13 = pytorch::linear_gemms(gemm_dt, tokens, z.h, s_ffn);
    const pytorch::LinearGemms w2 = pytorch::linear_gemms(gemm_dt, tokens, s_ffn, z.h);
    k.shared_w13_fwd = add(w13.forward);
    k.shared_w13_dgrad = add(w13.grad_input);
    k.shared_w13_wgrad = add(pytorch::linear_gemms(wgrad_dt, tokens, z.h, s_ffn).grad_weight);
    k.shared_w2_fwd = add(w2.forward);
    k.shared_w2_dgrad = add(w2.grad_input);
    k.shared_w2_wgrad = add(pytorch::linear_gemms(wgrad_dt, tokens, s_ffn, z.h).grad_weight);
    silu(as_double(tokens * s_ffn), k.shared_silu_fwd, k.shared_silu_bwd, k.shared_gate_mul);
  }
  k.token_add = pw(MemoryOp::kBinary, act, token_elements, 1, 2, 1);
  return k;
}

int64_t torchtitan_moe_extra_activation_bytes(const TransformerConfig& config) {
  if (config.layer_kernels != LayerKernelSet::kTorchtitan || config.moe.experts == 0) return 0;
  if (config.recompute == Recompute::kFull) return 0;
  const int64_t slot_bytes = config.compile ? dtype_bytes(config.activation_dtype()) : 4;
  const int64_t tokens = config.micro_batch_tokens() / config.parallelism.context;
  return slot_bytes * tokens * config.moe.top_k * config.hidden;
}

}  // namespace upsim
