#pragma once
// Cross-validation of the graph refinement when the layer models are trained on
// the per-node times of the same model runs (in_model_samples.hpp).
//
// `train graph --folds K` (cross_validate_graphs, gnn.hpp) featurizes every graph
// once with ONE layer model. If that layer model was trained on the node times of
// all runs, the T_sum of a test-fold run already contains its own measured node
// times: the CV is optimistic. Here each fold k trains its own layer model on the
// isolated samples plus the in-model samples of the runs NOT in fold k, then
// featurizes all graphs with it, trains the refinement on the other folds and
// predicts fold k. The folds are those of cross_validate_graphs for the same
// seed (graph_cv_folds), so the two reports compare run by run.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scaledl/comm.hpp"
#include "scaledl/gnn.hpp"
#include "scaledl/in_model_samples.hpp"
#include "scaledl/layer_predictor.hpp"

namespace scaledl {

/// Fold of each of `n` graphs in cross_validate_graphs(graphs, cfg, opt, folds)
/// with opt.seed = seed (the same permutation; tested against it).
std::vector<int64_t> graph_cv_folds(size_t n, int64_t folds, uint64_t seed);

struct NestedGraphCvInput {
  std::vector<InModelRun> runs;                  ///< one graph per run, in this order
  std::vector<LayerSample> samples;              ///< isolated (group "") and in-model samples
  std::map<std::string, DeviceRecord> devices;   ///< every device of runs and samples
  TrainOptions layer_options;                    ///< of the per-fold layer models
  CommModel comm;                                ///< for runs with num_devices > 1
  /// false: fold k's training graphs get their layer times from fold k's layer
  /// model, which saw their own node times (in-sample T_sum, unlike the test
  /// graphs). true: cross-fitting, each training graph in fold j != k gets them
  /// from a model trained without folds j and k, so the refinement trains on
  /// out-of-sample T_sum as it meets at test time (K (K-1) more layer models).
  bool cross_fit = false;
};

/// Layer graph + features of a stored run with layer times from `lp` (as `train graph` builds them).
GraphFeatures run_graph_features(const InModelRun& r, const LayerPredictor& lp,
                                 const std::map<std::string, DeviceRecord>& devices, const CommModel& comm);

/// K-fold CV over the runs with per-fold layer models (see the top of this file).
/// In-model samples whose group is not one of `runs` always train.
GnnCvReport cross_validate_graphs_nested(const NestedGraphCvInput& in, const GnnConfig& cfg,
                                         const GnnTrainOptions& opt, int64_t folds);

}  // namespace scaledl
