// The graph model's configuration (GnnConfig, graph_inference.hpp): JSON and validation.
// No LibTorch: the inference-only model reads it too.
#include <cmath>

#include "gnn/gnn_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gnn/graph_inference.hpp"

namespace scaledl {

void gnn_detail::check_choice(const std::string& v, std::initializer_list<const char*> ok,
                              const std::string& key) {
  for (const char* o : ok)
    if (v == o) return;
  std::string list;
  for (const char* o : ok) list += (list.empty() ? "" : ", ") + std::string(o);
  fail("{}={} is not one of: {}", key, v, list);
}

using gnn_detail::check_choice;

// ---- config -------------------------------------------------------------------

nlohmann::json GnnConfig::to_json() const {
  return {{"encoder", encoder},
          {"target", target},
          {"readout", readout},
          {"hidden", hidden},
          {"layers", layers},
          {"heads", heads},
          {"z_hidden", z_hidden},
          {"mlp_hidden", mlp_hidden},
          {"global_branch", global_branch},
          {"alpha_bound", alpha_bound},
          {"ood_tau", ood_tau},
          {"device_memory_feature", device_memory_feature}};
}

GnnConfig GnnConfig::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected an object, got {}", ctx, show(j));
  GnnConfig c;
  c.encoder = get_str_or(j, "encoder", ctx, c.encoder);
  c.target = get_str_or(j, "target", ctx, c.target);
  c.readout = get_str_or(j, "readout", ctx, c.readout);
  c.hidden = get_int_or(j, "hidden", ctx, 1, 4096, c.hidden);
  c.layers = get_int_or(j, "layers", ctx, 1, 64, c.layers);
  c.heads = get_int_or(j, "heads", ctx, 1, 64, c.heads);
  c.z_hidden = get_int_or(j, "z_hidden", ctx, 1, 4096, c.z_hidden);
  c.mlp_hidden = get_int_or(j, "mlp_hidden", ctx, 1, 4096, c.mlp_hidden);
  if (j.contains("global_branch")) {  // absent in files written before the NoMLP ablation: true
    SCALEDL_CHECK(j["global_branch"].is_boolean(), "{}.global_branch={} is not true or false", ctx,
                  j["global_branch"].dump());
    c.global_branch = j["global_branch"].get<bool>();
  }
  c.alpha_bound = get_num_or(j, "alpha_bound", ctx, 1.0 + 1e-9, 1e6, c.alpha_bound);
  c.ood_tau = get_num_or(j, "ood_tau", ctx, 0.0, 1e9, c.ood_tau);
  c.device_memory_feature =
      get_bool_or(j, "device_memory_feature", ctx, true);  // absent: from before 2026-11-26
  c.validate(ctx);
  return c;
}

void GnnConfig::validate(const std::string& ctx) const {
  check_choice(encoder, {"transformerconv", "anee"}, ctx + ".encoder");
  check_choice(target, {"alpha-beta", "direct"}, ctx + ".target");
  check_choice(readout, {"mean", "sum"}, ctx + ".readout");
  SCALEDL_CHECK(hidden >= 1 && hidden <= 4096, "{}.hidden={} must be in [1, 4096]", ctx, hidden);
  SCALEDL_CHECK(layers >= 1 && layers <= 64, "{}.layers={} must be in [1, 64]", ctx, layers);
  SCALEDL_CHECK(heads >= 1 && heads <= 64, "{}.heads={} must be in [1, 64]", ctx, heads);
  SCALEDL_CHECK(z_hidden >= 1 && z_hidden <= 4096, "{}.z_hidden={} must be in [1, 4096]", ctx, z_hidden);
  SCALEDL_CHECK(mlp_hidden >= 1 && mlp_hidden <= 4096, "{}.mlp_hidden={} must be in [1, 4096]", ctx,
                mlp_hidden);
  SCALEDL_CHECK(std::isfinite(alpha_bound) && alpha_bound > 1 && alpha_bound <= 1e6,
                "{}.alpha_bound={} must be in (1, 1e6]", ctx, alpha_bound);
  SCALEDL_CHECK(std::isfinite(ood_tau) && ood_tau >= 0, "{}.ood_tau={} must be >= 0 (0 = off)", ctx, ood_tau);
}
}  // namespace scaledl
