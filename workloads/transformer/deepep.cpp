#include "workloads/transformer/deepep.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace upsim {
namespace {

/// One row of DeepEP's config tables (deep_ep/buffer.py @ 567632dd, get_dispatch_config and
/// get_combine_config): Config(num_sms, nvl send, nvl recv, rdma send, rdma recv) chunk tokens.
struct DeepEpChunks {
  int64_t ranks;
  int64_t nvl_recv;
  int64_t dispatch_rdma_send;
  int64_t combine_rdma_send;
};
/// Both tables' NVLink receive chunks agree per size; the RDMA receive chunk is 128 in both.
constexpr std::array<DeepEpChunks, 12> kDeepEpConfigs = {{
    {2, 256, 6, 6},
    {4, 256, 6, 6},
    {8, 256, 6, 6},
    {16, 288, 20, 12},
    {24, 288, 8, 8},
    {32, 288, 8, 8},
    {48, 288, 8, 8},
    {64, 288, 8, 8},
    {96, 480, 12, 8},
    {128, 560, 12, 8},
    {144, 720, 12, 8},
    {160, 720, 12, 8},
}};
constexpr int64_t kRdmaRecvTokens = 128;
/// csrc/config.hpp: kNumMaxTopK and kNumMaxScales slots per buffered token, sizeof(SourceMeta)
/// (two ints, csrc/kernels/internode.cu), sizeof(int4).
constexpr int64_t kMaxTopK = 128;
constexpr int64_t kMaxScales = 128;
constexpr int64_t kSourceMetaBytes = 8;
constexpr int64_t kInt4Bytes = 16;

const DeepEpChunks* find_config(int64_t ranks) {
  for (const DeepEpChunks& c : kDeepEpConfigs) {
    if (c.ranks == ranks) return &c;
  }
  return nullptr;
}

int64_t align_up(int64_t value, int64_t to) {
  return (value + to - 1) / to * to;
}

/// Each member's place among its node's members, and the members of every node, in group order.
struct NodeLayout {
  std::vector<size_t> local;
  std::map<uint32_t, std::vector<size_t>> nodes;
};

NodeLayout node_layout(const std::vector<uint32_t>& member_node) {
  NodeLayout out;
  out.local.resize(member_node.size());
  for (size_t i = 0; i < member_node.size(); ++i) {
    std::vector<size_t>& on = out.nodes[member_node[i]];
    out.local[i] = on.size();
    on.push_back(i);
  }
  return out;
}

}  // namespace

bool deepep_supports_ranks(int64_t ranks) {
  return find_config(ranks) != nullptr;
}

std::vector<uint32_t> default_member_nodes(size_t members) {
  std::vector<uint32_t> nodes(members);
  for (size_t i = 0; i < members; ++i)
    nodes[i] = static_cast<uint32_t>(static_cast<int64_t>(i) / kDeepEpNvlPeers);
  return nodes;
}

int32_t flex_dispatch_sms(bool hybrid, int32_t sms, bool across_nodes) {
  if (sms > 0) return sms;
  if (!hybrid) return kDeepEpDefaultSms;
  return across_nodes ? kHybridEpInternodeSms : kHybridEpIntranodeSms;
}

std::optional<std::string> hybridep_layout_unsupported(const std::vector<uint32_t>& member_node) {
  const NodeLayout layout = node_layout(member_node);
  const size_t per_node = layout.nodes.begin()->second.size();
  for (const auto& [node, members] : layout.nodes) {
    if (members.size() != per_node) {
      return fmt::format(
          "HybridEP's kernels take the same number of expert-parallel ranks on every node "
          "(NUM_OF_RANKS_PER_NODE); this group of {} ranks has {} on one node and {} on another",
          member_node.size(), per_node, members.size());
    }
  }
  return std::nullopt;
}

std::optional<std::string> deepep_layout_unsupported(const std::vector<uint32_t>& member_node) {
  const auto ranks = static_cast<int64_t>(member_node.size());
  if (!deepep_supports_ranks(ranks)) {
    return fmt::format(
        "DeepEP runs expert-parallel groups of 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144 or 160 "
        "ranks (its Buffer.get_dispatch_config), not {}",
        ranks);
  }
  const NodeLayout layout = node_layout(member_node);
  if (layout.nodes.size() == 1) return std::nullopt;
  for (const auto& [node, members] : layout.nodes) {
    if (static_cast<int64_t>(members.size()) != kDeepEpNvlPeers) {
      return fmt::format(
          "DeepEP's internode kernels take whole nodes of {} expert-parallel ranks each "
          "(NUM_MAX_NVL_PEERS); this group of {} ranks spans {} nodes with {} on one of them",
          kDeepEpNvlPeers, ranks, layout.nodes.size(), members.size());
    }
  }
  return std::nullopt;
}

double deepep_miss_chance(double experts, double weight, int64_t top_k) {
  const double k = static_cast<double>(top_k);
  if (weight <= 0.0) return 1.0;
  const double rest = experts - std::min(weight, experts);
  if (rest - k + 1.0 <= 0.0) return 0.0;
  const double miss = std::exp(std::lgamma(rest + 1.0) + std::lgamma(experts - k + 1.0) -
                               std::lgamma(rest - k + 1.0) - std::lgamma(experts + 1.0));
  return std::clamp(miss, 0.0, 1.0);  // lgamma's rounding
}

std::vector<int64_t> deepep_send_matrix(const std::vector<uint32_t>& member_node,
                                        const std::vector<double>& expert_weight, int64_t experts,
                                        int64_t top_k, int64_t tokens, int64_t row_bytes,
                                        bool combine) {
  const size_t n = member_node.size();
  if (expert_weight.size() != n) {
    throw std::invalid_argument("deepep_send_matrix: one expert weight per member");
  }
  const NodeLayout layout = node_layout(member_node);
  const auto e = static_cast<double>(experts);
  std::vector<double> reach(n);  // chance a token reaches member j
  for (size_t j = 0; j < n; ++j)
    reach[j] = 1.0 - deepep_miss_chance(e, expert_weight[j], top_k);
  std::map<uint32_t, double> node_reach;
  for (const auto& [node, members] : layout.nodes) {
    double weight = 0.0;
    for (size_t j : members)
      weight += expert_weight[j];
    node_reach[node] = 1.0 - deepep_miss_chance(e, weight, top_k);
  }
  const double row = static_cast<double>(tokens) * static_cast<double>(row_bytes);
  std::vector<double> send(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [node, members] : layout.nodes) {
      // Within the sender's node it sends each rank directly; on another node, to its NVLink
      // index there, which forwards.
      const size_t via = node == member_node[i] ? i : members.at(layout.local[i]);
      if (via != i) send[i * n + via] += row * node_reach.at(node);
      for (size_t j : members)
        send[via * n + j] += row * reach[j];
    }
  }
  std::vector<int64_t> out(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const double bytes = combine ? send[j * n + i] : send[i * n + j];
      out[i * n + j] = static_cast<int64_t>(std::llround(bytes));
    }
  }
  return out;
}

int64_t deepep_buffer_bytes(int64_t ranks, int64_t hidden_bytes, int32_t sms) {
  const DeepEpChunks* config = find_config(ranks);
  if (config == nullptr) {
    throw std::invalid_argument(fmt::format("deepep_buffer_bytes: {} ranks unsupported", ranks));
  }
  const int64_t channels = sms / 2;
  const int64_t rdma_ranks = std::max<int64_t>(ranks / kDeepEpNvlPeers, 1);
  const int64_t nvl_ranks = std::min(ranks, kDeepEpNvlPeers);
  const int64_t per_token = hidden_bytes + kSourceMetaBytes + kMaxTopK * kDeepEpTopkIdxBytes +
                            kMaxTopK * 4 + kMaxScales * 4;
  int64_t nvl = channels * nvl_ranks * (2 * rdma_ranks + 3) * 4 +
                channels * nvl_ranks * config->nvl_recv * per_token;
  nvl = align_up(nvl, 128);
  if (ranks <= kDeepEpNvlPeers) return nvl;
  // The receive chunk is rounded up to a multiple of the send chunk (Config's constructor).
  const int64_t rdma_recv = std::max(align_up(kRdmaRecvTokens, config->dispatch_rdma_send),
                                     align_up(kRdmaRecvTokens, config->combine_rdma_send));
  int64_t rdma = channels * rdma_ranks * (kDeepEpNvlPeers * 2 + 2) * 2 * 4 +
                 channels * rdma_ranks * rdma_recv * 2 * (per_token + kInt4Bytes) + 1048576;
  rdma = align_up(rdma, 128);
  return nvl + rdma;
}

int64_t hybridep_buffer_bytes(int64_t ranks, int64_t tokens_per_rank, int64_t hidden,
                              int64_t experts_per_rank) {
  constexpr int64_t kTokenBytes = 2;  // bf16 (Megatron-Core asserts no fp8 dispatch)
  constexpr int64_t kProbBytes = 4;
  constexpr int64_t kScaleBlock = 128;  // one fp32 scaling factor per 128 values
  const int64_t per_node = std::min(ranks, kDeepEpNvlPeers);
  const int64_t nodes = std::max<int64_t>(ranks / per_node, 1);
  const int64_t node_experts = experts_per_rank * per_node;
  const int64_t token = hidden * kTokenBytes;
  const int64_t scales = hidden / kScaleBlock * kProbBytes;
  const int64_t all_tokens = tokens_per_rank * per_node * nodes;
  int64_t bytes = all_tokens * (token + node_experts * kProbBytes + scales);
  if (nodes > 1) {
    const int64_t remote = tokens_per_rank * (nodes - 1);
    bytes += tokens_per_rank * (token + nodes * node_experts * kProbBytes + scales);
    bytes += remote * (token + node_experts * kProbBytes + scales);
    bytes += 2 * remote * (token + node_experts * kProbBytes);
  }
  return bytes;
}

}  // namespace upsim
