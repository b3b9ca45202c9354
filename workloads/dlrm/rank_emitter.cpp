#include "workloads/dlrm/rank_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "sim/units.h"
#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

/// torch.optim's class name of a dense optimizer (the profiler's Optimizer.step#<Class>.step).
std::string_view torch_optimizer_class(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdagrad:
      return "Adagrad";
    case OptimizerKind::kAdam:
      return "Adam";
    case OptimizerKind::kAdamW:
      return "AdamW";
    default:
      return "SGD";
  }
}

RankEmitter::RankEmitter(const DlrmConfig& config, const DlrmGraph& built,
                         const std::vector<int64_t>& top_widths, const EmbeddingExchange& exchange,
                         uint32_t index, TaskGraph& graph)
    : config_(config),
      built_(built),
      top_widths_(top_widths),
      ops_(config, built, index, graph),
      exchange_(exchange),
      plan_(plan_rank(config, built, index)),
      embeddings_(ops_, plan_, exchange),
      dense_(ops_, plan_, top_widths),
      interaction_(ops_, plan_),
      table_count_(static_cast<int64_t>(config.tables.size())),
      embedding_dim_(config.embedding_dim),
      dtype_(config.dtype) {}

void RankEmitter::iteration(uint32_t it, const IterationGroups& groups) {
  ops_.iteration_mark(it);
  DdpModule top{top_widths_, built_.top_buckets, groups.top, {}, 0};
  DdpModule bottom{config_.bottom_mlp, built_.bottom_buckets, groups.bottom, {}, 0};
  if (config_.mode == DlrmMode::kInference) {
    // A served batch: its inputs copied, the forward, the host waits for the scores.
    load_batch();
    forward(groups);
    ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
    return;
  }
  const bool prefetch = config_.input == InputPipeline::kPrefetch;
  // The prefetcher copies the first batch before the loop, each later one after the step
  // before it (dlrm/data/utils.py prefetcher); the forward waits for its batch's copies.
  if (!prefetch || it == 0) load_batch();
  if (prefetch) {
    HostOp h = ops_.host_op("torch.cuda.Stream.wait_stream");
    h.wait(kComputeStream, h.record(kDataStream));
    h.end();
  }
  forward(groups);
  backward(groups, top, bottom);
  optimizer_step();
  if (prefetch) load_batch();
  ops_.host_sync(kAllStreams, "torch.cuda.synchronize");
}

void RankEmitter::input_copy(std::string_view copy_name, int64_t bytes) {
  if (config_.input == InputPipeline::kBlocking) {
    ops_.blocking_copy(copy_name, TransferKind::kHostToDevice, bytes);
    return;
  }
  HostOp h = ops_.host_op("aten::to");
  h.copy_on(kDataStream, copy_name, TransferKind::kHostToDevice, bytes);
  h.end();
  ops_.host_sync(kDataStream, "aten::to");
}

void RankEmitter::load_batch() {
  if (config_.mode == DlrmMode::kTrain) {
    ops_.body("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  }
  if (plan_.bottom_batch > 0) {
    input_copy("Memcpy HtoD (dense)", plan_.bottom_batch * config_.bottom_mlp.front() * kFp32Bytes);
  }
  // One offsets and one indices copy for all lookups of the rank: per looked-up table (or
  // shard) `batch` offsets and round(batch x pooling) indices, and one closing offset.
  int64_t offsets = 0;
  int64_t indices = 0;
  for (const LookupGroup* group :
       {&plan_.pieces, &plan_.row_wise, &plan_.table_row_wise, &plan_.data_parallel}) {
    for (const EmbeddingTableShape& table : group->tables) {
      offsets += group->batch;
      indices += std::llround(as_double(group->batch) * table.pooling);
    }
  }
  if (offsets > 0) {
    input_copy("Memcpy HtoD (offsets)", (offsets + 1) * config_.index_bytes);
    input_copy("Memcpy HtoD (indices)", indices * config_.index_bytes);
  }
  // The prefetcher's batch carries the targets (the blocking script copies them in the loss).
  if (config_.input == InputPipeline::kPrefetch && config_.mode == DlrmMode::kTrain) {
    input_copy("Memcpy HtoD (targets)", plan_.local_batch * kFp32Bytes);
  }
}

}  // namespace upsim::dlrm_emit
