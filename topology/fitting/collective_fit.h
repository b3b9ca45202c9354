// Fitting the collective tuning (topology/nccl_tuning.h) to measured collective times: the core of
// `upsim calibrate collectives`.
//
// Method (the one that produced the calibrated values of nccl_tuning.cpp):
//  - every measured point of every system is simulated as validate_collective() does (the flow
//    network over the system's fabric, one collective alone, NCCL-like algorithm and protocol
//    choice included);
//  - the objective is the sum over systems of the mean over the system's points of the Huber
//    loss of r = ln(predicted / measured): r^2 up to |r| = ln 1.25, linear beyond (one glitched
//    measurement, such as the DGX H100 sweep's 32 B point at 5x its neighbours, must not steer
//    a fit), so each system weighs the same whatever its point count;
//  - it is minimised over the named parameters by Nelder-Mead with the adaptive coefficients of
//    Gao & Han (2012) for n parameters (reflection 1, expansion 1 + 2/n, contraction
//    3/4 - 1/(2n), shrink 1 - 1/n) from the start tuning, in transformed coordinates: ln(v + 1)
//    for latencies in us (so zero is reachable), ln(v) for bandwidth caps and efficiencies
//    (efficiencies capped at 1). The first simplex steps every coordinate by 0.3 from the start
//    (a fraction at its cap of 1 starts at the cap and steps downwards: above it nothing changes).
//    Each restart (below) starts the same way.
//    A run ends when the simplex has collapsed (objective spread <= 1e-9 x best + 1e-15 and
//    coordinate spread <= 1e-5); the search then restarts from the best point (up to 10 times,
//    while a run improves the objective by more than 1e-9 relatively). Everything stops after
//    `max_evaluations` objective evaluations;
//  - fitted values are rounded to 4 significant digits (as the shipped values are); the "after"
//    errors are those of the rounded values. If rounding made the objective worse than at the
//    start, the start values are kept.
// No randomness and a fixed evaluation order: the same input gives the same output, bit for bit.
//
// Parameters are named by their key path in the tuning YAML (configs/collectives/nccl_like.yaml):
//   launch_overhead, net_overhead                          (latency, us)
//   tree_efficiency, nvls_efficiency, nvls_tree_efficiency (fraction in (0, 1])
//   protocols.<LL|LL128|Simple>.injection_cap              (GB/s; the start must be > 0)
//   protocols.<P>.single_node_injection_caps.<link kind>   (GB/s; an entry of the start tuning)
//   protocols.<P>.base_latency.<tree|ring|nvls>            (us)
//   protocols.<P>.hop_latency.<nvlink|pci|net>.<tree|ring|nvls>  (us)
//   link_families.<family name>.efficiency                 (fraction)
//   link_families.<family name>.extra_hop_latency.<P>      (us)
//
// Which points determine which parameter: launch overhead and latencies the small sizes
// (latency-bound, below ~64 KiB on NVLink, ~1 MiB across nodes); LL / LL128 injection caps the
// mid sizes where those protocols win (~64 KiB - 16 MiB); a family's efficiency the plateau
// (largest sizes) of systems whose bottleneck links are of that family; NVLS efficiency the
// plateau of NVLink 4 systems where NVLS wins. A parameter no point depends on stays at its
// start value (the objective is flat along it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"
#include "topology/fabric.h"
#include "topology/fitting/collective_validation.h"
#include "topology/nccl_tuning.h"

namespace upsim {

enum class TuningParameterUnit : uint8_t { kMicroseconds, kGigabytesPerSecond, kFraction };
std::string_view tuning_parameter_unit_name(TuningParameterUnit unit);
/// `v` with its unit for reports: 4 significant digits, then " us", " GB/s" or nothing.
std::string format_tuning_value(TuningParameterUnit unit, double v);

/// A fittable number of a CollectiveTuning, by its YAML key path.
struct TuningParameter {
  std::string name;
  TuningParameterUnit unit = TuningParameterUnit::kMicroseconds;
};

/// Resolves a parameter name against `tuning` (families are looked up by name). Throws
/// std::invalid_argument naming the parameter and the valid forms.
TuningParameter tuning_parameter(const CollectiveTuning& tuning, std::string_view name);
/// The parameter's value in its unit (us, GB/s or a fraction).
double tuning_parameter_value(const CollectiveTuning& tuning, const TuningParameter& parameter);
/// Sets the parameter (value in its unit); durations round to the picosecond.
void set_tuning_parameter(CollectiveTuning& tuning, const TuningParameter& parameter, double value);

/// One measured system: its fabric, the collective measured and the points (nccl-tests' size
/// and out-of-place time, see collective_validation.h). Every GPU of the fabric is a rank.
struct CollectiveFitSystem {
  std::string name;
  Fabric fabric;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::vector<MeasuredCollective> points;
  /// Per-call overhead of the measuring harness, added to every predicted time of this system
  /// (CollectiveValidationCase::harness_overhead); zero for nccl-tests.
  Duration harness_overhead{};
};

/// Where the point loss turns from quadratic to linear: |ln(predicted / measured)| = ln 1.25.
inline constexpr double kCollectiveLossKnee = 0.22314355131420976;

/// Huber loss of r = ln(predicted / measured): r^2 for |r| <= kCollectiveLossKnee, else
/// 2 knee |r| - knee^2 (continuous, with a continuous slope).
double collective_point_loss(double predicted_us, double measured_us);

/// Sum over systems of mean_i collective_point_loss(predicted_i, measured_i) of the validations.
double collective_fit_objective(std::span<const CollectiveValidation> validations);

/// Validates every system with `tuning` (validate_collective), in order, on up to `threads`
/// threads (0: one per hardware thread): each system by one thread, so the systems must not
/// share a Fabric (Fabric::route fills a cache). The result does not depend on `threads`.
std::vector<CollectiveValidation> validate_systems(std::span<const CollectiveFitSystem> systems,
                                                   const CollectiveTuning& tuning,
                                                   unsigned threads = 1);
/// The same over systems held elsewhere (a subset, as leave-one-system-out fits use).
std::vector<CollectiveValidation> validate_system_subset(
    std::span<const CollectiveFitSystem* const> systems, const CollectiveTuning& tuning,
    unsigned threads = 1);

/// The parameters `upsim calibrate collectives` fits when none are named: launch_overhead when
/// some system has a point of at most 64 KiB, and the efficiency of every link family that has
/// a bottleneck link of a system's largest measured size (planned flows alone; a link whose
/// bytes take at least 90% of the busiest link's time), since those plateaus determine it; in
/// the order of tuning.families.
std::vector<std::string> default_fit_parameters(std::span<const CollectiveFitSystem> systems,
                                                const CollectiveTuning& tuning);

struct CollectiveFitOptions {
  std::vector<std::string> parameters;  ///< names as above; must not be empty or repeat
  int max_evaluations = 3000;           ///< objective evaluations, all restarts together
  /// Optional Gaussian prior per parameter (a maximum a posteriori fit), in the order of
  /// `parameters`: the width is the prior's standard deviation in the fit coordinate (ln(v + 1)
  /// for us, ln(v) otherwise; 0 = no prior on that parameter), the centre its mean in the
  /// parameter's unit (empty: the start values). The minimised objective becomes
  ///   sum over systems of mean loss(pred, meas) + prior_noise^2 x sum_i ((x_i - c_i) / w_i)^2,
  /// as if each system's mean (Huber) squared log error were a Gaussian likelihood with noise
  /// prior_noise. Breaks ties between parameters the data cannot tell apart (a per-call overhead
  /// and a network's per-hop latency on one two-node system) in favour of the prior; with
  /// widths empty the fit is the plain least squares above. Reported objectives are the data
  /// term only.
  std::vector<double> prior_widths;
  std::vector<double> prior_centres;
  double prior_noise = 0.05;
  /// Each objective evaluation validates the systems on up to this many threads
  /// (validate_system_subset; 0: one per hardware thread). The fit does not depend on it.
  unsigned threads = 1;
};

struct FittedParameter {
  TuningParameter parameter;
  double start = 0.0;
  double fitted = 0.0;
};

struct CollectiveFitResult {
  CollectiveTuning tuning;  ///< the start tuning with the fitted values
  std::vector<FittedParameter> parameters;
  std::vector<CollectiveValidation> before;  ///< with the start tuning
  std::vector<CollectiveValidation> after;   ///< with the fitted tuning
  double objective_before = 0.0;
  double objective_after = 0.0;
  /// The prior term of the minimised objective at the fitted values (0 without prior_widths).
  double prior_penalty_after = 0.0;
  int evaluations = 0;
  bool converged = false;  ///< false when max_evaluations stopped it
};

/// Fits `options.parameters` (see the top of this file). Throws std::invalid_argument for no
/// systems, a system without points, an unknown or repeated parameter, a cap whose start is 0
/// (no cap), or max_evaluations < 1.
CollectiveFitResult fit_collective_tuning(std::span<const CollectiveFitSystem> systems,
                                          const CollectiveTuning& start,
                                          const CollectiveFitOptions& options);
/// The same over systems held elsewhere (none may be null).
CollectiveFitResult fit_collective_tuning_subset(
    std::span<const CollectiveFitSystem* const> systems, const CollectiveTuning& start,
    const CollectiveFitOptions& options);

/// The per-system error table before and after (points, geomean |e|, plateau busbw error,
/// max |e|), the parameters (start, fitted) and the objective.
std::string format_fit_report(const CollectiveFitResult& result);

/// Comment lines for the written tuning file: what was fitted, on which systems, the objective.
std::string fit_file_header(const CollectiveFitResult& result, std::string_view start_name);

}  // namespace upsim
