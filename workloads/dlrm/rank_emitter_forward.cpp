#include "workloads/dlrm/rank_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "workloads/dlrm/table_statistics.h"

namespace upsim::dlrm_emit {

void RankEmitter::forward(const IterationGroups& groups) {
  embeddings_.lookup_pieces();
  // Hybrid parallel: this rank's bottom MLP runs on the global batch before the exchange,
  // whose payload carries its output to every rank.
  if (plan_.bottom_in_exchange) dense_.bottom_forward();
  const EmbeddingEmitter::PendingExchange pending = embeddings_.send_forward(groups);
  if (!plan_.bottom_in_exchange && plan_.bottom_batch > 0) dense_.bottom_forward();
  embeddings_.receive_forward(pending);
  interaction_.forward();
  dense_.top_forward();
  if (config_.mode == DlrmMode::kInference) return;
  dense_.loss_forward();
}

}  // namespace upsim::dlrm_emit
