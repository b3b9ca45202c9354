// A measurement table of test/data read strictly: a CSV file (sim/formats/csv.h) with a header
// row, '#' comment lines and empty lines skipped; every value read names file:line and column
// when it is missing or malformed (WorkloadTableError).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/validation/published_tables.h"

namespace upsim::cli {

/// A CSV table with a header row. Malformed quoting is a WorkloadTableError with the
/// ParseError's message (file:line:column); so is a file that cannot be read or has no header.
class MeasurementTable {
 public:
  explicit MeasurementTable(const std::filesystem::path& path);

  size_t size() const { return rows_.size(); }
  int line(size_t row) const { return rows_[row].line; }
  bool has(const std::string& column) const { return columns_.count(column) > 0; }

  /// The field of `column` in `row`; a missing column or a short row names file:line.
  const std::string& field(size_t row, const std::string& column) const;
  /// The field as an integer, a finite number, or a boolean (True / true, False / false).
  int64_t integer(size_t row, const std::string& column) const;
  double number(size_t row, const std::string& column) const;
  bool boolean(size_t row, const std::string& column) const;

  /// "<file>:<line>: column `<column>`: `<text>` is not <expected>".
  WorkloadTableError bad_value(size_t row, const std::string& column, const std::string& text,
                               const char* expected) const;
  const std::string& file() const { return file_; }

 private:
  struct Row {
    int line;
    std::vector<std::string> fields;
  };
  std::string file_;
  int header_line_ = 0;
  std::unordered_map<std::string, size_t> columns_;
  std::vector<Row> rows_;
};

}  // namespace upsim::cli
