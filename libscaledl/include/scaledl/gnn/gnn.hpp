#pragma once
// Needs LibTorch: yes (this header includes LibTorch's headers).
// Graph refinement Omega of ScaleDL eq. 3 and 14: a GNN over the layer graph
// of one iteration plus an MLP over the global features Z, predicting
//   alpha-beta target:  (alpha, beta) > 0,  T_iter = alpha*T_sum + beta*T_comm   (eq. 2)
//   direct target:      T_iter itself (DNNPerf's formulation, the baseline)
//
// Encoders (selected by name, no dense N x N adjacency anywhere):
//   "transformerconv"  ScaleDL eq. 11-13: per head l,
//        eps_ij = (W_Q v_i).(W_K v_j)/sqrt(d_k) + ReLU(W_edge e_ij + b_edge)      (11)
//        w_ij   = softmax over the incoming edges j -> i of eps_ij                (12)
//        v'_i   = 1/L sum_l ELU(sum_j w_ij^(l) W_V^(l) v_j)  + W_root v_i        (13)
//      (W_root v_i is the skip term of PyG's TransformerConv: a node without
//       incoming edges keeps its own information.)
//   "anee"  DNNPerf §III-D, R rounds with weights shared across rounds:
//        hbar_u = LeakyReLU(W_u h_u)
//        e_l    = sigmoid(a.(hbar_s || hbar_d) * W_e e_l)          (edge update, l = s -> d)
//        f_l    = softmax over the incoming edges of d of (w_m . e_l)
//        h_d    = LeakyReLU(hbar_d + sum_l f_l hbar_s)
// Readout: sum (DNNPerf) or mean of node embeddings per graph; eq. 14 head:
//        out = MLP([Pool(v') || MLP(Z)]).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "scaledl/gnn/graph_batch.hpp"
#include "scaledl/gnn/graph_inference.hpp"
#include "scaledl/gnn/train_options.hpp"

namespace scaledl {

/// Sum of `rows` [E, ...] into `num_out` buckets by `index` [E] (int64 in
/// [0, num_out)): out[i] = sum of rows[e] with index[e] == i; differentiable.
torch::Tensor scatter_sum(const torch::Tensor& rows, const torch::Tensor& index, int64_t num_out);

/// x.index_select(0, index), with scatter_sum as its backward.
torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& index);

/// Softmax of `scores` [E, H] over the edges sharing a destination: for each
/// destination d and head h, the weights of the edges into d sum to 1.
/// Uses only scatter_sum/index_select/exp (LibTorch 1.13 and 2.x); the stabilising
/// shift is the per-destination MEAN of the scores (softmax is shift-invariant,
/// and the largest term has exp(.) >= 1, so the denominator never underflows).
torch::Tensor segment_softmax(const torch::Tensor& scores, const torch::Tensor& dst, int64_t num_nodes);

/// Node encoder interface: x [N, F], edge_index [2, E], edge_attr [E, Fe] -> [N, hidden].
struct GraphEncoderImpl : torch::nn::Module {
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& edge_index,
                                const torch::Tensor& edge_attr) = 0;
  /// Attention weights [E, heads] of the last forward (for tests), of layer/round `layer`.
  virtual torch::Tensor attention(int64_t layer) const = 0;
};

/// One TransformerConv layer with edge features (eq. 11-13).
struct TransformerConvImpl : torch::nn::Module {
  TransformerConvImpl(int64_t in, int64_t out, int64_t heads, int64_t edge_dim);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& edge_index,
                        const torch::Tensor& edge_attr);
  int64_t out, heads, dk;
  torch::nn::Linear wqkvr{nullptr}, wedge{nullptr};  ///< [W_Q|W_K|W_V^(1..L)|W_root], W_edge
  torch::Tensor last_attention;                      ///< [E, heads], detached
};
TORCH_MODULE(TransformerConv);

/// Output of the model for a batch of G graphs; times in ms.
struct GnnOutput {
  torch::Tensor alpha, beta;  ///< [G]; direct target: alpha = T_pred/T_sum, beta = 0
  torch::Tensor t_pred;       ///< [G] predicted T_iter, ms
  torch::Tensor log_t_pred;   ///< [G] log of t_pred (computed stably)
};

/// The full model Omega (eq. 14).
struct GnnModelImpl : torch::nn::Module {
  explicit GnnModelImpl(const GnnConfig& cfg);
  GnnOutput forward(const GraphBatch& b);
  GnnConfig cfg;
  std::shared_ptr<GraphEncoderImpl> encoder;
  torch::nn::Sequential z_mlp{nullptr}, head{nullptr};
  torch::Tensor log_t_offset;  ///< buffer [1]: mean log target of the training set (direct target)
};
TORCH_MODULE(GnnModel);

/// Mean relative error |pred - y| / y of two equal-length vectors (fraction).
double mean_relative_error(const std::vector<double>& pred, const std::vector<double>& y);

/// A trained refinement model: config + normalisation + weights.
class GraphPredictor {
 public:
  GraphPredictor() = default;
  GraphPredictor(const GnnConfig& cfg, Normalizer norm);

  /// Trains on graphs with finite target_ms > 0 (throws naming the first bad label).
  static GraphPredictor train(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                              const GnnTrainOptions& opt, GnnTrainReport* report = nullptr);

  /// True when predict takes the alpha of a run with backward nodes from its
  /// forward part (GnnPrediction::alpha_from_forward): ood_tau > 0 and no
  /// training run had backward nodes.
  bool alpha_from_forward_part() const;

  /// Predicts in batches of `batch_size` graphs on `device` (default CPU).
  GnnPrediction predict(const std::vector<GraphFeatures>& graphs, int64_t batch_size = 64,
                        torch::Device device = torch::kCPU) const;
  GnnPrediction predict(const std::vector<const GraphFeatures*>& graphs, int64_t batch_size = 64,
                        torch::Device device = torch::kCPU) const;

  /// safetensors file with weights ("model.*"), normalisation ("norm.*") and
  /// __metadata__ {format, format_version, encoder, config, feature names, ...}.
  void save(const std::string& path, const nlohmann::json& extra_metadata = {}) const;
  /// Throws naming the file and field on a corrupt, truncated, wrong-version or
  /// feature-mismatched file.
  static GraphPredictor load(const std::string& path);

  const GnnConfig& config() const { return cfg_; }
  const Normalizer& normalizer() const { return norm_; }
  GnnModel& model() { return model_; }
  const GnnModel& model() const { return model_; }
  /// Metadata read by load() ("train_report" etc.), empty otherwise.
  const nlohmann::json& metadata() const { return meta_; }

  /// The same model without LibTorch (graph_inference.hpp), what prediction runs:
  /// built by load() from the file, otherwise from the weights in memory at the
  /// first call, and again when a weight has changed since (an optimiser step, a
  /// copy_ or a move to another device or dtype). Thread-safe; throws like predict
  /// when there is no model.
  std::shared_ptr<const GraphInference> inference() const;

  static constexpr int kFormatVersion = kGnnFileFormatVersion;

 private:
  struct InferenceCache;
  GnnConfig cfg_;
  Normalizer norm_;
  GnnModel model_{nullptr};
  nlohmann::json meta_;
  std::shared_ptr<InferenceCache> inference_;  ///< shared by copies, as model_ is
};

/// A refinement's further members (docs/gnn.md, "Members"): `count` - 1 more models trained on
/// the same graphs and options as the first, with seeds opt.seed + 1 ... opt.seed + count - 1, in
/// that order (what a bundle saves as graph-1, graph-2 ... and eval's --graph-members combines).
/// `reports`, when given, receives each one's training report.
std::vector<GraphPredictor> train_further_members(const std::vector<GraphFeatures>& graphs,
                                                  const GnnConfig& cfg, const GnnTrainOptions& opt,
                                                  int64_t count,
                                                  std::vector<GnnTrainReport>* reports = nullptr);

/// K-fold cross-validation over graphs: each graph is predicted once by a model
/// that never saw it. Within each training part, `opt.val_fraction` is held out
/// for early stopping as in GraphPredictor::train, so the test fold plays no
/// part in model selection. Folds come from a permutation seeded by opt.seed.
struct GnnCvReport {
  int64_t folds = 0, graphs = 0;
  std::vector<std::string> labels;                           ///< per graph, in input order
  std::vector<double> target_ms, before_ms, pred_ms, alpha;  ///< per graph; before = T_sum + T_comm
  std::vector<int64_t> fold;                                 ///< fold each graph was tested in
  double mre_before = NAN, mre = NAN;                        ///< over all graphs (fractions)
  std::vector<double> fold_mre;                              ///< per fold, after refinement
  double seconds = 0;
  nlohmann::json to_json() const;
};
GnnCvReport cross_validate_graphs(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt, int64_t folds);

/// Fold of each of `n` graphs (0..folds-1, near-equal sizes): a permutation
/// seeded by `seed`, the one cross_validate_graphs uses with opt.seed = seed.
std::vector<int64_t> graph_cv_folds(size_t n, int64_t folds, uint64_t seed);

/// The fold loop itself: fold k trains on the graphs with fold[i] != k and tests
/// those with fold[i] == k, all taken from `graphs_of_fold(k)` (n graphs in the
/// order of `fold`), so each fold may featurize the graphs its own way (e.g. with
/// layer models that did not see fold k: graph_cv.hpp).
GnnCvReport cross_validate_graphs(const std::vector<int64_t>& fold, int64_t folds, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt,
                                  const std::function<std::vector<GraphFeatures>(int64_t)>& graphs_of_fold);

}  // namespace scaledl
