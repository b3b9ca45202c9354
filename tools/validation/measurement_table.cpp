#include "tools/validation/measurement_table.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>

#include "sim/formats/csv.h"
#include "sim/formats/parse_error.h"
#include "sim/input_file.h"

namespace upsim::cli {

MeasurementTable::MeasurementTable(const std::filesystem::path& path) : file_(path.string()) {
  if (const auto why = input_file_problem(path, kGiB)) {
    throw WorkloadTableError(fmt::format("{}: {}", file_, *why));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WorkloadTableError(fmt::format("{}: cannot open the file", file_));
  const std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  std::vector<CsvRecord> records;
  try {
    records = read_csv(text, file_, {.skip_blank_lines = true, .comment = '#'});
  } catch (const ParseError& e) {
    throw WorkloadTableError(e.what());
  }
  if (records.empty()) throw WorkloadTableError(fmt::format("{}: no header row", file_));
  const std::vector<std::string>& header = records.front().fields;
  for (size_t i = 0; i < header.size(); ++i)
    columns_.emplace(header[i], i);
  header_line_ = static_cast<int>(records.front().line);
  for (size_t i = 1; i < records.size(); ++i)
    rows_.push_back({static_cast<int>(records[i].line), std::move(records[i].fields)});
}

const std::string& MeasurementTable::field(size_t row, const std::string& column) const {
  const auto it = columns_.find(column);
  if (it == columns_.end()) {
    throw WorkloadTableError(
        fmt::format("{}:{}: column `{}`: missing from the header", file_, header_line_, column));
  }
  const Row& r = rows_[row];
  if (it->second >= r.fields.size()) {
    throw WorkloadTableError(fmt::format("{}:{}: column `{}`: the row has only {} fields", file_,
                                         r.line, column, r.fields.size()));
  }
  return r.fields[it->second];
}

int64_t MeasurementTable::integer(size_t row, const std::string& column) const {
  const std::string& text = field(row, column);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw bad_value(row, column, text, "an integer");
  }
  return value;
}

double MeasurementTable::number(size_t row, const std::string& column) const {
  const std::string& text = field(row, column);
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() ||
      !std::isfinite(value)) {
    throw bad_value(row, column, text, "a number");
  }
  return value;
}

bool MeasurementTable::boolean(size_t row, const std::string& column) const {
  const std::string& text = field(row, column);
  if (text == "True" || text == "true") return true;
  if (text == "False" || text == "false") return false;
  throw bad_value(row, column, text, "True or False");
}

WorkloadTableError MeasurementTable::bad_value(size_t row, const std::string& column,
                                               const std::string& text,
                                               const char* expected) const {
  return WorkloadTableError(fmt::format("{}:{}: column `{}`: `{}` is not {}", file_,
                                        rows_[row].line, column, text, expected));
}

}  // namespace upsim::cli
