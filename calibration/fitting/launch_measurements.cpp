#include "calibration/fitting/launch_measurements.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string_view>

#include "calibration/fitting/kernel_measurements.h"
#include "sim/formats/csv.h"
#include "sim/formats/text.h"
#include "sim/input_file.h"

namespace upsim {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, int64_t line, std::string_view message) {
  throw CalibrationDataError(fmt::format("{}:{}: {}", path.string(), line, message));
}

}  // namespace

const LaunchQuantity* LaunchTable::find(const std::string& name, int64_t bytes) const {
  for (const LaunchQuantity& q : rows) {
    if (q.name == name && q.bytes == bytes) return &q;
  }
  return nullptr;
}

LaunchTable read_launch_csv(const std::filesystem::path& path) {
  if (const auto why = input_file_problem(path, kGiB)) {
    throw CalibrationDataError(fmt::format("{}: {}", path.string(), *why));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CalibrationDataError(fmt::format("{}: cannot open file", path.string()));
  const std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  std::vector<CsvComment> comments;
  const std::vector<CsvRecord> records =
      read_csv(text, path.string(), {.trim_blanks = true, .skip_blank_lines = true, .comment = '#'},
               comments);
  LaunchTable table;
  table.path = path;
  for (const CsvComment& comment : comments) {
    if (auto entry = csv_metadata_entry(comment.text)) table.metadata[entry->first] = entry->second;
  }
  bool header = false;
  for (const CsvRecord& record : records) {
    const std::vector<std::string>& f = record.fields;
    const int64_t number = record.line;
    if (!header) {
      if (f.size() != 3 || f[0] != "quantity" || f[1] != "bytes" || f[2] != "time_us") {
        // Not the table this reads: its line is not quoted.
        fail(path, number,
             "expected the header `quantity,bytes,time_us` (a gpu_microbench launch.csv) as the "
             "first line that is not a `#` comment; this line is not it");
      }
      header = true;
      continue;
    }
    if (f.size() != 3) {
      fail(path, number,
           fmt::format("expected 3 fields (quantity, bytes, time_us), got {}", f.size()));
    }
    LaunchQuantity q;
    q.name = std::string(f[0]);
    q.line = static_cast<int>(number);
    if (q.name.empty()) fail(path, number, "empty quantity name");
    const auto [bytes_end, bytes_ec] =
        std::from_chars(f[1].data(), f[1].data() + f[1].size(), q.bytes);
    if (bytes_ec != std::errc() || bytes_end != f[1].data() + f[1].size() || q.bytes < 0) {
      fail(path, number,
           fmt::format("bytes: expected an integer >= 0, got {}", quoted_field(f[1])));
    }
    const std::string time(f[2]);
    char* end = nullptr;
    q.time_us = std::strtod(time.c_str(), &end);
    if (time.empty() || end != time.c_str() + time.size() || !std::isfinite(q.time_us) ||
        !(q.time_us > 0.0)) {
      fail(path, number,
           fmt::format("time_us: expected a positive number, got {}", quoted_field(f[2])));
    }
    if (table.find(q.name, q.bytes) != nullptr) {
      fail(path, number,
           fmt::format("{} at {} bytes appears twice", quoted_field(q.name), q.bytes));
    }
    table.rows.push_back(std::move(q));
  }
  if (!header) {
    throw CalibrationDataError(
        fmt::format("{}: no header `quantity,bytes,time_us` (is it a gpu_microbench launch.csv?)",
                    path.string()));
  }
  return table;
}

Duration kernel_overhead_from(const LaunchTable& table) {
  const LaunchQuantity* q = table.find("empty_kernel_back_to_back");
  if (q == nullptr) {
    throw CalibrationDataError(
        fmt::format("{}: no `empty_kernel_back_to_back` row (bytes 0): the kernel floor is the "
                    "GPU time of an empty kernel launched back to back",
                    table.path.string()));
  }
  return Duration::from_us_f(q->time_us);
}

}  // namespace upsim
