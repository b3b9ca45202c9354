#include "workloads/dlrm/dlrm_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/network_model.h"
#include "test/unit/dlrm/dlrm_test_support.h"
#include "workloads/dlrm/table_statistics.h"

namespace upsim {
namespace {

// Two ranks, three tables, dim 2. size_lookup_greedy costs: t0 = 2 x 10 x log10(100) = 40,
// t1 = 2 x 5 x log10(50) = 17.0, t2 = 2 x 1 x log10(10) = 2 -> t0 on rank 0, t1 and t2 on
// rank 1. Local batch 4. Interaction: T = 3, 6 pairs, top MLP input 2 + 6 = 8.
// DDP, fp32, ready order: top [8, 4, 1] = b1 4 B, W1 16 B, b0 16 B, W0 128 B -> first bucket
// (limit 16) {b1, W1} = 20 B, then {b0, W0} = 144 B; bottom [4, 2] = b0 8 B, W0 32 B -> 40 B.
constexpr const char* kTiny = R"(workload:
  model: dlrm
  global_batch: 8
  bottom_mlp: [4, 2]
  top_mlp: [4, 1]
  embeddings:
    dim: 2
    tables:
      - {rows: 100, pooling: 10}
      - {rows: 50, pooling: 5}
      - {rows: 10, pooling: 1}
  ddp_first_bucket: 16B
  ddp_bucket: 64B
)";

constexpr const char* kFourGpu = R"(workload:
  model: dlrm
  global_batch: 4096
  dtype: fp32
  bottom_mlp: [512, 1024, 256, 128]
  top_mlp: [1024, 512, 256, 1]
  interaction: dot
  embeddings:
    dim: 128
    index_bytes: 8
    tables:
      - {count: 16, rows: 4000000, pooling: 30}
      - {count: 16, rows: 500000, pooling: 10}
      - {count: 16, rows: 40000, pooling: 2}
  sharding: size_lookup_greedy
  ddp_bucket: 25MiB
)";

using dlrm_test::config_of;
using dlrm_test::inputs_of;

struct Counts {
  int kernels = 0, memcpys = 0, collectives = 0, records = 0, waits = 0, launches = 0;
  int host_syncs = 0, marks = 0, op_begins = 0, op_ends = 0, op_bodies = 0;
};

Counts count(const TaskGraph& g, RankId rank) {
  Counts c;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank != rank) continue;
    switch (t.kind) {
      case TaskKind::kKernel:
        ++c.kernels;
        break;
      case TaskKind::kMemcpy:
        ++c.memcpys;
        break;
      case TaskKind::kCollective:
        ++c.collectives;
        break;
      case TaskKind::kEventRecord:
        ++c.records;
        break;
      case TaskKind::kStreamWait:
        ++c.waits;
        break;
      case TaskKind::kLaunch:
        ++c.launches;
        break;
      case TaskKind::kHostSync:
        ++c.host_syncs;
        break;
      case TaskKind::kIterationMark:
        ++c.marks;
        break;
      case TaskKind::kCpuOp:
        if (t.phase == HostPhase::kOpBegin) ++c.op_begins;
        if (t.phase == HostPhase::kOpEnd) ++c.op_ends;
        if (t.phase == HostPhase::kOpBody) ++c.op_bodies;
        break;
    }
  }
  return c;
}

/// Kernels of `rank` named `op_name` (the leaf aten op), in issue order.
std::vector<KernelDesc> kernels_of(const TaskGraph& g, RankId rank, std::string_view op_name) {
  std::vector<KernelDesc> out;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank == rank && t.kind == TaskKind::kKernel && g.name(t.op_name) == op_name) {
      out.push_back(g.kernel(id));
    }
  }
  return out;
}

std::vector<int64_t> copies_of(const TaskGraph& g, RankId rank) {
  std::vector<int64_t> out;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    if (g.task(id).rank == rank && g.task(id).kind == TaskKind::kMemcpy) {
      out.push_back(g.transfer(id).bytes);
    }
  }
  return out;
}

TEST(DlrmGenerator, TinyTwoRankPlacementBucketsAndAllToAllSizes) {
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), g);
  ASSERT_EQ(built.ranks.size(), 2U);
  EXPECT_EQ(g.rank(built.ranks[1]).name, "rank 1");
  EXPECT_EQ(g.rank(built.ranks[1]).stream_names, (std::vector<std::string>{"compute", "comm"}));
  EXPECT_EQ(built.local_batch, 4);
  EXPECT_EQ(built.placement.tables_of_rank[0], (std::vector<uint32_t>{0}));
  EXPECT_EQ(built.placement.tables_of_rank[1], (std::vector<uint32_t>{1, 2}));
  ASSERT_EQ(built.top_buckets.size(), 2U);
  EXPECT_EQ(built.top_buckets[0].bytes, 20);
  EXPECT_EQ(built.top_buckets[1].bytes, 144);
  ASSERT_EQ(built.bottom_buckets.size(), 1U);
  EXPECT_EQ(built.bottom_buckets[0].bytes, 40);

  // Groups in comm-stream order: a2a fwd, top buckets, a2a bwd, bottom bucket.
  ASSERT_EQ(g.collective_count(), 5U);
  const CollectiveDesc& fwd = g.collective(0);
  EXPECT_EQ(fwd.kind, CollectiveKind::kAllToAll);
  EXPECT_EQ(fwd.members, (std::vector<RankId>{0, 1}));
  // Rank i sends 4 samples x T_i tables x dim 2 x 4 B to each rank: T_0 = 1, T_1 = 2.
  EXPECT_EQ(fwd.send_bytes, AllToAllSizes::dense(2, {32, 32, 64, 64}));
  // Outer products (O(n) memory at any scale), not dense matrices.
  EXPECT_TRUE(fwd.send_bytes.is_outer());
  EXPECT_EQ(g.collective(1).kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(g.collective(1).bytes, 20);
  EXPECT_EQ(g.collective(2).bytes, 144);
  const CollectiveDesc& bwd = g.collective(3);
  EXPECT_EQ(bwd.kind, CollectiveKind::kAllToAll);
  EXPECT_EQ(bwd.send_bytes, AllToAllSizes::dense(2, {32, 64, 32, 64}));
  EXPECT_TRUE(bwd.send_bytes.is_outer());
  EXPECT_EQ(g.collective(4).bytes, 40);
  EXPECT_EQ(dlrm_test::collective_order(g, 0), (std::vector<CollectiveId>{0, 1, 2, 3, 4}));
  EXPECT_EQ(dlrm_test::collective_order(g, 1), dlrm_test::collective_order(g, 0));
}

std::string with(const char* yaml, const std::string& from, const std::string& to) {
  std::string text(yaml);
  text.replace(text.find(from), from.size(), to);
  return text;
}

// fp16 embeddings: the tables take half the bytes, the lookups read 2-byte rows, the all-to-all
// moves 2-byte values, and casts convert between them and the fp32 MLPs (aten::to on each side).
TEST(DlrmGenerator, EmbeddingAndAllToAllDtypesReachTablesLookupsPayloadAndCasts) {
  const std::string fp16 = with(kTiny, "    dim: 2\n", "    dim: 2\n    dtype: fp16\n");
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(fp16.c_str(), 2), inputs_of(2, 1), g);
  EXPECT_EQ(built.placement.memory_bytes[0], 100 * 2 * 2);  // t0: 100 rows x dim 2 x 2 B
  // Rank i sends 4 samples x T_i tables x dim 2 x 2 B to each rank: half of fp32's.
  EXPECT_EQ(g.collective(0).send_bytes, AllToAllSizes::dense(2, {16, 16, 32, 32}));
  EXPECT_EQ(g.collective(3).send_bytes, AllToAllSizes::dense(2, {16, 32, 16, 32}));
  for (const char* lookup : {"fbgemm::split_embedding_codegen_lookup_sgd_function",
                             "fbgemm::split_embedding_backward_codegen_sgd"}) {
    const std::vector<KernelDesc> k = kernels_of(g, 0, lookup);
    ASSERT_EQ(k.size(), 1U) << lookup;
    EXPECT_EQ(k[0].dtype, DType::kFp16) << lookup;
  }
  // Payload = embeddings (fp16): casts only to and from the fp32 MLPs, b x T x D = 4 x 3 x 2.
  const std::vector<KernelDesc> casts = kernels_of(g, 0, "aten::copy_");
  ASSERT_EQ(casts.size(), 2U);
  EXPECT_EQ(casts[0].dtype, DType::kFp32);  // received fp16 -> fp32 for the interaction
  EXPECT_DOUBLE_EQ(casts[0].bytes_read, 24 * 2);
  EXPECT_DOUBLE_EQ(casts[0].bytes_written, 24 * 4);
  EXPECT_EQ(casts[1].dtype, DType::kFp16);  // fp32 gradients -> fp16 payload
  // fp32 everywhere (the default): no cast at all.
  TaskGraph plain;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), plain);
  EXPECT_TRUE(kernels_of(plain, 0, "aten::copy_").empty());
  // An fp32 payload for fp16 tables: two more casts around the lookups.
  TaskGraph mixed;
  generate_dlrm(config_of((fp16 + "  all_to_all_dtype: fp32\n").c_str(), 2), inputs_of(2, 1),
                mixed);
  EXPECT_EQ(kernels_of(mixed, 0, "aten::copy_").size(), 2U);
  EXPECT_EQ(mixed.collective(0).send_bytes, AllToAllSizes::dense(2, {32, 32, 64, 64}));
}

// DCNv2 on the tiny model: N = (3 tables + 1) x dim 2 = 8, two cross layers of rank 3.
TEST(DlrmGenerator, DcnV2CrossNetworkKernelsBucketsAndStep) {
  const std::string dcn =
      std::string(kTiny) + "  interaction: dcnv2\n  cross_layers: 2\n  cross_rank: 3\n";
  const DlrmConfig config = config_of(dcn.c_str(), 2);
  EXPECT_EQ(config.cross_width(), 8);
  EXPECT_EQ(config.top_mlp_input(), 8);
  EXPECT_EQ(cross_param_elements(config), (std::vector<int64_t>{24, 24, 8, 24, 24, 8}));
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config, inputs_of(2, 1), g);
  // Forward per layer: V (b x N -> r) and W (b x r -> N); backward per layer: grad input and
  // grad weight of each. No bmm: the dot interaction is gone.
  const std::vector<KernelDesc> mm = kernels_of(g, 0, "aten::mm");
  int forward_v = 0;
  int forward_w = 0;
  for (const KernelDesc& k : mm) {
    if (k.m == 4 && k.n == 3 && k.k == 8) ++forward_v;
    if (k.m == 4 && k.n == 8 && k.k == 3) ++forward_w;
  }
  EXPECT_EQ(forward_v, 2 + 2);  // forward V, and W's backward grad input (same shape)
  EXPECT_EQ(forward_w, 2 + 2);  // forward W, and V's backward grad input
  EXPECT_TRUE(kernels_of(g, 0, "aten::bmm").empty());
  // The top DDP module carries the cross network: fp32 top MLP [8, 4, 1] = 164 B plus
  // 2 x (24 + 24 + 8) x 4 B = 448 B.
  int64_t top_bytes = 0;
  for (const pytorch::DdpBucket& b : built.top_buckets)
    top_bytes += b.bytes;
  EXPECT_EQ(top_bytes, 164 + 448);
  const std::vector<KernelDesc> step = kernels_of(g, 0, "aten::_foreach_add_");
  ASSERT_EQ(step.size(), 1U);
  EXPECT_EQ(step[0].optimizer.tensor_elements,
            (std::vector<int64_t>{8, 2, 24, 24, 8, 24, 24, 8, 32, 4, 4, 1}));
}

// interaction_kernel: fused with DCNv2 (HugeCTR's MultiCrossLayer): the same GEMMs (shapes and
// FLOPs) as TorchRec's eager cross network, the elementwise work as one fused kernel per layer
// forward (reads h, x0, x_l; writes x_{l+1}) and one per layer backward (reads 4, writes 2),
// plus the memset and the closing add; far fewer kernels and host ops, and a step no slower.
TEST(DlrmGenerator, FusedDcnV2CrossLayersRunAsHugeCtrDoes) {
  const std::string dcn =
      std::string(kTiny) + "  interaction: dcnv2\n  cross_layers: 2\n  cross_rank: 3\n";
  const std::string fused = dcn + "  interaction_kernel: fused\n";
  TaskGraph eager;
  generate_dlrm(config_of(dcn.c_str(), 2), inputs_of(2, 1), eager);
  TaskGraph g;
  generate_dlrm(config_of(fused.c_str(), 2), inputs_of(2, 1), g);
  const auto gemm_flops = [](const std::vector<KernelDesc>& kernels) {
    double flops = 0;
    for (const KernelDesc& k : kernels)
      flops += k.flops;
    return flops;
  };
  const std::vector<KernelDesc> fused_gemms = kernels_of(g, 0, "cublasLtMatmul");
  EXPECT_EQ(fused_gemms.size(), 2U * (2 + 4));
  // The MLPs' backward keeps its aten::mm; the cross network's moved to cuBLASLt.
  EXPECT_EQ(gemm_flops(fused_gemms) + gemm_flops(kernels_of(g, 0, "aten::mm")),
            gemm_flops(kernels_of(eager, 0, "aten::mm")));
  // b = 4 local samples x N = 8: 32 elements of 4 bytes.
  const std::vector<KernelDesc> forward = kernels_of(g, 0, "MultiCrossLayer::fprop");
  ASSERT_EQ(forward.size(), 2U);
  EXPECT_EQ(forward[0].bytes_read, 3 * 32 * 4);
  EXPECT_EQ(forward[0].bytes_written, 32 * 4);
  const std::vector<KernelDesc> backward = kernels_of(g, 0, "MultiCrossLayer::bprop");
  ASSERT_EQ(backward.size(), 2U + 1U);  // fused_mul_fma3 per layer, then the add
  EXPECT_EQ(backward[0].bytes_read, 4 * 32 * 4);
  EXPECT_EQ(backward[0].bytes_written, 2 * 32 * 4);
  EXPECT_EQ(kernels_of(g, 0, "cudaMemsetAsync").size(), 1U);
  EXPECT_LT(count(g, 0).kernels, count(eager, 0).kernels);
  const auto host_ops = [](const Counts& c) { return c.op_begins + c.op_bodies; };
  EXPECT_LT(host_ops(count(g, 0)), host_ops(count(eager, 0)));
  const dlrm_test::UnitKernelCost kernels;
  const dlrm_test::UnitCollectiveCost collectives;
  TaskGraph eager_run;
  generate_dlrm(config_of(dcn.c_str(), 2), inputs_of(2, 3), eager_run);
  TaskGraph fused_run;
  generate_dlrm(config_of(fused.c_str(), 2), inputs_of(2, 3), fused_run);
  EXPECT_LT(run_graph(fused_run, 2, kernels, collectives).end,
            run_graph(eager_run, 2, kernels, collectives).end);
}

// interaction_kernel: xla (TensorFlow's Cross layer as XLA compiles it, DeepLearningExamples'
// TF2 DCNv2 with --xla): HugeCTR's fused kernels and bytes under XLA's names, without the
// accumulator memset; the dot interaction refuses it at the key.
TEST(DlrmGenerator, XlaDcnV2CrossLayersFuseAsHugeCtrsWithoutTheMemset) {
  const std::string dcn =
      std::string(kTiny) + "  interaction: dcnv2\n  cross_layers: 2\n  cross_rank: 3\n";
  TaskGraph fused;
  generate_dlrm(config_of((dcn + "  interaction_kernel: fused\n").c_str(), 2), inputs_of(2, 1),
                fused);
  TaskGraph xla;
  generate_dlrm(config_of((dcn + "  interaction_kernel: xla\n").c_str(), 2), inputs_of(2, 1), xla);
  EXPECT_EQ(kernels_of(xla, 0, "cublasLtMatmul").size(), 2U * (2 + 4));
  const std::vector<KernelDesc> forward = kernels_of(xla, 0, "Cross (XLA)");
  ASSERT_EQ(forward.size(), 2U);
  EXPECT_EQ(forward[0].bytes_read, 3 * 32 * 4);
  EXPECT_EQ(forward[0].bytes_written, 32 * 4);
  const std::vector<KernelDesc> backward = kernels_of(xla, 0, "Cross backward (XLA)");
  ASSERT_EQ(backward.size(), 2U + 1U);
  EXPECT_EQ(backward[0].bytes_read, 4 * 32 * 4);
  EXPECT_EQ(backward[0].bytes_written, 2 * 32 * 4);
  EXPECT_TRUE(kernels_of(xla, 0, "cudaMemsetAsync").empty());
  EXPECT_EQ(count(xla, 0).kernels + 1, count(fused, 0).kernels);
  try {
    config_of((std::string(kTiny) + "  interaction_kernel: xla\n").c_str(), 2);
    ADD_FAILURE() << "xla with the dot interaction was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("interaction_kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dot interaction"), std::string::npos) << e.what();
  }
}

// Row-wise Adagrad fused into the embedding backward, Adam for the dense part: FBGEMM's and
// torch.optim's names, the fused optimizer in the backward's descriptor, its state in the table
// memory (100 rows x (dim 2 x 4 B + 4 B)).
TEST(DlrmGenerator, OptimizersNameTheirKernelsAndHoldState) {
  const std::string yaml =
      with(kTiny, "    dim: 2\n", "    dim: 2\n    optimizer: rowwise_adagrad\n") +
      "  optimizer: adam\n";
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(yaml.c_str(), 2), inputs_of(2, 1), g);
  EXPECT_EQ(built.placement.memory_bytes[0], 100 * (2 * 4 + 4));
  const std::vector<KernelDesc> backward =
      kernels_of(g, 0, "fbgemm::split_embedding_backward_codegen_rowwise_adagrad");
  ASSERT_EQ(backward.size(), 1U);
  EXPECT_EQ(backward[0].embedding.optimizer, FusedEmbeddingOptimizer::kRowWiseAdagrad);
  EXPECT_EQ(
      kernels_of(g, 0, "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function").size(),
      1U);
  const std::vector<KernelDesc> step = kernels_of(g, 0, "aten::_foreach_addcdiv_");
  ASSERT_EQ(step.size(), 1U);
  EXPECT_EQ(step[0].optimizer.kind, OptimizerKind::kAdam);
}

// Hybrid parallel (bottom_mlp_placement first_rank) on 6 ranks, global batch 12 (2 per rank):
// rank 0 runs the bottom MLP [4, 2] on all 12 samples and holds no table (more than 4 ranks);
// its output is one more vector in the exchange: 2 samples x dim 2 x 4 B to every rank; no DDP
// reduces the bottom MLP.
TEST(DlrmGenerator, HybridParallelRunsTheBottomMlpOnRankZeroAndSendsItsOutput) {
  const std::string yaml =
      with(kTiny, "global_batch: 8", "global_batch: 12") + "  bottom_mlp_placement: first_rank\n";
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(yaml.c_str(), 6), inputs_of(6, 1), g);
  EXPECT_TRUE(built.placement.tables_of_rank[0].empty());
  EXPECT_EQ(built.placement.tables_of_rank.size(), 6U);
  for (uint32_t t = 0; t < 3; ++t)
    EXPECT_NE(built.placement.rank_of_table[t], 0U);
  EXPECT_TRUE(built.bottom_buckets.empty());
  ASSERT_EQ(g.collective_count(), 4U);  // a2a forward, 2 top buckets, a2a backward
  const CollectiveDesc& fwd = g.collective(0);
  for (uint32_t to = 0; to < 6; ++to)
    EXPECT_EQ(fwd.send_bytes.at(0, to), 2 * 2 * 4) << to;
  const auto bottom_first_layer = [&](RankId rank) {
    int found = 0;
    for (const KernelDesc& k : kernels_of(g, rank, "aten::addmm")) {
      if (k.k == 4 && k.n == 2) {  // bottom layer 4 -> 2 (the top MLP has no 4 -> 2)
        EXPECT_EQ(k.m, 12);        // the global batch
        ++found;
      }
    }
    return found;
  };
  EXPECT_EQ(bottom_first_layer(0), 1);
  for (RankId r = 1; r < 6; ++r)
    EXPECT_EQ(bottom_first_layer(r), 0) << r;
}

// A table with Zipf accesses carries the reuse histogram of its batch's lookups (8 x 10) into
// the lookup kernels; a uniform one carries none (the embedding model's own expectation).
TEST(DlrmGenerator, ZipfTablesCarryTheirBatchesReuseHistogram) {
  const std::string yaml = with(kTiny, "{rows: 100, pooling: 10}",
                                "{rows: 100, pooling: 10, access: zipf, zipf_alpha: 1.2}");
  TaskGraph g;
  generate_dlrm(config_of(yaml.c_str(), 2), inputs_of(2, 1), g);
  const std::vector<KernelDesc> lookups =
      kernels_of(g, 0, "fbgemm::split_embedding_codegen_lookup_sgd_function");
  ASSERT_EQ(lookups.size(), 1U);
  ASSERT_EQ(lookups[0].embedding.per_table.size(), 1U);
  EXPECT_EQ(lookups[0].embedding.per_table[0].reuse_histogram,
            zipf_reuse_histogram(100, 8.0 * 10.0, 1.2));
  TaskGraph uniform;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), uniform);
  EXPECT_TRUE(kernels_of(uniform, 0, "fbgemm::split_embedding_codegen_lookup_sgd_function")[0]
                  .embedding.per_table[0]
                  .reuse_histogram.empty());
}

// Pooling 0 is a table without lookups this batch (dlrm_config.h): with access: zipf there is
// nothing for the law to shape, so the lookup carries no histogram, exactly as a uniform table
// of pooling 0 (an all-zero histogram was an internal error of the embedding model).
TEST(DlrmGenerator, ZipfTablesWithoutLookupsCarryNoHistogram) {
  for (const char* pooling : {"0", "0.0"}) {
    const std::string zipf =
        with(kTiny, "{rows: 100, pooling: 10}",
             "{rows: 100, pooling: " + std::string(pooling) + ", access: zipf, zipf_alpha: 1.2}");
    const std::string uniform = with(kTiny, "{rows: 100, pooling: 10}",
                                     "{rows: 100, pooling: " + std::string(pooling) + "}");
    TaskGraph z;
    generate_dlrm(config_of(zipf.c_str(), 2), inputs_of(2, 1), z);
    TaskGraph u;
    generate_dlrm(config_of(uniform.c_str(), 2), inputs_of(2, 1), u);
    for (const char* op : {"fbgemm::split_embedding_codegen_lookup_sgd_function"}) {
      for (RankId r = 0; r < 2; ++r) {
        const std::vector<KernelDesc> zk = kernels_of(z, r, op);
        const std::vector<KernelDesc> uk = kernels_of(u, r, op);
        ASSERT_EQ(zk.size(), uk.size()) << pooling;
        for (size_t i = 0; i < zk.size(); ++i) {
          EXPECT_EQ(zk[i].embedding.per_table, uk[i].embedding.per_table) << pooling << " " << r;
          for (const EmbeddingTableShape& t : zk[i].embedding.per_table)
            EXPECT_TRUE(t.reuse_histogram.empty()) << pooling;
        }
      }
    }
  }
  // The histogram of a batch without lookups is all zeros (table_statistics.h), also where the
  // lookups are so few that every row's expected count underflows.
  for (double v : zipf_reuse_histogram(100, std::numeric_limits<double>::denorm_min(), 1.2))
    EXPECT_EQ(v, 0.0);
}

// Mixed precision as torch.autocast runs it (master_weights, fp16): every linear casts its fp32
// weight and bias to fp16 (top [8, 4, 1] + bottom [4, 2]: 3 layers, 6 casts), each weight
// gradient is cast back for AccumulateGrad, DDP reduces fp32 gradients (the pure-fp16 run's
// buckets doubled) and the optimizer updates fp32 parameters.
TEST(DlrmGenerator, MasterWeightsCastAndReduceInFp32) {
  const std::string amp =
      with(kTiny, "global_batch: 8", "global_batch: 8\n  dtype: fp16") + "  master_weights: true\n";
  const std::string pure = with(kTiny, "global_batch: 8", "global_batch: 8\n  dtype: fp16");
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(amp.c_str(), 2), inputs_of(2, 1), g);
  TaskGraph h;
  const DlrmGraph half = generate_dlrm(config_of(pure.c_str(), 2), inputs_of(2, 1), h);
  ASSERT_EQ(built.top_buckets.size() + built.bottom_buckets.size(), 3U);
  int64_t amp_bytes = 0;
  int64_t half_bytes = 0;
  for (const auto& b : built.top_buckets)
    amp_bytes += b.bytes;
  for (const auto& b : half.top_buckets)
    half_bytes += b.bytes;
  EXPECT_EQ(amp_bytes, 2 * half_bytes);
  int forward_casts = 0;
  int gradient_casts = 0;
  for (const KernelDesc& k : kernels_of(g, 0, "aten::_to_copy")) {
    if (k.dtype == DType::kFp16) ++forward_casts;
    if (k.dtype == DType::kFp32) ++gradient_casts;
  }
  EXPECT_EQ(forward_casts, 6);
  EXPECT_EQ(gradient_casts, 6);
  EXPECT_TRUE(kernels_of(h, 0, "aten::_to_copy").empty());
  EXPECT_EQ(kernels_of(g, 0, "aten::_foreach_add_")[0].dtype, DType::kFp32);
  // fp32 has no master copy to keep.
  const std::string fp32 = std::string(kTiny) + "  master_weights: true\n";
  EXPECT_THROW(config_of(fp32.c_str(), 2), ConfigError);
}

TEST(DlrmGenerator, SgdStepNamesItsUpdateAndTensors) {
  TaskGraph g;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), g);
  const std::vector<KernelDesc> steps = kernels_of(g, 0, "aten::_foreach_add_");
  ASSERT_EQ(steps.size(), 1U);
  const KernelDesc& k = steps[0];
  EXPECT_EQ(k.memory_op, MemoryOp::kOptimizer);
  EXPECT_EQ(k.optimizer.kind, OptimizerKind::kSgd);
  EXPECT_EQ(k.optimizer.impl, OptimizerImpl::kForeach);
  // Bottom [4, 2]: weight 8, bias 2; top [8 = dim 2 + 6 pairs, 4, 1]: 32, 4, 4, 1. The sum (51)
  // is the DDP buckets' 204 bytes / 4; SGD reads w and g and writes w.
  EXPECT_EQ(k.optimizer.tensor_elements, (std::vector<int64_t>{8, 2, 32, 4, 4, 1}));
  EXPECT_DOUBLE_EQ(k.bytes_read, 2 * 51 * 4);
  EXPECT_DOUBLE_EQ(k.bytes_written, 51 * 4);
}

TEST(DlrmGenerator, TinyTwoRankTaskCountsPerRank) {
  TaskGraph g;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), g);
  for (RankId r : {0U, 1U}) {
    const Counts c = count(g, r);
    // Forward 13 kernels: lookup, a2a pack cat, linear + relu, interaction cat/bmm/index/cat,
    // 2 x linear, relu, sigmoid, BCE. Backward 21: ones_like, BCE bwd, sigmoid bwd,
    // 2 x AddmmBackward0 (3 each), relu bwd, IndexBackward0 (2), BmmBackward0 (2), 2 adds,
    // a2a pack cat, relu bwd, first-layer AddmmBackward0 (2, no grad input), embedding bwd.
    // Then 3 bucket pre-scale muls and the SGD step: 13 + 21 + 3 + 1 = 38.
    EXPECT_EQ(c.kernels, 38) << "rank " << r;
    // dense, offsets, indices, targets, loss.
    EXPECT_EQ(c.memcpys, 5);
    // 2 all-to-all + 3 all-reduce.
    EXPECT_EQ(c.collectives, 5);
    // Each collective: a record on compute before and on comm after.
    EXPECT_EQ(c.records, 10);
    // Each collective: comm waits for compute; compute waits for its end (2 a2a waits, one
    // finalize wait per bucket).
    EXPECT_EQ(c.waits, 10);
    EXPECT_EQ(c.launches, c.kernels + c.memcpys + c.collectives + c.records + c.waits);
    // 5 blocking aten::to + end-of-iteration device sync.
    EXPECT_EQ(c.host_syncs, 6);
    EXPECT_EQ(c.marks, 1);
    EXPECT_EQ(c.op_begins, c.op_ends);
  }
}

TEST(DlrmGenerator, TinyTwoRankShapes) {
  TaskGraph g;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), g);
  // Dense 4 x 4 x 4 B; offsets (T_r x 8 + 1) x 8 B; indices (sum of round(8 L)) x 8 B;
  // targets 4 x 4 B; loss 4 B.
  EXPECT_EQ(copies_of(g, 0), (std::vector<int64_t>{64, 72, 640, 16, 4}));
  EXPECT_EQ(copies_of(g, 1), (std::vector<int64_t>{64, 136, 384, 16, 4}));

  const auto lookup = kernels_of(g, 1, "fbgemm::split_embedding_codegen_lookup_sgd_function");
  ASSERT_EQ(lookup.size(), 1U);
  EXPECT_EQ(lookup[0].cls, KernelClass::kEmbeddingForward);
  EXPECT_EQ(lookup[0].embedding.batch, 8);
  EXPECT_EQ(lookup[0].embedding.tables, 2);
  EXPECT_EQ(lookup[0].embedding.rows, 30);
  EXPECT_EQ(lookup[0].embedding.dim, 2);
  EXPECT_DOUBLE_EQ(lookup[0].embedding.pooling, 3.0);

  const auto addmm = kernels_of(g, 0, "aten::addmm");
  ASSERT_EQ(addmm.size(), 3U);  // bottom 4->2, top 8->4, top 4->1
  EXPECT_EQ(addmm[0].m, 4);
  EXPECT_EQ(addmm[0].k, 4);
  EXPECT_EQ(addmm[0].n, 2);
  EXPECT_EQ(addmm[1].k, 8);
  EXPECT_EQ(addmm[1].n, 4);

  const auto bmm = kernels_of(g, 0, "aten::bmm");
  ASSERT_EQ(bmm.size(), 3U);  // forward, two backward
  EXPECT_EQ(bmm[0].batch, 4);
  EXPECT_EQ(bmm[0].m, 4);
  EXPECT_EQ(bmm[0].n, 4);
  EXPECT_EQ(bmm[0].k, 2);

  // Backward GEMMs of the last top layer (4 -> 1): grad input m = 4, n = 4, k = 1; grad weight
  // m = 1, n = 4, k = 4. The first bottom layer computes only grad weight (m = 2, n = 4, k = 4).
  const auto mm = kernels_of(g, 0, "aten::mm");
  ASSERT_EQ(mm.size(), 5U);
  EXPECT_EQ(mm[0].m, 4);
  EXPECT_EQ(mm[0].n, 4);
  EXPECT_EQ(mm[0].k, 1);
  EXPECT_EQ(mm[1].m, 1);
  EXPECT_EQ(mm[1].n, 4);
  EXPECT_EQ(mm[1].k, 4);
  EXPECT_EQ(mm[4].m, 2);
  EXPECT_EQ(mm[4].n, 4);
  EXPECT_EQ(mm[4].k, 4);

  // Pre-scale mul over each bucket: elements = bucket bytes / 4, 3 accesses per element.
  const auto mul = kernels_of(g, 0, "aten::mul");
  ASSERT_EQ(mul.size(), 3U);
  EXPECT_DOUBLE_EQ(mul[0].bytes_read + mul[0].bytes_written, 3 * 20.0);
  EXPECT_DOUBLE_EQ(mul[0].flops, 5.0);
}

TEST(DlrmGenerator, EveryGpuTaskHasExactlyOneLauncherInsideAnOp) {
  TaskGraph g;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 2), g);
  size_t gpu_tasks = 0;
  size_t launches = 0;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (is_gpu_task(t.kind)) {
      ++gpu_tasks;
      ASSERT_NE(g.launcher_of(id), kNoTask) << "GPU task " << id << " " << g.name(t.name);
      EXPECT_EQ(g.launched_task(g.launcher_of(id)), id);
    }
    if (t.kind == TaskKind::kLaunch) ++launches;
  }
  EXPECT_EQ(gpu_tasks, launches);

  // Per rank: ops do not nest, launches sit inside an op of the same name and count from 0.
  for (RankId r = 0; r < g.rank_count(); ++r) {
    bool open = false;
    NameId op = 0;
    uint32_t next_launch = 0;
    for (TaskId id = 0; id < g.task_count(); ++id) {
      const Task& t = g.task(id);
      if (t.rank != r || is_gpu_task(t.kind)) continue;
      if (t.kind == TaskKind::kCpuOp && t.phase == HostPhase::kOpBegin) {
        ASSERT_FALSE(open) << "nested op at task " << id;
        open = true;
        op = t.op_name;
        next_launch = 0;
      } else if (t.kind == TaskKind::kCpuOp && t.phase == HostPhase::kOpEnd) {
        ASSERT_TRUE(open);
        EXPECT_EQ(t.op_name, op);
        EXPECT_GT(next_launch, 0U) << "op " << g.name(op) << " launches nothing";
        open = false;
      } else if (t.kind == TaskKind::kLaunch) {
        ASSERT_TRUE(open) << "launch outside an op at task " << id;
        EXPECT_EQ(t.op_name, op);
        EXPECT_EQ(t.launch_index, next_launch++);
      } else {
        EXPECT_FALSE(open) << g.name(t.name) << " inside op " << g.name(op);
      }
    }
    EXPECT_FALSE(open);
  }
}

TEST(DlrmGenerator, SameInputsGiveAnIdenticalGraph) {
  TaskGraph a;
  TaskGraph b;
  DlrmConfig c = config_of(kTiny, 2);
  c.sharding = ShardingStrategy::kRandom;
  generate_dlrm(c, inputs_of(2, 2), a);
  generate_dlrm(c, inputs_of(2, 2), b);
  dlrm_test::expect_same_graph(a, b);
}

TEST(DlrmGenerator, IterationsRepeatTheStep) {
  TaskGraph one;
  TaskGraph three;
  const DlrmConfig c = config_of(kTiny, 2);
  generate_dlrm(c, inputs_of(2, 1), one);
  generate_dlrm(c, inputs_of(2, 3), three);
  EXPECT_EQ(three.task_count(), 3 * one.task_count());
  EXPECT_EQ(three.collective_count(), 3 * one.collective_count());
  EXPECT_EQ(count(three, 1).marks, 3);
  // The last task of every rank is the device-wide sync.
  for (RankId r = 0; r < 2; ++r) {
    TaskId last = kNoTask;
    for (TaskId id = 0; id < three.task_count(); ++id) {
      if (three.task(id).rank == r && !is_gpu_task(three.task(id).kind)) last = id;
    }
    ASSERT_NE(last, kNoTask);
    EXPECT_EQ(three.task(last).kind, TaskKind::kHostSync);
    EXPECT_EQ(three.sync_target(last), kAllStreams);
  }
}

TEST(DlrmGenerator, SingleRankHasNoCollectives) {
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(kTiny, 1), inputs_of(1, 1), g);
  EXPECT_EQ(g.collective_count(), 0U);
  const Counts c = count(g, built.ranks[0]);
  EXPECT_EQ(c.collectives, 0);
  EXPECT_EQ(c.records, 0);
  EXPECT_EQ(c.waits, 0);
  // 38 - 2 pack cats - 3 muls.
  EXPECT_EQ(c.kernels, 33);
}

TEST(DlrmGenerator, RankWithoutTablesSkipsLookupsButJoinsCollectives) {
  DlrmConfig c = config_of(kTiny, 4);
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(c, inputs_of(4, 1), g);
  // Three tables on four ranks: one rank holds none.
  RankId empty = 4;
  for (RankId r = 0; r < 4; ++r) {
    if (built.placement.tables_of_rank[r].empty()) empty = r;
  }
  ASSERT_LT(empty, 4U);
  const Counts e = count(g, empty);
  EXPECT_EQ(e.memcpys, 3);       // no offsets, no indices
  EXPECT_EQ(e.kernels, 38 - 3);  // no lookup, no forward pack cat, no embedding backward
  EXPECT_EQ(e.collectives, 5);
  EXPECT_EQ(dlrm_test::collective_order(g, empty), dlrm_test::collective_order(g, 0));
  const CollectiveDesc& fwd = g.collective(0);
  for (RankId j = 0; j < 4; ++j)
    EXPECT_EQ(fwd.send_bytes.at(empty, j), 0);
}

TEST(DlrmGenerator, FourGpuConfigCounts) {
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(kFourGpu, 4), inputs_of(4, 1), g);
  ASSERT_EQ(built.top_buckets.size(), 2U);
  ASSERT_EQ(built.bottom_buckets.size(), 2U);
  EXPECT_EQ(g.collective_count(), 6U);
  for (RankId r = 0; r < 4; ++r) {
    EXPECT_FALSE(built.placement.tables_of_rank[r].empty());
    const Counts c = count(g, r);
    // 6 x 3 bottom + 6 x 4 top + 17 + 4 buckets.
    EXPECT_EQ(c.kernels, 63);
    EXPECT_EQ(c.memcpys, 5);
    EXPECT_EQ(c.collectives, 6);
    EXPECT_EQ(c.records, 12);
    EXPECT_EQ(c.waits, 12);
    EXPECT_EQ(c.launches, 98);
    EXPECT_EQ(c.host_syncs, 6);
  }
  // Forward all-to-all: 1024 samples x T_i x 128 x 4 B from rank i to every rank.
  const CollectiveDesc& fwd = g.collective(0);
  for (RankId i = 0; i < 4; ++i) {
    const auto t_i = static_cast<int64_t>(built.placement.tables_of_rank[i].size());
    for (RankId j = 0; j < 4; ++j)
      EXPECT_EQ(fwd.send_bytes.at(i, j), 1024 * t_i * 128 * 4);
  }
}

TEST(DlrmGenerator, TablesThatDoNotFitAreReported) {
  TaskGraph g;
  EXPECT_THROW(generate_dlrm(config_of(kFourGpu, 4), inputs_of(4, 1, 1'000'000'000), g),
               ShardingError);
}

TEST(DlrmGenerator, InputsMustAgree) {
  TaskGraph g;
  const DlrmConfig c = config_of(kTiny, 2);
  EXPECT_THROW(generate_dlrm(c, DlrmPlacementInputs{2, {1'000'000}, 1}, g), std::invalid_argument);
  EXPECT_THROW(generate_dlrm(c, inputs_of(3, 1), g), std::invalid_argument);
  EXPECT_THROW(generate_dlrm(c, inputs_of(2, 0), g), std::invalid_argument);
}

// ---- sharding types ------------------------------------------------------------------------

/// kTiny with its table lines replaced by `tables` (YAML list lines).
std::string tiny_with_tables(const std::string& tables) {
  return with(kTiny,
              "      - {rows: 100, pooling: 10}\n      - {rows: 50, pooling: 5}\n"
              "      - {rows: 10, pooling: 1}\n",
              tables);
}

/// Collective groups of `kind`.
std::vector<CollectiveId> groups_of(const TaskGraph& g, CollectiveKind kind) {
  std::vector<CollectiveId> out;
  for (CollectiveId c = 0; c < g.collective_count(); ++c) {
    if (g.collective(c).kind == kind) out.push_back(c);
  }
  return out;
}

// t0 row-wise on 2 ranks: each rank holds 50 of its 100 rows and looks them up for all 8
// samples (pooling 10 / 2); the reduce-scatter's input is B x dim x 4 B = 8 x 2 x 4 = 64 B, the
// backward all-gather's b x dim x 4 B = 32 B; the all-to-all carries only t1 and t2.
TEST(DlrmGenerator, RowWiseTableAddsAReduceScatterAndAnAllGather) {
  const std::string yaml = tiny_with_tables(
      "      - {rows: 100, pooling: 10, sharding_type: row_wise}\n"
      "      - {rows: 50, pooling: 5}\n      - {rows: 10, pooling: 1}\n");
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(yaml.c_str(), 2), inputs_of(2, 1), g);
  EXPECT_EQ(built.placement.row_wise, (std::vector<uint32_t>{0}));
  // t1 (cost 17) on rank 0, t2 (cost 2) on rank 1; 50 rows x dim 2 x 4 B of t0 on each.
  EXPECT_EQ(built.placement.tables_of_rank[0], (std::vector<uint32_t>{1}));
  EXPECT_EQ(built.placement.tables_of_rank[1], (std::vector<uint32_t>{2}));
  EXPECT_EQ(built.placement.memory_bytes[0], 400 + 400);
  EXPECT_EQ(built.placement.memory_bytes[1], 400 + 80);

  // a2a fwd, reduce-scatter, 2 top buckets, a2a bwd, all-gather, bottom bucket.
  ASSERT_EQ(g.collective_count(), 7U);
  const std::vector<CollectiveId> rs = groups_of(g, CollectiveKind::kReduceScatter);
  const std::vector<CollectiveId> ag = groups_of(g, CollectiveKind::kAllGather);
  ASSERT_EQ(rs.size(), 1U);
  ASSERT_EQ(ag.size(), 1U);
  EXPECT_EQ(g.collective(rs[0]).bytes, 8 * 2 * 4);
  EXPECT_EQ(g.collective(ag[0]).bytes, 4 * 2 * 4);
  EXPECT_EQ(g.collective(rs[0]).members, (std::vector<RankId>{0, 1}));
  // Each rank sends 4 samples x one table-wise table x dim 2 x 4 B to each rank.
  EXPECT_EQ(g.collective(0).send_bytes, AllToAllSizes::dense(2, {32, 32, 32, 32}));
  EXPECT_EQ(dlrm_test::collective_order(g, 0), (std::vector<CollectiveId>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(dlrm_test::collective_order(g, 1), dlrm_test::collective_order(g, 0));

  // Rank 0: the table-wise lookup (t1, batch 8), then its row block of t0 for the global batch.
  for (const char* op : {"fbgemm::split_embedding_codegen_lookup_sgd_function",
                         "fbgemm::split_embedding_backward_codegen_sgd"}) {
    const std::vector<KernelDesc> k = kernels_of(g, 0, op);
    ASSERT_EQ(k.size(), 2U) << op;
    EXPECT_EQ(k[0].embedding.per_table, (std::vector<EmbeddingTableShape>{{50, 2, 5.0, {}}}));
    EXPECT_EQ(k[1].embedding.batch, 8) << op;
    EXPECT_EQ(k[1].embedding.per_table, (std::vector<EmbeddingTableShape>{{50, 2, 5.0, {}}})) << op;
  }
  // Indices: t1 round(8 x 5) + t0's block round(8 x 5) = 80 indices x 8 B; offsets 8 + 8 + 1.
  EXPECT_EQ(copies_of(g, 0), (std::vector<int64_t>{64, 17 * 8, 80 * 8, 16, 4}));
}

// Table-row-wise on 2 nodes of 2 ranks (global batch 8, local batch 2, dim 2, fp32): t0 (cost
// 2 x 10 = 20) goes to node 0, t1 (cost 10) to node 1, each as 2 row blocks over its node's
// ranks; t2 stays table-wise. Node k reduce-scatters B x T_k x D x 4 B = 64 B and all-gathers
// (B / 2) x 2 x 4 = 32 B; the all-to-all among the local rank j of both nodes has each send
// b x 1 x 2 x 4 = 16 B to each.
TEST(DlrmGenerator, TableRowWiseReducesWithinANodeAndExchangesAcrossNodes) {
  const std::string yaml = tiny_with_tables(
      "      - {rows: 100, pooling: 10, sharding_type: table_row_wise}\n"
      "      - {rows: 50, pooling: 5, sharding_type: table_row_wise}\n"
      "      - {rows: 10, pooling: 1}\n");
  TaskGraph g;
  DlrmPlacementInputs in = inputs_of(4, 1);
  in.ranks_per_node = 2;
  const DlrmGraph built = generate_dlrm(config_of(yaml.c_str(), 4), in, g);
  EXPECT_EQ(built.placement.table_row_wise, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(built.placement.node_of_table[0], 0U);
  EXPECT_EQ(built.placement.node_of_table[1], 1U);
  EXPECT_EQ(built.placement.node_of_table[2], kNoSingleRank);
  // 50 of t0's rows x dim 2 x 4 B on ranks 0 and 1; 25 of t1's on ranks 2 and 3; t2 (80 B) on
  // the emptiest rank by cost, rank 0.
  EXPECT_EQ(built.placement.memory_bytes, (std::vector<int64_t>{400 + 80, 400, 200, 200}));

  const std::vector<CollectiveId> rs = groups_of(g, CollectiveKind::kReduceScatter);
  const std::vector<CollectiveId> ag = groups_of(g, CollectiveKind::kAllGather);
  ASSERT_EQ(rs.size(), 2U);
  ASSERT_EQ(ag.size(), 2U);
  EXPECT_EQ(g.collective(rs[0]).members, (std::vector<RankId>{0, 1}));
  EXPECT_EQ(g.collective(rs[1]).members, (std::vector<RankId>{2, 3}));
  EXPECT_EQ(g.collective(rs[0]).bytes, 8 * 2 * 4);
  EXPECT_EQ(g.collective(ag[1]).bytes, 4 * 2 * 4);
  std::vector<CollectiveId> cross;
  for (const CollectiveId c : groups_of(g, CollectiveKind::kAllToAll)) {
    if (g.collective(c).members.size() == 2) cross.push_back(c);
  }
  ASSERT_EQ(cross.size(), 4U);  // local ranks 0 and 1, forward and backward
  EXPECT_EQ(g.collective(cross[0]).members, (std::vector<RankId>{0, 2}));
  EXPECT_EQ(g.collective(cross[0]).send_bytes, AllToAllSizes::dense(2, {16, 16, 16, 16}));
  // Every rank joins its node's reduce-scatter and its local rank's all-to-all, in that order.
  for (RankId r = 0; r < 4; ++r) {
    const std::vector<CollectiveId> order = dlrm_test::collective_order(g, r);
    const auto at = [&](CollectiveId c) { return std::find(order.begin(), order.end(), c); };
    EXPECT_LT(at(rs[r / 2]), at(cross[2 * (r % 2)])) << r;
    EXPECT_NE(at(ag[r / 2]), order.end()) << r;
  }
  // Rank 2 looks up its block of t1 (25 rows, pooling 5 x 25 / 50) for the global batch.
  const std::vector<KernelDesc> k =
      kernels_of(g, 2, "fbgemm::split_embedding_codegen_lookup_sgd_function");
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k.back().embedding.batch, 8);
  EXPECT_EQ(k.back().embedding.per_table, (std::vector<EmbeddingTableShape>{{25, 2, 2.5, {}}}));
}

// Every table data-parallel on 4 ranks (local batch 2): no all-to-all, no reduce-scatter; each
// rank holds all 160 rows x dim 2 (weights and dense gradient, fp32, SGD: 2560 B), looks up its
// 2 samples, and DDP all-reduces the 160 x 2 x 4 B = 1280 B gradient.
TEST(DlrmGenerator, DataParallelTablesMoveNoAllToAllBytes) {
  const std::string yaml = tiny_with_tables(
      "      - {count: 2, rows: 75, pooling: 10, sharding_type: data_parallel}\n"
      "      - {rows: 10, pooling: 1, sharding_type: data_parallel}\n");
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(yaml.c_str(), 4), inputs_of(4, 1), g);
  for (RankId r = 0; r < 4; ++r) {
    EXPECT_EQ(built.placement.memory_bytes[r], 160 * 2 * 4 * 2) << r;
    EXPECT_TRUE(built.placement.tables_of_rank[r].empty()) << r;
  }
  EXPECT_TRUE(groups_of(g, CollectiveKind::kAllToAll).empty());
  EXPECT_TRUE(groups_of(g, CollectiveKind::kReduceScatter).empty());
  EXPECT_TRUE(groups_of(g, CollectiveKind::kAllGather).empty());
  // 2 top buckets, 1 bottom bucket, the tables' gradient last.
  ASSERT_EQ(g.collective_count(), 4U);
  EXPECT_EQ(g.collective(3).kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(g.collective(3).bytes, 1280);
  for (RankId r = 0; r < 4; ++r) {
    EXPECT_EQ(dlrm_test::collective_order(g, r), (std::vector<CollectiveId>{0, 1, 2, 3})) << r;
    EXPECT_TRUE(kernels_of(g, r, "fbgemm::split_embedding_codegen_lookup_sgd_function").empty());
    const std::vector<KernelDesc> lookup =
        kernels_of(g, r, "fbgemm::dense_embedding_codegen_lookup_function");
    ASSERT_EQ(lookup.size(), 1U);
    EXPECT_EQ(lookup[0].embedding.batch, 2);
    EXPECT_EQ(lookup[0].embedding.tables, 3);
    EXPECT_EQ(lookup[0].embedding.per_table[0], (EmbeddingTableShape{75, 2, 10.0, {}}));
  }
  // Backward: the dense gradient zeroed (320 fp32 values), the scatter; DDP's pre-scale.
  const std::vector<KernelDesc> zero = kernels_of(g, 0, "aten::zero_");
  ASSERT_EQ(zero.size(), 2U);  // the interaction's IndexBackward0, then the tables'
  EXPECT_DOUBLE_EQ(zero[1].bytes_written, 320 * 4);
  EXPECT_EQ(kernels_of(g, 0, "fbgemm::split_embedding_backward_codegen_dense").size(), 1U);
  // The dense SGD step updates the tables' 320 elements first, in the same fp32 launch.
  const std::vector<KernelDesc> step = kernels_of(g, 0, "aten::_foreach_add_");
  ASSERT_EQ(step.size(), 1U);
  EXPECT_EQ(step[0].optimizer.tensor_elements.front(), 320);
  EXPECT_DOUBLE_EQ(step[0].bytes_written, (320 + 51) * 4);

  // Mixed: t0 table-wise, t1 and t2 data-parallel. The all-to-all carries t0 alone.
  const std::string mixed = tiny_with_tables(
      "      - {rows: 100, pooling: 10}\n"
      "      - {rows: 50, pooling: 5, sharding_type: data_parallel}\n"
      "      - {rows: 10, pooling: 1, sharding_type: data_parallel}\n");
  TaskGraph m;
  const DlrmGraph mb = generate_dlrm(config_of(mixed.c_str(), 4), inputs_of(4, 1), m);
  const uint32_t owner = mb.placement.rank_of_table[0];
  const CollectiveDesc& fwd = m.collective(groups_of(m, CollectiveKind::kAllToAll).front());
  for (RankId i = 0; i < 4; ++i) {
    for (RankId j = 0; j < 4; ++j)
      EXPECT_EQ(fwd.send_bytes.at(i, j), i == owner ? 2 * 2 * 4 : 0) << i << " -> " << j;
  }
}

// t0 column-wise (2 shards of 1 column): size_lookup_greedy costs each shard 1 x 10 x 2 = 20,
// t1 17.0, t2 2: shard 0 -> rank 0, shard 1 -> rank 1, t1 -> rank 0 (cost and bytes tie,
// lower rank), t2 -> rank 1. Each rank sends b x (1 + 2) values x 4 B to each rank.
TEST(DlrmGenerator, ColumnWiseShardsTravelInTheAllToAll) {
  const std::string yaml = tiny_with_tables(
      "      - {rows: 100, pooling: 10, sharding_type: column_wise}\n"
      "      - {rows: 50, pooling: 5}\n      - {rows: 10, pooling: 1}\n");
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(yaml.c_str(), 2), inputs_of(2, 1), g);
  ASSERT_EQ(built.placement.pieces.size(), 4U);
  EXPECT_EQ(built.placement.pieces[0].rank, 0U);
  EXPECT_EQ(built.placement.pieces[1].rank, 1U);
  EXPECT_EQ(built.placement.tables_of_rank[0], (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(built.placement.tables_of_rank[1], (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(built.placement.memory_bytes[0], 100 * 1 * 4 + 50 * 2 * 4);
  EXPECT_EQ(g.collective(0).send_bytes, AllToAllSizes::dense(2, {48, 48, 48, 48}));
  EXPECT_EQ(g.collective_count(), 5U);  // as table-wise: no other collective
  const std::vector<KernelDesc> lookup =
      kernels_of(g, 0, "fbgemm::split_embedding_codegen_lookup_sgd_function");
  ASSERT_EQ(lookup.size(), 1U);
  EXPECT_EQ(lookup[0].embedding.batch, 8);
  EXPECT_EQ(lookup[0].embedding.per_table,
            (std::vector<EmbeddingTableShape>{{100, 1, 10.0, {}}, {50, 2, 5.0, {}}}));
  // The received pooled embeddings: b x 3 tables x dim 2 (the shards joined), as table-wise.
  EXPECT_EQ(kernels_of(g, 0, "aten::bmm")[0].k, 2);
}

/// kTiny with t0 row-wise, t1 column-wise, t2 data-parallel.
std::string tiny_mixed() {
  return tiny_with_tables(
      "      - {rows: 100, pooling: 10, sharding_type: row_wise}\n"
      "      - {rows: 50, pooling: 5, sharding_type: column_wise}\n"
      "      - {rows: 10, pooling: 1, sharding_type: data_parallel}\n");
}

// Table statistics reach every sharding type's lookups (2 ranks, batch 8, local batch 4): t0
// row-wise with Zipf accesses, each rank's block of 50 rows at pooling 10 / 2 for the global
// batch -> zipf_reuse_histogram(50, 8 x 5, 1.2); t1 column-wise with a measured histogram, kept
// as is on its shard; t2 data-parallel with Zipf accesses, 10 rows at pooling 1 for the local
// batch -> zipf_reuse_histogram(10, 4 x 1, 1.2).
TEST(DlrmGenerator, TableStatisticsReachEveryShardingTypesLookups) {
  const std::string yaml = tiny_with_tables(
      "      - {rows: 100, pooling: 10, sharding_type: row_wise, access: zipf, zipf_alpha: 1.2}\n"
      "      - {rows: 50, pooling: 5, sharding_type: column_wise,\n"
      "         reuse: [0.5, 0.25, 0.25, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}\n"
      "      - {rows: 10, pooling: 1, sharding_type: data_parallel, access: zipf, "
      "zipf_alpha: 1.2}\n");
  TaskGraph g;
  const DlrmConfig config = config_of(yaml.c_str(), 2);
  const DlrmGraph built = generate_dlrm(config, inputs_of(2, 1), g);
  ASSERT_EQ(built.placement.pieces_of_rank[0].size(), 1U);  // one of t1's two shards
  for (RankId r = 0; r < 2; ++r) {
    const std::vector<KernelDesc> lookups =
        kernels_of(g, r, "fbgemm::split_embedding_codegen_lookup_sgd_function");
    ASSERT_EQ(lookups.size(), 2U) << r;
    // The column-wise shard (1 of 2 columns), then the row-wise block.
    EXPECT_EQ(lookups[0].embedding.per_table,
              (std::vector<EmbeddingTableShape>{{50, 1, 5.0, config.tables[1].reuse_histogram}}))
        << r;
    EXPECT_EQ(
        lookups[1].embedding.per_table,
        (std::vector<EmbeddingTableShape>{{50, 2, 5.0, zipf_reuse_histogram(50, 8.0 * 5.0, 1.2)}}))
        << r;
    const std::vector<KernelDesc> dense =
        kernels_of(g, r, "fbgemm::dense_embedding_codegen_lookup_function");
    ASSERT_EQ(dense.size(), 1U) << r;
    EXPECT_EQ(
        dense[0].embedding.per_table,
        (std::vector<EmbeddingTableShape>{{10, 2, 1.0, zipf_reuse_histogram(10, 4.0 * 1.0, 1.2)}}))
        << r;
  }
}

// One rank: every type is a local lookup of the whole batch, and nothing is exchanged.
TEST(DlrmGenerator, SingleRankLooksEveryTypeUpLocally) {
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(tiny_mixed().c_str(), 1), inputs_of(1, 1), g);
  EXPECT_EQ(g.collective_count(), 0U);
  const Counts c = count(g, built.ranks[0]);
  EXPECT_EQ(c.collectives, 0);
  EXPECT_EQ(c.waits, 0);
  const std::vector<KernelDesc> fused =
      kernels_of(g, 0, "fbgemm::split_embedding_codegen_lookup_sgd_function");
  ASSERT_EQ(fused.size(), 2U);  // t1's two shards; t0 whole (one block of all rows)
  EXPECT_EQ(fused[0].embedding.per_table,
            (std::vector<EmbeddingTableShape>{{50, 1, 5.0, {}}, {50, 1, 5.0, {}}}));
  EXPECT_EQ(fused[1].embedding.per_table, (std::vector<EmbeddingTableShape>{{100, 2, 10.0, {}}}));
  const std::vector<KernelDesc> dense =
      kernels_of(g, 0, "fbgemm::dense_embedding_codegen_lookup_function");
  ASSERT_EQ(dense.size(), 1U);
  EXPECT_EQ(dense[0].embedding.batch, 8);
  EXPECT_EQ(built.placement.memory_bytes[0], 100 * 2 * 4 + 50 * 2 * 4 + 10 * 2 * 4 * 2);
}

// ---- the generated graph runs to completion -----------------------------------------------

using dlrm_test::run_graph;
using dlrm_test::UnitCollectiveCost;
using dlrm_test::UnitKernelCost;

TEST(DlrmGenerator, GraphRunsToCompletionOnTheExecutor) {
  const std::string hybrid =
      with(kTiny, "global_batch: 8", "global_batch: 24") + "  bottom_mlp_placement: first_rank\n";
  const std::string mixed = tiny_mixed();
  // The mixed model with hybrid parallel: row-wise and data-parallel tables span rank 0.
  const std::string mixed_hybrid = with(mixed.c_str(), "global_batch: 8", "global_batch: 24") +
                                   "  bottom_mlp_placement: first_rank\n";
  const std::vector<std::pair<uint32_t, const std::string*>> runs = {
      {1, nullptr}, {2, nullptr}, {4, nullptr}, {6, &hybrid},      {1, &mixed},
      {2, &mixed},  {4, &mixed},  {8, &mixed},  {6, &mixed_hybrid}};
  for (const auto& [ranks, yaml] : runs) {
    // 6 ranks: hybrid parallel (its own sends, waits and a rank 0 without tables).
    TaskGraph g;
    generate_dlrm(config_of(yaml == nullptr ? kTiny : yaml->c_str(), ranks), inputs_of(ranks, 2),
                  g);
    UnitKernelCost kernels;
    UnitCollectiveCost collectives;
    int ended = 0;
    const RunStats stats = run_graph(g, ranks, kernels, collectives, &ended);
    const std::string what =
        std::to_string(ranks) + " ranks, " + (yaml == nullptr ? "table-wise" : "mixed / hybrid");
    EXPECT_EQ(stats.tasks_done, g.task_count()) << what;
    EXPECT_EQ(static_cast<size_t>(ended), g.task_count()) << what;
    EXPECT_GT(stats.end, Time::zero()) << what;
  }
}

// ---- row-wise removes the single-rank bottleneck -------------------------------------------

/// A kernel model proportional to the work, for comparing placements (not a calibrated
/// prediction): an embedding op moves batch x pooling x dim x 4 B per table at 1 TB/s (twice
/// that backward: the gradient scatter and the update) plus 5 us; every other kernel 5 us.
class ProportionalKernelCost final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    if (k.cls != KernelClass::kEmbeddingForward && k.cls != KernelClass::kEmbeddingBackward) {
      return Duration::from_us(5);
    }
    double bytes = 0.0;
    for (const EmbeddingTableShape& t : k.embedding.per_table) {
      bytes += static_cast<double>(k.embedding.batch) * t.pooling * static_cast<double>(t.dim) * 4;
    }
    if (k.cls == KernelClass::kEmbeddingBackward) bytes *= 2;
    return Duration::from_us(5) + Duration::from_seconds_f(bytes / 1e12);
  }
};

/// Collectives at 100 GB/s per rank plus 10 us: an all-to-all by the most any member sends, the
/// others by their per-member input.
class ProportionalCollectiveCost final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc& c) const override {
    double bytes = static_cast<double>(c.bytes);
    if (c.kind == CollectiveKind::kAllToAll) {
      bytes = 0;
      for (size_t i = 0; i < c.send_bytes.members(); ++i)
        bytes = std::max(bytes, static_cast<double>(c.send_bytes.sent_by(i)));
    }
    return Duration::from_us(10) + Duration::from_seconds_f(bytes / 100e9);
  }
  Duration transfer_duration(const TransferDesc& t) const override {
    return Duration::from_us(2) + Duration::from_seconds_f(static_cast<double>(t.bytes) / 25e9);
  }
};

// One 40M-row 100-hot table among 24 table-wise 1M-row 20-hot ones, 8 ranks, global batch
// 8192, dim 128. Table-wise, the big table's rank looks up 100 indices per sample for all
// 8192 samples while the others share 480; row-wise, each rank looks up its 5M-row block
// (12.5 indices per bag) and the reduce-scatter (8192 x 128 x 4 B) is cheap. The proportional
// model isolates that placement effect; the calibrated models also price the reduce-scatter,
// the all-gather and the extra host ops, which can outweigh it when the hot table is a smaller
// share of the rank's lookups.
TEST(DlrmGenerator, RowWiseRemovesTheSingleRankBottleneckOfAHotTable) {
  const std::string base = R"(workload:
  model: dlrm
  global_batch: 8192
  bottom_mlp: [512, 256, 128]
  top_mlp: [512, 256, 1]
  embeddings:
    dim: 128
    tables:
      - {rows: 40000000, pooling: 100}
      - {count: 24, rows: 1000000, pooling: 20}
)";
  const std::string row_wise =
      with(base.c_str(), "pooling: 100}", "pooling: 100, sharding_type: row_wise}");
  const auto iteration_ms = [](const std::string& yaml, DlrmGraph* built) {
    TaskGraph g;
    *built = generate_dlrm(config_of(yaml.c_str(), 8), inputs_of(8, 1, 64'000'000'000), g);
    ProportionalKernelCost kernels;
    ProportionalCollectiveCost collectives;
    return run_graph(g, 8, kernels, collectives).end.us() / 1e3;
  };
  DlrmGraph tw;
  DlrmGraph rw;
  const double tw_ms = iteration_ms(base, &tw);
  const double rw_ms = iteration_ms(row_wise, &rw);
  // Table-wise: the big table alone on one rank (20.48 GB there).
  const uint32_t owner = tw.placement.rank_of_table[0];
  EXPECT_EQ(tw.placement.tables_of_rank[owner], (std::vector<uint32_t>{0}));
  EXPECT_EQ(tw.placement.memory_bytes[owner], int64_t{40'000'000} * 128 * 4);
  // Row-wise: 5M rows (2.56 GB) of it on every rank, with 3 of the small tables.
  for (RankId r = 0; r < 8; ++r) {
    EXPECT_EQ(rw.placement.memory_bytes[r], int64_t{5'000'000} * 128 * 4 + 3 * 512'000'000) << r;
  }
  std::printf(
      "8 ranks, proportional kernel / collective model: table-wise %.3f ms, row-wise "
      "%.3f ms per iteration (%.1f%% less)\n",
      tw_ms, rw_ms, (1 - rw_ms / tw_ms) * 100);
  EXPECT_LT(rw_ms, 0.9 * tw_ms);
}

// On one node table-row-wise is row-wise: the same lookups and collectives, the same time.
TEST(DlrmGenerator, TableRowWiseOnOneNodeIsRowWise) {
  const auto run_ms = [](const std::string& type) {
    const std::string yaml =
        tiny_with_tables("      - {rows: 100, pooling: 10, sharding_type: " + type +
                         "}\n      - {rows: 50, pooling: 5}\n      - {rows: 10, pooling: 1}\n");
    TaskGraph g;
    DlrmPlacementInputs in = inputs_of(4, 2);
    in.ranks_per_node = 4;
    generate_dlrm(config_of(yaml.c_str(), 4), in, g);
    EXPECT_EQ(groups_of(g, CollectiveKind::kReduceScatter).size(), 2U) << type;
    UnitKernelCost kernels;
    UnitCollectiveCost collectives;
    return run_graph(g, 4, kernels, collectives).end;
  };
  EXPECT_EQ(run_ms("table_row_wise"), run_ms("row_wise"));
}

// ---- how DeepLearningExamples runs a step: GradScaler, sparse gradients, prefetched batches --

/// `rank`'s tasks of `kind` named `op` (the op a task belongs to), in issue order.
std::vector<TaskId> tasks_named(const TaskGraph& g, RankId rank, TaskKind kind,
                                std::string_view op) {
  std::vector<TaskId> out;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank == rank && t.kind == kind && g.name(t.op_name) == op) out.push_back(id);
  }
  return out;
}

const std::string kTinyAmp =
    with(kTiny, "global_batch: 8", "global_batch: 8\n  dtype: fp16") + "  master_weights: true\n";

// fp16 autocast with master weights brings torch.cuda.amp.GradScaler: the loss is scaled, the
// dense gradients unscaled, found_inf read on the host (which waits for the compute stream)
// before the dense step, and the scale updated after it.
TEST(DlrmGenerator, GradScalerReadsFoundInfOnTheHostBeforeTheDenseStep) {
  TaskGraph g;
  generate_dlrm(config_of(kTinyAmp.c_str(), 2), inputs_of(2, 1), g);
  const std::vector<TaskId> syncs =
      tasks_named(g, 0, TaskKind::kHostSync, "aten::_local_scalar_dense");
  ASSERT_EQ(syncs.size(), 1U);
  const std::vector<KernelDesc> unscale =
      kernels_of(g, 0, "aten::_amp_foreach_non_finite_check_and_unscale_");
  ASSERT_EQ(unscale.size(), 1U);
  // The 51 dense parameters (SgdStepNamesItsUpdateAndTensors), fp32: read and written.
  EXPECT_DOUBLE_EQ(unscale[0].bytes_read, 51 * 4);
  EXPECT_DOUBLE_EQ(unscale[0].bytes_written, 51 * 4);
  const std::vector<TaskId> unscale_tasks =
      tasks_named(g, 0, TaskKind::kKernel, "aten::_amp_foreach_non_finite_check_and_unscale_");
  const std::vector<TaskId> step = tasks_named(g, 0, TaskKind::kKernel, "aten::_foreach_add_");
  const std::vector<TaskId> update =
      tasks_named(g, 0, TaskKind::kKernel, "aten::_amp_update_scale_");
  ASSERT_EQ(step.size(), 1U);
  ASSERT_EQ(update.size(), 1U);
  EXPECT_LT(unscale_tasks[0], syncs[0]);
  EXPECT_LT(syncs[0], step[0]);
  EXPECT_LT(step[0], update[0]);
  EXPECT_EQ(g.task(syncs[0]).resource, 0);  // the compute stream
  // scale(loss): one host op aten::mul (its begin and end; DDP's pre-scales are in all-reduces).
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kCpuOp, "aten::mul").size(), 2U);
  // Off: explicitly, or with bf16 (which needs no loss scaling), or without master weights.
  for (const std::string& yaml :
       {kTinyAmp + "  grad_scaler: false\n", with(kTinyAmp.c_str(), "fp16", "bf16"),
        with(kTiny, "global_batch: 8", "global_batch: 8\n  dtype: fp16")}) {
    TaskGraph off;
    generate_dlrm(config_of(yaml.c_str(), 2), inputs_of(2, 1), off);
    EXPECT_TRUE(tasks_named(off, 0, TaskKind::kHostSync, "aten::_local_scalar_dense").empty())
        << yaml;
    EXPECT_TRUE(kernels_of(off, 0, "aten::_amp_foreach_non_finite_check_and_unscale_").empty());
    EXPECT_TRUE(tasks_named(off, 0, TaskKind::kCpuOp, "aten::mul").empty());
  }
  const std::string without_master =
      with(kTiny, "global_batch: 8", "global_batch: 8\n  dtype: fp16\n  grad_scaler: true");
  EXPECT_THROW(config_of(without_master.c_str(), 2), ConfigError);
}

// embeddings.update sparse: no FBGEMM backward; the gradient of each lookup is one value row,
// added into the table by the optimizer step's index_add_ (unscaled first under GradScaler).
// Rank 0 holds t0 (100 rows, pooling 10) and looks it up for the global batch of 8: 80 lookups
// of dim 2 = 160 values from 8 x 2 = 16 pooled gradient values (index_select copies them).
TEST(DlrmGenerator, SparseUpdateAddsEveryLookupsRowInTheOptimizerStep) {
  const std::string sparse =
      with(kTinyAmp.c_str(), "    dim: 2\n", "    dim: 2\n    update: sparse\n");
  TaskGraph g;
  generate_dlrm(config_of(sparse.c_str(), 2), inputs_of(2, 1), g);
  EXPECT_TRUE(kernels_of(g, 0, "fbgemm::split_embedding_backward_codegen_sgd").empty());
  const std::vector<KernelDesc> expand = kernels_of(g, 0, "aten::index_select");
  ASSERT_EQ(expand.size(), 1U);
  EXPECT_DOUBLE_EQ(expand[0].bytes_read, 16 * 4);
  EXPECT_DOUBLE_EQ(expand[0].bytes_written, 160 * 4);
  const std::vector<KernelDesc> add = kernels_of(g, 0, "aten::index_add_");
  ASSERT_EQ(add.size(), 1U);
  EXPECT_EQ(add[0].cls, KernelClass::kEmbeddingBackward);
  EXPECT_EQ(add[0].embedding.update, EmbeddingUpdate::kScatterAdd);
  ASSERT_EQ(add[0].embedding.per_table.size(), 1U);
  EXPECT_EQ(add[0].embedding.per_table[0].rows, 100);
  EXPECT_EQ(add[0].embedding.batch, 8);
  // Dense gradients (51) and the rank's 160 values, each unscaled once.
  const std::vector<KernelDesc> unscale =
      kernels_of(g, 0, "aten::_amp_foreach_non_finite_check_and_unscale_");
  ASSERT_EQ(unscale.size(), 2U);
  EXPECT_DOUBLE_EQ(unscale[1].bytes_read, 160 * 4);
  // One-hot tables (pooling 1) need no index_select: rank 1's t2 alone is pooling 1, but t1
  // is 5-hot, so rank 1 copies too; a one-hot model copies nothing.
  const std::string one_hot = tiny_with_tables(
      "      - {rows: 100, pooling: 1}\n      - {rows: 50, pooling: 1}\n      - {rows: 10, "
      "pooling: 1}\n");
  TaskGraph h;
  generate_dlrm(
      config_of(with(one_hot.c_str(), "    dim: 2\n", "    dim: 2\n    update: sparse\n").c_str(),
                2),
      inputs_of(2, 1), h);
  for (RankId r : {0U, 1U}) {
    EXPECT_TRUE(kernels_of(h, r, "aten::index_select").empty()) << r;
    EXPECT_EQ(kernels_of(h, r, "aten::index_add_").size(), 1U) << r;
  }
  // torch.optim.SGD only.
  const std::string adagrad =
      with(sparse.c_str(), "    update: sparse\n", "    update: sparse\n    optimizer: adagrad\n");
  EXPECT_THROW(config_of(adagrad.c_str(), 2), ConfigError);
}

// input prefetch: the batch's copies run on a third stream ("data"), the first before the
// loop and each next one after the optimizer step, each holding the host (pageable source);
// the forward waits for them. loss_to_host false: no per-step copy of the loss.
TEST(DlrmGenerator, PrefetchCopiesTheNextBatchOnTheDataStream) {
  const std::string prefetch = std::string(kTiny) + "  input: prefetch\n  loss_to_host: false\n";
  TaskGraph g;
  const DlrmGraph built = generate_dlrm(config_of(prefetch.c_str(), 2), inputs_of(2, 2), g);
  ASSERT_EQ(g.rank(built.ranks[0]).stream_names.size(), 3U);
  EXPECT_EQ(g.rank(built.ranks[0]).stream_names[2], "data");
  int on_data = 0;
  int loss_copies = 0;
  for (TaskId id = 0; id < g.task_count(); ++id) {
    const Task& t = g.task(id);
    if (t.rank != 0 || t.kind != TaskKind::kMemcpy) continue;
    if (t.resource == 2) ++on_data;
    if (g.transfer(id).kind == TransferKind::kDeviceToHost) ++loss_copies;
  }
  // Dense features, offsets, indices, targets: 4 copies a batch; 2 iterations load 3 batches.
  EXPECT_EQ(on_data, 12);
  EXPECT_EQ(loss_copies, 0);
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kHostSync, "aten::to").size(), 12U);
  // wait_stream each iteration: an event record on the data stream, a wait on the compute one.
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kLaunch, "torch.cuda.Stream.wait_stream").size(), 4U);
  // Blocking (the default): every copy on the compute stream, the loss copied each step.
  TaskGraph b;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 2), b);
  ASSERT_EQ(b.rank(0).stream_names.size(), 2U);
  int blocking_loss = 0;
  for (TaskId id = 0; id < b.task_count(); ++id) {
    const Task& t = b.task(id);
    if (t.rank == 0 && t.kind == TaskKind::kMemcpy) {
      EXPECT_EQ(t.resource, 0);
      if (b.transfer(id).kind == TransferKind::kDeviceToHost) ++blocking_loss;
    }
  }
  EXPECT_EQ(blocking_loss, 2);
  // Both fetch a batch through the DataLoader once per load.
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kCpuOp,
                        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
                .size(),
            3U);
  EXPECT_EQ(tasks_named(b, 0, TaskKind::kCpuOp,
                        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
                .size(),
            2U);
  EXPECT_THROW(config_of((std::string(kTiny) + "  input: async\n").c_str(), 2), ConfigError);
}

// With every DeepLearningExamples switch on, hybrid parallel included, the graph completes.
TEST(DlrmGenerator, DeepLearningExamplesStepRunsToCompletion) {
  const std::string dle =
      with(kTinyAmp.c_str(), "    dim: 2\n", "    dim: 2\n    update: sparse\n") +
      "  input: prefetch\n  loss_to_host: false\n  bottom_mlp_placement: first_rank\n";
  for (const uint32_t ranks : {1U, 2U, 6U}) {
    const std::string yaml = with(dle.c_str(), "global_batch: 8", "global_batch: 24");
    TaskGraph g;
    generate_dlrm(config_of(yaml.c_str(), ranks), inputs_of(ranks, 3), g);
    UnitKernelCost kernels;
    UnitCollectiveCost collectives;
    int ended = 0;
    const RunStats stats = run_graph(g, ranks, kernels, collectives, &ended);
    EXPECT_EQ(stats.tasks_done, g.task_count()) << ranks;
    EXPECT_EQ(static_cast<size_t>(ended), g.task_count()) << ranks;
  }
}

// mode inference: a served batch is its inputs' copies, the forward and the host's wait; no
// DataLoader fetch, targets, loss, backward or optimizer step, and only the forward all-to-all.
TEST(DlrmGenerator, InferenceServesABatchWithTheForwardAlone) {
  const std::string inference = std::string(kTiny) + "  mode: inference\n";
  TaskGraph g;
  generate_dlrm(config_of(inference.c_str(), 2), inputs_of(2, 2), g);
  TaskGraph t;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 2), t);
  for (const char* op : {"fbgemm::split_embedding_backward_codegen_sgd", "aten::_foreach_add_",
                         "aten::binary_cross_entropy", "aten::threshold_backward"}) {
    EXPECT_TRUE(kernels_of(g, 0, op).empty()) << op;
    EXPECT_FALSE(kernels_of(t, 0, op).empty()) << op;
  }
  EXPECT_EQ(kernels_of(g, 0, "fbgemm::split_embedding_codegen_lookup_sgd_function").size(), 2U);
  EXPECT_TRUE(tasks_named(g, 0, TaskKind::kCpuOp,
                          "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
                  .empty());
  // One forward all-to-all per iteration; dense features, offsets and indices copied, nothing
  // copied back.
  EXPECT_EQ(dlrm_test::collective_order(g, 0).size(), 2U);
  EXPECT_EQ(copies_of(g, 0).size(), 6U);
  EXPECT_EQ(count(g, 0).host_syncs, 2 * 3 + 2);  // each copy waited for, then the scores
  UnitKernelCost kernels;
  UnitCollectiveCost collectives;
  EXPECT_EQ(run_graph(g, 2, kernels, collectives).tasks_done, g.task_count());
  // A training loop's keys have no meaning for it.
  EXPECT_THROW(config_of((inference + "  input: prefetch\n").c_str(), 2), ConfigError);
  const std::string amp =
      with(kTinyAmp.c_str(), "global_batch: 8", "global_batch: 8\n  mode: inference");
  EXPECT_FALSE(config_of(amp.c_str(), 2).grad_scaler);
  EXPECT_THROW(config_of((amp + "  grad_scaler: true\n").c_str(), 2), ConfigError);
}

// cuda_graphs: the served batch's copies, their copies into the graph's static inputs (two
// device-to-device copies), then one cudaGraphLaunch enqueues every kernel of the forward: the
// same kernels as eager, none with a launch of its own; the host waits once for the scores.
TEST(DlrmGenerator, GraphedInferenceReplaysTheForwardInOneGraphLaunch) {
  const std::string inference = std::string(kTiny) + "  mode: inference\n";
  const std::string graphed = inference + "  cuda_graphs: true\n";
  TaskGraph eager;
  generate_dlrm(config_of(inference.c_str(), 1), inputs_of(1, 2), eager);
  TaskGraph g;
  generate_dlrm(config_of(graphed.c_str(), 1), inputs_of(1, 2), g);
  std::vector<TaskId> graph_launches;
  size_t kernels = 0;
  size_t captured_kernels = 0;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind == TaskKind::kLaunch && task.phase == HostPhase::kGraphLaunch) {
      graph_launches.push_back(t);
    }
    if (task.kind != TaskKind::kKernel) continue;
    ++kernels;
    const TaskId launcher = g.launcher_of(t);
    captured_kernels += g.task(launcher).phase == HostPhase::kGraphLaunch;
  }
  ASSERT_EQ(graph_launches.size(), 2U);  // one per iteration
  EXPECT_EQ(g.name(g.task(graph_launches[0]).name), "cudaGraphLaunch");
  size_t eager_kernels = 0;
  for (TaskId t = 0; t < eager.task_count(); ++t)
    eager_kernels += eager.task(t).kind == TaskKind::kKernel;
  EXPECT_EQ(kernels, eager_kernels);
  EXPECT_EQ(captured_kernels, kernels);
  EXPECT_EQ(copies_of(g, 0).size(), copies_of(eager, 0).size() + 2 * 2);
  EXPECT_EQ(count(g, 0).host_syncs, count(eager, 0).host_syncs);
  UnitKernelCost unit;
  UnitCollectiveCost collectives;
  EXPECT_EQ(run_graph(g, 1, unit, collectives).tasks_done, g.task_count());
  // A multi-rank graphed forward is refused, naming the key.
  EXPECT_THROW(config_of(graphed.c_str(), 2), ConfigError);
}

// input: preloaded (DeepLearningExamples' inference benchmark, whose DataLoader puts the batch on
// the GPU before the timed step): the step's two .to() calls copy nothing and wait for nothing;
// the host waits once for the scores. With CUDA graphs only the static inputs' device-to-device
// copies remain. A model run in fp16 casts the fp32 dense features first. Training refuses it.
TEST(DlrmGenerator, PreloadedInferenceCopiesNothingToTheDevice) {
  const std::string inference = std::string(kTiny) + "  mode: inference\n";
  const std::string preloaded = inference + "  input: preloaded\n";
  TaskGraph copied;
  generate_dlrm(config_of(inference.c_str(), 1), inputs_of(1, 2), copied);
  TaskGraph g;
  generate_dlrm(config_of(preloaded.c_str(), 1), inputs_of(1, 2), g);
  EXPECT_EQ(copies_of(copied, 0).size(), 6U);
  EXPECT_TRUE(copies_of(g, 0).empty());
  EXPECT_EQ(count(g, 0).host_syncs, 2);  // the scores, each iteration
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kCpuOp, "aten::to").size(), 2U * 2U);
  TaskGraph graphed;
  generate_dlrm(config_of((preloaded + "  cuda_graphs: true\n").c_str(), 1), inputs_of(1, 2),
                graphed);
  EXPECT_EQ(copies_of(graphed, 0).size(), 2U * 2U);  // static dense and categorical
  UnitKernelCost kernels;
  UnitCollectiveCost collectives;
  EXPECT_EQ(run_graph(g, 1, kernels, collectives).tasks_done, g.task_count());
  EXPECT_EQ(run_graph(graphed, 1, kernels, collectives).tasks_done, graphed.task_count());
  const std::string fp16 = with(kTiny, "global_batch: 8",
                                "global_batch: 8\n  dtype: fp16\n  mode: inference\n"
                                "  input: preloaded");
  TaskGraph half;
  generate_dlrm(config_of(fp16.c_str(), 1), inputs_of(1, 1), half);
  // The first kernel casts the 8 x 4 fp32 dense features to fp16.
  const std::vector<KernelDesc> casts = kernels_of(half, 0, "aten::copy_");
  ASSERT_FALSE(casts.empty());
  EXPECT_EQ(casts.front().bytes_read, 8.0 * 4 * 4);
  EXPECT_EQ(casts.front().dtype, DType::kFp16);
  EXPECT_THROW(config_of((std::string(kTiny) + "  input: preloaded\n").c_str(), 1), ConfigError);
}

// cuda_graphs in training (DeepLearningExamples' CudaGraphWrapper): per rank and iteration the
// prefetched batch is copied into the static inputs (dense, indices, targets), then ONE
// cudaGraphLaunch enqueues the forward, the loss and the scaled backward with their
// all-to-alls and DDP all-reduces; the optimizer stays eager. The same kernels and
// collectives as eager, far fewer launches, and no later end on the executor.
TEST(DlrmGenerator, GraphedTrainingReplaysForwardAndBackwardInOneGraphLaunch) {
  const std::string eager_yaml = std::string(kTiny) + "  input: prefetch\n  loss_to_host: false\n";
  const std::string graphed_yaml = eager_yaml + "  cuda_graphs: true\n";
  TaskGraph eager;
  generate_dlrm(config_of(eager_yaml.c_str(), 2), inputs_of(2, 2), eager);
  TaskGraph g;
  generate_dlrm(config_of(graphed_yaml.c_str(), 2), inputs_of(2, 2), g);
  for (RankId rank = 0; rank < 2; ++rank) {
    size_t graph_launches = 0;
    size_t captured_collectives = 0;
    size_t collectives = 0;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != rank) continue;
      if (task.kind == TaskKind::kLaunch && task.phase == HostPhase::kGraphLaunch) {
        ++graph_launches;
      }
      if (task.kind == TaskKind::kCollective) {
        ++collectives;
        captured_collectives += g.task(g.launcher_of(t)).phase == HostPhase::kGraphLaunch;
      }
    }
    EXPECT_EQ(graph_launches, 2U) << rank;  // one per iteration
    EXPECT_GT(collectives, 0U);
    EXPECT_EQ(captured_collectives, collectives) << rank;
    // The optimizer's kernels are launched one by one, after the replay.
    const std::vector<TaskId> step = tasks_named(g, rank, TaskKind::kKernel, "aten::_foreach_add_");
    EXPECT_FALSE(step.empty());
    for (const TaskId k : step)
      EXPECT_NE(g.task(g.launcher_of(k)).phase, HostPhase::kGraphLaunch);
    EXPECT_EQ(count(g, rank).kernels, count(eager, rank).kernels);
    EXPECT_EQ(count(g, rank).collectives, count(eager, rank).collectives);
    EXPECT_LT(count(g, rank).launches, count(eager, rank).launches / 2);
  }
  // Static copies: dense, categorical and targets per iteration on each rank.
  EXPECT_EQ(copies_of(g, 0).size(), copies_of(eager, 0).size() + 2 * 3);
  UnitKernelCost unit;
  UnitCollectiveCost collectives;
  const RunStats graphed_run = run_graph(g, 2, unit, collectives);
  EXPECT_EQ(graphed_run.tasks_done, g.task_count());
  const RunStats eager_run = run_graph(eager, 2, unit, collectives);
  EXPECT_LE(graphed_run.end, eager_run.end);
  // A capture cannot wait for a copy: blocking input and the loss to the host are refused.
  EXPECT_THROW(config_of((std::string(kTiny) + "  cuda_graphs: true\n").c_str(), 1), ConfigError);
  EXPECT_THROW(
      config_of((std::string(kTiny) + "  input: prefetch\n  cuda_graphs: true\n").c_str(), 1),
      ConfigError);
}

// mlp_kernels cublaslt_fused (HugeCTR's FusedReluBiasFullyConnectedLayer chain): per MLP one
// host op, per ReLU layer one GEMM (the bias and ReLU in its epilogue) and the chain's output
// copied as the ReLU mask; backward the last layer's dReLU kernel, then per layer the
// accumulating weight-gradient GEMM and, where needed, the input-gradient GEMM. The GEMMs are
// apex's; no bias-ReLU kernels.
TEST(DlrmGenerator, CublasLtFusedMlpIsOneGemmPerLayerWithItsEpilogue) {
  const std::string apex = std::string(kTiny) + "  mlp_kernels: apex_fused\n";
  const std::string fused = std::string(kTiny) + "  mlp_kernels: cublaslt_fused\n";
  TaskGraph a;
  generate_dlrm(config_of(apex.c_str(), 2), inputs_of(2, 1), a);
  TaskGraph g;
  generate_dlrm(config_of(fused.c_str(), 2), inputs_of(2, 1), g);
  // Bottom [4, 2]: 1 ReLU layer; top [8, 4, 1]: 1 ReLU layer, then the nn.Linear.
  const std::vector<KernelDesc> forward = kernels_of(g, 0, "cublasLtMatmul");
  const std::vector<KernelDesc> wgrad = kernels_of(g, 0, "cublasGemmEx");
  EXPECT_EQ(forward.size(), 2U + 1U);  // two forward GEMMs, the top layer's input gradient
  EXPECT_EQ(wgrad.size(), 2U);
  EXPECT_EQ(kernels_of(g, 0, "FusedReluBiasFullyConnectedLayer::bprop").size(), 2U);
  EXPECT_TRUE(kernels_of(g, 0, "apex::mlp_forward").empty());
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kCpuOp, "FusedReluBiasFullyConnectedLayer::fprop").size(),
            2U * 2);  // begin, end
  const auto flops = [](const std::vector<KernelDesc>& kernels) {
    double sum = 0;
    for (const KernelDesc& k : kernels)
      if (k.cls == KernelClass::kGemm) sum += k.flops;
    return sum;
  };
  EXPECT_EQ(flops(forward) + flops(wgrad), flops(kernels_of(a, 0, "apex::mlp_forward")) +
                                               flops(kernels_of(a, 0, "apex::mlp_backward")));
  // One relu mask copy per MLP: 4 samples x 2 and 4 x 4 fp32 values.
  EXPECT_EQ(copies_of(g, 0).size(), copies_of(a, 0).size() + 2);
  UnitKernelCost kernels;
  UnitCollectiveCost collectives;
  EXPECT_EQ(run_graph(g, 2, kernels, collectives).tasks_done, g.task_count());
}

// mlp_kernels apex_fused: one host op per MLP (apex.mlp.MLP), per layer a GEMM and a fused
// bias-ReLU kernel forward, a bias-ReLU backward kernel and its GEMMs backward; the top MLP's
// last layer stays an nn.Linear. interaction_kernel fused: one kernel each way. Same GEMMs.
TEST(DlrmGenerator, ApexMlpAndFusedInteractionKeepTheGemmsInFewerHostOps) {
  const std::string fused =
      std::string(kTiny) + "  mlp_kernels: apex_fused\n  interaction_kernel: fused\n";
  TaskGraph g;
  generate_dlrm(config_of(fused.c_str(), 2), inputs_of(2, 1), g);
  TaskGraph a;
  generate_dlrm(config_of(kTiny, 2), inputs_of(2, 1), a);
  // Bottom [4, 2]: 1 ReLU layer; top [8, 4, 1]: 1 ReLU layer, then the nn.Linear.
  EXPECT_EQ(kernels_of(g, 0, "apex::mlp_forward").size(), 2U * 2);
  EXPECT_EQ(kernels_of(g, 0, "aten::addmm").size(), 1U);
  EXPECT_EQ(kernels_of(g, 0, "aten::relu").size(), 0U);
  // Backward: the bottom layer needs no input gradient (bias-ReLU + wgrad), the top ReLU layer
  // does (bias-ReLU + dgrad + wgrad).
  EXPECT_EQ(kernels_of(g, 0, "apex::mlp_backward").size(), 2U + 3U);
  EXPECT_EQ(tasks_named(g, 0, TaskKind::kCpuOp, "MlpFunction").size(), 2U * 2);  // begin, end
  // The GEMM shapes are aten's: the forward GEMMs are the addmm ones without the bias.
  std::vector<std::pair<int64_t, int64_t>> fused_mk;
  for (const KernelDesc& k : kernels_of(g, 0, "apex::mlp_forward")) {
    if (k.cls == KernelClass::kGemm) fused_mk.emplace_back(k.m, k.k);
  }
  std::vector<std::pair<int64_t, int64_t>> aten_mk;
  for (const KernelDesc& k : kernels_of(a, 0, "aten::addmm"))
    aten_mk.emplace_back(k.m, k.k);
  aten_mk.pop_back();  // the top MLP's last layer, an nn.Linear in both
  EXPECT_EQ(fused_mk, aten_mk);
  ASSERT_EQ(kernels_of(g, 0, "dot_based_interact::fwd").size(), 1U);
  ASSERT_EQ(kernels_of(g, 0, "dot_based_interact::bwd").size(), 1U);
  EXPECT_TRUE(kernels_of(g, 0, "aten::bmm").empty());
  EXPECT_EQ(kernels_of(a, 0, "aten::bmm").size(), 3U);
  // Local batch 4, f = 4 features of dim 2, 6 pairs: the forward reads (f + 1) x 2 and writes
  // 2 + 6 values a sample, fp32.
  const KernelDesc dot = kernels_of(g, 0, "dot_based_interact::fwd")[0];
  EXPECT_DOUBLE_EQ(dot.bytes_read, 4 * 5 * 2 * 4);
  EXPECT_DOUBLE_EQ(dot.bytes_written, 4 * 8 * 4);
  UnitKernelCost kernels;
  UnitCollectiveCost collectives;
  EXPECT_EQ(run_graph(g, 2, kernels, collectives).tasks_done, g.task_count());
  // With DCNv2, fused means HugeCTR's cross layer (FusedDcnV2CrossLayersRunAsHugeCtrDoes).
  const std::string dcn = with(fused.c_str(), "  top_mlp: [4, 1]\n",
                               "  top_mlp: [4, 1]\n  interaction: dcnv2\n  cross_layers: 1\n");
  EXPECT_EQ(config_of(dcn.c_str(), 2).interaction_kernel, InteractionKernel::kFused);
  EXPECT_THROW(
      config_of(
          with(fused.c_str(), "interaction_kernel: fused", "interaction_kernel: cuda").c_str(), 2),
      ConfigError);
}

}  // namespace
}  // namespace upsim
