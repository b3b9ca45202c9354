#include "tools/sweep_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string_view>

#include "tools/plot_script.h"

namespace upsim::cli {

std::string short_axis_value(std::string_view value) {
  const bool yaml = value.ends_with(".yaml") || value.ends_with(".yml");
  if (!yaml) return std::string(value);
  const size_t slash = value.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? value : value.substr(slash + 1);
  return std::string(name.substr(0, name.rfind('.')));
}

namespace {

/// A shown column: its title, the results.csv column it reads and how it formats the value.
struct Column {
  std::string title;
  std::string source;
  enum class Format { kText, kInteger, kMs, kRate, kPercent, kGiB } format = Format::kText;
  bool axis = false;  // an axis value: a YAML file by its stem
};

std::string cell(const Column& c, const std::string& value) {
  if (c.format == Column::Format::kText || c.format == Column::Format::kInteger || value.empty()) {
    return value;
  }
  const std::optional<double> v = finite_number(value);
  if (!v) return value;
  switch (c.format) {
    case Column::Format::kMs:
      return fmt::format("{:.4f}", *v);
    case Column::Format::kRate:
      return *v >= 1e6 ? fmt::format("{:.3f} M", *v * 1e-6) : fmt::format("{:.1f} k", *v * 1e-3);
    case Column::Format::kPercent:
      return fmt::format("{:.1f}%", 100.0 * *v);
    case Column::Format::kGiB:
      return fmt::format("{:.2f}", *v / (1024.0 * 1024.0 * 1024.0));
    case Column::Format::kText:
    case Column::Format::kInteger:
      break;
  }
  return value;
}

}  // namespace

std::string format_sweep_table(const std::vector<CsvRecord>& records, size_t axis_columns,
                               size_t max_rows) {
  if (records.size() < 2) return "";
  const std::vector<std::string>& header = records.front().fields;
  using F = Column::Format;
  std::vector<Column> columns{{"point", "point", F::kInteger}};
  for (size_t k = 1; k <= axis_columns && k < header.size(); ++k)
    columns.push_back({header[k], header[k], F::kText, true});
  // The throughput's unit is the same for every ok point of a study (one workload family).
  std::string unit = "throughput";
  const auto column_of = [&](std::string_view name) -> std::optional<size_t> {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) return std::nullopt;
    return static_cast<size_t>(it - header.begin());
  };
  if (const auto u = column_of("throughput_unit")) {
    for (size_t r = 1; r < records.size(); ++r) {
      if (*u < records[r].fields.size() && !records[r].fields[*u].empty()) {
        unit = records[r].fields[*u] + "/s";
        break;
      }
    }
  }
  for (const Column& c :
       {Column{"status", "status", F::kText}, Column{"iteration ms", "iteration_ms", F::kMs},
        Column{unit, "throughput_per_s", F::kRate}, Column{"MFU", "mfu", F::kPercent},
        Column{"exposed comm ms", "exposed_comm_ms", F::kMs},
        Column{"GiB/GPU", "memory_bytes_per_gpu", F::kGiB}}) {
    if (column_of(c.source)) columns.push_back(c);
  }
  // The cells, then the widths.
  const size_t shown = std::min(records.size() - 1, max_rows);
  std::vector<std::vector<std::string>> cells;
  for (size_t r = 1; r <= shown; ++r) {
    std::vector<std::string> line;
    for (const Column& c : columns) {
      const size_t at = *column_of(c.source);
      const std::string& raw = at < records[r].fields.size() ? records[r].fields[at] : "";
      line.push_back(c.axis ? short_axis_value(raw) : cell(c, raw));
    }
    cells.push_back(std::move(line));
  }
  // A number no shown point has (MFU of a DLRM study) is left out.
  for (size_t k = columns.size(); k-- > 0;) {
    if (columns[k].format == F::kText || columns[k].format == F::kInteger) continue;
    const bool empty = std::all_of(cells.begin(), cells.end(),
                                   [k](const std::vector<std::string>& l) { return l[k].empty(); });
    if (!empty) continue;
    columns.erase(columns.begin() + static_cast<std::ptrdiff_t>(k));
    for (auto& line : cells)
      line.erase(line.begin() + static_cast<std::ptrdiff_t>(k));
  }
  std::vector<size_t> width;
  for (const Column& c : columns)
    width.push_back(c.title.size());
  for (const auto& line : cells) {
    for (size_t k = 0; k < line.size(); ++k)
      width[k] = std::max(width[k], line[k].size());
  }
  // Text left-aligned, numbers right-aligned.
  const auto row = [&](const std::vector<std::string>& values) {
    std::string out;
    for (size_t k = 0; k < values.size(); ++k) {
      const bool left = columns[k].format == F::kText;
      out += k ? "  " : "";
      out += left ? fmt::format("{:<{}}", values[k], width[k])
                  : fmt::format("{:>{}}", values[k], width[k]);
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> titles;
  for (const Column& c : columns)
    titles.push_back(c.title);
  std::string out = row(titles);
  for (const auto& line : cells)
    out += row(line);
  if (shown < records.size() - 1) {
    out += fmt::format("... {} more points in results.csv\n", records.size() - 1 - shown);
  }
  return out;
}

}  // namespace upsim::cli
