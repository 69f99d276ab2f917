#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Layer-model training samples from the per-node times of whole-model runs.
//
// A model run of the store (ModelMeasurement) records node_times: each
// LayerNode's own forward time inside the real model ("name"), its backward
// time ("name.bwd") and "optim.step" (docs/zoo.md). Rebuilding the run's layer
// graph from the stored ModelSpec/TrainSettings (model_spec_from_json,
// build_layer_graph) gives each node's type, dims, direction and dtype, so each
// node time is one more measurement of (type, dims, dtype, direction) on the
// run's device: a LayerSample with the same features as an isolated row.
//
// Nodes of one run with equal (type, dims, direction) (the blocks of a
// Transformer, q/k/v projections of equal size) become ONE sample whose time is
// the median of their times, not N near-duplicates. Only status-"ok" runs are
// used; node times that are missing, NaN or <= 0 are skipped (counted). A name
// that is not a node of the rebuilt graph, a name listed twice, or a device not
// in `devices` is an Error naming the run and the node.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/io/device.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

/// What samples_from_model_runs used and dropped.
struct InModelStats {
  size_t runs = 0;             ///< ok runs read
  size_t runs_not_ok = 0;      ///< runs skipped because status != "ok"
  size_t node_times = 0;       ///< node-time entries of the ok runs
  size_t skipped_missing = 0;  ///< entries with a NaN, infinite or <= 0 time
  /// `<p>.qk` entries of runs timed before the score kernels were nodes of their own
  /// (2026-11-25): their time includes <p>.scale / .bias / .mask, so it is no BMM time.
  size_t skipped_fused_scores = 0;
  size_t samples = 0;  ///< samples after merging equal nodes of a run
  nlohmann::json to_json() const;
};

/// LayerSample::group of the samples of `run` read from `ctx`: "<ctx>: <model_key(run)>".
std::string in_model_group(const std::string& ctx, const ModelMeasurement& run);

/// A stored model run and the source it was read from (the ctx above).
struct InModelRun {
  std::string ctx;
  ModelMeasurement run;
};

/// Samples of one or more runs; `ctx` names their source in messages and in
/// LayerSample::group ("<ctx>: <model_key(run)>"), e.g. the store path.
std::vector<LayerSample> samples_from_model_runs(const std::vector<ModelMeasurement>& runs,
                                                 const std::map<std::string, DeviceRecord>& devices,
                                                 const std::string& ctx, InModelStats* stats = nullptr);

/// Reads the ok model runs of each store (read-only), adds the stores' devices to
/// `devices` and returns their in-model samples. A missing file is an Error naming it.
/// `runs`, when given, receives the ok runs read.
std::vector<LayerSample> load_in_model_samples(const std::vector<std::string>& dbs,
                                               std::map<std::string, DeviceRecord>& devices,
                                               InModelStats* stats = nullptr,
                                               std::vector<InModelRun>* runs = nullptr);

/// The additive baseline of held-out runs, leak-free: the same group folds as
/// cross_validate with holdout "model-runs" (model_run_folds); in fold k an XGBoost
/// LayerPredictor (CvOptions::train) is trained on the isolated samples plus, when
/// in_model_train, the other folds' in-model samples, and predicts every node of
/// each held-out run's layer graph. T_sum = the sum of those predictions, compared
/// with the run's iter.median_ms and with the sum of its measured node times.
struct RunSumCv {
  std::vector<std::string> runs;  ///< LayerSample::group of each held-out run
  std::vector<double> iter_ms, node_sum_ms, t_sum_ms;
  double mre_iter = 0, mre_node_sum = 0;  ///< mean |T_sum - x| / x over the runs (fractions)
  nlohmann::json to_json() const;
};
RunSumCv cross_validate_run_sums(const std::vector<LayerSample>& samples, const std::vector<InModelRun>& runs,
                                 const std::map<std::string, DeviceRecord>& devices, const CvOptions& o);

}  // namespace scaledl
