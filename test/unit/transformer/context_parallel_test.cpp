// Context parallel's three exchanges (ParallelismConfig::context_comm): each rank's attention
// work is the same whichever exchange moves the sequence (the ring's steps, the all-gathered
// K / V's two load-balanced chunks, Ulysses' whole sequence on a share of the heads), and each
// moves the bytes Transformer Engine's implementation moves.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "calibration/roofline_kernel_cost.h"
#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim {
namespace {

struct ContextWork {
  std::map<int64_t, double> attention_flops;  ///< per CP rank (graph ranks 0 .. cp - 1)
  std::map<CollectiveKind, int64_t> bytes;    ///< rank 0's context-parallel collectives
};

ContextWork context_work(const TransformerConfig& c) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  ContextWork w;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind != TaskKind::kKernel) continue;
    const KernelDesc& k = g.kernel(t);
    if (k.cls == KernelClass::kAttention) w.attention_flops[task.rank] += attention_work(k).flops;
  }
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    const CollectiveDesc& col = g.collective(id);
    if (col.parallel_dim != ParallelDim::kContext || col.members.front() != 0) continue;
    w.bytes[col.kind] += col.kind == CollectiveKind::kAllToAll && !col.send_bytes.empty()
                             ? col.send_bytes.sent_by(0)
                             : col.bytes;
  }
  return w;
}

TransformerConfig long_context(ContextComm comm) {
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 32768);
  c.parallelism.context = 4;
  c.parallelism.context_comm = comm;
  return c;
}

TEST(ContextParallel, EveryExchangeGivesEachRankTheSameAttentionWork) {
  const ContextWork ring = context_work(long_context(ContextComm::kP2p));
  const ContextWork gather = context_work(long_context(ContextComm::kAllGather));
  const ContextWork ulysses = context_work(long_context(ContextComm::kAllToAll));
  ASSERT_EQ(ring.attention_flops.size(), 4U);
  for (const auto& [rank, flops] : ring.attention_flops) {
    EXPECT_NEAR(gather.attention_flops.at(rank) / flops, 1.0, 1e-3) << "rank " << rank;
    EXPECT_NEAR(ulysses.attention_flops.at(rank) / flops, 1.0, 1e-3) << "rank " << rank;
  }
}

TEST(ContextParallel, EachExchangeMovesWhatTransformerEngineMoves) {
  const TransformerConfig c = long_context(ContextComm::kAllGather);
  const LayerSizes z = layer_sizes(c);
  const int64_t e = 2;  // bf16
  const int64_t kv = 2 * z.b * z.s * z.kv_heads * z.head_dim * e;
  const int64_t q = z.b * z.s * z.heads * z.head_dim * e;
  const int64_t passes = c.layers * c.micro_batches();
  // all_gather: K / V gathered in the forward and again in the backward; dK / dV
  // reduce-scattered (their input: the whole sequence's).
  const ContextWork gather = context_work(c);
  EXPECT_EQ(gather.bytes.at(CollectiveKind::kAllGather), passes * 2 * kv);
  EXPECT_EQ(gather.bytes.at(CollectiveKind::kReduceScatter), passes * 4 * kv);
  // a2a: Q, K, V and the output each way, each rank keeping its own share of every buffer.
  const ContextWork ulysses = context_work(long_context(ContextComm::kAllToAll));
  const int64_t cp = c.parallelism.context;
  EXPECT_EQ(ulysses.bytes.at(CollectiveKind::kAllToAll),
            passes * 2 * ((q + kv) / cp + q / cp) * (cp - 1));
}

}  // namespace
}  // namespace upsim
