#include "tools/plot_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "sim/formats/csv.h"
#include "tools/plot_axes.h"
#include "tools/run_tables.h"
#include "tools/sweep_table.h"

namespace upsim::cli {

namespace {

/// The length of the valid UTF-8 sequence at the start of `s`, or 0 (RFC 3629: no overlong
/// forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

/// Appends `text` to `out` with escapes for control characters and invalid UTF-8.
void append_printable(std::string_view text, std::string& out) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(text.substr(i));
      if (n == 0) {
        out += fmt::format("\\x{:02X}", c);
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
}

/// A file name as a shell word for the redraw comment ('...' when it needs quoting).
std::string shell_word(const std::string& name) {
  bool plain = !name.empty() && name.front() != '-';
  for (const char c : name) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-' || c == '+' || c == ',' || c == '=';
    plain = plain && safe;
  }
  if (plain) return name;
  std::string quoted = "'";
  for (const char c : printable_text(name)) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string header(const std::string& name, const std::string& title) {
  return fmt::format(
      "# Written by `upsim plot`; redraw with: gnuplot {} > {}\n"
      "set terminal svg size 1000,560 dynamic enhanced font 'sans,11' background rgb 'white'\n"
      "set title {} noenhanced\nset grid ytics\nset key outside right top noenhanced\n",
      shell_word(name + ".gp"), shell_word(name + ".svg"), gnuplot_literal(title));
}

/// A number for a data block: the shortest decimal that reads back to `v`.
std::string data_number(double v) {
  return fmt::format("{}", v);
}

size_t required_column(const CsvTable& t, std::string_view name, std::string_view kind) {
  if (const auto c = t.find(name)) return *c;
  throw std::runtime_error(
      fmt::format("{}: not a {} (no column `{}`)", printable_text(t.file), kind, name));
}

double number_at(const CsvTable& t, const CsvTable::Row& row, size_t column) {
  if (const auto v = finite_number(row.fields[column])) return *v;
  throw std::runtime_error(fmt::format("{}:{}: column `{}`: expected a finite number",
                                       printable_text(t.file), row.line,
                                       printable_text(t.header[column])));
}

/// `set xtics` with one labelled tic per label at 0, 1, 2, ... (bars and categories), level when
/// they fit side by side (about 90 characters of an SVG 1000 wide), else turned by 45 degrees.
std::string labelled_xtics(const std::vector<std::string>& labels) {
  size_t total = 0;
  size_t longest = 0;
  for (const std::string& l : labels) {
    total += l.size() + 2;
    longest = std::max(longest, l.size());
  }
  const bool level = total <= 90 && longest <= 24;
  std::string s = level ? "set xtics noenhanced (" : "set xtics rotate by -45 noenhanced (";
  for (size_t i = 0; i < labels.size(); ++i)
    s += fmt::format("{}{} {}", i ? ", " : "", gnuplot_literal(labels[i]), i);
  return s + ")\n";
}

/// Stacked bars: one bar per label, one segment per part (values[bar][part]).
std::string stacked_bars(const std::vector<std::string>& labels,
                         const std::vector<std::string>& parts,
                         const std::vector<std::vector<double>>& values, const std::string& xlabel,
                         const std::string& ylabel) {
  std::string s = "$DATA << EOD\n";
  for (const std::vector<double>& bar : values) {
    for (size_t p = 0; p < bar.size(); ++p) {
      if (p) s += ' ';
      s += data_number(bar[p]);
    }
    s += "\n";
  }
  s += "EOD\n";
  s += fmt::format(
      "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 "
      "border -1\nset boxwidth 0.75\nset xlabel {} noenhanced\nset ylabel {} noenhanced\n",
      gnuplot_literal(xlabel), gnuplot_literal(ylabel));
  s += labelled_xtics(labels);
  s += "set yrange [0:*]\nplot ";
  for (size_t p = 0; p < parts.size(); ++p)
    s += fmt::format("{}$DATA using {} title {}", p ? ", " : "", p + 1,
                     gnuplot_literal(part_title(parts[p])));
  return s + "\n";
}

/// The index of `key` in `order` (appended at its first appearance).
size_t index_of(const std::string& key, std::map<std::string, size_t>& index,
                std::vector<std::string>& order) {
  const auto [it, added] = index.try_emplace(key, order.size());
  if (added) order.push_back(key);
  return it->second;
}

}  // namespace

std::optional<size_t> CsvTable::find(std::string_view name) const {
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == name) return c;
  }
  return std::nullopt;
}

CsvTable parse_csv_table(std::string_view text, const std::string& file) {
  CsvTable t;
  t.file = file;
  std::vector<CsvRecord> records = read_csv(
      text, printable_text(file), {.skip_blank_lines = true, .max_fields = kMaxCsvColumns});
  if (records.empty()) {
    throw std::runtime_error(fmt::format("{}: empty, not a CSV table", printable_text(file)));
  }
  t.header = std::move(records.front().fields);
  for (size_t i = 1; i < records.size(); ++i) {
    CsvRecord& r = records[i];
    if (r.fields.size() != t.header.size()) {
      throw std::runtime_error(fmt::format("{}:{}: expected {} fields (as the header), got {}",
                                           printable_text(file), r.line, t.header.size(),
                                           r.fields.size()));
    }
    t.rows.push_back(CsvTable::Row{static_cast<size_t>(r.line), std::move(r.fields)});
  }
  return t;
}

std::string gnuplot_literal(std::string_view text) {
  // gnuplot 5.4 reads '' inside a single-quoted string as a quote, but not right after the
  // opening quote or after another '' (so '''' is two empty strings): each quote is therefore a
  // double-quoted "'" (which holds nothing to expand), joined to the quote-free pieces by `.`.
  const std::string visible = printable_text(text);
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t quote = visible.find('\'', start);
    const size_t end = quote == std::string::npos ? visible.size() : quote;
    if (end > start || (quote == std::string::npos && out.empty())) {
      if (!out.empty()) out += '.';
      out += '\'';
      out.append(visible, start, end - start);
      out += '\'';
    }
    if (quote == std::string::npos) return out;
    if (!out.empty()) out += '.';
    out += "\"'\"";
    start = quote + 1;
  }
}

std::string printable_text(std::string_view text) {
  std::string out;
  append_printable(text, out);
  return out;
}

std::optional<double> finite_number(std::string_view field) {
  double v = 0.0;
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

/// The ranges of a line plot: y from zero, unless the values differ by less than a tenth of the
/// largest (a what-if's small change would be a flat line): then around them, said in the title;
/// a numeric x axis keeps its first and last points off the border.
std::string plot_ranges(const std::vector<double>& values, bool numeric_x, std::string& title) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const bool narrow = *hi > 0.0 && (*hi - *lo) < 0.1 * *hi;
  if (narrow) title += " (y axis not from zero)";
  return fmt::format("set yrange [{}:*]\nset offsets {}, {}, {}, {}\n", narrow ? "*" : "0",
                     numeric_x ? "graph 0.04" : "0", numeric_x ? "graph 0.04" : "0",
                     narrow ? "graph 0.15" : "0", narrow ? "graph 0.15" : "0");
}

/// The legend: right of the plot, or below it when the series names are long or many.
std::string key_placement(const std::vector<std::string>& names) {
  size_t longest = 0;
  for (const std::string& n : names)
    longest = std::max(longest, n.size());
  return longest > 28 || names.size() > 10 ? "set key below noenhanced\n" : "";
}

}  // namespace

ResultsPlots results_plots(const CsvTable& t, const std::string& x, const std::string& stem) {
  constexpr std::string_view kKind = "results table written by `upsim sweep`";
  const size_t status = required_column(t, "status", kKind);
  const size_t iteration = required_column(t, "iteration_ms", kKind);
  const std::vector<std::string> parts{"compute_ms",         "exposed_comm_ms",   "bubble_ms",
                                       "rendezvous_wait_ms", "cpu_bound_idle_ms", "other_idle_ms"};
  std::vector<size_t> part_columns;
  for (const std::string& p : parts)
    part_columns.push_back(required_column(t, p, kKind));
  const std::optional<size_t> x_column = t.find(x);
  if (!x_column) {
    std::string axes;
    for (size_t c = 1; c < status; ++c)
      axes += fmt::format("{}`{}`", axes.empty() ? "" : ", ", printable_text(t.header[c]));
    throw std::runtime_error(fmt::format("{}: no column `{}`; the axis columns are {}",
                                         printable_text(t.file), printable_text(x),
                                         axes.empty() ? "none" : axes));
  }
  const size_t xc = *x_column;
  ResultsPlots result;
  std::vector<const CsvTable::Row*> ok;
  std::vector<const std::vector<std::string>*> ok_fields;
  for (const CsvTable::Row& row : t.rows) {
    if (row.fields[status] != "ok") {
      ++result.rows_left_out;
      continue;
    }
    ok.push_back(&row);
    ok_fields.push_back(&row.fields);
  }
  if (ok.empty()) {
    throw std::runtime_error(fmt::format("{}: no row ran (status ok){}", printable_text(t.file),
                                         t.rows.empty() ? "; no rows" : ""));
  }
  // The other axis columns (between `point` and `status`) make the series, one line per
  // combination of their values in order of first appearance, except those the x value
  // determines (a zip partner of x draws no series of its own).
  std::vector<size_t> others;
  for (size_t c = 1; c < status; ++c) {
    if (c != xc) others.push_back(c);
  }
  const std::vector<size_t> split = series_columns(ok_fields, xc, others);
  std::vector<std::string> xs;
  for (const CsvTable::Row* row : ok)
    xs.push_back(row->fields[xc]);
  const std::optional<NumericAxis> axis = numeric_axis(xs);

  std::vector<size_t> series_of(ok.size());
  std::vector<size_t> category_of(ok.size());
  std::vector<double> times;
  std::vector<std::string> labels;  // bar labels: the point's x and series values
  std::vector<std::vector<double>> bars;
  std::map<std::string, size_t> series_index;
  std::vector<std::string> series_names;
  std::map<std::string, size_t> category_index;
  std::vector<std::string> categories;
  for (size_t i = 0; i < ok.size(); ++i) {
    const CsvTable::Row& row = *ok[i];
    std::string key;
    std::string values;  // the series' values alone: a bar's label (the x label names them)
    for (const size_t c : split) {
      if (!key.empty()) key += ", ";
      if (!values.empty()) values += ", ";
      key += short_column_name(t.header[c]) + '=' + short_axis_value(row.fields[c]);
      values += short_axis_value(row.fields[c]);
    }
    const std::string x_shown = short_axis_value(row.fields[xc]);
    series_of[i] = index_of(key, series_index, series_names);
    category_of[i] = index_of(x_shown, category_index, categories);
    times.push_back(number_at(t, row, iteration));
    labels.push_back(values.empty() ? x_shown : x_shown + " (" + values + ')');
    std::vector<double> bar;
    for (const size_t c : part_columns)
      bar.push_back(number_at(t, row, c));
    bars.push_back(std::move(bar));
  }

  const std::string iteration_name = stem + "_iteration";
  std::string title = stem + ": predicted iteration time";
  const std::string range = plot_ranges(times, axis.has_value(), title);
  std::string s = header(iteration_name, title);
  std::string xlabel = axis && !axis->unit.empty() ? fmt::format("{} ({})", x, axis->unit) : x;
  // The other axis columns x determines (its zip partners) change along the line too.
  std::string partners;
  for (const size_t c : others) {
    if (std::find(split.begin(), split.end(), c) == split.end()) {
      partners += (partners.empty() ? "" : ", ") + short_column_name(t.header[c]);
    }
  }
  if (!partners.empty()) xlabel += " (with " + partners + ")";
  s += fmt::format("set xlabel {} noenhanced\nset ylabel 'iteration time (ms)'\n",
                   gnuplot_literal(xlabel));
  s += key_placement(series_names);
  if (!axis) {
    s += labelled_xtics(categories);
    s += fmt::format("set xrange [-0.5:{}]\n", categories.size());
  } else if (axis->logarithmic) {
    s += "set logscale x 10\n";
  }
  std::vector<std::string> blocks(series_names.size());
  for (size_t i = 0; i < ok.size(); ++i) {
    const std::string xv = axis ? data_number(axis->values[i]) : std::to_string(category_of[i]);
    blocks[series_of[i]] += fmt::format("{} {}\n", xv, data_number(times[i]));
  }
  std::string plot = range + "plot ";
  for (size_t k = 0; k < blocks.size(); ++k) {
    s += fmt::format("$S{} << EOD\n{}EOD\n", k, blocks[k]);
    plot +=
        fmt::format("{}$S{} using 1:2 with linespoints lw 2 pt 7 title {}", k ? ", " : "", k,
                    gnuplot_literal(series_names[k].empty() ? "iteration time" : series_names[k]));
  }
  s += plot + "\n";
  result.plots.push_back(PlotScript{iteration_name, std::move(s)});

  const std::string breakdown_name = stem + "_breakdown";
  std::string b = header(breakdown_name, stem + ": slowest rank's breakdown per point");
  std::string bar_axis = x;
  if (!split.empty()) {
    std::string names;
    for (const size_t c : split)
      names += (names.empty() ? "" : ", ") + short_column_name(t.header[c]);
    bar_axis += " (" + names + ")";
  }
  b += stacked_bars(labels, parts, bars, bar_axis, "ms per iteration");
  result.plots.push_back(PlotScript{breakdown_name, std::move(b)});
  return result;
}

std::vector<PlotScript> run_plots(const CsvTable& ranks, const CsvTable* links) {
  constexpr std::string_view kRanksKind = "ranks table written by `upsim run`";
  const std::vector<std::string> parts{"compute_ms",        "exposed_communication_ms",
                                       "bubble_ms",         "rendezvous_wait_ms",
                                       "cpu_bound_idle_ms", "other_idle_ms"};
  std::vector<size_t> columns;
  for (const std::string& p : parts)
    columns.push_back(required_column(ranks, p, kRanksKind));
  const size_t name = required_column(ranks, "name", kRanksKind);
  if (ranks.rows.empty()) {
    throw std::runtime_error(fmt::format("{}: no data rows", printable_text(ranks.file)));
  }
  std::vector<std::string> labels;
  std::vector<std::vector<double>> bars;
  for (const CsvTable::Row& row : ranks.rows) {
    labels.push_back(row.fields[name]);
    std::vector<double> bar;
    for (const size_t c : columns)
      bar.push_back(number_at(ranks, row, c));
    bars.push_back(std::move(bar));
  }
  std::vector<PlotScript> plots;
  std::string s = header("ranks_breakdown", "per-rank breakdown of an iteration");
  s += stacked_bars(labels, parts, bars, "rank", "ms per iteration");
  plots.push_back(PlotScript{"ranks_breakdown", std::move(s)});
  if (links == nullptr || links->rows.empty()) return plots;

  // Link utilisation: bytes moved / (capacity x iteration time), of the busiest links of each
  // kind (the name's last parenthesis: nvlink3, nic, ...), so that a fabric's NICs show beside
  // its NVLinks; at most kLinkBars, in links.csv's order (busiest first).
  constexpr std::string_view kLinksKind = "links table written by `upsim run`";
  constexpr size_t kLinkBars = 24;
  constexpr size_t kLinksPerKind = 4;
  const size_t link_name = required_column(*links, "name", kLinksKind);
  const size_t capacity = required_column(*links, "capacity_gbytes_per_s", kLinksKind);
  const size_t moved = required_column(*links, "bytes_per_iteration", kLinksKind);
  const size_t iteration = required_column(ranks, "iteration_time_ms", kRanksKind);
  double iteration_s = 0.0;
  for (const CsvTable::Row& row : ranks.rows)
    iteration_s = std::max(iteration_s, number_at(ranks, row, iteration) * 1e-3);
  const auto kind_of = [&](const CsvTable::Row& row) {
    const std::string& n = row.fields[link_name];
    const size_t open = n.rfind('(');
    return open == std::string::npos ? std::string() : n.substr(open);
  };
  std::vector<bool> chosen(links->rows.size(), false);
  std::map<std::string, size_t> per_kind;
  size_t count = 0;
  for (size_t r = 0; r < links->rows.size() && count < kLinkBars; ++r) {
    if (per_kind[kind_of(links->rows[r])]++ < kLinksPerKind) {
      chosen[r] = true;
      ++count;
    }
  }
  for (size_t r = 0; r < links->rows.size() && count < kLinkBars; ++r) {
    if (!chosen[r]) {
      chosen[r] = true;
      ++count;
    }
  }
  // Grouped by kind (kinds in order of their busiest link), each kind busiest first.
  std::vector<size_t> order;
  std::map<std::string, size_t> kind_rank;
  for (size_t r = 0; r < links->rows.size(); ++r) {
    if (!chosen[r]) continue;
    kind_rank.try_emplace(kind_of(links->rows[r]), kind_rank.size());
    order.push_back(r);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return kind_rank[kind_of(links->rows[a])] < kind_rank[kind_of(links->rows[b])];
  });
  std::vector<std::string> link_labels;
  std::string data = "$DATA << EOD\n";
  for (const size_t r : order) {
    const CsvTable::Row& row = links->rows[r];
    const double bytes_per_s = number_at(*links, row, capacity) * 1e9;
    const double share = bytes_per_s > 0.0 && iteration_s > 0.0
                             ? number_at(*links, row, moved) / (bytes_per_s * iteration_s)
                             : 0.0;
    link_labels.push_back(row.fields[link_name]);
    data += data_number(100.0 * share) + "\n";
  }
  std::string d = header("links", fmt::format("link utilisation: bytes moved / (capacity x "
                                              "iteration), the busiest {} of each kind",
                                              kLinksPerKind));
  d += data;
  d += "EOD\nset style data histograms\nset style fill solid 0.85 border -1\nset boxwidth "
       "0.75\nset xlabel 'link'\nset ylabel 'utilisation (% of capacity, per iteration)'\n";
  d += labelled_xtics(link_labels);
  d += "set rmargin 14\nset yrange [0:*]\nset key off\nplot $DATA using 1 title 'utilisation'\n";
  plots.push_back(PlotScript{"links", std::move(d)});
  return plots;
}

}  // namespace upsim::cli
