#include "sim/config/key_paths.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>

namespace upsim {
namespace {

void collect(const YAML::Node& node, const std::string& path, std::vector<std::string>& out) {
  if (node.IsMap() && node.size() > 0) {
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      collect(entry.second, path.empty() ? key : path + "." + key, out);
    }
    return;
  }
  if (node.IsSequence() && node.size() > 0) {
    for (size_t i = 0; i < node.size(); ++i)
      collect(node[i], path + "." + std::to_string(i), out);
    return;
  }
  if (!path.empty()) out.push_back(path);
}

}  // namespace

std::vector<std::string> key_paths(std::string_view yaml, const std::string& display_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(
        fmt::format("{}:{}: not YAML: {}", display_name, e.mark.line + 1, e.msg));
  }
  std::vector<std::string> out;
  collect(root, "", out);
  return out;
}

}  // namespace upsim
