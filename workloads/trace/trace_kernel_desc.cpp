#include "workloads/trace/trace_kernel_desc.h"

#include <algorithm>
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/trace/kineto_names.h"

namespace upsim {

namespace {

using namespace trace_build;

/// aten::convolution, cudnn_convolution, conv2d, _conv_depthwise2d, convolution_backward, ...:
/// ops no kernel model prices (not "convert", "conversion").
bool is_convolution_op(std::string_view op) {
  for (size_t at = op.find("conv"); at != std::string_view::npos; at = op.find("conv", at + 4)) {
    const std::string_view rest = op.substr(at + 4);
    if (rest.starts_with("olution") || rest.starts_with("_") ||
        (!rest.empty() && rest.front() >= '1' && rest.front() <= '3')) {
      return true;
    }
  }
  return false;
}

struct GemmShape {
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

/// The GEMM of aten::mm / addmm / bmm / baddbmm / linear / matmul over its input shapes; nullopt
/// for any other op or input layout, or a size that is not positive.
std::optional<GemmShape> gemm_shape(std::string_view op, const KinetoOpInputs& in) {
  auto dims = [&](size_t i) -> const std::vector<int64_t>& { return in.dims[i]; };
  const size_t n_in = in.dims.size();
  GemmShape g;
  if ((op == "aten::mm" || op == "aten::matmul") && n_in >= 2 && dims(0).size() == 2 &&
      dims(1).size() == 2) {
    g.m = dims(0)[0];
    g.k = dims(0)[1];
    g.n = dims(1)[1];
  } else if (op == "aten::addmm" && n_in >= 3 && dims(1).size() == 2 && dims(2).size() == 2) {
    g.m = dims(1)[0];
    g.k = dims(1)[1];
    g.n = dims(2)[1];
  } else if ((op == "aten::bmm" || op == "aten::matmul") && n_in >= 2 && dims(0).size() == 3 &&
             dims(1).size() == 3) {
    g.batch = dims(0)[0];
    g.m = dims(0)[1];
    g.k = dims(0)[2];
    g.n = dims(1)[2];
  } else if (op == "aten::baddbmm" && n_in >= 3 && dims(1).size() == 3 && dims(2).size() == 3) {
    g.batch = dims(1)[0];
    g.m = dims(1)[1];
    g.k = dims(1)[2];
    g.n = dims(2)[2];
  } else if (op == "aten::linear" && n_in >= 2 && !dims(0).empty() && dims(1).size() == 2) {
    g.m = 1;
    for (size_t i = 0; i + 1 < dims(0).size(); ++i)
      g.m *= dims(0)[i];
    g.k = dims(0).back();
    g.n = dims(1)[0];
  } else {
    return std::nullopt;
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return std::nullopt;
  return g;
}

}  // namespace

bool is_compiled_region_op(std::string_view op) {
  return op == "CompiledFunction" || op == "CompiledFunctionBackward" ||
         op.ends_with(": CompiledFunctionBackward") || op.starts_with("Torch-Compiled Region") ||
         op.starts_with("## Call CompiledFxGraph") || op.starts_with("CompiledFxGraph");
}

bool is_inductor_kernel(std::string_view kernel) {
  return kernel.starts_with("triton_");
}

bool is_registered_operator(std::string_view op) {
  const size_t colons = op.find("::");
  if (colons == std::string_view::npos || colons == 0) return false;
  if (op.starts_with("torch::autograd::") || op.starts_with("autograd::")) return false;
  return op.find_first_of(" <>#:", colons + 2) == std::string_view::npos &&
         op.substr(0, colons).find_first_of(" <>#") == std::string_view::npos;
}

std::optional<KernelDesc> op_kernel_desc(std::string_view op, std::string_view kernel,
                                         const KinetoOpInputs& in, bool gemm_taken) {
  if (!is_registered_operator(op) || is_inductor_kernel(kernel)) return std::nullopt;
  if (op.find("embedding") != std::string_view::npos) return std::nullopt;
  if (is_convolution_op(op)) return std::nullopt;
  if (in.dims.empty()) return std::nullopt;
  auto elem_bytes = [&](size_t i) {
    const int64_t b = i < in.types.size() ? kineto_type_bytes(in.types[i]) : -1;
    return b > 0 ? b : 4;
  };
  auto elems = [&](size_t i) {
    int64_t n = 1;
    for (int64_t d : in.dims[i])
      n *= std::max<int64_t>(d, 0);
    return n;
  };
  KernelDesc kd;
  const std::string_view type = in.types.empty() ? std::string_view("float") : in.types.front();
  kd.dtype = type == "c10::Half"       ? DType::kFp16
             : type == "c10::BFloat16" ? DType::kBf16
                                       : DType::kFp32;
  const bool gemm_named = contains_nocase(kernel, "gemm") || contains_nocase(kernel, "gemv");
  if (gemm_named && !gemm_taken) {
    // An fp32 GEMM that ran on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32): the
    // kernel's name says so (cuBLAS / CUTLASS: "tf32", Ampere "s1688gemm",
    // CUTLASS "tensorop_s..." single-precision tensor-op kernels: fp32 inputs on tensor cores are
    // TF32's m16n8k8).
    const bool tf32 = kd.dtype == DType::kFp32 &&
                      (contains_nocase(kernel, "tf32") || contains_nocase(kernel, "s1688gemm") ||
                       contains_nocase(kernel, "tensorop_s"));
    const DType dtype = tf32 ? DType::kTf32 : kd.dtype;
    if (const auto g = gemm_shape(op, in)) return gemm_kernel(dtype, g->batch, g->m, g->n, g->k);
  }
  kd.cls = KernelClass::kMemoryBound;
  double largest = 0.0;
  double max_elems = 0.0;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (in.dims[i].empty()) continue;  // a scalar or a non-tensor argument
    const auto bytes = static_cast<double>(elems(i) * elem_bytes(i));
    kd.bytes_read += bytes;
    largest = std::max(largest, bytes);
    max_elems = std::max(max_elems, static_cast<double>(elems(i)));
  }
  kd.bytes_written = largest;
  kd.flops = max_elems;
  // The op's family, as the generators name it (workloads/pytorch/kernels.h), so a traced op is
  // priced on the same curve as a generated one; row-wise ops work on rows of the first input's
  // last dimension.
  kd.memory_op = pytorch::memory_op_of_aten(op);
  if (pytorch::is_rowwise(kd.memory_op) && !in.dims.front().empty()) {
    kd.row_elements = std::max<int64_t>(in.dims.front().back(), 0);
  }
  return kd;
}

}  // namespace upsim
