// `upsim plot`: pictures of results without Python, drawn by gnuplot (Debian's gnuplot-nox).
//
//   upsim plot RESULTS.csv --x AXIS   a sweep's results.csv: the iteration time against the axis
//                                     column AXIS (numbers on a linear axis, anything else as
//                                     categories), and a second plot of the slowest rank's
//                                     breakdown per point as stacked bars
//   upsim plot RUN_DIR                a run's output folder: the per-rank breakdown (ranks.csv)
//                                     as stacked bars, and link utilisation (links.csv) as bars
// Writes SVG files (default next to the input; --out DIR) and the gnuplot script of each
// (<name>.gp, which writes the SVG to standard output: `gnuplot X.gp > X.svg`), so a plot can be
// restyled; rows of a sweep that did not run (`skipped`, `failed`) are left out and counted.
// Axes are labelled with the column names and units; the same inputs give the same files.
//
// Contract:
//  - Nothing in a table or a name is executed: the scripts are tools/plot_script.h's (labels as
//    single-quoted literals, data blocks of checked numbers), and gnuplot is started by
//    tools/child_process.h with an argument vector, never through a shell.
//  - Inputs (results.csv; RUN_DIR's ranks.csv and, when there, links.csv) are regular files of
//    bounded size (tools/input_text.h): a pipe or a device is an error naming it.
//  - Outputs are written by upsim through write_file_atomically (the SVG from gnuplot's standard
//    output), never through a symbolic link or over anything but a regular file, and never over
//    an existing .gp / .svg (or its .tmp twin) without --force; all are checked before any is
//    written.
//  - Without gnuplot on PATH the scripts are still written and the command says how to install
//    it (exit 1); gnuplot failing (or writing no SVG) is an error with its message, and the files
//    this call wrote are removed.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

int plot_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace upsim::cli
