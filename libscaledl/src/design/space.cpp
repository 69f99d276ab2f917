// Design spaces: parsing, constrained candidate enumeration, plan configs.
// (Feature encoding: encoder.cpp; existing points and make_plan: plan.cpp.)
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <unordered_set>

#include "design/space_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/memory/memory.hpp"

namespace scaledl {

namespace fs = std::filesystem;
using design_detail::Expr;
using design_detail::Value;

const char* to_string(Terms t) {
  static const char* n[] = {"linear", "interactions", "quadratic"};
  return n[static_cast<int>(t)];
}

Terms parse_terms(const std::string& s, const std::string& key) {
  for (int i = 0; i < 3; ++i)
    if (s == to_string(static_cast<Terms>(i))) return static_cast<Terms>(i);
  fail("{}=\"{}\" is not a term set (expected linear, interactions or quadratic)", key, s);
}

double SpaceParameter::encode(double x) const {
  double t = log ? std::log(x) : x;
  return hi > lo ? 2 * (t - lo) / (hi - lo) - 1 : 0.0;
}

namespace design_detail {

const std::vector<std::string>& model_aliases(const std::string& canonical) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"num_layers", {"num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers"}},
      {"hidden", {"hidden_size", "n_embd", "d_model"}},
      {"heads", {"num_attention_heads", "n_head", "num_heads"}},
      {"kv_heads", {"num_key_value_heads"}},
      {"ffn_dim", {"intermediate_size", "n_inner", "d_ff", "ffn_dim"}},
  };
  static const std::vector<std::string> none;
  for (auto& [k, v] : table)
    if (k == canonical) return v;
  return none;
}

const char* model_spec_key(const std::string& canonical) {
  if (canonical == "num_layers") return "num_layers";
  if (canonical == "hidden") return "hidden";
  if (canonical == "heads") return "num_heads";
  if (canonical == "kv_heads") return "num_kv_heads";
  if (canonical == "ffn_dim") return "ffn_dim";
  return nullptr;
}

namespace {
std::string label_of(const json& v, size_t i) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0) return fs::path(s).stem().string();
    return s;
  }
  if (v.is_number() || v.is_boolean()) return v.dump();
  if (v.is_object() && v.contains("label") && v["label"].is_string()) return v["label"].get<std::string>();
  return "level" + std::to_string(i);
}
}  // namespace

/// Names that expressions may use: parameters, then derived values, then fixed keys.
Compiled::Compiled(const DesignSpace& s) : sp(&s) {
  for (auto& p : s.params) slot_names.push_back(p.name);
  for (auto& [n, e] : s.derived) slot_names.push_back(n);
  for (auto it = s.fixed.begin(); it != s.fixed.end(); ++it) slot_names.push_back(it.key());
  std::string known;
  for (auto& n : slot_names) known += (known.empty() ? "" : ", ") + n;
  auto slot_of = [&](const std::string& n) -> int {
    for (size_t i = 0; i < slot_names.size(); ++i)
      if (slot_names[i] == n) return static_cast<int>(i);
    return -1;
  };
  for (size_t i = 0; i < s.derived.size(); ++i) {
    const std::string ctx = fmt::format("{}.derived[{}]", s.path.empty() ? "space" : s.path, i);
    derived.emplace_back(s.derived[i].second, ctx + ".expr", slot_of, known);
    // Derived values are evaluated in order: one may use parameters, fixed keys
    // and earlier derived values only (this also rules out cycles such as
    // aa = bb, bb = aa + 1, which would read a value not computed yet).
    for (int u : derived.back().slots()) {
      const int j = u - static_cast<int>(s.params.size());
      if (j < 0 || j >= static_cast<int>(s.derived.size())) continue;
      SCALEDL_CHECK(
          j < static_cast<int>(i),
          "{} (\"{}\" = {}) uses derived value \"{}\" defined {}: a derived value may use parameters, "
          "fixed keys and earlier derived values only (reorder them; a cycle cannot be ordered)",
          ctx, s.derived[i].first, s.derived[i].second, s.derived[j].first,
          j == static_cast<int>(i) ? "by itself" : fmt::format("after it (derived[{}])", j));
    }
  }
  for (size_t i = 0; i < s.constraints.size(); ++i)
    if (!s.constraints[i].expr.empty())
      constraints.emplace_back(s.constraints[i].expr,
                               fmt::format("{}.constraints[{}].expr", s.path.empty() ? "space" : s.path, i),
                               slot_of, known);
    else
      constraints.emplace_back();
  // Layer spaces: dims of each type, and which parameters are dims.
  if (s.kind == "layers") {
    for (size_t i = 0; i < s.params.size(); ++i) {
      const std::string& n = s.params[i].name;
      if (n == "type") type_param = static_cast<int>(i);
      if (n == "dtype") dtype_param = static_cast<int>(i);
    }
  }
  if (s.kind == "models")
    for (size_t i = 0; i < s.params.size(); ++i)
      if (s.params[i].name == "model") model_param = static_cast<int>(i);
  // Base model configs (models): read once per level of "model" (or the fixed one).
  if (s.kind == "models") {
    std::vector<json> vals;
    if (model_param >= 0)
      vals = s.params[model_param].values;
    else
      vals.push_back(s.fixed.at("model"));
    for (auto& v : vals) {
      json base = v.is_object() && v.contains("value") && v.contains("label") ? v["value"] : v;
      if (base.is_string()) {
        fs::path p = base.get<std::string>();
        fs::path full = p.is_absolute() ? p : fs::path(s.dir) / p;
        base_paths.push_back(fs::absolute(full).lexically_normal().string());
        base_configs.push_back(read_json_file(base_paths.back()));
      } else {
        SCALEDL_CHECK(base.is_object(), "{}: model value {} is neither a config path nor a config object",
                      s.path, show(base));
        base_paths.push_back("");
        base_configs.push_back(base);
      }
    }
  }
}

std::string Compiled::layer_type_label(const Candidate& c) const {
  if (type_param >= 0) return sp->params[type_param].labels[c[type_param]];
  return sp->fixed.at("type").get<std::string>();
}

bool Compiled::is_active(size_t i, const Candidate& c, const std::string& type_label) const {
  const SpaceParameter& p = sp->params[i];
  for (auto& [gate, labels] : p.when) {
    int g = -1;
    for (size_t q = 0; q < sp->params.size(); ++q)
      if (sp->params[q].name == gate) g = static_cast<int>(q);
    if (g < 0 || c[g] < 0) return false;
    if (std::find(labels.begin(), labels.end(), sp->params[g].labels[c[g]]) == labels.end()) return false;
  }
  if (sp->kind == "layers" && static_cast<int>(i) != type_param && static_cast<int>(i) != dtype_param &&
      is_dim_name(p.name)) {
    const auto& dims = layer_info(parse_layer_type(type_label)).dims;
    return std::find(dims.begin(), dims.end(), p.name) != dims.end();
  }
  return true;
}

bool Compiled::is_dim_name(const std::string& n) const {
  for (const auto& info : all_layer_infos())
    for (const auto& d : info.dims)
      if (d == n) return true;
  return false;
}

std::vector<Value> Compiled::slots(const Candidate& c) const {
  std::vector<Value> v(slot_names.size());
  for (size_t i = 0; i < sp->params.size(); ++i) {
    if (c[i] < 0) continue;
    const SpaceParameter& p = sp->params[i];
    v[i].valid = true;
    if (p.numeric()) {
      v[i].num = p.values[c[i]].get<double>();
    } else {
      v[i].is_str = true;
      v[i].str = p.labels[c[i]];
    }
  }
  // Fixed values first: derived expressions may use them (filled after the
  // derived values, they read as inactive and the derived value was dropped).
  size_t f = 0;
  for (auto it = sp->fixed.begin(); it != sp->fixed.end(); ++it, ++f) {
    Value& x = v[sp->params.size() + derived.size() + f];
    if (it->is_number()) {
      x.valid = true;
      x.num = it->get<double>();
    } else if (it->is_string()) {
      x.valid = x.is_str = true;
      x.str = it->get<std::string>();
    }
  }
  const size_t base = sp->params.size();
  for (size_t d = 0; d < derived.size(); ++d) v[base + d] = derived[d].eval(v);
  return v;
}

/// Training memory above which a candidate is infeasible even without a memory
/// constraint: 1 TB, more than any accelerator or the hosts our campaigns run on.
constexpr double kMaxCandidateBytes = 1e12;

/// Index of the first failing constraint, constraints.size() for an invalid config, or -1.
int Compiled::violated(const Candidate& c, std::string* why) const {
  std::vector<Value> v = slots(c);
  bool need_memory = false;
  for (size_t i = 0; i < sp->constraints.size(); ++i) {
    if (sp->constraints[i].expr.empty()) {
      need_memory = true;
      continue;
    }
    Value r = constraints[i].eval(v);
    if (!r.valid) continue;  // uses an inactive parameter: does not apply
    if (r.is_str || !(r.num != 0) || std::isnan(r.num)) return static_cast<int>(i);
  }
  double mem = 0;
  try {
    mem = check_and_memory(c);
  } catch (const Error& e) {
    if (why && why->empty()) *why = e.what();
    return static_cast<int>(sp->constraints.size());
  }
  // Without a memory constraint, still no candidate larger than any device:
  // such a layer or model cannot even be allocated for a measurement.
  if (mem > kMaxCandidateBytes) {
    if (why && why->empty())
      *why = fmt::format("needs {:.3g} TB of memory, more than any device ({:.0f} TB)", mem / 1e12,
                         kMaxCandidateBytes / 1e12);
    return static_cast<int>(sp->constraints.size());
  }
  if (need_memory)
    for (size_t i = 0; i < sp->constraints.size(); ++i)
      if (sp->constraints[i].expr.empty() && mem > sp->constraints[i].max_memory_bytes)
        return static_cast<int>(i);
  return -1;
}

}  // namespace design_detail

// ---------------------------------------------------------------------------
// Parsing

namespace {

std::vector<json> numeric_levels(const json& pj, const std::string& ctx, ParamKind kind, bool log) {
  double lo = pj.at("min").get<double>(), hi = pj.at("max").get<double>();
  SCALEDL_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "{}: min={} must be <= max={}", ctx, lo,
                hi);
  SCALEDL_CHECK(!log || lo > 0, "{}.min={} must be > 0 for a log-scale parameter", ctx, lo);
  bool has_step = pj.contains("step"), has_count = pj.contains("count");
  SCALEDL_CHECK(has_step != has_count, "{}: give exactly one of \"step\" or \"count\"", ctx);
  std::vector<double> xs;
  if (has_step) {
    double st = get_num_or(pj, "step", ctx, 1e-12, 1e18, 1);
    SCALEDL_CHECK((hi - lo) / st <= 1e7, "{}.step={} gives more than 10^7 levels", ctx, st);
    for (double x = lo; x <= hi + 1e-9 * std::max(1.0, std::fabs(hi)); x += st) xs.push_back(x);
  } else {
    int64_t n = get_int(pj, "count", ctx, 1, 10000000);
    for (int64_t i = 0; i < n; ++i) {
      double t = n == 1 ? 0.0 : double(i) / double(n - 1);
      xs.push_back(log ? std::exp(std::log(lo) + t * (std::log(hi) - std::log(lo))) : lo + t * (hi - lo));
    }
  }
  std::vector<json> out;
  if (kind == ParamKind::Integer) {
    std::vector<int64_t> is;
    for (double x : xs) is.push_back(static_cast<int64_t>(std::llround(x)));
    is.erase(std::unique(is.begin(), is.end()), is.end());
    for (auto v : is) out.emplace_back(v);
  } else {
    for (double x : xs) out.emplace_back(x);
  }
  return out;
}

// parse_space's steps, in the order it runs them: top-level keys, each
// parameter (kind, levels, encoding range, "when"), parameters' keys, derived
// values, constraints, then the checks of a layers or a models space.

void check_space_keys(const json& j, const std::string& ctx) {
  static const std::vector<std::string> known_keys = {"kind",        "terms",      "max_candidates",
                                                      "fixed",       "parameters", "derived",
                                                      "constraints", "_comment",   "description"};
  for (auto it = j.begin(); it != j.end(); ++it)
    SCALEDL_CHECK(std::find(known_keys.begin(), known_keys.end(), it.key()) != known_keys.end(),
                  "{}: unknown key \"{}\" (known: kind, terms, max_candidates, fixed, parameters, derived, "
                  "constraints, _comment)",
                  ctx, it.key());
}

ParamKind parse_param_kind(const json& pj, const std::string& pc) {
  std::string kind = get_str_or(pj, "kind", pc, "");
  if (kind == "integer") return ParamKind::Integer;
  if (kind == "real") return ParamKind::Real;
  if (kind == "grid") return ParamKind::Grid;
  if (kind == "categorical") return ParamKind::Categorical;
  fail("{}.kind=\"{}\" is not a parameter kind (integer, real, grid, categorical)", pc, kind);
}

/// integer / real: levels from min, max and step or count; log by default for
/// integers spanning >= 4x.
void parse_range_levels(const json& pj, const std::string& pc, SpaceParameter* p) {
  SCALEDL_CHECK(pj.contains("min") && pj["min"].is_number() && pj.contains("max") && pj["max"].is_number(),
                "{}: numeric \"min\" and \"max\" are required", pc);
  double lo = pj["min"].get<double>(), hi = pj["max"].get<double>();
  bool def_log = p->kind == ParamKind::Integer && lo >= 1 && hi >= 4 * lo;
  p->log = get_bool_or(pj, "log", pc, def_log);
  p->values = numeric_levels(pj, pc, p->kind, p->log);
}

/// grid: finite numbers; log by default for positive integers spanning >= 4x.
void check_grid_levels(const json& pj, const std::string& pc, SpaceParameter* p) {
  bool ints = true, pos = true;
  double lo = INFINITY, hi = -INFINITY;
  for (auto& v : p->values) {
    SCALEDL_CHECK(v.is_number() && std::isfinite(v.get<double>()), "{}.values: {} is not a finite number", pc,
                  show(v));
    ints &= v.is_number_integer();
    pos &= v.get<double>() > 0;
    lo = std::min(lo, v.get<double>());
    hi = std::max(hi, v.get<double>());
  }
  p->log = get_bool_or(pj, "log", pc, ints && pos && hi >= 4 * lo);
  SCALEDL_CHECK(!p->log || pos, "{}: log scale needs positive values", pc);
}

/// categorical: a distinct label per level; {"label", "value"} levels keep the value.
void label_categorical_levels(const std::string& pc, SpaceParameter* p) {
  for (size_t l = 0; l < p->values.size(); ++l) {
    p->labels.push_back(design_detail::label_of(p->values[l], l));
    if (p->values[l].is_object() && p->values[l].contains("label") && p->values[l].contains("value"))
      p->values[l] = p->values[l]["value"];
  }
  for (size_t a = 0; a < p->labels.size(); ++a)
    for (size_t b = a + 1; b < p->labels.size(); ++b)
      SCALEDL_CHECK(p->labels[a] != p->labels[b], "{}.values: label \"{}\" is repeated", pc, p->labels[a]);
}

/// Distinct levels only; the encoding range is over the (log) levels.
void set_encoding_range(SpaceParameter* p) {
  std::vector<double> xs;
  for (auto& v : p->values) xs.push_back(v.get<double>());
  p->lo = INFINITY;
  p->hi = -INFINITY;
  for (double x : xs) {
    double t = p->log ? std::log(x) : x;
    p->lo = std::min(p->lo, t);
    p->hi = std::max(p->hi, t);
  }
}

/// "when": {"gate": label or [labels]}, each gate an earlier categorical parameter.
void parse_when(const json& pj, const std::string& pc, const std::vector<SpaceParameter>& earlier,
                SpaceParameter* p) {
  SCALEDL_CHECK(pj["when"].is_object(), "{}.when must be an object {{\"param\": [labels]}}", pc);
  for (auto it = pj["when"].begin(); it != pj["when"].end(); ++it) {
    const SpaceParameter* g = nullptr;
    for (auto& q : earlier)
      if (q.name == it.key()) g = &q;
    SCALEDL_CHECK(g && !g->numeric(), "{}.when: \"{}\" is not an earlier categorical parameter", pc,
                  it.key());
    std::vector<std::string> labels;
    if (it->is_string())
      labels.push_back(it->get<std::string>());
    else {
      SCALEDL_CHECK(it->is_array(), "{}.when.{} must be a label or a list of labels", pc, it.key());
      for (auto& l : *it) labels.push_back(l.is_string() ? l.get<std::string>() : l.dump());
    }
    for (auto& l : labels)
      SCALEDL_CHECK(std::find(g->labels.begin(), g->labels.end(), l) != g->labels.end(),
                    "{}.when.{}: \"{}\" is not a level of {}", pc, it.key(), l, it.key());
    p->when.emplace_back(it.key(), labels);
  }
}

/// parameters[i] of `sp` (whose params so far are the earlier ones).
SpaceParameter parse_parameter(const json& pj, size_t i, const std::string& ctx, const DesignSpace& sp) {
  std::string pc = fmt::format("{}.parameters[{}]", ctx, i);
  SCALEDL_CHECK(pj.is_object(), "{} must be an object, got {}", pc, show(pj));
  SpaceParameter p;
  p.name = get_str_or(pj, "name", pc, "");
  SCALEDL_CHECK(!p.name.empty(), "{}.name is missing or empty", pc);
  pc += "(" + p.name + ")";
  for (auto& q : sp.params)
    SCALEDL_CHECK(q.name != p.name, "{}: parameter name \"{}\" is repeated", pc, p.name);
  SCALEDL_CHECK(!sp.fixed.contains(p.name), "{}: \"{}\" is both a parameter and fixed", pc, p.name);
  p.kind = parse_param_kind(pj, pc);

  if (p.kind == ParamKind::Integer || p.kind == ParamKind::Real) {
    parse_range_levels(pj, pc, &p);
  } else {
    SCALEDL_CHECK(pj.contains("values") && pj["values"].is_array() && !pj["values"].empty(),
                  "{}.values must be a non-empty array", pc);
    p.values = pj["values"].get<std::vector<json>>();
    if (p.kind == ParamKind::Grid)
      check_grid_levels(pj, pc, &p);
    else
      label_categorical_levels(pc, &p);
  }
  if (p.numeric()) set_encoding_range(&p);
  if (pj.contains("when")) parse_when(pj, pc, sp.params, &p);
  return p;
}

void check_parameter_keys(const json& ps, const std::string& ctx) {
  for (auto& q : ps)
    for (auto it = q.begin(); it != q.end(); ++it) {
      static const std::vector<std::string> pk = {"name",  "kind", "min",    "max",  "step",
                                                  "count", "log",  "values", "when", "_comment"};
      SCALEDL_CHECK(std::find(pk.begin(), pk.end(), it.key()) != pk.end(),
                    "{}: parameter {} has unknown key \"{}\"", ctx, q.value("name", "?"), it.key());
    }
}

void parse_derived(const json& j, const std::string& ctx, DesignSpace* sp) {
  SCALEDL_CHECK(j["derived"].is_array(), "{}.derived must be an array", ctx);
  for (size_t i = 0; i < j["derived"].size(); ++i) {
    const json& d = j["derived"][i];
    std::string dc = fmt::format("{}.derived[{}]", ctx, i);
    SCALEDL_CHECK(d.is_object() && d.contains("name") && d["name"].is_string() && d.contains("expr") &&
                      d["expr"].is_string(),
                  "{} must be {{\"name\": ..., \"expr\": ...}}, got {}", dc, show(d));
    sp->derived.emplace_back(d["name"].get<std::string>(), d["expr"].get<std::string>());
  }
}

/// An expression string, or {"expr"}, {"max_memory_gb"} or {"device", "fraction"}.
SpaceConstraint parse_constraint(const json& c, const std::string& cc, const std::string& dir) {
  SpaceConstraint k;
  k.text = c.dump();
  if (c.is_string()) {
    k.expr = c.get<std::string>();
    return k;
  }
  SCALEDL_CHECK(c.is_object(), "{} must be an expression string or an object, got {}", cc, show(c));
  if (c.contains("expr")) {
    SCALEDL_CHECK(c["expr"].is_string(), "{}.expr must be a string", cc);
    k.expr = c["expr"].get<std::string>();
  } else if (c.contains("max_memory_gb")) {
    k.max_memory_bytes = get_num_or(c, "max_memory_gb", cc, 1e-6, 1e9, 1) * 1e9;
  } else if (c.contains("device")) {
    std::string dp = get_str_or(c, "device", cc, "");
    fs::path full = fs::path(dp).is_absolute() ? fs::path(dp) : fs::path(dir) / dp;
    DeviceRecord dev = load_device_spec(full.string());
    SCALEDL_CHECK(dev.mem_gb > 0, "{}.device=\"{}\": the device record has no memory size (mem_gb)", cc, dp);
    k.max_memory_bytes = dev.mem_gb * 1e9 * get_num_or(c, "fraction", cc, 1e-3, 1, 0.9);
  } else {
    fail("{}: unknown constraint {} (expected \"expr\", \"max_memory_gb\" or \"device\")", cc, show(c));
  }
  return k;
}

void parse_constraints(const json& j, const std::string& ctx, const std::string& dir, DesignSpace* sp) {
  SCALEDL_CHECK(j["constraints"].is_array(), "{}.constraints must be an array", ctx);
  for (size_t i = 0; i < j["constraints"].size(); ++i)
    sp->constraints.push_back(
        parse_constraint(j["constraints"][i], fmt::format("{}.constraints[{}]", ctx, i), dir));
}

/// A layers space: its types are layer types, each of their dims is given, dtypes are dtypes.
void check_layers_space(const DesignSpace& sp, const std::string& ctx) {
  const SpaceParameter* tp = nullptr;
  for (auto& p : sp.params)
    if (p.name == "type") tp = &p;
  std::vector<std::string> types;
  if (tp) {
    SCALEDL_CHECK(!tp->numeric(), "{}: parameter \"type\" must be categorical", ctx);
    types = tp->labels;
  } else {
    SCALEDL_CHECK(sp.fixed.contains("type") && sp.fixed["type"].is_string(),
                  "{}: a layers space needs a \"type\" parameter or fixed.type", ctx);
    types.push_back(sp.fixed["type"].get<std::string>());
  }
  for (auto& t : types) {
    LayerType lt = parse_layer_type(t, ctx + ".type");
    for (auto& d : layer_info(lt).dims) {
      bool have = sp.fixed.contains(d);
      if (have) get_int(sp.fixed, d, ctx + ".fixed", INT64_MIN, INT64_MAX);  // e.g. "bias": "yes"
      for (auto& p : sp.params) have |= p.name == d && p.numeric();
      for (auto& [n, e] : sp.derived) have |= n == d;
      SCALEDL_CHECK(have, "{}: layer type {} needs dim \"{}\": add a parameter, a derived value or fixed.{}",
                    ctx, t, d, d);
    }
  }
  if (sp.fixed.contains("dtype"))
    parse_dtype(get_str_or(sp.fixed, "dtype", ctx + ".fixed", "fp32"), ctx + ".fixed.dtype");
  for (auto& p : sp.params)
    if (p.name == "dtype") {
      SCALEDL_CHECK(!p.numeric(), "{}: parameter \"dtype\" must be categorical", ctx);
      for (auto& l : p.labels) parse_dtype(l, ctx + ".dtype");
    }
}

/// A models space: a model (parameter or fixed), and parameters it knows how to write.
void check_models_space(const DesignSpace& sp, const std::string& ctx) {
  bool has_model = sp.fixed.contains("model");
  for (auto& p : sp.params) {
    if (p.name == "model") {
      SCALEDL_CHECK(!p.numeric(), "{}: parameter \"model\" must be categorical", ctx);
      has_model = true;
    } else if (p.name.rfind("settings.", 0) != 0 && p.name.rfind("overrides.", 0) != 0 &&
               design_detail::model_aliases(p.name).empty()) {
      fail(
          "{}: models parameter \"{}\" is not model, settings.<key>, overrides.<key> or one of num_layers, "
          "hidden, heads, kv_heads, ffn_dim",
          ctx, p.name);
    }
    if (p.name == "settings.dtype")
      for (auto& l : p.labels) parse_dtype(l, ctx + ".settings.dtype");
  }
  SCALEDL_CHECK(has_model, "{}: a models space needs a \"model\" parameter or fixed.model", ctx);
}

}  // namespace

DesignSpace parse_space(const json& j, const std::string& ctx, const std::string& dir) {
  SCALEDL_CHECK(j.is_object(), "{}: a space must be a JSON object, got {}", ctx, show(j));
  DesignSpace sp;
  sp.path = ctx;
  sp.dir = dir;
  check_space_keys(j, ctx);
  SCALEDL_CHECK(j.contains("kind"), "{}: missing \"kind\" (\"layers\" or \"models\")", ctx);
  sp.kind = get_str_or(j, "kind", ctx, "");
  SCALEDL_CHECK(sp.kind == "layers" || sp.kind == "models", "{}.kind=\"{}\" must be \"layers\" or \"models\"",
                ctx, sp.kind);
  sp.terms = parse_terms(get_str_or(j, "terms", ctx, "linear"), ctx + ".terms");
  sp.max_candidates = get_int_or(j, "max_candidates", ctx, 1, 100000000, 100000);
  if (j.contains("fixed")) {
    SCALEDL_CHECK(j["fixed"].is_object(), "{}.fixed must be an object, got {}", ctx, show(j["fixed"]));
    sp.fixed = j["fixed"];
  }
  SCALEDL_CHECK(j.contains("parameters") && j["parameters"].is_array() && !j["parameters"].empty(),
                "{}.parameters must be a non-empty array (the space is empty)", ctx);
  const json& ps = j["parameters"];
  for (size_t i = 0; i < ps.size(); ++i) sp.params.push_back(parse_parameter(ps[i], i, ctx, sp));
  check_parameter_keys(ps, ctx);
  if (j.contains("derived")) parse_derived(j, ctx, &sp);
  if (j.contains("constraints")) parse_constraints(j, ctx, dir, &sp);
  if (sp.kind == "layers")
    check_layers_space(sp, ctx);
  else
    check_models_space(sp, ctx);
  // Compile once now so that bad expressions and model paths fail at parse time.
  design_detail::Compiled check(sp);
  return sp;
}

DesignSpace load_space(const std::string& path) {
  json j = read_json_file(path);
  fs::path dir = fs::path(path).parent_path();
  return parse_space(j, path, dir.empty() ? "." : dir.string());
}

// ---------------------------------------------------------------------------
// Enumeration

CandidateSet enumerate_candidates(const DesignSpace& sp, uint64_t seed) {
  design_detail::Compiled cp(sp);
  const size_t np = sp.params.size();
  // Gate parameters (type of a layers space, and every "when" target) are
  // enumerated first; each gate combination then has its own active set.
  std::vector<int> gates;
  if (cp.type_param >= 0) gates.push_back(cp.type_param);
  for (auto& p : sp.params)
    for (auto& [g, l] : p.when)
      for (size_t q = 0; q < np; ++q)
        if (sp.params[q].name == g && std::find(gates.begin(), gates.end(), int(q)) == gates.end())
          gates.push_back(static_cast<int>(q));
  std::sort(gates.begin(), gates.end());

  struct Branch {
    Candidate base;         // gate levels set, others -1
    std::vector<int> free;  // active non-gate parameters
    double size = 1;
  };
  std::vector<Branch> branches;
  {
    Candidate c(np, -1);
    std::function<void(size_t)> rec = [&](size_t gi) {
      if (gi == gates.size()) {
        Branch b;
        b.base = c;
        std::string tl = sp.kind == "layers" ? cp.layer_type_label(c) : "";
        for (int g : gates)  // a gate can itself be inactive ("when" on another gate)
          if (!cp.is_active(g, c, tl) && c[g] != 0) return;  // keep one copy (level 0) of inactive gates
        for (int g : gates)
          if (!cp.is_active(g, c, tl)) b.base[g] = -1;
        for (size_t q = 0; q < np; ++q)
          if (std::find(gates.begin(), gates.end(), int(q)) == gates.end() && cp.is_active(q, c, tl)) {
            b.free.push_back(static_cast<int>(q));
            b.size *= static_cast<double>(sp.params[q].values.size());
          }
        branches.push_back(std::move(b));
        return;
      }
      for (size_t l = 0; l < sp.params[gates[gi]].values.size(); ++l) {
        c[gates[gi]] = static_cast<int32_t>(l);
        rec(gi + 1);
      }
      c[gates[gi]] = -1;
    };
    rec(0);
  }
  CandidateSet out;
  for (auto& b : branches) out.product_size += b.size;
  std::vector<int64_t> reject_by(sp.constraints.size() + 1, 0);
  std::string invalid_why;
  auto consider = [&](const Candidate& c) {
    int v = cp.violated(c, &invalid_why);
    if (v >= 0) {
      ++out.rejected;
      ++reject_by[v];
      return false;
    }
    out.cands.push_back(c);
    return true;
  };
  if (out.product_size <= static_cast<double>(sp.max_candidates)) {
    for (auto& b : branches) {
      Candidate c = b.base;
      std::function<void(size_t)> rec = [&](size_t fi) {
        if (fi == b.free.size()) {
          consider(c);
          return;
        }
        int q = b.free[fi];
        for (size_t l = 0; l < sp.params[q].values.size(); ++l) {
          c[q] = static_cast<int32_t>(l);
          rec(fi + 1);
        }
      };
      rec(0);
    }
  } else {
    // Uniform draws from the product (branch chosen in proportion to its size),
    // distinct, until max_candidates pass the constraints or 20x that many draws.
    out.sampled = true;
    std::mt19937_64 rng(seed ^ 0x5CA1EDD1ULL);
    std::vector<double> cum;
    double acc = 0;
    for (auto& b : branches) cum.push_back(acc += b.size);
    auto u01 = [&] { return (rng() >> 11) * (1.0 / 9007199254740992.0); };
    std::unordered_set<std::string> seen;
    const int64_t max_draws = 20 * sp.max_candidates;
    for (int64_t draw = 0; draw < max_draws && int64_t(out.cands.size()) < sp.max_candidates; ++draw) {
      double r = u01() * acc;
      size_t bi =
          std::min(branches.size() - 1, size_t(std::upper_bound(cum.begin(), cum.end(), r) - cum.begin()));
      Candidate c = branches[bi].base;
      for (int q : branches[bi].free) c[q] = static_cast<int32_t>(rng() % sp.params[q].values.size());
      std::string key(reinterpret_cast<const char*>(c.data()), c.size() * sizeof(int32_t));
      if (!seen.insert(key).second) continue;
      consider(c);
    }
  }
  if (out.cands.empty()) {
    size_t worst = std::max_element(reject_by.begin(), reject_by.end()) - reject_by.begin();
    if (worst == sp.constraints.size())
      fail(
          "{}: no candidate is a valid {} config ({} of {} combinations rejected, e.g. {}): the space is "
          "empty or "
          "contradictory",
          sp.path, sp.kind == "layers" ? "layer" : "model", out.rejected, out.product_size, invalid_why);
    fail(
        "{}: no candidate satisfies the constraints ({} of {} combinations rejected; constraints[{}]={} "
        "rejected "
        "{}): the space is empty or contradictory",
        sp.path, out.rejected, out.product_size, worst, sp.constraints[worst].text, reject_by[worst]);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Configs

nlohmann::json candidate_config(const DesignSpace& sp, const Candidate& c, const std::string& plan_dir) {
  design_detail::Compiled cp(sp);
  return cp.config(c, plan_dir);
}

namespace design_detail {

json Compiled::config(const Candidate& c, const std::string& plan_dir) const {
  // name -> value of everything that is set for this candidate.
  std::vector<std::pair<std::string, json>> kv;
  for (auto it = sp->fixed.begin(); it != sp->fixed.end(); ++it) kv.emplace_back(it.key(), *it);
  for (size_t i = 0; i < sp->params.size(); ++i)
    if (c[i] >= 0) kv.emplace_back(sp->params[i].name, sp->params[i].values[c[i]]);
  std::vector<Value> v = slots(c);
  for (size_t d = 0; d < derived.size(); ++d) {
    const Value& x = v[sp->params.size() + d];
    if (!x.valid) continue;
    json val = x.is_str ? json(x.str)
                        : (x.num == std::floor(x.num) && std::fabs(x.num) < 9e15 ? json(int64_t(x.num))
                                                                                 : json(x.num));
    kv.emplace_back(sp->derived[d].first, val);
  }
  if (sp->kind == "layers") {
    std::string tl = layer_type_label(c);
    LayerType t = parse_layer_type(tl);
    json dims = json::object();
    std::string dtype = "fp32";
    for (auto& [k, val] : kv) {
      if (k == "dtype") {
        SCALEDL_CHECK(val.is_string(), "{}: dtype={} is not a dtype name", sp->path, show(val));
        dtype = val.get<std::string>();
      }
      for (auto& d : layer_info(t).dims)
        if (d == k) dims[d] = val.is_number_float() ? json(int64_t(std::llround(val.get<double>()))) : val;
    }
    return {{"type", tl}, {"dims", dims}, {"dtype", dtype}};
  }
  // models
  int lvl = model_param >= 0 ? c[model_param] : 0;
  const json& base = base_configs[lvl];
  json model;
  if (!base_paths[lvl].empty()) {
    fs::path rel = plan_dir.empty() ? fs::path(base_paths[lvl])
                                    : fs::path(base_paths[lvl]).lexically_relative(fs::absolute(plan_dir));
    model = rel.empty() ? base_paths[lvl] : rel.string();
  } else {
    model = base;
  }
  json overrides = json::object(), settings = json::object();
  for (auto& [k, val] : kv) {
    if (k == "model") continue;
    json out = val.is_number_float() && val.get<double>() == std::floor(val.get<double>()) &&
                       k.rfind("settings.", 0) == 0
                   ? json(int64_t(val.get<double>()))
                   : val;
    if (k.rfind("settings.", 0) == 0)
      settings[k.substr(9)] = out;
    else if (k.rfind("overrides.", 0) == 0)
      overrides[k.substr(10)] = out;
    else {
      const auto& al = model_aliases(k);
      if (al.empty()) continue;  // a helper name used only in expressions
      bool any = false;
      for (auto& a : al)
        if (base.contains(a)) {
          overrides[a] = out;
          any = true;
        }
      if (!any) overrides[al[0]] = out;
    }
  }
  return {{"model", model}, {"overrides", overrides}, {"settings", settings}};
}

/// Estimated training memory of a candidate, bytes.
/// layers: 2 (in + out) + 2 weight + temp (activations and their gradients,
///   weights and their gradients; layer_cost of the one FLOP/byte model).
/// models: the analytic peak of one iteration (memory.hpp, estimate_memory:
/// a replay of the layer graph's allocations, CUDA allocator rounding).
double Compiled::check_and_memory(const Candidate& c) const {
  json cfg = config(c, "");
  if (sp->kind == "layers") {
    LayerType t = parse_layer_type(cfg["type"].get<std::string>());
    std::vector<int64_t> dims;
    for (auto& d : layer_info(t).dims)  // missing when a derived dim is inactive; a string from "fixed"
      dims.push_back(get_int(cfg["dims"], d, sp->path + ": dims", INT64_MIN, INT64_MAX));
    validate_dims(t, dims);
    LayerCost lc = layer_cost(t, dims, parse_dtype(cfg["dtype"].get<std::string>()));
    return 2 * (lc.in_bytes + lc.out_bytes) + 2 * lc.weight_bytes + lc.temp_bytes;
  }
  int lvl = model_param >= 0 ? c[model_param] : 0;
  json merged = base_configs[lvl];
  for (auto it = cfg["overrides"].begin(); it != cfg["overrides"].end(); ++it) merged[it.key()] = *it;
  ModelSpec m = parse_model_config(merged, sp->path + ":model");
  TrainSettings s = parse_train_settings(cfg["settings"], sp->path + ":settings");
  validate_settings(m, s);
  return estimate_memory(build_layer_graph(m, s), MemoryOptions{}).peak;
}

}  // namespace design_detail
}  // namespace scaledl
