// `upsim schema [KEY]`: every scenario key upsim's readers read, with the type they read it as,
// the range they check and the default they take, as the readers themselves record it
// (ConfigDocument::read_keys): the union over the shipped scenarios and starters (configs/*.yaml,
// configs/starters/*.yaml, and configs/schema/*.yaml, which state the optional keys the others
// leave at their defaults), or over the scenarios given with --scenario. SCHEMA.md at the
// repository root is `upsim schema --markdown`; a test regenerates it and fails when it drifts.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"

namespace upsim::cli {

/// One key of the schema: the union of what the scenarios' readers recorded for it.
struct SchemaKey {
  std::string path;  ///< a sequence item as `[]` ("workload.embeddings.tables[].rows")
  std::vector<std::string> types;     ///< distinct, in order of first appearance
  std::vector<std::string> ranges;    ///< distinct, non-empty
  std::vector<std::string> defaults;  ///< distinct; empty: no reader has a default
  std::vector<std::string> families;  ///< workload families whose scenarios read it
  bool in_referenced_file = false;
  /// What the key means, per family whose reader publishes it (sim/config/key_meaning.h):
  /// {family, meaning}, distinct, in order of first appearance; empty: no reader says.
  std::vector<std::pair<std::string, std::string>> meanings;
};

/// The keys of `schema` at or below `prefix` ("" for all; "workload.parallelism").
std::vector<const SchemaKey*> keys_below(const std::vector<SchemaKey>& schema,
                                         const std::string& prefix);

/// Adds `keys` (one scenario's, of workload family `family`, whose `workload` keys mean what
/// `family_meanings` says: WorkloadRegistry::key_meanings) to `schema`, keys in order of first
/// appearance, each with its meaning as its reader publishes it (key_meaning()).
void merge_schema(std::vector<SchemaKey>& schema, const std::vector<ReadKey>& keys,
                  const std::string& family, std::span<const KeyMeaning> family_meanings);

/// The meaning of schema path `path` ("platform.gpu.hbm.size"), from the table of the reader
/// that reads it: the scenario's own keys, the platform's models, the workload family's keys
/// (`family_meanings`, relative to `workload`), and the keys of the files a scenario references
/// (hardware profile, calibration, host overheads, fabric, collective tuning). nullopt: no table
/// has it.
std::optional<std::string> key_meaning(const std::string& path,
                                       std::span<const KeyMeaning> family_meanings);

/// The meaning of `key` as one line: the one meaning, or "family: meaning | ..." when families
/// differ; empty when none is published.
std::string meaning_text(const SchemaKey& key);

/// Every key pattern of the meaning tables key_meaning() consults, with its full path prefix
/// ("platform.gpu.peak_flops.*"), for the test that no meaning outlives its key.
std::vector<std::string> key_meaning_patterns();

/// `schema` as a text table (or Markdown with `markdown`), the keys at or below `prefix` ("" for
/// all).
std::string format_schema(const std::vector<SchemaKey>& schema, const std::string& prefix,
                          bool markdown);

/// The schema of `scenarios` (none: the shipped scenarios and starters), each built as `upsim
/// run` builds it; with `with_files` the keys of the files they reference too.
std::vector<SchemaKey> read_schema(std::vector<std::filesystem::path> scenarios, bool with_files);

/// Returns the exit code (0; bad input throws for main to report).
int schema_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
