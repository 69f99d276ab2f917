// `scaledl devices` and `--device-spec NAME`: the shipped sheets by their file stem.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

using namespace scaledl::test;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
}  // namespace

TEST(CliDevices, ListsTheShippedSheetsByName) {
  // Run from the source tree, where models/devices is.
  const CliResult r = run_cli("devices --json", "cd " + kSrc + " && ");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_GE(j.size(), 40u);
  bool h100 = false;
  for (const auto& d : j)
    h100 = h100 || (d["name"] == "h100-sxm" && d["device"]["name"] == "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(h100);
  const CliResult text = run_cli("devices", "cd " + kSrc + " && ");
  EXPECT_NE(text.out.find("b200 "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("prices: USD per GPU hour"), std::string::npos) << text.out;  // models/prices.json
}

TEST(CliDevices, ANameIsTheSheetAndAnUnknownOneIsOneErrorLine) {
  const std::string common = "predict " + kSrc +
                             "/models/gpt2.json --batch 4 --seq 128 --dtype bf16 --bundle " + kSrc +
                             "/models/bundles/default --json --device-spec ";
  const CliResult by_name = run_cli(common + "h100-sxm", "cd " + kSrc + " && ");
  const CliResult by_path = run_cli(common + kSrc + "/models/devices/h100-sxm.json");
  ASSERT_EQ(by_name.rc, 0) << by_name.out;
  ASSERT_EQ(by_path.rc, 0) << by_path.out;
  EXPECT_EQ(nlohmann::json::parse(by_name.out)["t_iter_ms"], nlohmann::json::parse(by_path.out)["t_iter_ms"]);
  // $SCALEDL_MODELS points anywhere else.
  const CliResult env = run_cli(common + "b200", "cd /tmp && SCALEDL_MODELS=" + kSrc + "/models ");
  EXPECT_EQ(env.rc, 0) << env.out;
  expect_one_error(common + "h100", "--device-spec=\"h100\" is neither a file nor a shipped spec sheet");
  // No models folder anywhere it looks: the line names where it looked and how to point it at one.
  const CliResult none = run_cli(common + "h100-sxm",
                                 "cd / && SCALEDL_MODELS=" + std::string(SCALEDL_BINARY_DIR) + "/no-models ");
  EXPECT_EQ(none.rc, 1) << none.out;
  EXPECT_EQ(none.out.rfind("scaledl: error: --device-spec=\"h100-sxm\" is neither a file", 0), 0u)
      << none.out;
  EXPECT_NE(none.out.find("no-models/devices"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("set SCALEDL_MODELS to the models folder"), std::string::npos) << none.out;
  EXPECT_EQ(std::count(none.out.begin(), none.out.end(), '\n'), 1) << none.out;
}

TEST(CliDevices, WithoutABundlePredictTakesTheShippedOneOfTheDevicesKind) {
  // A GPU's spec sheet: the committed default bundle, as if --bundle named it.
  // From / (no ./models there), with $SCALEDL_MODELS the only models folder.
  const std::string env = "cd / && SCALEDL_MODELS=" + kSrc + "/models ";
  const std::string job = "predict " + kSrc + "/models/gpt2.json --batch 2 --seq 128 --json ";
  const CliResult plain = run_cli(job + "--device-spec h100-sxm", env);
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const CliResult given =
      run_cli(job + "--device-spec h100-sxm --bundle " + kSrc + "/models/bundles/default", env);
  ASSERT_EQ(given.rc, 0) << given.out;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["t_iter_ms"], nlohmann::json::parse(given.out)["t_iter_ms"]);
  // A CPU's bundle is built by scripts/build_cpu_bundle.sh; without it, one line saying so.
  const std::string empty = "cd / && SCALEDL_MODELS=" + std::string(SCALEDL_BINARY_DIR) + "/no-models ";
  const CliResult cpu = run_cli(job + "--device-spec " + kSrc + "/datasets/cpu-v2/probe.json", empty);
  EXPECT_EQ(cpu.rc, 1) << cpu.out;
  EXPECT_EQ(cpu.out.rfind("scaledl: error: no --bundle and no CPU bundle (models/bundles/cpu)", 0), 0u)
      << cpu.out;
  // A CPU's probe names its vendor (GenuineIntel): no note about other vendors' GPU libraries.
  const CliResult named =
      run_cli("predict " + kSrc + "/models/gpt2.json --batch 2 --seq 128 --device-spec " + kSrc +
              "/datasets/cpu-intel/probe.json --bundle " + kSrc + "/models/bundles/default");
  ASSERT_EQ(named.rc, 0) << named.out;
  EXPECT_EQ(named.out.find("\nvendor "), std::string::npos) << named.out;
}

TEST(CliDevices, DeviceCpuAloneIsThisCpuProbedNow) {
  // `--device cpu` without a store: scaledl-full probes this CPU (a few seconds) and the prediction
  // is for its record, as with --device-spec of a saved probe; the temporary record is removed.
  const CliResult r =
      run_cli("predict " + kSrc + "/models/gpt2.json --batch 2 --seq 64 --device cpu --bundle " + kSrc +
              "/models/bundles/default --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("device       this CPU, probed now"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["device"].get<std::string>().rfind("cpu:", 0), 0u) << j["device"];
  EXPECT_GT(j["t_iter_ms"].get<double>(), 0);
  // A CPU key of a store is still the store's: without --db, one error line.
  expect_one_error("predict " + kSrc + "/models/gpt2.json --device cpu:unknown --bundle " + kSrc +
                       "/models/bundles/default",
                   "--device=cpu:unknown: describe this CPU first");
}
