// The input batch of one DLRM rank's step (BatchInputEmitter): the DataLoader's fetch and the
// host-to-device copies of the dense features, the lookups' offsets and indices and (prefetch)
// the targets, blocking on the compute stream or the prefetcher's on the data stream, and the
// compute stream's wait for a prefetched batch.
#pragma once

#include <cstdint>
#include <string_view>

#include "workloads/dlrm/rank_ops.h"
#include "workloads/dlrm/rank_plan.h"

namespace upsim::dlrm_emit {

class BatchInputEmitter {
 public:
  BatchInputEmitter(RankOps& ops, const RankPlan& plan);

  /// The batch's host-to-device copies; training fetches it from the DataLoader first (a served
  /// batch arrives without one).
  void load_batch();

  /// input: prefetch: torch.cuda.Stream.wait_stream, the compute stream waits for the data
  /// stream's copies.
  void wait_for_prefetched_batch();

  /// A CUDA graph's inputs are fixed tensors: the batch just copied to the device is copied
  /// into them (static_numerical.copy_, static_categorical.copy_: device-to-device copies on the
  /// compute stream; in training the targets too) before the replay (DeepLearningExamples' DLRM
  /// main.py, inference_benchmark_graphed and CudaGraphWrapper._copy_input_data).
  void copy_into_static_inputs();

 private:
  /// Bytes of the batch's input tensors on this rank: the dense features (fp32), the lookups'
  /// offsets and indices.
  struct InputSizes {
    int64_t dense_bytes = 0;
    int64_t offsets_bytes = 0;
    int64_t indices_bytes = 0;
  };
  InputSizes input_sizes() const;

  /// A copy of one input tensor: blocking (the host waits for it on the compute stream), or the
  /// prefetcher's on the data stream, whose pageable source holds the host until it is staged
  /// (CUDA's cudaMemcpyAsync from pageable memory returns once the data is staged; the staging
  /// is priced as the copy).
  void input_copy(std::string_view copy_name, int64_t bytes);

  RankOps& ops_;
  const DlrmConfig& config_;
  const RankPlan& plan_;
};

}  // namespace upsim::dlrm_emit
