#include "tools/run_folder_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

#include "sim/formats/json_reader.h"
#include "sim/input_file.h"
#include "tools/input_text.h"
#include "tools/plot_script.h"
#include "tools/run_tables.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

// A summary.json has a few KB per rank and per link; ops.csv a row per distinct op and kernel.
constexpr std::uintmax_t kMaxSummaryBytes = 64 * kMiB;
constexpr std::uintmax_t kMaxOpsBytes = 256 * kMiB;

/// Each known key of one object once: a second one is an error at its position.
class SeenKeys {
 public:
  void add(JsonCursor& cursor, std::string_view key, std::string_view where) {
    if (!seen_.emplace(key).second) {
      cursor.fail(fmt::format("`{}{}` appears twice", where, key));
    }
  }
  bool has(std::string_view key) const { return seen_.count(std::string(key)) > 0; }

 private:
  std::set<std::string, std::less<>> seen_;
};

std::string string_value(JsonCursor& cursor, std::string_view key) {
  if (cursor.peek() != JsonType::kString) cursor.fail(fmt::format("`{}`: expected a string", key));
  return std::string(cursor.string());
}

double finite_value(JsonCursor& cursor, std::string_view key) {
  if (cursor.peek() != JsonType::kNumber) cursor.fail(fmt::format("`{}`: expected a number", key));
  const double v = cursor.real();
  if (!std::isfinite(v)) cursor.fail(fmt::format("`{}`: expected a finite number", key));
  return v;
}

void expect_object(JsonCursor& cursor, std::string_view key) {
  if (cursor.peek() != JsonType::kObject) cursor.fail(fmt::format("`{}`: expected an object", key));
  cursor.begin_object();
}

void expect_array(JsonCursor& cursor, std::string_view key) {
  if (cursor.peek() != JsonType::kArray) cursor.fail(fmt::format("`{}`: expected an array", key));
  cursor.begin_array();
}

std::runtime_error missing(const std::string& file, std::string_view key) {
  return std::runtime_error(fmt::format("{}: no `{}` (a summary.json of schema version {} has it)",
                                        printable_text(file), key, kSummarySchemaVersion));
}

void read_scenario(JsonCursor& cursor, RunSummaryFields& s, const std::string& file) {
  expect_object(cursor, "scenario");
  SeenKeys seen;
  std::string_view key;
  while (cursor.next_member(key)) {
    if (key == "name") {
      seen.add(cursor, key, "scenario.");
      s.scenario_name = string_value(cursor, "scenario.name");
    } else if (key == "overrides") {
      seen.add(cursor, key, "scenario.");
      expect_array(cursor, "scenario.overrides");
      while (cursor.next_element())
        s.overrides.push_back(string_value(cursor, "scenario.overrides[]"));
    } else {
      cursor.skip();
    }
  }
  for (const char* k : {"name", "overrides"}) {
    if (!seen.has(k)) throw missing(file, std::string("scenario.") + k);
  }
}

void read_platform(JsonCursor& cursor, RunSummaryFields& s, const std::string& file) {
  expect_object(cursor, "platform");
  SeenKeys seen;
  std::string_view key;
  while (cursor.next_member(key)) {
    if (key == "gpus") {
      seen.add(cursor, key, "platform.");
      if (cursor.peek() != JsonType::kNumber) cursor.fail("`platform.gpus`: expected an integer");
      s.gpus = cursor.integer();
    } else if (key == "gpu") {
      seen.add(cursor, key, "platform.");
      s.gpu = string_value(cursor, "platform.gpu");
    } else {
      cursor.skip();
    }
  }
  for (const char* k : {"gpus", "gpu"}) {
    if (!seen.has(k)) throw missing(file, std::string("platform.") + k);
  }
}

/// A number, or nullopt for null.
std::optional<double> number_or_null(JsonCursor& cursor, std::string_view key) {
  if (cursor.peek() == JsonType::kNull) {
    cursor.skip();
    return std::nullopt;
  }
  return finite_value(cursor, key);
}

/// `throughput`: null, or {unit, per_s, mfu, hfu, ...} (the other members are skipped).
void read_throughput(JsonCursor& cursor, RunSummaryFields& s) {
  if (cursor.peek() == JsonType::kNull) {
    cursor.skip();
    return;
  }
  expect_object(cursor, "throughput");
  std::string_view key;
  while (cursor.next_member(key)) {
    if (key == "unit") {
      s.throughput_unit = string_value(cursor, "throughput.unit");
    } else if (key == "per_s") {
      s.throughput_per_s = finite_value(cursor, "throughput.per_s");
    } else if (key == "mfu") {
      s.mfu = number_or_null(cursor, "throughput.mfu");
    } else if (key == "hfu") {
      s.hfu = number_or_null(cursor, "throughput.hfu");
    } else {
      cursor.skip();
    }
  }
}

RankTimes read_rank(JsonCursor& cursor, size_t index, const std::string& file) {
  const std::string where = fmt::format("ranks[{}]", index);
  expect_object(cursor, where);
  RankTimes r;
  SeenKeys seen;
  std::string_view key;
  while (cursor.next_member(key)) {
    if (key == "name") {
      seen.add(cursor, key, where + ".");
      r.name = string_value(cursor, where + ".name");
      continue;
    }
    size_t field = 0;
    while (field < kRankTimeFields.size() && key != kRankTimeFields[field])
      ++field;
    if (field == kRankTimeFields.size()) {
      cursor.skip();
      continue;
    }
    seen.add(cursor, key, where + ".");
    r.ms[field] = finite_value(cursor, where + "." + kRankTimeFields[field]);
  }
  if (!seen.has("name")) throw missing(file, where + ".name");
  for (const char* k : kRankTimeFields) {
    if (!seen.has(k)) throw missing(file, where + "." + k);
  }
  return r;
}

}  // namespace

RunSummaryFields parse_run_summary(std::string_view text, const std::string& file) {
  JsonCursor cursor(text, file);
  RunSummaryFields s;
  const auto not_a_summary = [&] {
    return std::runtime_error(
        fmt::format("{}: not an upsim.summary of schema version {} (written by another upsim?)",
                    printable_text(file), kSummarySchemaVersion));
  };
  // Anything but an object is not a summary, said without reading on (or quoting it).
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') throw not_a_summary();
  cursor.begin_object();
  SeenKeys seen;
  std::optional<std::string> schema;
  std::optional<int64_t> version;
  std::string_view key;
  while (cursor.next_member(key)) {
    const std::string name(key);
    if (name == "schema") {
      seen.add(cursor, name, "");
      if (cursor.peek() == JsonType::kString) {
        schema = std::string(cursor.string());
      } else {
        cursor.skip();
      }
    } else if (name == "schema_version") {
      seen.add(cursor, name, "");
      if (cursor.peek() == JsonType::kNumber) {
        version = cursor.integer();
      } else {
        cursor.skip();
      }
    } else if (name == "scenario") {
      seen.add(cursor, name, "");
      read_scenario(cursor, s, file);
    } else if (name == "platform") {
      seen.add(cursor, name, "");
      read_platform(cursor, s, file);
    } else if (name == "predicted_iteration_time_ms") {
      seen.add(cursor, name, "");
      s.predicted_iteration_time_ms = finite_value(cursor, name);
    } else if (name == "throughput") {
      seen.add(cursor, name, "");
      read_throughput(cursor, s);
    } else if (name == "ranks") {
      seen.add(cursor, name, "");
      expect_array(cursor, name);
      while (cursor.next_element())
        s.ranks.push_back(read_rank(cursor, s.ranks.size(), file));
    } else {
      cursor.skip();
    }
  }
  if (!cursor.at_end()) cursor.fail("text after the summary object");
  if (schema != "upsim.summary" || version != kSummarySchemaVersion) throw not_a_summary();
  for (const char* k : {"scenario", "platform", "predicted_iteration_time_ms", "ranks"}) {
    if (!seen.has(k)) throw missing(file, k);
  }
  return s;
}

OpTable parse_ops_table(std::string_view text, const std::string& file) {
  const CsvTable t = parse_csv_table(text, file);
  std::array<size_t, 5> c{};
  const std::array<const char*, 5> names{"kind", "op", "name", "count_per_iteration",
                                         "time_ms_per_iteration"};
  for (size_t i = 0; i < names.size(); ++i) {
    const auto found = t.find(names[i]);
    if (!found) {
      throw std::runtime_error(
          fmt::format("{}: not an ops table written by `upsim run` (no column `{}`)",
                      printable_text(file), names[i]));
    }
    c[i] = *found;
  }
  OpTable ops;
  for (const CsvTable::Row& row : t.rows) {
    const std::vector<std::string>& f = row.fields;
    const auto number = [&](size_t column) {
      if (const auto v = finite_number(f[column])) return *v;
      throw std::runtime_error(fmt::format("{}:{}: column `{}`: expected a finite number",
                                           printable_text(file), row.line, t.header[column]));
    };
    const OpTimes times{number(c[4]), number(c[3])};
    if (!ops.emplace(OpKey{f[c[0]], f[c[1]], f[c[2]]}, times).second) {
      throw std::runtime_error(fmt::format("{}:{}: a second row for the same kind, op and name",
                                           printable_text(file), row.line));
    }
  }
  return ops;
}

RunFolder read_run_folder(const fs::path& dir) {
  const auto read = [](const fs::path& file, std::uintmax_t max_bytes) {
    std::string text;
    if (const auto why = read_input_text(file, max_bytes, text)) {
      throw std::runtime_error(fmt::format("{}: cannot read ({}; no run results here?)",
                                           printable_text(file.string()), *why));
    }
    return text;
  };
  RunFolder r;
  r.dir = dir;
  const fs::path summary = dir / "summary.json";
  r.summary = parse_run_summary(read(summary, kMaxSummaryBytes), summary.string());
  const fs::path ops = dir / "ops.csv";
  r.ops = parse_ops_table(read(ops, kMaxOpsBytes), ops.string());
  return r;
}

}  // namespace upsim::cli
