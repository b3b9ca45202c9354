#include "tools/run_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "sim/executor.h"
#include "sim/export/chrome_trace_writer.h"
#include "sim/export/kineto_trace_writer.h"
#include "sim/export/op_profile.h"
#include "sim/export/run_summary.h"
#include "tools/interrupt_cleanup.h"
#include "tools/kineto_trace_folder.h"
#include "tools/output_folder.h"
#include "tools/run_documents.h"
#include "tools/run_metrics.h"
#include "tools/run_progress.h"
#include "tools/run_tables.h"
#include "tools/scenario.h"
#include "tools/steady_state.h"
#include "tools/timed_observer.h"

namespace upsim::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTraceFile = "trace.json";
constexpr const char* kTraceGzipFile = "trace.json.gz";
constexpr const char* kSummaryFile = "summary.txt";
constexpr const char* kResolvedFile = "scenario.yaml";
// Results for machines (tools/run_tables.h).
constexpr const char* kSummaryJsonFile = "summary.json";
constexpr const char* kRanksCsvFile = "ranks.csv";
constexpr const char* kLinksCsvFile = "links.csv";
constexpr const char* kOpsCsvFile = "ops.csv";
/// Largest rank --trace-ranks accepts before the graph is known (scenarios allow 131072 GPUs).
constexpr uint64_t kMaxTraceRank = 1'000'000;

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_trace_ranks(std::string_view item) {
  throw std::invalid_argument(fmt::format(
      "--trace-ranks: `{}` is not a rank or a range of ranks; give `all` or graph ranks and "
      "ranges such as 0-7,56",
      item));
}

uint32_t parse_rank(std::string_view digits, std::string_view item) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    bad_trace_ranks(item);
  }
  if (value > kMaxTraceRank) {
    throw std::invalid_argument(
        fmt::format("--trace-ranks: rank {} is too large (at most {})", value, kMaxTraceRank));
  }
  return static_cast<uint32_t>(value);
}

/// The Chrome trace's rank filter and the console line that says so; nullopt filter: every rank.
struct TraceSelection {
  std::optional<std::vector<RankId>> ranks;
  std::string note;  ///< empty when every rank is drawn
};

TraceSelection select_trace_ranks(const RunOptions& options, const Scenario& scenario) {
  const size_t rank_count = scenario.graph.rank_count();
  TraceSelection out;
  if (options.trace_ranks) {
    out.ranks = parse_trace_ranks(*options.trace_ranks);
    if (!out.ranks) return out;
    for (const RankId r : *out.ranks) {
      if (r >= rank_count) {
        throw std::invalid_argument(fmt::format(
            "--trace-ranks: rank {} is not in the graph, whose ranks are 0-{} ({} simulated)", r,
            rank_count - 1, rank_count));
      }
    }
    out.note = fmt::format("trace: ranks {} of {} drawn (--trace-ranks)",
                           format_rank_list(*out.ranks), rank_count);
    return out;
  }
  const uint64_t tasks = scenario.graph.task_count();
  if (tasks <= kLargeTraceTasks || !scenario.trace_ranks || scenario.trace_ranks->ranks.empty() ||
      scenario.trace_ranks->ranks.size() >= rank_count) {
    return out;
  }
  out.ranks = scenario.trace_ranks->ranks;
  out.note = fmt::format(
      "trace: ranks {} of {} drawn, {}, as the run has {:.1f} M tasks; `--trace-ranks all` draws "
      "every rank",
      format_rank_list(*out.ranks), rank_count, scenario.trace_ranks->reason,
      static_cast<double>(tasks) * 1e-6);
  return out;
}

}  // namespace

std::optional<std::pair<uint32_t, uint32_t>> parse_trace_iterations(std::string_view text,
                                                                    uint32_t iterations) {
  text = trim(text);
  if (text == "all") return std::nullopt;
  if (text == "last") return std::pair{iterations, iterations};
  const auto number = [&](std::string_view item) {
    uint32_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw std::invalid_argument(fmt::format(
          "--trace-iterations: `{}` is not an iteration; give all, last, N or N-M", text));
    }
    return v;
  };
  const size_t dash = text.find('-');
  const uint32_t first = number(trim(text.substr(0, dash)));
  const uint32_t last =
      dash == std::string_view::npos ? first : number(trim(text.substr(dash + 1)));
  if (first < 1 || last < first || last > iterations) {
    throw std::invalid_argument(
        iterations == UINT32_MAX
            ? fmt::format("--trace-iterations: `{}` is not a range of iterations (they count "
                          "from 1, first <= last)",
                          text)
            : fmt::format("--trace-iterations: `{}` is not a range of the run's iterations 1-{}",
                          text, iterations));
  }
  return std::pair{first, last};
}

TraceFormat parse_trace_format(std::string_view text) {
  if (text == "chrome") return TraceFormat::kChrome;
  if (text == "kineto") return TraceFormat::kKineto;
  throw std::invalid_argument(
      fmt::format("--trace-format: `{}` is not a trace format; valid: chrome (one Chrome trace for "
                  "Perfetto), kineto (one PyTorch profiler trace per rank, for HTA)",
                  text));
}

std::optional<std::vector<uint32_t>> parse_trace_ranks(std::string_view text) {
  text = trim(text);
  if (text == "all") return std::nullopt;
  if (text.empty()) bad_trace_ranks(text);
  std::vector<uint32_t> ranks;
  for (;;) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      ranks.push_back(parse_rank(item, item));
    } else {
      const uint32_t first = parse_rank(trim(item.substr(0, dash)), item);
      const uint32_t last = parse_rank(trim(item.substr(dash + 1)), item);
      if (last < first) {
        throw std::invalid_argument(fmt::format(
            "--trace-ranks: the range `{}` runs backwards (write {}-{})", item, last, first));
      }
      for (uint32_t r = first; r <= last; ++r)
        ranks.push_back(r);
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

namespace {

/// --trace-ranks against --no-trace, and its syntax: a typo fails before the simulation.
void check_trace_ranks_option(const RunOptions& options) {
  if (options.trace_ranks) {
    if (options.no_trace) {
      throw std::invalid_argument(
          "--trace-ranks chooses the ranks of the trace, which "
          "--no-trace turns off; give one or the other");
    }
    (void)parse_trace_ranks(*options.trace_ranks);
  }
}

/// --trace-format's value and --no-trace: a typo or a contradiction fails before the simulation.
TraceFormat check_trace_format_option(const RunOptions& options) {
  if (!options.trace_format) return TraceFormat::kChrome;
  if (options.no_trace) {
    throw std::invalid_argument(
        "--trace-format chooses the format of the trace, which --no-trace turns off; give one or "
        "the other");
  }
  return parse_trace_format(*options.trace_format);
}

/// --trace FILE: a file upsim may replace, and an existing one only with --force. With
/// --trace-format kineto, --trace names a folder: a path that is not one fails here, the files
/// in it once the ranks are known.
void check_trace_file_option(const RunOptions& options, TraceFormat format) {
  if (format == TraceFormat::kKineto) {
    if (!options.trace_file.empty()) check_kineto_folder(options.trace_file);
    return;
  }
  if (!options.trace_file.empty()) check_replaceable(options.trace_file);
  if (!options.trace_file.empty() && !options.force &&
      fs::exists(fs::symlink_status(options.trace_file))) {
    throw std::runtime_error(fmt::format(
        "{} already exists; upsim does not overwrite files unasked: choose another --trace "
        "file, or pass --force to overwrite",
        options.trace_file));
  }
}

/// What a run writes, as the steady-state search's attempts attach to it. The output folder is
/// made once the first scenario is built and the trace ranks are checked against it (a bad
/// scenario or --trace-ranks leaves no folder), before any run. Every output is staged
/// (OutputFiles) and published only when the whole run succeeded: each attempt of the
/// steady-state search draws its trace into the trace's temporary file, so a discarded attempt's
/// trace never takes the trace's name, and an error or an interrupt leaves the folder as it was
/// (and removes a folder this run created).
struct RunOutputs {
  std::optional<OutputFiles> files;
  fs::path out_dir;
  TraceFormat format = TraceFormat::kChrome;
  fs::path trace_path;     // where the trace ends up (kineto: the folder of the rank files)
  fs::path trace_staging;  // the Chrome trace writer's target, published by files->commit()
  TraceSelection trace_selection;
  std::unique_ptr<ChromeTraceWriter> trace;
  /// Kineto: the files of the attempt's drawn ranks (their final paths) and their writer.
  std::vector<KinetoRankFile> kineto_files;
  std::unique_ptr<KinetoTraceWriter> kineto;
  /// The trace writer's wall time, over every attempt of the steady-state search.
  std::unique_ptr<TimedObserver> trace_timer;
  double trace_seconds = 0.0;
  std::unique_ptr<OpProfileObserver> ops;
  // The trace writers' own temporaries (the staging names' .tmp) go on an interrupt too.
  std::vector<std::unique_ptr<TempFileGuard>> trace_tmp;
  std::optional<std::pair<uint32_t, uint32_t>> trace_iterations;
  std::string trace_notes;
};

/// The iterations the trace of `scenario`'s attempt draws (`large`: a graph of more than
/// kLargeTraceTasks `tasks`), with the note when a large graph's default chose them.
void choose_trace_iterations(const RunOptions& options, const Scenario& scenario, bool large,
                             uint64_t tasks, RunOutputs& o) {
  if (options.trace_iterations) {
    // Checked against the run's iterations once the steady-state search has chosen them;
    // an attempt of fewer iterations draws what it has.
    o.trace_iterations = parse_trace_iterations(*options.trace_iterations, UINT32_MAX);
    if (o.trace_iterations && o.trace_iterations->first == UINT32_MAX) {
      o.trace_iterations = std::pair{scenario.iterations, scenario.iterations};  // `last`
    }
    if (o.trace_iterations) {
      o.trace_iterations->second = std::min(o.trace_iterations->second, scenario.iterations);
    }
  } else if (large) {
    o.trace_iterations = std::pair{scenario.iterations, scenario.iterations};
    o.trace_notes += fmt::format(
        "trace: iteration {} of {} drawn, as the run has {:.1f} M tasks; "
        "`--trace-iterations all` draws every iteration\n",
        scenario.iterations, scenario.iterations, static_cast<double>(tasks) * 1e-6);
  }
}

/// The output folder and the trace's paths, made at the first attempt only.
void open_output_folder(const RunOptions& options, const std::vector<std::string>& planned,
                        bool large, RunOutputs& o) {
  if (o.files) return;
  o.files.emplace(prepare_output_folder(options.scenario, options.out_dir, planned, options.force,
                                        {kKinetoFolder}));
  o.out_dir = o.files->folder();
  if (o.format == TraceFormat::kKineto) {
    // The folder now; its files once the attempt's drawn ranks are known (attach_kineto).
    o.trace_path = options.no_trace             ? fs::path()
                   : options.trace_file.empty() ? o.out_dir / kKinetoFolder
                                                : fs::path(options.trace_file);
    if (!o.trace_path.empty()) o.files->make_folder(o.trace_path);
    return;
  }
  const bool gzip = options.trace_gzip || large;
  o.trace_path = options.no_trace             ? fs::path()
                 : options.trace_file.empty() ? o.out_dir / (gzip ? kTraceGzipFile : kTraceFile)
                                              : fs::path(options.trace_file);
  if (!o.trace_path.empty()) {
    o.trace_staging = o.files->reserve(o.trace_path);
    o.trace_tmp.push_back(
        std::make_unique<TempFileGuard>(fs::path(o.trace_staging.string() + ".tmp")));
  }
}

/// The Kineto writer of one attempt: the drawn ranks' files reserved (those of an earlier
/// attempt that this one does not draw given up again), each written through its staging name.
void attach_kineto(const RunOptions& options, const Scenario& scenario, bool large, RunOutputs& o) {
  const bool gzip = options.trace_gzip || large;
  std::vector<KinetoRankFile> files =
      kineto_rank_files(scenario.graph, o.trace_selection.ranks, o.trace_path, gzip);
  check_kineto_files_free(
      files, options.force,
      options.trace_file.empty() ? "choose another --out folder" : "choose another --trace folder");
  for (const KinetoRankFile& old : o.kineto_files) {
    const bool kept = std::any_of(files.begin(), files.end(),
                                  [&](const KinetoRankFile& f) { return f.path == old.path; });
    if (!kept) o.files->release(old.path);
  }
  o.trace_tmp.clear();
  std::vector<KinetoRankFile> staging;
  for (const KinetoRankFile& f : files) {
    const fs::path s = o.files->reserve(f.path);
    o.trace_tmp.push_back(std::make_unique<TempFileGuard>(fs::path(s.string() + ".tmp")));
    staging.push_back(KinetoRankFile{f.rank, s});
  }
  if (scenario.represented_gpus > scenario.graph.rank_count()) {
    o.trace_notes += fmt::format(
        "trace: Kineto traces of the {} simulated ranks of {} GPUs (the others mirror them, as "
        "data-parallel replicas do)\n",
        scenario.graph.rank_count(), scenario.represented_gpus);
  }
  o.kineto_files = std::move(files);
  // The staging name's `.tmp` would hide the file's compression from the writer.
  o.kineto = std::make_unique<KinetoTraceWriter>(
      std::move(staging),
      KinetoTraceOptions{o.trace_iterations, scenario.models.set.devices, gzip});
  o.kineto->add_metadata("scenario", scenario.name);
}

/// The observers of one attempt: the op profile, and the trace writer unless no trace is written.
void attach_run_observers(const RunOptions& options, const Scenario& scenario, bool large,
                          GraphExecutor& executor, RunOutputs& o) {
  o.ops =
      std::make_unique<OpProfileObserver>(scenario.warmup_iterations, scenario.measured_iterations);
  executor.add_observer(o.ops.get());
  o.trace_timer.reset();
  o.trace.reset();
  o.kineto.reset();
  if (o.trace_path.empty()) return;
  if (o.format == TraceFormat::kKineto) {
    attach_kineto(options, scenario, large, o);
    o.trace_timer = std::make_unique<TimedObserver>(*o.kineto, o.trace_seconds);
    executor.add_observer(o.trace_timer.get());
    return;
  }
  // A large run's link counters: at most about two samples per link per microsecond.
  const Duration link_interval = large ? Duration::from_us(1) : Duration::zero();
  // The writer compresses by its file's name, which the staging name's `.tmp` would hide.
  o.trace = std::make_unique<ChromeTraceWriter>(
      o.trace_staging, ChromeTraceOptions{o.trace_selection.ranks, o.trace_iterations,
                                          link_interval, o.trace_path.extension() == ".gz"});
  o.trace->add_metadata("scenario", scenario.name);
  o.trace_timer = std::make_unique<TimedObserver>(*o.trace, o.trace_seconds);
  executor.add_observer(o.trace_timer.get());
}

/// One attempt of the steady-state search attached to the run's outputs (AttachObservers).
void attach_outputs(const RunOptions& options, const std::vector<std::string>& planned,
                    const Scenario& scenario, GraphExecutor& executor, RunOutputs& o) {
  o.trace_selection = options.no_trace ? TraceSelection{} : select_trace_ranks(options, scenario);
  // A large graph's trace: its last iteration, gzip-compressed, unless asked otherwise.
  const uint64_t tasks = scenario.graph.task_count();
  const bool large = tasks > kLargeTraceTasks;
  o.trace_notes.clear();
  choose_trace_iterations(options, scenario, large, tasks, o);
  open_output_folder(options, planned, large, o);
  const bool chrome = o.format == TraceFormat::kChrome;
  if (large && !options.no_trace && chrome) {
    o.trace_notes += "trace: link counters sampled at most about twice per microsecond per link\n";
  }
  if (large && !options.trace_gzip && options.trace_file.empty() && !options.no_trace && chrome) {
    o.trace_notes += fmt::format(
        "trace: written gzip-compressed ({}), which Perfetto opens as is, as the run has "
        "{:.1f} M tasks\n",
        kTraceGzipFile, static_cast<double>(tasks) * 1e-6);
  }
  if (large && !options.trace_gzip && !options.no_trace && !chrome) {
    o.trace_notes += fmt::format(
        "trace: Kineto traces written gzip-compressed (rank_N.json.gz), as the run has {:.1f} M "
        "tasks\n",
        static_cast<double>(tasks) * 1e-6);
  }
  attach_run_observers(options, scenario, large, executor, o);
}

/// The finished run's files, staged and published together; the trace writer closed.
void write_run_outputs(const RunOptions& options, const ConfigDocument& doc, const SteadyRun& run,
                       RunOutputs& o) {
  RunDocuments documents =
      run_documents(RunIdentity{options.scenario, options.overrides}, doc, run, o.ops->rows());
  o.files->stage(o.out_dir / kSummaryFile, documents.summary_text);
  o.files->stage(o.out_dir / kResolvedFile, documents.resolved_yaml);
  o.files->stage(o.out_dir / kSummaryJsonFile, documents.summary_json);
  o.files->stage(o.out_dir / kRanksCsvFile, documents.ranks_csv);
  o.files->stage(o.out_dir / kLinksCsvFile, documents.links_csv);
  o.files->stage(o.out_dir / kOpsCsvFile, documents.ops_csv);
  // An older run's trace in the folder that this run does not replace (--force only: without
  // it, prepare_output_folder refused the folder).
  std::vector<fs::path> stale;
  for (const char* name : {kTraceFile, kTraceGzipFile}) {
    if (o.out_dir / name != o.trace_path) stale.push_back(o.out_dir / name);
  }
  // An older run's Kineto traces in <out>/kineto that this run does not replace.
  const fs::path kineto_folder = o.out_dir / kKinetoFolder;
  const bool kineto_here = o.format == TraceFormat::kKineto && o.trace_path == kineto_folder;
  for (fs::path& p : stale_kineto_files(
           kineto_folder, kineto_here ? o.kineto_files : std::vector<KinetoRankFile>{})) {
    stale.push_back(std::move(p));
  }
  o.files->commit(stale);
  if (!kineto_here) {
    std::error_code ec;
    fs::remove(kineto_folder, ec);  // only when left empty
  }
  o.trace.reset();
  o.kineto.reset();
  o.trace_tmp.clear();
}

/// The line on how many tasks and events the run simulated, in how many attempts, and how much
/// of the time writing the trace took (`trace_seconds`; 0: no trace).
void print_simulation_stats(const SteadyRun& run, double trace_seconds, std::ostream& err) {
  const RunStats& stats = run.stats;
  const std::string trace =
      trace_seconds > 0.0 ? fmt::format(" ({:.3f} s of it writing the trace, {:.3f} s simulating)",
                                        trace_seconds, std::max(0.0, run.wall_s - trace_seconds))
                          : std::string();
  if (run.attempts.size() == 1) {
    err << fmt::format("simulated {} tasks, {} events in {:.3f} s{}\n", stats.tasks_done,
                       stats.events, run.wall_s, trace);
  } else {
    std::string counts;
    for (const uint32_t n : run.attempts)
      counts += (counts.empty() ? "" : ", ") + std::to_string(n);
    err << fmt::format(
        "simulated {} tasks, {} events in the last of {} runs ({} iterations: the steady-state "
        "search), {:.3f} s in all{}\n",
        stats.tasks_done, stats.events, run.attempts.size(), counts, run.wall_s, trace);
  }
  if (stats.persistent_gemms_split > 0) {
    err << fmt::format(
        "persistent GEMMs beside communication (sim/gemm_launch.h): {} launches ran CTAs after "
        "others for want of SMs, +{:.3f} ms of GPU time over all simulated ranks and iterations "
        "(what-if: platform.kernels.gemm_sm_carveout)\n",
        stats.persistent_gemms_split, stats.persistent_gemm_split_time.seconds() * 1e3);
  }
}

/// Where the outputs are, with the trace's notes and how to open it.
void print_output_notes(const RunOptions& options, const SteadyRun& run, const RunOutputs& o,
                        bool trace_in_folder, std::ostream& err) {
  const std::string trace_name =
      o.trace_path.filename().string() + (o.format == TraceFormat::kKineto ? "/" : "");
  err << fmt::format("outputs: {}/ ({}{}, {}, {}, {}, {}, {})\n", o.out_dir.string(),
                     trace_in_folder ? trace_name + ", " : "", kSummaryFile, kSummaryJsonFile,
                     kRanksCsvFile, kLinksCsvFile, kOpsCsvFile, kResolvedFile);
  if (!o.trace_selection.note.empty()) err << o.trace_selection.note << "\n";
  if (!o.trace_path.empty()) err << o.trace_notes;
  if (options.trace_iterations && !o.trace_path.empty()) {
    const auto asked = parse_trace_iterations(*options.trace_iterations, UINT32_MAX);
    if (asked && asked->first != UINT32_MAX && asked->second > run.scenario.iterations) {
      err << fmt::format(
          "upsim: warning: --trace-iterations {}: the run has {} iterations; the trace draws "
          "{}\n",
          *options.trace_iterations, run.scenario.iterations,
          asked->first > run.scenario.iterations
              ? std::string("none")
              : fmt::format("{}-{}", asked->first, run.scenario.iterations));
    }
  }
  if (o.trace_path.empty()) return;
  if (o.format == TraceFormat::kKineto) {
    err << fmt::format(
        "Kineto traces in {}/, one per rank: HTA reads the folder "
        "(TraceAnalysis(trace_dir=...)), a trace scenario replays it (workload: {{model: trace, "
        "traces: ...}})\n",
        o.trace_path.string());
    return;
  }
  err << fmt::format("open {} in https://ui.perfetto.dev or chrome://tracing\n",
                     o.trace_path.string());
}

/// --dry-run: what `upsim run` would simulate, built and printed, nothing run or written.
void print_dry_run(const RunOptions& options, std::ostream& out, std::ostream& err) {
  ConfigDocument doc = load_scenario(options.scenario, options.overrides);
  const Scenario scenario = build_scenario(doc);
  for (const std::string& w : scenario.warnings)
    err << "upsim: warning: " << w << "\n";
  if (options.list_keys) {
    for (const ReadKey& key : doc.read_keys())
      out << key.path << "\n";
    return;
  }
  out << scenario.header;
  out << fmt::format(
      "graph: {} ranks, {} tasks over {} iterations ({} warm-up){}; nothing simulated "
      "(--dry-run)\n",
      scenario.graph.rank_count(), scenario.graph.task_count(), scenario.iterations,
      scenario.warmup_iterations,
      scenario.iterations_chosen ? ", the first attempt of the steady-state search" : "");
  out << "resolved scenario (a run writes it as scenario.yaml):\n" << doc.resolved_yaml();
}

}  // namespace

void check_dry_run_options(const RunOptions& options) {
  if (!options.dry_run && !options.list_keys) return;
  const char* mode = options.list_keys ? "--keys" : "--dry-run";
  const std::pair<bool, const char*> outputs[] = {
      {!options.out_dir.empty(), "--out"},
      {!options.trace_file.empty(), "--trace"},
      {options.trace_format.has_value(), "--trace-format"},
      {options.trace_ranks.has_value(), "--trace-ranks"},
      {options.trace_iterations.has_value(), "--trace-iterations"},
      {options.trace_gzip, "--trace-gzip"},
      {options.force, "--force"},
      {options.quiet, "--quiet"}};
  for (const auto& [given, name] : outputs) {
    if (given) {
      throw std::invalid_argument(fmt::format(
          "{} writes nothing and prints no time, so {} would change nothing; drop one of them",
          mode, name));
    }
  }
}

void run_scenario(const RunOptions& options, std::ostream& out, std::ostream& err) {
  check_dry_run_options(options);
  if (options.dry_run || options.list_keys) {
    print_dry_run(options, out, err);
    return;
  }
  check_trace_ranks_option(options);
  const TraceFormat format = check_trace_format_option(options);
  ConfigDocument doc = load_scenario(options.scenario, options.overrides);

  // Every name a run writes, the trace's too when this run writes none: an older run's trace
  // beside this run's summary would pass for this run's (with --force it is removed).
  const std::vector<std::string> planned{kSummaryFile,  kResolvedFile, kSummaryJsonFile,
                                         kRanksCsvFile, kLinksCsvFile, kOpsCsvFile,
                                         kTraceFile,    kTraceGzipFile};
  const bool trace_in_folder = !options.no_trace && options.trace_file.empty();
  check_trace_file_option(options, format);
  RunOutputs outputs;
  outputs.format = format;
  std::unique_ptr<RunProgress> progress;
  const auto attach = [&](const Scenario& scenario, GraphExecutor& executor) {
    attach_outputs(options, planned, scenario, executor, outputs);
    if (!options.progress) return;
    progress = std::make_unique<RunProgress>(
        err,
        fmt::format("{} iteration{}{}", scenario.iterations, scenario.iterations == 1 ? "" : "s",
                    scenario.iterations_chosen ? " (steady-state search)" : ""));
    executor.add_observer(progress.get());
  };
  if (options.trace_iterations) {
    (void)parse_trace_iterations(*options.trace_iterations, UINT32_MAX);  // a typo fails first
  }
  const SteadyRun run = run_to_steady_state(doc, attach);
  write_run_outputs(options, doc, run, outputs);

  for (const std::string& w : run_warnings(run.scenario.warnings, run.stats))
    err << "upsim: warning: " << w << "\n";
  if (options.quiet) {
    out << fmt::format("{:.4f}\n", run.summary.predicted_iteration_time.ms());
    return;
  }
  // The console shows the slowest ranks of a large run; summary.txt keeps every rank.
  constexpr size_t kConsoleRankRows = 16;
  out << run.scenario.header
      << summary_with_metrics(run.scenario, run.summary,
                              format_run_summary(run.summary, kConsoleRankRows));
  if (!run.scenario.measured_iteration.empty()) {
    out << format_measured_comparison(run.scenario, run.summary);
  }
  out.flush();
  print_simulation_stats(run, outputs.trace_seconds, err);
  print_output_notes(options, run, outputs, trace_in_folder, err);
}

}  // namespace upsim::cli
