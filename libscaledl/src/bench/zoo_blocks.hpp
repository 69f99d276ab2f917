#pragma once
// Building blocks shared by the zoo families (private to src/bench).
//
// Shapes: activations are [batch, seq, hidden] unless noted; attention scores
// [batch, heads, seq_q, seq_k]. Every forward op that is a node of the layer
// graph runs through node(probe, name, op) so that an instrumented run can time
// it; with probe == nullptr it is a plain call.
#include <functional>
#include <string>

#include <torch/torch.h>

#include "bench/zoo.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl::zoo_detail {

using torch::Tensor;

/// Runs `op` as layer node `name` (timed when probe is set).
inline Tensor node(NodeProbe* probe, const std::string& name, const std::function<Tensor()>& op) {
  return probe ? probe->run(name, op) : op();
}

/// Dropout node; absent (identity, no node) when p == 0, as in the layer graph.
Tensor dropout_node(NodeProbe* probe, const std::string& name, const Tensor& x, double p, bool training);

/// Elementwise activation of the FFN.
Tensor activate(const Tensor& x, Activation a);
/// The activation as layer node(s) `name`: one node, or for gelu_new the eight eager kernels of
/// Hugging Face's NewGELUActivation as the nodes of the layer graph (name.half, .pow, .mul_c,
/// .add_x, .mul_k, .tanh, .add_1, and the product as `name`).
Tensor activation_node(NodeProbe* probe, const std::string& name, const Tensor& x, Activation a);

/// Gemma 2's soft-capping cap x tanh(x / cap) as eager PyTorch runs it, three nodes
/// `<name>_div`, `_tanh`, `_mul` (as Forward::softcap in the layer graph).
Tensor softcap_node(NodeProbe* probe, const std::string& name, const Tensor& x, double cap);

/// LayerNorm (weight + bias) or RMSNorm (weight only, T5/Llama) over the last dim.
struct NormImpl : torch::nn::Module {
  NormImpl(int64_t hidden, NormKind kind, double eps);
  Tensor forward(const Tensor& x);
  int64_t hidden;
  NormKind kind;
  double eps;
  Tensor weight, bias;
};
TORCH_MODULE(Norm);

/// Rotary position tables for RoPE (Llama): cos/sin [seq, 1, head_dim].
struct Rope {
  Tensor cos, sin;
  bool defined() const { return cos.defined(); }
};
Rope make_rope(int64_t seq, int64_t head_dim, torch::Device device, torch::Dtype dtype,
               double theta = 10000.0);
/// Applies RoPE to [batch, seq, heads*head_dim] (rotate-half form).
Tensor apply_rope(const Tensor& x, const Rope& rope, int64_t head_dim);

struct AttnOptions {
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool fused_qkv = false;     ///< GPT-2 c_attn, Phi-3 qkv_proj: one projection, node "qkv" (RoPE inside it)
  bool qkv_bias = true;       ///< biases on q/k/v (or qkv)
  bool out_bias = true;       ///< bias on o
  bool scale = true;          ///< scores / sqrt(head_dim) (T5: no scaling)
  bool causal = false;        ///< mask future positions (decoders)
  bool padding_mask = false;  ///< add an additive padding mask [B, 1, 1, Sk] (BERT, as HF builds one)
  bool qk_norm = false;       ///< Qwen3: RMSNorm over each head of q and k (nodes q_norm, k_norm)
  double softcap = 0;         ///< Gemma 2: scores = cap x tanh(scores / cap) (nodes softcap_div, _tanh, _mul)
  double dropout = 0;         ///< attention-probability dropout
  // DeepSeek's multi-head latent attention (kv_lora_rank > 0): head_dim = qk_nope + qk_rope.
  int64_t kv_lora_rank = 0;  ///< nodes kv_a, kv_a_norm, kv_b, q_cat, k_cat
  int64_t q_lora_rank = 0;   ///< nodes q_a, q_a_norm, q_b (0: q)
  int64_t rope_dim = 0;      ///< rotary part of each q/k head
  int64_t v_head_dim = 0;    ///< per-head size of v; 0 = head_dim
  bool sinks = false;  ///< gpt-oss: a learned sink logit per head (nodes sinks_cat, sinks_max, sinks_sub)
};

/// Multi-head attention (self or cross) with grouped-query K/V, or DeepSeek's latent attention.
/// Nodes under `prefix` ("encoder.0.attn."): q, k, v (or qkv; or MLA's [q_a, q_a_norm, q_b | q], kv_a,
/// kv_a_norm, kv_b, q_cat, k_cat), [q_norm, k_norm], qk, [scale], [bias], [mask], softmax, dropout, av, o.
/// `bias` (optional) is added to the scores [1|B, H, Sq, Sk]. With MLA, `rope` is of rope_dim.
struct AttentionImpl : torch::nn::Module {
  explicit AttentionImpl(const AttnOptions& o);
  Tensor forward(const Tensor& x, const Tensor& kv_src, const std::string& prefix, NodeProbe* probe,
                 const Tensor& bias, const Rope& rope);
  AttnOptions opt;
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, qkv{nullptr}, o{nullptr};
  Norm q_norm{nullptr}, k_norm{nullptr};  ///< qk_norm: RMSNorm of head_dim
  torch::nn::Linear q_a{nullptr}, q_b{nullptr}, kv_a{nullptr}, kv_b{nullptr};  ///< MLA
  Norm q_a_norm{nullptr}, kv_a_norm{nullptr};                                  ///< MLA
  Tensor sinks;                                                                ///< gpt-oss: [heads]
 private:
  /// MLA: q [B, H, Sq, hd], k [B, H, Sk, hd], v [B, H, Sk, v_head_dim].
  void latent_qkv(const Tensor& x, const Tensor& src, const std::string& pre, NodeProbe* probe,
                  const Rope& rope, Tensor& q4, Tensor& k4, Tensor& v4);
};
TORCH_MODULE(Attention);

/// Position-wise FFN: up -> act -> down, or gated (SwiGLU): down(act(gate(x)) * up(x)).
/// Nodes under `prefix` ("encoder.0.ffn."): up, gate, act, mul, down.
struct FfnImpl : torch::nn::Module {
  FfnImpl(int64_t hidden, int64_t ffn_dim, bool gated, bool bias, Activation act, double act_dropout,
          bool fused_gate_up = false);
  Tensor forward(const Tensor& x, const std::string& prefix, NodeProbe* probe);
  bool gated;
  bool fused;  ///< Phi-3 gate_up_proj: gate and up as one [h, 2f] Linear, node "gate_up"
  Activation act;
  double act_dropout;
  torch::nn::Linear up{nullptr}, gate{nullptr}, down{nullptr}, gate_up{nullptr};
};
TORCH_MODULE(Ffn);

/// Mixture-of-experts FFN (Switch Transformers, Mixtral; src/bench/zoo_moe.cpp). Nodes
/// under `prefix`: router, router.softmax, dispatch, [expert.gate], expert.up, expert.act,
/// [expert.mul], expert.act_dropout, expert.down, combine, [shared.gate, shared.up, shared.act,
/// shared.mul, shared.down, shared.router, shared.sigmoid, shared.scale, shared.add] (as
/// Forward::moe in the layer graph).
struct SparseFfnImpl : torch::nn::Module {
  SparseFfnImpl(int64_t hidden, int64_t ffn_dim, const ModelSpec& m, Activation act, double act_dropout);
  Tensor forward(const Tensor& x, const std::string& prefix, NodeProbe* probe);
  int64_t experts;
  Activation act;
  double act_dropout;
  ModelSpec spec;  ///< capacity rule (expert_capacity_per_sample)
  torch::nn::Linear router{nullptr};
  Tensor wi, wo;  ///< [E, h, f], [E, f, h]
  Tensor
      wg;  ///< gated experts (Mixtral): [E, h, f]; undefined otherwise (gpt-oss: wi is the fused [E, h, 2f])
  Tensor bi, bo;        ///< gpt-oss's expert biases: [E, 2f], [E, h]; undefined otherwise
  Ffn shared{nullptr};  ///< the shared expert (Qwen2-MoE, DeepSeek; nodes "shared.*")
  torch::nn::Linear shared_router{
      nullptr};  ///< Qwen2-MoE: its sigmoid gate Linear(h, 1), node "shared.router"
};
TORCH_MODULE(SparseFfn);

struct BlockOptions {
  AttnOptions self;
  AttnOptions cross;       ///< used when has_cross
  bool has_cross = false;  ///< T5 decoder: cross-attention sub-layer
  int64_t ffn_dim = 0;
  bool gated = false;
  bool fused_gate_up = false;  ///< Phi-3: gate and up as one projection
  bool ffn_bias = true;
  double act_dropout = 0;  ///< dropout after the FFN activation (T5, OPT), node "ffn.act_dropout"
  Activation act = Activation::GELU;
  NormKind norm = NormKind::LayerNorm;
  double norm_eps = 1e-5;
  bool pre_norm = true;  ///< false: BERT post-norm (norm after the residual add)
  bool sandwich_norm =
      false;  ///< Gemma 2 / 3: also a norm after attention and after the FFN (node "post_norm")
  bool parallel_residual =
      false;           ///< GPT-NeoX: the FFN's norm reads the block input, not the attention's sum
  double dropout = 0;  ///< hidden dropout after attention and FFN
  const ModelSpec* moe = nullptr;  ///< set: this block's FFN is a mixture of experts (Switch)
};

/// One Transformer block; nodes under `prefix` ("decoder.2.").
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const BlockOptions& o);
  Tensor forward(const Tensor& x, const Tensor& enc_out, const std::string& prefix, NodeProbe* probe,
                 const Tensor& self_bias, const Tensor& cross_bias, const Rope& rope);
  BlockOptions opt;
  Norm attn_norm{nullptr}, cross_norm{nullptr}, ffn_norm{nullptr};
  Norm attn_post_norm{nullptr}, ffn_post_norm{nullptr};  ///< sandwich_norm
  Attention attn{nullptr}, cross{nullptr};
  Ffn ffn{nullptr};
  SparseFfn moe{nullptr};
};
TORCH_MODULE(Block);

/// Builds block options from the spec (self-attention only; callers set causal/cross).
BlockOptions block_options(const ModelSpec& m);

/// The encoder stack shared by BERT and ViT/DeiT: num_layers blocks (LayerNorm
/// eps 1e-12 as in HF BertLayer/ViTLayer), an optional final norm and an optional
/// pooler (dense + tanh on the first token). Submodules are registered on `owner`.
struct EncoderStack {
  std::vector<Block> blocks;
  Norm final_norm{nullptr};
  torch::nn::Linear pooler{nullptr};

  void build(torch::nn::Module& owner, const ModelSpec& m) {
    auto bo = block_options(m);
    bo.norm_eps = 1e-12;
    for (int64_t i = 0; i < m.num_layers; ++i)
      blocks.push_back(owner.register_module("block" + std::to_string(i), Block(bo)));
    if (m.final_norm) final_norm = owner.register_module("final_norm", Norm(m.hidden, m.norm, 1e-12));
    if (m.pooler) pooler = owner.register_module("pooler", torch::nn::Linear(m.hidden, m.hidden));
  }
  /// Blocks then final norm: nodes encoder.<i>.* and head.norm. x [B, T, d].
  Tensor forward(Tensor x, NodeProbe* probe) {
    for (size_t i = 0; i < blocks.size(); ++i)
      x = blocks[i]->forward(x, Tensor(), "encoder." + std::to_string(i) + ".", probe, Tensor(), Tensor(),
                             Rope{});
    if (!final_norm.is_empty()) x = node(probe, "head.norm", [&] { return final_norm(x); });
    return x;
  }
  /// Pooler on the first-token features h [B, d] (tanh folded into node head.pooler); h itself without one.
  Tensor pool(const Tensor& h, NodeProbe* probe) {
    if (pooler.is_empty()) return h;
    return node(probe, "head.pooler", [&] { return torch::tanh(pooler(h)); });
  }
};

/// Cross-entropy loss node "head.loss" over logits [N, C] (computed in FP32) and labels [N].
Tensor loss_node(NodeProbe* probe, const Tensor& logits, const Tensor& labels);

/// Family builders (one file each).
std::shared_ptr<ZooModel> build_bert(const ModelSpec& m, const TrainSettings& s);
std::shared_ptr<ZooModel> build_decoder(const ModelSpec& m, const TrainSettings& s);
std::shared_ptr<ZooModel> build_t5(const ModelSpec& m, const TrainSettings& s);
std::shared_ptr<ZooModel> build_vit(const ModelSpec& m, const TrainSettings& s);

}  // namespace scaledl::zoo_detail
