// The graph refinement's forward pass in Eigen, float32, without LibTorch (see
// graph_inference.hpp). Each step mirrors gnn_model.cpp's LibTorch model: the names in
// the comments are its modules, the order of the float operations is its order.
#include "scaledl/gnn/graph_inference.hpp"

#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11)

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "gnn/gnn_file.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;

/// torch::nn::Linear: y = x W^T + b, W [out, in] row-major as LibTorch stores it.
struct Linear {
  Mat w;
  RowVec b;  ///< empty: no bias
  Mat operator()(const Mat& x) const {
    Mat y = x * w.transpose();
    if (b.size() > 0) y.rowwise() += b;
    return y;
  }
};

float elu(float v) {  // alpha = 1
  return v > 0.f ? v : std::exp(v) - 1.f;
}
float leaky_relu(float v) {  // negative slope 0.01, as the ANEE encoder's
  return v > 0.f ? v : v * 0.01f;
}
float relu(float v) {
  return v > 0.f ? v : 0.f;
}
float sigmoid(float v) {
  return 1.f / (1.f + std::exp(-v));
}

/// segment_softmax (gnn_model.cpp): softmax of scores [E, H] over the edges sharing a
/// destination, shifted by the per-destination MEAN of the scores, clamped at 80.
Mat segment_softmax(const Mat& s, const std::vector<int64_t>& dst, int64_t N) {
  const int64_t E = s.rows(), H = s.cols();
  std::vector<float> cnt(N, 0.f);
  Mat mean = Mat::Zero(N, H);
  for (int64_t e = 0; e < E; ++e) {
    cnt[dst[e]] += 1.f;
    mean.row(dst[e]) += s.row(e);
  }
  for (int64_t n = 0; n < N; ++n) mean.row(n) /= std::max(cnt[n], 1.f);
  Mat ex(E, H);
  Mat den = Mat::Zero(N, H);
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t h = 0; h < H; ++h) ex(e, h) = std::exp(std::min(s(e, h) - mean(dst[e], h), 80.f));
    den.row(dst[e]) += ex.row(e);
  }
  for (int64_t e = 0; e < E; ++e) ex.row(e).array() /= den.row(dst[e]).array();
  return ex;
}

}  // namespace

struct GraphInference::Impl {
  struct Conv {
    Linear wqkvr, wedge;
  };
  Linear lin_in;                                  ///< transformerconv
  std::vector<Conv> convs;                        ///< transformerconv, one per layer
  Linear lin_x, lin_e, wu, a_src, a_dst, we, wm;  ///< anee
  Linear z0, z2, h0, h2;                          ///< z_mlp.0, z_mlp.2, head.0, head.2
  float log_t_offset = 0;

  /// One graph's normalised inputs -> the model's output row o (1 or 2 values).
  RowVec forward(const GnnConfig& c, const Mat& x, const Mat& ea, const std::vector<int64_t>& src,
                 const std::vector<int64_t>& dst, const std::vector<float>& weight, const RowVec& z) const;
  Mat transformerconv(const GnnConfig& c, const Mat& x, const Mat& ea, const std::vector<int64_t>& src,
                      const std::vector<int64_t>& dst) const;
  Mat anee(const GnnConfig& c, const Mat& x, const Mat& ea, const std::vector<int64_t>& src,
           const std::vector<int64_t>& dst) const;
};

Mat GraphInference::Impl::transformerconv(const GnnConfig& c, const Mat& x, const Mat& ea,
                                          const std::vector<int64_t>& src,
                                          const std::vector<int64_t>& dst) const {
  const int64_t N = x.rows(), E = static_cast<int64_t>(src.size());
  const int64_t H = c.heads, out = c.hidden, dk = std::max<int64_t>(1, c.hidden / c.heads);
  const int64_t hq = H * dk;
  const float sqrt_dk = static_cast<float>(std::sqrt(static_cast<double>(dk)));
  Mat h = lin_in(x).unaryExpr(&elu);
  for (const Conv& conv : convs) {
    const Mat qkvr = conv.wqkvr(h);  // [N, q | k | v^(1..H) | root]
    const Mat edge = conv.wedge(ea).unaryExpr(&relu);
    // (11): i = destination, j = source
    Mat eps(E, H);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t l = 0; l < H; ++l) {
        float s = 0;
        for (int64_t d = 0; d < dk; ++d) s += qkvr(dst[e], l * dk + d) * qkvr(src[e], hq + l * dk + d);
        eps(e, l) = s / sqrt_dk + edge(e, l);
      }
    const Mat w = segment_softmax(eps, dst, N);  // (12)
    Mat agg = Mat::Zero(N, H * out);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t l = 0; l < H; ++l)
        agg.row(dst[e]).segment(l * out, out) += w(e, l) * qkvr.row(src[e]).segment(2 * hq + l * out, out);
    // (13): mean over heads of ELU, plus the root skip
    Mat next = Mat::Zero(N, out);
    for (int64_t l = 0; l < H; ++l) next += agg.middleCols(l * out, out).unaryExpr(&elu);
    next /= static_cast<float>(H);
    next += qkvr.rightCols(out);
    h = std::move(next);
  }
  return h;
}

Mat GraphInference::Impl::anee(const GnnConfig& c, const Mat& x, const Mat& ea,
                               const std::vector<int64_t>& src, const std::vector<int64_t>& dst) const {
  const int64_t N = x.rows(), E = static_cast<int64_t>(src.size());
  Mat h = lin_x(x).unaryExpr(&leaky_relu);
  Mat e = lin_e(ea);
  for (int64_t r = 0; r < c.layers; ++r) {
    const Mat hb = wu(h).unaryExpr(&leaky_relu);  // [N, H]
    const Mat as = a_src(hb), ad = a_dst(hb);     // [N, 1]
    const Mat we_e = we(e);                       // [E, He]
    for (int64_t k = 0; k < E; ++k) {
      const float att = as(src[k], 0) + ad(dst[k], 0);  // a.(hs || hd)
      for (int64_t j = 0; j < e.cols(); ++j) e(k, j) = sigmoid(att * we_e(k, j));
    }
    const Mat w = segment_softmax(wm(e), dst, N);  // [E, 1]
    Mat agg = Mat::Zero(N, hb.cols());
    for (int64_t k = 0; k < E; ++k) agg.row(dst[k]) += w(k, 0) * hb.row(src[k]);
    h = (hb + agg).unaryExpr(&leaky_relu);
  }
  return h;
}

RowVec GraphInference::Impl::forward(const GnnConfig& c, const Mat& x, const Mat& ea,
                                     const std::vector<int64_t>& src, const std::vector<int64_t>& dst,
                                     const std::vector<float>& weight, const RowVec& z) const {
  const Mat h = c.encoder == "anee" ? anee(c, x, ea, src, dst) : transformerconv(c, x, ea, src, dst);
  // Readout, each node weighted by the nodes it stands for (compress_graph).
  RowVec g = RowVec::Zero(h.cols());
  float wsum = 0;
  for (int64_t n = 0; n < h.rows(); ++n) {
    g += h.row(n) * weight[n];
    wsum += weight[n];
  }
  if (c.readout == "mean") g /= std::max(wsum, 1.f);
  Mat in(1, g.size() + (c.global_branch ? c.z_hidden : 0));
  in.leftCols(g.size()) = g;
  if (c.global_branch) in.rightCols(c.z_hidden) = z2(z0(z).unaryExpr(&relu)).unaryExpr(&relu);
  return h2(h0(in).unaryExpr(&relu));
}

std::vector<std::pair<std::string, std::vector<int64_t>>> GraphInference::weight_shapes(const GnnConfig& c) {
  c.validate();
  const int64_t F = static_cast<int64_t>(node_feature_names().size());
  const int64_t Fe = static_cast<int64_t>(edge_feature_names().size());
  const int64_t Fz = static_cast<int64_t>(global_feature_names().size());
  std::vector<std::pair<std::string, std::vector<int64_t>>> w;
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias = true) {
    w.push_back({name + ".weight", {out, in}});
    if (bias) w.push_back({name + ".bias", {out}});
  };
  const int64_t H = c.hidden;
  if (c.encoder == "anee") {
    const int64_t He = std::max<int64_t>(4, c.hidden / 2);
    linear("encoder.lin_x", F, H);
    linear("encoder.lin_e", Fe, He);
    linear("encoder.wu", H, H);
    linear("encoder.a_src", H, 1, false);
    linear("encoder.a_dst", H, 1, false);
    linear("encoder.we", He, He);
    linear("encoder.wm", He, 1, false);
  } else {
    const int64_t dk = std::max<int64_t>(1, c.hidden / c.heads);
    linear("encoder.lin_in", F, H);
    for (int64_t l = 0; l < c.layers; ++l) {
      const std::string conv = "encoder.conv" + std::to_string(l);
      linear(conv + ".wqkvr", H, 2 * c.heads * dk + c.heads * H + H);
      linear(conv + ".wedge", Fe, c.heads);
    }
  }
  if (c.global_branch) {
    linear("z_mlp.0", Fz, c.z_hidden);
    linear("z_mlp.2", c.z_hidden, c.z_hidden);
  }
  linear("head.0", H + (c.global_branch ? c.z_hidden : 0), c.mlp_hidden);
  linear("head.2", c.mlp_hidden, c.target == "alpha-beta" ? 2 : 1);
  w.push_back({"log_t_offset", {1}});
  std::sort(w.begin(), w.end());
  return w;
}

GraphInference::GraphInference(const GnnConfig& cfg, Normalizer norm,
                               const std::map<std::string, Weight>& weights, const std::string& ctx)
    : cfg_(cfg), norm_(std::move(norm)) {
  cfg_.validate(ctx + ": config");
  if (!cfg_.device_memory_feature) norm_.ignore_global("log1p_dev_mem_gb");
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size(),
               Fz = global_feature_names().size();
  SCALEDL_CHECK(norm_.x_offset.size() == F && norm_.x_scale.size() == F && norm_.x_lo.size() == F &&
                    norm_.x_hi.size() == F && norm_.e_offset.size() == Fe && norm_.e_scale.size() == Fe &&
                    norm_.e_lo.size() == Fe && norm_.e_hi.size() == Fe && norm_.z_offset.size() == Fz &&
                    norm_.z_scale.size() == Fz && norm_.z_lo.size() == Fz && norm_.z_hi.size() == Fz,
                "{}: normalization statistics have {}/{}/{} columns, features have {}/{}/{}", ctx,
                norm_.x_offset.size(), norm_.e_offset.size(), norm_.z_offset.size(), F, Fe, Fz);
  const auto shapes = weight_shapes(cfg_);
  for (const auto& entry : weights) {
    const std::string& name = entry.first;  // a structured binding cannot be captured before C++20
    const bool known =
        std::any_of(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == name; });
    SCALEDL_CHECK(known, "{}: weight '{}' is not one of a model of this config (config mismatch)", ctx, name);
  }
  auto impl = std::make_shared<Impl>();
  auto get = [&](const std::string& name) -> Mat {
    auto it = weights.find(name);
    SCALEDL_CHECK(it != weights.end(), "{}: tensor 'model.{}' is missing", ctx, name);
    const Weight& w = it->second;
    const auto want =
        std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == name; });
    SCALEDL_CHECK(w.shape == want->second, "{}: tensor 'model.{}' has shape {}, expected {}", ctx, name,
                  fmt::join(w.shape, "x"), fmt::join(want->second, "x"));
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    SCALEDL_CHECK(static_cast<int64_t>(w.values.size()) == n,
                  "{}: tensor 'model.{}' has {} values for shape {}", ctx, name, w.values.size(),
                  fmt::join(w.shape, "x"));
    for (float v : w.values)
      SCALEDL_CHECK(std::isfinite(v), "{}: tensor 'model.{}' has NaN/Inf values", ctx, name);
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1,
                  cols = w.shape.size() == 2 ? w.shape[1] : w.shape[0];
    return Eigen::Map<const Mat>(w.values.data(), rows, cols);
  };
  auto linear = [&](const std::string& name, bool bias = true) {
    Linear l;
    l.w = get(name + ".weight");
    if (bias) l.b = get(name + ".bias");
    return l;
  };
  if (cfg_.encoder == "anee") {
    impl->lin_x = linear("encoder.lin_x");
    impl->lin_e = linear("encoder.lin_e");
    impl->wu = linear("encoder.wu");
    impl->a_src = linear("encoder.a_src", false);
    impl->a_dst = linear("encoder.a_dst", false);
    impl->we = linear("encoder.we");
    impl->wm = linear("encoder.wm", false);
  } else {
    impl->lin_in = linear("encoder.lin_in");
    for (int64_t l = 0; l < cfg_.layers; ++l) {
      const std::string conv = "encoder.conv" + std::to_string(l);
      impl->convs.push_back({linear(conv + ".wqkvr"), linear(conv + ".wedge")});
    }
  }
  if (cfg_.global_branch) {
    impl->z0 = linear("z_mlp.0");
    impl->z2 = linear("z_mlp.2");
  }
  impl->h0 = linear("head.0");
  impl->h2 = linear("head.2");
  impl->log_t_offset = get("log_t_offset")(0, 0);
  impl_ = std::move(impl);
}

GraphInference GraphInference::load(const std::string& path) {
  const gnn_detail::GnnFile f = gnn_detail::read_gnn_file(path);
  std::map<std::string, Weight> weights;
  for (const auto& [name, shape] : weight_shapes(f.cfg))
    weights[name] = Weight{shape, gnn_detail::gnn_file_weight(f, name, shape, path)};
  gnn_detail::check_gnn_file_tensor_count(f, weights.size(), path);
  GraphInference m(f.cfg, f.norm, weights, path);
  m.meta_ = gnn_detail::gnn_file_metadata(f);
  return m;
}

bool GraphInference::alpha_from_forward_part() const {
  static const size_t share_backward = global_feature_index("share_backward");
  return cfg_.ood_tau > 0 && share_backward < norm_.z_hi.size() && norm_.z_hi[share_backward] <= 0;
}

GnnPrediction GraphInference::predict(const std::vector<GraphFeatures>& graphs) const {
  std::vector<const GraphFeatures*> ptrs;
  for (const auto& g : graphs) ptrs.push_back(&g);
  return predict(ptrs);
}

void GraphInference::add_member(GraphInference m, const std::string& ctx) {
  SCALEDL_CHECK(impl_ && m.impl_, "{}: an ensemble member is not trained or loaded", ctx);
  SCALEDL_CHECK(m.more_.empty(), "{}: an ensemble member is itself an ensemble", ctx);
  SCALEDL_CHECK(m.cfg_.to_json() == cfg_.to_json(), "{}: config {} differs from the first member's {}", ctx,
                m.cfg_.to_json().dump(), cfg_.to_json().dump());
  more_.push_back(std::move(m));
}

GnnPrediction GraphInference::predict(const std::vector<const GraphFeatures*>& graphs0) const {
  if (more_.empty()) return predict_one(graphs0);
  // The members share the config, so each graph is compressed once for all of them.
  std::vector<GraphFeatures> small;
  small.reserve(graphs0.size());
  std::vector<const GraphFeatures*> graphs;
  for (const GraphFeatures* g : graphs0) {
    if (g->node_weight.empty()) {
      small.push_back(compress_graph(*g, cfg_.layers));
      graphs.push_back(&small.back());
    } else {
      graphs.push_back(g);
    }
  }
  GnnPrediction out = predict_one(graphs);
  // The geometric mean of the members' alpha and beta (their log's mean), each member finished as
  // it would be alone; T_pred from them (eq. 2).
  const double k = static_cast<double>(members());
  std::vector<double> la(out.alpha.size()), lb(out.beta.size());
  for (size_t i = 0; i < la.size(); ++i) {
    la[i] = std::log(out.alpha[i]);
    lb[i] = out.beta[i] > 0 ? std::log(out.beta[i]) : 0.0;
  }
  for (const GraphInference& m : more_) {
    const GnnPrediction p = m.predict_one(graphs);
    for (size_t i = 0; i < la.size(); ++i) {
      la[i] += std::log(p.alpha[i]);
      lb[i] += p.beta[i] > 0 ? std::log(p.beta[i]) : 0.0;
    }
  }
  for (size_t i = 0; i < la.size(); ++i) {
    out.alpha[i] = std::exp(la[i] / k);
    out.beta[i] = out.beta[i] > 0 ? std::exp(lb[i] / k) : 0.0;
    out.t_pred_ms[i] = out.alpha[i] * graphs[i]->t_sum_ms + out.beta[i] * graphs[i]->t_comm_ms;
  }
  return out;
}

GnnPrediction GraphInference::predict_one(const std::vector<const GraphFeatures*>& graphs) const {
  SCALEDL_CHECK(impl_, "predict: the graph model is not trained or loaded");
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size(),
               Fz = global_feature_names().size();
  const bool two = cfg_.target == "alpha-beta";
  const float L = static_cast<float>(std::log(cfg_.alpha_bound));
  GnnPrediction out;
  for (const GraphFeatures* g0 : graphs) {
    const auto [col, d] = norm_.ood_column(g0->z);
    out.ood_column.push_back(col);
    out.ood_distance.push_back(d);
    GraphFeatures small;
    if (g0->node_weight.empty()) small = compress_graph(*g0, cfg_.layers);
    const GraphFeatures& g = g0->node_weight.empty() ? small : *g0;
    // What collate() checks and does: shapes, then clamp and normalise.
    const size_t N = static_cast<size_t>(g.num_nodes), E = static_cast<size_t>(g.num_edges);
    SCALEDL_CHECK(g.x.size() == N * F && g.e.size() == E * Fe && g.z.size() == Fz && g.src.size() == E &&
                      g.dst.size() == E && g.node_weight.size() == N,
                  "graph '{}': feature arrays do not match its {} nodes / {} edges", g.label, g.num_nodes,
                  g.num_edges);
    for (size_t k = 0; k < E; ++k)
      SCALEDL_CHECK(g.src[k] >= 0 && static_cast<size_t>(g.src[k]) < N && g.dst[k] >= 0 &&
                        static_cast<size_t>(g.dst[k]) < N,
                    "graph '{}': edge[{}] = ({}, {}) outside [0, {})", g.label, k, g.src[k], g.dst[k], N);
    Mat x(N, F), ea(E, Fe);
    RowVec z(Fz);
    normalize_columns(g.x, F, norm_.x_offset, norm_.x_scale, norm_.x_lo, norm_.x_hi, x.data());
    normalize_columns(g.e, Fe, norm_.e_offset, norm_.e_scale, norm_.e_lo, norm_.e_hi, ea.data());
    normalize_columns(g.z, Fz, norm_.z_offset, norm_.z_scale, norm_.z_lo, norm_.z_hi, z.data());
    const RowVec o = impl_->forward(cfg_, x, ea, g.src, g.dst, g.node_weight, z);
    // The model's output in its float32 (GnnModelImpl::forward), then as double.
    const float t_sum = static_cast<float>(g.t_sum_ms), t_comm = static_cast<float>(g.t_comm_ms);
    if (two) {
      const float alpha = std::exp(L * std::tanh(o(0) / L)), beta = std::exp(L * std::tanh(o(1) / L));
      out.alpha.push_back(alpha);
      out.beta.push_back(beta);
      out.t_pred_ms.push_back(alpha * t_sum + beta * t_comm);  // eq. 2
    } else {
      const float t_pred = std::exp(o(0) + impl_->log_t_offset);
      out.alpha.push_back(t_pred / t_sum);
      out.beta.push_back(0.0);
      out.t_pred_ms.push_back(t_pred);
    }
  }
  finish_gnn_prediction(
      cfg_, alpha_from_forward_part(), graphs, out,
      [this](const std::vector<const GraphFeatures*>& parts) { return predict_one(parts); });
  return out;
}

void finish_gnn_prediction(
    const GnnConfig& cfg, bool from_forward, const std::vector<const GraphFeatures*>& graphs,
    GnnPrediction& out,
    const std::function<GnnPrediction(const std::vector<const GraphFeatures*>&)>& predict_parts) {
  // Out-of-domain shrinkage toward the plain sum (GnnConfig::ood_tau).
  if (cfg.ood_tau > 0)
    for (size_t i = 0; i < graphs.size(); ++i) {
      const double d = out.ood_distance[i];
      if (d <= 0) continue;
      const double w = std::exp(-d / cfg.ood_tau);
      out.alpha[i] = std::exp(w * std::log(out.alpha[i]));
      out.beta[i] = cfg.target == "alpha-beta" ? std::exp(w * std::log(out.beta[i])) : 0.0;
      out.t_pred_ms[i] = out.alpha[i] * graphs[i]->t_sum_ms + out.beta[i] * graphs[i]->t_comm_ms;
    }
  out.alpha_from_forward.assign(graphs.size(), 0);
  // A mode the refinement never saw (no training run had backward nodes): the
  // run's alpha is that of its forward part, when the part is nearer the training
  // range than the run. The device's efficiency, most of what alpha corrects, is
  // shared by forward and backward kernels; shrinking toward the plain sum would
  // throw that away (docs/unseen-gpu.md, "A mode the refinement never saw").
  if (!from_forward) return;
  std::vector<size_t> at;
  std::vector<const GraphFeatures*> parts;
  for (size_t i = 0; i < graphs.size(); ++i)
    if (out.ood_distance[i] > 0 && graphs[i]->forward_part) {
      at.push_back(i);
      parts.push_back(graphs[i]->forward_part.get());
    }
  if (parts.empty()) return;
  const GnnPrediction f = predict_parts(parts);
  for (size_t j = 0; j < at.size(); ++j) {
    const size_t i = at[j];
    if (!(f.ood_distance[j] < out.ood_distance[i])) continue;
    out.alpha[i] = f.alpha[j];
    out.t_pred_ms[i] = out.alpha[i] * graphs[i]->t_sum_ms + out.beta[i] * graphs[i]->t_comm_ms;
    out.alpha_from_forward[i] = 1;
  }
}

}  // namespace scaledl
