// Dropout (p = 0.1, training mode) on [elements].
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class DropoutBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    x_ = leaf({d[0]}, dt, dev);
    leaves_ = {x_};
  }
  torch::Tensor forward() override { return torch::dropout(x_, 0.1, /*train=*/true); }

 private:
  torch::Tensor x_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(dropout, scaledl::LayerType::Dropout, scaledl::layerbench::DropoutBench);
