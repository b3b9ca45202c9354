// ChunkedFile: an output file written as whole chunks appended one at a time to "<path>.tmp"
// and renamed to `path` when complete, with no file descriptor or thread held between chunks,
// so that an exporter can fill many files side by side (the Kineto writer: one file per rank).
//
// Contract:
//  - create() creates or truncates "<path>.tmp": never through a symbolic link planted there,
//    and only onto a regular file (O_NONBLOCK: a pipe planted there fails the open instead of
//    blocking it); it is closed again at once.
//  - append(chunk) opens the temporary for appending (O_NOFOLLOW), writes the chunk whole and
//    closes it. With gzip, each chunk is written as one gzip member (zlib deflate, level 1, gzip
//    wrapper): RFC 1952 section 2.2 makes a gzip file a series of members, which zlib's inflate
//    (upsim's trace reader, workloads/trace/trace_file.h), Python's gzip module and zcat read as
//    one stream. The same chunks give the same bytes.
//  - commit() renames the temporary to `path`.
//  - Any failure throws std::runtime_error "cannot write <what> '<path>': <reason>" and removes
//    the temporary; a file destroyed before commit() removes its temporary too.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace upsim {

class ChunkedFile {
 public:
  /// `what` names the file's kind in errors ("Kineto trace"). Nothing is opened yet.
  ChunkedFile(std::filesystem::path path, bool gzip, std::string what);
  ~ChunkedFile();
  ChunkedFile(ChunkedFile&& other) noexcept;
  ChunkedFile& operator=(ChunkedFile&&) = delete;
  ChunkedFile(const ChunkedFile&) = delete;
  ChunkedFile& operator=(const ChunkedFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void create();
  void append(std::string_view chunk);
  void commit();
  /// Removes the temporary if this file made it and has not committed it. Never throws.
  void discard() noexcept;

 private:
  [[noreturn]] void fail(int err);
  [[noreturn]] void fail(std::string_view reason);
  void write_all(int fd, std::string_view bytes);

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  bool gzip_ = false;
  std::string what_;
  /// The temporary exists and is this file's to remove.
  bool tmp_exists_ = false;
};

}  // namespace upsim
