// Softmax over the last dim of [rows, cols].
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class SoftmaxBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    x_ = leaf({d[0], d[1]}, dt, dev);
    leaves_ = {x_};
  }
  torch::Tensor forward() override { return torch::softmax(x_, -1); }

 private:
  torch::Tensor x_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(softmax, scaledl::LayerType::Softmax, scaledl::layerbench::SoftmaxBench);
