// Where the files upsim ships live: the scenarios and profiles of `configs/` and the published
// measurements of `test/data/` that the validate and calibrate commands read by default, and that
// shipped trace scenarios name (configs/../test/data/...). In a source checkout they are below
// the repository root, the working directory the README's commands run from (or the folder
// above the build folder of the running program); installed
// (`cmake --install`, the .deb) they are below <prefix>/share/upsim, beside <prefix>/bin/upsim.
// A default path is resolved once, when a command starts; a path the user gives is always taken
// as written.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace upsim::cli {

/// The folder holding `configs/` and `test/data/`: the working directory ("") when it has both;
/// else, for the running program <dir>/<folder>/upsim, <dir>/<folder>/../share/upsim (installed:
/// <prefix>/bin/upsim) or <dir> (a build folder inside a checkout: <root>/build/upsim), the first
/// that has both; else "" (an error then names the path as the user would write it from a
/// checkout). Looked up at each call (a few directory checks and a readlink).
std::filesystem::path shipped_root();

/// `relative` ("configs/...", "test/data/...") below shipped_root(); "" stays "".
std::string shipped_path(std::string_view relative);

/// The same for a "TABLE=PROFILE" pair of --measured-on: both sides.
std::string shipped_pair(std::string_view table_eq_profile);

}  // namespace upsim::cli
