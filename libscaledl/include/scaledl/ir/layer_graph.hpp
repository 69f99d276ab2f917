#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// One training iteration of a model as a directed acyclic graph of layers.
//
// Nodes are layer instances in a direction (forward, backward, optimizer update);
// edges carry the tensor that flows between them. Node features follow ScaleDL
// eq. 7-10 and DNNPerf Table I: type, structural dims, FLOPs fwd/bwd, params,
// input/output/weight/temporary bytes (LayerCost, from layer_types.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/ir/layer_types.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

struct LayerNode {
  int id = 0;        ///< index into LayerGraph::nodes
  std::string name;  ///< e.g. "encoder.3.attn.q_proj" (".bwd" suffix for backward)
  LayerType type = LayerType::Linear;
  Direction dir = Direction::Forward;
  std::vector<int64_t> dims;       ///< structural dims, names from layer_info(type).dims
  DType dtype = DType::FP32;       ///< its kernels' dtype: settings.dtype, FP8 for the FP8 recipe's GEMMs
  LayerCost cost;                  ///< from layer_cost(type, dims, dtype)
  int block = -1;                  ///< transformer block index, -1 outside blocks
  int peer = -1;                   ///< backward node: id of its forward node (and vice versa); -1: none
  bool frozen = false;             ///< LoRA's base model: weights without gradient or optimizer state
  std::vector<int64_t> out_shape;  ///< shape of the main output tensor
  /// FLOP this node performs in its direction (fwd, bwd or update).
  double flops() const { return dir == Direction::Backward ? cost.flops_bwd : cost.flops_fwd; }
};

struct LayerEdge {
  int src = 0, dst = 0;        ///< node ids
  double bytes = 0;            ///< bytes of the tensor carried
  std::vector<int64_t> shape;  ///< its shape
  bool backward = false;       ///< gradient tensor (true) or activation (false)
  bool saved = false;          ///< forward node -> its own backward node: tensors saved for backward
};

/// The part of a model a pipeline stage holds: what runs before the transformer blocks (the
/// embedding: the first stage's), the blocks (split over the stages), or what runs after them
/// (the final norm, the head and the loss: the last stage's).
enum class StagePart { First, Blocks, Last };

struct LayerGraph {
  ModelSpec model;
  TrainSettings settings;
  std::vector<LayerNode> nodes;  ///< topologically ordered: every edge has src < dst
  std::vector<LayerEdge> edges;

  double total_params() const;      ///< sum of params over forward nodes
  double trainable_params() const;  ///< the same over the nodes not frozen (LoRA: the adapters)
  double total_flops_fwd() const;
  double total_flops_bwd() const;
  double total_flops_update() const;  ///< optimizer-step FLOP (0 without optimizer_step)
  /// Id of the node with this exact name, -1 when absent.
  int find(const std::string& name) const;
  /// Where each node sits when the blocks are split into pipeline stages (stage_part).
  std::vector<StagePart> stage_parts() const;
  /// Whether each node is a forward node of an attention core in the blocks: the score and context
  /// products (`<attn>.qk`, `.av`), what lies between them (scale, softcap, bias, mask, sinks,
  /// softmax, the attention dropout) or a fused `flash_attention` kernel. What Megatron-LM's
  /// selective recomputation (`--recompute-granularity selective`) runs again.
  std::vector<bool> attention_core() const;
  nlohmann::json to_json() const;  ///< {params, flops_fwd, flops_bwd, layers: [...], edges: [...]}
  std::string to_dot() const;      ///< Graphviz
};

/// Decomposes one training iteration (forward, loss, backward, optional
/// optimizer step) into a layer graph. Validates model and settings first.
LayerGraph build_layer_graph(const ModelSpec& m, const TrainSettings& s);

}  // namespace scaledl
