#include "workloads/transformer/pipeline_p2p.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "workloads/transformer/encoder_decoder.h"

namespace upsim::transformer_emit {

void PipelineP2p::begin_rank(int64_t rank, int64_t stage, int64_t prev, int64_t next,
                             uint32_t tensor_pg, bool data_parallel_stream) {
  rank_ = rank;
  stage_ = stage;
  prev_ = prev;
  next_ = next;
  tensor_pg_ = tensor_pg;
  data_parallel_stream_ = data_parallel_stream;
  to_next_ = groups_.group(ParallelDim::kPipeline, {rank_, next_}, "activations");
  from_prev_ = groups_.group(ParallelDim::kPipeline, {prev_, rank_}, "activations");
  to_prev_ = groups_.group(ParallelDim::kPipeline, {rank_, prev_}, "gradients");
  from_next_ = groups_.group(ParallelDim::kPipeline, {next_, rank_}, "gradients");
}

int64_t PipelineP2p::message_bytes(int64_t receiver_stage) const {
  int64_t tokens = sizes_.sp_tokens;
  // Between an encoder-decoder model's decoder stages: the decoder's hidden state beside the
  // encoder's output (encoder_decoder.h; no sequence parallel there).
  if (config_.encoder_decoder() && receiver_stage - 1 >= first_decoder_stage(config_)) {
    tokens += config_.micro_batch * config_.decoder_seq;
  }
  const int64_t full = tokens * sizes_.h * dtype_bytes(config_.activation_dtype());
  return scatter_gather() ? full / sizes_.t : full;
}

bool PipelineP2p::scatter_gather() const {
  return config_.parallelism.p2p_scatter_gather && sizes_.t > 1 && !config_.parallelism.sequence;
}

void PipelineP2p::receive(bool forward, int64_t micro_batch, int64_t stage, int64_t last_stage) {
  if (forward ? stage == 0 : stage == last_stage) return;
  const uint32_t pg = forward ? from_prev_ : from_next_;
  HostOp h(ops_.graph(), ops_.threads(), forward ? "recv_forward" : "recv_backward");
  const uint16_t stream = forward ? kActIn : kGradIn;
  // The message stage `stage` received forward, or the gradient of the one it sent.
  const int64_t bytes = message_bytes(forward ? stage : stage + 1);
  h.collective_on(stream, ops_.call(pg, CollectiveKind::kSendRecv, bytes, "send_recv"),
                  "c10d::batch_isend_irecv");
  const TaskId done = h.record(stream);
  h.wait(kCompute, done);
  h.end();
  if (config_.parallelism.p2p_synchronous) synchronize();
  gather(bytes);
  received_.push_back({forward ? prev_ : next_, rank_, forward, micro_batch, stage});
}

void PipelineP2p::gather(int64_t bytes) {
  if (!scatter_gather()) return;
  ops_.blocking(tensor_pg_, CollectiveKind::kAllGather, bytes,
                collective_kind_name(CollectiveKind::kAllGather), "gather_split_1d_tensor");
}

void PipelineP2p::exchange(const PipelineExchange& exchange,
                           const std::vector<PipelineStep>& steps) {
  const auto step_at = [&](int64_t index) -> const PipelineStep& {
    return steps[static_cast<size_t>(index)];
  };
  HostOp h(ops_.graph(), ops_.threads(), "batch_isend_irecv");
  // The sends carry what the compute stream has done before the exchange, not what it does
  // after waiting for this exchange's receives.
  const bool sends = exchange.send_prev >= 0 || exchange.send_next >= 0;
  const TaskId computed = sends ? h.record(kCompute) : 0;
  const auto post_send = [&](int64_t index, bool forward) {
    const PipelineStep& step = step_at(index);
    const int64_t vs = virtual_stage_of(step.chunk, config_.parallelism.pipeline, stage_);
    const uint16_t stream = forward ? kActOut : kGradOut;
    h.wait(stream, computed);
    const int64_t bytes = message_bytes(forward ? vs + 1 : vs);
    h.collective_on(
        stream,
        ops_.call(forward ? to_next_ : to_prev_, CollectiveKind::kSendRecv, bytes, "send_recv"),
        "c10d::batch_isend_irecv");
    sent_.push_back(
        {rank_, forward ? next_ : prev_, forward, step.micro_batch, forward ? vs + 1 : vs - 1});
  };
  std::vector<int64_t> received_bytes;
  const auto post_receive = [&](int64_t index, bool forward) {
    const PipelineStep& step = step_at(index);
    const int64_t vs = virtual_stage_of(step.chunk, config_.parallelism.pipeline, stage_);
    const uint16_t stream = forward ? kActIn : kGradIn;
    const int64_t bytes = message_bytes(forward ? vs : vs + 1);
    h.collective_on(
        stream,
        ops_.call(forward ? from_prev_ : from_next_, CollectiveKind::kSendRecv, bytes, "send_recv"),
        "c10d::batch_isend_irecv");
    h.wait(kCompute, h.record(stream));
    received_.push_back({forward ? prev_ : next_, rank_, forward, step.micro_batch, vs});
    received_bytes.push_back(bytes);
  };
  // _batched_p2p_ops' order: send to the previous stage, receive from it, send to the next,
  // receive from it.
  if (exchange.send_prev >= 0) post_send(exchange.send_prev, false);
  if (exchange.recv_prev >= 0) post_receive(exchange.recv_prev, true);
  if (exchange.send_next >= 0) post_send(exchange.send_next, true);
  if (exchange.recv_next >= 0) post_receive(exchange.recv_next, false);
  h.end();
  ops_.graph().add_host_sync(ops_.threads().rank, kCpuThread, kAllStreams,
                             "torch.cuda.synchronize");
  for (int64_t bytes : received_bytes)
    gather(bytes);
}

void PipelineP2p::send(bool forward, int64_t micro_batch, int64_t stage, int64_t last_stage,
                       std::optional<TaskId> ready) {
  if (forward ? stage == last_stage : stage == 0) return;
  const uint32_t pg = forward ? to_next_ : to_prev_;
  HostOp h(ops_.graph(), ops_.threads(), forward ? "send_forward" : "send_backward");
  const uint16_t stream = forward ? kActOut : kGradOut;
  h.wait(stream, ready ? *ready : h.record(kCompute));
  const int64_t bytes = message_bytes(forward ? stage + 1 : stage);
  h.collective_on(stream, ops_.call(pg, CollectiveKind::kSendRecv, bytes, "send_recv"),
                  "c10d::batch_isend_irecv");
  h.end();
  sent_.push_back(
      {rank_, forward ? next_ : prev_, forward, micro_batch, forward ? stage + 1 : stage - 1});
}

void PipelineP2p::synchronize() {
  // The compute stream waits for the receive already, and for its layers' tensor-parallel
  // collectives. The data-parallel stream's gradient reductions and parameter gathers it does
  // not wait for: they are synchronised too where the rank runs any.
  TaskGraph& graph = ops_.graph();
  const RankId rank = ops_.threads().rank;
  graph.add_host_sync(rank, kCpuThread, kCompute, "torch.cuda.synchronize");
  if (data_parallel_stream_) {
    graph.add_host_sync(rank, kCpuThread, kDpComm, "torch.cuda.synchronize");
  }
}

void PipelineP2p::check_order() const {
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
