#include "tools/mpi_jobs.h"

#include <fmt/format.h>
#include <mpi.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

namespace upsim::cli::mpi {

namespace {

// Worker -> rank 0: empty (the first request), "<index>\n<result>" or "!<index>\n<error>";
// each is answered with kTagWork.
constexpr int kTagResult = 1;
// Rank 0 -> worker: "J<index>\n<job>", or "S": stop.
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

/// "<index>\n<rest>" split; false when malformed.
bool split_indexed(std::string_view message, size_t& index, std::string_view& rest) {
  const size_t nl = message.find('\n');
  if (nl == std::string_view::npos) return false;
  const auto [end, ec] = std::from_chars(message.data(), message.data() + nl, index);
  if (ec != std::errc() || end != message.data() + nl) return false;
  rest = message.substr(nl + 1);
  return true;
}

/// Rank 0's queue of job indices for one round, shared with its local worker thread.
class Queue {
 public:
  explicit Queue(size_t count) {
    for (size_t i = 0; i < count; ++i)
      queue_.push_back(i);
  }
  std::optional<size_t> take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return std::nullopt;
    const size_t i = queue_.front();
    queue_.pop_front();
    return i;
  }
  /// No more jobs for anyone.
  void close() {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.clear();
  }

 private:
  std::mutex mutex_;
  std::deque<size_t> queue_;
};

/// Rank 0's own worker for one round: runs jobs from the queue on a thread of its own; its
/// results (and an error) are collected by the main thread, which alone calls MPI and `done`.
class LocalWorker {
 public:
  LocalWorker(Queue& queue, const std::vector<std::string>& jobs, const RunJob& run) {
    try {
      running_ = true;
      thread_ = std::thread([this, &queue, &jobs, &run] { work(queue, jobs, run); });
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

  /// The results finished since the last call, and the worker's error if it stopped on one.
  std::deque<std::pair<size_t, std::string>> take_results(std::exception_ptr& error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    error = error_;
    error_ = nullptr;
    return std::exchange(results_, {});
  }
  /// Whether the worker stopped and every result it finished was taken.
  bool finished() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return !running_ && results_.empty();
  }

 private:
  void work(Queue& queue, const std::vector<std::string>& jobs, const RunJob& run) {
    try {
      for (std::optional<size_t> i = queue.take(); i; i = queue.take()) {
        std::string result = run(jobs[*i]);
        const std::lock_guard<std::mutex> lock(mutex_);
        results_.emplace_back(*i, std::move(result));
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }

  std::mutex mutex_;
  std::deque<std::pair<size_t, std::string>> results_;
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
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  if (node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
  }
}

Session::~Session() {
  MPI_Finalize();
}

JobServer::JobServer(const Session& session)
    : session_(session), workers_(static_cast<size_t>(session.size()), Worker::kStarting) {
  if (session.rank() != 0) throw std::logic_error("JobServer: only on rank 0");
  workers_[0] = Worker::kStopped;
}

JobServer::~JobServer() {
  for (int r = 1; r < session_.size(); ++r) {
    Worker& w = workers_[static_cast<size_t>(r)];
    // A rank that has not asked yet, or runs a job: its message first (the result is dropped).
    while (w == Worker::kStarting || w == Worker::kBusy) {
      MPI_Status status;
      MPI_Probe(r, kTagResult, MPI_COMM_WORLD, &status);
      (void)receive_string(status);
      w = Worker::kWaiting;
    }
    if (w == Worker::kWaiting) send_string("S", r, kTagWork);
    w = Worker::kStopped;
  }
}

void JobServer::run_round(const std::vector<std::string>& jobs, const RunJob& run,
                          const std::function<void(size_t, const std::string&)>& done) {
  Queue queue(jobs.size());
  // The first error: from then on no job is handed out and no result is kept.
  std::exception_ptr failure;
  const auto fail = [&](std::exception_ptr e) {
    if (!failure) failure = std::move(e);
    queue.close();
  };
  const auto keep = [&](size_t index, const std::string& result) {
    if (failure) return;
    try {
      done(index, result);
    } catch (...) {
      fail(std::current_exception());
    }
  };
  const auto rank_error = [](int rank, std::string_view what) {
    return std::make_exception_ptr(std::runtime_error(fmt::format("rank {}: {}", rank, what)));
  };
  // Hands rank r the next job, if there is one; it stays waiting otherwise.
  const auto hand_out = [&](int r) {
    const std::optional<size_t> next = queue.take();
    if (!next) return;
    send_string(fmt::format("J{}\n{}", *next, jobs[*next]), r, kTagWork);
    workers_[static_cast<size_t>(r)] = Worker::kBusy;
  };
  for (int r = 1; r < session_.size(); ++r) {
    if (workers_[static_cast<size_t>(r)] == Worker::kWaiting) hand_out(r);
  }
  LocalWorker local(queue, jobs, run);
  const auto busy = [&] {
    for (const Worker w : workers_) {
      if (w == Worker::kBusy) return true;
    }
    return false;
  };
  while (busy() || !local.finished()) {
    bool idle = true;
    std::exception_ptr local_error;
    for (const auto& [index, result] : local.take_results(local_error)) {
      keep(index, result);
      idle = false;
    }
    if (local_error) fail(local_error);
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &flag, &status);
    if (flag != 0) {
      idle = false;
      const int r = status.MPI_SOURCE;
      const std::string message = receive_string(status);
      workers_[static_cast<size_t>(r)] = Worker::kWaiting;
      size_t index = 0;
      std::string_view rest;
      const bool error = message.starts_with('!');
      if (message.empty()) {
        // A first request.
      } else if (!split_indexed(std::string_view(message).substr(error ? 1 : 0), index, rest) ||
                 index >= jobs.size()) {
        fail(rank_error(r, "sent a malformed result"));
      } else if (error) {
        fail(rank_error(r, rest));
      } else {
        keep(index, std::string(rest));
      }
      hand_out(r);
    }
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (failure) std::rethrow_exception(failure);
}

void serve_jobs(const RunJob& run) {
  send_string("", 0, kTagResult);
  std::exception_ptr error;
  for (;;) {
    MPI_Status status;
    MPI_Probe(0, kTagWork, MPI_COMM_WORLD, &status);
    const std::string message = receive_string(status);
    size_t index = 0;
    std::string_view job;
    if (!message.starts_with('J') ||
        !split_indexed(std::string_view(message).substr(1), index, job)) {
      break;  // "S", or anything else: stop
    }
    std::string reply;
    try {
      reply = fmt::format("{}\n{}", index, run(std::string(job)));
    } catch (const std::exception& e) {
      if (!error) error = std::current_exception();
      reply = fmt::format("!{}\n{}", index, e.what());
    }
    send_string(reply, 0, kTagResult);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace upsim::cli::mpi
