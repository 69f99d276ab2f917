// The layer times of each split's runs in `scaledl eval` (run_eval_detail.hpp): layer models
// without the held-out device (leave-one-device-out, --device-crossfit), with the split's
// in-model rows (--in-model), calibrations (--calibrate-rows), the host term (--host-term,
// --host-node-us) and the held-out device's interval width.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "eval/run_eval_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/predict/graph_cv.hpp"
#include "scaledl/predict/physics.hpp"

namespace scaledl::eval_detail {

std::optional<LayerCalibration> Evaluation::calibrate_device(const LayerPredictor& p,
                                                             const std::vector<LayerSample>& rows,
                                                             const std::string& dev) {
  std::vector<LayerSample> mine;
  for (const auto& x : rows)
    if (x.device == dev) mine.push_back(x);
  if (mine.empty()) return std::nullopt;
  CalibrationOptions co;
  co.max_rows = o.calibrate_rows;
  LayerCalibration c = calibrate_layers(p, mine, devices.at(dev), co);
  if (std::none_of(calibrations.begin(), calibrations.end(),
                   [&](const nlohmann::json& j) { return j["device"] == c.device; })) {
    calibrations.push_back(c.to_json());
    log(fmt::format("--calibrate-rows: {}", calibrations.back().dump()));
  }
  return c;
}

GraphFeatures Evaluation::featurize_run(size_t i, const LayerPredictor& lp,
                                        const LayerCalibration* cal) const {
  const EvalRun& r = res.runs[i];
  GraphContext gc;
  gc.device = devices.at(r.device);
  gc.target_ms = r.target_ms;
  std::vector<double> t = lp.predict_nodes(irs[i], gc.device);
  if (cal && cal->device == r.device) cal->apply(irs[i], t);
  GraphFeatures f = featurize(irs[i], t, gc);
  f.label = r.label;
  return f;
}

// With --host-term: each GPU's host cost per node, fitted on the split's training
// runs, in copies of the graphs of that GPU's runs (kept in `host_copies`).
std::vector<const GraphFeatures*> Evaluation::with_host_term(const EvalSplit& sp,
                                                             std::vector<const GraphFeatures*> G) {
  host_copies.clear();
  if (!o.host_term && o.host_node_ms <= 0) return G;
  std::map<std::string, double> d;
  if (o.host_term) {
    std::vector<HostRun> hr;
    for (size_t i : sp.train) hr.push_back(graph_host_run(*G[i], res.runs[i].device, res.runs[i].target_ms));
    d = fit_host_node_ms(hr, devices);
  }
  for (size_t i = 0; i < G.size(); ++i) {
    auto it = d.find(res.runs[i].device);
    const double di =
        it != d.end() ? it->second : (devices.at(res.runs[i].device).kind == "cpu" ? 0 : o.host_node_ms);
    if (di <= 0) continue;
    host_copies.push_back(*G[i]);
    apply_host_term(host_copies.back(), di);
    G[i] = &host_copies.back();
  }
  return G;
}

// --device-crossfit: a training run's layer times from models that saw neither its device
// nor the held-out one: the refinement learns on sums of unseen GPUs, as it is tested. A run
// needing a model only its own device's rows give has no such sum: the graph methods do not
// train on it.
void Evaluation::device_crossfit(const EvalSplit& sp, const DeviceFold& f, const LayerPredictor& lp,
                                 const std::vector<GraphFeatures>& own) {
  std::vector<GraphFeatures> dout = own;
  std::vector<char>& ok = crossfit_ok[sp.held_out_device];
  ok.assign(res.runs.size(), 1);
  int64_t swapped = 0, kept = 0;
  for (size_t i : sp.train) {
    const std::string& dev = res.runs[i].device;
    if (dev == sp.held_out_device) continue;
    const auto m =
        model_without_device(f.samples, f.devices, dev, o.layers, &spread_models, sp.held_out_device);
    if (!fold_covers(irs[i], lp, *m)) {
      ok[i] = 0;
      ++kept;
      continue;
    }
    dout[i] = featurize_run(i, *m);
    ++swapped;
  }
  device_out_cache.emplace(sp.held_out_device, std::move(dout));
  log(
      fmt::format("device cross-fit without {}: {} training runs from models without their device, {} "
                  "left out of the graph methods' training (a layer model only their device has)",
                  sp.held_out_device, swapped, kept));
}

// Layer models without a single row of the held-out device: every run's graph with their
// layer times (the held-out device's calibrated with --calibrate-rows) into device_cache.
void Evaluation::train_without_device(const EvalSplit& sp) {
  const auto tl = Clock::now();
  const DeviceFold f = leave_device_out(layer_samples, data.devices, sp.held_out_device);
  TrainOptions lo = o.layers;
  lo.verbose = false;
  const LayerPredictor lp = LayerPredictor::train_samples(f.samples, f.devices, lo);
  std::optional<LayerCalibration> cal;
  if (o.calibrate_rows > 0) {
    // K of the held-out device's own rows per kind, as a short benchmark on it would give.
    cal = calibrate_device(lp, layer_samples, sp.held_out_device);
    SCALEDL_CHECK(cal.has_value(), "--calibrate-rows={}: the held-out device {} has no layer rows",
                  o.calibrate_rows, sp.held_out_device);
  }
  std::vector<GraphFeatures> own(res.runs.size());
  for (size_t i = 0; i < res.runs.size(); ++i) own[i] = featurize_run(i, lp, cal ? &*cal : nullptr);
  if (o.device_crossfit) device_crossfit(sp, f, lp, own);
  device_cache.emplace(sp.held_out_device, std::move(own));
  log(fmt::format("layer models without {} ({} of {} layer samples, {:.1f} s)", sp.held_out_device,
                  f.samples.size(), layer_samples.size(), secs_since(tl)));
}

// --in-model: layer models that also train on the in-model rows of the split's training
// runs; the training runs' layer times cross-fitted, the others' from the model of all.
const std::vector<GraphFeatures>& Evaluation::in_model_graphs(const std::vector<size_t>& train) {
  auto it = split_cache.find(train);
  if (it != split_cache.end()) return it->second;
  const auto tl = Clock::now();
  std::set<std::string> groups;
  for (size_t i : train) groups.insert(res.runs[i].group);
  std::vector<LayerSample> smp = layer_samples;
  for (const auto& sm : im_samples)
    if (groups.count(sm.group)) smp.push_back(sm);
  std::vector<GraphFeatures> own(res.runs.size());
  TrainOptions lo = o.layers;
  lo.verbose = false;
  const LayerPredictor full = LayerPredictor::train_samples(smp, data.devices, lo);
  std::vector<char> in_train(res.runs.size(), 0);
  for (size_t i : train) in_train[i] = 1;
  std::map<std::string, std::optional<LayerCalibration>> cal_full;  // test devices, against `full`
  for (size_t i = 0; i < res.runs.size(); ++i) {
    if (in_train[i]) continue;
    const EvalRun& r = res.runs[i];
    if (r.test_store && !cal_full.count(r.device))
      cal_full[r.device] = calibrate_device(full, test_rows, r.device);
    const auto c = r.test_store ? cal_full.find(r.device) : cal_full.end();
    own[i] = featurize_run(i, full, c != cal_full.end() && c->second ? &*c->second : nullptr);
  }
  std::vector<std::string> tg;
  for (size_t i : train) tg.push_back(res.runs[i].group);
  for_each_crossfit_model(
      tg, o.crossfit_folds, 0, smp, data.devices, lo,
      [&](size_t j, const LayerPredictor& m) { own[train[j]] = featurize_run(train[j], m); });
  it = split_cache.emplace(train, std::move(own)).first;
  log(fmt::format(
      "layer models with in-model rows of {} training runs ({} samples), cross-fitted over {} folds "
      "({:.1f} s)",
      train.size(), smp.size(), o.crossfit_folds, secs_since(tl)));
  return it->second;
}

std::vector<const GraphFeatures*> Evaluation::graphs_for_layers(const EvalSplit& sp, bool device_out) {
  std::vector<const GraphFeatures*> G(res.runs.size());
  for (size_t i = 0; i < G.size(); ++i) G[i] = &res.runs[i].graph;
  if (!sp.held_out_device.empty()) {
    if (!device_cache.count(sp.held_out_device)) train_without_device(sp);
    const std::vector<GraphFeatures>& src =
        device_out ? device_out_cache.at(sp.held_out_device) : device_cache.at(sp.held_out_device);
    for (size_t i = 0; i < G.size(); ++i) G[i] = &src[i];
    return G;
  }
  if (!o.in_model) return G;
  const std::vector<GraphFeatures>& src = in_model_graphs(sp.train);
  for (size_t i = 0; i < G.size(); ++i) G[i] = &src[i];
  return G;
}

std::vector<const GraphFeatures*> Evaluation::graphs_for(const EvalSplit& sp) {
  return with_host_term(sp, graphs_for_layers(sp, false));
}

const DeviceSpread* Evaluation::spread_for(const EvalSplit& sp) {
  if (sp.held_out_device.empty() || !o.intervals || !o.device_intervals) return nullptr;
  auto it = spread_cache.find(sp.held_out_device);
  if (it == spread_cache.end()) {
    const auto tl = Clock::now();
    const DeviceFold f = leave_device_out(layer_samples, data.devices, sp.held_out_device);
    std::vector<DeviceOutRun> dor;
    for (size_t i : sp.train) dor.push_back({&irs[i], res.runs[i].device, res.runs[i].target_ms});
    it = spread_cache
             .emplace(sp.held_out_device, device_out_spread(dor, f.samples, f.devices, o.layers,
                                                            &spread_models, sp.held_out_device))
             .first;
    log(fmt::format(
        "device-out interval width without {}: 80 % {:.3f}, 95 % {:.3f} ({} devices, {} runs, {:.1f} s)",
        sp.held_out_device, it->second.q80, it->second.q95, it->second.devices, it->second.runs,
        secs_since(tl)));
  }
  return &it->second;
}

}  // namespace scaledl::eval_detail
