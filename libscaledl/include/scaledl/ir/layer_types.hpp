#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The layer types of ScaleDL and the ONE definition of each type's shapes, FLOP
// and byte model. The IR (layer graph), the microbenchmarks, the per-layer
// predictors and the sampler all use these functions, so a formula lives here
// and nowhere else.
//
// A layer configuration is a type plus a short vector of integer dims whose
// names and order are given by layer_info(type).dims (e.g. linear:
// tokens, d_in, d_out, bias). Dims are the structural features h^struct of
// ScaleDL eq. 7; LayerCost holds the compute/memory features h^cm.
#include <cstdint>
#include <string>
#include <vector>

namespace scaledl {

/// Kind of layer, as the graph network counts shares of time (graph_batch.cpp's share_* features).
enum class LayerKind : int { Gemm = 0, Attention, Norm, Elementwise, Other };

// The layer types, one row each: everything a type is declared by.
//   X(Enumerator, name, kind, has_backward, dim names...)
// - name: the stable lower-case id of files, the DB and the command line, and the anchor
//   scaledl_layer_bench_<name> that the type's microbenchmark defines (src/bench/layer_*.cpp,
//   SCALEDL_REGISTER_LAYER_BENCH): a type without one fails to link.
// - kind: LayerKind above; has_backward: false only for Optimizer.
// - dims: the names of the integer dims of a configuration, in order.
// The enum, the name table, layer_info() and the bench registry are generated from these rows;
// what differs per type in code is a switch over LayerType without `default:` (layer_cost,
// the memory rules, saved_bytes, the GEMM view of features), so that -Werror=switch names
// every place a new row must be handled. docs/extending.md lists them.
// Rows are in id order: the id is stored (GNN one-hot, trained bundles); append new types.
// clang-format off
#define SCALEDL_LAYER_TYPES(X)                                                                     \
  /* token/position embedding lookup [tokens] -> [tokens, hidden] */                               \
  X(Embedding, embedding, Other, true, "tokens", "vocab", "hidden")                                 \
  /* [tokens, hidden], affine (weight + bias) */                                                    \
  X(LayerNorm, layernorm, Norm, true, "tokens", "hidden")                                           \
  /* [tokens, hidden], weight only (Llama, T5) */                                                   \
  X(RMSNorm, rmsnorm, Norm, true, "tokens", "hidden")                                               \
  /* [tokens, d_in] x [d_in, d_out] (+ bias) */                                                     \
  X(Linear, linear, Gemm, true, "tokens", "d_in", "d_out", "bias")                                  \
  /* batched matmul [batch, m, n] x [batch, n, k] (n is reduced) */                                 \
  X(BMM, bmm, Gemm, true, "batch", "m", "n", "k")                                                   \
  /* attention core QK^T, scale, softmax, dropout, AV as one unit */                                \
  X(Attention, attention, Attention, true, "batch", "heads", "seq_q", "seq_k", "head_dim")          \
  /* softmax over the last dim of [rows, cols] */                                                   \
  X(Softmax, softmax, Attention, true, "rows", "cols")                                              \
  /* elementwise mask on [elements] */                                                              \
  X(Dropout, dropout, Elementwise, true, "elements")                                                \
  X(GELU, gelu, Elementwise, true, "elements")                                                      \
  X(ReLU, relu, Elementwise, true, "elements")                                                      \
  X(SiLU, silu, Elementwise, true, "elements")                                                      \
  /* elementwise a + b (residual) */                                                                \
  X(Add, add, Elementwise, true, "elements")                                                        \
  /* elementwise a * b (SwiGLU gate) */                                                             \
  X(Mul, mul, Elementwise, true, "elements")                                                        \
  /* ViT/DeiT patch embedding: Conv2d(k = stride = patch) */                                        \
  X(Conv2dPatch, conv2d_patch, Gemm, true, "batch", "channels", "hidden", "image", "patch")         \
  /* softmax cross-entropy over [tokens, classes] */                                                \
  X(CrossEntropy, cross_entropy, Other, true, "tokens", "classes")                                  \
  /* one optimizer step over a flat parameter tensor */                                             \
  X(Optimizer, optimizer, Other, false, "params", "kind")                                           \
  /* one tensor with a scalar or broadcast operand (x / c, x + mask, pow, tanh) */                  \
  X(Pointwise, pointwise, Elementwise, true, "elements", "saves")                                  \
  /* fused attention core (FlashAttention / SDPA): QK^T, softmax, AV in one kernel, scores never */ \
  /* in memory; kv_heads divide heads (GQA), causal = 1 skips the masked half */                   \
  X(FlashAttention, flash_attention, Attention, true, "batch", "heads", "kv_heads", "seq_q",       \
    "seq_k", "head_dim", "v_dim", "causal")
// clang-format on

#define SCALEDL_LAYER_ENUMERATOR(E, ...) E,
enum class LayerType : int { SCALEDL_LAYER_TYPES(SCALEDL_LAYER_ENUMERATOR) };
#undef SCALEDL_LAYER_ENUMERATOR
#define SCALEDL_LAYER_ONE(...) +1
/// Number of layer types (ids 0 .. kLayerTypeCount - 1).
inline constexpr int kLayerTypeCount = 0 SCALEDL_LAYER_TYPES(SCALEDL_LAYER_ONE);
#undef SCALEDL_LAYER_ONE

/// FP8 is E4M3 with per-tensor scales (Transformer Engine, TensorRT-LLM): a GEMM's operands are
/// one byte, its output BF16; rows of it come from imported tables (aiconfigurator), no
/// microbenchmark of ours times it. Append new dtypes: the id is stored.
enum class DType : int { FP32 = 0, TF32, BF16, FP16, FP8 };
inline constexpr int kDTypeCount = 5;
enum class OptimizerKind : int { SGD = 0, Adam, AdamW };
enum class Direction : int { Forward = 0, Backward, Update };

/// Bytes of one tensor element of `d` (TF32 is stored as FP32).
int dtype_bytes(DType d);
const char* to_string(DType d);
const char* to_string(OptimizerKind k);
const char* to_string(Direction d);
const char* to_string(LayerType t);
/// Parses "fp32|tf32|bf16|fp16|fp8"; throws Error naming `key` and the value otherwise.
DType parse_dtype(const std::string& s, const std::string& key = "dtype");
OptimizerKind parse_optimizer(const std::string& s, const std::string& key = "optimizer");
/// Parses a layer type name ("linear", "layernorm", ...); throws naming `key` otherwise.
LayerType parse_layer_type(const std::string& s, const std::string& key = "type");

/// Compute and memory features of one layer instance (ScaleDL eq. 8-10, PreNeT CO).
struct LayerCost {
  double flops_fwd = 0;     ///< FLOP of the forward pass
  double flops_bwd = 0;     ///< FLOP of the backward pass (input + weight gradients)
  double params = 0;        ///< trainable parameters (elements)
  double in_bytes = 0;      ///< bytes of activations read by the forward pass
  double out_bytes = 0;     ///< bytes of activations written by the forward pass
  double weight_bytes = 0;  ///< bytes of parameters (and optimizer state for Optimizer)
  double temp_bytes = 0;    ///< bytes of saved/temporary tensors (masks, softmax stats)
};

/// Static description of a layer type.
struct LayerInfo {
  LayerType type;
  const char* name;               ///< stable lower-case id used in files and the DB
  std::vector<std::string> dims;  ///< names of the integer dims, in order
  bool has_backward;              ///< false only for Optimizer
  LayerKind kind;                 ///< what the graph network counts its time as
};

const LayerInfo& layer_info(LayerType t);
/// All layer types in enum order.
const std::vector<LayerInfo>& all_layer_infos();

/// Checks dims.size() and that every dim is in range (>0, bias/kind flags 0/1/2);
/// throws Error naming the type, dim name and value.
void validate_dims(LayerType t, const std::vector<int64_t>& dims);

/// The FLOP/byte model of a layer (the one definition). Requires validate_dims.
/// Linear forward FLOP = 2*b*d_in*d_out + b*d_out (ScaleDL eq. 9) when bias=1.
LayerCost layer_cost(LayerType t, const std::vector<int64_t>& dims, DType dtype);

/// How PyTorch's autocast runs a layer type (the AMP recipe, TrainSettings::amp): Lower = in the
/// autocast dtype (BF16 / FP16: its matrix products), Fp32 = in FP32 whatever its inputs (the
/// ops autocast keeps in FP32 -- layer_norm, softmax, the loss -- Hugging Face's RMSNorm, which
/// upcasts, and the embedding, whose weight is FP32), Promote = in the widest dtype of its inputs
/// (elementwise ops: FP32 when the FP32 residual stream is one of them).
enum class AutocastClass : int { Lower = 0, Fp32, Promote };
AutocastClass autocast_class(LayerType t);

/// The cost of a layer whose weights are frozen (LoRA's base model): the backward without the
/// weight-gradient work (a linear's dW GEMM and bias sum, an embedding's scatter-add: its whole
/// backward, a patch convolution's dW); `c` is layer_cost(t, dims, dtype); params and weight
/// bytes are kept (the weights are still held and read). Types without weights are unchanged.
LayerCost frozen_cost(LayerType t, const std::vector<int64_t>& dims, const LayerCost& c);

/// Index of a named dim of type t; throws when the type has no such dim.
int dim_index(LayerType t, const std::string& dim_name);

}  // namespace scaledl
