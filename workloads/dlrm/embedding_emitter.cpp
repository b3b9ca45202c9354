#include "workloads/dlrm/embedding_emitter.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "sim/units.h"

namespace upsim::dlrm_emit {

EmbeddingEmitter::EmbeddingEmitter(RankOps& ops, const RankPlan& plan,
                                   const EmbeddingExchange& exchange)
    : ops_(ops),
      config_(ops.config()),
      plan_(plan),
      exchange_(exchange),
      table_count_(static_cast<int64_t>(ops.config().tables.size())),
      embedding_dim_(ops.config().embedding_dim),
      dtype_(ops.config().dtype) {}

void EmbeddingEmitter::lookup_pieces() {
  fused_lookup(plan_.pieces);
}

EmbeddingEmitter::PendingExchange EmbeddingEmitter::send_forward(
    const ForwardExchangeGroups& groups) {
  PendingExchange pending;
  const int64_t local_values = plan_.pieces.batch * plan_.pieces.values_per_sample;
  if (exchange_.all_to_all) {
    ops_.convert(config_.embedding_dtype, config_.all_to_all_dtype, local_values);
    if (plan_.bottom_in_exchange)
      ops_.convert(dtype_, config_.all_to_all_dtype, plan_.bottom_batch * embedding_dim_);
    const int64_t sent =
        local_values + (plan_.bottom_in_exchange ? plan_.bottom_batch * embedding_dim_ : 0);
    if (sent > 0) pack_send_buffer(sent);
    pending.all_to_all = ops_.launch_collective(groups.all_to_all, "nccl:all_to_all");
  }
  // Row-wise: partial sums of every sample's bags over this rank's rows, reduced and
  // scattered so that each rank gets its local batch's pooled embeddings (TorchRec
  // RwPooledEmbeddingDist).
  // Hybrid tables add their infrequent rows' partial sums (hybrid_embedding.h).
  fused_lookup(plan_.row_wise);
  if (exchange_.row_wise) {
    ops_.convert(config_.embedding_dtype, config_.all_to_all_dtype, plan_.row_wise_sent_values);
    pending.row_wise = ops_.launch_collective(groups.reduce_scatter, "nccl:reduce_scatter");
  }
  // Table-row-wise (TorchRec TwRwPooledEmbeddingDist): the node's partial sums reduced and
  // scattered within the node, so that local rank j holds the samples of every node's local
  // rank j; then an all-to-all among those ranks gives each its own samples.
  fused_lookup(plan_.table_row_wise);
  if (exchange_.table_row_wise) {
    ops_.convert(config_.embedding_dtype, config_.all_to_all_dtype,
                 config_.global_batch * plan_.node_tables * embedding_dim_);
    if (groups.node_reduce_scatter[plan_.node] != 0) {
      pending.table_row_wise =
          ops_.launch_collective(groups.node_reduce_scatter[plan_.node], "nccl:reduce_scatter");
    }
    if (groups.cross_all_to_all[plan_.local_rank] != 0) {
      pending.table_row_wise =
          ops_.launch_collective(groups.cross_all_to_all[plan_.local_rank], "nccl:all_to_all");
    }
  }
  // Data-parallel: the local batch on this rank's replica.
  if (!plan_.data_parallel.empty()) {
    ops_.single_kernel("fbgemm::dense_embedding_codegen_lookup_function",
                       "dense_embedding_codegen_forward_unweighted_kernel",
                       "fbgemm::dense_embedding_codegen_lookup_function",
                       embedding_kernel(config_, KernelClass::kEmbeddingForward,
                                        plan_.data_parallel, EmbeddingOptimizer::kSgd));
  }
  return pending;
}

void EmbeddingEmitter::receive_forward(const PendingExchange& pending) {
  if (exchange_.all_to_all) ops_.wait_for("All2All_Pooled_Wait", pending.all_to_all);
  if (exchange_.row_wise) ops_.wait_for("ReduceScatterBase_Wait", pending.row_wise);
  if (pending.table_row_wise != kNoTask) {
    ops_.wait_for("TwRw_Pooled_Wait", pending.table_row_wise);
  }
  // The pooled embeddings in the MLPs' dtype: what arrived in the payload dtype (hybrid
  // parallel: with the bottom MLP output), and what this rank looked up itself.
  const int64_t received = received_vectors();
  ops_.convert(config_.all_to_all_dtype, dtype_, plan_.local_batch * received * embedding_dim_);
  ops_.convert(
      config_.embedding_dtype, dtype_,
      plan_.local_batch * (table_count_ + (plan_.hybrid ? 1 : 0) - received) * embedding_dim_);
  // Hybrid tables: each sample's frequent rows' pooled sum (looked up here) plus the infrequent
  // rows' (received): one add over them.
  if (plan_.hybrid_tables > 0) {
    ops_.single_kernel(
        "aten::add", "vectorized_elementwise_kernel/add", "aten::add",
        pointwise(MemoryOp::kBinary, dtype_,
                  as_double(plan_.local_batch * plan_.hybrid_tables * embedding_dim_), 1, 2, 1));
  }
}

EmbeddingEmitter::PendingExchange EmbeddingEmitter::send_backward(const IterationGroups& groups) {
  PendingExchange pending;
  if (exchange_.all_to_all) {
    const int64_t returned =
        plan_.local_batch * (exchanged_tables() + (plan_.hybrid ? 1 : 0)) * embedding_dim_;
    ops_.convert(dtype_, config_.all_to_all_dtype, returned);
    pack_send_buffer(returned);
    pending.all_to_all = ops_.launch_collective(groups.a2a_backward, "nccl:all_to_all");
  }
  if (exchange_.row_wise) {
    // The reduce-scatter's backward: an all-gather of every rank's local gradients back to
    // the global batch (TorchRec ReduceScatterBase_Wait.backward).
    ops_.convert(dtype_, config_.all_to_all_dtype, plan_.row_wise_gathered_values);
    pending.row_wise = ops_.launch_collective(groups.all_gather, "nccl:all_gather");
  }
  // Table-row-wise backward: the all-to-all's transpose, then the node's all-gather back to
  // the global batch of the node's blocks.
  if (exchange_.table_row_wise) {
    ops_.convert(dtype_, config_.all_to_all_dtype,
                 plan_.local_batch * plan_.table_row_wise_tables * embedding_dim_);
    if (groups.cross_a2a_backward[plan_.local_rank] != 0) {
      pending.table_row_wise =
          ops_.launch_collective(groups.cross_a2a_backward[plan_.local_rank], "nccl:all_to_all");
    }
    if (groups.node_all_gather[plan_.node] != 0) {
      pending.table_row_wise =
          ops_.launch_collective(groups.node_all_gather[plan_.node], "nccl:all_gather");
    }
  }
  return pending;
}

void EmbeddingEmitter::wait_backward_all_to_all(const PendingExchange& pending) {
  if (exchange_.all_to_all) ops_.wait_for("All2All_ReqBackward", pending.all_to_all);
}

std::vector<TaskId> EmbeddingEmitter::backward(const PendingExchange& pending,
                                               const IterationGroups& groups) {
  // The gradients of this rank's lookups, as the embedding backward reads them.
  embedding_backward(plan_.pieces, exchange_.all_to_all ? config_.all_to_all_dtype : dtype_);
  if (exchange_.row_wise) ops_.wait_for("ReduceScatterBase_ReqBackward", pending.row_wise);
  embedding_backward(plan_.row_wise, exchange_.row_wise ? config_.all_to_all_dtype : dtype_);
  if (pending.table_row_wise != kNoTask) {
    ops_.wait_for("TwRw_ReqBackward", pending.table_row_wise);
  }
  embedding_backward(plan_.table_row_wise,
                     exchange_.table_row_wise ? config_.all_to_all_dtype : dtype_);
  if (plan_.data_parallel.empty()) return {};
  return data_parallel_backward(groups);
}

void EmbeddingEmitter::sync_replicas(const IterationGroups& groups) {
  if (groups.weight_sync.empty()) return;
  const auto sync = [&](CollectiveId group, std::string_view op) {
    if (group == 0) return;
    HostOp h = ops_.host_op(op);
    h.wait(kCommStream, h.record(kComputeStream));
    h.collective(group, "nccl:all_reduce");
    h.wait(kComputeStream, h.record(kCommStream));
    h.end();
  };
  sync(groups.weight_sync[plan_.position], "## 2d_weight_sync ##");
  sync(groups.optimizer_sync[plan_.position], "## 2d_optimizer_sync ##");
}

void EmbeddingEmitter::fused_lookup(const LookupGroup& group) {
  if (group.empty()) return;
  const std::string op = fmt::format("fbgemm::split_embedding_codegen_lookup_{}_function",
                                     fbgemm_optimizer_name(config_.optimizer));
  ops_.single_kernel(
      op, "split_embedding_codegen_forward_unweighted_kernel", op,
      embedding_kernel(config_, KernelClass::kEmbeddingForward, group, config_.optimizer));
}

void EmbeddingEmitter::embedding_backward(const LookupGroup& group, DType from) {
  if (group.empty()) return;
  const int64_t pooled = group.batch * group.values_per_sample;
  ops_.convert(from, config_.embedding_dtype, pooled);
  if (config_.embedding_update == EmbeddingUpdate::kScatterAdd) {
    const int64_t values = sparse_values(group);
    if (values > pooled) {
      ops_.single_kernel("EmbeddingBagBackward0", "index_select_kernel/index_select",
                         "aten::index_select",
                         pointwise(MemoryOp::kIndex, config_.embedding_dtype, as_double(values), 0,
                                   as_double(pooled) / as_double(values), 1));
    }
    return;
  }
  const std::string_view name = fbgemm_optimizer_name(config_.optimizer);
  ops_.single_kernel(
      fmt::format("CppNode<SplitLookupFunction_{}_Op>", name),
      fmt::format("split_embedding_backward_codegen_{}_unweighted_kernel", name),
      fmt::format("fbgemm::split_embedding_backward_codegen_{}", name),
      embedding_kernel(config_, KernelClass::kEmbeddingBackward, group, config_.optimizer));
}

void EmbeddingEmitter::pack_send_buffer(int64_t elements) {
  ops_.single_kernel(
      "aten::cat", "CatArrayBatchedCopy", "aten::cat",
      pointwise(MemoryOp::kCat, config_.all_to_all_dtype, as_double(elements), 0, 1, 1));
}

std::vector<TaskId> EmbeddingEmitter::data_parallel_backward(const IterationGroups& groups) {
  const DType e = config_.embedding_dtype;
  ops_.convert(dtype_, e, plan_.data_parallel.batch * plan_.data_parallel.values_per_sample);
  {
    HostOp h = ops_.host_op("CppNode<SplitLookupFunction_Dense_Op>");
    h.kernel("vectorized_elementwise_kernel/zero_", "aten::zero_",
             pointwise(MemoryOp::kCopy, e, as_double(plan_.data_parallel_elements), 0, 0, 1));
    h.kernel("split_embedding_backward_codegen_dense_unweighted_exact_kernel",
             "fbgemm::split_embedding_backward_codegen_dense",
             embedding_kernel(config_, KernelClass::kEmbeddingBackward, plan_.data_parallel,
                              EmbeddingOptimizer::kSgd));
    h.end();
  }
  if (!exchange_.data_parallel) return {};
  return {ops_.scaled_all_reduce(groups.data_parallel, e, plan_.data_parallel_elements)};
}

int64_t EmbeddingEmitter::exchanged_tables() const {
  return table_count_ - plan_.row_wise_tables - plan_.table_row_wise_tables -
         plan_.data_parallel_tables - plan_.hybrid_tables;
}

int64_t EmbeddingEmitter::received_vectors() const {
  return (exchange_.all_to_all ? exchanged_tables() + (plan_.hybrid ? 1 : 0) : 0) +
         (exchange_.row_wise ? plan_.row_wise_tables + plan_.hybrid_tables : 0) +
         (exchange_.table_row_wise ? plan_.table_row_wise_tables : 0);
}

}  // namespace upsim::dlrm_emit
