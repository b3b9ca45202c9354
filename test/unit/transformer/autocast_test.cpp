// torch.autocast over an fp32 model (autocast.h): the key's refusals, the memory it adds (fp32
// state without a master copy, the weight copies, fp32 norm inputs and softmax outputs) and the
// casts and fp32 elementwise kernels it adds to the step.
#include "workloads/transformer/autocast.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "sim/config/config_error.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "topology/fabric_loader.h"
#include "workloads/transformer/transformer_config.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// A 2-layer bert-large-shaped encoder as HuggingFace fine-tunes it: unfused attention,
/// dropout 0.1, micro-batch 4 of 512, a 2-label classifier, in `dtype` (`autocast` over fp32).
std::string bert_yaml(const std::string& dtype, bool autocast, const std::string& extra = "") {
  return "workload:\n  model: transformer\n  architecture: bert\n  layers: 2\n  hidden: 1024\n"
         "  heads: 16\n  ffn: 4096\n  vocab: 30522\n  seq: 512\n  micro_batch: 4\n"
         "  causal: false\n  attention: unfused\n  dropout: 0.1\n  head: classification\n"
         "  labels: 2\n  optimizer: adamw\n  dtype: " +
         dtype + "\n" + (autocast ? "  autocast: true\n" : "") + extra;
}

TransformerConfig parse(const std::string& yaml) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "scenario.yaml");
  TransformerConfig c = parse_transformer_config(doc.root().child("workload"), 1);
  doc.check_all_keys_used();
  return c;
}

std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

int64_t part(const MemoryFootprint& f, const std::string& name) {
  for (const auto& p : f.parts)
    if (p.name == name) return p.bytes;
  return -1;
}

TEST(Autocast, TheKeyNamesWhatItCannotRunWith) {
  EXPECT_NE(error_of(bert_yaml("fp32", true)).find("autocast"), std::string::npos);
  EXPECT_NE(error_of(bert_yaml("fp32", true)).find("fp16 or bf16"), std::string::npos);
  EXPECT_NE(error_of(bert_yaml("fp16", true, "  master_weights: true\n")).find("master_weights"),
            std::string::npos);
  EXPECT_NE(error_of(bert_yaml("fp16", true, "  compile: true\n")).find("compile"),
            std::string::npos);
  EXPECT_EQ(error_of(bert_yaml("bf16", true)), "");
  const TransformerConfig c = parse(bert_yaml("fp16", true));
  EXPECT_TRUE(c.autocast);
  EXPECT_FALSE(c.master_weights) << "the fp32 parameters are the optimizer's";
  EXPECT_EQ(c.gradient_dtype(), DType::kFp32);
  EXPECT_EQ(c.residual_dtype(), DType::kFp32);
  EXPECT_EQ(c.activation_dtype(), DType::kFp16);
}

TEST(Autocast, MemoryIsFp32StateWeightCopiesAndWiderNormAndSoftmaxTensors) {
  const TransformerConfig amp = parse(bert_yaml("fp16", true));
  const TransformerConfig pure = parse(bert_yaml("fp16", false));
  const TransformerConfig fp32 = parse(bert_yaml("fp32", false));
  const MemoryFootprint a = transformer_memory(amp, 0);
  const MemoryFootprint f = transformer_memory(fp32, 0);
  const int64_t params = transformer_parameters(amp);
  // The same fp32 state as an fp32 run: no master copy.
  EXPECT_EQ(part(a, "weights"), part(f, "weights"));
  EXPECT_EQ(part(a, "weights"), 4 * params);
  EXPECT_EQ(part(a, "gradients"), 4 * params);
  EXPECT_EQ(part(a, "optimizer state"), 8 * params);
  EXPECT_EQ(part(a, "autocast weight copies"), 2 * params);
  EXPECT_EQ(part(transformer_memory(pure, 0), "autocast weight copies"), -1);
  // Per layer beyond pure fp16: two fp32 norm inputs (+2 bytes per element each), two more
  // 16-bit copies of the QKV input, and per attention score the fp32 softmax output (+2).
  const int64_t tokens = 4 * 512;
  const int64_t scores = 16 * 4 * int64_t{512} * 512;
  const int64_t per_layer = 2 * 2 * tokens * 1024 + 2 * 2 * tokens * 1024 + 2 * scores;
  EXPECT_EQ(transformer_layer_activation_bytes(amp, false) -
                transformer_layer_activation_bytes(pure, false),
            per_layer);
  EXPECT_LT(transformer_layer_activation_bytes(amp, false),
            transformer_layer_activation_bytes(fp32, false));
}

struct Casts {
  int weight = 0, input = 0, weight_grad = 0, input_grad = 0;
};

TEST(Autocast, EachLinearCastsItsWeightEveryForwardAndItsGradientBack) {
  const TransformerConfig amp = parse(bert_yaml("fp16", true));
  TaskGraph g;
  generate_transformer(amp, {1}, g);
  Casts n;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind != TaskKind::kKernel) continue;
    const std::string_view name = g.name(g.task(t).name);
    n.weight += name == "cast_weight";
    n.input += name == "cast_input";
    n.weight_grad += name == "cast_weight_grad";
    n.input_grad += name == "cast_input_grad";
  }
  // 2 layers x 4 linears; the QKV input three times and the fc1 input once per layer.
  EXPECT_EQ(n.weight, 8);
  EXPECT_EQ(n.weight_grad, 8);
  EXPECT_EQ(n.input, 8);
  EXPECT_EQ(n.input_grad, 8);
  TaskGraph plain;
  generate_transformer(parse(bert_yaml("fp16", false)), {1}, plain);
  for (TaskId t = 0; t < plain.task_count(); ++t) {
    if (plain.task(t).kind == TaskKind::kKernel) {
      EXPECT_EQ(plain.name(plain.task(t).name).find("cast_"), std::string_view::npos);
    }
  }
}

TEST(Autocast, TheStepCostsMoreThanPureFp16AndLessThanFp32) {
  const test_configs::CalibratedGpu gpu =
      test_configs::calibrated_gpu("v100_sxm2_16gb", "v100_deepbench");
  const std::filesystem::path configs = UPSIM_CONFIGS_DIR;
  ConfigDocument fabric = ConfigDocument::load_file(configs / "topologies" / "dgx1_v100.yaml");
  const Fabric dgx1 = load_fabric(fabric.root());
  const auto step_ms = [&](const TransformerConfig& c) {
    TaskGraph g;
    generate_transformer(c, {1}, g);
    g.seal();
    return test_configs::run_step(g, gpu.model, dgx1, gpu.hw, 1).ranks.front().window.seconds() *
           1e3;
  };
  const double amp = step_ms(parse(bert_yaml("fp16", true)));
  const double pure = step_ms(parse(bert_yaml("fp16", false)));
  const double fp32 = step_ms(parse(bert_yaml("fp32", false)));
  EXPECT_GT(amp, pure * 1.02) << "casts and fp32 norms, softmax and residual adds";
  EXPECT_LT(amp, fp32) << "the GEMMs still run on the tensor cores";
}

}  // namespace
}  // namespace upsim
