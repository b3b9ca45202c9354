#include "workloads/dlrm/ddp_module.h"

namespace upsim::dlrm_emit {

void DdpModule::reduce_ready_buckets(RankOps& ops, size_t ready_params) {
  if (!ops.distributed()) return;
  const DType dtype = ops.config().param_dtype();
  while (next_bucket < buckets.size() && buckets[next_bucket].params.back() < ready_params) {
    const DdpBucket& bucket = buckets[next_bucket];
    done_events.push_back(
        ops.scaled_all_reduce(groups[next_bucket], dtype, bucket.bytes / dtype_bytes(dtype)));
    ++next_bucket;
  }
}

void finalize_ddp_backward(RankOps& ops, const std::vector<TaskId>& all_reduce_done) {
  HostOp h = ops.host_op("ddp.reducer::finalize_backward");
  for (TaskId done : all_reduce_done)
    h.wait(kComputeStream, done);
  h.end();
}

}  // namespace upsim::dlrm_emit
