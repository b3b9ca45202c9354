#include "tools/command_line.h"

#include <fmt/format.h>

#include <ostream>
#include <stdexcept>

#include "tools/output_folder.h"

namespace upsim::cli {

namespace po = boost::program_options;

bool parse_command_line(const std::vector<std::string>& args, const po::options_description& desc,
                        std::ostream& out, po::variables_map& vm,
                        const po::positional_options_description* positional,
                        const po::options_description* shown) {
  po::command_line_parser parser(args);
  parser.options(desc);
  if (positional) parser.positional(*positional);
  po::store(parser.run(), vm);
  if (vm.count("help")) {
    out << (shown ? *shown : desc) << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

void refuse_to_overwrite(const std::filesystem::path& path, bool force) {
  check_replaceable(path);  // regular files only, --force or not
  if (!force && std::filesystem::exists(std::filesystem::symlink_status(path))) {
    throw std::runtime_error(fmt::format(
        "{} already exists; upsim does not overwrite files unasked: pass --force", path.string()));
  }
}

std::vector<std::string> split_commas(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = v.find(',', start);
      if (end == std::string::npos) end = v.size();
      if (end > start) out.push_back(v.substr(start, end - start));
      start = end + 1;
    }
  }
  return out;
}

}  // namespace upsim::cli
