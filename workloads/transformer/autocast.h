// torch.autocast over an fp32 model (TransformerConfig::autocast), as HuggingFace's Trainer
// (its fp16 / bf16 arguments) and NVIDIA DeepLearningExamples' PyTorch BERT (--amp) run it
// (PyTorch docs, "Automatic Mixed Precision package - torch.amp": the CUDA ops that autocast
// to float16 and to float32; aten/src/ATen/autocast_mode.cpp, cached_cast):
//  - the parameters, their .grad and the optimizer state stay fp32: no master copy;
//  - ops on the lower-precision list (linear, matmul, bmm, baddbmm) cast their fp32 inputs to
//    the compute dtype: each weight (and bias) once per forward, kept in autocast's weight cache
//    until the region exits and saved for the weight's backward; each fp32 activation at every
//    linear it enters (the LayerNorm outputs / residual stream before the QKV and fc1 GEMMs;
//    the models run under autocast, HuggingFace's and DeepLearningExamples' BERT and
//    HuggingFace's Llama, have separate query, key and value linears, so the QKV GEMM's input
//    is cast, and its copy saved, three times: kAutocastQkvInputCasts);
//  - ops on the fp32 list (layer_norm, softmax, log_softmax) run in fp32, and an add of a
//    16-bit and an fp32 tensor is fp32, so the residual stream and the norms are fp32
//    (TransformerConfig::residual_dtype);
//  - in the backward each cast's backward casts the gradient back to fp32: a weight's 16-bit
//    gradient into its fp32 .grad, an activation's gradient into the fp32 residual stream.
// Left out: the task head's small linears (pooler, classifier) are priced without casts.
#pragma once

#include <cstdint>

#include "sim/task_graph.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// Casts of the QKV GEMM's fp32 input under autocast: one per query, key and value linear.
inline constexpr int64_t kAutocastQkvInputCasts = 3;

/// The casts around one linear layer under autocast (`present` false otherwise).
struct AutocastCasts {
  bool present = false;
  KernelDescId weight = 0;       ///< fp32 weight -> compute dtype, every forward
  KernelDescId weight_grad = 0;  ///< its 16-bit gradient -> fp32 .grad, every backward
  bool casts_input = false;      ///< the layer's input is fp32 (the residual stream)
  KernelDescId input = 0;        ///< fp32 input -> compute dtype
  KernelDescId input_grad = 0;   ///< the input's 16-bit gradient -> fp32
  int64_t input_casts = 1;       ///< times the input is cast (and its gradient cast back)
};

/// Adds to `graph` the casts of a linear layer of `weight_elements` parameters (weight and
/// bias) whose input holds `input_elements` fp32 values (0: its input is already 16-bit),
/// computing in `compute` (fp16 / bf16): copies reading 4 bytes and writing 2 per element, and
/// back.
AutocastCasts autocast_casts(TaskGraph& graph, DType compute, int64_t weight_elements,
                             int64_t input_elements);

/// The weight copies autocast holds at a stage's peak: every parameter of the stage (its
/// `stage_parameters`, as the memory model counts them) in the compute dtype. The copies live
/// from their forward cast to their backward (saved by the linears), so at the first backward
/// all of them do; under full recomputation the forward's cache still holds all of them when
/// the forward ends. LayerNorm gains and position embeddings, which autocast leaves in fp32,
/// are counted too (under 1% of BERT's parameters).
int64_t autocast_weight_copy_bytes(const TransformerConfig& config, int64_t stage_parameters);

}  // namespace upsim
