// GzipStream: buffers deflated in order on the stream's thread into one gzip member, the
// caller's buffer handed back empty, and a write error reported to the caller.
#include "sim/export/gzip_stream.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "test/unit/export/read_gzip.h"

namespace upsim {
namespace {

namespace fs = std::filesystem;

/// `bytes` pseudo-random bytes (fixed seed): deflate cannot shrink them.
std::string noise(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(bytes, '\0');
  for (char& c : s)
    c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST(GzipStream, BuffersComeOutInOrderAsOneGzipMember) {
  const fs::path path = fs::path(::testing::TempDir()) / "upsim_gzip_stream_round_trip.gz";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::string expected;
  {
    GzipStream stream(file);
    for (int i = 0; i < 7; ++i) {
      // Compressible text, noise and an empty buffer; more buffers than the queue holds.
      std::string buffer = i % 3 == 0   ? std::string(300'000, static_cast<char>('a' + i))
                           : i % 3 == 1 ? noise(200'000, static_cast<uint32_t>(i))
                                        : std::string();
      expected += buffer;
      ASSERT_EQ(stream.write(buffer), 0);
      EXPECT_TRUE(buffer.empty());
    }
    ASSERT_EQ(stream.finish(), 0);
    // Ended: a later write is refused, finishing again changes nothing.
    std::string late = "late";
    EXPECT_EQ(stream.write(late), EINVAL);
    EXPECT_EQ(stream.finish(), 0);
  }
  ASSERT_EQ(std::fclose(file), 0);
  EXPECT_EQ(test::read_gzip_file(path), expected);
  fs::remove(path);
}

TEST(GzipStream, AWriteErrorReachesTheCaller) {
  // /dev/full fails every write with ENOSPC.
  std::FILE* file = std::fopen("/dev/full", "wb");
  if (file == nullptr) GTEST_SKIP() << "no /dev/full";
  int err = 0;
  {
    GzipStream stream(file);
    for (int i = 0; i < 8 && err == 0; ++i) {
      std::string buffer = noise(1 << 20, static_cast<uint32_t>(i));
      err = stream.write(buffer);
    }
    if (err == 0) err = stream.finish();
  }
  std::fclose(file);
  EXPECT_EQ(err, ENOSPC);
}

TEST(GzipStream, DestroyingAnUnfinishedStreamStopsItsThread) {
  const fs::path path = fs::path(::testing::TempDir()) / "upsim_gzip_stream_abandoned.gz";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  {
    GzipStream stream(file);
    std::string buffer = noise(1 << 20, 1);
    EXPECT_EQ(stream.write(buffer), 0);
  }  // no finish: the thread stops, the file stays open for the caller to discard
  EXPECT_EQ(std::fclose(file), 0);
  fs::remove(path);
}

}  // namespace
}  // namespace upsim
