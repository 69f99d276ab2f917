// Data / tensor / pipeline parallelism on top of a bundle's layer models
// (parallel.hpp, docs/parallel.md).
#include "scaledl/predict/parallel.hpp"

#include <algorithm>
#include <cmath>

#include "scaledl/core/error.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/predict/bundle.hpp"

namespace scaledl {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Forward time of the graph's transformer blocks over all its forward time,
/// by FLOP (what recomputation runs again: the blocks, not the embedding or the head).
double block_forward_share(const LayerGraph& g) {
  double blocks = 0, all = 0;
  for (const LayerNode& n : g.nodes) {
    if (n.dir != Direction::Forward) continue;
    all += n.cost.flops_fwd;
    if (n.block >= 0) blocks += n.cost.flops_fwd;
  }
  return all > 0 ? blocks / all : 0;
}

double sum_dir(const IterationPrediction& p, const char* suffix) {
  double t = 0;
  const std::string suf = suffix;
  for (const auto& [k, ms] : p.by_type_ms)
    if (k.size() > suf.size() && k.compare(k.size() - suf.size(), suf.size(), suf) == 0) t += ms;
  return t;
}

/// The slot, the pipeline, its bubble and T_iter from the terms of `r` (after they are set or
/// scaled): a stage's slot is its GPU's work or its host's, whichever is longer
/// (HostRun::composed_ms).
void compose_totals(ParallelPrediction& r) {
  const ParallelConfig& c = r.plan.cfg;
  r.t_dp_exposed_ms = r.t_dp_ms;
  if (c.overlap_grad_reduce && r.t_dp_ms > 0) {
    // Buckets are reduced as the last micro-batch's backward frees them (under ZeRO >= 1 the
    // parameter all-gather runs under the first micro-batch's forward); the last bucket is
    // always exposed.
    const double window = r.t_bwd_ms + r.t_recompute_ms + (c.zero >= 1 ? r.t_fwd_ms : 0.0);
    r.t_dp_exposed_ms = std::max(r.t_dp_ms - window,
                                 r.t_dp_ms / static_cast<double>(std::max<int64_t>(1, r.plan.grad_buckets)));
  }
  const HostRun h = r.host_run("", 0);
  const HostRun::Stage longest = h.longest_stage(c.host_node_ms);
  r.t_slot_gpu_ms = longest.gpu_ms;
  r.t_slot_ms = longest.slot_ms;
  r.stage_nodes = longest.nodes;
  r.t_host_ms = longest.nodes * c.host_node_ms;
  r.host_bound = longest.slot_ms > r.t_slot_gpu_ms;
  r.t_pipeline_ms = h.composed_ms(c.host_node_ms) - h.rest_ms;
  r.t_bubble_ms = std::max(0.0, r.t_pipeline_ms - static_cast<double>(c.microbatches) * longest.slot_ms);
  r.t_iter_ms = r.t_pipeline_ms + r.t_dp_exposed_ms + r.t_opt_ms;
}

/// Time of the graph's attention-core kernels (the score and context BMMs and the softmax, or the
/// fused flash_attention kernel), forward or backward. by_type_ms keys are "<type><dir>" or, for a
/// node dtype other than the settings', "<type><dir>.<dtype>".
double attention_core_ms(const IterationPrediction& p, const char* dir) {
  const std::string d = dir;
  double t = 0;
  for (const auto& [k, ms] : p.by_type_ms)
    for (const char* type : {"bmm", "softmax", "flash_attention"}) {
      const std::string base = type + d;
      if (k == base || k.rfind(base + ".", 0) == 0) t += ms;
    }
  return t;
}

/// The forward's share of a micro-batch's TP all-reduces: 2 per layer of the 4 (forward and
/// backward) or of the 6 with recomputation (the recomputed forward's run in the backward phase);
/// an encoder-decoder's cross attention adds one each way.
double tp_forward_share(const ParallelPlan& p) {
  const double ed = p.stage.arch == Arch::EncoderDecoder ? 1.0 : 0.0;
  return (2.0 + ed) / ((p.cfg.recompute ? 6.0 : 4.0) + 2.0 * ed);
}

/// The forward's share of a micro-batch's EP all-to-alls: 2 per sparse layer of the 4, or the 6.
double ep_forward_share(const ParallelPlan& p) {
  return p.cfg.recompute ? 2.0 / 6.0 : 2.0 / 4.0;
}

/// Megatron's gradient bucket: max(40M, 1M x dp) elements.
constexpr double kGradBucketElements = 40e6;

}  // namespace

void set_recompute(ParallelConfig& c, Recompute r) {
  c.recompute = r == Recompute::Full;
  c.selective_recompute = r == Recompute::Selective;
}

Recompute recompute_of(const ParallelConfig& c) {
  return c.recompute ? Recompute::Full : c.selective_recompute ? Recompute::Selective : Recompute::None;
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None:
      return "none";
    case Recompute::Selective:
      return "selective";
    case Recompute::Full:
      return "full";
  }
  fail("recompute granularity id {} is unknown", static_cast<int>(r));
}

Recompute parse_recompute(const std::string& v, const std::string& option) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (v == to_string(r)) return r;
  fail("{}=\"{}\" is not a recomputation granularity (none, selective, full)", option, v);
}

double host_node_ms_of_us(double us) {
  SCALEDL_CHECK(
      std::isfinite(us) && us >= 0 && us <= 1e6,
      "--host-node-us={} must be a number in [0, 1e6] (the host's cost per graph node, microseconds)", us);
  return us / 1e3;
}

ParallelPlan plan_parallel(const ModelSpec& m, const TrainSettings& s, const ParallelConfig& c) {
  SCALEDL_CHECK(c.gpus >= 1 && c.gpus <= (int64_t{1} << 20), "--gpus={} must be in [1, 2^20]", c.gpus);
  SCALEDL_CHECK(c.nodes >= 1 && c.nodes <= c.gpus, "--nodes={} must be in [1, --gpus={}]", c.nodes, c.gpus);
  SCALEDL_CHECK(c.gpus % c.nodes == 0, "--gpus={} is not a multiple of --nodes={}", c.gpus, c.nodes);
  // Every degree is range-checked before any product of them (tp x pp of 2^32 each wraps to 0).
  SCALEDL_CHECK(c.tp >= 1 && c.tp <= c.gpus, "--tp={} must be in [1, --gpus={}]", c.tp, c.gpus);
  SCALEDL_CHECK(c.pp >= 1 && c.pp <= c.gpus, "--pp={} must be in [1, --gpus={}]", c.pp, c.gpus);
  SCALEDL_CHECK(c.microbatches >= 1 && c.microbatches <= (int64_t{1} << 24),
                "--microbatches={} must be in [1, 2^24]", c.microbatches);
  SCALEDL_CHECK(c.cp >= 1 && c.cp <= c.gpus, "--cp={} must be in [1, --gpus={}]", c.cp, c.gpus);
  SCALEDL_CHECK(c.vp >= 1 && c.vp <= 1024, "--vp={} must be in [1, 1024]", c.vp);
  SCALEDL_CHECK(c.gpus % (c.tp * c.cp * c.pp) == 0,
                "--gpus={} is not a multiple of --tp x --cp x --pp = {} x {} x {}", c.gpus, c.tp, c.cp, c.pp);
  SCALEDL_CHECK(c.zero >= 0 && c.zero <= 3, "--zero={} is not a ZeRO stage (0, 1, 2, 3)", c.zero);
  SCALEDL_CHECK(!c.overlap_tp_comm || (c.tp > 1 && c.sequence_parallel),
                "--overlap-tp-comm needs --sp with --tp > 1 (Transformer Engine overlaps sequence "
                "parallelism's all-gathers and reduce-scatters), got --tp={}{}",
                c.tp, c.sequence_parallel ? " --sp" : " without --sp");
  SCALEDL_CHECK(!(c.recompute && c.selective_recompute),
                "--recompute and --recompute-selective: give one granularity");
  SCALEDL_CHECK(c.microbatches >= 1, "--microbatches={} must be >= 1", c.microbatches);
  host_node_ms_of_us(c.host_node_ms * 1e3);
  SCALEDL_CHECK(s.batch % c.microbatches == 0,
                "--microbatches={} does not divide --batch={} (the samples of one data-parallel replica)",
                c.microbatches, s.batch);
  SCALEDL_CHECK(m.num_heads % c.tp == 0, "--tp={} does not divide num_attention_heads={} of {}", c.tp,
                m.num_heads, m.name);
  SCALEDL_CHECK(m.num_kv_heads % c.tp == 0, "--tp={} does not divide num_key_value_heads={} of {}", c.tp,
                m.num_kv_heads, m.name);
  SCALEDL_CHECK(m.ffn_dim % c.tp == 0, "--tp={} does not divide the FFN size {} of {}", c.tp, m.ffn_dim,
                m.name);
  // Mixtures of experts under --tp: each expert, the shared expert and the dense FFNs are split tp
  // ways like the dense FFN (Megatron-Core's default expert-tensor-parallel size, the tp size).
  SCALEDL_CHECK(m.dense_ffn_dim % c.tp == 0, "--tp={} does not divide the dense FFN size {} of {}", c.tp,
                m.dense_ffn_dim, m.name);
  SCALEDL_CHECK(m.shared_expert_ffn % c.tp == 0,
                "--tp={} does not divide the shared expert's FFN size {} of {}", c.tp, m.shared_expert_ffn,
                m.name);
  SCALEDL_CHECK(c.ep >= 1, "--ep={} must be >= 1", c.ep);
  SCALEDL_CHECK(c.ep == 1 || m.num_experts > 0, "--ep={}: {} has no mixture of experts to spread", c.ep,
                m.name);
  SCALEDL_CHECK(m.num_experts == 0 || m.num_experts % c.ep == 0,
                "--ep={} does not divide the {} experts of {}", c.ep, m.num_experts, m.name);
  SCALEDL_CHECK((c.gpus / (c.tp * c.cp * c.pp)) % c.ep == 0,
                "--ep={} does not divide the data-parallel ways {} (--gpus / (--tp x --cp x --pp)): "
                "expert-parallel ranks "
                "are data-parallel ranks",
                c.ep, c.gpus / (c.tp * c.cp * c.pp));
  const int64_t layers = m.num_layers + m.num_decoder_layers;
  SCALEDL_CHECK(c.pp <= layers, "--pp={} is larger than the {} layers of {}", c.pp, layers, m.name);
  SCALEDL_CHECK(
      c.pp == 1 || m.arch != Arch::EncoderDecoder,
      "--pp={}: pipeline stages of encoder-decoder models are not modelled (encoder-only or decoder-only)",
      c.pp);
  SCALEDL_CHECK(run_mode(s) != RunMode::Inference || !c.is_parallel(),
                "--mode=inference: parallel inference is not modelled (train or fwd-bwd)");
  if (c.cp > 1) {
    SCALEDL_CHECK(m.arch != Arch::EncoderDecoder && m.arch != Arch::VisionEncoder,
                  "--cp={}: context parallelism of {} is not modelled (a decoder or encoder over tokens)",
                  c.cp, m.name);
    // Megatron splits the sequence into 2 x cp chunks, two per GPU, to balance causal attention.
    SCALEDL_CHECK(s.seq_len % (2 * c.cp) == 0,
                  "--cp={}: --seq={} is not divisible by 2 x cp = {} (each GPU takes two chunks of the "
                  "sequence)",
                  c.cp, s.seq_len, 2 * c.cp);
  }
  if (c.sequence_parallel) {
    SCALEDL_CHECK(c.tp > 1, "--sp: sequence parallelism needs tensor parallelism (--tp > 1)");
    SCALEDL_CHECK((s.seq_len / c.cp) % c.tp == 0,
                  "--sp: the {} tokens of each sample on one GPU (--seq={} / --cp={}) are not divisible by "
                  "--tp={} (each GPU of the tensor-parallel group takes an equal share)",
                  s.seq_len / c.cp, s.seq_len, c.cp, c.tp);
  }
  if (c.vp > 1) {
    SCALEDL_CHECK(c.pp > 1, "--vp={}: virtual pipeline stages need --pp > 1", c.vp);
    SCALEDL_CHECK(
        layers % (c.pp * c.vp) == 0,
        "--vp={}: the {} layers of {} are not divisible by --pp x --vp = {} x {} (virtual stages of "
        "equal layers)",
        c.vp, layers, m.name, c.pp, c.vp);
    SCALEDL_CHECK(
        c.microbatches % c.pp == 0,
        "--vp={}: --microbatches={} is not a multiple of --pp={} (the interleaved schedule's groups)", c.vp,
        c.microbatches, c.pp);
  }
  ParallelPlan p;
  p.cfg = c;
  p.dp = c.gpus / (c.tp * c.cp * c.pp);
  p.gpus_per_node = c.gpus / c.nodes;
  p.layers_per_stage = ceil_div(m.num_layers, c.pp);
  p.micro_batch = s.batch / c.microbatches;
  p.bubble_fraction = (static_cast<double>(c.pp - 1) / static_cast<double>(c.vp)) / p.slots();
  p.tp_inter_node = c.tp > p.gpus_per_node;
  // One GPU's shard of the slowest stage: heads, FFN columns (the experts' and the shared and dense
  // FFNs' too) and the vocabulary split tp ways.
  ModelSpec st = m;
  st.num_heads = m.num_heads / c.tp;
  st.num_kv_heads = m.num_kv_heads / c.tp;
  st.ffn_dim = m.ffn_dim / c.tp;  // the experts' width too (each expert split tp ways)
  st.dense_ffn_dim = m.dense_ffn_dim / c.tp;
  st.shared_expert_ffn = m.shared_expert_ffn / c.tp;
  // Megatron pads the vocabulary to a multiple of vocab_multiple x tp, so each shard's is a
  // multiple of vocab_multiple (TrainSettings::vocab_multiple).
  const int64_t vm = s.vocab_multiple > 0 ? s.vocab_multiple * c.tp : 1;
  if (m.vocab_size > 0) st.vocab_size = ceil_div(ceil_div(m.vocab_size, vm) * vm, c.tp);
  st.num_layers = p.layers_per_stage;
  st.expert_shards = c.ep;
  if (m.first_dense_layers >
      0)  // the slowest stage: the sparse layers' (DeepSeek's dense ones sit in the first)
    st.first_dense_layers = c.pp > 1 ? 0 : m.first_dense_layers;
  st.name = fmt::format("{} [1/{} tensor shard, {} layers]", m.name, c.tp, p.layers_per_stage);
  validate_model_spec(st, st.name);
  p.stage = st;
  p.micro = s;
  p.micro.batch = p.micro_batch;
  p.micro.seq_len = s.seq_len / c.cp;  // one GPU's tokens of each sample
  p.micro.num_devices = 1;
  p.micro.sequence_shards = c.sequence_parallel ? c.tp : 1;
  set_run_mode(p.micro, RunMode::FwdBwd);
  validate_settings(st, p.micro);
  const double e = dtype_bytes(s.dtype);
  const double act = static_cast<double>(p.micro_batch) * static_cast<double>(tokens_per_sample(m, p.micro)) *
                     static_cast<double>(m.hidden) * e;
  if (c.cp > 1) {  // ring attention: each step passes one GPU's K and V chunk to the next
    p.cp_steps = c.cp - 1;
    const double head_dim = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.hidden / m.num_heads);
    p.cp_kv_bytes = static_cast<double>(p.micro_batch) * static_cast<double>(p.micro.seq_len) * 2.0 *
                    static_cast<double>(m.num_kv_heads / c.tp) * head_dim * e;
    p.cp_inter_node = c.tp * c.cp > p.gpus_per_node;
  }
  if (c.tp > 1) {
    p.tp_allreduces = p.layers_per_stage * ((c.recompute ? 6 : 4) + (m.arch == Arch::EncoderDecoder ? 2 : 0));
    p.tp_bytes = act;
  }
  if (c.pp > 1) p.p2p_bytes = act;
  if (c.ep > 1) {  // dispatch and combine: each token's hidden state to and from its k experts
    p.ep_alltoalls = sparse_layer_count(st, false) * (c.recompute ? 6 : 4);
    p.ep_bytes = act * static_cast<double>(m.moe_top_k);
    p.ep_inter_node = c.tp * c.ep > p.gpus_per_node;
  }
  p.params_per_gpu = static_cast<double>(parameter_count(st));
  // What takes a gradient: every parameter, or with LoRA the adapters alone (the stage's graph).
  const double trainable =
      s.lora_rank > 0 ? build_layer_graph(st, p.micro).trainable_params() : p.params_per_gpu;
  const double ge = dtype_bytes(weight_dtype(s));       // autocast: FP32 weights, so FP32 gradients
  p.grad_bytes = p.dp * c.cp > 1 ? trainable * ge : 0;  // replicas: dp x cp ranks hold the same weights
  p.grad_buckets = std::max<int64_t>(
      1, static_cast<int64_t>(
             std::ceil(trainable / std::max(kGradBucketElements, 1e6 * static_cast<double>(p.dp * c.cp)))));
  p.expert_grad_bytes =
      p.dp * c.cp > 1 && s.lora_rank == 0 ? static_cast<double>(expert_parameter_count(st)) * ge : 0;
  return p;
}

double ParallelPlan::slots() const {
  return static_cast<double>(cfg.microbatches) +
         static_cast<double>(cfg.pp - 1) / static_cast<double>(cfg.vp);
}

nlohmann::json ParallelPlan::to_json() const {
  return {{"gpus", cfg.gpus},
          {"cp", cfg.cp},
          {"vp", cfg.vp},
          {"overlap_grad_reduce", cfg.overlap_grad_reduce},
          {"overlap_tp_comm", cfg.overlap_tp_comm},
          {"sequence_parallel", cfg.sequence_parallel},
          {"cp_kv_bytes", cp_kv_bytes},
          {"cp_inter_node", cp_inter_node},
          {"grad_buckets", grad_buckets},
          {"nodes", cfg.nodes},
          {"tp", cfg.tp},
          {"pp", cfg.pp},
          {"dp", dp},
          {"microbatches", cfg.microbatches},
          {"micro_batch", micro_batch},
          {"zero", cfg.zero},
          {"recompute", cfg.recompute},
          {"recompute_granularity", to_string(recompute_of(cfg))},
          {"layers_per_stage", layers_per_stage},
          {"bubble_fraction", bubble_fraction},
          {"tp_allreduces_per_microbatch", tp_allreduces},
          {"tp_allreduce_bytes", tp_bytes},
          {"p2p_bytes", p2p_bytes},
          {"params_per_gpu", params_per_gpu},
          {"dp_grad_bytes", grad_bytes},
          {"tp_inter_node", tp_inter_node},
          {"ep", cfg.ep},
          {"ep_alltoalls_per_microbatch", ep_alltoalls},
          {"ep_alltoall_bytes", ep_bytes},
          {"ep_inter_node", ep_inter_node},
          {"dp_expert_grad_bytes", expert_grad_bytes}};
}

nlohmann::json ParallelPrediction::to_json() const {
  nlohmann::json j = {{"plan", plan.to_json()},
                      {"t_fwd_ms", t_fwd_ms},
                      {"t_bwd_ms", t_bwd_ms},
                      {"t_recompute_ms", t_recompute_ms},
                      {"t_tp_ms", t_tp_ms},
                      {"t_tp_hidden_ms", t_tp_hidden_ms},
                      {"t_ep_ms", t_ep_ms},
                      {"t_p2p_ms", t_p2p_ms},
                      {"t_pipeline_ms", t_pipeline_ms},
                      {"t_bubble_ms", t_bubble_ms},
                      {"t_dp_ms", t_dp_ms},
                      {"t_cp_ms", t_cp_ms},
                      {"t_dp_exposed_ms", t_dp_exposed_ms},
                      {"t_opt_ms", t_opt_ms},
                      {"slot_nodes", slot_nodes},
                      {"t_iter_ms", t_iter_ms}};
  if (plan.cfg.pp > 1) {  // the first and last stages' own layers, and the longest stage's slot
    j["t_first_stage_extra_ms"] = t_first_ms;
    j["t_last_stage_extra_ms"] = t_last_ms;
    j["t_slot_gpu_ms"] = t_slot_gpu_ms;
  }
  if (single_gpu_ms > 0) {
    j["single_gpu_ms"] = single_gpu_ms;
    j["anchor_factor"] = anchor_factor;
  }
  if (plan.cfg.host_node_ms > 0) {
    j["host_node_ms"] = plan.cfg.host_node_ms;
    j["t_host_ms"] = t_host_ms;
    j["stage_nodes"] = stage_nodes;
    j["host_bound"] = host_bound;
    j["t_slot_ms"] = t_slot_ms;
    j["t_slot_gpu_ms"] = t_slot_gpu_ms;
  }
  return j;
}

HostRun ParallelPrediction::host_run(const std::string& device, double measured_ms) const {
  HostRun h;
  h.device = device;
  h.measured_ms = measured_ms;
  h.slots = plan.slots();
  h.rest_ms = t_dp_exposed_ms + t_opt_ms;
  h.pp = plan.cfg.pp;
  h.microbatches = static_cast<double>(plan.cfg.microbatches);
  const double gpu =
      t_fwd_ms + t_bwd_ms + t_recompute_ms + t_tp_ms + t_ep_ms + t_p2p_ms + t_cp_ms;  // with both parts
  // The host's phases: the forward, with its share of the collectives and its pipeline send; the
  // backward with the recomputed forward it interleaves, and the rest.
  const double fwd_gpu = t_fwd_ms + tp_forward_share(plan) * t_tp_ms + ep_forward_share(plan) * t_ep_ms +
                         (h.pp > 1 ? 0.5 * t_p2p_ms : 0.0) + t_cp_fwd_ms;
  h.phases.add(Direction::Forward, fwd_gpu, fwd_nodes);
  h.phases.add(Direction::Backward, gpu - fwd_gpu, slot_nodes - fwd_nodes);
  if (h.pp <= 1) {
    h.nodes = slot_nodes;
    h.predicted_ms = gpu;
    return h;
  }
  h.nodes = slot_nodes - first_nodes - last_nodes;
  h.predicted_ms = gpu - t_first_ms - t_last_ms;
  h.first_nodes = first_nodes;
  h.first_ms = t_first_ms;
  h.last_nodes = last_nodes;
  h.last_ms = t_last_ms;
  return h;
}

double ParallelPrediction::iter_ms(double host_node_ms) const {
  return host_run("", 0).composed_ms(host_node_ms);
}

ParallelPrediction predict_parallel(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                    const ParallelConfig& c, const DeviceRecord& dev, const CommModel& intra,
                                    const CommModel& inter) {
  return predict_parallel(b, m, s, c, dev, ClusterComm{intra, inter, {}});
}

ParallelPrediction predict_parallel(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                    const ParallelConfig& c, const DeviceRecord& dev,
                                    const ClusterComm& comm) {
  const CommModel& intra = comm.intra;
  const CommModel& inter = comm.inter;
  ParallelPrediction r;
  r.plan = plan_parallel(m, s, c);
  const ParallelPlan& p = r.plan;
  const bool multi = c.gpus > 1;
  SCALEDL_CHECK(
      !multi || intra.bandwidth_Bps > 0,
      "--gpus={} needs a collective model: --fabric NAME (models/fabrics), --comm FILE, or a bundle "
      "trained with --comm",
      c.gpus);
  // One micro-batch of the slowest stage: the layer models' sums by direction
  // (the graph refinement was trained on whole single-GPU models, not on shards).
  const LayerGraph g = build_layer_graph(p.stage, p.micro);
  const IterationPrediction one = b.predict(g, dev, /*physics=*/false);
  r.t_fwd_ms = sum_dir(one, ".fwd");
  r.t_bwd_ms = sum_dir(one, ".bwd");
  r.t_first_ms = one.first_part_ms;
  r.t_last_ms = one.last_part_ms;
  for (const StagePart part : g.stage_parts()) {
    r.first_nodes += part == StagePart::First ? 1.0 : 0.0;
    r.last_nodes += part == StagePart::Last ? 1.0 : 0.0;
  }
  double attn_fwd = 0, attn_bwd = 0;  // the attention core of one GPU's queries against the whole sequence
  if (c.cp > 1) {
    // The graph holds this GPU's s / cp queries against s / cp keys; ring attention runs them
    // against all s keys: cp times the core's work, in cp steps.
    const double local_fwd = attention_core_ms(one, ".fwd"), local_bwd = attention_core_ms(one, ".bwd");
    attn_fwd = static_cast<double>(c.cp) * local_fwd;
    attn_bwd = static_cast<double>(c.cp) * local_bwd;
    r.t_fwd_ms += attn_fwd - local_fwd;
    r.t_bwd_ms += attn_bwd - local_bwd;
  }
  const std::vector<bool> core = c.selective_recompute ? g.attention_core() : std::vector<bool>();
  if (c.recompute) r.t_recompute_ms = r.t_fwd_ms * block_forward_share(g);
  if (c.selective_recompute) {  // the attention cores' share of the forward's layer times
    const auto detail = b.layers.predict_nodes_detail(g, dev);
    double core_ms = 0, fwd_ms = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].dir != Direction::Forward) continue;
      fwd_ms += detail[i].ms;
      core_ms += core[i] ? detail[i].ms : 0.0;
    }
    r.t_recompute_ms = fwd_ms > 0 ? r.t_fwd_ms * core_ms / fwd_ms : 0.0;
  }
  const CommModel& tp_comm = p.tp_inter_node ? inter : comm.inside(c.tp);
  if (c.tp > 1 && !c.sequence_parallel) {
    r.t_tp_ms = static_cast<double>(p.tp_allreduces) * tp_comm.time_s(p.tp_bytes, c.tp) * 1e3;
  } else if (c.tp > 1) {
    // Sequence parallelism: each all-reduce is a reduce-scatter and an all-gather of the same
    // tensor, each of the all-gather's ring form (N-1)/N S/B + (N-1) gamma: the all-reduce's volume,
    // in two collectives.
    const CommFactors f = comm_factors("allgather", CommForm::Ring, c.tp);
    r.t_tp_ms = static_cast<double>(p.tp_allreduces) * 2 *
                (f.a * p.tp_bytes / tp_comm.bandwidth_Bps + f.c * tp_comm.gamma_s) * 1e3;
  }
  if (c.overlap_tp_comm && r.t_tp_ms > 0) {
    // The collectives' chunks run under the GEMMs' chunks; the first chunk of each is exposed.
    double gemm = 0;
    for (const auto& [k, ms] : one.by_type_ms)
      if (k.rfind("linear.", 0) == 0) gemm += ms;
    const double exposed = std::max(r.t_tp_ms - gemm, r.t_tp_ms / static_cast<double>(c.tp));
    r.t_tp_hidden_ms = r.t_tp_ms - exposed;
    r.t_tp_ms = exposed;
  }
  if (c.ep > 1) {
    // An all-to-all (pairwise exchange) has the all-gather's ring form, (N-1)/N S/B + (N-1) gamma, with
    // B the calibrated bus bandwidth: what nccl-tests reports for all three on one NVSwitch node.
    const CommModel& ec = p.ep_inter_node ? inter : comm.inside(c.ep);
    const CommFactors f = comm_factors("allgather", CommForm::Ring, c.ep);
    r.t_ep_ms =
        static_cast<double>(p.ep_alltoalls) * (f.a * p.ep_bytes / ec.bandwidth_Bps + f.c * ec.gamma_s) * 1e3;
  }
  if (c.pp > 1) {
    // Stages spread over nodes when one node cannot hold the tp x cp x pp ranks of a replica.
    const CommModel& pc = c.tp * c.cp * c.pp > p.gpus_per_node ? inter : comm.inside(2);
    // activations forward, their gradient backward, at each of the vp virtual stages
    r.t_p2p_ms = 2 * static_cast<double>(c.vp) * pc.time_s(p.p2p_bytes, 2) * 1e3;
  }
  if (c.cp > 1) {
    // Per layer: cp - 1 ring steps of one K/V chunk in the forward (and again when recomputed),
    // K/V and their gradients in the backward; each step's send overlaps that step's attention.
    const CommModel& cc = p.cp_inter_node ? inter : comm.inside(c.cp);
    const double step_ms = cc.time_s(p.cp_kv_bytes, 2) * 1e3;
    const double layers = static_cast<double>(p.layers_per_stage);
    const double comm_fwd = static_cast<double>(p.cp_steps) * step_ms;
    const double hidden_fwd = attn_fwd / layers, hidden_bwd = attn_bwd / layers;
    r.t_cp_fwd_ms = layers * std::max(0.0, comm_fwd - hidden_fwd);
    r.t_cp_ms = r.t_cp_fwd_ms * (c.recompute || c.selective_recompute ? 2 : 1) +
                layers * std::max(0.0, 2 * comm_fwd - hidden_bwd);
  }
  // The nodes the stage's host issues per micro-batch: every node of the forward and
  // backward graph, the recomputed blocks' forward nodes, one per TP all-reduce and
  // one per pipeline send.
  const double tp_nodes = static_cast<double>(p.tp_allreduces) * (c.sequence_parallel ? 2.0 : 1.0);
  const double ep_nodes = static_cast<double>(p.ep_alltoalls);
  r.slot_nodes = static_cast<double>(g.nodes.size()) + tp_nodes + ep_nodes + (c.pp > 1 ? 2.0 : 0.0);
  if (c.recompute)
    for (const LayerNode& n : g.nodes)
      r.slot_nodes += n.dir == Direction::Forward && n.block >= 0 ? 1.0 : 0.0;
  if (c.selective_recompute)
    for (bool k : core) r.slot_nodes += k ? 1.0 : 0.0;
  // The forward phase: the forward graph's nodes, its share of the collectives and its pipeline send.
  for (const LayerNode& n : g.nodes) r.fwd_nodes += n.dir == Direction::Forward ? 1.0 : 0.0;
  r.fwd_nodes += tp_forward_share(p) * tp_nodes + ep_forward_share(p) * ep_nodes + (c.pp > 1 ? 1.0 : 0.0);
  if (p.dp * c.cp > 1) {
    const int64_t ranks = p.dp * c.cp;  // the replicas of this GPU's weights
    const CommModel& dc = c.tp * ranks > p.gpus_per_node ? inter : comm.inside(ranks);
    // ZeRO-1/2: reduce-scatter + all-gather, the volume of one all-reduce; ZeRO-3 also all-gathers the
    // weights. Under expert parallelism the experts' gradients are all-reduced over the dp / ep replicas of
    // each expert.
    const double dense = p.grad_bytes - p.expert_grad_bytes;
    const double t = c.ep == 1 ? dc.time_s(p.grad_bytes, ranks)
                               : (dense > 0 ? dc.time_s(dense, ranks) : 0) +
                                     (ranks / c.ep > 1 ? dc.time_s(p.expert_grad_bytes, ranks / c.ep) : 0);
    r.t_dp_ms = t * 1e3 * (c.zero == 3 ? 2 : 1);
  }
  // The optimizer step on FP32 master weights (mixed precision keeps them), partitioned over dp by ZeRO.
  if (run_mode(s) == RunMode::Train) {
    TrainSettings t = p.micro;
    t.dtype = DType::FP32;
    t.fp8 = false;  // the step runs on the FP32 masters whatever the GEMMs' recipe
    t.amp = false;
    set_run_mode(t, RunMode::Train);
    const IterationPrediction opt = b.predict(build_layer_graph(p.stage, t), dev, /*physics=*/false);
    r.t_opt_ms = sum_dir(opt, ".update") / (c.zero >= 1 ? static_cast<double>(p.dp * c.cp) : 1.0);
  }
  compose_totals(r);
  return r;
}

double single_gpu_iteration_ms(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                               const DeviceRecord& dev) {
  TrainSettings one = s;
  one.num_devices = 1;  // the same kernels as the composition's micro-batch (the request's recipe)
  return b.predict(build_layer_graph(m, one), dev, /*physics=*/true).t_iter_ms;
}

SingleGpuAnchor single_gpu_anchor(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                  const DeviceRecord& dev, double host_node_ms) {
  ParallelConfig c1;  // the same replica on one GPU: no collective is priced
  c1.host_node_ms = host_node_ms;
  return {single_gpu_iteration_ms(b, m, s, dev),
          predict_parallel(b, m, s, c1, dev, CommModel{}, CommModel{})};
}

ParallelPrediction predict_parallel_anchored(const Bundle& b, const ModelSpec& m, const TrainSettings& s,
                                             const ParallelConfig& c, const DeviceRecord& dev,
                                             const ClusterComm& comm, const SingleGpuAnchor* anchor) {
  ParallelPrediction r = predict_parallel(b, m, s, c, dev, comm);
  const bool alone = !c.is_parallel();
  SingleGpuAnchor own;
  if (!anchor) {
    if (alone)
      own.single_ms = single_gpu_iteration_ms(b, m, s, dev);  // r is the one-GPU composition itself
    else
      own = single_gpu_anchor(b, m, s, dev, c.host_node_ms);
    anchor = &own;
  }
  const ParallelPrediction& raw1 = alone ? r : anchor->raw;
  r.single_gpu_ms = anchor->single_ms;
  SCALEDL_CHECK(raw1.t_iter_ms > 0 && raw1.t_fwd_ms + raw1.t_bwd_ms + raw1.t_opt_ms > 0 &&
                    std::isfinite(r.single_gpu_ms),
                "{}: the single-GPU composition is {} ms: cannot anchor the parallel prediction", m.name,
                raw1.t_iter_ms);
  // The GPU's compute is scaled; the host's cost per node is a measurement of the host and stays.
  // k: the one-GPU composition with its compute scaled by k meets the single GPU's time. Where the
  // GPU sets every phase of the slot that is k (gpu1 + opt1) = T_1; where the host sets a phase, its
  // time stays and the rest is scaled further. The composition grows with k: bisection.
  const double gpu1 = raw1.t_fwd_ms + raw1.t_bwd_ms + raw1.t_recompute_ms, opt1 = raw1.t_opt_ms;
  double k = r.single_gpu_ms / (gpu1 + opt1);
  const double d1 = raw1.plan.cfg.host_node_ms;
  if (d1 > 0) {
    const HostRun h1 = raw1.host_run("", 0);
    auto one_gpu_ms = [&](double f) {  // one GPU: no collective, no data-parallel reduction
      HostRun h = h1;
      h.predicted_ms *= f, h.first_ms *= f, h.last_ms *= f, h.rest_ms = f * opt1;
      return h.composed_ms(d1);
    };
    if (one_gpu_ms(0) < r.single_gpu_ms) {
      double lo = 0, hi = k;  // one_gpu_ms(k) >= k (gpu1 + opt1) = T_1
      for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
        const double mid = 0.5 * (lo + hi);
        (one_gpu_ms(mid) < r.single_gpu_ms ? lo : hi) = mid;
      }
      k = hi;
    }
  }
  r.anchor_factor = k;
  for (double* t : {&r.t_fwd_ms, &r.t_bwd_ms, &r.t_recompute_ms, &r.t_opt_ms, &r.t_first_ms, &r.t_last_ms})
    *t *= k;
  compose_totals(r);
  if (alone) r.t_iter_ms = r.single_gpu_ms;  // the same number, not one rounded differently
  return r;
}

}  // namespace scaledl
