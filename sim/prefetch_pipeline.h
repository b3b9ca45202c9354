// Prefetching for loops over the flows and links of a large fabric (the flow network's, and
// observers of its links), whose state is far larger than the cache and read in random order:
// each flow or link visited costs a memory miss, and a loop that visits them one by one waits
// for each miss in turn. Loading a few chunks ahead lets the misses of many items overlap.
// Hints only: nothing here changes what the loops compute.
#pragma once

#include <algorithm>
#include <cstddef>

namespace upsim::prefetch {

/// Starts loading the cache line at `address` for writing; never faults, changes nothing. The
/// empty volatile asm keeps GCC from deleting a loop or a call that only prefetches (it takes
/// __builtin_prefetch to have no side effects, and drops calls to functions that only do it).
inline void line(const void* address) {
  __builtin_prefetch(address, 1);
  asm volatile("");
}

/// Items per chunk: far enough ahead to hide a miss, few enough that what the chunks ahead
/// load stays in the core's cache until it is used.
inline constexpr size_t kChunk = 16;

/// f(i) for the items of chunk `chunk` of [0, n) (none past the end).
template <class F>
void each_in_chunk(size_t n, size_t chunk, F& f) {
  const size_t begin = chunk * kChunk;
  const size_t end = std::min(n, begin + kChunk);
  for (size_t i = begin; i < end; ++i)
    f(i);
}

/// Runs work(i) for i in [0, n), in order. Before the items of chunk c run, `near(i)` is
/// called for the items of chunk c + 1, `far(i)` for those of chunk c + 2 and `farthest(i)`
/// for those of chunk c + 3: each loads what the next reads (e.g. a flow, whose route names its
/// links, whose flow lists the work edits).
template <class Farthest, class Far, class Near, class Work>
void three_stage(size_t n, Farthest farthest, Far far, Near near, Work work) {
  const auto each = [n](size_t chunk, auto& f) { each_in_chunk(n, chunk, f); };
  const size_t chunks = (n + kChunk - 1) / kChunk;
  each(0, farthest);
  each(1, farthest);
  each(2, farthest);
  each(0, far);
  each(1, far);
  each(0, near);
  for (size_t c = 0; c < chunks; ++c) {
    each(c + 3, farthest);
    each(c + 2, far);
    each(c + 1, near);
    each(c, work);
  }
}

/// three_stage without its farthest stage: `far` two chunks ahead, `near` one.
template <class Far, class Near, class Work>
void two_stage(size_t n, Far far, Near near, Work work) {
  three_stage(
      n, [](size_t) {}, far, near, work);
}

}  // namespace upsim::prefetch
