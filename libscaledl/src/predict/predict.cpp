#include "scaledl/predict/predict.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include "scaledl/core/error.hpp"
#include "scaledl/core/strided_threads.hpp"
#include "scaledl/gnn/graph_features.hpp"
#include "scaledl/gnn/graph_inference.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

std::string dtype_refusal(DType dtype, const DeviceRecord& dev) {
  if (dtype == DType::FP8)
    return "dtype=fp8 as the dtype of every kernel is not a training recipe: FP8 training is settings.fp8 "
           "(--dtype fp8: FP8 GEMMs in the linear layers, BF16 elsewhere)";
  if (dtype != DType::BF16 && dtype != DType::TF32) return "";
  const double cc = dev.compute_capability();
  if (cc <= 0 || cc >= 8.0) return "";
  if (dtype == DType::TF32)
    return fmt::format(
        "dtype=tf32 needs a GPU of compute capability 8.0 or newer (Ampere); \"{}\" is {:.1f}, without "
        "TF32 tensor cores: use --dtype fp32 (what PyTorch runs there)",
        dev.name, cc);
  return fmt::format(
      "dtype=bf16 needs a GPU of compute capability 8.0 or newer (Ampere); \"{}\" is {:.1f}, without BF16 "
      "tensor cores: use --dtype fp16 (mixed precision on its FP16 tensor cores) or fp32",
      dev.name, cc);
}

std::string settings_refusal(const TrainSettings& s, const DeviceRecord& dev) {
  if (std::string why = dtype_refusal(s.dtype, dev); !why.empty()) return why;
  if (!s.fp8 || dev.peak_fp8_gflops > 0) return "";
  return fmt::format(
      "dtype=fp8 needs FP8 tensor cores (Hopper, Ada, Blackwell): the spec of \"{}\" gives no "
      "peak_fp8_gflops; use --dtype bf16",
      dev.name);
}

nlohmann::json IterationPrediction::to_json() const {
  nlohmann::json j = {{"t_sum_ms", t_sum_ms},
                      {"t_comm_ms", t_comm_ms},
                      {"alpha", alpha},
                      {"beta", beta},
                      {"t_iter_ms", t_iter_ms},
                      {"refined", refined},
                      {"fallback_nodes", fallback_nodes},
                      {"by_type_ms", by_type_ms},
                      {"ood_distance", ood_distance},
                      {"out_of_domain", ood_distance > 0},
                      {"ood_feature", ood_feature},
                      {"extrapolated_ms", extrapolated_ms},
                      {"extrapolated", extrapolated}};
  if (host_ms > 0) j["host_ms"] = host_ms;
  if (!no_interval.empty()) j["no_interval"] = no_interval;
  if (refined) j["refinement"] = device_out_refinement ? "device-out" : "in-domain";
  if (refined) j["alpha_of"] = alpha_from_forward ? "forward part" : "iteration";
  if (t_roofline_ms > 0) {
    j["t_roofline_ms"] = t_roofline_ms;
    j["t_model_ms"] = t_model_ms;
    j["adjusted"] = adjusted;
  }
  if (std::isfinite(lo80_ms)) {
    j["interval_ms"] = {{"80", {lo80_ms, hi80_ms}}, {"95", {lo95_ms, hi95_ms}}};
    j["interval_unseen_device"] = unseen_device_interval;
  }
  return j;
}

std::vector<IterationPrediction> predict_iterations(const std::vector<const LayerGraph*>& gs,
                                                    const DeviceRecord& dev, const LayerPredictor& layers,
                                                    const GraphInference* graph, const CommModel& comm,
                                                    int64_t batch, double host_node_ms,
                                                    const LayerCalibration* calibration) {
  SCALEDL_CHECK(batch >= 1, "predict_iterations: batch={} must be >= 1", batch);
  SCALEDL_CHECK(!calibration || calibration->device == dev.key(),
                "a calibration of {} cannot serve device {}", calibration ? calibration->device : "",
                dev.key());
  for (const LayerGraph* g : gs)
    if (const std::string why = settings_refusal(g->settings, dev); !why.empty()) fail("{}", why);
  std::vector<IterationPrediction> out(gs.size());
  GraphContext ctx;
  ctx.device = dev;
  ctx.comm = comm;
  ctx.host_node_ms = host_node_ms;
  ctx.forward_part = graph && graph->alpha_from_forward_part();
  // Chunks of `batch` configurations: the layer part and the (compressed)
  // features of one chunk, then one batched refinement; memory stays bounded.
  // The layer part of configuration k, into out[k] and feats[k - c0].
  std::vector<GraphFeatures> feats;
  auto layer_part = [&](size_t k, size_t c0) {
    const LayerGraph& g = *gs[k];
    IterationPrediction& p = out[k];
    std::vector<LayerPrediction> detail = layers.predict_nodes_detail(g, dev);
    std::vector<double> t_l(detail.size());
    const std::vector<StagePart> parts = g.stage_parts();
    for (size_t i = 0; i < detail.size(); ++i) {
      const LayerNode& n = g.nodes[i];
      if (calibration) detail[i].ms *= calibration->factor(n.type, n.dir, n.dtype);
      t_l[i] = detail[i].ms;
      if (parts[i] == StagePart::First) p.first_part_ms += detail[i].ms;
      if (parts[i] == StagePart::Last) p.last_part_ms += detail[i].ms;
      p.fallback_nodes += detail[i].fallback ? 1 : 0;
      p.by_type_ms[std::string(to_string(n.type)) + "." + to_string(n.dir)] += detail[i].ms;
      if (detail[i].extrapolated) {
        p.extrapolated_ms += detail[i].ms;
        const std::string kind =
            std::string(to_string(n.type)) + "." + to_string(n.dir) + " " + to_string(n.dtype);
        auto at = std::lower_bound(p.extrapolated.begin(), p.extrapolated.end(), kind);
        if (at == p.extrapolated.end() || *at != kind) p.extrapolated.insert(at, kind);
      }
    }
    GraphFeatures f = featurize(g, t_l, ctx);
    if (host_node_ms > 0) p.host_ms = host_node_ms * static_cast<double>(g.nodes.size());
    p.t_sum_ms = f.t_sum_ms;  // with a host term, max(the layer times' sum, host_ms)
    p.t_comm_ms = f.t_comm_ms;
    p.global_features = f.z;
    p.t_iter_ms = p.t_sum_ms + p.t_comm_ms;
    if (graph) feats[k - c0] = compress_graph(f, graph->config().layers);
  };
  // Several configurations: the layer part on the hardware threads (read-only
  // models only; the refinement stays on this thread, batched).
  const size_t nthreads = gs.size() >= 8 && layers.concurrent_predict() ? strided_thread_count(gs.size()) : 1;
  for (size_t c0 = 0; c0 < gs.size(); c0 += static_cast<size_t>(batch)) {
    const size_t c1 = std::min(gs.size(), c0 + static_cast<size_t>(batch));
    feats.assign(graph ? c1 - c0 : 0, GraphFeatures{});
    for_each_strided(c1 - c0, nthreads, [&](size_t i) { layer_part(c0 + i, c0); });
    if (!graph) continue;
    std::vector<const GraphFeatures*> ptrs;
    for (const auto& f : feats) ptrs.push_back(&f);
    // The refinement's forward pass without LibTorch (graph_inference.hpp: the same model
    // in Eigen, float32, checked against LibTorch's in test_graph_inference.cpp), one graph
    // at a time: a few small matrices per graph, no batch to build.
    const GnnPrediction r = graph->predict(ptrs);
    for (size_t k = c0; k < c1; ++k) {
      IterationPrediction& p = out[k];
      const size_t j = k - c0;
      p.alpha = r.alpha.at(j);
      p.beta = r.beta.at(j);
      p.t_iter_ms = r.t_pred_ms.at(j);
      p.refined = true;
      p.ood_distance = r.ood_distance.at(j);
      p.alpha_from_forward = r.alpha_from_forward.at(j) != 0;
      if (r.ood_column.at(j) >= 0)
        p.ood_feature = global_feature_names().at(static_cast<size_t>(r.ood_column[j]));
    }
  }
  for (size_t k = 0; k < gs.size(); ++k)
    SCALEDL_CHECK(std::isfinite(out[k].t_iter_ms) && out[k].t_iter_ms > 0,
                  "prediction for {} is not finite ({} ms)", gs[k]->model.name, out[k].t_iter_ms);
  return out;
}

IterationPrediction predict_iteration(const LayerGraph& g, const DeviceRecord& dev,
                                      const LayerPredictor& layers, const GraphInference* graph,
                                      const CommModel& comm) {
  return predict_iterations({&g}, dev, layers, graph, comm).at(0);
}

int64_t iterations_per_epoch(int64_t samples, const TrainSettings& s) {
  SCALEDL_CHECK(samples >= 1, "--samples={} must be >= 1", samples);
  SCALEDL_CHECK(s.batch >= 1 && s.num_devices >= 1, "batch={} x devices={} must be >= 1", s.batch,
                s.num_devices);
  const int64_t global_batch = s.batch * s.num_devices;
  // ceil(samples / global_batch) without samples + global_batch - 1, which overflows near 2^63
  return samples / global_batch + (samples % global_batch != 0 ? 1 : 0);
}

}  // namespace scaledl
