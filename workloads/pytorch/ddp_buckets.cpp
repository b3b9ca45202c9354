#include "workloads/pytorch/ddp_buckets.h"

#include <stdexcept>

namespace upsim::pytorch {

std::vector<DdpBucket> assign_ddp_buckets(std::span<const int64_t> param_bytes,
                                          int64_t first_bucket_bytes, int64_t bucket_bytes) {
  if (first_bucket_bytes <= 0 || bucket_bytes <= 0) {
    throw std::invalid_argument("DDP bucket limits must be positive");
  }
  std::vector<DdpBucket> buckets;
  DdpBucket open;
  int64_t limit = first_bucket_bytes;
  for (size_t i = 0; i < param_bytes.size(); ++i) {
    open.params.push_back(static_cast<uint32_t>(i));
    open.bytes += param_bytes[i];
    if (open.bytes >= limit) {
      buckets.push_back(std::move(open));
      open = DdpBucket{};
      limit = bucket_bytes;
    }
  }
  if (!open.params.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace upsim::pytorch
