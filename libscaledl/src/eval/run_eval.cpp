// The evaluation driver (eval.hpp): load stores, build every run's graph once,
// then train and test every method on every split and seed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "eval/baselines.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/design/design.hpp"
#include "scaledl/eval/eval.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/predict/device_intervals.hpp"
#include "scaledl/predict/graph_cv.hpp"
#include "scaledl/predict/intervals.hpp"
#include "scaledl/predict/parallel.hpp"
#include "scaledl/predict/physics.hpp"

namespace scaledl {

namespace {

using Clock = std::chrono::steady_clock;

double secs_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

GnnConfig method_config(const std::string& m, const EvalOptions& o) {
  GnnConfig c;
  c.alpha_bound = o.alpha_bound;
  c.ood_tau = o.ood_tau;
  if (m == "scaledl-anee") c.encoder = "anee";
  if (m == "scaledl-nomlp") c.global_branch = false;
  if (m == "dnnperf") {
    c.encoder = "anee";
    c.target = "direct";
    c.readout = "sum";
    c.ood_tau = 0;  // as published: no shrinkage
  }
  return c;
}

bool is_graph_method(const std::string& m) {
  return m == "scaledl-tc" || m == "scaledl-anee" || m == "scaledl-nomlp" || m == "dnnperf";
}

struct Ctx {
  const EvalOptions& o;
  std::vector<EvalRun>& runs;
  std::map<std::string, DeviceRecord>& devices;
};

/// What a method predicts for the test runs: T_iter (ms), and for methods with
/// intervals their bounds (NaN otherwise) and the out-of-domain distance.
struct MethodOut {
  std::vector<double> pred, lo80, hi80, lo95, hi95, ood;
  /// With anchors (leave-one-device-out): the same predictions and intervals
  /// after anchoring on other runs of the held-out device (device_intervals.hpp).
  std::vector<double> apred, alo80, ahi80, alo95, ahi95;
};

/// Predictions of `method` trained on `train` for `test` runs. `G[i]` is run i's
/// graph for this split (layer times of the split's layer models).
MethodOut fit_predict_runs(const Ctx& c, const std::string& method, const std::vector<size_t>& train,
                           const std::vector<size_t>& test, uint64_t seed,
                           const std::vector<const GraphFeatures*>& G, bool intervals = false,
                           const DeviceSpread* unseen = nullptr, int anchors = 0, size_t n_scored = 0) {
  std::vector<const EvalRun*> tr, te;
  for (size_t i : train) tr.push_back(&c.runs[i]);
  for (size_t i : test) te.push_back(&c.runs[i]);
  MethodOut mo;
  std::vector<double>& out = mo.pred;
  if (method == "sum") {
    for (size_t i : test) out.push_back(G[i]->t_sum_ms + G[i]->t_comm_ms);
  } else if (method == "mlp-acc") {
    for (const EvalRun* r : te) out.push_back(r->sum_mlp_acc_ms);
  } else if (method == "prenet") {
    for (const EvalRun* r : te) out.push_back(r->sum_prenet_ms);
  } else if (method == "rf-hp") {
    out = eval_detail::rf_hp_fit_predict(tr, te, c.devices, seed);
  } else if (method == "birnn") {
    out = eval_detail::birnn_fit_predict(tr, te, c.o.birnn_epochs, seed);
  } else if (is_graph_method(method)) {
    std::vector<GraphFeatures> gtr;
    gtr.reserve(tr.size());
    for (size_t i : train) gtr.push_back(*G[i]);
    GnnTrainOptions opt = c.o.gnn;
    opt.seed = seed;
    opt.on_epoch = nullptr;
    const GnnConfig cfg = method_config(method, c.o);
    GnnTrainReport rep;
    GraphPredictor p = GraphPredictor::train(gtr, cfg, opt, &rep);
    std::vector<const GraphFeatures*> gte;
    for (size_t i : test) gte.push_back(G[i]);
    GnnPrediction pr = p.predict(gte);
    out = pr.t_pred_ms;
    mo.ood = pr.ood_distance;
    if (intervals) {
      IntervalModel iv = calibrate_intervals(gtr, cfg, opt, rep);
      if (unseen && unseen->valid()) {  // the test device trained no layer model: the device-out spread
        iv.unseen_q80 = unseen->q80;
        iv.unseen_q95 = unseen->q95;
      }
      const bool u = unseen != nullptr;
      for (size_t j = 0; j < out.size(); ++j) {
        const double ts = G[test[j]]->t_sum_ms;
        const Interval a = iv.at(out[j], pr.ood_distance[j], 0.80, ts, u),
                       b = iv.at(out[j], pr.ood_distance[j], 0.95, ts, u);
        mo.lo80.push_back(a.lo);
        mo.hi80.push_back(a.hi);
        mo.lo95.push_back(b.lo);
        mo.hi95.push_back(b.hi);
      }
      if (anchors > 0 && u && iv.has_unseen()) {
        // Each test run j is anchored on `anchors` scored runs of the held-out
        // device other than itself, drawn by (seed, j).
        const auto sds = anchor_sds(iv, /*unseen_device=*/true);
        for (size_t j = 0; j < out.size(); ++j) {
          std::vector<size_t> cand;
          for (size_t k = 0; k < n_scored; ++k)
            if (k != j) cand.push_back(k);
          std::mt19937_64 rng(seed * 1000003 + j);
          std::shuffle(cand.begin(), cand.end(), rng);
          cand.resize(std::min(cand.size(), static_cast<size_t>(anchors)));
          std::vector<double> r;
          for (size_t k : cand) r.push_back(std::log(c.runs[test[k]].target_ms / out[k]));
          const AnchorFit a = fit_anchor(r, sds.first, sds.second);
          const double pa = out[j] * a.factor(), ts = G[test[j]]->t_sum_ms;
          const Interval i80 = anchored_interval(iv, a, pa, pr.ood_distance[j], 0.80, ts),
                         i95 = anchored_interval(iv, a, pa, pr.ood_distance[j], 0.95, ts);
          mo.apred.push_back(pa);
          mo.alo80.push_back(i80.lo);
          mo.ahi80.push_back(i80.hi);
          mo.alo95.push_back(i95.lo);
          mo.ahi95.push_back(i95.hi);
        }
      }
    }
  } else {
    fail("--methods: \"{}\" is not a method ({})", method, fmt::join(all_eval_methods(), ", "));
  }
  SCALEDL_CHECK(out.size() == te.size(), "internal: {} predicted {} of {} runs", method, out.size(),
                te.size());
  for (auto* v : {&mo.lo80, &mo.hi80, &mo.lo95, &mo.hi95, &mo.ood}) v->resize(out.size(), NAN);
  return mo;
}

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

/// D-optimal (Fedorov) choice of k runs from `pool` on linear terms of the
/// hyperparameter vector (intercept + columns that vary in the pool).
std::vector<size_t> doptimal_subset(const Ctx& c, const std::vector<size_t>& pool, size_t k, uint64_t seed) {
  const size_t nf = eval_detail::hp_feature_count();
  std::vector<std::vector<float>> x;
  for (size_t i : pool) x.push_back(eval_detail::hp_features(c.runs[i], c.devices.at(c.runs[i].device)));
  std::vector<size_t> cols;
  for (size_t f = 0; f < nf; ++f) {
    bool varies = false;
    for (auto& r : x) varies = varies || r[f] != x[0][f];
    if (varies) cols.push_back(f);
  }
  FeatureMatrix F(static_cast<Eigen::Index>(pool.size()), static_cast<Eigen::Index>(cols.size() + 1));
  for (size_t i = 0; i < pool.size(); ++i) {
    F(static_cast<Eigen::Index>(i), 0) = 1;
    for (size_t j = 0; j < cols.size(); ++j)
      F(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j + 1)) = x[i][cols[j]];
  }
  // Standardise columns so that the ridge and tolerances mean the same everywhere.
  for (Eigen::Index j = 1; j < F.cols(); ++j) {
    const double m = F.col(j).mean();
    const double s = std::sqrt((F.col(j).array() - m).square().mean());
    F.col(j) = (F.col(j).array() - m) / (s > 0 ? s : 1.0);
  }
  // Keep a full-rank set of columns (the family one-hots sum to the intercept;
  // T5's decoder depth equals its encoder depth): pivoted QR picks them.
  const Eigen::MatrixXd dense = F;
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(dense);
  qr.setThreshold(1e-8);
  const Eigen::Index rank = qr.rank();
  if (rank < F.cols()) {
    std::vector<Eigen::Index> keep;
    for (Eigen::Index j = 0; j < rank; ++j) keep.push_back(qr.colsPermutation().indices()(j));
    std::sort(keep.begin(), keep.end());
    FeatureMatrix G(F.rows(), rank);
    for (Eigen::Index j = 0; j < rank; ++j) G.col(j) = F.col(keep[static_cast<size_t>(j)]);
    F = G;
  }
  FedorovOptions fo;
  fo.k = static_cast<int>(k);
  fo.seed = seed;
  fo.threads = 1;
  fo.keep_trace = false;
  FedorovResult r = fedorov_design(F, FeatureMatrix(0, F.cols()), fo);
  std::vector<size_t> out;
  for (int64_t i : r.chosen) out.push_back(pool[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

EvalResult run_eval(const EvalOptions& o) {
  const auto t0 = Clock::now();
  auto log = [&](const std::string& s) {
    if (o.log) o.log(fmt::format("[{:7.1f} s] {}", secs_since(t0), s));
  };
  SCALEDL_CHECK(!o.dbs.empty(), "--db: give the training store");
  SCALEDL_CHECK(o.seeds >= 1 && o.seeds <= 100, "--seeds={} must be in [1, 100]", o.seeds);
  SCALEDL_CHECK(o.protocol == "cross-device" || o.test_dbs.empty(),
                "--test-db={} is only for --protocol=cross-device (got --protocol={})",
                o.test_dbs.empty() ? "" : o.test_dbs.front(), o.protocol);
  SCALEDL_CHECK(o.protocol != "cross-device" || !o.test_dbs.empty(),
                "--protocol=cross-device needs --test-db STORE");
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
      o.anchors == 0 || (o.protocol == "leave-one-device-out" && o.intervals && o.device_intervals &&
                         std::find(methods.begin(), methods.end(), "scaledl-tc") != methods.end()),
      "--anchors={} needs --protocol=leave-one-device-out, the method scaledl-tc and its intervals (no "
      "--no-intervals or --no-device-intervals)",
      o.anchors);
  SCALEDL_CHECK(!o.device_crossfit || o.protocol == "leave-one-device-out",
                "--device-crossfit needs --protocol=leave-one-device-out (protocol={})", o.protocol);
  SCALEDL_CHECK(o.calibrate_rows >= 0 && o.calibrate_rows <= 100000,
                "--calibrate-rows={} must be in [0, 100000]", o.calibrate_rows);
  SCALEDL_CHECK(o.calibrate_rows == 0 || o.protocol == "leave-one-device-out" || o.protocol == "cross-device",
                "--calibrate-rows={} needs --protocol=leave-one-device-out or cross-device (protocol={})",
                o.calibrate_rows, o.protocol);
  SCALEDL_CHECK(
      o.calibrate_rows == 0 || !o.test_layers,
      "--calibrate-rows={} calibrates with the test device's layer rows: not with --test-layers, which "
      "trains on them",
      o.calibrate_rows);
  SCALEDL_CHECK(!o.test_layers || o.protocol == "cross-device",
                "--test-layers is only for --protocol=cross-device (got --protocol={})", o.protocol);
  EvalResult res;
  // Layer rows of the training stores only: the test device never trains
  // anything, unless test_layers: then its layer rows (never its model runs) do.
  TrainingData data = load_training_data(o.dbs, {}, o.layer_max_cv);
  SCALEDL_CHECK(!data.rows.empty(), "--db={}: no ok layer rows to train the layer models on", o.dbs.front());
  std::set<std::string> test_layer_devices;  // devices whose layer rows came from a --test-db
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
  std::vector<LayerSample> layer_samples = samples_from_measurements(data.rows, data.devices);
  std::map<std::string, DeviceRecord> devices = data.devices;
  // cross-device with --calibrate-rows: the test stores' layer rows, which calibrate (never train).
  std::vector<LayerSample> test_rows;
  if (o.calibrate_rows > 0 && o.protocol == "cross-device") {
    const TrainingData t = load_training_data(o.test_dbs, {}, o.layer_max_cv);
    test_rows = samples_from_measurements(t.rows, t.devices);
    SCALEDL_CHECK(!test_rows.empty(), "--calibrate-rows={}: the --test-db store(s) hold no ok layer rows",
                  o.calibrate_rows);
  }

  auto load_runs = [&](const std::vector<std::string>& dbs, bool test) {
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
          SCALEDL_CHECK(
              !test_layer_devices.count(m.device),
              "--db={}: model run '{}' is on device '{}', the --test-db device: cross-device needs other "
              "hardware",
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
  };
  load_runs(o.dbs, false);
  load_runs(o.test_dbs, true);
  if (o.probe_bandwidth) {
    // As the layer models derive it: from kernel times when they learn those.
    const size_t n = set_probe_bandwidths(
        devices, o.layers.kernel_time ? kernel_time_samples(layer_samples, data.devices) : layer_samples);
    log(fmt::format("--probe-bandwidth: {} GPUs' sustained bandwidth from their own layer rows", n));
  }
  log(fmt::format(
      "{} runs ({} test-store), {} layer rows, {} devices", res.runs.size(),
      std::count_if(res.runs.begin(), res.runs.end(), [](const EvalRun& r) { return r.test_store; }),
      data.rows.size(), devices.size()));

  // An unknown protocol, or a split that would be empty or too small, fails
  // now, before any training.
  (void)make_splits(res.runs, o.protocol, 0);
  const bool lodo = o.protocol == "leave-one-device-out";
  SCALEDL_CHECK(!(lodo && o.in_model), "--in-model is not supported with --protocol=leave-one-device-out");

  // Layer models on the training stores' isolated rows; graphs of every run.
  TrainOptions lo = o.layers;
  lo.verbose = false;
  const LayerPredictor lp = LayerPredictor::train_samples(layer_samples, data.devices, lo);
  nlohmann::json calibrations = nlohmann::json::array();  // --calibrate-rows: the first of each device
  // --calibrate-rows: device `dev`'s calibration against `p` by K of its own rows among `rows`
  // (none when it has none there).
  auto calibrate_device = [&](const LayerPredictor& p, const std::vector<LayerSample>& rows,
                              const std::string& dev) -> std::optional<LayerCalibration> {
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
  };
  // cross-device: the test device `dev`'s calibration by its own layer rows (the test stores').
  auto test_calibration = [&](const LayerPredictor& p, const std::string& dev) {
    return calibrate_device(p, test_rows, dev);
  };
  std::map<std::string, std::optional<LayerCalibration>> test_cal;  // by device, against `lp`
  std::vector<LayerSample> nodes;  // every node of every run, for the per-layer MLP sums
  std::vector<size_t> node_run;
  std::vector<LayerGraph> irs;  // layer graphs of the runs, kept for per-split layer times (in_model)
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
      if (!test_cal.count(r.device)) test_cal[r.device] = test_calibration(lp, r.device);
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

  // In-model samples of the training stores' runs, and per-split layer times.
  std::vector<LayerSample> im_samples;
  if (o.in_model) {
    SCALEDL_CHECK(o.crossfit_folds >= 2 && o.crossfit_folds <= 20, "--crossfit-folds={} must be in [2, 20]",
                  o.crossfit_folds);
    std::map<std::string, DeviceRecord> d2 = data.devices;
    InModelStats st;
    im_samples = load_in_model_samples(o.dbs, d2, &st);
    log(fmt::format("in-model samples: {} from {} ok runs", im_samples.size(), st.runs));
  }
  std::map<std::vector<size_t>, std::vector<GraphFeatures>> split_cache;
  std::map<std::string, std::vector<GraphFeatures>> device_cache;  // leave-one-device-out: by held-out device
  std::map<std::string, std::vector<char>>
      crossfit_ok;  // --device-crossfit: runs with a device-out sum, by held-out device
  std::map<std::string, std::vector<GraphFeatures>>
      device_out_cache;  // --device-crossfit: by held-out device
  // Run i's graph features with the layer times of `lp`.
  // `cal` (non-null): the calibration of the held-out device, for its runs.
  auto featurize_run = [&](size_t i, const LayerPredictor& lp, const LayerCalibration* cal = nullptr) {
    const EvalRun& r = res.runs[i];
    GraphContext gc;
    gc.device = devices.at(r.device);
    gc.target_ms = r.target_ms;
    std::vector<double> t = lp.predict_nodes(irs[i], gc.device);
    if (cal && cal->device == r.device) cal->apply(irs[i], t);
    GraphFeatures f = featurize(irs[i], t, gc);
    f.label = r.label;
    return f;
  };
  // With --host-term: each GPU's host cost per node, fitted on the split's training
  // runs, in copies of the graphs of that GPU's runs (kept in `host_copies`).
  auto with_host_term = [&](const EvalSplit& sp, std::vector<const GraphFeatures*> G,
                            std::deque<GraphFeatures>& host_copies) {
    host_copies.clear();
    if (!o.host_term && o.host_node_ms <= 0) return G;
    std::map<std::string, double> d;
    if (o.host_term) {
      std::vector<HostRun> hr;
      for (size_t i : sp.train)
        hr.push_back({res.runs[i].device, static_cast<double>(G[i]->num_nodes),
                      G[i]->t_sum_ms + G[i]->t_comm_ms, res.runs[i].target_ms});
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
  };
  // Leave-one-device-out: layer models without the held-out device and one more
  // (the device-out spread's folds, shared with spread_for below).
  LayerModelCache spread_models;
  // `device_out` (--device-crossfit): the split's training runs with the layer
  // times of models without their own device (no host term: a bundle's
  // device-out refinement trains and predicts without one).
  auto graphs_for_layers = [&](const EvalSplit& sp, bool device_out) {
    const std::vector<size_t>& train = sp.train;
    std::vector<const GraphFeatures*> G(res.runs.size());
    for (size_t i = 0; i < G.size(); ++i) G[i] = &res.runs[i].graph;
    if (!sp.held_out_device.empty()) {
      // Layer models without a single row of the held-out device.
      auto it = device_cache.find(sp.held_out_device);
      if (it == device_cache.end()) {
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
        if (o.device_crossfit) {
          std::vector<GraphFeatures> dout = own;
          // A training run's layer times from models that saw neither its device nor
          // the held-out one: the refinement learns on sums of unseen GPUs, as it is
          // tested. A run needing a model only its own device's rows give has no such
          // sum: the graph methods do not train on it.
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
          log(fmt::format(
              "device cross-fit without {}: {} training runs from models without their device, {} "
              "left out of the graph methods' training (a layer model only their device has)",
              sp.held_out_device, swapped, kept));
        }
        it = device_cache.emplace(sp.held_out_device, std::move(own)).first;
        log(fmt::format("layer models without {} ({} of {} layer samples, {:.1f} s)", sp.held_out_device,
                        f.samples.size(), layer_samples.size(), secs_since(tl)));
      }
      const std::vector<GraphFeatures>& src =
          device_out ? device_out_cache.at(sp.held_out_device) : it->second;
      for (size_t i = 0; i < G.size(); ++i) G[i] = &src[i];
      return G;
    }
    if (!o.in_model) return G;
    auto it = split_cache.find(train);
    if (it == split_cache.end()) {
      const auto tl = Clock::now();
      std::set<std::string> groups;
      for (size_t i : train) groups.insert(res.runs[i].group);
      std::vector<LayerSample> smp = layer_samples;
      for (const auto& sm : im_samples)
        if (groups.count(sm.group)) smp.push_back(sm);
      std::vector<GraphFeatures> own(res.runs.size());
      auto feat = [&](size_t i, const LayerPredictor& lp) { own[i] = featurize_run(i, lp); };
      TrainOptions lo = o.layers;
      lo.verbose = false;
      const LayerPredictor full = LayerPredictor::train_samples(smp, data.devices, lo);
      std::vector<char> in_train(res.runs.size(), 0);
      for (size_t i : train) in_train[i] = 1;
      std::map<std::string, std::optional<LayerCalibration>> cal_full;  // test devices, against `full`
      for (size_t i = 0; i < res.runs.size(); ++i) {
        if (in_train[i]) continue;
        const EvalRun& r = res.runs[i];
        if (r.test_store && !cal_full.count(r.device)) cal_full[r.device] = test_calibration(full, r.device);
        const auto c = r.test_store ? cal_full.find(r.device) : cal_full.end();
        own[i] = featurize_run(i, full, c != cal_full.end() && c->second ? &*c->second : nullptr);
      }
      std::vector<std::string> tg;
      for (size_t i : train) tg.push_back(res.runs[i].group);
      for_each_crossfit_model(tg, o.crossfit_folds, 0, smp, data.devices, lo,
                              [&](size_t j, const LayerPredictor& m) { feat(train[j], m); });
      it = split_cache.emplace(train, std::move(own)).first;
      log(fmt::format(
          "layer models with in-model rows of {} training runs ({} samples), cross-fitted over {} folds "
          "({:.1f} s)",
          train.size(), smp.size(), o.crossfit_folds, secs_since(tl)));
    }
    for (size_t i = 0; i < G.size(); ++i) G[i] = &it->second[i];
    return G;
  };
  std::deque<GraphFeatures> host_copies;
  auto graphs_for = [&](const EvalSplit& sp) {
    return with_host_term(sp, graphs_for_layers(sp, false), host_copies);
  };

  // Leave-one-device-out: the interval width for the held-out device, from its
  // split's training devices only (device_intervals.hpp), once per split.
  std::map<std::string, DeviceSpread> spread_cache;
  auto spread_for = [&](const EvalSplit& sp) -> const DeviceSpread* {
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
  };

  Ctx c{o, res.runs, devices};
  // With --anchors: scaledl-tc once more, anchored on other runs of the held-out device.
  const std::string anchored_name = fmt::format("scaledl-tc+{}anchor", o.anchors);
  std::vector<std::string> methods_out = methods;
  if (o.anchors > 0) methods_out.push_back(anchored_name);
  nlohmann::json per_seed = nlohmann::json::array();
  // stats[method][family or "all"] -> per-seed values
  std::map<std::string, std::map<std::string, std::vector<ErrorStats>>> stats;
  std::vector<nlohmann::json> curve_rows, dopt_rows;
  std::map<std::string, std::vector<nlohmann::json>> interval_rows;  // method -> per seed
  std::vector<std::string> split_names;
  for (int seed = 0; seed < o.seeds; ++seed) {
    const uint64_t sd = static_cast<uint64_t>(seed);
    // Per-layer MLP sums (layer-level training, independent of the split except
    // for leave-one-device-out, where each split trains without its device's rows).
    auto per_layer_sums = [&](int seed, const std::string& held_out) {
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
    };
    if (!lodo) per_layer_sums(seed, "");
    const std::vector<EvalSplit> splits = make_splits(res.runs, o.protocol, sd);
    std::vector<size_t> sweep;
    for (size_t i = 0; i < res.runs.size(); ++i)
      if (res.runs[i].sweep) sweep.push_back(i);
    std::map<std::string, std::vector<double>> pred_all, truth_all;               // method -> over splits
    std::map<std::string, std::vector<double>> cover80, cover95, width95, ood_d;  // methods with intervals
    std::map<std::string, std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>> fam;
    for (const auto& sp : splits) {
      if (seed == 0) split_names.push_back(sp.name);
      std::vector<size_t> test = sp.test;
      test.insert(test.end(), sweep.begin(), sweep.end());
      const std::vector<const GraphFeatures*> G = graphs_for(sp);
      const std::vector<const GraphFeatures*> Gout = o.device_crossfit ? graphs_for_layers(sp, true) : G;
      if (lodo) per_layer_sums(seed, sp.held_out_device);
      for (const auto& m : methods) {
        const auto tm = Clock::now();
        const bool with_iv = o.intervals && m == "scaledl-tc";
        std::vector<size_t> train = sp.train;
        const bool device_out = o.device_crossfit && is_graph_method(m);
        if (device_out) {
          const std::vector<char>& ok = crossfit_ok.at(sp.held_out_device);
          train.erase(std::remove_if(train.begin(), train.end(), [&](size_t i) { return !ok[i]; }),
                      train.end());
          SCALEDL_CHECK(!train.empty(),
                        "--device-crossfit: no training run of split {} has a device-out layer sum", sp.name);
        }
        const DeviceSpread* spread = with_iv ? spread_for(sp) : nullptr;
        MethodOut mo = fit_predict_runs(c, m, train, test, sd, device_out ? Gout : G, with_iv, spread,
                                        device_out ? 0 : o.anchors, sp.test.size());
        // Anchored predictions come from the in-domain refinement, as in `predict --anchor`
        // (docs/unseen-gpu.md: anchoring measured better with it).
        std::vector<double> anchored_ood = mo.ood;
        if (device_out && with_iv && o.anchors > 0) {
          MethodOut ma =
              fit_predict_runs(c, m, sp.train, test, sd, G, with_iv, spread, o.anchors, sp.test.size());
          mo.apred = std::move(ma.apred);
          mo.alo80 = std::move(ma.alo80);
          mo.ahi80 = std::move(ma.ahi80);
          mo.alo95 = std::move(ma.alo95);
          mo.ahi95 = std::move(ma.ahi95);
          anchored_ood = std::move(ma.ood);
        }
        // Records method `name`'s predictions p (and intervals, when `iv`) of the split.
        auto record = [&](const std::string& name, const std::vector<double>& p,
                          const std::vector<double>& lo80, const std::vector<double>& hi80,
                          const std::vector<double>& lo95, const std::vector<double>& hi95, bool iv,
                          const std::vector<double>& ood) {
          for (size_t j = 0; j < test.size(); ++j) {
            EvalPrediction ep{seed, sp.name, name, test[j], p[j]};
            ep.lo80 = lo80[j];
            ep.hi80 = hi80[j];
            ep.lo95 = lo95[j];
            ep.hi95 = hi95[j];
            ep.ood_distance = ood[j];
            res.predictions.push_back(ep);
            if (j >= sp.test.size()) continue;  // sweep runs are not scored
            const EvalRun& r = res.runs[test[j]];
            if (iv) {
              cover80[name].push_back(r.target_ms >= lo80[j] && r.target_ms <= hi80[j] ? 1.0 : 0.0);
              cover95[name].push_back(r.target_ms >= lo95[j] && r.target_ms <= hi95[j] ? 1.0 : 0.0);
              width95[name].push_back(std::sqrt(hi95[j] / lo95[j]));
              ood_d[name].push_back(ood[j]);
            }
            pred_all[name].push_back(p[j]);
            truth_all[name].push_back(r.target_ms);
            fam[name][r.family].first.push_back(p[j]);
            fam[name][r.family].second.push_back(r.target_ms);
            if (lodo) {  // also per held-out device and per device and mode (the unseen-GPU tables)
              for (const std::string& k :
                   {"device " + r.device, "device " + r.device + " " + to_string(run_mode(r.settings)),
                    "mode " + std::string(to_string(run_mode(r.settings)))}) {
                fam[name][k].first.push_back(p[j]);
                fam[name][k].second.push_back(r.target_ms);
              }
            }
          }
        };
        record(m, mo.pred, mo.lo80, mo.hi80, mo.lo95, mo.hi95, with_iv, mo.ood);
        if (!mo.apred.empty())
          record(anchored_name, mo.apred, mo.alo80, mo.ahi80, mo.alo95, mo.ahi95, true, anchored_ood);
        log(fmt::format("seed {} {}: {} trained on {} runs, tested on {} ({:.1f} s)", seed, sp.name, m,
                        train.size(), sp.test.size(), secs_since(tm)));
      }
    }
    nlohmann::json sj = {{"seed", seed}, {"methods", nlohmann::json::object()}};
    for (const auto& m : methods_out) {
      ErrorStats all = ErrorStats::of(pred_all[m], truth_all[m]);
      stats[m]["all"].push_back(all);
      sj["methods"][m]["all"] = all.to_json();
      for (auto& [f, pt] : fam[m]) {
        ErrorStats e = ErrorStats::of(pt.first, pt.second);
        stats[m][f].push_back(e);
        sj["methods"][m][f] = e.to_json();
      }
    }
    for (const auto& [m, cv] : cover80) {
      const double n = static_cast<double>(cv.size());
      std::vector<double> w = width95[m];
      std::sort(w.begin(), w.end());
      const double ood_share = static_cast<double>(std::count_if(ood_d[m].begin(), ood_d[m].end(),
                                                                 [](double d) { return d > 0; })) /
                               n;
      const nlohmann::json ij = {
          {"n", cv.size()},
          {"coverage80_pct", 100 * std::accumulate(cv.begin(), cv.end(), 0.0) / n},
          {"coverage95_pct", 100 * std::accumulate(cover95[m].begin(), cover95[m].end(), 0.0) / n},
          {"median_factor95", w[w.size() / 2]},
          {"out_of_domain_pct", 100 * ood_share}};
      sj["intervals"][m] = ij;
      interval_rows[m].push_back(ij);
    }
    per_seed.push_back(sj);

    // Ablations on the id split: error vs training runs, D-optimal vs random.
    if (o.ablations && o.protocol == "id") {
      const EvalSplit& sp = splits.at(0);
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
      const size_t k = std::max<size_t>(eval_detail::hp_feature_count() + 1, sp.train.size() / 4);
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
  }

  // Summary: mean +- sd over seeds of every statistic.
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
  std::map<std::string, int64_t> fam_count, fam_count_test;
  for (const auto& r : res.runs) (r.test_store ? fam_count_test : fam_count)[r.family]++;
  res.report = {{"protocol", o.protocol},
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
                {"devices",
                 [&] {
                   nlohmann::json d = nlohmann::json::array();
                   for (auto& [k, v] : devices) d.push_back(v.to_json());
                   return d;
                 }()},
                {"gnn",
                 {{"epochs", o.gnn.epochs},
                  {"patience", o.gnn.patience},
                  {"lr", o.gnn.lr},
                  {"val_fraction", o.gnn.val_fraction},
                  {"loss", o.gnn.loss}}},
                {"birnn_epochs", o.birnn_epochs},
                {"mlp_epochs", o.mlp_epochs},
                {"summary", summary},
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
  res.report["layer_times"] = o.in_model ? fmt::format(
                                               "isolated rows + in-model rows of the training runs, "
                                               "cross-fitted over {} folds",
                                               o.crossfit_folds)
                                         : std::string("isolated layer rows");
  if (o.host_term)
    res.report["layer_times"] =
        res.report["layer_times"].get<std::string>() +
        "; T_sum = max(their sum, nodes x d), d per GPU fitted on the split's training runs";
  if (o.host_node_ms > 0)
    res.report["layer_times"] =
        res.report["layer_times"].get<std::string>() +
        fmt::format("; a GPU without a fitted d: d = {:.1f} us (--host-node-us)", o.host_node_ms * 1e3);
  if (o.device_crossfit)
    res.report["layer_times"] =
        res.report["layer_times"].get<std::string>() +
        "; training runs' from layer models without their own device (--device-crossfit)";
  if (o.calibrate_rows > 0) {
    res.report["layer_times"] = res.report["layer_times"].get<std::string>() +
                                fmt::format(
                                    "; the {} device's calibrated by {} of its own rows per kind "
                                    "(--calibrate-rows)",
                                    lodo ? "held-out" : "test", o.calibrate_rows);
    res.report["calibrations"] = calibrations;
  }
  res.report["scaledl_config"] = {{"alpha_bound", o.alpha_bound}, {"ood_tau", o.ood_tau}};
  if (!dopt_rows.empty()) res.report["doptimal_vs_random"] = dopt_rows;
  return res;
}

}  // namespace scaledl
