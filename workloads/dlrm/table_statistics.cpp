#include "workloads/dlrm/table_statistics.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "sim/cost_models.h"

namespace upsim {

double zipf_mass(double a, double b, double alpha) {
  if (b < a) return 0.0;
  if (b - a < 64.0) {
    double sum = 0.0;
    for (double i = a; i <= b; i += 1.0)
      sum += std::pow(i, -alpha);
    return sum;
  }
  const double integral =
      std::abs(alpha - 1.0) < 1e-9
          ? std::log(b / a)
          : (std::pow(b, 1.0 - alpha) - std::pow(a, 1.0 - alpha)) / (1.0 - alpha);
  return integral + 0.5 * (std::pow(a, -alpha) + std::pow(b, -alpha));
}

namespace {

/// Adds to `histogram` `rows` x P(k accesses) for every k >= 1 of Poisson(lambda), in the bin of
/// k: the pmf term by term up to lambda + 12 sqrt(lambda) + 12 for lambda <= 256, else the normal
/// approximation (continuity-corrected) between the bins' edges 2^b.
void add_poisson_counts(std::vector<double>& histogram, double lambda, double rows) {
  if (lambda <= 256.0) {
    double p = std::exp(-lambda);  // P(0)
    const double last = lambda + 12.0 * std::sqrt(lambda) + 12.0;
    for (double k = 1.0; k <= last; k += 1.0) {
      p *= lambda / k;
      histogram[reuse_bin(k)] += rows * p;
    }
    return;
  }
  const double sd = std::sqrt(lambda);
  const auto cdf = [&](double x) {
    return 0.5 * std::erfc(-(x + 0.5 - lambda) / (sd * std::numbers::sqrt2));
  };
  double below = cdf(1.0);  // k <= 1
  histogram[0] += rows * below;
  for (size_t b = 1; b < kReuseHistogramBins; ++b) {
    const double upper =
        b + 1 < kReuseHistogramBins ? cdf(std::ldexp(1.0, static_cast<int>(b))) : 1.0;
    histogram[b] += rows * (upper - below);
    below = upper;
  }
}

}  // namespace

size_t reuse_bin(double count) {
  if (count <= 1.0) return 0;
  const auto bin = static_cast<size_t>(std::ceil(std::log2(count)));
  return std::min(bin, kReuseHistogramBins - 1);
}

std::vector<double> zipf_reuse_histogram(int64_t rows, double lookups, double alpha) {
  if (rows <= 0 || !(alpha >= 0.0) || !std::isfinite(alpha) || !(lookups >= 0.0)) {
    throw std::invalid_argument("zipf_reuse_histogram: rows > 0, lookups >= 0, alpha >= 0");
  }
  std::vector<double> histogram(kReuseHistogramBins, 0.0);
  if (lookups == 0.0) return histogram;
  const auto e = static_cast<double>(rows);
  const double total = zipf_mass(1.0, e, alpha);
  constexpr double kGroupRatio = 1.0905077326652577;  // 2^(1/8)
  double distinct = 0.0;
  for (double first = 1.0; first <= e;) {
    const double last = std::min(e, std::max(first, std::floor(first * kGroupRatio)));
    const double count = last - first + 1.0;
    // The group's rows share one mean: its mass spread evenly over its rows.
    const double lambda = lookups * zipf_mass(first, last, alpha) / total / count;
    const double appear = -std::expm1(-lambda);
    add_poisson_counts(histogram, lambda, count);
    distinct += count * appear;
    first = last + 1.0;
  }
  // So few lookups that no row's expected count is representable: a batch without lookups.
  if (!(distinct > 0.0)) return std::vector<double>(kReuseHistogramBins, 0.0);
  for (double& h : histogram)
    h /= distinct;
  return histogram;
}

}  // namespace upsim
