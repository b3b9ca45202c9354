// Jobs handed out over MPI processes (built only when CMake finds MPI; Open MPI from Debian):
// `mpirun -np N upsim sweep STUDY.yaml` (a study's points) and `mpirun -np N upsim plan
// SCENARIO` (the layouts of each batch of the search).
//
// Contract:
//  - launched_by_mpi(): whether this process runs under mpirun with more than one process
//    (OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_SIZE > 1); only then is MPI initialised, so a
//    plain `upsim sweep` needs no MPI runtime.
//  - A job is a string; what it means is the caller's (a point index, a layout's overrides).
//    Every rank runs the same command, so `run` is the same function everywhere: the result a
//    job gives does not depend on the rank that ran it.
//  - Rank 0 keeps a JobServer for as long as the other ranks may be needed; they call
//    serve_jobs() and return from it when the server is destroyed.
//  - JobServer::run_round() runs one list of jobs: rank 0 hands them out one at a time (dynamic:
//    a rank asks for the next when it finishes one) to every rank, itself included through a
//    local worker thread (MPI_THREAD_FUNNELED: only rank 0's main thread calls MPI). Each
//    result returns to rank 0, whose main thread calls `done(index, result)` in the order they
//    finish. It returns when every job handed out has returned; rounds may follow (a search
//    decides its next jobs from the last round's results).
//  - Errors end the round, never a rank: when `done` throws, `run` throws on any rank, or rank
//    0 cannot start its local worker thread (it then serves the other ranks alone), no further
//    job is handed out; run_round waits for the jobs that are running, then throws the first
//    error (a rank's error named "rank N: ..."). A rank whose `run` threw keeps serving and
//    rethrows its error when told to stop. No rank hangs or aborts.
//  - ~JobServer tells every other rank to stop, once it has finished the job it runs: whether
//    rank 0 left by an error before its first round (a refused folder) or after its last.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace upsim::cli::mpi {

bool launched_by_mpi();

/// MPI_Init_thread on construction, MPI_Finalize on destruction.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The processes of this run on this rank's node (MPI_COMM_TYPE_SHARED): the jobs that share
  /// its memory at once (tools/memory_shared_jobs.h).
  int local_size() const { return local_size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
};

using RunJob = std::function<std::string(const std::string& job)>;

/// Rank 0's side; see the file comment.
class JobServer {
 public:
  /// `session` must be rank 0's and outlive the server.
  explicit JobServer(const Session& session);
  ~JobServer();
  JobServer(const JobServer&) = delete;
  JobServer& operator=(const JobServer&) = delete;

  /// Runs `jobs` over every rank; `run` must be callable from another thread on rank 0.
  void run_round(const std::vector<std::string>& jobs, const RunJob& run,
                 const std::function<void(size_t index, const std::string& result)>& done);

 private:
  enum class Worker { kStarting, kWaiting, kBusy, kStopped };
  const Session& session_;
  std::vector<Worker> workers_;  ///< by rank; rank 0's entry unused
};

/// A rank other than 0: runs the jobs rank 0 hands it until told to stop, then rethrows the
/// first error its `run` threw.
void serve_jobs(const RunJob& run);

}  // namespace upsim::cli::mpi
