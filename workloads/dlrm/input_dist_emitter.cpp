#include "workloads/dlrm/input_dist_emitter.h"

#include "sim/units.h"

namespace upsim::dlrm_emit {

namespace {

/// A gather / scatter kernel over `bytes` of int64 lengths and indices, read once and written
/// once (priced per 4-byte element).
KernelDesc sparse_data_kernel(int64_t bytes) {
  return pointwise(MemoryOp::kIndex, DType::kFp32, as_double(bytes) / 4.0, 0, 1, 1);
}

}  // namespace

InputDistEmitter::InputDistEmitter(RankOps& ops, const std::vector<KjtAllToAll>& kjts,
                                   uint32_t index)
    : ops_(ops), kjts_(kjts), index_(index) {}

InputDistEmitter::Pending InputDistEmitter::start(const InputDistGroups& groups, uint16_t stream) {
  Pending pending;
  if (stream != kComputeStream) {
    // start_sparse_data_dist: the data-dist stream waits for the batch's copy (_wait_for_batch
    // on the memcpy stream).
    HostOp h = ops_.host_op("## start_sparse_data_dist ##");
    h.wait(stream, h.record(kDataStream));
    h.end();
  }
  const int64_t ranks = static_cast<int64_t>(kjts_.front().lengths.members());
  const bool fused = groups.splits.size() == 1 && kjts_.size() > 1;
  for (size_t k = 0; k < kjts_.size(); ++k) {
    const KjtAllToAll& kjt = kjts_[k];
    {
      HostOp h = ops_.host_op(kjt.bucketize ? "fbgemm::block_bucketize_sparse_features"
                                            : "fbgemm::permute_2D_sparse_data");
      h.kernel_on(stream,
                  kjt.bucketize ? "_block_bucketize_sparse_features_cuda_kernel2"
                                : "permute_2D_data_kernel",
                  kjt.bucketize ? "fbgemm::block_bucketize_sparse_features"
                                : "fbgemm::permute_2D_sparse_data",
                  sparse_data_kernel(kjt.lengths.sent_by(index_) + kjt.values.sent_by(index_)));
      h.end();
    }
    // KJTAllToAllSplitsAwaitable: torch.tensor(splits, device=...) per label and the stride,
    // each a blocking copy from pageable memory (the host waits for `stream`), then stacked.
    for (int64_t label = 0; label < kSplitsPerPair; ++label) {
      HostOp h = ops_.host_op("aten::to");
      h.copy_on(stream, "Memcpy HtoD (splits)", TransferKind::kHostToDevice, ranks * kSplitBytes);
      h.end();
      ops_.host_sync(stream, "aten::to");
    }
    {
      HostOp h = ops_.host_op("aten::stack");
      h.kernel_on(stream, "CatArrayBatchedCopy", "aten::stack",
                  sparse_data_kernel(ranks * kSplitsPerPair * kSplitBytes));
      h.end();
    }
    if (!fused)
      pending.splits.push_back(ops_.launch_collective(groups.splits[k], "nccl:all_to_all", stream));
  }
  if (fused)
    pending.splits.push_back(ops_.launch_collective(groups.splits[0], "nccl:all_to_all", stream));
  return pending;
}

void InputDistEmitter::send_tensors(const InputDistGroups& groups, Pending& pending,
                                    uint16_t stream) {
  const int64_t ranks = static_cast<int64_t>(kjts_.front().lengths.members());
  for (size_t k = 0; k < kjts_.size(); ++k) {
    // One read-back per splits all-to-all (the fused one's output holds every type's splits).
    if (k < pending.splits.size()) {
      const int64_t types = pending.splits.size() == 1 ? static_cast<int64_t>(kjts_.size()) : 1;
      HostOp h = ops_.host_op("SplitsAllToAllAwaitable.wait");
      h.wait(stream, pending.splits[k]);
      h.copy_on(stream, "Memcpy DtoH (splits)", TransferKind::kDeviceToHost,
                ranks * types * kSplitsPerPair * kSplitBytes);
      h.end();
      ops_.host_sync(stream, "aten::tolist");
    }
    ops_.launch_collective(groups.lengths[k], "nccl:all_to_all", stream);
    pending.tensors.push_back(ops_.launch_collective(groups.values[k], "nccl:all_to_all", stream));
  }
}

void InputDistEmitter::finish(const Pending& pending, uint16_t stream) {
  for (size_t k = 0; k < kjts_.size(); ++k) {
    const KjtAllToAll& kjt = kjts_[k];
    HostOp h = ops_.host_op("KJTAllToAllTensorsAwaitable.wait");
    h.wait(stream, pending.tensors[k]);
    // KeyedJaggedTensor.dist_init: the received lengths and values from rank-major to
    // feature-major order.
    h.kernel_on(
        stream, "permute_2D_data_kernel", "fbgemm::permute_2D_sparse_data",
        sparse_data_kernel(kjt.lengths.received_by(index_) + kjt.values.received_by(index_)));
    h.end();
  }
  if (stream != kComputeStream) {
    HostOp h = ops_.host_op("torch.cuda.Stream.wait_stream");
    h.wait(kComputeStream, h.record(stream));
    h.end();
  }
}

}  // namespace upsim::dlrm_emit
