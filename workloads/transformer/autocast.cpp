#include "workloads/transformer/autocast.h"

#include "workloads/pytorch/kernels.h"

namespace upsim {

AutocastCasts autocast_casts(TaskGraph& graph, DType compute, int64_t weight_elements,
                             int64_t input_elements) {
  // In fp32 elements: a cast down reads one and writes half of one (fp16 / bf16), and back.
  const double narrow = static_cast<double>(dtype_bytes(compute)) / 4.0;
  const auto cast = [&](int64_t elements, double reads, double writes) {
    return graph.add_kernel_desc(pytorch::pointwise(
        MemoryOp::kCopy, DType::kFp32, static_cast<double>(elements), 0, reads, writes));
  };
  AutocastCasts c;
  c.present = true;
  c.weight = cast(weight_elements, 1, narrow);
  c.weight_grad = cast(weight_elements, narrow, 1);
  if (input_elements > 0) {
    c.casts_input = true;
    c.input = cast(input_elements, 1, narrow);
    c.input_grad = cast(input_elements, narrow, 1);
  }
  return c;
}

int64_t autocast_weight_copy_bytes(const TransformerConfig& config, int64_t stage_parameters) {
  if (!config.autocast) return 0;
  return stage_parameters * dtype_bytes(config.activation_dtype());
}

}  // namespace upsim
