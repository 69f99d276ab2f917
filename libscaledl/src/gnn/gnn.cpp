// Graph refinement model, training, prediction and the weights file (see gnn.hpp).
#include "scaledl/gnn/gnn.hpp"
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <tuple>
#include <type_traits>

#include "gnn/safetensors.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

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

void check_choice(const std::string& v, std::initializer_list<const char*> ok, const std::string& key) {
  for (const char* o : ok)
    if (v == o) return;
  std::string list;
  for (const char* o : ok) list += (list.empty() ? "" : ", ") + std::string(o);
  fail("{}={} is not one of: {}", key, v, list);
}

}  // namespace

// ---- config -------------------------------------------------------------------

nlohmann::json GnnConfig::to_json() const {
  return {{"encoder", encoder},
          {"target", target},
          {"readout", readout},
          {"hidden", hidden},
          {"layers", layers},
          {"heads", heads},
          {"z_hidden", z_hidden},
          {"mlp_hidden", mlp_hidden},
          {"global_branch", global_branch},
          {"alpha_bound", alpha_bound},
          {"ood_tau", ood_tau},
          {"device_memory_feature", device_memory_feature}};
}

GnnConfig GnnConfig::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected an object, got {}", ctx, show(j));
  GnnConfig c;
  c.encoder = get_str_or(j, "encoder", ctx, c.encoder);
  c.target = get_str_or(j, "target", ctx, c.target);
  c.readout = get_str_or(j, "readout", ctx, c.readout);
  c.hidden = get_int_or(j, "hidden", ctx, 1, 4096, c.hidden);
  c.layers = get_int_or(j, "layers", ctx, 1, 64, c.layers);
  c.heads = get_int_or(j, "heads", ctx, 1, 64, c.heads);
  c.z_hidden = get_int_or(j, "z_hidden", ctx, 1, 4096, c.z_hidden);
  c.mlp_hidden = get_int_or(j, "mlp_hidden", ctx, 1, 4096, c.mlp_hidden);
  if (j.contains("global_branch")) {  // absent in files written before the NoMLP ablation: true
    SCALEDL_CHECK(j["global_branch"].is_boolean(), "{}.global_branch={} is not true or false", ctx,
                  j["global_branch"].dump());
    c.global_branch = j["global_branch"].get<bool>();
  }
  c.alpha_bound = get_num_or(j, "alpha_bound", ctx, 1.0 + 1e-9, 1e6, c.alpha_bound);
  c.ood_tau = get_num_or(j, "ood_tau", ctx, 0.0, 1e9, c.ood_tau);
  c.device_memory_feature =
      get_bool_or(j, "device_memory_feature", ctx, true);  // absent: from before 2026-11-26
  c.validate(ctx);
  return c;
}

void GnnConfig::validate(const std::string& ctx) const {
  check_choice(encoder, {"transformerconv", "anee"}, ctx + ".encoder");
  check_choice(target, {"alpha-beta", "direct"}, ctx + ".target");
  check_choice(readout, {"mean", "sum"}, ctx + ".readout");
  SCALEDL_CHECK(hidden >= 1 && hidden <= 4096, "{}.hidden={} must be in [1, 4096]", ctx, hidden);
  SCALEDL_CHECK(layers >= 1 && layers <= 64, "{}.layers={} must be in [1, 64]", ctx, layers);
  SCALEDL_CHECK(heads >= 1 && heads <= 64, "{}.heads={} must be in [1, 64]", ctx, heads);
  SCALEDL_CHECK(z_hidden >= 1 && z_hidden <= 4096, "{}.z_hidden={} must be in [1, 4096]", ctx, z_hidden);
  SCALEDL_CHECK(mlp_hidden >= 1 && mlp_hidden <= 4096, "{}.mlp_hidden={} must be in [1, 4096]", ctx,
                mlp_hidden);
  SCALEDL_CHECK(std::isfinite(alpha_bound) && alpha_bound > 1 && alpha_bound <= 1e6,
                "{}.alpha_bound={} must be in (1, 1e6]", ctx, alpha_bound);
  SCALEDL_CHECK(std::isfinite(ood_tau) && ood_tau >= 0, "{}.ood_tau={} must be >= 0 (0 = off)", ctx, ood_tau);
}

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

// ---- training -----------------------------------------------------------------

nlohmann::json GnnTrainOptions::to_json() const {
  return {{"epochs", epochs},
          {"lr", lr},
          {"batch_size", batch_size},
          {"val_fraction", val_fraction},
          {"patience", patience},
          {"loss", loss},
          {"normalization", normalization},
          {"seed", seed}};
}

nlohmann::json GnnTrainReport::to_json() const {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"train_graphs", train_graphs},
          {"val_graphs", val_graphs},
          {"epochs_run", epochs_run},
          {"best_epoch", best_epoch},
          {"train_mre_before", num(train_mre_before)},
          {"val_mre_before", num(val_mre_before)},
          {"train_mre", num(train_mre)},
          {"val_mre", num(val_mre)},
          {"mean_alpha", num(mean_alpha)},
          {"mean_beta", num(mean_beta)},
          {"seconds", seconds}};
}

double mean_relative_error(const std::vector<double>& pred, const std::vector<double>& y) {
  SCALEDL_CHECK(pred.size() == y.size(), "mean_relative_error: {} predictions for {} labels", pred.size(),
                y.size());
  if (y.empty()) return NAN;
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += std::fabs(pred[i] - y[i]) / y[i];
  return s / static_cast<double>(y.size());
}

GraphPredictor::GraphPredictor(const GnnConfig& cfg, Normalizer norm)
    : cfg_(cfg), norm_(std::move(norm)), model_(GnnModel(cfg)) {
  if (!cfg_.device_memory_feature) norm_.ignore_global("log1p_dev_mem_gb");
}

namespace {

double mre_before(const std::vector<const GraphFeatures*>& gs) {
  std::vector<double> p, y;
  for (const auto* g : gs) {
    p.push_back(g->t_sum_ms + g->t_comm_ms);
    y.push_back(g->target_ms);
  }
  return mean_relative_error(p, y);
}

std::vector<double> targets(const std::vector<const GraphFeatures*>& gs) {
  std::vector<double> y;
  for (const auto* g : gs) y.push_back(g->target_ms);
  return y;
}

}  // namespace

GraphPredictor GraphPredictor::train(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                     const GnnTrainOptions& opt, GnnTrainReport* report) {
  cfg.validate();
  SCALEDL_CHECK(opt.epochs >= 1, "epochs={} must be >= 1", opt.epochs);
  SCALEDL_CHECK(opt.lr > 0 && std::isfinite(opt.lr), "lr={} must be > 0", opt.lr);
  SCALEDL_CHECK(opt.weight_decay >= 0, "weight_decay={} must be >= 0", opt.weight_decay);
  SCALEDL_CHECK(opt.batch_size >= 1, "batch_size={} must be >= 1", opt.batch_size);
  SCALEDL_CHECK(opt.val_fraction >= 0 && opt.val_fraction <= 0.9, "val_fraction={} must be in [0, 0.9]",
                opt.val_fraction);
  SCALEDL_CHECK(opt.patience >= 1, "patience={} must be >= 1", opt.patience);
  check_choice(opt.loss, {"mse-log", "mre"}, "loss");
  SCALEDL_CHECK(!graphs.empty(), "no training graphs (the store has no ok model runs?)");
  for (size_t i = 0; i < graphs.size(); ++i)
    SCALEDL_CHECK(std::isfinite(graphs[i].target_ms) && graphs[i].target_ms > 0,
                  "training graph[{}] ('{}'): target_ms={} must be finite and > 0", i, graphs[i].label,
                  graphs[i].target_ms);
  const auto t0 = std::chrono::steady_clock::now();

  // Split: a seeded permutation; validation only when at least 5 graphs.
  std::mt19937_64 rng(opt.seed);
  std::vector<size_t> perm(graphs.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t nval = graphs.size() >= 5 ? static_cast<size_t>(std::lround(opt.val_fraction * graphs.size())) : 0;
  nval = std::min(nval, graphs.size() - 1);
  std::vector<const GraphFeatures*> tr, va;
  for (size_t i = 0; i < perm.size(); ++i) (i < nval ? va : tr).push_back(&graphs[perm[i]]);

  torch::manual_seed(opt.seed);
  GraphPredictor p(cfg, Normalizer::fit(tr, opt.normalization));
  // From here on the graphs are their exact compressions (compress_graph): same
  // predictions, fewer nodes. Normalisation statistics above are of the originals.
  const std::vector<const GraphFeatures*> va_orig = va;
  std::vector<GraphFeatures> compressed;
  compressed.reserve(tr.size() + va.size());
  for (auto* set : {&tr, &va})
    for (const GraphFeatures*& g : *set) {
      compressed.push_back(compress_graph(*g, cfg.layers));
      g = &compressed.back();
    }
  GnnModel& m = p.model_;
  if (cfg.target == "direct") {
    double s = 0;
    for (const auto* g : tr) s += std::log(g->target_ms);
    torch::NoGradGuard ng;
    m->log_t_offset.fill_(s / static_cast<double>(tr.size()));
  }
  torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(opt.lr).weight_decay(opt.weight_decay));

  // Full-batch evaluation sets, collated once.
  const GraphBatch trb = collate(tr, p.norm_);
  const GraphBatch vab = va.empty() ? trb : collate(va, p.norm_);
  const std::vector<double> try_ = targets(tr), vay = va.empty() ? try_ : targets(va);
  auto eval_mre = [&](const GraphBatch& b, const std::vector<double>& y) {
    torch::NoGradGuard ng;
    m->eval();
    torch::Tensor t = m->forward(b).t_pred.to(torch::kFloat64).contiguous();
    m->train();
    std::vector<double> pr(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    return mean_relative_error(pr, y);
  };

  // One batch that never changes when batch_size covers the training set.
  const bool single = static_cast<size_t>(opt.batch_size) >= tr.size();
  std::vector<torch::Tensor> best;
  double best_mre = INFINITY;
  int64_t best_epoch = 0, epoch = 0;
  std::vector<size_t> order(tr.size());
  std::iota(order.begin(), order.end(), 0);
  for (epoch = 1; epoch <= opt.epochs; ++epoch) {
    if (!single) std::shuffle(order.begin(), order.end(), rng);
    double loss_sum = 0;
    int64_t steps = 0;
    for (size_t s = 0; s < order.size(); s += opt.batch_size) {
      GraphBatch b;
      if (single) {
        b = trb;
      } else {
        std::vector<const GraphFeatures*> chunk;
        for (size_t i = s; i < std::min(order.size(), s + opt.batch_size); ++i) chunk.push_back(tr[order[i]]);
        b = collate(chunk, p.norm_);
      }
      GnnOutput o = m->forward(b);
      torch::Tensor loss = opt.loss == "mre" ? ((o.t_pred - b.y).abs() / b.y).mean()
                                             : (o.log_t_pred - torch::log(b.y)).pow(2).mean();
      adam.zero_grad();
      loss.backward();
      adam.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    // Without a validation set the epoch's mean training loss decides early
    // stopping (saves one full forward pass per epoch).
    const double vmre = va.empty() ? loss_sum / std::max<int64_t>(1, steps) : eval_mre(vab, vay);
    if (opt.on_epoch) opt.on_epoch(epoch, loss_sum / std::max<int64_t>(1, steps), vmre);
    if (vmre < best_mre) {
      best_mre = vmre;
      best_epoch = epoch;
      best.clear();
      for (const auto& t : m->parameters()) best.push_back(t.detach().clone());
    } else if (epoch - best_epoch >= opt.patience) {
      break;
    }
  }
  if (!best.empty()) {
    torch::NoGradGuard ng;
    auto params = m->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(best[i]);
  }
  // A diverged run is an error, never a model: callers write nothing then.
  SCALEDL_CHECK(std::isfinite(best_mre),
                "graph training diverged: the {} loss was never finite in {} epochs (lr={}); lower --lr",
                opt.loss, std::min(epoch, opt.epochs), opt.lr);
  for (const auto& kv : m->named_parameters())
    SCALEDL_CHECK(torch::isfinite(kv.value()).all().item<bool>(),
                  "graph training diverged: parameter '{}' is NaN/Inf (lr={}); lower --lr", kv.key(), opt.lr);
  m->eval();
  if (report) {
    GnnTrainReport& r = *report;
    r.train_graphs = static_cast<int64_t>(tr.size());
    r.val_graphs = static_cast<int64_t>(va.size());
    r.epochs_run = std::min(epoch, opt.epochs);
    r.best_epoch = best_epoch;
    r.train_mre_before = mre_before(tr);
    r.val_mre_before = va.empty() ? NAN : mre_before(va);
    r.train_mre = eval_mre(trb, try_);
    r.val_mre = va.empty() ? NAN : eval_mre(vab, vay);
    std::vector<const GraphFeatures*> all;
    for (const auto& g : graphs) all.push_back(&g);
    GnnPrediction pr = p.predict(all);
    r.mean_alpha = std::accumulate(pr.alpha.begin(), pr.alpha.end(), 0.0) / pr.alpha.size();
    r.mean_beta = std::accumulate(pr.beta.begin(), pr.beta.end(), 0.0) / pr.beta.size();
    if (!va_orig.empty()) {
      GnnPrediction pv = p.predict(va_orig);
      for (size_t i = 0; i < va_orig.size(); ++i) {
        r.val_log_residuals.push_back(std::log(va_orig[i]->target_ms / pv.t_pred_ms[i]));
        r.val_ood_distance.push_back(pv.ood_distance[i]);
        r.val_t_sum_ms.push_back(va_orig[i]->t_sum_ms);
      }
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return p;
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
  // Out-of-domain shrinkage toward the plain sum (GnnConfig::ood_tau).
  if (cfg_.ood_tau > 0)
    for (size_t i = 0; i < graphs.size(); ++i) {
      const double d = out.ood_distance[i];
      if (d <= 0) continue;
      const double w = std::exp(-d / cfg_.ood_tau);
      out.alpha[i] = std::exp(w * std::log(out.alpha[i]));
      out.beta[i] = cfg_.target == "alpha-beta" ? std::exp(w * std::log(out.beta[i])) : 0.0;
      out.t_pred_ms[i] = out.alpha[i] * graphs[i]->t_sum_ms + out.beta[i] * graphs[i]->t_comm_ms;
    }
  out.alpha_from_forward.assign(graphs.size(), 0);
  // A mode the refinement never saw (no training run had backward nodes): the
  // run's alpha is that of its forward part, when the part is nearer the training
  // range than the run. The device's efficiency, most of what alpha corrects, is
  // shared by forward and backward kernels; shrinking toward the plain sum would
  // throw that away (docs/unseen-gpu.md, "A mode the refinement never saw").
  if (alpha_from_forward_part()) {
    std::vector<size_t> at;
    std::vector<const GraphFeatures*> parts;
    for (size_t i = 0; i < graphs.size(); ++i)
      if (out.ood_distance[i] > 0 && graphs[i]->forward_part) {
        at.push_back(i);
        parts.push_back(graphs[i]->forward_part.get());
      }
    if (!parts.empty()) {
      const GnnPrediction f = predict(parts, batch_size, device);
      for (size_t j = 0; j < at.size(); ++j) {
        const size_t i = at[j];
        if (!(f.ood_distance[j] < out.ood_distance[i])) continue;
        out.alpha[i] = f.alpha[j];
        out.t_pred_ms[i] = out.alpha[i] * graphs[i]->t_sum_ms + out.beta[i] * graphs[i]->t_comm_ms;
        out.alpha_from_forward[i] = 1;
      }
    }
  }
  return out;
}

// ---- cross-validation -----------------------------------------------------------

nlohmann::json GnnCvReport::to_json() const {
  nlohmann::json per = nlohmann::json::array();
  for (size_t i = 0; i < labels.size(); ++i)
    per.push_back({{"label", labels[i]},
                   {"fold", fold[i]},
                   {"target_ms", target_ms[i]},
                   {"before_ms", before_ms[i]},
                   {"pred_ms", pred_ms[i]},
                   {"alpha", alpha[i]}});
  return {{"folds", folds},       {"graphs", graphs},   {"mre_before", mre_before}, {"mre", mre},
          {"fold_mre", fold_mre}, {"seconds", seconds}, {"per_graph", per}};
}

std::vector<int64_t> graph_cv_folds(size_t n, int64_t folds, uint64_t seed) {
  SCALEDL_CHECK(folds >= 2, "folds={} must be >= 2", folds);
  SCALEDL_CHECK(static_cast<size_t>(folds) <= n, "folds={} but only {} graphs", folds, n);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> fold(n, -1);
  for (size_t i = 0; i < n; ++i) fold[perm[i]] = static_cast<int64_t>(i % folds);
  return fold;
}

GnnCvReport cross_validate_graphs(const std::vector<int64_t>& fold, int64_t folds, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt,
                                  const std::function<std::vector<GraphFeatures>(int64_t)>& graphs_of_fold) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = fold.size();
  GnnCvReport r;
  r.folds = folds;
  r.graphs = static_cast<int64_t>(n);
  r.fold = fold;
  r.labels.resize(n);
  r.target_ms.assign(n, NAN);
  r.before_ms.assign(n, NAN);
  r.pred_ms.assign(n, NAN);
  r.alpha.assign(n, NAN);
  for (int64_t k = 0; k < folds; ++k) {
    std::vector<GraphFeatures> all = graphs_of_fold(k);
    SCALEDL_CHECK(all.size() == n, "cross-validation fold {}: {} graphs for {} fold entries", k, all.size(),
                  n);
    std::vector<GraphFeatures> train, test;
    std::vector<size_t> test_ids;
    for (size_t i = 0; i < n; ++i) {
      if (fold[i] != k) {
        train.push_back(std::move(all[i]));
        continue;
      }
      r.labels[i] = all[i].label;
      r.target_ms[i] = all[i].target_ms;
      r.before_ms[i] = all[i].t_sum_ms + all[i].t_comm_ms;
      test_ids.push_back(i);
      test.push_back(std::move(all[i]));
    }
    const GnnPrediction pr = GraphPredictor::train(train, cfg, opt).predict(test);
    std::vector<double> y;
    for (size_t j = 0; j < test_ids.size(); ++j) {
      r.pred_ms[test_ids[j]] = pr.t_pred_ms[j];
      r.alpha[test_ids[j]] = pr.alpha[j];
      y.push_back(r.target_ms[test_ids[j]]);
    }
    r.fold_mre.push_back(mean_relative_error(pr.t_pred_ms, y));
  }
  r.mre_before = mean_relative_error(r.before_ms, r.target_ms);
  r.mre = mean_relative_error(r.pred_ms, r.target_ms);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

GnnCvReport cross_validate_graphs(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt, int64_t folds) {
  return cross_validate_graphs(graph_cv_folds(graphs.size(), folds, opt.seed), folds, cfg, opt,
                               [&](int64_t) { return graphs; });
}

// ---- weights file -------------------------------------------------------------

namespace {

torch::Tensor vec_tensor(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kFloat32)
      .clone();
}

std::vector<float> tensor_vec(const SafeTensors& st, const std::string& name, size_t n,
                              const std::string& path) {
  auto it = st.tensors.find(name);
  SCALEDL_CHECK(it != st.tensors.end(), "{}: tensor '{}' is missing", path, name);
  torch::Tensor t = it->second.to(torch::kFloat32).contiguous();
  SCALEDL_CHECK(t.dim() == 1 && static_cast<size_t>(t.numel()) == n,
                "{}: tensor '{}' has {} values, expected {}", path, name, t.numel(), n);
  std::vector<float> v(t.data_ptr<float>(), t.data_ptr<float>() + n);
  for (size_t i = 0; i < n; ++i)
    SCALEDL_CHECK(std::isfinite(v[i]) && (name.find("scale") == std::string::npos || v[i] > 0),
                  "{}: tensor '{}'[{}]={} is invalid", path, name, i, v[i]);
  return v;
}

/// The normalisation vectors saved as tensors "norm.<name>": (name, vector, columns).
template <typename N>  // Normalizer or const Normalizer
auto norm_tensors(N& n) {
  using V = std::conditional_t<std::is_const_v<N>, const std::vector<float>, std::vector<float>>;
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size(),
               Fz = global_feature_names().size();
  return std::vector<std::tuple<std::string, V*, size_t>>{
      {"x_offset", &n.x_offset, F}, {"x_scale", &n.x_scale, F},    {"e_offset", &n.e_offset, Fe},
      {"e_scale", &n.e_scale, Fe},  {"z_offset", &n.z_offset, Fz}, {"z_scale", &n.z_scale, Fz},
      {"x_lo", &n.x_lo, F},         {"x_hi", &n.x_hi, F},          {"e_lo", &n.e_lo, Fe},
      {"e_hi", &n.e_hi, Fe},        {"z_lo", &n.z_lo, Fz},         {"z_hi", &n.z_hi, Fz}};
}

const std::string& meta_field(const SafeTensors& st, const std::string& key, const std::string& path) {
  auto it = st.metadata.find(key);
  SCALEDL_CHECK(it != st.metadata.end(), "{}: __metadata__.{} is missing (not a ScaleDL graph model?)", path,
                key);
  return it->second;
}

nlohmann::json meta_json(const SafeTensors& st, const std::string& key, const std::string& path) {
  const std::string& text = meta_field(st, key, path);
  try {
    return parse_json_text(text, "__metadata__." + key);  // depth-limited
  } catch (const Error& e) {
    fail("{}: __metadata__.{} is not valid JSON ({})", path, key, e.what());
  }
}

}  // namespace

void GraphPredictor::save(const std::string& path, const nlohmann::json& extra) const {
  SCALEDL_CHECK(model_, "save: the graph model is not trained or loaded");
  SafeTensors st;
  for (const auto& kv : model_->named_parameters()) st.tensors["model." + kv.key()] = kv.value();
  for (const auto& kv : model_->named_buffers()) st.tensors["model." + kv.key()] = kv.value();
  for (const auto& [name, v, n] : norm_tensors(norm_)) st.tensors["norm." + name] = vec_tensor(*v);
  st.metadata["format"] = "scaledl-gnn";
  st.metadata["format_version"] = std::to_string(kFormatVersion);
  st.metadata["encoder"] = cfg_.encoder;
  st.metadata["config"] = cfg_.to_json().dump();
  st.metadata["normalization"] = norm_.kind;
  st.metadata["node_features"] = nlohmann::json(node_feature_names()).dump();
  st.metadata["edge_features"] = nlohmann::json(edge_feature_names()).dump();
  st.metadata["global_features"] = nlohmann::json(global_feature_names()).dump();
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it)
      st.metadata[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  st.metadata["content_sha256"] = safetensors_content_sha256(st);
  save_safetensors(path, st);
}

GraphPredictor GraphPredictor::load(const std::string& path) {
  {
    // A regular file only: a FIFO would block the reader forever (issue #39).
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_type t = fs::status(path, ec).type();
    SCALEDL_CHECK(t == fs::file_type::regular || t == fs::file_type::not_found || t == fs::file_type::none,
                  "{}: not a regular file ({}): a graph model is a safetensors file", path,
                  t == fs::file_type::directory ? "a directory"
                  : t == fs::file_type::fifo    ? "a FIFO"
                                                : "a device or socket");
  }
  SafeTensors st = load_safetensors(path);
  const std::string& fmt_name = meta_field(st, "format", path);
  SCALEDL_CHECK(fmt_name == "scaledl-gnn", "{}: __metadata__.format={} is not scaledl-gnn", path, fmt_name);
  const std::string& ver = meta_field(st, "format_version", path);
  SCALEDL_CHECK(ver == std::to_string(kFormatVersion),
                "{}: __metadata__.format_version={} is not supported (this build reads version {})", path,
                ver, kFormatVersion);
  SCALEDL_CHECK(
      st.metadata.count("content_sha256") &&
          st.metadata.at("content_sha256") == safetensors_content_sha256(st),
      "{}: __metadata__.content_sha256 does not match the weights and metadata: the file was altered or "
      "damaged (retrain it with this build)",
      path);
  const std::pair<const char*, const std::vector<std::string>*> feats[] = {
      {"node_features", &node_feature_names()},
      {"edge_features", &edge_feature_names()},
      {"global_features", &global_feature_names()}};
  for (const auto& [key, names] : feats) {
    nlohmann::json j = meta_json(st, key, path);
    SCALEDL_CHECK(j == nlohmann::json(*names),
                  "{}: __metadata__.{} differs from this build's features (retrain the graph model)", path,
                  key);
  }
  GnnConfig cfg = GnnConfig::from_json(meta_json(st, "config", path), path + ": __metadata__.config");
  Normalizer norm;
  norm.kind = meta_field(st, "normalization", path);
  size_t used = 0;
  for (const auto& [name, v, n] : norm_tensors(norm)) {
    *v = tensor_vec(st, "norm." + name, n, path);
    ++used;
  }
  for (auto [lo, hi, what] :
       {std::make_tuple(&norm.x_lo, &norm.x_hi, "x"), std::make_tuple(&norm.e_lo, &norm.e_hi, "e"),
        std::make_tuple(&norm.z_lo, &norm.z_hi, "z")})
    for (size_t i = 0; i < lo->size(); ++i)
      SCALEDL_CHECK((*lo)[i] <= (*hi)[i], "{}: tensor 'norm.{}_lo'[{}]={} exceeds 'norm.{}_hi'[{}]={}", path,
                    what, i, (*lo)[i], what, i, (*hi)[i]);
  GraphPredictor p(cfg, norm);
  torch::NoGradGuard ng;
  auto assign = [&](const std::string& name, torch::Tensor& dst) {
    auto it = st.tensors.find("model." + name);
    SCALEDL_CHECK(it != st.tensors.end(), "{}: tensor 'model.{}' is missing", path, name);
    SCALEDL_CHECK(it->second.sizes() == dst.sizes(), "{}: tensor 'model.{}' has shape {}, expected {}", path,
                  name, fmt::join(it->second.sizes().vec(), "x"), fmt::join(dst.sizes().vec(), "x"));
    SCALEDL_CHECK(torch::isfinite(it->second).all().item<bool>(), "{}: tensor 'model.{}' has NaN/Inf values",
                  path, name);
    dst.copy_(it->second);
    ++used;
  };
  for (auto& kv : p.model_->named_parameters()) assign(kv.key(), kv.value());
  for (auto& kv : p.model_->named_buffers()) assign(kv.key(), kv.value());
  SCALEDL_CHECK(used == st.tensors.size(),
                "{}: {} tensors in the file but the model uses {} (config mismatch)", path, st.tensors.size(),
                used);
  p.model_->eval();
  for (const auto& [k, v] : st.metadata) {
    try {
      p.meta_[k] = parse_json_text(v, k);
    } catch (const Error&) {
      p.meta_[k] = v;
    }
  }
  return p;
}

}  // namespace scaledl
