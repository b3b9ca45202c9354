#include "calibration/fitting/kernel_validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace upsim {
namespace {

constexpr double kErrorFloor = 1e-6;

std::string shape_text(const KernelDesc& k) {
  if (k.cls == KernelClass::kGemm) {
    return fmt::format("{} b{} {}x{}x{}", dtype_name(k.dtype), k.batch, k.m, k.n, k.k);
  }
  if (k.cls == KernelClass::kEmbeddingForward || k.cls == KernelClass::kEmbeddingBackward) {
    const EmbeddingShape& e = k.embedding;
    return fmt::format("{} B{} T{} E{} D{} L{:.1f}", dtype_name(k.dtype), e.batch, e.tables, e.rows,
                       e.dim, e.pooling);
  }
  if (k.cls == KernelClass::kAttention) {
    const AttentionShape& a = k.attention;
    return fmt::format("{} b{} h{}/{} s{}x{} d{}{}", dtype_name(k.dtype), a.batch, a.heads,
                       a.kv_heads, a.seq_q, a.seq_kv, a.head_dim, a.causal ? " causal" : "");
  }
  return fmt::format("{} {:.0f} B", dtype_name(k.dtype), k.bytes_read + k.bytes_written);
}

}  // namespace

void require_priceable(const KernelMeasurement& m, const DeviceProfile& device) {
  const bool arithmetic =
      m.kernel.cls == KernelClass::kGemm || m.kernel.cls == KernelClass::kAttention;
  if (arithmetic && device.peak(m.kernel.dtype).flops_per_second() <= 0.0) {
    throw CalibrationDataError(fmt::format(
        "{}: a {} {} kernel, but the hardware profile `{}` has no {} peak (was it measured on "
        "another GPU? see --hardware)",
        m.origin, dtype_name(m.kernel.dtype), m.op, device.name, dtype_name(m.kernel.dtype)));
  }
}

double predicted_measurement_seconds(const CalibratedKernelCost& model,
                                     const KernelMeasurement& measurement,
                                     const DeviceProfile& device) {
  if (measurement.measured_on && measurement.measured_on->device.name != device.name) {
    // Priced on the GPU it was measured on, with the same calibration.
    const CalibratedKernelCost on(model.calibration(), measurement.measured_on->achievable);
    return predicted_measurement_seconds(on, measurement, measurement.measured_on->device);
  }
  if (measurement.forward_and_backward) {
    // Two kernels timed together; attention tables have no harness of their own.
    return model.kernel_duration(measurement.kernel, device).seconds() +
           model.kernel_duration(attention_backward_of(measurement.kernel), device).seconds();
  }
  const auto& harness = model.calibration().measurement;
  const auto it = harness.find(measurement.op);
  if (it == harness.end() || measurement.harness_none) {
    return model.kernel_duration(measurement.kernel, device).seconds();
  }
  const HarnessOverhead& h = it->second;
  double core = 0.0;
  if (measurement.kernel.cls == KernelClass::kGemm) {
    const GemmEstimate est = model.gemm_estimate(measurement.kernel, device);
    core = std::max(est.compute_seconds / h.compute_speedup, est.memory_seconds);
  } else {
    core = model.core_seconds(measurement.kernel, device);
  }
  return std::max(h.floor.seconds(), h.offset.seconds() + core);
}

double geomean_abs_error(const std::vector<double>& errors) {
  if (errors.empty()) return 0.0;
  double sum = 0.0;
  for (double e : errors) {
    sum += std::log(std::max(std::abs(e), kErrorFloor));
  }
  return std::exp(sum / static_cast<double>(errors.size()));
}

std::vector<KernelValidationRow> validate_kernels(
    const std::vector<KernelMeasurement>& measurements, const CalibratedKernelCost& model,
    const DeviceProfile& device) {
  // An op measured in several dtypes gets a row per dtype ("gemm/tf32"): each dtype has its
  // own fitted parameters, and one pooled number would hide a bad one.
  std::map<std::string, std::set<DType>> dtypes_of_op;
  for (const KernelMeasurement& m : measurements) {
    dtypes_of_op[m.op].insert(m.kernel.dtype);
  }
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> errors;
  std::map<std::string, std::string> provenance;
  for (const KernelMeasurement& m : measurements) {
    const std::string label = dtypes_of_op.at(m.op).size() > 1
                                  ? fmt::format("{}/{}", m.op, dtype_name(m.kernel.dtype))
                                  : m.op;
    const std::string stated = m.provenance.empty() ? "-" : m.provenance;
    if (!errors.contains(label)) {
      order.push_back(label);
      provenance[label] = stated;
    } else if (provenance[label] != stated) {
      provenance[label] = "mixed";
    }
    require_priceable(m, m.measured_on ? m.measured_on->device : device);
    const double e = predicted_measurement_seconds(model, m, device) / m.seconds - 1.0;
    auto& [train, held_out] = errors[label];
    (m.held_out ? held_out : train).push_back(e);
  }
  std::vector<KernelValidationRow> rows;
  for (const std::string& op : order) {
    const auto& [train, held_out] = errors.at(op);
    KernelValidationRow row;
    row.op = op;
    row.provenance = provenance.at(op);
    row.train_points = train.size();
    row.held_out_points = held_out.size();
    row.train_geomean = geomean_abs_error(train);
    row.held_out_geomean = geomean_abs_error(held_out);
    for (double e : held_out) {
      row.held_out_max = std::max(row.held_out_max, std::abs(e));
    }
    rows.push_back(row);
  }
  return rows;
}

std::string format_kernel_validation(const std::vector<KernelValidationRow>& rows) {
  size_t width = 18;
  for (const KernelValidationRow& r : rows)
    width = std::max(width, r.op.size());
  std::string out =
      fmt::format("{:<{}} {:<9} {:>7} {:>9} {:>14} {:>17} {:>15}\n", "op", width, "data", "train",
                  "held-out", "geomean train", "geomean held-out", "max held-out");
  for (const KernelValidationRow& r : rows) {
    out += fmt::format("{:<{}} {:<9} {:>7} {:>9} {:>13.2f}% {:>16.2f}% {:>14.2f}%\n", r.op, width,
                       r.provenance, r.train_points, r.held_out_points, 100.0 * r.train_geomean,
                       100.0 * r.held_out_geomean, 100.0 * r.held_out_max);
  }
  return out;
}

std::string format_kernel_points(const std::vector<KernelMeasurement>& measurements,
                                 const CalibratedKernelCost& model, const DeviceProfile& device) {
  size_t width = 18;
  for (const KernelMeasurement& m : measurements)
    width = std::max(width, m.op.size());
  std::string out = fmt::format("{:<{}} {:<9} {:<34} {:>12} {:>12} {:>8}\n", "op", width, "split",
                                "shape", "measured us", "predicted us", "e");
  for (const KernelMeasurement& m : measurements) {
    const double predicted = predicted_measurement_seconds(model, m, device);
    out += fmt::format("{:<{}} {:<9} {:<34} {:>12.3f} {:>12.3f} {:>7.2f}%\n", m.op, width,
                       m.held_out ? "held-out" : "train", shape_text(m.kernel), m.seconds * 1e6,
                       predicted * 1e6, 100.0 * (predicted / m.seconds - 1.0));
  }
  return out;
}

}  // namespace upsim
