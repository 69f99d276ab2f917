// Allocator-exact memory readings (issue #15): the counting CPU allocator, the
// peak of layer calls and of whole iterations.
#include <gtest/gtest.h>

#include "bench/memory_meter.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/bench/model_bench.hpp"
#include "scaledl/design/plan.hpp"

using namespace scaledl;

TEST(MemoryMeter, CountsEveryCpuTensorExactly) {
  const torch::Device cpu(torch::kCPU);
  memory_meter_install(cpu);
  const double before = memory_meter_read(cpu).current_bytes;
  memory_meter_reset_peak(cpu);
  {
    auto a = torch::empty({1000}, torch::kFloat32);    // 4000 bytes
    auto b = torch::empty({10, 10}, torch::kFloat64);  // 800 bytes
    EXPECT_EQ(memory_meter_read(cpu).current_bytes - before, 4800);
    b = torch::Tensor();
    EXPECT_EQ(memory_meter_read(cpu).current_bytes - before, 4000);
  }
  const MemoryReading r = memory_meter_read(cpu);
  EXPECT_EQ(r.current_bytes, before);
  EXPECT_EQ(r.peak_bytes - before, 4800);
  EXPECT_EQ(r.method, "cpu-counting-allocator");
  memory_meter_reset_peak(cpu);
  EXPECT_EQ(memory_meter_read(cpu).peak_bytes, before);
}

TEST(MemoryMeter, LayerRowsKnowWhatTheForwardKeeps) {
  TimingOptions t;
  t.warmup_min = 1;
  t.warmup_max = 1;
  t.repeats = 1;
  // A linear keeps references to its input and weight: nothing new.
  auto lin = time_layer(LayerType::Linear, {64, 32, 16, 1}, DType::FP32, torch::kCPU, t);
  ASSERT_EQ(lin.memory.method, "cpu-counting-allocator");
  EXPECT_EQ(lin.memory.saved_bytes, 0);
  EXPECT_EQ(lin.memory.base_bytes, (64 * 32 + 16 * 32 + 16) * 4);
  EXPECT_GE(lin.memory.peak_bytes, lin.memory.base_bytes + 64 * 16 * 4);
  // LayerNorm keeps the mean and 1/std of every row (FP32).
  auto ln = time_layer(LayerType::LayerNorm, {64, 32}, DType::FP32, torch::kCPU, t);
  EXPECT_EQ(ln.memory.saved_bytes, 2 * 64 * 4);
  // CPU dropout keeps its scaled noise tensor, one element per input element.
  auto dr = time_layer(LayerType::Dropout, {4096}, DType::FP32, torch::kCPU, t);
  EXPECT_EQ(dr.memory.saved_bytes, 4096 * 4);
}

TEST(MemoryMeter, ModelRunsRecordTheIterationPeak) {
  auto plan = nlohmann::json::parse(R"({"kind":"models","configs":[
    {"model":"models/gpt2.json","overrides":{"n_embd":32,"n_layer":1,"n_head":2,"vocab_size":100},
     "settings":{"batch":2,"seq_len":8}},
    {"model":"models/gpt2.json","overrides":{"n_embd":32,"n_layer":1,"n_head":2,"vocab_size":100},
     "settings":{"batch":2,"seq_len":8,"backward":false,"optimizer_step":false}}]})");
  auto cfgs = parse_plan(plan, "test", SCALEDL_SOURCE_DIR).models;
  ModelBenchOptions o;
  o.warmup = 1;
  o.warmup_extra = 0;
  o.repeats = 1;
  o.probe_repeats = 0;
  auto train = bench_model(cfgs[0].model, cfgs[0].settings, torch::kCPU, o);
  auto infer = bench_model(cfgs[1].model, cfgs[1].settings, torch::kCPU, o);
  ASSERT_TRUE(train.memory.measured()) << train.status << " " << train.reason;
  ASSERT_TRUE(infer.memory.measured());
  // Base: weights + AdamW's two moments + the batch, so training's base is about 3x inference's.
  EXPECT_GT(train.memory.base_bytes, 2.5 * (infer.memory.base_bytes - 2 * 2 * 8 * 8));
  EXPECT_GT(train.memory.peak_bytes, train.memory.base_bytes);
  EXPECT_GT(infer.memory.peak_bytes, infer.memory.base_bytes);
  EXPECT_LT(infer.memory.peak_bytes, train.memory.peak_bytes);
}
