// HostOverheadCpuCost: the seed method's host overheads T1-T5 (Lin et al., TPDS 2024) as a
// CpuCostModel.
//
//   T1  gap between two consecutive ops (global)
//   T2  op start -> its first launch (per op name)
//   T3  end of its last launch -> op end (per op name)
//   T4  one launch call (global)
//   T5  gap between two launches of one op; for an op that launches nothing, its whole host
//       time (per op name; the seed stores both meanings under T5)
//
// Phases (HostPhase, sim/cost_models.h):
//   kOpBegin = T1 + T2[op]
//   kLaunch  = T4, + T5[op] when launch_index > 0
//   kOpEnd   = T3[op]
//   kOpBody  = T1 + T5[op]
//   kMarker  = 0
//   kGraphLaunch = T4 (one cudaGraphLaunch, however many GPU tasks it replays; an ASSUMPTION,
//                  no measured graph-launch time)
//
// Contract: an op missing from the table, or an entry without the value asked for, takes the
// defaults: default.t2 / default.t3, default.t5 for the gap between launches, and default.body
// for the T5 of an op without launches (the two T5 meanings have different measured means, so
// they get separate defaults). Pure and const; all values are >= 0.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/cost_models.h"

namespace upsim {

/// Parameters of HostOverheadCpuCost: HostOverheads (sim/cost_models.h).
/// configs/host/v100_pytorch_kineto.yaml gives measured values and their source.
class HostOverheadCpuCost final : public CpuCostModel {
 public:
  /// Throws std::invalid_argument when any value is negative.
  explicit HostOverheadCpuCost(HostOverheads params);

  Duration host_duration(const HostOpDesc& op) const override;

  const HostOverheads& params() const { return params_; }

 private:
  const OpHostOverheads* find(std::string_view op_name) const;

  HostOverheads params_;
};

/// Reads a host-overhead document (schema in configs/host/v100_pytorch_kineto.yaml):
///   t1, t4, default.{t2, t3, t5, body}, ops: {"<op name>": {t2, t3, t5 (each optional)}}.
/// Every value is a duration with a unit; negative values are ConfigErrors.
HostOverheadCpuCost load_host_overheads(const ConfigNode& node);

/// What each key of a host-overhead file means, one line each (sim/config/key_meaning.h).
std::span<const KeyMeaning> host_overhead_key_meanings();

}  // namespace upsim
