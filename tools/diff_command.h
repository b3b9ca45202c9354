// `upsim diff RUN_A RUN_B`: what changed between two runs (e.g. before and after a what-if),
// from their machine-readable results (summary.json and ops.csv, tools/run_tables.h).
//
// Contract:
//  - Prints the two runs' identity (scenario, overrides, platform), the predicted iteration
//    time of each and the change, the per-iteration breakdown of each run's slowest rank side
//    by side with its change, the ops (task kind and PyTorch op, over their kernels and calls)
//    and then the (task kind, op, name) rows whose time per iteration changed most (--top N
//    each, by absolute change; ties by kind, op, name).
//  - --csv FILE writes every (kind, op, name) row of either run: a_ms, b_ms, delta_ms, a_count,
//    b_count per iteration (never over an existing file without --force).
//  - The folders are read by tools/run_folder_reader.h: summary.json and ops.csv must be regular
//    files of bounded size (a pipe or a device is an error naming it, never a hang), of the
//    schema version this upsim reads, with every field diff uses present, numbers finite and
//    each (kind, op, name) once; any other file is an error naming it (and the key or line).
//  - The same two folders give the same output.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

int diff_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
