// Attention core as eager Hugging Face models run it (no fused SDPA, which
// LibTorch 1.13 lacks): P = dropout(softmax(Q K^T / sqrt(head_dim)), 0.1); O = P V.
// Q [batch, heads, seq_q, head_dim], K and V [batch, heads, seq_k, head_dim].
#include <cmath>

#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class AttentionBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    q_ = leaf({d[0], d[1], d[2], d[4]}, dt, dev);
    k_ = leaf({d[0], d[1], d[3], d[4]}, dt, dev);
    v_ = leaf({d[0], d[1], d[3], d[4]}, dt, dev);
    scale_ = 1.0 / std::sqrt(static_cast<double>(d[4]));
    leaves_ = {q_, k_, v_};
  }
  torch::Tensor forward() override {
    auto scores = torch::matmul(q_, k_.transpose(-2, -1)).mul(scale_);
    auto p = torch::dropout(torch::softmax(scores, -1), 0.1, /*train=*/true);
    return torch::matmul(p, v_);
  }

 private:
  torch::Tensor q_, k_, v_;
  double scale_ = 1;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(attention, scaledl::LayerType::Attention, scaledl::layerbench::AttentionBench);
