#include "workloads/transformer/transformer_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "workloads/pytorch/kernels.h"

namespace upsim::transformer_emit {

int64_t TransformerEmitter::p2p_bytes() const {
  const int64_t full = sizes_.sp_tokens * sizes_.h * act_elem_bytes_;
  return scatter_gather() ? full / sizes_.t : full;
}

bool TransformerEmitter::scatter_gather() const {
  return config_.parallelism.p2p_scatter_gather && sizes_.t > 1 && !config_.parallelism.sequence;
}

void TransformerEmitter::receive(bool forward, int64_t micro_batch, int64_t chunk) {
  const int64_t vs = virtual_stage(chunk);
  if (forward ? vs == 0 : vs == virtual_stages() - 1) return;
  const uint32_t pg = forward ? from_prev_ : from_next_;
  HostOp h(graph_, threads_, forward ? "recv_forward" : "recv_backward");
  const uint16_t stream = forward ? kActIn : kGradIn;
  h.collective_on(stream, call(pg, CollectiveKind::kSendRecv, p2p_bytes(), "send_recv"),
                  "c10d::batch_isend_irecv");
  const TaskId done = h.record(stream);
  h.wait(kCompute, done);
  h.end();
  // Synchronous p2p: the host blocks until the message is in (req.wait() and
  // torch.cuda.synchronize()), so it cannot run ahead launching the next kernels. Sends stay
  // asynchronous here: Megatron posts them in the same batch as the next receive, which this
  // per-direction stream model has no single call for.
  if (config_.parallelism.p2p_synchronous) {
    graph_.add_host_sync(threads_.rank, kCpuThread, stream, "torch.cuda.synchronize");
  }
  // Scatter/gather: the TP ranks' slices are gathered over NVLink into the full tensor.
  if (scatter_gather()) {
    tp_collective(CollectiveKind::kAllGather, p2p_bytes(), "gather_split_1d_tensor");
  }
  received_.push_back({forward ? prev_ : next_, rank_, forward, micro_batch, vs});
}

void TransformerEmitter::send(bool forward, int64_t micro_batch, int64_t chunk) {
  const int64_t vs = virtual_stage(chunk);
  if (forward ? vs == virtual_stages() - 1 : vs == 0) return;
  const uint32_t pg = forward ? to_next_ : to_prev_;
  HostOp h(graph_, threads_, forward ? "send_forward" : "send_backward");
  const uint16_t stream = forward ? kActOut : kGradOut;
  const TaskId ready = h.record(kCompute);
  h.wait(stream, ready);
  h.collective_on(stream, call(pg, CollectiveKind::kSendRecv, p2p_bytes(), "send_recv"),
                  "c10d::batch_isend_irecv");
  h.end();
  sent_.push_back(
      {rank_, forward ? next_ : prev_, forward, micro_batch, forward ? vs + 1 : vs - 1});
}

void TransformerEmitter::check_p2p_order() const {
  std::map<std::tuple<int64_t, int64_t, bool>, std::vector<std::pair<int64_t, int64_t>>> sent;
  std::map<std::tuple<int64_t, int64_t, bool>, std::vector<std::pair<int64_t, int64_t>>> recv;
  for (const Message& m : sent_)
    sent[{m.from, m.to, m.forward}].emplace_back(m.micro_batch, m.virtual_stage);
  for (const Message& m : received_)
    recv[{m.from, m.to, m.forward}].emplace_back(m.micro_batch, m.virtual_stage);
  for (const auto& [key, order] : sent) {
    auto it = recv.find(key);
    if (it != recv.end() && it->second != order) {
      throw std::logic_error(fmt::format(
          "transformer generator: pipeline messages from rank {} to rank {} are received in "
          "another order than sent",
          std::get<0>(key), std::get<1>(key)));
    }
  }
}

}  // namespace upsim::transformer_emit
