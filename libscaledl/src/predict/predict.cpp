#include "scaledl/predict.hpp"

#include <cmath>

#include "scaledl/error.hpp"
#include "scaledl/gnn.hpp"
#include "scaledl/graph_batch.hpp"
#include "scaledl/layer_predictor.hpp"

namespace scaledl {

nlohmann::json IterationPrediction::to_json() const {
  return {{"t_sum_ms", t_sum_ms}, {"t_comm_ms", t_comm_ms}, {"alpha", alpha},       {"beta", beta},
          {"t_iter_ms", t_iter_ms}, {"refined", refined},  {"fallback_nodes", fallback_nodes},
          {"by_type_ms", by_type_ms}};
}

IterationPrediction predict_iteration(const LayerGraph& g, const DeviceRecord& dev, const LayerPredictor& layers,
                                      const GraphPredictor* graph, const CommModel& comm) {
  IterationPrediction p;
  const std::vector<LayerPrediction> detail = layers.predict_nodes_detail(g, dev);
  std::vector<double> t_l(detail.size());
  for (size_t i = 0; i < detail.size(); ++i) {
    const LayerNode& n = g.nodes[i];
    t_l[i] = detail[i].ms;
    p.t_sum_ms += detail[i].ms;
    p.fallback_nodes += detail[i].fallback ? 1 : 0;
    p.by_type_ms[std::string(to_string(n.type)) + "." + to_string(n.dir)] += detail[i].ms;
  }
  GraphContext ctx;
  ctx.device = dev;
  ctx.comm = comm;
  GraphFeatures f = featurize(g, t_l, ctx);
  p.t_comm_ms = f.t_comm_ms;
  p.global_features = f.z;
  if (graph) {
    GnnPrediction r = graph->predict(std::vector<const GraphFeatures*>{&f});
    p.alpha = r.alpha.at(0);
    p.beta = r.beta.at(0);
    p.t_iter_ms = r.t_pred_ms.at(0);
    p.refined = true;
  } else {
    p.t_iter_ms = p.t_sum_ms + p.t_comm_ms;
  }
  SCALEDL_CHECK(std::isfinite(p.t_iter_ms) && p.t_iter_ms > 0, "prediction for {} is not finite ({} ms)",
                g.model.name, p.t_iter_ms);
  return p;
}

int64_t iterations_per_epoch(int64_t samples, const TrainSettings& s) {
  SCALEDL_CHECK(samples >= 1, "--samples={} must be >= 1", samples);
  const int64_t global_batch = s.batch * s.num_devices;
  return (samples + global_batch - 1) / global_batch;
}

}  // namespace scaledl
