// The analytic peak-memory estimate: a replay of the layer graph's allocations
// (memory.hpp). Per-type rules follow what the zoo's LibTorch code allocates
// and what autograd keeps (src/bench/zoo_common.cpp).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scaledl/core/error.hpp"
#include "scaledl/memory/memory.hpp"

namespace scaledl {

namespace {

double numel(const std::vector<int64_t>& s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

/// A live allocation with a reference count; freed at zero.
struct Buffer {
  double bytes = 0;
  int refs = 0;
};

class Replay {
 public:
  // Autocast (settings.amp): the weights, their gradients and the optimizer state in FP32
  // (pe_ = 4), each tensor in its producer's dtype (out_bytes).
  Replay(const LayerGraph& g, const MemoryOptions& o)
      : g_(g), e_(dtype_bytes(g.settings.dtype)), pe_(dtype_bytes(weight_dtype(g.settings))) {
    SCALEDL_CHECK(o.device_kind == "cuda" || o.device_kind == "cpu",
                  "memory device kind '{}' is not cuda or cpu", o.device_kind);
    round_ = o.round_bytes >= 0 ? o.round_bytes : (o.device_kind == "cuda" ? 512.0 : 1.0);
    mask_bytes_ = o.device_kind == "cuda" ? 1.0 : e_;
    cpu_ = o.device_kind == "cpu";
    for (const auto& n : g.nodes)
      if (n.dir == Direction::Forward) ++nf_;
    inputs_.resize(nf_);
    consumers_.assign(nf_, 0);
    for (const auto& ed : g.edges)
      if (!ed.backward && !ed.saved && ed.dst < nf_) {
        inputs_[ed.dst].push_back({ed.src, ed.bytes});
        ++consumers_[ed.src];
      }
    if (o.keep_outputs) held_ = logits_node();
  }

  MemoryEstimate run() {
    const auto& s = g_.settings;
    const bool training = s.backward;
    MemoryEstimate r;
    double params = 0, trainable = 0, largest = 0;
    for (int u = 0; u < nf_; ++u) {
      const double p = g_.nodes[u].cost.params;
      params += p;
      if (!g_.nodes[u].frozen) {  // LoRA: the adapters alone take gradients and optimizer state
        trainable += p;
        largest = std::max(largest, p);
      }
    }
    r.weights = params * pe_;
    const bool has_state = training && s.optimizer_step;
    // The optimizer's state per trainable parameter: its moments (SGD: one) in the weights' dtype,
    // or with FP32 master weights (fp32_master_weights: Megatron-LM) the master and the moments in
    // FP32.
    const double moments = s.optimizer == OptimizerKind::SGD ? 1.0 : 2.0;
    const bool masters = fp32_master_weights(s);
    const double state_bytes = masters ? 4.0 * (1.0 + moments) : moments * pe_;
    r.optimizer = has_state ? trainable * state_bytes : 0.0;
    r.batch = batch_bytes();
    // Persistent tensors are rounded per node (each parameter is its own allocation).
    for (int u = 0; u < nf_; ++u) {
      const double p = g_.nodes[u].cost.params, w = p * pe_;
      const bool state = has_state && !g_.nodes[u].frozen;
      // Each moment (and the master) is its own allocation.
      const double allocs = masters ? 1.0 + moments : moments;
      const double each = masters ? rnd(p * 4.0) : rnd(w);
      if (w > 0) persistent_ += rnd(w) + (state ? allocs * each : 0.0);
      // Autocast's cast of a weight (its "<name>.cast" node) is saved for the backward: counted
      // as held from the start (an upper bound of a few per cent of the weights' bytes).
      if (s.amp && training && g_.nodes[u].cost.params > 0 &&
          autocast_class(g_.nodes[u].type) == AutocastClass::Lower)
        persistent_ += rnd(g_.nodes[u].cost.params * e_);
    }
    persistent_ += rnd(r.batch);
    r.base = persistent_;
    cur_ = persistent_;
    peak_ = cur_;
    peak_at_ = "start";

    forward(training);
    r.saved = cur_ - persistent_;
    if (training) {
      backward();
      r.grads = grads_;
      if (s.optimizer_step) {
        // Adam: denom = exp_avg_sq.sqrt() / c -> two temporaries of the largest parameter.
        const double tmp = s.optimizer == OptimizerKind::SGD ? 0.0 : 2 * rnd(largest * pe_);
        touch(tmp, "optim.step");
      }
    }
    r.peak = peak_;
    r.peak_at = peak_at_;
    return r;
  }

 private:
  struct Input {
    int src;
    double bytes;
  };
  const LayerGraph& g_;
  double e_;
  double pe_;  ///< bytes of a parameter, its gradient and each optimizer state
  double round_ = 512, mask_bytes_ = 1;
  bool cpu_ = false;
  int nf_ = 0;
  std::vector<std::vector<Input>> inputs_;
  std::vector<int> consumers_;
  std::map<int, Buffer> out_;                 ///< forward outputs by node id
  std::vector<double> extra_;                 ///< per node: bytes of its own saved temporaries
  std::vector<std::vector<int>> saved_refs_;  ///< per node: producer ids whose output it keeps for backward
  std::map<int, Buffer> grad_;                ///< gradient of node u's output
  double persistent_ = 0, cur_ = 0, peak_ = 0, grads_ = 0, credit_ = 0;
  std::string peak_at_;

  int held_ = -1;  ///< the logits the loop holds to the end (MemoryOptions::keep_outputs); -1: none

  double rnd(double b) const { return b <= 0 ? 0 : std::ceil(b / round_) * round_; }

  /// The node whose output the model returns as its logits: what the loss reads (the loss's
  /// autocast cast reads it under autocast); -1 without a loss.
  int logits_node() const {
    for (int u = nf_ - 1; u >= 0; --u) {
      if (g_.nodes[u].type != LayerType::CrossEntropy || inputs_[u].empty()) continue;
      const int x = inputs_[u][0].src;
      const auto& c = g_.nodes[x];
      // the loss's own autocast cast is "<loss>.cast" (layer_graph.cpp, amp_casts)
      const bool cast = g_.settings.amp && c.name == g_.nodes[u].name + ".cast" && !inputs_[x].empty();
      return cast ? inputs_[x][0].src : x;
    }
    return -1;
  }

  void alloc(double b) { cur_ += rnd(b); }
  void release(double b) { cur_ -= rnd(b); }
  /// A momentary allocation of `b` bytes at node `where`.
  void touch(double b, const std::string& where) {
    if (cur_ + rnd(b) > peak_) {
      peak_ = cur_ + rnd(b);
      peak_at_ = where;
    }
  }
  void mark(const std::string& where) { touch(0, where); }

  double batch_bytes() const {
    const auto& m = g_.model;
    const auto& s = g_.settings;
    if (m.patch_size > 0) {
      const double img = static_cast<double>(s.image_size > 0 ? s.image_size : m.image_size);
      return s.batch * (m.num_channels * img * img * 4.0 + 8.0);
    }
    double ids = static_cast<double>(s.batch * s.seq_len) * 8;
    double labels = m.lm_head ? ids : s.batch * 8.0;
    if (m.arch == Arch::EncoderDecoder) {
      const double dec = static_cast<double>(s.batch * decoder_tokens_per_sample(m, s)) * 8;
      ids += dec;
      labels = dec;
    }
    return ids + labels;
  }

  /// Bytes per element of what node `u` hands on (its dtype's under autocast).
  double out_e(int u) const { return g_.settings.amp ? dtype_bytes(g_.nodes[u].dtype) : e_; }

  double out_bytes(int u) const {
    const auto& n = g_.nodes[u];
    if (n.type == LayerType::CrossEntropy) return 4;
    return numel(n.out_shape) * out_e(u);
  }

  void drop_out_ref(int u) {
    auto it = out_.find(u);
    if (it == out_.end()) return;
    if (--it->second.refs <= 0) {
      release(it->second.bytes);
      out_.erase(it);
    }
  }

  /// Forward rules: which inputs a node keeps, its own saved temporaries and
  /// its momentary ones.
  void forward(bool training) {
    extra_.assign(nf_, 0);
    saved_refs_.assign(nf_, {});
    for (int u = 0; u < nf_; ++u) {
      const auto& n = g_.nodes[u];
      const auto& in = inputs_[u];
      double ob = out_bytes(u), transient = 0;
      std::vector<int> keep;  // producers whose output this node keeps
      switch (n.type) {
        case LayerType::Linear:  // a frozen weight's (LoRA) dX = dY W needs the weight, not the input
          if (!in.empty() && !n.frozen) keep.push_back(in[0].src);
          break;
        case LayerType::GELU:
        case LayerType::SiLU:
          if (!in.empty()) keep.push_back(in[0].src);
          break;
        case LayerType::LayerNorm:
          if (!in.empty()) keep.push_back(in[0].src);
          extra_[u] =
              2 * rnd(numel(n.out_shape) / std::max<double>(1, n.out_shape.back()) * 4);  // mean, rstd
          break;
        case LayerType::RMSNorm: {
          // x * rsqrt(mean(x^2) + eps) * w: keeps x, rsqrt [tokens] and x * rsqrt; x^2 is momentary.
          if (!in.empty()) keep.push_back(in[0].src);
          const double tokens = numel(n.out_shape) / std::max<double>(1, n.out_shape.back());
          extra_[u] = rnd(ob) + rnd(tokens * e_);
          transient = ob;
          break;
        }
        case LayerType::ReLU:
        case LayerType::Softmax:
          keep.push_back(u);  // the output
          break;
        case LayerType::Mul:
          for (const auto& i : in) keep.push_back(i.src);
          break;
        case LayerType::Pointwise:  // saves = 1: pow / tanh keep a tensor of this size; x / c, x + mask keep
                                    // none
          if (n.dims[1] && !in.empty()) keep.push_back(in[0].src);
          break;
        case LayerType::BMM: {
          // matmul reshapes transposed (non-contiguous) views into copies and keeps
          // them; a contiguous operand (the attention probabilities) is kept as is.
          for (const auto& i : in) {
            const auto& src = g_.nodes[i.src];
            if (src.type == LayerType::Softmax || src.type == LayerType::Dropout)
              keep.push_back(i.src);
            else
              extra_[u] += rnd(i.bytes);
          }
          if (in.size() < 2) extra_[u] = 0;  // expert matmuls: one activation operand, the weight
          if (in.size() == 1) keep.push_back(in[0].src);
          transient = ob;  // the scaled / masked / re-laid-out result is a second buffer
          break;
        }
        case LayerType::Dropout:
          extra_[u] = rnd(numel(n.out_shape) * mask_bytes_);
          break;
        case LayerType::FlashAttention:  // keeps Q, K, V, its output and the fp32 log-sum-exp; no scores
          for (const auto& i : in) keep.push_back(i.src);
          keep.push_back(u);
          extra_[u] = rnd(n.cost.temp_bytes);
          break;
        case LayerType::CrossEntropy: {
          const double tv = in.empty() ? 0 : in[0].bytes / out_e(in[0].src);  // tokens x vocab
          extra_[u] = rnd(tv * 4);                                            // log-softmax in FP32
          // The FP32 copy of the logits (under autocast it is the cast node's output, counted there).
          transient = e_ == 4 || g_.settings.amp ? 0 : tv * 4;
          break;
        }
        case LayerType::Embedding:
        case LayerType::Add:
        case LayerType::Conv2dPatch:
        case LayerType::Attention:  // not a graph node (attention is BMM, Softmax and Dropout nodes)
        case LayerType::Optimizer:  // not a forward node
          break;                    // nothing kept beyond weights and the batch
      }
      if (!training || !has_backward(u)) {  // LoRA: a frozen prefix keeps nothing for a backward
        keep.clear();
        extra_[u] = 0;
      }
      // The output (+ kept temporaries), with any momentary buffer, while the inputs are alive.
      alloc(ob);
      alloc(extra_[u]);
      touch(transient, n.name);
      Buffer b;
      b.bytes = ob;
      b.refs = consumers_[u];
      for (int k : keep)
        if (k == u) ++b.refs;
      if (u == held_) ++b.refs;  // the loop's reference, never dropped
      out_[u] = b;
      for (int k : keep)
        if (k != u) ++out_[k].refs;
      saved_refs_[u] = keep;
      for (const auto& i : in) drop_out_ref(i.src);
      if (out_[u].refs <= 0) {
        // Nobody reads it: the last node's output (the logits in inference, the loss) stays to the end.
        out_[u].refs = 1;
      }
    }
  }

  bool has_grad(int x) const { return grad_.count(x) || alias_.count(x); }
  int owner(int x) const {
    auto a = alias_.find(x);
    return a == alias_.end() ? x : a->second;
  }

  void add_grad(int src, double bytes, const std::string& where) {
    if (!has_grad(src)) {
      const double full = out_bytes(src);  // a slice's gradient is a full-size zero tensor
      alloc(full);
      grad_[src] = {full, 1};
      mark(where);
      return;
    }
    touch(bytes, where);  // the incoming gradient, summed into the existing one
  }
  std::map<int, int> alias_;  ///< grad of node -> the node whose buffer it shares

  /// Whether autograd runs forward node u's backward (all nodes but LoRA's frozen prefix).
  bool has_backward(int u) const { return g_.nodes[u].peer >= 0; }

  void backward() {
    for (int u = nf_ - 1; u >= 0; --u) {
      const auto& n = g_.nodes[u];
      if (!has_backward(u)) continue;
      const std::string where = n.name + ".bwd";
      const auto& in = inputs_[u];
      // Weight gradients stay until the step. A shared weight (tied LM head)
      // creates the owner's gradient early; the owner later adds to it. Frozen weights (LoRA)
      // take none.
      const double own = n.frozen ? 0.0 : n.cost.params * pe_;
      const double reads = n.frozen          ? 0.0
                           : g_.settings.amp ? n.cost.weight_bytes / dtype_bytes(n.dtype) * pe_
                                             : n.cost.weight_bytes;
      double wg = 0;
      if (reads > own + 0.5) {
        wg = reads - own;
        credit_ += wg;
      }
      bool tied = false;  // this node's weight gradient was created by a sharing node
      if (own > 0) {
        const double use = std::min(credit_, own);
        credit_ -= use;
        wg += own - use;
        tied = use > 0;
      }
      if (wg > 0) {
        alloc(wg);
        grads_ += wg;
      }
      double transient = 0;
      switch (n.type) {
        case LayerType::CrossEntropy: {
          // nll grad + a second [tokens, vocab] FP32 buffer of the log-softmax
          // backward (the counting allocator sees both beside the logits'
          // gradient: 14 fwd-bwd runs of datasets/memory missed exactly one),
          // + the FP32 copy's gradient in half precision.
          const double tv = in.empty() ? 0 : in[0].bytes / out_e(in[0].src);
          transient = 2 * tv * 4 + (e_ == 4 || g_.settings.amp ? 0 : tv * 4);
          break;
        }
        case LayerType::Embedding:
          // The dense embedding gradient is built in a [vocab, hidden] buffer of
          // its own: kept as the gradient when it is the first (the replay's
          // alloc above), summed into the existing one when a tied LM head made
          // it first; either way one more table-sized buffer is alive at the
          // peak (CPU fwd-bwd runs: 1x untied, 2x tied).
          transient = rnd(own) + (tied ? rnd(own) : 0.0);
          break;
        case LayerType::Conv2dPatch:
          // CPU (oneDNN) convolution backward holds four weight-sized buffers
          // beside the gradient (reordered weight and gradient layouts): the
          // small-batch fwd-bwd peaks of ViT / DeiT in datasets/memory missed
          // 4.0-4.4x the patch kernel. On CUDA (cuDNN workspaces) unmeasured.
          transient = cpu_ ? 4 * rnd(own) : 0.0;
          break;
        case LayerType::BMM:
          for (const auto& i : in) transient += i.bytes;  // gradients re-laid-out into the views
          break;
        case LayerType::RMSNorm:
          transient = 2 * out_bytes(u);
          break;
        case LayerType::LayerNorm:
        case LayerType::Linear:
        case LayerType::Attention:
        case LayerType::Softmax:
        case LayerType::Dropout:
        case LayerType::GELU:
        case LayerType::ReLU:
        case LayerType::SiLU:
        case LayerType::Add:
        case LayerType::Mul:
        case LayerType::Optimizer:
        case LayerType::Pointwise:
        case LayerType::FlashAttention:
          break;  // no momentary buffer beyond the gradients
      }
      touch(transient, where);
      if (n.type == LayerType::Add && has_grad(u)) {
        // The gradient passes through: inputs without one share this node's buffer.
        const int o = owner(u);
        for (const auto& i : in) {
          if (!has_backward(i.src)) continue;
          if (has_grad(i.src)) {
            touch(i.bytes, where);  // summed into the existing gradient
            continue;
          }
          alias_[i.src] = o;
          ++grad_[o].refs;
        }
      } else {
        for (const auto& i : in)
          if (has_backward(i.src)) add_grad(i.src, i.bytes, where);
      }
      mark(where);
      // After the node's backward: its output gradient, its kept tensors and temporaries go.
      drop_grad(u);
      for (int k : saved_refs_[u]) drop_out_ref(k);
      release(extra_[u]);
    }
  }

  void drop_grad(int u) {
    const int o = owner(u);
    alias_.erase(u);
    auto it = grad_.find(o);
    if (it == grad_.end()) return;
    if (--it->second.refs <= 0) {
      release(it->second.bytes);
      grad_.erase(it);
    }
  }
};

}  // namespace

nlohmann::json MemoryEstimate::to_json() const {
  return {{"weights_bytes", weights}, {"optimizer_bytes", optimizer},
          {"batch_bytes", batch},     {"grads_bytes", grads},
          {"saved_bytes", saved},     {"base_bytes", base},
          {"peak_bytes", peak},       {"peak_at", peak_at}};
}

MemoryEstimate estimate_memory(const LayerGraph& g, const MemoryOptions& o) {
  return Replay(g, o).run();
}

std::string memory_device_kind(const std::string& s) {
  return s.rfind("cpu", 0) == 0 ? "cpu" : "cuda";  // "cuda", "spec" (a GPU spec sheet), "cuda:0", GPU names
}

}  // namespace scaledl

namespace scaledl {

void check_headroom(double h) {
  SCALEDL_CHECK(std::isfinite(h) && h >= 0 && h < 1,
                "--headroom={} must be in [0, 1) (a fraction of the device memory)", h);
}

std::string memory_verdict(double peak, double hi80, double cap, double headroom) {
  if (cap <= 0) return "unknown";
  const double usable = cap * (1 - headroom);
  if (peak > usable) return "does not fit";
  if (std::isfinite(hi80) && hi80 > usable) return "tight";
  return "fits";
}

MemoryPrediction predict_memory(const LayerGraph& g, const DeviceRecord& dev, const MemoryCorrection* c,
                                double headroom, bool keep_outputs) {
  check_headroom(headroom);
  MemoryPrediction p;
  const std::string kind = memory_device_kind(dev.kind);
  MemoryOptions o;
  o.device_kind = kind;
  o.keep_outputs = keep_outputs;
  p.analytic = estimate_memory(g, o);
  p.peak_bytes = p.analytic.peak;
  p.method = "analytic estimate";
  if (c && !c->covers(kind))
    p.method = fmt::format("analytic estimate; the bundle's correction was trained on {} runs only",
                           fmt::join(c->device_kinds(), "/"));
  if (c && c->covers(kind)) {
    p.method = "analytic + learned correction";
    auto v = c->predict_interval(g, kind);
    if (keep_outputs) {  // the correction learnt loops that free the outputs
      o.keep_outputs = false;
      const double r = p.analytic.peak / std::max(1.0, estimate_memory(g, o).peak);
      for (double& x : v) x *= r;
    }
    p.peak_bytes = v[0];
    p.lo80 = v[1];
    p.hi80 = v[2];
    p.lo95 = v[3];
    p.hi95 = v[4];
    p.corrected = true;
  }
  p.capacity_bytes = dev.mem_gb > 0 ? dev.mem_gb * 1e9 : 0;
  p.headroom = headroom;
  p.verdict = memory_verdict(p.peak_bytes, p.hi80, p.capacity_bytes, headroom);
  return p;
}

nlohmann::json MemoryPrediction::to_json() const {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"peak_bytes", peak_bytes},
          {"peak_gb", peak_bytes / 1e9},
          {"interval_bytes", {{"80", {num(lo80), num(hi80)}}, {"95", {num(lo95), num(hi95)}}}},
          {"method", method},
          {"analytic", analytic.to_json()},
          {"capacity_bytes", capacity_bytes},
          {"headroom", headroom},
          {"verdict", verdict},
          {"fits", verdict == "fits" || verdict == "tight"}};
}

}  // namespace scaledl
