#include "tools/plot_command.h"

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/input_file.h"
#include "tools/child_process.h"
#include "tools/command_line.h"
#include "tools/input_text.h"
#include "tools/output_folder.h"
#include "tools/plot_script.h"

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

// Bounds on what `upsim plot` reads: a results table of a 1 M-point sweep is ~200 MB; a run's
// ranks and links tables have a row per rank and per link.
constexpr std::uintmax_t kMaxResultsBytes = 256 * kMiB;
constexpr std::uintmax_t kMaxRunTableBytes = 64 * kMiB;

/// gnuplot writes an SVG of a few hundred KB per thousand bars; this bounds what it may write.
constexpr size_t kMaxSvgBytes = size_t{1} << 30;

CsvTable read_table(const fs::path& file, std::uintmax_t max_bytes) {
  std::string text;
  if (const auto why = read_input_text(file, max_bytes, text)) {
    throw std::runtime_error(fmt::format("{}: {}", printable_text(file.string()), *why));
  }
  return parse_csv_table(text, file.string());
}

/// Refuses to replace anything but a regular file at each output name or its .tmp twin (even
/// with --force), and, without --force, any file there at all.
void check_outputs(const fs::path& out_dir, const std::vector<PlotScript>& plots, bool force) {
  for (const PlotScript& p : plots) {
    for (const char* suffix : {".gp", ".svg"}) {
      const fs::path file = out_dir / (p.name + suffix);
      check_replaceable(file);
      if (force) continue;
      for (const fs::path& f : {file, fs::path(file.string() + ".tmp")}) {
        std::error_code ec;
        if (fs::exists(fs::symlink_status(f, ec))) {
          throw std::runtime_error(fmt::format(
              "{} already exists; upsim does not overwrite files unasked: choose another --out "
              "folder, or pass --force to overwrite",
              printable_text(f.string())));
        }
      }
    }
  }
}

/// gnuplot's argument for `file`: a path, never read as an option.
std::string gnuplot_argument(const fs::path& file) {
  const std::string s = file.string();
  return !s.empty() && s.front() == '-' ? "./" + s : s;
}

/// Writes `<name>.gp` and, with gnuplot on PATH, `<name>.svg` from gnuplot's standard output;
/// false when gnuplot is missing. gnuplot's warnings go to `err`.
bool render(const fs::path& out_dir, const PlotScript& plot, std::vector<std::string>& written,
            std::ostream& err) {
  const fs::path gp = out_dir / (plot.name + ".gp");
  write_file_atomically(gp, plot.script);
  written.push_back(gp.string());
  ChildProcessLimits limits;
  limits.max_stdout_bytes = kMaxSvgBytes;
  ChildProcessResult drawn;
  try {
    drawn = run_program({"gnuplot", gnuplot_argument(gp)}, limits);
  } catch (const ChildProcessError& e) {
    if (e.program_not_found()) return false;
    throw;
  }
  if (!drawn.succeeded()) {
    throw std::runtime_error(fmt::format("gnuplot failed on {} ({}): {}",
                                         printable_text(gp.string()), drawn.how_it_ended(),
                                         drawn.stderr_text));
  }
  err << drawn.stderr_text;
  if (drawn.stdout_bytes.find("<svg") == std::string::npos) {
    throw std::runtime_error(
        fmt::format("gnuplot wrote no SVG for {}", printable_text(gp.string())));
  }
  const fs::path svg = out_dir / (plot.name + ".svg");
  write_file_atomically(svg, drawn.stdout_bytes);
  written.push_back(svg.string());
  return true;
}

}  // namespace

int plot_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string input;
  std::string x;
  std::string out_dir_text;
  bool force = false;
  po::options_description desc(
      "usage: upsim plot RESULTS.csv --x AXIS [options]\n"
      "       upsim plot RUN_DIR [options]\n\n"
      "Draws SVG plots with gnuplot: for a sweep's results.csv, the iteration time against the\n"
      "axis column AXIS and the slowest rank's breakdown per point; for a run's output folder,\n"
      "the per-rank breakdown and link utilisation. Writes the gnuplot scripts (*.gp) too.\n\n"
      "options");
  desc.add_options()("help,h", "this help")                                             //
      ("x", po::value<std::string>(&x), "results.csv: the axis column for the x axis")  //
      ("out,o", po::value<std::string>(&out_dir_text),
       "folder for the plots (default: next to the input)")  //
      ("force", po::bool_switch(&force), "overwrite existing plots (.svg, .gp)");
  if (!parse_with_positional(args, desc, out, "input", input)) return 0;
  if (input.empty()) throw po::error("upsim plot: missing RESULTS.csv or RUN_DIR");
  const fs::path path(input);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw std::runtime_error(
        fmt::format("{}: no such file or folder (a sweep's results.csv or a run's output folder)",
                    printable_text(input)));
  }
  const bool is_dir = fs::is_directory(path, ec);
  fs::path out_dir =
      !out_dir_text.empty() ? fs::path(out_dir_text) : (is_dir ? path : path.parent_path());
  if (out_dir.empty()) out_dir = ".";

  std::vector<PlotScript> plots;
  size_t rows_left_out = 0;
  if (is_dir) {
    const CsvTable ranks = read_table(path / "ranks.csv", kMaxRunTableBytes);
    // links.csv is optional; anything at that name is read (a pipe there is an error).
    const fs::path links_file = path / "links.csv";
    std::optional<CsvTable> links;
    if (fs::exists(fs::symlink_status(links_file, ec))) {
      links = read_table(links_file, kMaxRunTableBytes);
    }
    plots = run_plots(ranks, links ? &*links : nullptr);
  } else {
    if (x.empty()) throw po::error("upsim plot RESULTS.csv: give the axis column with --x");
    ResultsPlots results =
        results_plots(read_table(path, kMaxResultsBytes), x, path.stem().string());
    plots = std::move(results.plots);
    rows_left_out = results.rows_left_out;
  }
  fs::create_directories(out_dir, ec);
  if (ec) {
    throw std::runtime_error(fmt::format("cannot create the plot folder {}: {}",
                                         printable_text(out_dir.string()), ec.message()));
  }
  check_outputs(out_dir, plots, force);
  std::vector<std::string> written;
  bool drawn = true;
  try {
    for (const PlotScript& p : plots) {
      // Once gnuplot is found missing, the other scripts are still written.
      if (drawn) {
        drawn = render(out_dir, p, written, err);
      } else {
        const fs::path gp = out_dir / (p.name + ".gp");
        write_file_atomically(gp, p.script);
        written.push_back(gp.string());
      }
    }
  } catch (...) {
    // A failed plot leaves none of this call's files behind.
    for (const std::string& w : written)
      fs::remove(w, ec);
    throw;
  }
  for (const std::string& w : written)
    out << "wrote " << printable_text(w) << "\n";
  if (rows_left_out > 0) out << fmt::format("{} rows left out (not status ok)\n", rows_left_out);
  if (!drawn) {
    err << "upsim: gnuplot is not on PATH: the scripts are written, but no SVG; install it "
           "(Debian: apt install gnuplot-nox) and run `gnuplot FILE.gp > FILE.svg`\n";
    return 1;
  }
  return 0;
}

}  // namespace upsim::cli
