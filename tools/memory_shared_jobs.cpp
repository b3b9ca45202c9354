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

}  // namespace upsim::cli
