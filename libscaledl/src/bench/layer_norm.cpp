// LayerNorm (affine, eps 1e-5) and RMSNorm (Llama/T5: x * rsqrt(mean(x^2) + eps) * w,
// written out because LibTorch 1.13 has no fused rms_norm) over [tokens, hidden].
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class LayerNormBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    hidden_ = d[1];
    x_ = leaf({d[0], d[1]}, dt, dev);
    w_ = torch::ones({d[1]}, opts(dt, dev)).requires_grad_(true);
    b_ = torch::zeros({d[1]}, opts(dt, dev)).requires_grad_(true);
    leaves_ = {x_, w_, b_};
  }
  torch::Tensor forward() override { return torch::layer_norm(x_, {hidden_}, w_, b_, 1e-5); }

 private:
  int64_t hidden_ = 0;
  torch::Tensor x_, w_, b_;
};

class RMSNormBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    x_ = leaf({d[0], d[1]}, dt, dev);
    w_ = torch::ones({d[1]}, opts(dt, dev)).requires_grad_(true);
    leaves_ = {x_, w_};
  }
  torch::Tensor forward() override {
    auto rstd = x_.pow(2).mean(-1, /*keepdim=*/true).add(1e-6).rsqrt();
    return x_.mul(rstd).mul(w_);
  }

 private:
  torch::Tensor x_, w_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(layernorm, scaledl::LayerType::LayerNorm, scaledl::layerbench::LayerNormBench);
SCALEDL_REGISTER_LAYER_BENCH(rmsnorm, scaledl::LayerType::RMSNorm, scaledl::layerbench::RMSNormBench);
