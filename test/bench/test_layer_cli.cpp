// End-to-end checks of the bench CLI commands on the built `scaledl` binary:
// bench layers -> db info/export, probe, and one-line errors for bad input.
#include <gtest/gtest.h>

#include "test_util.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include "cli_util.hpp"

#include <array>
#include <cstdio>
#include <fstream>

#include "scaledl/core/json_util.hpp"

namespace {

const std::string kBinary = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl";

using Result = scaledl::test::CliResult;
Result run(const std::string& args) {
  return scaledl::test::run_cli(args);
}

std::string temp(const std::string& name) {
  return scaledl::test::fresh_store_path(name);
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST(LayerCli, BenchThenInfoAndExport) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  std::string plan = temp("cli_plan.json");
  std::ofstream(plan) << R"({"kind":"layers","configs":[
    {"type":"linear","dims":{"tokens":16,"d_in":32,"d_out":32,"bias":1}},
    {"type":"softmax","dims":{"rows":16,"cols":32}},
    {"type":"optimizer","dims":{"params":1000,"kind":1}}]})";
  std::string db = temp("cli.sqlite");
  Result b = run("bench layers --plan " + plan + " --db " + db +
                 " --campaign cli --threads 1 --quick-probe --warmup 1 --repeats 3 --min-sample-ms 0.1");
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_NE(b.out.find("3 configs"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("\r"), std::string::npos) << "progress bar drawn on a pipe";

  Result info = run("db info --db " + db + " --json");
  ASSERT_EQ(info.rc, 0) << info.out;
  auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["counts"]["layers"], 3);
  EXPECT_EQ(j["counts"]["environments"], 1);

  Result csv = run("db export --db " + db + " --format csv --table layers");
  ASSERT_EQ(csv.rc, 0) << csv.out;
  EXPECT_EQ(lines(csv.out), 4u) << csv.out;  // header + 3 rows
  EXPECT_EQ(csv.out.rfind("id,campaign,config_key", 0), 0u) << csv.out;

  std::string out = temp("cli_devices.json");
  Result js = run("db export --db " + db + " --format json --table devices --out " + out);
  ASSERT_EQ(js.rc, 0) << js.out;
  auto devs = scaledl::read_json_file(out);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0]["kind"], "cpu");

  // Rerun resumes: nothing new is measured.
  Result again =
      run("bench layers --plan " + plan + " --db " + db + " --campaign cli --threads 1 --quick-probe");
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_NE(again.out.find("3 skipped"), std::string::npos) << again.out;
}

TEST(LayerCli, BadInputGivesOneErrorLine) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  std::string plan = temp("cli_bad_plan.json");
  std::ofstream(plan)
      << R"({"kind":"layers","configs":[{"type":"linear","dims":{"tokens":16,"d_in":-3,"d_out":8,"bias":1}}]})";
  std::string db = temp("cli_bad.sqlite");
  struct Case {
    std::string args, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"probe --device tpu", "--device=\"tpu\""},
           {"probe --device cuda:7 --no-measure", "\"cuda:7\""},
           {"probe --spec /no/such/spec.json", "/no/such/spec.json"},
           {"bench layers --plan " + plan + " --db " + db, "configs[0].dims"},
           {"bench layers --plan /no/such/plan.json --db " + db, "/no/such/plan.json"},
           {"db export --db " + db + " --format xml", "--format=xml"},
           {"db info --db /no/such/store.sqlite", "/no/such/store.sqlite"},
       }) {
    Result r = run(c.args);
    if (c.args.find("cuda:7") != std::string::npos && r.rc == 0) continue;  // a machine with 8 GPUs
    EXPECT_EQ(r.rc, 1) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("scaledl: error: ", 0), 0u) << c.args << "\n" << r.out;
    EXPECT_EQ(lines(r.out), 1u) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST(LayerCli, ProbeSpecAndJson) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  std::string spec = temp("cli_spec.json");
  std::ofstream(spec) << R"({"Device":"NVIDIA H100 80GB HBM3","Dev_Mem":80,"Mem_Bw":3350,"Num_Sm":132,
                            "SingleFLOPs":66900,"Freq":1980,"L2Cache":50})";
  std::string db = temp("cli_spec.sqlite");
  Result r = run("probe --spec " + spec + " --json --db " + db);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "spec");
  EXPECT_EQ(j["cores"], 132);
  Result info = run("db info --db " + db + " --json");
  ASSERT_EQ(info.rc, 0) << info.out;
  EXPECT_EQ(nlohmann::json::parse(info.out)["devices"][0], "spec:NVIDIA H100 80GB HBM3");
}
