// `upsim validate workloads`: the measurement readers on the shipped copies and on malformed
// files, and the row -> scenario override mapping (pure, without the transformer workload).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "tools/validation/published_tables.h"
#include "tools/validation/row_plans.h"
#include "tools/validation/validate_workloads.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kMegatronCsv = fs::path(UPSIM_SOURCE_ROOT) / "test/data/megatron-lm-paper" /
                              "megatron_sc21_table1_weak_scaling.csv";
const fs::path kFoundryCsv =
    fs::path(UPSIM_SOURCE_ROOT) / "test/data/llm-foundry" / "mpt_training_throughput.csv";
const fs::path kMptModels = fs::path(UPSIM_CONFIGS_DIR) / "validation" / "mpt_models.yaml";
const fs::path kNemoCsv =
    fs::path(UPSIM_SOURCE_ROOT) / "test/data/nemo-24.07/nemo_24.07_dgx_h100_fp8_pretrain.csv";
const fs::path kModelOverrides = fs::path(UPSIM_CONFIGS_DIR) / "validation" / "nemo_models.yaml";
const fs::path kNemotronCsv =
    fs::path(UPSIM_SOURCE_ROOT) / "test/data/nemotron-4/nemotron4_h100_pretrain.csv";
const fs::path kNemoT5Csv =
    fs::path(UPSIM_SOURCE_ROOT) / "test/data/nemo-t5/nemo_t5_a100_pretrain.csv";
const fs::path kDleDir = fs::path(UPSIM_SOURCE_ROOT) / "test/data/nvidia-deeplearningexamples";
const fs::path kDleA100Csv = kDleDir / "pytorch_dlrm_training_perf_0.csv";
const fs::path kDleV100Csv = kDleDir / "pytorch_dlrm_training_perf_1.csv";
const fs::path kDleDcnV2Csv = kDleDir / "tf2_dcnv2_training_perf.csv";
const fs::path kDleTables = fs::path(UPSIM_CONFIGS_DIR) / "validation" / "dle_criteo_tables.yaml";

/// A file in a fresh temporary folder, removed with the fixture.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& content)
      : dir_(fs::temp_directory_path() / ("upsim_workload_validation_" +
                                          std::to_string(reinterpret_cast<std::uintptr_t>(this)))),
        path_(dir_ / name) {
    fs::create_directories(dir_);
    std::ofstream(path_) << content;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path dir_;
  fs::path path_;
};

/// The message of the WorkloadTableError `f` throws ("" when it throws none).
template <typename F>
std::string table_error(F&& f) {
  try {
    f();
  } catch (const WorkloadTableError& e) {
    return e.what();
  }
  return "";
}

std::map<std::string, std::string> as_map(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> out;
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    EXPECT_NE(eq, std::string::npos) << o;
    EXPECT_TRUE(out.emplace(o.substr(0, eq), o.substr(eq + 1)).second) << "repeated: " << o;
  }
  return out;
}

TEST(WorkloadTables, MegatronShippedCopyHasTheTenTableOneRows) {
  const std::vector<MegatronRow> rows = read_megatron_table(kMegatronCsv);
  ASSERT_EQ(rows.size(), 10u);
  const MegatronRow& first = rows.front();
  EXPECT_DOUBLE_EQ(first.params_billion, 1.7);
  EXPECT_EQ(first.heads, 24);
  EXPECT_EQ(first.hidden, 2304);
  EXPECT_EQ(first.layers, 24);
  EXPECT_EQ(first.tensor, 1);
  EXPECT_EQ(first.pipeline, 1);
  EXPECT_EQ(first.gpus, 32);
  EXPECT_EQ(first.global_batch, 512);
  EXPECT_DOUBLE_EQ(first.achieved_tflops_per_gpu, 137.0);
  EXPECT_DOUBLE_EQ(first.iteration_time_s, 3.528);
  EXPECT_EQ(first.line, 4);  // two '#' lines, then the header
  const MegatronRow& last = rows.back();
  EXPECT_DOUBLE_EQ(last.params_billion, 1008.0);
  EXPECT_EQ(last.pipeline, 64);
  EXPECT_EQ(last.gpus, 3072);
  EXPECT_DOUBLE_EQ(last.iteration_time_s, 102.63);
}

TEST(WorkloadTables, FoundryShippedCopyHasEveryRowWithQuotedSections) {
  const std::vector<FoundryRow> rows = read_foundry_table(kFoundryCsv);
  ASSERT_EQ(rows.size(), 216u);
  const FoundryRow& first = rows.front();
  EXPECT_EQ(first.section, "H100 80GB BF16 (Large Scale, >= 128 GPUs)");  // quoted, comma kept
  EXPECT_EQ(first.model, "70b");
  EXPECT_EQ(first.seq, 2048);
  EXPECT_EQ(first.gpus, 512);
  EXPECT_EQ(first.gpu, "h100_80gb");
  EXPECT_EQ(first.micro_batch, 8);
  EXPECT_EQ(first.grad_accum, 1);
  EXPECT_EQ(first.global_batch, 4096);
  EXPECT_EQ(first.precision, "amp_bf16");
  EXPECT_EQ(first.mp_mode, "DEFAULT");
  EXPECT_EQ(first.sharding, "FULL_SHARD");
  EXPECT_TRUE(first.activation_checkpointing);
  EXPECT_FALSE(first.activation_cpu_offload);
  EXPECT_EQ(first.num_params, 64862437376);
  EXPECT_DOUBLE_EQ(first.step_time_s, 16.2685);
  const auto count = [&](const std::string& gpu) {
    return std::count_if(rows.begin(), rows.end(),
                         [&](const FoundryRow& r) { return r.gpu == gpu; });
  };
  EXPECT_EQ(count("h100_80gb"), 18 + 52 + 7);
  EXPECT_EQ(count("a100_80gb"), 61);
  EXPECT_EQ(count("a100_40gb"), 78);
}

TEST(WorkloadTables, MptModelTableHasEveryBenchmarkedSize) {
  const auto models = read_mpt_models(kMptModels);
  for (const FoundryRow& r : read_foundry_table(kFoundryCsv))
    EXPECT_TRUE(models.count(r.model)) << r.model;
  const MptModel& m = models.at("7b");
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.layers, 32);
  EXPECT_EQ(m.vocab, 50368);
  EXPECT_EQ(m.expansion_ratio, 4);
}

TEST(WorkloadTables, NemoShippedCopyHasTheTwelveRowsAndEveryModel) {
  const std::vector<NemoRow> rows = read_nemo_table(kNemoCsv);
  ASSERT_EQ(rows.size(), 12u);
  const NemoRow& llama3 = rows.back();
  EXPECT_EQ(llama3.model, "LLAMA3-70B");
  EXPECT_EQ(llama3.gpus, 64);
  EXPECT_EQ(llama3.global_batch, 128);
  EXPECT_EQ(llama3.seq, 8192);
  EXPECT_EQ(llama3.tensor, 4);
  EXPECT_EQ(llama3.pipeline, 4);
  EXPECT_EQ(llama3.context, 2);
  EXPECT_EQ(llama3.virtual_stages, 5);
  EXPECT_DOUBLE_EQ(llama3.step_time_s, 10.688);
  const ModelOverrides models = read_model_overrides(kModelOverrides);
  for (const NemoRow& r : rows)
    EXPECT_TRUE(models.count(r.model)) << r.model;
}

TEST(WorkloadTables, NemoDerivedTimeMustMatchTheThroughput) {
  TempFile bad("nemo.csv",
               "Model,#-GPUs,GBS,MBS,Sequence Length,TP,PP,CP,VP,Tokens / sec / GPU,"
               "derived_step_time_s\n"
               "LLAMA2-7B,8,128,1,4096,1,1,1,1,16847,4.5\n");
  try {
    read_nemo_table(bad.path());
    FAIL() << "accepted a step time the throughput contradicts";
  } catch (const WorkloadTableError& e) {
    EXPECT_NE(std::string(e.what()).find(":2: column `derived_step_time_s`"), std::string::npos)
        << e.what();
  }
}

TEST(WorkloadTables, DleShippedCopiesHaveTheSevenSystemRows) {
  const std::vector<DleRow> a100 = read_dle_table(kDleA100Csv);
  ASSERT_EQ(a100.size(), 2u);
  const DleRow& first = a100.front();
  EXPECT_EQ(first.line, 3);  // one '#' line, then the header
  EXPECT_EQ(first.system, "dgx-a100");
  EXPECT_EQ(first.gpus, 8);
  EXPECT_EQ(first.model_size, "large");
  EXPECT_EQ(first.batch_per_gpu, 8192);
  EXPECT_EQ(first.full_precision, "tf32");
  EXPECT_DOUBLE_EQ(first.full_precision_records_per_s, 11'400'000.0);  // "11,400,000"
  EXPECT_DOUBLE_EQ(first.amp_records_per_s, 16'500'000.0);
  EXPECT_EQ(a100.back().gpus, 1);
  EXPECT_EQ(a100.back().model_size, "small");
  EXPECT_EQ(a100.back().batch_per_gpu, 65536);

  const std::vector<DleRow> v100 = read_dle_table(kDleV100Csv);
  ASSERT_EQ(v100.size(), 5u);
  std::vector<std::string> systems;
  for (const DleRow& r : v100) {
    systems.push_back(r.system + " " + std::to_string(r.gpus));
    EXPECT_EQ(r.full_precision, "fp32");
    EXPECT_EQ(r.gpus * r.batch_per_gpu, kDleGlobalBatch);
  }
  EXPECT_EQ(systems,
            (std::vector<std::string>{"dgx-1 8", "dgx-1 1", "dgx-2 16", "dgx-2 8", "dgx-2 1"}));
  EXPECT_DOUBLE_EQ(v100[2].full_precision_records_per_s, 4'740'000.0);
  EXPECT_DOUBLE_EQ(v100[2].amp_records_per_s, 10'800'000.0);
  EXPECT_EQ(v100[2].batch_per_gpu, 4096);
}

TEST(WorkloadTables, DleBadRowsNameFileLineAndColumn) {
  const std::string header =
      "section,readme_line,GPUs,Model size,Batch size / GPU,Throughput - FP32,"
      "Throughput - mixed precision\n";
  {
    // 8 GPUs x 16k is not main.py's global batch.
    const TempFile f("d.csv", header + "NVIDIA DGX-1 (8x V100 32GB),945,8,large,16k,1,2\n");
    const std::string e = table_error([&] { read_dle_table(f.path()); });
    EXPECT_NE(e.find(f.path().string() + ":2: column `Batch size / GPU`"), std::string::npos) << e;
  }
  {
    const TempFile f("d.csv", header + "NVIDIA DGX-1 (8x V100 32GB),945,8,large,8k,fast,2\n");
    const std::string e = table_error([&] { read_dle_table(f.path()); });
    EXPECT_NE(e.find(":2: column `Throughput - FP32`: `fast`"), std::string::npos) << e;
  }
  {
    const TempFile f("d.csv", header + "NVIDIA DGX Station (4x V100),945,4,large,16k,1,2\n");
    const std::string e = table_error([&] { read_dle_table(f.path()); });
    EXPECT_NE(e.find(":2: column `section`"), std::string::npos) << e;
  }
  {
    const TempFile f("d.csv",
                     "section,GPUs,Model size,Batch size / GPU,Throughput - mixed precision\n"
                     "NVIDIA DGX-1 (8x V100 32GB),8,large,8k,2\n");
    const std::string e = table_error([&] { read_dle_table(f.path()); });
    EXPECT_NE(e.find("column `Throughput - FP32`: missing"), std::string::npos) << e;
  }
}

TEST(WorkloadTables, DleCriteoTablesAreTheTwentySixFeatures) {
  const DleTables tables = read_dle_tables(kDleTables);
  ASSERT_EQ(tables.size(), 2u);
  int64_t small = 0;
  int64_t large = 0;
  ASSERT_EQ(tables.at("small").size(), 26u);
  ASSERT_EQ(tables.at("large").size(), 26u);
  for (int64_t rows : tables.at("small"))
    small += rows;
  for (int64_t rows : tables.at("large"))
    large += rows;
  // dle_criteo_tables.yaml: 16.7 GB and 91.1 GB of fp32 x 128 weights.
  EXPECT_EQ(small, 32'709'138);
  EXPECT_EQ(large, 177'944'291);
}

/// The `rows` of each table of the scenario file `path` (all with pooling 1).
std::vector<int64_t> scenario_table_rows(const fs::path& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  std::vector<int64_t> rows;
  for (const ConfigNode& t :
       doc.root().child("workload").child("embeddings").child("tables").items()) {
    rows.push_back(t.get_int("rows"));
    EXPECT_DOUBLE_EQ(t.get_double("pooling"), 1.0);
  }
  return rows;
}

TEST(WorkloadTables, DleScenariosHoldTheLargeTableSetOfTheTablesFile) {
  const DleTables tables = read_dle_tables(kDleTables);
  EXPECT_EQ(scenario_table_rows(fs::path(UPSIM_CONFIGS_DIR) / "validation" / "dle_dlrm.yaml"),
            tables.at("large"));
  EXPECT_EQ(scenario_table_rows(fs::path(UPSIM_CONFIGS_DIR) / "dle_dlrm_large_dgxa100.yaml"),
            tables.at("large"));
}

const char* kMegatronHeader =
    "# a comment\n"
    "params_billion,attention_heads,hidden_size,num_layers,tensor_parallel,pipeline_parallel,"
    "num_gpus,global_batch_size,achieved_tflops_per_gpu,derived_iter_time_s\n";

TEST(WorkloadTables, MegatronMissingColumnNamesFileLineAndColumn) {
  const TempFile f("m.csv",
                   "params_billion,attention_heads,hidden_size,num_layers,tensor_parallel,"
                   "pipeline_parallel,num_gpus,global_batch_size,achieved_tflops_per_gpu\n"
                   "1.7,24,2304,24,1,1,32,512,137\n");
  const std::string e = table_error([&] { read_megatron_table(f.path()); });
  EXPECT_NE(e.find(f.path().string() + ":1:"), std::string::npos) << e;
  EXPECT_NE(e.find("column `derived_iter_time_s`"), std::string::npos) << e;
}

TEST(WorkloadTables, MegatronUnparsableNumberNamesFileLineAndColumn) {
  const TempFile f("m.csv", std::string(kMegatronHeader) +
                                "1.7,24,2304,24,1,1,32,512,137,3.528\n"
                                "3.6,32,3072,thirty,2,1,64,512,138,3.697\n");
  const std::string e = table_error([&] { read_megatron_table(f.path()); });
  EXPECT_NE(e.find(f.path().string() + ":4:"), std::string::npos) << e;
  EXPECT_NE(e.find("column `num_layers`"), std::string::npos) << e;
  EXPECT_NE(e.find("`thirty`"), std::string::npos) << e;
}

TEST(WorkloadTables, MegatronDerivedTimeMustMatchEquationThree) {
  const TempFile f("m.csv", std::string(kMegatronHeader) + "1.7,24,2304,24,1,1,32,512,137,4.0\n");
  const std::string e = table_error([&] { read_megatron_table(f.path()); });
  EXPECT_NE(e.find(":3: column `derived_iter_time_s`"), std::string::npos) << e;
}

TEST(WorkloadTables, FoundryBadBooleanAndShortRowAndUnterminatedQuote) {
  std::ifstream in(kFoundryCsv);
  std::string comment, header, row;
  std::getline(in, comment);
  std::getline(in, header);
  std::getline(in, row);
  std::string bad = row;
  const size_t pos = bad.find(",True,False,");
  ASSERT_NE(pos, std::string::npos);
  bad.replace(pos, 5, ",yes");
  {
    const TempFile f("f.csv", header + "\n" + row + "\n" + bad + "\n");
    const std::string e = table_error([&] { read_foundry_table(f.path()); });
    EXPECT_NE(e.find(f.path().string() + ":3:"), std::string::npos) << e;
    EXPECT_NE(e.find("column `Activation Checkpointing`"), std::string::npos) << e;
  }
  {
    const TempFile f("f.csv", header + "\n\"H100 80GB BF16\",7b,2048,8\n");
    const std::string e = table_error([&] { read_foundry_table(f.path()); });
    EXPECT_NE(e.find(f.path().string() + ":2:"), std::string::npos) << e;
    EXPECT_NE(e.find("column `GPU`"), std::string::npos) << e;
  }
  {
    const TempFile f("f.csv", header + "\n\"H100 80GB BF16,7b,2048,8\n");
    const std::string e = table_error([&] { read_foundry_table(f.path()); });
    EXPECT_NE(e.find(f.path().string() + ":2:"), std::string::npos) << e;
    EXPECT_NE(e.find("unterminated"), std::string::npos) << e;
  }
  EXPECT_NE(table_error([&] { read_foundry_table("no/such/file.csv"); }).find("file not found"),
            std::string::npos);
}

TEST(WorkloadPlans, MegatronRowMapsToTheTemplateOverrides) {
  const std::vector<MegatronRow> rows = read_megatron_table(kMegatronCsv);
  const MegatronRow& row = rows[5];  // 76.1B: TP 8, PP 4, 1024 GPUs, batch 1792, 60 layers
  ASSERT_EQ(row.gpus, 1024);
  const RowPlan plan = megatron_plan(row, MegatronMapping{});
  EXPECT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.source, "megatron");
  EXPECT_EQ(plan.template_file, "validation/megatron_gpt.yaml");
  EXPECT_EQ(plan.gpus, 1024);
  EXPECT_DOUBLE_EQ(plan.measured_s, 16.058);
  EXPECT_EQ(plan.label, "gpt-76.1b 1024gpu tp8 pp4 dp32 v3 B1792 mb1");
  const std::map<std::string, std::string> expected{
      {"platform.topology.nodes", "128"},
      {"workload.layers", "60"},
      {"workload.hidden", "10240"},
      {"workload.heads", "80"},
      {"workload.seq", "2048"},
      {"workload.vocab", "51200"},
      {"workload.micro_batch", "1"},
      {"workload.global_batch", "1792"},
      {"workload.parallelism.tensor", "8"},
      {"workload.parallelism.pipeline", "4"},
      {"workload.parallelism.data", "32"},
      {"workload.parallelism.virtual_stages", "3"},
  };
  EXPECT_EQ(as_map(plan.overrides), expected);

  MegatronMapping plain;
  plain.interleaved = false;
  plain.micro_batch = 2;
  const auto one_f_one_b = as_map(megatron_plan(row, plain).overrides);
  EXPECT_EQ(one_f_one_b.at("workload.parallelism.virtual_stages"), "1");
  EXPECT_EQ(one_f_one_b.at("workload.micro_batch"), "2");
  // 1792 sequences are not a multiple of micro-batch 3 x DP 32.
  plain.micro_batch = 3;
  EXPECT_NE(megatron_plan(row, plain).skip_reason, "");
}

TEST(WorkloadPlans, MegatronVirtualStagesAreTheSmallestDivisorOfTheStageLayers) {
  EXPECT_EQ(megatron_virtual_stages(24, 1), 1);    // no pipeline
  EXPECT_EQ(megatron_virtual_stages(48, 2), 2);    // 24 per stage
  EXPECT_EQ(megatron_virtual_stages(60, 4), 3);    // 15 per stage
  EXPECT_EQ(megatron_virtual_stages(105, 35), 3);  // 3 per stage
  EXPECT_EQ(megatron_virtual_stages(128, 64), 2);  // 2 per stage
  EXPECT_EQ(megatron_virtual_stages(35, 35), 1);   // 1 per stage
  // Every Table 1 row: the interleaved schedule needs micro-batches divisible by PP.
  for (const MegatronRow& r : read_megatron_table(kMegatronCsv)) {
    const RowPlan p = megatron_plan(r, MegatronMapping{});
    EXPECT_EQ(p.skip_reason, "") << p.label;
    const auto o = as_map(p.overrides);
    const int64_t v = std::stoll(o.at("workload.parallelism.virtual_stages"));
    const int64_t micro_batches = r.global_batch / std::stoll(o.at("workload.parallelism.data"));
    EXPECT_EQ(r.layers % (r.pipeline * v), 0) << p.label;
    if (v > 1) {
      EXPECT_EQ(micro_batches % r.pipeline, 0) << p.label;
    }
  }
}

TEST(WorkloadPlans, FoundryRowMapsToTheTemplateOverrides) {
  const auto models = read_mpt_models(kMptModels);
  const std::vector<FoundryRow> rows = read_foundry_table(kFoundryCsv);
  // H100 80GB BF16, 7b, seq 2048, 512 GPUs, FULL_SHARD, no checkpointing, mb 6, ga 1, B 3072.
  const FoundryRow& h100 = rows[9];
  ASSERT_EQ(h100.model, "7b");
  ASSERT_EQ(h100.gpus, 512);
  const RowPlan plan = foundry_plan(h100, models);
  EXPECT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.source, "llm-foundry");
  EXPECT_EQ(plan.template_file, "validation/mpt_fsdp_h100.yaml");
  EXPECT_DOUBLE_EQ(plan.measured_s, 1.2706);
  EXPECT_EQ(plan.label, "mpt-7b h100_80gb 512gpu s2048 full_shard mb6 ga1 B3072");
  const std::map<std::string, std::string> expected{
      {"platform.topology.nodes", "64"},
      {"workload.layers", "32"},
      {"workload.hidden", "4096"},
      {"workload.heads", "32"},
      {"workload.ffn", "16384"},
      {"workload.vocab", "50368"},
      {"workload.seq", "2048"},
      {"workload.micro_batch", "6"},
      {"workload.global_batch", "3072"},
      {"workload.parallelism.data", "512"},
      {"workload.parallelism.fsdp", "full_shard"},
      {"workload.recompute", "none"},
      {"workload.grad_reduce_dtype", "fp32"},  // MP Mode DEFAULT
      // A ">= 128 GPUs" table: FlashAttention-2 (the templates' Triton kernel otherwise).
      {"workload.attention", "flash2"},
  };
  EXPECT_EQ(as_map(plan.overrides), expected);
  FoundryRow small = h100;
  small.section = "H100 80GB BF16";
  EXPECT_EQ(as_map(foundry_plan(small, models).overrides).count("workload.attention"), 0u);

  // A100 80GB rows go to the RoCE template; checkpointing -> full recompute; SHARD_GRAD_OP.
  FoundryRow a100 = h100;
  a100.gpu = "a100_80gb";
  a100.sharding = "SHARD_GRAD_OP";
  a100.activation_checkpointing = true;
  const RowPlan p2 = foundry_plan(a100, models);
  EXPECT_EQ(p2.template_file, "validation/mpt_fsdp.yaml");
  const auto o2 = as_map(p2.overrides);
  EXPECT_EQ(o2.at("workload.parallelism.fsdp"), "shard_grad_op");
  EXPECT_EQ(o2.at("workload.recompute"), "full");
  a100.mp_mode = "PURE";
  EXPECT_EQ(as_map(foundry_plan(a100, models).overrides).at("workload.grad_reduce_dtype"), "bf16");

  // FP8 rows (Composer's amp_fp8: Transformer Engine, delayed scaling) run in fp8.
  FoundryRow fp8 = h100;
  fp8.precision = "amp_fp8";
  const RowPlan p8 = foundry_plan(fp8, models);
  EXPECT_EQ(p8.skip_reason, "");
  EXPECT_EQ(as_map(p8.overrides).at("workload.dtype"), "fp8");
  EXPECT_EQ(p8.label, "mpt-7b h100_80gb 512gpu s2048 full_shard mb6 ga1 B3072 fp8");
  EXPECT_EQ(as_map(plan.overrides).count("workload.dtype"), 0u);
  // Skipped rows say why.
  // A100 40GB rows: the A100 template with the 40GB profile.
  FoundryRow a100_40 = h100;
  a100_40.gpu = "a100_40gb";
  const RowPlan p40 = foundry_plan(a100_40, models);
  EXPECT_EQ(p40.skip_reason, "");
  EXPECT_EQ(p40.template_file, "validation/mpt_fsdp.yaml");
  EXPECT_EQ(p40.gpu_profile, "hardware/a100_sxm4_40gb.yaml");
  FoundryRow v100 = h100;
  v100.gpu = "v100_32gb";
  EXPECT_NE(foundry_plan(v100, models).skip_reason.find("v100_32gb"), std::string::npos);
  FoundryRow unknown = h100;
  unknown.model = "9b";
  EXPECT_NE(foundry_plan(unknown, models).skip_reason.find("9b"), std::string::npos);
  EXPECT_TRUE(foundry_plan(unknown, models).overrides.empty());
}

TEST(WorkloadPlans, FoundryRowsThatRunAreTheBf16AndFp8RowsOnShippedFabrics) {
  const auto models = read_mpt_models(kMptModels);
  int run = 0;
  for (const FoundryRow& r : read_foundry_table(kFoundryCsv)) {
    const RowPlan p = foundry_plan(r, models);
    if (p.skip_reason.empty()) ++run;
  }
  EXPECT_EQ(run, 18 + 52 + 61 + 78 + 7);  // H100 BF16 (both tables), A100 80GB, A100 40GB, H100 FP8
}

TEST(WorkloadPlans, DleRowsMapToTheTemplateOverrides) {
  const DleTables tables = read_dle_tables(kDleTables);
  const DleRow a100 = read_dle_table(kDleA100Csv).front();
  const RowPlan tf32 = dle_plan(a100, false, tables);
  EXPECT_EQ(tf32.skip_reason, "");
  EXPECT_EQ(tf32.source, "dle-dlrm");
  EXPECT_EQ(tf32.template_file, "validation/dle_dlrm.yaml");
  EXPECT_EQ(tf32.label, "dlrm-large dgx-a100 8gpu tf32 B65536");
  EXPECT_EQ(tf32.gpus, 8);
  EXPECT_DOUBLE_EQ(tf32.measured_s, 65536.0 / 11'400'000.0);
  EXPECT_EQ(tf32.gpu_profile, "hardware/a100_sxm4_80gb.yaml");
  EXPECT_EQ(tf32.topology, "topologies/dgx_a100.yaml");
  auto o = as_map(tf32.overrides);
  EXPECT_EQ(o.at("platform.gpus"), "8");
  EXPECT_EQ(o.at("platform.partial_fabric"), "false");
  EXPECT_EQ(o.at("workload.global_batch"), "65536");
  EXPECT_EQ(o.at("workload.dtype"), "tf32");
  EXPECT_EQ(o.count("workload.all_to_all_dtype"), 0u);
  const std::string& list = o.at("workload.embeddings.tables");
  EXPECT_EQ(list.rfind("[{rows: 45833188, pooling: 1}, {rows: 36747, pooling: 1}, ", 0), 0u)
      << list;
  EXPECT_EQ(std::count(list.begin(), list.end(), '{'), 26);

  // Mixed precision: fp16 MLPs, fp32 tables, an fp16 all-to-all (dle_dlrm.yaml).
  const RowPlan amp = dle_plan(a100, true, tables);
  EXPECT_EQ(amp.label, "dlrm-large dgx-a100 8gpu amp B65536");
  EXPECT_DOUBLE_EQ(amp.measured_s, 65536.0 / 16'500'000.0);
  o = as_map(amp.overrides);
  EXPECT_EQ(o.at("workload.dtype"), "fp16");
  EXPECT_EQ(o.at("workload.embeddings.dtype"), "fp32");
  EXPECT_EQ(o.at("workload.all_to_all_dtype"), "fp16");

  // DGX-2 8 of 16 GPUs: part of the fabric; 1-GPU rows: the small tables.
  const std::vector<DleRow> v100 = read_dle_table(kDleV100Csv);
  const RowPlan dgx2_8 = dle_plan(v100[3], false, tables);
  EXPECT_EQ(dgx2_8.label, "dlrm-large dgx-2 8gpu fp32 B65536");
  EXPECT_EQ(dgx2_8.topology, "topologies/dgx2.yaml");
  EXPECT_EQ(dgx2_8.gpu_profile, "hardware/v100_sxm2_32gb.yaml");
  EXPECT_EQ(as_map(dgx2_8.overrides).at("platform.partial_fabric"), "true");
  EXPECT_EQ(as_map(dgx2_8.overrides).at("workload.dtype"), "fp32");
  const RowPlan dgx1_1 = dle_plan(v100[1], true, tables);
  EXPECT_EQ(dgx1_1.topology, "topologies/dgx1_v100.yaml");
  EXPECT_EQ(as_map(dgx1_1.overrides)
                .at("workload.embeddings.tables")
                .rfind("[{rows: 7912889, pooling: 1}, {rows: 33823, pooling: 1}, ", 0),
            0u);

  DleRow unknown = a100;
  unknown.model_size = "xlarge";
  EXPECT_NE(dle_plan(unknown, false, tables).skip_reason.find("xlarge"), std::string::npos);
}

TEST(WorkloadPlans, NemoRowMapsToTheModelAndTheLayout) {
  const ModelOverrides models = read_model_overrides(kModelOverrides);
  const std::vector<NemoRow> rows = read_nemo_table(kNemoCsv);
  const RowPlan llama3 = nemo_plan(rows.back(), models);
  EXPECT_EQ(llama3.label, "LLAMA3-70B 64gpu tp4 pp4 cp2 vp5 dp2 B128 mb1 s8192");
  EXPECT_EQ(llama3.template_file, "validation/nemo_h100.yaml");
  EXPECT_TRUE(llama3.skip_reason.empty());
  const auto o = as_map(llama3.overrides);
  EXPECT_EQ(o.at("platform.topology.nodes"), "8");
  EXPECT_EQ(o.at("workload.layers"), "80");
  EXPECT_EQ(o.at("workload.kv_heads"), "8");
  EXPECT_EQ(o.at("workload.parallelism.tp_comm_overlap"), "true");
  EXPECT_EQ(o.at("workload.parallelism.sequence"), "true");
  EXPECT_EQ(o.at("workload.parallelism.context"), "2");
  EXPECT_EQ(o.at("workload.parallelism.virtual_stages"), "5");
  EXPECT_EQ(o.at("workload.parallelism.data"), "2");
  EXPECT_EQ(o.at("workload.seq"), "8192");
  const RowPlan gpt5b = nemo_plan(rows.front(), models);
  EXPECT_EQ(as_map(gpt5b.overrides).at("workload.parallelism.sequence"), "false");
  EXPECT_EQ(as_map(gpt5b.overrides).count("workload.parallelism.tp_comm_overlap"), 0u);
  NemoRow unknown = rows.front();
  unknown.model = "GPT5-1T";
  EXPECT_NE(nemo_plan(unknown, models).skip_reason.find("GPT5-1T"), std::string::npos);
}

// The acceptance bounds, pinned: every llm-foundry row on a shipped fabric (A100 40/80GB and
// H100 80GB bf16, H100 80GB fp8) and the Megatron-LM Table 1 rows up to 512 GPUs (the larger ones
// take minutes: OptInFullMegatronTableWithinBound) within the command's 15% geomean |error|,
// printed row by row. Sanitizer builds (Debug, 10-30x slower) run a few rows of each through the
// same path.
#ifdef UPSIM_SANITIZED
constexpr const char* kMegatronRows = "gpt-1.7b,gpt-3.6b";
constexpr const char* kFoundryRows =
    "mpt-125m a100_80gb 8gpu,mpt-1b h100_80gb 8gpu s2048,"
    "mpt-1b h100_80gb 8gpu s8192 full_shard mb2 ga4 B64 fp8";
#else
constexpr const char* kMegatronRows = "gpt-1.7b,gpt-3.6b,gpt-7.5b,gpt-18.4b,gpt-39.1b";
constexpr const char* kFoundryRows = "";
#endif

/// The number before `%` that follows `label` in `text`; NaN when absent.
double percent_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return std::nan("");
  return std::stod(text.substr(at + label.size()));
}

/// `validate workloads` on one source (`flag`, its tables `files`; every other source left
/// out), on the rows `rows` names when it is not empty: prints the output, expects exit 0 and no
/// row in error, and returns the output.
std::string validate_one_source(const std::string& flag, const std::string& files,
                                const char* rows) {
  std::vector<std::string> args;
  for (const std::string source :
       {"--megatron", "--llm-foundry", "--nemo", "--nemotron-4", "--nemo-t5", "--dle-dlrm",
        "--dle-dcnv2", "--dle-dlrm-inference"}) {
    args.push_back(source);
    args.push_back(source == flag ? files : "");
  }
  args.insert(args.end(), {"--configs", UPSIM_CONFIGS_DIR});
  if (*rows != 0) args.insert(args.end(), {"--rows", rows});
  std::ostringstream out;
  const int rc = validate_workloads_main(args, out);
  std::cout << out.str();
  EXPECT_EQ(rc, 0) << out.str();
  EXPECT_EQ(out.str().find("ERROR"), std::string::npos);
  return out.str();
}

TEST(WorkloadValidation, MegatronRowsWithinFifteenPercent) {
  const std::string out = validate_one_source("--megatron", kMegatronCsv.string(), kMegatronRows);
  EXPECT_NE(out.find("megatron: geomean |error|"), std::string::npos);
}

// All 216 rows: the geomean |error| within the 8% for Hopper-era sources (measured
// 7.87%; 8.53% before persistent GEMMs). Sanitizer builds run three rows, held to the 15%.
#ifdef UPSIM_SANITIZED
constexpr double kFoundryBoundPercent = 15.0;
#else
constexpr double kFoundryBoundPercent = 8.0;
#endif

TEST(WorkloadValidation, LlmFoundryRowsWithinEightPercent) {
  const std::string out = validate_one_source("--llm-foundry", kFoundryCsv.string(), kFoundryRows);
  const std::string label = "llm-foundry: geomean |error| ";
  ASSERT_NE(out.find(label), std::string::npos) << out;
  EXPECT_LE(percent_after(out, label), kFoundryBoundPercent) << out;
}

// Every DeepLearningExamples measurement: the PyTorch DLRM (7 systems x FP32/TF32 and mixed
// precision = 14 rows) and the TensorFlow2 DCNv2 (DGX A100, 1 and 8 GPUs x TF32 and mixed
// precision = 4 rows), held out: nothing was fitted on them. Pinned: every row runs, and the
// geomean |error| over all 18 is within the acceptance bound of 12% and no row is beyond 25%
// (see kDleRowBound). Sanitizer builds run two DLRM rows and one DCNv2 row.
#ifdef UPSIM_SANITIZED
constexpr const char* kDleRows =
    "dlrm-small dgx-a100 1gpu tf32,dlrm-large dgx-1 8gpu amp,dcnv2-small dgx-a100 1gpu tf32";
#else
constexpr const char* kDleRows = "";
#endif

TEST(WorkloadValidation, DeepLearningExamplesRowsWithinTheirGeomeanBound) {
  std::vector<std::string> args{"--megatron",
                                "",
                                "--llm-foundry",
                                "",
                                "--dle-dlrm",
                                kDleA100Csv.string() + "," + kDleV100Csv.string(),
                                "--dle-dcnv2",
                                kDleDcnV2Csv.string(),
                                "--nemo",
                                "",
                                "--nemotron-4",
                                "",
                                "--nemo-t5",
                                "",
                                "--dle-dlrm-inference",
                                "",
                                "--configs",
                                UPSIM_CONFIGS_DIR};
  if (*kDleRows != 0) {
    args.emplace_back("--rows");
    args.emplace_back(kDleRows);
  }
  std::ostringstream out;
  validate_workloads_main(args, out);
  std::cout << out.str();
  EXPECT_EQ(out.str().find("ERROR"), std::string::npos);
  const std::string rows = *kDleRows != 0 ? "over 3 rows" : "over 18 rows";
  const std::string combined = "deeplearningexamples (dle-dlrm + dle-dcnv2): geomean |error| ";
  ASSERT_NE(out.str().find(combined), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(rows + " (bound 12%)"), std::string::npos) << out.str();
  EXPECT_LE(percent_after(out.str(), combined), 12.0) << out.str();
  EXPECT_NE(out.str().find(" 0 rows beyond 25% (bound: 0)\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("NOT WITHIN"), std::string::npos) << out.str();
  for (const char* source : {"dle-dlrm: geomean", "dle-dcnv2: geomean"})
    EXPECT_NE(out.str().find(source), std::string::npos) << source;
}

// A table set that does not fit the GPUs with the seed's planner (the 91 GB "large" set on one
// V100 32GB) is reported in its row, naming the table, and the command goes on.
TEST(WorkloadValidation, DleTableSetThatDoesNotFitIsReportedInItsRow) {
  const TempFile f("d.csv",
                   "section,GPUs,Model size,Batch size / GPU,Throughput - FP32,"
                   "Throughput - mixed precision\n"
                   "NVIDIA DGX-1 (8x V100 32GB),1,large,64k,\"672,000\",\"2,090,000\"\n");
  std::ostringstream out;
  const int rc = validate_workloads_main({"--megatron",
                                          "",
                                          "--llm-foundry",
                                          "",
                                          "--dle-dlrm",
                                          f.path().string(),
                                          "--dle-dcnv2",
                                          "",
                                          "--nemo",
                                          "",
                                          "--nemotron-4",
                                          "",
                                          "--nemo-t5",
                                          "",
                                          "--dle-dlrm-inference",
                                          "",
                                          "--configs",
                                          UPSIM_CONFIGS_DIR,
                                          "--rows",
                                          "fp32"},
                                         out);
  EXPECT_EQ(rc, 1) << out.str();
  EXPECT_NE(out.str().find("dle-dlrm: dlrm-large dgx-1 1gpu fp32 B65536"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("ERROR: "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("fits on no rank"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("dle-dlrm: no row ran; 1 failed"), std::string::npos) << out.str();
}

// Opt-in (UPSIM_VALIDATE_WORKLOADS_FULL=1; about 7 minutes on one core): every Megatron Table 1
// row, 32 to 3072 GPUs, within the command's default bound of 15%.
TEST(WorkloadValidation, OptInFullMegatronTableWithinBound) {
  if (std::getenv("UPSIM_VALIDATE_WORKLOADS_FULL") == nullptr) {
    GTEST_SKIP() << "set UPSIM_VALIDATE_WORKLOADS_FULL=1 to run all 10 Megatron rows";
  }
  std::ostringstream out;
  const int rc = validate_workloads_main(
      {"--megatron", kMegatronCsv.string(), "--llm-foundry", "", "--dle-dlrm", "", "--dle-dcnv2",
       "", "--nemo", "", "--nemotron-4", "", "--nemo-t5", "", "--dle-dlrm-inference", "",
       "--configs", UPSIM_CONFIGS_DIR},
      out);
  EXPECT_EQ(rc, 0) << out.str();
  EXPECT_NE(out.str().find("over 10 rows"), std::string::npos) << out.str();
}

// The PyTorch DLRM's inference latency on one GPU (DLE's inference tables: A100 80GB and V100
// 32GB, mixed precision and TF32 / FP32, batch 2-32768 = 60 rows each with CUDA graphs off and
// on), held out, as DLE runs it (apex's fused MLP, the cuda_dot interaction, model.half() under
// mixed precision, the batch on the GPU before the timed step: input: preloaded). With CUDA
// graphs on (dle-dlrm-inference-graphs: the host's work is one replay) the rows check the GPU
// work and the timing window: geomean |error| within 10% (measured 6.69%). With CUDA graphs off
// the small batches are host-bound on DLE's eager Python, which the per-op host model prices
// 80-190 us short: within the source's own 25% bound (measured 22.41%, every row too fast).
// Sanitizer builds run four rows of each.
#ifdef UPSIM_SANITIZED
// (--rows matches substrings: these four batch sizes are no other's prefix.)
constexpr const char* kInferenceRows =
    "dgx-a100 1gpu amp B32768,dgx-a100 1gpu amp B64,dgx-1 1gpu fp32 B8192,dgx-1 1gpu fp32 B128";
#else
constexpr const char* kInferenceRows = "";
#endif

TEST(WorkloadValidation, DeepLearningExamplesInferenceRowsWithinTheirBounds) {
  std::vector<std::string> args{"--megatron",
                                "",
                                "--llm-foundry",
                                "",
                                "--dle-dlrm",
                                "",
                                "--dle-dcnv2",
                                "",
                                "--nemo",
                                "",
                                "--nemotron-4",
                                "",
                                "--nemo-t5",
                                "",
                                "--dle-dlrm-inference",
                                (kDleDir / "pytorch_dlrm_inference_perf_0.csv").string() + "," +
                                    (kDleDir / "pytorch_dlrm_inference_perf_1.csv").string(),
                                "--configs",
                                UPSIM_CONFIGS_DIR};
  if (*kInferenceRows != 0) {
    args.emplace_back("--rows");
    args.emplace_back(kInferenceRows);
  }
  std::ostringstream out;
  const int rc = validate_workloads_main(args, out);
  std::cout << out.str();
  EXPECT_EQ(rc, 0) << out.str();
  EXPECT_EQ(out.str().find("ERROR"), std::string::npos);
  const std::string rows = *kInferenceRows != 0 ? "over 4 rows" : "over 60 rows";
  const std::string label = "dle-dlrm-inference: geomean |error| ";
  ASSERT_NE(out.str().find(label), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(rows + " (bound 25%)"), std::string::npos) << out.str();
  EXPECT_LE(percent_after(out.str(), label), 25.0) << out.str();
  const std::string graphs = "dle-dlrm-inference-graphs: geomean |error| ";
  ASSERT_NE(out.str().find(graphs), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(rows + " (bound 15%)"), std::string::npos) << out.str();
  EXPECT_LE(percent_after(out.str(), graphs), 10.0) << out.str();
}

// The inference tables are read as printed: 15 batch sizes each, records/s with separators; a
// section of another system is an error naming its file, line and column.
TEST(WorkloadTables, DleInferenceTablesAreReadAsPrinted) {
  const std::vector<DleInferenceRow> a100 =
      read_dle_inference_table(kDleDir / "pytorch_dlrm_inference_perf_0.csv");
  const std::vector<DleInferenceRow> v100 =
      read_dle_inference_table(kDleDir / "pytorch_dlrm_inference_perf_1.csv");
  ASSERT_EQ(a100.size(), 15U);
  ASSERT_EQ(v100.size(), 15U);
  EXPECT_EQ(a100.front().system, "dgx-a100");
  EXPECT_EQ(a100.front().full_precision, "tf32");
  EXPECT_EQ(a100.front().batch, 32768);
  EXPECT_DOUBLE_EQ(a100.front().amp_records_per_s, 14'369'047.0);  // README line 990, graphs off
  EXPECT_DOUBLE_EQ(a100.front().full_precision_records_per_s, 8'637'000.0);
  EXPECT_EQ(v100.back().system, "dgx-1");
  EXPECT_EQ(v100.back().full_precision, "fp32");
  EXPECT_EQ(v100.back().batch, 2);
  EXPECT_DOUBLE_EQ(v100.back().amp_records_per_s, 4'146.0);
  EXPECT_DOUBLE_EQ(v100.back().amp_graphs_records_per_s, 13'791.0);  // graphs on
  const RowPlan graphs = dle_inference_plan(v100.back(), true, true, read_dle_tables(kDleTables));
  EXPECT_EQ(graphs.source, "dle-dlrm-inference-graphs");
  EXPECT_DOUBLE_EQ(graphs.measured_s, 2.0 / 13'791.0);
  EXPECT_NE(
      std::find(graphs.overrides.begin(), graphs.overrides.end(), "workload.cuda_graphs=true"),
      graphs.overrides.end());
  const RowPlan plan = dle_inference_plan(v100.back(), true, false, read_dle_tables(kDleTables));
  EXPECT_EQ(plan.label, "dlrm-small dgx-1 1gpu amp B2");
  EXPECT_DOUBLE_EQ(plan.measured_s, 2.0 / 4'146.0);
  EXPECT_EQ(plan.gpu_profile, "hardware/v100_sxm2_32gb.yaml");
  EXPECT_NE(
      std::find(plan.overrides.begin(), plan.overrides.end(), "workload.embeddings.dtype=fp16"),
      plan.overrides.end());
  const TempFile f("i.csv",
                   "section,readme_line,Batch size,Throughput Avg - mixed precision - CUDA Graphs "
                   "OFF,Throughput Avg - FP32 - CUDA Graphs OFF\n"
                   "Inference performance: NVIDIA DGX-2 (1x V100 32GB),1,8,\"1,000\",\"2,000\"\n");
  const std::string e = table_error([&] { read_dle_inference_table(f.path()); });
  EXPECT_NE(e.find(f.path().string() + ":2: column `section`"), std::string::npos) << e;
}

// NeMo 24.07's DGX-H100 FP8 pre-training rows (Megatron-Core + Transformer Engine), held out:
// every row runs and the geomean |error| over the 12 rows stays within 7% (measured 6.29%, mean
// |error| 8.6%: 5.40% before selective recomputation reran the flash attention forward as
// Megatron-Core checkpoints it, which moved the one row near zero, Nemotron-340B, from +0.22%
// to +1.60%, and a geomean of |error| follows its smallest term; 8.36% without cuBLAS's
// persistent GEMMs split by the collectives beside them, sim/gemm_launch.h). Sanitizer builds
// run the two 8-GPU rows through the same path, held to the command's 15% (two rows are not the
// source's geomean).
#ifdef UPSIM_SANITIZED
constexpr const char* kNemoRows = "LLAMA2-7B,LLAMA3-8B";
constexpr double kNemoBoundPercent = 15.0;
#else
constexpr const char* kNemoRows = "";
constexpr double kNemoBoundPercent = 7.0;
#endif

/// validate_one_source, and the source's printed geomean |error| within `bound_percent`.
void expect_source_geomean_within(const std::string& flag, const fs::path& csv, const char* rows,
                                  const std::string& source, double bound_percent) {
  const std::string out = validate_one_source(flag, csv.string(), rows);
  const std::string label = source + ": geomean |error| ";
  ASSERT_NE(out.find(label), std::string::npos) << out;
  EXPECT_LE(percent_after(out, label), bound_percent) << out;
}

TEST(WorkloadValidation, NemoRowsWithinSevenPercent) {
  expect_source_geomean_within("--nemo", kNemoCsv, kNemoRows, "nemo", kNemoBoundPercent);
}

// The Nemotron-4 reports' pre-training rows (bf16, 768-6144 H100s), held out: every row runs
// and the geomean |error| over the 6 rows stays within 10% (measured 8.97%: the 15B rows
// -2.5..-6.9%, the 340B rows -16.9..-18.0%, whose GEMMs run at the H100's best measured matmul
// rate; 9.16% before their selective recomputation reran the flash attention forward). Sanitizer
// builds run the 15B rows only, held to the command's 15%.
#ifdef UPSIM_SANITIZED
constexpr const char* kNemotronRows = "Nemotron-4-15B";
constexpr double kNemotronBoundPercent = 15.0;
#else
constexpr const char* kNemotronRows = "";
constexpr double kNemotronBoundPercent = 10.0;
#endif

TEST(WorkloadValidation, NemotronReportRowsWithinTenPercent) {
  expect_source_geomean_within("--nemotron-4", kNemotronCsv, kNemotronRows, "nemotron-4",
                               kNemotronBoundPercent);
}

TEST(WorkloadTables, NemotronRowsAreReadAsPublished) {
  const std::vector<NemotronRow> rows = read_nemotron_table(kNemotronCsv);
  ASSERT_EQ(rows.size(), 6U);
  EXPECT_EQ(rows.front().model, "Nemotron-4-15B");
  EXPECT_EQ(rows.front().gpus, 768);
  EXPECT_DOUBLE_EQ(rows.front().step_time_s, 0.57);
  EXPECT_EQ(rows.back().pipeline, 12);
  EXPECT_EQ(rows.back().global_batch, 2304);
  const RowPlan plan = nemotron_plan(
      rows.back(),
      read_model_overrides(fs::path(UPSIM_CONFIGS_DIR) / "validation" / "nemotron4_models.yaml"));
  EXPECT_EQ(plan.label, "Nemotron-4-340B 6144gpu tp8 pp12 dp64 B2304 s4096");
  EXPECT_EQ(plan.template_file, "validation/nemotron4_h100.yaml");
  EXPECT_NE(std::find(plan.overrides.begin(), plan.overrides.end(),
                      "workload.parallelism.virtual_stages=8"),
            plan.overrides.end());
  EXPECT_NE(std::find(plan.overrides.begin(), plan.overrides.end(), "platform.topology.nodes=768"),
            plan.overrides.end());
  const TempFile bad("n.csv",
                     "Model,Paper,Data-parallel size,TP,PP,GPUs,Iteration time (secs),MFU (%),"
                     "Batch size,Sequence Length\n"
                     "Nemotron-4-15B,x,96,8,1,760,0.57,34.3,384,4096\n");
  const std::string e = table_error([&] { read_nemotron_table(bad.path()); });
  EXPECT_NE(e.find(bad.path().string() + ":2: column `GPUs`: 760"), std::string::npos) << e;
}

// NeMo's T5 pre-training rows (encoder-decoder, bf16, 8-160 A100 80GB), held out: every row runs
// and the geomean |error| over the 7 rows stays within 15%, the command's bound (measured 11.80%:
// the 3B rows -8.4% at 1 node to -11.7% at 20, the 220M convergence row -31.2%, whose
// throughput is a 4-day run's mean). Sanitizer builds run the 3B 1-node row only.
#ifdef UPSIM_SANITIZED
constexpr const char* kNemoT5Rows = "T5-3B 8gpu";
#else
constexpr const char* kNemoT5Rows = "";
#endif

TEST(WorkloadValidation, NemoT5RowsWithinFifteenPercent) {
  expect_source_geomean_within("--nemo-t5", kNemoT5Csv, kNemoT5Rows, "nemo-t5", 15.0);
}

TEST(WorkloadTables, NemoT5RowsAreReadAsPublished) {
  const std::vector<NemoT5Row> rows = read_nemo_t5_table(kNemoT5Csv);
  ASSERT_EQ(rows.size(), 7U);
  EXPECT_EQ(rows.front().model, "T5-220M");
  EXPECT_DOUBLE_EQ(rows.front().tokens_per_s, 3'273'728.0);
  EXPECT_EQ(rows.back().gpus, 160);
  EXPECT_DOUBLE_EQ(rows.back().tokens_per_s, 1'626'353.0);
  const RowPlan plan = nemo_t5_plan(
      rows.back(),
      read_model_overrides(fs::path(UPSIM_CONFIGS_DIR) / "validation" / "nemo_t5_models.yaml"));
  EXPECT_EQ(plan.label, "T5-3B 160gpu tp2 pp1 dp80 B1920 mb24 s512");
  EXPECT_EQ(plan.template_file, "validation/nemo_t5_a100.yaml");
  EXPECT_DOUBLE_EQ(plan.measured_s, 0.6044);
  for (const std::string expected : {"platform.topology.nodes=20", "workload.decoder.layers=24",
                                     "workload.parallelism.data=80"}) {
    EXPECT_NE(std::find(plan.overrides.begin(), plan.overrides.end(), expected),
              plan.overrides.end())
        << expected;
  }
  const TempFile bad("t5.csv",
                     "Model,Table,#-GPUs,GBS,MBS,Sequence Length,TP,PP,Tokens / sec,"
                     "derived_step_time_s\n"
                     "T5-3B,x,8,1920,24,512,2,1,110769,9.5\n");
  const std::string e = table_error([&] { read_nemo_t5_table(bad.path()); });
  EXPECT_NE(e.find(bad.path().string() + ":2: column `derived_step_time_s`"), std::string::npos)
      << e;
}

// A model entry of nemo_models.yaml with a key the workload does not know fails its rows, and
// the error names the file and the entry it came from.
TEST(WorkloadValidation, ABadNemoModelKeyNamesTheModelsFile) {
  const fs::path configs = fs::temp_directory_path() / "upsim_nemo_bad_model_configs";
  fs::remove_all(configs);
  fs::copy(UPSIM_CONFIGS_DIR, configs, fs::copy_options::recursive);
  const fs::path models = configs / "validation" / "nemo_models.yaml";
  std::ifstream in(models);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string good = "GPT3-5B: {architecture: gpt, layers: 24";
  ASSERT_NE(text.find(good), std::string::npos);
  text.replace(text.find(good), good.size(), "GPT3-5B: {architecture: gpt, layerz: 24");
  std::ofstream(models) << text;
  std::ostringstream out;
  const int rc = validate_workloads_main({"--megatron",
                                          "",
                                          "--llm-foundry",
                                          "",
                                          "--dle-dlrm",
                                          "",
                                          "--dle-dcnv2",
                                          "",
                                          "--dle-dlrm-inference",
                                          "",
                                          "--nemotron-4",
                                          "",
                                          "--nemo-t5",
                                          "",
                                          "--nemo",
                                          kNemoCsv.string(),
                                          "--configs",
                                          configs.string(),
                                          "--rows",
                                          "GPT3-5B"},
                                         out);
  fs::remove_all(configs);
  EXPECT_EQ(rc, 1) << out.str();
  EXPECT_NE(out.str().find("unknown key `layerz`"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("(the row's overrides come from validation/nemo_models.yaml, model "
                           "GPT3-5B)"),
            std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace upsim::cli
