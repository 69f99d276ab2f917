// Binary elementwise ops on two [elements] tensors: Add (residual) and Mul (SwiGLU gate);
// Pointwise: one tensor and a scalar, x * c (saves = 0: the attention scale, a mask add, the
// scalar steps of an eager GELU), or tanh(x) (saves = 1: a backward that reads a saved tensor).
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

class PointwiseBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    x_ = leaf({d[0]}, dt, dev);
    saves_ = d[1] != 0;
    leaves_ = {x_};
  }
  torch::Tensor forward() override { return saves_ ? x_.tanh() : x_.mul(0.125); }

 private:
  torch::Tensor x_;
  bool saves_ = false;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(add, scaledl::LayerType::Add, scaledl::layerbench::BinaryBench<false>);
SCALEDL_REGISTER_LAYER_BENCH(mul, scaledl::LayerType::Mul, scaledl::layerbench::BinaryBench<true>);
SCALEDL_REGISTER_LAYER_BENCH(pointwise, scaledl::LayerType::Pointwise, scaledl::layerbench::PointwiseBench);
