#include "workloads/trace/cross_rank_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "sim/formats/parse_error.h"

namespace upsim {

std::vector<uint32_t> job_collective_members(const std::vector<int64_t>& recorded_ranks,
                                             int64_t group_size, uint32_t rank, uint32_t world,
                                             bool& assumed_world) {
  assumed_world = false;
  std::vector<uint32_t> out;
  if (!recorded_ranks.empty()) {
    for (const int64_t r : recorded_ranks) {
      if (r < 0 || r >= static_cast<int64_t>(world)) return {};
      out.push_back(static_cast<uint32_t>(r));
    }
  } else if (group_size <= 0 || group_size == static_cast<int64_t>(world)) {
    assumed_world = group_size <= 0;
    for (uint32_t r = 0; r < world; ++r)
      out.push_back(r);
  }
  if (std::find(out.begin(), out.end(), rank) == out.end()) return {};
  return out;
}

}  // namespace upsim

namespace upsim::trace_build {

namespace {

std::string join(const std::vector<size_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  return out;
}

/// An NCCL kernel of a group: its rank and its index in that rank's RankTimeline::nccl.
struct Member {
  size_t rank;
  size_t index;
};

/// Whether every NCCL kernel of every rank has a key; if one has none, every kernel's key becomes
/// its position on its rank ("#k").
bool key_kernels(std::vector<RankTimeline>& timelines) {
  bool keyed = true;
  for (const RankTimeline& timeline : timelines) {
    for (const NcclKernel& n : timeline.nccl)
      keyed &= !n.key.empty();
  }
  for (RankTimeline& timeline : timelines) {
    auto& kernels = timeline.nccl;
    for (size_t i = 0; i < kernels.size(); ++i) {
      if (!keyed) kernels[i].key = fmt::format("#{}", i);
    }
  }
  return keyed;
}

/// The NCCL kernels of every rank by key, the keys in the order of their first appearance.
struct KernelGroups {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<Member>> members;
};

KernelGroups group_kernels(const std::vector<RankTimeline>& timelines) {
  KernelGroups out;
  std::vector<std::string>& group_keys = out.keys;
  std::map<std::string, std::vector<Member>>& groups = out.members;
  for (size_t r = 0; r < timelines.size(); ++r) {
    const auto& kernels = timelines[r].nccl;
    for (size_t i = 0; i < kernels.size(); ++i) {
      auto [it, inserted] = groups.try_emplace(kernels[i].key);
      if (inserted) group_keys.push_back(kernels[i].key);
      it->second.push_back(Member{r, i});
    }
  }
  return out;
}

/// Throws ParseError naming a trace without a kernel of group `key` (`members`) when there are
/// several traces and the group is neither in every trace nor its whole process group.
void check_group_in_every_trace(const std::vector<RankTrace>& traces,
                                const std::vector<RankTimeline>& timelines, const std::string& key,
                                const std::vector<Member>& members, bool keyed) {
  const NcclKernel& first = timelines[members.front().rank].nccl[members.front().index];
  std::vector<size_t> present;
  for (const Member& m : members)
    present.push_back(m.rank);
  const bool whole_group =
      first.pg_size > 0 && static_cast<size_t>(first.pg_size) == members.size();
  if (timelines.size() > 1 && members.size() != timelines.size() && !whole_group) {
    std::vector<size_t> missing;
    for (size_t r = 0; r < timelines.size(); ++r) {
      if (std::find(present.begin(), present.end(), r) == present.end()) missing.push_back(r);
    }
    const size_t blame = missing.empty() ? members.front().rank : missing.front();
    throw ParseError(
        traces[blame].kineto.file,
        "collective `" + first.op_name + "` (" +
            (keyed ? "process group " + first.pg + ", sequence number " + std::to_string(first.seq)
                   : "NCCL kernel " + key) +
            ") is in the traces of ranks " + join(present) + " but not of ranks " + join(missing) +
            ": the traces do not belong to one run");
  }
}

/// The all-to-all sizes of group `members` over `n` GPUs, `over_job` when the group spans the
/// larger job (its GPUs mirroring the traced rank).
AllToAllSizes all_to_all_sizes(const std::vector<RankTimeline>& timelines,
                               const std::vector<Member>& members, size_t n, bool over_job) {
  std::vector<int64_t> sizes(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    // Mirrored members send as the traced rank does (its split rotated to their position).
    const Member& m = members[over_job ? 0 : i];
    const NcclKernel& k = timelines[m.rank].nccl[m.index];
    for (size_t j = 0; j < n; ++j) {
      sizes[i * n + j] = k.send_bytes.size() == n
                             ? k.send_bytes[(j + n - i) % n]
                             : std::max<int64_t>(0, k.bytes) / static_cast<int64_t>(n);
      if (!over_job && k.send_bytes.size() == n) sizes[i * n + j] = k.send_bytes[j];
    }
  }
  return AllToAllSizes::dense(n, std::move(sizes));
}

}  // namespace

RankCollectives add_cross_rank_collectives(const std::vector<RankTrace>& traces,
                                           std::vector<RankTimeline>& timelines,
                                           const std::vector<RankId>& device, bool partial_job,
                                           const TraceGraphOptions& options, TaskGraph& graph) {
  // Collectives across ranks.
  const bool keyed = key_kernels(timelines);
  const KernelGroups kernel_groups = group_kernels(timelines);
  std::vector<uint64_t> job_collectives(timelines.size(), 0);
  std::vector<uint64_t> world_assumed(timelines.size(), 0);
  uint32_t groups_added = 0;
  std::vector<std::vector<CollectiveId>> collective_of(timelines.size());
  std::vector<std::vector<int64_t>> collective_ps(timelines.size());
  std::vector<std::vector<uint8_t>> collective_alone(timelines.size());
  for (size_t r = 0; r < timelines.size(); ++r) {
    collective_of[r].assign(timelines[r].nccl.size(), 0);
    collective_ps[r].assign(timelines[r].nccl.size(), 0);
    collective_alone[r].assign(timelines[r].nccl.size(), 0);
  }
  for (const std::string& key : kernel_groups.keys) {
    const std::vector<Member>& members = kernel_groups.members.at(key);
    const NcclKernel& first = timelines[members.front().rank].nccl[members.front().index];
    check_group_in_every_trace(traces, timelines, key, members, keyed);
    CollectiveDesc desc;
    desc.kind = first.kind.value_or(CollectiveKind::kAllReduce);
    int64_t duration = INT64_MAX;
    for (const Member& m : members) {
      desc.members.push_back(device[m.rank]);
      const NcclKernel& n = timelines[m.rank].nccl[m.index];
      duration = std::min(duration, traces[m.rank].kineto.events[n.gpu].dur_ps);
      desc.bytes = std::max(desc.bytes, n.bytes);
    }
    // One trace of a larger job: the group's GPUs, the traced rank first, mirrored by the others.
    bool over_job = false;
    if (partial_job) {
      bool assumed_world = false;
      const std::vector<uint32_t> gpus = job_collective_members(
          first.pg_ranks, first.pg_size, device[0], options.job_world_size, assumed_world);
      if (gpus.size() > 1) {
        over_job = true;
        desc.members = {device[0]};
        for (const uint32_t g : gpus) {
          if (g != device[0]) desc.members.push_back(g);
        }
        desc.simulated_members = 1;
        ++job_collectives[0];
        if (assumed_world) ++world_assumed[0];
      }
    }
    // A send / receive among more than two GPUs is a grouped exchange: PyTorch runs
    // all_to_all(_single) on NCCL as ncclSend / ncclRecv to every peer inside one
    // ncclGroupStart / ncclGroupEnd (ProcessGroupNCCL::alltoall_base, torch::cuda::nccl::
    // all2all_single_equal_split), one SendRecv kernel per rank: priced as the all-to-all it is.
    if (desc.kind == CollectiveKind::kSendRecv && desc.members.size() > 2) {
      desc.kind = CollectiveKind::kAllToAll;
    }
    if (desc.kind == CollectiveKind::kAllToAll) {
      desc.send_bytes = all_to_all_sizes(timelines, members, desc.members.size(), over_job);
    }
    const CollectiveId id = graph.add_collective_group(desc, first.op_name + " " + key);
    ++groups_added;
    for (const Member& m : members) {
      collective_of[m.rank][m.index] = id;
      collective_ps[m.rank][m.index] = duration;
      collective_alone[m.rank][m.index] = desc.members.size() == 1 ? 1 : 0;
    }
  }
  RankCollectives out;
  out.of = std::move(collective_of);
  out.ps = std::move(collective_ps);
  out.alone = std::move(collective_alone);
  out.over_job = std::move(job_collectives);
  out.world_assumed = std::move(world_assumed);
  out.groups = groups_added;
  return out;
}

}  // namespace upsim::trace_build
