#include "workloads/trace/trace_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "sim/engine.h"
#include "sim/formats/parse_error.h"
#include "sim/network_model.h"
#include "sim/observer.h"
#include "workloads/trace/chakra_trace.h"
#include "workloads/trace/trace_file.h"

namespace upsim {

namespace {

/// Models for a replay: every task carries its measured duration, so asking a model is a bug.
class MeasuredOnlyKernels final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc&, const DeviceProfile&) const override {
    throw std::logic_error("trace replay: a kernel without a measured duration");
  }
};

class MeasuredOnlyCpu final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& op) const override {
    throw std::logic_error("trace replay: host work `" + std::string(op.op_name) +
                           "` without a measured duration");
  }
};

class MeasuredOnlyNetwork final : public NetworkModel {
 public:
  void start_collective(Engine&, const CollectiveDesc&, Completion) override {
    throw std::logic_error("trace replay: a collective without a measured duration");
  }
  void start_transfer(Engine&, const TransferDesc&, Completion) override {
    throw std::logic_error("trace replay: a copy without a measured duration");
  }
};

/// Records when each rank passes each IterationMark.
class IterationMarkObserver final : public Observer {
 public:
  void on_run_begin(const TaskGraph& graph) override {
    graph_ = &graph;
    marks_.assign(graph.rank_count(), {});
  }
  void on_task_begin(TaskId task, Time at) override {
    const Task& t = graph_->task(task);
    if (t.kind == TaskKind::kIterationMark) marks_[t.rank].emplace(graph_->iteration_of(task), at);
  }
  const std::map<uint32_t, Time>& marks(RankId rank) const { return marks_[rank]; }

 private:
  const TaskGraph* graph_ = nullptr;
  std::vector<std::map<uint32_t, Time>> marks_;
};

std::string name_of(const std::filesystem::path& p) {
  return p.filename().string();
}

/// The first run of digits in a file name ("worker3_step_12..." -> 3), or -1.
int64_t first_number(const std::string& name) {
  int64_t v = -1;
  for (char c : name) {
    if (c >= '0' && c <= '9') {
      v = (v < 0 ? 0 : v * 10) + (c - '0');
      if (v > 1'000'000) return -1;
    } else if (v >= 0) {
      return v;
    }
  }
  return v;
}

bool is_json_name(const std::string& n) {
  return n.ends_with(".json") || n.ends_with(".json.gz");
}

/// "12 kernels, 2 copies with zero duration ..." for the GPU work of `k` whose `dur` is 0, or "".
/// Only GPU work is counted: replay gives each such task its measured duration, so it runs in no
/// time. Host events with dur 0 (cpu ops, runtime calls, annotations: a whole-microsecond clock
/// writes hundreds per rank) are not: host time is replayed from the gaps between the cut points'
/// timestamps, which such an event does not shorten.
std::string zero_duration_counts(const KinetoTrace& k) {
  std::string out;
  const auto add = [&](KinetoCategory c, const char* one, const char* many) {
    const uint64_t n = k.zero_duration[static_cast<size_t>(c)];
    if (n == 0) return;
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + (n == 1 ? one : many);
  };
  add(KinetoCategory::kKernel, "kernel", "kernels");
  add(KinetoCategory::kGpuMemcpy, "copy", "copies");
  add(KinetoCategory::kGpuMemset, "memset", "memsets");
  return out;
}

void warn_zero_durations(const KinetoTrace& k, int64_t rank, std::vector<std::string>& warnings) {
  const std::string counts = zero_duration_counts(k);
  if (counts.empty()) return;
  warnings.push_back(k.file + " (rank " + std::to_string(rank) + "): " + counts +
                     " with zero duration (shorter than the trace's clock resolution, or not "
                     "timed): each takes no time wherever its measured duration is kept");
}

/// What a rank without its execution trace loses (trace_graph.h): the process group and sequence
/// number of its collectives (unless Kineto's record_param_comms args carry them; when a rank
/// has neither, every rank's collectives are matched by launch order) and, in model mode, the
/// input shapes of ops that Kineto recorded without "Input Dims" (their kernels keep their
/// measured time). No mode needs the execution trace to run, so this is a warning, not an error.
std::string et_missing_consequence(const TraceGraphOptions& graph) {
  std::string out =
      "those ranks replay from Kineto alone: their collectives take process group and sequence "
      "number from Kineto's record_param_comms args where recorded, else every rank's "
      "collectives are matched by launch order";
  if (graph.mode == TraceMode::kModel) {
    out +=
        ", and their kernels take shapes from Kineto's Input Dims only (kernels of ops "
        "without them keep their measured time)";
  }
  return out;
}

void attach_et(RankTrace& rank, ExecutionTrace et, const TraceSetOptions& options,
               std::vector<std::string>& warnings) {
  EtLink link = link_execution_trace(rank.kineto, et);
  if (const auto problem = et_link_problem(link, rank.kineto, et)) {
    if (options.strict_et) throw ParseError(et.file, *problem);
    warnings.push_back(et.file + ": " + *problem + "; replaying " + name_of(rank.kineto.file) +
                       " without it");
    return;
  }
  rank.link = std::move(link);
  rank.et = std::move(et);
}

}  // namespace

RankTrace load_rank_trace(const std::filesystem::path& kineto,
                          const std::optional<std::filesystem::path>& et,
                          const TraceSetOptions& options, std::vector<std::string>& warnings) {
  RankTrace r;
  r.kineto = read_kineto_trace(kineto);
  warn_zero_durations(r.kineto, r.kineto.distributed.rank >= 0 ? r.kineto.distributed.rank : 0,
                      warnings);
  if (et) attach_et(r, read_execution_trace(*et), options, warnings);
  return r;
}

LoadedTraces load_trace_directory(const std::filesystem::path& dir,
                                  const TraceSetOptions& options) {
  const std::string dname = dir.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw ParseError(dname, "not a directory");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && is_json_name(entry.path().filename().string())) {
      files.push_back(entry.path());
    }
  }
  if (ec) throw ParseError(dname, "cannot list the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  LoadedTraces out;
  std::vector<RankTrace> kinetos;
  std::vector<ExecutionTrace> ets;
  for (const auto& f : files) {
    const std::string text = read_trace_file(f);
    // A Kineto trace has `traceEvents`, an execution trace `nodes` (both near the top).
    const std::string_view head = std::string_view(text).substr(0, 1 << 16);
    const bool kineto = head.find("\"traceEvents\"") != std::string_view::npos ||
                        (head.find("\"nodes\"") == std::string_view::npos &&
                         text.find("\"traceEvents\"") != std::string::npos);
    if (kineto) {
      RankTrace r;
      r.kineto = parse_kineto_trace(text, f.string());
      kinetos.push_back(std::move(r));
    } else if (text.find("\"nodes\"") != std::string::npos) {
      ets.push_back(parse_execution_trace(text, f.string()));
    } else {
      out.warnings.push_back(f.string() +
                             ": neither a Kineto trace nor an execution trace; ignored");
    }
  }
  if (kinetos.empty()) throw ParseError(dname, "no Kineto trace (a JSON file with traceEvents)");

  // Ranks.
  std::vector<int64_t> rank_of(kinetos.size());
  int32_t world = -1;
  for (size_t i = 0; i < kinetos.size(); ++i) {
    const KinetoTrace& k = kinetos[i].kineto;
    rank_of[i] = k.distributed.rank >= 0 ? k.distributed.rank : first_number(name_of(k.file));
    if (rank_of[i] < 0) rank_of[i] = static_cast<int64_t>(i);
    if (k.distributed.world_size > 0) {
      if (world > 0 && k.distributed.world_size != world) {
        throw ParseError(k.file, "world size " + std::to_string(k.distributed.world_size) +
                                     " differs from the other traces' " + std::to_string(world) +
                                     ": traces of different runs");
      }
      world = k.distributed.world_size;
    }
  }
  std::map<int64_t, size_t> by_rank;
  for (size_t i = 0; i < kinetos.size(); ++i) {
    const auto [it, inserted] = by_rank.emplace(rank_of[i], i);
    if (!inserted) {
      throw ParseError(kinetos[i].kineto.file, "rank " + std::to_string(rank_of[i]) +
                                                   " again (also in " +
                                                   name_of(kinetos[it->second].kineto.file) + ")");
    }
  }
  if (world > 1 && kinetos.size() > 1) {
    std::string missing;
    for (int64_t r = 0; r < world; ++r) {
      if (!by_rank.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!missing.empty()) {
      throw ParseError(dname, "no trace for rank " + missing + " of world size " +
                                  std::to_string(world) + " (found " +
                                  std::to_string(kinetos.size()) + " Kineto traces)");
    }
  }

  // Execution traces: by process id, else by the number in the file name.
  std::vector<bool> et_used(ets.size(), false);
  std::vector<int64_t> et_of(kinetos.size(), -1);
  for (size_t i = 0; i < kinetos.size(); ++i) {
    const int64_t pid = kineto_process_id(kinetos[i].kineto);
    for (size_t e = 0; e < ets.size(); ++e) {
      if (!et_used[e] && ets[e].pid >= 0 && ets[e].pid == pid) {
        et_of[i] = static_cast<int64_t>(e);
        et_used[e] = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < kinetos.size(); ++i) {
    if (et_of[i] >= 0) continue;
    for (size_t e = 0; e < ets.size(); ++e) {
      if (et_used[e]) continue;
      const bool single = kinetos.size() == 1 && ets.size() == 1;
      if (single || first_number(name_of(ets[e].file)) == rank_of[i]) {
        et_of[i] = static_cast<int64_t>(e);
        et_used[e] = true;
        break;
      }
    }
  }
  for (size_t e = 0; e < ets.size(); ++e) {
    if (!et_used[e]) {
      const std::string msg = "execution trace matches no Kineto trace in " + dname + " (process " +
                              std::to_string(ets[e].pid) + ")";
      if (options.strict_et) throw ParseError(ets[e].file, msg);
      out.warnings.push_back(ets[e].file + ": " + msg + "; ignored");
    }
  }
  // Some ranks have an execution trace and others none: the latter replay from Kineto alone
  // (see et_missing_consequence), which the run says rather than leaving the mix unnoticed.
  std::vector<std::string> without_et;
  if (!ets.empty()) {
    for (const auto& [rank, i] : by_rank) {
      if (et_of[i] < 0) {
        without_et.push_back("rank " + std::to_string(rank) + ": " +
                             name_of(kinetos[i].kineto.file));
      }
    }
  }
  if (!without_et.empty()) {
    std::string list;
    constexpr size_t kListed = 8;
    for (size_t j = 0; j < without_et.size() && j < kListed; ++j)
      list += (j == 0 ? "" : ", ") + without_et[j];
    if (without_et.size() > kListed)
      list += fmt::format(", ... {} more", without_et.size() - kListed);
    out.warnings.push_back(fmt::format(
        "{}: execution trace missing for {} of {} ranks ({}), while the others have one: {}", dname,
        without_et.size(), by_rank.size(), list, et_missing_consequence(options.graph)));
  }
  for (const auto& [rank, i] : by_rank) {
    RankTrace r = std::move(kinetos[i]);
    warn_zero_durations(r.kineto, rank, out.warnings);
    if (et_of[i] >= 0)
      attach_et(r, std::move(ets[static_cast<size_t>(et_of[i])]), options, out.warnings);
    out.ranks.push_back(std::move(r));
  }
  return out;
}

TraceReplayResult replay_traces(const std::vector<RankTrace>& traces,
                                const TraceSetOptions& options, const CpuCostModel* host) {
  if (options.graph.host == TraceHost::kModelled && host == nullptr) {
    throw std::invalid_argument("replay_traces: modelled host time needs a host cost model");
  }
  TaskGraph graph;
  const TraceGraphInfo info = build_replay_graph(traces, graph, options.graph);
  graph.seal();
  return run_replay_graph(graph, info, options, host);
}

TraceReplayResult run_replay_graph(const TaskGraph& graph, const TraceGraphInfo& info,
                                   const TraceSetOptions& options, const CpuCostModel* host) {
  MeasuredOnlyKernels kernels;
  MeasuredOnlyCpu cpu;
  MeasuredOnlyNetwork network;
  ModelSet models;
  models.kernels = &kernels;
  models.cpu = host != nullptr ? host : &cpu;
  models.network = &network;
  for (const TraceRankSummary& r : info.ranks) {
    DeviceProfile d;
    d.name = r.device;
    models.devices.push_back(d);
  }
  return run_trace_graph(graph, info, models, options);
}

TraceReplayResult run_trace_graph(const TaskGraph& graph, const TraceGraphInfo& info,
                                  const ModelSet& models, const TraceSetOptions& options,
                                  const std::vector<Observer*>& observers) {
  TraceReplayResult result;
  result.graph = info;
  Engine engine;
  GraphExecutor executor(engine, graph, models);
  IterationMarkObserver marks;
  executor.add_observer(&marks);
  for (Observer* o : observers)
    executor.add_observer(o);
  result.stats = executor.run();

  for (const TraceRankSummary& rs : result.graph.ranks) {
    RankValidation v;
    v.rank = rs.rank;
    v.file = rs.file;
    const auto& m = marks.marks(rs.rank);
    int64_t measured = 0;
    int64_t predicted = 0;
    for (const TraceIteration& it : rs.iterations) {
      if (options.iteration && it.start_mark != *options.iteration) continue;
      const auto b = m.find(it.start_mark);
      const auto e = m.find(it.end_mark);
      if (b == m.end() || e == m.end()) continue;
      measured += it.measured.ps();
      predicted += (e->second - b->second).ps();
      v.step_labels.push_back(it.label);
      v.step_measured.push_back(it.measured);
      v.step_predicted.push_back(e->second - b->second);
      ++v.iterations;
      v.iteration = it.label;
      if (v.not_an_iteration.empty()) v.not_an_iteration = it.not_an_iteration;
    }
    if (v.iterations == 0) {
      throw ParseError(rs.file, options.iteration
                                    ? "no complete iteration " + std::to_string(*options.iteration)
                                    : std::string("no complete iteration"));
    }
    if (v.iterations > 1) v.iteration = "mean of " + std::to_string(v.iterations) + " iterations";
    v.measured = Duration::from_ps(measured / v.iterations);
    v.predicted = Duration::from_ps(predicted / v.iterations);
    v.error =
        v.measured.ps() > 0 && v.not_an_iteration.empty()
            ? static_cast<double>(v.predicted.ps()) / static_cast<double>(v.measured.ps()) - 1.0
            : 0.0;
    result.ranks.push_back(std::move(v));
  }
  return result;
}

namespace {

/// The last run of digits in a file name ("dlrm.3.et" -> 3), or -1.
int64_t last_number(const std::string& name) {
  int64_t v = -1;
  int64_t cur = -1;
  for (char c : name) {
    if (c >= '0' && c <= '9') {
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
      if (cur > 1'000'000) cur = -1;
    } else if (cur >= 0) {
      v = cur;
      cur = -1;
    }
  }
  return cur >= 0 ? cur : v;
}

/// Chakra files of `dir` (*.et, *.et.gz), in rank order (the number before ".et"), or empty.
std::vector<std::filesystem::path> chakra_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = entry.path().filename().string();
    if (entry.is_regular_file() && (n.ends_with(".et") || n.ends_with(".et.gz"))) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const int64_t ra = last_number(a.filename().string());
    const int64_t rb = last_number(b.filename().string());
    return ra != rb ? ra < rb : a < b;
  });
  return out;
}

}  // namespace

bool is_chakra_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) || chakra_files(dir).empty()) return false;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (is_json_name(entry.path().filename().string())) return false;
  }
  return true;
}

std::vector<ChakraTrace> load_chakra_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw ParseError(dir.string(), "not a directory");
  const std::vector<std::filesystem::path> files = chakra_files(dir);
  if (files.empty()) throw ParseError(dir.string(), "no Chakra trace (*.et, *.et.gz)");
  std::vector<ChakraTrace> traces;
  for (const auto& f : files)
    traces.push_back(read_chakra_trace(f));
  return traces;
}

TraceReplayResult validate_chakra_directory(const std::filesystem::path& dir) {
  const std::vector<ChakraTrace> traces = load_chakra_directory(dir);
  TaskGraph graph;
  std::vector<std::string> warnings;
  const TraceGraphInfo info = build_chakra_graph(traces, graph, {}, &warnings);
  graph.seal();
  TraceReplayResult result = run_replay_graph(graph, info);
  result.warnings.insert(result.warnings.end(), warnings.begin(), warnings.end());
  return result;
}

TraceReplayResult validate_trace_directory(const std::filesystem::path& dir,
                                           const TraceSetOptions& options) {
  if (is_chakra_directory(dir)) return validate_chakra_directory(dir);
  LoadedTraces loaded = load_trace_directory(dir, options);
  TraceReplayResult result = replay_traces(loaded.ranks, options);
  result.warnings.insert(result.warnings.begin(), loaded.warnings.begin(), loaded.warnings.end());
  return result;
}

double geomean_abs_error(const std::vector<RankValidation>& ranks) {
  // Lin et al., TPDS 2024: GMAE = exp(mean(ln(|e| + 4e-4))).
  double sum = 0.0;
  size_t n = 0;
  for (const RankValidation& r : ranks) {
    if (!r.not_an_iteration.empty()) continue;
    sum += std::log(std::fabs(r.error) + 4e-4);
    ++n;
  }
  return n == 0 ? 0.0 : std::exp(sum / static_cast<double>(n));
}

std::string format_trace_steps(const std::vector<RankValidation>& ranks) {
  std::vector<std::string> labels;
  for (const RankValidation& r : ranks) {
    if (!r.not_an_iteration.empty()) continue;
    for (const std::string& l : r.step_labels) {
      if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
    }
  }
  if (labels.size() < 2) return "";
  size_t width = 4;
  for (const std::string& l : labels)
    width = std::max(width, l.size());
  std::string out = fmt::format("per step ({} steps; means over the ranks):\n", labels.size());
  out += fmt::format("{:<{}} {:>14} {:>15} {:>8} {:>16}\n", "step", width, "measured (ms)",
                     "predicted (ms)", "error", "worst rank");
  double log_sum = 0.0;
  size_t n = 0;
  double worst = 0.0;
  std::string worst_step;
  for (const std::string& label : labels) {
    double measured = 0.0;
    double predicted = 0.0;
    size_t count = 0;
    double rank_worst = 0.0;
    RankId rank_worst_at = 0;
    for (const RankValidation& r : ranks) {
      if (!r.not_an_iteration.empty()) continue;
      for (size_t k = 0; k < r.step_labels.size(); ++k) {
        if (r.step_labels[k] != label || r.step_measured[k] <= Duration::zero()) continue;
        measured += r.step_measured[k].ms();
        predicted += r.step_predicted[k].ms();
        ++count;
        const double e = r.step_predicted[k].seconds() / r.step_measured[k].seconds() - 1.0;
        if (std::fabs(e) >= std::fabs(rank_worst)) {
          rank_worst = e;
          rank_worst_at = r.rank;
        }
      }
    }
    if (count == 0) continue;
    const double e = predicted / measured - 1.0;
    log_sum += std::log(std::fabs(e) + 4e-4);
    ++n;
    if (std::fabs(e) >= std::fabs(worst)) {
      worst = e;
      worst_step = label;
    }
    out +=
        fmt::format("{:<{}} {:>14.4f} {:>15.4f} {:>+7.2f}% {:>+7.2f}% rank {:<3}\n", label, width,
                    measured / static_cast<double>(count), predicted / static_cast<double>(count),
                    100.0 * e, 100.0 * rank_worst, rank_worst_at);
  }
  if (n > 0) {
    out += fmt::format("per-step |error|: geomean {:.2f}% over {} steps, worst {:+.2f}% ({})\n",
                       100.0 * std::exp(log_sum / static_cast<double>(n)), n, 100.0 * worst,
                       worst_step);
  }
  return out;
}

std::string format_trace_validation(const std::vector<RankValidation>& ranks) {
  std::string out = fmt::format("{:<5} {:<46} {:<24} {:>14} {:>15} {:>8}\n", "rank", "trace",
                                "iteration", "measured (ms)", "predicted (ms)", "error");
  std::string reasons;
  double max_abs = 0.0;
  size_t compared = 0;
  for (const RankValidation& r : ranks) {
    const std::string name = std::filesystem::path(r.file).filename().string();
    std::string file = name;
    if (file.size() > 46) file = file.substr(0, 43) + "...";
    if (!r.not_an_iteration.empty()) {
      out += fmt::format("{:<5} {:<46} {:<24} {:>14.4f} {:>15.4f} {:>8}\n", r.rank, file,
                         r.iteration, r.measured.ms(), r.predicted.ms(), "n/a");
      reasons += fmt::format("n/a: {}: {}\n", name, r.not_an_iteration);
      continue;
    }
    out += fmt::format("{:<5} {:<46} {:<24} {:>14.4f} {:>15.4f} {:>+7.2f}%\n", r.rank, file,
                       r.iteration, r.measured.ms(), r.predicted.ms(), r.error * 100.0);
    max_abs = std::max(max_abs, std::fabs(r.error));
    ++compared;
  }
  out += reasons;
  if (compared > 0) {
    out += fmt::format("geomean |error| {:.2f}% (exp mean ln(|e| + 4e-4)), max |error| {:.2f}%\n",
                       geomean_abs_error(ranks) * 100.0, max_abs * 100.0);
  }
  return out;
}

}  // namespace upsim
