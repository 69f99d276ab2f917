// Split-conformal intervals (intervals.hpp): the quantile rule, coverage on
// synthetic data with known noise, widening out of domain, the fitted kappa,
// the manifest round trip, and the out-of-domain flag of a trained graph model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "gnn/gnn_test_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/predict/intervals.hpp"

using namespace scaledl;

namespace {
IntervalModel model_of(int64_t n, double q80, double q95, double kappa) {
  IntervalModel m;
  m.n_cal = n;
  m.q80 = q80;
  m.q95 = q95;
  m.kappa = kappa;
  return m;
}
}  // namespace

TEST(Conformal, QuantileIsTheCeilRankAndInfiniteWithTooFewScores) {
  std::vector<double> s = {9, 1, 8, 2, 7, 3, 6, 4, 5};
  EXPECT_EQ(conformal_quantile(s, 0.8), 8.0);            // ceil(10 * 0.8) = 8th smallest
  EXPECT_EQ(conformal_quantile(s, 0.5), 5.0);            // ceil(10 * 0.5) = 5th
  EXPECT_TRUE(std::isinf(conformal_quantile(s, 0.95)));  // rank 10 > 9 scores
  EXPECT_TRUE(std::isinf(conformal_quantile({}, 0.8)));
  EXPECT_THROW(conformal_quantile(s, 1.0), Error);
}

TEST(Conformal, CoversNewDrawsAtTheNominalRateUnderKnownNoise) {
  // Measured = predicted * exp(e), e ~ N(0, 0.1): 400 calibration residuals,
  // then 20,000 fresh draws scored against the intervals.
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> noise(0.0, 0.1);
  std::vector<double> cal;
  for (int i = 0; i < 400; ++i) cal.push_back(std::abs(noise(rng)));
  IntervalModel m;
  m.n_cal = 400;
  m.q80 = conformal_quantile(cal, 0.80);
  m.q95 = conformal_quantile(cal, 0.95);
  // The true quantiles of |N(0, 0.1)|: 0.1 * 1.2816 and 0.1 * 1.9600.
  EXPECT_NEAR(m.q80, 0.128, 0.015);
  EXPECT_NEAR(m.q95, 0.196, 0.025);
  int in80 = 0, in95 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double pred = 50.0, meas = pred * std::exp(noise(rng));
    const Interval a = m.at(pred, 0, 0.80), b = m.at(pred, 0, 0.95);
    in80 += meas >= a.lo && meas <= a.hi;
    in95 += meas >= b.lo && meas <= b.hi;
  }
  EXPECT_NEAR(100.0 * in80 / n, 80.0, 3.0);
  EXPECT_NEAR(100.0 * in95 / n, 95.0, 2.0);
}

TEST(Conformal, SizeScaleKeepsSmallRunsNominalAndNeverNarrowsLargeRunsBelowTheMedian) {
  // Noise that shrinks with run size: sd = 0.2 (T_sum / 1 ms)^-0.3, T_sum 1..1000 ms.
  std::mt19937_64 rng(99);
  std::normal_distribution<double> z(0.0, 1.0);
  std::uniform_real_distribution<double> logt(0.0, std::log(1000.0));
  auto draw = [&](double& t) {
    t = std::exp(logt(rng));
    return 0.2 * std::pow(t, -0.3) * z(rng);
  };
  std::vector<double> r, t;
  for (int i = 0; i < 1000; ++i) {
    double ti;
    r.push_back(draw(ti));
    t.push_back(ti);
  }
  const IntervalModel m = calibrate_from_residuals(r, t);
  ASSERT_TRUE(m.valid());
  EXPECT_NEAR(m.scale_c1, -0.3, 0.08);
  // Coverage of fresh draws, separately for the smallest and the largest runs.
  int n_small = 0, n_large = 0, in_small = 0, in_large = 0;
  for (int i = 0; i < 40000; ++i) {
    double ti;
    const double e = draw(ti);
    const Interval iv = m.at(10.0, 0, 0.80, ti);
    const bool in = 10.0 * std::exp(e) >= iv.lo && 10.0 * std::exp(e) <= iv.hi;
    if (ti < 5) n_small++, in_small += in;
    if (ti > 200) n_large++, in_large += in;
  }
  EXPECT_NEAR(100.0 * in_small / n_small, 80.0, 4.0);
  // The runs above the median keep the median run's width: in distribution
  // they over-cover; extrapolated to (ood-size), that width keeps them covered.
  EXPECT_GT(100.0 * in_large / n_large, 84.0);
  std::vector<double> u;
  for (double x : t) u.push_back(std::log(x));
  std::sort(u.begin(), u.end());
  EXPECT_DOUBLE_EQ(m.u_floor, u[u.size() / 2]);
  EXPECT_DOUBLE_EQ(m.width_scale(1000.0), m.sigma(std::exp(m.u_floor)));
  EXPECT_DOUBLE_EQ(m.width_scale(1.0), m.sigma(1.0));
  EXPECT_GT(m.sigma(1.0), m.sigma(1000.0));
  EXPECT_DOUBLE_EQ(m.sigma(1e9), m.sigma(std::exp(m.u_hi)));  // clamped to the calibration range
}

TEST(Conformal, IntervalsWidenOutOfDomainAndNest) {
  IntervalModel m = model_of(10, 0.1, 0.2, 0.5);
  m.d_max = 3;
  const Interval in = m.at(100, 0, 0.95), out = m.at(100, 2, 0.95), in80 = m.at(100, 0, 0.80);
  EXPECT_NEAR(in.hi, 100 * std::exp(0.2), 1e-9);
  EXPECT_NEAR(out.hi, 100 * std::exp(0.4), 1e-9);  // q (1 + 0.5 * 2)
  // Beyond the farthest calibrated distance the width stops growing, and says so.
  EXPECT_NEAR(m.at(100, 30, 0.95).hi, 100 * std::exp(0.2 * 2.5), 1e-9);
  EXPECT_TRUE(m.beyond_calibration(30));
  EXPECT_FALSE(m.beyond_calibration(2));
  EXPECT_LT(out.lo, in.lo);
  EXPECT_LT(in.lo, in80.lo);
  EXPECT_GT(in.hi, in80.hi);
  EXPECT_THROW(m.at(100, 0, 0.9), Error);
}

TEST(Conformal, KappaIsFittedToCoverExtrapolationResidualsAndNeverBelowItsFloor) {
  // Residuals that grow with the distance: |r| = 0.1 (1 + 2 d) |z|.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.5);
  std::vector<double> r, d;
  for (int i = 0; i < 2000; ++i) {
    d.push_back(u(rng));
    r.push_back(0.1 * (1 + 2 * d.back()) * z(rng));
  }
  const double q80 = 0.128, q95 = 0.196;
  const double kappa = fit_kappa(r, d, q95, 0.95, 0.5);
  EXPECT_GT(kappa, 1.0);  // the truth is 2
  EXPECT_LT(kappa, 3.0);
  int in95 = 0;
  for (size_t i = 0; i < r.size(); ++i) in95 += std::abs(r[i]) <= q95 * (1 + kappa * d[i]);
  EXPECT_GE(100.0 * in95 / r.size(), 95.0);
  // In-domain residuals that the quantiles already cover: the floor.
  EXPECT_EQ(fit_kappa({0.01, -0.02, 0.0}, {0, 0, 0}, q80, 0.80, 0.5), 0.5);
  EXPECT_EQ(fit_kappa({}, {}, q95, 0.95, 0.7), 0.7);
  // The 80 % level needs less widening than the 95 % level on the same residuals.
  EXPECT_LT(fit_kappa(r, d, q80, 0.80, 0.0), kappa + 1e-12);
}

TEST(Conformal, ManifestRoundTripAndBadFieldsNamed) {
  IntervalModel m = model_of(42, 0.05, 0.09, 1.25);
  m.n_extrapolation = 30;
  m.source = "test";
  EXPECT_TRUE(std::isnan(IntervalModel::from_json(m.to_json(), "manifest").u_floor));  // none: older bundles
  m.u_floor = 3.5;
  const IntervalModel back = IntervalModel::from_json(m.to_json(), "manifest");
  EXPECT_DOUBLE_EQ(back.u_floor, 3.5);
  {
    nlohmann::json bad = m.to_json();
    bad["log_t_sum_floor"] = "x";
    EXPECT_THROW(IntervalModel::from_json(bad, "manifest"), Error);
  }
  EXPECT_EQ(back.n_cal, 42);
  EXPECT_DOUBLE_EQ(back.q95, 0.09);
  EXPECT_DOUBLE_EQ(back.kappa, 1.25);
  nlohmann::json j = m.to_json();
  j.erase("q95");
  try {
    IntervalModel::from_json(j, "manifest: graph.intervals");
    FAIL() << "missing q95 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q95"), std::string::npos) << e.what();
  }
  j = m.to_json();
  j["q80"] = 0.5;  // wider than q95
  EXPECT_THROW(IntervalModel::from_json(j, "m"), Error);
  j = m.to_json();
  j["kappa"] = -1;
  EXPECT_THROW(IntervalModel::from_json(j, "m"), Error);
}

TEST(Conformal, GraphModelFlagsAConfigurationFarOutsideItsTrainingRange) {
  // Train on batches 2..8 of a 2-block model; a batch of 4096 with 12 blocks is far outside.
  std::vector<GraphFeatures> train;
  for (int64_t b : {2, 3, 4, 5, 6, 8})
    for (int64_t s : {16, 32}) train.push_back(test::labelled(test::small_graph("bert-base.json", 2, b, s)));
  GnnTrainOptions opt;
  opt.epochs = 5;
  opt.val_fraction = 0.25;
  GnnConfig cfg;
  cfg.ood_tau = 1.0;
  GnnTrainReport rep;
  const GraphPredictor p = GraphPredictor::train(train, cfg, opt, &rep);
  EXPECT_EQ(rep.val_log_residuals.size(), 3u);
  const GraphFeatures inside = test::labelled(test::small_graph("bert-base.json", 2, 4, 32));
  const GraphFeatures far = test::labelled(test::small_graph("bert-base.json", 12, 4096, 32));
  const GnnPrediction pr = p.predict(std::vector<const GraphFeatures*>{&inside, &far});
  EXPECT_EQ(pr.ood_distance[0], 0.0);
  EXPECT_GT(pr.ood_distance[1], 1.0);
  // Shrinkage: the far graph's alpha is pulled toward 1 (the plain sum).
  GnnConfig off = cfg;
  off.ood_tau = 0;
  GraphPredictor q(off, p.normalizer());
  {
    torch::NoGradGuard ng;
    auto a = q.model()->parameters(), b = p.model()->parameters();
    for (size_t i = 0; i < a.size(); ++i) a[i].copy_(b[i]);
  }
  const GnnPrediction raw = q.predict(std::vector<const GraphFeatures*>{&far});
  EXPECT_LE(std::abs(std::log(pr.alpha[1])), std::abs(std::log(raw.alpha[0])) + 1e-12);
  EXPECT_NEAR(pr.alpha[1], std::exp(std::exp(-pr.ood_distance[1]) * std::log(raw.alpha[0])), 1e-9);
  // alpha stays inside (1/alpha_bound, alpha_bound) whatever the weights.
  EXPECT_GT(raw.alpha[0], 1.0 / cfg.alpha_bound);
  EXPECT_LT(raw.alpha[0], cfg.alpha_bound);
}
