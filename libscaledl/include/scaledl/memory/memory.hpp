#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Peak memory of one iteration (issue #15, docs/memory.md; DNNPerf predicts
// memory beside time).
//
// estimate_memory() is the analytic estimate: it replays the layer graph as the
// zoo (and PyTorch's autograd) run it and tracks every allocation:
//   persistent  weights, optimizer state (SGD momentum: 1 x, Adam/AdamW: 2 x
//               the parameters), the batch;
//   forward     each node's output, freed when its last consumer has run and
//               no backward needs it; what backward needs (inputs of linears
//               and matmuls, softmax outputs, dropout masks, norm statistics,
//               the copies matmul makes of transposed q/k/v, the log-softmax of
//               the loss) stays until the node's backward ran;
//   backward    gradients of activations (freed after the producer's
//               backward), weight gradients (kept until the step), per-node
//               temporaries (the loss's two [tokens, vocab] FP32 buffers);
//   step        two temporaries of the largest parameter (Adam's denominator);
//   rounding    every allocation rounded up to `round_bytes` (CUDA caching
//               allocator: 512 B; CPU: exact).
// The learned correction (MemoryCorrection) and the parallel per-device form
// (estimate_parallel_memory) build on it.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/ir/layer_graph.hpp"

namespace scaledl {

struct MemoryOptions {
  /// "cuda" or "cpu": allocation rounding and the dropout mask (CUDA: a bool
  /// mask of 1 byte per element; CPU LibTorch: a scaled noise tensor of the dtype).
  std::string device_kind = "cuda";
  double round_bytes = -1;  ///< allocation granularity; < 0 = the device kind's (cuda 512, cpu 1)
  /// The training loop holds the model's outputs (its logits) until the backward ends, as
  /// `out = model(**batch); out.loss.backward()` does (Hugging Face's examples without the
  /// Trainer, accelerate's). false: they are freed once the loss is computed, as the Trainer
  /// (which returns the loss alone), Megatron-LM and the zoo do.
  bool keep_outputs = false;
};

struct MemoryEstimate {
  double weights = 0;    ///< parameter bytes
  double optimizer = 0;  ///< optimizer state bytes (after the first step)
  double batch = 0;      ///< input ids / images and labels
  double grads = 0;      ///< weight gradients at the end of backward
  double saved = 0;      ///< activations alive at the end of forward (training: saved for backward)
  double base = 0;       ///< allocated before the iteration: weights + optimizer + batch
  double peak = 0;       ///< highest allocation during the iteration (includes base)
  std::string peak_at;   ///< node at the peak ("<name>", "<name>.bwd" or "optim.step")
  nlohmann::json to_json() const;
};

/// The analytic estimate of one iteration of `g` (training, fwd-bwd or
/// inference, as g.settings say). Never negative; peak >= base.
MemoryEstimate estimate_memory(const LayerGraph& g, const MemoryOptions& o = {});

/// "cpu" for a CPU device kind or key ("cpu", "cpu:..."), "cuda" otherwise (cuda, spec sheets).
std::string memory_device_kind(const std::string& device_kind_or_name);

}  // namespace scaledl

// ---- the learned correction -------------------------------------------------

namespace scaledl {

/// One measured iteration as the memory models see it.
struct MemorySample {
  LayerGraph graph;           ///< the run's layer graph (model + settings)
  std::string device_kind;    ///< "cuda" | "cpu"
  double measured_bytes = 0;  ///< allocator peak of the iteration (PeakMemory::peak_bytes)
  std::string family;
};

/// The runs of `stores` whose peak was measured (status ok or unstable: memory
/// does not depend on timing noise), as samples; runs with a model or settings
/// this build cannot read are errors naming the store and row.
std::vector<MemorySample> load_memory_samples(const std::vector<std::string>& stores);

/// Features of a configuration for the memory regressors: the analytic
/// breakdown (log bytes and fractions) and the configuration's size.
std::vector<float> memory_features(const LayerGraph& g, const MemoryEstimate& a,
                                   const std::string& device_kind);
const std::vector<std::string>& memory_feature_names();

/// analytic x exp(f(x)): gradient-boosted trees (XGBoost) on the log ratio of
/// measured to analytic peak, trained like the time models. A ratio is bounded,
/// so a larger model than any trained on gets a correction inside the seen
/// range, never an extrapolated byte count. Intervals: quantiles of the
/// out-of-fold absolute log residuals (5 folds), symmetric in log space.
class MemoryCorrection {
 public:
  /// Needs >= 10 samples; errors name the count. `direct`: DNNPerf-style
  /// baseline, the same trees regressing log(peak) itself (no analytic prior).
  static MemoryCorrection train(const std::vector<MemorySample>& samples, bool direct = false,
                                uint64_t seed = 0);
  /// Predicted peak bytes.
  double predict(const LayerGraph& g, const std::string& device_kind) const;
  /// Peak with its 80 % and 95 % intervals: {peak, lo80, hi80, lo95, hi95}.
  std::vector<double> predict_interval(const LayerGraph& g, const std::string& device_kind) const;
  nlohmann::json to_json() const;
  static MemoryCorrection from_json(const nlohmann::json& j, const std::string& ctx);
  size_t samples() const { return n_; }
  double oof_mre() const { return oof_mre_; }  ///< out-of-fold mean relative error on the training samples
  bool direct() const { return direct_; }
  /// Device kinds ("cpu", "cuda") of the training runs: predict applies the
  /// correction only to these and falls back to the analytic estimate elsewhere.
  const std::vector<std::string>& device_kinds() const { return kinds_; }
  bool covers(const std::string& kind) const;

 private:
  std::vector<std::string> kinds_;
  std::string model_json_;  ///< XGBoost JSON
  bool direct_ = false;
  size_t n_ = 0;
  double q80_ = 0, q95_ = 0, oof_mre_ = 0;
  mutable std::shared_ptr<void> booster_;  ///< xgb::Booster, loaded lazily
};

/// Per-device peak under data / tensor / pipeline parallelism (issue #15):
/// the analytic replay of one micro-batch of the slowest stage's shard
/// (`stage` with `micro` settings, fwd-bwd) scaled by what the split does:
/// activations x in-flight micro-batches (1F1B: min(pp, M)), recomputation
/// keeps only each block's input plus one block's activations, ZeRO 1/2/3
/// partitions optimizer state / gradients / weights over dp, and mixed
/// precision (fp16/bf16) keeps FP32 master weights and Adam moments (16 bytes
/// per parameter as in Megatron).
struct ParallelMemory {
  double weights = 0, grads = 0, optimizer = 0, activations = 0, transient = 0, peak = 0;
  int64_t in_flight = 1;
  nlohmann::json to_json() const;
};
/// `selective_recompute` (Megatron's selective granularity; not with `recompute`): the attention
/// cores' kept tensors (LayerGraph::attention_core: the softmax's output, the dropout's mask and
/// output) are rebuilt in the backward instead of kept.
ParallelMemory estimate_parallel_memory(const LayerGraph& stage_micro, int64_t pp, int64_t microbatches,
                                        int64_t dp, int zero, bool recompute, OptimizerKind opt,
                                        const std::string& device_kind, bool selective_recompute = false);

}  // namespace scaledl

// ---- what predict prints ------------------------------------------------------

#include <cmath>

#include "scaledl/io/device.hpp"

namespace scaledl {

/// Checks --headroom: a fraction in [0, 1) of the device memory kept free.
void check_headroom(double headroom);

struct MemoryPrediction {
  MemoryEstimate analytic;
  double peak_bytes = 0;  ///< corrected when a correction is given, else analytic
  double lo80 = NAN, hi80 = NAN, lo95 = NAN, hi95 = NAN;  ///< bytes; NaN without a correction
  bool corrected = false;
  std::string method;         ///< how the peak was obtained, in words
  double capacity_bytes = 0;  ///< mem_gb x 1e9; 0 = the device record has none
  double headroom = 0;
  /// "fits", "does not fit", "tight" (the point fits but the upper 80 % bound does
  /// not) or "unknown" (no capacity in the device record).
  std::string verdict;
  nlohmann::json to_json() const;
};

/// keep_outputs: MemoryOptions::keep_outputs (a learned correction's figure is scaled by what it
/// adds to the analytic peak).
MemoryPrediction predict_memory(const LayerGraph& g, const DeviceRecord& dev,
                                const MemoryCorrection* correction, double headroom,
                                bool keep_outputs = false);
/// The same verdict for a per-device peak computed elsewhere (parallel splits).
std::string memory_verdict(double peak, double hi80, double capacity_bytes, double headroom);

}  // namespace scaledl
