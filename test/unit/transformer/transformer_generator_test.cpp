#include "workloads/transformer/transformer_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calibration/hardware_profile.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "topology/fabric_loader.h"
#include "topology/flow_network.h"
#include "topology/nccl_tuning.h"
#include "workloads/pytorch/ddp_buckets.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_memory.h"
#include "workloads/transformer/transformer_workload.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

using test_configs::small_gpt;

/// small_gpt() with MoE layers of `experts` experts (top_k, expert_ffn, capacity_factor) over
/// expert parallelism 8 of data parallelism 8, `micro_batches` micro-batches per replica.
TransformerConfig small_moe_ep8(int64_t experts, int64_t top_k, int64_t expert_ffn,
                                double capacity_factor, int64_t micro_batches) {
  TransformerConfig c = small_gpt();
  c.moe.experts = experts;
  c.moe.top_k = top_k;
  c.moe.expert_ffn = expert_ffn;
  c.moe.capacity_factor = capacity_factor;
  c.parallelism.data = 8;
  c.parallelism.expert = 8;
  c.global_batch = c.micro_batch * 8 * micro_batches;
  return c;
}

struct Platform {
  Fabric fabric;
  HardwareProfile hardware;
};

Platform platform(const std::string& topology, const std::string& gpu) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "topologies" / (topology + ".yaml"));
  ConfigDocument hw = ConfigDocument::load_file(kConfigs / "hardware" / (gpu + ".yaml"));
  return Platform{load_fabric(doc.root()), load_hardware_profile(hw.root())};
}

struct SimRun {
  RunSummary summary;
  size_t ranks = 0;
  int64_t collective_bytes = 0;  ///< bytes of every collective's input, over all groups
};

SimRun simulate(const TransformerConfig& c, const Fabric& fabric, const HardwareProfile& hw,
                uint32_t iterations = 2) {
  TaskGraph g;
  const TransformerGraph built = generate_transformer(c, {iterations}, g);
  g.seal();
  RooflineParams params;
  params.compute_fraction = hw.achievable.compute;
  params.memory_fraction = hw.achievable.memory;
  const RooflineKernelCost kernels(params);
  SimRun out;
  out.summary = test_configs::run_step(g, kernels, fabric, hw, iterations);
  out.ranks = built.simulated.size();
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    const CollectiveDesc& d = g.collective(id);
    int64_t bytes = d.bytes;
    for (size_t i = 0; i < d.send_bytes.members(); ++i)
      bytes += d.send_bytes.sent_by(i);
    out.collective_bytes += bytes;
  }
  return out;
}

double ms(Duration d) {
  return d.seconds() * 1e3;
}

TEST(ParallelLayout, MegatronOrderPutsTensorGroupsInsideANode) {
  ParallelismConfig p;
  p.tensor = 2;
  p.pipeline = 2;
  p.data = 2;
  const ParallelLayout layout(p);
  EXPECT_EQ(layout.gpus(), 8);
  EXPECT_EQ(layout.group(ParallelDim::kTensor, 5), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(layout.group(ParallelDim::kData, 5), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(layout.group(ParallelDim::kPipeline, 5), (std::vector<int64_t>{1, 5}));
  // Data innermost instead.
  p.order = {ParallelDim::kData, ParallelDim::kTensor, ParallelDim::kContext, ParallelDim::kExpert,
             ParallelDim::kPipeline};
  const ParallelLayout dp_first(p);
  EXPECT_EQ(dp_first.group(ParallelDim::kData, 5), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(dp_first.group(ParallelDim::kTensor, 5), (std::vector<int64_t>{5, 7}));
}

// Megatron-Core's expert rank layout (parallel_state.py, RankGenerator with tp, ep, expert
// data parallel = data x context / expert, pp and cp = 1, in the same order): on 16 GPUs with
// TP 2, CP 2, DP 2, PP 2 and EP 4 its ep groups are [0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14]
// and [9, 11, 13, 15]: the context- and data-parallel ranks of one stage and tensor index.
TEST(ParallelLayout, ExpertGroupsSpanContextAndDataParallelRanksOfAStageAsMegatronCore) {
  ParallelismConfig p;
  p.tensor = 2;
  p.context = 2;
  p.data = 2;
  p.pipeline = 2;
  p.expert = 4;
  const ParallelLayout layout(p);
  EXPECT_EQ(layout.group(ParallelDim::kExpert, 0), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(layout.group(ParallelDim::kExpert, 7), (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_EQ(layout.group(ParallelDim::kExpert, 9), (std::vector<int64_t>{9, 11, 13, 15}));
  // EP 2 out of CP 2 with one data-parallel rank: the two context-parallel ranks of a stage
  // (the data-parallel block of old named a rank of the next stage).
  p.data = 1;
  p.expert = 2;
  const ParallelLayout cp_only(p);
  EXPECT_EQ(cp_only.group(ParallelDim::kExpert, 1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(cp_only.group(ParallelDim::kExpert, 4), (std::vector<int64_t>{4, 6}));
  // Without context parallel: blocks of consecutive data-parallel ranks, as before.
  p.context = 1;
  p.data = 4;
  const ParallelLayout dp_only(p);
  EXPECT_EQ(dp_only.group(ParallelDim::kExpert, 5), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(dp_only.group(ParallelDim::kExpert, 13), (std::vector<int64_t>{13, 15}));
  // ep after dp in the order: EP ranks are expert data parallel x tensor apart.
  p.order = {ParallelDim::kTensor, ParallelDim::kContext, ParallelDim::kData, ParallelDim::kExpert,
             ParallelDim::kPipeline};
  const ParallelLayout ep_outside(p);
  EXPECT_EQ(ep_outside.group(ParallelDim::kExpert, 1), (std::vector<int64_t>{1, 5}));
}

// Context-parallel ranks hold the same weights and see different tokens, so their gradients
// are reduced together with the data-parallel ones (Megatron-Core's dp-cp group); before, a
// CP 2 run without data parallelism reduced no gradient at all.
TEST(TransformerGenerator, ContextParallelRanksReduceTheirGradients) {
  for (int zero : {0, 1, 3}) {
    TransformerConfig c = small_gpt();
    c.parallelism.tensor = 2;
    c.parallelism.context = 2;
    c.parallelism.data = zero == 0 ? 1 : 2;
    c.parallelism.zero = zero;
    c.global_batch = c.micro_batch * c.parallelism.data * 2;
    TaskGraph g;
    generate_transformer(c, {1}, g);
    const ParallelLayout layout(c.parallelism);
    size_t reductions = 0;
    for (CollectiveId id = 0; id < g.collective_count(); ++id) {
      if (g.collective_name(id).rfind("dp:", 0) != 0) continue;
      ++reductions;
      const std::vector<RankId>& members = g.collective(id).members;
      ASSERT_EQ(members.size(), static_cast<size_t>(2 * c.parallelism.data)) << "zero " << zero;
      for (RankId r : members)
        EXPECT_EQ(layout.coords(r).tp, layout.coords(members.front()).tp);
    }
    EXPECT_GT(reductions, 0u) << "zero " << zero;
  }
  ParallelismConfig p;
  p.tensor = 2;
  p.context = 2;
  p.data = 2;
  p.pipeline = 2;
  EXPECT_EQ(ParallelLayout(p).replica_group(9), (std::vector<int64_t>{9, 11, 13, 15}));
}

// Ring attention as Transformer Engine runs it (AttnFuncWithCPAndKVP2P): per layer and
// micro-batch, the forward passes K / V on cp - 1 steps; the backward passes K / V on step 0,
// K / V with the accumulated dK / dV on the middle steps and dK / dV alone on the last: 2 (cp - 1)
// K / V-sized messages per rank over cp sends.
TEST(TransformerGenerator, RingAttentionPassesKeysValuesAndTheirGradientsAsTransformerEngine) {
  for (const int64_t cp : {2, 4}) {
    TransformerConfig c = small_gpt(2);
    c.parallelism.context = cp;
    c.global_batch = c.micro_batch;
    TaskGraph g;
    generate_transformer(c, {1}, g);
    const LayerSizes z = layer_sizes(c);
    const int64_t kv_bytes = 2 * z.b * z.s * z.kv_heads * z.head_dim * 2;  // bf16
    int64_t sends = 0;
    int64_t bytes = 0;
    for (CollectiveId id = 0; id < g.collective_count(); ++id) {
      const CollectiveDesc& col = g.collective(id);
      if (col.parallel_dim != ParallelDim::kContext || col.members.front() != 0) continue;
      ++sends;
      bytes += col.send_bytes.at(0, 1);
    }
    const int64_t passes = c.layers * c.micro_batches();
    EXPECT_EQ(sends, passes * ((cp - 1) + cp)) << "cp " << cp;
    EXPECT_EQ(bytes, passes * ((cp - 1) + 2 * (cp - 1)) * kv_bytes) << "cp " << cp;
  }
}

// LAMB as Apex's FusedLAMB: one optimizer kernel that clips inside (no separate gradient-norm
// and scale kernels), moving more bytes than fused Adam with its clipping.
TEST(TransformerGenerator, LambReplacesTheClippingKernelsWithItsOwnPasses) {
  struct StepEnd {
    int memory_bound = 0;
    int lamb_updates = 0;
    double bytes = 0;
  };
  const auto step_end = [](TransformerOptimizer optimizer) {
    TransformerConfig c = small_gpt(2);
    c.optimizer = optimizer;
    TaskGraph g;
    generate_transformer(c, {1}, g);
    StepEnd s;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      if (g.task(t).kind != TaskKind::kKernel || g.task(t).rank != 0) continue;
      const KernelDesc& k = g.kernel(t);
      if (k.cls != KernelClass::kMemoryBound) continue;
      ++s.memory_bound;
      if (k.memory_op == MemoryOp::kOptimizer && k.optimizer.kind == OptimizerKind::kLamb) {
        ++s.lamb_updates;
      }
      s.bytes += k.bytes_read + k.bytes_written;
    }
    return s;
  };
  const StepEnd adam = step_end(TransformerOptimizer::kAdam);
  const StepEnd lamb = step_end(TransformerOptimizer::kLamb);
  EXPECT_EQ(adam.memory_bound - lamb.memory_bound, 2);
  EXPECT_EQ(lamb.lamb_updates, 1);
  EXPECT_EQ(adam.lamb_updates, 0);
  EXPECT_GT(lamb.bytes, adam.bytes);
}

TEST(TransformerGenerator, MoeWithContextAndExpertParallelFinishes) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  TransformerConfig c = small_gpt();
  c.layers = 4;
  c.moe.experts = 4;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 2048;
  c.moe.capacity_factor = 0.0;
  c.parallelism.context = 2;
  c.parallelism.pipeline = 2;
  c.parallelism.data = 2;
  c.parallelism.expert = 4;
  c.global_batch = c.micro_batch * 2 * 2;
  const SimRun r = simulate(c, dgx.fabric, dgx.hardware);
  EXPECT_GT(ms(r.summary.predicted_iteration_time), 0.0);
}

TEST(PipelineSchedule, EveryMicroBatchRunsForwardAndBackwardOnceAndInterleavedMatchesMegatron) {
  for (PipelineSchedule s :
       {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B}) {
    const int64_t chunks = s == PipelineSchedule::kInterleaved1F1B ? 2 : 1;
    for (int64_t stage = 0; stage < 4; ++stage) {
      const std::vector<PipelineStep> steps = pipeline_schedule(s, 4, chunks, 8, stage);
      ASSERT_EQ(steps.size(), static_cast<size_t>(2 * 8 * chunks));
      std::set<std::tuple<bool, int64_t, int64_t>> seen;
      for (const PipelineStep& st : steps)
        seen.insert({st.forward, st.micro_batch, st.chunk});
      EXPECT_EQ(seen.size(), steps.size());
    }
  }
  // 1F1B on the first of 4 stages: 3 warm-up forwards, then alternating.
  const std::vector<PipelineStep> f = pipeline_schedule(PipelineSchedule::k1F1B, 4, 1, 8, 0);
  EXPECT_TRUE(f[0].forward && f[1].forward && f[2].forward && f[3].forward);
  EXPECT_FALSE(f[4].forward);
  EXPECT_EQ(f[4].micro_batch, 0);
  // Interleaved, stage 0 of 4 with 2 chunks: warm-up (4-0-1)*2 + (2-1)*4 = 10 forwards; the
  // first four run chunk 0 (micro-batches 0..3), the next four chunk 1.
  const std::vector<PipelineStep> v =
      pipeline_schedule(PipelineSchedule::kInterleaved1F1B, 4, 2, 8, 0);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(v[static_cast<size_t>(i)].forward) << i;
  EXPECT_FALSE(v[11].forward);
  EXPECT_EQ(v[4].chunk, 1);
  EXPECT_EQ(v[4].micro_batch, 0);
  EXPECT_EQ(v[8].chunk, 0);
  EXPECT_EQ(v[8].micro_batch, 4);
  EXPECT_EQ(v[11].chunk, 1);  // the first backward runs the last chunk
}

TEST(TransformerGenerator, EveryParallelismRunsToCompletion) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  struct Case {
    std::string name;
    int64_t tp, pp, dp, cp, vp;
    bool sp;
    PipelineSchedule schedule;
    int zero;
    FsdpMode fsdp;
    Recompute recompute;
    AttentionImpl attention;
  };
  const std::vector<Case> cases{
      {"dp8", 1, 1, 8, 1, 1, false, PipelineSchedule::k1F1B, 0, FsdpMode::kNone, Recompute::kNone,
       AttentionImpl::kFlash},
      {"tp8 sp", 8, 1, 1, 1, 1, true, PipelineSchedule::k1F1B, 0, FsdpMode::kNone, Recompute::kNone,
       AttentionImpl::kFlash},
      {"tp2 pp2 dp2 1f1b full recompute", 2, 2, 2, 1, 1, false, PipelineSchedule::k1F1B, 0,
       FsdpMode::kNone, Recompute::kFull, AttentionImpl::kUnfused},
      {"pp4 gpipe", 1, 4, 2, 1, 1, false, PipelineSchedule::kGpipe, 0, FsdpMode::kNone,
       Recompute::kSelective, AttentionImpl::kUnfused},
      {"pp4 interleaved", 2, 4, 1, 1, 2, true, PipelineSchedule::kInterleaved1F1B, 0,
       FsdpMode::kNone, Recompute::kNone, AttentionImpl::kFlash},
      {"zero1", 1, 1, 8, 1, 1, false, PipelineSchedule::k1F1B, 1, FsdpMode::kNone, Recompute::kNone,
       AttentionImpl::kFlash},
      {"zero3", 1, 1, 8, 1, 1, false, PipelineSchedule::k1F1B, 3, FsdpMode::kNone, Recompute::kNone,
       AttentionImpl::kFlash},
      {"fsdp shard_grad_op", 1, 1, 8, 1, 1, false, PipelineSchedule::k1F1B, 0,
       FsdpMode::kShardGradOp, Recompute::kFull, AttentionImpl::kFlash},
      {"cp4 tp2", 2, 1, 1, 4, 1, true, PipelineSchedule::k1F1B, 0, FsdpMode::kNone,
       Recompute::kNone, AttentionImpl::kFlash},
  };
  for (const Case& k : cases) {
    for (bool mirror : {true, false}) {
      TransformerConfig c = small_gpt();
      c.parallelism.tensor = k.tp;
      c.parallelism.pipeline = k.pp;
      c.parallelism.data = k.dp;
      c.parallelism.context = k.cp;
      c.parallelism.virtual_stages = k.vp;
      c.parallelism.sequence = k.sp;
      c.parallelism.schedule = k.schedule;
      c.parallelism.zero = k.zero;
      c.parallelism.fsdp = k.fsdp;
      c.recompute = k.recompute;
      c.attention = k.attention;
      c.global_batch = c.micro_batch * k.dp * 4;
      c.mirror_data_parallel = mirror;
      const SimRun r = simulate(c, dgx.fabric, dgx.hardware);
      EXPECT_GT(ms(r.summary.predicted_iteration_time), 0.0) << k.name;
      EXPECT_EQ(r.ranks, static_cast<size_t>(mirror ? k.tp * k.pp * k.cp : 8)) << k.name;
      std::printf("%-34s mirror=%d %9.3f ms\n", k.name.c_str(), mirror ? 1 : 0,
                  ms(r.summary.predicted_iteration_time));
    }
  }
}

TEST(TransformerGenerator, MoeWithExpertParallelRunsAndImbalanceSlowsIt) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  TransformerConfig c = small_moe_ep8(8, 2, 2048, 0.0, 2);
  const SimRun balanced = simulate(c, dgx.fabric, dgx.hardware);
  c.moe.imbalance = 1.0;
  const SimRun skewed = simulate(c, dgx.fabric, dgx.hardware);
  std::printf("MoE EP8: balanced %.3f ms, busiest expert x2 %.3f ms\n",
              ms(balanced.summary.predicted_iteration_time),
              ms(skewed.summary.predicted_iteration_time));
  EXPECT_GT(skewed.summary.predicted_iteration_time, balanced.summary.predicted_iteration_time);
}

// The expert GEMMs are grouped GEMMs: with several local experts the router spreads the rank's
// tokens unevenly over them (GroupedRows: all the rank's routed rows, each expert capped at
// capacity_factor x its mean), tokens in m for the forward and data gradient, the mean count
// for the weight gradient; one local expert computes all of them as a plain GEMM.
TEST(TransformerGenerator, ExpertGemmsRouteTheRanksTokensOverItsExperts) {
  TransformerConfig c = small_moe_ep8(64, 8, 512, 1.25, 1);
  const LayerSizes z = layer_sizes(c);
  TaskGraph graph;
  const LayerKernels k = add_layer_kernels(c, z, graph);
  const int64_t routed = z.moe_tokens * 8;  // 1024 tokens x top 8, balanced
  for (const KernelDescId id :
       {k.expert_fc1_fwd, k.expert_fc1_dgrad, k.expert_fc2_fwd, k.expert_fc2_dgrad}) {
    const KernelDesc& d = graph.kernel_desc(id);
    EXPECT_EQ(d.batch, 8);
    EXPECT_EQ(d.m, routed / 8);
    EXPECT_EQ(d.grouped.routed, routed);
    EXPECT_EQ(d.grouped.cap, routed / 8 * 5 / 4);
  }
  EXPECT_EQ(graph.kernel_desc(k.expert_fc1_wgrad).grouped, GroupedRows{});
  EXPECT_EQ(graph.kernel_desc(k.expert_fc1_wgrad).k, routed / 8);
  c.moe.capacity_factor = 0.0;  // dropless: no cap
  TaskGraph dropless;
  EXPECT_EQ(dropless.kernel_desc(add_layer_kernels(c, z, dropless).expert_fc1_fwd).grouped.cap, 0);
  c.moe.experts = 8;  // one expert per rank
  TaskGraph one;
  const LayerSizes z8 = layer_sizes(c);
  EXPECT_EQ(one.kernel_desc(add_layer_kernels(c, z8, one).expert_fc1_fwd).grouped, GroupedRows{});
}

// With a capacity factor the router's imbalance still loads the busiest rank, up to the
// capacity; tokens above it are dropped before the dispatch, so they are not sent either.
TEST(TransformerGenerator, CapacityFactorCapsTheImbalanceAndDropsTokens) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  TransformerConfig c = small_moe_ep8(8, 2, 2048, 1.25, 2);
  const SimRun balanced = simulate(c, dgx.fabric, dgx.hardware);
  c.moe.imbalance = 0.2;
  const SimRun skewed = simulate(c, dgx.fabric, dgx.hardware);
  c.moe.imbalance = 3.0;
  const SimRun at_capacity = simulate(c, dgx.fabric, dgx.hardware);
  c.moe.imbalance = 0.25;
  const SimRun just_at_capacity = simulate(c, dgx.fabric, dgx.hardware);
  std::printf("MoE EP8 capacity 1.25: balanced %.3f ms, +20%% %.3f ms, +300%% %.3f ms\n",
              ms(balanced.summary.predicted_iteration_time),
              ms(skewed.summary.predicted_iteration_time),
              ms(at_capacity.summary.predicted_iteration_time));
  EXPECT_GT(skewed.summary.predicted_iteration_time, balanced.summary.predicted_iteration_time);
  EXPECT_GT(at_capacity.summary.predicted_iteration_time, skewed.summary.predicted_iteration_time);
  EXPECT_EQ(at_capacity.summary.predicted_iteration_time,
            just_at_capacity.summary.predicted_iteration_time);
  c.moe.imbalance = 0.0;
  c.moe.capacity_factor = 1.0;
  const SimRun full = simulate(c, dgx.fabric, dgx.hardware);
  c.moe.capacity_factor = 0.5;
  const SimRun half_dropped = simulate(c, dgx.fabric, dgx.hardware);
  EXPECT_LT(half_dropped.collective_bytes, full.collective_bytes);
}

TEST(TransformerGenerator, MirroredDataParallelEqualsTheFullSimulation) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  for (int zero : {0, 1, 3}) {
    for (int64_t tp : {1, 2}) {
      TransformerConfig c = small_gpt();
      c.parallelism.tensor = tp;
      c.parallelism.pipeline = 2;
      c.parallelism.data = 8 / (2 * tp);
      c.parallelism.zero = zero;
      c.global_batch = c.micro_batch * c.parallelism.data * 4;
      c.mirror_data_parallel = true;
      const SimRun mirrored = simulate(c, dgx.fabric, dgx.hardware);
      c.mirror_data_parallel = false;
      const SimRun full = simulate(c, dgx.fabric, dgx.hardware);
      std::printf("zero %d tp %ld: mirrored %.6f ms (%zu ranks), full %.6f ms (%zu ranks)\n", zero,
                  static_cast<long>(tp), ms(mirrored.summary.predicted_iteration_time),
                  mirrored.ranks, ms(full.summary.predicted_iteration_time), full.ranks);
      EXPECT_LT(mirrored.ranks, full.ranks);
      EXPECT_EQ(mirrored.summary.predicted_iteration_time, full.summary.predicted_iteration_time)
          << "zero " << zero << " tp " << tp;
    }
  }
  // MoE with expert parallel carved out of data x context, experts replicated over 2 ranks.
  for (int zero : {0, 1, 3}) {
    TransformerConfig c = small_gpt();
    c.layers = 4;
    c.moe.experts = 4;
    c.moe.top_k = 2;
    c.moe.expert_ffn = 2048;
    c.parallelism.context = 2;
    c.parallelism.data = 4;
    c.parallelism.expert = 4;
    c.parallelism.zero = zero;
    c.global_batch = c.micro_batch * c.parallelism.data * 2;
    c.mirror_data_parallel = true;
    const SimRun mirrored = simulate(c, dgx.fabric, dgx.hardware);
    c.mirror_data_parallel = false;
    const SimRun full = simulate(c, dgx.fabric, dgx.hardware);
    std::printf("MoE CP2 DP4 EP4 zero %d: mirrored %.6f ms (%zu ranks), full %.6f ms\n", zero,
                ms(mirrored.summary.predicted_iteration_time), mirrored.ranks,
                ms(full.summary.predicted_iteration_time));
    EXPECT_LT(mirrored.ranks, full.ranks);
    EXPECT_EQ(mirrored.summary.predicted_iteration_time, full.summary.predicted_iteration_time)
        << "MoE zero " << zero;
  }
}

TEST(TransformerGenerator, MoreMicroBatchesShrinkTheBubbleShare) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  double previous = 1.0;
  for (int64_t micro_batches : {4, 8, 16, 32}) {
    // Balanced stages (a small vocabulary: the output layer does not dominate the last stage).
    TransformerConfig c = small_gpt();
    c.layers = 16;
    c.vocab = 1024;
    c.parallelism.pipeline = 8;
    c.parallelism.data = 1;
    c.global_batch = c.micro_batch * micro_batches;
    const SimRun r = simulate(c, dgx.fabric, dgx.hardware);
    double bubble = 0;
    double window = 0;
    for (const RankBreakdown& rank : r.summary.ranks) {
      bubble += rank.bubble.seconds();
      window += rank.window.seconds();
    }
    const double share = bubble / window;
    std::printf("PP8, %2ld micro-batches: bubble %.1f%% of the stages' time (1F1B ideal %.1f%%)\n",
                static_cast<long>(micro_batches), share * 100,
                100.0 * 7.0 / static_cast<double>(micro_batches + 7));
    EXPECT_GT(share, 0.0);
    EXPECT_LT(share, previous) << micro_batches;
    previous = share;
  }
}

// Transformer Engine's TP overlap (parallelism.tp_comm_overlap) on a Llama-2-70B-sized layer
// at TP 8 with sequence parallel on a DGX H100: faster than the blocking collectives, by no
// more than the tensor-parallel communication they exposed, and the collectives it leaves
// exposed are fewer.
TEST(TransformerGenerator, TpCommOverlapHidesAtMostTheExposedTensorParallelTime) {
  const Platform dgx = platform("dgx_h100", "h100_sxm5_80gb");
  TransformerConfig c = test_configs::llama(2, 8192, 64, 8, 28672, 4096);
  c.attention = AttentionImpl::kFlash;
  c.parallelism.tensor = 8;
  c.parallelism.sequence = true;
  const SimRun blocking = simulate(c, dgx.fabric, dgx.hardware, 1);
  c.parallelism.tp_comm_overlap = true;
  const SimRun overlapped = simulate(c, dgx.fabric, dgx.hardware, 1);
  const RankBreakdown& b = blocking.summary.ranks.front();
  const RankBreakdown& o = overlapped.summary.ranks.front();
  const auto tp = static_cast<size_t>(ParallelDim::kTensor);
  std::printf("TP 8 layer pair: blocking %.3f ms (exposed tp %.3f), overlapped %.3f ms (%.3f)\n",
              ms(b.window), ms(b.exposed_by_dim[tp]), ms(o.window), ms(o.exposed_by_dim[tp]));
  EXPECT_LT(o.window, b.window);
  EXPECT_LE(b.window - o.window, b.exposed_by_dim[tp]);
  EXPECT_LT(o.exposed_by_dim[tp], b.exposed_by_dim[tp]);
}

// cuda_graphs (Megatron-Core's per-layer graphs): one graph launch per layer, micro-batch and
// direction replays the layer's kernels and its tensor-parallel collectives; the data-parallel
// gradient all-reduce, embedding, head and optimizer stay eager. The same kernels and
// collectives, far fewer launches, and a step no slower than eager.
TEST(TransformerGenerator, CudaGraphsReplayEachLayerOnceAWayAndKeepEveryKernel) {
  const Platform dgx = platform("dgx_h100", "h100_sxm5_80gb");
  TransformerConfig c = small_gpt(4);
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  c.parallelism.data = 2;
  c.global_batch = c.micro_batch * 2 * 2;  // 2 micro-batches per replica
  const auto graph_of = [&](bool graphs) {
    c.cuda_graphs = graphs;
    auto g = std::make_unique<TaskGraph>();
    generate_transformer(c, {1}, *g);
    return g;
  };
  const std::unique_ptr<TaskGraph> eager = graph_of(false);
  const std::unique_ptr<TaskGraph> graphed = graph_of(true);
  struct Count {
    int graph_launches = 0, launches = 0, kernels = 0, tp_captured = 0, tp = 0, dp_eager = 0,
        dp = 0;
  };
  const auto count = [](const TaskGraph& g) {
    Count n;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != 0) continue;
      if (task.kind == TaskKind::kLaunch) {
        ++n.launches;
        n.graph_launches += task.phase == HostPhase::kGraphLaunch;
      }
      n.kernels += task.kind == TaskKind::kKernel;
      if (task.kind != TaskKind::kCollective) continue;
      const bool captured = g.task(g.launcher_of(t)).phase == HostPhase::kGraphLaunch;
      const ParallelDim dim = g.collective(g.collective_of(t)).parallel_dim;
      if (dim == ParallelDim::kTensor) {
        ++n.tp;
        n.tp_captured += captured;
      } else if (dim == ParallelDim::kData) {
        ++n.dp;
        n.dp_eager += !captured;
      }
    }
    return n;
  };
  const Count e = count(*eager);
  const Count g = count(*graphed);
  EXPECT_EQ(e.graph_launches, 0);
  EXPECT_EQ(g.graph_launches, 4 * 2 * 2) << "layers x micro-batches x (forward, backward)";
  EXPECT_EQ(g.kernels, e.kernels);
  EXPECT_GT(g.tp, 0);
  EXPECT_EQ(g.tp, e.tp);
  // Every layer's tensor-parallel collectives are in its graphs; the eager ones are the
  // embedding's and the head's.
  EXPECT_GE(g.tp_captured, 4 * 2 * 4);
  EXPECT_LE(g.tp - g.tp_captured, 2 * 8) << "the embedding's and head's, per micro-batch";
  EXPECT_GT(g.dp, 0);
  EXPECT_EQ(g.dp_eager, g.dp);
  EXPECT_LT(g.launches, e.launches / 2);
  RooflineParams params;
  params.compute_fraction = dgx.hardware.achievable.compute;
  params.memory_fraction = dgx.hardware.achievable.memory;
  const RooflineKernelCost kernels(params);
  eager->seal();
  graphed->seal();
  const RunSummary eager_run = test_configs::run_step(*eager, kernels, dgx.fabric, dgx.hardware, 1);
  const RunSummary graphed_run =
      test_configs::run_step(*graphed, kernels, dgx.fabric, dgx.hardware, 1);
  std::printf("small GPT, TP 2 x DP 2: eager %.3f ms, per-layer CUDA graphs %.3f ms\n",
              ms(eager_run.ranks.front().window), ms(graphed_run.ranks.front().window));
  EXPECT_LE(graphed_run.ranks.front().window, eager_run.ranks.front().window);
  // Short sequences of a narrow model at 20 us per host op (the order of PyTorch's measured
  // per-op T1..T5, configs/host/): kernels shorter than their host ops, the host is the
  // bottleneck and the graphs shorten the step.
  c.hidden = 256;
  c.heads = 4;
  c.kv_heads = 4;
  c.ffn = 1024;
  c.seq = 32;
  const std::unique_ptr<TaskGraph> small_eager = graph_of(false);
  const std::unique_ptr<TaskGraph> small_graphed = graph_of(true);
  small_eager->seal();
  small_graphed->seal();
  const Duration host_op = Duration::from_us(20);
  const Duration host_bound =
      test_configs::run_step(*small_eager, kernels, dgx.fabric, dgx.hardware, 1, host_op)
          .ranks.front()
          .window;
  const Duration replayed =
      test_configs::run_step(*small_graphed, kernels, dgx.fabric, dgx.hardware, 1, host_op)
          .ranks.front()
          .window;
  std::printf("narrow GPT, seq 32: eager %.3f ms, per-layer CUDA graphs %.3f ms\n", ms(host_bound),
              ms(replayed));
  EXPECT_LT(replayed, host_bound);
}

// Squared ReLU (Nemotron): an ungated MLP whose activation is one relu-family elementwise
// kernel forward (1 read, 1 write per element) and backward (2 reads, 1 write).
TEST(TransformerGenerator, SquaredReluIsOneReluKernelEachWay) {
  TransformerConfig c = small_gpt();
  c.activation = TransformerActivation::kSquaredRelu;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  int forward = 0;
  int backward = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind != TaskKind::kKernel || task.rank != 0) continue;
    const KernelDesc& k = g.kernel(t);
    if (g.name(task.op_name) == "squared_relu") {
      ++forward;
      EXPECT_EQ(k.memory_op, MemoryOp::kRelu);
      EXPECT_DOUBLE_EQ(k.bytes_read, k.bytes_written);
    }
    if (g.name(task.op_name) == "SquaredReLUBackward") {
      ++backward;
      EXPECT_DOUBLE_EQ(k.bytes_read, 2 * k.bytes_written);
    }
  }
  const int64_t micro_batches = c.global_batch / c.micro_batch;
  EXPECT_EQ(forward, c.layers * micro_batches);
  EXPECT_EQ(backward, c.layers * micro_batches);
}

// GeGLU (T5 v1.1, Gemma): a gated MLP like SwiGLU, fc1 two projections wide, whose activation
// gelu(a) * b moves SwiGLU's bytes and takes its kernel family, with gelu's extra operations.
TEST(TransformerGenerator, GegluIsGatedLikeSwigluWithGelusOperations) {
  const auto kernels_of = [](TransformerActivation activation, std::string_view forward_op) {
    TransformerConfig c = small_gpt();
    c.activation = activation;
    TaskGraph g;
    generate_transformer(c, {1}, g);
    std::vector<KernelDesc> found;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.kind == TaskKind::kKernel && task.rank == 0 && g.name(task.op_name) == forward_op)
        found.push_back(g.kernel(t));
    }
    return found;
  };
  const std::vector<KernelDesc> geglu = kernels_of(TransformerActivation::kGeglu, "geglu");
  const std::vector<KernelDesc> swiglu = kernels_of(TransformerActivation::kSwiglu, "swiglu");
  ASSERT_FALSE(geglu.empty());
  ASSERT_EQ(geglu.size(), swiglu.size());
  EXPECT_EQ(geglu.front().memory_op, MemoryOp::kSwiglu);
  EXPECT_DOUBLE_EQ(geglu.front().bytes_read, swiglu.front().bytes_read);
  EXPECT_DOUBLE_EQ(geglu.front().bytes_written, swiglu.front().bytes_written);
  EXPECT_GT(geglu.front().flops, swiglu.front().flops);
  // Gated: the activation reads both halves of fc1's output, twice what it writes.
  EXPECT_DOUBLE_EQ(geglu.front().bytes_read, 2 * geglu.front().bytes_written);
}

// A MoE layer stalls the host once per forward: the all-to-all dispatcher all-gathers the
// per-expert counts over the EP group and copies them to the host, which waits for them
// (Megatron-Core's MoEAlltoAllTokenDispatcher.preprocess): dropless, for the all-to-all's
// splits, and dropping to a capacity factor, for the permutation's output size.
TEST(TransformerGenerator, MoeStallsTheHostOnTheTokenCountsDroplessOrDropping) {
  auto syncs_and_gathers = [](double capacity_factor) {
    const TransformerConfig c = small_moe_ep8(8, 2, 2048, capacity_factor, 2);
    TaskGraph g;
    generate_transformer(c, {1}, g);
    std::pair<int, int> n{0, 0};
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != 0) continue;
      if (task.kind == TaskKind::kHostSync && g.name(task.name) == "cudaStreamSynchronize") {
        ++n.first;
      }
      if (task.kind == TaskKind::kCollective &&
          g.name(task.op_name) == "moe::gather_tokens_per_expert") {
        ++n.second;
      }
    }
    return n;
  };
  for (const double capacity_factor : {0.0, 1.25}) {
    const auto [syncs, gathers] = syncs_and_gathers(capacity_factor);
    EXPECT_EQ(syncs, 8 * 2) << "every MoE layer's forward, 2 micro-batches; " << capacity_factor;
    EXPECT_EQ(gathers, 8 * 2) << capacity_factor;
  }
}

// Sliding-window attention, GPT-OSS style (every other layer attends fully): half the layers
// run the windowed kernels, and the step is faster than with full attention everywhere.
TEST(TransformerGenerator, SlidingWindowLayersRunTheWindowedAttention) {
  const Platform dgx = platform("dgx_h100", "h100_sxm5_80gb");
  TransformerConfig c = small_gpt(4);
  c.seq = 8192;
  c.micro_batch = 1;
  c.global_batch = 1;
  c.attention = AttentionImpl::kFlash;
  const SimRun full = simulate(c, dgx.fabric, dgx.hardware, 1);
  c.sliding_window = 128;
  c.full_attention_every = 2;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  int windowed = 0;
  int whole = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind != TaskKind::kKernel || g.kernel(t).cls != KernelClass::kAttention) continue;
    (g.kernel(t).attention.window == 128 ? windowed : whole) += 1;
  }
  EXPECT_EQ(windowed, 2 * 2) << "layers 0 and 2, forward and backward";
  EXPECT_EQ(whole, 2 * 2) << "layers 1 and 3";
  const SimRun window = simulate(c, dgx.fabric, dgx.hardware, 1);
  EXPECT_LT(window.summary.ranks.front().window, full.summary.ranks.front().window);
}

TEST(TransformerGenerator, PlainDataParallelOnlyAddsItsGradientAllReduce) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  TransformerConfig c = small_gpt();
  c.parallelism.data = 8;
  c.global_batch = c.micro_batch * 8 * 2;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  std::set<std::string> names;
  for (CollectiveId id = 0; id < g.collective_count(); ++id)
    names.insert(std::string(g.collective_name(id)));
  // No model parallelism: the gradient norm is local, so the DP all-reduce is the only one.
  EXPECT_EQ(names, (std::set<std::string>{"dp:all_reduce"}));
  // One GPU with the same per-GPU work: the data-parallel run is slower only by the exposed
  // all-reduce of its last buckets.
  const SimRun dp = simulate(c, dgx.fabric, dgx.hardware);
  c.parallelism.data = 1;
  c.global_batch = c.micro_batch * 2;
  const SimRun single = simulate(c, dgx.fabric, dgx.hardware);
  const Duration extra =
      dp.summary.predicted_iteration_time - single.summary.predicted_iteration_time;
  std::printf("DP8 %.3f ms, 1 GPU %.3f ms, exposed DP %.3f ms\n",
              ms(dp.summary.predicted_iteration_time), ms(single.summary.predicted_iteration_time),
              ms(dp.summary.ranks.front().exposed_communication));
  EXPECT_GE(extra, Duration::zero());
  EXPECT_LE(extra, dp.summary.ranks.front().communication);
}

// With TP = PP = 1 the data-parallel traffic is plain PyTorch DDP: its all-reduces are the
// buckets of assign_ddp_buckets (1 MiB first, then 25 MiB) over the fp32 main gradients in
// the order the backward produces them (output layer, layers last to first, embedding; each
// module's tensors last-first).
TEST(TransformerGenerator, TensorAndPipelineOneIsPlainDdp) {
  TransformerConfig c = small_gpt();
  c.parallelism.data = 4;
  c.global_batch = c.micro_batch * 4 * 2;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  std::vector<int64_t> reduced;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    ASSERT_EQ(g.collective_name(id), "dp:all_reduce");
    reduced.push_back(g.collective(id).bytes);
  }
  const int64_t h = c.hidden;
  const int64_t f = c.ffn;
  std::vector<int64_t> module;
  std::vector<int64_t> ready;
  auto backward_of = [&](std::vector<int64_t> tensors) {
    for (auto t = tensors.rbegin(); t != tensors.rend(); ++t)
      ready.push_back(*t * 4);  // fp32 main gradients (master weights)
  };
  backward_of({h, h});  // final layer norm (the output layer is tied to the embedding)
  for (int64_t l = 0; l < c.layers; ++l) {
    backward_of({h, h, 3 * h * h, 3 * h, h * h, h, h, h, f * h, f, h * f, h});
  }
  backward_of({32000 * h, c.seq * h});  // word (32000 = 250 x 128) and position embeddings
  std::vector<int64_t> expected;
  for (const pytorch::DdpBucket& b :
       pytorch::assign_ddp_buckets(ready, pytorch::kDefaultDdpFirstBucketBytes, 25 << 20)) {
    expected.push_back(b.bytes);
  }
  EXPECT_EQ(reduced, expected);
  EXPECT_GT(expected.size(), 3U);
}

// Megatron-Core's --overlap-param-gather: the distributed optimizer's parameter all-gathers
// move into the next iteration's first forward, the same buckets in forward order (the reverse
// of the gradients'), each layer waiting for its own; the step gets faster by at most the
// exposed data-parallel time.
TEST(TransformerGenerator, OverlappedParameterGatherMovesTheSameBytesAndHidesSomeOfThem) {
  const Platform dgx = platform("dgx_a100_cluster", "a100_sxm4_80gb");
  TransformerConfig c = small_gpt();
  c.parallelism.data = 16;
  c.global_batch = c.micro_batch * 16 * 2;
  c.parallelism.zero = 1;
  const auto gathers = [](const TransformerConfig& config) {
    TaskGraph g;
    generate_transformer(config, {1}, g);
    std::vector<int64_t> bytes;
    for (CollectiveId id = 0; id < g.collective_count(); ++id) {
      if (g.collective(id).kind == CollectiveKind::kAllGather)
        bytes.push_back(g.collective(id).bytes);
    }
    return bytes;
  };
  const std::vector<int64_t> after_step = gathers(c);
  const SimRun blocking = simulate(c, dgx.fabric, dgx.hardware, 1);
  c.parallelism.overlap_param_gather = true;
  std::vector<int64_t> in_forward = gathers(c);
  std::reverse(in_forward.begin(), in_forward.end());
  EXPECT_EQ(in_forward, after_step) << "the same buckets, in forward order";
  EXPECT_GT(after_step.size(), 3U);
  const SimRun overlapped = simulate(c, dgx.fabric, dgx.hardware, 1);
  const auto dp = static_cast<size_t>(ParallelDim::kData);
  const RankBreakdown& b = blocking.summary.ranks.front();
  const RankBreakdown& o = overlapped.summary.ranks.front();
  std::printf(
      "ZeRO-1 DP16: gather after the step %.3f ms (exposed dp %.3f), in the forward "
      "%.3f ms (%.3f)\n",
      ms(b.window), ms(b.exposed_by_dim[dp]), ms(o.window), ms(o.exposed_by_dim[dp]));
  EXPECT_LT(o.window, b.window);
  EXPECT_LE(b.window - o.window, b.exposed_by_dim[dp]);
  EXPECT_EQ(blocking.collective_bytes, overlapped.collective_bytes);
}

TEST(TransformerGenerator, Zero3UsesLessMemoryThanZero1AndMovesMoreBytes) {
  const Platform dgx = platform("dgx_a100", "a100_sxm4_80gb");
  TransformerConfig c = small_gpt();
  c.parallelism.data = 8;
  c.global_batch = c.micro_batch * 8;
  c.parallelism.zero = 1;
  const SimRun z1 = simulate(c, dgx.fabric, dgx.hardware, 1);
  const int64_t m1 = transformer_peak_memory(c).total_bytes();
  c.parallelism.zero = 3;
  const SimRun z3 = simulate(c, dgx.fabric, dgx.hardware, 1);
  const int64_t m3 = transformer_peak_memory(c).total_bytes();
  std::printf("ZeRO-1 %.1f MB, %.1f MB moved; ZeRO-3 %.1f MB, %.1f MB moved\n", m1 * 1e-6,
              z1.collective_bytes * 1e-6, m3 * 1e-6, z3.collective_bytes * 1e-6);
  EXPECT_LT(m3, m1);
  EXPECT_GT(z3.collective_bytes, z1.collective_bytes);
}

// The optimizer steps over exactly the parameters the memory model counts for each stage.
TEST(TransformerGenerator, OptimizerUpdatesTheParametersTheMemoryModelCounts) {
  for (bool moe : {false, true}) {
    TransformerConfig c = small_gpt();
    c.parallelism.tensor = 2;
    c.parallelism.pipeline = 2;
    c.global_batch = c.micro_batch * 2;
    if (moe) {
      c.moe.experts = 4;
      c.moe.top_k = 2;
      c.moe.expert_ffn = 2048;
      c.moe.shared_experts = 1;
      c.parallelism.data = 2;
      c.parallelism.expert = 2;
      c.global_batch = c.micro_batch * 2 * 2;
    }
    TaskGraph g;
    const TransformerGraph built = generate_transformer(c, {1}, g);
    for (TaskId t = 0; t < g.task_count(); ++t) {
      if (g.task(t).kind != TaskKind::kKernel) continue;
      const KernelDesc& k = g.kernel(t);
      if (k.memory_op != MemoryOp::kOptimizer) continue;
      int64_t elements = 0;
      for (int64_t n : k.optimizer.tensor_elements)
        elements += n;
      const int64_t global = built.simulated[g.task(t).rank];
      const int64_t stage = ParallelLayout(c.parallelism).coords(global).pp;
      EXPECT_EQ(elements, transformer_stage_parameters(c, stage).total())
          << (moe ? "moe" : "dense") << " stage " << stage;
    }
  }
}

// The distributed optimizer shards each parameter over the ranks that hold it, as the memory
// model counts: dense ones over data x context, routed experts over the expert data-parallel
// ranks (data x context / expert; here 1, so the experts are not sharded at all).
TEST(TransformerGenerator, ZeroShardsExpertsOverTheExpertDataParallelRanks) {
  TransformerConfig c = small_gpt();
  c.parallelism.tensor = 2;
  c.parallelism.pipeline = 2;
  c.moe.experts = 4;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 2048;
  c.moe.shared_experts = 1;
  c.parallelism.data = 2;
  c.parallelism.expert = 2;
  c.parallelism.zero = 1;
  c.global_batch = c.micro_batch * 2 * 2;
  TaskGraph g;
  const TransformerGraph built = generate_transformer(c, {1}, g);
  size_t steps = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind != TaskKind::kKernel) continue;
    const KernelDesc& k = g.kernel(t);
    if (k.memory_op != MemoryOp::kOptimizer) continue;
    ++steps;
    int64_t elements = 0;
    for (int64_t n : k.optimizer.tensor_elements)
      elements += n;
    const int64_t stage = ParallelLayout(c.parallelism).coords(built.simulated[g.task(t).rank]).pp;
    const StageParameters params = transformer_stage_parameters(c, stage);
    EXPECT_EQ(elements, params.dense / 2 + params.expert) << "stage " << stage;
  }
  EXPECT_GT(steps, 0u);
}

// EP 8 out of DP 8: each rank holds other experts, so only the dense gradients are all-reduced
// over the 8 data-parallel ranks (Megatron-Core's expert_parallel_buffers reduce over the
// expert data-parallel group, here of one rank).
TEST(TransformerGenerator, ExpertGradientsAreReducedOverTheExpertDataParallelRanks) {
  TransformerConfig c = small_moe_ep8(8, 2, 2048, MoeConfig{}.capacity_factor, 1);
  TaskGraph g;
  generate_transformer(c, {1}, g);
  int64_t reduced = 0;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    if (g.collective_name(id) != "dp:all_reduce") continue;
    EXPECT_EQ(g.collective(id).members.size(), 8u);
    reduced += g.collective(id).bytes;
  }
  const StageParameters params = transformer_stage_parameters(c, 0);
  EXPECT_EQ(reduced, params.dense * 4);  // fp32 main gradients

  // EP 2 out of DP 2 x CP 2: experts replicate over 2 ranks, in a bucket set of their own.
  c.parallelism.data = 2;
  c.parallelism.context = 2;
  c.parallelism.expert = 2;
  c.global_batch = c.micro_batch * 2;
  TaskGraph g2;
  generate_transformer(c, {1}, g2);
  int64_t dense = 0;
  int64_t expert = 0;
  for (CollectiveId id = 0; id < g2.collective_count(); ++id) {
    // Rank 0's groups: the dense one {0, 1, 2, 3}, its experts' {0, 2}.
    const std::vector<RankId>& members = g2.collective(id).members;
    if (g2.collective_name(id) != "dp:all_reduce" || members.front() != 0) continue;
    EXPECT_TRUE(members == (std::vector<RankId>{0, 1, 2, 3}) ||
                members == (std::vector<RankId>{0, 2}));
    (members.size() == 4 ? dense : expert) += g2.collective(id).bytes;
  }
  const StageParameters p2 = transformer_stage_parameters(c, 0);
  EXPECT_EQ(dense, p2.dense * 4);
  EXPECT_EQ(expert, p2.expert * 4);
  ParallelismConfig p;
  p.tensor = 2;
  p.context = 2;
  p.data = 2;
  p.pipeline = 2;
  p.expert = 2;
  const ParallelLayout layout(p);
  EXPECT_EQ(layout.expert_replica_group(0), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(layout.expert_replica_group(11), (std::vector<int64_t>{11, 15}));
}

// fp8 training (Transformer Engine's recipes): every fp8 GEMM input and output gradient is
// quantised by one cast kernel reading 2 bytes and writing 1 + 1 per element; current scaling
// adds an amax pass reading 2 bytes per element (a slower step); the output layer stays bf16.
// (On this small model the casts cost more than the fp8 GEMMs save: fp8 is slower than bf16.)
TEST(TransformerGenerator, Fp8RecipesQuantiseEveryFp8GemmOperand) {
  const Platform p = platform("dgx_h100", "h100_sxm5_80gb");
  struct Counts {
    int64_t casts = 0, amax = 0, cast_bytes = 0, amax_bytes = 0, fp8_gemms = 0, bf16_gemms = 0;
    double step_ms = 0.0;
  };
  auto count = [&](DType dtype, Fp8Recipe recipe) {
    TransformerConfig c = small_gpt();
    c.parallelism.data = 8;
    c.global_batch = 16;
    c.dtype = dtype;
    c.fp8_recipe = recipe;
    TaskGraph g;
    generate_transformer(c, {1}, g);
    Counts n;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      if (g.task(t).kind != TaskKind::kKernel || g.task(t).rank != 0) continue;
      const KernelDesc& k = g.kernel(t);
      if (k.cls == KernelClass::kGemm) ++(k.dtype == DType::kFp8 ? n.fp8_gemms : n.bf16_gemms);
      const std::string_view name = g.name(g.task(t).name);
      if (name == "fp8_cast_transpose") {
        EXPECT_EQ(k.memory_op, MemoryOp::kTranspose);
        ++n.casts;
        EXPECT_EQ(k.bytes_read, k.bytes_written);
        n.cast_bytes += static_cast<int64_t>(k.bytes_read + k.bytes_written);
      }
      if (name == "fp8_amax") {
        EXPECT_EQ(k.memory_op, MemoryOp::kSum);
        ++n.amax;
        EXPECT_EQ(k.bytes_written, 0.0);
        n.amax_bytes += static_cast<int64_t>(k.bytes_read);
      }
    }
    n.step_ms = ms(simulate(c, p.fabric, p.hardware, 1).summary.predicted_iteration_time);
    return n;
  };
  const Counts bf16 = count(DType::kBf16, Fp8Recipe::kDelayed);
  const Counts delayed = count(DType::kFp8, Fp8Recipe::kDelayed);
  const Counts current = count(DType::kFp8, Fp8Recipe::kCurrent);
  const Counts block = count(DType::kFp8, Fp8Recipe::kBlock);
  EXPECT_EQ(bf16.casts, 0);
  EXPECT_EQ(bf16.fp8_gemms, 0);
  // 8 layers x 1 micro-batch (16 sequences over 8 x 2) x (4 inputs + 4 output gradients).
  EXPECT_EQ(delayed.casts, 8 * 8);
  EXPECT_EQ(delayed.amax, 0);
  EXPECT_EQ(current.amax, delayed.casts);
  EXPECT_EQ(current.amax_bytes * 2, current.cast_bytes);  // one 2-byte read vs 2 + 2 bytes
  EXPECT_EQ(block.casts, delayed.casts);
  EXPECT_EQ(block.cast_bytes, delayed.cast_bytes);
  // A micro-batch of 1024 tokens, hidden 1024, ffn 4096: inputs 1024 x (1024 + 1024 + 1024 +
  // 4096), output gradients 1024 x (3072 + 1024 + 4096 + 1024), 4 bytes per element.
  EXPECT_EQ(delayed.cast_bytes, int64_t{8} * 4 * 1024 * (7168 + 9216));
  // The output layer's three GEMMs stay bf16; the layers' 12 are fp8.
  EXPECT_EQ(delayed.bf16_gemms, 3);
  EXPECT_EQ(delayed.fp8_gemms, 8 * 12);
  EXPECT_GT(current.step_ms, delayed.step_ms);
  EXPECT_DOUBLE_EQ(block.step_ms, delayed.step_ms);
  std::printf("step ms: bf16 %.3f, fp8 delayed %.3f, current %.3f\n", bf16.step_ms, delayed.step_ms,
              current.step_ms);
}

TEST(TransformerGenerator, IsDeterministic) {
  TransformerConfig c = small_gpt();
  c.parallelism.tensor = 2;
  c.parallelism.pipeline = 2;
  c.parallelism.data = 2;
  TaskGraph a;
  TaskGraph b;
  generate_transformer(c, {2}, a);
  generate_transformer(c, {2}, b);
  ASSERT_EQ(a.task_count(), b.task_count());
  ASSERT_EQ(a.collective_count(), b.collective_count());
  for (TaskId t = 0; t < a.task_count(); ++t) {
    ASSERT_EQ(a.task(t).kind, b.task(t).kind);
    ASSERT_EQ(a.name(a.task(t).name), b.name(b.task(t).name));
  }
}

/// The workload's trace suggestion for a small GPT on `gpus` GPUs with `parallelism` (YAML flow
/// map body) and `extra` workload keys.
std::optional<TraceRankSuggestion> suggested_trace_ranks(const std::string& parallelism,
                                                         uint32_t gpus, TaskGraph& graph,
                                                         const std::string& extra = "") {
  ConfigDocument doc = ConfigDocument::parse_string(
      "workload:\n  model: transformer\n  layers: 4\n  hidden: 256\n  heads: 8\n  vocab: "
      "1024\n  seq: 128\n  global_batch: 8\n  dtype: bf16\n  parallelism: {" +
          parallelism + "}\n" + extra,
      "scenario.yaml");
  TransformerWorkload workload(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = gpus;
  platform.iterations = 1;
  platform.warmup_iterations = 0;
  workload.prepare(platform);
  doc.check_all_keys_used();
  return workload.build(platform, graph).trace_ranks;
}

TEST(TransformerWorkload, SuggestsOneTraceRankPerPipelineStage) {
  // TP2 PP2 DP2, mirrored: graph ranks are global ranks 0, 1 (stage 0) and 4, 5 (stage 1).
  TaskGraph mirrored;
  const auto tp2pp2dp2 = suggested_trace_ranks("tensor: 2, pipeline: 2, data: 2", 8, mirrored);
  ASSERT_EQ(mirrored.rank_count(), 4u);
  ASSERT_TRUE(tp2pp2dp2.has_value());
  EXPECT_EQ(tp2pp2dp2->ranks, (std::vector<RankId>{0, 2}));
  EXPECT_EQ(mirrored.rank(0).name, "rank 0 (stage 0)");
  EXPECT_EQ(mirrored.rank(2).name, "rank 4 (stage 1)");
  EXPECT_NE(tp2pp2dp2->reason.find("one rank per pipeline stage"), std::string::npos)
      << tp2pp2dp2->reason;

  // Every replica simulated: still tensor 0 of replica 0, one per stage.
  TaskGraph full;
  const auto unmirrored = suggested_trace_ranks("tensor: 2, pipeline: 2, data: 2", 8, full,
                                                "  mirror_data_parallel: false\n");
  ASSERT_EQ(full.rank_count(), 8u);
  ASSERT_TRUE(unmirrored.has_value());
  EXPECT_EQ(unmirrored->ranks, (std::vector<RankId>{0, 4}));

  // Context parallelism, pipeline last in the order: global rank = tp + 2 cp + 4 pp.
  TaskGraph cp;
  const auto with_cp = suggested_trace_ranks("tensor: 2, context: 2, pipeline: 2, data: 1", 8, cp);
  ASSERT_TRUE(with_cp.has_value());
  EXPECT_EQ(with_cp->ranks, (std::vector<RankId>{0, 4}));

  // A graph that is one rank per stage already needs no suggestion.
  TaskGraph pipeline_only;
  EXPECT_FALSE(suggested_trace_ranks("pipeline: 2, data: 4", 8, pipeline_only).has_value());
  EXPECT_EQ(pipeline_only.rank_count(), 2u);
}

}  // namespace
}  // namespace upsim
