// torchtitan's per-op selective checkpointing (op_recompute.h): which matmuls the policy saves
// in which forward, and what a step with it costs next to no recomputation and full
// recomputation, in time and in stored activations.
#include "workloads/transformer/op_recompute.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "topology/fabric_loader.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
using M = BlockMatmul;

std::vector<M> saved(const TransformerConfig& c, int64_t forward) {
  std::vector<M> out;
  for (const M m : block_matmuls(c))
    if (op_policy_saves(c, forward, m)) out.push_back(m);
  return out;
}

TEST(OpRecompute, EverySecondMatmulIsSavedCountingOverTheBlocksForwards) {
  // SwiGLU: 7 matmuls per forward (wq, wk, wv, wo, w1, w3, w2); counts 1..7 save the odd ones,
  // counts 8..14 the others.
  const TransformerConfig llama = test_configs::llama(2, 4096, 32, 8, 14336, 2048);
  EXPECT_EQ(block_matmuls(llama).size(), 7U);
  EXPECT_EQ(saved(llama, 0), (std::vector<M>{M::kQuery, M::kValue, M::kGate, M::kDown}));
  EXPECT_EQ(saved(llama, 1), (std::vector<M>{M::kKey, M::kOutput, M::kUp}));
  EXPECT_EQ(saved(llama, 2), saved(llama, 0));
  // GELU: 6 matmuls, the same ones every forward.
  const TransformerConfig gpt = test_configs::small_gpt(2);
  EXPECT_EQ(saved(gpt, 0), (std::vector<M>{M::kQuery, M::kValue, M::kGate}));
  EXPECT_EQ(saved(gpt, 1), saved(gpt, 0));
}

TEST(OpRecompute, AStepCostsBetweenNoAndFullRecomputationAndStoresBetweenThem) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const HardwareProfile& hw = h100.hw;
  const CalibratedKernelCost& model = h100.model;
  ConfigDocument fabric = ConfigDocument::load_file(kConfigs / "topologies" / "dgx_h100.yaml");
  const Fabric dgx = load_fabric(fabric.root());
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
  c.micro_batch = 2;
  c.global_batch = 4;  // two micro-batches: both of the policy's alternatives in each step
  const auto step_ms = [&](Recompute r) {
    c.recompute = r;
    TaskGraph g;
    generate_transformer(c, {1}, g);
    g.seal();
    return test_configs::run_step(g, model, dgx, hw, 1).ranks.front().window.seconds() * 1e3;
  };
  const auto stored = [&](Recompute r) {
    c.recompute = r;
    return transformer_layer_activation_bytes(c, false);
  };
  const double none = step_ms(Recompute::kNone);
  const double op = step_ms(Recompute::kOp);
  const double full = step_ms(Recompute::kFull);
  std::printf(
      "2 Llama-8B-shaped layers, 2 x 2 x 4096 tokens on H100: recompute none %.3f ms, "
      "op %.3f ms, full %.3f ms\n",
      none, op, full);
  EXPECT_LT(none, op);
  EXPECT_LT(op, full);
  EXPECT_LT(stored(Recompute::kFull), stored(Recompute::kOp));
  EXPECT_LT(stored(Recompute::kOp), stored(Recompute::kNone));
}

}  // namespace
}  // namespace upsim
