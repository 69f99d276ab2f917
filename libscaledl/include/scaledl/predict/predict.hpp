#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// End-to-end prediction (ScaleDL Algorithm 1):
//   Stage 1  t_l = phi_l(h) for every node of the layer graph; T_sum = sum t_l  (eq. 6-7)
//   Stage 2  T_comm of the gradient all-reduce over N devices                   (eq. 15)
//   Stage 3  (alpha, beta) = Omega(G, v, e, Z) from the graph refinement         (eq. 3, 14)
//   Final    T_iter = alpha*T_sum + beta*T_comm, T_epoch = I * T_iter             (eq. 1-2)
// Without a graph model, alpha = beta = 1 (the additive baseline).
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/comm/comm.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_graph.hpp"

namespace scaledl {

struct LayerCalibration;

class LayerPredictor;
class GraphInference;

/// Why `dev` cannot run `dtype` ("" = it can): BF16 and TF32 are tensor-core formats of compute
/// capability 8.0 (Ampere) and newer. A V100 or T4 spec's peak_bf16_gflops holds its FP16 tensor
/// rate; PyTorch runs BF16 there without tensor cores at a rate no spec sheet gives, and TF32 as
/// FP32 (predicting it at a TF32 rate came out 9 % slower than fp32 on the V100), so such a
/// prediction is refused. A record without a compute capability (CPUs) is not checked.
std::string dtype_refusal(DType dtype, const DeviceRecord& dev);
/// dtype_refusal of s.dtype, and the FP8 recipe (s.fp8) on a device whose spec has no FP8 peak.
std::string settings_refusal(const TrainSettings& s, const DeviceRecord& dev);

struct IterationPrediction {
  double t_sum_ms = 0;  ///< T_sum, ms (eq. 6); with a host term, max(sum of the layer times, host_ms)
  /// nodes x the host's cost per node, ms, when the bundle has one for this device
  /// (fit_host_node_ms); 0 otherwise
  double host_ms = 0;
  double t_comm_ms = 0;        ///< T_comm, ms (eq. 15); 0 on one device
  double alpha = 1, beta = 1;  ///< refinement factors (1, 1 without a graph model)
  double t_iter_ms = 0;        ///< T_iter = alpha*T_sum + beta*T_comm, ms (eq. 2)
  bool refined = false;        ///< a graph model produced alpha and beta
  /// The bundle's device-out refinement produced them (a device without layer
  /// timings in a bundle trained with --device-crossfit; bundle.hpp)
  bool device_out_refinement = false;
  /// alpha is that of the iteration's forward part: the refinement trained on no
  /// run with backward nodes (GnnPrediction::alpha_from_forward)
  bool alpha_from_forward = false;
  int64_t fallback_nodes = 0;  ///< nodes without a layer model of their type (LayerPrediction::fallback)
  /// Part of T_sum from nodes whose layer model had no training row of their
  /// direction and dtype (LayerPrediction::extrapolated), ms, and those kinds
  /// ("linear.fwd bf16"), sorted.
  double extrapolated_ms = 0;
  std::vector<std::string> extrapolated;
  std::map<std::string, double> by_type_ms;  ///< T_sum split by "type.dir", ms
  /// Of T_sum's layer times, the nodes before and after the transformer blocks (the embedding;
  /// the final norm, head and loss: LayerGraph::stage_parts), ms: what a pipeline's first and last
  /// stages hold besides their blocks.
  double first_part_ms = 0, last_part_ms = 0;
  std::vector<float> global_features;  ///< Z of the graph (global_feature_names() order); not in to_json
  /// Distance of Z outside the graph model's training range (Normalizer::ood_distance);
  /// 0 without a graph model. > 0 means out of domain.
  double ood_distance = 0;
  std::string ood_feature;  ///< the global feature farthest outside ("" when in domain)
  /// T_iter intervals (ms) when the bundle has an interval model (intervals.hpp); NaN otherwise.
  double lo80_ms = NAN, hi80_ms = NAN, lo95_ms = NAN, hi95_ms = NAN;
  /// The device has no layer timings in the bundle and the intervals are at least
  /// the bundle's device-out spread (device_intervals.hpp).
  bool unseen_device_interval = false;
  /// Why no interval is given ("" = it is, or the prediction is not refined): a CPU whose layer
  /// timings trained nothing in the bundle. Leave-one-machine-out over the committed CPU machines
  /// did not reach the nominal coverage (an AMD Zen 3 VM no data came from: 0 of 6 real-size
  /// models inside the 95 % interval), so none is claimed there (Bundle::predict_many).
  std::string no_interval;
  /// Physical bounds (physics.hpp), set by Bundle::predict_many: the iteration's
  /// roofline time (0 = not computed), the model's own T_iter before any bound,
  /// and what raised it ("" = nothing; "roofline" or "monotone: batch 4").
  double t_roofline_ms = 0;
  double t_model_ms = 0;
  std::string adjusted;

  nlohmann::json to_json() const;
};

/// Predicts one iteration of `g` on `dev`. `graph` may be null (no refinement).
IterationPrediction predict_iteration(const LayerGraph& g, const DeviceRecord& dev,
                                      const LayerPredictor& layers, const GraphInference* graph,
                                      const CommModel& comm);

/// Many configurations on one device: the layer part graph by graph, the
/// refinement in batches of `batch` graphs (what sweeps and CSV input use).
/// `host_node_ms` > 0: T_sum = max(sum of the layer times, nodes x host_node_ms).
/// `calibration` (non-null, of `dev`): each layer time times its factor (calibration.hpp).
std::vector<IterationPrediction> predict_iterations(const std::vector<const LayerGraph*>& gs,
                                                    const DeviceRecord& dev, const LayerPredictor& layers,
                                                    const GraphInference* graph, const CommModel& comm,
                                                    int64_t batch = 256, double host_node_ms = 0,
                                                    const LayerCalibration* calibration = nullptr);

/// Iterations per epoch I for `samples` training samples: ceil(samples / (batch * num_devices)).
int64_t iterations_per_epoch(int64_t samples, const TrainSettings& s);

}  // namespace scaledl
