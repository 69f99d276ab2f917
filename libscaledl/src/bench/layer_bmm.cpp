// BMM: [batch, m, n] x [batch, n, k] -> [batch, m, k] (n is reduced).
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class BmmBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    a_ = leaf({d[0], d[1], d[2]}, dt, dev);
    b_ = leaf({d[0], d[2], d[3]}, dt, dev);
    leaves_ = {a_, b_};
  }
  torch::Tensor forward() override { return torch::bmm(a_, b_); }

 private:
  torch::Tensor a_, b_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(bmm, scaledl::LayerType::BMM, scaledl::layerbench::BmmBench);
