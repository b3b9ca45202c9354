// Hand-computed bytes and launch counts of the optimizer model
// (calibration/optimizer_kernel_model.h): bytes per element of every optimizer and
// implementation, multi_tensor_apply's chunking (tensor and block limits, a tensor carried
// across launches, scalar-list limits, 32 KB kernel arguments) and the time; the closed-form
// launch count against the per-chunk loop it replaced, over random tensor lists.
#include "calibration/optimizer_kernel_model.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <utility>
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
  // Apex FusedLAMB: grad norm r4; stage 1 r16 w12; norms of w and u r4 each; stage 2 r8 w4.
  t = traffic(K::kLamb, fused, one);
  EXPECT_EQ(t.launches, 5);
  EXPECT_DOUBLE_EQ(t.bytes_read, 36000.0);
  EXPECT_DOUBLE_EQ(t.bytes_written, 16000.0);
  EXPECT_THROW(traffic(K::kLamb, foreach, one), std::invalid_argument);
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

// The per-chunk loop of MultiTensorApply.cuh that multi_tensor_apply_launches replaced with a
// closed form (one step per tensor): the reference the closed form must equal.
int64_t launches_chunk_by_chunk(const std::vector<int64_t>& tensor_elements, int64_t max_tensors,
                                int64_t max_blocks) {
  constexpr int64_t kChunkSize = 65536;
  int64_t launches = 0;
  int64_t blocks = 0;
  int64_t tensors = 0;
  for (const int64_t numel : tensor_elements) {
    if (numel == 0) continue;
    ++tensors;
    const int64_t chunks = (numel + kChunkSize - 1) / kChunkSize;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      ++blocks;
      const bool last = chunk == chunks - 1;
      if ((tensors == max_tensors && last) || blocks == max_blocks) {
        ++launches;
        blocks = 0;
        tensors = last ? 0 : 1;
      }
    }
  }
  return launches + (blocks > 0 ? 1 : 0);
}

TEST(OptimizerKernelModel, ClosedFormChunkingEqualsTheChunkLoop) {
  constexpr int64_t kChunk = 65536;
  // Every limit pair of the model, plus small limits that make the boundaries frequent.
  const std::vector<std::pair<int64_t, int64_t>> limits{
      {110, 320},  {96, 320},   {64, 320},   {48, 320},   {36, 320},   {30, 320}, {770, 2240},
      {672, 2240}, {448, 2240}, {336, 2240}, {252, 2240}, {210, 2240}, {1, 1},    {1, 3},
      {2, 1},      {2, 2},      {3, 5},      {5, 3},      {7, 16},     {64, 2}};
  std::mt19937_64 rng(20261201);  // deterministic
  // Sizes at chunk boundaries (k chunks, +-1 element) and at launch boundaries (multiples of
  // the block limits in chunks, +-1 chunk and +-1 element), zeros and tiny tensors.
  const std::array<int64_t, 9> chunk_counts{1, 2, 3, 5, 319, 320, 321, 2240, 2241};
  auto draw = [&]() -> int64_t {
    switch (rng() % 6) {
      case 0:
        return 0;
      case 1:
        return static_cast<int64_t>(rng() % 1000) + 1;
      case 2: {
        const int64_t k = chunk_counts[rng() % chunk_counts.size()];
        return k * kChunk + static_cast<int64_t>(rng() % 3) - 1;
      }
      case 3: {
        const int64_t k = static_cast<int64_t>(rng() % 8) + 1;
        const int64_t blocks = (rng() % 2 == 0 ? 320 : 2240) * k;
        return (blocks + static_cast<int64_t>(rng() % 3) - 1) * kChunk +
               static_cast<int64_t>(rng() % 3) - 1;
      }
      case 4:
        return static_cast<int64_t>(rng() % (10 * kChunk)) + 1;
      default:
        return static_cast<int64_t>(rng() % (3000 * kChunk)) + 1;
    }
  };
  int checked = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> tensors(static_cast<size_t>(rng() % 120));
    for (int64_t& numel : tensors)
      numel = draw();
    for (const auto& [max_tensors, max_blocks] : limits) {
      ASSERT_EQ(multi_tensor_apply_launches(tensors, max_tensors, max_blocks),
                launches_chunk_by_chunk(tensors, max_tensors, max_blocks))
          << "trial " << trial << ", limits " << max_tensors << " tensors, " << max_blocks
          << " blocks";
      ++checked;
    }
    // The optimizer's launches are the sum over its passes with the model's limits (depth and
    // scalar-list tables of optimizer_kernel_model.cpp); its bytes are elements x bytes per
    // element, independent of chunking.
    const OptimizerTraffic t = traffic(OptimizerKind::kAdam, OptimizerImpl::kForeach, tensors);
    const int64_t adam = launches_chunk_by_chunk(tensors, 64, 320) +   // lerp_
                         launches_chunk_by_chunk(tensors, 110, 320) +  // mul_
                         launches_chunk_by_chunk(tensors, 48, 320) +   // addcmul_
                         launches_chunk_by_chunk(tensors, 64, 320) +   // sqrt
                         launches_chunk_by_chunk(tensors, 96, 320) +   // div_ (scalar list)
                         launches_chunk_by_chunk(tensors, 110, 320) +  // add_
                         launches_chunk_by_chunk(tensors, 48, 320);    // addcdiv_ (scalar list)
    EXPECT_EQ(t.launches, adam) << "trial " << trial;
    double elements = 0.0;
    for (const int64_t numel : tensors)
      elements += static_cast<double>(numel);
    EXPECT_EQ(t.bytes_read, elements * 48.0) << "trial " << trial;
    EXPECT_EQ(t.bytes_written, elements * 28.0) << "trial " << trial;
    const OptimizerTraffic fused = traffic(OptimizerKind::kAdamW, OptimizerImpl::kFused, tensors,
                                           DType::kBf16, /*large=*/true);
    EXPECT_EQ(fused.launches, launches_chunk_by_chunk(tensors, 252, 2240)) << "trial " << trial;
  }
  EXPECT_EQ(checked, 200 * static_cast<int>(limits.size()));
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
