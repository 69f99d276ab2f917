// Embedding lookup: ids [tokens] (uniform in [0, vocab)) into W [vocab, hidden].
// Backward is the dense scatter-add into dW (as nn.Embedding without sparse=True).
#include "bench/layer_util.hpp"

namespace scaledl::layerbench {
namespace {
class EmbeddingBench : public LeafBench {
 public:
  void setup(const std::vector<int64_t>& d, DType dt, const torch::Device& dev) override {
    ids_ = torch::randint(0, d[1], {d[0]}, torch::TensorOptions().dtype(torch::kLong).device(dev));
    w_ = leaf({d[1], d[2]}, dt, dev, 0.02);
    leaves_ = {w_};
  }
  torch::Tensor forward() override { return torch::embedding(w_, ids_); }

 private:
  torch::Tensor ids_, w_;
};
}  // namespace
}  // namespace scaledl::layerbench

SCALEDL_REGISTER_LAYER_BENCH(embedding, scaledl::LayerType::Embedding, scaledl::layerbench::EmbeddingBench);
