// The upsim version: `upsim --version`, and what a sweep records with its rows (a row written by
// another version is run again: tools/sweep_command.h).
#pragma once

namespace upsim::cli {

/// 0.2.0: sweep results gain the throughput columns (a 0.1.0 row has fewer fields).
inline constexpr const char* kVersion = "0.2.0";

}  // namespace upsim::cli
