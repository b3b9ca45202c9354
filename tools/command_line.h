// Option handling shared by the subcommands (Boost.Program_options stays inside tools/).
#pragma once

#include <boost/program_options.hpp>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Parses `args` against `desc` (positional arguments per `positional` when given) into `vm`.
/// Returns false after printing the help (`shown` when given, e.g. `desc` without its hidden
/// positional options; else `desc`) to `out` when --help was given, true otherwise (after
/// po::notify). Throws po::error for unknown, repeated or missing options.
bool parse_command_line(
    const std::vector<std::string>& args, const boost::program_options::options_description& desc,
    std::ostream& out, boost::program_options::variables_map& vm,
    const boost::program_options::positional_options_description* positional = nullptr,
    const boost::program_options::options_description* shown = nullptr);

/// parse_command_line for a command of one positional argument, stored in `value` (empty when
/// absent) under the hidden option `name` (the name Boost's errors use); `desc` is the help.
bool parse_with_positional(const std::vector<std::string>& args,
                           const boost::program_options::options_description& desc,
                           std::ostream& out, const char* name, std::string& value);

/// Values of a repeatable, comma-separated option: {"a,b", "c"} -> a, b, c (empty items dropped).
std::vector<std::string> split_commas(const std::vector<std::string>& values);

/// Throws std::runtime_error naming `path` when it exists and `force` is false: upsim never
/// overwrites a file unasked.
void refuse_to_overwrite(const std::filesystem::path& path, bool force);

}  // namespace upsim::cli
