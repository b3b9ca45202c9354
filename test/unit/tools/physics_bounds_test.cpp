// Physics bounds on every shipped transformer scenario (configs/*.yaml, workload.model
// transformer): the model FLOP/s per GPU a prediction implies (Megatron-LM's count,
// workloads/transformer/model_flops.h, over the predicted iteration time and the run's GPUs)
// stays below the best matrix-multiply rate published for that GPU: the MAMF table
// (test/data/hardware-specs, bf16 and fp16) or, for fp32 / tf32 GEMMs, the hardware profile's
// datasheet peak. A prediction above it is faster than any kernel the GPU runs: a bug, whatever
// table it matches. Under the sanitizers the slow scenarios run with one layer per pipeline chunk
// and two micro-batches per stage (fewer layers and a larger bubble only lower the rate the
// bound caps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/formats/csv.h"
#include "tools/scenario.h"
#include "tools/steady_state.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::cli {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;

/// The MAMF table's best achievable bf16 TFLOP/s, by its accelerator name.
std::map<std::string, double> mamf_tflops() {
  const std::filesystem::path file =
      kData / "hardware-specs" / "mamf_max_achievable_matmul_tflops_bf16.csv";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, double> out;
  const std::vector<CsvRecord> records = read_csv(
      text, file.string(), {.trim_blanks = true, .skip_blank_lines = true, .comment = '#'});
  for (size_t i = 1; i < records.size(); ++i)
    out[records[i].fields.at(0)] = std::stod(records[i].fields.at(1));
  return out;
}

/// The MAMF row of a hardware profile's GPU ("A100-SXM4-40GB" -> "NVIDIA A100 SXM").
std::string mamf_row(const std::string& gpu) {
  const std::string family = gpu.substr(0, gpu.find('-'));
  const bool sxm = gpu.find("SXM") != std::string::npos;
  return "NVIDIA " + family + (sxm ? " SXM" : " PCIe");
}

struct Shipped {
  std::string file;
  std::vector<std::string> overrides;
};

std::vector<Shipped> shipped_transformer_scenarios() {
  std::vector<Shipped> out;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml") continue;
    ConfigDocument doc = ConfigDocument::load_file(entry.path());
    const ConfigNode workload = doc.root().child("workload");
    if (workload.get_string("model") != "transformer") continue;
    Shipped s{entry.path().filename().string(), {}};
#ifdef UPSIM_SANITIZED
    const bool reduce = workload.get_int("layers") >= 80;
#else
    const bool reduce = false;
#endif
    if (reduce) {
      // One layer per pipeline chunk, two micro-batches per pipeline stage.
      const ConfigNode p = workload.child("parallelism");
      const int64_t pipeline = p.get_int_or("pipeline", 1);
      const int64_t chunks = pipeline * p.get_int_or("virtual_stages", 1);
      const int64_t batch =
          workload.get_int_or("micro_batch", 1) * p.get_int_or("data", 1) * pipeline * 2;
      s.overrides.push_back("workload.layers=" + std::to_string(chunks));
      s.overrides.push_back("workload.global_batch=" + std::to_string(batch));
    }
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(),
            [](const Shipped& a, const Shipped& b) { return a.file < b.file; });
  return out;
}

TEST(PhysicsBounds, ShippedTransformerScenariosStayBelowTheBestPublishedGemmRate) {
  const std::map<std::string, double> mamf = mamf_tflops();
  const std::vector<Shipped> scenarios = shipped_transformer_scenarios();
  ASSERT_GE(scenarios.size(), 5u);
  for (const Shipped& s : scenarios) {
    ConfigDocument doc = ConfigDocument::load_file(kConfigs / s.file);
    for (const std::string& o : s.overrides)
      doc.apply_override(o);
    const SteadyRun run = run_to_steady_state(doc);
    ConfigDocument again = ConfigDocument::load_file(kConfigs / s.file);
    for (const std::string& o : s.overrides)
      again.apply_override(o);
    const TransformerConfig config =
        parse_transformer_config(again.root().child("workload"), run.scenario.platform.gpus);
    const double seconds = run.summary.predicted_iteration_time.seconds();
    const double tflops_per_gpu = transformer_model_flops(config) / seconds /
                                  static_cast<double>(run.scenario.platform.gpus) / 1e12;
    const std::string& gpu = run.scenario.platform.gpu;
    double bound = 0.0;
    std::string what;
    if (config.dtype == DType::kBf16 || config.dtype == DType::kFp16) {
      const auto it = mamf.find(mamf_row(gpu));
      ASSERT_NE(it, mamf.end()) << s.file << ": no MAMF row for " << gpu;
      bound = it->second;
      what = "MAMF " + it->first;
    } else {
      bound = run.scenario.models.set.devices.front().peak(config.dtype).flops_per_second() / 1e12;
      what = std::string(dtype_name(config.dtype)) + " datasheet peak";
    }
    std::printf("%-28s %-16s %s: %7.1f model TFLOP/s per GPU, bound %7.1f (%s)\n", s.file.c_str(),
                gpu.c_str(), std::string(dtype_name(config.dtype)).c_str(), tflops_per_gpu, bound,
                what.c_str());
    EXPECT_GT(tflops_per_gpu, 0.0) << s.file;
    EXPECT_LT(tflops_per_gpu, bound) << s.file << " on " << gpu;
  }
}

}  // namespace
}  // namespace upsim::cli
