// LoRA fine-tuning (Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", arXiv
// 2106.09685) as Megatron-Bridge runs it (NVIDIA-NeMo/Megatron-Bridge,
// src/megatron/bridge/peft/lora.py: LoRA, defaults dim 32, alpha 32, target_modules
// linear_qkv, linear_proj, linear_fc1, linear_fc2; lora_layers.py: LoRALinear; utils.py:
// ParallelLinearAdapter, get_adapter_attributes_from_linear). The base model is frozen: its
// linears run their forward and input-gradient GEMMs but no weight-gradient GEMM, and none of its
// parameters is reduced over data parallel or stepped; the embedding's backward does not run
// (nothing before it trains). Beside each target linear an adapter adds
// (x A^T) B^T x alpha / rank to its output:
//  - column-parallel targets (qkv, fc1), whose input is the gathered norm output TE returns:
//    A is column parallel (hidden -> rank / tensor, its output all-gathered to rank), B column
//    parallel (rank -> the base's output / tensor); in the backward B's input gradient is
//    all-reduced (rank wide), and A's (hidden wide) too without sequence parallel (with it,
//    disable_grad_reduce: it joins the base's reduce-scatter);
//  - row-parallel targets (proj, fc2), whose input is split over tensor ranks: A is row
//    parallel (in / tensor -> rank, all-reduced), B column parallel with gather_output
//    (rank -> hidden, all-gathered), then under sequence parallel split to the sequence shard,
//    whose backward all-gathers the output gradient;
//  - then the scale and the add to the base's output.
// The adapters are Megatron's ColumnParallelLinear / RowParallelLinear, outside Transformer
// Engine's fp8 autocast: under fp8 their GEMMs run in bf16.
// Adapter parameters: A and B of each target, in the dense gradient buffer, trained with the
// recipe's optimizer and dtypes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/task_graph.h"

namespace upsim {

struct LayerSizes;
struct TransformerConfig;

/// The linears LoRA adapts, in Megatron-Core's names.
enum class LoraTarget : uint8_t { kQkv, kProj, kFc1, kFc2 };
inline constexpr size_t kLoraTargets = 4;

/// The `lora` key: disabled (rank 0) unless given.
struct LoraConfig {
  int64_t rank = 0;
  std::array<bool, kLoraTargets> targets{};
  bool enabled() const { return rank > 0; }
  bool adapts(LoraTarget t) const { return enabled() && targets[static_cast<size_t>(t)]; }
};

/// Reads `lora: {rank: 32, targets: [linear_qkv, linear_proj, linear_fc1, linear_fc2]}`
/// (Megatron-Bridge's defaults when left out); errors name the key.
LoraConfig read_lora(const ConfigNode& lora);

/// One adapter's kernels on one rank: A (linear_in) and B (linear_out), forward, input- and
/// weight-gradient GEMMs, the scale, the add to the base's output, and the add of its input
/// gradient to the base's.
struct LoraTargetKernels {
  KernelDescId in_fwd = 0, in_dgrad = 0, in_wgrad = 0;
  KernelDescId out_fwd = 0, out_dgrad = 0, out_wgrad = 0;
  KernelDescId scale = 0, output_add = 0, input_grad_add = 0;
};
using LoraKernels = std::array<LoraTargetKernels, kLoraTargets>;

/// Adds the adapters' kernels of `config` (lora enabled) on a rank with `sizes`.
LoraKernels add_lora_kernels(const TransformerConfig& config, const LayerSizes& sizes,
                             TaskGraph& graph);

/// The adapter tensors of one layer on one tensor rank of `tensor`, A then B per target.
std::vector<int64_t> lora_layer_tensors(const TransformerConfig& config, int64_t tensor);
/// Their sum: one layer's adapter parameters on one tensor rank of `tensor`.
int64_t lora_layer_parameters(const TransformerConfig& config, int64_t tensor);

/// The adapted linears in Megatron-Core's names, comma-separated ("linear_qkv, linear_fc2").
std::string lora_targets_text(const LoraConfig& lora);

/// Model FLOPs of the adapters per token and layer (forward and backward, 6 per parameter and
/// token: every adapter GEMM runs its weight gradient).
double lora_flops_per_token(const TransformerConfig& config);

}  // namespace upsim
