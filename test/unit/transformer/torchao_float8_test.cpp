// torchao's float8 training under torchtitan (dtype fp8 with layer_kernels torchtitan;
// workloads/transformer/torchao_float8.h): what the config accepts and refuses, the casts'
// kernels and bytes per recipe (torchao's roofline), float8 all-gathers under TP and FSDP2, the
// bf16 weight gradient of rowwise_with_gw_hp. The step against torchao's published H100
// speedups: test/unit/tools/float8_validation_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/layer_kernels.h"

namespace upsim {
namespace {

std::string error_of(const std::string& extra, uint32_t gpus = 2,
                     const std::string& parallelism = "{tensor: 2, sequence: true, data: 1}") {
  return test_configs::small_llama_error(extra, parallelism, gpus);
}

const std::string kTorchtitanFp8 = "  layer_kernels: torchtitan\n  compile: true\n  dtype: fp8\n";

TEST(TorchaoFloat8, TorchtitanTrainsFp8WithTorchaosRecipesTensorwiseByDefault) {
  EXPECT_EQ(error_of(kTorchtitanFp8), "");
  const TransformerConfig c =
      test_configs::parse_workload(test_configs::small_llama_workload_yaml() + kTorchtitanFp8 +
                                       "  parallelism: {tensor: 2, sequence: true, data: 1}\n",
                                   2);
  EXPECT_EQ(c.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_TRUE(c.torchao_float8());
  EXPECT_TRUE(c.float8_tensor_parallel());
  for (const char* recipe : {"rowwise", "rowwise_with_gw_hp"}) {
    EXPECT_EQ(error_of(kTorchtitanFp8 + "  fp8_recipe: " + recipe + "\n"), "") << recipe;
  }
  const std::string te = error_of(kTorchtitanFp8 + "  fp8_recipe: delayed\n");
  EXPECT_NE(te.find("workload.fp8_recipe"), std::string::npos) << te;
  EXPECT_NE(te.find("Transformer Engine"), std::string::npos) << te;
  const std::string fused = error_of("  dtype: fp8\n  fp8_recipe: tensorwise\n");
  EXPECT_NE(fused.find("workload.fp8_recipe"), std::string::npos) << fused;
  EXPECT_NE(fused.find("torchao"), std::string::npos) << fused;
  const std::string eager = error_of("  layer_kernels: torchtitan\n  dtype: fp8\n");
  EXPECT_NE(eager.find("workload.compile"), std::string::npos) << eager;
  const std::string no_sp = error_of(kTorchtitanFp8, 2, "{tensor: 2, sequence: false, data: 1}");
  EXPECT_NE(no_sp.find("parallelism.sequence"), std::string::npos) << no_sp;
  const std::string async_tp =
      error_of(kTorchtitanFp8, 2, "{tensor: 2, sequence: true, data: 1, async_tp: true}");
  EXPECT_NE(async_tp.find("workload.dtype"), std::string::npos) << async_tp;
}

TEST(TorchaoFloat8, Fp8FsdpAllGatherNeedsTensorwiseAndFsdp) {
  const std::string fsdp = "{tensor: 1, data: 2, fsdp: full_shard}";
  EXPECT_EQ(error_of(kTorchtitanFp8 + "  fp8_fsdp_all_gather: true\n", 2, fsdp), "");
  const std::string rowwise =
      error_of(kTorchtitanFp8 + "  fp8_recipe: rowwise\n  fp8_fsdp_all_gather: true\n", 2, fsdp);
  EXPECT_NE(rowwise.find("workload.fp8_fsdp_all_gather"), std::string::npos) << rowwise;
  const std::string ddp =
      error_of(kTorchtitanFp8 + "  fp8_fsdp_all_gather: true\n", 2, "{tensor: 1, data: 2}");
  EXPECT_NE(ddp.find("parallelism.fsdp"), std::string::npos) << ddp;
  const std::string bf16 = error_of(
      "  layer_kernels: torchtitan\n  compile: true\n  fp8_fsdp_all_gather: true\n", 2, fsdp);
  EXPECT_NE(bf16.find("workload.fp8_fsdp_all_gather"), std::string::npos) << bf16;
}

TransformerConfig float8_llama(Fp8Recipe recipe, int64_t tensor = 1) {
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 8192);
  c.layer_kernels = LayerKernelSet::kTorchtitan;
  c.compile = true;
  c.dtype = DType::kFp8;
  c.fp8_recipe = recipe;
  c.parallelism.tensor = tensor;
  c.parallelism.sequence = tensor > 1;
  return c;
}

/// Bytes one kernel named `name` reads and writes (the first of that name in the step), per
/// element of an operand of `elements`.
std::pair<double, double> bytes_per_element(const TransformerConfig& c, const std::string& name,
                                            double elements) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind == TaskKind::kKernel && g.task(t).rank == 0 &&
        g.name(g.task(t).name) == name) {
      return {g.kernel(t).bytes_read / elements, g.kernel(t).bytes_written / elements};
    }
  }
  return {-1, -1};
}

// torchao's roofline (roofline_utils.py) per recipe: tensorwise reads an input for its amax
// (2 bytes per element) and again for the cast, which writes float8 twice (1 + 1); rowwise's
// first cast writes float8 and the bf16 transpose (1 + 2), the second casts that (2 + 1).
// The first such kernel of a step is the attention input's: 8192 tokens x 4096.
TEST(TorchaoFloat8, CastKernelsMoveTheBytesOfTorchaosRoofline) {
  const double input = 8192.0 * 4096.0;
  const auto tensorwise = float8_llama(Fp8Recipe::kTensorwise);
  EXPECT_EQ(bytes_per_element(tensorwise, "float8_amax", input), std::make_pair(2.0, 0.0));
  EXPECT_EQ(bytes_per_element(tensorwise, "float8_cast_transpose", input),
            std::make_pair(2.0, 2.0));
  const auto rowwise = float8_llama(Fp8Recipe::kRowwise);
  EXPECT_EQ(bytes_per_element(rowwise, "float8_cast_rowwise_transpose", input),
            std::make_pair(2.0, 3.0));
  // Rowwise's backward GEMMs run as cuBLAS tensorwise ones, their bf16 outputs rescaled after
  // (2 + 2): the first is w2's data gradient (8192 tokens x 14336; the backward starts with the
  // last layer's MLP).
  EXPECT_EQ(bytes_per_element(rowwise, "float8_rowwise_rescale", 8192.0 * 14336.0),
            std::make_pair(2.0, 2.0));
  EXPECT_EQ(test_configs::kernel_counts(rowwise).at("float8_rowwise_rescale"), 2 * 7 * 2);
  EXPECT_EQ(test_configs::kernel_counts(tensorwise).count("float8_rowwise_rescale"), 0u);
  const std::map<std::string, int> t = test_configs::kernel_counts(tensorwise);
  const int layers = 2;
  // Per layer: 4 input casts (wq/wk/wv share one, wo, w1/w3 share one, w2) and 5 output
  // gradients' cast-transposes (wq, wk, wv, w1, w3 and wo, w2: 7); 7 weights cast forward and
  // backward; an amax (two kernels) before every input, output-gradient and weight cast.
  EXPECT_EQ(t.at("float8_cast_transpose"), (4 + 7) * layers);
  EXPECT_EQ(t.at("float8_cast"), 2 * 7 * layers);
  EXPECT_EQ(t.at("float8_amax"), (4 + 7 + 7) * layers);
  EXPECT_EQ(t.at("float8_amax_final"), t.at("float8_amax"));
  EXPECT_EQ(t.at("fp8gemm/q"), layers);
  EXPECT_EQ(t.at("fp8gemm/wgrad"), 7 * layers);
  // The output layer stays bf16 (torchtitan's filter_fqns ["output"]).
  EXPECT_EQ(t.at("bf16gemm/logits"), 1);
}

TEST(TorchaoFloat8, RowwiseWithGwHpRunsTheWeightGradientsInBf16) {
  const std::map<std::string, int> k =
      test_configs::kernel_counts(float8_llama(Fp8Recipe::kRowwiseWithGwHp));
  const int layers = 2;
  EXPECT_EQ(k.count("fp8gemm/wgrad"), 0u);
  // The 7 Float8Linears' and the output layer's.
  EXPECT_EQ(k.at("bf16gemm/wgrad"), 7 * layers + 1);
  EXPECT_EQ(k.at("fp8gemm/dgrad"), 7 * layers);
}

// torchtitan's per-op checkpointing saves aten.max: recomputing a layer runs the unsaved
// matmuls' casts again, never an amax. Tensorwise without TP: per layer the policy reruns
// every second matmul (wq, wv, w1, w2 of the 7 in the first forward): their weights' casts,
// and the inputs of the three that read one (the attention's, the MLP's, w2's).
TEST(TorchaoFloat8, OpRecomputeRerunsCastsNotAmaxes) {
  const TransformerConfig plain = float8_llama(Fp8Recipe::kTensorwise);
  TransformerConfig op = plain;
  op.recompute = Recompute::kOp;
  const std::map<std::string, int> p = test_configs::kernel_counts(plain);
  const std::map<std::string, int> r = test_configs::kernel_counts(op);
  EXPECT_EQ(r.at("float8_amax"), p.at("float8_amax"));
  EXPECT_EQ(r.at("float8_amax_final"), p.at("float8_amax_final"));
  EXPECT_GT(r.at("float8_cast"), p.at("float8_cast"));
  EXPECT_GT(r.at("float8_cast_transpose"), p.at("float8_cast_transpose"));
  EXPECT_EQ(r.at("fp8gemm/wgrad"), p.at("fp8gemm/wgrad"));
}

/// Rank 0's collective bytes by name in one step of `c`.
std::map<std::string, int64_t> collective_bytes(const TransformerConfig& c) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  std::map<std::string, int64_t> bytes;
  for (CollectiveId id = 0; id < g.collective_count(); ++id) {
    if (g.collective(id).members.front() != 0) continue;
    bytes[std::string(g.collective_name(id))] += g.collective(id).bytes;
  }
  return bytes;
}

// Float8 TP (tensorwise): the attention's and the MLP's inputs and wo's and w2's output
// gradients are all-gathered in float8, half the bf16 bytes; rowwise gathers bf16. The
// reduce-scatters stay bf16.
TEST(TorchaoFloat8, TensorwiseTensorParallelGathersFloat8) {
  TransformerConfig bf16 = float8_llama(Fp8Recipe::kTensorwise, 2);
  bf16.dtype = DType::kBf16;
  const auto b = collective_bytes(bf16);
  const auto t = collective_bytes(float8_llama(Fp8Recipe::kTensorwise, 2));
  const auto r = collective_bytes(float8_llama(Fp8Recipe::kRowwise, 2));
  // Per layer 4 gathers of the sequence shard (8192 / 2 tokens x 4096): one byte an element
  // instead of two.
  const int64_t layers = 2;
  const int64_t shard = 4096 * 4096;
  EXPECT_EQ(b.at("tp:all_gather") - t.at("tp:all_gather"), 4 * layers * shard);
  EXPECT_EQ(r.at("tp:all_gather"), b.at("tp:all_gather"));
  EXPECT_EQ(t.at("tp:reduce_scatter"), b.at("tp:reduce_scatter"));
  // The amax of every TP-sharded operand (4 inputs, 7 output gradients, 7 weights per layer):
  // one fp32 all-reduce each, none under rowwise.
  EXPECT_EQ(t.at("tp:all_reduce") - b.at("tp:all_reduce"), 4 * (4 + 7 + 7) * layers);
  EXPECT_EQ(r.at("tp:all_reduce"), b.at("tp:all_reduce"));
}

// FSDP2 float8 all-gather: a layer's weights are gathered at one byte each (the embedding's
// and the output layer's stay bf16), after a cast of the shard on the communication stream.
TEST(TorchaoFloat8, FsdpFloat8AllGatherHalvesTheLayersGathers) {
  TransformerConfig bf16 = float8_llama(Fp8Recipe::kTensorwise);
  bf16.parallelism.data = 8;
  bf16.global_batch = 8;
  bf16.parallelism.fsdp = FsdpMode::kFullShard;
  bf16.dtype = DType::kBf16;
  TransformerConfig fp8 = bf16;
  fp8.dtype = DType::kFp8;
  TransformerConfig gathered = fp8;
  gathered.fp8_fsdp_all_gather = true;
  const auto b = collective_bytes(bf16);
  const auto f = collective_bytes(fp8);
  const auto g = collective_bytes(gathered);
  EXPECT_EQ(f.at("dp:all_gather"), b.at("dp:all_gather"));
  // 2 layers, each gathered for the forward and again for the backward (reshard_after_forward):
  // its shard (the Float8Linears' weights and the two norms' over 8) one byte an element
  // instead of two; the embedding's and the final norm's gathers are unchanged.
  const int64_t layer_shard =
      (torchao_float8_linear_elements(layer_sizes(fp8)) + 2 * fp8.hidden) / 8;
  EXPECT_EQ(b.at("dp:all_gather") - g.at("dp:all_gather"), 2 * 2 * layer_shard);
  const std::map<std::string, int> k = test_configs::kernel_counts(gathered);
  // No weight cast in the forward (the shard casts before the 4 gathers are the only
  // float8_casts); each backward transposes the gathered float8 weight; the amaxes are
  // computed once, after the optimizer step.
  EXPECT_EQ(k.at("float8_cast"), 2 * 2);
  EXPECT_EQ(k.at("float8_amax_foreach_norm"), 1);
  // The shard cast reads the layer's Float8Linear weights' shard in bf16 (2 bytes each).
  const double shard = as_double(torchao_float8_linear_elements(layer_sizes(fp8))) / 8.0;
  EXPECT_EQ(bytes_per_element(gathered, "float8_cast", shard), std::make_pair(2.0, 1.0));
}

}  // namespace
}  // namespace upsim
