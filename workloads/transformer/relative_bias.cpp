#include "workloads/transformer/relative_bias.h"

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_kernels.h"

namespace upsim {

RelativeBiasKernels add_relative_bias_kernels(const TransformerConfig& config, const LayerSizes& z,
                                              TaskGraph& graph) {
  RelativeBiasKernels k;
  if (config.position != TransformerPosition::kRelative) return k;
  const auto add = [&](const KernelDesc& d) { return graph.add_kernel_desc(d); };
  const DType act = config.activation_dtype();
  const double pairs = as_double(z.s * z.s);
  const double bias = as_double(z.heads) * pairs;
  const double scores = as_double(z.b) * bias;
  const double per_sample = 1.0 / as_double(z.b);
  // In fp32 units: an int64 index is two.
  k.bucket = add(pytorch::pointwise(MemoryOp::kBinary, DType::kFp32, pairs, 10, 0, 2));
  k.gather = add(pytorch::pointwise(MemoryOp::kIndex, act, bias, 0, 1, 1));
  k.add = add(pytorch::pointwise(MemoryOp::kBinary, act, scores, 1, 1 + per_sample, 1));
  k.grad_sum = add(pytorch::pointwise(MemoryOp::kSum, act, scores, 1, 1 + per_sample, per_sample));
  k.scatter = add(pytorch::pointwise(MemoryOp::kIndex, act, bias, 1, 1, 0));
  return k;
}

int64_t relative_bias_activation_bytes(const TransformerConfig& config) {
  if (config.position != TransformerPosition::kRelative) return 0;
  return 8 * config.seq * config.seq;
}

}  // namespace upsim
