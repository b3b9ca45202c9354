#include "workloads/dlrm/rank_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

void RankEmitter::backward(const IterationGroups& groups, DdpModule& top, DdpModule& bottom) {
  ops_.body(fmt::format("Optimizer.zero_grad#{0}.zero_grad",
                        torch_optimizer_class(config_.dense_optimizer)));
  dense_.loss_backward();
  dense_.top_backward(top);
  interaction_.backward(top, 2 * (top_widths_.size() - 1));
  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_backward(groups);
  // The bottom MLP's backward overlaps the exchange; hybrid parallel: it waits for its output's
  // gradients of every rank's samples, which arrive in the all-to-all in the payload dtype.
  if (!plan_.hybrid) dense_.bottom_backward(bottom);
  embeddings_.wait_backward_all_to_all(pending);
  if (plan_.bottom_in_exchange) {
    ops_.convert(config_.all_to_all_dtype, config_.dtype,
                 plan_.bottom_batch * config_.embedding_dim);
    dense_.bottom_backward(bottom);
  }
  const std::vector<TaskId> data_parallel_done = embeddings_.backward(pending, groups);
  if (ops_.distributed()) {
    // Each DDP module's reducer waits for its buckets' all-reduces at the end of backward
    // (the data-parallel tables: for their gradient's).
    finalize_ddp_backward(ops_, top.done_events);
    finalize_ddp_backward(ops_, bottom.done_events);
    if (exchange_.data_parallel) finalize_ddp_backward(ops_, data_parallel_done);
  }
}

}  // namespace upsim::dlrm_emit
