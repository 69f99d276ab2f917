// Linear: y = x W^T + b, x [tokens, d_in], W [d_out, d_in], b [d_out] (bias = 1).
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class LinearBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    x_ = leaf({d[0], d[1]}, dt, dev);
    w_ = leaf({d[2], d[1]}, dt, dev, 0.02);
    leaves_ = {x_, w_};
    if (d[3]) {
      b_ = leaf({d[2]}, dt, dev, 0.02);
      leaves_.push_back(b_);
    }
  }
  torch::Tensor forward() override {
    return b_.defined() ? torch::linear(x_, w_, b_) : torch::linear(x_, w_);
  }

 private:
  torch::Tensor x_, w_, b_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(linear, scaledl::LayerType::Linear, scaledl::layerbench::LinearBench);
