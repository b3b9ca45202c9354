// Where a run writes its files, and the rule that nothing the user has is overwritten unasked.
//
// Contract:
//  - Without --out, outputs go to `upsim-out/<scenario stem>/`; if that folder already exists,
//    to the first free `upsim-out/<stem>-2/`, `-3/`, ... so earlier results are kept.
//  - With --out DIR, the folder is created if needed; if any file the run would write already
//    exists there, the run stops with an error naming it, unless --force is given.
//  - Files are written whole (to a temporary name, then renamed), so a failed run leaves no
//    half-written output.
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

/// Writes `content` to `path` through a temporary file and a rename. Throws on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace upsim::cli
