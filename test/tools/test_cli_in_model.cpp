// End-to-end: `scaledl train layers --in-model-db` on the committed CPU campaign
// (layer rows in layers.sqlite, model runs with node_times in models.sqlite),
// the group k-fold over model runs, and the bad-input paths.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using scaledl::test::run_cli;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kLayers = kSrc + "/datasets/cpu/layers.sqlite";
const std::string kModels = kSrc + "/datasets/cpu/models.sqlite";

std::string out_dir(const std::string& name) {
  return testing::TempDir() + "/in_model_" + name + "_" + std::to_string(getpid());
}

size_t trained_rows(const nlohmann::json& report) {
  size_t n = 0;
  for (const auto& [k, v] : report["model"]["models"].items()) n += v["rows"].get<size_t>();
  return n;
}

nlohmann::json all_row(const nlohmann::json& report) {
  for (const auto& r : report["cv"])
    if (r["method"] == "xgboost" && r["type"] == "all" && r["direction"] == "all") return r;
  ADD_FAILURE() << "no xgboost all/all row";
  return {};
}

/// The single line an error prints (the CLI's contract: one line, exit 1).
void expect_one_error_line(const scaledl::test::CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(r.out.rfind("scaledl: error: ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
}

}  // namespace

TEST(CliInModel, TrainsOnNodeTimesAndHoldsOutWholeRuns) {
  const std::string base =
      "train layers --db " + kLayers + " --in-model-db " + kModels +
      " --folds 3 --cv-holdout model-runs --methods xgboost --nthread 1 --min-rows 2 --json";
  auto with = run_cli(base + " --out " + out_dir("with"));
  ASSERT_EQ(with.rc, 0) << with.out;
  auto j = nlohmann::json::parse(with.out);
  const size_t iso = j["isolated_samples"].get<size_t>();
  const size_t in = j["in_model"]["samples"].get<size_t>();
  EXPECT_EQ(j["in_model"]["runs"], 57);  // the ok runs of the CPU campaign
  EXPECT_GT(in, 100u);
  EXPECT_LT(in, j["in_model"]["node_times"].get<size_t>());  // repeated blocks merged
  EXPECT_EQ(j["samples"].get<size_t>(), iso + in);
  EXPECT_EQ(all_row(j)["n"].get<size_t>(), in);  // only in-model rows are tested
  EXPECT_GT(trained_rows(j), iso);

  auto only = run_cli(base + " --in-model-eval-only --out " + out_dir("only"));
  ASSERT_EQ(only.rc, 0) << only.out;
  auto k = nlohmann::json::parse(only.out);
  EXPECT_EQ(all_row(k)["n"].get<size_t>(), in);  // same test rows
  EXPECT_LE(trained_rows(k), iso);               // the saved model never saw a node time
  EXPECT_NE(all_row(k)["mre_pct"].get<double>(), all_row(j)["mre_pct"].get<double>());
}

TEST(CliInModel, BadOptionsAndStoresGiveOneErrorLine) {
  const std::string base = "train layers --db " + kLayers + " --out " + out_dir("bad") + " --nthread 1";
  expect_one_error_line(run_cli(base + " --cv-holdout model-runs"),
                        "--cv-holdout=model-runs needs --in-model-db");
  expect_one_error_line(run_cli(base + " --cv-holdout runs --in-model-db " + kModels),
                        "--cv-holdout=runs must be rows or model-runs");
  expect_one_error_line(run_cli(base + " --in-model-eval-only --in-model-db " + kModels),
                        "--in-model-eval-only needs --cv-holdout model-runs (got --cv-holdout=rows)");
  expect_one_error_line(run_cli(base + " --in-model-db /nonexistent.sqlite"),
                        "--in-model-db=/nonexistent.sqlite: no such file");
  expect_one_error_line(run_cli(base + " --in-model-db " + kModels + " --cv-holdout model-runs --folds 99"),
                        "folds=99 exceeds the 57 model runs");

  // A store whose first run names a node its layer graph does not have.
  const std::string bad = scaledl::test::fresh_store_path("in_model_bad_node.sqlite");
  std::string key;
  {
    scaledl::Store src(kModels, true);
    scaledl::Store dst(bad);
    for (const auto& d : src.devices()) dst.put_device(d);
    auto runs = src.models();
    ASSERT_FALSE(runs.empty());
    runs[0].node_times.push_back({"encoder.0.attn.nosuch", 0.1});
    key = scaledl::model_key(runs[0]);
    ASSERT_TRUE(dst.put_model(runs[0]));
  }
  auto r = run_cli(base + " --in-model-db " + bad + " --folds 0");
  expect_one_error_line(r, "node_times name 'encoder.0.attn.nosuch' is not a node");
  EXPECT_NE(r.out.find(bad + ": model run '"), std::string::npos) << r.out;
}

TEST(CliInModel, NestedGraphCvUsesTheSameFoldsAndRetrainsLayerModels) {
  const std::string layers = out_dir("nested_layers");
  auto l = run_cli("train layers --db " + kLayers + " --in-model-db " + kModels +
                   " --folds 0 --nthread 1 --min-rows 2" + " --out " + layers);
  ASSERT_EQ(l.rc, 0) << l.out;
  const std::string out = out_dir("nested_graph");
  auto g = run_cli("train graph --db " + kModels + " --layers " + layers + " --folds 3 --epochs 3 --seed 1" +
                   " --cv-layer-db " + kLayers + " --out " + out);
  ASSERT_EQ(g.rc, 0) << g.out;
  EXPECT_NE(g.out.find("NESTED_CV_MRE_%"), std::string::npos) << g.out;
  const auto plain = scaledl::read_json_file(out + "/cv.json")["per_graph"];
  const auto nested = scaledl::read_json_file(out + "/cv-nested.json")["per_graph"];
  ASSERT_EQ(plain.size(), 57u);
  ASSERT_EQ(nested.size(), 57u);
  // The per-fold layer models never saw the test runs' node times, so T_sum differs run by run.
  size_t differ = 0;
  for (size_t i = 0; i < 57; ++i) {
    EXPECT_EQ(plain[i]["fold"], nested[i]["fold"]) << i;  // graph_cv_folds mirrors cross_validate_graphs
    EXPECT_EQ(plain[i]["label"], nested[i]["label"]) << i;
    EXPECT_EQ(plain[i]["target_ms"], nested[i]["target_ms"]) << i;
    const double a = plain[i]["before_ms"].get<double>(), b = nested[i]["before_ms"].get<double>();
    EXPECT_TRUE(std::isfinite(b) && b > 0) << i;
    differ += std::abs(a - b) > 1e-6 * a;
  }
  EXPECT_GT(differ, 50u);

  // Cross-fitting changes only the training graphs' layer times: the test graphs'
  // T_sum (before) is that of the same per-fold layer model, the refined one is not.
  const std::string xfit = out_dir("nested_xfit");
  auto x = run_cli("train graph --db " + kModels + " --layers " + layers + " --folds 3 --epochs 3 --seed 1" +
                   " --cv-layer-db " + kLayers + " --cv-layer-cross-fit --out " + xfit);
  ASSERT_EQ(x.rc, 0) << x.out;
  EXPECT_NE(x.out.find("cross-fitted"), std::string::npos) << x.out;
  const auto crossed = scaledl::read_json_file(xfit + "/cv-nested.json")["per_graph"];
  ASSERT_EQ(crossed.size(), 57u);
  size_t pred_differ = 0;
  for (size_t i = 0; i < 57; ++i) {
    EXPECT_DOUBLE_EQ(crossed[i]["before_ms"].get<double>(), nested[i]["before_ms"].get<double>()) << i;
    pred_differ += crossed[i]["pred_ms"] != nested[i]["pred_ms"];
  }
  EXPECT_GT(pred_differ, 50u);
  expect_one_error_line(run_cli("train graph --db " + kModels + " --layers " + layers +
                                " --folds 3 --epochs 1" + " --cv-layer-cross-fit --out " + xfit),
                        "--cv-layer-cross-fit needs --cv-layer-db");

  expect_one_error_line(run_cli("train graph --db " + kModels + " --layers " + layers +
                                " --epochs 1 --cv-layer-db " + kLayers + " --out " + out),
                        "--cv-layer-db=" + kLayers + " needs --folds K");
}
