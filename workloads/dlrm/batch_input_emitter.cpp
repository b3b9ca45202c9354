#include "workloads/dlrm/batch_input_emitter.h"

#include <cmath>

#include "sim/units.h"

namespace upsim::dlrm_emit {

BatchInputEmitter::BatchInputEmitter(RankOps& ops, const RankPlan& plan)
    : ops_(ops), config_(ops.config()), plan_(plan) {}

BatchInputEmitter::InputSizes BatchInputEmitter::input_sizes() const {
  InputSizes sizes;
  sizes.dense_bytes = plan_.bottom_batch * config_.bottom_mlp.front() * kFp32Bytes;
  // One offsets and one indices copy for all lookups of the rank: per looked-up table (or
  // shard) `batch` offsets and round(batch x pooling) indices, and one closing offset.
  // input_dist: all_to_all: the local batch of every feature (the input distribution brings
  // each lookup its indices).
  int64_t offsets = 0;
  int64_t indices = 0;
  if (config_.input_dist == InputDistribution::kAllToAll) {
    for (const EmbeddingTable& table : config_.tables) {
      offsets += plan_.local_batch;
      indices += std::llround(as_double(plan_.local_batch) * table.pooling);
    }
  } else {
    for (const LookupGroup* group :
         {&plan_.pieces, &plan_.row_wise, &plan_.table_row_wise, &plan_.data_parallel}) {
      for (const EmbeddingTableShape& table : group->tables) {
        offsets += group->batch;
        indices += std::llround(as_double(group->batch) * table.pooling);
      }
    }
  }
  if (offsets > 0) {
    sizes.offsets_bytes = (offsets + 1) * config_.index_bytes;
    sizes.indices_bytes = indices * config_.index_bytes;
  }
  return sizes;
}

void BatchInputEmitter::load_batch() {
  if (config_.mode == DlrmMode::kTrain) {
    ops_.body("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  }
  const InputSizes sizes = input_sizes();
  if (config_.input == InputPipeline::kPreloaded) {
    // DeepLearningExamples' inference_benchmark: numerical_features.to(device) and
    // categorical_features.to(device, int64) on tensors the DataLoader already put there.
    if (sizes.dense_bytes > 0) ops_.body("aten::to");
    if (sizes.offsets_bytes > 0) ops_.body("aten::to");
    return;
  }
  if (sizes.dense_bytes > 0) input_copy("Memcpy HtoD (dense)", sizes.dense_bytes);
  if (sizes.offsets_bytes > 0) {
    input_copy("Memcpy HtoD (offsets)", sizes.offsets_bytes);
    input_copy("Memcpy HtoD (indices)", sizes.indices_bytes);
  }
  // The prefetcher's batch carries the targets (the blocking script copies them in the loss).
  if (config_.input == InputPipeline::kPrefetch && config_.mode == DlrmMode::kTrain) {
    input_copy("Memcpy HtoD (targets)", plan_.local_batch * kFp32Bytes);
  }
}

void BatchInputEmitter::copy_into_static_inputs() {
  const InputSizes sizes = input_sizes();
  const auto copy = [&](std::string_view name, int64_t bytes) {
    if (bytes <= 0) return;
    HostOp h = ops_.host_op("aten::copy_");
    h.copy(name, TransferKind::kDeviceToDevice, bytes);
    h.end();
  };
  copy("Memcpy DtoD (static dense)", sizes.dense_bytes);
  copy("Memcpy DtoD (static categorical)", sizes.offsets_bytes + sizes.indices_bytes);
  // Training also copies the batch's targets (CudaGraphWrapper._copy_input_data).
  if (config_.mode == DlrmMode::kTrain) {
    copy("Memcpy DtoD (static targets)", plan_.local_batch * kFp32Bytes);
  }
}

void BatchInputEmitter::wait_for_prefetched_batch() {
  HostOp h = ops_.host_op("torch.cuda.Stream.wait_stream");
  h.wait(kComputeStream, h.record(kDataStream));
  h.end();
}

void BatchInputEmitter::input_copy(std::string_view copy_name, int64_t bytes) {
  if (config_.input == InputPipeline::kBlocking) {
    ops_.blocking_copy(copy_name, TransferKind::kHostToDevice, bytes);
    return;
  }
  HostOp h = ops_.host_op("aten::to");
  h.copy_on(kDataStream, copy_name, TransferKind::kHostToDevice, bytes);
  h.end();
  // TorchRec's pipeline copies from the DataLoader's pinned memory (non_blocking=True): the host
  // goes on at once.
  if (config_.train_pipeline != TrainPipeline::kNone) return;
  ops_.host_sync(kDataStream, "aten::to");
}

}  // namespace upsim::dlrm_emit
