#include "tools/memory_shared_jobs.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/parallel.h"
#include "tools/scenario.h"

namespace upsim::cli {

size_t memory_shares(size_t count, size_t workers) {
  if (workers == 0) workers = std::max<size_t>(1, std::thread::hardware_concurrency());
  return std::max<size_t>(1, std::min(workers, count));
}

void run_sharing_memory(size_t count, size_t workers,
                        const std::function<void(size_t index, size_t shares)>& job) {
  const size_t shares = memory_shares(count, workers);
  std::vector<size_t> deferred;
  std::mutex deferred_mutex;
  parallel_for(count, workers, [&](size_t i) {
    try {
      job(i, shares);
    } catch (const SharedMemoryLimitError&) {
      if (shares == 1) throw;  // alone already: nothing to run again
      const std::lock_guard lock(deferred_mutex);
      deferred.push_back(i);
    }
  });
  std::sort(deferred.begin(), deferred.end());
  for (const size_t i : deferred)
    job(i, 1);
}

std::string result_or_run_alone(size_t shares, const std::function<std::string(size_t)>& job) {
  try {
    return job(shares);
  } catch (const SharedMemoryLimitError&) {
    if (shares <= 1) throw;
    return std::string(kRunAloneResult);
  }
}

void run_round_then_alone(const std::function<void(const JobDone&)>& round,
                          const std::function<std::string(size_t index)>& run_alone,
                          const JobDone& done) {
  std::vector<size_t> alone;
  round([&](size_t index, const std::string& result) {
    if (result == kRunAloneResult) {
      alone.push_back(index);
    } else {
      done(index, result);
    }
  });
  std::sort(alone.begin(), alone.end());
  for (const size_t index : alone)
    done(index, run_alone(index));
}

}  // namespace upsim::cli
