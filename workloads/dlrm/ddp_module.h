// A data-parallel MLP under its own DDP wrapper during one iteration's backward (DdpModule):
// its gradient buckets, all-reduced on the comm stream as they fill, and the reducer's wait for
// those all-reduces at the end of the backward (finalize_ddp_backward).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/dlrm/rank_ops.h"

namespace upsim::dlrm_emit {

/// A data-parallel MLP under its own DDP wrapper, during one iteration's backward.
struct DdpModule {
  /// Input width, then the layer widths.
  const std::vector<int64_t>& widths;
  const std::vector<DdpBucket>& buckets;
  const std::vector<CollectiveId>& groups;
  /// Comm-stream events marking the end of this module's all-reduces so far.
  std::vector<TaskId> done_events;
  size_t next_bucket = 0;

  /// All-reduces every bucket whose gradients are all ready once `ready_params` parameters (in
  /// ready order) have their gradients; nothing with one rank (no DDP).
  void reduce_ready_buckets(RankOps& ops, size_t ready_params);
};

/// ddp.reducer::finalize_backward: the compute stream waits for `all_reduce_done`, the end
/// events of one module's all-reduces.
void finalize_ddp_backward(RankOps& ops, const std::vector<TaskId>& all_reduce_done);

}  // namespace upsim::dlrm_emit
