// Decoder-only language models: GPT-2 (learned positions, fused qkv, tied LM
// head), GPT-Neo and OPT (learned positions, separate q/k/v; OPT's position
// table has 2 offset rows and an optional embedding projection), and Llama
// (no positions, rotary embeddings applied in the q/k nodes, RMSNorm, SwiGLU,
// grouped-query attention, untied LM head; Mistral, Qwen2 and Gemma are Llamas
// with other biases, ties and Gemma's embedding scale; Mixtral's FFNs are
// top-k mixtures of experts, bench/zoo_moe.cpp; DeepSeek's attention is latent,
// zoo_common.cpp). All pre-norm with a final norm.
#include "bench/zoo_blocks.hpp"

namespace scaledl::zoo_detail {
namespace {

class Decoder : public ZooModel {
 public:
  explicit Decoder(const ModelSpec& m) : ZooModel(m) {
    const int64_t ed = m.embed_dim > 0 ? m.embed_dim : m.hidden;
    word = register_module("word", torch::nn::Embedding(m.vocab_size, ed));
    if (m.max_positions > 0)
      position =
          register_module("position", torch::nn::Embedding(m.max_positions + m.position_offset, m.hidden));
    if (ed != m.hidden) {  // OPT-350m: project_in / project_out, no bias
      proj_in =
          register_module("proj_in", torch::nn::Linear(torch::nn::LinearOptions(ed, m.hidden).bias(false)));
      proj_out =
          register_module("proj_out", torch::nn::Linear(torch::nn::LinearOptions(m.hidden, ed).bias(false)));
    }
    auto bo = block_options(m);
    bo.self.causal = true;
    bo.self.fused_qkv = m.qkv_fused();
    for (int64_t i = 0; i < m.num_layers; ++i) {
      bo.moe = is_sparse_layer(m, false, i) ? &m : nullptr;  // Mixtral: every FFN (encoder_sparse_step 1)
      bo.ffn_dim = bo.moe ? m.ffn_dim : m.dense_ffn();  // DeepSeek's dense first layers: intermediate_size
      blocks.push_back(register_module("block" + std::to_string(i), Block(bo)));
    }
    if (m.final_norm) final_norm = register_module("final_norm", Norm(m.hidden, m.norm, bo.norm_eps));
    if (m.lm_head && !m.tie_word_embeddings)
      lm = register_module("lm", torch::nn::Linear(torch::nn::LinearOptions(ed, m.vocab_size).bias(false)));
    if (!m.lm_head && m.num_labels > 0)
      classifier =
          register_module("classifier", torch::nn::Linear(torch::nn::LinearOptions(m.hidden, m.num_labels)));
    head_dim = m.mla() ? m.qk_rope_dim : bo.self.head_dim;  // the rotary table's width (MLA: the rotary part)
  }

  Tensor loss(const ZooBatch& b, NodeProbe* probe) override {
    const auto& m = spec_;
    const int64_t S = b.input.size(1);
    auto x = node(probe, "embed.word", [&] { return word(b.input); });
    if (m.embed_scale)  // Gemma: x * sqrt(hidden_size), the normaliser in the activations' dtype
      x = node(probe, "embed.scale", [&] { return x * std::sqrt(static_cast<double>(m.hidden)); });
    if (!proj_in.is_empty()) x = node(probe, "embed.project_in", [&] { return proj_in(x); });
    if (!position.is_empty()) {
      auto ids = torch::arange(m.position_offset, m.position_offset + S, b.input.options());
      auto pos = node(probe, "embed.position", [&] { return position(ids); });
      x = node(probe, "embed.add", [&] { return x + pos; });
    }
    x = dropout_node(probe, "embed.dropout", x, m.embed_dropout, is_training());
    Rope rope;
    if (m.family == Family::Llama && head_dim > 0) rope = make_rope(S, head_dim, x.device(), x.scalar_type());
    for (size_t i = 0; i < blocks.size(); ++i)
      x = blocks[i]->forward(x, Tensor(), "decoder." + std::to_string(i) + ".", probe, Tensor(), Tensor(),
                             rope);
    if (!final_norm.is_empty()) x = node(probe, "head.norm", [&] { return final_norm(x); });
    if (m.lm_head) {
      if (!proj_out.is_empty()) x = node(probe, "head.project_out", [&] { return proj_out(x); });
      auto logits = node(probe, "head.lm", [&] {
        return lm.is_empty() ? torch::nn::functional::linear(x, word->weight) : lm(x);  // [B, S, vocab]
      });
      if (m.final_softcap > 0)
        logits = softcap_node(probe, "head.softcap", logits, m.final_softcap);  // Gemma 2
      return loss_node(probe, logits.reshape({-1, m.vocab_size}), b.labels.reshape({-1}));
    }
    if (!classifier.is_empty()) {  // sequence classification on the last token
      auto logits = node(probe, "head.classifier", [&] { return classifier(x.select(1, S - 1)); });
      return loss_node(probe, logits, b.labels);
    }
    return node(probe, "head.loss", [&] { return x.to(torch::kFloat32).pow(2).mean(); });
  }

  torch::nn::Embedding word{nullptr}, position{nullptr};
  torch::nn::Linear proj_in{nullptr}, proj_out{nullptr}, lm{nullptr}, classifier{nullptr};
  std::vector<Block> blocks;
  Norm final_norm{nullptr};
  int64_t head_dim = 0;
};

}  // namespace

std::shared_ptr<ZooModel> build_decoder(const ModelSpec& m, const TrainSettings&) {
  return std::make_shared<Decoder>(m);
}

}  // namespace scaledl::zoo_detail
