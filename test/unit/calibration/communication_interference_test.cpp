// The shipped H100 calibration priced on the SMs a collective leaves (sim/cost_models.h
// device_with_sms_held), against the published case that motivates the model: an nsys profile
// of an H100 FSDP step (NVIDIA developer forum thread 337991, "Compute-Communication Overlap
// Causes Severe GEMM Performance Degradation because of Tail Effect") shows a 132-block GEMM
// beside ncclAllGather's 24 blocks needing a second wave: "execution time nearly doubles", MFU
// from about 80% to about 47% (x 1.7).
#include <gtest/gtest.h>

#include <filesystem>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/gemm_launch_config.h"
#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/gemm_launch.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

struct H100 {
  HardwareProfile hw;
  CalibratedKernelCost model;
};

H100 h100() {
  ConfigDocument hw_doc = ConfigDocument::load_file(kConfigs / "hardware" / "h100_sxm5_80gb.yaml");
  HardwareProfile hw = load_hardware_profile(hw_doc.root());
  ConfigDocument cal = ConfigDocument::load_file(kConfigs / "calibration" / "h100_xla.yaml");
  return H100{hw, CalibratedKernelCost(load_kernel_calibration(cal.root()), hw.achievable)};
}

KernelDesc bf16_gemm(int64_t m, int64_t n, int64_t k) {
  return gemm_kernel(DType::kBf16, 1, m, n, k);
}

TEST(CommunicationInterference, AOneWaveH100GemmBesideAnAllGatherNeedsASecondWave) {
  const H100 gpu = h100();
  ASSERT_EQ(gpu.hw.device.sm_count, 132);
  // 12 x 11 tiles of the bf16 fit's 64 x 64: one block per SM, one wave alone.
  const KernelDesc one_wave = bf16_gemm(12 * 64, 11 * 64, 16384);
  const double alone = gpu.model.kernel_duration(one_wave, gpu.hw.device).seconds();
  const double beside =
      gpu.model.kernel_duration(one_wave, device_with_sms_held(gpu.hw.device, 24)).seconds();
  EXPECT_GT(beside / alone, 1.6) << "the forum's profile: nearly twice as long";
  EXPECT_LT(beside / alone, 2.0) << "two waves at most, and the kernel's fixed cost is shared";
}

TEST(CommunicationInterference, AManyWaveGemmLosesAboutTheShareOfSmsTaken) {
  const H100 gpu = h100();
  const KernelDesc big = bf16_gemm(16384, 16384, 8192);
  const double alone = gpu.model.kernel_duration(big, gpu.hw.device).seconds();
  const double beside =
      gpu.model.kernel_duration(big, device_with_sms_held(gpu.hw.device, 24)).seconds();
  // Many waves: the slowdown tends to 132 / 108 = 1.22, as Lee et al. (arXiv 2507.03114)
  // measured on average beside collectives (18.9% slower compute).
  EXPECT_NEAR(beside / alone, 132.0 / 108.0, 0.03);
}

TEST(CommunicationInterference, AMemoryBoundKernelKeepsItsBandwidth) {
  const H100 gpu = h100();
  KernelDesc copy;
  copy.cls = KernelClass::kMemoryBound;
  copy.memory_op = MemoryOp::kCopy;
  copy.dtype = DType::kBf16;
  copy.bytes_read = 128.0 * 1024 * 1024;
  copy.bytes_written = 128.0 * 1024 * 1024;
  const double alone = gpu.model.kernel_duration(copy, gpu.hw.device).seconds();
  const double beside =
      gpu.model.kernel_duration(copy, device_with_sms_held(gpu.hw.device, 24)).seconds();
  EXPECT_DOUBLE_EQ(beside, alone) << "HBM contention by the collective is not modelled";
}

TEST(CommunicationInterference, AManyWaveH100GemmUnderCublasPersistentScheduleDoubles) {
  // cuBLAS's Hopper GEMMs launch min(tiles, 132) persistent CTAs (sim/gemm_launch.h): beside
  // an all-gather on 24 SMs, 24 of them run after the other 108 (pytorch/pytorch#143988: "the
  // matmuls take 2x as long").
  const H100 gpu = h100();
  const KernelDesc big = bf16_gemm(16384, 16384, 8192);
  const int64_t ctas = gpu.model.gemm_ctas(big, gpu.hw.device);
  const GemmEstimate e = gpu.model.gemm_estimate(big, gpu.hw.device);
  EXPECT_EQ(ctas, e.tiles * e.split_k);
  EXPECT_GT(ctas, 132);
  const PersistentGrid grid = persistent_grid(ctas, gpu.hw.device.sm_count, 0, 24);
  EXPECT_EQ(grid.grid, 132);
  EXPECT_EQ(grid.deferred, 24);
  const int64_t alone = gpu.model.kernel_duration(big, gpu.hw.device).ps();
  EXPECT_EQ(persistent_duration_ps(grid, alone), 2 * alone);
  EXPECT_EQ(gpu.model.gemm_ctas(KernelDesc{}, gpu.hw.device), 0) << "not a GEMM";
}

TEST(CommunicationInterference, TheScenarioStatesTheScheduleOrTakesTheGpus) {
  const H100 gpu = h100();
  ASSERT_EQ(gpu.hw.device.compute_capability, 90);
  ConfigDocument none = ConfigDocument::parse_string("model: calibrated\n", "scenario.yaml");
  const GemmLaunch hopper = read_gemm_launch(none.root(), gpu.hw.device);
  EXPECT_EQ(hopper.schedule, GemmSchedule::kStaticPersistent);
  EXPECT_EQ(hopper.sm_carveout, 0);
  ConfigDocument what_if = ConfigDocument::parse_string(
      "model: calibrated\ngemm_schedule: per_tile\ngemm_sm_carveout: 24\n", "scenario.yaml");
  const GemmLaunch tiles = read_gemm_launch(what_if.root(), gpu.hw.device);
  EXPECT_EQ(tiles.schedule, GemmSchedule::kPerTile);
  EXPECT_EQ(tiles.sm_carveout, 24);
  for (const char* bad :
       {"gemm_schedule: persistent\n", "gemm_sm_carveout: 132\n", "gemm_sm_carveout: -1\n"}) {
    ConfigDocument doc = ConfigDocument::parse_string(bad, "scenario.yaml");
    try {
      read_gemm_launch(doc.root(), gpu.hw.device);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("scenario.yaml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("gemm_s"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace upsim
