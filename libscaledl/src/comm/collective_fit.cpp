// Per-group fits of the closed forms of comm.hpp to measured collectives, the
// calibration file they give, and their plots (collectives.hpp, docs/comm.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "scaledl/comm/collectives.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/gnuplot.hpp"
#include "scaledl/core/json_util.hpp"

namespace fs = std::filesystem;

namespace scaledl {

namespace {

using GroupKey =
    std::tuple<std::string, std::string, std::string, std::string, std::string, int64_t, int64_t>;

GroupKey key_of(const CollectiveMeasurement& m) {
  return {m.campaign, m.device, m.collective, m.backend, m.level, m.nodes, m.world};
}

bool usable(const CollectiveMeasurement& m) {
  return m.status == "ok" && m.world >= 2 && std::isfinite(m.time_s) && m.time_s > 0 &&
         std::isfinite(m.bytes) && m.bytes > 0;
}

nlohmann::json fit_json(const CommFit& f) {
  return {{"bandwidth_Bps", f.model.bandwidth_Bps},
          {"busbw_gbs", f.model.bandwidth_Bps / 1e9},
          {"gamma_s", f.model.gamma_s},
          {"mre", f.mre},
          {"max_rel", f.max_rel}};
}

/// File-name-safe: letters, digits, '.', '_' and '-' kept, the rest '_'.
std::string safe_stem(const std::string& s) {
  std::string o;
  for (char ch : s)
    o += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_') ? ch : '_';
  return o;
}

}  // namespace

std::string CollectiveGroupFit::best() const {
  if (!ring) return "";
  if (!tree) return "ring";
  if (world != 0) return "same";
  return tree->mre < ring->mre ? "tree" : "ring";
}

nlohmann::json CollectiveGroupFit::to_json() const {
  nlohmann::json j = {{"campaign", campaign},   {"device", device},      {"collective", collective},
                      {"backend", backend},     {"level", level},        {"world", world},
                      {"worlds", worlds},       {"nodes", nodes},        {"sizes", sizes},
                      {"min_bytes", min_bytes}, {"max_bytes", max_bytes}};
  if (!skipped.empty()) {
    j["skipped"] = skipped;
    return j;
  }
  j["samples"] = ring->samples;
  j["ring"] = fit_json(*ring);
  if (tree) j["tree"] = fit_json(*tree);
  j["best"] = best();
  return j;
}

namespace {

/// Fits one group's rows (one N, or several for a joint fit) into `g`.
void fit_group(const std::vector<const CollectiveMeasurement*>& ms, CollectiveGroupFit* g) {
  std::vector<AllReduceSample> s;
  std::set<double> sizes;
  std::set<int64_t> worlds;
  for (const auto* m : ms) {
    s.push_back({m->bytes, m->world, m->time_s});
    sizes.insert(m->bytes);
    worlds.insert(m->world);
  }
  g->worlds.assign(worlds.begin(), worlds.end());
  g->sizes = sizes.size();
  g->min_bytes = *sizes.begin();
  g->max_bytes = *sizes.rbegin();
  try {
    SCALEDL_CHECK(sizes.size() >= 2, "only {} message size: a fit needs at least 2", sizes.size());
    g->ring = fit_comm(s, g->collective, CommForm::Ring);
    if (g->collective == "allreduce") g->tree = fit_comm(s, g->collective, CommForm::Tree);
  } catch (const Error& e) {
    g->ring.reset();
    g->tree.reset();
    g->skipped = e.what();
    return;
  }
  // Too few sizes is a group skipped; a fit outside the plausible bounds is
  // absurd data (issue #39 case 9): an error naming the group and its rows' file.
  std::set<std::string> sources;
  for (const auto* m : ms) sources.insert(m->source);
  const std::string ctx = fmt::format(
      "{} fit of campaign {}, world {}, {} node(s){} (rows from {}{})", g->collective, g->campaign,
      g->world == 0 ? std::string("all") : std::to_string(g->world), g->nodes,
      g->device.empty() ? std::string() : ", device " + g->device,
      sources.empty() || sources.begin()->empty() ? std::string("the store") : *sources.begin(),
      sources.size() > 1 ? fmt::format(" and {} other source(s)", sources.size() - 1) : std::string());
  check_comm_plausible(g->ring->model, ctx + ", ring form");
  if (g->tree) check_comm_plausible(g->tree->model, ctx + ", tree form");
}

}  // namespace

std::vector<CollectiveGroupFit> fit_collectives(const std::vector<CollectiveMeasurement>& rows) {
  // family (everything but the world) -> world -> rows
  using Family = std::tuple<std::string, std::string, std::string, std::string, std::string, int64_t>;
  std::map<Family, std::map<int64_t, std::vector<const CollectiveMeasurement*>>> families;
  for (const auto& m : rows)
    if (usable(m))
      families[{m.campaign, m.device, m.collective, m.backend, m.level, m.nodes}][m.world].push_back(&m);
  std::vector<CollectiveGroupFit> out;
  for (const auto& [fam, by_world] : families) {
    CollectiveGroupFit base;
    std::tie(base.campaign, base.device, base.collective, base.backend, base.level, base.nodes) = fam;
    std::vector<const CollectiveMeasurement*> joint;
    size_t fitted = 0;
    for (const auto& [world, ms] : by_world) {
      CollectiveGroupFit g = base;
      g.world = world;
      fit_group(ms, &g);
      if (g.ring) {
        ++fitted;
        joint.insert(joint.end(), ms.begin(), ms.end());
      }
      out.push_back(std::move(g));
    }
    if (fitted >= 2) {
      CollectiveGroupFit g = base;
      g.world = 0;
      fit_group(joint, &g);
      out.push_back(std::move(g));
    }
  }
  return out;
}

nlohmann::json comm_fit_json(const std::vector<CollectiveGroupFit>& fits) {
  nlohmann::json j;
  const CollectiveGroupFit* top = nullptr;
  for (const auto& f : fits) {
    if (f.collective != "allreduce" || !f.ring || f.world == 0) continue;
    if (!top || f.world > top->world || (f.world == top->world && f.ring->samples > top->ring->samples))
      top = &f;
  }
  if (top) {
    // The top-level keys are what load_comm_model reads: eq. 15 (ring) constants.
    j["bandwidth_Bps"] = top->ring->model.bandwidth_Bps;
    j["gamma_s"] = top->ring->model.gamma_s;
    j["nodes"] =
        top->nodes;  // measured on how many nodes (predict/scale warn across more: issue #39 case 27)
    j["source"] = {{"campaign", top->campaign},
                   {"device", top->device},
                   {"backend", top->backend},
                   {"level", top->level},
                   {"world", top->world},
                   {"nodes", top->nodes},
                   {"form", "ring (ScaleDL eq. 15)"}};
  }
  j["fits"] = nlohmann::json::array();
  for (const auto& f : fits) j["fits"].push_back(f.to_json());
  return j;
}

std::vector<std::string> plot_collective_fits(const std::vector<CollectiveMeasurement>& rows,
                                              const std::vector<CollectiveGroupFit>& fits,
                                              const std::string& dir) {
  fs::create_directories(dir);
  std::map<GroupKey, std::vector<const CollectiveMeasurement*>> groups;
  for (const auto& m : rows)
    if (usable(m)) groups[key_of(m)].push_back(&m);
  // One plot per (campaign, collective); one colour per fitted group in it.
  std::map<std::pair<std::string, std::string>, std::vector<const CollectiveGroupFit*>> plots;
  for (const auto& f : fits)
    if (f.ring && f.world != 0) plots[{f.campaign, f.collective}].push_back(&f);
  std::vector<std::string> written;
  const double thin = std::pow(10.0, 1.0 / 20);  // keep about 20 measured points per decade of size
  for (const auto& [pk, fs_] : plots) {
    const auto& [campaign, collective] = pk;
    const std::string stem = safe_stem(collective + "-" + campaign);
    std::set<std::string> devices, backends, levels;
    std::set<int64_t> nodes;
    for (const auto* f : fs_) {
      devices.insert(f->device);
      backends.insert(f->backend);
      levels.insert(f->level);
      nodes.insert(f->nodes);
    }
    std::string dat, plot;
    int idx = 0;
    for (const auto* f : fs_) {
      auto ms = groups.at({f->campaign, f->device, f->collective, f->backend, f->level, f->nodes, f->world});
      std::sort(ms.begin(), ms.end(), [](const auto* a, const auto* b) {
        return std::tie(a->bytes, a->in_place) < std::tie(b->bytes, b->in_place);
      });
      std::vector<const CollectiveMeasurement*> kept;
      for (const auto* m : ms)
        if (kept.empty() || m->bytes >= kept.back()->bytes * thin) kept.push_back(m);
      const CommFactors cf = comm_factors(f->collective, CommForm::Ring, f->world);
      std::string measured = fmt::format("# {} N={} measured: bytes time_s\n", collective, f->world);
      std::string model = fmt::format("# {} N={} ring model: bytes time_s\n", collective, f->world);
      for (const auto* m : kept) {
        measured += fmt::format("{:.10g} {:.6g}\n", m->bytes, m->time_s);
        model += fmt::format("{:.10g} {:.6g}\n", m->bytes,
                             cf.a * m->bytes / f->ring->model.bandwidth_Bps + cf.c * f->ring->model.gamma_s);
      }
      dat += measured + "\n\n" + model + "\n\n";
      std::string label = fmt::format("N={}", f->world);
      if (nodes.size() > 1 || f->nodes > 1) label += fmt::format(" on {} nodes", f->nodes);
      if (levels.size() > 1) label += ", " + f->level;
      if (backends.size() > 1) label += ", " + f->backend;
      if (devices.size() > 1) label += ", " + (f->device.empty() ? std::string("?") : f->device);
      label +=
          fmt::format(": B {:.1f} GB/s, gamma {:.2f} us, MRE {:.1f} %", f->ring->model.bandwidth_Bps / 1e9,
                      f->ring->model.gamma_s * 1e6, 100 * f->ring->mre);
      plot += fmt::format(
          "{}'{}.dat' index {} using 1:2 with points pt 7 ps 0.45 {} title {}, "
          "'{}.dat' index {} using 1:2 with lines lw 1.5 {} notitle",
          idx ? ", " : "", stem, 2 * idx, gp_colour(idx), gp_quote(label), stem, 2 * idx + 1, gp_colour(idx));
      ++idx;
    }
    write_text_file_atomic((fs::path(dir) / (stem + ".dat")).string(), dat);
    const std::string device =
        devices.size() == 1 && !devices.begin()->empty() ? ", " + *devices.begin() : "";
    run_gnuplot(
        dir, stem,
        fmt::format("cd {}\nset title {}\nset logscale xy\nset format x '%.0s%cB'\nset format y '%.0s%cs'\n"
                    "set xlabel 'message size S (bytes, nccl-tests size)'\nset ylabel 'time of one {} (s)'\n"
                    "set key left top\nset grid\n"
                    "plot {}, NaN with lines lw 1.5 lc 'black' title 'lines: T = a(N) S/B + c(N) gamma, ring "
                    "form, fitted per N'\n",
                    gp_quote(dir),
                    gp_quote(fmt::format("{}, campaign {}{}: measured (points) vs fitted model", collective,
                                         campaign, device)),
                    collective, plot),
        {"svg"}, /*keep_script=*/true);
    written.push_back((fs::path(dir) / (stem + ".svg")).string());
  }
  return written;
}

}  // namespace scaledl
