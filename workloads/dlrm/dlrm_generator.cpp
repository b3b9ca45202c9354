#include "workloads/dlrm/dlrm_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workloads/dlrm/table_statistics.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/pytorch/kernels.h"

namespace upsim {

namespace {

using pytorch::DdpBucket;
using pytorch::HostOp;
using pytorch::pointwise;

constexpr uint16_t kCpuThread = 0;
constexpr uint16_t kComputeStream = 0;
constexpr uint16_t kCommStream = 1;
/// input: prefetch only: the stream the next batch's copies run on.
constexpr uint16_t kDataStream = 2;
/// Embedding weights, pooled embeddings, all-to-all payloads, dense inputs, labels and the
/// loss are fp32 in the DLRM script.
constexpr int64_t kFp32Bytes = 4;

double as_double(int64_t v) {
  return static_cast<double>(v);
}

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

/// Collective groups of one iteration, in the order every rank's comm stream runs them (a group
/// the run does not have is left at 0 and never launched).
struct IterationGroups {
  CollectiveId a2a_forward = 0;
  CollectiveId reduce_scatter = 0;
  std::vector<CollectiveId> top;
  CollectiveId a2a_backward = 0;
  CollectiveId all_gather = 0;
  std::vector<CollectiveId> bottom;
  CollectiveId data_parallel = 0;
  /// Table-row-wise: per node its reduce-scatter (forward) and all-gather (backward), 0 when
  /// the node holds none of those tables or has one rank; per local rank the all-to-all among
  /// the nodes' ranks of that local rank (forward, backward), 0 with one node.
  std::vector<CollectiveId> node_reduce_scatter;
  std::vector<CollectiveId> node_all_gather;
  std::vector<CollectiveId> cross_a2a_forward;
  std::vector<CollectiveId> cross_a2a_backward;
};

/// Which embedding collectives the run has (the same on every rank).
struct EmbeddingExchange {
  /// The all-to-all of table-wise tables, column-wise shards and a hybrid bottom MLP output.
  bool all_to_all = false;
  /// The reduce-scatter (forward) and all-gather (backward) of the row-wise tables.
  bool row_wise = false;
  /// The all-reduce of the data-parallel tables' gradients.
  bool data_parallel = false;
  /// The table-row-wise tables' exchange (some collective of it on some rank).
  bool table_row_wise = false;
};

/// One table-batched embedding op of a rank: the tables it looks up, for `batch` samples.
struct LookupGroup {
  int64_t batch = 0;
  std::vector<EmbeddingTableShape> tables;
  /// Pooled values per sample: the tables' dims summed.
  int64_t values_per_sample = 0;
  bool empty() const { return tables.empty(); }
};

/// A data-parallel MLP under its own DDP wrapper, during one iteration's backward.
struct DdpModule {
  /// Input width, then the layer widths.
  const std::vector<int64_t>& widths;
  const std::vector<DdpBucket>& buckets;
  const std::vector<CollectiveId>& groups;
  /// Comm-stream events marking the end of this module's all-reduces so far.
  std::vector<TaskId> done_events;
  size_t next_bucket = 0;
};

/// Emits one rank's iterations.
class RankEmitter {
 public:
  RankEmitter(const DlrmConfig& config, const DlrmGraph& built,
              const std::vector<int64_t>& top_widths, const EmbeddingExchange& exchange,
              uint32_t index, TaskGraph& graph)
      : config_(config),
        built_(built),
        top_widths_(top_widths),
        graph_(graph),
        rank_(built.ranks[index]),
        threads_{rank_, kCpuThread, kComputeStream, kCommStream},
        distributed_(built.ranks.size() > 1),
        exchange_(exchange),
        local_batch_(built.local_batch),
        hybrid_(config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && distributed_),
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

  void iteration(uint32_t it, const IterationGroups& groups) {
    graph_.add_iteration_mark(rank_, kCpuThread, it);
    DdpModule top{top_widths_, built_.top_buckets, groups.top, {}, 0};
    DdpModule bottom{config_.bottom_mlp, built_.bottom_buckets, groups.bottom, {}, 0};
    if (config_.mode == DlrmMode::kInference) {
      // A served batch: its inputs copied, the forward, the host waits for the scores.
      load_batch();
      forward(groups);
      graph_.add_host_sync(rank_, kCpuThread, kAllStreams, "torch.cuda.synchronize");
      return;
    }
    const bool prefetch = config_.input == InputPipeline::kPrefetch;
    // The prefetcher copies the first batch before the loop, each later one after the step
    // before it (dlrm/data/utils.py prefetcher); the forward waits for its batch's copies.
    if (!prefetch || it == 0) load_batch();
    if (prefetch) {
      HostOp h(graph_, threads_, "torch.cuda.Stream.wait_stream");
      h.wait(kComputeStream, h.record(kDataStream));
      h.end();
    }
    forward(groups);
    backward(groups, top, bottom);
    optimizer_step();
    if (prefetch) load_batch();
    graph_.add_host_sync(rank_, kCpuThread, kAllStreams, "torch.cuda.synchronize");
  }

 private:
  // ---- ops ---------------------------------------------------------------------------------
  void body(std::string_view op) { pytorch::body(graph_, threads_, op); }

  void single_kernel(std::string_view op, std::string_view kernel_name, std::string_view aten_op,
                     const KernelDesc& desc) {
    HostOp h(graph_, threads_, op);
    h.kernel(kernel_name, aten_op, desc);
    h.end();
  }

  /// A blocking aten::to: the copy, then the host waits for the compute stream.
  void blocking_copy(std::string_view copy_name, TransferKind kind, int64_t bytes) {
    HostOp h(graph_, threads_, "aten::to");
    h.copy(copy_name, kind, bytes);
    h.end();
    graph_.add_host_sync(rank_, kCpuThread, kComputeStream, "aten::to");
  }

  /// A copy of one input tensor: blocking (the host waits for it on the compute stream), or the
  /// prefetcher's on the data stream, whose pageable source holds the host until it is staged
  /// (CUDA's cudaMemcpyAsync from pageable memory returns once the data is staged; the staging
  /// is priced as the copy).
  void input_copy(std::string_view copy_name, int64_t bytes) {
    if (config_.input == InputPipeline::kBlocking) {
      blocking_copy(copy_name, TransferKind::kHostToDevice, bytes);
      return;
    }
    HostOp h(graph_, threads_, "aten::to");
    h.copy_on(kDataStream, copy_name, TransferKind::kHostToDevice, bytes);
    h.end();
    graph_.add_host_sync(rank_, kCpuThread, kDataStream, "aten::to");
  }

  // ---- phases ------------------------------------------------------------------------------
  /// The batch's host-to-device copies; training fetches it from the DataLoader first (a served
  /// batch arrives without one).
  void load_batch() {
    if (config_.mode == DlrmMode::kTrain) {
      body("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
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

  /// Adds to `group` a lookup of `rows` rows and `dim` columns of `table` (the table, a row-wise
  /// block or a column-wise shard) at `pooling` indices per bag. Its reuse histogram: the
  /// table's measured one as is (a block or shard reuses its rows as the table does), else the
  /// Zipf histogram (zipf_reuse_histogram) of these rows for the group's batch x pooling
  /// lookups; a row-wise block is taken as a Zipf law over its own rows with its uniform share
  /// of the lookups (that the hottest rows fall in the first block is not modelled); uniform
  /// accesses have none (the kernel model's own expectation), and neither has a Zipf table
  /// without lookups (pooling 0: no distinct rows, nothing for the law to shape), which is thus
  /// priced as a uniform one.
  static void add_lookup(LookupGroup& group, const EmbeddingTable& table, int64_t rows, int64_t dim,
                         double pooling) {
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

  /// The table-batched op over `group`: per-table shapes, and their means (rows and dim
  /// rounded) for the models that read averages.
  KernelDesc embedding_kernel(KernelClass cls, const LookupGroup& group,
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
    k.embedding = EmbeddingShape{group.batch, tables, (rows + tables / 2) / tables,
                                 (group.values_per_sample + tables / 2) / tables,
                                 pooling / as_double(tables)};
    k.embedding.optimizer = optimizer;
    k.embedding.index_bytes = config_.index_bytes;
    k.embedding.per_table = group.tables;
    return k;
  }

  /// FBGEMM's fused table-batched lookup (SplitTableBatchedEmbeddingBagsCodegen) over `group`.
  void fused_lookup(const LookupGroup& group) {
    if (group.empty()) return;
    const std::string op = fmt::format("fbgemm::split_embedding_codegen_lookup_{}_function",
                                       fbgemm_optimizer_name(config_.optimizer));
    single_kernel(op, "split_embedding_codegen_forward_unweighted_kernel", op,
                  embedding_kernel(KernelClass::kEmbeddingForward, group, config_.optimizer));
  }

  /// Lookups of `group` times their dims: the values of its sparse gradient (one row a lookup).
  static int64_t sparse_values(const LookupGroup& group) {
    double values = 0.0;
    for (const EmbeddingTableShape& table : group.tables) {
      values += std::round(as_double(group.batch) * table.pooling) * as_double(table.dim);
    }
    return static_cast<int64_t>(values);
  }

  /// Its backward; the gradients arrive in `from`. Fused (FBGEMM): the backward kernel with the
  /// optimizer update. Sparse: the gradient, cast to the table dtype, is the sparse gradient's
  /// values (at::embedding_sparse_backward: a view); with bags of more than one row,
  /// embedding_bag's sparse backward first copies each bag's gradient to its lookups
  /// (index_select). optimizer_step applies it.
  void embedding_backward(const LookupGroup& group, DType from) {
    if (group.empty()) return;
    const int64_t pooled = group.batch * group.values_per_sample;
    convert(from, config_.embedding_dtype, pooled);
    if (config_.embedding_update == EmbeddingUpdate::kScatterAdd) {
      const int64_t values = sparse_values(group);
      if (values > pooled) {
        single_kernel("EmbeddingBagBackward0", "index_select_kernel/index_select",
                      "aten::index_select",
                      pointwise(MemoryOp::kIndex, config_.embedding_dtype, as_double(values), 0,
                                as_double(pooled) / as_double(values), 1));
      }
      return;
    }
    const std::string_view name = fbgemm_optimizer_name(config_.optimizer);
    single_kernel(fmt::format("CppNode<SplitLookupFunction_{}_Op>", name),
                  fmt::format("split_embedding_backward_codegen_{}_unweighted_kernel", name),
                  fmt::format("fbgemm::split_embedding_backward_codegen_{}", name),
                  embedding_kernel(KernelClass::kEmbeddingBackward, group, config_.optimizer));
  }

  /// The all-to-all send buffer is packed by a cat (Lin et al., TPDS 2024: the all-to-all parent op
  /// gets a concat kernel on the compute stream); `elements` values of the payload dtype are
  /// read and written.
  void pack_send_buffer(int64_t elements) {
    single_kernel(
        "aten::cat", "CatArrayBatchedCopy", "aten::cat",
        pointwise(MemoryOp::kCat, config_.all_to_all_dtype, as_double(elements), 0, 1, 1));
  }

  /// A dtype conversion of `elements` values (aten::to: one read of `from`, one write of `to`),
  /// only where the two store differently (tf32 stores fp32).
  void convert(DType from, DType to, int64_t elements) {
    if (elements == 0 || storage_dtype(from) == storage_dtype(to)) return;
    KernelDesc cast = pointwise(MemoryOp::kCopy, to, as_double(elements), 0, 0, 1);
    cast.bytes_read = as_double(elements * dtype_bytes(from));
    single_kernel("aten::to", "vectorized_elementwise_kernel/copy_", "aten::copy_", cast);
  }

  static DType storage_dtype(DType dtype) { return dtype == DType::kTf32 ? DType::kFp32 : dtype; }

  /// Launches a collective (`op` names the host op and the collective) after the compute
  /// stream's work so far; returns the comm-stream event that marks its end.
  TaskId launch_collective(CollectiveId group, std::string_view op) {
    HostOp h(graph_, threads_, op);
    const TaskId ready = h.record(kComputeStream);
    h.wait(kCommStream, ready);
    h.collective(group, op);
    const TaskId done = h.record(kCommStream);
    h.end();
    return done;
  }

  void wait_for(std::string_view op, TaskId comm_event) {
    HostOp h(graph_, threads_, op);
    h.wait(kComputeStream, comm_event);
    h.end();
  }

  /// torch.autocast: an fp32 parameter of `elements` is cast to the compute dtype where an op
  /// uses it (aten::_to_copy; one read of 4 B, one write of 2 B an element).
  void cast_parameter(HostOp& h, int64_t elements) {
    if (!config_.master_weights) return;
    KernelDesc cast = pointwise(MemoryOp::kCopy, dtype_, as_double(elements), 0, 0, 1);
    cast.bytes_read = as_double(elements * 4);
    h.kernel("vectorized_elementwise_kernel/copy_", "aten::_to_copy", cast);
  }

  /// AccumulateGrad of a 16-bit gradient into an fp32 parameter's .grad (a cast kernel); with
  /// the parameters in the compute dtype it steals the gradient and launches nothing.
  void accumulate_grad(int64_t elements) {
    if (!config_.master_weights) {
      body("AccumulateGrad");
      return;
    }
    KernelDesc cast = pointwise(MemoryOp::kCopy, DType::kFp32, as_double(elements), 0, 0, 1);
    cast.bytes_read = as_double(elements * dtype_bytes(dtype_));
    single_kernel("AccumulateGrad", "vectorized_elementwise_kernel/copy_", "aten::_to_copy", cast);
  }

  void linear_forward(int64_t batch, int64_t in, int64_t out) {
    if (config_.master_weights) {
      HostOp h(graph_, threads_, "aten::linear");
      cast_parameter(h, out * in);
      cast_parameter(h, out);
      h.kernel(pytorch::gemm_kernel_name(dtype_, "addmm"), "aten::addmm",
               gemm_kernel(dtype_, 1, batch, out, in));
      h.end();
      return;
    }
    single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "addmm"), "aten::addmm",
                  gemm_kernel(dtype_, 1, batch, out, in));
  }

  /// Lin et al., TPDS 2024: relu F = 1, A = 2; sigmoid F = 4, A = 2.
  void relu_forward(int64_t batch, int64_t width) {
    single_kernel("aten::relu", "vectorized_elementwise_kernel/relu", "aten::relu",
                  pointwise(MemoryOp::kRelu, dtype_, as_double(batch * width), 1, 1, 1));
  }

  void forward(const IterationGroups& groups) {
    TaskId a2a_done = kNoTask;
    TaskId reduce_scatter_done = kNoTask;
    fused_lookup(pieces_);
    const int64_t local_values = pieces_.batch * pieces_.values_per_sample;
    const auto& bot = config_.bottom_mlp;
    if (bottom_in_exchange_) {
      // Hybrid parallel: this rank's bottom MLP runs on the global batch before the exchange,
      // whose payload carries its output to every rank.
      mlp_forward(bottom_batch_, bot, bot.size() - 1);
    }
    if (exchange_.all_to_all) {
      convert(config_.embedding_dtype, config_.all_to_all_dtype, local_values);
      if (bottom_in_exchange_)
        convert(dtype_, config_.all_to_all_dtype, bottom_batch_ * embedding_dim_);
      const int64_t sent =
          local_values + (bottom_in_exchange_ ? bottom_batch_ * embedding_dim_ : 0);
      if (sent > 0) pack_send_buffer(sent);
      a2a_done = launch_collective(groups.a2a_forward, "nccl:all_to_all");
    }
    // Row-wise: partial sums of every sample's bags over this rank's rows, reduced and
    // scattered so that each rank gets its local batch's pooled embeddings (TorchRec
    // RwPooledEmbeddingDist).
    fused_lookup(row_wise_);
    if (exchange_.row_wise) {
      convert(config_.embedding_dtype, config_.all_to_all_dtype,
              config_.global_batch * row_wise_tables_ * embedding_dim_);
      reduce_scatter_done = launch_collective(groups.reduce_scatter, "nccl:reduce_scatter");
    }
    // Table-row-wise (TorchRec TwRwPooledEmbeddingDist): the node's partial sums reduced and
    // scattered within the node, so that local rank j holds the samples of every node's local
    // rank j; then an all-to-all among those ranks gives each its own samples.
    fused_lookup(table_row_wise_);
    TaskId table_row_wise_done = kNoTask;
    if (exchange_.table_row_wise) {
      convert(config_.embedding_dtype, config_.all_to_all_dtype,
              config_.global_batch * node_tables_ * embedding_dim_);
      if (groups.node_reduce_scatter[node_] != 0) {
        table_row_wise_done =
            launch_collective(groups.node_reduce_scatter[node_], "nccl:reduce_scatter");
      }
      if (groups.cross_a2a_forward[local_rank_] != 0) {
        table_row_wise_done =
            launch_collective(groups.cross_a2a_forward[local_rank_], "nccl:all_to_all");
      }
    }  // Data-parallel: the local batch on this rank's replica.
    if (!data_parallel_.empty()) {
      single_kernel("fbgemm::dense_embedding_codegen_lookup_function",
                    "dense_embedding_codegen_forward_unweighted_kernel",
                    "fbgemm::dense_embedding_codegen_lookup_function",
                    embedding_kernel(KernelClass::kEmbeddingForward, data_parallel_,
                                     EmbeddingOptimizer::kSgd));
    }

    if (!bottom_in_exchange_ && bottom_batch_ > 0) {
      mlp_forward(bottom_batch_, bot, bot.size() - 1);
    }
    if (exchange_.all_to_all) wait_for("All2All_Pooled_Wait", a2a_done);
    if (exchange_.row_wise) wait_for("ReduceScatterBase_Wait", reduce_scatter_done);
    if (table_row_wise_done != kNoTask) wait_for("TwRw_Pooled_Wait", table_row_wise_done);
    // The pooled embeddings in the MLPs' dtype: what arrived in the payload dtype (hybrid
    // parallel: with the bottom MLP output), and what this rank looked up itself.
    const int64_t received = received_vectors();
    convert(config_.all_to_all_dtype, dtype_, local_batch_ * received * embedding_dim_);
    convert(config_.embedding_dtype, dtype_,
            local_batch_ * (table_count_ + (hybrid_ ? 1 : 0) - received) * embedding_dim_);

    if (config_.interaction == DlrmInteraction::kDot) {
      dot_interaction_forward();
    } else {
      cross_network_forward();
    }

    // The top MLP: its ReLU layers, then the last layer and the sigmoid.
    const size_t top_layers = top_widths_.size() - 1;
    mlp_forward(local_batch_, top_widths_, top_layers - 1);
    linear_forward(local_batch_, top_widths_[top_layers - 1], top_widths_[top_layers]);
    single_kernel("aten::sigmoid", "vectorized_elementwise_kernel/sigmoid", "aten::sigmoid",
                  pointwise(MemoryOp::kSigmoid, dtype_,
                            as_double(local_batch_ * top_widths_.back()), 4, 1, 1));

    if (config_.mode == DlrmMode::kInference) return;
    // loss_fn_wrap copies the targets to the device, then BCE (seed 2.6: F = 7, A = 3).
    if (config_.input == InputPipeline::kBlocking) {
      blocking_copy("Memcpy HtoD (targets)", TransferKind::kHostToDevice,
                    local_batch_ * kFp32Bytes);
    }
    single_kernel("aten::binary_cross_entropy", "binary_cross_entropy_kernel",
                  "aten::binary_cross_entropy",
                  pointwise(MemoryOp::kBinary, dtype_, as_double(local_batch_), 7, 2, 1));
    // L = E.detach().cpu().numpy(): a 4-byte device-to-host copy the host waits for.
    if (config_.loss_to_host) {
      blocking_copy("Memcpy DtoH (loss)", TransferKind::kDeviceToHost, kFp32Bytes);
    }
  }

  // Dot interaction (dlrm_s_pytorch.py interact_features): stack dense output and T pooled
  // embeddings, batched Gram matrix, gather its strictly lower triangle, concat with dense.
  void dot_interaction_forward() {
    const int64_t f = table_count_ + 1;
    const int64_t pairs = config_.interaction_pairs();
    single_kernel(
        "aten::cat", "CatArrayBatchedCopy", "aten::cat",
        pointwise(MemoryOp::kCat, dtype_, as_double(local_batch_ * f * embedding_dim_), 0, 1, 1));
    if (config_.interaction_kernel == InteractionKernel::kFused) {
      // DeepLearningExamples' cuda_dot (dlrm/cuda_src/dot_based_interact*): one kernel reads
      // the f x D features and the bottom MLP output of each sample and writes the D + pairs
      // outputs; the lower triangle of the Gram matrix takes f f D multiply-adds.
      KernelDesc dot;
      dot.cls = KernelClass::kMemoryBound;
      dot.dtype = dtype_;
      const double e = as_double(dtype_bytes(dtype_));
      dot.bytes_read = as_double(local_batch_ * (f + 1) * embedding_dim_) * e;
      dot.bytes_written = as_double(local_batch_ * (embedding_dim_ + pairs)) * e;
      dot.flops = as_double(local_batch_ * f * f * embedding_dim_);
      single_kernel("DotBasedInteract", "dotBasedInteractFwdKernel", "dot_based_interact::fwd",
                    dot);
      return;
    }
    body("aten::view");
    body("aten::transpose");
    single_kernel("aten::bmm", pytorch::gemm_kernel_name(dtype_, "bmm"), "aten::bmm",
                  gemm_kernel(dtype_, local_batch_, f, f, embedding_dim_));
    KernelDesc gather =
        pointwise(MemoryOp::kIndex, dtype_, as_double(local_batch_ * pairs), 0, 1, 1);
    gather.bytes_read += as_double(2 * pairs * 8);  // li, lj: int64 index tensors
    single_kernel("aten::index", "index_elementwise_kernel", "aten::index", gather);
    single_kernel("aten::cat", "CatArrayBatchedCopy", "aten::cat",
                  pointwise(MemoryOp::kCat, dtype_,
                            as_double(local_batch_ * (embedding_dim_ + pairs)), 0, 1, 1));
  }

  void dot_interaction_backward() {
    const int64_t f = table_count_ + 1;
    const int64_t pairs = config_.interaction_pairs();
    if (config_.interaction_kernel == InteractionKernel::kFused) {
      // cuda_dot's backward: one kernel reads the output gradient and the features and writes
      // the features' gradient (the bottom MLP output's included); twice the forward's work.
      KernelDesc dot;
      dot.cls = KernelClass::kMemoryBound;
      dot.dtype = dtype_;
      const double e = as_double(dtype_bytes(dtype_));
      dot.bytes_read =
          as_double(local_batch_ * (embedding_dim_ + pairs) + local_batch_ * f * embedding_dim_) *
          e;
      dot.bytes_written = as_double(local_batch_ * (f + 1) * embedding_dim_) * e;
      dot.flops = as_double(2 * local_batch_ * f * f * embedding_dim_);
      single_kernel("DotBasedInteractBackward", "dotBasedInteractBwdKernel",
                    "dot_based_interact::bwd", dot);
      body("CatBackward0");
      return;
    }
    body("CatBackward0");
    {
      HostOp h(graph_, threads_, "IndexBackward0");
      h.kernel("vectorized_elementwise_kernel/zero_", "aten::zero_",
               pointwise(MemoryOp::kCopy, dtype_, as_double(local_batch_ * f * f), 0, 0, 1));
      KernelDesc put =
          pointwise(MemoryOp::kIndex, dtype_, as_double(local_batch_ * pairs), 1, 2, 1);
      put.bytes_read += as_double(2 * pairs * 8);
      h.kernel("indexing_backward_kernel", "aten::index_put_", put);
      h.end();
    }
    {
      // Z = S S^T with S = b x f x D: grad S = grad_Z S (m = f, n = D, k = f) and
      // grad S^T = S^T grad_Z (m = D, n = f, k = f) (Lin et al., TPDS 2024 BmmBackward).
      HostOp h(graph_, threads_, "BmmBackward0");
      h.kernel(pytorch::gemm_kernel_name(dtype_, "bmm"), "aten::bmm",
               gemm_kernel(dtype_, local_batch_, f, embedding_dim_, f));
      h.kernel(pytorch::gemm_kernel_name(dtype_, "bmm"), "aten::bmm",
               gemm_kernel(dtype_, local_batch_, embedding_dim_, f, f));
      h.end();
    }
    body("TransposeBackward0");
    add_gradients(local_batch_ * f * embedding_dim_);
    body("ViewBackward0");
    body("CatBackward0");
    add_gradients(local_batch_ * embedding_dim_);
  }

  /// DCNv2's low-rank cross network (TorchRec LowRankCrossNet, as in MLPerf DLRMv2): x0 = the
  /// bottom MLP output and the T pooled embeddings concatenated (b x N, N = (T + 1) D); per
  /// layer x_{l+1} = x0 * (W_l (V_l x_l) + bias_l) + x_l with V_l: N -> r and W_l: r -> N, as
  /// two GEMMs and three elementwise kernels (add bias, mul, add) in eager PyTorch.
  void cross_network_forward() {
    const int64_t n = config_.cross_width();
    const int64_t r = config_.cross_rank;
    single_kernel("aten::cat", "CatArrayBatchedCopy", "aten::cat",
                  pointwise(MemoryOp::kCat, dtype_, as_double(local_batch_ * n), 0, 1, 1));
    for (int64_t l = 0; l < config_.cross_layers; ++l) {
      if (config_.master_weights) {
        HostOp h(graph_, threads_, "aten::to");
        cast_parameter(h, r * n);  // V_l
        cast_parameter(h, n * r);  // W_l
        cast_parameter(h, n);      // bias_l
        h.end();
      }
      single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                    gemm_kernel(dtype_, 1, local_batch_, r, n));
      single_kernel("aten::linear", pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                    gemm_kernel(dtype_, 1, local_batch_, n, r));
      for (const std::string_view op : {"add", "mul", "add"}) {
        const std::string aten = fmt::format("aten::{}", op);
        single_kernel(aten, fmt::format("vectorized_elementwise_kernel/{}", op), aten,
                      pointwise(MemoryOp::kBinary, dtype_, as_double(local_batch_ * n), 1, 2, 1));
      }
    }
  }

  /// The cross network's backward, last layer first; `ready_params` of the top DDP module
  /// (the top MLP's) have their gradients before it. Per layer: AddBackward0 passes the
  /// gradient to x_l and to the product; MulBackward0 = two muls (the gradient of the bracket,
  /// and of x0, which an add accumulates); the bias gradient is a batch sum; each GEMM's
  /// backward computes the input and the weight gradient; an add joins x_l's two gradients.
  void cross_network_backward(DdpModule& top, size_t ready_params) {
    const int64_t n = config_.cross_width();
    const int64_t r = config_.cross_rank;
    const double elements = as_double(local_batch_ * n);
    for (int64_t l = config_.cross_layers; l-- > 0;) {
      body("AddBackward0");
      {
        HostOp h(graph_, threads_, "MulBackward0");
        for (int k = 0; k < 2; ++k) {
          h.kernel("vectorized_elementwise_kernel/mul", "aten::mul",
                   pointwise(MemoryOp::kBinary, dtype_, elements, 1, 2, 1));
        }
        h.end();
      }
      add_gradients(local_batch_ * n);  // x0's gradient accumulates over the layers
      {
        HostOp h(graph_, threads_, "AddBackward0");
        KernelDesc sum = pointwise(MemoryOp::kSum, dtype_, elements, 1, 1, 0);
        sum.bytes_written = as_double(n * dtype_bytes(dtype_));
        h.kernel("reduce_kernel/sum", "aten::sum", sum);
        h.end();
      }
      for (const auto& [out, in] : {std::pair{n, r}, std::pair{r, n}}) {
        HostOp h(graph_, threads_, "MmBackward0");
        h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                 gemm_kernel(dtype_, 1, local_batch_, in, out));
        h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                 gemm_kernel(dtype_, 1, out, in, local_batch_));
        h.end();
      }
      add_gradients(local_batch_ * n);  // x_l: the residual's gradient plus V's
      accumulate_grad(n);
      accumulate_grad(n * r);
      accumulate_grad(r * n);
      ready_params += 3;  // bias, W, V
      if (distributed_) reduce_ready_buckets(top, ready_params);
    }
    body("CatBackward0");
  }

  /// AddmmBackward0 of a layer in -> out (Lin et al., TPDS 2024): grad input = grad_out W
  /// (m = b, n = in, k = out) when the input needs a gradient, grad weight = grad_out^T x
  /// (m = out, n = in, k = b), bias gradient = column sum of grad_out (seed 2.6: F = 1, A = 1).
  /// The first `layers` layers of an MLP of `widths` (input, then layer widths), each followed
  /// by a ReLU, for `batch` samples: aten's addmm and relu per layer, or apex.mlp.MLP
  /// (mlp_kernels apex_fused: DeepLearningExamples' CppMlp, dlrm/nn/mlps.py; apex
  /// csrc/mlp_cuda.cu): one host op for the whole MLP, per layer a GEMM without bias and one
  /// kernel that adds the bias and applies the ReLU.
  void mlp_forward(int64_t batch, const std::vector<int64_t>& widths, size_t layers) {
    if (config_.mlp_kernels == MlpKernels::kAten) {
      for (size_t l = 0; l < layers; ++l) {
        linear_forward(batch, widths[l], widths[l + 1]);
        relu_forward(batch, widths[l + 1]);
      }
      return;
    }
    if (layers == 0) return;
    HostOp h(graph_, threads_, "MlpFunction");
    for (size_t l = 0; l < layers; ++l) {
      const int64_t in = widths[l];
      const int64_t out = widths[l + 1];
      cast_parameter(h, out * in);
      cast_parameter(h, out);
      h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "apex::mlp_forward",
               gemm_kernel(dtype_, 1, batch, out, in));
      h.kernel("biasAddRelu_fprop", "apex::mlp_forward",
               pointwise(MemoryOp::kRelu, dtype_, as_double(batch * out), 2, 1, 1));
    }
    h.end();
  }

  /// The backward of mlp_forward's `layers` layers of `module`, last first; `input_grad`: the
  /// first layer computes its input's gradient too. `ready_before` parameters of the module had
  /// their gradients before (DDP buckets fill in that order). apex's backward (mlp_bp): per
  /// layer one kernel for the ReLU's gradient and the bias gradient (biasAddRelu_bprop), the
  /// input-gradient GEMM and the weight-gradient GEMM, all in one host op; the gradients are
  /// then accumulated.
  void mlp_backward(int64_t batch, DdpModule& module, size_t layers, bool input_grad,
                    size_t ready_before) {
    if (config_.mlp_kernels == MlpKernels::kAten) {
      for (size_t l = layers; l-- > 0;) {
        relu_backward(batch, module.widths[l + 1]);
        linear_backward(batch, module, l, l > 0 || input_grad);
        if (distributed_) reduce_ready_buckets(module, ready_before + 2 * (layers - l));
      }
      return;
    }
    if (layers == 0) return;
    {
      HostOp h(graph_, threads_, "MlpFunctionBackward");
      for (size_t l = layers; l-- > 0;) {
        const int64_t in = module.widths[l];
        const int64_t out = module.widths[l + 1];
        h.kernel("biasAddRelu_bprop", "apex::mlp_backward",
                 pointwise(MemoryOp::kRelu, dtype_, as_double(batch * out), 2, 2, 1));
        if (l > 0 || input_grad) {
          h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "apex::mlp_backward",
                   gemm_kernel(dtype_, 1, batch, in, out));
        }
        h.kernel(pytorch::gemm_kernel_name(dtype_, "gemm"), "apex::mlp_backward",
                 gemm_kernel(dtype_, 1, out, in, batch));
      }
      h.end();
    }
    for (size_t l = layers; l-- > 0;) {
      accumulate_grad(module.widths[l + 1] * module.widths[l]);
      accumulate_grad(module.widths[l + 1]);
    }
    if (distributed_) reduce_ready_buckets(module, ready_before + 2 * layers);
  }

  void linear_backward(int64_t batch, const DdpModule& module, size_t layer, bool input_grad) {
    const int64_t in = module.widths[layer];
    const int64_t out = module.widths[layer + 1];
    {
      HostOp h(graph_, threads_, "AddmmBackward0");
      if (input_grad)
        h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
                 gemm_kernel(dtype_, 1, batch, in, out));
      h.kernel(pytorch::gemm_kernel_name(dtype_, "mm"), "aten::mm",
               gemm_kernel(dtype_, 1, out, in, batch));
      KernelDesc sum = pointwise(MemoryOp::kSum, dtype_, as_double(batch * out), 1, 1, 0);
      sum.bytes_written = as_double(out * dtype_bytes(dtype_));
      h.kernel("reduce_kernel/sum", "aten::sum", sum);
      h.end();
    }
    body("TBackward0");
    accumulate_grad(out * in);
    accumulate_grad(out);
  }

  /// All-reduces every bucket of `module` whose gradients are all ready once `ready_params`
  /// parameters (in ready order) have their gradients.
  void reduce_ready_buckets(DdpModule& module, size_t ready_params) {
    const auto& buckets = module.buckets;
    while (module.next_bucket < buckets.size() &&
           buckets[module.next_bucket].params.back() < ready_params) {
      const DdpBucket& bucket = buckets[module.next_bucket];
      HostOp h(graph_, threads_, "nccl:all_reduce");
      // Gradient pre-scale by 1 / world size (Lin et al., TPDS 2024: mul, F = 1, A = 3).
      h.kernel("vectorized_elementwise_kernel/mul", "aten::mul",
               pointwise(MemoryOp::kBinary, config_.param_dtype(),
                         as_double(bucket.bytes / dtype_bytes(config_.param_dtype())), 1, 2, 1));
      const TaskId ready = h.record(kComputeStream);
      h.wait(kCommStream, ready);
      h.collective(module.groups[module.next_bucket], "nccl:all_reduce");
      module.done_events.push_back(h.record(kCommStream));
      h.end();
      ++module.next_bucket;
    }
  }

  void relu_backward(int64_t batch, int64_t width) {
    single_kernel("ReluBackward0", "vectorized_elementwise_kernel/threshold_backward",
                  "aten::threshold_backward",
                  pointwise(MemoryOp::kRelu, dtype_, as_double(batch * width), 1, 1, 1));
  }

  void add_gradients(int64_t elements) {
    single_kernel("aten::add", "vectorized_elementwise_kernel/add", "aten::add",
                  pointwise(MemoryOp::kBinary, dtype_, as_double(elements), 1, 2, 1));
  }

  void backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom) {
    body(fmt::format("Optimizer.zero_grad#{0}.zero_grad",
                     torch_optimizer_class(config_.dense_optimizer)));
    if (config_.grad_scaler) {
      // scaler.scale(loss): the loss times the scale.
      single_kernel("aten::mul", "vectorized_elementwise_kernel/mul", "aten::mul",
                    pointwise(MemoryOp::kBinary, DType::kFp32, 1, 1, 2, 1));
    }
    single_kernel("aten::ones_like", "vectorized_elementwise_kernel/fill_", "aten::ones_like",
                  pointwise(MemoryOp::kCopy, DType::kFp32, 1, 0, 0, 1));
    single_kernel("BinaryCrossEntropyBackward0",
                  "vectorized_elementwise_kernel/binary_cross_entropy_backward",
                  "aten::binary_cross_entropy_backward",
                  pointwise(MemoryOp::kBinary, dtype_, as_double(local_batch_), 4, 2, 1));
    const size_t top_layers = top_widths_.size() - 1;
    single_kernel("SigmoidBackward0", "vectorized_elementwise_kernel/sigmoid_backward",
                  "aten::sigmoid_backward",
                  pointwise(MemoryOp::kSigmoid, dtype_,
                            as_double(local_batch_ * top_widths_.back()), 2, 1, 1));
    // The top MLP's input (the interaction output) needs its gradient, so every layer computes
    // grad input: the last layer, then the ReLU layers.
    linear_backward(local_batch_, top, top_layers - 1, true);
    if (distributed_) reduce_ready_buckets(top, 2);
    mlp_backward(local_batch_, top, top_layers - 1, true, 2);

    if (config_.interaction == DlrmInteraction::kDot) {
      dot_interaction_backward();
    } else {
      cross_network_backward(top, 2 * top_layers);
    }

    TaskId a2a_done = kNoTask;
    TaskId all_gather_done = kNoTask;
    if (exchange_.all_to_all) {
      const int64_t returned =
          local_batch_ * (exchanged_tables() + (hybrid_ ? 1 : 0)) * embedding_dim_;
      convert(dtype_, config_.all_to_all_dtype, returned);
      pack_send_buffer(returned);
      a2a_done = launch_collective(groups.a2a_backward, "nccl:all_to_all");
    }
    if (exchange_.row_wise) {
      // The reduce-scatter's backward: an all-gather of every rank's local gradients back to
      // the global batch (TorchRec ReduceScatterBase_Wait.backward).
      convert(dtype_, config_.all_to_all_dtype, local_batch_ * row_wise_tables_ * embedding_dim_);
      all_gather_done = launch_collective(groups.all_gather, "nccl:all_gather");
    }
    // Table-row-wise backward: the all-to-all's transpose, then the node's all-gather back to
    // the global batch of the node's blocks.
    TaskId table_row_wise_done = kNoTask;
    if (exchange_.table_row_wise) {
      convert(dtype_, config_.all_to_all_dtype,
              local_batch_ * table_row_wise_tables_ * embedding_dim_);
      if (groups.cross_a2a_backward[local_rank_] != 0) {
        table_row_wise_done =
            launch_collective(groups.cross_a2a_backward[local_rank_], "nccl:all_to_all");
      }
      if (groups.node_all_gather[node_] != 0) {
        table_row_wise_done = launch_collective(groups.node_all_gather[node_], "nccl:all_gather");
      }
    }

    // The dense input needs no gradient: the first bottom layer computes no grad input.
    const auto& bot = config_.bottom_mlp;
    const size_t layers = bot.size() - 1;
    const auto bottom_backward = [&] { mlp_backward(bottom_batch_, bottom, layers, false, 0); };
    if (!hybrid_) bottom_backward();

    if (exchange_.all_to_all) wait_for("All2All_ReqBackward", a2a_done);
    if (bottom_in_exchange_) {
      // Hybrid parallel: the bottom output's gradients of every rank's samples arrived.
      convert(config_.all_to_all_dtype, dtype_, bottom_batch_ * embedding_dim_);
      bottom_backward();
    }
    // The gradients of this rank's lookups, as the embedding backward reads them.
    embedding_backward(pieces_, exchange_.all_to_all ? config_.all_to_all_dtype : dtype_);
    if (exchange_.row_wise) wait_for("ReduceScatterBase_ReqBackward", all_gather_done);
    embedding_backward(row_wise_, exchange_.row_wise ? config_.all_to_all_dtype : dtype_);
    if (table_row_wise_done != kNoTask) wait_for("TwRw_ReqBackward", table_row_wise_done);
    embedding_backward(table_row_wise_,
                       exchange_.table_row_wise ? config_.all_to_all_dtype : dtype_);
    std::vector<TaskId> data_parallel_done;
    if (!data_parallel_.empty()) data_parallel_done = data_parallel_backward(groups);
    if (distributed_) {
      // Each DDP module's reducer waits for its buckets' all-reduces at the end of backward
      // (the data-parallel tables: for their gradient's).
      for (const std::vector<TaskId>* done_events :
           {&top.done_events, &bottom.done_events, &data_parallel_done}) {
        if (done_events == &data_parallel_done && !exchange_.data_parallel) continue;
        HostOp h(graph_, threads_, "ddp.reducer::finalize_backward");
        for (TaskId done : *done_events)
          h.wait(kComputeStream, done);
        h.end();
      }
    }
  }

  /// The data-parallel tables' backward (FBGEMM DenseTableBatchedEmbeddingBagsCodegen:
  /// SplitLookupFunction_Dense_Op in fbgemm_gpu/codegen/embedding_backward_dense_host.cpp): a
  /// dense gradient of every table's rows x dim, zeroed, then the local batch's bag gradients
  /// scattered into it (priced as a backward with no optimizer state); then DDP all-reduces it
  /// over all ranks as one bucket (one parameter: the op's weights): the 1 / world size
  /// pre-scale and the all-reduce, as reduce_ready_buckets does. Returns the all-reduce's end
  /// event (none with one rank).
  std::vector<TaskId> data_parallel_backward(const IterationGroups& groups) {
    const DType e = config_.embedding_dtype;
    convert(dtype_, e, data_parallel_.batch * data_parallel_.values_per_sample);
    {
      HostOp h(graph_, threads_, "CppNode<SplitLookupFunction_Dense_Op>");
      h.kernel("vectorized_elementwise_kernel/zero_", "aten::zero_",
               pointwise(MemoryOp::kCopy, e, as_double(data_parallel_elements_), 0, 0, 1));
      h.kernel("split_embedding_backward_codegen_dense_unweighted_exact_kernel",
               "fbgemm::split_embedding_backward_codegen_dense",
               embedding_kernel(KernelClass::kEmbeddingBackward, data_parallel_,
                                EmbeddingOptimizer::kSgd));
      h.end();
    }
    if (!exchange_.data_parallel) return {};
    HostOp h(graph_, threads_, "nccl:all_reduce");
    h.kernel("vectorized_elementwise_kernel/mul", "aten::mul",
             pointwise(MemoryOp::kBinary, e, as_double(data_parallel_elements_), 1, 2, 1));
    const TaskId ready = h.record(kComputeStream);
    h.wait(kCommStream, ready);
    h.collective(groups.data_parallel, "nccl:all_reduce");
    std::vector<TaskId> done{h.record(kCommStream)};
    h.end();
    return done;
  }

  /// Tables whose pooled embeddings travel in the all-to-all: table-wise and column-wise.
  int64_t exchanged_tables() const {
    return table_count_ - row_wise_tables_ - table_row_wise_tables_ - data_parallel_tables_;
  }

  /// Pooled vectors per local sample that arrive by a collective (in the payload dtype).
  int64_t received_vectors() const {
    return (exchange_.all_to_all ? exchanged_tables() + (hybrid_ ? 1 : 0) : 0) +
           (exchange_.row_wise ? row_wise_tables_ : 0) +
           (exchange_.table_row_wise ? table_row_wise_tables_ : 0);
  }

  /// SGD.step with foreach (PyTorch's default on CUDA): torch._foreach_add_(params, grads,
  /// alpha=-lr) over the dense parameters, bottom MLP then top MLP, each layer's weight
  /// (out x in) then bias (out); it reads each parameter and gradient and writes the parameter
  /// (2 flops per element: scale and add). The descriptor names the update and its tensors, so
  /// the optimizer model counts multi_tensor_apply's launches.
  ///
  /// The data-parallel tables' weights (one tensor: the dense table-batched op's) are dense
  /// parameters too, registered first (TorchRec's DLRM holds the sparse arch before the dense
  /// one). torch.optim's foreach path groups tensors by device and dtype
  /// (_group_tensors_by_device_and_dtype), so when the tables' dtype differs from the MLPs' the
  /// tables get their own multi_tensor_apply launch.
  void optimizer_step() {
    OptimizerShape sgd{config_.dense_optimizer, OptimizerImpl::kForeach};
    int64_t elements = 0;
    const bool tables_apart = storage_dtype(config_.embedding_dtype) != storage_dtype(dtype_) &&
                              data_parallel_elements_ > 0;
    if (data_parallel_elements_ > 0 && !tables_apart) {
      sgd.tensor_elements.push_back(data_parallel_elements_);
      elements += data_parallel_elements_;
    }
    // The cross network (DCNv2) is registered between the bottom and the top MLP.
    const std::vector<int64_t> cross = cross_param_elements(config_);
    for (const std::vector<int64_t>* widths : {&config_.bottom_mlp, &top_widths_}) {
      if (widths == &top_widths_) {
        for (const int64_t e : cross) {
          sgd.tensor_elements.push_back(e);
          elements += e;
        }
      }
      for (size_t l = 0; l + 1 < widths->size(); ++l) {
        const int64_t in = (*widths)[l];
        const int64_t out = (*widths)[l + 1];
        sgd.tensor_elements.push_back(out * in);
        sgd.tensor_elements.push_back(out);
        elements += out * in + out;
      }
    }
    if (config_.grad_scaler) {
      // scaler.step(optimizer): unscale_ the dense gradients and check them for inf / NaN,
      // then read found_inf on the host (torch/amp/grad_scaler.py _maybe_opt_step: `if not
      // sum(v.item() ...)`), which waits for the whole backward, before optimizer.step().
      unscale_gradients(elements + (tables_apart ? data_parallel_elements_ : 0), DType::kFp32);
      HostOp item(graph_, threads_, "aten::_local_scalar_dense");
      item.copy("Memcpy DtoH (found_inf)", TransferKind::kDeviceToHost, kFp32Bytes);
      item.end();
      graph_.add_host_sync(rank_, kCpuThread, kComputeStream, "aten::_local_scalar_dense");
    }
    dense_step(sgd, elements, tables_apart);
    sparse_step();
    if (config_.grad_scaler) {
      // scaler.update(): the scale for the next step from found_inf.
      single_kernel("aten::_amp_update_scale_", "amp_update_scale_cuda_kernel",
                    "aten::_amp_update_scale_",
                    pointwise(MemoryOp::kBinary, DType::kFp32, 1, 2, 3, 2));
    }
  }

  /// torch._amp_foreach_non_finite_check_and_unscale_ over `elements` gradient values of
  /// `dtype`: each read, multiplied by 1 / scale, checked and written back.
  void unscale_gradients(int64_t elements, DType dtype) {
    if (elements == 0) return;
    single_kernel("aten::_amp_foreach_non_finite_check_and_unscale_",
                  "multi_tensor_apply_kernel/amp_non_finite_check_and_unscale",
                  "aten::_amp_foreach_non_finite_check_and_unscale_",
                  pointwise(MemoryOp::kBinary, dtype, as_double(elements), 2, 1, 1));
  }

  /// embeddings.update sparse: torch.optim.SGD adds each lookup's gradient row into its table
  /// row (dense.add_(sparse, alpha=-lr): one index_add_ per sparse parameter; the lookup groups
  /// are the parameters), after GradScaler's unscale_ of the values.
  void sparse_step() {
    if (config_.embedding_update != EmbeddingUpdate::kScatterAdd) return;
    const std::array<const LookupGroup*, 3> groups{&pieces_, &row_wise_, &table_row_wise_};
    if (config_.grad_scaler) {
      // The values are in the table dtype; GradScaler unscales them as they are.
      int64_t values = 0;
      for (const LookupGroup* group : groups)
        values += sparse_values(*group);
      unscale_gradients(values, config_.embedding_dtype);
    }
    if (std::all_of(groups.begin(), groups.end(),
                    [](const LookupGroup* g) { return g->empty(); })) {
      return;
    }
    HostOp h(graph_, threads_, "Optimizer.step#SGD.step");
    for (const LookupGroup* group : groups) {
      if (group->empty()) continue;
      KernelDesc update =
          embedding_kernel(KernelClass::kEmbeddingBackward, *group, EmbeddingOptimizer::kSgd);
      update.embedding.update = EmbeddingUpdate::kScatterAdd;
      h.kernel("indexFuncLargeIndex/index_add", "aten::index_add_", update);
    }
    h.end();
  }

  /// The dense parameters' optimizer step (the foreach update `sgd` over `elements`; the
  /// data-parallel tables in their own launch when `tables_apart`).
  void dense_step(OptimizerShape& sgd, int64_t elements, bool tables_apart) {
    const std::string kernel =
        fmt::format("multi_tensor_apply_kernel/{}", optimizer_kind_name(config_.dense_optimizer));
    const std::string_view aten = config_.dense_optimizer == OptimizerKind::kSgd
                                      ? "aten::_foreach_add_"
                                      : "aten::_foreach_addcdiv_";
    HostOp h(graph_, threads_,
             fmt::format("Optimizer.step#{}.step", torch_optimizer_class(config_.dense_optimizer)));
    if (tables_apart) {
      KernelDesc tables = pointwise(MemoryOp::kOptimizer, config_.embedding_dtype,
                                    as_double(data_parallel_elements_), 2, 2, 1);
      tables.optimizer = OptimizerShape{config_.dense_optimizer, OptimizerImpl::kForeach};
      tables.optimizer.tensor_elements.push_back(data_parallel_elements_);
      h.kernel(kernel, aten, tables);
    }
    KernelDesc update =
        pointwise(MemoryOp::kOptimizer, config_.param_dtype(), as_double(elements), 2, 2, 1);
    update.optimizer = std::move(sgd);
    h.kernel(kernel, aten, update);
    h.end();
  }

  const DlrmConfig& config_;
  const DlrmGraph& built_;
  const std::vector<int64_t>& top_widths_;
  TaskGraph& graph_;
  RankId rank_;
  pytorch::RankThreads threads_;
  bool distributed_;
  EmbeddingExchange exchange_;
  /// This rank's lookups: table-wise tables and column-wise shards (global batch), row-wise
  /// row blocks (global batch), data-parallel replicas (local batch).
  LookupGroup pieces_;
  LookupGroup row_wise_;
  LookupGroup data_parallel_;
  /// Table-row-wise blocks of this rank's node (global batch).
  LookupGroup table_row_wise_;
  uint32_t node_ = 0;
  uint32_t local_rank_ = 0;
  /// Table-row-wise tables on this rank's node, and in the whole run.
  int64_t node_tables_ = 0;
  int64_t table_row_wise_tables_ = 0;
  int64_t row_wise_tables_ = 0;
  int64_t data_parallel_tables_ = 0;
  /// Elements of all data-parallel tables (rows x dim summed): their dense gradient and update.
  int64_t data_parallel_elements_ = 0;
  int64_t local_batch_;
  /// Hybrid parallel (bottom_mlp_placement first_rank): the bottom MLP runs on rank 0 alone.
  bool hybrid_;
  /// This rank runs the bottom MLP and puts its output into the exchange.
  bool bottom_in_exchange_;
  /// Samples this rank's bottom MLP sees (0: it runs none).
  int64_t bottom_batch_;
  int64_t table_count_;
  int64_t embedding_dim_;
  DType dtype_;
};

void check_inputs(const DlrmConfig& c, const DlrmPlacementInputs& in) {
  if (in.ranks == 0) throw std::invalid_argument("DLRM: at least one rank is needed");
  if (in.memory_capacity_bytes.size() != in.ranks) {
    throw std::invalid_argument(fmt::format("DLRM: {} ranks but {} memory capacities", in.ranks,
                                            in.memory_capacity_bytes.size()));
  }
  if (in.iterations == 0) throw std::invalid_argument("DLRM: at least one iteration is needed");
  if (c.global_batch <= 0 || c.global_batch % in.ranks != 0) {
    throw std::invalid_argument(fmt::format(
        "DLRM: global batch {} is not a positive multiple of {} ranks", c.global_batch, in.ranks));
  }
  if (c.bottom_mlp.size() < 2 || c.top_mlp.empty() || c.tables.empty() || c.embedding_dim <= 0 ||
      c.bottom_mlp.back() != c.embedding_dim) {
    throw std::invalid_argument(
        "DLRM: the config needs a bottom MLP ending in the embedding dim, a top MLP and tables");
  }
}

}  // namespace

std::string_view fbgemm_optimizer_name(EmbeddingOptimizer optimizer) {
  switch (optimizer) {
    case EmbeddingOptimizer::kSgd:
      return "sgd";
    case EmbeddingOptimizer::kAdagrad:
      return "adagrad";
    case EmbeddingOptimizer::kRowWiseAdagrad:
      return "rowwise_adagrad";
    case EmbeddingOptimizer::kAdam:
      return "adam";
  }
  return "sgd";
}

std::vector<int64_t> cross_param_elements(const DlrmConfig& config) {
  std::vector<int64_t> out;
  if (config.interaction != DlrmInteraction::kDcnV2) return out;
  const int64_t n = config.cross_width();
  for (int64_t l = 0; l < config.cross_layers; ++l) {
    out.push_back(config.cross_rank * n);  // V_l: N -> r
    out.push_back(n * config.cross_rank);  // W_l: r -> N
    out.push_back(n);                      // bias_l
  }
  return out;
}

std::vector<int64_t> mlp_param_bytes_ready_order(const std::vector<int64_t>& widths, DType dtype) {
  std::vector<int64_t> bytes;
  const int64_t e = dtype_bytes(dtype);
  for (size_t l = widths.size() - 1; l-- > 0;) {
    bytes.push_back(widths[l + 1] * e);              // bias
    bytes.push_back(widths[l + 1] * widths[l] * e);  // weight
  }
  return bytes;
}

DlrmGraph generate_dlrm(const DlrmConfig& config, const DlrmPlacementInputs& inputs,
                        TaskGraph& graph) {
  check_inputs(config, inputs);
  DlrmGraph built;
  built.local_batch = config.global_batch / inputs.ranks;
  const bool hybrid =
      config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && inputs.ranks > 1;
  // DeepLearningExamples' get_device_mapping: above 4 GPUs the bottom MLP's GPU holds no table
  // (place_dlrm_tables: the sharder's tableless_ranks).
  built.placement = place_dlrm_tables(config, inputs.memory_capacity_bytes, inputs.ranks_per_node);

  std::vector<int64_t> top_widths{config.top_mlp_input()};
  top_widths.insert(top_widths.end(), config.top_mlp.begin(), config.top_mlp.end());
  // The top DDP module holds the top MLP and, for DCNv2, the cross network under it: their
  // gradients become ready in that order (each cross layer's bias, W, V, last layer first).
  std::vector<int64_t> top_ready = mlp_param_bytes_ready_order(top_widths, config.param_dtype());
  const std::vector<int64_t> cross = cross_param_elements(config);
  for (size_t p = cross.size(); p-- > 0;)
    top_ready.push_back(cross[p] * dtype_bytes(config.param_dtype()));
  built.top_buckets = pytorch::assign_ddp_buckets(top_ready, config.ddp_first_bucket_bytes,
                                                  config.ddp_bucket_bytes);
  // Hybrid parallel: one rank holds the bottom MLP, so no DDP reduces it.
  if (!hybrid) {
    built.bottom_buckets = pytorch::assign_ddp_buckets(
        mlp_param_bytes_ready_order(config.bottom_mlp, config.param_dtype()),
        config.ddp_first_bucket_bytes, config.ddp_bucket_bytes);
  }

  for (uint32_t r = 0; r < inputs.ranks; ++r) {
    built.ranks.push_back(
        graph.add_rank(RankInfo{fmt::format("rank {}", r), 1,
                                config.input == InputPipeline::kPrefetch
                                    ? std::vector<std::string>{"compute", "comm", "data"}
                                    : std::vector<std::string>{"compute", "comm"}}));
  }

  const size_t n = inputs.ranks;
  const TablePlacement& placement = built.placement;
  EmbeddingExchange exchange;
  exchange.all_to_all = n > 1 && (!placement.pieces.empty() || hybrid);
  exchange.row_wise = n > 1 && !placement.row_wise.empty();
  exchange.data_parallel = n > 1 && !placement.data_parallel.empty();
  exchange.table_row_wise = n > 1 && !placement.table_row_wise.empty();

  // All-to-all sizes (Lin et al., TPDS 2024): rank i sends b x (the dims of its table-wise
  // tables and column-wise shards) values to every rank j (itself included); the backward sends
  // the gradients back, the transpose. Both are outer products (O(n) memory, shared by every
  // iteration's collective). Row-wise and data-parallel tables add nothing.
  const int64_t a2a_bytes = dtype_bytes(config.all_to_all_dtype);
  std::vector<int64_t> per_rank(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t values = 0;
    for (uint32_t p : placement.pieces_of_rank[i])
      values += placement.pieces[p].dim;
    // Hybrid parallel: rank 0's bottom MLP output is one more vector per sample.
    if (hybrid && i == 0) values += config.embedding_dim;
    per_rank[i] = built.local_batch * values * a2a_bytes;
  }
  const std::vector<int64_t> ones(n, 1);
  const AllToAllSizes forward_bytes = AllToAllSizes::outer(per_rank, ones);
  const AllToAllSizes backward_bytes = AllToAllSizes::outer(ones, per_rank);
  // Row-wise: every rank reduce-scatters B x T_rw x D partial sums (its input) and all-gathers
  // b x T_rw x D gradients (its input), in the payload dtype.
  const auto row_wise_tables = static_cast<int64_t>(placement.row_wise.size());
  const int64_t reduce_scatter_bytes =
      config.global_batch * row_wise_tables * config.embedding_dim * a2a_bytes;
  const int64_t all_gather_bytes =
      built.local_batch * row_wise_tables * config.embedding_dim * a2a_bytes;
  // Table-row-wise: node k's ranks reduce-scatter B x T_k x D partial sums and all-gather
  // (B / L) x T_k x D gradients (their inputs); in the all-to-all among the local rank j of
  // every node, node k's sends b x T_k x D to each (the backward: the transpose).
  const uint32_t local = placement.ranks_per_node;
  const uint32_t nodes = inputs.ranks / local;
  std::vector<int64_t> node_tables(nodes, 0);
  for (const uint32_t t : placement.table_row_wise)
    ++node_tables[placement.node_of_table[t]];
  std::vector<int64_t> node_send(nodes);
  for (uint32_t k = 0; k < nodes; ++k)
    node_send[k] = built.local_batch * node_tables[k] * config.embedding_dim * a2a_bytes;
  const std::vector<int64_t> node_ones(nodes, 1);
  const AllToAllSizes cross_forward = AllToAllSizes::outer(node_send, node_ones);
  const AllToAllSizes cross_backward = AllToAllSizes::outer(node_ones, node_send);
  // Data-parallel: the dense gradient of every replicated table, in the embedding dtype.
  int64_t data_parallel_bytes = 0;
  for (uint32_t t : placement.data_parallel) {
    data_parallel_bytes +=
        config.tables[t].rows * config.embedding_dim * dtype_bytes(config.embedding_dtype);
  }

  std::vector<RankEmitter> emitters;
  emitters.reserve(n);
  for (uint32_t r = 0; r < inputs.ranks; ++r) {
    emitters.emplace_back(config, built, top_widths, exchange, r, graph);
  }

  for (uint32_t it = 0; it < inputs.iterations; ++it) {
    IterationGroups groups;
    if (n > 1) {
      const auto add = [&](CollectiveKind kind, int64_t bytes, const AllToAllSizes& sizes,
                           const std::string& name) {
        return graph.add_collective_group(CollectiveDesc{kind, built.ranks, bytes, sizes}, name);
      };
      const auto all_reduce_buckets = [&](const std::vector<DdpBucket>& buckets,
                                          std::string_view module) {
        std::vector<CollectiveId> ids;
        for (size_t k = 0; k < buckets.size(); ++k) {
          ids.push_back(add(CollectiveKind::kAllReduce, buckets[k].bytes, {},
                            fmt::format("ncclKernel_AllReduce {} bucket {}", module, k)));
        }
        return ids;
      };
      if (exchange.all_to_all) {
        groups.a2a_forward =
            add(CollectiveKind::kAllToAll, 0, forward_bytes, "ncclKernel_AllToAll fwd");
      }
      if (exchange.row_wise) {
        groups.reduce_scatter = add(CollectiveKind::kReduceScatter, reduce_scatter_bytes, {},
                                    "ncclKernel_ReduceScatter row-wise fwd");
      }
      groups.top = all_reduce_buckets(built.top_buckets, "top");
      if (exchange.all_to_all) {
        groups.a2a_backward =
            add(CollectiveKind::kAllToAll, 0, backward_bytes, "ncclKernel_AllToAll bwd");
      }
      if (exchange.row_wise) {
        groups.all_gather = add(CollectiveKind::kAllGather, all_gather_bytes, {},
                                "ncclKernel_AllGather row-wise bwd");
      }
      groups.bottom = all_reduce_buckets(built.bottom_buckets, "bottom");
      if (exchange.data_parallel) {
        groups.data_parallel = add(CollectiveKind::kAllReduce, data_parallel_bytes, {},
                                   "ncclKernel_AllReduce data-parallel tables");
      }
      groups.node_reduce_scatter.assign(nodes, 0);
      groups.node_all_gather.assign(nodes, 0);
      groups.cross_a2a_forward.assign(local, 0);
      groups.cross_a2a_backward.assign(local, 0);
      if (exchange.table_row_wise) {
        for (uint32_t k = 0; k < nodes && local > 1; ++k) {
          if (node_tables[k] == 0) continue;
          const std::vector<RankId> members(built.ranks.begin() + k * local,
                                            built.ranks.begin() + (k + 1) * local);
          const int64_t values = node_tables[k] * config.embedding_dim * a2a_bytes;
          groups.node_reduce_scatter[k] = graph.add_collective_group(
              CollectiveDesc{
                  CollectiveKind::kReduceScatter, members, config.global_batch * values, {}},
              fmt::format("ncclKernel_ReduceScatter table-row-wise node {} fwd", k));
          groups.node_all_gather[k] = graph.add_collective_group(
              CollectiveDesc{
                  CollectiveKind::kAllGather, members, config.global_batch / local * values, {}},
              fmt::format("ncclKernel_AllGather table-row-wise node {} bwd", k));
        }
        for (uint32_t j = 0; j < local && nodes > 1; ++j) {
          std::vector<RankId> members;
          for (uint32_t k = 0; k < nodes; ++k)
            members.push_back(built.ranks[k * local + j]);
          groups.cross_a2a_forward[j] = graph.add_collective_group(
              CollectiveDesc{CollectiveKind::kAllToAll, members, 0, cross_forward},
              fmt::format("ncclKernel_AllToAll table-row-wise local rank {} fwd", j));
          groups.cross_a2a_backward[j] = graph.add_collective_group(
              CollectiveDesc{CollectiveKind::kAllToAll, members, 0, cross_backward},
              fmt::format("ncclKernel_AllToAll table-row-wise local rank {} bwd", j));
        }
      }
    }
    for (RankEmitter& e : emitters)
      e.iteration(it, groups);
  }
  return built;
}

}  // namespace upsim
