// Shared by the libFuzzer harnesses (test/fuzz/README in scripts/fuzz.sh): a reader may reject
// any input with its own error (an exception derived from std::exception), but must never crash,
// hang, read out of bounds, overflow, or ask for unbounded memory. std::bad_alloc is therefore a
// finding, not a clean rejection.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <string_view>

#include "sim/config/config_node.h"

namespace upsim::fuzz {

/// `text` as a YAML document in configs/, so that its relative references resolve against the
/// shipped configs as a scenario's would.
inline ConfigDocument parse_in_configs(std::string_view text) {
  return ConfigDocument::parse_string(text, std::string(UPSIM_CONFIGS_DIR) + "/fuzz.yaml");
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Runs `f`, accepting any exception but std::bad_alloc (which aborts: a finding).
template <typename F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const std::bad_alloc&) {
    std::abort();
  } catch (const std::exception&) {
    // A clean rejection: the reader said what is wrong.
  }
}

/// A per-process scratch file holding the input, for readers that take a path.
inline std::filesystem::path scratch_file(std::string_view bytes, const char* suffix) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("upsim-fuzz-" + std::to_string(::getpid()) + suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace upsim::fuzz
