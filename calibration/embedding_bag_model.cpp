#include "calibration/embedding_bag_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

namespace upsim {
namespace {

constexpr double kSectorBytes = 32.0;       // DRAM/L2 access granularity (Lin et al., TPDS 2024)
constexpr double kTableOffsetBytes = 32.0;  // per bag, Lin et al., TPDS 2024
constexpr double kBagOffsetBytes = 64.0;    // per bag, Lin et al., TPDS 2024
constexpr double kSortValueBytes = 4.0;     // int32 position carried with each sorted index
// FBGEMM's backward (header, part 2): kWarpSize and kMaxThreads of fbgemm_gpu, and the kernel
// counts of the run-length encode (zeros_like, zeros, compact init, reduce-by-key), the complete
// cumsum (zero_, scan init, scan), find_long_segments with its two zeros, and the two update
// kernels.
constexpr double kWarpSize = 32.0;
constexpr double kMaxThreads = 1024.0;
constexpr int64_t kEncodeKernels = 4;
constexpr int64_t kCumsumKernels = 3;
constexpr int64_t kSegmentKernels = 3;
constexpr int64_t kUpdateKernels = 2;

double ceil_sector(double bytes) {
  return std::ceil(bytes / kSectorBytes) * kSectorBytes;
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
  if (p.sort_single_tile_items < 0) {
    throw std::invalid_argument("embedding model: sort_single_tile_items must not be negative");
  }
  for (const Duration d : {p.kernel_floor, p.forward_latency, p.forward_row_latency,
                           p.index_step_latency, p.sort_tile_latency, p.sort_upsweep_latency,
                           p.sort_pass_latency, p.encode_latency, p.update_latency}) {
    if (d < Duration::zero()) {
      throw std::invalid_argument("embedding model: latencies must not be negative");
    }
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

EmbeddingTableTraffic embedding_table_traffic(
    KernelClass cls, DType dtype, int64_t batch, const EmbeddingTableShape& table,
    int64_t index_bytes, FusedEmbeddingOptimizer optimizer, const DeviceProfile& device,
    const AchievableFractions& achievable, const EmbeddingParams& params, EmbeddingUpdate update) {
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
  } else if (update == EmbeddingUpdate::kScatterAdd) {
    if (optimizer != FusedEmbeddingOptimizer::kSgd) {
      throw std::invalid_argument(
          "embedding model: a scatter-add update is torch.optim.SGD's; it has no optimizer state");
    }
    const double misses = (1.0 - t.hit_rate) * t.lookups;
    t.dram_bytes = t.lookups * (row + idx) + 2.0 * misses * row;
    t.l2_bytes = t.lookups * row;
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
      case FusedEmbeddingOptimizer::kAdam:
        // FBGEMM's fused Adam: both moments of every touched row read and written.
        state = 4.0 * t.distinct_rows * ceil_sector(4.0 * as_double(table.dim));
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

int64_t total_hash_size_bits(int64_t total_rows) {
  if (total_rows <= 1) return 1;
  return static_cast<int64_t>(std::floor(std::log2(as_double(total_rows)))) + 1;
}

EmbeddingOpTime embedding_op_time(const KernelDesc& kernel, const DeviceProfile& device,
                                  const AchievableFractions& achievable,
                                  const EmbeddingParams& params) {
  const EmbeddingShape& s = kernel.embedding;
  std::vector<EmbeddingTableShape> tables = s.per_table;
  if (tables.empty()) {
    if (s.tables < 0) throw std::invalid_argument("embedding model: negative table count");
    tables.assign(static_cast<size_t>(s.tables),
                  EmbeddingTableShape{s.rows, s.dim, s.pooling, s.reuse_histogram});
  }
  EmbeddingOpTime out;
  double lookups = 0.0;
  int64_t total_rows = 0;
  for (const EmbeddingTableShape& table : tables) {
    const EmbeddingTableTraffic t =
        embedding_table_traffic(kernel.cls, kernel.dtype, s.batch, table, s.index_bytes,
                                s.optimizer, device, achievable, params, s.update);
    out.bandwidth_seconds += t.seconds;
    lookups += t.lookups;
    total_rows += table.rows;
  }
  const double bags = as_double(s.batch) * as_double(static_cast<int64_t>(tables.size()));
  if (bags <= 0.0) return out;
  const double pooling = lookups / bags;

  if (kernel.cls == KernelClass::kEmbeddingForward) {
    out.kernels = 1;
    out.latency_seconds =
        params.forward_latency.seconds() + params.forward_row_latency.seconds() * pooling;
  } else if (s.update == EmbeddingUpdate::kScatterAdd) {
    out.kernels = 1;  // index_add_'s one elementwise kernel: no dependent round trips
  } else {
    const double index_steps = kWarpSize * std::max(1.0, std::ceil(pooling / kWarpSize));
    double sort = params.sort_tile_latency.seconds();
    int64_t sort_kernels = 1;
    if (lookups > as_double(params.sort_single_tile_items)) {
      const int64_t bits = total_hash_size_bits(total_rows);
      const int64_t passes = (bits + params.sort_radix_bits - 1) / params.sort_radix_bits;
      sort = params.sort_upsweep_latency.seconds() +
             as_double(passes) * params.sort_pass_latency.seconds();
      sort_kernels = 2 + passes;
    }
    out.kernels = 1 + sort_kernels + kEncodeKernels + kCumsumKernels + kSegmentKernels +
                  (lookups >= kMaxThreads ? 1 : 0) + kUpdateKernels;
    out.latency_seconds = params.index_step_latency.seconds() * index_steps + sort +
                          params.encode_latency.seconds() + params.update_latency.seconds();
  }
  out.seconds = as_double(out.kernels) * params.kernel_floor.seconds() +
                std::max(out.latency_seconds, out.bandwidth_seconds);
  return out;
}

double embedding_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const EmbeddingParams& params) {
  return embedding_op_time(kernel, device, achievable, params).seconds;
}

std::optional<EmbeddingKernelRole> parse_embedding_kernel_role(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, EmbeddingKernelRole>, 9> kRoles{{
      {"forward", EmbeddingKernelRole::kForward},
      {"linearize", EmbeddingKernelRole::kLinearize},
      {"sort_single_tile", EmbeddingKernelRole::kSortSingleTile},
      {"sort_histogram", EmbeddingKernelRole::kSortHistogram},
      {"sort_exclusive_sum", EmbeddingKernelRole::kSortExclusiveSum},
      {"sort_pass", EmbeddingKernelRole::kSortPass},
      {"fill", EmbeddingKernelRole::kFill},
      {"encode", EmbeddingKernelRole::kEncode},
      {"update", EmbeddingKernelRole::kUpdate},
  }};
  for (const auto& [n, role] : kRoles) {
    if (n == name) return role;
  }
  return std::nullopt;
}

EmbeddingParams fit_embedding_latencies(const std::vector<EmbeddingKernelSample>& samples,
                                        const EmbeddingParams& start) {
  using Role = EmbeddingKernelRole;
  const auto mean = [](const std::vector<double>& v, std::string_view what) {
    if (v.empty()) {
      throw std::invalid_argument(fmt::format("embedding fit: no measured kernel for `{}`", what));
    }
    double sum = 0.0;
    for (double x : v)
      sum += x;
    return sum / as_double(static_cast<int64_t>(v.size()));
  };
  const auto rounded = [](double seconds) {
    return Duration::from_ns(std::llround(seconds * 1e9));
  };

  std::vector<double> fills;
  for (const EmbeddingKernelSample& k : samples) {
    if (k.role == Role::kFill) fills.push_back(k.seconds);
  }
  EmbeddingParams p = start;
  p.kernel_floor = rounded(mean(fills, "fill"));
  const double floor = p.kernel_floor.seconds();

  // Per op, in launch order: the sums of its encode and update kernels, its sort kernels.
  struct OpKernels {
    double encode = 0.0;
    double update = 0.0;
    bool has_encode = false;
    bool has_update = false;
    std::vector<double> passes;
    double histogram = -1.0;
    double exclusive_sum = -1.0;
  };
  std::vector<std::string> order;
  std::map<std::string, OpKernels> ops;
  std::vector<double> fwd_x, fwd_y, index_steps, tiles;
  for (const EmbeddingKernelSample& k : samples) {
    if (!(k.bags > 0.0) || !(k.lookups >= 0.0) || !(k.seconds > 0.0)) {
      throw std::invalid_argument(
          fmt::format("embedding fit: op `{}` needs bags > 0, lookups >= 0 and time > 0", k.op));
    }
    if (!ops.contains(k.op)) order.push_back(k.op);
    OpKernels& op = ops[k.op];
    const double pooling = k.lookups / k.bags;
    const double over = k.seconds - floor;
    switch (k.role) {
      case Role::kForward:
        fwd_x.push_back(pooling);
        fwd_y.push_back(over);
        break;
      case Role::kLinearize:
        index_steps.push_back(over / (kWarpSize * std::max(1.0, std::ceil(pooling / kWarpSize))));
        break;
      case Role::kSortSingleTile:
        tiles.push_back(over);
        break;
      case Role::kSortHistogram:
        op.histogram = over;
        break;
      case Role::kSortExclusiveSum:
        op.exclusive_sum = over;
        break;
      case Role::kSortPass:
        op.passes.push_back(over);
        break;
      case Role::kFill:
        break;
      case Role::kEncode:
        op.encode += over;
        op.has_encode = true;
        break;
      case Role::kUpdate:
        op.update += over;
        op.has_update = true;
        break;
    }
  }

  if (fwd_x.size() < 2) throw std::invalid_argument("embedding fit: needs two forward kernels");
  const double mx = mean(fwd_x, "forward");
  const double my = mean(fwd_y, "forward");
  double sxy = 0.0;
  double sxx = 0.0;
  for (size_t i = 0; i < fwd_x.size(); ++i) {
    sxy += (fwd_x[i] - mx) * (fwd_y[i] - my);
    sxx += (fwd_x[i] - mx) * (fwd_x[i] - mx);
  }
  if (!(sxx > 0.0)) throw std::invalid_argument("embedding fit: forward poolings all equal");
  const double slope = sxy / sxx;
  p.forward_row_latency = rounded(slope);
  p.forward_latency = rounded(my - slope * mx);
  p.index_step_latency = rounded(mean(index_steps, "linearize"));
  p.sort_tile_latency = rounded(mean(tiles, "sort_single_tile"));

  std::vector<double> later_passes, encodes, updates;
  for (const std::string& name : order) {
    const OpKernels& op = ops.at(name);
    for (size_t i = 1; i < op.passes.size(); ++i)
      later_passes.push_back(op.passes[i]);
    if (op.has_encode) encodes.push_back(op.encode);
    if (op.has_update) updates.push_back(op.update);
  }
  p.sort_pass_latency = rounded(mean(later_passes, "sort_pass"));
  std::vector<double> upsweeps;
  for (const std::string& name : order) {
    const OpKernels& op = ops.at(name);
    if (op.passes.empty()) continue;
    if (op.histogram < -0.5 || op.exclusive_sum < -0.5) {
      throw std::invalid_argument(
          fmt::format("embedding fit: op `{}` has onesweep passes without histogram and "
                      "exclusive sum kernels",
                      name));
    }
    upsweeps.push_back(op.histogram + op.exclusive_sum + op.passes.front() -
                       p.sort_pass_latency.seconds());
  }
  p.sort_upsweep_latency = rounded(mean(upsweeps, "sort_histogram"));
  p.encode_latency = rounded(mean(encodes, "encode"));
  p.update_latency = rounded(mean(updates, "update"));
  check_embedding_params(p);
  return p;
}

}  // namespace upsim
