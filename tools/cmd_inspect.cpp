// scaledl inspect MODEL.json: the layer graph of one training iteration as a
// table (or JSON / Graphviz dot). Settings come from the config's optional
// "scaledl" object, then the command-line flags override them.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "model_args.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace {

struct InspectOptions {
  scaledl::cli::ModelArgs args;  ///< model config and training settings
  bool json = false;             ///< print the graph JSON instead of the table
  std::string dot;               ///< write Graphviz here when set
};

std::string dims_str(const scaledl::LayerNode& n) {
  const auto& names = scaledl::layer_info(n.type).dims;
  std::string s;
  for (size_t i = 0; i < n.dims.size(); ++i) s += fmt::format("{}{}={}", i ? " " : "", names[i], n.dims[i]);
  return s;
}

std::string human(double v) {
  const char* unit[] = {"", "K", "M", "G", "T", "P", "E"};
  int u = 0;
  while (v >= 1000 && u < 6) v /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, unit[u]);
}

int run(const InspectOptions& o) {
  using namespace scaledl;
  check_output_is_not_input(o.dot, "--dot", {{"MODEL", o.args.model}});
  auto [m, s] = o.args.load();
  LayerGraph g = build_layer_graph(m, s);
  if (!o.dot.empty()) write_text_file_atomic(o.dot, g.to_dot());
  if (o.json) {
    std::printf("%s\n", g.to_json().dump(1).c_str());
    return 0;
  }
  // The class of the config (architectures[0]) where it says more than the family (MixtralForCausalLM: a
  // llama).
  const std::string family = m.hf_class.empty()
                                 ? std::string(to_string(m.family))
                                 : fmt::format("{} family, {}", to_string(m.family), m.hf_class);
  std::printf("model %s (%s, %s), batch %lld, %s %lld, %s, mode %s, optimizer %s\n", m.name.c_str(),
              family.c_str(), to_string(m.arch), static_cast<long long>(s.batch),
              m.arch == Arch::VisionEncoder ? "tokens/sample" : "seq_len",
              static_cast<long long>(tokens_per_sample(m, s)), to_string(s.dtype), to_string(run_mode(s)),
              s.optimizer_step ? to_string(s.optimizer) : "none");
  if (m.num_experts > 0) {
    const double active = static_cast<double>(active_parameter_count(m));
    const std::string where =
        m.arch == Arch::EncoderDecoder
            ? fmt::format("{} encoder + {} decoder", sparse_layer_count(m, false),
                          sparse_layer_count(m, true))
            : fmt::format("{} of {} layers{}", sparse_layer_count(m, false), m.num_layers,
                          m.first_dense_layers > 0 ? fmt::format(" (the first {} dense, FFN {})",
                                                                 m.first_dense_layers, m.dense_ffn())
                                                   : std::string());
    const bool inference = run_mode(s) == RunMode::Inference, every = every_expert_runs(m, inference);
    std::printf(
        "experts %lld per sparse FFN (top-%lld), sparse FFNs %s, capacity %lld tokens per expert and "
        "sample%s, active params per token %.0f (%s)\n",
        static_cast<long long>(m.num_experts), static_cast<long long>(m.moe_top_k), where.c_str(),
        static_cast<long long>(expert_slots_per_sample(m, tokens_per_sample(m, s), inference)),
        every ? " (inference: every expert takes every token, as Hugging Face's eval mode)"
        : m.arch == Arch::EncoderDecoder ? " (encoder)"
        : m.moe_top_k > 1                ? " (the mean load)"
                                         : "",
        active, human(active).c_str());
  }
  if (m.shared_expert_ffn > 0)
    std::printf("shared expert: a gated FFN of %lld every token takes%s\n",
                static_cast<long long>(m.shared_expert_ffn),
                m.plain_shared_expert ? ", added as it is" : ", scaled by sigmoid(gate(x))");
  if (m.mla())
    std::printf(
        "latent attention: q %s, k/v latent of rank %lld, q/k heads of %lld (%lld rotary), v heads of %lld\n",
        m.q_lora_rank > 0 ? fmt::format("latent of rank {}", m.q_lora_rank).c_str() : "projected directly",
        static_cast<long long>(m.kv_lora_rank), static_cast<long long>(m.head_dim),
        static_cast<long long>(m.qk_rope_dim), static_cast<long long>(m.value_head_dim()));
  std::printf("%4s  %-28s %-13s %-44s %10s %10s %10s %10s %10s\n", "id", "name", "type", "dims", "flops_fwd",
              "flops_bwd", "params", "in_bytes", "out_bytes");
  for (const auto& n : g.nodes) {
    if (n.dir == Direction::Backward) continue;  // backward rows mirror the forward ones
    std::printf("%4d  %-28s %-13s %-44s %10s %10s %10s %10s %10s\n", n.id, n.name.c_str(), to_string(n.type),
                dims_str(n).c_str(), human(n.cost.flops_fwd).c_str(),
                human(n.dir == Direction::Update ? 0 : n.cost.flops_bwd).c_str(),
                human(n.cost.params).c_str(), human(n.cost.in_bytes).c_str(),
                human(n.cost.out_bytes).c_str());
  }
  std::printf("nodes %zu (forward + backward + update), edges %zu\n", g.nodes.size(), g.edges.size());
  std::printf("params %.0f (%s)\n", g.total_params(), human(g.total_params()).c_str());
  std::printf("flops_fwd %.4g  flops_bwd %.4g  flops_update %.4g  total %.4g FLOP per iteration\n",
              g.total_flops_fwd(), g.total_flops_bwd(), g.total_flops_update(),
              g.total_flops_fwd() + g.total_flops_bwd() + g.total_flops_update());
  return 0;
}

scaledl::cli::Registrar reg({"inspect"}, "Print the layer graph of one training iteration of a model config",
                            [](CLI::App& app) {
                              auto o = std::make_shared<InspectOptions>();
                              o->args.add_to(app);
                              app.add_flag("--json", o->json, "print the graph as JSON");
                              app.add_option("--dot", o->dot, "write the graph as Graphviz dot to this file");
                              return [o] { return run(*o); };
                            });

}  // namespace
