// Fabric presets: fitted from public NCCL rows or derived from the link bandwidth
// (fabric.hpp, docs/comm.md "Fabric presets").
#include "scaledl/comm/fabric.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

namespace fs = std::filesystem;

const char* to_string(FabricKind k) {
  switch (k) {
    case FabricKind::NVSwitch:
      return "nvswitch";
    case FabricKind::NVLinkPair:
      return "nvlink-pair";
    case FabricKind::PCIe:
      return "pcie";
  }
  return "?";
}

FabricKind fabric_kind_of(const std::string& s, const std::string& key) {
  for (int i = 0; i < kFabricKindCount; ++i)
    if (s == to_string(static_cast<FabricKind>(i))) return static_cast<FabricKind>(i);
  fail("{}={} is not a fabric kind (nvswitch, nvlink-pair, pcie)", key, show(nlohmann::json(s)));
}

const CommModel& ClusterComm::inside(int64_t ranks) const {
  if (by_ranks.empty()) return intra;
  const CommModel* best = &by_ranks.front().second;
  for (const auto& [n, m] : by_ranks)
    if (n <= ranks) best = &m;
  return *best;
}

const FabricFit* FabricPreset::fit(const std::string& collective, int64_t ranks) const {
  const FabricFit* best = nullptr;
  for (const FabricFit& f : fits) {
    if (f.collective != collective) continue;
    if (!best || (f.world <= ranks && (best->world > ranks || f.world > best->world)) ||
        (best->world > ranks && f.world < best->world))
      best = &f;
  }
  return best;
}

ClusterComm FabricPreset::cluster() const {
  ClusterComm c;
  for (const FabricFit& f : fits)
    if (f.collective == "allreduce") c.by_ranks.emplace_back(f.world, f.model);
  std::sort(c.by_ranks.begin(), c.by_ranks.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  SCALEDL_CHECK(!c.by_ranks.empty(), "fabric {}: no all-reduce fit", name);
  c.intra = fit("allreduce", gpus_per_node)->model;
  c.intra.nodes = 1;
  for (auto& r : c.by_ranks) r.second.nodes = 1;
  c.inter = inter ? *inter : c.intra;  // lacking one: the node's model (cross_node_comm_warning says so)
  return c;
}

namespace {

std::vector<std::string> names_of(const nlohmann::json& j, const std::string& key, const std::string& ctx) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  SCALEDL_CHECK(j[key].is_array(), "{}.{} must be an array of names", ctx, key);
  for (const auto& c : j[key]) {
    SCALEDL_CHECK(c.is_string() && !c.get<std::string>().empty(), "{}.{}: {} is not a name", ctx, key,
                  show(c));
    out.push_back(c.get<std::string>());
  }
  return out;
}

nlohmann::json fit_json(const FabricFit& f) {
  nlohmann::json j = {{"collective", f.collective},
                      {"world", f.world},
                      {"bandwidth_Bps", f.model.bandwidth_Bps},
                      {"busbw_gbs", f.model.bandwidth_Bps / 1e9},
                      {"gamma_s", f.model.gamma_s}};
  if (f.samples > 0) {
    j["samples"] = f.samples;
    j["mre"] = f.mre;
    j["min_bytes"] = f.min_bytes;
    j["max_bytes"] = f.max_bytes;
  }
  return j;
}

}  // namespace

void FabricSystem::read_json(const nlohmann::json& j, const std::string& ctx) {
  description = get_str_or(j, "description", ctx, "");
  kind = fabric_kind_of(get_str_or(j, "kind", ctx, ""), ctx + ".kind");
  gpus_per_node = get_int(j, "gpus_per_node", ctx, 1, 1 << 16);
  link_gbs = get_num_or(j, "link_gbs", ctx, 1e-3, 1e5, NAN);
  SCALEDL_CHECK(!std::isnan(link_gbs), "{}.link_gbs is missing", ctx);
  nic_gbs = get_num_or(j, "nic_gbs", ctx, 0, 1e5, 0);
  device = get_str_or(j, "device", ctx, "");
  devices = names_of(j, "devices", ctx);
  campaigns = names_of(j, "campaigns", ctx);
}

nlohmann::json FabricPreset::to_json() const {
  nlohmann::json j;
  j["name"] = name;
  j["description"] = description;
  j["kind"] = to_string(kind);
  j["gpus_per_node"] = gpus_per_node;
  j["link_gbs"] = link_gbs;
  if (nic_gbs > 0) j["nic_gbs"] = nic_gbs;
  j["origin"] = origin;
  if (!device.empty()) j["device"] = device;
  j["devices"] = devices;
  if (!campaigns.empty()) j["campaigns"] = campaigns;
  j["source"] = source;
  // What `--comm FILE` reads of a preset: the all-reduce of a whole node.
  if (const FabricFit* f = fit("allreduce", gpus_per_node)) {
    j["bandwidth_Bps"] = f->model.bandwidth_Bps;
    j["gamma_s"] = f->model.gamma_s;
    j["nodes"] = 1;
  }
  j["fits"] = nlohmann::json::array();
  for (const FabricFit& f : fits) j["fits"].push_back(fit_json(f));
  if (inter) {
    j["inter"] = {{"bandwidth_Bps", inter->bandwidth_Bps},
                  {"busbw_gbs", inter->bandwidth_Bps / 1e9},
                  {"gamma_s", inter->gamma_s},
                  {"nodes", inter->nodes}};
    j["inter_source"] = inter_source;
  }
  return j;
}

FabricPreset FabricPreset::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected an object, got {}", ctx, show(j));
  FabricPreset p;
  p.name = get_str_or(j, "name", ctx, "");
  SCALEDL_CHECK(!p.name.empty(), "{}.name is missing or empty", ctx);
  p.read_json(j, ctx);
  p.origin = get_str_or(j, "origin", ctx, "");
  SCALEDL_CHECK(p.origin == "measured" || p.origin == "derived", "{}.origin={} is not measured or derived",
                ctx, show(nlohmann::json(p.origin)));
  p.source = get_str_or(j, "source", ctx, "");
  SCALEDL_CHECK(j.contains("fits") && j["fits"].is_array() && !j["fits"].empty(),
                "{}.fits must be a non-empty array", ctx);
  for (size_t i = 0; i < j["fits"].size(); ++i) {
    const auto& e = j["fits"][i];
    const std::string c = fmt::format("{}.fits[{}]", ctx, i);
    FabricFit f;
    f.collective = get_str_or(e, "collective", c, "");
    SCALEDL_CHECK(f.collective == "allreduce" || f.collective == "allgather" ||
                      f.collective == "reducescatter" || f.collective == "sendrecv",
                  "{}.collective={} is not allreduce, allgather, reducescatter or sendrecv", c,
                  show(nlohmann::json(f.collective)));
    f.world = get_int(e, "world", c, 2, 1 << 16);
    f.model = CommModel::from_json(e, c);
    f.samples = static_cast<size_t>(get_int_or(e, "samples", c, 0, 1LL << 40, 0));
    f.mre = get_num_or(e, "mre", c, 0, 1e3, 0);
    f.min_bytes = get_num_or(e, "min_bytes", c, 0, 1e18, 0);
    f.max_bytes = get_num_or(e, "max_bytes", c, 0, 1e18, 0);
    p.fits.push_back(f);
  }
  SCALEDL_CHECK(p.fit("allreduce", p.gpus_per_node), "{}.fits has no allreduce fit", ctx);
  if (j.contains("inter")) {
    p.inter = CommModel::from_json(j["inter"], ctx + ".inter");
    p.inter_source = get_str_or(j, "inter_source", ctx, "");
  }
  return p;
}

FabricPreset load_fabric(const std::string& path) {
  return FabricPreset::from_json(read_json_file(path), path);
}

std::vector<std::string> fabric_dirs_for_spec(const std::string& spec_path) {
  std::vector<std::string> dirs;
  if (!spec_path.empty())
    dirs.push_back((fs::path(spec_path).parent_path() / ".." / "fabrics").lexically_normal().string());
  if (dirs.empty() || dirs.front() != "models/fabrics") dirs.push_back("models/fabrics");
  return dirs;
}

std::optional<FabricPreset> default_fabric_for(const std::string& device_name,
                                               const std::vector<std::string>& dirs) {
  std::error_code ec;
  const std::string key = "spec:" + device_name;
  for (const std::string& d : dirs) {
    if (!fs::is_directory(d, ec)) continue;
    std::set<fs::path> files;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".json") files.insert(e.path());
    for (const fs::path& f : files) {
      const nlohmann::json j = read_json_file(f.string());
      if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array()) continue;
      for (const auto& n : j["devices"])
        if (n.is_string() && n.get<std::string>() == key) return FabricPreset::from_json(j, f.string());
    }
  }
  return std::nullopt;
}

FabricPreset find_fabric(const std::string& name_or_file, const std::vector<std::string>& dirs,
                         const std::string& key) {
  SCALEDL_CHECK(!name_or_file.empty(), "{} is empty: give a preset name (models/fabrics) or a file", key);
  std::error_code ec;
  if (fs::is_regular_file(name_or_file, ec)) return load_fabric(name_or_file);
  const bool plain_name = name_or_file.find('/') == std::string::npos && name_or_file != "." &&
                          name_or_file != ".." && name_or_file.find(".json") == std::string::npos;
  std::string listed;
  for (const std::string& d : dirs) {
    if (!fs::is_directory(d, ec)) continue;
    if (plain_name) {
      const fs::path f = fs::path(d) / (name_or_file + ".json");
      if (fs::is_regular_file(f, ec)) return load_fabric(f.string());
    }
    if (listed.empty()) {
      std::set<std::string> names;
      for (const auto& e : fs::directory_iterator(d, ec))
        if (e.path().extension() == ".json") names.insert(e.path().stem().string());
      for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
      if (!listed.empty()) listed = fmt::format(" (presets in {}: {})", d, listed);
    }
  }
  fail("{}={} is neither a file nor a preset name{}", key, show(nlohmann::json(name_or_file)),
       listed.empty() ? " (no models/fabrics directory found)" : listed);
}

FabricDefinitions load_fabric_definitions(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  SCALEDL_CHECK(j.is_object(), "{}: expected an object with \"fabrics\"", path);
  FabricDefinitions d;
  d.min_bytes = get_num_or(j, "min_bytes", path, 1, 1e12, 1e6);
  SCALEDL_CHECK(j.contains("fabrics") && j["fabrics"].is_array() && !j["fabrics"].empty(),
                "{}: fabrics must be a non-empty array", path);
  std::set<std::string> names;
  for (size_t i = 0; i < j["fabrics"].size(); ++i) {
    const auto& e = j["fabrics"][i];
    const std::string ctx = fmt::format("{}: fabrics[{}]", path, i);
    SCALEDL_CHECK(e.is_object(), "{}: expected an object, got {}", ctx, show(e));
    FabricDefinition f;
    f.name = get_str_or(e, "name", ctx, "");
    SCALEDL_CHECK(!f.name.empty() && f.name.find('/') == std::string::npos,
                  "{}.name={} must be a non-empty file stem", ctx, show(nlohmann::json(f.name)));
    SCALEDL_CHECK(names.insert(f.name).second, "{}.name={} is given twice", ctx,
                  show(nlohmann::json(f.name)));
    f.read_json(e, ctx);
    f.link_source = get_str_or(e, "link_source", ctx, "");
    SCALEDL_CHECK(!f.link_source.empty(), "{}.link_source is missing: say where link_gbs comes from", ctx);
    d.fabrics.push_back(std::move(f));
  }
  return d;
}

double model_busbw_gbs(const CommModel& m, const std::string& collective, int64_t world, double bytes) {
  const CommFactors f = comm_factors(collective, CommForm::Ring, world);
  const double t = f.a * bytes / m.bandwidth_Bps + f.c * m.gamma_s;
  return f.a * bytes / t / 1e9;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<AllReduceSample> samples_of(const std::vector<const CollectiveMeasurement*>& rows) {
  std::vector<AllReduceSample> s;
  for (const CollectiveMeasurement* r : rows) s.push_back({r->bytes, r->world, r->time_s});
  return s;
}

/// A preset with what the definition says of the system, no fit yet.
FabricPreset preset_of(const FabricDefinition& d, const char* origin) {
  FabricPreset p;
  static_cast<FabricSystem&>(p) = d;
  p.origin = origin;
  return p;
}

/// The medians of the shares (first) and gammas (second) of `v`.
std::pair<double, double> medians(const std::vector<std::pair<double, double>>& v) {
  std::vector<double> a, b;
  for (const auto& [x, y] : v) {
    a.push_back(x);
    b.push_back(y);
  }
  return {median(a), median(b)};
}

/// The measured preset of `d`: one ring fit per (collective, world) of its campaigns' intra-node
/// rows >= min_bytes, and the inter-node all-reduce of the most ranks when its campaigns have it.
FabricPreset fit_measured(const FabricDefinition& d, double min_bytes,
                          const std::vector<CollectiveMeasurement>& rows) {
  FabricPreset p = preset_of(d, "measured");
  std::map<std::pair<std::string, int64_t>, std::vector<const CollectiveMeasurement*>> intra;
  std::map<int64_t, std::vector<const CollectiveMeasurement*>> inter;
  std::set<std::string> sources, seen;
  for (const CollectiveMeasurement& r : rows) {
    if (std::find(d.campaigns.begin(), d.campaigns.end(), r.campaign) == d.campaigns.end()) continue;
    seen.insert(r.campaign);
    if (r.status != "ok" || r.bytes < min_bytes) continue;
    sources.insert(r.source);
    if (r.level == "intra-node" && r.nodes == 1 && r.world <= d.gpus_per_node)
      intra[{r.collective, r.world}].push_back(&r);
    else if (r.level == "inter-node" && r.collective == "allreduce" && r.nodes > 1)
      inter[r.world].push_back(&r);
  }
  for (const std::string& c : d.campaigns)
    SCALEDL_CHECK(seen.count(c),
                  "fabric {}: campaign {} has no collective rows in the store (import the "
                  "source first: scripts/build_fabrics.sh)",
                  d.name, c);
  for (const auto& [key, rs] : intra) {
    std::set<double> sizes;
    for (const auto* r : rs) sizes.insert(r->bytes);
    if (sizes.size() < 2) continue;  // one size does not separate B from gamma
    const CommFit f = fit_comm(samples_of(rs), key.first, CommForm::Ring);
    check_comm_plausible(f.model, fmt::format("fabric {} {} at {} ranks", d.name, key.first, key.second));
    p.fits.push_back({key.first, key.second, f.model, f.mre, f.samples, *sizes.begin(), *sizes.rbegin()});
  }
  SCALEDL_CHECK(p.fit("allreduce", p.gpus_per_node),
                "fabric {}: campaigns {} hold no intra-node all-reduce rows of 2+ sizes >= {:g} bytes",
                d.name, fmt::join(d.campaigns, ", "), min_bytes);
  if (!inter.empty()) {
    const auto& [world, rs] = *inter.rbegin();
    std::set<double> sizes;
    for (const auto* r : rs) sizes.insert(r->bytes);
    if (sizes.size() >= 2) {
      const CommFit f = fit_comm(samples_of(rs), "allreduce", CommForm::Ring);
      check_comm_plausible(f.model, fmt::format("fabric {} inter-node all-reduce", d.name));
      p.inter = f.model;
      p.inter->nodes = rs.front()->nodes;
      p.inter_source = fmt::format(
          "measured: ring fit of {} inter-node all-reduce rows, {} ranks on {} nodes, "
          "{:g}-{:g} bytes",
          rs.size(), world, rs.front()->nodes, *sizes.begin(), *sizes.rbegin());
    }
  }
  std::vector<std::string> what;
  for (const std::string& s : sources) what.push_back(s);
  p.source = fmt::format(
      "measured: ring fits of the intra-node NCCL rows >= {:g} bytes of campaigns {} "
      "(sources: {}; datasets/gpus/); link: {}",
      min_bytes, fmt::join(d.campaigns, ", "), fmt::join(what, ", "), d.link_source);
  return p;
}

}  // namespace

std::vector<FabricPreset> build_fabric_presets(const FabricDefinitions& defs,
                                               const std::vector<CollectiveMeasurement>& rows) {
  std::vector<FabricPreset> out(defs.fabrics.size());
  std::vector<bool> done(defs.fabrics.size(), false);
  for (size_t i = 0; i < defs.fabrics.size(); ++i) {
    const FabricDefinition& d = defs.fabrics[i];
    if (d.campaigns.empty()) continue;
    out[i] = fit_measured(d, defs.min_bytes, rows);
    done[i] = true;
  }
  // Shares of the NIC across nodes that the measured presets reach.
  std::vector<std::pair<double, double>> nic_share;
  std::vector<std::string> inter_from;
  for (size_t i = 0; i < out.size(); ++i)
    if (done[i] && out[i].inter && out[i].nic_gbs > 0) {
      nic_share.emplace_back(out[i].inter->bandwidth_Bps / 1e9 / out[i].nic_gbs, out[i].inter->gamma_s);
      inter_from.push_back(out[i].name);
    }
  for (size_t i = 0; i < out.size(); ++i) {
    const FabricDefinition& d = defs.fabrics[i];
    if (!done[i]) {
      out[i] = preset_of(d, "derived");
      FabricPreset& p = out[i];
      // The measured presets of its kind with the same link bandwidth (one NVLink and NVSwitch
      // generation: the same collective algorithms, NVLink SHARP from NVSwitch 3 on), else all
      // of its kind.
      std::vector<size_t> from;
      for (int same_link = 1; same_link >= 0 && from.empty(); --same_link)
        for (size_t k = 0; k < out.size(); ++k)
          if (done[k] && out[k].kind == d.kind && (!same_link || out[k].link_gbs == d.link_gbs))
            from.push_back(k);
      SCALEDL_CHECK(
          !from.empty(),
          "fabric {}: no measured {} preset to derive it from (give it campaigns, or add a measured "
          "preset of that kind)",
          d.name, to_string(d.kind));
      std::map<std::pair<std::string, int64_t>, std::vector<std::pair<double, double>>> share;
      std::vector<std::string> names;
      for (size_t k : from) {
        names.push_back(out[k].name);
        for (const FabricFit& f : out[k].fits)
          if (f.world <= d.gpus_per_node)
            share[{f.collective, f.world}].emplace_back(f.model.bandwidth_Bps / 1e9 / out[k].link_gbs,
                                                        f.model.gamma_s);
      }
      for (const auto& [key, v] : share) {
        const auto [share, gamma] = medians(v);
        FabricFit f;
        f.collective = key.first;
        f.world = key.second;
        f.model = CommModel{share * d.link_gbs * 1e9, gamma};
        p.fits.push_back(f);
      }
      SCALEDL_CHECK(p.fit("allreduce", p.gpus_per_node),
                    "fabric {}: the measured presets it is derived from ({}) have no all-reduce fit", d.name,
                    fmt::join(names, ", "));
      p.source = fmt::format(
          "derived: link {:g} GB/s per GPU x the median share of the link that {} reach{} per collective "
          "and world size, their median gamma; link: {}",
          d.link_gbs, fmt::join(names, ", "), names.size() == 1 ? "es" : "", d.link_source);
    }
    FabricPreset& p = out[i];
    if (!p.inter && p.nic_gbs > 0 && !nic_share.empty()) {
      const auto [share, gamma] = medians(nic_share);
      p.inter = CommModel{share * p.nic_gbs * 1e9, gamma, 2};
      p.inter_source = fmt::format(
          "derived: NIC {:g} GB/s per GPU x the share of the NIC that the measured "
          "inter-node all-reduce of {} reaches ({:.2f})",
          p.nic_gbs, fmt::join(inter_from, ", "), share);
    }
  }
  std::vector<FabricPreset> kept;
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].name.empty()) kept.push_back(std::move(out[i]));
  return kept;
}

std::vector<FabricLooRow> leave_one_fabric_out(const FabricDefinitions& defs,
                                               const std::vector<CollectiveMeasurement>& rows,
                                               double min_eval_bytes) {
  const std::vector<FabricPreset> all = build_fabric_presets(defs, rows);
  std::vector<FabricLooRow> out;
  std::set<std::string> devices;
  for (const FabricDefinition& d : defs.fabrics)
    if (!d.campaigns.empty() && !d.device.empty()) devices.insert(d.device);
  for (const std::string& dev : devices) {
    // Derive every preset of this GPU from the other GPUs' measured presets.
    FabricDefinitions held = defs;
    for (FabricDefinition& d : held.fabrics)
      if (d.device == dev) d.campaigns.clear();
    bool can = false;
    for (const FabricDefinition& d : held.fabrics)
      if (d.device == dev)
        for (const FabricDefinition& o : held.fabrics)
          can = can || (o.device != dev && o.kind == d.kind && !o.campaigns.empty());
    if (!can) continue;  // the only measured preset of its kind: nothing to derive it from
    std::vector<FabricPreset> derived;
    try {
      derived = build_fabric_presets(held, rows);
    } catch (const Error&) {
      continue;
    }
    for (const FabricDefinition& d : defs.fabrics) {
      if (d.device != dev || d.campaigns.empty()) continue;
      const auto own =
          std::find_if(all.begin(), all.end(), [&](const FabricPreset& p) { return p.name == d.name; });
      const auto loo = std::find_if(derived.begin(), derived.end(),
                                    [&](const FabricPreset& p) { return p.name == d.name; });
      if (own == all.end() || loo == derived.end()) continue;
      for (const CollectiveMeasurement& r : rows) {
        if (std::find(d.campaigns.begin(), d.campaigns.end(), r.campaign) == d.campaigns.end()) continue;
        if (r.status != "ok" || r.level != "intra-node" || r.nodes != 1 || r.bytes < min_eval_bytes ||
            r.world > d.gpus_per_node || !(r.time_s > 0))
          continue;
        const FabricFit* fo = own->fit(r.collective, r.world);
        const FabricFit* fl = loo->fit(r.collective, r.world);
        if (!fo || !fl || fo->world != r.world) continue;  // held out: the fit predict would use (fit())
        const double measured =
            comm_factors(r.collective, CommForm::Ring, r.world).a * r.bytes / r.time_s / 1e9;
        out.push_back({d.name, to_string(d.kind), r.collective, r.world, r.bytes, measured,
                       model_busbw_gbs(fo->model, r.collective, r.world, r.bytes),
                       model_busbw_gbs(fl->model, r.collective, r.world, r.bytes)});
      }
    }
  }
  return out;
}

std::vector<FabricLooSummary> summarize_fabric_loo(const std::vector<FabricLooRow>& rows) {
  std::vector<std::string> order;
  std::map<std::string, FabricLooSummary> by;
  auto add = [&](const std::string& g, const FabricLooRow& r) {
    auto [it, fresh] = by.try_emplace(g);
    if (fresh) order.push_back(g);
    FabricLooSummary& s = it->second;
    s.group = g;
    ++s.rows;
    s.fitted_mape += 100 * std::fabs(r.fitted_gbs / r.measured_gbs - 1);
    s.predicted_mape += 100 * std::fabs(r.predicted_gbs / r.measured_gbs - 1);
  };
  for (const FabricLooRow& r : rows) add("all", r);
  for (const FabricLooRow& r : rows) add(r.kind, r);
  for (const FabricLooRow& r : rows) add(r.fabric, r);
  for (const FabricLooRow& r : rows) add(r.fabric + " " + r.collective, r);
  std::vector<FabricLooSummary> out;
  for (const std::string& g : order) {
    FabricLooSummary s = by[g];
    s.fitted_mape /= static_cast<double>(s.rows);
    s.predicted_mape /= static_cast<double>(s.rows);
    out.push_back(s);
  }
  return out;
}

}  // namespace scaledl
