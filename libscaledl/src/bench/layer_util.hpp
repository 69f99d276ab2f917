#pragma once
// Helpers shared by the layer microbenchmarks (src/bench/layer_<type>.cpp).
#include <vector>

#include "scaledl/bench/bench.hpp"

namespace scaledl::layerbench {

/// Tensor options for activations/parameters of dtype d on dev.
inline torch::TensorOptions opts(DType d, const torch::Device& dev) {
  return torch::TensorOptions().dtype(torch_dtype(d)).device(dev);
}

/// A random N(0,1) leaf tensor that records gradients (an input or a parameter).
inline torch::Tensor leaf(torch::IntArrayRef shape, DType d, const torch::Device& dev, double scale = 1.0) {
  auto t = torch::randn(shape, opts(d, dev));
  if (scale != 1.0) t.mul_(scale);
  return t.requires_grad_(true);
}

/// Base for layers whose gradients are taken w.r.t. a fixed list of leaves.
class LeafBench : public LayerBench {
 public:
  std::vector<torch::Tensor> grad_inputs() const override { return leaves_; }

 protected:
  std::vector<torch::Tensor> leaves_;
};

}  // namespace scaledl::layerbench
