// `upsim schema`'s meanings: every key the shipped scenarios read (and the files they reference)
// has one line of meaning from its reader's table, and no table keeps a meaning for a key that
// no reader reads any more.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/config/key_meaning.h"
#include "tools/schema_command.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kConfigs = UPSIM_CONFIGS_DIR;

std::vector<fs::path> shipped_scenarios() {
  std::vector<fs::path> out;
  for (const fs::path& folder : {kConfigs / "starters", kConfigs, kConfigs / "schema"}) {
    for (const fs::directory_entry& e : fs::directory_iterator(folder)) {
      if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(KeyPattern, StarMatchesAnyNonEmptyTextAndTheRestLiterally) {
  EXPECT_TRUE(key_pattern_matches("ops.*.t2", "ops.aten::add_.t2"));
  EXPECT_TRUE(key_pattern_matches("ops.*.t5", "ops.DataLoader.__next__.t5"));
  EXPECT_TRUE(key_pattern_matches("attention.*.forward_efficiency_*",
                                  "attention.flash3.forward_efficiency_128"));
  EXPECT_TRUE(key_pattern_matches("tables[].rows", "tables[].rows"));
  EXPECT_FALSE(key_pattern_matches("ops.*.t2", "ops..t2"));
  EXPECT_FALSE(key_pattern_matches("ops.*.t2", "ops.add.t3"));
  EXPECT_FALSE(key_pattern_matches("gpus", "gpus.x"));
  EXPECT_FALSE(key_pattern_matches("peak_flops.*", "peak_flops."));
  const KeyMeaning table[] = {{"a.*", "first"}, {"a.b", "never reached"}};
  ASSERT_NE(find_key_meaning(table, "a.b"), nullptr);
  EXPECT_EQ(find_key_meaning(table, "a.b")->meaning, "first");
  EXPECT_EQ(find_key_meaning(table, "b"), nullptr);
}

TEST(SchemaMeanings, EveryShippedKeyHasOneAndEveryMeaningNamesAKeyReadersRead) {
  const std::vector<SchemaKey> schema = read_schema(shipped_scenarios(), /*with_files=*/true);
  ASSERT_GT(schema.size(), 300u);
  for (const SchemaKey& k : schema) {
    for (const std::string& family : k.families) {
      EXPECT_TRUE(
          std::any_of(k.meanings.begin(), k.meanings.end(),
                      [&](const auto& m) { return m.first == family && !m.second.empty(); }))
          << "`" << k.path << "` (read in " << family
          << " scenarios) has no meaning: add one to its reader's key_meanings table";
    }
  }
  for (const std::string& pattern : key_meaning_patterns()) {
    EXPECT_TRUE(
        std::any_of(schema.begin(), schema.end(),
                    [&](const SchemaKey& k) { return key_pattern_matches(pattern, k.path); }))
        << "the meaning of `" << pattern
        << "` names no key the shipped scenarios read: a renamed or removed key?";
  }
  const auto gpus = std::find_if(schema.begin(), schema.end(),
                                 [](const SchemaKey& k) { return k.path == "platform.gpus"; });
  ASSERT_NE(gpus, schema.end());
  EXPECT_EQ(meaning_text(*gpus),
            "GPUs of the run, one rank each; default with a topology: its GPUs");
  const auto mode = std::find_if(schema.begin(), schema.end(),
                                 [](const SchemaKey& k) { return k.path == "workload.mode"; });
  ASSERT_NE(mode, schema.end());
  EXPECT_NE(meaning_text(*mode).find("dlrm: a training step"), std::string::npos)
      << meaning_text(*mode);
  EXPECT_NE(meaning_text(*mode).find("| trace: measured durations"), std::string::npos)
      << meaning_text(*mode);
}

}  // namespace
}  // namespace upsim::cli
