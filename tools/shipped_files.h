// Where the files upsim ships live: the scenarios and profiles of `configs/` and the published
// measurements of `test/data/` that the validate and calibrate commands read by default, and that
// shipped trace scenarios name (configs/../test/data/...). In a source checkout they are below
// the repository root, the working directory the README's commands run from; installed
// (`cmake --install`, the .deb) they are below <prefix>/share/upsim, beside <prefix>/bin/upsim.
// A default path is resolved once, when a command starts; a path the user gives is always taken
// as written.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace upsim::cli {

/// The folder holding `configs/` and `test/data/`: the working directory ("") when it has both;
/// else <prefix>/share/upsim for the running program <prefix>/bin/upsim, when that has both; else
/// "" (an error then names the path as the user would write it from a checkout). Looked up at
/// each call (two directory checks and a readlink).
std::filesystem::path shipped_root();

/// `relative` ("configs/...", "test/data/...") below shipped_root(); "" stays "".
std::string shipped_path(std::string_view relative);

/// The same for a "TABLE=PROFILE" pair of --measured-on: both sides.
std::string shipped_pair(std::string_view table_eq_profile);

}  // namespace upsim::cli
