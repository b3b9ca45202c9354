// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto: the content hashes of a sweep's points and
// the checksums of its row records (tools/sweep_records.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace upsim::cli {

/// The SHA-256 of `bytes` as 64 lowercase hex digits. Throws std::runtime_error only when
/// libcrypto fails (out of memory).
std::string sha256_hex(std::string_view bytes);

/// The SHA-256 of the file at `path` (symbolic links followed), read in chunks; nullopt with the
/// reason in `why` when it is not a regular file ("a named pipe": never read, so it cannot hang)
/// or cannot be read (the system's reason).
std::optional<std::string> sha256_of_file(const std::filesystem::path& path, std::string& why);

}  // namespace upsim::cli
