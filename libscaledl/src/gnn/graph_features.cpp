// Graph features, their compression and normalisation (see graph_features.hpp). No LibTorch.
#include "scaledl/gnn/graph_features.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "scaledl/core/error.hpp"

namespace scaledl {
namespace {

constexpr int kMaxDims = 5;  // dims of a node the graph network reads (attention, conv2d_patch: all)

float lg(double v) {
  return static_cast<float>(std::log1p(std::max(0.0, v)));
}

// Kind of layer for the share_* global features: gemm 0, attention 1, norm 2, elementwise 3,
// other 4 (embedding, loss, optimizer); a column of the layer type's row (layer_types.hpp).
int layer_kind(LayerType t) {
  return static_cast<int>(layer_info(t).kind);
}

}  // namespace

const std::vector<std::string>& node_feature_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& info : all_layer_infos()) v.push_back(std::string("type_") + info.name);  // one-hot
    v.insert(v.end(), {"dir_forward", "dir_backward", "dir_update"});                          // one-hot
    for (int i = 0; i < kMaxDims; ++i) v.push_back("log1p_dim" + std::to_string(i));  // h^struct, 0 = absent
    v.insert(v.end(),
             {"log1p_flops", "log1p_params", "log1p_in_bytes", "log1p_out_bytes", "log1p_weight_bytes",
              "log1p_temp_bytes",  // h^cm of the node's direction
              "log1p_t_us",        // predicted layer time t_l, microseconds
              "t_share"});         // t_l / T_sum
    return v;
  }();
  return n;
}

const std::vector<std::string>& edge_feature_names() {
  static const std::vector<std::string> n = {"log1p_bytes", "backward"};
  return n;
}

const std::vector<std::string>& global_feature_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v = {"log_batch",  "log_seq_len", "log1p_image_size", "dtype_fp32",
                                  "dtype_tf32", "dtype_bf16",  "dtype_fp16",       "opt_sgd",
                                  "opt_adam",   "opt_adamw",   "optimizer_step"};
    for (const auto& d : DeviceRecord::feature_names()) v.push_back("log1p_" + d);
    v.insert(v.end(), {"log_num_devices", "log1p_comm_bw_gbs", "log1p_comm_gamma_us", "log1p_t_sum_ms",
                       "log1p_t_comm_ms", "log1p_params", "log_num_nodes"});
    // Scale-free: shares of T_sum by direction and by kind of layer, the share of
    // communication, and T_sum against the device's roofline time. They stay in
    // range when a model is bigger than every training model.
    v.insert(v.end(), {"share_forward", "share_backward", "share_update", "share_gemm", "share_attention",
                       "share_norm", "share_elementwise", "share_other", "comm_share",
                       "log_t_sum_over_roofline", "log_flop_per_byte"});
    return v;
  }();
  return n;
}

size_t global_feature_index(const std::string& name) {
  const auto& names = global_feature_names();
  const auto it = std::find(names.begin(), names.end(), name);
  SCALEDL_CHECK(it != names.end(), "\"{}\" is not a global feature", name);
  return static_cast<size_t>(it - names.begin());
}

namespace {

/// The forward nodes of `g` (and the edges between them) as an inference graph with
/// their layer times; null when `g` has no other nodes, or no forward node takes time.
std::shared_ptr<const GraphFeatures> forward_part_features(const LayerGraph& g,
                                                           const std::vector<double>& t_l_ms,
                                                           const GraphContext& ctx) {
  LayerGraph f;
  f.model = g.model;
  f.settings = g.settings;
  set_run_mode(f.settings, RunMode::Inference);
  std::vector<int> id(g.nodes.size(), -1);
  std::vector<double> t;
  double t_sum = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].dir != Direction::Forward) continue;
    id[i] = static_cast<int>(f.nodes.size());
    f.nodes.push_back(g.nodes[i]);
    t.push_back(t_l_ms[i]);
    t_sum += t_l_ms[i];
  }
  if (f.nodes.size() == g.nodes.size() || t_sum <= 0) return nullptr;
  for (const LayerEdge& e : g.edges) {
    if (id[e.src] < 0 || id[e.dst] < 0) continue;
    LayerEdge k = e;
    k.src = id[e.src];
    k.dst = id[e.dst];
    f.edges.push_back(std::move(k));
  }
  GraphContext c = ctx;
  c.target_ms = NAN;
  return std::make_shared<GraphFeatures>(featurize(f, t, c));
}

}  // namespace

GraphFeatures featurize(const LayerGraph& g, const std::vector<double>& t_l_ms, const GraphContext& ctx) {
  const auto& nf = node_feature_names();
  const size_t F = nf.size(), Fe = edge_feature_names().size();
  SCALEDL_CHECK(!g.nodes.empty(), "graph of model '{}' has no nodes", g.model.name);
  SCALEDL_CHECK(t_l_ms.size() == g.nodes.size(), "graph of model '{}': {} layer times for {} nodes",
                g.model.name, t_l_ms.size(), g.nodes.size());
  GraphFeatures out;
  out.label = g.model.name;
  out.num_nodes = static_cast<int64_t>(g.nodes.size());
  out.num_edges = static_cast<int64_t>(g.edges.size());
  double t_sum = 0;
  for (size_t i = 0; i < t_l_ms.size(); ++i) {
    SCALEDL_CHECK(std::isfinite(t_l_ms[i]) && t_l_ms[i] >= 0,
                  "layer time of node '{}' is {} ms (must be >= 0)", g.nodes[i].name, t_l_ms[i]);
    t_sum += t_l_ms[i];
  }
  SCALEDL_CHECK(t_sum > 0, "graph of model '{}': T_sum = 0 (all layer times are zero)", g.model.name);
  out.t_sum_ms = t_sum;

  const int ntypes = static_cast<int>(all_layer_infos().size());
  out.x.assign(out.num_nodes * F, 0.f);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const LayerNode& n = g.nodes[i];
    float* r = &out.x[i * F];
    const int t = static_cast<int>(n.type);
    SCALEDL_CHECK(t >= 0 && t < ntypes, "node '{}' has invalid layer type {}", n.name, t);
    r[t] = 1.f;
    r[ntypes + static_cast<int>(n.dir)] = 1.f;
    // The first kMaxDims dims (flash_attention's head sizes and causal flag are past them: its
    // FLOP and bytes below carry them).
    const size_t nd = std::min(n.dims.size(), static_cast<size_t>(kMaxDims));
    for (size_t d = 0; d < nd; ++d) r[ntypes + 3 + d] = lg(static_cast<double>(n.dims[d]));
    float* c = r + ntypes + 3 + kMaxDims;
    c[0] = lg(n.flops());
    c[1] = lg(n.cost.params);
    c[2] = lg(n.cost.in_bytes);
    c[3] = lg(n.cost.out_bytes);
    c[4] = lg(n.cost.weight_bytes);
    c[5] = lg(n.cost.temp_bytes);
    c[6] = lg(t_l_ms[i] * 1e3);
    c[7] = static_cast<float>(t_l_ms[i] / t_sum);
  }
  out.src.reserve(g.edges.size());
  out.dst.reserve(g.edges.size());
  out.e.reserve(g.edges.size() * Fe);
  for (size_t k = 0; k < g.edges.size(); ++k) {
    const LayerEdge& e = g.edges[k];
    SCALEDL_CHECK(e.src >= 0 && e.src < out.num_nodes && e.dst >= 0 && e.dst < out.num_nodes,
                  "graph of model '{}': edge[{}] = ({}, {}) outside [0, {})", g.model.name, k, e.src, e.dst,
                  out.num_nodes);
    out.src.push_back(e.src);
    out.dst.push_back(e.dst);
    out.e.push_back(lg(e.bytes));
    out.e.push_back(e.backward ? 1.f : 0.f);
  }

  // Global features Z and T_comm (eq. 15): gradients of all parameters, in the
  // training dtype (FP32 under autocast: the weights are), all-reduced over num_devices ranks.
  const TrainSettings& s = g.settings;
  const double params = g.total_params();
  double t_comm_s = 0;
  if (s.num_devices > 1)
    t_comm_s = ctx.comm.time_s(gradient_bytes(params, dtype_bytes(weight_dtype(s))), s.num_devices);
  out.t_comm_ms = t_comm_s * 1e3;
  out.target_ms = ctx.target_ms;
  out.z = {static_cast<float>(std::log(static_cast<double>(s.batch))),
           static_cast<float>(std::log(static_cast<double>(s.seq_len))),
           lg(static_cast<double>(s.image_size > 0 ? s.image_size : g.model.image_size))};
  for (int d = 0; d < 4; ++d) out.z.push_back(static_cast<int>(s.dtype) == d ? 1.f : 0.f);
  for (int o = 0; o < 3; ++o) out.z.push_back(static_cast<int>(s.optimizer) == o ? 1.f : 0.f);
  out.z.push_back(s.optimizer_step ? 1.f : 0.f);
  // The mode needs no flag of its own: inference graphs have share_backward = 0 (below).
  for (double f : ctx.device.features()) out.z.push_back(lg(f));
  out.z.push_back(static_cast<float>(std::log(static_cast<double>(std::max<int64_t>(1, s.num_devices)))));
  out.z.push_back(lg(ctx.comm.bandwidth_Bps / 1e9));
  out.z.push_back(lg(ctx.comm.gamma_s * 1e6));
  out.z.push_back(lg(out.t_sum_ms));
  out.z.push_back(lg(out.t_comm_ms));
  out.z.push_back(lg(params));
  out.z.push_back(static_cast<float>(std::log(static_cast<double>(out.num_nodes))));
  double by_dir[3] = {0, 0, 0}, by_kind[5] = {0, 0, 0, 0, 0}, flops = 0, bytes = 0, roofline_ms = 0;
  const double peak = ctx.device.compute_gflops() * 1e9, bw = ctx.device.bandwidth_gbs() * 1e9;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const LayerNode& n = g.nodes[i];
    by_dir[static_cast<int>(n.dir)] += t_l_ms[i];
    by_kind[layer_kind(n.type)] += t_l_ms[i];
    const double b = n.cost.in_bytes + n.cost.out_bytes + n.cost.weight_bytes;
    flops += n.flops();
    bytes += b;
    if (peak > 0 && bw > 0) roofline_ms += 1e3 * std::max(n.flops() / peak, b / bw);
  }
  for (double d : by_dir) out.z.push_back(static_cast<float>(d / t_sum));
  for (double k : by_kind) out.z.push_back(static_cast<float>(k / t_sum));
  out.z.push_back(static_cast<float>(out.t_comm_ms / (t_sum + out.t_comm_ms)));
  out.z.push_back(roofline_ms > 0 ? static_cast<float>(std::log(t_sum / roofline_ms)) : 0.f);
  out.z.push_back(static_cast<float>(std::log((flops + 1) / (bytes + 1))));
  SCALEDL_CHECK(out.z.size() == global_feature_names().size(), "internal: {} global features, {} names",
                out.z.size(), global_feature_names().size());
  apply_host_term(out, ctx.host_node_ms);
  if (ctx.forward_part) out.forward_part = forward_part_features(g, t_l_ms, ctx);
  return out;
}

void apply_host_term(GraphFeatures& f, double node_ms) {
  SCALEDL_CHECK(std::isfinite(node_ms) && node_ms >= 0, "host_node_ms={} must be >= 0 and finite", node_ms);
  if (node_ms <= 0) return;
  if (f.forward_part) {  // shared with the copy this one was made from: give it its own
    auto part = std::make_shared<GraphFeatures>(*f.forward_part);
    apply_host_term(*part, node_ms);
    f.forward_part = std::move(part);
  }
  double nodes = static_cast<double>(f.num_nodes);  // a compressed graph: the nodes it stands for
  if (!f.node_weight.empty()) {
    nodes = 0;
    for (float w : f.node_weight) nodes += w;
  }
  if (nodes * node_ms <= f.t_sum_ms) return;
  f.t_sum_ms = nodes * node_ms;
  static const size_t at = global_feature_index("log1p_t_sum_ms");
  SCALEDL_CHECK(at < f.z.size(), "graph '{}': {} global features, no log1p_t_sum_ms", f.label, f.z.size());
  f.z[at] = lg(f.t_sum_ms);
}

namespace {

/// Dense ids of equal byte strings, numbered in order of first appearance: a hash table of
/// word-wise FNV-1a hashes with the first string of each id kept to compare against (exact equality; a
/// std::map of vectors gave the same ids at several times the cost in allocations).
class DenseIds {
 public:
  int64_t id(const void* bytes, size_t n) {
    const auto* p = static_cast<const unsigned char*>(bytes);
    uint64_t h = 14695981039346656037ull ^ n;  // FNV-1a over 8-byte words, then the tail's bytes
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 1099511628211ull;
      h ^= h >> 29;
    }
    for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    std::vector<int64_t>& bucket = by_hash_[h];
    for (int64_t c : bucket)
      if (keys_[c].size() == n && std::memcmp(keys_[c].data(), p, n) == 0) return c;
    const auto c = static_cast<int64_t>(keys_.size());
    keys_.emplace_back(p, p + n);
    bucket.push_back(c);
    return c;
  }

 private:
  std::unordered_map<uint64_t, std::vector<int64_t>> by_hash_;
  std::vector<std::vector<unsigned char>> keys_;
};

// Dense ids of equal rows: ids[r] == ids[q] iff rows r and q of the
// [rows, cols] array are bitwise equal (exact equality: the features of
// repeated blocks are computed by the same code from the same numbers).
std::vector<int64_t> row_ids(const std::vector<float>& data, size_t rows, size_t cols) {
  DenseIds ids;
  std::vector<int64_t> out(rows);
  for (size_t r = 0; r < rows; ++r) out[r] = ids.id(&data[r * cols], cols * sizeof(float));
  return out;
}

}  // namespace

GraphFeatures compress_graph(const GraphFeatures& g, int64_t rounds) {
  SCALEDL_CHECK(rounds >= 1, "compress_graph: rounds={} must be >= 1", rounds);
  SCALEDL_CHECK(g.node_weight.empty(), "compress_graph: graph '{}' is already compressed", g.label);
  const size_t N = static_cast<size_t>(g.num_nodes), E = static_cast<size_t>(g.num_edges);
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size();
  SCALEDL_CHECK(g.x.size() == N * F && g.e.size() == E * Fe && g.src.size() == E && g.dst.size() == E,
                "graph '{}': feature arrays do not match its {} nodes / {} edges", g.label, N, E);
  // In-edges of each node (CSR by destination, edges in their original order).
  std::vector<size_t> start(N + 1, 0), in(E);
  for (size_t k = 0; k < E; ++k) {
    SCALEDL_CHECK(g.src[k] >= 0 && static_cast<size_t>(g.src[k]) < N && g.dst[k] >= 0 &&
                      static_cast<size_t>(g.dst[k]) < N,
                  "graph '{}': edge[{}] = ({}, {}) outside [0, {})", g.label, k, g.src[k], g.dst[k], N);
    ++start[g.dst[k] + 1];
  }
  for (size_t v = 0; v < N; ++v) start[v + 1] += start[v];
  {
    std::vector<size_t> fill(start.begin(), start.end() - 1);
    for (size_t k = 0; k < E; ++k) in[fill[g.dst[k]]++] = k;
  }
  const std::vector<int64_t> eid = row_ids(g.e, E, Fe);
  std::vector<int64_t> colour = row_ids(g.x, N, F);
  for (int64_t r = 0; r < rounds; ++r) {
    DenseIds ids;
    std::vector<int64_t> next(N), sig;
    std::vector<std::pair<int64_t, int64_t>> nb;
    for (size_t v = 0; v < N; ++v) {
      nb.clear();
      for (size_t i = start[v]; i < start[v + 1]; ++i) nb.emplace_back(colour[g.src[in[i]]], eid[in[i]]);
      std::sort(nb.begin(), nb.end());  // a multiset: the order of in-edges does not matter
      sig.assign(1, colour[v]);
      for (const auto& [c, e] : nb) sig.insert(sig.end(), {c, e});
      next[v] = ids.id(sig.data(), sig.size() * sizeof(int64_t));
    }
    colour.swap(next);
  }
  // Representative = first node of each class; classes numbered in order of first appearance.
  std::vector<int64_t> cls_of_colour(N, -1), rep;
  std::vector<float> weight;
  for (size_t v = 0; v < N; ++v) {
    int64_t& c = cls_of_colour[colour[v]];
    if (c < 0) {
      c = static_cast<int64_t>(rep.size());
      rep.push_back(static_cast<int64_t>(v));
      weight.push_back(0.f);
    }
    weight[c] += 1.f;
  }
  GraphFeatures out;
  out.label = g.label;
  out.z = g.z;
  out.t_sum_ms = g.t_sum_ms;
  out.t_comm_ms = g.t_comm_ms;
  out.target_ms = g.target_ms;
  out.num_nodes = static_cast<int64_t>(rep.size());
  out.node_weight = std::move(weight);
  out.x.reserve(rep.size() * F);
  for (size_t c = 0; c < rep.size(); ++c) {
    const size_t v = static_cast<size_t>(rep[c]);
    out.x.insert(out.x.end(), g.x.begin() + v * F, g.x.begin() + (v + 1) * F);
    for (size_t i = start[v]; i < start[v + 1]; ++i) {
      const size_t k = in[i];
      out.src.push_back(cls_of_colour[colour[g.src[k]]]);
      out.dst.push_back(static_cast<int64_t>(c));
      out.e.insert(out.e.end(), g.e.begin() + k * Fe, g.e.begin() + (k + 1) * Fe);
    }
  }
  out.num_edges = static_cast<int64_t>(out.src.size());
  out.forward_part = g.forward_part;  // compressed by predict, and only when it is used
  return out;
}

namespace {

// Fits offset/scale of each of `cols` columns over rows drawn from all graphs.
template <typename RowsOf>
void fit_columns(const std::vector<const GraphFeatures*>& graphs, size_t cols, const std::string& kind,
                 RowsOf rows_of, std::vector<float>& offset, std::vector<float>& scale,
                 std::vector<float>& lo_out, std::vector<float>& hi_out) {
  std::vector<double> lo(cols, INFINITY), hi(cols, -INFINITY), sum(cols, 0), sq(cols, 0);
  double count = 0;
  for (const GraphFeatures* g : graphs) {
    auto [data, nrows] = rows_of(*g);
    for (size_t r = 0; r < nrows; ++r)
      for (size_t c = 0; c < cols; ++c) {
        const double v = data[r * cols + c];
        lo[c] = std::min(lo[c], v);
        hi[c] = std::max(hi[c], v);
        sum[c] += v;
        sq[c] += v * v;
      }
    count += static_cast<double>(nrows);
  }
  offset.assign(cols, 0.f);
  scale.assign(cols, 1.f);
  lo_out.assign(cols, 0.f);  // no rows: no range (every value clamps to 0)
  hi_out.assign(cols, 0.f);
  if (count == 0) return;
  for (size_t c = 0; c < cols; ++c) {
    lo_out[c] = static_cast<float>(lo[c]);
    hi_out[c] = static_cast<float>(hi[c]);
    if (kind == "minmax") {
      offset[c] = static_cast<float>(lo[c]);
      if (hi[c] - lo[c] > 1e-12) scale[c] = static_cast<float>(hi[c] - lo[c]);
    } else {
      const double mean = sum[c] / count;
      const double var = std::max(0.0, sq[c] / count - mean * mean);
      offset[c] = static_cast<float>(mean);
      if (var > 1e-18) scale[c] = static_cast<float>(std::sqrt(var));
    }
  }
}

}  // namespace

Normalizer Normalizer::fit(const std::vector<const GraphFeatures*>& graphs, const std::string& kind) {
  SCALEDL_CHECK(kind == "minmax" || kind == "standard", "normalization={} must be minmax or standard", kind);
  SCALEDL_CHECK(!graphs.empty(), "cannot fit normalization statistics on an empty training set");
  Normalizer n;
  n.kind = kind;
  fit_columns(
      graphs, node_feature_names().size(), kind,
      [](const GraphFeatures& g) { return std::make_pair(g.x.data(), static_cast<size_t>(g.num_nodes)); },
      n.x_offset, n.x_scale, n.x_lo, n.x_hi);
  fit_columns(
      graphs, edge_feature_names().size(), kind,
      [](const GraphFeatures& g) { return std::make_pair(g.e.data(), static_cast<size_t>(g.num_edges)); },
      n.e_offset, n.e_scale, n.e_lo, n.e_hi);
  fit_columns(
      graphs, global_feature_names().size(), kind,
      [](const GraphFeatures& g) { return std::make_pair(g.z.data(), size_t{1}); }, n.z_offset, n.z_scale,
      n.z_lo, n.z_hi);
  return n;
}

std::pair<int, double> Normalizer::ood_column(const std::vector<float>& z) const {
  SCALEDL_CHECK(z.size() == z_lo.size() && z.size() == z_hi.size(),
                "ood_distance: {} global features, the training range has {}", z.size(), z_lo.size());
  std::pair<int, double> worst{-1, 0.0};
  for (size_t c = 0; c < z.size(); ++c) {
    if (c < z_ignored.size() && z_ignored[c]) continue;
    const double lo = z_lo[c], hi = z_hi[c], v = z[c];
    const double d = std::max({0.0, lo - v, v - hi}) / std::max(hi - lo, 0.1);
    if (d > worst.second) worst = {static_cast<int>(c), d};
  }
  return worst;
}

double Normalizer::ood_distance(const std::vector<float>& z) const {
  return ood_column(z).second;
}

void Normalizer::ignore_global(const std::string& name) {
  const size_t c = global_feature_index(name);
  z_ignored.resize(global_feature_names().size(), false);
  z_ignored[c] = true;
  // collate() clamps into [lo, hi] = [0, 0], then (0 - 0) / 1: the column is 0 for every graph.
  for (auto* v : {&z_lo, &z_hi, &z_offset})
    if (c < v->size()) (*v)[c] = 0.f;
  if (c < z_scale.size()) z_scale[c] = 1.f;
}

void normalize_columns(const std::vector<float>& in, size_t cols, const std::vector<float>& off,
                       const std::vector<float>& sc, const std::vector<float>& lo,
                       const std::vector<float>& hi, float* out) {
  std::vector<float> inv(cols);
  for (size_t c = 0; c < cols; ++c) inv[c] = 1.f / sc[c];
  for (size_t r = 0; r < in.size(); r += cols)
    for (size_t c = 0; c < cols; ++c)
      out[r + c] = (std::min(std::max(in[r + c], lo[c]), hi[c]) - off[c]) * inv[c];
}

}  // namespace scaledl
