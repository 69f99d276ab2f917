// Mixture-of-experts FFN of Switch Transformers (Fedus et al. 2021), Mixtral
// (Jiang et al. 2024), Qwen-MoE and DeepSeek-V2/V3 (shared experts), as the layer graph models it
// (src/ir/layer_graph.cpp, Forward::moe): a router Linear(hidden, experts), a float32 softmax with the top-k
// choice (k = 1 for Switch; Mixtral renormalises its k weights) and a capacity of C = batch x
// capacity-per-sample slots per expert, dispatch of the kept (token, expert) pairs into per-expert buffers,
// the experts as batched matmuls over weights [E, h, f] and [E, f, h] (gated experts also [E, h, f] for the
// gate), and the combine. Switch: tokens beyond an expert's capacity skip it and pass through, scaled by
// their router probability, as in Hugging Face's SwitchTransformersSparseMLP. Mixtral: the capacity is the
// experts' mean load, k x tokens / experts, and a pair beyond it adds nothing (Hugging Face's
// MixtralSparseMoeBlock is dropless: each expert takes what it is routed). Both
// run their experts one by one in a Python loop; here they run as one bmm, the
// form fast implementations use.
#include "bench/zoo_blocks.hpp"

namespace scaledl::zoo_detail {

SparseFfnImpl::SparseFfnImpl(int64_t hidden, int64_t ffn_dim, const ModelSpec& m, Activation act_,
                             double act_dropout_)
    : experts(m.num_experts), act(act_), act_dropout(act_dropout_), spec(m) {
  router = register_module("router",
                           torch::nn::Linear(torch::nn::LinearOptions(hidden, experts).bias(m.router_bias)));
  const bool fused = m.gated_ffn && m.fused_gate_up;  // gpt-oss: gate_up_proj [E, h, 2f]
  wi = register_parameter("wi", torch::empty({experts, hidden, fused ? 2 * ffn_dim : ffn_dim}));
  if (m.gated_ffn && !fused) wg = register_parameter("wg", torch::empty({experts, hidden, ffn_dim}));
  if (m.linear_bias) {  // gpt-oss: gate_up_proj_bias, down_proj_bias
    bi = register_parameter("bi", torch::zeros({experts, wi.size(2)}));
    bo = register_parameter("bo", torch::zeros({experts, hidden}));
  }
  if (m.shared_expert_ffn >
      0) {  // Qwen2MoeSparseMoeBlock: shared_expert, shared_expert_gate; DeepSeek: shared_experts
    shared = register_module("shared", Ffn(hidden, m.shared_expert_ffn, m.gated_ffn, m.linear_bias, act_,
                                           act_dropout_, m.fused_gate_up));  // the model's FFN, its own width
    if (!m.plain_shared_expert)
      shared_router = register_module("shared_router",
                                      torch::nn::Linear(torch::nn::LinearOptions(hidden, 1).bias(false)));
  }
  wo = register_parameter("wo", torch::empty({experts, ffn_dim, hidden}));
}

Tensor SparseFfnImpl::forward(const Tensor& x, const std::string& pre, NodeProbe* probe) {
  const int64_t B = x.size(0), S = x.size(1), h = x.size(2), E = experts, K = spec.moe_top_k;
  // gpt-oss in eval mode runs every expert on every token (GptOssExperts' batched path).
  const bool every = every_expert_runs(spec, !is_training());
  const int64_t cap = expert_slots_per_sample(spec, S, !is_training());
  const int64_t C = B * cap;  // token slots of one expert in this batch
  auto logits = node(probe, pre + "router", [&] { return router(x); });
  // weight: router weight of each kept (token, expert) pair; tok: its token row; dst: its slot
  Tensor weight, tok, dst, pmax;  // pmax (top-1): the chosen expert's probability of every token
  auto probs = node(probe, pre + "router.softmax", [&] {
    auto p = torch::softmax(logits.to(torch::kFloat32), -1);  // HF router_dtype float32
    // top-1 as max (Switch's kernels, as before top-k existed), else topk
    auto top = K == 1 ? p.max(-1, true) : p.topk(K, -1);
    auto w = std::get<0>(top);
    if (K > 1) w = w / w.sum(-1, true);               // Mixtral renormalises its k weights
    auto idx = std::get<1>(top).reshape({B, S * K});  // pairs in token order
    auto onehot = torch::one_hot(idx, E);             // [B, S*K, E]
    auto prio = onehot.cumsum(1).gather(2, idx.unsqueeze(-1)).squeeze(-1);  // 1-based place in its expert
    auto keep = (prio <= cap).reshape({B * S * K});
    auto sample = torch::arange(B, idx.options()).unsqueeze(1);
    auto slot = (idx * C + sample * cap + prio - 1).reshape({B * S * K});
    auto rows = keep.nonzero().squeeze(-1);
    dst = slot.index_select(0, rows);
    tok = K > 1 ? torch::floor_divide(rows, K) : rows;
    if (every)  // every expert's weight of every token: the chosen k's, 0 elsewhere
      weight = torch::zeros({B * S, E}, w.options())
                   .scatter(1, std::get<1>(top).reshape({B * S, K}), w.reshape({B * S, K}));
    else if (K == 1)
      pmax = w.reshape({B * S});
    else
      weight = w.reshape({B * S * K}).index_select(0, rows);
    return p;
  });
  (void)probs;
  auto flat = x.reshape({B * S, h});
  auto buf = node(probe, pre + "dispatch", [&] {
    if (every) return flat.repeat({E, 1}).view({E, C, h});
    return torch::zeros({E * C, h}, x.options())
        .index_copy(0, dst, flat.index_select(0, tok))
        .view({E, C, h});
  });
  Tensor a;
  if (spec.gated_ffn && spec.fused_gate_up) {  // gpt-oss: gate, up interleaved in gate_up_proj's columns
    auto gu = node(probe, pre + "expert.gate_up", [&] { return torch::bmm(buf, wi); });
    if (bi.defined()) gu = node(probe, pre + "expert.gate_up_bias", [&] { return gu + bi.unsqueeze(1); });
    const int64_t f2 = gu.size(2);
    auto gate = gu.slice(-1, 0, f2, 2), up = gu.slice(-1, 1, f2, 2);
    if (spec.clamped_glu) {  // limit 7, alpha 1.702, as GptOssExperts
      auto g = node(probe, pre + "expert.gate_clamp", [&] { return gate.clamp_max(7.0); });
      auto u = node(probe, pre + "expert.up_clamp", [&] { return up.clamp(-7.0, 7.0); });
      auto sg = node(probe, pre + "expert.act_scale", [&] { return g * 1.702; });
      sg = node(probe, pre + "expert.act_sigmoid", [&] { return torch::sigmoid(sg); });
      auto glu = node(probe, pre + "expert.act", [&] { return g * sg; });
      u = node(probe, pre + "expert.up_add", [&] { return u + 1.0; });
      a = node(probe, pre + "expert.mul", [&] { return glu * u; });
    } else {
      auto ga = activation_node(probe, pre + "expert.act", gate, act);
      a = node(probe, pre + "expert.mul", [&] { return ga * up; });
    }
  } else if (wg.defined()) {
    auto g = node(probe, pre + "expert.gate", [&] { return torch::bmm(buf, wg); });
    auto up = node(probe, pre + "expert.up", [&] { return torch::bmm(buf, wi); });
    auto ga = activation_node(probe, pre + "expert.act", g, act);
    a = node(probe, pre + "expert.mul", [&] { return ga * up; });
  } else {
    auto up = node(probe, pre + "expert.up", [&] { return torch::bmm(buf, wi); });
    a = activation_node(probe, pre + "expert.act", up, act);
  }
  a = dropout_node(probe, pre + "expert.act_dropout", a, act_dropout, is_training());
  auto down = node(probe, pre + "expert.down", [&] { return torch::bmm(a, wo); });
  if (bo.defined()) down = node(probe, pre + "expert.down_bias", [&] { return down + bo.unsqueeze(1); });
  auto out = node(probe, pre + "combine", [&] {
    if (every)  // [E, t, h] weighted by each token's routing weight of that expert (0 if not chosen), summed
      return (down * weight.t().unsqueeze(-1).to(x.scalar_type())).sum(0).view({B, S, h});
    auto out_rows = down.reshape({E * C, h}).index_select(0, dst);
    if (K == 1) {  // Switch: dropped tokens keep their input
      auto next = flat.index_copy(0, tok, out_rows);
      return (next * pmax.unsqueeze(1).to(x.scalar_type())).view({B, S, h});
    }
    auto scaled = out_rows * weight.unsqueeze(1).to(x.scalar_type());
    return torch::zeros_like(flat).index_add(0, tok, scaled).view({B, S, h});
  });
  if (shared.is_empty()) return out;
  // Every token also takes the shared expert: DeepSeek adds it as it is, Qwen2-MoE scales it by
  // sigmoid(shared_expert_gate(x)).
  auto sd = shared(x, pre + "shared.", probe);
  if (shared_router.is_empty()) return node(probe, pre + "shared.add", [&] { return out + sd; });
  auto sg = node(probe, pre + "shared.router", [&] { return shared_router(x); });
  auto sig = node(probe, pre + "shared.sigmoid", [&] { return torch::sigmoid(sg); });
  auto sc = node(probe, pre + "shared.scale", [&] { return sd * sig; });
  return node(probe, pre + "shared.add", [&] { return out + sc; });
}

}  // namespace scaledl::zoo_detail
