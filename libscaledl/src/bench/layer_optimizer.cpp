// One optimizer step over a flat parameter tensor [params] whose gradient is
// set: kind 0 = SGD (lr 1e-3), 1 = Adam, 2 = AdamW (lr 1e-4, weight decay 0.01),
// the torch::optim implementations (single-tensor, as LibTorch runs them).
// Timed as the "fwd" of the row; there is no backward (layer_info: has_backward = false).
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class OptimizerBench : public LayerBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    p_ = torch::randn({d[0]}, opts(dt, dev)).mul_(0.02).requires_grad_(true);
    p_.mutable_grad() = torch::randn({d[0]}, opts(dt, dev)).mul_(1e-3);
    switch (d[1]) {
      case 0:
        opt_ = std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{p_},
                                                   torch::optim::SGDOptions(1e-3));
        break;
      case 1:
        opt_ = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{p_},
                                                    torch::optim::AdamOptions(1e-4));
        break;
      default:
        opt_ = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{p_},
                                                     torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
    }
  }
  torch::Tensor forward() override {
    opt_->step();
    return {};
  }
  std::vector<torch::Tensor> grad_inputs() const override { return {}; }

 private:
  torch::Tensor p_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(optimizer, scaledl::LayerType::Optimizer, scaledl::layerbench::OptimizerBench);
