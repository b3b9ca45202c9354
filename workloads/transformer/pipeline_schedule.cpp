#include "workloads/transformer/pipeline_schedule.h"

#include <algorithm>

namespace upsim {

std::vector<PipelineStep> pipeline_schedule(PipelineSchedule schedule, int64_t stages,
                                            int64_t chunks, int64_t micro_batches, int64_t stage,
                                            int64_t extra_warmup) {
  std::vector<PipelineStep> steps;
  if (schedule == PipelineSchedule::kGpipe) {
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t m = 0; m < micro_batches; ++m)
        steps.push_back({true, m, c});
    for (int64_t c = chunks - 1; c >= 0; --c)
      for (int64_t m = 0; m < micro_batches; ++m)
        steps.push_back({false, m, c});
    return steps;
  }
  if (schedule == PipelineSchedule::k1F1B || chunks == 1) {
    const int64_t warmup = std::min(stages - stage - 1 + extra_warmup, micro_batches);
    const int64_t remaining = micro_batches - warmup;
    for (int64_t m = 0; m < warmup; ++m)
      steps.push_back({true, m, 0});
    for (int64_t i = 0; i < remaining; ++i) {
      steps.push_back({true, warmup + i, 0, true});
      steps.push_back({false, i, 0});
    }
    for (int64_t m = remaining; m < micro_batches; ++m)
      steps.push_back({false, m, 0});
    return steps;
  }
  // Interleaved 1F1B (Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving).
  const int64_t total = micro_batches * chunks;
  const int64_t group = stages * chunks;
  auto chunk_of = [&](int64_t k, bool forward) {
    const int64_t c = k % group / stages;
    return forward ? c : chunks - 1 - c;
  };
  auto micro_batch_of = [&](int64_t k) { return k / group * stages + k % stages; };
  const int64_t warmup =
      std::min((stages - stage - 1) * 2 + (chunks - 1) * stages + extra_warmup, total);
  const int64_t remaining = total - warmup;
  for (int64_t k = 0; k < warmup; ++k)
    steps.push_back({true, micro_batch_of(k), chunk_of(k, true)});
  for (int64_t k = 0; k < remaining; ++k) {
    steps.push_back({true, micro_batch_of(k + warmup), chunk_of(k + warmup, true), true});
    steps.push_back({false, micro_batch_of(k), chunk_of(k, false)});
  }
  for (int64_t k = remaining; k < total; ++k)
    steps.push_back({false, micro_batch_of(k), chunk_of(k, false)});
  return steps;
}

}  // namespace upsim
