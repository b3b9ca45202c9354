#include "workloads/pytorch/kernels.h"

#include <fmt/format.h>

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

}  // namespace upsim::pytorch
