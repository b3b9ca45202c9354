// Pipeline-parallel sends and receives of the transformer rank being emitted (Megatron's
// p2p_communication: batch_isend_irecv of activations forward and their gradients backward, the
// scatter/gather optimisation over the tensor-parallel ranks, synchronous exchanges at the points
// pipeline_exchanges.h places them), and the check that every rank receives its messages in the
// order they were sent.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/pipeline_exchanges.h"
#include "workloads/transformer/process_groups.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::transformer_emit {

class PipelineP2p {
 public:
  /// The references must outlive the object; `ops` emits on the rank being emitted.
  PipelineP2p(const TransformerConfig& config, const LayerSizes& sizes, ProcessGroups& groups,
              OpEmitter& ops)
      : config_(config), sizes_(sizes), groups_(groups), ops_(ops) {}

  /// A new rank `rank` of pipeline stage `stage` is emitted, between pipeline neighbours `prev`
  /// and `next`; `tensor_pg`:
  /// its tensor-parallel group (the scatter/gather); `data_parallel_stream`: the rank's
  /// gradient synchronisation runs collectives on the data-parallel stream (a gradient buffer
  /// with more than one replica), which a synchronous exchange waits for. Makes its four p2p
  /// groups (to and from each neighbour, activations and gradients apart).
  void begin_rank(int64_t rank, int64_t stage, int64_t prev, int64_t next, uint32_t tensor_pg,
                  bool data_parallel_stream);

  /// Posts the receive of a step's input (its activation forward, its output gradient
  /// backward) on its stream and makes the compute stream wait for it; nothing at the first
  /// (forward) or last (backward) virtual stage. `stage`: the step's virtual stage;
  /// `last_stage`: the last virtual stage.
  void receive(bool forward, int64_t micro_batch, int64_t stage, int64_t last_stage);
  /// Sends a step's output (or input gradient) to the neighbour after the compute stream's
  /// work so far, or after event `ready` when given (the combined 1F1B schedule sends a
  /// micro-batch's output once its own chain of nodes is done, combined_1f1b.cpp).
  void send(bool forward, int64_t micro_batch, int64_t stage, int64_t last_stage,
            std::optional<TaskId> ready = std::nullopt);

  /// One of Megatron's synchronous exchanges (pipeline_exchanges.h) of the rank being emitted:
  /// its sends (each after the compute stream's work so far) and receives (the compute stream
  /// waits for each) as one batch_isend_irecv, then torch.cuda.synchronize(), which waits for
  /// every stream of the device, the sends included. `steps`: the rank's schedule, which the
  /// exchange's step indices name.
  void exchange(const PipelineExchange& exchange, const std::vector<PipelineStep>& steps);

  /// Every pipeline message must be received in the order it was sent (messages on a directed
  /// pair are matched by order); a schedule that breaks this would pair the wrong messages
  /// (std::logic_error).
  void check_order() const;

 private:
  struct Message {
    int64_t from = 0;
    int64_t to = 0;
    bool forward = true;
    int64_t micro_batch = 0;
    int64_t virtual_stage = 0;  ///< the receiver's
  };

  /// Bytes of one pipeline message on the network to virtual stage `receiver_stage` (forward;
  /// its gradient goes back the other way): the activation of one micro-batch, split over the
  /// TP ranks with the scatter/gather optimisation; between an encoder-decoder model's decoder
  /// stages with the encoder's output.
  int64_t message_bytes(int64_t receiver_stage) const;
  bool scatter_gather() const;
  /// Synchronous p2p (ParallelismConfig::p2p_synchronous) after a receive of the per-direction
  /// model, which the GPipe and combined 1F1B schedules keep (Megatron's own schedules run
  /// exchange() instead): the host waits for the compute stream (with the receive and the
  /// tensor-parallel collectives it waits for) and the data-parallel collectives in flight, not
  /// for the sends: each receive here sits just before its step, so a wait for a send just
  /// posted could hold a neighbour that takes it only at its own next step.
  void synchronize();
  /// Scatter/gather: the TP ranks' slices of a received message gathered over NVLink.
  void gather(int64_t bytes);

  const TransformerConfig& config_;
  const LayerSizes& sizes_;
  ProcessGroups& groups_;
  OpEmitter& ops_;
  int64_t rank_ = 0;
  int64_t stage_ = 0;
  int64_t prev_ = 0;
  int64_t next_ = 0;
  uint32_t tensor_pg_ = 0;
  bool data_parallel_stream_ = false;
  uint32_t to_next_ = 0, from_prev_ = 0, to_prev_ = 0, from_next_ = 0;
  std::vector<Message> sent_;
  std::vector<Message> received_;
};

}  // namespace upsim::transformer_emit
