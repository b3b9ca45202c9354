// Context-parallel attention without the ring (ParallelismConfig::context_comm), as Transformer
// Engine runs it under Megatron-Core's --cp-comm-type (transformer_engine/pytorch/attention):
//   all_gather (AttnFuncWithCPAndKVAllGather): K and V all-gathered over the CP group before the
//     attention, the rank's two query chunks each attending to the keys before them; the
//     backward gathers K and V again and reduce-scatters dK and dV;
//   a2a (AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses, Jacobs et al. arXiv 2309.14509): Q, K and
//     V all-to-all'ed from sequence shards to head shards, the attention over the whole sequence
//     on heads / context heads, the output all-to-all'ed back; the backward the same in reverse.
// The collectives run on the compute stream (torch.distributed on the current stream), ahead of
// the attention that needs them.
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

void LayerEmitter::gathered_context_attention(bool backward) {
  const LayerKernels& d = kernels_;
  const int64_t cp = config_.parallelism.context;
  const int64_t kv_bytes =
      2 * sizes_.b * sizes_.s * sizes_.kv_heads * sizes_.head_dim * act_elem_bytes_;
  ops_.blocking(groups_.context, CollectiveKind::kAllGather, kv_bytes, "all_gather",
                "c10d::all_gather_into_tensor");
  const auto rank = static_cast<size_t>(groups_.context_index);
  const std::array<KernelDescId, 2>& chunks =
      backward ? d.attn_gather_bwd.at(rank) : d.attn_gather_fwd.at(rank);
  const std::string_view name = backward ? "FusedAttnBackward" : "FusedAttnFunc";
  for (const KernelDescId chunk : chunks)
    ops_.op(name, backward ? "flash_bwd_kernel" : "flash_fwd_kernel", chunk);
  if (backward) {
    ops_.blocking(groups_.context, CollectiveKind::kReduceScatter, cp * kv_bytes, "reduce_scatter",
                  "c10d::reduce_scatter_tensor");
  }
}

namespace {

/// all_to_all_single of a `bytes` buffer over `members` ranks: each sends bytes / members to
/// every other member and keeps its own share.
std::vector<int64_t> even_all_to_all(int64_t members, int64_t bytes) {
  const auto n = static_cast<size_t>(members);
  std::vector<int64_t> send(n * n, bytes / members);
  for (size_t i = 0; i < n; ++i)
    send[i * n + i] = 0;
  return send;
}

}  // namespace

void LayerEmitter::all_to_all_context_attention(bool backward) {
  const LayerKernels& d = kernels_;
  const int64_t cp = config_.parallelism.context;
  const int64_t tokens = sizes_.b * sizes_.s;
  const int64_t q_bytes = tokens * sizes_.heads * sizes_.head_dim * act_elem_bytes_;
  const int64_t qkv_bytes =
      tokens * (sizes_.heads + 2 * sizes_.kv_heads) * sizes_.head_dim * act_elem_bytes_;
  // Forward: Q, K, V in, the output back; backward: the output gradient in, dQ, dK, dV back.
  const int64_t in = backward ? q_bytes : qkv_bytes;
  const int64_t out = backward ? qkv_bytes : q_bytes;
  ops_.blocking(groups_.context, CollectiveKind::kAllToAll, in, "all_to_all",
                "c10d::all_to_all_single", even_all_to_all(cp, in));
  ops_.op(backward ? "FusedAttnBackward" : "FusedAttnFunc",
          backward ? "flash_bwd_kernel" : "flash_fwd_kernel",
          backward ? d.attn_a2a_bwd : d.attn_a2a_fwd);
  ops_.blocking(groups_.context, CollectiveKind::kAllToAll, out, "all_to_all",
                "c10d::all_to_all_single", even_all_to_all(cp, out));
}

}  // namespace upsim::transformer_emit
