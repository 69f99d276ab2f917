#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// `scaledl scale`: predicted iteration and epoch time, speedup and efficiency
// against the number of GPUs, for every feasible (tp, pp, dp) split and
// micro-batch size, with the best split per GPU count and the best GPU count for
// a time or cost target (Celerity, ../shared/seeds/celerity-scalability.md;
// docs/parallel.md).
//
// Two scaling modes: strong (a fixed global batch: the same work on more GPUs)
// and weak (a fixed batch per GPU: global batch = per-GPU batch x N).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/comm/comm.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/predict/parallel.hpp"

namespace scaledl {

struct Bundle;

struct ScaleOptions {
  std::vector<int64_t> gpus;      ///< GPU counts to evaluate (e.g. 1, 2, 4, ... 1024)
  int64_t gpus_per_node = 8;      ///< node size: TP stays inside a node
  bool weak = false;              ///< fixed per-GPU batch (else a fixed global batch)
  int64_t global_batch = 0;       ///< strong: samples per iteration (0 = settings.batch)
  int64_t per_gpu_batch = 0;      ///< weak: samples per GPU (0 = settings.batch)
  int64_t samples = 0;            ///< samples per epoch (0 = no epoch time)
  double price_per_gpu_hour = 0;  ///< for the cost of an epoch (0 = not given)
  double target_epoch_s = 0;      ///< the cheapest N meeting this epoch time (0 = none)
  /// The layouts searched at every GPU count besides (tp, pp, dp, ep, micro-batch): each list
  /// holds the values tried, and every feasible combination is predicted (a search of all of
  /// them multiplies the splits by the product of the lists' sizes).
  std::vector<int> zero = {1};                           ///< ZeRO stages (0 where dp = 1)
  std::vector<int64_t> cp = {1};                         ///< context-parallel ways
  std::vector<int64_t> vp = {1};                         ///< virtual pipeline stages (tried where pp > 1)
  std::vector<Recompute> recompute = {Recompute::None};  ///< activation recomputation granularities
  std::vector<bool> sequence_parallel = {false};         ///< sequence parallelism (tried where tp > 1)
  /// Kernel recipes (apply_framework on the settings); empty = the settings' own.
  std::vector<Framework> frameworks;
  bool overlap_grad_reduce = false;  ///< every split overlaps its gradient reduction
  bool overlap_tp_comm = false;      ///< every split with tp > 1 and SP overlaps its TP collectives
  /// Splits whose predicted per-GPU peak (memory.hpp, estimate_parallel_memory)
  /// exceeds (1 - headroom) x the device memory are skipped; a device record
  /// without mem_gb skips none. In [0, 1).
  double headroom = 0.10;
  /// Issue #15 (pipeline.hpp, ORION): T_input in ms of one iteration at `gpus`
  /// GPUs on `nodes` hosts with `global_batch` samples; T_iter = max(T_compute,
  /// T_input). Empty = the input pipeline is not modelled.
  std::function<double(int64_t gpus, int64_t nodes, int64_t global_batch)> input_ms;
};

struct ScalePoint {
  int64_t gpus = 1;
  ParallelPrediction best;  ///< the fastest feasible split at this N
  std::string framework;    ///< its kernel recipe ("" = the settings', no framework searched)
  int64_t global_batch = 0;
  int64_t splits = 0;          ///< feasible (tp, pp, dp, micro-batch) combinations tried
  int64_t skipped_memory = 0;  ///< splits left out because they do not fit in device memory
  double peak_bytes = 0;       ///< predicted per-GPU peak memory of the best split
  double t_epoch_s = 0;        ///< 0 without samples
  double t_compute_ms = 0;     ///< the best split's T_iter before the input bound (issue #15)
  double t_input_ms = 0;       ///< host input pipeline time per iteration; 0 = not modelled
  double speedup = 1;          ///< strong: T(1) / T(N); weak: N x T(1) / T(N) (throughput ratio)
  double efficiency = 1;       ///< speedup / N
  /// T_iter was raised to one GPU's time x global batch / (N x its batch): the predicted split was
  /// faster than a linear speedup, which N GPUs never reach (in to_json as "linear_bound")
  bool linear_bound = false;
  double cost = 0;  ///< price x N x epoch hours (0 without a price or samples)
};

struct ScaleResult {
  std::vector<ScalePoint> points;       ///< one per feasible N, in the order of ScaleOptions::gpus
  int64_t fastest = -1;                 ///< index of the shortest iteration time
  int64_t best_for_target = -1;         ///< cheapest (else smallest N) meeting target_epoch_s; -1 if none
  std::vector<std::string> infeasible;  ///< "N: why" for counts with no feasible split
  /// What `predict` prints for one GPU running the batch speedups are against (the global
  /// batch; weak scaling: the per-GPU batch), ms: speedup = (this / that batch) / (T_iter / global batch).
  double single_gpu_ms = 0;
  /// cross_node_comm_warning of the inter-node model at the most nodes a point
  /// spans ("" = none; issue #39 case 27); in to_json as "comm_warning".
  std::string comm_warning;
  nlohmann::json to_json() const;
};

/// Evaluates every GPU count. Throws on bad options (empty list, a count < 1,
/// negative price or target, a node size < 1).
ScaleResult scale_curve(const Bundle& b, const ModelSpec& m, const TrainSettings& s, const ScaleOptions& o,
                        const DeviceRecord& dev, const ClusterComm& comm);

/// "1..1024" (powers of two), "1,2,8" or "6": GPU counts; throws naming --gpus.
std::vector<int64_t> parse_gpu_counts(const std::string& spec);

/// A comma list of integers in [lo, hi] ("1,2,4"): an Error naming `key` and the value otherwise.
std::vector<int64_t> parse_int_list(const std::string& value, const std::string& key, int64_t lo, int64_t hi);

/// The layout of a split in one line: "tp 2 x cp 2 x pp 4 (vp 2) x dp 8, M 16, ZeRO 1, SP, recompute".
std::string layout_string(const ParallelConfig& c, int64_t dp);

/// The options of a split beyond its degrees, as layout_string names them: "SP" or "SP (TP comm
/// overlapped)", "recompute", "selective recompute" (empty for none).
std::vector<std::string> layout_options(const ParallelConfig& c);

/// One GPU type of a comparison (`scale --device-spec a,b,c`): its curve, price and the point that
/// answers the question (the cheapest meeting the target, else the cheapest, else the fastest).
struct DeviceCurve {
  std::string name;  ///< the --device-spec value
  DeviceRecord dev;
  double price_per_gpu_hour = 0;  ///< 0 = no price
  std::string price_source;       ///< where the price comes from ("" = none)
  ScaleResult result;
  int64_t pick = -1;  ///< index into result.points; -1 = no feasible point (error says why)
  std::string error;  ///< why this GPU has no curve ("" = it has one)
};

/// The point of `r` that answers "which N": with a target, the one meeting it (cheapest, else
/// fewest GPUs); otherwise the cheapest epoch when priced, else the fastest. -1 when none meets
/// the target.
int64_t pick_point(const ScaleResult& r, const ScaleOptions& o);

/// Orders the curves for the comparison table: those with a pick first, by cost per epoch when
/// every picked point has one, else by time per sample; those without one last.
void rank_device_curves(std::vector<DeviceCurve>& curves);

}  // namespace scaledl
