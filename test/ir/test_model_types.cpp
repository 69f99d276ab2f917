// The model types of the 2025 open-weights releases: olmo2 / olmo3, granite, exaone4, llama4_text and the
// text models of the multimodal llama4, gemma3 and mistral3 configs; qwen3_next refused. Parameter
// counts against the published ones, the layer graph's shape, and the bad-input paths.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_config_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"

using namespace scaledl;
using scaledl::test::load;
using scaledl::test::model_path;
using scaledl::test::parse_error;

namespace {
TrainSettings settings(int64_t batch, int64_t seq) {
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  return s;
}
const LayerNode& node(const LayerGraph& g, const std::string& name) {
  const int id = g.find(name);
  if (id < 0) throw Error("no node " + name);
  return g.nodes[id];
}
/// Names of the forward producers of node `name`.
std::vector<std::string> producers(const LayerGraph& g, const std::string& name) {
  const int id = node(g, name).id;
  std::vector<std::string> src;
  for (const auto& e : g.edges)
    if (e.dst == id && !e.backward && !e.saved) src.push_back(g.nodes[e.src].name);
  return src;
}
size_t forward_nodes(const LayerGraph& g) {
  size_t n = 0;
  for (const auto& nd : g.nodes) n += nd.dir == Direction::Forward;
  return n;
}
void expect_error(const json& j, const std::string& msg) {
  const std::string e = parse_error(j);
  EXPECT_NE(e.find(msg), std::string::npos) << "got: " << e << "\nwant: " << msg;
}
const std::vector<int64_t> dims(std::initializer_list<int64_t> d) {
  return d;
}
}  // namespace

// Sources of the published counts: the Hugging Face model pages (safetensors parameter counts, rounded) and
// the model cards / reports named on each line. The exact values are those of the module shapes of the
// transformers classes (embedding, q/k/v/o, MLP, norms, LM head), written out in the comments.
TEST(NewModelTypes, ParameterCountsMatchThePublishedOnes) {
  struct Case {
    const char* file;
    int64_t exact;     ///< the transformers model's parameters (the text model of a multimodal config)
    double published;  ///< the release's published count
    double tol;        ///< relative
  };
  const Case cases[] = {
      // allenai/OLMo-2-1124-7B, "7.3B params": 2 x 100352 x 4096 + 32 x (4 x 4096^2 + 3 x 4096 x 11008 +
      // q/k norms 2 x 4096 + 2 post norms x 4096) + 4096.
      {"olmo2-7b", 7298617344, 7.30e9, 0.01},
      // ibm-granite/granite-3.3-8b-instruct, "8.17B params": tied 49159 x 4096, 40 layers of GQA 32/8.
      {"granite-3.3-8b", 8170864640, 8.17e9, 0.01},
      // LGAI-EXAONE/EXAONE-4.0-32B: the model card's 32.0B (30.95B without the two embedding tables).
      {"exaone4-32b", 32003216384, 32.0e9, 0.01},
      // meta-llama/Llama-4-Scout-17B-16E: "109B total" with the vision encoder and projector (0.87 G, not
      // modelled); the language model is 48 x (attention + 16 experts + shared expert + router) + tables.
      {"llama4-scout-17b-16e", 107769861120, 109e9, 0.02},
      // google/gemma-3-4b-pt: Gemma 3 report, Table 1: 675M embedding + 3,209M non-embedding parameters for
      // the language model (the 417M vision encoder is not modelled).
      {"gemma3-4b", 3880263168, 675e6 + 3209e6, 0.01},
      // mistralai/Mistral-Small-3.1-24B-Base-2503, "24B": its language model is Mistral Small 3's (the
      // 0.4 G Pixtral encoder is not modelled).
      {"mistral-small-3.1-24b", 23572403200, 24e9, 0.02},
      // ByteDance-Seed/Seed-OSS-36B-Base, "36B": 80 query heads of 128 on a hidden size of 5120, biased
      // q/k/v.
      {"seed-oss-36b", 36151104512, 36e9, 0.01},
      // baidu/ERNIE-4.5-0.3B-PT, "0.36B": tied 103424 x 1024, 18 layers of GQA 16/2 with heads of 128.
      {"ernie4.5-0.3b", 360748032, 0.36e9, 0.01},
  };
  for (const auto& c : cases) {
    const ModelSpec m = load_model_config(model_path(c.file));
    EXPECT_EQ(parameter_count(m), c.exact) << c.file;
    EXPECT_NEAR(static_cast<double>(parameter_count(m)) / c.published, 1.0, c.tol) << c.file;
    EXPECT_EQ(m.family, Family::Llama) << c.file;
    EXPECT_EQ(model_spec_from_json(m.to_json()).to_json(), m.to_json()) << c.file;
  }
  // EXAONE 4.0-32B without its two embedding tables: the card's 30.95B.
  const ModelSpec e = load_model_config(model_path("exaone4-32b"));
  EXPECT_NEAR((parameter_count(e) - 2.0 * 102400 * 5120) / 30.95e9, 1.0, 0.001);
  // Llama 4 Scout: "17B active" (one routed expert and the shared one per layer).
  const ModelSpec l = load_model_config(model_path("llama4-scout-17b-16e"));
  EXPECT_EQ(active_parameter_count(l), 17172894720);
  EXPECT_NEAR(active_parameter_count(l) / 17e9, 1.0, 0.02);
}

TEST(NewModelTypes, Olmo2NormsAfterTheSublayersAndOverTheWholeQkProjections) {
  const ModelSpec m = load_model_config(model_path("olmo2-7b"));
  EXPECT_TRUE(m.post_norm_only && m.qk_norm && m.qk_norm_whole && m.gated_ffn && m.pre_norm);
  EXPECT_FALSE(m.sandwich_norm || m.qk_norm_weightless || m.qkv_bias || m.out_bias || m.tie_word_embeddings);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.context_len, 4096);
  const int64_t b = 2, S = 32, t = b * S, h = 4096;
  const LayerGraph g = build_layer_graph(m, settings(b, S));
  // No norm before attention or the MLP; one after each, inside the residual.
  for (const char* n : {"decoder.0.attn.norm", "decoder.0.ffn.norm"}) EXPECT_LT(g.find(n), 0) << n;
  EXPECT_EQ(producers(g, "decoder.0.attn.q"), std::vector<std::string>{"embed.word"});
  EXPECT_EQ(producers(g, "decoder.0.attn.post_norm"), std::vector<std::string>{"decoder.0.attn.o"});
  EXPECT_EQ(producers(g, "decoder.0.attn.residual"),
            (std::vector<std::string>{"decoder.0.attn.post_norm", "embed.word"}));
  EXPECT_EQ(producers(g, "decoder.0.ffn.gate"), std::vector<std::string>{"decoder.0.attn.residual"});
  EXPECT_EQ(producers(g, "decoder.0.ffn.post_norm"), std::vector<std::string>{"decoder.0.ffn.down"});
  EXPECT_EQ(node(g, "decoder.0.ffn.post_norm").type, LayerType::RMSNorm);
  EXPECT_EQ(node(g, "decoder.0.ffn.post_norm").dims, dims({t, h}));
  EXPECT_EQ(node(g, "head.norm").type, LayerType::RMSNorm);
  // q_norm / k_norm: one RMSNorm over each token's whole projection (32 x 128), weights of that width.
  EXPECT_EQ(node(g, "decoder.0.attn.q_norm").dims, dims({t, 32 * 128}));
  EXPECT_EQ(node(g, "decoder.0.attn.k_norm").dims, dims({t, 32 * 128}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_norm").cost.params, 4096);
  EXPECT_EQ(static_cast<int64_t>(g.total_params()), parameter_count(m));
  // The same kernels as a pre-norm Llama with per-head q/k norms; the norms only move.
  ModelSpec pre = m;
  pre.post_norm_only = pre.qk_norm_whole = false;
  const LayerGraph gp = build_layer_graph(pre, settings(b, S));
  EXPECT_EQ(g.nodes.size(), gp.nodes.size());
  EXPECT_EQ(parameter_count(m) - parameter_count(pre), 32 * (2 * 4096 - 2 * 128));
  // Inference and fused attention build too.
  TrainSettings inf = settings(b, S);
  set_run_mode(inf, RunMode::Inference);
  inf.attention = AttentionImpl::Fused;
  const LayerGraph gi = build_layer_graph(m, inf);
  EXPECT_GE(gi.find("decoder.31.attn.core"), 0);
  EXPECT_GE(gi.find("decoder.31.ffn.post_norm"), 0);
  // A GQA OLMo 2 (OLMo-2-0325-32B: 40 heads, 8 k/v heads): k_norm over the 8 x 128 of k.
  json gq = load("olmo2-7b");
  gq["num_key_value_heads"] = 8;
  const ModelSpec mg = parse_model_config(gq);
  EXPECT_EQ(node(build_layer_graph(mg, settings(b, S)), "decoder.0.attn.k_norm").dims, dims({t, 8 * 128}));
  EXPECT_EQ(parameter_count(m) - parameter_count(mg), 32 * (2 * 4096 * 3072 + 3072));
  // head_dim is not an OLMo 2 key: the head size is hidden / heads, which must divide.
  json bad = load("olmo2-7b");
  bad["num_attention_heads"] = 30;
  bad["num_key_value_heads"] = 30;
  expect_error(bad, "config.num_attention_heads=30 does not divide config.hidden_size=4096");
  bad = load("olmo2-7b");
  bad.erase("vocab_size");
  expect_error(bad, "config.vocab_size is missing");
  bad = load("olmo2-7b");
  bad["attention_bias"] = "yes";
  EXPECT_NE(parse_error(bad).find("config.attention_bias"), std::string::npos) << parse_error(bad);
  json biased = load("olmo2-7b");
  biased["attention_bias"] = true;
  EXPECT_EQ(parameter_count(parse_model_config(biased)), parameter_count(m) + 32 * 4 * 4096);
}

TEST(NewModelTypes, Olmo3IsOlmo2WithSlidingWindowMasks) {
  json j = load("olmo2-7b");
  j["model_type"] = "olmo3";
  j["architectures"] = {"Olmo3ForCausalLM"};
  j["sliding_window"] = 4096;
  json types = json::array();
  for (int i = 0; i < 32; ++i) types.push_back((i + 1) % 4 ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  ModelSpec o3 = parse_model_config(j), o2 = parse_model_config(load("olmo2-7b"));
  o3.hf_class = o2.hf_class;
  EXPECT_EQ(o3.to_json(), o2.to_json());  // the windows are masks on the same scores
  json bad = j;
  bad["layer_types"][3] = "linear_attention";
  expect_error(bad,
               "config.layer_types: \"linear_attention\" is not an attention kind of this model "
               "(sliding_attention, full_attention)");
  bad = j;
  bad["layer_types"].erase(0);
  expect_error(bad, "must be a list of num_hidden_layers=32 attention kinds");
  bad = j;
  bad["sliding_window"] = 0;
  expect_error(bad, "config.sliding_window=0 is out of range");
}

TEST(NewModelTypes, GraniteMultipliersAreElementwiseKernels) {
  const ModelSpec m = load_model_config(model_path("granite-3.3-8b"));
  EXPECT_TRUE(m.embed_scale && m.residual_scale && m.logits_scale && m.tie_word_embeddings);
  EXPECT_FALSE(m.post_norm_only || m.qk_norm || m.sandwich_norm || m.qkv_bias || m.linear_bias);
  EXPECT_DOUBLE_EQ(m.attn_dropout, 0.1);
  EXPECT_EQ(m.num_kv_heads, 8);
  const int64_t b = 2, S = 32, t = b * S, h = 4096, V = 49159;
  const LayerGraph g = build_layer_graph(m, settings(b, S));
  // embeddings x embedding_multiplier, each sublayer x residual_multiplier before its add, logits / scaling.
  EXPECT_EQ(node(g, "embed.scale").type, LayerType::Mul);
  for (const char* n : {"decoder.0.attn.residual_scale", "decoder.39.ffn.residual_scale"}) {
    EXPECT_EQ(node(g, n).type, LayerType::Pointwise) << n;
    EXPECT_EQ(node(g, n).dims, dims({t * h, 0})) << n;
  }
  EXPECT_EQ(producers(g, "decoder.0.attn.residual_scale"), std::vector<std::string>{"decoder.0.attn.o"});
  EXPECT_EQ(producers(g, "decoder.0.ffn.residual"),
            (std::vector<std::string>{"decoder.0.ffn.residual_scale", "decoder.0.attn.residual"}));
  EXPECT_EQ(node(g, "head.logits_scale").dims, dims({t * V, 0}));
  EXPECT_EQ(producers(g, "head.loss"), std::vector<std::string>{"head.logits_scale"});
  EXPECT_EQ(node(g, "head.lm").cost.params, 0);    // tied
  EXPECT_GE(g.find("decoder.0.attn.dropout"), 0);  // attention_dropout 0.1
  // Exactly those kernels more than the same Llama: 2 per layer + the embedding's and the logits' scale.
  ModelSpec plain = m;
  plain.embed_scale = plain.residual_scale = plain.logits_scale = false;
  EXPECT_EQ(forward_nodes(g), forward_nodes(build_layer_graph(plain, settings(b, S))) + 2 * 40 + 2);
  EXPECT_EQ(parameter_count(plain), parameter_count(m));
  // The multipliers' values change no shape; bad ones are refused by name.
  json j = load("granite-3.3-8b");
  j["residual_multiplier"] = 1.0;
  j.erase("logits_scaling");  // GraniteConfig's default 1.0
  EXPECT_EQ(parse_model_config(j).to_json(), parse_model_config(load("granite-3.3-8b")).to_json());
  j = load("granite-3.3-8b");
  j["residual_multiplier"] = 0;
  expect_error(j, "config.residual_multiplier=0 must be > 0");
  j = load("granite-3.3-8b");
  j["logits_scaling"] = -2;
  expect_error(j, "config.logits_scaling=-2 is out of range");
  j = load("granite-3.3-8b");
  j["embedding_multiplier"] = "12";
  EXPECT_NE(parse_error(j).find("config.embedding_multiplier"), std::string::npos) << parse_error(j);
  // A value that changes no node is not a key that granite reads (a sweep over it would predict one row).
  try {
    check_config_key_used(load("granite-3.3-8b"), "residual_multiplier", "granite.json");
    ADD_FAILURE() << "residual_multiplier reported as used";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("config.residual_multiplier is not a key that model_type granite reads"),
        std::string::npos)
        << e.what();
  }
  check_config_key_used(load("granite-3.3-8b"), "intermediate_size", "granite.json");  // no throw
}

TEST(NewModelTypes, Exaone4PostNormsPerHeadQkNormsAndItsHybridAttention) {
  const ModelSpec m = load_model_config(model_path("exaone4-32b"));
  EXPECT_TRUE(m.post_norm_only && m.qk_norm);
  EXPECT_FALSE(m.qk_norm_whole || m.qk_norm_weightless || m.qkv_bias || m.tie_word_embeddings);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.num_kv_heads, 8);
  const int64_t b = 1, S = 64, t = b * S;
  const LayerGraph g = build_layer_graph(m, settings(b, S));
  EXPECT_EQ(node(g, "decoder.0.attn.q_norm").dims, dims({t * 40, 128}));
  EXPECT_EQ(node(g, "decoder.0.attn.k_norm").dims, dims({t * 8, 128}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_norm").cost.params, 128);
  EXPECT_LT(g.find("decoder.63.attn.norm"), 0);
  EXPECT_GE(g.find("decoder.63.ffn.post_norm"), 0);
  // Every spelling of the layer pattern reads the same model (the windows are masks).
  for (const json& pattern : {json("LLLG"), json(2), json(nullptr)}) {
    json j = load("exaone4-32b");
    j["sliding_window_pattern"] = pattern;
    EXPECT_EQ(parse_model_config(j).to_json(), parse_model_config(load("exaone4-32b")).to_json())
        << pattern.dump();
  }
  json lt = load("exaone4-32b");
  lt["layer_types"] = json::array();
  for (int i = 0; i < 64; ++i)
    lt["layer_types"].push_back((i + 1) % 4 ? "sliding_attention" : "full_attention");
  EXPECT_EQ(parse_model_config(lt).to_json(), parse_model_config(load("exaone4-32b")).to_json());
  json j = load("exaone4-32b");
  j["sliding_window_pattern"] = "LLXG";
  expect_error(j,
               "config.sliding_window_pattern=\"LLXG\" must be a string of L (local) and G (global) layers");
  j = load("exaone4-32b");
  j["sliding_window_pattern"] = -1;
  expect_error(j, "config.sliding_window_pattern=-1 is out of range");
  j = load("exaone4-32b");
  j["layer_types"] = json::array({"full_attention"});
  expect_error(
      j, "config.layer_types=[\"full_attention\"] must be a list of num_hidden_layers=64 attention kinds");
  j = load("exaone4-32b");
  j["head_dim"] = 0;
  expect_error(j, "config.head_dim=0 is out of range");
  // EXAONE-4.0-1.2B: no head_dim key (hidden / heads = 64), a tied head.
  j = load("exaone4-32b");
  j.erase("head_dim");
  j["hidden_size"] = 2048;
  j["num_attention_heads"] = 32;
  j["tie_word_embeddings"] = true;
  const ModelSpec small = parse_model_config(j);
  EXPECT_EQ(small.head_dim, 64);
  EXPECT_TRUE(small.tie_word_embeddings);
}

TEST(NewModelTypes, Llama4ScoutTextModelMixtureSharedExpertAndWeightlessQkNorms) {
  const ModelSpec m = load_model_config(model_path("llama4-scout-17b-16e"));
  EXPECT_EQ(m.hf_class, "Llama4ForConditionalGeneration (text model only: the vision tower is not modelled)");
  EXPECT_EQ(m.name, "llama4-scout-17b-16e");
  EXPECT_TRUE(m.qk_norm && m.qk_norm_weightless && m.plain_shared_expert && m.gated_ffn);
  EXPECT_FALSE(m.qk_norm_whole || m.post_norm_only || m.qkv_bias || m.router_bias || m.fused_gate_up ||
               m.tie_word_embeddings || m.dense_expert_inference);
  EXPECT_EQ(m.num_experts, 16);
  EXPECT_EQ(m.moe_top_k, 1);
  EXPECT_EQ(m.ffn_dim, 8192);
  EXPECT_EQ(m.shared_expert_ffn, 8192);
  EXPECT_EQ(m.dense_ffn(), 16384);
  EXPECT_EQ(m.context_len, 262144);
  EXPECT_EQ(sparse_layer_count(m, false), 48);
  const int64_t b = 2, S = 64, t = b * S, h = 5120;
  const LayerGraph g = build_layer_graph(m, settings(b, S));
  EXPECT_EQ(static_cast<int64_t>(g.total_params()), parameter_count(m));
  EXPECT_EQ(node(g, "decoder.0.attn.q").dims, dims({t, h, 40 * 128, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.k").dims, dims({t, h, 8 * 128, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_norm").dims, dims({t * 40, 128}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_norm").cost.params, 0);  // L2 norm: no weight
  EXPECT_EQ(node(g, "decoder.0.attn.k_norm").cost.weight_bytes, 0);
  EXPECT_EQ(node(g, "decoder.0.ffn.router").dims, dims({t, h, 16, 0}));
  const int64_t C = b * 4;  // ceil(1 x 64 / 16) slots per expert and sample
  EXPECT_EQ(node(g, "decoder.0.ffn.expert.gate").dims, dims({16, C, h, 8192}));
  EXPECT_EQ(node(g, "decoder.0.ffn.shared.gate").dims, dims({t, h, 8192, 0}));
  EXPECT_LT(g.find("decoder.0.ffn.shared.scale"), 0);  // added as it is
  EXPECT_GE(g.find("decoder.47.ffn.shared.add"), 0);
  EXPECT_EQ(node(g, "head.lm").cost.params, 202048.0 * h);  // untied
  // The text config alone (model_type llama4_text, Llama4ForCausalLM) is the same model.
  json text = load("llama4-scout-17b-16e")["text_config"];
  text["architectures"] = {"Llama4ForCausalLM"};
  ModelSpec mt = parse_model_config(text);
  EXPECT_EQ(mt.hf_class, "Llama4ForCausalLM");
  mt.hf_class = m.hf_class;
  mt.name = m.name;
  EXPECT_EQ(mt.to_json(), m.to_json());
  // use_qk_norm false (Maverick): no q/k norm nodes.
  text["use_qk_norm"] = false;
  const ModelSpec nq = parse_model_config(text);
  EXPECT_FALSE(nq.qk_norm || nq.qk_norm_weightless);
  EXPECT_LT(build_layer_graph(nq, settings(b, S)).find("decoder.0.attn.q_norm"), 0);
  EXPECT_EQ(parameter_count(nq), parameter_count(m));
}

TEST(NewModelTypes, Llama4MaverickInterleavesDenseAndMoeLayers) {
  // Llama-4-Maverick-17B-128E's text model: 128 experts on every second layer (1, 3, ...), dense SwiGLU
  // FFNs of intermediate_size_mlp between, no q/k norm. Published: 400B total, 17B active (model card).
  json j = load("llama4-scout-17b-16e");
  json& t = j["text_config"];
  t["interleave_moe_layer_step"] = 2;
  t["num_local_experts"] = 128;
  t["use_qk_norm"] = false;
  t.erase("moe_layers");
  const ModelSpec m = parse_model_config(j);
  EXPECT_EQ(sparse_layer_count(m, false), 24);
  EXPECT_FALSE(is_sparse_layer(m, false, 0));
  EXPECT_TRUE(is_sparse_layer(m, false, 1));
  EXPECT_EQ(parameter_count(m), 400711848960);
  EXPECT_NEAR(parameter_count(m) / 400e9, 1.0, 0.01);
  EXPECT_NEAR(active_parameter_count(m) / 17e9, 1.0, 0.02);
  const int64_t b = 1, S = 128, tk = b * S, h = 5120;
  const LayerGraph g = build_layer_graph(m, settings(b, S));
  EXPECT_EQ(node(g, "decoder.0.ffn.gate").dims, dims({tk, h, 16384, 0}));
  EXPECT_LT(g.find("decoder.0.ffn.router"), 0);
  EXPECT_EQ(node(g, "decoder.1.ffn.router").dims, dims({tk, h, 128, 0}));
  EXPECT_GE(g.find("decoder.47.ffn.shared.add"), 0);
  EXPECT_LT(g.find("decoder.46.ffn.router"), 0);
  // The same layers given as moe_layers; moe_layers = [] is a dense model of intermediate_size_mlp.
  json ml = j;
  ml["text_config"]["moe_layers"] = json::array();
  for (int i = 1; i < 48; i += 2) ml["text_config"]["moe_layers"].push_back(i);
  EXPECT_EQ(parse_model_config(ml).to_json(), m.to_json());
  ml["text_config"]["moe_layers"] = json::array();
  const ModelSpec dense = parse_model_config(ml);
  EXPECT_EQ(dense.num_experts, 0);
  EXPECT_EQ(dense.ffn_dim, 16384);
  // Other layouts are refused: one line naming the key.
  json bad = j;
  bad["text_config"]["interleave_moe_layer_step"] = 4;
  expect_error(bad,
               "config.text_config.interleave_moe_layer_step=4: Llama 4 MoE layers other than every layer or "
               "every second layer (1, 3, 5, ...) are not modelled");
  bad = j;
  bad["text_config"]["moe_layers"] = {0, 2};
  expect_error(bad, "config.text_config.moe_layers=[0,2]: Llama 4 MoE layers other than every layer");
  bad = j;
  bad["text_config"]["moe_layers"] = {3, 1};
  expect_error(bad,
               "config.text_config.moe_layers=[3,1]: 1 is not a layer index in [0, 48) in increasing order");
  bad = j;
  bad["text_config"]["num_experts_per_tok"] = 129;
  expect_error(bad, "config.text_config.num_experts_per_tok=129 must be in [1, num_local_experts=128]");
  bad = j;
  bad["text_config"]["no_rope_layers"] = {1, 0};
  expect_error(bad,
               "config.text_config.no_rope_layers=[1,0] must be empty or num_hidden_layers=48 flags 0 / 1");
  bad = j;
  bad["text_config"]["attention_chunk_size"] = 0;
  expect_error(bad, "config.text_config.attention_chunk_size=0 is out of range");
}

TEST(NewModelTypes, MultimodalWrappersReadTheirTextModel) {
  // gemma3: the hub's short text_config, Gemma3TextConfig's defaults for the rest.
  const ModelSpec g = load_model_config(model_path("gemma3-4b"));
  EXPECT_EQ(g.hf_class, "Gemma3ForConditionalGeneration (text model only: the vision tower is not modelled)");
  EXPECT_TRUE(g.sandwich_norm && g.qk_norm && g.embed_scale && g.tie_word_embeddings);
  EXPECT_EQ(g.num_heads, 8);
  EXPECT_EQ(g.num_kv_heads, 4);
  EXPECT_EQ(g.head_dim, 256);
  EXPECT_EQ(g.vocab_size, 262208);
  EXPECT_EQ(g.context_len, 131072);
  EXPECT_EQ(g.activation, Activation::GELUTanh);
  // The same model as the gemma3_text config written out in full.
  json full = load("gemma3-4b")["text_config"];
  const json defaults = {{"vocab_size", 262208},
                         {"num_attention_heads", 8},
                         {"num_key_value_heads", 4},
                         {"head_dim", 256},
                         {"max_position_embeddings", 131072}};
  for (const auto& [k, v] : defaults.items()) full[k] = v;
  ModelSpec gt = parse_model_config(full);
  gt.hf_class = g.hf_class;
  gt.name = g.name;
  EXPECT_EQ(gt.to_json(), g.to_json());
  const LayerGraph gg = build_layer_graph(g, settings(1, 64));
  EXPECT_EQ(node(gg, "decoder.33.attn.q_norm").dims, dims({64 * 8, 256}));
  // mistral3: its text model is a mistral, untied.
  const ModelSpec ms = load_model_config(model_path("mistral-small-3.1-24b"));
  EXPECT_EQ(ms.head_dim, 128);
  EXPECT_EQ(ms.num_kv_heads, 8);
  EXPECT_FALSE(ms.tie_word_embeddings || ms.qk_norm || ms.sandwich_norm);
  EXPECT_EQ(ms.hf_class,
            "Mistral3ForConditionalGeneration (text model only: the vision tower is not modelled)");
  // Errors name the text config's keys; a wrong or missing text model is one line.
  json j = load("gemma3-4b");
  j["text_config"]["num_key_value_heads"] = 3;
  expect_error(
      j, "config.text_config.num_key_value_heads=3 does not divide config.text_config.num_attention_heads=8");
  j = load("gemma3-4b");
  j.erase("text_config");
  expect_error(
      j, "config.text_config is missing or not an object (a gemma3 config holds its language model there)");
  j = load("llama4-scout-17b-16e");
  j["text_config"]["model_type"] = "llama";
  expect_error(
      j,
      "config.text_config.model_type=\"llama\" is not a text model of model_type llama4 that ScaleDL "
      "reads (llama4_text)");
  j = load("mistral-small-3.1-24b");
  j["text_config"]["model_type"] = "ministral3";
  expect_error(j, "config.text_config.model_type=\"ministral3\" is not a text model of model_type mistral3");
  j = load("mistral-small-3.1-24b");
  j["text_config"].erase("model_type");  // Mistral3Config: mistral when unnamed
  EXPECT_EQ(parse_model_config(j).to_json(), parse_model_config(load("mistral-small-3.1-24b")).to_json());
  j["text_config"]["model_type"] = "llama";
  EXPECT_EQ(parse_model_config(j).num_layers, 40);
  // The wrapper's tie applies when the text config has none (Llama4Config's tie_word_embeddings).
  j = load("llama4-scout-17b-16e");
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(j).tie_word_embeddings);
  // A top-level override of a text key changes nothing: refused with where the key is read.
  j = load("gemma3-4b");
  j["num_hidden_layers"] = 2;
  try {
    check_config_key_used(j, "num_hidden_layers", "gemma3-4b.json");
    ADD_FAILURE() << "a top-level num_hidden_layers reported as used";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("config.num_hidden_layers is not a key that model_type gemma3 reads: it "
                                   "would change nothing; it reads config.text_config.num_hidden_layers"),
        std::string::npos)
        << e.what();
  }
}

TEST(NewModelTypes, Qwen3NextIsRefusedWithItsReason) {
  const json j = {{"model_type", "qwen3_next"},   {"hidden_size", 2048},      {"num_hidden_layers", 48},
                  {"num_attention_heads", 16},    {"num_key_value_heads", 2}, {"vocab_size", 151936},
                  {"full_attention_interval", 4}, {"intermediate_size", 5120}};
  expect_error(
      j, "config.model_type=\"qwen3_next\" is not modelled: its Gated DeltaNet linear-attention layers");
  // As a wrapper's text model too (the text type is checked first by the wrapper).
  json w = load("mistral-small-3.1-24b");
  w["text_config"]["model_type"] = "qwen3_next";
  expect_error(w, "config.text_config.model_type=\"qwen3_next\" is not a text model of model_type mistral3");
  EXPECT_EQ(std::string(supported_model_types()).find("qwen3_next"), std::string::npos);
}

TEST(NewModelTypes, StoredSpecsRefuseContradictoryFlags) {
  ModelSpec m = load_model_config(model_path("olmo2-7b"));
  m.qk_norm = false;
  EXPECT_THROW(validate_model_spec(m), Error);
  json st = load_model_config(model_path("olmo2-7b")).to_json();
  st["sandwich_norm"] = true;
  try {
    model_spec_from_json(st, "run[2].model");
    ADD_FAILURE() << "post_norm_only with sandwich norms read back";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run[2].model.post_norm_only"), std::string::npos) << e.what();
  }
  ModelSpec bert = load_model_config(model_path("bert-base"));
  bert.residual_scale = true;
  EXPECT_THROW(validate_model_spec(bert), Error);
  // The new flags are stored only when set: the JSON of the models before them is unchanged.
  const json gj = load_model_config(model_path("glm4-9b")).to_json();
  for (const char* k :
       {"post_norm_only", "qk_norm_whole", "qk_norm_weightless", "residual_scale", "logits_scale"})
    EXPECT_FALSE(gj.contains(k)) << k;
}

TEST(NewModelTypes, SeedOssAndErnie45AreLlamasWithTheirBiasesAndDropouts) {
  // Seed-OSS: q/k/v biased, o not; residual_dropout after o and down; attention dropout 0.1.
  const ModelSpec s = load_model_config(model_path("seed-oss-36b"));
  EXPECT_TRUE(s.qkv_bias && !s.out_bias && !s.linear_bias && !s.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(s.dropout, 0.1);
  EXPECT_DOUBLE_EQ(s.attn_dropout, 0.1);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.context_len, 524288);
  const int64_t b = 1, S = 32, t = b * S;
  const LayerGraph g = build_layer_graph(s, settings(b, S));
  EXPECT_EQ(node(g, "decoder.0.attn.q").dims, dims({t, 5120, 80 * 128, 1}));
  EXPECT_EQ(node(g, "decoder.0.attn.o").dims, dims({t, 80 * 128, 5120, 0}));
  for (const char* n : {"decoder.0.attn.dropout", "decoder.0.attn.out_dropout", "decoder.0.ffn.dropout"})
    EXPECT_GE(g.find(n), 0) << n;
  json j = load("seed-oss-36b");
  j["attention_out_bias"] = true;
  EXPECT_EQ(parameter_count(parse_model_config(j)), parameter_count(s) + 64 * 5120);
  j = load("seed-oss-36b");
  j.erase("attention_bias");  // SeedOssConfig's default: true
  j.erase("head_dim");        // 128
  j.erase("residual_dropout");
  EXPECT_EQ(parse_model_config(j).to_json(), parse_model_config(load("seed-oss-36b")).to_json());
  j = load("seed-oss-36b");
  j["residual_dropout"] = 1.0;
  expect_error(j, "config.residual_dropout=1 must be a probability in [0, 1)");
  // ERNIE 4.5: use_bias on every linear of the blocks (default none), a tied head, no attention dropout.
  const ModelSpec e = load_model_config(model_path("ernie4.5-0.3b"));
  EXPECT_FALSE(e.qkv_bias || e.out_bias || e.linear_bias);
  EXPECT_TRUE(e.tie_word_embeddings);
  EXPECT_EQ(e.attn_dropout, 0);
  const LayerGraph ge = build_layer_graph(e, settings(b, S));
  EXPECT_EQ(node(ge, "decoder.0.attn.q").dims, dims({t, 1024, 16 * 128, 0}));
  EXPECT_EQ(node(ge, "decoder.0.attn.k").dims, dims({t, 1024, 2 * 128, 0}));
  EXPECT_EQ(node(ge, "head.lm").cost.params, 0);
  EXPECT_LT(ge.find("decoder.0.attn.dropout"), 0);
  json u = load("ernie4.5-0.3b");
  u["use_bias"] = true;
  const int64_t layer_biases = 2048 + 2 * 256 + 1024 + 2 * 3072 + 1024;
  EXPECT_EQ(parameter_count(parse_model_config(u)), parameter_count(e) + 18 * layer_biases);
  EXPECT_EQ(node(build_layer_graph(parse_model_config(u), settings(b, S)), "decoder.0.ffn.gate").dims,
            dims({t, 1024, 3072, 1}));
  // attention_bias and attention_dropout are not ERNIE keys: another value changes nothing.
  u = load("ernie4.5-0.3b");
  u["attention_bias"] = true;
  u["attention_dropout"] = 0.1;
  EXPECT_EQ(parse_model_config(u).to_json(), parse_model_config(load("ernie4.5-0.3b")).to_json());
  try {
    check_config_key_used(u, "attention_bias", "ernie.json");
    ADD_FAILURE() << "attention_bias reported as an ernie4_5 key";
  } catch (const Error& ex) {
    EXPECT_NE(
        std::string(ex.what()).find("config.attention_bias is not a key that model_type ernie4_5 reads"),
        std::string::npos)
        << ex.what();
  }
  u = load("ernie4.5-0.3b");
  u["use_bias"] = 1;
  EXPECT_NE(parse_error(u).find("config.use_bias"), std::string::npos) << parse_error(u);
}
