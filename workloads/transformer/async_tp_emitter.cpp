// torchtitan's async tensor parallel (ParallelismConfig::async_tp): the fused ops Inductor's
// micro-pipeline TP pass (torch/_inductor/fx_passes/micro_pipeline_tp.py) puts in place of
// DTensor's collectives, as torch.distributed._symmetric_memory runs them
// (_pipelined_multi_all_gather_and_consume, _pipelined_produce_and_all2all): the peer copies
// go through symmetric memory on the copy engines, so they hold no SMs ("[Distributed w/
// TorchTitan] Introducing Async Tensor Parallelism in PyTorch", PyTorch forums, 2024).
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

namespace {

constexpr std::string_view kAllGatherMatmul = "symm_mem::fused_all_gather_matmul";
constexpr std::string_view kMatmulReduceScatter = "symm_mem::fused_matmul_reduce_scatter";
/// SMs a symmetric-memory peer copy holds: none (the copy engines move it).
constexpr int32_t kCopyEngineSms = 0;

/// Step `distance` of a symmetric-memory pipeline as an all-to-all's send sizes (members x
/// members, row-major): every member's `bytes` go to the member `distance` before it (each
/// rank reads the shard of the rank `distance` after it).
std::vector<int64_t> shift_sizes(int64_t members, int64_t distance, int64_t bytes) {
  const auto n = static_cast<size_t>(members);
  std::vector<int64_t> send(n * n, 0);
  for (size_t i = 0; i < n; ++i)
    send[i * n + (i + n - static_cast<size_t>(distance) % n) % n] = bytes;
  return send;
}

}  // namespace

void LayerEmitter::async_tp_peer_copy(HostOp& h, int64_t step, int64_t bytes) {
  h.collective_on(kTpComm,
                  ops_.call(groups_.tensor, CollectiveKind::kAllToAll, 0, "symm_mem_copy",
                            shift_sizes(sizes_.t, step, bytes), kCopyEngineSms),
                  "symm_mem::copy");
}

void LayerEmitter::async_tp_all_gather_matmuls(
    std::initializer_list<std::pair<std::string_view, KernelDescId>> consumers,
    std::optional<std::pair<std::string_view, KernelDescId>> after) {
  const TorchtitanLayerKernels& k = kernels_.torchtitan;
  const int64_t t = sizes_.t;
  const int64_t shard_bytes = sizes_.sp_tokens * sizes_.h * act_elem_bytes_;
  HostOp h = ops_.host_op(kAllGatherMatmul);
  const auto consume = [&] {
    for (const auto& [name, desc] : consumers)
      h.kernel(name, kAllGatherMatmul, desc);
    return h.record(kCompute);
  };
  h.kernel("symm_mem_copy", kAllGatherMatmul, k.shard_copy);
  const TaskId local_copied = h.record(kCompute);
  std::vector<TaskId> consumed(static_cast<size_t>(t), kNoTask);
  consumed[0] = consume();
  for (int64_t step = 1; step < t; ++step) {
    h.wait(kTpComm, step == 1 ? local_copied : consumed[static_cast<size_t>(step - 2)]);
    async_tp_peer_copy(h, step, shard_bytes);
    h.wait(kCompute, h.record(kTpComm));
    consumed[static_cast<size_t>(step)] = consume();
  }
  h.kernel("symm_mem_copy", kAllGatherMatmul, k.shard_copy);
  if (after) h.kernel(after->first, kAllGatherMatmul, after->second);
  h.end();
}

void LayerEmitter::async_tp_matmul_reduce_scatter(std::string_view kernel_name,
                                                  KernelDescId chunk) {
  const int64_t t = sizes_.t;
  const int64_t chunk_bytes = sizes_.sp_tokens * sizes_.h * act_elem_bytes_;
  HostOp h = ops_.host_op(kMatmulReduceScatter);
  std::vector<TaskId> sent(static_cast<size_t>(t), kNoTask);
  for (int64_t step = 1; step < t; ++step) {
    // Two buffers: a step's output waits until the copy two steps back has read its buffer.
    if (step >= 3) h.wait(kCompute, sent[static_cast<size_t>(step - 2)]);
    h.kernel(kernel_name, kMatmulReduceScatter, chunk);
    h.wait(kTpComm, h.record(kCompute));
    async_tp_peer_copy(h, step, chunk_bytes);
    sent[static_cast<size_t>(step)] = h.record(kTpComm);
  }
  h.kernel(kernel_name, kMatmulReduceScatter, chunk);
  h.wait(kCompute, sent[static_cast<size_t>(t - 1)]);
  h.kernel("symm_mem_reduce", kMatmulReduceScatter, kernels_.torchtitan.partial_sum);
  h.end();
}

}  // namespace upsim::transformer_emit
