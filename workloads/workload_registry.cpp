#include "workloads/workload_registry.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "workloads/dlrm/dlrm_workload.h"
#include "workloads/trace/trace_workload.h"
#include "workloads/transformer/transformer_workload.h"

namespace upsim {

void WorkloadRegistry::add(std::string name, WorkloadFactory factory,
                           std::span<const KeyMeaning> key_meanings) {
  if (name.empty()) throw std::invalid_argument("a workload family needs a name");
  if (contains(name)) {
    throw std::invalid_argument(fmt::format("workload family `{}` is already registered", name));
  }
  if (!factory)
    throw std::invalid_argument(fmt::format("workload family `{}` has no factory", name));
  entries_.push_back(Entry{std::move(name), std::move(factory), key_meanings});
}

std::vector<std::string_view> WorkloadRegistry::names() const {
  std::vector<std::string_view> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_)
    out.push_back(e.name);
  return out;
}

std::span<const KeyMeaning> WorkloadRegistry::key_meanings(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return e.key_meanings;
  }
  return {};
}

bool WorkloadRegistry::contains(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return true;
  }
  return false;
}

std::unique_ptr<Workload> WorkloadRegistry::make(const ConfigNode& workload) const {
  const std::vector<std::string_view> valid = names();
  const std::string name = workload.get_choice("model", valid);
  for (const Entry& e : entries_) {
    if (e.name == name) return e.factory(workload);
  }
  workload.child("model").fail(fmt::format("workload `{}` has no factory", name));
}

WorkloadRegistry default_workload_registry() {
  WorkloadRegistry r;
  r.add("dlrm", make_dlrm_workload, dlrm_key_meanings());
  r.add("trace", make_trace_workload, trace_key_meanings());
  r.add("transformer", make_transformer_workload, transformer_key_meanings());
  // One line per family; the transformer family (workloads/transformer/) goes here.
  return r;
}

}  // namespace upsim
