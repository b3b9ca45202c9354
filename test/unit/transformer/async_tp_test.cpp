// torchtitan's async tensor parallel (parallelism.async_tp; workloads/transformer/
// async_tp_emitter.cpp): what the config refuses, the fused ops in place of the collectives, and
// what it hides.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "sim/parallel_dim.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"

namespace upsim {
namespace {

std::string error_of(const std::string& extra) {
  return test_configs::workload_error(
      test_configs::small_llama_workload_yaml() + extra +
          "  parallelism: {tensor: 2, sequence: true, data: 1, async_tp: true}\n",
      2);
}

TEST(AsyncTp, NeedsTorchtitansModulesCompileAndSequenceParallel) {
  EXPECT_EQ(error_of("  layer_kernels: torchtitan\n  compile: true\n"), "");
  const std::string fused = error_of("  compile: true\n");
  EXPECT_NE(fused.find("workload.layer_kernels"), std::string::npos) << fused;
  EXPECT_NE(fused.find("parallelism.tp_comm_overlap"), std::string::npos) << fused;
  const std::string eager = error_of("  layer_kernels: torchtitan\n");
  EXPECT_NE(eager.find("workload.compile"), std::string::npos) << eager;
  const std::string no_sp = test_configs::workload_error(
      test_configs::small_llama_workload_yaml() +
          "  layer_kernels: torchtitan\n  compile: true\n"
          "  parallelism: {tensor: 2, sequence: false, data: 1, async_tp: true}\n",
      2);
  EXPECT_NE(no_sp.find("parallelism.sequence"), std::string::npos) << no_sp;
  const std::string no_tp =
      test_configs::workload_error(test_configs::small_llama_workload_yaml() +
                                       "  layer_kernels: torchtitan\n  compile: true\n"
                                       "  parallelism: {tensor: 1, data: 1, async_tp: true}\n",
                                   1);
  EXPECT_NE(no_tp.find("parallelism.tensor"), std::string::npos) << no_tp;
  const std::string op =
      error_of("  layer_kernels: torchtitan\n  compile: true\n  recompute: op\n");
  EXPECT_NE(op.find("workload.recompute"), std::string::npos) << op;
  EXPECT_EQ(error_of("  layer_kernels: torchtitan\n  compile: true\n  recompute: full\n"), "");
}

TransformerConfig torchtitan_llama(int64_t tensor, bool async_tp) {
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 8192);
  c.layer_kernels = LayerKernelSet::kTorchtitan;
  c.compile = true;
  c.parallelism.tensor = tensor;
  c.parallelism.sequence = true;
  c.parallelism.async_tp = async_tp;
  return c;
}

// Per layer and micro-batch, tensor 4: the attention's and the MLP's input all-gather become
// fused all-gather matmuls (4 shards each: wq, wk, wv, then w1, w3), wo's and w2's
// reduce-scatter fused matmul reduce-scatters (4 chunks, one sum), and in the backward their
// output gradient's all-gather fused with the dgrad; the reduce-scatters of the summed input
// gradients stay.
TEST(AsyncTp, TheCollectivesBecomeShardedMatmulsAndPeerCopies) {
  const std::map<std::string, int> sync = test_configs::kernel_counts(torchtitan_llama(4, false));
  const std::map<std::string, int> fused = test_configs::kernel_counts(torchtitan_llama(4, true));
  const int layers = 2;
  const int shards = 4;
  for (const char* gemm : {"bf16gemm/q", "bf16gemm/k", "bf16gemm/v", "bf16gemm/w1", "bf16gemm/w3",
                           "bf16gemm/proj", "bf16gemm/fc2"}) {
    EXPECT_EQ(sync.at(gemm), layers) << gemm;
    EXPECT_EQ(fused.at(gemm), shards * layers) << gemm;
  }
  // dgrad: wo's and w2's 4 shards each instead of one; wq, wk, wv, w1, w3 unchanged.
  EXPECT_EQ(fused.at("bf16gemm/dgrad") - sync.at("bf16gemm/dgrad"), 2 * (shards - 1) * layers);
  EXPECT_EQ(fused.at("bf16gemm/wgrad"), sync.at("bf16gemm/wgrad"));
  // Two local-shard copies per all-gather matmul (buffer, gathered output): 4 per layer.
  EXPECT_EQ(fused.at("symm_mem_copy"), 2 * 4 * layers);
  EXPECT_EQ(fused.at("symm_mem_reduce"), 2 * layers);
}

// Async TP hides tensor-parallel communication behind the sharded matmuls: at tensor 2 and 4
// the step is faster than with DTensor's blocking collectives, and gains at most the
// tensor-parallel communication those expose.
TEST(AsyncTp, HidesAtMostTheExposedTensorParallelCommunication) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  ConfigDocument fabric_doc = ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) /
                                                        "topologies" / "dgx_h100.yaml");
  const Fabric fabric = load_fabric(fabric_doc.root());
  const auto run = [&](const TransformerConfig& c) {
    TaskGraph g;
    generate_transformer(c, {1}, g);
    g.seal();
    return test_configs::run_step(g, h100.model, fabric, h100.hw, 1).ranks.front();
  };
  for (const int64_t tensor : {2, 4}) {
    const RankBreakdown sync = run(torchtitan_llama(tensor, false));
    const RankBreakdown fused = run(torchtitan_llama(tensor, true));
    const Duration exposed_tp = sync.exposed_by_dim[static_cast<size_t>(ParallelDim::kTensor)];
    std::printf(
        "Llama 8B-shaped 2 layers, seq 8192, torchtitan compiled, TP %lld on H100: blocking "
        "%.3f ms (exposed TP %.3f ms), async TP %.3f ms\n",
        static_cast<long long>(tensor), sync.window.seconds() * 1e3, exposed_tp.seconds() * 1e3,
        fused.window.seconds() * 1e3);
    EXPECT_LT(fused.window, sync.window) << "TP " << tensor;
    EXPECT_LE(sync.window - fused.window, exposed_tp) << "TP " << tensor;
  }
}

}  // namespace
}  // namespace upsim
