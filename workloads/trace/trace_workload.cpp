#include "workloads/trace/trace_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "sim/formats/parse_error.h"
#include "workloads/trace/trace_graph.h"
#include "workloads/trace/trace_host_overheads.h"

namespace upsim {

namespace {

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

/// Rank 0's iteration marks, in order: the summary measures from the chosen one to the next.
std::vector<uint32_t> iteration_marks_of_rank0(const TaskGraph& g) {
  std::vector<uint32_t> marks;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind == TaskKind::kIterationMark && g.task(t).rank == 0) {
      marks.push_back(g.iteration_of(t));
    }
  }
  return marks;
}

}  // namespace

HostOverheads trace_host_overheads(const std::vector<RankTrace>& traces) {
  std::vector<const KinetoTrace*> kinetos;
  for (const RankTrace& t : traces)
    kinetos.push_back(&t.kineto);
  return host_overheads_of(extract_host_overheads(kinetos, 0.0));
}

TraceWorkload::TraceWorkload(const ConfigNode& workload) : node_(workload) {
  dir_ = workload.get_path("traces");
  traces_text_ = workload.get_string("traces");
  const bool explicit_format = workload.has("format");
  const std::string format = explicit_format ? workload.get_choice("format", {"kineto", "chakra"})
                                             : (is_chakra_directory(dir_) ? "chakra" : "kineto");
  chakra_format_ = format == "chakra";
  const std::string mode = workload.get_choice_or("mode", {"replay", "model"}, "replay");
  options_.graph.mode = mode == "model" ? TraceMode::kModel : TraceMode::kReplay;
  host_ = workload.get_choice_or("host", {"measured", "modelled", "platform"}, "measured");
  options_.graph.host = host_ == "measured" ? TraceHost::kMeasured : TraceHost::kModelled;
  // A failure to read the traces is reported at `format` when the scenario chose the format.
  const std::string_view read_key = explicit_format ? "format" : "traces";
  if (chakra_format_) {
    // A Chakra ET holds one iteration per rank, CPU ops without the runtime calls T1-T5 are
    // placed by, and no execution-trace pairing.
    for (const char* key : {"iteration", "iteration_marker", "lenient_et"}) {
      if (workload.has(key)) {
        workload.child(key).fail(
            "not for Chakra traces (format: chakra): each trace is one iteration of one rank");
      }
    }
    if (host_ != "measured") {
      workload.child("host").fail(
          "Chakra traces hold no CUDA runtime calls to place T1-T5 host overheads by: host must be "
          "measured (format: chakra)");
    }
    try {
      chakra_ = load_chakra_directory(dir_);
    } catch (const ParseError& e) {
      workload.child(read_key).fail(explicit_format ? fmt::format("format: chakra: {}", e.what())
                                                    : std::string(e.what()));
    }
    return;
  }
  options_.graph.iteration_marker = workload.get_string_or("iteration_marker", "ProfilerStep#");
  options_.strict_et = !workload.get_bool_or("lenient_et", false);
  if (workload.has("iteration")) {
    const int64_t it = workload.get_int("iteration");
    if (it < 0) workload.child("iteration").fail("must not be negative");
    options_.iteration = static_cast<uint32_t>(it);
  }
  try {
    traces_ = load_trace_directory(dir_, options_);
  } catch (const ParseError& e) {
    workload.child(read_key).fail(explicit_format ? fmt::format("format: kineto: {}", e.what())
                                                  : std::string(e.what()));
  }
  // One trace of a larger job (the usual profile: one rank of N): model mode prices its
  // collectives over the job's GPUs.
  if (options_.graph.mode == TraceMode::kModel && traces_.ranks.size() == 1 &&
      traces_.ranks[0].kineto.distributed.world_size > 1) {
    options_.graph.job_world_size =
        static_cast<uint32_t>(traces_.ranks[0].kineto.distributed.world_size);
  }
}

std::optional<uint32_t> TraceWorkload::implied_gpus() const {
  if (options_.graph.job_world_size > 0) return options_.graph.job_world_size;
  return static_cast<uint32_t>(ranks());
}

std::string TraceWorkload::implied_gpus_reason() const {
  if (options_.graph.job_world_size > 0) {
    return fmt::format(
        "the trace in {} is rank {} of a job of {} GPUs (distributedInfo.world_size): model mode "
        "prices its collectives over the job's GPUs",
        dir_.string(), traces_.ranks[0].kineto.distributed.rank, options_.graph.job_world_size);
  }
  return fmt::format("the traces in {} have {} ranks, one per GPU", dir_.string(), ranks());
}

std::optional<HostOverheads> TraceWorkload::host_overheads() const {
  if (host_ != "modelled") return std::nullopt;
  return trace_host_overheads(traces_.ranks);
}

WorkloadBuild TraceWorkload::build(const WorkloadPlatform& platform, TaskGraph& graph) {
  (void)platform;  // the traces fix the GPUs and the iterations
  std::vector<std::string> warnings = traces_.warnings;
  const TraceGraphInfo info = build_graph(graph, warnings);
  WorkloadBuild out;
  const MeasuredMarks measured = measured_marks(graph, out);
  add_measured_times(info, measured, out);
  add_measured_steps(info, measured, out);
  add_measured_run(info, out);
  add_description(info, measured.count, out);
  // Files named as the scenario names their folder.
  const std::string dir_text = dir_.string();
  for (std::string w : warnings) {
    if (w.starts_with(dir_text)) w = traces_text_ + w.substr(dir_text.size());
    out.warnings.push_back(std::move(w));
  }
  return out;
}

TraceGraphInfo TraceWorkload::build_graph(TaskGraph& graph,
                                          std::vector<std::string>& warnings) const {
  TraceGraphInfo info;
  try {
    if (chakra_format_) {
      ChakraGraphOptions options;
      options.mode = options_.graph.mode;
      info = build_chakra_graph(chakra_, graph, options, &warnings);
    } else {
      info = build_replay_graph(traces_.ranks, graph, options_.graph);
    }
  } catch (const ParseError& e) {
    node_.child("traces").fail(e.what());
  }
  return info;
}

TraceWorkload::MeasuredMarks TraceWorkload::measured_marks(const TaskGraph& graph,
                                                           WorkloadBuild& out) const {
  // Measure the chosen iteration (or every complete one): from its mark to the next.
  MeasuredMarks m;
  m.marks = iteration_marks_of_rank0(graph);
  const std::vector<uint32_t>& marks = m.marks;
  if (marks.size() < 2) node_.child("traces").fail("the traces hold no complete iteration");
  uint32_t first = 0;
  uint32_t count = static_cast<uint32_t>(marks.size() - 1);
  if (options_.iteration) {
    const auto it = std::find(marks.begin(), marks.end(), *options_.iteration);
    if (it == marks.end() || it + 1 == marks.end()) {
      node_.child("iteration")
          .fail(fmt::format("the traces have no complete iteration {}", *options_.iteration));
    }
    first = static_cast<uint32_t>(it - marks.begin());
    count = 1;
  }
  out.iterations = first + count;
  out.warmup_iterations = first;
  out.measured_iterations = count;
  m.first = first;
  m.count = count;
  return m;
}

void TraceWorkload::add_measured_times(const TraceGraphInfo& info, const MeasuredMarks& m,
                                       WorkloadBuild& out) {
  const std::vector<uint32_t>& marks = m.marks;
  const uint32_t first = m.first;
  const uint32_t count = m.count;
  for (const TraceRankSummary& r : info.ranks) {
    Duration measured = Duration::zero();
    uint32_t n = 0;
    for (const TraceIteration& it : r.iterations) {
      if (it.start_mark >= marks[first] && it.end_mark <= marks[first + count]) {
        measured += it.measured;
        ++n;
        if (out.measured_run.not_an_iteration.empty() && !it.not_an_iteration.empty()) {
          out.measured_run.not_an_iteration =
              fmt::format("{}: {}", file_name(r.file), it.not_an_iteration);
        }
      }
    }
    out.measured_iteration.push_back(n > 0 ? measured / n : Duration::zero());
  }
}

void TraceWorkload::add_measured_steps(const TraceGraphInfo& info, const MeasuredMarks& m,
                                       WorkloadBuild& out) {
  const std::vector<uint32_t>& marks = m.marks;
  const uint32_t first = m.first;
  const uint32_t count = m.count;
  // Several measured iterations: each one's measured time, so that a mean does not hide the
  // steps (a mean error of -8% over steps of -70% and +173%).
  if (count <= 1) return;
  for (uint32_t j = first; j < first + count; ++j) {
    std::string label = fmt::format("iteration {}", marks[j]);
    for (const TraceRankSummary& r : info.ranks) {
      for (const TraceIteration& it : r.iterations) {
        if (it.start_mark == marks[j] && !it.label.empty()) {
          label = it.label;
          break;
        }
      }
      if (label != fmt::format("iteration {}", marks[j])) break;
    }
    out.measured_step_labels.push_back(std::move(label));
  }
  for (const TraceRankSummary& r : info.ranks) {
    std::vector<Duration> steps(count, Duration::zero());
    for (const TraceIteration& it : r.iterations) {
      for (uint32_t j = first; j < first + count; ++j) {
        if (it.start_mark == marks[j] && it.end_mark == marks[j + 1])
          steps[j - first] = it.measured;
      }
    }
    out.measured_step_times.push_back(std::move(steps));
  }
}

void TraceWorkload::add_measured_run(const TraceGraphInfo& info, WorkloadBuild& out) const {
  // What the measurement ran on, and what the platform prices (tools/ compares accordingly).
  // The rank's GPU as the trace names it (TraceRankSummary::device: "GPU" when it does not).
  for (const TraceRankSummary& r : info.ranks) {
    std::vector<std::string>& gpus = out.measured_run.gpus;
    if (!r.device.empty() && r.device != "GPU" &&
        std::find(gpus.begin(), gpus.end(), r.device) == gpus.end()) {
      gpus.push_back(r.device);
    }
  }
  out.measured_run.prices_gpu_work = options_.graph.mode == TraceMode::kModel;
  out.measured_run.prices_host = host_ == "platform";
}

void TraceWorkload::add_description(const TraceGraphInfo& info, uint32_t count,
                                    WorkloadBuild& out) const {
  const bool model = options_.graph.mode == TraceMode::kModel;
  const std::string host_text = host_ == "measured"   ? ""
                                : host_ == "modelled" ? ", host time T1-T5 of the traces"
                                                      : ", host time by the platform's host model";
  const std::string of_ranks =
      options_.graph.job_world_size > 0
          ? fmt::format("of rank {} of a job of {} GPUs", traces_.ranks[0].kineto.distributed.rank,
                        options_.graph.job_world_size)
          : fmt::format("of {} rank{}", info.ranks.size(), info.ranks.size() == 1 ? "" : "s");
  out.description.push_back(fmt::format(
      "workload: trace ({}{} mode{}) {} from {}; {}", chakra_format_ ? "Chakra ET, " : "",
      model ? "model" : "replay", host_text, of_ranks, traces_text_,
      options_.iteration ? fmt::format("iteration {}", *options_.iteration)
                         : fmt::format("{} iteration{}", count, count == 1 ? "" : "s")));
  if (model) add_model_mode_description(info, out);
}

void TraceWorkload::add_model_mode_description(const TraceGraphInfo& info,
                                               WorkloadBuild& out) const {
  uint64_t kernel_count = 0;
  uint64_t kernels_kept = 0;
  uint64_t kernels_compiled = 0;
  uint64_t kernels_non_aten = 0;
  uint64_t collectives = 0;
  uint64_t collectives_kept = 0;
  uint64_t collectives_over_job = 0;
  uint64_t collectives_world_assumed = 0;
  for (const TraceRankSummary& r : info.ranks) {
    kernel_count += r.kernels;
    kernels_kept += r.kernels_kept_measured;
    kernels_compiled += r.kernels_compiled_kept_measured;
    kernels_non_aten += r.kernels_non_aten_kept_measured;
    collectives += r.collectives;
    collectives_kept += r.collectives_kept_measured;
    collectives_over_job += r.collectives_over_job;
    collectives_world_assumed += r.collectives_world_assumed;
  }
  std::string why;
  if (kernels_compiled > 0) {
    why += fmt::format(
        "{} in torch.compile regions or Inductor kernels, whose op inputs are "
        "not the kernel's; ",
        kernels_compiled);
  }
  if (kernels_non_aten > 0) {
    why += fmt::format(
        "{} launched by autograd nodes or ranges that are no operator, whose inputs need not "
        "be the kernel's; ",
        kernels_non_aten);
  }
  const uint64_t other = kernels_kept - kernels_compiled - kernels_non_aten;
  why += fmt::format("{} without shapes or a kernel model for the op", other);
  out.description.push_back(fmt::format(
      "model mode: kept measured {} of {} kernels ({}), {} of {} collectives (no peer rank "
      "known); the rest priced by the platform",
      kernels_kept, kernel_count, why, collectives_kept, collectives));
  if (options_.graph.job_world_size > 0) {
    out.represented_gpus = options_.graph.job_world_size;
    out.description.push_back(fmt::format(
        "collectives of the traced rank: {} of {} priced over their process group's GPUs on the "
        "platform, the other members mirroring the traced rank{}",
        collectives_over_job, collectives,
        collectives_world_assumed > 0
            ? fmt::format(" ({} without a recorded group, taken as all {} GPUs)",
                          collectives_world_assumed, options_.graph.job_world_size)
            : std::string()));
  }
}

std::unique_ptr<Workload> make_trace_workload(const ConfigNode& workload) {
  return std::make_unique<TraceWorkload>(workload);
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> trace_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"traces",
       "folder of per-rank Kineto traces (with or without execution traces) or Chakra ETs"},
      {"format", "kineto or chakra; default: by the folder's files"},
      {"mode", "measured durations (replay), or kernels, copies and collectives re-priced (model)"},
      {"host",
       "host time: measured, modelled (the traces' own T1-T5) or platform (its host model)"},
      {"iteration", "measure this step only; default: every complete one"},
      {"iteration_marker", "name prefix of the annotation that marks a step"},
      {"lenient_et", "a mismatched execution trace is a warning (true) or an error (false)"},
  };
  return kMeanings;
}

}  // namespace upsim
