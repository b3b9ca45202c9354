#include "tools/sweep_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/export/op_profile.h"
#include "sim/export/run_summary.h"
#include "sim/parallel.h"
#include "tools/command_line.h"
#include "tools/output_folder.h"
#include "tools/plot_command.h"
#include "tools/results_hdf5.h"
#include "tools/run_tables.h"
#include "tools/steady_state.h"
#ifdef UPSIM_HAVE_MPI
#include "tools/sweep_mpi.h"
#endif

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

constexpr const char* kResultsFile = "results.csv";
constexpr const char* kResultsHdf5File = "results.h5";
constexpr const char* kManifestFile = "study.points";
constexpr const char* kPointsDir = "points";

/// One grid dimension: keys that advance together (one key for an axis, several for a zip
/// entry) and their values, values[v][k] for key k at step v.
struct Dimension {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;   ///< as written (the table's text)
  std::vector<std::vector<std::string>> applied;  ///< as applied (files made absolute)
};

struct Study {
  std::string name;
  /// --point-outputs: each point's own results (summary.txt, summary.json, CSV tables, the
  /// resolved scenario) in points/<n>/; empty: none.
  fs::path point_outputs;
  fs::path base;
  /// `set`: overrides applied at every point, before the point's own (as applied).
  std::vector<std::string> fixed;
  std::vector<Dimension> dims;
  bool fits_memory = false;
};

struct Point {
  size_t index = 0;
  std::vector<std::string> overrides;  ///< "key=value", as applied
  std::vector<std::string> columns;    ///< each key's value as written, in column order
};

/// `text` as the file it names relative to `dir` (absolute), when that is an existing regular
/// file and `text` is a relative path; otherwise `text`.
std::string resolve_value(const std::string& text, const fs::path& dir) {
  if (text.empty() || text.find_first_of("{}[]\n") != std::string::npos) return text;
  const fs::path p(text);
  if (p.is_absolute()) return text;
  std::error_code ec;
  if (!fs::is_regular_file(dir / p, ec)) return text;
  return fs::absolute(dir / p, ec).lexically_normal().string();
}

std::vector<std::string> values_of(const ConfigNode& list) {
  if (!list.is_sequence() || list.items().empty()) {
    list.fail("expected a non-empty list of values, e.g. [2048, 4096]");
  }
  std::vector<std::string> out;
  for (const ConfigNode& v : list.items()) {
    if (!v.is_scalar()) {
      v.fail(
          "a value is a YAML scalar; write a map or list as YAML text in a string, e.g. "
          "\"{model: seed_curve}\"");
    }
    out.push_back(v.as_string());
  }
  return out;
}

/// The study of `doc`, read from `file` (its name and relative paths).
Study read_study(ConfigDocument& doc, const fs::path& file) {
  const ConfigNode root = doc.root();
  Study s;
  s.name = root.get_string_or("study", file.stem().string());
  s.base = root.get_path("base");
  std::error_code ec;
  if (!fs::is_regular_file(s.base, ec)) {
    root.child("base").fail(
        fmt::format("no scenario file `{}` (a path relative to the study)", s.base.string()));
  }
  const fs::path dir = file.parent_path();
  const auto add = [&](const std::vector<std::pair<std::string, ConfigNode>>& entries,
                       const ConfigNode& where) {
    Dimension d;
    size_t steps = 0;
    for (const auto& [key, list] : entries) {
      const std::vector<std::string> values = values_of(list);
      if (d.keys.empty()) {
        steps = values.size();
        d.values.assign(steps, {});
        d.applied.assign(steps, {});
      } else if (values.size() != steps) {
        list.fail(
            fmt::format("zipped lists advance together, so they must be as long: `{}` has "
                        "{} values, `{}` {}",
                        d.keys.front(), steps, key, values.size()));
      }
      d.keys.push_back(key);
      for (size_t v = 0; v < steps; ++v) {
        d.values[v].push_back(values[v]);
        d.applied[v].push_back(resolve_value(values[v], dir));
      }
    }
    if (d.keys.empty()) where.fail("needs at least one key with a list of values");
    s.dims.push_back(std::move(d));
  };
  if (root.has("set")) {
    const ConfigNode set = root.child("set");
    if (!set.is_map()) set.fail("expected a map of key path -> value applied at every point");
    for (const auto& [key, value] : set.map_entries()) {
      if (!value.is_scalar()) {
        value.fail("a value is a YAML scalar; write a map or list as YAML text in a string");
      }
      std::string assignment = key;
      assignment += '=';
      assignment += resolve_value(value.as_string(), dir);
      s.fixed.push_back(std::move(assignment));
    }
  }
  if (root.has("axes")) {
    const ConfigNode axes = root.child("axes");
    if (!axes.is_map()) axes.fail("expected a map of key path -> list of values");
    for (const auto& entry : axes.map_entries())
      add({entry}, axes);
  }
  if (root.has("zip")) {
    const ConfigNode zip = root.child("zip");
    if (!zip.is_sequence()) zip.fail("expected a list of maps of key path -> list of values");
    for (const ConfigNode& group : zip.items()) {
      if (!group.is_map()) group.fail("expected a map of key path -> list of values");
      add(group.map_entries(), group);
    }
  }
  if (s.dims.empty()) root.fail("a study needs `axes` or `zip`: the overrides its points vary");
  s.fits_memory = root.get_bool_or("fits_memory", false);
  doc.check_all_keys_used();
  return s;
}

/// The number of points of `s`: the product of its dimensions' lengths, at most 2^20.
size_t point_count(const Study& s) {
  size_t total = 1;
  for (const Dimension& d : s.dims) {
    if (d.values.size() > 0 && total > (size_t{1} << 20) / d.values.size()) {
      throw std::invalid_argument("the study has more than 1048576 points");
    }
    total *= d.values.size();
  }
  return total;
}

std::vector<Point> points_of(const Study& s) {
  const size_t total = point_count(s);
  std::vector<Point> out;
  std::vector<size_t> step(s.dims.size(), 0);
  for (size_t i = 0; i < total; ++i) {
    Point p;
    p.index = i;
    p.overrides = s.fixed;
    for (size_t d = 0; d < s.dims.size(); ++d) {
      const Dimension& dim = s.dims[d];
      for (size_t k = 0; k < dim.keys.size(); ++k) {
        std::string assignment = dim.keys[k];
        assignment += '=';
        assignment += dim.applied[step[d]][k];
        p.overrides.push_back(std::move(assignment));
        p.columns.push_back(dim.values[step[d]][k]);
      }
    }
    out.push_back(std::move(p));
    for (size_t d = s.dims.size(); d-- > 0;) {  // the last dimension fastest
      if (++step[d] < s.dims[d].values.size()) break;
      step[d] = 0;
    }
  }
  return out;
}

std::string ms(Duration d) {
  return format_ms(d);
}

constexpr std::array<const char*, 13> kResultColumns{"status",
                                                     "iteration_ms",
                                                     "compute_ms",
                                                     "communication_ms",
                                                     "exposed_comm_ms",
                                                     "bubble_ms",
                                                     "rendezvous_wait_ms",
                                                     "cpu_bound_idle_ms",
                                                     "other_idle_ms",
                                                     "memory_bytes_per_gpu",
                                                     "busiest_link",
                                                     "busiest_link_busy_ms",
                                                     "message"};

/// The result fields of a point after its axis values (kResultColumns).
std::string result_fields(const Point& point, const Study& study) {
  try {
    ConfigDocument doc = ConfigDocument::load_file(study.base);
    for (const std::string& o : point.overrides)
      doc.apply_override(o);
    if (study.fits_memory) doc.apply_override("platform.memory_check=warn");
    std::unique_ptr<OpProfileObserver> ops;
    const SteadyRun run =
        run_to_steady_state(doc, [&](const Scenario& scenario, GraphExecutor& executor) {
          if (study.point_outputs.empty()) return;
          ops = std::make_unique<OpProfileObserver>(scenario.warmup_iterations,
                                                    scenario.measured_iterations);
          executor.add_observer(ops.get());
        });
    const RunSummary& s = run.summary;
    const Scenario& sc = run.scenario;
    if (!study.point_outputs.empty()) {
      const fs::path own = study.point_outputs / std::to_string(point.index);
      fs::create_directories(own);
      write_file_atomically(own / "summary.txt", sc.description + format_run_summary(s));
      write_file_atomically(
          own / "summary.json",
          summary_json(RunIdentity{study.base.string(), point.overrides}, sc, s, run.stats));
      write_file_atomically(own / "ranks.csv", ranks_csv(s));
      write_file_atomically(own / "links.csv", links_csv(s));
      const uint32_t measured = s.ranks.empty() ? 1 : s.ranks.front().measured_iterations;
      write_file_atomically(own / "ops.csv", ops_csv(ops->rows(), measured));
      write_file_atomically(own / "scenario.yaml", doc.resolved_yaml());
    }
    const int64_t memory = sc.memory ? sc.memory->total_bytes() : 0;
    if (study.fits_memory && sc.memory && memory > sc.platform.gpu_memory_bytes) {
      return fmt::format(
          "skipped,,,,,,,,,{},,,{}", memory,
          csv_field(fmt::format("needs {} bytes of GPU memory per GPU, the {} "
                                "has {}",
                                memory, sc.platform.gpu, sc.platform.gpu_memory_bytes)));
    }
    const RankBreakdown* slowest = &s.ranks.front();
    for (const RankBreakdown& r : s.ranks) {
      if (r.iteration_time == s.predicted_iteration_time) {
        slowest = &r;
        break;
      }
    }
    const auto per_it = [&](Duration total) {
      return ms(total / static_cast<int64_t>(std::max<uint32_t>(1, slowest->measured_iterations)));
    };
    std::string link;
    std::string link_ms;
    if (!s.links.empty()) {
      link = csv_field(s.links.front().name);
      link_ms =
          ms(s.links.front().busy / static_cast<int64_t>(std::max<uint32_t>(1, s.iterations)));
    }
    return fmt::format("ok,{},{},{},{},{},{},{},{},{},{},{},", ms(s.predicted_iteration_time),
                       per_it(slowest->compute_busy), per_it(slowest->communication),
                       per_it(slowest->exposed_communication), per_it(slowest->bubble),
                       per_it(slowest->rendezvous_wait), per_it(slowest->cpu_bound_idle),
                       per_it(slowest->other_idle), sc.memory ? std::to_string(memory) : "", link,
                       link_ms);
  } catch (const std::exception& e) {
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    std::string row = "failed,,,,,,,,,,,,";
    row += csv_field(message);
    return row;
  }
}

/// A point's results-table row: its number, axis values and results, with its newline.
std::string row_of(const Point& p, const Study& study) {
  std::string row = fmt::format("{}", p.index);
  for (const std::string& c : p.columns) {
    row += ',';
    row += csv_field(c);
  }
  row += ',';
  row += result_fields(p, study);
  row += '\n';
  return row;
}

std::string point_identity(const Point& p) {
  std::string out;
  for (const std::string& o : p.overrides) {
    for (const char c : o)
      out += c == '\n' ? ' ' : c;
    out += '\t';
  }
  return out;
}

std::string read_whole(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

size_t study_point_count(ConfigDocument& doc, const std::filesystem::path& file) {
  return point_count(read_study(doc, file));
}

int sweep_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string study_file;
  std::string out_dir_text;
  bool force = false;
  int jobs = 1;
  std::string plot_axis;
  bool point_outputs = false;
  po::options_description desc(
      "usage: upsim sweep STUDY.yaml [options]\n\n"
      "Runs a base scenario at every point of a grid of overrides (`axes`: every combination;\n"
      "`zip`: lists that advance together) and writes one results table, results.csv: per\n"
      "point its axis values, status, iteration time and the slowest rank's breakdown (ms per\n"
      "iteration), per-GPU memory and the busiest link. A killed sweep resumes where it\n"
      "stopped (finished points are not run again). The study file's schema is in\n"
      "tools/sweep_command.h; examples in configs/studies/.\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("out,o", po::value<std::string>(&out_dir_text),
       "results folder (default upsim-out/<study>/; resumed when it holds this study)")  //
      ("jobs,j", po::value<int>(&jobs)->default_value(1), "points run at once")          //
      ("point-outputs", po::bool_switch(&point_outputs),
       "also write each point's own results (summary.txt, summary.json, CSV tables, the "
       "resolved scenario) to points/<n>/, as `upsim run --no-trace` would")  //
      ("plot", po::value<std::string>(&plot_axis),
       "then draw results.csv against this axis column with gnuplot (upsim plot)")  //
      ("force", po::bool_switch(&force),
       "clear a results folder that holds another study (or this one: start over)");
  po::options_description hidden;
  hidden.add_options()("study", po::value<std::string>(&study_file));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("study", 1);
  po::variables_map vm;
  if (!parse_command_line(args, all, out, vm, &positional, &desc)) return 0;
  if (study_file.empty()) throw po::error("upsim sweep: missing STUDY.yaml");
  if (jobs < 1) throw po::error("--jobs must be at least 1");

  ConfigDocument study_doc = ConfigDocument::load_file(study_file);
  Study study = read_study(study_doc, study_file);
  const std::vector<Point> points = points_of(study);
  // Under mpirun (and built with MPI), rank 0 keeps the folder and hands points out; the other
  // ranks only run the points they are given.
#ifdef UPSIM_HAVE_MPI
  std::optional<mpi::Session> mpi_session;
  if (mpi::launched_by_mpi()) mpi_session.emplace();
  if (mpi_session && mpi_session->rank() != 0) {
    mpi::distribute_points(*mpi_session, {}, [&](size_t i) { return row_of(points[i], study); },
                           {});
    return 0;
  }
  // Until rank 0 hands points out, the other ranks wait for their first one: an error before
  // then tells them to stop.
  mpi::StopWorkersOnError stop_workers(mpi_session ? &*mpi_session : nullptr);
#else
  const bool mpi_session = false;
#endif
  const fs::path dir =
      out_dir_text.empty() ? fs::path("upsim-out") / study.name : fs::path(out_dir_text);
  // The manifest says which study the folder holds: its base and points, one per line.
  std::string manifest = "base\t";
  manifest += fs::absolute(study.base).lexically_normal().string();
  manifest += '\n';
  if (study.fits_memory) manifest += "fits_memory\n";
  for (const Point& p : points)
    manifest += fmt::format("{}\t{}\n", p.index, point_identity(p));
  std::error_code ec;
  const bool existing = fs::exists(dir / kManifestFile, ec);
  if (existing && (force || read_whole(dir / kManifestFile) != manifest)) {
    if (!force) {
      throw std::runtime_error(fmt::format(
          "{} holds the results of another study (or of this one with other points); choose "
          "another --out, or pass --force to clear it",
          dir.string()));
    }
    fs::remove_all(dir / kPointsDir, ec);
    fs::remove(dir / kResultsFile, ec);
  }
  fs::create_directories(dir / kPointsDir);
  if (point_outputs) study.point_outputs = dir / kPointsDir;
  write_file_atomically(dir / kManifestFile, manifest);

  // Points finished by an earlier run of this study are kept.
  std::vector<std::optional<std::string>> rows(points.size());
  size_t resumed = 0;
  for (const Point& p : points) {
    const fs::path record = dir / kPointsDir / fmt::format("{}.row", p.index);
    if (!fs::exists(record, ec)) continue;
    const std::string text = read_whole(record);
    const size_t nl = text.find('\n');
    if (nl == std::string::npos || text.substr(0, nl) != point_identity(p)) continue;
    rows[p.index] = text.substr(nl + 1);
    ++resumed;
  }

  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  std::mutex progress_mutex;
  size_t done = resumed;
  size_t ran = 0;
  const auto report = [&](size_t index) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = elapsed > 0.0 ? static_cast<double>(ran) / elapsed : 0.0;
    const double eta = rate > 0.0 ? static_cast<double>(points.size() - done) / rate : 0.0;
    const std::string line =
        fmt::format("[{}/{}] {:.2f} points/s, ETA {:.0f} s", done, points.size(), rate, eta);
    if (terminal) {
      err << "\r" << line << (done == points.size() ? "\n" : "") << std::flush;
    } else {
      err << fmt::format("point {} done: {}\n", index, line);
    }
  };
  if (resumed > 0) {
    err << fmt::format("resuming {}: {} of {} points already done\n", dir.string(), resumed,
                       points.size());
  }
  // A point's row: its number, axis values and results.
  const auto point_row = [&](size_t i) { return row_of(points[i], study); };

  // Keeps a finished row: its record for a resume, the table's row, the progress line.
  const auto finished = [&](size_t i, const std::string& row) {
    std::string record = point_identity(points[i]);
    record += '\n';
    record += row;
    write_file_atomically(dir / kPointsDir / fmt::format("{}.row", i), record);
    const std::lock_guard<std::mutex> lock(progress_mutex);
    rows[i] = row;
    ++done;
    ++ran;
    report(i);
  };
  if (mpi_session) {
#ifdef UPSIM_HAVE_MPI
    std::vector<size_t> todo;
    for (size_t i = 0; i < points.size(); ++i) {
      if (!rows[i]) todo.push_back(i);
    }
    stop_workers.release();  // distribute_points tells them from here on
    mpi::distribute_points(*mpi_session, todo, point_row, finished);
#endif
  } else {
    parallel_for(points.size(), static_cast<size_t>(jobs), [&](size_t i) {
      if (!rows[i]) finished(i, point_row(i));
    });
  }

  std::string table = "point";
  for (const Dimension& d : study.dims) {
    for (const std::string& k : d.keys) {
      table += ',';
      table += csv_field(k);
    }
  }
  for (const char* c : kResultColumns) {
    table += ',';
    table += c;
  }
  table += "\n";
  size_t failed = 0;
  size_t skipped = 0;
  for (const std::optional<std::string>& r : rows) {
    table += *r;
    failed += r->find(",failed,") != std::string::npos ? 1 : 0;
    skipped += r->find(",skipped,") != std::string::npos ? 1 : 0;
  }
  write_file_atomically(dir / kResultsFile, table);
  {
    std::istringstream lines(table);
    std::string line;
    std::getline(lines, line);
    const std::vector<std::string> header = parse_csv_line(line);
    std::vector<std::vector<std::string>> cells;
    while (std::getline(lines, line))
      cells.push_back(parse_csv_line(line));
    write_results_hdf5(dir / kResultsHdf5File, header, cells);
  }
  out << fmt::format("study {}: {} points ({} run now, {} resumed): {} ok, {} skipped, {} failed\n",
                     study.name, points.size(), ran, resumed, points.size() - failed - skipped,
                     skipped, failed);
  out << fmt::format("results: {} (and {})\n", (dir / kResultsFile).string(),
                     (dir / kResultsHdf5File).string());
  int plot_rc = 0;
  if (!plot_axis.empty()) {
    plot_rc = plot_main({(dir / kResultsFile).string(), "--x", plot_axis}, out, err);
  }
  return failed > 0 || plot_rc != 0 ? 1 : 0;
}

}  // namespace upsim::cli
