// Hand-computed cases of the embedding-bag model (calibration/embedding_bag_model.h): all
// indices distinct, one hot row, uniformly random indices, a cache too small for the distinct
// rows, the backward's traffic per optimizer, the op's kernels and latency, and the fit of the
// latency terms on synthetic kernels.
#include "calibration/embedding_bag_model.h"
#include "test/unit/calibration/test_device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace upsim {
namespace {

// 10 SMs, L2 10 MiB at 2000 GB/s, HBM 1000 GB/s; achievable fractions 1.
using test::test_device;

const AchievableFractions kFull{1.0, 1.0};

std::vector<double> histogram_with(size_t bin) {
  std::vector<double> h(kReuseHistogramBins, 0.0);
  h[bin] = 1.0;
  return h;
}

// B = 100 bags of L = 10 lookups (N = 1000) into a fp32 table of D = 64 (256-byte rows).
EmbeddingTableTraffic forward(int64_t rows, std::vector<double> histogram = {},
                              const DeviceProfile& device = test_device()) {
  return embedding_table_traffic(KernelClass::kEmbeddingForward, DType::kFp32, 100,
                                 EmbeddingTableShape{rows, 64, 10.0, std::move(histogram)}, 4,
                                 FusedEmbeddingOptimizer::kSgd, device, kFull, EmbeddingParams{});
}

// Per-bag DRAM bytes besides the rows: indices ceil32(10 x 4) = 64, table offset 32, bag offsets
// 64; pooled output 256.
constexpr double kBagBytes = 100 * (64 + 32 + 64);
constexpr double kOutputBytes = 100 * 256;

TEST(EmbeddingBagModel, ReuseBinMeanCounts) {
  EXPECT_DOUBLE_EQ(reuse_bin_mean_count(0), 1.0);     // (0, 1]
  EXPECT_DOUBLE_EQ(reuse_bin_mean_count(1), 2.0);     // (1, 2] = {2}
  EXPECT_DOUBLE_EQ(reuse_bin_mean_count(2), 3.5);     // (2, 4] = {3, 4}
  EXPECT_DOUBLE_EQ(reuse_bin_mean_count(10), 768.5);  // (512, 1024]
  EXPECT_DOUBLE_EQ(reuse_bin_mean_count(16), 65536.0);
}

TEST(EmbeddingBagModel, AllIndicesDistinctNeverHit) {
  // Every distinct row accessed once: U = N = 1000. tables_concurrent = ceil(10 x 45 / 100) = 5,
  // X = min(floor(0.9 x 10 MiB / 5 / 256), E, N) = min(7372, 1e6, 1000) = 1000 >= U.
  const EmbeddingTableTraffic t = forward(1000000, histogram_with(0));
  EXPECT_DOUBLE_EQ(t.distinct_rows, 1000.0);
  EXPECT_DOUBLE_EQ(t.resident_rows, 1000.0);
  EXPECT_DOUBLE_EQ(t.hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(t.dram_bytes, kBagBytes + 1000 * 256 + kOutputBytes);  // 297600
  EXPECT_DOUBLE_EQ(t.l2_bytes, 0.0);
  // 297600 B / 1e12 B/s x dim_factor(64) = 1.1.
  EXPECT_NEAR(t.seconds, 297600e-12 * 1.1, 1e-18);
}

TEST(EmbeddingBagModel, OneHotRowHitsAfterTheFirstAccess) {
  // A one-row table: U = E (1 - 0^N) = 1, so 1 miss and 999 hits.
  const EmbeddingTableTraffic t = forward(1);
  EXPECT_DOUBLE_EQ(t.distinct_rows, 1.0);
  EXPECT_DOUBLE_EQ(t.hit_rate, 0.999);
  EXPECT_DOUBLE_EQ(t.dram_bytes, kBagBytes + 256 + kOutputBytes);  // 41856
  EXPECT_DOUBLE_EQ(t.l2_bytes, 999 * 256);                         // 255744
  // L2 bound: 255744 B / 2e12 B/s = 127.872 ns > 41.856 ns of DRAM; x 1.1.
  EXPECT_NEAR(t.seconds, 127.872e-9 * 1.1, 1e-18);

  // The same access pattern in a large table, told by its histogram: one distinct row with
  // 1000 accesses falls in bin (512, 1024], mean count 768.5, so U = 1000 / 768.5.
  const EmbeddingTableTraffic h = forward(1000000, histogram_with(10));
  EXPECT_DOUBLE_EQ(h.distinct_rows, 1000.0 / 768.5);
  EXPECT_DOUBLE_EQ(h.hit_rate, 1.0 - (1000.0 / 768.5) / 1000.0);
}

TEST(EmbeddingBagModel, UniformRandomIndicesHitOnRepeats) {
  // E = N = 1000: U = 1000 (1 - 0.999^1000) = 632.3046; all fit (X = 1000), so only the
  // compulsory misses: hit rate 1 - U / N = 0.3676954.
  const EmbeddingTableTraffic t = forward(1000);
  EXPECT_NEAR(t.distinct_rows, 632.3046, 1e-4);
  EXPECT_NEAR(t.hit_rate, 0.3676954, 1e-7);
  EXPECT_NEAR(t.dram_bytes, kBagBytes + t.distinct_rows * 256 + kOutputBytes, 1e-6);
  EXPECT_NEAR(t.l2_bytes, (1000 - t.distinct_rows) * 256, 1e-6);
  EXPECT_NEAR(expected_distinct_rows_uniform(1000, 1000), 1000 * (1 - std::pow(0.999, 1000)), 1e-9);
}

TEST(EmbeddingBagModel, CacheTooSmallForTheDistinctRows) {
  // L2 of 256000 B: X = floor(0.9 x 256000 / 5 / 256) = 180 rows. E = N = 1000 uniform:
  // U = 632.3046 > X, so misses = U + (N - U)(1 - X / U).
  DeviceProfile small = test_device();
  small.l2_bytes = 256000;
  const EmbeddingTableTraffic t = forward(1000, {}, small);
  const double u = 1000 * (1 - std::pow(0.999, 1000));
  EXPECT_DOUBLE_EQ(t.resident_rows, 180.0);
  EXPECT_NEAR(t.hit_rate, 1.0 - (u + (1000 - u) * (1 - 180 / u)) / 1000, 1e-12);
  EXPECT_NEAR(embedding_hit_rate(1000, u, 180), t.hit_rate, 1e-15);
}

TEST(EmbeddingBagModel, BackwardTrafficPerOptimizer) {
  // All distinct (U = N = 1000), E = 1e6: ceil(log2 1e6) = 20 key bits, 3 radix passes of 8.
  // DRAM = bags 16000 + pooled gradient 25600 + sort 3 x 2 x 1000 x (4 + 4) = 48000
  //        + rows read and written 2 x 1000 x 256 = 512000 -> 601600; L2 = N x 256 = 256000.
  const auto backward = [](FusedEmbeddingOptimizer opt) {
    return embedding_table_traffic(KernelClass::kEmbeddingBackward, DType::kFp32, 100,
                                   EmbeddingTableShape{1000000, 64, 10.0, histogram_with(0)}, 4,
                                   opt, test_device(), kFull, EmbeddingParams{});
  };
  const EmbeddingTableTraffic sgd = backward(FusedEmbeddingOptimizer::kSgd);
  EXPECT_DOUBLE_EQ(sgd.dram_bytes, 601600.0);
  EXPECT_DOUBLE_EQ(sgd.l2_bytes, 256000.0);
  EXPECT_NEAR(sgd.seconds, 601600e-12 * 1.1, 1e-18);
  // Adagrad: + 2 x 1000 x ceil32(4 x 64) = 512000; row-wise Adagrad: + 2 x 1000 x 32 = 64000.
  EXPECT_DOUBLE_EQ(backward(FusedEmbeddingOptimizer::kAdagrad).dram_bytes, 601600.0 + 512000.0);
  EXPECT_DOUBLE_EQ(backward(FusedEmbeddingOptimizer::kRowWiseAdagrad).dram_bytes,
                   601600.0 + 64000.0);
  // Adam: both moments read and written, 4 x 1000 x 256 = 1024000.
  EXPECT_DOUBLE_EQ(backward(FusedEmbeddingOptimizer::kAdam).dram_bytes, 601600.0 + 1024000.0);
}

// PyTorch's sparse gradient applied by index_add_ (EmbeddingUpdate::kScatterAdd): no sort, no
// deduplication. All distinct (U = N = 1000, all misses): DRAM = values and indices 1000 x
// (256 + 4) = 260000 + rows read and written 2 x 1000 x 256 = 512000 -> 772000; L2 = 256000.
// One hot row (E = 1): one compulsory miss, the other 999 adds hit L2: 260000 + 512.
TEST(EmbeddingBagModel, ScatterAddUpdateReadsEveryLookupsValueAndTouchesItsRowInL2) {
  const auto update = [](int64_t rows, std::vector<double> histogram,
                         FusedEmbeddingOptimizer opt = FusedEmbeddingOptimizer::kSgd) {
    return embedding_table_traffic(KernelClass::kEmbeddingBackward, DType::kFp32, 100,
                                   EmbeddingTableShape{rows, 64, 10.0, std::move(histogram)}, 4,
                                   opt, test_device(), kFull, EmbeddingParams{},
                                   EmbeddingUpdate::kScatterAdd);
  };
  const EmbeddingTableTraffic distinct = update(1000000, histogram_with(0));
  EXPECT_DOUBLE_EQ(distinct.dram_bytes, 772000.0);
  EXPECT_DOUBLE_EQ(distinct.l2_bytes, 256000.0);
  EXPECT_NEAR(distinct.seconds, 772000e-12 * 1.1, 1e-18);
  const EmbeddingTableTraffic hot = update(1, {});
  EXPECT_DOUBLE_EQ(hot.dram_bytes, 260000.0 + 2 * 256.0);
  // More than FBGEMM's deduplicated update when the rows are distinct (601600, above).
  EXPECT_GT(distinct.dram_bytes, 601600.0);
  EXPECT_THROW(update(1000, {}, FusedEmbeddingOptimizer::kAdagrad), std::invalid_argument);
  // The op: one kernel (index_add_), floor + bandwidth, no latency term.
  KernelDesc k;
  k.cls = KernelClass::kEmbeddingBackward;
  k.embedding.batch = 100;
  k.embedding.per_table = {EmbeddingTableShape{1000000, 64, 10.0, histogram_with(0)}};
  k.embedding.update = EmbeddingUpdate::kScatterAdd;
  const EmbeddingOpTime t = embedding_op_time(k, test_device(), kFull, EmbeddingParams{});
  EXPECT_EQ(t.kernels, 1);
  EXPECT_DOUBLE_EQ(t.latency_seconds, 0.0);
  EXPECT_NEAR(t.seconds, 2.032e-6 + 772000e-12 * 1.1, 1e-15);
}

// Part 2 with the default (V100 trace fit) latencies: floor 2.032 us, forward 2.362 + 1.415 Lm,
// index step 0.554, sort tile 10.635, upsweep 14.269, pass 7.635, encode 10.154, update 34.686.
TEST(EmbeddingBagModel, ForwardIsFloorPlusMaxOfLatencyAndSummedTableBandwidth) {
  KernelDesc k;
  k.cls = KernelClass::kEmbeddingForward;
  k.dtype = DType::kFp32;
  k.embedding.batch = 100;
  k.embedding.per_table = {EmbeddingTableShape{1000, 64, 10.0, {}},
                           EmbeddingTableShape{1, 64, 10.0, {}}};
  const EmbeddingOpTime t = embedding_op_time(k, test_device(), kFull, EmbeddingParams{});
  EXPECT_EQ(t.kernels, 1);
  EXPECT_NEAR(t.bandwidth_seconds, forward(1000).seconds + forward(1).seconds, 1e-18);
  EXPECT_NEAR(t.latency_seconds, (2.362 + 1.415 * 10) * 1e-6, 1e-15);  // Lm = 2000 / 200
  EXPECT_NEAR(t.seconds, (2.032 + 16.512) * 1e-6, 1e-15);
  EXPECT_DOUBLE_EQ(embedding_seconds(k, test_device(), kFull, EmbeddingParams{}), t.seconds);
  // Without per_table: `tables` copies of the average table.
  KernelDesc avg;
  avg.cls = KernelClass::kEmbeddingForward;
  avg.embedding = EmbeddingShape{.batch = 100, .tables = 3, .rows = 1000, .dim = 64, .pooling = 10};
  const EmbeddingOpTime a = embedding_op_time(avg, test_device(), kFull, EmbeddingParams{});
  EXPECT_NEAR(a.bandwidth_seconds, 3 * forward(1000).seconds, 1e-18);
  EXPECT_NEAR(a.seconds, (2.032 + 16.512) * 1e-6, 1e-15);
  // 100000 bags of 10 distinct rows of 1e6: DRAM 1e5 x 160 + 1e6 x 256 + 1e5 x 256 = 297.6 MB
  // at 1000 GB/s x 1.1 (D = 64) = 327.36 us, over the 16.512 us latency.
  avg.embedding = EmbeddingShape{.batch = 100000,
                                 .tables = 1,
                                 .rows = 1000000,
                                 .dim = 64,
                                 .pooling = 10,
                                 .reuse_histogram = histogram_with(0)};
  const EmbeddingOpTime big = embedding_op_time(avg, test_device(), kFull, EmbeddingParams{});
  EXPECT_NEAR(big.seconds, (2.032 + 327.36) * 1e-6, 1e-12);
}

TEST(EmbeddingBagModel, BackwardKernelsAndLatencyFollowFbgemm) {
  const auto op = [](double pooling, int64_t rows) {
    KernelDesc k;
    k.cls = KernelClass::kEmbeddingBackward;
    k.embedding =
        EmbeddingShape{.batch = 100, .tables = 2, .rows = rows, .dim = 64, .pooling = pooling};
    return embedding_op_time(k, test_device(), kFull, EmbeddingParams{});
  };
  // N = 2000 <= 2304: one single-tile sort; N >= 1024 adds the temp_grad_accum zeros:
  // 1 + 1 + 4 + 3 + 3 + 1 + 2 = 15 kernels. Latency 0.554 x 32 + 10.635 + 10.154 + 34.686.
  const EmbeddingOpTime small = op(10.0, 1000000);
  EXPECT_EQ(small.kernels, 15);
  EXPECT_NEAR(small.latency_seconds, 73.203e-6, 1e-12);
  EXPECT_NEAR(small.seconds, (15 * 2.032 + 73.203) * 1e-6, 1e-12);
  // N = 6000: onesweep over floor(log2 6e6) + 1 = 23 bits, 3 passes of 8: 5 sort kernels, 19 in
  // all; sort 14.269 + 3 x 7.635 = 37.174; index steps 32 ceil(30 / 32) = 32.
  const EmbeddingOpTime large = op(30.0, 3000000);
  EXPECT_EQ(large.kernels, 19);
  EXPECT_NEAR(large.latency_seconds, (17.728 + 37.174 + 10.154 + 34.686) * 1e-6, 1e-12);
  EXPECT_NEAR(large.seconds, (19 * 2.032 + 99.742) * 1e-6, 1e-12);
  // Pooling 40 > 32: each bag takes two index steps.
  EXPECT_NEAR(op(40.0, 3000000).latency_seconds - large.latency_seconds, 0.554e-6 * 32, 1e-12);
  // N = 400 < 1024: no temp_grad_accum zeros.
  EXPECT_EQ(op(2.0, 1000000).kernels, 14);
}

TEST(EmbeddingBagModel, TotalHashSizeBits) {
  EXPECT_EQ(total_hash_size_bits(1), 1);
  EXPECT_EQ(total_hash_size_bits(4), 3);
  EXPECT_EQ(total_hash_size_bits(3 * 13346867), 26);  // the V100 trace's rank 0: 4 passes
}

TEST(EmbeddingBagModel, FitRecoversLatenciesOfSyntheticKernels) {
  // Kernels generated from known latencies: floor 2 us, forward 3 + 1.5 Lm, index step 0.5,
  // tile 10, pass 8, upsweep 12, encode 9, update 30.
  using R = EmbeddingKernelRole;
  std::vector<EmbeddingKernelSample> s;
  const auto add = [&](const std::string& op, R role, double lookups, double us) {
    s.push_back(EmbeddingKernelSample{op, role, lookups, 100.0, us * 1e-6});
  };
  add("f1", R::kForward, 200, 2 + 3 + 1.5 * 2);
  add("f2", R::kForward, 800, 2 + 3 + 1.5 * 8);
  add("b1", R::kLinearize, 200, 2 + 0.5 * 32);
  add("b1", R::kSortSingleTile, 200, 12);
  add("b1", R::kFill, 200, 2);
  add("b1", R::kEncode, 200, 6);
  add("b1", R::kEncode, 200, 9);
  add("b1", R::kUpdate, 200, 32);
  add("b1", R::kUpdate, 200, 2);
  add("b2", R::kLinearize, 4000, 2 + 0.5 * 64);  // Lm 40: two steps per bag
  add("b2", R::kSortHistogram, 4000, 7);
  add("b2", R::kSortExclusiveSum, 4000, 3);
  add("b2", R::kSortPass, 4000, 2 + 8 + 4);
  add("b2", R::kSortPass, 4000, 2 + 8);
  add("b2", R::kSortPass, 4000, 2 + 8);
  add("b2", R::kEncode, 4000, 13);
  add("b2", R::kUpdate, 4000, 34);
  const EmbeddingParams p = fit_embedding_latencies(s, EmbeddingParams{});
  EXPECT_EQ(p.kernel_floor, Duration::from_us(2));
  EXPECT_EQ(p.forward_latency, Duration::from_us(3));
  EXPECT_EQ(p.forward_row_latency, Duration::from_ns(1500));
  EXPECT_EQ(p.index_step_latency, Duration::from_ns(500));
  EXPECT_EQ(p.sort_tile_latency, Duration::from_us(10));
  EXPECT_EQ(p.sort_pass_latency, Duration::from_us(8));
  EXPECT_EQ(p.sort_upsweep_latency, Duration::from_us(5 + 1 + 4));
  EXPECT_EQ(p.encode_latency, Duration::from_us(11));  // b1: 4 + 7, b2: 11
  EXPECT_EQ(p.update_latency, Duration::from_us(31));
  s.erase(s.begin() + 2);  // no linearize kernel left for b1, still one for b2
  EXPECT_NO_THROW(fit_embedding_latencies(s, EmbeddingParams{}));
  std::erase_if(s, [](const EmbeddingKernelSample& k) { return k.role == R::kUpdate; });
  EXPECT_THROW(fit_embedding_latencies(s, EmbeddingParams{}), std::invalid_argument);
}

TEST(EmbeddingBagModel, SmallDimsPayTheSeedDivergenceFactor) {
  const auto time = [](int64_t dim) {
    return embedding_table_traffic(KernelClass::kEmbeddingForward, DType::kFp32, 100,
                                   EmbeddingTableShape{1000000, dim, 10.0, histogram_with(0)}, 4,
                                   FusedEmbeddingOptimizer::kSgd, test_device(), kFull,
                                   EmbeddingParams{});
  };
  // D = 32: 128-byte rows; DRAM = 16000 + 1000 x 128 + 100 x 128 = 156800, x 1.55.
  EXPECT_NEAR(time(32).seconds, 156800e-12 * 1.55, 1e-18);
  // D = 128: 512-byte rows, factor 1.
  EXPECT_NEAR(time(128).seconds, (16000 + 512000 + 51200) * 1e-12, 1e-18);
}

TEST(EmbeddingBagModel, RejectsBadHistograms) {
  EXPECT_THROW(distinct_rows_from_histogram(std::vector<double>(3, 1.0), 10, 10),
               std::invalid_argument);
  EXPECT_THROW(distinct_rows_from_histogram(std::vector<double>(kReuseHistogramBins, 0.0), 10, 10),
               std::invalid_argument);
  std::vector<double> negative = histogram_with(0);
  negative[1] = -0.5;
  EXPECT_THROW(distinct_rows_from_histogram(negative, 10, 10), std::invalid_argument);
}

}  // namespace
}  // namespace upsim
