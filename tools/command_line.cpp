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

bool parse_with_positional(const std::vector<std::string>& args,
                           const po::options_description& desc, std::ostream& out, const char* name,
                           std::string& value) {
  po::options_description hidden;
  hidden.add_options()(name, po::value<std::string>(&value));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add(name, 1);
  po::variables_map vm;
  return parse_command_line(args, all, out, vm, &positional, &desc);
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
