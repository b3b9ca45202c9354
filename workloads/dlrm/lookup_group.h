// One table-batched embedding op of a DLRM rank (LookupGroup: the tables it looks up, for a
// batch) and what is priced from it: its FBGEMM kernel description and the values of its sparse
// gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cost_models.h"
#include "workloads/dlrm/dlrm_config.h"

namespace upsim::dlrm_emit {

/// One table-batched embedding op of a rank: the tables it looks up, for `batch` samples.
struct LookupGroup {
  int64_t batch = 0;
  std::vector<EmbeddingTableShape> tables;
  /// Pooled values per sample: the tables' dims summed.
  int64_t values_per_sample = 0;
  bool empty() const { return tables.empty(); }
};

/// The table-batched op over `group` (tables in config.embedding_dtype, indices of
/// config.index_bytes): per-table shapes, and their means (rows and dim rounded) for the models
/// that read averages.
KernelDesc embedding_kernel(const DlrmConfig& config, KernelClass cls, const LookupGroup& group,
                            EmbeddingOptimizer optimizer);

/// Lookups of `group` times their dims: the values of its sparse gradient (one row a lookup).
int64_t sparse_values(const LookupGroup& group);

}  // namespace upsim::dlrm_emit
