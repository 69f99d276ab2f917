// scaledl train -> one bundle directory (bundle.hpp): the layer models, the model runs' graphs,
// the graph refinements with their intervals, the memory correction, and the manifest.
#include <algorithm>
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
#include "scaledl/io/store.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/device_intervals.hpp"
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

/// What the bundle's models are trained on, step by step (train_bundle).
struct TrainInputs {
  TrainingData data;                                 // the stores' layer rows and devices
  std::vector<LayerSample> samples;                  // isolated layer samples (+ in-model node times)
  std::map<std::string, int64_t> layer_row_devices;  // isolated layer samples per device
  LayerPredictor lp;                                 // the layer models
  std::vector<InModelRun> runs;                      // the usable model runs
  CommModel comm;                                    // --comm (none: default)
  std::vector<GraphFeatures> graphs;                 // of runs[i]
  std::map<std::string, int64_t> per_family;         // runs per family
  std::set<std::string> run_devices;
  std::map<std::string, double> host;  // fitted host term per device (--host-term)
};

/// A stage's line to BundleTrainOptions::progress (none without one).
void say(const BundleTrainOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

void check_train_options(const BundleTrainOptions& o, const std::string& out) {
  SCALEDL_CHECK(!o.dbs.empty(), "--db: give at least one store");
  SCALEDL_CHECK(!out.empty(), "--out: give the bundle directory");
  SCALEDL_CHECK(o.folds == 0 || o.folds >= 2, "--folds={} must be 0 or >= 2", o.folds);
  SCALEDL_CHECK(o.max_cv >= 0 && o.max_cv < 1, "--max-cv={} must be in [0, 1)", o.max_cv);
}

/// Layer models: the stores' isolated layer rows (+ in-model node times).
void train_layer_models(const BundleTrainOptions& o, TrainInputs& in) {
  in.data = load_training_data(o.dbs, {}, o.layer_max_cv);
  SCALEDL_CHECK(!in.data.rows.empty(),
                "--db={}: the store(s) hold no ok layer rows to train the layer models on", o.dbs.front());
  in.samples = samples_from_measurements(in.data.rows, in.data.devices);
  for (const auto& smp : in.samples) ++in.layer_row_devices[smp.device];
  SCALEDL_CHECK(!o.device_crossfit || o.graph, "--device-crossfit trains a refinement: drop --no-graph");
  SCALEDL_CHECK(o.graph_members >= 1 && o.graph_members <= 16, "--graph-members={} must be in [1, 16]",
                o.graph_members);
  SCALEDL_CHECK(o.graph_members == 1 || o.graph, "--graph-members={} trains refinements: drop --no-graph",
                o.graph_members);
  SCALEDL_CHECK(!o.device_crossfit || in.layer_row_devices.size() >= 3,
                "--device-crossfit needs layer rows of >= 3 devices (the stores have {})",
                in.layer_row_devices.size());
  if (!o.in_model_dbs.empty()) {
    SCALEDL_CHECK(o.crossfit_folds >= 2, "--crossfit-folds={} must be >= 2", o.crossfit_folds);
    auto im = load_in_model_samples(o.in_model_dbs, in.data.devices);
    in.samples.insert(in.samples.end(), im.begin(), im.end());
  }
  say(o,
      fmt::format("layer models: {} samples of {} devices", in.samples.size(), in.layer_row_devices.size()));
  in.lp = LayerPredictor::train_samples(in.samples, in.data.devices, o.layers);
}

/// Model runs -> graphs, with layer times of the layer models (cross-fitted with in-model stores).
void run_graphs(const BundleTrainOptions& o, TrainInputs& in) {
  for (const auto& db : o.dbs) {
    Store store(db, /*read_only=*/true);
    for (auto& r : store.models("", /*ok_only=*/false))
      if (usable_model_label(r, o.max_cv)) in.runs.push_back({db, std::move(r)});
  }
  if (!o.comm.empty()) in.comm = load_comm_model(o.comm);
  for (const auto& r : in.runs) {
    in.per_family[r.run.family]++;
    in.run_devices.insert(r.run.device);
  }
  if (o.in_model_dbs.empty() || !o.graph || in.runs.size() < static_cast<size_t>(o.crossfit_folds)) {
    for (const auto& r : in.runs) in.graphs.push_back(run_graph_features(r, in.lp, in.data.devices, in.comm));
  } else {
    // Cross-fitted layer times (see BundleTrainOptions::crossfit_folds).
    std::vector<std::string> groups;
    for (const auto& r : in.runs) groups.push_back(in_model_group(r.ctx, r.run));
    in.graphs.resize(in.runs.size());
    for_each_crossfit_model(groups, o.crossfit_folds, o.gnn_train.seed, in.samples, in.data.devices, o.layers,
                            [&](size_t i, const LayerPredictor& m) {
                              in.graphs[i] = run_graph_features(in.runs[i], m, in.data.devices, in.comm);
                            });
  }
}

/// The host term (physics.hpp): fitted on the runs' plain sums, then part of their T_sum.
void fit_host_term(const BundleTrainOptions& o, TrainInputs& in) {
  if (!o.host_term) return;
  std::vector<HostRun> hr;
  for (size_t i = 0; i < in.graphs.size(); ++i)
    hr.push_back(graph_host_run(in.graphs[i], in.runs[i].run.device, in.graphs[i].target_ms));
  in.host = fit_host_node_ms(hr, in.data.devices);
  for (size_t i = 0; i < in.graphs.size(); ++i) {
    auto it = in.host.find(in.runs[i].run.device);
    if (it != in.host.end()) apply_host_term(in.graphs[i], it->second);
  }
}

/// The manifest's "training": what the models were trained on.
nlohmann::json training_summary(const BundleTrainOptions& o, const TrainInputs& in) {
  std::map<std::string, std::pair<double, double>> ranges;
  const auto& names = global_feature_names();
  for (const auto& g : in.graphs)
    for (size_t i = 0; i < names.size() && i < g.z.size(); ++i) add_range(ranges, names[i], g.z[i]);
  nlohmann::json rj = nlohmann::json::object();
  for (auto& [k, v] : ranges) rj[k] = {v.first, v.second};
  double tmin = INFINITY, tmax = 0;
  for (const auto& g : in.graphs) {
    tmin = std::min(tmin, g.target_ms);
    tmax = std::max(tmax, g.target_ms);
  }
  nlohmann::json t = {
      {"stores", o.dbs},
      {"in_model_stores", o.in_model_dbs},
      {"layer_rows", in.data.rows.size()},
      {"layer_samples", in.samples.size()},
      {"model_runs", in.graphs.size()},
      {"layer_times", o.in_model_dbs.empty()
                          ? "isolated layer rows"
                          : fmt::format("cross-fitted over {} folds of the runs", o.crossfit_folds)},
      {"max_cv", o.max_cv},
      {"runs_per_family", in.per_family},
      {"run_devices", std::vector<std::string>(in.run_devices.begin(), in.run_devices.end())},
      {"layer_row_devices", in.layer_row_devices},
      {"t_iter_ms_range", in.graphs.empty() ? nlohmann::json() : nlohmann::json({tmin, tmax})},
      {"global_feature_ranges", rj}};
  if (o.layer_max_cv > 0) t["layer_max_cv"] = o.layer_max_cv;  // absent: ok layer rows only
  return t;
}

/// The manifest before the graph models: format, provenance, devices, training data, host term
/// and layer models.
nlohmann::json manifest_head(const BundleTrainOptions& o, const TrainInputs& in) {
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
  for (auto& [k, d] : in.data.devices) devs.push_back(d.to_json());
  manifest["devices"] = devs;
  manifest["training"] = training_summary(o, in);
  if (o.host_term) {
    nlohmann::json hj = nlohmann::json::object();
    for (const auto& [k, d] : in.host) {
      int64_t n = 0;
      for (const auto& r : in.runs) n += r.run.device == k ? 1 : 0;
      hj[k] = {{"node_ms", d}, {"runs", n}};
    }
    manifest["host"] = hj;  // empty: no GPU had kMinHostRuns runs, or no d beat none
  }
  nlohmann::json lsum = in.lp.summary();
  if (o.reproducible) lsum.erase("seconds");
  manifest["layers"] = {{"dir", kLayersDir}, {"options", o.layers.to_json()}, {"summary", lsum}};
  return manifest;
}

/// The device-out spread (device_intervals.hpp) of the runs: `lgs` gets their layer graphs and
/// `fold_models` the layer models without one device, both shared with the device-out refinement.
DeviceSpread spread_of(const BundleTrainOptions& o, const TrainInputs& in, std::vector<LayerGraph>& lgs,
                       LayerModelCache& fold_models) {
  lgs.reserve(in.runs.size());  // dor points into it
  std::vector<DeviceOutRun> dor;
  for (const auto& r : in.runs) lgs.push_back(run_layer_graph(r));
  for (size_t i = 0; i < in.runs.size(); ++i)
    dor.push_back({&lgs[i], in.runs[i].run.device, in.runs[i].run.iter.median_ms});
  return device_out_spread(dor, in.samples, in.data.devices, o.layers, &fold_models);
}

/// The unseen-device widths of an interval model, from the device-out spread.
void with_spread(IntervalModel& m, const BundleTrainOptions& o, const DeviceSpread& ds) {
  if (!m.valid() || !o.device_intervals || !ds.valid()) return;
  m.unseen_q80 = ds.q80;
  m.unseen_q95 = ds.q95;
  m.unseen_info = ds.to_json();
}

/// The device-out refinement (BundleTrainOptions::device_crossfit), written to `tmp`; returns its
/// manifest entry.
nlohmann::json train_device_out(const BundleTrainOptions& o, const TrainInputs& in,
                                const std::vector<LayerGraph>& lgs, LayerModelCache& fold_models,
                                const DeviceSpread& ds, const fs::path& tmp) {
  std::set<std::string> sample_devices;
  for (const auto& s : in.samples) sample_devices.insert(s.device);
  std::vector<GraphFeatures> gdo;
  int64_t from_fold = 0, no_rows = 0, left_out = 0;
  for (size_t i = 0; i < in.runs.size(); ++i) {
    const std::string& dev = in.runs[i].run.device;
    if (!sample_devices.count(dev)) {  // the layer models never saw this device anyway
      gdo.push_back(run_graph_features(in.runs[i], in.lp, in.data.devices, in.comm));
      ++no_rows;
      continue;
    }
    const auto m = model_without_device(in.samples, in.data.devices, dev, o.layers, &fold_models);
    if (!fold_covers(lgs[i], in.lp, *m)) {
      ++left_out;
      continue;
    }
    gdo.push_back(run_graph_features(in.runs[i], *m, in.data.devices, in.comm));
    ++from_fold;
  }
  SCALEDL_CHECK(gdo.size() >= 2,
                "--device-crossfit: {} of {} runs have layer times from models without their device (a layer "
                "model only their own device's rows give leaves the rest out); it needs >= 2",
                gdo.size(), in.runs.size());
  GnnTrainReport rdo;
  GraphPredictor gpdo = GraphPredictor::train(gdo, o.gnn, o.gnn_train, &rdo);
  IntervalModel ivdo = calibrate_intervals(gdo, o.gnn, o.gnn_train, rdo);
  with_spread(ivdo, o, ds);
  nlohmann::json rj = rdo.to_json();
  if (o.reproducible) rj.erase("seconds");
  nlohmann::json gj = {
      {"file", kGraphDeviceOutFile},
      {"report", rj},
      {"runs", {{"device_out", from_fold}, {"device_without_layer_rows", no_rows}, {"left_out", left_out}}},
      {"note",
       "trained on layer times from models without the run's own device: predicts "
       "the devices without layer timings in this bundle (docs/unseen-gpu.md)"}};
  if (ivdo.valid()) gj["intervals"] = ivdo.to_json();
  gpdo.save((tmp / kGraphDeviceOutFile).string(), {{"bundle", true}});
  return gj;
}

/// The k-fold cross-validation of the refinement (--folds), as the manifest's graph.cv.
nlohmann::json graph_cv(const BundleTrainOptions& o, const std::vector<GraphFeatures>& graphs) {
  SCALEDL_CHECK(static_cast<size_t>(o.folds) <= graphs.size(), "--folds={} but there are only {} model runs",
                o.folds, graphs.size());
  GnnCvReport cv = cross_validate_graphs(graphs, o.gnn, o.gnn_train, o.folds);
  return {{"folds", cv.folds},
          {"mre_before", cv.mre_before},
          {"mre", cv.mre},
          {"fold_mre", cv.fold_mre},
          {"note", "k-fold over the training runs: inside the training distribution (see scaledl eval)"}};
}

/// The graph refinement, its intervals, (--device-crossfit) the device-out refinement and
/// (--folds) its cross-validation, written to `tmp` and entered in the manifest.
void train_graph_models(const BundleTrainOptions& o, const TrainInputs& in, const fs::path& tmp,
                        nlohmann::json& manifest) {
  GnnTrainReport rep;
  say(o, fmt::format("refinement: {} runs, {} epochs at most", in.graphs.size(), o.gnn_train.epochs));
  GnnTrainOptions to = o.gnn_train;
  if (o.progress) {  // a line at most every 10 s, besides the caller's own per-epoch callback
    auto last = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    to.on_epoch = [&o, last, inner = o.gnn_train.on_epoch](int64_t epoch, double loss, double val) {
      if (inner) inner(epoch, loss, val);
      const auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - *last).count() < 10) return;
      *last = now;
      o.progress(fmt::format("refinement: epoch {}/{}, train loss {:.4f}, validation {:.4f}", epoch,
                             o.gnn_train.epochs, loss, val));
    };
  }
  GraphPredictor gp = GraphPredictor::train(in.graphs, o.gnn, to, &rep);
  say(o, fmt::format("refinement: stopped after {} epochs; intervals and spreads", rep.epochs_run));
  IntervalModel iv = calibrate_intervals(in.graphs, o.gnn, o.gnn_train, rep);
  // Layer models without one device ("\n" + its key), shared by the device-out
  // spread and the device-out refinement.
  LayerModelCache fold_models;
  std::vector<LayerGraph> lgs;
  DeviceSpread ds;
  if ((iv.valid() && o.device_intervals) || o.device_crossfit) ds = spread_of(o, in, lgs, fold_models);
  with_spread(iv, o, ds);
  if (o.device_crossfit) {
    say(o, "device-out refinement");
    manifest["graph_device_out"] = train_device_out(o, in, lgs, fold_models, ds, tmp);
  }
  nlohmann::json grep = rep.to_json();
  if (o.reproducible) grep.erase("seconds");
  nlohmann::json g = {{"file", kGraphFile},
                      {"config", o.gnn.to_json()},
                      {"report", grep},
                      {"train_options", o.gnn_train.to_json()}};
  if (iv.valid()) g["intervals"] = iv.to_json();
  if (o.folds > 0) g["cv"] = graph_cv(o, in.graphs);
  gp.save((tmp / kGraphFile).string(), {{"bundle", true}});
  // The other members: the same runs and options, the next seeds.
  if (o.graph_members > 1)
    say(o, fmt::format("refinement members 2-{} of {}", o.graph_members, o.graph_members));
  std::vector<GnnTrainReport> reports;
  const std::vector<GraphPredictor> more =
      train_further_members(in.graphs, o.gnn, to, o.graph_members, &reports);
  for (size_t k = 0; k < more.size(); ++k) {
    const std::string file = fmt::format("graph-{}.safetensors", k + 1);
    more[k].save((tmp / file).string(), {{"bundle", true}});
    nlohmann::json mj = reports[k].to_json();
    if (o.reproducible) mj.erase("seconds");
    g["members"].push_back({{"file", file}, {"seed", to.seed + k + 1}, {"report", mj}});
  }
  manifest["graph"] = g;
}

/// Peak memory: the correction of the analytic estimate, when enough runs measured it.
void train_memory(const BundleTrainOptions& o, const fs::path& tmp, nlohmann::json& manifest) {
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

}  // namespace

nlohmann::json train_bundle(const BundleTrainOptions& o, const std::string& out) {
  check_train_options(o, out);
  const auto t0 = std::chrono::steady_clock::now();
  StagingDir stage(out, bundle_output_files(), "a bundle");  // checks --out before hours of training

  TrainInputs in;
  say(o, fmt::format("reading {} store(s)", o.dbs.size()));
  train_layer_models(o, in);
  say(o, "model runs: layer graphs and their layer times");
  run_graphs(o, in);
  fit_host_term(o, in);
  SCALEDL_CHECK(
      !o.graph || !in.graphs.empty(),
      "--db={}: the store(s) hold no ok model runs to train the graph refinement on (use --no-graph for "
      "layer models alone)",
      o.dbs.front());

  // Write into a temporary sibling; rename at the end (fs_util.hpp).
  const fs::path tmp = stage.path();
  in.lp.save((tmp / kLayersDir).string());
  nlohmann::json manifest = manifest_head(o, in);
  if (o.graph) train_graph_models(o, in, tmp, manifest);
  say(o, "memory correction");
  train_memory(o, tmp, manifest);
  if (!o.comm.empty()) {
    write_json_file((tmp / kCommFile).string(), in.comm.to_json());
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

}  // namespace scaledl
