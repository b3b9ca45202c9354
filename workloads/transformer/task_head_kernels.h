// The kernels of the task heads beyond the vocabulary projection (task_head.h): BERT's
// masked-LM transform on the gathered predicted positions, the pooler and a classifier.
#pragma once

#include "sim/task_graph.h"

namespace upsim {

struct TransformerConfig;
struct LayerSizes;

/// Kernel descriptions of the task head (0 where the head has no such kernel). The transform
/// and pooler run replicated on every tensor-parallel rank (plain torch.nn.Linear in
/// HuggingFace's and NVIDIA's BERT), in the activation dtype.
struct TaskHeadKernels {
  // The gradient of the sequence: zeroed, the head's rows put into it (index_put).
  KernelDescId scatter = 0;
  // mlm: the predicted positions gathered out of the sequence (index_select), the transform.
  KernelDescId gather = 0;
  KernelDescId transform_fwd = 0, transform_dgrad = 0, transform_wgrad = 0;
  KernelDescId transform_act_fwd = 0, transform_act_bwd = 0;
  KernelDescId transform_norm_fwd = 0, transform_norm_bwd = 0;
  // mlm (next sentence, 2 labels) and classification: the pooler on each sample's first token,
  // tanh, the classifier and its cross-entropy.
  KernelDescId pooler_fwd = 0, pooler_dgrad = 0, pooler_wgrad = 0;
  KernelDescId pooler_tanh_fwd = 0, pooler_tanh_bwd = 0;
  KernelDescId classifier_fwd = 0, classifier_dgrad = 0, classifier_wgrad = 0;
  KernelDescId classifier_loss_fwd = 0, classifier_loss_bwd = 0;
};

/// Adds the task head's kernel descriptions of `config` (none for the lm head) to `graph`.
TaskHeadKernels add_task_head_kernels(const TransformerConfig& config, const LayerSizes& sizes,
                                      TaskGraph& graph);

}  // namespace upsim
