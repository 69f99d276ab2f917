// Graph-refinement CV with per-fold layer models (graph_cv.hpp).
#include "scaledl/graph_cv.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "scaledl/error.hpp"
#include "scaledl/graph_batch.hpp"
#include "scaledl/layer_graph.hpp"
#include "scaledl/model_spec.hpp"

namespace scaledl {

std::vector<int64_t> graph_cv_folds(size_t n, int64_t folds, uint64_t seed) {
  SCALEDL_CHECK(folds >= 2, "folds={} must be >= 2", folds);
  SCALEDL_CHECK(static_cast<size_t>(folds) <= n, "folds={} but only {} graphs", folds, n);
  // The permutation of cross_validate_graphs (src/gnn/gnn.cpp).
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> fold(n, -1);
  for (size_t i = 0; i < n; ++i) fold[perm[i]] = static_cast<int64_t>(i % folds);
  return fold;
}

GraphFeatures run_graph_features(const InModelRun& r, const LayerPredictor& lp,
                                 const std::map<std::string, DeviceRecord>& devices, const CommModel& comm) {
  const std::string ctx = fmt::format("{}: model run '{}'", r.ctx, model_key(r.run));
  auto dev = devices.find(r.run.device);
  SCALEDL_CHECK(dev != devices.end(), "{}: device '{}' is not in the store", ctx, r.run.device);
  const ModelSpec spec = model_spec_from_json(r.run.model, ctx + ".model");
  const TrainSettings s = parse_train_settings(r.run.settings, ctx + ".settings");
  SCALEDL_CHECK(std::isfinite(r.run.iter.median_ms) && r.run.iter.median_ms > 0,
                "{}: iter.median_ms={} is not a usable label", ctx, r.run.iter.median_ms);
  const LayerGraph g = build_layer_graph(spec, s);
  GraphContext gc;
  gc.device = dev->second;
  gc.comm = comm;
  gc.target_ms = r.run.iter.median_ms;
  GraphFeatures f = featurize(g, lp.predict_nodes(g, dev->second), gc);
  f.label = r.run.model_name;
  return f;
}

GnnCvReport cross_validate_graphs_nested(const NestedGraphCvInput& in, const GnnConfig& cfg,
                                         const GnnTrainOptions& opt, int64_t folds) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = in.runs.size();
  GnnCvReport r;
  r.fold = graph_cv_folds(n, folds, opt.seed);
  r.folds = folds;
  r.graphs = static_cast<int64_t>(n);
  r.labels.resize(n);
  r.target_ms.resize(n);
  r.before_ms.assign(n, NAN);
  r.pred_ms.assign(n, NAN);
  r.alpha.assign(n, NAN);
  std::map<std::string, int64_t> run_fold;  // group -> fold
  for (size_t i = 0; i < n; ++i) run_fold[in_model_group(in.runs[i].ctx, in.runs[i].run)] = r.fold[i];
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
  for (int64_t k = 0; k < folds; ++k) {
    const LayerPredictor lp = layer_model(k, k);
    std::map<int64_t, LayerPredictor> inner;  // cross_fit: fold j of the training part -> its model
    if (in.cross_fit)
      for (int64_t j = 0; j < folds; ++j)
        if (j != k) inner.emplace(j, layer_model(k, j));
    std::vector<GraphFeatures> tr, te;
    std::vector<size_t> test;
    for (size_t i = 0; i < n; ++i) {
      const bool is_test = r.fold[i] == k;
      const LayerPredictor& m = is_test || !in.cross_fit ? lp : inner.at(r.fold[i]);
      GraphFeatures f = run_graph_features(in.runs[i], m, in.devices, in.comm);
      if (is_test) {
        r.labels[i] = f.label;
        r.target_ms[i] = f.target_ms;
        r.before_ms[i] = f.t_sum_ms + f.t_comm_ms;
        test.push_back(i);
        te.push_back(std::move(f));
      } else {
        tr.push_back(std::move(f));
      }
    }
    const GraphPredictor p = GraphPredictor::train(tr, cfg, opt);
    const GnnPrediction pr = p.predict(te);
    std::vector<double> y;
    for (size_t j = 0; j < test.size(); ++j) {
      r.pred_ms[test[j]] = pr.t_pred_ms[j];
      r.alpha[test[j]] = pr.alpha[j];
      y.push_back(r.target_ms[test[j]]);
    }
    r.fold_mre.push_back(mean_relative_error(pr.t_pred_ms, y));
  }
  r.mre_before = mean_relative_error(r.before_ms, r.target_ms);
  r.mre = mean_relative_error(r.pred_ms, r.target_ms);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace scaledl
