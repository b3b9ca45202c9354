#include "sim/export/kineto_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <string_view>

#include "sim/parallel_dim.h"

namespace upsim {

namespace {

/// `values` as c10d writes a list into the metadata: "[0, 1, 2]".
template <typename Values>
std::string bracketed(const Values& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    fmt::format_to(std::back_inserter(out), "{}", values[i]);
  }
  out += ']';
  return out;
}

std::vector<RankId> sorted_members(const CollectiveDesc& c) {
  std::vector<RankId> members = c.members;
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  return members;
}

/// The position of `device` in `members` (group order), or members.size().
size_t position_of(const std::vector<RankId>& members, RankId device) {
  return static_cast<size_t>(std::find(members.begin(), members.end(), device) - members.begin());
}

/// What member `self` (a position in group order) sends to and receives from each GPU of
/// `sorted` (the process group's order), when the all-to-all's sizes are stated.
struct Splits {
  std::vector<int64_t> in;
  std::vector<int64_t> out;
};

Splits all_to_all_splits(const CollectiveDesc& c, size_t self, const std::vector<RankId>& sorted) {
  Splits s;
  if (c.send_bytes.members() != c.members.size() || self >= c.members.size()) return s;
  for (const RankId peer : sorted) {
    const size_t j = position_of(c.members, peer);
    s.in.push_back(c.send_bytes.at(self, j));
    s.out.push_back(c.send_bytes.at(j, self));
  }
  return s;
}

}  // namespace

KinetoProcessGroups kineto_process_groups(const TaskGraph& graph, uint32_t world_size) {
  KinetoProcessGroups out;
  std::map<std::vector<RankId>, uint32_t> index;
  std::vector<uint32_t> count;
  out.group_of.resize(graph.collective_count());
  out.seq_of.resize(graph.collective_count());
  for (CollectiveId c = 0; c < graph.collective_count(); ++c) {
    const CollectiveDesc& desc = graph.collective(c);
    std::vector<RankId> members = sorted_members(desc);
    const auto [it, added] = index.emplace(members, static_cast<uint32_t>(out.ranks.size()));
    if (added) {
      const bool world = members.size() == world_size && world_size > 1;
      out.description.emplace_back(world ? std::string_view("default_pg")
                                   : desc.parallel_dim != ParallelDim::kOther
                                       ? parallel_dim_name(desc.parallel_dim)
                                       : std::string_view("undefined"));
      out.ranks.push_back(std::move(members));
      count.push_back(0);
    }
    out.group_of[c] = it->second;
    out.seq_of[c] = count[it->second]++;
  }
  return out;
}

std::string nccl_kernel_name(const CollectiveDesc& collective) {
  switch (collective.kind) {
    case CollectiveKind::kAllReduce:
      return "ncclDevKernel_AllReduce_Sum_u8_RING_LL";
    case CollectiveKind::kReduceScatter:
      return "ncclDevKernel_ReduceScatter_Sum_u8_RING_LL";
    case CollectiveKind::kAllGather:
      return "ncclDevKernel_AllGather_RING_LL";
    case CollectiveKind::kBroadcast:
      return "ncclDevKernel_Broadcast_RING_LL";
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      return "ncclDevKernel_SendRecv";
  }
  return "ncclDevKernel_SendRecv";
}

void append_collective_metadata(JsonMembers& args, const TaskGraph& graph, CollectiveId id,
                                RankId device, const KinetoProcessGroups& groups) {
  const CollectiveDesc& c = graph.collective(id);
  const std::vector<RankId>& sorted = groups.ranks[groups.group_of[id]];
  const size_t self = position_of(c.members, device);
  const auto n = static_cast<int64_t>(std::max<size_t>(1, c.members.size()));
  const bool pair = c.kind == CollectiveKind::kSendRecv && c.members.size() == 2;
  std::string_view name = "allreduce";
  int64_t in = c.bytes;
  int64_t out = c.bytes;
  Splits splits;
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      break;
    case CollectiveKind::kAllGather:
      name = "allgather";
      out = c.bytes * n;
      break;
    case CollectiveKind::kReduceScatter:
      name = "reduce_scatter";
      out = c.bytes / n;
      break;
    case CollectiveKind::kBroadcast:
      name = "broadcast";
      break;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      if (pair) {
        name = self == 0 ? "send" : "recv";
        break;
      }
      splits = all_to_all_splits(c, self, sorted);
      name = splits.in.empty() ? "all_to_all" : "all_to_allv";
      if (!splits.in.empty()) {
        in = c.send_bytes.sent_by(self);
        out = c.send_bytes.received_by(self);
      }
      break;
  }
  args.str("Collective name", name)
      .integer("In msg nelems", in)
      .integer("Out msg nelems", out)
      .integer("Group size", n)
      .str("dtype", "Byte");
  if (!splits.in.empty()) {
    args.str("In split size", bracketed(splits.in)).str("Out split size", bracketed(splits.out));
  }
  args.str("Process Group Name", fmt::format("{}", groups.group_of[id]))
      .str("Process Group Description", groups.description[groups.group_of[id]])
      .str("Process Group Ranks", bracketed(sorted))
      .uinteger("Seq", groups.seq_of[id]);
  if (pair) args.uinteger("Src Rank", c.members[0]).uinteger("Dst Rank", c.members[1]);
}

}  // namespace upsim
