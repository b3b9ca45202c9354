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
// it has a row. The spread pads more tiles than equal groups would: 4096 rows over 16 groups
// (256 each on average, sd 15.5) on 128-row tiles compute about 2.5 row tiles per group where 16
// groups of exactly 256 rows compute 2 (about half the groups get a third tile).
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
