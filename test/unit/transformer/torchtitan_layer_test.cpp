// layer_kernels torchtitan (workloads/transformer/torchtitan_layer.h): torchtitan's Llama
// modules' kernels against the fused ones, what the config refuses, the memory they add, and that
// they never make a step faster.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

std::string error_of(const std::string& extra, const std::string& kernels = "torchtitan") {
  return test_configs::workload_error(
      test_configs::small_llama_workload_yaml() + "  layer_kernels: " + kernels + "\n" + extra, 1);
}

TEST(TorchtitanLayers, TheConfigTakesTheLlamaModulesAndRefusesTheRestAtTheKey) {
  EXPECT_EQ(error_of(""), "");
  EXPECT_EQ(error_of("  recompute: op\n  compile: true\n"), "");
  EXPECT_NE(error_of("  activation: gelu\n").find("workload.activation"), std::string::npos);
  EXPECT_NE(error_of("  attention: unfused\n").find("workload.attention"), std::string::npos);
  EXPECT_NE(error_of("  recompute: selective\n").find("workload.recompute"), std::string::npos);
  const std::string unknown = error_of("", "triton");
  EXPECT_NE(unknown.find("valid: fused, torchtitan"), std::string::npos) << unknown;
}

// Per layer and micro-batch: wq, wk, wv and w1, w3 each a GEMM of its own; the eager rotary's
// casts and complex multiplies for q and k both ways; repeat_kv's two copies (16 query heads
// over 4 key/value heads) and their sums; silu and the gate product.
TEST(TorchtitanLayers, EachModuleLaunchesItsOwnKernels) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.layer_kernels = LayerKernelSet::kTorchtitan;
  const std::map<std::string, int> eager = test_configs::kernel_counts(c);
  const int layers = 2;
  EXPECT_EQ(eager.at("bf16gemm/q"), layers);
  EXPECT_EQ(eager.at("bf16gemm/k"), layers);
  EXPECT_EQ(eager.at("bf16gemm/v"), layers);
  EXPECT_EQ(eager.at("bf16gemm/w1"), layers);
  EXPECT_EQ(eager.at("bf16gemm/w3"), layers);
  EXPECT_EQ(eager.count("bf16gemm/qkv"), 0U);
  EXPECT_EQ(eager.at("complex_mul"), 4 * layers);  // q and k, forward and backward
  EXPECT_EQ(eager.at("cast_to_fp32"), 4 * layers);
  EXPECT_EQ(eager.at("repeat_kv_copy"), 2 * layers);
  EXPECT_EQ(eager.at("repeat_kv_sum"), 2 * layers);
  EXPECT_EQ(eager.at("transpose_copy"), 2 * layers);
  EXPECT_EQ(eager.at("gate_mul"), 3 * layers);        // forward, and both factors' gradients
  EXPECT_EQ(eager.at("input_grad_add"), 3 * layers);  // wq + wk + wv, w1 + w3
  // Compiled, Inductor fuses the rotary and silu-mul chains: one kernel each way.
  c.compile = true;
  const std::map<std::string, int> compiled = test_configs::kernel_counts(c);
  EXPECT_EQ(compiled.count("complex_mul"), 0U);
  EXPECT_EQ(compiled.at("triton_fused_rotary"), 2 * layers);
  EXPECT_EQ(compiled.at("triton_fused_silu_mul"), layers);
  EXPECT_EQ(compiled.count("gate_mul"), 0U);
}

// SDPA saves K and V after repeat_kv: at the query heads' width (16 of 128 instead of 4).
TEST(TorchtitanLayers, RepeatedKeysAndValuesAreKeptForTheBackward) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  const int64_t fused = transformer_layer_activation_bytes(c, false);
  c.layer_kernels = LayerKernelSet::kTorchtitan;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false) - fused, 2 * 2 * 512 * (16 - 4) * 64);
  c.kv_heads = 16;
  const int64_t full_heads = transformer_layer_activation_bytes(c, false);
  c.layer_kernels = LayerKernelSet::kFused;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false), full_heads);
}

// torchtitan's modules run the fused ones' GEMM work in more kernels and move more bytes: a step
// is never faster, eager or compiled, with or without tensor parallel.
TEST(TorchtitanLayers, AStepIsNeverFasterThanWithTheFusedModules) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  for (const bool compile : {false, true}) {
    for (const int64_t tensor : {1, 2}) {
      TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
      c.compile = compile;
      c.parallelism.tensor = tensor;
      c.parallelism.sequence = tensor > 1;
      const Duration fused = test_configs::step_window(c, h100);
      c.layer_kernels = LayerKernelSet::kTorchtitan;
      const Duration torchtitan = test_configs::step_window(c, h100);
      std::printf(
          "Llama 8B-shaped 2 layers, seq 4096, TP %lld%s on H100: fused %.3f ms, "
          "torchtitan %.3f ms\n",
          static_cast<long long>(tensor), compile ? ", compiled" : "", fused.seconds() * 1e3,
          torchtitan.seconds() * 1e3);
      EXPECT_GT(torchtitan, fused);
    }
  }
}

// PyTorch 2.8 and before (rms_norm_kernel: composite): eager nn.RMSNorm is ATen's composite
// rms_norm: per norm 8 kernels forward and 12 backward, every layer's two and the final one; it
// keeps two fp32 tensors of its rows in place of its input, and makes a step slower. Refused
// where it does not apply.
TEST(TorchtitanLayers, TheCompositeRmsNormRunsItsDecomposition) {
  EXPECT_EQ(error_of("  norm: rms_norm\n  rms_norm_kernel: composite\n"), "");
  const std::string fused = error_of("  rms_norm_kernel: composite\n", "fused");
  EXPECT_NE(fused.find("workload.rms_norm_kernel"), std::string::npos) << fused;
  const std::string compiled = error_of("  rms_norm_kernel: composite\n  compile: true\n");
  EXPECT_NE(compiled.find("workload.rms_norm_kernel"), std::string::npos) << compiled;
  EXPECT_NE(compiled.find("torch.compile fuses"), std::string::npos) << compiled;

  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.layer_kernels = LayerKernelSet::kTorchtitan;
  const std::map<std::string, int> fused_counts = test_configs::kernel_counts(c);
  const int64_t fused_bytes = transformer_layer_activation_bytes(c, false);
  c.rms_norm_composite = true;
  const std::map<std::string, int> composite = test_configs::kernel_counts(c);
  const int norms = 2 * 2 + 1;
  EXPECT_EQ(composite.at("rms_norm_pow"), norms);
  EXPECT_EQ(composite.at("rms_norm_mean"), norms);
  EXPECT_EQ(composite.at("rms_norm_pow_bwd"), norms);
  EXPECT_EQ(composite.at("rms_norm_weight_grad_sum"), norms);
  EXPECT_EQ(composite.count("layer_norm_fwd"), 0U);
  EXPECT_EQ(fused_counts.at("layer_norm_fwd"), norms);
  int fused_total = 0, composite_total = 0;
  for (const auto& [name, n] : fused_counts)
    fused_total += n;
  for (const auto& [name, n] : composite)
    composite_total += n;
  EXPECT_EQ(composite_total - fused_total, norms * (8 + 12 - 2));
  EXPECT_EQ(transformer_layer_activation_bytes(c, false) - fused_bytes, 2 * (8 - 2) * 512 * 1024);

  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  TransformerConfig step = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
  step.layer_kernels = LayerKernelSet::kTorchtitan;
  const Duration with_fused = test_configs::step_window(step, h100);
  step.rms_norm_composite = true;
  const Duration with_composite = test_configs::step_window(step, h100);
  std::printf(
      "Llama 8B-shaped 2 layers, seq 4096, torchtitan eager on H100: fused RMSNorm %.3f "
      "ms, composite %.3f ms\n",
      with_fused.seconds() * 1e3, with_composite.seconds() * 1e3);
  EXPECT_GT(with_composite, with_fused);
}

}  // namespace
}  // namespace upsim
