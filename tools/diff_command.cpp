#include "tools/diff_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/run_folder_reader.h"
#include "tools/run_tables.h"

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

/// The slowest rank of a summary (first of equals).
const RankTimes* slowest_rank(const RunSummaryFields& summary) {
  if (summary.ranks.empty()) return nullptr;
  const RankTimes* best = &summary.ranks.front();
  for (const RankTimes& r : summary.ranks) {
    if (r.ms[0] > best->ms[0]) best = &r;
  }
  return best;
}

std::string identity(const RunFolder& r) {
  const RunSummaryFields& s = r.summary;
  std::string overrides;
  for (const std::string& o : s.overrides)
    overrides += " --set " + o;
  return fmt::format("{} ({}{}) on {} x {}", r.dir.string(), s.scenario_name, overrides, s.gpus,
                     s.gpu);
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

  const RunFolder a = read_run_folder(runs[0]);
  const RunFolder b = read_run_folder(runs[1]);
  out << "A: " << identity(a) << "\n";
  out << "B: " << identity(b) << "\n";
  const double a_ms = a.summary.predicted_iteration_time_ms;
  const double b_ms = b.summary.predicted_iteration_time_ms;
  out << fmt::format("predicted iteration time: A {:.4f} ms, B {:.4f} ms, change {:+.4f} ms ({})\n",
                     a_ms, b_ms, b_ms - a_ms, change(a_ms, b_ms));
  // Throughput and utilisation, where both runs state them in the same unit.
  if (!a.summary.throughput_unit.empty() &&
      a.summary.throughput_unit == b.summary.throughput_unit) {
    const double x = a.summary.throughput_per_s;
    const double y = b.summary.throughput_per_s;
    std::string line =
        fmt::format("throughput: A {:.6g} {}/s, B {:.6g} {}/s ({})", x, a.summary.throughput_unit,
                    y, b.summary.throughput_unit, change(x, y));
    const auto percent = [](const std::optional<double>& v) {
      return fmt::format("{:.1f}%", 100.0 * *v);
    };
    if (a.summary.mfu && b.summary.mfu) {
      line += fmt::format("; MFU A {}, B {}", percent(a.summary.mfu), percent(b.summary.mfu));
    }
    if (a.summary.hfu && b.summary.hfu) {
      line += fmt::format("; HFU A {}, B {}", percent(a.summary.hfu), percent(b.summary.hfu));
    }
    out << line << "\n";
  }

  const RankTimes* ra = slowest_rank(a.summary);
  const RankTimes* rb = slowest_rank(b.summary);
  if (ra != nullptr && rb != nullptr) {
    out << fmt::format("slowest rank: A {}, B {} (ms per iteration)\n", ra->name, rb->name);
    out << fmt::format("  {:<26} {:>12} {:>12} {:>12} {:>9}\n", "part", "A", "B", "B - A",
                       "change");
    for (size_t p = 0; p < kRankTimeFields.size(); ++p) {
      const double x = ra->ms[p];
      const double y = rb->ms[p];
      out << fmt::format("  {:<26} {:>12.4f} {:>12.4f} {:>+12.4f} {:>9}\n", kRankTimeFields[p], x,
                         y, y - x, change(x, y));
    }
  }

  struct Delta {
    OpKey key;
    OpTimes a;
    OpTimes b;
  };
  std::vector<Delta> deltas;
  for (const auto& [key, row] : a.ops) {
    const auto it = b.ops.find(key);
    deltas.push_back(Delta{key, row, it == b.ops.end() ? OpTimes{} : it->second});
  }
  for (const auto& [key, row] : b.ops) {
    if (!a.ops.count(key)) deltas.push_back(Delta{key, OpTimes{}, row});
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
