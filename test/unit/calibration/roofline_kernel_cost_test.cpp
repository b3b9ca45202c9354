#include "calibration/roofline_kernel_cost.h"
#include "test/unit/calibration/test_device.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace upsim {
namespace {

// A made-up device with round numbers so that every expected value below is exact:
// fp32 10 TFLOP/s, fp16 100 TFLOP/s, no tf32 / bf16 / fp8 / int8 unit, HBM 1000 GB/s.
using test::test_device;

// compute_fraction 0.5 and memory_fraction 0.8: fp32 runs at 5e12 FLOP/s, fp16 at 5e13 FLOP/s,
// memory at 8e11 B/s; every kernel pays 5 us.
RooflineParams test_params() {
  RooflineParams p;
  p.compute_fraction = 0.5;
  p.memory_fraction = 0.8;
  p.kernel_overhead = Duration::from_us(5);
  return p;
}

KernelDesc gemm(DType dtype, int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  KernelDesc kd;
  kd.cls = KernelClass::kGemm;
  kd.dtype = dtype;
  kd.batch = batch;
  kd.m = m;
  kd.n = n;
  kd.k = k;
  return kd;
}

KernelDesc embedding(KernelClass cls) {
  KernelDesc kd;
  kd.cls = cls;
  kd.dtype = DType::kFp32;
  kd.embedding =
      EmbeddingShape{.batch = 1000, .tables = 2, .rows = 100000, .dim = 64, .pooling = 10};
  return kd;
}

TEST(RooflineKernelCost, ComputeBoundGemmTakesFlopsOverAchievablePeak) {
  const RooflineKernelCost model(test_params());
  // fp16 1000^3: flops 2e9 / 5e13 = 40 us; bytes 2 x 3e6 / 8e11 = 7.5 us -> 40 + 5 us.
  EXPECT_EQ(model.kernel_duration(gemm(DType::kFp16, 1000, 1000, 1000), test_device()).ps(),
            45'000'000);
}

TEST(RooflineKernelCost, MemoryBoundGemvTakesBytesOverAchievableBandwidth) {
  const RooflineKernelCost model(test_params());
  // fp32 m 100000, n 1, k 1000: flops 2e8 / 5e12 = 40 us;
  // bytes 4 x (1e8 + 1e3 + 1e5) = 400404000 / 8e11 = 500.505 us -> 500.505 + 5 us.
  EXPECT_EQ(model.kernel_duration(gemm(DType::kFp32, 100000, 1, 1000), test_device()).ps(),
            505'505'000);
}

TEST(RooflineKernelCost, BatchMultipliesGemmWork) {
  const KernelWork one = roofline_work(gemm(DType::kFp16, 64, 32, 16), 4);
  const KernelWork eight = roofline_work(gemm(DType::kFp16, 64, 32, 16, 8), 4);
  EXPECT_DOUBLE_EQ(one.flops, 2.0 * 64 * 32 * 16);
  EXPECT_DOUBLE_EQ(one.bytes, 2.0 * (64 * 16 + 16 * 32 + 64 * 32));
  EXPECT_DOUBLE_EQ(eight.flops, 8 * one.flops);
  EXPECT_DOUBLE_EQ(eight.bytes, 8 * one.bytes);
}

// A grouped GEMM with routed rows: the routed rows' work (no tiles), capped rows dropped, and
// the weights of the groups expected to hold a row.
TEST(RooflineKernelCost, GroupedGemmWorkIsTheRoutedRows) {
  KernelDesc grouped = gemm(DType::kFp16, 100, 32, 16, 8);  // m: the mean of 800 over 8 groups
  grouped.grouped = {800, 0};
  const KernelWork w = roofline_work(grouped, 4);
  EXPECT_NEAR(w.flops, 2.0 * 800 * 32 * 16, 1e-6);
  EXPECT_NEAR(w.bytes, 2.0 * (800 * 16 + 8 * 16 * 32 + 800 * 32), 1e-6);
  grouped.grouped.cap = 100;  // about half the groups lose rows
  EXPECT_LT(roofline_work(grouped, 4).flops, 0.97 * w.flops);
}

TEST(RooflineKernelCost, PeakDependsOnDtype) {
  const RooflineKernelCost model(test_params());
  // fp32 1000^3: 2e9 / 5e12 = 400 us (bytes 12e6 / 8e11 = 15 us) -> 405 us; fp16 above: 45 us.
  EXPECT_EQ(model.kernel_duration(gemm(DType::kFp32, 1000, 1000, 1000), test_device()).ps(),
            405'000'000);
  EXPECT_EQ(model.kernel_duration(gemm(DType::kFp16, 1000, 1000, 1000), test_device()).ps(),
            45'000'000);
}

TEST(RooflineKernelCost, GemmInDtypeWithoutUnitIsAnErrorNamingDtypeAndDevice) {
  const RooflineKernelCost model(test_params());
  for (DType dtype : {DType::kTf32, DType::kBf16}) {
    try {
      model.kernel_duration(gemm(dtype, 128, 128, 128), test_device());
      ADD_FAILURE() << "expected std::invalid_argument for " << dtype_name(dtype);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string(dtype_name(dtype))), std::string::npos) << what;
      EXPECT_NE(what.find("test-gpu"), std::string::npos) << what;
    }
  }
}

TEST(RooflineKernelCost, MemoryBoundKernelUsesGivenBytesAndFlops) {
  const RooflineKernelCost model(test_params());
  KernelDesc kd;
  kd.cls = KernelClass::kMemoryBound;
  kd.bytes_read = 6e6;
  kd.bytes_written = 2e6;
  kd.flops = 1e6;
  // bytes 8e6 / 8e11 = 10 us; flops 1e6 / 5e12 = 0.2 us -> 10 + 5 us.
  EXPECT_EQ(model.kernel_duration(kd, test_device()).ps(), 15'000'000);
  // Arithmetic-heavy: 1e9 flops / 5e12 = 200 us beats 10 us of traffic.
  kd.flops = 1e9;
  EXPECT_EQ(model.kernel_duration(kd, test_device()).ps(), 205'000'000);
}

TEST(RooflineKernelCost, ElementwiseInDtypeWithoutUnitFallsBackToFp32) {
  const RooflineKernelCost model(test_params());
  KernelDesc kd;
  kd.cls = KernelClass::kMemoryBound;
  kd.dtype = DType::kFp8;
  kd.flops = 1e9;  // 1e9 / 5e12 (fp32) = 200 us
  EXPECT_EQ(model.kernel_duration(kd, test_device()).ps(), 205'000'000);
}

TEST(RooflineKernelCost, EmptyKernelCostsTheFixedOverhead) {
  const RooflineKernelCost model(test_params());
  KernelDesc kd;
  kd.cls = KernelClass::kMemoryBound;
  EXPECT_EQ(model.kernel_duration(kd, test_device()), Duration::from_us(5));
}

TEST(RooflineKernelCost, EmbeddingForwardTrafficOnHandComputedCase) {
  // B 1000, T 2, L 10, D 64, fp32, 4-byte indices: 20000 lookups.
  // rows 20000 x 64 x 4 = 5120000, indices 20000 x 4 = 80000, outputs 2000 x 256 = 512000.
  const KernelWork work = roofline_work(embedding(KernelClass::kEmbeddingForward), 4);
  EXPECT_DOUBLE_EQ(work.bytes, 5'712'000.0);
  EXPECT_DOUBLE_EQ(work.flops, 1'280'000.0);
  // 8-byte indices add 80000 bytes.
  EXPECT_DOUBLE_EQ(roofline_work(embedding(KernelClass::kEmbeddingForward), 8).bytes, 5'792'000.0);
  // 5712000 / 8e11 = 7.14 us -> 12.14 us.
  const RooflineKernelCost model(test_params());
  EXPECT_EQ(model.kernel_duration(embedding(KernelClass::kEmbeddingForward), test_device()).ps(),
            12'140'000);
}

TEST(RooflineKernelCost, EmbeddingBackwardReadsAndWritesEveryTouchedRow) {
  // Output gradients 512000 + 2 x rows 10240000 + indices 80000 = 10832000 bytes.
  const KernelWork work = roofline_work(embedding(KernelClass::kEmbeddingBackward), 4);
  EXPECT_DOUBLE_EQ(work.bytes, 10'832'000.0);
  EXPECT_DOUBLE_EQ(work.flops, 2'560'000.0);
  // 10832000 / 8e11 = 13.54 us -> 18.54 us.
  const RooflineKernelCost model(test_params());
  EXPECT_EQ(model.kernel_duration(embedding(KernelClass::kEmbeddingBackward), test_device()).ps(),
            18'540'000);
  // index_add_ of one value row per lookup: values 5120000 + rows read and written 10240000 +
  // indices 80000 = 15440000 bytes, one add per element.
  KernelDesc scatter = embedding(KernelClass::kEmbeddingBackward);
  scatter.embedding.update = EmbeddingUpdate::kScatterAdd;
  EXPECT_DOUBLE_EQ(roofline_work(scatter, 4).bytes, 15'440'000.0);
  EXPECT_DOUBLE_EQ(roofline_work(scatter, 4).flops, 1'280'000.0);
}

TEST(RooflineKernelCost, RejectsInvalidParameters) {
  RooflineParams p = test_params();
  p.compute_fraction = 0.0;
  EXPECT_THROW(RooflineKernelCost{p}, std::invalid_argument);
  p = test_params();
  p.memory_fraction = 1.5;
  EXPECT_THROW(RooflineKernelCost{p}, std::invalid_argument);
  p = test_params();
  p.kernel_overhead = Duration::from_us(-1);
  EXPECT_THROW(RooflineKernelCost{p}, std::invalid_argument);
  p = test_params();
  p.embedding_index_bytes = 2;
  EXPECT_THROW(RooflineKernelCost{p}, std::invalid_argument);
}

TEST(RooflineKernelCost, LoaderTakesProfileFractionsAndOverrides) {
  const AchievableFractions achievable{.compute = 0.5, .memory = 0.8};
  ConfigDocument doc = ConfigDocument::parse_string("model: roofline\n", "scenario.yaml");
  const RooflineKernelCost defaults = load_roofline(doc.root(), achievable);
  EXPECT_DOUBLE_EQ(defaults.params().compute_fraction, 0.5);
  EXPECT_DOUBLE_EQ(defaults.params().memory_fraction, 0.8);
  EXPECT_EQ(defaults.params().kernel_overhead, Duration::from_us(5));
  doc.check_all_keys_used();

  ConfigDocument custom = ConfigDocument::parse_string(
      "model: roofline\ncompute_fraction: 0.25\nkernel_overhead: 2us\nembedding_index_bytes: 8\n",
      "scenario.yaml");
  const RooflineKernelCost overridden = load_roofline(custom.root(), achievable);
  EXPECT_DOUBLE_EQ(overridden.params().compute_fraction, 0.25);
  EXPECT_EQ(overridden.params().kernel_overhead, Duration::from_us(2));
  EXPECT_EQ(overridden.params().embedding_index_bytes, 8);
  custom.check_all_keys_used();

  ConfigDocument bad =
      ConfigDocument::parse_string("model: roofline\nmemory_fraction: 2\n", "scenario.yaml");
  EXPECT_THROW(load_roofline(bad.root(), achievable), ConfigError);
}

}  // namespace
}  // namespace upsim
