// Parsing a scenario's `workload:` YAML for the transformer tests.
#pragma once

#include <cstdint>
#include <string>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim::test_configs {

/// The start of a `workload:` of a small grouped-query Llama (2 layers, hidden 1024, 16 query and
/// 4 key/value heads, sequence 512), for the tests to add keys to.
inline std::string small_llama_workload_yaml() {
  return "workload:\n  model: transformer\n  architecture: llama\n  layers: 2\n  hidden: 1024\n"
         "  heads: 16\n  kv_heads: 4\n  vocab: 32000\n  seq: 512\n";
}

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

/// workload_error of small_llama_workload_yaml() with `extra` workload keys and `parallelism`
/// (a flow map, e.g. "{data: 8, expert: 8}") for `gpus` GPUs.
inline std::string small_llama_error(const std::string& extra, const std::string& parallelism,
                                     uint32_t gpus) {
  return workload_error(
      small_llama_workload_yaml() + extra + "  parallelism: " + parallelism + "\n", gpus);
}

}  // namespace upsim::test_configs
