// The device-out spread (device_intervals.hpp): the device-weighted quantile, the
// spread on synthetic devices of equal and of unequal efficiency, the skip rule
// for layer kinds only the left-out device measured, and its use by IntervalModel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "scaledl/core/error.hpp"
#include "scaledl/learn/layer_features.hpp"
#include "scaledl/predict/device_intervals.hpp"
#include "scaledl/predict/intervals.hpp"
#include "test_util.hpp"

using namespace scaledl;

namespace {
using scaledl::test::spec_gpu;

const std::vector<int64_t>& linear_dims(int i) {
  static const std::vector<std::vector<int64_t>> dims = [] {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> tok(1, 64), dd(1, 32);
    std::vector<std::vector<int64_t>> v;
    for (int k = 0; k < 400; ++k) v.push_back({tok(rng) * 64, dd(rng) * 64, dd(rng) * 64, 1});
    return v;
  }();
  return dims[static_cast<size_t>(i) % dims.size()];
}

/// Time law of the synthetic devices: launch 10 us + the roofline time / efficiency.
double law_ms(const std::vector<int64_t>& dims, Direction dir, const DeviceRecord& d, double eff) {
  return 0.01 + roofline_ms(LayerType::Linear, dims, DType::FP32, dir, d) / eff;
}

struct Synthetic {
  std::map<std::string, DeviceRecord> devices;
  std::vector<LayerSample> samples;
  std::vector<LayerGraph> graphs;
  std::vector<DeviceOutRun> runs;
};

/// Four GPUs, 120 forward Linear rows each, 3 runs each of 12 large Linear nodes.
/// `eff[i]` is GPU i's efficiency; `bwd_only_on` (>= 0): that GPU also has backward
/// rows, and its runs have backward nodes.
Synthetic synthetic(const std::vector<double>& eff, int bwd_only_on = -1) {
  Synthetic s;
  const std::vector<DeviceRecord> gpus = {spec_gpu("A", 8000, 300, 40), spec_gpu("B", 14000, 900, 80),
                                          spec_gpu("C", 19500, 1555, 108), spec_gpu("D", 10000, 700, 56)};
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 0.02);
  s.graphs.reserve(gpus.size() * 3);
  for (size_t g = 0; g < gpus.size(); ++g) {
    const DeviceRecord& d = gpus[g];
    s.devices[d.key()] = d;
    for (int i = 0; i < 120; ++i) {
      for (Direction dir : {Direction::Forward, Direction::Backward}) {
        if (dir == Direction::Backward && static_cast<int>(g) != bwd_only_on) continue;
        LayerSample x;
        x.type = LayerType::Linear;
        x.dims = linear_dims(i);
        x.dir = dir;
        x.device = d.key();
        x.ms = law_ms(x.dims, dir, d, eff[g]) * std::exp(noise(rng));
        s.samples.push_back(x);
      }
    }
    for (int r = 0; r < 3; ++r) {
      LayerGraph lg;
      double target = 0;
      for (int k = 0; k < 12; ++k) {
        for (Direction dir : {Direction::Forward, Direction::Backward}) {
          if (dir == Direction::Backward && static_cast<int>(g) != bwd_only_on) continue;
          LayerNode n;
          n.id = static_cast<int>(lg.nodes.size());
          n.type = LayerType::Linear;
          n.dir = dir;
          n.dims = {4096, 1024 + 512 * r, 1024 + 256 * k, 1};
          target += law_ms(n.dims, dir, d, eff[g]);
          lg.nodes.push_back(n);
        }
      }
      s.graphs.push_back(std::move(lg));
      s.runs.push_back({&s.graphs.back(), d.key(), target});
    }
  }
  return s;
}

TrainOptions layer_options() {
  TrainOptions o;
  o.rounds = 60;
  o.device_features = false;  // the device enters through the roofline only
  o.nthread = 1;
  return o;
}
}  // namespace

TEST(DeviceIntervals, QuantileWeighsEveryDeviceEquallyWhateverItsRunCount) {
  std::map<std::string, std::vector<double>> v = {{"many", std::vector<double>(99, 0.1)}, {"one", {1.0}}};
  // Unweighted, 0.1 would be the 80 % quantile (99 of 100 values); by device, "one" holds half the weight.
  EXPECT_DOUBLE_EQ(group_weighted_quantile(v, 0.5), 0.1);
  EXPECT_DOUBLE_EQ(group_weighted_quantile(v, 0.8), 1.0);
  EXPECT_DOUBLE_EQ(group_weighted_quantile({{"a", {0.3, 0.1, 0.2}}}, 1.0), 0.3);
  EXPECT_TRUE(std::isnan(group_weighted_quantile({}, 0.8)));
  EXPECT_TRUE(std::isnan(group_weighted_quantile({{"a", {}}}, 0.8)));
  EXPECT_THROW(group_weighted_quantile(v, 0.0), Error);
  EXPECT_THROW(group_weighted_quantile(v, 1.5), Error);
}

TEST(DeviceIntervals, SpreadIsSmallWhenDevicesShareAnEfficiencyAndLargeWhenOneDoesNot) {
  const Synthetic same = synthetic({0.5, 0.5, 0.5, 0.5});
  const DeviceSpread a = device_out_spread(same.runs, same.samples, same.devices, layer_options());
  ASSERT_TRUE(a.valid());
  EXPECT_EQ(a.devices, 4);
  EXPECT_EQ(a.runs, 12);
  EXPECT_EQ(a.skipped, 0);
  EXPECT_LT(a.q95, 0.10) << a.to_json().dump();

  // GPU D reaches a quarter of its roofline, the others half: left out, D is
  // predicted about 2x too fast, and the others somewhat too slow.
  const Synthetic odd = synthetic({0.5, 0.5, 0.5, 0.25});
  const DeviceSpread b = device_out_spread(odd.runs, odd.samples, odd.devices, layer_options());
  ASSERT_TRUE(b.valid());
  const auto& d = b.residuals.at("spec:D");
  ASSERT_EQ(d.size(), 3u);
  for (double r : d) EXPECT_GT(r, std::log(1.6)) << "measured / T_sum of D";
  EXPECT_GT(b.q95, std::log(1.6));
  EXPECT_LE(b.q80, b.q95);
  const nlohmann::json j = b.to_json();
  EXPECT_LT(j["per_device"]["spec:D"]["bias_pct"].get<double>(), -30);  // predicted too fast
  EXPECT_EQ(j["devices"], 4);
}

TEST(DeviceIntervals, RunsNeedingLayerKindsOnlyTheirDeviceMeasuredAreSkipped) {
  // Only GPU B has backward rows, and only its runs have backward nodes: left
  // out, B would be measured against a fold with no backward data at all.
  const Synthetic s = synthetic({0.5, 0.5, 0.5, 0.5}, /*bwd_only_on=*/1);
  const DeviceSpread r = device_out_spread(s.runs, s.samples, s.devices, layer_options());
  EXPECT_EQ(r.skipped, 3);
  EXPECT_EQ(r.runs, 9);
  EXPECT_EQ(r.residuals.count("spec:B"), 0u);
  EXPECT_TRUE(r.valid());
}

TEST(DeviceIntervals, TooFewDevicesGiveNoSpread) {
  Synthetic s = synthetic({0.5, 0.5, 0.5, 0.5});
  std::vector<LayerSample> two;
  for (const auto& x : s.samples)
    if (x.device == "spec:A" || x.device == "spec:B") two.push_back(x);
  const DeviceSpread r = device_out_spread(s.runs, two, s.devices, layer_options());
  EXPECT_FALSE(r.valid());
  EXPECT_EQ(r.runs, 0);
  EXPECT_EQ(r.skipped, 12);  // C's and D's runs have no layer rows; A's and B's no third device
}

TEST(DeviceIntervals, CacheReusesTheFoldModels) {
  const Synthetic s = synthetic({0.5, 0.5, 0.5, 0.25});
  LayerModelCache cache;
  const DeviceSpread a = device_out_spread(s.runs, s.samples, s.devices, layer_options(), &cache, "k");
  EXPECT_EQ(cache.size(), 4u);
  const DeviceSpread b = device_out_spread(s.runs, s.samples, s.devices, layer_options(), &cache, "k");
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(a.residuals, b.residuals);
}

TEST(DeviceIntervals, UnseenDeviceIntervalIsAtLeastTheSpreadAndRoundTrips) {
  IntervalModel m;
  m.n_cal = 40;
  m.q80 = 0.05;
  m.q95 = 0.10;
  const Interval seen = m.at(100, 0, 0.80, NAN, /*unseen_device=*/true);  // no spread calibrated: unchanged
  EXPECT_NEAR(seen.hi, 100 * std::exp(0.05), 1e-9);
  m.unseen_q80 = 0.20;
  m.unseen_q95 = 0.40;
  m.unseen_info = {{"devices", 5}, {"runs", 40}};
  EXPECT_NEAR(m.at(100, 0, 0.80, NAN, false).hi, 100 * std::exp(0.05), 1e-9);
  EXPECT_NEAR(m.at(100, 0, 0.80, NAN, true).hi, 100 * std::exp(0.20), 1e-9);
  EXPECT_NEAR(m.at(100, 0, 0.95, NAN, true).lo, 100 * std::exp(-0.40), 1e-9);
  // Far out of domain the widened in-domain width can exceed the spread: the larger wins.
  m.kappa = 10;
  m.d_max = 10;
  EXPECT_NEAR(m.at(100, 1.0, 0.95, NAN, true).hi, 100 * std::exp(0.10 * 11), 1e-9);

  const IntervalModel back = IntervalModel::from_json(m.to_json(), "graph.intervals");
  EXPECT_DOUBLE_EQ(back.unseen_q80, 0.20);
  EXPECT_DOUBLE_EQ(back.unseen_q95, 0.40);
  EXPECT_EQ(back.unseen_info["devices"], 5);
  nlohmann::json j = m.to_json();
  j["unseen_device"]["q80"] = 0.9;  // wider than q95
  const std::string e = scaledl::test::error_of([&] { IntervalModel::from_json(j, "graph.intervals"); });
  EXPECT_NE(e.find("graph.intervals.unseen_device: q80=0.9"), std::string::npos) << e;
  j = m.to_json();
  j["unseen_device"] = "wide";
  EXPECT_THROW(IntervalModel::from_json(j, "m"), Error);
  // A manifest written before the spread existed has none.
  j = m.to_json();
  j.erase("unseen_device");
  EXPECT_FALSE(IntervalModel::from_json(j, "m").has_unseen());
}

TEST(DeviceIntervals, AnchorShrinksTheMeasuredBiasByTheRatioOfRunNoiseToDeviceSpread) {
  // Prior sd 0.3 of a device's log bias, run noise sd 0.1: one anchor with
  // residual r moves the prediction by r / (1 + 0.01 / 0.09) = 0.9 r.
  const AnchorFit one = fit_anchor({0.3}, 0.3, 0.1);
  EXPECT_EQ(one.n, 1);
  EXPECT_NEAR(one.log_bias, 0.3 * 0.9, 1e-12);
  EXPECT_NEAR(one.factor(), std::exp(0.27), 1e-12);
  EXPECT_NEAR(one.sd_post, 1.0 / std::sqrt(1 / 0.09 + 1 / 0.01), 1e-12);
  // A new run's interval: the bias left and its own noise.
  EXPECT_NEAR(one.half_width(0.80), kZ80 * std::sqrt(one.sd_post * one.sd_post + 0.01), 1e-12);
  EXPECT_GT(one.half_width(0.95), one.half_width(0.80));
  // More anchors trust the data more; noisy runs against a tight prior trust it less.
  EXPECT_GT(fit_anchor({0.3, 0.3, 0.3}, 0.3, 0.1).log_bias, one.log_bias);
  EXPECT_LT(fit_anchor({0.3}, 0.05, 0.3).log_bias, 0.03);
  // No anchors: no change, the prior's width.
  const AnchorFit none = fit_anchor({}, 0.3, 0.1);
  EXPECT_EQ(none.log_bias, 0);
  EXPECT_NEAR(none.sd_post, 0.3, 1e-12);
  EXPECT_THROW(fit_anchor({NAN}, 0.3, 0.1), Error);
  EXPECT_THROW(fit_anchor({0.1}, 0, 0.1), Error);
  EXPECT_THROW(fit_anchor({0.1}, 0.3, INFINITY), Error);
  EXPECT_THROW(one.half_width(0.9), Error);

  // The sds a bundle's interval model gives, and the anchored interval.
  IntervalModel iv;
  iv.n_cal = 40;
  iv.q80 = 0.10;
  iv.q95 = 0.20;
  EXPECT_NEAR(anchor_sds(iv, true).first, 0.10 / kZ80, 1e-12);  // no spread: the run noise
  iv.unseen_q80 = 0.30;
  iv.unseen_q95 = 0.40;
  EXPECT_NEAR(anchor_sds(iv, true).first, 0.30 / kZ80, 1e-12);
  EXPECT_NEAR(anchor_sds(iv, false).first, 0.10 / kZ80, 1e-12);
  EXPECT_NEAR(anchor_sds(iv, true).second, 0.10 / kZ80, 1e-12);
  const AnchorFit tight = fit_anchor({0.2, 0.2, 0.2, 0.2}, 0.3, 0.01);
  const Interval in = anchored_interval(iv, tight, 100, 0, 0.80, NAN);
  EXPECT_NEAR(in.hi, 100 * std::exp(0.10), 1e-9);  // the in-domain width is the larger one
  const AnchorFit loose = fit_anchor({0.2}, 0.3, 0.5);
  EXPECT_NEAR(anchored_interval(iv, loose, 100, 0, 0.95, NAN).lo, 100 * std::exp(-loose.half_width(0.95)),
              1e-9);
}
