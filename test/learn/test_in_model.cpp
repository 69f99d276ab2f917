// In-model layer samples (in_model_samples.hpp): per-node times of whole-model
// runs -> LayerSamples, merged per (type, dims, direction) with the median, and
// the group k-fold over model runs of cross_validate (holdout = "model-runs").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "scaledl/core/error.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/learn/layer_features.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "test_util.hpp"

using namespace scaledl;

namespace {

DeviceRecord device() {
  DeviceRecord d;
  d.name = "TestGPU";
  d.kind = "spec";
  d.cores = 80;
  d.clock_mhz = 1400;
  d.mem_gb = 32;
  d.l2_mb = 6;
  d.peak_fp32_gflops = 10000;
  d.peak_mem_bw_gbs = 900;
  return d;
}

ModelSpec small_bert() {
  ModelSpec m = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/bert-base.json");
  m.num_layers = 3;
  return m;
}

/// Time of node n: `scale` x (launch floor + roofline), jittered by the node id so
/// that nodes with equal dims have different times (the median is then testable).
double node_ms(const LayerNode& n, DType dt, const DeviceRecord& d, double scale) {
  return scale * (0.01 + roofline_ms(n.type, n.dims, dt, n.dir, d)) * (1.0 + 0.01 * (n.id % 7));
}

/// An ok run of `m` with a time for every node of its graph.
ModelMeasurement run_of(const ModelSpec& m, int64_t batch, int64_t seq, double scale,
                        LayerGraph* graph = nullptr) {
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  LayerGraph g = build_layer_graph(m, s);
  ModelMeasurement r;
  r.campaign = "t";
  r.model_name = m.name;
  r.family = to_string(m.family);
  r.model = m.to_json();
  r.settings = s.to_json();
  r.device = device().key();
  r.iter.median_ms = 10;
  for (const auto& n : g.nodes) r.node_times.push_back({n.name, node_ms(n, s.dtype, device(), scale)});
  if (graph) *graph = g;
  return r;
}

std::map<std::string, DeviceRecord> devices() {
  return {{device().key(), device()}};
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(InModelSamples, OneSamplePerDistinctNodeWithTheMedianTime) {
  LayerGraph g;
  const ModelMeasurement run = run_of(small_bert(), 2, 32, 1.0, &g);
  InModelStats st;
  auto samples = samples_from_model_runs({run}, devices(), "db.sqlite", &st);
  // Expected: group the graph's nodes by (type, dims, direction) independently.
  std::map<std::tuple<int, std::vector<int64_t>, int>, std::vector<double>> expect;
  for (const auto& n : g.nodes)
    expect[{int(n.type), n.dims, int(n.dir)}].push_back(node_ms(n, DType::FP32, device(), 1.0));
  ASSERT_EQ(samples.size(), expect.size());
  EXPECT_LT(samples.size(), g.nodes.size() / 2);  // 3 equal blocks, q/k/v: merged, not duplicated
  EXPECT_EQ(st.runs, 1u);
  EXPECT_EQ(st.node_times, g.nodes.size());
  EXPECT_EQ(st.skipped_missing, 0u);
  EXPECT_EQ(st.samples, samples.size());
  bool saw_update = false, saw_bwd = false;
  for (const auto& s : samples) {
    auto times = expect.at({int(s.type), s.dims, int(s.dir)});
    std::sort(times.begin(), times.end());
    const size_t k = times.size();
    const double med = k % 2 ? times[k / 2] : (times[k / 2 - 1] + times[k / 2]) / 2;
    EXPECT_DOUBLE_EQ(s.ms, med) << to_string(s.type) << " " << to_string(s.dir);
    EXPECT_EQ(s.device, device().key());
    EXPECT_EQ(s.dtype, DType::FP32);
    EXPECT_EQ(s.group, "db.sqlite: " + model_key(run));
    saw_update |= s.dir == Direction::Update && s.type == LayerType::Optimizer;
    saw_bwd |= s.dir == Direction::Backward;
  }
  EXPECT_TRUE(saw_update);
  EXPECT_TRUE(saw_bwd);
  // The samples train a predictor like isolated rows do.
  TrainOptions o;
  o.min_rows = 2;
  o.nthread = 1;
  LayerPredictor p = LayerPredictor::train_samples(samples, devices(), o);
  EXPECT_TRUE(p.has_model(LayerType::Linear, Direction::Forward));
}

// Runs timed before the score kernels were nodes of their own (2026-11-25) have no time for
// them: their qk time holds the scale and mask kernels too, so it is no BMM sample.
TEST(InModelSamples, QkTimesOfRunsWithoutScoreKernelNodesAreSkipped) {
  LayerGraph g;
  ModelMeasurement run = run_of(small_bert(), 2, 32, 1.0, &g);
  ASSERT_GE(g.find("encoder.0.attn.scale"), 0);
  InModelStats st;
  samples_from_model_runs({run}, devices(), "db", &st);
  EXPECT_EQ(st.skipped_fused_scores, 0u);
  ModelMeasurement old = run;
  std::vector<NodeTime> kept;
  for (const auto& nt : old.node_times)
    if (nt.node.find(".attn.scale") == std::string::npos && nt.node.find(".attn.mask") == std::string::npos)
      kept.push_back(nt);
  old.node_times = kept;
  InModelStats st2;
  auto samples = samples_from_model_runs({old}, devices(), "db", &st2);
  int blocks = 0;
  for (const auto& n : g.nodes) blocks += n.name.size() > 8 && n.name.substr(n.name.size() - 8) == ".attn.qk";
  EXPECT_EQ(st2.skipped_fused_scores, static_cast<size_t>(2 * blocks));  // forward and backward
  EXPECT_EQ(st2.to_json()["skipped_fused_scores"], 2 * blocks);
  const auto& qk = g.nodes[g.find("encoder.0.attn.qk")];
  for (const auto& s : samples)
    EXPECT_FALSE(s.type == LayerType::BMM && s.dims == qk.dims && s.dir == Direction::Forward);
}

TEST(InModelSamples, MissingOrNonPositiveTimesAndNonOkRunsAreSkipped) {
  LayerGraph g;
  ModelMeasurement run = run_of(small_bert(), 2, 32, 1.0, &g);
  const size_t full = samples_from_model_runs({run}, devices(), "db").size();
  // A node whose (type, dims, direction) no other node has: dropping its time drops its sample.
  std::map<std::tuple<int, std::vector<int64_t>, int>, int> count;
  for (const auto& n : g.nodes) ++count[{int(n.type), n.dims, int(n.dir)}];
  std::string unique;
  for (const auto& n : g.nodes)
    if (count[{int(n.type), n.dims, int(n.dir)}] == 1 && n.name.rfind("encoder.", 0) != 0) unique = n.name;
  ASSERT_FALSE(unique.empty());
  ASSERT_GE(g.find("encoder.1.attn.q"), 0);
  for (auto& nt : run.node_times) {
    if (nt.node == unique) nt.ms = NAN;
    if (nt.node == "encoder.0.attn.q") nt.ms = 0;  // q/k/v of 3 blocks remain
    if (nt.node == "encoder.1.attn.q") nt.ms = -1;
  }
  InModelStats st;
  auto samples = samples_from_model_runs({run}, devices(), "db", &st);
  EXPECT_EQ(st.skipped_missing, 3u);
  EXPECT_EQ(samples.size(), full - 1);
  for (const auto& s : samples) EXPECT_TRUE(std::isfinite(s.ms) && s.ms > 0);
  ModelMeasurement bad = run;
  bad.status = "unstable";
  InModelStats st2;
  EXPECT_TRUE(samples_from_model_runs({bad}, devices(), "db", &st2).empty());
  EXPECT_EQ(st2.runs_not_ok, 1u);
  EXPECT_EQ(st2.runs, 0u);
}

TEST(InModelSamples, BadRunsNameTheRunAndTheNode) {
  const ModelMeasurement good = run_of(small_bert(), 2, 32, 1.0);
  const std::string key = model_key(good);
  {
    ModelMeasurement r = good;
    r.node_times.push_back({"encoder.7.attn.bogus", 0.5});
    const std::string e = error_of([&] { samples_from_model_runs({r}, devices(), "h.sqlite"); });
    EXPECT_NE(e.find("h.sqlite: model run '" + key + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("'encoder.7.attn.bogus' is not a node"), std::string::npos) << e;
  }
  {
    ModelMeasurement r = good;
    r.node_times.push_back(r.node_times.front());
    const std::string e = error_of([&] { samples_from_model_runs({r}, devices(), "h.sqlite"); });
    EXPECT_NE(e.find("lists node '" + good.node_times.front().node + "' twice"), std::string::npos) << e;
  }
  {
    ModelMeasurement r = good;
    r.device = "nosuch";
    const std::string e = error_of([&] { samples_from_model_runs({r}, devices(), "h.sqlite"); });
    EXPECT_NE(e.find("device 'nosuch' is not in the store"), std::string::npos) << e;
  }
  {
    ModelMeasurement r = good;
    r.model["family"] = "resnet";
    const std::string e = error_of([&] { samples_from_model_runs({r}, devices(), "h.sqlite"); });
    EXPECT_NE(e.find("'" + key + "'.model.family=resnet"), std::string::npos) << e;
  }
  {
    ModelMeasurement r = good;
    r.settings["batch"] = 0;
    const std::string e = error_of([&] { samples_from_model_runs({r}, devices(), "h.sqlite"); });
    EXPECT_NE(e.find("batch"), std::string::npos) << e;
    EXPECT_NE(e.find(".settings"), std::string::npos) << e;
  }
}

TEST(InModelSamples, LoadsFromAStoreAndRefusesAMissingFile) {
  const std::string path = test::fresh_store_path("in_model.sqlite");
  {
    Store s(path);
    s.put_device(device());
    s.put_model(run_of(small_bert(), 2, 32, 1.0));
    ModelMeasurement unstable = run_of(small_bert(), 4, 32, 1.0);
    unstable.status = "unstable";
    s.put_model(unstable);
  }
  std::map<std::string, DeviceRecord> devs;
  InModelStats st;
  auto samples = load_in_model_samples({path}, devs, &st);
  EXPECT_EQ(devs.count(device().key()), 1u);
  EXPECT_EQ(st.runs, 1u);  // the unstable run is not read (ok_only)
  EXPECT_EQ(samples.size(),
            samples_from_model_runs({run_of(small_bert(), 2, 32, 1.0)}, devices(), path).size());
  const std::string e = error_of([&] { load_in_model_samples({path + ".nope"}, devs); });
  EXPECT_NE(e.find("--in-model-db=" + path + ".nope: no such file"), std::string::npos) << e;
}

TEST(InModelSamples, GroupFoldsTestOnlyHeldOutRunsAndInModelTrainingHelps) {
  // Isolated rows (one shape set) at 1x; inside the model the layers take 3x. A
  // model trained on isolated rows only is ~67 % off on in-model times; with the
  // other runs' in-model samples in training it learns the factor.
  const ModelSpec m = small_bert();
  std::vector<LayerSample> samples;
  size_t in_model = 0;
  std::set<std::string> groups;
  std::vector<InModelRun> runs;
  auto iso = samples_from_model_runs({run_of(m, 1, 48, 1.0)}, devices(), "iso");
  for (auto& s : iso) s.group.clear();
  samples.insert(samples.end(), iso.begin(), iso.end());
  for (int64_t b : {1, 2, 4, 8})
    for (int64_t seq : {32, 64}) {
      runs.push_back({"runs", run_of(m, b, seq, 3.0)});
      auto in = samples_from_model_runs({runs.back().run}, devices(), "runs");
      in_model += in.size();
      for (const auto& s : in) groups.insert(s.group);
      samples.insert(samples.end(), in.begin(), in.end());
    }
  ASSERT_EQ(groups.size(), 8u);
  CvOptions o;
  o.folds = 4;
  o.methods = {"xgboost"};
  o.holdout = "model-runs";
  o.train.nthread = 1;
  o.train.min_rows = 2;
  auto all_row = [](const std::vector<CvResult>& r) {
    for (const auto& x : r)
      if (x.method == "xgboost" && x.type == "all" && x.direction == "all" && x.dtype == "all") return x;
    ADD_FAILURE() << "no all/all row";
    return CvResult{};
  };
  o.in_model_train = false;
  const CvResult iso_only = all_row(cross_validate(samples, devices(), o));
  const RunSumCv iso_sums = cross_validate_run_sums(samples, runs, devices(), o);
  o.in_model_train = true;
  const CvResult with_in = all_row(cross_validate(samples, devices(), o));
  const RunSumCv in_sums = cross_validate_run_sums(samples, runs, devices(), o);
  // Every run is held out once; T_sum of the isolated-only model is ~1/3 of the node sum.
  ASSERT_EQ(iso_sums.runs.size(), 8u);
  EXPECT_EQ(std::set<std::string>(in_sums.runs.begin(), in_sums.runs.end()), groups);
  for (size_t i = 0; i < runs.size(); ++i) {
    double sum = 0;
    for (const auto& nt : runs[i].run.node_times) sum += nt.ms;
    const auto at = std::find(in_sums.runs.begin(), in_sums.runs.end(), in_model_group("runs", runs[i].run));
    ASSERT_NE(at, in_sums.runs.end());
    EXPECT_NEAR(in_sums.node_sum_ms[at - in_sums.runs.begin()], sum, 1e-9 * sum);
    EXPECT_DOUBLE_EQ(in_sums.iter_ms[at - in_sums.runs.begin()], 10);
  }
  EXPECT_GT(iso_sums.mre_node_sum, 0.4);
  EXPECT_LT(in_sums.mre_node_sum, 0.5 * iso_sums.mre_node_sum);
  EXPECT_EQ(iso_only.n, in_model);  // test rows are the in-model samples, each once
  EXPECT_EQ(with_in.n, in_model);
  EXPECT_GT(iso_only.mre_pct, 40);
  EXPECT_LT(with_in.mre_pct, 0.5 * iso_only.mre_pct);
  // Plain k-fold over rows tests every sample.
  o.holdout = "rows";
  EXPECT_EQ(all_row(cross_validate(samples, devices(), o)).n, samples.size());
  // Bad options.
  o.holdout = "model-runs";
  o.folds = 9;
  EXPECT_NE(error_of([&] { cross_validate(samples, devices(), o); }).find("folds=9 exceeds the 8 model runs"),
            std::string::npos);
  o.folds = 4;
  o.holdout = "runs";
  EXPECT_NE(error_of([&] {
              cross_validate(samples, devices(), o);
            }).find("holdout=\"runs\" must be rows or model-runs"),
            std::string::npos);
}
