// The rank layout of a transformer run: global rank <-> (tp, cp, dp, pp) coordinates under
// `parallelism.order`, and the groups a rank belongs to (tensor, context, data, pipeline, the
// expert groups of Megatron-Core's expert rank layout, and the gradient-reduction groups).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// Coordinates of a global rank.
struct ParallelCoords {
  int64_t tp = 0;
  int64_t cp = 0;
  int64_t dp = 0;
  int64_t pp = 0;
};

/// Global rank <-> coordinates under `parallelism.order`.
class ParallelLayout {
 public:
  explicit ParallelLayout(const ParallelismConfig& p);
  int64_t size(ParallelDim dim) const;
  int64_t gpus() const { return gpus_; }
  ParallelCoords coords(int64_t rank) const;
  int64_t rank(const ParallelCoords& c) const;
  /// The members of `rank`'s group along `dim` (kExpert: its group in the expert rank layout),
  /// in group order.
  std::vector<int64_t> group(ParallelDim dim, int64_t rank) const;
  /// The ranks holding the same dense parameters as `rank`, which reduce their gradients
  /// together: every data- and context-parallel index at its tensor index and stage
  /// (Megatron-Core's dp-cp group, get_data_parallel_group(with_context_parallel=True)), in
  /// rank order.
  std::vector<int64_t> replica_group(int64_t rank) const;
  /// The ranks holding the same routed experts as `rank`, which reduce the experts' gradients
  /// together when expert > 1: its expert data-parallel group in the expert rank layout
  /// (Megatron-Core's expert_data_parallel group, data x context / expert ranks), in rank order.
  std::vector<int64_t> expert_replica_group(int64_t rank) const;

 private:
  ParallelismConfig parallel_;
  int64_t gpus_ = 1;
  /// Stride of each axis in the global rank, dense layout (kExpert's unused).
  std::array<int64_t, kLayoutDimCount> stride_{};
  /// Strides of the ep and dp axes in the expert layout.
  int64_t expert_stride_ = 1;
  int64_t expert_data_stride_ = 1;
};

}  // namespace upsim
