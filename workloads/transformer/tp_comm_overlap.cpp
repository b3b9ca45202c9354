// Tensor-parallel communication overlapped with the GEMMs, as Transformer Engine's userbuffers
// run it under Megatron-Core's --tp-comm-overlap (ParallelismConfig::tp_comm_overlap): the
// LayerEmitter members that emit TE's ring-exchange and pipelined overlaps (NVIDIA/
// TransformerEngine transformer_engine/pytorch/module/base.py, initialize_ub); their SM counts
// are in layer_emitter.h.
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

int64_t LayerEmitter::tp_chunk_bytes() const {
  const int64_t elem = config_.dtype == DType::kFp8 ? 1 : act_elem_bytes_;
  return sizes_.sp_tokens * sizes_.h * elem;
}

void LayerEmitter::ring_exchange_gemm(
    std::string_view op, std::string_view kernel_name, KernelDescId chunk,
    std::optional<std::pair<std::string_view, KernelDescId>> after) {
  HostOp h = ops_.host_op(op);
  const auto t = static_cast<size_t>(sizes_.t);
  // Each step every rank passes the chunk it holds to the next rank of the ring.
  const std::vector<int64_t> send = ring_shift_sizes(sizes_.t, tp_chunk_bytes());
  const TaskId ready = h.record(kCompute);
  h.wait(kTpComm, ready);
  std::vector<TaskId> arrived(t, kNoTask);
  for (size_t step = 1; step < t; ++step) {
    h.collective_on(kTpComm,
                    ops_.call(groups_.tensor, CollectiveKind::kAllToAll, 0, "ring_exchange", send,
                              kUserbuffersRingExchangeSms),
                    "te::userbuffers_ring_exchange");
    arrived[step] = h.record(kTpComm);
  }
  for (size_t step = 0; step < t; ++step) {
    if (step > 0) h.wait(kCompute, arrived[step]);
    h.kernel(kernel_name, op, chunk);
  }
  if (after) h.kernel(after->first, op, after->second);
  h.end();
}

void LayerEmitter::gemm_reduce_scatter_pipelined(std::string_view kernel_name, KernelDescId split) {
  HostOp h = ops_.host_op("aten::linear");
  const int64_t rows = (sizes_.tokens + kTpOverlapSplits - 1) / kTpOverlapSplits;
  const int64_t bytes = rows * sizes_.h * act_elem_bytes_;
  TaskId reduced = kNoTask;
  for (int64_t i = 0; i < kTpOverlapSplits; ++i) {
    h.kernel(kernel_name, "aten::linear", split);
    const TaskId done = h.record(kCompute);
    h.wait(kTpComm, done);
    h.collective_on(kTpComm,
                    ops_.call(groups_.tensor, CollectiveKind::kReduceScatter, bytes,
                              "reduce_scatter", {}, kUserbuffersSms),
                    "te::userbuffers_reduce_scatter");
    reduced = h.record(kTpComm);
  }
  h.wait(kCompute, reduced);
  h.end();
}

}  // namespace upsim::transformer_emit
