#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Graph inputs of the refinement GNN (ScaleDL eq. 3: G, {v_i}, {e_ij}, Z), as plain
// vectors: GraphFeatures is one graph's RAW features, built from a LayerGraph plus
// the per-layer predicted times t_l (from the "learn" stage, passed in: this library
// does not link the layer predictor). A Normalizer (MinMax as in DNNPerf §III-C.3,
// or standardisation) is fitted on the training graphs and applied when batching
// (graph_batch.hpp, LibTorch) or by the inference-only model (graph_inference.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scaledl/comm/comm.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_graph.hpp"

namespace scaledl {

/// What a graph needs besides the layer graph itself.
struct GraphContext {
  DeviceRecord device;  ///< h^dev of the device the iteration runs on
  CommModel comm;       ///< calibrated eq. 15 constants (ignored when settings.num_devices == 1)
  /// The host's cost per graph node, ms (physics.hpp, fit_host_node_ms): T_sum is then
  /// max(sum of the layer times, nodes x host_node_ms). 0 = none (a host no run showed).
  double host_node_ms = 0;
  double target_ms = NAN;  ///< measured T_iter, ms (training label); NaN when predicting
  /// Also featurize the forward part of a graph with backward nodes
  /// (GraphFeatures::forward_part); predict asks for it only when the refinement
  /// uses it (GraphPredictor::alpha_from_forward_part).
  bool forward_part = true;
};

/// One graph's raw features, row-major.
struct GraphFeatures {
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  std::vector<float> x;           ///< [num_nodes * node_feature_names().size()]
  std::vector<int64_t> src, dst;  ///< [num_edges], local node ids
  std::vector<float> e;           ///< [num_edges * edge_feature_names().size()]
  std::vector<float> z;           ///< [global_feature_names().size()]
  /// How many nodes of the original graph each node stands for (compress_graph);
  /// empty = 1 each. Pooling weights node embeddings by it.
  std::vector<float> node_weight;
  double t_sum_ms = 0;     ///< T_sum = sum_l t_l (ScaleDL eq. 6), ms
  double t_comm_ms = 0;    ///< T_comm (eq. 15), ms
  double target_ms = NAN;  ///< measured T_iter, ms
  std::string label;       ///< model name, for reports
  /// The forward nodes of a graph with backward or update nodes, featurized as an
  /// inference graph with the same layer times; null otherwise. A refinement that
  /// never trained on a run with backward nodes takes such a run's alpha from it
  /// (GraphPredictor::predict): the device's efficiency, which alpha mostly
  /// corrects, is shared by the directions, and the forward part is a graph of a
  /// kind it learnt. compress_graph carries it as it is; predict compresses it when
  /// it uses it.
  std::shared_ptr<const GraphFeatures> forward_part;
};

/// T_sum of `f` becomes max(T_sum, num_nodes x node_ms), with its global feature
/// (log1p_t_sum_ms) to match; node_ms <= 0 changes nothing. An eager iteration cannot
/// run faster than its host issues the nodes (docs/unseen-gpu.md, "The host's cost per node").
void apply_host_term(GraphFeatures& f, double node_ms);

/// Names of the node / edge / global feature columns, in order (saved with the weights).
const std::vector<std::string>& node_feature_names();
const std::vector<std::string>& edge_feature_names();
const std::vector<std::string>& global_feature_names();
/// Column of global feature `name` in global_feature_names(); an Error naming it when absent.
size_t global_feature_index(const std::string& name);

/// Builds raw features. `t_l_ms` holds the predicted time of every node of `g`
/// (same order as g.nodes), ms, finite and >= 0. Throws naming the node otherwise.
GraphFeatures featurize(const LayerGraph& g, const std::vector<double>& t_l_ms, const GraphContext& ctx);

/// Exact compression for an encoder of `rounds` message-passing rounds over
/// incoming edges. Nodes whose `rounds`-hop incoming neighbourhoods are equal
/// (same node features, same edge features: colour refinement on in-edges,
/// `rounds` times) have equal embeddings after every round, so one
/// representative per class is kept, with the in-edges of that representative
/// re-pointed at the classes of their sources and node_weight = class size.
/// A weighted pooling then gives the same graph embedding as the whole graph.
/// The repeated blocks of a Transformer collapse: interior blocks are equal.
GraphFeatures compress_graph(const GraphFeatures& g, int64_t rounds);

/// Per-column affine map v' = (v - offset) / scale, for x, e and z.
struct Normalizer {
  std::string kind = "minmax";  ///< "minmax" ([0,1] on the training set) or "standard" (zero mean, unit sd)
  std::vector<float> x_offset, x_scale, e_offset, e_scale, z_offset, z_scale;
  /// Training range of every raw column (min, max over the training graphs).
  /// collate() clamps raw values into it before the affine map, so a feature
  /// beyond the training range (a bigger model's log size) saturates at the
  /// edge instead of being extrapolated by the network; ood_distance() measures
  /// how far outside it a graph's global features lie.
  std::vector<float> x_lo, x_hi, e_lo, e_hi, z_lo, z_hi;
  /// Fits on `graphs` (all nodes / edges / graphs pooled). A constant column
  /// gets scale 1. Throws on an unknown kind or an empty set.
  static Normalizer fit(const std::vector<const GraphFeatures*>& graphs, const std::string& kind);
  bool empty() const { return x_offset.empty(); }
  /// Distance of global features `z` outside the training range, in units of
  /// each column's range (at least 0.1 raw units, so a one-hot never seen set
  /// counts 10): max over columns of max(0, lo - z, z - hi) / max(hi - lo, 0.1).
  /// 0 inside the training box.
  double ood_distance(const std::vector<float>& z) const;
  /// Index and distance of the column that sets ood_distance (-1 when 0).
  std::pair<int, double> ood_column(const std::vector<float>& z) const;
  /// Global columns this model does not use (GnnConfig::device_memory_feature):
  /// collate() writes 0 for them and ood_column() skips them. Not saved with the
  /// statistics: the graph model's config sets it again when it loads.
  std::vector<bool> z_ignored;
  /// Ignores global column `name` (above); its statistics become 0, 0..0, scale 1.
  /// Throws on a name that is not a global feature.
  void ignore_global(const std::string& name);
};

/// The normalisation of one graph's raw rows (collate() and GraphInference apply it):
/// each of the `cols` columns of `in` clamped into [lo, hi], then (v - offset) * (1 / scale),
/// in float, into `out` (in.size() values).
void normalize_columns(const std::vector<float>& in, size_t cols, const std::vector<float>& offset,
                       const std::vector<float>& scale, const std::vector<float>& lo,
                       const std::vector<float>& hi, float* out);

}  // namespace scaledl
