// Optimizer updates (MemoryOp::kOptimizer kernels with a known OptimizerShape): the bytes each
// PyTorch optimizer moves and the kernels it launches, priced on the memory-bound
// achieved-bandwidth curve of the `optimizer` op (memory_bound_kernel_model.h).
//
// An update is a list of passes over the N = sum(tensor_elements) parameters; each pass is one
// multi_tensor_apply op over `depth` tensor lists that reads and writes whole lists of either
// the parameter dtype e (weights, gradients) or fp32 (optimizer state and the temporaries made
// from it). Passes (torch/optim/{sgd,adagrad,adam}.py, _multi_tensor_* and _fused_*, default
// options: steps on the host, so the step increment launches nothing):
//   foreach  SGD           add_(w, g)                                   depth 2  r 2e    w e
//            SGD momentum  mul_(buf) | add_(buf, g) | add_(w, buf)      1, 2, 2
//            Adagrad       addcmul_(sum, g, g) | std = sqrt(sum) | add_(std, eps) |
//                          num = mul(g, -clr) [scalar list] | addcdiv_(w, num, std)   3, 2, 1, 2, 3
//            Adam          lerp_(m, g) | mul_(v) | addcmul_(v, g, g) | den = sqrt(v) |
//                          div_(den, bc2) [scalar list] | add_(den, eps) |
//                          addcdiv_(w, m, den, step) [scalar list]     2, 1, 3, 2, 1, 1, 3
//            AdamW         mul_(w, 1 - lr wd), then Adam
//   fused    SGD (+momentum) depth 2 (3), Adagrad 3, Adam / AdamW 4: one pass reading w, g and
//            the state, writing w and the state.
// Launches of one pass (aten/src/ATen/native/cuda/MultiTensorApply.cuh, pytorch/pytorch at
// 008356c): each tensor is cut into chunks of kChunkSize = 65536 elements, one block each; a
// kernel is launched when the blocks reach depth_to_max_blocks (320) or the tensors reach
// depth_to_max_tensors ({110, 64, 48, 36, 30} by depth; {96, 64, 48, 36, 30} for scalar-list
// ops) with the tensor's last chunk, and once more for what is left. With 32 KB kernel
// arguments (CUDA >= 12.1): blocks 2240, tensors {770, 448, 336, 252, 210}, scalar lists
// {672, 448, 336, 252, 210}. The fused ops use the tensor (not scalar-list) limits.
//
//   core time = (bytes_read + bytes_written) / (hbm x achievable.memory x bandwidth_scale)
// and the calibrated model adds kernel_overhead per launch (so the achieved bandwidth of the
// update follows the size-dependent curve of calibrated_kernel_cost.h, launch by launch).
//
// Contract: pure; throws std::invalid_argument for OptimizerKind::kUnspecified, a negative
// tensor size, or a device without HBM bandwidth.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "calibration/hardware_profile.h"
#include "calibration/memory_bound_kernel_model.h"
#include "sim/cost_models.h"

namespace upsim {

/// One multi_tensor_apply op of an update: lists of the parameter dtype and of fp32 read and
/// written, over every parameter element.
struct OptimizerPass {
  int depth = 1;
  bool scalar_list = false;
  int param_lists_read = 0;
  int state_lists_read = 0;
  int param_lists_written = 0;
  int state_lists_written = 0;
};

/// The passes of `kind` in `impl` (table above).
std::vector<OptimizerPass> optimizer_passes(OptimizerKind kind, OptimizerImpl impl);

/// Kernels multi_tensor_apply launches for one pass over tensors of `tensor_elements` elements
/// with at most `max_tensors` tensors and `max_blocks` chunks per launch (0 for no tensor).
int64_t multi_tensor_apply_launches(std::span<const int64_t> tensor_elements, int64_t max_tensors,
                                    int64_t max_blocks);

struct OptimizerTraffic {
  int64_t launches = 0;
  double bytes_read = 0.0;
  double bytes_written = 0.0;
};

/// Launches and bytes of an update of parameters in `dtype` (fp32 state).
OptimizerTraffic optimizer_traffic(const OptimizerShape& shape, DType dtype);

/// Core time in seconds (no per-launch time) of a kOptimizer kernel with a known shape.
double optimizer_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const MemoryCurve& curve);

}  // namespace upsim
