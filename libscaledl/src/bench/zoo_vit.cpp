// ViT (Dosovitskiy et al.) and DeiT (Touvron et al.): Conv2d patch embedding
// (kernel = stride = patch), a learned CLS token (DeiT: + distillation token),
// learned position embeddings over patches + special tokens, pre-norm
// LayerNorm blocks with GELU FFN, final LayerNorm, and a linear classifier on
// the CLS token (DeiT with teacher: a second classifier on the distillation
// token, logits averaged, as DeiTForImageClassificationWithTeacher).
#include "bench/zoo_blocks.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl::zoo_detail {
namespace {

class ViT : public ZooModel {
 public:
  ViT(const ModelSpec& m, const TrainSettings& s) : ZooModel(m) {
    SCALEDL_CHECK(m.patch_size > 0 && m.image_size > 0 && m.num_channels > 0,
                  "model {}: image_size={}, patch_size={}, num_channels={} must be > 0", m.name, m.image_size,
                  m.patch_size, m.num_channels);
    SCALEDL_CHECK(m.image_size % m.patch_size == 0, "model {}: patch_size={} does not divide image_size={}",
                  m.name, m.patch_size, m.image_size);
    specials = std::max<int64_t>(m.num_special_tokens, 1);
    patch = register_module(
        "patch", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(m.num_channels, m.hidden, m.patch_size).stride(m.patch_size)));
    tokens = register_parameter("tokens", torch::zeros({1, specials, m.hidden}));
    const int64_t grid = m.image_size / m.patch_size;
    position = register_parameter("position", torch::zeros({1, grid * grid + specials, m.hidden}));
    enc.build(*this, m);
    if (m.num_labels > 0) {
      classifier = register_module("classifier", torch::nn::Linear(m.hidden, m.num_labels));
      if (m.dist_head)
        dist_classifier = register_module("dist_classifier", torch::nn::Linear(m.hidden, m.num_labels));
    }
    (void)s;
  }

  Tensor loss(const ZooBatch& b, NodeProbe* probe) override {
    const auto& m = spec_;
    auto x = node(probe, "embed.patch", [&] {
      return patch(b.input).flatten(2).transpose(1, 2);  // [B, N, d]
    });
    const int64_t B = x.size(0), N = x.size(1);
    SCALEDL_CHECK(
        N + specials == position.size(1),
        "model {}: input gives {} patches but the position table has {} rows (image_size must equal "
        "the config's image_size={})",
        m.name, N, position.size(1) - specials, m.image_size);
    auto cls = node(probe, "embed.cls", [&] { return tokens.expand({B, specials, m.hidden}); });  // [B, S, d]
    auto pos = node(probe, "embed.position", [&] { return position * 1.0; });     // [1, N+S, d]
    x = node(probe, "embed.add", [&] { return torch::cat({cls, x}, 1) + pos; });  // concat + add
    x = dropout_node(probe, "embed.dropout", x, m.embed_dropout, is_training());
    x = enc.forward(x, probe);
    Tensor h = x.select(1, 0);  // CLS [B, d]
    h = enc.pool(h, probe);
    if (!classifier.is_empty()) {
      auto logits = node(probe, "head.classifier", [&] { return classifier(h); });
      if (dist_classifier.is_empty()) return loss_node(probe, logits, b.labels);
      // DeiT with teacher: both heads against the labels, one CrossEntropy over [2B, L].
      auto dist = node(probe, "head.dist_classifier", [&] { return dist_classifier(x.select(1, 1)); });
      return loss_node(probe, torch::cat({logits, dist}, 0), torch::cat({b.labels, b.labels}, 0));
    }
    return node(probe, "head.loss", [&] { return h.to(torch::kFloat32).pow(2).mean(); });
  }

  int64_t specials = 1;
  torch::nn::Conv2d patch{nullptr};
  Tensor tokens, position;
  EncoderStack enc;
  torch::nn::Linear classifier{nullptr}, dist_classifier{nullptr};
};

}  // namespace

std::shared_ptr<ZooModel> build_vit(const ModelSpec& m, const TrainSettings& s) {
  return std::make_shared<ViT>(m, s);
}

}  // namespace scaledl::zoo_detail
