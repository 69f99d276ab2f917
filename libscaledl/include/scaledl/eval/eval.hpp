#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// `scaledl eval`: the accuracy of ScaleDL and its baselines on whole-iteration
// measurements, under protocols that separate what was trained on from what is
// predicted (docs/eval.md; the protocols: SCALEDL_EVAL_PROTOCOLS below).
//
// Methods, all on the same splits:
//   sum            T_sum + T_comm of the XGBoost layer models (no run-level training)
//   scaledl-tc     ScaleDL: TransformerConv + global MLP, alpha/beta (eq. 2, 14)
//   scaledl-anee   the same with DNNPerf's ANEE encoder
//   scaledl-nomlp  ablation: TransformerConv without the MLP(Z) branch
//   dnnperf        ANEE, sum readout, regressing T_iter directly (DNNPerf)
//   rf-hp          random forest on hyperparameters only
//   mlp-acc        per-layer MLPs on plain layer features, summed (MLP-ACC)
//   prenet         per-layer MLPs with PreNeT's CT/CM features, summed
//   birnn          bidirectional LSTM over the node sequence (LibTorch)
// The layer models (sum, mlp-acc, prenet and the layer times the graph methods
// start from) train on the training store's isolated layer rows only, never on
// a test run. Ablations on `id`: error vs number of training runs (ScaleDL
// Fig. 6a) and D-optimal vs random choice of the training runs at equal budget.
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/gnn/gnn.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

// The evaluation protocols, one row each: X(Enumerator, name, description). The name is the
// `--protocol` value and the report's "protocol"; the order is that of the messages. Code that
// treats protocols differently switches over Protocol without a `default:`, so -Wswitch names
// every place a new row must touch (make_splits, run_eval's protocol_* predicates).
// clang-format off
#define SCALEDL_EVAL_PROTOCOLS(X)                                                                  \
  X(Id, "id", "per family a random 80/20 split of the runs (ScaleDL Table I)")                     \
  X(OodFamily, "ood-family", "leave one family out: train on the others (ScaleDL Fig. 5)")         \
  X(OodSize, "ood-size",                                                                           \
    "per family train on the smallest 70 % by training FLOP per iteration, test on the largest "   \
    "30 %")                                                                                        \
  X(CrossDevice, "cross-device",                                                                   \
    "train on --db, test on --test-db, measured on other hardware; the test device is known only " \
    "by its probe record (with test_layers, also by its layer rows: no model run of it trains)")   \
  X(LeaveOneDeviceOut, "leave-one-device-out",                                                     \
    "one split per device of the store: every model (layer models included) trains on the other "  \
    "devices' rows and runs; the held-out device is known only by its record (spec sheet)")
// clang-format on
#define SCALEDL_EVAL_PROTOCOL_ENUMERATOR(E, name, description) E,
enum class Protocol : int { SCALEDL_EVAL_PROTOCOLS(SCALEDL_EVAL_PROTOCOL_ENUMERATOR) };
#undef SCALEDL_EVAL_PROTOCOL_ENUMERATOR

/// The protocol's name ("id", "ood-family", ...).
const char* to_string(Protocol p);
/// One sentence on what the protocol trains on and tests on (its row of SCALEDL_EVAL_PROTOCOLS).
const char* protocol_description(Protocol p);
/// Every protocol, in the table's order.
const std::vector<Protocol>& all_protocols();
/// The protocol named `name`; otherwise an Error `--protocol="<name>" is not a protocol (id, ...)`.
Protocol parse_protocol(const std::string& name);
/// Whether the protocol's splits depend on the seed (id: a random split); the others are the
/// same for every seed.
bool protocol_splits_are_random(Protocol p);

/// One whole-iteration measurement as the evaluation sees it.
struct EvalRun {
  std::string label;   ///< model_name of the run
  std::string key;     ///< model_key (unique within a store)
  std::string family;  ///< ModelMeasurement::family
  std::string campaign;
  std::string device;       ///< DeviceRecord::key()
  std::string group;        ///< in_model_group of the run's in-model samples ("" for test-store runs)
  bool test_store = false;  ///< from --test-db (cross-device)
  bool sweep = false;       ///< from a --sweep-campaign: predicted, never trained on
  ModelSpec spec;
  TrainSettings settings;
  double flops = 0;           ///< training FLOP per iteration (fwd + bwd + update)
  double target_ms = 0;       ///< measured T_iter (median), ms
  GraphFeatures graph;        ///< uncompressed, layer times of the XGBoost layer models
  double sum_mlp_acc_ms = 0;  ///< sum of per-layer MLP-ACC predictions (filled per seed)
  double sum_prenet_ms = 0;   ///< sum of per-layer PreNeT predictions (filled per seed)
};

struct EvalOptions {
  Protocol protocol = Protocol::Id;
  std::vector<std::string> dbs;       ///< training store(s) (layer rows + model runs)
  std::vector<std::string> test_dbs;  ///< cross-device test store(s)
  /// cross-device: the test store's layer rows also train the layer models (a
  /// layer campaign on the new machine: minutes, no model run there); its model
  /// runs stay test-only and the graph methods train on the --db runs alone.
  bool test_layers = false;
  std::string sweep_campaign;        ///< runs of this campaign: test-only (Fig. 4 curves)
  int seeds = 3;                     ///< repetitions with different split / init seeds, >= 1
  std::vector<std::string> methods;  ///< empty = all_eval_methods()
  GnnTrainOptions gnn;               ///< graph methods' training (epochs, patience, ...)
  int birnn_epochs = 60;             ///< BiRNN passes over the training runs
  int mlp_epochs = 60;               ///< per-layer MLP passes
  TrainOptions layers;               ///< XGBoost layer models
  bool ablations = true;             ///< learning curve + D-optimal vs random (protocol id)
  int threads = 1;                   ///< LibTorch threads
  double max_cv = 0.10;              ///< usable_model_label: also "unstable" runs with iter CV <= this
  double layer_max_cv = 0;  ///< load_training_data: also "unstable" layer rows with CV <= this (0 = ok only)
  /// Layer models also train on the per-node times of the split's TRAINING runs
  /// (never a test run's); the graph methods' training runs get layer times
  /// cross-fitted over `crossfit_folds` folds, test runs from the model of all
  /// training runs (graph_cv.hpp). false: isolated layer rows only.
  bool in_model = false;
  /// ScaleDL methods and the sum: T_sum = max(layer times, nodes x d) on each GPU with
  /// >= kMinHostRuns training runs in the split, d fitted on those (physics.hpp)
  bool host_term = false;
  /// `--host-node-us` in ms: the host term of every GPU no split fits one for (with
  /// `host_term`: a held-out GPU), as `predict --host-node-us` gives it; 0 = none
  double host_node_ms = 0;
  int crossfit_folds = 3;  ///< >= 2
  /// leave-one-device-out: the training runs' layer times come from layer models
  /// trained without their own device (and the held-out one), so the graph
  /// methods learn on sums of GPUs the layer models never saw, as they are tested
  bool device_crossfit = false;
  /// every GPU known as if probed (with layers.sustained_bw): its record's measured_bw_gbs
  /// the sustained bandwidth of its own layer rows, so a GPU the layer models never saw
  /// gets what `scaledl probe` would measure instead of a share of its spec bandwidth
  bool probe_bandwidth = false;
  /// leave-one-device-out or cross-device: > 0 calibrates the held-out (test) device's layer
  /// times with this many of its own layer rows per (type, direction, dtype), drawn at random
  /// from the usable ones (calibration.hpp; cross-device: the test stores' rows, which never
  /// train): what a short `bench layers` on the device and `predict --calibrate` give
  int64_t calibrate_rows = 0;
  bool intervals = true;  ///< calibrate and score intervals of scaledl-tc (intervals.hpp)
  /// leave-one-device-out: the held-out device's intervals are at least the
  /// device-out spread of the split's training devices (device_intervals.hpp)
  bool device_intervals = true;
  /// leave-one-device-out: > 0 also scores scaledl-tc anchored on this many other
  /// measured runs of the held-out device (device_intervals.hpp), as method
  /// "scaledl-tc+<K>anchor"
  int anchors = 0;
  double alpha_bound = 4.0;  ///< GnnConfig::alpha_bound of the ScaleDL methods
  double ood_tau = 1.0;      ///< GnnConfig::ood_tau of the ScaleDL methods
  /// Graph methods: models trained per split with the seeds seed, seed + 1, ..., whose predictions
  /// are combined as a bundle's refinement members are (`train --graph-members`: the geometric mean
  /// of their alpha and beta); the intervals are calibrated on the first. In [1, 16].
  int graph_members = 1;
  std::function<void(const std::string&)> log;  ///< progress lines (may be empty)
};

/// Every method name, in report order.
const std::vector<std::string>& all_eval_methods();

/// Error summary of one method on a set of runs (APE = |pred - true| / true).
struct ErrorStats {
  int64_t n = 0;
  double mre_pct = NAN, rmse_ms = NAN, p50_pct = NAN, p90_pct = NAN;
  double bias_pct = NAN;  ///< mean signed relative error (pred - true) / true
  static ErrorStats of(const std::vector<double>& pred, const std::vector<double>& truth);
  nlohmann::json to_json() const;
};

/// One prediction, for predictions.csv and the plots.
struct EvalPrediction {
  int seed = 0;
  std::string split;  ///< e.g. "id", "ood-family:bert"
  std::string method;
  size_t run = 0;  ///< index into EvalResult::runs
  double pred_ms = 0;
  double lo80 = NAN, hi80 = NAN, lo95 = NAN, hi95 = NAN;  ///< intervals (methods that have them)
  double ood_distance = NAN;                              ///< graph methods: Normalizer::ood_distance
};

struct EvalResult {
  std::vector<EvalRun> runs;
  std::vector<EvalPrediction> predictions;  ///< test runs (and sweep runs) of every split, seed, method
  nlohmann::json report;                    ///< what report.json holds
};

/// Splits of `runs` under `protocol` for `seed`: (name, train indices, test
/// indices). Sweep runs are in no training set. Errors name the protocol and
/// the family whose split would be empty.
struct EvalSplit {
  std::string name;
  std::vector<size_t> train, test;
  /// leave-one-device-out: the device (key) whose layer rows and runs no model of
  /// this split trains on; "" otherwise.
  std::string held_out_device;
};
std::vector<EvalSplit> make_splits(const std::vector<EvalRun>& runs, Protocol protocol, uint64_t seed);

/// Loads the stores, builds every run's graph, runs every method on every split
/// and seed. Errors: a store without model runs, an unknown method,
/// a split that leaves a family empty, a test store whose device record is missing.
EvalResult run_eval(const EvalOptions& o);

/// Writes report.md, report.json, predictions.csv and the gnuplot plots (PNG and
/// SVG: predicted vs measured, APE CDF, epoch time vs batch and vs sequence
/// length) into `dir`. `plots` false skips gnuplot.
void write_eval_report(const EvalResult& r, const std::string& dir, bool plots = true);

}  // namespace scaledl
