// Elementwise activations on [elements]: GELU (erf form), ReLU, SiLU.
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
template <int Kind>  // 0 gelu, 1 relu, 2 silu
class ActivationBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    x_ = leaf({d[0]}, dt, dev);
    leaves_ = {x_};
  }
  torch::Tensor forward() override {
    if (Kind == 0) return torch::gelu(x_);
    if (Kind == 1) return torch::relu(x_);
    return torch::silu(x_);
  }

 private:
  torch::Tensor x_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(gelu, scaledl::LayerType::GELU, scaledl::layerbench::ActivationBench<0>);
SCALEDL_REGISTER_LAYER_BENCH(relu, scaledl::LayerType::ReLU, scaledl::layerbench::ActivationBench<1>);
SCALEDL_REGISTER_LAYER_BENCH(silu, scaledl::LayerType::SiLU, scaledl::layerbench::ActivationBench<2>);
