#include "tools/sweep_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/export/op_profile.h"
#include "sim/export/run_summary.h"
#include "sim/formats/csv.h"
#include "sim/formats/text.h"
#include "tools/command_line.h"
#include "tools/memory_shared_jobs.h"
#include "tools/output_folder.h"
#include "tools/plot_command.h"
#include "tools/point_source.h"
#include "tools/results_hdf5.h"
#include "tools/run_documents.h"
#include "tools/run_metrics.h"
#include "tools/run_tables.h"
#include "tools/scenario.h"
#include "tools/steady_state.h"
#include "tools/sweep_folder.h"
#include "tools/sweep_records.h"
#include "tools/sweep_table.h"
#include "tools/version.h"
#ifdef UPSIM_HAVE_MPI
#include "tools/mpi_jobs.h"
#endif

namespace upsim::cli {

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {

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

/// Why `name` cannot be one folder name (the study's folder under upsim-out/), or "" when it can.
std::string folder_name_problem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name == "." || name == "..") return "`.` and `..` name other folders";
  if (name.find_first_of("/\\") != std::string_view::npos) return "it holds `/` or `\\`";
  if (name.front() == '-') return "it starts with `-`, as an option does";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "it holds a control character";
  }
  if (name.size() > 255) return "it is longer than the 255 bytes of a folder name";
  return "";
}

/// `text` with control characters written as \xNN, for messages.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return out;
}

/// The study's name: `study:`, or the file's stem; one folder name, since a study's results go
/// to upsim-out/<name>/.
std::string study_name(const ConfigNode& root, const fs::path& file) {
  const bool given = root.has("study");
  const std::string name = root.get_string_or("study", file.stem().string());
  const std::string problem = folder_name_problem(name);
  if (problem.empty()) return name;
  const std::string why = fmt::format(
      "must be one folder name (the study's results go to upsim-out/<study>/), but {}", problem);
  if (given) root.child("study").fail(fmt::format("{}: `{}`", why, printable(name)));
  throw ConfigError(file.string(), 0, "",
                    fmt::format("the study's name, the file's stem `{}`, {}; set `study:`",
                                printable(name), why));
}

/// A key path as apply_override reads it, so that `tables[0].rows` and `tables.0.rows` are one.
std::string normalized_key(std::string_view key) {
  std::string out;
  for (const char c : trim_blanks(key)) {
    if (c == '[') {
      out += '.';
    } else if (c != ']') {
      out += c;
    }
  }
  return out;
}

/// Where each key of the study takes its values (`set`, an axis, a zip group), so that a key
/// given twice is refused naming both places: one of them would be silently ignored.
class KeyPlaces {
 public:
  void add(const std::string& key, const ConfigNode& where) {
    const auto [it, added] =
        places_.try_emplace(normalized_key(key), where.key_path(), where.line());
    if (added) return;
    where.fail(fmt::format(
        "`{}` is also given at {} (line {}); a key takes its values from one place (one of them "
        "would be ignored)",
        key, it->second.first, it->second.second));
  }

 private:
  std::map<std::string, std::pair<std::string, int>> places_;
};

/// The study of `doc`, read from `file` (its name and relative paths).
Study read_study(ConfigDocument& doc, const fs::path& file) {
  const ConfigNode root = doc.root();
  root.expect_map("a study: a base scenario and its axes or zip");
  Study s;
  s.name = study_name(root, file);
  s.base = root.get_path("base");
  std::error_code ec;
  if (!fs::is_regular_file(s.base, ec)) {
    root.child("base").fail(
        fmt::format("no scenario file `{}` (a path relative to the study)", s.base.string()));
  }
  const fs::path dir = file.parent_path();
  KeyPlaces places;
  const auto add = [&](const std::vector<std::pair<std::string, ConfigNode>>& entries,
                       const ConfigNode& where) {
    Dimension d;
    size_t steps = 0;
    for (const auto& [key, list] : entries) {
      const std::vector<std::string> values = values_of(list);
      places.add(key, list);
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
      places.add(key, value);
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

constexpr std::array<const char*, 17> kResultColumns{"status",
                                                     "iteration_ms",
                                                     "compute_ms",
                                                     "communication_ms",
                                                     "exposed_comm_ms",
                                                     "bubble_ms",
                                                     "rendezvous_wait_ms",
                                                     "cpu_bound_idle_ms",
                                                     "other_idle_ms",
                                                     "memory_bytes_per_gpu",
                                                     "throughput_unit",
                                                     "throughput_per_s",
                                                     "mfu",
                                                     "hfu",
                                                     "busiest_link",
                                                     "busiest_link_busy_ms",
                                                     "message"};

/// `text` on one line: a row's message holds no line break.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

/// What `upsim run` of the point would warn about (the scenario's warnings, the steady-state
/// search's among them, and stream waits that reached the GPU before their event), as the row's
/// message: "warning: ...; warning: ...".
std::string warnings_message(const SteadyRun& run) {
  const std::vector<std::string> warnings = run_warnings(run.scenario.warnings, run.stats);
  std::string out;
  for (const std::string& w : warnings) {
    if (!out.empty()) out += "; ";
    out += "warning: " + one_line(w);
  }
  return out;
}

/// The result fields of a point after its axis values (kResultColumns), run with
/// 1 / `memory_shares` of the process's memory: a point past its share throws
/// SharedMemoryLimitError, to be run again alone (tools/memory_shared_jobs.h).
std::string result_fields(const Point& point, const Study& study, size_t memory_shares) {
  ScenarioLimits limits;
  limits.memory_shares = memory_shares;
  try {
    ConfigDocument doc = load_scenario(study.base, point.overrides);
    if (study.fits_memory) doc.apply_override("platform.memory_check=warn");
    std::unique_ptr<OpProfileObserver> ops;
    const SteadyRun run = run_to_steady_state(
        doc,
        [&](const Scenario& scenario, GraphExecutor& executor) {
          if (study.point_outputs.empty()) return;
          ops = std::make_unique<OpProfileObserver>(scenario.warmup_iterations,
                                                    scenario.measured_iterations);
          executor.add_observer(ops.get());
        },
        limits);
    const RunSummary& s = run.summary;
    const Scenario& sc = run.scenario;
    if (!study.point_outputs.empty()) {
      // The documents `upsim run --no-trace` writes (tools/run_documents.h).
      const fs::path own = study.point_outputs / std::to_string(point.index);
      fs::create_directories(own);
      const RunDocuments documents =
          run_documents(RunIdentity{study.base.string(), point.overrides}, doc, run, ops->rows());
      write_file_atomically(own / "summary.txt", documents.summary_text);
      write_file_atomically(own / "summary.json", documents.summary_json);
      write_file_atomically(own / "ranks.csv", documents.ranks_csv);
      write_file_atomically(own / "links.csv", documents.links_csv);
      write_file_atomically(own / "ops.csv", documents.ops_csv);
      write_file_atomically(own / "scenario.yaml", documents.resolved_yaml);
    }
    const int64_t memory = sc.memory ? sc.memory->total_bytes() : 0;
    if (study.fits_memory && sc.memory && memory > sc.platform.gpu_memory_bytes) {
      return fmt::format(
          "skipped,,,,,,,,,{},,,,,,,{}", memory,
          csv_field(fmt::format("needs {} bytes of GPU memory per GPU, the {} "
                                "has {}",
                                memory, sc.platform.gpu, sc.platform.gpu_memory_bytes)));
    }
    const RankBreakdown* slowest = &slowest_rank(s);
    const auto per_it = [&](Duration total) { return ms(per_iteration(*slowest, total)); };
    std::string link;
    std::string link_ms;
    if (!s.links.empty()) {
      link = csv_field(s.links.front().name);
      link_ms =
          ms(s.links.front().busy / static_cast<int64_t>(std::max<uint32_t>(1, s.iterations)));
    }
    // Throughput and utilisation (tools/run_metrics.h); empty where the run states none.
    const std::optional<RunMetrics> metrics = run_metrics(sc, s);
    const auto fraction = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.6g}", *v) : std::string();
    };
    const std::string throughput =
        metrics ? fmt::format("{},{:.6g},{},{}", metrics->unit, metrics->units_per_s,
                              fraction(metrics->mfu), fraction(metrics->hfu))
                : std::string(",,,");
    return fmt::format("ok,{},{},{},{},{},{},{},{},{},{},{},{},{}", ms(s.predicted_iteration_time),
                       per_it(slowest->compute_busy), per_it(slowest->communication),
                       per_it(slowest->exposed_communication), per_it(slowest->bubble),
                       per_it(slowest->rendezvous_wait), per_it(slowest->cpu_bound_idle),
                       per_it(slowest->other_idle), sc.memory ? std::to_string(memory) : "",
                       throughput, link, link_ms, csv_field(warnings_message(run)));
  } catch (const SharedMemoryLimitError&) {
    throw;
  } catch (const std::exception& e) {
    std::string row = "failed,,,,,,,,,,,,,,,,";
    row += csv_field(one_line(e.what()));
    return row;
  }
}

/// A point's results-table row: its number, axis values and results, with its newline.
std::string row_of(const Point& p, const Study& study, size_t memory_shares) {
  std::string row = fmt::format("{}", p.index);
  for (const std::string& c : p.columns) {
    row += ',';
    row += csv_field(c);
  }
  row += ',';
  row += result_fields(p, study, memory_shares);
  row += '\n';
  return row;
}

/// The point's overrides as one line: the manifest's and the row record's identity of a point.
std::string point_identity(const Point& p) {
  std::string out;
  for (const std::string& o : p.overrides) {
    for (const char c : o)
      out += c == '\n' ? ' ' : c;
    out += '\t';
  }
  return out;
}

/// The results table: the header, then each point's row.
std::string results_table(const Study& study, const std::vector<std::optional<std::string>>& rows) {
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
  for (const std::optional<std::string>& r : rows)
    table += *r;
  return table;
}

/// What write_results wrote: the failed and skipped points and the table as printed.
struct WrittenResults {
  size_t failed = 0;
  size_t skipped = 0;
  std::string text_table;  ///< format_sweep_table's
};

/// Writes results.csv and results.h5; counts the failed and skipped points from each row's
/// status field (an axis value `failed` is a value, not a status).
WrittenResults write_results(const fs::path& dir, const Study& study,
                             const std::vector<std::optional<std::string>>& rows) {
  const std::string table = results_table(study, rows);
  write_file_atomically(dir / kResultsFile, table);
  // The table read back: the header, then one record per point.
  std::vector<CsvRecord> records = read_csv(table, kResultsFile);
  size_t axis_columns = 0;
  for (const Dimension& d : study.dims)
    axis_columns += d.keys.size();
  WrittenResults out;
  out.text_table = format_sweep_table(records, axis_columns);
  const std::vector<std::string> header = std::move(records.front().fields);
  const size_t status_column = 1 + axis_columns;
  std::vector<std::vector<std::string>> cells;
  for (size_t i = 1; i < records.size(); ++i) {
    cells.push_back(std::move(records[i].fields));
    const std::string status =
        status_column < cells.back().size() ? cells.back()[status_column] : "";
    out.failed += status == "failed" ? 1 : 0;
    out.skipped += status == "skipped" ? 1 : 0;
  }
  write_results_hdf5(dir / kResultsHdf5File, header, cells);
  return out;
}

}  // namespace

size_t study_point_count(ConfigDocument& doc, const std::filesystem::path& file) {
  return point_count(read_study(doc, file));
}

namespace {

struct SweepOptions {
  std::string study_file;
  std::string out_dir;
  bool force = false;
  int jobs = 1;
  std::string plot_axis;
  bool point_outputs = false;
};

/// Parses the command line; nullopt after --help.
std::optional<SweepOptions> parse_sweep_options(const std::vector<std::string>& args,
                                                std::ostream& out) {
  SweepOptions o;
  po::options_description desc(
      "usage: upsim sweep STUDY.yaml [options]\n\n"
      "Runs a base scenario at every point of a grid of overrides (`axes`: every combination;\n"
      "`zip`: lists that advance together) and writes one results table, results.csv: per\n"
      "point its axis values, status, iteration time and the slowest rank's breakdown (ms per\n"
      "iteration), per-GPU memory and the busiest link. A killed sweep resumes where it\n"
      "stopped (finished points are not run again; a point whose scenario or any file it\n"
      "references changed is). The study file's schema is in tools/sweep_command.h; examples\n"
      "in configs/studies/.\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("out,o", po::value<std::string>(&o.out_dir),
       "results folder (default upsim-out/<study>/; resumed when it holds this study)")  //
      ("jobs,j", po::value<int>(&o.jobs)->default_value(1),
       "points run at once (at most the points left)")  //
      ("point-outputs", po::bool_switch(&o.point_outputs),
       "also write each point's own results (summary.txt, summary.json, CSV tables, the "
       "resolved scenario) to points/<n>/, as `upsim run --no-trace` would")  //
      ("plot", po::value<std::string>(&o.plot_axis),
       "then draw results.csv against this axis column with gnuplot (upsim plot)")  //
      ("force", po::bool_switch(&o.force),
       "replace the sweep files of a folder that holds another study (or this one: start over), "
       "or write into a folder that holds no sweep; other files there are kept");
  if (!parse_with_positional(args, desc, out, "study", o.study_file)) return std::nullopt;
  if (o.study_file.empty()) throw po::error("upsim sweep: missing STUDY.yaml");
  if (o.jobs < 1) throw po::error("--jobs must be at least 1");
  return o;
}

/// The manifest of `study` with `points` whose sources are `sources`.
Manifest manifest_of(const Study& study, const std::vector<Point>& points,
                     const std::vector<PointSource>& sources) {
  Manifest m;
  m.version = kVersion;
  m.base = fs::absolute(study.base).lexically_normal().string();
  m.fits_memory = study.fits_memory;
  for (const Point& p : points)
    m.points.push_back({sources[p.index].scenario_sha256, point_identity(p)});
  return m;
}

/// Progress on stderr: a one-line bar on a terminal, plain lines otherwise.
class Progress {
 public:
  Progress(size_t total, size_t done, std::ostream& err)
      : total_(total),
        done_(done),
        err_(err),
        terminal_(::isatty(STDERR_FILENO) != 0),
        start_(std::chrono::steady_clock::now()) {}
  /// Point `index` finished; returns the points run so far by this process.
  size_t finished(size_t index) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    ++ran_;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = elapsed > 0.0 ? static_cast<double>(ran_) / elapsed : 0.0;
    const double eta = rate > 0.0 ? static_cast<double>(total_ - done_) / rate : 0.0;
    const std::string line =
        fmt::format("[{}/{}] {:.2f} points/s, ETA {:.0f} s", done_, total_, rate, eta);
    if (terminal_) {
      err_ << "\r" << line << (done_ == total_ ? "\n" : "") << std::flush;
    } else {
      err_ << fmt::format("point {} done: {}\n", index, line);
    }
    return ran_;
  }
  size_t ran() const { return ran_; }

 private:
  size_t total_;
  size_t done_;
  size_t ran_ = 0;
  std::ostream& err_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
};

}  // namespace

int sweep_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return run_sweep(args, out, err).exit_code;
}

SweepOutcome run_sweep(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::optional<SweepOptions> options = parse_sweep_options(args, out);
  if (!options) return {};
  ConfigDocument study_doc = ConfigDocument::load_file(options->study_file);
  Study study = read_study(study_doc, options->study_file);
  const std::vector<Point> points = points_of(study);
  const auto point_row = [&](size_t i, size_t memory_shares) {
    return row_of(points[i], study, memory_shares);
  };
  // Under mpirun (and built with MPI), rank 0 keeps the folder and hands points out; the other
  // ranks only run the points they are given. A job is a point's index. The processes on a node
  // share its memory; a point past its share runs again on rank 0 alone after the others
  // (tools/memory_shared_jobs.h).
#ifdef UPSIM_HAVE_MPI
  std::optional<mpi::Session> mpi_session;
  if (mpi::launched_by_mpi()) mpi_session.emplace();
  const size_t node_shares = mpi_session ? static_cast<size_t>(mpi_session->local_size()) : 1;
  const auto run_job = [&](const std::string& job) {
    return result_or_run_alone(node_shares,
                               [&](size_t shares) { return point_row(std::stoul(job), shares); });
  };
  if (mpi_session && mpi_session->rank() != 0) {
    mpi::serve_jobs(run_job);
    return {};
  }
  // Its destruction tells the other ranks to stop, also when an error leaves first.
  std::optional<mpi::JobServer> job_server;
  if (mpi_session) job_server.emplace(*mpi_session);
#else
  const bool mpi_session = false;
#endif
  const fs::path dir =
      options->out_dir.empty() ? fs::path("upsim-out") / study.name : fs::path(options->out_dir);
  PointSources point_sources;
  std::vector<PointSource> sources(points.size());
  for (const Point& p : points)
    sources[p.index] = point_sources.of(study.base, p.overrides);
  const Manifest manifest = manifest_of(study, points, sources);
  const std::optional<Manifest> previous = open_sweep_folder(dir, manifest, options->force);
  const bool rerun_all = previous && previous->version != kVersion;
  if (rerun_all) {
    err << fmt::format("{} was written by {} (this is {}): running every point again\n",
                       (dir / kManifestFile).string(),
                       previous->version.empty() ? std::string("an upsim that recorded no version")
                                                 : "upsim " + previous->version,
                       kVersion);
  }
  if (options->point_outputs) study.point_outputs = dir / kPointsDir;
  // Points finished by an earlier run of this study are kept when they still stand. Read before
  // the manifest is rewritten, so that a refusal (a pipe at a row's name) leaves it as it was.
  Resume resume = read_rows(dir, manifest, sources, fs::absolute(study.base).parent_path(),
                            study.point_outputs, rerun_all || !previous);
  std::vector<std::optional<std::string>>& rows = resume.rows;
  write_file_atomically(dir / kManifestFile, format_manifest(manifest));
  std::error_code ec;
  fs::create_directories(dir / kPointsDir, ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("cannot create {}: {}", (dir / kPointsDir).string(), ec.message()));
  }
  std::vector<size_t> todo;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!rows[i]) todo.push_back(i);
  }
  const size_t resumed = points.size() - todo.size();
  report_reruns(resume, err);
  if (resumed > 0) {
    err << fmt::format("resuming {}: {} of {} points already done\n", dir.string(), resumed,
                       points.size());
  }
  Progress progress(points.size(), resumed, err);
  std::mutex rows_mutex;
  // Keeps a finished row: its record for a resume, the table's row, the progress line.
  const auto finished = [&](size_t i, const std::string& row) {
    const RowRecord record{i, point_identity(points[i]), sources[i], row};
    write_file_atomically(dir / row_file_name(i), format_row_record(record));
    {
      const std::lock_guard<std::mutex> lock(rows_mutex);
      rows[i] = row;
    }
    progress.finished(i);
  };
  if (mpi_session) {
#ifdef UPSIM_HAVE_MPI
    std::vector<std::string> jobs;
    for (const size_t i : todo)
      jobs.push_back(std::to_string(i));
    run_round_then_alone([&](const JobDone& done) { job_server->run_round(jobs, run_job, done); },
                         [&](size_t k) { return point_row(todo[k], 1); },
                         [&](size_t k, const std::string& row) { finished(todo[k], row); });
#endif
  } else {
    // At most one worker per point left: `-j 3000` starts no more threads than it can use. A
    // point too large for its share of memory beside the others runs alone after them.
    run_sharing_memory(
        todo.size(), std::min(static_cast<size_t>(options->jobs), todo.size()),
        [&](size_t k, size_t shares) { finished(todo[k], point_row(todo[k], shares)); });
  }

  const WrittenResults written = write_results(dir, study, rows);
  const size_t failed = written.failed;
  const size_t skipped = written.skipped;
  out << written.text_table;
  out << fmt::format("study {}: {} points ({} run now, {} resumed): {} ok, {} skipped, {} failed\n",
                     study.name, points.size(), progress.ran(), resumed,
                     points.size() - failed - skipped, skipped, failed);
  out << fmt::format("results: {} (and {})\n", (dir / kResultsFile).string(),
                     (dir / kResultsHdf5File).string());
  int plot_rc = 0;
  if (!options->plot_axis.empty()) {
    plot_rc =
        plot_main({(dir / kResultsFile).string(), "--x", options->plot_axis, "--force"}, out, err);
  }
  return {failed > 0 || plot_rc != 0 ? 1 : 0, dir};
}

}  // namespace upsim::cli
