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

enum class LayerType : int {
  Embedding = 0,  ///< token/position embedding lookup [tokens] -> [tokens, hidden]
  LayerNorm,      ///< [tokens, hidden], affine (weight + bias)
  RMSNorm,        ///< [tokens, hidden], weight only (Llama, T5)
  Linear,         ///< [tokens, d_in] x [d_in, d_out] (+ bias)
  BMM,            ///< batched matmul [batch, m, n] x [batch, n, k] (n is reduced)
  Attention,      ///< attention core QK^T, scale, softmax, dropout, AV as one unit
  Softmax,        ///< softmax over the last dim of [rows, cols]
  Dropout,        ///< elementwise mask on [elements]
  GELU,
  ReLU,
  SiLU,
  Add,           ///< elementwise a + b (residual)
  Mul,           ///< elementwise a * b (SwiGLU gate)
  Conv2dPatch,   ///< ViT/DeiT patch embedding: Conv2d(k = stride = patch)
  CrossEntropy,  ///< softmax cross-entropy over [tokens, classes]
  Optimizer,     ///< one optimizer step over a flat parameter tensor
  Pointwise,     ///< one tensor with a scalar or broadcast operand (x / c, x + mask, pow, tanh): [elements,
                 ///< saves]
  Count
};

enum class DType : int { FP32 = 0, TF32, BF16, FP16 };
enum class OptimizerKind : int { SGD = 0, Adam, AdamW };
enum class Direction : int { Forward = 0, Backward, Update };

/// Bytes of one tensor element of `d` (TF32 is stored as FP32).
int dtype_bytes(DType d);
const char* to_string(DType d);
const char* to_string(OptimizerKind k);
const char* to_string(Direction d);
const char* to_string(LayerType t);
/// Parses "fp32|tf32|bf16|fp16"; throws Error naming `key` and the value otherwise.
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

/// Index of a named dim of type t; throws when the type has no such dim.
int dim_index(LayerType t, const std::string& dim_name);

}  // namespace scaledl
