#include "calibration/embedding_bag_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace upsim {
namespace {

constexpr double kSectorBytes = 32.0;       // DRAM/L2 access granularity (seed-method.md 2.4(a))
constexpr double kTableOffsetBytes = 32.0;  // per bag, seed-method.md 2.4(a)
constexpr double kBagOffsetBytes = 64.0;    // per bag, seed-method.md 2.4(a)
constexpr double kSortValueBytes = 4.0;     // int32 position carried with each sorted index

double ceil_sector(double bytes) {
  return std::ceil(bytes / kSectorBytes) * kSectorBytes;
}

double as_double(int64_t v) {
  return static_cast<double>(v);
}

void check_histogram(std::span<const double> histogram) {
  if (histogram.size() != kReuseHistogramBins) {
    throw std::invalid_argument(
        fmt::format("embedding model: a reuse histogram has {} bins, got {}", kReuseHistogramBins,
                    histogram.size()));
  }
  double sum = 0.0;
  for (double h : histogram) {
    if (!(h >= 0.0)) {
      throw std::invalid_argument("embedding model: reuse histogram entries must be >= 0");
    }
    sum += h;
  }
  if (!(sum > 0.0)) throw std::invalid_argument("embedding model: reuse histogram sums to 0");
}

double dim_factor(int64_t dim, const EmbeddingParams& p) {
  if (dim <= 32) return p.dim_factor_32;
  if (dim <= 64) return p.dim_factor_64;
  return 1.0;
}

}  // namespace

void check_embedding_params(const EmbeddingParams& p) {
  if (!(p.l2_usable_fraction > 0.0 && p.l2_usable_fraction <= 1.0)) {
    throw std::invalid_argument(fmt::format(
        "embedding model: l2_usable_fraction must be in (0, 1], got {}", p.l2_usable_fraction));
  }
  if (p.warps_per_sm <= 0 || p.sort_radix_bits <= 0) {
    throw std::invalid_argument(
        "embedding model: warps_per_sm and sort_radix_bits must be positive");
  }
  if (!(p.dram_scale > 0.0) || !(p.l2_scale > 0.0) || !(p.dim_factor_32 > 0.0) ||
      !(p.dim_factor_64 > 0.0)) {
    throw std::invalid_argument("embedding model: scales and dim factors must be positive");
  }
}

double reuse_bin_mean_count(size_t bin) {
  if (bin == 0) return 1.0;
  if (bin + 1 >= kReuseHistogramBins) return std::ldexp(1.0, 16);
  return (3.0 * std::ldexp(1.0, static_cast<int>(bin) - 1) + 1.0) / 2.0;
}

double expected_distinct_rows_uniform(double rows, double lookups) {
  if (rows <= 0.0 || lookups <= 0.0) return 0.0;
  // (1 - 1/E)^N computed as exp(N log1p(-1/E)) so that large E keeps its precision.
  return -rows * std::expm1(lookups * std::log1p(-1.0 / rows));
}

double distinct_rows_from_histogram(std::span<const double> histogram, double rows,
                                    double lookups) {
  check_histogram(histogram);
  if (lookups <= 0.0) return 0.0;
  double sum = 0.0;
  double weighted = 0.0;
  for (size_t b = 0; b < histogram.size(); ++b) {
    sum += histogram[b];
    weighted += histogram[b] * reuse_bin_mean_count(b);
  }
  const double mean_count = weighted / sum;
  const double upper = std::min(rows, lookups);
  return std::clamp(lookups / mean_count, std::min(1.0, upper), upper);
}

double embedding_hit_rate(double lookups, double distinct_rows, double resident_rows) {
  if (lookups <= 0.0) return 0.0;
  double misses = distinct_rows;
  if (distinct_rows > resident_rows) {
    misses += (lookups - distinct_rows) * (1.0 - resident_rows / distinct_rows);
  }
  return 1.0 - misses / lookups;
}

EmbeddingTableTraffic embedding_table_traffic(KernelClass cls, DType dtype, int64_t batch,
                                              const EmbeddingTableShape& table, int64_t index_bytes,
                                              FusedEmbeddingOptimizer optimizer,
                                              const DeviceProfile& device,
                                              const AchievableFractions& achievable,
                                              const EmbeddingParams& params) {
  if (cls != KernelClass::kEmbeddingForward && cls != KernelClass::kEmbeddingBackward) {
    throw std::invalid_argument(
        fmt::format("embedding model: got a {} kernel", kernel_class_name(cls)));
  }
  if (batch < 0 || table.rows < 0 || table.dim < 0 || !(table.pooling >= 0.0) || index_bytes <= 0) {
    throw std::invalid_argument(fmt::format(
        "embedding model: bad table shape (batch {}, rows {}, dim {}, pooling {}, index bytes {})",
        batch, table.rows, table.dim, table.pooling, index_bytes));
  }
  const double hbm = device.hbm_bandwidth.bytes_per_second();
  if (hbm <= 0.0 || device.sm_count <= 0 || device.l2_bytes <= 0) {
    throw std::invalid_argument(fmt::format(
        "embedding model: device `{}` needs HBM bandwidth, SM count and L2 size", device.name));
  }

  EmbeddingTableTraffic t;
  const double b = as_double(batch);
  const double e_rows = as_double(table.rows);
  const double row = ceil_sector(as_double(table.dim * dtype_bytes(dtype)));
  const double idx = as_double(index_bytes);
  t.lookups = b * table.pooling;
  if (batch == 0 || table.rows == 0 || table.dim == 0) return t;

  t.distinct_rows = table.reuse_histogram.empty()
                        ? expected_distinct_rows_uniform(e_rows, t.lookups)
                        : distinct_rows_from_histogram(table.reuse_histogram, e_rows, t.lookups);
  const double warps = as_double(device.sm_count) * as_double(params.warps_per_sm);
  const double tables_concurrent = std::ceil(warps / b);
  const double fit =
      std::floor(params.l2_usable_fraction * as_double(device.l2_bytes) / tables_concurrent / row);
  t.resident_rows = std::min({fit, e_rows, t.lookups});
  t.hit_rate = embedding_hit_rate(t.lookups, t.distinct_rows, t.resident_rows);

  const double per_bag = ceil_sector(table.pooling * idx) + kTableOffsetBytes + kBagOffsetBytes;
  if (cls == KernelClass::kEmbeddingForward) {
    const double misses = (1.0 - t.hit_rate) * t.lookups;
    t.dram_bytes = b * per_bag + misses * row + b * row;
    t.l2_bytes = (t.lookups - misses) * row;
  } else {
    const double key_bits = std::max(1.0, std::ceil(std::log2(e_rows)));
    const double sort_passes = std::ceil(key_bits / as_double(params.sort_radix_bits));
    double state = 0.0;
    switch (optimizer) {
      case FusedEmbeddingOptimizer::kSgd:
        break;
      case FusedEmbeddingOptimizer::kAdagrad:
        state = 2.0 * t.distinct_rows * ceil_sector(4.0 * as_double(table.dim));
        break;
      case FusedEmbeddingOptimizer::kRowWiseAdagrad:
        state = 2.0 * t.distinct_rows * kSectorBytes;
        break;
    }
    t.dram_bytes = b * per_bag + b * row + sort_passes * 2.0 * t.lookups * (idx + kSortValueBytes) +
                   2.0 * t.distinct_rows * row + state;
    t.l2_bytes = t.lookups * row;
  }

  double seconds = t.dram_bytes / (hbm * achievable.memory * params.dram_scale);
  const double l2_bw = device.l2_bandwidth.bytes_per_second();
  if (l2_bw > 0.0) seconds = std::max(seconds, t.l2_bytes / (l2_bw * params.l2_scale));
  t.seconds = seconds * dim_factor(table.dim, params);
  return t;
}

double embedding_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const EmbeddingParams& params) {
  const EmbeddingShape& s = kernel.embedding;
  if (!s.per_table.empty()) {
    double total = 0.0;
    for (const EmbeddingTableShape& table : s.per_table) {
      total += embedding_table_traffic(kernel.cls, kernel.dtype, s.batch, table, s.index_bytes,
                                       s.optimizer, device, achievable, params)
                   .seconds;
    }
    return total;
  }
  if (s.tables < 0) throw std::invalid_argument("embedding model: negative table count");
  const EmbeddingTableShape average{s.rows, s.dim, s.pooling, s.reuse_histogram};
  return as_double(s.tables) * embedding_table_traffic(kernel.cls, kernel.dtype, s.batch, average,
                                                       s.index_bytes, s.optimizer, device,
                                                       achievable, params)
                                   .seconds;
}

}  // namespace upsim
