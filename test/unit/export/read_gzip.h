// The decompressed content of a gzip file, for the tests of the writers that compress.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <string>

namespace upsim::test {

inline std::string read_gzip_file(const std::filesystem::path& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  EXPECT_NE(in, nullptr) << path;
  if (in == nullptr) return {};
  std::string text;
  std::array<char, 1 << 16> chunk{};
  int n = 0;
  while ((n = gzread(in, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0)
    text.append(chunk.data(), static_cast<size_t>(n));
  EXPECT_EQ(n, 0) << "gzread failed on " << path;
  gzclose(in);
  return text;
}

}  // namespace upsim::test
