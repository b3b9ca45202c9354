// The key paths of a YAML document, as `--set` takes them: every scalar (and empty map or
// sequence) as its dotted path from the root, sequence items by index ("platform.gpus",
// "workload.embeddings.tables.0.rows"). For shell completion and `upsim run --keys`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace upsim {

/// The key paths of `yaml` in document order. Throws std::invalid_argument (naming
/// `display_name` and the line) when `yaml` does not parse.
std::vector<std::string> key_paths(std::string_view yaml, const std::string& display_name);

}  // namespace upsim
