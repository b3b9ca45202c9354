#include "tools/sweep_mpi.h"

#include <mpi.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

namespace upsim::cli::mpi {

namespace {

// Worker -> rank 0: a finished row ("<index>\n<row>"), an error ("!<message>") or, empty, a
// first request; each is answered with kTagWork.
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

void send_index(int64_t index, int to) {
  MPI_Send(&index, 1, MPI_INT64_T, to, kTagWork, MPI_COMM_WORLD);
}

/// A rank other than 0: asks for points, runs them, returns after "no more". An error of `run`
/// goes to rank 0 (which stops handing points out) and is rethrown here after "no more".
void serve_rank_0(const std::function<std::string(size_t)>& run) {
  send_string("", 0, kTagResult);
  std::exception_ptr error;
  for (;;) {
    int64_t index = -1;
    MPI_Recv(&index, 1, MPI_INT64_T, 0, kTagWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (index < 0) break;
    std::string message;
    try {
      message = std::to_string(index) + "\n" + run(static_cast<size_t>(index));
    } catch (const std::exception& e) {
      error = std::current_exception();
      message = std::string("!") + e.what();
    }
    send_string(message, 0, kTagResult);
  }
  if (error) std::rethrow_exception(error);
}

/// Rank 0's queue of points, shared with its local worker thread.
class Queue {
 public:
  explicit Queue(const std::vector<size_t>& todo) : queue_(todo.begin(), todo.end()) {}
  std::optional<size_t> take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return std::nullopt;
    const size_t i = queue_.front();
    queue_.pop_front();
    return i;
  }
  /// No more points for anyone.
  void close() {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.clear();
  }

 private:
  std::mutex mutex_;
  std::deque<size_t> queue_;
};

/// Rank 0's own worker: runs points from the queue on a thread of its own; its rows (and an
/// error) are collected by the main thread, which alone calls MPI and `done`.
class LocalWorker {
 public:
  LocalWorker(Queue& queue, const std::function<std::string(size_t)>& run) {
    try {
      running_ = true;
      thread_ = std::thread([this, &queue, &run] { work(queue, run); });
    } catch (const std::system_error&) {
      running_ = false;  // no thread: rank 0 serves the other ranks alone
    } catch (const std::bad_alloc&) {
      running_ = false;
    }
  }
  ~LocalWorker() {
    if (thread_.joinable()) thread_.join();
  }
  LocalWorker(const LocalWorker&) = delete;
  LocalWorker& operator=(const LocalWorker&) = delete;

  /// The rows finished since the last call, and the worker's error if it stopped on one.
  std::deque<std::pair<size_t, std::string>> take_rows(std::exception_ptr& error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    error = error_;
    error_ = nullptr;
    return std::exchange(rows_, {});
  }
  /// Whether the worker stopped and every row it finished was taken.
  bool finished() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return !running_ && rows_.empty();
  }

 private:
  void work(Queue& queue, const std::function<std::string(size_t)>& run) {
    try {
      for (std::optional<size_t> i = queue.take(); i; i = queue.take()) {
        std::string row = run(*i);
        const std::lock_guard<std::mutex> lock(mutex_);
        rows_.emplace_back(*i, std::move(row));
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }

  std::mutex mutex_;
  std::deque<std::pair<size_t, std::string>> rows_;
  std::exception_ptr error_;
  bool running_ = false;
  std::thread thread_;
};

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

StopWorkersOnError::~StopWorkersOnError() {
  if (session_ == nullptr || session_->rank() != 0) return;
  for (int k = 1; k < session_->size(); ++k) {
    MPI_Status status;
    MPI_Probe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &status);
    (void)receive_string(status);
    send_index(-1, status.MPI_SOURCE);
  }
}

void distribute_points(const Session& session, const std::vector<size_t>& todo,
                       const std::function<std::string(size_t)>& run,
                       const std::function<void(size_t, const std::string&)>& done) {
  if (session.rank() != 0) {
    serve_rank_0(run);
    return;
  }
  Queue queue(todo);
  // The first error: from then on no point is handed out and no row is kept.
  std::exception_ptr failure;
  const auto fail = [&](std::exception_ptr e) {
    if (!failure) failure = std::move(e);
    queue.close();
  };
  const auto keep = [&](size_t index, const std::string& row) {
    if (failure) return;
    try {
      done(index, row);
    } catch (...) {
      fail(std::current_exception());
    }
  };
  LocalWorker local(queue, run);
  int stopped = 0;
  const int workers = session.size() - 1;
  while (stopped < workers || !local.finished()) {
    bool idle = true;
    std::exception_ptr local_error;
    for (const auto& [index, row] : local.take_rows(local_error)) {
      keep(index, row);
      idle = false;
    }
    if (local_error) fail(local_error);
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &flag, &status);
    if (flag != 0) {
      idle = false;
      const std::string message = receive_string(status);
      if (message.starts_with('!')) {
        fail(std::make_exception_ptr(std::runtime_error(
            "rank " + std::to_string(status.MPI_SOURCE) + ": " + message.substr(1))));
      } else if (!message.empty()) {
        const size_t nl = message.find('\n');
        const char* digits_end = message.data() + (nl == std::string::npos ? 0 : nl);
        size_t index = 0;
        const auto [end, ec] = std::from_chars(message.data(), digits_end, index);
        if (nl == std::string::npos || ec != std::errc() || end != digits_end) {
          fail(std::make_exception_ptr(std::runtime_error(
              "rank " + std::to_string(status.MPI_SOURCE) + " sent a malformed result")));
        } else {
          keep(index, message.substr(nl + 1));
        }
      }
      const std::optional<size_t> next = queue.take();
      send_index(next ? static_cast<int64_t>(*next) : -1, status.MPI_SOURCE);
      if (!next) ++stopped;
    }
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace upsim::cli::mpi
