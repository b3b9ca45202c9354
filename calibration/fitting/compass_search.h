// The deterministic local search every calibration fit uses (fit_kernel_calibration.h,
// fit_attention.h): compass search in a box.
//
// From `x` (clamped into the box), try +-step along each parameter in order and take the first
// improvement; when none improves, halve every step; stop when every non-zero step is below
// 1e-7 of its initial value, or after 200,000 evaluations. A zero step keeps its parameter fixed.
// No randomness: the same objective and start give the same point, bit for bit.
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace upsim {

struct Box {
  double lo;
  double hi;
};

using Objective = std::function<double(const std::vector<double>&)>;

/// The best point found and its value. `x`, `step` and `box` have one entry per parameter.
std::pair<std::vector<double>, double> compass_search(const Objective& f, std::vector<double> x,
                                                      std::vector<double> step,
                                                      const std::vector<Box>& box);

/// `x` rounded to `digits` significant decimal digits, so that a file states exactly the values
/// that were validated and stays readable.
double round_significant(double x, int digits);

}  // namespace upsim
