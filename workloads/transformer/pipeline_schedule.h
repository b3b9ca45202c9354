// Pipeline schedules: the order of forward and backward passes on one pipeline stage.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// One compute step of a pipeline stage's schedule.
struct PipelineStep {
  bool forward = true;
  int64_t micro_batch = 0;
  int64_t chunk = 0;  ///< model chunk (virtual stage index on this stage)
  /// A forward of 1F1B's steady state: the backward after it is its partner (Megatron-Core's
  /// combined 1F1B schedule runs the two together, combined_1f1b.cpp).
  bool steady = false;
};

/// The virtual stage a model chunk `chunk` of pipeline stage `stage` of `stages` is (Megatron's
/// interleaving: chunk c of every stage before chunk c + 1 of any).
inline int64_t virtual_stage_of(int64_t chunk, int64_t stages, int64_t stage) {
  return chunk * stages + stage;
}

/// The order in which stage `stage` of `stages` runs forward and backward passes of `micro_batches`
/// micro-batches over `chunks` model chunks: GPipe (all forwards, then all backwards), 1F1B
/// (Narayanan et al., SC21, Fig. 4 top: warm-up of stages - stage - 1 forwards), or interleaved
/// 1F1B (Fig. 4 bottom; Megatron-LM's forward_backward_pipelining_with_interleaving: warm-up
/// (stages - stage - 1) x 2 + (chunks - 1) x stages). `extra_warmup` forwards more run before the
/// first backward (1F1B and interleaved): Megatron-Core's combined 1F1B schedule (EP all-to-all
/// overlap) runs one more, so that each steady forward is independent of the backward it is
/// paired with (schedules.py get_pp_rank_microbatches; combined_1f1b.py: without a pipeline
/// the first micro-batch's forward runs alone).
std::vector<PipelineStep> pipeline_schedule(PipelineSchedule schedule, int64_t stages,
                                            int64_t chunks, int64_t micro_batches, int64_t stage,
                                            int64_t extra_warmup = 0);

}  // namespace upsim
