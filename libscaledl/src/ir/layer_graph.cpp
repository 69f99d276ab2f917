// ModelSpec + TrainSettings -> the layer graph of one training iteration
// (ScaleDL Sec. III: G = (V, E), one node per layer, edges = dependencies).
//
// Order of the node list (and so of ids, which makes every edge src < dst):
//   1. forward nodes in execution order, ending with head.loss;
//   2. backward nodes "<name>.bwd" in reverse forward order (peer = forward id);
//   3. optim.step (Direction::Update) when settings.optimizer_step.
// Inference (settings.backward false): forward nodes only, no head.loss, no
// dropout (eval mode is the identity), no saved-tensor edges.
// Edges:
//   forward u -> v          activation [shape of u's output], backward=false;
//   backward v.bwd -> u.bwd gradient of that activation, backward=true;
//   u -> u.bwd              saved=true: tensors the backward of u reads
//                           (u's inputs and temporaries; 0 bytes for Add);
//   u.bwd -> optim.step     gradient of the weights u reads (shared ones too), backward=true.
// Shapes are [batch, seq, features] for token tensors and [batch, heads, seq_q,
// seq_k] for attention scores. Token counts: text tokens = batch * seq_len;
// vision tokens = batch * (patches + special tokens).
#include "scaledl/ir/layer_graph.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <utility>

#include "scaledl/core/error.hpp"

namespace scaledl {

namespace {

using Shape = std::vector<int64_t>;

double numel(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

/// An input of a node: the producing node and, when it differs from the
/// producer's out_shape (e.g. the [CLS] slice), the shape actually consumed.
struct In {
  int id;
  Shape shape;
  In(int i) : id(i) {}  // NOLINT: implicit from a node id
  In(int i, Shape s) : id(i), shape(std::move(s)) {}
};

class Builder {
 public:
  Builder(LayerGraph& g) : g_(g), e_(dtype_bytes(g.settings.dtype)) {}

  int add(const std::string& name, LayerType t, std::vector<int64_t> dims, Shape out,
          const std::vector<In>& inputs, int block = -1) {
    // add_fp32_op's and add_fp32_operand's flags hold for this node only, not for the casts and
    // adapters it adds
    const bool fp32_op = std::exchange(fp32_op_, false);
    const bool fp32_operand = std::exchange(fp32_operand_, false);
    validate_dims(t, dims);
    // The FP8 recipe (Transformer Engine): the blocks' linear layers; the embedding, the LM head
    // and the classifier stay in BF16, as TE's recipes keep them.
    const AutocastClass ac = fp32_op ? AutocastClass::Fp32 : autocast_class(t);
    const DType dt = g_.settings.fp8 && t == LayerType::Linear && block >= 0 && !adapter_ ? DType::FP8
                     : g_.settings.amp ? (fp32_operand ? DType::FP32 : amp_dtype(ac, inputs))
                                       : g_.settings.dtype;
    LayerCost cost = layer_cost(t, dims, dt);
    const std::vector<In> ins = g_.settings.amp ? amp_casts(name, ac, dt, cost, inputs, block) : inputs;
    LayerNode n;
    n.id = static_cast<int>(g_.nodes.size());
    n.name = name;
    n.type = t;
    n.dir = Direction::Forward;
    n.dtype = dt;
    n.cost = cost;
    const bool lora =
        t == LayerType::Linear && block >= 0 && !adapter_ && lora_targets_node(g_.settings, name);
    n.dims = std::move(dims);
    n.block = block;
    n.out_shape = std::move(out);
    freeze_if_lora(n);
    g_.nodes.push_back(std::move(n));
    for (const In& in : ins) {
      SCALEDL_CHECK(in.id >= 0 && in.id < static_cast<int>(g_.nodes.size()) - 1,
                    "internal: node {} reads unknown node {}", name, in.id);
      LayerEdge e;
      e.src = in.id;
      e.dst = g_.nodes.back().id;
      e.shape = consumed_shape(in);
      // Under autocast a tensor is in its producer's dtype; otherwise every edge is in the
      // settings' (an FP8 GEMM's output is BF16 too).
      e.bytes = numel(e.shape) * (g_.settings.amp ? dtype_bytes(g_.nodes[in.id].dtype) : e_);
      g_.edges.push_back(std::move(e));
    }
    const int id = g_.nodes.back().id;
    return lora ? adapter(id, inputs.front(), block) : id;
  }

  /// LoRA's adapter on the linear node `base` (dims tokens, d_in, d_out, bias) reading `x`:
  /// "<base>.lora_a" (d_in -> r), "<base>.lora_b" (r -> d_out), and "<base>.lora_add", the sum with
  /// the base's output, which later nodes read instead of the base. On a model in half precision
  /// (not autocast over FP32 weights, whose own casts cover it) peft keeps the adapters in FP32
  /// (autocast_adapter_dtype, its default) and casts each adapted layer's input to FP32, which the
  /// Trainer's autocast (bf16=True / fp16=True) casts back to the half type for lora_a's GEMM:
  /// "<base>.lora_cast", two casts of 6 bytes per element (three times what a half-precision
  /// pointwise node moves per element), whose output lora_a saves; and "<base>.lora_scale", the
  /// scaling's multiply on lora_b's output.
  int adapter(int base, const In& x, int block) {
    // Copies: add() grows the node vector.
    const std::string name = g_.nodes[base].name;
    const Shape out = g_.nodes[base].out_shape;
    const int64_t t = g_.nodes[base].dims[0], d_in = g_.nodes[base].dims[1], d_out = g_.nodes[base].dims[2];
    const int64_t r = g_.settings.lora_rank;
    Shape mid = out;
    mid.back() = r;
    const bool peft_casts =
        !g_.settings.amp && (g_.settings.dtype == DType::BF16 || g_.settings.dtype == DType::FP16);
    adapter_ = true;
    In xin = x;
    if (peft_casts) {
      const Shape& xs = consumed_shape(x);
      xin = In(add(name + ".lora_cast", LayerType::Pointwise, {3 * static_cast<int64_t>(numel(xs)), 0}, xs,
                   {x}, block));
    }
    const int a = add(name + ".lora_a", LayerType::Linear, {t, d_in, r, 0}, mid, {xin}, block);
    int b = add(name + ".lora_b", LayerType::Linear, {t, r, d_out, 0}, out, {a}, block);
    if (peft_casts)
      b = add(name + ".lora_scale", LayerType::Pointwise, {static_cast<int64_t>(numel(out)), 0}, out, {b},
              block);
    const int sum =
        add(name + ".lora_add", LayerType::Add, {static_cast<int64_t>(numel(out))}, out, {base, b}, block);
    adapter_ = false;
    return sum;
  }

  /// add() for an op on autocast's FP32 list that the graph counts as a Pointwise node (pow, exp,
  /// rsqrt, reciprocal, ...: torch.amp's "ops that can autocast to float32"): under autocast it
  /// runs in FP32, after a cast of its half-precision inputs, and what follows it is promoted to
  /// FP32 (HF's gelu_new: the pow makes the rest of the chain FP32); otherwise as add().
  int add_fp32_op(const std::string& name, LayerType t, std::vector<int64_t> dims, Shape out,
                  const std::vector<In>& inputs, int block = -1) {
    fp32_op_ = true;
    return add(name, t, std::move(dims), std::move(out), inputs, block);
  }

  /// add() for an elementwise op (autocast's promote class) with an FP32 operand that is no node
  /// of the graph (Hugging Face's rotary cos and sin, computed in the dtype of the embeddings: FP32
  /// under autocast over FP32 weights): under autocast its output is FP32, converted inside its own
  /// kernel (TensorIterator's type promotion, no cast node); otherwise as add().
  int add_fp32_operand(const std::string& name, LayerType t, std::vector<int64_t> dims, Shape out,
                       const std::vector<In>& inputs, int block = -1) {
    fp32_operand_ = true;
    return add(name, t, std::move(dims), std::move(out), inputs, block);
  }

  /// Marks a node whose weight is shared with another node: it keeps the FLOP
  /// and weight_bytes (it still reads the matrix) but owns only `own` params.
  void share_weight(int id, double own) { g_.nodes[id].cost.params = own; }

  /// Gives a node whose operand is a weight tensor (the experts' batched
  /// matmuls: a BMM has no parameters of its own) `params` trainable elements.
  void own_weight(int id, double params) {
    g_.nodes[id].cost.params = params;
    g_.nodes[id].cost.weight_bytes = params * e_;
    freeze_if_lora(g_.nodes[id]);  // the experts' weights are the model's too
  }

 private:
  /// The shape a node reads from `in`: the one given, else its producer's output.
  const Shape& consumed_shape(const In& in) const {
    return in.shape.empty() ? g_.nodes[in.id].out_shape : in.shape;
  }

  /// Autocast's dtype for a node of type t reading `inputs` (AutocastClass): the matrix products
  /// in the settings' dtype, the FP32 list in FP32, the rest in the widest dtype of their inputs.
  DType amp_dtype(AutocastClass ac, const std::vector<In>& inputs) const {
    switch (ac) {
      case AutocastClass::Lower:
        return g_.settings.dtype;
      case AutocastClass::Fp32:
        return DType::FP32;
      case AutocastClass::Promote:
        for (const In& in : inputs)
          if (in.id >= 0 && in.id < static_cast<int>(g_.nodes.size()) && g_.nodes[in.id].dtype == DType::FP32)
            return DType::FP32;
        return g_.settings.dtype;
    }
    fail("internal: autocast class {} is unknown", static_cast<int>(ac));
  }

  /// Autocast's casts before a node of dtype `dt`: its inputs in another dtype (an FP32 norm's
  /// output into a matrix product, BF16 logits into the FP32 loss) and, for a matrix product, its
  /// FP32 weight (once per forward: autocast caches the cast). One pointwise node "<name>.cast" in
  /// `dt` (what it hands on) over all of them, read by the node in place of those inputs (the
  /// weight's cast as an extra input). A cast between FP32 and a half type moves 6 bytes per
  /// element (4 + 2) where a pointwise node of dtype `dt` moves 2 x its element size: its
  /// `elements` are scaled by 6 / (2 x size) so that the node moves a cast's bytes (1.5 x the
  /// elements cast to BF16, 0.75 x those cast to FP32); its out_shape is the first cast input's.
  /// Returns the node's inputs. Promote-class nodes convert inside their own kernel
  /// (TensorIterator) and get none.
  std::vector<In> amp_casts(const std::string& name, AutocastClass ac, DType dt, const LayerCost& cost,
                            const std::vector<In>& inputs, int block) {
    if (casting_ || ac == AutocastClass::Promote) return inputs;
    double elems = ac == AutocastClass::Lower ? cost.weight_bytes / dtype_bytes(dt) : 0.0;
    // Each input as consumed (its shape given), and which of them are cast.
    std::vector<In> consumed, from;
    std::vector<char> cast;
    for (const In& in : inputs) {
      consumed.emplace_back(in.id, consumed_shape(in));
      cast.push_back(g_.nodes[in.id].dtype != dt);
      if (cast.back()) {
        elems += static_cast<double>(numel(consumed.back().shape));
        from.push_back(consumed.back());
      }
    }
    if (elems < 1) return inputs;
    const Shape shape = from.empty() ? Shape{static_cast<int64_t>(elems)} : from.front().shape;
    const auto moved = static_cast<int64_t>(std::llround(elems * 6.0 / (2.0 * dtype_bytes(dt))));
    casting_ = true;
    const int c =
        add(name + ".cast", LayerType::Pointwise, {std::max<int64_t>(1, moved), 0}, shape, from, block);
    casting_ = false;
    g_.nodes[c].dtype = dt;
    g_.nodes[c].cost = layer_cost(LayerType::Pointwise, g_.nodes[c].dims, dt);
    std::vector<In> out;
    for (size_t i = 0; i < inputs.size(); ++i) out.push_back(cast[i] ? In(c, consumed[i].shape) : inputs[i]);
    if (from.empty()) out.push_back(In(c));  // the weight's cast alone
    return out;
  }

  /// LoRA: every weight of the model is frozen (no weight gradient, no optimizer state, the
  /// backward without its weight-gradient work); only the adapters' nodes train. Applied where a
  /// node gains weights: add() and own_weight().
  void freeze_if_lora(LayerNode& n) const {
    if (n.frozen || g_.settings.lora_rank <= 0 || adapter_ || n.cost.weight_bytes <= 0) return;
    n.frozen = true;
    n.cost = frozen_cost(n.type, n.dims, n.cost);
  }

  LayerGraph& g_;
  double e_;
  bool adapter_ = false;       ///< adding a LoRA adapter's nodes: trainable, in the settings' dtype
  bool casting_ = false;       ///< adding an autocast cast node (amp_casts): no cast of its own
  bool fp32_op_ = false;       ///< adding an op of autocast's FP32 list (add_fp32_op)
  bool fp32_operand_ = false;  ///< adding an op with an FP32 operand outside the graph (add_fp32_operand)
};

LayerType norm_type(const ModelSpec& m) {
  return m.norm == NormKind::LayerNorm ? LayerType::LayerNorm : LayerType::RMSNorm;
}
LayerType act_type(const ModelSpec& m) {
  switch (m.activation) {
    case Activation::ReLU:
    case Activation::ReLU2:  // its relu kernel (activation() adds the square in eager mode)
      return LayerType::ReLU;
    case Activation::SiLU:
      return LayerType::SiLU;
    case Activation::GELU:
    case Activation::GELUTanh:
    case Activation::GELUNew:
      return LayerType::GELU;  // erf and tanh forms share one kernel cost model
  }
  fail("activation id {} is unknown", static_cast<int>(m.activation));
}

/// Forward graph construction for every family.
class Forward {
 public:
  Forward(LayerGraph& g) : g_(g), m_(g.model), b_(g.settings.batch), sp_(g.settings.sequence_shards), B_(g) {}

  int build() {
    if (m_.arch == Arch::VisionEncoder) return vision();
    if (m_.arch == Arch::EncoderDecoder) return t5();
    return text();
  }

 private:
  LayerGraph& g_;
  const ModelSpec& m_;
  int64_t b_;
  int64_t sp_;  ///< TrainSettings::sequence_shards
  Builder B_;

  /// Sequence parallelism (TrainSettings::sequence_shards): a kernel outside the tensor-parallel
  /// regions runs on this GPU's ceil(s / sp) tokens of each sample; sp = 1: all s.
  int64_t sp_seq(int64_t s) const { return (s + sp_ - 1) / sp_; }

  int dropout(const std::string& name, double p, int x, int64_t elems, const Shape& shape, int block) {
    if (p <= 0 || !g_.settings.backward) return x;  // inference: eval mode, dropout is the identity
    return B_.add(name, LayerType::Dropout, {elems}, shape, {x}, block);
  }

  /// The activation "<name>" over n elements of x. HF's gelu_new (NewGELUActivation) is
  /// eight eager kernels, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))), in
  /// the order Python runs them; the last (the product) keeps the name. The squared ReLU (relu2,
  /// HF's ReLUSquaredActivation) is two: relu "<name>.relu", then the square (a Pointwise that saves
  /// its input) keeps the name. Other activations are one kernel; so are these two with
  /// fused_kernels (Megatron-LM fuses its squared_relu and bias-GELU).
  int activation(const std::string& name, int x, int64_t n, const Shape& shape, int block) {
    if ((m_.activation != Activation::GELUNew && m_.activation != Activation::ReLU2) ||
        g_.settings.fused_kernels)
      return B_.add(name, act_type(m_), {n}, shape, {x}, block);
    const auto P = LayerType::Pointwise;
    if (m_.activation == Activation::ReLU2) {
      int r = B_.add(name + ".relu", LayerType::ReLU, {n}, shape, {x}, block);
      return B_.add(name, P, {n, 1}, shape, {r}, block);
    }
    int half = B_.add(name + ".half", P, {n, 0}, shape, {x}, block);
    int c = B_.add_fp32_op(name + ".pow", P, {n, 1}, shape, {x}, block);  // torch.pow: FP32 under autocast
    c = B_.add(name + ".mul_c", P, {n, 0}, shape, {c}, block);
    c = B_.add(name + ".add_x", LayerType::Add, {n}, shape, {x, c}, block);
    c = B_.add(name + ".mul_k", P, {n, 0}, shape, {c}, block);
    c = B_.add(name + ".tanh", P, {n, 1}, shape, {c}, block);
    c = B_.add(name + ".add_1", P, {n, 0}, shape, {c}, block);
    return B_.add(name, LayerType::Mul, {n}, shape, {half, c}, block);
  }

  /// A gated FFN's act(gate) * up, "<name>" the product: the activation's kernels then the
  /// product, or with fused_kernels (Megatron-LM's bias_swiglu fusion, Transformer Engine's
  /// swiglu / geglu) one kernel that reads gate and up and writes the product, a Mul node of the
  /// same elements (a product moves those bytes: 2 reads and 1 write forward, 3 reads and 2 writes
  /// backward) with no activation node. `up` < 0: gate and up are the two halves of `gate`
  /// (a fused gate_up projection).
  int glu(const std::string& name, const std::string& act_name, int gate, int up, int64_t n,
          const Shape& shape, int block) {
    if (g_.settings.fused_kernels)
      return up < 0 ? B_.add(name, LayerType::Mul, {n}, shape, {gate}, block)
                    : B_.add(name, LayerType::Mul, {n}, shape, {gate, up}, block);
    const int act = activation(act_name, gate, n, shape, block);
    return B_.add(name, LayerType::Mul, {n}, shape, {act, up < 0 ? gate : up}, block);
  }

  /// Gemma 2's soft-capping as eager PyTorch runs it: x / cap, tanh, x cap ("<name>_div", "_tanh", "_mul").
  int softcap(const std::string& name, int x, int64_t n, const Shape& shape, int block) {
    const auto P = LayerType::Pointwise;
    int c = B_.add(name + "_div", P, {n, 0}, shape, {x}, block);
    c = B_.add(name + "_tanh", P, {n, 1}, shape, {c}, block);
    return B_.add(name + "_mul", P, {n, 0}, shape, {c}, block);
  }

  /// Attention sub-block "<p>.q/k/v|qkv, qk, [scale], [softcap_*], [bias], [mask], softmax, dropout, av, o,
  /// out_dropout". xq: [b, sq, h] query stream; xkv: [b, skv, h] key/value stream (== xq for self).
  /// The elementwise kernels on the scores [b, H, sq, skv] before the softmax, as the zoo and
  /// Hugging Face's eager attention run them: scale = / sqrt(head_dim) (all but T5 and Switch);
  /// bias = + bias, a position bias node [b, H, sq, skv] (T5 and Switch, self- and cross-attention:
  /// Hugging Face adds a full-size bias whose masks were folded in once per stack, so the add
  /// reads two full tensors and there is no mask kernel), or -1; mask = the causal mask
  /// (`causal`) or BERT's additive padding mask.
  int attention(const std::string& p, int xq, int64_t sq, int xkv, int64_t skv, int block, int bias,
                bool fused, bool causal) {
    const int64_t h = m_.hidden, H = m_.num_heads, hd = m_.head_dim, vd = m_.value_head_dim();
    const int64_t qo = H * hd, kvo = m_.num_kv_heads * hd;
    const int64_t tq = b_ * sq, tkv = b_ * skv;
    int q, k, v;
    if (m_.mla()) {
      latent_qkv(p, xq, sq, xkv, skv, block, q, k, v);
    } else if (fused) {  // GPT-2 Conv1D c_attn, Phi-3 qkv_proj: one [h, (H + 2 KV) hd] projection
      q = k = v = B_.add(p + ".qkv", LayerType::Linear, {tq, h, qo + 2 * kvo, m_.qkv_bias},
                         {b_, sq, qo + 2 * kvo}, {xq}, block);
    } else {
      q = B_.add(p + ".q", LayerType::Linear, {tq, h, qo, m_.qkv_bias}, {b_, sq, qo}, {xq}, block);
      k = B_.add(p + ".k", LayerType::Linear, {tkv, h, kvo, m_.qkv_bias}, {b_, skv, kvo}, {xkv}, block);
      v = B_.add(p + ".v", LayerType::Linear, {tkv, h, kvo, m_.qkv_bias}, {b_, skv, kvo}, {xkv}, block);
      if (m_.qk_norm) {  // Qwen3: RMSNorm over each head of q and k; OLMo 2: over the whole projections
        const bool whole = m_.qk_norm_whole;
        q = B_.add(p + ".q_norm", LayerType::RMSNorm,
                   whole ? std::vector<int64_t>{tq, qo} : std::vector<int64_t>{tq * H, hd}, {b_, sq, qo}, {q},
                   block);
        k = B_.add(p + ".k_norm", LayerType::RMSNorm,
                   whole ? std::vector<int64_t>{tkv, kvo} : std::vector<int64_t>{tkv * m_.num_kv_heads, hd},
                   {b_, skv, kvo}, {k}, block);
        if (m_.qk_norm_weightless) {  // Llama 4's L2 norm: the kernel without a weight
          B_.own_weight(q, 0);
          B_.own_weight(k, 0);
        }
      }
    }
    // After the q/k norms (Qwen3, Gemma 3, OLMo 2), as transformers does; of a fused projection
    // (Phi-3, GPT-NeoX) the q and k slices. MLA turns its rotary parts in latent_qkv.
    if (!m_.mla() && rotates(block)) {
      q = rope(p + ".q_rope", q, tq, H, block);
      k = rope(p + ".k_rope", k, tkv, m_.num_kv_heads, block);
    }
    const int core = fused_core(bias) ? flash(p, q, k, v, sq, skv, block, causal)
                                      : eager_core(p, q, k, v, sq, skv, block, bias, causal);
    int o = B_.add(p + ".o", LayerType::Linear, {tq, H * vd, h, m_.out_bias}, {b_, sq, h},
                   {In(core, {b_, sq, H * vd})}, block);
    return dropout(p + ".out_dropout", m_.dropout, o, b_ * sp_seq(sq) * h, {b_, sp_seq(sq), h}, block);
  }

  /// Whether decoder block `block` (its layer index) turns q and k in kernels of its own
  /// (TrainSettings::rotary_kernels, ModelSpec::rotates_layer).
  bool rotates(int block) const { return g_.settings.rotary_kernels && m_.rotates_layer(block); }

  /// The rotary embedding "<name>" of x, `heads` heads of `t` tokens, m_.rotary_dims() of each
  /// head's head_dim elements turning. Hugging Face's apply_rotary_pos_emb as eager PyTorch runs
  /// it, x * cos + rotate_half(x) * sin: "<name>.neg" (-x2, half the turned elements), "<name>.cat"
  /// (cat(-x2, x1)), "<name>.cos" and "<name>.sin" (the products, x op c: cos and sin broadcast
  /// over the heads; FP32 under autocast over FP32 weights, add_fp32_operand), then their sum; with
  /// a partial rotation (rotary_dim < head_dim) the sum is "<name>.sum" and "<name>" its
  /// concatenation with the unturned part. With fused_kernels, one kernel "<name>" that reads and
  /// writes the whole heads (Megatron-LM's and Transformer Engine's fused RoPE). MLA (`whole` =
  /// false): x is the rotary part alone. The cos and sin tables (once per forward, b x s x rd
  /// elements) are in no node. `x` is the node whose output holds q or k (a fused projection's,
  /// kv_a's): each kernel reads its share of it.
  int rope(const std::string& name, int x, int64_t t, int64_t heads, int block, bool whole_head = true) {
    const auto P = LayerType::Pointwise;
    const int64_t rd = m_.rotary_dims(), hd = whole_head ? m_.head_dim : rd;
    const int64_t n = t * heads * rd, all = t * heads * hd, half = std::max<int64_t>(1, n / 2);
    const Shape ws = {t, heads * hd}, rs = {t, heads * rd}, hs = {t, heads * rd / 2};
    if (g_.settings.fused_kernels) return B_.add(name, P, {all, 0}, ws, {In(x, ws)}, block);
    const int neg = B_.add(name + ".neg", P, {half, 0}, hs, {In(x, hs)}, block);
    const int cat = B_.add(name + ".cat", P, {n, 0}, rs, {neg, In(x, hs)}, block);
    const int c = B_.add_fp32_operand(name + ".cos", P, {n, 0}, rs, {In(x, rs)}, block);
    const int s = B_.add_fp32_operand(name + ".sin", P, {n, 0}, rs, {cat}, block);
    if (rd == hd) return B_.add(name, LayerType::Add, {n}, ws, {c, s}, block);
    const int sum = B_.add(name + ".sum", LayerType::Add, {n}, rs, {c, s}, block);
    return B_.add(name, P, {all, 0}, ws, {sum, In(x, {t, heads * (hd - rd)})}, block);
  }

  /// Whether the attention core runs as one fused kernel: settings.attention is fused and the
  /// scores take nothing a FlashAttention kernel of the frameworks does not (an additive position
  /// bias, soft-capping, sink columns: those blocks stay eager, as Hugging Face falls back).
  bool fused_core(int bias) const {
    return g_.settings.attention == AttentionImpl::Fused && bias < 0 && m_.attn_softcap <= 0 &&
           !m_.attn_sinks;
  }

  /// The fused core "<p>.core": one flash_attention node reading Q, K and V (DeepSeek's latent
  /// attention: K and V already expanded to every head), dropout on the probabilities inside it.
  int flash(const std::string& p, int q, int k, int v, int64_t sq, int64_t skv, int block, bool causal) {
    const int64_t H = m_.num_heads, hd = m_.head_dim, vd = m_.value_head_dim();
    const int64_t kvh = m_.mla() ? H : m_.num_kv_heads;
    return B_.add(p + ".core", LayerType::FlashAttention, {b_, H, kvh, sq, skv, hd, vd, causal ? 1 : 0},
                  {b_, H, sq, vd},
                  {In(q, {b_, H, sq, hd}), In(k, {b_, kvh, skv, hd}), In(v, {b_, kvh, skv, vd})}, block);
  }

  /// The eager core "<p>.qk, [scale], [softcap_*], [bias], [mask], softmax, dropout, av".
  int eager_core(const std::string& p, int q, int k, int v, int64_t sq, int64_t skv, int block, int bias,
                 bool causal) {
    const int64_t H = m_.num_heads, hd = m_.head_dim, vd = m_.value_head_dim();
    // GQA: k/v heads are repeated to H heads (repeat_kv), so the BMMs run over b*H.
    int qk = B_.add(p + ".qk", LayerType::BMM, {b_ * H, sq, hd, skv}, {b_, H, sq, skv},
                    {In(q, {b_, H, sq, hd}), In(k, {b_, H, hd, skv})}, block);
    const Shape ss = {b_, H, sq, skv};
    const int64_t N = b_ * H * sq * skv;
    int sc = qk;
    const bool eager = !g_.settings.fused_kernels;  // fused: scale and mask run inside the softmax kernel
    if (eager && m_.arch != Arch::EncoderDecoder)
      sc = B_.add(p + ".scale", LayerType::Pointwise, {N, 0}, ss, {sc}, block);
    if (m_.attn_softcap > 0) sc = softcap(p + ".softcap", sc, N, ss, block);  // Gemma 2
    if (bias >= 0) sc = B_.add(p + ".bias", LayerType::Add, {N}, ss, {sc, In(bias, ss)}, block);
    if (eager && bias < 0 && (causal || m_.family == Family::Bert))
      sc = B_.add(p + ".mask", LayerType::Pointwise, {N, 0}, ss, {sc}, block);
    int64_t cols = skv;
    if (m_.attn_sinks) {  // gpt-oss: the scores gain a sink column per head, less each row's maximum
      cols = skv + 1;
      const int64_t N1 = b_ * H * sq * cols;
      const Shape s1 = {b_, H, sq, cols};
      sc = B_.add(p + ".sinks_cat", LayerType::Pointwise, {N1, 0}, s1, {sc}, block);
      B_.own_weight(sc, static_cast<double>(H));
      int mx = B_.add(p + ".sinks_max", LayerType::Pointwise, {N1, 0}, {b_, H, sq, 1}, {sc}, block);
      sc = B_.add(p + ".sinks_sub", LayerType::Pointwise, {N1, 0}, s1, {sc, mx}, block);
    }
    int sm = B_.add(p + ".softmax", LayerType::Softmax, {b_ * H * sq, cols}, {b_, H, sq, cols}, {sc}, block);
    int pr = dropout(p + ".dropout", m_.attn_dropout, sm, N, ss, block);
    return B_.add(p + ".av", LayerType::BMM, {b_ * H, sq, skv, vd}, {b_, H, sq, vd},
                  {pr, In(v, {b_, H, skv, vd})}, block);
  }

  /// DeepSeek's multi-head latent attention up to the scores, as transformers' eager
  /// DeepseekV2/V3Attention runs it: q = q_b(q_a_norm(q_a(x))) (or q(x) without q_lora_rank);
  /// kv_a(x) = [latent (kv_lora_rank), k_rot (qk_rope, one head)]; kv_b(kv_a_norm(latent)) =
  /// [k_nope, v] per head; then the rotary embedding of the rotary parts and the two concatenations
  /// (q_nope, q_rot) and (k_nope, k_rot expanded to every head), copies of q and k ("q_cat", "k_cat").
  /// v is read from kv_b's output.
  void latent_qkv(const std::string& p, int xq, int64_t sq, int xkv, int64_t skv, int block, int& q, int& k,
                  int& v) {
    const int64_t h = m_.hidden, H = m_.num_heads, hd = m_.head_dim, vd = m_.value_head_dim();
    const int64_t ql = m_.q_lora_rank, kl = m_.kv_lora_rank, rope = m_.qk_rope_dim, nope = hd - rope;
    const int64_t tq = b_ * sq, tkv = b_ * skv;
    if (ql > 0) {
      q = B_.add(p + ".q_a", LayerType::Linear, {tq, h, ql, m_.qkv_bias}, {b_, sq, ql}, {xq}, block);
      q = B_.add(p + ".q_a_norm", LayerType::RMSNorm, {tq, ql}, {b_, sq, ql}, {q}, block);
      q = B_.add(p + ".q_b", LayerType::Linear, {tq, ql, H * hd, 0}, {b_, sq, H * hd}, {q}, block);
    } else {
      q = B_.add(p + ".q", LayerType::Linear, {tq, h, H * hd, 0}, {b_, sq, H * hd}, {xq}, block);
    }
    int kva = B_.add(p + ".kv_a", LayerType::Linear, {tkv, h, kl + rope, m_.qkv_bias}, {b_, skv, kl + rope},
                     {xkv}, block);
    int lat = B_.add(p + ".kv_a_norm", LayerType::RMSNorm, {tkv, kl}, {b_, skv, kl}, {In(kva, {b_, skv, kl})},
                     block);
    v = B_.add(p + ".kv_b", LayerType::Linear, {tkv, kl, H * (nope + vd), 0}, {b_, skv, H * (nope + vd)},
               {lat}, block);
    // The rotary parts' embedding (rotary_kernels): q's of every head, k's of its one shared head;
    // without it the concatenations read q and kv_a's rotary part as they are.
    std::vector<In> qin = {q};
    In kr(kva, {b_, skv, rope});
    if (rotates(block) && rope > 0) {
      qin = {In(q, {b_, sq, H * nope}), In(this->rope(p + ".q_rope", q, tq, H, block, false))};
      kr = In(this->rope(p + ".k_rope", kva, tkv, 1, block, false));
    }
    q = B_.add(p + ".q_cat", LayerType::Pointwise, {tq * H * hd, 0}, {b_, sq, H * hd}, qin, block);
    k = B_.add(p + ".k_cat", LayerType::Pointwise, {tkv * H * hd, 0}, {b_, skv, H * hd},
               {In(v, {b_, skv, H * nope}), kr}, block);
  }

  /// FFN sub-block: up [gate, mul], act, [act_dropout], down, [dropout]; of width f (default: the
  /// model's FFN size; Qwen2-MoE's shared expert has its own).
  int ffn(const std::string& p, int x, int64_t s, int block, int64_t f = 0) {
    const int64_t h = m_.hidden, t = b_ * s;
    if (f == 0) f = m_.ffn_dim;
    const Shape hs = {b_, s, h}, fs = {b_, s, f};
    int inner;
    if (m_.gated_ffn && m_.fused_gate_up) {  // Phi-3: gate_up_proj [h, 2f], chunked; the act reads one half
      int gu = B_.add(p + ".gate_up", LayerType::Linear, {t, h, 2 * f, m_.linear_bias}, {b_, s, 2 * f}, {x},
                      block);
      inner = glu(p + ".mul", p + ".act", gu, -1, t * f, fs, block);
    } else if (m_.gated_ffn) {  // Llama: down(act(gate(x)) * up(x)); T5 v1.1: wo(act(wi_0 x) * wi_1 x)
      int gate = B_.add(p + ".gate", LayerType::Linear, {t, h, f, m_.linear_bias}, fs, {x}, block);
      int up = B_.add(p + ".up", LayerType::Linear, {t, h, f, m_.linear_bias}, fs, {x}, block);
      inner = glu(p + ".mul", p + ".act", gate, up, t * f, fs, block);
    } else {
      int up = B_.add(p + ".up", LayerType::Linear, {t, h, f, m_.linear_bias}, fs, {x}, block);
      inner = activation(p + ".act", up, t * f, fs, block);
    }
    inner = dropout(p + ".act_dropout", m_.act_dropout, inner, t * f, fs, block);
    int down = B_.add(p + ".down", LayerType::Linear, {t, f, h, m_.linear_bias}, hs, {inner}, block);
    return dropout(p + ".dropout", m_.dropout, down, b_ * sp_seq(s) * h, {b_, sp_seq(s), h}, block);
  }

  /// Mixture-of-experts FFN (Switch Transformers, top-1; Mixtral, top-k): router Linear [t, E],
  /// softmax (with the top-k choice and capacity count), dispatch of the kept (token, expert)
  /// pairs into per-expert buffers [E, C, h] (C = batch x capacity per sample; a memory-bound
  /// copy, costed as an elementwise op), the experts as batched matmuls [E, C, h] x [E, h, f]
  /// (gated experts: gate and up, act(gate) * up) and [E, C, f] x [E, f, h], and the combine:
  /// outputs scattered back to token order, scaled by the router weights and summed over the k
  /// choices.
  ///
  /// Under expert parallelism (expert_shards = ep > 1, one GPU's shard) the GPU holds E / ep experts,
  /// each taking the tokens of ep GPUs (ep x C slots); the router still scores all E, and the
  /// all-to-all exchanges are the parallel model's (parallel.cpp), not nodes.
  int moe(const std::string& p, int x, int64_t s, int block) {
    const int64_t h = m_.hidden, f = m_.ffn_dim, t = b_ * s, k = m_.moe_top_k;
    const int64_t ep = std::max<int64_t>(1, m_.expert_shards), E = m_.num_experts / ep;
    // gpt-oss in inference: every expert takes every token (Hugging Face's eval-mode path).
    const bool every = every_expert_runs(m_, !g_.settings.backward);
    const int64_t C = (every ? 1 : ep) * b_ * expert_slots_per_sample(m_, s, !g_.settings.backward);
    const Shape hs = {b_, s, h}, es = {E, C, f};
    const int64_t R = m_.num_experts;  // the router scores every expert
    int r = B_.add(p + ".router", LayerType::Linear, {t, h, R, m_.router_bias}, {b_, s, R}, {x}, block);
    int pr = B_.add(p + ".router.softmax", LayerType::Softmax, {t, R}, {b_, s, R}, {r}, block);
    int d = B_.add(p + ".dispatch", LayerType::Add, {E * C * h}, {E, C, h}, {x, pr}, block);
    int a;
    const int64_t n = E * C * f;
    if (m_.gated_ffn && m_.fused_gate_up) {  // gpt-oss: one biased gate_up per expert, then its clamped GLU
      int gu = B_.add(p + ".expert.gate_up", LayerType::BMM, {E, C, h, 2 * f}, {E, C, 2 * f}, {d}, block);
      B_.own_weight(gu, static_cast<double>(E * h * 2 * f));
      if (m_.linear_bias) {
        gu = B_.add(p + ".expert.gate_up_bias", LayerType::Pointwise, {2 * n, 0}, {E, C, 2 * f}, {gu}, block);
        B_.own_weight(gu, static_cast<double>(E * 2 * f));
      }
      if (m_.clamped_glu) {  // (up.clamp(-l, l) + 1) * g * sigmoid(1.702 g), g = gate.clamp(max l): seven
                             // kernels
        const auto P = LayerType::Pointwise;
        int g = B_.add(p + ".expert.gate_clamp", P, {n, 1}, es, {gu}, block);
        int u = B_.add(p + ".expert.up_clamp", P, {n, 1}, es, {gu}, block);
        int sg = B_.add(p + ".expert.act_scale", P, {n, 0}, es, {g}, block);
        sg = B_.add(p + ".expert.act_sigmoid", P, {n, 1}, es, {sg}, block);
        int gs = B_.add(p + ".expert.act", LayerType::Mul, {n}, es, {g, sg}, block);
        u = B_.add(p + ".expert.up_add", P, {n, 0}, es, {u}, block);
        a = B_.add(p + ".expert.mul", LayerType::Mul, {n}, es, {gs, u}, block);
      } else {
        a = glu(p + ".expert.mul", p + ".expert.act", gu, -1, n, es, block);
      }
    } else if (m_.gated_ffn) {  // Mixtral's experts: w2(act(w1 x) * w3 x)
      int gate = B_.add(p + ".expert.gate", LayerType::BMM, {E, C, h, f}, es, {d}, block);
      B_.own_weight(gate, static_cast<double>(E * h * f));
      int up = B_.add(p + ".expert.up", LayerType::BMM, {E, C, h, f}, es, {d}, block);
      B_.own_weight(up, static_cast<double>(E * h * f));
      a = glu(p + ".expert.mul", p + ".expert.act", gate, up, E * C * f, es, block);
    } else {
      int up = B_.add(p + ".expert.up", LayerType::BMM, {E, C, h, f}, es, {d}, block);
      B_.own_weight(up, static_cast<double>(E * h * f));
      a = activation(p + ".expert.act", up, E * C * f, es, block);
    }
    a = dropout(p + ".expert.act_dropout", m_.act_dropout, a, E * C * f, es, block);
    int down = B_.add(p + ".expert.down", LayerType::BMM, {E, C, f, h}, {E, C, h}, {a}, block);
    B_.own_weight(down, static_cast<double>(E * f * h));
    if (m_.linear_bias) {  // gpt-oss's down_proj_bias
      down = B_.add(p + ".expert.down_bias", LayerType::Pointwise, {E * C * h, 0}, {E, C, h}, {down}, block);
      B_.own_weight(down, static_cast<double>(E * h));
    }
    int c = B_.add(p + ".combine", LayerType::Mul, {(every ? E : k) * t * h}, hs, {down, pr, x}, block);
    if (m_.shared_expert_ffn >
        0) {  // Qwen2-MoE: + sigmoid(shared_gate(x)) * shared_expert(x); DeepSeek: + shared(x)
      int sd = ffn(p + ".shared", x, s, block, m_.shared_expert_ffn);  // the model's gated FFN, its own width
      if (!m_.plain_shared_expert) {
        int sgt = B_.add(p + ".shared.router", LayerType::Linear, {t, h, 1, 0}, {b_, s, 1}, {x}, block);
        int sig = B_.add(p + ".shared.sigmoid", LayerType::Pointwise, {t, 1}, {b_, s, 1}, {sgt}, block);
        sd = B_.add(p + ".shared.scale", LayerType::Mul, {t * h}, hs, {sd, sig}, block);
      }
      c = B_.add(p + ".shared.add", LayerType::Add, {t * h}, hs, {c, sd}, block);
    }
    return dropout(p + ".dropout", m_.dropout, c, t * h, hs, block);
  }

  /// The FFN of layer i of `stack`: a mixture of experts where the model says so.
  int any_ffn(const std::string& stack, int i, const std::string& p, int x, int64_t s, int block) {
    // The num_layers stack (encoder, or a decoder-only model's) follows encoder_sparse_step.
    if (is_sparse_layer(m_, stack == "decoder" && m_.arch == Arch::EncoderDecoder, i))
      return moe(p, x, s, block);
    return ffn(p, x, s, block, m_.dense_ffn());  // DeepSeek's dense first layers: intermediate_size
  }

  /// One transformer block "<stack>.<i>." on x [b, s, h]. enc >= 0 adds T5
  /// cross-attention over the encoder output enc [b, s_enc, h].
  /// cross_bias: the cross-attention's position bias node (T5), or -1.
  int block(const std::string& stack, int i, int blk, int x, int64_t s, int rel_bias, int enc = -1,
            int64_t s_enc = 0, int cross_bias = -1) {
    const std::string p = stack + "." + std::to_string(i) + ".";
    // The norms and residual adds lie outside the tensor-parallel regions: with sequence
    // parallelism each GPU runs its 1/sp of the tokens.
    const int64_t h = m_.hidden, t = b_ * sp_seq(s);
    const Shape hs = {b_, sp_seq(s), h};
    const LayerType nt = norm_type(m_);
    const bool fused = m_.qkv_fused();
    const bool causal = m_.arch == Arch::DecoderOnly || stack == "decoder";
    if (!m_.pre_norm) {  // post-norm (BERT, OPT-350m): norm after each residual add
      int a = attention(p + "attn", x, s, x, s, blk, rel_bias, fused, causal);
      int r1 = B_.add(p + "attn.residual", LayerType::Add, {t * h}, hs, {a, x}, blk);
      int n1 = B_.add(p + "attn.norm", nt, {t, h}, hs, {r1}, blk);
      int f = any_ffn(stack, i, p + "ffn", n1, s, blk);
      int r2 = B_.add(p + "ffn.residual", LayerType::Add, {t * h}, hs, {f, n1}, blk);
      return B_.add(p + "ffn.norm", nt, {t, h}, hs, {r2}, blk);
    }
    // OLMo 2 / EXAONE 4 (post_norm_only): no norm before attention and the FFN, one after each.
    const bool pre = !m_.post_norm_only, post = m_.sandwich_norm || m_.post_norm_only;
    int n1 = pre ? B_.add(p + "attn.norm", nt, {t, h}, hs, {x}, blk) : x;
    int a = attention(p + "attn", n1, s, n1, s, blk, rel_bias, fused, causal);
    if (post) a = B_.add(p + "attn.post_norm", nt, {t, h}, hs, {a}, blk);  // Gemma 2 / 3, OLMo 2
    // Granite: the sublayer's output x residual_multiplier, its own kernel (a Python scalar: nothing saved).
    if (m_.residual_scale)
      a = B_.add(p + "attn.residual_scale", LayerType::Pointwise, {t * h, 0}, hs, {a}, blk);
    int cur = B_.add(p + "attn.residual", LayerType::Add, {t * h}, hs, {a, x}, blk);
    if (enc >= 0) {
      int nc = B_.add(p + "cross.norm", nt, {t, h}, hs, {cur}, blk);
      int c = attention(p + "cross", nc, s, enc, s_enc, blk, cross_bias, false, false);
      cur = B_.add(p + "cross.residual", LayerType::Add, {t * h}, hs, {c, cur}, blk);
    }
    // GPT-NeoX's parallel residual: the FFN reads the block's input, x + attn(ln1 x) + mlp(ln2 x).
    int n2 = pre ? B_.add(p + "ffn.norm", nt, {t, h}, hs, {m_.parallel_residual ? x : cur}, blk) : cur;
    int f = any_ffn(stack, i, p + "ffn", n2, s, blk);
    if (post) f = B_.add(p + "ffn.post_norm", nt, {t, h}, hs, {f}, blk);
    if (m_.residual_scale)
      f = B_.add(p + "ffn.residual_scale", LayerType::Pointwise, {t * h, 0}, hs, {f}, blk);
    return B_.add(p + "ffn.residual", LayerType::Add, {t * h}, hs, {f, cur}, blk);
  }

  /// The loss "head.loss" over `ins`; inference computes none (the last input is the output).
  int loss(std::vector<int64_t> dims, const std::vector<In>& ins) {
    if (!g_.settings.backward) return ins.back().id;
    return B_.add("head.loss", LayerType::CrossEntropy, std::move(dims), {1}, ins);
  }

  /// LM head over all tokens and the loss: CrossEntropy [b*s, vocab].
  int lm_loss(int x, int64_t s) {
    const int64_t h = m_.hidden, t = b_ * s, V = m_.vocab_size;
    int cur = x;
    if (m_.family == Family::Bert) {  // BertOnlyMLMHead: dense + GELU + LayerNorm, then decoder
      cur = B_.add("head.transform", LayerType::Linear, {t, h, h, 1}, {b_, s, h}, {cur});
      cur = activation("head.act", cur, t * h, {b_, s, h}, -1);
      cur = B_.add("head.norm", LayerType::LayerNorm, {t, h}, {b_, s, h}, {cur});
    }
    if (m_.embed_dim != h)  // OPT project_out
      cur = B_.add("head.project_out", LayerType::Linear, {t, h, m_.embed_dim, 0}, {b_, s, m_.embed_dim},
                   {cur});
    const bool bias = m_.family == Family::Bert;  // BERT's decoder has a vocab bias
    int lm = B_.add("head.lm", LayerType::Linear, {t, m_.embed_dim, V, bias}, {b_, s, V}, {cur});
    if (m_.tie_word_embeddings) B_.share_weight(lm, bias ? double(V) : 0.0);
    if (m_.logits_scale)  // Granite: logits / logits_scaling, an elementwise kernel over [b, s, V]
      lm = B_.add("head.logits_scale", LayerType::Pointwise, {t * V, 0}, {b_, s, V}, {lm});
    if (m_.final_softcap > 0) lm = softcap("head.softcap", lm, t * V, {b_, s, V}, -1);  // Gemma 2
    return loss({t, V}, {lm});
  }

  int text() {
    const int64_t s = g_.settings.seq_len, h = m_.hidden, t = b_ * s, E = m_.embed_dim;
    const Shape hs = {b_, s, h};
    int x = B_.add("embed.word", LayerType::Embedding, {t, m_.vocab_size, E}, {b_, s, E}, {});
    if (m_.embed_scale)  // Gemma: embeddings x sqrt(hidden_size)
      x = B_.add("embed.scale", LayerType::Mul, {t * E}, {b_, s, E}, {x});
    if (E != h) x = B_.add("embed.project_in", LayerType::Linear, {t, E, h, 0}, hs, {x});
    std::vector<int> parts = {x};
    if (m_.type_vocab_size > 0)
      parts.push_back(B_.add("embed.token_type", LayerType::Embedding, {t, m_.type_vocab_size, h}, hs, {}));
    if (m_.max_positions > 0)
      parts.push_back(B_.add("embed.position", LayerType::Embedding,
                             {t, m_.max_positions + m_.position_offset, h}, hs, {}));
    if (parts.size() > 1) {
      // k summed embeddings = k-1 elementwise adds over [t, h].
      int64_t adds = static_cast<int64_t>(parts.size()) - 1;
      x = B_.add("embed.add", LayerType::Add, {adds * t * h}, hs,
                 std::vector<In>(parts.begin(), parts.end()));
    }
    if (m_.family == Family::Bert) x = B_.add("embed.norm", LayerType::LayerNorm, {t, h}, hs, {x});
    const int64_t ts = b_ * sp_seq(s);  // the tokens of this GPU under sequence parallelism
    const Shape hss = {b_, sp_seq(s), h};
    x = dropout("embed.dropout", m_.embed_dropout, x, ts * h, hss, -1);
    for (int i = 0; i < m_.num_layers; ++i)
      x = block(m_.arch == Arch::EncoderOnly ? "encoder" : "decoder", i, i, x, s, -1);
    if (m_.final_norm) x = B_.add("head.norm", norm_type(m_), {ts, h}, hss, {x});
    if (m_.lm_head) return lm_loss(x, s);
    // BERT classifier: pooler (dense + tanh, tanh folded in) on [CLS], dropout, classifier.
    int pooled = B_.add("head.pooler", LayerType::Linear, {b_, h, h, 1}, {b_, h}, {In(x, {b_, h})});
    pooled = dropout("head.dropout", m_.dropout, pooled, b_ * h, {b_, h}, -1);
    int c = B_.add("head.classifier", LayerType::Linear, {b_, h, m_.num_labels, 1}, {b_, m_.num_labels},
                   {pooled});
    return loss({b_, m_.num_labels}, {c});
  }

  int t5() {
    const int64_t se = g_.settings.seq_len, sd = decoder_tokens_per_sample(m_, g_.settings);
    const int64_t h = m_.hidden, H = m_.num_heads, te = b_ * se, td = b_ * sd, V = m_.vocab_size;
    // Encoder.
    int x = B_.add("embed.word", LayerType::Embedding, {te, V, h}, {b_, se, h}, {});
    const int ids = x;  // stands for the input ids, whose padding mask the cross-attention's bias holds
    x = dropout("embed.dropout", m_.embed_dropout, x, te * h, {b_, se, h}, -1);
    // Relative position bias [1, H, s, s] from a [buckets, H] table (first layer of each stack),
    // plus the stack's mask, once: Hugging Face's position_bias + mask, a [b, H, s, s] tensor
    // that every layer of the stack adds to its scores (the padding mask here; the decoder's
    // causal mask below; zeros plus the encoder's padding mask for the cross-attention).
    int rb = B_.add("encoder.0.attn.rel_bias", LayerType::Embedding, {se * se, m_.rel_attn_buckets, H},
                    {1, H, se, se}, {}, 0);
    rb = B_.add("encoder.0.attn.position_bias", LayerType::Pointwise, {b_ * H * se * se, 0}, {b_, H, se, se},
                {In(rb, {1, H, se, se})}, 0);
    for (int i = 0; i < m_.num_layers; ++i) x = block("encoder", i, i, x, se, rb);
    x = B_.add("encoder.final_norm", norm_type(m_), {te, h}, {b_, se, h}, {x});
    int enc = dropout("encoder.final_dropout", m_.dropout, x, te * h, {b_, se, h}, -1);
    // Decoder (blocks numbered after the encoder's, so block ids are unique).
    int y = B_.add("embed.dec_word", LayerType::Embedding, {td, V, h}, {b_, sd, h}, {});
    B_.share_weight(y, 0);  // the shared token table is counted by embed.word
    y = dropout("embed.dec_dropout", m_.embed_dropout, y, td * h, {b_, sd, h}, -1);
    const int first = static_cast<int>(m_.num_layers);
    int rd = B_.add("decoder.0.attn.rel_bias", LayerType::Embedding, {sd * sd, m_.rel_attn_buckets, H},
                    {1, H, sd, sd}, {}, first);
    rd = B_.add("decoder.0.attn.position_bias", LayerType::Pointwise, {b_ * H * sd * sd, 0}, {b_, H, sd, sd},
                {In(rd, {1, H, sd, sd})}, first);
    const int cb = B_.add("decoder.0.cross.position_bias", LayerType::Pointwise, {b_ * H * sd * se, 0},
                          {b_, H, sd, se}, {In(ids, {b_, 1, 1, se})}, first);
    for (int i = 0; i < m_.num_decoder_layers; ++i)
      y = block("decoder", i, first + i, y, sd, rd, enc, se, cb);
    y = B_.add("head.norm", norm_type(m_), {td, h}, {b_, sd, h}, {y});
    y = dropout("head.dropout", m_.dropout, y, td * h, {b_, sd, h}, -1);
    return lm_loss(y, sd);
  }

  int vision() {
    const int64_t img = g_.settings.image_size > 0 ? g_.settings.image_size : m_.image_size;
    const int64_t np = (img / m_.patch_size) * (img / m_.patch_size), S = m_.num_special_tokens;
    const int64_t s = np + S, h = m_.hidden, t = b_ * s;
    const int64_t table = (m_.image_size / m_.patch_size) * (m_.image_size / m_.patch_size) + S;
    const Shape hs = {b_, s, h};
    int patch = B_.add("embed.patch", LayerType::Conv2dPatch, {b_, m_.num_channels, h, img, m_.patch_size},
                       {b_, np, h}, {});
    // [CLS] (+ distillation) tokens expanded over the batch: a lookup of S rows per sample.
    int cls = B_.add("embed.cls", LayerType::Embedding, {b_ * S, S, h}, {b_, S, h}, {});
    // Learned position table [table, h] added to every sample (bwd: sum over the batch).
    int pos = B_.add("embed.position", LayerType::Embedding, {t, table, h}, hs, {});
    int x = B_.add("embed.add", LayerType::Add, {t * h}, hs, {patch, cls, pos});  // concat + add
    x = dropout("embed.dropout", m_.embed_dropout, x, t * h, hs, -1);
    for (int i = 0; i < m_.num_layers; ++i) x = block("encoder", i, i, x, s, -1);
    x = B_.add("head.norm", LayerType::LayerNorm, {t, h}, hs, {x});
    const int64_t L = m_.num_labels;
    int c = B_.add("head.classifier", LayerType::Linear, {b_, h, L, 1}, {b_, L}, {In(x, {b_, h})});
    if (!m_.dist_head) return loss({b_, L}, {c});
    int d = B_.add("head.dist_classifier", LayerType::Linear, {b_, h, L, 1}, {b_, L}, {In(x, {b_, h})});
    return loss({2 * b_, L}, {c, d});
  }
};

/// Bytes the backward of forward node n reads from its own forward pass.
double saved_bytes(const LayerNode& n) {
  switch (n.type) {
    case LayerType::Add:
      return 0;  // gradient passes through
    case LayerType::Pointwise:
      return n.dims[1] ? n.cost.in_bytes : 0;  // x / c, x + mask: nothing saved
    case LayerType::FlashAttention:
      return n.cost.in_bytes + n.cost.out_bytes + n.cost.temp_bytes;  // Q, K, V, O and the log-sum-exp
    case LayerType::Linear:
      // A frozen weight (LoRA) takes no gradient: its dX = dY W needs the weight, not the input, and
      // autograd saves a product's operand only for the gradient that needs it.
      return n.frozen ? n.cost.temp_bytes : n.cost.in_bytes + n.cost.temp_bytes;
    case LayerType::Embedding:
    case LayerType::LayerNorm:
    case LayerType::RMSNorm:
    case LayerType::BMM:
    case LayerType::Attention:
    case LayerType::Softmax:
    case LayerType::Dropout:
    case LayerType::GELU:
    case LayerType::ReLU:
    case LayerType::SiLU:
    case LayerType::Mul:
    case LayerType::Conv2dPatch:
    case LayerType::CrossEntropy:
    case LayerType::Optimizer:
      return n.cost.in_bytes + n.cost.temp_bytes;  // its inputs and its temporaries
  }
  fail("layer type id {} is unknown", static_cast<int>(n.type));
}

}  // namespace

LayerGraph build_layer_graph(const ModelSpec& m, const TrainSettings& s) {
  validate_model_spec(m, m.name.empty() ? "model" : m.name);
  validate_settings(m, s);
  LayerGraph g;
  g.model = m;
  g.settings = s;
  if (s.vocab_multiple > 0 && m.vocab_size > 0)  // Megatron's padded vocabulary (TrainSettings)
    g.model.vocab_size = (m.vocab_size + s.vocab_multiple - 1) / s.vocab_multiple * s.vocab_multiple;
  // Room for the forward part (a few dozen nodes per block) before it is built, so that the
  // vectors of nodes and edges do not grow by copies (BM_LayerGraphLarge in bench/bench_predict.cpp:
  // 2,411 -> 2,309 us, AMD VM family 26 model 2; the rest is mostly each node's own allocations).
  const size_t blocks =
      static_cast<size_t>(std::max<int64_t>(0, m.num_layers) + std::max<int64_t>(0, m.num_decoder_layers));
  g.nodes.reserve(32 * blocks + 16);
  g.edges.reserve(48 * blocks + 16);
  Forward(g).build();
  const int nf = static_cast<int>(g.nodes.size());
  const size_t ef = g.edges.size();
  if (!s.backward) return g;  // inference: the forward nodes only (edges are already ordered by dst)
  // Exactly what follows adds: a backward node per forward node (+ the optimizer step), a saved
  // edge per forward node, the reversed forward edges (+ at most one weight-gradient edge per node).
  g.nodes.reserve(2 * static_cast<size_t>(nf) + 1);
  g.edges.reserve(2 * ef + 2 * static_cast<size_t>(nf));

  // First input shape of each forward node = the shape of its input gradient.
  std::vector<Shape> in_shape(nf);
  for (size_t i = 0; i < ef; ++i)
    if (in_shape[g.edges[i].dst].empty()) in_shape[g.edges[i].dst] = g.edges[i].shape;
  // Which forward nodes autograd runs a backward for: with LoRA, those with trainable weights
  // or an input that needs a gradient (the frozen embedding and the first block's frozen
  // projections before the first adapter run none); without LoRA, every node.
  std::vector<char> grad(nf, s.lora_rank > 0 ? 0 : 1);
  if (s.lora_rank > 0) {
    for (int f = 0; f < nf; ++f)
      if (g.nodes[f].cost.params > 0 && !g.nodes[f].frozen) grad[f] = 1;
    for (size_t i = 0; i < ef; ++i)  // edges are in dst order and src < dst: one pass
      if (grad[g.edges[i].src]) grad[g.edges[i].dst] = 1;
  }

  // Backward nodes in reverse forward order.
  std::vector<int> bwd(nf, -1);
  for (int f = nf - 1; f >= 0; --f) {
    if (!grad[f]) continue;
    LayerNode n = g.nodes[f];
    n.id = static_cast<int>(g.nodes.size());
    n.name += ".bwd";
    n.dir = Direction::Backward;
    n.peer = f;
    if (!in_shape[f].empty()) n.out_shape = in_shape[f];
    g.nodes[f].peer = n.id;
    bwd[f] = n.id;
    g.nodes.push_back(std::move(n));
    LayerEdge sv;
    sv.src = f;
    sv.dst = bwd[f];
    sv.bytes = saved_bytes(g.nodes[f]);
    sv.shape = in_shape[f].empty() ? g.nodes[f].out_shape : in_shape[f];
    sv.saved = true;
    g.edges.push_back(std::move(sv));
  }
  for (size_t i = 0; i < ef; ++i) {
    if (!grad[g.edges[i].src] || !grad[g.edges[i].dst]) continue;  // no gradient flows there
    LayerEdge r = g.edges[i];
    std::swap(r.src, r.dst);
    r.src = bwd[r.src];
    r.dst = bwd[r.dst];
    r.backward = true;
    g.edges.push_back(std::move(r));
  }
  if (s.optimizer_step) {
    const double p = g.trainable_params();
    LayerNode n;
    n.id = static_cast<int>(g.nodes.size());
    n.name = "optim.step";
    n.type = LayerType::Optimizer;
    n.dir = Direction::Update;
    n.dims = {static_cast<int64_t>(p), static_cast<int64_t>(s.optimizer)};
    validate_dims(n.type, n.dims);
    n.dtype = weight_dtype(s);  // autocast: the step on the FP32 weights
    n.cost = layer_cost(n.type, n.dims, n.dtype);
    n.out_shape = {n.dims[0]};
    g.nodes.push_back(std::move(n));
    // Every node with weights (own or shared, e.g. a tied LM head) sends the
    // gradient of the weights it reads: weight_bytes, i.e. params * dtype bytes.
    for (int f = 0; f < nf; ++f) {
      if (g.nodes[f].cost.weight_bytes <= 0 || g.nodes[f].frozen) continue;
      LayerEdge ge;
      ge.src = bwd[f];
      ge.dst = g.nodes.back().id;
      // An FP8 GEMM reads an FP8 copy of its weight; its gradient is in the recipe's dtype.
      ge.shape = {static_cast<int64_t>(g.nodes[f].cost.weight_bytes / dtype_bytes(g.nodes[f].dtype))};
      ge.bytes = static_cast<double>(ge.shape[0]) * dtype_bytes(weight_dtype(s));
      ge.backward = true;
      g.edges.push_back(std::move(ge));
    }
  }
  std::stable_sort(g.edges.begin(), g.edges.end(),
                   [](const LayerEdge& a, const LayerEdge& b) { return a.dst < b.dst; });
  return g;
}

std::vector<bool> LayerGraph::attention_core() const {
  static const std::set<std::string> kCore = {
      "qk",        "scale",     "softcap_div", "softcap_tanh", "softcap_mul", "bias", "mask",
      "sinks_cat", "sinks_max", "sinks_sub",   "softmax",      "dropout",     "av"};
  auto split = [](const std::string& name) {
    const size_t dot = name.rfind('.');
    return dot == std::string::npos ? std::make_pair(std::string(), name)
                                    : std::make_pair(name.substr(0, dot), name.substr(dot + 1));
  };
  std::set<std::string> cores;  // "<attn>" of every "<attn>.qk" score product in the blocks
  for (const LayerNode& n : nodes)
    if (n.dir == Direction::Forward && n.block >= 0 && n.type == LayerType::BMM &&
        split(n.name).second == "qk")
      cores.insert(split(n.name).first);
  std::vector<bool> out(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const LayerNode& n = nodes[i];
    if (n.dir != Direction::Forward || n.block < 0) continue;
    const auto [prefix, last] = split(n.name);
    out[i] = n.type == LayerType::FlashAttention || (cores.count(prefix) > 0 && kCore.count(last) > 0);
  }
  return out;
}

std::vector<StagePart> LayerGraph::stage_parts() const {
  // A node outside the blocks is the first stage's when its forward node (itself, or the forward
  // peer of a backward node) comes before the first block's node, else the last stage's. A graph
  // without blocks is one part.
  int first_block = -1;
  for (const LayerNode& n : nodes)
    if (n.block >= 0) {
      first_block = n.id;
      break;
    }
  std::vector<StagePart> parts(nodes.size(), StagePart::Blocks);
  if (first_block < 0) return parts;
  for (const LayerNode& n : nodes) {
    if (n.block >= 0) continue;
    const int fwd = n.dir == Direction::Backward && n.peer >= 0 ? n.peer : n.id;
    parts[static_cast<size_t>(n.id)] = fwd < first_block ? StagePart::First : StagePart::Last;
  }
  return parts;
}

double LayerGraph::total_params() const {
  double p = 0;
  for (const auto& n : nodes)
    if (n.dir == Direction::Forward) p += n.cost.params;
  return p;
}
double LayerGraph::trainable_params() const {
  double p = 0;
  for (const auto& n : nodes)
    if (n.dir == Direction::Forward && !n.frozen) p += n.cost.params;
  return p;
}
double LayerGraph::total_flops_fwd() const {
  double f = 0;
  for (const auto& n : nodes)
    if (n.dir == Direction::Forward) f += n.cost.flops_fwd;
  return f;
}
double LayerGraph::total_flops_bwd() const {
  double f = 0;
  for (const auto& n : nodes)
    if (n.dir == Direction::Backward) f += n.cost.flops_bwd;
  return f;
}
double LayerGraph::total_flops_update() const {
  double f = 0;
  for (const auto& n : nodes)
    if (n.dir == Direction::Update) f += n.cost.flops_fwd;
  return f;
}
int LayerGraph::find(const std::string& name) const {
  for (const auto& n : nodes)
    if (n.name == name) return n.id;
  return -1;
}

nlohmann::json LayerGraph::to_json() const {
  nlohmann::json layers = nlohmann::json::array(), edges_j = nlohmann::json::array();
  for (const auto& n : nodes) {
    nlohmann::json dims = nlohmann::json::object();
    const auto& names = layer_info(n.type).dims;
    for (size_t i = 0; i < n.dims.size(); ++i) dims[names[i]] = n.dims[i];
    layers.push_back({{"id", n.id},
                      {"name", n.name},
                      {"type", to_string(n.type)},
                      {"dir", to_string(n.dir)},
                      {"dims", dims},
                      {"flops", n.flops()},
                      {"flops_fwd", n.cost.flops_fwd},
                      {"flops_bwd", n.cost.flops_bwd},
                      {"params", n.cost.params},
                      {"in_bytes", n.cost.in_bytes},
                      {"out_bytes", n.cost.out_bytes},
                      {"weight_bytes", n.cost.weight_bytes},
                      {"temp_bytes", n.cost.temp_bytes},
                      {"out_shape", n.out_shape},
                      {"block", n.block},
                      {"peer", n.peer}});
  }
  for (const auto& e : edges)
    edges_j.push_back({{"src", e.src},
                       {"dst", e.dst},
                       {"bytes", e.bytes},
                       {"shape", e.shape},
                       {"backward", e.backward},
                       {"saved", e.saved}});
  return {{"model", model.to_json()},
          {"settings", settings.to_json()},
          {"params", total_params()},
          {"flops_fwd", total_flops_fwd()},
          {"flops_bwd", total_flops_bwd()},
          {"flops_update", total_flops_update()},
          {"layers", layers},
          {"edges", edges_j}};
}

std::string LayerGraph::to_dot() const {
  std::ostringstream o;
  o << "digraph \"" << model.name << "\" {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  for (const auto& n : nodes) {
    const char* color = n.dir == Direction::Forward    ? "lightblue"
                        : n.dir == Direction::Backward ? "mistyrose"
                                                       : "palegreen";
    o << "  n" << n.id << " [label=\"" << n.name << "\\n"
      << to_string(n.type) << fmt::format("\\n{:.3g} FLOP", n.flops())
      << "\", style=filled, fillcolor=" << color << "];\n";
  }
  for (const auto& e : edges) {
    o << "  n" << e.src << " -> n" << e.dst;
    if (e.saved)
      o << " [style=dotted]";
    else if (e.backward)
      o << " [style=dashed, color=red]";
    o << ";\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace scaledl
