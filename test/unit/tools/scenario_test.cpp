// build_scenario with a test registry: any Workload runs through the composition root, which
// never names a family, and the per-GPU memory check (platform.memory_check).
#include "tools/scenario.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/config/config_error.h"

namespace upsim::cli {
namespace {

/// A made-up family: `ranks` GPUs run one op per iteration; its footprint is `memory` bytes of
/// weights (the key `memory`, a byte size) on rank 0, half as many of gradients, and `reserve`
/// bytes of caching-allocator reserve.
class FakeWorkload final : public Workload {
 public:
  explicit FakeWorkload(const ConfigNode& node)
      : memory_(node.get_bytes_or("memory", 0)),
        reserve_(node.get_bytes_or("reserve", 0)),
        replays_(node.get_bool_or("replays", false)) {}

  bool simulates_iterations() const override { return !replays_; }

  WorkloadBuild build(const WorkloadPlatform& platform, TaskGraph& graph) override {
    WorkloadBuild b;
    const uint32_t iterations = replays_ ? 2 : platform.iterations;
    for (uint32_t r = 0; r < platform.gpus; ++r) {
      const RankId rank = graph.add_rank(RankInfo{"fake " + std::to_string(r), 1, {"compute"}});
      for (uint32_t it = 0; it < iterations; ++it) {
        graph.add_iteration_mark(rank, 0, it);
        graph.add_cpu_op(rank, 0, "fake::op", HostPhase::kOpBody);
      }
    }
    b.iterations = iterations;
    b.warmup_iterations = replays_ ? 1 : platform.warmup_iterations;
    b.description.push_back(fmt_line(platform));
    b.warnings.push_back("a fake workload");
    b.represented_gpus = 2 * platform.gpus;
    if (memory_ > 0) {
      MemoryFootprint m;
      m.owner = "fake 0";
      m.parts.push_back({"weights", memory_});
      m.parts.push_back({"gradients", memory_ / 2});
      if (reserve_ > 0) m.parts.push_back({"allocator reserve", reserve_});
      b.memory = std::move(m);
    }
    return b;
  }

 private:
  static std::string fmt_line(const WorkloadPlatform& p) {
    return "workload: fake on " + std::to_string(p.gpus) + " GPUs, " +
           std::to_string(p.iterations) + " iterations";
  }

  int64_t memory_;
  int64_t reserve_;
  bool replays_;
};

WorkloadRegistry fake_registry() {
  WorkloadRegistry r;
  r.add("fake", [](const ConfigNode& node) { return std::make_unique<FakeWorkload>(node); });
  return r;
}

std::string scenario_yaml(const std::string& workload, const std::string& platform_extra = "",
                          const std::string& tail = "") {
  const std::string configs = UPSIM_CONFIGS_DIR;
  return "platform:\n"
         "  gpus: 2\n"
         "  gpu: " +
         configs + "/hardware/a100_sxm4_40gb.yaml\n" + platform_extra +
         "  kernels: {model: roofline}\n"
         "  host: {model: host_overheads, overheads: " +
         configs + "/host/v100_pytorch_kineto.yaml}\n" +
         "  interconnect: {model: alpha_beta, link: nvlink3}\n"
         "workload: " +
         workload + "\n" + tail;
}

Scenario build(const std::string& yaml) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "scenario.yaml");
  return build_scenario(doc, fake_registry());
}

std::string error_of(const std::string& yaml) {
  try {
    build(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, AnyRegisteredWorkloadRunsThroughTheCompositionRoot) {
  const Scenario s = build(scenario_yaml("{model: fake}", "", "simulation: {iterations: 4}\n"));
  EXPECT_TRUE(s.graph.sealed());
  EXPECT_EQ(s.graph.rank_count(), 2U);
  EXPECT_EQ(s.iterations, 4U);
  EXPECT_EQ(s.warmup_iterations, 1U);
  EXPECT_EQ(s.represented_gpus, 4U);
  EXPECT_EQ(s.warnings, (std::vector<std::string>{"a fake workload"}));
  EXPECT_NE(s.description.find("\nworkload: fake on 2 GPUs, 4 iterations\n"), std::string::npos)
      << s.description;
  EXPECT_NE(s.description.find("\nwarning: a fake workload\n"), std::string::npos) << s.description;
  // No footprint, no memory line.
  EXPECT_EQ(s.description.find("memory per GPU"), std::string::npos) << s.description;
}

TEST(Scenario, AGraphAboveTheTaskLimitIsAnErrorAtTheWorkload) {
  ConfigDocument doc = ConfigDocument::parse_string(
      scenario_yaml("{model: fake}", "", "simulation: {iterations: 4}\n"), "scenario.yaml");
  try {
    build_scenario(doc, fake_registry(), kFirstChosenIterations, {.max_tasks = 3});
    ADD_FAILURE() << "a graph above 3 tasks was built";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("scenario.yaml:7: workload: the run needs more than 3 "
                                         "tasks (about 384 B of memory at 128 B a task)"),
              std::string::npos)
        << e.what();
  }
  // The default limit is the machine's memory: far above what a test machine's tests build.
  EXPECT_GE(machine_task_limit(128), size_t{1} << 20);
}

// Two runs at once share the limit: a graph of 16 tasks fits a limit of 20 alone, not half of it
// beside another run; that failure is one a caller can tell apart and run again alone.
TEST(Scenario, AGraphAboveItsShareOfTheLimitIsASharedMemoryLimitError) {
  const std::string yaml = scenario_yaml("{model: fake}", "", "simulation: {iterations: 4}\n");
  ConfigDocument alone = ConfigDocument::parse_string(yaml, "scenario.yaml");
  EXPECT_EQ(build_scenario(alone, fake_registry(), kFirstChosenIterations, {.max_tasks = 20})
                .graph.task_count(),
            16U);
  ConfigDocument shared = ConfigDocument::parse_string(yaml, "scenario.yaml");
  try {
    build_scenario(shared, fake_registry(), kFirstChosenIterations,
                   {.max_tasks = 20, .memory_shares = 2});
    ADD_FAILURE() << "a graph of 16 tasks was built within half of 20";
  } catch (const SharedMemoryLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("needs more than 10 tasks"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("shared by 2 runs at once"), std::string::npos)
        << e.what();
  }
}

TEST(Scenario, UnknownWorkloadListsTheRegistrysNames) {
  const std::string e = error_of(scenario_yaml("{model: dlrm}"));
  EXPECT_NE(e.find("workload.model"), std::string::npos) << e;
  EXPECT_NE(e.find("fake"), std::string::npos) << e;
}

TEST(Scenario, ReplayingWorkloadsRefuseTheSimulationAndMemoryKeys) {
  EXPECT_NO_THROW(build(scenario_yaml("{model: fake, replays: true}")));
  for (const std::string& extra : {std::string("simulation: {iterations: 4}\n"), std::string()}) {
    const std::string platform = extra.empty() ? "  memory_check: warn\n" : "";
    const std::string e = error_of(scenario_yaml("{model: fake, replays: true}", platform, extra));
    EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  }
}

TEST(Scenario, TraceGpuNamesMatchTheirHardwareProfilesOnly) {
  // CUDA's device names (Kineto deviceProperties) against the shipped profiles' names.
  EXPECT_TRUE(gpu_names_match("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"));
  EXPECT_TRUE(gpu_names_match("NVIDIA GeForce RTX 2080 Ti", "RTX-2080-Ti"));
  EXPECT_TRUE(gpu_names_match("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"));
  EXPECT_TRUE(gpu_names_match("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"));
  EXPECT_TRUE(gpu_names_match("Quadro GV100", "Quadro-GV100"));
  EXPECT_TRUE(gpu_names_match("NVIDIA H200", "H200-SXM-141GB"));
  EXPECT_FALSE(gpu_names_match("Tesla V100-SXM2-32GB", "V100-SXM2-16GB"));
  EXPECT_FALSE(gpu_names_match("Tesla V100-SXM2-32GB", "A100-SXM4-40GB"));
  EXPECT_FALSE(gpu_names_match("NVIDIA A100-SXM4-80GB", "A100-SXM4-40GB"));
  // Spellings the rule does not recognise do not match: a what-if, never a claimed accuracy.
  EXPECT_FALSE(gpu_names_match("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"));
  EXPECT_FALSE(gpu_names_match("", "V100-SXM2-32GB"));
  EXPECT_FALSE(gpu_names_match("NVIDIA", "V100-SXM2-32GB"));
}

TEST(Scenario, FootprintIsPrintedPerGpu) {
  const Scenario s = build(scenario_yaml("{model: fake, memory: 2GiB}"));
  EXPECT_NE(s.description.find("\nmemory per GPU (fake 0): weights 2 GiB, gradients 1 GiB, "
                               "total 3 GiB of 40 GiB (A100-SXM4-40GB)\n"),
            std::string::npos)
      << s.description;
}

TEST(Scenario, FootprintAboveTheGpusMemoryIsAnErrorNamingGpuNeedAndCapacity) {
  const std::string e = error_of(scenario_yaml("{model: fake, memory: 40GiB}"));
  EXPECT_NE(e.find("workload"), std::string::npos) << e;
  EXPECT_NE(e.find("A100-SXM4-40GB"), std::string::npos) << e;
  EXPECT_NE(e.find("60 GiB"), std::string::npos) << e;  // the need
  EXPECT_NE(e.find("40 GiB"), std::string::npos) << e;  // the capacity
  EXPECT_NE(e.find("fake 0"), std::string::npos) << e;  // whose
  EXPECT_NE(e.find("memory_check: warn"), std::string::npos) << e;
  const std::string bad = error_of(scenario_yaml("{model: fake}", "  memory_check: maybe\n"));
  EXPECT_NE(bad.find("platform.memory_check"), std::string::npos) << bad;
}

TEST(Scenario, TheAllocatorsReserveAboveTheGpusMemoryWarnsOfRetriesInsteadOfRefusing) {
  // 30 GiB allocated fits the 40 GiB; with 15 GiB of reserve it would not: the caching
  // allocator gives its cache back and retries, so the run goes on, with a warning.
  const Scenario s = build(scenario_yaml("{model: fake, memory: 20GiB, reserve: 15GiB}"));
  EXPECT_TRUE(s.graph.sealed());
  bool warned = false;
  for (const std::string& w : s.warnings)
    warned = warned || w.find("cudaMalloc retries") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_NE(s.description.find("allocator reserve 15 GiB, total 45 GiB of 40 GiB"),
            std::string::npos)
      << s.description;
  // What is allocated must fit.
  const std::string e = error_of(scenario_yaml("{model: fake, memory: 30GiB, reserve: 1GiB}"));
  EXPECT_NE(e.find("needs 45 GiB"), std::string::npos) << e;
}

// A footprint within the memory model's largest held-out underestimate (8.45%) of the GPU's
// memory warns that the step may reach cudaMalloc retries; one further below does not.
TEST(Scenario, AFootprintWithinTheMemoryModelsErrorOfTheGpuWarnsOfRetries) {
  const auto margin_warnings = [](const Scenario& s) {
    int n = 0;
    for (const std::string& w : s.warnings)
      n += w.find("largest held-out underestimate") != std::string::npos ? 1 : 0;
    return n;
  };
  // 25 GiB of weights and 12.5 GiB of gradients: 37.5 of 40 GiB, 93.8%.
  const Scenario close = build(scenario_yaml("{model: fake, memory: 25GiB}"));
  ASSERT_EQ(margin_warnings(close), 1) << close.description;
  for (const std::string& w : close.warnings) {
    if (w.find("largest held-out underestimate") == std::string::npos) continue;
    EXPECT_NE(w.find("37.5 GiB on fake 0 is 93.8% of the 40 GiB of the A100-SXM4-40GB"),
              std::string::npos)
        << w;
  }
  // 36 of 40 GiB, 90%: 8.45% more still fits.
  EXPECT_EQ(margin_warnings(build(scenario_yaml("{model: fake, memory: 24GiB}"))), 0);
  // Past the GPU's memory other messages speak (the reserve's retries, or the refusal).
  EXPECT_EQ(margin_warnings(build(scenario_yaml("{model: fake, memory: 20GiB, reserve: 15GiB}"))),
            0);
}

TEST(Scenario, MemoryCheckWarnRunsAnywayWithAWarning) {
  const Scenario s = build(scenario_yaml("{model: fake, memory: 40GiB}", "  memory_check: warn\n"));
  EXPECT_TRUE(s.graph.sealed());
  ASSERT_EQ(s.warnings.size(), 2U);
  EXPECT_NE(s.warnings[0].find("60 GiB"), std::string::npos) << s.warnings[0];
  EXPECT_NE(s.description.find("total 60 GiB of 40 GiB (A100-SXM4-40GB)\n"), std::string::npos)
      << s.description;
  EXPECT_NE(s.description.find("\nwarning: the workload needs 60 GiB"), std::string::npos)
      << s.description;
}

TEST(Scenario, FewerGpusThanTheFabricIsAnErrorUnlessAskedFor) {
  // gpus: 2 on an 8-GPU DGX A100 once ran on its first two GPUs without a word.
  const std::string topology =
      "  topology: " + std::string(UPSIM_CONFIGS_DIR) + "/topologies/dgx_a100.yaml\n";
  const std::string e = error_of(scenario_yaml("{model: fake}", topology));
  EXPECT_NE(e.find("platform.gpus: 2 GPUs, but the topology `"), std::string::npos) << e;
  EXPECT_NE(e.find("has 8: set `gpus: 8`"), std::string::npos) << e;
  EXPECT_NE(e.find("partial_fabric: true"), std::string::npos) << e;
  const Scenario partial =
      build(scenario_yaml("{model: fake}", topology + "  partial_fabric: true\n"));
  EXPECT_EQ(partial.models.set.devices.size(), 2U);
  const std::string bad =
      error_of(scenario_yaml("{model: fake}", topology + "  partial_fabric: 2\n"));
  EXPECT_NE(bad.find("platform.partial_fabric"), std::string::npos) << bad;
}

}  // namespace
}  // namespace upsim::cli
