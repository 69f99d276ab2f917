// Training recipes in the layer graph: fused attention (flash_attention nodes), the framework
// presets (--framework) and the FP8 recipe (--dtype fp8): which nodes they make, their costs,
// their settings JSON, and the errors of bad input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scaledl/core/error.hpp"
#include "scaledl/ir/layer_graph.hpp"

using namespace scaledl;

namespace {
std::string model_path(const std::string& name) {
  return std::string(SCALEDL_SOURCE_DIR) + "/models/" + name + ".json";
}

TrainSettings settings(int64_t batch, int64_t seq, DType dtype = DType::BF16) {
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  s.dtype = dtype;
  return s;
}

const LayerNode& node(const LayerGraph& g, const std::string& name) {
  const int id = g.find(name);
  if (id < 0) throw Error("no node " + name);
  return g.nodes[id];
}

int count(const LayerGraph& g, LayerType t) {
  int n = 0;
  for (const auto& x : g.nodes) n += x.type == t ? 1 : 0;
  return n;
}
}  // namespace

TEST(Recipes, FusedAttentionIsOneNodeInPlaceOfTheScoreKernels) {
  const ModelSpec m = load_model_config(model_path("qwen2-0.5b"));  // GQA: 14 heads, 2 k/v heads
  TrainSettings s = settings(2, 256);
  s.attention = AttentionImpl::Fused;
  const LayerGraph g = build_layer_graph(m, s);
  const LayerNode& fa = node(g, "decoder.0.attn.core");
  EXPECT_EQ(fa.type, LayerType::FlashAttention);
  EXPECT_EQ(fa.dims,
            (std::vector<int64_t>{2, m.num_heads, m.num_kv_heads, 256, 256, m.head_dim, m.head_dim, 1}));
  for (const char* gone : {"decoder.0.attn.qk", "decoder.0.attn.softmax", "decoder.0.attn.av",
                           "decoder.0.attn.scale", "decoder.0.attn.mask"})
    EXPECT_LT(g.find(gone), 0) << gone;
  EXPECT_EQ(count(g, LayerType::FlashAttention), 2 * static_cast<int>(m.num_layers));  // fwd + bwd
  EXPECT_EQ(count(g, LayerType::Softmax), 0);
  // The o projection reads the core; the core reads q, k and v.
  int from_core = 0;
  for (const auto& e : g.edges)
    if (e.src == fa.id && g.nodes[e.dst].name == "decoder.0.attn.o") ++from_core;
  EXPECT_EQ(from_core, 1);
  // FLOP: causal, the unmasked pairs s(s+1)/2 per head, 4 hd each (QK^T and AV) + the softmax's 5;
  // the backward's five products are 2.5 x the forward's.
  const double pairs = 256.0 * 257 / 2, bh = 2.0 * m.num_heads, hd = static_cast<double>(m.head_dim);
  EXPECT_DOUBLE_EQ(fa.cost.flops_fwd, bh * pairs * (4 * hd + 5));
  EXPECT_DOUBLE_EQ(fa.cost.flops_bwd, bh * pairs * (10 * hd + 5));
  // The scores are never in memory: what it writes is a fraction of the [b, H, s, s] scores.
  const double scores_bytes = bh * 256 * 256 * 2;
  EXPECT_LT(fa.cost.out_bytes + fa.cost.temp_bytes, scores_bytes / 3);
  EXPECT_GT(node(build_layer_graph(m, settings(2, 256)), "decoder.0.attn.qk").cost.out_bytes,
            scores_bytes / 2);
  const LayerGraph eager = build_layer_graph(m, settings(2, 256));
  // The same FLOP of the projections either way.
  EXPECT_DOUBLE_EQ(node(g, "decoder.0.attn.o").cost.flops_fwd,
                   node(eager, "decoder.0.attn.o").cost.flops_fwd);
}

TEST(Recipes, BlocksWhoseScoresTakeABiasStayEager) {
  // T5 adds a position bias to the scores: no fused kernel of the frameworks takes it.
  TrainSettings s = settings(2, 64);
  s.attention = AttentionImpl::Fused;
  const LayerGraph t5 = build_layer_graph(load_model_config(model_path("t5-small")), s);
  EXPECT_EQ(count(t5, LayerType::FlashAttention), 0);
  EXPECT_GE(t5.find("encoder.0.attn.softmax"), 0);
  // Gemma 2's soft-capping and gpt-oss's sinks likewise.
  EXPECT_EQ(
      count(build_layer_graph(load_model_config(model_path("gemma2-2b")), s), LayerType::FlashAttention), 0);
  EXPECT_EQ(
      count(build_layer_graph(load_model_config(model_path("gpt-oss-20b")), s), LayerType::FlashAttention),
      0);
  // BERT (padding mask, not causal) fuses with causal = 0.
  const LayerGraph bert = build_layer_graph(load_model_config(model_path("bert-base")), s);
  EXPECT_EQ(node(bert, "encoder.0.attn.core").dims.back(), 0);
}

TEST(Recipes, FrameworksSetTheKernelsTheyFuse) {
  TrainSettings s = settings(2, 64);
  apply_framework(s, Framework::HfSdpa);
  EXPECT_EQ(s.attention, AttentionImpl::Fused);
  EXPECT_FALSE(s.fused_kernels);
  apply_framework(s, Framework::Megatron);
  EXPECT_EQ(s.attention, AttentionImpl::Fused);
  EXPECT_TRUE(s.fused_kernels);
  apply_framework(s, Framework::HfEager);
  EXPECT_EQ(s.attention, AttentionImpl::Eager);
  EXPECT_FALSE(s.fused_kernels);
  for (Framework f : {Framework::HfEager, Framework::HfSdpa, Framework::Megatron})
    EXPECT_EQ(parse_framework(to_string(f)), f);
  try {
    parse_framework("deepspeed", "--framework");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--framework=\"deepspeed\" is not a framework recipe (hf-eager, hf-sdpa or megatron)");
  }
  EXPECT_THROW(parse_attention_impl("flash2", "--attention"), Error);
}

TEST(Recipes, AFusedFrameworkRunsTheGatedFfnAsOneKernel) {
  // Megatron-LM's bias_swiglu fusion (Transformer Engine's swiglu): act(gate) * up is one kernel
  // reading gate and up, a Mul node with no activation node; eager, SiLU then the product. A fused
  // gate_up projection (Phi-3) feeds the kernel alone.
  for (const char* name : {"qwen2-0.5b", "phi3-mini"}) {
    const ModelSpec m = load_model_config(model_path(name));
    ASSERT_TRUE(m.gated_ffn) << name;
    TrainSettings s = settings(2, 64);
    apply_framework(s, Framework::HfSdpa);
    const LayerGraph eager = build_layer_graph(m, s);
    apply_framework(s, Framework::Megatron);
    const LayerGraph fused = build_layer_graph(m, s);
    const std::string p = "decoder.0.ffn";
    EXPECT_EQ(node(eager, p + ".act").type, LayerType::SiLU) << name;
    EXPECT_LT(fused.find(p + ".act"), 0) << name;
    EXPECT_EQ(count(fused, LayerType::SiLU), 0) << name;
    const LayerNode& mul = node(fused, p + ".mul");
    EXPECT_EQ(mul.type, LayerType::Mul);
    EXPECT_EQ(mul.dims, node(eager, p + ".mul").dims);
    std::vector<std::string> reads;
    for (const auto& e : fused.edges)
      if (e.dst == mul.id && !e.backward && !e.saved) reads.push_back(fused.nodes[e.src].name);
    const std::vector<std::string> want = m.fused_gate_up ? std::vector<std::string>{p + ".gate_up"}
                                                          : std::vector<std::string>{p + ".gate", p + ".up"};
    EXPECT_EQ(reads, want) << name;
  }
}

TEST(Recipes, Fp8RunsTheBlocksLinearLayersInFp8AndTheRestInBf16) {
  const ModelSpec m = load_model_config(model_path("qwen2-0.5b"));
  TrainSettings s = settings(2, 128);
  set_dtype_recipe(s, "fp8", "--dtype");
  EXPECT_TRUE(s.fp8);
  EXPECT_EQ(s.dtype, DType::BF16);
  EXPECT_EQ(dtype_recipe(s), "fp8");
  const LayerGraph g = build_layer_graph(m, s);
  EXPECT_EQ(node(g, "decoder.0.attn.q").dtype, DType::FP8);
  EXPECT_EQ(node(g, "decoder.0.ffn.down").dtype, DType::FP8);
  EXPECT_EQ(node(g, "decoder.0.ffn.down.bwd").dtype, DType::FP8);  // dgrad and wgrad in FP8 too
  EXPECT_EQ(node(g, "head.lm").dtype, DType::BF16);                // the LM head stays BF16
  EXPECT_EQ(node(g, "decoder.0.attn.norm").dtype, DType::BF16);
  EXPECT_EQ(node(g, "optim.step").dtype, DType::BF16);
  // One-byte operands: an FP8 GEMM reads half the weight bytes of a BF16 one; same FLOP.
  const LayerGraph bf = build_layer_graph(m, settings(2, 128));
  EXPECT_DOUBLE_EQ(node(g, "decoder.0.ffn.down").cost.weight_bytes,
                   node(bf, "decoder.0.ffn.down").cost.weight_bytes / 2);
  EXPECT_DOUBLE_EQ(node(g, "decoder.0.ffn.down").cost.flops_fwd,
                   node(bf, "decoder.0.ffn.down").cost.flops_fwd);
  // The weight gradients the optimizer reads are BF16, as without FP8.
  double grad_bytes = 0, grad_bytes_bf = 0;
  for (const auto& e : g.edges)
    if (g.nodes[e.dst].type == LayerType::Optimizer) grad_bytes += e.bytes;
  for (const auto& e : bf.edges)
    if (bf.nodes[e.dst].type == LayerType::Optimizer) grad_bytes_bf += e.bytes;
  EXPECT_DOUBLE_EQ(grad_bytes, grad_bytes_bf);
}

TEST(Recipes, SettingsJsonKeepsTheRecipesAndRefusesContradictions) {
  TrainSettings s = settings(2, 64);
  EXPECT_FALSE(s.to_json().contains("attention"));
  EXPECT_FALSE(s.to_json().contains("fp8"));
  s.attention = AttentionImpl::Fused;
  s.fp8 = true;
  const TrainSettings back = parse_train_settings(s.to_json());
  EXPECT_EQ(back.attention, AttentionImpl::Fused);
  EXPECT_TRUE(back.fp8);
  EXPECT_THROW(parse_train_settings(nlohmann::json{{"dtype", "fp16"}, {"fp8", true}}), Error);
  EXPECT_THROW(parse_train_settings(nlohmann::json{{"dtype", "fp8"}}), Error);
  EXPECT_THROW(parse_train_settings(nlohmann::json{{"attention", "flash"}}), Error);
  TrainSettings bad = settings(2, 64, DType::FP16);
  bad.fp8 = true;
  EXPECT_THROW(build_layer_graph(load_model_config(model_path("gpt2")), bad), Error);
}

TEST(Recipes, FlashAttentionDimsAreChecked) {
  EXPECT_NO_THROW(validate_dims(LayerType::FlashAttention, {1, 8, 2, 128, 128, 64, 64, 1}));
  EXPECT_NO_THROW(validate_dims(LayerType::FlashAttention, {1, 8, 8, 128, 512, 64, 64, 1}));
  EXPECT_THROW(validate_dims(LayerType::FlashAttention, {1, 8, 3, 128, 128, 64, 64, 1}), Error);  // 3 ∤ 8
  EXPECT_THROW(validate_dims(LayerType::FlashAttention, {1, 8, 8, 256, 128, 64, 64, 1}),
               Error);  // causal, sq > sk
  EXPECT_THROW(validate_dims(LayerType::FlashAttention, {1, 8, 8, 128, 128, 64, 64, 2}), Error);  // flag
  EXPECT_NO_THROW(validate_dims(LayerType::FlashAttention, {1, 8, 8, 256, 128, 64, 64, 0}));
}

TEST(Recipes, LoraFreezesTheModelAndTrainsAdaptersOnly) {
  const ModelSpec m = load_model_config(model_path("qwen2-0.5b"));
  const int64_t b = 2, S = 128, t = b * S, r = 16;
  TrainSettings s = settings(b, S);
  s.lora_rank = r;
  s.lora_targets = parse_lora_targets("q,v", "--lora-targets");
  const LayerGraph g = build_layer_graph(m, s);
  // q and v get an adapter each, k and o none.
  EXPECT_EQ(node(g, "decoder.0.attn.q.lora_a").dims, (std::vector<int64_t>{t, m.hidden, r, 0}));
  EXPECT_EQ(node(g, "decoder.0.attn.q.lora_b").dims,
            (std::vector<int64_t>{t, r, m.num_heads * m.head_dim, 0}));
  EXPECT_GE(g.find("decoder.23.attn.v.lora_add"), 0);
  EXPECT_LT(g.find("decoder.0.attn.k.lora_a"), 0);
  EXPECT_LT(g.find("decoder.0.attn.o.lora_a"), 0);
  // Trainable: r (d_in + d_out) per adapter; the model's parameters are all still there.
  const double kv = static_cast<double>(m.num_kv_heads * m.head_dim),
               q = static_cast<double>(m.num_heads * m.head_dim);
  const double want = m.num_layers * r * ((m.hidden + q) + (m.hidden + kv));
  EXPECT_DOUBLE_EQ(g.trainable_params(), want);
  EXPECT_DOUBLE_EQ(g.total_params(), static_cast<double>(parameter_count(m)) + want);
  EXPECT_DOUBLE_EQ(node(g, "optim.step").dims[0], want);
  // A frozen linear's backward is its dX GEMM only; the embedding and the first block's frozen
  // projections before any adapter run no backward at all.
  EXPECT_TRUE(node(g, "decoder.1.ffn.down").frozen);
  EXPECT_DOUBLE_EQ(node(g, "decoder.1.ffn.down").cost.flops_bwd,
                   node(g, "decoder.1.ffn.down").cost.flops_fwd);
  EXPECT_LT(g.find("embed.word.bwd"), 0);
  EXPECT_LT(g.find("decoder.0.attn.k.bwd"), 0);  // reads only the frozen norm's output
  EXPECT_GE(g.find("decoder.0.attn.q.lora_a.bwd"), 0);
  EXPECT_GE(g.find("decoder.1.attn.k.bwd"), 0);  // downstream of the first adapter: dX flows
  // Less backward work than full training, and far fewer optimizer FLOP.
  const LayerGraph full = build_layer_graph(m, settings(b, S));
  EXPECT_LT(g.total_flops_bwd(), 0.7 * full.total_flops_bwd());
  EXPECT_LT(g.total_flops_update(), 0.05 * full.total_flops_update());
  // The settings survive their JSON; bad input is refused.
  const TrainSettings back = parse_train_settings(s.to_json());
  EXPECT_EQ(back.lora_rank, r);
  EXPECT_EQ(lora_targets_string(back), "q,v");
  EXPECT_EQ(lora_targets_string(settings(1, 1)), "q,k,v,o,gate,up,down");
  EXPECT_THROW(parse_lora_targets("q,lm_head", "--lora-targets"), Error);
  TrainSettings inf = s;
  set_run_mode(inf, RunMode::Inference);
  EXPECT_THROW(build_layer_graph(m, inf), Error);  // LoRA on an inference run
}

TEST(Recipes, LoraFreezesTheExpertsOfAMixture) {
  // The experts' weights are given to their batched matmuls after the node is added (own_weight):
  // frozen all the same, so the optimizer steps the adapters alone.
  const ModelSpec m = load_model_config(model_path("qwen3-30b-a3b"));
  TrainSettings s = settings(1, 64);
  s.lora_rank = 8;
  const LayerGraph g = build_layer_graph(m, s);
  EXPECT_TRUE(node(g, "decoder.0.ffn.expert.down").frozen);
  EXPECT_GT(g.trainable_params(), 0.0);
  EXPECT_LT(g.trainable_params(), 0.01 * g.total_params());
  EXPECT_DOUBLE_EQ(node(g, "optim.step").dims[0], g.trainable_params());
}

TEST(Recipes, LoraOnFusedProjectionsAndWithFp8) {
  // GPT-2's fused qkv takes one adapter when any of q, k, v is targeted; FP8 leaves the adapters
  // in BF16.
  TrainSettings s = settings(2, 64);
  s.lora_rank = 8;
  s.fp8 = true;
  const LayerGraph g = build_layer_graph(load_model_config(model_path("gpt2")), s);
  EXPECT_EQ(node(g, "decoder.0.attn.qkv").dtype, DType::FP8);
  EXPECT_EQ(node(g, "decoder.0.attn.qkv.lora_a").dtype, DType::BF16);
  EXPECT_EQ(node(g, "decoder.0.attn.qkv.lora_b").dims, (std::vector<int64_t>{128, 8, 3 * 768, 0}));
  EXPECT_GT(g.trainable_params(), 0.0);
  EXPECT_LT(g.trainable_params(), 0.01 * g.total_params());
}

TEST(Recipes, AmpRunsTheMatrixProductsOnCastsAndTheRestInFp32) {
  const ModelSpec m = load_model_config(model_path("qwen2-0.5b"));  // RMSNorm, tied LM head
  TrainSettings s = settings(2, 128);
  set_dtype_recipe(s, "amp-bf16", "--dtype");
  EXPECT_TRUE(s.amp);
  EXPECT_FALSE(s.fp8);
  EXPECT_EQ(s.dtype, DType::BF16);
  EXPECT_EQ(dtype_recipe(s), "amp-bf16");
  const LayerGraph g = build_layer_graph(m, s);
  const LayerGraph bf = build_layer_graph(m, settings(2, 128));
  int linears = 0, casts = 0;
  for (const auto& n : g.nodes) {
    if (n.dir != Direction::Forward) continue;
    switch (autocast_class(n.type)) {
      case AutocastClass::Lower:
        EXPECT_EQ(n.dtype, DType::BF16) << n.name;
        break;
      case AutocastClass::Fp32:
        EXPECT_EQ(n.dtype, DType::FP32) << n.name;
        break;
      case AutocastClass::Promote:
        break;
    }
    if (n.type != LayerType::Linear) continue;
    ++linears;
    // Every linear reads the cast of its FP32 weight (and of an FP32 input) from one cast node.
    const int c = g.find(n.name + ".cast");
    ASSERT_GE(c, 0) << n.name;
    ++casts;
    EXPECT_EQ(g.nodes[c].dtype, DType::BF16);  // what it hands on
    // A cast moves 4 + 2 bytes per element: 1.5 x the elements of a BF16 pointwise node.
    EXPECT_GE(static_cast<double>(g.nodes[c].dims[0]), 1.5 * n.cost.weight_bytes / 2 - 1) << n.name;
    bool reads = false;
    for (const auto& e : g.edges) reads = reads || (e.src == c && e.dst == n.id);
    EXPECT_TRUE(reads) << n.name;
  }
  EXPECT_GT(linears, 0);
  EXPECT_EQ(casts, linears);
  // q reads the FP32 norm: its cast covers the weight and the activation.
  const LayerNode& q = node(g, "decoder.0.attn.q");
  EXPECT_NEAR(static_cast<double>(node(g, "decoder.0.attn.q.cast").dims[0]),
              1.5 * (q.cost.weight_bytes / 2 + 2.0 * 128 * m.hidden), 1);
  // The BF16 logits are cast to FP32 for the loss (Hugging Face's logits.float()).
  const LayerNode& loss = node(bf, "head.loss");
  EXPECT_EQ(node(g, "head.loss").dtype, DType::FP32);
  EXPECT_EQ(node(g, "head.loss.cast").dtype, DType::FP32);
  EXPECT_NEAR(static_cast<double>(node(g, "head.loss.cast").dims[0]), 0.75 * 2.0 * 128 * m.vocab_size, 1);
  EXPECT_EQ(loss.dtype, DType::BF16);  // without autocast: no cast, the loss in BF16
  EXPECT_LT(bf.find("head.loss.cast"), 0);
  // The step and the gradients it reads are FP32; FLOP of the products unchanged.
  EXPECT_EQ(node(g, "optim.step").dtype, DType::FP32);
  double grad_bytes = 0, grad_bytes_bf = 0;
  for (const auto& e : g.edges)
    if (g.nodes[e.dst].type == LayerType::Optimizer) grad_bytes += e.bytes;
  for (const auto& e : bf.edges)
    if (bf.nodes[e.dst].type == LayerType::Optimizer) grad_bytes_bf += e.bytes;
  EXPECT_DOUBLE_EQ(grad_bytes, 2 * grad_bytes_bf);
  EXPECT_DOUBLE_EQ(q.cost.flops_fwd, node(bf, "decoder.0.attn.q").cost.flops_fwd);
}

TEST(Recipes, AmpRunsGeluNewFromItsPowInFp32) {
  // HF's gelu_new under autocast: torch.pow is on autocast's FP32 list, so its BF16 input is cast
  // to FP32 and every later kernel of the chain is promoted to FP32 (the H200 profile of GPT-2
  // large: its muls, adds and tanh are float kernels); 0.5 * x, which reads the BF16 input
  // alone, stays BF16; the down projection casts the FP32 activation back.
  const ModelSpec m = load_model_config(model_path("gpt2"));
  ASSERT_EQ(m.activation, Activation::GELUNew);
  TrainSettings s = settings(2, 128);
  set_dtype_recipe(s, "amp-bf16", "--dtype");
  const LayerGraph g = build_layer_graph(m, s);
  const LayerGraph bf = build_layer_graph(m, settings(2, 128));
  const std::string a = "decoder.0.ffn.act";
  EXPECT_EQ(node(g, a + ".half").dtype, DType::BF16);
  const LayerNode& cast = node(g, a + ".pow.cast");
  EXPECT_EQ(cast.dtype, DType::FP32);
  // a BF16 -> FP32 cast of the t x 4h elements: 6 bytes each, 0.75 x an FP32 pointwise node's
  const double n = 2.0 * 128 * m.ffn_dim;
  EXPECT_NEAR(static_cast<double>(cast.dims[0]), 0.75 * n, 1);
  for (const char* k : {".pow", ".mul_c", ".add_x", ".mul_k", ".tanh", ".add_1", ""})
    EXPECT_EQ(node(g, a + k).dtype, DType::FP32) << a + k;
  // twice the bytes of the same chain in a BF16 model, which has no cast
  EXPECT_DOUBLE_EQ(node(g, a + ".tanh").cost.out_bytes, 2 * node(bf, a + ".tanh").cost.out_bytes);
  EXPECT_LT(bf.find(a + ".pow.cast"), 0);
  for (const char* k : {".half", ".pow", ".tanh", ""}) EXPECT_EQ(node(bf, a + k).dtype, DType::BF16) << k;
  // the down projection reads the cast of the FP32 activation and of its weight
  EXPECT_NEAR(static_cast<double>(node(g, "decoder.0.ffn.down.cast").dims[0]),
              1.5 * (node(g, "decoder.0.ffn.down").cost.weight_bytes / 2 + n), 1);
}

TEST(Recipes, AmpSettingsRoundTripAndBadValuesAreErrors) {
  TrainSettings s = settings(2, 64);
  EXPECT_FALSE(s.to_json().contains("amp"));
  set_dtype_recipe(s, "amp-fp16", "--dtype");
  EXPECT_EQ(s.dtype, DType::FP16);
  const TrainSettings back = parse_train_settings(s.to_json());
  EXPECT_TRUE(back.amp);
  EXPECT_EQ(dtype_recipe(back), "amp-fp16");
  set_dtype_recipe(s, "bf16", "--dtype");  // a later plain dtype clears the recipe
  EXPECT_FALSE(s.amp);
  // Every framework runs a fused optimizer step; the settings keep it.
  EXPECT_FALSE(s.fused_optimizer);
  apply_framework(s, Framework::HfEager);
  EXPECT_TRUE(s.fused_optimizer);
  EXPECT_TRUE(parse_train_settings(s.to_json()).fused_optimizer);
  try {
    set_dtype_recipe(s, "amp-fp32", "--dtype");
    ADD_FAILURE() << "amp-fp32 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype=amp-fp32: autocast runs bf16 or fp16"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_train_settings(nlohmann::json{{"dtype", "fp32"}, {"amp", true}}), Error);
  EXPECT_THROW(parse_train_settings(nlohmann::json{{"dtype", "bf16"}, {"amp", true}, {"fp8", true}}), Error);
  EXPECT_THROW(parse_train_settings(nlohmann::json{{"dtype", "bf16"}, {"amp", "yes"}}), Error);
}

TEST(Recipes, LoraInHalfPrecisionHasPeftsCasts) {
  // peft keeps the adapters in FP32 and casts each adapted layer's input to FP32; autocast casts it
  // back for lora_a's GEMM (two casts, 12 bytes per element: 3 x a BF16 pointwise node's 4), and the
  // scaling multiplies lora_b's output.
  const ModelSpec m = load_model_config(model_path("qwen2-0.5b"));
  const int64_t t = 2 * 128;
  TrainSettings s = settings(2, 128);
  s.lora_rank = 16;
  s.lora_targets = parse_lora_targets("q", "--lora-targets");
  const LayerGraph g = build_layer_graph(m, s);
  const LayerNode& cast = node(g, "decoder.0.attn.q.lora_cast");
  EXPECT_EQ(cast.type, LayerType::Pointwise);
  EXPECT_EQ(cast.dims, (std::vector<int64_t>{3 * t * m.hidden, 0}));
  const LayerNode& scale = node(g, "decoder.0.attn.q.lora_scale");
  EXPECT_EQ(scale.dims, (std::vector<int64_t>{t * m.num_heads * m.head_dim, 0}));
  auto reads = [&](const std::string& dst, int src) {
    const int d = g.find(dst);
    for (const LayerEdge& e : g.edges)
      if (e.dst == d && e.src == src) return true;
    return false;
  };
  EXPECT_TRUE(reads("decoder.0.attn.q.lora_a", cast.id));
  EXPECT_TRUE(reads("decoder.0.attn.q.lora_add", scale.id));
  EXPECT_LT(g.find("decoder.0.attn.k.lora_cast"), 0);  // k takes no adapter
  // FP32 needs no cast; autocast over FP32 weights casts with its own ".cast" nodes.
  TrainSettings f = s;
  f.dtype = DType::FP32;
  EXPECT_LT(build_layer_graph(m, f).find("decoder.0.attn.q.lora_cast"), 0);
  TrainSettings amp = s;
  amp.amp = true;
  const LayerGraph ga = build_layer_graph(m, amp);
  EXPECT_LT(ga.find("decoder.0.attn.q.lora_cast"), 0);
  EXPECT_GE(ga.find("decoder.0.attn.q.lora_a.cast"), 0);
}
