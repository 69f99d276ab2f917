// Hugging Face config.json -> ModelSpec, training settings, and the parameter
// count of the model as transformers builds it.
//
// Every rejected input produces one line "<ctx>.<key>=<value> <reason>", e.g.
//   config.num_attention_heads=12 does not divide config.hidden_size=1000
// Per family the keys read are those of the transformers config classes
// (BertConfig, GPT2Config, T5Config, ViTConfig, DeiTConfig, GPTNeoConfig,
// OPTConfig, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, GemmaConfig, MixtralConfig,
// Phi3Config, Qwen2MoeConfig, Qwen3MoeConfig, Gemma2Config, Gemma3TextConfig, GPTNeoXConfig,
// DeepseekV2Config, DeepseekV3Config, GptOssConfig, NemotronConfig, SmolLM3Config, Glm4Config,
// Glm4MoeConfig, Olmo2Config, Olmo3Config, GraniteConfig, Exaone4Config, Llama4TextConfig, SeedOssConfig,
// Ernie4_5Config; the text_config
// of Gemma3Config, Llama4Config and Mistral3Config)
// with their defaults; docs/ir.md lists them.
#include "scaledl/ir/model_spec.hpp"
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

namespace {

// Upper bounds that no real model reaches; they keep every product of sizes in
// int64 and catch typos such as vocab_size = 10^12.
constexpr int64_t kMaxHidden = int64_t(1) << 20;  // d_model
constexpr int64_t kMaxFfn = int64_t(1) << 22;     // FFN inner size
constexpr int64_t kMaxVocab = int64_t(1) << 24;   // 16.7M tokens (largest real ~256k)
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxPositions = int64_t(1) << 24;
constexpr int64_t kMaxImage = int64_t(1) << 16;  // pixels per side
constexpr int64_t kMaxLabels = int64_t(1) << 24;
constexpr int64_t kMaxBatch = int64_t(1) << 24;
constexpr int64_t kMaxTokens = int64_t(1) << 32;  // batch * tokens per iteration
constexpr int64_t kMaxLoraRank = 65536;           // adapters far above any published rank (8-256)
constexpr int64_t kMaxScores = int64_t(1) << 40;  // batch * heads * seq_q * seq_k

constexpr int64_t kMaxExperts = int64_t(1) << 16;

/// First of `keys` present (non-null) in `j`, or "" when none is.
std::string first_key(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (j.contains(k) && !j.at(k).is_null()) return k;
  return "";
}

/// Required integer under any of `keys` (aliases, first wins).
int64_t req(const json& j, std::initializer_list<const char*> keys, const std::string& ctx, int64_t lo,
            int64_t hi) {
  std::string k = first_key(j, keys);
  if (k.empty()) fail("{}.{} is missing", ctx, *keys.begin());
  return get_int(j, k, ctx, lo, hi);
}

int64_t opt(const json& j, std::initializer_list<const char*> keys, const std::string& ctx, int64_t lo,
            int64_t hi, int64_t def) {
  std::string k = first_key(j, keys);
  return k.empty() ? def : get_int(j, k, ctx, lo, hi);
}

double prob(const json& j, const char* key, const std::string& ctx, double def) {
  double p = get_num_or(j, key, ctx, 0.0, 1.0, def);
  SCALEDL_CHECK(p < 1.0, "{}.{}={} must be a probability in [0, 1)", ctx, key, p);
  return p;
}

Activation parse_act(const json& j, const char* key, const std::string& ctx, const char* def) {
  std::string a = get_str_or(j, key, ctx, def);
  if (a == "gelu" || a == "gelu_python") return Activation::GELU;
  if (a == "gelu_new") return Activation::GELUNew;  // eager: eight kernels (layer_graph.cpp)
  if (a == "gelu_fast" || a == "gelu_pytorch_tanh" || a == "gelu_accurate") return Activation::GELUTanh;
  if (a == "relu") return Activation::ReLU;
  if (a == "relu2") return Activation::ReLU2;  // squared ReLU (Nemotron): eager, relu then square
  if (a == "silu" || a == "swish") return Activation::SiLU;
  fail("{}.{}=\"{}\" is not a supported activation (gelu, gelu_new, gelu_pytorch_tanh, relu, relu2, silu)",
       ctx, key, a);
}

/// Classifier outputs: num_labels, else the size of id2label, else `def`.
int64_t labels(const json& j, const std::string& ctx, int64_t def) {
  if (j.contains("num_labels") && !j.at("num_labels").is_null())
    return get_int(j, "num_labels", ctx, 1, kMaxLabels);
  if (j.contains("id2label") && j.at("id2label").is_object() && !j.at("id2label").empty())
    return static_cast<int64_t>(j.at("id2label").size());
  return def;
}

void check_divides(int64_t heads, const char* heads_key, int64_t hidden, const char* hidden_key,
                   const std::string& ctx) {
  SCALEDL_CHECK(hidden % heads == 0, "{}.{}={} does not divide {}.{}={}", ctx, heads_key, heads, ctx,
                hidden_key, hidden);
}

/// hidden_size, the layer count under `layers_key` and the head count under `heads_key`,
/// the heads dividing hidden_size (every family whose head size is hidden / heads).
void read_sizes(const json& j, const std::string& ctx, ModelSpec& m, const char* layers_key,
                const char* heads_key) {
  m.hidden = req(j, {"hidden_size"}, ctx, 1, kMaxHidden);
  m.num_layers = req(j, {layers_key}, ctx, 1, kMaxLayers);
  m.num_heads = req(j, {heads_key}, ctx, 1, kMaxHeads);
  check_divides(m.num_heads, heads_key, m.hidden, "hidden_size", ctx);
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

/// head_dim when the config gives it; otherwise `def` when > 0 (the config class's default), else
/// hidden_size / num_attention_heads, which must then divide.
void read_head_dim(const json& j, const std::string& ctx, ModelSpec& m, int64_t def) {
  if (first_key(j, {"head_dim"}).empty() && def <= 0) {
    check_divides(m.num_heads, "num_attention_heads", m.hidden, "hidden_size", ctx);
    m.head_dim = m.hidden / m.num_heads;
  } else {
    m.head_dim = opt(j, {"head_dim"}, ctx, 1, 1 << 16, def);
  }
}

/// Reads partial_rotary_factor (or `key`; default `def`): the share of each head the rotary
/// embedding turns, in (0, 1], into m.rotary_dim = int(factor x head_dim) as transformers computes
/// it (0 = the whole head). Needs m.head_dim.
void read_rotary_factor(const json& j, const std::string& ctx, double def, ModelSpec& m,
                        const char* key = "partial_rotary_factor") {
  const double f = get_num_or(j, key, ctx, 0.0, 1.0, def);
  SCALEDL_CHECK(f > 0, "{}.{}={} must be in (0, 1]", ctx, key, f);
  const auto rd = static_cast<int64_t>(f * static_cast<double>(m.head_dim));
  SCALEDL_CHECK(rd >= 2, "{}.{}={} turns {} of head_dim={}: fewer than one pair", ctx, key, f, rd,
                m.head_dim);
  m.rotary_dim = rd < m.head_dim ? rd : 0;
}

/// Reads no_rope_layers / no_rope_layer_interval (SmolLM3, Llama 4: layer i keeps no rotation when
/// no_rope_layers[i] = 0, by default every no_rope_layer_interval-th) into m.nope_interval. A list
/// that is not every k-th layer is read as the interval of as many NoPE layers (their count is what
/// the time sees; which layers, only a pipeline stage's split).
void read_nope_layers(const json& j, const std::string& ctx, ModelSpec& m) {
  m.nope_interval = opt(j, {"no_rope_layer_interval"}, ctx, 1, kMaxLayers, 4);
  if (first_key(j, {"no_rope_layers"}).empty() || j.at("no_rope_layers").is_null()) return;
  const json& l = j.at("no_rope_layers");
  bool ok = l.is_array() && (l.empty() || static_cast<int64_t>(l.size()) == m.num_layers);
  for (const json& v : ok ? l : json::array()) ok = ok && v.is_number_integer() && (v == 0 || v == 1);
  SCALEDL_CHECK(ok, "{}.no_rope_layers={} must be empty or num_hidden_layers={} flags 0 / 1", ctx, show(l),
                m.num_layers);
  if (l.empty()) return;
  int64_t nope = 0;
  for (const json& v : l) nope += v == 0 ? 1 : 0;
  m.nope_interval = nope == 0 ? 0 : std::max<int64_t>(1, (m.num_layers + nope / 2) / nope);
}

/// A decoder of the Llama family: hidden_size, num_hidden_layers and num_attention_heads (the
/// head size need not divide hidden_size), and num_key_value_heads (default `kv`, 0 = the heads;
/// -1: not read, one k/v head per head, as DeepSeek's latent attention) dividing the heads.
void read_decoder(const json& j, const std::string& ctx, ModelSpec& m, int64_t kv) {
  m.arch = Arch::DecoderOnly;
  m.hidden = req(j, {"hidden_size"}, ctx, 1, kMaxHidden);
  m.num_layers = req(j, {"num_hidden_layers"}, ctx, 1, kMaxLayers);
  m.num_heads = req(j, {"num_attention_heads"}, ctx, 1, kMaxHeads);
  m.num_kv_heads = m.num_heads;
  if (kv < 0) return;
  m.num_kv_heads = opt(j, {"num_key_value_heads"}, ctx, 1, kMaxHeads, kv > 0 ? kv : m.num_heads);
  SCALEDL_CHECK(m.num_heads % m.num_kv_heads == 0,
                "{}.num_key_value_heads={} does not divide {}.num_attention_heads={}", ctx, m.num_kv_heads,
                ctx, m.num_heads);
}

/// Every FFN of the num_layers stack a dropless mixture, costed at the experts' mean load
/// (k x tokens / experts per expert).
void dropless_experts(ModelSpec& m, bool router_bias) {
  m.encoder_sparse_step = 1;
  m.expert_capacity = 0;
  m.capacity_factor = 1.0;
  m.router_bias = router_bias;
}

void parse_bert(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::EncoderOnly;
  read_sizes(j, ctx, m, "num_hidden_layers", "num_attention_heads");
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 512);
  m.context_len = m.max_positions;
  m.type_vocab_size = opt(j, {"type_vocab_size"}, ctx, 0, 1 << 16, 2);
  m.activation = parse_act(j, "hidden_act", ctx, "gelu");
  m.dropout = prob(j, "hidden_dropout_prob", ctx, 0.1);
  m.embed_dropout = m.dropout;
  m.attn_dropout = prob(j, "attention_probs_dropout_prob", ctx, 0.1);
  m.pre_norm = false;  // post-norm: LayerNorm after each residual add
  m.final_norm = false;
  // Head: BertModel / BertForSequenceClassification keep the pooler and train a
  // classifier on [CLS]; every other class (BertForMaskedLM, BertLMHeadModel,
  // none given) is the MLM head (dense + GELU + LayerNorm + tied decoder with a
  // vocab bias) over all tokens, without the pooler (add_pooling_layer=False).
  if (m.hf_class == "BertModel" || contains(m.hf_class, "SequenceClassification")) {
    m.pooler = true;
    m.lm_head = false;
    m.num_labels = labels(j, ctx, 2);
  } else {
    m.pooler = false;
    m.lm_head = true;
  }
}

void parse_gpt2(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::DecoderOnly;
  m.hidden = req(j, {"n_embd", "hidden_size"}, ctx, 1, kMaxHidden);
  m.num_layers = req(j, {"n_layer", "num_hidden_layers"}, ctx, 1, kMaxLayers);
  m.num_heads = req(j, {"n_head", "num_attention_heads"}, ctx, 1, kMaxHeads);
  check_divides(m.num_heads, "n_head", m.hidden, "n_embd", ctx);
  m.ffn_dim = opt(j, {"n_inner"}, ctx, 1, kMaxFfn, 4 * m.hidden);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = opt(j, {"n_positions", "n_ctx"}, ctx, 1, kMaxPositions, 1024);
  m.context_len = m.max_positions;
  m.activation = parse_act(j, "activation_function", ctx, "gelu_new");
  m.dropout = prob(j, "resid_pdrop", ctx, 0.1);
  m.embed_dropout = prob(j, "embd_pdrop", ctx, 0.1);
  m.attn_dropout = prob(j, "attn_pdrop", ctx, 0.1);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, true);
}

void parse_gpt_neo(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::DecoderOnly;
  read_sizes(j, ctx, m, "num_layers", "num_heads");
  m.ffn_dim = opt(j, {"intermediate_size"}, ctx, 1, kMaxFfn, 4 * m.hidden);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 2048);
  m.context_len = m.max_positions;
  m.activation = parse_act(j, "activation_function", ctx, "gelu_new");
  m.dropout = prob(j, "resid_dropout", ctx, 0.0);
  m.embed_dropout = prob(j, "embed_dropout", ctx, 0.0);
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.qkv_bias = false;  // GPTNeoSelfAttention: q/k/v without bias, out_proj with bias
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, true);
}

void parse_opt(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::DecoderOnly;
  read_sizes(j, ctx, m, "num_hidden_layers", "num_attention_heads");
  m.ffn_dim = req(j, {"ffn_dim"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 2048);
  m.position_offset = 2;  // OPTLearnedPositionalEmbedding has max_positions + 2 rows
  m.context_len = m.max_positions;
  m.embed_dim = opt(j, {"word_embed_proj_dim"}, ctx, 1, kMaxHidden, m.hidden);
  m.activation = parse_act(j, "activation_function", ctx, "relu");
  m.dropout = prob(j, "dropout", ctx, 0.1);
  m.embed_dropout = m.dropout;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.act_dropout = prob(j, "activation_dropout", ctx, 0.0);
  m.linear_bias = get_bool_or(j, "enable_bias", ctx, true);
  m.qkv_bias = m.out_bias = m.linear_bias;
  m.pre_norm = get_bool_or(j, "do_layer_norm_before", ctx, true);
  m.final_norm = m.pre_norm && !get_bool_or(j, "_remove_final_layer_norm", ctx, false);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, true);
}

/// The Llama family of decoders (RMSNorm, rotary positions, gated FFN, grouped-query
/// attention) as transformers' modeling files build each model_type:
/// - llama: biases where attention_bias / mlp_bias say (default none), untied LM head.
/// - mistral: Llama's blocks; the sliding window is a mask on the same scores in eager
///   attention, so it changes no FLOPs.
/// - qwen2: biases on q, k and v (always), none on o or the FFN.
/// - qwen3: no biases unless attention_bias; an RMSNorm over each head of q and of k
///   (q_norm, k_norm) before the rotary embedding.
/// - gemma: the embeddings multiplied by sqrt(hidden_size) (a node of its own), head_dim
///   256 by default, GeGLU (hidden_activation, default gelu_pytorch_tanh), tied LM head.
/// - gemma2: Gemma's embedding and MLP, a norm after attention and after the FFN as well as
///   before (post_attention_layernorm, post_feedforward_layernorm), tanh soft-capping of the
///   attention scores (attn_logit_softcapping, 50) and of the LM head's logits
///   (final_logit_softcapping, 30); the alternating sliding window is a mask.
/// - gemma3_text: Gemma 2's four norms, Qwen3's per-head q/k norms, no soft-capping unless set.
/// - phi3: q, k and v as one projection (qkv_proj) and gate and up as one (gate_up_proj).
/// - qwen3_moe: Qwen3's attention; every FFN a mixture of num_experts SwiGLU experts of
///   moe_intermediate_size, top num_experts_per_tok (Qwen3-30B-A3B: 8 of 128). Dense layers
///   (mlp_only_layers, decoder_sparse_step > 1) are refused: no released model has them.
/// - qwen2_moe: Qwen2's attention, every FFN a top-k mixture of moe_intermediate_size experts
///   plus a shared expert (a SwiGLU FFN of shared_expert_intermediate_size that every token
///   takes, scaled by sigmoid(shared_expert_gate(x))). Dense layers are refused as in qwen3_moe.
/// - mixtral: every FFN a dropless mixture of num_local_experts SwiGLU experts, each token
///   routed to its num_experts_per_tok best (top-k, weights renormalised).
/// - smollm3: Llama's blocks and a tied LM head by default; its NoPE layers (no_rope_layers, by
///   default every no_rope_layer_interval-th = 4th) only skip the rotation (nope_interval).
/// - glm4 (GLM-4-0414): Gemma 2's four norms per layer (post_self_attn_layernorm, post_mlp_layernorm),
///   Phi-3's fused gate_up_proj, biases on q, k and v (attention_bias, default true) but not on o,
///   head_dim 128 by default, rotary on partial_rotary_factor (0.5) of each head.
/// - granite (IBM Granite 3.x, GraniteConfig): Llama's blocks with four scalar multipliers, each an
///   elementwise op of its own in eager transformers: the embeddings x embedding_multiplier (a node, as
///   Gemma's sqrt(hidden) scale: embed_scale), the attention and the MLP output x residual_multiplier
///   before each residual add (residual_scale: "attn.residual_scale", "ffn.residual_scale"), the logits /
///   logits_scaling (logits_scale: "head.logits_scale"). attention_multiplier replaces 1 / sqrt(head_dim)
///   as the scale of the scores: the same scale kernel. The values change no shape: checked (> 0), not
///   stored. An untied LM head by default.
/// - seed_oss (ByteDance Seed-OSS, SeedOssConfig): biases on q, k and v (attention_bias, default true), o
///   biased where attention_out_bias says (default false), head_dim 128 by default, residual_dropout (0.1)
///   after the attention's o and the MLP's down projection (the graph's out_dropout and ffn dropout),
///   attention_dropout 0.1 by default.
/// - ernie4_5 (Baidu ERNIE 4.5 dense, Ernie4_5Config): use_bias on every linear of the blocks (default
///   false), head_dim 128, a tied LM head by default, no attention dropout (the class fixes it at 0); its
///   interleaved rotary embedding is costed as the halves' rotation of the others (the same kernels).
void parse_llama(const json& j, const std::string& ctx, ModelSpec& m, ModelType type) {
  const bool gemma2 = type == ModelType::Gemma2, gemma3 = type == ModelType::Gemma3Text;
  const bool gemma = type == ModelType::Gemma || gemma2 || gemma3, mixtral = type == ModelType::Mixtral;
  const bool qwen2_moe = type == ModelType::Qwen2Moe, qwen_moe = type == ModelType::Qwen3Moe || qwen2_moe;
  const bool glm4 = type == ModelType::Glm4, smollm3 = type == ModelType::SmolLM3;
  const bool granite = type == ModelType::Granite, seed = type == ModelType::SeedOss;
  const bool ernie = type == ModelType::Ernie45;
  read_decoder(j, ctx, m, 0);
  // head_dim: the defaults of GemmaConfig (256), Glm4Config, SeedOssConfig and Ernie4_5Config (128).
  read_head_dim(j, ctx, m, gemma ? 256 : glm4 || seed || ernie ? 128 : 0);
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;  // rotary embeddings: no position table
  // max_position_embeddings: the config classes' defaults.
  const int64_t context = glm4 || ernie ? 131072 : smollm3 ? 32768 : seed ? 524288 : 2048;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, context);
  if (gemma && first_key(j, {"hidden_activation"}).empty())
    m.activation = Activation::GELUTanh;  // GemmaMLP: gelu_pytorch_tanh when hidden_activation is unset
  else
    m.activation = parse_act(j, gemma ? "hidden_activation" : "hidden_act", ctx, "silu");
  m.norm = NormKind::RMSNorm;
  m.gated_ffn = true;  // SwiGLU: down(act(gate(x)) * up(x))
  if (ernie)           // Ernie4_5Attention / Ernie4_5MLP: use_bias on every linear of the blocks
    m.qkv_bias = m.out_bias = get_bool_or(j, "use_bias", ctx, false);
  else
    m.qkv_bias = m.out_bias = get_bool_or(j, "attention_bias", ctx, glm4 || seed);
  if (seed) m.out_bias = get_bool_or(j, "attention_out_bias", ctx, false);  // SeedOssAttention's o_proj
  if (type == ModelType::Qwen2 || qwen2_moe)
    m.qkv_bias = true, m.out_bias = false;  // Qwen2Attention: q/k/v biased
  if (glm4) m.out_bias = false;             // GlmAttention: o_proj without bias
  m.qk_norm = type == ModelType::Qwen3 || type == ModelType::Qwen3Moe || gemma3;
  if (gemma2 || gemma3) {
    m.sandwich_norm = true;
    auto cap = [&](const char* key, double def) {
      if (j.contains(key) && j.at(key).is_null()) return 0.0;  // null: no soft-capping
      return get_num_or(j, key, ctx, 0.0, 1e6, def);
    };
    m.attn_softcap = cap("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
    m.final_softcap = cap("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  }
  m.linear_bias = ernie ? m.qkv_bias : get_bool_or(j, "mlp_bias", ctx, false);
  m.dropout = seed ? prob(j, "residual_dropout", ctx, 0.1) : 0;  // Seed-OSS: after o_proj and down_proj
  m.embed_dropout = 0;
  if (type == ModelType::Phi3) {  // after the Llama defaults above, which would undo it
    m.fused_qkv = m.fused_gate_up = true;
    m.dropout = prob(j, "resid_pdrop", ctx, 0.0);  // Phi3DecoderLayer's resid_attn/mlp_dropout
    m.embed_dropout = prob(j, "embd_pdrop", ctx, 0.0);
  }
  if (smollm3) read_nope_layers(j, ctx, m);
  if (glm4) {  // Glm4MLP is Phi-3's; Glm4DecoderLayer has Gemma 2's four norms
    m.fused_gate_up = true;
    m.sandwich_norm = true;
    read_rotary_factor(j, ctx, 0.5, m);
  }
  // Ernie4_5Attention sets its attention dropout to 0 whatever the config says.
  m.attn_dropout = ernie ? 0.0 : prob(j, "attention_dropout", ctx, seed ? 0.1 : 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, gemma || smollm3 || ernie);
  m.embed_scale = gemma;
  if (granite) {  // GraniteModel / GraniteDecoderLayer / GraniteForCausalLM: four scalar multipliers
    for (const char* key :
         {"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"}) {
      const double v = get_num_or(j, key, ctx, 0.0, 1e6, 1.0);
      SCALEDL_CHECK(v > 0, "{}.{}={} must be > 0", ctx, key, v);
    }
    m.embed_scale = m.residual_scale = m.logits_scale = true;
  }
  if (mixtral || qwen_moe) {
    const char* ek = mixtral ? "num_local_experts" : "num_experts";
    m.num_experts = opt(j, {ek}, ctx, 0, kMaxExperts, mixtral ? 8 : qwen2_moe ? 60 : 128);
    SCALEDL_CHECK(m.num_experts >= 1, "{}.{}={} must be >= 1 (a dense model is model_type \"{}\")", ctx, ek,
                  m.num_experts, mixtral ? "mistral" : "qwen3");
    m.moe_top_k = opt(j, {"num_experts_per_tok"}, ctx, 0, kMaxExperts, mixtral ? 2 : qwen2_moe ? 4 : 8);
    SCALEDL_CHECK(m.moe_top_k >= 1 && m.moe_top_k <= m.num_experts,
                  "{}.num_experts_per_tok={} must be in [1, {}={}]", ctx, m.moe_top_k, ek, m.num_experts);
    if (qwen_moe) {
      m.ffn_dim =
          opt(j, {"moe_intermediate_size"}, ctx, 1, kMaxFfn, qwen2_moe ? 1408 : 768);  // experts' width
      if (qwen2_moe) m.shared_expert_ffn = opt(j, {"shared_expert_intermediate_size"}, ctx, 0, kMaxFfn, 5632);
      const int64_t step = opt(j, {"decoder_sparse_step"}, ctx, 1, kMaxLayers, 1);
      SCALEDL_CHECK(step == 1,
                    "{}.decoder_sparse_step={}: dense FFN layers in a {} model are not "
                    "supported (every FFN must be sparse)",
                    ctx, step, to_string(type));
      if (j.contains("mlp_only_layers") && !j.at("mlp_only_layers").is_null()) {
        const json& l = j.at("mlp_only_layers");
        SCALEDL_CHECK(l.is_array() && l.empty(),
                      "{}.mlp_only_layers={}: dense FFN layers in a {} model "
                      "are not supported (every FFN must be sparse)",
                      ctx, show(l), to_string(type));
      }
    }
    dropless_experts(m, false);
  }
}

/// GPT-NeoX (Pythia, GPT-NeoX-20B; HF GPTNeoXConfig): rotary positions (on rotary_pct of
/// each head, default 0.25: rotary_dim), LayerNorm, one biased query_key_value projection,
/// a plain GELU MLP with biases, an untied embed_out, and, with use_parallel_residual (the
/// default), attention and MLP both read the block's input: x + attn(ln1(x)) + mlp(ln2(x)).
/// Read into the Llama family (the zoo's decoder with rotary embeddings).
void parse_gpt_neox(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::DecoderOnly;
  read_sizes(j, ctx, m, "num_hidden_layers", "num_attention_heads");
  m.ffn_dim = opt(j, {"intermediate_size"}, ctx, 1, kMaxFfn, 4 * m.hidden);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 2048);
  m.activation = parse_act(j, "hidden_act", ctx, "gelu");
  m.norm = NormKind::LayerNorm;
  m.gated_ffn = false;
  m.linear_bias = true;
  m.qkv_bias = m.out_bias = get_bool_or(j, "attention_bias", ctx, true);
  m.fused_qkv = true;  // query_key_value
  m.parallel_residual = get_bool_or(j, "use_parallel_residual", ctx, true);
  // GPTNeoXConfig's rotary_pct (0.25), partial_rotary_factor in the newer configs.
  m.head_dim = m.hidden / m.num_heads;  // read_sizes checked that the heads divide hidden_size
  if (first_key(j, {"partial_rotary_factor"}).empty())
    read_rotary_factor(j, ctx, 0.25, m, "rotary_pct");
  else
    read_rotary_factor(j, ctx, 0.25, m);
  m.dropout = prob(j, "hidden_dropout", ctx, 0.0);
  m.embed_dropout = m.dropout;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
}

/// Nemotron (NVIDIA Nemotron-4 and its pruned Minitron / Nemotron-Mini models; transformers'
/// NemotronConfig): a decoder of Llama's shape with
/// - LayerNorm1P: a LayerNorm with weight and bias whose weight is stored less 1 (weight + 1 is
///   applied): the LayerNorm kernel and 2 x hidden_size parameters, read as a LayerNorm;
/// - a plain MLP down(act(up(x))), no gate, act = hidden_act (default "relu2", the squared ReLU:
///   relu then square, two kernels in eager PyTorch);
/// - rotary embeddings on partial_rotary_factor (default 0.5) of each head (rotary_dim);
/// - grouped-query attention (num_key_value_heads, default the heads), head_dim (default
///   hidden_size / num_attention_heads), biases where attention_bias (q, k, v, o) and mlp_bias
///   (up, down) say (default none), an untied LM head (tie_word_embeddings, default false).
void parse_nemotron(const json& j, const std::string& ctx, ModelSpec& m) {
  read_decoder(j, ctx, m, 0);
  read_head_dim(j, ctx, m, 0);
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 4096);
  m.activation = parse_act(j, "hidden_act", ctx, "relu2");
  m.norm = NormKind::LayerNorm;
  m.gated_ffn = false;
  m.qkv_bias = m.out_bias = get_bool_or(j, "attention_bias", ctx, false);
  m.linear_bias = get_bool_or(j, "mlp_bias", ctx, false);
  read_rotary_factor(j, ctx, 0.5, m);
  m.dropout = m.embed_dropout = 0;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
}

/// GLM-4.5 / 4.6 (transformers' Glm4MoeConfig, model_type glm4_moe; GLM-4.5-Air, GLM-4.5):
/// DeepSeek-V3's FFNs behind plain grouped-query attention. Attention: q, k, v biased where
/// attention_bias says (default false; the released models set it), o without bias, an RMSNorm
/// over each head of q and k when use_qk_norm (GLM-4.5: true, GLM-4.5-Air: false), head_dim,
/// rotary on partial_rotary_factor (0.5) of each head. FFNs: the first first_k_dense_replace (1)
/// dense SwiGLU of intermediate_size, the rest a top-num_experts_per_tok (8) mixture of
/// n_routed_experts (128) SwiGLU experts of moe_intermediate_size (1408) plus n_shared_experts (1)
/// shared ones (one SwiGLU FFN of n_shared x moe_intermediate_size every token takes, added as it
/// is). The router (Linear without bias, sigmoid scores; its e_score_correction_bias is a buffer,
/// not a parameter) and routed_scaling_factor change no shape. The multi-token-prediction layer
/// (num_nextn_predict_layers) is not built by transformers and not here.
void parse_glm4_moe(const json& j, const std::string& ctx, ModelSpec& m) {
  read_decoder(j, ctx, m, 8);
  read_head_dim(j, ctx, m, 0);
  read_rotary_factor(j, ctx, 0.5, m);
  const int64_t dense = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 131072);
  m.activation = parse_act(j, "hidden_act", ctx, "silu");
  m.norm = NormKind::RMSNorm;
  m.gated_ffn = true;
  m.qkv_bias = get_bool_or(j, "attention_bias", ctx, false);
  m.out_bias = false;  // Glm4MoeAttention: o_proj without bias
  m.qk_norm = get_bool_or(j, "use_qk_norm", ctx, false);
  m.linear_bias = false;
  m.dropout = m.embed_dropout = 0;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
  m.num_experts = opt(j, {"n_routed_experts"}, ctx, 0, kMaxExperts, 128);
  SCALEDL_CHECK(m.num_experts >= 1,
                "{}.n_routed_experts={} must be >= 1 (a dense GLM-4 is model_type \"glm4\")", ctx,
                m.num_experts);
  m.moe_top_k = opt(j, {"num_experts_per_tok"}, ctx, 0, kMaxExperts, 8);
  SCALEDL_CHECK(m.moe_top_k >= 1 && m.moe_top_k <= m.num_experts,
                "{}.num_experts_per_tok={} must be in [1, n_routed_experts={}]", ctx, m.moe_top_k,
                m.num_experts);
  m.ffn_dim = opt(j, {"moe_intermediate_size"}, ctx, 1, kMaxFfn, 1408);  // the experts' width
  m.dense_ffn_dim = dense;
  const int64_t shared = opt(j, {"n_shared_experts"}, ctx, 0, 1 << 10, 1);
  m.shared_expert_ffn = shared * m.ffn_dim;
  m.plain_shared_expert = shared > 0;
  m.first_dense_layers = opt(j, {"first_k_dense_replace"}, ctx, 0, m.num_layers, 1);
  dropless_experts(m, false);
}

/// DeepSeek-V2 and V3 (transformers' DeepseekV2Config / DeepseekV3Config, the native classes):
/// - multi-head latent attention: q = q_b(norm(q_a(x))) (or q_proj(x) when q_lora_rank is null),
///   [k_nope, v] = kv_b(norm(kv_a(x)[:kv_lora_rank])), the rotary part of k (qk_rope_head_dim)
///   from kv_a too, shared by every head; heads of qk_nope + qk_rope for the scores and of
///   v_head_dim for the values; no grouped k/v heads (num_key_value_heads is not read);
/// - FFNs: the first first_k_dense_replace dense (intermediate_size), the rest a top-k mixture of
///   n_routed_experts SwiGLU experts of moe_intermediate_size plus n_shared_experts shared ones
///   (one SwiGLU FFN of n_shared x moe_intermediate_size every token takes, added as it is);
///   n_routed_experts null = a dense model. moe_layer_freq != 1 is refused (no released model).
/// The router's scoring (softmax or sigmoid, group-limited top-k, V3's correction bias, a
/// buffer and not a parameter) and routed_scaling_factor change no shape. V3's multi-token
/// prediction layers (num_nextn_predict_layers) are not built by transformers and not here.
void parse_deepseek(const json& j, const std::string& ctx, ModelSpec& m, ModelType type) {
  const bool v3 = type == ModelType::DeepseekV3;
  read_decoder(j, ctx, m, -1);  // MLA: kv_b makes k and v for every head (num_key_value_heads is not read)
  const int64_t nope = opt(j, {"qk_nope_head_dim"}, ctx, 0, 1 << 15, 128);
  m.qk_rope_dim = opt(j, {"qk_rope_head_dim"}, ctx, 0, 1 << 15, 64);
  SCALEDL_CHECK(m.qk_rope_dim % 2 == 0, "{}.qk_rope_head_dim={} must be even (rotary pairs)", ctx,
                m.qk_rope_dim);
  m.head_dim = nope + m.qk_rope_dim;
  SCALEDL_CHECK(m.head_dim >= 1, "{}.qk_nope_head_dim={} + qk_rope_head_dim={} must be >= 1", ctx, nope,
                m.qk_rope_dim);
  m.v_head_dim = opt(j, {"v_head_dim"}, ctx, 1, 1 << 16, 128);
  m.kv_lora_rank = opt(j, {"kv_lora_rank"}, ctx, 1, kMaxHidden, 512);
  // q_lora_rank null: one q_proj (DeepSeek-V2-Lite); absent: the class default, 1536.
  m.q_lora_rank = j.contains("q_lora_rank") && j.at("q_lora_rank").is_null()
                      ? 0
                      : opt(j, {"q_lora_rank"}, ctx, 1, kMaxHidden, 1536);
  const int64_t dense = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, v3 ? 4096 : 2048);
  m.activation = parse_act(j, "hidden_act", ctx, "silu");
  m.norm = NormKind::RMSNorm;
  m.gated_ffn = true;
  m.qkv_bias = m.out_bias = get_bool_or(j, "attention_bias", ctx, false);  // q_a, kv_a and o (not q_b, kv_b)
  m.linear_bias = false;
  m.dropout = m.embed_dropout = 0;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
  m.ffn_dim = dense;
  if (j.contains("n_routed_experts") && j.at("n_routed_experts").is_null()) return;  // a dense model
  m.num_experts = opt(j, {"n_routed_experts"}, ctx, 0, kMaxExperts, v3 ? 256 : 64);
  SCALEDL_CHECK(m.num_experts >= 1, "{}.n_routed_experts={} must be >= 1 (null: a dense model)", ctx,
                m.num_experts);
  // DeepseekV2Config's default num_experts_per_tok is null, which no model runs with: required there.
  m.moe_top_k = v3 ? opt(j, {"num_experts_per_tok"}, ctx, 0, kMaxExperts, 8)
                   : req(j, {"num_experts_per_tok"}, ctx, 0, kMaxExperts);
  SCALEDL_CHECK(m.moe_top_k >= 1 && m.moe_top_k <= m.num_experts,
                "{}.num_experts_per_tok={} must be in [1, n_routed_experts={}]", ctx, m.moe_top_k,
                m.num_experts);
  m.ffn_dim = opt(j, {"moe_intermediate_size"}, ctx, 1, kMaxFfn, v3 ? 2048 : 1407);  // the experts' width
  m.dense_ffn_dim = dense;
  const int64_t shared = j.contains("n_shared_experts") && j.at("n_shared_experts").is_null()
                             ? 0
                             : opt(j, {"n_shared_experts"}, ctx, 0, 1 << 10, v3 ? 1 : 2);
  m.shared_expert_ffn = shared * m.ffn_dim;
  m.plain_shared_expert = shared > 0;
  m.first_dense_layers = opt(j, {"first_k_dense_replace"}, ctx, 0, m.num_layers, v3 ? 3 : 0);
  const int64_t freq = opt(j, {"moe_layer_freq"}, ctx, 1, kMaxLayers, 1);
  SCALEDL_CHECK(freq == 1,
                "{}.moe_layer_freq={}: dense FFNs between sparse ones are not supported (only the "
                "first first_k_dense_replace FFNs may be dense)",
                ctx, freq);
  dropless_experts(m, false);
}

/// gpt-oss (transformers' GptOssConfig; gpt-oss-20b, gpt-oss-120b): a Llama decoder with biased
/// q/k/v/o (attention_bias, default true), a learned sink logit per head in every softmax
/// (`sinks`: the scores gain one column, less their maximum, before the softmax), and every FFN
/// a top-k mixture of num_local_experts experts of intermediate_size: a router with a bias, one
/// fused biased gate_up projection per expert, the clamped GLU (up.clamp(-7, 7) + 1) x
/// g sigmoid(1.702 g) with g = gate.clamp(max 7), a biased down projection. In training Hugging
/// Face loops over the experts a token chose; in eval mode it runs every expert on every token
/// (GptOssExperts' batched path), which the graph follows (dense_expert_inference). The
/// alternating sliding window (layer_types, sliding_window) is a mask; swiglu_limit sets a value.
void parse_gpt_oss(const json& j, const std::string& ctx, ModelSpec& m) {
  read_decoder(j, ctx, m, 8);
  m.head_dim = opt(j, {"head_dim"}, ctx, 1, 1 << 16, 64);
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);  // each expert's width
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 131072);
  m.activation = parse_act(j, "hidden_act", ctx, "silu");
  m.norm = NormKind::RMSNorm;
  m.gated_ffn = true;
  m.fused_gate_up = true;
  m.clamped_glu = true;
  m.linear_bias = true;  // the experts' gate_up and down biases
  m.qkv_bias = m.out_bias = get_bool_or(j, "attention_bias", ctx, true);
  m.attn_sinks = true;
  m.dropout = m.embed_dropout = 0;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
  m.num_experts = opt(j, {"num_local_experts"}, ctx, 0, kMaxExperts, 128);
  SCALEDL_CHECK(m.num_experts >= 1, "{}.num_local_experts={} must be >= 1", ctx, m.num_experts);
  const char* kk =
      first_key(j, {"num_experts_per_tok"}).empty() && !first_key(j, {"experts_per_token"}).empty()
          ? "experts_per_token"
          : "num_experts_per_tok";
  m.moe_top_k = opt(j, {kk}, ctx, 0, kMaxExperts, 4);
  SCALEDL_CHECK(m.moe_top_k >= 1 && m.moe_top_k <= m.num_experts,
                "{}.{}={} must be in [1, num_local_experts={}]", ctx, kk, m.moe_top_k, m.num_experts);
  dropless_experts(m, true);
  m.dense_expert_inference = true;
}

/// Checks the per-layer attention kinds of a hybrid sliding-window model: layer_types (null, or a list of
/// num_hidden_layers names from `kinds`) and sliding_window (null or >= 1). A window (or Llama 4's chunk) is
/// a mask on the same scores in eager attention, as mistral's, so neither changes a node.
void check_layer_types(const json& j, const std::string& ctx, int64_t layers,
                       std::initializer_list<const char*> kinds) {
  if (!first_key(j, {"sliding_window"}).empty()) get_int(j, "sliding_window", ctx, 1, kMaxPositions);
  if (first_key(j, {"layer_types"}).empty()) return;
  const json& l = j.at("layer_types");
  SCALEDL_CHECK(l.is_array() && static_cast<int64_t>(l.size()) == layers,
                "{}.layer_types={} must be a list of num_hidden_layers={} attention kinds", ctx, show(l),
                layers);
  for (const json& k : l) {
    bool known = false;
    if (k.is_string())
      for (const char* name : kinds) known = known || k.get<std::string>() == name;
    SCALEDL_CHECK(known, "{}.layer_types: {} is not an attention kind of this model ({})", ctx, show(k),
                  fmt::join(kinds, ", "));
  }
}

/// OLMo 2 / OLMo 3 (Olmo2Config, Olmo3Config) and EXAONE 4.0 (Exaone4Config): a Llama decoder whose two
/// norms per block sit after attention and after the MLP, inside the residual: x + norm(attn(x)), then
/// x + norm(mlp(x)), no norm before either (post_norm_only), and an RMSNorm on q and on k before the
/// rotary embedding:
/// - olmo2 / olmo3: over the whole q projection (num_heads x head_dim) and the whole k projection
///   (num_key_value_heads x head_dim), before the heads are split (qk_norm_whole); the head size is
///   hidden_size / heads (head_dim is not a key of theirs); biases on q, k, v and o where attention_bias
///   says (default none), none on the MLP, an untied LM head by default. olmo3 adds sliding-window
///   attention on three of every four layers (layer_types, sliding_window): a mask (check_layer_types).
/// - exaone4: the RMSNorm over each head of q and k (Qwen3's), head_dim where the config gives it, no
///   biases, the hybrid attention (sliding_window on the local layers of sliding_window_pattern, an
///   interval or a string of L and G, or of layer_types; the global layers skip the rotation) a mask too.
void parse_post_norm(const json& j, const std::string& ctx, ModelSpec& m, ModelType type) {
  const bool exaone = type == ModelType::Exaone4;
  read_decoder(j, ctx, m, 0);
  if (exaone) {
    read_head_dim(j, ctx, m, 0);  // getattr(config, "head_dim", hidden_size // num_attention_heads)
  } else {
    check_divides(m.num_heads, "num_attention_heads", m.hidden, "hidden_size", ctx);
    m.head_dim = m.hidden / m.num_heads;  // OlmoAttention: hidden_size // num_heads
  }
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 2048);
  m.activation = parse_act(j, "hidden_act", ctx, "silu");
  m.norm = NormKind::RMSNorm;
  m.gated_ffn = true;
  m.qkv_bias = m.out_bias = exaone ? false : get_bool_or(j, "attention_bias", ctx, false);
  m.linear_bias = false;
  m.qk_norm = true;
  m.qk_norm_whole = !exaone;
  m.post_norm_only = true;
  m.dropout = m.embed_dropout = 0;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
  if (type == ModelType::Olmo3 || exaone)
    check_layer_types(j, ctx, m.num_layers, {"sliding_attention", "full_attention"});
  if (!exaone) return;
  if (first_key(j, {"sliding_window_pattern"}).empty()) return;
  const json& pat = j.at("sliding_window_pattern");
  if (pat.is_string()) {
    const std::string s = pat.get<std::string>();
    SCALEDL_CHECK(!s.empty() && s.find_first_not_of("LG") == std::string::npos,
                  "{}.sliding_window_pattern=\"{}\" must be a string of L (local) and G (global) layers", ctx,
                  s);
  } else {
    get_int(j, "sliding_window_pattern", ctx, 0, kMaxLayers);
  }
}

/// Llama 4's text model (Llama4TextConfig, model_type llama4_text; the language model of Llama 4 Scout
/// and Maverick): a Llama decoder with grouped-query attention (num_key_value_heads 8, head_dim 128 by
/// default, no biases: attention_bias is forced off by the class), untied LM head, and
/// - FFNs: layer i is a mixture when i is in moe_layers (default every interleave_moe_layer_step-th:
///   step - 1, 2 step - 1, ...), else a dense SwiGLU of intermediate_size_mlp. The mixture: a router
///   Linear(hidden, num_local_experts) without bias (top num_experts_per_tok, sigmoid scores), the
///   experts SwiGLU of intermediate_size (gate_up_proj [E, h, 2f] and down_proj [E, f, h] parameters:
///   costed as the graph's gate, up and down batched matmuls), plus one shared expert, a SwiGLU of
///   intermediate_size every token takes, added as it is. The graph routes each token to its top-k
///   experts (the model's computation; what Megatron / torchtitan run). Hugging Face's reference
///   Llama4TextMoe.forward instead runs all E experts on every token with zero scores for the unchosen
///   (num_local_experts / num_experts_per_tok times the routed experts' FLOPs): not followed.
///   MoE layers are modelled every layer (step 1, Scout) or every second layer (step 2, Maverick):
///   the graph's sparse-layer rule (is_sparse_layer); other steps and other moe_layers lists are refused.
/// - attention: on the RoPE layers (no_rope_layers[i] = 1; by default all but every
///   no_rope_layer_interval-th) q and k take a weightless L2 norm over each head when use_qk_norm
///   (qk_norm, qk_norm_weightless); on the NoPE layers Hugging Face instead scales q by the attention
///   temperature (attn_temperature_tuning). The graph puts the q/k norm nodes on every layer: on the NoPE
///   layers they stand for that multiply of q (one elementwise pass over q and one over k, approximated).
///   The chunked attention of the RoPE layers (attention_chunk_size) is a mask, as a sliding window.
void parse_llama4_text(const json& j, const std::string& ctx, ModelSpec& m) {
  read_decoder(j, ctx, m, 8);
  read_head_dim(j, ctx, m, 128);
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);  // the experts' and the shared expert's width
  const int64_t dense = opt(j, {"intermediate_size_mlp"}, ctx, 1, kMaxFfn, 16384);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.max_positions = 0;
  m.context_len = opt(j, {"max_position_embeddings"}, ctx, 1, kMaxPositions, 131072);
  m.activation = parse_act(j, "hidden_act", ctx, "silu");
  m.norm = NormKind::RMSNorm;
  m.gated_ffn = true;
  m.qkv_bias = m.out_bias = m.linear_bias = false;  // Llama4TextConfig sets attention_bias = False
  m.qk_norm = m.qk_norm_weightless = get_bool_or(j, "use_qk_norm", ctx, true);
  m.dropout = m.embed_dropout = 0;
  m.attn_dropout = prob(j, "attention_dropout", ctx, 0.0);
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, false);
  if (!first_key(j, {"attention_chunk_size"}).empty())
    get_int(j, "attention_chunk_size", ctx, 1, kMaxPositions);
  read_nope_layers(j, ctx, m);
  // The MoE layers: moe_layers, or every step-th from step - 1.
  const int64_t step = opt(j, {"interleave_moe_layer_step"}, ctx, 1, kMaxLayers, 1);
  std::vector<int64_t> moe;
  for (int64_t i = step - 1; i < m.num_layers; i += step) moe.push_back(i);
  const char* key = "interleave_moe_layer_step";
  if (!first_key(j, {"moe_layers"}).empty()) {
    const json& l = j.at("moe_layers");
    SCALEDL_CHECK(l.is_array(), "{}.moe_layers={} must be a list of layer indices", ctx, show(l));
    moe.clear();
    for (const json& v : l) {
      SCALEDL_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < m.num_layers &&
                        (moe.empty() || v.get<int64_t>() > moe.back()),
                    "{}.moe_layers={}: {} is not a layer index in [0, {}) in increasing order", ctx, show(l),
                    show(v), m.num_layers);
      moe.push_back(v.get<int64_t>());
    }
    key = "moe_layers";
  }
  m.dense_ffn_dim = dense;
  if (moe.empty()) {  // every FFN dense
    m.ffn_dim = dense;
    m.dense_ffn_dim = 0;
    return;
  }
  // The graph's rule (is_sparse_layer): every layer (step 1) or the odd ones (step 2).
  const int64_t s = static_cast<int64_t>(moe.size()) == m.num_layers ? 1 : 2;
  bool same = true;
  for (int64_t i = 0, k = 0; i < m.num_layers; ++i) {
    const bool sparse = k < static_cast<int64_t>(moe.size()) && moe[k] == i;
    if (sparse) ++k;
    same = same && sparse == (s == 1 || i % 2 == 1);
  }
  SCALEDL_CHECK(
      same,
      "{}.{}={}: Llama 4 MoE layers other than every layer or every second layer (1, 3, 5, ...) are "
      "not modelled",
      ctx, key, first_key(j, {key}).empty() ? std::to_string(step) : show(j.at(key)));
  m.num_experts = opt(j, {"num_local_experts"}, ctx, 0, kMaxExperts, 16);
  SCALEDL_CHECK(m.num_experts >= 1, "{}.num_local_experts={} must be >= 1", ctx, m.num_experts);
  m.moe_top_k = opt(j, {"num_experts_per_tok"}, ctx, 0, kMaxExperts, 1);
  SCALEDL_CHECK(m.moe_top_k >= 1 && m.moe_top_k <= m.num_experts,
                "{}.num_experts_per_tok={} must be in [1, num_local_experts={}]", ctx, m.moe_top_k,
                m.num_experts);
  m.shared_expert_ffn = m.ffn_dim;  // Llama4TextMoe.shared_expert: a Llama4TextMLP of intermediate_size
  m.plain_shared_expert = true;
  dropless_experts(m, false);
  m.encoder_sparse_step = s;
}

/// Model types ScaleDL knows and refuses, with the reason (one line each).
const char* refused_model_type(const std::string& type) {
  if (type == "qwen3_next")
    return "its Gated DeltaNet linear-attention layers (all but every full_attention_interval-th layer of "
           "layer_types) have no layer kind in the graph, and its gated full attention and MoE alone would "
           "mis-count it";
  return nullptr;
}

/// The language model of a multimodal config (transformers' Gemma3Config, Llama4Config, Mistral3Config):
/// its text_config, with the text class's model_type (gemma3_text, llama4_text; mistral3: mistral or
/// llama) and defaults, read by that type's reader under "<ctx>.text_config". The vision tower, the
/// multimodal projector and the image tokens are not modelled: the graph is that of text-only training
/// and the parameters are the language model's (hf_class says "text model only").
json text_model_config(const json& j, const std::string& ctx, ModelType wrapper) {
  SCALEDL_CHECK(j.contains("text_config") && j.at("text_config").is_object(),
                "{}.text_config is missing or not an object (a {} config holds its language model there)",
                ctx, to_string(wrapper));
  json t = j.at("text_config");
  std::vector<std::string> types;
  switch (wrapper) {
    case ModelType::Gemma3:
      types = {"gemma3_text"};
      // Gemma3Config builds Gemma3TextConfig(**text_config): its defaults fill what the hub's short
      // text_config leaves out (gemma-3-4b gives hidden_size, intermediate_size, num_hidden_layers only).
      {
        static const json defaults = {{"vocab_size", 262208},      {"hidden_size", 2304},
                                      {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                                      {"num_attention_heads", 8},  {"num_key_value_heads", 4},
                                      {"head_dim", 256},           {"max_position_embeddings", 131072}};
        for (const auto& [k, v] : defaults.items())
          if (!t.contains(k)) t[k] = v;
      }
      break;
    case ModelType::Llama4:
      types = {"llama4_text"};
      break;
    default:  // mistral3 (Mistral3Config: any text config, mistral when unnamed)
      types = {"mistral", "llama"};
      break;
  }
  const std::string type = get_str_or(t, "model_type", ctx + ".text_config", types.front());
  SCALEDL_CHECK(
      std::find(types.begin(), types.end(), type) != types.end(),
      "{}.text_config.model_type=\"{}\" is not a text model of model_type {} that ScaleDL reads ({})", ctx,
      type, to_string(wrapper), fmt::join(types, ", "));
  t["model_type"] = type;
  // The LM head's tie: the text config's, else the wrapper's, else the text class's default.
  if (!t.contains("tie_word_embeddings") && j.contains("tie_word_embeddings"))
    t["tie_word_embeddings"] = j.at("tie_word_embeddings");
  t.erase("architectures");
  t.erase("_name_or_path");
  return t;
}

void parse_t5(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::EncoderDecoder;
  m.hidden = req(j, {"d_model"}, ctx, 1, kMaxHidden);
  m.num_layers = req(j, {"num_layers"}, ctx, 1, kMaxLayers);
  m.num_decoder_layers = opt(j, {"num_decoder_layers"}, ctx, 1, kMaxLayers, m.num_layers);
  m.num_heads = req(j, {"num_heads"}, ctx, 1, kMaxHeads);
  m.head_dim = opt(j, {"d_kv"}, ctx, 1, 1 << 16, 64);  // heads * d_kv need not equal d_model
  m.ffn_dim = req(j, {"d_ff"}, ctx, 1, kMaxFfn);
  m.vocab_size = req(j, {"vocab_size"}, ctx, 1, kMaxVocab);
  m.rel_attn_buckets = opt(j, {"relative_attention_num_buckets"}, ctx, 1, 1 << 16, 32);
  m.max_positions = 0;
  m.context_len = 0;  // relative positions: any length
  std::string ff = get_str_or(j, "feed_forward_proj", ctx, "relu");
  // "gated-gelu" (T5 v1.1, flan-t5) -> wi_0 (activated), wi_1, wo; HF maps gelu to gelu_new there.
  bool gated = ff.rfind("gated-", 0) == 0;
  std::string act = gated ? ff.substr(6) : ff;
  if (gated && act == "gelu") act = "gelu_new";
  json a = {{"feed_forward_proj", act}};
  try {
    m.activation = parse_act(a, "feed_forward_proj", ctx, "relu");
  } catch (const Error&) {
    fail("{}.feed_forward_proj=\"{}\" is not supported (relu, gelu, gated-gelu, gated-silu)", ctx, ff);
  }
  m.gated_ffn = gated;
  m.norm = NormKind::RMSNorm;  // T5LayerNorm: scale only, no mean subtraction
  m.linear_bias = m.qkv_bias = m.out_bias = false;
  m.dropout = prob(j, "dropout_rate", ctx, 0.1);
  m.embed_dropout = m.attn_dropout = m.act_dropout = m.dropout;
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, true);
}

/// Switch Transformers (Fedus et al. 2021; HF SwitchTransformersConfig): T5 v1.0
/// blocks whose FFN is, every encoder/decoder_sparse_step-th layer, a top-1
/// mixture of num_experts ReLU FFNs (wi, wo; no bias) behind a router
/// Linear(d_model, num_experts) with expert_capacity tokens per expert and sample.
void parse_switch(const json& j, const std::string& ctx, ModelSpec& m) {
  m.arch = Arch::EncoderDecoder;
  m.hidden = opt(j, {"d_model"}, ctx, 1, kMaxHidden, 768);
  m.num_layers = opt(j, {"num_layers"}, ctx, 1, kMaxLayers, 12);
  m.num_decoder_layers = opt(j, {"num_decoder_layers"}, ctx, 1, kMaxLayers, m.num_layers);
  m.num_heads = opt(j, {"num_heads"}, ctx, 1, kMaxHeads, 12);
  m.head_dim = opt(j, {"d_kv"}, ctx, 1, 1 << 16, 64);
  m.ffn_dim = opt(j, {"d_ff"}, ctx, 1, kMaxFfn, 2048);
  m.vocab_size = opt(j, {"vocab_size"}, ctx, 1, kMaxVocab, 32128);
  m.rel_attn_buckets = opt(j, {"relative_attention_num_buckets"}, ctx, 1, 1 << 16, 32);
  m.max_positions = 0;
  m.context_len = 0;
  // The experts are DenseActDense (wi, act, dropout, wo) whatever is_gated_act says.
  std::string act = get_str_or(j, "dense_act_fn", ctx, "");
  if (act.empty()) {
    std::string ff = get_str_or(j, "feed_forward_proj", ctx, "relu");
    act = ff.substr(ff.rfind('-') == std::string::npos ? 0 : ff.rfind('-') + 1);
    if (act == "gelu") act = "gelu_new";
  }
  m.activation = parse_act(json{{"dense_act_fn", act}}, "dense_act_fn", ctx, "relu");
  m.gated_ffn = false;
  m.norm = NormKind::RMSNorm;
  m.linear_bias = m.qkv_bias = m.out_bias = false;
  m.dropout = prob(j, "dropout_rate", ctx, 0.1);
  m.embed_dropout = m.attn_dropout = m.act_dropout = m.dropout;
  m.lm_head = true;
  m.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", ctx, true);
  // Experts. 0 experts is not a Switch model (use model_type t5 for the dense one).
  m.num_experts = opt(j, {"num_experts"}, ctx, 0, kMaxExperts, 8);
  SCALEDL_CHECK(m.num_experts >= 1,
                "{}.num_experts={} must be >= 1 (a dense encoder-decoder is model_type \"t5\")", ctx,
                m.num_experts);
  auto step = [&](const char* step_key, const char* count_key, int64_t layers) -> int64_t {
    if (!first_key(j, {step_key}).empty()) return get_int(j, step_key, ctx, 0, layers);
    const int64_t n = opt(j, {count_key}, ctx, 0, layers, 3);
    return n > 0 ? layers / n : 0;  // HF: num_layers // num_sparse_layers (0 sparse: a dense stack here)
  };
  m.encoder_sparse_step = step("encoder_sparse_step", "num_sparse_encoder_layers", m.num_layers);
  m.decoder_sparse_step = step("decoder_sparse_step", "num_sparse_decoder_layers", m.num_decoder_layers);
  if (!first_key(j, {"capacity_factor"}).empty()) {
    m.expert_capacity = 0;
    m.capacity_factor = get_num_or(j, "capacity_factor", ctx, 1e-3, 1e3, 1.0);
  } else {
    m.expert_capacity = opt(j, {"expert_capacity"}, ctx, 1, kMaxPositions, 64);
  }
  m.router_bias = get_bool_or(j, "router_bias", ctx, false);
}

void parse_vision(const json& j, const std::string& ctx, ModelSpec& m, bool deit) {
  m.arch = Arch::VisionEncoder;
  read_sizes(j, ctx, m, "num_hidden_layers", "num_attention_heads");
  m.ffn_dim = req(j, {"intermediate_size"}, ctx, 1, kMaxFfn);
  m.image_size = opt(j, {"image_size"}, ctx, 1, kMaxImage, 224);
  m.patch_size = opt(j, {"patch_size"}, ctx, 1, kMaxImage, 16);
  m.num_channels = opt(j, {"num_channels"}, ctx, 1, 64, 3);
  SCALEDL_CHECK(m.image_size % m.patch_size == 0, "{}.patch_size={} does not divide {}.image_size={}", ctx,
                m.patch_size, ctx, m.image_size);
  m.activation = parse_act(j, "hidden_act", ctx, "gelu");
  m.dropout = prob(j, "hidden_dropout_prob", ctx, 0.0);
  m.embed_dropout = m.dropout;
  m.attn_dropout = prob(j, "attention_probs_dropout_prob", ctx, 0.0);
  m.qkv_bias = get_bool_or(j, "qkv_bias", ctx, true);
  m.num_labels = labels(j, ctx, 1000);  // ImageNet-1k when the config does not say
  m.num_special_tokens = deit ? 2 : 1;  // [CLS] (+ DeiT distillation token)
  m.dist_head = deit && contains(m.hf_class, "WithTeacher");
  m.vocab_size = 0;
  m.tie_word_embeddings = false;
}

}  // namespace

const char* to_string(Family f) {
#define SCALEDL_FAMILY_NAME(E, name) #name,
  static const char* n[] = {SCALEDL_MODEL_FAMILIES(SCALEDL_FAMILY_NAME)};
#undef SCALEDL_FAMILY_NAME
  return n[static_cast<int>(f)];
}
const char* to_string(ModelType t) {
#define SCALEDL_MODEL_TYPE_NAME(E, name, family) #name,
  static const char* n[] = {SCALEDL_MODEL_TYPES(SCALEDL_MODEL_TYPE_NAME)};
#undef SCALEDL_MODEL_TYPE_NAME
  return n[static_cast<int>(t)];
}
Family model_type_family(ModelType t) {
#define SCALEDL_MODEL_TYPE_FAMILY(E, name, family) Family::family,
  static const Family f[] = {SCALEDL_MODEL_TYPES(SCALEDL_MODEL_TYPE_FAMILY)};
#undef SCALEDL_MODEL_TYPE_FAMILY
  return f[static_cast<int>(t)];
}
ModelType parse_model_type(const std::string& s, const std::string& key) {
  for (int i = 0; i < kModelTypeCount; ++i)
    if (s == to_string(static_cast<ModelType>(i))) return static_cast<ModelType>(i);
  fail("{}=\"{}\" is not supported (one of {})", key, s, supported_model_types());
}
const char* to_string(Arch a) {
  static const char* n[] = {"encoder_only", "decoder_only", "encoder_decoder", "vision_encoder"};
  return n[static_cast<int>(a)];
}
const char* to_string(Activation a) {
  static const char* n[] = {"gelu", "gelu_tanh", "relu", "silu", "gelu_new", "relu2"};
  static_assert(sizeof(n) / sizeof(n[0]) == kActivationCount, "a name for each Activation");
  return n[static_cast<int>(a)];
}
const char* to_string(NormKind k) {
  static const char* n[] = {"layernorm", "rmsnorm"};
  return n[static_cast<int>(k)];
}
const char* supported_model_types() {
  static const std::string list = [] {
    std::string l;
    for (int i = 0; i < kModelTypeCount; ++i)
      l += (i ? ", " : "") + std::string(to_string(static_cast<ModelType>(i)));
    return l;
  }();
  return list.c_str();
}

namespace {
/// Whether another value of `key` changes the model read from `config` (or is refused).
bool changes_model(const json& config, const std::string& key, const std::string& base) {
  auto it = config.find(key);
  if (it == config.end()) return false;
  json other = config;
  json& v = other[key];
  if (v.is_boolean())
    v = !v.get<bool>();
  else if (v.is_number_integer() || v.is_number_unsigned())
    v = v.get<int64_t>() == std::numeric_limits<int64_t>::max() ? v.get<int64_t>() - 1 : v.get<int64_t>() + 1;
  else if (v.is_number_float())
    v = v.get<double>() * 0.5 + 0.125;
  else if (v.is_string())
    v = v.get<std::string>() + "-scaledl-probe";
  else
    v = json();
  try {
    return parse_model_config(other, "probe").to_json().dump() != base;
  } catch (const Error&) {
    return true;  // refused: the parser reads and checks it
  }
}
}  // namespace

void check_config_key_used(const json& config, const std::string& key, const std::string& ctx) {
  const std::string base = parse_model_config(config, ctx).to_json().dump();
  if (changes_model(config, key, base)) return;
  // Synonyms of the sizes across model families (transformers' attribute_map).
  static const std::vector<std::vector<std::string>> synonyms = {
      {"num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers"},
      {"hidden_size", "n_embd", "d_model", "dim", "embed_dim"},
      {"num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads"},
      {"intermediate_size", "n_inner", "d_ff", "ffn_dim", "encoder_ffn_dim"},
      {"max_position_embeddings", "n_positions", "n_ctx"},
      {"num_key_value_heads", "num_kv_heads", "multi_query_group_num"}};
  std::string instead;
  for (const auto& group : synonyms) {
    if (std::find(group.begin(), group.end(), key) == group.end()) continue;
    for (const auto& k : group)
      if (k != key && config.contains(k) && changes_model(config, k, base)) {
        instead = k;
        break;
      }
  }
  const std::string type =
      config.is_object() && config.contains("model_type") && config["model_type"].is_string()
          ? config["model_type"].get<std::string>()
          : "?";
  // A multimodal config (gemma3, llama4, mistral3) reads its text model's keys under text_config.
  const bool nested = instead.empty() && config.contains("text_config") &&
                      config["text_config"].is_object() && config["text_config"].contains(key);
  fail("{}: config.{} is not a key that model_type {} reads: it would change nothing{}", ctx, key, type,
       nested            ? fmt::format("; it reads config.text_config.{} (edit the file)", key)
       : instead.empty() ? std::string()
                         : fmt::format("; give config.{} instead", instead));
}

ModelSpec parse_model_config(const json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object (a Hugging Face config.json), got {}", ctx,
                show(j));
  SCALEDL_CHECK(j.contains("model_type") && !j.at("model_type").is_null(),
                "{}.model_type is missing (one of {})", ctx, supported_model_types());
  std::string type = get_str_or(j, "model_type", ctx, "");
  ModelSpec m;
  m.name = get_str_or(j, "_name_or_path", ctx, "");
  if (j.contains("architectures") && !j.at("architectures").is_null()) {
    const json& a = j.at("architectures");
    SCALEDL_CHECK(a.is_array() && (a.empty() || a[0].is_string()),
                  "{}.architectures={} must be a list of class names", ctx, show(a));
    if (!a.empty()) m.hf_class = a[0].get<std::string>();
  }
  if (const char* why = refused_model_type(type))
    fail("{}.model_type=\"{}\" is not modelled: {}", ctx, type, why);
  const ModelType t = parse_model_type(type, ctx + ".model_type");
  m.family = model_type_family(t);
  switch (t) {  // the reader of each model type
    case ModelType::Bert:
      parse_bert(j, ctx, m);
      break;
    case ModelType::Gpt2:
      parse_gpt2(j, ctx, m);
      break;
    case ModelType::GptNeo:
      parse_gpt_neo(j, ctx, m);
      break;
    case ModelType::Opt:
      parse_opt(j, ctx, m);
      break;
    case ModelType::Llama:
    case ModelType::Mistral:
    case ModelType::Qwen2:
    case ModelType::Qwen3:
    case ModelType::Gemma:
    case ModelType::Gemma2:
    case ModelType::Gemma3Text:
    case ModelType::Mixtral:
    case ModelType::Phi3:
    case ModelType::Qwen3Moe:
    case ModelType::Qwen2Moe:
    case ModelType::SmolLM3:
    case ModelType::Glm4:
    case ModelType::Granite:
    case ModelType::SeedOss:
    case ModelType::Ernie45:
      parse_llama(j, ctx, m, t);
      break;
    case ModelType::Olmo2:
    case ModelType::Olmo3:
    case ModelType::Exaone4:
      parse_post_norm(j, ctx, m, t);
      break;
    case ModelType::Llama4Text:
      parse_llama4_text(j, ctx, m);
      break;
    case ModelType::Gemma3:
    case ModelType::Llama4:
    case ModelType::Mistral3: {  // the text model: its own type's reader under ctx.text_config
      const std::string name = m.name, cls = m.hf_class;
      m = parse_model_config(text_model_config(j, ctx, t), ctx + ".text_config");
      m.name = name;
      m.hf_class = (cls.empty() ? std::string(to_string(t)) : cls) +
                   " (text model only: the vision tower is not modelled)";
      break;
    }
    case ModelType::Nemotron:
      parse_nemotron(j, ctx, m);
      break;
    case ModelType::Glm4Moe:
      parse_glm4_moe(j, ctx, m);
      break;
    case ModelType::GptNeoX:
      parse_gpt_neox(j, ctx, m);
      break;
    case ModelType::DeepseekV2:
    case ModelType::DeepseekV3:
      parse_deepseek(j, ctx, m, t);
      break;
    case ModelType::GptOss:
      parse_gpt_oss(j, ctx, m);
      break;
    case ModelType::T5:
      parse_t5(j, ctx, m);
      break;
    case ModelType::SwitchTransformers:
      parse_switch(j, ctx, m);
      break;
    case ModelType::ViT:
      parse_vision(j, ctx, m, false);
      break;
    case ModelType::DeiT:
      parse_vision(j, ctx, m, true);
      break;
  }
  if (m.num_kv_heads == 0) m.num_kv_heads = m.num_heads;
  if (m.head_dim == 0) m.head_dim = m.hidden / m.num_heads;
  if (m.embed_dim == 0) m.embed_dim = m.hidden;
  if (m.name.empty()) m.name = to_string(m.family);
  validate_model_spec(m, ctx);
  return m;
}

ModelSpec load_model_config(const std::string& path) {
  json j = read_json_file(path);
  ModelSpec m = parse_model_config(j, path);
  m.name = std::filesystem::path(path).stem().string();
  return m;
}

void validate_model_spec(const ModelSpec& m, const std::string& ctx) {
  auto in = [&](int64_t v, const char* key, int64_t lo, int64_t hi) {
    SCALEDL_CHECK(v >= lo && v <= hi, "{}.{}={} is out of range [{}, {}]", ctx, key, v, lo, hi);
  };
  in(m.hidden, "hidden", 1, kMaxHidden);
  in(m.num_layers, "num_layers", 1, kMaxLayers);
  in(m.num_heads, "num_heads", 1, kMaxHeads);
  in(m.num_kv_heads, "num_kv_heads", 1, m.num_heads);
  in(m.head_dim, "head_dim", 1, 1 << 16);
  in(m.ffn_dim, "ffn_dim", 1, kMaxFfn);
  in(m.embed_dim, "embed_dim", 1, kMaxHidden);
  SCALEDL_CHECK(m.num_heads % m.num_kv_heads == 0, "{}.num_kv_heads={} does not divide {}.num_heads={}", ctx,
                m.num_kv_heads, ctx, m.num_heads);
  if (m.arch == Arch::EncoderDecoder) in(m.num_decoder_layers, "num_decoder_layers", 1, kMaxLayers);
  if (m.arch == Arch::VisionEncoder) {
    in(m.image_size, "image_size", 1, kMaxImage);
    in(m.patch_size, "patch_size", 1, m.image_size);
    in(m.num_channels, "num_channels", 1, 64);
    in(m.num_labels, "num_labels", 1, kMaxLabels);
    in(m.num_special_tokens, "num_special_tokens", 1, 2);
    SCALEDL_CHECK(m.image_size % m.patch_size == 0, "{}.patch_size={} does not divide {}.image_size={}", ctx,
                  m.patch_size, ctx, m.image_size);
  } else {
    in(m.vocab_size, "vocab_size", 1, kMaxVocab);
    if (!m.lm_head) in(m.num_labels, "num_labels", 1, kMaxLabels);  // classifier head instead
  }
  in(m.max_positions, "max_positions", 0, kMaxPositions);
  in(m.context_len, "context_len", 0, kMaxPositions);
  in(m.num_experts, "num_experts", 0, kMaxExperts);
  if (m.family == Family::Switch || (m.family == Family::Llama && m.num_experts > 0)) {
    in(m.num_experts, "num_experts", 1, kMaxExperts);
    in(m.moe_top_k, "moe_top_k", 1, m.num_experts);
    in(m.shared_expert_ffn, "shared_expert_ffn", 0, kMaxFfn);
    in(m.encoder_sparse_step, "encoder_sparse_step", 0, m.num_layers);
    in(m.decoder_sparse_step, "decoder_sparse_step", 0, m.num_decoder_layers);
    in(m.expert_capacity, "expert_capacity", 0, kMaxPositions);
    SCALEDL_CHECK(m.expert_capacity > 0 || (std::isfinite(m.capacity_factor) && m.capacity_factor > 0),
                  "{}.capacity_factor={} must be > 0 when expert_capacity is 0", ctx, m.capacity_factor);
  } else {
    SCALEDL_CHECK(m.num_experts == 0,
                  "{}.num_experts={}: experts exist only in switch_transformers and the llama family", ctx,
                  m.num_experts);
  }
  in(m.kv_lora_rank, "kv_lora_rank", 0, kMaxHidden);
  in(m.q_lora_rank, "q_lora_rank", 0, kMaxHidden);
  in(m.v_head_dim, "v_head_dim", 0, 1 << 16);
  in(m.dense_ffn_dim, "dense_ffn_dim", 0, kMaxFfn);
  in(m.first_dense_layers, "first_dense_layers", 0, m.num_experts > 0 ? m.num_layers : 0);
  in(m.expert_shards, "expert_shards", 1, std::max<int64_t>(1, m.num_experts));
  SCALEDL_CHECK(
      !m.clamped_glu || (m.num_experts > 0 && m.gated_ffn && m.fused_gate_up),
      "{}.clamped_glu: gpt-oss's clamped GLU is an expert activation (a mixture of fused gated experts)",
      ctx);
  SCALEDL_CHECK(
      m.num_experts == 0 || !m.linear_bias || m.fused_gate_up,
      "{}: biased experts are modelled for fused gate_up experts only (gpt-oss), not for mlp_bias in a {} "
      "mixture of experts",
      ctx, m.hf_class.empty() ? std::string("llama-family") : m.hf_class);
  SCALEDL_CHECK(!m.attn_sinks || m.family == Family::Llama,
                "{}.attn_sinks: attention sinks are a llama-family "
                "decoder's (gpt-oss)",
                ctx);
  SCALEDL_CHECK(m.num_experts == 0 || m.num_experts % m.expert_shards == 0,
                "{}.expert_shards={} does not divide num_experts={}", ctx, m.expert_shards, m.num_experts);
  if (m.mla()) {
    SCALEDL_CHECK(
        m.family == Family::Llama && m.num_kv_heads == m.num_heads,
        "{}.kv_lora_rank={}: latent attention is a decoder of the llama family with num_kv_heads = num_heads",
        ctx, m.kv_lora_rank);
    in(m.qk_rope_dim, "qk_rope_dim", 0, m.head_dim);
    SCALEDL_CHECK(m.rotary_dim == 0, "{}.rotary_dim={}: latent attention turns qk_rope_dim of each head", ctx,
                  m.rotary_dim);
    SCALEDL_CHECK(m.qk_rope_dim % 2 == 0, "{}.qk_rope_dim={} must be even", ctx, m.qk_rope_dim);
  } else {
    SCALEDL_CHECK(m.q_lora_rank == 0 && m.qk_rope_dim == 0,
                  "{}.q_lora_rank={} / qk_rope_dim={}: latent-attention sizes need kv_lora_rank > 0", ctx,
                  m.q_lora_rank, m.qk_rope_dim);
  }
  in(m.rotary_dim, "rotary_dim", 0, m.head_dim);
  SCALEDL_CHECK(m.rotary_dim == 0 || m.family == Family::Llama,
                "{}.rotary_dim={}: rotary embeddings are a llama-family decoder's", ctx, m.rotary_dim);
  in(m.nope_interval, "nope_interval", 0, m.num_layers);
  SCALEDL_CHECK(m.nope_interval == 0 || m.family == Family::Llama,
                "{}.nope_interval={}: NoPE layers are a llama-family decoder's", ctx, m.nope_interval);
  SCALEDL_CHECK(!m.post_norm_only ||
                    (m.family == Family::Llama && m.pre_norm && !m.sandwich_norm && !m.parallel_residual),
                "{}.post_norm_only: norms after attention and the FFN only (OLMo 2) are a llama-family "
                "decoder's, without sandwich norms or a parallel residual",
                ctx);
  SCALEDL_CHECK(m.qk_norm || (!m.qk_norm_whole && !m.qk_norm_weightless),
                "{}.qk_norm_whole / qk_norm_weightless: the kind of a q/k norm needs qk_norm", ctx);
  SCALEDL_CHECK(!m.qk_norm || !m.mla(), "{}.qk_norm: q/k norms of latent attention are not modelled", ctx);
  SCALEDL_CHECK((!m.residual_scale && !m.logits_scale) || (m.family == Family::Llama && m.lm_head),
                "{}.residual_scale / logits_scale: Granite's multipliers are a llama-family decoder's", ctx);
  for (auto [c, key] : {std::pair{m.attn_softcap, "attn_softcap"}, {m.final_softcap, "final_softcap"}})
    SCALEDL_CHECK(std::isfinite(c) && c >= 0, "{}.{}={} must be >= 0 (0: no soft-capping)", ctx, key, c);
  for (auto [p, key] : {std::pair{m.dropout, "dropout"},
                        {m.attn_dropout, "attn_dropout"},
                        {m.embed_dropout, "embed_dropout"},
                        {m.act_dropout, "act_dropout"}})
    SCALEDL_CHECK(std::isfinite(p) && p >= 0 && p < 1, "{}.{}={} must be a probability in [0, 1)", ctx, key,
                  p);
}

namespace {
/// Autocast runs BF16 or FP16 and is not the FP8 recipe: an Error naming `ctx` otherwise.
void check_amp(const TrainSettings& s, const std::string& ctx) {
  SCALEDL_CHECK(!s.amp || ((s.dtype == DType::BF16 || s.dtype == DType::FP16) && !s.fp8),
                "{}.amp=true needs dtype=bf16 or fp16 (autocast's dtype) and no fp8, got dtype={}{}", ctx,
                to_string(s.dtype), s.fp8 ? " with fp8=true" : "");
}
}  // namespace

TrainSettings parse_train_settings(const json& j, const std::string& ctx) {
  TrainSettings s;
  if (j.is_null()) return s;
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object, got {}", ctx, show(j));
  static const char* known[] = {"batch",
                                "seq_len",
                                "image_size",
                                "dtype",
                                "optimizer",
                                "optimizer_step",
                                "num_devices",
                                "tgt_len",
                                "backward",
                                "mode",
                                "fused_kernels",
                                "attention",
                                "fp8",
                                "lora_rank",
                                "lora_targets",
                                "sequence_shards",
                                "amp",
                                "fused_optimizer",
                                "rotary_kernels",
                                "vocab_multiple"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    SCALEDL_CHECK(ok, "{}.{} is not a training setting (known: {})", ctx, it.key(), fmt::join(known, ", "));
  }
  s.batch = get_int_or(j, "batch", ctx, 1, kMaxBatch, s.batch);
  s.seq_len = get_int_or(j, "seq_len", ctx, 1, kMaxPositions, s.seq_len);
  s.tgt_len = get_int_or(j, "tgt_len", ctx, 0, kMaxPositions, s.tgt_len);
  s.image_size = get_int_or(j, "image_size", ctx, 0, kMaxImage, s.image_size);
  s.dtype = parse_dtype(get_str_or(j, "dtype", ctx, to_string(s.dtype)), ctx + ".dtype");
  SCALEDL_CHECK(s.dtype != DType::FP8,
                "{}.dtype=fp8: FP8 training is dtype=bf16 with fp8=true (FP8 GEMMs in the linear layers, "
                "BF16 elsewhere)",
                ctx);
  s.fp8 = get_bool_or(j, "fp8", ctx, s.fp8);
  SCALEDL_CHECK(!s.fp8 || s.dtype == DType::BF16,
                "{}.fp8=true needs dtype=bf16 (the kernels outside the FP8 "
                "GEMMs), got dtype={}",
                ctx, to_string(s.dtype));
  s.amp = get_bool_or(j, "amp", ctx, s.amp);
  s.fused_optimizer = get_bool_or(j, "fused_optimizer", ctx, s.fused_optimizer);
  s.rotary_kernels = get_bool_or(j, "rotary_kernels", ctx, s.rotary_kernels);
  s.vocab_multiple = get_int_or(j, "vocab_multiple", ctx, 0, 1 << 16, s.vocab_multiple);
  check_amp(s, ctx);
  s.attention =
      parse_attention_impl(get_str_or(j, "attention", ctx, to_string(s.attention)), ctx + ".attention");
  s.lora_rank = get_int_or(j, "lora_rank", ctx, 0, kMaxLoraRank, s.lora_rank);
  if (j.contains("lora_targets"))
    s.lora_targets = parse_lora_targets(get_str_or(j, "lora_targets", ctx, ""), ctx + ".lora_targets");
  s.optimizer = parse_optimizer(get_str_or(j, "optimizer", ctx, to_string(s.optimizer)), ctx + ".optimizer");
  s.optimizer_step = get_bool_or(j, "optimizer_step", ctx, s.optimizer_step);
  s.backward = get_bool_or(j, "backward", ctx, s.backward);
  s.fused_kernels = get_bool_or(j, "fused_kernels", ctx, s.fused_kernels);
  SCALEDL_CHECK(s.backward || !s.optimizer_step,
                "{}: backward=false (inference) with optimizer_step=true: an optimizer step needs gradients",
                ctx);
  if (j.contains("mode")) {
    SCALEDL_CHECK(!j.contains("backward") && !j.contains("optimizer_step"),
                  "{}: give either mode or backward/optimizer_step, not both", ctx);
    set_run_mode(s, parse_run_mode(get_str_or(j, "mode", ctx, "train"), ctx + ".mode"));
  }
  s.num_devices = get_int_or(j, "num_devices", ctx, 1, 1 << 20, s.num_devices);
  s.sequence_shards = get_int_or(j, "sequence_shards", ctx, 1, 1 << 20, s.sequence_shards);
  return s;
}

const char* to_string(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::Eager:
      return "eager";
    case AttentionImpl::Fused:
      return "fused";
  }
  return "?";
}

AttentionImpl parse_attention_impl(const std::string& v, const std::string& ctx) {
  if (v == "eager") return AttentionImpl::Eager;
  if (v == "fused") return AttentionImpl::Fused;
  fail("{}=\"{}\" is not an attention implementation (eager or fused)", ctx, v);
}

const char* to_string(Framework f) {
  switch (f) {
    case Framework::HfEager:
      return "hf-eager";
    case Framework::HfSdpa:
      return "hf-sdpa";
    case Framework::Megatron:
      return "megatron";
  }
  return "?";
}

Framework parse_framework(const std::string& v, const std::string& ctx) {
  for (Framework f : {Framework::HfEager, Framework::HfSdpa, Framework::Megatron})
    if (v == to_string(f)) return f;
  fail("{}=\"{}\" is not a framework recipe (hf-eager, hf-sdpa or megatron)", ctx, v);
}

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> n = {"q", "k", "v", "o", "gate", "up", "down"};
  return n;
}

uint32_t parse_lora_targets(const std::string& v, const std::string& ctx) {
  const auto& names = lora_target_names();
  if (v == "all") return (1u << names.size()) - 1;
  uint32_t bits = 0;
  size_t b = 0;
  while (b <= v.size()) {
    const size_t e = std::min(v.find(',', b), v.size());
    const std::string item = v.substr(b, e - b);
    const auto it = std::find(names.begin(), names.end(), item);
    SCALEDL_CHECK(it != names.end(), "{}=\"{}\": \"{}\" is not a LoRA target (all, or a list of {})", ctx, v,
                  item, fmt::join(names, ", "));
    bits |= 1u << (it - names.begin());
    b = e + 1;
  }
  return bits;
}

std::string lora_targets_string(const TrainSettings& s) {
  const auto& names = lora_target_names();
  std::vector<std::string> on;
  for (size_t i = 0; i < names.size(); ++i)
    if (s.lora_targets == 0 || (s.lora_targets >> i & 1u)) on.push_back(names[i]);
  return fmt::format("{}", fmt::join(on, ","));
}

bool lora_targets_node(const TrainSettings& s, const std::string& name) {
  if (s.lora_rank <= 0) return false;
  const std::string leaf = name.substr(name.rfind('.') + 1);
  auto on = [&](const char* t) {
    const auto& names = lora_target_names();
    const size_t i = static_cast<size_t>(std::find(names.begin(), names.end(), t) - names.begin());
    return s.lora_targets == 0 || (s.lora_targets >> i & 1u);
  };
  if (leaf == "qkv") return on("q") || on("k") || on("v");
  if (leaf == "gate_up") return on("gate") || on("up");
  for (const char* t : {"q", "k", "v", "o", "gate", "up", "down"})
    if (leaf == t) return on(t);
  return false;
}

void apply_framework(TrainSettings& s, Framework f) {
  s.vocab_multiple = 0;      // Hugging Face keeps the config's vocabulary
  s.fused_optimizer = true;  // transformers 5's Trainer (adamw_torch_fused) and Megatron (FusedAdam)
  s.rotary_kernels = true;   // apply_rotary_pos_emb's kernels, or Megatron's fused RoPE
  switch (f) {
    case Framework::HfEager:
      s.fused_kernels = false;
      s.attention = AttentionImpl::Eager;
      return;
    case Framework::HfSdpa:
      s.fused_kernels = false;
      s.attention = AttentionImpl::Fused;
      return;
    case Framework::Megatron:
      s.fused_kernels = true;
      s.attention = AttentionImpl::Fused;
      s.vocab_multiple = kMegatronVocabMultiple;
      return;
  }
}

void set_dtype_recipe(TrainSettings& s, const std::string& v, const std::string& ctx) {
  s.fp8 = v == "fp8";
  s.amp = v.rfind("amp", 0) == 0;
  if (s.amp) {
    SCALEDL_CHECK(
        v == "amp-bf16" || v == "amp-fp16",
        "{}={}: autocast runs bf16 or fp16 (amp-bf16, amp-fp16); expected fp32, tf32, bf16, fp16, fp8, "
        "amp-bf16 or amp-fp16",
        ctx, v);
    s.dtype = parse_dtype(v.substr(4), ctx);
    return;
  }
  if (!s.fp8 && v != "fp32" && v != "tf32" && v != "bf16" && v != "fp16")
    fail("{}=\"{}\" is not a dtype (expected fp32, tf32, bf16, fp16, fp8, amp-bf16 or amp-fp16)", ctx, v);
  s.dtype = s.fp8 ? DType::BF16 : parse_dtype(v, ctx);
  SCALEDL_CHECK(s.dtype != DType::FP8, "{}=fp8: internal: the FP8 recipe sets dtype bf16", ctx);
}

DType weight_dtype(const TrainSettings& s) {
  return s.amp ? DType::FP32 : s.dtype;
}

bool fp32_master_weights(const TrainSettings& s) {
  return s.fused_kernels && !s.amp && (s.dtype == DType::BF16 || s.dtype == DType::FP16);
}

std::string dtype_recipe(const TrainSettings& s) {
  if (s.amp) return std::string("amp-") + to_string(s.dtype);
  return s.fp8 ? "fp8" : to_string(s.dtype);
}

const char* to_string(RunMode m) {
  switch (m) {
    case RunMode::Train:
      return "train";
    case RunMode::FwdBwd:
      return "fwd-bwd";
    case RunMode::Inference:
      return "inference";
  }
  return "?";
}

RunMode parse_run_mode(const std::string& v, const std::string& ctx) {
  for (RunMode m : {RunMode::Train, RunMode::FwdBwd, RunMode::Inference})
    if (v == to_string(m)) return m;
  throw Error(fmt::format("{}={} is not a mode (known: train, fwd-bwd, inference)", ctx, show(json(v))));
}

RunMode run_mode(const TrainSettings& s) {
  if (!s.backward) return RunMode::Inference;
  return s.optimizer_step ? RunMode::Train : RunMode::FwdBwd;
}

void set_run_mode(TrainSettings& s, RunMode m) {
  s.backward = m != RunMode::Inference;
  s.optimizer_step = m == RunMode::Train;
}

TrainSettings settings_from_config(const json& config, const std::string& ctx) {
  if (!config.is_object() || !config.contains("scaledl")) return TrainSettings{};
  return parse_train_settings(config.at("scaledl"), ctx + ".scaledl");
}

int64_t tokens_per_sample(const ModelSpec& m, const TrainSettings& s) {
  if (m.arch == Arch::VisionEncoder) {
    int64_t img = s.image_size > 0 ? s.image_size : m.image_size;
    int64_t side = img / m.patch_size;
    return side * side + m.num_special_tokens;
  }
  return s.seq_len;
}

int64_t decoder_tokens_per_sample(const ModelSpec& m, const TrainSettings& s) {
  if (m.arch != Arch::EncoderDecoder) return tokens_per_sample(m, s);
  return s.tgt_len > 0 ? s.tgt_len : s.seq_len;
}

void validate_settings(const ModelSpec& m, const TrainSettings& s) {
  SCALEDL_CHECK(s.batch >= 1 && s.batch <= kMaxBatch, "settings.batch={} is out of range [1, {}]", s.batch,
                kMaxBatch);
  SCALEDL_CHECK(s.seq_len >= 1 && s.seq_len <= kMaxPositions, "settings.seq_len={} is out of range [1, {}]",
                s.seq_len, kMaxPositions);
  SCALEDL_CHECK(s.tgt_len >= 0 && s.tgt_len <= kMaxPositions, "settings.tgt_len={} is out of range [0, {}]",
                s.tgt_len, kMaxPositions);
  SCALEDL_CHECK(s.num_devices >= 1, "settings.num_devices={} must be >= 1", s.num_devices);
  SCALEDL_CHECK(!s.fp8 || s.dtype == DType::BF16, "settings.fp8=true needs dtype=bf16, got dtype={}",
                to_string(s.dtype));
  SCALEDL_CHECK(s.dtype != DType::FP8, "settings.dtype=fp8: FP8 training is dtype=bf16 with fp8=true");
  check_amp(s, "settings");
  SCALEDL_CHECK(s.lora_rank >= 0 && s.lora_rank <= kMaxLoraRank,
                "settings.lora_rank={} is out of range [0, {}]", s.lora_rank, kMaxLoraRank);
  SCALEDL_CHECK(s.lora_rank == 0 || s.backward,
                "settings.lora_rank={}: LoRA is fine-tuning; mode inference trains nothing (drop the LoRA "
                "settings or use mode train)",
                s.lora_rank);
  SCALEDL_CHECK(s.lora_rank > 0 || s.lora_targets == 0, "settings.lora_targets={} without lora_rank",
                lora_targets_string(s));
  SCALEDL_CHECK(s.sequence_shards >= 1 && s.sequence_shards <= (int64_t{1} << 20),
                "settings.sequence_shards={} is out of range [1, 2^20]", s.sequence_shards);
  SCALEDL_CHECK(s.sequence_shards == 1 || (m.arch != Arch::EncoderDecoder && m.arch != Arch::VisionEncoder),
                "settings.sequence_shards={}: sequence parallelism of {} is not modelled (a decoder or "
                "encoder over tokens)",
                s.sequence_shards, m.name);
  SCALEDL_CHECK(s.sequence_shards == 1 || m.num_experts == 0,
                "settings.sequence_shards={}: sequence parallelism of the mixture of experts of {} is not "
                "modelled",
                s.sequence_shards, m.name);
  SCALEDL_CHECK(
      s.backward || !s.optimizer_step,
      "settings: backward=false (inference) with optimizer_step=true: an optimizer step needs gradients");
  if (m.arch == Arch::VisionEncoder) {
    int64_t img = s.image_size > 0 ? s.image_size : m.image_size;
    SCALEDL_CHECK(img >= m.patch_size && img <= kMaxImage && img % m.patch_size == 0,
                  "settings.image_size={} is not a multiple of {}.patch_size={}", img, m.name, m.patch_size);
  } else {
    // image_size is ignored for text models (a plan may set it for every model), as seq_len is for vision.
    if (m.context_len > 0)
      SCALEDL_CHECK(s.seq_len <= m.context_len,
                    "settings.seq_len={} exceeds {}.max_position_embeddings={} (the model's position table)",
                    s.seq_len, m.name, m.context_len);
  }
  int64_t sq = tokens_per_sample(m, s);
  int64_t sd = decoder_tokens_per_sample(m, s);
  int64_t longest = std::max(sq, sd);
  SCALEDL_CHECK(s.batch * longest <= kMaxTokens,
                "settings.batch={} x {} tokens per sample exceeds 2^32 tokens per iteration", s.batch,
                longest);
  double scores = double(s.batch) * double(m.num_heads) * double(longest) * double(longest);
  SCALEDL_CHECK(scores < double(kMaxScores),
                "settings.batch={} with seq_len={} gives {:.3g} attention scores (limit 2^40); "
                "reduce batch or seq_len",
                s.batch, longest, scores);
}

int64_t parameter_count(const ModelSpec& m) {
  const int64_t h = m.hidden, f = m.ffn_dim;
  const int64_t q_out = m.num_heads * m.head_dim, kv_out = m.num_kv_heads * m.head_dim;
  const int64_t norm = m.norm == NormKind::LayerNorm ? 2 * h : h;
  auto linear = [](int64_t din, int64_t dout, bool bias) { return din * dout + (bias ? dout : 0); };
  // One attention: q, k, v, o projections (ScaleDL eq. 9 params per Linear).
  // q/k norms: per head (Qwen3) or over the whole projections (OLMo 2); Llama 4's L2 norm has no weight.
  const int64_t qk_norm = !m.qk_norm || m.qk_norm_weightless ? 0
                          : m.qk_norm_whole                  ? q_out + kv_out
                                                             : 2 * m.head_dim;
  int64_t attn = linear(h, q_out, m.qkv_bias) + 2 * linear(h, kv_out, m.qkv_bias) +
                 linear(q_out, h, m.out_bias) + qk_norm;
  if (m.mla()) {  // DeepSeek: q_a (bias), q_a_norm, q_b or q_proj; kv_a (bias), kv_a_norm, kv_b; o (bias)
    const int64_t ql = m.q_lora_rank, kl = m.kv_lora_rank, vd = m.value_head_dim();
    const int64_t nope = m.head_dim - m.qk_rope_dim;
    attn = (ql > 0 ? linear(h, ql, m.qkv_bias) + ql + ql * q_out : h * q_out) +
           linear(h, kl + m.qk_rope_dim, m.qkv_bias) + kl + kl * m.num_heads * (nope + vd) +
           linear(m.num_heads * vd, h, m.out_bias);
  }
  if (m.attn_sinks) attn += m.num_heads;  // gpt-oss: one sink logit per head
  auto ffn_of = [&](int64_t w) {
    return linear(h, w, m.linear_bias) * (m.gated_ffn ? 2 : 1) + linear(w, h, m.linear_bias);
  };
  const int64_t ffn = ffn_of(f), dense_ffn = ffn_of(m.dense_ffn());
  int64_t p = 0;
  if (m.arch == Arch::VisionEncoder) {
    const int64_t side = m.image_size / m.patch_size;
    p += linear(m.num_channels * m.patch_size * m.patch_size, h, true);  // patch Conv2d
    p += m.num_special_tokens * h;                                       // [CLS] (+ distillation)
    p += (side * side + m.num_special_tokens) * h;                       // position table
  } else {
    p += m.vocab_size * m.embed_dim;  // token embedding
    p += (m.max_positions > 0 ? m.max_positions + m.position_offset : 0) * h;
    p += m.type_vocab_size * h;
    if (m.embed_dim != h) p += 2 * linear(m.embed_dim, h, false);  // OPT project_in / project_out
  }
  if (m.family == Family::Bert) p += 2 * h;  // embeddings LayerNorm
  p += m.num_layers * ((m.sandwich_norm ? 4 : 2) * norm + attn + dense_ffn);
  if (m.num_experts > 0) {  // a sparse FFN: num_experts FFNs + the router instead of one FFN
    // The shared expert: a gated FFN of shared_expert_ffn, with (Qwen2-MoE) its sigmoid gate Linear(h, 1).
    const int64_t shared =
        m.shared_expert_ffn > 0 ? 3 * h * m.shared_expert_ffn + (m.plain_shared_expert ? 0 : h) : 0;
    const int64_t moe = m.num_experts / std::max<int64_t>(1, m.expert_shards) * ffn +
                        linear(h, m.num_experts, m.router_bias) + shared;
    p += sparse_layer_count(m, false) * (moe - dense_ffn) + sparse_layer_count(m, true) * (moe - ffn);
  }
  if (m.arch == Arch::EncoderDecoder) {
    p += m.num_decoder_layers * (3 * norm + 2 * attn + ffn);  // self + cross attention
    p += 2 * m.rel_attn_buckets * m.num_heads;                // relative bias per stack
    p += norm;                                                // encoder final norm
  }
  if (m.final_norm) p += norm;
  if (m.pooler) p += linear(h, h, true);
  if (m.num_labels > 0) p += linear(h, m.num_labels, true) * (m.dist_head ? 2 : 1);
  if (m.lm_head) {
    if (m.family == Family::Bert) p += linear(h, h, true) + 2 * h + m.vocab_size;  // MLM transform + bias
    if (!m.tie_word_embeddings) p += m.vocab_size * m.embed_dim;
  }
  return p;
}

namespace {
/// Parameters of one expert (an FFN of ffn_dim).
int64_t expert_size(const ModelSpec& m) {
  const int64_t h = m.hidden, f = m.ffn_dim, bias = m.linear_bias ? 1 : 0;
  return (h * f + bias * f) * (m.gated_ffn ? 2 : 1) + f * h + bias * h;
}
}  // namespace

int64_t active_parameter_count(const ModelSpec& m) {
  if (m.num_experts <= 0) return parameter_count(m);
  ModelSpec whole = m;
  whole.expert_shards = 1;
  const int64_t sparse = sparse_layer_count(m, false) + sparse_layer_count(m, true);
  return parameter_count(whole) - sparse * (m.num_experts - m.moe_top_k) * expert_size(m);
}

int64_t expert_parameter_count(const ModelSpec& m) {
  if (m.num_experts <= 0) return 0;
  const int64_t sparse = sparse_layer_count(m, false) + sparse_layer_count(m, true);
  return sparse * (m.num_experts / std::max<int64_t>(1, m.expert_shards)) * expert_size(m);
}

nlohmann::json ModelSpec::to_json() const {
  nlohmann::json j = {{"name", name},
                      {"family", to_string(family)},
                      {"arch", to_string(arch)},
                      {"hf_class", hf_class},
                      {"hidden", hidden},
                      {"num_layers", num_layers},
                      {"num_decoder_layers", num_decoder_layers},
                      {"num_heads", num_heads},
                      {"num_kv_heads", num_kv_heads},
                      {"head_dim", head_dim},
                      {"ffn_dim", ffn_dim},
                      {"vocab_size", vocab_size},
                      {"embed_dim", embed_dim},
                      {"max_positions", max_positions},
                      {"position_offset", position_offset},
                      {"context_len", context_len},
                      {"type_vocab_size", type_vocab_size},
                      {"rel_attn_buckets", rel_attn_buckets},
                      {"image_size", image_size},
                      {"patch_size", patch_size},
                      {"num_channels", num_channels},
                      {"num_labels", num_labels},
                      {"num_special_tokens", num_special_tokens},
                      {"activation", to_string(activation)},
                      {"norm", to_string(norm)},
                      {"gated_ffn", gated_ffn},
                      {"linear_bias", linear_bias},
                      {"qkv_bias", qkv_bias},
                      {"out_bias", out_bias},
                      {"tie_word_embeddings", tie_word_embeddings},
                      {"pooler", pooler},
                      {"pre_norm", pre_norm},
                      {"final_norm", final_norm},
                      {"lm_head", lm_head},
                      {"dist_head", dist_head},
                      {"dropout", dropout},
                      {"attn_dropout", attn_dropout},
                      {"embed_dropout", embed_dropout},
                      {"act_dropout", act_dropout},
                      {"params", parameter_count(*this)}};
  // Only MoE models carry the expert fields, so dense models' stored JSON (and run keys) are unchanged.
  if (num_experts > 0) {
    j["num_experts"] = num_experts;
    j["encoder_sparse_step"] = encoder_sparse_step;
    j["decoder_sparse_step"] = decoder_sparse_step;
    j["expert_capacity"] = expert_capacity;
    j["capacity_factor"] = capacity_factor;
    j["router_bias"] = router_bias;
    if (moe_top_k != 1) j["moe_top_k"] = moe_top_k;  // top-1 (Switch) runs keep their keys
    if (shared_expert_ffn > 0) j["shared_expert_ffn"] = shared_expert_ffn;
  }
  if (embed_scale) j["embed_scale"] = true;
  if (qk_norm) j["qk_norm"] = true;
  if (fused_qkv) j["fused_qkv"] = true;
  if (fused_gate_up) j["fused_gate_up"] = true;
  if (sandwich_norm) j["sandwich_norm"] = true;
  if (parallel_residual) j["parallel_residual"] = true;
  if (kv_lora_rank > 0) {  // DeepSeek's latent attention
    j["kv_lora_rank"] = kv_lora_rank;
    j["q_lora_rank"] = q_lora_rank;
    j["qk_rope_dim"] = qk_rope_dim;
  }
  if (v_head_dim > 0) j["v_head_dim"] = v_head_dim;
  if (rotary_dim > 0) j["rotary_dim"] = rotary_dim;
  if (nope_interval > 0) j["nope_interval"] = nope_interval;
  if (first_dense_layers > 0) j["first_dense_layers"] = first_dense_layers;
  if (dense_ffn_dim > 0) j["dense_ffn_dim"] = dense_ffn_dim;
  if (plain_shared_expert) j["plain_shared_expert"] = true;
  if (expert_shards > 1) j["expert_shards"] = expert_shards;
  if (attn_sinks) j["attn_sinks"] = true;
  if (clamped_glu) j["clamped_glu"] = true;
  if (dense_expert_inference) j["dense_expert_inference"] = true;
  if (attn_softcap > 0) j["attn_softcap"] = attn_softcap;
  if (final_softcap > 0) j["final_softcap"] = final_softcap;
  if (post_norm_only) j["post_norm_only"] = true;
  if (qk_norm_whole) j["qk_norm_whole"] = true;
  if (qk_norm_weightless) j["qk_norm_weightless"] = true;
  if (residual_scale) j["residual_scale"] = true;
  if (logits_scale) j["logits_scale"] = true;
  return j;
}

int64_t ModelSpec::rotary_dims() const {
  if (family != Family::Llama) return 0;
  if (mla()) return qk_rope_dim;
  return rotary_dim > 0 ? rotary_dim : head_dim;
}

bool ModelSpec::rotates_layer(int64_t i) const {
  return rotary_dims() > 0 && (nope_interval <= 0 || (i + 1) % nope_interval != 0);
}

bool is_sparse_layer(const ModelSpec& m, bool decoder, int64_t i) {
  if (m.num_experts <= 0) return false;
  if (!decoder && i < m.first_dense_layers) return false;  // DeepSeek's dense first layers
  const int64_t step = decoder ? m.decoder_sparse_step : m.encoder_sparse_step;
  if (step <= 0) return false;
  return step == 1 || i % step == 1;  // HF SwitchTransformersStack
}

int64_t sparse_layer_count(const ModelSpec& m, bool decoder) {
  const int64_t n = decoder ? (m.arch == Arch::EncoderDecoder ? m.num_decoder_layers : 0) : m.num_layers;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) k += is_sparse_layer(m, decoder, i) ? 1 : 0;
  return k;
}

int64_t expert_capacity_per_sample(const ModelSpec& m, int64_t seq) {
  if (m.num_experts <= 0) return 0;
  if (m.expert_capacity > 0) return std::min(m.expert_capacity, seq);
  const double c = std::ceil(m.capacity_factor * static_cast<double>(m.moe_top_k) * static_cast<double>(seq) /
                             static_cast<double>(m.num_experts));
  return std::max<int64_t>(1, std::min<int64_t>(seq, static_cast<int64_t>(c)));
}

bool every_expert_runs(const ModelSpec& m, bool inference) {
  return m.dense_expert_inference && inference;
}

int64_t expert_slots_per_sample(const ModelSpec& m, int64_t seq, bool inference) {
  return every_expert_runs(m, inference) ? seq : expert_capacity_per_sample(m, seq);
}

nlohmann::json TrainSettings::to_json() const {
  nlohmann::json j = {{"batch", batch},
                      {"seq_len", seq_len},
                      {"tgt_len", tgt_len},
                      {"image_size", image_size},
                      {"dtype", to_string(dtype)},
                      {"optimizer", to_string(optimizer)},
                      {"optimizer_step", optimizer_step},
                      {"num_devices", num_devices}};
  if (!backward) j["backward"] = false;  // only then: keys of earlier runs stay as they were
  if (fused_kernels) j["fused_kernels"] = true;
  if (attention != AttentionImpl::Eager) j["attention"] = to_string(attention);
  if (fp8) j["fp8"] = true;
  if (amp) j["amp"] = true;
  if (fused_optimizer) j["fused_optimizer"] = true;
  if (rotary_kernels) j["rotary_kernels"] = true;
  if (vocab_multiple > 0) j["vocab_multiple"] = vocab_multiple;
  if (lora_rank > 0) {
    j["lora_rank"] = lora_rank;
    j["lora_targets"] = lora_targets_string(*this);
  }
  if (sequence_shards > 1) j["sequence_shards"] = sequence_shards;
  return j;
}

double training_memory_bytes(const ModelSpec& m, const TrainSettings& s) {
  const double e = dtype_bytes(s.dtype);
  const double P = static_cast<double>(parameter_count(m));
  const double state = s.optimizer == OptimizerKind::SGD ? 0 : 8;
  double seq = static_cast<double>(s.seq_len);
  if (m.patch_size > 0) {
    const double img = static_cast<double>(s.image_size > 0 ? s.image_size : m.image_size);
    seq = (img / m.patch_size) * (img / m.patch_size) + m.num_special_tokens;
  }
  const double b = static_cast<double>(s.batch), h = static_cast<double>(m.hidden),
               a = static_cast<double>(m.num_heads);
  const double layers = static_cast<double>(m.num_layers + m.num_decoder_layers);
  const double act = layers * seq * b * h * (34 + 5 * a * seq / h) * e / 2;
  const double logits = 2 * b * seq * static_cast<double>(m.vocab_size) * e;
  return P * (2 * e + state) + act + logits;
}

}  // namespace scaledl
