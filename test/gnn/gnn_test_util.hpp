#pragma once
// Shared fixtures of the gnn tests: real layer graphs (build_layer_graph of
// model configs in models/) with layer times from the one cost model
// (roofline max(FLOP/rate, bytes/bandwidth)), and a hidden "measured" time with
// cross-layer effects the GNN must learn.
#include <cmath>
#include <string>
#include <vector>

#include "scaledl/gnn/graph_batch.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl::test {

inline DeviceRecord test_device() {
  DeviceRecord d;
  d.name = "test-cpu";
  d.kind = "cpu";
  d.cores = 2;
  d.clock_mhz = 2500;
  d.peak_fp32_gflops = 100;
  d.peak_mem_bw_gbs = 20;
  return d;
}

/// Roofline time of each node, ms: max(FLOP / 100 GFLOP/s, bytes / 20 GB/s) + 5 us launch.
inline std::vector<double> roofline_ms(const LayerGraph& g) {
  std::vector<double> t;
  for (const auto& n : g.nodes) {
    const double bytes = n.cost.in_bytes + n.cost.out_bytes + n.cost.weight_bytes;
    t.push_back(std::max(n.flops() / 100e9, bytes / 20e9) * 1e3 + 0.005);
  }
  return t;
}

/// A small BERT-like graph (layers blocks) with the given settings.
inline LayerGraph small_graph(const std::string& model_file, int64_t layers, int64_t batch, int64_t seq,
                              int64_t devices = 1) {
  ModelSpec m = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/" + model_file);
  m.num_layers = layers;
  if (m.num_decoder_layers > 0) m.num_decoder_layers = layers;
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  s.num_devices = devices;
  return build_layer_graph(m, s);
}

/// Features of graph `g`; the label is a nonlinear function of the graph
/// (fusion saves part of elementwise time; fixed overhead per node; overlap of
/// communication), so alpha and beta differ between graphs.
inline GraphFeatures labelled(const LayerGraph& g, double comm_gbs = 10) {
  GraphContext ctx;
  ctx.device = test_device();
  ctx.comm = CommModel{comm_gbs * 1e9, 20e-6};
  std::vector<double> t = roofline_ms(g);
  double fused = 0, total = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    total += t[i];
    const auto ty = g.nodes[i].type;
    if (ty == LayerType::Add || ty == LayerType::Dropout || ty == LayerType::GELU) fused += t[i];
  }
  GraphFeatures f = featurize(g, t, ctx);
  const double overlap = 0.6 + 0.3 / (1.0 + static_cast<double>(g.settings.batch) / 8.0);
  // Small batches use the device less well (alpha > 1), large ones better.
  const double eff = 0.7 + 0.6 / (1.0 + static_cast<double>(g.settings.batch) / 4.0);
  f.target_ms =
      eff * (total - 0.5 * fused) + 0.01 * static_cast<double>(g.nodes.size()) + overlap * f.t_comm_ms;
  return f;
}

}  // namespace scaledl::test
