#include "calibration/host_overhead_cpu_cost.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

Duration us(double v) {
  return Duration::from_us_f(v);
}

// t1 3, t4 5, defaults t2 11, t3 6, t5 4, body 1.5; aten::linear has every value, aten::view
// only a T5 (an op without launches).
HostOverheads test_params() {
  HostOverheads p;
  p.t1 = us(3);
  p.t4 = us(5);
  p.default_t2 = us(11);
  p.default_t3 = us(6);
  p.default_t5 = us(4);
  p.default_body = us(1.5);
  p.ops["aten::linear"] = OpHostOverheads{us(26), us(4.6), us(0.7)};
  p.ops["aten::view"] = OpHostOverheads{std::nullopt, std::nullopt, us(2.5)};
  return p;
}

Duration phase(const HostOverheadCpuCost& model, std::string_view op, HostPhase ph,
               uint32_t launch_index = 0) {
  return model.host_duration(HostOpDesc{op, ph, launch_index});
}

TEST(HostOverheadCpuCost, PhasesFollowSeedDefinitions) {
  const HostOverheadCpuCost model(test_params());
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kOpBegin), us(3 + 26));
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kLaunch, 0), us(5));
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kLaunch, 1), us(5 + 0.7));
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kOpEnd), us(4.6));
  EXPECT_EQ(phase(model, "aten::view", HostPhase::kOpBody), us(3 + 2.5));
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kMarker), Duration::zero());
}

TEST(HostOverheadCpuCost, WholeOpAddsUpToT1PlusT2PlusLaunchesPlusGapsPlusT3) {
  const HostOverheadCpuCost model(test_params());
  Duration total = phase(model, "aten::linear", HostPhase::kOpBegin);
  for (uint32_t i = 0; i < 3; ++i)
    total += phase(model, "aten::linear", HostPhase::kLaunch, i);
  total += phase(model, "aten::linear", HostPhase::kOpEnd);
  // T1 + T2 + 3 T4 + 2 T5 + T3 = 3 + 26 + 15 + 1.4 + 4.6 us.
  EXPECT_EQ(total, us(50));
}

TEST(HostOverheadCpuCost, UnknownOpFallsBackToDefaults) {
  const HostOverheadCpuCost model(test_params());
  EXPECT_EQ(phase(model, "aten::unknown", HostPhase::kOpBegin), us(3 + 11));
  EXPECT_EQ(phase(model, "aten::unknown", HostPhase::kLaunch, 2), us(5 + 4));
  EXPECT_EQ(phase(model, "aten::unknown", HostPhase::kOpEnd), us(6));
  EXPECT_EQ(phase(model, "aten::unknown", HostPhase::kOpBody), us(3 + 1.5));
}

TEST(HostOverheadCpuCost, MissingValueOfKnownOpFallsBackToDefault) {
  const HostOverheadCpuCost model(test_params());
  EXPECT_EQ(phase(model, "aten::view", HostPhase::kOpBegin), us(3 + 11));
  EXPECT_EQ(phase(model, "aten::view", HostPhase::kOpEnd), us(6));
}

TEST(HostOverheadCpuCost, RejectsNegativeValues) {
  HostOverheads p = test_params();
  p.t4 = us(-1);
  EXPECT_THROW(HostOverheadCpuCost{p}, std::invalid_argument);
  p = test_params();
  p.ops["aten::relu"] = OpHostOverheads{us(-2), std::nullopt, std::nullopt};
  EXPECT_THROW(HostOverheadCpuCost{p}, std::invalid_argument);
}

TEST(HostOverheadCpuCost, LoadsInlineDocument) {
  ConfigDocument doc = ConfigDocument::parse_string(
      "t1: 3us\nt4: 5us\ndefault: {t2: 11us, t3: 6us, t5: 4us, body: 1.5us}\n"
      "ops:\n  \"aten::linear\": {t2: 26us, t3: 4.6us, t5: 0.7us}\n"
      "  \"aten::view\": {t5: 2.5us}\n",
      "host.yaml");
  const HostOverheadCpuCost model = load_host_overheads(doc.root());
  doc.check_all_keys_used();
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kOpBegin), us(29));
  EXPECT_EQ(phase(model, "aten::view", HostPhase::kOpBody), us(5.5));
  EXPECT_EQ(phase(model, "aten::cat", HostPhase::kOpEnd), us(6));
}

TEST(HostOverheadCpuCost, LoaderRejectsMissingDefaultsAndBadEntries) {
  ConfigDocument missing =
      ConfigDocument::parse_string("t1: 3us\nt4: 5us\ndefault: {t2: 1us}\n", "host.yaml");
  EXPECT_THROW(load_host_overheads(missing.root()), ConfigError);
  ConfigDocument scalar = ConfigDocument::parse_string(
      "t1: 3us\nt4: 5us\ndefault: {t2: 1us, t3: 1us, t5: 1us, body: 1us}\nops: {\"aten::mm\": "
      "3us}\n",
      "host.yaml");
  EXPECT_THROW(load_host_overheads(scalar.root()), ConfigError);
  ConfigDocument unitless = ConfigDocument::parse_string(
      "t1: 3\nt4: 5us\ndefault: {t2: 1us, t3: 1us, t5: 1us, body: 1us}\n", "host.yaml");
  EXPECT_THROW(load_host_overheads(unitless.root()), ConfigError);
}

TEST(HostOverheadCpuCost, AnOverheadAboveOneSecondIsARangeError) {
  // "t4: 5s" for 5 us would make every launch take five seconds.
  ConfigDocument slip = ConfigDocument::parse_string(
      "t1: 3us\nt4: 5s\ndefault: {t2: 1us, t3: 1us, t5: 1us, body: 1us}\n", "host.yaml");
  try {
    load_host_overheads(slip.root());
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("host.yaml:2: t4: must be between 0 ps and 1 s, got 5 s"),
              std::string::npos)
        << e.what();
  }
}

// The shipped file: the values printed by scripts/extract_host_overheads.py on the 8 DLRM
// Kineto traces (configs/host/v100_pytorch_kineto.yaml).
TEST(HostOverheadCpuCost, ShippedV100FileLoadsWithMeasuredValues) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "host" / "v100_pytorch_kineto.yaml");
  const HostOverheadCpuCost model = load_host_overheads(doc.root());
  doc.check_all_keys_used();
  EXPECT_EQ(model.params().t1, us(2.869));
  EXPECT_EQ(model.params().t4, us(5.651));
  for (std::string_view op :
       {"aten::linear", "aten::relu", "aten::cat", "aten::bmm", "aten::index", "aten::sum",
        "aten::add_", "aten::to", "autograd::engine::evaluate_function: AddmmBackward0"}) {
    EXPECT_TRUE(model.params().ops.contains(op)) << op;
  }
  EXPECT_EQ(phase(model, "aten::linear", HostPhase::kOpBegin), us(2.869 + 25.964));
}

}  // namespace
}  // namespace upsim
