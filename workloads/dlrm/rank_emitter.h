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

  /// After the last of `iterations` iterations. train_pipeline: sparse_dist, whose host runs
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

  /// The lookups and their exchange, overlapped with the bottom MLP; the interaction, the top
  /// MLP and (training) the loss. With `distributed` (train_pipeline: sparse_dist), the batch's
  /// input distribution already in flight is waited for; otherwise an input_dist: all_to_all
  /// run distributes the batch first.
  void forward(const IterationGroups& groups,
               const InputDistEmitter::Pending* distributed = nullptr);

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
  /// train_pipeline: sparse_dist: the input distribution of the batch the next step runs.
  InputDistEmitter::Pending next_batch_input_;
  EmbeddingEmitter embeddings_;
  DenseNetworkEmitter dense_;
  InteractionEmitter interaction_;
  OptimizerEmitter optimizer_;
};

}  // namespace upsim::dlrm_emit
