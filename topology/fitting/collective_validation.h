// Validation of the flow network's collectives against measured times: the core of
// `upsim validate collectives`, of `upsim calibrate collectives`
// (topology/fitting/collective_fit.h) and of test/unit/topology/collective_accuracy_test.cpp.
//
// Contract:
//  - Error is e = predicted / measured - 1 (ARCHITECTURE.md); a sweep is summarised by the
//  geometric
//    mean of |e| and by the plateau error, the relative error of bus bandwidth at the largest
//    measured size (predicted busbw / measured busbw - 1).
//  - nccl-tests conventions: `bytes` is nccl-tests' `size`, max(send, receive) bytes of one rank
//    (each rank's buffer for all-reduce, its input for reduce-scatter, all-to-all and
//    broadcast, its output for all-gather); algbw = bytes / time; busbw = algbw x
//    2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter, all-to-all) or 1 (broadcast),
//    n ranks; measured times are per-call averages.
//  - Each point is simulated alone (a fresh Engine, no other traffic) on one FlowNetwork over
//    `fabric` with every GPU of the fabric as a member, in rank order, as one CollectiveDesc of
//    the kind with bytes = size (size / n for all-gather, whose CollectiveDesc::bytes is the
//    input) and, for all-to-all, size / n to every member.
//  - Readers throw std::runtime_error naming the file and line of malformed input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"
#include "topology/fabric.h"
#include "topology/nccl_tuning.h"

namespace upsim {

struct MeasuredCollective {
  int64_t bytes = 0;
  double time_us = 0.0;
};

struct CollectivePoint {
  int64_t bytes = 0;
  double measured_us = 0.0;
  double predicted_us = 0.0;
  double error = 0.0;  ///< predicted / measured - 1
  double measured_busbw_gbps = 0.0;
  double predicted_busbw_gbps = 0.0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  CollectiveProtocol protocol = CollectiveProtocol::kSimple;
};

struct CollectiveValidation {
  std::string system;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint32_t ranks = 0;
  std::vector<CollectivePoint> points;
  double geomean_abs_error = 0.0;
  double plateau_error = 0.0;  ///< busbw error at the largest size
  double max_abs_error = 0.0;
  /// Added to every predicted time (see CollectiveValidationCase::harness_overhead).
  Duration harness_overhead{};
};

/// One measured system: the fabric file (relative to configs/), the measured data file
/// (relative to test/data/) and, for the nccl-tests table, the run id.
struct CollectiveValidationCase {
  std::string system;
  std::string topology;
  std::string data_file;
  std::string run_id;  ///< empty for the LLMCompass sweep
  /// What the measuring harness adds to each call on top of the collective itself (e.g. a
  /// framework's per-call dispatch when a PyTorch-level benchmark times torch.distributed
  /// calls): added to every predicted time of this measurement set, so that tuning latencies
  /// describe NCCL and not the harness. Zero for nccl-tests, whose per-call time is the
  /// average over back-to-back NCCL calls (NVIDIA/nccl-tests src/common.cu).
  Duration harness_overhead{};
  std::string harness;  ///< how the set was measured, printed with its table
};

/// The eight measured all-reduce systems (4x A100 NVLink3, GCP A3 Mega 2x8 H100 TCPXO, OCI 2x8
/// H100 RoCE, OCI 1x8 and 2x8 A100, NVIDIA DGX H100 1x8, 2x8 and 4x8 H100 on InfiniBand).
std::vector<CollectiveValidationCase> collective_validation_cases();

/// Rows of one run of test/data/nccl-tests/nccl_tests_allreduce_published.csv (out-of-place
/// time), in file order. Throws std::runtime_error when the file is unreadable or has no row of
/// `run_id`.
std::vector<MeasuredCollective> read_nccl_tests_allreduce(const std::filesystem::path& csv,
                                                          std::string_view run_id);
/// Rows "size_bytes,latency_us,..." of the LLMCompass sweep (comment / header lines skipped).
std::vector<MeasuredCollective> read_llmcompass_allreduce(const std::filesystem::path& csv);
/// The measured rows of a case, with test/data/ at `data_dir`.
std::vector<MeasuredCollective> read_case(const CollectiveValidationCase& c,
                                          const std::filesystem::path& data_dir);

/// nccl-tests' busbw / algbw (NVIDIA/nccl-tests src/*.cu GetBw): all-reduce 2(n-1)/n;
/// all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast 1. Throws std::invalid_argument
/// for kSendRecv.
double nccl_tests_bus_factor(CollectiveKind kind, uint32_t ranks);

/// The collective nccl-tests runs for a row of `size` bytes on `ranks` ranks (members 0..n-1),
/// as the contract above describes.
CollectiveDesc nccl_tests_collective_desc(CollectiveKind kind, uint32_t ranks, int64_t size);

/// Simulates a collective of `kind` at each measured size over all GPUs of `fabric` and
/// compares. Throws std::invalid_argument for kSendRecv (nccl-tests' sendrecv_perf is a ring of
/// pairs, not upsim's one-pair send/recv).
///
/// `harness_overhead` (>= 0) is added to every predicted time: what the measuring harness adds
/// per call (CollectiveValidationCase::harness_overhead).
CollectiveValidation validate_collective(const Fabric& fabric, const CollectiveTuning& tuning,
                                         CollectiveKind kind,
                                         std::span<const MeasuredCollective> measured,
                                         std::string system,
                                         Duration harness_overhead = Duration::zero());
/// validate_collective for all-reduce.
CollectiveValidation validate_all_reduce(const Fabric& fabric, const CollectiveTuning& tuning,
                                         std::span<const MeasuredCollective> measured,
                                         std::string system,
                                         Duration harness_overhead = Duration::zero());

/// The table of a validation: size, measured / predicted us, error %, busbw, choice; then the
/// summary line.
std::string format_validation(const CollectiveValidation& v);

}  // namespace upsim
