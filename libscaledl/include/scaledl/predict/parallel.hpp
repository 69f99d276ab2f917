#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Data, tensor and pipeline parallelism (Megatron-LM style) on top of the
// per-layer predictions of a bundle (issue #14, docs/parallel.md).
//
// N GPUs = tp x pp x dp. One data-parallel replica runs `batch` samples per
// iteration, split into M micro-batches of batch / M samples for the pipeline.
//   tensor parallel  every attention and FFN block is split tp ways (heads,
//                    FFN columns and the vocabulary divided by tp); per layer 2
//                    all-reduces of the activations [mb, s, h] in the forward
//                    and 2 in the backward (2 more with recomputation)
//   pipeline         pp stages of ceil(L / pp) layers, the first also holding the
//                    embedding and the last the final norm, head and loss; 1F1B:
//                    M slots of the longest stage and (pp - 1) of the others' mean
//                    (equal stages: (M + pp - 1) slots, bubble fraction
//                    (pp - 1) / (M + pp - 1)); per micro-batch and stage boundary
//                    one send of the activations forward and one of their gradient
//                    backward
//   data parallel    the gradients of a GPU's parameters all-reduced over dp
//                    ranks after the last micro-batch (not overlapped: Megatron
//                    without gradient bucketing); ZeRO-1/2/3 partition the
//                    optimizer step over dp (ZeRO-3 also all-gathers the weights)
//   expert parallel  --ep E_p (mixtures of experts): the experts of every sparse FFN
//                    are spread over E_p of the data-parallel ranks; a GPU holds
//                    num_experts / E_p of them, each taking the tokens of E_p GPUs
//                    (the same FLOPs, fewer weights); per sparse FFN and micro-batch
//                    2 all-to-alls (dispatch, combine) of mb x s x k x h elements in
//                    the forward, 2 in the backward (2 more with recomputation); the
//                    experts' gradients are all-reduced over dp / E_p ranks, the rest
//                    over dp. Not validated against measurements (no MoE run in vTrain)
//   recompute        the forward of every block runs again before its backward;
//                    selective: the attention core's alone (LayerGraph::attention_core)
//   mixed precision  --dtype fp16|bf16: half-precision compute and gradients,
//                    the optimizer step on FP32 master weights
//
//   slot   = t_fwd + t_bwd [+ t_fwd] + t_tp + t_ep + t_p2p of a stage's micro-batch
//   T_iter = M x max_s slot_s + (pp - 1) x mean of the other stages' slots + t_dp + t_opt
//            (= (M + pp - 1) x slot + t_dp + t_opt for equal stages)
//
//   host term        with ParallelConfig::host_node_ms = d > 0 (`--host-node-us`), a
//                    slot is max(the GPU's slot, n x d): the stage's host issues the
//                    n nodes of one micro-batch (its forward and backward nodes, the
//                    recomputed forward, one per TP all-reduce and pipeline send)
//                    and an eager framework cannot issue them faster than d each
//                    (docs/parallel.md, "The host's cost per node")
//
// t_fwd / t_bwd: the layer models' sums (T_sum split by direction) of one
// micro-batch on a stage's shard with the embedding and the head (t_first, t_last
// of them: the first and last stage's alone); t_tp, t_p2p, t_dp: the calibrated
// collective model (comm.hpp) at tp, 2 and dp ranks.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "scaledl/comm/comm.hpp"
#include "scaledl/comm/fabric.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/predict/physics.hpp"

namespace scaledl {

struct Bundle;

struct ParallelConfig {
  int64_t gpus = 1;
  int64_t nodes = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t microbatches = 1;  ///< M: micro-batches per iteration of one replica
  int64_t ep = 1;            ///< expert-parallel ways (mixtures of experts): divides dp and the expert count
  int zero = 0;              ///< ZeRO stage 0..3
  bool recompute = false;    ///< activation recomputation of every block (Megatron's full granularity)
  /// Megatron's --recompute-granularity selective: only each block's attention core
  /// (LayerGraph::attention_core) runs its forward again before its backward, and its activations
  /// (the softmax's output, the dropout's mask and output) are not kept. Excludes `recompute`.
  bool selective_recompute = false;
  double host_node_ms = 0;  ///< the host's cost per graph node, ms (0 = no host term); finite, >= 0
  int64_t cp = 1;  ///< context-parallel ways: each sample's sequence split over cp GPUs (ring attention)
  int64_t vp = 1;  ///< virtual pipeline stages per GPU (Megatron's interleaved 1F1B)
  /// The data-parallel reduction overlapped with the backward (Megatron --overlap-grad-reduce;
  /// under ZeRO >= 1 the parameter all-gather also overlaps the forward).
  bool overlap_grad_reduce = false;
  /// Megatron's sequence parallelism (--sequence-parallel, with tp > 1): each tensor-parallel
  /// all-reduce becomes a reduce-scatter and an all-gather, and the norms, residual adds and
  /// dropouts between them run on seq / tp tokens per GPU (TrainSettings::sequence_shards).
  bool sequence_parallel = false;
  /// Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers; needs sequence_parallel):
  /// each TP all-gather and reduce-scatter is split into tp chunks that run under their GEMM's
  /// chunks; per micro-batch the exposed part is max(t_tp - the shard's linear layers' time,
  /// t_tp / tp).
  bool overlap_tp_comm = false;
  bool is_parallel() const {
    return gpus > 1 || tp > 1 || pp > 1 || ep > 1 || cp > 1 || vp > 1 || microbatches > 1 || recompute ||
           selective_recompute;
  }
};

/// Activation recomputation as `scale` searches it: none, the attention core (selective) or every
/// block (full).
enum class Recompute { None, Selective, Full };
void set_recompute(ParallelConfig& c, Recompute r);
Recompute recompute_of(const ParallelConfig& c);
/// "none", "selective", "full"; parse_recompute names the option in its error.
const char* to_string(Recompute r);
Recompute parse_recompute(const std::string& v, const std::string& option);

/// The shapes and volumes of one configuration (no timing).
struct ParallelPlan {
  ParallelConfig cfg;
  int64_t dp = 1;
  int64_t gpus_per_node = 1;
  int64_t layers_per_stage = 0;  ///< the slowest stage's layers: ceil(L / pp)
  int64_t micro_batch = 0;       ///< samples per micro-batch
  double bubble_fraction = 0;    ///< (pp - 1) / (M + pp - 1)
  ModelSpec stage;      ///< one GPU's shard of the slowest stage (tp-split, ceil(L/pp) layers, with the head)
  TrainSettings micro;  ///< one micro-batch in fwd-bwd mode
  int64_t tp_allreduces = 0;   ///< per micro-batch on one stage
  double tp_bytes = 0;         ///< bytes of one TP all-reduce (activations [mb, s, h])
  double p2p_bytes = 0;        ///< bytes sent per micro-batch and direction between stages
  int64_t ep_alltoalls = 0;    ///< expert-parallel all-to-alls per micro-batch on one stage
  double ep_bytes = 0;         ///< bytes one GPU sends in one of them (its tokens x k x h), before (ep-1)/ep
  bool ep_inter_node = false;  ///< the expert-parallel group spans nodes
  double expert_grad_bytes = 0;  ///< of grad_bytes, the experts' (all-reduced over dp / ep ranks)
  double params_per_gpu = 0;     ///< parameters of the stage shard
  double grad_bytes = 0;         ///< gradient bytes all-reduced over dp x cp per iteration
  int64_t cp_steps = 0;          ///< ring-attention steps per layer and pass: cp - 1
  double cp_kv_bytes = 0;        ///< K and V of one GPU's sequence chunk, bytes: what one ring step sends
  bool cp_inter_node = false;    ///< the context-parallel ring spans nodes (tp x cp > GPUs per node)
  int64_t grad_buckets = 1;  ///< buckets of the overlapped reduction: max(40M, 1M x dp x cp) elements each
  /// (M + (pp - 1) / vp) pipeline slots per iteration (M + pp - 1 without virtual stages)
  double slots() const;
  bool tp_inter_node = false;  ///< the TP group spans nodes (tp > GPUs per node)
  nlohmann::json to_json() const;
};

/// `--host-node-us` in ms: an Error naming the option unless finite and in [0, 1e6] us.
double host_node_ms_of_us(double us);

/// Validates the configuration against the model and builds the plan. Errors
/// name the option and value: gpus not a multiple of tp x pp, tp not dividing
/// the heads (or the FFN size), pp larger than the layer count, micro-batches
/// not dividing the batch, ZeRO outside 0..3, nodes not dividing gpus, ep on a
/// dense model or not dividing dp and the expert count.
ParallelPlan plan_parallel(const ModelSpec& m, const TrainSettings& s, const ParallelConfig& c);

struct ParallelPrediction {
  ParallelPlan plan;
  double t_fwd_ms = 0, t_bwd_ms = 0, t_recompute_ms = 0;  ///< one micro-batch on the slowest stage
  /// Of t_fwd + t_bwd, the layers before and after the blocks (the embedding; the final norm, head
  /// and loss: LayerGraph::stage_parts) and their nodes. With pp > 1 they are the first and the last
  /// stage's alone; the middle stages run the blocks only.
  double t_first_ms = 0, t_last_ms = 0, first_nodes = 0, last_nodes = 0;
  double t_tp_ms = 0;         ///< TP all-reduces of one micro-batch (the exposed part under overlap_tp_comm)
  double t_tp_hidden_ms = 0;  ///< of the TP collectives, what overlap_tp_comm hides under the GEMMs
  double t_ep_ms = 0;         ///< expert-parallel all-to-alls of one micro-batch
  double t_p2p_ms = 0;        ///< pipeline sends of one micro-batch (both directions)
  /// M x the longest stage's slot + (pp - 1) / vp x the other stages' mean slot (HostRun::composed_ms;
  /// ParallelPlan::slots() x the slot when the stages are equal)
  double t_pipeline_ms = 0;
  double t_bubble_ms = 0;  ///< the part of t_pipeline that is bubble: t_pipeline - M x the longest slot
  double t_cp_ms = 0;      ///< ring attention's K/V exchange of one micro-batch not hidden by attention
  double t_cp_fwd_ms = 0;  ///< the forward's part of t_cp_ms (the rest is the backward's and its recompute's)
  double t_dp_ms = 0;      ///< data-parallel gradient all-reduce (ZeRO-3: + weight all-gathers)
  /// the part of t_dp_ms not overlapped (= t_dp_ms without ParallelConfig::overlap_grad_reduce):
  /// max(t_dp - the last micro-batch's backward (+ the first's forward under ZeRO >= 1), t_dp / buckets)
  double t_dp_exposed_ms = 0;
  double t_opt_ms = 0;  ///< optimizer step on this GPU's (ZeRO-partitioned) FP32 master weights
  /// nodes a host issues per micro-batch for the blocks of one stage and both the first and last
  /// stage's layers (see the top of this file)
  double slot_nodes = 0;
  /// Of slot_nodes, those of the forward phase (the forward graph's, its collectives' and its
  /// pipeline send), which the host issues before the backward's (HostPhases).
  double fwd_nodes = 0;
  /// The longest stage's slot on the GPU (t_fwd + t_bwd + t_recompute + t_tp + t_ep + t_p2p + t_cp
  /// less the first or last stage's layers it does not hold), its nodes, and their host time
  /// (stage_nodes x ParallelConfig::host_node_ms; 0 without a host term).
  double t_slot_gpu_ms = 0;
  double t_slot_ms = 0;  ///< the longest stage's slot: its host phases' sum of max(GPU, nodes x d)
  double stage_nodes = 0;
  double t_host_ms = 0;
  bool host_bound = false;  ///< the host sets the slot, or a phase of it (the slot exceeds t_slot_gpu_ms)
  double t_iter_ms = 0;
  /// predict_parallel_anchored: what `predict` prints for one replica's batch on one GPU, and the
  /// factor the GPU's compute terms (fwd, bwd, recompute, optimizer) were scaled by to meet it
  /// (0 and 1: not anchored, the layer models' plain sums).
  double single_gpu_ms = 0;
  double anchor_factor = 1;
  /// This prediction as a run of fit_host_node_ms (physics.hpp): its slots of
  /// slot_nodes nodes and t_slot_gpu_ms each, then t_dp + t_opt; measured `measured_ms`.
  HostRun host_run(const std::string& device, double measured_ms) const;
  /// T_iter with the host's cost per node `host_node_ms` instead of the configuration's
  /// (the slots, communication and optimizer step as predicted): host_run().composed_ms.
  double iter_ms(double host_node_ms) const;
  nlohmann::json to_json() const;
};

/// Predicts one iteration. `comm` holds the collective models inside a node (by the
/// ranks of the group: a fabric preset's fits, fabric.hpp) and across nodes.
ParallelPrediction predict_parallel(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                    const ParallelConfig& c, const DeviceRecord& dev,
                                    const ClusterComm& comm);
/// The same with one model inside a node and one across (the same model twice when only
/// one is calibrated).
ParallelPrediction predict_parallel(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                    const ParallelConfig& c, const DeviceRecord& dev, const CommModel& intra,
                                    const CommModel& inter);

/// What `scaledl predict` prints for `s` (one replica's batch) on one GPU: the refined, bounded
/// T_iter of Bundle::predict, in ms.
double single_gpu_iteration_ms(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                               const DeviceRecord& dev);

/// predict_parallel with one answer per job (what `predict --gpus` and `scale` print): the
/// composition's GPU compute terms (fwd, bwd, recompute, optimizer step) are scaled by
/// k = single_gpu_ms / (fwd + bwd + optimizer) of the same composition on one GPU (tp = pp = M = 1,
/// no recompute; where the host's term bounds that slot, k scales the optimizer step to what is
/// left), so that one GPU gives the time `predict` gives, and N data-parallel GPUs with the same
/// per-replica batch never less than it. Communication and the host's term are not scaled.
/// `anchor` null: computed here (single_gpu_anchor of m and s); a caller predicting many splits of
/// one replica's batch (`scale`) computes it once.
struct SingleGpuAnchor {
  double single_ms = 0;    ///< single_gpu_iteration_ms of the replica's batch
  ParallelPrediction raw;  ///< predict_parallel of that batch on one GPU (tp = pp = M = 1, no recompute)
};
SingleGpuAnchor single_gpu_anchor(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                  const DeviceRecord& dev, double host_node_ms);
ParallelPrediction predict_parallel_anchored(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                             const ParallelConfig& c, const DeviceRecord& dev,
                                             const ClusterComm& comm,
                                             const SingleGpuAnchor* anchor = nullptr);

}  // namespace scaledl
