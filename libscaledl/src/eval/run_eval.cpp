// The evaluation driver (eval.hpp): load stores, build every run's graph once,
// then train and test every method on every split and seed. The steps and the
// state they share: run_eval_detail.hpp.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eval/baselines.hpp"
#include "eval/run_eval_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/eval/eval.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/predict/parallel.hpp"

namespace scaledl {

namespace eval_detail {

bool protocol_has_test_stores(Protocol p) {
  switch (p) {
    case Protocol::CrossDevice:
      return true;
    case Protocol::Id:
    case Protocol::OodFamily:
    case Protocol::OodSize:
    case Protocol::LeaveOneDeviceOut:
      return false;
  }
  return false;
}

bool protocol_holds_out_devices(Protocol p) {
  switch (p) {
    case Protocol::LeaveOneDeviceOut:
      return true;
    case Protocol::Id:
    case Protocol::OodFamily:
    case Protocol::OodSize:
    case Protocol::CrossDevice:
      return false;
  }
  return false;
}

bool protocol_has_ablations(Protocol p) {
  switch (p) {
    case Protocol::Id:
      return true;
    case Protocol::OodFamily:
    case Protocol::OodSize:
    case Protocol::CrossDevice:
    case Protocol::LeaveOneDeviceOut:
      return false;
  }
  return false;
}

namespace {

/// Mean and sample sd of a list (sd 0 for one value).
std::pair<double, double> mean_sd(const std::vector<double>& v) {
  if (v.empty()) return {NAN, NAN};
  double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) : 0.0};
}

nlohmann::json jnum(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

/// The options' errors, before anything is loaded; the methods to run.
std::vector<std::string> check_options(const EvalOptions& o) {
  const char* protocol = to_string(o.protocol);
  const bool test_stores = protocol_has_test_stores(o.protocol);
  const bool lodo = protocol_holds_out_devices(o.protocol);
  SCALEDL_CHECK(!o.dbs.empty(), "--db: give the training store");
  SCALEDL_CHECK(o.seeds >= 1 && o.seeds <= 100, "--seeds={} must be in [1, 100]", o.seeds);
  SCALEDL_CHECK(test_stores || o.test_dbs.empty(),
                "--test-db={} is only for --protocol=cross-device (got --protocol={})",
                o.test_dbs.empty() ? "" : o.test_dbs.front(), protocol);
  SCALEDL_CHECK(!test_stores || !o.test_dbs.empty(), "--protocol=cross-device needs --test-db STORE");
  SCALEDL_CHECK(o.max_cv >= 0 && o.max_cv < 1, "--max-cv={} must be in [0, 1)", o.max_cv);
  SCALEDL_CHECK(
      !o.probe_bandwidth || o.layers.sustained_bw,
      "--probe-bandwidth needs --sustained-bw (the layer models' rooflines at sustained bandwidths)");
  const std::vector<std::string> methods = o.methods.empty() ? all_eval_methods() : o.methods;
  for (const auto& m : methods)
    SCALEDL_CHECK(
        std::find(all_eval_methods().begin(), all_eval_methods().end(), m) != all_eval_methods().end(),
        "--methods: \"{}\" is not a method ({})", m, fmt::join(all_eval_methods(), ", "));
  SCALEDL_CHECK(o.anchors >= 0 && o.anchors <= 100, "--anchors={} must be in [0, 100]", o.anchors);
  host_node_ms_of_us(o.host_node_ms * 1e3);  // an Error naming --host-node-us
  SCALEDL_CHECK(
      o.anchors == 0 || (lodo && o.intervals && o.device_intervals &&
                         std::find(methods.begin(), methods.end(), "scaledl-tc") != methods.end()),
      "--anchors={} needs --protocol=leave-one-device-out, the method scaledl-tc and its intervals (no "
      "--no-intervals or --no-device-intervals)",
      o.anchors);
  SCALEDL_CHECK(o.graph_members >= 1 && o.graph_members <= 16, "--graph-members={} must be in [1, 16]",
                o.graph_members);
  SCALEDL_CHECK(!o.device_crossfit || lodo,
                "--device-crossfit needs --protocol=leave-one-device-out (protocol={})", protocol);
  SCALEDL_CHECK(o.calibrate_rows >= 0 && o.calibrate_rows <= 100000,
                "--calibrate-rows={} must be in [0, 100000]", o.calibrate_rows);
  SCALEDL_CHECK(o.calibrate_rows == 0 || lodo || test_stores,
                "--calibrate-rows={} needs --protocol=leave-one-device-out or cross-device (protocol={})",
                o.calibrate_rows, protocol);
  SCALEDL_CHECK(
      o.calibrate_rows == 0 || !o.test_layers,
      "--calibrate-rows={} calibrates with the test device's layer rows: not with --test-layers, which "
      "trains on them",
      o.calibrate_rows);
  SCALEDL_CHECK(!o.test_layers || test_stores,
                "--test-layers is only for --protocol=cross-device (got --protocol={})", protocol);
  return methods;
}

}  // namespace

Evaluation::Evaluation(const EvalOptions& opt)
    : o(opt),
      t0(Clock::now()),
      methods(check_options(opt)),
      anchored_name(fmt::format("scaledl-tc+{}anchor", opt.anchors)),
      lodo(protocol_holds_out_devices(opt.protocol)) {
  // With --anchors: scaledl-tc once more, anchored on other runs of the held-out device.
  methods_out = methods;
  if (o.anchors > 0) methods_out.push_back(anchored_name);
}

void Evaluation::log(const std::string& s) const {
  if (o.log) o.log(fmt::format("[{:7.1f} s] {}", secs_since(t0), s));
}

// Layer rows of the training stores only: the test device never trains
// anything, unless test_layers: then its layer rows (never its model runs) do.
void Evaluation::load_layer_rows() {
  data = load_training_data(o.dbs, {}, o.layer_max_cv);
  SCALEDL_CHECK(!data.rows.empty(), "--db={}: no ok layer rows to train the layer models on", o.dbs.front());
  if (o.test_layers) {
    for (const auto& db : o.test_dbs) {
      TrainingData t = load_training_data({db}, {}, o.layer_max_cv);
      size_t ok = 0;
      for (auto& row : t.rows) {
        if (data.devices.count(row.device) && !test_layer_devices.count(row.device))
          fail("--test-layers: --test-db={} holds layer rows of device '{}', which is also a training device",
               db, row.device);
        ok += row.status == "ok";
        test_layer_devices.insert(row.device);
        data.rows.push_back(std::move(row));
      }
      SCALEDL_CHECK(
          ok > 0,
          "--test-layers: --test-db={} holds no ok layer rows (measure them with scaledl bench layers)", db);
      for (auto& [k, d] : t.devices)
        if (test_layer_devices.count(k)) data.devices[k] = d;
    }
  }
  layer_samples = samples_from_measurements(data.rows, data.devices);
  devices = data.devices;
  // cross-device with --calibrate-rows: the test stores' layer rows, which calibrate (never train).
  if (o.calibrate_rows > 0 && protocol_has_test_stores(o.protocol)) {
    const TrainingData t = load_training_data(o.test_dbs, {}, o.layer_max_cv);
    test_rows = samples_from_measurements(t.rows, t.devices);
    SCALEDL_CHECK(!test_rows.empty(), "--calibrate-rows={}: the --test-db store(s) hold no ok layer rows",
                  o.calibrate_rows);
  }
}

// The usable model runs of `dbs` (the test stores' when `test`) into res.runs, their
// devices' records into `devices`.
void Evaluation::load_runs(const std::vector<std::string>& dbs, bool test) {
  if (dbs.empty()) return;
  size_t n = 0;
  for (const auto& db : dbs) {
    Store store(db, /*read_only=*/true);
    std::map<std::string, DeviceRecord> devs;
    for (const auto& d : store.devices()) devs[d.key()] = d;
    for (auto& m : store.models("", /*ok_only=*/false)) {
      if (!usable_model_label(m, o.max_cv)) continue;
      SCALEDL_CHECK(devs.count(m.device),
                    "{}: model run '{}' was measured on device '{}', whose record is not in "
                    "the store (probe it into the store: scaledl probe --db {})",
                    db, m.model_name, m.device, db);
      if (test)
        SCALEDL_CHECK(
            !data.devices.count(m.device) || test_layer_devices.count(m.device),
            "--test-db={}: device '{}' is also a training device: cross-device needs other hardware", db,
            m.device);
      else
        SCALEDL_CHECK(!test_layer_devices.count(m.device),
                      "--db={}: model run '{}' is on device '{}', the --test-db device: cross-device needs "
                      "other hardware",
                      db, m.model_name, m.device);
      devices[m.device] = devs[m.device];
      EvalRun r;
      r.label = m.model_name;
      r.key = model_key(m);
      r.family = m.family;
      r.campaign = m.campaign;
      r.device = m.device;
      r.group = test ? std::string() : in_model_group(db, m);
      r.test_store = test;
      r.sweep = !o.sweep_campaign.empty() && m.campaign == o.sweep_campaign;
      r.spec = model_spec_from_json(m.model, db + ": " + r.key);
      r.settings = parse_train_settings(m.settings, db + ": " + r.key);
      r.target_ms = m.iter.median_ms;
      res.runs.push_back(std::move(r));
      ++n;
    }
  }
  SCALEDL_CHECK(n > 0,
                "{}={}: the store(s) hold no usable model runs (status ok, or unstable with iter CV <= {})",
                test ? "--test-db" : "--db", fmt::join(dbs, ","), o.max_cv);
}

// Every run's layer graph, FLOPs and graph features with the layer times of `lp` (a test
// store's run calibrated by its device's rows with --calibrate-rows), and its nodes.
void Evaluation::build_graphs(const LayerPredictor& lp) {
  std::map<std::string, std::optional<LayerCalibration>> test_cal;  // by device, against `lp`
  for (size_t i = 0; i < res.runs.size(); ++i) {
    EvalRun& r = res.runs[i];
    const LayerGraph g = build_layer_graph(r.spec, r.settings);
    if (o.in_model || lodo) irs.push_back(g);
    r.flops = g.total_flops_fwd() + g.total_flops_bwd() + g.total_flops_update();
    GraphContext gc;
    gc.device = devices.at(r.device);
    gc.target_ms = r.target_ms;
    std::vector<double> t = lp.predict_nodes(g, gc.device);
    if (r.test_store) {
      if (!test_cal.count(r.device)) test_cal[r.device] = calibrate_device(lp, test_rows, r.device);
      if (const auto& c = test_cal.at(r.device)) c->apply(g, t);
    }
    r.graph = featurize(g, t, gc);
    r.graph.label = r.label;
    for (const auto& n : g.nodes) {
      LayerSample s;
      s.type = n.type;
      s.dims = n.dims;
      s.dtype = g.settings.dtype;
      s.dir = n.dir;
      s.device = r.device;
      s.ms = 1;
      nodes.push_back(std::move(s));
      node_run.push_back(i);
    }
  }
  log(fmt::format("graphs built ({} nodes)", nodes.size()));
}

// In-model samples of the training stores' runs (--in-model), for per-split layer times.
void Evaluation::load_in_model_rows() {
  if (!o.in_model) return;
  SCALEDL_CHECK(o.crossfit_folds >= 2 && o.crossfit_folds <= 20, "--crossfit-folds={} must be in [2, 20]",
                o.crossfit_folds);
  std::map<std::string, DeviceRecord> d2 = data.devices;
  InModelStats st;
  im_samples = load_in_model_samples(o.dbs, d2, &st);
  log(fmt::format("in-model samples: {} from {} ok runs", im_samples.size(), st.runs));
}

// Per-layer MLP sums (layer-level training, independent of the split except
// for leave-one-device-out, where each split trains without its device's rows).
void Evaluation::per_layer_sums(int seed, const std::string& held_out) {
  std::vector<LayerSample> smp;
  for (const auto& x : layer_samples)
    if (x.device != held_out) smp.push_back(x);
  for (const bool roofline : {false, true}) {
    const std::string m = roofline ? "prenet" : "mlp-acc";
    if (std::find(methods.begin(), methods.end(), m) == methods.end()) continue;
    CvOptions cv;
    cv.mlp_epochs = o.mlp_epochs;
    cv.seed = static_cast<uint64_t>(seed) + 1;
    cv.mlp_roofline = roofline;
    std::vector<double> p = fit_predict("mlp", smp, nodes, devices, cv);
    for (auto& r : res.runs) (roofline ? r.sum_prenet_ms : r.sum_mlp_acc_ms) = 0;
    for (size_t j = 0; j < p.size(); ++j)
      (roofline ? res.runs[node_run[j]].sum_prenet_ms : res.runs[node_run[j]].sum_mlp_acc_ms) += p[j];
    log(fmt::format("seed {}: {} layer sums{}", seed, m, held_out.empty() ? "" : " without " + held_out));
  }
}

// Records the predictions `p` of split `sp`'s test runs (then its sweep runs, not scored).
void Evaluation::record(int seed, const EvalSplit& sp, const std::vector<size_t>& test, const Recorded& p,
                        SeedScores& sc) {
  const std::string& name = p.method;
  for (size_t j = 0; j < test.size(); ++j) {
    EvalPrediction ep{seed, sp.name, name, test[j], p.pred[j]};
    ep.lo80 = p.lo80[j];
    ep.hi80 = p.hi80[j];
    ep.lo95 = p.lo95[j];
    ep.hi95 = p.hi95[j];
    ep.ood_distance = p.ood[j];
    res.predictions.push_back(ep);
    if (j >= sp.test.size()) continue;  // sweep runs are not scored
    const EvalRun& r = res.runs[test[j]];
    if (p.intervals) {
      sc.cover80[name].push_back(r.target_ms >= p.lo80[j] && r.target_ms <= p.hi80[j] ? 1.0 : 0.0);
      sc.cover95[name].push_back(r.target_ms >= p.lo95[j] && r.target_ms <= p.hi95[j] ? 1.0 : 0.0);
      sc.width95[name].push_back(std::sqrt(p.hi95[j] / p.lo95[j]));
      sc.ood_d[name].push_back(p.ood[j]);
    }
    sc.pred_all[name].push_back(p.pred[j]);
    sc.truth_all[name].push_back(r.target_ms);
    sc.fam[name][r.family].first.push_back(p.pred[j]);
    sc.fam[name][r.family].second.push_back(r.target_ms);
    if (lodo) {  // also per held-out device and per device and mode (the unseen-GPU tables)
      for (const std::string& k :
           {"device " + r.device, "device " + r.device + " " + to_string(run_mode(r.settings)),
            "mode " + std::string(to_string(run_mode(r.settings)))}) {
        sc.fam[name][k].first.push_back(p.pred[j]);
        sc.fam[name][k].second.push_back(r.target_ms);
      }
    }
  }
}

// Method `m` trained on split `sp` (graphs G; Gout: the --device-crossfit ones),
// its predictions of `test` recorded into `sc` (and anchored ones with --anchors).
void Evaluation::run_method(int seed, const EvalSplit& sp, const std::vector<size_t>& test,
                            const std::string& m, const std::vector<const GraphFeatures*>& G,
                            const std::vector<const GraphFeatures*>& Gout, SeedScores& sc) {
  const uint64_t sd = static_cast<uint64_t>(seed);
  const auto tm = Clock::now();
  const bool with_iv = o.intervals && m == "scaledl-tc";
  std::vector<size_t> train = sp.train;
  const bool device_out = o.device_crossfit && is_graph_method(m);
  if (device_out) {
    const std::vector<char>& ok = crossfit_ok.at(sp.held_out_device);
    train.erase(std::remove_if(train.begin(), train.end(), [&](size_t i) { return !ok[i]; }), train.end());
    SCALEDL_CHECK(!train.empty(), "--device-crossfit: no training run of split {} has a device-out layer sum",
                  sp.name);
  }
  const DeviceSpread* spread = with_iv ? spread_for(sp) : nullptr;
  const Ctx c = ctx();
  MethodOut mo = fit_predict_runs(c, m, train, test, sd, device_out ? Gout : G, with_iv, spread,
                                  device_out ? 0 : o.anchors, sp.test.size());
  // Anchored predictions come from the in-domain refinement, as in `predict --anchor`
  // (docs/unseen-gpu.md: anchoring measured better with it).
  std::vector<double> anchored_ood = mo.ood;
  if (device_out && with_iv && o.anchors > 0) {
    MethodOut ma = fit_predict_runs(c, m, sp.train, test, sd, G, with_iv, spread, o.anchors, sp.test.size());
    mo.apred = std::move(ma.apred);
    mo.alo80 = std::move(ma.alo80);
    mo.ahi80 = std::move(ma.ahi80);
    mo.alo95 = std::move(ma.alo95);
    mo.ahi95 = std::move(ma.ahi95);
    anchored_ood = std::move(ma.ood);
  }
  record(seed, sp, test, {m, mo.pred, mo.lo80, mo.hi80, mo.lo95, mo.hi95, mo.ood, with_iv}, sc);
  if (!mo.apred.empty())
    record(seed, sp, test,
           {anchored_name, mo.apred, mo.alo80, mo.ahi80, mo.alo95, mo.ahi95, anchored_ood, true}, sc);
  log(fmt::format("seed {} {}: {} trained on {} runs, tested on {} ({:.1f} s)", seed, sp.name, m,
                  train.size(), sp.test.size(), secs_since(tm)));
}

// The seed's error statistics (into `stats`) and interval scores (into `interval_rows`):
// its entry of the report's per_seed.
nlohmann::json Evaluation::seed_summary(int seed, SeedScores& sc) {
  nlohmann::json sj = {{"seed", seed}, {"methods", nlohmann::json::object()}};
  for (const auto& m : methods_out) {
    ErrorStats all = ErrorStats::of(sc.pred_all[m], sc.truth_all[m]);
    stats[m]["all"].push_back(all);
    sj["methods"][m]["all"] = all.to_json();
    for (auto& [f, pt] : sc.fam[m]) {
      ErrorStats e = ErrorStats::of(pt.first, pt.second);
      stats[m][f].push_back(e);
      sj["methods"][m][f] = e.to_json();
    }
  }
  for (const auto& [m, cv] : sc.cover80) {
    const double n = static_cast<double>(cv.size());
    std::vector<double> w = sc.width95[m];
    std::sort(w.begin(), w.end());
    const double ood_share = static_cast<double>(std::count_if(sc.ood_d[m].begin(), sc.ood_d[m].end(),
                                                               [](double d) { return d > 0; })) /
                             n;
    const nlohmann::json ij = {
        {"n", cv.size()},
        {"coverage80_pct", 100 * std::accumulate(cv.begin(), cv.end(), 0.0) / n},
        {"coverage95_pct", 100 * std::accumulate(sc.cover95[m].begin(), sc.cover95[m].end(), 0.0) / n},
        {"median_factor95", w[w.size() / 2]},
        {"out_of_domain_pct", 100 * ood_share}};
    sj["intervals"][m] = ij;
    interval_rows[m].push_back(ij);
  }
  return sj;
}

// Ablations on the id split: error vs training runs, D-optimal vs random.
void Evaluation::ablations(int seed, const EvalSplit& sp) {
  const uint64_t sd = static_cast<uint64_t>(seed);
  const Ctx c = ctx();
  const std::vector<const GraphFeatures*> G = graphs_for(sp);
  std::vector<double> truth;
  for (size_t i : sp.test) truth.push_back(res.runs[i].target_ms);
  std::mt19937_64 rng(sd * 31 + 7);
  std::vector<size_t> shuffled = sp.train;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  for (double frac : {0.1, 0.25, 0.5, 1.0}) {
    const size_t k =
        std::max<size_t>(8, static_cast<size_t>(std::round(frac * static_cast<double>(sp.train.size()))));
    std::vector<size_t> sub(shuffled.begin(),
                            shuffled.begin() + static_cast<std::ptrdiff_t>(std::min(k, shuffled.size())));
    ErrorStats e = ErrorStats::of(fit_predict_runs(c, "scaledl-tc", sub, sp.test, sd, G).pred, truth);
    curve_rows.push_back({{"seed", seed},
                          {"fraction", frac},
                          {"train_runs", sub.size()},
                          {"method", "scaledl-tc"},
                          {"stats", e.to_json()}});
    log(fmt::format("seed {} learning curve: {} runs -> MRE {:.2f} %", seed, sub.size(), e.mre_pct));
  }
  const size_t k = std::max<size_t>(hp_feature_count() + 1, sp.train.size() / 4);
  std::vector<size_t> rnd(shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(k));
  std::vector<size_t> dopt = doptimal_subset(c, sp.train, k, sd);
  for (const auto& [name, sub] :
       {std::make_pair(std::string("random"), rnd), std::make_pair(std::string("d-optimal"), dopt)}) {
    ErrorStats e = ErrorStats::of(fit_predict_runs(c, "scaledl-tc", sub, sp.test, sd, G).pred, truth);
    dopt_rows.push_back({{"seed", seed},
                         {"choice", name},
                         {"train_runs", sub.size()},
                         {"method", "scaledl-tc"},
                         {"stats", e.to_json()}});
    log(fmt::format("seed {} {} choice of {} runs -> MRE {:.2f} %", seed, name, sub.size(), e.mre_pct));
  }
}

// One seed: its splits, every method on each, the scores into per_seed; then the ablations.
void Evaluation::run_seed(int seed) {
  if (!lodo) per_layer_sums(seed, "");
  const std::vector<EvalSplit> splits = make_splits(res.runs, o.protocol, static_cast<uint64_t>(seed));
  std::vector<size_t> sweep;
  for (size_t i = 0; i < res.runs.size(); ++i)
    if (res.runs[i].sweep) sweep.push_back(i);
  SeedScores sc;
  for (const auto& sp : splits) {
    if (seed == 0) split_names.push_back(sp.name);
    std::vector<size_t> test = sp.test;
    test.insert(test.end(), sweep.begin(), sweep.end());
    const std::vector<const GraphFeatures*> G = graphs_for(sp);
    const std::vector<const GraphFeatures*> Gout = o.device_crossfit ? graphs_for_layers(sp, true) : G;
    if (lodo) per_layer_sums(seed, sp.held_out_device);
    for (const auto& m : methods) run_method(seed, sp, test, m, G, Gout, sc);
  }
  per_seed.push_back(seed_summary(seed, sc));
  if (o.ablations && protocol_has_ablations(o.protocol)) ablations(seed, splits.at(0));
}

// Mean +- sd over seeds of every statistic, per method and family (or "all").
nlohmann::json Evaluation::summary() {
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& m : methods_out)
    for (auto& [f, v] : stats[m]) {
      std::vector<double> mre, rmse, p50, p90, bias;
      for (auto& e : v) {
        mre.push_back(e.mre_pct);
        rmse.push_back(e.rmse_ms);
        p50.push_back(e.p50_pct);
        p90.push_back(e.p90_pct);
        bias.push_back(e.bias_pct);
      }
      auto [mm, ms] = mean_sd(mre);
      auto [rm, rs] = mean_sd(rmse);
      auto [pm, ps] = mean_sd(p50);
      auto [qm, qs] = mean_sd(p90);
      auto [bm, bs] = mean_sd(bias);
      summary.push_back({{"method", m},
                         {"family", f},
                         {"n", v.front().n},
                         {"mre_pct", jnum(mm)},
                         {"mre_sd", jnum(ms)},
                         {"rmse_ms", jnum(rm)},
                         {"rmse_sd", jnum(rs)},
                         {"p50_pct", jnum(pm)},
                         {"p50_sd", jnum(ps)},
                         {"p90_pct", jnum(qm)},
                         {"p90_sd", jnum(qs)},
                         {"bias_pct", jnum(bm)},
                         {"bias_sd", jnum(bs)},
                         {"seeds", v.size()}});
    }
  return summary;
}

// The report's "layer_times": where the layer times came from.
std::string Evaluation::layer_times_text() const {
  std::string s = o.in_model ? fmt::format(
                                   "isolated rows + in-model rows of the training runs, "
                                   "cross-fitted over {} folds",
                                   o.crossfit_folds)
                             : std::string("isolated layer rows");
  if (o.host_term) s += "; T_sum = max(their sum, nodes x d), d per GPU fitted on the split's training runs";
  if (o.host_node_ms > 0)
    s += fmt::format("; a GPU without a fitted d: d = {:.1f} us (--host-node-us)", o.host_node_ms * 1e3);
  if (o.device_crossfit)
    s += "; training runs' from layer models without their own device (--device-crossfit)";
  if (o.calibrate_rows > 0)
    s += fmt::format(
        "; the {} device's calibrated by {} of its own rows per kind "
        "(--calibrate-rows)",
        lodo ? "held-out" : "test", o.calibrate_rows);
  return s;
}

// res.report: what report.json holds (eval.hpp).
void Evaluation::make_report() {
  const nlohmann::json summary_rows = summary();
  std::map<std::string, int64_t> fam_count, fam_count_test;
  for (const auto& r : res.runs) (r.test_store ? fam_count_test : fam_count)[r.family]++;
  nlohmann::json device_records = nlohmann::json::array();
  for (auto& [k, v] : devices) device_records.push_back(v.to_json());
  res.report = {{"protocol", to_string(o.protocol)},
                {"stores", o.dbs},
                {"test_stores", o.test_dbs},
                {"test_layers", o.test_layers},
                {"sweep_campaign", o.sweep_campaign},
                {"seeds", o.seeds},
                {"methods", methods_out},
                {"anchors", o.anchors},
                {"max_cv", o.max_cv},
                {"layer_max_cv", o.layer_max_cv},
                {"splits", split_names},
                {"runs", res.runs.size()},
                {"runs_per_family", fam_count},
                {"test_store_runs_per_family", fam_count_test},
                {"layer_rows", data.rows.size()},
                {"devices", device_records},
                {"gnn",
                 {{"epochs", o.gnn.epochs},
                  {"patience", o.gnn.patience},
                  {"lr", o.gnn.lr},
                  {"val_fraction", o.gnn.val_fraction},
                  {"loss", o.gnn.loss}}},
                {"birnn_epochs", o.birnn_epochs},
                {"mlp_epochs", o.mlp_epochs},
                {"summary", summary_rows},
                {"per_seed", per_seed},
                {"seconds", secs_since(t0)}};
  if (!curve_rows.empty()) res.report["learning_curve"] = curve_rows;
  for (const auto& [m, rows] : interval_rows) {
    nlohmann::json agg = {{"method", m}, {"seeds", rows.size()}, {"n", rows.front()["n"]}};
    for (const char* k : {"coverage80_pct", "coverage95_pct", "median_factor95", "out_of_domain_pct"}) {
      std::vector<double> v;
      for (const auto& r : rows) v.push_back(r[k].get<double>());
      auto [mm, ms] = mean_sd(v);
      agg[k] = jnum(mm);
      agg[std::string(k) + "_sd"] = jnum(ms);
    }
    res.report["intervals"].push_back(agg);
  }
  res.report["layer_times"] = layer_times_text();
  if (o.calibrate_rows > 0) res.report["calibrations"] = calibrations;
  res.report["scaledl_config"] = {
      {"alpha_bound", o.alpha_bound}, {"ood_tau", o.ood_tau}, {"graph_members", o.graph_members}};
  if (!dopt_rows.empty()) res.report["doptimal_vs_random"] = dopt_rows;
}

}  // namespace eval_detail

EvalResult run_eval(const EvalOptions& o) {
  eval_detail::Evaluation ev(o);  // checks the options
  ev.load_layer_rows();
  ev.load_runs(o.dbs, false);
  ev.load_runs(o.test_dbs, true);
  if (o.probe_bandwidth) {
    // As the layer models derive it: from kernel times when they learn those.
    const size_t n = set_probe_bandwidths(
        ev.devices,
        o.layers.kernel_time ? kernel_time_samples(ev.layer_samples, ev.data.devices) : ev.layer_samples);
    ev.log(fmt::format("--probe-bandwidth: {} GPUs' sustained bandwidth from their own layer rows", n));
  }
  ev.log(fmt::format(
      "{} runs ({} test-store), {} layer rows, {} devices", ev.res.runs.size(),
      std::count_if(ev.res.runs.begin(), ev.res.runs.end(), [](const EvalRun& r) { return r.test_store; }),
      ev.data.rows.size(), ev.devices.size()));
  // A split that would be empty or too small fails now, before any training.
  (void)make_splits(ev.res.runs, o.protocol, 0);
  SCALEDL_CHECK(!(ev.lodo && o.in_model), "--in-model is not supported with --protocol=leave-one-device-out");
  // Layer models on the training stores' isolated rows; graphs of every run.
  TrainOptions lo = o.layers;
  lo.verbose = false;
  const LayerPredictor lp = LayerPredictor::train_samples(ev.layer_samples, ev.data.devices, lo);
  ev.build_graphs(lp);
  ev.load_in_model_rows();
  for (int seed = 0; seed < o.seeds; ++seed) ev.run_seed(seed);
  ev.make_report();
  return std::move(ev.res);
}

}  // namespace scaledl
