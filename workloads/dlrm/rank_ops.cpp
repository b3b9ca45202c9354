#include "workloads/dlrm/rank_ops.h"

#include <stdexcept>
#include <string>

#include "sim/units.h"

namespace upsim::dlrm_emit {

RankOps::RankOps(const DlrmConfig& config, const DlrmGraph& built, uint32_t index, TaskGraph& graph)
    : config_(config),
      graph_(graph),
      rank_(built.ranks[index]),
      threads_{rank_, kCpuThread, kComputeStream, kCommStream},
      distributed_(built.ranks.size() > 1) {}

void RankOps::single_kernel(std::string_view op, std::string_view kernel_name,
                            std::string_view aten_op, const KernelDesc& desc) {
  HostOp h(graph_, threads_, op, capture());
  h.kernel(kernel_name, aten_op, desc);
  h.end();
}

void RankOps::host_sync(uint16_t stream, std::string_view op) {
  if (capturing_) {
    throw std::logic_error("DLRM generator: host sync `" + std::string(op) +
                           "` inside a CUDA graph capture");
  }
  graph_.add_host_sync(rank_, kCpuThread, stream, op);
}

TaskId RankOps::end_capture(std::string_view op) {
  capturing_ = false;
  return capture_.launch(graph_, threads_, op);
}

void RankOps::iteration_mark(uint32_t it) {
  graph_.add_iteration_mark(rank_, kCpuThread, it);
}

void RankOps::blocking_copy(std::string_view copy_name, TransferKind kind, int64_t bytes) {
  HostOp h(graph_, threads_, "aten::to", capture());
  h.copy(copy_name, kind, bytes);
  h.end();
  host_sync(kComputeStream, "aten::to");
}

void RankOps::convert(DType from, DType to, int64_t elements) {
  if (elements == 0 || storage_dtype(from) == storage_dtype(to)) return;
  KernelDesc cast = pointwise(MemoryOp::kCopy, to, as_double(elements), 0, 0, 1);
  cast.bytes_read = as_double(elements * dtype_bytes(from));
  single_kernel("aten::to", "vectorized_elementwise_kernel/copy_", "aten::copy_", cast);
}

TaskId RankOps::launch_collective(CollectiveId group, std::string_view op, uint16_t after) {
  HostOp h(graph_, threads_, op, capture());
  const TaskId ready = h.record(after);
  h.wait(kCommStream, ready);
  h.collective(group, op);
  const TaskId done = h.record(kCommStream);
  h.end();
  return done;
}

TaskId RankOps::scaled_all_reduce(CollectiveId group, DType dtype, int64_t elements) {
  HostOp h(graph_, threads_, "nccl:all_reduce", capture());
  // Gradient pre-scale by 1 / world size (Lin et al., TPDS 2024: mul, F = 1, A = 3).
  h.kernel("vectorized_elementwise_kernel/mul", "aten::mul",
           pointwise(MemoryOp::kBinary, dtype, as_double(elements), 1, 2, 1));
  const TaskId ready = h.record(kComputeStream);
  h.wait(kCommStream, ready);
  h.collective(group, "nccl:all_reduce");
  const TaskId done = h.record(kCommStream);
  h.end();
  return done;
}

void RankOps::wait_for(std::string_view op, TaskId comm_event) {
  HostOp h(graph_, threads_, op, capture());
  h.wait(kComputeStream, comm_event);
  h.end();
}

void RankOps::cast_parameter(HostOp& h, int64_t elements) {
  if (!config_.master_weights) return;
  KernelDesc cast = pointwise(MemoryOp::kCopy, config_.dtype, as_double(elements), 0, 0, 1);
  cast.bytes_read = as_double(elements * 4);
  h.kernel("vectorized_elementwise_kernel/copy_", "aten::_to_copy", cast);
}

void RankOps::accumulate_grad(int64_t elements) {
  if (!config_.master_weights) {
    body("AccumulateGrad");
    return;
  }
  KernelDesc cast = pointwise(MemoryOp::kCopy, DType::kFp32, as_double(elements), 0, 0, 1);
  cast.bytes_read = as_double(elements * dtype_bytes(config_.dtype));
  single_kernel("AccumulateGrad", "vectorized_elementwise_kernel/copy_", "aten::_to_copy", cast);
}

}  // namespace upsim::dlrm_emit
