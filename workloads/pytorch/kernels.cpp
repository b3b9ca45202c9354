#include "workloads/pytorch/kernels.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace upsim::pytorch {

std::string gemm_kernel_name(DType dtype, std::string_view op) {
  std::string_view family = "sgemm";
  switch (dtype) {
    case DType::kTf32:
      family = "tf32gemm";
      break;
    case DType::kFp16:
      family = "hgemm";
      break;
    case DType::kBf16:
      family = "bf16gemm";
      break;
    case DType::kFp8:
      family = "fp8gemm";
      break;
    case DType::kInt8:
      family = "igemm";
      break;
    case DType::kFp32:
      break;
  }
  return fmt::format("{}/{}", family, op);
}

KernelDesc pointwise(MemoryOp op, DType dtype, double elements, double flops, double reads,
                     double writes) {
  const auto e = static_cast<double>(dtype_bytes(dtype));
  KernelDesc d;
  d.cls = KernelClass::kMemoryBound;
  d.dtype = dtype;
  d.memory_op = op;
  d.flops = flops * elements;
  d.bytes_read = reads * elements * e;
  d.bytes_written = writes * elements * e;
  return d;
}

KernelDesc rowwise(MemoryOp op, DType dtype, int64_t rows, int64_t row_elements, double flops,
                   double reads, double writes) {
  KernelDesc d = pointwise(op, dtype, static_cast<double>(rows) * static_cast<double>(row_elements),
                           flops, reads, writes);
  d.row_elements = row_elements;
  return d;
}

LinearGemms linear_gemms(DType dtype, int64_t tokens, int64_t in, int64_t out) {
  return {gemm_kernel(dtype, 1, tokens, out, in), gemm_kernel(dtype, 1, tokens, in, out),
          gemm_kernel(dtype, 1, out, in, tokens)};
}

KernelDesc attention_kernel(DType dtype, const AttentionShape& shape) {
  KernelDesc d;
  d.cls = KernelClass::kAttention;
  d.dtype = dtype;
  d.attention = shape;
  return d;
}

namespace {

constexpr std::array<std::pair<std::string_view, MemoryOp>, 55> kAtenMemoryOps{{
    {"relu", MemoryOp::kRelu},
    {"threshold", MemoryOp::kRelu},
    {"gelu", MemoryOp::kGelu},
    {"silu", MemoryOp::kSwiglu},
    {"sigmoid", MemoryOp::kSigmoid},
    {"tanh", MemoryOp::kTanh},
    {"softmax", MemoryOp::kSoftmax},
    {"log_softmax", MemoryOp::kSoftmax},
    {"layer_norm", MemoryOp::kLayerNorm},
    {"rms_norm", MemoryOp::kRmsNorm},
    {"fused_rms_norm", MemoryOp::kRmsNorm},
    {"dropout", MemoryOp::kDropout},
    {"feature_dropout", MemoryOp::kDropout},
    {"add", MemoryOp::kBinary},
    {"sub", MemoryOp::kBinary},
    {"rsub", MemoryOp::kBinary},
    {"mul", MemoryOp::kBinary},
    {"div", MemoryOp::kBinary},
    {"addcmul", MemoryOp::kBinary},
    {"addcdiv", MemoryOp::kBinary},
    {"where", MemoryOp::kBinary},
    {"maximum", MemoryOp::kBinary},
    {"minimum", MemoryOp::kBinary},
    {"pow", MemoryOp::kBinary},
    {"binary_cross_entropy", MemoryOp::kBinary},
    {"mse_loss", MemoryOp::kBinary},
    {"sum", MemoryOp::kSum},
    {"mean", MemoryOp::kSum},
    {"norm", MemoryOp::kSum},
    {"amax", MemoryOp::kSum},
    {"amin", MemoryOp::kSum},
    {"copy", MemoryOp::kCopy},
    {"contiguous", MemoryOp::kCopy},
    {"clone", MemoryOp::kCopy},
    {"to", MemoryOp::kCopy},
    {"to_copy", MemoryOp::kCopy},
    {"fill", MemoryOp::kCopy},
    {"zero", MemoryOp::kCopy},
    {"zeros_like", MemoryOp::kCopy},
    {"ones_like", MemoryOp::kCopy},
    {"cat", MemoryOp::kCat},
    {"stack", MemoryOp::kCat},
    {"split", MemoryOp::kCat},
    {"split_with_sizes", MemoryOp::kCat},
    {"transpose", MemoryOp::kTranspose},
    {"permute", MemoryOp::kTranspose},
    {"t", MemoryOp::kTranspose},
    {"index", MemoryOp::kIndex},
    {"index_select", MemoryOp::kIndex},
    {"index_put", MemoryOp::kIndex},
    {"index_add", MemoryOp::kIndex},
    {"gather", MemoryOp::kIndex},
    {"scatter", MemoryOp::kIndex},
    {"scatter_add", MemoryOp::kIndex},
    {"cross_entropy", MemoryOp::kCrossEntropy},
}};

constexpr std::array<std::string_view, 4> kCrossEntropyOps{"cross_entropy_loss", "nll_loss",
                                                           "nll_loss_forward", "nll_loss2d"};

void strip_prefix(std::string_view& s, std::string_view prefix) {
  if (s.starts_with(prefix)) s.remove_prefix(prefix.size());
}

void strip_suffix(std::string_view& s, std::string_view suffix) {
  if (s.ends_with(suffix)) s.remove_suffix(suffix.size());
}

}  // namespace

MemoryOp memory_op_of_aten(std::string_view aten_op) {
  std::string_view name = aten_op;
  strip_prefix(name, "aten::");
  while (name.starts_with('_'))
    name.remove_prefix(1);
  strip_prefix(name, "native_");
  strip_suffix(name, "_backward_data");
  strip_suffix(name, "_backward");
  if (name.size() > 1) strip_suffix(name, "_");
  for (std::string_view ce : kCrossEntropyOps) {
    if (name == ce) return MemoryOp::kCrossEntropy;
  }
  for (const auto& [op, family] : kAtenMemoryOps) {
    if (name == op) return family;
  }
  return MemoryOp::kUnspecified;
}

bool is_rowwise(MemoryOp op) {
  return op == MemoryOp::kSoftmax || op == MemoryOp::kLayerNorm || op == MemoryOp::kRmsNorm ||
         op == MemoryOp::kCrossEntropy;
}

}  // namespace upsim::pytorch
