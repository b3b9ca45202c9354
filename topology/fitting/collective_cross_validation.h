// Leave-one-system-out validation of the collective tuning: the held-out half of
// `upsim validate collectives`.
//
// Method:
//  - a system is held out when its points make a full sweep (is_full_sweep: latency-bound sizes
//    up to the bandwidth plateau), since only a sweep tests every regime of the model;
//  - for each held-out system, the tuning parameters are fitted with fit_collective_tuning()
//    (topology/fitting/collective_fit.h) on every OTHER system, from a prior tuning
//    (nccl_prior_tuning(): NCCL's own tables and datasheet values, no value chosen on any
//    measurement), and the held-out system is validated with the result. Its points never enter the
//    fit, and nothing fitted on them enters the start;
//  - the fit is a maximum a posteriori one (CollectiveFitOptions::prior_widths, widths from
//    held_out_prior_width, centred on the prior): a few systems cannot tell some parameters
//    apart (GCP's small sizes fit a 120 us launch overhead as well as a 120 us TCPXO hop
//    latency), and the prior decides for the better-known one;
//  - two starts, the prior and the prior with every latency that has no prior width raised by
//    100 us (the simplex's first steps from 0 us are too short to reach a network's hundreds of
//    microseconds); the run with the lower minimised objective on the training systems wins;
//  - a parameter that no training point depends on (the training objective does not change
//    when it is scaled by 1.25 at the current tuning) cannot be fitted without the held-out
//    system: it keeps its prior value and the fold lists it as undetermined. The probe is
//    repeated after each fit (up to 4 rounds), since a value may matter only once others have
//    moved (an injection cap once its protocol wins somewhere);
//  - a variant, "a new network measured once", fits the parameters of link families that only
//    the held-out system has (GCP's TCPXO) on the held-out system's own points, every other
//    value as in the held-out fit: how well everything else transfers once a new network has
//    been measured. Its errors are PARTLY IN-SAMPLE and are always printed as such;
//  - the band error is the geomean |e| over the held-out points from 128 KiB to 32 MiB
//    inclusive, the sizes where latency and bandwidth terms are of one order (protocol choice,
//    injection caps, per-hop latency all matter there).
// Deterministic: the fit is (collective_fit.h), and folds run in system order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "topology/fitting/collective_fit.h"
#include "topology/fitting/collective_validation.h"
#include "topology/nccl_tuning.h"

namespace upsim {

/// The size band reported separately (bytes, inclusive).
inline constexpr int64_t kBandLowBytes = 128 * 1024;
inline constexpr int64_t kBandHighBytes = 32 * 1024 * 1024;

/// True when the points reach from a latency-bound size (<= 64 KiB) to a bandwidth-bound one
/// (>= 256 MiB) with at least 8 points.
bool is_full_sweep(std::span<const MeasuredCollective> points);

/// Geomean |e| of the points with bytes in [low, high]; 0 with `count` 0 when there are none.
double band_geomean_abs_error(const CollectiveValidation& v, int64_t low, int64_t high,
                              size_t* count);

struct HeldOutFold {
  std::string held_out;                   ///< the system validated
  std::vector<std::string> trained_on;    ///< the systems the tuning was fitted on
  CollectiveFitResult fit;                ///< on trained_on, from the prior
  CollectiveValidation validation;        ///< the held-out system with fit.tuning
  std::vector<std::string> undetermined;  ///< parameters left at the prior (see the top)
  double band_geomean = 0.0;              ///< 128 KiB - 32 MiB
  size_t band_points = 0;
  /// The "new network measured once" variant (CrossValidationOptions::fit_own_network): the
  /// parameters of link families that only the held-out system has, fitted on the held-out
  /// system's own points with every other value as in `fit`; empty when it has none. Its
  /// errors are PARTLY IN-SAMPLE: those parameters saw the points.
  std::vector<std::string> own_parameters;
  CollectiveFitResult own_fit;
  CollectiveValidation own_validation;
  double own_band_geomean = 0.0;
};

struct CrossValidationOptions {
  std::vector<std::string> parameters;  ///< fitted in every fold; must not be empty
  int max_evaluations = 3000;           ///< per fold (CollectiveFitOptions::max_evaluations)
  /// Fit each fold with a Gaussian prior centred on the prior tuning (CollectiveFitOptions::
  /// prior_widths, widths from held_out_prior_width); false: plain least squares.
  bool use_prior = true;
  /// Also run the variant that fits the held-out system's own link families on its points
  /// (HeldOutFold::own_parameters).
  bool fit_own_network = true;
  /// Folds run in parallel on this many threads, each with its own copy of the fabrics
  /// (0: one per hardware thread, as parallel_for counts them). The folds are independent, so the
  /// result is the same for any count.
  unsigned threads = 0;
};

/// The width of the prior on a calibrated parameter in held-out fits, in the fit coordinate
/// (collective_fit.h): how well the prior value is known without measurements.
///  - launch_overhead 0.5 (a factor of 1.65): a kernel launch plus NCCL's host-side enqueue is
///    a few microseconds (Lin et al., TPDS 2024, add 5 us to every kernel);
///  - NCCL table latencies (base_latency, hop_latency) and injection caps 1.0 (NCCL's own model
///    values, for a model that differs from upsim's);
///  - efficiencies and nvls_efficiency 0.3 (achieved / nominal bandwidth, 0.55 - 1);
///  - a link family's extra_hop_latency and anything else: 0, no prior (a network plugin's
///    latency is not known without measuring it).
double held_out_prior_width(std::string_view name);

/// One fold per system with a full sweep, in order. Throws std::invalid_argument when fewer
/// than two systems are given or no system has a full sweep, and as fit_collective_tuning()
/// does (a fold's exception, the first in fold order, after every thread has stopped).
std::vector<HeldOutFold> leave_one_system_out(std::span<const CollectiveFitSystem> systems,
                                              const CollectiveTuning& prior,
                                              const CrossValidationOptions& options);

/// Per fold: what was held out, what it was fitted on, the parameters (prior -> fitted, the
/// undetermined ones marked), the held-out table and its geomean / band geomean; then a summary
/// line per fold.
std::string format_cross_validation(std::span<const HeldOutFold> folds, std::string_view prior_name,
                                    bool points);

}  // namespace upsim
