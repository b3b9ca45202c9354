// Reading a key whose value names one of an enum's values (`layout: packed`), for the workload
// schemas: ConfigNode::get_choice_or checks the name against the list (an unknown one is a
// ConfigError listing the valid names) and this maps it back to the enum.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "sim/config/config_node.h"

namespace upsim {

/// The value of `key` in `node` as the enum value at the same index of `values` as its name in
/// `names`; `default_value` (whose name is written, as get_choice_or does) when the key is
/// absent.
template <typename Enum, size_t N>
Enum read_enum(const ConfigNode& node, std::string_view key,
               const std::array<std::string_view, N>& names, const std::array<Enum, N>& values,
               Enum default_value) {
  std::string_view default_name;
  for (size_t i = 0; i < N; ++i) {
    if (values[i] == default_value) default_name = names[i];
  }
  const std::string name = node.get_choice_or(key, names, default_name);
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return values[i];
  }
  node.child(key).fail(fmt::format("unknown {} `{}`", key, name));
}

}  // namespace upsim
