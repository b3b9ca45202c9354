#include "calibration/optimizer_kernel_model.h"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace upsim {
namespace {

// aten/src/ATen/native/cuda/MultiTensorApply.cuh (pytorch/pytorch 008356c), indexed by depth - 1.
constexpr int64_t kChunkSize = 65536;
constexpr std::array<int64_t, 5> kMaxTensors{110, 64, 48, 36, 30};
constexpr std::array<int64_t, 5> kMaxTensorsScalarList{96, 64, 48, 36, 30};
constexpr int64_t kMaxBlocks = 320;
constexpr std::array<int64_t, 5> kMaxTensorsLarge{770, 448, 336, 252, 210};
constexpr std::array<int64_t, 5> kMaxTensorsScalarListLarge{672, 448, 336, 252, 210};
constexpr int64_t kMaxBlocksLarge = 2240;
constexpr double kStateBytes = 4.0;  // fp32 optimizer state

// OptimizerPass{depth, scalar_list, param read, state read, param written, state written}.
constexpr OptimizerPass kAddParamGrad{2, false, 2, 0, 1, 0};  // add_(w, g)

}  // namespace

std::vector<OptimizerPass> optimizer_passes(OptimizerKind kind, OptimizerImpl impl) {
  if (impl == OptimizerImpl::kFused) {
    switch (kind) {
      case OptimizerKind::kSgd:
        return {{2, false, 2, 0, 1, 0}};
      case OptimizerKind::kSgdMomentum:
        return {{3, false, 2, 1, 1, 1}};
      case OptimizerKind::kAdagrad:
        return {{3, false, 2, 1, 1, 1}};
      case OptimizerKind::kAdam:
      case OptimizerKind::kAdamW:
        return {{4, false, 2, 2, 1, 2}};
      case OptimizerKind::kLamb:
        // NVIDIA/apex apex/optimizers/fused_lamb.py and csrc/multi_tensor_lamb.cu: the global
        // gradient norm (multi_tensor_l2norm over g), stage 1 (reads g, w, m, v; writes m, v
        // and the update u over g), the per-tensor norms of w and of u (multi_tensor_l2norm,
        // per_tensor), stage 2 (reads u and w, writes w scaled by the trust ratio).
        return {{1, false, 1, 0, 0, 0},
                {4, false, 2, 2, 1, 2},
                {1, false, 1, 0, 0, 0},
                {1, false, 1, 0, 0, 0},
                {2, false, 2, 0, 1, 0}};
      case OptimizerKind::kUnspecified:
        break;
    }
  } else {
    const std::vector<OptimizerPass> adam{
        {2, false, 1, 1, 0, 1},  // lerp_(m, g)
        {1, false, 0, 1, 0, 1},  // mul_(v, beta2)
        {3, false, 2, 1, 0, 1},  // addcmul_(v, g, g)
        {2, false, 0, 1, 0, 1},  // den = sqrt(v)
        {1, true, 0, 1, 0, 1},   // div_(den, bias_correction2_sqrt)
        {1, false, 0, 1, 0, 1},  // add_(den, eps)
        {3, true, 1, 2, 1, 0},   // addcdiv_(w, m, den, step_size)
    };
    switch (kind) {
      case OptimizerKind::kSgd:
        return {kAddParamGrad};
      case OptimizerKind::kSgdMomentum:
        return {{1, false, 0, 1, 0, 1},   // mul_(buf, momentum)
                {2, false, 1, 1, 0, 1},   // add_(buf, g)
                {2, false, 1, 1, 1, 0}};  // add_(w, buf)
      case OptimizerKind::kAdagrad:
        return {{3, false, 2, 1, 0, 1},   // addcmul_(sum, g, g)
                {2, false, 0, 1, 0, 1},   // std = sqrt(sum)
                {1, false, 0, 1, 0, 1},   // add_(std, eps)
                {2, true, 1, 0, 1, 0},    // numerator = mul(g, minus_clr)
                {3, false, 2, 1, 1, 0}};  // addcdiv_(w, numerator, std)
      case OptimizerKind::kAdam:
        return adam;
      case OptimizerKind::kAdamW: {
        std::vector<OptimizerPass> out{{1, false, 1, 0, 1, 0}};  // mul_(w, 1 - lr wd)
        out.insert(out.end(), adam.begin(), adam.end());
        return out;
      }
      case OptimizerKind::kLamb:
        throw std::invalid_argument(
            "optimizer model: lamb has only a fused implementation (Apex FusedLAMB)");
      case OptimizerKind::kUnspecified:
        break;
    }
  }
  throw std::invalid_argument("optimizer model: the optimizer kind is unspecified");
}

int64_t multi_tensor_apply_launches(std::span<const int64_t> tensor_elements, int64_t max_tensors,
                                    int64_t max_blocks) {
  if (max_tensors <= 0 || max_blocks <= 0) {
    throw std::invalid_argument("optimizer model: per-launch limits must be positive");
  }
  // Closed form of MultiTensorApply.cuh's per-chunk loop, one step per tensor: a tensor of c
  // chunks joining a launch that holds b < max_blocks blocks fills floor((b + c) / max_blocks)
  // launches by blocks and leaves (b + c) mod max_blocks blocks; a launch closed by blocks on
  // a chunk that is not the tensor's last carries the tensor (one tensor) into the next launch;
  // if the last chunk closes none, the tensor limit is checked with the tensor's last chunk.
  // Equal, launch for launch, to the loop it replaces (optimizer_kernel_model_test.cpp keeps
  // the loop as the reference).
  int64_t launches = 0;
  int64_t blocks = 0;
  int64_t tensors = 0;
  for (const int64_t numel : tensor_elements) {
    if (numel < 0) {
      throw std::invalid_argument(fmt::format("optimizer model: a tensor of {} elements", numel));
    }
    if (numel == 0) continue;
    const int64_t chunks = (numel + kChunkSize - 1) / kChunkSize;
    const int64_t filled = (blocks + chunks) / max_blocks;
    launches += filled;
    blocks = (blocks + chunks) % max_blocks;
    if (blocks == 0) {  // the tensor's last chunk closed a launch
      tensors = 0;
      continue;
    }
    tensors = filled > 0 ? 1 : tensors + 1;
    if (tensors == max_tensors) {
      ++launches;
      blocks = 0;
      tensors = 0;
    }
  }
  return launches + (blocks > 0 ? 1 : 0);
}

OptimizerTraffic optimizer_traffic(const OptimizerShape& shape, DType dtype) {
  double elements = 0.0;
  for (const int64_t numel : shape.tensor_elements) {
    if (numel < 0) {
      throw std::invalid_argument(fmt::format("optimizer model: a tensor of {} elements", numel));
    }
    elements += static_cast<double>(numel);
  }
  const auto e = static_cast<double>(dtype_bytes(dtype));
  OptimizerTraffic out;
  for (const OptimizerPass& pass : optimizer_passes(shape.kind, shape.impl)) {
    const auto d = static_cast<size_t>(pass.depth - 1);
    const bool large = shape.large_kernel_args;
    const int64_t max_tensors =
        pass.scalar_list ? (large ? kMaxTensorsScalarListLarge[d] : kMaxTensorsScalarList[d])
                         : (large ? kMaxTensorsLarge[d] : kMaxTensors[d]);
    out.launches += multi_tensor_apply_launches(shape.tensor_elements, max_tensors,
                                                large ? kMaxBlocksLarge : kMaxBlocks);
    out.bytes_read += elements * (pass.param_lists_read * e + pass.state_lists_read * kStateBytes);
    out.bytes_written +=
        elements * (pass.param_lists_written * e + pass.state_lists_written * kStateBytes);
  }
  return out;
}

double optimizer_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const MemoryCurve& curve) {
  const double hbm = device.hbm_bandwidth.bytes_per_second();
  if (hbm <= 0.0) {
    throw std::invalid_argument(
        fmt::format("optimizer model: device `{}` has no HBM bandwidth", device.name));
  }
  const OptimizerTraffic t = optimizer_traffic(kernel.optimizer, kernel.dtype);
  return (t.bytes_read + t.bytes_written) / (hbm * achievable.memory * curve.bandwidth_scale);
}

}  // namespace upsim
