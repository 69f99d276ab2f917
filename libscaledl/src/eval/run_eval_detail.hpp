#pragma once
// Internal to src/eval: the steps of run_eval (eval.hpp) and the state they share.
//   run_eval.cpp           the driver: options, stores, graphs, seeds, splits, scores, report
//   split_layer_times.cpp  each split's layer times: models without the held-out device, with the
//                          split's in-model rows, calibrations, the host term, the device-out spread
//   eval_methods.cpp       what each method predicts for a split's test runs
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/eval/eval.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/predict/device_intervals.hpp"

namespace scaledl::eval_detail {

using Clock = std::chrono::steady_clock;

inline double secs_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What a protocol brings besides its splits. Each switches over Protocol without a
// `default:` (run_eval.cpp): a new protocol must say.
/// cross-device: --test-db stores hold the test runs (and may hold layer rows).
bool protocol_has_test_stores(Protocol p);
/// leave-one-device-out: each split holds out a device no model of it trains on.
bool protocol_holds_out_devices(Protocol p);
/// id: the learning curve and D-optimal vs random choice of the training runs.
bool protocol_has_ablations(Protocol p);

/// The methods whose models are GraphPredictors (scaledl-tc, scaledl-anee, scaledl-nomlp, dnnperf).
bool is_graph_method(const std::string& m);

/// What the methods see: the options, the runs and the device records.
struct Ctx {
  const EvalOptions& o;
  const std::vector<EvalRun>& runs;
  const std::map<std::string, DeviceRecord>& devices;
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
/// graph for this split (layer times of the split's layer models). `intervals`:
/// also scaledl-tc's intervals, widened to `unseen` (the held-out device's spread)
/// when given; `anchors` > 0: also anchored on that many of the first `n_scored`
/// test runs (the held-out device's).
MethodOut fit_predict_runs(const Ctx& c, const std::string& method, const std::vector<size_t>& train,
                           const std::vector<size_t>& test, uint64_t seed,
                           const std::vector<const GraphFeatures*>& G, bool intervals = false,
                           const DeviceSpread* unseen = nullptr, int anchors = 0, size_t n_scored = 0);

/// D-optimal (Fedorov) choice of k runs from `pool` on linear terms of the
/// hyperparameter vector (intercept + columns that vary in the pool).
std::vector<size_t> doptimal_subset(const Ctx& c, const std::vector<size_t>& pool, size_t k, uint64_t seed);

/// One method's predictions of a split's test runs (and sweep runs), as recorded.
struct Recorded {
  std::string method;
  std::vector<double> pred, lo80, hi80, lo95, hi95, ood;
  bool intervals = false;  ///< score the intervals (coverage, width, out-of-domain share)
};

/// The scores of one seed, over its splits: by method (and by family or device).
struct SeedScores {
  std::map<std::string, std::vector<double>> pred_all, truth_all;               // method -> over splits
  std::map<std::string, std::vector<double>> cover80, cover95, width95, ood_d;  // methods with intervals
  /// method -> family (or "device D", "mode M") -> (predicted, measured)
  std::map<std::string, std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>> fam;
};

/// One evaluation: what run_eval loads once, caches across seeds and accumulates.
struct Evaluation {
  explicit Evaluation(const EvalOptions& opt);

  const EvalOptions& o;
  const Clock::time_point t0;
  std::vector<std::string> methods;      ///< o.methods, or all of them
  std::vector<std::string> methods_out;  ///< methods, and with --anchors the anchored scaledl-tc
  std::string anchored_name;             ///< "scaledl-tc+<K>anchor"
  bool lodo = false;                     ///< the protocol holds out devices
  EvalResult res;

  // Layer rows (load_layer_rows) and device records (also of every run: load_runs).
  TrainingData data;  ///< the training stores' layer rows (with --test-layers also the test stores')
  std::set<std::string> test_layer_devices;  ///< devices whose layer rows came from a --test-db
  std::vector<LayerSample> layer_samples;    ///< of data.rows
  std::map<std::string, DeviceRecord> devices;
  std::vector<LayerSample> test_rows;  ///< cross-device --calibrate-rows: the test stores' rows (never train)

  // Graphs (build_graphs).
  std::vector<LayerSample> nodes;       ///< every node of every run, for the per-layer MLP sums
  std::vector<size_t> node_run;         ///< the run of each node
  std::vector<LayerGraph> irs;          ///< layer graphs of the runs (in-model, leave-one-device-out)
  std::vector<LayerSample> im_samples;  ///< --in-model: the training stores' rows
  nlohmann::json calibrations = nlohmann::json::array();  ///< --calibrate-rows: the first of each device

  // Per-split layer times, cached across seeds (split_layer_times.cpp).
  std::map<std::vector<size_t>, std::vector<GraphFeatures>> split_cache;  ///< --in-model: by training set
  std::map<std::string, std::vector<GraphFeatures>> device_cache;         ///< by held-out device
  std::map<std::string, std::vector<char>> crossfit_ok;  ///< --device-crossfit: runs with a device-out sum
  std::map<std::string, std::vector<GraphFeatures>> device_out_cache;  ///< --device-crossfit
  /// Layer models without the held-out device and one more (the device-out spread's
  /// folds, shared by --device-crossfit and spread_for).
  LayerModelCache spread_models;
  std::map<std::string, DeviceSpread> spread_cache;  ///< by held-out device
  std::deque<GraphFeatures> host_copies;             ///< graphs with the host term (graphs_for)

  // Results over the seeds.
  nlohmann::json per_seed = nlohmann::json::array();
  /// stats[method][family or "all"] -> per-seed values
  std::map<std::string, std::map<std::string, std::vector<ErrorStats>>> stats;
  std::vector<nlohmann::json> curve_rows, dopt_rows;
  std::map<std::string, std::vector<nlohmann::json>> interval_rows;  ///< method -> per seed
  std::vector<std::string> split_names;

  void log(const std::string& s) const;
  Ctx ctx() const { return {o, res.runs, devices}; }

  // run_eval.cpp
  void load_layer_rows();
  void load_runs(const std::vector<std::string>& dbs, bool test);
  void build_graphs(const LayerPredictor& lp);
  void load_in_model_rows();
  void per_layer_sums(int seed, const std::string& held_out);
  void run_seed(int seed);
  void run_method(int seed, const EvalSplit& sp, const std::vector<size_t>& test, const std::string& m,
                  const std::vector<const GraphFeatures*>& G, const std::vector<const GraphFeatures*>& Gout,
                  SeedScores& scores);
  void record(int seed, const EvalSplit& sp, const std::vector<size_t>& test, const Recorded& p,
              SeedScores& scores);
  nlohmann::json seed_summary(int seed, SeedScores& scores);
  void ablations(int seed, const EvalSplit& sp);
  nlohmann::json summary();
  std::string layer_times_text() const;
  void make_report();

  // split_layer_times.cpp
  /// --calibrate-rows: device `dev`'s calibration against `p` by K of its own rows among
  /// `rows` (none when it has none there).
  std::optional<LayerCalibration> calibrate_device(const LayerPredictor& p,
                                                   const std::vector<LayerSample>& rows,
                                                   const std::string& dev);
  /// Run i's graph features with the layer times of `lp`; `cal` (non-null): the
  /// calibration of the held-out device, for its runs.
  GraphFeatures featurize_run(size_t i, const LayerPredictor& lp,
                              const LayerCalibration* cal = nullptr) const;
  /// Every run's graph for split `sp`: its layer times (graphs_for_layers) and host term.
  std::vector<const GraphFeatures*> graphs_for(const EvalSplit& sp);
  /// Every run's graph with the layer times of split `sp`'s layer models. `device_out`
  /// (--device-crossfit): the split's training runs with the layer times of models
  /// without their own device (no host term: a bundle's device-out refinement trains
  /// and predicts without one).
  std::vector<const GraphFeatures*> graphs_for_layers(const EvalSplit& sp, bool device_out);
  /// Leave-one-device-out: the interval width for the held-out device, from its
  /// split's training devices only (device_intervals.hpp), once per split.
  const DeviceSpread* spread_for(const EvalSplit& sp);

 private:
  void train_without_device(const EvalSplit& sp);
  void device_crossfit(const EvalSplit& sp, const DeviceFold& f, const LayerPredictor& lp,
                       const std::vector<GraphFeatures>& own);
  const std::vector<GraphFeatures>& in_model_graphs(const std::vector<size_t>& train);
  std::vector<const GraphFeatures*> with_host_term(const EvalSplit& sp, std::vector<const GraphFeatures*> G);
};

}  // namespace scaledl::eval_detail
