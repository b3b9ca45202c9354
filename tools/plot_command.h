// `upsim plot`: pictures of results without Python, drawn by gnuplot (Debian's gnuplot-nox).
//
//   upsim plot RESULTS.csv --x AXIS   a sweep's results.csv: the iteration time against the axis
//                                     column AXIS (numbers on a linear axis, anything else as
//                                     categories), and a second plot of the slowest rank's
//                                     breakdown per point as stacked bars
//   upsim plot RUN_DIR                a run's output folder: the per-rank breakdown (ranks.csv)
//                                     as stacked bars, and link utilisation (links.csv) as bars
// Writes SVG files (default next to the input; --out DIR) and the gnuplot script of each
// (<name>.gp), so a plot can be restyled; rows of a sweep that did not run (`skipped`,
// `failed`) are left out and counted. Without gnuplot on PATH the scripts are still written and
// the command says how to install it (exit 1). Axes are labelled with the column names and
// units; the same inputs give the same files.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

int plot_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace upsim::cli
