#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Interval width for a device no layer timing came from (issue #13).
//
// The split-conformal intervals of intervals.hpp are calibrated on residuals of
// runs whose device the layer models saw. For a GPU known only by its spec
// sheet the error is of another kind: a bias shared by every run of that GPU
// (how close it gets to its spec rates), which those residuals never contain.
// In leave-one-GPU-out their 80 % intervals covered 58 % of the runs.
//
// The device-out spread measures that error on the training data itself: for
// every device D with labelled single-device runs, layer models are trained on
// the samples of the other devices only, and D's runs are predicted by their
// plain sum T_sum (the refinement is not retrained per fold: it does not see
// a device's efficiency either, and in leave-one-GPU-out it moved the error by
// about a point). The scores are s = |log(measured / T_sum)|. Runs are
// clustered by device (the bias is shared), so every device gets the same total
// weight and q(level) is the weighted quantile of s at that level. With a
// handful of devices this is an estimate, not a finite-sample guarantee;
// `scaledl eval --protocol leave-one-device-out` measures its coverage with the
// spread computed inside each split's training devices.
//
// A run of D is skipped when D's fold lacks a layer model (type, direction) that
// the model of all devices has and the run needs (e.g. D held the only backward
// rows): the fold would then measure the roofline fallback, which the bundle
// never uses for it. Multi-device runs are skipped (their T_comm is not a layer
// time).
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

/// A labelled run for the device-out spread: its layer graph, device key, measured T_iter (ms).
struct DeviceOutRun {
  const LayerGraph* graph = nullptr;
  std::string device;
  double target_ms = NAN;
};

struct DeviceSpread {
  double q80 = NAN, q95 = NAN;  ///< weighted quantiles of |log(measured / T_sum)|
  int64_t devices = 0;          ///< devices that contributed residuals
  int64_t runs = 0;             ///< runs that contributed
  int64_t skipped = 0;          ///< runs skipped (multi-device, or a fold without a needed layer model)
  /// log(measured / T_sum) of every used run, by device.
  std::map<std::string, std::vector<double>> residuals;

  bool valid() const { return devices >= 2 && std::isfinite(q80) && std::isfinite(q95); }
  /// {"method", "q80", "q95", "devices", "runs", "skipped", "per_device": {dev: {runs, mre_pct, bias_pct}}}
  nlohmann::json to_json() const;
};

/// The training data of a leave-one-device-out fold: the samples and device
/// records of every device but `device`.
struct DeviceFold {
  std::vector<LayerSample> samples;
  std::map<std::string, DeviceRecord> devices;
};
DeviceFold leave_device_out(const std::vector<LayerSample>& samples,
                            const std::map<std::string, DeviceRecord>& devices, const std::string& device);

/// Layer models trained without some devices' samples, by a caller's key: reused
/// across calls (eval trains the same folds once per seed otherwise).
using LayerModelCache = std::map<std::string, std::shared_ptr<const LayerPredictor>>;

/// The layer models trained on `samples` less those of `device`, taken from
/// `cache` under `cache_key + "\n" + device` or trained and stored there (cache
/// may be null).
std::shared_ptr<const LayerPredictor> model_without_device(const std::vector<LayerSample>& samples,
                                                           const std::map<std::string, DeviceRecord>& devices,
                                                           const std::string& device,
                                                           const TrainOptions& layer_options,
                                                           LayerModelCache* cache,
                                                           const std::string& cache_key = "");

/// True when `fold` has a layer model of every (type, direction) of `g` that
/// `full` has: the fold's T_sum of `g` needs no roofline fallback the full
/// model would not use.
bool fold_covers(const LayerGraph& g, const LayerPredictor& full, const LayerPredictor& fold);

/// The device-out spread (top of this file). `samples` are the layer samples the
/// full model trains on; a fold for device D trains on those whose device is not
/// D. Needs >= 3 devices with samples and runs of >= 2 of them, else the result
/// is not valid(). `cache_key` prefixes the cache keys (the caller's own
/// exclusions), `cache` may be null.
DeviceSpread device_out_spread(const std::vector<DeviceOutRun>& runs, const std::vector<LayerSample>& samples,
                               const std::map<std::string, DeviceRecord>& devices,
                               const TrainOptions& layer_options, LayerModelCache* cache = nullptr,
                               const std::string& cache_key = "");

// Anchoring. A few iterations measured on the target device (minutes on a
// rented GPU) tell its bias. With residuals r_i = log(measured_i / predicted_i)
// of n such runs, a device bias b ~ N(0, s_dev^2) (s_dev: the device-out spread
// q80 / z80) and run noise e ~ N(0, s_run^2) about it (s_run: the in-domain q80 /
// z80), the posterior of b is normal with
//     mean  sum(r) / (n + s_run^2 / s_dev^2),   sd  (1 / s_dev^2 + n / s_run^2)^(-1/2).
// Predictions are multiplied by exp(mean); the half-width is at least
// z_level sqrt(sd^2 + s_run^2) (a new run: the bias left plus its own noise).
// One anchor removes most of a GPU's bias when the bias is large against the
// run noise, and little when it is not (it is shrunk toward 0).

/// z of a two-sided normal interval at 80 % and 95 %.
constexpr double kZ80 = 1.2815515655446004, kZ95 = 1.959963984540054;

struct AnchorFit {
  int64_t n = 0;        ///< anchor runs
  double log_bias = 0;  ///< posterior mean of log(measured / predicted) on the device
  double sd_post = 0;   ///< its posterior sd
  double prior_sd = 0, run_sd = 0;
  double factor() const { return std::exp(log_bias); }
  /// Smallest half-width (log space) of a new run's interval at level 0.80 or 0.95.
  double half_width(double level) const;
  nlohmann::json to_json() const;
};

/// The posterior above. prior_sd and run_sd > 0 and finite; residuals finite; else Error.
AnchorFit fit_anchor(const std::vector<double>& log_residuals, double prior_sd, double run_sd);

struct IntervalModel;
struct Interval;
/// (prior sd, run sd) of anchoring with interval model `iv`: run sd = its
/// in-domain q80 / z80 at the widest size scale; prior sd = the device-out
/// spread's q80 / z80 for a device without layer timings (unseen_device, when
/// `iv` has the spread), else the run sd.
std::pair<double, double> anchor_sds(const IntervalModel& iv, bool unseen_device);
/// The interval of level 0.80 or 0.95 around an anchored prediction `pred_ms`:
/// half-width the larger of iv's in-domain one (out-of-domain distance d, T_sum
/// t_sum_ms) and a.half_width(level).
Interval anchored_interval(const IntervalModel& iv, const AnchorFit& a, double pred_ms, double d,
                           double level, double t_sum_ms);

/// The weighted quantile used above: every group gets total weight 1 / #groups,
/// split equally among its values; the smallest value whose cumulative weight
/// (ascending) reaches `level`. NaN for no values. level in (0, 1].
double group_weighted_quantile(const std::map<std::string, std::vector<double>>& values, double level);

}  // namespace scaledl
