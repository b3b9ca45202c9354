#include "tools/plot_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/run_tables.h"

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

using Table = std::vector<std::vector<std::string>>;

/// An RFC 4180 CSV file (quoted fields with doubled quotes; no line breaks inside fields).
Table read_csv(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read", file.string()));
  Table t;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> fields = parse_csv_line(line);
    t.push_back(std::move(fields));
  }
  if (t.size() < 2) throw std::runtime_error(fmt::format("{}: no data rows", file.string()));
  return t;
}

size_t column(const Table& t, const std::string& name, const fs::path& file) {
  for (size_t c = 0; c < t.front().size(); ++c) {
    if (t.front()[c] == name) return c;
  }
  std::string names;
  for (const std::string& h : t.front()) {
    if (!names.empty()) names += ", ";
    names += h;
  }
  throw std::runtime_error(
      fmt::format("{}: no column `{}`; the columns are {}", file.string(), name, names));
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0';
}

/// A gnuplot string literal.
std::string gp_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// Writes `script` as <stem>.gp and runs gnuplot on it; false when gnuplot is missing.
bool render(const fs::path& out_dir, const std::string& stem, const std::string& script,
            std::vector<std::string>& written) {
  const fs::path gp = out_dir / (stem + ".gp");
  write_file_atomically(gp, script);
  written.push_back(gp.string());
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  const std::string command = fmt::format("gnuplot '{}'", gp.string());
  if (std::system(command.c_str()) != 0) {
    throw std::runtime_error(fmt::format("gnuplot failed on {}", gp.string()));
  }
  written.push_back((out_dir / (stem + ".svg")).string());
  return true;
}

std::string header(const fs::path& svg, const std::string& title, int width, int height) {
  return fmt::format(
      "# Written by `upsim plot`; run `gnuplot {}` to redraw.\n"
      "set terminal svg size {},{} dynamic enhanced font 'sans,11' background rgb 'white'\n"
      "set output {}\nset title {} noenhanced\nset grid ytics\nset key outside right top "
      "noenhanced\n",
      svg.stem().string() + ".gp", width, height, gp_string(svg.string()), gp_string(title));
}

/// Stacked bars: one bar per row label, one segment per part.
std::string stacked(const std::vector<std::string>& labels, const std::vector<std::string>& parts,
                    const std::vector<std::vector<std::string>>& values, const std::string& xlabel,
                    const std::string& ylabel) {
  std::string s = "$DATA << EOD\nlabel";
  for (const std::string& p : parts) {
    s += ' ';
    s += gp_string(p);
  }
  s += "\n";
  for (size_t i = 0; i < labels.size(); ++i) {
    s += gp_string(labels[i]);
    for (const std::string& v : values[i]) {
      s += ' ';
      s += v.empty() ? std::string("0") : v;
    }
    s += "\n";
  }
  s += "EOD\n";
  s += fmt::format(
      "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 "
      "border -1\nset boxwidth 0.75\nset xlabel {} noenhanced\nset ylabel {} noenhanced\nset "
      "xtics rotate by -45 noenhanced\nset yrange [0:*]\n",
      gp_string(xlabel), gp_string(ylabel));
  s += "plot ";
  for (size_t p = 0; p < parts.size(); ++p) {
    s +=
        fmt::format("{}$DATA using {}:xtic(1) title columnheader({})", p ? ", " : "", p + 2, p + 2);
  }
  return s + "\n";
}

int plot_results(const fs::path& file, const std::string& x, const fs::path& out_dir,
                 std::ostream& out) {
  const Table t = read_csv(file);
  const size_t xc = column(t, x, file);
  const size_t status = column(t, "status", file);
  const size_t iteration = column(t, "iteration_ms", file);
  const std::vector<std::string> parts{"compute_ms",         "exposed_comm_ms",   "bubble_ms",
                                       "rendezvous_wait_ms", "cpu_bound_idle_ms", "other_idle_ms"};
  std::vector<size_t> part_columns;
  for (const std::string& p : parts)
    part_columns.push_back(column(t, p, file));
  // The other axis columns (between `point` and `status`) make the series: one line per
  // combination of their values, in order of first appearance.
  std::vector<size_t> others;
  for (size_t c = 1; c < status; ++c) {
    if (c != xc) others.push_back(c);
  }
  std::vector<std::string> labels;  // bar labels: every axis value of the point
  std::vector<std::vector<std::string>> values;
  std::vector<std::string> series_names;
  std::vector<std::vector<std::pair<std::string, std::string>>> series;  // (x, time)
  std::vector<std::string> categories;
  size_t left_out = 0;
  bool numeric = true;
  for (size_t r = 1; r < t.size(); ++r) {
    if (t[r].size() != t.front().size() || t[r][status] != "ok") {
      ++left_out;
      continue;
    }
    std::string key;
    for (const size_t c : others) {
      if (!key.empty()) key += ", ";
      key += t.front()[c];
      key += '=';
      key += t[r][c];
    }
    std::string label = t[r][xc];
    if (!key.empty()) {
      label += " (";
      label += key;
      label += ')';
    }
    labels.push_back(std::move(label));
    numeric = numeric && is_number(t[r][xc]);
    if (std::find(categories.begin(), categories.end(), t[r][xc]) == categories.end()) {
      categories.push_back(t[r][xc]);
    }
    const auto it = std::find(series_names.begin(), series_names.end(), key);
    const size_t k = static_cast<size_t>(it - series_names.begin());
    if (it == series_names.end()) {
      series_names.push_back(key);
      series.emplace_back();
    }
    series[k].emplace_back(t[r][xc], t[r][iteration]);
    std::vector<std::string> v;
    for (const size_t c : part_columns)
      v.push_back(t[r][c]);
    values.push_back(std::move(v));
  }
  if (labels.empty()) {
    throw std::runtime_error(fmt::format("{}: no row ran (status ok)", file.string()));
  }
  std::vector<std::string> written;
  const std::string stem = file.stem().string();
  const fs::path svg = out_dir / (stem + "_iteration.svg");
  std::string s = header(svg, fmt::format("{}: predicted iteration time", stem), 1000, 560);
  s += fmt::format("set xlabel {} noenhanced\nset ylabel \"iteration time (ms)\"\n", gp_string(x));
  if (!numeric) {
    s += "set xtics rotate by -45 noenhanced (";
    for (size_t i = 0; i < categories.size(); ++i)
      s += fmt::format("{}{} {}", i ? ", " : "", gp_string(categories[i]), i);
    s += ")\nset xrange [-0.5:" + std::to_string(categories.size()) + "]\n";
  }
  std::string plot = "set yrange [0:*]\nplot ";
  for (size_t k = 0; k < series.size(); ++k) {
    s += fmt::format("$S{} << EOD\n", k);
    for (const auto& [xv, time] : series[k]) {
      const size_t xi = static_cast<size_t>(std::find(categories.begin(), categories.end(), xv) -
                                            categories.begin());
      s += fmt::format("{} {}\n", numeric ? xv : std::to_string(xi), time);
    }
    s += "EOD\n";
    plot += fmt::format("{}$S{} using 1:2 with linespoints lw 2 pt 7 title {}", k ? ", " : "", k,
                        gp_string(series_names[k].empty() ? "iteration time" : series_names[k]));
  }
  s += plot + "\n";
  bool drawn = render(out_dir, stem + "_iteration", s, written);
  const fs::path bars = out_dir / (stem + "_breakdown.svg");
  std::string b =
      header(bars, fmt::format("{}: slowest rank's breakdown per point", stem), 1000, 560);
  b += stacked(labels, parts, values, x, "ms per iteration");
  drawn = render(out_dir, stem + "_breakdown", b, written) && drawn;
  for (const std::string& w : written)
    out << "wrote " << w << "\n";
  if (left_out > 0) out << fmt::format("{} rows left out (not status ok)\n", left_out);
  return drawn ? 0 : 1;
}

int plot_run(const fs::path& dir, const fs::path& out_dir, std::ostream& out) {
  const fs::path ranks_file = dir / "ranks.csv";
  const Table t = read_csv(ranks_file);
  const std::vector<std::string> parts{"compute_ms",        "exposed_communication_ms",
                                       "bubble_ms",         "rendezvous_wait_ms",
                                       "cpu_bound_idle_ms", "other_idle_ms"};
  std::vector<size_t> cols;
  for (const std::string& p : parts)
    cols.push_back(column(t, p, ranks_file));
  const size_t name = column(t, "name", ranks_file);
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> values;
  for (size_t r = 1; r < t.size(); ++r) {
    labels.push_back(t[r][name]);
    std::vector<std::string> v;
    for (const size_t c : cols)
      v.push_back(t[r][c]);
    values.push_back(std::move(v));
  }
  std::vector<std::string> written;
  const fs::path svg = out_dir / "ranks_breakdown.svg";
  std::string s = header(svg, "per-rank breakdown of an iteration", 1000, 560);
  s += stacked(labels, parts, values, "rank", "ms per iteration");
  bool drawn = render(out_dir, "ranks_breakdown", s, written);
  // Link utilisation: busy share of the iteration, busiest 24 links.
  const fs::path links_file = dir / "links.csv";
  std::error_code ec;
  if (fs::exists(links_file, ec)) {
    std::ifstream probe(links_file);
    std::string line;
    int lines = 0;
    while (std::getline(probe, line) && lines < 2)
      ++lines;
    if (lines >= 2) {
      const Table l = read_csv(links_file);
      const size_t lname = column(l, "name", links_file);
      const size_t busy = column(l, "busy_ms_per_iteration", links_file);
      std::string d =
          header(out_dir / "links.svg", "link busy time per iteration (busiest)", 1000, 560);
      d += "$DATA << EOD\n";
      for (size_t r = 1; r < l.size() && r <= 24; ++r)
        d += fmt::format("{} {}\n", gp_string(l[r][lname]), l[r][busy]);
      d += "EOD\nset style data histograms\nset style fill solid 0.85 border -1\nset boxwidth "
           "0.75\nset xlabel \"link\"\nset ylabel \"busy (ms per iteration)\"\nset xtics rotate "
           "by -45 noenhanced\nset yrange [0:*]\nplot $DATA using 2:xtic(1) title \"busy\"\n";
      drawn = render(out_dir, "links", d, written) && drawn;
    }
  }
  for (const std::string& w : written)
    out << "wrote " << w << "\n";
  return drawn ? 0 : 1;
}

}  // namespace

int plot_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string input;
  std::string x;
  std::string out_dir_text;
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
       "folder for the plots (default: next to "
       "the input)");
  po::options_description hidden;
  hidden.add_options()("input", po::value<std::string>(&input));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse_command_line(args, all, out, vm, &positional, &desc)) return 0;
  if (input.empty()) throw po::error("upsim plot: missing RESULTS.csv or RUN_DIR");
  const fs::path path(input);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw std::runtime_error(fmt::format(
        "{}: no such file or folder (a sweep's results.csv or a run's output folder)", input));
  }
  const bool is_dir = fs::is_directory(path, ec);
  const fs::path out_dir =
      !out_dir_text.empty() ? fs::path(out_dir_text) : (is_dir ? path : path.parent_path());
  fs::create_directories(out_dir.empty() ? fs::path(".") : out_dir, ec);
  int rc = 0;
  if (is_dir) {
    rc = plot_run(path, out_dir.empty() ? fs::path(".") : out_dir, out);
  } else {
    if (x.empty()) throw po::error("upsim plot RESULTS.csv: give the axis column with --x");
    rc = plot_results(path, x, out_dir.empty() ? fs::path(".") : out_dir, out);
  }
  if (rc != 0) {
    err << "upsim: gnuplot is not on PATH: the scripts are written, but no SVG; install it "
           "(Debian: apt install gnuplot-nox) and run `gnuplot FILE.gp`\n";
  }
  return rc;
}

}  // namespace upsim::cli
