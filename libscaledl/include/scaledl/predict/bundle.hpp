#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// A bundle: the one object `scaledl predict --bundle` loads. `scaledl train`
// writes it from one or more stores:
//
//   BUNDLE/manifest.json        format, format_version, build commit, the device
//                               records trained on, a training-data summary
//                               (stores, runs per family, layer rows, the range
//                               of every global feature), the components and the
//                               SHA-256 of every other file
//   BUNDLE/layers/              LayerPredictor::save (XGBoost JSON per type)
//   BUNDLE/graph.safetensors    GraphPredictor::save (absent: no refinement); read
//                               without LibTorch (GraphInference::load)
//   BUNDLE/graph-<k>.safetensors the refinement's other members (train --graph-members K,
//                               k = 1 .. K-1; manifest graph.members): predict averages
//                               them with graph.safetensors (GraphInference::add_member)
//   BUNDLE/graph-device-out.safetensors
//                               the device-out refinement (train --device-crossfit):
//                               trained on layer times from models that never saw
//                               the run's GPU; it serves devices without layer
//                               timings in the bundle (absent: graph.safetensors does)
//   BUNDLE/comm.json            CommModel (absent: single-device predictions only)
//   BUNDLE/memory.json          MemoryCorrection of the peak (absent: the analytic
//                               estimate alone, no interval), trained on the runs
//                               of the stores whose peak was measured
//
// The manifest's graph.intervals holds the split-conformal interval model
// (intervals.hpp) calibrated when the bundle was trained.
//
// load_bundle refuses a bundle of another format or version, with a missing,
// extra-listed or altered file (checksum), naming the file, before any model
// is parsed.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/comm/comm.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/gnn/graph_inference.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/memory/memory.hpp"
#include "scaledl/predict/device_intervals.hpp"
#include "scaledl/predict/domain.hpp"
#include "scaledl/predict/intervals.hpp"
#include "scaledl/predict/predict.hpp"

namespace scaledl {

constexpr const char* kBundleFormat = "scaledl-bundle";
constexpr int kBundleFormatVersion =
    3;  ///< 2: graph format 2, intervals, cross-fitted layer times; 3: checksummed layer and graph files

struct BundleTrainOptions {
  std::vector<std::string> dbs;           ///< stores with layer rows and model runs
  std::vector<std::string> in_model_dbs;  ///< also train the layer models on these runs' node times
  /// Stores whose measured peaks train the memory correction (memory.hpp); empty = `dbs`.
  std::vector<std::string> memory_dbs;
  /// With in_model_dbs: the graph model trains on layer times cross-fitted over
  /// this many folds of the runs (for_each_crossfit_model), never on T_sum from a
  /// layer model that saw the run's own node times. >= 2.
  int64_t crossfit_folds = 5;
  TrainOptions layers;        ///< layer-model options
  bool graph = true;          ///< train the refinement (needs model runs)
  GnnConfig gnn;              ///< refinement architecture
  GnnTrainOptions gnn_train;  ///< refinement training
  /// Refinements trained, seeds gnn_train.seed, +1, ...: predict averages them (the geometric
  /// mean of their alpha and beta; GraphInference::add_member), which steadies what a retrain
  /// with another seed would change. The intervals are calibrated for the first. >= 1.
  int64_t graph_members = 1;
  std::string comm;         ///< all-reduce calibration JSON ("" = none)
  int64_t folds = 0;        ///< > 0: k-fold CV of the refinement, reported in the manifest
  double max_cv = 0.10;     ///< usable_model_label: also "unstable" runs with iter CV <= this
  double layer_max_cv = 0;  ///< load_training_data: also "unstable" layer rows with CV <= this (0 = ok only)
  std::string command;      ///< the command line, recorded in the manifest
  /// Leave the creation time, training duration and build commit out of the
  /// manifest, so that the same data, options and build give a byte-identical bundle.
  bool reproducible = false;
  /// Calibrate the interval width for devices without layer timings by leaving
  /// each device out (device_intervals.hpp: one more layer model per device with
  /// runs); needs >= 3 devices with layer rows.
  bool device_intervals = true;
  /// Fit the host's cost per graph node of each GPU with >= kMinHostRuns runs
  /// (physics.hpp, fit_host_node_ms) and compose T_sum = max(layer times, nodes x d)
  /// for that device, in training and in `predict` (manifest "host").
  bool host_term = false;
  /// Also train the device-out refinement (manifest "graph_device_out"): the same
  /// runs, each with the layer times of layer models trained without its own
  /// device's samples (the device-out spread's models), so that it learns how a
  /// sum errs on a GPU the layer models never saw, as a spec sheet's is predicted.
  /// Runs that need a layer model only their own device's rows give are left out
  /// of it. `predict` uses it for devices without layer timings in the bundle.
  /// Needs the refinement and >= 3 devices with layer rows.
  bool device_crossfit = false;
  /// Hears one line at each stage of training and, while the refinement trains, at most one
  /// line every 10 s (epoch, loss, validation error), so that a long `train` is never silent in
  /// a log; may be empty.
  std::function<void(const std::string&)> progress;
};

struct Bundle {
  nlohmann::json manifest;
  LayerPredictor layers;
  std::optional<GraphInference> graph;  ///< the refinement (its Eigen forward pass)
  std::optional<CommModel> comm;
  /// A collective calibration of the user's cluster given at prediction time (--comm): used, in
  /// place of `comm`, for graphs of more than one device only. A single device's prediction never
  /// depends on it (its refinement's features then stay the ones its training runs had).
  std::optional<CommModel> comm_given;
  std::optional<IntervalModel> intervals;  ///< T_iter intervals (with a graph model)
  /// The device-out refinement and its intervals (BundleTrainOptions::device_crossfit)
  std::optional<GraphInference> graph_device_out;
  std::optional<IntervalModel> intervals_device_out;
  std::optional<MemoryCorrection> memory;  ///< learned peak-memory correction (memory.hpp)
  /// min and max of every global feature over the training graphs (name -> [lo, hi]).
  std::map<std::string, std::pair<double, double>> global_ranges;
  /// The host's cost per graph node, ms, by device key (BundleTrainOptions::host_term);
  /// a device not listed has none.
  std::map<std::string, double> host_node_ms;
  /// The host's cost per graph node, ms, for every device (`predict --host-node-us`):
  /// replaces host_node_ms when set (a user's own framework and host; 0 = none).
  std::optional<double> host_node_ms_given;
  /// The host's cost per graph node on `device_key`, ms (0 = no host term): --host-node-us, else
  /// the bundle's fit of the device.
  double host_node_ms_for(const std::string& device_key) const;
  /// The same for a run of settings `s` on `dev`: --host-node-us, else the bundle's fit of the
  /// device, else the framework's default (framework_host_node_ms: Megatron-LM's kernels).
  double host_node_ms_for(const DeviceRecord& dev, const TrainSettings& s) const;
  /// Where that figure comes from, for the report: "--host-node-us", "the bundle's fit of this
  /// device", "Megatron-LM's default ..." or "" (none).
  std::string host_node_source(const DeviceRecord& dev, const TrainSettings& s) const;
  /// A calibration of one device from a few of its own layer timings (`predict
  /// --calibrate`, calibration.hpp): its layer times carry the factors when that
  /// device is predicted. Not saved with the bundle.
  std::optional<LayerCalibration> calibration;
  /// The calibration that serves `device_key` (null: none).
  const LayerCalibration* calibration_for(const std::string& device_key) const {
    return calibration && calibration->device == device_key ? &*calibration : nullptr;
  }

  /// The physical bounds' memo: T_iter and intervals (roofline applied) of every
  /// configuration predicted so far, by SHA-256 of device record + model + settings, so
  /// that repeated calls do not predict the same smaller configurations again.
  /// Shared by copies of the bundle; cleared beyond 100,000 entries.
  struct BoundsMemo {
    struct Value {
      double t_iter_ms, lo80_ms, hi80_ms, lo95_ms, hi95_ms;
    };
    std::mutex mu;
    std::unordered_map<std::string, Value> values;
  };
  std::shared_ptr<BoundsMemo> bounds_memo = std::make_shared<BoundsMemo>();

  /// Prediction with this bundle's models, with intervals when the bundle has
  /// them; comm must be present when s.num_devices > 1. With `physics` (the
  /// default) the physical bounds of physics.hpp apply: the roofline and
  /// monotonicity in tokens (this predicts the ladder's smaller configurations too).
  IterationPrediction predict(const LayerGraph& g, const DeviceRecord& dev, bool physics = true) const;
  /// The same for many configurations, the refinement batched (predict_iterations);
  /// ladder configurations shared by several inputs are predicted once.
  /// Anchoring (device_intervals.hpp): the device's bias from `measured_ms` of
  /// the configurations `gs` (their predictions on `dev`, bounds on). The prior sd
  /// is the device-out spread for a device without layer timings in the bundle,
  /// else the run noise; the run noise is the in-domain q80 at the widest size
  /// scale. Needs the bundle's intervals (a graph model), else Error.
  AnchorFit fit_anchor(const std::vector<const LayerGraph*>& gs, const std::vector<double>& measured_ms,
                       const DeviceRecord& dev) const;
  /// Multiplies T_iter by the anchor's factor; each interval's half-width becomes
  /// the larger of the in-domain one and the anchor's, but never wider on either side
  /// (in log terms) than the interval before anchoring; the roofline still holds
  /// (`adjusted` keeps what the bounds did before: `t_model_ms` is unanchored).
  void apply_anchor(IterationPrediction& p, const AnchorFit& a) const;
  std::vector<IterationPrediction> predict_many(const std::vector<const LayerGraph*>& gs,
                                                const DeviceRecord& dev, bool physics = true) const;
  /// Global features of a prediction (IterationPrediction::global_features) outside
  /// the training range (features_out_of_range over global_ranges).
  std::vector<OutOfRange> out_of_range(const IterationPrediction& p) const;
  /// Isolated layer timings (forward and backward samples) of device
  /// `device_key` that trained the layer models (0: none, its layer times are
  /// carried over from other devices by its record); nullopt for a bundle
  /// trained before the manifest recorded them.
  std::optional<int64_t> layer_rows_of(const std::string& device_key) const;
  /// True when the manifest lists the devices of its layer rows and `device_key`
  /// is not among them: a device the layer models know only by its record.
  bool without_layer_rows(const std::string& device_key) const {
    const std::optional<int64_t> rows = layer_rows_of(device_key);
    return rows && *rows == 0;
  }
  /// True when `device_key` is predicted by the device-out refinement: the bundle
  /// has one and no layer timing of the device trained the layer models.
  bool uses_device_out(const std::string& device_key) const {
    return graph_device_out.has_value() && without_layer_rows(device_key);
  }
  /// The refinement and interval model that predict `device_key` (null: none).
  const GraphInference* graph_for(const std::string& device_key) const {
    if (uses_device_out(device_key)) return &*graph_device_out;
    return graph ? &*graph : nullptr;
  }
  const IntervalModel* intervals_for(const std::string& device_key) const {
    if (uses_device_out(device_key)) return intervals_device_out ? &*intervals_device_out : nullptr;
    return intervals ? &*intervals : nullptr;
  }
};

/// Trains layers + graph (+ comm) and writes the bundle directory `out`
/// (written to a temporary sibling, then renamed: a failed run leaves no half
/// bundle, and an existing `out` is replaced only on success). Returns the manifest.
nlohmann::json train_bundle(const BundleTrainOptions& o, const std::string& out);

/// Reads and verifies a bundle (see the top of this file).
Bundle load_bundle(const std::string& dir);

/// Raises `p` (its T_iter, and each interval bound) to at least `floor`'s, as the physical bounds
/// do, and names `why` in p.adjusted; nothing is ever lowered. For a running maximum kept across
/// calls (a sweep predicted in chunks).
void raise_prediction_to(IterationPrediction& p, const IterationPrediction& floor, const std::string& why);

/// The files an existing bundle owns (manifest.json and every file its `files` lists), for
/// StagingDir: `train --out` replaces only such a directory.
OwnedFiles bundle_output_files();

}  // namespace scaledl
