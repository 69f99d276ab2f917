// Zoo infrastructure: the per-node probe, the shared Transformer blocks, the
// family dispatch and synthetic batches (see zoo.hpp, bench/zoo_blocks.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11)

#include "bench/zoo.hpp"
#include "bench/zoo_blocks.hpp"
#include "core/stats.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl {

// ---- NodeProbe --------------------------------------------------------------

using torch::Tensor;

namespace {
/// Identity on the forward pass; its backward stamps "gradient of node `id`'s
/// output is ready" on the probe and passes the gradient through unchanged.
struct ProbeMark : public torch::autograd::Function<ProbeMark> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, int64_t probe, int64_t id) {
    ctx->saved_data["probe"] = probe;
    ctx->saved_data["id"] = id;
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto* probe = reinterpret_cast<NodeProbe*>(ctx->saved_data["probe"].toInt());
    probe->stamp(ctx->saved_data["id"].toInt());
    return {grad[0], Tensor(), Tensor()};
  }
};

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

NodeProbe::NodeProbe(torch::Device device) : device_(device) {}

void NodeProbe::sync() const {
  synchronize(device_);
}

int64_t NodeProbe::id_of(const std::string& name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  int64_t id = static_cast<int64_t>(names_.size());
  names_.push_back(name);
  ids_.emplace(name, id);
  return id;
}

void NodeProbe::begin_iteration() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
  iter_ms_.clear();
  iter_order_.clear();
}

void NodeProbe::add_ms(const std::string& name, double ms) {
  auto it = iter_ms_.find(name);
  if (it == iter_ms_.end()) {
    iter_order_.push_back(name);
    iter_ms_.emplace(name, ms);
  } else {
    it->second += ms;
  }
}

Tensor NodeProbe::run(const std::string& name, const std::function<Tensor()>& op) {
  sync();
  auto t0 = Clock::now();
  Tensor y = op();
  sync();
  auto t1 = Clock::now();
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = id_of(name);
    add_ms(name, ms_between(t0, t1));
  }
  if (y.defined() && y.requires_grad())
    y = ProbeMark::apply(y, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)), id);
  return y;
}

void NodeProbe::time(const std::string& name, const std::function<void()>& op) {
  sync();
  auto t0 = Clock::now();
  op();
  sync();
  auto t1 = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  add_ms(name, ms_between(t0, t1));
}

void NodeProbe::begin_backward() {
  sync();
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
  bwd_begin_ = Clock::now();
}

void NodeProbe::stamp(int64_t node_id) {
  sync();
  auto t = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  events_.emplace_back(node_id, t);
}

void NodeProbe::end_backward() {
  sync();
  auto end = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  // Each stamp opens the interval of its node's backward; the next stamp (or
  // the end of backward) closes it. Time before the first stamp is engine start-up.
  for (size_t i = 0; i < events_.size(); ++i) {
    auto stop = i + 1 < events_.size() ? events_[i + 1].second : end;
    add_ms(names_[events_[i].first] + ".bwd", ms_between(events_[i].second, stop));
  }
  events_.clear();
}

std::vector<NodeTime> NodeProbe::node_times() const {
  std::vector<NodeTime> out;
  std::vector<NodeTime> bwd;
  for (const auto& name : order_) {
    NodeTime t{name, median(samples_.at(name))};
    bool is_bwd = name.size() > 4 && name.compare(name.size() - 4, 4, ".bwd") == 0;
    (is_bwd ? bwd : out).push_back(t);
  }
  out.insert(out.end(), bwd.begin(), bwd.end());
  return out;
}

void NodeProbe::end_iteration() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& name : iter_order_) {
    double ms = iter_ms_.at(name);
    auto it = samples_.find(name);
    if (it == samples_.end()) {
      order_.push_back(name);
      it = samples_.emplace(name, std::vector<double>{}).first;
    }
    it->second.push_back(ms);
  }
  iter_ms_.clear();
  iter_order_.clear();
  events_.clear();
  ++iterations_;
}

}  // namespace scaledl

// ---- shared blocks ------------------------------------------------------------

namespace scaledl::zoo_detail {

Tensor dropout_node(NodeProbe* probe, const std::string& name, const Tensor& x, double p, bool training) {
  if (p <= 0 || !training)
    return x;  // eval mode: the identity, and no node (as in the inference layer graph)
  return node(probe, name, [&] { return torch::dropout(x, p, training); });
}

Tensor activate(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::GELU:
      return torch::gelu(x);
    case Activation::GELUTanh:
      return torch::gelu(x, "tanh");
    case Activation::ReLU:
      return torch::relu(x);
    case Activation::SiLU:
      return torch::silu(x);
    case Activation::GELUNew:
      return torch::gelu(x, "tanh");  // the same function; activation_node runs it eagerly
    case Activation::ReLU2:
      return torch::square(torch::relu(x));  // activation_node runs the two kernels as nodes
  }
  return x;
}

Tensor softcap_node(NodeProbe* probe, const std::string& name, const Tensor& x, double cap) {
  auto y = node(probe, name + "_div", [&] { return x / cap; });
  y = node(probe, name + "_tanh", [&] { return torch::tanh(y); });
  return node(probe, name + "_mul", [&] { return y * cap; });
}

Tensor activation_node(NodeProbe* probe, const std::string& name, const Tensor& x, Activation a) {
  if (a == Activation::ReLU2) {  // HF's ReLUSquaredActivation: relu, then square (layer_graph.cpp's names)
    auto r = node(probe, name + ".relu", [&] { return torch::relu(x); });
    return node(probe, name, [&] { return torch::square(r); });
  }
  if (a != Activation::GELUNew) return node(probe, name, [&] { return activate(x, a); });
  // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), one kernel per op, in Python's order.
  auto half = node(probe, name + ".half", [&] { return x * 0.5; });
  auto c = node(probe, name + ".pow", [&] { return torch::pow(x, 3.0); });
  c = node(probe, name + ".mul_c", [&] { return c * 0.044715; });
  c = node(probe, name + ".add_x", [&] { return x + c; });
  c = node(probe, name + ".mul_k", [&] { return c * 0.7978845608028654; });  // sqrt(2 / pi)
  c = node(probe, name + ".tanh", [&] { return torch::tanh(c); });
  c = node(probe, name + ".add_1", [&] { return c + 1.0; });
  return node(probe, name, [&] { return half * c; });
}

NormImpl::NormImpl(int64_t hidden_, NormKind kind_, double eps_) : hidden(hidden_), kind(kind_), eps(eps_) {
  weight = register_parameter("weight", torch::ones({hidden}));
  if (kind == NormKind::LayerNorm) bias = register_parameter("bias", torch::zeros({hidden}));
}

Tensor NormImpl::forward(const Tensor& x) {
  if (kind == NormKind::LayerNorm) return torch::layer_norm(x, {hidden}, weight, bias, eps);
  // RMSNorm (T5LayerNorm, LlamaRMSNorm): x / sqrt(mean(x^2) + eps) * weight.
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

Rope make_rope(int64_t seq, int64_t head_dim, torch::Device device, torch::Dtype dtype, double theta) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  auto inv = torch::pow(theta, -torch::arange(0, head_dim, 2, opts) / static_cast<double>(head_dim));
  auto freqs = torch::outer(torch::arange(seq, opts), inv);  // [seq, head_dim/2]
  auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);    // [seq, 1, head_dim]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

Tensor apply_rope(const Tensor& x, const Rope& rope, int64_t head_dim) {
  auto sizes = x.sizes().vec();
  auto t = x.view({sizes[0], sizes[1], -1, head_dim});  // [B, S, H, hd]
  auto half = head_dim / 2;
  auto rot = torch::cat({-t.narrow(-1, half, head_dim - half), t.narrow(-1, 0, half)}, -1);
  return (t * rope.cos + rot * rope.sin).view(sizes);
}

AttentionImpl::AttentionImpl(const AttnOptions& o) : opt(o) {
  using torch::nn::LinearOptions;
  const int64_t qd = o.heads * o.head_dim, kvd = o.kv_heads * o.head_dim;
  const int64_t vd = o.v_head_dim > 0 ? o.v_head_dim : o.head_dim;
  if (o.kv_lora_rank >
      0) {  // DeepseekV2/V3Attention: q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, ...
    const int64_t ql = o.q_lora_rank, kl = o.kv_lora_rank, nope = o.head_dim - o.rope_dim;
    if (ql > 0) {
      q_a = register_module("q_a", torch::nn::Linear(LinearOptions(o.hidden, ql).bias(o.qkv_bias)));
      q_a_norm = register_module("q_a_norm", Norm(ql, NormKind::RMSNorm, 1e-6));
      q_b = register_module("q_b", torch::nn::Linear(LinearOptions(ql, qd).bias(false)));
    } else {
      q = register_module("q", torch::nn::Linear(LinearOptions(o.hidden, qd).bias(false)));
    }
    kv_a =
        register_module("kv_a", torch::nn::Linear(LinearOptions(o.hidden, kl + o.rope_dim).bias(o.qkv_bias)));
    kv_a_norm = register_module("kv_a_norm", Norm(kl, NormKind::RMSNorm, 1e-6));
    kv_b = register_module("kv_b", torch::nn::Linear(LinearOptions(kl, o.heads * (nope + vd)).bias(false)));
  } else if (o.fused_qkv) {
    qkv = register_module("qkv", torch::nn::Linear(LinearOptions(o.hidden, qd + 2 * kvd).bias(o.qkv_bias)));
  } else {
    q = register_module("q", torch::nn::Linear(LinearOptions(o.hidden, qd).bias(o.qkv_bias)));
    k = register_module("k", torch::nn::Linear(LinearOptions(o.hidden, kvd).bias(o.qkv_bias)));
    v = register_module("v", torch::nn::Linear(LinearOptions(o.hidden, kvd).bias(o.qkv_bias)));
  }
  this->o = register_module("o", torch::nn::Linear(LinearOptions(o.heads * vd, o.hidden).bias(o.out_bias)));
  if (o.sinks) sinks = register_parameter("sinks", torch::zeros({o.heads}));
  if (o.qk_norm) {  // Qwen3RMSNorm(head_dim, eps 1e-6)
    q_norm = register_module("q_norm", Norm(o.head_dim, NormKind::RMSNorm, 1e-6));
    k_norm = register_module("k_norm", Norm(o.head_dim, NormKind::RMSNorm, 1e-6));
  }
}

void AttentionImpl::latent_qkv(const Tensor& x, const Tensor& src, const std::string& pre, NodeProbe* probe,
                               const Rope& rope, Tensor& q4, Tensor& k4, Tensor& v4) {
  const int64_t B = x.size(0), Sq = x.size(1), Sk = src.size(1), H = opt.heads, hd = opt.head_dim;
  const int64_t rd = opt.rope_dim, nope = hd - rd, vd = opt.v_head_dim > 0 ? opt.v_head_dim : hd;
  Tensor qf;
  if (!q_a.is_empty()) {
    auto a = node(probe, pre + "q_a", [&] { return q_a(x); });
    a = node(probe, pre + "q_a_norm", [&] { return q_a_norm(a); });
    qf = node(probe, pre + "q_b", [&] { return q_b(a); });
  } else {
    qf = node(probe, pre + "q", [&] { return q(x); });
  }
  auto kva = node(probe, pre + "kv_a", [&] { return kv_a(src); });  // [B, Sk, kv_lora_rank + rope]
  auto lat = node(probe, pre + "kv_a_norm", [&] { return kv_a_norm(kva.narrow(-1, 0, opt.kv_lora_rank)); });
  auto kvb = node(probe, pre + "kv_b", [&] { return kv_b(lat); }).view({B, Sk, H, nope + vd});
  // The rotary embedding of the rotary parts and the concatenations, as the eager attention runs them.
  auto rotate = [&](const Tensor& t, int64_t S, int64_t heads) {  // t [B, S, heads, rd]
    if (!rope.defined() || rd == 0) return t;
    return apply_rope(t.reshape({B, S, heads * rd}), rope, rd).view({B, S, heads, rd});
  };
  q4 = node(probe, pre + "q_cat", [&] {
         auto t = qf.view({B, Sq, H, hd});
         return torch::cat({t.narrow(-1, 0, nope), rotate(t.narrow(-1, nope, rd), Sq, H)}, -1);
       }).transpose(1, 2);  // [B, H, Sq, hd]
  k4 = node(probe, pre + "k_cat", [&] {
         auto kr = rotate(kva.narrow(-1, opt.kv_lora_rank, rd).unsqueeze(2), Sk, 1).expand({B, Sk, H, rd});
         return torch::cat({kvb.narrow(-1, 0, nope), kr}, -1);
       }).transpose(1, 2);                        // [B, H, Sk, hd]
  v4 = kvb.narrow(-1, nope, vd).transpose(1, 2);  // [B, H, Sk, vd]
}

Tensor AttentionImpl::forward(const Tensor& x, const Tensor& kv_src, const std::string& pre, NodeProbe* probe,
                              const Tensor& bias, const Rope& rope) {
  const auto& src = kv_src.defined() ? kv_src : x;
  const int64_t B = x.size(0), Sq = x.size(1), Sk = src.size(1);
  const int64_t H = opt.heads, KV = opt.kv_heads, hd = opt.head_dim;
  const int64_t vd = opt.v_head_dim > 0 ? opt.v_head_dim : hd;
  Tensor qt, kt, vt;  // [B, S, heads*hd]
  Tensor q4, k4, v4;  // [B, heads, S, hd]
  if (opt.kv_lora_rank > 0) {
    latent_qkv(x, src, pre, probe, rope, q4, k4, v4);
  } else if (opt.fused_qkv) {
    std::vector<Tensor> parts;
    vt = node(probe, pre + "qkv", [&] {  // Phi-3: the rotary embedding of q and k inside this node
      parts = qkv(x).split_with_sizes({H * hd, KV * hd, KV * hd}, -1);
      if (rope.defined())
        parts[0] = apply_rope(parts[0], rope, hd), parts[1] = apply_rope(parts[1], rope, hd);
      return parts[2];
    });
    qt = parts[0], kt = parts[1];
  } else {
    // RoPE is applied inside the q and k nodes (it rotates their outputs in place of positions);
    // with Qwen3's per-head norms it follows them, inside the q_norm and k_norm nodes.
    auto rotate = [&](const Tensor& t) { return rope.defined() ? apply_rope(t, rope, hd) : t; };
    qt = node(probe, pre + "q", [&] { return opt.qk_norm ? q(x) : rotate(q(x)); });
    kt = node(probe, pre + "k", [&] { return opt.qk_norm ? k(src) : rotate(k(src)); });
    vt = node(probe, pre + "v", [&] { return v(src); });
    if (opt.qk_norm) {
      auto head_norm = [&](const Tensor& t, Norm& n) {
        return rotate(n(t.view({t.size(0), t.size(1), -1, hd})).view(t.sizes()));
      };
      qt = node(probe, pre + "q_norm", [&] { return head_norm(qt, q_norm); });
      kt = node(probe, pre + "k_norm", [&] { return head_norm(kt, k_norm); });
    }
  }
  if (opt.kv_lora_rank == 0) {
    q4 = qt.view({B, Sq, H, hd}).transpose(1, 2);   // [B, H, Sq, hd]
    k4 = kt.view({B, Sk, KV, hd}).transpose(1, 2);  // [B, KV, Sk, hd]
    v4 = vt.view({B, Sk, KV, hd}).transpose(1, 2);
  }
  if (KV != H) {  // grouped-query attention: each K/V head serves H/KV query heads
    k4 = k4.repeat_interleave(H / KV, 1);
    v4 = v4.repeat_interleave(H / KV, 1);
  }
  // The elementwise kernels on the scores are layer nodes of their own (layer_graph.cpp).
  auto scores =
      node(probe, pre + "qk", [&] { return torch::matmul(q4, k4.transpose(-2, -1)); });  // [B, H, Sq, Sk]
  if (opt.scale)
    scores = node(probe, pre + "scale", [&] { return scores * (1.0 / std::sqrt(static_cast<double>(hd))); });
  if (opt.softcap > 0) scores = softcap_node(probe, pre + "softcap", scores, opt.softcap);  // Gemma 2
  if (bias.defined()) scores = node(probe, pre + "bias", [&] { return scores + bias; });
  if (opt.causal) {
    scores = node(probe, pre + "mask", [&] {
      auto mask =
          torch::ones({Sq, Sk}, torch::TensorOptions().dtype(torch::kBool).device(scores.device())).triu(1);
      return scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    });
  } else if (opt.padding_mask) {  // no padding in a benchmark batch: all zeros, as HF's extended mask is then
    scores = node(probe, pre + "mask", [&] {
      return scores + torch::zeros({B, 1, 1, Sk}, scores.options());
    });
  }
  if (opt.sinks) {  // GptOssAttention: cat the sink logits, less each row's maximum, softmax, drop the sink
                    // column
    scores = node(probe, pre + "sinks_cat", [&] {
      return torch::cat({scores, sinks.view({1, H, 1, 1}).expand({B, H, Sq, 1}).to(scores.scalar_type())},
                        -1);
    });
    auto mx = node(probe, pre + "sinks_max", [&] { return std::get<0>(scores.max(-1, true)); });
    scores = node(probe, pre + "sinks_sub", [&] { return scores - mx; });
  }
  auto probs = node(probe, pre + "softmax", [&] { return torch::softmax(scores, -1); });
  if (opt.sinks) probs = probs.narrow(-1, 0, Sk);
  probs = dropout_node(probe, pre + "dropout", probs, opt.dropout, is_training());
  auto ctx = node(probe, pre + "av", [&] {
    return torch::matmul(probs, v4).transpose(1, 2).reshape({B, Sq, H * vd});  // [B, Sq, H*vd]
  });
  return node(probe, pre + "o", [&] { return o(ctx); });
}

FfnImpl::FfnImpl(int64_t hidden, int64_t ffn_dim, bool gated_, bool bias, Activation act_,
                 double act_dropout_, bool fused_gate_up)
    : gated(gated_), fused(gated_ && fused_gate_up), act(act_), act_dropout(act_dropout_) {
  using torch::nn::LinearOptions;
  if (fused) {
    gate_up = register_module("gate_up", torch::nn::Linear(LinearOptions(hidden, 2 * ffn_dim).bias(bias)));
  } else {
    up = register_module("up", torch::nn::Linear(LinearOptions(hidden, ffn_dim).bias(bias)));
    if (gated) gate = register_module("gate", torch::nn::Linear(LinearOptions(hidden, ffn_dim).bias(bias)));
  }
  down = register_module("down", torch::nn::Linear(LinearOptions(ffn_dim, hidden).bias(bias)));
}

Tensor FfnImpl::forward(const Tensor& x, const std::string& pre, NodeProbe* probe) {
  Tensor h;
  if (fused) {  // Phi3MLP: gate, up = gate_up_proj(x).chunk(2, -1); up * act(gate)
    auto gu = node(probe, pre + "gate_up", [&] { return gate_up(x); });
    auto parts = gu.chunk(2, -1);
    auto a = activation_node(probe, pre + "act", parts[0], act);
    h = node(probe, pre + "mul", [&] { return a * parts[1]; });
  } else if (gated) {
    auto g = node(probe, pre + "gate", [&] { return gate(x); });
    auto u = node(probe, pre + "up", [&] { return up(x); });
    auto a = activation_node(probe, pre + "act", g, act);
    h = node(probe, pre + "mul", [&] { return a * u; });
  } else {
    auto u = node(probe, pre + "up", [&] { return up(x); });
    h = activation_node(probe, pre + "act", u, act);
  }
  h = dropout_node(probe, pre + "act_dropout", h, act_dropout, is_training());
  return node(probe, pre + "down", [&] { return down(h); });
}

BlockImpl::BlockImpl(const BlockOptions& o) : opt(o) {
  attn_norm = register_module("attn_norm", Norm(o.self.hidden, o.norm, o.norm_eps));
  attn = register_module("attn", Attention(o.self));
  if (o.has_cross) {
    cross_norm = register_module("cross_norm", Norm(o.self.hidden, o.norm, o.norm_eps));
    cross = register_module("cross", Attention(o.cross));
  }
  ffn_norm = register_module("ffn_norm", Norm(o.self.hidden, o.norm, o.norm_eps));
  if (o.sandwich_norm) {
    attn_post_norm = register_module("attn_post_norm", Norm(o.self.hidden, o.norm, o.norm_eps));
    ffn_post_norm = register_module("ffn_post_norm", Norm(o.self.hidden, o.norm, o.norm_eps));
  }
  if (o.moe)
    moe = register_module("moe", SparseFfn(o.self.hidden, o.ffn_dim, *o.moe, o.act, o.act_dropout));
  else
    ffn = register_module(
        "ffn", Ffn(o.self.hidden, o.ffn_dim, o.gated, o.ffn_bias, o.act, o.act_dropout, o.fused_gate_up));
  opt.moe = nullptr;  // the spec pointer is needed only while building
}

Tensor BlockImpl::forward(const Tensor& x0, const Tensor& enc_out, const std::string& pre, NodeProbe* probe,
                          const Tensor& self_bias, const Tensor& cross_bias, const Rope& rope) {
  const bool train = is_training();
  Tensor x = x0;
  // post: Gemma 2 / 3's norm after the sub-layer (null or empty: none).
  auto sublayer = [&](const std::string& p, Norm& norm, Norm* post,
                      const std::function<Tensor(const Tensor&)>& body) {
    if (opt.pre_norm) {  // x + drop(body(norm(x))); with post: x + post(drop(body(norm(x))))
      auto h = node(probe, p + "norm", [&] { return norm(x); });
      auto y = dropout_node(probe, p + "out_dropout", body(h), opt.dropout, train);
      if (post && !post->is_empty()) y = node(probe, p + "post_norm", [&] { return (*post)(y); });
      x = node(probe, p + "residual", [&] { return x + y; });
    } else {  // post-norm (BERT): norm(x + drop(body(x)))
      auto y = dropout_node(probe, p + "out_dropout", body(x), opt.dropout, train);
      auto r = node(probe, p + "residual", [&] { return x + y; });
      x = node(probe, p + "norm", [&] { return norm(r); });
    }
  };
  sublayer(pre + "attn.", attn_norm, &attn_post_norm,
           [&](const Tensor& h) { return attn(h, Tensor(), pre + "attn.", probe, self_bias, rope); });
  if (opt.has_cross)
    sublayer(pre + "cross.", cross_norm, nullptr,
             [&](const Tensor& h) { return cross(h, enc_out, pre + "cross.", probe, cross_bias, Rope{}); });
  // The FFN's own dropout is "ffn.dropout" (after ffn.down), not "ffn.out_dropout".
  auto ffn_pre = pre + "ffn.";
  auto body = [&](const Tensor& h) {
    return moe.is_empty() ? ffn(h, ffn_pre, probe) : moe(h, ffn_pre, probe);
  };
  if (opt.pre_norm) {
    auto h = node(probe, ffn_pre + "norm", [&] { return ffn_norm(opt.parallel_residual ? x0 : x); });
    auto y = dropout_node(probe, ffn_pre + "dropout", body(h), opt.dropout, train);
    if (!ffn_post_norm.is_empty()) y = node(probe, ffn_pre + "post_norm", [&] { return ffn_post_norm(y); });
    x = node(probe, ffn_pre + "residual", [&] { return x + y; });
  } else {
    auto y = dropout_node(probe, ffn_pre + "dropout", body(x), opt.dropout, train);
    auto r = node(probe, ffn_pre + "residual", [&] { return x + y; });
    x = node(probe, ffn_pre + "norm", [&] { return ffn_norm(r); });
  }
  return x;
}

BlockOptions block_options(const ModelSpec& m) {
  BlockOptions b;
  b.self.hidden = m.hidden;
  b.self.heads = m.num_heads;
  b.self.kv_heads = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
  b.self.head_dim = m.head_dim > 0 ? m.head_dim : m.hidden / m.num_heads;
  b.self.qkv_bias = m.qkv_bias;
  b.self.out_bias = m.out_bias;
  b.self.dropout = m.attn_dropout;
  b.self.padding_mask = m.family == Family::Bert;
  b.self.qk_norm = m.qk_norm;
  b.self.softcap = m.attn_softcap;
  b.self.kv_lora_rank = m.kv_lora_rank;
  b.self.q_lora_rank = m.q_lora_rank;
  b.self.rope_dim = m.qk_rope_dim;
  b.self.v_head_dim = m.v_head_dim;
  b.self.sinks = m.attn_sinks;
  b.sandwich_norm = m.sandwich_norm;
  b.parallel_residual = m.parallel_residual;
  b.fused_gate_up = m.fused_gate_up;
  b.cross = b.self;
  b.ffn_dim = m.ffn_dim;
  b.gated = m.gated_ffn;
  b.ffn_bias = m.linear_bias;
  b.act_dropout = m.act_dropout;
  b.act = m.activation;
  b.norm = m.norm;
  b.norm_eps = m.norm == NormKind::RMSNorm ? 1e-6 : 1e-5;
  b.pre_norm = m.pre_norm;
  b.dropout = m.dropout;
  return b;
}

Tensor loss_node(NodeProbe* probe, const Tensor& logits, const Tensor& labels) {
  // Inference (no-grad): no loss is computed, as the layer graph has no head.loss then; the logits are the
  // output.
  if (!torch::GradMode::is_enabled()) return logits;
  return node(probe, "head.loss",
              [&] { return torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), labels); });
}

}  // namespace scaledl::zoo_detail

// ---- dispatch, batches, counting ----------------------------------------------

namespace scaledl {

std::shared_ptr<ZooModel> build_zoo_model(const ModelSpec& m, const TrainSettings& s, torch::Device device) {
  SCALEDL_CHECK(m.hidden > 0 && m.num_heads > 0 && m.num_layers > 0,
                "model {}: hidden={}, num_heads={}, num_layers={} must all be > 0", m.name, m.hidden,
                m.num_heads, m.num_layers);
  SCALEDL_CHECK(m.ffn_dim > 0, "model {}: ffn_dim={} must be > 0", m.name, m.ffn_dim);
  const int64_t kv = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
  SCALEDL_CHECK(m.num_heads % kv == 0,
                "model {}: num_key_value_heads={} does not divide num_attention_heads={}", m.name, kv,
                m.num_heads);
  SCALEDL_CHECK(m.head_dim > 0 || m.hidden % m.num_heads == 0,
                "model {}: num_attention_heads={} does not divide hidden_size={}", m.name, m.num_heads,
                m.hidden);
  {
    // Structures the layer graph predicts (ir/layer_graph.cpp) that the zoo's modules do not build:
    // a model timed without them would be another model.
    std::vector<std::string> missing;
    if (m.post_norm_only) missing.push_back("norms after attention and the FFN only (OLMo 2, EXAONE 4)");
    if (m.qk_norm_whole) missing.push_back("a q/k norm over the whole projection (OLMo 2)");
    if (m.qk_norm_weightless) missing.push_back("a weightless q/k L2 norm (Llama 4)");
    if (m.residual_scale || m.logits_scale) missing.push_back("residual and logits multipliers (Granite)");
    SCALEDL_CHECK(
        missing.empty(),
        "model {}: the benchmark zoo does not build {} (predict reads it; bench models cannot time it)",
        m.name, fmt::join(missing, "; "));
  }
  std::shared_ptr<ZooModel> model;
  try {
    switch (m.family) {
      case Family::Bert:
        model = zoo_detail::build_bert(m, s);
        break;
      case Family::Gpt2:
      case Family::GptNeo:
      case Family::Opt:
      case Family::Llama:
        model = zoo_detail::build_decoder(m, s);
        break;
      case Family::T5:
      case Family::Switch:
        model = zoo_detail::build_t5(m, s);
        break;
      case Family::ViT:
      case Family::DeiT:
        model = zoo_detail::build_vit(m, s);
        break;
    }
    SCALEDL_CHECK(model != nullptr, "model {}: family id {} is not in the zoo", m.name,
                  static_cast<int>(m.family));
    // Hugging Face initialisation (initializer_range 0.02): weight matrices and
    // tables ~ N(0, 0.02), biases 0, norm scales 1. Keeps logits O(1), so FP16
    // losses stay finite; the iteration's cost does not depend on the values.
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->named_parameters(/*recurse=*/true)) {
        auto& t = p.value();
        if (t.dim() >= 2)
          t.normal_(0.0, 0.02);
        else if (p.key().find("norm") == std::string::npos)
          t.zero_();
      }
    }
    model->to(device, torch_dtype(s.dtype));
    model->train();
  } catch (const c10::Error& e) {
    fail("model {}: building on {} failed: {}", m.name, device.str(), e.what_without_backtrace());
  }
  return model;
}

ZooBatch make_zoo_batch(const ModelSpec& m, const TrainSettings& s, torch::Device device, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto ids = torch::TensorOptions().dtype(torch::kInt64);
  ZooBatch b;
  const bool vision = m.family == Family::ViT || m.family == Family::DeiT;
  if (vision) {
    int64_t img = s.image_size > 0 ? s.image_size : m.image_size;
    SCALEDL_CHECK(img > 0 && m.patch_size > 0 && img % m.patch_size == 0,
                  "settings.image_size={} must be a positive multiple of patch_size={}", img, m.patch_size);
    b.input = torch::randn({s.batch, m.num_channels, img, img}, gen, torch::kFloat32)
                  .to(device, torch_dtype(s.dtype));
    b.labels = torch::randint(std::max<int64_t>(m.num_labels, 1), {s.batch}, gen, ids).to(device);
    return b;
  }
  SCALEDL_CHECK(m.vocab_size > 0, "model {}: vocab_size={} must be > 0 for a text model", m.name,
                m.vocab_size);
  b.input = torch::randint(m.vocab_size, {s.batch, s.seq_len}, gen, ids).to(device);
  if (m.arch == Arch::EncoderDecoder)
    b.decoder_input =
        torch::randint(m.vocab_size, {s.batch, decoder_tokens_per_sample(m, s)}, gen, ids).to(device);
  if (m.lm_head)  // LM labels cover the tokens the head sees: decoder tokens for T5
    b.labels =
        torch::randint(m.vocab_size,
                       {s.batch, b.decoder_input.defined() ? b.decoder_input.size(1) : s.seq_len}, gen, ids)
            .to(device);
  else
    b.labels = torch::randint(std::max<int64_t>(m.num_labels, 1), {s.batch}, gen, ids).to(device);
  return b;
}

int64_t trainable_parameter_count(const torch::nn::Module& module) {
  int64_t n = 0;
  std::set<const void*> seen;  // tied weights (LM head = word embedding) count once
  for (const auto& p : module.parameters(/*recurse=*/true)) {
    if (!p.requires_grad()) continue;
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    n += p.numel();
  }
  return n;
}

}  // namespace scaledl
