// parallel_for: independent jobs on a few threads (sweeps, sharder rankings, held-out folds).
//
// Contract:
//  - body(i) runs once for every i in [0, count), on `workers` threads at most (the calling
//    thread is one of them; 1 runs everything on the calling thread, 0 means one thread per
//    hardware thread). Indices are handed out in increasing order, so the first ones start
//    first.
//  - An exception thrown by body(i) does not stop the other indices; once every thread has
//    stopped, the exception of the smallest such i is rethrown to the caller.
//  - The result is the same for any number of workers when body(i) writes only state of its
//    own index (and reads nothing another index writes): that is the caller's part.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace upsim {

template <class Body>
void parallel_for(size_t count, size_t workers, Body&& body) {
  if (workers == 0) workers = std::max<size_t>(1, std::thread::hardware_concurrency());
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(workers, count); ++t)
    threads.emplace_back(work);
  work();
  for (std::thread& t : threads)
    t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace upsim
