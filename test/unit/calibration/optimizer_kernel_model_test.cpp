// Hand-computed bytes and launch counts of the optimizer model
// (calibration/optimizer_kernel_model.h): bytes per element of every optimizer and
// implementation, multi_tensor_apply's chunking (tensor and block limits, a tensor carried
// across launches, scalar-list limits, 32 KB kernel arguments) and the time.
#include "calibration/optimizer_kernel_model.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace upsim {
namespace {

OptimizerTraffic traffic(OptimizerKind kind, OptimizerImpl impl, std::vector<int64_t> tensors,
                         DType dtype = DType::kFp32, bool large = false) {
  return optimizer_traffic(OptimizerShape{kind, impl, std::move(tensors), large}, dtype);
}

TEST(OptimizerKernelModel, BytesPerElementOfEachOptimizer) {
  using K = OptimizerKind;
  const auto foreach = OptimizerImpl::kForeach;
  const auto fused = OptimizerImpl::kFused;
  const std::vector<int64_t> one{1000};
  // (read, written) bytes per element, fp32: SGD r w, g; w w.
  OptimizerTraffic t = traffic(K::kSgd, foreach, one);
  EXPECT_EQ(t.launches, 1);
  EXPECT_DOUBLE_EQ(t.bytes_read, 8000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 4000.0);
  // SGD momentum foreach: mul_(buf) r4 w4, add_(buf, g) r8 w4, add_(w, buf) r8 w4.
  t = traffic(K::kSgdMomentum, foreach, one);
  EXPECT_EQ(t.launches, 3);
  EXPECT_DOUBLE_EQ(t.bytes_read, 20000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 12000.0);
  // Adagrad foreach: addcmul r12 w4, sqrt r4 w4, add r4 w4, mul r4 w4, addcdiv r12 w4.
  t = traffic(K::kAdagrad, foreach, one);
  EXPECT_EQ(t.launches, 5);
  EXPECT_DOUBLE_EQ(t.bytes_read, 36000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 20000.0);
  // Adam foreach: lerp r8 w4, mul r4 w4, addcmul r12 w4, sqrt r4 w4, div r4 w4, add r4 w4,
  // addcdiv r12 w4 -> r48 w28; AdamW adds mul_(w) r4 w4.
  t = traffic(K::kAdam, foreach, one);
  EXPECT_EQ(t.launches, 7);
  EXPECT_DOUBLE_EQ(t.bytes_read, 48000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 28000.0);
  t = traffic(K::kAdamW, foreach, one);
  EXPECT_EQ(t.launches, 8);
  EXPECT_DOUBLE_EQ(t.bytes_read, 52000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 32000.0);
  // Fused: one pass. SGD r w, g w w; momentum + buf; Adagrad + sum; Adam r w, g, m, v w w, m, v.
  EXPECT_DOUBLE_EQ(traffic(K::kSgd, fused, one).bytes_read, 8000.0);
  EXPECT_DOUBLE_EQ(traffic(K::kSgdMomentum, fused, one).bytes_written, 8000.0);
  EXPECT_DOUBLE_EQ(traffic(K::kAdagrad, fused, one).bytes_read, 12000.0);
  t = traffic(K::kAdamW, fused, one);
  EXPECT_EQ(t.launches, 1);
  EXPECT_DOUBLE_EQ(t.bytes_read, 16000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 12000.0);
  // bf16 weights and gradients, fp32 state: Adam fused r 2 + 2 + 4 + 4, w 2 + 4 + 4.
  t = traffic(K::kAdam, fused, one, DType::kBf16);
  EXPECT_DOUBLE_EQ(t.bytes_read, 12000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 10000.0);
  EXPECT_THROW(traffic(K::kUnspecified, foreach, one), std::invalid_argument);
  EXPECT_THROW(traffic(K::kSgd, foreach, {-1}), std::invalid_argument);
}

TEST(OptimizerKernelModel, MultiTensorApplyChunking) {
  // 400 one-chunk tensors, 64 per launch: 6 full launches + 16 left.
  EXPECT_EQ(multi_tensor_apply_launches(std::vector<int64_t>(400, 1), 64, 320), 7);
  // One tensor of 700 chunks of 65536: 320 + 320 + 60 blocks.
  EXPECT_EQ(multi_tensor_apply_launches(std::vector<int64_t>{700 * 65536}, 64, 320), 3);
  // 64 tensors of 2 chunks: the tensor limit closes the launch at the 64th's last chunk.
  EXPECT_EQ(multi_tensor_apply_launches(std::vector<int64_t>(64, 65537), 64, 320), 1);
  // 330 chunks, then 63 one-chunk tensors: the blocks fill at 320 with the first tensor carried
  // (it counts again), then 10 + 63 blocks and 64 tensors close the second launch.
  std::vector<int64_t> carried{330 * 65536};
  carried.insert(carried.end(), 63, 1);
  EXPECT_EQ(multi_tensor_apply_launches(carried, 64, 320), 2);
  // Empty tensors launch nothing.
  EXPECT_EQ(multi_tensor_apply_launches(std::vector<int64_t>(5, 0), 64, 320), 0);
}

TEST(OptimizerKernelModel, ScalarListAndLargeKernelArgumentLimits) {
  // Adam foreach over 100 small tensors: lerp (depth 2, 64) 2, mul (1, 110) 1, addcmul (3, 48)
  // 3, sqrt (2, 64) 2, div_ scalar list (1, 96) 2, add (1, 110) 1, addcdiv scalar list (3, 48)
  // 3 = 14 launches; with 32 KB arguments every pass fits in one.
  const std::vector<int64_t> small(100, 10);
  EXPECT_EQ(traffic(OptimizerKind::kAdam, OptimizerImpl::kForeach, small).launches, 14);
  EXPECT_EQ(
      traffic(OptimizerKind::kAdam, OptimizerImpl::kForeach, small, DType::kFp32, true).launches,
      7);
  // Fused Adam (depth 4: 36 tensors) over the same: 3 launches.
  EXPECT_EQ(traffic(OptimizerKind::kAdam, OptimizerImpl::kFused, small).launches, 3);
}

TEST(OptimizerKernelModel, TimeIsBytesOverTheCurve) {
  DeviceProfile d;
  d.name = "test-gpu";
  d.hbm_bandwidth = Bandwidth::gigabytes_per_second(1000.0);
  KernelDesc k;
  k.memory_op = MemoryOp::kOptimizer;
  k.optimizer = OptimizerShape{OptimizerKind::kAdam, OptimizerImpl::kFused, {1000000}};
  // 1e6 x (16 + 12) B / (1000 GB/s x 0.8 x 1.25) = 28 us.
  EXPECT_NEAR(optimizer_seconds(k, d, AchievableFractions{1.0, 0.8}, MemoryCurve{1.25, 0, 1.0}),
              28e-6, 1e-15);
}

}  // namespace
}  // namespace upsim
