// Transformer Engine's per-module CUDA graphs (cuda_graph_scope; workloads/transformer/
// cuda_graph_scope.h): what the config takes and refuses, and what a MoE layer's graphs hold
// with the attention, the router and the dispatcher's preprocess captured: one graph a layer,
// micro-batch and direction, the same kernels and collectives as eager, the token counts
// gathered in the graph and waited for after it, the dispatch and experts eager, and a step no
// slower than eager.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/transformer_workload.h"

namespace upsim {
namespace {

std::string error_of(const std::string& extra) {
  return test_configs::workload_error(test_configs::small_llama_workload_yaml() + extra, 8);
}

TEST(CudaGraphScope, TheConfigTakesMegatronsModulesAndRefusesTheRestAtTheKey) {
  const std::string moe = "  moe: {experts: 8}\n  parallelism: {data: 8, expert: 8}\n";
  EXPECT_EQ(error_of("  cuda_graphs: true\n  cuda_graph_scope: [attn, moe_router, "
                     "moe_preprocess]\n" +
                     moe),
            "");
  EXPECT_EQ(error_of("  cuda_graphs: true\n  cuda_graph_scope: [attn, mlp]\n"), "");
  const TransformerConfig c = test_configs::parse_workload(
      test_configs::small_llama_workload_yaml() +
          "  cuda_graphs: true\n  cuda_graph_scope: [moe_router]\n" + moe,
      8);
  EXPECT_TRUE(c.cuda_graph_scope.moe_router);
  EXPECT_FALSE(c.cuda_graph_scope.captures_attention());
  EXPECT_TRUE(test_configs::parse_workload(test_configs::small_llama_workload_yaml(), 8)
                  .cuda_graph_scope.whole_layer());
  // Without cuda_graphs the list is checked, then ignored (the run warns).
  const TransformerConfig off = test_configs::parse_workload(
      test_configs::small_llama_workload_yaml() + "  cuda_graph_scope: [attn]\n", 8);
  EXPECT_TRUE(off.cuda_graph_scope.ignored);
  EXPECT_FALSE(off.cuda_graph_scope.attn);
  EXPECT_FALSE(off.cuda_graphs);
  EXPECT_NE(error_of("  cuda_graph_scope: [full]\n").find("unknown CUDA graph scope"),
            std::string::npos);
  for (const auto& [extra, what] : std::vector<std::pair<std::string, std::string>>{
           {"  cuda_graphs: true\n  cuda_graph_scope: []\n", "non-empty list"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [full]\n", "unknown CUDA graph scope"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [attn, attn]\n", "listed twice"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [moe_router]\n", "has none"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [mlp]\n" + moe, "has none"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [moe, moe_router]\n" + moe,
            "list one of them"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [moe_preprocess]\n" + moe, "add moe_router"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [moe]\n" + moe, "padded to the capacity"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [moe_router, moe_preprocess]\n  moe: "
            "{experts: 8, capacity_factor: 1.25}\n  parallelism: {data: 8, expert: 8}\n",
            "before_permutation_1"},
           {"  cuda_graphs: true\n  cuda_graph_scope: [attn]\n  recompute: full\n",
            "full recomputation"},
       }) {
    const std::string e = error_of(extra);
    EXPECT_NE(e.find("workload.cuda_graph"), std::string::npos) << extra << e;
    EXPECT_NE(e.find(what), std::string::npos) << extra << e;
  }
}

/// small_gpt(4) with MoE layers of 8 experts, top 2, dropless, over expert parallel 8 of data
/// parallel 8, two micro-batches per replica; CUDA graphs with `scope`, or none.
TransformerConfig graphed_moe(std::optional<CudaGraphScope> scope) {
  TransformerConfig c = test_configs::with_moe(test_configs::small_gpt(4), 8, 2, 2048);
  c.parallelism.data = 8;
  c.parallelism.expert = 8;
  c.global_batch = c.micro_batch * 8 * 2;
  c.cuda_graphs = scope.has_value();
  if (scope) c.cuda_graph_scope = *scope;
  return c;
}

struct Counts {
  int graph_launches = 0;
  std::map<std::string, int> kernels;
  std::map<std::string, int> collectives_captured;
  std::map<std::string, int> collectives_eager;
  int host_syncs = 0;
  int topk_launched = 0;  ///< router top-k kernels launched eagerly
};

Counts counts_of(const TransformerConfig& c) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  Counts n;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.rank != 0) continue;
    if (task.kind == TaskKind::kLaunch) n.graph_launches += task.phase == HostPhase::kGraphLaunch;
    if (task.kind == TaskKind::kKernel) ++n.kernels[std::string(g.name(task.name))];
    if (task.kind == TaskKind::kHostSync)
      n.host_syncs += g.name(task.name) == "cudaStreamSynchronize";
    if (task.kind == TaskKind::kKernel && g.name(task.name) == "router_topk") {
      n.topk_launched += g.task(g.launcher_of(t)).phase != HostPhase::kGraphLaunch;
    }
    if (task.kind == TaskKind::kCollective) {
      const bool captured = g.task(g.launcher_of(t)).phase == HostPhase::kGraphLaunch;
      ++(captured ? n.collectives_captured
                  : n.collectives_eager)[std::string(g.name(task.op_name))];
    }
  }
  return n;
}

// [attn, moe_router, moe_preprocess]: per layer, micro-batch and direction one graph (the
// attention, norm, router and the count all-gather and first permutation, and their backward);
// the all-to-alls eager; the host still waits for the counts once a layer's forward; the same
// kernels and collectives as eager, the router's kernels replayed by the graphs.
TEST(CudaGraphScope, TheRouterGraphEndsBeforeTheDispatchAndKeepsEveryKernel) {
  CudaGraphScope scope;
  scope.attn = true;
  scope.moe_router = true;
  scope.moe_preprocess = true;
  const Counts eager = counts_of(graphed_moe(std::nullopt));
  const Counts graphed = counts_of(graphed_moe(scope));
  EXPECT_EQ(eager.graph_launches, 0);
  EXPECT_EQ(graphed.graph_launches, 4 * 2 * 2) << "layers x micro-batches x (forward, backward)";
  EXPECT_EQ(graphed.kernels, eager.kernels);
  EXPECT_EQ(graphed.host_syncs, eager.host_syncs);
  EXPECT_EQ(graphed.host_syncs, 4 * 2);
  EXPECT_EQ(graphed.collectives_captured.at("moe::gather_tokens_per_expert"), 4 * 2);
  EXPECT_EQ(graphed.collectives_eager.count("moe::gather_tokens_per_expert"), 0U);
  EXPECT_EQ(graphed.collectives_eager.at("c10d::all_to_all_single"),
            eager.collectives_eager.at("c10d::all_to_all_single"));
  EXPECT_EQ(graphed.collectives_captured.count("c10d::all_to_all_single"), 0U);
  EXPECT_EQ(eager.topk_launched, 4 * 2);
  EXPECT_EQ(graphed.topk_launched, 0);

  // [moe_router] alone: the attention eager, a graph each for the router part forward and its
  // backward.
  CudaGraphScope router;
  router.moe_router = true;
  const Counts router_only = counts_of(graphed_moe(router));
  EXPECT_EQ(router_only.graph_launches, 4 * 2 * 2);
  EXPECT_EQ(router_only.kernels, eager.kernels);
  EXPECT_EQ(router_only.collectives_eager.at("moe::gather_tokens_per_expert"), 4 * 2);
}

// With moe.shared_expert_overlap the shared experts run eagerly on their side stream, so the
// compute stream's waits for it stay outside the router's graph (a capture cannot wait for an
// event recorded on a stream outside the capture), and there is still one in every MoE layer's
// forward and backward.
TEST(CudaGraphScope, WaitsForTheEagerSideStreamStayOutsideTheGraphs) {
  CudaGraphScope scope;
  scope.attn = true;
  scope.moe_router = true;
  scope.moe_preprocess = true;
  TransformerConfig c = graphed_moe(scope);
  c.moe.shared_experts = 1;
  c.moe.shared_expert_overlap = true;
  TaskGraph g;
  generate_transformer(c, {1}, g);
  int side_waits = 0;
  int captured = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.rank != 0 || task.kind != TaskKind::kStreamWait) continue;
    if (task.resource != transformer_emit::kCompute ||
        g.task(g.awaited_record(t)).resource != transformer_emit::kSharedExperts) {
      continue;
    }
    ++side_waits;
    captured += g.task(g.launcher_of(t)).phase == HostPhase::kGraphLaunch;
  }
  EXPECT_GE(side_waits, 4 * 2 * 2);
  EXPECT_EQ(captured, 0);
}

// On a DGX H100 node: the graphs never make the step slower.
TEST(CudaGraphScope, AGraphedRouterIsNoSlowerThanEager) {
  const test_configs::CalibratedGpu gpu =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const auto step = [&](const TransformerConfig& c) {
    return test_configs::fabric_step(c, gpu, "dgx_h100").predicted_iteration_time;
  };
  CudaGraphScope scope;
  scope.attn = true;
  scope.moe_router = true;
  scope.moe_preprocess = true;
  EXPECT_LE(step(graphed_moe(scope)), step(graphed_moe(std::nullopt)));
}

}  // namespace
}  // namespace upsim
