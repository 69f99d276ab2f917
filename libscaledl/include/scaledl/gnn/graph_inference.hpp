#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The graph refinement's forward pass without LibTorch: the trained model of gnn.hpp
// (GnnModel, eq. 11-14, both encoders, readouts and targets) evaluated in float32 with
// Eigen, for prediction only. It reads the safetensors file GraphPredictor::save writes
// (with the same checks as GraphPredictor::load) or takes the weights of a model in
// memory (GraphPredictor::inference), and gives GraphPredictor::predict's GnnPrediction:
// alpha, beta, T_pred, the out-of-domain distance and shrinkage, and the alpha of the
// forward part (test_graph_inference.cpp checks each against LibTorch's, 1e-5 relative).
// Also the model's configuration (GnnConfig) and its predictions (GnnPrediction),
// shared with the LibTorch model.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/gnn/graph_features.hpp"

namespace scaledl {

/// Version of the graph model's weights file (GraphPredictor::save): 2 added the training
/// ranges (norm.*_lo/_hi), 3 the content_sha256.
inline constexpr int kGnnFileFormatVersion = 3;

/// Architecture hyperparameters (saved in the weights file).
struct GnnConfig {
  std::string encoder = "transformerconv";  ///< "transformerconv" | "anee"
  std::string target = "alpha-beta";        ///< "alpha-beta" (eq. 2) | "direct" (DNNPerf baseline)
  std::string readout = "mean";             ///< "mean" | "sum" pooling of node embeddings
  int64_t hidden = 32;                      ///< node embedding width, >= 1
  int64_t layers = 2;                       ///< TransformerConv layers / ANEE rounds, >= 1
  int64_t heads = 2;                        ///< attention heads L (transformerconv), >= 1
  int64_t z_hidden = 16;                    ///< width of the Z branch MLP, >= 1
  int64_t mlp_hidden = 32;                  ///< width of the prediction MLP, >= 1
  bool global_branch = true;                ///< MLP(Z) branch of eq. 14; false = the NoMLP ablation
  /// alpha and beta lie in (1/alpha_bound, alpha_bound): log alpha = L tanh(o / L),
  /// L = ln alpha_bound (1 at o = 0). > 1.
  double alpha_bound = 4.0;
  /// Out-of-domain shrinkage: a graph whose global features lie a distance d
  /// outside the training range (Normalizer::ood_distance) gets
  /// log alpha' = exp(-d / ood_tau) log alpha (the same for beta): the
  /// prediction moves toward the plain sum T_sum + T_comm. 0 = off.
  double ood_tau = 1.0;
  /// Whether the global branch and the out-of-domain distance see the device's memory
  /// capacity (log1p_dev_mem_gb). A capacity is not a speed, and a GPU with more memory
  /// than any training GPU (the H200's 141 GB) was flagged out of domain by it alone:
  /// off since 2026-11-26 (docs/unseen-gpu.md); a file without the key is from before (on).
  bool device_memory_feature = false;

  nlohmann::json to_json() const;
  /// Validates every field; throws naming ctx.key and the value.
  static GnnConfig from_json(const nlohmann::json& j, const std::string& ctx = "gnn");
  void validate(const std::string& ctx = "gnn") const;
};

/// Per-graph predictions, ms.
struct GnnPrediction {
  std::vector<double> alpha, beta, t_pred_ms;
  std::vector<double> ood_distance;  ///< Normalizer::ood_distance of each graph's global features
  std::vector<int> ood_column;       ///< the global feature that sets it (-1 inside the training range)
  /// 1 where alpha is that of the graph's forward part (GraphFeatures::forward_part):
  /// the run has backward nodes, the refinement trained on none, and the forward
  /// part lies nearer its training range than the run (only with ood_tau > 0).
  std::vector<char> alpha_from_forward;
};

/// What both predictors do after the model's outputs (GraphPredictor::predict with LibTorch,
/// GraphInference::predict without): the out-of-domain shrinkage toward the plain sum
/// (GnnConfig::ood_tau), then, with `from_forward` (their alpha_from_forward_part()), the alpha
/// of a run's forward part where that part lies nearer the training range than the run;
/// `predict_parts` predicts those parts as the caller predicts.
void finish_gnn_prediction(
    const GnnConfig& cfg, bool from_forward, const std::vector<const GraphFeatures*>& graphs,
    GnnPrediction& out,
    const std::function<GnnPrediction(const std::vector<const GraphFeatures*>&)>& predict_parts);

/// Inference-only graph model (see the top of this file). Copies share the weights;
/// predict() is const and may run on several threads at once.
class GraphInference {
 public:
  /// One weight: its shape (as LibTorch's) and its values, row-major.
  struct Weight {
    std::vector<int64_t> shape;
    std::vector<float> values;
  };

  GraphInference() = default;
  /// From named weights, named as GnnModel's parameters and buffers without the "model."
  /// prefix ("encoder.lin_in.weight", ..., "log_t_offset"): each of weight_shapes(cfg),
  /// no other. Throws naming `ctx` and the weight on a missing, extra, misshapen or
  /// non-finite one. `norm` ignores the device memory column unless
  /// cfg.device_memory_feature (as GraphPredictor's constructor does).
  GraphInference(const GnnConfig& cfg, Normalizer norm, const std::map<std::string, Weight>& weights,
                 const std::string& ctx = "graph model");

  /// Reads a file written by GraphPredictor::save, without LibTorch. Throws naming the file
  /// and field on a corrupt, truncated, altered, wrong-version or feature-mismatched file
  /// (the messages of GraphPredictor::load).
  static GraphInference load(const std::string& path);

  /// The weights a model of `cfg` has, in GnnModel's names and shapes, sorted by name.
  static std::vector<std::pair<std::string, std::vector<int64_t>>> weight_shapes(const GnnConfig& cfg);

  bool empty() const { return impl_ == nullptr; }
  const GnnConfig& config() const { return cfg_; }
  const Normalizer& normalizer() const { return norm_; }
  /// Metadata read by load() (as GraphPredictor::metadata), empty otherwise.
  const nlohmann::json& metadata() const { return meta_; }

  /// GraphPredictor::alpha_from_forward_part of this model.
  bool alpha_from_forward_part() const;

  /// Makes this model an ensemble with `m` (a model of the same configuration trained with
  /// another seed, e.g. a bundle's graph members): predict() then gives the geometric mean of
  /// the members' alpha and of their beta, each member with its own normalisation and
  /// out-of-domain shrinkage; the out-of-domain distance, its column and the forward part's
  /// flag stay this model's. Throws naming `ctx` when `m`'s configuration differs or `m` is
  /// itself an ensemble.
  void add_member(GraphInference m, const std::string& ctx);
  /// Models averaged by predict(): 1 + those added.
  size_t members() const { return 1 + more_.size(); }

  /// GraphPredictor::predict: graphs without node_weight are compressed first
  /// (compress_graph, cfg.layers rounds); then the forward pass of each graph, the
  /// out-of-domain shrinkage and the alpha of the forward part.
  GnnPrediction predict(const std::vector<const GraphFeatures*>& graphs) const;
  GnnPrediction predict(const std::vector<GraphFeatures>& graphs) const;

 private:
  friend class GraphPredictor;  // load() hands it the metadata it read
  struct Impl;
  /// This model alone (no members).
  GnnPrediction predict_one(const std::vector<const GraphFeatures*>& graphs) const;
  GnnConfig cfg_;
  Normalizer norm_;
  nlohmann::json meta_;
  std::shared_ptr<const Impl> impl_;
  std::vector<GraphInference> more_;  ///< add_member's models
};

}  // namespace scaledl
