// `scaledl plan` as a library call: candidates -> features -> Fedorov exchange
// -> plan JSON (the format `scaledl bench layers|models --plan` reads).
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "design/space_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

namespace fs = std::filesystem;

namespace {

/// Parameter values of a candidate (numbers or labels, null when inactive).
std::vector<json> values_of(const DesignSpace& sp, const Candidate& c) {
  std::vector<json> v(sp.params.size());
  for (size_t q = 0; q < sp.params.size(); ++q)
    if (c[q] >= 0)
      v[q] = sp.params[q].numeric() ? json(sp.params[q].values[c[q]].get<double>())
                                    : json(sp.params[q].labels[c[q]]);
  return v;
}

/// Numbers as doubles, so that 64 and 64.0 compare equal after dump().
std::vector<json> normalized(std::vector<json> v) {
  for (auto& x : v)
    if (x.is_number()) x = x.get<double>();
  return v;
}

}  // namespace

std::vector<std::vector<json>> existing_points(const DesignSpace& sp, const std::string& store_path,
                                               int64_t& skipped) {
  SCALEDL_CHECK(fs::exists(store_path), "--existing={}: no such file", store_path);
  Store store(store_path, /*read_only=*/true);
  design_detail::Compiled cp(sp);
  std::vector<std::vector<json>> out;
  std::set<std::string> seen;
  skipped = 0;
  auto fixed_matches = [&](const std::string& key, const json& have) {
    if (!sp.fixed.contains(key)) return true;
    const json& f = sp.fixed[key];
    if (f.is_number() && have.is_number()) return f.get<double>() == have.get<double>();
    return f == have;
  };
  if (sp.kind == "layers") {
    for (const LayerMeasurement& m : store.layers()) {
      std::string key = layer_key(m.type, m.dims, m.dtype);
      if (!seen.insert(key).second) continue;
      const LayerInfo& info = layer_info(m.type);
      std::vector<json> v(sp.params.size());
      bool ok = fixed_matches("type", info.name) && fixed_matches("dtype", to_string(m.dtype));
      for (size_t d = 0; d < info.dims.size(); ++d) ok &= fixed_matches(info.dims[d], m.dims[d]);
      for (size_t q = 0; q < sp.params.size() && ok; ++q) {
        const SpaceParameter& p = sp.params[q];
        if (p.name == "type")
          v[q] = info.name;
        else if (p.name == "dtype")
          v[q] = to_string(m.dtype);
        else {
          auto it = std::find(info.dims.begin(), info.dims.end(), p.name);
          if (it != info.dims.end()) v[q] = m.dims[it - info.dims.begin()];
        }
        if (!p.numeric() && v[q].is_string() &&
            std::find(p.labels.begin(), p.labels.end(), v[q].get<std::string>()) == p.labels.end())
          ok = false;  // another layer type or dtype: not in this space
        if (p.numeric() && v[q].is_number() && p.log && v[q].get<double>() <= 0) ok = false;
      }
      if (ok)
        out.push_back(normalized(std::move(v)));
      else
        ++skipped;
    }
    return out;
  }
  // models: read parameter values back from ModelSpec::to_json() and the settings.
  std::vector<std::string> fam;  // family per model level
  for (auto& base : cp.base_configs)
    fam.push_back(to_string(parse_model_config(base, sp.path + ":model").family));
  for (const ModelMeasurement& m : store.models()) {
    std::string key = model_key(m);
    if (!seen.insert(key).second) continue;
    std::vector<json> v(sp.params.size());
    bool ok = true;
    for (size_t q = 0; q < sp.params.size() && ok; ++q) {
      const SpaceParameter& p = sp.params[q];
      if (p.name == "model") {
        // Same name as a level's label, else the only level of the same family.
        int hit = -1, nfam = 0;
        for (size_t l = 0; l < p.labels.size(); ++l) {
          if (p.labels[l] == m.model_name) hit = static_cast<int>(l);
        }
        if (hit < 0)
          for (size_t l = 0; l < fam.size(); ++l)
            if (m.model.contains("family") && fam[l] == m.model["family"]) {
              hit = static_cast<int>(l);
              ++nfam;
            }
        if (hit < 0 || nfam > 1)
          ok = false;
        else
          v[q] = p.labels[hit];
      } else if (p.name.rfind("settings.", 0) == 0) {
        std::string k = p.name.substr(9);
        if (m.settings.contains(k))
          v[q] = m.settings[k];
        else
          ok = false;
      } else if (const char* sk = design_detail::model_spec_key(p.name)) {
        if (m.model.contains(sk))
          v[q] = m.model[sk];
        else
          ok = false;
      } else {
        ok = false;  // overrides.<key> cannot be read back from a ModelSpec
      }
      if (ok && !p.numeric()) {
        std::string lab = v[q].is_string() ? v[q].get<std::string>() : v[q].dump();
        if (std::find(p.labels.begin(), p.labels.end(), lab) == p.labels.end())
          ok = false;
        else
          v[q] = lab;
      }
      if (ok && p.numeric() && !(v[q].is_number() && (!p.log || v[q].get<double>() > 0))) ok = false;
    }
    // "when": a parameter inactive for this point's gates is null.
    if (ok) {
      Candidate gate(sp.params.size(), -1);
      for (size_t q = 0; q < sp.params.size(); ++q)
        if (!sp.params[q].numeric() && v[q].is_string()) {
          auto& lb = sp.params[q].labels;
          gate[q] =
              static_cast<int32_t>(std::find(lb.begin(), lb.end(), v[q].get<std::string>()) - lb.begin());
        }
      for (size_t q = 0; q < sp.params.size(); ++q)
        if (!cp.is_active(q, gate, "")) v[q] = nullptr;
      out.push_back(normalized(std::move(v)));
    } else {
      ++skipped;
    }
  }
  return out;
}

json make_plan(const DesignSpace& sp, const PlanOptions& opt) {
  SCALEDL_CHECK(opt.budget >= 1, "--budget={} must be >= 1", opt.budget);
  CandidateSet cs = enumerate_candidates(sp, opt.seed);
  // A layer type of the space none of whose combinations is possible (a d_in of 0 or -64, a
  // constraint no combination meets) is planned no row: said in the design, not silently dropped.
  json types_without_candidates = json::array();
  for (size_t q = 0; q < sp.params.size(); ++q) {
    if (sp.kind != "layers" || sp.params[q].name != "type" || sp.params[q].numeric()) continue;
    std::vector<bool> seen(sp.params[q].labels.size(), false);
    for (const auto& c : cs.cands)
      if (c[q] >= 0) seen[static_cast<size_t>(c[q])] = true;
    for (size_t l = 0; l < seen.size(); ++l)
      if (!seen[l]) types_without_candidates.push_back(sp.params[q].labels[l]);
  }

  // Measured points stay in the design; candidates equal to one are not re-planned.
  std::vector<std::vector<json>> ex;
  int64_t skipped = 0;
  if (!opt.existing.empty()) ex = existing_points(sp, opt.existing, skipped);
  int64_t already = 0;
  if (!ex.empty()) {
    std::unordered_set<std::string> have;
    for (auto& v : ex) have.insert(json(v).dump());
    std::vector<Candidate> keep;
    for (auto& c : cs.cands) {
      if (have.count(json(values_of(sp, c)).dump()))
        ++already;
      else
        keep.push_back(c);
    }
    cs.cands.swap(keep);
    SCALEDL_CHECK(!cs.cands.empty(), "--existing={}: every candidate of {} is already measured", opt.existing,
                  sp.path);
  }
  const int64_t m = static_cast<int64_t>(cs.cands.size());
  SCALEDL_CHECK(opt.budget <= m,
                "--budget={} exceeds the {} candidates of {}{} (choose at most {}, or widen the space)",
                opt.budget, m, sp.path, cs.sampled ? " (sampled)" : "", m);

  Encoder enc(sp, cs.cands);
  const int p = enc.p();
  const int64_t e = static_cast<int64_t>(ex.size());
  SCALEDL_CHECK(
      opt.budget + e >= p,
      "--budget={} is smaller than the {} model terms (terms={}, {} existing points): M = sum a a^T "
      "would be singular; raise --budget to at least {} or {}",
      opt.budget, p, to_string(sp.terms), e, p - e,
      sp.terms == Terms::Linear ? "drop parameters or levels" : "use terms=linear");
  FeatureMatrix F = enc.encode(cs.cands);
  FeatureMatrix E(e, p);
  for (int64_t i = 0; i < e; ++i) E.row(i) = enc.encode_values(ex[i]);

  FedorovOptions fo;
  fo.k = opt.budget;
  fo.seed = opt.seed;
  fo.starts = opt.starts;
  fo.threads = opt.threads;
  fo.keep_trace = false;
  FedorovResult r = fedorov_design(F, E, fo);

  design_detail::Compiled cp(sp);
  json configs = json::array();
  for (int64_t i : r.chosen) configs.push_back(cp.config(cs.cands[i], opt.plan_dir));
  auto finite_or_null = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json design = {{"log_det", r.log_det},
                 {"log_det_random_mean", finite_or_null(r.log_det_random_mean)},
                 {"d_efficiency_vs_random", finite_or_null(r.d_efficiency_vs_random)},
                 {"terms", to_string(sp.terms)},
                 {"term_names", enc.term_names()},
                 {"dropped_terms", enc.dropped()},
                 {"zero_terms", enc.zero_terms()},
                 {"random_designs", fo.random_designs},
                 {"random_singular", r.random_singular},
                 {"k", opt.budget},
                 {"m", m},
                 {"p", p},
                 {"seed", opt.seed},
                 {"starts", opt.starts},
                 {"best_start", r.best_start},
                 {"exchanges", r.exchanges},
                 {"passes", r.passes},
                 {"existing", e},
                 {"existing_skipped", skipped},
                 {"already_measured_candidates", already},
                 {"product_size", cs.product_size},
                 {"sampled", cs.sampled},
                 {"rejected", cs.rejected},
                 {"types_without_candidates", types_without_candidates},
                 {"space", sp.path}};
  return {{"kind", sp.kind}, {"configs", configs}, {"design", design}};
}

}  // namespace scaledl
