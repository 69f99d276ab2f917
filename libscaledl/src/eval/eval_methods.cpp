// What each method of `scaledl eval` predicts for a split's test runs (run_eval_detail.hpp).
#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eval/baselines.hpp"
#include "eval/run_eval_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/design/design.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/predict/intervals.hpp"

namespace scaledl::eval_detail {

namespace {

GnnConfig method_config(const std::string& m, const EvalOptions& o) {
  GnnConfig c;
  c.alpha_bound = o.alpha_bound;
  c.ood_tau = o.ood_tau;
  if (m == "scaledl-anee") c.encoder = "anee";
  if (m == "scaledl-nomlp") c.global_branch = false;
  if (m == "dnnperf") {
    c.encoder = "anee";
    c.target = "direct";
    c.readout = "sum";
    c.ood_tau = 0;  // as published: no shrinkage
  }
  return c;
}

/// Each test run j is anchored on `anchors` scored runs (of the first `n_scored`) of the
/// held-out device other than itself, drawn by (seed, j): mo.apred and its intervals.
void anchor_predictions(const Ctx& c, const IntervalModel& iv, const std::vector<size_t>& test, uint64_t seed,
                        const std::vector<const GraphFeatures*>& G, const GnnPrediction& pr, int anchors,
                        size_t n_scored, MethodOut& mo) {
  const std::vector<double>& out = mo.pred;
  const auto sds = anchor_sds(iv, /*unseen_device=*/true);
  for (size_t j = 0; j < out.size(); ++j) {
    std::vector<size_t> cand;
    for (size_t k = 0; k < n_scored; ++k)
      if (k != j) cand.push_back(k);
    std::mt19937_64 rng(seed * 1000003 + j);
    std::shuffle(cand.begin(), cand.end(), rng);
    cand.resize(std::min(cand.size(), static_cast<size_t>(anchors)));
    std::vector<double> r;
    for (size_t k : cand) r.push_back(std::log(c.runs[test[k]].target_ms / out[k]));
    const AnchorFit a = fit_anchor(r, sds.first, sds.second);
    const double pa = out[j] * a.factor(), ts = G[test[j]]->t_sum_ms;
    const Interval i80 = anchored_interval(iv, a, pa, pr.ood_distance[j], 0.80, ts),
                   i95 = anchored_interval(iv, a, pa, pr.ood_distance[j], 0.95, ts);
    mo.apred.push_back(pa);
    mo.alo80.push_back(i80.lo);
    mo.ahi80.push_back(i80.hi);
    mo.alo95.push_back(i95.lo);
    mo.ahi95.push_back(i95.hi);
  }
}

/// A graph method (GraphPredictor) trained on `train`, its predictions of `test` and,
/// with `intervals`, their intervals (and anchored ones: fit_predict_runs).
void graph_method_predict(const Ctx& c, const std::string& method, const std::vector<size_t>& train,
                          const std::vector<size_t>& test, uint64_t seed,
                          const std::vector<const GraphFeatures*>& G, bool intervals,
                          const DeviceSpread* unseen, int anchors, size_t n_scored, MethodOut& mo) {
  std::vector<GraphFeatures> gtr;
  gtr.reserve(train.size());
  for (size_t i : train) gtr.push_back(*G[i]);
  GnnTrainOptions opt = c.o.gnn;
  opt.seed = seed;
  opt.on_epoch = nullptr;
  const GnnConfig cfg = method_config(method, c.o);
  GnnTrainReport rep;
  GraphPredictor p = GraphPredictor::train(gtr, cfg, opt, &rep);
  std::vector<const GraphFeatures*> gte;
  for (size_t i : test) gte.push_back(G[i]);
  GnnPrediction pr;
  if (c.o.graph_members == 1) {
    pr = p.predict(gte);
  } else {  // the other members, the next seeds, combined as a bundle's (bundle_train.cpp)
    GraphInference ensemble = *p.inference();
    const std::vector<GraphPredictor> more = train_further_members(gtr, cfg, opt, c.o.graph_members);
    for (size_t k = 0; k < more.size(); ++k)
      ensemble.add_member(*more[k].inference(), fmt::format("{} member {}", method, k + 2));
    pr = ensemble.predict(gte);
  }
  std::vector<double>& out = mo.pred;
  out = pr.t_pred_ms;
  mo.ood = pr.ood_distance;
  if (!intervals) return;
  IntervalModel iv = calibrate_intervals(gtr, cfg, opt, rep);
  if (unseen && unseen->valid()) {  // the test device trained no layer model: the device-out spread
    iv.unseen_q80 = unseen->q80;
    iv.unseen_q95 = unseen->q95;
  }
  const bool u = unseen != nullptr;
  for (size_t j = 0; j < out.size(); ++j) {
    const double ts = G[test[j]]->t_sum_ms;
    const Interval a = iv.at(out[j], pr.ood_distance[j], 0.80, ts, u),
                   b = iv.at(out[j], pr.ood_distance[j], 0.95, ts, u);
    mo.lo80.push_back(a.lo);
    mo.hi80.push_back(a.hi);
    mo.lo95.push_back(b.lo);
    mo.hi95.push_back(b.hi);
  }
  if (anchors > 0 && u && iv.has_unseen())
    anchor_predictions(c, iv, test, seed, G, pr, anchors, n_scored, mo);
}

}  // namespace

bool is_graph_method(const std::string& m) {
  return m == "scaledl-tc" || m == "scaledl-anee" || m == "scaledl-nomlp" || m == "dnnperf";
}

MethodOut fit_predict_runs(const Ctx& c, const std::string& method, const std::vector<size_t>& train,
                           const std::vector<size_t>& test, uint64_t seed,
                           const std::vector<const GraphFeatures*>& G, bool intervals,
                           const DeviceSpread* unseen, int anchors, size_t n_scored) {
  std::vector<const EvalRun*> tr, te;
  for (size_t i : train) tr.push_back(&c.runs[i]);
  for (size_t i : test) te.push_back(&c.runs[i]);
  MethodOut mo;
  std::vector<double>& out = mo.pred;
  if (method == "sum") {
    for (size_t i : test) out.push_back(G[i]->t_sum_ms + G[i]->t_comm_ms);
  } else if (method == "mlp-acc") {
    for (const EvalRun* r : te) out.push_back(r->sum_mlp_acc_ms);
  } else if (method == "prenet") {
    for (const EvalRun* r : te) out.push_back(r->sum_prenet_ms);
  } else if (method == "rf-hp") {
    out = rf_hp_fit_predict(tr, te, c.devices, seed);
  } else if (method == "birnn") {
    out = birnn_fit_predict(tr, te, c.o.birnn_epochs, seed);
  } else if (is_graph_method(method)) {
    graph_method_predict(c, method, train, test, seed, G, intervals, unseen, anchors, n_scored, mo);
  } else {
    fail("--methods: \"{}\" is not a method ({})", method, fmt::join(all_eval_methods(), ", "));
  }
  SCALEDL_CHECK(out.size() == te.size(), "internal: {} predicted {} of {} runs", method, out.size(),
                te.size());
  for (auto* v : {&mo.lo80, &mo.hi80, &mo.lo95, &mo.hi95, &mo.ood}) v->resize(out.size(), NAN);
  return mo;
}

std::vector<size_t> doptimal_subset(const Ctx& c, const std::vector<size_t>& pool, size_t k, uint64_t seed) {
  const size_t nf = hp_feature_count();
  std::vector<std::vector<float>> x;
  for (size_t i : pool) x.push_back(hp_features(c.runs[i], c.devices.at(c.runs[i].device)));
  std::vector<size_t> cols;
  for (size_t f = 0; f < nf; ++f) {
    bool varies = false;
    for (auto& r : x) varies = varies || r[f] != x[0][f];
    if (varies) cols.push_back(f);
  }
  FeatureMatrix F(static_cast<Eigen::Index>(pool.size()), static_cast<Eigen::Index>(cols.size() + 1));
  for (size_t i = 0; i < pool.size(); ++i) {
    F(static_cast<Eigen::Index>(i), 0) = 1;
    for (size_t j = 0; j < cols.size(); ++j)
      F(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j + 1)) = x[i][cols[j]];
  }
  // Standardise columns so that the ridge and tolerances mean the same everywhere.
  for (Eigen::Index j = 1; j < F.cols(); ++j) {
    const double m = F.col(j).mean();
    const double s = std::sqrt((F.col(j).array() - m).square().mean());
    F.col(j) = (F.col(j).array() - m) / (s > 0 ? s : 1.0);
  }
  // Keep a full-rank set of columns (the family one-hots sum to the intercept;
  // T5's decoder depth equals its encoder depth): pivoted QR picks them.
  const Eigen::MatrixXd dense = F;
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(dense);
  qr.setThreshold(1e-8);
  const Eigen::Index rank = qr.rank();
  if (rank < F.cols()) {
    std::vector<Eigen::Index> keep;
    for (Eigen::Index j = 0; j < rank; ++j) keep.push_back(qr.colsPermutation().indices()(j));
    std::sort(keep.begin(), keep.end());
    FeatureMatrix G(F.rows(), rank);
    for (Eigen::Index j = 0; j < rank; ++j) G.col(j) = F.col(keep[static_cast<size_t>(j)]);
    F = G;
  }
  FedorovOptions fo;
  fo.k = static_cast<int>(k);
  fo.seed = seed;
  fo.threads = 1;
  fo.keep_trace = false;
  FedorovResult r = fedorov_design(F, FeatureMatrix(0, F.cols()), fo);
  std::vector<size_t> out;
  for (int64_t i : r.chosen) out.push_back(pool[static_cast<size_t>(i)]);
  return out;
}

}  // namespace scaledl::eval_detail
