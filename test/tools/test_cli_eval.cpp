// `scaledl eval` on the committed first CPU campaign: reports, plots and the
// bad-input paths.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using scaledl::test::run_cli;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kStores =
    " --db " + kSrc + "/datasets/cpu/layers.sqlite --db " + kSrc + "/datasets/cpu/models.sqlite";
const std::string kFast = " --epochs 10 --birnn-epochs 2 --mlp-epochs 3 --seeds 1 --max-cv 0.3 --quiet";

void expect_one_error(const std::string& args, const std::string& expect) {
  scaledl::test::expect_one_error(args + " --quiet", expect);
}
}  // namespace

TEST(CliEval, OodSizeWritesReportPredictionsAndPlots) {
  const std::string out = testing::TempDir() + "/eval_" + std::to_string(getpid());
  scaledl::remove_tree(out);
  auto r =
      run_cli("eval" + kStores + " --protocol ood-size --methods sum,scaledl-tc,rf-hp,birnn,mlp-acc,prenet" +
              kFast + " --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* f : {"report.md", "report.json", "predictions.csv", "pred_vs_measured.png",
                        "pred_vs_measured.svg", "ape_cdf.png", "ape_cdf.svg"})
    EXPECT_TRUE(fs::is_regular_file(out + "/" + f) && fs::file_size(out + "/" + f) > 100) << f;
  auto j = nlohmann::json::parse(std::ifstream(out + "/report.json"));
  EXPECT_EQ(j["protocol"], "ood-size");
  int rows = 0;
  for (const auto& row : j["summary"])
    if (row["family"] == "all") {
      ++rows;
      EXPECT_GT(row["n"].get<int>(), 10) << row.dump();
      EXPECT_TRUE(row["mre_pct"].is_number()) << row.dump();
      EXPECT_GE(row["p90_pct"].get<double>(), row["p50_pct"].get<double>()) << row.dump();
    }
  EXPECT_EQ(rows, 6);
  // One CSV line per (method, test run) plus the header.
  std::ifstream csv(out + "/predictions.csv");
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 1 + 6 * j["summary"][0]["n"].get<int>());
}

namespace {
/// MRE % of `method` over all test runs in an eval report directory.
double mre_all(const std::string& dir, const std::string& method) {
  auto j = nlohmann::json::parse(std::ifstream(dir + "/report.json"));
  for (const auto& row : j["summary"])
    if (row["family"] == "all" && row["method"] == method) return row["mre_pct"].get<double>();
  ADD_FAILURE() << "no 'all' row of " << method << " in " << dir;
  return NAN;
}
}  // namespace

// The product's flow on a new machine: a layer campaign there (minutes), no
// model run. On the committed second machine (datasets/cpu-intel, OpenBLAS on
// its generic core: ~4x slower matmul than the AMD host of datasets/cpu) the
// layer models trained on the AMD rows alone are far off (too slow: the probe's
// one matmul overstates how much slower its layers are); with the new machine's
// layer rows they must get much closer.
TEST(CliEval, CrossDeviceLearnsTheNewMachineFromItsLayerRowsAlone) {
  const std::string base = testing::TempDir() + "/eval_xdev_" + std::to_string(getpid());
  const std::string test = " --protocol cross-device --test-db " + kSrc +
                           "/datasets/cpu-intel/cpu-intel.sqlite" +
                           " --methods sum --no-plots --no-ablations --no-intervals" + kFast;
  scaledl::remove_tree(base);
  auto a = run_cli("eval" + kStores + test + " --out " + base + "/without");
  ASSERT_EQ(a.rc, 0) << a.out;
  auto b = run_cli("eval" + kStores + test + " --test-layers --out " + base + "/with");
  ASSERT_EQ(b.rc, 0) << b.out;
  auto j = nlohmann::json::parse(std::ifstream(base + "/with/report.json"));
  EXPECT_TRUE(j["test_layers"].get<bool>());
  EXPECT_EQ(j["devices"].size(), 2u);
  const double without = mre_all(base + "/without", "sum"), with = mre_all(base + "/with", "sum");
  EXPECT_GT(without, 40) << "the AMD layer models alone should be far off on the slower machine";
  EXPECT_LT(with, 0.5 * without) << "with the new machine's layer rows: " << with << " vs " << without;
  // Or its layer rows calibrate the AMD-trained layer models (predict --calibrate), 16 per kind.
  auto c = run_cli("eval" + kStores + test + " --calibrate-rows 16 --out " + base + "/calibrated");
  ASSERT_EQ(c.rc, 0) << c.out;
  const double calibrated = mre_all(base + "/calibrated", "sum");
  EXPECT_LT(calibrated, 0.5 * without)
      << "calibrated by the new machine's rows: " << calibrated << " vs " << without;
  auto jc = nlohmann::json::parse(std::ifstream(base + "/calibrated/report.json"));
  ASSERT_EQ(jc["calibrations"].size(), 1u) << jc.dump();
  EXPECT_NE(jc["calibrations"][0]["device"].get<std::string>().find("Intel"), std::string::npos);
  EXPECT_LE(jc["calibrations"][0]["factors"]["linear.fwd.fp32"]["rows"].get<int64_t>(), 16);
  EXPECT_NE(jc["layer_times"].get<std::string>().find("calibrated by 16"), std::string::npos);
  EXPECT_FALSE(jc["test_layers"].get<bool>());  // its rows calibrate, never train
}

TEST(CliEval, InModelLayerTimesAndIntervalsAreReported) {
  const std::string out = testing::TempDir() + "/eval_im_" + std::to_string(getpid());
  scaledl::remove_tree(out);
  auto r = run_cli("eval" + kStores + " --protocol ood-size --methods sum,scaledl-tc --in-model --no-plots" +
                   kFast + " --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(std::ifstream(out + "/report.json"));
  EXPECT_NE(j["layer_times"].get<std::string>().find("cross-fitted over 3 folds"), std::string::npos);
  ASSERT_EQ(j["intervals"].size(), 1u) << j.dump();
  const auto& iv = j["intervals"][0];
  EXPECT_EQ(iv["method"], "scaledl-tc");
  for (const char* k : {"coverage80_pct", "coverage95_pct", "out_of_domain_pct"}) {
    EXPECT_GE(iv[k].get<double>(), 0) << k;
    EXPECT_LE(iv[k].get<double>(), 100) << k;
  }
  EXPECT_GE(iv["coverage95_pct"].get<double>(), iv["coverage80_pct"].get<double>());
  EXPECT_GT(iv["median_factor95"].get<double>(), 1.0);
  // Every scaledl-tc prediction lies inside its own nested intervals.
  std::ifstream csv(out + "/predictions.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_NE(line.find("lo80_ms,hi80_ms,lo95_ms,hi95_ms,ood_distance,mode,nodes"), std::string::npos) << line;
  int tc = 0;
  while (std::getline(csv, line)) {
    if (line.find(",scaledl-tc,") == std::string::npos) continue;
    // The last column: the nodes of the run's layer graph (scripts/studies/host_bound.py reads it).
    const size_t last = line.rfind(',');
    EXPECT_GT(std::stol(line.substr(last + 1)), 10) << line;
    line.resize(last);
    std::vector<double>
        f;  // the 8 numeric fields before the mode: measured, predicted, ape, lo80, hi80, lo95, hi95, d
    size_t end = line.rfind(',');
    EXPECT_EQ(line.substr(end + 1), "train") << line;  // the last column: the run's mode
    for (int k = 0; k < 8; ++k) {
      const size_t b = line.rfind(',', end - 1);
      f.insert(f.begin(), std::stod(line.substr(b + 1, end - b - 1)));
      end = b;
    }
    EXPECT_LE(f[5], f[3]);
    EXPECT_LE(f[3], f[1]);
    EXPECT_LE(f[1], f[4]);
    EXPECT_LE(f[4], f[6]);
    EXPECT_GE(f[7], 0);
    ++tc;
  }
  EXPECT_GT(tc, 10);
}

namespace {
/// The fields of one CSV line, quotes ("...", no escaped quotes inside) taken off.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"')
      quoted = !quoted;
    else if (ch == ',' && !quoted)
      f.emplace_back();
    else
      f.back() += ch;
  }
  return f;
}

/// predicted_ms of `method` per "seed model batch seq" in an eval's predictions.csv.
std::map<std::string, double> predictions_of(const std::string& dir, const std::string& method) {
  std::map<std::string, double> out;
  std::ifstream csv(dir + "/predictions.csv");
  std::string line;
  std::getline(csv, line);
  const std::vector<std::string> head = csv_fields(line);
  EXPECT_GE(head.size(), 12u) << line;
  if (head.size() < 12) return out;
  EXPECT_EQ(head[0], "seed");
  EXPECT_EQ(head[2], "method");
  EXPECT_EQ(head[3], "model");
  EXPECT_EQ(head[8], "batch");
  EXPECT_EQ(head[9], "seq_len");
  EXPECT_EQ(head[11], "predicted_ms");
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = csv_fields(line);
    if (f.size() != head.size() || f[2] != method) continue;
    out[f[0] + " " + f[3] + " " + f[8] + " " + f[9]] = std::stod(f[11]);
  }
  return out;
}
}  // namespace

// --graph-members N: the split's graph model and N - 1 more of the next seeds, combined as a bundle's
// members: each run's prediction is the geometric mean of the members' (T_comm = 0 on one CPU, so of
// their alpha x T_sum), the members being the models that --seeds trains alone.
TEST(CliEval, GraphMembersCombineAsABundlesMembers) {
  const std::string base = testing::TempDir() + "/eval_members_" + std::to_string(getpid());
  const std::string common =
      "eval" + kStores +
      " --protocol ood-size --methods scaledl-tc --no-plots --no-intervals --epochs 10 "
      "--max-cv 0.3 --quiet";
  scaledl::remove_tree(base + "-alone");
  scaledl::remove_tree(base + "-two");
  auto alone = run_cli(common + " --seeds 2 --out " + base + "-alone");
  ASSERT_EQ(alone.rc, 0) << alone.out;
  auto two = run_cli(common + " --seeds 1 --graph-members 2 --out " + base + "-two");
  ASSERT_EQ(two.rc, 0) << two.out;
  const auto a = predictions_of(base + "-alone", "scaledl-tc");
  const auto e = predictions_of(base + "-two", "scaledl-tc");
  ASSERT_GT(e.size(), 10u);
  int differs = 0;
  for (const auto& [key, ms] : e) {
    ASSERT_EQ(key.rfind("0 ", 0), 0u) << key;
    const std::string run = key.substr(2);
    ASSERT_TRUE(a.count("0 " + run) && a.count("1 " + run)) << run;
    const double s0 = a.at("0 " + run), s1 = a.at("1 " + run);
    EXPECT_NEAR(ms, std::sqrt(s0 * s1), 1e-5 * ms) << run;  // 6 digits in the CSV; their mean differs more
    differs += std::fabs(s0 - s1) > 1e-3 * s0;
  }
  EXPECT_GT(differs, 0);  // the two seeds' models differ, so the test can tell a mean from either
  const auto j = nlohmann::json::parse(std::ifstream(base + "-two/report.json"));
  EXPECT_EQ(j["scaledl_config"]["graph_members"], 2);
  EXPECT_NE(scaledl::test::slurp(base + "-two/report.md").find("2 models per graph method and split"),
            std::string::npos);
}

TEST(CliEval, BadInputsGiveOneErrorLine) {
  const std::string out = testing::TempDir() + "/eval_bad_" + std::to_string(getpid());
  expect_one_error("eval" + kStores + " --protocol leave-none-out --out " + out,
                   "--protocol=\"leave-none-out\"");
  expect_one_error("eval --db " + kSrc + "/datasets/cpu/layers.sqlite --protocol id --out " + out,
                   "no usable model runs");
  expect_one_error("eval" + kStores + " --protocol cross-device --out " + out, "needs --test-db");
  expect_one_error("eval" + kStores + " --protocol id --methods sum,oracle --out " + out, "\"oracle\"");
  // ok rows only: the ViT family has 4 of 8, too few for an 80/20 split.
  expect_one_error("eval" + kStores + " --protocol id --max-cv 0 --out " + out, "family vit has 4 runs");
  // The training store's own device is not "other hardware".
  expect_one_error("eval" + kStores + " --protocol cross-device --test-db " + kSrc +
                       "/datasets/cpu/models.sqlite --out " + out,
                   "also a training device");
  expect_one_error("eval --protocol id --out " + out, "--db STORE is required");
  // --test-layers: cross-device only, and the test store must hold the new machine's layer rows.
  expect_one_error("eval" + kStores + " --protocol id --test-layers --out " + out,
                   "--test-layers is only for --protocol=cross-device");
  expect_one_error("eval" + kStores + " --protocol cross-device --test-db " + kSrc +
                       "/datasets/cpu-v2/cpu-v2-rest.sqlite --test-layers --out " + out,
                   "holds no ok layer rows");
  expect_one_error("eval" + kStores + " --protocol id --in-model --crossfit-folds 1 --out " + out,
                   "--crossfit-folds=1 must be in [2, 20]");
  expect_one_error("eval" + kStores + " --protocol id --alpha-bound 1 --out " + out,
                   "--alpha-bound=1 must be > 1");
  expect_one_error("eval" + kStores + " --protocol id --ood-tau -1 --out " + out,
                   "--ood-tau=-1 must be >= 0");
  expect_one_error("eval" + kStores + " --protocol id --graph-members 0 --out " + out,
                   "--graph-members=0 must be in [1, 16]");
  expect_one_error("eval" + kStores + " --protocol id --layer-max-cv -1 --out " + out,
                   "--layer-max-cv=-1 must be in [0, 10]");
  EXPECT_FALSE(fs::exists(out + "/report.md"));
}
