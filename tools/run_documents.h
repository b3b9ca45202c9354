// A finished run's documents, the texts `upsim run` writes into its folder (summary.txt,
// scenario.yaml, and the tables for machines of tools/run_tables.h), built in memory: the CLI
// stages them as files, the Python package (python/) hands them to the caller, so that both say
// the same thing about the same run.
#pragma once

#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/export/op_profile.h"
#include "tools/run_tables.h"
#include "tools/steady_state.h"

namespace upsim::cli {

struct RunDocuments {
  std::string summary_text;   ///< summary.txt: the full summary, every rank, with warnings
  std::string resolved_yaml;  ///< scenario.yaml: ConfigDocument::resolved_yaml()
  std::string summary_json;   ///< summary.json (tools/run_tables.h)
  std::string ranks_csv;
  std::string links_csv;
  std::string ops_csv;
  /// What the run warns about, one sentence each (run_warnings).
  std::vector<std::string> warnings;
};

/// The documents of `run` (the steady-state run of `doc`), with `ops` the rows of the op
/// profile attached to its last attempt.
RunDocuments run_documents(const RunIdentity& identity, const ConfigDocument& doc,
                           const SteadyRun& run, const std::vector<OpProfileRow>& ops);

/// Runs `doc` (overrides applied) to steady state with the op profile as its only output
/// observer (no folder, no trace) and returns its documents. Throws what run_to_steady_state
/// throws.
RunDocuments run_in_memory(ConfigDocument& doc, const RunIdentity& identity);

/// Trace workloads: the measured iteration time of each rank next to the prediction, as an error
/// only when the platform is the measured one (MeasuredComparison in tools/scenario.h): a
/// what-if prints the same ratio as a change under a "what-if:" line, and a measured time that
/// is not an iteration's gets no ratio, with the reason; then the measured steps, when the trace
/// has several.
std::string format_measured_comparison(const Scenario& scenario, const RunSummary& summary);

/// `text` (format_run_summary's) with the throughput line (run_metrics.h) after its first line,
/// the predicted iteration time.
std::string summary_with_metrics(const Scenario& scenario, const RunSummary& summary,
                                 std::string text);

}  // namespace upsim::cli
