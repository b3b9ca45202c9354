#include "calibration/hardware_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;

std::vector<std::filesystem::path> hardware_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs / "hardware")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(HardwareProfile, EveryShippedProfileLoadsAndUsesEveryKey) {
  const std::vector<std::filesystem::path> files = hardware_files();
  EXPECT_GE(files.size(), 4u);
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    ConfigDocument doc = ConfigDocument::load_file(path);
    const HardwareProfile hw = load_hardware_profile(doc.root());
    doc.check_all_keys_used();
    EXPECT_FALSE(hw.device.name.empty());
    EXPECT_GT(hw.device.peak(DType::kFp32).flops_per_second(), 0.0);
    EXPECT_GT(hw.device.hbm_bandwidth.bytes_per_second(), 0.0);
    EXPECT_GT(hw.device.hbm_bytes, 0);
    EXPECT_GT(hw.device.l2_bytes, 0);
    EXPECT_GT(hw.device.sm_count, 0);
    EXPECT_GT(hw.device.sm_boost_clock_mhz, 0);
    EXPECT_GT(hw.device.host_link_bandwidth.bytes_per_second(), 0.0);
    EXPECT_GT(hw.achievable.compute, 0.0);
    EXPECT_LE(hw.achievable.compute, 1.0);
    EXPECT_GT(hw.achievable.memory, 0.0);
    EXPECT_LE(hw.achievable.memory, 1.0);
    // Every shipped profile states its per-kernel GPU time (measured or borrowed, cited), a few
    // microseconds: none falls back to the calibration file's 5 us.
    ASSERT_TRUE(hw.kernel_overhead.has_value());
    EXPECT_GE(*hw.kernel_overhead, Duration::from_us(1));
    EXPECT_LE(*hw.kernel_overhead, Duration::from_us(5));
  }
}

// The cited fp32 peak, SM count and boost clock of each profile agree: peak = 2 (FMA) x FP32
// lanes per SM x SMs x clock, with 64 lanes per SM (Volta, Turing, GA100) or 128 (Hopper,
// Blackwell), within 1%. A typo in any of the three numbers breaks this.
TEST(HardwareProfile, Fp32PeakIsLanesTimesSmsTimesClock) {
  for (const auto& path : hardware_files()) {
    SCOPED_TRACE(path.string());
    ConfigDocument doc = ConfigDocument::load_file(path);
    const DeviceProfile d = load_hardware_profile(doc.root()).device;
    const double lanes =
        d.peak(DType::kFp32).flops_per_second() / (2.0 * d.sm_count * d.sm_boost_clock_mhz * 1e6);
    const bool volta_to_ampere = std::abs(lanes / 64.0 - 1.0) < 0.01;
    const bool hopper_on = std::abs(lanes / 128.0 - 1.0) < 0.01;
    EXPECT_TRUE(volta_to_ampere || hopper_on) << "fp32 lanes per SM = " << lanes;
  }
}

TEST(HardwareProfile, A100Sxm4With40GbMatchesDatasheet) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_40gb.yaml");
  const HardwareProfile hw = load_hardware_profile(doc.root());
  const DeviceProfile& d = hw.device;
  EXPECT_EQ(d.name, "A100-SXM4-40GB");
  EXPECT_DOUBLE_EQ(d.peak(DType::kFp32).teraflops(), 19.5);
  EXPECT_DOUBLE_EQ(d.peak(DType::kTf32).teraflops(), 156.0);
  EXPECT_DOUBLE_EQ(d.peak(DType::kFp16).teraflops(), 312.0);
  EXPECT_DOUBLE_EQ(d.peak(DType::kBf16).teraflops(), 312.0);
  EXPECT_DOUBLE_EQ(d.peak(DType::kFp8).flops_per_second(), 0.0);
  EXPECT_DOUBLE_EQ(d.hbm_bandwidth.gigabytes_per_second(), 1555.0);
  EXPECT_EQ(d.hbm_bytes, int64_t{40} << 30);
  EXPECT_EQ(d.l2_bytes, int64_t{40} << 20);
  EXPECT_EQ(d.sm_count, 108);
  EXPECT_EQ(d.host_link_bandwidth, *pcie_x16_bandwidth(4));
  EXPECT_DOUBLE_EQ(hw.achievable.compute, 0.869);
  EXPECT_DOUBLE_EQ(hw.achievable.memory, 0.8946);
}

TEST(HardwareProfile, PcieGenerationsGiveX16PerDirectionRates) {
  EXPECT_NEAR(pcie_x16_bandwidth(3)->gigabytes_per_second(), 15.754, 1e-3);
  EXPECT_NEAR(pcie_x16_bandwidth(4)->gigabytes_per_second(), 31.508, 1e-3);
  EXPECT_NEAR(pcie_x16_bandwidth(5)->gigabytes_per_second(), 63.015, 1e-3);
  EXPECT_FALSE(pcie_x16_bandwidth(2));
}

constexpr std::string_view kValidProfile = R"(name: test
peak_flops: {fp32: 10TFLOP/s, fp16: 100TFLOP/s}
hbm: {bandwidth: 1000GB/s, size: 16GiB}
l2: {size: 6MiB}
sm_count: 80
sm_boost_clock_mhz: 1530
pcie_generation: 3
achievable: {compute_fraction: 0.9, memory_fraction: 0.9}
)";

std::string replaced(std::string_view from, std::string_view to) {
  std::string text(kValidProfile);
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Loads `yaml` and returns the ConfigError's what(); fails the test when nothing is thrown.
std::string load_error(const std::string& yaml) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "profile.yaml");
  try {
    load_hardware_profile(doc.root());
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << yaml;
  return "";
}

TEST(HardwareProfile, ValidMinimalProfileLoads) {
  ConfigDocument doc = ConfigDocument::parse_string(std::string(kValidProfile), "profile.yaml");
  const HardwareProfile hw = load_hardware_profile(doc.root());
  doc.check_all_keys_used();
  EXPECT_DOUBLE_EQ(hw.device.l2_bandwidth.bytes_per_second(), 0.0);
  EXPECT_DOUBLE_EQ(hw.device.peak(DType::kFp16).teraflops(), 100.0);
}

// compute_capability: optional "major.minor"; every shipped profile states it.
TEST(HardwareProfile, ComputeCapabilityIsMajorDotMinor) {
  ConfigDocument doc = ConfigDocument::parse_string(std::string(kValidProfile), "profile.yaml");
  EXPECT_EQ(load_hardware_profile(doc.root()).device.compute_capability, 0);
  for (const auto& [text, value] :
       std::vector<std::pair<std::string, int32_t>>{{"7.5", 75}, {"9.0", 90}, {"10.0", 100}}) {
    ConfigDocument d = ConfigDocument::parse_string(
        replaced("name: test", "name: test\ncompute_capability: " + text), "profile.yaml");
    EXPECT_EQ(load_hardware_profile(d.root()).device.compute_capability, value) << text;
  }
  for (const char* bad : {"9", "9.10", "sm90", "0.5", "9.x"}) {
    const std::string e =
        load_error(replaced("name: test", std::string("name: test\ncompute_capability: ") + bad));
    EXPECT_NE(e.find("compute_capability"), std::string::npos) << bad << ": " << e;
  }
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs / "hardware")) {
    ConfigDocument shipped = ConfigDocument::load_file(entry.path());
    EXPECT_GE(load_hardware_profile(shipped.root()).device.compute_capability, 70)
        << entry.path().filename();
  }
}

// recorded_names: optional names CUDA reports for the GPU; the H100 SXM5 profile lists its own.
TEST(HardwareProfile, RecordedNamesAreTheNamesCudaReportsForTheGpu) {
  ConfigDocument doc = ConfigDocument::parse_string(
      replaced("name: test", "name: test\nrecorded_names: [\"NVIDIA Test 16GB\"]"), "profile.yaml");
  EXPECT_EQ(load_hardware_profile(doc.root()).recorded_names,
            std::vector<std::string>{"NVIDIA Test 16GB"});
  const std::string e = load_error(replaced("name: test", "name: test\nrecorded_names: [\"\"]"));
  EXPECT_NE(e.find("recorded_names"), std::string::npos) << e;
  ConfigDocument h100 = ConfigDocument::load_file(kConfigs / "hardware" / "h100_sxm5_80gb.yaml");
  EXPECT_EQ(load_hardware_profile(h100.root()).recorded_names,
            std::vector<std::string>{"NVIDIA H100 80GB HBM3"});
}

TEST(HardwareProfile, ZeroOrNegativeValuesAreErrorsAtTheirKey) {
  EXPECT_NE(load_error(replaced("bandwidth: 1000GB/s", "bandwidth: 0GB/s")).find("hbm.bandwidth"),
            std::string::npos);
  EXPECT_NE(load_error(replaced("size: 16GiB", "size: 0")).find("hbm.size"), std::string::npos);
  EXPECT_NE(load_error(replaced("fp16: 100TFLOP/s", "fp16: 0TFLOP/s")).find("peak_flops.fp16"),
            std::string::npos);
  EXPECT_NE(load_error(replaced("sm_count: 80", "sm_count: 0")).find("sm_count"),
            std::string::npos);
  EXPECT_NE(load_error(replaced("sm_count: 80", "sm_count: -4")).find("sm_count"),
            std::string::npos);
  EXPECT_FALSE(load_error(replaced("bandwidth: 1000GB/s", "bandwidth: -5GB/s")).empty());
  EXPECT_NE(load_error(replaced("sm_boost_clock_mhz: 1530", "sm_boost_clock_mhz: 0"))
                .find("sm_boost_clock_mhz"),
            std::string::npos);
  EXPECT_NE(load_error(replaced("sm_boost_clock_mhz: 1530\n", "")).find("sm_boost_clock_mhz"),
            std::string::npos);
}

TEST(HardwareProfile, ValuesOutsideTheDocumentedRangesAreErrorsNamingTheRange) {
  // Each would have been accepted: 1e9 SMs and a clock in Hz overflowed the int32 fields (the
  // latter to 0 MHz), a peak of 1 FLOP/s prices a GEMM for years.
  const std::string sms = load_error(replaced("sm_count: 80", "sm_count: 1000000000"));
  EXPECT_NE(sms.find("sm_count: must be between 1 and 65536, got 1000000000"), std::string::npos)
      << sms;
  const std::string clock =
      load_error(replaced("sm_boost_clock_mhz: 1530", "sm_boost_clock_mhz: 4294967296"));
  EXPECT_NE(clock.find("sm_boost_clock_mhz: must be between 1 and 100000, got 4294967296"),
            std::string::npos)
      << clock;
  const std::string peak = load_error(replaced("fp16: 100TFLOP/s", "fp16: 19.5FLOP/s"));
  EXPECT_NE(peak.find("peak_flops.fp16: must be between 1 GFLOP/s and 1 EFLOP/s, got 19.5 FLOP/s"),
            std::string::npos)
      << peak;
  EXPECT_NE(load_error(replaced("bandwidth: 1000GB/s", "bandwidth: 100MB/s"))
                .find("hbm.bandwidth: must be between 1 GB/s and"),
            std::string::npos);
  EXPECT_NE(load_error(replaced("size: 16GiB", "size: 16B")).find("hbm.size: must be between"),
            std::string::npos);
  // A what-if far beyond today's parts stays inside: 100x an A100's fp16 peak and HBM.
  std::string what_if = replaced("fp16: 100TFLOP/s", "fp16: 10000TFLOP/s");
  what_if.replace(what_if.find("bandwidth: 1000GB/s"), 19, "bandwidth: 100TB/s");
  ConfigDocument doc = ConfigDocument::parse_string(what_if, "profile.yaml");
  EXPECT_DOUBLE_EQ(load_hardware_profile(doc.root()).device.hbm_bandwidth.bytes_per_second(),
                   100e12);
}

// --set on the SM count or the clock is a what-if on the same chip: the per-SM rate the pinned
// peaks imply stays, so every peak scales with SMs x clock (before, 27 / 54 / 108 SMs gave
// 220.8 / 222.0 / 233.6 ms for gpt2: the pinned peak divided among fewer SMs).
TEST(HardwareProfile, ASetSmCountOrClockScalesThePinnedPeaks) {
  const auto load = [](std::initializer_list<std::string_view> sets) {
    ConfigDocument doc = ConfigDocument::parse_string(std::string(kValidProfile), "profile.yaml");
    for (std::string_view set : sets)
      doc.apply_override(set);
    const DeviceProfile device = load_hardware_profile(doc.root()).device;
    doc.check_all_keys_used();
    return device;
  };
  const DeviceProfile stated = load({"l2.bandwidth=2000GB/s"});
  EXPECT_DOUBLE_EQ(stated.peak(DType::kFp16).teraflops(), 100.0);
  const DeviceProfile half_sms = load({"l2.bandwidth=2000GB/s", "sm_count=40"});
  EXPECT_EQ(half_sms.sm_count, 40);
  EXPECT_DOUBLE_EQ(half_sms.peak(DType::kFp32).teraflops(), 5.0);
  EXPECT_DOUBLE_EQ(half_sms.peak(DType::kFp16).teraflops(), 50.0);
  // The L2 slices sit with the memory partitions, not the SMs; HBM scales with neither.
  EXPECT_DOUBLE_EQ(half_sms.l2_bandwidth.gigabytes_per_second(), 2000.0);
  EXPECT_DOUBLE_EQ(half_sms.hbm_bandwidth.gigabytes_per_second(), 1000.0);
  const DeviceProfile double_clock =
      load({"l2.bandwidth=2000GB/s", "sm_boost_clock_mhz=3060", "sm_count=160"});
  EXPECT_DOUBLE_EQ(double_clock.peak(DType::kFp16).teraflops(), 400.0);
  EXPECT_DOUBLE_EQ(double_clock.l2_bandwidth.gigabytes_per_second(), 4000.0);
  EXPECT_DOUBLE_EQ(double_clock.hbm_bandwidth.gigabytes_per_second(), 1000.0);
  EXPECT_EQ(double_clock.peak(DType::kBf16).flops_per_second(), 0.0);  // no unit stays none
}

// A sustained clock, or a power cap below the TDP (clock ~ cube root of the power), scales the
// compute peaks and the L2 bandwidth, not the HBM; contradictory or partial keys are errors.
TEST(HardwareProfile, ASustainedClockOrAPowerCapScalesTheComputePeaks) {
  const auto load = [](std::string_view extra) {
    ConfigDocument doc = ConfigDocument::parse_string(
        replaced("l2: {size: 6MiB}", "l2: {size: 6MiB, bandwidth: 2000GB/s}") + std::string(extra),
        "profile.yaml");
    const DeviceProfile device = load_hardware_profile(doc.root()).device;
    doc.check_all_keys_used();
    return device;
  };
  const DeviceProfile stock = load("");
  EXPECT_EQ(stock.sustained_sm_clock_mhz, 0);
  const DeviceProfile held = load("sustained_sm_clock_mhz: 1224\n");  // 80% of 1530 MHz
  EXPECT_EQ(held.sustained_sm_clock_mhz, 1224);
  EXPECT_DOUBLE_EQ(held.peak(DType::kFp16).teraflops(), 80.0);
  EXPECT_DOUBLE_EQ(held.l2_bandwidth.gigabytes_per_second(), 1600.0);
  EXPECT_DOUBLE_EQ(held.hbm_bandwidth.gigabytes_per_second(), 1000.0);
  const DeviceProfile capped = load("tdp_w: 700\npower_limit_w: 500\n");
  const double scale = std::cbrt(500.0 / 700.0);  // 0.894
  EXPECT_NEAR(capped.peak(DType::kFp32).teraflops(), 10.0 * scale, 1e-9);
  EXPECT_EQ(capped.sustained_sm_clock_mhz, 1368);  // round(1530 x 0.894)
  EXPECT_EQ(load("tdp_w: 700\npower_limit_w: 700\n").peak(DType::kFp16).teraflops(), 100.0);
  const std::string base(kValidProfile);
  EXPECT_NE(load_error(base + "power_limit_w: 500\n").find("needs both power_limit_w"),
            std::string::npos);
  EXPECT_NE(load_error(base + "tdp_w: 400\npower_limit_w: 500\n").find("power_limit_w"),
            std::string::npos);
  EXPECT_NE(load_error(base + "sustained_sm_clock_mhz: 2000\n").find("sustained_sm_clock_mhz"),
            std::string::npos);
  EXPECT_NE(load_error(base + "sustained_sm_clock_mhz: 1400\ntdp_w: 700\npower_limit_w: 500\n")
                .find("not both"),
            std::string::npos);
}

TEST(HardwareProfile, PeaksAreStatedAtTheFilesSmCountAndClockWrittenIntoTheResolvedProfile) {
  ConfigDocument doc = ConfigDocument::parse_string(std::string(kValidProfile), "profile.yaml");
  doc.apply_override("sm_count=20");
  EXPECT_DOUBLE_EQ(load_hardware_profile(doc.root()).device.peak(DType::kFp16).teraflops(), 25.0);
  const std::string resolved = doc.resolved_yaml();
  EXPECT_NE(resolved.find("peak_flops_at: {sm_count: 80, sm_boost_clock_mhz: 1530}"),
            std::string::npos)
      << resolved;
  // The resolved profile runs again alike: its sm_count is 20, its peaks stated at 80 SMs.
  ConfigDocument again = ConfigDocument::parse_string(resolved, "resolved.yaml");
  EXPECT_DOUBLE_EQ(load_hardware_profile(again.root()).device.peak(DType::kFp16).teraflops(), 25.0);
  // A profile may state where its peaks hold; a file whose sm_count differs is then a what-if.
  ConfigDocument explicit_at = ConfigDocument::parse_string(
      std::string(kValidProfile) + "peak_flops_at: {sm_count: 160, sm_boost_clock_mhz: 1530}\n",
      "profile.yaml");
  EXPECT_DOUBLE_EQ(load_hardware_profile(explicit_at.root()).device.peak(DType::kFp32).teraflops(),
                   5.0);
}

TEST(HardwareProfile, AScaledPeakOutsideTheRangesIsAnErrorAtTheKeyThatScaledIt) {
  ConfigDocument doc = ConfigDocument::parse_string(
      replaced("fp16: 100TFLOP/s", "fp16: 900PFLOP/s"), "profile.yaml");
  doc.apply_override("sm_count=800");
  try {
    load_hardware_profile(doc.root());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set sm_count: scales the fp16 peak to 9 EFLOP/s, "
                                         "outside 1 GFLOP/s .. 1 EFLOP/s"),
              std::string::npos)
        << e.what();
  }
}

TEST(HardwareProfile, UnknownDtypeListsValidOnes) {
  const std::string what = load_error(replaced("fp16: 100TFLOP/s", "fp64: 9.7TFLOP/s"));
  EXPECT_NE(what.find("fp64"), std::string::npos) << what;
  EXPECT_NE(what.find("bf16"), std::string::npos) << what;
}

TEST(HardwareProfile, FractionsAndPcieGenerationAreChecked) {
  EXPECT_NE(load_error(replaced("compute_fraction: 0.9", "compute_fraction: 1.2"))
                .find("achievable.compute_fraction"),
            std::string::npos);
  EXPECT_NE(load_error(replaced("memory_fraction: 0.9", "memory_fraction: 0"))
                .find("achievable.memory_fraction"),
            std::string::npos);
  EXPECT_NE(
      load_error(replaced("pcie_generation: 3", "pcie_generation: 6")).find("pcie_generation"),
      std::string::npos);
  EXPECT_FALSE(load_error(replaced("peak_flops: {fp32: 10TFLOP/s, fp16: 100TFLOP/s}",
                                   "peak_flops: {fp16: 100TFLOP/s}"))
                   .empty());
}

// achievable.fp8_compute_fraction is the measured best fp8 matmul over the fp8 peak
// (test/data/hardware-specs/mamf_max_achievable_matmul_tflops_fp8.csv), to the profile's three
// decimals; every profile that has one names an accelerator of that table.
TEST(HardwareProfile, Fp8FractionIsTheMeasuredFp8MamfOverThePeak) {
  std::map<std::string, double> mamf;
  std::ifstream in(kData / "hardware-specs" / "mamf_max_achievable_matmul_tflops_fp8.csv");
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string name;
    std::string tflops;
    std::getline(fields, name, ',');
    std::getline(fields, tflops, ',');
    if (!tflops.empty() && std::isdigit(static_cast<unsigned char>(tflops.front()))) {
      mamf[name] = std::stod(tflops);
    }
  }
  const std::map<std::string, std::string> row_of{{"H100-SXM5-80GB", "NVIDIA H100 SXM"},
                                                  {"H200-SXM-141GB", "NVIDIA H200 SXM"},
                                                  {"B200-SXM-180GB", "NVIDIA B200 SXM"}};
  size_t with_fraction = 0;
  for (const auto& path : hardware_files()) {
    ConfigDocument doc = ConfigDocument::load_file(path);
    const HardwareProfile hw = load_hardware_profile(doc.root());
    if (hw.achievable.fp8_compute == 0.0) continue;
    ++with_fraction;
    SCOPED_TRACE(hw.device.name);
    ASSERT_TRUE(row_of.contains(hw.device.name));
    ASSERT_TRUE(mamf.contains(row_of.at(hw.device.name)));
    EXPECT_NEAR(hw.achievable.fp8_compute,
                mamf.at(row_of.at(hw.device.name)) / hw.device.peak(DType::kFp8).teraflops(),
                0.0005);
  }
  EXPECT_EQ(with_fraction, 3u);
  EXPECT_NE(load_error(replaced("memory_fraction: 0.9}",
                                "memory_fraction: 0.9, fp8_compute_fraction: 0.7}"))
                .find("achievable.fp8_compute_fraction"),
            std::string::npos);
}

TEST(HardwareProfile, DtypeNamesRoundTrip) {
  for (DType dtype :
       {DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16, DType::kFp8, DType::kInt8}) {
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
  EXPECT_EQ(dtype_bytes(DType::kBf16), 2);
  EXPECT_EQ(dtype_bytes(DType::kTf32), 4);
  EXPECT_FALSE(parse_dtype("fp64"));
}

}  // namespace
}  // namespace upsim
