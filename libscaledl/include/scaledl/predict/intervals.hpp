#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Prediction intervals for T_iter: split-conformal in log space, widened out of
// the training domain.
//
// In domain. The refinement is trained with a held-out validation share of the
// runs (GnnTrainOptions::val_fraction, also its early-stopping set). The
// scaled absolute log residuals s_i = |log(measured_i / predicted_i)| / sigma_i
// of those n runs (sigma: a fitted power of the run's T_sum, because small runs
// are noisier: locally weighted conformal, Lei et al. 2018; an interval is
// drawn no narrower than at the median T_sum, see u_floor) give, for a level
// 1 - a, the conformal quantile
//     q = the ceil((n + 1)(1 - a))-th smallest s_i          (infinite if that exceeds n)
// and the interval [T e^-q sigma, T e^q sigma]. For runs exchangeable with the validation
// runs this covers the measured time with probability >= 1 - a (Vovk et al.;
// Lei et al. 2018). The validation runs also chose the stopping epoch, which
// makes q slightly optimistic; scaledl eval measures the coverage on test runs.
//
// Out of domain. A configuration whose global features lie a distance d outside
// the training range (Normalizer::ood_distance: in units of each feature's
// range) is not exchangeable with the validation runs. Its half-width is
//     q (1 + kappa min(d, d_max)),
// with kappa fitted on an extrapolation split of the training runs (train on the
// 70 % with the smallest T_sum, predict the largest 30 %: the smallest kappa >=
// kappa_min at which both levels reach their nominal coverage there) and never
// below kappa_min (an interval always widens out of domain). d_max is the
// farthest distance of that split (at least 1): farther out the width is not
// calibrated, and predict says so instead of widening without bound.
//
// Unseen device. For a device no layer timing of the bundle came from, the
// half-width is at least the device-out spread of device_intervals.hpp
// (unseen_q80 / unseen_q95): max(q sigma (1 + kappa min(d, d_max)), q_unseen).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/gnn/graph_inference.hpp"
#include "scaledl/gnn/train_options.hpp"

namespace scaledl {

/// A prediction interval, ms.
struct Interval {
  double lo = NAN, hi = NAN;
};

struct IntervalModel {
  int64_t n_cal = 0;            ///< calibration (validation) runs
  double q80 = NAN, q95 = NAN;  ///< conformal quantiles of |log residual| / sigma at 80 % and 95 %
  /// Scale of the residuals by run size: sigma(T_sum) = exp(c0 + c1 clamp(log T_sum, u_lo, u_hi)),
  /// a least-squares fit of log |r| on log T_sum over the calibration runs (small
  /// runs are noisier). c0 = c1 = 0: sigma = 1 (plain absolute residuals).
  double scale_c0 = 0, scale_c1 = 0, u_lo = 0, u_hi = 0;
  /// Drawn intervals narrow with T_sum only up to this log T_sum (the calibration
  /// runs' median): the fit holds in distribution, and the runs above the median
  /// are those a user extrapolates to (ood-size covered 63 % at 80 % without it).
  /// The conformal scores use the unfloored sigma. NaN: no floor (older bundles).
  double u_floor = NAN;
  double kappa80 = 0.5;         ///< widening per unit of out-of-domain distance, 80 % level
  double kappa = 0.5;           ///< the same, 95 % level
  double kappa_min = 0.5;       ///< floor of kappa
  int64_t n_extrapolation = 0;  ///< runs of the extrapolation split kappa was fitted on (0: none)
  /// Widening stops at this distance: the farthest distance kappa was fitted on
  /// (at least 1). Beyond it the interval is not calibrated (beyond_calibration()).
  double d_max = 1.0;
  std::string source;  ///< how it was calibrated, for the manifest
  /// Device-out spread (device_intervals.hpp) at 80 % and 95 %: the smallest
  /// half-width for a device without layer timings. NaN = none calibrated.
  double unseen_q80 = NAN, unseen_q95 = NAN;
  /// What calibrated them (DeviceSpread::to_json()), kept in the manifest.
  nlohmann::json unseen_info;

  bool valid() const { return n_cal > 0 && std::isfinite(q80) && std::isfinite(q95); }
  /// Interval of level 0.80 or 0.95 around `pred_ms` at out-of-domain distance `d`
  /// for a run whose plain sum is `t_sum_ms` (half-width q sigma(T_sum)
  /// (1 + kappa min(d, d_max)) in log space; a non-finite t_sum takes the larger
  /// sigma of the calibration range). `unseen_device`: the device has no layer
  /// timings in the training data; the half-width is then at least unseen_q.
  Interval at(double pred_ms, double d, double level, double t_sum_ms = NAN,
              bool unseen_device = false) const;
  /// True when an unseen device's intervals use the device-out spread.
  bool has_unseen() const { return std::isfinite(unseen_q80) && std::isfinite(unseen_q95); }
  /// sigma(T_sum) of the scale model above (the conformal scores' scale).
  double sigma(double t_sum_ms) const;
  /// The scale an interval is drawn with: sigma, no smaller than at u_floor.
  double width_scale(double t_sum_ms) const;
  /// True when `d` exceeds d_max: the interval is a floor, not a calibrated width.
  bool beyond_calibration(double d) const { return d > d_max; }
  nlohmann::json to_json() const;
  /// Throws naming ctx and the key on a missing or invalid field.
  static IntervalModel from_json(const nlohmann::json& j, const std::string& ctx);
};

/// The ceil((n + 1) level)-th smallest of `scores` (n = scores.size()); +inf
/// when that rank exceeds n (too few scores for the level). level in (0, 1).
double conformal_quantile(std::vector<double> scores, double level);

/// kappa for one level from an extrapolation set: scaled log residuals r_i at
/// distances d_i and that level's quantile q (see the top of this file): the
/// smallest kappa >= kappa_min with |r_i| <= q (1 + kappa d_i) for a share
/// >= level of the set (the largest kappa any miss needs when none suffices).
double fit_kappa(const std::vector<double>& log_residuals, const std::vector<double>& distances, double q,
                 double level, double kappa_min);

/// q80, q95 and the size scale from calibration log residuals and the runs'
/// T_sum (ms); kappa = kappa80 = kappa_min. Too few residuals: q infinite (invalid).
IntervalModel calibrate_from_residuals(const std::vector<double>& log_residuals,
                                       const std::vector<double>& t_sum_ms, double kappa_min = 0.5);

/// Calibrates intervals for a model trained on `graphs` with (cfg, opt), given
/// that training's report (its validation residuals): q80/q95 from them (from
/// 5-fold cross-validated residuals of all graphs instead when there are fewer
/// than 19 validation runs, too few for the 95 % level); kappa
/// from one more model trained on the 70 % of `graphs` with the smallest T_sum
/// and tested on the rest (skipped, kappa = kappa_min, below 20 graphs).
IntervalModel calibrate_intervals(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt, const GnnTrainReport& report,
                                  double kappa_min = 0.5);

}  // namespace scaledl
