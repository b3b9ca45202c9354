#include "sim/export/json_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace upsim {

void append_json_escaped(std::string& out, std::string_view text) {
  // Most text needs no escape: append it whole.
  const bool plain = std::none_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return c == '"' || c == '\\' || u < 0x20 || u == 0x7f;
  });
  if (plain) {
    out.append(text);
    return;
  }
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(u));
        } else {
          out.push_back(c);
        }
    }
  }
}

std::string json_quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  append_json_escaped(out, text);
  out.push_back('"');
  return out;
}

}  // namespace upsim
