#include "workloads/dlrm/dlrm_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workloads/dlrm/input_dist.h"
#include "workloads/dlrm/rank_emitter.h"
#include "workloads/dlrm/rank_plan.h"
#include "workloads/dlrm/table_statistics.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/pytorch/kernels.h"

namespace upsim {

namespace {

using namespace dlrm_emit;

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

namespace {

/// The bytes of an iteration's embedding collectives (the same every iteration).
struct ExchangeSizes {
  int64_t a2a_bytes = 4;  ///< bytes of one exchanged value (all_to_all_dtype)
  AllToAllSizes forward;  ///< table-wise / column-wise all-to-all, forward and backward
  AllToAllSizes backward;
  int64_t reduce_scatter_bytes = 0;  ///< row-wise
  int64_t all_gather_bytes = 0;
  std::vector<int64_t> node_tables;  ///< table-row-wise tables per node
  AllToAllSizes cross_forward;       ///< table-row-wise all-to-all among the nodes
  AllToAllSizes cross_backward;
  int64_t data_parallel_bytes = 0;  ///< the data-parallel tables' dense gradient
};

ExchangeSizes exchange_sizes(const DlrmConfig& config, const DlrmGraph& built, bool hybrid) {
  const TablePlacement& placement = built.placement;
  const size_t n = built.sharding_groups.group_size;
  // All-to-all sizes (Lin et al., TPDS 2024): rank i sends b x (the dims of its table-wise
  // tables and column-wise shards) values to every rank j (itself included); the backward sends
  // the gradients back, the transpose. Both are outer products (O(n) memory, shared by every
  // iteration's collective). Row-wise and data-parallel tables add nothing.
  const int64_t a2a_bytes = dtype_bytes(config.all_to_all_dtype);
  ExchangeSizes out;
  out.a2a_bytes = a2a_bytes;
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
  out.forward = AllToAllSizes::outer(per_rank, ones);
  out.backward = AllToAllSizes::outer(ones, per_rank);
  // Row-wise: every rank reduce-scatters B x T_rw x D partial sums (its input; B its sharding
  // group's samples) and all-gathers b x T_rw x D gradients (its input), in the payload dtype.
  // Hybrid tables join them with the samples that look an infrequent row up
  // (row_wise_exchange_values).
  out.reduce_scatter_bytes =
      dlrm_emit::row_wise_exchange_values(config, placement, built.group_batch) * a2a_bytes;
  out.all_gather_bytes =
      dlrm_emit::row_wise_exchange_values(config, placement, built.local_batch) * a2a_bytes;
  // Table-row-wise: node k's ranks reduce-scatter B x T_k x D partial sums and all-gather
  // (B / L) x T_k x D gradients (their inputs); in the all-to-all among the local rank j of
  // every node, node k's sends b x T_k x D to each (the backward: the transpose).
  const uint32_t local = placement.ranks_per_node;
  const uint32_t nodes = static_cast<uint32_t>(n) / local;
  out.node_tables.assign(nodes, 0);
  for (const uint32_t t : placement.table_row_wise)
    ++out.node_tables[placement.node_of_table[t]];
  std::vector<int64_t> node_send(nodes);
  for (uint32_t k = 0; k < nodes; ++k)
    node_send[k] = built.local_batch * out.node_tables[k] * config.embedding_dim * a2a_bytes;
  const std::vector<int64_t> node_ones(nodes, 1);
  out.cross_forward = AllToAllSizes::outer(node_send, node_ones);
  out.cross_backward = AllToAllSizes::outer(node_ones, node_send);
  // Data-parallel: the dense gradient of every replicated table, in the embedding dtype.
  for (uint32_t t : placement.data_parallel) {
    out.data_parallel_bytes +=
        config.tables[t].rows * config.embedding_dim * dtype_bytes(config.embedding_dtype);
  }
  // Hybrid: the frequent rows' dense gradient (HugeCTR frequent_embedding.cu all-reduces it).
  for (uint32_t t : placement.hybrid) {
    out.data_parallel_bytes +=
        config.tables[t].frequent_rows * config.embedding_dim * dtype_bytes(config.embedding_dtype);
  }
  return out;
}

/// One batch's input distribution groups (`label` names the batch in the collectives' names):
/// the splits all-to-alls, one per KJTAllToAll or one `fused` for all, then each one's lengths
/// and values.
/// The sharding groups' members (graph ranks, by position) and their names' suffixes (none
/// with one group, the plain run's names).
struct ShardingGroupMembers {
  std::vector<std::vector<RankId>> members;
  std::vector<std::string> suffix;
};

ShardingGroupMembers sharding_group_members(const DlrmGraph& built) {
  const ShardingGroups& layout = built.sharding_groups;
  ShardingGroupMembers out;
  for (uint32_t g = 0; g < layout.groups(); ++g) {
    std::vector<RankId> members;
    for (const uint32_t r : layout.sharding_group(g))
      members.push_back(built.ranks[r]);
    out.members.push_back(std::move(members));
    out.suffix.push_back(layout.groups() == 1 ? std::string()
                                              : fmt::format(" sharding group {}", g));
  }
  return out;
}

/// One batch's input distribution groups among `members` (`label` names the batch and `suffix`
/// the sharding group in the collectives' names): the splits all-to-alls, one per KJTAllToAll or
/// one `fused` for all, then each one's lengths and values.
InputDistGroups add_input_dist_groups(const std::vector<RankId>& members,
                                      const std::vector<KjtAllToAll>& kjts, bool fused,
                                      std::string_view label, std::string_view suffix,
                                      TaskGraph& graph) {
  InputDistGroups groups;
  if (kjts.empty()) return groups;
  const size_t n = members.size();
  const std::vector<int64_t> ones(n, 1);
  const auto splits = [&](int64_t types, std::string_view what) {
    return graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllToAll, members, 0,
                       AllToAllSizes::outer(
                           ones, std::vector<int64_t>(n, types * kSplitsPerPair * kSplitBytes))},
        fmt::format("ncclKernel_AllToAll input_dist {} splits{}{}", label, what, suffix));
  };
  if (fused) groups.splits.push_back(splits(static_cast<int64_t>(kjts.size()), ""));
  for (const KjtAllToAll& kjt : kjts) {
    if (!fused) groups.splits.push_back(splits(1, fmt::format(" {}", kjt.sharding)));
    groups.lengths.push_back(graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllToAll, members, 0, kjt.lengths},
        fmt::format("ncclKernel_AllToAll input_dist {} {} lengths{}", label, kjt.sharding,
                    suffix)));
    groups.values.push_back(graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllToAll, members, 0, kjt.values},
        fmt::format("ncclKernel_AllToAll input_dist {} {} values{}", label, kjt.sharding, suffix)));
  }
  return groups;
}

/// embeddings.two_d, a training iteration that syncs (two_d_syncs) on more than one replica:
/// per replica group, the all-reduce of the weights its ranks hold and of their fused optimizer
/// state (replica_sync_bytes; none where there are no such bytes), set in every sharding
/// group's IterationGroups.
void add_replica_sync_groups(const DlrmConfig& config, const DlrmGraph& built, uint32_t it,
                             std::vector<IterationGroups>& out, TaskGraph& graph) {
  const ShardingGroups& layout = built.sharding_groups;
  if (config.mode != DlrmMode::kTrain || layout.groups() == 1 || !two_d_syncs(config.two_d, it)) {
    return;
  }
  std::vector<CollectiveId> weights(layout.group_size, 0);
  std::vector<CollectiveId> state(layout.group_size, 0);
  for (uint32_t p = 0; p < layout.group_size; ++p) {
    std::vector<RankId> members;
    for (const uint32_t r : layout.replica_group(p))
      members.push_back(built.ranks[r]);
    const ReplicaSyncBytes bytes =
        replica_sync_bytes(built.placement, config.tables, config.embedding_dim, config.optimizer,
                           dtype_bytes(config.embedding_dtype), p);
    if (bytes.weights > 0) {
      weights[p] = graph.add_collective_group(
          CollectiveDesc{CollectiveKind::kAllReduce, members, bytes.weights, {}},
          fmt::format("ncclKernel_AllReduce 2d_weight_sync replica group {}", p));
    }
    if (config.two_d.sync_optimizer_state && bytes.optimizer_state > 0) {
      state[p] = graph.add_collective_group(
          CollectiveDesc{CollectiveKind::kAllReduce, members, bytes.optimizer_state, {}},
          fmt::format("ncclKernel_AllReduce 2d_optimizer_sync replica group {}", p));
    }
  }
  for (IterationGroups& groups : out) {
    groups.weight_sync = weights;
    groups.optimizer_sync = state;
  }
}

/// Table-row-wise: the ranks of node `node` (its `local` ranks in order).
std::vector<RankId> node_members(const DlrmGraph& built, uint32_t node, uint32_t local) {
  return {built.ranks.begin() + node * local, built.ranks.begin() + (node + 1) * local};
}

/// Table-row-wise: bytes of one sample's pooled embeddings of node `node`'s tables (the
/// forward reduce-scatter moves a global batch of them, the backward all-gather each rank's
/// share of it).
int64_t node_pooled_bytes_per_sample(const DlrmConfig& config, const ExchangeSizes& sizes,
                                     uint32_t node) {
  return sizes.node_tables[node] * config.embedding_dim * sizes.a2a_bytes;
}

/// Table-row-wise: local rank `local_rank` of every one of `nodes` nodes (one rail).
std::vector<RankId> rail_members(const DlrmGraph& built, uint32_t local_rank, uint32_t local,
                                 uint32_t nodes) {
  std::vector<RankId> members;
  for (uint32_t k = 0; k < nodes; ++k)
    members.push_back(built.ranks[k * local + local_rank]);
  return members;
}

/// One batch's forward exchange, one ForwardExchangeGroups per sharding group (`label`, when
/// not empty, names the batch in the collectives' names): the all-to-all and the row-wise
/// reduce-scatter of each sharding group, then table-row-wise's reduce-scatter per node and
/// all-to-all per local rank (one sharding group: dlrm_config.h refuses them under two_d).
std::vector<ForwardExchangeGroups> add_forward_exchange_groups(
    const DlrmConfig& config, const DlrmGraph& built, const EmbeddingExchange& exchange,
    const ExchangeSizes& sizes, const ShardingGroupMembers& sharding, std::string_view label,
    TaskGraph& graph) {
  std::vector<ForwardExchangeGroups> out(sharding.members.size());
  const std::string batch = label.empty() ? std::string() : fmt::format(" {}", label);
  for (size_t g = 0; g < out.size(); ++g) {
    if (exchange.all_to_all) {
      out[g].all_to_all = graph.add_collective_group(
          CollectiveDesc{CollectiveKind::kAllToAll, sharding.members[g], 0, sizes.forward},
          "ncclKernel_AllToAll fwd" + batch + sharding.suffix[g]);
    }
    if (exchange.row_wise) {
      out[g].reduce_scatter = graph.add_collective_group(
          CollectiveDesc{
              CollectiveKind::kReduceScatter, sharding.members[g], sizes.reduce_scatter_bytes, {}},
          "ncclKernel_ReduceScatter row-wise fwd" + batch + sharding.suffix[g]);
    }
  }
  const uint32_t local = built.placement.ranks_per_node;
  const auto nodes = static_cast<uint32_t>(built.sharding_groups.group_size / local);
  ForwardExchangeGroups& groups = out.front();
  groups.node_reduce_scatter.assign(nodes, 0);
  groups.cross_all_to_all.assign(local, 0);
  if (!exchange.table_row_wise) return out;
  for (uint32_t k = 0; k < nodes && local > 1; ++k) {
    if (sizes.node_tables[k] == 0) continue;
    groups.node_reduce_scatter[k] = graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kReduceScatter,
                       node_members(built, k, local),
                       config.global_batch * node_pooled_bytes_per_sample(config, sizes, k),
                       {}},
        fmt::format("ncclKernel_ReduceScatter table-row-wise node {} fwd{}", k, batch));
  }
  for (uint32_t j = 0; j < local && nodes > 1; ++j) {
    groups.cross_all_to_all[j] = graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllToAll, rail_members(built, j, local, nodes), 0,
                       sizes.cross_forward},
        fmt::format("ncclKernel_AllToAll table-row-wise local rank {} fwd{}", j, batch));
  }
  return out;
}

/// The collective groups of iteration `it`, one IterationGroups per sharding group (the DDP
/// buckets' and the data-parallel tables' shared by all: they span every rank). Groups are added
/// step by step, each step for every sharding group in turn: a batch's input distribution
/// (splits, lengths, values) as one step, although a pipelined rank launches the batch's forward
/// exchange between its splits and its tensors; every rank launches them in the same order
/// (rank_emitter.h), which is what the comm streams need.
std::vector<IterationGroups> add_iteration_groups(const DlrmConfig& config, const DlrmGraph& built,
                                                  const EmbeddingExchange& exchange,
                                                  const ExchangeSizes& sizes,
                                                  const std::vector<KjtAllToAll>& kjts,
                                                  const ShardingGroupMembers& sharding, uint32_t it,
                                                  TaskGraph& graph) {
  const size_t n = built.ranks.size();
  const size_t group_count = sharding.members.size();
  std::vector<IterationGroups> out(group_count);
  const bool pipelined = config.train_pipeline != TrainPipeline::kNone;
  const bool semi_sync = config.train_pipeline == TrainPipeline::kSemiSync;
  const auto add_input_dists = [&](InputDistGroups IterationGroups::*batch, std::string_view label,
                                   bool fused) {
    for (size_t g = 0; g < group_count; ++g) {
      out[g].*batch =
          add_input_dist_groups(sharding.members[g], kjts, fused, label, sharding.suffix[g], graph);
    }
  };
  const auto add_forward_exchange = [&](ForwardExchangeGroups IterationGroups::*batch,
                                        std::string_view label) {
    if (n == 1) return;
    std::vector<ForwardExchangeGroups> groups =
        add_forward_exchange_groups(config, built, exchange, sizes, sharding, label, graph);
    for (size_t g = 0; g < group_count; ++g)
      out[g].*batch = std::move(groups[g]);
  };
  // fill_pipeline: batch 0's input distribution; semi-sync also batch 0's lookups and forward
  // exchange, then batch 1's input distribution.
  if (pipelined && it == 0)
    add_input_dists(&IterationGroups::first_batch_input_dist, "first batch", true);
  if (semi_sync && it == 0) {
    add_forward_exchange(&IterationGroups::first_batch_forward, "first batch");
    add_input_dists(&IterationGroups::second_batch_input_dist, "second batch", true);
  }
  add_input_dists(&IterationGroups::input_dist,
                  !pipelined ? "batch" : (semi_sync ? "batch after next" : "next batch"),
                  pipelined);
  add_forward_exchange(&IterationGroups::forward, semi_sync ? "next batch" : "");
  if (n > 1) {
    const auto add = [&](CollectiveKind kind, int64_t bytes, const AllToAllSizes& a2a,
                         const std::string& name, const std::vector<RankId>& members) {
      return graph.add_collective_group(CollectiveDesc{kind, members, bytes, a2a}, name);
    };
    const auto all_reduce_buckets = [&](const std::vector<DdpBucket>& buckets,
                                        std::string_view module) {
      std::vector<CollectiveId> ids;
      for (size_t k = 0; k < buckets.size(); ++k) {
        ids.push_back(add(CollectiveKind::kAllReduce, buckets[k].bytes, {},
                          fmt::format("ncclKernel_AllReduce {} bucket {}", module, k),
                          built.ranks));
      }
      return ids;
    };
    const std::vector<CollectiveId> top = all_reduce_buckets(built.top_buckets, "top");
    for (size_t g = 0; g < group_count; ++g) {
      out[g].top = top;
      if (exchange.all_to_all) {
        out[g].a2a_backward =
            add(CollectiveKind::kAllToAll, 0, sizes.backward,
                "ncclKernel_AllToAll bwd" + sharding.suffix[g], sharding.members[g]);
      }
      if (exchange.row_wise) {
        out[g].all_gather =
            add(CollectiveKind::kAllGather, sizes.all_gather_bytes, {},
                "ncclKernel_AllGather row-wise bwd" + sharding.suffix[g], sharding.members[g]);
      }
    }
    const std::vector<CollectiveId> bottom = all_reduce_buckets(built.bottom_buckets, "bottom");
    CollectiveId data_parallel = 0;
    if (exchange.data_parallel) {
      data_parallel = add(CollectiveKind::kAllReduce, sizes.data_parallel_bytes, {},
                          "ncclKernel_AllReduce data-parallel tables", built.ranks);
    }
    const uint32_t local = built.placement.ranks_per_node;
    const auto nodes = static_cast<uint32_t>(built.sharding_groups.group_size / local);
    for (IterationGroups& groups : out) {
      groups.bottom = bottom;
      groups.data_parallel = data_parallel;
      groups.node_all_gather.assign(nodes, 0);
      groups.cross_a2a_backward.assign(local, 0);
    }
    // Table-row-wise backward: one sharding group (dlrm_config.h refuses it under two_d).
    IterationGroups& groups = out.front();
    if (exchange.table_row_wise) {
      for (uint32_t k = 0; k < nodes && local > 1; ++k) {
        if (sizes.node_tables[k] == 0) continue;
        groups.node_all_gather[k] = graph.add_collective_group(
            CollectiveDesc{
                CollectiveKind::kAllGather,
                node_members(built, k, local),
                config.global_batch / local * node_pooled_bytes_per_sample(config, sizes, k),
                {}},
            fmt::format("ncclKernel_AllGather table-row-wise node {} bwd", k));
      }
      for (uint32_t j = 0; j < local && nodes > 1; ++j) {
        groups.cross_a2a_backward[j] = graph.add_collective_group(
            CollectiveDesc{CollectiveKind::kAllToAll, rail_members(built, j, local, nodes), 0,
                           sizes.cross_backward},
            fmt::format("ncclKernel_AllToAll table-row-wise local rank {} bwd", j));
      }
    }
  }
  add_replica_sync_groups(config, built, it, out, graph);
  return out;
}

/// A rank's streams, in the order of their indices in rank_ops.h.
std::vector<std::string> rank_streams(const DlrmConfig& config) {
  std::vector<std::string> streams{"compute", "comm"};
  if (config.input == InputPipeline::kPrefetch) streams.emplace_back("data");
  if (config.train_pipeline != TrainPipeline::kNone) streams.emplace_back("data_dist");
  return streams;
}

}  // namespace

DlrmGraph generate_dlrm(const DlrmConfig& config, const DlrmPlacementInputs& inputs,
                        TaskGraph& graph) {
  check_inputs(config, inputs);
  DlrmGraph built;
  built.local_batch = config.global_batch / inputs.ranks;
  built.sharding_groups = ShardingGroups::of(config.two_d, inputs.ranks);
  const uint32_t shard_ranks = built.sharding_groups.group_size;
  if (inputs.ranks % shard_ranks != 0) {
    throw std::invalid_argument(fmt::format("DLRM: sharding groups of {} ranks do not divide {}",
                                            shard_ranks, inputs.ranks));
  }
  built.group_batch = built.local_batch * shard_ranks;
  const bool hybrid =
      config.bottom_mlp_placement == BottomMlpPlacement::kFirstRank && inputs.ranks > 1;
  // One placement for S ranks, on the capacities of sharding group 0's (every group holds it).
  std::vector<int64_t> capacity;
  for (const uint32_t r : built.sharding_groups.sharding_group(0))
    capacity.push_back(inputs.memory_capacity_bytes[r]);
  // DeepLearningExamples' get_device_mapping: above 4 GPUs the bottom MLP's GPU holds no table
  // (place_dlrm_tables: the sharder's tableless_ranks).
  built.placement = place_dlrm_tables(config, capacity, inputs.ranks_per_node);

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
        graph.add_rank(RankInfo{fmt::format("rank {}", r), 1, rank_streams(config)}));
  }

  const size_t n = inputs.ranks;
  const TablePlacement& placement = built.placement;
  EmbeddingExchange exchange;
  // The embeddings' exchanges run within a sharding group; the data-parallel tables' DDP
  // all-reduce over every rank.
  exchange.all_to_all = shard_ranks > 1 && (!placement.pieces.empty() || hybrid);
  const bool frequent_rows =
      std::any_of(placement.hybrid.begin(), placement.hybrid.end(),
                  [&](uint32_t t) { return config.tables[t].frequent_rows > 0; });
  exchange.row_wise = shard_ranks > 1 && (!placement.row_wise.empty() || !placement.hybrid.empty());
  exchange.data_parallel = n > 1 && (!placement.data_parallel.empty() || frequent_rows);
  exchange.table_row_wise = shard_ranks > 1 && !placement.table_row_wise.empty();

  const std::vector<KjtAllToAll> kjts = kjt_all_to_alls(config, built);
  std::vector<std::unique_ptr<RankEmitter>> emitters;
  emitters.reserve(n);
  for (uint32_t r = 0; r < inputs.ranks; ++r) {
    emitters.push_back(
        std::make_unique<RankEmitter>(config, built, top_widths, exchange, kjts, r, graph));
  }

  const ExchangeSizes sizes = exchange_sizes(config, built, hybrid);
  const ShardingGroupMembers sharding = sharding_group_members(built);
  for (uint32_t it = 0; it < inputs.iterations; ++it) {
    const std::vector<IterationGroups> groups =
        add_iteration_groups(config, built, exchange, sizes, kjts, sharding, it, graph);
    for (uint32_t r = 0; r < inputs.ranks; ++r)
      emitters[r]->iteration(it, groups[built.sharding_groups.group_of(r)]);
  }
  for (const std::unique_ptr<RankEmitter>& e : emitters)
    e->end_of_loop(inputs.iterations);
  return built;
}

}  // namespace upsim
