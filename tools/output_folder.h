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
//  - A command that writes several files publishes them together (OutputFiles): all are
//    written to their temporary twins first and renamed only once every one of them is complete,
//    so an error or an interrupt leaves the folder as it was (and no folder it created).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace upsim::cli {

class TempFileGuard;

/// An output folder and whether this command created it (then an empty one is removed again when
/// the command fails).
struct OutputFolder {
  std::filesystem::path path;
  bool created = false;
};

/// Chooses and creates the output folder. `planned_files` are the file names the run may write
/// (every name a command of its kind writes, also those this run will not: an older run's file
/// that this one would leave beside its own is a conflict too); `planned_folders` the names of
/// folders of files it may write (`upsim run`'s Kineto traces): one that exists is a conflict
/// too, and, even with `force`, one that is not a folder (a link, a file). Throws
/// std::runtime_error on a conflict (without `force`) or when the folder can't be made.
OutputFolder prepare_output_folder(const std::filesystem::path& scenario_file,
                                   const std::filesystem::path& requested_out,
                                   const std::vector<std::string>& planned_files, bool force,
                                   const std::vector<std::string>& planned_folders = {});

/// Throws std::runtime_error naming `path` when it, or `<path>.tmp`, exists and is not a regular
/// file (symbolic links are not followed).
void check_replaceable(const std::filesystem::path& path);

/// Writes `content` to `path` through `<path>.tmp` and a rename. Throws std::runtime_error with
/// the system's reason on failure (and for a non-regular file at either name).
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

/// Output files published together (see the file comment).
///
/// Contract:
///  - stage(path, content) writes `<path>.tmp` now (regular files only, never through a link);
///    reserve(path) checks `path` and returns `<path>.tmp` for a writer of its own (the Chrome
///    trace) to fill. Both temporaries are removed on SIGINT / SIGTERM until commit().
///    release(path) gives a reservation up again (its temporary removed): a file an attempt no
///    longer writes. make_folder(path) creates a folder for files to reserve in (a run's Kineto
///    traces), if it is not there.
///  - commit() renames every temporary to its name, with SIGINT / SIGTERM held back until the
///    renames are done, then removes the `stale` files (an earlier run's outputs that this run
///    does not write; regular files only). A reserved temporary that was never written is an
///    error naming it.
///  - Destroyed without commit() (an error, an exception): every temporary is removed, then the
///    folders make_folder created and `folder` when it was created by this command, each when it
///    is left empty.
class OutputFiles {
 public:
  explicit OutputFiles(OutputFolder folder = {});
  ~OutputFiles();
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;

  const std::filesystem::path& folder() const { return folder_.path; }
  void stage(const std::filesystem::path& path, std::string_view content);
  std::filesystem::path reserve(const std::filesystem::path& path);
  void release(const std::filesystem::path& path);
  /// Throws std::runtime_error with the system's reason when the folder can't be made.
  void make_folder(const std::filesystem::path& path);
  void commit(const std::vector<std::filesystem::path>& stale = {});

 private:
  struct Entry {
    std::filesystem::path path;
    std::filesystem::path tmp;
    std::unique_ptr<TempFileGuard> guard;
  };
  void remove_temporaries() noexcept;

  OutputFolder folder_;
  std::vector<Entry> entries_;
  /// Folders make_folder created, in creation order.
  std::vector<std::filesystem::path> made_folders_;
  bool committed_ = false;
};

}  // namespace upsim::cli
