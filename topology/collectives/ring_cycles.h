// The rings NCCL-like channels follow inside one node whose GPUs have direct links: directed
// Hamiltonian cycles over the direct arcs, as many as spread load best. Part of the collective
// layout (collective_layout.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace upsim::collectives {

/// The ring cycles of a node's `p` members, as permutations of their local indices 0..p-1
/// (each starting at 0). `arc_capacity[a * p + b]` is the bytes/s of the direct links from
/// local member a to b (0: none). Cycles are enumerated by depth-first search from local 0
/// (at most 5040 cycles, 2 M search steps), then chosen greedily: each next cycle keeps the
/// busiest arc least loaded (uses / capacity, bytes split evenly over the chosen cycles), at
/// most 12, and the best prefix is kept. Empty when no Hamiltonian cycle exists.
std::vector<std::vector<uint32_t>> choose_ring_cycles(size_t p,
                                                      const std::vector<double>& arc_capacity);

}  // namespace upsim::collectives
