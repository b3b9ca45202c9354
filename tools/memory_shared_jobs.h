// Parallel runs of scenarios that share this process's memory.
//
// Contract (run_sharing_memory):
//  - job(i, shares) runs for every i in [0, count) on up to `workers` threads (sim/parallel.h's
//    parallel_for; 0 = one per hardware thread). `shares` is the number of runs at once, the
//    least of the workers and `count`: the job builds its scenario with ScenarioLimits::
//    memory_shares = shares, so that the runs together stay within the memory one run may use
//    (tools/scenario.h, machine_task_limit).
//  - A job that throws SharedMemoryLimitError did not fit its share: once every other job is
//    done it runs again alone (shares = 1), the deferred ones one at a time in index order. What
//    it throws then propagates. So which jobs fit depends on their own size and `workers` only,
//    never on which others happened to run beside them, and a job's result is that of a run
//    alone.
//  - Any other exception propagates as parallel_for's do (the smallest index's, after every job
//    has stopped).
#pragma once

#include <cstddef>
#include <functional>

namespace upsim::cli {

/// The runs at once of `count` jobs on `workers` threads (0 = one per hardware thread): the
/// least of the two, at least 1.
size_t memory_shares(size_t count, size_t workers);

void run_sharing_memory(size_t count, size_t workers,
                        const std::function<void(size_t index, size_t shares)>& job);

}  // namespace upsim::cli
