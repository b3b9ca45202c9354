// Every key a scenario accepts changes the result or is warned about: the platform's
// what-ifs run end to end through build_scenario and the engine as `upsim run` does
// (run_to_steady_state), and keys no active model reads are named in the scenario's warnings.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/scenario.h"
#include "tools/steady_state.h"

namespace upsim::cli {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

struct Outcome {
  double ms = 0.0;
  std::vector<std::string> warnings;
};

/// `scenario` (under configs/) with `sets` applied, run for two iterations (a trace workload:
/// its measured ones).
Outcome run(const std::string& scenario, const std::vector<std::string>& sets) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / scenario);
  if (!scenario.starts_with("trace_")) doc.apply_override("simulation.iterations=2");
  for (const std::string& set : sets)
    doc.apply_override(set);
  const SteadyRun r = run_to_steady_state(doc);
  return Outcome{r.summary.predicted_iteration_time.seconds() * 1e3, r.scenario.warnings};
}

/// The warnings of `r` that contain `text`.
std::vector<std::string> warnings_with(const Outcome& r, const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& w : r.warnings) {
    if (w.find(text) != std::string::npos) out.push_back(w);
  }
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ---- Physical what-ifs end to end: never faster with less -----------------------------------

/// A DLRM and a transformer (GPT-2 small, two layers) on 4x A100 over NVLink3 and PCIe Gen4,
/// and both on two DGX A100 nodes over HDR InfiniBand for the NIC.
struct Case {
  std::string scenario;
  std::vector<std::string> base;
};
const Case kDlrm{"dlrm_4gpu.yaml", {}};
const Case kGpt2{"gpt2_4gpu.yaml", {"workload.layers=2"}};
const std::string kCluster = (kConfigs / "topologies" / "dgx_a100_cluster.yaml").string();
const Case kDlrmTwoNodes{"dlrm_4gpu.yaml",
                         {"platform.topology=" + kCluster, "platform.topology.nodes=2",
                          "platform.gpus=16", "workload.global_batch=16384"}};
const Case kGpt2TwoNodes{
    "gpt2_4gpu.yaml",
    {"workload.layers=2", "platform.topology=" + kCluster, "platform.topology.nodes=2",
     "platform.gpus=16", "workload.global_batch=512", "workload.parallelism.data=16"}};

/// Runs `c` with `key` at each of `values`, given least first: each run is at least as slow as
/// the next (never faster with less), and the least is strictly slower than the most when
/// `moves` (the what-if acts on this scenario). Returns the times.
std::vector<double> expect_never_faster_with_less(const Case& c, const std::string& key,
                                                  const std::vector<std::string>& values,
                                                  bool moves = true) {
  std::vector<double> ms;
  for (const std::string& value : values) {
    std::vector<std::string> sets = c.base;
    sets.push_back(key + "=" + value);
    ms.push_back(run(c.scenario, sets).ms);
  }
  for (size_t i = 1; i < ms.size(); ++i) {
    EXPECT_GE(ms[i - 1], ms[i]) << c.scenario << ": " << key << "=" << values[i - 1] << " runs "
                                << ms[i - 1] << " ms, " << key << "=" << values[i] << " " << ms[i]
                                << " ms";
  }
  if (moves) {
    EXPECT_GT(ms.front(), ms.back() * 1.001)
        << c.scenario << ": " << key << " from " << values.front() << " to " << values.back()
        << " changes nothing";
  }
  return ms;
}

TEST(ScenarioWhatIfs, FewerSmsOrALowerClockIsNeverFaster) {
  for (const Case& c : {kDlrm, kGpt2}) {
    expect_never_faster_with_less(c, "platform.gpu.sm_count", {"13", "27", "54", "107", "108"});
    expect_never_faster_with_less(c, "platform.gpu.sm_boost_clock_mhz",
                                  {"350", "700", "1410", "2800"});
  }
  // Before peaks followed the SMs, 27 / 54 / 108 SMs gave 220.8 / 222.0 / 233.6 ms for gpt2_4gpu
  // (fewer SMs faster), and 700 vs 2800 MHz the same time.
  const Outcome sms27 = run("gpt2_4gpu.yaml", {"platform.gpu.sm_count=27"});
  const Outcome sms108 = run("gpt2_4gpu.yaml", {});
  EXPECT_GT(sms27.ms, 2.0 * sms108.ms);
}

TEST(ScenarioWhatIfs, LessHbmBandwidthIsNeverFaster) {
  for (const Case& c : {kDlrm, kGpt2}) {
    expect_never_faster_with_less(c, "platform.gpu.hbm.bandwidth",
                                  {"300GB/s", "800GB/s", "1555GB/s", "4TB/s"});
  }
}

TEST(ScenarioWhatIfs, LessNvlinkBandwidthIsNeverFaster) {
  for (const Case& c : {kDlrm, kGpt2}) {
    expect_never_faster_with_less(c, "platform.topology.node.link_kinds.nvlink3.bandwidth",
                                  {"1GB/s", "5GB/s", "25GB/s", "100GB/s"});
  }
}

TEST(ScenarioWhatIfs, AStaticPersistentScheduleOnAModelWithoutTilesSaysItSharesInProportion) {
  const auto roofline = [](const std::string& schedule) {
    return run(kGpt2.scenario, {"workload.layers=2",
                                "platform.kernels={model: roofline, "
                                "gemm_schedule: " +
                                    schedule + "}"});
  };
  const Outcome asked = roofline("static_persistent");
  EXPECT_EQ(warnings_with(asked, "states no tiles").size(), 1U);
  const Outcome tiles = roofline("per_tile");
  EXPECT_TRUE(warnings_with(tiles, "states no tiles").empty());
  EXPECT_EQ(asked.ms, tiles.ms);
}

TEST(ScenarioWhatIfs, AnOlderPcieGenerationIsNeverFaster) {
  // DLRM copies its inputs to the GPUs each step: the GPU's PCIe Gen3 caps the Gen4 links.
  const std::vector<double> dlrm =
      expect_never_faster_with_less(kDlrm, "platform.gpu.pcie_generation", {"3", "4", "5"});
  EXPECT_GT(dlrm[0], dlrm[1] * 1.01);
  // Gen 5 on the topology's Gen4 links runs at Gen4 (and says so, below).
  EXPECT_EQ(dlrm[1], dlrm[2]);
  // GPT-2's input copy is a few kB, hidden behind the step: never faster, not visibly slower.
  expect_never_faster_with_less(kGpt2, "platform.gpu.pcie_generation", {"3", "4", "5"}, false);
}

TEST(ScenarioWhatIfs, LessNicBandwidthIsNeverFaster) {
  for (const Case& c : {kDlrmTwoNodes, kGpt2TwoNodes}) {
    expect_never_faster_with_less(c, "platform.topology.network.nic_link.bandwidth",
                                  {"10Gbit/s", "50Gbit/s", "200Gbit/s", "800Gbit/s"});
  }
}

// ---- Keys no model reads are warned about ------------------------------------------------------

TEST(ScenarioUnusedKeys, ShippedScenariosWarnAboutNoKey) {
  for (const std::string scenario : {"dlrm_4gpu.yaml", "gpt2_4gpu.yaml", "trace_dlrm_v100.yaml"}) {
    const Outcome r =
        run(scenario, scenario == "gpt2_4gpu.yaml" ? kGpt2.base : std::vector<std::string>{});
    EXPECT_TRUE(warnings_with(r, "change nothing").empty()) << scenario;
    EXPECT_TRUE(warnings_with(r, "changes nothing").empty()) << scenario;
  }
}

// Before the warning, with the seed paper's curve, link bandwidths of 1 to 1000 GB/s changed
// nothing and nothing said so.
TEST(ScenarioUnusedKeys, SeedCurveNamesTheFabricLinksItIgnores) {
  const std::vector<std::string> seed{"platform.interconnect={model: seed_curve}",
                                      "workload.layers=2"};
  std::vector<std::string> slow = seed;
  slow.push_back("platform.topology.node.link_kinds.nvlink3.bandwidth=1GB/s");
  std::vector<std::string> fast = seed;
  fast.push_back("platform.topology.node.link_kinds.nvlink3.bandwidth=1000GB/s");
  const Outcome a = run("gpt2_4gpu.yaml", slow);
  const Outcome b = run("gpt2_4gpu.yaml", fast);
  EXPECT_EQ(a.ms, b.ms);  // the model does not read them ...
  const std::vector<std::string> w = warnings_with(a, "interconnect model `seed_curve`");
  ASSERT_EQ(w.size(), 1u);  // ... and says so, naming the model, its basis and the keys
  EXPECT_TRUE(contains(w[0], "fitted size -> bandwidth curves")) << w[0];
  EXPECT_TRUE(contains(w[0], "not the fabric's links")) << w[0];
  EXPECT_TRUE(contains(w[0], "`platform.topology.node.link_kinds.nvlink3.bandwidth` (--set)"))
      << w[0];
  EXPECT_TRUE(contains(w[0], "`platform.topology.node.link_kinds.pcie4.bandwidth` (")) << w[0];
  EXPECT_TRUE(contains(w[0], "a100x4_nvlink.yaml:19)")) << w[0];
  EXPECT_TRUE(contains(w[0], "`platform.topology.node.links[0].count`")) << w[0];
  // The fabric's structure is read (GPU count, nodes): no device or link kind is named.
  EXPECT_FALSE(contains(w[0], "devices")) << w[0];
  EXPECT_FALSE(contains(w[0], ".kind")) << w[0];
  // alpha_beta prices collectives with its own link: the same warning names it.
  const Outcome alpha =
      run("dlrm_4gpu.yaml", {"platform.interconnect={model: alpha_beta, link: nvlink3}"});
  ASSERT_EQ(warnings_with(alpha, "interconnect model `alpha_beta`").size(), 1u);
}

TEST(ScenarioUnusedKeys, PcieGenerationThatNoLinkFollowsNamesBothKeys) {
  const Outcome gen5 = run("dlrm_4gpu.yaml", {"platform.gpu.pcie_generation=5"});
  const std::vector<std::string> w = warnings_with(gen5, "platform.gpu.pcie_generation is 5");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(contains(w[0], "instead of the profile's 4")) << w[0];
  EXPECT_TRUE(contains(w[0], "`platform.topology.node.link_kinds.pcie4.bandwidth` (")) << w[0];
  EXPECT_TRUE(contains(w[0], "31.5 GB/s")) << w[0];
  EXPECT_TRUE(contains(w[0], "slower of its two ends")) << w[0];
  // Gen 3 moves the links: no warning.
  const Outcome gen3 = run("dlrm_4gpu.yaml", {"platform.gpu.pcie_generation=3"});
  EXPECT_TRUE(warnings_with(gen3, "pcie_generation").empty());
  // With a host link of its own, alpha_beta does not read the generation.
  const Outcome host_link =
      run("trace_dlrm_v100.yaml", {"workload.mode=model", "platform.interconnect.host_link=pcie4",
                                   "platform.gpu.pcie_generation=4"});
  const std::vector<std::string> unread = warnings_with(host_link, "host_link sets");
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_TRUE(contains(unread[0], "`platform.gpu.pcie_generation` (--set)")) << unread[0];
}

TEST(ScenarioUnusedKeys, HardwareFactsTheKernelModelDoesNotReadAreNamedOnceChanged) {
  const std::vector<std::string> roofline{"platform.kernels={model: roofline}"};
  EXPECT_TRUE(warnings_with(run("dlrm_4gpu.yaml", roofline), "roofline").empty());
  std::vector<std::string> sets = roofline;
  sets.push_back("platform.gpu.l2.size=80MiB");
  sets.push_back("platform.gpu.kernel_overhead=1us");
  const Outcome r = run("dlrm_4gpu.yaml", sets);
  const std::vector<std::string> l2 = warnings_with(r, "no cache model");
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_TRUE(contains(l2[0], "`platform.gpu.l2.size` (--set)")) << l2[0];
  const std::vector<std::string> overhead = warnings_with(r, "adds its own kernel_overhead");
  ASSERT_EQ(overhead.size(), 1u);
  EXPECT_TRUE(contains(overhead[0], "`platform.gpu.kernel_overhead` (--set)")) << overhead[0];
  // Under the calibrated model a section's kernel_overhead replaces the profile's.
  const Outcome calibrated = run("dlrm_4gpu.yaml", {"platform.kernels.kernel_overhead=2us",
                                                    "platform.gpu.kernel_overhead=1us"});
  const std::vector<std::string> replaced = warnings_with(calibrated, "replaces the hardware");
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_TRUE(contains(replaced[0], "`platform.gpu.kernel_overhead` (--set)")) << replaced[0];
}

TEST(ScenarioUnusedKeys, CalibrationValuesARunDoesNotReadAreNamedOnceChanged) {
  const Outcome r =
      run("dlrm_4gpu.yaml", {"platform.kernels.calibration.kernel_overhead=9us",
                             "platform.kernels.calibration.measurement.gemm.floor=1us"});
  const std::vector<std::string> fallback = warnings_with(r, "calibration file's fallback");
  ASSERT_EQ(fallback.size(), 1u);
  EXPECT_TRUE(contains(fallback[0], "`platform.kernels.calibration.kernel_overhead` (--set)"))
      << fallback[0];
  const std::vector<std::string> validation = warnings_with(r, "upsim validate kernels");
  ASSERT_EQ(validation.size(), 1u);
  EXPECT_TRUE(contains(validation[0], "`platform.kernels.calibration.measurement.gemm.floor`"))
      << validation[0];
}

TEST(ScenarioUnusedKeys, PlatformModelsAMeasuredTraceDoesNotUseAreNamedOnceChanged) {
  // trace_dlrm_v100 replays the measured kernel and host times: a what-if on the platform's
  // models or the GPU's facts changes nothing.
  const Outcome r =
      run("trace_dlrm_v100.yaml", {"platform.host.overheads.t1=10us", "platform.gpu.sm_count=40",
                                   "platform.interconnect.bandwidth=1GB/s"});
  const std::vector<std::string> host = warnings_with(r, "replays its measured host time");
  ASSERT_EQ(host.size(), 1u);
  EXPECT_TRUE(contains(host[0], "`platform.host.overheads.t1` (--set)")) << host[0];
  const std::vector<std::string> gpu = warnings_with(r, "replays its measured kernel");
  ASSERT_FALSE(gpu.empty());
  std::string all;
  for (const std::string& w : gpu)
    all += w + "\n";
  EXPECT_TRUE(contains(all, "`platform.gpu.sm_count` (--set)")) << all;
  EXPECT_TRUE(contains(all, "`platform.interconnect.bandwidth` (--set)")) << all;
  EXPECT_EQ(r.ms, run("trace_dlrm_v100.yaml", {}).ms);
}

TEST(ScenarioUnusedKeys, MoreModelChoicesThatLeaveAKeyUnreadNameIt) {
  // A trace's own T1-T5 (host: modelled) replace platform.host's model.
  const Outcome modelled =
      run("trace_dlrm_v100.yaml",
          {"workload.mode=model", "workload.host=modelled", "platform.host.overheads.t1=10us"});
  const std::vector<std::string> host = warnings_with(modelled, "host overheads measured with it");
  ASSERT_EQ(host.size(), 1u);
  EXPECT_TRUE(contains(host[0], "`platform.host.overheads.t1` (--set)")) << host[0];
  // A scenario's attention section replaces the calibration file's.
  const Outcome attention =
      run("gpt2_4gpu.yaml", {"workload.layers=2", "platform.kernels.attention={block_m: 64}",
                             "platform.kernels.calibration.attention={block_m: 32}"});
  const std::vector<std::string> replaced =
      warnings_with(attention, "calibration file's attention");
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_TRUE(contains(replaced[0], "`platform.kernels.calibration.attention` (--set)"))
      << replaced[0];
  // The roofline has no fp8 fraction.
  const Outcome fp8 = run(
      "dlrm_4gpu.yaml", {"platform.kernels={model: roofline}",
                         "platform.gpu=" + (kConfigs / "hardware" / "h100_sxm5_80gb.yaml").string(),
                         "platform.gpu.achievable.fp8_compute_fraction=0.5"});
  const std::vector<std::string> rate = warnings_with(fp8, "prices fp8 at the fp8 peak");
  ASSERT_EQ(rate.size(), 1u);
  EXPECT_TRUE(contains(rate[0], "`platform.gpu.achievable.fp8_compute_fraction` (--set)"))
      << rate[0];
  // A fabric without PCIe at its GPUs (NVLink-C2C to the CPU, as Grace Hopper) has nothing for
  // the GPU's PCIe generation to cap.
  const Outcome c2c =
      run("dlrm_4gpu.yaml",
          {"platform.topology={name: c2c, node: {devices: [{id: cpu, kind: cpu}, {id: gpu, kind: "
           "gpu, count: 4}], links: [{mesh: gpu*, kind: nvlink3, bandwidth: 100GB/s, latency: "
           "700ns}, {from: gpu*, to: cpu, kind: c2c, bandwidth: 450GB/s, latency: 1us}]}}",
           "platform.gpu.pcie_generation=3"});
  const std::vector<std::string> no_pcie = warnings_with(c2c, "no PCIe link at a GPU");
  ASSERT_EQ(no_pcie.size(), 1u);
  EXPECT_TRUE(contains(no_pcie[0], "`platform.gpu.pcie_generation` (--set)")) << no_pcie[0];
}

// `workload.attention` names the fused kernel, and the H100 calibration prices each with its own
// section (published FlashAttention-3 paper figures): FA3 fastest, FA2 slowest, no borrowed
// attention parameters; `flash` is FlashAttention-2.
TEST(ScenarioKeys, AttentionImplementationsArePricedApartOnH100) {
  std::vector<double> ms;
  for (const char* attention : {"flash", "flash2", "flash3", "cudnn"}) {
    const Outcome r = run("mixtral_8x7b_ep8.yaml",
                          {"workload.layers=2", std::string("workload.attention=") + attention});
    EXPECT_TRUE(warnings_with(r, "attention").empty()) << attention;
    ms.push_back(r.ms);
  }
  EXPECT_EQ(ms[0], ms[1]);
  EXPECT_LT(ms[2], ms[3]);
  EXPECT_LT(ms[3], ms[1]);
  // A scenario's attention section that none of the run's kernels is priced with says so.
  const Outcome unused =
      run("mixtral_8x7b_ep8.yaml", {"workload.layers=2", "workload.attention=cudnn",
                                    "platform.kernels.attention={flash3: {block_m: 64}}"});
  const std::vector<std::string> nothing = warnings_with(unused, "the section changes nothing");
  ASSERT_EQ(nothing.size(), 1u);
  EXPECT_TRUE(contains(nothing[0], "platform.kernels.attention.flash3")) << nothing[0];
  EXPECT_TRUE(contains(nothing[0], "the run has cudnn")) << nothing[0];
  const Outcome used =
      run("mixtral_8x7b_ep8.yaml", {"workload.layers=2", "workload.attention=cudnn",
                                    "platform.kernels.attention={cudnn: {block_m: 64}}"});
  EXPECT_TRUE(warnings_with(used, "the section changes nothing").empty());
  EXPECT_NE(used.ms, ms[3]);
  // FlashAttention-3 exists for Hopper only: on an A100 the scenario is refused at its key.
  try {
    run("mixtral_8x7b_ep8.yaml",
        {"workload.layers=2", "workload.attention=flash3",
         "platform.gpu=" + (kConfigs / "hardware" / "a100_sxm4_80gb.yaml").string()});
    ADD_FAILURE() << "priced FlashAttention-3 on an A100";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "workload.attention")) << e.what();
    EXPECT_TRUE(contains(e.what(), "compute capability 9.0 (Hopper) only")) << e.what();
  }
}

}  // namespace
}  // namespace upsim::cli
