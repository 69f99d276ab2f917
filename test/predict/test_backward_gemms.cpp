// A linear layer's backward in half precision on a GPU: its two GEMMs, each costed by the forward's
// layer model (LayerPredictor::predict_nodes_detail; docs/predict.md, "Backward GEMMs"), and a fused
// framework's RMSNorm costed as the fused norm kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/predict/bundle.hpp"

using namespace scaledl;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;

LayerGraph graph(DType dtype, int64_t lora_rank = 0) {
  TrainSettings s;
  s.batch = 4;
  s.seq_len = 512;
  s.dtype = dtype;
  s.lora_rank = lora_rank;
  set_run_mode(s, lora_rank > 0 ? RunMode::FwdBwd : RunMode::Train);
  return build_layer_graph(load_model_config(kSrc + "/models/qwen2-0.5b.json"), s);
}

/// The forward model at dX's shape (tokens x d_out -> d_in) and at dW's (d_out x tokens -> d_in),
/// and the bias gradient's read of dY at the sustained bandwidth.
struct Parts {
  double dx = 0, dw = 0, bias = 0;
};
Parts parts(const LayerPredictor& lp, const LayerNode& n, const DeviceRecord& dev) {
  const auto& d = n.dims;  // tokens, d_in, d_out, bias
  Parts p;
  p.dx = lp.predict_ms(LayerType::Linear, {d[0], d[2], d[1], 0}, n.dtype, Direction::Forward, dev);
  p.dw = lp.predict_ms(LayerType::Linear, {d[2], d[0], d[1], 0}, n.dtype, Direction::Forward, dev);
  p.bias = d[3] != 0 ? double(d[0]) * double(d[2]) * dtype_bytes(n.dtype) /
                           (lp.roofline_bandwidth_gbs(dev) * 1e9) * 1e3
                     : 0.0;
  return p;
}
}  // namespace

TEST(BackwardGemms, AHalfPrecisionLinearBackwardIsItsTwoForwardGemmsOnAGpu) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord h200 = load_device_spec(kSrc + "/models/devices/h200-sxm.json");
  const LayerGraph g = graph(DType::BF16);
  const auto detail = b.layers.predict_nodes_detail(g, h200);
  // Qwen2's q projection has a bias, its o projection none.
  for (const char* name : {"decoder.0.attn.q", "decoder.0.attn.o"}) {
    const int fwd = g.find(name);
    ASSERT_GE(fwd, 0) << name;
    const LayerNode& bwd = g.nodes.at(static_cast<size_t>(g.nodes[static_cast<size_t>(fwd)].peer));
    ASSERT_EQ(bwd.dir, Direction::Backward);
    const Parts p = parts(b.layers, bwd, h200);
    EXPECT_GT(p.dx, 0);
    EXPECT_GT(p.dw, 0);
    EXPECT_NEAR(detail[static_cast<size_t>(bwd.id)].ms, p.dx + p.dw + p.bias, 1e-9 * (p.dx + p.dw)) << name;
  }
  // FP32 keeps the backward's own layer model (its rows have both directions).
  const LayerGraph g32 = graph(DType::FP32);
  const auto d32 = b.layers.predict_nodes_detail(g32, h200);
  const LayerNode& up32 =
      g32.nodes.at(static_cast<size_t>(g32.nodes[static_cast<size_t>(g32.find("decoder.0.ffn.up"))].peer));
  const Parts p32 = parts(b.layers, up32, h200);
  EXPECT_NEAR(d32[static_cast<size_t>(up32.id)].ms,
              b.layers.predict_ms(LayerType::Linear, up32.dims, DType::FP32, Direction::Backward, h200),
              1e-9);
  EXPECT_GT(std::abs(d32[static_cast<size_t>(up32.id)].ms / (p32.dx + p32.dw + p32.bias) - 1), 1e-3);
  // A frozen base weight (LoRA) runs dX alone.
  const LayerGraph lg = graph(DType::BF16, 8);
  const auto dl = b.layers.predict_nodes_detail(lg, h200);
  const LayerNode& up =
      lg.nodes.at(static_cast<size_t>(lg.nodes[static_cast<size_t>(lg.find("decoder.0.ffn.up"))].peer));
  ASSERT_TRUE(up.frozen);
  EXPECT_NEAR(dl[static_cast<size_t>(up.id)].ms, parts(b.layers, up, h200).dx, 1e-12);
}

TEST(FusedNorms, AFrameworkThatFusesItsKernelsRunsRmsNormAsTheFusedNormKernel) {
  // Megatron-LM / Transformer Engine: one fused RMSNorm kernel each way, costed by the LayerNorm
  // model (every row of it a fused kernel); Hugging Face's eager LlamaRMSNorm keeps the RMSNorm
  // model. The node stays an RMSNorm (its parameters, its memory).
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord h100 = load_device_spec(kSrc + "/models/devices/h100-sxm.json");
  const ModelSpec m = load_model_config(kSrc + "/models/qwen2-0.5b.json");
  TrainSettings s;
  s.batch = 4;
  s.seq_len = 512;
  s.dtype = DType::BF16;
  const LayerGraph eager = build_layer_graph(m, s);
  apply_framework(s, parse_framework("megatron"));
  ASSERT_TRUE(s.fused_kernels);
  const LayerGraph fused = build_layer_graph(m, s);
  const auto de = b.layers.predict_nodes_detail(eager, h100);
  const auto df = b.layers.predict_nodes_detail(fused, h100);
  for (const auto* g : {&eager, &fused}) {
    const int f = g->find("decoder.0.attn.norm");
    ASSERT_GE(f, 0);
    const LayerNode& fwd = g->nodes.at(static_cast<size_t>(f));
    const LayerNode& bwd = g->nodes.at(static_cast<size_t>(fwd.peer));
    ASSERT_EQ(fwd.type, LayerType::RMSNorm);
    const bool is_fused = g == &fused;
    const LayerType model = is_fused ? LayerType::LayerNorm : LayerType::RMSNorm;
    const auto& d = is_fused ? df : de;
    for (const LayerNode* n : {&fwd, &bwd})
      EXPECT_DOUBLE_EQ(d[static_cast<size_t>(n->id)].ms,
                       b.layers.predict_ms(model, n->dims, n->dtype, n->dir, h100))
          << n->name << (is_fused ? " (fused)" : " (eager)");
  }
  EXPECT_LT(
      df[static_cast<size_t>(fused.nodes[static_cast<size_t>(fused.find("decoder.0.attn.norm"))].peer)].ms,
      de[static_cast<size_t>(eager.nodes[static_cast<size_t>(eager.find("decoder.0.attn.norm"))].peer)].ms);
}

TEST(FusedSoftmax, AFusedSoftmaxBackwardIsItsForwardTimesItsBytes) {
  // Megatron-LM's scaled-masked-softmax (fused_kernels, with the eager attention core): the backward
  // reads y and dy and writes dx, 1.5x the forward's bytes, at the forward model's rate. PyTorch's
  // eager softmax keeps the backward's own model, on a GPU and on a CPU alike.
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const ModelSpec m = load_model_config(kSrc + "/models/gpt2.json");
  TrainSettings s;
  s.batch = 4;
  s.seq_len = 1024;
  s.dtype = DType::FP16;
  const LayerGraph eager = build_layer_graph(m, s);
  s.fused_kernels = true;
  const LayerGraph fused = build_layer_graph(m, s);
  for (const auto* g : {&eager, &fused}) {
    const int f = g->find("decoder.0.attn.softmax");
    ASSERT_GE(f, 0);
    const LayerNode& fwd = g->nodes.at(static_cast<size_t>(f));
    const LayerNode& bwd = g->nodes.at(static_cast<size_t>(fwd.peer));
    ASSERT_EQ(bwd.dir, Direction::Backward);
    const auto d = b.layers.predict_nodes_detail(*g, a100);
    const double own =
        b.layers.predict_ms(LayerType::Softmax, bwd.dims, bwd.dtype, Direction::Backward, a100);
    const double by_bytes =
        1.5 * b.layers.predict_ms(LayerType::Softmax, fwd.dims, fwd.dtype, Direction::Forward, a100);
    EXPECT_GT(std::abs(own / by_bytes - 1), 0.05)
        << "the two costings must differ for this check to mean anything";
    EXPECT_NEAR(d[static_cast<size_t>(bwd.id)].ms, g == &fused ? by_bytes : own, 1e-9 * own);
  }
}
