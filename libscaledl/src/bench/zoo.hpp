#pragma once
// The model zoo: LibTorch (torch::nn) implementations of the Transformer
// families of model_spec.hpp, built from a ModelSpec + TrainSettings on a
// device and dtype chosen at run time, and the per-node probe that times each
// layer node inside the real model.
//
// Every forward layer op is named after the node naming convention of the
// layer graph (layer_graph.hpp): "embed.word", "encoder.3.attn.q", "head.loss"...
// so per-node times measured here line up with LayerGraph nodes ("<name>.bwd"
// for the backward direction, "optim.step" for the optimizer update).
//
// Families: BERT (post-norm encoder, pooler, classifier or MLM head), GPT-2
// (fused qkv, tied LM head), GPT-Neo/OPT (decoder with learned positions),
// T5 (encoder-decoder, RMSNorm, relative attention bias), ViT and DeiT (patch
// embedding, CLS (+ distillation) token), Llama (RMSNorm, SwiGLU, GQA, rotary).
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "scaledl/bench/bench.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

/// One synthetic training batch. Token ids are uniform in [0, vocab); labels in [0, classes).
struct ZooBatch {
  torch::Tensor input;          ///< text: token ids [batch, seq] int64; vision: pixels [batch, C, H, W]
  torch::Tensor decoder_input;  ///< T5: decoder token ids [batch, seq] int64; undefined otherwise
  torch::Tensor labels;         ///< LM: [batch, seq] int64; classifier: [batch] int64
};

/// Records each layer node's own forward and backward time inside a real model.
///
/// Forward: the op of node N is bracketed by device synchronisations, so
/// fwd(N) = wall time of N's kernels alone. Backward: N's output passes through
/// an identity autograd function whose backward stamps the time (after a device
/// synchronisation) when the gradient of N's output is ready, i.e. when N's
/// backward can start. With the autograd engine running ready functions in
/// reverse creation order, N's backward runs next, so bwd(N) = time from N's
/// stamp to the next stamp (the last stamp ends at end_backward()). The probe
/// adds synchronisations, so it is used in a separate instrumented run only.
class NodeProbe {
 public:
  explicit NodeProbe(torch::Device device);
  /// Runs `op` as node `name`: times it and marks its output for the backward stamp.
  torch::Tensor run(const std::string& name, const std::function<torch::Tensor()>& op);
  /// Times an arbitrary step (e.g. "optim.step") without marking a tensor.
  void time(const std::string& name, const std::function<void()>& op);
  /// Brackets loss.backward(); end_backward() closes the last backward interval.
  void begin_backward();
  void end_backward();
  /// Called from the identity function's backward (engine thread).
  void stamp(int64_t node_id);
  /// Starts an instrumented iteration (drops any unfinished one).
  void begin_iteration();
  /// Folds this iteration's per-node sums into the samples.
  void end_iteration();
  /// Median over iterations of each node's time, ms: forward names as given,
  /// backward names with ".bwd". Order: forward nodes in first-seen order, then backward.
  std::vector<NodeTime> node_times() const;
  /// Number of completed instrumented iterations.
  int iterations() const { return iterations_; }

 private:
  using Clock = std::chrono::steady_clock;
  void sync() const;
  int64_t id_of(const std::string& name);
  void add_ms(const std::string& name, double ms);  ///< caller holds mu_
  torch::Device device_;
  std::vector<std::string> names_;  ///< node id -> forward name
  std::map<std::string, int64_t> ids_;
  std::map<std::string, std::vector<double>> samples_;  ///< name -> per-iteration ms
  std::vector<std::string> order_;                      ///< first-seen order of sample names
  std::map<std::string, double> iter_ms_;               ///< this iteration's sums (a node may run twice)
  std::vector<std::string> iter_order_;                 ///< first-seen order within the iteration
  std::vector<std::pair<int64_t, Clock::time_point>> events_;
  Clock::time_point bwd_begin_;
  int iterations_ = 0;
  std::mutex mu_;
};

/// A zoo model: a torch::nn::Module whose forward returns the training loss.
class ZooModel : public torch::nn::Module {
 public:
  /// Forward + loss of one batch; a scalar. `probe` (may be null) times each node.
  virtual torch::Tensor loss(const ZooBatch& batch, NodeProbe* probe) = 0;
  const ModelSpec& spec() const { return spec_; }

 protected:
  explicit ZooModel(ModelSpec spec) : spec_(std::move(spec)) {}
  ModelSpec spec_;
};

/// Builds the model of `m` for `s` (sequence length and image size set the
/// position tables' use, not their size) on `device`, cast to s.dtype.
/// Throws Error naming the key and value for an unsupported spec.
std::shared_ptr<ZooModel> build_zoo_model(const ModelSpec& m, const TrainSettings& s, torch::Device device);

/// Random batch matching `m` and `s` on `device` (pixels in s.dtype). Deterministic for a seed.
ZooBatch make_zoo_batch(const ModelSpec& m, const TrainSettings& s, torch::Device device, uint64_t seed = 0);

/// Trainable elements of a module (parameters with requires_grad, shared ones once).
int64_t trainable_parameter_count(const torch::nn::Module& module);

}  // namespace scaledl
