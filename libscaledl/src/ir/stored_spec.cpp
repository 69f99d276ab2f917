// Re-reading ModelSpec::to_json() from the store (declared in model_spec.hpp).
// In the ir stage because both graph training (gnn) and the in-model layer
// samples (learn) rebuild a stored model run's layer graph; the field list
// mirrors ModelSpec::to_json() in model_spec.cpp.
#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {
namespace {

template <typename E>
E parse_enum(const nlohmann::json& j, const std::string& key, const std::string& ctx, int count) {
  SCALEDL_CHECK(j.contains(key) && j[key].is_string(), "{}.{} is missing or not a string", ctx, key);
  const std::string v = j[key].get<std::string>();
  for (int i = 0; i < count; ++i)
    if (v == to_string(static_cast<E>(i))) return static_cast<E>(i);
  fail("{}.{}={} is not a known value", ctx, key, v);
}

int64_t req_int(const nlohmann::json& j, const std::string& key, const std::string& ctx) {
  return get_int(j, key, ctx, 0, int64_t(1) << 40);
}

bool req_bool(const nlohmann::json& j, const std::string& key, const std::string& ctx) {
  SCALEDL_CHECK(j.contains(key) && j[key].is_boolean(), "{}.{} is missing or not a boolean", ctx, key);
  return j[key].get<bool>();
}

}  // namespace

ModelSpec model_spec_from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a ModelSpec object, got {}", ctx, show(j));
  ModelSpec m;
  m.name = get_str_or(j, "name", ctx, "");
  m.family = parse_enum<Family>(j, "family", ctx, kFamilyCount);
  m.arch = parse_enum<Arch>(j, "arch", ctx, 4);
  m.hf_class = get_str_or(j, "hf_class", ctx, "");
  m.hidden = req_int(j, "hidden", ctx);
  m.num_layers = req_int(j, "num_layers", ctx);
  m.num_decoder_layers = req_int(j, "num_decoder_layers", ctx);
  m.num_heads = req_int(j, "num_heads", ctx);
  m.num_kv_heads = req_int(j, "num_kv_heads", ctx);
  m.head_dim = req_int(j, "head_dim", ctx);
  m.ffn_dim = req_int(j, "ffn_dim", ctx);
  m.vocab_size = req_int(j, "vocab_size", ctx);
  m.embed_dim = req_int(j, "embed_dim", ctx);
  m.max_positions = req_int(j, "max_positions", ctx);
  m.position_offset = req_int(j, "position_offset", ctx);
  m.context_len = req_int(j, "context_len", ctx);
  m.type_vocab_size = req_int(j, "type_vocab_size", ctx);
  m.rel_attn_buckets = req_int(j, "rel_attn_buckets", ctx);
  m.image_size = req_int(j, "image_size", ctx);
  m.patch_size = req_int(j, "patch_size", ctx);
  m.num_channels = req_int(j, "num_channels", ctx);
  m.num_labels = req_int(j, "num_labels", ctx);
  m.num_special_tokens = req_int(j, "num_special_tokens", ctx);
  m.activation = parse_enum<Activation>(j, "activation", ctx, kActivationCount);
  m.norm = parse_enum<NormKind>(j, "norm", ctx, 2);
  m.gated_ffn = req_bool(j, "gated_ffn", ctx);
  m.linear_bias = req_bool(j, "linear_bias", ctx);
  m.qkv_bias = req_bool(j, "qkv_bias", ctx);
  m.out_bias = req_bool(j, "out_bias", ctx);
  m.tie_word_embeddings = req_bool(j, "tie_word_embeddings", ctx);
  m.pooler = req_bool(j, "pooler", ctx);
  m.pre_norm = req_bool(j, "pre_norm", ctx);
  m.final_norm = req_bool(j, "final_norm", ctx);
  m.lm_head = req_bool(j, "lm_head", ctx);
  m.dist_head = req_bool(j, "dist_head", ctx);
  m.dropout = get_num_or(j, "dropout", ctx, 0, 1, m.dropout);
  m.attn_dropout = get_num_or(j, "attn_dropout", ctx, 0, 1, m.attn_dropout);
  m.embed_dropout = get_num_or(j, "embed_dropout", ctx, 0, 1, m.embed_dropout);
  m.act_dropout = get_num_or(j, "act_dropout", ctx, 0, 1, m.act_dropout);
  // Experts: present only for MoE models (to_json omits them for dense ones).
  if (j.contains("num_experts")) {
    m.num_experts = req_int(j, "num_experts", ctx);
    m.encoder_sparse_step = req_int(j, "encoder_sparse_step", ctx);
    m.decoder_sparse_step = req_int(j, "decoder_sparse_step", ctx);
    m.expert_capacity = req_int(j, "expert_capacity", ctx);
    m.capacity_factor = get_num_or(j, "capacity_factor", ctx, 0, 1e3, m.capacity_factor);
    m.router_bias = req_bool(j, "router_bias", ctx);
    if (j.contains("moe_top_k")) m.moe_top_k = req_int(j, "moe_top_k", ctx);
    if (j.contains("shared_expert_ffn")) m.shared_expert_ffn = req_int(j, "shared_expert_ffn", ctx);
  }
  if (j.contains("embed_scale")) m.embed_scale = req_bool(j, "embed_scale", ctx);
  if (j.contains("qk_norm")) m.qk_norm = req_bool(j, "qk_norm", ctx);
  if (j.contains("fused_qkv")) m.fused_qkv = req_bool(j, "fused_qkv", ctx);
  if (j.contains("fused_gate_up")) m.fused_gate_up = req_bool(j, "fused_gate_up", ctx);
  if (j.contains("sandwich_norm")) m.sandwich_norm = req_bool(j, "sandwich_norm", ctx);
  if (j.contains("parallel_residual")) m.parallel_residual = req_bool(j, "parallel_residual", ctx);
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"kv_lora_rank", &m.kv_lora_rank},
                            {"q_lora_rank", &m.q_lora_rank},
                            {"qk_rope_dim", &m.qk_rope_dim},
                            {"rotary_dim", &m.rotary_dim},
                            {"nope_interval", &m.nope_interval},
                            {"v_head_dim", &m.v_head_dim},
                            {"first_dense_layers", &m.first_dense_layers},
                            {"dense_ffn_dim", &m.dense_ffn_dim},
                            {"expert_shards", &m.expert_shards}})
    if (j.contains(key)) *field = req_int(j, key, ctx);
  for (auto [key, field] : {std::pair<const char*, bool*>{"plain_shared_expert", &m.plain_shared_expert},
                            {"attn_sinks", &m.attn_sinks},
                            {"clamped_glu", &m.clamped_glu},
                            {"dense_expert_inference", &m.dense_expert_inference},
                            {"post_norm_only", &m.post_norm_only},
                            {"qk_norm_whole", &m.qk_norm_whole},
                            {"qk_norm_weightless", &m.qk_norm_weightless},
                            {"residual_scale", &m.residual_scale},
                            {"logits_scale", &m.logits_scale}})
    if (j.contains(key)) *field = req_bool(j, key, ctx);
  m.attn_softcap = get_num_or(j, "attn_softcap", ctx, 0, 1e6, 0.0);
  m.final_softcap = get_num_or(j, "final_softcap", ctx, 0, 1e6, 0.0);
  validate_model_spec(m, ctx);
  return m;
}

}  // namespace scaledl
