// Megatron-Core's uneven pipeline splits (pipeline_split.h): the layout string, the embedding and
// loss counted as layers, and first / last stage layer counts; each chunk's layers in the
// generator and the memory model.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/pipeline_split.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

using test_configs::parse_workload;
using test_configs::workload_error;

PipelineSplit layout(std::string text) {
  PipelineSplit s;
  s.layout = std::move(text);
  return s;
}

/// What each chunk of rank `rank` holds, by model chunk.
std::vector<int64_t> rank_counts(const ChunkLayerSplit& split, int64_t pipeline, int64_t rank) {
  std::vector<int64_t> out;
  for (size_t vs = static_cast<size_t>(rank); vs < split.counts.size();
       vs += static_cast<size_t>(pipeline))
    out.push_back(split.counts[vs]);
  return out;
}

TEST(PipelineSplit, ExpandsMegatronCoresLayoutSyntax) {
  // Megatron-Core's documentation example (docs/user-guide/features/pipeline_parallel_layout.md):
  // DeepSeek-V3's 61 layers and one MTP layer on pipeline 16, virtual 2.
  const std::vector<LayoutStage> docs = expand_pipeline_layout("Et*3|(tt|)*29,m|L");
  ASSERT_EQ(docs.size(), 32u);
  EXPECT_EQ(docs.front(), "Ettt");
  EXPECT_EQ(docs[1], "tt");
  EXPECT_EQ(docs[29], "tt");
  EXPECT_EQ(docs[30], "m");
  EXPECT_EQ(docs[31], "L");
  EXPECT_EQ(expand_pipeline_layout("E||t|L").size(), 4u) << "an empty stage";
  for (const char* bad : {"Et|x|L", "E(t|L", "Et)|L", "Et*|L", "E((t)*2)*2|L", "E()*2|L", "*3"}) {
    EXPECT_THROW(expand_pipeline_layout(bad), std::invalid_argument) << bad;
  }
  EXPECT_THROW(expand_pipeline_layout("Et*99999999|L"), std::invalid_argument) << "too long";
}

TEST(PipelineSplit, ALayoutGivesEachChunkItsLayers) {
  // Megatron-Bridge's DeepSeek-V3 H100 recipe: "Et|(tt|)*30mL" on pipeline 8 (virtual 4).
  const ChunkLayerSplit dsv3 = split_chunk_layers(layout("Et|(tt|)*30mL"), 61, 8, 4);
  ASSERT_TRUE(dsv3.error.empty()) << dsv3.error;
  ASSERT_EQ(dsv3.counts.size(), 32u);
  EXPECT_EQ(dsv3.counts.front(), 1);
  EXPECT_EQ(dsv3.counts.back(), 0) << "the last chunk holds the MTP layer and the loss";
  EXPECT_EQ(std::accumulate(dsv3.counts.begin(), dsv3.counts.end(), int64_t{0}), 61);
  EXPECT_EQ(dsv3.mtp_counts.back(), 1);
  EXPECT_EQ(rank_counts(dsv3, 8, 0), (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(rank_counts(dsv3, 8, 7), (std::vector<int64_t>{2, 2, 2, 0}));

  EXPECT_NE(split_chunk_layers(layout("Et|(tt|)*30mL"), 60, 8, 4).error.find("61 decoder"),
            std::string::npos);
  EXPECT_NE(split_chunk_layers(layout("Et|(tt|)*30mL"), 61, 8, 2).error.find("virtual_stages"),
            std::string::npos);
  EXPECT_NE(split_chunk_layers(layout("tE|(tt|)*30mL"), 61, 8, 4).error.find("embedding"),
            std::string::npos);
  EXPECT_NE(split_chunk_layers(layout("Et|(tt|)*30Lm"), 61, 8, 4).error.find("loss"),
            std::string::npos);
  EXPECT_NE(split_chunk_layers(layout("Et|(tt|)*29tm|tL"), 61, 8, 4).error.find("after an MTP"),
            std::string::npos);
  PipelineSplit both = layout("Et|(tt|)*30tL");
  both.account_for_loss = true;
  EXPECT_EQ(split_chunk_layers(both, 62, 8, 4).key, "pipeline_layout");
}

TEST(PipelineSplit, TheEmbeddingAndLossCountAsLayers) {
  // Megatron-Bridge's Qwen3-235B-A22B recipe: 94 layers, pipeline 8 x virtual 4, both counted:
  // 96 / 32 = 3 a chunk, the first and the last one fewer.
  PipelineSplit qwen;
  qwen.account_for_embedding = true;
  qwen.account_for_loss = true;
  const ChunkLayerSplit split = split_chunk_layers(qwen, 94, 8, 4);
  ASSERT_TRUE(split.error.empty()) << split.error;
  EXPECT_EQ(rank_counts(split, 8, 0), (std::vector<int64_t>{2, 3, 3, 3}));
  EXPECT_EQ(rank_counts(split, 8, 3), (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(rank_counts(split, 8, 7), (std::vector<int64_t>{3, 3, 3, 2}));
  EXPECT_EQ(split_chunk_layers(qwen, 95, 8, 4).key, "account_for_embedding");
}

TEST(PipelineSplit, FirstAndLastStageLayersMatchMegatronCoresOffsets) {
  // 30 layers on pipeline 4 x virtual 2: first rank 6, last 8, the two middle ranks 8 each.
  PipelineSplit s;
  s.first_stage_layers = 6;
  s.last_stage_layers = 8;
  const int64_t pipeline = 4;
  const int64_t virtual_stages = 2;
  const ChunkLayerSplit split = split_chunk_layers(s, 30, pipeline, virtual_stages);
  ASSERT_TRUE(split.error.empty()) << split.error;
  EXPECT_EQ(rank_counts(split, pipeline, 0), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(rank_counts(split, pipeline, 1), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(rank_counts(split, pipeline, 3), (std::vector<int64_t>{4, 4}));
  // Megatron-Core's get_transformer_layer_offset for uneven first / last stages, written out:
  // vp x (layers / v) + first / v + middle rank x (middle layers / v / middle ranks).
  const int64_t per_vp = 30 / virtual_stages;
  const int64_t first_chunk = 6 / virtual_stages;
  const int64_t middle_chunk = (30 - 6 - 8) / virtual_stages / 2;
  int64_t offset = 0;
  for (int64_t vp = 0; vp < virtual_stages; ++vp) {
    for (int64_t rank = 0; rank < pipeline; ++rank) {
      const int64_t megatron =
          vp * per_vp + (rank == 0 ? 0 : first_chunk + (rank - 1) * middle_chunk);
      EXPECT_EQ(offset, megatron) << "rank " << rank << " chunk " << vp;
      offset += split.counts[static_cast<size_t>(vp * pipeline + rank)];
    }
  }
  s.first_stage_layers = 5;
  EXPECT_EQ(split_chunk_layers(s, 29, pipeline, virtual_stages).key, "first_stage_layers")
      << "5 layers over 2 virtual stages";
  s.first_stage_layers = 6;
  EXPECT_NE(split_chunk_layers(s, 31, pipeline, virtual_stages).error.find("do not split"),
            std::string::npos);
  s.account_for_embedding = true;
  EXPECT_EQ(split_chunk_layers(s, 30, pipeline, virtual_stages).key, "account_for_embedding");
}

/// A 7-layer Llama on pipeline 2 x data 1 with `split` below `parallelism:`.
std::string seven_layers(const std::string& split, const std::string& more = "") {
  return "workload:\n  model: transformer\n  architecture: llama\n  layers: 7\n  hidden: 1024\n"
         "  heads: 16\n  kv_heads: 4\n  vocab: 32000\n  seq: 512\n  global_batch: 4\n" +
         more + "  parallelism:\n    pipeline: 2\n" + split;
}

TEST(PipelineSplit, TheConfigHoldsEachChunksLayersAndRefusesAtTheKey) {
  const TransformerConfig c =
      parse_workload(seven_layers("    pipeline_layout: Et|tt|ttt|tL\n"), 2);
  EXPECT_EQ(c.parallelism.virtual_stages, 2) << "the layout's 4 stages over pipeline 2";
  EXPECT_EQ(c.parallelism.schedule, PipelineSchedule::kInterleaved1F1B);
  EXPECT_EQ(c.chunk_layers(0).first, 0);
  EXPECT_EQ(c.chunk_layers(0).count, 1);
  EXPECT_EQ(c.chunk_layers(2).first, 3);
  EXPECT_EQ(c.chunk_layers(2).count, 3);
  EXPECT_EQ(c.layer_in_chunk(5), 2);

  const auto error = [](const std::string& yaml) { return workload_error(yaml, 2); };
  EXPECT_NE(error(seven_layers("")).find("not divisible by pipeline 2"), std::string::npos);
  EXPECT_NE(error(seven_layers("    pipeline_layout: Et|tt|ttt|tL\n    virtual_stages: 4\n"))
                .find("parallelism.virtual_stages"),
            std::string::npos);
  EXPECT_NE(error(seven_layers("    pipeline_layout: Et|tt|ttt|tmL\n")).find("multi-token"),
            std::string::npos);
  EXPECT_NE(error(seven_layers("    pipeline_layout: Et|t?t|ttt|tL\n")).find("'?'"),
            std::string::npos);
  EXPECT_NE(error(seven_layers("    pipeline_layout: \"\"\n")).find("is empty"), std::string::npos);
  EXPECT_EQ(error(seven_layers("    account_for_embedding: true\n")), "") << "8 counted, 4 a rank";
  EXPECT_NE(error(seven_layers("    account_for_loss: true\n    account_for_embedding: true\n"))
                .find("9 layers"),
            std::string::npos);
  std::string one_stage = seven_layers("    first_stage_layers: 3\n");
  one_stage.replace(one_stage.find("pipeline: 2"), 11, "pipeline: 1");
  EXPECT_NE(workload_error(one_stage, 1).find("needs parallelism.pipeline > 1"), std::string::npos);
}

TEST(PipelineSplit, EachRankRunsItsChunksLayersAndHoldsTheirWeights) {
  // first_stage_layers 1 of 7 layers: rank 0 holds one layer, rank 1 six.
  const TransformerConfig c = parse_workload(seven_layers("    first_stage_layers: 1\n"), 2);
  const int micro_batches = static_cast<int>(c.micro_batches());
  EXPECT_EQ(test_configs::task_count(c, TaskKind::kKernel, "bf16gemm/qkv", 0), 1 * micro_batches);
  EXPECT_EQ(test_configs::task_count(c, TaskKind::kKernel, "bf16gemm/qkv", 1), 6 * micro_batches);
  // The stages hold every layer's weights once: against an even split of 8 layers (4 a rank),
  // one layer fewer in all, and rank 1's 6 layers two more than its 4.
  std::string eight_yaml = seven_layers("");
  eight_yaml.replace(eight_yaml.find("layers: 7"), 9, "layers: 8");
  const TransformerConfig eight = parse_workload(eight_yaml, 2);
  const auto stage = [](const TransformerConfig& config, int64_t s) {
    return transformer_stage_parameters(config, s).total();
  };
  const int64_t two_layers = stage(c, 1) - stage(eight, 1);
  EXPECT_GT(two_layers, 0);
  EXPECT_EQ((stage(eight, 0) + stage(eight, 1)) - (stage(c, 0) + stage(c, 1)), two_layers / 2);
}

TEST(PipelineSplit, InterleavedActivationsWeighEachChunkByItsForwardsInFlight) {
  // Pipeline 2 x virtual 2, 4 micro-batches: rank 0 runs 2 (2 - 1) + 2 + 1 = 5 forwards before
  // its first backward, of chunks 0, 0, 1, 1, 0 (Megatron-Core's get_model_chunk_id). Chunk 0
  // holding 1 layer and chunk 1 3 stores 3 x 1 + 2 x 3 = 9 layers' activations; the other way
  // round 3 x 3 + 2 x 1 = 11.
  const std::string more = "  micro_batch: 1\n";
  const TransformerConfig light =
      parse_workload(seven_layers("    pipeline_layout: Et|tt|ttt|tL\n", more), 2);
  const TransformerConfig heavy =
      parse_workload(seven_layers("    pipeline_layout: Ettt|tt|t|tL\n", more), 2);
  ASSERT_EQ(light.micro_batches(), 4);
  const auto activations = [](const TransformerConfig& c) {
    for (const MemoryFootprint::Part& part : transformer_memory(c, 0).parts)
      if (part.name == "activations") return part.bytes;
    return int64_t{0};
  };
  const int64_t layer = transformer_layer_activation_bytes(light, false);
  EXPECT_EQ(activations(heavy) - activations(light), 2 * layer);
}

}  // namespace
}  // namespace upsim
