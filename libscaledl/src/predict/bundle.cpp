// scaledl train -> one bundle directory; predict --bundle loads it (bundle.hpp).
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/device_intervals.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "scaledl/core/build_info.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/core/strided_threads.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/predict/graph_cv.hpp"
#include "scaledl/predict/physics.hpp"

namespace fs = std::filesystem;

namespace scaledl {

namespace {

const char* kLayersDir = "layers";
const char* kGraphFile = "graph.safetensors";
const char* kGraphDeviceOutFile = "graph-device-out.safetensors";
const char* kCommFile = "comm.json";
const char* kMemoryFile = "memory.json";

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

/// Every regular file under `root`, as paths relative to it, sorted.
std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), root).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

void add_range(std::map<std::string, std::pair<double, double>>& r, const std::string& k, double v) {
  auto it = r.find(k);
  if (it == r.end())
    r[k] = {v, v};
  else
    it->second = {std::min(it->second.first, v), std::max(it->second.second, v)};
}

}  // namespace

double Bundle::host_node_ms_for(const std::string& device_key) const {
  if (host_node_ms_given) return *host_node_ms_given;
  const auto it = host_node_ms.find(device_key);
  return it == host_node_ms.end() ? 0.0 : it->second;
}

IterationPrediction Bundle::predict(const LayerGraph& g, const DeviceRecord& dev, bool physics) const {
  return predict_many({&g}, dev, physics).at(0);
}

namespace {
using MemoValue = Bundle::BoundsMemo::Value;

MemoValue memo_value(const IterationPrediction& p) {
  return {p.t_iter_ms, p.lo80_ms, p.hi80_ms, p.lo95_ms, p.hi95_ms};
}

/// T_iter and its intervals raised to at least `floor` (none is ever lowered);
/// `from` (may be null) is the prediction the floor came from.
void raise_to(IterationPrediction& p, double floor_ms, const MemoValue* from, const std::string& why) {
  if (p.t_iter_ms >= floor_ms) return;
  p.t_iter_ms = floor_ms;
  p.adjusted = why;
  if (std::isfinite(p.lo80_ms)) {
    auto pick = [&](double own, double theirs) {
      return std::max(own, from && std::isfinite(theirs) ? theirs : floor_ms);
    };
    p.lo80_ms = pick(p.lo80_ms, from ? from->lo80_ms : NAN);
    p.hi80_ms = pick(p.hi80_ms, from ? from->hi80_ms : NAN);
    p.lo95_ms = pick(p.lo95_ms, from ? from->lo95_ms : NAN);
    p.hi95_ms = pick(p.hi95_ms, from ? from->hi95_ms : NAN);
  }
}
}  // namespace

void raise_prediction_to(IterationPrediction& p, const IterationPrediction& floor, const std::string& why) {
  const MemoValue v = memo_value(floor);
  raise_to(p, v.t_iter_ms, &v, why);
}

AnchorFit Bundle::fit_anchor(const std::vector<const LayerGraph*>& gs, const std::vector<double>& measured_ms,
                             const DeviceRecord& dev) const {
  const IntervalModel* iv = intervals_for(dev.key());
  SCALEDL_CHECK(iv != nullptr, "--anchor needs a bundle with intervals (one trained with its graph model)");
  SCALEDL_CHECK(gs.size() == measured_ms.size(), "fit_anchor: {} configurations, {} times", gs.size(),
                measured_ms.size());
  const std::vector<IterationPrediction> p = predict_many(gs, dev, /*physics=*/true);
  std::vector<double> r;
  for (size_t i = 0; i < p.size(); ++i) r.push_back(std::log(measured_ms[i] / p[i].t_iter_ms));
  const auto sds = anchor_sds(*iv, without_layer_rows(dev.key()));
  return scaledl::fit_anchor(r, sds.first, sds.second);
}

void Bundle::apply_anchor(IterationPrediction& p, const AnchorFit& a) const {
  const std::optional<IntervalModel>& ivo = p.device_out_refinement ? intervals_device_out : intervals;
  SCALEDL_CHECK(ivo.has_value(), "--anchor needs a bundle with intervals (one trained with its graph model)");
  const IntervalModel& iv = *ivo;
  // Measured runs add information: the anchored interval is never wider, on either side in log
  // terms, than the one the prediction had without them.
  const double before = p.t_iter_ms;
  const bool had = std::isfinite(p.lo80_ms) && std::isfinite(p.hi95_ms) && before > 0;
  const double w[4] = {
      had ? std::log(before / p.lo80_ms) : INFINITY, had ? std::log(p.hi80_ms / before) : INFINITY,
      had ? std::log(before / p.lo95_ms) : INFINITY, had ? std::log(p.hi95_ms / before) : INFINITY};
  p.t_iter_ms *= a.factor();
  const Interval i80 = anchored_interval(iv, a, p.t_iter_ms, p.ood_distance, 0.80, p.t_sum_ms),
                 i95 = anchored_interval(iv, a, p.t_iter_ms, p.ood_distance, 0.95, p.t_sum_ms);
  p.lo80_ms = std::max(i80.lo, p.t_iter_ms * std::exp(-w[0]));
  p.hi80_ms = std::min(i80.hi, p.t_iter_ms * std::exp(w[1]));
  p.lo95_ms = std::max(i95.lo, p.t_iter_ms * std::exp(-w[2]));
  p.hi95_ms = std::min(i95.hi, p.t_iter_ms * std::exp(w[3]));
  p.unseen_device_interval = false;
  p.no_interval.clear();  // the measured runs calibrate it
  if (p.t_roofline_ms > 0) raise_to(p, p.t_roofline_ms, nullptr, "roofline");
}

std::vector<IterationPrediction> Bundle::predict_many(const std::vector<const LayerGraph*>& gs,
                                                      const DeviceRecord& dev, bool physics) const {
  for (const LayerGraph* g : gs)
    SCALEDL_CHECK(g->settings.num_devices == 1 || comm.has_value() || comm_given.has_value(),
                  "--devices={} but the bundle has no all-reduce calibration (train it with --comm FILE)",
                  g->settings.num_devices);
  // The inputs, then (with physics) every distinct smaller ladder configuration
  // that neither an input nor the memo already holds.
  std::vector<const LayerGraph*> all = gs;
  std::vector<std::unique_ptr<LayerGraph>> owned;
  std::vector<std::string> keys;  // memo key of all[k]
  std::vector<MemoValue> known;   // memo hits
  // Ladder of input k: (index in all, label) for points predicted here, and
  // (index in known, label) for memo hits.
  std::vector<std::vector<std::pair<size_t, std::string>>> ladder(gs.size());
  std::vector<std::vector<std::pair<size_t, std::string>>> ladder_known(gs.size());
  if (physics) {
    // The whole record (two specs may share a name) and the host term predictions use.
    const LayerCalibration* cal = calibration_for(dev.key());
    const std::string dev_key = dev.to_json().dump() +
                                fmt::format("\nhost {}\n", host_node_ms_for(dev.key())) +
                                (cal ? cal->to_json().dump() + "\n" : std::string());
    std::map<std::string, size_t> index;  // memo key -> index in all
    std::vector<std::string> model_json(gs.size());
    for (size_t k = 0; k < gs.size(); ++k) {
      model_json[k] = gs[k]->model.to_json().dump();
      keys.push_back(sha256_hex(dev_key + model_json[k] + gs[k]->settings.to_json().dump()));
      index.emplace(keys.back(), k);
    }
    std::lock_guard<std::mutex> lock(bounds_memo->mu);
    // First the ladder points, each an input, a memo hit, or a graph still to build (one per
    // distinct key, in the order met); then those graphs, on the hardware threads; then each
    // input's ladder in its own order, without the points that are no valid configuration.
    struct Pending {
      size_t input;  // whose model
      TrainSettings settings;
      std::string key;
    };
    std::vector<Pending> pending;
    std::map<std::string, size_t> pending_index;  // memo key -> index in pending
    struct Rung {
      bool is_pending;
      size_t at;  // index in all, or in pending
      std::string label;
    };
    std::vector<std::vector<Rung>> rungs(gs.size());
    for (size_t k = 0; k < gs.size(); ++k)
      for (LadderPoint& lp : monotone_ladder(gs[k]->model, gs[k]->settings)) {
        std::string key = sha256_hex(dev_key + model_json[k] + lp.settings.to_json().dump());
        if (auto it = index.find(key); it != index.end()) {
          rungs[k].push_back({false, it->second, std::move(lp.label)});
          continue;
        }
        if (auto hit = bounds_memo->values.find(key); hit != bounds_memo->values.end()) {
          known.push_back(hit->second);
          ladder_known[k].emplace_back(known.size() - 1, std::move(lp.label));
          continue;
        }
        auto [pit, fresh] = pending_index.emplace(key, pending.size());
        if (fresh) pending.push_back({k, std::move(lp.settings), std::move(key)});
        rungs[k].push_back({true, pit->second, std::move(lp.label)});
      }
    // Building the graphs is most of a lone prediction's bounds (a GPT-2 large training at batch
    // 4 x 1,024 has 75 of them); each is independent of the others.
    // Any other exception (out of memory) reaches the caller through for_each_strided.
    std::vector<std::unique_ptr<LayerGraph>> built(pending.size());
    for_each_strided(pending.size(), strided_thread_count(pending.size()), [&](size_t i) {
      try {
        built[i] =
            std::make_unique<LayerGraph>(build_layer_graph(gs[pending[i].input]->model, pending[i].settings));
      } catch (const Error&) {
        // not a valid configuration of this model (no bound from it)
      }
    });
    std::vector<size_t> placed(pending.size(), SIZE_MAX);  // index in all of each built graph
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!built[i]) continue;
      all.push_back(built[i].get());
      owned.push_back(std::move(built[i]));
      keys.push_back(pending[i].key);
      placed[i] = all.size() - 1;
      index.emplace(pending[i].key, placed[i]);
    }
    for (size_t k = 0; k < gs.size(); ++k)
      for (Rung& r : rungs[k]) {
        const size_t at = r.is_pending ? placed[r.at] : r.at;
        if (at != SIZE_MAX) ladder[k].emplace_back(at, std::move(r.label));
      }
  }
  const double host_ms_per_node = host_node_ms_for(dev.key());
  const bool unseen =
      without_layer_rows(dev.key());  // no layer timing of this device trained the layer models
  const bool device_out = uses_device_out(dev.key());
  const IntervalModel* iv = intervals_for(dev.key());
  std::vector<IterationPrediction> out;
  if (!comm_given) {
    out = predict_iterations(all, dev, layers, graph_for(dev.key()), comm ? *comm : CommModel{}, 256,
                             host_ms_per_node, calibration_for(dev.key()));
  } else {
    // Single-device graphs with the bundle's own collective model, the others with the given one.
    std::vector<const LayerGraph*> part[2];
    std::vector<size_t> at[2];
    for (size_t k = 0; k < all.size(); ++k) {
      const int multi = all[k]->settings.num_devices > 1 ? 1 : 0;
      part[multi].push_back(all[k]);
      at[multi].push_back(k);
    }
    out.resize(all.size());
    for (int multi : {0, 1}) {
      if (part[multi].empty()) continue;
      const CommModel c = multi ? *comm_given : comm ? *comm : CommModel{};
      std::vector<IterationPrediction> got =
          predict_iterations(part[multi], dev, layers, graph_for(dev.key()), c, 256, host_ms_per_node,
                             calibration_for(dev.key()));
      for (size_t i = 0; i < got.size(); ++i) out[at[multi][i]] = std::move(got[i]);
    }
  }
  for (IterationPrediction& p : out) {
    p.device_out_refinement = device_out && p.refined;
    if (!iv || !p.refined) continue;
    if (unseen && dev.kind == "cpu") {
      p.no_interval =
          "no calibrated interval for a CPU whose layer timings are not in the bundle: held out, such "
          "CPUs fell outside the 95 % interval (docs/predict.md, \"Intervals and the out-of-domain flag\"); "
          "time its layers "
          "(`bench layers`) and train with them, or anchor on measured runs (--anchor)";
      continue;
    }
    const Interval a = iv->at(p.t_iter_ms, p.ood_distance, 0.80, p.t_sum_ms, unseen);
    const Interval b = iv->at(p.t_iter_ms, p.ood_distance, 0.95, p.t_sum_ms, unseen);
    p.unseen_device_interval = unseen && iv->has_unseen();
    p.lo80_ms = a.lo;
    p.hi80_ms = a.hi;
    p.lo95_ms = b.lo;
    p.hi95_ms = b.hi;
  }
  if (physics) {
    std::vector<MemoValue> vals(all.size());
    for (size_t k = 0; k < all.size(); ++k) {
      IterationPrediction& p = out[k];
      p.t_model_ms = p.t_iter_ms;
      p.t_roofline_ms = iteration_roofline_ms(*all[k], dev);
      raise_to(p, p.t_roofline_ms, nullptr, "roofline");
      vals[k] = memo_value(p);
    }
    {
      std::lock_guard<std::mutex> lock(bounds_memo->mu);
      if (bounds_memo->values.size() + all.size() > 100000) bounds_memo->values.clear();
      for (size_t k = 0; k < all.size(); ++k) bounds_memo->values[keys[k]] = vals[k];
    }
    for (size_t k = 0; k < gs.size(); ++k) {
      // The train rung also adds the optimizer step's roofline: the step follows the backward pass.
      auto plus = [&](const std::string& label) {
        return label.rfind("mode fwd-bwd", 0) == 0 ? update_roofline_ms(*gs[k], dev) : 0.0;
      };
      auto shifted = [&](MemoValue v, double d) {
        for (double* x : {&v.t_iter_ms, &v.lo80_ms, &v.hi80_ms, &v.lo95_ms, &v.hi95_ms}) *x += d;
        return v;
      };
      for (const auto& [j, label] : ladder[k]) {
        const MemoValue v = shifted(vals[j], plus(label));
        raise_to(out[k], v.t_iter_ms, &v, "monotone: " + label);
      }
      for (const auto& [j, label] : ladder_known[k]) {
        const MemoValue v = shifted(known[j], plus(label));
        raise_to(out[k], v.t_iter_ms, &v, "monotone: " + label);
      }
    }
    // Among the inputs themselves (a sweep, a CSV): a running maximum along batch,
    // then along seq, among inputs that differ in that one setting only. The
    // second pass keeps the first one's order (a maximum of ordered rows is ordered).
    for (const bool batch_axis : {true, false}) {
      std::map<std::string, std::vector<size_t>> groups;
      for (size_t k = 0; k < gs.size(); ++k) {
        TrainSettings t = gs[k]->settings;
        (batch_axis ? t.batch : t.seq_len) = 0;
        groups[gs[k]->model.to_json().dump() + t.to_json().dump()].push_back(k);
      }
      auto axis = [&](size_t k) { return batch_axis ? gs[k]->settings.batch : gs[k]->settings.seq_len; };
      for (auto& [gk, ks] : groups) {
        if (ks.size() < 2) continue;
        std::stable_sort(ks.begin(), ks.end(), [&](size_t a, size_t b) { return axis(a) < axis(b); });
        size_t best = ks[0];
        for (size_t k : ks) {
          if (axis(best) < axis(k)) {
            const MemoValue v = memo_value(out[best]);
            raise_to(out[k], v.t_iter_ms, &v,
                     fmt::format("monotone: {} {}", batch_axis ? "batch" : "seq", axis(best)));
          }
          if (out[k].t_iter_ms >= out[best].t_iter_ms) best = k;
        }
      }
    }
  }
  out.resize(gs.size());
  return out;
}

std::vector<std::string> Bundle::out_of_range(const IterationPrediction& p) const {
  std::vector<std::string> out;
  const auto& names = global_feature_names();
  for (size_t i = 0; i < names.size() && i < p.global_features.size(); ++i) {
    auto it = global_ranges.find(names[i]);
    if (it == global_ranges.end()) continue;
    const double v = p.global_features[i], lo = it->second.first, hi = it->second.second;
    const double tol = 1e-6 * std::max(1.0, std::abs(hi - lo));
    if (v < lo - tol || v > hi + tol)
      out.push_back(fmt::format("{}={:.4g} outside [{:.4g}, {:.4g}]", names[i], v, lo, hi));
  }
  return out;
}

nlohmann::json train_bundle(const BundleTrainOptions& o, const std::string& out) {
  SCALEDL_CHECK(!o.dbs.empty(), "--db: give at least one store");
  SCALEDL_CHECK(!out.empty(), "--out: give the bundle directory");
  SCALEDL_CHECK(o.folds == 0 || o.folds >= 2, "--folds={} must be 0 or >= 2", o.folds);
  SCALEDL_CHECK(o.max_cv >= 0 && o.max_cv < 1, "--max-cv={} must be in [0, 1)", o.max_cv);
  const auto t0 = std::chrono::steady_clock::now();
  StagingDir stage(out, bundle_output_files(), "a bundle");  // checks --out before hours of training

  // Layer models: the stores' isolated layer rows (+ in-model node times).
  TrainingData data = load_training_data(o.dbs, {}, o.layer_max_cv);
  SCALEDL_CHECK(!data.rows.empty(),
                "--db={}: the store(s) hold no ok layer rows to train the layer models on", o.dbs.front());
  std::vector<LayerSample> samples = samples_from_measurements(data.rows, data.devices);
  std::map<std::string, int64_t> layer_row_devices;  // isolated layer samples per device
  for (const auto& smp : samples) ++layer_row_devices[smp.device];
  SCALEDL_CHECK(!o.device_crossfit || o.graph, "--device-crossfit trains a refinement: drop --no-graph");
  SCALEDL_CHECK(!o.device_crossfit || layer_row_devices.size() >= 3,
                "--device-crossfit needs layer rows of >= 3 devices (the stores have {})",
                layer_row_devices.size());
  if (!o.in_model_dbs.empty()) {
    SCALEDL_CHECK(o.crossfit_folds >= 2, "--crossfit-folds={} must be >= 2", o.crossfit_folds);
    auto im = load_in_model_samples(o.in_model_dbs, data.devices);
    samples.insert(samples.end(), im.begin(), im.end());
  }
  LayerPredictor lp = LayerPredictor::train_samples(samples, data.devices, o.layers);

  // Model runs -> graphs.
  std::vector<InModelRun> runs;
  for (const auto& db : o.dbs) {
    Store store(db, /*read_only=*/true);
    for (auto& r : store.models("", /*ok_only=*/false))
      if (usable_model_label(r, o.max_cv)) runs.push_back({db, std::move(r)});
  }
  CommModel comm;
  if (!o.comm.empty()) comm = load_comm_model(o.comm);
  std::vector<GraphFeatures> graphs;
  std::map<std::string, int64_t> per_family;
  std::set<std::string> run_devices;
  for (const auto& r : runs) {
    per_family[r.run.family]++;
    run_devices.insert(r.run.device);
  }
  if (o.in_model_dbs.empty() || !o.graph || runs.size() < static_cast<size_t>(o.crossfit_folds)) {
    for (const auto& r : runs) graphs.push_back(run_graph_features(r, lp, data.devices, comm));
  } else {
    // Cross-fitted layer times (see BundleTrainOptions::crossfit_folds).
    std::vector<std::string> groups;
    for (const auto& r : runs) groups.push_back(in_model_group(r.ctx, r.run));
    graphs.resize(runs.size());
    for_each_crossfit_model(groups, o.crossfit_folds, o.gnn_train.seed, samples, data.devices, o.layers,
                            [&](size_t i, const LayerPredictor& m) {
                              graphs[i] = run_graph_features(runs[i], m, data.devices, comm);
                            });
  }
  // The host term (physics.hpp): fitted on the runs' plain sums, then part of their T_sum.
  std::map<std::string, double> host;
  if (o.host_term) {
    std::vector<HostRun> hr;
    for (size_t i = 0; i < graphs.size(); ++i)
      hr.push_back({runs[i].run.device, static_cast<double>(graphs[i].num_nodes),
                    graphs[i].t_sum_ms + graphs[i].t_comm_ms, graphs[i].target_ms});
    host = fit_host_node_ms(hr, data.devices);
    for (size_t i = 0; i < graphs.size(); ++i) {
      auto it = host.find(runs[i].run.device);
      if (it != host.end()) apply_host_term(graphs[i], it->second);
    }
  }
  SCALEDL_CHECK(
      !o.graph || !graphs.empty(),
      "--db={}: the store(s) hold no ok model runs to train the graph refinement on (use --no-graph for "
      "layer models alone)",
      o.dbs.front());

  // Write into a temporary sibling; rename at the end (fs_util.hpp).
  const fs::path tmp = stage.path();
  {
    lp.save((tmp / kLayersDir).string());
    nlohmann::json manifest;
    manifest["format"] = kBundleFormat;
    manifest["format_version"] = kBundleFormatVersion;
    if (o.reproducible) {
      manifest["reproducible"] = true;  // no time, duration or commit: the same inputs give the same bytes
    } else {
      manifest["created"] = utc_now();
      manifest["build_commit"] = build_commit();
    }
    manifest["command"] = o.command;
    nlohmann::json devs = nlohmann::json::array();
    for (auto& [k, d] : data.devices) devs.push_back(d.to_json());
    manifest["devices"] = devs;
    std::map<std::string, std::pair<double, double>> ranges;
    const auto& names = global_feature_names();
    for (const auto& g : graphs)
      for (size_t i = 0; i < names.size() && i < g.z.size(); ++i) add_range(ranges, names[i], g.z[i]);
    nlohmann::json rj = nlohmann::json::object();
    for (auto& [k, v] : ranges) rj[k] = {v.first, v.second};
    double tmin = INFINITY, tmax = 0;
    for (const auto& g : graphs) {
      tmin = std::min(tmin, g.target_ms);
      tmax = std::max(tmax, g.target_ms);
    }
    manifest["training"] = {
        {"stores", o.dbs},
        {"in_model_stores", o.in_model_dbs},
        {"layer_rows", data.rows.size()},
        {"layer_samples", samples.size()},
        {"model_runs", graphs.size()},
        {"layer_times", o.in_model_dbs.empty()
                            ? "isolated layer rows"
                            : fmt::format("cross-fitted over {} folds of the runs", o.crossfit_folds)},
        {"max_cv", o.max_cv},
        {"runs_per_family", per_family},
        {"run_devices", std::vector<std::string>(run_devices.begin(), run_devices.end())},
        {"layer_row_devices", layer_row_devices},
        {"t_iter_ms_range", graphs.empty() ? nlohmann::json() : nlohmann::json({tmin, tmax})},
        {"global_feature_ranges", rj}};
    if (o.layer_max_cv > 0)
      manifest["training"]["layer_max_cv"] = o.layer_max_cv;  // absent: ok layer rows only
    if (o.host_term) {
      nlohmann::json hj = nlohmann::json::object();
      for (const auto& [k, d] : host) {
        int64_t n = 0;
        for (const auto& r : runs) n += r.run.device == k ? 1 : 0;
        hj[k] = {{"node_ms", d}, {"runs", n}};
      }
      manifest["host"] = hj;  // empty: no GPU had kMinHostRuns runs, or no d beat none
    }
    nlohmann::json lsum = lp.summary();
    if (o.reproducible) lsum.erase("seconds");
    manifest["layers"] = {{"dir", kLayersDir}, {"options", o.layers.to_json()}, {"summary", lsum}};
    if (o.graph) {
      GnnTrainReport rep;
      GraphPredictor gp = GraphPredictor::train(graphs, o.gnn, o.gnn_train, &rep);
      IntervalModel iv = calibrate_intervals(graphs, o.gnn, o.gnn_train, rep);
      // Layer models without one device ("\n" + its key), shared by the device-out
      // spread and the device-out refinement.
      LayerModelCache fold_models;
      std::vector<LayerGraph> lgs;
      DeviceSpread ds;
      if ((iv.valid() && o.device_intervals) || o.device_crossfit) {
        lgs.reserve(runs.size());
        std::vector<DeviceOutRun> dor;
        for (const auto& r : runs) lgs.push_back(run_layer_graph(r));
        for (size_t i = 0; i < runs.size(); ++i)
          dor.push_back({&lgs[i], runs[i].run.device, runs[i].run.iter.median_ms});
        ds = device_out_spread(dor, samples, data.devices, o.layers, &fold_models);
      }
      auto with_spread = [&](IntervalModel& m) {
        if (!m.valid() || !o.device_intervals || !ds.valid()) return;
        m.unseen_q80 = ds.q80;
        m.unseen_q95 = ds.q95;
        m.unseen_info = ds.to_json();
      };
      with_spread(iv);
      if (o.device_crossfit) {
        std::set<std::string> sample_devices;
        for (const auto& s : samples) sample_devices.insert(s.device);
        std::vector<GraphFeatures> gdo;
        int64_t from_fold = 0, no_rows = 0, left_out = 0;
        for (size_t i = 0; i < runs.size(); ++i) {
          const std::string& dev = runs[i].run.device;
          if (!sample_devices.count(dev)) {  // the layer models never saw this device anyway
            gdo.push_back(run_graph_features(runs[i], lp, data.devices, comm));
            ++no_rows;
            continue;
          }
          const auto m = model_without_device(samples, data.devices, dev, o.layers, &fold_models);
          if (!fold_covers(lgs[i], lp, *m)) {
            ++left_out;
            continue;
          }
          gdo.push_back(run_graph_features(runs[i], *m, data.devices, comm));
          ++from_fold;
        }
        SCALEDL_CHECK(
            gdo.size() >= 2,
            "--device-crossfit: {} of {} runs have layer times from models without their device (a layer "
            "model only their own device's rows give leaves the rest out); it needs >= 2",
            gdo.size(), runs.size());
        GnnTrainReport rdo;
        GraphPredictor gpdo = GraphPredictor::train(gdo, o.gnn, o.gnn_train, &rdo);
        IntervalModel ivdo = calibrate_intervals(gdo, o.gnn, o.gnn_train, rdo);
        with_spread(ivdo);
        nlohmann::json rj = rdo.to_json();
        if (o.reproducible) rj.erase("seconds");
        nlohmann::json gj = {
            {"file", kGraphDeviceOutFile},
            {"report", rj},
            {"runs",
             {{"device_out", from_fold}, {"device_without_layer_rows", no_rows}, {"left_out", left_out}}},
            {"note",
             "trained on layer times from models without the run's own device: predicts "
             "the devices without layer timings in this bundle (docs/unseen-gpu.md)"}};
        if (ivdo.valid()) gj["intervals"] = ivdo.to_json();
        gpdo.save((tmp / kGraphDeviceOutFile).string(), {{"bundle", true}});
        manifest["graph_device_out"] = gj;
      }
      nlohmann::json grep = rep.to_json();
      if (o.reproducible) grep.erase("seconds");
      nlohmann::json g = {{"file", kGraphFile},
                          {"config", o.gnn.to_json()},
                          {"report", grep},
                          {"train_options", o.gnn_train.to_json()}};
      if (iv.valid()) g["intervals"] = iv.to_json();
      if (o.folds > 0) {
        SCALEDL_CHECK(static_cast<size_t>(o.folds) <= graphs.size(),
                      "--folds={} but there are only {} model runs", o.folds, graphs.size());
        GnnCvReport cv = cross_validate_graphs(graphs, o.gnn, o.gnn_train, o.folds);
        g["cv"] = {
            {"folds", cv.folds},
            {"mre_before", cv.mre_before},
            {"mre", cv.mre},
            {"fold_mre", cv.fold_mre},
            {"note", "k-fold over the training runs: inside the training distribution (see scaledl eval)"}};
      }
      gp.save((tmp / kGraphFile).string(), {{"bundle", true}});
      manifest["graph"] = g;
    }
    // Peak memory: the correction of the analytic estimate, when enough runs measured it.
    {
      const auto ms = load_memory_samples(o.memory_dbs.empty() ? o.dbs : o.memory_dbs);
      if (ms.size() >= 10) {
        const MemoryCorrection mc = MemoryCorrection::train(ms, /*direct=*/false, o.gnn_train.seed);
        write_json_file((tmp / kMemoryFile).string(), mc.to_json());
        manifest["memory"] = {
            {"file", kMemoryFile},
            {"runs", ms.size()},
            {"stores", o.memory_dbs.empty() ? o.dbs : o.memory_dbs},
            {"device_kinds", mc.device_kinds()},
            {"oof_mre", mc.oof_mre()},
            {"note", "5-fold out-of-fold error on the training runs (see scaledl eval memory)"}};
      } else {
        manifest["memory"] = {
            {"runs", ms.size()},
            {"note", "fewer than 10 runs with a measured peak: predict uses the analytic estimate"}};
      }
    }
    if (!o.comm.empty()) {
      write_json_file((tmp / kCommFile).string(), comm.to_json());
      manifest["comm"] = {{"file", kCommFile}, {"source", o.comm}};
    }
    nlohmann::json files = nlohmann::json::object();
    for (const auto& f : files_under(tmp)) files[f] = sha256_file((tmp / f).string());
    manifest["files"] = files;
    if (!o.reproducible)
      manifest["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_json_file((tmp / "manifest.json").string(), manifest);
    stage.commit();
    return manifest;
  }
}

OwnedFiles bundle_output_files() {
  return owned_by_manifest("manifest.json", kBundleFormat, [](const nlohmann::json& m) {
    std::set<std::string> files;
    for (const auto& [rel, sha] : m.at("files").items()) files.insert(rel);
    return files;
  });
}

namespace {

/// A name as a one-line message can show it: as is when it is plain printable ASCII,
/// else as a JSON string (control characters escaped, invalid UTF-8 replaced).
std::string printable(const std::string& s) {
  bool plain = !s.empty();
  for (const unsigned char c : s) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  return plain ? s : nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The one checked reader of a bundle manifest (issue #39): every field load_bundle reads
/// goes through it, and every message names the file and the key path, e.g.
/// `B/manifest.json: comm.file is missing` or
/// `B/manifest.json: host."cuda:NVIDIA H100 80GB HBM3".node_ms=1e+300 is out of range (0, 1000] ...`.
/// A manifest is not covered by the bundle's checksums (it holds them), so nothing in it is trusted.
class Field {
 public:
  Field(const nlohmann::json& v, const std::string& file, std::string key, std::string name = "")
      : v_(&v), file_(&file), key_(std::move(key)), name_(std::move(name)) {}
  const nlohmann::json& json() const { return *v_; }
  /// The key path ("host.\"cuda:X\".node_ms"); "" for the whole manifest.
  const std::string& key() const { return key_; }
  /// The last key as the manifest spells it (a member of an object).
  const std::string& name() const { return name_; }

  /// "FILE: KEY=VALUE what" (one line), as an Error.
  [[noreturn]] void bad(const std::string& what) const {
    if (key_.empty()) fail("{}: {} {}", *file_, show(*v_), what);
    fail("{}: {}={} {}", *file_, key_, show(*v_), what);
  }
  const nlohmann::json& object() const {
    if (!v_->is_object()) bad("is not an object");
    return *v_;
  }
  std::optional<Field> find(const std::string& k) const {
    const nlohmann::json& o = object();
    const auto it = o.find(k);
    if (it == o.end()) return std::nullopt;
    return Field(*it, *file_, child(k), k);
  }
  Field at(const std::string& k) const {
    std::optional<Field> f = find(k);
    if (!f) fail("{}: {} is missing", *file_, child(k));
    return *f;
  }
  /// The members of an object, in the manifest's order.
  std::vector<Field> members() const {
    std::vector<Field> out;
    for (auto it = object().begin(); it != object().end(); ++it)
      out.emplace_back(*it, *file_, child(it.key()), it.key());
    return out;
  }
  /// Element i of an array of exactly n elements.
  Field item(size_t i, size_t n, const std::string& what) const {
    if (!v_->is_array() || v_->size() != n) bad("is not " + what);
    return Field((*v_)[i], *file_, fmt::format("{}[{}]", key_, i));
  }
  std::string str() const {
    if (!v_->is_string()) bad("is not a string");
    return v_->get<std::string>();
  }
  /// A finite number in [lo, hi]; `unit` follows the range in messages (" ms ...").
  double num(double lo, double hi, const std::string& unit = "") const {
    if (!v_->is_number()) bad("is not a number");
    const double d = v_->get<double>();
    if (!(std::isfinite(d) && d >= lo && d <= hi))
      bad(fmt::format("is out of range [{}, {}]{}", lo, hi, unit));
    return d;
  }
  int64_t integer(int64_t lo, int64_t hi) const {
    const std::string range = fmt::format("is out of range [{}, {}]", lo, hi);
    int64_t x = 0;
    if (v_->is_number_unsigned()) {
      if (hi < 0 || v_->get<uint64_t>() > static_cast<uint64_t>(hi)) bad(range);
      x = static_cast<int64_t>(v_->get<uint64_t>());
    } else if (v_->is_number_integer()) {
      x = v_->get<int64_t>();
    } else if (v_->is_number_float()) {
      const double d = v_->get<double>();
      if (!(std::isfinite(d) && d == std::floor(d))) bad("is not an integer");
      if (std::fabs(d) >= 9.0e18) bad(range);
      x = static_cast<int64_t>(d);
    } else {
      bad("is not an integer");
    }
    if (x < lo || x > hi) bad(range);
    return x;
  }

 private:
  std::string child(const std::string& k) const {
    bool ident = !k.empty();
    for (const unsigned char c : k) ident = ident && (std::isalnum(c) || c == '_' || c == '-');
    return (key_.empty() ? "" : key_ + ".") +
           (ident ? k : nlohmann::json(k).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  const nlohmann::json* v_;
  const std::string* file_;
  std::string key_, name_;
};

/// A bundle path the manifest gives at `f`: inside the bundle (outside() is ""), and one of
/// the files the manifest checksums (for a folder, `FOLDER/manifest.json`: the layer-model
/// manifest, which checksums the folder's model files). Returns root / path.
fs::path bundle_path(const Field& f, const fs::path& root, const std::set<std::string>& listed, bool folder) {
  const std::string rel = f.str();
  if (const std::string why = path_outside(root, rel, "the bundle"); !why.empty())
    f.bad(why + ": a bundle's files stay inside it");
  const fs::path norm = fs::path(rel).lexically_normal();
  const std::string want = (folder ? (norm / "manifest.json").lexically_normal() : norm).generic_string();
  if (!listed.count(want))
    f.bad(fmt::format("names {}, which is not among the files the manifest checksums", printable(want)));
  return root / rel;
}

}  // namespace

Bundle load_bundle(const std::string& dir) {
  const fs::path root(dir);
  SCALEDL_CHECK(fs::is_directory(root), "--bundle={}: not a directory (write one with `scaledl train`)", dir);
  const fs::path mp = root / "manifest.json";
  const std::string mpath = mp.string();
  {
    const std::string kind = file_kind(mp);
    SCALEDL_CHECK(kind != "missing", "--bundle={}: manifest.json is missing", dir);
    SCALEDL_CHECK(kind == "a regular file", "--bundle={}: manifest.json is {}, not a regular file", dir,
                  kind);
  }
  Bundle b;
  b.manifest = read_json_file(mpath);
  const Field m(b.manifest, mpath, "");
  SCALEDL_CHECK(b.manifest.is_object(), "{}: {} is not a bundle manifest (a JSON object)", mpath,
                show(b.manifest));
  {
    const std::optional<Field> f = m.find("format");
    SCALEDL_CHECK(f && f->json() == kBundleFormat, "{}: format={} is not \"{}\"", mpath,
                  f ? show(f->json()) : "(none)", kBundleFormat);
    const std::optional<Field> v = m.find("format_version");
    SCALEDL_CHECK(v && v->json().is_number_integer() && v->json() == kBundleFormatVersion,
                  "{}: format_version={} but this scaledl reads version {}", mpath,
                  v ? show(v->json()) : "(none)", kBundleFormatVersion);
  }

  // Every field first (cheap), then the checksums, then the models.
  // files: bundle path -> SHA-256.
  std::vector<std::pair<std::string, std::string>> sums;
  std::set<std::string> listed;  // lexically normal, '/'-separated
  {
    const std::optional<Field> files = m.find("files");
    SCALEDL_CHECK(files.has_value(), "{}: files is missing", mpath);
    if (files->object().empty()) files->bad("lists no file");
    for (const Field& f : files->members()) {
      const std::string& rel = f.name();
      if (const std::string why = path_outside(root, rel, "the bundle"); !why.empty())
        fail("{}: files key {} {}: a bundle's files stay inside it", mpath, printable(rel), why);
      const std::string sha = f.str();
      bool hex = sha.size() == 64;
      for (const char c : sha) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
      if (!hex) f.bad("is not a SHA-256 (64 lowercase hex digits)");
      sums.emplace_back(rel, sha);
      listed.insert(fs::path(rel).lexically_normal().generic_string());
    }
  }
  const fs::path layers_dir = bundle_path(m.at("layers").at("dir"), root, listed, /*folder=*/true);
  std::optional<fs::path> graph_file, graph_device_out_file, comm_file, memory_file;
  if (const std::optional<Field> g = m.find("graph")) {
    graph_file = bundle_path(g->at("file"), root, listed, false);
    if (const std::optional<Field> iv = g->find("intervals"))
      b.intervals = IntervalModel::from_json(iv->json(), mpath + ": graph.intervals");
  }
  if (const std::optional<Field> g = m.find("graph_device_out")) {
    graph_device_out_file = bundle_path(g->at("file"), root, listed, false);
    SCALEDL_CHECK(graph_file.has_value(), "{}: graph_device_out without graph", mpath);
    if (const std::optional<Field> iv = g->find("intervals"))
      b.intervals_device_out = IntervalModel::from_json(iv->json(), mpath + ": graph_device_out.intervals");
  }
  if (const std::optional<Field> c = m.find("comm"))
    comm_file = bundle_path(c->at("file"), root, listed, false);
  if (const std::optional<Field> mem = m.find("memory"))
    if (const std::optional<Field> f = mem->find("file")) memory_file = bundle_path(*f, root, listed, false);
  if (const std::optional<Field> host = m.find("host")) {
    // The range `predict --host-node-us` accepts (at most 1e6 us), > 0: a fitted term.
    for (const Field& d : host->members()) {
      const nlohmann::json& v = d.at("node_ms").json();
      const double ms = v.is_number() ? v.get<double>() : NAN;
      SCALEDL_CHECK(
          std::isfinite(ms) && ms > 0 && ms <= 1e3,
          "{}: host.{}.node_ms={} must be a number > 0 and at most 1000 ms (the host's cost per graph node; "
          "--host-node-us allows 1e6 us)",
          mpath, d.name(), show(v));
      b.host_node_ms[d.name()] = ms;
    }
  }
  if (const std::optional<Field> t = m.find("training")) {
    t->object();
    if (const std::optional<Field> r = t->find("global_feature_ranges")) {
      const std::vector<std::string>& names = global_feature_names();
      for (const Field& f : r->members()) {
        if (std::find(names.begin(), names.end(), f.name()) == names.end())
          f.bad("is the range of no global feature of this build (retrain the bundle)");
        // The features are logarithms, shares and flags: |x| <= 1e3 holds every real one.
        const double lo = f.item(0, 2, "[lo, hi]").num(-1e3, 1e3),
                     hi = f.item(1, 2, "[lo, hi]").num(-1e3, 1e3);
        if (lo > hi) f.bad("is not [lo, hi] with lo <= hi");
        b.global_ranges[f.name()] = {lo, hi};
      }
    }
    if (const std::optional<Field> l = t->find("layer_row_devices"))  // read by layer_rows_of
      for (const Field& f : l->members()) f.integer(0, int64_t{1} << 40);
  }

  // The checksums, before any model is parsed.
  for (const auto& [rel, sha] : sums) {
    const fs::path p = root / rel;
    const std::string kind = file_kind(p);
    SCALEDL_CHECK(kind != "missing", "--bundle={}: file {} is missing", dir, printable(rel));
    SCALEDL_CHECK(kind == "a regular file", "--bundle={}: file {} is {}, not a regular file", dir,
                  printable(rel), kind);
    const std::string got = sha256_file(p.string());
    SCALEDL_CHECK(got == sha,
                  "--bundle={}: file {} has SHA-256 {} but the manifest says {} (altered or truncated)", dir,
                  printable(rel), got.substr(0, 16), sha.substr(0, 16));
  }

  b.layers = LayerPredictor::load(layers_dir.string());
  if (graph_file) b.graph = GraphPredictor::load(graph_file->string());
  if (graph_device_out_file) b.graph_device_out = GraphPredictor::load(graph_device_out_file->string());
  if (comm_file) b.comm = load_comm_model(comm_file->string());
  if (memory_file)
    b.memory = MemoryCorrection::from_json(read_json_file(memory_file->string()), memory_file->string());
  return b;
}

std::optional<int64_t> Bundle::layer_rows_of(const std::string& device_key) const {
  if (!manifest.contains("training") || !manifest["training"].contains("layer_row_devices"))
    return std::nullopt;
  const auto& m = manifest["training"]["layer_row_devices"];
  if (!m.is_object()) return std::nullopt;
  auto it = m.find(device_key);
  return it != m.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace scaledl
