// Batching of graphs for the LibTorch model (see graph_batch.hpp).
#include "scaledl/gnn/graph_batch.hpp"

#include <algorithm>

#include "scaledl/core/error.hpp"

namespace scaledl {

GraphBatch GraphBatch::to(torch::Device device) const {
  GraphBatch b = *this;
  for (torch::Tensor* t :
       {&b.x, &b.edge_index, &b.edge_attr, &b.batch, &b.z, &b.t_sum, &b.t_comm, &b.y, &b.node_weight})
    *t = t->to(device);
  return b;
}

GraphBatch collate(const std::vector<const GraphFeatures*>& graphs, const Normalizer& norm,
                   torch::Dtype dtype) {
  SCALEDL_CHECK(!graphs.empty(), "collate: no graphs");
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size(),
               Fz = global_feature_names().size();
  SCALEDL_CHECK(norm.x_offset.size() == F && norm.e_offset.size() == Fe && norm.z_offset.size() == Fz &&
                    norm.x_lo.size() == F && norm.x_hi.size() == F && norm.e_lo.size() == Fe &&
                    norm.e_hi.size() == Fe && norm.z_lo.size() == Fz && norm.z_hi.size() == Fz,
                "normalization statistics have {}/{}/{} columns, features have {}/{}/{}",
                norm.x_offset.size(), norm.e_offset.size(), norm.z_offset.size(), F, Fe, Fz);
  int64_t N = 0, E = 0;
  for (const GraphFeatures* g : graphs) {
    SCALEDL_CHECK(g->x.size() == g->num_nodes * F && g->e.size() == g->num_edges * Fe && g->z.size() == Fz &&
                      g->src.size() == static_cast<size_t>(g->num_edges) && g->dst.size() == g->src.size() &&
                      (g->node_weight.empty() || g->node_weight.size() == static_cast<size_t>(g->num_nodes)),
                  "graph '{}': feature arrays do not match its {} nodes / {} edges", g->label, g->num_nodes,
                  g->num_edges);
    N += g->num_nodes;
    E += g->num_edges;
  }
  const int64_t G = static_cast<int64_t>(graphs.size());
  auto fopt = torch::TensorOptions().dtype(torch::kFloat32);
  auto iopt = torch::TensorOptions().dtype(torch::kInt64);
  torch::Tensor x = torch::empty({N, static_cast<int64_t>(F)}, fopt);
  torch::Tensor ea = torch::empty({E, static_cast<int64_t>(Fe)}, fopt);
  torch::Tensor z = torch::empty({G, static_cast<int64_t>(Fz)}, fopt);
  torch::Tensor ei = torch::empty({2, E}, iopt);
  torch::Tensor bt = torch::empty({N}, iopt);
  torch::Tensor nw = torch::empty({N}, fopt);
  torch::Tensor ts = torch::empty({G}, torch::TensorOptions().dtype(torch::kFloat64));
  torch::Tensor tc = torch::empty({G}, torch::TensorOptions().dtype(torch::kFloat64));
  torch::Tensor y = torch::empty({G}, torch::TensorOptions().dtype(torch::kFloat64));
  float* px = x.data_ptr<float>();
  float* pe = ea.data_ptr<float>();
  float* pz = z.data_ptr<float>();
  int64_t* ps = ei.data_ptr<int64_t>();
  int64_t* pd = ps + E;
  int64_t* pb = bt.data_ptr<int64_t>();
  float* pw = nw.data_ptr<float>();
  int64_t noff = 0, eoff = 0;
  // Clamp into the training range, then (v - offset) / scale.
  const auto apply = normalize_columns;
  for (int64_t k = 0; k < G; ++k) {
    const GraphFeatures& g = *graphs[k];
    apply(g.x, F, norm.x_offset, norm.x_scale, norm.x_lo, norm.x_hi, px + noff * F);
    apply(g.e, Fe, norm.e_offset, norm.e_scale, norm.e_lo, norm.e_hi, pe + eoff * Fe);
    apply(g.z, Fz, norm.z_offset, norm.z_scale, norm.z_lo, norm.z_hi, pz + k * Fz);
    for (int64_t j = 0; j < g.num_edges; ++j) {
      ps[eoff + j] = g.src[j] + noff;
      pd[eoff + j] = g.dst[j] + noff;
    }
    std::fill(pb + noff, pb + noff + g.num_nodes, k);
    if (g.node_weight.empty())
      std::fill(pw + noff, pw + noff + g.num_nodes, 1.f);
    else
      std::copy(g.node_weight.begin(), g.node_weight.end(), pw + noff);
    ts.data_ptr<double>()[k] = g.t_sum_ms;
    tc.data_ptr<double>()[k] = g.t_comm_ms;
    y.data_ptr<double>()[k] = g.target_ms;
    noff += g.num_nodes;
    eoff += g.num_edges;
  }
  GraphBatch b;
  b.x = x.to(dtype);
  b.edge_attr = ea.to(dtype);
  b.z = z.to(dtype);
  b.edge_index = ei;
  b.batch = bt;
  b.node_weight = nw.to(dtype);
  b.t_sum = ts.to(dtype);
  b.t_comm = tc.to(dtype);
  b.y = y.to(dtype);
  b.num_graphs = G;
  return b;
}

}  // namespace scaledl
