// The device-out spread (device_intervals.hpp).
#include "scaledl/predict/device_intervals.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/predict/intervals.hpp"

namespace scaledl {

namespace {
using TypeDir = std::pair<int, int>;
TypeDir type_dir(LayerType t, Direction d) {
  return {static_cast<int>(t), static_cast<int>(d)};
}
}  // namespace

double group_weighted_quantile(const std::map<std::string, std::vector<double>>& values, double level) {
  SCALEDL_CHECK(level > 0 && level <= 1, "quantile level {} must be in (0, 1]", level);
  std::vector<std::pair<double, double>> vw;  // value, weight
  size_t groups = 0;
  for (const auto& [g, v] : values) groups += !v.empty();
  if (groups == 0) return NAN;
  for (const auto& [g, v] : values)
    for (double x : v) vw.emplace_back(x, 1.0 / static_cast<double>(groups * v.size()));
  std::sort(vw.begin(), vw.end());
  double cum = 0;
  for (const auto& [x, w] : vw) {
    cum += w;
    if (cum >= level * (1 - 1e-12)) return x;
  }
  return vw.back().first;
}

nlohmann::json DeviceSpread::to_json() const {
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [dev, r] : residuals) {
    double ape = 0, bias = 0;
    for (double x : r) {
      // prediction / measured - 1 = exp(-log(measured / predicted)) - 1
      const double e = std::exp(-x) - 1;
      ape += std::abs(e);
      bias += e;
    }
    const double n = static_cast<double>(std::max<size_t>(1, r.size()));
    per[dev] = {{"runs", r.size()}, {"mre_pct", 100 * ape / n}, {"bias_pct", 100 * bias / n}};
  }
  return {{"method",
           "leave-one-device-out: |log(measured / T_sum)| of each device's runs with layer models trained "
           "without its "
           "samples; devices weighted equally"},
          {"q80", std::isfinite(q80) ? nlohmann::json(q80) : nlohmann::json()},
          {"q95", std::isfinite(q95) ? nlohmann::json(q95) : nlohmann::json()},
          {"devices", devices},
          {"runs", runs},
          {"skipped", skipped},
          {"per_device", per}};
}

double AnchorFit::half_width(double level) const {
  SCALEDL_CHECK(level == 0.80 || level == 0.95, "interval level {} is not 0.80 or 0.95", level);
  return (level == 0.80 ? kZ80 : kZ95) * std::sqrt(sd_post * sd_post + run_sd * run_sd);
}

nlohmann::json AnchorFit::to_json() const {
  return {{"runs", n},
          {"log_bias", log_bias},
          {"factor", factor()},
          {"sd_post", sd_post},
          {"prior_sd", prior_sd},
          {"run_sd", run_sd},
          {"method", "normal-normal posterior of the device's log bias (device_intervals.hpp)"}};
}

AnchorFit fit_anchor(const std::vector<double>& log_residuals, double prior_sd, double run_sd) {
  SCALEDL_CHECK(std::isfinite(prior_sd) && prior_sd > 0, "anchor: prior sd {} must be > 0 and finite",
                prior_sd);
  SCALEDL_CHECK(std::isfinite(run_sd) && run_sd > 0, "anchor: run sd {} must be > 0 and finite", run_sd);
  AnchorFit a;
  a.prior_sd = prior_sd;
  a.run_sd = run_sd;
  a.n = static_cast<int64_t>(log_residuals.size());
  double sum = 0;
  for (double r : log_residuals) {
    SCALEDL_CHECK(std::isfinite(r), "anchor: log residual {} is not finite", r);
    sum += r;
  }
  const double n = static_cast<double>(a.n);
  a.log_bias = sum / (n + (run_sd * run_sd) / (prior_sd * prior_sd));
  a.sd_post = 1.0 / std::sqrt(1.0 / (prior_sd * prior_sd) + n / (run_sd * run_sd));
  return a;
}

std::pair<double, double> anchor_sds(const IntervalModel& iv, bool unseen_device) {
  const double run_sd = iv.q80 * iv.sigma(NAN) / kZ80;
  return {unseen_device && iv.has_unseen() ? iv.unseen_q80 / kZ80 : run_sd, run_sd};
}

Interval anchored_interval(const IntervalModel& iv, const AnchorFit& a, double pred_ms, double d,
                           double level, double t_sum_ms) {
  const Interval in = iv.at(pred_ms, d, level, t_sum_ms, /*unseen_device=*/false);
  const double q = std::max(std::log(in.hi / pred_ms), a.half_width(level));
  return {pred_ms * std::exp(-q), pred_ms * std::exp(q)};
}

DeviceFold leave_device_out(const std::vector<LayerSample>& samples,
                            const std::map<std::string, DeviceRecord>& devices, const std::string& device) {
  DeviceFold f;
  for (const auto& s : samples)
    if (s.device != device) f.samples.push_back(s);
  f.devices = devices;
  f.devices.erase(device);
  return f;
}

std::shared_ptr<const LayerPredictor> model_without_device(const std::vector<LayerSample>& samples,
                                                           const std::map<std::string, DeviceRecord>& devices,
                                                           const std::string& device,
                                                           const TrainOptions& layer_options,
                                                           LayerModelCache* cache,
                                                           const std::string& cache_key) {
  const std::string key = cache_key + "\n" + device;
  if (cache) {
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  const DeviceFold f = leave_device_out(samples, devices, device);
  TrainOptions lo = layer_options;
  lo.verbose = false;
  auto lp = std::make_shared<const LayerPredictor>(LayerPredictor::train_samples(f.samples, f.devices, lo));
  if (cache) (*cache)[key] = lp;
  return lp;
}

bool fold_covers(const LayerGraph& g, const LayerPredictor& full, const LayerPredictor& fold) {
  for (const auto& n : g.nodes)
    if (full.has_model(n.type, n.dir) && !fold.has_model(n.type, n.dir)) return false;
  return true;
}

DeviceSpread device_out_spread(const std::vector<DeviceOutRun>& runs, const std::vector<LayerSample>& samples,
                               const std::map<std::string, DeviceRecord>& devices,
                               const TrainOptions& layer_options, LayerModelCache* cache,
                               const std::string& cache_key) {
  DeviceSpread out;
  std::map<std::string, std::set<TypeDir>> kinds;  // device -> (type, direction) of its samples
  for (const auto& s : samples) kinds[s.device].insert(type_dir(s.type, s.dir));
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < runs.size(); ++i) {
    const DeviceOutRun& r = runs[i];
    SCALEDL_CHECK(r.graph, "device_out_spread: run {} has no layer graph", i);
    if (r.graph->settings.num_devices != 1 || !kinds.count(r.device) || !(r.target_ms > 0)) {
      out.skipped += 1;
      continue;
    }
    by_device[r.device].push_back(i);
  }
  if (kinds.size() < 3 || by_device.size() < 2) {
    for (auto& [d, idx] : by_device) out.skipped += static_cast<int64_t>(idx.size());
    return out;
  }
  for (const auto& [dev, idx] : by_device) {
    const std::shared_ptr<const LayerPredictor> lp =
        model_without_device(samples, devices, dev, layer_options, cache, cache_key);
    std::set<TypeDir> others;  // what the fold has rows of
    for (const auto& [d, k] : kinds)
      if (d != dev) others.insert(k.begin(), k.end());
    const DeviceRecord& rec = devices.at(dev);
    for (size_t i : idx) {
      const LayerGraph& g = *runs[i].graph;
      bool covered = true;
      for (const auto& n : g.nodes) {
        const TypeDir td = type_dir(n.type, n.dir);
        if (!others.count(td) && kinds.at(dev).count(td)) {
          covered = false;
          break;
        }
      }
      if (!covered) {
        out.skipped += 1;
        continue;
      }
      double t_sum = 0;
      for (double t : lp->predict_nodes(g, rec)) t_sum += t;
      out.residuals[dev].push_back(std::log(runs[i].target_ms / t_sum));
      out.runs += 1;
    }
  }
  std::map<std::string, std::vector<double>> scores;
  for (const auto& [dev, r] : out.residuals) {
    if (r.empty()) continue;
    auto& s = scores[dev];
    for (double x : r) s.push_back(std::abs(x));
  }
  out.devices = static_cast<int64_t>(scores.size());
  if (out.devices >= 2) {
    out.q80 = group_weighted_quantile(scores, 0.80);
    out.q95 = group_weighted_quantile(scores, 0.95);
  }
  return out;
}

}  // namespace scaledl
