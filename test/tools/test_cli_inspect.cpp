// End-to-end: the built `scaledl inspect` binary on the shipped model configs
// and on a table of invalid configs (each refused with one line naming the key).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace {

using Result = scaledl::test::CliResult;
using scaledl::test::run_cli;

std::string model(const std::string& name) {
  return std::string(SCALEDL_SOURCE_DIR) + "/models/" + name + ".json";
}

nlohmann::json load(const std::string& name) {
  std::ifstream in(model(name));
  return nlohmann::json::parse(in);
}

}  // namespace

TEST(CliInspect, BertBaseJsonReportsPublishedParams) {
  Result r = run_cli("inspect " + model("bert-base") + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["params"].get<double>() / 109482240.0, 1.0, 0.005);
  EXPECT_GT(j["layers"].size(), 100u);
  EXPECT_GT(j["flops_bwd"].get<double>(), j["flops_fwd"].get<double>());
  EXPECT_EQ(j["settings"]["batch"], 8);  // defaults
  EXPECT_EQ(j["settings"]["seq_len"], 128);
}

TEST(CliInspect, TableOptionsAndDot) {
  const std::string dot = testing::TempDir() + "/vit.dot";
  Result r = run_cli("inspect " + model("vit-base") +
                     " --batch 2 --image 384 --dtype fp16 --no-optimizer --dot " + dot);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("embed.patch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/sample 577"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("params 86567656"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("optim.step"), std::string::npos) << r.out;
  std::ifstream in(dot);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first.rfind("digraph", 0), 0u) << first;

  Result t5 = run_cli("inspect " + model("t5-small") + " --json --batch 1 --seq 32 --optimizer sgd");
  ASSERT_EQ(t5.rc, 0) << t5.out;
  nlohmann::json j = nlohmann::json::parse(t5.out);
  EXPECT_EQ(j["params"].get<double>(), 60506624.0);
  EXPECT_EQ(j["layers"].back()["name"], "optim.step");
  EXPECT_EQ(j["layers"].back()["dims"]["kind"], 0);
}

// Invalid configs written to temp files: each is refused with exit 1 and a one-line
// "scaledl: error: ..." naming the key.
struct Bad {
  const char* base;
  const char* patch;  ///< merged into the config (null deletes a key); "" = raw text below
  const char* raw;    ///< raw file contents when patch is ""
  const char* needle;
};

TEST(CliInspect, RefusesInvalidConfigs) {
  const Bad cases[] = {
      {"bert-base", R"({"model_type":"mamba"})", nullptr, "model_type=\"mamba\""},
      {"bert-base", R"({"model_type":null})", nullptr, "model_type is missing"},
      {"bert-base", R"({"num_attention_heads":null})", nullptr, "num_attention_heads is missing"},
      {"bert-base", R"({"hidden_size":0})", nullptr, "hidden_size=0"},
      {"bert-base", R"({"intermediate_size":-4})", nullptr, "intermediate_size=-4"},
      {"bert-base", R"({"hidden_size":1000})", nullptr, "num_attention_heads=12 does not divide"},
      {"bert-base", R"({"vocab_size":1000000000000})", nullptr, "vocab_size=1000000000000"},
      {"gpt2", R"({"n_embd":4194304,"n_head":1})", nullptr, "n_embd=4194304"},
      {"gpt2", R"({"n_layer":"12"})", nullptr, "n_layer=\"12\""},
      {"llama-style", R"({"num_key_value_heads":3})", nullptr, "num_key_value_heads=3"},
      {"vit-base", R"({"patch_size":15})", nullptr, "patch_size=15"},
      {"t5-small", R"({"num_heads":0})", nullptr, "num_heads=0"},
      {"opt-125m", R"({"dropout":1.5})", nullptr, "dropout=1.5"},
      {"deit-small", R"({"num_labels":-1})", nullptr, "num_labels=-1"},
      {"bert-base", "", R"({"model_type": "bert", "hidden_size": 76)", "malformed JSON"},
      {"bert-base", "", "[1, 2, 3]", "expected a JSON object"},
      {"bert-base", R"({"scaledl":{"batch":0}})", nullptr, "scaledl.batch=0"},
      {"bert-base", R"({"scaledl":{"dtype":"int4"}})", nullptr, "scaledl.dtype=\"int4\""},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string path = testing::TempDir() + "/bad_config_" + std::to_string(i++) + ".json";
    {
      std::ofstream out(path);
      if (c.patch[0] == '\0') {
        out << c.raw;
      } else {
        nlohmann::json j = load(c.base);
        j.merge_patch(nlohmann::json::parse(c.patch));
        out << j.dump(2);
      }
    }
    Result r = run_cli("inspect " + path);
    EXPECT_EQ(r.rc, 1) << c.base << " + " << c.patch << ": " << r.out;
    EXPECT_EQ(r.out.rfind("scaledl: error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos)
        << c.base << " + " << c.patch << " -> " << r.out << " (expected \"" << c.needle << "\")";
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line: " << r.out;
  }
}

TEST(CliInspect, RefusesBadSettingsOnTheCommandLine) {
  Result r = run_cli("inspect " + model("bert-base") + " --seq 1024");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("settings.seq_len=1024"), std::string::npos) << r.out;
  Result d = run_cli("inspect " + model("gpt2") + " --dtype fp64");
  EXPECT_EQ(d.rc, 1);
  EXPECT_NE(d.out.find("--dtype=\"fp64\""), std::string::npos) << d.out;
  Result v = run_cli("inspect " + model("vit-base") + " --image 230");
  EXPECT_EQ(v.rc, 1);
  EXPECT_NE(v.out.find("settings.image_size=230"), std::string::npos) << v.out;
  Result missing = run_cli("inspect /nonexistent/model.json");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.out.find("/nonexistent/model.json: cannot open file"), std::string::npos) << missing.out;
}
