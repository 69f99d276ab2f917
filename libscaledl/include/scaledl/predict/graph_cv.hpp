#pragma once
// Needs LibTorch: yes (this header includes gnn.hpp, for GnnCvReport).
// Cross-validation of the graph refinement when the layer models are trained on
// the per-node times of the same model runs (in_model_samples.hpp).
//
// `train graph --folds K` (cross_validate_graphs, gnn.hpp) featurizes every graph
// once with ONE layer model. If that layer model was trained on the node times of
// all runs, the T_sum of a test-fold run already contains its own measured node
// times: the CV is optimistic. Here each fold k trains its own layer model on the
// isolated samples plus the in-model samples of the runs NOT in fold k, then
// featurizes all graphs with it, trains the refinement on the other folds and
// predicts fold k. It runs the fold loop of cross_validate_graphs with the same
// folds for the same seed (graph_cv_folds), so the two reports compare run by run.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "scaledl/comm/comm.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

struct NestedGraphCvInput {
  std::vector<InModelRun> runs;                 ///< one graph per run, in this order
  std::vector<LayerSample> samples;             ///< isolated (group "") and in-model samples
  std::map<std::string, DeviceRecord> devices;  ///< every device of runs and samples
  TrainOptions layer_options;                   ///< of the per-fold layer models
  CommModel comm;                               ///< for runs with num_devices > 1
  /// false: fold k's training graphs get their layer times from fold k's layer
  /// model, which saw their own node times (in-sample T_sum, unlike the test
  /// graphs). true: cross-fitting, each training graph in fold j != k gets them
  /// from a model trained without folds j and k, so the refinement trains on
  /// out-of-sample T_sum as it meets at test time (K (K-1) more layer models).
  bool cross_fit = false;
};

/// The layer graph of a stored run (its model and settings). Errors name r.ctx
/// and the run.
LayerGraph run_layer_graph(const InModelRun& r);

/// Layer graph + features of a stored run with layer times from `lp`: what
/// `train graph` trains on. Errors name r.ctx and the run: unknown device, bad
/// spec or settings, an unusable label, several devices without a calibrated comm.
GraphFeatures run_graph_features(const InModelRun& r, const LayerPredictor& lp,
                                 const std::map<std::string, DeviceRecord>& devices, const CommModel& comm);

/// Cross-fitting of layer times: items (model runs) are split into `folds` folds
/// (graph_cv_folds(items, folds, seed)); fold k's layer model trains on every
/// sample of `samples` except the in-model samples whose group is the group of
/// an item in fold k, and `use(i, model)` is called for each item i of fold k.
/// So a graph model trained on the items' features never sees a T_sum computed
/// from the item's own node times (the same holds for new models at prediction).
/// Items with an empty group are only featurized (they have no in-model samples).
void for_each_crossfit_model(const std::vector<std::string>& item_groups, int64_t folds, uint64_t seed,
                             const std::vector<LayerSample>& samples,
                             const std::map<std::string, DeviceRecord>& devices,
                             const TrainOptions& layer_options,
                             const std::function<void(size_t, const LayerPredictor&)>& use);

/// K-fold CV over the runs with per-fold layer models (see the top of this file).
/// In-model samples whose group is not one of `runs` always train.
GnnCvReport cross_validate_graphs_nested(const NestedGraphCvInput& in, const GnnConfig& cfg,
                                         const GnnTrainOptions& opt, int64_t folds);

}  // namespace scaledl
