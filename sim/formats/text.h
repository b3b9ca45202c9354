// Small text helpers shared by the readers of configuration and measurement files.
#pragma once

#include <string>
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

/// A field of a file for an error message: `text` in backquotes when it is short (at most
/// kMaxQuotedFieldChars printable ASCII characters, no backquote), else "a field of N
/// characters". Readers quote a field only once the file proved to be of the kind they read (its
/// header matched): never a file of another kind, never at length, never control characters.
inline constexpr size_t kMaxQuotedFieldChars = 40;
inline std::string quoted_field(std::string_view text) {
  bool plain = !text.empty() && text.size() <= kMaxQuotedFieldChars;
  for (const char c : text)
    plain = plain && c >= 0x20 && c < 0x7f && c != '`';
  std::string out;
  if (plain) {
    out.reserve(text.size() + 2);
    out.push_back('`');
    out.append(text);
    out.push_back('`');
  } else {
    out.append("a field of ").append(std::to_string(text.size())).append(" characters");
  }
  return out;
}

}  // namespace upsim
