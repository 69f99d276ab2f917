// Fused attention core as PyTorch's scaled_dot_product_attention runs it (FlashAttention-2 or the
// memory-efficient kernel on CUDA, whichever SDPA picks for the shape and dtype; LibTorch >= 2.0).
// Q [batch, heads, seq_q, head_dim], K [batch, heads, seq_k, head_dim], V [.., seq_k, v_dim]:
// grouped K/V heads are repeated to `heads` before the call, as Hugging Face's SDPA path does
// (repeat_kv), so the kernel reads heads x seq_k rows of K and V. LibTorch 1.13 has no SDPA: there
// the same result is computed by the eager composition (matmul, masked softmax, matmul), which is
// not the fused kernel; rows timed so record the LibTorch version (bench_environment) and should not
// train a fused-attention model.
#include <cmath>
#include <limits>

#include <torch/version.h>

#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class FlashAttentionBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    q_ = leaf({d[0], d[1], d[3], d[5]}, dt, dev);
    k_ = leaf({d[0], d[1], d[4], d[5]}, dt, dev);
    v_ = leaf({d[0], d[1], d[4], d[6]}, dt, dev);
    causal_ = d[7] != 0;
    leaves_ = {q_, k_, v_};
  }
  torch::Tensor forward() override {
#if TORCH_VERSION_MAJOR >= 2
    return at::scaled_dot_product_attention(q_, k_, v_, {}, 0.0, causal_);
#else
    auto scores = torch::matmul(q_, k_.transpose(-2, -1)).div(std::sqrt(static_cast<double>(q_.size(-1))));
    if (causal_) {
      const int64_t sq = q_.size(2), sk = k_.size(2);
      auto mask = torch::ones({sq, sk}, torch::TensorOptions().dtype(torch::kBool).device(q_.device()))
                      .triu(sk - sq + 1);
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    }
    return torch::matmul(torch::softmax(scores, -1), v_);
#endif
  }

 private:
  torch::Tensor q_, k_, v_;
  bool causal_ = false;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(flash_attention, scaledl::LayerType::FlashAttention,
                             scaledl::layerbench::FlashAttentionBench);
