// Multi-token prediction (TransformerConfig::mtp_layers) as Megatron-Core runs it in training
// (Megatron-LM @ d98e8a6, megatron/core/transformer/multi_token_prediction.py,
// MultiTokenPredictionLayer; megatron/core/models/gpt/gpt_model.py, _postprocess and
// process_mtp_loss), after DeepSeek-V3's MTP modules (DeepSeek-AI, arXiv 2412.19437, section
// 2.2). On the last model chunk, after its decoder layers, each MTP layer
//   - embeds the input tokens shifted by one more position (the stage's own embedding:
//     GPTModel builds one wherever MTP runs), a vocabulary-parallel lookup reduced over TP;
//   - normalises that embedding (enorm) and the incoming hidden state (hnorm), concatenates them
//     (2 hidden per token) and projects them back to hidden with eh_proj, a column-parallel
//     linear (its sequence-parallel input all-gathered) whose output is all-gathered over the
//     tensor ranks and split back to the sequence-parallel shard;
//   - runs one transformer layer built from the decoder's last layer's spec (a MoE layer in
//     DeepSeek-V3) and its final norm;
//   - ends in its own pass of the shared output layer and cross-entropy (process_mtp_loss).
// The backward runs in reverse, the MTP layers' output layers and losses before the main one's,
// each MTP layer's before the decoder layers' (its gradient flows into the hidden state they
// produced). Not priced: the roll of the labels and token ids (views and a one-position copy)
// and, under fp8, eh_proj's casts.
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::mtp_final_norm_forward() {
  norm_forward();
}

void LayerEmitter::mtp_final_norm_backward() {
  norm_backward();
}

void LayerEmitter::mtp_prologue_forward() {
  const LayerKernels& d = kernels_;
  embedding_forward();
  norm_forward();  // enorm
  norm_forward();  // hnorm
  ops_.op("aten::cat", "cat", d.mtp_cat);
  const bool tp = sizes_.t > 1;
  if (tp && config_.parallelism.sequence) {
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * 2 * sizes_.h * act_elem_bytes_,
                  "c10d::_allgather_base");
  }
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "mtp_proj"), d.mtp_proj_fwd);
  // gather_from_tensor_model_parallel_region: each rank's hidden / tensor columns.
  if (tp) {
    tp_collective(CollectiveKind::kAllGather,
                  sizes_.tokens * (sizes_.h / sizes_.t) * act_elem_bytes_, "c10d::_allgather_base");
  }
}

void LayerEmitter::mtp_post_process_forward() {
  mtp_final_norm_forward();
  vocabulary_output_forward();
}

void LayerEmitter::mtp_post_process_backward() {
  vocabulary_output_backward();
  mtp_final_norm_backward();
}

void LayerEmitter::mtp_prologue_backward() {
  const LayerKernels& d = kernels_;
  // The sequence-parallel split's backward gathers the shards' gradients; the hidden gather's
  // backward is a split (no communication).
  tp_exit_backward();
  // eh_proj's backward reads its 2 hidden wide input: as a column-parallel linear of twice the
  // rows.
  column_parallel_backward("LinearBackward", d.mtp_proj_dgrad, d.mtp_proj_wgrad, std::nullopt,
                           2 * sizes_.tokens);
  norm_backward();  // hnorm
  norm_backward();  // enorm
  embedding_backward();
}

}  // namespace upsim::transformer_emit
