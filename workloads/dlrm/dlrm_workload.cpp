#include "workloads/dlrm/dlrm_workload.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/config/quantity_parse.h"
#include "workloads/dlrm/dlrm_generator.h"
#include "workloads/dlrm/sharders.h"

namespace upsim {

namespace {

/// Bytes of an MLP's parameters (weights and biases) in the config's dtype.
int64_t mlp_bytes(const std::vector<int64_t>& widths, DType dtype) {
  const std::vector<int64_t> bytes = mlp_param_bytes_ready_order(widths, dtype);
  return std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
}

/// Bytes autograd keeps from the forward for the backward of one rank's dense part: every MLP
/// layer's input and its ReLU output (the linear and the ReLU backward read them), the
/// interaction's intermediates (dot: the stacked features, the Gram matrix, the gathered pairs
/// and the concatenation; dcnv2: per cross layer x_l, V x_l, W V x_l and the three elementwise
/// results), in the MLPs' dtype. `bottom_batch` samples see the bottom MLP (0: none), `batch` the
/// rest.
int64_t activation_bytes(const DlrmConfig& c, int64_t batch, int64_t bottom_batch,
                         const std::vector<int64_t>& top_widths) {
  const int64_t e = dtype_bytes(c.dtype);
  int64_t bottom = 0;
  for (size_t l = 0; l + 1 < c.bottom_mlp.size(); ++l)
    bottom += c.bottom_mlp[l] + 2 * c.bottom_mlp[l + 1];
  int64_t top = 0;
  for (size_t l = 0; l + 1 < top_widths.size(); ++l)
    top += top_widths[l] + 2 * top_widths[l + 1];
  const int64_t f = static_cast<int64_t>(c.tables.size()) + 1;
  const int64_t interaction =
      c.interaction == DlrmInteraction::kDot
          ? f * c.embedding_dim + f * f + c.interaction_pairs() + c.top_mlp_input()
          : c.cross_width() + c.cross_layers * (4 * c.cross_width() + c.cross_rank);
  return (bottom_batch * bottom + batch * (top + interaction)) * e;
}

/// Bytes of one rank's exchange and input buffers (`rank` its position in its sharding group,
/// `group_batch` the group's samples: the global batch without two_d): the pooled output of its
/// lookups (table-wise tables and column-wise shards at their own width and row-wise blocks for
/// the group's batch, data-parallel tables for its own samples), the all-to-all's send and
/// receive buffers and the row-wise reduce-scatter's, the table-row-wise reduce-scatter's and
/// all-to-all's (its node's blocks for the global batch; forward and backward: twice, inference
/// once), the indices and offsets its lookups read, and with embeddings.update sparse the sparse
/// gradient's values (one row a lookup, in the table dtype).
int64_t buffer_bytes(const DlrmConfig& c, int64_t batch, int64_t group_batch,
                     const TablePlacement& placement, uint32_t rank, bool distributed) {
  const int64_t emb = dtype_bytes(c.embedding_dtype);
  const int64_t wire = dtype_bytes(c.all_to_all_dtype);
  int64_t sent_columns = 0;    // per sample, in the all-to-all
  double indices = 0.0;        // per sample of the group batch
  double lookup_values = 0.0;  // per sample of the group batch: lookups x their width
  int64_t bags = 0;            // per sample of the group batch
  for (const uint32_t piece : placement.pieces_of_rank[rank]) {
    const TablePiece& p = placement.pieces[piece];
    sent_columns += p.dim;
    indices += c.tables[p.table].pooling;
    lookup_values += c.tables[p.table].pooling * static_cast<double>(p.dim);
    ++bags;
  }
  int64_t received_columns = 0;  // per local sample, from the all-to-all
  for (const TablePiece& p : placement.pieces)
    received_columns += p.dim;
  // Hybrid tables hold both a row block (global batch, their infrequent lookups) and the
  // frequent replica (local batch): they count as row-wise and as data-parallel tables.
  const auto hybrid = static_cast<int64_t>(placement.hybrid.size());
  const auto row_wise = static_cast<int64_t>(placement.row_wise.size()) + hybrid;
  const auto data_parallel = static_cast<int64_t>(placement.data_parallel.size()) + hybrid;
  const auto ranks = static_cast<double>(placement.pieces_of_rank.size());
  for (const uint32_t t : placement.row_wise) {
    const double share = c.tables[t].pooling / ranks;
    indices += share;
    lookup_values += share * static_cast<double>(c.embedding_dim);
  }
  for (const uint32_t t : placement.hybrid) {
    const double share = c.tables[t].pooling * (1.0 - c.tables[t].frequent_share) / ranks;
    indices += share;
    lookup_values += share * static_cast<double>(c.embedding_dim);
  }
  bags += row_wise;
  // Table-row-wise: the blocks of this rank's node.
  const uint32_t local = placement.ranks_per_node;
  const auto nodes = placement.pieces_of_rank.size() / local;
  const auto twrw_total = static_cast<int64_t>(placement.table_row_wise.size());
  int64_t twrw_node = 0;
  for (const uint32_t t : placement.table_row_wise) {
    if (placement.node_of_table[t] != rank / local) continue;
    ++twrw_node;
    indices += c.tables[t].pooling / static_cast<double>(local);
    lookup_values +=
        c.tables[t].pooling / static_cast<double>(local) * static_cast<double>(c.embedding_dim);
  }
  bags += twrw_node;
  const int64_t lookups = (group_batch * (sent_columns + (row_wise + twrw_node) * c.embedding_dim) +
                           batch * data_parallel * c.embedding_dim) *
                          emb;
  // Forward and backward each hold one exchange's buffers; inference, the forward's alone.
  const int64_t exchanges = c.mode == DlrmMode::kTrain ? 2 : 1;
  const int64_t exchange =
      distributed ? exchanges *
                        (group_batch * sent_columns + batch * received_columns +
                         (group_batch + batch) * row_wise * c.embedding_dim +
                         (group_batch + group_batch / local) * twrw_node * c.embedding_dim +
                         (nodes > 1 ? batch * twrw_total * c.embedding_dim : 0)) *
                        wire
                  : 0;
  double dp_indices = 0.0;
  for (const uint32_t t : placement.data_parallel)
    dp_indices += c.tables[t].pooling;
  for (const uint32_t t : placement.hybrid)
    dp_indices += c.tables[t].pooling * c.tables[t].frequent_share;
  const auto index_bytes = static_cast<int64_t>(
      (static_cast<double>(group_batch) * indices + static_cast<double>(batch) * dp_indices) *
      static_cast<double>(c.index_bytes));
  const int64_t offsets = (group_batch * bags + batch * data_parallel + 1) * c.index_bytes;
  const int64_t sparse_gradient =
      c.embedding_update == EmbeddingUpdate::kScatterAdd && c.mode == DlrmMode::kTrain
          ? static_cast<int64_t>(static_cast<double>(group_batch) * lookup_values *
                                 static_cast<double>(emb))
          : 0;
  return lookups + exchange + index_bytes + offsets + sparse_gradient;
}

/// The memory of the rank holding the most table bytes (the first of equals; every rank holds
/// the dense MLPs): its tables, the dense weights, gradients and optimizer state, activations and
/// buffers.
MemoryFootprint dlrm_memory_footprint(const DlrmConfig& dlrm, const DlrmGraph& built,
                                      const WorkloadPlatform& platform, const TaskGraph& graph) {
  const bool training = dlrm.mode == DlrmMode::kTrain;
  // `rank` is a position in the sharding group (two_d: every group holds the placement); the
  // owner is sharding group 0's rank there.
  const auto most =
      std::max_element(built.placement.memory_bytes.begin(), built.placement.memory_bytes.end());
  const auto rank = static_cast<size_t>(most - built.placement.memory_bytes.begin());
  const uint32_t owner = built.sharding_groups.rank(0, static_cast<uint32_t>(rank));
  std::vector<int64_t> top_widths{dlrm.top_mlp_input()};
  top_widths.insert(top_widths.end(), dlrm.top_mlp.begin(), dlrm.top_mlp.end());
  int64_t dense =
      mlp_bytes(dlrm.bottom_mlp, dlrm.param_dtype()) + mlp_bytes(top_widths, dlrm.param_dtype());
  for (const int64_t elements : cross_param_elements(dlrm))
    dense += elements * dtype_bytes(dlrm.param_dtype());
  MemoryFootprint memory;
  memory.owner = graph.rank(built.ranks[owner]).name;
  memory.parts.push_back({"embedding tables", *most});
  memory.parts.push_back({"dense weights", dense});
  if (training) memory.parts.push_back({"dense gradients", dense});
  // torch.optim's fp32 state per dense parameter: Adagrad's sum, Adam's two moments.
  const int64_t dense_elements = dense / dtype_bytes(dlrm.param_dtype());
  // torch.autocast keeps the 16-bit copies of the weights for the backward.
  if (dlrm.master_weights) {
    memory.parts.push_back({"16-bit weight copies", dense_elements * dtype_bytes(dlrm.dtype)});
  }
  const int64_t states = dlrm.dense_optimizer == OptimizerKind::kAdagrad ? 1
                         : dlrm.dense_optimizer == OptimizerKind::kSgd   ? 0
                                                                         : 2;
  if (training && states > 0) {
    memory.parts.push_back({"dense optimizer state", states * dense_elements * 4});
  }
  const bool hybrid =
      dlrm.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && platform.gpus > 1;
  const int64_t bottom_batch =
      !hybrid ? built.local_batch : (rank == 0 ? dlrm.global_batch : int64_t{0});
  memory.parts.push_back(
      {"activations", activation_bytes(dlrm, built.local_batch, bottom_batch, top_widths)});
  memory.parts.push_back(
      {"buffers", buffer_bytes(dlrm, built.local_batch, built.group_batch, built.placement,
                               static_cast<uint32_t>(rank), built.sharding_groups.group_size > 1)});
  return memory;
}

}  // namespace

int64_t dlrm_table_capacity_bytes(const WorkloadPlatform& platform) {
  return static_cast<int64_t>(static_cast<double>(platform.device.hbm_bytes) *
                              platform.table_memory_fraction);
}

uint32_t dlrm_ranks_per_node(const DlrmConfig& config, const WorkloadPlatform& platform) {
  const bool needed =
      std::any_of(config.tables.begin(), config.tables.end(), [](const EmbeddingTable& t) {
        return t.sharding_type == EmbeddingShardingType::kTableRowWise;
      });
  const std::vector<uint32_t>& node = platform.node_of_gpu;
  if (!needed || node.empty()) return 0;
  const auto local = static_cast<uint32_t>(
      std::find_if(node.begin(), node.end(), [&](uint32_t n) { return n != node.front(); }) -
      node.begin());
  bool equal = node.size() % local == 0;
  for (size_t i = 0; i < node.size() && equal; ++i)
    equal = node[i] == node.front() + i / local;
  if (!equal) {
    throw ShardingError(fmt::format(
        "table_row_wise tables span one node's GPUs, and every node must have as many (TorchRec's "
        "local size), but the run's {} GPUs fill nodes unevenly ({} on the first); use equal "
        "nodes or another sharding_type",
        node.size(), local));
  }
  return local;
}

DlrmWorkload::DlrmWorkload(const ConfigNode& workload) : node_(workload) {}

void DlrmWorkload::prepare(const WorkloadPlatform& platform) {
  config_ = parse_dlrm_config(node_, platform.gpus);
  // The tables are drawn for and sharded over one sharding group (every GPU without two_d).
  const uint32_t shard_ranks = config_->sharding_ranks(platform.gpus);
  try {
    draw_dlrm_random_task(*config_, shard_ranks, platform.device.hbm_bytes);
  } catch (const std::invalid_argument& e) {
    node_.child("embeddings").child("random_task").fail(e.what());
  }
  choose_sharding_types(*config_, shard_ranks, dlrm_table_capacity_bytes(platform));
}

WorkloadBuild DlrmWorkload::build(const WorkloadPlatform& platform, TaskGraph& graph) {
  if (!config_) prepare(platform);
  const DlrmConfig& dlrm = *config_;
  DlrmPlacementInputs inputs;
  inputs.ranks = platform.gpus;
  inputs.iterations = platform.iterations;
  inputs.memory_capacity_bytes.assign(platform.gpus, dlrm_table_capacity_bytes(platform));
  DlrmGraph built;
  try {
    inputs.ranks_per_node = dlrm_ranks_per_node(dlrm, platform);
    built = generate_dlrm(dlrm, inputs, graph);
  } catch (const ShardingError& e) {
    // What a rank's table memory is and which key sets it.
    const std::string memory = fmt::format(
        "; a GPU's table memory is platform.table_memory_fraction = {} of {}'s {} bytes ({} "
        "bytes)",
        platform.table_memory_fraction, platform.device.name, platform.device.hbm_bytes,
        dlrm_table_capacity_bytes(platform));
    // An explicit plan is at fault where it lists the ranks; a sharder, where the tables are:
    // the group of the table that did not fit (in the scenario or its tables_file), else the list.
    if (dlrm.sharding == ShardingStrategy::kPlan) {
      const ConfigNode plan = node_.child("sharding_plan");
      const ConfigNode at =
          plan.has("rank_of_table") ? plan.child("rank_of_table") : plan.child("placement");
      if (e.table() && !plan.has("rank_of_table")) {
        const std::vector<ConfigNode> entries = at.items();
        if (*e.table() < entries.size()) entries[*e.table()].fail(e.what() + memory);
      }
      at.fail(e.what() + memory);
    }
    const ConfigNode tables = dlrm_tables_node(node_);
    if (e.table() && *e.table() < dlrm.group_of_table.size()) {
      const std::vector<ConfigNode> groups = tables.items();
      const uint32_t group = dlrm.group_of_table[*e.table()];
      if (group < groups.size()) groups[group].fail(e.what() + memory);
    }
    tables.fail(e.what() + (e.table() ? memory : std::string()));
  }

  WorkloadBuild out;
  out.iterations = platform.iterations;
  out.warmup_iterations = platform.warmup_iterations;
  // TorchRec's pipelined loop ends with a mark after the last step and a drain (end_of_loop).
  if (dlrm.train_pipeline != TrainPipeline::kNone) {
    out.measured_iterations = platform.iterations - platform.warmup_iterations;
  }
  const std::string interaction =
      dlrm.interaction == DlrmInteraction::kDot
          ? std::string("dot interaction")
          : fmt::format("dcnv2 interaction ({} cross layers of rank {} over {})", dlrm.cross_layers,
                        dlrm.cross_rank, dlrm.cross_width());
  const bool training = dlrm.mode == DlrmMode::kTrain;
  const std::string table_update =
      !training ? ""
      : dlrm.embedding_update == EmbeddingUpdate::kScatterAdd
          ? ", sparse gradients, torch.optim.SGD"
          : fmt::format(", fused {}", fbgemm_optimizer_name(dlrm.optimizer));
  std::string loop;
  if (dlrm.grad_scaler) loop += ", GradScaler";
  if (dlrm.input == InputPipeline::kPrefetch) loop += ", input prefetched";
  if (dlrm.input_dist == InputDistribution::kAllToAll) loop += ", indices by all-to-all (TorchRec)";
  if (dlrm.train_pipeline == TrainPipeline::kSparseDist) {
    loop += ", TrainPipelineSparseDist (next batch's input distribution overlapped)";
  }
  if (dlrm.train_pipeline == TrainPipeline::kSemiSync) {
    loop +=
        ", TrainPipelineSemiSync (input distribution two batches ahead, next batch's embedding "
        "exchange overlapped with this backward)";
  }
  if (dlrm.cuda_graphs) {
    loop += training ? ", CUDA graph (forward and backward one replay, optimizer eager)"
                     : ", CUDA graph (forward one replay)";
  }
  out.description.push_back(fmt::format(
      "workload: dlrm{}, {}, global batch {} ({} per rank), {} tables of dim {} ({}{}), "
      "all-to-all {}, MLPs {}{}{}, sharding {}{}, {} iterations ({} warm-up)",
      training ? "" : " inference", interaction, dlrm.global_batch, built.local_batch,
      dlrm.tables.size(), dlrm.embedding_dim, dtype_name(dlrm.embedding_dtype), table_update,
      dtype_name(dlrm.all_to_all_dtype), dtype_name(dlrm.dtype),
      training ? fmt::format(" ({})", optimizer_kind_name(dlrm.dense_optimizer)) : "",
      dlrm.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && platform.gpus > 1
          ? ", bottom MLP on rank 0 alone (hybrid parallel)"
          : "",
      sharding_strategy_name(dlrm.sharding), loop, platform.iterations,
      platform.warmup_iterations));
  if (const std::optional<RandomTaskSpec>& task = dlrm.random_task) {
    out.description.push_back(fmt::format(
        "random task {} of seed {}{}: {} of the pool's {} tables ({} per GPU x [0.7, 1.3)), "
        "pool ids {}",
        task->task, task->seed,
        task->heavy ? fmt::format(", heavy (pooling >= {})", task->heavy_pooling) : "",
        dlrm.tables.size(), dlrm.pool_tables, task->tables_per_gpu,
        fmt::join(dlrm.task_tables, " ")));
  }
  const ShardingGroups& layout = built.sharding_groups;
  if (dlrm.two_d.sharding_group_size != 0) {
    const auto groups_text = [](const std::vector<uint32_t>& ranks) {
      return fmt::format("{{{}}}", fmt::join(ranks, " "));
    };
    std::vector<std::string> sharding;
    for (uint32_t g = 0; g < layout.groups(); ++g)
      sharding.push_back(groups_text(layout.sharding_group(g)));
    std::vector<std::string> replicas;
    for (uint32_t p = 0; p < layout.group_size; ++p)
      replicas.push_back(groups_text(layout.replica_group(p)));
    const std::string sync =
        layout.groups() == 1 ? std::string("one replica, no sync")
        : dlrm.mode != DlrmMode::kTrain
            ? std::string("no sync in inference")
            : fmt::format(
                  "weights{} averaged every {} iteration{}",
                  dlrm.two_d.sync_optimizer_state && dlrm.optimizer != EmbeddingOptimizer::kSgd
                      ? " and optimizer state"
                      : "",
                  dlrm.two_d.sync_interval, dlrm.two_d.sync_interval == 1 ? "" : "s");
    out.description.push_back(fmt::format(
        "2D parallel (TorchRec DMPCollection{}): {} sharding group{} of {} ranks {} (each looks "
        "up {} samples), replica groups {} ({})",
        dlrm.two_d.inter_host_allreduce ? ", inter-host all-reduce" : "", layout.groups(),
        layout.groups() == 1 ? "" : "s", layout.group_size, fmt::join(sharding, " "),
        built.group_batch, fmt::join(replicas, " "), sync));
  }
  // An iteration syncs every sync_interval: the steady-state search measures whole periods.
  if (layout.groups() > 1 && dlrm.mode == DlrmMode::kTrain) {
    out.iteration_period = dlrm.two_d.sync_interval;
  }
  // Per rank, or under two_d per position in a sharding group (every group holds the same).
  std::string tables = "embedding tables:";
  const char* const holder = dlrm.two_d.sharding_group_size != 0 ? "position" : "rank";
  for (size_t r = 0; r < built.placement.tables_of_rank.size(); ++r) {
    tables += fmt::format("{} {} {} {} ({})", r == 0 ? "" : ",", holder, r,
                          built.placement.tables_of_rank[r].size(),
                          format_bytes(built.placement.memory_bytes[r]));
  }
  out.description.push_back(std::move(tables));
  // Sharding types, when any table is not table-wise (choose_sharding_types may have chosen).
  std::array<int64_t, 6> by_type{};
  for (const EmbeddingTable& t : dlrm.tables)
    ++by_type[static_cast<size_t>(t.sharding_type)];
  if (by_type[0] != static_cast<int64_t>(dlrm.tables.size())) {
    std::string types = "sharding types:";
    for (size_t k = 0; k < by_type.size(); ++k) {
      if (by_type[k] == 0) continue;
      types += fmt::format(" {} {},", by_type[k],
                           embedding_sharding_type_name(static_cast<EmbeddingShardingType>(k)));
    }
    types.pop_back();
    const auto twrw = static_cast<size_t>(EmbeddingShardingType::kTableRowWise);
    if (by_type[twrw] > 0) {
      const uint32_t local = built.placement.ranks_per_node;
      types += fmt::format(" (table_row_wise over {} node{} of {} GPUs)", platform.gpus / local,
                           platform.gpus / local == 1 ? "" : "s", local);
      if (platform.node_of_gpu.empty() && platform.gpus > 1) {
        out.warnings.push_back(fmt::format(
            "table_row_wise tables without platform.topology: the {} GPUs count as one node, "
            "where table_row_wise is row_wise; give a topology for the nodes",
            platform.gpus));
      }
    }
    out.description.push_back(std::move(types));
  }
  // Hybrid tables: how they split (hybrid_embedding.h).
  const auto hybrid = static_cast<size_t>(EmbeddingShardingType::kHybrid);
  if (by_type[hybrid] > 0) {
    int64_t rows = 0;
    int64_t frequent = 0;
    double lookups = 0.0;
    double frequent_lookups = 0.0;
    for (const EmbeddingTable& t : dlrm.tables) {
      if (t.sharding_type != EmbeddingShardingType::kHybrid) continue;
      rows += t.rows;
      frequent += t.frequent_rows;
      lookups += t.pooling;
      frequent_lookups += t.pooling * t.frequent_share;
    }
    out.description.push_back(fmt::format(
        "hybrid tables (HugeCTR's frequency split): {} of their {} rows frequent, replicated on "
        "every GPU, taking {:.1f}% of their lookups locally; the rest in row blocks over all GPUs",
        frequent, rows, lookups > 0.0 ? 100.0 * frequent_lookups / lookups : 0.0));
  }

  out.memory = dlrm_memory_footprint(dlrm, built, platform, graph);
  // Samples per iteration; no model FLOPs are counted for DLRM (its frameworks report samples
  // per second); utilisation against the MLPs' dtype's dense peak.
  IterationWork work;
  work.unit = "samples";
  work.units = static_cast<double>(dlrm.global_batch);
  work.peak_dtype = dlrm.dtype;
  out.work = work;
  return out;
}

std::unique_ptr<Workload> make_dlrm_workload(const ConfigNode& workload) {
  return std::make_unique<DlrmWorkload>(workload);
}

}  // namespace upsim
