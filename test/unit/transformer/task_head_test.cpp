// Task heads (task_head.h): BERT's masked-LM head projects only the predicted positions onto
// the vocabulary, a classifier none; the optimizer steps exactly the parameters the config
// counts; each head is cheaper than scoring every token.
#include "workloads/transformer/task_head.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/transformer_generator.h"

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
  TaskGraph g;
  generate_transformer(c, {1}, g);
  HeadWork w;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind != TaskKind::kKernel || g.task(t).rank != 0) continue;
    const KernelDesc& k = g.kernel(t);
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

}  // namespace
}  // namespace upsim
