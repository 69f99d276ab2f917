// `scaledl train` -> one bundle -> `scaledl predict --bundle`, and the bundle's
// refusals: another format version, a missing file, an altered file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using scaledl::test::expect_one_error;
using scaledl::test::run_cli;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kStores =
    " --db " + kSrc + "/datasets/cpu/layers.sqlite --db " + kSrc + "/datasets/cpu/models.sqlite";

class CliBundle : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "/bundle_" + std::to_string(getpid());
    scaledl::remove_tree(dir_);
    auto r = run_cli("train" + kStores + " --out " + dir_ + "/b --epochs 20");
    ASSERT_EQ(r.rc, 0) << r.out;
    // Progress on stderr, a log here (no terminal): a line per stage and per layer kind.
    EXPECT_NE(r.out.find("train: ["), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("] refinement: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("learn: linear"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\r'), std::string::npos);  // no bar redrawn in place in a log
  }
  /// A fresh copy of the trained bundle to tamper with.
  static std::string copy(const std::string& name) {
    const std::string d = dir_ + "/" + name;
    scaledl::remove_tree(d);
    fs::copy(dir_ + "/b", d, fs::copy_options::recursive);
    return d;
  }
  static std::string predict(const std::string& bundle, const std::string& extra = "") {
    return "predict " + kSrc + "/models/gpt2.json --batch 2 --seq 64 --bundle " + bundle + " --db " + kSrc +
           "/datasets/cpu/layers.sqlite --json" + extra;
  }
  static std::string dir_;
};
std::string CliBundle::dir_;

}  // namespace

TEST_F(CliBundle, ManifestDescribesTheTrainingDataAndChecksumsEveryFile) {
  auto m = nlohmann::json::parse(std::ifstream(dir_ + "/b/manifest.json"));
  EXPECT_EQ(m["format"], "scaledl-bundle");
  EXPECT_EQ(m["format_version"], 3);
  ASSERT_TRUE(m["graph"].contains("intervals")) << m["graph"].dump();
  const auto& iv = m["graph"]["intervals"];
  EXPECT_GT(iv["n_cal"].get<int>(), 5);
  EXPECT_GT(iv["q80"].get<double>(), 0);
  EXPECT_GE(iv["q95"].get<double>(), iv["q80"].get<double>());
  EXPECT_GE(iv["kappa"].get<double>(), iv["kappa_min"].get<double>());
  EXPECT_FALSE(m["build_commit"].get<std::string>().empty());
  EXPECT_EQ(m["devices"].size(), 1u);
  ASSERT_EQ(m["training"]["layer_row_devices"].size(), 1u) << m["training"].dump();
  EXPECT_GT(m["training"]["layer_row_devices"].begin().value().get<int>(), 100);
  EXPECT_GT(m["training"]["model_runs"].get<int>(), 50);
  EXPECT_GT(m["training"]["layer_rows"].get<int>(), 100);
  EXPECT_TRUE(m["training"]["global_feature_ranges"].contains("log_batch"));
  EXPECT_TRUE(m["files"].contains("graph.safetensors"));
  EXPECT_TRUE(m["files"].contains("layers/manifest.json"));
  for (auto& [f, sum] : m["files"].items()) {
    EXPECT_TRUE(fs::is_regular_file(dir_ + "/b/" + f)) << f;
    EXPECT_EQ(sum.get<std::string>().size(), 64u) << f;
  }
}

TEST_F(CliBundle, PredictsWithTheBundleAlone) {
  auto r = run_cli(predict(dir_ + "/b", " --samples 1000"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["refined"].get<bool>());
  EXPECT_GT(j["t_iter_ms"].get<double>(), 0);
  EXPECT_GT(j["t_sum_ms"].get<double>(), 0);
  // GPT-2 with 12 layers and a 50k vocabulary is far outside these tiny runs.
  EXPECT_FALSE(j["outside_training_range"].empty()) << r.out;
  EXPECT_TRUE(j["out_of_domain"].get<bool>()) << r.out;
  EXPECT_GT(j["ood_distance"].get<double>(), 0) << r.out;
  // Nested intervals around the point prediction, in ms and for the epoch.
  const double t = j["t_iter_ms"].get<double>();
  const auto i80 = j["interval_ms"]["80"], i95 = j["interval_ms"]["95"];
  EXPECT_LT(i95[0].get<double>(), i80[0].get<double>());
  EXPECT_LT(i80[0].get<double>(), t);
  EXPECT_GT(i80[1].get<double>(), t);
  EXPECT_GT(i95[1].get<double>(), i80[1].get<double>());
  const double iters = j["iterations_per_epoch"].get<double>();
  EXPECT_NEAR(j["t_epoch_interval_s"]["95"][1].get<double>(), iters * i95[1].get<double>() / 1000,
              1e-9 * iters * t);

  std::string cmd = predict(dir_ + "/b");
  cmd = cmd.substr(0, cmd.size() - std::string(" --json").size()) + " --samples 1000";  // text output
  auto text = run_cli(cmd);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("80 % ["), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("OUT OF DOMAIN"), std::string::npos) << text.out;
  // The device of the layer store trained the layer models; another one did not.
  EXPECT_NE(text.out.find("layer timings (forward, backward) of this device trained the layer models"),
            std::string::npos)
      << text.out;
  EXPECT_GT(j["device_layer_rows"].get<int>(), 100) << r.out;
  auto other = run_cli("predict " + kSrc + "/models/gpt2.json --batch 2 --seq 64 --bundle " + dir_ +
                       "/b --device-spec " + kSrc + "/datasets/cpu-intel/probe.json --json");
  ASSERT_EQ(other.rc, 0) << other.out;
  EXPECT_EQ(nlohmann::json::parse(other.out)["device_layer_rows"].get<int>(), 0) << other.out;
}

TEST_F(CliBundle, RefusesAnAlteredMissingOrForeignBundle) {
  const std::string altered = copy("altered");
  for (auto& e : fs::directory_iterator(altered + "/layers"))
    if (e.path().filename() != "manifest.json") {
      std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(10);
      f.put('#');
      break;
    }
  expect_one_error(predict(altered), "altered or truncated");

  const std::string missing = copy("missing");
  fs::remove(missing + "/graph.safetensors");
  expect_one_error(predict(missing), "file graph.safetensors is missing");

  const std::string foreign = copy("foreign");
  auto m = nlohmann::json::parse(std::ifstream(foreign + "/manifest.json"));
  m["format_version"] = 99;
  std::ofstream(foreign + "/manifest.json") << m.dump();
  expect_one_error(predict(foreign), "format_version=99");

  expect_one_error(predict(dir_ + "/nonexistent"), "not a directory");
  expect_one_error(predict(dir_ + "/b", " --layers " + dir_ + "/b/layers"), "drop --layers");
}

TEST_F(CliBundle, BadTrainingInputsLeaveNoBundle) {
  const std::string out = dir_ + "/never";
  expect_one_error("train --quiet --db " + kSrc + "/datasets/cpu/layers.sqlite --out " + out,
                   "no ok model runs");
  EXPECT_FALSE(fs::exists(out));
  expect_one_error("train --quiet --db " + dir_ + "/no-such.sqlite --out " + out, "no-such.sqlite");
  EXPECT_FALSE(fs::exists(out));
  expect_one_error("train --out " + out, "--db STORE is required");
  expect_one_error("train --quiet" + kStores + " --out " + out + " --encoder gcn", "gcn");
  EXPECT_FALSE(fs::exists(out));
  // The stage commands still parse under the `train` group.
  auto r = run_cli("train layers --help");
  EXPECT_EQ(r.rc, 0) << r.out;
}

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a < s.size()) {
    size_t b = s.find('\n', a);
    if (b == std::string::npos) b = s.size();
    out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

}  // namespace

TEST_F(CliBundle, SweepPredictsEveryCombinationLikeSinglePredictions) {
  const std::string base = "predict " + kSrc + "/models/gpt2.json --bundle " + dir_ + "/b --db " + kSrc +
                           "/datasets/cpu/layers.sqlite --samples 1000";
  auto r = run_cli(base + " --sweep batch=1,2,4 --sweep seq=32,64");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), 7u) << r.out;  // header + 3 x 2
  EXPECT_EQ(rows[0].rfind("model,batch,seq,", 0), 0u) << rows[0];
  // Row "batch 2, seq 64" equals a lone prediction of that configuration.
  auto one = run_cli(base + " --batch 2 --seq 64 --json");
  ASSERT_EQ(one.rc, 0) << one.out;
  const double t = nlohmann::json::parse(one.out)["t_iter_ms"].get<double>();
  bool found = false;
  for (const auto& row : rows)
    if (row.find(",2,64,") != std::string::npos) {
      // t_iter_ms is the 12th field.
      size_t pos = 0;
      for (int f = 0; f < 11; ++f) pos = row.find(',', pos) + 1;
      EXPECT_NEAR(std::stod(row.substr(pos)) / t, 1.0, 1e-4) << row;
      found = true;
    }
  EXPECT_TRUE(found) << r.out;
  // A config key swept too: 2 depths x 1 batch.
  auto depth = run_cli(base + " --sweep config.n_layer=2,4 --sweep batch=2 --json");
  ASSERT_EQ(depth.rc, 0) << depth.out;
  auto j = nlohmann::json::parse(depth.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_LT(j[0]["t_sum_ms"].get<double>(), j[1]["t_sum_ms"].get<double>());

  expect_one_error(base + " --sweep batch", "not KEY=V1,V2");
  expect_one_error(base + " --sweep warp=1,2", "unknown key \"warp\"");
  expect_one_error(base + " --sweep batch=1,x", "batch=x is not an integer");
  expect_one_error(base + " --sweep batch=1,,2", "empty value");
  expect_one_error(base + " --sweep batch=0", "batch=0 must be in");
  expect_one_error(base + " --sweep batch=1 --sweep batch=2", "given twice");
}

TEST_F(CliBundle, CsvPredictsOneConfigurationPerRowAndNamesBadCells) {
  const std::string csv = dir_ + "/configs.csv";
  std::ofstream(csv) << "model,batch,seq,samples\n"
                     << kSrc << "/models/gpt2.json,2,64,1000\n"
                     << kSrc << "/models/bert-base.json,1,32,\n";
  const std::string base = "predict --bundle " + dir_ + "/b --db " + kSrc + "/datasets/cpu/layers.sqlite";
  auto r = run_cli(base + " --csv " + csv);
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto rows = lines_of(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(rows[1].rfind("\"gpt2\",2,64,", 0), 0u) << rows[1];
  EXPECT_EQ(rows[2].rfind("\"bert-base\",1,32,", 0), 0u) << rows[2];
  EXPECT_NE(rows[1].find(",500,"), std::string::npos) << rows[1];  // 1000 samples / batch 2

  std::ofstream(dir_ + "/bad1.csv") << "model,batch\n" << kSrc << "/models/gpt2.json,two\n";
  expect_one_error(base + " --csv " + dir_ + "/bad1.csv", "batch=two is not an integer");
  std::ofstream(dir_ + "/bad2.csv") << "model,colour\n" << kSrc << "/models/gpt2.json,red\n";
  expect_one_error(base + " --csv " + dir_ + "/bad2.csv", "unknown key \"colour\"");
  std::ofstream(dir_ + "/bad3.csv") << "model,batch\n" << kSrc << "/models/gpt2.json,2,3\n";
  expect_one_error(base + " --csv " + dir_ + "/bad3.csv", "bad3.csv:2: 3 fields, the header has 2");
  expect_one_error(base + " --csv " + dir_ + "/none.csv", "cannot open");
  expect_one_error(base, "MODEL.json is required");
  expect_one_error(base + " --csv " + csv + " --sweep batch=1", "not both");
}

TEST_F(CliBundle, InModelBundleTrainsTheRefinementOnCrossFittedLayerTimes) {
  const std::string out = dir_ + "/im";
  auto r = run_cli("train" + kStores + " --in-model-db " + kSrc +
                   "/datasets/cpu/models.sqlite --crossfit-folds 3" + " --epochs 10 --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto m = nlohmann::json::parse(std::ifstream(out + "/manifest.json"));
  EXPECT_EQ(m["training"]["layer_times"], "cross-fitted over 3 folds of the runs");
  EXPECT_GT(m["training"]["layer_samples"].get<int>(), m["training"]["layer_rows"].get<int>());
  EXPECT_NE(m["command"].get<std::string>().find("--in-model-db"), std::string::npos);
  expect_one_error("train --quiet" + kStores + " --in-model-db " + kSrc +
                       "/datasets/cpu/models.sqlite --crossfit-folds 1" + " --out " + dir_ + "/im1",
                   "--crossfit-folds=1 must be >= 2");
  EXPECT_FALSE(fs::exists(dir_ + "/im1"));
}

TEST_F(CliBundle, GraphMembersAreAveragedAndEachIsChecked) {
  // --graph-members 2: the refinement of --seed and of the next seed, both files checksummed; the
  // prediction is the geometric mean of their alphas, so it differs from the one-member bundle's
  // (whose refinement is the first member).
  const std::string two = dir_ + "/two";
  auto r = run_cli("train --quiet" + kStores + " --out " + two + " --epochs 20 --graph-members 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto m = nlohmann::json::parse(std::ifstream(two + "/manifest.json"));
  ASSERT_EQ(m["graph"]["members"].size(), 1u);
  EXPECT_EQ(m["graph"]["members"][0]["file"], "graph-1.safetensors");
  EXPECT_EQ(m["graph"]["members"][0]["seed"], 1);
  EXPECT_TRUE(m["files"].contains("graph-1.safetensors"));
  EXPECT_NE(m["command"].get<std::string>().find("--graph-members 2"), std::string::npos);
  auto one = run_cli(predict(dir_ + "/b"));
  auto ens = run_cli(predict(two));
  ASSERT_EQ(one.rc, 0) << one.out;
  ASSERT_EQ(ens.rc, 0) << ens.out;
  const double a1 = nlohmann::json::parse(one.out)["alpha"].get<double>();
  const double a2 = nlohmann::json::parse(ens.out)["alpha"].get<double>();
  EXPECT_GT(std::abs(a2 / a1 - 1), 1e-6) << a1 << " " << a2;
  // A member missing, or a manifest naming a file it does not checksum: one error line each.
  const std::string missing = dir_ + "/two-missing";
  scaledl::remove_tree(missing);
  fs::copy(two, missing, fs::copy_options::recursive);
  fs::remove(missing + "/graph-1.safetensors");
  expect_one_error(predict(missing), "file graph-1.safetensors is missing");
  auto bad = m;
  bad["graph"]["members"][0]["file"] = "graph-9.safetensors";
  std::ofstream(missing + "/manifest.json") << bad.dump();
  expect_one_error(predict(missing),
                   "graph.members[0].file=\"graph-9.safetensors\" names graph-9.safetensors");
  expect_one_error("train --quiet" + kStores + " --out " + dir_ + "/never --graph-members 0",
                   "--graph-members=0 must be in [1, 16]");
}
