#include "calibration/gemm_kernel_model.h"
#include "calibration/grouped_gemm_rows.h"
#include "test/unit/calibration/test_device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace upsim {
namespace {

// Round numbers so that every expected value is exact: 10 SMs, fp16 100 TFLOP/s (1e13 FLOP/s
// per SM), HBM 1000 GB/s, achievable fractions 1.
using test::test_device;

const AchievableFractions kFull{1.0, 1.0};

KernelDesc gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  KernelDesc kd;
  kd.cls = KernelClass::kGemm;
  kd.dtype = DType::kFp16;
  kd.batch = batch;
  kd.m = m;
  kd.n = n;
  kd.k = k;
  return kd;
}

TEST(GemmKernelModel, FullWaveRunsAtTheAchievableRate) {
  // 256 x 640 / (128 x 128) = 2 x 5 = 10 tiles on 10 SMs: one full wave.
  // compute = 2 x 256 x 640 x 1000 / 1e14 = 3.2768 us;
  // memory = 2 x (256 x 1000 + 1000 x 640 + 256 x 640) / 1e12 = 2.11968 us.
  const GemmEstimate e = estimate_gemm(gemm(256, 640, 1000), test_device(), kFull, GemmParams{});
  EXPECT_EQ(e.tiles, 10);
  EXPECT_EQ(e.waves, 1);
  EXPECT_EQ(e.split_k, 1);
  EXPECT_DOUBLE_EQ(e.wave_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(e.tile_efficiency, 1.0);
  EXPECT_NEAR(e.compute_seconds, 3.2768e-6, 1e-15);
  EXPECT_NEAR(e.memory_seconds, 2.11968e-6, 1e-15);
  EXPECT_DOUBLE_EQ(e.seconds, e.compute_seconds);
}

TEST(GemmKernelModel, OneRowMoreCostsAPartialTileAndASecondWave) {
  // m 257 -> 3 x 5 = 15 tiles -> 2 waves: twice the time of the full wave above.
  const GemmEstimate e = estimate_gemm(gemm(257, 640, 1000), test_device(), kFull, GemmParams{});
  EXPECT_EQ(e.tiles, 15);
  EXPECT_EQ(e.waves, 2);
  EXPECT_DOUBLE_EQ(e.wave_efficiency, 0.75);
  EXPECT_DOUBLE_EQ(e.tile_efficiency, 257.0 * 640.0 / (384.0 * 640.0));
  EXPECT_NEAR(e.compute_seconds, 2 * 3.2768e-6, 1e-15);
}

TEST(GemmKernelModel, KOverheadAndScalesEnterAsDocumented) {
  GemmParams p;
  p.k_overhead = 24.0;
  p.compute_scale = 0.5;
  // (1000 + 24) / 1000 x 3.2768 us / 0.5.
  const GemmEstimate e = estimate_gemm(gemm(256, 640, 1000), test_device(), kFull, p);
  EXPECT_NEAR(e.compute_seconds, 3.2768e-6 * 1.024 / 0.5, 1e-15);
  // The achievable fraction multiplies the scale.
  const GemmEstimate half = estimate_gemm(gemm(256, 640, 1000), test_device(), {0.5, 1.0}, p);
  EXPECT_NEAR(half.compute_seconds, 2 * e.compute_seconds, 1e-15);
}

TEST(GemmKernelModel, SkinnyGemvUsesNarrowTilesAndIsMemoryBound) {
  // n = 1 -> tile_n = 16 (smallest MMA edge): 64 tiles, 7 waves x 2 x 128 x 16 x 8192 x 10 SMs
  // / 1e14 = 23.49 us; bytes 2 x (8192^2 + 2 x 8192) / 1e12 = 134.25 us.
  const GemmEstimate e = estimate_gemm(gemm(8192, 1, 8192), test_device(), kFull, GemmParams{});
  EXPECT_EQ(e.tiles, 64);
  EXPECT_EQ(e.waves, 7);
  EXPECT_NEAR(e.compute_seconds, 7 * 2.0 * 128 * 16 * 8192 * 10 / 1e14, 1e-15);
  EXPECT_NEAR(e.seconds, 2.0 * (8192.0 * 8192 + 2 * 8192) / 1e12, 1e-15);
}

TEST(GemmKernelModel, FewTilesSplitKOverIdleSms) {
  // 128 x 128 x 4096: one tile, split = min(10 / 1, 4096 / 64) = 10 parts of K 409.6 in one wave.
  const GemmEstimate e = estimate_gemm(gemm(128, 128, 4096), test_device(), kFull, GemmParams{});
  EXPECT_EQ(e.tiles, 1);
  EXPECT_EQ(e.split_k, 10);
  EXPECT_EQ(e.waves, 1);
  EXPECT_NEAR(e.compute_seconds, 2.0 * 128 * 128 * 409.6 * 10 / 1e14, 1e-15);
  // K 64 cannot be split below one 64-deep block.
  EXPECT_EQ(estimate_gemm(gemm(128, 128, 64), test_device(), kFull, GemmParams{}).split_k, 1);
}

// fp8 GEMMs read 1-byte operands, write 16-bit outputs and split K in 128-deep blocks (the same
// 128 bytes per K row of a stage as 64 fp16 elements).
TEST(GemmKernelModel, Fp8ReadsOneByteWritesTwoAndSplitsKIn128Blocks) {
  DeviceProfile d = test_device();
  d.peak_flops[static_cast<size_t>(DType::kFp8)] = FlopRate::teraflops(200.0);
  KernelDesc skinny = gemm(8192, 1, 8192);
  skinny.dtype = DType::kFp8;
  // Memory-bound GEMV: 8192^2 + 8192 one-byte inputs, 8192 two-byte outputs.
  EXPECT_NEAR(estimate_gemm(skinny, d, kFull, GemmParams{}).memory_seconds,
              (8192.0 * 8192 + 8192 + 2.0 * 8192) / 1e12, 1e-15);
  KernelDesc one_tile = gemm(128, 128, 4096);
  one_tile.dtype = DType::kFp8;
  // min(10 SMs / 1 tile, 4096 / 128) = 10; K 128 is one block, K 192 one block too.
  EXPECT_EQ(estimate_gemm(one_tile, d, kFull, GemmParams{}).split_k, 10);
  one_tile.k = 192;
  EXPECT_EQ(estimate_gemm(one_tile, d, kFull, GemmParams{}).split_k, 1);
  one_tile.dtype = DType::kFp16;
  EXPECT_EQ(estimate_gemm(one_tile, d, kFull, GemmParams{}).split_k, 3);
}

TEST(GemmKernelModel, BatchMultipliesTiles) {
  const GemmEstimate e = estimate_gemm(gemm(128, 128, 64, 30), test_device(), kFull, GemmParams{});
  EXPECT_EQ(e.tiles, 30);
  EXPECT_EQ(e.waves, 3);
}

// Two rows over two groups: X ~ Binomial(2, 1/2) is 0, 1, 2 with probabilities 1/4, 1/2, 1/4.
TEST(GroupedGemmRows, ExpectationsOverTheRoutingAreExact) {
  const GroupedRowExpectation one_row_tiles = expect_grouped_rows({2, 0}, 2, 1);
  EXPECT_NEAR(one_row_tiles.row_tiles_per_group, 1.0, 1e-12);  // E[X]
  EXPECT_NEAR(one_row_tiles.rows_per_group, 1.0, 1e-12);
  EXPECT_NEAR(one_row_tiles.nonempty_groups, 1.5, 1e-12);  // 2 x (1 - 1/4)
  // Tiles of 2 rows: E[ceil(X / 2)] = 1/2 + 1/4.
  EXPECT_NEAR(expect_grouped_rows({2, 0}, 2, 2).row_tiles_per_group, 0.75, 1e-12);
  // A cap of 1 row: E[min(X, 1)] = 3/4.
  EXPECT_NEAR(expect_grouped_rows({2, 1}, 2, 1).rows_per_group, 0.75, 1e-12);
  // One group holds every row.
  const GroupedRowExpectation single = expect_grouped_rows({300, 0}, 1, 128);
  EXPECT_EQ(single.row_tiles_per_group, 3.0);
  EXPECT_EQ(single.rows_per_group, 300.0);
  EXPECT_THROW(expect_grouped_rows({0, 0}, 2, 1), std::invalid_argument);
  EXPECT_THROW(expect_grouped_rows({2, -1}, 2, 1), std::invalid_argument);
  EXPECT_THROW(expect_grouped_rows({2, 0}, 2, 0), std::invalid_argument);
}

// 4096 rows over 16 groups (256 each on average, sd 15.5) on 128-row tiles: about half the
// groups get more than 256 rows and compute a third row tile, so the grouped GEMM computes
// about 25% more row tiles than 16 groups of exactly 256 rows; the rows themselves average 256.
TEST(GroupedGemmRows, UnevenGroupsPadMoreRowTiles) {
  const GroupedRowExpectation e = expect_grouped_rows({4096, 0}, 16, 128);
  EXPECT_NEAR(e.rows_per_group, 256.0, 1e-9);
  EXPECT_GT(e.row_tiles_per_group, 2.4);
  EXPECT_LT(e.row_tiles_per_group, 2.55);
  EXPECT_NEAR(e.nonempty_groups, 16.0, 1e-9);
  // A capacity of 1.25 x the mean (320 rows) is reached by a few groups only.
  const GroupedRowExpectation capped = expect_grouped_rows({4096, 320}, 16, 128);
  EXPECT_LT(capped.rows_per_group, 256.0);
  EXPECT_GT(capped.rows_per_group, 255.9);
  // Few rows: 64 over 16 groups leave some groups empty; those read no weight.
  const GroupedRowExpectation sparse = expect_grouped_rows({64, 0}, 16, 128);
  EXPECT_NEAR(sparse.nonempty_groups, 16.0 * (1.0 - std::pow(15.0 / 16.0, 64.0)), 1e-9);
  EXPECT_NEAR(sparse.row_tiles_per_group, sparse.nonempty_groups / 16.0, 1e-9);
}

TEST(GemmKernelModel, GroupedRowsPadEachGroupsTilesAndReadOnlyUsedWeights) {
  // 10 groups of 256 rows on 128 x 128 tiles, n = 128: equal groups are 20 tiles, two waves on
  // the 10 SMs; routed rows (sd 15.2) make about 25 tiles, a third wave.
  KernelDesc equal = gemm(256, 128, 4096, 10);
  KernelDesc routed = equal;
  routed.grouped = {2560, 0};
  const GemmEstimate e = estimate_gemm(equal, test_device(), kFull, GemmParams{});
  const GemmEstimate r = estimate_gemm(routed, test_device(), kFull, GemmParams{});
  EXPECT_EQ(e.tiles, 20);
  EXPECT_EQ(e.waves, 2);
  EXPECT_GE(r.tiles, 24);
  EXPECT_LE(r.tiles, 26);
  EXPECT_EQ(r.waves, 3);
  EXPECT_NEAR(r.compute_seconds, 1.5 * e.compute_seconds, 1e-9 * e.compute_seconds);
  EXPECT_LT(r.tile_efficiency, 0.85);
  EXPECT_NEAR(r.memory_seconds, e.memory_seconds, 1e-6 * e.memory_seconds);  // same bytes
  // With many rows per group the routing spread costs little: 16 x 65536 rows.
  KernelDesc big = gemm(65536, 128, 4096, 16);
  KernelDesc big_routed = big;
  big_routed.grouped = {16 * 65536, 0};
  const double ratio = estimate_gemm(big_routed, test_device(), kFull, GemmParams{}).seconds /
                       estimate_gemm(big, test_device(), kFull, GemmParams{}).seconds;
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 1.01);
}

TEST(GemmKernelModel, RejectsMissingUnitsAndBadShapes) {
  KernelDesc bf16 = gemm(128, 128, 128);
  bf16.dtype = DType::kBf16;
  EXPECT_THROW(estimate_gemm(bf16, test_device(), kFull, GemmParams{}), std::invalid_argument);
  EXPECT_THROW(estimate_gemm(gemm(0, 128, 128), test_device(), kFull, GemmParams{}),
               std::invalid_argument);
  GemmParams bad;
  bad.tile_m = 0;
  EXPECT_THROW(check_gemm_params(bad), std::invalid_argument);
}

}  // namespace
}  // namespace upsim
