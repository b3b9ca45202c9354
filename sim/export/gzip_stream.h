// GzipStream: a gzip member written to an open file by a thread of its own, so that the
// compression of a trace overlaps the simulation that produces it. The caller hands over whole
// buffers; the thread deflates them in the order given (zlib deflate, level 1, gzip wrapper)
// and writes the output to the file. The bytes on disk are the same as deflating the buffers
// in the caller's thread.
//
// Contract:
//  - At most kQueuedBuffers buffers wait for the thread; write() blocks while that many do,
//    so memory stays bounded when the thread falls behind.
//  - The first write or deflate error stops the thread; write() and finish() then return it
//    (an errno value) and the caller owns the cleanup of the file.
//  - The file must stay open until finish() returns or the stream is destroyed (the destructor
//    stops the thread, dropping what it had not written).
#pragma once

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace upsim {

class GzipStream {
 public:
  static constexpr size_t kQueuedBuffers = 2;

  /// Starts the thread. Throws std::runtime_error when zlib cannot initialise.
  explicit GzipStream(std::FILE* file);
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  /// Queues `buffer`'s bytes and leaves `buffer` empty (a recycled buffer takes its place).
  /// Returns 0, the errno value of an earlier failure of the thread, or EINVAL after finish().
  int write(std::string& buffer);
  /// Ends the gzip member after the queued buffers and waits for the thread to write it all.
  /// Returns 0 or an errno value; again the same when called again. The stream takes no writes
  /// afterwards (write() returns EINVAL).
  int finish();

 private:
  void run();
  int deflate_into_file(const std::string& input, bool last);

  std::FILE* file_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  std::vector<std::string> spare_;
  bool finishing_ = false;
  bool stopping_ = false;
  bool done_ = false;
  int error_ = 0;
  struct Deflater;
  std::unique_ptr<Deflater> deflater_;
  std::thread thread_;
};

}  // namespace upsim
