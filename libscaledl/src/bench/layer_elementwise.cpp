// Binary elementwise ops on two [elements] tensors: Add (residual) and Mul (SwiGLU gate).
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
template <bool IsMul>
class BinaryBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    a_ = leaf({d[0]}, dt, dev);
    b_ = leaf({d[0]}, dt, dev);
    leaves_ = {a_, b_};
  }
  torch::Tensor forward() override { return IsMul ? a_.mul(b_) : a_.add(b_); }

 private:
  torch::Tensor a_, b_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(add, scaledl::LayerType::Add, scaledl::layerbench::BinaryBench<false>);
SCALEDL_REGISTER_LAYER_BENCH(mul, scaledl::LayerType::Mul, scaledl::layerbench::BinaryBench<true>);
