// The embedding lookups of one DLRM rank and their exchange (EmbeddingEmitter): FBGEMM's
// table-batched lookups by sharding type; the pooled embeddings' collectives (the all-to-all of
// the table-wise tables, column-wise shards and a hybrid bottom MLP output; the row-wise
// reduce-scatter and all-gather; table-row-wise's reduce-scatter within the node, all-to-all
// across the nodes and all-gather within the node); the conversions between the tables', the
// payload's and the MLPs' dtypes; and the embedding backward (fused optimizer or sparse
// gradient) with the data-parallel tables' dense gradient and its all-reduce.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/dlrm/collective_groups.h"
#include "workloads/dlrm/lookup_group.h"
#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

class EmbeddingEmitter {
 public:
  /// Comm-stream events that mark the end of one direction's exchange, kNoTask where the rank
  /// launched none.
  struct PendingExchange {
    TaskId all_to_all = kNoTask;
    TaskId row_wise = kNoTask;
    TaskId table_row_wise = kNoTask;
  };

  EmbeddingEmitter(RankOps& ops, const RankPlan& plan, const EmbeddingExchange& exchange);

  /// The lookup of the table-wise tables and column-wise shards (global batch).
  void lookup_pieces();

  /// After lookup_pieces (and a hybrid bottom MLP's forward, whose output the all-to-all
  /// carries): the all-to-all of the pieces, the row-wise lookup and its reduce-scatter, the
  /// table-row-wise lookup and its exchange, then the data-parallel lookup.
  PendingExchange send_forward(const ForwardExchangeGroups& groups);

  /// Waits for the forward exchange, then converts the pooled embeddings to the MLPs' dtype:
  /// what arrived in the payload dtype and what this rank looked up itself.
  void receive_forward(const PendingExchange& pending);

  /// The backward exchange of the pooled embeddings' gradients: the all-to-all (the forward's
  /// transpose), the row-wise all-gather, and table-row-wise's all-to-all then all-gather.
  PendingExchange send_backward(const IterationGroups& groups);

  /// All2All_ReqBackward: the compute stream waits for the backward all-to-all.
  void wait_backward_all_to_all(const PendingExchange& pending);

  /// After wait_backward_all_to_all: each lookup's backward once its gradients arrived, then
  /// the data-parallel tables' (data_parallel_backward); returns the end events of their
  /// all-reduce.
  std::vector<TaskId> backward(const PendingExchange& pending, const IterationGroups& groups);

  /// embeddings.two_d, after backward and before the optimizer step of an iteration that syncs
  /// (groups.weight_sync not empty; nothing otherwise): DMPCollection._sync's
  /// "## 2d_weight_sync ##" then "## 2d_optimizer_sync ##", each an all-reduce (ReduceOp AVG, no
  /// kernel of its own) over the rank's replica group on the comm stream after the compute
  /// stream's work, which the compute stream then waits for (ProcessGroupNCCL work.wait()).
  void sync_replicas(const IterationGroups& groups);

 private:
  /// FBGEMM's fused table-batched lookup (SplitTableBatchedEmbeddingBagsCodegen) over `group`.
  void fused_lookup(const LookupGroup& group);

  /// Its backward; the gradients arrive in `from`. Fused (FBGEMM): the backward kernel with the
  /// optimizer update. Sparse: the gradient, cast to the table dtype, is the sparse gradient's
  /// values (at::embedding_sparse_backward: a view); with bags of more than one row,
  /// embedding_bag's sparse backward first copies each bag's gradient to its lookups
  /// (index_select). The optimizer step (optimizer_emitter.h) applies it.
  void embedding_backward(const LookupGroup& group, DType from);

  /// The all-to-all send buffer is packed by a cat (Lin et al., TPDS 2024: the all-to-all parent op
  /// gets a concat kernel on the compute stream); `elements` values of the payload dtype are
  /// read and written.
  void pack_send_buffer(int64_t elements);

  /// The data-parallel tables' backward (FBGEMM DenseTableBatchedEmbeddingBagsCodegen:
  /// SplitLookupFunction_Dense_Op in fbgemm_gpu/codegen/embedding_backward_dense_host.cpp): a
  /// dense gradient of every table's rows x dim, zeroed, then the local batch's bag gradients
  /// scattered into it (priced as a backward with no optimizer state); then DDP all-reduces it
  /// over all ranks as one bucket (one parameter: the op's weights): the 1 / world size
  /// pre-scale and the all-reduce, as a DDP module's buckets are. Returns the all-reduce's end
  /// event (none with one rank).
  std::vector<TaskId> data_parallel_backward(const IterationGroups& groups);

  /// Tables whose pooled embeddings travel in the all-to-all: table-wise and column-wise.
  int64_t exchanged_tables() const;

  /// Pooled vectors per local sample that arrive by a collective (in the payload dtype).
  int64_t received_vectors() const;

  RankOps& ops_;
  const DlrmConfig& config_;
  const RankPlan& plan_;
  EmbeddingExchange exchange_;
  int64_t table_count_;
  int64_t embedding_dim_;
  DType dtype_;
};

}  // namespace upsim::dlrm_emit
