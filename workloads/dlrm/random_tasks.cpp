#include "workloads/dlrm/random_tasks.h"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

namespace upsim {

std::vector<uint32_t> draw_random_task(std::span<const EmbeddingTable> pool, int64_t dim,
                                       const RandomTaskSpec& spec, uint32_t gpus,
                                       int64_t gpu_memory_bytes) {
  if (gpus == 0 || dim <= 0 || spec.tables_per_gpu <= 0) {
    throw std::invalid_argument("a random task needs GPUs, a dim and tables per GPU");
  }
  std::vector<uint32_t> candidates;
  for (uint32_t t = 0; t < pool.size(); ++t) {
    if (!spec.heavy || pool[t].pooling >= spec.heavy_pooling) candidates.push_back(t);
  }
  const double per_run = static_cast<double>(spec.tables_per_gpu) * static_cast<double>(gpus);
  const auto lo = static_cast<uint64_t>(per_run * 0.7);
  const auto hi = static_cast<uint64_t>(per_run * 1.3);
  if (lo == 0 || hi <= lo) {
    throw std::invalid_argument(
        fmt::format("{} tables per GPU on {} GPUs give no table count in [{}, {})",
                    spec.tables_per_gpu, gpus, lo, hi));
  }
  if (candidates.size() < hi - 1) {
    throw std::invalid_argument(fmt::format(
        "a task draws up to {} tables, but the pool has {}{}", hi - 1, candidates.size(),
        spec.heavy ? fmt::format(" with mean pooling >= {}", spec.heavy_pooling) : ""));
  }
  const double budget =
      spec.memory_fraction * static_cast<double>(gpus) * static_cast<double>(gpu_memory_bytes);
  std::mt19937_64 rng(spec.seed);
  uint32_t accepted = 0;
  std::vector<uint32_t> order;
  for (int draw = 0; draw < kMaxRandomTaskDraws; ++draw) {
    const uint64_t count = lo + uniform_below(rng, hi - lo);
    // The first `count` entries of a partial Fisher-Yates shuffle of the candidates.
    order = candidates;
    double bytes = 0.0;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t j = i + uniform_below(rng, order.size() - i);
      std::swap(order[i], order[j]);
      bytes += static_cast<double>(pool[order[i]].rows) * static_cast<double>(dim) * 4.0;
    }
    if (bytes > budget) continue;
    if (accepted++ == spec.task) {
      order.resize(count);
      return order;
    }
  }
  throw std::invalid_argument(fmt::format(
      "{} draws gave {} of the {} tasks asked for; the pool's tables rarely fit {} x {} GPUs' "
      "memory ({:.3f} GB)",
      kMaxRandomTaskDraws, accepted, spec.task + 1, spec.memory_fraction, gpus, budget * 1e-9));
}

}  // namespace upsim
