#include "tools/run_tables.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

#include "sim/export/json_text.h"
#include "sim/parallel_dim.h"
#include "tools/run_metrics.h"

namespace upsim::cli {

namespace {

/// A double as the shortest text that reads back to it (fmt's default), never "nan" or "inf"
/// (JSON has neither): those become null.
std::string number(double x) {
  if (!std::isfinite(x)) return "null";
  return fmt::format("{}", x);
}

std::string ms(Duration d) {
  return format_ms(d);
}

/// A total over `iterations` iterations as a per-iteration mean in ms (to the picosecond).
std::string per_iteration_ms(Duration total, uint32_t iterations) {
  return ms(iterations == 0 ? total : total / static_cast<int64_t>(iterations));
}

/// A count over the measured iterations, per iteration (the count itself for none).
std::string per_iteration_count(uint64_t count, uint32_t iterations) {
  return number(iterations == 0 ? static_cast<double>(count)
                                : static_cast<double>(count) / static_cast<double>(iterations));
}

/// The per-iteration breakdown columns of a rank, in the order of the text summary.
struct Column {
  std::string_view name;
  Duration RankBreakdown::*total;
};
constexpr std::array<Column, 8> kColumns{{
    {"compute_ms", &RankBreakdown::compute_busy},
    {"communication_ms", &RankBreakdown::communication},
    {"exposed_communication_ms", &RankBreakdown::exposed_communication},
    {"bubble_ms", &RankBreakdown::bubble},
    {"rendezvous_wait_ms", &RankBreakdown::rendezvous_wait},
    {"cpu_bound_idle_ms", &RankBreakdown::cpu_bound_idle},
    {"other_idle_ms", &RankBreakdown::other_idle},
    {"collective_wait_ms", &RankBreakdown::collective_wait},
}};

std::string string_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += json_quoted(items[i]);
  }
  return out + "]";
}

std::string_view comparison_name(MeasuredComparison::Kind kind) {
  switch (kind) {
    case MeasuredComparison::Kind::kError:
      return "error";
    case MeasuredComparison::Kind::kWhatIf:
      return "what-if";
    case MeasuredComparison::Kind::kNone:
      return "none";
  }
  return "none";
}

}  // namespace

std::string format_ms(Duration d) {
  const int64_t ps = d.ps();
  const uint64_t magnitude = ps < 0 ? 0 - static_cast<uint64_t>(ps) : static_cast<uint64_t>(ps);
  std::string out;
  if (ps < 0) out += '-';
  out += std::to_string(magnitude / 1'000'000'000);
  std::string frac = fmt::format("{:09}", magnitude % 1'000'000'000);
  while (!frac.empty() && frac.back() == '0')
    frac.pop_back();
  if (!frac.empty()) {
    out += '.';
    out += frac;
  }
  return out;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string summary_json(const RunIdentity& identity, const Scenario& scenario,
                         const RunSummary& summary, const RunStats& stats) {
  const ScenarioPlatform& p = scenario.platform;
  std::string out = "{\n";
  out += fmt::format("  \"schema\": \"upsim.summary\",\n  \"schema_version\": {},\n",
                     kSummarySchemaVersion);
  out += fmt::format(
      "  \"scenario\": {{\"name\": {}, \"description\": {}, \"file\": {}, \"overrides\": {}}},\n",
      json_quoted(scenario.name), json_quoted(scenario.description_text),
      json_quoted(identity.scenario_file), string_list(identity.overrides));
  out += fmt::format(
      "  \"platform\": {{\"gpus\": {}, \"represented_gpus\": {}, \"gpu\": {}, "
      "\"gpu_memory_bytes\": {}, \"kernel_model\": {}, \"host_model\": {}, \"interconnect\": {}, "
      "\"fabric\": {}}},\n",
      p.gpus, scenario.represented_gpus, json_quoted(p.gpu), p.gpu_memory_bytes,
      json_quoted(p.kernel_model), json_quoted(p.host_model), json_quoted(p.interconnect),
      json_quoted(p.fabric));
  const uint32_t measured = summary.ranks.empty() ? 0 : summary.ranks.front().measured_iterations;
  out += fmt::format(
      "  \"iterations\": {{\"simulated\": {}, \"warmup\": {}, \"measured\": {}}},\n"
      "  \"predicted_iteration_time_ms\": {},\n",
      summary.iterations, summary.warmup_iterations, measured,
      ms(summary.predicted_iteration_time));
  const std::optional<RunMetrics> metrics = run_metrics(scenario, summary);
  out += fmt::format("  {},\n",
                     metrics ? run_metrics_json(*metrics) : std::string("\"throughput\": null"));
  out += "  \"ranks\": [";
  for (size_t r = 0; r < summary.ranks.size(); ++r) {
    const RankBreakdown& b = summary.ranks[r];
    out += fmt::format("{}\n    {{\"rank\": {}, \"name\": {}, \"iteration_time_ms\": {}",
                       r ? "," : "", r, json_quoted(b.name), ms(b.iteration_time));
    for (const Column& c : kColumns) {
      out += fmt::format(", \"{}\": {}", c.name,
                         per_iteration_ms(b.*(c.total), b.measured_iterations));
    }
    out += ", \"exposed_by_dim\": {";
    bool first = true;
    for (const ParallelDim d : kParallelDims) {
      if ((summary.parallel_dims & (1u << parallel_dim_index(d))) == 0) continue;
      out += fmt::format(
          "{}\"{}\": {}", first ? "" : ", ", parallel_dim_name(d),
          per_iteration_ms(b.exposed_by_dim[parallel_dim_index(d)], b.measured_iterations));
      first = false;
    }
    out += fmt::format(
        "}}, \"kernels\": {}, \"collectives\": {}, \"kernels_per_iteration\": {}, "
        "\"collectives_per_iteration\": {}, \"iteration_times_ms\": [",
        b.kernels, b.collectives, per_iteration_count(b.kernels, b.measured_iterations),
        per_iteration_count(b.collectives, b.measured_iterations));
    for (size_t k = 0; k < b.iteration_times.size(); ++k) {
      if (k) out += ", ";
      out += ms(b.iteration_times[k]);
    }
    out += "]}";
  }
  out += summary.ranks.empty() ? "],\n" : "\n  ],\n";
  out += "  \"links\": [";
  const double iterations = summary.iterations == 0 ? 1.0 : summary.iterations;
  for (size_t l = 0; l < summary.links.size(); ++l) {
    const LinkUsage& u = summary.links[l];
    // bytes / busy_ms (schema 1's first names) and the same under links.csv's names.
    const std::string bytes = number(u.bytes / iterations);
    const std::string busy = ms(u.busy / static_cast<int64_t>(iterations));
    out += fmt::format(
        "{}\n    {{\"name\": {}, \"capacity_gbytes_per_s\": {}, \"bytes\": {}, \"busy_ms\": {}, "
        "\"bytes_per_iteration\": {}, \"busy_ms_per_iteration\": {}}}",
        l ? "," : "", json_quoted(u.name), number(u.capacity.gigabytes_per_second()), bytes, busy,
        bytes, busy);
  }
  out += summary.links.empty() ? "],\n" : "\n  ],\n";
  if (scenario.memory) {
    const MemoryFootprint& m = *scenario.memory;
    out += fmt::format("  \"memory\": {{\"owner\": {}, \"parts\": [", json_quoted(m.owner));
    for (size_t i = 0; i < m.parts.size(); ++i) {
      out += fmt::format("{}{{\"name\": {}, \"bytes\": {}}}", i ? ", " : "",
                         json_quoted(m.parts[i].name), m.parts[i].bytes);
    }
    out += fmt::format("], \"total_bytes\": {}, \"capacity_bytes\": {}}},\n", m.total_bytes(),
                       p.gpu_memory_bytes);
  } else {
    out += "  \"memory\": null,\n";
  }
  if (scenario.measured_iteration.empty()) {
    out += "  \"measured\": null,\n";
  } else {
    out += fmt::format("  \"measured\": {{\"comparison\": \"{}\", \"reason\": {}, \"ranks\": [",
                       comparison_name(scenario.comparison.kind),
                       json_quoted(scenario.comparison.reason));
    for (size_t r = 0; r < scenario.measured_iteration.size() && r < summary.ranks.size(); ++r) {
      out += fmt::format("{}{{\"rank\": {}, \"measured_ms\": {}, \"predicted_ms\": {}}}",
                         r ? ", " : "", r, ms(scenario.measured_iteration[r]),
                         ms(summary.ranks[r].iteration_time));
    }
    out += "], \"steps\": [";
    for (size_t k = 0; k < scenario.measured_step_labels.size(); ++k) {
      out += fmt::format("{}{{\"label\": {}, \"ranks_measured_ms\": [", k ? ", " : "",
                         json_quoted(scenario.measured_step_labels[k]));
      for (size_t r = 0; r < scenario.measured_step_times.size(); ++r) {
        const std::vector<Duration>& steps = scenario.measured_step_times[r];
        if (r) out += ", ";
        out += ms(k < steps.size() ? steps[k] : Duration::zero());
      }
      out += "]}";
    }
    out += "]},\n";
  }
  out += "  \"warnings\": " + string_list(scenario.warnings) + ",\n";
  out += fmt::format("  \"simulation\": {{\"tasks\": {}, \"events\": {}}}\n}}\n", stats.tasks_done,
                     stats.events);
  return out;
}

std::string ranks_csv(const RunSummary& summary) {
  std::string out = "rank,name,iteration_time_ms";
  for (const Column& c : kColumns)
    out += fmt::format(",{}", c.name);
  out += ",kernels,collectives,kernels_per_iteration,collectives_per_iteration\n";
  for (size_t r = 0; r < summary.ranks.size(); ++r) {
    const RankBreakdown& b = summary.ranks[r];
    out += fmt::format("{},{},{}", r, csv_field(b.name), ms(b.iteration_time));
    for (const Column& c : kColumns) {
      out += ',';
      out += per_iteration_ms(b.*(c.total), b.measured_iterations);
    }
    out += fmt::format(",{},{},{},{}\n", b.kernels, b.collectives,
                       per_iteration_count(b.kernels, b.measured_iterations),
                       per_iteration_count(b.collectives, b.measured_iterations));
  }
  return out;
}

std::string links_csv(const RunSummary& summary) {
  std::string out = "name,capacity_gbytes_per_s,bytes_per_iteration,busy_ms_per_iteration\n";
  const double iterations = summary.iterations == 0 ? 1.0 : summary.iterations;
  for (const LinkUsage& u : summary.links) {
    out +=
        fmt::format("{},{},{},{}\n", csv_field(u.name), number(u.capacity.gigabytes_per_second()),
                    number(u.bytes / iterations), ms(u.busy / static_cast<int64_t>(iterations)));
  }
  return out;
}

std::string ops_csv(const std::vector<OpProfileRow>& rows, uint32_t measured_iterations,
                    size_t ranks) {
  const int64_t n = measured_iterations == 0 ? 1 : measured_iterations;
  const int64_t rank_count = ranks == 0 ? 1 : static_cast<int64_t>(ranks);
  // Shares are of the time of the row's kind: a kernel's of all kernel time, a host sync's of
  // all host-sync time (waits and work do not add up to one whole).
  std::array<double, 16> kind_ms{};
  for (const OpProfileRow& r : rows)
    kind_ms[static_cast<size_t>(r.kind) % kind_ms.size()] += r.total.ms();
  std::string out =
      "kind,op,name,count_per_iteration,time_ms_per_iteration,share_of_kind,ranks,"
      "time_ms_per_iteration_per_rank\n";
  for (const OpProfileRow& r : rows) {
    const double total = kind_ms[static_cast<size_t>(r.kind) % kind_ms.size()];
    out += fmt::format(
        "{},{},{},{},{},{},{},{}\n", task_kind_name(r.kind), csv_field(r.op), csv_field(r.name),
        number(static_cast<double>(r.count) / static_cast<double>(n)), ms(r.total / n),
        number(total > 0.0 ? r.total.ms() / total : 0.0), rank_count, ms(r.total / n / rank_count));
  }
  return out;
}

}  // namespace upsim::cli
