// The interval model's calibration on a refinement's training runs (intervals.hpp):
// apart from intervals.cpp because it trains graph models (LibTorch), which a
// prediction never does (the `scaledl` binary links no LibTorch: tools/CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/predict/intervals.hpp"

namespace scaledl {

namespace {
constexpr size_t kMinCalibration = 19;  // ceil((n + 1) 0.95) <= n needs n >= 19
}  // namespace

IntervalModel calibrate_intervals(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt, const GnnTrainReport& report,
                                  double kappa_min) {
  SCALEDL_CHECK(kappa_min >= 0 && std::isfinite(kappa_min), "kappa_min={} must be >= 0", kappa_min);
  IntervalModel m;
  m.kappa_min = kappa_min;
  m.kappa = kappa_min;
  std::vector<double> res = report.val_log_residuals, tsum = report.val_t_sum_ms;
  m.source = fmt::format("{} validation runs of the refinement's training (val_fraction {})", res.size(),
                         opt.val_fraction);
  if (res.size() < kMinCalibration && graphs.size() >= kMinCalibration) {
    // Too few validation runs for the 95 % level: 5-fold cross-validated residuals of all runs.
    GnnTrainOptions o = opt;
    o.on_epoch = nullptr;
    const GnnCvReport cv =
        cross_validate_graphs(graphs, cfg, o, std::min<int64_t>(5, static_cast<int64_t>(graphs.size())));
    res.clear();
    tsum.clear();
    for (size_t i = 0; i < cv.pred_ms.size(); ++i) {
      res.push_back(std::log(cv.target_ms[i] / cv.pred_ms[i]));
      tsum.push_back(graphs[i].t_sum_ms);
    }
    m.source = fmt::format("{}-fold cross-validated residuals of {} runs", cv.folds, res.size());
  }
  const std::string source = m.source;
  m = calibrate_from_residuals(res, tsum, kappa_min);
  m.source = source;
  if (graphs.size() < 20 || !m.valid()) return m;

  // Extrapolation split: the 70 % smallest T_sum train, the rest test.
  std::vector<size_t> order(graphs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return graphs[a].t_sum_ms < graphs[b].t_sum_ms; });
  const size_t ntrain = static_cast<size_t>(0.7 * static_cast<double>(graphs.size()));
  std::vector<GraphFeatures> small;
  std::vector<const GraphFeatures*> large;
  for (size_t i = 0; i < order.size(); ++i)
    if (i < ntrain)
      small.push_back(graphs[order[i]]);
    else
      large.push_back(&graphs[order[i]]);
  GnnTrainOptions o = opt;
  o.on_epoch = nullptr;
  const GnnPrediction p = GraphPredictor::train(small, cfg, o).predict(large);
  std::vector<double> r;  // scaled like the calibration scores
  for (size_t i = 0; i < large.size(); ++i)
    r.push_back(std::log(large[i]->target_ms / p.t_pred_ms[i]) / m.width_scale(large[i]->t_sum_ms));
  m.kappa80 = fit_kappa(r, p.ood_distance, m.q80, 0.80, kappa_min);
  m.kappa = fit_kappa(r, p.ood_distance, m.q95, 0.95, kappa_min);
  m.d_max = std::max(1.0, *std::max_element(p.ood_distance.begin(), p.ood_distance.end()));
  m.n_extrapolation = static_cast<int64_t>(large.size());
  m.source +=
      fmt::format("; kappa from an extrapolation split (70 % smallest T_sum -> {} largest)", large.size());
  return m;
}

}  // namespace scaledl
