#include "sim/export/chunked_file.h"

#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace upsim {

namespace {

/// Closes a file descriptor when it leaves scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  /// Closes it now; returns close()'s errno, or 0.
  int close_now() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

}  // namespace

ChunkedFile::ChunkedFile(std::filesystem::path path, bool gzip, std::string what)
    : path_(std::move(path)), gzip_(gzip), what_(std::move(what)) {
  tmp_ = path_;
  tmp_ += ".tmp";
}

ChunkedFile::~ChunkedFile() {
  discard();
}

ChunkedFile::ChunkedFile(ChunkedFile&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_(std::move(other.tmp_)),
      gzip_(other.gzip_),
      what_(std::move(other.what_)),
      tmp_exists_(std::exchange(other.tmp_exists_, false)) {}

void ChunkedFile::create() {
  discard();
  const int fd = ::open(tmp_.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno);
  Fd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) fail(EINVAL);
  tmp_exists_ = true;
  if (const int err = file.close_now(); err != 0) fail(err);
}

void ChunkedFile::append(std::string_view chunk) {
  if (!tmp_exists_) fail(EBADF);
  Fd file(::open(tmp_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) fail(errno);
  if (!gzip_) {
    write_all(file.get(), chunk);
  } else {
    z_stream z{};
    // windowBits 15 + 16: a gzip header and trailer (zlib manual, deflateInit2); level 1 as
    // sim/export/gzip_stream.h chose it for traces.
    if (::deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      fail("zlib could not initialise deflate");
    }
    // zlib's next_in is not const-qualified; deflate only reads it. A chunk is far below 4 GiB.
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(chunk.data()));
    z.avail_in = static_cast<uInt>(chunk.size());
    std::array<char, 1 << 16> out{};
    int rc = Z_OK;
    do {
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      rc = ::deflate(&z, Z_FINISH);
      if (rc == Z_STREAM_ERROR) {
        ::deflateEnd(&z);
        fail("zlib deflate failed");
      }
      try {
        write_all(file.get(), std::string_view(out.data(), out.size() - z.avail_out));
      } catch (...) {
        ::deflateEnd(&z);
        throw;
      }
    } while (rc != Z_STREAM_END);
    ::deflateEnd(&z);
  }
  if (const int err = file.close_now(); err != 0) fail(err);
}

void ChunkedFile::commit() {
  if (!tmp_exists_) fail(EBADF);
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) fail(ec.value());
  tmp_exists_ = false;
}

void ChunkedFile::discard() noexcept {
  if (!tmp_exists_) return;
  tmp_exists_ = false;
  std::error_code ignored;
  std::filesystem::remove(tmp_, ignored);
}

void ChunkedFile::write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
}

void ChunkedFile::fail(int err) {
  fail(std::generic_category().message(err));
}

void ChunkedFile::fail(std::string_view reason) {
  discard();
  throw std::runtime_error(fmt::format("cannot write {} '{}': {}", what_, path_.string(), reason));
}

}  // namespace upsim
