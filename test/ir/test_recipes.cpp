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

TEST(Recipes, FrameworksTurnQAndKInRotaryKernelsOfTheirOwn) {
  // Mistral-7B (Llama's blocks, 32 heads of 128, 8 k/v heads): Hugging Face's
  // apply_rotary_pos_emb, x * cos + rotate_half(x) * sin, is five kernels on q and five on k
  // between the projections and the attention core; Megatron's fused RoPE one each; our zoo (no
  // --framework) turns q and k inside its q and k nodes, so its graph has no rotary node.
  const ModelSpec m = load_model_config(model_path("mistral-7b"));
  ASSERT_EQ(m.rotary_dims(), 128);
  TrainSettings zoo = settings(2, 256);
  TrainSettings hf = zoo, meg = zoo;
  apply_framework(hf, Framework::HfSdpa);
  apply_framework(meg, Framework::Megatron);
  EXPECT_TRUE(hf.rotary_kernels && meg.rotary_kernels);
  EXPECT_FALSE(zoo.rotary_kernels);
  zoo.attention = AttentionImpl::Fused;
  zoo.fused_optimizer = true;  // everything of hf-sdpa but the rotary kernels
  const LayerGraph gz = build_layer_graph(m, zoo), gh = build_layer_graph(m, hf),
                   gm = build_layer_graph(m, meg);
  const std::string p = "decoder.0.attn.";
  EXPECT_LT(gz.find(p + "q_rope"), 0);
  // ten forward nodes a layer (and their backward nodes), and nothing else changed
  EXPECT_EQ(gh.nodes.size(), gz.nodes.size() + 20 * static_cast<size_t>(m.num_layers));
  auto rotary_nodes = [](const LayerGraph& g) {
    int n = 0;
    for (const auto& x : g.nodes)
      n += x.dir == Direction::Forward && x.name.find("_rope") != std::string::npos;
    return n;
  };
  EXPECT_EQ(rotary_nodes(gh), 10 * m.num_layers);
  const double tq = 2.0 * 256 * 32 * 128, tk = 2.0 * 256 * 8 * 128;  // q's and k's turned elements
  EXPECT_EQ(node(gh, p + "q_rope.neg").dims, (std::vector<int64_t>{int64_t(tq / 2), 0}));
  for (const char* k : {"q_rope.cat", "q_rope.cos", "q_rope.sin"}) {
    EXPECT_EQ(node(gh, p + k).type, LayerType::Pointwise) << k;
    EXPECT_EQ(node(gh, p + k).dims[0], int64_t(tq)) << k;
  }
  EXPECT_EQ(node(gh, p + "q_rope").type, LayerType::Add);
  EXPECT_EQ(node(gh, p + "k_rope").dims[0], int64_t(tk));
  // the attention core reads the turned q and k, and v as projected
  const int core = gh.find(p + "core");
  std::vector<int> srcs;
  for (const auto& e : gh.edges)
    if (e.dst == core) srcs.push_back(e.src);
  EXPECT_EQ(srcs, (std::vector<int>{gh.find(p + "q_rope"), gh.find(p + "k_rope"), gh.find(p + "v")}));
  // Megatron: one kernel per tensor over the whole heads
  EXPECT_EQ(rotary_nodes(gm), 2 * m.num_layers);
  EXPECT_EQ(node(gm, p + "q_rope").type, LayerType::Pointwise);
  EXPECT_EQ(node(gm, p + "q_rope").dims, (std::vector<int64_t>{int64_t(tq), 0}));
  EXPECT_LT(gm.find(p + "q_rope.cos"), 0);
  // the setting round-trips through the settings JSON, stored only when set
  EXPECT_TRUE(parse_train_settings(hf.to_json()).rotary_kernels);
  EXPECT_FALSE(zoo.to_json().contains("rotary_kernels"));
}

TEST(Recipes, AmpTurnsQAndKInFp32AndTheCoreCastsThemBack) {
  // Under autocast over FP32 weights, cos and sin are FP32 (the embeddings' dtype): the BF16 q
  // times cos is an FP32 tensor (promoted inside the multiply, no cast kernel), the sum too, and
  // SDPA's autocast casts the turned q and k back to BF16. rotate_half's neg and cat stay BF16.
  const ModelSpec m = load_model_config(model_path("mistral-7b"));
  TrainSettings s = settings(2, 256);
  apply_framework(s, Framework::HfSdpa);
  set_dtype_recipe(s, "amp-bf16", "--dtype");
  const LayerGraph g = build_layer_graph(m, s);
  const std::string p = "decoder.0.attn.";
  for (const char* k : {"q_rope.neg", "q_rope.cat"}) EXPECT_EQ(node(g, p + k).dtype, DType::BF16) << k;
  for (const char* k : {"q_rope.cos", "q_rope.sin", "q_rope", "k_rope"})
    EXPECT_EQ(node(g, p + k).dtype, DType::FP32) << k;
  EXPECT_LT(g.find(p + "q_rope.cos.cast"), 0);
  const LayerNode& cast = node(g, p + "core.cast");
  EXPECT_EQ(cast.dtype, DType::BF16);
  // q and k, FP32 to BF16: 6 bytes an element, 1.5 x a BF16 pointwise node's
  const double qk = 2.0 * 256 * (32 + 8) * 128;
  EXPECT_NEAR(static_cast<double>(cast.dims[0]), 1.5 * qk, 1);
  // a model loaded in BF16 turns them in BF16, with no cast before the core
  TrainSettings b = settings(2, 256);
  apply_framework(b, Framework::HfSdpa);
  const LayerGraph gb = build_layer_graph(m, b);
  EXPECT_EQ(node(gb, p + "q_rope.cos").dtype, DType::BF16);
  EXPECT_LT(gb.find(p + "core.cast"), 0);
}

TEST(Recipes, PartialRotationNopeLayersAndLatentAttentionTurnWhatTheirConfigsSay) {
  TrainSettings s = settings(1, 128);
  apply_framework(s, Framework::HfSdpa);
  // Pythia (GPT-NeoX): rotary_pct 0.25 of 64 = 16 of each head turn, then the turned part is
  // concatenated with the other 48 (one fused query_key_value projection, sliced).
  const ModelSpec neox = load_model_config(model_path("pythia-160m"));
  ASSERT_EQ(neox.head_dim, 64);
  EXPECT_EQ(neox.rotary_dims(), 16);
  const LayerGraph gn = build_layer_graph(neox, s);
  const std::string p = "decoder.0.attn.";
  EXPECT_EQ(node(gn, p + "q_rope.sum").dims[0], 128 * 12 * 16);
  EXPECT_EQ(node(gn, p + "q_rope").dims, (std::vector<int64_t>{128 * 12 * 64, 0}));
  // SmolLM3: every 4th layer is NoPE (no_rope_layer_interval 4): 27 of 36 layers turn q and k
  const ModelSpec smol = load_model_config(model_path("smollm3-3b"));
  EXPECT_EQ(smol.nope_interval, 4);
  const LayerGraph gs = build_layer_graph(smol, s);
  int turned = 0;
  for (int64_t i = 0; i < smol.num_layers; ++i)
    turned += gs.find("decoder." + std::to_string(i) + ".attn.q_rope") >= 0 ? 1 : 0;
  EXPECT_EQ(turned, 27);
  EXPECT_LT(gs.find("decoder.3.attn.q_rope"), 0);
  // DeepSeek-V2-Lite's latent attention: the rotary part of q (every head) and k's one shared
  // rotary head turn before the concatenations, which read them.
  const ModelSpec ds = load_model_config(model_path("deepseek-v2-lite"));
  ASSERT_TRUE(ds.mla());
  EXPECT_EQ(ds.rotary_dims(), ds.qk_rope_dim);
  const LayerGraph gd = build_layer_graph(ds, s);
  EXPECT_EQ(node(gd, p + "k_rope").dims[0], 128 * ds.qk_rope_dim);
  EXPECT_EQ(node(gd, p + "q_rope").dims[0], 128 * ds.num_heads * ds.qk_rope_dim);
  const int kcat = gd.find(p + "k_cat");
  bool reads = false;
  for (const auto& e : gd.edges) reads = reads || (e.dst == kcat && e.src == gd.find(p + "k_rope"));
  EXPECT_TRUE(reads);
  // BERT and GPT-2 learn their positions: no rotary node under any framework
  EXPECT_EQ(load_model_config(model_path("gpt2")).rotary_dims(), 0);
  const LayerGraph g2 = build_layer_graph(load_model_config(model_path("gpt2")), s);
  for (const auto& n : g2.nodes) EXPECT_EQ(n.name.find("rope"), std::string::npos) << n.name;
  // a spec's rotary share round-trips through the stored JSON
  const ModelSpec back = model_spec_from_json(neox.to_json(), "stored");
  EXPECT_EQ(back.rotary_dim, 16);
  EXPECT_EQ(model_spec_from_json(smol.to_json(), "stored").nope_interval, 4);
}  // a bad partial_rotary_factor: test_model_spec.cpp (NemotronSquaredReluLayerNorm1PAndPartialRotary)

TEST(Recipes, MegatronPadsTheVocabularyToAMultipleOf128) {
  // GPT-2's 50,257 rows: Megatron-LM's embedding and LM head have 50,304 (--make-vocab-size-
  // divisible-by 128), so its GEMMs run on aligned kernels; Hugging Face keeps 50,257.
  const ModelSpec m = load_model_config(model_path("gpt2"));
  ASSERT_EQ(m.vocab_size, 50257);
  TrainSettings s = settings(2, 64);
  apply_framework(s, Framework::Megatron);
  EXPECT_EQ(s.vocab_multiple, kMegatronVocabMultiple);
  const LayerGraph mg = build_layer_graph(m, s);
  EXPECT_EQ(mg.model.vocab_size, 50304);
  EXPECT_EQ(node(mg, "head.lm").dims[2], 50304);
  EXPECT_EQ(node(mg, "embed.word").dims[1], 50304);
  // Stored with the run's settings, and read back.
  EXPECT_EQ(s.to_json().at("vocab_multiple"), 128);
  EXPECT_EQ(parse_train_settings(s.to_json(), "s").vocab_multiple, 128);
  apply_framework(s, Framework::HfSdpa);
  EXPECT_EQ(s.vocab_multiple, 0);
  EXPECT_FALSE(s.to_json().contains("vocab_multiple"));
  EXPECT_EQ(node(build_layer_graph(m, s), "head.lm").dims[2], 50257);
  nlohmann::json bad = s.to_json();
  bad["vocab_multiple"] = -1;
  EXPECT_THROW(parse_train_settings(bad, "s"), Error);
}
