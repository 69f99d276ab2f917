// build_layer_graph: structure, totals and invariants for every family.
#include <gtest/gtest.h>

#include <map>
#include <queue>
#include <set>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/layer_graph.hpp"

using namespace scaledl;

namespace {
std::string model_path(const std::string& name) {
  return std::string(SCALEDL_SOURCE_DIR) + "/models/" + name + ".json";
}

TrainSettings small_settings(int64_t batch = 2, int64_t seq = 16) {
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  return s;
}

const LayerNode& node(const LayerGraph& g, const std::string& name) {
  int id = g.find(name);
  if (id < 0) throw Error("no node " + name);
  return g.nodes[id];
}

const char* kAllModels[] = {"bert-base",
                            "bert-large",
                            "gpt2",
                            "gpt2-medium",
                            "gpt2-large",
                            "t5-small",
                            "t5-base",
                            "vit-base",
                            "vit-large",
                            "deit-tiny",
                            "deit-small",
                            "deit-base",
                            "llama-style",
                            "opt-125m",
                            "gpt-neo-125m",
                            "switch-base-8",
                            "mistral-7b",
                            "qwen2-0.5b",
                            "gemma-2b",
                            "mixtral-8x7b",
                            "qwen3-0.6b",
                            "phi3-mini",
                            "qwen3-30b-a3b",
                            "gemma2-2b",
                            "gemma3-1b",
                            "pythia-160m",
                            "qwen1.5-moe-a2.7b",
                            "deepseek-v2-lite",
                            "deepseek-v2",
                            "deepseek-v3",
                            "gpt-oss-20b",
                            "gpt-oss-120b",
                            "minitron-4b",
                            "smollm3-3b",
                            "glm4-9b",
                            "glm4.5-air",
                            "olmo2-7b",
                            "granite-3.3-8b",
                            "exaone4-32b",
                            "llama4-scout-17b-16e",
                            "gemma3-4b",
                            "mistral-small-3.1-24b",
                            "seed-oss-36b",
                            "ernie4.5-0.3b"};
}  // namespace

TEST(LayerTypes, LinearFlopsAreScaleDLEq9) {
  // FLOPs_Linear = 2*b*d_in*d_out + b*d_out (ScaleDL eq. 9), params = d_in*d_out + d_out.
  for (auto [b, din, dout] :
       {std::tuple<int64_t, int64_t, int64_t>{128, 768, 3072}, {1, 1, 1}, {4096, 1024, 50257}}) {
    LayerCost c = layer_cost(LayerType::Linear, {b, din, dout, 1}, DType::FP32);
    EXPECT_DOUBLE_EQ(c.flops_fwd, 2.0 * b * din * dout + 1.0 * b * dout) << b << "x" << din << "x" << dout;
    EXPECT_DOUBLE_EQ(c.params, 1.0 * din * dout + dout);
    LayerCost nb = layer_cost(LayerType::Linear, {b, din, dout, 0}, DType::FP16);
    EXPECT_DOUBLE_EQ(nb.flops_fwd, 2.0 * b * din * dout);
    EXPECT_DOUBLE_EQ(nb.out_bytes, 2.0 * b * dout);
  }
}

TEST(LayerGraph, EveryFamilyIsAcyclicReachableAndCountsParams) {
  for (const char* name : kAllModels) {
    SCOPED_TRACE(name);
    ModelSpec m = load_model_config(model_path(name));
    LayerGraph g = build_layer_graph(m, small_settings());
    const int n = static_cast<int>(g.nodes.size());
    // total params of the graph == the analytic HF count (independent code paths).
    EXPECT_EQ(static_cast<int64_t>(g.total_params()), parameter_count(m));
    // acyclic: ids are a topological order.
    std::vector<int> indeg(n, 0), outdeg(n, 0);
    for (const auto& e : g.edges) {
      ASSERT_LT(e.src, e.dst) << g.nodes[e.src].name << " -> " << g.nodes[e.dst].name;
      ASSERT_GE(e.src, 0);
      ASSERT_LT(e.dst, n);
      EXPECT_GE(e.bytes, 0);
      ++indeg[e.dst];
      ++outdeg[e.src];
    }
    // sources are only input layers (embeddings, patch conv) and sinks only the end of the iteration.
    std::queue<int> q;
    std::vector<bool> seen(n, false);
    for (int i = 0; i < n; ++i) {
      if (indeg[i] == 0) {
        EXPECT_EQ(g.nodes[i].dir, Direction::Forward) << g.nodes[i].name;
        EXPECT_TRUE(g.nodes[i].type == LayerType::Embedding || g.nodes[i].type == LayerType::Conv2dPatch)
            << g.nodes[i].name;
        q.push(i);
        seen[i] = true;
      }
      if (outdeg[i] == 0) {
        EXPECT_EQ(g.nodes[i].name, "optim.step");
      }
    }
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (const auto& e : g.edges)
        if (e.src == u && !seen[e.dst]) seen[e.dst] = true, q.push(e.dst);
    }
    for (int i = 0; i < n; ++i) EXPECT_TRUE(seen[i]) << g.nodes[i].name << " unreachable";
    // every forward node has exactly one backward peer, named "<name>.bwd", with the same type/dims.
    int fwd = 0, bwd = 0, upd = 0;
    std::set<std::string> names;
    for (const auto& nd : g.nodes) {
      EXPECT_TRUE(names.insert(nd.name).second) << "duplicate " << nd.name;
      if (nd.dir == Direction::Forward) {
        ++fwd;
        ASSERT_GE(nd.peer, 0) << nd.name;
        const LayerNode& p = g.nodes[nd.peer];
        EXPECT_EQ(p.name, nd.name + ".bwd");
        EXPECT_EQ(p.peer, nd.id);
        EXPECT_EQ(p.dims, nd.dims);
        EXPECT_EQ(p.dir, Direction::Backward);
      } else if (nd.dir == Direction::Backward) {
        ++bwd;
      } else {
        ++upd;
      }
    }
    EXPECT_EQ(fwd, bwd);
    EXPECT_EQ(upd, 1);
    EXPECT_EQ(node(g, "optim.step").dims[0], parameter_count(m));
    // exactly one loss, and it is the last forward node.
    EXPECT_EQ(g.nodes[fwd - 1].name, "head.loss");
    EXPECT_GT(g.total_flops_bwd(), g.total_flops_fwd());
  }
}

TEST(LayerGraph, NeusightConfigsBuild) {
  // Real configs with odd keys (OPT with word_embed_proj_dim != hidden, GPT-3 sizes as gpt2, Llama-2).
  for (const char* f :
       {"bert", "bert_large", "gpt2_med", "gpt2_xl", "gpt3_xl", "llama2_7b", "opt", "opt_13"}) {
    SCOPED_TRACE(f);
    ModelSpec m =
        load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/test/ir/data/neusight/" + f + ".json");
    LayerGraph g = build_layer_graph(m, small_settings(1, 8));
    EXPECT_EQ(static_cast<int64_t>(g.total_params()), parameter_count(m));
  }
  ModelSpec opt = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/test/ir/data/neusight/opt.json");
  LayerGraph g = build_layer_graph(opt, small_settings(1, 8));
  EXPECT_EQ(node(g, "embed.project_in").dims, (std::vector<int64_t>{8, 2048, 512, 0}));
  EXPECT_EQ(node(g, "head.project_out").dims, (std::vector<int64_t>{8, 512, 2048, 0}));
  EXPECT_EQ(node(g, "embed.position").dims, (std::vector<int64_t>{8, 2050, 512}));  // OPT offset 2
}

TEST(LayerGraph, GraphTotalsAreSumsOfLayerCosts) {
  ModelSpec m = load_model_config(model_path("gpt2"));
  TrainSettings s = small_settings(4, 128);
  LayerGraph g = build_layer_graph(m, s);
  double f = 0, b = 0;
  for (const auto& n : g.nodes) {
    LayerCost c = layer_cost(n.type, n.dims, s.dtype);
    EXPECT_DOUBLE_EQ(c.flops_fwd, n.cost.flops_fwd) << n.name;  // costs come from layer_cost
    if (n.dir == Direction::Forward) f += c.flops_fwd;
    if (n.dir == Direction::Backward) b += c.flops_bwd;
  }
  EXPECT_DOUBLE_EQ(g.total_flops_fwd(), f);
  EXPECT_DOUBLE_EQ(g.total_flops_bwd(), b);
  // Forward FLOP is dominated by the 2*P*tokens matmul rule: within 15% of 2 * params * tokens
  // (+ attention 4*L*s^2*h + LM head sharing the embedding).
  const double tokens = 4.0 * 128, L = 12, h = 768, V = 50257;
  double approx = 2 * tokens * (12 * h * h * L) + 4 * L * 4 * 128.0 * 128 * h + 2 * tokens * h * V;
  EXPECT_NEAR(g.total_flops_fwd() / approx, 1.0, 0.15);
}

// The elementwise kernels that eager PyTorch runs on the attention scores, and the eight
// kernels of Hugging Face's gelu_new, are nodes of their own (issue #13: the NeuSight
// per-node traces time them; a fused GELU and a bare BMM miss 3-20 % of an iteration).
TEST(LayerGraph, EagerKernelsOfTheScoresAndOfGeluNew) {
  TrainSettings s = small_settings(2, 32);
  ModelSpec gpt2 = load_model_config(model_path("gpt2"));  // activation_function gelu_new
  ASSERT_EQ(gpt2.activation, Activation::GELUNew);
  LayerGraph g = build_layer_graph(gpt2, s);
  const int64_t N = 2 * 12 * 32 * 32;
  for (const char* k : {"scale", "mask"}) {
    const auto& n = node(g, std::string("decoder.0.attn.") + k);
    EXPECT_EQ(n.type, LayerType::Pointwise) << k;
    EXPECT_EQ(n.dims, (std::vector<int64_t>{N, 0})) << k;
  }
  EXPECT_LT(g.find("decoder.0.attn.bias"), 0);
  auto producers = [](const LayerGraph& gr, const std::string& name) {
    const int id = node(gr, name).id;
    std::vector<std::string> src;
    for (const auto& e : gr.edges)
      if (e.dst == id && !e.backward && !e.saved) src.push_back(gr.nodes[e.src].name);
    return src;
  };
  auto producer_of = [&](const std::string& name) { return producers(g, name); };
  EXPECT_EQ(producer_of("decoder.0.attn.scale"), std::vector<std::string>{"decoder.0.attn.qk"});
  EXPECT_EQ(producer_of("decoder.0.attn.softmax"), std::vector<std::string>{"decoder.0.attn.mask"});
  // gelu_new: half, pow, mul_c, add_x, mul_k, tanh, add_1 and the product, which keeps the name.
  const int64_t F = 2 * 32 * 3072;
  const std::vector<std::pair<std::string, LayerType>> chain = {
      {".half", LayerType::Pointwise},  {".pow", LayerType::Pointwise},
      {".mul_c", LayerType::Pointwise}, {".add_x", LayerType::Add},
      {".mul_k", LayerType::Pointwise}, {".tanh", LayerType::Pointwise},
      {".add_1", LayerType::Pointwise}, {"", LayerType::Mul}};
  for (const auto& [suffix, type] : chain) {
    const auto& n = node(g, "decoder.0.ffn.act" + suffix);
    EXPECT_EQ(n.type, type) << suffix;
    EXPECT_EQ(n.dims[0], F) << suffix;
  }
  EXPECT_EQ(node(g, "decoder.0.ffn.act.pow").dims[1], 1);  // its backward reads x
  EXPECT_EQ(node(g, "decoder.0.ffn.act.mul_c").dims[1], 0);
  EXPECT_EQ(producer_of("decoder.0.ffn.down"), std::vector<std::string>{"decoder.0.ffn.act"});
  // A model stored before gelu_new was told apart ("gelu_tanh") keeps its one fused node.
  ModelSpec fused = gpt2;
  fused.activation = Activation::GELUTanh;
  LayerGraph gf = build_layer_graph(fused, s);
  EXPECT_EQ(node(gf, "decoder.0.ffn.act").type, LayerType::GELU);
  EXPECT_LT(gf.find("decoder.0.ffn.act.tanh"), 0);
  EXPECT_EQ(g.nodes.size(), gf.nodes.size() + 2 * 7 * 12);  // 7 more kernels per block, forward and backward
  // BERT: scale and its additive padding mask; T5: no scale and no mask kernel per layer: every
  // self- and cross-attention adds its stack's position bias, into which Hugging Face folded the
  // mask once (a full [b, H, q, k] tensor: an Add of two full inputs).
  LayerGraph gb = build_layer_graph(load_model_config(model_path("bert-base")), s);
  EXPECT_EQ(node(gb, "encoder.0.attn.mask").type, LayerType::Pointwise);
  EXPECT_EQ(producers(gb, "encoder.0.attn.softmax"), std::vector<std::string>{"encoder.0.attn.mask"});
  EXPECT_EQ(producers(gb, "encoder.0.attn.mask"), std::vector<std::string>{"encoder.0.attn.scale"});
  LayerGraph gt = build_layer_graph(load_model_config(model_path("t5-small")), s);
  EXPECT_LT(gt.find("encoder.0.attn.scale"), 0);
  EXPECT_GE(gt.find("encoder.0.attn.bias"), 0);
  EXPECT_LT(gt.find("encoder.0.attn.mask"), 0);
  EXPECT_LT(gt.find("decoder.0.attn.mask"), 0);
  EXPECT_LT(gt.find("decoder.0.cross.mask"), 0);
  {
    const int64_t H = 8, S = 32, Nt = 2 * H * S * S;  // t5-small: 8 heads; tgt_len = seq_len here
    for (const char* a : {"encoder.3.attn.bias", "decoder.0.attn.bias", "decoder.5.cross.bias"}) {
      EXPECT_EQ(node(gt, a).type, LayerType::Add) << a;
      EXPECT_EQ(node(gt, a).dims, (std::vector<int64_t>{Nt})) << a;
    }
    EXPECT_EQ(producers(gt, "decoder.2.cross.bias"),
              (std::vector<std::string>{"decoder.2.cross.qk", "decoder.0.cross.position_bias"}));
    EXPECT_EQ(producers(gt, "encoder.1.attn.bias"),
              (std::vector<std::string>{"encoder.1.attn.qk", "encoder.0.attn.position_bias"}));
    EXPECT_EQ(producers(gt, "decoder.0.attn.position_bias"),
              std::vector<std::string>{"decoder.0.attn.rel_bias"});
    EXPECT_EQ(producers(gt, "decoder.0.cross.position_bias"), std::vector<std::string>{"embed.word"});
    for (const char* pb :
         {"encoder.0.attn.position_bias", "decoder.0.attn.position_bias", "decoder.0.cross.position_bias"}) {
      EXPECT_EQ(node(gt, pb).type, LayerType::Pointwise) << pb;
      EXPECT_EQ(node(gt, pb).dims, (std::vector<int64_t>{Nt, 0})) << pb;
    }
    EXPECT_LT(gt.find("encoder.1.attn.position_bias"), 0);  // once per stack
  }
  // A framework with fused kernels (Megatron-LM: scale-mask-softmax, bias-GELU) has none of them;
  // the setting survives its JSON and is written only when set.
  TrainSettings fk = s;
  fk.fused_kernels = true;
  LayerGraph gk = build_layer_graph(gpt2, fk);
  EXPECT_LT(gk.find("decoder.0.attn.scale"), 0);
  EXPECT_LT(gk.find("decoder.0.attn.mask"), 0);
  EXPECT_EQ(node(gk, "decoder.0.ffn.act").type, LayerType::GELU);
  EXPECT_EQ(producers(gk, "decoder.0.attn.softmax"), std::vector<std::string>{"decoder.0.attn.qk"});
  EXPECT_TRUE(parse_train_settings(fk.to_json()).fused_kernels);
  EXPECT_FALSE(s.to_json().contains("fused_kernels"));
  // Inference keeps them (no-grad runs the same kernels), without the backward.
  TrainSettings inf = s;
  set_run_mode(inf, RunMode::Inference);
  EXPECT_GE(build_layer_graph(gpt2, inf).find("decoder.0.attn.mask"), 0);
}

TEST(LayerGraph, Gpt2BlockStructure) {
  ModelSpec m = load_model_config(model_path("gpt2"));
  TrainSettings s = small_settings(2, 32);
  LayerGraph g = build_layer_graph(m, s);
  const auto& qkv = node(g, "decoder.0.attn.qkv");
  EXPECT_EQ(qkv.type, LayerType::Linear);
  EXPECT_EQ(qkv.dims, (std::vector<int64_t>{64, 768, 2304, 1}));
  EXPECT_DOUBLE_EQ(qkv.cost.flops_fwd, 2.0 * 64 * 768 * 2304 + 64 * 2304);  // eq. 9
  const auto& qk = node(g, "decoder.11.attn.qk");
  EXPECT_EQ(qk.type, LayerType::BMM);
  EXPECT_EQ(qk.dims, (std::vector<int64_t>{2 * 12, 32, 64, 32}));  // batch = b * heads
  EXPECT_EQ(node(g, "decoder.0.attn.softmax").dims, (std::vector<int64_t>{2 * 12 * 32, 32}));
  EXPECT_EQ(node(g, "decoder.0.attn.dropout").type, LayerType::Dropout);
  EXPECT_EQ(node(g, "decoder.0.attn.av").dims, (std::vector<int64_t>{24, 32, 32, 64}));
  EXPECT_EQ(node(g, "head.lm").cost.params, 0);  // tied to embed.word
  EXPECT_EQ(node(g, "head.loss").dims, (std::vector<int64_t>{64, 50257}));
  EXPECT_EQ(node(g, "decoder.3.ffn.act").block, 3);
  EXPECT_LT(g.find("decoder.0.attn.q"), 0);  // fused
  // the edge qkv -> qk carries q as [b, heads, s, head_dim].
  // the edges qkv -> qk carry q as [b, heads, s, head_dim] and k^T as [b, heads, head_dim, s].
  std::set<std::vector<int64_t>> shapes;
  for (const auto& e : g.edges)
    if (e.src == qkv.id && g.nodes[e.dst].name == "decoder.0.attn.qk" && !e.backward) {
      shapes.insert(e.shape);
      EXPECT_DOUBLE_EQ(e.bytes, 2.0 * 12 * 32 * 64 * 4);
    }
  EXPECT_EQ(shapes, (std::set<std::vector<int64_t>>{{2, 12, 32, 64}, {2, 12, 64, 32}}));
  // gradients flow back along every forward edge.
  int fwd_edges = 0, grad_edges = 0;
  for (const auto& e : g.edges) {
    if (e.saved) continue;
    if (g.nodes[e.src].dir == Direction::Forward)
      ++fwd_edges;
    else if (g.nodes[e.dst].dir == Direction::Backward)
      ++grad_edges;
  }
  EXPECT_EQ(fwd_edges, grad_edges);
}

TEST(LayerGraph, DropoutOnlyWherePositive) {
  ModelSpec vit = load_model_config(model_path("vit-base"));  // all dropout 0.0
  LayerGraph g = build_layer_graph(vit, small_settings());
  for (const auto& n : g.nodes) EXPECT_NE(n.type, LayerType::Dropout) << n.name;
  ModelSpec llama = load_model_config(model_path("llama-style"));
  LayerGraph gl = build_layer_graph(llama, small_settings());
  for (const auto& n : gl.nodes) EXPECT_NE(n.type, LayerType::Dropout) << n.name;
  ModelSpec bert = load_model_config(model_path("bert-base"));
  LayerGraph gb = build_layer_graph(bert, small_settings());
  EXPECT_GE(gb.find("encoder.0.attn.dropout"), 0);
  EXPECT_GE(gb.find("encoder.0.ffn.dropout"), 0);
  EXPECT_GE(gb.find("embed.dropout"), 0);
}

TEST(LayerGraph, LlamaGqaAndSwiGlu) {
  ModelSpec m = load_model_config(model_path("llama-style"));
  LayerGraph g = build_layer_graph(m, small_settings(1, 64));
  EXPECT_EQ(node(g, "decoder.0.attn.q").dims, (std::vector<int64_t>{64, 2048, 2048, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.k").dims,
            (std::vector<int64_t>{64, 2048, 4 * 64, 0}));  // kv_heads*head_dim
  EXPECT_EQ(node(g, "decoder.0.attn.v").dims, (std::vector<int64_t>{64, 2048, 256, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.qk").dims[0], 32);
  EXPECT_EQ(node(g, "decoder.0.attn.norm").type, LayerType::RMSNorm);
  EXPECT_EQ(node(g, "decoder.0.ffn.gate").dims, (std::vector<int64_t>{64, 2048, 5632, 0}));
  EXPECT_EQ(node(g, "decoder.0.ffn.act").type, LayerType::SiLU);
  EXPECT_EQ(node(g, "decoder.0.ffn.mul").type, LayerType::Mul);
  EXPECT_EQ(node(g, "head.lm").cost.params, 32000.0 * 2048);  // untied
  EXPECT_LT(g.find("embed.position"), 0);                     // RoPE: no table
}

TEST(LayerGraph, BertPostNormAndMlmHead) {
  ModelSpec m = load_model_config(model_path("bert-base"));
  LayerGraph g = build_layer_graph(m, small_settings(2, 128));
  // post-norm: attn.norm reads attn.residual.
  int res = g.find("encoder.0.attn.residual"), nrm = g.find("encoder.0.attn.norm");
  ASSERT_GE(res, 0);
  ASSERT_GE(nrm, 0);
  EXPECT_LT(res, nrm);
  EXPECT_EQ(node(g, "embed.token_type").dims, (std::vector<int64_t>{256, 2, 768}));
  EXPECT_EQ(node(g, "head.lm").cost.params, 30522);  // decoder bias only; weight tied
  EXPECT_EQ(node(g, "head.loss").dims, (std::vector<int64_t>{256, 30522}));
  // classifier variant: pooler on [CLS] over batch rows.
  m.pooler = true;
  m.lm_head = false;
  m.num_labels = 2;
  LayerGraph c = build_layer_graph(m, small_settings(2, 128));
  EXPECT_EQ(node(c, "head.pooler").dims, (std::vector<int64_t>{2, 768, 768, 1}));
  EXPECT_EQ(node(c, "head.loss").dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(static_cast<int64_t>(c.total_params()), 109482240 + 1538);
}

TEST(LayerGraph, T5EncoderDecoder) {
  ModelSpec m = load_model_config(model_path("t5-small"));
  TrainSettings s = small_settings(2, 64);
  s.tgt_len = 16;
  LayerGraph g = build_layer_graph(m, s);
  const auto& cq = node(g, "decoder.0.cross.q");
  const auto& ck = node(g, "decoder.0.cross.k");
  EXPECT_EQ(cq.dims, (std::vector<int64_t>{2 * 16, 512, 512, 0}));
  EXPECT_EQ(ck.dims, (std::vector<int64_t>{2 * 64, 512, 512, 0}));  // keys from the encoder output
  EXPECT_EQ(node(g, "decoder.0.cross.qk").dims, (std::vector<int64_t>{16, 16, 64, 64}));
  EXPECT_EQ(node(g, "encoder.0.attn.rel_bias").dims, (std::vector<int64_t>{64 * 64, 32, 8}));
  EXPECT_EQ(node(g, "decoder.5.ffn.act").block, 6 + 5);
  EXPECT_EQ(node(g, "head.loss").dims, (std::vector<int64_t>{32, 32128}));
  // the encoder output feeds every decoder layer's cross k/v.
  int enc_out = g.find("encoder.final_dropout");
  int fanout = 0;
  for (const auto& e : g.edges)
    if (e.src == enc_out && !e.saved) ++fanout;
  EXPECT_EQ(fanout, 2 * 6);
}

TEST(LayerGraph, SwitchMixtureOfExperts) {
  ModelSpec m = load_model_config(model_path("switch-base-8"));
  TrainSettings s = small_settings(4, 256);
  s.tgt_len = 32;
  LayerGraph g = build_layer_graph(m, s);
  EXPECT_EQ(static_cast<int64_t>(g.total_params()), parameter_count(m));
  // Dense FFN in even layers, experts in odd ones.
  EXPECT_GE(g.find("encoder.0.ffn.up"), 0);
  EXPECT_LT(g.find("encoder.0.ffn.router"), 0);
  EXPECT_LT(g.find("encoder.1.ffn.up"), 0);
  const int64_t E = 8, h = 768, f = 3072, C = 4 * 64;  // capacity 64 tokens per expert and sample
  EXPECT_EQ(node(g, "encoder.1.ffn.router").dims, (std::vector<int64_t>{4 * 256, h, E, 0}));
  EXPECT_EQ(node(g, "encoder.1.ffn.router.softmax").dims, (std::vector<int64_t>{4 * 256, E}));
  const auto& up = node(g, "encoder.1.ffn.expert.up");
  EXPECT_EQ(up.type, LayerType::BMM);
  EXPECT_EQ(up.dims, (std::vector<int64_t>{E, C, h, f}));
  EXPECT_EQ(up.cost.params, E * h * f);  // the experts' weights are trained
  EXPECT_EQ(node(g, "encoder.1.ffn.expert.down").dims, (std::vector<int64_t>{E, C, f, h}));
  // The decoder's 32 tokens per sample fit within the capacity of 64: C = batch x 32.
  EXPECT_EQ(node(g, "decoder.1.ffn.expert.up").dims, (std::vector<int64_t>{E, 4 * 32, h, f}));
  EXPECT_EQ(node(g, "encoder.1.ffn.combine").out_shape, (std::vector<int64_t>{4, 256, h}));
  // Expert FLOPs: E x C tokens through the FFN, not all tokens through every expert.
  EXPECT_DOUBLE_EQ(up.cost.flops_fwd, 2.0 * E * C * h * f);
  // The expert weights get gradients into the optimizer step.
  int step = g.find("optim.step");
  int up_bwd = g.find("encoder.1.ffn.expert.up.bwd");
  bool edge = false;
  for (const auto& e : g.edges)
    edge = edge || (e.src == up_bwd && e.dst == step && e.bytes == E * h * f * 4.0);
  EXPECT_TRUE(edge);
  // Inference: the experts run, no dropout inside them.
  set_run_mode(s, RunMode::Inference);
  LayerGraph inf = build_layer_graph(m, s);
  EXPECT_GE(inf.find("encoder.1.ffn.expert.up"), 0);
  EXPECT_LT(inf.find("encoder.1.ffn.expert.act_dropout"), 0);
}

TEST(LayerGraph, MixtralRoutesEachTokenToTwoGatedExperts) {
  ModelSpec m = load_model_config(model_path("mixtral-8x7b"));
  LayerGraph g = build_layer_graph(m, small_settings(2, 64));
  EXPECT_EQ(static_cast<int64_t>(g.total_params()), parameter_count(m));
  const int64_t E = 8, h = 4096, f = 14336, t = 2 * 64;
  const int64_t C = 2 * 16;  // the mean load of an expert: 2 choices x 64 tokens / 8 experts, per sample
  EXPECT_LT(g.find("decoder.0.ffn.up"), 0);  // every FFN is sparse
  EXPECT_EQ(node(g, "decoder.31.ffn.router").dims, (std::vector<int64_t>{t, h, E, 0}));
  for (const char* n : {"decoder.0.ffn.expert.gate", "decoder.0.ffn.expert.up"}) {
    EXPECT_EQ(node(g, n).type, LayerType::BMM) << n;
    EXPECT_EQ(node(g, n).dims, (std::vector<int64_t>{E, C, h, f})) << n;
    EXPECT_EQ(node(g, n).cost.params, E * h * f) << n;
  }
  EXPECT_EQ(node(g, "decoder.0.ffn.expert.mul").dims, (std::vector<int64_t>{E * C * f}));
  EXPECT_EQ(node(g, "decoder.0.ffn.expert.down").dims, (std::vector<int64_t>{E, C, f, h}));
  // Each token passes through two experts: the experts' FLOPs are those of a dense FFN twice.
  double expert_flops = 0;
  for (const char* n : {"gate", "up", "down"})
    expert_flops += node(g, std::string("decoder.0.ffn.expert.") + n).cost.flops_fwd;
  EXPECT_DOUBLE_EQ(expert_flops, 2.0 * 3 * 2.0 * t * h * f);
  // The combine sums the two weighted outputs of every token.
  EXPECT_EQ(node(g, "decoder.0.ffn.combine").dims, (std::vector<int64_t>{2 * t * h}));
  EXPECT_EQ(node(g, "decoder.0.ffn.combine").out_shape, (std::vector<int64_t>{2, 64, h}));
  // Qwen3-30B-A3B: 128 experts of 768, 8 per token: C = 2 x ceil(8 x 64 / 128) = 8 slots per expert.
  LayerGraph q = build_layer_graph(load_model_config(model_path("qwen3-30b-a3b")), small_settings(2, 64));
  EXPECT_EQ(node(q, "decoder.47.ffn.expert.up").dims, (std::vector<int64_t>{128, 8, 2048, 768}));
  EXPECT_EQ(node(q, "decoder.0.ffn.combine").dims, (std::vector<int64_t>{8 * t * 2048}));
  EXPECT_GE(q.find("decoder.0.attn.k_norm"), 0);
  // Qwen1.5-MoE: the shared expert (a gated FFN of 5,632) and its sigmoid gate beside the routed ones.
  LayerGraph q2 =
      build_layer_graph(load_model_config(model_path("qwen1.5-moe-a2.7b")), small_settings(2, 64));
  EXPECT_EQ(static_cast<int64_t>(q2.total_params()),
            parameter_count(load_model_config(model_path("qwen1.5-moe-a2.7b"))));
  EXPECT_EQ(node(q2, "decoder.0.ffn.shared.gate").dims, (std::vector<int64_t>{t, 2048, 5632, 0}));
  EXPECT_EQ(node(q2, "decoder.0.ffn.shared.down").dims, (std::vector<int64_t>{t, 5632, 2048, 0}));
  EXPECT_EQ(node(q2, "decoder.0.ffn.shared.router").dims, (std::vector<int64_t>{t, 2048, 1, 0}));
  EXPECT_EQ(node(q2, "decoder.0.ffn.shared.sigmoid").type, LayerType::Pointwise);
  EXPECT_EQ(node(q2, "decoder.0.ffn.shared.add").dims, (std::vector<int64_t>{t * 2048}));
  EXPECT_LT(g.find("decoder.0.ffn.shared.add"), 0);  // Mixtral has none
}

TEST(LayerGraph, Qwen2BiasesAndGemmaEmbeddingScale) {
  LayerGraph q = build_layer_graph(load_model_config(model_path("qwen2-0.5b")), small_settings(2, 16));
  EXPECT_EQ(node(q, "decoder.0.attn.q").dims, (std::vector<int64_t>{32, 896, 896, 1}));
  EXPECT_EQ(node(q, "decoder.0.attn.k").dims, (std::vector<int64_t>{32, 896, 128, 1}));  // 2 kv heads of 64
  EXPECT_EQ(node(q, "decoder.0.attn.o").dims, (std::vector<int64_t>{32, 896, 896, 0}));
  EXPECT_EQ(node(q, "decoder.0.ffn.gate").dims, (std::vector<int64_t>{32, 896, 4864, 0}));
  EXPECT_LT(q.find("embed.scale"), 0);
  EXPECT_LT(q.find("decoder.0.attn.q_norm"), 0);
  // Qwen3: an RMSNorm over each head of q (16 heads of 128) and k (8 heads), before the scores.
  LayerGraph q3 = build_layer_graph(load_model_config(model_path("qwen3-0.6b")), small_settings(2, 16));
  EXPECT_EQ(node(q3, "decoder.0.attn.q").dims, (std::vector<int64_t>{32, 1024, 2048, 0}));
  EXPECT_EQ(node(q3, "decoder.0.attn.q_norm").type, LayerType::RMSNorm);
  EXPECT_EQ(node(q3, "decoder.0.attn.q_norm").dims, (std::vector<int64_t>{32 * 16, 128}));
  EXPECT_EQ(node(q3, "decoder.0.attn.k_norm").dims, (std::vector<int64_t>{32 * 8, 128}));
  EXPECT_EQ(node(q3, "decoder.0.attn.q_norm").cost.params, 128);
  // Gemma 2: a norm after attention and after the FFN, soft-capped scores and logits (three kernels each).
  LayerGraph g2 = build_layer_graph(load_model_config(model_path("gemma2-2b")), small_settings(2, 16));
  EXPECT_EQ(node(g2, "decoder.0.attn.post_norm").type, LayerType::RMSNorm);
  EXPECT_EQ(node(g2, "decoder.0.ffn.post_norm").dims, (std::vector<int64_t>{32, 2304}));
  const int64_t N = 2 * 8 * 16 * 16;
  EXPECT_EQ(node(g2, "decoder.0.attn.softcap_div").dims, (std::vector<int64_t>{N, 0}));
  EXPECT_EQ(node(g2, "decoder.0.attn.softcap_tanh").dims, (std::vector<int64_t>{N, 1}));
  EXPECT_EQ(node(g2, "decoder.0.attn.softcap_mul").dims, (std::vector<int64_t>{N, 0}));
  EXPECT_EQ(node(g2, "head.softcap_tanh").dims, (std::vector<int64_t>{32 * 256000, 1}));
  TrainSettings inf = small_settings(2, 16);
  set_run_mode(inf, RunMode::Inference);  // the capped logits are the output
  EXPECT_GE(build_layer_graph(load_model_config(model_path("gemma2-2b")), inf).find("head.softcap_mul"), 0);
  LayerGraph g3 = build_layer_graph(load_model_config(model_path("gemma3-1b")), small_settings(2, 16));
  EXPECT_GE(g3.find("decoder.0.attn.post_norm"), 0);
  EXPECT_GE(g3.find("decoder.0.attn.k_norm"), 0);
  EXPECT_LT(g3.find("decoder.0.attn.softcap_div"), 0);
  EXPECT_LT(g3.find("head.softcap_div"), 0);
  // GPT-NeoX: attention and FFN read the block's input (parallel residual), biased fused qkv.
  LayerGraph nx = build_layer_graph(load_model_config(model_path("pythia-160m")), small_settings(2, 16));
  EXPECT_EQ(node(nx, "decoder.0.attn.qkv").dims, (std::vector<int64_t>{32, 768, 3 * 768, 1}));
  auto src_of = [&](const LayerGraph& g, const std::string& n) {
    for (const auto& e : g.edges)
      if (e.dst == g.find(n) && !e.backward) return e.src;
    return -1;
  };
  EXPECT_EQ(src_of(nx, "decoder.1.ffn.norm"), src_of(nx, "decoder.1.attn.norm"));
  EXPECT_EQ(src_of(nx, "decoder.1.attn.norm"), nx.find("decoder.0.ffn.residual"));
  EXPECT_EQ(src_of(q, "decoder.1.ffn.norm"), q.find("decoder.1.attn.residual"));  // sequential (Qwen2)
  // Phi-3: one qkv projection and one gate_up projection, chunked.
  LayerGraph ph = build_layer_graph(load_model_config(model_path("phi3-mini")), small_settings(2, 16));
  EXPECT_EQ(node(ph, "decoder.0.attn.qkv").dims, (std::vector<int64_t>{32, 3072, 3 * 3072, 0}));
  EXPECT_LT(ph.find("decoder.0.attn.q"), 0);
  EXPECT_EQ(node(ph, "decoder.0.ffn.gate_up").dims, (std::vector<int64_t>{32, 3072, 2 * 8192, 0}));
  EXPECT_LT(ph.find("decoder.0.ffn.gate"), 0);
  EXPECT_LT(ph.find("decoder.0.ffn.up"), 0);
  EXPECT_EQ(node(ph, "decoder.0.ffn.act").dims, (std::vector<int64_t>{32 * 8192}));
  EXPECT_EQ(node(ph, "decoder.0.ffn.mul").dims, (std::vector<int64_t>{32 * 8192}));
  LayerGraph g = build_layer_graph(load_model_config(model_path("gemma-2b")), small_settings(2, 16));
  const auto& sc = node(g, "embed.scale");
  EXPECT_EQ(sc.type, LayerType::Mul);
  EXPECT_EQ(sc.dims, (std::vector<int64_t>{32 * 2048}));
  EXPECT_EQ(node(g, "decoder.0.attn.q").dims, (std::vector<int64_t>{32, 2048, 8 * 256, 0}));  // head_dim 256
  EXPECT_EQ(node(g, "decoder.0.attn.v").dims, (std::vector<int64_t>{32, 2048, 256, 0}));      // one kv head
  EXPECT_EQ(node(g, "decoder.0.ffn.act").type, LayerType::GELU);
}

TEST(LayerGraph, VisionTokensAndDeit) {
  ModelSpec vit = load_model_config(model_path("vit-base"));
  TrainSettings s = small_settings(4, 1);
  LayerGraph g = build_layer_graph(vit, s);
  EXPECT_EQ(node(g, "embed.patch").dims, (std::vector<int64_t>{4, 3, 768, 224, 16}));
  EXPECT_EQ(node(g, "encoder.0.attn.q").dims[0], 4 * 197);  // batch * (patches + CLS)
  EXPECT_EQ(node(g, "head.classifier").dims, (std::vector<int64_t>{4, 768, 1000, 1}));
  EXPECT_EQ(node(g, "head.loss").dims, (std::vector<int64_t>{4, 1000}));
  ModelSpec deit = load_model_config(model_path("deit-small"));
  LayerGraph d = build_layer_graph(deit, s);
  EXPECT_EQ(node(d, "encoder.0.attn.q").dims[0], 4 * 198);  // + distillation token
  s.image_size = 384;
  LayerGraph big = build_layer_graph(vit, s);
  EXPECT_EQ(node(big, "encoder.0.attn.qk").dims, (std::vector<int64_t>{4 * 12, 577, 64, 577}));
}

TEST(LayerGraph, DeitWithTeacherAndGptNeo) {
  json j = read_json_file(model_path("deit-small"));
  j["architectures"] = {"DeiTForImageClassificationWithTeacher"};
  ModelSpec d = parse_model_config(j);
  EXPECT_TRUE(d.dist_head);
  LayerGraph g = build_layer_graph(d, small_settings(4, 1));
  EXPECT_EQ(node(g, "head.dist_classifier").dims, (std::vector<int64_t>{4, 384, 1000, 1}));
  EXPECT_EQ(node(g, "head.loss").dims, (std::vector<int64_t>{8, 1000}));  // both heads' logits
  EXPECT_EQ(static_cast<int64_t>(g.total_params()), 22436432);            // published WithTeacher count

  ModelSpec neo = load_model_config(model_path("gpt-neo-125m"));
  LayerGraph n = build_layer_graph(neo, small_settings(2, 16));
  EXPECT_EQ(node(n, "decoder.0.attn.q").dims, (std::vector<int64_t>{32, 768, 768, 0}));  // no q/k/v bias
  EXPECT_EQ(node(n, "decoder.0.attn.o").dims, (std::vector<int64_t>{32, 768, 768, 1}));
  EXPECT_LT(n.find("decoder.0.attn.dropout"), 0);  // attention_dropout 0 in the real config
}

TEST(LayerGraph, OptimizerStepAndDtype) {
  ModelSpec m = load_model_config(model_path("gpt2"));
  TrainSettings s = small_settings();
  s.optimizer_step = false;
  LayerGraph g = build_layer_graph(m, s);
  EXPECT_LT(g.find("optim.step"), 0);
  EXPECT_EQ(g.total_flops_update(), 0);
  s.optimizer_step = true;
  s.optimizer = OptimizerKind::SGD;
  s.dtype = DType::FP16;
  LayerGraph h = build_layer_graph(m, s);
  const auto& o = node(h, "optim.step");
  EXPECT_EQ(o.dir, Direction::Update);
  EXPECT_EQ(o.dims, (std::vector<int64_t>{124439808, 0}));
  EXPECT_DOUBLE_EQ(node(h, "embed.word").cost.weight_bytes, 50257.0 * 768 * 2);
}

TEST(LayerGraph, JsonAndDot) {
  ModelSpec m = load_model_config(model_path("opt-125m"));
  LayerGraph g = build_layer_graph(m, small_settings());
  json j = g.to_json();
  EXPECT_EQ(j["layers"].size(), g.nodes.size());
  EXPECT_EQ(j["edges"].size(), g.edges.size());
  EXPECT_DOUBLE_EQ(j["params"].get<double>(), 125239296.0);
  const json& l = j["layers"][0];
  for (const char* k : {"id", "name", "type", "dir", "dims", "flops", "flops_fwd", "flops_bwd", "params",
                        "in_bytes", "out_bytes", "weight_bytes", "temp_bytes", "out_shape", "block"})
    EXPECT_TRUE(l.contains(k)) << k;
  EXPECT_EQ(l["name"], "embed.word");
  EXPECT_EQ(l["dims"]["vocab"], 50272);
  for (const char* k : {"src", "dst", "bytes", "shape", "backward"})
    EXPECT_TRUE(j["edges"][0].contains(k)) << k;
  std::string dot = g.to_dot();
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.find("decoder.11.ffn.down.bwd"), std::string::npos);
}

TEST(LayerGraph, RefusesBadSettingsAndSpecs) {
  ModelSpec m = load_model_config(model_path("gpt2"));
  TrainSettings s = small_settings(2, 2048);
  try {
    build_layer_graph(m, s);
    ADD_FAILURE() << "seq 2048 accepted for gpt2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("settings.seq_len=2048"), std::string::npos) << e.what();
  }
  ModelSpec bad = m;
  bad.num_kv_heads = 5;
  EXPECT_THROW(build_layer_graph(bad, small_settings()), Error);
  bad = m;
  bad.hidden = 0;
  EXPECT_THROW(build_layer_graph(bad, small_settings()), Error);
}

TEST(LayerGraph, ModesTrainFwdBwdInference) {
  ModelSpec m = load_model_config(model_path("gpt2"));
  TrainSettings s = small_settings();
  ASSERT_EQ(run_mode(s), RunMode::Train);
  const LayerGraph train = build_layer_graph(m, s);
  set_run_mode(s, RunMode::FwdBwd);
  EXPECT_FALSE(s.optimizer_step);
  EXPECT_TRUE(s.backward);
  const LayerGraph fb = build_layer_graph(m, s);
  set_run_mode(s, RunMode::Inference);
  EXPECT_EQ(run_mode(s), RunMode::Inference);
  const LayerGraph inf = build_layer_graph(m, s);
  EXPECT_GE(train.find("optim.step"), 0);
  EXPECT_LT(fb.find("optim.step"), 0);
  EXPECT_EQ(fb.nodes.size() + 1, train.nodes.size());
  // Inference: forward only under no-grad, eval mode: no loss, no dropout, no saved tensors.
  for (const auto& n : inf.nodes) {
    EXPECT_EQ(n.dir, Direction::Forward) << n.name;
    EXPECT_NE(n.type, LayerType::Dropout) << n.name;
    EXPECT_NE(n.type, LayerType::CrossEntropy) << n.name;
  }
  for (const auto& e : inf.edges) {
    EXPECT_FALSE(e.saved);
    EXPECT_FALSE(e.backward);
    EXPECT_LT(e.src, e.dst);
  }
  EXPECT_GE(inf.find("head.lm"), 0);
  EXPECT_EQ(inf.total_flops_bwd(), 0);
  EXPECT_EQ(inf.total_flops_update(), 0);
  EXPECT_LT(inf.total_flops_fwd(), fb.total_flops_fwd());  // the loss is gone
  EXPECT_GT(inf.total_flops_fwd(), 0.99 * fb.total_flops_fwd());
  // Every family builds an inference graph.
  for (const char* f :
       {"bert-base", "t5-small", "vit-base", "deit-small", "llama-style", "opt-125m", "switch-base-8"}) {
    ModelSpec mf = load_model_config(model_path(f));
    TrainSettings t = small_settings();
    set_run_mode(t, RunMode::Inference);
    const LayerGraph g = build_layer_graph(mf, t);
    EXPECT_GT(g.nodes.size(), 10u) << f;
    for (const auto& n : g.nodes) EXPECT_EQ(n.dir, Direction::Forward) << f << " " << n.name;
  }
}

TEST(LayerGraph, ModeSettingsRoundTripAndErrors) {
  TrainSettings s = parse_train_settings(nlohmann::json::parse(R"({"mode":"inference","batch":4})"));
  EXPECT_EQ(run_mode(s), RunMode::Inference);
  // Stored settings carry "backward" only when false: earlier runs' keys are unchanged.
  EXPECT_FALSE(TrainSettings{}.to_json().contains("backward"));
  EXPECT_EQ(s.to_json()["backward"], false);
  EXPECT_EQ(run_mode(parse_train_settings(s.to_json())), RunMode::Inference);
  EXPECT_EQ(run_mode(parse_train_settings(nlohmann::json::parse(R"({"mode":"fwd-bwd"})"))), RunMode::FwdBwd);
  auto err = [](const char* j) {
    try {
      parse_train_settings(nlohmann::json::parse(j));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"({"mode":"predict"})").find("settings.mode=\"predict\" is not a mode"), std::string::npos);
  EXPECT_NE(err(R"({"backward":false,"optimizer_step":true})").find("optimizer step needs gradients"),
            std::string::npos);
  EXPECT_NE(err(R"({"mode":"train","backward":true})").find("either mode or backward"), std::string::npos);
  ModelSpec m = load_model_config(model_path("gpt2"));
  TrainSettings bad = small_settings();
  bad.backward = false;  // optimizer_step still true
  try {
    build_layer_graph(m, bad);
    ADD_FAILURE() << "inference with an optimizer step was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer step needs gradients"), std::string::npos) << e.what();
  }
}

TEST(LayerGraph, DeepSeekLatentAttentionAndItsDenseAndSparseFfns) {
  const int64_t b = 2, S = 64, t = b * S;
  LayerGraph g = build_layer_graph(load_model_config(model_path("deepseek-v3")), small_settings(b, S));
  // q through a rank-1536 latent, k/v through a rank-512 latent; heads of 192 (128 + 64 rotary) for the
  // scores, of 128 for the values; no grouped k/v heads.
  EXPECT_EQ(node(g, "decoder.0.attn.q_a").dims, (std::vector<int64_t>{t, 7168, 1536, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_a_norm").dims, (std::vector<int64_t>{t, 1536}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_b").dims, (std::vector<int64_t>{t, 1536, 128 * 192, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.kv_a").dims, (std::vector<int64_t>{t, 7168, 512 + 64, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.kv_a_norm").dims, (std::vector<int64_t>{t, 512}));
  EXPECT_EQ(node(g, "decoder.0.attn.kv_b").dims, (std::vector<int64_t>{t, 512, 128 * 256, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.q_cat").dims, (std::vector<int64_t>{t * 128 * 192, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.k_cat").dims, (std::vector<int64_t>{t * 128 * 192, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.qk").dims, (std::vector<int64_t>{b * 128, S, 192, S}));
  EXPECT_EQ(node(g, "decoder.0.attn.av").dims, (std::vector<int64_t>{b * 128, S, S, 128}));
  EXPECT_EQ(node(g, "decoder.0.attn.o").dims, (std::vector<int64_t>{t, 128 * 128, 7168, 0}));
  EXPECT_LT(g.find("decoder.0.attn.k"), 0);
  EXPECT_LT(g.find("decoder.0.attn.v"), 0);
  // The first three FFNs are dense (intermediate_size), the rest 8 of 256 experts of 2,048 and a shared one.
  EXPECT_EQ(node(g, "decoder.2.ffn.gate").dims, (std::vector<int64_t>{t, 7168, 18432, 0}));
  EXPECT_LT(g.find("decoder.2.ffn.router"), 0);
  EXPECT_LT(g.find("decoder.3.ffn.gate"), 0);
  const int64_t C = b * 2;  // ceil(8 x 64 / 256) slots per expert and sample
  EXPECT_EQ(node(g, "decoder.3.ffn.expert.up").dims, (std::vector<int64_t>{256, C, 7168, 2048}));
  EXPECT_EQ(node(g, "decoder.3.ffn.shared.gate").dims, (std::vector<int64_t>{t, 7168, 2048, 0}));
  EXPECT_LT(g.find("decoder.3.ffn.shared.router"), 0);  // added as it is, no sigmoid gate
  EXPECT_LT(g.find("decoder.3.ffn.shared.scale"), 0);
  EXPECT_EQ(node(g, "decoder.3.ffn.shared.add").dims, (std::vector<int64_t>{t * 7168}));
  // DeepSeek-V2-Lite: q projected directly (q_lora_rank null).
  LayerGraph l = build_layer_graph(load_model_config(model_path("deepseek-v2-lite")), small_settings(b, S));
  EXPECT_EQ(node(l, "decoder.0.attn.q").dims, (std::vector<int64_t>{t, 2048, 16 * 192, 0}));
  EXPECT_LT(l.find("decoder.0.attn.q_a"), 0);
  EXPECT_EQ(node(l, "decoder.0.ffn.up").dims, (std::vector<int64_t>{t, 2048, 10944, 0}));
  EXPECT_EQ(node(l, "decoder.1.ffn.shared.up").dims, (std::vector<int64_t>{t, 2048, 2816, 0}));
}

TEST(LayerGraph, GptOssSinksAndExpertsInTrainingAndInference) {
  const int64_t b = 2, S = 64, t = b * S, h = 2880, f = 2880, E = 32;
  const ModelSpec m = load_model_config(model_path("gpt-oss-20b"));
  LayerGraph g = build_layer_graph(m, small_settings(b, S));
  // The scores gain a sink column per head (64 heads), less each row's maximum, before the softmax.
  EXPECT_EQ(node(g, "decoder.0.attn.sinks_cat").dims, (std::vector<int64_t>{b * 64 * S * (S + 1), 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.sinks_cat").cost.params, 64);
  EXPECT_EQ(node(g, "decoder.0.attn.softmax").dims, (std::vector<int64_t>{b * 64 * S, S + 1}));
  EXPECT_GE(g.find("decoder.0.attn.sinks_sub"), 0);
  // Training: the experts at their mean load, C = b x ceil(4 x 64 / 32) = 16 slots; fused gate_up, biases,
  // GLU.
  const int64_t C = b * 8;
  EXPECT_EQ(node(g, "decoder.0.ffn.expert.gate_up").dims, (std::vector<int64_t>{E, C, h, 2 * f}));
  EXPECT_EQ(node(g, "decoder.0.ffn.expert.gate_up_bias").cost.params, E * 2 * f);
  EXPECT_EQ(node(g, "decoder.0.ffn.expert.down_bias").cost.params, E * h);
  for (const char* k : {"gate_clamp", "up_clamp", "act_scale", "act_sigmoid", "act", "up_add", "mul"})
    EXPECT_EQ(node(g, std::string("decoder.0.ffn.expert.") + k).dims[0], E * C * f) << k;
  EXPECT_EQ(node(g, "decoder.0.ffn.router").dims, (std::vector<int64_t>{t, h, E, 1}));
  EXPECT_EQ(node(g, "decoder.0.ffn.combine").dims, (std::vector<int64_t>{4 * t * h}));
  // Inference: every expert takes every token (Hugging Face's eval-mode path), 8x the training's expert
  // FLOPs.
  TrainSettings inf = small_settings(b, S);
  set_run_mode(inf, RunMode::Inference);
  LayerGraph gi = build_layer_graph(m, inf);
  EXPECT_EQ(node(gi, "decoder.0.ffn.expert.gate_up").dims, (std::vector<int64_t>{E, t, h, 2 * f}));
  EXPECT_EQ(node(gi, "decoder.0.ffn.combine").dims, (std::vector<int64_t>{E * t * h}));
  EXPECT_DOUBLE_EQ(node(gi, "decoder.0.ffn.expert.down").cost.flops_fwd,
                   8 * node(g, "decoder.0.ffn.expert.down").cost.flops_fwd);
}

TEST(LayerTypes, EveryRowRoundTripsAndKeepsItsKind) {
  ASSERT_EQ(all_layer_infos().size(), static_cast<size_t>(kLayerTypeCount));
  for (int i = 0; i < kLayerTypeCount; ++i) {
    const auto t = static_cast<LayerType>(i);
    EXPECT_EQ(layer_info(t).type, t);
    EXPECT_EQ(parse_layer_type(to_string(t)), t) << to_string(t);
    EXPECT_EQ(layer_info(t).has_backward, t != LayerType::Optimizer) << to_string(t);
  }
  // The kinds the graph network counts shares of time by (its share_* features).
  const std::map<LayerType, LayerKind> kinds = {{LayerType::Embedding, LayerKind::Other},
                                                {LayerType::LayerNorm, LayerKind::Norm},
                                                {LayerType::RMSNorm, LayerKind::Norm},
                                                {LayerType::Linear, LayerKind::Gemm},
                                                {LayerType::BMM, LayerKind::Gemm},
                                                {LayerType::Attention, LayerKind::Attention},
                                                {LayerType::Softmax, LayerKind::Attention},
                                                {LayerType::Dropout, LayerKind::Elementwise},
                                                {LayerType::GELU, LayerKind::Elementwise},
                                                {LayerType::ReLU, LayerKind::Elementwise},
                                                {LayerType::SiLU, LayerKind::Elementwise},
                                                {LayerType::Add, LayerKind::Elementwise},
                                                {LayerType::Mul, LayerKind::Elementwise},
                                                {LayerType::Conv2dPatch, LayerKind::Gemm},
                                                {LayerType::CrossEntropy, LayerKind::Other},
                                                {LayerType::Optimizer, LayerKind::Other},
                                                {LayerType::Pointwise, LayerKind::Elementwise},
                                                {LayerType::FlashAttention, LayerKind::Attention}};
  ASSERT_EQ(kinds.size(), static_cast<size_t>(kLayerTypeCount));
  for (const auto& [t, k] : kinds) EXPECT_EQ(layer_info(t).kind, k) << to_string(t);
  EXPECT_EQ(to_string(LayerType::Conv2dPatch), std::string("conv2d_patch"));
  EXPECT_EQ(layer_info(LayerType::Attention).dims,
            (std::vector<std::string>{"batch", "heads", "seq_q", "seq_k", "head_dim"}));
}

TEST(LayerGraph, NemotronSquaredReluMlpAndLayerNorms) {
  const int64_t b = 2, S = 32, t = b * S, h = 3072, f = 9216;
  const ModelSpec m = load_model_config(model_path("minitron-4b"));
  LayerGraph g = build_layer_graph(m, small_settings(b, S));
  auto producers = [&](const LayerGraph& gr, const std::string& name) {
    const int id = node(gr, name).id;
    std::vector<std::string> src;
    for (const auto& e : gr.edges)
      if (e.dst == id && !e.backward && !e.saved) src.push_back(gr.nodes[e.src].name);
    return src;
  };
  // LayerNorm1P is a LayerNorm (weight and bias) before attention, before the MLP and at the end.
  for (const char* n : {"decoder.0.attn.norm", "decoder.0.ffn.norm", "head.norm"}) {
    EXPECT_EQ(node(g, n).type, LayerType::LayerNorm) << n;
    EXPECT_EQ(node(g, n).cost.params, 2 * h) << n;
  }
  // GQA: 24 query heads and 8 k/v heads of 128, no biases.
  EXPECT_EQ(node(g, "decoder.0.attn.q").dims, (std::vector<int64_t>{t, h, 24 * 128, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.k").dims, (std::vector<int64_t>{t, h, 8 * 128, 0}));
  // The MLP: up, relu, square (a Pointwise that keeps the activation's name and saves its input), down;
  // no gate.
  EXPECT_EQ(node(g, "decoder.0.ffn.up").dims, (std::vector<int64_t>{t, h, f, 0}));
  EXPECT_EQ(node(g, "decoder.0.ffn.act.relu").type, LayerType::ReLU);
  EXPECT_EQ(node(g, "decoder.0.ffn.act.relu").dims, (std::vector<int64_t>{t * f}));
  EXPECT_EQ(node(g, "decoder.0.ffn.act").type, LayerType::Pointwise);
  EXPECT_EQ(node(g, "decoder.0.ffn.act").dims, (std::vector<int64_t>{t * f, 1}));
  EXPECT_EQ(node(g, "decoder.0.ffn.down").dims, (std::vector<int64_t>{t, f, h, 0}));
  EXPECT_EQ(producers(g, "decoder.0.ffn.act.relu"), std::vector<std::string>{"decoder.0.ffn.up"});
  EXPECT_EQ(producers(g, "decoder.0.ffn.act"), std::vector<std::string>{"decoder.0.ffn.act.relu"});
  EXPECT_EQ(producers(g, "decoder.0.ffn.down"), std::vector<std::string>{"decoder.0.ffn.act"});
  for (const char* n : {"decoder.0.ffn.gate", "decoder.0.ffn.mul", "decoder.0.ffn.gate_up"})
    EXPECT_LT(g.find(n), 0) << n;
  EXPECT_EQ(node(g, "head.lm").cost.params, 256000.0 * h);  // untied
  // With fused kernels (Megatron-LM's squared_relu) the activation is one relu-costed kernel.
  TrainSettings fk = small_settings(b, S);
  fk.fused_kernels = true;
  LayerGraph gk = build_layer_graph(m, fk);
  EXPECT_EQ(node(gk, "decoder.0.ffn.act").type, LayerType::ReLU);
  EXPECT_LT(gk.find("decoder.0.ffn.act.relu"), 0);
  // Inference: the same two kernels, no backward.
  TrainSettings inf = small_settings(b, S);
  set_run_mode(inf, RunMode::Inference);
  LayerGraph gi = build_layer_graph(m, inf);
  EXPECT_GE(gi.find("decoder.31.ffn.act.relu"), 0);
  EXPECT_LT(gi.find("decoder.0.ffn.act.bwd"), 0);
  // One more kernel per block than a plain ReLU MLP, forward and backward.
  ModelSpec relu = m;
  relu.activation = Activation::ReLU;
  EXPECT_EQ(g.nodes.size(), build_layer_graph(relu, small_settings(b, S)).nodes.size() + 2 * 32);
}

TEST(LayerGraph, Glm4SandwichNormsAndGlm45ExpertsBehindGqa) {
  const int64_t b = 2, S = 64, t = b * S;
  // GLM-4-9B-0414: Gemma 2's four norms, Phi-3's fused gate_up, biased q/k/v and an unbiased o.
  LayerGraph g = build_layer_graph(load_model_config(model_path("glm4-9b")), small_settings(b, S));
  for (const char* n :
       {"decoder.0.attn.norm", "decoder.0.attn.post_norm", "decoder.0.ffn.norm", "decoder.0.ffn.post_norm"})
    EXPECT_EQ(node(g, n).type, LayerType::RMSNorm) << n;
  EXPECT_EQ(node(g, "decoder.0.attn.q").dims, (std::vector<int64_t>{t, 4096, 32 * 128, 1}));
  EXPECT_EQ(node(g, "decoder.0.attn.v").dims, (std::vector<int64_t>{t, 4096, 2 * 128, 1}));
  EXPECT_EQ(node(g, "decoder.0.attn.o").dims, (std::vector<int64_t>{t, 4096, 4096, 0}));
  EXPECT_EQ(node(g, "decoder.0.ffn.gate_up").dims, (std::vector<int64_t>{t, 4096, 2 * 13696, 0}));
  EXPECT_LT(g.find("decoder.0.ffn.gate"), 0);
  // SmolLM3: a Llama whose LM head shares the embedding.
  LayerGraph sm = build_layer_graph(load_model_config(model_path("smollm3-3b")), small_settings(b, S));
  EXPECT_EQ(node(sm, "head.lm").cost.params, 0);
  EXPECT_EQ(node(sm, "decoder.0.ffn.gate").dims, (std::vector<int64_t>{t, 2048, 11008, 0}));
  // GLM-4.5-Air: layer 0 dense (intermediate_size), then 8 of 128 experts of 1408 plus a shared expert
  // added as it is, behind 96 query heads and 8 k/v heads of 128.
  LayerGraph a = build_layer_graph(load_model_config(model_path("glm4.5-air")), small_settings(b, S));
  EXPECT_EQ(node(a, "decoder.0.attn.q").dims, (std::vector<int64_t>{t, 4096, 96 * 128, 1}));
  EXPECT_EQ(node(a, "decoder.0.attn.k").dims, (std::vector<int64_t>{t, 4096, 8 * 128, 1}));
  EXPECT_EQ(node(a, "decoder.0.attn.o").dims, (std::vector<int64_t>{t, 96 * 128, 4096, 0}));
  EXPECT_LT(a.find("decoder.0.attn.q_norm"), 0);
  EXPECT_EQ(node(a, "decoder.0.ffn.gate").dims, (std::vector<int64_t>{t, 4096, 10944, 0}));
  EXPECT_LT(a.find("decoder.0.ffn.router"), 0);
  EXPECT_EQ(node(a, "decoder.1.ffn.router").dims, (std::vector<int64_t>{t, 4096, 128, 0}));
  const int64_t C = b * 4;  // ceil(8 x 64 / 128) slots per expert and sample
  EXPECT_EQ(node(a, "decoder.1.ffn.expert.gate").dims, (std::vector<int64_t>{128, C, 4096, 1408}));
  EXPECT_EQ(node(a, "decoder.1.ffn.shared.up").dims, (std::vector<int64_t>{t, 4096, 1408, 0}));
  EXPECT_LT(a.find("decoder.1.ffn.shared.scale"), 0);
  EXPECT_GE(a.find("decoder.45.ffn.shared.add"), 0);
}

TEST(LayerGraph, StagePartsPutTheEmbeddingFirstAndTheHeadLast) {
  TrainSettings s = small_settings();
  set_run_mode(s, RunMode::Train);
  const LayerGraph g = build_layer_graph(load_model_config(model_path("gpt2")), s);
  const std::vector<StagePart> parts = g.stage_parts();
  ASSERT_EQ(parts.size(), g.nodes.size());
  auto part_of = [&](const std::string& name) { return parts.at(static_cast<size_t>(node(g, name).id)); };
  EXPECT_EQ(part_of("embed.word"), StagePart::First);
  EXPECT_EQ(part_of("embed.dropout"), StagePart::First);
  EXPECT_EQ(part_of("decoder.0.attn.qkv"), StagePart::Blocks);
  EXPECT_EQ(part_of("head.lm"), StagePart::Last);
  EXPECT_EQ(part_of("head.loss"), StagePart::Last);
  EXPECT_EQ(part_of("optim.step"), StagePart::Last);
  // A backward node sits with its forward peer: the embedding's backward runs last, on the first stage.
  size_t first = 0, last = 0;
  for (const LayerNode& n : g.nodes) {
    const StagePart p = parts[static_cast<size_t>(n.id)];
    EXPECT_EQ(p == StagePart::Blocks, n.block >= 0) << n.name;
    if (n.dir == Direction::Backward && n.peer >= 0)
      EXPECT_EQ(p, parts[static_cast<size_t>(n.peer)]) << n.name;
    first += p == StagePart::First ? 1 : 0;
    last += p == StagePart::Last ? 1 : 0;
  }
  EXPECT_GE(first, 4u);
  EXPECT_GE(last, 4u);
}
