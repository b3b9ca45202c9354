#include "workloads/transformer/op_emitter.h"

#include <utility>

namespace upsim::transformer_emit {

void OpEmitter::marker(std::string_view name) {
  if (capturing_) return;
  graph_.add_cpu_op(threads_.rank, kCpuThread, name, HostPhase::kMarker);
}

TaskId OpEmitter::end_capture(std::string_view op) {
  capturing_ = false;
  return capture_.launch(graph_, threads_, op);
}

void OpEmitter::wait_stream(uint16_t to, uint16_t from, std::string_view name) {
  HostOp h = host_op(name);
  h.wait(to, h.record(from));
  h.end();
}

void OpEmitter::op(std::string_view name, std::string_view kernel_name, KernelDescId kernel) {
  HostOp h = host_op(name);
  h.kernel_on(stream_, kernel_name, name, kernel);
  h.end();
}

void OpEmitter::op2(std::string_view name, std::string_view kernel1, KernelDescId desc1,
                    std::string_view kernel2, KernelDescId desc2) {
  HostOp h = host_op(name);
  h.kernel_on(stream_, kernel1, name, desc1);
  h.kernel_on(stream_, kernel2, name, desc2);
  h.end();
}

CollectiveId OpEmitter::call(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                             std::vector<int64_t> send_bytes, int32_t sms) {
  return groups_.call(pg, kind, bytes, name, std::move(send_bytes), sms);
}

void OpEmitter::blocking(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                         std::string_view op_name, std::vector<int64_t> send_bytes, int32_t sms) {
  if (groups_.size(pg) < 2) return;
  const CollectiveId c = call(pg, kind, bytes, name, std::move(send_bytes), sms);
  HostOp h = host_op(op_name);
  h.collective_on(stream_, c, op_name);
  h.end();
}

}  // namespace upsim::transformer_emit
