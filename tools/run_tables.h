// A run's results for machines: summary.json and CSV tables (ranks.csv, links.csv, ops.csv),
// written by `upsim run` next to summary.txt. Pure formatting: the same run gives the same
// bytes (no wall time, no absolute output paths).
//
// summary.json, schema "upsim.summary" version 1 (a new field may appear in any version; a
// field changes meaning or goes away only with a new version):
//   schema, schema_version
//   scenario:   name, description (the scenario's own, as written), file (as given on the
//               command line), overrides (the --set assignments, in order)
//   platform:   gpus, represented_gpus (GPUs the simulated ranks stand for), gpu (hardware
//               profile name), gpu_memory_bytes, kernel_model, host_model, interconnect, fabric
//               ("" without platform.topology)
//   iterations: simulated, warmup, measured
//   predicted_iteration_time_ms: the slowest rank's mean measured iteration
//   throughput: {unit ("tokens" | "samples"), per_s, per_gpu_per_s, model_tflops_per_gpu, mfu,
//               hardware_tflops_per_gpu, hfu, peak_tflops, peak_dtype} (tools/run_metrics.h;
//               model_tflops_per_gpu and mfu null where the workload counts no model FLOPs, hfu
//               and mfu null without a peak for the dtype), or null (a trace)
//   ranks[]:    rank, name, iteration_time_ms and the per-iteration means in ms of compute,
//               communication, exposed_communication, bubble, rendezvous_wait, cpu_bound_idle,
//               other_idle, collective_wait (sim/export/run_summary.h defines each), exposed_by_dim
//               ({tp, cp, ep, pp, dp, other: ms}, the dimensions present), kernels and
//               collectives (tasks in all measured iterations together) and
//               kernels_per_iteration, collectives_per_iteration (the same per measured
//               iteration), iteration_times_ms (every iteration, warm-up included)
//   links[]:    name, capacity_gbytes_per_s, bytes_per_iteration and busy_ms_per_iteration
//               (means over all iterations; also as bytes and busy_ms, their first names),
//               busiest first; empty without link state
//   memory:     owner, parts[{name, bytes}], total_bytes, capacity_bytes; null when the workload
//               does not model memory
//   measured:   null, or for trace workloads: comparison ("error", "what-if" or "none"), reason,
//               ranks[{rank, measured_ms, predicted_ms}] (0 measured: none), steps[{label,
//               ranks_measured_ms[]}]
//   warnings[]: as the console prints them (without "warning: ")
//   simulation: tasks, events (of the last run of the steady-state search)
//
// CSV tables (RFC 4180: a header row, fields with commas or quotes quoted):
//   ranks.csv  rank,name,iteration_time_ms,compute_ms,communication_ms,...,kernels,collectives,
//              kernels_per_iteration,collectives_per_iteration  (as ranks[] above)
//   links.csv  name,capacity_gbytes_per_s,bytes_per_iteration,busy_ms_per_iteration
//   ops.csv    kind,op,name,count_per_iteration,time_ms_per_iteration,share_of_kind,ranks,
//              time_ms_per_iteration_per_rank — every (task kind, PyTorch op, kernel or call
//              name), per measured iteration: count and time summed over all `ranks` simulated
//              ranks, and the time as a mean per rank (the sum / ranks); a wait's time is its
//              wait (sim/export/op_profile.h); share_of_kind is of the time of all rows of its
//              kind
// Times in ms are exact decimals of the integer picoseconds; other numbers are doubles written
// as the shortest text that reads back to the same double.
#pragma once

#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/export/op_profile.h"
#include "sim/export/run_summary.h"
#include "tools/scenario.h"

namespace upsim::cli {

inline constexpr int kSummarySchemaVersion = 1;

/// What a run is, for the machine-readable results.
struct RunIdentity {
  std::string scenario_file;           ///< as given on the command line
  std::vector<std::string> overrides;  ///< the --set assignments, in order
};

std::string summary_json(const RunIdentity& identity, const Scenario& scenario,
                         const RunSummary& summary, const RunStats& stats);
std::string ranks_csv(const RunSummary& summary);
std::string links_csv(const RunSummary& summary);
std::string ops_csv(const std::vector<OpProfileRow>& rows, uint32_t measured_iterations,
                    size_t ranks);

/// A duration in milliseconds, exactly: the integer picoseconds as a decimal (3356194890 ps ->
/// "3.35619489").
std::string format_ms(Duration d);

/// `text` as one CSV field (quoted when it holds a comma, quote, CR or LF; RFC 4180, as
/// sim/formats/csv.h reads it).
std::string csv_field(std::string_view text);

}  // namespace upsim::cli
