// `upsim init dlrm|transformer|trace DIR`: writes DIR/scenario.yaml, a commented starter scenario
// that runs as it is. The starters are shipped scenarios (configs/starters/<kind>.yaml, which run
// in place too); the copy's references to shipped files (`../hardware/...`, the trace folder)
// become absolute paths, so that it runs from wherever DIR is. An existing scenario.yaml is
// replaced only with --force.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace upsim::cli {

/// The starter kinds, in the order --help lists them.
inline constexpr std::string_view kStarterKinds[] = {"dlrm", "transformer", "trace"};

/// `starter` (a starter's text, read from `starter_folder`) with every relative reference
/// (a value starting with `../`) made an absolute, normalized path from `starter_folder`.
std::string absolute_references(std::string_view starter, const std::string& starter_folder);

/// Returns the exit code (0; bad input throws for main to report).
int init_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
