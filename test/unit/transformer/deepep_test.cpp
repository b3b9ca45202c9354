// DeepEP's dispatch sizes, layout rules and buffers (workloads/transformer/deepep.h): the chance
// a token reaches a rank against the hypergeometric count, a token sent once per rank inside a
// node and once per node across nodes, the combine the dispatch's transpose, the layouts DeepEP
// refuses, and the buffers of csrc/config.hpp's size hints worked out by hand.
#include "workloads/transformer/deepep.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace upsim {
namespace {

/// C(n - w, k) / C(n, k) for integers, as a product.
double hypergeometric_miss(int64_t n, int64_t w, int64_t k) {
  double miss = 1.0;
  for (int64_t i = 0; i < k; ++i)
    miss *= static_cast<double>(n - w - i) / static_cast<double>(n - i);
  return std::max(miss, 0.0);
}

TEST(DeepEp, TheMissChanceIsTheHypergeometricOneAndMonotoneInTheLoad) {
  for (const auto& [n, w, k] : {std::tuple<int64_t, int64_t, int64_t>{128, 8, 8},
                                {256, 4, 8},
                                {64, 32, 8},
                                {8, 1, 2},
                                {8, 7, 2}}) {
    EXPECT_NEAR(deepep_miss_chance(static_cast<double>(n), static_cast<double>(w), k),
                hypergeometric_miss(n, w, k), 1e-12)
        << n << " " << w << " " << k;
  }
  EXPECT_DOUBLE_EQ(deepep_miss_chance(128, 0, 8), 1.0);
  EXPECT_DOUBLE_EQ(deepep_miss_chance(128, 128, 8), 0.0);
  EXPECT_DOUBLE_EQ(deepep_miss_chance(8, 7.5, 2), 0.0);  // fewer than k experts left
  double last = 1.0;
  for (double w = 0.5; w < 100.0; w += 0.5) {
    const double miss = deepep_miss_chance(128, w, 8);
    EXPECT_LT(miss, last) << w;
    last = miss;
  }
}

constexpr int64_t kTokens = 4096;
constexpr int64_t kRow = 7168 * 2;

// Inside one node every pair moves directly, each token once to each rank it reaches: 1 -
// C(56, 8) / C(64, 8) of the tokens per rank with 8 of 64 experts each, where the all-to-all
// dispatcher sends each of the 8 routed copies.
TEST(DeepEp, InsideANodeATokenGoesOnceToEachRankItReaches) {
  const std::vector<uint32_t> nodes(8, 0);
  const std::vector<double> weight(8, 8.0);
  const std::vector<int64_t> send = deepep_send_matrix(nodes, weight, 64, 8, kTokens, kRow, false);
  const double reach = 1.0 - hypergeometric_miss(64, 8, 8);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      EXPECT_EQ(send[i * 8 + j], std::llround(static_cast<double>(kTokens * kRow) * reach))
          << i << " -> " << j;
    }
  }
  // Fewer bytes than the routed copies (kTokens x 8 / 8 per pair).
  EXPECT_LT(send[1], kTokens * kRow);
}

// Across two nodes of 8: a sender reaches the other node through the rank of its own NVLink
// index there, once per token that reaches the node; that rank forwards to its node's ranks.
// Every rank receives what direct sends would bring it; only the network carries less.
TEST(DeepEp, AcrossNodesATokenCrossesOncePerNodeAndIsForwarded) {
  std::vector<uint32_t> nodes(16);
  for (size_t i = 0; i < 16; ++i)
    nodes[i] = static_cast<uint32_t>(i / 8);
  std::vector<double> weight(16, 8.0);
  weight[0] = 12.0;  // a busier rank
  for (size_t j = 1; j < 16; ++j)
    weight[j] = (128.0 - 12.0) / 15.0;
  const std::vector<int64_t> send = deepep_send_matrix(nodes, weight, 128, 8, kTokens, kRow, false);
  double node1_weight = 0.0;
  for (size_t j = 8; j < 16; ++j)
    node1_weight += weight[j];
  const double node1_reach = 1.0 - deepep_miss_chance(128, node1_weight, 8);
  const auto row = static_cast<double>(kTokens * kRow);
  double cross = 0.0;
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 8; j < 16; ++j) {
      const int64_t expected = j == i + 8 ? std::llround(row * node1_reach) : 0;
      EXPECT_EQ(send[i * 16 + j], expected) << i << " -> " << j;
      cross += static_cast<double>(send[i * 16 + j]);
    }
  }
  // Each rank receives from its node's ranks (direct or forwarded) 16 senders' worth.
  for (size_t j = 0; j < 16; ++j) {
    double received = 0.0;
    for (size_t i = 0; i < 16; ++i)
      if (nodes[i] == nodes[j]) received += static_cast<double>(send[i * 16 + j]);
    const double reach = 1.0 - deepep_miss_chance(128, weight[j], 8);
    EXPECT_NEAR(received, 16.0 * row * reach, 16.0) << j;
  }
  // Direct rank-to-rank sends would cross with every (token, rank) pair on the other node.
  double direct = 0.0;
  for (size_t j = 8; j < 16; ++j)
    direct += 8.0 * row * (1.0 - deepep_miss_chance(128, weight[j], 8));
  EXPECT_LT(cross, direct / 3.0);
  // The combine brings every row back the same way.
  const std::vector<int64_t> combine =
      deepep_send_matrix(nodes, weight, 128, 8, kTokens, kRow, true);
  for (size_t i = 0; i < 16; ++i)
    for (size_t j = 0; j < 16; ++j)
      EXPECT_EQ(combine[i * 16 + j], send[j * 16 + i]);
}

TEST(DeepEp, RefusesTheGroupsItsKernelsCannotRun) {
  EXPECT_FALSE(deepep_layout_unsupported(std::vector<uint32_t>(8, 3)).has_value());
  EXPECT_FALSE(deepep_layout_unsupported(std::vector<uint32_t>(4, 0)).has_value());
  std::vector<uint32_t> two_nodes(16, 0);
  for (size_t i = 8; i < 16; ++i)
    two_nodes[i] = 1;
  EXPECT_FALSE(deepep_layout_unsupported(two_nodes).has_value());
  const auto size = deepep_layout_unsupported(std::vector<uint32_t>(12, 0));
  ASSERT_TRUE(size.has_value());
  EXPECT_NE(size->find("not 12"), std::string::npos) << *size;
  std::vector<uint32_t> four_nodes(16);
  for (size_t i = 0; i < 16; ++i)
    four_nodes[i] = static_cast<uint32_t>(i / 4);
  const auto spread = deepep_layout_unsupported(four_nodes);
  ASSERT_TRUE(spread.has_value());
  EXPECT_NE(spread->find("whole nodes of 8"), std::string::npos) << *spread;
  EXPECT_TRUE(deepep_supports_ranks(160));
  EXPECT_FALSE(deepep_supports_ranks(256));
}

// csrc/config.hpp's hints with deep_ep/buffer.py's configs, 20 SMs (10 channels), hidden 2048
// in bf16 (4096 bytes): per buffered token hidden + SourceMeta (8) + 128 int64 top-k indices
// + 128 fp32 weights + 128 fp32 scales = 6152 bytes.
TEST(DeepEp, BuffersAreTheSizeHintsOfItsConfigs) {
  // 8 ranks: NVLink only, 256 receive tokens per channel and peer.
  const int64_t nvl8 = 10 * 8 * (2 * 1 + 3) * 4 + 10 * 8 * 256 * 6152;
  EXPECT_EQ(deepep_buffer_bytes(8, 4096, 20), (nvl8 + 127) / 128 * 128);
  // 16 ranks: 288 NVLink receive tokens; RDMA: 2 RDMA ranks, the receive chunk 128 rounded up to
  // the dispatch's send chunk 20 (140), two copies of each token's bytes plus an int4, 1 MiB.
  const int64_t nvl16 = 10 * 8 * (2 * 2 + 3) * 4 + 10 * 8 * 288 * 6152;
  const int64_t rdma16 = 10 * 2 * (8 * 2 + 2) * 2 * 4 + 10 * 2 * 140 * 2 * (6152 + 16) + 1048576;
  EXPECT_EQ(deepep_buffer_bytes(16, 4096, 20),
            (nvl16 + 127) / 128 * 128 + (rdma16 + 127) / 128 * 128);
  EXPECT_GT(deepep_buffer_bytes(8, 4096, 24), deepep_buffer_bytes(8, 4096, 20));
}

// HybridEP's buffers (hybrid-ep branch, intranode.cu and internode_doca.cu) for 4096 tokens a rank
// of hidden 2048 (4096 bf16 bytes and 16 fp32 scaling factors, 64 bytes) with 8 experts a rank:
// one node of 8 holds NVLink buffers for all 8 x 4096 tokens with 64 fp32 probabilities each;
// two nodes of 8 twice as many, and RDMA send, receive and combine buffers.
TEST(DeepEp, HybridEpBuffersHoldTheWorstCaseOfEveryTokenOnOneRank) {
  EXPECT_EQ(hybridep_buffer_bytes(8, 4096, 2048, 8), 8 * 4096 * (4096 + 64 * 4 + 64));
  const int64_t nvl = 16 * 4096 * (4096 + 64 * 4 + 64);
  const int64_t send = 4096 * (4096 + 2 * 64 * 4 + 64);
  const int64_t receive = 4096 * (4096 + 64 * 4 + 64);
  const int64_t combine = 2 * 4096 * (4096 + 64 * 4);
  EXPECT_EQ(hybridep_buffer_bytes(16, 4096, 2048, 8), nvl + send + receive + combine);
  EXPECT_EQ(nvl + send + receive + combine, 362283008);  // about 345.5 MiB
}

}  // namespace
}  // namespace upsim
