// BERT (Devlin et al.): learned word + position + token-type embeddings with a
// LayerNorm, post-norm encoder blocks, optional pooler (dense + tanh on [CLS]),
// and either a classifier on the pooled output (BertForSequenceClassification)
// or the masked-LM head: dense + act + LayerNorm + tied decoder with bias
// (BertForMaskedLM). Parameters as Hugging Face builds them.
#include "bench/zoo_blocks.hpp"

namespace scaledl::zoo_detail {
namespace {

class Bert : public ZooModel {
 public:
  explicit Bert(const ModelSpec& m) : ZooModel(m) {
    word = register_module("word", torch::nn::Embedding(m.vocab_size, m.hidden));
    if (m.max_positions > 0)
      position = register_module("position", torch::nn::Embedding(m.max_positions, m.hidden));
    if (m.type_vocab_size > 0)
      token_type = register_module("token_type", torch::nn::Embedding(m.type_vocab_size, m.hidden));
    embed_norm = register_module("embed_norm", Norm(m.hidden, NormKind::LayerNorm, 1e-12));
    enc.build(*this, m);
    if (m.lm_head) {
      lm_transform = register_module("lm_transform", torch::nn::Linear(m.hidden, m.hidden));
      lm_norm = register_module("lm_norm", Norm(m.hidden, NormKind::LayerNorm, 1e-12));
      if (!m.tie_word_embeddings)
        lm_decoder = register_module(
            "lm_decoder", torch::nn::Linear(torch::nn::LinearOptions(m.hidden, m.vocab_size).bias(false)));
      lm_bias = register_parameter("lm_bias", torch::zeros({m.vocab_size}));
    } else if (m.num_labels > 0) {
      classifier = register_module("classifier", torch::nn::Linear(m.hidden, m.num_labels));
    }
  }

  Tensor loss(const ZooBatch& b, NodeProbe* probe) override {
    const auto& m = spec_;
    const int64_t S = b.input.size(1);
    auto x = node(probe, "embed.word", [&] { return word(b.input); });  // [B, S, d]
    Tensor pos, typ;
    if (!position.is_empty()) {
      auto ids = torch::arange(S, b.input.options());
      pos = node(probe, "embed.position", [&] { return position(ids); });  // [S, d]
    }
    if (!token_type.is_empty()) {
      auto ids = torch::zeros_like(b.input);
      typ = node(probe, "embed.token_type", [&] { return token_type(ids); });
    }
    x = node(probe, "embed.add", [&] {
      auto y = x;
      if (pos.defined()) y = y + pos;
      if (typ.defined()) y = y + typ;
      return y;
    });
    x = node(probe, "embed.norm", [&] { return embed_norm(x); });
    x = dropout_node(probe, "embed.dropout", x, m.embed_dropout, is_training());
    x = enc.forward(x, probe);
    if (m.lm_head) {
      // BertOnlyMLMHead: transform (dense), act, LayerNorm, decoder (tied) + vocab bias.
      auto h = node(probe, "head.transform", [&] { return lm_transform(x); });
      h = activation_node(probe, "head.act", h, m.activation);
      h = node(probe, "head.norm", [&] { return lm_norm(h); });
      auto logits = node(probe, "head.lm", [&] {
        auto w = lm_decoder.is_empty() ? word->weight : lm_decoder->weight;
        return torch::nn::functional::linear(h, w, lm_bias);  // [B, S, vocab]
      });
      return loss_node(probe, logits.reshape({-1, m.vocab_size}), b.labels.reshape({-1}));
    }
    Tensor h = x.select(1, 0);  // [CLS] [B, d]
    if (!enc.pooler.is_empty()) {
      h = enc.pool(h, probe);
      h = dropout_node(probe, "head.dropout", h, m.dropout, is_training());
    }
    if (!classifier.is_empty()) {
      auto logits = node(probe, "head.classifier", [&] { return classifier(h); });
      return loss_node(probe, logits, b.labels);
    }
    // Bare encoder: a mean-square "loss" on the [CLS] features keeps backward complete.
    return node(probe, "head.loss", [&] { return h.to(torch::kFloat32).pow(2).mean(); });
  }

  torch::nn::Embedding word{nullptr}, position{nullptr}, token_type{nullptr};
  Norm embed_norm{nullptr}, lm_norm{nullptr};
  EncoderStack enc;
  torch::nn::Linear classifier{nullptr}, lm_transform{nullptr}, lm_decoder{nullptr};
  Tensor lm_bias;
};

}  // namespace

std::shared_ptr<ZooModel> build_bert(const ModelSpec& m, const TrainSettings&) {
  return std::make_shared<Bert>(m);
}

}  // namespace scaledl::zoo_detail
