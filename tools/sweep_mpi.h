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

}  // namespace upsim::cli::mpi
