// Design spaces: parsing, candidates, encoding, plans, augmentation, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/design/space.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"

using scaledl::json;
namespace fs = std::filesystem;

namespace {

json linear_space() {
  return json::parse(R"({
    "kind": "layers",
    "fixed": {"type": "linear", "bias": 1},
    "parameters": [
      {"name": "tokens", "kind": "integer", "min": 128, "max": 2048, "count": 5, "log": true},
      {"name": "d_in", "kind": "grid", "values": [256, 512, 1024, 2048]},
      {"name": "d_out", "kind": "integer", "min": 256, "max": 2048, "step": 256},
      {"name": "dtype", "kind": "categorical", "values": ["fp32", "bf16", "fp16"]}
    ],
    "constraints": ["d_in <= 2 * d_out"]
  })");
}

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("scaledl_test_design_" + name + "_" + std::to_string(::getpid()));
  scaledl::remove_tree(d);
  fs::create_directories(d);
  return d.string();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const scaledl::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(Space, LevelsConstraintsAndProduct) {
  auto sp = scaledl::parse_space(linear_space());
  ASSERT_EQ(sp.params.size(), 4u);
  // count=5, log: 128, 256, 512, 1024, 2048 (geometric, rounded).
  std::vector<int64_t> tokens;
  for (auto& v : sp.params[0].values) tokens.push_back(v.get<int64_t>());
  EXPECT_EQ(tokens, (std::vector<int64_t>{128, 256, 512, 1024, 2048}));
  EXPECT_TRUE(sp.params[0].log);
  EXPECT_TRUE(sp.params[1].log);  // integer grid spanning 8x: a size, log by default
  EXPECT_EQ(sp.params[2].values.size(), 8u);
  auto cs = scaledl::enumerate_candidates(sp, 0);
  EXPECT_DOUBLE_EQ(cs.product_size, 5 * 4 * 8 * 3);
  EXPECT_FALSE(cs.sampled);
  // d_in <= 2 d_out rejects: d_in=1024 with d_out=256 (1), d_in=2048 with d_out<1024 (3): 4 of 32 pairs.
  EXPECT_EQ(cs.cands.size(), 5u * 3 * 28);
  EXPECT_EQ(cs.rejected, 5 * 3 * 4);
  for (auto& c : cs.cands) {
    json cfg = scaledl::candidate_config(sp, c);
    EXPECT_LE(cfg["dims"]["d_in"].get<int64_t>(), 2 * cfg["dims"]["d_out"].get<int64_t>());
    EXPECT_EQ(cfg["type"], "linear");
    EXPECT_EQ(cfg["dims"]["bias"], 1);
  }
}

TEST(Space, SamplesTheProductWhenItIsHuge) {
  json j = linear_space();
  j["max_candidates"] = 100;
  auto sp = scaledl::parse_space(j);
  auto cs = scaledl::enumerate_candidates(sp, 3);
  EXPECT_TRUE(cs.sampled);
  EXPECT_EQ(cs.cands.size(), 100u);
  std::set<std::vector<int32_t>> distinct(cs.cands.begin(), cs.cands.end());
  EXPECT_EQ(distinct.size(), 100u);
  auto cs2 = scaledl::enumerate_candidates(sp, 3);
  EXPECT_EQ(cs.cands, cs2.cands);
}

TEST(Space, LayerTypesActivateOnlyTheirDims) {
  json j = json::parse(R"({
    "kind": "layers",
    "fixed": {"bias": 1},
    "parameters": [
      {"name": "type", "kind": "categorical", "values": ["linear", "layernorm", "bmm"]},
      {"name": "tokens", "kind": "grid", "values": [128, 512]},
      {"name": "hidden", "kind": "grid", "values": [256, 1024]},
      {"name": "d_in", "kind": "grid", "values": [256, 1024]},
      {"name": "d_out", "kind": "grid", "values": [256, 1024]},
      {"name": "batch", "kind": "grid", "values": [8, 32]},
      {"name": "m", "kind": "grid", "values": [64, 128]},
      {"name": "n", "kind": "grid", "values": [64]},
      {"name": "k", "kind": "grid", "values": [64, 128]}
    ],
    "terms": "interactions"
  })");
  auto sp = scaledl::parse_space(j);
  auto cs = scaledl::enumerate_candidates(sp, 0);
  // linear: tokens x d_in x d_out = 8; layernorm: tokens x hidden = 4; bmm: batch x m x n x k = 8.
  EXPECT_EQ(cs.cands.size(), 20u);
  std::set<std::string> types;
  for (auto& c : cs.cands) {
    json cfg = scaledl::candidate_config(sp, c);
    types.insert(cfg["type"].get<std::string>());
    if (cfg["type"] == "layernorm") EXPECT_EQ(cfg["dims"].size(), 2u) << cfg.dump();
    if (cfg["type"] == "bmm") EXPECT_EQ(cfg["dims"].size(), 4u) << cfg.dump();
  }
  EXPECT_EQ(types.size(), 3u);
  // Products of dims of different types are zero everywhere and get dropped.
  scaledl::Encoder enc(sp, cs.cands);
  EXPECT_GT(enc.zero_terms(), 0);  // e.g. log(hidden)*log(d_in): never in one layer type
  for (auto& n : enc.term_names()) EXPECT_NE(n, "log(hidden)*log(d_in)");
  // type=bmm*m equals m (m is active only for bmm): collinear, dropped.
  EXPECT_NE(std::find(enc.dropped().begin(), enc.dropped().end(), "type=bmm*m"), enc.dropped().end());
  auto F = enc.encode(cs.cands);
  Eigen::MatrixXd G = F.transpose() * F;
  EXPECT_EQ(Eigen::FullPivLU<Eigen::MatrixXd>(G).rank(), enc.p());  // identifiable
}

TEST(Space, EncodingDropsOneLevelAndScalesToUnitRange) {
  auto sp = scaledl::parse_space(linear_space());
  auto cs = scaledl::enumerate_candidates(sp, 0);
  scaledl::Encoder enc(sp, cs.cands);
  // 1, log(tokens), log(d_in), d_out (8x range but step grid: log by default? no: integer
  // with max >= 4 min is log), dtype=bf16, dtype=fp16.
  EXPECT_EQ(enc.p(), 6);
  EXPECT_EQ(enc.term_names().front(), "1");
  EXPECT_EQ(enc.term_names().back(), "dtype=fp16");
  auto F = enc.encode(cs.cands);
  EXPECT_DOUBLE_EQ(F.col(0).minCoeff(), 1.0);
  for (int c = 1; c < 4; ++c) {
    EXPECT_NEAR(F.col(c).minCoeff(), -1.0, 1e-12);
    EXPECT_NEAR(F.col(c).maxCoeff(), 1.0, 1e-12);
  }
}

TEST(Space, QuadraticTermsAndTheirIdentifiability) {
  json j = R"({"kind": "layers", "fixed": {"type": "gelu"}, "terms": "quadratic",
               "parameters": [{"name": "elements", "kind": "integer", "min": 1024, "max": 1048576, "count": 5},
                              {"name": "dtype", "kind": "categorical", "values": ["fp32", "fp16"]}]})"_json;
  auto sp = scaledl::parse_space(j);
  auto cs = scaledl::enumerate_candidates(sp, 0);
  scaledl::Encoder enc(sp, cs.cands);
  // 1, log(elements), dtype=fp16, log(elements)*dtype=fp16, log(elements)^2; no dtype^2.
  EXPECT_EQ(enc.p(), 5);
  auto plan = scaledl::make_plan(sp, {5, 1});
  EXPECT_EQ(plan["configs"].size(), 5u);
}

TEST(Space, PlanHasTheBenchFormatAndBeatsRandomDesigns) {
  auto sp = scaledl::parse_space(linear_space());
  scaledl::PlanOptions po;
  po.budget = 12;
  po.seed = 7;
  json plan = scaledl::make_plan(sp, po);
  EXPECT_EQ(plan["kind"], "layers");
  ASSERT_EQ(plan["configs"].size(), 12u);
  for (auto& c : plan["configs"]) {
    EXPECT_TRUE(c.contains("type") && c.contains("dims") && c.contains("dtype")) << c.dump();
    EXPECT_EQ(c["dims"].size(), 4u);
  }
  const json& d = plan["design"];
  EXPECT_EQ(d["k"], 12);
  EXPECT_EQ(d["p"], 6);
  EXPECT_EQ(d["seed"], 7);
  EXPECT_GT(d["d_efficiency_vs_random"].get<double>(), 1.0);
  // Same seed, same plan.
  EXPECT_EQ(scaledl::make_plan(sp, po), plan);
  // `scaledl bench layers --plan` reads it unchanged (io/plan.cpp).
  scaledl::Plan parsed = scaledl::parse_plan(plan, "plan.json");
  EXPECT_EQ(parsed.kind, "layers");
  EXPECT_EQ(parsed.layers.size(), 12u);
}

TEST(Space, AugmentationKeepsMeasuredPointsAndDoesNotReplanThem) {
  auto sp = scaledl::parse_space(linear_space());
  std::string dir = temp_dir("aug");
  std::string db = dir + "/campaign.sqlite";
  json first;
  {
    scaledl::PlanOptions po;
    po.budget = 8;
    first = scaledl::make_plan(sp, po);
    scaledl::Store store(db);
    for (auto& c : first["configs"]) {
      scaledl::LayerMeasurement m;
      m.campaign = "t";
      m.type = scaledl::LayerType::Linear;
      for (const char* k : {"tokens", "d_in", "d_out", "bias"}) m.dims.push_back(c["dims"][k].get<int64_t>());
      m.dtype = scaledl::parse_dtype(c["dtype"].get<std::string>());
      m.device = "cpu:test";
      m.fwd = m.bwd = scaledl::TimingStats::from_samples({1.0, 1.1});
      ASSERT_TRUE(store.put_layer(m));
    }
    scaledl::LayerMeasurement other;  // another layer type: not in this space
    other.campaign = "t";
    other.type = scaledl::LayerType::GELU;
    other.dims = {4096};
    other.device = "cpu:test";
    other.fwd = other.bwd = scaledl::TimingStats::from_samples({1.0});
    ASSERT_TRUE(store.put_layer(other));
  }
  int64_t skipped = -1;
  auto ex = scaledl::existing_points(sp, db, skipped);
  EXPECT_EQ(ex.size(), 8u);
  EXPECT_EQ(skipped, 1);

  scaledl::PlanOptions po;
  po.budget = 6;
  po.existing = db;
  json more = scaledl::make_plan(sp, po);
  EXPECT_EQ(more["design"]["existing"], 8);
  EXPECT_EQ(more["design"]["already_measured_candidates"], 8);
  std::set<std::string> old;
  for (auto& c : first["configs"]) old.insert(c.dump());
  for (auto& c : more["configs"]) EXPECT_EQ(old.count(c.dump()), 0u) << "re-planned " << c.dump();
  // log det of existing + new exceeds that of the existing design alone.
  EXPECT_GT(more["design"]["log_det"].get<double>(), first["design"]["log_det"].get<double>());
  // With 8 points measured, a budget below p - 8 is fine (p = 6).
  po.budget = 1;
  EXPECT_EQ(scaledl::make_plan(sp, po)["configs"].size(), 1u);
  scaledl::remove_tree(dir);
}

TEST(Space, ModelSpaceWritesAliasesAndPlans) {
  std::string dir = temp_dir("models");
  scaledl::write_json_file(dir + "/tiny-bert.json",
                           json::parse(R"({"model_type": "bert", "hidden_size": 128, "num_hidden_layers": 2,
                             "num_attention_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
                             "max_position_embeddings": 512, "type_vocab_size": 2})"));
  scaledl::write_json_file(dir + "/tiny-gpt2.json",
                           json::parse(R"({"model_type": "gpt2", "n_embd": 128, "n_layer": 2, "n_head": 2,
                             "vocab_size": 1000, "n_positions": 512})"));
  json j = json::parse(R"({
    "kind": "models",
    "fixed": {"settings.optimizer": "adamw"},
    "parameters": [
      {"name": "model", "kind": "categorical", "values": ["tiny-bert.json", "tiny-gpt2.json"]},
      {"name": "num_layers", "kind": "integer", "min": 1, "max": 4, "step": 1},
      {"name": "hidden", "kind": "grid", "values": [64, 128, 256]},
      {"name": "heads", "kind": "grid", "values": [2, 4, 6]},
      {"name": "settings.batch", "kind": "grid", "values": [1, 8]},
      {"name": "settings.seq_len", "kind": "grid", "values": [64, 128]},
      {"name": "settings.dtype", "kind": "categorical", "values": ["fp32", "bf16"]}
    ],
    "derived": [{"name": "ffn_dim", "expr": "4 * hidden"}],
    "constraints": [{"expr": "hidden % heads == 0"}, {"max_memory_gb": 100}]
  })");
  auto sp = scaledl::parse_space(j, dir + "/space.json", dir);
  auto cs = scaledl::enumerate_candidates(sp, 0);
  // 6 of 9 (hidden, heads) pairs divide: 64/2, 64/4, 128/2, 128/4, 256/2, 256/4.
  EXPECT_EQ(cs.cands.size(), 2u * 4 * 6 * 2 * 2 * 2);
  scaledl::PlanOptions po;
  po.budget = 16;
  po.plan_dir = dir;
  json plan = scaledl::make_plan(sp, po);
  ASSERT_EQ(plan["configs"].size(), 16u);
  for (auto& c : plan["configs"]) {
    std::string model = c["model"].get<std::string>();
    EXPECT_TRUE(model == "tiny-bert.json" || model == "tiny-gpt2.json") << model;
    const json& o = c["overrides"];
    if (model == "tiny-bert.json") {
      EXPECT_TRUE(o.contains("hidden_size") && o.contains("num_hidden_layers") &&
                  o.contains("intermediate_size"))
          << o.dump();
      EXPECT_EQ(o["intermediate_size"].get<int64_t>(), 4 * o["hidden_size"].get<int64_t>());
    } else {
      EXPECT_TRUE(o.contains("n_embd") && o.contains("n_layer") && o.contains("n_head")) << o.dump();
    }
    EXPECT_EQ(c["settings"]["optimizer"], "adamw");
    EXPECT_TRUE(c["settings"]["batch"].is_number_integer());
  }
  // `scaledl bench models --plan` reads it unchanged, resolving models beside the plan.
  scaledl::write_json_file(dir + "/plan.json", plan);
  scaledl::Plan parsed = scaledl::load_plan(dir + "/plan.json");
  ASSERT_EQ(parsed.models.size(), 16u);
  for (auto& mc : parsed.models) {
    EXPECT_LE(mc.model.num_layers, 4);
    EXPECT_EQ(mc.model.ffn_dim, 4 * mc.model.hidden);
  }
  // A measured model (as `scaledl bench models` stores it) is read back into the space.
  {
    json cfg = scaledl::read_json_file(dir + "/tiny-bert.json");
    cfg["num_hidden_layers"] = 3;
    cfg["num_attention_heads"] = 4;
    scaledl::ModelMeasurement mm;
    mm.campaign = "t";
    mm.model_name = "tiny-bert";
    mm.family = "bert";
    mm.model = scaledl::parse_model_config(cfg).to_json();
    mm.settings =
        scaledl::parse_train_settings(json{{"batch", 8}, {"seq_len", 64}, {"dtype", "bf16"}}).to_json();
    mm.device = "cpu:test";
    mm.iter = mm.iter_noopt = scaledl::TimingStats::from_samples({5.0, 5.5});
    scaledl::Store store(dir + "/models.sqlite");
    ASSERT_TRUE(store.put_model(mm));
  }
  int64_t skipped = -1;
  auto ex = scaledl::existing_points(sp, dir + "/models.sqlite", skipped);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(skipped, 0);
  EXPECT_EQ(json(ex[0]).dump(), R"(["tiny-bert",3.0,128.0,4.0,8.0,64.0,"bf16"])");
  po.existing = dir + "/models.sqlite";
  json more = scaledl::make_plan(sp, po);
  EXPECT_EQ(more["design"]["existing"], 1);
  EXPECT_EQ(more["design"]["already_measured_candidates"], 1);
  po.existing.clear();
  // A memory limit no model fits in empties the space, with the reason.
  j["constraints"][1]["max_memory_gb"] = 1e-6;
  auto tiny = scaledl::parse_space(j, dir + "/space.json", dir);
  EXPECT_NE(error_of([&] { scaledl::enumerate_candidates(tiny, 0); }).find("constraints[1]"),
            std::string::npos);
  scaledl::remove_tree(dir);
}

TEST(Space, BadSpacesGiveOneClearError) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* needle;
  };
  std::vector<Case> cases = {
      {"unknown parameter kind", [](json& j) { j["parameters"][0]["kind"] = "ordinal"; }, "kind=\"ordinal\""},
      {"empty parameters", [](json& j) { j["parameters"] = json::array(); },
       "parameters must be a non-empty"},
      {"unknown space kind", [](json& j) { j["kind"] = "graphs"; }, "kind=\"graphs\""},
      {"min > max", [](json& j) { j["parameters"][0]["min"] = 4096; }, "min=4096"},
      {"step and count", [](json& j) { j["parameters"][2]["count"] = 3; }, "exactly one of"},
      {"bad terms", [](json& j) { j["terms"] = "cubic"; }, "terms=\"cubic\""},
      {"unknown name in expr", [](json& j) { j["constraints"][0] = "d_inn <= 2"; }, "unknown name 'd_inn'"},
      {"syntax error", [](json& j) { j["constraints"][0] = "d_in <= (2"; }, "missing ')'"},
      {"bad dtype level", [](json& j) { j["parameters"][3]["values"][0] = "fp64"; }, "\"fp64\""},
      {"missing dim", [](json& j) { j["parameters"].erase(1); }, "needs dim \"d_in\""},
      {"unknown key", [](json& j) { j["budget"] = 3; }, "unknown key \"budget\""},
      {"repeated name", [](json& j) { j["parameters"][1]["name"] = "tokens"; }, "repeated"},
      {"log of zero", [](json& j) { j["parameters"][0]["min"] = 0; }, "must be > 0"},
  };
  for (auto& c : cases) {
    json j = linear_space();
    c.edit(j);
    std::string e = error_of([&] { scaledl::parse_space(j, "space.json"); });
    EXPECT_NE(e.find(c.needle), std::string::npos) << c.what << ": " << e;
  }
  // Contradictory constraints: nothing left.
  json j = linear_space();
  j["constraints"] = {"d_in > 4096"};
  auto sp = scaledl::parse_space(j, "space.json");
  std::string e = error_of([&] { scaledl::enumerate_candidates(sp, 0); });
  EXPECT_NE(e.find("no candidate satisfies"), std::string::npos) << e;
  EXPECT_NE(e.find("d_in > 4096"), std::string::npos) << e;
  // Budgets out of range.
  auto ok = scaledl::parse_space(linear_space(), "space.json");
  e = error_of([&] { scaledl::make_plan(ok, {100000, 0}); });
  EXPECT_NE(e.find("--budget=100000 exceeds the 420 candidates"), std::string::npos) << e;
  e = error_of([&] { scaledl::make_plan(ok, {3, 0}); });
  EXPECT_NE(e.find("--budget=3 is smaller than the 6 model terms"), std::string::npos) << e;
  // An existing store that is not there.
  scaledl::PlanOptions po;
  po.budget = 8;
  po.existing = "/nonexistent/x.sqlite";
  e = error_of([&] { scaledl::make_plan(ok, po); });
  EXPECT_NE(e.find("--existing=/nonexistent/x.sqlite"), std::string::npos) << e;
}

TEST(Space, PointwiseSpacePlansBothKindsOfTheNewType) {
  const std::string path = std::string(SCALEDL_SOURCE_DIR) + "/models/spaces/pointwise.json";
  auto sp = scaledl::load_space(path);
  scaledl::PlanOptions po;
  po.budget = 24;
  po.seed = 1;
  json plan = scaledl::make_plan(sp, po);
  ASSERT_EQ(plan["configs"].size(), 24u);
  std::set<int64_t> saves;
  for (const auto& c : plan["configs"]) {
    EXPECT_EQ(c["type"], "pointwise");
    saves.insert(c["dims"]["saves"].get<int64_t>());
  }
  EXPECT_EQ(saves, (std::set<int64_t>{0, 1}));
  scaledl::Plan parsed = scaledl::parse_plan(plan, path, fs::path(path).parent_path().string());
  EXPECT_EQ(parsed.layers.size(), 24u);
}

TEST(Space, ExampleSpacesInTheRepoPlan) {
  for (const char* f : {"layers.json", "models.json"}) {
    std::string path = std::string(SCALEDL_SOURCE_DIR) + "/models/spaces/" + f;
    auto sp = scaledl::load_space(path);
    scaledl::PlanOptions po;
    po.budget = sp.kind == "layers" ? 120 : 24;
    po.starts = 1;
    po.seed = 3;
    json plan = scaledl::make_plan(sp, po);
    EXPECT_EQ(plan["configs"].size(), static_cast<size_t>(po.budget)) << f;
    EXPECT_GT(plan["design"]["m"].get<int64_t>(), 1000) << f;
    EXPECT_TRUE(std::isfinite(plan["design"]["log_det"].get<double>())) << f;
    scaledl::Plan parsed = scaledl::parse_plan(plan, path, fs::path(path).parent_path().string());
    EXPECT_EQ(parsed.layers.size() + parsed.models.size(), static_cast<size_t>(po.budget)) << f;
  }
}

TEST(Space, TrainingKindsSpaceRegeneratesTheCommittedGpuPlan) {
  // datasets/h100/training-kinds-plan.json is this space's plan at budget 64, seed 1 (the
  // command in the space's _comment): regenerated the same, with all five kinds in BF16 and FP32.
  const std::string path = std::string(SCALEDL_SOURCE_DIR) + "/models/spaces/training-kinds.json";
  auto sp = scaledl::load_space(path);
  scaledl::PlanOptions po;
  po.budget = 64;
  po.seed = 1;
  json plan = scaledl::make_plan(sp, po);
  std::ifstream in(std::string(SCALEDL_SOURCE_DIR) + "/datasets/h100/training-kinds-plan.json");
  ASSERT_TRUE(in) << "datasets/h100/training-kinds-plan.json";
  const json committed = json::parse(in);
  EXPECT_EQ(plan["configs"], committed["configs"]);
  std::set<std::pair<std::string, std::string>> kinds;
  for (const auto& c : plan["configs"])
    kinds.insert({c["type"].get<std::string>(), c["dtype"].get<std::string>()});
  for (const char* t : {"embedding", "cross_entropy", "mul", "pointwise", "optimizer"})
    for (const char* d : {"bf16", "fp32"}) EXPECT_TRUE(kinds.count({t, d})) << t << " " << d;
  scaledl::Plan parsed = scaledl::parse_plan(committed, path, fs::path(path).parent_path().string());
  EXPECT_EQ(parsed.layers.size(), 64u);
}
