// Megatron-Core's selective recomputation by module (recompute_modules.h): what each module
// reruns in a generated step, what it stops storing, what a step with it costs, and the
// reader's refusals.
#include "workloads/transformer/recompute_modules.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "topology/fabric_loader.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

/// What one generated step of rank 0 runs.
struct StepWork {
  int64_t attention_forwards = 0;
  int64_t attention_backwards = 0;
  double gemm_flops = 0.0;
  int64_t memory_bound_kernels = 0;
  int64_t collectives = 0;
};

StepWork step_work(const TransformerConfig& c) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  StepWork w;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.rank != 0) continue;
    if (task.kind == TaskKind::kCollective) ++w.collectives;
    if (task.kind != TaskKind::kKernel) continue;
    const KernelDesc& k = g.kernel(t);
    if (k.cls == KernelClass::kAttention) {
      ++(k.attention.backward ? w.attention_backwards : w.attention_forwards);
    }
    if (k.cls == KernelClass::kGemm) {
      w.gemm_flops += 2.0 * static_cast<double>(k.batch * k.m) * static_cast<double>(k.n) *
                      static_cast<double>(k.k);
    }
    if (k.cls == KernelClass::kMemoryBound) ++w.memory_bound_kernels;
  }
  return w;
}

/// Two Llama-8B-shaped layers at TP 2 with sequence parallelism.
TransformerConfig llama_tp2() {
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 4096);
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  return c;
}

/// Two Mixtral-shaped MoE layers (8 experts, top 2, one shared expert) at EP 2.
TransformerConfig small_moe() {
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 2048);
  c.moe.experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 14336;
  c.moe.shared_experts = 1;
  c.moe.capacity_factor = 0.0;
  c.parallelism.expert = 2;
  c.parallelism.data = 2;
  c.global_batch = 2;  // one micro-batch per replica
  return c;
}

TEST(RecomputeModules, SelectiveRerunsFlashAttentionsForwardAsMegatronCoreCheckpointsIt) {
  // Megatron-Core checkpoints the core attention whatever its implementation: with flash
  // attention its forward runs again before its backward, and its log-sum-exp is not stored.
  TransformerConfig c = llama_tp2();
  const StepWork none = step_work(c);
  const int64_t stored_none = transformer_layer_activation_bytes(c, false);
  c.recompute = Recompute::kSelective;
  const StepWork selective = step_work(c);
  EXPECT_EQ(none.attention_forwards, 2);
  EXPECT_EQ(selective.attention_forwards, 2 * none.attention_forwards);
  EXPECT_EQ(selective.attention_backwards, none.attention_backwards);
  EXPECT_DOUBLE_EQ(selective.gemm_flops, none.gemm_flops);
  // The log-sum-exp: fp32 per local query head and token.
  EXPECT_EQ(stored_none - transformer_layer_activation_bytes(c, false), 4 * 16 * 4096);
}

TEST(RecomputeModules, MlpRerunsTheDenseMlpWithItsCollectivesAndStoresOnlyItsInput) {
  TransformerConfig c = llama_tp2();
  c.recompute = Recompute::kSelective;
  const StepWork core = step_work(c);
  const int64_t stored_core = transformer_layer_activation_bytes(c, false);
  c.recompute_modules.mlp = true;
  const StepWork mlp = step_work(c);
  // fc1 (gate and up) and fc2 once more per layer: a third of the MLP's forward-and-backward
  // FLOPs; the norm, activation and fc2's reduce-scatter / fc1's all-gather again.
  const double mlp_forward_flops = 2.0 * 2 * 4096 * 4096 * (3.0 * 14336 / 2);
  EXPECT_NEAR(mlp.gemm_flops - core.gemm_flops, mlp_forward_flops, 1e-6 * mlp_forward_flops);
  EXPECT_EQ(mlp.collectives - core.collectives, 2 * 2);
  EXPECT_EQ(mlp.memory_bound_kernels - core.memory_bound_kernels, 2 * 2);
  // Stored no more: fc1's input (the norm output, split over TP by SP), the SwiGLU input (gate
  // and up) and fc2's input.
  const int64_t e = 2;
  const int64_t dropped = e * 4096 * 4096 / 2 + e * 4096 * (14336 / 2) * 3;
  EXPECT_EQ(stored_core - transformer_layer_activation_bytes(c, false), dropped);
}

TEST(RecomputeModules, EachMoeModuleRerunsItsPartAndStoresLess) {
  TransformerConfig c = small_moe();
  c.recompute = Recompute::kSelective;
  const StepWork core = step_work(c);
  const int64_t stored_core = transformer_layer_activation_bytes(c, true);
  const auto with = [&](bool RecomputeModules::*module) {
    TransformerConfig m = c;
    m.recompute_modules.*module = true;
    return std::make_pair(step_work(m), transformer_layer_activation_bytes(m, true));
  };
  const auto [act, stored_act] = with(&RecomputeModules::moe_act);
  const auto [shared, stored_shared] = with(&RecomputeModules::shared_experts);
  const auto [moe, stored_moe] = with(&RecomputeModules::moe);
  const auto [norm, stored_norm] = with(&RecomputeModules::layernorm);
  // moe_act: the experts' activation once more per layer, no GEMM.
  EXPECT_EQ(act.memory_bound_kernels - core.memory_bound_kernels, 2);
  EXPECT_DOUBLE_EQ(act.gemm_flops, core.gemm_flops);
  // layernorm: the pre-MLP norm once more per layer.
  EXPECT_EQ(norm.memory_bound_kernels - core.memory_bound_kernels, 2);
  // shared_experts: their two GEMMs again; moe: the whole layer again, its dispatch (rows and
  // their probabilities) and combine all-to-alls and the count all-gather included.
  EXPECT_GT(shared.gemm_flops, core.gemm_flops);
  EXPECT_GT(moe.gemm_flops, shared.gemm_flops);
  EXPECT_EQ(moe.collectives - core.collectives, 2 * 4);
  EXPECT_LT(stored_act, stored_core);
  EXPECT_LT(stored_shared, stored_core);
  EXPECT_LT(stored_norm, stored_core);
  EXPECT_LT(stored_moe, stored_act);
  EXPECT_LT(stored_moe, stored_shared);
}

// mla_up_proj (Megatron-Core's qkv_up_checkpoint): the query and key/value up projections and
// rotary once more per layer before the core attention's backward, and the per-head queries,
// keys and values (heads x (2 x (64 + 32) + 64) per token) no longer stored.
TEST(RecomputeModules, MlaUpProjRerunsTheUpProjectionsAndStoresNoQueriesKeysOrValues) {
  TransformerConfig c = test_configs::llama(2, 1024, 16, 16, 2816, 2048);
  c.mla = LatentAttentionConfig{384, 128, 64, 32, 64};
  c.recompute = Recompute::kSelective;
  TransformerConfig up = c;
  up.recompute_modules.mla_up_proj = true;
  const StepWork core = step_work(c);
  const StepWork rerun = step_work(up);
  const double up_projections =
      2.0 * static_cast<double>(c.micro_batch_tokens()) * 16 *
      (384.0 * (64 + 32) + 128.0 * (64 + 64));  // q_up and kv_up, one layer
  EXPECT_DOUBLE_EQ(rerun.gemm_flops - core.gemm_flops, 2 * up_projections);
  EXPECT_EQ(rerun.memory_bound_kernels - core.memory_bound_kernels, 2) << "rotary, per layer";
  EXPECT_EQ(
      transformer_layer_activation_bytes(c, false) - transformer_layer_activation_bytes(up, false),
      2 * c.micro_batch_tokens() * 16 * (2 * (64 + 32) + 64));
}

TEST(RecomputeModules, RecomputingMoreModulesCostsTimeAndSavesMemory) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  ConfigDocument fabric = ConfigDocument::load_file(kConfigs / "topologies" / "dgx_h100.yaml");
  const Fabric dgx = load_fabric(fabric.root());
  TransformerConfig c = llama_tp2();
  const auto step_ms = [&](const TransformerConfig& config) {
    TaskGraph g;
    generate_transformer(config, {1}, g);
    g.seal();
    return test_configs::run_step(g, h100.model, dgx, h100.hw, 1).ranks.front().window.seconds() *
           1e3;
  };
  const double none = step_ms(c);
  const int64_t stored_none = transformer_layer_activation_bytes(c, false);
  c.recompute = Recompute::kSelective;
  const double core = step_ms(c);
  const int64_t stored_core = transformer_layer_activation_bytes(c, false);
  c.recompute_modules.mlp = true;
  const double mlp = step_ms(c);
  const int64_t stored_mlp = transformer_layer_activation_bytes(c, false);
  c.recompute = Recompute::kFull;
  const double full = step_ms(c);
  std::printf(
      "2 Llama-8B-shaped layers, TP 2, 4096 tokens on H100: recompute none %.3f ms, selective "
      "[core_attn] %.3f ms, [core_attn, mlp] %.3f ms, full %.3f ms\n",
      none, core, mlp, full);
  EXPECT_LT(none, core);
  EXPECT_LT(core, mlp);
  EXPECT_LT(mlp, full);
  EXPECT_LT(stored_core, stored_none);
  EXPECT_LT(stored_mlp, stored_core);
}

// --- The reader -------------------------------------------------------------------------------

std::string error_of(const std::string& modules, bool selective, RecomputeModulesScope scope) {
  ConfigDocument doc =
      ConfigDocument::parse_string("recompute_modules: " + modules + "\n", "scenario.yaml");
  try {
    read_recompute_modules(doc.root(), selective, scope);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RecomputeModules, TheDefaultIsTheCoreAttentionAlone) {
  ConfigDocument doc = ConfigDocument::parse_string("{}", "scenario.yaml");
  const RecomputeModules m = read_recompute_modules(doc.root(), true, {});
  EXPECT_TRUE(m.core_attn);
  EXPECT_FALSE(m.mlp || m.layernorm || m.moe || m.moe_act || m.shared_experts);
  EXPECT_EQ(recompute_modules_text(m), "core_attn");
  ConfigDocument listed =
      ConfigDocument::parse_string("recompute_modules: [mlp, core_attn]\n", "scenario.yaml");
  EXPECT_EQ(recompute_modules_text(read_recompute_modules(listed.root(), true, {})),
            "core_attn, mlp");
}

TEST(RecomputeModules, TheReaderRefusesWhatItCannotPrice) {
  const RecomputeModulesScope dense;
  RecomputeModulesScope moe;
  moe.has_moe_layers = true;
  moe.has_dense_layers = false;
  EXPECT_NE(error_of("[core_attn]", false, dense).find("needs `recompute: selective`"),
            std::string::npos);
  EXPECT_NE(error_of("[]", true, dense).find("non-empty list"), std::string::npos);
  EXPECT_NE(error_of("core_attn", true, dense).find("non-empty list"), std::string::npos);
  EXPECT_NE(error_of("[attn]", true, dense).find("unknown recompute module `attn`"),
            std::string::npos);
  EXPECT_NE(error_of("[mla_up_proj]", true, dense).find("has none"), std::string::npos);
  EXPECT_NE(error_of("[mhc]", true, dense).find("does not model"), std::string::npos);
  EXPECT_NE(error_of("[mlp, mlp]", true, dense).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of("[layernorm]", true, dense).find("fuses both"), std::string::npos);
  EXPECT_NE(error_of("[moe_act]", true, dense).find("has none"), std::string::npos);
  EXPECT_NE(error_of("[mlp]", true, moe).find("every layer"), std::string::npos);
  EXPECT_NE(error_of("[shared_experts]", true, moe).find("has none"), std::string::npos);
  EXPECT_NE(error_of("[moe, moe_act]", true, moe).find("list one of them"), std::string::npos);
  EXPECT_EQ(error_of("[layernorm, moe_act]", true, moe), "");
  // Errors name the file and the key.
  EXPECT_NE(error_of("[attn]", true, dense).find("recompute_modules[0]"), std::string::npos);
}

}  // namespace
}  // namespace upsim
