// What `upsim diff` reads of a run folder that `upsim run` wrote (tools/run_tables.h): of
// summary.json the run's identity, predicted iteration time and per-rank breakdown; of ops.csv
// every (task kind, op, name) row. The parsers are pure functions of text (fuzzed by
// test/fuzz/fuzz_outputs.cpp); read_run_folder() reads the two files.
//
// Contract:
//  - summary.json must be an object of schema "upsim.summary", schema_version
//    kSummarySchemaVersion, with every field read here present and of its type (numbers finite);
//    other fields are skipped unread (a new field may appear in any version). Only what is read
//    is kept, so memory is bounded by the number of ranks, not by the document.
//  - ops.csv must have the columns kind, op, name, count_per_iteration, time_ms_per_iteration
//    (found by name), as many fields in every row as in the header, finite numbers, and each
//    (kind, op, name) once.
//  - Errors name the file, and the line or the key; JSON syntax errors are ParseError (line and
//    column), the rest std::runtime_error. A file that is not a summary is not quoted.
//  - Both files are regular files of bounded size (tools/input_text.h); a missing, non-regular
//    or too large one is "FILE: cannot read (REASON; no run results here?)".
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace upsim::cli {

/// The per-rank times diff compares, in summary.json's names (ms per iteration).
inline constexpr std::array<const char*, 9> kRankTimeFields{
    "iteration_time_ms",        "compute_ms",    "communication_ms",
    "exposed_communication_ms", "bubble_ms",     "rendezvous_wait_ms",
    "cpu_bound_idle_ms",        "other_idle_ms", "collective_wait_ms"};

struct RankTimes {
  std::string name;
  std::array<double, kRankTimeFields.size()> ms{};  ///< in kRankTimeFields' order
};

struct RunSummaryFields {
  std::string scenario_name;
  std::vector<std::string> overrides;
  int64_t gpus = 0;
  std::string gpu;
  double predicted_iteration_time_ms = 0.0;
  std::vector<RankTimes> ranks;
  /// summary.json's `throughput` (absent or null: a trace, or an older summary): its unit,
  /// units per second, and MFU / HFU where stated.
  std::string throughput_unit;
  double throughput_per_s = 0.0;
  std::optional<double> mfu;
  std::optional<double> hfu;
};

struct OpTimes {
  double ms = 0.0;     ///< time per iteration
  double count = 0.0;  ///< calls per iteration
};
using OpKey = std::tuple<std::string, std::string, std::string>;  ///< kind, op, name
using OpTable = std::map<OpKey, OpTimes>;

struct RunFolder {
  std::filesystem::path dir;
  RunSummaryFields summary;
  OpTable ops;
};

/// summary.json's text (`file` names it in errors).
RunSummaryFields parse_run_summary(std::string_view text, const std::string& file);
/// ops.csv's text.
OpTable parse_ops_table(std::string_view text, const std::string& file);
/// `dir`/summary.json and `dir`/ops.csv.
RunFolder read_run_folder(const std::filesystem::path& dir);

}  // namespace upsim::cli
