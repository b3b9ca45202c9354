#include "topology/collectives/ring_cycles.h"

#include <algorithm>
#include <limits>

namespace upsim::collectives {
namespace {

// Hamiltonian cycles enumerated per node (7! = 5040 covers every cycle of an 8-GPU node) and
// the DFS steps allowed to find them; larger meshes keep the first cycles found.
constexpr size_t kMaxEnumeratedCycles = 5040;
constexpr size_t kMaxSearchSteps = 2'000'000;
// Rings (channels) chosen per node at most; NCCL uses up to 16-32 channels, each a ring.
constexpr size_t kMaxRingChannels = 12;
constexpr size_t kNoCycle = std::numeric_limits<size_t>::max();

}  // namespace

std::vector<std::vector<uint32_t>> choose_ring_cycles(size_t p,
                                                      const std::vector<double>& arc_capacity) {
  // Enumerate directed Hamiltonian cycles over direct arcs, starting at local 0.
  std::vector<std::vector<uint32_t>> found_cycles;
  std::vector<uint32_t> path{0};
  std::vector<bool> used(p, false);
  used[0] = true;
  size_t steps = 0;
  std::vector<uint32_t> next_try{0};  // next candidate successor per depth
  while (!path.empty() && found_cycles.size() < kMaxEnumeratedCycles && steps < kMaxSearchSteps) {
    ++steps;
    const uint32_t last = path.back();
    uint32_t& cand = next_try.back();
    if (path.size() == p) {
      if (arc_capacity[last * p] > 0.0) found_cycles.push_back(path);
      used[last] = false;
      path.pop_back();
      next_try.pop_back();
      continue;
    }
    while (cand < p && (used[cand] || arc_capacity[last * p + cand] <= 0.0))
      ++cand;
    if (cand == p) {
      used[last] = false;
      path.pop_back();
      next_try.pop_back();
      continue;
    }
    const uint32_t to = cand++;
    used[to] = true;
    path.push_back(to);
    next_try.push_back(0);
  }
  if (found_cycles.empty()) return {};
  // Greedy: add the cycle that keeps the busiest arc least loaded (uses / capacity, bytes
  // split evenly over the chosen cycles); keep the best prefix.
  std::vector<double> uses(p * p, 0.0);
  std::vector<size_t> picked;
  std::vector<size_t> best;
  double best_value = std::numeric_limits<double>::infinity();
  std::vector<bool> taken(found_cycles.size(), false);
  for (size_t k = 1; k <= kMaxRingChannels && k <= found_cycles.size(); ++k) {
    size_t best_cycle = kNoCycle;
    double best_max = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < found_cycles.size(); ++c) {
      if (taken[c]) continue;
      const auto& cyc = found_cycles[c];
      for (size_t j = 0; j < p; ++j)
        uses[cyc[j] * p + cyc[(j + 1) % p]] += 1.0;
      double worst = 0.0;
      for (size_t a = 0; a < p * p; ++a) {
        if (uses[a] > 0.0) worst = std::max(worst, uses[a] / arc_capacity[a]);
      }
      for (size_t j = 0; j < p; ++j)
        uses[cyc[j] * p + cyc[(j + 1) % p]] -= 1.0;
      if (worst < best_max) {
        best_max = worst;
        best_cycle = c;
      }
    }
    if (best_cycle == kNoCycle) break;
    taken[best_cycle] = true;
    picked.push_back(best_cycle);
    const auto& cyc = found_cycles[best_cycle];
    for (size_t j = 0; j < p; ++j)
      uses[cyc[j] * p + cyc[(j + 1) % p]] += 1.0;
    const double value = best_max / static_cast<double>(k);
    if (value < best_value * (1.0 - 1e-12)) {
      best_value = value;
      best = picked;
    }
  }
  std::vector<std::vector<uint32_t>> chosen;
  for (size_t c : best)
    chosen.push_back(found_cycles[c]);
  return chosen;
}

}  // namespace upsim::collectives
