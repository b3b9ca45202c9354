// Workload families by name (ARCHITECTURE.md "Workloads"): the scenario's `workload.model` picks
// one. tools/ (the composition root) builds the registry with default_workload_registry() and never
// branches on a family's name; there is no static self-registration.
//
// Contract: make() reads `model` from the `workload:` map; an unknown name is a ConfigError at
// `workload.model` that lists the registered names. The remaining keys belong to the family's
// factory (its schema is in the family's header). Adding a family = a folder under workloads/
// with its Workload and one add() line in default_workload_registry().
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "workloads/workload.h"

namespace upsim {

/// Reads and validates one family's `workload:` section (ConfigError at its keys).
using WorkloadFactory = std::function<std::unique_ptr<Workload>(const ConfigNode& workload)>;

class WorkloadRegistry {
 public:
  /// Registers `name` with the meanings of its keys (relative to `workload`, sim/config/
  /// key_meaning.h); std::invalid_argument when it is empty or already registered.
  void add(std::string name, WorkloadFactory factory,
           std::span<const KeyMeaning> key_meanings = {});

  /// The meanings of family `name`'s keys; empty for an unknown name.
  std::span<const KeyMeaning> key_meanings(std::string_view name) const;

  /// The registered names, in registration order.
  std::vector<std::string_view> names() const;
  bool contains(std::string_view name) const;

  /// The workload `workload.model` names, built by its factory.
  std::unique_ptr<Workload> make(const ConfigNode& workload) const;

 private:
  struct Entry {
    std::string name;
    WorkloadFactory factory;
    std::span<const KeyMeaning> key_meanings;
  };
  std::vector<Entry> entries_;
};

/// Every shipped family: dlrm (workloads/dlrm/dlrm_workload.h), trace
/// (workloads/trace/trace_workload.h), transformer (workloads/transformer/transformer_workload.h).
WorkloadRegistry default_workload_registry();

}  // namespace upsim
