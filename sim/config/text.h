// Small text helpers shared by the readers of configuration and measurement files.
#pragma once

#include <string_view>

namespace upsim {

/// `s` without leading and trailing blanks: spaces, tabs and carriage returns (a CRLF file's
/// lines keep their '\r' after splitting on '\n').
constexpr std::string_view trim_blanks(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r";
  const size_t first = s.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kBlanks) - first + 1);
}

}  // namespace upsim
