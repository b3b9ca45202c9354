// `upsim validate memory`: the per-GPU memory model against published training-memory figures
// (test/data/published-memory/memory_rows.csv and its SOURCES.md). Each row is a scenario
// template of configs/validation/ with the row's `--set` overrides, built like `upsim run`
// builds it (the memory check included: a row published as running that upsim refuses fails);
// its estimated footprint is compared with the figure as the figure measures memory:
//   max_allocated  torch.cuda.max_memory_allocated: the estimate as is;
//   max_reserved   torch.cuda.max_memory_reserved (torchtitan's logged memory): the estimate
//                  as is (the allocator's reserve above it is not modelled, see below);
//   nvml_used      the device's used memory: the estimate plus the CUDA context the source
//                  measured (context_mib). The caching allocator's reserve above its peak
//                  allocation is not added: no public source states it as a factor, and it
//                  varies with the allocation pattern (the error shows it).
// Rows marked bounded must be within --bound (15%); the others are reported with why they are
// not bounded.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns the exit code: 0 when every bounded row ran and is within --bound, 1 otherwise; bad
/// input throws (WorkloadTableError, ConfigError, boost::program_options::error) for main to
/// report (2).
int validate_memory_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
