#include "workloads/dlrm/hybrid_embedding.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "workloads/dlrm/table_statistics.h"

namespace upsim {

double hybrid_count_threshold(int64_t global_batch, uint32_t gpus) {
  const double batch = static_cast<double>(global_batch);
  const double per_gpu = batch / static_cast<double>(std::max<uint32_t>(gpus, 1));
  if (per_gpu <= 1.0) return std::numeric_limits<double>::infinity();
  return batch * std::sqrt(2.0 * kHugeCtrMaxDuplication / (per_gpu * (per_gpu - 1.0)));
}

std::optional<HybridSplit> hybrid_split(const EmbeddingTable& table, int64_t global_batch,
                                        uint32_t gpus) {
  if (!table.reuse_histogram.empty()) return std::nullopt;
  HybridSplit out;
  const double threshold = hybrid_count_threshold(global_batch, gpus);
  const double lookups = static_cast<double>(global_batch) * table.pooling;
  const auto rows = static_cast<double>(table.rows);
  if (lookups <= 0.0 || !std::isfinite(threshold)) return out;
  double frequent = 0.0;
  if (table.zipf_alpha <= 0.0) {
    // Uniform: every row expects lookups / rows accesses; all are frequent or none.
    frequent = lookups / rows >= threshold ? rows : 0.0;
  } else {
    // lookups x k^-alpha / H >= threshold  <=>  k <= (lookups / (threshold H))^(1 / alpha).
    const double mass = zipf_mass(1.0, rows, table.zipf_alpha);
    frequent = std::floor(std::pow(lookups / (threshold * mass), 1.0 / table.zipf_alpha));
    frequent = std::clamp(frequent, 0.0, rows);
  }
  if (frequent > 0.0) {
    const double networks = static_cast<double>(std::max<uint32_t>(gpus, 1));
    frequent = std::min(rows, std::ceil(frequent / networks) * networks);
  }
  out.frequent_rows = static_cast<int64_t>(frequent);
  if (out.frequent_rows == 0) return out;
  out.frequent_share = table.zipf_alpha <= 0.0 ? frequent / rows
                                               : zipf_mass(1.0, frequent, table.zipf_alpha) /
                                                     zipf_mass(1.0, rows, table.zipf_alpha);
  out.frequent_share = std::clamp(out.frequent_share, 0.0, 1.0);
  return out;
}

double infrequent_sample_share(const EmbeddingTable& table) {
  if (table.frequent_rows >= table.rows) return 0.0;
  return 1.0 - std::pow(std::clamp(table.frequent_share, 0.0, 1.0), std::max(table.pooling, 1.0));
}

}  // namespace upsim
