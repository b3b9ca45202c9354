// The seed paper's random DLRM tasks (Lin et al., TPDS 2024, benchmark/
// generate_random_dlrm_tasks.py, adapted from DreamShard's tools/gen_tasks.py): each task is a
// set of tables drawn from a pool of measured table statistics (the seed: Meta's dlrm_datasets,
// all-zero tables dropped), sized to the platform.
//
// Contract (pure, platform-independent):
//  - Draws come from one std::mt19937_64 seeded with `seed` through uniform_below (no std::
//    distribution), so the same pool, spec, GPU count and memory give the same tables on every
//    platform. Task k is the k-th accepted draw of that sequence (the seed writes its tasks in
//    one run of one generator).
//  - A draw: a table count uniform in [floor(tables_per_gpu x gpus x 0.7),
//    floor(tables_per_gpu x gpus x 1.3)), then that many distinct tables of the candidates
//    (heavy: those with mean pooling >= heavy_pooling; else all), uniformly. A draw whose fp32
//    weights (rows x dim x 4 B, as the seed counts) exceed memory_fraction x gpus x GPU memory
//    is rejected and drawn again.
//  - Errors (std::invalid_argument, naming the numbers): fewer candidates than the largest
//    count, or no accepted draw in kMaxRandomTaskDraws tries.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "workloads/dlrm/sharders.h"

namespace upsim {

struct RandomTaskSpec {
  uint64_t seed = 0;
  /// Which accepted draw of the sequence (0-based).
  uint32_t task = 0;
  /// Draw only tables with mean pooling >= heavy_pooling (the seed's "heavy" tasks).
  bool heavy = false;
  double heavy_pooling = 20.0;
  /// The seed's 13 tables per GPU; the count is drawn in [0.7, 1.3) x this x GPUs.
  int64_t tables_per_gpu = 13;
  /// Share of the GPUs' total memory the drawn tables' fp32 weights may take (the seed: 0.8).
  double memory_fraction = 0.8;
};

/// Draws before a task that fits counts as impossible.
inline constexpr int kMaxRandomTaskDraws = 20000;

/// The pool indices of task spec.task, in the order drawn.
std::vector<uint32_t> draw_random_task(std::span<const EmbeddingTable> pool, int64_t dim,
                                       const RandomTaskSpec& spec, uint32_t gpus,
                                       int64_t gpu_memory_bytes);

}  // namespace upsim
