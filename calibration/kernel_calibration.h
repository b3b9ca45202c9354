// KernelCalibration: the fitted parameters of the calibrated kernel model, as stored in a
// calibration file (configs/calibration/*.yaml), written by `upsim calibrate`
// (fit_kernel_calibration.h) and read by the model (calibrated_kernel_cost.h).
//
// File schema (every key required unless marked optional; units in the strings):
//   fitted_on: A100-SXM4-80GB        hardware profile `name` of the device the sweeps ran on
//   fitted_on_device: {compute_capability: 8.0, sm_count: 108, sm_boost_clock_mhz: 1410}
//                                    optional: that profile's compute configuration. A GPU of the
//                                    same chip configuration (compute capability and SM count:
//                                    another memory, form factor or clock of the chip, A100 40GB
//                                    and 80GB, SXM and PCIe, V100 SXM2 and Quadro GV100) runs the
//                                    same kernels on the same SMs, and the fitted scales are
//                                    relative to each profile's own peaks (its SMs x its clock),
//                                    bandwidth and achievable fractions: the file is its own
//                                    there (CalibratedKernelCost::borrowed_calibration); the
//                                    clock is recorded, not compared
//   source: "..."                    where the measurements came from
//   kernel_overhead: 5us             fixed time added to every kernel the model prices when the
//                                    hardware profile states none (load_calibrated)
//   gemm:
//     default: {tile_m, tile_n, k_overhead, compute_scale, memory_scale}
//     fp32: {...}                    optional, per dtype (dtype_name); else `default`
//   memory_bound:
//     curves: {NAME: {bandwidth_scale, long_row_bytes, long_row_read_passes,
//                     full_reread_row_bytes (optional, default 0 = a step at long_row_bytes)}}
//     ops: {OP: CURVE, ...}          every memory_op_name() -> a curve name
//   embedding: {l2_usable_fraction, warps_per_sm, dram_scale, l2_scale, dim_factor_32,
//               dim_factor_64, sort_radix_bits, and optional (default: EmbeddingParams, the
//               V100 trace fit) sort_single_tile_items, kernel_floor: 2.032us, forward_latency,
//               forward_row_latency, index_step_latency, sort_tile_latency,
//               sort_upsweep_latency, sort_pass_latency, encode_latency, update_latency}
//                                    see embedding_bag_model.h for each one's meaning and source
//   attention:                       optional: the fused-attention model's parameters per
//     flash2:                        implementation (AttentionKernel: flash2, flash3, cudnn,
//       ...                          flash1, triton;
//       provenance: published        each optional). provenance: measured (a sweep of our own
//       source: "..."                harness), published (a paper's or vendor's kernel-level
//       block_m: 128                 figures) or physics (derived, nothing measured); source:
//       forward_efficiency_64: 0.6   where the figures are. The other keys are
//       forward_efficiency_128: 0.73 attention_kernel_model.h's, every one optional: a missing
//       forward_efficiency_256: ...  one keeps the AttentionParams default (FlashAttention-2 on
//       backward_efficiency_64: 0.5  A100), except the head_dim-256 efficiencies, which default
//       backward_efficiency_128: 0.63 to the section's head_dim-128 ones. The older flat form
//       backward_efficiency_256: ... (the parameter keys directly under `attention:`) is the
//       half_efficiency_span: 256    flash2 section. `upsim calibrate kernels` fits a section
//       backward_launches: 3         per implementation measured (fit_attention.h); an
//                                    implementation without a section is priced with the flash2
//                                    section, else the defaults, and
//                                    CalibratedKernelCost::borrowed_calibration says so.
//   measurement:                     optional: how the measuring harness adds to kernel time,
//     OP: {floor: 48us, offset: 38us, compute_speedup: 1.08}   see HarnessOverhead
//                                    (compute_speedup optional, default 1); read only by
//                                    validation, never by simulations
//   fit:                             optional, informational: the split and the fit's errors
//     split: "..."
//     errors: [{op, data (optional: the measurements' provenance, measured | published |
//               physics | mixed), train_points, held_out_points, train_geomean,
//               held_out_geomean}, ...]
// Uses (ConfigNode::read_for): kernel_overhead is read for kCalibrationKernelOverheadUse (a
// fallback: load_calibrated takes the scenario's or the hardware profile's first), `attention`
// for kCalibrationAttentionUse (a scenario's own attention section replaces it), and the values
// of `measurement` and of `fit` (not the op names, which name the measured ops) for
// kCalibrationValidationUse (validation reads them, a simulation never does).
// Errors are ConfigErrors at the offending key (unknown dtype, unknown op, an op mapped to a
// curve that is not defined, out-of-range parameters). Documented ranges (a fit or a what-if
// stays inside; a typo or a unit slip does not): every *_scale, dim factor and compute_speedup
// in [0.01, 100] (fits land near 1), tiles and block_m in [1, 4096], k_overhead in [0, 1e6],
// kernel_overhead in [0, 1 ms], long_row_bytes and full_reread_row_bytes in [0, 2^40], other
// latencies, floors and offsets in [0, 1 s],
// long_row_read_passes in [1, 64], warps_per_sm in [1, 1024], sort_radix_bits in [1, 32],
// backward_launches in [1, 64].
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/attention_kernel_model.h"
#include "calibration/embedding_bag_model.h"
#include "calibration/gemm_kernel_model.h"
#include "calibration/memory_bound_kernel_model.h"
#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/cost_models.h"
#include "sim/time.h"

namespace upsim {

/// How a measuring harness (e.g. wall-clock timing of one PyTorch call plus a synchronize)
/// relates to kernel time: measured = max(floor, offset + core kernel time), where for a GEMM
/// the compute term of the core time is divided by compute_speedup (1 for other ops).
///
/// compute_speedup > 1 says that the harness's GEMMs ran faster than the device's sustained
/// rate (the profile's achievable fraction, mamf: 100 back-to-back calls after 50 warm-up).
/// LLMCompass times single calls after 3 warm-up calls separated by 1 s sleeps
/// (software_model/matmul.py, run_on_gpu), so we attribute its higher throughput to the GPU
/// still running at boost clock; the SM clock does not change HBM bandwidth, so the factor
/// applies to the compute term only.
struct HarnessOverhead {
  Duration floor;
  Duration offset;
  double compute_speedup = 1.0;
};

/// Geometric-mean |predicted / measured - 1| of one op on the training and held-out points.
struct FitError {
  std::string op;
  size_t train_points = 0;
  size_t held_out_points = 0;
  double train_geomean = 0.0;
  double held_out_geomean = 0.0;
  /// Where the op's measurements come from: measured, published, physics or mixed (several
  /// tables that state different ones); "" when they state none.
  std::string provenance;
};

/// Where a family's parameters come from: measured (a sweep of our own harness), published (a
/// paper's or vendor's kernel-level figures) or physics (derived, nothing measured). The words a
/// calibration section and a measurement table may state.
inline constexpr std::array<std::string_view, 3> kProvenanceNames = {"measured", "published",
                                                                     "physics"};
/// Whether `word` is one of kProvenanceNames.
inline bool is_provenance(std::string_view word) {
  return std::find(kProvenanceNames.begin(), kProvenanceNames.end(), word) !=
         kProvenanceNames.end();
}

/// One implementation's `attention:` section.
struct AttentionCalibration {
  AttentionParams params;
  /// "measured", "published", "physics", or "" when the file does not say.
  std::string provenance;
  std::string source;
};

/// The compute configuration of the GPU a calibration was fitted on (`fitted_on_device`).
struct FittedDevice {
  int32_t compute_capability = 0;  ///< major x 10 + minor
  int32_t sm_count = 0;
  int32_t sm_boost_clock_mhz = 0;
};

struct KernelCalibration {
  std::string fitted_on;
  std::optional<FittedDevice> fitted_on_device;
  std::string source;
  /// Added to every GEMM and memory-bound kernel the calibrated model prices. load_calibrated
  /// replaces it with the hardware profile's measured kernel_overhead (hardware_profile.h); the
  /// file's value is the fallback for a profile without one: `upsim calibrate` writes the fitted
  /// GPU's profile value, else this default, 5 us: Lin et al., TPDS 2024, GPU_KERNEL_OVERHEAD
  /// "added to every predicted kernel time". Not added
  /// to embedding ops: their model prices each of the op's kernels with its own floor
  /// (EmbeddingParams::kernel_floor).
  Duration kernel_overhead = Duration::from_us(5);
  GemmParams gemm;
  std::array<std::optional<GemmParams>, kDTypeCount> gemm_by_dtype{};
  std::map<std::string, MemoryCurve> curves;
  /// curve_of_op[static_cast<size_t>(op)] names the curve in `curves` for that MemoryOp.
  std::array<std::string, kMemoryOpCount> curve_of_op{};
  EmbeddingParams embedding;
  /// The file's `attention:` sections, indexed by AttentionKernel; nullopt = absent.
  std::array<std::optional<AttentionCalibration>, kAttentionKernelCount> attention{};
  /// Keyed by measured op name ("gemm" or a memory_op_name()).
  std::map<std::string, HarnessOverhead> measurement;
  std::string split;
  std::vector<FitError> fit_errors;

  const GemmParams& gemm_for(DType dtype) const;
  /// Whether `device` has the chip configuration the file was fitted on (same compute
  /// capability and SM count, both stated; its clock may differ, its own peaks price it): its
  /// fit is its own there.
  bool fitted_on_configuration_of(const DeviceProfile& device) const;
  /// The parameters attention kernels of `implementation` are priced with: its section, else
  /// the flash2 section, else AttentionParams{} (FlashAttention-2 on A100).
  AttentionParams attention_for(AttentionKernel implementation) const;
  /// Throws std::invalid_argument when the op's curve is not defined.
  const MemoryCurve& curve_for(MemoryOp op) const;
  /// Whether the sweeps this calibration was fitted on measured `op` (a harness entry or a fit
  /// error of its name; "gemm/bf16" counts as gemm).
  bool measured(std::string_view op) const;
  /// Whether `op`'s curve was fitted: some op priced on the same curve was measured.
  bool curve_fitted(MemoryOp op) const;
};

/// The op -> curve map the fitter writes: softmax -> "softmax", layernorm -> "layernorm",
/// every other op -> "elementwise" (the curve fitted on the gelu sweep, the one plain streaming
/// elementwise kernel measured).
std::array<std::string, kMemoryOpCount> default_curve_of_op();

inline constexpr std::string_view kCalibrationKernelOverheadUse = "calibration kernel overhead";
inline constexpr std::string_view kCalibrationAttentionUse = "calibration attention";
inline constexpr std::string_view kCalibrationValidationUse = "calibration validation";

/// Reads a calibration document (schema above); throws ConfigError.
KernelCalibration load_kernel_calibration(const ConfigNode& node);

/// What each key of a calibration file means, one line each (sim/config/key_meaning.h).
std::span<const KeyMeaning> kernel_calibration_key_meanings();

/// One section's parameters (the keys of AttentionParams; absent keys keep their defaults,
/// the head_dim-256 efficiencies the section's head_dim-128 ones).
AttentionParams read_attention_params(const ConfigNode& node);

/// An `attention:` map in either form of the schema, in a calibration file or as a scenario's
/// override (load_calibrated): the sections it states, indexed by AttentionKernel.
std::array<std::optional<AttentionCalibration>, kAttentionKernelCount> read_attention_sections(
    const ConfigNode& node);

/// The calibration as a YAML document in the schema above, preceded by `header` (comment lines,
/// each starting with "# "). Deterministic; numbers in shortest round-trip form, so loading the
/// text gives back the same values.
std::string kernel_calibration_yaml(const KernelCalibration& calibration,
                                    const std::string& header);

}  // namespace upsim
