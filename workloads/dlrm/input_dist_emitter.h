// One DLRM rank's part of TorchRec's input distribution (InputDistEmitter, input_dist:
// all_to_all): per sharding type the permute or bucketize of the local batch's features, the
// splits all-to-all and its read-back on the host, the lengths and indices all-to-alls, and the
// reorder (recat) of what arrived before the lookups. The sizes are input_dist.h's.
//
// The three steps follow torchrec/distributed/dist_data.py and train_pipelines.py:
//  - start: ShardedEmbeddingBagCollection.input_dist. Per KJTAllToAll the features are permuted
//    or bucketized, the split sizes are built on the host and copied to the device
//    (torch.tensor(splits, device=...): a blocking copy from pageable memory), stacked and
//    exchanged (SplitsAllToAllAwaitable). TrainPipelineSparseDist fuses the splits of every
//    sharding type into one all-to-all (FusedKJTListSplitsAwaitable).
//  - send_tensors: the splits awaitable's wait. The stream waits for the splits all-to-all, its
//    output is read on the host (.tolist(): a device-to-host copy and a host sync), and one
//    all_to_all_single per tensor label (lengths, then values) is launched.
//  - finish: the tensors awaitable's wait, then KeyedJaggedTensor.dist_init reorders the
//    received lengths and values from rank-major to feature-major (permute_2D_sparse_data with
//    the recat); the compute stream then waits for the stream that ran it.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/dlrm/collective_groups.h"
#include "workloads/dlrm/input_dist.h"
#include "workloads/dlrm/rank_ops.h"

namespace upsim::dlrm_emit {

class InputDistEmitter {
 public:
  /// Comm-stream events of one batch's input distribution in flight.
  struct Pending {
    std::vector<TaskId> splits;   ///< one per splits all-to-all
    std::vector<TaskId> tensors;  ///< the last all-to-all of each KJTAllToAll
  };

  /// `kjts` (kjt_all_to_alls) must outlive the emitter; `index` is this rank's position in its
  /// sharding group (its rank without embeddings.two_d).
  InputDistEmitter(RankOps& ops, const std::vector<KjtAllToAll>& kjts, uint32_t index);

  /// Whether the run distributes its inputs (input_dist: all_to_all on more than one rank).
  bool active() const { return !kjts_.empty(); }

  /// The permutes and the splits all-to-all(s) of `groups`, on `stream` (kComputeStream, or
  /// kDataDistStream after waiting for the batch's copy on kDataStream). start, send_tensors and
  /// finish need active().
  Pending start(const InputDistGroups& groups, uint16_t stream);

  /// For each KJTAllToAll: `stream` waits for its splits all-to-all, the host reads the splits
  /// back, and the lengths and values all-to-alls are launched after `stream`'s work.
  void send_tensors(const InputDistGroups& groups, Pending& pending, uint16_t stream);

  /// `stream` waits for the tensors' all-to-alls and reorders what arrived; then the compute
  /// stream waits for `stream`.
  void finish(const Pending& pending, uint16_t stream);

 private:
  RankOps& ops_;
  const std::vector<KjtAllToAll>& kjts_;
  uint32_t index_;
};

}  // namespace upsim::dlrm_emit
