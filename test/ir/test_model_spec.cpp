// parse_model_config, parameter_count and settings validation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model_config_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"

using namespace scaledl;
using scaledl::test::load;
using scaledl::test::model_path;
using scaledl::test::parse_error;

namespace {
std::string neusight(const std::string& name) {
  return std::string(SCALEDL_SOURCE_DIR) + "/test/ir/data/neusight/" + name + ".json";
}
}  // namespace

// Published counts of the Hugging Face checkpoints (transformers num_parameters()).
struct Published {
  const char* file;
  int64_t params;
  double tol;  ///< relative tolerance
};

TEST(ParameterCount, MatchesPublishedCounts) {
  const Published cases[] = {
      {"bert-base", 109482240, 0.005},  // bert-base-uncased (BertModel incl. pooler); ours: MLM head
      {"gpt2", 124439808, 0.005},      {"t5-small", 60506624, 0.005},
      {"vit-base", 86567656, 0.005},    // ViTForImageClassification, 1000 classes
      {"deit-small", 22050664, 0.005},  // facebook/deit-small-patch16-224
  };
  for (const auto& c : cases) {
    ModelSpec m = load_model_config(model_path(c.file));
    double p = static_cast<double>(parameter_count(m));
    EXPECT_NEAR(p / c.params, 1.0, c.tol) << c.file << ": " << p << " vs published " << c.params;
  }
}

TEST(ParameterCount, ExactHuggingFaceCounts) {
  // Counts of the exact HF classes these configs build (model.num_parameters()).
  const std::pair<const char*, int64_t> cases[] = {
      {"bert-base", 109514298},  // BertForMaskedLM: no pooler, MLM transform + vocab bias
      {"gpt2", 124439808},       // GPT2LMHeadModel (tied head)
      {"gpt2-medium", 354823168},
      {"gpt2-large", 774030080},
      {"t5-small", 60506624},  // T5ForConditionalGeneration (tied head)
      {"t5-base", 222903552},
      {"vit-base", 86567656},
      {"vit-large", 304326632},
      {"deit-small", 22051432},     // DeiTForImageClassification: + distillation token and its position
      {"llama-style", 1100048384},  // TinyLlama-1.1B
      {"opt-125m", 125239296},
      {"gpt-neo-125m", 125198592},
      // SwitchTransformersForConditionalGeneration (google/switch-base-8, "620M" on the hub): shared
      // embedding 24,674,304 + encoder 283,171,968 + decoder 311,492,736; 6 + 6 sparse FFNs of 8 experts,
      // router without bias.
      {"switch-base-8", 619339008},
      // The Llama family's other model_types (MistralForCausalLM etc., num_parameters()).
      {"mistral-7b", 7241732096},     // mistralai/Mistral-7B-v0.1
      {"qwen2-0.5b", 494032768},      // Qwen/Qwen2-0.5B (q/k/v biases, tied head)
      {"qwen3-0.6b", 596049920},      // Qwen/Qwen3-0.6B (q/k norms of head_dim 128, tied head)
      {"gemma-2b", 2506172416},       // google/gemma-2b (head_dim 256, one kv head, tied head)
      {"mixtral-8x7b", 46702792704},  // mistralai/Mixtral-8x7B-v0.1: 8 SwiGLU experts in every FFN
      {"phi3-mini", 3821079552},
      {"qwen1.5-moe-a2.7b", 14315784192},  // Qwen/Qwen1.5-MoE-A2.7B (qwen2_moe: 60 experts + a shared one)
      {"pythia-160m", 162322944},  // EleutherAI/pythia-160m (gpt_neox: biased fused qkv, untied embed_out)
      {"gemma2-2b", 2614341888},   // google/gemma-2-2b: four norms per layer
      {"gemma3-1b", 999885952},    // google/gemma-3-1b-pt (gemma3_text): four norms, q/k norms
      {"qwen3-30b-a3b", 30532122624},  // Qwen/Qwen3-30B-A3B: 128 experts of 768 in every FFN, q/k norms //
                                       // microsoft/Phi-3-mini-4k-instruct (fused qkv_proj, gate_up_proj)
      // DeepSeek (latent attention, dense first FFNs, shared experts): "15.7B", "236B", "671B".
      {"deepseek-v2-lite", 15706484224},
      {"deepseek-v2", 235741434880},
      {"deepseek-v3",
       671026404352},  // without V3's 58 x 256 router correction biases (buffers, not parameters)
      // gpt-oss (biased attention, sinks, biased fused experts, a biased router): "20.91B", "116.83B".
      {"gpt-oss-20b", 20914757184},
      {"gpt-oss-120b", 116829156672},
      // nvidia/Minitron-4B-Base (nemotron: LayerNorm1P with weight and bias, up/relu2/down, untied): "4.19B".
      {"minitron-4b", 4190509056},
      {"smollm3-3b", 3075098624},  // HuggingFaceTB/SmolLM3-3B (tied head): "3.08B"
      // zai-org/GLM-4-9B-0414 (glm4: four norms per layer, fused gate_up, q/k/v biases): "9.4B".
      {"glm4-9b", 9400279040},
      // zai-org/GLM-4.5-Air (glm4_moe): "106B total"; the hub's 110B adds the multi-token-prediction
      // layer that transformers does not build.
      {"glm4.5-air", 106852245504},
  };
  for (const auto& [file, n] : cases) {
    ModelSpec m = load_model_config(model_path(file));
    EXPECT_EQ(parameter_count(m), n) << file;
  }
}

TEST(ParameterCount, BertModelWithPoolerIsThePublishedCount) {
  json j = load("bert-base");
  j["architectures"] = {"BertModel"};
  ModelSpec m = parse_model_config(j);
  EXPECT_TRUE(m.pooler);
  // BertModel 109,482,240 + the classifier (768 x 2 + 2) that training needs.
  EXPECT_EQ(parameter_count(m), 109482240 + 768 * 2 + 2);
}

TEST(ParameterCount, VitTypedDeitSmallIsExact) {
  json j = load("deit-small");
  j["model_type"] = "vit";  // how the hub stores facebook/deit-small-patch16-224
  j["architectures"] = {"ViTForImageClassification"};
  EXPECT_EQ(parameter_count(parse_model_config(j)), 22050664);
}

TEST(ParameterCount, NeusightConfigs) {
  // The NeuSight configs as shipped (odd keys included): all parse except the MoE one.
  const std::pair<const char*, int64_t> cases[] = {
      {"bert", 109514298},       {"gpt2_large", 774030080}, {"gpt2_xl", 1557611200},
      {"llama2_7b", 6738415616}, {"opt_13", 1315758080},
  };
  for (const auto& [file, n] : cases) {
    ModelSpec m = load_model_config(neusight(file));
    EXPECT_EQ(parameter_count(m), n) << file;
  }
  for (const char* f : {"bert_large", "gpt2_med", "gpt3_13", "gpt3_27", "gpt3_67", "gpt3_xl", "opt"})
    EXPECT_NO_THROW(load_model_config(neusight(f))) << f;
  // NeuSight's Switch-XL with 4 experts: 24 + 24 layers, every second FFN sparse.
  ModelSpec sw = load_model_config(neusight("switchxl4"));
  EXPECT_EQ(sw.family, Family::Switch);
  EXPECT_EQ(sw.num_experts, 4);
  EXPECT_EQ(sparse_layer_count(sw, false), 12);
  EXPECT_EQ(sparse_layer_count(sw, true), 12);
  const int64_t h = 1024, f = 16384, attn = 4 * h * 32 * 128, ffn = 2 * h * f, moe = 4 * ffn + h * 4;
  const int64_t enc = 24 * (2 * h + attn) + 12 * ffn + 12 * moe + 32 * 32 + h;
  const int64_t dec = 24 * (3 * h + 2 * attn) + 12 * ffn + 12 * moe + 32 * 32 + h;
  EXPECT_EQ(parameter_count(sw), 32128 * h + enc + dec);
}

TEST(SwitchTransformers, SparseLayersCapacityAndBadExpertCounts) {
  json j = load("switch-base-8");
  ModelSpec m = parse_model_config(j, "switch");
  EXPECT_EQ(m.family, Family::Switch);
  EXPECT_EQ(m.arch, Arch::EncoderDecoder);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_FALSE(m.router_bias);
  EXPECT_FALSE(m.gated_ffn);
  // HF SwitchTransformersStack: FFN i is sparse when i % step == 1.
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(is_sparse_layer(m, false, i), i % 2 == 1) << i;
  EXPECT_EQ(sparse_layer_count(m, false), 6);
  EXPECT_EQ(sparse_layer_count(m, true), 6);
  // Capacity: expert_capacity tokens per sample, never more than the sequence.
  EXPECT_EQ(expert_capacity_per_sample(m, 512), 64);
  EXPECT_EQ(expert_capacity_per_sample(m, 16), 16);
  // Without an explicit step the step is num_layers / num_sparse_*_layers.
  j.erase("encoder_sparse_step");
  j["num_sparse_encoder_layers"] = 3;
  EXPECT_EQ(sparse_layer_count(parse_model_config(j), false), 3);
  j["num_sparse_encoder_layers"] = 12;  // step 1: every FFN
  EXPECT_EQ(sparse_layer_count(parse_model_config(j), false), 12);
  j["num_sparse_encoder_layers"] = 0;  // none (HF's hack would still make layer 1 sparse)
  EXPECT_EQ(sparse_layer_count(parse_model_config(j), false), 0);
  // A capacity factor instead of a fixed capacity.
  json c = load("switch-base-8");
  c.erase("expert_capacity");
  c["capacity_factor"] = 1.25;
  EXPECT_EQ(expert_capacity_per_sample(parse_model_config(c), 512), 80);  // ceil(1.25 * 512 / 8)
  // Round trip through the stored JSON keeps the experts; dense models' JSON has no expert keys.
  EXPECT_EQ(model_spec_from_json(m.to_json()).to_json(), m.to_json());
  EXPECT_FALSE(load_model_config(model_path("t5-small")).to_json().contains("num_experts"));
  // Bad inputs: one line naming the key and value.
  json bad = load("switch-base-8");
  bad["num_experts"] = 0;
  EXPECT_NE(parse_error(bad).find("config.num_experts=0 must be >= 1"), std::string::npos)
      << parse_error(bad);
  bad["num_experts"] = -2;
  EXPECT_NE(parse_error(bad).find("num_experts"), std::string::npos) << parse_error(bad);
  bad = load("switch-base-8");
  bad["expert_capacity"] = 0;
  EXPECT_NE(parse_error(bad).find("config.expert_capacity=0"), std::string::npos) << parse_error(bad);
  bad = load("switch-base-8");
  bad["encoder_sparse_step"] = 13;
  EXPECT_NE(parse_error(bad).find("config.encoder_sparse_step=13"), std::string::npos) << parse_error(bad);
  bad = load("switch-base-8");
  bad["dense_act_fn"] = "tanh";
  EXPECT_NE(parse_error(bad).find("dense_act_fn"), std::string::npos) << parse_error(bad);
  // Experts on a dense family are refused by the spec check.
  ModelSpec t5 = load_model_config(model_path("t5-small"));
  t5.num_experts = 4;
  EXPECT_THROW(validate_model_spec(t5), Error);
}

TEST(LlamaFamily, MistralQwen2GemmaAndMixtralReadAsLlamas) {
  ModelSpec mi = load_model_config(model_path("mistral-7b"));
  EXPECT_EQ(mi.family, Family::Llama);
  EXPECT_EQ(mi.num_kv_heads, 8);
  EXPECT_FALSE(mi.qkv_bias);
  EXPECT_FALSE(mi.tie_word_embeddings);
  EXPECT_EQ(mi.hf_class, "MistralForCausalLM");
  ModelSpec q = load_model_config(model_path("qwen2-0.5b"));
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.out_bias);
  EXPECT_FALSE(q.linear_bias);
  EXPECT_TRUE(q.tie_word_embeddings);
  EXPECT_FALSE(q.qk_norm);
  ModelSpec q3 = load_model_config(model_path("qwen3-0.6b"));
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_EQ(q3.head_dim, 128);  // not hidden / heads = 64
  EXPECT_TRUE(q3.to_json().at("qk_norm").get<bool>());
  EXPECT_EQ(model_spec_from_json(q3.to_json()).to_json(), q3.to_json());
  ModelSpec phi = load_model_config(model_path("phi3-mini"));
  EXPECT_TRUE(phi.fused_qkv && phi.fused_gate_up && phi.qkv_fused());
  EXPECT_TRUE(load_model_config(model_path("gpt2")).qkv_fused());  // c_attn, by its family
  EXPECT_FALSE(load_model_config(model_path("gpt2")).to_json().contains("fused_qkv"));
  EXPECT_EQ(model_spec_from_json(phi.to_json()).to_json(), phi.to_json());
  json pj = load("phi3-mini");
  pj["resid_pdrop"] = 0.1;
  pj["embd_pdrop"] = 0.2;
  EXPECT_EQ(parse_model_config(pj).dropout, 0.1);
  EXPECT_EQ(parse_model_config(pj).embed_dropout, 0.2);
  pj["resid_pdrop"] = 1.5;
  EXPECT_NE(parse_error(pj).find("config.resid_pdrop=1.5"), std::string::npos) << parse_error(pj);
  ModelSpec g = load_model_config(model_path("gemma-2b"));
  EXPECT_EQ(g.head_dim, 256);
  EXPECT_TRUE(g.embed_scale);
  EXPECT_TRUE(g.tie_word_embeddings);
  // hidden_act "gelu" is not what GemmaMLP runs: without hidden_activation it is gelu_pytorch_tanh.
  EXPECT_EQ(g.activation, Activation::GELUTanh);
  json gj = load("gemma-2b");
  gj["hidden_activation"] = "relu";
  EXPECT_EQ(parse_model_config(gj).activation, Activation::ReLU);
  gj.erase("head_dim");  // GemmaConfig's default head_dim is 256, not hidden / heads
  EXPECT_EQ(parse_model_config(gj).head_dim, 256);
  EXPECT_TRUE(g.to_json().at("embed_scale").get<bool>());
  EXPECT_EQ(model_spec_from_json(g.to_json()).to_json(), g.to_json());
  ModelSpec neox = load_model_config(model_path("pythia-160m"));
  EXPECT_TRUE(neox.parallel_residual && neox.qkv_fused() && neox.linear_bias && neox.qkv_bias);
  EXPECT_EQ(neox.norm, NormKind::LayerNorm);
  EXPECT_FALSE(neox.gated_ffn || neox.tie_word_embeddings);
  EXPECT_EQ(model_spec_from_json(neox.to_json()).to_json(), neox.to_json());
  json nj = load("pythia-160m");
  nj["use_parallel_residual"] = false;
  EXPECT_FALSE(parse_model_config(nj).parallel_residual);
  nj["use_parallel_residual"] = "yes";
  EXPECT_NE(parse_error(nj).find("use_parallel_residual"), std::string::npos) << parse_error(nj);
  // Gemma 2: sandwich norms and soft-capping (50 on the scores, 30 on the logits); Gemma 3: q/k norms, no
  // caps.
  ModelSpec g2 = load_model_config(model_path("gemma2-2b"));
  EXPECT_TRUE(g2.sandwich_norm && g2.embed_scale && g2.tie_word_embeddings);
  EXPECT_EQ(g2.attn_softcap, 50.0);
  EXPECT_EQ(g2.final_softcap, 30.0);
  EXPECT_FALSE(g2.qk_norm);
  EXPECT_EQ(model_spec_from_json(g2.to_json()).to_json(), g2.to_json());
  ModelSpec g3 = load_model_config(model_path("gemma3-1b"));
  EXPECT_TRUE(g3.sandwich_norm && g3.qk_norm);
  EXPECT_EQ(g3.attn_softcap, 0.0);  // null in the config
  EXPECT_FALSE(g3.to_json().contains("attn_softcap"));
  json g2j = load("gemma2-2b");
  g2j.erase("final_logit_softcapping");  // Gemma2Config's default: 30
  EXPECT_EQ(parse_model_config(g2j).final_softcap, 30.0);
  g2j["attn_logit_softcapping"] = -1.0;
  EXPECT_NE(parse_error(g2j).find("config.attn_logit_softcapping=-1"), std::string::npos) << parse_error(g2j);
  g2j["attn_logit_softcapping"] = "50";
  EXPECT_NE(parse_error(g2j).find("attn_logit_softcapping"), std::string::npos) << parse_error(g2j);
  // Mixtral: 8 experts in every FFN, each token routed to 2.
  ModelSpec x = load_model_config(model_path("mixtral-8x7b"));
  EXPECT_EQ(x.family, Family::Llama);
  EXPECT_EQ(x.num_experts, 8);
  EXPECT_EQ(x.moe_top_k, 2);
  EXPECT_TRUE(x.gated_ffn);
  EXPECT_EQ(sparse_layer_count(x, false), 32);
  EXPECT_EQ(sparse_layer_count(x, true), 0);
  EXPECT_EQ(expert_capacity_per_sample(x, 512), 128);  // 2 x 512 / 8: an expert's mean load
  EXPECT_EQ(expert_capacity_per_sample(x, 3), 1);
  EXPECT_EQ(active_parameter_count(x), 12879925248);  // the published 12.9 B active parameters
  EXPECT_EQ(active_parameter_count(mi), parameter_count(mi));
  // Qwen3-30B-A3B: 8 of 128 experts of moe_intermediate_size 768, Qwen3's attention.
  ModelSpec q3m = load_model_config(model_path("qwen3-30b-a3b"));
  EXPECT_EQ(q3m.num_experts, 128);
  EXPECT_EQ(q3m.moe_top_k, 8);
  EXPECT_EQ(q3m.ffn_dim, 768);
  EXPECT_TRUE(q3m.qk_norm);
  EXPECT_EQ(sparse_layer_count(q3m, false), 48);
  EXPECT_EQ(active_parameter_count(q3m), 3353032704);  // "3.3B activated"
  json qm = load("qwen3-30b-a3b");
  qm["decoder_sparse_step"] = 2;
  EXPECT_NE(parse_error(qm).find("config.decoder_sparse_step=2: dense FFN layers"), std::string::npos)
      << parse_error(qm);
  qm = load("qwen3-30b-a3b");
  qm["mlp_only_layers"] = {0, 5};
  EXPECT_NE(parse_error(qm).find("config.mlp_only_layers=[0,5]"), std::string::npos) << parse_error(qm);
  qm = load("qwen3-30b-a3b");
  qm["num_experts_per_tok"] = 129;
  EXPECT_NE(parse_error(qm).find("config.num_experts_per_tok=129 must be in [1, num_experts=128]"),
            std::string::npos)
      << parse_error(qm);
  qm["num_experts"] = 0;
  EXPECT_NE(parse_error(qm).find("config.num_experts=0 must be >= 1 (a dense model is model_type \"qwen3\")"),
            std::string::npos)
      << parse_error(qm);
  // Qwen1.5-MoE-A2.7B: 4 of 60 experts of 1,408, and a shared expert of 5,632 every token takes.
  ModelSpec q2m = load_model_config(model_path("qwen1.5-moe-a2.7b"));
  EXPECT_EQ(q2m.shared_expert_ffn, 5632);
  EXPECT_EQ(q2m.ffn_dim, 1408);
  EXPECT_TRUE(q2m.qkv_bias && !q2m.qk_norm);
  EXPECT_EQ(active_parameter_count(q2m), 2689173504);  // "A2.7B"
  EXPECT_EQ(q2m.to_json().at("shared_expert_ffn"), 5632);
  EXPECT_EQ(model_spec_from_json(q2m.to_json()).to_json(), q2m.to_json());
  EXPECT_FALSE(x.to_json().contains("shared_expert_ffn"));
  json q2j = load("qwen1.5-moe-a2.7b");
  q2j["shared_expert_intermediate_size"] = 0;  // no shared expert: the routed ones only
  EXPECT_EQ(parameter_count(parse_model_config(q2j)), 14315784192 - 24 * (3 * 2048 * 5632 + 2048));
  q2j["shared_expert_intermediate_size"] = -1;
  EXPECT_NE(parse_error(q2j).find("config.shared_expert_intermediate_size=-1"), std::string::npos)
      << parse_error(q2j);
  q2j = load("qwen1.5-moe-a2.7b");
  q2j["decoder_sparse_step"] = 2;
  EXPECT_NE(parse_error(q2j).find("dense FFN layers in a qwen2_moe model"), std::string::npos)
      << parse_error(q2j);
  // Switch: one expert of each sparse FFN is active.
  ModelSpec sw = load_model_config(model_path("switch-base-8"));
  EXPECT_EQ(active_parameter_count(sw), parameter_count(sw) - 12 * 7 * 2 * 768 * 3072);
  EXPECT_EQ(x.to_json().at("moe_top_k"), 2);
  EXPECT_EQ(model_spec_from_json(x.to_json()).to_json(), x.to_json());
  // Keys of earlier runs are unchanged: no new key on dense or top-1 models.
  for (const auto& d : {mi, q, sw, load_model_config(model_path("llama-style"))}) {
    EXPECT_FALSE(d.to_json().contains("moe_top_k")) << d.name;
    EXPECT_FALSE(d.to_json().contains("embed_scale")) << d.name;
    EXPECT_FALSE(d.to_json().contains("qk_norm")) << d.name;
    EXPECT_FALSE(d.to_json().contains("fused_gate_up")) << d.name;
    EXPECT_FALSE(d.to_json().contains("sandwich_norm")) << d.name;
    EXPECT_FALSE(d.to_json().contains("parallel_residual")) << d.name;
  }
  // Bad inputs: one line naming the key and value.
  json bad = load("mixtral-8x7b");
  bad["num_experts_per_tok"] = 0;
  EXPECT_NE(parse_error(bad).find("config.num_experts_per_tok=0 must be in [1, num_local_experts=8]"),
            std::string::npos)
      << parse_error(bad);
  bad["num_experts_per_tok"] = 9;
  EXPECT_NE(parse_error(bad).find("config.num_experts_per_tok=9"), std::string::npos) << parse_error(bad);
  bad = load("mixtral-8x7b");
  bad["num_local_experts"] = 0;
  EXPECT_NE(parse_error(bad).find("config.num_local_experts=0 must be >= 1"), std::string::npos)
      << parse_error(bad);
  bad["num_local_experts"] = "8";
  EXPECT_NE(parse_error(bad).find("num_local_experts"), std::string::npos) << parse_error(bad);
  bad = load("qwen2-0.5b");
  bad["num_key_value_heads"] = 3;
  EXPECT_NE(parse_error(bad).find("config.num_key_value_heads=3 does not divide"), std::string::npos)
      << parse_error(bad);
  bad = load("gemma-2b");
  bad["hidden_activation"] = "tanh";
  EXPECT_NE(parse_error(bad).find("config.hidden_activation=\"tanh\""), std::string::npos)
      << parse_error(bad);
  bad["model_type"] = "gemma4";
  EXPECT_NE(parse_error(bad).find("config.model_type=\"gemma4\" is not supported"), std::string::npos)
      << parse_error(bad);
  // More choices than experts is refused by the spec check too.
  ModelSpec wrong = x;
  wrong.moe_top_k = 9;
  EXPECT_THROW(validate_model_spec(wrong), Error);
}

TEST(ModelSpec, FamilyDetails) {
  ModelSpec t5 = load_model_config(model_path("t5-small"));
  EXPECT_EQ(t5.arch, Arch::EncoderDecoder);
  EXPECT_EQ(t5.num_decoder_layers, 6);
  EXPECT_EQ(t5.norm, NormKind::RMSNorm);
  EXPECT_FALSE(t5.linear_bias);

  json v11 = load("t5-small");
  v11["feed_forward_proj"] = "gated-gelu";
  v11["tie_word_embeddings"] = false;
  v11["d_ff"] = 1024;  // google/t5-v1_1-small: d_ff 1024, 8 layers, 6 heads, 32128 vocab
  v11["num_layers"] = 8;
  v11["num_decoder_layers"] = 8;
  v11["num_heads"] = 6;
  ModelSpec g = parse_model_config(v11);
  EXPECT_TRUE(g.gated_ffn);
  EXPECT_EQ(g.activation, Activation::GELUNew);  // HF maps gated-gelu to gelu_new
  EXPECT_EQ(parameter_count(g), 76961152);       // published count of google/t5-v1_1-small

  ModelSpec l = load_model_config(model_path("llama-style"));
  EXPECT_EQ(l.num_kv_heads, 4);
  EXPECT_EQ(l.head_dim, 64);
  EXPECT_FALSE(l.tie_word_embeddings);
  EXPECT_EQ(l.activation, Activation::SiLU);

  ModelSpec opt = load_model_config(neusight("opt"));  // hidden 512, word_embed_proj_dim 2048
  EXPECT_EQ(opt.embed_dim, 2048);
  EXPECT_EQ(opt.position_offset, 2);

  ModelSpec d = load_model_config(model_path("deit-small"));
  EXPECT_EQ(d.num_special_tokens, 2);
  EXPECT_EQ(d.num_labels, 1000);
}

TEST(TrainSettings, ParsesAndRejects) {
  TrainSettings s = parse_train_settings(
      json::parse(R"({"batch":16,"seq_len":256,"dtype":"bf16","optimizer":"sgd","optimizer_step":false})"));
  EXPECT_EQ(s.batch, 16);
  EXPECT_EQ(s.seq_len, 256);
  EXPECT_EQ(s.dtype, DType::BF16);
  EXPECT_EQ(s.optimizer, OptimizerKind::SGD);
  EXPECT_FALSE(s.optimizer_step);

  json cfg = load("gpt2");
  cfg["scaledl"] = {{"batch", 4}, {"seq_len", 64}};
  EXPECT_EQ(settings_from_config(cfg).batch, 4);

  const std::pair<const char*, const char*> bad[] = {
      {R"({"batch":0})", "settings.batch=0"},
      {R"({"batch":-3})", "settings.batch=-3"},
      {R"({"seq_len":1.5})", "settings.seq_len=1.5"},
      {R"({"dtype":"fp9"})", "settings.dtype=\"fp9\""},
      {R"({"dtype":"fp8"})", "settings.dtype=fp8: FP8 training is dtype=bf16 with fp8=true"},
      {R"({"optimizer":"lamb"})", "settings.optimizer=\"lamb\""},
      {R"({"bacth":8})", "settings.bacth"},
      {R"({"optimizer_step":"yes"})", "settings.optimizer_step"},
      {R"([1,2])", "settings"},
  };
  for (const auto& [text, key] : bad) {
    try {
      parse_train_settings(json::parse(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << text << " -> " << e.what();
    }
  }
}

TEST(TrainSettings, ValidatedAgainstModel) {
  ModelSpec bert = load_model_config(model_path("bert-base"));
  TrainSettings s;
  s.seq_len = 513;
  try {
    validate_settings(bert, s);
    ADD_FAILURE() << "seq_len 513 accepted for BERT";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("settings.seq_len=513"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  ModelSpec vit = load_model_config(model_path("vit-base"));
  TrainSettings v;
  v.image_size = 230;
  EXPECT_THROW(validate_settings(vit, v), Error);
  v.image_size = 384;
  EXPECT_NO_THROW(validate_settings(vit, v));
  EXPECT_EQ(tokens_per_sample(vit, v), 24 * 24 + 1);
  TrainSettings huge;
  huge.batch = 1 << 20;
  huge.seq_len = 512;
  EXPECT_THROW(validate_settings(bert, huge), Error);  // 2^40 attention scores
}

// Table of invalid configs: each must be refused with a message naming the key.
struct BadConfig {
  const char* base;    ///< models/<base>.json
  const char* patch;   ///< JSON object merged into it (null values delete the key)
  const char* needle;  ///< text the error must contain
};

TEST(ParseModelConfig, RefusesInvalidConfigsNamingTheKey) {
  const BadConfig cases[] = {
      {"bert-base", R"({"model_type":"resnet"})", "model_type=\"resnet\""},
      {"bert-base", R"({"model_type":null})", "model_type is missing"},
      {"bert-base", R"({"hidden_size":null})", "hidden_size is missing"},
      {"bert-base", R"({"hidden_size":0})", "hidden_size=0"},
      {"bert-base", R"({"hidden_size":-768})", "hidden_size=-768"},
      {"bert-base", R"({"hidden_size":1000})",
       "num_attention_heads=12 does not divide config.hidden_size=1000"},
      {"bert-base", R"({"hidden_size":2097152})", "hidden_size=2097152"},
      {"bert-base", R"({"vocab_size":1000000000000})", "vocab_size=1000000000000"},
      {"bert-base", R"({"num_hidden_layers":"twelve"})", "num_hidden_layers=\"twelve\""},
      {"bert-base", R"({"hidden_dropout_prob":1.0})", "hidden_dropout_prob"},
      {"bert-base", R"({"hidden_act":"mish"})", "hidden_act=\"mish\""},
      {"gpt2", R"({"n_head":7})", "n_head=7"},
      {"gpt2", R"({"n_layer":0})", "n_layer=0"},
      {"gpt2", R"({"n_positions":-1})", "n_positions=-1"},
      {"llama-style", R"({"num_key_value_heads":5})", "num_key_value_heads=5 does not divide"},
      {"llama-style", R"({"intermediate_size":null})", "intermediate_size is missing"},
      {"vit-base", R"({"patch_size":15})", "patch_size=15 does not divide config.image_size=224"},
      {"vit-base", R"({"image_size":0})", "image_size=0"},
      {"t5-small", R"({"feed_forward_proj":"gated-mish"})", "feed_forward_proj=\"gated-mish\""},
      {"t5-small", R"({"d_model":1.5})", "d_model=1.5"},
      {"opt-125m", R"({"ffn_dim":null})", "ffn_dim is missing"},
      {"deit-small", R"({"num_labels":0})", "num_labels=0"},
      {"gpt2", R"({"architectures":"GPT2LMHeadModel"})", "architectures"},
  };
  for (const auto& c : cases) {
    json j = load(c.base);
    j.merge_patch(json::parse(c.patch));
    std::string err = parse_error(j);
    EXPECT_NE(err.find(c.needle), std::string::npos)
        << c.base << " + " << c.patch << " -> \"" << err << "\" (expected to contain \"" << c.needle << "\")";
    EXPECT_EQ(err.find('\n'), std::string::npos) << "multi-line message: " << err;
  }
  EXPECT_NE(parse_error(json::array()).find("expected a JSON object"), std::string::npos);
}

TEST(ParseModelConfig, RefusesBadFiles) {
  const std::string dir = testing::TempDir();
  const std::string trunc = dir + "/truncated.json";
  write_text_file_atomic(trunc, R"({"model_type": "bert", "hidden_size": 7)");
  try {
    load_model_config(trunc);
    ADD_FAILURE() << "truncated config accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated.json: malformed JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model_config(dir + "/no-such-model.json"), Error);
}

// model_spec_from_json lives in the ir stage (src/ir/stored_spec.cpp).
TEST(StoredSpec, ToJsonRoundTripsForEveryFamily) {
  for (const char* f : {"bert-base.json", "gpt2.json", "t5-small.json", "vit-base.json", "deit-small.json",
                        "llama-style.json", "opt-125m.json", "gpt-neo-125m.json", "switch-base-8.json"}) {
    ModelSpec m = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/" + f);
    ModelSpec r = model_spec_from_json(m.to_json());
    EXPECT_EQ(r.to_json(), m.to_json()) << f;
  }
  nlohmann::json j = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/gpt2.json").to_json();
  j["family"] = "resnet";
  try {
    model_spec_from_json(j, "run[3].model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run[3].model.family=resnet"), std::string::npos) << e.what();
  }
  j.erase("family");
  EXPECT_THROW(model_spec_from_json(j), Error);
}

TEST(ModelSpec, DeepSeekLatentAttentionDenseFirstLayersAndSharedExperts) {
  ModelSpec v3 = load_model_config(model_path("deepseek-v3"));
  EXPECT_EQ(v3.family, Family::Llama);
  EXPECT_TRUE(v3.mla());
  EXPECT_EQ(v3.head_dim, 192);  // qk_nope 128 + qk_rope 64
  EXPECT_EQ(v3.qk_rope_dim, 64);
  EXPECT_EQ(v3.value_head_dim(), 128);
  EXPECT_EQ(v3.num_kv_heads, 128);
  EXPECT_EQ(v3.q_lora_rank, 1536);
  EXPECT_EQ(v3.kv_lora_rank, 512);
  EXPECT_EQ(v3.ffn_dim, 2048);       // the experts'
  EXPECT_EQ(v3.dense_ffn(), 18432);  // the first three layers'
  EXPECT_EQ(v3.first_dense_layers, 3);
  EXPECT_EQ(v3.shared_expert_ffn, 2048);
  EXPECT_TRUE(v3.plain_shared_expert);
  EXPECT_EQ(v3.moe_top_k, 8);
  EXPECT_FALSE(is_sparse_layer(v3, false, 2));
  EXPECT_TRUE(is_sparse_layer(v3, false, 3));
  EXPECT_EQ(sparse_layer_count(v3, false), 58);
  // "37B activated": 8 routed + 1 shared expert of 2,048 and the router per sparse FFN (embeddings counted).
  EXPECT_EQ(active_parameter_count(v3), 37552282624);
  ModelSpec lite = load_model_config(model_path("deepseek-v2-lite"));
  EXPECT_EQ(lite.q_lora_rank, 0);  // null: one q_proj
  EXPECT_EQ(lite.shared_expert_ffn, 2 * 1408);
  EXPECT_EQ(sparse_layer_count(lite, false), 26);
  EXPECT_EQ(active_parameter_count(lite), 2661150208);  // "2.4B activated" without the 0.21 G input embedding
  // The stored form round-trips, and the new keys appear only where they are set.
  for (const auto& m : {v3, lite})
    EXPECT_EQ(model_spec_from_json(m.to_json()).to_json(), m.to_json()) << m.name;
  EXPECT_EQ(v3.to_json().at("kv_lora_rank"), 512);
  EXPECT_EQ(v3.to_json().at("dense_ffn_dim"), 18432);
  for (const char* f : {"mixtral-8x7b", "qwen1.5-moe-a2.7b", "llama-style", "switch-base-8"}) {
    auto j = load_model_config(model_path(f)).to_json();
    for (const char* k :
         {"kv_lora_rank", "v_head_dim", "first_dense_layers", "dense_ffn_dim", "plain_shared_expert"})
      EXPECT_FALSE(j.contains(k)) << f << " " << k;
  }
  // n_routed_experts null: a dense model of latent attention, intermediate_size everywhere.
  json d = load("deepseek-v2-lite");
  d["n_routed_experts"] = nullptr;
  ModelSpec dense = parse_model_config(d);
  EXPECT_EQ(dense.num_experts, 0);
  EXPECT_EQ(dense.ffn_dim, 10944);
  EXPECT_EQ(parameter_count(dense), 15706484224 - int64_t{26} * (571080704 - 3 * 2048 * 10944));
  // Bad inputs: one line naming the key and value.
  const std::pair<const char*, json> bad[] = {
      {"config.n_routed_experts=0 must be >= 1", json{{"n_routed_experts", 0}}},
      {"config.num_experts_per_tok=9 must be in [1, n_routed_experts=8]",
       json{{"n_routed_experts", 8}, {"num_experts_per_tok", 9}}},
      {"config.moe_layer_freq=2: dense FFNs between sparse ones are not supported",
       json{{"moe_layer_freq", 2}}},
      {"config.qk_rope_head_dim=63 must be even", json{{"qk_rope_head_dim", 63}}},
      {"config.first_k_dense_replace=62 is out of range [0, 61]", json{{"first_k_dense_replace", 62}}},
      {"config.kv_lora_rank=0 is out of range", json{{"kv_lora_rank", 0}}},
      {"config.qk_nope_head_dim=0 + qk_rope_head_dim=0 must be >= 1",
       json{{"qk_nope_head_dim", 0}, {"qk_rope_head_dim", 0}}},
  };
  for (const auto& [msg, patch] : bad) {
    json j = load("deepseek-v3");
    j.merge_patch(patch);
    EXPECT_NE(parse_error(j).find(msg), std::string::npos) << parse_error(j);
  }
  json v2 = load("deepseek-v2-lite");
  v2.erase("num_experts_per_tok");  // DeepseekV2Config's default is null
  EXPECT_NE(parse_error(v2).find("config.num_experts_per_tok is missing"), std::string::npos)
      << parse_error(v2);
}

TEST(ModelSpec, GptOssSinksBiasedExpertsAndItsClampedGlu) {
  ModelSpec m = load_model_config(model_path("gpt-oss-20b"));
  EXPECT_EQ(m.family, Family::Llama);
  EXPECT_TRUE(m.attn_sinks && m.clamped_glu && m.dense_expert_inference && m.fused_gate_up && m.linear_bias);
  EXPECT_TRUE(m.qkv_bias && m.out_bias && m.router_bias);
  EXPECT_EQ(m.num_experts, 32);
  EXPECT_EQ(m.moe_top_k, 4);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(sparse_layer_count(m, false), 24);
  // "3.61B active" is without the input embedding (201,088 x 2,880).
  EXPECT_EQ(active_parameter_count(m) - 201088 * 2880, 3608307264);
  EXPECT_EQ(model_spec_from_json(m.to_json()).to_json(), m.to_json());
  EXPECT_TRUE(m.to_json().at("attn_sinks").get<bool>());
  EXPECT_FALSE(load_model_config(model_path("mixtral-8x7b")).to_json().contains("attn_sinks"));
  // experts_per_token alone (as in the original checkpoint's config) is read too.
  json j = load("gpt-oss-20b");
  j.erase("num_experts_per_tok");
  j["experts_per_token"] = 2;
  EXPECT_EQ(parse_model_config(j).moe_top_k, 2);
  j["experts_per_token"] = 33;
  EXPECT_NE(parse_error(j).find("config.experts_per_token=33 must be in [1, num_local_experts=32]"),
            std::string::npos)
      << parse_error(j);
  j = load("gpt-oss-20b");
  j["num_local_experts"] = 0;
  EXPECT_NE(parse_error(j).find("config.num_local_experts=0 must be >= 1"), std::string::npos)
      << parse_error(j);
  // A biased mixture other than gpt-oss's fused experts is refused (the graph would miss its biases).
  json q = load("qwen1.5-moe-a2.7b");
  q["mlp_bias"] = true;
  EXPECT_NE(parse_error(q).find("biased experts are modelled for fused gate_up experts only"),
            std::string::npos)
      << parse_error(q);
}

TEST(ModelType, EveryRowRoundTripsAndTheListKeepsItsOrder) {
  for (int i = 0; i < kModelTypeCount; ++i) {
    const auto t = static_cast<ModelType>(i);
    EXPECT_EQ(parse_model_type(to_string(t)), t) << to_string(t);
  }
  // The list in messages, in the rows' order (it was a hand-kept string before the table).
  EXPECT_STREQ(supported_model_types(),
               "bert, gpt2, t5, vit, deit, gpt_neo, gpt_neox, opt, llama, mistral, qwen2, qwen2_moe, qwen3, "
               "qwen3_moe, gemma, gemma2, gemma3_text, mixtral, phi3, deepseek_v2, deepseek_v3, gpt_oss, "
               "nemotron, smollm3, glm4, glm4_moe, switch_transformers, olmo2, olmo3, granite, exaone4, "
               "llama4_text, llama4, gemma3, mistral3, seed_oss, ernie4_5");
  EXPECT_EQ(model_type_family(ModelType::GptNeoX), Family::Llama);
  EXPECT_EQ(model_type_family(ModelType::SwitchTransformers), Family::Switch);
  EXPECT_EQ(kFamilyCount, 9);
  EXPECT_STREQ(to_string(Family::Switch), "switch_transformers");
  try {
    parse_model_type("resnet", "x.model_type");
    FAIL() << "resnet parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.model_type=\"resnet\" is not supported (one of bert, gpt2,", 0),
              0u)
        << e.what();
  }
}

TEST(ModelType, EachConfigIsReadIntoTheFamilyOfItsRow) {
  const std::pair<const char*, Family> cases[] = {
      {"bert-base", Family::Bert},         {"gpt2", Family::Gpt2},         {"t5-small", Family::T5},
      {"vit-base", Family::ViT},           {"deit-tiny", Family::DeiT},    {"gpt-neo-125m", Family::GptNeo},
      {"opt-125m", Family::Opt},           {"pythia-160m", Family::Llama}, {"mistral-7b", Family::Llama},
      {"deepseek-v2-lite", Family::Llama}, {"gpt-oss-20b", Family::Llama}, {"switch-base-8", Family::Switch},
      {"minitron-4b", Family::Llama},      {"smollm3-3b", Family::Llama},  {"glm4-9b", Family::Llama},
      {"glm4.5-air", Family::Llama}};
  for (const auto& [name, fam] : cases) EXPECT_EQ(load_model_config(model_path(name)).family, fam) << name;
}

TEST(ModelSpec, NemotronSquaredReluLayerNorm1PAndPartialRotary) {
  ModelSpec m = load_model_config(model_path("minitron-4b"));
  EXPECT_EQ(m.family, Family::Llama);
  EXPECT_EQ(m.arch, Arch::DecoderOnly);
  EXPECT_EQ(m.activation, Activation::ReLU2);
  EXPECT_STREQ(to_string(m.activation), "relu2");
  EXPECT_EQ(m.norm, NormKind::LayerNorm);  // LayerNorm1P: weight and bias, weight stored less 1
  EXPECT_FALSE(m.gated_ffn || m.fused_gate_up || m.fused_qkv || m.qk_norm || m.sandwich_norm);
  EXPECT_FALSE(m.qkv_bias || m.out_bias || m.linear_bias || m.tie_word_embeddings);
  EXPECT_EQ(m.hidden, 3072);
  EXPECT_EQ(m.num_heads, 24);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);  // hidden_size / num_attention_heads (kv_channels is not NemotronConfig's)
  EXPECT_EQ(m.ffn_dim, 9216);
  EXPECT_EQ(m.context_len, 4096);
  EXPECT_EQ(m.max_positions, 0);
  EXPECT_EQ(model_spec_from_json(m.to_json()).to_json(), m.to_json());
  EXPECT_EQ(m.to_json().at("activation"), "relu2");
  // A head_dim of its own (Minitron-8B: 48 heads of 128 on a hidden size of 4096) and the biases.
  json j = load("minitron-4b");
  j["hidden_size"] = 4096;
  j["num_attention_heads"] = 48;
  j["head_dim"] = 128;
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  ModelSpec b = parse_model_config(j);
  EXPECT_EQ(b.head_dim, 128);
  EXPECT_TRUE(b.qkv_bias && b.out_bias && b.linear_bias);
  const int64_t h = 4096, q = 48 * 128, kv = 8 * 128, f = 9216, V = 256000;
  const int64_t layer = (h * q + q) + 2 * (h * kv + kv) + (q * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h;
  EXPECT_EQ(parameter_count(b), 2 * V * h + 32 * layer + 2 * h);
  // NemotronConfig's defaults: relu2, no biases, an untied head, kv heads = heads.
  json d = {{"model_type", "nemotron"}, {"hidden_size", 256},       {"num_hidden_layers", 2},
            {"num_attention_heads", 4}, {"intermediate_size", 512}, {"vocab_size", 1000}};
  ModelSpec md = parse_model_config(d);
  EXPECT_EQ(md.activation, Activation::ReLU2);
  EXPECT_EQ(md.num_kv_heads, 4);
  EXPECT_EQ(md.head_dim, 64);
  EXPECT_FALSE(md.tie_word_embeddings || md.qkv_bias || md.linear_bias);
  d["hidden_act"] = "relu";
  EXPECT_EQ(parse_model_config(d).activation, Activation::ReLU);
  // Bad input: one error naming the key and the value.
  const std::pair<const char*, json> bad[] = {
      {"config.hidden_act=\"relu3\" is not a supported activation (gelu, gelu_new, gelu_pytorch_tanh, relu, "
       "relu2, silu)",
       json{{"hidden_act", "relu3"}}},
      {"config.partial_rotary_factor=0 must be in (0, 1]", json{{"partial_rotary_factor", 0}}},
      {"config.partial_rotary_factor=1.5 is out of range", json{{"partial_rotary_factor", 1.5}}},
      {"config.num_key_value_heads=5 does not divide config.num_attention_heads=24",
       json{{"num_key_value_heads", 5}}},
      {"config.num_attention_heads=7 does not divide config.hidden_size=3072",
       json{{"num_attention_heads", 7}, {"num_key_value_heads", 7}}},
      {"config.intermediate_size is missing", json{{"intermediate_size", nullptr}}},
  };
  for (const auto& [msg, patch] : bad) {
    json c = load("minitron-4b");
    c.merge_patch(patch);
    EXPECT_NE(parse_error(c).find(msg), std::string::npos) << parse_error(c);
  }
  // The rotary share: int(0.5 x 128) = 64 of each head turn (stored); the whole head is 0 (not stored).
  EXPECT_EQ(m.rotary_dim, 64);
  EXPECT_EQ(m.rotary_dims(), 64);
  json r = load("minitron-4b");
  r["partial_rotary_factor"] = 1.0;
  const ModelSpec whole = parse_model_config(r);
  EXPECT_EQ(whole.rotary_dim, 0);
  EXPECT_EQ(whole.rotary_dims(), 128);
  EXPECT_FALSE(whole.to_json().contains("rotary_dim"));
  EXPECT_EQ(m.to_json()["rotary_dim"], 64);
  // A stored spec with an activation id beyond the known ones is refused by name.
  json st = m.to_json();
  st["activation"] = "relu3";
  try {
    model_spec_from_json(st, "run[1].model");
    ADD_FAILURE() << "relu3 read back";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run[1].model.activation=relu3 is not a known value"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelSpec, SmolLM3Glm4AndGlm4MoeReadAsLlamas) {
  // SmolLM3: Llama's blocks, a tied head by default (SmolLM3Config), NoPE layers change no shape.
  ModelSpec s = load_model_config(model_path("smollm3-3b"));
  EXPECT_EQ(s.activation, Activation::SiLU);
  EXPECT_EQ(s.norm, NormKind::RMSNorm);
  EXPECT_TRUE(s.gated_ffn && s.tie_word_embeddings);
  EXPECT_FALSE(s.qkv_bias || s.out_bias || s.linear_bias || s.qk_norm || s.sandwich_norm);
  EXPECT_EQ(s.num_kv_heads, 4);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.context_len, 65536);
  json sj = load("smollm3-3b");
  sj["tie_word_embeddings"] = false;
  EXPECT_EQ(parameter_count(parse_model_config(sj)), 3075098624 + 128256 * 2048);
  sj = load("smollm3-3b");
  sj["no_rope_layers"] = json::array();
  EXPECT_EQ(parse_model_config(sj).to_json(), parse_model_config(load("smollm3-3b")).to_json());

  // GLM-4-0414: four norms per layer, fused gate_up, q/k/v biased (o not), head_dim 128.
  ModelSpec g = load_model_config(model_path("glm4-9b"));
  EXPECT_TRUE(g.sandwich_norm && g.fused_gate_up && g.gated_ffn && g.qkv_bias);
  EXPECT_FALSE(g.out_bias || g.linear_bias || g.fused_qkv || g.tie_word_embeddings || g.qk_norm);
  EXPECT_EQ(g.attn_softcap, 0);
  EXPECT_EQ(g.num_kv_heads, 2);
  EXPECT_EQ(g.head_dim, 128);
  EXPECT_EQ(model_spec_from_json(g.to_json()).to_json(), g.to_json());
  json gj = load("glm4-9b");  // Glm4Config's defaults: head_dim 128, attention_bias true
  gj.erase("head_dim");
  gj.erase("attention_bias");
  EXPECT_EQ(parse_model_config(gj).to_json(), parse_model_config(load("glm4-9b")).to_json());
  gj["partial_rotary_factor"] = -1;
  EXPECT_NE(parse_error(gj).find("config.partial_rotary_factor=-1 is out of range"), std::string::npos)
      << parse_error(gj);

  // GLM-4.5-Air: DeepSeek-V3's FFNs (one dense first layer, 128 experts of 1408, top 8, one plain shared
  // expert) behind grouped-query attention with q/k/v biases.
  ModelSpec a = load_model_config(model_path("glm4.5-air"));
  EXPECT_EQ(a.family, Family::Llama);
  EXPECT_FALSE(a.mla());
  EXPECT_TRUE(a.qkv_bias && a.gated_ffn && a.plain_shared_expert);
  EXPECT_FALSE(a.out_bias || a.linear_bias || a.qk_norm || a.router_bias || a.fused_gate_up);
  EXPECT_EQ(a.num_heads, 96);
  EXPECT_EQ(a.num_kv_heads, 8);
  EXPECT_EQ(a.head_dim, 128);
  EXPECT_EQ(a.num_experts, 128);
  EXPECT_EQ(a.moe_top_k, 8);
  EXPECT_EQ(a.ffn_dim, 1408);
  EXPECT_EQ(a.dense_ffn(), 10944);
  EXPECT_EQ(a.shared_expert_ffn, 1408);
  EXPECT_EQ(a.first_dense_layers, 1);
  EXPECT_EQ(sparse_layer_count(a, false), 45);
  EXPECT_EQ(model_spec_from_json(a.to_json()).to_json(), a.to_json());
  // "12B active": the active parameters less the input embedding and the LM head (151,552 x 4,096 each).
  EXPECT_EQ(active_parameter_count(a) - 2 * int64_t(151552) * 4096, 12182609920);
  // GLM-4.5 sets use_qk_norm: an RMSNorm over each head of q and k (2 x 128 parameters a layer).
  json qn = load("glm4.5-air");
  qn["use_qk_norm"] = true;
  EXPECT_EQ(parameter_count(parse_model_config(qn)), parameter_count(a) + 46 * 2 * 128);
  const std::pair<const char*, json> bad[] = {
      {"config.n_routed_experts=0 must be >= 1 (a dense GLM-4 is model_type \"glm4\")",
       json{{"n_routed_experts", 0}}},
      {"config.num_experts_per_tok=129 must be in [1, n_routed_experts=128]",
       json{{"num_experts_per_tok", 129}}},
      {"config.first_k_dense_replace=47 is out of range [0, 46]", json{{"first_k_dense_replace", 47}}},
      // Without head_dim the head size is hidden_size / heads, which 96 heads do not give.
      {"config.num_attention_heads=96 does not divide config.hidden_size=4096", json{{"head_dim", nullptr}}},
      {"config.hidden_act=\"gelu_quick\" is not a supported activation", json{{"hidden_act", "gelu_quick"}}},
  };
  for (const auto& [msg, patch] : bad) {
    json c = load("glm4.5-air");
    c.merge_patch(patch);
    EXPECT_NE(parse_error(c).find(msg), std::string::npos) << parse_error(c);
  }
  json ns = load("glm4.5-air");
  ns["n_shared_experts"] = 0;  // no shared expert
  EXPECT_EQ(parse_model_config(ns).shared_expert_ffn, 0);
  EXPECT_EQ(parameter_count(parse_model_config(ns)), parameter_count(a) - 45 * 3 * 4096 * 1408);
}
