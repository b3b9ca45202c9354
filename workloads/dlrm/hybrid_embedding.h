// HugeCTR's hybrid embedding (NVIDIA-Merlin/HugeCTR, HugeCTR/src/embeddings/hybrid_embedding/;
// the MLPerf DLRM submissions' embedding): a table's frequent rows are replicated on every GPU and
// looked up locally for the local batch, their gradients all-reduced (frequent_embedding.cu); the
// infrequent rows are spread over all GPUs and only the lookups that hit them cross the network
// (infrequent_embedding.cu). Which rows are frequent follows from how often each is accessed
// (model.cu init_hybrid_model: categories sorted by count, those at or above a count threshold).
//
// Contract: pure functions of the table, the global batch and the GPU count.
#pragma once

#include <cstdint>
#include <optional>

#include "workloads/dlrm/sharders.h"

namespace upsim {

/// HugeCTR's default bound on the probability that a frequent category is duplicated within a
/// GPU's samples: HybridEmbeddingParam::p_dup_max, 1 / 100 when the model's JSON leaves it out
/// (its parser reads get_value_from_json_soft(j_hparam, "p_dup_max", 1. / 100)).
inline constexpr double kHugeCtrMaxDuplication = 0.01;

/// How a hybrid table splits: its frequent (replicated) rows and the share of its lookups that
/// hit them.
struct HybridSplit {
  int64_t frequent_rows = 0;
  double frequent_share = 0.0;
};

/// HugeCTR's count threshold for one node of NVLink-connected GPUs (calibration_data.cu,
/// calculate_threshold, CommunicationType::NVLink_SingleNode), with the statistics of one batch
/// (num_iterations = 1: ASSUMPTION, HugeCTR's calibration data counts its own batches):
/// batch x sqrt(2 p_dup_max / (M (M - 1))), M = batch / GPUs. A row accessed at least this many
/// times per batch is frequent. Infinite when M <= 1 (no duplication to avoid).
double hybrid_count_threshold(int64_t global_batch, uint32_t gpus);

/// The split of `table` for `global_batch` samples on `gpus` GPUs, from its access law: each row
/// rank k expects global_batch x pooling x p_k accesses per batch (Zipf p_k = k^-alpha /
/// H(rows, alpha); uniform 1 / rows); the frequent rows are those at or above
/// hybrid_count_threshold, rounded up to a multiple of the GPU count as HugeCTR rounds them
/// (calculate_num_frequent_categories) and capped at the table; their share of the lookups is
/// their probability mass. nullopt for a table with a measured reuse histogram (which does not
/// say which rows are hot): the scenario must state the split.
std::optional<HybridSplit> hybrid_split(const EmbeddingTable& table, int64_t global_batch,
                                        uint32_t gpus);

/// The share of samples with at least one lookup in the infrequent rows: 1 - share^pooling (each
/// of a bag's `pooling` indices hits a frequent row with probability `frequent_share`); only
/// these samples' partial sums cross the network.
double infrequent_sample_share(const EmbeddingTable& table);

}  // namespace upsim
