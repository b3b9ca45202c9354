// Distribution of `upsim sweep`'s points over MPI processes (built only when CMake finds MPI;
// OpenMPI from Debian): `mpirun -np N upsim sweep STUDY.yaml`.
//
// Contract:
//  - launched_by_mpi(): whether this process runs under mpirun with more than one process
//    (OMPI_COMM_WORLD_SIZE / PMI_SIZE > 1); only then is MPI initialised, so a plain
//    `upsim sweep` needs no MPI runtime.
//  - distribute_points(): rank 0 hands point indices out one at a time (dynamic: a process
//    asks for the next when it finishes one) to every rank, itself included through a local
//    worker thread (MPI_THREAD_FUNNELED: only rank 0's main thread calls MPI); each finished row
//    returns to rank 0, which calls `done(index, row)` for every point in the order they
//    finish. Ranks other than 0 return after the last point; rank 0 after every row arrived.
//    The rows are what run(index) returns wherever it ran, so the table rank 0 assembles is the
//    single-process one.
//  - Errors end the sweep, never a rank: when `done` throws on rank 0 (its row cannot be
//    written), `run` throws on any rank, or rank 0 cannot start its local worker thread (it then
//    serves the other ranks alone), no further point is handed out; every rank is told to stop
//    once it finishes the point it runs, rank 0 waits for them and its own worker, and then
//    throws the first error (a rank's error named "rank N: ..."). No rank hangs or aborts.
//  - Before rank 0 calls distribute_points, the other ranks wait for their first point: a
//    StopWorkersOnError alive over that stretch tells them to stop when it is left by an error
//    (a refused folder), so that they return and every rank finishes MPI.
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

 private:
  int rank_ = 0;
  int size_ = 1;
};

/// Runs `todo` (point indices) over the session's ranks; see the file comment. `run` must be
/// callable from another thread on rank 0.
void distribute_points(const Session& session, const std::vector<size_t>& todo,
                       const std::function<std::string(size_t)>& run,
                       const std::function<void(size_t, const std::string&)>& done);

/// On rank 0: destroyed before release() (an exception left the scope), answers every other
/// rank's first request with "no more points". `session` null: nothing to do.
class StopWorkersOnError {
 public:
  explicit StopWorkersOnError(const Session* session) : session_(session) {}
  ~StopWorkersOnError();
  StopWorkersOnError(const StopWorkersOnError&) = delete;
  StopWorkersOnError& operator=(const StopWorkersOnError&) = delete;
  /// distribute_points is called next and tells the workers itself.
  void release() { session_ = nullptr; }

 private:
  const Session* session_;
};

}  // namespace upsim::cli::mpi
