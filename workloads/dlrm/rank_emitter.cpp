#include "workloads/dlrm/rank_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "sim/units.h"
#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

/// torch.optim's class name of a dense optimizer (the profiler's Optimizer.step#<Class>.step).
std::string_view torch_optimizer_class(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdagrad:
      return "Adagrad";
    case OptimizerKind::kAdam:
      return "Adam";
    case OptimizerKind::kAdamW:
      return "AdamW";
    default:
      return "SGD";
  }
}

RankEmitter::RankEmitter(const DlrmConfig& config, const DlrmGraph& built,
                         const std::vector<int64_t>& top_widths, const EmbeddingExchange& exchange,
                         uint32_t index, TaskGraph& graph)
    : config_(config),
      built_(built),
      top_widths_(top_widths),
      ops_(config, built, index, graph),
      exchange_(exchange),
      local_batch_(built.local_batch),
      hybrid_(config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && ops_.distributed()),
      bottom_in_exchange_(hybrid_ && index == 0),
      bottom_batch_(!hybrid_ ? built.local_batch : (index == 0 ? config.global_batch : 0)),
      table_count_(static_cast<int64_t>(config.tables.size())),
      embedding_dim_(config.embedding_dim),
      dtype_(config.dtype) {
  const TablePlacement& placement = built.placement;
  const auto ranks = static_cast<uint32_t>(built.ranks.size());
  pieces_.batch = config.global_batch;
  for (uint32_t p : placement.pieces_of_rank[index]) {
    const TablePiece& piece = placement.pieces[p];
    const EmbeddingTable& table = config.tables[piece.table];
    add_lookup(pieces_, table, table.rows, piece.dim, table.pooling);
  }
  // Each rank looks its row block up for the global batch: a uniformly drawn index falls in
  // it with probability shard rows / rows (pooling / n for equal blocks). An empty block
  // (TorchRec's last blocks can be) is no table of the op.
  row_wise_.batch = config.global_batch;
  for (uint32_t t : placement.row_wise) {
    const EmbeddingTable& table = config.tables[t];
    const int64_t rows = row_wise_shard_rows(table.rows, index, ranks);
    if (rows > 0) {
      add_lookup(row_wise_, table, rows, embedding_dim_,
                 table.pooling * as_double(rows) / as_double(table.rows));
    }
  }
  data_parallel_.batch = built.local_batch;
  for (uint32_t t : placement.data_parallel) {
    const EmbeddingTable& table = config.tables[t];
    add_lookup(data_parallel_, table, table.rows, embedding_dim_, table.pooling);
  }
  // Table-row-wise: the row blocks of this node's tables, looked up for the global batch
  // (TorchRec TwRwSparseFeaturesDist sends every rank's indices of a block to its rank).
  const uint32_t local = placement.ranks_per_node;
  node_ = index / local;
  local_rank_ = index % local;
  table_row_wise_.batch = config.global_batch;
  for (uint32_t t : placement.table_row_wise) {
    if (placement.node_of_table[t] != node_) continue;
    ++node_tables_;
    const EmbeddingTable& table = config.tables[t];
    const int64_t rows = row_wise_shard_rows(table.rows, local_rank_, local);
    if (rows > 0) {
      add_lookup(table_row_wise_, table, rows, embedding_dim_,
                 table.pooling * as_double(rows) / as_double(table.rows));
    }
  }
  table_row_wise_tables_ = static_cast<int64_t>(placement.table_row_wise.size());
  row_wise_tables_ = static_cast<int64_t>(placement.row_wise.size());
  data_parallel_tables_ = static_cast<int64_t>(placement.data_parallel.size());
  for (uint32_t t : placement.data_parallel)
    data_parallel_elements_ += config.tables[t].rows * embedding_dim_;
}

void RankEmitter::iteration(uint32_t it, const IterationGroups& groups) {
  ops_.iteration_mark(it);
  DdpModule top{top_widths_, built_.top_buckets, groups.top, {}, 0};
  DdpModule bottom{config_.bottom_mlp, built_.bottom_buckets, groups.bottom, {}, 0};
  if (config_.mode == DlrmMode::kInference) {
    // A served batch: its inputs copied, the forward, the host waits for the scores.
    load_batch();
    forward(groups);
    ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
    return;
  }
  const bool prefetch = config_.input == InputPipeline::kPrefetch;
  // The prefetcher copies the first batch before the loop, each later one after the step
  // before it (dlrm/data/utils.py prefetcher); the forward waits for its batch's copies.
  if (!prefetch || it == 0) load_batch();
  if (prefetch) {
    HostOp h = ops_.host_op("torch.cuda.Stream.wait_stream");
    h.wait(kComputeStream, h.record(kDataStream));
    h.end();
  }
  forward(groups);
  backward(groups, top, bottom);
  optimizer_step();
  if (prefetch) load_batch();
  ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
}

void RankEmitter::input_copy(std::string_view copy_name, int64_t bytes) {
  if (config_.input == InputPipeline::kBlocking) {
    ops_.blocking_copy(copy_name, TransferKind::kHostToDevice, bytes);
    return;
  }
  HostOp h = ops_.host_op("aten::to");
  h.copy_on(kDataStream, copy_name, TransferKind::kHostToDevice, bytes);
  h.end();
  ops_.host_sync(kDataStream, "aten::to");
}

void RankEmitter::load_batch() {
  if (config_.mode == DlrmMode::kTrain) {
    ops_.body("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  }
  if (bottom_batch_ > 0) {
    input_copy("Memcpy HtoD (dense)", bottom_batch_ * config_.bottom_mlp.front() * kFp32Bytes);
  }
  // One offsets and one indices copy for all lookups of the rank: per looked-up table (or
  // shard) `batch` offsets and round(batch x pooling) indices, and one closing offset.
  int64_t offsets = 0;
  int64_t indices = 0;
  for (const LookupGroup* group : {&pieces_, &row_wise_, &table_row_wise_, &data_parallel_}) {
    for (const EmbeddingTableShape& table : group->tables) {
      offsets += group->batch;
      indices += std::llround(as_double(group->batch) * table.pooling);
    }
  }
  if (offsets > 0) {
    input_copy("Memcpy HtoD (offsets)", (offsets + 1) * config_.index_bytes);
    input_copy("Memcpy HtoD (indices)", indices * config_.index_bytes);
  }
  // The prefetcher's batch carries the targets (the blocking script copies them in the loss).
  if (config_.input == InputPipeline::kPrefetch && config_.mode == DlrmMode::kTrain) {
    input_copy("Memcpy HtoD (targets)", local_batch_ * kFp32Bytes);
  }
}

void RankEmitter::add_lookup(LookupGroup& group, const EmbeddingTable& table, int64_t rows,
                             int64_t dim, double pooling) {
  std::vector<double> reuse = table.reuse_histogram;
  if (reuse.empty() && table.zipf_alpha > 0.0) {
    reuse = zipf_reuse_histogram(rows, as_double(group.batch) * pooling, table.zipf_alpha);
    if (std::all_of(reuse.begin(), reuse.end(), [](double h) { return h == 0.0; })) {
      reuse.clear();
    }
  }
  group.tables.push_back(EmbeddingTableShape{rows, dim, pooling, std::move(reuse)});
  group.values_per_sample += dim;
}

KernelDesc RankEmitter::embedding_kernel(KernelClass cls, const LookupGroup& group,
                                         EmbeddingOptimizer optimizer) const {
  const auto tables = static_cast<int64_t>(group.tables.size());
  int64_t rows = 0;
  double pooling = 0.0;
  for (const EmbeddingTableShape& table : group.tables) {
    rows += table.rows;
    pooling += table.pooling;
  }
  KernelDesc k;
  k.cls = cls;
  k.dtype = config_.embedding_dtype;
  k.embedding =
      EmbeddingShape{group.batch, tables, (rows + tables / 2) / tables,
                     (group.values_per_sample + tables / 2) / tables, pooling / as_double(tables)};
  k.embedding.optimizer = optimizer;
  k.embedding.index_bytes = config_.index_bytes;
  k.embedding.per_table = group.tables;
  return k;
}

void RankEmitter::fused_lookup(const LookupGroup& group) {
  if (group.empty()) return;
  const std::string op = fmt::format("fbgemm::split_embedding_codegen_lookup_{}_function",
                                     fbgemm_optimizer_name(config_.optimizer));
  ops_.single_kernel(op, "split_embedding_codegen_forward_unweighted_kernel", op,
                     embedding_kernel(KernelClass::kEmbeddingForward, group, config_.optimizer));
}

int64_t RankEmitter::sparse_values(const LookupGroup& group) {
  double values = 0.0;
  for (const EmbeddingTableShape& table : group.tables) {
    values += std::round(as_double(group.batch) * table.pooling) * as_double(table.dim);
  }
  return static_cast<int64_t>(values);
}

void RankEmitter::embedding_backward(const LookupGroup& group, DType from) {
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
  ops_.single_kernel(fmt::format("CppNode<SplitLookupFunction_{}_Op>", name),
                     fmt::format("split_embedding_backward_codegen_{}_unweighted_kernel", name),
                     fmt::format("fbgemm::split_embedding_backward_codegen_{}", name),
                     embedding_kernel(KernelClass::kEmbeddingBackward, group, config_.optimizer));
}

void RankEmitter::pack_send_buffer(int64_t elements) {
  ops_.single_kernel(
      "aten::cat", "CatArrayBatchedCopy", "aten::cat",
      pointwise(MemoryOp::kCat, config_.all_to_all_dtype, as_double(elements), 0, 1, 1));
}

void RankEmitter::linear_forward(int64_t batch, int64_t in, int64_t out) {
  if (config_.master_weights) {
    HostOp h = ops_.host_op("aten::linear");
    ops_.cast_parameter(h, out * in);
    ops_.cast_parameter(h, out);
    h.kernel(pytorch::gemm_kernel_name(dtype_, "addmm"), "aten::addmm",
             gemm_kernel(dtype_, 1, batch, out, in));
    h.end();
    return;
  }
  ops_.single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "addmm"), "aten::addmm",
                     gemm_kernel(dtype_, 1, batch, out, in));
}

void RankEmitter::relu_forward(int64_t batch, int64_t width) {
  ops_.single_kernel("aten::relu", "vectorized_elementwise_kernel/relu", "aten::relu",
                     pointwise(MemoryOp::kRelu, dtype_, as_double(batch * width), 1, 1, 1));
}

}  // namespace upsim::dlrm_emit
