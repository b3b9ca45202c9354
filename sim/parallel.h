// parallel_for: independent jobs on a few threads (sweeps, sharder rankings, held-out folds).
//
// Contract:
//  - body(i) runs once for every i in [0, count), on `workers` threads at most (the calling
//    thread is one of them; 1 runs everything on the calling thread, 0 means one thread per
//    hardware thread). Indices are handed out in increasing order, so the first ones start
//    first.
//  - An exception thrown by body(i) does not stop the other indices; once every thread has
//    stopped, the exception of the smallest such i is rethrown to the caller.
//  - A thread the system refuses to start (std::thread throws: the process or user limit of
//    threads, memory for its stack) is not a crash: the indices run on the threads that did
//    start, with the calling thread. Only when more than one worker is wanted and not one thread
//    starts is it an error, std::runtime_error "cannot start a thread: <the system's reason>",
//    thrown before any index runs.
//  - The result is the same for any number of workers when body(i) writes only state of its
//    own index (and reads nothing another index writes): that is the caller's part.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace upsim {

/// How parallel_for starts a thread: std::thread. Tests pass a starter that fails.
struct StartStdThread {
  template <class F>
  std::thread operator()(F&& f) const {
    return std::thread(std::forward<F>(f));
  }
};

template <class Body, class StartThread = StartStdThread>
void parallel_for(size_t count, size_t workers, Body&& body, StartThread&& start_thread = {}) {
  if (workers == 0) workers = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t wanted = std::min(workers, count);
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
  threads.reserve(wanted > 0 ? wanted - 1 : 0);
  std::string refused;  // why the system refused a thread; empty: it never did
  for (size_t t = 1; t < wanted; ++t) {
    try {
      threads.push_back(start_thread(work));
    } catch (const std::system_error& e) {
      refused = e.code().message();
    } catch (const std::bad_alloc&) {
      refused = "out of memory";
    }
    if (!refused.empty()) break;  // the next one would be refused too
  }
  if (wanted > 1 && threads.empty()) {
    throw std::runtime_error("cannot start a thread: " + refused);
  }
  work();
  for (std::thread& t : threads)
    t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace upsim
