// The analytic peak-memory replay, its learned correction and the per-GPU
// parallel form (issue #15, memory.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scaledl/core/error.hpp"
#include "scaledl/memory/memory.hpp"
#include "test_util.hpp"

using namespace scaledl;

namespace {

ModelSpec gpt2(int64_t hidden, int64_t layers) {
  ModelSpec m = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/gpt2.json");
  m.hidden = hidden;
  m.embed_dim = hidden;
  m.num_layers = layers;
  m.num_heads = 4;
  m.num_kv_heads = 4;
  m.head_dim = hidden / 4;
  m.ffn_dim = 4 * hidden;
  m.vocab_size = 1000;
  return m;
}

LayerGraph graph(const ModelSpec& m, int64_t batch, int64_t seq, RunMode mode, DType dt = DType::FP32) {
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  s.dtype = dt;
  set_run_mode(s, mode);
  return build_layer_graph(m, s);
}

}  // namespace

TEST(MemoryEstimate, BaseIsWeightsOptimizerStateAndBatch) {
  const auto m = gpt2(64, 2);
  const auto g = graph(m, 2, 16, RunMode::Train);
  MemoryOptions cpu;
  cpu.device_kind = "cpu";
  const MemoryEstimate a = estimate_memory(g, cpu);
  const double P = g.total_params();
  EXPECT_DOUBLE_EQ(a.weights, 4 * P);
  EXPECT_DOUBLE_EQ(a.optimizer, 8 * P);         // AdamW: two FP32 moments
  EXPECT_DOUBLE_EQ(a.batch, 2 * 2 * 16 * 8.0);  // input ids and labels, int64
  EXPECT_DOUBLE_EQ(a.base, a.weights + a.optimizer + a.batch);
  EXPECT_GT(a.peak, a.base + a.saved);
  EXPECT_NEAR(a.grads, 4 * P, 4 * P * 1e-9);  // every weight gets one gradient
}

TEST(MemoryEstimate, ModesAreOrderedAndActivationsGrowWithTokens) {
  const auto m = gpt2(64, 2);
  MemoryOptions o;
  const double train = estimate_memory(graph(m, 2, 32, RunMode::Train), o).peak;
  const double fb = estimate_memory(graph(m, 2, 32, RunMode::FwdBwd), o).peak;
  const double inf = estimate_memory(graph(m, 2, 32, RunMode::Inference), o).peak;
  EXPECT_GT(train, fb);
  EXPECT_GT(fb, inf);
  // Saved activations are linear in the batch (same sequence length).
  const double s1 = estimate_memory(graph(m, 1, 32, RunMode::FwdBwd), o).saved;
  const double s4 = estimate_memory(graph(m, 4, 32, RunMode::FwdBwd), o).saved;
  EXPECT_NEAR(s4 / s1, 4.0, 0.05);
  // Inference keeps nothing for backward: its peak is far below training's activations.
  EXPECT_EQ(estimate_memory(graph(m, 2, 32, RunMode::Inference), o).grads, 0);
}

TEST(MemoryEstimate, CudaRoundsAllocationsAndKeepsByteMasks) {
  const auto m = gpt2(64, 1);
  const auto g = graph(m, 2, 16, RunMode::FwdBwd);
  MemoryOptions cpu, cuda;
  cpu.device_kind = "cpu";
  const auto a = estimate_memory(g, cpu), b = estimate_memory(g, cuda);
  EXPECT_GT(b.base, a.base);  // 512-byte rounding of every parameter
  MemoryOptions bad;
  bad.device_kind = "tpu";
  EXPECT_NE(test::error_of([&] { estimate_memory(g, bad); }).find("tpu"), std::string::npos);
  EXPECT_EQ(memory_device_kind("cpu:AMD EPYC (1 threads)"), "cpu");
  EXPECT_EQ(memory_device_kind("spec"), "cuda");
}

TEST(MemoryEstimate, HeadroomAndVerdicts) {
  EXPECT_NO_THROW(check_headroom(0));
  EXPECT_NE(test::error_of([] { check_headroom(1); }).find("--headroom=1"), std::string::npos);
  EXPECT_NE(test::error_of([] { check_headroom(-0.1); }).find("--headroom=-0.1"), std::string::npos);
  EXPECT_NE(test::error_of([] { check_headroom(NAN); }).find("--headroom"), std::string::npos);
  EXPECT_EQ(memory_verdict(50e9, NAN, 80e9, 0.1), "fits");
  EXPECT_EQ(memory_verdict(70e9, 75e9, 80e9, 0.1), "tight");
  EXPECT_EQ(memory_verdict(75e9, NAN, 80e9, 0.1), "does not fit");
  EXPECT_EQ(memory_verdict(75e9, NAN, 0, 0.1), "unknown");
}

TEST(MemoryCorrection, LearnsASystematicRatioAndRoundTrips) {
  // Measured = analytic x a ratio that depends on the mode: the correction must
  // find it (the analytic estimate alone is 10-30 % off).
  std::vector<MemorySample> train;
  const RunMode modes[] = {RunMode::Train, RunMode::FwdBwd, RunMode::Inference};
  const double ratio[] = {0.9, 1.1, 1.3};
  for (int64_t h : {32, 64, 96})
    for (int64_t b : {1, 2, 4})
      for (int k = 0; k < 3; ++k) {
        MemorySample s;
        s.graph = graph(gpt2(h, 1 + b % 2), b, 16, modes[k]);
        s.device_kind = "cpu";
        MemoryOptions o;
        o.device_kind = "cpu";
        s.measured_bytes = estimate_memory(s.graph, o).peak * ratio[k];
        s.family = "gpt2";
        train.push_back(std::move(s));
      }
  const MemoryCorrection c = MemoryCorrection::train(train);
  const auto g = graph(gpt2(128, 2), 2, 16, RunMode::Inference);  // larger than any trained on
  MemoryOptions o;
  o.device_kind = "cpu";
  const double truth = estimate_memory(g, o).peak * 1.3;
  const auto v = c.predict_interval(g, "cpu");
  EXPECT_NEAR(v[0] / truth, 1.0, 0.05);
  EXPECT_LE(v[3], v[1]);
  EXPECT_LE(v[1], v[0]);
  EXPECT_LE(v[0], v[2]);
  EXPECT_LE(v[2], v[4]);
  const MemoryCorrection back = MemoryCorrection::from_json(c.to_json(), "memory.json");
  EXPECT_DOUBLE_EQ(back.predict(g, "cpu"), c.predict(g, "cpu"));
  // Bad files: another format, an altered feature list, a missing tree.
  auto j = c.to_json();
  j["format"] = "other";
  EXPECT_NE(test::error_of([&] { MemoryCorrection::from_json(j, "m.json"); }).find("m.json: format"),
            std::string::npos);
  j = c.to_json();
  j["features"][0] = "x";
  EXPECT_NE(test::error_of([&] { MemoryCorrection::from_json(j, "m.json"); }).find("features"),
            std::string::npos);
  j = c.to_json();
  j.erase("xgboost");
  EXPECT_NE(test::error_of([&] { MemoryCorrection::from_json(j, "m.json"); }).find("xgboost"),
            std::string::npos);
  // Too few runs, and a NaN label.
  std::vector<MemorySample> few(train.begin(), train.begin() + 5);
  EXPECT_NE(test::error_of([&] { MemoryCorrection::train(few); }).find("5 runs"), std::string::npos);
  train[3].measured_bytes = NAN;
  EXPECT_NE(test::error_of([&] { MemoryCorrection::train(train); }).find("peak_bytes=nan"),
            std::string::npos);
}

TEST(ParallelMemory, ZeroRecomputeAndPipelineDoWhatTheySay) {
  const auto m = gpt2(128, 4);
  const auto g = graph(m, 2, 64, RunMode::FwdBwd, DType::FP16);
  const auto base = estimate_parallel_memory(g, 1, 1, 8, 0, false, OptimizerKind::AdamW, "cuda");
  const double P = g.total_params();
  EXPECT_DOUBLE_EQ(base.weights, 2 * P);
  EXPECT_DOUBLE_EQ(base.grads, 2 * P);
  EXPECT_DOUBLE_EQ(base.optimizer, 4 * P);  // a model loaded in FP16 steps its own weights: 2 FP16 moments
  // Megatron-LM's mixed precision (fused_kernels): an FP32 master + 2 FP32 moments (16 bytes with
  // the FP16 weights), in the one-GPU estimate too.
  LayerGraph mg = g;
  mg.settings.fused_kernels = true;
  ASSERT_TRUE(fp32_master_weights(mg.settings));
  EXPECT_DOUBLE_EQ(estimate_parallel_memory(mg, 1, 1, 8, 0, false, OptimizerKind::AdamW, "cuda").optimizer,
                   12 * P);
  TrainSettings one = mg.settings;
  one.optimizer = OptimizerKind::AdamW;
  set_run_mode(one, RunMode::Train);
  const LayerGraph mg1 = build_layer_graph(m, one);
  MemoryOptions mo;
  mo.device_kind = "cuda";
  EXPECT_NEAR(estimate_memory(mg1, mo).optimizer, 12 * mg1.trainable_params(), 1e-6);
  const auto z1 = estimate_parallel_memory(g, 1, 1, 8, 1, false, OptimizerKind::AdamW, "cuda");
  const auto z3 = estimate_parallel_memory(g, 1, 1, 8, 3, false, OptimizerKind::AdamW, "cuda");
  EXPECT_DOUBLE_EQ(z1.optimizer, base.optimizer / 8);
  EXPECT_DOUBLE_EQ(z3.weights, base.weights / 8);
  EXPECT_DOUBLE_EQ(z3.grads, base.grads / 8);
  const auto rc = estimate_parallel_memory(g, 1, 1, 8, 0, true, OptimizerKind::AdamW, "cuda");
  EXPECT_LT(rc.activations, base.activations);
  const auto pp4 = estimate_parallel_memory(g, 4, 8, 1, 0, false, OptimizerKind::AdamW, "cuda");
  EXPECT_EQ(pp4.in_flight, 4);
  EXPECT_DOUBLE_EQ(pp4.activations, 4 * base.activations);
  EXPECT_NE(test::error_of([&] {
              estimate_parallel_memory(g, 0, 1, 1, 0, false, OptimizerKind::AdamW, "cuda");
            }).find("pp=0"),
            std::string::npos);
}

// Issue #39, case 12: a bundle's memory.json is read through a manifest its checksums do not
// cover: fields of the wrong type were raw type_errors (json::value), `samples: 1e300` was
// converted to size_t, and log-residual quantiles of 1e300 gave infinite intervals.
TEST(MemoryCorrection, MistypedOrImplausibleFieldsAreErrorsNamingTheKey) {
  std::vector<MemorySample> train;
  for (int64_t h : {32, 64, 96})
    for (int64_t b : {1, 2, 4})
      for (RunMode mode : {RunMode::Train, RunMode::Inference}) {
        MemorySample s;
        s.graph = graph(gpt2(h, 1 + b % 2), b, 16, mode);
        s.device_kind = "cpu";
        MemoryOptions o;
        o.device_kind = "cpu";
        s.measured_bytes = estimate_memory(s.graph, o).peak * 1.1;
        s.family = "gpt2";
        train.push_back(std::move(s));
      }
  const nlohmann::json good = MemoryCorrection::train(train).to_json();
  EXPECT_EQ(test::error_of([&] { MemoryCorrection::from_json(good, "m.json"); }), "<no error>");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["format"] = 5; }, "m.json: format is not"},
      {[](nlohmann::json& j) { j["version"] = "1"; }, "m.json: version=\"1\""},
      {[](nlohmann::json& j) { j["target"] = 5; }, "m.json.target=5 is not a string"},
      {[](nlohmann::json& j) { j["target"] = "log(x)"; }, "m.json: target=\"log(x)\""},
      {[](nlohmann::json& j) { j["samples"] = 1e300; },
       "m.json: samples=1e+300 must be a number in [0, 1000000000]"},
      {[](nlohmann::json& j) { j["samples"] = 2.5; }, "samples=2.5 is not a whole number"},
      {[](nlohmann::json& j) { j["log_residual_q95"] = 1e300; },
       "m.json: log_residual_q95=1e+300 must be a number in [0, 10]"},
      {[](nlohmann::json& j) {
         j["log_residual_q80"] = 0.5;
         j["log_residual_q95"] = 0.25;
       },
       "log_residual_q80=0.5 exceeds log_residual_q95=0.25"},
      {[](nlohmann::json& j) { j["oof_mre"] = 1e9; },
       "m.json: oof_mre=1000000000.0 must be a number in [0, 1000]"},
      {[](nlohmann::json& j) { j.erase("oof_mre"); }, "m.json: oof_mre is missing"},
  };
  for (const auto& [edit, expect] : cases) {
    nlohmann::json j = good;
    edit(j);
    const std::string e = test::error_of([&] { MemoryCorrection::from_json(j, "m.json"); });
    EXPECT_NE(e.find(expect), std::string::npos) << expect << "\n" << e;
  }
}

TEST(MemoryEstimate, AFrozenLinearKeepsNoInputForItsBackward) {
  // LoRA: a frozen weight's dX = dY W needs the weight, not the input, and autograd saves a
  // product's operand only for the gradient that needs it. The FFN's down projection (frozen, no
  // adapter) then keeps none of its [tokens, ffn] input, which full training keeps in every layer.
  const ModelSpec m = gpt2(256, 4);
  const int64_t batch = 2, seq = 64;
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  s.dtype = DType::FP32;
  set_run_mode(s, RunMode::FwdBwd);
  const double full = estimate_memory(build_layer_graph(m, s)).saved;
  s.lora_rank = 8;
  s.lora_targets = parse_lora_targets("q", "--lora-targets");
  const double lora = estimate_memory(build_layer_graph(m, s)).saved;
  const double down_inputs = static_cast<double>(m.num_layers * batch * seq * m.ffn_dim) * 4;
  EXPECT_LT(lora, full - 0.9 * down_inputs);
}

TEST(MemoryEstimate, ALoopThatHoldsItsOutputsKeepsTheLogitsThroughTheBackward) {
  // `out = model(**batch); out.loss.backward()` holds out.logits (the head's output, BF16 under
  // autocast) to the end; the Trainer frees it with the forward. The peak, at the loss's
  // backward, is one [tokens, vocab] tensor higher; the logits are the head's, not the loss
  // cast's FP32 copy.
  ModelSpec m = gpt2(256, 2);
  m.vocab_size = 50000;  // the logits dominate the peak
  const int64_t batch = 4, seq = 256;
  TrainSettings s;
  s.batch = batch;
  s.seq_len = seq;
  set_dtype_recipe(s, "amp-bf16", "--dtype");
  const LayerGraph g = build_layer_graph(m, s);
  MemoryOptions o;
  const MemoryEstimate freed = estimate_memory(g, o);
  o.keep_outputs = true;
  const MemoryEstimate held = estimate_memory(g, o);
  const double logits = static_cast<double>(batch * seq * m.vocab_size) * 2;  // BF16
  EXPECT_EQ(freed.peak_at, "head.loss.bwd");
  EXPECT_NEAR(held.peak - freed.peak, logits, 1024);
  EXPECT_DOUBLE_EQ(held.base, freed.base);
  // Inference: the logits are the last output and stay anyway.
  set_run_mode(s, RunMode::Inference);
  const LayerGraph inf = build_layer_graph(m, s);
  o.keep_outputs = false;
  const double p = estimate_memory(inf, o).peak;
  o.keep_outputs = true;
  EXPECT_DOUBLE_EQ(estimate_memory(inf, o).peak, p);
}
