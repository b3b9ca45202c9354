// Kernel descriptions of PyTorch ops (ARCHITECTURE.md "workloads/pytorch/"): the one producer of
// KernelDesc values for every workload family and the trace model mode, so an op is priced the
// same way wherever it comes from. Pure functions.
//
// Conventions: `tokens` = rows of the activation matrix (micro-batch x sequence positions);
// element counts are of the op's output unless stated; `reads` / `writes` are elements moved per
// output element, `flops` arithmetic operations per output element (Lin et al., TPDS 2024).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/cost_models.h"

namespace upsim::pytorch {

/// cuBLAS-style kernel family name for a GEMM in `dtype`: "sgemm/<op>", "tf32gemm/<op>",
/// "hgemm/<op>", "bf16gemm/<op>", "fp8gemm/<op>".
std::string gemm_kernel_name(DType dtype, std::string_view op);

/// Elementwise kernel `op` over `elements` output elements of `dtype`.
KernelDesc pointwise(MemoryOp op, DType dtype, double elements, double flops, double reads,
                     double writes);

/// Row-wise kernel (softmax, norms, cross-entropy) over `rows` rows of `row_elements` elements.
KernelDesc rowwise(MemoryOp op, DType dtype, int64_t rows, int64_t row_elements, double flops,
                   double reads, double writes);

/// The three GEMMs of nn.Linear y = x W^T for x [tokens, in], W [out, in] (torch.nn.functional
/// linear and its autograd backward): forward [tokens x in] * [in x out]; grad input
/// [tokens x out] * [out x in]; grad weight [out x tokens] * [tokens x in].
struct LinearGemms {
  KernelDesc forward;
  KernelDesc grad_input;
  KernelDesc grad_weight;
};
LinearGemms linear_gemms(DType dtype, int64_t tokens, int64_t in, int64_t out);

/// A fused scaled-dot-product attention kernel (forward or backward).
KernelDesc attention_kernel(DType dtype, const AttentionShape& shape);

/// The memory-bound kernel family of the PyTorch op `aten_op` ("aten::relu", "aten::add_",
/// "aten::native_layer_norm_backward", ...), so every producer of KernelDesc (the generators
/// and the trace model mode) prices an op on the same curve. The name is taken without the
/// `aten::` prefix, native_ / leading underscores, an in-place trailing underscore and a
/// `_backward` / `_backward_data` suffix (an op and its backward share a family). kUnspecified
/// for ops outside the table (the model's generic curve). Table:
///   relu, threshold (threshold_backward)       -> kRelu
///   gelu                                       -> kGelu
///   silu (SwiGLU's activation)                 -> kSwiglu
///   sigmoid / tanh                             -> kSigmoid / kTanh
///   softmax, log_softmax                       -> kSoftmax
///   layer_norm / rms_norm                      -> kLayerNorm / kRmsNorm
///   dropout, feature_dropout                   -> kDropout
///   add, sub, rsub, mul, div, addcmul, addcdiv, where, maximum, minimum, pow,
///   binary_cross_entropy, mse_loss             -> kBinary
///   sum, mean, norm, amax, amin                -> kSum
///   copy, contiguous, clone, to, to_copy, fill, zero, zeros_like, ones_like -> kCopy
///   cat, stack, split, split_with_sizes        -> kCat
///   transpose, permute, t                      -> kTranspose
///   index, index_select, index_put, index_add, gather, scatter, scatter_add -> kIndex
///   cross_entropy, cross_entropy_loss, nll_loss, nll_loss_forward, nll_loss2d -> kCrossEntropy
MemoryOp memory_op_of_aten(std::string_view aten_op);

/// Whether kernels of `op` work row by row (softmax, norms, cross-entropy): their KernelDesc
/// carries row_elements (see rowwise()).
bool is_rowwise(MemoryOp op);

}  // namespace upsim::pytorch
