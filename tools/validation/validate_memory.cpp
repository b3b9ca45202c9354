#include "tools/validation/validate_memory.h"

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include <cmath>
#include <exception>
#include <filesystem>
#include <optional>
#include <ostream>

#include "sim/config/config_node.h"
#include "tools/command_line.h"
#include "tools/scenario.h"
#include "tools/shipped_files.h"
#include "tools/validation/measurement_table.h"

namespace upsim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;
constexpr double kDefaultBound = 0.15;
// Lin et al., TPDS 2024: geomean of |e| with EPSILON = 4e-4, as the other validate commands.
constexpr double kGeomeanEpsilon = 4e-4;

enum class Measure { kNvmlUsed, kMaxAllocated, kMaxReserved };

struct MemoryRow {
  int line = 0;
  std::string source;
  std::string label;
  std::string template_file;
  std::vector<std::string> overrides;
  Measure measure = Measure::kMaxAllocated;
  double measured_mib = 0.0;
  double context_mib = 0.0;
  bool bounded = false;
  std::string why;
};

/// The `;`-separated `key=value` assignments of row `row`'s `overrides` (empty: none); one
/// without a key before its `=` is a WorkloadTableError naming file, line and column.
std::vector<std::string> read_overrides(const MeasurementTable& t, size_t row) {
  const std::string& text = t.field(row, "overrides");
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(';', start);
    const std::string part = text.substr(start, end == std::string::npos ? end : end - start);
    if (!part.empty()) {
      const size_t eq = part.find('=');
      if (eq == 0 || eq == std::string::npos) {
        throw t.bad_value(row, "overrides", part, "a key=value assignment");
      }
      out.push_back(part);
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

/// The field of `column` in `row`, which must not be empty.
const std::string& required(const MeasurementTable& t, size_t row, const std::string& column) {
  const std::string& text = t.field(row, column);
  if (text.empty()) throw t.bad_value(row, column, text, "given (it is empty)");
  return text;
}

std::vector<MemoryRow> read_memory_rows(const fs::path& file) {
  const MeasurementTable t(file);
  std::vector<MemoryRow> rows;
  for (size_t i = 0; i < t.size(); ++i) {
    MemoryRow r;
    r.line = t.line(i);
    r.source = required(t, i, "source");
    r.label = required(t, i, "label");
    r.template_file = required(t, i, "template");
    r.overrides = read_overrides(t, i);
    const std::string& measure = t.field(i, "measure");
    if (measure == "nvml_used") {
      r.measure = Measure::kNvmlUsed;
    } else if (measure == "max_allocated") {
      r.measure = Measure::kMaxAllocated;
    } else if (measure == "max_reserved") {
      r.measure = Measure::kMaxReserved;
    } else {
      throw t.bad_value(i, "measure", measure, "nvml_used, max_allocated or max_reserved");
    }
    const double measured = t.number(i, "measured");
    if (!(measured > 0.0)) throw t.bad_value(i, "measured", t.field(i, "measured"), "positive");
    const std::string& unit = t.field(i, "unit");
    if (unit == "MiB") {
      r.measured_mib = measured;
    } else if (unit == "GiB") {
      r.measured_mib = measured * 1024.0;
    } else {
      throw t.bad_value(i, "unit", unit, "MiB or GiB");
    }
    r.context_mib = t.number(i, "context_mib");
    if (r.measure == Measure::kNvmlUsed && !(r.context_mib > 0.0)) {
      throw t.bad_value(i, "context_mib", t.field(i, "context_mib"),
                        "a positive CUDA context (nvml_used rows)");
    }
    r.bounded = t.boolean(i, "bounded");
    r.why = t.field(i, "why");
    if (!r.bounded && r.why.empty()) {
      throw t.bad_value(i, "why", "", "a reason (the row is not bounded)");
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

struct Options {
  std::string rows_file = shipped_path("test/data/published-memory/memory_rows.csv");
  std::string configs = shipped_path("configs");
  double bound = kDefaultBound;
};

bool parse_options(const std::vector<std::string>& args, std::ostream& out, Options& o) {
  po::options_description desc(
      "usage: upsim validate memory [options]\n\n"
      "Compares the per-GPU memory upsim estimates with published training-memory figures:\n"
      "each row of the table is a template of configs/validation/ with the row's --set\n"
      "overrides, built as `upsim run` builds it (a row upsim refuses for memory fails). An\n"
      "nvml_used figure (device used memory) is compared with the estimate plus the CUDA\n"
      "context the source measured; a max_reserved figure with the estimate; a max_allocated\n"
      "figure with the estimate less the caching allocator's reserve.\n"
      "Prints per row the measured and estimated GiB and the error (estimated / measured - 1),\n"
      "then the geomean |error| of the bounded rows. Exits 0 when every bounded row is within\n"
      "--bound, 1 otherwise, 2 for bad input. The defaults are the shipped files (the\n"
      "repository root, or the installed share/upsim).\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("rows", po::value<std::string>(&o.rows_file)->default_value(o.rows_file),
       "the published figures (CSV; its header comment lists the columns)")  //
      ("configs", po::value<std::string>(&o.configs)->default_value(o.configs),
       "folder holding validation/ (the templates) and what they reference")  //
      ("bound", po::value<double>(&o.bound)->default_value(kDefaultBound, "0.15"),
       "largest acceptable |error| of a bounded row (fraction)");
  po::variables_map vm;
  if (!parse_command_line(args, desc, out, vm)) return false;
  if (!(o.bound > 0.0)) throw po::error("--bound must be positive");
  return true;
}

/// The estimated footprint of `row`'s scenario in bytes as the row measures it (a
/// max_allocated figure without the allocator's reserve), or the error that stopped it.
struct RowEstimate {
  std::optional<double> bytes;
  std::string parts;
  std::string error;
};

RowEstimate estimate(const MemoryRow& row, const fs::path& configs) {
  RowEstimate e;
  try {
    ConfigDocument doc = ConfigDocument::load_file(configs / "validation" / row.template_file);
    for (const std::string& assignment : row.overrides)
      doc.apply_override(assignment);
    const Scenario scenario = build_scenario(doc);
    if (!scenario.memory) {
      e.error = "the workload does not model memory";
      return e;
    }
    const bool allocated_only = row.measure == Measure::kMaxAllocated;
    e.bytes = static_cast<double>(allocated_only ? scenario.memory->allocated_bytes()
                                                 : scenario.memory->total_bytes());
    for (const MemoryFootprint::Part& p : scenario.memory->parts) {
      if (p.bytes == 0) continue;
      if (allocated_only && p.name == MemoryFootprint::kAllocatorReserve) continue;
      e.parts += fmt::format("{}{} {:.2f}", e.parts.empty() ? "" : ", ", p.name,
                             static_cast<double>(p.bytes) / kGiB);
    }
  } catch (const std::exception& ex) {
    e.error = ex.what();
  }
  return e;
}

}  // namespace

int validate_memory_main(const std::vector<std::string>& args, std::ostream& out) {
  Options o;
  if (!parse_options(args, out, o)) return 0;
  const std::vector<MemoryRow> rows = read_memory_rows(o.rows_file);
  double log_sum = 0.0;
  size_t bounded_ran = 0;
  bool within = true;
  out << fmt::format("{:<72} {:>13} {:>14} {:>8}  {}\n", "row", "measured GiB", "estimated GiB",
                     "error", "bounded");
  for (const MemoryRow& row : rows) {
    const std::string name = row.source + ": " + row.label;
    const RowEstimate e = estimate(row, o.configs);
    const double measured = row.measured_mib * kMiB;
    if (!e.bytes) {
      within = within && !row.bounded;
      out << fmt::format("{:<72} {:>13.3f} {:>14} {:>8}  {}  ERROR: {}\n", name, measured / kGiB,
                         "-", "-", row.bounded ? "yes" : "no", e.error);
      continue;
    }
    const double context = row.measure == Measure::kNvmlUsed ? row.context_mib * kMiB : 0.0;
    const double estimated = *e.bytes + context;
    const double error = estimated / measured - 1.0;
    if (row.bounded) {
      ++bounded_ran;
      log_sum += std::log(std::abs(error) + kGeomeanEpsilon);
      within = within && std::abs(error) <= o.bound;
    }
    out << fmt::format(
        "{:<72} {:>13.3f} {:>14.3f} {:>7.2f}%  {}\n", name, measured / kGiB, estimated / kGiB,
        100.0 * error,
        row.bounded ? (std::abs(error) <= o.bound ? "yes" : "yes: BEYOND") : "no: " + row.why);
    out << fmt::format("    ({}{}; GiB)\n", e.parts,
                       context > 0.0 ? fmt::format(", CUDA context {:.2f}", context / kGiB) : "");
  }
  if (bounded_ran > 0) {
    out << fmt::format(
        "bounded rows: geomean |error| {:.2f}% over {} rows (held out: no memory-model constant "
        "was fitted on them); each within {:.0f}%: {}\n",
        100.0 * std::exp(log_sum / static_cast<double>(bounded_ran)), bounded_ran, 100.0 * o.bound,
        within ? "yes" : "NO");
  } else {
    out << "NO BOUNDED ROW RAN\n";
    within = false;
  }
  return within ? 0 : 1;
}

}  // namespace upsim::cli
