#include "tools/diff_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/run_tables.h"
#include "workloads/trace/json_reader.h"
#include "workloads/trace/trace_error.h"

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f)
    throw std::runtime_error(fmt::format("{}: cannot read (no run results here?)", p.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct OpRow {
  double ms = 0.0;
  double count = 0.0;
};
using OpKey = std::tuple<std::string, std::string, std::string>;  // kind, op, name

struct Run {
  fs::path dir;
  JsonValue summary;
  std::map<OpKey, OpRow> ops;
};

Run read_run(const fs::path& dir) {
  Run r;
  r.dir = dir;
  const fs::path json_file = dir / "summary.json";
  const std::string text = read_text(json_file);
  try {
    JsonCursor cursor(text, json_file.string());
    r.summary = read_json_value(cursor);
  } catch (const TraceError& e) {
    throw std::runtime_error(e.what());
  }
  const JsonValue* version = r.summary.find("schema_version");
  if (!r.summary.is_object() || r.summary.find("schema") == nullptr ||
      r.summary.find("schema")->string != "upsim.summary" || version == nullptr ||
      !version->is_number() || version->integer != kSummarySchemaVersion) {
    throw std::runtime_error(
        fmt::format("{}: not an upsim.summary of schema version {} (written by another upsim?)",
                    json_file.string(), kSummarySchemaVersion));
  }
  const fs::path ops_file = dir / "ops.csv";
  std::istringstream in(read_text(ops_file));
  std::string line;
  std::getline(in, line);  // header
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    const std::vector<std::string> f = parse_csv_line(line);
    if (f.size() != 6) {
      throw std::runtime_error(fmt::format("{}:{}: expected 6 fields, got {}", ops_file.string(),
                                           line_number, f.size()));
    }
    try {
      r.ops[{f[0], f[1], f[2]}] = OpRow{std::stod(f[4]), std::stod(f[3])};
    } catch (const std::exception&) {
      throw std::runtime_error(
          fmt::format("{}:{}: count and time must be numbers", ops_file.string(), line_number));
    }
  }
  return r;
}

double number_at(const JsonValue& v, std::string_view key) {
  const JsonValue* x = v.find(key);
  return x != nullptr && x->is_number() ? x->number : 0.0;
}

std::string string_at(const JsonValue& v, std::string_view key) {
  const JsonValue* x = v.find(key);
  return x != nullptr && x->is_string() ? x->string : "";
}

/// The slowest rank of a summary (first of equals).
const JsonValue* slowest_rank(const JsonValue& summary) {
  const JsonValue* ranks = summary.find("ranks");
  if (ranks == nullptr || ranks->items.empty()) return nullptr;
  const JsonValue* best = &ranks->items.front();
  for (const JsonValue& r : ranks->items) {
    if (number_at(r, "iteration_time_ms") > number_at(*best, "iteration_time_ms")) best = &r;
  }
  return best;
}

std::string identity(const Run& r) {
  const JsonValue& s = r.summary;
  const JsonValue* scenario = s.find("scenario");
  const JsonValue* platform = s.find("platform");
  std::string overrides;
  if (scenario != nullptr && scenario->find("overrides") != nullptr) {
    for (const JsonValue& o : scenario->find("overrides")->items)
      overrides += (overrides.empty() ? " --set " : " --set ") + o.string;
  }
  return fmt::format("{} ({}{}) on {} x {}", r.dir.string(),
                     scenario ? string_at(*scenario, "name") : "", overrides,
                     platform ? static_cast<int64_t>(number_at(*platform, "gpus")) : 0,
                     platform ? string_at(*platform, "gpu") : "");
}

std::string change(double a, double b) {
  if (a == 0.0) return b == 0.0 ? "" : "new";
  return fmt::format("{:+.2f}%", 100.0 * (b / a - 1.0));
}

}  // namespace

int diff_main(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<std::string> runs;
  std::string csv_file;
  bool force = false;
  int top = 20;
  po::options_description desc(
      "usage: upsim diff RUN_A RUN_B [options]\n\n"
      "Compares two `upsim run` output folders (their summary.json and ops.csv): the predicted\n"
      "iteration times, the slowest rank's breakdown side by side, and the ops and kernels\n"
      "whose time per iteration changed most.\n\noptions");
  desc.add_options()("help,h", "this help")                                                       //
      ("top", po::value<int>(&top)->default_value(20), "op / kernel rows to print")               //
      ("csv", po::value<std::string>(&csv_file), "write every op / kernel row's change to FILE")  //
      ("force", po::bool_switch(&force), "overwrite an existing --csv file");
  po::options_description hidden;
  hidden.add_options()("runs", po::value<std::vector<std::string>>(&runs));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("runs", 2);
  po::variables_map vm;
  if (!parse_command_line(args, all, out, vm, &positional, &desc)) return 0;
  if (runs.size() != 2) throw po::error("upsim diff: give two run folders, RUN_A and RUN_B");
  if (top < 0) throw po::error("--top must not be negative");

  const Run a = read_run(runs[0]);
  const Run b = read_run(runs[1]);
  out << "A: " << identity(a) << "\n";
  out << "B: " << identity(b) << "\n";
  const double a_ms = number_at(a.summary, "predicted_iteration_time_ms");
  const double b_ms = number_at(b.summary, "predicted_iteration_time_ms");
  out << fmt::format("predicted iteration time: A {:.4f} ms, B {:.4f} ms, change {:+.4f} ms ({})\n",
                     a_ms, b_ms, b_ms - a_ms, change(a_ms, b_ms));

  const JsonValue* ra = slowest_rank(a.summary);
  const JsonValue* rb = slowest_rank(b.summary);
  if (ra != nullptr && rb != nullptr) {
    out << fmt::format("slowest rank: A {}, B {} (ms per iteration)\n", string_at(*ra, "name"),
                       string_at(*rb, "name"));
    out << fmt::format("  {:<26} {:>12} {:>12} {:>12} {:>9}\n", "part", "A", "B", "B - A",
                       "change");
    for (const char* part : {"iteration_time_ms", "compute_ms", "communication_ms",
                             "exposed_communication_ms", "bubble_ms", "rendezvous_wait_ms",
                             "cpu_bound_idle_ms", "other_idle_ms", "collective_wait_ms"}) {
      const double x = number_at(*ra, part);
      const double y = number_at(*rb, part);
      out << fmt::format("  {:<26} {:>12.4f} {:>12.4f} {:>+12.4f} {:>9}\n", part, x, y, y - x,
                         change(x, y));
    }
  }

  struct Delta {
    OpKey key;
    OpRow a;
    OpRow b;
  };
  std::vector<Delta> deltas;
  for (const auto& [key, row] : a.ops) {
    const auto it = b.ops.find(key);
    deltas.push_back(Delta{key, row, it == b.ops.end() ? OpRow{} : it->second});
  }
  for (const auto& [key, row] : b.ops) {
    if (!a.ops.count(key)) deltas.push_back(Delta{key, OpRow{}, row});
  }
  std::stable_sort(deltas.begin(), deltas.end(), [](const Delta& x, const Delta& y) {
    const double dx = std::fabs(x.b.ms - x.a.ms);
    const double dy = std::fabs(y.b.ms - y.a.ms);
    if (dx != dy) return dx > dy;
    return x.key < y.key;
  });
  // Per task kind and op (the op family), over its kernels and calls.
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> by_op;
  for (const Delta& d : deltas) {
    auto& [ms_a, ms_b] = by_op[{std::get<0>(d.key), std::get<1>(d.key)}];
    ms_a += d.a.ms;
    ms_b += d.b.ms;
  }
  std::vector<std::pair<std::pair<std::string, std::string>, std::pair<double, double>>> ops(
      by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) {
    return std::fabs(x.second.second - x.second.first) >
           std::fabs(y.second.second - y.second.first);
  });
  out << fmt::format(
      "largest changes per op (ms per iteration, summed over ranks and kernels; {} "
      "of {} ops):\n",
      std::min<size_t>(static_cast<size_t>(top), ops.size()), ops.size());
  out << fmt::format("  {:<12} {:<50} {:>10} {:>10} {:>10} {:>9}\n", "kind", "op", "A", "B",
                     "B - A", "change");
  for (size_t i = 0; i < ops.size() && i < static_cast<size_t>(top); ++i) {
    const auto& [key, times] = ops[i];
    out << fmt::format("  {:<12} {:<50} {:>10.4f} {:>10.4f} {:>+10.4f} {:>9}\n", key.first,
                       key.second.size() > 50 ? key.second.substr(0, 47) + "..." : key.second,
                       times.first, times.second, times.second - times.first,
                       change(times.first, times.second));
  }
  out << fmt::format(
      "largest changes per op and kernel (ms per iteration, summed over ranks; {} of {} rows):\n",
      std::min<size_t>(static_cast<size_t>(top), deltas.size()), deltas.size());
  out << fmt::format("  {:<12} {:<40} {:<40} {:>10} {:>10} {:>10} {:>9}\n", "kind", "op", "name",
                     "A", "B", "B - A", "change");
  for (size_t i = 0; i < deltas.size() && i < static_cast<size_t>(top); ++i) {
    const Delta& d = deltas[i];
    const auto clip = [](const std::string& s) {
      return s.size() > 40 ? s.substr(0, 37) + "..." : s;
    };
    out << fmt::format("  {:<12} {:<40} {:<40} {:>10.4f} {:>10.4f} {:>+10.4f} {:>9}\n",
                       std::get<0>(d.key), clip(std::get<1>(d.key)), clip(std::get<2>(d.key)),
                       d.a.ms, d.b.ms, d.b.ms - d.a.ms, change(d.a.ms, d.b.ms));
  }
  if (!csv_file.empty()) {
    if (!force && fs::exists(fs::symlink_status(csv_file))) {
      throw std::runtime_error(fmt::format(
          "{} already exists; upsim does not overwrite files unasked: pass --force", csv_file));
    }
    std::string csv = "kind,op,name,a_ms,b_ms,delta_ms,a_count,b_count\n";
    for (const Delta& d : deltas) {
      csv += fmt::format("{},{},{},{},{},{},{},{}\n", csv_field(std::get<0>(d.key)),
                         csv_field(std::get<1>(d.key)), csv_field(std::get<2>(d.key)), d.a.ms,
                         d.b.ms, d.b.ms - d.a.ms, d.a.count, d.b.count);
    }
    write_file_atomically(csv_file, csv);
    out << "all rows: " << csv_file << "\n";
  }
  return 0;
}

}  // namespace upsim::cli
