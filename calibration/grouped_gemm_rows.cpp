#include "calibration/grouped_gemm_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace upsim {

GroupedRowExpectation expect_grouped_rows(const GroupedRows& rows, int64_t groups, int64_t tile) {
  if (rows.routed <= 0 || rows.cap < 0 || groups <= 0 || tile <= 0) {
    throw std::invalid_argument(fmt::format(
        "grouped GEMM rows: need routed rows > 0, cap >= 0, groups > 0 and a tile > 0, got {} "
        "rows (cap {}) over {} groups, tile {}",
        rows.routed, rows.cap, groups, tile));
  }
  const int64_t cap = rows.cap > 0 ? rows.cap : rows.routed;
  const auto kept = [cap](int64_t x) { return std::min(x, cap); };
  const auto row_tiles = [&](int64_t x) {
    return static_cast<double>((kept(x) + tile - 1) / tile);
  };
  GroupedRowExpectation out;
  if (groups == 1) {
    out.row_tiles_per_group = row_tiles(rows.routed);
    out.rows_per_group = static_cast<double>(kept(rows.routed));
    out.nonempty_groups = 1.0;
    return out;
  }
  const double n = static_cast<double>(rows.routed);
  const double p = 1.0 / static_cast<double>(groups);
  const double mean = n * p;
  const double sd = std::sqrt(n * p * (1.0 - p));
  const auto lo = static_cast<int64_t>(std::max(0.0, std::floor(mean - 12.0 * sd - 1.0)));
  const auto hi = static_cast<int64_t>(std::min(n, std::ceil(mean + 12.0 * sd + 1.0)));
  const double log_n_fact = std::lgamma(n + 1.0);
  const double log_p = std::log(p);
  const double log_q = std::log1p(-p);
  double mass = 0.0, tiles = 0.0, kept_rows = 0.0, empty = 0.0;
  for (int64_t x = lo; x <= hi; ++x) {
    const double xd = static_cast<double>(x);
    const double pmf = std::exp(log_n_fact - std::lgamma(xd + 1.0) - std::lgamma(n - xd + 1.0) +
                                xd * log_p + (n - xd) * log_q);
    mass += pmf;
    tiles += pmf * row_tiles(x);
    kept_rows += pmf * static_cast<double>(kept(x));
    if (x == 0) empty += pmf;
  }
  out.row_tiles_per_group = tiles / mass;
  out.rows_per_group = kept_rows / mass;
  out.nonempty_groups = static_cast<double>(groups) * (1.0 - empty / mass);
  return out;
}

}  // namespace upsim
