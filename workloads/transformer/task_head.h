// What a transformer's last stage computes on top of its layers (the `head` key): the language
// model's vocabulary projection on every token, BERT's pretraining heads (the masked-LM head on
// the predicted positions only, and the next-sentence classifier), or a sequence classifier.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/config/config_node.h"

namespace upsim {

enum class TaskHeadKind : uint8_t {
  /// The output layer over the (padded, vocabulary-parallel) vocabulary and its cross-entropy
  /// on every token (GPT, Llama; Megatron-LM's BERT, which scores every position).
  kLanguageModel,
  /// BERT pretraining as NVIDIA runs it (DeepLearningExamples and MLPerf BERT,
  /// --dense_seq_output): the masked positions gathered, then BertLMPredictionHead's transform
  /// (dense hidden x hidden, GELU, LayerNorm) and the tied vocabulary projection with its bias on
  /// those rows only; plus the next-sentence head: BertPooler (dense hidden x hidden and tanh on
  /// the first token) and a 2-way classifier (Devlin et al., arXiv 1810.04805).
  kMaskedLm,
  /// Sequence classification (fine-tuning, HuggingFace BertForSequenceClassification): the
  /// pooler on the first token and a `labels`-wide classifier; no vocabulary projection.
  kClassification,
};

struct TaskHead {
  TaskHeadKind kind = TaskHeadKind::kLanguageModel;
  /// kMaskedLm: predicted positions per sample (BERT's max_predictions_per_seq: 20 at seq 128,
  /// 76 or 80 at 512).
  int64_t predictions = 0;
  /// kClassification: classes; kMaskedLm: 2 (next sentence or not).
  int64_t labels = 0;
  /// The vocabulary cross-entropy (the `loss` key). false (fused): Megatron's vocab-parallel
  /// cross-entropy, one kernel each way on fp32 logits, which it keeps (4 bytes per logit).
  /// true (eager): torch.nn.functional.cross_entropy(logits.float(), labels) as torchtitan
  /// (torchtitan/components/loss.py, cross_entropy_loss) and HuggingFace run it: the 16-bit
  /// logits cast to fp32, log_softmax (which keeps its fp32 output) and nll_loss; the backward
  /// writes nll_loss's fp32 gradient, log_softmax's input gradient, and the cast back: 12 bytes
  /// per logit live at once (log_softmax's output and both gradients).
  bool eager_loss = false;
};

/// Reads `head`, `predictions`, `labels` and `loss` (fused | eager; default fused) of
/// `workload` (a transformer's map). Defaults: lm;
/// mlm predicts round(0.15 x seq) positions (BERT masks 15% of the tokens), at least 1;
/// classification has 2 labels. `predictions` without mlm, `labels` without classification and
/// predictions above seq are errors naming the key.
TaskHead read_task_head(const ConfigNode& workload, int64_t seq);

/// "lm", "mlm", "classification".
std::string_view task_head_name(TaskHeadKind kind);

}  // namespace upsim
