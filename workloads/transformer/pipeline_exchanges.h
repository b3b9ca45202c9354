// Megatron's synchronous pipeline exchanges: where a pipeline stage's schedule sends and receives,
// when each exchange is one batch of sends and receives ended by torch.cuda.synchronize()
// (batch_p2p_comm with batch_p2p_sync; ParallelismConfig::p2p_synchronous).
//
// Source: Megatron-LM @ d98e8a6, megatron/core/pipeline_parallel/schedules.py
// (forward_backward_pipelining_without_interleaving; forward_backward_pipelining_with_interleaving
// with overlap_p2p_comm and overlap_p2p_comm_warmup_flush off, and its
// recv_tensor_from_previous_stage) and p2p_communication.py (_communicate). The 2021
// megatron/schedules.py of the SC21 paper (f2c35bb0) places the same exchanges.
//  - 1F1B: each warm-up forward is `recv_forward` then `send_forward`; the steady state pairs a
//    forward's send with the receive of the gradient its backward needs
//    (send_forward_recv_backward) and the backward's send with the next forward's receive
//    (send_backward_recv_forward); the cool-down is `recv_backward`, `send_backward`. A call with
//    nothing to exchange (a send on the last stage, a receive on the first) is skipped.
//  - Interleaved 1F1B: one exchange after each warm-up forward (its output out, the next
//    forward's input in; at the last warm-up step also the first backward's gradient), one after
//    each steady forward + backward pair (both outputs out, both next inputs in), one after each
//    cool-down backward. The first pipeline stage receives the last stage's outputs pipeline - 1
//    steps ahead of use (and the last stage the first stage's gradients). Every such call ends in a
//    synchronize, even with nothing to exchange.
// Each exchange's receives are matched to the steps that consume them in order (Megatron's
// input_tensors / output_tensor_grads queues); every step's input is received by an exchange
// before it (std::logic_error otherwise: a schedule this model does not follow).
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/transformer/pipeline_schedule.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// One batched exchange: indices into the stage's steps (pipeline_schedule), -1 for none.
struct PipelineExchange {
  int64_t send_next = -1;  ///< the forward whose output goes to the next stage
  int64_t send_prev = -1;  ///< the backward whose input gradient goes to the previous stage
  int64_t recv_prev = -1;  ///< the forward whose input comes from the previous stage
  int64_t recv_next = -1;  ///< the backward whose output gradient comes from the next stage
};

/// One entry of a stage's synchronous schedule: run steps[step], or (step < 0) exchange.
struct PipelineAction {
  int64_t step = -1;
  PipelineExchange exchange;
};

/// The stage's steps with Megatron's exchanges between them. `steps`: pipeline_schedule(schedule,
/// stages, chunks, micro_batches, stage) with no extra warm-up; `schedule` 1F1B or interleaved
/// 1F1B, `stages` > 1 (std::invalid_argument otherwise).
std::vector<PipelineAction> synchronous_pipeline_plan(const std::vector<PipelineStep>& steps,
                                                      PipelineSchedule schedule, int64_t stages,
                                                      int64_t chunks, int64_t micro_batches,
                                                      int64_t stage);

}  // namespace upsim
