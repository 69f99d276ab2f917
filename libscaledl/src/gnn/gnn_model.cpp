// The graph refinement model (see gnn.hpp): its configuration, the encoders (TransformerConv,
// ANEE), the scatter kernels, the forward pass, and GraphPredictor's prediction.
#include "scaledl/gnn/gnn.hpp"

#include <algorithm>
#include <cmath>

#include "scaledl/core/error.hpp"

namespace scaledl {
namespace {

// Runs `f`, turning c10::Error (shape/dtype mismatches inside LibTorch) into scaledl::Error.
template <typename F>
auto torch_guard(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    auto p = msg.find('\n');
    if (p != std::string::npos) msg = msg.substr(0, p);
    fail("{}: {}", what, msg);
  }
}

// Sum or mean of node embeddings per graph, each node weighted by the number of
// original nodes it stands for (compress_graph).
torch::Tensor pool(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& batch, int64_t G,
                   bool mean) {
  torch::Tensor s = scatter_sum(h * weight.unsqueeze(1), batch, G);
  if (!mean) return s;
  return s / scatter_sum(weight.unsqueeze(1), batch, G).clamp_min(1);
}

// ---- encoders ---------------------------------------------------------------

struct TransformerConvEncoderImpl : GraphEncoderImpl {
  TransformerConvEncoderImpl(int64_t F, int64_t Fe, const GnnConfig& c) {
    lin_in = register_module("lin_in", torch::nn::Linear(F, c.hidden));
    for (int64_t l = 0; l < c.layers; ++l)
      convs.push_back(
          register_module("conv" + std::to_string(l), TransformerConv(c.hidden, c.hidden, c.heads, Fe)));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& ei, const torch::Tensor& ea) override {
    torch::Tensor h = torch::elu(lin_in(x));
    for (auto& c : convs) h = c(h, ei, ea);
    return h;
  }
  torch::Tensor attention(int64_t layer) const override { return convs.at(layer)->last_attention; }
  torch::nn::Linear lin_in{nullptr};
  std::vector<TransformerConv> convs;
};

struct AneeEncoderImpl : GraphEncoderImpl {
  AneeEncoderImpl(int64_t F, int64_t Fe, const GnnConfig& c) : rounds(c.layers) {
    const int64_t H = c.hidden, He = std::max<int64_t>(4, c.hidden / 2);
    lin_x = register_module("lin_x", torch::nn::Linear(F, H));
    lin_e = register_module("lin_e", torch::nn::Linear(Fe, He));
    wu = register_module("wu", torch::nn::Linear(H, H));
    a_src = register_module("a_src", torch::nn::Linear(torch::nn::LinearOptions(H, 1).bias(false)));
    a_dst = register_module("a_dst", torch::nn::Linear(torch::nn::LinearOptions(H, 1).bias(false)));
    we = register_module("we", torch::nn::Linear(He, He));
    wm = register_module("wm", torch::nn::Linear(torch::nn::LinearOptions(He, 1).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& ei, const torch::Tensor& ea) override {
    const int64_t N = x.size(0);
    const torch::Tensor src = ei[0], dst = ei[1];
    torch::Tensor h = torch::leaky_relu(lin_x(x), 0.01);
    torch::Tensor e = lin_e(ea);
    last.clear();
    for (int64_t r = 0; r < rounds; ++r) {
      torch::Tensor hb = torch::leaky_relu(wu(h), 0.01);                              // [N, H]
      torch::Tensor att = gather_rows(a_src(hb), src) + gather_rows(a_dst(hb), dst);  // [E, 1] = a.(hs||hd)
      e = torch::sigmoid(att * we(e));                                                // [E, He]
      torch::Tensor w = segment_softmax(wm(e), dst, N);                               // [E, 1]
      last.push_back(w.detach());
      torch::Tensor agg = scatter_sum(w * gather_rows(hb, src), dst, N);
      h = torch::leaky_relu(hb + agg, 0.01);
    }
    return h;
  }
  torch::Tensor attention(int64_t layer) const override { return last.at(layer); }
  int64_t rounds;
  torch::nn::Linear lin_x{nullptr}, lin_e{nullptr}, wu{nullptr}, a_src{nullptr}, a_dst{nullptr}, we{nullptr},
      wm{nullptr};
  std::vector<torch::Tensor> last;
};

}  // namespace

// ---- scatter and eq. 12 -------------------------------------------------------

namespace {

// index_select whose backward is scatter_sum (LibTorch's own backward of
// index_select is index_add, the slow kernel scatter_sum avoids).
struct GatherRowsFn : torch::autograd::Function<GatherRowsFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& index) {
    ctx->saved_data["rows"] = x.size(0);
    ctx->save_for_backward({index});
    return x.index_select(0, index);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    const torch::Tensor index = ctx->get_saved_variables()[0];
    return {scatter_sum(grad[0], index, ctx->saved_data["rows"].toInt()), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& index) {
  if (!x.requires_grad() || !torch::GradMode::is_enabled()) return x.index_select(0, index);
  return GatherRowsFn::apply(x, index);
}

torch::Tensor scatter_sum(const torch::Tensor& rows, const torch::Tensor& index, int64_t num_out) {
  // index_put_(accumulate) rather than index_add: on LibTorch 1.13's CPU kernels
  // it was 8x faster forward and 1.6x backward for 80k rows x 64 (docs/gnn.md).
  c10::List<c10::optional<torch::Tensor>> idx;
  idx.push_back(index);
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = num_out;
  return torch::zeros(shape, rows.options()).index_put_(idx, rows, /*accumulate=*/true);
}

torch::Tensor segment_softmax(const torch::Tensor& scores, const torch::Tensor& dst, int64_t num_nodes) {
  const int64_t E = scores.size(0);
  auto opt = scores.options();
  torch::Tensor s = scores.detach();
  torch::Tensor cnt = scatter_sum(torch::ones({E, 1}, opt), dst, num_nodes);
  torch::Tensor mean = scatter_sum(s, dst, num_nodes) / cnt.clamp_min(1);
  // exp(score - mean(score into d)): the max term is >= 1; the clamp only acts
  // when one destination's scores spread by more than 80 (would overflow).
  torch::Tensor ex = (scores - mean.index_select(0, dst)).clamp_max(80.0).exp();
  torch::Tensor den = scatter_sum(ex, dst, num_nodes);
  return ex / gather_rows(den, dst);
}

// ---- eq. 11-13 --------------------------------------------------------------

TransformerConvImpl::TransformerConvImpl(int64_t in, int64_t out_, int64_t heads_, int64_t edge_dim)
    : out(out_), heads(heads_), dk(std::max<int64_t>(1, out_ / heads_)) {
  // W_Q, W_K, W_V^(1..L) and W_root as one [in -> 2*L*dk + L*out + out] matmul (one kernel, same
  // math), split into views (split's backward is one concatenation; narrow's is a zero-filled
  // full-width tensor per slice).
  wqkvr = register_module("wqkvr", torch::nn::Linear(in, 2 * heads * dk + heads * out + out));
  wedge = register_module("wedge", torch::nn::Linear(edge_dim, heads));
}

torch::Tensor TransformerConvImpl::forward(const torch::Tensor& x, const torch::Tensor& edge_index,
                                           const torch::Tensor& edge_attr) {
  const int64_t N = x.size(0), E = edge_index.size(1);
  const torch::Tensor src = edge_index[0], dst = edge_index[1];
  const int64_t hq = heads * dk, hv = heads * out;
  const std::vector<torch::Tensor> qkvr = wqkvr(x).split_with_sizes({hq, hq, hv, out}, 1);
  // i = destination (the node being updated), j = source (its in-neighbour).
  torch::Tensor q = gather_rows(qkvr[0], dst).view({E, heads, dk});
  torch::Tensor k = gather_rows(qkvr[1], src).view({E, heads, dk});
  torch::Tensor eps =
      (q * k).sum(-1) / std::sqrt(static_cast<double>(dk)) + torch::relu(wedge(edge_attr));  // (11)
  torch::Tensor w = segment_softmax(eps, dst, N);                                            // (12)
  last_attention = w.detach();
  torch::Tensor msg = w.unsqueeze(-1) * gather_rows(qkvr[2], src).view({E, heads, out});  // [E, L, out]
  torch::Tensor agg = scatter_sum(msg.view({E, hv}), dst, N);
  return torch::elu(agg.view({N, heads, out})).mean(1) + qkvr[3];  // (13) + root skip
}

// ---- eq. 14 -----------------------------------------------------------------

GnnModelImpl::GnnModelImpl(const GnnConfig& c) : cfg(c) {
  cfg.validate();
  const int64_t F = static_cast<int64_t>(node_feature_names().size());
  const int64_t Fe = static_cast<int64_t>(edge_feature_names().size());
  const int64_t Fz = static_cast<int64_t>(global_feature_names().size());
  if (cfg.encoder == "anee")
    encoder = register_module("encoder", std::make_shared<AneeEncoderImpl>(F, Fe, cfg));
  else
    encoder = register_module("encoder", std::make_shared<TransformerConvEncoderImpl>(F, Fe, cfg));
  if (cfg.global_branch)
    z_mlp = register_module(
        "z_mlp", torch::nn::Sequential(torch::nn::Linear(Fz, cfg.z_hidden), torch::nn::ReLU(),
                                       torch::nn::Linear(cfg.z_hidden, cfg.z_hidden), torch::nn::ReLU()));
  const int64_t nout = cfg.target == "alpha-beta" ? 2 : 1;
  const int64_t head_in = cfg.hidden + (cfg.global_branch ? cfg.z_hidden : 0);
  head = register_module("head",
                         torch::nn::Sequential(torch::nn::Linear(head_in, cfg.mlp_hidden), torch::nn::ReLU(),
                                               torch::nn::Linear(cfg.mlp_hidden, nout)));
  log_t_offset = register_buffer("log_t_offset", torch::zeros({1}));
}

GnnOutput GnnModelImpl::forward(const GraphBatch& b) {
  torch::Tensor h = encoder->forward(b.x, b.edge_index, b.edge_attr);
  torch::Tensor g = pool(h, b.node_weight, b.batch, b.num_graphs, cfg.readout == "mean");
  torch::Tensor o = head->forward(cfg.global_branch ? torch::cat({g, z_mlp->forward(b.z)}, 1) : g);
  GnnOutput out;
  if (cfg.target == "alpha-beta") {
    const double L = std::log(cfg.alpha_bound);
    out.alpha = torch::exp(L * torch::tanh(o.select(1, 0) / L));
    out.beta = torch::exp(L * torch::tanh(o.select(1, 1) / L));
    out.t_pred = out.alpha * b.t_sum + out.beta * b.t_comm;  // eq. 2
    out.log_t_pred = torch::log(out.t_pred);
  } else {
    out.log_t_pred = o.select(1, 0) + log_t_offset;
    out.t_pred = torch::exp(out.log_t_pred);
    out.alpha = out.t_pred / b.t_sum;
    out.beta = torch::zeros_like(out.t_pred);
  }
  return out;
}

// ---- prediction ---------------------------------------------------------------

GnnPrediction GraphPredictor::predict(const std::vector<GraphFeatures>& graphs, int64_t batch_size,
                                      torch::Device device) const {
  std::vector<const GraphFeatures*> ptrs;
  for (const auto& g : graphs) ptrs.push_back(&g);
  return predict(ptrs, batch_size, device);
}

bool GraphPredictor::alpha_from_forward_part() const {
  static const size_t share_backward = global_feature_index("share_backward");
  return cfg_.ood_tau > 0 && share_backward < norm_.z_hi.size() && norm_.z_hi[share_backward] <= 0;
}

GnnPrediction GraphPredictor::predict(const std::vector<const GraphFeatures*>& graphs, int64_t batch_size,
                                      torch::Device device) const {
  SCALEDL_CHECK(model_, "predict: the graph model is not trained or loaded");
  SCALEDL_CHECK(batch_size >= 1, "batch_size={} must be >= 1", batch_size);
  GnnPrediction out;
  c10::InferenceMode im;
  GnnModel m = model_;
  m->eval();
  auto dtype = m->log_t_offset.scalar_type();
  auto tensor_device = m->log_t_offset.device();
  SCALEDL_CHECK(tensor_device == device, "predict: model lives on {} but device={} was asked (move it first)",
                tensor_device.str(), device.str());
  for (size_t s = 0; s < graphs.size(); s += batch_size) {
    std::vector<const GraphFeatures*> chunk(graphs.begin() + s,
                                            graphs.begin() + std::min(graphs.size(), s + batch_size));
    std::vector<GraphFeatures> small;
    small.reserve(chunk.size());
    for (const GraphFeatures*& g : chunk) {
      const auto [col, d] = norm_.ood_column(g->z);
      out.ood_column.push_back(col);
      out.ood_distance.push_back(d);
      small.push_back(g->node_weight.empty() ? compress_graph(*g, cfg_.layers) : *g);
      g = &small.back();
    }
    GraphBatch b = collate(chunk, norm_, dtype);
    if (device != torch::kCPU) b = b.to(device);
    GnnOutput o = torch_guard("gnn predict", [&] { return m->forward(b); });
    auto app = [](std::vector<double>& v, const torch::Tensor& t) {
      torch::Tensor c = t.to(torch::kCPU, torch::kFloat64).contiguous();
      v.insert(v.end(), c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    };
    app(out.alpha, o.alpha);
    app(out.beta, o.beta);
    app(out.t_pred_ms, o.t_pred);
  }
  finish_gnn_prediction(
      cfg_, alpha_from_forward_part(), graphs, out,
      [&](const std::vector<const GraphFeatures*>& parts) { return predict(parts, batch_size, device); });
  return out;
}

}  // namespace scaledl
