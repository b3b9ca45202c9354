// Task heads (task_head.h): BERT's masked-LM head projects only the predicted positions onto
// the vocabulary, a classifier none; the optimizer steps exactly the parameters the config
// counts; each head is cheaper than scoring every token.
#include "workloads/transformer/task_head.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// A 2-layer BERT-base-shaped encoder, micro-batch 8 of seq 512, with `head`.
TransformerConfig bert(TaskHeadKind head) {
  TransformerConfig c = test_configs::small_gpt(2);
  c.architecture = "bert";
  c.hidden = 768;
  c.heads = 12;
  c.kv_heads = 12;
  c.ffn = 3072;
  c.vocab = 30522;
  c.micro_batch = 8;
  c.global_batch = 8;
  c.causal = false;
  c.head.kind = head;
  c.head.predictions = head == TaskHeadKind::kMaskedLm ? 76 : 0;
  c.head.labels = head == TaskHeadKind::kLanguageModel ? 0 : 2;
  return c;
}

struct HeadWork {
  int64_t vocabulary_gemm_rows = 0;  ///< m of the forward GEMMs n = padded vocabulary wide
  int64_t optimizer_elements = 0;
  double gemm_flops = 0;
};

HeadWork head_work(const TransformerConfig& c) {
  HeadWork w;
  for (const KernelDesc& k : test_configs::step_kernels(c)) {
    if (k.cls == KernelClass::kGemm) {
      w.gemm_flops += 2.0 * as_double(k.batch * k.m) * as_double(k.n) * as_double(k.k);
      if (k.n == c.padded_vocab()) w.vocabulary_gemm_rows += k.m;
    }
    if (k.memory_op == MemoryOp::kOptimizer) {
      const std::vector<int64_t>& n = k.optimizer.tensor_elements;
      w.optimizer_elements = std::accumulate(n.begin(), n.end(), int64_t{0});
    }
  }
  return w;
}

TEST(TaskHead, TheVocabularyProjectionRunsOnTheHeadsRowsOnly) {
  const HeadWork lm = head_work(bert(TaskHeadKind::kLanguageModel));
  const HeadWork mlm = head_work(bert(TaskHeadKind::kMaskedLm));
  const HeadWork classification = head_work(bert(TaskHeadKind::kClassification));
  EXPECT_EQ(lm.vocabulary_gemm_rows, 8 * 512);
  EXPECT_EQ(mlm.vocabulary_gemm_rows, 8 * 76);
  EXPECT_EQ(classification.vocabulary_gemm_rows, 0);
  EXPECT_LT(mlm.gemm_flops, lm.gemm_flops);
  EXPECT_LT(classification.gemm_flops, mlm.gemm_flops);
}

TEST(TaskHead, TheOptimizerStepsTheParametersTheConfigCounts) {
  for (const TaskHeadKind head :
       {TaskHeadKind::kLanguageModel, TaskHeadKind::kMaskedLm, TaskHeadKind::kClassification}) {
    const TransformerConfig c = bert(head);
    EXPECT_EQ(head_work(c).optimizer_elements, transformer_parameters(c)) << task_head_name(head);
  }
}

/// Bytes of rank 0's memory-bound kernels of a step of `c`.
double memory_bound_bytes(const TransformerConfig& c) {
  double bytes = 0;
  for (const KernelDesc& k : test_configs::step_kernels(c)) {
    if (k.cls == KernelClass::kMemoryBound) bytes += k.bytes_read + k.bytes_written;
  }
  return bytes;
}

int64_t logits_bytes(const TransformerConfig& c) {
  for (const MemoryFootprint::Part& p : transformer_peak_memory(c).parts)
    if (p.name == "output logits") return p.bytes;
  return 0;
}

// torchtitan's and HuggingFace's loss, F.cross_entropy(logits.float(), labels): the cast, the
// log_softmax, and their backward move more bytes than Megatron's fused kernel, and hold
// 12 bytes per logit at the backward's peak against the fused kernel's 4.
TEST(TaskHead, TheEagerCrossEntropyMovesAndHoldsMoreThanTheFusedOne) {
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
  c.vocab = 128256;
  c.tied_embeddings = false;
  const double fused_bytes = memory_bound_bytes(c);
  const int64_t fused_logits = logits_bytes(c);
  c.head.eager_loss = true;
  EXPECT_GT(memory_bound_bytes(c), fused_bytes);
  EXPECT_EQ(logits_bytes(c), 3 * fused_logits);
  EXPECT_EQ(fused_logits, int64_t{4} * 4096 * 128256);
}

}  // namespace
}  // namespace upsim
