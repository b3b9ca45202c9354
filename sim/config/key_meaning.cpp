#include "sim/config/key_meaning.h"

namespace upsim {

bool key_pattern_matches(std::string_view pattern, std::string_view path) {
  // Iterative glob match with one backtrack point: `*` takes one character at first and grows
  // while the rest fails; linear in practice for the few `*` a key holds.
  size_t p = 0;
  size_t s = 0;
  size_t star = std::string_view::npos;
  size_t star_end = 0;
  while (s < path.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_end = ++s;  // `*` takes at least one character
    } else if (p < pattern.size() && pattern[p] == path[s]) {
      ++p;
      ++s;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      s = ++star_end;
    } else {
      return false;
    }
  }
  return p == pattern.size();
}

const KeyMeaning* find_key_meaning(std::span<const KeyMeaning> table, std::string_view path) {
  for (const KeyMeaning& m : table) {
    if (key_pattern_matches(m.key, path)) return &m;
  }
  return nullptr;
}

}  // namespace upsim
