// `upsim validate workloads`: whole training steps (and DLRM inference batches) of published
// runs, measured vs predicted. Sources (test/data/*/SOURCES.md; the command's --help lists them
// with their templates under configs/validation/): Megatron-LM SC'21 Table 1, llm-foundry's MPT
// benchmarks, NeMo 24.07's DGX-H100 FP8 table, the Nemotron-4 reports' Table 2, and NVIDIA
// DeepLearningExamples' PyTorch DLRM and TF2 DCNv2 training tables and PyTorch DLRM inference
// tables (CUDA graphs off and on).
// Each measured row becomes a scenario: its template with the row's values applied as `--set`
// overrides in-process, run like `upsim run` without outputs.
// The rows simulate on --jobs threads (sim/parallel.h) while the command prints them in row
// order as they finish.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns the exit code: 0 when every source's geomean |error| is within its bound (--bound;
/// dle-dlrm-inference 25%; dle-dlrm and dle-dcnv2 together 12% with no row beyond 25%) and no
/// row failed, 1 otherwise; bad input throws
/// (WorkloadTableError, ConfigError) for main to report (2).
int validate_workloads_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
