// ViT/DeiT patch embedding: Conv2d(channels -> hidden, kernel = stride = patch)
// on images [batch, channels, image, image] -> [batch, hidden, image/patch, image/patch].
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class Conv2dPatchBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    patch_ = d[4];
    x_ = leaf({d[0], d[1], d[3], d[3]}, dt, dev);
    w_ = leaf({d[2], d[1], d[4], d[4]}, dt, dev, 0.02);
    b_ = leaf({d[2]}, dt, dev, 0.02);
    leaves_ = {x_, w_, b_};
  }
  torch::Tensor forward() override { return torch::conv2d(x_, w_, b_, {patch_, patch_}); }

 private:
  int64_t patch_ = 1;
  torch::Tensor x_, w_, b_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(conv2d_patch, scaledl::LayerType::Conv2dPatch,
                             scaledl::layerbench::Conv2dPatchBench);
