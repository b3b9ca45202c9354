#include "workloads/workload_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/config/config_error.h"

namespace upsim {
namespace {

/// A workload that builds nothing; `name` says which factory made it.
class NamedWorkload final : public Workload {
 public:
  explicit NamedWorkload(std::string name) : name_(std::move(name)) {}
  WorkloadBuild build(const WorkloadPlatform&, TaskGraph&) override {
    WorkloadBuild b;
    b.description.push_back(name_);
    return b;
  }

 private:
  std::string name_;
};

WorkloadFactory named(const std::string& name) {
  return [name](const ConfigNode&) { return std::make_unique<NamedWorkload>(name); };
}

std::string error_of(const WorkloadRegistry& registry, const std::string& yaml) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "scenario.yaml");
  try {
    registry.make(doc.root().child("workload"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(WorkloadRegistry, DefaultRegistryListsEveryShippedFamily) {
  const WorkloadRegistry registry = default_workload_registry();
  const std::vector<std::string_view> names = registry.names();
  ASSERT_GE(names.size(), 2U);
  EXPECT_EQ(names[0], "dlrm");
  EXPECT_EQ(names[1], "trace");
  EXPECT_TRUE(registry.contains("dlrm"));
  EXPECT_FALSE(registry.contains("bert"));
}

TEST(WorkloadRegistry, UnknownModelIsAConfigErrorListingTheValidNames) {
  const WorkloadRegistry registry = default_workload_registry();
  const std::string e = error_of(registry, "workload: {model: bert}\n");
  EXPECT_NE(e.find("workload.model"), std::string::npos) << e;
  EXPECT_NE(e.find("bert"), std::string::npos) << e;
  for (std::string_view name : registry.names())
    EXPECT_NE(e.find(name), std::string::npos) << name << ": " << e;
  EXPECT_NE(error_of(registry, "workload: {global_batch: 8}\n").find("model"), std::string::npos);
}

TEST(WorkloadRegistry, MakeCallsTheFactoryOfTheNamedFamily) {
  WorkloadRegistry registry;
  registry.add("alpha", named("alpha"));
  registry.add("beta", named("beta"));
  ConfigDocument doc = ConfigDocument::parse_string("workload: {model: beta}\n", "scenario.yaml");
  const std::unique_ptr<Workload> w = registry.make(doc.root().child("workload"));
  ASSERT_NE(w, nullptr);
  TaskGraph graph;
  EXPECT_EQ(w->build(WorkloadPlatform{}, graph).description, (std::vector<std::string>{"beta"}));
  // The interface's defaults: the platform decides the GPUs, `simulation:` applies, the
  // platform's host model prices host work.
  EXPECT_FALSE(w->implied_gpus());
  EXPECT_TRUE(w->simulates_iterations());
  EXPECT_FALSE(w->host_overheads());
  const std::string e = error_of(registry, "workload: {model: gamma}\n");
  EXPECT_NE(e.find("alpha"), std::string::npos) << e;
  EXPECT_NE(e.find("beta"), std::string::npos) << e;
}

TEST(WorkloadRegistry, DuplicateEmptyOrFactorylessFamiliesAreRejected) {
  WorkloadRegistry registry;
  registry.add("alpha", named("alpha"));
  EXPECT_THROW(registry.add("alpha", named("again")), std::invalid_argument);
  EXPECT_THROW(registry.add("", named("empty")), std::invalid_argument);
  EXPECT_THROW(registry.add("beta", WorkloadFactory{}), std::invalid_argument);
  EXPECT_EQ(registry.names().size(), 1U);
}

/// Two ranks of the DLRM with tables of 100 rows (pooling 10) and 50 rows (pooling 5), dim 2,
/// global batch 8, built for 2 iterations (1 warm-up) on 1 GiB GPUs; `embeddings_extra` adds
/// keys to the embeddings map, `workload_extra` to the workload map.
WorkloadBuild build_two_rank_dlrm(TaskGraph& graph, const std::string& embeddings_extra = "",
                                  const std::string& workload_extra = "") {
  ConfigDocument doc = ConfigDocument::parse_string(R"(workload:
  model: dlrm
)" + workload_extra + R"(
  global_batch: 8
  bottom_mlp: [4, 2]
  top_mlp: [4, 1]
  embeddings:
    dim: 2
)" + embeddings_extra + R"(    tables:
      - {rows: 100, pooling: 10}
      - {rows: 50, pooling: 5}
)",
                                                    "scenario.yaml");
  const std::unique_ptr<Workload> w =
      default_workload_registry().make(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = 2;
  platform.device.hbm_bytes = int64_t{1} << 30;
  platform.iterations = 2;
  platform.warmup_iterations = 1;
  w->prepare(platform);
  doc.check_all_keys_used();
  return w->build(platform, graph);
}

TEST(WorkloadRegistry, DlrmFamilyParsesForThePlatformAndReportsItsTableMemory) {
  TaskGraph graph;
  const WorkloadBuild b = build_two_rank_dlrm(graph);
  EXPECT_EQ(graph.rank_count(), 2U);
  EXPECT_EQ(b.iterations, 2U);
  EXPECT_EQ(b.warmup_iterations, 1U);
  ASSERT_EQ(b.description.size(), 2U);
  EXPECT_TRUE(
      b.description[0].starts_with("workload: dlrm, dot interaction, global batch 8 (4 per rank)"))
      << b.description[0];
  ASSERT_TRUE(b.memory);
  // fp32 tables: 100 x 2 x 4 = 800 B on one rank, 50 x 2 x 4 = 400 B on the other.
  EXPECT_EQ(b.memory->owner, "rank 0");
  ASSERT_FALSE(b.memory->parts.empty());
  EXPECT_EQ(b.memory->parts[0].name, "embedding tables");
  EXPECT_EQ(b.memory->parts[0].bytes, 800);
  // Dense MLPs: bottom [4, 2] = 10 params, top [2 + 3, 4, 1] = 24 + 5 = 29 params, fp32,
  // weights and gradients.
  // Activations per sample: bottom 4 + 2 x 2 = 8; top (5 + 2 x 4) + (4 + 2 x 1) = 19; dot
  // interaction 3 x 2 stacked + 3 x 3 Gram + 3 pairs + 5 concatenated = 23; 4 samples, fp32:
  // 4 x (8 + 19 + 23) x 4 = 800 B.
  // Buffers of rank 0 (table 0: pooling 10): pooled lookups 8 x 1 x 2 x 4 = 64, exchange
  // 2 x (8 x 1 + 4 x 2) x 2 x 4 = 256, indices 8 x 10 x 8 = 640, offsets (8 + 1) x 8 = 72.
  ASSERT_EQ(b.memory->parts.size(), 5U);
  EXPECT_EQ(b.memory->parts[3].name, "activations");
  EXPECT_EQ(b.memory->parts[3].bytes, 800);
  EXPECT_EQ(b.memory->parts[4].name, "buffers");
  EXPECT_EQ(b.memory->parts[4].bytes, 64 + 256 + 640 + 72);
  EXPECT_EQ(b.memory->total_bytes(), 800 + 2 * (10 + 29) * 4 + 800 + 1032);
}

// embeddings.update sparse keeps the sparse gradient's values until the optimizer step: rank 0
// looks table 0 up 8 x 10 times, one fp32 row of dim 2 each: 640 B more buffers.
TEST(WorkloadRegistry, DlrmSparseGradientValuesCountInTheBuffers) {
  TaskGraph fused;
  TaskGraph sparse;
  EXPECT_EQ(build_two_rank_dlrm(fused).memory->parts.at(4).bytes, 64 + 256 + 640 + 72);
  EXPECT_EQ(build_two_rank_dlrm(sparse, "    update: sparse\n").memory->parts.at(4).bytes,
            64 + 256 + 640 + 72 + 8 * 10 * 2 * 4);
}

// Inference keeps no gradients (and no sparse gradient values) and one exchange's buffers.
TEST(WorkloadRegistry, DlrmInferenceHoldsNoGradients) {
  TaskGraph graph;
  const WorkloadBuild b = build_two_rank_dlrm(graph, "    update: sparse\n", "  mode: inference\n");
  ASSERT_TRUE(b.memory);
  for (const MemoryFootprint::Part& part : b.memory->parts)
    EXPECT_NE(part.name, "dense gradients");
  // One exchange's buffers (the forward's): half of training's 256.
  EXPECT_EQ(b.memory->parts.back().bytes, 64 + 128 + 640 + 72);
  EXPECT_TRUE(b.description[0].starts_with("workload: dlrm inference,")) << b.description[0];
}

TEST(WorkloadRegistry, DlrmBatchIsCheckedAgainstThePlatformsGpus) {
  ConfigDocument doc = ConfigDocument::parse_string(R"(workload:
  model: dlrm
  global_batch: 9
  bottom_mlp: [4, 2]
  top_mlp: [4, 1]
  embeddings: {dim: 2, tables: [{rows: 100, pooling: 10}]}
)",
                                                    "scenario.yaml");
  const std::unique_ptr<Workload> w =
      default_workload_registry().make(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = 2;
  try {
    w->prepare(platform);
    FAIL() << "9 samples on 2 GPUs accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "workload.global_batch") << e.what();
  }
}

}  // namespace
}  // namespace upsim
