// scaledl comm presets and the fabric presets predict --gpus and scale use by default
// (docs/comm.md "Fabric presets"): the committed presets are what the committed data gives,
// the leave-one-GPU-out runs, and the bad inputs are one line each.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "test_util.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

/// A store with the collective rows of the committed AIConfigurator and Vidur copies.
std::string collectives_store() {
  static const std::string db = [] {
    const std::string p = fresh_store_path("fabrics-collectives.sqlite");
    for (const char* s : {"aiconfigurator", "vidur"}) {
      const CliResult r = run_cli(std::string("import ") + s + " --root " + kSrc + "/datasets/gpus/" + s +
                                  " --db " + p + " --devices " + kSrc + "/models/devices");
      EXPECT_EQ(r.rc, 0) << r.out;
    }
    return p;
  }();
  return db;
}

}  // namespace

TEST(CliFabrics, TheCommittedPresetsAreWhatTheCommittedDataGives) {
  const fs::path out = fs::path(testing::TempDir()) / "fabrics_rebuilt";
  scaledl::remove_tree(out);
  const std::string loo = (fs::path(testing::TempDir()) / "fabrics_loo.csv").string();
  const CliResult r = run_cli("comm presets --db " + collectives_store() + " --defs " + kSrc +
                              "/datasets/gpus/fabrics.json --out " + out.string() + " --loo " + loo);
  ASSERT_EQ(r.rc, 0) << r.out;
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(kSrc + "/models/fabrics")) {
    if (e.path().extension() != ".json") continue;  // the README
    ++files;
    const fs::path mine = out / e.path().filename();
    ASSERT_TRUE(fs::exists(mine)) << mine;
    EXPECT_EQ(slurp(mine.string()), slurp(e.path().string())) << e.path().filename();
  }
  EXPECT_GE(files, 10u);
  size_t rebuilt = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(out)) ++rebuilt;
  EXPECT_EQ(rebuilt, files);
  // The leave-one-GPU-out: a summary per kind and a CSV of the rows.
  EXPECT_NE(r.out.find("leave-one-GPU-out (collectives)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnvswitch "), std::string::npos) << r.out;
  EXPECT_EQ(slurp(loo).rfind("fabric,kind,collective,world,bytes,measured_gbs,fitted_gbs,predicted_gbs\n", 0),
            0u);
}

TEST(CliFabrics, BadInputsAreOneLine) {
  const std::string defs = kSrc + "/datasets/gpus/fabrics.json";
  expect_one_error("comm presets --db " + collectives_store() + " --defs /nonexistent/fabrics.json",
                   "/nonexistent/fabrics.json");
  const std::string empty = fresh_store_path("fabrics-empty.sqlite");
  ASSERT_EQ(run_cli("import aiconfigurator --root " + kSrc + "/datasets/gpus/aiconfigurator --db " + empty +
                    " --devices " + kSrc + "/models/devices --campaign x")
                .rc,
            0);
  // Campaign names differ from the definitions': the first measured fabric says which is missing.
  expect_one_error("comm presets --db " + empty + " --defs " + defs,
                   "fabric hgx-a100: campaign aiconfigurator-a100_sxm has no collective rows");
  expect_one_error("comm presets --db " + collectives_store() + " --defs " + defs + " --loo-min-bytes 0",
                   "--loo-min-bytes");
}

TEST(CliFabrics, PredictAcrossNodesUsesThePresetsNodeAndInterModel) {
  const std::string base = "predict --bundle " + kSrc + "/models/bundles/default " + kSrc +
                           "/models/gpt2.json --device-spec " + kSrc +
                           "/models/devices/h100-sxm.json --seq 1024 --batch 8 --dtype bf16 ";
  const CliResult r = run_cli(base + "--gpus 16 --tp 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_NE(j["collectives"].get<std::string>().find("fabric hgx-h100"), std::string::npos) << j.dump(1);
  EXPECT_EQ(j["plan"]["nodes"], 2) << j.dump(1);
  EXPECT_FALSE(j.contains("comm_warning")) << j.dump(1);  // the preset has a model across nodes
  // The same on one node of 8: its data-parallel all-reduce runs on NVLink, not the network.
  const CliResult one = run_cli(base + "--gpus 8 --tp 2 --json");
  ASSERT_EQ(one.rc, 0) << one.out;
  const auto k = nlohmann::json::parse(one.out.substr(one.out.find('{')));
  EXPECT_LT(k["t_dp_ms"].get<double>(), j["t_dp_ms"].get<double>()) << k.dump(1);
  // A preset named by --fabric replaces the GPU's own; one GPU prices no collective and says none.
  const CliResult h800 = run_cli(base + "--gpus 8 --fabric hgx-h800");
  ASSERT_EQ(h800.rc, 0) << h800.out;
  EXPECT_NE(h800.out.find("collectives  fabric hgx-h800 (--fabric; derived)"), std::string::npos) << h800.out;
  const CliResult single = run_cli(base + "--gpus 1");
  ASSERT_EQ(single.rc, 0) << single.out;
  EXPECT_EQ(single.out.find("collectives"), std::string::npos) << single.out;
}

TEST(CliParallelTerms, ContextParallelVirtualStagesAndTheOverlappedReduction) {
  const std::string base = "predict --bundle " + kSrc + "/models/bundles/default " + kSrc +
                           "/models/gpt2.json --device-spec " + kSrc +
                           "/models/devices/h100-sxm.json --seq 1024 --batch 8 --dtype bf16 ";
  const CliResult r = run_cli(base + "--gpus 8 --cp 2 --pp 2 --vp 2 --microbatches 4 --overlap-grad-reduce");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("split        tp 1 x cp 2 x pp 2 (2 virtual stages each) x dp 2"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("context      ring attention: 1 steps of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(4 + (2 - 1) / 2 slots of stages up to"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bucket(s), the rest under the backward"), std::string::npos) << r.out;
  std::string seq1000 = base;
  seq1000.replace(seq1000.find("--seq 1024"), 10, "--seq 1000");
  expect_one_error(seq1000 + "--gpus 6 --cp 3", "--cp=3: --seq=1000 is not divisible by 2 x cp = 6");
  expect_one_error(base + "--gpus 8 --cp 3", "--gpus=8 is not a multiple of --tp x --cp x --pp = 1 x 3 x 1");
  expect_one_error(base + "--gpus 4 --vp 2", "--vp=2: virtual pipeline stages need --pp > 1");
  expect_one_error(base + "--gpus 4 --pp 4 --vp 4 --microbatches 4",
                   "--vp=4: the 12 layers of gpt2 are not divisible by --pp x --vp = 4 x 4");
  expect_one_error(base + "--gpus 4 --cp 0", "--cp=0 must be in [1, --gpus=4]");
}
