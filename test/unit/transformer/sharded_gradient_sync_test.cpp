// FSDP / ZeRO-3 under gradient accumulation (ParallelismConfig::gradient_sync): how many
// all-gathers and reduce-scatters one step emits, and what the memory model counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// 4 layers, 8-way FSDP, 4 micro-batches per replica.
TransformerConfig fsdp_gpt(FsdpMode fsdp, ShardedGradientSync sync) {
  TransformerConfig c = test_configs::small_gpt(4);
  c.parallelism.data = 8;
  c.parallelism.fsdp = fsdp;
  c.parallelism.gradient_sync = sync;
  c.global_batch = c.micro_batch * 8 * 4;
  return c;
}

struct Collectives {
  int gathers = 0;
  int reduce_scatters = 0;
};

/// Rank 0's data-parallel all-gathers and reduce-scatters in one step.
Collectives rank0_collectives(const TransformerConfig& c) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  Collectives n;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    if (g.collective(id).members.front() != 0) continue;
    const std::string_view name = g.collective_name(id);
    if (name == "dp:all_gather") ++n.gathers;
    if (name == "dp:reduce_scatter") ++n.reduce_scatters;
  }
  return n;
}

// Units: 4 layers, the embedding and the output layer (6), 4 micro-batches.
TEST(ShardedGradientSync, EveryMicroBatchGathersAndReduceScattersEachUnitEachMicroBatch) {
  const Collectives full =
      rank0_collectives(fsdp_gpt(FsdpMode::kFullShard, ShardedGradientSync::kEveryMicroBatch));
  EXPECT_EQ(full.reduce_scatters, 6 * 4);
  // Forward: every unit; backward: the 4 layers again (reshard_after_forward).
  EXPECT_EQ(full.gathers, (6 + 4) * 4);
  const Collectives grad_op =
      rank0_collectives(fsdp_gpt(FsdpMode::kShardGradOp, ShardedGradientSync::kEveryMicroBatch));
  EXPECT_EQ(grad_op.gathers, 6 * 4);
  EXPECT_EQ(grad_op.reduce_scatters, 6 * 4);
}

TEST(ShardedGradientSync, LastMicroBatchWithoutReshardAfterForwardGathersOncePerStep) {
  const Collectives c =
      rank0_collectives(fsdp_gpt(FsdpMode::kShardGradOp, ShardedGradientSync::kLastMicroBatch));
  EXPECT_EQ(c.gathers, 6) << "each unit once, in the first micro-batch's forward";
  EXPECT_EQ(c.reduce_scatters, 6) << "each unit once, in the last micro-batch's backward";
}

TEST(ShardedGradientSync, LastMicroBatchWithFullShardStillRegathersForEachBackward) {
  const Collectives c =
      rank0_collectives(fsdp_gpt(FsdpMode::kFullShard, ShardedGradientSync::kLastMicroBatch));
  // The first micro-batch's forward gathers every unit; each backward gathers the 4 layers
  // again (reshard_after_forward), and they stay gathered after it, so the later forwards
  // gather nothing.
  EXPECT_EQ(c.gathers, 6 + 4 * 4);
  EXPECT_EQ(c.reduce_scatters, 6);
}

TEST(ShardedGradientSync, HoldingUnshardedStateCostsMemoryOnlyWithSeveralMicroBatches) {
  TransformerConfig every = fsdp_gpt(FsdpMode::kFullShard, ShardedGradientSync::kEveryMicroBatch);
  TransformerConfig last = fsdp_gpt(FsdpMode::kFullShard, ShardedGradientSync::kLastMicroBatch);
  EXPECT_GT(transformer_peak_memory(last).total_bytes(),
            transformer_peak_memory(every).total_bytes());
  every.global_batch = every.micro_batch * 8;
  last.global_batch = last.micro_batch * 8;
  EXPECT_EQ(transformer_peak_memory(last).total_bytes(),
            transformer_peak_memory(every).total_bytes())
      << "one micro-batch: nothing is held across micro-batches";
}

// HSDP: 8 data-parallel ranks in 2 shard groups of 4. Gathers and reduce-scatters stay in rank
// 0's group {0..3}; each reduce-scatter's shard is all-reduced with rank 4's, a quarter of the
// bytes; the state is sharded 4 ways, so it needs more memory than over all 8.
TEST(ShardedGradientSync, HsdpShardsInsideAGroupAndAllReducesAcrossGroups) {
  TransformerConfig c = fsdp_gpt(FsdpMode::kFullShard, ShardedGradientSync::kEveryMicroBatch);
  c.parallelism.shard_group = 4;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  int gathers = 0;
  int reduce_scatters = 0;
  int all_reduces = 0;
  int64_t scattered_bytes = 0;
  int64_t reduced_bytes = 0;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    const CollectiveDesc& d = g.collective(id);
    if (d.members.front() != 0) continue;
    const std::string_view name = g.collective_name(id);
    if (name == "dp:all_gather") {
      ++gathers;
      EXPECT_EQ(d.members, (std::vector<RankId>{0, 1, 2, 3}));
    } else if (name == "dp:reduce_scatter") {
      ++reduce_scatters;
      scattered_bytes += d.bytes;
    } else if (name == "dp:all_reduce") {
      ++all_reduces;
      reduced_bytes += d.bytes;
      EXPECT_EQ(d.members, (std::vector<RankId>{0, 4}));
    }
  }
  EXPECT_EQ(gathers, (6 + 4) * 4);
  EXPECT_EQ(reduce_scatters, 6 * 4);
  EXPECT_EQ(all_reduces, 6 * 4);
  EXPECT_EQ(reduced_bytes * 4, scattered_bytes);
  TransformerConfig flat = c;
  flat.parallelism.shard_group = 0;
  EXPECT_GT(transformer_peak_memory(c).total_bytes(), transformer_peak_memory(flat).total_bytes());
}

}  // namespace
}  // namespace upsim
