#pragma once
// Needs LibTorch: yes (this header includes LibTorch's headers).
// Batching of many graphs of different sizes into one disjoint union for the
// LibTorch model. The graphs' raw features and their Normalizer are in
// graph_features.hpp (no LibTorch). GraphBatch holds the tensors:
//   x          [N, F]   float  node features          (N = nodes of all graphs)
//   edge_index [2, E]   int64  row 0 = source, row 1 = destination (global node ids)
//   edge_attr  [E, Fe]  float  edge features
//   batch      [N]      int64  graph id of each node, in [0, G)
//   z          [G, Fz]  float  global features Z
//   t_sum, t_comm, y [G] float milliseconds (y = measured T_iter, NaN if unknown)
#include <cstdint>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "scaledl/gnn/graph_features.hpp"

namespace scaledl {

/// The disjoint union of a list of graphs (see the top of this file for shapes).
struct GraphBatch {
  torch::Tensor x, edge_index, edge_attr, batch, z, t_sum, t_comm, y;
  torch::Tensor node_weight;  ///< [N], model dtype: nodes each node stands for (1 unless compressed)
  int64_t num_graphs = 0;
  /// Moves every tensor to `device` (edge_index/batch stay int64).
  GraphBatch to(torch::Device device) const;
};

/// Concatenates and normalises graphs (node ids of graph k shifted by the node
/// count of graphs 0..k-1). `dtype` is the float type of x, edge_attr, z, times.
GraphBatch collate(const std::vector<const GraphFeatures*>& graphs, const Normalizer& norm,
                   torch::Dtype dtype = torch::kFloat32);

}  // namespace scaledl
