#include "calibration/model_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

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
