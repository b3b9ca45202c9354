// torchtitan's MoE module (layer_kernels torchtitan with moe; workloads/transformer/
// torchtitan_moe.h): what the config takes and refuses, the kernels a layer launches eager and
// compiled, the host sync expert parallel adds, and that it never makes a step faster than
// Megatron-Core's fused MoE layer of the same shape.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/torchtitan_layer.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

const std::string kMoe = "  moe: {experts: 8, top_k: 2, expert_ffn: 1408}\n";

std::string error_of(const std::string& extra, const std::string& kernels = "torchtitan",
                     uint32_t gpus = 1) {
  return test_configs::workload_error(
      test_configs::small_llama_workload_yaml() + "  layer_kernels: " + kernels + "\n" + extra,
      gpus);
}

TransformerConfig parse(const std::string& extra, const std::string& kernels = "torchtitan") {
  return test_configs::parse_workload(
      test_configs::small_llama_workload_yaml() + "  layer_kernels: " + kernels + "\n" + extra, 1);
}

TEST(TorchtitanMoe, TheConfigTakesTorchtitansRoutingAndRefusesTheRestAtTheKey) {
  EXPECT_EQ(error_of(kMoe), "");
  // Both route dropless by default (Megatron-Core's moe_expert_capacity_factor None);
  // torchtitan scales the experts' inputs, Megatron-Core their outputs.
  const TransformerConfig torchtitan = parse(kMoe);
  EXPECT_EQ(torchtitan.moe.capacity_factor, 0.0);
  EXPECT_TRUE(torchtitan.moe.score_before_experts);
  const TransformerConfig fused = parse(kMoe, "fused");
  EXPECT_EQ(fused.moe.capacity_factor, 0.0);
  EXPECT_FALSE(fused.moe.score_before_experts);
  EXPECT_EQ(error_of("  moe: {experts: 8, score_before_experts: false}\n"), "");
  const std::string capacity = error_of("  moe: {experts: 8, capacity_factor: 1.25}\n");
  EXPECT_NE(capacity.find("workload.moe.capacity_factor"), std::string::npos) << capacity;
  EXPECT_NE(capacity.find("dropless"), std::string::npos) << capacity;
  const std::string before = error_of("  moe: {experts: 8, score_before_experts: true}\n", "fused");
  EXPECT_NE(before.find("workload.moe.score_before_experts"), std::string::npos) << before;
  const std::string tensor =
      error_of(kMoe + "  parallelism: {tensor: 2, sequence: true}\n", "torchtitan", 2);
  EXPECT_NE(tensor.find("workload.parallelism.tensor"), std::string::npos) << tensor;
  const std::string fp8 = error_of(kMoe + "  dtype: fp8\n  compile: true\n");
  EXPECT_NE(fp8.find("workload.dtype"), std::string::npos) << fp8;
}

TransformerConfig small_moe(bool compile, int64_t expert_parallel) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.layer_kernels = LayerKernelSet::kTorchtitan;
  c.compile = compile;
  c.moe.experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 1408;
  c.moe.capacity_factor = 0.0;
  c.moe.score_before_experts = true;
  c.parallelism.data = expert_parallel;
  c.parallelism.expert = expert_parallel;
  c.global_batch = expert_parallel;
  return c;
}

// Per MoE layer and micro-batch: the router's histc (twice) and argsort, w1, w3 and w2 as three
// grouped GEMMs (w1 and w3 not fused), the slots' gather and the combine's scatter (each with
// its gradient), the score multiply's casts (eager) or one fused kernel (compiled).
TEST(TorchtitanMoe, EachOpOfTheModuleLaunchesItsKernels) {
  const int layers = 2;
  const std::map<std::string, int> eager = test_configs::kernel_counts(small_moe(false, 1));
  EXPECT_EQ(eager.at("bf16gemm/expert_w1"), layers);
  EXPECT_EQ(eager.at("bf16gemm/expert_w3"), layers);
  EXPECT_EQ(eager.at("bf16gemm/expert_w2"), layers);
  EXPECT_EQ(eager.count("bf16gemm/expert_fc1"), 0U);
  EXPECT_EQ(eager.at("router_histc"), layers);
  EXPECT_EQ(eager.at("reorderer_histc"), layers);
  EXPECT_EQ(eager.at("reorderer_argsort"), layers);
  EXPECT_EQ(eager.at("slot_gather"), 2 * layers);  // x[indices], and index_put's gradient
  EXPECT_EQ(eager.at("slot_scatter"), layers);
  EXPECT_EQ(eager.at("topk_sum"), layers);
  EXPECT_EQ(eager.at("score_mul"), 2 * layers);
  EXPECT_EQ(eager.at("score_grad_reduce"), layers);
  EXPECT_EQ(eager.at("permute_gather"), layers);
  EXPECT_EQ(eager.at("token_scatter_add"), layers);
  EXPECT_EQ(eager.at("gate_mul"), 3 * layers);
  const std::map<std::string, int> compiled = test_configs::kernel_counts(small_moe(true, 1));
  EXPECT_EQ(compiled.count("score_mul"), 0U);
  EXPECT_EQ(compiled.at("triton_fused_score_scale"), layers);
  EXPECT_EQ(compiled.at("triton_fused_router_scores"), layers);
  EXPECT_EQ(compiled.count("gate_mul"), 0U);
  EXPECT_EQ(compiled.at("reorderer_argsort"), layers);  // sorts and index ops stay
  // Scores after the experts (torchtitan's Qwen3 configs): no score multiply on the inputs; the
  // combine casts the slots to fp32 and takes a bmm with the scores.
  TransformerConfig after = small_moe(false, 1);
  after.moe.score_before_experts = false;
  const std::map<std::string, int> combined = test_configs::kernel_counts(after);
  EXPECT_EQ(combined.count("score_mul"), 0U);
  EXPECT_EQ(combined.count("topk_sum"), 0U);
  EXPECT_EQ(combined.at("score_combine_bmm"), layers);
  EXPECT_EQ(combined.at("score_combine_bmm_bwd"), layers);
}

// The optimizer's step pre-hook (_update_expert_bias): the MoE layers' token counts stacked and
// all-reduced once per step, then nine small kernels per MoE layer; Megatron-Core's layers have
// none of it.
TEST(TorchtitanMoe, TheExpertBiasIsUpdatedBeforeTheOptimizerStep) {
  const TransformerConfig c = small_moe(false, 8);
  EXPECT_EQ(test_configs::kernel_counts(c).at("expert_bias_update"), 2 * 9);
  EXPECT_EQ(test_configs::kernel_counts(c).at("tokens_per_expert_stack"), 1);
  TransformerConfig fused = c;
  fused.layer_kernels = LayerKernelSet::kFused;
  fused.moe.score_before_experts = false;
  EXPECT_EQ(test_configs::kernel_counts(fused).count("expert_bias_update"), 0U);
}

int host_syncs(const TransformerConfig& c) {
  return test_configs::task_count(c, TaskKind::kHostSync, "cudaStreamSynchronize");
}

// On one rank torchtitan pads the experts' groups on the GPU (generate_permute_indices): the host
// never waits; under expert parallel the all-to-all's split sizes are host lists (.tolist()),
// one sync per MoE layer forward and micro-batch.
TEST(TorchtitanMoe, OnlyExpertParallelStallsTheHostOnTheTokenCounts) {
  EXPECT_EQ(host_syncs(small_moe(false, 1)), 0);
  TransformerConfig ep = small_moe(false, 8);
  ep.global_batch = 16;  // 2 micro-batches per replica
  EXPECT_EQ(host_syncs(ep), 2 * 2);
}

// The score multiply saves the routed slots for its backward: in fp32 eager, in bf16 compiled;
// beyond that a torchtitan MoE layer keeps what Megatron-Core's keeps.
TEST(TorchtitanMoe, TheScoreMultiplyKeepsTheRoutedSlots) {
  TransformerConfig c = small_moe(false, 1);
  const int64_t slots = 512 * 2;                                   // tokens x top_k
  const int64_t attention = torchtitan_extra_activation_bytes(c);  // repeat_kv's, every layer
  const int64_t eager = transformer_layer_activation_bytes(c, true) - attention;
  c.compile = true;
  const int64_t compiled = transformer_layer_activation_bytes(c, true) - attention;
  c.layer_kernels = LayerKernelSet::kFused;
  c.moe.score_before_experts = false;
  const int64_t fused = transformer_layer_activation_bytes(c, true);
  EXPECT_EQ(eager - fused, 4 * slots * 1024);
  EXPECT_EQ(compiled - fused, 2 * slots * 1024);
}

// torchtitan's module moves the routed tokens through more copies (the slots' gather and
// scatter, _permute's vstack and padded gather) and runs w1 and w3 as two grouped GEMMs: a step
// is never faster than with Megatron-Core's fused MoE layer of the same shape, eager or
// compiled, on one rank or under expert parallel; compiling never makes it slower.
TEST(TorchtitanMoe, AStepIsNeverFasterThanWithTheFusedMoeLayer) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  for (const int64_t ep : {1, 8}) {
    Duration eager_torchtitan;
    for (const bool compile : {false, true}) {
      TransformerConfig c = small_moe(compile, ep);
      c.hidden = 2048;
      c.seq = 4096;
      const Duration torchtitan = test_configs::step_window(c, h100);
      c.layer_kernels = LayerKernelSet::kFused;
      c.moe.score_before_experts = false;
      const Duration fused = test_configs::step_window(c, h100);
      std::printf(
          "MoE 2 layers, 8 experts top-2, EP %lld%s on H100: fused %.3f ms, torchtitan "
          "%.3f ms\n",
          static_cast<long long>(ep), compile ? ", compiled" : "", fused.seconds() * 1e3,
          torchtitan.seconds() * 1e3);
      EXPECT_GT(torchtitan, fused);
      if (compile) {
        EXPECT_LE(torchtitan, eager_torchtitan);
      } else {
        eager_torchtitan = torchtitan;
      }
    }
  }
}

}  // namespace
}  // namespace upsim
