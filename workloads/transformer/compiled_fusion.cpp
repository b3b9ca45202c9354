#include "workloads/transformer/compiled_fusion.h"

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"

namespace upsim {

CompiledFusionKernels add_compiled_fusion_kernels(const TransformerConfig& config,
                                                  const LayerSizes& sizes, TaskGraph& graph) {
  const MemoryOp norm = norm_memory_op(config);
  const DType dt = config.activation_dtype();
  const PerElement residual = config.dropout > 0 ? kResidualDropoutAdd : kResidualAdd;
  // The residual stream written by the add is not read back by the norm.
  const PerElement add_norm{residual.flops + kNormForward.flops,
                            residual.reads + kNormForward.reads - 1,
                            residual.writes + kNormForward.writes};
  // The norm's input gradient is not written and read back by the add.
  const PerElement norm_add{kNormBackward.flops + kResidualGradientAdd.flops,
                            kNormBackward.reads + kResidualGradientAdd.reads - 1,
                            kNormBackward.writes + kResidualGradientAdd.writes - 1};
  // The add's traffic is the fused kernel's pointwise part: the forward's two inputs and its
  // outputs, the backward's residual gradient and the summed gradient it writes.
  const double element_bytes = as_double(sizes.sp_tokens * sizes.h * dtype_bytes(dt));
  KernelDesc forward = pytorch::rowwise(norm, dt, sizes.sp_tokens, sizes.h, add_norm.flops,
                                        add_norm.reads, add_norm.writes);
  forward.fused_pointwise_read = residual.reads * element_bytes;
  forward.fused_pointwise_written = residual.writes * element_bytes;
  KernelDesc backward = pytorch::rowwise(norm, dt, sizes.sp_tokens, sizes.h, norm_add.flops,
                                         norm_add.reads, norm_add.writes);
  backward.fused_pointwise_read = (kResidualGradientAdd.reads - 1) * element_bytes;
  backward.fused_pointwise_written = kResidualGradientAdd.writes * element_bytes;
  CompiledFusionKernels k;
  k.add_norm_fwd = graph.add_kernel_desc(forward);
  k.norm_bwd_add = graph.add_kernel_desc(backward);
  return k;
}

}  // namespace upsim
