// Softmax cross-entropy (mean reduction) of logits [tokens, classes] against
// integer targets [tokens]; the LM / classifier loss.
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class CrossEntropyBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    logits_ = leaf({d[0], d[1]}, dt, dev);
    target_ = torch::randint(0, d[1], {d[0]}, torch::TensorOptions().dtype(torch::kLong).device(dev));
    leaves_ = {logits_};
  }
  torch::Tensor forward() override { return torch::nn::functional::cross_entropy(logits_, target_); }

 private:
  torch::Tensor logits_, target_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(cross_entropy, scaledl::LayerType::CrossEntropy,
                             scaledl::layerbench::CrossEntropyBench);
