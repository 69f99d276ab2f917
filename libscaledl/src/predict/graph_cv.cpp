// Graph-refinement CV with per-fold layer models (graph_cv.hpp).
#include "scaledl/predict/graph_cv.hpp"

#include <cmath>

#include "scaledl/core/error.hpp"
#include "scaledl/gnn/graph_batch.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

namespace {
std::string run_ctx(const InModelRun& r) {
  return fmt::format("{}: model run '{}'", r.ctx, model_key(r.run));
}
}  // namespace

LayerGraph run_layer_graph(const InModelRun& r) {
  const std::string ctx = run_ctx(r);
  return build_layer_graph(model_spec_from_json(r.run.model, ctx + ".model"),
                           parse_train_settings(r.run.settings, ctx + ".settings"));
}

GraphFeatures run_graph_features(const InModelRun& r, const LayerPredictor& lp,
                                 const std::map<std::string, DeviceRecord>& devices, const CommModel& comm) {
  const std::string ctx = run_ctx(r);
  auto dev = devices.find(r.run.device);
  SCALEDL_CHECK(dev != devices.end(), "{}: device '{}' is not in the store", ctx, r.run.device);
  const LayerGraph g = run_layer_graph(r);
  SCALEDL_CHECK(g.settings.num_devices == 1 || comm.bandwidth_Bps > 0,
                "{}: settings.num_devices={} needs an all-reduce calibration (--comm FILE)", ctx,
                g.settings.num_devices);
  SCALEDL_CHECK(std::isfinite(r.run.iter.median_ms) && r.run.iter.median_ms > 0,
                "{}: iter.median_ms={} is not a usable label", ctx, r.run.iter.median_ms);
  GraphContext gc;
  gc.device = dev->second;
  gc.comm = comm;
  gc.target_ms = r.run.iter.median_ms;
  GraphFeatures f = featurize(g, lp.predict_nodes(g, dev->second), gc);
  f.label = r.run.model_name;
  return f;
}

void for_each_crossfit_model(const std::vector<std::string>& item_groups, int64_t folds, uint64_t seed,
                             const std::vector<LayerSample>& samples,
                             const std::map<std::string, DeviceRecord>& devices,
                             const TrainOptions& layer_options,
                             const std::function<void(size_t, const LayerPredictor&)>& use) {
  const std::vector<int64_t> fold = graph_cv_folds(item_groups.size(), folds, seed);
  std::map<std::string, int64_t> group_fold;
  for (size_t i = 0; i < item_groups.size(); ++i)
    if (!item_groups[i].empty()) group_fold[item_groups[i]] = fold[i];
  TrainOptions lo = layer_options;
  lo.verbose = false;
  for (int64_t k = 0; k < folds; ++k) {
    std::vector<LayerSample> train;
    for (const auto& s : samples) {
      auto f = group_fold.find(s.group);
      if (s.group.empty() || f == group_fold.end() || f->second != k) train.push_back(s);
    }
    const LayerPredictor lp = LayerPredictor::train_samples(train, devices, lo);
    for (size_t i = 0; i < item_groups.size(); ++i)
      if (fold[i] == k) use(i, lp);
  }
}

GnnCvReport cross_validate_graphs_nested(const NestedGraphCvInput& in, const GnnConfig& cfg,
                                         const GnnTrainOptions& opt, int64_t folds) {
  const size_t n = in.runs.size();
  const std::vector<int64_t> fold = graph_cv_folds(n, folds, opt.seed);
  std::map<std::string, int64_t> run_fold;  // group -> fold
  for (size_t i = 0; i < n; ++i) run_fold[in_model_group(in.runs[i].ctx, in.runs[i].run)] = fold[i];
  TrainOptions lo = in.layer_options;
  lo.verbose = false;
  // Layer model trained without the node times of the runs in folds `a` and `b`.
  auto layer_model = [&](int64_t a, int64_t b) {
    std::vector<LayerSample> train;
    for (const auto& s : in.samples) {
      auto f = run_fold.find(s.group);
      if (s.group.empty() || f == run_fold.end() || (f->second != a && f->second != b)) train.push_back(s);
    }
    return LayerPredictor::train_samples(train, in.devices, lo);
  };
  return cross_validate_graphs(fold, folds, cfg, opt, [&](int64_t k) {
    const LayerPredictor lp = layer_model(k, k);
    std::map<int64_t, LayerPredictor> inner;  // cross_fit: fold j of the training part -> its model
    if (in.cross_fit)
      for (int64_t j = 0; j < folds; ++j)
        if (j != k) inner.emplace(j, layer_model(k, j));
    std::vector<GraphFeatures> graphs;
    for (size_t i = 0; i < n; ++i) {
      const LayerPredictor& m = fold[i] == k || !in.cross_fit ? lp : inner.at(fold[i]);
      graphs.push_back(run_graph_features(in.runs[i], m, in.devices, in.comm));
    }
    return graphs;
  });
}

}  // namespace scaledl
