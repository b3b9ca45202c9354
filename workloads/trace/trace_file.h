// Reading a trace file into memory: plain JSON or gzip-compressed JSON (.json.gz).
//
// Contract: the format is decided by the file's first bytes (the gzip magic 1f 8b), not by its
// name. Concatenated gzip members are read as one stream. A file that cannot be opened, a gzip
// stream that is corrupt or ends early (a truncated download or a profiler killed mid-write)
// throws ParseError naming the file.
#pragma once

#include <filesystem>
#include <string>

namespace upsim {

/// The uncompressed contents of `path`.
std::string read_trace_file(const std::filesystem::path& path);

/// Decompresses a gzip (or zlib) stream held in memory; `file` names it in errors.
std::string gunzip(const std::string& compressed, const std::string& file);

}  // namespace upsim
