#include "workloads/transformer/process_groups.h"

#include <fmt/format.h>

#include <stdexcept>

namespace upsim {

uint32_t ProcessGroups::group(ParallelDim dim, const std::vector<int64_t>& members,
                              std::string_view channel, std::string_view name) {
  if (name.empty()) name = parallel_dim_name(dim);
  std::vector<RankId> m(members.begin(), members.end());
  auto key = std::make_pair(fmt::format("{}/{}", name, channel), m);
  auto found = index_.find(key);
  if (found != index_.end()) return found->second;
  Group g{std::string(name), dim, m, 0, {}};
  for (int64_t r : members) {
    if (in_graph_(r)) ++g.simulated;
  }
  groups_.push_back(std::move(g));
  const auto id = static_cast<uint32_t>(groups_.size() - 1);
  index_.emplace(std::move(key), id);
  return id;
}

CollectiveId ProcessGroups::call(uint32_t pg, CollectiveKind kind, int64_t bytes,
                                 std::string_view name, std::vector<int64_t> send_bytes,
                                 int32_t sms) {
  if (calls_made_.size() < groups_.size()) calls_made_.resize(groups_.size(), 0);
  Group& group = groups_[pg];
  const uint32_t k = calls_made_[pg]++;
  if (k < group.calls.size()) {
    const CollectiveDesc& existing = graph_.collective(group.calls[k]);
    if (existing.kind != kind || existing.bytes != bytes) {
      throw std::logic_error(fmt::format(
          "transformer generator: call {} on {} group is {} of {} B on one rank and {} of {} B "
          "on another",
          k, group.dim, collective_kind_name(existing.kind), existing.bytes,
          collective_kind_name(kind), bytes));
    }
    return group.calls[k];
  }
  // All-to-all sizes over the group (n x n row-major); small EP and CP groups, so dense.
  CollectiveDesc desc{kind, group.members, bytes,
                      send_bytes.empty()
                          ? AllToAllSizes{}
                          : AllToAllSizes::dense(group.members.size(), std::move(send_bytes))};
  desc.simulated_members = group.simulated == group.members.size() ? 0 : group.simulated;
  desc.parallel_dim = group.parallel_dim;
  desc.sms = sms;
  // Only Transformer Engine's userbuffers state SMs here; its GEMMs leave them free.
  desc.gemm_sm_margin = sms > 0;
  const CollectiveId id =
      graph_.add_collective_group(std::move(desc), fmt::format("{}:{}", group.dim, name));
  group.calls.push_back(id);
  return id;
}

}  // namespace upsim
