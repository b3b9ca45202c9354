#include "workloads/dlrm/lookup_group.h"

#include <cmath>

#include "sim/units.h"

namespace upsim::dlrm_emit {

KernelDesc embedding_kernel(const DlrmConfig& config, KernelClass cls, const LookupGroup& group,
                            EmbeddingOptimizer optimizer) {
  const auto tables = static_cast<int64_t>(group.tables.size());
  int64_t rows = 0;
  double pooling = 0.0;
  for (const EmbeddingTableShape& table : group.tables) {
    rows += table.rows;
    pooling += table.pooling;
  }
  KernelDesc k;
  k.cls = cls;
  k.dtype = config.embedding_dtype;
  k.embedding =
      EmbeddingShape{group.batch, tables, (rows + tables / 2) / tables,
                     (group.values_per_sample + tables / 2) / tables, pooling / as_double(tables)};
  k.embedding.optimizer = optimizer;
  k.embedding.index_bytes = config.index_bytes;
  k.embedding.per_table = group.tables;
  return k;
}

int64_t sparse_values(const LookupGroup& group) {
  double values = 0.0;
  for (const EmbeddingTableShape& table : group.tables) {
    values += std::round(as_double(group.batch) * table.pooling) * as_double(table.dim);
  }
  return static_cast<int64_t>(values);
}

}  // namespace upsim::dlrm_emit
