#include "tools/sweep_mpi.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

namespace upsim::cli::mpi {

namespace {

// Worker -> rank 0: a finished row ("<index>\n<row>") or, empty, a first request.
constexpr int kTagResult = 1;
// Rank 0 -> worker: the next point index (int64), or -1: no more.
constexpr int kTagWork = 2;

void send_string(const std::string& s, int to, int tag) {
  MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string receive_string(const MPI_Status& probed) {
  int count = 0;
  MPI_Get_count(&probed, MPI_CHAR, &count);
  std::string s(static_cast<size_t>(count), '\0');
  MPI_Recv(s.data(), count, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return s;
}

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::atoi(v) > 1) return true;
  }
  return false;
}

Session::Session() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw std::runtime_error("the MPI library does not support MPI_THREAD_FUNNELED");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() {
  MPI_Finalize();
}

void distribute_points(const Session& session, const std::vector<size_t>& todo,
                       const std::function<std::string(size_t)>& run,
                       const std::function<void(size_t, const std::string&)>& done) {
  if (session.rank() != 0) {
    send_string("", 0, kTagResult);
    for (;;) {
      int64_t index = -1;
      MPI_Recv(&index, 1, MPI_INT64_T, 0, kTagWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (index < 0) return;
      const std::string row = run(static_cast<size_t>(index));
      send_string(std::to_string(index) + "\n" + row, 0, kTagResult);
    }
  }
  // Rank 0: the queue of points, served to the other ranks and to a local worker thread.
  std::mutex mutex;
  std::deque<size_t> queue(todo.begin(), todo.end());
  std::deque<std::pair<size_t, std::string>> local_done;
  const auto take = [&]() -> std::optional<size_t> {
    const std::lock_guard<std::mutex> lock(mutex);
    if (queue.empty()) return std::nullopt;
    const size_t i = queue.front();
    queue.pop_front();
    return i;
  };
  std::thread local([&] {
    for (std::optional<size_t> i = take(); i; i = take()) {
      std::string row = run(*i);
      const std::lock_guard<std::mutex> lock(mutex);
      local_done.emplace_back(*i, std::move(row));
    }
  });
  size_t received = 0;
  int stopped = 0;
  const int workers = session.size() - 1;
  while (received < todo.size() || stopped < workers) {
    bool idle = true;
    {
      std::deque<std::pair<size_t, std::string>> finished;
      {
        const std::lock_guard<std::mutex> lock(mutex);
        finished.swap(local_done);
      }
      for (const auto& [index, row] : finished) {
        done(index, row);
        ++received;
        idle = false;
      }
    }
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &flag, &status);
    if (flag != 0) {
      idle = false;
      const std::string message = receive_string(status);
      if (!message.empty()) {
        const size_t nl = message.find('\n');
        done(static_cast<size_t>(std::stoull(message.substr(0, nl))), message.substr(nl + 1));
        ++received;
      }
      const std::optional<size_t> next = take();
      const int64_t index = next ? static_cast<int64_t>(*next) : -1;
      MPI_Send(&index, 1, MPI_INT64_T, status.MPI_SOURCE, kTagWork, MPI_COMM_WORLD);
      if (!next) ++stopped;
    }
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  local.join();
}

}  // namespace upsim::cli::mpi
