// The files a configuration document depends on: the files its values were read from and every
// file a value names. A sweep hashes them to tell whether a point's scenario changed since its
// row was written (tools/sweep_command.h).
//
// Contract:
//  - The files the document's values were read from: the document's own file and every
//    reference a reader already inlined (ConfigNode::load_reference).
//  - A value names a file when it is a string scalar (a map value or a list item, never a key)
//    that resolves as ConfigNode::get_path would (relative to the directory of the file holding
//    it; a --set value as written, that is relative to the working directory) to an existing
//    regular file, symbolic links followed; or to an existing folder, whose regular files (one
//    level, as the trace readers list a folder of traces) are then named too. Values made only
//    of `.` and `/` ("." , "..", "/") name no folder here.
//  - A named `.yaml` / `.yml` file is read as YAML on its own (ConfigDocument::load_file) and
//    the files its values name are named too, recursively; each file is read once, so reference
//    cycles end. A named file that is not valid YAML is still listed, with nothing of its own.
//  - Nothing else is opened: names are only looked up (a pipe, a device or a socket is never
//    listed, nor read), and only YAML files are read.
//  - The document is not changed: no key is marked asked, nothing is loaded into it, so its
//    strict-key check and resolved_yaml() are as before.
//  - The result is absolute and lexically normal, sorted, each file once; the same document
//    over the same files gives the same list.
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "sim/config/config_node.h"

namespace upsim {

/// What each YAML file's own values name, kept across calls of referenced_files: a sweep lists
/// the files of thousands of documents that share their references, and reads each one once.
/// The files are taken not to change while it lives. One thread at a time.
class ReferencedFilesCache {
 public:
  struct Names {
    std::vector<std::filesystem::path> files;  ///< absolute, lexically normal
    std::vector<std::filesystem::path> yaml;   ///< the YAML files among them
  };
  /// What the YAML file at `yaml_file` (absolute) names directly, read on the first call.
  const Names& of(const std::filesystem::path& yaml_file);

 private:
  std::map<std::string, Names> names_;
};

/// The files `doc` depends on (see the file comment). `set_values` are more values to resolve as
/// --set values: overrides whose path runs through a reference no reader has loaded yet wait
/// inside the document where no walk sees them, so a caller passes their values here. `cache`,
/// when given, keeps what referenced YAML files name for the next call.
std::vector<std::filesystem::path> referenced_files(ConfigDocument& doc,
                                                    std::span<const std::string> set_values = {},
                                                    ReferencedFilesCache* cache = nullptr);

}  // namespace upsim
