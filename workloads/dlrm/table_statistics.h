// Access statistics of embedding tables: the seed's 17-bin reuse histogram (Lin et al., TPDS
// 2024 Sec. 2.4b: the distinct rows of one batch binned by their access count, (0, 1], (1, 2],
// (2, 4], ..., (2^14, 2^15], (2^15, inf), as fractions of the distinct rows), measured per table
// or generated from an access distribution.
//
// Contract: pure functions; a histogram has kReuseHistogramBins non-negative fractions summing
// to 1 (all 0 for a batch without lookups).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace upsim {

/// sum_{i = a}^{b} i^-alpha for 1 <= a <= b (0 when b < a): exact below 64 terms, else the
/// integral with the trapezoid's end correction (Euler-Maclaurin to first order).
double zipf_mass(double a, double b, double alpha);

/// The reuse bin of a row accessed `count` (>= 1) times in a batch.
size_t reuse_bin(double count);

/// The expected reuse histogram of `lookups` draws from `rows` rows with Zipf probabilities
/// p_i = i^-alpha / H(rows, alpha) (alpha >= 0; 0 is uniform). Each row i is accessed
/// Poisson(lookups p_i) times, so it adds P(k accesses) to the bin of k for every k >= 1 (the
/// histogram is over the expected distinct rows). Rows are summed in log-spaced groups
/// (2^(1/8) wide) with the Zipf mass of each group by its integral, so any number of rows costs
/// a few hundred terms; the error of that grouping is below 1% of a bin's fraction. All zeros
/// when `lookups` is 0, or so small that no row's expected count is representable.
std::vector<double> zipf_reuse_histogram(int64_t rows, double lookups, double alpha);

}  // namespace upsim
