// LoRA fine-tuning (workload.lora; workloads/transformer/lora.h): the config's defaults and
// refusals, the frozen base's missing weight gradients and embedding backward, the adapters'
// kernels and collectives, the memory of their gradients and optimizer state, and that a step is
// faster than full fine-tuning where the adapters are small beside the base.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

std::string yaml_of(const std::string& lora, const std::string& extra) {
  return test_configs::small_llama_workload_yaml() +
         "  parallelism: {tensor: 2, sequence: true}\n  lora: " + lora + "\n" + extra;
}

TransformerConfig parse(const std::string& lora, const std::string& extra = "") {
  return test_configs::parse_workload(yaml_of(lora, extra), 2);
}

std::string error_of(const std::string& lora, const std::string& extra = "") {
  return test_configs::workload_error(yaml_of(lora, extra), 2);
}

TEST(Lora, DefaultsAreMegatronBridgesAndBadKeysAreRefusedAtTheKey) {
  const TransformerConfig all = parse("{}");
  EXPECT_EQ(all.lora.rank, 32);
  for (const bool t : all.lora.targets)
    EXPECT_TRUE(t);
  const TransformerConfig two = parse("{rank: 8, targets: [linear_qkv, linear_fc2]}");
  EXPECT_TRUE(two.lora.adapts(LoraTarget::kQkv));
  EXPECT_FALSE(two.lora.adapts(LoraTarget::kProj));
  EXPECT_TRUE(two.lora.adapts(LoraTarget::kFc2));
  EXPECT_NE(error_of("{targets: [linear_q]}").find("workload.lora.targets[0]"), std::string::npos)
      << error_of("{targets: [linear_q]}");
  EXPECT_NE(error_of("{rank: 7}").find("workload.lora.rank"), std::string::npos);
  EXPECT_NE(error_of("{}", "  layer_kernels: torchtitan\n").find("workload.layer_kernels"),
            std::string::npos);
  EXPECT_NE(error_of("{}", "  recompute: op\n").find("workload.recompute"), std::string::npos);
  EXPECT_EQ(error_of("{}", "  cuda_graphs: true\n  dtype: fp8\n"), "");
}

// Per layer and micro-batch: each of the 4 targets runs A and B forward and both their gradient
// GEMMs; the base runs no weight gradient (the only wgrads are the adapters'); the embedding runs
// no backward.
TEST(Lora, TheBaseRunsNoWeightGradientsAndEachAdapterItsSix) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  const std::map<std::string, int> full = test_configs::kernel_counts(c);
  EXPECT_GT(full.at("bf16gemm/wgrad"), 0);
  EXPECT_EQ(full.at("embedding_dense_backward"), 1);
  c.lora.rank = 16;
  c.lora.targets.fill(true);
  const std::map<std::string, int> lora = test_configs::kernel_counts(c);
  const int layers = 2, targets = 4;
  EXPECT_EQ(lora.at("bf16gemm/lora_a"), layers * targets);
  EXPECT_EQ(lora.at("bf16gemm/lora_b"), layers * targets);
  EXPECT_EQ(lora.at("bf16gemm/wgrad"), 2 * layers * targets);
  EXPECT_EQ(lora.count("embedding_dense_backward"), 0U);
  // The base's input gradients still run: as many dgrads as before, plus the adapters' two each.
  EXPECT_EQ(lora.at("bf16gemm/dgrad"), full.at("bf16gemm/dgrad") + 2 * layers * targets);
}

// Under fp8 the base's GEMMs run in fp8 and the adapters', outside Transformer Engine's fp8
// autocast, in bf16.
TEST(Lora, UnderFp8TheAdaptersRunInBf16) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.dtype = DType::kFp8;
  c.lora.rank = 16;
  c.lora.targets.fill(true);
  const std::map<std::string, int> kernels = test_configs::kernel_counts(c);
  EXPECT_EQ(kernels.at("bf16gemm/lora_a"), 2 * 4);
  EXPECT_EQ(kernels.count("fp8gemm/lora_a"), 0U);
  EXPECT_EQ(kernels.at("fp8gemm/qkv"), 2);
}

// The gradients and the optimizer state are the adapters' (fp32 gradients, Adam's fp32 master
// copy, m and v); the weights are the base's and the adapters' in bf16.
TEST(Lora, GradientsAndOptimizerStateAreTheAdaptersOnly) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 4, 2816, 512);
  c.lora.rank = 16;
  c.lora.targets.fill(true);
  int64_t adapters = 0;
  for (const int64_t n : lora_layer_tensors(c, 1))
    adapters += n;
  adapters *= c.layers;
  // qkv 1024 -> 1024 + 2 x 256, proj 1024 -> 1024, fc1 1024 -> 2 x 2816, fc2 2816 -> 1024.
  EXPECT_EQ(adapters, 2 * 16 * ((1024 + 1536) + (1024 + 1024) + (1024 + 5632) + (2816 + 1024)));
  std::map<std::string, int64_t> parts;
  for (const MemoryFootprint::Part& p : transformer_memory(c, 0).parts)
    parts[p.name] = p.bytes;
  EXPECT_EQ(parts.at("gradients"), 4 * adapters);
  EXPECT_EQ(parts.at("optimizer state"), 12 * adapters);
  EXPECT_EQ(parts.at("weights"), 2 * transformer_parameters(c));
}

// On an 8B-shaped layer the adapters' GEMMs and elementwise work cost less than the base's
// weight gradients they replace: faster than full fine-tuning, slower than the base's forward and
// input gradients alone would be (two thirds of its GEMM FLOPs). Model FLOPs count the same.
TEST(Lora, AnEightBShapedStepIsFasterThanFullFineTuning) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
  const Duration full = test_configs::step_window(c, h100);
  const double full_flops = transformer_model_flops(c);
  c.lora.rank = 16;
  c.lora.targets.fill(true);
  const Duration lora = test_configs::step_window(c, h100);
  std::printf("Llama 8B-shaped 2 layers, seq 4096 on H100: full %.3f ms, LoRA rank 16 %.3f ms\n",
              full.seconds() * 1e3, lora.seconds() * 1e3);
  EXPECT_LT(lora, full);
  EXPECT_GT(lora.seconds(), full.seconds() * 0.5);
  const double lora_flops = transformer_model_flops(c);
  EXPECT_LT(lora_flops, full_flops);
  EXPECT_GT(lora_flops, full_flops * 2.0 / 3.0);
}

}  // namespace
}  // namespace upsim
