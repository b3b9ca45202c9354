// RooflineKernelCost: the first kernel model. A kernel takes the longer of its arithmetic time
// and its device-memory time at the achievable fractions of the datasheet peaks, plus a fixed
// per-kernel time:
//
//   duration = max(flops / (peak(dtype) x compute_fraction),
//                  bytes / (hbm_bandwidth x memory_fraction)) + kernel_overhead
//
// Contract:
//  - Pure and const; parameters are fixed at construction (ARCHITECTURE.md "Cost models").
//  - The fractions describe one device (they come from its hardware profile): build one instance
//    per device profile.
//  - GEMM arithmetic needs a unit for its dtype: a GEMM whose dtype has a zero peak on the device
//    throws std::invalid_argument naming the dtype and the device. Memory-bound and embedding
//    kernels do their little arithmetic on the fp32 units when the dtype has none.
//  - Traffic counts every operand once (no cache reuse, no 32-byte sector rounding); the
//    data-distribution-aware embedding model and the calibrated GEMM model replace this one later
//    by adding files, not by editing it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "sim/cost_models.h"

namespace upsim {

/// Parameters of RooflineKernelCost (name, unit, default, source).
struct RooflineParams {
  /// compute_fraction (dimensionless, default 1): achieved / datasheet FLOP/s. Taken from the
  /// hardware profile's `achievable.compute_fraction`.
  double compute_fraction = 1.0;
  /// memory_fraction (dimensionless, default 1): achieved / datasheet HBM bandwidth. Taken from
  /// the hardware profile's `achievable.memory_fraction`.
  double memory_fraction = 1.0;
  /// kernel_overhead (time, default 5 us): added to every kernel. Source: Lin et al., TPDS 2024
  /// section 1.3, GPU_KERNEL_OVERHEAD = 5 us "added to every predicted kernel time" (TPDS'24
  /// code; the HiPC'22 code used 4 us).
  Duration kernel_overhead = Duration::from_us(5);
  /// embedding_index_bytes (bytes, default 4, 4 or 8): size of one embedding index. Source:
  /// Lin et al., TPDS 2024, which counts 4 bytes per index (int32 indices).
  int64_t embedding_index_bytes = 4;
};

/// Arithmetic and device-memory traffic of one kernel as the roofline counts them.
struct KernelWork {
  double flops = 0.0;
  double bytes = 0.0;
};

/// The work the roofline charges for `kernel`:
///  - kGemm: flops = 2 batch m n k; bytes = dtype_bytes x batch x (m k + k n + m n).
///  - kMemoryBound: flops = kernel.flops; bytes = bytes_read + bytes_written.
///  - kEmbeddingForward (Lin et al., TPDS 2024, without sector rounding and per-bag offsets):
///    gathered rows B T L D e + indices B T L i + pooled outputs B T D e;
///    flops = B T L D (one add per gathered element).
///  - kEmbeddingBackward with a fused SGD update (Lin et al., TPDS 2024 "Backward"): output
///    gradients read B T D e + read-modify-write of every touched row 2 B T L D e + indices
///    B T L i; flops = 2 B T L D (seed: B T L D multiply-adds). With update kScatterAdd
///    (index_add_ of one value row per lookup): 3 B T L D e + B T L i bytes, B T L D flops.
/// B = batch, T = tables, L = pooling, D = dim, e = dtype_bytes(dtype), i = index_bytes.
KernelWork roofline_work(const KernelDesc& kernel, int64_t index_bytes);
/// Flops and device-memory bytes of a kAttention kernel (fused, FlashAttention-2 style).
KernelWork attention_work(const KernelDesc& kernel);

class RooflineKernelCost final : public KernelCostModel {
 public:
  /// Throws std::invalid_argument for fractions outside (0, 1], a negative overhead or an index
  /// size other than 4 or 8.
  explicit RooflineKernelCost(RooflineParams params);

  Duration kernel_duration(const KernelDesc& kernel, const DeviceProfile& device) const override;
  /// nullopt, except for a non-GEMM kernel with arithmetic whose dtype has no peak on the device:
  /// "<class> <dtype>: no <dtype> peak on <device>, arithmetic priced at the fp32 peak".
  std::optional<std::string> borrowed_calibration(const KernelDesc& kernel,
                                                  const DeviceProfile& device) const override;

  const RooflineParams& params() const { return params_; }

 private:
  RooflineParams params_;
};

/// Builds a roofline from a model section `{model: roofline, kernel_overhead: 5us,
/// compute_fraction: 0.87, memory_fraction: 0.89, embedding_index_bytes: 4}`; every key but
/// `model` is optional, the fractions default to `achievable` (the hardware profile's).
RooflineKernelCost load_roofline(const ConfigNode& node, const AchievableFractions& achievable);

}  // namespace upsim
