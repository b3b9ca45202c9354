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
//
// Jobs handed out over processes that share a node's memory (mpirun, tools/mpi_jobs.h): each
// process runs its job with the node's process count as `shares` (result_or_run_alone), and a
// job past its share answers kRunAloneResult instead of a result; run_round_then_alone runs such
// jobs again after the round, on the calling process alone (the others then wait for work), in
// index order.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace upsim::cli {

/// The runs at once of `count` jobs on `workers` threads (0 = one per hardware thread): the
/// least of the two, at least 1.
size_t memory_shares(size_t count, size_t workers);

void run_sharing_memory(size_t count, size_t workers,
                        const std::function<void(size_t index, size_t shares)>& job);

/// What a job handed to another process answers when it did not fit its share of the node's
/// memory (no job's own result: it holds a control character no result has).
inline constexpr std::string_view kRunAloneResult =
    "\x1f"
    "run alone";

/// job(shares)'s result, or kRunAloneResult when it throws SharedMemoryLimitError.
std::string result_or_run_alone(size_t shares, const std::function<std::string(size_t)>& job);

/// Result of job `index` as the round delivers it.
using JobDone = std::function<void(size_t index, const std::string& result)>;

/// Runs `round` (a job server's round, delivering each job's result), passing the results on to
/// `done`; the jobs that answered kRunAloneResult then run again here, alone
/// (`run_alone(index)`), in index order, and their results go to `done` too.
void run_round_then_alone(const std::function<void(const JobDone&)>& round,
                          const std::function<std::string(size_t index)>& run_alone,
                          const JobDone& done);

}  // namespace upsim::cli
