// Gradient buckets of PyTorch DistributedDataParallel (DDP).
//
// Contract: assign_ddp_buckets reproduces PyTorch's `compute_bucket_assignment_by_size`
// (torch/csrc/distributed/c10d/reducer.cpp) for dense gradients of one dtype, as used when DDP
// rebuilds its buckets after the first iteration, in the order gradients became ready:
//  - parameters are visited in the given (ready) order and appended to the open bucket;
//  - a bucket closes as soon as its bytes reach or pass its limit (the parameter that crosses
//    the limit stays in it, so a bucket may exceed the limit);
//  - the first bucket's limit is `first_bucket_bytes` (PyTorch `dist._DEFAULT_FIRST_BUCKET_BYTES`
//    = 1 MiB, reducer.hpp `kDefaultFirstBucketBytes`), every later one `bucket_bytes`
//    (`bucket_cap_mb`, default 25 MiB);
//  - the bucket still open at the end is the last bucket.
// Steady-state iterations all-reduce the buckets in this order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace upsim::pytorch {

struct DdpBucket {
  /// Indices into the parameter list given to assign_ddp_buckets, in ready order.
  std::vector<uint32_t> params;
  /// Sum of the parameters' gradient bytes: the all-reduce payload.
  int64_t bytes = 0;
};

/// PyTorch's default DDP bucket capacity: `bucket_cap_mb=25`, i.e. 25 * 1024 * 1024 bytes
/// (torch/nn/parallel/distributed.py `bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)`).
inline constexpr int64_t kDefaultDdpBucketBytes = 25 * 1024 * 1024;
/// PyTorch's default first-bucket limit (reducer.hpp `kDefaultFirstBucketBytes`).
inline constexpr int64_t kDefaultDdpFirstBucketBytes = 1024 * 1024;

/// `param_bytes` in gradient-ready order; both limits must be positive (std::invalid_argument).
std::vector<DdpBucket> assign_ddp_buckets(std::span<const int64_t> param_bytes,
                                          int64_t first_bucket_bytes, int64_t bucket_bytes);

}  // namespace upsim::pytorch
