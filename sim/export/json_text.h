// JSON string literals for the exporters and the CLI's machine-readable results (RFC 8259,
// section 7): one escaping rule for the Chrome trace and summary.json.
//
// Contract: bytes >= 0x80 pass through unchanged (names are UTF-8); '"', '\\', LF, CR and TAB get
// their short escapes; other control characters and DEL (0x7f, which Perfetto rejects unescaped)
// become \u00XX.
#pragma once

#include <string>
#include <string_view>

namespace upsim {

/// Appends the escaped body of `text` to `out`, without quotes.
void append_json_escaped(std::string& out, std::string_view text);

/// `text` as a JSON string literal, quotes included.
std::string json_quoted(std::string_view text);

}  // namespace upsim
