// Data / tensor / pipeline parallelism (parallel.hpp): the plan's volumes and
// checks, and the composition's structure on the H100 bundle.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "scaledl/core/error.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/memory/memory.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/parallel.hpp"
#include "scaledl/predict/physics.hpp"
#include "scaledl/predict/scale.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;

ModelSpec gpt(int64_t h = 1024, int64_t layers = 24, int64_t heads = 16) {
  return parse_model_config({{"model_type", "gpt2"},
                             {"n_embd", h},
                             {"n_layer", layers},
                             {"n_head", heads},
                             {"vocab_size", 50304},
                             {"n_positions", 1024}},
                            "gpt");
}
TrainSettings settings(int64_t batch, DType d = DType::FP16) {
  TrainSettings s;
  s.batch = batch;
  s.seq_len = 1024;
  s.dtype = d;
  return s;
}
/// One NVLink-like collective model: 100 GB/s bus bandwidth, 10 us per step.
CommModel nvlink_model() {
  CommModel c;
  c.bandwidth_Bps = 100e9;
  c.gamma_s = 10e-6;
  return c;
}
/// 8 GPUs: tp 2 x pp 2 x dp 2, 4 micro-batches, recomputation.
ParallelConfig tp2_pp2_dp2() {
  ParallelConfig c;
  c.gpus = 8;
  c.tp = 2;
  c.pp = 2;
  c.microbatches = 4;
  c.recompute = true;
  return c;
}
}  // namespace

TEST(ParallelPlan, VolumesOfEachScheme) {
  ParallelConfig c = tp2_pp2_dp2();
  const ParallelPlan p = plan_parallel(gpt(), settings(16), c);
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.layers_per_stage, 12);
  EXPECT_EQ(p.micro_batch, 4);
  EXPECT_DOUBLE_EQ(p.bubble_fraction, 1.0 / 5.0);  // (pp - 1) / (M + pp - 1)
  EXPECT_EQ(p.stage.num_heads, 8);
  EXPECT_EQ(p.stage.ffn_dim, 4096 / 2);
  EXPECT_EQ(p.stage.vocab_size, 50304 / 2);
  EXPECT_EQ(p.tp_allreduces, 12 * 6);                   // 2 fwd + 2 bwd + 2 recompute per layer
  EXPECT_DOUBLE_EQ(p.tp_bytes, 4.0 * 1024 * 1024 * 2);  // [mb, s, h] in fp16
  EXPECT_DOUBLE_EQ(p.p2p_bytes, p.tp_bytes);
  EXPECT_DOUBLE_EQ(p.grad_bytes, p.params_per_gpu * 2);
  // A GPU holds about a quarter of the transformer layers' weights (tp 2 x pp 2).
  EXPECT_LT(p.params_per_gpu, 0.5 * parameter_count(gpt()));
  c.recompute = false;
  EXPECT_EQ(plan_parallel(gpt(), settings(16), c).tp_allreduces, 12 * 4);
}

TEST(ParallelPlan, MegatronsVocabularyIsPaddedBeforeItIsSplit) {
  // GPT-2's 50,257 rows: Megatron pads to a multiple of 128 x tp (50,688 at tp 4), so each shard's
  // 12,672 rows are aligned; without the framework's padding the shard has ceil(50,257 / 4).
  ModelSpec m = gpt();
  m.vocab_size = 50257;
  ParallelConfig c;
  c.gpus = 4;
  c.tp = 4;
  TrainSettings s = settings(4);
  EXPECT_EQ(plan_parallel(m, s, c).stage.vocab_size, 12565);
  apply_framework(s, Framework::Megatron);
  EXPECT_EQ(plan_parallel(m, s, c).stage.vocab_size, 12672);
  c.gpus = c.tp = 1;
  EXPECT_EQ(plan_parallel(m, s, c).stage.vocab_size, 50304);
}

TEST(ParallelPlan, ImpossibleSplitsAreOneClearError) {
  auto err = [](ParallelConfig c, int64_t batch = 16) {
    return error_of([&] { plan_parallel(gpt(), settings(batch), c); });
  };
  ParallelConfig c;
  c.gpus = 6;
  c.tp = 4;
  EXPECT_NE(err(c).find("--gpus=6 is not a multiple of --tp x --cp x --pp = 4 x 1 x 1"), std::string::npos)
      << err(c);
  c.gpus = 3;
  c.tp = 3;
  EXPECT_NE(err(c).find("--tp=3 does not divide num_attention_heads=16"), std::string::npos) << err(c);
  c = ParallelConfig{};
  c.gpus = 32;
  c.pp = 32;
  EXPECT_NE(err(c).find("--pp=32 is larger than the 24 layers"), std::string::npos) << err(c);
  c = ParallelConfig{};
  c.microbatches = 3;
  EXPECT_NE(err(c).find("--microbatches=3 does not divide --batch=16"), std::string::npos) << err(c);
  c = ParallelConfig{};
  c.zero = 4;
  EXPECT_NE(err(c).find("--zero=4 is not a ZeRO stage"), std::string::npos);
  c = ParallelConfig{};
  c.gpus = 0;
  EXPECT_NE(err(c).find("--gpus=0"), std::string::npos);
  c = ParallelConfig{};
  c.gpus = 8;
  c.nodes = 3;
  EXPECT_NE(err(c).find("--gpus=8 is not a multiple of --nodes=3"), std::string::npos);
}

TEST(ParallelPrediction, CompositionFollowsTheSchemes) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = gpt();
  ParallelConfig one;
  const ParallelPrediction base = predict_parallel(b, m, settings(8), one, a100, nvlink, nvlink);
  EXPECT_GT(base.t_fwd_ms, 0);
  EXPECT_GT(base.t_bwd_ms, base.t_fwd_ms);  // backward does about twice the forward's work
  EXPECT_EQ(base.t_tp_ms + base.t_p2p_ms + base.t_dp_ms, 0);
  EXPECT_NEAR(base.t_iter_ms, base.t_fwd_ms + base.t_bwd_ms + base.t_opt_ms, 1e-9);
  // Data parallel on 4 GPUs at the same per-replica batch: the same compute plus the gradient all-reduce.
  ParallelConfig dp = one;
  dp.gpus = 4;
  const ParallelPrediction d = predict_parallel(b, m, settings(8), dp, a100, nvlink, nvlink);
  EXPECT_NEAR(d.t_fwd_ms, base.t_fwd_ms, 1e-9);
  EXPECT_NEAR(d.t_dp_ms, nvlink.time_s(d.plan.grad_bytes, 4) * 1e3, 1e-9);
  // ZeRO-1 splits the optimizer step over the 4 replicas.
  dp.zero = 1;
  EXPECT_NEAR(predict_parallel(b, m, settings(8), dp, a100, nvlink, nvlink).t_opt_ms, d.t_opt_ms / 4, 1e-9);
  // Tensor parallel 4: less compute per GPU, plus all-reduces.
  ParallelConfig tp = one;
  tp.gpus = 4;
  tp.tp = 4;
  const ParallelPrediction t = predict_parallel(b, m, settings(8), tp, a100, nvlink, nvlink);
  EXPECT_LT(t.t_fwd_ms, base.t_fwd_ms);
  EXPECT_GT(t.t_tp_ms, 0);
  // Pipeline 4 with 8 micro-batches of quarter-depth stages: the first also runs the embedding,
  // the last the head and loss; 8 slots of the longest stage, 3 of the others' mean.
  ParallelConfig pp = one;
  pp.gpus = 4;
  pp.pp = 4;
  pp.microbatches = 8;
  const ParallelPrediction q = predict_parallel(b, m, settings(8), pp, a100, nvlink, nvlink);
  EXPECT_DOUBLE_EQ(q.plan.bubble_fraction, 3.0 / 11.0);
  EXPECT_GT(q.t_p2p_ms, 0);
  EXPECT_GT(q.t_first_ms, 0);
  EXPECT_GT(q.t_last_ms, q.t_first_ms);  // a 50k-word head and its loss against a table lookup
  const double all = q.t_fwd_ms + q.t_bwd_ms + q.t_p2p_ms, core = all - q.t_first_ms - q.t_last_ms;
  EXPECT_NEAR(q.t_slot_gpu_ms, core + q.t_last_ms, 1e-9);
  EXPECT_NEAR(q.t_pipeline_ms, 8 * (core + q.t_last_ms) + (core + q.t_first_ms) + 2 * core, 1e-9);
  EXPECT_NEAR(q.t_bubble_ms, q.t_pipeline_ms - 8 * q.t_slot_gpu_ms, 1e-9);
  EXPECT_LT(q.t_pipeline_ms, 11 * all);  // not every stage runs the embedding and the head
  // One micro-batch passes each stage once: the stages' sum.
  pp.microbatches = 1;
  const ParallelPrediction q1 = predict_parallel(b, m, settings(8), pp, a100, nvlink, nvlink);
  EXPECT_NEAR(q1.t_pipeline_ms,
              4 * (q1.t_fwd_ms + q1.t_bwd_ms + q1.t_p2p_ms) - 3 * (q1.t_first_ms + q1.t_last_ms), 1e-9);
  pp.microbatches = 8;
  // Recomputation runs the blocks' forward again.
  pp.recompute = true;
  const ParallelPrediction rc = predict_parallel(b, m, settings(8), pp, a100, nvlink, nvlink);
  EXPECT_GT(rc.t_recompute_ms, 0.8 * rc.t_fwd_ms * 0.5);
  EXPECT_LE(rc.t_recompute_ms, rc.t_fwd_ms);
  EXPECT_GT(rc.t_iter_ms, q.t_iter_ms);
  // Without a calibration, more than one GPU is refused.
  EXPECT_NE(error_of([&] {
              predict_parallel(b, m, settings(8), dp, a100, CommModel{}, CommModel{});
            }).find("needs a collective model"),
            std::string::npos);
}

TEST(ParallelPrediction, AHostTermBoundsEverySlotFromBelow) {
  Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = gpt(1024, 8);
  ParallelConfig c = tp2_pp2_dp2();
  const ParallelPrediction gpu = predict_parallel(b, m, settings(8), c, a100, nvlink, nvlink);
  // The nodes a stage's host issues per micro-batch: its forward and backward graph, the
  // recomputed blocks' forward nodes, one per TP all-reduce and one per pipeline send.
  const LayerGraph g = build_layer_graph(gpu.plan.stage, gpu.plan.micro);
  double recomputed = 0;
  for (const LayerNode& n : g.nodes) recomputed += n.dir == Direction::Forward && n.block >= 0 ? 1 : 0;
  EXPECT_GT(recomputed, 0);
  EXPECT_DOUBLE_EQ(gpu.slot_nodes, double(g.nodes.size()) + recomputed + double(gpu.plan.tp_allreduces) + 2);
  EXPECT_EQ(gpu.t_host_ms, 0);
  EXPECT_FALSE(gpu.host_bound);
  EXPECT_FALSE(gpu.to_json().contains("t_host_ms"));
  // Two stages: the longest holds the blocks and the head, the other the blocks and the embedding.
  const double all = gpu.t_fwd_ms + gpu.t_bwd_ms + gpu.t_recompute_ms + gpu.t_tp_ms + gpu.t_p2p_ms;
  EXPECT_NEAR(gpu.t_slot_gpu_ms, all - gpu.t_first_ms, 1e-9);
  EXPECT_NEAR(gpu.t_pipeline_ms, 4 * (all - gpu.t_first_ms) + (all - gpu.t_last_ms), 1e-9);
  EXPECT_NEAR(gpu.iter_ms(0), gpu.t_iter_ms, 1e-9);
  // A host slower than the GPU sets every slot: M x the stage with more nodes x d + the other's + the rest.
  const double first_stage = gpu.slot_nodes - gpu.last_nodes, last_stage = gpu.slot_nodes - gpu.first_nodes;
  const double more = std::max(first_stage, last_stage), fewer = std::min(first_stage, last_stage);
  EXPECT_LT(more, gpu.slot_nodes);
  const double d = 2 * all / fewer;
  c.host_node_ms = d;
  const ParallelPrediction host = predict_parallel(b, m, settings(8), c, a100, nvlink, nvlink);
  EXPECT_TRUE(host.host_bound);
  EXPECT_NEAR(host.t_host_ms, more * d, 1e-9);
  EXPECT_DOUBLE_EQ(host.stage_nodes, more);
  EXPECT_NEAR(host.t_iter_ms, (4 * more + fewer) * d + gpu.t_dp_ms + gpu.t_opt_ms, 1e-6);
  EXPECT_NEAR(gpu.iter_ms(d), host.t_iter_ms, 1e-6);
  EXPECT_TRUE(host.to_json().at("host_bound").get<bool>());
  // The host's phases: the forward graph's nodes, its share of the TP all-reduces (2 of the 6 per
  // layer with recomputation) and its pipeline send, before the backward's.
  double fwd_graph_nodes = 0;
  for (const LayerNode& n : g.nodes) fwd_graph_nodes += n.dir == Direction::Forward ? 1 : 0;
  EXPECT_DOUBLE_EQ(gpu.fwd_nodes, fwd_graph_nodes + double(gpu.plan.tp_allreduces) / 3 + 1);
  const HostRun phases = gpu.host_run("", 0);
  EXPECT_DOUBLE_EQ(phases.phases.nodes_total(), gpu.slot_nodes);
  EXPECT_NEAR(phases.phases.gpu_total(), all, 1e-9);
  EXPECT_NEAR(phases.phases.gpu_ms[0], gpu.t_fwd_ms + gpu.t_tp_ms / 3 + gpu.t_p2p_ms / 2, 1e-9);
  // A host faster than the GPU changes nothing.
  c.host_node_ms = d / 4;
  const ParallelPrediction fast = predict_parallel(b, m, settings(8), c, a100, nvlink, nvlink);
  EXPECT_FALSE(fast.host_bound);
  EXPECT_NEAR(fast.t_iter_ms, gpu.t_iter_ms, 1e-9);
  // Bad values are one error naming the option; the bundle's term for a device is what predict uses.
  for (double bad : {-1.0, double(NAN), 2e3}) {
    c.host_node_ms = bad;
    EXPECT_NE(error_of([&] { plan_parallel(m, settings(8), c); }).find("--host-node-us="), std::string::npos)
        << bad;
  }
  EXPECT_NE(error_of([&] { host_node_ms_of_us(-5); }).find("--host-node-us=-5 must be a number in [0, 1e6]"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(host_node_ms_of_us(70), 0.07);
  EXPECT_EQ(b.host_node_ms_for(a100.key()), 0.0);  // a spec sheet: its host is unknown
  b.host_node_ms_given = 0.07;
  EXPECT_EQ(b.host_node_ms_for(a100.key()), 0.07);
  // On one GPU the given term raises T_sum to nodes x d where the host is slower.
  const LayerGraph whole = build_layer_graph(m, settings(1));
  b.host_node_ms_given = 1.0;
  const IterationPrediction p = b.predict(whole, a100, /*physics=*/false);
  EXPECT_NEAR(p.host_ms, double(whole.nodes.size()), 1e-9);
  EXPECT_NEAR(p.t_sum_ms, p.host_ms, 1e-9);
}

namespace {
/// A small DeepSeek-V3-shaped model: 8 layers, the first dense, 16 experts of 512, top 4, one shared expert.
ModelSpec small_moe() {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kSrc + "/models/deepseek-v3.json"));
  j.merge_patch({{"hidden_size", 1024},
                 {"num_hidden_layers", 8},
                 {"num_attention_heads", 8},
                 {"num_key_value_heads", 8},
                 {"q_lora_rank", 256},
                 {"intermediate_size", 4096},
                 {"moe_intermediate_size", 512},
                 {"n_routed_experts", 16},
                 {"num_experts_per_tok", 4},
                 {"first_k_dense_replace", 1},
                 {"vocab_size", 32000}});
  ModelSpec m = parse_model_config(j, "small-moe");
  m.name = "small-moe";
  return m;
}
}  // namespace

TEST(ParallelPlan, ExpertParallelSpreadsTheExpertsAndExchangesTheTokens) {
  const ModelSpec m = small_moe();
  ParallelConfig c;
  c.gpus = 8;
  c.ep = 4;
  const ParallelPlan p = plan_parallel(m, settings(4), c);
  EXPECT_EQ(p.stage.expert_shards, 4);
  // Dispatch and combine forward and backward in each of the 7 sparse FFNs, of mb x s x k x h elements.
  EXPECT_EQ(p.ep_alltoalls, 7 * 4);
  EXPECT_DOUBLE_EQ(p.ep_bytes, 4.0 * 1024 * 4 * 1024 * 2);
  EXPECT_FALSE(p.ep_inter_node);
  // A GPU holds 4 of the 16 experts of each sparse FFN: 12 x 7 experts fewer than without expert parallelism.
  const int64_t expert = 3 * 1024 * 512;
  c.ep = 1;
  const ParallelPlan whole = plan_parallel(m, settings(4), c);
  EXPECT_DOUBLE_EQ(whole.params_per_gpu - p.params_per_gpu, double(12 * 7 * expert));
  EXPECT_DOUBLE_EQ(p.expert_grad_bytes, double(4 * 7 * expert) * 2);
  EXPECT_EQ(whole.ep_alltoalls, 0);
  // The shard's graph: 4 experts, each taking the tokens of 4 GPUs; the router still scores all 16.
  const LayerGraph gs = build_layer_graph(p.stage, p.micro), gw = build_layer_graph(whole.stage, whole.micro);
  const LayerNode& up = gs.nodes[gs.find("decoder.1.ffn.expert.up")];
  const LayerNode& upw = gw.nodes[gw.find("decoder.1.ffn.expert.up")];
  EXPECT_EQ(up.dims[0], 4);
  EXPECT_EQ(up.dims[1], 4 * upw.dims[1]);
  EXPECT_DOUBLE_EQ(up.cost.flops_fwd, upw.cost.flops_fwd);  // the same FLOPs, a quarter of the weights
  EXPECT_DOUBLE_EQ(up.cost.params, upw.cost.params / 4);
  EXPECT_EQ(gs.nodes[gs.find("decoder.1.ffn.router")].dims[2], 16);
  EXPECT_EQ(static_cast<int64_t>(gs.total_params()), parameter_count(p.stage));
  // Bad splits: one line naming the option.
  auto err = [&](ParallelConfig k, const ModelSpec& mm) {
    return error_of([&] { plan_parallel(mm, settings(4), k); });
  };
  c.ep = 3;
  c.gpus = 6;
  EXPECT_NE(err(c, m).find("--ep=3 does not divide the 16 experts of small-moe"), std::string::npos)
      << err(c, m);
  c.ep = 4;
  c.gpus = 2;
  EXPECT_NE(err(c, m).find("--ep=4 does not divide the data-parallel ways 2"), std::string::npos)
      << err(c, m);
  c.gpus = 4;
  EXPECT_NE(err(c, gpt()).find("--ep=4: gpt2 has no mixture of experts to spread"), std::string::npos)
      << err(c, gpt());
  c.ep = 0;
  EXPECT_NE(err(c, m).find("--ep=0 must be >= 1"), std::string::npos) << err(c, m);
  c.ep = 1;
  c.tp = 3;
  c.gpus = 3;
  EXPECT_NE(err(c, m).find("--tp=3 does not divide num_attention_heads=8"), std::string::npos) << err(c, m);
  ModelSpec odd = m;
  odd.shared_expert_ffn = 500;
  odd.num_heads = odd.num_kv_heads = 12;
  odd.ffn_dim = 516;
  odd.dense_ffn_dim = 4104;
  EXPECT_NE(err(c, odd).find("--tp=3 does not divide the shared expert's FFN size 500"), std::string::npos)
      << err(c, odd);
  odd.shared_expert_ffn = 501;
  odd.dense_ffn_dim = 4100;
  EXPECT_NE(err(c, odd).find("--tp=3 does not divide the dense FFN size 4100"), std::string::npos)
      << err(c, odd);
}

TEST(ParallelPlan, TensorParallelSplitsEachExpertAndTheSharedAndDenseFfns) {
  const ModelSpec m = small_moe();
  ParallelConfig c;
  c.gpus = 8;
  c.tp = 2;
  c.ep = 2;
  const ParallelPlan p = plan_parallel(m, settings(4), c);
  EXPECT_EQ(p.stage.ffn_dim, 256);       // each expert's 512 columns, 2 ways
  EXPECT_EQ(p.stage.dense_ffn(), 2048);  // the dense first FFN's 4096
  EXPECT_EQ(p.stage.shared_expert_ffn, m.shared_expert_ffn / 2);
  EXPECT_EQ(p.stage.num_experts, 16);  // every expert on the tp group, 8 per GPU with ep 2
  EXPECT_EQ(p.stage.expert_shards, 2);
  EXPECT_EQ(static_cast<int64_t>(build_layer_graph(p.stage, p.micro).total_params()),
            parameter_count(p.stage));
  // Per GPU, the sparse FFNs' expert weights halve against tp = 1 at the same ep.
  c.tp = 1;
  c.gpus = 4;
  const ParallelPlan whole = plan_parallel(m, settings(4), c);
  EXPECT_GT(p.tp_allreduces, 0);
  EXPECT_LT(p.params_per_gpu, 0.6 * whole.params_per_gpu);
}

TEST(ParallelPrediction, ExpertParallelAddsAllToAllsAndShrinksTheOptimizerStep) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord h100 = load_device_spec(kSrc + "/models/devices/h100-sxm.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = small_moe();
  ParallelConfig c;
  c.gpus = 8;
  const ParallelPrediction dp = predict_parallel(b, m, settings(4, DType::BF16), c, h100, nvlink, nvlink);
  c.ep = 8;
  const ParallelPrediction ep = predict_parallel(b, m, settings(4, DType::BF16), c, h100, nvlink, nvlink);
  EXPECT_EQ(dp.t_ep_ms, 0);
  // 28 all-to-alls over 8 GPUs: (N-1)/N x S / B + (N-1) gamma each.
  const double one = 7.0 / 8.0 * ep.plan.ep_bytes / 100e9 + 7 * 10e-6;
  EXPECT_NEAR(ep.t_ep_ms, 28 * one * 1e3, 1e-9);
  EXPECT_NEAR(ep.t_slot_gpu_ms,
              ep.t_fwd_ms + ep.t_bwd_ms + ep.t_recompute_ms + ep.t_tp_ms + ep.t_ep_ms + ep.t_p2p_ms, 1e-9);
  // Each GPU updates an eighth of the experts, and no expert gradient is all-reduced (dp = ep).
  EXPECT_LT(ep.t_opt_ms, dp.t_opt_ms);
  EXPECT_NEAR(ep.t_dp_ms, nvlink.time_s(ep.plan.grad_bytes - ep.plan.expert_grad_bytes, 8) * 1e3, 1e-9);
  EXPECT_LT(ep.t_dp_ms, dp.t_dp_ms);
  EXPECT_TRUE(ep.to_json().contains("t_ep_ms"));
  EXPECT_EQ(ep.to_json().at("plan").at("ep"), 8);
}

TEST(ParallelPlan, ContextAndVirtualStagesCheckTheirSplits) {
  ParallelConfig c;
  c.gpus = 8;
  c.cp = 4;
  const ParallelPlan p = plan_parallel(gpt(), settings(8), c);
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.micro.seq_len, 256);  // each GPU holds a quarter of the 1,024 tokens
  EXPECT_EQ(p.cp_steps, 3);
  // K and V of 8 samples x 256 tokens x 16 heads x 64, FP16.
  EXPECT_DOUBLE_EQ(p.cp_kv_bytes, 8.0 * 256 * 2 * 16 * 64 * 2);
  EXPECT_GT(p.grad_bytes, 0);
  // Gradients are reduced over the cp ranks too: cp alone, dp 1, still has replicas.
  c.gpus = 4;
  EXPECT_GT(plan_parallel(gpt(), settings(8), c).grad_bytes, 0);
  auto err = [](ParallelConfig k, int64_t seq = 1024) {
    TrainSettings s = settings(8);
    s.seq_len = seq;
    return error_of([&] { plan_parallel(gpt(), s, k); });
  };
  ParallelConfig bad;
  bad.gpus = 8;
  bad.cp = 3;
  EXPECT_NE(err(bad).find("--gpus=8 is not a multiple of --tp x --cp x --pp = 1 x 3 x 1"), std::string::npos);
  bad.gpus = 6;
  EXPECT_NE(err(bad, 1000).find("--cp=3: --seq=1000 is not divisible by 2 x cp = 6"), std::string::npos);
  ParallelConfig v;
  v.gpus = 4;
  v.pp = 4;
  v.vp = 2;
  v.microbatches = 8;
  EXPECT_NE(err(ParallelConfig{v}).find("<no error>"), std::string::npos);
  const ParallelPlan vp = plan_parallel(gpt(), settings(8), v);
  EXPECT_DOUBLE_EQ(vp.slots(), 8 + 3.0 / 2);
  EXPECT_DOUBLE_EQ(vp.bubble_fraction, 1.5 / 9.5);
  v.vp = 5;
  EXPECT_NE(err(v).find("--vp=5: the 24 layers of gpt2 are not divisible by --pp x --vp = 4 x 5"),
            std::string::npos)
      << err(v);
  v.vp = 2;
  v.microbatches = 2;
  EXPECT_NE(err(v).find("--microbatches=2 is not a multiple of --pp=4"), std::string::npos);
  ParallelConfig nopp;
  nopp.vp = 2;
  EXPECT_NE(err(nopp).find("--vp=2: virtual pipeline stages need --pp > 1"), std::string::npos);
}

TEST(ParallelPrediction, RingAttentionVirtualStagesAndOverlappedReduction) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = gpt();
  // Context parallel 4: each GPU a quarter of the tokens, its queries against every key.
  ParallelConfig one;
  ParallelConfig cp;
  cp.gpus = 4;
  cp.cp = 4;
  const ParallelPrediction base = predict_parallel(b, m, settings(8), one, a100, nvlink, nvlink);
  const ParallelPrediction c = predict_parallel(b, m, settings(8), cp, a100, nvlink, nvlink);
  EXPECT_LT(c.t_fwd_ms, base.t_fwd_ms);
  // Against one GPU running a quarter of the sequence alone, ring attention adds the core's work
  // against the other three quarters of the keys.
  TrainSettings quarter = settings(8);
  quarter.seq_len = 256;
  const ParallelPrediction q = predict_parallel(b, m, quarter, one, a100, nvlink, nvlink);
  EXPECT_GT(c.t_fwd_ms, q.t_fwd_ms);
  EXPECT_GT(c.t_bwd_ms, q.t_bwd_ms);
  // The exposed exchange is at most the whole of it: per layer cp - 1 steps in the forward, twice
  // that in the backward (no recomputation here).
  auto whole_exchange_ms = [&](const CommModel& k) {
    return static_cast<double>(c.plan.layers_per_stage) * 3.0 * static_cast<double>(c.plan.cp_steps) *
           k.time_s(c.plan.cp_kv_bytes, 2) * 1e3;
  };
  EXPECT_LE(c.t_cp_ms, whole_exchange_ms(nvlink));
  EXPECT_GT(c.t_dp_ms, 0);  // the cp ranks hold the same weights
  // On a slow ring the K/V exchange is no longer hidden by the attention: most of it is exposed.
  const CommModel slow{1e8, 1e-4};
  const ParallelPrediction cs = predict_parallel(b, m, settings(8), cp, a100, slow, slow);
  EXPECT_GT(cs.t_cp_ms, c.t_cp_ms);
  EXPECT_LE(cs.t_cp_ms, whole_exchange_ms(slow));
  EXPECT_GT(cs.t_cp_ms, 0.5 * whole_exchange_ms(slow));
  // Virtual stages shrink the bubble and multiply the sends.
  ParallelConfig pp;
  pp.gpus = 4;
  pp.pp = 4;
  pp.microbatches = 8;
  const ParallelPrediction p1 = predict_parallel(b, m, settings(8), pp, a100, nvlink, nvlink);
  pp.vp = 2;
  const ParallelPrediction p2 = predict_parallel(b, m, settings(8), pp, a100, nvlink, nvlink);
  EXPECT_NEAR(p2.t_p2p_ms, 2 * p1.t_p2p_ms, 1e-9);
  // The bubble: (pp - 1) / vp slots of the other stages' mean: the blocks and a third of the first
  // stage's embedding (the longest stage is the last, with the head and loss).
  auto others = [](const ParallelPrediction& p) { return p.t_slot_gpu_ms - p.t_last_ms + p.t_first_ms / 3; };
  EXPECT_NEAR(p2.t_bubble_ms, 1.5 * others(p2), 1e-9);
  EXPECT_NEAR(p1.t_bubble_ms, 3 * others(p1), 1e-9);
  EXPECT_LT(p2.t_bubble_ms, p1.t_bubble_ms);
  // The overlapped reduction hides what the last micro-batch's backward covers, never the last bucket.
  ParallelConfig dp;
  dp.gpus = 8;
  const ParallelPrediction d0 = predict_parallel(b, m, settings(8), dp, a100, slow, slow);
  dp.overlap_grad_reduce = true;
  const ParallelPrediction d1 = predict_parallel(b, m, settings(8), dp, a100, slow, slow);
  EXPECT_NEAR(d1.t_dp_ms, d0.t_dp_ms, 1e-9);
  EXPECT_NEAR(d0.t_dp_exposed_ms, d0.t_dp_ms, 1e-12);
  EXPECT_NEAR(d1.t_dp_exposed_ms,
              std::max(d1.t_dp_ms - d1.t_bwd_ms, d1.t_dp_ms / static_cast<double>(d1.plan.grad_buckets)),
              1e-9);
  EXPECT_LT(d1.t_iter_ms, d0.t_iter_ms);
  EXPECT_NEAR(d1.t_iter_ms, d1.t_pipeline_ms + d1.t_dp_exposed_ms + d1.t_opt_ms, 1e-9);
}

TEST(ParallelPrediction, SequenceParallelShardsTheNormsAndSplitsEachAllReduce) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = gpt();
  ParallelConfig c;
  c.gpus = 4;
  c.tp = 4;
  const ParallelPrediction t = predict_parallel(b, m, settings(8), c, a100, nvlink, nvlink);
  c.sequence_parallel = true;
  const ParallelPrediction s = predict_parallel(b, m, settings(8), c, a100, nvlink, nvlink);
  EXPECT_EQ(s.plan.micro.sequence_shards, 4);
  EXPECT_EQ(t.plan.micro.sequence_shards, 1);
  // Each all-reduce becomes a reduce-scatter and an all-gather of the same tensor (ring form).
  const CommFactors f = comm_factors("allgather", CommForm::Ring, 4);
  EXPECT_NEAR(s.t_tp_ms,
              static_cast<double>(s.plan.tp_allreduces) * 2 *
                  (f.a * s.plan.tp_bytes / nvlink.bandwidth_Bps + f.c * nvlink.gamma_s) * 1e3,
              1e-9);
  EXPECT_EQ(s.plan.tp_allreduces, t.plan.tp_allreduces);
  // The norms, residual adds and dropouts run on a quarter of the tokens; the GEMMs are unchanged.
  const LayerGraph gs = build_layer_graph(s.plan.stage, s.plan.micro);
  const LayerGraph gt = build_layer_graph(t.plan.stage, t.plan.micro);
  ASSERT_EQ(gs.nodes.size(), gt.nodes.size());
  int sharded = 0;
  for (size_t i = 0; i < gs.nodes.size(); ++i) {
    const LayerNode &a = gs.nodes[i], &o = gt.nodes[i];
    ASSERT_EQ(a.name, o.name);
    if (a.type == LayerType::LayerNorm && a.dir == Direction::Forward) {
      EXPECT_EQ(a.dims[0] * 4, o.dims[0]) << a.name;
      ++sharded;
    }
    if (a.type == LayerType::Linear) EXPECT_EQ(a.dims, o.dims) << a.name;
  }
  EXPECT_EQ(sharded, 2 * 24 + 1);  // two per block and the final norm
  EXPECT_LT(s.t_fwd_ms, t.t_fwd_ms);
  EXPECT_LT(s.t_bwd_ms, t.t_bwd_ms);
  // And they keep a quarter of the activations.
  auto mem = [&](const LayerGraph& g) {
    return estimate_parallel_memory(g, 1, 1, 1, 0, false, OptimizerKind::AdamW, "cuda");
  };
  EXPECT_LT(mem(gs).activations, mem(gt).activations);
  EXPECT_NEAR(mem(gs).weights, mem(gt).weights, 1e-6);
  // Bad splits: no tensor parallelism to shard over, tokens not divisible by tp.
  ParallelConfig no_tp;
  no_tp.gpus = 4;
  no_tp.sequence_parallel = true;
  EXPECT_NE(error_of([&] { plan_parallel(m, settings(8), no_tp); }).find("--sp: sequence parallelism needs"),
            std::string::npos);
  TrainSettings odd = settings(8);
  odd.seq_len = 1022;
  EXPECT_NE(error_of([&] { plan_parallel(m, odd, c); }).find("are not divisible by --tp=4"),
            std::string::npos);
}

TEST(ParallelPrediction, RingAttentionCountsTheFusedCoreToo) {
  // With FlashAttention the core is one flash_attention node: its queries still meet every key.
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord h100 = load_device_spec(kSrc + "/models/devices/h100-sxm.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = gpt();
  TrainSettings s = settings(8, DType::BF16);
  s.attention = AttentionImpl::Fused;
  ParallelConfig one, cp;
  cp.gpus = 4;
  cp.cp = 4;
  TrainSettings quarter = s;
  quarter.seq_len = 256;
  const ParallelPrediction c = predict_parallel(b, m, s, cp, h100, nvlink, nvlink);
  const ParallelPrediction q = predict_parallel(b, m, quarter, one, h100, nvlink, nvlink);
  const LayerGraph g = build_layer_graph(q.plan.stage, q.plan.micro);
  const IterationPrediction local = b.predict(g, h100, false);
  const double flash_fwd = local.by_type_ms.at("flash_attention.fwd");
  EXPECT_GT(flash_fwd, 0);
  // The four GPUs' shards run their quarter of the queries against all keys: 3 more local cores.
  EXPECT_NEAR(c.t_fwd_ms - q.t_fwd_ms, 3 * flash_fwd, 0.05 * c.t_fwd_ms);
  EXPECT_GT(c.t_bwd_ms, q.t_bwd_ms);
}

TEST(HostTerm, MegatronsKernelsCarryTheFrameworksDefaultUnlessToldOtherwise) {
  Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord h100 = load_device_spec(kSrc + "/models/devices/h100-sxm.json");
  TrainSettings hf = settings(1, DType::BF16);
  hf.seq_len = 64;
  TrainSettings mg = hf;
  mg.fused_kernels = true;                     // --framework megatron
  EXPECT_EQ(b.host_node_ms_for(h100, hf), 0);  // Hugging Face's recipes: none
  EXPECT_DOUBLE_EQ(b.host_node_ms_for(h100, mg), kMegatronHostNodeMs);
  EXPECT_NE(b.host_node_source(h100, mg).find("Megatron-LM's default"), std::string::npos);
  EXPECT_EQ(framework_host_node_ms(mg, "cpu"), 0);  // a CPU's kernels are not launched by a host
  // One GPU: T_sum = max(the layer sum, nodes x d).
  const LayerGraph g = build_layer_graph(gpt(256, 2, 4), mg);
  const IterationPrediction p = b.predict(g, h100, false);
  EXPECT_NEAR(p.host_ms, kMegatronHostNodeMs * static_cast<double>(g.nodes.size()), 1e-9);
  EXPECT_EQ(b.predict(build_layer_graph(gpt(256, 2, 4), hf), h100, false).host_ms, 0);
  // --host-node-us wins, 0 (CUDA graphs) included.
  b.host_node_ms_given = 0.0;
  EXPECT_EQ(b.host_node_ms_for(h100, mg), 0);
  EXPECT_EQ(b.host_node_source(h100, mg), "");
  b.host_node_ms_given = 0.1;
  EXPECT_DOUBLE_EQ(b.host_node_ms_for(h100, mg), 0.1);
  EXPECT_EQ(b.host_node_source(h100, mg), "--host-node-us");
}

TEST(ParallelPrediction, SelectiveRecomputationRunsTheAttentionCoreAgainAndKeepsNoneOfIt) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const CommModel nvlink = nvlink_model();
  const ModelSpec m = gpt(1024, 8);
  // The attention core of each block: its score and context products and what lies between them
  // (scale, mask, softmax, the attention dropout), not the FFN's dropout or the projections.
  TrainSettings s = settings(2);
  const LayerGraph g = build_layer_graph(m, s);
  const std::vector<bool> core = g.attention_core();
  ASSERT_EQ(core.size(), g.nodes.size());
  for (const char* name :
       {"decoder.0.attn.qk", "decoder.0.attn.softmax", "decoder.0.attn.dropout", "decoder.0.attn.av"})
    EXPECT_TRUE(core.at(static_cast<size_t>(g.find(name)))) << name;
  for (const char* name : {"decoder.0.attn.qkv", "decoder.0.attn.out_dropout", "decoder.0.ffn.dropout"}) {
    ASSERT_GE(g.find(name), 0) << name;
    EXPECT_FALSE(core.at(static_cast<size_t>(g.find(name)))) << name;
  }
  const int per_block = static_cast<int>(std::count(core.begin(), core.end(), true)) / 8;
  EXPECT_GE(per_block, 5);
  // A fused core is one flash_attention node.
  TrainSettings fused = s;
  fused.attention = AttentionImpl::Fused;
  const std::vector<bool> fcore = build_layer_graph(m, fused).attention_core();
  EXPECT_EQ(std::count(fcore.begin(), fcore.end(), true), 8);
  // Time: none < selective < full; the host issues the recomputed core's nodes; no more TP all-reduces.
  ParallelConfig c;
  c.gpus = 2;
  c.tp = 2;
  const ParallelPrediction none = predict_parallel(b, m, s, c, a100, nvlink, nvlink);
  set_recompute(c, Recompute::Selective);
  ASSERT_TRUE(c.selective_recompute && !c.recompute);
  const ParallelPrediction sel = predict_parallel(b, m, s, c, a100, nvlink, nvlink);
  set_recompute(c, Recompute::Full);
  const ParallelPrediction full = predict_parallel(b, m, s, c, a100, nvlink, nvlink);
  EXPECT_EQ(none.t_recompute_ms, 0);
  EXPECT_GT(sel.t_recompute_ms, 0);
  EXPECT_LT(sel.t_recompute_ms, full.t_recompute_ms);
  EXPECT_DOUBLE_EQ(sel.t_tp_ms, none.t_tp_ms);
  EXPECT_LT(none.t_tp_ms, full.t_tp_ms);
  const LayerGraph shard = build_layer_graph(sel.plan.stage, sel.plan.micro);
  const std::vector<bool> sc = shard.attention_core();
  EXPECT_DOUBLE_EQ(sel.slot_nodes,
                   none.slot_nodes + static_cast<double>(std::count(sc.begin(), sc.end(), true)));
  EXPECT_EQ(sel.to_json().at("plan").at("recompute_granularity"), "selective");
  // Memory: the cores' kept tensors go; full recomputation keeps less still.
  auto act = [&](Recompute r) {
    return estimate_parallel_memory(shard, 1, 1, 1, 0, r == Recompute::Full, OptimizerKind::AdamW, "cuda",
                                    r == Recompute::Selective)
        .activations;
  };
  EXPECT_LT(act(Recompute::Selective), act(Recompute::None));
  EXPECT_LT(act(Recompute::Full), act(Recompute::Selective));
  // One granularity at a time; the names parse back.
  c.selective_recompute = true;
  EXPECT_NE(error_of([&] { plan_parallel(m, s, c); }).find("--recompute and --recompute-selective"),
            std::string::npos);
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    EXPECT_EQ(parse_recompute(to_string(r), "--x"), r);
  EXPECT_NE(error_of([&] { parse_recompute("partial", "--x"); }).find("--x=\"partial\""), std::string::npos);
}

TEST(ParallelPrediction, OverlappedTpCommunicationHidesUnderTheGemmsButItsFirstChunk) {
  const Bundle b = load_bundle(kSrc + "/models/bundles/default");
  const DeviceRecord a100 = load_device_spec(kSrc + "/models/devices/a100-sxm4-40gb.json");
  const ModelSpec m = gpt(1024, 8);
  ParallelConfig c;
  c.gpus = 4;
  c.tp = 4;
  c.sequence_parallel = true;
  for (double gbs : {100.0, 0.5}) {  // a fast link (GEMM-bound) and a slow one (communication-bound)
    CommModel link = nvlink_model();
    link.bandwidth_Bps = gbs * 1e9;
    c.overlap_tp_comm = false;
    const ParallelPrediction plain = predict_parallel(b, m, settings(4), c, a100, link, link);
    c.overlap_tp_comm = true;
    const ParallelPrediction over = predict_parallel(b, m, settings(4), c, a100, link, link);
    ASSERT_GT(plain.t_tp_ms, 0);
    EXPECT_EQ(plain.t_tp_hidden_ms, 0);
    double gemm = 0;
    const LayerGraph g = build_layer_graph(over.plan.stage, over.plan.micro);
    const auto detail = b.predict(g, a100, /*physics=*/false);
    for (const auto& [k, ms] : detail.by_type_ms)
      if (k.rfind("linear.", 0) == 0) gemm += ms;
    EXPECT_NEAR(over.t_tp_ms, std::max(plain.t_tp_ms - gemm, plain.t_tp_ms / 4), 1e-9 * plain.t_tp_ms) << gbs;
    EXPECT_NEAR(over.t_tp_ms + over.t_tp_hidden_ms, plain.t_tp_ms, 1e-9 * plain.t_tp_ms);
    EXPECT_LT(over.t_iter_ms, plain.t_iter_ms);
  }
  // It overlaps sequence parallelism's collectives: refused without them.
  c.sequence_parallel = false;
  EXPECT_NE(error_of([&] { plan_parallel(m, settings(4), c); }).find("--overlap-tp-comm needs --sp"),
            std::string::npos);
}

TEST(ScaleLayout, TheTableAndTheJsonNameASplitsOptionsAlike) {
  ParallelConfig c;
  c.gpus = 8;
  c.tp = 2;
  c.pp = 2;
  c.microbatches = 4;
  EXPECT_TRUE(layout_options(c).empty());
  EXPECT_EQ(layout_string(c, 2), "tp 2 x pp 2 x dp 2, M 4, ZeRO 0");
  c.sequence_parallel = true;
  c.overlap_tp_comm = true;
  set_recompute(c, Recompute::Selective);
  EXPECT_EQ(layout_options(c), (std::vector<std::string>{"SP (TP comm overlapped)", "selective recompute"}));
  EXPECT_EQ(layout_string(c, 2),
            "tp 2 x pp 2 x dp 2, M 4, ZeRO 0, SP (TP comm overlapped), selective recompute");
  c.overlap_tp_comm = false;
  set_recompute(c, Recompute::Full);
  EXPECT_EQ(layout_options(c), (std::vector<std::string>{"SP", "recompute"}));
}
