#include "workloads/dlrm/dlrm_config.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/config/config_error.h"

namespace upsim {
namespace {

/// The example of the header comment, with `extra` appended to the workload map.
std::string scenario(const std::string& extra = "") {
  return R"(workload:
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
  sharding_seed: 0
  ddp_bucket: 25MiB
  optimizer: sgd
)" + extra;
}

DlrmConfig parse(const std::string& yaml, uint32_t ranks = 4) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "scenario.yaml");
  DlrmConfig config = parse_dlrm_config(doc.root().child("workload"), ranks);
  doc.check_all_keys_used();
  return config;
}

/// Parses and returns the ConfigError message (what()), or "" if parsing succeeded.
std::string error_of(const std::string& yaml, uint32_t ranks = 4) {
  try {
    parse(yaml, ranks);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(DlrmConfig, ParsesTheDocumentedExampleAndEveryKeyIsRead) {
  const DlrmConfig c = parse(scenario());
  EXPECT_EQ(c.global_batch, 4096);
  EXPECT_EQ(c.dtype, DType::kFp32);
  EXPECT_EQ(c.bottom_mlp, (std::vector<int64_t>{512, 1024, 256, 128}));
  EXPECT_EQ(c.top_mlp, (std::vector<int64_t>{1024, 512, 256, 1}));
  EXPECT_EQ(c.embedding_dim, 128);
  EXPECT_EQ(c.index_bytes, 8);
  ASSERT_EQ(c.tables.size(), 48U);
  EXPECT_EQ(c.tables[0].rows, 4000000);
  EXPECT_EQ(c.tables[16].rows, 500000);
  EXPECT_DOUBLE_EQ(c.tables[47].pooling, 2.0);
  EXPECT_EQ(c.sharding, ShardingStrategy::kSizeLookupGreedy);
  EXPECT_EQ(c.ddp_bucket_bytes, 25 * 1024 * 1024);
  EXPECT_EQ(c.ddp_first_bucket_bytes, 1024 * 1024);
  EXPECT_EQ(c.interaction_pairs(), 48 * 49 / 2);
  EXPECT_EQ(c.top_mlp_input(), 128 + 1176);
}

TEST(DlrmConfig, DefaultsAreWrittenIntoTheResolvedConfig) {
  ConfigDocument doc = ConfigDocument::parse_string(R"(workload:
  model: dlrm
  global_batch: 8
  bottom_mlp: [4, 2]
  top_mlp: [1]
  embeddings:
    dim: 2
    tables: [{rows: 10, pooling: 1.5}]
)",
                                                    "s.yaml");
  const DlrmConfig c = parse_dlrm_config(doc.root().child("workload"), 2);
  doc.check_all_keys_used();
  EXPECT_EQ(c.tables.size(), 1U);
  EXPECT_DOUBLE_EQ(c.tables[0].pooling, 1.5);
  EXPECT_EQ(c.sharding, ShardingStrategy::kSizeLookupGreedy);
  const std::string resolved = doc.resolved_yaml();
  for (const char* key : {"dtype", "sharding", "sharding_seed", "ddp_bucket", "ddp_first_bucket",
                          "optimizer", "interaction", "index_bytes", "count", "grad_scaler",
                          "input", "loss_to_host", "update", "mode"}) {
    EXPECT_NE(resolved.find(key), std::string::npos) << key << " missing in\n" << resolved;
  }
}

TEST(DlrmConfig, ReadsOtherDtypesAndSharders) {
  const DlrmConfig c = parse(replace(replace(scenario(), "dtype: fp32", "dtype: bf16"),
                                     "sharding: size_lookup_greedy", "sharding: random"));
  EXPECT_EQ(c.dtype, DType::kBf16);
  EXPECT_EQ(c.sharding, ShardingStrategy::kRandom);
}

TEST(DlrmConfig, ZeroBatchIsAnErrorAtItsKey) {
  const std::string e = error_of(replace(scenario(), "global_batch: 4096", "global_batch: 0"));
  EXPECT_NE(e.find("scenario.yaml:3: workload.global_batch"), std::string::npos) << e;
  EXPECT_NE(e.find("positive"), std::string::npos) << e;
}

TEST(DlrmConfig, BatchNotDivisibleByRanksIsAnError) {
  const std::string e = error_of(scenario(), 3);
  EXPECT_NE(e.find("workload.global_batch"), std::string::npos) << e;
  EXPECT_NE(e.find("4096 samples do not divide evenly among 3 ranks"), std::string::npos) << e;
}

TEST(DlrmConfig, UnknownSharderSuggestsTheNearest) {
  const std::string e =
      error_of(replace(scenario(), "sharding: size_lookup_greedy", "sharding: size_lookup_gredy"));
  EXPECT_NE(e.find("workload.sharding"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean `size_lookup_greedy`"), std::string::npos) << e;
}

TEST(DlrmConfig, UnknownDtypeIsAnError) {
  const std::string e = error_of(replace(scenario(), "dtype: fp32", "dtype: fp64"));
  EXPECT_NE(e.find("workload.dtype"), std::string::npos) << e;
  EXPECT_NE(e.find("fp32"), std::string::npos) << e;
}

TEST(DlrmConfig, BottomMlpMustEndInTheEmbeddingDim) {
  const std::string e = error_of(
      replace(scenario(), "bottom_mlp: [512, 1024, 256, 128]", "bottom_mlp: [512, 1024, 64]"));
  EXPECT_NE(e.find("workload.bottom_mlp"), std::string::npos) << e;
  EXPECT_NE(e.find("ends with 64"), std::string::npos) << e;
  EXPECT_NE(e.find("embeddings.dim = 128"), std::string::npos) << e;
}

TEST(DlrmConfig, EmptyMlpsAreErrors) {
  EXPECT_NE(error_of(replace(scenario(), "bottom_mlp: [512, 1024, 256, 128]", "bottom_mlp: []"))
                .find("workload.bottom_mlp: needs at least 2 entries"),
            std::string::npos);
  EXPECT_NE(error_of(replace(scenario(), "top_mlp: [1024, 512, 256, 1]", "top_mlp: []"))
                .find("workload.top_mlp: needs at least 1 entries"),
            std::string::npos);
}

TEST(DlrmConfig, TopMlpMustEndInOneLogit) {
  const std::string e =
      error_of(replace(scenario(), "top_mlp: [1024, 512, 256, 1]", "top_mlp: [1024, 2]"));
  EXPECT_NE(e.find("workload.top_mlp"), std::string::npos) << e;
}

TEST(DlrmConfig, TableGroupsAreChecked) {
  EXPECT_NE(error_of(replace(scenario(), "{count: 16, rows: 40000, pooling: 2}",
                             "{count: 16, rows: 0, pooling: 2}"))
                .find("workload.embeddings.tables[2].rows"),
            std::string::npos);
  EXPECT_NE(error_of(replace(scenario(), "{count: 16, rows: 40000, pooling: 2}",
                             "{count: 16, rows: 40000, pooling: -1}"))
                .find("workload.embeddings.tables[2].pooling"),
            std::string::npos);
  EXPECT_NE(error_of(replace(scenario(), "    index_bytes: 8", "    index_bytes: 2"))
                .find("workload.embeddings.index_bytes"),
            std::string::npos);
}

TEST(DlrmConfig, SizesThatWouldOverflowAreErrorsAtTheirKey) {
  // 2^63 - 1 rows once gave a table of -512 B and a run that exited 0.
  const std::string huge_rows =
      error_of(replace(scenario(), "rows: 40000,", "rows: 9223372036854775807,"));
  EXPECT_NE(huge_rows.find("workload.embeddings.tables[2].rows: must be between 1 and "
                           "1099511627776, got 9223372036854775807"),
            std::string::npos)
      << huge_rows;
  // Each table within bounds, their total over 2^62 bytes.
  const std::string total = error_of(replace(scenario(), "{count: 16, rows: 40000, pooling: 2}",
                                             "{count: 60000, rows: 1099511627776, pooling: 2}"));
  EXPECT_NE(total.find("workload.embeddings.tables[2].rows: makes the tables hold over 2^62"),
            std::string::npos)
      << total;
  EXPECT_NE(error_of(replace(scenario(), "global_batch: 4096", "global_batch: 4294967296"))
                .find("workload.global_batch: 4294967296 is above the supported 2147483648"),
            std::string::npos);
  EXPECT_NE(error_of(replace(scenario(), "    dim: 128", "    dim: 131072"))
                .find("workload.embeddings.dim: must be between 1 and 65536, got 131072"),
            std::string::npos);
  EXPECT_NE(error_of(replace(scenario(), "top_mlp: [1024, 512", "top_mlp: [2097152, 512"))
                .find("workload.top_mlp: entry 0 is 2097152; layer widths are at most 1048576"),
            std::string::npos);
  // Every value within its bound, the all-to-all over 2^62 bytes: 2^31 samples x 65032 tables x
  // 2^16 values x 4 B.
  const std::string exchange = error_of(
      replace(replace(replace(replace(scenario(), "global_batch: 4096", "global_batch: 2147483648"),
                              "    dim: 128", "    dim: 65536"),
                      "bottom_mlp: [512, 1024, 256, 128]", "bottom_mlp: [512, 65536]"),
              "{count: 16, rows: 40000, pooling: 2}", "{count: 65000, rows: 40000, pooling: 2}"));
  EXPECT_NE(
      exchange.find("workload.global_batch: 2147483648 samples x 65032 tables x 65536 values"),
      std::string::npos)
      << exchange;
  // At the bounds the sizes still parse.
  const DlrmConfig at_bounds = parse(replace(
      replace(scenario(), "global_batch: 4096", "global_batch: 2147483648"),
      "{count: 16, rows: 40000, pooling: 2}", "{count: 1, rows: 1099511627776, pooling: 2}"));
  EXPECT_EQ(at_bounds.global_batch, int64_t{1} << 31);
  EXPECT_EQ(at_bounds.tables.back().rows, int64_t{1} << 40);
}

TEST(DlrmConfig, EmbeddingAndAllToAllDtypes) {
  const DlrmConfig plain = parse(scenario());
  EXPECT_EQ(plain.embedding_dtype, DType::kFp32);
  EXPECT_EQ(plain.all_to_all_dtype, DType::kFp32);
  const DlrmConfig half =
      parse(replace(scenario(), "    dim: 128", "    dim: 128\n    dtype: bf16"));
  EXPECT_EQ(half.embedding_dtype, DType::kBf16);
  EXPECT_EQ(half.all_to_all_dtype, DType::kBf16);  // follows the tables
  const DlrmConfig mixed =
      parse(replace(scenario(), "    dim: 128", "    dim: 128\n    dtype: fp16") +
            "  all_to_all_dtype: fp32\n");
  EXPECT_EQ(mixed.all_to_all_dtype, DType::kFp32);
  // tf32 is a matmul mode, not a storage type.
  EXPECT_NE(error_of(replace(scenario(), "    dim: 128", "    dim: 128\n    dtype: tf32"))
                .find("workload.embeddings.dtype"),
            std::string::npos);
}

TEST(DlrmConfig, DcnV2InteractionAndItsKeys) {
  const DlrmConfig dot = parse(scenario());
  EXPECT_EQ(dot.interaction, DlrmInteraction::kDot);
  EXPECT_EQ(dot.top_mlp_input(), 128 + 48 * 49 / 2);
  const DlrmConfig dcn = parse(replace(scenario(), "interaction: dot", "interaction: dcnv2"));
  EXPECT_EQ(dcn.interaction, DlrmInteraction::kDcnV2);
  EXPECT_EQ(dcn.cross_layers, 3);  // MLPerf DLRMv2
  EXPECT_EQ(dcn.cross_rank, 512);
  EXPECT_EQ(dcn.top_mlp_input(), 49 * 128);
  // Cross keys belong to dcnv2 only; ranges are checked.
  EXPECT_NE(error_of(scenario("  cross_layers: 2\n")).find("cross_layers"), std::string::npos);
  EXPECT_NE(
      error_of(replace(scenario("  cross_rank: 0\n"), "interaction: dot", "interaction: dcnv2"))
          .find("workload.cross_rank: must be between 1 and 65536, got 0"),
      std::string::npos);
}

TEST(DlrmConfig, DenseAndFusedEmbeddingOptimizers) {
  const DlrmConfig sgd = parse(scenario());
  EXPECT_EQ(sgd.dense_optimizer, OptimizerKind::kSgd);
  EXPECT_EQ(sgd.optimizer, EmbeddingOptimizer::kSgd);
  // The fused one follows the dense one unless given (AdamW has no fused form: Adam).
  const DlrmConfig adamw = parse(replace(scenario(), "optimizer: sgd", "optimizer: adamw"));
  EXPECT_EQ(adamw.dense_optimizer, OptimizerKind::kAdamW);
  EXPECT_EQ(adamw.optimizer, EmbeddingOptimizer::kAdam);
  const DlrmConfig rowwise =
      parse(replace(replace(scenario(), "optimizer: sgd", "optimizer: adagrad"), "    dim: 128",
                    "    dim: 128\n    optimizer: rowwise_adagrad"));
  EXPECT_EQ(rowwise.dense_optimizer, OptimizerKind::kAdagrad);
  EXPECT_EQ(rowwise.optimizer, EmbeddingOptimizer::kRowWiseAdagrad);
  EXPECT_NE(error_of(replace(scenario(), "optimizer: sgd", "optimizer: lamb")).find("optimizer"),
            std::string::npos);
}

// The training loop's behaviours (DeepLearningExamples' step): GradScaler by default exactly
// for fp16 with master weights, prefetched input, the loss kept on the GPU, sparse gradients
// (SGD only); each error names its key.
TEST(DlrmConfig, TrainingLoopKeysAndTheirDefaults) {
  const DlrmConfig plain = parse(scenario());
  EXPECT_FALSE(plain.grad_scaler);
  EXPECT_EQ(plain.input, InputPipeline::kBlocking);
  EXPECT_TRUE(plain.loss_to_host);
  EXPECT_EQ(plain.embedding_update, EmbeddingUpdate::kFusedDeduplicated);
  const std::string amp =
      replace(scenario("  master_weights: true\n"), "dtype: fp32", "dtype: fp16");
  EXPECT_TRUE(parse(amp).grad_scaler);
  EXPECT_FALSE(parse(replace(amp, "dtype: fp16", "dtype: bf16")).grad_scaler);
  EXPECT_FALSE(parse(amp + "  grad_scaler: false\n").grad_scaler);
  const DlrmConfig dle =
      parse(replace(scenario("  input: prefetch\n  loss_to_host: false\n"), "    index_bytes: 8",
                    "    index_bytes: 8\n    update: sparse"));
  EXPECT_EQ(dle.input, InputPipeline::kPrefetch);
  EXPECT_FALSE(dle.loss_to_host);
  EXPECT_EQ(dle.embedding_update, EmbeddingUpdate::kScatterAdd);
  EXPECT_NE(error_of(scenario("  grad_scaler: true\n")).find("grad_scaler"), std::string::npos);
  EXPECT_NE(error_of(scenario("  input: pinned\n")).find("input"), std::string::npos);
  const std::string e =
      error_of(replace(replace(scenario(), "optimizer: sgd", "optimizer: adam"),
                       "    index_bytes: 8", "    index_bytes: 8\n    update: sparse"));
  EXPECT_NE(e.find("update"), std::string::npos) << e;
  EXPECT_NE(e.find("torch.optim.SGD"), std::string::npos) << e;
  EXPECT_NE(e.find("the dense optimizer's"), std::string::npos) << e;
}

TEST(DlrmConfig, ShardingTypesPerTableGroupWithTheirDefaults) {
  ConfigDocument doc = ConfigDocument::parse_string(
      replace(replace(replace(scenario(), "{count: 16, rows: 4000000, pooling: 30}",
                              "{count: 16, rows: 4000000, pooling: 30, sharding_type: row_wise}"),
                      "{count: 16, rows: 500000, pooling: 10}",
                      "{count: 16, rows: 500000, pooling: 10, sharding_type: column_wise}"),
              "{count: 16, rows: 40000, pooling: 2}",
              "{count: 15, rows: 40000, pooling: 2, sharding_type: data_parallel}\n"
              "      - {rows: 100, pooling: 1, sharding_type: column_wise, column_shards: 4}\n"
              "      - {rows: 100, pooling: 1}"),
      "scenario.yaml");
  const DlrmConfig c = parse_dlrm_config(doc.root().child("workload"), 4);
  doc.check_all_keys_used();
  ASSERT_EQ(c.tables.size(), 49U);
  EXPECT_EQ(c.tables[0].sharding_type, EmbeddingShardingType::kRowWise);
  EXPECT_EQ(c.tables[0].column_shards, 1);
  EXPECT_EQ(c.tables[16].sharding_type, EmbeddingShardingType::kColumnWise);
  EXPECT_EQ(c.tables[16].column_shards, 2);  // the default
  EXPECT_EQ(c.tables[32].sharding_type, EmbeddingShardingType::kDataParallel);
  EXPECT_EQ(c.tables[47].sharding_type, EmbeddingShardingType::kColumnWise);
  EXPECT_EQ(c.tables[47].column_shards, 4);
  EXPECT_EQ(c.tables[48].sharding_type, EmbeddingShardingType::kTableWise);  // the default
  EXPECT_EQ(c.tables[48].dim, 0);                                            // the model's
  // Every table still counts once in the interaction.
  EXPECT_EQ(c.interaction_pairs(), 49 * 50 / 2);
  const std::string resolved = doc.resolved_yaml();
  EXPECT_NE(resolved.find("sharding_type: table_wise"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("column_shards: 2"), std::string::npos) << resolved;
}

TEST(DlrmConfig, ShardingTypeErrorsNameTheirKey) {
  const std::string unknown =
      error_of(replace(scenario(), "{count: 16, rows: 40000, pooling: 2}",
                       "{count: 16, rows: 40000, pooling: 2, sharding_type: row_wize}"));
  EXPECT_NE(unknown.find("workload.embeddings.tables[2].sharding_type"), std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("did you mean `row_wise`"), std::string::npos) << unknown;
  const std::string shards = error_of(replace(
      scenario(), "{count: 16, rows: 40000, pooling: 2}",
      "{count: 16, rows: 40000, pooling: 2, sharding_type: column_wise, column_shards: 3}"));
  EXPECT_NE(shards.find("workload.embeddings.tables[2].column_shards"), std::string::npos)
      << shards;
  EXPECT_NE(shards.find("3 shards do not divide embeddings.dim = 128"), std::string::npos)
      << shards;
  const std::string zero = error_of(replace(
      scenario(), "{count: 16, rows: 40000, pooling: 2}",
      "{count: 16, rows: 40000, pooling: 2, sharding_type: column_wise, column_shards: 0}"));
  EXPECT_NE(zero.find("workload.embeddings.tables[2].column_shards"), std::string::npos) << zero;
  const std::string stray =
      error_of(replace(scenario(), "{count: 16, rows: 40000, pooling: 2}",
                       "{count: 16, rows: 40000, pooling: 2, column_shards: 2}"));
  EXPECT_NE(stray.find("workload.embeddings.tables[2].column_shards"), std::string::npos) << stray;
  EXPECT_NE(stray.find("column_wise tables only"), std::string::npos) << stray;
}

// sharding_type: auto on 4 ranks of 32 GiB table memory, global batch 4096, dim 128, fp32: the
// exchange share of a table is 2 x 4096 x 128 x 4 B = 4 MiB. A 100-row table (50 KiB of
// gradient) is data-parallel; a 40M-row 100-hot table (20.5 GB, over half a rank's memory, and
// 100 x 128 of the 103 x 128 lookups) is row-wise; a 1M-row 2-hot table stays table-wise.
TEST(DlrmConfig, AutoShardingTypesFollowTheStatedRules) {
  DlrmConfig c = parse(R"(workload:
  model: dlrm
  global_batch: 4096
  bottom_mlp: [13, 128]
  top_mlp: [64, 1]
  embeddings:
    dim: 128
    tables:
      - {rows: 100, pooling: 1, sharding_type: auto}
      - {rows: 40000000, pooling: 100, sharding_type: auto}
      - {rows: 1000000, pooling: 2, sharding_type: auto}
      - {rows: 1000000, pooling: 2}
)");
  choose_sharding_types(c, 4, int64_t{32} << 30);
  EXPECT_EQ(c.tables[0].sharding_type, EmbeddingShardingType::kDataParallel);
  EXPECT_EQ(c.tables[1].sharding_type, EmbeddingShardingType::kRowWise);
  EXPECT_EQ(c.tables[2].sharding_type, EmbeddingShardingType::kTableWise);
  EXPECT_EQ(c.tables[3].sharding_type, EmbeddingShardingType::kTableWise);  // not auto
  // One rank: nothing to split.
  DlrmConfig one = c;
  for (EmbeddingTable& t : one.tables)
    t.sharding_type = EmbeddingShardingType::kTableWise;
  choose_sharding_types(one, 1, int64_t{32} << 30);
  for (const EmbeddingTable& t : one.tables)
    EXPECT_EQ(t.sharding_type, EmbeddingShardingType::kTableWise);
}

TEST(DlrmConfig, BucketSizeNeedsAUnit) {
  // PyTorch's bucket_cap_mb=25 written as "ddp_bucket: 25" would be a 25-byte bucket.
  const std::string e = error_of(replace(scenario(), "ddp_bucket: 25MiB", "ddp_bucket: 25"));
  EXPECT_NE(e.find("scenario.yaml:17: workload.ddp_bucket: missing unit in size \"25\""),
            std::string::npos)
      << e;
}

TEST(DlrmConfig, UnknownKeyIsReportedByTheDocument) {
  const std::string e = error_of(scenario("  ddp_buckets: 4MiB\n"));
  EXPECT_NE(e.find("ddp_buckets"), std::string::npos) << e;
}

}  // namespace
}  // namespace upsim
