#include "workloads/pytorch/host_op.h"

namespace upsim::pytorch {

TaskId body(TaskGraph& graph, const RankThreads& at, std::string_view op_name) {
  return graph.add_cpu_op(at.rank, at.cpu_thread, op_name, HostPhase::kOpBody);
}

TaskId GraphCapture::launch(TaskGraph& graph, const RankThreads& at, std::string_view op_name) {
  const TaskId id =
      graph.add_graph_launch(at.rank, at.cpu_thread, kLaunchGraph, op_name, gpu_tasks);
  gpu_tasks.clear();
  return id;
}

HostOp::HostOp(TaskGraph& graph, const RankThreads& at, std::string_view name,
               GraphCapture* capture)
    : graph_(graph), at_(at), name_(graph.name(graph.intern(name))), capture_(capture) {
  if (capture_ == nullptr) graph_.add_cpu_op(at_.rank, at_.cpu_thread, name_, HostPhase::kOpBegin);
}

TaskId HostOp::kernel(std::string_view kernel_name, std::string_view aten_op,
                      const KernelDesc& desc) {
  return launch(kLaunchKernel,
                graph_.add_kernel(at_.rank, at_.compute_stream, kernel_name, aten_op, desc));
}

TaskId HostOp::kernel(std::string_view kernel_name, std::string_view aten_op, KernelDescId desc) {
  return kernel_on(at_.compute_stream, kernel_name, aten_op, desc);
}

TaskId HostOp::kernel_on(uint16_t stream, std::string_view kernel_name, std::string_view aten_op,
                         KernelDescId desc) {
  return launch(kLaunchKernel, graph_.add_kernel(at_.rank, stream, kernel_name, aten_op, desc));
}

TaskId HostOp::kernel_on(uint16_t stream, std::string_view kernel_name, std::string_view aten_op,
                         const KernelDesc& desc) {
  return launch(kLaunchKernel, graph_.add_kernel(at_.rank, stream, kernel_name, aten_op, desc));
}

TaskId HostOp::copy(std::string_view copy_name, TransferKind kind, int64_t bytes) {
  return copy_on(at_.compute_stream, copy_name, kind, bytes);
}

TaskId HostOp::copy_on(uint16_t stream, std::string_view copy_name, TransferKind kind,
                       int64_t bytes) {
  return launch(kLaunchMemcpy, graph_.add_memcpy(at_.rank, stream, copy_name, "aten::copy_",
                                                 TransferDesc{kind, at_.rank, bytes}));
}

TaskId HostOp::record(uint16_t stream) {
  return launch(kLaunchRecord, graph_.add_event_record(at_.rank, stream));
}

TaskId HostOp::wait(uint16_t stream, TaskId event) {
  return launch(kLaunchWait, graph_.add_stream_wait(at_.rank, stream, event));
}

TaskId HostOp::collective(CollectiveId group, std::string_view aten_op) {
  return collective_on(at_.comm_stream, group, aten_op);
}

TaskId HostOp::collective_on(uint16_t stream, CollectiveId group, std::string_view aten_op) {
  return launch(kLaunchNccl, graph_.add_collective(at_.rank, stream, group, aten_op));
}

void HostOp::end() {
  if (capture_ == nullptr) graph_.add_cpu_op(at_.rank, at_.cpu_thread, name_, HostPhase::kOpEnd);
}

TaskId HostOp::launch(std::string_view api, TaskId gpu_task) {
  if (capture_ != nullptr) {
    capture_->gpu_tasks.push_back(gpu_task);
    return gpu_task;
  }
  graph_.add_launch(at_.rank, at_.cpu_thread, api, name_, launches_++, gpu_task);
  return gpu_task;
}

}  // namespace upsim::pytorch
