// One DLRM rank's training (or inference) step as PyTorch runs it: the per-rank op sequence of
// dlrm_generator.h, emitted into the task graph. RankEmitter orders one iteration's phases; each
// phase is emitted by its own class:
//   rank_plan.h              the rank's lookups and bottom MLP share, planned once from the table
//                            placement (RankPlan)
//   batch_input_emitter.h    the DataLoader's fetch and the batch's host-to-device copies
//   input_dist_emitter.h     TorchRec's input distribution (input_dist: all_to_all), in the
//                            forward or pipelined (train_pipeline: sparse_dist)
//   embedding_emitter.h      the embedding lookups, their exchange (all-to-all, row-wise,
//                            table-row-wise) and backward, the data-parallel tables' gradient
//   dense_network_emitter.h  the bottom and top MLPs and the loss, forward and backward
//   interaction_emitter.h    the dot interaction or DCNv2's cross network, forward and backward
//   optimizer_emitter.h      zero_grad and the optimizer step (dense, sparse, GradScaler)
// They share the rank's op helpers (RankOps, rank_ops.h), the lookup groups' kernel descriptions
// (lookup_group.h), the DDP modules' buckets (ddp_module.h) and the iteration's collective groups
// (collective_groups.h).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/dlrm/batch_input_emitter.h"
#include "workloads/dlrm/collective_groups.h"
#include "workloads/dlrm/ddp_module.h"
#include "workloads/dlrm/dense_network_emitter.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/embedding_emitter.h"
#include "workloads/dlrm/input_dist_emitter.h"
#include "workloads/dlrm/interaction_emitter.h"
#include "workloads/dlrm/optimizer_emitter.h"
#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

/// Emits one rank's iterations.
class RankEmitter {
 public:
  RankEmitter(const DlrmConfig& config, const DlrmGraph& built,
              const std::vector<int64_t>& top_widths, const EmbeddingExchange& exchange,
              const std::vector<KjtAllToAll>& kjts, uint32_t index, TaskGraph& graph);
  /// The phase emitters refer to the rank's ops and plan, members of this object.
  RankEmitter(const RankEmitter&) = delete;
  RankEmitter& operator=(const RankEmitter&) = delete;

  /// Iteration `it`: the batch, forward, backward and optimizer step (inference: the batch and
  /// the forward), then the host's wait for every stream.
  void iteration(uint32_t it, const IterationGroups& groups);

  /// After the last of `iterations` iterations. A train_pipeline, whose host runs
  /// ahead of the device: a mark that closes the last iteration where the next step would
  /// begin, then the loop's end waits for every stream (the drain is not an iteration: the
  /// workload measures `iterations` only). Otherwise nothing: every iteration ends in a sync.
  void end_of_loop(uint32_t iterations);

 private:
  /// train_pipeline: sparse_dist (TorchRec's TrainPipelineSparseDist.progress): batch it+1's
  /// input distribution starts on the data-dist stream and batch it+2 is copied before the
  /// forward of batch it, whose distributed input the forward waits for; batch it+1's lengths and
  /// indices are sent after the forward. The first iteration fills the pipeline first
  /// (fill_pipeline: batch 0 copied and distributed, batch 1 copied).
  void pipelined_training_step(uint32_t it, const IterationGroups& groups, DdpModule& top,
                               DdpModule& bottom);

  /// train_pipeline: semi_sync (TorchRec's TrainPipelineSemiSync.progress in its semi-sync
  /// steady state): batch it+2's input distribution starts on the data-dist stream; batch it's
  /// forward, whose lookups and exchange ran a step earlier, waits for its pooled embeddings;
  /// batch it+3 is copied; batch it+1's lookups run and its forward exchange is launched (it
  /// overlaps this batch's backward); batch it+2's lengths and indices are sent; the dense
  /// backward, then emb_backward (the embeddings' backward exchange and lookups' backward); the
  /// optimizer. The first iteration fills the pipeline first (fill_pipeline: batch 0 copied,
  /// distributed and looked up, batch 1 copied and distributed, batch 2 copied).
  void semi_sync_training_step(uint32_t it, const IterationGroups& groups, DdpModule& top,
                               DdpModule& bottom);

  /// TrainPipelineSemiSync.start_embedding_lookup: the compute stream waits for the batch's
  /// copy (`copied`, one rank) or its distributed input (`input`, more ranks), then the batch's
  /// lookups run and its forward exchange is launched.
  EmbeddingEmitter::PendingExchange start_embedding_lookup(const InputDistEmitter::Pending& input,
                                                           TaskId copied,
                                                           const ForwardExchangeGroups& exchange);

  /// A copied batch (semi_sync): the host records an event on the memcpy stream after its
  /// copies (copy_batch_to_gpu), returned for start_embedding_lookup.
  TaskId load_recorded_batch();

  /// The lookups and their exchange, overlapped with the bottom MLP; the interaction, the top
  /// MLP and (training) the loss. With `distributed` (train_pipeline: sparse_dist), the batch's
  /// input distribution already in flight is waited for; otherwise an input_dist: all_to_all
  /// run distributes the batch first.
  void forward(const IterationGroups& groups,
               const InputDistEmitter::Pending* distributed = nullptr);

  /// semi_sync: the forward of a batch whose lookups and exchange ran ahead
  /// (EmbeddingPipelinedForward): the compute stream waits for the data-dist stream, the bottom
  /// MLP runs, then the wait for the pooled embeddings, the interaction, the top MLP and the
  /// loss.
  void dense_forward(const EmbeddingEmitter::PendingExchange& embeddings);

  /// semi_sync: the backward stops at the detached pooled embeddings (the loss's, the top
  /// MLP's, the interaction's and the bottom MLP's, then DDP's wait for its all-reduces); then
  /// emb_backward: the embeddings' backward exchange, the lookups' backward and the
  /// data-parallel tables' all-reduce.
  void semi_sync_backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom);

  /// The loss's, the top MLP's and the interaction's backward (their parameters join `top`).
  void head_backward(DdpModule& top);

  /// The loss's and the top MLP's backward, the interaction's, the embedding exchange's
  /// overlapped with the bottom MLP's, the lookups', then DDP's wait for its all-reduces.
  void backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom);

  const DlrmConfig& config_;
  const DlrmGraph& built_;
  const std::vector<int64_t>& top_widths_;
  RankOps ops_;
  EmbeddingExchange exchange_;
  RankPlan plan_;
  BatchInputEmitter input_;
  InputDistEmitter input_dist_;
  /// train_pipeline: sparse_dist or semi_sync: the input distribution of the batch the next
  /// step runs (semi_sync: whose lookups this step runs).
  InputDistEmitter::Pending next_batch_input_;
  /// semi_sync: the forward exchange of the batch the next step's forward reads.
  EmbeddingEmitter::PendingExchange next_batch_exchange_;
  /// semi_sync: the copy events of the batches copied and not yet looked up, oldest first.
  std::deque<TaskId> copied_batches_;
  EmbeddingEmitter embeddings_;
  DenseNetworkEmitter dense_;
  InteractionEmitter interaction_;
  OptimizerEmitter optimizer_;
};

}  // namespace upsim::dlrm_emit
