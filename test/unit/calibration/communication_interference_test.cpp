// The shipped H100 calibration priced on the SMs a collective leaves (sim/cost_models.h
// device_with_sms_held), against the published case that motivates the model: an nsys profile
// of an H100 FSDP step (NVIDIA developer forum thread 337991, "Compute-Communication Overlap
// Causes Severe GEMM Performance Degradation because of Tail Effect") shows a 132-block GEMM
// beside ncclAllGather's 24 blocks needing a second wave: "execution time nearly doubles", MFU
// from about 80% to about 47% (x 1.7).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/gemm_launch_config.h"
#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/gemm_launch.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;

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

/// One GEMM call of test/data/holistic-trace-analysis/a100_gemm_beside_nccl.csv.
struct GemmBesideNccl {
  KernelDesc gemm;
  double clean_us = 0.0;
  double time_us = 0.0;
  double overlap_us = 0.0;
  std::string nccl;  ///< collective and protocol, e.g. "AllReduce LL"
  int32_t nccl_ctas = 0;
};

std::vector<GemmBesideNccl> read_gemms_beside_nccl() {
  const std::filesystem::path path =
      kData / "holistic-trace-analysis" / "a100_gemm_beside_nccl.csv";
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::string line;
  std::map<std::string, size_t> column;
  std::vector<GemmBesideNccl> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');)
      cells.push_back(cell);
    if (column.empty()) {
      for (size_t i = 0; i < cells.size(); ++i)
        column[cells[i]] = i;
      continue;
    }
    const auto number = [&](const char* name) { return std::stod(cells.at(column.at(name))); };
    GemmBesideNccl row;
    row.gemm = gemm_kernel(DType::kTf32, static_cast<int64_t>(number("batch")),
                           static_cast<int64_t>(number("m")), static_cast<int64_t>(number("n")),
                           static_cast<int64_t>(number("k")));
    row.clean_us = number("clean_us");
    row.time_us = number("time_us");
    row.overlap_us = number("overlap_us");
    row.nccl = cells.at(column.at("nccl_collective")) + " " + cells.at(column.at("nccl_protocol"));
    row.nccl_ctas = static_cast<int32_t>(number("nccl_ctas"));
    rows.push_back(row);
  }
  return rows;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// In-model A100 GEMMs beside NCCL kernels (a recommendation model's training trace, published by
// HolisticTraceAnalysis; test/data/holistic-trace-analysis), held out. The model's SM share: a
// per-tile GEMM runs on the SMs the NCCL kernel's CTAs leave (device_with_sms_held, the trace's
// CTA count), so over the measured overlap it progresses at alone / beside of its rate:
// predicted = clean + overlap x (1 - alone / beside), from the shape's measured uncontended time.
// HBM sharing (sim/hbm_sharing.h) is left out here: it needs the collective's byte rate, which
// the trace does not give. Measured: beside the embeddings' all-to-all (SendRecv, SIMPLE
// protocol, 8 or 24 CTAs) the GEMMs ran a median 1.05x their uncontended time, and the SM share
// prices them within 4.6% (geomean over 81 calls; its median 1.00x: these GEMMs of 20-100 us
// keep their wave count on the SMs left); beside the dense gradients' all-reduce (LL protocol,
// 24 CTAs) they ran 1.86x, where the SM share gives 1.00x (40.7%): NCCL's LL protocol (flag and
// data in one 8-byte store, receivers polling) takes more from a GEMM than its SMs, a gap the
// model does not price, pinned here.
TEST(CommunicationInterference, A100GemmsBesideNcclInARecommendationModelTrace) {
  ConfigDocument hw_doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_40gb.yaml");
  const HardwareProfile hw = load_hardware_profile(hw_doc.root());
  ConfigDocument cal = ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  const CalibratedKernelCost model(load_kernel_calibration(cal.root()), hw.achievable);
  const std::vector<GemmBesideNccl> rows = read_gemms_beside_nccl();
  ASSERT_EQ(rows.size(), 91u);
  std::map<std::string, std::vector<double>> measured, predicted, log_error;
  for (const GemmBesideNccl& row : rows) {
    const double alone = model.kernel_duration(row.gemm, hw.device).seconds();
    const double beside =
        model.kernel_duration(row.gemm, device_with_sms_held(hw.device, row.nccl_ctas)).seconds();
    ASSERT_GE(beside, alone);
    const double us = row.clean_us + row.overlap_us * (1.0 - alone / beside);
    measured[row.nccl].push_back(row.time_us / row.clean_us);
    predicted[row.nccl].push_back(us / row.clean_us);
    log_error[row.nccl].push_back(std::log(std::max(std::abs(us / row.time_us - 1.0), 1e-6)));
  }
  ASSERT_EQ(measured.size(), 2u);
  for (const auto& [nccl, slowdowns] : measured) {
    double sum = 0.0;
    for (double e : log_error[nccl])
      sum += e;
    const double geomean = std::exp(sum / static_cast<double>(log_error[nccl].size()));
    std::printf(
        "A100 GEMMs beside %s: %zu calls, median slowdown measured %.2fx, SM share %.2fx; "
        "geomean |error| %.1f%%\n",
        nccl.c_str(), slowdowns.size(), median(slowdowns), median(predicted[nccl]),
        100.0 * geomean);
    if (nccl == "SendRecv SIMPLE") {
      EXPECT_EQ(slowdowns.size(), 81u);
      EXPECT_LT(geomean, 0.06);
      EXPECT_NEAR(median(predicted[nccl]), median(slowdowns), 0.06);
    } else {
      EXPECT_EQ(nccl, "AllReduce LL");
      EXPECT_GT(median(slowdowns), 1.7) << "the LL all-reduce's measured interference";
      EXPECT_LT(median(predicted[nccl]), 1.35) << "the gap: the SM share alone";
    }
  }
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
