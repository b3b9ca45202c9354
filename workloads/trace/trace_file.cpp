#include "workloads/trace/trace_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "sim/formats/parse_error.h"
#include "sim/input_file.h"

namespace upsim {

namespace {

bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

}  // namespace

/// Traces (Kineto / ET JSON, gzipped or not) of real runs are megabytes to a few gigabytes.
constexpr std::uintmax_t kMaxTraceBytes = 16 * kGiB;

std::string gunzip(const std::string& compressed, const std::string& file) {
  std::string out;
  // The gzip trailer holds the uncompressed size modulo 2^32: a good first reservation, unless
  // the file is truncated or corrupt (deflate never compresses better than 1032:1).
  if (compressed.size() >= 18) {
    uint32_t isize = 0;
    std::memcpy(&isize, compressed.data() + compressed.size() - 4, 4);
    if (isize > compressed.size() && isize / 1032 <= compressed.size()) out.reserve(isize);
  }
  z_stream zs{};
  // 15 + 32: maximum window, and accept both gzip and zlib headers.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw ParseError(file, "cannot initialise zlib");
  const auto* next_in = reinterpret_cast<const Bytef*>(compressed.data());
  size_t remaining = compressed.size();
  constexpr size_t kChunk = size_t{4} << 20;
  int rc = Z_OK;
  while (true) {
    if (zs.avail_in == 0 && remaining > 0) {
      const size_t n = std::min<size_t>(remaining, UINT32_MAX);
      zs.next_in = const_cast<Bytef*>(next_in);
      zs.avail_in = static_cast<uInt>(n);
      next_in += n;
      remaining -= n;
    }
    const size_t before = out.size();
    if (before >= kMaxTraceBytes) {
      inflateEnd(&zs);
      throw ParseError(file, "expands to more than " + std::to_string(kMaxTraceBytes >> 30) +
                                 " GiB when decompressed; a trace may have at most that");
    }
    out.resize(before + kChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - before, UINT32_MAX));
    const uInt avail_before = zs.avail_out;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(before + (avail_before - zs.avail_out));
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated .gz files are one stream).
      if (zs.avail_in == 0 && remaining == 0) break;
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR) {
      const std::string why = zs.msg ? zs.msg : "corrupt data";
      inflateEnd(&zs);
      throw ParseError(file, "corrupt gzip stream: " + why);
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && remaining == 0) {
      inflateEnd(&zs);
      throw ParseError(file, "gzip stream ends early (truncated file?) after " +
                                 std::to_string(out.size()) + " uncompressed bytes");
    }
  }
  inflateEnd(&zs);
  return out;
}

std::string read_trace_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  if (const auto why = input_file_problem(path, kMaxTraceBytes)) throw ParseError(name, *why);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ParseError(name, "cannot open the file");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw ParseError(name, "cannot read the file");
  in.seekg(0, std::ios::beg);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size)) throw ParseError(name, "cannot read the file");
  if (is_gzip(bytes)) return gunzip(bytes, name);
  return bytes;
}

}  // namespace upsim
