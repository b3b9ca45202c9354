// Parsing a scenario's `workload:` YAML for the transformer tests.
#pragma once

#include <cstdint>
#include <string>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::test_configs {

/// The transformer config of `yaml`'s `workload:` for `gpus` GPUs; every key must be read.
inline TransformerConfig parse_workload(const std::string& yaml, uint32_t gpus) {
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "scenario.yaml");
  TransformerConfig config = parse_transformer_config(doc.root().child("workload"), gpus);
  doc.check_all_keys_used();
  return config;
}

/// parse_workload's ConfigError message (what()), or "" when it parses.
inline std::string workload_error(const std::string& yaml, uint32_t gpus) {
  try {
    parse_workload(yaml, gpus);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace upsim::test_configs
