// scaledl import aiconfigurator | kernelbench | vidur | deepbench (docs/gpu-data.md): the
// commands on the committed copies, their summaries, and the bad inputs of each: one
// "scaledl: error:" line, exit 1, and the store as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

std::string root_of(const std::string& source) {
  return kSrc + "/datasets/gpus/" + source;
}

std::string import_cmd(const std::string& source, const std::string& root, const std::string& db) {
  return "import " + source + " --root " + root + " --db " + db + " --devices " + kSrc + "/models/devices";
}

}  // namespace

TEST(CliGpuImport, EachSourceImportsItsCommittedCopyOnceAndSaysWhatItRefused) {
  const std::string db = fresh_store_path("gpu-import-all.sqlite");
  size_t layers = 0;
  for (const char* s : {"aiconfigurator", "kernelbench", "vidur", "deepbench"}) {
    SCOPED_TRACE(s);
    CliResult r = run_cli(import_cmd(s, root_of(s), db) + " --json");
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("source"), s);
    EXPECT_GT(j.at("layer_rows").get<size_t>(), 100u);
    EXPECT_EQ(j.at("layers_inserted"), j.at("layer_rows"));
    EXPECT_GE(j.at("per_device").size(), 3u);
    layers += j.at("layers_inserted").get<size_t>();
    // A second import of the same copy adds nothing.
    r = run_cli(import_cmd(s, root_of(s), db) + " --json");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("layers_inserted"), 0);
  }
  scaledl::Store store(db, /*read_only=*/true);
  EXPECT_EQ(store.layers().size(), layers);
  // Every row's device is a spec sheet's, and at least 25 GPU types have rows.
  EXPECT_GE(store.devices().size(), 25u);
  for (const auto& d : store.devices()) EXPECT_EQ(d.kind, "spec") << d.name;
  // The text summary names the refusals: the Vidur copy has an H100 NVL without a spec sheet.
  CliResult t = run_cli(import_cmd("vidur", root_of("vidur"), fresh_store_path("gpu-import-text.sqlite")));
  ASSERT_EQ(t.rc, 0) << t.out;
  EXPECT_NE(t.out.find("refused"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("no spec sheet for NVIDIA H100 NVL"), std::string::npos) << t.out;
}

TEST(CliGpuImport, BadInputsAreOneErrorLineAndLeaveTheStoreAsItWas) {
  const std::string db = fresh_store_path("gpu-import-bad.sqlite");
  ASSERT_EQ(run_cli(import_cmd("deepbench", root_of("deepbench"), db)).rc, 0);
  const size_t before = scaledl::Store(db, true).layers().size();
  ASSERT_GT(before, 0u);

  expect_one_error(import_cmd("deepbench", root_of("deepbench"), db) + " --tolerance -1", "--tolerance=-1");
  expect_one_error(import_cmd("deepbench", root_of("deepbench"), db) + " --tolerance nan", "--tolerance");
  expect_one_error(
      "import deepbench --root " + root_of("deepbench") + " --db " + db + " --devices /nonexistent",
      "/nonexistent");
  expect_one_error(import_cmd("kernelbench", "/nonexistent/kb", db), "/nonexistent/kb");
  expect_one_error(import_cmd("training-kinds", "/nonexistent/tk", db),
                   "--root=/nonexistent/tk: not a directory");
  {  // our H200's folder imports through the same command
    CliResult r = run_cli(import_cmd("training-kinds", kSrc + "/datasets/h200/training-kinds",
                                     fresh_store_path("gpu-import-tk.sqlite")) +
                          " --json");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("per_device").at("spec:NVIDIA H200"), 771);
  }

  // A copy whose GEMM table has a time that is not a number: file:line and the value.
  const std::string bad = testing::TempDir() + "/deepbench-bad";
  scaledl::remove_tree(bad);
  fs::create_directories(bad);
  for (const auto& e : fs::directory_iterator(root_of("deepbench")))
    if (e.is_regular_file()) fs::copy_file(e.path(), bad + "/" + e.path().filename().string());
  std::string gemm = slurp(bad + "/gemm.csv");
  gemm += "NVIDIA V100,Float,1024,16,1024,N,N,fast\n";
  write(bad + "/gemm.csv", gemm);
  expect_one_error(import_cmd("deepbench", bad, db + "2"), "gemm.csv:");
  expect_one_error(import_cmd("deepbench", bad, db + "2"), "fast");
  // The same into the filled store: nothing lost, nothing added.
  expect_one_error(import_cmd("deepbench", bad, db), "fast");
  EXPECT_EQ(scaledl::Store(db, true).layers().size(), before);

  // A file that is not a store.
  const std::string junk = testing::TempDir() + "/not-a-store.sqlite";
  write(junk, "this is not SQLite");
  expect_one_error(import_cmd("vidur", root_of("vidur"), junk), "not-a-store.sqlite");
  EXPECT_EQ(slurp(junk), "this is not SQLite");
}

TEST(CliGpuImport, EvalLayersFiltersByTypeAndDtypeAndRefusesUnknownOnes) {
  const std::string db = fresh_store_path("gpu-import-eval.sqlite");
  ASSERT_EQ(run_cli(import_cmd("deepbench", root_of("deepbench"), db)).rc, 0);
  expect_one_error("eval layers --db " + db + " --types lineer", "--types=\"lineer\"");
  expect_one_error("eval layers --db " + db + " --dtypes fp9", "--dtypes=\"fp9\"");
  expect_one_error("eval layers --db " + db + " --types bmm", "no layer row of the store(s) is of them");
  // FP16 tensor-core GEMMs of two GPUs (V100 and T4): one fold each, rows of one dtype.
  CliResult r = run_cli("eval layers --db " + db + " --dtypes fp16 --rounds 5 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto res = nlohmann::json::parse(r.out).at("default").at("results");
  size_t folds = 0;
  for (const auto& x : res) {
    EXPECT_EQ(x.at("dtype"), "all");  // one dtype: no per-dtype rows
    if (x.at("type") == "all" && x.at("device") != "all") ++folds;
  }
  EXPECT_EQ(folds, 2u);
}

TEST(CliGpuImport, PredictSaysWhatAnAmdOrIntelPredictionIs) {
  const std::string base = "predict " + kSrc + "/models/gpt2.json --batch 2 --seq 128 --bundle " + kSrc +
                           "/models/bundles/default --mode inference --device-spec " + kSrc +
                           "/models/devices/";
  for (const char* f : {"mi300x.json", "arc-pro-b60.json"}) {
    CliResult r = run_cli(base + f + " --json");
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.contains("vendor")) << f;
    EXPECT_NE(j.at("vendor").get<std::string>().find("learnt mostly from NVIDIA GPUs"), std::string::npos);
    r = run_cli(base + f);
    EXPECT_NE(r.out.find("\nvendor       "), std::string::npos) << r.out;
  }
  CliResult r = run_cli(base + "h100-sxm.json --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("vendor"));
}

TEST(CliGpuImport, Fp8IsTransformerEnginesRecipeAndNeedsFp8TensorCores) {
  // --dtype fp8 is the FP8 recipe (FP8 GEMMs in the blocks' linear layers, BF16 elsewhere): it
  // predicts on an H100, its FP8 GEMMs' backward costed by the forward FP8 GEMM model (so not
  // carried over: docs/predict.md, "Backward GEMMs"); an A100 has no FP8.
  const CliResult r =
      run_cli("predict " + kSrc + "/models/gpt2.json --batch 2 --seq 128 --bundle " + kSrc +
              "/models/bundles/default --dtype fp8 --device-spec " + kSrc + "/models/devices/h100-sxm.json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string& out = r.out;
  EXPECT_NE(out.find(", fp8, mode train"), std::string::npos) << out;
  EXPECT_NE(out.find("extrapolated "), std::string::npos) << out;
  EXPECT_EQ(out.find("linear.bwd fp8"), std::string::npos) << out;
  expect_one_error("predict " + kSrc + "/models/gpt2.json --batch 2 --seq 128 --bundle " + kSrc +
                       "/models/bundles/default --dtype fp8 --device-spec " + kSrc +
                       "/models/devices/a100-sxm4-80gb.json",
                   "dtype=fp8 needs FP8 tensor cores (Hopper, Ada, Blackwell): the spec of \"NVIDIA "
                   "A100-SXM4-80GB\" gives no peak_fp8_gflops");
  expect_one_error("predict " + kSrc + "/models/gpt2.json --batch 2 --seq 128 --bundle " + kSrc +
                       "/models/bundles/default --dtype fp4 --device-spec " + kSrc +
                       "/models/devices/h100-sxm.json",
                   "--dtype=\"fp4\" is not a dtype");
}
