// Expectations over the rows of a grouped GEMM's groups (GroupedRows, sim/cost_models.h): the
// GEMM and roofline models price a grouped GEMM whose groups hold unequal rows by the expected
// tiles, rows and weights it computes and reads.
//
// Model: `routed` rows fall to G groups independently and uniformly, so a group's row count is
// X ~ Binomial(routed, 1 / G) (the marginal of a multinomial; a top-k router that keeps the
// experts balanced in expectation, as an auxiliary load-balancing loss aims to), and the group
// computes min(X, cap) of them (cap 0: all). A grouped GEMM tiles each group on its own (CUTLASS
// grouped GEMMs and cuBLAS grouped batches schedule every group's tiles, none shared), so with t
// rows per tile the group computes ceil(min(X, cap) / t) row tiles and reads its weight only when
// it has a row. Few rows per group make the padding of the last tile a large share of the work:
// 256 rows over 16 groups (16 each, sd 3.9) on 128-row tiles compute 16 row tiles where the
// rows would fill 2.
//
// Exact sums over the binomial's probabilities within 12 standard deviations of its mean (the
// mass outside is below 1e-30), renormalised over that window; deterministic.
#pragma once

#include <cstdint>

#include "sim/cost_models.h"

namespace upsim {

struct GroupedRowExpectation {
  double row_tiles_per_group = 0.0;  ///< E[ceil(min(X, cap) / tile)]
  double rows_per_group = 0.0;       ///< E[min(X, cap)]
  double nonempty_groups = 0.0;      ///< G x P(min(X, cap) > 0): groups that read their weight
};

/// For GroupedRows `rows` over `groups` groups and row tiles of `tile` rows. Throws
/// std::invalid_argument unless rows.routed > 0, rows.cap >= 0, groups > 0 and tile > 0.
GroupedRowExpectation expect_grouped_rows(const GroupedRows& rows, int64_t groups, int64_t tile);

}  // namespace upsim
