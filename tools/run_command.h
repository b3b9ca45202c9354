// `upsim run`: load a scenario, build the models and the workload, simulate, write outputs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace upsim::cli {

struct RunOptions {
  std::string scenario;
  std::vector<std::string> overrides;  ///< "a.b=value", applied in order
  std::string out_dir;                 ///< empty: upsim-out/<scenario stem>[-N]
  std::string trace_file;  ///< empty: <out>/trace.json (kineto: the folder <out>/kineto)
  /// --trace-format: `chrome` (one Chrome trace for Perfetto) or `kineto` (one PyTorch profiler
  /// trace per rank, for HTA and trace scenarios; tools/kineto_trace_folder.h); nullopt: chrome.
  std::optional<std::string> trace_format;
  /// --trace-ranks: `all` or graph ranks and ranges ("0-7,56"); nullopt: every rank, or the
  /// workload's suggestion when the graph is large (kLargeTraceTasks).
  std::optional<std::string> trace_ranks;
  /// --trace-iterations: `all`, `last`, N or N-M (1-based, as the summary counts iterations);
  /// nullopt: every iteration, or the last when the graph is large (kLargeTraceTasks).
  std::optional<std::string> trace_iterations;
  /// --trace-gzip: <out>/trace.json.gz instead of trace.json (large graphs: by default).
  bool trace_gzip = false;
  bool no_trace = false;
  bool force = false;
  bool quiet = false;
  /// --dry-run: build the scenario and print what would run (the header, the graph's size, the
  /// resolved scenario) without simulating or writing anything.
  bool dry_run = false;
  /// --keys: like --dry-run, but print only the key paths of the resolved scenario, one per
  /// line, as --set takes them (shell completion reads them).
  bool list_keys = false;
  /// A progress line on `err` while the run simulates (tools/run_progress.h); `upsim run` sets
  /// it when stderr is a terminal and --quiet is not given.
  bool progress = false;
};

/// Graphs with more tasks than this draw only the workload's suggested ranks in the Chrome
/// trace unless --trace-ranks says otherwise. A full trace costs about 300 bytes of JSON per task
/// (llama3_70b_64gpu: 2.28 GB for 7.3 M tasks, link counters included), so 1 M tasks is a trace
/// of about 300 MB. The Perfetto UI holds a trace in the browser tab's memory (typically capped
/// near 2 GB, at several times the file's size once parsed;
/// https://perfetto.dev/docs/visualization/large-traces) and crashed on a 900 MB JSON trace
/// (google/perfetto#99). The shipped scenarios fall far on either side: DLRM, BERT, GPT-2 and
/// Mixtral have at most 63 k tasks and keep their full trace; Llama 3 70B (7.3 M) and GPT-3
/// 175B (16 M) draw one rank per pipeline stage.
inline constexpr uint64_t kLargeTraceTasks = 1'000'000;

enum class TraceFormat : uint8_t { kChrome, kKineto };

/// Parses a --trace-format value (`chrome`, `kineto`). Throws std::invalid_argument naming
/// --trace-format and the valid values for anything else.
TraceFormat parse_trace_format(std::string_view text);

/// Parses a --trace-ranks value: nullopt for `all`, else the graph ranks of a comma-separated
/// list of ranks and ranges ("0-7,56"), sorted and distinct. Throws std::invalid_argument
/// naming --trace-ranks for anything else.
std::optional<std::vector<uint32_t>> parse_trace_ranks(std::string_view text);

/// Parses a --trace-iterations value for a run of `iterations` iterations: nullopt for `all`,
/// else the first and last iteration drawn (`last`: the last one; N; N-M), 1-based. Throws
/// std::invalid_argument naming --trace-iterations for anything else or an iteration the run
/// does not have.
std::optional<std::pair<uint32_t, uint32_t>> parse_trace_iterations(std::string_view text,
                                                                    uint32_t iterations);

/// Refuses (std::invalid_argument, naming the option) --dry-run together with an option about
/// outputs, which a dry run would ignore.
void check_dry_run_options(const RunOptions& options);

/// Runs one scenario: the results (the summary; with --quiet the predicted iteration time
/// alone) go to `out`, warnings ("upsim: warning: ...") and progress (events simulated, the
/// output files) to `err`, so that `upsim run ... > result.txt` captures results only.
/// summary.txt holds the summary with its warnings. With dry_run: the scenario's header, the
/// size of its graph and its resolved YAML to `out`, warnings to `err`, nothing simulated or
/// written. Throws ConfigError for bad input,
/// SimulationError when the run cannot complete, std::runtime_error for I/O problems.
void run_scenario(const RunOptions& options, std::ostream& out, std::ostream& err);

}  // namespace upsim::cli
