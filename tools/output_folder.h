// Where a run writes its files, and the rule that nothing the user has is overwritten unasked.
//
// Contract:
//  - Without --out, outputs go to `upsim-out/<scenario stem>/`; if that folder already exists,
//    to the first free `upsim-out/<stem>-2/`, `-3/`, ... so earlier results are kept.
//  - With --out DIR, the folder is created if needed; if any file the run would write already
//    exists there, the run stops with an error naming it, unless --force is given.
//  - Files are written whole (to `<name>.tmp`, then renamed), so a failed run leaves no
//    half-written output; the temporary file is removed on every error and, through
//    tools/interrupt_cleanup.h, on SIGINT / SIGTERM. Errors carry the system's reason.
//  - Only regular files are written or replaced, --force included: a symbolic link, device,
//    pipe or folder at an output name (or its .tmp twin) is an error naming it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace upsim::cli {

/// Chooses and creates the output folder. `planned_files` are the file names the run will write.
/// Throws std::runtime_error on a conflict (without `force`) or when the folder can't be made.
std::filesystem::path prepare_output_folder(const std::filesystem::path& scenario_file,
                                            const std::filesystem::path& requested_out,
                                            const std::vector<std::string>& planned_files,
                                            bool force);

/// Throws std::runtime_error naming `path` when it, or `<path>.tmp`, exists and is not a regular
/// file (symbolic links are not followed).
void check_replaceable(const std::filesystem::path& path);

/// Writes `content` to `path` through `<path>.tmp` and a rename. Throws std::runtime_error with
/// the system's reason on failure (and for a non-regular file at either name).
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace upsim::cli
