#include "tools/run_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <vector>

namespace upsim::cli {

namespace {

/// "134.2 k", "2.10 M": a rate with an SI prefix, 3-4 significant digits.
std::string si(double value) {
  const char* prefixes[] = {"", " k", " M", " G", " T"};
  size_t p = 0;
  while (value >= 1000.0 && p + 1 < std::size(prefixes)) {
    value /= 1000.0;
    ++p;
  }
  return fmt::format("{:.{}f}{}", value, value >= 100.0 ? 1 : 2, prefixes[p]);
}

/// "null" or the number with 6 significant digits.
std::string json_number(const std::optional<double>& value) {
  return value ? fmt::format("{:.6g}", *value) : std::string("null");
}

}  // namespace

const RankBreakdown& slowest_rank(const RunSummary& summary) {
  for (const RankBreakdown& r : summary.ranks) {
    if (r.iteration_time == summary.predicted_iteration_time) return r;
  }
  return summary.ranks.front();
}

Duration per_iteration(const RankBreakdown& rank, Duration total) {
  return total / static_cast<int64_t>(std::max<uint32_t>(1, rank.measured_iterations));
}

std::optional<RunMetrics> run_metrics(const Scenario& scenario, const RunSummary& summary) {
  if (!scenario.work || summary.predicted_iteration_time <= Duration::zero()) return std::nullopt;
  const IterationWork& work = *scenario.work;
  const double seconds = summary.predicted_iteration_time.seconds();
  const double gpus = static_cast<double>(scenario.represented_gpus);
  RunMetrics m;
  m.unit = work.unit;
  m.units_per_s = work.units / seconds;
  m.units_per_gpu_per_s = m.units_per_s / gpus;
  m.peak_dtype = work.peak_dtype;
  const std::vector<DeviceProfile>& devices = scenario.models.set.devices;
  const double peak =
      devices.empty() ? 0.0 : devices.front().peak(work.peak_dtype).flops_per_second();
  m.peak_tflops = peak * 1e-12;
  if (work.model_flops > 0.0) {
    m.model_tflops_per_gpu = work.model_flops / seconds / gpus * 1e-12;
    if (peak > 0.0) m.mfu = *m.model_tflops_per_gpu / m.peak_tflops;
  }
  // Every kernel's FLOPs (Scenario::kernel_flops), per simulated rank and iteration.
  const double flops = scenario.kernel_flops;
  const double ranks = static_cast<double>(scenario.graph.rank_count());
  const double iterations = static_cast<double>(std::max<uint32_t>(scenario.iterations, 1));
  m.hardware_tflops_per_gpu = flops / ranks / iterations / seconds * 1e-12;
  if (peak > 0.0) m.hfu = m.hardware_tflops_per_gpu / m.peak_tflops;
  return m;
}

std::string format_run_metrics(const RunMetrics& m) {
  std::string out = fmt::format("throughput: {} {}/s ({} per GPU)", si(m.units_per_s), m.unit,
                                si(m.units_per_gpu_per_s));
  const std::string peak =
      fmt::format("the {:.1f} TFLOP/s {} dense peak", m.peak_tflops, dtype_name(m.peak_dtype));
  if (m.model_tflops_per_gpu) {
    out += fmt::format("; model {:.1f} TFLOP/s per GPU", *m.model_tflops_per_gpu);
    if (m.mfu) out += fmt::format(" (MFU {:.1f}% of {})", 100.0 * *m.mfu, peak);
  }
  out += fmt::format("{} hardware {:.1f} TFLOP/s per GPU", m.model_tflops_per_gpu ? "," : ";",
                     m.hardware_tflops_per_gpu);
  if (m.hfu) {
    out += m.mfu ? fmt::format(" (HFU {:.1f}%)", 100.0 * *m.hfu)
                 : fmt::format(" (HFU {:.1f}% of {})", 100.0 * *m.hfu, peak);
  }
  return out + "\n";
}

std::string run_metrics_json(const RunMetrics& m) {
  return fmt::format(
      "\"throughput\": {{\"unit\": \"{}\", \"per_s\": {:.6g}, \"per_gpu_per_s\": {:.6g}, "
      "\"model_tflops_per_gpu\": {}, \"mfu\": {}, \"hardware_tflops_per_gpu\": {:.6g}, "
      "\"hfu\": {}, \"peak_tflops\": {:.6g}, \"peak_dtype\": \"{}\"}}",
      m.unit, m.units_per_s, m.units_per_gpu_per_s, json_number(m.model_tflops_per_gpu),
      json_number(m.mfu), m.hardware_tflops_per_gpu, json_number(m.hfu), m.peak_tflops,
      dtype_name(m.peak_dtype));
}

}  // namespace upsim::cli
