#include "workloads/transformer/task_head_kernels.h"

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

TaskHeadKernels add_task_head_kernels(const TransformerConfig& config, const LayerSizes& sizes,
                                      TaskGraph& graph) {
  TaskHeadKernels k;
  if (config.head.kind == TaskHeadKind::kLanguageModel) return k;
  const DType dt = config.activation_dtype();
  const int64_t h = sizes.h;
  const auto add = [&](const KernelDesc& d) { return graph.add_kernel_desc(d); };
  if (config.head.kind == TaskHeadKind::kMaskedLm) {
    const int64_t rows = sizes.vocab_rows;
    const auto predicted = as_double(rows * h);
    k.gather = add(pytorch::pointwise(MemoryOp::kIndex, dt, predicted, 0, 1, 1));
    const pytorch::LinearGemms transform = pytorch::linear_gemms(dt, rows, h, h);
    k.transform_fwd = add(transform.forward);
    k.transform_dgrad = add(transform.grad_input);
    k.transform_wgrad = add(transform.grad_weight);
    k.transform_act_fwd = add(pytorch::pointwise(MemoryOp::kGelu, dt, predicted, 8, 1, 1));
    k.transform_act_bwd = add(pytorch::pointwise(MemoryOp::kGelu, dt, predicted, 10, 2, 1));
    k.transform_norm_fwd =
        add(pytorch::rowwise(MemoryOp::kLayerNorm, dt, rows, h, kNormForward.flops,
                             kNormForward.reads, kNormForward.writes));
    k.transform_norm_bwd =
        add(pytorch::rowwise(MemoryOp::kLayerNorm, dt, rows, h, kNormBackward.flops,
                             kNormBackward.reads, kNormBackward.writes));
  }
  const int64_t samples = sizes.samples;
  // The sequence's gradient: every token's zeroed, then the head's rows put into it (the
  // predicted positions, or each sample's first token; the pooler's first-token gradient under
  // mlm is an add into the same tensor, left in this kernel).
  const auto sequence = as_double(sizes.tokens * h);
  const int64_t head_rows =
      config.head.kind == TaskHeadKind::kMaskedLm ? sizes.vocab_rows : samples;
  k.scatter = add(pytorch::pointwise(MemoryOp::kIndex, dt, sequence, 0,
                                     as_double(head_rows * h) / sequence, 1));
  const pytorch::LinearGemms pooler = pytorch::linear_gemms(dt, samples, h, h);
  k.pooler_fwd = add(pooler.forward);
  k.pooler_dgrad = add(pooler.grad_input);
  k.pooler_wgrad = add(pooler.grad_weight);
  const auto pooled = as_double(samples * h);
  k.pooler_tanh_fwd = add(pytorch::pointwise(MemoryOp::kTanh, dt, pooled, 4, 1, 1));
  k.pooler_tanh_bwd = add(pytorch::pointwise(MemoryOp::kTanh, dt, pooled, 3, 2, 1));
  const int64_t labels = config.head.labels;
  const pytorch::LinearGemms classifier = pytorch::linear_gemms(dt, samples, h, labels);
  k.classifier_fwd = add(classifier.forward);
  k.classifier_dgrad = add(classifier.grad_input);
  k.classifier_wgrad = add(classifier.grad_weight);
  k.classifier_loss_fwd =
      add(pytorch::rowwise(MemoryOp::kCrossEntropy, DType::kFp32, samples, labels, 5, 2, 1));
  k.classifier_loss_bwd =
      add(pytorch::rowwise(MemoryOp::kCrossEntropy, DType::kFp32, samples, labels, 2, 1, 1));
  return k;
}

}  // namespace upsim
