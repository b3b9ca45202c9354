// Multi-head latent attention (latent_attention.h) in a generated step: the optimizer steps
// the parameters the config counts, the memory model's stage holds them too, the attention core
// does the q.k and p.v work of its two head widths, and tensor parallel runs.
#include "workloads/transformer/latent_attention.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "calibration/roofline_kernel_cost.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// Two DeepSeek-shaped layers at a small width: hidden 1024, 16 heads, q latent 384, kv latent
/// 128, head widths 64 + 32 (rope) for q / k and 64 for v.
TransformerConfig small_mla() {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 16, 2816, 2048);
  c.mla = LatentAttentionConfig{384, 128, 64, 32, 64};
  return c;
}

struct StepWork {
  int64_t optimizer_elements = 0;
  double attention_flops = 0;
};

StepWork step_work(const TransformerConfig& c) {
  StepWork w;
  for (const KernelDesc& k : test_configs::step_kernels(c)) {
    if (k.memory_op == MemoryOp::kOptimizer && k.cls == KernelClass::kMemoryBound) {
      const std::vector<int64_t>& n = k.optimizer.tensor_elements;
      w.optimizer_elements = std::accumulate(n.begin(), n.end(), int64_t{0});
    }
    if (k.cls == KernelClass::kAttention && !k.attention.backward) {
      w.attention_flops += attention_work(k).flops;
    }
  }
  return w;
}

TEST(LatentAttention, TheStepStepsAndHoldsTheParametersTheConfigCounts) {
  const TransformerConfig c = small_mla();
  EXPECT_EQ(step_work(c).optimizer_elements, transformer_parameters(c));
  EXPECT_EQ(transformer_stage_parameters(c, 0).total(), transformer_parameters(c));
  // Without a q latent the queries come straight from the hidden state.
  TransformerConfig direct = c;
  direct.mla.q_lora_rank = 0;
  EXPECT_EQ(step_work(direct).optimizer_elements, transformer_parameters(direct));
  EXPECT_EQ(transformer_parameters(direct),
            transformer_parameters(c) + 2 * (1024 * 16 * 96 - 1024 * 384 - 384 - 384 * 16 * 96));
}

TEST(LatentAttention, TheCoreDoesTheWorkOfItsTwoHeadWidths) {
  const TransformerConfig c = small_mla();
  // Causal forward per layer: 2 s^2 heads (qk + v) / 2 multiply-adds of 2 FLOPs.
  const double s = 2048;
  const double expected = 2.0 * 2.0 * s * s * 16 * (96 + 64) / 2.0 / 2.0;
  EXPECT_NEAR(step_work(c).attention_flops / (2 * expected), 1.0, 1e-9);
}

TEST(LatentAttention, TensorParallelSplitsTheUpProjectionsAndReplicatesTheDownOnes) {
  TransformerConfig c = small_mla();
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  const int64_t local = transformer_stage_parameters(c, 0).total();
  // Down projections and their norms whole on each rank, the rest halved.
  const LatentAttentionConfig& m = c.mla;
  const int64_t replicated = 1024 * m.q_lora_rank + m.q_lora_rank +
                             1024 * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank;
  EXPECT_EQ(
      latent_attention_parameters(m, 1024, 16, 2) * 2 - latent_attention_parameters(m, 1024, 16, 1),
      replicated);
  EXPECT_EQ(step_work(c).optimizer_elements, local);
}

}  // namespace
}  // namespace upsim
