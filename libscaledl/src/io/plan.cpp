// Loading and validating benchmark plans (plan.hpp).
#include "scaledl/design/plan.hpp"
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <charconv>
#include <filesystem>
#include <type_traits>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"

namespace scaledl {

namespace fs = std::filesystem;

std::string LayerConfig::key() const {
  return layer_key(type, dims, dtype);
}

nlohmann::json LayerConfig::to_json() const {
  nlohmann::json d = nlohmann::json::object();
  const auto& names = layer_info(type).dims;
  for (size_t i = 0; i < names.size() && i < dims.size(); ++i) d[names[i]] = dims[i];
  return {{"type", to_string(type)}, {"dims", d}, {"dtype", to_string(dtype)}};
}

LayerConfig parse_layer_config(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object, got {}", ctx, show(j));
  for (auto it = j.begin(); it != j.end(); ++it)
    SCALEDL_CHECK(it.key() == "type" || it.key() == "dims" || it.key() == "dtype",
                  "{}.{} is not a layer config key (type, dims, dtype)", ctx, it.key());
  LayerConfig c;
  SCALEDL_CHECK(j.contains("type"), "{}.type is missing", ctx);
  SCALEDL_CHECK(j["type"].is_string(), "{}.type={} is not a string", ctx, show(j["type"]));
  c.type = parse_layer_type(j["type"].get<std::string>(), ctx + ".type");
  c.dtype = parse_dtype(get_str_or(j, "dtype", ctx, "fp32"), ctx + ".dtype");
  const auto& names = layer_info(c.type).dims;
  SCALEDL_CHECK(j.contains("dims"), "{}.dims is missing (a {} needs {})", ctx, to_string(c.type),
                fmt::join(names, ", "));
  const auto& d = j["dims"];
  const std::string dctx = ctx + ".dims";
  if (d.is_object()) {
    for (auto it = d.begin(); it != d.end(); ++it) {
      bool known = std::find(names.begin(), names.end(), it.key()) != names.end();
      SCALEDL_CHECK(known, "{}.{} is not a dim of {} (dims: {})", dctx, it.key(), to_string(c.type),
                    fmt::join(names, ", "));
    }
    for (const auto& n : names) {
      SCALEDL_CHECK(d.contains(n), "{}.{} is missing (a {} needs {})", dctx, n, to_string(c.type),
                    fmt::join(names, ", "));
      c.dims.push_back(
          get_int(d, n, dctx, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    }
  } else if (d.is_array()) {
    SCALEDL_CHECK(d.size() == names.size(), "{} has {} values but a {} needs {} ({})", dctx, d.size(),
                  to_string(c.type), names.size(), fmt::join(names, ", "));
    for (size_t i = 0; i < d.size(); ++i) {
      SCALEDL_CHECK(d[i].is_number_integer(), "{}[{}]={} is not an integer", dctx, i, show(d[i]));
      c.dims.push_back(d[i].get<int64_t>());
    }
  } else {
    fail("{}={} must be an object of dims ({}) or an array", dctx, show(d), fmt::join(names, ", "));
  }
  try {
    validate_dims(c.type, c.dims);
  } catch (const Error& e) {
    fail("{}: {}", dctx, e.what());
  }
  return c;
}

namespace {

std::string override_suffix(const nlohmann::json& ov) {
  std::vector<std::string> parts;
  for (auto it = ov.begin(); it != ov.end(); ++it) parts.push_back(it.key() + "=" + it.value().dump());
  return parts.empty() ? "" : "[" + fmt::format("{}", fmt::join(parts, ",")) + "]";
}

ModelConfig parse_model_entry(const nlohmann::json& j, const std::string& ctx, const std::string& base_dir) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object, got {}", ctx, show(j));
  for (auto it = j.begin(); it != j.end(); ++it)
    SCALEDL_CHECK(it.key() == "model" || it.key() == "overrides" || it.key() == "settings",
                  "{}.{} is not a model config key (model, overrides, settings)", ctx, it.key());
  SCALEDL_CHECK(j.contains("model"), "{}.model is missing (a config path or an inline config object)", ctx);
  ModelConfig mc;
  std::string name;
  const auto& m = j["model"];
  if (m.is_string()) {
    std::string p = m.get<std::string>();
    SCALEDL_CHECK(!p.empty(), "{}.model is an empty path", ctx);
    fs::path path(p);
    if (path.is_relative() && !base_dir.empty() && fs::exists(fs::path(base_dir) / path))
      path = fs::path(base_dir) / path;
    SCALEDL_CHECK(fs::exists(path),
                  "{}.model=\"{}\": file not found (looked in {} and the current directory)", ctx, p,
                  base_dir.empty() ? "." : base_dir);
    mc.config = read_json_file(path.string());
    mc.source = path.string();
    name = path.stem().string();
  } else if (m.is_object()) {
    mc.config = m;
    mc.source = "inline";
  } else {
    fail("{}.model={} must be a path or a config object", ctx, show(m));
  }
  nlohmann::json ov = j.value("overrides", nlohmann::json::object());
  SCALEDL_CHECK(ov.is_object(), "{}.overrides={} must be an object", ctx, show(ov));
  SCALEDL_CHECK(mc.config.is_object(), "{}.model: the config is not a JSON object", ctx);
  for (auto it = ov.begin(); it != ov.end(); ++it) mc.config[it.key()] = it.value();
  mc.model = parse_model_config(mc.config, ctx + ".model");
  if (!name.empty() && !mc.config.contains("_name_or_path")) mc.model.name = name;
  if (mc.model.name.empty()) mc.model.name = "inline";
  // Overrides change the model, so they are part of its name (and of the store key).
  mc.model.name += override_suffix(ov);
  mc.settings = parse_train_settings(j.value("settings", nlohmann::json::object()), ctx + ".settings");
  validate_settings(mc.model, mc.settings);
  return mc;
}

}  // namespace

Plan parse_plan(const nlohmann::json& j, const std::string& ctx, const std::string& base_dir) {
  SCALEDL_CHECK(j.is_object(), "{}: a plan is a JSON object with \"kind\" and \"configs\"", ctx);
  Plan p;
  SCALEDL_CHECK(j.contains("kind"), "{}.kind is missing (\"layers\" or \"models\")", ctx);
  p.kind = get_str_or(j, "kind", ctx, "");
  SCALEDL_CHECK(p.kind == "layers" || p.kind == "models",
                "{}.kind=\"{}\" is not a plan kind (layers or models)", ctx, p.kind);
  SCALEDL_CHECK(j.contains("configs") && j["configs"].is_array(), "{}.configs must be an array", ctx);
  const auto& cs = j["configs"];
  SCALEDL_CHECK(!cs.empty(), "{}.configs is empty: nothing to measure", ctx);
  for (size_t i = 0; i < cs.size(); ++i) {
    std::string c = fmt::format("{}.configs[{}]", ctx, i);
    if (p.kind == "layers")
      p.layers.push_back(parse_layer_config(cs[i], c));
    else
      p.models.push_back(parse_model_entry(cs[i], c, base_dir));
  }
  return p;
}

Plan load_plan(const std::string& path) {
  nlohmann::json j = read_json_file(path);
  std::string dir = fs::path(path).parent_path().string();
  return parse_plan(j, path, dir.empty() ? "." : dir);
}

nlohmann::json layers_plan_json(const std::vector<LayerConfig>& configs) {
  nlohmann::json cs = nlohmann::json::array();
  for (const auto& c : configs) cs.push_back(c.to_json());
  return {{"kind", "layers"}, {"configs", cs}};
}

Shard parse_shard(const std::string& text, const std::string& what) {
  // "i/n": two decimal integers; a sign is read so that "-1/4" gets the range
  // message rather than a syntax one.
  auto whole_int = [](const std::string& t, int64_t& v) {
    if (t.empty()) return false;
    const char* end = t.data() + t.size();
    auto [p, ec] = std::from_chars(t.data(), end, v);
    return ec == std::errc() && p == end;
  };
  const size_t slash = text.find('/');
  Shard s;
  const bool syntax = slash != std::string::npos && whole_int(text.substr(0, slash), s.index) &&
                      whole_int(text.substr(slash + 1), s.count);
  SCALEDL_CHECK(syntax, "{}={} is not i/n (shard i of n, two integers with 0 <= i < n, e.g. {} 0/4)", what,
                text, what);
  SCALEDL_CHECK(s.count >= 1, "{}={}: the number of shards n={} must be >= 1", what, text, s.count);
  SCALEDL_CHECK(
      s.index >= 0 && s.index < s.count,
      "{}={}: the shard index i={} must be in 0..{} (0-based; a SLURM job array runs --array=0-{} with "
      "{} $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)",
      what, text, s.index, s.count - 1, s.count - 1, what);
  return s;
}

std::vector<size_t> shard_indices(size_t size, const Shard& s) {
  SCALEDL_CHECK(s.count >= 1 && s.index >= 0 && s.index < s.count, "shard {}/{} is not 0 <= i < n", s.index,
                s.count);
  std::vector<size_t> out;
  for (size_t k = static_cast<size_t>(s.index); k < size; k += static_cast<size_t>(s.count)) out.push_back(k);
  return out;
}

void apply_shard(Plan& p, const Shard& s) {
  auto keep = [&s](auto& v) {
    std::remove_reference_t<decltype(v)> kept;
    for (size_t k : shard_indices(v.size(), s)) kept.push_back(std::move(v[k]));
    v = std::move(kept);
  };
  keep(p.layers);
  keep(p.models);
}

}  // namespace scaledl
