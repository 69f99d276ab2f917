#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Physical bounds on a predicted iteration time (issue #16), applied by
// Bundle::predict_many to every prediction `scaledl predict` prints:
//
//   roofline   no iteration is faster than the sum over its layers of
//              max(FLOP / peak rate, bytes / peak bandwidth) with the device's
//              best rates (iteration_roofline_ms); a prediction below it is
//              raised to it and flagged.
//   monotone   at equal model, more tokens per iteration never take less time:
//              a prediction is at least the prediction for every smaller
//              configuration on the grid 1, 2, 3, 4, 6, 8, 12, ... (2^k, 3*2^k)
//              of batch x seq (text models; batch only for vision), including
//              its own batch and seq (monotone_ladder); a prediction below one
//              of them is raised to it and flagged.
//   mode       train >= fwd-bwd + the optimizer step's roofline, and
//              fwd-bwd >= inference, at equal model and settings (the mode
//              rung of monotone_ladder, labelled "mode ..."). Among the configurations of
//              one call (a sweep) a running maximum along batch and seq follows.
//   devices    N data-parallel devices (--devices N) take no less per iteration
//              than one device with the same batch (the rung "devices 1").
//
// Predictions are then exactly monotone on the grid and within a sweep; between
// separate calls off the grid, differences inside one grid step remain
// (docs/predict.md measures them).
#include <map>
#include <string>
#include <vector>

#include "scaledl/gnn/graph_features.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/host_phases.hpp"
#include "scaledl/ir/layer_graph.hpp"

namespace scaledl {

/// Upper bound of the device's compute rate for `dtype`, GFLOP/s: the largest
/// spec peak that can serve it (FP32: FP32; TF32: TF32 or FP32; BF16/FP16: any),
/// or twice the measured FP32 matmul rate when the record has no spec peak.
double bound_gflops(const DeviceRecord& d, DType dtype);
/// Upper bound of the device's memory bandwidth, GB/s: the larger of the spec
/// peak and the measured copy rate.
double bound_bandwidth_gbs(const DeviceRecord& d);
/// The roofline time of one iteration, ms: sum over the graph's nodes of
/// max(FLOP / bound_gflops, bytes beyond the last-level cache / bound_bandwidth_gbs).
/// Bytes that fit in the cache (d.l2_mb) are not charged: they need not reach memory.
double iteration_roofline_ms(const LayerGraph& g, const DeviceRecord& d);
/// The same over the update node(s) only (the optimizer step), ms.
double update_roofline_ms(const LayerGraph& g, const DeviceRecord& d);
/// Either of the two (update_only selects the update nodes).
double roofline_ms(const LayerGraph& g, const DeviceRecord& d, bool update_only);

/// One measured run for fit_host_node_ms: the nodes of its layer graph, the
/// iteration time predicted without the host term (T_sum + T_comm), the measured time.
/// A pipelined run (parallel.hpp) has `slots` slots of `nodes` nodes each, `predicted_ms`
/// the GPU's slot, and `rest_ms` after them (data-parallel all-reduce, optimizer step).
/// With pp > 1 stages, `nodes` and `predicted_ms` are a middle stage's (its blocks), the first
/// stage adds `first_nodes` and `first_ms` (the embedding), the last `last_nodes` and `last_ms`
/// (the head and loss), and `slots` = M + (pp - 1) / vp of `microbatches` M.
struct HostRun {
  std::string device;  ///< DeviceRecord::key()
  double nodes = 0, predicted_ms = 0, measured_ms = 0;
  double slots = 1, rest_ms = 0;
  int64_t pp = 1;
  double microbatches = 1;
  double first_nodes = 0, first_ms = 0, last_nodes = 0, last_ms = 0;
  /// How a slot's GPU time and nodes split into phases (a middle stage's; every stage is split
  /// alike); none: one phase.
  HostPhases phases;
  /// A stage's slot is its phases' sum of max(GPU time, nodes x d) (HostPhases::slot_ms; without
  /// phases max(its GPU time, its nodes x d)). One stage: slots x the slot + rest_ms.
  /// A pipeline: M x the longest stage's slot + (slots - M) x the mean slot of the other stages
  /// (1F1B: every micro-batch passes the longest stage, and the first and last micro-batches
  /// pass the others once; balanced stages give slots x the slot) + rest_ms.
  double composed_ms(double node_ms) const;
  /// The longest stage's GPU time, its nodes and its slot at `node_ms`.
  struct Stage {
    double gpu_ms = 0, nodes = 0, slot_ms = 0;
  };
  Stage longest_stage(double node_ms) const;
};
/// A single-GPU run's HostRun: its graph's nodes and layer sum (with T_comm), one phase (as
/// apply_host_term raises T_sum), and its measured time, for fit_host_node_ms.
HostRun graph_host_run(const GraphFeatures& g, const std::string& device, double measured_ms);
/// Runs a device needs before its host term is fitted (below: 0).
constexpr size_t kMinHostRuns = 8;
/// The least cost per graph node we measured of an eager framework's host, ms:
/// vTrain's Megatron-LM runs, 73 us (docs/parallel.md); our H100 host's LibTorch zoo
/// needs 102 us. `predict` warns where a GPU's layer sum per node is below it and no
/// host term is known (the host may set the iteration: give --host-node-us).
constexpr double kEagerHostNodeMs = 0.073;
/// Megatron-LM's host cost per graph node on vTrain's A100 hosts, ms: the mean of the fits
/// (fit_host_node_ms, host phases: HostPhases) on 5 random halves of vTrain's 720 public
/// single-node runs; 71 and 74 us fitted on each model width alone (docs/parallel.md, "The host's
/// cost per node"). 70 us before the phases (2026-11-30), when a slot was max(GPU, nodes x d).
constexpr double kMegatronHostNodeMs = 0.073;
/// The host's cost per graph node of the settings' kernels where nothing measured says (no
/// --host-node-us, no fit of the device in the bundle), ms: Megatron-LM's (fused_kernels, as
/// `--framework megatron` sets) kMegatronHostNodeMs on a GPU; Hugging Face's (eager or SDPA) none,
/// since its single-GPU runs on spec sheets are predicted without one; a CPU none.
double framework_host_node_ms(const TrainSettings& s, const std::string& device_kind);
/// The warning's text, or "" when none is due: `gpu_ms` over `nodes` against
/// kEagerHostNodeMs (`host_ms` > 0: a host term is applied; `kind` "cpu": none is due).
std::string host_bound_warning(double gpu_ms, double nodes, double host_ms, const std::string& kind);
/// The warning's text, or "" when none is due: the linear layers of `g` that the layer predictor
/// costs at a narrow-alignment GEMM's rate on `dev` (misaligned_gemm_ms > 0: a BF16, FP16 or TF32
/// linear with a d_in or d_out that is no multiple of 16 bytes, on an NVIDIA GPU), with their share
/// of the iteration's matrix FLOP, the rates applied and padding as the remedy.
std::string misaligned_gemm_warning(const LayerGraph& g, const DeviceRecord& dev);
/// Per GPU device with at least kMinHostRuns runs: the host's cost per graph node d,
/// ms, that minimises the sum over its runs of |log(HostRun::composed_ms(d) / measured)|
/// (a grid of 400 steps up to the largest measured / (slots x nodes); 0 when none beats d = 0).
/// An eager iteration waits on the host that issues its nodes: our H100 campaign's
/// small runs take 75-100 us per node whatever their width (docs/unseen-gpu.md, "The
/// host's cost per node"). A device whose record in `devices` is of kind "cpu" gets none.
std::map<std::string, double> fit_host_node_ms(const std::vector<HostRun>& runs,
                                               const std::map<std::string, DeviceRecord>& devices = {});

/// The smaller configurations that bound `s` from below (see the top of this file):
/// each with a label such as "batch 4", "seq 64" or "batch 4, seq 64".
struct LadderPoint {
  TrainSettings settings;
  std::string label;
  /// A point of the batch x seq grid: the input's settings but for batch and seq_len (the mode
  /// and devices rungs change other fields).
  bool grid = false;
};
std::vector<LadderPoint> monotone_ladder(const ModelSpec& m, const TrainSettings& s);

}  // namespace scaledl
