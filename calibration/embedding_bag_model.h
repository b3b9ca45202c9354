// Data-distribution-aware embedding-bag model for FBGEMM-style table-batched lookups
// (forward, and backward with a fused SGD / Adagrad / row-wise Adagrad update). Two parts:
//
// 1. Traffic (embedding_table_traffic, per table). From each table's rows E, dim D, pooling L,
// the batch B and the reuse-factor histogram of its indices (Lin et al., TPDS 2024) it derives
// the distinct rows touched, the L2 hit rate and the DRAM and L2 traffic, then a bandwidth time
// (Lin et al., TPDS 2024, with the histogram replacing the uniform-index assumption when known).
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
//   backward with update kScatterAdd (PyTorch's sparse gradient applied by index_add_: one
//   value row per lookup, atomic adds, no sort or deduplication; SGD only):
//             DRAM   = N (row + i) + 2 misses row     (values and indices read once; each
//                                                     missed row read and written back)
//             L2     = N row                          (the atomic adds resolve in L2)
//   seconds          = max(DRAM / (hbm x achievable.memory x dram_scale),
//                          L2 / (l2_bandwidth x l2_scale)) x dim_factor(D)
// with sort_passes = ceil(ceil(log2 E) / sort_radix_bits), the L2 term skipped on a device
// whose profile gives no L2 bandwidth, and dim_factor the seed's small-dim factor.
//
// 2. Kernels and latency (embedding_op_time, per op). An op is the sequence of kernels FBGEMM
// launches; each kernel lasts at least kernel_floor, and the latency-bound kernels add a fitted
// latency (their critical path: dependent global-memory round trips of one warp or one block).
// With N = lookups of the op (all tables), bags = B T, pooling Lm = N / bags, W = the bandwidth
// time of part 1 summed over the tables:
//   forward  (1 kernel, split_embedding_codegen_forward_*_kernel; a thread group walks its bag's
//            rows one after another):
//            kernel_floor + max(forward_latency + forward_row_latency x Lm, W)
//   backward (FBGEMM split_embedding_backward_codegen_*: transpose_embedding_input in
//            fbgemm_gpu/src/split_embeddings_utils.cu, then the update kernels of
//            embedding_backward_split_template.cu; pytorch/FBGEMM at 1ce19f3):
//            kernels x kernel_floor + max(latency, W), latency =
//              index_step_latency x 32 ceil(Lm / 32)   linearize_index_kernel: each warp walks
//                                                      its 32 bags in turn, 32 indices a step
//            + sort                                    cub::DeviceRadixSort::SortPairs over
//                                                      total_hash_size_bits = floor(log2 sum E)+1
//            + encode_latency                          RunLengthEncode (reduce-by-key), the run
//                                                      offsets' InclusiveSum, find_long_segments
//            + update_latency                          cta_per_row + warp_per_row update kernels
//            sort = sort_tile_latency                  N <= sort_single_tile_items: one
//                                                      DeviceRadixSortSingleTileKernel
//                   sort_upsweep_latency + passes x sort_pass_latency   otherwise: histogram,
//                                                      exclusive sum, `passes` onesweep kernels,
//                   passes = ceil(total_hash_size_bits / sort_radix_bits)
//            kernels = 1 (linearize) + sort kernels (1, or 2 + passes) + 4 (run-length encode:
//              zeros_like, zeros, compact init, reduce-by-key) + 3 (complete cumsum: zero_,
//              scan init, scan) + 3 (two zeros, find_long_segments) + 1 if N >= kMaxThreads
//              (1024: the temp_grad_accum zeros, empty below) + 2 (cta_per_row, warp_per_row).
//   backward with update kScatterAdd: one kernel (index_add_), no latency term:
//            kernel_floor + W
// The latency terms and kernel_floor are fitted (fit_embedding_latencies) on the per-kernel
// durations of the V100 TorchRec DLRM trace (test/data/dlrm_v100_embedding); the kernel list
// matches that trace on all 8 ranks (14, 15 or 20 kernels).
//
// Contract: pure; throws std::invalid_argument for negative or inconsistent shapes (a histogram
// with other than kReuseHistogramBins entries, negative entries or a zero sum), for a device
// without HBM bandwidth, SM count or L2 size, and for a scatter-add update with an optimizer
// other than SGD.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/hardware_profile.h"
#include "sim/cost_models.h"

namespace upsim {

/// Parameters of the embedding-bag model (name, unit, default, source).
struct EmbeddingParams {
  /// l2_usable_fraction (dimensionless, default 0.9): share of L2 that holds table rows.
  /// Source: Lin et al., TPDS 2024, X = 0.9 L2_size / tables_simul / 4 / D.
  double l2_usable_fraction = 0.9;
  /// warps_per_sm (count, default 45): resident lookup warps per SM, one bag each. Source:
  /// Lin et al., TPDS 2024, FBGEMM "64 x 0.71 achieved occupancy" = 45.
  int64_t warps_per_sm = 45;
  /// dram_scale (dimensionless, default 1): achieved / (hbm x achievable.memory).
  double dram_scale = 1.0;
  /// l2_scale (dimensionless, default 1): achieved / profile L2 bandwidth (itself measured).
  double l2_scale = 1.0;
  /// dim_factor_32 / dim_factor_64 (dimensionless, defaults 1.55 / 1.1): time factor for
  /// D <= 32 and 32 < D <= 64. Source: Lin et al., TPDS 2024, f(D) ("empirical, probably
  /// divergence").
  double dim_factor_32 = 1.55;
  double dim_factor_64 = 1.1;
  /// sort_radix_bits (bits, default 8): key bits sorted per radix pass in the backward. Source:
  /// CUB's onesweep radix sort, 8 bits per pass (cub/agent/agent_radix_sort_onesweep.cuh); the
  /// V100 trace runs 4 onesweep kernels for its 26-bit keys.
  int64_t sort_radix_bits = 8;
  /// sort_single_tile_items (items, default 2304): the largest sort CUB does in one
  /// DeviceRadixSortSingleTileKernel (one block of 256 threads x 9 int64 keys). Source: the V100
  /// trace sorts 2304 keys in one tile and 4736 with onesweep.
  int64_t sort_single_tile_items = 2304;
  /// The latency terms below, in the header's formulas: defaults are the fit
  /// (fit_embedding_latencies) on ranks 0, 2, 4, 6 of
  /// test/data/dlrm_v100_embedding/embedding_kernels.csv (V100-SXM2-32GB, Kineto durations).
  /// kernel_floor: every kernel's minimum time (the mean of the trace's fill and scan/compact
  /// init kernels, which do no work).
  Duration kernel_floor = Duration::from_ns(2032);
  /// forward_latency + forward_row_latency x Lm: the forward kernel's critical path.
  Duration forward_latency = Duration::from_ns(2362);
  Duration forward_row_latency = Duration::from_ns(1415);
  /// index_step_latency: one step (32 indices of one bag) of linearize_index_kernel.
  Duration index_step_latency = Duration::from_ns(554);
  /// sort_tile_latency: the single-tile sort; sort_upsweep_latency: histogram, exclusive sum
  /// and the first onesweep pass's extra time; sort_pass_latency: one onesweep pass.
  Duration sort_tile_latency = Duration::from_ns(10635);
  Duration sort_upsweep_latency = Duration::from_ns(14269);
  Duration sort_pass_latency = Duration::from_ns(7635);
  /// encode_latency: reduce-by-key + inclusive scan + find_long_segments, over their floors.
  Duration encode_latency = Duration::from_ns(10154);
  /// update_latency: cta_per_row + warp_per_row update kernels, over their floors.
  Duration update_latency = Duration::from_ns(34686);
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
EmbeddingTableTraffic embedding_table_traffic(
    KernelClass cls, DType dtype, int64_t batch, const EmbeddingTableShape& table,
    int64_t index_bytes, FusedEmbeddingOptimizer optimizer, const DeviceProfile& device,
    const AchievableFractions& achievable, const EmbeddingParams& params,
    EmbeddingUpdate update = EmbeddingUpdate::kFusedDeduplicated);

/// Kernels of one FBGEMM op and its time (part 2 of the header).
struct EmbeddingOpTime {
  int64_t kernels = 0;
  /// Critical-path latency over the kernel floors, seconds.
  double latency_seconds = 0.0;
  /// Bandwidth time of part 1 summed over the tables, seconds.
  double bandwidth_seconds = 0.0;
  /// kernels x kernel_floor + max(latency, bandwidth).
  double seconds = 0.0;
};

/// The kernels and time of a kEmbeddingForward / kEmbeddingBackward op over its tables
/// (`embedding.per_table`, or `tables` copies of the average table).
EmbeddingOpTime embedding_op_time(const KernelDesc& kernel, const DeviceProfile& device,
                                  const AchievableFractions& achievable,
                                  const EmbeddingParams& params);

/// embedding_op_time(...).seconds: the op's whole GPU time, kernel floors included.
double embedding_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const EmbeddingParams& params);

/// FBGEMM's total_hash_size_bits for tables of `total_rows` rows together: floor(log2) + 1.
int64_t total_hash_size_bits(int64_t total_rows);

/// What one measured kernel of an FBGEMM embedding op did (embedding_kernels.csv `kernel`).
enum class EmbeddingKernelRole : uint8_t {
  kForward,           ///< split_embedding_codegen_forward_*_kernel
  kLinearize,         ///< linearize_index_kernel
  kSortSingleTile,    ///< cub::DeviceRadixSortSingleTileKernel
  kSortHistogram,     ///< cub::DeviceRadixSortHistogramKernel
  kSortExclusiveSum,  ///< cub::DeviceRadixSortExclusiveSumKernel
  kSortPass,          ///< cub::DeviceRadixSortOnesweepKernel
  kFill,              ///< FillFunctor (zeros), DeviceCompactInitKernel, DeviceScanInitKernel
  kEncode,            ///< DeviceReduceByKeyKernel, DeviceScanKernel, find_long_segments
  kUpdate,            ///< the cta_per_row and warp_per_row update kernels
};
/// The role named `name` (forward, linearize, sort_single_tile, sort_histogram,
/// sort_exclusive_sum, sort_pass, fill, encode, update), or nullopt.
std::optional<EmbeddingKernelRole> parse_embedding_kernel_role(std::string_view name);

/// One measured kernel of one op: `op` identifies the op (e.g. "rank 0 backward"); `lookups` and
/// `bags` are the op's N and B T; kernels of an op are listed in launch order.
struct EmbeddingKernelSample {
  std::string op;
  EmbeddingKernelRole role = EmbeddingKernelRole::kFill;
  double lookups = 0.0;
  double bags = 0.0;
  double seconds = 0.0;
};

/// Fits kernel_floor and the latency terms to measured kernels; the other fields keep `start`.
/// Closed form, deterministic, each value rounded to whole nanoseconds:
///   kernel_floor          mean of the kFill kernels
///   forward_*             least squares of (forward - floor) on Lm = lookups / bags
///   index_step_latency    mean of (linearize - floor) / (32 ceil(Lm / 32))
///   sort_tile_latency     mean of (single tile - floor)
///   sort_pass_latency     mean of (pass - floor) over the onesweep passes after an op's first
///   sort_upsweep_latency  mean over onesweep ops of (histogram - floor) + (exclusive sum -
///                         floor) + (first pass - floor - sort_pass_latency)
///   encode_latency        mean over ops of the sum of (kEncode - floor)
///   update_latency        mean over ops of the sum of (kUpdate - floor)
/// Throws std::invalid_argument when a role needed by a term has no sample.
EmbeddingParams fit_embedding_latencies(const std::vector<EmbeddingKernelSample>& samples,
                                        const EmbeddingParams& start);

}  // namespace upsim
