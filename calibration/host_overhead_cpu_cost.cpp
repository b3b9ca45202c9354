#include "calibration/host_overhead_cpu_cost.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>
#include <utility>

namespace upsim {
namespace {

void check_non_negative(Duration value, std::string_view what) {
  if (value < Duration::zero()) {
    throw std::invalid_argument(fmt::format("host overheads: {} must not be negative", what));
  }
}

Duration op_value(const std::optional<Duration>& value, Duration fallback) {
  return value ? *value : fallback;
}

}  // namespace

HostOverheadCpuCost::HostOverheadCpuCost(HostOverheads params) : params_(std::move(params)) {
  check_non_negative(params_.t1, "t1");
  check_non_negative(params_.t4, "t4");
  check_non_negative(params_.default_t2, "default.t2");
  check_non_negative(params_.default_t3, "default.t3");
  check_non_negative(params_.default_t5, "default.t5");
  check_non_negative(params_.default_body, "default.body");
  for (const auto& [name, op] : params_.ops) {
    for (const auto* value : {&op.t2, &op.t3, &op.t5}) {
      if (*value) check_non_negative(**value, fmt::format("ops[{}]", name));
    }
  }
}

const OpHostOverheads* HostOverheadCpuCost::find(std::string_view op_name) const {
  const auto it = params_.ops.find(op_name);
  return it == params_.ops.end() ? nullptr : &it->second;
}

Duration HostOverheadCpuCost::host_duration(const HostOpDesc& op) const {
  static constexpr OpHostOverheads kNoEntry{};
  const OpHostOverheads* found = find(op.op_name);
  const OpHostOverheads& entry = found != nullptr ? *found : kNoEntry;
  switch (op.phase) {
    case HostPhase::kOpBegin:
      return params_.t1 + op_value(entry.t2, params_.default_t2);
    case HostPhase::kLaunch:
      return op.launch_index == 0 ? params_.t4
                                  : params_.t4 + op_value(entry.t5, params_.default_t5);
    case HostPhase::kOpEnd:
      return op_value(entry.t3, params_.default_t3);
    case HostPhase::kOpBody:
      return params_.t1 + op_value(entry.t5, params_.default_body);
    case HostPhase::kMarker:
      return Duration::zero();
    case HostPhase::kGraphLaunch:
      // One runtime call, as a first kernel launch: the seed method's T4. ASSUMPTION: a graph
      // launch costs the host what one cudaLaunchKernel does, whatever the graph holds (the
      // point of CUDA graphs: "a single CPU operation" for the whole graph, CUDA C++
      // Programming Guide, "CUDA Graphs"); no measured cudaGraphLaunch time is at hand.
      return params_.t4;
  }
  return Duration::zero();
}

namespace {

/// A host overhead: 0 .. 1 s (measured ones are microseconds; a second per op is a unit slip).
Duration non_negative_duration(const ConfigNode& node, std::string_view key) {
  return node.get_duration_in(key, Duration::zero(), kMaxConfiguredLatency);
}

std::optional<Duration> optional_duration(const ConfigNode& node, std::string_view key) {
  if (!node.has(key)) return std::nullopt;
  return non_negative_duration(node, key);
}

}  // namespace

HostOverheadCpuCost load_host_overheads(const ConfigNode& node) {
  node.expect_map("host overheads T1-T5, as `upsim calibrate host-overheads` writes them");
  HostOverheads params;
  params.t1 = non_negative_duration(node, "t1");
  params.t4 = non_negative_duration(node, "t4");
  const ConfigNode defaults = node.child("default");
  params.default_t2 = non_negative_duration(defaults, "t2");
  params.default_t3 = non_negative_duration(defaults, "t3");
  params.default_t5 = non_negative_duration(defaults, "t5");
  params.default_body = non_negative_duration(defaults, "body");
  if (const std::optional<ConfigNode> ops = node.optional_child("ops")) {
    if (!ops->is_map() && !ops->is_null()) ops->fail("must be a map from op name to overheads");
    for (const auto& [name, entry] : ops->map_entries()) {
      if (!entry.is_map()) entry.fail("must be a map with any of t2, t3, t5");
      OpHostOverheads op;
      op.t2 = optional_duration(entry, "t2");
      op.t3 = optional_duration(entry, "t3");
      op.t5 = optional_duration(entry, "t5");
      params.ops.emplace(name, op);
    }
  }
  return HostOverheadCpuCost(std::move(params));
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> host_overhead_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"t1", "T1: gap between two consecutive ops on the host"},
      {"t4", "T4: one kernel launch call"},
      {"default.t2", "T2 of an op not listed: op start to its first launch"},
      {"default.t3", "T3 of an op not listed: end of its last launch to the op's end"},
      {"default.t5", "T5 of an op not listed: gap between two of its launches"},
      {"default.body", "host time of an op not listed that launches nothing"},
      {"ops.*.t2", "T2 of this op: its start to its first launch"},
      {"ops.*.t3", "T3 of this op: end of its last launch to its end"},
      {"ops.*.t5", "T5 of this op: gap between two launches, or its whole time without launches"},
  };
  return kMeanings;
}

}  // namespace upsim
