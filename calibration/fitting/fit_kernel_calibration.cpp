#include "calibration/fitting/fit_kernel_calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/compass_search.h"
#include "calibration/fitting/fit_attention.h"

namespace upsim {
namespace {

constexpr double kMicro = 1e-6;
/// Tile candidates: {64, 128, 256}^2 without 256 x 256, the threadblock shapes CUTLASS
/// instantiates for sm80 tensor-op GEMMs (cutlass/library generator, GenerateSM80_TensorOp_16816).
constexpr std::array<std::pair<int64_t, int64_t>, 8> kTiles{
    {{64, 64}, {64, 128}, {128, 64}, {128, 128}, {64, 256}, {256, 64}, {128, 256}, {256, 128}}};
/// long_row_bytes candidates: 1 KiB .. 128 KiB.
constexpr int kLongRowMinLog2 = 10;
constexpr int kLongRowMaxLog2 = 17;
/// Starting points of the compass search: k_overhead (K-elements) and the harness offset as a
/// fraction of the smallest measured time. The objective has several local minima (a floor
/// and an offset can trade places for the smallest shapes), hence a grid of starts.
constexpr std::array<double, 3> kStartKOverheads{0.0, 128.0, 512.0};
constexpr std::array<double, 2> kStartOffsets{0.5, 0.9};
/// Significant digits kept of a fitted scale in the calibration file.
constexpr int kDigits = 4;
constexpr std::string_view kSplitRule =
    "within each source file and op, rows in file order alternate train, held out (0-based even "
    "index = train)";

/// A harness time in whole nanoseconds.
Duration round_to_ns(double us) {
  return Duration::from_us_f(std::round(us * 1e3) / 1e3);
}

double squared_log_error(double predicted, double measured) {
  const double r = std::log(predicted / measured);
  return r * r;
}

double harness_predict(double floor_us, double offset_us, double core_seconds) {
  // Mirrors predicted_measurement_seconds (kernel_validation.cpp).
  return std::max(floor_us * kMicro, offset_us * kMicro + core_seconds);
}

double min_seconds(const std::vector<const KernelMeasurement*>& rows) {
  double out = std::numeric_limits<double>::infinity();
  for (const KernelMeasurement* r : rows) {
    out = std::min(out, r->seconds);
  }
  return out;
}

/// Rate class of a GEMM dtype: fp16 and bf16 share the tensor-core path and peak, so their
/// rows are fitted together; every other dtype (fp32 SIMT, tf32, fp8, int8) is its own class.
DType rate_class(DType dtype) {
  return dtype == DType::kBf16 ? DType::kFp16 : dtype;
}

/// A harness as the fit searches it: times in microseconds.
struct HarnessUs {
  double floor_us = 0.0;
  double offset_us = 0.0;
  double compute_speedup = 1.0;
};

HarnessUs harness_us(const HarnessOverhead& h) {
  return {h.floor.seconds() / kMicro, h.offset.seconds() / kMicro, h.compute_speedup};
}

/// Sum over `rows` of the squared log error of the GEMM model with `p`: a row of kernel time
/// (`# harness: none`) against the model's kernel duration `kernel` (floor 0, offset the
/// kernel overhead, no speedup), every other row through `timed` (compute_speedup divides the
/// compute time). Mirrors predicted_measurement_seconds (kernel_validation.cpp).
double gemm_objective(const std::vector<const KernelMeasurement*>& rows, const HardwareProfile& hw,
                      const GemmParams& p, const HarnessUs& timed, const HarnessUs& kernel) {
  double sum = 0.0;
  for (const KernelMeasurement* r : rows) {
    const HarnessUs& h = r->harness_none ? kernel : timed;
    const HardwareProfile& on = profile_of(*r, hw);
    const GemmEstimate est = estimate_gemm(r->kernel, on.device, on.achievable, p);
    const double core = std::max(est.compute_seconds / h.compute_speedup, est.memory_seconds);
    sum += squared_log_error(harness_predict(h.floor_us, h.offset_us, core), r->seconds);
  }
  return sum;
}

/// Whether `rows` can measure a GEMM rate class's asymptotic rate (compute_scale): one of them
/// is a kernel time (`# harness: none`) of a GEMM large enough to run near that rate, at least
/// two full waves of the largest tile (256 x 128 on the measured GPU's SMs) with k >= 2048.
/// Kernels short of that (in-model GEMMs of a recommendation model: k ~ 1024, narrow n or k, a
/// batch of 647 x 30 products) cannot tell compute_scale and memory_scale from k_overhead, the
/// tile and cuBLAS's kernel choice for odd shapes. Fitted on such rows alone (A100 tf32,
/// test/data/holistic-trace-analysis), compute_scale fell to 0.76 (10240^3 35% slow against
/// PyTorch's published time) and memory_scale to 0.47-0.52 (the held-out weight-streaming GEMMs
/// of Triton's A100 tf32 table up to 88% slow). So such a class keeps the rate and the
/// bandwidth of physics: compute_scale 1 (the profile's achievable fraction) and the primary
/// class's memory_scale (how GEMM kernels stream memory on this GPU, which the math dtype does
/// not change); only its tile and k_overhead are fitted.
bool rate_measurable(const std::vector<const KernelMeasurement*>& rows, const HardwareProfile& hw) {
  constexpr int64_t kMinK = 2048;
  constexpr int64_t kLargestTileElements = 256 * 128;
  return std::any_of(rows.begin(), rows.end(), [&](const KernelMeasurement* r) {
    const KernelDesc& g = r->kernel;
    const int64_t sms = profile_of(*r, hw).device.sm_count;
    return r->harness_none && g.k >= kMinK && g.batch * g.m * g.n >= 2 * sms * kLargestTileElements;
  });
}

/// The largest compute_scale `rows` may fit: what takes their lowest achievable fraction to the
/// peak (the model stops at the peak: estimate_gemm), at most 2.
double top_compute_scale(const std::vector<const KernelMeasurement*>& rows,
                         const HardwareProfile& hw) {
  double lowest = hw.achievable.compute;
  for (const KernelMeasurement* r : rows)
    lowest = std::min(lowest, profile_of(*r, hw).achievable.compute);
  return std::min(2.0, 1.0 / lowest);
}

/// GEMM rows of the primary rate class: grid over tiles, compass search over the GEMM
/// parameters and the harness (floor, offset, compute_speedup) from a grid of starts.
/// With only harness-timed rows compute_scale stays 1: the harness speedup absorbs the sweep's
/// clock / harness difference from the profile's achievable rate. Rows of kernel time among
/// them (`kernel`: the model's kernel duration) measure the rate itself: compute_scale is
/// fitted on them too, and the harness's compute_speedup is then relative to that rate.
void fit_gemm_primary(const std::vector<const KernelMeasurement*>& rows, const HardwareProfile& hw,
                      const HarnessUs& kernel, GemmParams& params, HarnessOverhead& harness) {
  std::vector<const KernelMeasurement*> timed_rows;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(timed_rows),
               [](const KernelMeasurement* r) { return !r->harness_none; });
  const bool rate_measured = timed_rows.size() != rows.size();
  const double floor_us = min_seconds(timed_rows) / kMicro;
  const double top = top_compute_scale(rows, hw);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& tile : kTiles) {
    const auto tile_m = tile.first;  // named copies: lambdas may not capture bindings (clang 14)
    const auto tile_n = tile.second;
    // x = [ln compute_speedup, ln memory_scale, k_overhead, floor us, offset us,
    //      ln compute_scale (held at 0 without kernel-time rows)]
    const auto params_of = [&](const std::vector<double>& x) {
      GemmParams p;
      p.tile_m = tile_m;
      p.tile_n = tile_n;
      p.compute_scale = std::exp(x[5]);
      p.memory_scale = std::exp(x[1]);
      p.k_overhead = x[2];
      return p;
    };
    const Objective objective = [&](const std::vector<double>& x) {
      return gemm_objective(rows, hw, params_of(x), HarnessUs{x[3], x[4], std::exp(x[0])}, kernel);
    };
    const std::vector<Box> box{{std::log(0.5), std::log(2.0)},
                               {std::log(0.2), std::log(2.0)},
                               {0.0, 4096.0},
                               {0.0, 1e4},
                               {0.0, 1e4},
                               rate_measured ? Box{std::log(0.5), std::log(top)} : Box{0.0, 0.0}};
    for (double k0 : kStartKOverheads) {
      for (double offset : kStartOffsets) {
        const auto [x, value] =
            compass_search(objective, {0.0, 0.0, k0, floor_us, offset * floor_us, 0.0},
                           {0.1, 0.1, 32.0, 2.0, 2.0, rate_measured ? 0.1 : 0.0}, box);
        if (value < best) {
          best = value;
          params = params_of(x);
          params.compute_scale = round_significant(params.compute_scale, kDigits);
          params.memory_scale = round_significant(params.memory_scale, kDigits);
          params.k_overhead = std::round(params.k_overhead);
          harness = HarnessOverhead{round_to_ns(x[3]), round_to_ns(x[4]),
                                    round_significant(std::exp(x[0]), kDigits)};
        }
      }
    }
  }
}

/// GEMM rows of another rate class, harness-timed rows measured by the primary's harness
/// (`timed`, fixed), kernel-time rows against the kernel duration (`kernel`): grid over tiles,
/// compass search over compute_scale (this dtype's asymptotic rate relative to peak x
/// achievable.compute, which was measured in bf16), memory_scale and k_overhead; with only
/// kernel-time rows that cannot measure the rate (rate_measurable), compute_scale 1 and
/// memory_scale `physics_memory_scale`.
GemmParams fit_gemm_secondary(const std::vector<const KernelMeasurement*>& rows,
                              const HardwareProfile& hw, const HarnessUs& timed,
                              const HarnessUs& kernel, double physics_memory_scale) {
  GemmParams out;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& tile : kTiles) {
    const auto tile_m = tile.first;  // named copies: lambdas may not capture bindings (clang 14)
    const auto tile_n = tile.second;
    // x = [ln compute_scale, ln memory_scale, k_overhead]
    const auto params_of = [&](const std::vector<double>& x) {
      GemmParams p;
      p.tile_m = tile_m;
      p.tile_n = tile_n;
      p.compute_scale = std::exp(x[0]);
      p.memory_scale = std::exp(x[1]);
      p.k_overhead = x[2];
      return p;
    };
    const Objective objective = [&](const std::vector<double>& x) {
      return gemm_objective(rows, hw, params_of(x), timed, kernel);
    };
    const double top = top_compute_scale(rows, hw);
    const bool all_kernel_time = std::all_of(
        rows.begin(), rows.end(), [](const KernelMeasurement* r) { return r->harness_none; });
    const bool rate_measured = !all_kernel_time || rate_measurable(rows, hw);
    const double ln_physics_memory = std::log(physics_memory_scale);
    const std::vector<Box> box{rate_measured ? Box{std::log(0.1), std::log(top)} : Box{0.0, 0.0},
                               rate_measured ? Box{std::log(0.2), std::log(2.0)}
                                             : Box{ln_physics_memory, ln_physics_memory},
                               {0.0, 4096.0}};
    const double scale_step = rate_measured ? 0.1 : 0.0;
    for (double k0 : kStartKOverheads) {
      const auto [x, value] =
          compass_search(objective, {0.0, rate_measured ? 0.0 : ln_physics_memory, k0},
                         {scale_step, scale_step, 32.0}, box);
      if (value < best) {
        best = value;
        out = params_of(x);
        out.compute_scale = round_significant(out.compute_scale, kDigits);
        out.memory_scale = round_significant(out.memory_scale, kDigits);
        out.k_overhead = std::round(out.k_overhead);
      }
    }
  }
  return out;
}

/// All GEMM rows: the rate class with the most training rows timed through a harness
/// (fp16/bf16 first on a tie) fits the harness and its parameters; each other class fits its
/// own parameters under that harness. Fills gemm_by_dtype for every measured dtype (fp16 and
/// bf16 stand in for each other) and the default entry (the primary's tile and memory_scale,
/// without k_overhead, which was measured in the primary's K-steps and takes another time at
/// another dtype's rate, and at compute_scale 1).
void fit_gemm(const std::vector<const KernelMeasurement*>& rows, const HardwareProfile& hw,
              KernelCalibration& out) {
  std::map<DType, std::vector<const KernelMeasurement*>> by_class;
  for (const KernelMeasurement* r : rows) {
    by_class[rate_class(r->kernel.dtype)].push_back(r);
  }
  // Kernel times as measured (`# harness: none`: a trace's kernel durations, a benchmark's
  // GPU time per call) have no harness to fit: they are priced as the model's kernel duration,
  // core + kernel_overhead. Harness-timed rows of every class share the primary's harness.
  std::map<DType, size_t> timed_rows;
  for (const auto& [dtype, class_rows] : by_class) {
    timed_rows[dtype] = static_cast<size_t>(
        std::count_if(class_rows.begin(), class_rows.end(),
                      [](const KernelMeasurement* r) { return !r->harness_none; }));
  }
  // The primary: the class with the most harness-timed rows (fp16/bf16 first on a tie), else
  // the class with the most rows.
  const bool any_timed = std::any_of(timed_rows.begin(), timed_rows.end(),
                                     [](const auto& entry) { return entry.second > 0; });
  std::optional<DType> primary;
  for (const auto& [dtype, class_rows] : by_class) {
    const size_t n = any_timed ? timed_rows.at(dtype) : class_rows.size();
    const size_t best_n =
        primary ? (any_timed ? timed_rows.at(*primary) : by_class.at(*primary).size()) : 0;
    if (!primary || n > best_n || (n == best_n && dtype == DType::kFp16)) primary = dtype;
  }
  const HarnessUs kernel_duration{0.0, out.kernel_overhead.seconds() / kMicro, 1.0};
  HarnessUs timed = kernel_duration;
  GemmParams primary_params;
  if (any_timed) {
    HarnessOverhead harness;
    fit_gemm_primary(by_class.at(*primary), hw, kernel_duration, primary_params, harness);
    out.measurement["gemm"] = harness;
    timed = harness_us(harness);
  } else {
    primary_params = fit_gemm_secondary(by_class.at(*primary), hw, timed, kernel_duration, 1.0);
  }
  const auto assign = [&](DType rate, const GemmParams& p) {
    out.gemm_by_dtype[static_cast<size_t>(rate)] = p;
    if (rate == DType::kFp16) out.gemm_by_dtype[static_cast<size_t>(DType::kBf16)] = p;
  };
  assign(*primary, primary_params);
  for (const auto& [dtype, class_rows] : by_class) {
    if (dtype == *primary) continue;
    assign(dtype,
           fit_gemm_secondary(class_rows, hw, timed, kernel_duration, primary_params.memory_scale));
  }
  // An unmeasured dtype runs at the profile's achievable fraction of its own peak (physics):
  // the primary's fitted rate is the primary dtype's kernels' and is not carried over.
  out.gemm = primary_params;
  out.gemm.k_overhead = 0.0;
  out.gemm.compute_scale = 1.0;
}

/// One memory-bound curve and the harness of each op measured on it.
void fit_curve(const std::string& curve_name, const std::vector<const KernelMeasurement*>& rows,
               const HardwareProfile& hw, KernelCalibration& out) {
  std::vector<std::string> ops;
  for (const KernelMeasurement* r : rows) {
    if (std::find(ops.begin(), ops.end(), r->op) == ops.end()) ops.push_back(r->op);
  }
  std::vector<size_t> op_index;
  for (const KernelMeasurement* r : rows) {
    op_index.push_back(static_cast<size_t>(std::find(ops.begin(), ops.end(), r->op) - ops.begin()));
  }
  // Ops whose tables declare `# harness: none` get no harness: validation compares them with the
  // kernel duration (kernel_validation.h).
  std::vector<bool> no_harness(ops.size(), true);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i]->harness_none) no_harness[op_index[i]] = false;
  }
  // Row bytes present in the training data decide which thresholds are identifiable.
  std::set<int64_t> row_bytes;
  for (const KernelMeasurement* r : rows) {
    if (r->kernel.row_elements > 0) {
      row_bytes.insert(r->kernel.row_elements * dtype_bytes(r->kernel.dtype));
    }
  }
  std::vector<int64_t> thresholds{0};
  for (int e = kLongRowMinLog2; e <= kLongRowMaxLog2; ++e) {
    const int64_t t = int64_t{1} << e;
    if (!row_bytes.empty() && *row_bytes.begin() <= t && *row_bytes.rbegin() > t) {
      thresholds.push_back(t);
    }
  }

  // (long_row_bytes, full_reread_row_bytes) pairs: none, then for each threshold the ramps
  // ending at each larger candidate up to the longest row, widest first, then the step
  // (full_reread_row_bytes 0). Only a strict improvement replaces the best so far, so of
  // equally good shapes the first wins: when no training row lies between two measured row
  // sizes, the data cannot say where between them the re-reads start to miss, and the widest
  // ramp interpolates between the measured sizes instead of putting a cliff at one of them.
  std::vector<std::pair<int64_t, int64_t>> shapes{{0, 0}};
  for (int64_t threshold : thresholds) {
    if (threshold == 0) continue;
    std::vector<int64_t> fulls;
    for (int64_t full = threshold * 2; full <= *row_bytes.rbegin(); full *= 2)
      fulls.push_back(full);
    for (auto it = fulls.rbegin(); it != fulls.rend(); ++it)
      shapes.emplace_back(threshold, *it);
    shapes.emplace_back(threshold, 0);
  }

  const double floor_us = min_seconds(rows) / kMicro;
  // Physics: no curve streams faster than the datasheet HBM bandwidth (bandwidth_scale at most
  // 1 / achievable.memory; at most 4 otherwise). Fitted on three harness-timed points of a
  // Triton RMSNorm, H100's curve had reached 1.373 (3.97 TB/s on a 3.35 TB/s part), with
  // re-read passes that kernel does not make to bring long rows back under the peak.
  const double ln_top_bandwidth_scale = std::log(std::min(4.0, 1.0 / hw.achievable.memory));
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [threshold_bytes, full_bytes] : shapes) {
    const int64_t threshold = threshold_bytes;  // named copies for the lambdas (clang 14)
    const int64_t full = full_bytes;
    // x = [ln bandwidth_scale, ln passes, (floor us, offset us) per op]
    const auto curve_of = [&](const std::vector<double>& x) {
      MemoryCurve c;
      c.bandwidth_scale = std::exp(x[0]);
      c.long_row_bytes = threshold;
      c.long_row_read_passes = threshold > 0 ? std::exp(x[1]) : 1.0;
      c.full_reread_row_bytes = full;
      return c;
    };
    const Objective objective = [&](const std::vector<double>& x) {
      const MemoryCurve c = curve_of(x);
      double sum = 0.0;
      for (size_t i = 0; i < rows.size(); ++i) {
        const HardwareProfile& on = profile_of(*rows[i], hw);
        const double core = memory_bound_seconds(rows[i]->kernel, on.device, on.achievable, c);
        const size_t o = op_index[i];
        sum +=
            squared_log_error(harness_predict(x[2 + 2 * o], x[3 + 2 * o], core), rows[i]->seconds);
      }
      return sum;
    };
    std::vector<double> x0{0.0, 0.0};
    std::vector<double> step{0.1, threshold > 0 ? 0.1 : 0.0};
    std::vector<Box> box{{std::log(0.1), ln_top_bandwidth_scale}, {0.0, std::log(8.0)}};
    for (size_t o = 0; o < ops.size(); ++o) {
      if (no_harness[o]) {
        // Kernel time as measured: the model's kernel duration, core + kernel_overhead.
        x0.insert(x0.end(), {0.0, out.kernel_overhead.us()});
        step.insert(step.end(), {0.0, 0.0});
      } else {
        x0.insert(x0.end(), {floor_us, 0.5 * floor_us});
        step.insert(step.end(), {2.0, 2.0});
      }
      box.insert(box.end(), {{0.0, 1e4}, {0.0, 1e4}});
    }
    const auto [x, value] = compass_search(objective, x0, step, box);
    // Strict improvement only: the smallest of equally good thresholds (or none) wins, and of
    // its shapes the widest ramp.
    if (value < best * (1.0 - 1e-9)) {
      best = value;
      MemoryCurve curve = curve_of(x);
      curve.bandwidth_scale = round_significant(curve.bandwidth_scale, kDigits);
      curve.long_row_read_passes = round_significant(curve.long_row_read_passes, kDigits);
      out.curves[curve_name] = curve;
      for (size_t o = 0; o < ops.size(); ++o) {
        if (no_harness[o]) continue;
        out.measurement[ops[o]] =
            HarnessOverhead{round_to_ns(x[2 + 2 * o]), round_to_ns(x[3 + 2 * o])};
      }
    }
  }
}

/// The curve of each memory op whose tables declare one (`# curve:`): every row of the op, train
/// or held out, must name the same curve (a table without the declaration names its op's
/// default); throws CalibrationDataError naming both rows otherwise.
void assign_declared_curves(const std::vector<KernelMeasurement>& measurements,
                            KernelCalibration& c) {
  std::array<const KernelMeasurement*, kMemoryOpCount> first{};
  for (const KernelMeasurement& m : measurements) {
    if (m.kernel.cls != KernelClass::kMemoryBound) continue;
    const auto op = static_cast<size_t>(m.kernel.memory_op);
    if (first[op] == nullptr) {
      first[op] = &m;
      if (!m.curve.empty()) c.curve_of_op[op] = m.curve;
    } else if (first[op]->curve != m.curve) {
      const auto named = [](const KernelMeasurement& r) {
        return r.curve.empty() ? std::string("its default curve") : "curve `" + r.curve + "`";
      };
      throw CalibrationDataError(fmt::format(
          "{}: op `{}` is fitted on {} here and on {} at {}: give every table of an op the same "
          "`# curve:` declaration",
          m.origin, m.op, named(m), named(*first[op]), first[op]->origin));
    }
  }
}

}  // namespace

CalibrationResult fit_kernel_calibration(const std::vector<KernelMeasurement>& measurements,
                                         const HardwareProfile& hardware, std::string source) {
  KernelCalibration c;
  c.fitted_on = hardware.device.name;
  // The fit prices kernel times with the overhead runs on this GPU add (load_calibrated takes
  // the profile's), and the file keeps it as its fallback.
  if (hardware.kernel_overhead) c.kernel_overhead = *hardware.kernel_overhead;
  const DeviceProfile& d = hardware.device;
  if (d.compute_capability > 0 && d.sm_count > 0 && d.sm_boost_clock_mhz > 0) {
    c.fitted_on_device = FittedDevice{d.compute_capability, d.sm_count, d.sm_boost_clock_mhz};
  }
  c.source = std::move(source);
  c.curve_of_op = default_curve_of_op();
  c.split = std::string(kSplitRule);

  assign_declared_curves(measurements, c);
  std::vector<const KernelMeasurement*> gemm_rows;
  std::map<std::string, std::vector<const KernelMeasurement*>> curve_rows;
  std::array<std::vector<const KernelMeasurement*>, kAttentionKernelCount> attention_rows;
  for (const KernelMeasurement& m : measurements) {
    require_priceable(m, profile_of(m, hardware).device);
    if (m.held_out) continue;
    if (m.kernel.cls == KernelClass::kGemm) {
      gemm_rows.push_back(&m);
    } else if (m.kernel.cls == KernelClass::kMemoryBound) {
      curve_rows[c.curve_of_op[static_cast<size_t>(m.kernel.memory_op)]].push_back(&m);
    } else if (m.kernel.cls == KernelClass::kAttention) {
      attention_rows[static_cast<size_t>(m.kernel.attention.implementation)].push_back(&m);
    } else {
      throw CalibrationDataError(fmt::format("{}: op `{}`: no fit for {} kernels yet", m.origin,
                                             m.op, kernel_class_name(m.kernel.cls)));
    }
  }
  const bool any_attention = std::any_of(attention_rows.begin(), attention_rows.end(),
                                         [](const auto& rows) { return !rows.empty(); });
  if (gemm_rows.empty() && curve_rows.empty() && !any_attention) {
    throw CalibrationDataError("calibrate: no training measurements");
  }
  if (!gemm_rows.empty()) {
    fit_gemm(gemm_rows, hardware, c);
  }
  // Curves without measurements keep the default (bandwidth_scale 1: the profile's achievable
  // memory fraction); every curve the op map names must exist.
  for (const std::string& name : c.curve_of_op) {
    c.curves.emplace(name, MemoryCurve{});
  }
  for (const auto& [name, rows] : curve_rows) {
    fit_curve(name, rows, hardware, c);
  }
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    if (!attention_rows[i].empty()) {
      c.attention[i] = fit_attention(attention_rows[i], hardware, c.kernel_overhead);
    }
  }

  CalibrationResult result;
  const CalibratedKernelCost model(c, hardware.achievable);
  result.validation = validate_kernels(measurements, model, hardware.device);
  for (const KernelValidationRow& row : result.validation) {
    c.fit_errors.push_back(FitError{row.op, row.train_points, row.held_out_points,
                                    row.train_geomean, row.held_out_geomean,
                                    row.provenance == "-" ? "" : row.provenance});
  }
  result.calibration = std::move(c);
  return result;
}

std::string calibration_header(const CalibrationResult& result) {
  const KernelCalibration& c = result.calibration;
  std::string out = fmt::format(
      "# Kernel calibration written by `upsim calibrate` "
      "(calibration/fitting/fit_kernel_calibration.h);\n"
      "# schema: calibration/kernel_calibration.h. Fitted on {} from: {}.\n"
      "# Split: {}.\n"
      "# Scales are relative to the hardware profile's achievable fractions, so this file prices\n"
      "# other GPUs too. `measurement` describes the sweep's timing harness (validation only).\n"
      "# Fit error, geomean |predicted / measured - 1|:\n",
      c.fitted_on, c.source, c.split);
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::string table = format_kernel_validation(result.validation);
         size_t start = 0;
         while (start < table.size()) {
           const size_t end = table.find('\n', start);
           lines.push_back(table.substr(start, end - start));
           start = end + 1;
         }
         return lines;
       }()) {
    out += "#   " + line + "\n";
  }
  return out;
}

std::string calibration_file_text(const CalibrationResult& result) {
  return kernel_calibration_yaml(result.calibration, calibration_header(result));
}

}  // namespace upsim
