// T5 (Raffel et al.) and Switch Transformers (T5 with mixture-of-experts FFNs in
// every sparse_step-th block, bench/zoo_moe.cpp): shared token embedding, encoder and decoder stacks of
// pre-norm blocks with RMSNorm (T5LayerNorm), unscaled attention plus a learned
// relative-position bias (an Embedding[buckets, heads] in block 0 of each stack,
// shared by the stack's later blocks), decoder cross-attention, ReLU or gated
// GELU FFN, and the LM head (tied to the shared embedding with a d_model^-0.5
// rescale, as in T5ForConditionalGeneration). As in Hugging Face's T5Attention,
// each stack's mask is folded into its position bias once ("<stack>.0.attn.position_bias":
// the padding mask in the encoder, the causal mask in the decoder, and zeros plus
// the padding mask for the cross-attention, "decoder.0.cross.position_bias"), and
// every self- and cross-attention adds that [B, heads, q, k] tensor to its scores.
#include <cmath>
#include <limits>

#include "bench/zoo_blocks.hpp"

namespace scaledl::zoo_detail {
namespace {

/// T5 relative-position bucket of (key position - query position), HF
/// _relative_position_bucket: half the buckets exact, the rest log-spaced up to max_distance.
Tensor relative_buckets(int64_t q_len, int64_t k_len, bool bidirectional, int64_t num_buckets,
                        int64_t max_distance, torch::Device device) {
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(device);
  auto rel = torch::arange(k_len, opts).unsqueeze(0) - torch::arange(q_len, opts).unsqueeze(1);  // [q, k]
  auto buckets = torch::zeros_like(rel);
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + (rel > 0).to(torch::kInt64) * num_buckets;
    rel = rel.abs();
  } else {
    rel = -torch::min(rel, torch::zeros_like(rel));
  }
  const int64_t max_exact = num_buckets / 2;
  auto is_small = rel < max_exact;
  auto large =
      max_exact + (torch::log(rel.to(torch::kFloat32) / max_exact) /
                   std::log(static_cast<double>(max_distance) / max_exact) * (num_buckets - max_exact))
                      .to(torch::kInt64);
  large = torch::clamp_max(large, num_buckets - 1);
  return buckets + torch::where(is_small, rel, large);
}

class T5 : public ZooModel {
 public:
  explicit T5(const ModelSpec& m) : ZooModel(m) {
    shared = register_module("shared", torch::nn::Embedding(m.vocab_size, m.hidden));
    auto bo = block_options(m);
    bo.self.scale = false;
    bo.cross.scale = false;
    for (int64_t i = 0; i < m.num_layers; ++i) {
      bo.moe = is_sparse_layer(m, false, i) ? &m : nullptr;  // Switch: every sparse_step-th FFN has experts
      enc.push_back(register_module("enc" + std::to_string(i), Block(bo)));
    }
    enc_norm = register_module("enc_norm", Norm(m.hidden, m.norm, bo.norm_eps));
    bo.self.causal = m.rel_attn_buckets <= 0;  // else the causal mask is folded into the position bias
    bo.has_cross = true;
    const int64_t dec_layers = m.num_decoder_layers > 0 ? m.num_decoder_layers : m.num_layers;
    for (int64_t i = 0; i < dec_layers; ++i) {
      bo.moe = is_sparse_layer(m, true, i) ? &m : nullptr;
      dec.push_back(register_module("dec" + std::to_string(i), Block(bo)));
    }
    if (m.final_norm) dec_norm = register_module("dec_norm", Norm(m.hidden, m.norm, bo.norm_eps));
    if (m.rel_attn_buckets > 0) {
      enc_rel = register_module("enc_rel", torch::nn::Embedding(m.rel_attn_buckets, m.num_heads));
      dec_rel = register_module("dec_rel", torch::nn::Embedding(m.rel_attn_buckets, m.num_heads));
    }
    if (!m.tie_word_embeddings)
      lm = register_module("lm",
                           torch::nn::Linear(torch::nn::LinearOptions(m.hidden, m.vocab_size).bias(false)));
  }

  /// Position bias [1, heads, q, k] of a stack (node "<stack>.0.attn.rel_bias").
  Tensor position_bias(NodeProbe* probe, const std::string& stack, torch::nn::Embedding& table, int64_t len,
                       bool bidirectional, torch::Device device) {
    if (table.is_empty()) return Tensor();
    auto buckets = relative_buckets(len, len, bidirectional, spec_.rel_attn_buckets, 128, device);
    return node(probe, stack + ".0.attn.rel_bias", [&] {
      return table(buckets).permute({2, 0, 1}).unsqueeze(0);
    });
  }

  Tensor loss(const ZooBatch& b, NodeProbe* probe) override {
    const auto& m = spec_;
    const bool train = is_training();
    // Encoder over input ids [B, S].
    auto x = node(probe, "embed.word", [&] { return shared(b.input); });
    x = dropout_node(probe, "embed.dropout", x, m.embed_dropout, train);
    const int64_t B = x.size(0), S = x.size(1), H = m.num_heads;
    auto enc_bias = position_bias(probe, "encoder", enc_rel, S, true, x.device());
    if (enc_bias
            .defined())  // + the extended padding mask [B, 1, 1, S]: zeros, no padding in a benchmark batch
      enc_bias = node(probe, "encoder.0.attn.position_bias", [&] {
        return enc_bias + torch::zeros({B, 1, 1, S}, enc_bias.options());
      });
    for (size_t i = 0; i < enc.size(); ++i)
      x = enc[i]->forward(x, Tensor(), "encoder." + std::to_string(i) + ".", probe, enc_bias, Tensor(),
                          Rope{});
    x = node(probe, "encoder.final_norm", [&] { return enc_norm(x); });
    auto enc_out = dropout_node(probe, "encoder.final_dropout", x, m.dropout, train);
    // Decoder over decoder ids [B, T], cross-attending to enc_out.
    auto y = node(probe, "embed.dec_word", [&] { return shared(b.decoder_input); });
    y = dropout_node(probe, "embed.dec_dropout", y, m.embed_dropout, train);
    const int64_t T = y.size(1);
    auto dec_bias = position_bias(probe, "decoder", dec_rel, T, false, y.device());
    if (dec_bias.defined())  // + the causal mask [B, 1, T, T]: -inf above the diagonal
      dec_bias = node(probe, "decoder.0.attn.position_bias", [&] {
        auto future =
            torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(y.device())).triu(1);
        auto causal = torch::zeros({B, 1, T, T}, dec_bias.options())
                          .masked_fill(future, -std::numeric_limits<float>::infinity());
        return dec_bias + causal;
      });
    auto cross_bias = node(probe, "decoder.0.cross.position_bias", [&] {
      auto o = enc_out.options();
      return torch::zeros({1, H, T, S}, o) + torch::zeros({B, 1, 1, S}, o);
    });
    for (size_t i = 0; i < dec.size(); ++i)
      y = dec[i]->forward(y, enc_out, "decoder." + std::to_string(i) + ".", probe, dec_bias, cross_bias,
                          Rope{});
    if (!dec_norm.is_empty()) y = node(probe, "head.norm", [&] { return dec_norm(y); });
    y = dropout_node(probe, "head.dropout", y, m.dropout, train);
    auto logits = node(probe, "head.lm", [&] {
      if (!lm.is_empty()) return lm(y);
      return torch::nn::functional::linear(y * (1.0 / std::sqrt(static_cast<double>(m.hidden))),
                                           shared->weight);
    });
    return loss_node(probe, logits.reshape({-1, m.vocab_size}), b.labels.reshape({-1}));
  }

  torch::nn::Embedding shared{nullptr}, enc_rel{nullptr}, dec_rel{nullptr};
  std::vector<Block> enc, dec;
  Norm enc_norm{nullptr}, dec_norm{nullptr};
  torch::nn::Linear lm{nullptr};
};

}  // namespace

std::shared_ptr<ZooModel> build_t5(const ModelSpec& m, const TrainSettings&) {
  return std::make_shared<T5>(m);
}

}  // namespace scaledl::zoo_detail
