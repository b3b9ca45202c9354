// What a configuration key means, in one line, as the reader of that key publishes it beside its
// schema: `upsim schema` prints it next to the type, range and default the reader records
// (ConfigDocument::read_keys), and SCHEMA.md is generated from both.
//
// Contract:
//  - A reader's table lists the keys it reads, relative to the node it is handed (the workload
//    family's table is relative to `workload`, a hardware profile's to the profile's root).
//  - `key` is a pattern of the schema's paths: a sequence item is `[]`
//    ("tables[].rows"); `*` stands for any non-empty text, dots included, for maps keyed by
//    names the user chooses ("ops.*.t2" matches "ops.aten::add_.t2").
//  - `meaning` is one line: what the value is and does, with its unit where the type does not
//    carry one; no trailing period. The contract of the key (interactions, sources) stays in the
//    reader's header.
//  - The tables are complete for the keys the shipped scenarios read: a test fails for a key
//    without a meaning and for a meaning whose key no reader reads.
#pragma once

#include <span>
#include <string_view>

namespace upsim {

struct KeyMeaning {
  std::string_view key;
  std::string_view meaning;
};

/// Whether the schema path `path` ("ops.aten::add_.t2") matches `pattern` ("ops.*.t2").
bool key_pattern_matches(std::string_view pattern, std::string_view path);

/// The meaning of the first entry of `table` whose key matches `path`, or nullptr.
const KeyMeaning* find_key_meaning(std::span<const KeyMeaning> table, std::string_view path);

}  // namespace upsim
