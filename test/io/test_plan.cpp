// Plan loading: good plans of both kinds, and bad plans that must fail with a
// message naming configs[i].<key> and the value.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scaledl/core/error.hpp"
#include "scaledl/design/plan.hpp"

using namespace scaledl;
using nlohmann::json;

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
  std::string p = testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

/// Expects parse_plan(j) to throw an Error whose message contains every needle.
void expect_plan_error(const json& j, std::vector<std::string> needles) {
  try {
    parse_plan(j, "plan");
    ADD_FAILURE() << "accepted bad plan " << j.dump();
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
    for (const auto& n : needles)
      EXPECT_NE(w.find(n), std::string::npos) << "missing '" << n << "' in: " << w;
  }
}
}  // namespace

TEST(Plan, ParsesLayersPlanWithObjectAndArrayDims) {
  json j = json::parse(R"({"kind":"layers","configs":[
    {"type":"linear","dims":{"tokens":128,"d_in":768,"d_out":3072,"bias":1},"dtype":"fp32"},
    {"type":"attention","dims":[2,12,128,128,64],"dtype":"bf16"},
    {"type":"optimizer","dims":{"params":1000,"kind":2}}]})");
  Plan p = parse_plan(j, "plan");
  ASSERT_EQ(p.kind, "layers");
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[0].key(), "linear:128x768x3072x1:fp32");
  EXPECT_EQ(p.layers[1].key(), "attention:2x12x128x128x64:bf16");
  EXPECT_EQ(p.layers[2].dtype, DType::FP32);  // default
  // to_json round-trips through the parser.
  Plan q = parse_plan(layers_plan_json(p.layers), "again");
  ASSERT_EQ(q.layers.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(q.layers[i].key(), p.layers[i].key());
}

TEST(Plan, BadLayerConfigsNameTheKeyAndValue) {
  auto plan = [](json c) { return json{{"kind", "layers"}, {"configs", json::array({c})}}; };
  expect_plan_error(plan({{"type", "convolution"}, {"dims", {1}}}), {"configs[0].type", "convolution"});
  expect_plan_error(plan({{"type", "linear"}, {"dims", {{"tokens", 8}, {"d_in", 8}, {"bias", 1}}}}),
                    {"configs[0].dims.d_out", "missing"});
  expect_plan_error(
      plan({{"type", "linear"}, {"dims", {{"tokens", 8}, {"d_in", 0}, {"d_out", 8}, {"bias", 1}}}}),
      {"configs[0].dims", "d_in=0"});
  expect_plan_error(
      plan({{"type", "linear"}, {"dims", {{"tokens", 8}, {"d_in", 8}, {"d_out", 8}, {"bias", 3}}}}),
      {"configs[0].dims", "bias=3"});
  expect_plan_error(plan({{"type", "gelu"}, {"dims", {{"elements", 8}, {"hidden", 8}}}}),
                    {"configs[0].dims.hidden", "not a dim of gelu"});
  expect_plan_error(plan({{"type", "gelu"}, {"dims", {8, 9}}}), {"configs[0].dims", "2 values", "elements"});
  expect_plan_error(plan({{"type", "gelu"}, {"dims", {{"elements", "many"}}}}),
                    {"configs[0].dims.elements", "\"many\""});
  expect_plan_error(plan({{"type", "gelu"}}), {"configs[0].dims is missing"});
  expect_plan_error(plan({{"type", "gelu"}, {"dims", {8}}, {"dtype", "fp64"}}), {"configs[0].dtype", "fp64"});
  expect_plan_error(plan({{"type", "gelu"}, {"dims", {8}}, {"dims_typo", 1}}), {"configs[0].dims_typo"});
  expect_plan_error(plan({{"type", "conv2d_patch"}, {"dims", {1, 3, 64, 30, 16}}}),
                    {"configs[0].dims", "patch=16"});
  expect_plan_error(json{{"kind", "layerz"}, {"configs", json::array()}}, {"plan.kind", "layerz"});
  expect_plan_error(json{{"kind", "layers"}, {"configs", json::array()}}, {"plan.configs is empty"});
  expect_plan_error(json{{"kind", "layers"}}, {"plan.configs"});
  expect_plan_error(json::array(), {"plan"});
}

TEST(Plan, FilesMalformedOrTruncatedNameThePath) {
  std::string good = R"({"kind":"layers","configs":[{"type":"relu","dims":{"elements":64}}]})";
  std::string p = write_temp("plan_trunc.json", good.substr(0, good.size() / 2));
  try {
    load_plan(p);
    FAIL() << "accepted a truncated plan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_plan(testing::TempDir() + "/no_such_plan.json"), Error);
  EXPECT_EQ(load_plan(write_temp("plan_ok.json", good)).layers.size(), 1u);
}

TEST(Plan, ModelsPlanResolvesPathsAgainstThePlanDirAndAppliesOverrides) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(testing::TempDir()) / "plan_models";
  fs::create_directories(dir / "m");
  fs::copy_file(fs::path(SCALEDL_SOURCE_DIR) / "models" / "bert-base.json", dir / "m" / "bert-base.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(dir / "plan.json") << R"({"kind":"models","configs":[
     {"model":"m/bert-base.json","overrides":{"num_hidden_layers":2},
      "settings":{"batch":2,"seq_len":64,"dtype":"fp32","optimizer":"adamw"}},
     {"model":"m/bert-base.json","settings":{"batch":2,"seq_len":64}}]})";
  Plan p = load_plan((dir / "plan.json").string());
  ASSERT_EQ(p.kind, "models");
  ASSERT_EQ(p.models.size(), 2u);
  EXPECT_EQ(p.models[0].model.num_layers, 2);
  EXPECT_EQ(p.models[1].model.num_layers, 12);
  EXPECT_NE(p.models[0].model.name, p.models[1].model.name);  // overrides are part of the name (store key)
  EXPECT_EQ(p.models[0].settings.batch, 2);
  EXPECT_EQ(p.models[0].settings.seq_len, 64);
}

TEST(Plan, BadModelConfigsNameTheKey) {
  auto plan = [](json c) { return json{{"kind", "models"}, {"configs", json::array({c})}}; };
  expect_plan_error(plan({{"settings", {{"batch", 1}}}}), {"configs[0].model is missing"});
  expect_plan_error(plan({{"model", "no/such/model.json"}}),
                    {"configs[0].model", "no/such/model.json", "not found"});
  expect_plan_error(plan({{"model", 42}}), {"configs[0].model", "42"});
  std::string bert = std::string(SCALEDL_SOURCE_DIR) + "/models/bert-base.json";
  expect_plan_error(plan({{"model", bert}, {"overrides", {{"num_attention_heads", 7}}}}),
                    {"configs[0].model", "num_attention_heads"});
  expect_plan_error(plan({{"model", bert}, {"settings", {{"batch", 0}}}}), {"configs[0].settings", "batch"});
}
