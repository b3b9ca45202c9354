// torchao's float8 training (torchao.float8: Float8Linear, matmul_with_hp_or_float8_args) as
// torchtitan converts its Llama linears (quantize.linear.float8 with filter_fqns ["output"], as
// its llama3 train configs set it: the output layer stays bf16) and torch.compile fuses the
// scaling and casting (torchtitan's docs/float8.md: "required for competitive performance").
// Float8Linear keeps its input and weight in bf16 for the backward and casts every GEMM operand
// on every use: the input and the weight in the forward, the output gradient and the weight in
// the backward, the input again for the weight gradient (float8_linear.py). The kernels of each
// cast are those torchao's own roofline counts (torchao/testing/training/roofline_utils.py,
// get_tensor_memory_traffic_ovhd_s, pytorch/ao at 36027d82d, not fused with the producer),
// bytes per element:
//  - tensorwise: input and output gradient: the amax as a split reduction (reads the bf16
//    tensor: 2; then a tiny final kernel), one cast writing float8 row- and column-major
//    (2 + 1 + 1); weight: the amax, the forward's cast (2 + 1), the backward's (2 + 1);
//  - rowwise: input and output gradient: a cast with per-row scales that also writes the bf16
//    transpose (2 + 1 + 2), then the transpose's cast (2 + 1); weight: the forward's cast
//    (2 + 1), in the backward a bf16 transpose (2 + 2) and its cast (2 + 1); the backward GEMMs'
//    outputs rescaled (Float8Rescale). Its row-scaled GEMMs are priced at the tensorwise fp8
//    rate (the forward's CUTLASS row-scaled kernel runs "within 90-100% of tensor-wise
//    efficiency" for most shapes, pytorch/pytorch#147971; not measured here);
//  - rowwise_with_gw_hp: the weight gradient a bf16 GEMM of the bf16 operands; input and output
//    gradient one cast each (2 + 1); weight the forward's cast (2 + 1), in the backward its row
//    scales reduced to one (a tiny kernel) and the cast (2 + 1).
// Inductor's common-subexpression elimination casts an input that several linears share once
// (wq, wk and wv's; w1 and w3's). Under tensor parallel, tensorwise runs torchao's float8 TP
// (float8_tensor_parallel.py: PrepareFloat8ModuleInput, Float8ColwiseParallel,
// Float8RowwiseParallel, which torchtitan's apply_tp uses for tensorwise): the attention's and
// the MLP's input are cast on their sequence shard and all-gathered in float8, and so are wo's
// and w2's output gradients before the backward's all-gather; the amax of a TP-sharded tensor
// (DTensor) is all-reduced over the TP group before its cast; a gathered float8 operand is
// transposed (1 + 1) for the weight gradient, which _scaled_mm needs column-major. Rowwise
// recipes run bf16 TP (torchtitan: "all distributed communication is done in high precision").
// Left out: the amax all-reduces of rowwise scales across TP shards, and the casts' fusion
// with the producing kernel (torchao's roofline models it as an option).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/task_graph.h"

namespace upsim {

struct LayerSizes;
struct TransformerConfig;

/// The Float8Linears of one torchtitan Llama layer: wq, wk, wv, wo, w1, w3, w2.
inline constexpr int64_t kFloat8LinearsPerLayer = 7;

/// One step of a float8 cast: a kernel, or (kernel 0) the all-reduce of an amax over the TP
/// group (4 bytes).
struct Float8Step {
  std::string_view kernel_name;
  KernelDescId kernel = 0;
};

/// The steps of one GEMM operand's casts: in the forward, in the backward, and for an output
/// gradient that float8 TP all-gathers, after that all-gather (`backward` then runs on the shard
/// before it; an input float8 TP gathers is cast in `forward` before its all-gather).
struct Float8Cast {
  std::vector<Float8Step> forward;
  std::vector<Float8Step> backward;
  std::vector<Float8Step> after_gather;
};

/// The rowwise recipe's rescale of a backward GEMM's output: torchao runs grad_input's and
/// grad_weight's GEMMs (slow accumulation) as cuBLAS's tensorwise kernel with unit scales and
/// multiplies the bf16 output by the row and column scales afterwards (float8_ops.py,
/// addmm_float8_unwrapped: "The rowwise CUTLASS-based kernel is so slow without fast-accum");
/// reads and writes each output element (2 + 2 bytes). 0: none (every other recipe).
struct Float8Rescale {
  KernelDescId dgrad = 0;
  KernelDescId wgrad = 0;
};

/// The casts of one torchtitan layer's Float8Linears (TransformerConfig::torchao_float8 only).
struct TorchaoFloat8Kernels {
  /// Inputs: the attention's (wq, wk, wv), wo's, the MLP's (w1, w3), w2's.
  Float8Cast attn_in, wo_in, ffn_in, w2_in;
  /// Weights (wk and wv share a shape, as w1 and w3 do); under fp8_fsdp_all_gather gathered in
  /// float8, only transposed for the backward.
  Float8Cast wq_weight, wkv_weight, wo_weight, w13_weight, w2_weight;
  /// Output gradients.
  Float8Cast wq_dy, wkv_dy, wo_dy, w13_dy, w2_dy;
  /// The rowwise recipe's rescales of the backward GEMMs' outputs.
  Float8Rescale wq_rescale, wkv_rescale, wo_rescale, w13_rescale, w2_rescale;
  /// FSDP2 float8 all-gather (TransformerConfig::fp8_fsdp_all_gather): the cast of one
  /// layer's weight shard before its all-gather (2 + 1 per element, with the scale precomputed),
  /// and after the optimizer step the amax of every local weight shard (torch._foreach_norm
  /// with ord inf: reads 2 per element); 0 otherwise.
  KernelDescId fsdp_shard_cast = 0;
  KernelDescId fsdp_amax_precompute = 0;
};

/// Adds the cast kernels of `config` (torchao_float8) on a rank with `sizes`; `layers_on_rank`
/// sizes the precomputed amax's read of the local weight shards.
TorchaoFloat8Kernels add_torchao_float8_kernels(const TransformerConfig& config,
                                                const LayerSizes& sizes, int64_t layers_on_rank,
                                                TaskGraph& graph);

/// What torchtitan's per-op checkpointing (op_recompute.h) runs again of a cast's forward
/// `steps`: its save list keeps aten.max's output (torchtitan/models/llama3/infra/parallelize.py,
/// _op_sac_save_list: "always save the result of max"), so the amax reductions and their
/// all-reduce do not rerun, the casts do.
std::vector<Float8Step> float8_recomputed_steps(const std::vector<Float8Step>& steps);

/// Parameter elements of one layer's Float8Linears on one tensor-parallel rank (wq, wk, wv, wo,
/// w1, w3, w2), as FSDP shards them.
int64_t torchao_float8_linear_elements(const LayerSizes& sizes);

}  // namespace upsim
