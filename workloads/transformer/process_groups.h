// The process groups of a transformer run and the collectives called on them.
//
// Contract: a group is identified by its parallel dimension's name (or a given one), a channel
// and its members; asking for it again returns the same id. The k-th call of every member on a
// group is one collective (NCCL matches collectives by order on a communicator): the first member
// to make it adds the collective group to the graph, named "<dim>:<op>" with the group's
// ParallelDim, and later members must make the same call (kind and bytes), else the generator
// has a bug (std::logic_error). Groups that span ranks left out of the graph (data-parallel
// mirroring) set CollectiveDesc::simulated_members to the members that are in it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/task_graph.h"

namespace upsim {

class ProcessGroups {
 public:
  /// `in_graph(global rank)`: whether that rank is simulated.
  ProcessGroups(TaskGraph& graph, std::function<bool(int64_t)> in_graph)
      : graph_(graph), in_graph_(std::move(in_graph)) {}

  /// The process group of `members` in parallel dimension `dim`, its collectives named
  /// "<name>:<op>" (`name`: the dimension's, parallel_dim_name, unless given); `channel` tells
  /// apart groups of the same members that order their calls independently (the two directions
  /// of pipeline p2p between two stages).
  uint32_t group(ParallelDim dim, const std::vector<int64_t>& members,
                 std::string_view channel = {}, std::string_view name = {});
  size_t size(uint32_t group) const { return groups_[group].members.size(); }

  /// A new rank starts calling: its call counts restart at zero.
  void begin_rank() { calls_made_.assign(groups_.size(), 0); }
  /// This rank's next call on `group` (all-to-all: `send_bytes`, n x n row-major); `sms`: the
  /// SMs its kernel holds per member (CollectiveDesc::sms; -1: the network's).
  CollectiveId call(uint32_t group, CollectiveKind kind, int64_t bytes, std::string_view name,
                    std::vector<int64_t> send_bytes = {}, int32_t sms = -1);

 private:
  struct Group {
    std::string dim;  ///< the prefix of its collectives' names: "tp", ..., "mp"
    ParallelDim parallel_dim = ParallelDim::kOther;
    std::vector<RankId> members;
    uint32_t simulated = 0;
    std::vector<CollectiveId> calls;
  };

  TaskGraph& graph_;
  std::function<bool(int64_t)> in_graph_;
  std::vector<Group> groups_;
  std::map<std::pair<std::string, std::vector<RankId>>, uint32_t> index_;
  std::vector<uint32_t> calls_made_;
};

}  // namespace upsim
