// Small text helpers shared by the readers of configuration and measurement files.
#pragma once

#include <string_view>
#include <vector>

namespace upsim {

/// `s` without leading and trailing blanks: spaces, tabs and carriage returns (a CRLF file's
/// lines keep their '\r' after splitting on '\n').
constexpr std::string_view trim_blanks(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r";
  const size_t first = s.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kBlanks) - first + 1);
}

/// The fields of `line` between `separator`s, each trimmed (trim_blanks); no quoting. An empty
/// line is one empty field.
inline std::vector<std::string_view> split_trimmed(std::string_view line, char separator) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = line.find(separator, start);
    out.push_back(trim_blanks(line.substr(start, at == std::string_view::npos ? at : at - start)));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace upsim
