// The last stage's head, forward and backward: the final norm, then the task head (task_head.h):
// the vocabulary-parallel output layer and cross-entropy on every token (lm), BERT's masked-LM
// head on the predicted positions and its next-sentence classifier (mlm), or a pooled
// classifier (classification).
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::head_forward() {
  const LayerKernels& d = kernels_;
  norm_forward();
  tp_enter_forward();
  if (config_.head.kind == TaskHeadKind::kMaskedLm) {
    const TaskHeadKernels& k = d.task;
    ops_.op("aten::index_select", "index_select", k.gather);
    ops_.op("aten::linear", pytorch::gemm_kernel_name(act_dt_, "mlm_transform"), k.transform_fwd);
    ops_.op("aten::gelu", "gelu_fwd", k.transform_act_fwd);
    ops_.op("aten::layer_norm", "layer_norm_fwd", k.transform_norm_fwd);
  }
  if (config_.has_output_layer()) vocabulary_output_forward();
  if (config_.head.kind != TaskHeadKind::kLanguageModel) classifier_forward();
}

void LayerEmitter::vocabulary_output_forward() {
  const LayerKernels& d = kernels_;
  autocast_forward(d.head_cast);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "logits"), d.head_fwd);
  // Vocab-parallel cross-entropy (Megatron's _VocabParallelCrossEntropy): all-reduce of the
  // row maxima, of the target logits and of the exp sums over TP (fp32, one value per row).
  if (config_.head.eager_loss) {
    ops_.op("aten::_to_copy", "logits_to_fp32", d.logits_upcast);
    ops_.op("aten::_log_softmax", "log_softmax_fwd", d.log_softmax_fwd);
  } else {
    HostOp h = ops_.host_op("vocab_parallel_cross_entropy");
    h.kernel("cross_entropy_fwd", "vocab_parallel_cross_entropy", d.xent_fwd);
    h.end();
  }
  if (sizes_.t > 1) {
    for (int i = 0; i < 3; ++i)
      tp_collective(CollectiveKind::kAllReduce, sizes_.vocab_rows * kFp32Bytes, "c10d::all_reduce");
  }
}

void LayerEmitter::vocabulary_output_backward() {
  const LayerKernels& d = kernels_;
  cross_entropy_backward();
  column_parallel_backward("LinearBackward", d.head_dgrad, d.head_wgrad, linear_dt_);
  autocast_backward(d.head_cast);
}

void LayerEmitter::classifier_forward() {
  const TaskHeadKernels& k = kernels_.task;
  ops_.op("aten::linear", pytorch::gemm_kernel_name(act_dt_, "pooler"), k.pooler_fwd);
  ops_.op("aten::tanh", "tanh_fwd", k.pooler_tanh_fwd);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(act_dt_, "classifier"), k.classifier_fwd);
  ops_.op("aten::cross_entropy_loss", "cross_entropy_fwd", k.classifier_loss_fwd);
}

void LayerEmitter::classifier_backward() {
  const TaskHeadKernels& k = kernels_.task;
  ops_.op("NllLossBackward0", "cross_entropy_bwd", k.classifier_loss_bwd);
  ops_.op2("AddmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), k.classifier_dgrad,
           pytorch::gemm_kernel_name(act_dt_, "wgrad"), k.classifier_wgrad);
  ops_.op("TanhBackward0", "tanh_bwd", k.pooler_tanh_bwd);
  ops_.op2("AddmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), k.pooler_dgrad,
           pytorch::gemm_kernel_name(act_dt_, "wgrad"), k.pooler_wgrad);
}

void LayerEmitter::cross_entropy_backward() {
  const LayerKernels& d = kernels_;
  if (!config_.head.eager_loss) {
    ops_.op("VocabParallelCrossEntropyBackward", "cross_entropy_bwd", d.xent_bwd);
    return;
  }
  ops_.op("NllLossBackward0", "nll_loss_backward", d.nll_grad);
  ops_.op("LogSoftmaxBackward0", "log_softmax_bwd", d.log_softmax_bwd);
  ops_.op("ToCopyBackward0", "logits_to_bf16", d.logits_downcast);
}

void LayerEmitter::head_backward() {
  const LayerKernels& d = kernels_;
  const TaskHeadKernels& k = d.task;
  switch (config_.head.kind) {
    case TaskHeadKind::kLanguageModel:
      vocabulary_output_backward();
      break;
    case TaskHeadKind::kMaskedLm: {
      classifier_backward();
      cross_entropy_backward();
      // The vocabulary-parallel projection's input gradient is summed over TP (its input, the
      // transform's output, is replicated); the transform runs replicated, and the sequence's
      // gradient goes back to the SP shards by a split, without communication.
      ops_.op("LinearBackward", pytorch::gemm_kernel_name(linear_dt_, "dgrad"), d.head_dgrad);
      if (sizes_.t > 1) {
        tp_collective(CollectiveKind::kAllReduce, sizes_.vocab_rows * sizes_.h * act_elem_bytes_,
                      "c10d::all_reduce");
      }
      ops_.op("LinearBackward", pytorch::gemm_kernel_name(linear_dt_, "wgrad"), d.head_wgrad);
      autocast_backward(d.head_cast);
      ops_.op("NativeLayerNormBackward0", "layer_norm_bwd", k.transform_norm_bwd);
      ops_.op("GeluBackward0", "gelu_bwd", k.transform_act_bwd);
      ops_.op2("AddmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), k.transform_dgrad,
               pytorch::gemm_kernel_name(act_dt_, "wgrad"), k.transform_wgrad);
      ops_.op("IndexSelectBackward0", "index_put", k.scatter);
      break;
    }
    case TaskHeadKind::kClassification:
      classifier_backward();
      ops_.op("SelectBackward0", "index_put", k.scatter);
      break;
  }
  norm_backward();
}

}  // namespace upsim::transformer_emit
