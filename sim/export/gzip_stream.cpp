#include "sim/export/gzip_stream.h"

#include <zlib.h>

#include <array>
#include <cerrno>
#include <stdexcept>
#include <utility>

namespace upsim {

struct GzipStream::Deflater {
  z_stream z{};
};

GzipStream::GzipStream(std::FILE* file) : file_(file), deflater_(std::make_unique<Deflater>()) {
  // windowBits 15 + 16: a gzip header and trailer (zlib manual, deflateInit2). Level 1
  // (Z_BEST_SPEED): on Llama 3 70B's 550 MB trace it compresses in 1.9 s to 52 MB, where the
  // default level 6 took 4.2 s for 36 MB.
  if (::deflateInit2(&deflater_->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw std::runtime_error("gzip: zlib could not initialise deflate");
  }
  thread_ = std::thread([this] { run(); });
}

GzipStream::~GzipStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  ::deflateEnd(&deflater_->z);
}

int GzipStream::write(std::string& buffer) {
  std::unique_lock lock(mutex_);
  if (finishing_) return EINVAL;  // the member is ended (or being ended)
  changed_.wait(lock, [this] { return error_ != 0 || queue_.size() < kQueuedBuffers; });
  if (error_ != 0) return error_;
  queue_.push_back(std::move(buffer));
  buffer.clear();
  if (!spare_.empty()) {
    buffer.swap(spare_.back());
    spare_.pop_back();
  }
  lock.unlock();
  changed_.notify_all();
  return 0;
}

int GzipStream::finish() {
  std::unique_lock lock(mutex_);
  finishing_ = true;
  changed_.notify_all();
  changed_.wait(lock, [this] { return done_ || error_ != 0; });
  return error_;
}

void GzipStream::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || finishing_ || !queue_.empty(); });
    if (stopping_) return;
    if (queue_.empty()) {  // finishing, everything written: end the member
      lock.unlock();
      const int err = deflate_into_file(std::string(), /*last=*/true);
      lock.lock();
      error_ = err;
      done_ = err == 0;
      changed_.notify_all();
      return;
    }
    std::string input = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const int err = deflate_into_file(input, /*last=*/false);
    input.clear();
    lock.lock();
    spare_.push_back(std::move(input));
    if (err != 0) {
      error_ = err;
      changed_.notify_all();
      return;
    }
    changed_.notify_all();
  }
}

int GzipStream::deflate_into_file(const std::string& input, bool last) {
  z_stream& z = deflater_->z;
  // zlib's next_in is not const-qualified; deflate only reads it.
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  z.avail_in = static_cast<uInt>(input.size());
  std::array<char, 1 << 16> chunk{};
  int rc = Z_OK;
  do {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    rc = ::deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) return EIO;
    const size_t size = chunk.size() - z.avail_out;
    if (std::fwrite(chunk.data(), 1, size, file_) != size) return errno != 0 ? errno : EIO;
  } while (z.avail_out == 0 || (last && rc != Z_STREAM_END));
  return 0;
}

}  // namespace upsim
