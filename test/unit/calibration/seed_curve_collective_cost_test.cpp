// The seed's three-piece collective curve reproduces the values of Lin et al., TPDS 2024
// ("Test values computed by us", 4 GPUs, µs) from the DGX-1 V100 fits.
#include "calibration/seed_curve_collective_cost.h"

#include <gtest/gtest.h>

#include <cmath>

namespace upsim {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

struct Point {
  double bytes;
  double all_to_all_us;
  double all_reduce_us;
};

TEST(SeedCurve, ReproducesTheSeedReferenceTable) {
  // Lin et al., TPDS 2024: sizes 1 KiB ... 256 MiB; values printed to 3-4 significant digits.
  const Point table[] = {{1 * kKiB, 85.6, 84.2},   {16 * kKiB, 75.0, 74.7},
                         {256 * kKiB, 72.6, 80.1}, {4 * kMiB, 181.5, 231.0},
                         {64 * kMiB, 1111, 1551},  {256 * kMiB, 3635, 5405}};
  const SeedCurve a2a = seed_dgx1_v100_all_to_all();
  const SeedCurve ar = seed_dgx1_v100_all_reduce();
  for (const Point& p : table) {
    const double a2a_us = a2a.time(p.bytes, 3.0 / 4.0).us();
    const double ar_us = ar.time(p.bytes, 2.0 * 3.0 / 4.0).us();
    EXPECT_NEAR(a2a_us, p.all_to_all_us, 0.0015 * p.all_to_all_us + 0.06) << p.bytes;
    EXPECT_NEAR(ar_us, p.all_reduce_us, 0.0015 * p.all_reduce_us + 0.06) << p.bytes;
  }
}

TEST(SeedCurve, AllToAllUsesTheBusiestRanksMaxOfMax) {
  const SeedCurveCollectiveCost model(seed_dgx1_v100_all_reduce(), seed_dgx1_v100_all_to_all(),
                                      Bandwidth::gigabytes_per_second(10),
                                      Bandwidth::gigabytes_per_second(1000));
  // Rank 0 sends 3 x 64 MiB; the others send 1 MiB to each peer: max-of-max = 192 MiB sent.
  const auto big = static_cast<int64_t>(64 * kMiB);
  const auto small = static_cast<int64_t>(1 * kMiB);
  CollectiveDesc c{CollectiveKind::kAllToAll, {0, 1, 2, 3}, 0, {}};
  c.send_bytes = AllToAllSizes::dense(4, {0, big, big, big,        //
                                          small, 0, small, small,  //
                                          small, small, 0, small,  //
                                          small, small, small, 0});
  EXPECT_EQ(model.collective_duration(c),
            seed_dgx1_v100_all_to_all().time(3 * 64 * kMiB, 3.0 / 4.0));
}

TEST(SeedCurve, KindsWithoutACurveAreAnErrorAndCopiesUseTheHostLink) {
  const SeedCurveCollectiveCost model(seed_dgx1_v100_all_reduce(), seed_dgx1_v100_all_to_all(),
                                      Bandwidth::gigabytes_per_second(10),
                                      Bandwidth::gigabytes_per_second(1000));
  EXPECT_THROW(model.collective_duration(CollectiveDesc{CollectiveKind::kAllGather, {0, 1}, 8, {}}),
               std::invalid_argument);
  EXPECT_EQ(model.transfer_duration(TransferDesc{TransferKind::kHostToDevice, 0, 10'000'000}),
            Duration::from_us(1000));
  EXPECT_EQ(model.collective_duration(CollectiveDesc{CollectiveKind::kAllReduce, {0}, 8, {}}),
            Duration::zero());
}

TEST(SeedCurve, LoadsOverridesAndRejectsBadCurves) {
  HardwareProfile hw;
  hw.device.host_link_bandwidth = Bandwidth::gigabytes_per_second(16);
  hw.device.hbm_bandwidth = Bandwidth::gigabytes_per_second(1555);
  ConfigDocument ok = ConfigDocument::parse_string(
      "model: seed_curve\nall_reduce: {max_bw: 150GB/s, overhead: 20us}\n", "ok.yaml");
  const SeedCurveCollectiveCost m = load_seed_curve(ok.root(), hw);
  ok.root().get_string("model");
  EXPECT_NO_THROW(ok.check_all_keys_used());
  // Above saturation (2^26 bytes) the override applies: 1 GiB x 1.5 / 150 GB/s + 20 us.
  const double gib = 1024.0 * kMiB;
  EXPECT_NEAR(
      m.collective_duration(
           CollectiveDesc{CollectiveKind::kAllReduce, {0, 1, 2, 3}, static_cast<int64_t>(gib), {}})
          .us(),
      gib * 1.5 / 150e3 + 20.0, 1e-3);
  ConfigDocument bad = ConfigDocument::parse_string(
      "model: seed_curve\nall_reduce: {sigmoid: [1, 2, 3]}\n", "bad.yaml");
  EXPECT_THROW(load_seed_curve(bad.root(), hw), ConfigError);
}

}  // namespace
}  // namespace upsim
