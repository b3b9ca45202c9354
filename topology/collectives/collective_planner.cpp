#include "topology/collectives/collective_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "topology/collectives/algorithm.h"
#include "topology/collectives/collective_layout.h"

namespace upsim {

using collectives::kNone;

namespace {

CollectiveTuning validated(CollectiveTuning tuning) {
  validate_tuning(tuning);
  return tuning;
}

/// The algorithms that may serve `kind` (`only`: just that one, when it may).
std::vector<CollectiveAlgorithm> algorithms_for(CollectiveKind kind,
                                                std::optional<CollectiveAlgorithm> only,
                                                const CollectiveTuning& tuning) {
  std::vector<CollectiveAlgorithm> algorithms;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (only && *only != CollectiveAlgorithm::kDirect) {
        algorithms = {*only};
      } else {
        algorithms = tuning.all_reduce_algorithms;
      }
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kBroadcast:
      algorithms = {CollectiveAlgorithm::kRing};
      break;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      algorithms = {CollectiveAlgorithm::kDirect};
      break;
  }
  if (only && std::find(algorithms.begin(), algorithms.end(), *only) == algorithms.end()) {
    throw std::invalid_argument(fmt::format("{}: algorithm {} does not apply",
                                            collective_kind_name(kind),
                                            collective_algorithm_name(*only)));
  }
  return algorithms;
}

}  // namespace

struct CollectivePlanner::Candidate {
  CollectiveChoice choice;
  const collectives::FlowStructure* structure = nullptr;
  double scale = 0.0;  // payload bytes of flow f = structure->unit_bytes[f] x scale
};

CollectivePlanner::CollectivePlanner(const Fabric& fabric, CollectiveTuning tuning)
    : fabric_(fabric), tuning_(validated(std::move(tuning))), paths_(fabric_, tuning_) {}

CollectivePlanner::~CollectivePlanner() = default;

void CollectivePlanner::check(const CollectiveDesc& c) const {
  const std::string_view kind = collective_kind_name(c.kind);
  const size_t gpus = fabric_.gpus().size();
  if (c.members.empty()) {
    throw std::invalid_argument(fmt::format("{}: the collective has no members", kind));
  }
  std::vector<bool> seen(gpus, false);
  for (RankId r : c.members) {
    if (r >= gpus) {
      throw std::invalid_argument(fmt::format(
          "{}: member rank {} is not a GPU of fabric `{}`, which has {} GPUs (ranks 0..{})", kind,
          r, fabric_.name(), gpus, gpus - 1));
    }
    if (seen[r]) {
      throw std::invalid_argument(fmt::format("{}: member rank {} appears twice", kind, r));
    }
    seen[r] = true;
  }
  if (c.bytes < 0) {
    throw std::invalid_argument(fmt::format("{}: negative size {}", kind, c.bytes));
  }
  if (c.kind == CollectiveKind::kAllToAll) {
    // AllToAllSizes rejects negative sizes when it is built.
    const size_t n = c.members.size();
    if (!c.send_bytes.empty() && c.send_bytes.members() != n) {
      throw std::invalid_argument(fmt::format("{}: send_bytes are over {} members, expected n = {}",
                                              kind, c.send_bytes.members(), n));
    }
  }
  if (c.kind == CollectiveKind::kSendRecv && c.members.size() != 2) {
    throw std::invalid_argument(fmt::format(
        "{}: needs exactly two members (sender, receiver), got {}", kind, c.members.size()));
  }
}

collectives::CollectiveLayout& CollectivePlanner::layout(const std::vector<RankId>& members) {
  auto found = layouts_.find(members);
  if (found != layouts_.end()) return *found->second;
  return *layouts_.emplace(members, collectives::build_layout(members, paths_, tuning_))
              .first->second;
}

std::vector<std::vector<uint32_t>> CollectivePlanner::ring_cycles(
    const std::vector<RankId>& members) {
  return layout(members).cycles.front();
}

std::vector<CollectivePlanner::Candidate> CollectivePlanner::build(
    const CollectiveDesc& c, collectives::CollectiveLayout& lay,
    std::optional<CollectiveAlgorithm> only) {
  const Duration launch = tuning_.launch_overhead;
  std::vector<Candidate> out;
  for (CollectiveAlgorithm a : algorithms_for(c.kind, only, tuning_)) {
    const collectives::Algorithm& algorithm = collectives::collective_algorithm(a);
    if (const std::string why = algorithm.unavailable(lay); !why.empty()) {
      if (only) {
        throw std::invalid_argument(fmt::format("{}: algorithm {} does not apply: {}",
                                                collective_kind_name(c.kind),
                                                collective_algorithm_name(a), why));
      }
      continue;
    }
    const collectives::BuiltStructure built = algorithm.structure(c, lay, paths_, tuning_);
    const collectives::FlowStructure* s = built.structure;
    // All-to-all structures carry bytes already.
    const double scale = built.per_byte ? static_cast<double>(c.bytes) : 1.0;
    const double unit_link_seconds = s->unit_link_seconds;
    const double unit_source_bytes = s->unit_source_bytes;

    for (CollectiveProtocol proto : tuning_.enabled_protocols) {
      if (!algorithm.runs(proto)) continue;
      const ProtocolTuning& pt = tuning_.protocol(proto);
      const collectives::LatencyTerms terms{tuning_, lay, proto};
      Duration lat = algorithm.latency(c.kind, terms);
      // Bytes move at the fraction of the modelled rate the algorithm reaches at this size.
      const double bytes_scale = scale / algorithm.rate_fraction(c.kind, proto, c.bytes);
      double seconds = bytes_scale * unit_link_seconds * pt.wire_factor;
      const double cap = lay.injection_cap[static_cast<size_t>(proto)].bytes_per_second();
      if (cap > 0.0) seconds = std::max(seconds, bytes_scale * unit_source_bytes / cap);
      // Until the algorithm's pipeline is full, its bytes cost their transfer time twice.
      if (const double fill = algorithm.pipeline_fill_bytes(lay); fill > 0.0) {
        lat += Duration::from_seconds_f(std::min(scale, fill) * unit_link_seconds * pt.wire_factor);
      }
      Candidate cand;
      cand.choice.algorithm = a;
      cand.choice.protocol = proto;
      cand.choice.latency = launch + lat;
      cand.choice.predicted = cand.choice.latency + Duration::from_seconds_f(seconds);
      cand.structure = s;
      cand.scale = bytes_scale;
      out.push_back(std::move(cand));
    }
  }
  return out;
}

std::vector<CollectiveChoice> CollectivePlanner::candidates(const CollectiveDesc& collective) {
  check(collective);
  collectives::CollectiveLayout& lay = layout(collective.members);
  std::vector<CollectiveChoice> out;
  for (const Candidate& c : build(collective, lay, std::nullopt))
    out.push_back(c.choice);
  return out;
}

CollectivePlan CollectivePlanner::plan(const CollectiveDesc& collective) {
  return plan_impl(collective, std::nullopt, std::nullopt);
}

CollectivePlan CollectivePlanner::plan(const CollectiveDesc& collective,
                                       CollectiveAlgorithm algorithm, CollectiveProtocol protocol) {
  return plan_impl(collective, algorithm, protocol);
}

CollectivePlan CollectivePlanner::plan_impl(const CollectiveDesc& collective,
                                            std::optional<CollectiveAlgorithm> algorithm,
                                            std::optional<CollectiveProtocol> protocol) {
  check(collective);
  CollectivePlan plan;
  bool moves = collective.bytes > 0;
  if (collective.kind == CollectiveKind::kAllToAll && !collective.send_bytes.empty())
    moves = collective.send_bytes.moves_bytes();
  // NCCL returns at once for a group of one or an empty buffer.
  if (collective.members.size() < 2 || !moves) {
    plan.choice.algorithm =
        collective.kind == CollectiveKind::kAllToAll || collective.kind == CollectiveKind::kSendRecv
            ? CollectiveAlgorithm::kDirect
            : CollectiveAlgorithm::kRing;
    plan.choice.latency = Duration::zero();
    plan.choice.predicted = Duration::zero();
    return plan;
  }
  collectives::CollectiveLayout& lay = layout(collective.members);
  std::vector<Candidate> cands = build(collective, lay, algorithm);
  const Candidate* best = nullptr;
  for (const Candidate& c : cands) {
    if (protocol && c.choice.protocol != *protocol) continue;
    if (best == nullptr || c.choice.predicted < best->choice.predicted) best = &c;
  }
  if (best == nullptr) {
    throw std::invalid_argument(
        fmt::format("{}: no candidate for algorithm {} with protocol {} (is the protocol enabled?)",
                    collective_kind_name(collective.kind),
                    algorithm ? collective_algorithm_name(*algorithm) : "any",
                    protocol ? collective_protocol_name(*protocol) : "any"));
  }
  plan.choice = best->choice;

  // Materialise the flows: wire bytes, and one injection-cap virtual link per sending member.
  const collectives::FlowStructure& s = *best->structure;
  const ProtocolTuning& pt = tuning_.protocol(best->choice.protocol);
  const Bandwidth cap = lay.injection_cap[static_cast<size_t>(best->choice.protocol)];
  const bool capped = cap.bytes_per_second() > 0.0;
  const auto fabric_links = static_cast<uint32_t>(paths_.link_capacity().size());
  std::vector<uint32_t> cap_link(collective.members.size(), kNone);
  const double scale = best->scale;
  FlowBatch& batch = plan.flows;
  batch.links.reserve(s.links.size() + (capped ? s.unit_bytes.size() : 0));
  batch.bytes.reserve(s.unit_bytes.size());
  batch.offsets.reserve(s.unit_bytes.size() + 1);
  for (size_t f = 0; f < s.unit_bytes.size(); ++f) {
    const double payload = s.unit_bytes[f] * scale;
    if (payload <= 0.0) continue;
    batch.links.insert(batch.links.end(), s.links.begin() + s.offsets[f],
                       s.links.begin() + s.offsets[f + 1]);
    if (capped && s.source[f] != kNone) {
      uint32_t& v = cap_link[s.source[f]];
      if (v == kNone) {
        v = fabric_links + static_cast<uint32_t>(batch.virtual_capacities.size());
        batch.virtual_capacities.push_back(cap * pt.wire_factor);
      }
      batch.links.push_back(v);
    }
    batch.offsets.push_back(static_cast<uint32_t>(batch.links.size()));
    batch.bytes.push_back(payload * pt.wire_factor);
  }
  return plan;
}

}  // namespace upsim
