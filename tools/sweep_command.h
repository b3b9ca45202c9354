// `upsim sweep STUDY.yaml`: a what-if study — one base scenario run at every point of a grid of
// overrides — with one results table.
//
// Study file (YAML):
//   study: dlrm_gpus                 # optional name (default: the file's stem); one folder
//                                    #   name: no `/`, `\`, control characters, not `.`, `..`,
//                                    #   empty or starting with `-`
//   base: ../dlrm_4gpu.yaml          # required: the scenario, relative to the study file
//   set:                             # optional: overrides of every point (before its own)
//     platform.gpu: ../hardware/h100_sxm5_80gb.yaml
//   axes:                            # grid: every combination, the last axis fastest
//     platform.gpu: [hardware/a100_sxm4_40gb.yaml, hardware/h100_sxm5_80gb.yaml]
//     workload.global_batch: [2048, 4096]
//   zip:                             # optional: lists that advance together (equal lengths),
//     - platform.gpu: [...]          #   each entry one more grid dimension
//       platform.topology: [...]
//   fits_memory: true                # optional (default false): a point whose per-GPU memory
//                                    #   exceeds the GPU's is skipped (said in the table)
//                                    #   instead of failing
// Keys are the key paths `--set` takes (values inside referenced files included); values are
// YAML scalars, or YAML text in a string ("{model: seed_curve}") for maps and lists. A value
// that names an existing file relative to the study file is taken as that file. A key takes its
// values from one place: the same key in `set`, `axes` or zip groups twice (`a[0].b` and `a.0.b`
// being one key) is refused, naming both places.
//
// Contract:
//  - Points are numbered 0.. in grid order; each is the base scenario with the point's
//    overrides, run to steady state as `upsim run` does (tools/steady_state.h).
//  - Outputs in the folder (default upsim-out/<study>/, --out DIR): results.csv (and the same
//    table as results.h5: tools/results_hdf5.h), one row per
//    point (point, each axis value, status ok|skipped|failed, iteration time and the slowest
//    rank's per-iteration breakdown in ms, per-GPU memory bytes, the throughput (unit, units
//    per second, MFU and HFU as fractions; tools/run_metrics.h), the busiest link and its busy
//    ms per iteration, a message: the error of a failed point, why one was skipped, or what
//    `upsim run` of an ok point warns about, "warning: ...; warning: ..."), study.points (the
//    manifest) and points/<n>.row, each finished point's row record (tools/sweep_records.h).
//    Rows are formatted exactly (times from integer picoseconds), so the table is byte-identical
//    at any -j and after a resume. The summary line counts each row's status field.
//  - --point-outputs also writes each point's own results to points/<n>/ (summary.txt,
//    summary.json, ranks.csv, links.csv, ops.csv, scenario.yaml), as `upsim run --no-trace`.
//  - Integrity: study.points records the upsim version and, per point, a content hash of its
//    fully resolved scenario (tools/point_source.h: the base scenario's bytes, the overrides as
//    applied, every file the scenario references, transitively). A row record carries its
//    point, the version and hashes it was computed with, and a checksum.
//  - Resumable: a point whose row record stands is not run again, so a killed sweep continues
//    where it stopped. A row runs again, said on stderr (one line per reason: "point 3: its
//    scenario changed since its row was written (hardware/a100_sxm4_40gb.yaml); running it
//    again"), when its scenario's hash changed (the files that changed named, relative to the
//    base scenario's folder), when another upsim version wrote it (a manifest of another
//    version: every point, said once), when it is damaged (edited, truncated, glued to another,
//    of another point: named), or with --point-outputs when points/<n>/ lacks its outputs.
//  - A sweep reads and replaces regular files only: a named pipe, device, socket, folder or
//    symbolic link at study.points or a points/<n>.row is never read (a pipe would block): the
//    sweep refuses, naming it (exit 2), even with --force; it cannot be replaced safely (a
//    folder's content is the user's). Every output is written through its .tmp twin
//    (tools/output_folder.h), results.h5 included.
//  - Folders: a folder of another study (other base or points) is refused unless --force; a
//    non-empty folder without a study.points (not a sweep's) is refused unless --force. --force
//    replaces only the files a sweep writes: results.csv, results.h5, study.points, the --plot
//    SVG/gnuplot files, points/<n>.row and points/<n>/'s outputs; other files there are kept
//    (tools/sweep_folder.h).
//  - -j N runs N points at once on local cores, at most one per point left; a thread the
//    system refuses is not an error while one runs (sim/parallel.h). Progress goes to stderr: a
//    one-line bar on a terminal, plain lines otherwise (points done, rate, ETA).
//  - A point that fails (a bad override, a scenario error) is a `failed` row with the error;
//    the command exits 1 when any point failed, 0 otherwise, 2 for a bad study file or folder.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/config/config_node.h"

namespace upsim::cli {

int sweep_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// What a sweep did: its exit code (as sweep_main's) and the folder holding results.csv (empty
/// after --help and on the serving ranks under mpirun).
struct SweepOutcome {
  int exit_code = 0;
  std::filesystem::path folder;
};
/// sweep_main's work, for callers that need the folder (the Python package).
SweepOutcome run_sweep(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// Reads the study in `doc` (loaded from `file`, which names it and anchors its relative paths)
/// and returns its number of points; ConfigError or std::invalid_argument for a bad study. The
/// study file's reader on its own (tests, the fuzz harness).
size_t study_point_count(ConfigDocument& doc, const std::filesystem::path& file);

}  // namespace upsim::cli
