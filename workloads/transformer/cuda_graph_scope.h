// Which parts of a layer Transformer Engine's per-layer CUDA graphs capture (the
// `cuda_graph_scope` key, with `cuda_graphs: true`): Megatron-Core's cuda_graph_modules under
// cuda_graph_impl transformer_engine (megatron/core/transformer/transformer_layer.py,
// _te_cuda_graph_capture and _te_cuda_graph_replay_impl, Megatron-LM d98e8a6), as
// Megatron-Bridge's recipes set it (e.g. its H100 Qwen3 MoE recipe: moe_router and
// moe_preprocess).
//
// Contract:
//  - empty: the whole layer, forward and backward (the per-layer graphs upsim modelled before);
//  - attn: the attention block (input norm, attention, output projection, residual add);
//  - mlp: a dense layer's MLP block (pre-MLP norm, MLP, residual add);
//  - moe: a MoE layer's whole MoE block (only where nothing waits for token counts:
//    moe.pad_to_capacity);
//  - moe_router: a MoE layer's pre-MLP norm, shared experts and router with its top-k; the
//    dispatch and the rest run eagerly (moe and moe_router are exclusive);
//  - moe_preprocess (with moe_router): the dispatcher's preprocess too (the all-to-all
//    dispatcher's count all-gather and first permutation, DeepEP's top-k token indices), the
//    token counts then copied to the host after the graph (cuda_dtoh_point
//    before_ep_alltoall).
// The backward of each captured forward part is captured too (make_graphed_callables). A name
// this model has nothing for (mlp without dense layers, moe / moe_router without MoE layers)
// is refused at its list item.
#pragma once

#include <string>

#include "sim/config/config_node.h"

namespace upsim {

struct CudaGraphScope {
  bool attn = false;
  bool mlp = false;
  bool moe = false;
  bool moe_router = false;
  bool moe_preprocess = false;
  /// The list was given with `cuda_graphs: false`: checked, then ignored (the run warns), so
  /// that a what-if can turn the graphs off with one override.
  bool ignored = false;

  /// No list: the whole layer.
  bool whole_layer() const { return !(attn || mlp || moe || moe_router || moe_preprocess); }
  bool captures_attention() const { return whole_layer() || attn; }
  bool captures_dense_mlp() const { return whole_layer() || mlp; }
  bool captures_whole_moe() const { return whole_layer() || moe; }
};

/// Reads `cuda_graph_scope` of `workload` (absent: the whole layer; with `cuda_graphs` false:
/// checked, then only `ignored` set). Errors name the list or its item: not a non-empty list,
/// an unknown or repeated name, a name the model has nothing for, moe with moe_router,
/// moe_preprocess without moe_router.
CudaGraphScope read_cuda_graph_scope(const ConfigNode& workload, bool cuda_graphs,
                                     bool has_dense_layers, bool has_moe_layers);

/// The names set, comma-separated ("attn, moe_router"); "whole layer" when none.
std::string cuda_graph_scope_text(const CudaGraphScope& scope);

}  // namespace upsim
