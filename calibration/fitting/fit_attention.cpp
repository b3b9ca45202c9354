#include "calibration/fitting/fit_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "calibration/attention_kernel_model.h"
#include "calibration/fitting/compass_search.h"
#include "calibration/roofline_kernel_cost.h"

namespace upsim {
namespace {

/// Parameter order of the search: forward 64, 128, 256, backward 64, 128, 256, span.
constexpr size_t kSpan = 6;
constexpr std::array<int64_t, 3> kHeadDims{64, 128, 256};
constexpr Box kEfficiencyBox{0.05, 1.0};
constexpr Box kSpanBox{0.0, 16384.0};
constexpr std::array<double, 3> kStartSpans{64.0, 256.0, 1024.0};
constexpr int kDigits = 4;

/// backward / forward efficiency of the AttentionParams defaults per kHeadDims entry: the tie of
/// a head dim that only forward-plus-backward rows measure (fit_attention.h).
std::array<double, 3> default_backward_ratio() {
  const AttentionParams d;
  return {d.backward_efficiency_64 / d.forward_efficiency_64,
          d.backward_efficiency_128 / d.forward_efficiency_128,
          d.backward_efficiency_256 / d.forward_efficiency_256};
}

/// The search vector's efficiencies with each tied backward one set from its forward one.
std::vector<double> with_ties(std::vector<double> x, const std::array<bool, 3>& tied) {
  const std::array<double, 3> ratio = default_backward_ratio();
  for (size_t i = 0; i < tied.size(); ++i) {
    if (tied[i]) x[3 + i] = std::clamp(x[i] * ratio[i], kEfficiencyBox.lo, kEfficiencyBox.hi);
  }
  return x;
}

AttentionParams params_of(const std::vector<double>& x) {
  AttentionParams p;
  p.forward_efficiency_64 = x[0];
  p.forward_efficiency_128 = x[1];
  p.forward_efficiency_256 = x[2];
  p.backward_efficiency_64 = x[3];
  p.backward_efficiency_128 = x[4];
  p.backward_efficiency_256 = x[5];
  p.half_efficiency_span = x[kSpan];
  return p;
}

/// A row's predicted time: its kernel, or its forward and backward kernels for a
/// forward-plus-backward row, each with `overhead` once more (kernel_validation.h).
double predicted_seconds(const KernelMeasurement& r, const HardwareProfile& on,
                         const AttentionParams& p, Duration kernel_overhead) {
  const double overhead = kernel_overhead.seconds();
  double t = attention_seconds(r.kernel, on.device, on.achievable, p, kernel_overhead) + overhead;
  if (r.forward_and_backward) {
    t += attention_seconds(attention_backward_of(r.kernel), on.device, on.achievable, p,
                           kernel_overhead) +
         overhead;
  }
  return t;
}

/// Whether a row of head_dim `d` constrains the efficiency at kHeadDims[i] (the log2
/// interpolation of attention_kernel_model.h gives it weight).
bool brackets(size_t i, int64_t d) {
  if (i == 0) return d < 128;
  if (i == 1) return d > 64 && d < 256;
  return d > 128;
}

std::string file_of(const std::string& origin) {
  const size_t colon = origin.rfind(':');
  return colon == std::string::npos ? origin : origin.substr(0, colon);
}

/// What a section's training rows measure (fit_attention's first pass).
struct RowCoverage {
  /// The efficiencies the rows constrain, per direction (search order, kSpan entries).
  std::array<bool, kSpan> fitted{};
  std::array<bool, 2> direction_measured{};
  /// Per direction, the best rate a training row reached, as a fraction of its dtype's peak: no
  /// fitted peak efficiency goes above it (no kernel is priced faster than the best measured).
  std::array<double, 2> best_fraction{};
  /// Head dims that forward-plus-backward rows bracket, and the best rate such a row reached
  /// (forward plus backward FLOPs over its time, a fraction of its dtype's peak).
  std::array<bool, 3> pair_brackets{};
  double best_pair_fraction = 0.0;
  std::set<std::string> files;
  /// The rows' provenance, "mixed" when they differ.
  std::string provenance;
};

/// The coverage of `rows` (one implementation; CalibrationDataError otherwise).
RowCoverage scan_rows(const std::vector<const KernelMeasurement*>& rows,
                      const HardwareProfile& hardware) {
  RowCoverage c;
  const AttentionKernel impl = rows.front()->kernel.attention.implementation;
  for (const KernelMeasurement* r : rows) {
    const AttentionShape& a = r->kernel.attention;
    if (r->kernel.cls != KernelClass::kAttention || a.implementation != impl) {
      throw CalibrationDataError(
          fmt::format("{}: calibrate attention: rows of one implementation ({}) expected",
                      r->origin, attention_kernel_name(impl)));
    }
    const double peak = profile_of(*r, hardware).device.peak(r->kernel.dtype).flops_per_second();
    const double fraction =
        peak > 0.0 ? attention_row_flops(r->kernel, r->forward_and_backward) / r->seconds / peak
                   : 0.0;
    if (r->forward_and_backward) {
      c.direction_measured = {true, true};
      c.best_pair_fraction = std::max(c.best_pair_fraction, fraction);
      for (size_t i = 0; i < kHeadDims.size(); ++i) {
        if (brackets(i, a.head_dim)) c.pair_brackets[i] = true;
      }
    } else {
      const size_t dir = a.backward ? 1 : 0;
      c.direction_measured[dir] = true;
      c.best_fraction[dir] = std::max(c.best_fraction[dir], fraction);
      for (size_t i = 0; i < kHeadDims.size(); ++i) {
        if (brackets(i, a.head_dim)) c.fitted[3 * dir + i] = true;
      }
    }
    c.files.insert(file_of(r->origin));
    if (r == rows.front()) {
      c.provenance = r->provenance;
    } else if (r->provenance != c.provenance) {
      c.provenance = "mixed";
    }
  }
  return c;
}

}  // namespace

AttentionCalibration fit_attention(const std::vector<const KernelMeasurement*>& rows,
                                   const HardwareProfile& hardware, Duration kernel_overhead) {
  if (rows.empty()) throw CalibrationDataError("calibrate attention: no training rows");
  RowCoverage coverage = scan_rows(rows, hardware);
  std::array<bool, kSpan>& fitted = coverage.fitted;
  const std::array<bool, 2>& direction_measured = coverage.direction_measured;
  const AttentionParams defaults;
  const std::vector<double> start{
      defaults.forward_efficiency_64,   defaults.forward_efficiency_128,
      defaults.forward_efficiency_256,  defaults.backward_efficiency_64,
      defaults.backward_efficiency_128, defaults.backward_efficiency_256,
      defaults.half_efficiency_span};
  // A head dim measured only by forward-plus-backward rows cannot separate the directions: its
  // backward efficiency is tied to its forward one at the defaults' ratio, and the forward one
  // is capped where that ratio reaches the best pair rate (3.5 f / (1 + 2.5 / ratio)).
  std::array<bool, 3> tied{};
  const std::array<double, 3> ratio = default_backward_ratio();
  for (size_t i = 0; i < kHeadDims.size(); ++i) {
    if (!coverage.pair_brackets[i]) continue;
    if (!fitted[i] && !fitted[3 + i]) tied[i] = true;
    fitted[i] = fitted[3 + i] = true;
  }
  std::vector<double> step(kSpan + 1, 0.1);
  std::vector<Box> box(kSpan + 1, kEfficiencyBox);
  for (size_t i = 0; i < kSpan; ++i) {
    if (!fitted[i] || (i >= 3 && tied[i - 3])) step[i] = 0.0;
    double cap = coverage.best_fraction[i / 3];
    if (i < 3 && tied[i]) cap = coverage.best_pair_fraction * (1.0 + 2.5 / ratio[i]) / 3.5;
    if (fitted[i] && cap > 0.0) box[i].hi = std::clamp(cap, kEfficiencyBox.lo, kEfficiencyBox.hi);
  }
  step[kSpan] = 64.0;
  box[kSpan] = kSpanBox;

  const Objective objective = [&](const std::vector<double>& x) {
    const AttentionParams p = params_of(with_ties(x, tied));
    double sum = 0.0;
    for (const KernelMeasurement* r : rows) {
      const double predicted = predicted_seconds(*r, profile_of(*r, hardware), p, kernel_overhead);
      const double e = std::log(predicted / r->seconds);
      sum += e * e;
    }
    return sum;
  };
  std::vector<double> best;
  double best_value = std::numeric_limits<double>::infinity();
  for (double span : kStartSpans) {
    std::vector<double> x0 = start;
    for (size_t i = 0; i < kSpan; ++i)
      x0[i] = std::min(x0[i], box[i].hi);
    x0[kSpan] = span;
    const auto [x, value] = compass_search(objective, x0, step, box);
    if (value < best_value) {
      best = x;
      best_value = value;
    }
  }
  best = with_ties(best, tied);
  for (double& v : best)
    v = round_significant(v, kDigits);
  // Unconstrained efficiencies: the nearest fitted head_dim of the same direction.
  for (size_t dir = 0; dir < 2; ++dir) {
    if (!direction_measured[dir]) continue;
    for (size_t i = 0; i < kHeadDims.size(); ++i) {
      if (fitted[3 * dir + i]) continue;
      for (size_t distance = 1; distance < kHeadDims.size(); ++distance) {
        const size_t below = i >= distance ? i - distance : kHeadDims.size();
        const size_t above = i + distance;
        if (below < kHeadDims.size() && fitted[3 * dir + below]) {
          best[3 * dir + i] = best[3 * dir + below];
          break;
        }
        if (above < kHeadDims.size() && fitted[3 * dir + above]) {
          best[3 * dir + i] = best[3 * dir + above];
          break;
        }
      }
    }
  }
  AttentionCalibration out;
  out.params = params_of(best);
  // A section states one provenance; rows of tables that disagree state none.
  const std::string& provenance = coverage.provenance;
  out.provenance = provenance == "mixed" ? "" : provenance.empty() ? "measured" : provenance;
  std::string measured_dims;
  for (size_t dir = 0; dir < 2; ++dir) {
    std::string dims;
    for (size_t i = 0; i < kHeadDims.size(); ++i) {
      if (fitted[3 * dir + i]) dims += fmt::format("{}{}", dims.empty() ? "" : "/", kHeadDims[i]);
    }
    if (!measured_dims.empty()) measured_dims += ", ";
    measured_dims += fmt::format("{} head_dim {}", dir == 0 ? "forward" : "backward",
                                 dims.empty() ? "none (defaults)" : dims);
  }
  std::string sources;
  for (const std::string& f : coverage.files)
    sources += fmt::format("{}{}", sources.empty() ? "" : "; ", f);
  std::string tied_dims;
  for (size_t i = 0; i < kHeadDims.size(); ++i) {
    if (tied[i]) tied_dims += fmt::format("{}{}", tied_dims.empty() ? "" : "/", kHeadDims[i]);
  }
  if (!tied_dims.empty()) {
    measured_dims += fmt::format(
        "; head_dim {} measured forward + backward only: backward tied to forward at "
        "FlashAttention-2's A100 ratio",
        tied_dims);
  }
  out.source = fmt::format("{} ({} training rows: {})", sources, rows.size(), measured_dims);
  return out;
}

}  // namespace upsim
