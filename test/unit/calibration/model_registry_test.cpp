#include "calibration/model_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

/// A small fp16 gelu: its time is mostly the per-kernel overhead.
KernelDesc memory_op_kernel_for_test() {
  KernelDesc k;
  k.cls = KernelClass::kMemoryBound;
  k.memory_op = MemoryOp::kGelu;
  k.dtype = DType::kFp16;
  k.bytes_read = 2048;
  k.bytes_written = 2048;
  return k;
}

HardwareProfile a100() {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_40gb.yaml");
  return load_hardware_profile(doc.root());
}

// Returns the ConfigError's what() for building `yaml` with `build`; fails when nothing throws.
template <typename Build>
std::string build_error(std::string_view yaml, Build build) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, (kConfigs / "scenario.yaml").string());
  try {
    build(doc.root());
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for " << yaml;
  return "";
}

TEST(ModelRegistry, UnknownNamesListTheValidOnes) {
  const HardwareProfile hw = a100();
  const std::string kernel =
      build_error("model: rooflin\n", [&](const ConfigNode& n) { make_kernel_cost_model(n, hw); });
  EXPECT_NE(kernel.find("roofline"), std::string::npos) << kernel;
  const std::string cpu =
      build_error("model: overheads\n", [](const ConfigNode& n) { make_cpu_cost_model(n); });
  EXPECT_NE(cpu.find("host_overheads"), std::string::npos) << cpu;
  const std::string collective =
      build_error("model: ring\n", [&](const ConfigNode& n) { make_collective_cost_model(n, hw); });
  EXPECT_NE(collective.find("alpha_beta"), std::string::npos) << collective;
}

TEST(ModelRegistry, BuildsRooflineWithProfileFractions) {
  const HardwareProfile hw = a100();
  ConfigDocument doc = ConfigDocument::parse_string("model: roofline\n", "scenario.yaml");
  const auto model = make_kernel_cost_model(doc.root(), hw);
  doc.check_all_keys_used();
  KernelDesc kd;
  kd.cls = KernelClass::kMemoryBound;
  kd.bytes_read = 1391.103e6 / 2;
  kd.bytes_written = 1391.103e6 / 2;
  // 1.391103e9 bytes at 1555 GB/s x 0.8946 = 1391.103 GB/s: 1 ms, + 5 us.
  EXPECT_NEAR(model->kernel_duration(kd, hw.device).us(), 1005.0, 1e-3);
}

// The calibrated model's per-kernel overhead: the scenario's kernel_overhead, else the hardware
// profile's, else the calibration file's 5 us, which borrowed_calibration then names.
TEST(ModelRegistry, CalibratedKernelOverheadComesFromTheProfileUnlessOverridden) {
  HardwareProfile hw = a100();
  ASSERT_TRUE(hw.kernel_overhead.has_value());
  EXPECT_EQ(*hw.kernel_overhead, Duration::from_ns(3500));
  const std::string calibrated =
      "model: calibrated\ncalibration: calibration/a100_llmcompass.yaml\n";
  const KernelDesc gelu = memory_op_kernel_for_test();
  const auto duration_with = [&](const std::string& yaml, const HardwareProfile& profile) {
    ConfigDocument doc = ConfigDocument::parse_string(yaml, (kConfigs / "scenario.yaml").string());
    const auto model = make_kernel_cost_model(doc.root(), profile);
    return std::pair{model->kernel_duration(gelu, profile.device),
                     model->borrowed_calibration(gelu, profile.device).value_or("")};
  };
  const auto [from_profile, note_profile] = duration_with(calibrated, hw);
  const auto [overridden, note_overridden] =
      duration_with(calibrated + "kernel_overhead: 10us\n", hw);
  EXPECT_EQ(overridden - from_profile, Duration::from_ns(6500));
  EXPECT_EQ(note_profile.find("kernel overhead"), std::string::npos) << note_profile;
  hw.kernel_overhead.reset();
  // The file's fallback is its fitted GPU's overhead (the A100-80GB profile's 3.5 us), the same
  // as this profile's: the duration is unchanged, and the note says where it came from.
  const auto [from_calibration, note_calibration] = duration_with(calibrated, hw);
  EXPECT_EQ(from_calibration, from_profile);
  EXPECT_NE(note_calibration.find("kernel overhead: the hardware profile of A100-SXM4-40GB "
                                  "states none, the calibration's 3.5 us (its fitted GPU's)"),
            std::string::npos)
      << note_calibration;
}

TEST(ModelRegistry, BuildsHostOverheadsFromReferencedFile) {
  ConfigDocument doc = ConfigDocument::parse_string(
      "model: host_overheads\noverheads: host/v100_pytorch_kineto.yaml\n",
      (kConfigs / "scenario.yaml").string());
  const auto model = make_cpu_cost_model(doc.root());
  doc.check_all_keys_used();
  EXPECT_EQ(model->host_duration({"aten::relu", HostPhase::kLaunch, 0}),
            Duration::from_us_f(5.651));
}

TEST(ModelRegistry, BuildsHostOverheadsFromInlineMap) {
  ConfigDocument doc = ConfigDocument::parse_string(
      "model: host_overheads\noverheads:\n  t1: 1us\n  t4: 2us\n"
      "  default: {t2: 3us, t3: 4us, t5: 5us, body: 6us}\n",
      "scenario.yaml");
  const auto model = make_cpu_cost_model(doc.root());
  doc.check_all_keys_used();
  EXPECT_EQ(model->host_duration({"aten::mm", HostPhase::kOpBody, 0}), Duration::from_us(7));
}

TEST(ModelRegistry, BuildsAlphaBetaForLinkKind) {
  const HardwareProfile hw = a100();
  ConfigDocument doc =
      ConfigDocument::parse_string("model: alpha_beta\nlink: nvlink3\n", "scenario.yaml");
  const auto model = make_collective_cost_model(doc.root(), hw);
  doc.check_all_keys_used();
  CollectiveDesc c;
  c.kind = CollectiveKind::kAllReduce;
  c.members = {0, 1, 2, 3};
  c.bytes = 8;
  // Latency-bound: 6 x 2.146 us plus 12 bytes at 233.7 GB/s (0.05 ns).
  EXPECT_NEAR(model->collective_duration(c).us(), 12.876, 1e-3);
}

}  // namespace
}  // namespace upsim
