// The upsim version: `upsim --version`, and what a sweep records with its rows (a row written by
// another version is run again: tools/sweep_command.h).
#pragma once

namespace upsim::cli {

inline constexpr const char* kVersion = "0.1.0";

}  // namespace upsim::cli
