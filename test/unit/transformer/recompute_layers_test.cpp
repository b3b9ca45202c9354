// Full recomputation of some layers (recompute_layers, Megatron's block method): the first N
// layers of each model chunk run their forward again in the backward; the memory model stores
// the others' activations.
#include <gtest/gtest.h>

#include <string>

#include "sim/task_graph.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// 8 layers over 2 pipeline stages (4 per chunk), 4 micro-batches.
TransformerConfig two_stage_gpt(Recompute recompute, int64_t recompute_layers) {
  TransformerConfig c = test_configs::small_gpt();
  c.parallelism.pipeline = 2;
  c.global_batch = c.micro_batch * 4;
  c.recompute = recompute;
  c.recompute_layers = recompute_layers;
  return c;
}

/// Rank 0's QKV forward GEMMs in one step: one per layer and micro-batch, plus one per
/// recomputed layer and micro-batch.
int qkv_forwards(const TransformerConfig& c) {
  return test_configs::task_count(c, TaskKind::kKernel, "bf16gemm/qkv");
}

TEST(RecomputeLayers, TheFirstLayersOfEachChunkRunTheirForwardAgain) {
  EXPECT_EQ(qkv_forwards(two_stage_gpt(Recompute::kNone, 0)), 4 * 4);
  EXPECT_EQ(qkv_forwards(two_stage_gpt(Recompute::kFull, 0)), 4 * 4 * 2) << "every layer";
  EXPECT_EQ(qkv_forwards(two_stage_gpt(Recompute::kFull, 1)), 4 * 4 + 1 * 4);
  EXPECT_EQ(qkv_forwards(two_stage_gpt(Recompute::kFull, 4)), 4 * 4 * 2);
}

TEST(RecomputeLayers, MemoryLiesBetweenNoneAndFull) {
  const int64_t none = transformer_peak_memory(two_stage_gpt(Recompute::kNone, 0)).total_bytes();
  const int64_t full = transformer_peak_memory(two_stage_gpt(Recompute::kFull, 0)).total_bytes();
  const int64_t one = transformer_peak_memory(two_stage_gpt(Recompute::kFull, 1)).total_bytes();
  const int64_t three = transformer_peak_memory(two_stage_gpt(Recompute::kFull, 3)).total_bytes();
  EXPECT_LT(full, three);
  EXPECT_LT(three, one);
  EXPECT_LT(one, none);
  EXPECT_EQ(transformer_peak_memory(two_stage_gpt(Recompute::kFull, 4)).total_bytes(), full)
      << "all four layers of the chunk: the same as every layer";
}

}  // namespace
}  // namespace upsim
