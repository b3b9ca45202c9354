// The routed experts' tensor parallel (parallelism.expert_tensor; Megatron-Core's
// expert_tensor_parallel_size): at 1 under tensor parallel each expert is whole on a rank, the
// tensor ranks are expert-parallel ranks too (the expert rank layout's ep groups span them), the
// experts run their rank's own sequence shard with no tensor-rank gathers, the shared experts
// stay split over the tensor ranks; parameters, optimizer and memory agree; what the config
// accepts and refuses.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// small_gpt() without biases, with 16 experts (top 2, one shared expert) at tensor 2 (sequence
/// parallel) x data 8, expert parallel `ep`, expert tensor parallel `etp`, two micro-batches per
/// replica.
TransformerConfig tp2_moe(int64_t ep, int64_t etp) {
  TransformerConfig c = test_configs::with_moe(test_configs::small_gpt(), 16, 2, 2048);
  c.bias = false;
  c.moe.shared_experts = 1;
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  c.parallelism.data = 8;
  c.parallelism.expert = ep;
  c.parallelism.expert_tensor = etp;
  c.global_batch = c.micro_batch * 8 * 2;
  return c;
}

// Megatron-Core's expert rank layout (parallel_state.py, expert_decoder_rank_generator): tp =
// expert tensor parallel. At 2 the ep group of rank 0 is every other rank; at 1 it is the first
// eight, tensor ranks included, and expert parallel 16 spans all sixteen (more than data 8).
TEST(ExpertTensorParallel, TheExpertGroupsSpanTheTensorRanksAtOne) {
  const auto group = [](const TransformerConfig& c) {
    return ParallelLayout(c.parallelism).group(ParallelDim::kExpert, 0);
  };
  EXPECT_EQ(group(tp2_moe(8, 2)), (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(group(tp2_moe(8, 1)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(group(tp2_moe(16, 1)).size(), 16u);
  EXPECT_EQ(tp2_moe(8, 1).parallelism.expert_data(), 2);
  EXPECT_EQ(ParallelLayout(tp2_moe(8, 1).parallelism).expert_replica_group(0),
            (std::vector<int64_t>{0, 8}));
}

// At 1 each expert runs the rank's own rows on its whole width, no tensor-rank gathers or
// scatters of the experts' rows; the shared expert stays on half its width.
TEST(ExpertTensorParallel, AtOneEachExpertRunsTheRanksOwnRowsOnItsWholeWidth) {
  const TransformerConfig c = tp2_moe(16, 1);
  const LayerSizes z = layer_sizes(c);
  TaskGraph g;
  const LayerKernels k = add_layer_kernels(c, z, g);
  const KernelDesc& fc1 = g.kernel_desc(k.expert_fc1_fwd);
  EXPECT_EQ(fc1.m, tokens_per_local_expert(c, z));
  EXPECT_EQ(fc1.n, c.moe.expert_ffn);
  EXPECT_EQ(g.kernel_desc(k.shared_fc1_fwd).n, c.moe.expert_ffn / 2);
  EXPECT_EQ(test_configs::collective_count(c, "moe::gather_from_sequence_parallel_region"), 0);
  EXPECT_GT(
      test_configs::collective_count(tp2_moe(8, 2), "moe::gather_from_sequence_parallel_region"),
      0);
}

// The optimizer steps the parameters the memory model counts, at either expert tensor parallel;
// at 1 a rank holds its experts whole (twice the elements of half-width ones at the same expert
// parallel) and stores half the permuted rows.
TEST(ExpertTensorParallel, ParametersAndMemoryFollowTheExpertsSplit) {
  for (const int64_t etp : {int64_t{1}, int64_t{2}}) {
    const TransformerConfig c = tp2_moe(8, etp);
    int64_t stepped = 0;
    for (const KernelDesc& kd : test_configs::step_kernels(c)) {
      if (kd.memory_op == MemoryOp::kOptimizer && kd.cls == KernelClass::kMemoryBound) {
        stepped = std::accumulate(kd.optimizer.tensor_elements.begin(),
                                  kd.optimizer.tensor_elements.end(), int64_t{0});
      }
    }
    EXPECT_EQ(stepped, transformer_stage_parameters(c, 0).total()) << "etp " << etp;
  }
  EXPECT_EQ(transformer_stage_parameters(tp2_moe(8, 1), 0).expert,
            2 * transformer_stage_parameters(tp2_moe(8, 2), 0).expert);
  EXPECT_LT(transformer_layer_activation_bytes(tp2_moe(8, 1), true),
            transformer_layer_activation_bytes(tp2_moe(8, 2), true));
}

TEST(ExpertTensorParallel, TheConfigTakesOneOrTensorAndRefusesTheRestAtTheKey) {
  const auto error = [](const std::string& extra, const std::string& parallelism) {
    return test_configs::small_llama_error(extra, parallelism, 16);
  };
  const std::string moe = "  moe: {experts: 16}\n";
  const std::string tp2 = "tensor: 2, sequence: true, data: 8";
  EXPECT_EQ(error(moe, "{" + tp2 + ", expert: 16, expert_tensor: 1}"), "");
  EXPECT_NE(error(moe, "{" + tp2 + ", expert: 16}").find("does not divide data 8"),
            std::string::npos);
  EXPECT_NE(error(moe, "{tensor: 4, sequence: true, data: 4, expert_tensor: 2}")
                .find("parallelism.expert_tensor"),
            std::string::npos);
  EXPECT_NE(error("", "{" + tp2 + ", expert_tensor: 1}").find("needs a mixture of experts"),
            std::string::npos);
  // DeepEP's group is the expert tensor x expert ranks: with expert tensor parallel 1 it runs.
  EXPECT_EQ(error("  moe: {experts: 16, dispatcher: flex}\n",
                  "{" + tp2 + ", expert: 16, expert_tensor: 1}"),
            "");
  EXPECT_NE(error("  moe: {experts: 16, dispatcher: flex}\n", "{" + tp2 + ", expert: 8}")
                .find("parallelism.expert_tensor 1"),
            std::string::npos);
}

}  // namespace
}  // namespace upsim
