// Pipeline-parallel sends and receives of the transformer rank being emitted (Megatron's
// p2p_communication: batch_isend_irecv of activations forward and their gradients backward, the
// scatter/gather optimisation over the tensor-parallel ranks, synchronous exchanges), and the check
// that every rank receives its messages in the order they were sent.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/process_groups.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::transformer_emit {

class PipelineP2p {
 public:
  /// The references must outlive the object; `ops` emits on the rank being emitted.
  PipelineP2p(const TransformerConfig& config, const LayerSizes& sizes, ProcessGroups& groups,
              OpEmitter& ops)
      : config_(config), sizes_(sizes), groups_(groups), ops_(ops) {}

  /// A new rank `rank` is emitted, between pipeline neighbours `prev` and `next`; `tensor_pg`:
  /// its tensor-parallel group (the scatter/gather); `data_parallel_stream`: the rank's
  /// gradient synchronisation runs collectives on the data-parallel stream (a gradient buffer
  /// with more than one replica), which a synchronous exchange waits for. Makes its four p2p
  /// groups (to and from each neighbour, activations and gradients apart).
  void begin_rank(int64_t rank, int64_t prev, int64_t next, uint32_t tensor_pg,
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
  /// Synchronous p2p (ParallelismConfig::p2p_synchronous), after a receive: Megatron's
  /// _communicate() waits for its batch of sends and receives, then calls
  /// torch.cuda.synchronize(): the host waits for the device's streams (the compute with the
  /// receive and the tensor-parallel collectives it waits for, the data-parallel collectives in
  /// flight), so it cannot run ahead launching the next kernels. Megatron posts a step's sends in
  /// one batch with the next step's receives; this per-direction model emits each receive just
  /// before its step, so the sends are not waited for: with them, a stage's wait at a backward's
  /// receive would hold the forward send just posted, which its neighbour takes only at its
  /// own next forward, and the interleaved pipeline's ring deadlocks.
  void synchronize();

  const TransformerConfig& config_;
  const LayerSizes& sizes_;
  ProcessGroups& groups_;
  OpEmitter& ops_;
  int64_t rank_ = 0;
  int64_t prev_ = 0;
  int64_t next_ = 0;
  uint32_t tensor_pg_ = 0;
  bool data_parallel_stream_ = false;
  uint32_t to_next_ = 0, from_prev_ = 0, to_prev_ = 0, from_next_ = 0;
  std::vector<Message> sent_;
  std::vector<Message> received_;
};

}  // namespace upsim::transformer_emit
