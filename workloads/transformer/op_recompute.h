// Per-op selective activation checkpointing as torchtitan runs it (`recompute: op`;
// torchtitan's activation_checkpoint.mode "selective" with selective_ac_option "op", its Llama
// configs' default: pytorch/torchtitan, torchtitan/models/llama3/infra/parallelize.py,
// _apply_ac_to_transformer_block). Each transformer block is checkpointed with a policy that
// saves the outputs of aten.mm except every second one, of scaled-dot-product attention and of
// reduce-scatter, and recomputes every other op in the backward:
//   to_save = func in _save_list and not (func == aten.mm and meta["forward_mm_count"] % 2 == 0)
// The mm counter lives in the block's wrapper and runs over every forward of the block, so a
// block whose forward has an odd number of mms alternates which of them it saves.
// The mms of a block, in order: wq, wk, wv, wo, then w1, w3, w2 (SwiGLU) or w1, w2.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// One matrix multiply of a block's forward, in torchtitan's order.
enum class BlockMatmul : uint8_t { kQuery, kKey, kValue, kOutput, kGate, kUp, kDown };

/// The block's matmuls in forward order: wq, wk, wv, wo, w1, (w3,) w2; w1 is the gate and w3 the
/// up projection with SwiGLU, w1 the MLP's only input projection otherwise (kGate).
std::vector<BlockMatmul> block_matmuls(const TransformerConfig& config);

/// Whether the policy saves `matmul`'s output in the block's forward number `forward_index`
/// (0-based, counting every forward of the block since the run began): its count
/// forward_index x matmuls + position + 1 is odd.
bool op_policy_saves(const TransformerConfig& config, int64_t forward_index, BlockMatmul matmul);

}  // namespace upsim
