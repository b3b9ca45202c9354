// qk_norm (workloads/transformer/transformer_config.h): a norm over each query and key head after
// the QKV projections, as Megatron-Core's --qk-layernorm and Qwen3's q_norm / k_norm run it:
// what the config takes and refuses, its kernels, parameters and kept activations, and that it
// never makes a step faster.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

std::string error_of(const std::string& extra) {
  return test_configs::workload_error(
      test_configs::small_llama_workload_yaml() + "  qk_norm: true\n" + extra, 1);
}

TEST(QkNorm, TheConfigTakesMultiHeadAttentionAndRefusesTheRestAtTheKey) {
  EXPECT_EQ(error_of(""), "");
  EXPECT_EQ(error_of("  layer_kernels: torchtitan\n"), "");
  EXPECT_EQ(error_of("  recompute: selective\n"), "");
  const std::string op = error_of("  layer_kernels: torchtitan\n  recompute: op\n");
  EXPECT_NE(op.find("workload.recompute"), std::string::npos) << op;
  const std::string composite =
      error_of("  layer_kernels: torchtitan\n  rms_norm_kernel: composite\n");
  EXPECT_NE(composite.find("workload.rms_norm_kernel"), std::string::npos) << composite;
  const std::string mla = test_configs::workload_error(
      "workload:\n  model: transformer\n  architecture: llama\n  layers: 2\n  hidden: 1024\n"
      "  heads: 16\n  vocab: 32000\n  seq: 512\n  qk_norm: true\n"
      "  mla: {kv_lora_rank: 64, qk_nope_head_dim: 32, qk_rope_head_dim: 16, v_head_dim: 32}\n",
      1);
  EXPECT_NE(mla.find("workload.mla"), std::string::npos) << mla;
}

// One norm over the query heads and one over the key heads per layer, each way, over the local
// heads' rows of head_dim; the weights of two head-wide norms per layer; the norms' inputs kept.
TEST(QkNorm, EachLayerNormsItsLocalQueryAndKeyHeads) {
  for (const LayerKernelSet kernels : {LayerKernelSet::kFused, LayerKernelSet::kTorchtitan}) {
    TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
    c.layer_kernels = kernels;
    const int64_t params = transformer_parameters(c);
    const int64_t kept = transformer_layer_activation_bytes(c, false);
    c.qk_norm = true;
    const std::map<std::string, int> counts = test_configs::kernel_counts(c);
    EXPECT_EQ(counts.at("q_norm_fwd"), 2);
    EXPECT_EQ(counts.at("k_norm_fwd"), 2);
    EXPECT_EQ(counts.at("q_norm_bwd"), 2);
    EXPECT_EQ(counts.at("k_norm_bwd"), 2);
    EXPECT_EQ(transformer_parameters(c) - params, 2 * 2 * 64);
    EXPECT_EQ(transformer_layer_activation_bytes(c, false) - kept, 2 * 512 * (16 + 4) * 64);
  }
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.qk_norm = true;
  c.parallelism.tensor = 2;
  TaskGraph g;
  const LayerKernels k = add_layer_kernels(c, layer_sizes(c), g);
  EXPECT_EQ(g.kernel_desc(k.q_norm_head_fwd).row_elements, 64);
  EXPECT_DOUBLE_EQ(g.kernel_desc(k.q_norm_head_fwd).bytes_written, 2.0 * 512 * 8 * 64);
  EXPECT_DOUBLE_EQ(g.kernel_desc(k.k_norm_head_fwd).bytes_written, 2.0 * 512 * 2 * 64);
}

TEST(QkNorm, AStepIsNeverFaster) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
  const Duration without = test_configs::step_window(c, h100);
  c.qk_norm = true;
  EXPECT_GT(test_configs::step_window(c, h100), without);
}

}  // namespace
}  // namespace upsim
