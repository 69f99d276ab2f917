// The FLOP and byte model of every layer type (see layer_types.hpp).
//
// Conventions: one multiply-add = 2 FLOP; elementwise costs count the arithmetic
// a straightforward kernel performs per element (documented per type below).
// Byte counts are per forward pass in the activation dtype; optimizer state is
// FP32 as in PyTorch's optimizers.
#include "scaledl/ir/layer_types.hpp"
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <array>
#include <cstdio>

#include "scaledl/core/error.hpp"

namespace scaledl {

int dtype_bytes(DType d) {
  switch (d) {
    case DType::FP32:
    case DType::TF32:
      return 4;
    case DType::BF16:
    case DType::FP16:
      return 2;
    case DType::FP8:
      return 1;
  }
  return 4;
}

const char* to_string(DType d) {
  static const char* n[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
  return n[static_cast<int>(d)];
}
const char* to_string(OptimizerKind k) {
  static const char* n[] = {"sgd", "adam", "adamw"};
  return n[static_cast<int>(k)];
}
const char* to_string(Direction d) {
  static const char* n[] = {"fwd", "bwd", "update"};
  return n[static_cast<int>(d)];
}

DType parse_dtype(const std::string& s, const std::string& key) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (s == to_string(static_cast<DType>(i))) return static_cast<DType>(i);
  fail("{}=\"{}\" is not a dtype (expected fp32, tf32, bf16, fp16 or fp8)", key, s);
}

OptimizerKind parse_optimizer(const std::string& s, const std::string& key) {
  for (int i = 0; i < 3; ++i)
    if (s == to_string(static_cast<OptimizerKind>(i))) return static_cast<OptimizerKind>(i);
  fail("{}=\"{}\" is not an optimizer (expected sgd, adam or adamw)", key, s);
}

const std::vector<LayerInfo>& all_layer_infos() {
#define SCALEDL_LAYER_INFO(E, name, kind, bwd, ...) \
  {LayerType::E, #name, {__VA_ARGS__}, bwd, LayerKind::kind},
  static const std::vector<LayerInfo> infos = {SCALEDL_LAYER_TYPES(SCALEDL_LAYER_INFO)};
#undef SCALEDL_LAYER_INFO
  return infos;
}

const LayerInfo& layer_info(LayerType t) {
  int i = static_cast<int>(t);
  SCALEDL_CHECK(i >= 0 && i < kLayerTypeCount, "layer type id {} is unknown", i);
  return all_layer_infos()[i];
}

const char* to_string(LayerType t) {
  return layer_info(t).name;
}

LayerType parse_layer_type(const std::string& s, const std::string& key) {
  for (const auto& info : all_layer_infos())
    if (s == info.name) return info.type;
  std::string known;
  for (const auto& info : all_layer_infos()) known += (known.empty() ? "" : ", ") + std::string(info.name);
  fail("{}=\"{}\" is not a layer type (known: {})", key, s, known);
}

int dim_index(LayerType t, const std::string& dim_name) {
  const auto& d = layer_info(t).dims;
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] == dim_name) return static_cast<int>(i);
  fail("layer type {} has no dim '{}'", layer_info(t).name, dim_name);
}

void validate_dims(LayerType t, const std::vector<int64_t>& dims) {
  const LayerInfo& info = layer_info(t);
  SCALEDL_CHECK(dims.size() == info.dims.size(), "{}: expected {} dims ({}), got {}", info.name,
                info.dims.size(), fmt::join(info.dims, ", "), dims.size());
  // Each dim is a size < 2^40 (about 10^12), except flag dims.
  constexpr int64_t kMax = int64_t(1) << 40;
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string& n = info.dims[i];
    if (n == "bias" || n == "saves" || n == "causal") {
      SCALEDL_CHECK(dims[i] == 0 || dims[i] == 1, "{}.{}={} must be 0 or 1", info.name, n, dims[i]);
    } else if (n == "kind") {
      SCALEDL_CHECK(dims[i] >= 0 && dims[i] <= 2, "{}.kind={} must be 0 (sgd), 1 (adam) or 2 (adamw)",
                    info.name, dims[i]);
    } else {
      SCALEDL_CHECK(dims[i] > 0 && dims[i] < kMax, "{}.{}={} must be in [1, 2^40)", info.name, n, dims[i]);
    }
  }
  if (t == LayerType::FlashAttention) {
    SCALEDL_CHECK(dims[1] % dims[2] == 0,
                  "flash_attention.kv_heads={} does not divide flash_attention.heads={}", dims[2], dims[1]);
    SCALEDL_CHECK(dims[7] == 0 || dims[3] <= dims[4],
                  "flash_attention.seq_q={} > flash_attention.seq_k={} with causal=1 (a causal query attends "
                  "to the keys up to its own position)",
                  dims[3], dims[4]);
  }
  if (t == LayerType::Conv2dPatch) {
    SCALEDL_CHECK(dims[3] % dims[4] == 0, "conv2d_patch.patch={} does not divide conv2d_patch.image={}",
                  dims[4], dims[3]);
  }
}

namespace {

// One function per layer type: its FLOP and byte model. d = the dims, e = bytes per element.
using Dims = std::vector<int64_t>;

LayerCost cost_embedding(const Dims& d, double e) {  // tokens, vocab, hidden: gather fwd, scatter-add bwd
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0) * D(2);
  c.flops_fwd = 0;
  c.flops_bwd = n;
  c.params = D(1) * D(2);
  c.in_bytes = D(0) * 8;  // int64 token ids
  c.out_bytes = n * e;
  c.weight_bytes = c.params * e;
  return c;
}

LayerCost cost_layernorm(const Dims& d, double e) {  // mean, var, normalise, scale, shift ~ 8/elem; bwd ~ 2x
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0) * D(1);
  c.flops_fwd = 8 * n;
  c.flops_bwd = 16 * n;
  c.params = 2 * D(1);
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  c.weight_bytes = c.params * e;
  c.temp_bytes = 2 * D(0) * 4;  // saved mean and rstd (fp32)
  return c;
}

LayerCost cost_rmsnorm(const Dims& d, double e) {  // square, mean, rsqrt, scale, weight ~ 5/elem
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0) * D(1);
  c.flops_fwd = 5 * n;
  c.flops_bwd = 10 * n;
  c.params = D(1);
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  c.weight_bytes = c.params * e;
  c.temp_bytes = D(0) * 4;
  return c;
}

LayerCost cost_linear(const Dims& d, double e) {  // tokens b, d_in, d_out, bias: ScaleDL eq. 9-10
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double b = D(0), din = D(1), dout = D(2), bias = D(3);
  c.flops_fwd = 2 * b * din * dout + bias * b * dout;
  c.flops_bwd = 4 * b * din * dout + bias * b * dout;  // dX = dY W, dW = dY^T X, db = sum dY
  c.params = din * dout + bias * dout;
  c.in_bytes = b * din * e;
  c.out_bytes = b * dout * e;
  c.weight_bytes = c.params * e;
  return c;
}

LayerCost cost_bmm(const Dims& d, double e) {  // [B,m,n] x [B,n,k]
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double B = D(0), m = D(1), n = D(2), k = D(3);
  c.flops_fwd = 2 * B * m * n * k;
  c.flops_bwd = 4 * B * m * n * k;
  c.in_bytes = B * (m * n + n * k) * e;
  c.out_bytes = B * m * k * e;
  return c;
}

LayerCost cost_attention(const Dims& d, double e) {  // batch, heads, seq_q, seq_k, head_dim
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double bh = D(0) * D(1), sq = D(2), sk = D(3), hd = D(4);
  double scores = bh * sq * sk;
  c.flops_fwd = 4 * bh * sq * sk * hd + 7 * scores;  // QK^T + AV, scale + softmax(5) + dropout
  c.flops_bwd = 8 * bh * sq * sk * hd + 6 * scores;
  c.in_bytes = bh * (sq + 2 * sk) * hd * e;
  c.out_bytes = bh * sq * hd * e;
  c.temp_bytes = scores * (e + 1);  // attention probabilities + dropout mask
  return c;
}

LayerCost cost_softmax(const Dims& d, double e) {  // max, subtract, exp, sum, divide ~ 5/elem; bwd ~ 4/elem
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0) * D(1);
  c.flops_fwd = 5 * n;
  c.flops_bwd = 4 * n;
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  return c;
}

LayerCost cost_dropout(const Dims& d, double e) {  // compare + scale; bwd mask multiply
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = 2 * n;
  c.flops_bwd = n;
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  c.temp_bytes = n;  // bool mask
  return c;
}

LayerCost cost_gelu(const Dims& d, double e) {  // erf form ~ 8/elem, bwd ~ 12/elem
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = 8 * n;
  c.flops_bwd = 12 * n;
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  return c;
}

LayerCost cost_relu(const Dims& d, double e) {
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = n;
  c.flops_bwd = n;
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  return c;
}

LayerCost cost_silu(const Dims& d, double e) {  // x * sigmoid(x) ~ 4/elem, bwd ~ 6/elem
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = 4 * n;
  c.flops_bwd = 6 * n;
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  return c;
}

LayerCost cost_add(const Dims& d, double e) {  // gradient passes through: no arithmetic backward
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = n;
  c.flops_bwd = 0;
  c.in_bytes = 2 * n * e;
  c.out_bytes = n * e;
  return c;
}

LayerCost cost_mul(const Dims& d, double e) {  // da = g*b, db = g*a
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = n;
  c.flops_bwd = 2 * n;
  c.in_bytes = 2 * n * e;
  c.out_bytes = n * e;
  return c;
}

LayerCost cost_conv2d_patch(const Dims& d,
                            double e) {  // batch, channels, hidden, image, patch: a Linear over patches
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double B = D(0), C = D(1), H = D(2), p = D(4);
  double np = (D(3) / p) * (D(3) / p);
  double kin = C * p * p;
  c.flops_fwd = 2 * B * np * kin * H + B * np * H;
  c.flops_bwd = 4 * B * np * kin * H + B * np * H;
  c.params = kin * H + H;
  c.in_bytes = B * C * D(3) * D(3) * e;
  c.out_bytes = B * np * H * e;
  c.weight_bytes = c.params * e;
  return c;
}

LayerCost cost_cross_entropy(const Dims& d,
                             double e) {  // log-softmax (5/elem) + gather; bwd softmax - onehot
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0) * D(1);
  c.flops_fwd = 5 * n + D(0);
  c.flops_bwd = 2 * n;
  c.in_bytes = n * e + D(0) * 8;
  c.out_bytes = 4;
  c.temp_bytes = n * e;  // saved log-probabilities
  return c;
}

LayerCost cost_optimizer(const Dims& d,
                         double e) {  // params p, kind: SGD p -= lr*g (2/elem); Adam(W) ~ 12/13 per elem
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double p = D(0);
  int kind = static_cast<int>(d[1]);
  static const std::array<double, 3> flops_per = {2, 12, 13};
  static const std::array<double, 3> state_per = {0, 2, 2};  // fp32 moments
  c.flops_fwd = flops_per[kind] * p;
  c.flops_bwd = 0;
  c.params = 0;        // updates parameters it does not own
  c.in_bytes = p * e;  // gradients read
  c.out_bytes = 0;
  c.weight_bytes = p * e + state_per[kind] * p * 4;  // parameters + optimizer state
  return c;
}

/// batch, heads, kv_heads, seq_q, seq_k, head_dim, v_dim, causal. FlashAttention-2's work: the
/// forward's two products over the (causal: unmasked) score pairs plus the online softmax; the
/// backward recomputes the scores and runs five products (S = QK^T, dV, dP, dQ, dK): with
/// head_dim = v_dim 2.5 x the forward's matrix FLOP. Bytes: Q, K, V in, O out, the fp32
/// log-sum-exp per query row kept for the backward; the scores stay on chip.
LayerCost cost_flash_attention(const Dims& d, double e) {
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  const double b = D(0), H = D(1), kv = D(2), sq = D(3), sk = D(4), hd = D(5), vd = D(6);
  const double pairs = d[7] ? sq * sk - sq * (sq - 1) / 2 : sq * sk;  // per head; causal: sq <= sk
  c.flops_fwd = b * H * pairs * (2 * hd + 2 * vd + 5);
  c.flops_bwd = b * H * pairs * (6 * hd + 4 * vd + 5);
  c.in_bytes = b * (H * sq * hd + kv * sk * (hd + vd)) * e;
  c.out_bytes = b * H * sq * vd * e;
  c.temp_bytes = b * H * sq * 4;  // log-sum-exp, fp32
  return c;
}

LayerCost cost_pointwise(const Dims& d,
                         double e) {  // x op c (or a broadcast operand): 1/elem; bwd g * c or g * f'(saved)
  LayerCost c;
  auto D = [&](int i) { return static_cast<double>(d[i]); };
  double n = D(0);
  c.flops_fwd = n;
  c.flops_bwd = d[1] ? 2 * n : n;
  c.in_bytes = n * e;
  c.out_bytes = n * e;
  return c;
}

}  // namespace

LayerCost frozen_cost(LayerType t, const std::vector<int64_t>& d, const LayerCost& c) {
  LayerCost f = c;
  auto D = [&](size_t i) { return static_cast<double>(d[i]); };
  switch (t) {
    case LayerType::Linear:  // dX = dY W only
      f.flops_bwd = 2 * D(0) * D(1) * D(2);
      return f;
    case LayerType::Embedding:  // the input ids take no gradient: nothing left
      f.flops_bwd = 0;
      return f;
    case LayerType::Conv2dPatch:  // the pixels take no gradient either
      f.flops_bwd = 0;
      return f;
    case LayerType::BMM:  // an expert's weight operand (own_weight): dX only, half the products
      f.flops_bwd = c.params > 0 ? c.flops_bwd / 2 : c.flops_bwd;
      return f;
    case LayerType::LayerNorm:
    case LayerType::RMSNorm:
    case LayerType::Attention:
    case LayerType::Softmax:
    case LayerType::Dropout:
    case LayerType::GELU:
    case LayerType::ReLU:
    case LayerType::SiLU:
    case LayerType::Add:
    case LayerType::Mul:
    case LayerType::CrossEntropy:
    case LayerType::Optimizer:
    case LayerType::Pointwise:
    case LayerType::FlashAttention:
      return f;  // no weight-gradient work worth a term (a norm's weight sum is t h of its 10-16 t h)
  }
  fail("layer type id {} is unknown", static_cast<int>(t));
}

AutocastClass autocast_class(LayerType t) {
  switch (t) {
    case LayerType::Linear:
    case LayerType::BMM:
    case LayerType::Attention:
    case LayerType::Conv2dPatch:
    case LayerType::FlashAttention:
      return AutocastClass::Lower;
    case LayerType::Embedding:
    case LayerType::LayerNorm:
    case LayerType::RMSNorm:
    case LayerType::Softmax:
    case LayerType::CrossEntropy:
    case LayerType::Optimizer:
      return AutocastClass::Fp32;
    case LayerType::Dropout:
    case LayerType::GELU:
    case LayerType::ReLU:
    case LayerType::SiLU:
    case LayerType::Add:
    case LayerType::Mul:
    case LayerType::Pointwise:
      return AutocastClass::Promote;
  }
  fail("layer type id {} is unknown", static_cast<int>(t));
}

LayerCost layer_cost(LayerType t, const std::vector<int64_t>& d, DType dtype) {
  const double e = dtype_bytes(dtype);
  switch (t) {
    case LayerType::Embedding:
      return cost_embedding(d, e);
    case LayerType::LayerNorm:
      return cost_layernorm(d, e);
    case LayerType::RMSNorm:
      return cost_rmsnorm(d, e);
    case LayerType::Linear:
      return cost_linear(d, e);
    case LayerType::BMM:
      return cost_bmm(d, e);
    case LayerType::Attention:
      return cost_attention(d, e);
    case LayerType::Softmax:
      return cost_softmax(d, e);
    case LayerType::Dropout:
      return cost_dropout(d, e);
    case LayerType::GELU:
      return cost_gelu(d, e);
    case LayerType::ReLU:
      return cost_relu(d, e);
    case LayerType::SiLU:
      return cost_silu(d, e);
    case LayerType::Add:
      return cost_add(d, e);
    case LayerType::Mul:
      return cost_mul(d, e);
    case LayerType::Conv2dPatch:
      return cost_conv2d_patch(d, e);
    case LayerType::CrossEntropy:
      return cost_cross_entropy(d, e);
    case LayerType::Optimizer:
      return cost_optimizer(d, e);
    case LayerType::Pointwise:
      return cost_pointwise(d, e);
    case LayerType::FlashAttention:
      return cost_flash_attention(d, e);
  }
  fail("layer type id {} is unknown", static_cast<int>(t));
}

}  // namespace scaledl
