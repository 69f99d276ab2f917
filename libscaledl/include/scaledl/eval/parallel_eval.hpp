#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// `scaledl eval parallel`: the parallel composition (parallel.hpp) against
// measured multi-GPU iterations (docs/parallel.md).
//
// Input: a CSV in vTrain's single_node_train.csv layout (datasets/vtrain/):
//   # GPUs, global batch, micro batch, hidden size, attention heads, # layers,
//   sequence length, tensor parallelism, data parallelism, pipeline parallelism,
//   iteration time (ms)
// plus optional columns dtype (default fp16), recompute (0/1, default 1),
// vocab (default 50257, padded as Megatron pads it to a multiple of 128 x tp)
// and label. Each row is a Megatron GPT (GPT-2 blocks) on one node.
//
// Two predictions per run: `raw` (the composition as predict --gpus gives it)
// and `calibrated`: T = alpha x compute + beta x communication, (alpha, beta)
// least-squares fitted on a random half of the runs (relative errors) and
// reported on the other half, over --seeds splits: ScaleDL's eq. 1 with its
// two factors learned from one cluster's measurements.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/ir/layer_types.hpp"

namespace scaledl {

struct ParallelRun {
  int64_t gpus = 1, global_batch = 1, micro_batch = 1, hidden = 0, heads = 0, layers = 0, seq = 0;
  int64_t tp = 1, dp = 1, pp = 1;
  double measured_ms = 0;
  DType dtype = DType::FP16;
  bool recompute = true;
  int64_t vocab = 50257;
  std::string label;
  /// "single", "dp", "tp", "pp", "tp+dp", "tp+pp", "dp+pp" or "tp+dp+pp".
  std::string scheme() const;
};

/// Reads the CSV; every malformed line is one Error naming FILE:LINE and the field.
std::vector<ParallelRun> load_parallel_runs(const std::string& path);

struct ParallelEvalOptions {
  std::string bundle;       ///< bundle directory
  std::string device_spec;  ///< the GPU's spec sheet
  std::string comm;         ///< collective calibration JSON ("" = the bundle's)
  /// Also score what `predict --gpus` prints (predict_parallel_anchored with the collectives of
  /// choose_cluster_comm: `fabric`, else the GPU's preset): the shipped path, nothing fitted on
  /// the runs. Costs one single-GPU prediction per distinct replica.
  bool shipped = false;
  std::string fabric;  ///< --fabric for the shipped path ("" = the GPU's preset)
  /// The shipped path's host cost per graph node, ms, instead of what `predict` takes (the
  /// bundle's fit of the device, else the framework's default): for protocols that fit it on
  /// other runs (scripts/reproduce/parallel_check.sh). Unset = predict's.
  std::optional<double> shipped_host_node_ms;
  int seeds = 5;                       ///< random half splits for the calibrated figures
  std::string out;                     ///< folder for predictions.csv and report.md/json ("" = none)
  std::vector<ParallelRun> test_runs;  ///< predicted with the factors fitted on all runs (another source)
};

/// Predicts every run, fits and reports; returns the report JSON
/// {"runs", "raw": {scheme: MRE %}, "calibrated": {scheme: MRE % (mean over seeds)}, "alpha", "beta"}
/// (+ "shipped": {"collectives", "mre": {scheme: MRE %}, "bias": {scheme: %}} with o.shipped).
/// Without --comm or a bundle calibration, the GPU's preset's all-reduce at a full node is the
/// composition's one collective model.
nlohmann::json eval_parallel(const std::vector<ParallelRun>& runs, const ParallelEvalOptions& o);

}  // namespace scaledl
