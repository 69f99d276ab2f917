// Zoo models: parameter counts equal the IR's parameter_count (Hugging Face
// counts), every parameter is trained, the probe's node names are exactly the
// layer graph's, and bad specs fail with one clear line.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bench/zoo.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/ir/layer_graph.hpp"

using namespace scaledl;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

struct Case {
  const char* label;
  const char* plan_entry;  ///< one configs[] entry of a models plan (paths relative to the repo)
};

// Tiny versions of the shipped configs (2 layers, hidden 32..64), one per family and head kind.
const Case kCases[] = {
    {"bert-mlm", R"({"model":"models/bert-base.json","overrides":{"hidden_size":64,"num_hidden_layers":2,
      "num_attention_heads":4,"intermediate_size":128,"vocab_size":300},"settings":{"batch":2,"seq_len":16}})"},
    {"bert-cls", R"({"model":"models/bert-base.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":2,"intermediate_size":64,"vocab_size":200,"architectures":["BertForSequenceClassification"],
      "num_labels":3},"settings":{"batch":2,"seq_len":8}})"},
    {"gpt2", R"({"model":"models/gpt2.json","overrides":{"n_embd":64,"n_layer":2,"n_head":4,"vocab_size":300},
      "settings":{"batch":2,"seq_len":16,"optimizer":"adam"}})"},
    {"t5", R"({"model":"models/t5-small.json","overrides":{"d_model":32,"num_layers":2,"num_decoder_layers":1,
      "num_heads":4,"d_kv":16,"d_ff":64,"vocab_size":300},"settings":{"batch":2,"seq_len":16,"tgt_len":8}})"},
    {"t5-gated", R"({"model":"models/t5-small.json","overrides":{"d_model":32,"num_layers":1,"num_heads":2,
      "d_kv":8,"d_ff":48,"vocab_size":100,"feed_forward_proj":"gated-gelu","tie_word_embeddings":false},
      "settings":{"batch":1,"seq_len":12}})"},
    {"switch", R"({"model":"models/switch-base-8.json","overrides":{"d_model":32,"num_layers":2,
      "num_decoder_layers":2,"num_heads":4,"d_kv":8,"d_ff":48,"vocab_size":200,"num_experts":4,"expert_capacity":3},
      "settings":{"batch":2,"seq_len":16,"tgt_len":8}})"},
    {"vit", R"({"model":"models/vit-base.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":2,"intermediate_size":64,"image_size":32,"patch_size":8,"num_labels":10},
      "settings":{"batch":2,"image_size":32,"optimizer":"sgd"}})"},
    {"deit-teacher", R"({"model":"models/deit-tiny.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":2,"intermediate_size":64,"image_size":32,"patch_size":16,"num_labels":5,
      "architectures":["DeiTForImageClassificationWithTeacher"]},"settings":{"batch":2,"image_size":32}})"},
    {"llama-gqa", R"({"model":"models/llama-style.json","overrides":{"hidden_size":64,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":96,"vocab_size":300},
      "settings":{"batch":2,"seq_len":16}})"},
    {"opt", R"({"model":"models/opt-125m.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":2,"ffn_dim":64,"vocab_size":200,"word_embed_proj_dim":16},
      "settings":{"batch":2,"seq_len":8}})"},
    {"gpt-neo",
     R"({"model":"models/gpt-neo-125m.json","overrides":{"hidden_size":32,"num_layers":2,"num_heads":2,
      "intermediate_size":64,"vocab_size":200,"attention_types":[[["global","local"],1]]},"settings":{"batch":2,"seq_len":8}})"},
    {"mixtral", R"({"model":"models/mixtral-8x7b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":48,"vocab_size":200,"num_local_experts":4},
      "settings":{"batch":2,"seq_len":16}})"},
    {"qwen2", R"({"model":"models/qwen2-0.5b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":48,"vocab_size":200},
      "settings":{"batch":2,"seq_len":8}})"},
    {"gemma", R"({"model":"models/gemma-2b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":1,"head_dim":16,"intermediate_size":48,"vocab_size":200},
      "settings":{"batch":2,"seq_len":8}})"},
    {"phi3", R"({"model":"models/phi3-mini.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":48,"vocab_size":200,"resid_pdrop":0.1},
      "settings":{"batch":2,"seq_len":8}})"},
    {"qwen3-moe", R"({"model":"models/qwen3-30b-a3b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"moe_intermediate_size":24,"num_experts":8,
      "num_experts_per_tok":3,"vocab_size":200},"settings":{"batch":2,"seq_len":16}})"},
    {"gemma2", R"({"model":"models/gemma2-2b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":48,"vocab_size":200},
      "settings":{"batch":2,"seq_len":8}})"},
    {"gemma3", R"({"model":"models/gemma3-1b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":1,"head_dim":16,"intermediate_size":48,"vocab_size":200},
      "settings":{"batch":2,"seq_len":8}})"},
    {"gpt-neox", R"({"model":"models/pythia-160m.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"intermediate_size":64,"vocab_size":200},"settings":{"batch":2,"seq_len":8}})"},
    {"qwen2-moe",
     R"({"model":"models/qwen1.5-moe-a2.7b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"moe_intermediate_size":24,"shared_expert_intermediate_size":40,
      "num_experts":6,"num_experts_per_tok":2,"vocab_size":200},"settings":{"batch":2,"seq_len":12}})"},
    {"deepseek-v3", R"({"model":"models/deepseek-v3.json","overrides":{"hidden_size":32,"num_hidden_layers":3,
      "num_attention_heads":4,"num_key_value_heads":4,"qk_nope_head_dim":8,"qk_rope_head_dim":4,"v_head_dim":6,
      "kv_lora_rank":12,"q_lora_rank":10,"intermediate_size":40,"moe_intermediate_size":16,"n_routed_experts":4,
      "num_experts_per_tok":2,"first_k_dense_replace":1,"vocab_size":200},"settings":{"batch":2,"seq_len":12}})"},
    {"deepseek-v2-lite",
     R"({"model":"models/deepseek-v2-lite.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":2,"qk_nope_head_dim":8,"qk_rope_head_dim":4,"v_head_dim":8,"kv_lora_rank":12,
      "intermediate_size":40,"moe_intermediate_size":16,"n_routed_experts":4,"num_experts_per_tok":3,
      "vocab_size":200},"settings":{"batch":2,"seq_len":8}})"},
    {"gpt-oss", R"({"model":"models/gpt-oss-20b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"intermediate_size":24,"num_local_experts":4,
      "num_experts_per_tok":2,"vocab_size":200},"settings":{"batch":2,"seq_len":8}})"},
    {"qwen3", R"({"model":"models/qwen3-0.6b.json","overrides":{"hidden_size":32,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":48,"vocab_size":200},
      "settings":{"batch":2,"seq_len":8}})"},
};

ModelConfig load_case(const Case& c) {
  auto plan = nlohmann::json{{"kind", "models"},
                             {"configs", nlohmann::json::array({nlohmann::json::parse(c.plan_entry)})}};
  return parse_plan(plan, "test", kSrc).models.at(0);
}

std::set<std::string> graph_names(const LayerGraph& g, Direction d) {
  std::set<std::string> out;
  for (const auto& n : g.nodes)
    if (n.dir == d) out.insert(n.name);
  return out;
}

std::string diff(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::string s;
  for (const auto& x : a)
    if (!b.count(x)) s += " " + x;
  return s;
}

}  // namespace

TEST(Zoo, ParameterCountEqualsIrForEveryFamily) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.label);
    auto mc = load_case(c);
    auto model = build_zoo_model(mc.model, mc.settings, torch::kCPU);
    EXPECT_EQ(trainable_parameter_count(*model), parameter_count(mc.model)) << c.plan_entry;
  }
}

TEST(Zoo, FullSizeParameterCounts) {
  // Only counted (no iteration): bert-base 110M, gpt2 124M, t5-small 60M, deit-tiny 5.9M parameters.
  for (const char* f : {"bert-base", "gpt2", "t5-small", "deit-tiny"}) {
    SCOPED_TRACE(f);
    ModelSpec m = load_model_config(kSrc + "/models/" + f + ".json");
    TrainSettings s;
    s.seq_len = 16;
    torch::NoGradGuard no_grad;
    auto model = build_zoo_model(m, s, torch::kCPU);
    EXPECT_EQ(trainable_parameter_count(*model), parameter_count(m));
  }
  // Published Hugging Face totals.
  EXPECT_EQ(parameter_count(load_model_config(kSrc + "/models/gpt2.json")), 124439808);
}

TEST(Zoo, RefusesWhatItDoesNotBuildNamingIt) {
  // Predicted from their layer graphs, not built by the zoo's modules: one error naming what.
  TrainSettings s;
  s.seq_len = 16;
  for (const auto& [f, what] : std::vector<std::pair<std::string, std::string>>{
           {"olmo2-7b", "norms after attention and the FFN only"},
           {"granite-3.3-8b", "residual and logits"}}) {
    SCOPED_TRACE(f);
    const ModelSpec m = load_model_config(kSrc + "/models/" + f + ".json");
    try {
      build_zoo_model(m, s, torch::kCPU);
      ADD_FAILURE() << "built";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the benchmark zoo does not build " + what), std::string::npos)
          << e.what();
    }
  }
}

TEST(Zoo, ProbeNodesAreTheLayerGraphNodesAndEveryParameterTrains) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.label);
    auto mc = load_case(c);
    torch::manual_seed(0);
    auto model = build_zoo_model(mc.model, mc.settings, torch::kCPU);
    auto batch = make_zoo_batch(mc.model, mc.settings, torch::kCPU, 1);
    NodeProbe probe(torch::kCPU);
    probe.begin_iteration();
    auto loss = model->loss(batch, &probe);
    ASSERT_EQ(loss.dim(), 0);
    EXPECT_TRUE(std::isfinite(loss.item<double>()));
    probe.begin_backward();
    loss.backward();
    probe.end_backward();
    probe.end_iteration();
    for (const auto& p : model->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key() << " got no gradient";
      EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    }
    std::set<std::string> fwd, bwd;
    for (const auto& t : probe.node_times()) {
      EXPECT_TRUE(std::isfinite(t.ms) && t.ms >= 0) << t.node << " " << t.ms;
      bool is_bwd = t.node.size() > 4 && t.node.substr(t.node.size() - 4) == ".bwd";
      (is_bwd ? bwd : fwd).insert(t.node);
    }
    LayerGraph g = build_layer_graph(mc.model, mc.settings);
    auto gf = graph_names(g, Direction::Forward), gb = graph_names(g, Direction::Backward);
    EXPECT_EQ(fwd, gf) << "only in the model:" << diff(fwd, gf) << "\nonly in the graph:" << diff(gf, fwd);
    // Backward: every probed backward node is a graph node; the graph's backward
    // nodes missing from the probe are those whose output needs no gradient.
    EXPECT_EQ(diff(bwd, gb), "");
    EXPECT_GE(bwd.size(), gb.size() * 3 / 4) << "missing backward nodes:" << diff(gb, bwd);
  }
}

TEST(Zoo, InferenceRunsTheForwardNodesOfTheInferenceGraph) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.label);
    auto mc = load_case(c);
    set_run_mode(mc.settings, RunMode::Inference);
    auto model = build_zoo_model(mc.model, mc.settings, torch::kCPU);
    model->eval();
    auto batch = make_zoo_batch(mc.model, mc.settings, torch::kCPU, 1);
    NodeProbe probe(torch::kCPU);
    probe.begin_iteration();
    torch::NoGradGuard no_grad;
    auto out = model->loss(batch, &probe);  // under no-grad: the logits, no loss
    probe.end_iteration();
    EXPECT_GE(out.dim(), 2);
    EXPECT_FALSE(out.requires_grad());
    std::set<std::string> fwd;
    for (const auto& t : probe.node_times()) fwd.insert(t.node);
    auto gf = graph_names(build_layer_graph(mc.model, mc.settings), Direction::Forward);
    EXPECT_EQ(fwd, gf) << "only in the model:" << diff(fwd, gf) << "\nonly in the graph:" << diff(gf, fwd);
  }
}

TEST(Zoo, SwitchExpertsRouteWithinCapacity) {
  // Capacity 3 tokens per expert and sample, 16 tokens over 4 experts: at least 4 tokens per sample skip the
  // experts.
  auto mc = load_case(kCases[5]);
  ASSERT_EQ(mc.model.family, Family::Switch);
  torch::manual_seed(0);
  auto model = build_zoo_model(mc.model, mc.settings, torch::kCPU);
  model->eval();
  auto batch = make_zoo_batch(mc.model, mc.settings, torch::kCPU, 2);
  torch::NoGradGuard no_grad;
  auto logits = model->loss(batch, nullptr);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2 * 8, 200}));  // [decoder tokens, vocab]
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  // Same spec without the capacity limit (capacity = seq): a different result, so the limit acts.
  ModelSpec wide = mc.model;
  wide.expert_capacity = 16;
  auto model2 = build_zoo_model(wide, mc.settings, torch::kCPU);
  model2->eval();
  {
    auto src = model->named_parameters(), dst = model2->named_parameters();
    for (const auto& p : src) dst[p.key()].copy_(p.value());
  }
  EXPECT_FALSE(torch::allclose(model2->loss(batch, nullptr), logits));
}

TEST(Zoo, MixtralWithIdenticalExpertsAndEveryExpertChosenIsTheDenseLlama) {
  // Top-k with k = experts and every expert a copy of one SwiGLU FFN: the renormalised weights
  // sum to 1, so the mixture is that FFN, whatever the router says. The capacity (the mean load,
  // k x tokens / experts = tokens) drops nothing. The loss must equal the dense model's with the
  // same weights: dispatch, the batched experts and the weighted combine over k are exact.
  auto mc = load_case(kCases[11]);
  ModelSpec moe = mc.model;
  moe.num_experts = 3;
  moe.moe_top_k = 3;
  ModelSpec dense = moe;
  dense.num_experts = 0;
  dense.moe_top_k = 1;
  dense.encoder_sparse_step = 0;
  torch::manual_seed(0);
  auto a = build_zoo_model(dense, mc.settings, torch::kCPU);
  auto b = build_zoo_model(moe, mc.settings, torch::kCPU);
  a->eval();
  b->eval();
  {
    torch::NoGradGuard no_grad;
    auto src = a->named_parameters();
    auto dst = b->named_parameters();
    for (const auto& p : dst) {
      const std::string& k = p.key();
      if (src.contains(k)) {
        p.value().copy_(src[k]);
        continue;
      }
      const std::string blk = k.substr(0, k.find(".moe."));
      if (k.find(".moe.router.") != std::string::npos) continue;  // any router: the weights sum to 1
      const char* from = k.size() > 3 && k.substr(k.size() - 3) == ".wg" ? ".ffn.gate.weight"
                         : k.substr(k.size() - 3) == ".wi"               ? ".ffn.up.weight"
                                                                         : ".ffn.down.weight";
      ASSERT_TRUE(src.contains(blk + from)) << k;
      p.value().copy_(src[blk + from].t().unsqueeze(0).expand_as(p.value()));
    }
  }
  auto batch = make_zoo_batch(moe, mc.settings, torch::kCPU, 4);
  const double la = a->loss(batch, nullptr).item<double>(), lb = b->loss(batch, nullptr).item<double>();
  EXPECT_NEAR(lb, la, 1e-5 * std::abs(la));
  // One expert made different: the result is no longer the dense one.
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : b->named_parameters())
      if (p.key().find(".moe.wi") != std::string::npos) p.value()[1].mul_(3.0);
  }
  EXPECT_GT(std::abs(b->loss(batch, nullptr).item<double>() - la), 1e-4);
}

TEST(Zoo, ProbeIsNotUsedWithoutInstrumentation) {
  auto mc = load_case(kCases[2]);
  auto model = build_zoo_model(mc.model, mc.settings, torch::kCPU);
  model->eval();  // no dropout: the two losses must agree exactly
  auto batch = make_zoo_batch(mc.model, mc.settings, torch::kCPU, 3);
  NodeProbe probe(torch::kCPU);
  auto a = model->loss(batch, nullptr);
  auto b = model->loss(batch, &probe);
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(Zoo, BadSpecsFailWithOneClearLine) {
  auto mc = load_case(kCases[8]);  // llama
  ModelSpec m = mc.model;
  m.num_kv_heads = 3;
  try {
    build_zoo_model(m, mc.settings, torch::kCPU);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads=3"), std::string::npos) << e.what();
  }
  auto vit = load_case(kCases[6]);
  TrainSettings s = vit.settings;
  s.image_size = 30;  // not a multiple of patch 8
  EXPECT_THROW(make_zoo_batch(vit.model, s, torch::kCPU), Error);
  ModelSpec text = mc.model;
  text.vocab_size = 0;
  EXPECT_THROW(make_zoo_batch(text, mc.settings, torch::kCPU), Error);
}

TEST(Zoo, GptOssEvalModeRunsEveryExpertAndMatchesTheRoutedTraining) {
  // gpt-oss in eval mode runs every expert on every token and weights each output by the token's
  // routing weight of that expert (0 where not chosen); in training it dispatches the chosen
  // (token, expert) pairs into per-expert slots. When no pair is dropped (a capacity of the whole
  // sequence) and without dropout (gpt-oss has none) both paths must give the same logits.
  auto mc = load_case(kCases[22]);
  ASSERT_EQ(mc.model.hf_class, "GptOssForCausalLM");
  ModelSpec m = mc.model;
  m.expert_capacity = mc.settings.seq_len;  // top-2 of 4 experts, nothing dropped
  torch::manual_seed(0);
  auto model = build_zoo_model(m, mc.settings, torch::kCPU);
  {
    torch::NoGradGuard no_grad;  // large expert weights, sinks and biases, so that their paths count
    for (auto& p : model->named_parameters())
      if (p.key().find(".moe.") != std::string::npos || p.key().find("sinks") != std::string::npos)
        p.value().uniform_(-0.5, 0.5);
  }
  auto batch = make_zoo_batch(m, mc.settings, torch::kCPU, 4);
  torch::NoGradGuard no_grad;  // the logits, in either mode
  auto logits = [&](bool train) {
    model->train(train);
    return model->loss(batch, nullptr).clone();
  };
  const torch::Tensor routed = logits(true), every = logits(false);
  EXPECT_LT((routed - every).abs().max().item<double>(), 1e-4);
  // The experts matter here: without one expert's output the logits move.
  for (auto& p : model->named_parameters())
    if (p.key().find("block1.moe.wo") != std::string::npos) p.value()[0].zero_();
  EXPECT_GT((logits(false) - every).abs().max().item<double>(), 1e-2);
}
