// Mixture-of-experts FFN of Switch Transformers (Fedus et al. 2021), as the
// layer graph models it (src/ir/layer_graph.cpp, Forward::moe): a router
// Linear(hidden, experts), a float32 softmax with top-1 choice and a capacity
// of C = batch x capacity-per-sample token slots per expert, dispatch of the
// kept tokens into per-expert buffers, the experts as batched matmuls over
// weights [E, h, f] and [E, f, h], and the combine. Tokens beyond an expert's
// capacity skip it and pass through, scaled by their router probability, as in
// Hugging Face's SwitchTransformersSparseMLP (whose experts run one by one in a
// Python loop; here they run as one bmm, the form fast implementations use).
#include "bench/zoo_blocks.hpp"

namespace scaledl::zoo_detail {

SparseFfnImpl::SparseFfnImpl(int64_t hidden, int64_t ffn_dim, const ModelSpec& m, Activation act_,
                             double act_dropout_)
    : experts(m.num_experts), act(act_), act_dropout(act_dropout_), spec(m) {
  router = register_module("router",
                           torch::nn::Linear(torch::nn::LinearOptions(hidden, experts).bias(m.router_bias)));
  wi = register_parameter("wi", torch::empty({experts, hidden, ffn_dim}));
  wo = register_parameter("wo", torch::empty({experts, ffn_dim, hidden}));
}

Tensor SparseFfnImpl::forward(const Tensor& x, const std::string& pre, NodeProbe* probe) {
  const int64_t B = x.size(0), S = x.size(1), h = x.size(2), E = experts;
  const int64_t cap = expert_capacity_per_sample(spec, S);
  const int64_t C = B * cap;  // token slots of one expert in this batch
  auto logits = node(probe, pre + "router", [&] { return router(x); });
  Tensor pmax, rows, dst;  // router probability of the chosen expert [B*S]; kept token rows; their slots
  auto probs = node(probe, pre + "router.softmax", [&] {
    auto p = torch::softmax(logits.to(torch::kFloat32), -1);  // HF router_dtype float32
    auto top = p.max(-1);
    pmax = std::get<0>(top).reshape({B * S});
    auto idx = std::get<1>(top);                                                  // [B, S]
    auto onehot = torch::one_hot(idx, E);                                         // [B, S, E]
    auto prio = onehot.cumsum(1).gather(2, idx.unsqueeze(-1)).squeeze(-1);       // 1-based place in its expert
    auto keep = (prio <= cap).reshape({B * S});
    auto sample = torch::arange(B, idx.options()).unsqueeze(1);
    auto slot = (idx * C + sample * cap + prio - 1).reshape({B * S});
    rows = keep.nonzero().squeeze(-1);
    dst = slot.index_select(0, rows);
    return p;
  });
  (void)probs;
  auto flat = x.reshape({B * S, h});
  auto buf = node(probe, pre + "dispatch", [&] {
    return torch::zeros({E * C, h}, x.options()).index_copy(0, dst, flat.index_select(0, rows)).view({E, C, h});
  });
  auto up = node(probe, pre + "expert.up", [&] { return torch::bmm(buf, wi); });
  auto a = activation_node(probe, pre + "expert.act", up, act);
  a = dropout_node(probe, pre + "expert.act_dropout", a, act_dropout, is_training());
  auto down = node(probe, pre + "expert.down", [&] { return torch::bmm(a, wo); });
  return node(probe, pre + "combine", [&] {
    auto out_rows = down.reshape({E * C, h}).index_select(0, dst);
    auto next = flat.index_copy(0, rows, out_rows);  // dropped tokens keep their input
    return (next * pmax.unsqueeze(1).to(x.scalar_type())).view({B, S, h});
  });
}

}  // namespace scaledl::zoo_detail
