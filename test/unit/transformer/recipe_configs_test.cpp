// The framework recipes shipped as scenarios (configs/recipes/): each parses, counts the
// parameters its model card states, and fits its GPU's memory as the recipe runs it. Simulating
// them takes 30-70 s each, so the tests stop at the config and the memory model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "workloads/transformer/transformer_config.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

const std::filesystem::path kRecipes = std::filesystem::path(UPSIM_CONFIGS_DIR) / "recipes";

TransformerConfig recipe(const std::string& file) {
  ConfigDocument doc = ConfigDocument::load_file(kRecipes / file);
  return parse_transformer_config(doc.root().child("workload"), 0);
}

/// Parameters without the multi-token prediction layers, in billions.
double main_model_billions(TransformerConfig c) {
  c.mtp_layers = 0;
  return static_cast<double>(transformer_parameters(c)) * 1e-9;
}

// DeepSeek-V3's model card: 671B parameters in the main model (the MTP module's 14B beside
// them hold copies of the embedding and head); Qwen3-235B-A22B: 235B.
TEST(RecipeConfigs, CountTheParametersTheirModelCardsState) {
  EXPECT_NEAR(main_model_billions(recipe("deepseek_v3_1024gpu_h100.yaml")), 671.0, 671.0 * 0.005);
  EXPECT_NEAR(main_model_billions(recipe("deepseek_v3_256gpu_b200.yaml")), 671.0, 671.0 * 0.005);
  EXPECT_NEAR(main_model_billions(recipe("qwen3_235b_256gpu_h100.yaml")), 235.0, 235.0 * 0.005);
}

// Megatron-Bridge runs them on their GPUs (H100 80GB, B200 180GB): the memory model must not
// refuse them.
TEST(RecipeConfigs, FitTheirGpusMemory) {
  for (const auto& entry : std::filesystem::directory_iterator(kRecipes)) {
    if (entry.path().extension() != ".yaml") continue;
    const TransformerConfig c = recipe(entry.path().filename().string());
    ConfigDocument doc = ConfigDocument::load_file(entry.path());
    const std::filesystem::path gpu =
        entry.path().parent_path() / doc.root().child("platform").get_string("gpu");
    ConfigDocument hw = ConfigDocument::load_file(gpu);
    const int64_t hbm = load_hardware_profile(hw.root()).device.hbm_bytes;
    EXPECT_GT(hbm, int64_t{0}) << gpu;
    EXPECT_LT(transformer_peak_memory(c).total_bytes(), hbm) << entry.path();
  }
}

}  // namespace
}  // namespace upsim
