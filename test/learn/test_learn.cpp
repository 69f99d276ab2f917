// Tests of the learn stage: XGBoost wrapper, features, LayerPredictor persistence,
// bad inputs, cross-validation and the NeuSight importer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "learn/tree_forest.hpp"
#include "learn/xgb.hpp"
#include "learn_test_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/layer_features.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/learn/neusight.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace scaledl;

namespace {

using scaledl::test::temp_dir;
using scaledl::test::write_file;

/// Expects `f` to throw scaledl::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

using scaledl::test::spec_gpu;

/// Imports the NeuSight folder `root` into the store `db`, expects one error naming
/// `needle`, and checks that the store kept no layer row (the import is one transaction).
void expect_import_error(const fs::path& root, const fs::path& db, const std::string& needle) {
  Store store(db.string());
  NeusightImportOptions o;
  o.root = root.string();
  expect_error([&] { import_neusight(o, store); }, needle);
  EXPECT_TRUE(store.layers().empty());
}

/// Synthetic but physically shaped timings: launch overhead + roofline with noise.
std::vector<LayerMeasurement> synthetic_rows(const std::vector<DeviceRecord>& devs, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> tok(1, 64), dd(1, 32);
  std::normal_distribution<double> noise(0, 0.03);
  std::vector<LayerMeasurement> rows;
  for (const auto& d : devs) {
    for (int i = 0; i < n; ++i) {
      LayerMeasurement m;
      m.campaign = "t";
      m.device = d.key();
      m.source = "test";
      if (i % 2 == 0) {
        m.type = LayerType::Linear;
        m.dims = {tok(rng) * 32, dd(rng) * 64, dd(rng) * 64, 1};
      } else {
        m.type = LayerType::LayerNorm;
        m.dims = {tok(rng) * 64, dd(rng) * 64};
      }
      double f = 0.01 + roofline_ms(m.type, m.dims, m.dtype, Direction::Forward, d);
      double b = 0.012 + roofline_ms(m.type, m.dims, m.dtype, Direction::Backward, d);
      m.fwd.median_ms = f * std::exp(noise(rng));
      m.bwd.median_ms = b * std::exp(noise(rng));
      rows.push_back(m);
    }
  }
  return rows;
}

std::map<std::string, DeviceRecord> device_map(const std::vector<DeviceRecord>& v) {
  std::map<std::string, DeviceRecord> m;
  for (const auto& d : v) m[d.key()] = d;
  return m;
}

TrainOptions fast_options() {
  TrainOptions o;
  o.rounds = 40;
  o.max_depth = 6;
  o.min_rows = 4;
  o.nthread = 1;  // tiny data: OpenMP fork/join would dominate on a busy 2-core CI VM
  return o;
}

}  // namespace

// ---- XGBoost wrapper ---------------------------------------------------------

TEST(Xgb, TrainPredictSaveLoadRoundTrip) {
  // y = 3*x0 - x1 on a grid: a tree ensemble fits it closely.
  std::vector<float> x, y;
  for (int i = 0; i < 400; ++i) {
    float a = float(i % 20), b = float(i / 20);
    x.insert(x.end(), {a, b});
    y.push_back(3 * a - b);
  }
  xgb::DMatrix dm(x.data(), 400, 2, y);
  xgb::Booster b;
  b.set_params({{"max_depth", "6"}, {"eta", "0.3"}, {"objective", "reg:squarederror"}, {"nthread", "1"}});
  b.train(dm, 60);
  EXPECT_EQ(b.num_features(), 2u);
  auto p = b.predict(dm);
  double se = 0;
  for (size_t i = 0; i < y.size(); ++i) se += (p[i] - y[i]) * (p[i] - y[i]);
  EXPECT_LT(std::sqrt(se / y.size()), 1.0);
  std::vector<float> pd(400);
  b.predict_dense(x.data(), 400, 2, pd.data());
  for (size_t i = 0; i < 400; ++i) EXPECT_FLOAT_EQ(pd[i], p[i]) << "row " << i;

  fs::path dir = temp_dir("xgb");
  b.save((dir / "m.json").string());
  xgb::Booster c = xgb::Booster::load((dir / "m.json").string());
  std::vector<float> pc(400);
  c.predict_dense(x.data(), 400, 2, pc.data());
  for (size_t i = 0; i < 400; ++i) EXPECT_EQ(pc[i], pd[i]) << "row " << i;
}

TEST(Xgb, NanIsMissingAndBadInputsThrow) {
  std::vector<float> x = {1, NAN, 2, 3, NAN, 4};
  EXPECT_NO_THROW(xgb::DMatrix(x.data(), 3, 2));
  expect_error([&] { xgb::DMatrix(x.data(), 3, 2, {1.f, NAN, 2.f}); }, "label[1]");
  expect_error([&] { xgb::DMatrix(x.data(), 3, 2, {1.f}); }, "1 labels for 3 rows");
  xgb::Booster b;
  b.set_param("max_depth", "banana");
  std::vector<float> y = {1, 2, 3};
  xgb::DMatrix dm(x.data(), 3, 2, y);
  expect_error([&] { b.train(dm, 2); }, "max_depth");
  xgb::Booster fresh;
  expect_error([&] { fresh.predict_dense(x.data(), 3, 2, y.data()); }, "not trained");
  fs::path dir = temp_dir("xgbbad");
  write_file(dir / "bad.json", "{\"learner\": {\"attributes\"");
  expect_error([&] { xgb::Booster::load((dir / "bad.json").string()); }, "bad.json");
  expect_error([&] { xgb::Booster::load((dir / "missing.json").string()); }, "missing.json");
}

// ---- compiled trees (tree_forest.hpp) ----------------------------------------

/// XGBoost's own prediction vs TreeForest on the same rows: equal up to float
/// summation rounding (both add leaves in tree order in float).
void expect_forest_matches(const xgb::Booster& b, const std::vector<float>& x, size_t cols) {
  const size_t rows = x.size() / cols;
  auto f = TreeForest::compile(b.to_json_string());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->num_features(), cols);
  std::vector<float> want(rows), got(rows);
  b.predict_dense(x.data(), rows, cols, want.data());
  f->predict(x.data(), rows, got.data());
  for (size_t i = 0; i < rows; ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "row " << i;
}

TEST(TreeForest, MatchesXgboostIncludingMissingValues) {
  // Three features; y depends on all of them; 10 % of the training values are
  // NaN so that the trees learn default directions on both sides.
  std::vector<float> x, y;
  scaledl::test::three_feature_rows(3, 2000, x, y);
  std::mt19937_64 rng(4);  // the query rows below
  std::uniform_real_distribution<float> u(-2, 2);
  xgb::DMatrix dm(x.data(), 2000, 3, y);
  for (const char* depth : {"1", "3", "8"}) {
    xgb::Booster b;
    b.set_params({{"max_depth", depth},
                  {"eta", "0.3"},
                  {"objective", "reg:squarederror"},
                  {"nthread", "1"},
                  {"subsample", "0.8"}});
    b.train(dm, 30);
    // 1,003 rows (not a multiple of the 8-row lanes or 64-row blocks), with NaNs.
    std::vector<float> q;
    for (int i = 0; i < 1003; ++i) q.insert(q.end(), {u(rng), i % 5 == 0 ? NAN : u(rng), u(rng)});
    expect_forest_matches(b, q, 3);
    expect_forest_matches(b, x, 3);
    auto f = TreeForest::compile(b.to_json_string());
    EXPECT_EQ(f->num_trees(), 30u);
    EXPECT_LE(f->depth(), std::atoi(depth));
  }
  // A random forest (several parallel trees in one round) is a sum of trees too.
  xgb::Booster rf;
  rf.set_params({{"num_parallel_tree", "10"},
                 {"subsample", "0.632"},
                 {"colsample_bynode", "0.6"},
                 {"eta", "1"},
                 {"max_depth", "6"},
                 {"objective", "reg:squarederror"},
                 {"nthread", "1"}});
  rf.train(dm, 1);
  expect_forest_matches(rf, x, 3);
}

TEST(TreeForest, RefusesWhatItDoesNotCover) {
  std::string why;
  EXPECT_FALSE(TreeForest::compile("{\"learner\": {\"attributes\"", &why));
  EXPECT_NE(why.find("not XGBoost JSON"), std::string::npos) << why;
  std::vector<float> x = {0, 1, 1, 0, 2, 2, 3, 1}, y = {0, 1, 0, 1};
  xgb::DMatrix dm(x.data(), 4, 2, y);
  xgb::Booster b;
  b.set_params({{"objective", "binary:logistic"}, {"nthread", "1"}});
  b.train(dm, 2);
  EXPECT_FALSE(TreeForest::compile(b.to_json_string(), &why));
  EXPECT_NE(why.find("binary:logistic"), std::string::npos) << why;
  // A regression model whose first tree is a chain 13 splits deep (hand-edited JSON).
  xgb::Booster r;
  r.set_params({{"objective", "reg:squarederror"}, {"nthread", "1"}});
  r.train(dm, 1);
  auto j = nlohmann::json::parse(r.to_json_string());
  ASSERT_TRUE(TreeForest::compile(j.dump()).has_value());
  auto& t = j["learner"]["gradient_booster"]["model"]["trees"][0];
  const int splits = TreeForest::kMaxDepth + 1, nodes = 2 * splits + 1;
  std::vector<int> left(nodes, -1), right(nodes, -1), zero(nodes, 0);
  std::vector<float> cond(nodes, 0.5f);
  for (int k = 0; k < splits; ++k) {
    left[2 * k] = 2 * k + 1;
    right[2 * k] = 2 * k + 2;
  }
  t["left_children"] = left;
  t["right_children"] = right;
  t["split_indices"] = zero;
  t["default_left"] = zero;
  t["split_type"] = zero;
  t["split_conditions"] = cond;
  EXPECT_FALSE(TreeForest::compile(j.dump(), &why));
  EXPECT_NE(why.find("deeper than"), std::string::npos) << why;
  t["split_indices"][0] = 5;
  EXPECT_FALSE(TreeForest::compile(j.dump(), &why));
  EXPECT_NE(why.find("feature out of range"), std::string::npos) << why;
}

// ---- features ----------------------------------------------------------------

TEST(Features, NamesMatchValuesAndRoofline) {
  DeviceRecord d = spec_gpu("G", 10000, 1000);
  std::vector<int64_t> dims = {128, 768, 3072, 1};
  FeatureOptions fo;
  auto names = feature_names(LayerType::Linear, fo);
  ASSERT_EQ(names.size(), feature_count(LayerType::Linear, fo));
  std::vector<float> x(names.size());
  layer_features(LayerType::Linear, dims, DType::FP32, Direction::Forward, d, fo, x.data());
  auto at = [&](const std::string& n) {
    auto it = std::find(names.begin(), names.end(), n);
    EXPECT_NE(it, names.end()) << n;
    return x[it - names.begin()];
  };
  EXPECT_EQ(at("dim_tokens"), 128);
  EXPECT_EQ(at("dim_d_out"), 3072);
  EXPECT_EQ(at("dtype_bytes"), 4);
  EXPECT_EQ(at("dev_gflops"), 10000);
  LayerCost c = layer_cost(LayerType::Linear, dims, DType::FP32);
  EXPECT_FLOAT_EQ(at("flops"), float(c.flops_fwd));
  EXPECT_FLOAT_EQ(at("ct_ms"), float(c.flops_fwd / 1e10));
  EXPECT_FLOAT_EQ(at("roofline_ms"),
                  float(roofline_ms(LayerType::Linear, dims, DType::FP32, Direction::Forward, d)));
  // Backward uses flops_bwd.
  layer_features(LayerType::Linear, dims, DType::FP32, Direction::Backward, d, fo, x.data());
  EXPECT_FLOAT_EQ(at("flops"), float(c.flops_bwd));
  EXPECT_EQ(at("direction"), 1);
  // Without roofline columns there are 4 fewer.
  EXPECT_EQ(feature_count(LayerType::Linear, {false}) + 4, names.size());
}

TEST(Features, BadInputsThrow) {
  DeviceRecord d = spec_gpu("G", 10000, 1000);
  std::vector<float> x(64);
  expect_error(
      [&] {
        layer_features(LayerType::Linear, {128, 768}, DType::FP32, Direction::Forward, d, {}, x.data());
      },
      "linear: expected 4 dims");
  expect_error(
      [&] {
        layer_features(LayerType::Linear, {128, 0, 4, 1}, DType::FP32, Direction::Forward, d, {}, x.data());
      },
      "linear.d_in=0");
  expect_error(
      [&] {
        layer_features(LayerType::Linear, {1, 2, 3, 1}, DType::FP32, Direction::Update, d, {}, x.data());
      },
      "direction=update");
  expect_error(
      [&] {
        layer_features(LayerType::Pointwise, {16, 2}, DType::FP32, Direction::Forward, d, {}, x.data());
      },
      "pointwise.saves=2 must be 0 or 1");
  DeviceRecord none;
  none.name = "empty";
  expect_error(
      [&] { layer_features(LayerType::Add, {16}, DType::FP32, Direction::Forward, none, {}, x.data()); },
      "no compute rate");
}

// ---- predictor ---------------------------------------------------------------

TEST(LayerPredictor, TrainSaveLoadGivesIdenticalPredictions) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300), spec_gpu("B", 15000, 900)};
  auto devices = device_map(devs);
  auto rows = synthetic_rows(devs, 100, 7);
  LayerPredictor p = LayerPredictor::train(rows, devices, fast_options());
  EXPECT_TRUE(p.has_model(LayerType::Linear, Direction::Forward));
  EXPECT_TRUE(p.has_model(LayerType::LayerNorm, Direction::Backward));
  EXPECT_FALSE(p.has_model(LayerType::GELU, Direction::Forward));

  fs::path dir = temp_dir("pred");
  p.save(dir.string());
  LayerPredictor q = LayerPredictor::load(dir.string());
  for (const auto& m : rows) {
    for (Direction dir_ : {Direction::Forward, Direction::Backward}) {
      double a = p.predict_ms(m.type, m.dims, m.dtype, dir_, devs[0]);
      double b = q.predict_ms(m.type, m.dims, m.dtype, dir_, devs[0]);
      ASSERT_EQ(a, b) << layer_key(m.type, m.dims, m.dtype);
      ASSERT_GT(a, 0);
    }
  }
  // Fit quality on the training distribution (log-space model of a smooth law).
  double re = 0;
  for (const auto& m : rows)
    re += std::abs(p.predict_ms(m.type, m.dims, m.dtype, Direction::Forward, devices.at(m.device)) -
                   m.fwd.median_ms) /
          m.fwd.median_ms;
  EXPECT_LT(re / rows.size(), 0.10);
}

TEST(LayerPredictor, FallbackIsRooflineAndFlagged) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  LayerPredictor p = LayerPredictor::train(synthetic_rows(devs, 40, 1), device_map(devs), fast_options());
  LayerPrediction r = p.predict(LayerType::GELU, {1 << 20}, DType::FP32, Direction::Forward, devs[0]);
  EXPECT_TRUE(r.fallback);
  EXPECT_DOUBLE_EQ(r.ms, roofline_ms(LayerType::GELU, {1 << 20}, DType::FP32, Direction::Forward, devs[0]));
  EXPECT_GT(r.ms, 0);
  EXPECT_FALSE(
      p.predict(LayerType::Linear, {64, 64, 64, 1}, DType::FP32, Direction::Forward, devs[0]).fallback);
  // Optimizer update without optimizer rows: roofline of the update traffic.
  LayerPrediction u = p.predict(LayerType::Optimizer, {1000000, 2}, DType::FP32, Direction::Update, devs[0]);
  EXPECT_TRUE(u.fallback);
  EXPECT_GT(u.ms, 0);
}

TEST(LayerPredictor, OptimizerRowsServeUpdateDirection) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  std::vector<LayerMeasurement> rows;
  for (int i = 1; i <= 30; ++i) {
    LayerMeasurement m;
    m.type = LayerType::Optimizer;
    m.dims = {int64_t(i) * 100000, 2};
    m.device = devs[0].key();
    m.fwd.median_ms = 0.02 * i;
    rows.push_back(m);
  }
  auto s = samples_from_measurements(rows, device_map(devs));
  ASSERT_EQ(s.size(), rows.size());
  EXPECT_EQ(s[0].dir, Direction::Update);
  LayerPredictor p = LayerPredictor::train(rows, device_map(devs), fast_options());
  EXPECT_TRUE(p.has_model(LayerType::Optimizer, Direction::Update));
  double ms = p.predict_ms(LayerType::Optimizer, {1500000, 2}, DType::FP32, Direction::Update, devs[0]);
  EXPECT_NEAR(ms, 0.3, 0.1);
}

TEST(LayerPredictor, BadTrainingRowsThrow) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  auto devices = device_map(devs);
  auto base = synthetic_rows(devs, 10, 3);
  struct Case {
    const char* what;
    std::function<void(LayerMeasurement&)> edit;
    const char* needle;
  };
  std::vector<Case> cases = {
      {"NaN both",
       [](LayerMeasurement& m) {
         m.fwd.median_ms = NAN;
         m.bwd.median_ms = NAN;
       },
       "neither fwd_median_ms"},
      {"negative", [](LayerMeasurement& m) { m.fwd.median_ms = -1; }, "fwd_median_ms=-1"},
      {"zero bwd", [](LayerMeasurement& m) { m.bwd.median_ms = 0; }, "bwd_median_ms=0"},
      {"infinite", [](LayerMeasurement& m) { m.fwd.median_ms = INFINITY; }, "fwd_median_ms=inf"},
      {"unknown device", [](LayerMeasurement& m) { m.device = "cuda:Nope"; },
       "device=\"cuda:Nope\" is unknown"},
      {"missing dim", [](LayerMeasurement& m) { m.dims.pop_back(); }, "expected"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto rows = base;
    c.edit(rows[0]);
    expect_error([&] { LayerPredictor::train(rows, devices, fast_options()); }, c.needle);
  }
  TrainOptions bad = fast_options();
  bad.target = "sqrt";
  expect_error([&] { LayerPredictor::train(base, devices, bad); }, "target=\"sqrt\"");
  expect_error([] { parse_layer_type("conv3d"); }, "\"conv3d\" is not a layer type");
}

TEST(LayerPredictor, CorruptOrMissingModelFilesThrow) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  LayerPredictor p = LayerPredictor::train(synthetic_rows(devs, 40, 2), device_map(devs), fast_options());
  fs::path dir = temp_dir("corrupt");
  p.save(dir.string());
  ASSERT_TRUE(fs::exists(dir / "linear.json"));
  EXPECT_NO_THROW(LayerPredictor::load(dir.string()));

  // Truncated model file.
  fs::path lin = dir / "linear.json";
  std::string text;
  {
    std::ifstream f(lin);
    text.assign(std::istreambuf_iterator<char>(f), {});
  }
  write_file(lin, text.substr(0, text.size() / 2));
  expect_error([&] { LayerPredictor::load(dir.string()); }, "linear.json");
  // Same size, garbage content.
  write_file(lin, std::string(text.size(), 'x'));
  expect_error([&] { LayerPredictor::load(dir.string()); }, "linear.json");
  // Same size, valid JSON, one number changed (the issue's base_score 5E-1 -> 5E+1):
  // only the checksum can tell.
  {
    std::string edited = text;
    const size_t at = edited.find("\"base_score\":\"");
    ASSERT_NE(at, std::string::npos);
    const size_t v = at + 14;
    edited[v] = edited[v] == '9' ? '8' : static_cast<char>(edited[v] + 1);
    write_file(lin, edited);
    expect_error([&] { LayerPredictor::load(dir.string()); }, "SHA-256 differs");
    write_file(lin, text);
    EXPECT_NO_THROW(LayerPredictor::load(dir.string()));
  }
  // An edited manifest (floor_ms of one model doubled).
  {
    std::string man;
    {
      std::ifstream f(dir / "manifest.json");
      man.assign(std::istreambuf_iterator<char>(f), {});
    }
    auto j = nlohmann::json::parse(man);
    j["models"]["linear"]["floor_ms"] = j["models"]["linear"]["floor_ms"].get<double>() * 2 + 1;
    write_file(dir / "manifest.json", j.dump(2));
    expect_error([&] { LayerPredictor::load(dir.string()); }, "manifest_sha256 does not match");
    write_file(dir / "manifest.json", man);
  }
  // Missing model file.
  fs::remove(lin);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "linear.json: model file is missing");
  // Corrupt manifest.
  write_file(dir / "manifest.json", "{\"format\": ");
  expect_error([&] { LayerPredictor::load(dir.string()); }, "manifest.json");
  expect_error([&] { LayerPredictor::load((dir / "nowhere").string()); }, "no manifest.json");
}

TEST(LayerPredictor, SplitDirectionAndTargetsTrain) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  auto rows = synthetic_rows(devs, 60, 5);
  for (const char* target : {"log", "raw", "log_roofline", "log_roofline_floor"}) {
    TrainOptions o = fast_options();
    o.target = target;
    o.split_direction = std::string(target) == "log";
    LayerPredictor p = LayerPredictor::train(rows, device_map(devs), o);
    double ms =
        p.predict_ms(LayerType::Linear, {512, 512, 512, 1}, DType::FP32, Direction::Backward, devs[0]);
    EXPECT_GT(ms, 0) << target;
    EXPECT_EQ(p.summary()["models"].size(), o.split_direction ? 4u : 2u) << target;
    // The floor (fastest training time) travels in the manifest.
    fs::path dir = temp_dir(std::string("target_") + target);
    p.save(dir.string());
    LayerPredictor q = LayerPredictor::load(dir.string());
    EXPECT_EQ(q.predict_ms(LayerType::Linear, {512, 512, 512, 1}, DType::FP32, Direction::Backward, devs[0]),
              ms)
        << target;
  }
  TrainOptions bad = fast_options();
  bad.target = "sqrt";
  expect_error([&] { LayerPredictor::train(rows, device_map(devs), bad); }, "target=\"sqrt\"");
}

TEST(LayerPredictor, SplitByDirectionAKindTimedOneWayIsCarriedOverNotRoofline) {
  // The layer norms are timed forward only (as NeuSight's and KernelBench's rows are): split by
  // direction there is no layernorm.bwd model, and the forward model serves the backward, carried
  // over as the single model of both directions would (trained_on: false, so predict reports it as
  // extrapolated), not the roofline fallback.
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  auto rows = synthetic_rows(devs, 60, 5);
  for (auto& r : rows)
    if (r.type == LayerType::LayerNorm) r.bwd = {};
  TrainOptions o = fast_options();
  o.split_direction = true;
  const LayerPredictor p = LayerPredictor::train(rows, device_map(devs), o);
  EXPECT_EQ(p.summary()["models"].size(), 3u);  // linear.fwd, linear.bwd, layernorm.fwd
  const std::vector<int64_t> ln = {2048, 1024};
  EXPECT_TRUE(p.has_model(LayerType::LayerNorm, Direction::Backward));
  EXPECT_EQ(p.trained_on(LayerType::LayerNorm, Direction::Backward, DType::FP32), std::optional<bool>(false));
  EXPECT_EQ(p.trained_on(LayerType::LayerNorm, Direction::Forward, DType::FP32), std::optional<bool>(true));
  std::vector<double> ms(1);
  const bool fallback = p.predict_batch(LayerType::LayerNorm, ln.data(), 1, DType::FP32, Direction::Backward,
                                        devs[0], ms.data());
  EXPECT_FALSE(fallback);
  // the forward rows' 10 us floor comes with it: above the backward's bare roofline
  EXPECT_GT(ms[0], roofline_ms(LayerType::LayerNorm, ln, DType::FP32, Direction::Backward, devs[0]) + 0.005);
}

TEST(LayerPredictor, PredictBatchMatchesSingle) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  LayerPredictor p = LayerPredictor::train(synthetic_rows(devs, 60, 9), device_map(devs), fast_options());
  std::vector<int64_t> dims = {64, 128, 256, 1, 256, 512, 1024, 0, 2048, 64, 64, 1};
  std::vector<double> out(3);
  EXPECT_FALSE(p.predict_batch(LayerType::Linear, dims.data(), 3, DType::FP32, Direction::Forward, devs[0],
                               out.data()));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(out[i], p.predict_ms(LayerType::Linear, {dims.begin() + 4 * i, dims.begin() + 4 * i + 4},
                                   DType::FP32, Direction::Forward, devs[0]));
  dims[1] = -5;
  expect_error(
      [&] {
        p.predict_batch(LayerType::Linear, dims.data(), 3, DType::FP32, Direction::Forward, devs[0],
                        out.data());
      },
      "linear.d_in=-5");
}

/// `n` linear configs (tokens, d_in, d_out, bias) of aligned random sizes, flattened.
static std::vector<int64_t> random_linear_dims(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> d(1, 64);
  std::vector<int64_t> dims;
  for (size_t i = 0; i < n; ++i)
    dims.insert(dims.end(), {d(rng) * 16, d(rng) * 32, d(rng) * 32, int64_t(i % 2)});
  return dims;
}

TEST(LayerPredictor, CompiledTreesMatchXgboostOnLargeBatches) {
  // Above 16,384 rows predict_batch splits the rows over threads.
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300), spec_gpu("B", 15000, 900)};
  LayerPredictor p = LayerPredictor::train(synthetic_rows(devs, 80, 4), device_map(devs), fast_options());
  EXPECT_EQ(p.summary()["models"]["linear"]["predictor"], "compiled trees");
  const size_t n = 20000;
  std::vector<int64_t> dims = random_linear_dims(n, 2);
  for (Direction dir : {Direction::Forward, Direction::Backward}) {
    std::vector<double> fast(n), ref(n);
    p.predict_batch(LayerType::Linear, dims.data(), n, DType::FP32, dir, devs[1], fast.data());
    p.set_compiled_trees(false);
    p.predict_batch(LayerType::Linear, dims.data(), n, DType::FP32, dir, devs[1], ref.data());
    p.set_compiled_trees(true);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(fast[i], ref[i], 1e-4 * ref[i]) << "row " << i;
  }
  // A bad row deep inside a threaded batch is still one clear error.
  dims[4 * 15000 + 2] = 0;
  std::vector<double> out(n);
  expect_error(
      [&] {
        p.predict_batch(LayerType::Linear, dims.data(), n, DType::FP32, Direction::Forward, devs[0],
                        out.data());
      },
      "linear.d_out=0");
}

TEST(LayerPredictor, LoadedModelsPredictAsTrainedWithOneParseOfEachFile) {
  // load() compiles the trees from the file's own document and loads XGBoost only when
  // something needs it (its predictor, save()): the same predictions either way, and a
  // loaded bundle saves back byte for byte.
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300), spec_gpu("B", 15000, 900)};
  LayerPredictor p = LayerPredictor::train(synthetic_rows(devs, 80, 4), device_map(devs), fast_options());
  const fs::path dir = temp_dir("load_once"), again = temp_dir("load_once_again");
  p.save(dir.string());
  LayerPredictor q = LayerPredictor::load(dir.string());
  EXPECT_EQ(q.summary()["models"]["linear"]["predictor"], "compiled trees");
  const size_t n = 3000;
  std::vector<int64_t> dims = random_linear_dims(n, 5);
  for (Direction dir_ : {Direction::Forward, Direction::Backward}) {
    std::vector<double> trained(n), loaded(n), xgboost(n);
    p.predict_batch(LayerType::Linear, dims.data(), n, DType::FP32, dir_, devs[1], trained.data());
    q.predict_batch(LayerType::Linear, dims.data(), n, DType::FP32, dir_, devs[1], loaded.data());
    q.set_compiled_trees(false);  // XGBoost's predictor: the booster is loaded now
    q.predict_batch(LayerType::Linear, dims.data(), n, DType::FP32, dir_, devs[1], xgboost.data());
    q.set_compiled_trees(true);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(loaded[i], trained[i]) << "row " << i;
      ASSERT_NEAR(xgboost[i], trained[i], 1e-4 * trained[i]) << "row " << i;
    }
  }
  q.save(again.string());
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(scaledl::read_text_file(e.path().string()),
              scaledl::read_text_file((again / e.path().filename()).string()))
        << e.path().filename();
}

// ---- cross-validation ----------------------------------------------------------

TEST(CrossValidate, AllMethodsReportFiniteErrors) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300), spec_gpu("B", 15000, 900),
                                    spec_gpu("C", 20000, 1500)};
  auto devices = device_map(devs);
  auto samples = samples_from_measurements(synthetic_rows(devs, 40, 11), devices);
  CvOptions o;
  o.folds = 3;
  o.train = fast_options();
  o.mlp_epochs = 5;
  auto r = cross_validate(samples, devices, o);
  std::set<std::string> methods;
  for (const auto& x : r) {
    methods.insert(x.method);
    EXPECT_TRUE(std::isfinite(x.rmse_ms) && std::isfinite(x.mre_pct)) << x.method << " " << x.type;
    if (x.type == "all" && x.direction == "all" && x.dtype == "all")
      EXPECT_EQ(x.n, samples.size()) << x.method;
  }
  // The synthetic rows have fwd and bwd timings: per-direction rows split the samples.
  for (const auto& x : r)
    if (x.method == "xgboost" && x.type == "all" && x.direction != "all") EXPECT_EQ(x.n, samples.size() / 2);
  EXPECT_EQ(methods, (std::set<std::string>{"xgboost", "linear", "forest", "mlp"}));
  // XGBoost beats the roofline-shaped noise floor easily on this smooth law.
  for (const auto& x : r)
    if (x.method == "xgboost" && x.type == "all" && x.direction == "all" && x.dtype == "all")
      EXPECT_LT(x.mre_pct, 25.0);

  o.leave_one_device = true;
  o.methods = {"xgboost", "linear"};
  auto l = cross_validate(samples, devices, o);
  size_t per_dev = 0;
  for (const auto& x : l)
    if (x.type == "all" && x.direction == "all" && x.dtype == "all" && x.device != "all") ++per_dev;
  EXPECT_EQ(per_dev, 2 * devs.size());
  o.methods = {"svm"};
  expect_error([&] { cross_validate(samples, devices, o); }, "method=\"svm\"");
}

// ---- NeuSight importer ---------------------------------------------------------

TEST(Neusight, CsvParserHandlesQuotes) {
  auto r = parse_csv("a,b,c\r\n\"x, y\",\"he said \"\"hi\"\"\",3\n\n\"multi\nline\",2,\n", "t.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1][0], "x, y");
  EXPECT_EQ(r[1][1], "he said \"hi\"");
  EXPECT_EQ(r[2][0], "multi\nline");
  EXPECT_EQ(r[2][2], "");
  expect_error([] { parse_csv("a,b\n\"open,2\n", "t.csv"); }, "t.csv:2: unterminated");
}

TEST(TrainingData, LayerMaxCvAddsTheUnstableRowsWithinIt) {
  // datasets/cpu-zen4: 514 ok layer rows and 286 unstable ones (CV > 0.10), 252 of
  // them with forward and backward CV <= 0.3.
  const std::string db = std::string(SCALEDL_SOURCE_DIR) + "/datasets/cpu-zen4/cpu-zen4.sqlite";
  auto count = [&](double cv) {
    size_t ok = 0, unstable = 0;
    for (const auto& r : load_training_data({db}, {}, cv).rows) (r.status == "ok" ? ok : unstable) += 1;
    return std::make_pair(ok, unstable);
  };
  EXPECT_EQ(count(0), std::make_pair(size_t{514}, size_t{0}));
  EXPECT_EQ(count(0.3), std::make_pair(size_t{514}, size_t{252}));
  EXPECT_EQ(count(10), std::make_pair(size_t{514}, size_t{286}));
  for (const auto& r : load_training_data({db}, {}, 0.3).rows)
    if (r.status != "ok") EXPECT_LE(r.fwd.cv, 0.3);
  expect_error([&] { load_training_data({db}, {}, -1); }, "--layer-max-cv=-1 must be in [0, 10]");
  expect_error([&] { load_training_data({db}, {}, NAN); }, "--layer-max-cv=nan");
}

TEST(Neusight, ImportsCommittedSubset) {
  const fs::path root = fs::path(SCALEDL_SOURCE_DIR) / "datasets" / "neusight";
  ASSERT_TRUE(fs::exists(root / "LICENSE"));
  fs::path dir = temp_dir("import");
  Store store((dir / "r.sqlite").string());
  NeusightImportOptions o;
  o.root = root.string();
  auto s = import_neusight(o, store);
  EXPECT_GT(s.mapped, 1000u);
  EXPECT_GT(s.inserted, 1000u);
  EXPECT_EQ(s.devices, 9u);
  for (const char* t : {"linear", "bmm", "layernorm", "softmax", "add", "mul", "relu", "gelu", "pointwise"})
    EXPECT_GT(s.per_type[t], 0u) << t;
  for (const char* op : {"div", "pow"}) EXPECT_GT(s.skipped[op], 0u) << op;
  for (const char* op : {"tanh", "addu", "mulu", "divu", "powu"}) EXPECT_EQ(s.skipped.count(op), 0u) << op;
  // Idempotent: a second import inserts nothing.
  auto s2 = import_neusight(o, store);
  EXPECT_EQ(s2.inserted, 0u);
  auto rows = store.layers(LayerType::Linear);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].source, "neusight");
  EXPECT_TRUE(std::isnan(rows[0].bwd.median_ms));
  EXPECT_EQ(rows[0].dims[3], 1);
  // And the rows train a predictor whose linear model is not a fallback.
  auto data = load_training_data({(dir / "r.sqlite").string()});
  TrainOptions to = fast_options();
  LayerPredictor p = LayerPredictor::train(data.rows, data.devices, to);
  EXPECT_TRUE(p.has_model(LayerType::BMM, Direction::Forward));
  EXPECT_TRUE(p.has_model(LayerType::Pointwise, Direction::Forward));
  // tanh and powu (saves = 1) and addu / mulu / divu (saves = 0) are both rows of it.
  auto pw = store.layers(LayerType::Pointwise);
  EXPECT_TRUE(std::any_of(pw.begin(), pw.end(), [](const auto& m) { return m.dims[1] == 1; }));
  EXPECT_TRUE(std::any_of(pw.begin(), pw.end(), [](const auto& m) { return m.dims[1] == 0; }));
  DeviceRecord h100 = load_device_spec((root / "device_configs" / "NVIDIA_H100_80GB_HBM3.json").string());
  EXPECT_GT(p.predict_ms(LayerType::Linear, {4096, 4096, 4096, 1}, DType::FP32, Direction::Forward, h100), 0);
  // No layer runs faster than its FLOP at the spec peak of its dtype, however far the trees extrapolate
  // (before the bound, the default bundle put OPT-1.3B's linears at 8 x 2,048 tokens on the H200 sheet
  // at 1.2x the FP32 peak).
  for (int64_t tokens : {int64_t(1) << 14, int64_t(1) << 18, int64_t(1) << 22}) {
    const std::vector<int64_t> d = {tokens, 8192, 8192, 1};
    const double flops = layer_cost(LayerType::Linear, d, DType::FP32).flops_fwd;
    EXPECT_GE(p.predict_ms(LayerType::Linear, d, DType::FP32, Direction::Forward, h100),
              flops / (h100.peak_fp32_gflops * 1e6) * (1 - 1e-12))
        << tokens;
  }
}

TEST(LayerFeatures, PeakFloorIsTheFlopAtTheSpecPeakOfTheDtype) {
  const DeviceRecord d = DeviceRecord::from_json({{"name", "g"},
                                                  {"kind", "spec"},
                                                  {"peak_fp32_gflops", 1000},
                                                  {"peak_bf16_gflops", 8000},
                                                  {"peak_mem_bw_gbs", 100}});
  const std::vector<int64_t> dims = {1024, 1024, 1024, 1};
  FeatureWriter fp32(LayerType::Linear, DType::FP32, Direction::Forward, d, FeatureOptions{});
  fp32.write(dims.data(), nullptr);
  const double flops = layer_cost(LayerType::Linear, dims, DType::FP32).flops_fwd;
  EXPECT_DOUBLE_EQ(fp32.peak_floor_ms(), flops / (1000 * 1e6));
  FeatureWriter bf16(LayerType::Linear, DType::BF16, Direction::Forward, d, FeatureOptions{});
  bf16.write(dims.data(), nullptr);
  EXPECT_DOUBLE_EQ(bf16.peak_floor_ms(), flops / (8000 * 1e6));
  // a CPU probe: measured rates only, no peak, no bound
  const DeviceRecord cpu = DeviceRecord::from_json(
      {{"name", "c"}, {"kind", "cpu"}, {"measured_gflops", 100}, {"measured_bw_gbs", 20}});
  FeatureWriter c(LayerType::Linear, DType::FP32, Direction::Forward, cpu, FeatureOptions{});
  c.write(dims.data(), nullptr);
  EXPECT_EQ(c.peak_floor_ms(), 0);
}

TEST(Neusight, MalformedRowsNameFileAndLine) {
  fs::path root = temp_dir("nsbad");
  write_file(
      root / "device_configs" / "g.json",
      R"({"Device":"Tesla T4","Dev_Mem":15,"Mem_Bw":320,"Num_Sm":40,"Core_Per_SM":64,"Freq":1590,"SingleFLOPs":8141,"L2Cache":4})");
  const std::string hdr = "OPName,Latency,Device,B,H\n";
  struct Case {
    std::string body, needle;
  };
  std::vector<Case> cases = {
      {"ln,abc,Tesla T4,4,8\n", "t.csv:2: Latency=\"abc\" is not a number"},
      {"ln,0.1,Tesla T4,4,8\nln,-0.5,Tesla T4,4,8\n", "t.csv:3: Latency=-0.5 must be > 0"},
      {"ln,0.1,Tesla X9,4,8\n", "t.csv:2: Device=\"Tesla X9\""},
      {"ln,0.1,Tesla T4,4\n", "t.csv:2: 4 fields, header has 5"},
      {"ln,0.1,Tesla T4,0,8\n", "t.csv:2: B=0 must be a positive integer"},
      {"linear,0.1,Tesla T4,4,8\n", "t.csv:2: op linear needs column M"},
      {"ln,0.1,\"Tesla T4,4,8\n", "unterminated quoted field"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    write_file(root / "ops" / "ln" / "t.csv", hdr + c.body);
    expect_import_error(root, root / "r.sqlite", c.needle);
  }
}

TEST(Neusight, DeviceFactsGiveTheComputeCapabilityAndASourcedSustainedClock) {
  fs::path root = temp_dir("nsfacts");
  write_file(
      root / "device_configs" / "g.json",
      R"({"Device":"Tesla T4","Dev_Mem":15,"Mem_Bw":320,"Num_Sm":40,"Core_Per_SM":64,"Freq":1590,"SingleFLOPs":8141,"L2Cache":4})");
  write_file(root / "ops" / "ln" / "t.csv", "OPName,Latency,Device,B,H\nln,0.1,Tesla T4,4,8\n");
  const std::string t4 = R"("Tesla T4": {"compute_capability": "7.5", "sustained_clock_mhz": 900, )"
                         R"("sustained_clock_source": "a report"})";
  write_file(root / "device_facts.json", R"({"about": "ours", "devices": {)" + t4 + "}}");
  {
    Store store((root / "r.sqlite").string());
    NeusightImportOptions o;
    o.root = root.string();
    EXPECT_EQ(import_neusight(o, store).inserted, 1u);
    const auto devs = store.devices();
    ASSERT_EQ(devs.size(), 1u);
    EXPECT_DOUBLE_EQ(devs[0].sustained_clock_mhz, 900);
    EXPECT_EQ(devs[0].extra.at("sustained_clock"), "a report");
    EXPECT_DOUBLE_EQ(devs[0].compute_gflops(),
                     8141.0 * 900 / 1590);  // the roofline runs at the sustained clock
    EXPECT_DOUBLE_EQ(devs[0].compute_capability(), 7.5);
    EXPECT_EQ(pre_volta(devs[0]), 0);
  }
  // Without the file the spec sheet is imported as it is.
  fs::remove(root / "device_facts.json");
  {
    Store store((root / "plain.sqlite").string());
    NeusightImportOptions o;
    o.root = root.string();
    import_neusight(o, store);
    EXPECT_EQ(store.devices()[0].sustained_clock_mhz, 0);
    EXPECT_EQ(store.devices()[0].compute_capability(), 0);
  }
  struct Case {
    std::string facts, needle;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"devices": {"Tesla X9": {"compute_capability": "7.5"}}})",
            "devices.\"Tesla X9\" has no device_configs/*.json entry"},
           {R"({"devices": {"Tesla T4": {"tdp_w": 70}}})", "devices.\"Tesla T4\".tdp_w is not a device fact"},
           {R"({"devices": {"Tesla T4": {"sustained_clock_mhz": 2000, "sustained_clock_source": "x"}}})",
            "sustained_clock_mhz=2000 must be at most the spec sheet's boost clock (1590 MHz)"},
           {R"({"devices": {"Tesla T4": {"sustained_clock_mhz": 900}}})",
            "sustained_clock_source is missing: say where the clock comes from"},
           {R"({"devices": {"Tesla T4": {"sustained_clock_mhz": -1, "sustained_clock_source": "x"}}})",
            "sustained_clock_mhz"},
           {R"({"devices": {"Tesla T4": {"compute_capability": "7"}}})",
            "compute_capability=\"7\" is not MAJOR.MINOR"},
           {R"({"devices": {"Tesla T4": {"compute_capability": 7.5}}})", "compute_capability"},
           {R"({"gpus": {}})", "expected {\"devices\""},
           {R"({"devices": {}, "note": "x"})", ".note is not a key of device facts"},
           {R"({"devices": )", "device_facts.json"}}) {
    SCOPED_TRACE(c.facts);
    write_file(root / "device_facts.json", c.facts);
    expect_import_error(root, root / "bad.sqlite", c.needle);
    Store store((root / "bad.sqlite").string());
    EXPECT_TRUE(store.devices().empty());  // nothing imported
  }
  scaledl::remove_tree(root);
}

TEST(Neusight, OurDtypeAndBackwardColumnsImportAndBadCellsNameFileAndLine) {
  // scripts/gpu/neusight_ops_bench.py --dtype bf16 --backward writes DType and BwdLatency beside the
  // artifact's columns.
  fs::path root = temp_dir("nsdtype");
  write_file(
      root / "device_configs" / "g.json",
      R"({"Device":"Tesla T4","Dev_Mem":15,"Mem_Bw":320,"Num_Sm":40,"Core_Per_SM":64,"Freq":1590,"SingleFLOPs":8141,"L2Cache":4})");
  const std::string hdr = "OPName,Latency,Device,B,H,DType,BwdLatency,CV,Set\n";
  write_file(
      root / "ops" / "ln" / "t.csv",
      hdr + "ln,0.1,Tesla T4,4,8,bf16,0.25,0.01,transformer\nln,0.2,Tesla T4,4,16,fp32,,0.02,Tesla_T4\n");
  {
    Store store((root / "r.sqlite").string());
    NeusightImportOptions o;
    o.root = root.string();
    EXPECT_EQ(import_neusight(o, store).inserted, 2u);
    auto rows = store.layers(LayerType::LayerNorm);
    ASSERT_EQ(rows.size(), 2u);
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.dims[1] < b.dims[1]; });
    EXPECT_EQ(rows[0].dtype, DType::BF16);
    EXPECT_DOUBLE_EQ(rows[0].bwd.median_ms, 0.25);
    EXPECT_EQ(rows[1].dtype, DType::FP32);
    EXPECT_TRUE(std::isnan(rows[1].bwd.median_ms));  // empty cell: not measured
  }
  struct Case {
    std::string body, needle;
  };
  for (const Case& c :
       std::vector<Case>{{"ln,0.1,Tesla T4,4,8,fp9,0.2,0,x\n", "t.csv:2: DType=\"fp9\" is not a dtype"},
                         {"ln,0.1,Tesla T4,4,8,bf16,-1,0,x\n", "t.csv:2: BwdLatency=-1 must be > 0"},
                         {"ln,0.1,Tesla T4,4,8,bf16,slow,0,x\n", "t.csv:2: BwdLatency=\"slow\""}}) {
    SCOPED_TRACE(c.body);
    write_file(root / "ops" / "ln" / "t.csv", hdr + c.body);
    expect_import_error(root, root / "bad.sqlite", c.needle);
  }
  scaledl::remove_tree(root);
}

TEST(Features, TransferColumnsAreTilesWavesAndDeviceRelative) {
  DeviceRecord d = spec_gpu("G", 10000, 1000);
  d.cores = 80;
  d.l2_mb = 6;
  FeatureOptions fo;
  fo.transfer = true;
  const auto names = feature_names(LayerType::Linear, fo);
  ASSERT_EQ(names.size(), feature_count(LayerType::Linear, fo));
  EXPECT_EQ(names.size(), feature_count(LayerType::Linear) + 8);
  std::vector<float> x(names.size());
  // 1000 tokens x 1024 outputs: 8 x 8 = 64 tiles of 128 (one wave of 80 SMs, 80 % used),
  // 16 x 16 = 256 tiles of 64 (4 waves, 256 / 320 = 80 %).
  const std::vector<int64_t> dims = {1000, 512, 1024, 1};
  layer_features(LayerType::Linear, dims, DType::FP32, Direction::Forward, d, fo, x.data());
  auto at = [&](const std::string& n) {
    auto it = std::find(names.begin(), names.end(), n);
    EXPECT_NE(it, names.end()) << n;
    return it == names.end() ? NAN : x[it - names.begin()];
  };
  EXPECT_EQ(at("tiles_128"), 64);
  EXPECT_EQ(at("waves_128"), 1);
  EXPECT_FLOAT_EQ(at("wave_eff_128"), 0.8f);
  EXPECT_EQ(at("tiles_64"), 256);
  EXPECT_EQ(at("waves_64"), 4);
  EXPECT_FLOAT_EQ(at("wave_eff_64"), 0.8f);
  const LayerCost c = layer_cost(LayerType::Linear, dims, DType::FP32);
  const double tb = traffic_bytes(c, Direction::Forward);
  EXPECT_FLOAT_EQ(at("ws_over_l2"), float(tb / 6e6));
  EXPECT_FLOAT_EQ(at("ai_over_ridge"), float((c.flops_fwd / tb) / (10000.0 / 1000.0)));
  // Without h^dev the device enters only through roofline and transfer columns.
  fo.device = false;
  const auto nodev = feature_names(LayerType::Linear, fo);
  EXPECT_EQ(nodev.size(), names.size() - DeviceRecord::feature_names().size());
  EXPECT_EQ(std::count(nodev.begin(), nodev.end(), "dev_gflops"), 0);
  // A layer that is not one GEMM: blocks of 1,024 output elements, 8 per SM.
  fo.device = true;
  const auto an = feature_names(LayerType::Add, fo);
  std::vector<float> y(an.size());
  layer_features(LayerType::Add, {1024 * 640 * 3}, DType::FP32, Direction::Forward, d, fo, y.data());
  const auto ti = std::find(an.begin(), an.end(), "tiles_128") - an.begin();
  EXPECT_EQ(y[ti], 1920);   // blocks
  EXPECT_EQ(y[ti + 1], 3);  // waves of 640 resident blocks
  EXPECT_FLOAT_EQ(y[ti + 2], 1.0f);
}

TEST(LayerPredictor, RecordsTheDirectionsAndDtypesItWasTrainedOnAndFlagsTheRest) {
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  auto rows = synthetic_rows(devs, 60, 3);
  for (auto& m : rows)
    if (m.type == LayerType::Linear) m.bwd.median_ms = NAN;  // linear: forward rows only, all fp32
  LayerPredictor p = LayerPredictor::train(rows, device_map(devs), fast_options());
  EXPECT_EQ(p.trained_on(LayerType::Linear, Direction::Forward, DType::FP32), std::optional<bool>(true));
  EXPECT_EQ(p.trained_on(LayerType::Linear, Direction::Backward, DType::FP32), std::optional<bool>(false));
  EXPECT_EQ(p.trained_on(LayerType::Linear, Direction::Forward, DType::BF16), std::optional<bool>(false));
  EXPECT_EQ(p.trained_on(LayerType::LayerNorm, Direction::Backward, DType::FP32), std::optional<bool>(true));
  EXPECT_EQ(p.trained_on(LayerType::GELU, Direction::Forward, DType::FP32), std::nullopt);  // no model

  // Per node: a bf16 graph's linear and layernorm nodes are extrapolated, an fp32 graph's
  // backward linear only; a roofline-fallback node is a fallback, not an extrapolation.
  LayerGraph g;
  auto node = [&](LayerType t, Direction d, std::vector<int64_t> dims) {
    LayerNode n;
    n.id = static_cast<int>(g.nodes.size());
    n.name = "n" + std::to_string(n.id);
    n.type = t;
    n.dir = d;
    n.dims = std::move(dims);
    g.nodes.push_back(n);
  };
  node(LayerType::Linear, Direction::Forward, {64, 64, 64, 1});
  node(LayerType::Linear, Direction::Backward, {64, 64, 64, 1});
  node(LayerType::LayerNorm, Direction::Backward, {64, 64});
  node(LayerType::GELU, Direction::Forward, {4096});
  auto flags = [&](DType dt) {
    g.settings.dtype = dt;
    for (auto& n : g.nodes) n.dtype = dt;  // each node's kernels run in its own dtype
    std::vector<int> f;
    for (const auto& d : p.predict_nodes_detail(g, devs[0]))
      f.push_back(d.fallback ? 2 : d.extrapolated ? 1 : 0);
    return f;
  };
  EXPECT_EQ(flags(DType::FP32), (std::vector<int>{0, 1, 0, 2}));
  EXPECT_EQ(flags(DType::BF16), (std::vector<int>{1, 1, 1, 2}));

  // A dtype the model never saw is carried over from one it knows by the ratio of
  // their rooflines (the dtype's spec peak and bytes), not left to the trees, which
  // would run it at the fp32 rate: a compute-bound linear in bf16 on a part with 8x
  // the fp32 peak in bf16 takes about an eighth of its fp32 time.
  DeviceRecord tc = devs[0];
  tc.peak_bf16_gflops = 8 * tc.peak_fp32_gflops;
  const std::vector<int64_t> big = {4096, 4096, 4096, 1};
  const double f32 = p.predict_ms(LayerType::Linear, big, DType::FP32, Direction::Forward, tc);
  const double b16 = p.predict_ms(LayerType::Linear, big, DType::BF16, Direction::Forward, tc);
  EXPECT_NEAR(b16 / f32, 1.0 / 8, 0.01);
  EXPECT_GE(b16, layer_cost(LayerType::Linear, big, DType::BF16).flops_fwd / (tc.peak_bf16_gflops * 1e6));
  // Without a bf16 peak in the record only the bytes change: a memory-bound layernorm
  // moves half the bytes in bf16.
  const std::vector<int64_t> wide = {1 << 16, 4096};
  const double ln32 = p.predict_ms(LayerType::LayerNorm, wide, DType::FP32, Direction::Forward, devs[0]);
  const double ln16 = p.predict_ms(LayerType::LayerNorm, wide, DType::BF16, Direction::Forward, devs[0]);
  EXPECT_NEAR(ln16 / ln32, 0.5, 0.05);

  // The record survives save/load; a manifest written before it existed loads with none (unknown).
  fs::path dir = temp_dir("trained_on");
  p.save(dir.string());
  EXPECT_EQ(
      LayerPredictor::load(dir.string()).trained_on(LayerType::Linear, Direction::Backward, DType::FP32),
      std::optional<bool>(false));
  nlohmann::json man = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  for (auto& [name, e] : man["models"].items()) e.erase("trained_on");
  scaledl::test::write_signed_manifest((dir / "manifest.json").string(), man);
  LayerPredictor old = LayerPredictor::load(dir.string());
  EXPECT_EQ(old.trained_on(LayerType::Linear, Direction::Backward, DType::FP32), std::nullopt);
  g.settings.dtype = DType::BF16;
  for (auto& n : g.nodes) n.dtype = DType::BF16;
  for (const auto& d : old.predict_nodes_detail(g, devs[0])) EXPECT_FALSE(d.extrapolated);
  // A malformed record is an error naming the key.
  man["models"]["linear"]["trained_on"] = 3;
  scaledl::test::write_signed_manifest((dir / "manifest.json").string(), man);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "linear.trained_on: expected an array");
  man["models"]["linear"]["trained_on"] = {"sideways fp32"};
  scaledl::test::write_signed_manifest((dir / "manifest.json").string(), man);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "\"sideways fp32\" is not \"<dir> <dtype>\"");
  scaledl::remove_tree(dir);
}

TEST(Features, ArchColumnIsTheFp32LanesPerSmOfTheSpec) {
  // 64 lanes: 80 SMs x 64 x 2 x 1,370 MHz = 14,029 GFLOP/s (NeuSight's V100 sheet).
  DeviceRecord v = spec_gpu("V", 14029, 900);
  v.cores = 80;
  v.clock_mhz = 1370;
  EXPECT_EQ(fp32_lanes_per_sm(v), 64);
  // 128 lanes: the H100 SXM, 132 SMs at 1,980 MHz, 66,900 GFLOP/s.
  DeviceRecord h = spec_gpu("H", 66900, 3350);
  h.cores = 132;
  h.clock_mhz = 1980;
  EXPECT_EQ(fp32_lanes_per_sm(h), 128);
  // Unknown clock or peak (a CPU probe): 0, never a division by zero.
  DeviceRecord c = h;
  c.clock_mhz = 0;
  EXPECT_EQ(fp32_lanes_per_sm(c), 0);
  c = h;
  c.peak_fp32_gflops = 0;
  c.measured_gflops = 1000;
  EXPECT_EQ(fp32_lanes_per_sm(c), 0);

  FeatureOptions fo;
  fo.transfer = true;
  fo.device = false;
  const size_t without = feature_count(LayerType::Linear, fo);
  fo.arch = true;
  const auto names = feature_names(LayerType::Linear, fo);
  ASSERT_EQ(names.size(), without + 1);
  EXPECT_EQ(names.back(), "fp32_lanes_per_sm");
  std::vector<float> x(names.size());
  const std::vector<int64_t> dims = {1000, 512, 1024, 1};
  layer_features(LayerType::Linear, dims, DType::FP32, Direction::Forward, h, fo, x.data());
  EXPECT_EQ(x.back(), 128);
  // The hot path writes the same vector.
  std::vector<float> y(names.size());
  FeatureWriter w(LayerType::Linear, DType::FP32, Direction::Forward, h, fo);
  ASSERT_EQ(w.size(), names.size());
  w.write(dims.data(), y.data());
  EXPECT_EQ(x, y);
}

TEST(Features, AlignmentColumnsAreTheGemmsPowerOfTwoAndWhetherTheGpuIsPascal) {
  EXPECT_DOUBLE_EQ(compute_capability_of("8.9"), 8.9);
  EXPECT_DOUBLE_EQ(compute_capability_of("10.0"), 10.0);
  for (const char* bad : {"8", "", ".9", "8.", "8.x", "a.b", "8.9.1", "-8.9", "8.10"})
    EXPECT_EQ(compute_capability_of(bad), 0) << bad;
  DeviceRecord g = spec_gpu("G", 10000, 1000);
  EXPECT_EQ(pre_volta(g), 0);  // no compute capability: a GPU described today is Volta or newer
  g.extra["compute_capability"] = "6.1";
  EXPECT_EQ(pre_volta(g), 1);
  g.extra["compute_capability"] = "7.0";
  EXPECT_EQ(pre_volta(g), 0);
  g.extra["compute_capability"] = "6.0";

  FeatureOptions fo;
  fo.transfer = true;
  fo.device = false;
  const size_t without = feature_count(LayerType::Linear, fo);
  fo.alignment = true;
  const auto names = feature_names(LayerType::Linear, fo);
  ASSERT_EQ(names.size(), without + 2);
  EXPECT_EQ(names[names.size() - 2], "gemm_align");
  EXPECT_EQ(names.back(), "pre_volta");
  struct Case {
    std::vector<int64_t> dims;  // tokens, d_in, d_out, bias
    float align;
  };
  for (const Case& c : std::vector<Case>{{{1000, 512, 1024, 1}, 8},    // 1,000 = 8 x 125
                                         {{1024, 512, 1024, 1}, 16},   // capped at 16
                                         {{1024, 50257, 1024, 1}, 1},  // an odd K
                                         {{1024, 1024, 30522, 1}, 2}}) {
    std::vector<float> x(names.size()), y(names.size());
    layer_features(LayerType::Linear, c.dims, DType::FP32, Direction::Forward, g, fo, x.data());
    EXPECT_EQ(x[x.size() - 2], c.align) << c.dims[0] << " " << c.dims[1] << " " << c.dims[2];
    EXPECT_EQ(x.back(), 1);  // compute capability 6.0
    FeatureWriter w(LayerType::Linear, DType::FP32, Direction::Forward, g, fo);
    w.write(c.dims.data(), y.data());
    EXPECT_EQ(x, y);  // the hot path writes the same vector
  }
  // Other layers: the innermost dim.
  const auto ln = feature_names(LayerType::LayerNorm, fo);
  std::vector<float> z(ln.size());
  layer_features(LayerType::LayerNorm, {4096, 1600}, DType::FP32, Direction::Forward, g, fo, z.data());
  EXPECT_EQ(z[z.size() - 2], 16);
  layer_features(LayerType::LayerNorm, {4096, 1602}, DType::FP32, Direction::Forward, g, fo, z.data());
  EXPECT_EQ(z[z.size() - 2], 2);

  TrainOptions o;
  EXPECT_FALSE(o.to_json().contains("alignment_features"));  // models without it keep their manifests
  o.alignment_features = true;
  EXPECT_TRUE(TrainOptions::from_json(o.to_json()).alignment_features);
  nlohmann::json bad = o.to_json();
  bad["alignment_features"] = 1.5;
  expect_error([&] { TrainOptions::from_json(bad, "m"); }, "alignment_features");
}

TEST(LayerPredictor, TransferOptionsRoundTripAndOldManifestsKeepTheirFeatures) {
  TrainOptions o;
  o.transfer_features = true;
  o.device_features = false;
  TrainOptions back = TrainOptions::from_json(o.to_json());
  EXPECT_TRUE(back.transfer_features);
  EXPECT_FALSE(back.device_features);
  EXPECT_FALSE(back.arch_features);
  o.arch_features = true;
  EXPECT_TRUE(TrainOptions::from_json(o.to_json()).arch_features);
  // A manifest written before these options existed has none of the keys: the features it was trained with.
  nlohmann::json old = TrainOptions{}.to_json();
  old.erase("transfer_features");
  old.erase("device_features");
  old.erase("arch_features");
  old.erase("rates");
  TrainOptions o2 = TrainOptions::from_json(old);
  EXPECT_FALSE(o2.transfer_features);
  EXPECT_TRUE(o2.device_features);
  EXPECT_FALSE(o2.arch_features);
  EXPECT_FALSE(o2.spec_rates);  // trained when a probed GPU's rooflines ran at its measured rates
  EXPECT_EQ(o.to_json()["rates"], "spec_peak");
  // Not a boolean: an error naming the key.
  nlohmann::json bad = o.to_json();
  bad["arch_features"] = "yes";
  expect_error([&] { TrainOptions::from_json(bad); }, "arch_features");
}

// --kernel-time: each GPU's rows lose that GPU's timing floor (its fastest row); a CPU keeps its
// times; the manifest says so, and a manifest from before has it off.
TEST(LayerPredictor, KernelTimeLearnsTimesLessEachGpusTimingFloor) {
  DeviceRecord gpu = spec_gpu("A", 8000, 300), cpu = spec_gpu("C", 200, 20);
  cpu.kind = "cpu";
  const std::vector<DeviceRecord> devs = {gpu, cpu};
  const auto rows = synthetic_rows(devs, 80, 21);  // 10 us + the roofline, 3 % noise
  const auto samples = samples_from_measurements(rows, device_map(devs));
  const auto floors = timing_floors(samples, device_map(devs));
  ASSERT_EQ(floors.size(), 1u);  // the CPU has none
  double fastest = 1e9;
  for (const auto& smp : samples)
    if (smp.device == gpu.key()) fastest = std::min(fastest, smp.ms);
  EXPECT_EQ(floors.begin()->first.first, gpu.key());  // one floor: the GPU's, of the rows' one harness
  EXPECT_EQ(floors.begin()->second, fastest);
  EXPECT_GT(fastest, 0.009);  // the synthetic launch overhead shows as the floor

  TrainOptions plain = fast_options(), kernel = fast_options();
  kernel.kernel_time = true;
  LayerPredictor p = LayerPredictor::train(rows, device_map(devs), plain);
  LayerPredictor k = LayerPredictor::train(rows, device_map(devs), kernel);
  const std::vector<int64_t> mid = {256, 256, 256, 1};  // roofline 4 us: the floor is most of its time
  const double pg = p.predict_ms(LayerType::Linear, mid, DType::FP32, Direction::Forward, gpu);
  const double kg = k.predict_ms(LayerType::Linear, mid, DType::FP32, Direction::Forward, gpu);
  EXPECT_NEAR(pg - kg, fastest, 0.5 * fastest) << pg << " vs " << kg;  // the GPU's floor is gone
  const double pc = p.predict_ms(LayerType::Linear, mid, DType::FP32, Direction::Forward, cpu);
  const double kc = k.predict_ms(LayerType::Linear, mid, DType::FP32, Direction::Forward, cpu);
  EXPECT_NEAR(kc / pc, 1.0, 0.1) << pc << " vs " << kc;  // the CPU's times are kept
  // kernel_time_samples() is what both learn: a GPU sample less its GPU's floor, a CPU sample as measured.
  const auto kt = kernel_time_samples(samples, device_map(devs));
  ASSERT_EQ(kt.size(), samples.size());
  for (size_t i = 0; i < kt.size(); ++i) {
    const double want = samples[i].device == gpu.key()
                            ? std::max(samples[i].ms - fastest, 0.1 * samples[i].ms)
                            : samples[i].ms;
    EXPECT_DOUBLE_EQ(kt[i].ms, want) << i;
  }
  // Cross-validation with the option scores every method on those kernel times, test rows included:
  // the same result as cross-validating the kernel-time samples without it.
  CvOptions cv;
  cv.folds = 3;
  cv.methods = {"xgboost", "linear"};
  cv.train = kernel;
  CvOptions cv_plain = cv;
  cv_plain.train.kernel_time = false;
  const auto with = cross_validate(samples, device_map(devs), cv);
  const auto on_kt = cross_validate(kt, device_map(devs), cv_plain);
  ASSERT_EQ(with.size(), on_kt.size());
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i].method + with[i].type + with[i].direction,
              on_kt[i].method + on_kt[i].type + on_kt[i].direction);
    EXPECT_DOUBLE_EQ(with[i].mre_pct, on_kt[i].mre_pct) << with[i].method << " " << with[i].type;
  }
  // The option travels in the manifest; absent (an older manifest) = off; not a boolean = an error.
  fs::path dir = temp_dir("kernel_time");
  k.save(dir.string());
  EXPECT_TRUE(LayerPredictor::load(dir.string()).options().kernel_time);
  nlohmann::json old = kernel.to_json();
  old.erase("kernel_time");
  EXPECT_FALSE(TrainOptions::from_json(old).kernel_time);
  old["kernel_time"] = 1.5;
  expect_error([&] { TrainOptions::from_json(old); }, "kernel_time");
}

TEST(LayerPredictor, SustainedBandwidthCarriesAGpusMemoryShareToAnotherGpu) {
  // A and B stream at 92 % and 75 % of their spec bandwidths (a V100 and a P100 do); C, which
  // no row comes from, at 60 %. Each add row costs a 5 us floor plus its bytes at that rate.
  DeviceRecord a = spec_gpu("A", 14000, 900), b = spec_gpu("B", 9500, 732), c = spec_gpu("C", 19500, 1555);
  const std::map<std::string, double> share = {{a.key(), 0.92}, {b.key(), 0.75}, {c.key(), 0.60}};
  auto add_ms = [&](const DeviceRecord& d, int64_t n) {
    const double bytes = traffic_bytes(layer_cost(LayerType::Add, {n}, DType::FP32), Direction::Forward);
    return 0.005 + bytes / (share.at(d.key()) * d.peak_mem_bw_gbs * 1e6);
  };
  std::vector<LayerMeasurement> rows;
  for (const DeviceRecord& d : {a, b})
    for (int e = 12; e <= 26; ++e)
      for (int64_t k : {4, 5, 6, 7}) {
        LayerMeasurement r;
        r.campaign = "t", r.device = d.key(), r.source = "test", r.type = LayerType::Add;
        r.dims = {(int64_t{1} << e) / 4 * k};
        r.fwd.median_ms = add_ms(d, r.dims[0]);
        rows.push_back(r);
      }
  const auto devices = device_map({a, b, c});
  // What each GPU sustains, from its largest rows (the floor costs them under 1 %).
  const auto bw = sustained_bandwidths(samples_from_measurements(rows, devices), devices);
  ASSERT_EQ(bw.size(), 2u);
  EXPECT_NEAR(bw.at(a.key()) / (0.92 * 900), 1.0, 0.01);
  EXPECT_NEAR(bw.at(b.key()) / (0.75 * 732), 1.0, 0.01);
  {
    // A GPU whose rows are mostly small shapes at its host's floor (our H200's set is so): its
    // ten large rows give the bandwidth, not the tenth with the most bytes (which would take
    // in floor-bound ones).
    DeviceRecord d = spec_gpu("D", 19500, 1555);
    std::vector<LayerMeasurement> dr;
    auto row = [&](int64_t n) {
      LayerMeasurement r;
      r.campaign = "t", r.device = d.key(), r.source = "test", r.type = LayerType::Add, r.dims = {n};
      const double bytes = traffic_bytes(layer_cost(LayerType::Add, {n}, DType::FP32), Direction::Forward);
      r.fwd.median_ms = 0.014 + bytes / (0.85 * 1555 * 1e6);
      dr.push_back(r);
    };
    for (int i = 0; i < 200; ++i) row(1000 + 1000 * i);              // 14-15 us: the floor
    for (int i = 0; i < 10; ++i) row((int64_t{1} << 24) * (i + 1));  // 0.15-1.5 ms
    const auto dm = device_map({d});
    const auto got = sustained_bandwidths(samples_from_measurements(dr, dm), dm);
    EXPECT_NEAR(got.at(d.key()) / (0.85 * 1555), 1.0, 0.03);
  }
  TrainOptions plain = fast_options();
  plain.device_features = false;  // the device enters through its rooflines only, as for unseen GPUs
  plain.transfer_features = true;
  TrainOptions sus = plain;
  sus.sustained_bw = true;
  const LayerPredictor p = LayerPredictor::train(rows, devices, plain);
  const LayerPredictor q = LayerPredictor::train(rows, devices, sus);
  // C probed: its copy bandwidth is what it sustains. The trees learnt one memory efficiency
  // at sustained bandwidths, so C's large add is right; at spec bandwidths they learnt A's
  // and B's shares, and C, which sustains less than either, comes out too fast.
  DeviceRecord probed = c;
  probed.measured_bw_gbs = 0.60 * 1555;
  const int64_t n = int64_t{1} << 25;
  const double want = add_ms(c, n);
  EXPECT_NEAR(q.predict_ms(LayerType::Add, {n}, DType::FP32, Direction::Forward, probed) / want, 1.0, 0.03);
  EXPECT_LT(p.predict_ms(LayerType::Add, {n}, DType::FP32, Direction::Forward, probed) / want, 0.85);
  // C by its spec sheet alone: the training GPUs' median share of its spec bandwidth.
  EXPECT_DOUBLE_EQ(q.sustained_bw_share(), 0.5 * (bw.at(a.key()) / 900 + bw.at(b.key()) / 732));
  EXPECT_DOUBLE_EQ(q.roofline_bandwidth_gbs(c), 1555 * q.sustained_bw_share());
  EXPECT_DOUBLE_EQ(q.roofline_bandwidth_gbs(a), bw.at(a.key()));  // a training GPU: its own rows, not a probe
  EXPECT_DOUBLE_EQ(p.roofline_bandwidth_gbs(probed), 1555);       // without the option: the spec sheet
  // A spec sheet of a memory family with training GPUs gets their share, not the median of all.
  DeviceRecord a2 = a, b2 = b;
  a2.memory_type = "HBM2", b2.memory_type = "GDDR6";
  const LayerPredictor fam = LayerPredictor::train(rows, device_map({a2, b2, c}), sus);
  DeviceRecord gddr = c;
  gddr.memory_type = "GDDR6";
  EXPECT_DOUBLE_EQ(fam.sustained_bw_share("gddr"), bw.at(b.key()) / 732);
  EXPECT_DOUBLE_EQ(fam.roofline_bandwidth_gbs(gddr), 1555 * bw.at(b.key()) / 732);
  EXPECT_DOUBLE_EQ(fam.roofline_bandwidth_gbs(c),
                   1555 * q.sustained_bw_share());  // no family: all GPUs' median
  DeviceRecord cpu = spec_gpu("cpu", 500, 0);
  cpu.kind = "cpu", cpu.peak_mem_bw_gbs = 0, cpu.measured_bw_gbs = 40;
  EXPECT_DOUBLE_EQ(q.roofline_bandwidth_gbs(cpu), 40);  // a CPU keeps its measured bandwidth
  // The manifest keeps the bandwidths: the loaded model predicts the same; older manifests load without.
  fs::path dir = temp_dir("sustained_bw");
  q.save(dir.string());
  const LayerPredictor r = LayerPredictor::load(dir.string());
  EXPECT_TRUE(r.options().sustained_bw);
  EXPECT_EQ(r.predict_ms(LayerType::Add, {n}, DType::FP32, Direction::Forward, c),
            q.predict_ms(LayerType::Add, {n}, DType::FP32, Direction::Forward, c));
  EXPECT_DOUBLE_EQ(r.roofline_bandwidth_gbs(b), bw.at(b.key()));
  EXPECT_FALSE(plain.to_json().contains("sustained_bw"));
  EXPECT_FALSE(TrainOptions::from_json(plain.to_json()).sustained_bw);
  nlohmann::json bad = sus.to_json();
  bad["sustained_bw"] = "yes";
  expect_error([&] { TrainOptions::from_json(bad); }, "sustained_bw");
  // A signed manifest whose bandwidths are missing or not positive is refused by name.
  const std::string mpath = (dir / "manifest.json").string();
  const nlohmann::json man = nlohmann::json::parse(std::ifstream(mpath));
  nlohmann::json m1 = man;
  m1.erase("sustained_bw");
  scaledl::test::write_signed_manifest(mpath, m1);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "key 'sustained_bw' is missing");
  nlohmann::json m2 = man;
  m2["sustained_bw"]["gbs"][a.key()] = -1;
  scaledl::test::write_signed_manifest(mpath, m2);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "must be a number > 0");
  nlohmann::json m4 = man;
  m4["sustained_bw"]["share_by_memory"] = {{"hbm", 0}};
  scaledl::test::write_signed_manifest(mpath, m4);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "share_by_memory[\"hbm\"]=0");
  nlohmann::json m3 = man;
  m3["sustained_bw"]["share"] = "half";
  scaledl::test::write_signed_manifest(mpath, m3);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "share");
}

TEST(LayerPredictor, DtypeRatesLearnAHalfPrecisionRowAsAShareOfItsDtypesPeak) {
  // Two GPUs whose tensor-core peaks are 16x and 8x their FP32 peaks (an A100 and a V100
  // are so). Both time FP32 rows; only B times BF16 GEMMs, at 70 % of its BF16 peak.
  DeviceRecord a = spec_gpu("A", 8000, 300), b = spec_gpu("B", 15000, 900);
  a.peak_bf16_gflops = 16 * a.peak_fp32_gflops;
  b.peak_bf16_gflops = 8 * b.peak_fp32_gflops;
  const std::vector<DeviceRecord> devs = {a, b};
  std::vector<LayerMeasurement> rows = synthetic_rows(devs, 80, 5);
  auto bf16_ms = [](const DeviceRecord& d, const std::vector<int64_t>& dims, Direction dir) {
    const LayerCost c = layer_cost(LayerType::Linear, dims, DType::BF16);
    return 0.01 + std::max(direction_flops(c, dir) / (0.7 * d.peak_bf16_gflops * 1e6),
                           traffic_bytes(c, dir) / (d.bandwidth_gbs() * 1e6));
  };
  for (int64_t m : {2048, 4096, 8192})
    for (int64_t k : {1024, 2048, 4096}) {
      LayerMeasurement r;
      r.campaign = "t", r.device = b.key(), r.source = "test", r.type = LayerType::Linear,
      r.dtype = DType::BF16;
      r.dims = {m, k, 4096, 1};
      r.fwd.median_ms = bf16_ms(b, r.dims, Direction::Forward);
      r.bwd.median_ms = bf16_ms(b, r.dims, Direction::Backward);
      rows.push_back(r);
    }
  TrainOptions plain = fast_options(), dtype = fast_options();
  dtype.dtype_rates = true;
  const LayerPredictor p = LayerPredictor::train(rows, device_map(devs), plain);
  const LayerPredictor q = LayerPredictor::train(rows, device_map(devs), dtype);
  const std::vector<int64_t> shape = {4096, 2048, 4096, 1};
  const double want = bf16_ms(a, shape, Direction::Forward);
  // With its dtype's rate, A's BF16 GEMM is B's share of A's own tensor peak.
  EXPECT_NEAR(q.predict_ms(LayerType::Linear, shape, DType::BF16, Direction::Forward, a) / want, 1.0, 0.15);
  // At the FP32 rate the trees learn B's BF16 time as a multiple of B's FP32 roofline, and give A
  // the same multiple of its own: twice the time, since A's tensor cores are twice as far ahead.
  EXPECT_GT(p.predict_ms(LayerType::Linear, shape, DType::BF16, Direction::Forward, a) / want, 1.5);
  // FP32 rows run at the FP32 rate either way: the option changes neither their features nor their target.
  const DeviceRecord& d = a;
  float fx[64], fy[64];
  FeatureOptions with, without;
  with.dtype_rates = true;
  ASSERT_LE(feature_count(LayerType::Linear, with), 64u);
  layer_features(LayerType::Linear, shape, DType::FP32, Direction::Forward, d, with, fx);
  layer_features(LayerType::Linear, shape, DType::FP32, Direction::Forward, d, without, fy);
  EXPECT_TRUE(std::equal(fx, fx + feature_count(LayerType::Linear, with), fy));
  EXPECT_DOUBLE_EQ(
      roofline_ms(LayerType::Linear, shape, DType::BF16, Direction::Forward, d, true),
      std::max(layer_cost(LayerType::Linear, shape, DType::BF16).flops_fwd / (d.peak_bf16_gflops * 1e6),
               traffic_bytes(layer_cost(LayerType::Linear, shape, DType::BF16), Direction::Forward) /
                   (d.bandwidth_gbs() * 1e6)));
  // rate_gflops: the dtype's peak, scaled like the FP32 rate by a sustained clock; the FP32 rate
  // without that peak (TF32 here) or without the option.
  EXPECT_EQ(rate_gflops(a, DType::BF16, true), 128000);
  EXPECT_EQ(rate_gflops(a, DType::BF16, false), 8000);
  EXPECT_EQ(rate_gflops(a, DType::TF32, true), 8000);
  DeviceRecord hot = a;
  hot.sustained_clock_mhz = 700;  // half the 1,400 MHz boost clock
  EXPECT_EQ(rate_gflops(hot, DType::FP16, true), 64000);
  // The manifest: "rates": "dtype_peak"; earlier values load as before; anything else is an error.
  fs::path dir = temp_dir("dtype_rates");
  q.save(dir.string());
  EXPECT_TRUE(LayerPredictor::load(dir.string()).options().dtype_rates);
  EXPECT_EQ(dtype.to_json().at("rates"), "dtype_peak");
  nlohmann::json old = dtype.to_json();
  old["rates"] = "spec_peak";
  EXPECT_FALSE(TrainOptions::from_json(old).dtype_rates);
  EXPECT_TRUE(TrainOptions::from_json(old).spec_rates);
  old["rates"] = "tensor";
  expect_error([&] { TrainOptions::from_json(old); },
               "rates=\"tensor\" is not dtype_peak, spec_peak or measured");
}

TEST(Neusight, LabelNamesAndCommittedLabelsImport) {
  auto l = parse_neusight_label_name("gpt2_large-train-1024-4");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->model, "gpt2_large");
  EXPECT_EQ(l->mode, RunMode::FwdBwd);  // the artifact's training labels have no optimizer step
  EXPECT_EQ(l->seq, 1024);
  EXPECT_EQ(l->batch, 4);
  EXPECT_TRUE(l->suffix.empty());
  auto f = parse_neusight_label_name("opt_13-inf-2048-8-fusion");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->mode, RunMode::Inference);
  EXPECT_EQ(f->suffix, "fusion");
  EXPECT_FALSE(parse_neusight_label_name("gpt2-large-1024").has_value());
  EXPECT_FALSE(parse_neusight_label_name("gpt2_large-eval-1024-4").has_value());

  const fs::path root = fs::path(SCALEDL_SOURCE_DIR) / "datasets" / "neusight";
  fs::path dir = temp_dir("labels");
  Store store((dir / "r.sqlite").string());
  NeusightImportOptions o;
  o.root = root.string();
  auto s = import_neusight(o, store);
  EXPECT_GE(s.labels.inserted, 34u);
  EXPECT_EQ(s.labels.per_device.size(), 5u);
  EXPECT_EQ(s.labels.skipped["fusion (torch.compile)"], 4u);
  auto runs = store.models("", true);
  ASSERT_EQ(runs.size(), s.labels.inserted);
  size_t inference = 0;
  for (const auto& r : runs) {
    EXPECT_EQ(r.campaign, "neusight-labels");
    EXPECT_GT(r.iter.median_ms, 0);
    const TrainSettings st = parse_train_settings(r.settings);
    inference += run_mode(st) == RunMode::Inference ? 1 : 0;
    EXPECT_NE(run_mode(st), RunMode::Train);
  }
  EXPECT_GE(inference, 30u);
  // Idempotent.
  EXPECT_EQ(import_neusight(o, store).labels.inserted, 0u);
}

TEST(Neusight, MalformedLabelsNameTheFile) {
  fs::path root = temp_dir("nslab");
  write_file(
      root / "device_configs" / "g.json",
      R"({"Device":"Tesla T4","Dev_Mem":15,"Mem_Bw":320,"Num_Sm":40,"Core_Per_SM":64,"Freq":1590,"SingleFLOPs":8141,"L2Cache":4})");
  write_file(root / "ops" / "ln" / "t.csv", "OPName,Latency,Device,B,H\nln,0.1,Tesla T4,4,8\n");
  write_file(
      root / "model_configs" / "m.json",
      R"({"model_type":"gpt2","n_embd":64,"n_head":2,"n_layer":2,"vocab_size":100,"n_positions":128})");
  struct Case {
    std::string dir, file, body, needle;
  };
  std::vector<Case> cases = {
      {"Tesla_T4", "m-inf-64-2.json", R"({"e2e_latency":-3})",
       "m-inf-64-2.json: e2e_latency=-3 must be a positive"},
      {"Tesla_T4", "m-inf-64-2.json", R"({"fw_latency":3})", "e2e_latency is missing"},
      {"Tesla_T4", "m-inf-64-2.json", R"({"e2e_latency":)", "m-inf-64-2.json"},
      {"Tesla_T4", "x-inf-64-2.json", R"({"e2e_latency":3})", "model config"},
      {"Tesla_T4", "m-infer-64.json", R"({"e2e_latency":3})", "file name is not"},
      {"Tesla_X9", "m-inf-64-2.json", R"({"e2e_latency":3})", "device \"Tesla X9\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file + " " + c.body);
    scaledl::remove_tree(root / "labels");
    write_file(root / "labels" / c.dir / c.file, c.body);
    fs::remove(root / "r.sqlite");
    expect_import_error(root, root / "r.sqlite", c.needle);
    EXPECT_TRUE(Store((root / "r.sqlite").string()).models("", false).empty());  // nothing half-imported
  }
}

TEST(LayerPredictor, PointwiseWithoutRowsIsCarriedOverFromAnotherElementwiseModelByBytes) {
  // A store of the zoo's layer space (no pointwise rows) with mul rows, or relu rows.
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  auto elementwise = [&](LayerType t) {
    std::vector<LayerMeasurement> rows = synthetic_rows(devs, 20, 3);
    for (int i = 0; i < 30; ++i) {
      LayerMeasurement m;
      m.campaign = "t";
      m.device = devs[0].key();
      m.source = "test";
      m.type = t;
      m.dims = {int64_t{1} << (10 + i % 12)};
      // 3x the roofline: a rate no roofline fallback would give
      m.fwd.median_ms = 0.005 + 3 * roofline_ms(t, m.dims, m.dtype, Direction::Forward, devs[0]);
      m.bwd.median_ms = 0.005 + 3 * roofline_ms(t, m.dims, m.dtype, Direction::Backward, devs[0]);
      rows.push_back(m);
    }
    return LayerPredictor::train(rows, device_map(devs), fast_options());
  };
  const int64_t n = 1 << 18;
  for (LayerType proxy : {LayerType::Mul, LayerType::ReLU}) {
    SCOPED_TRACE(to_string(proxy));
    const LayerPredictor p = elementwise(proxy);
    ASSERT_FALSE(p.has_model(LayerType::Pointwise, Direction::Forward));
    const LayerPrediction r =
        p.predict(LayerType::Pointwise, {n, 0}, DType::FP32, Direction::Forward, devs[0]);
    EXPECT_TRUE(r.fallback) << "no model of its own";
    // mul moves 3 n elements, relu and pointwise 2 n: the proxy's time by that ratio.
    const double ratio = proxy == LayerType::Mul ? 2.0 / 3.0 : 1.0;
    EXPECT_NEAR(r.ms, ratio * p.predict_ms(proxy, {n}, DType::FP32, Direction::Forward, devs[0]), 1e-12);
    EXPECT_GT(r.ms, 2 * roofline_ms(LayerType::Pointwise, {n, 0}, DType::FP32, Direction::Forward, devs[0]));
    // The batch path agrees with the single one.
    const int64_t dims[4] = {n, 0, 2 * n, 1};
    double out[2];
    p.predict_batch(LayerType::Pointwise, dims, 2, DType::FP32, Direction::Backward, devs[0], out);
    EXPECT_DOUBLE_EQ(out[0],
                     p.predict_ms(LayerType::Pointwise, {n, 0}, DType::FP32, Direction::Backward, devs[0]));
    EXPECT_DOUBLE_EQ(
        out[1], p.predict_ms(LayerType::Pointwise, {2 * n, 1}, DType::FP32, Direction::Backward, devs[0]));
  }
  // Without any elementwise model, the roofline as before.
  std::vector<DeviceRecord> one = {spec_gpu("B", 8000, 300)};
  const LayerPredictor q = LayerPredictor::train(synthetic_rows(one, 20, 4), device_map(one), fast_options());
  EXPECT_DOUBLE_EQ(q.predict_ms(LayerType::Pointwise, {n, 0}, DType::FP32, Direction::Forward, one[0]),
                   roofline_ms(LayerType::Pointwise, {n, 0}, DType::FP32, Direction::Forward, one[0]));
}

// ---- calibration: a few timings of a GPU the layer models never saw ---------

TEST(LayerCalibration, AFewAlignedTimingsOfAGpuSetItsLayerTimes) {
  // A and B train the layer models; their GEMMs reach 80 % of the FP32 peak, C's 50 %, and
  // C's odd shapes 25 %: it pays for them in its own way. Each row costs a 20 us floor too.
  const DeviceRecord a = spec_gpu("A", 14000, 900), b = spec_gpu("B", 9500, 732),
                     c = spec_gpu("C", 19500, 1555);
  auto linear_ms = [](const DeviceRecord& d, const std::vector<int64_t>& dims, double eff) {
    return 0.02 + direction_flops(layer_cost(LayerType::Linear, dims, DType::FP32), Direction::Forward) /
                      (eff * d.peak_fp32_gflops * 1e6);
  };
  auto rows_of = [&](const DeviceRecord& d, double eff, double odd_eff, int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> u(4, 64);
    std::vector<LayerMeasurement> rows;
    for (int i = 0; i < n; ++i) {
      LayerMeasurement r;
      r.campaign = "t", r.device = d.key(), r.source = "test", r.type = LayerType::Linear;
      const bool odd = i % 2 == 1;
      r.dims = {u(rng) * 64 + (odd ? 3 : 0), u(rng) * 32 + (odd ? 5 : 0), u(rng) * 32, 1};
      r.fwd.median_ms = linear_ms(d, r.dims, odd ? odd_eff : eff);
      rows.push_back(r);
    }
    return rows;
  };
  std::vector<LayerMeasurement> train = rows_of(a, 0.8, 0.8, 200, 1);
  for (auto& r : rows_of(b, 0.8, 0.8, 200, 2)) train.push_back(r);
  TrainOptions o = fast_options();
  o.device_features = false;
  o.transfer_features = true;
  o.kernel_time = true;
  const LayerPredictor lp = LayerPredictor::train(train, device_map({a, b, c}), o);
  const std::vector<int64_t> big = {4096, 2048, 2048, 1};
  const double want = linear_ms(c, big, 0.5) - 0.02;  // a kernel time: no floor inside a model
  const double before = lp.predict_ms(LayerType::Linear, big, DType::FP32, Direction::Forward, c);
  EXPECT_LT(before / want, 0.75);  // C at A's and B's share of the peak: too fast

  // C's own rows, as `bench layers` on it would give them (probed: the key's kind differs).
  DeviceRecord probed = c;
  probed.kind = "cuda";
  std::vector<LayerMeasurement> mine = rows_of(probed, 0.5, 0.25, 40, 3);
  LayerMeasurement tiny;  // a row at the host's floor: it sets the kernel times' floor, and is not used
  tiny.campaign = "t", tiny.device = probed.key(), tiny.source = "test", tiny.type = LayerType::Linear;
  tiny.dims = {8, 8, 8, 1};
  tiny.fwd.median_ms = 0.02;
  mine.push_back(tiny);
  const std::vector<LayerSample> samples = samples_from_measurements(mine, device_map({probed}));
  const LayerCalibration cal = calibrate_layers(lp, samples, c);
  EXPECT_EQ(cal.device, c.key());
  EXPECT_EQ(cal.rows_in, 41);
  ASSERT_EQ(cal.factors.size(), 1u);
  const CalibrationFactor& f = cal.factors.begin()->second;
  int64_t usable = 0;  // aligned, and 50 us or more above the floor (the tiny row's 20 us)
  for (size_t i = 0; i < 40; i += 2) usable += mine[i].fwd.median_ms - 0.02 >= 0.05;
  EXPECT_GE(usable, 10);
  EXPECT_EQ(f.rows, usable);  // the odd shapes, the floor row and rows near it are left out
  const double after = before * cal.factor(LayerType::Linear, Direction::Forward, DType::FP32);
  EXPECT_NEAR(after / want, 1.0, 0.08);
  // No backward rows: the backward kind takes the forward one's factor; another dtype or kind none.
  EXPECT_EQ(cal.factor(LayerType::Linear, Direction::Backward, DType::FP32),
            cal.factor(LayerType::Linear, Direction::Forward, DType::FP32));
  EXPECT_EQ(cal.factor(LayerType::Linear, Direction::Forward, DType::BF16), 1.0);
  EXPECT_EQ(cal.factor(LayerType::LayerNorm, Direction::Forward, DType::FP32), 1.0);
  const nlohmann::json j = cal.to_json();
  EXPECT_EQ(j["rows_used"], usable);
  EXPECT_NEAR(j["factors"]["linear.fwd.fp32"]["factor"].get<double>(), std::exp(f.log_factor), 1e-12);
  // With every shape admitted, C's odd shapes pull the factor past what its model-like GEMMs need.
  CalibrationOptions all;
  all.align = 1;
  EXPECT_GT(calibrate_layers(lp, samples, c, all).factor(LayerType::Linear, Direction::Forward, DType::FP32),
            1.2 * cal.factor(LayerType::Linear, Direction::Forward, DType::FP32));
  // A store without a row near the host's floor: its fastest GEMM is no floor (at most 60 us
  // comes off), and the factor stays what it was.
  std::vector<LayerSample> no_tiny(samples.begin(), samples.end() - 1);
  EXPECT_NEAR(calibrate_layers(lp, no_tiny, c).factor(LayerType::Linear, Direction::Forward, DType::FP32) /
                  cal.factor(LayerType::Linear, Direction::Forward, DType::FP32),
              1.0, 0.03);
  // A few rows: max_rows of the usable ones.
  CalibrationOptions few;
  few.max_rows = 5;
  EXPECT_EQ(calibrate_layers(lp, samples, c, few).factors.begin()->second.rows, 5);
  // apply(): each node of a graph times its kind's factor.
  ModelSpec m = parse_model_config(nlohmann::json::parse(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1,
      "n_head": 2, "vocab_size": 512, "n_positions": 128})"));
  TrainSettings s;
  s.batch = 2, s.seq_len = 64;
  const LayerGraph g = build_layer_graph(m, s);
  std::vector<double> t(g.nodes.size(), 1.0);
  cal.apply(g, t);
  for (size_t i = 0; i < t.size(); ++i)
    EXPECT_EQ(t[i], cal.factor(g.nodes[i].type, g.nodes[i].dir, DType::FP32)) << g.nodes[i].name;
  // Bad inputs, each one Error naming what is wrong.
  EXPECT_THROW(calibrate_layers(lp, {}, c), Error);
  EXPECT_THROW(calibrate_layers(lp, samples, a), Error);  // rows of another device
  CalibrationOptions strict;
  strict.min_rows = 100;  // more than there are
  try {
    calibrate_layers(lp, samples, c, strict);
    ADD_FAILURE() << "no kind with 100 usable rows was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("100 usable rows"), std::string::npos) << e.what();
  }
  CalibrationOptions bad;
  bad.align = 0;
  EXPECT_THROW(calibrate_layers(lp, samples, c, bad), Error);
  bad = CalibrationOptions{};
  bad.min_ms = std::nan("");
  EXPECT_THROW(calibrate_layers(lp, samples, c, bad), Error);
}

// ---- GEMMs on narrow-alignment kernels ----------------------------------------

namespace {
LayerNode linear_node(int64_t tokens, int64_t d_in, int64_t d_out, DType dtype, Direction dir) {
  LayerNode n;
  n.type = LayerType::Linear;
  n.dims = {tokens, d_in, d_out, 0};
  n.dtype = dtype;
  n.dir = dir;
  n.cost = layer_cost(n.type, n.dims, dtype);
  return n;
}
}  // namespace

TEST(LayerPredictor, MisalignedGemmsAreCostedAtTheirKernelsRate) {
  // GPT-2's LM head (vocabulary 50,257: odd) and BERT's (30,522: even, no multiple of 8).
  EXPECT_EQ(linear_alignment({4096, 1280, 50257, 0}, DType::BF16), GemmAlignment::Odd);
  EXPECT_EQ(linear_alignment({4096, 1281, 4096, 0}, DType::FP16), GemmAlignment::Odd);
  EXPECT_EQ(linear_alignment({4096, 1024, 30522, 0}, DType::BF16), GemmAlignment::Even);
  EXPECT_EQ(linear_alignment({4096, 1024, 30522, 0}, DType::TF32), GemmAlignment::Even);
  EXPECT_EQ(linear_alignment({4096, 1024, 30524, 0}, DType::TF32), GemmAlignment::Aligned);  // 4 x 4 bytes
  EXPECT_EQ(linear_alignment({4097, 1024, 50304, 0}, DType::BF16),
            GemmAlignment::Aligned);  // tokens: no operand's
  EXPECT_EQ(linear_alignment({4096, 1024, 50257, 0}, DType::FP32), GemmAlignment::Aligned);  // SIMT kernels
  EXPECT_EQ(linear_alignment({4096, 1024, 50257, 0}, DType::FP8), GemmAlignment::Aligned);   // padded by TE

  const DeviceRecord h200 =
      load_device_spec(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/h200-sxm.json");
  const double per_clock = static_cast<double>(h200.cores) * h200.clock_mhz * 1e6;
  const LayerNode fwd = linear_node(4096, 1280, 50257, DType::BF16, Direction::Forward);
  const LayerNode bwd = linear_node(4096, 1280, 50257, DType::BF16, Direction::Backward);
  EXPECT_DOUBLE_EQ(misaligned_gemm_ms(fwd, h200),
                   fwd.cost.flops_fwd / (kOddGemmFlopPerSmClock * per_clock) * 1e3);
  EXPECT_DOUBLE_EQ(misaligned_gemm_ms(bwd, h200),
                   bwd.cost.flops_bwd / (kOddGemmFlopPerSmClock * per_clock) * 1e3);
  const LayerNode bert = linear_node(4096, 1024, 30522, DType::BF16, Direction::Forward);
  EXPECT_DOUBLE_EQ(misaligned_gemm_ms(bert, h200),
                   bert.cost.flops_fwd / (kEvenGemmFlopPerSmClock * per_clock) * 1e3);
  // Aligned, on a CPU, or on another vendor's GPU: nothing.
  EXPECT_EQ(misaligned_gemm_ms(linear_node(4096, 1280, 50304, DType::BF16, Direction::Forward), h200), 0.0);
  DeviceRecord cpu = h200;
  cpu.kind = "cpu";
  EXPECT_EQ(misaligned_gemm_ms(fwd, cpu), 0.0);
  const DeviceRecord mi300 =
      load_device_spec(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/mi300x.json");
  EXPECT_EQ(misaligned_gemm_ms(fwd, mi300), 0.0);

  // In a graph: the layer models' time of an aligned GEMM, the kernels' rate for the misaligned one.
  std::vector<DeviceRecord> devs = {spec_gpu("A", 8000, 300)};
  devs[0].cores = 100;
  devs[0].clock_mhz = 1500;
  LayerPredictor p = LayerPredictor::train(synthetic_rows(devs, 60, 3), device_map(devs), fast_options());
  LayerGraph g;
  g.nodes = {linear_node(64, 64, 63, DType::BF16, Direction::Forward),
             linear_node(64, 64, 64, DType::BF16, Direction::Forward)};
  for (int i = 0; i < 2; ++i) g.nodes[i].id = i;
  const auto d = p.predict_nodes_detail(g, devs[0]);
  const double model_ms =
      p.predict_ms(LayerType::Linear, g.nodes[0].dims, DType::BF16, Direction::Forward, devs[0]);
  EXPECT_DOUBLE_EQ(d[0].ms, std::max(model_ms, misaligned_gemm_ms(g.nodes[0], devs[0])));
  EXPECT_EQ(d[0].misaligned, misaligned_gemm_ms(g.nodes[0], devs[0]) > model_ms);
  EXPECT_FALSE(d[1].misaligned);
}

TEST(LayerPredictor, TheOddGemmRateIsTheH200sMeasuredOne) {
  // kOddGemmFlopPerSmClock from the committed table it was read from: the median rate of the TN
  // GEMMs with M = 4,097 of >= 10^11 FLOP, per SM and clock of the H200's spec sheet.
  std::ifstream f(std::string(SCALEDL_SOURCE_DIR) + "/datasets/h200/training-kinds/gemm.csv");
  ASSERT_TRUE(f.good());
  std::string line;
  std::getline(f, line);  // gpu,dtype,variant,layout,m,n,k,status,median_ms,...
  std::vector<double> rates;
  while (std::getline(f, line)) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) c.push_back(x);
    if (c.size() < 9 || c[1] != "bf16" || c[2] != "gemm" || c[3] != "TN" || c[4] != "4097" || c[7] != "ok")
      continue;
    const double flops = 2.0 * 4097 * std::stod(c[5]) * std::stod(c[6]);
    if (flops >= 1e11) rates.push_back(flops / (std::stod(c[8]) * 1e-3));
  }
  ASSERT_EQ(rates.size(), 26u);
  std::sort(rates.begin(), rates.end());
  const double median = 0.5 * (rates[12] + rates[13]);
  const DeviceRecord h200 =
      load_device_spec(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/h200-sxm.json");
  EXPECT_NEAR(median / (static_cast<double>(h200.cores) * h200.clock_mhz * 1e6), kOddGemmFlopPerSmClock, 1.0);
}
