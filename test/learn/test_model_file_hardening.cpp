// Layer-model files and NeuSight CSVs against hostile input (issue #16; the
// cases the fuzz targets fuzz_layer_model and fuzz_neusight_csv found): XGBoost
// trusts a model's trees, so they are checked before it sees them; no JSON-library
// exception or integer overflow escapes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "learn/xgb.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/learn/neusight.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace scaledl;
using scaledl::test::error_of;

namespace {

/// A trained 3-round model's XGBoost JSON.
nlohmann::json small_model() {
  std::vector<float> x, y;
  for (int i = 0; i < 64; ++i) {
    x.push_back(float(i));
    x.push_back(float(i % 7));
    y.push_back(float(i * 0.5 + (i % 7)));
  }
  xgb::DMatrix dm(x.data(), 64, 2, y);
  xgb::Booster b;
  b.set_params({{"max_depth", "3"}, {"nthread", "1"}});
  b.train(dm, 3);
  return nlohmann::json::parse(b.to_json_string());
}

nlohmann::json& trees(nlohmann::json& m) {
  return m["learner"]["gradient_booster"]["model"]["trees"];
}

}  // namespace

TEST(XgbHardening, ValidModelLoadsAndPredicts) {
  const nlohmann::json m = small_model();
  const xgb::Booster b = xgb::Booster::from_buffer(m.dump(), "m.json");
  std::vector<float> x = {3, 3}, out(1);
  b.predict_dense(x.data(), 1, 2, out.data());
  EXPECT_TRUE(std::isfinite(out[0]));
}

TEST(XgbHardening, TreesXgboostWouldMisreadAreRefused) {
  struct Case {
    std::function<void(nlohmann::json&)> damage;
    const char* expect;
  };
  const std::vector<Case> cases = {
      // a node reached twice (a cycle or a shared subtree): XGBoost's predictor can loop forever
      {[](nlohmann::json& m) { trees(m)[0]["right_children"][0] = trees(m)[0]["left_children"][0]; },
       "is reached twice (cyclic tree)"},
      {[](nlohmann::json& m) { trees(m)[0]["left_children"][0] = 0; },
       "node 0 has a child index out of range"},
      {[](nlohmann::json& m) { trees(m)[0]["right_children"][0] = 1000; },
       "node 0 has a child index out of range"},
      {[](nlohmann::json& m) { trees(m)[0]["split_indices"][0] = 99; }, "node 0 splits on feature 99 of 2"},
      // a repeated id: XGBoost leaves a tree slot empty and crashes predicting
      {[](nlohmann::json& m) { trees(m)[1]["id"] = 0; }, "trees[1].id is not 1"},
      {[](nlohmann::json& m) { trees(m)[0]["tree_param"]["num_nodes"] = "100000"; }, "num_nodes differs"},
      {[](nlohmann::json& m) { m["learner"]["gradient_booster"]["model"]["tree_info"][0] = 5; },
       "one output group only"},
      {[](nlohmann::json& m) {
         m["learner"]["gradient_booster"]["model"]["gbtree_model_param"]["num_trees"] = "9";
       },
       "num_trees=9 but 3 trees"},
      // an array XGBoost reads without checking that it is there (it crashed loading)
      {[](nlohmann::json& m) { trees(m)[0].erase("split_type"); }, "trees[0].split_type is missing"},
      {[](nlohmann::json& m) { trees(m)[0]["sum_hessian"].erase(0); }, "trees[0].sum_hessian does not have"},
      {[](nlohmann::json& m) { trees(m)[0]["parents"][1] = 2; }, "children name another parent"},
      {[](nlohmann::json& m) { m["learner"]["gradient_booster"]["name"] = "gblinear"; }, "is not \"gbtree\""},
      {[](nlohmann::json& m) {
         m["learner"]["feature_types"] = {"c", "q"};
       },
       "feature_types must be empty"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json m = small_model();
    cases[i].damage(m);
    const std::string e = error_of([&] { (void)xgb::Booster::from_buffer(m.dump(), "m.json"); });
    EXPECT_EQ(e.rfind("m.json: ", 0), 0u) << i << ": " << e;
    EXPECT_NE(e.find(cases[i].expect), std::string::npos) << i << ": " << e;
  }
  EXPECT_NE(error_of([] {
              (void)xgb::Booster::from_buffer("UBJ\x01\x02", "m.ubj");
            }).find("not an XGBoost JSON model"),
            std::string::npos);
  const std::string deep = "{\"learner\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(
      error_of([&] { (void)xgb::Booster::from_buffer(deep, "deep.json"); }).find("nested deeper than 64"),
      std::string::npos);
}

TEST(LayerModelHardening, ManifestFormatOfTheWrongTypeIsAnError) {
  const fs::path dir = fs::path(testing::TempDir()) / "manifest-format";
  fs::create_directories(dir);
  std::ofstream(dir / "manifest.json") << R"({"format": {"linear": 1}, "version": 2})";
  const std::string e = error_of([&] { (void)LayerPredictor::load(dir.string()); });
  EXPECT_NE(e.find("manifest.json.format={\"linear\":1} is not a string"), std::string::npos) << e;
}

TEST(NeusightHardening, ShapeProductsDoNotOverflow) {
  const fs::path p = fs::path(testing::TempDir()) / "overflow.csv";
  std::ofstream(p) << "OPName,Latency,Device,B,M,N,K,H\n"
                   << "linear,0.5,Tesla T4,999999999999,999999999999,64,64,1\n";
  NeusightImportSummary sum;
  const std::string e = error_of([&] {
    (void)read_neusight_csv(p.string(), "c", {{"Tesla T4", "spec:T4"}}, sum);
  });
  EXPECT_NE(e.find(p.string() + ":2: "), std::string::npos) << e;
  EXPECT_NE(e.find("B x M = "), std::string::npos) << e;
}
