// Megatron-Core's selective recomputation by module (`recompute: selective` with the
// `recompute_modules` key): which submodules of a layer drop what they stored in the forward and
// run their forward again in the backward.
//
// Source: Megatron-Core, megatron/core/transformer/transformer_config.py (TransformerConfig.
// recompute_modules, default ["core_attn"]; --recompute-modules), attention.py (the core attention
// under tensor_parallel.checkpoint whatever its implementation, Transformer Engine's fused and
// flash attention included), transformer_layer.py and moe/ (CheckpointWithoutOutput for the
// output-discarding modules). What each module stores and reruns, as upsim prices it:
//   core_attn       the core attention (normal checkpoint): the scores / softmax / dropout of
//                   unfused attention, or flash attention's log-sum-exp, are not stored; its
//                   forward (with its context-parallel exchanges) runs again before its backward.
//   layernorm       the input and pre-MLP norms that are modules of their own (output-discarding):
//                   their outputs are freed after the forward and recomputed before the consumer's
//                   backward. In Megatron-Core's Transformer Engine layer spec (its default
//                   transformer_impl; gpt_layer_specs.py) the attention's input norm is fused into
//                   linear_qkv (TELayerNormColumnParallelLinear, input_layernorm IdentityOp)
//                   except under latent attention, and the pre-MLP norm into linear_fc1 except on
//                   MoE layers (pre_mlp_layernorm = TENorm if num_experts): only those separate
//                   norms are recomputed.
//   mla_up_proj     latent attention's query and key/value up projections with their rotary
//                   (output-discarding, multi_latent_attention.py qkv_up_checkpoint): the
//                   per-head queries, keys and values the core attention read are freed after
//                   it and computed again from the stored latents before its backward.
//   mlp             a dense layer's MLP (normal checkpoint; TE's fc1 holds the pre-MLP norm): only
//                   its input is stored; norm, fc1 (with the sequence-parallel all-gather),
//                   activation and fc2 (with its reduce-scatter) run again before its backward.
//   moe_act         the routed experts' activation (output-discarding): the fc2 input of the
//                   grouped experts is freed and the activation recomputed before its backward.
//   moe             a MoE layer (normal checkpoint): only its input is stored; router, top-k, the
//                   dropless count sync, permutation, dispatch, experts, combine and shared
//                   experts run again before its backward.
//   shared_experts  the shared experts of a MoE layer (normal checkpoint).
// Not modelled (refused by name): gdn_norm_out, gdp_in_proj, gdp_qkv, mhc.
#pragma once

#include <string>

#include "sim/config/config_node.h"

namespace upsim {

struct RecomputeModules {
  bool core_attn = true;
  bool layernorm = false;
  bool mla_up_proj = false;
  bool mlp = false;
  bool moe_act = false;
  bool moe = false;
  bool shared_experts = false;
};

/// What the layers a module applies to are, for the reader's checks.
struct RecomputeModulesScope {
  bool has_dense_layers = true;
  bool has_moe_layers = false;
  bool has_shared_experts = false;
  bool latent_attention = false;
};

/// Reads `recompute_modules` (a list of module names) of `workload`; absent: Megatron-Core's
/// default, core_attn alone. Errors name the key: a list without `recompute: selective`
/// (`selective` false), an unknown or unmodelled name, a name given twice, an empty list, a
/// module this model has nothing for (mlp without dense layers, moe / moe_act without MoE
/// layers, shared_experts without shared experts, layernorm without a separate norm,
/// mla_up_proj without latent attention), and moe
/// with moe_act or shared_experts (the layer's checkpoint already reruns them).
RecomputeModules read_recompute_modules(const ConfigNode& workload, bool selective,
                                        const RecomputeModulesScope& scope);

/// The names set, comma-separated in the key's order ("core_attn, mlp").
std::string recompute_modules_text(const RecomputeModules& modules);

}  // namespace upsim
