#include "calibration/fitting/compass_search.h"

#include <algorithm>
#include <cmath>

namespace upsim {
namespace {

constexpr double kStopRelativeStep = 1e-7;
constexpr int kMaxEvaluations = 200000;

}  // namespace

std::pair<std::vector<double>, double> compass_search(const Objective& f, std::vector<double> x,
                                                      std::vector<double> step,
                                                      const std::vector<Box>& box) {
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::clamp(x[i], box[i].lo, box[i].hi);
  }
  double best = f(x);
  const std::vector<double> initial = step;
  int evaluations = 1;
  while (evaluations < kMaxEvaluations) {
    bool improved = false;
    for (size_t i = 0; i < x.size() && !improved; ++i) {
      for (double sign : {1.0, -1.0}) {
        std::vector<double> y = x;
        y[i] = std::clamp(x[i] + sign * step[i], box[i].lo, box[i].hi);
        if (step[i] == 0.0 || y[i] == x[i]) continue;
        const double value = f(y);
        ++evaluations;
        if (value < best) {
          best = value;
          x = std::move(y);
          improved = true;
          break;
        }
      }
    }
    if (improved) continue;
    bool small = true;
    for (size_t i = 0; i < step.size(); ++i) {
      step[i] /= 2.0;
      small = small && (initial[i] == 0.0 || step[i] < kStopRelativeStep * initial[i]);
    }
    if (small) break;
  }
  return {x, best};
}

double round_significant(double x, int digits) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  const double scale =
      std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(x)))));
  return std::round(x * scale) / scale;
}

}  // namespace upsim
