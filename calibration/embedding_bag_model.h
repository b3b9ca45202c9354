// Data-distribution-aware embedding-bag model for FBGEMM-style table-batched lookups
// (forward, and backward with a fused SGD / Adagrad / row-wise Adagrad update). From each
// table's rows E, dim D, pooling L, the batch B and the reuse-factor histogram of its indices
// (seed-method.md 2.4(b)) it derives the distinct rows touched, the L2 hit rate and the DRAM and
// L2 traffic, then a time from the achieved bandwidths (seed-method.md 2.4(a), with the
// histogram replacing the uniform-index assumption when it is known).
//
// Per table (N = B L lookups, row = ceil32(D e) bytes: rows are read in 32-byte sectors;
// e = dtype_bytes, i = index bytes):
//   distinct rows U  uniform indices (no histogram):  E (1 - (1 - 1/E)^N)            [seed 2.4(a)]
//                    histogram h over bins b:         N / sum_b h_b c_b,
//                    c_b = mean access count of bin b (reuse_bin_mean_count), U in [1, min(E, N)]
//   resident rows X  = min(floor(l2_usable_fraction x L2 / tables_concurrent / row), E, N),
//                    tables_concurrent = ceil(sm_count x warps_per_sm / B)        [seed 2.4(a)]
//   misses           = U                            if U <= X (compulsory misses only)
//                      U + (N - U)(1 - X / U)       otherwise: a repeat access finds its row in
//                                                   the cache with probability X / U
//   hit rate         = 1 - misses / N
//   forward   DRAM   = B (ceil32(L i) + 32 + 64) + misses row + B row   (indices, table offset,
//                      bag offsets [seed 2.4(a)], gathered rows, pooled output)
//             L2     = (N - misses) row                                     [seed 2.4(a)]
//   backward  DRAM   = B (ceil32(L i) + 32 + 64) + B row                   (indices, offsets,
//                      pooled gradient) + sort_passes x 2 N (i + 4)        (radix sort of
//                      (index, position) pairs, read and written each pass) + 2 U row
//                      (read-modify-write of each distinct row once: FBGEMM sorts and
//                      deduplicates the indices before the fused update) + optimizer state
//                      (Adagrad 2 U ceil32(4 D), row-wise Adagrad 2 U 32, SGD 0)
//             L2     = N row                        (each lookup gathers its bag's gradient row)
//   time             = max(DRAM / (hbm x achievable.memory x dram_scale),
//                          L2 / (l2_bandwidth x l2_scale)) x dim_factor(D)
// with sort_passes = ceil(ceil(log2 E) / sort_radix_bits), the L2 term skipped on a device
// whose profile gives no L2 bandwidth, and dim_factor the seed's small-dim factor. An op's time
// is the sum over its tables (the seed's E2E code also prices tables one by one).
//
// Contract: pure; throws std::invalid_argument for negative or inconsistent shapes (a histogram
// with other than kReuseHistogramBins entries, negative entries or a zero sum) and for a device
// without HBM bandwidth, SM count or L2 size.
#pragma once

#include <cstdint>
#include <span>

#include "calibration/hardware_profile.h"
#include "sim/cost_models.h"

namespace upsim {

/// Parameters of the embedding-bag model (name, unit, default, source).
struct EmbeddingParams {
  /// l2_usable_fraction (dimensionless, default 0.9): share of L2 that holds table rows.
  /// Source: seed-method.md 2.4(a), X = 0.9 L2_size / tables_simul / 4 / D.
  double l2_usable_fraction = 0.9;
  /// warps_per_sm (count, default 45): resident lookup warps per SM, one bag each. Source:
  /// seed-method.md 2.4(a), FBGEMM "64 x 0.71 achieved occupancy" = 45.
  int64_t warps_per_sm = 45;
  /// dram_scale (dimensionless, default 1): achieved / (hbm x achievable.memory).
  double dram_scale = 1.0;
  /// l2_scale (dimensionless, default 1): achieved / profile L2 bandwidth (itself measured).
  double l2_scale = 1.0;
  /// dim_factor_32 / dim_factor_64 (dimensionless, defaults 1.55 / 1.1): time factor for
  /// D <= 32 and 32 < D <= 64. Source: seed-method.md 2.4(a), f(D) ("empirical, probably
  /// divergence").
  double dim_factor_32 = 1.55;
  double dim_factor_64 = 1.1;
  /// sort_radix_bits (bits, default 8): key bits sorted per radix pass in the backward. Source:
  /// CUB's onesweep radix sort, 8 bits per pass (cub/agent/agent_radix_sort_onesweep.cuh).
  int64_t sort_radix_bits = 8;
};

/// Traffic of one table, for explanations and tests.
struct EmbeddingTableTraffic {
  double lookups = 0.0;
  double distinct_rows = 0.0;
  double resident_rows = 0.0;
  double hit_rate = 0.0;
  double dram_bytes = 0.0;
  double l2_bytes = 0.0;
  double seconds = 0.0;
};

void check_embedding_params(const EmbeddingParams& params);

/// Mean access count of a distinct row in reuse-histogram bin `bin`: 1 for bin 0, the mean of
/// the integers in (2^(b-1), 2^b] = (3 x 2^(b-1) + 1) / 2 for bins 1..15, and 2^16 for the
/// open bin 16 (twice its lower bound).
double reuse_bin_mean_count(size_t bin);

/// E (1 - (1 - 1/E)^N): expected distinct rows among N uniformly random indices into E rows.
double expected_distinct_rows_uniform(double rows, double lookups);

/// N / (mean access count under `histogram`), clamped to [min(1, N), min(E, N)].
double distinct_rows_from_histogram(std::span<const double> histogram, double rows, double lookups);

/// 1 - misses / N with misses as in the header comment; 0 when N = 0.
double embedding_hit_rate(double lookups, double distinct_rows, double resident_rows);

/// Traffic and time of one table of a kEmbeddingForward / kEmbeddingBackward kernel.
EmbeddingTableTraffic embedding_table_traffic(KernelClass cls, DType dtype, int64_t batch,
                                              const EmbeddingTableShape& table, int64_t index_bytes,
                                              FusedEmbeddingOptimizer optimizer,
                                              const DeviceProfile& device,
                                              const AchievableFractions& achievable,
                                              const EmbeddingParams& params);

/// Core time in seconds (no fixed per-kernel time) of an embedding kernel: the sum over its
/// tables (`embedding.per_table`, or `tables` copies of the average table).
double embedding_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const EmbeddingParams& params);

}  // namespace upsim
