// scaledl comm fit: fit T = a(N) S/B + c(N) gamma (ring; tree for all-reduce)
// to the collective rows of a store, per (campaign, device, collective,
// backend, level, world, nodes); write the calibration file that
// `train --comm` / `predict --comm` read, and plots (docs/comm.md).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "scaledl/comm/collectives.hpp"
#include "scaledl/comm/fabric.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"

namespace {

struct CommFitOptions {
  std::string db;
  std::string campaign;    ///< "" = all campaigns
  std::string collective;  ///< "" = all collectives
  std::string out;         ///< calibration JSON ("" = none)
  std::string plot;        ///< plot directory ("" = none)
  bool json = false;
};

int run(const CommFitOptions& o) {
  using namespace scaledl;
  const std::string collective =
      o.collective.empty() ? "" : canonical_collective(o.collective, "--collective");
  check_output_is_not_input(o.out, "--out", {{"--db", o.db}});
  Store store(o.db, /*read_only=*/true);
  const auto rows = store.collectives(o.campaign, collective);
  SCALEDL_CHECK(!rows.empty(),
                "{}: no ok collective rows{}{} (add some with `scaledl import nccl-tests` or `scaledl bench "
                "allreduce`)",
                o.db, o.campaign.empty() ? "" : fmt::format(" in --campaign={}", o.campaign),
                collective.empty() ? "" : fmt::format(" of --collective={}", collective));
  // An implausible fit (issue #39 case 9) is an error naming the store, the group and its rows' file.
  const auto fits = [&] {
    try {
      return fit_collectives(rows);
    } catch (const Error& e) {
      fail("{}: {}", o.db, e.what());
    }
  }();
  const nlohmann::json j = comm_fit_json(fits);
  if (!o.out.empty()) write_json_file(o.out, j);
  std::vector<std::string> plots;
  if (!o.plot.empty()) plots = plot_collective_fits(rows, fits, o.plot);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  // Column names as in docs/comm.md: B = bus bandwidth (GB/s), gamma (us), MRE
  // and max = mean and largest |relative residual| (%).
  std::printf("%-12s %-13s %-10s %-10s %5s %5s %6s | %9s %9s %6s %6s | %9s %9s %6s %6s | %-4s %s\n",
              "campaign", "collective", "backend", "level", "world", "nodes", "sizes", "ring_B", "gamma_us",
              "mre_%", "max_%", "tree_B", "gamma_us", "mre_%", "max_%", "best", "device");
  for (const auto& f : fits) {
    // world "all": one (B, gamma) fitted to every world size of the family.
    std::string line =
        fmt::format("{:<12} {:<13} {:<10} {:<10} {:>5} {:>5} {:>6} | ", f.campaign, f.collective, f.backend,
                    f.level, f.world == 0 ? std::string("all") : std::to_string(f.world), f.nodes, f.sizes);
    if (!f.ring) {
      std::printf("%sskipped: %s\n", line.c_str(), f.skipped.c_str());
      continue;
    }
    auto cols = [](const std::optional<CommFit>& c) {
      if (!c) return fmt::format("{:>9} {:>9} {:>6} {:>6}", "-", "-", "-", "-");
      return fmt::format("{:>9.2f} {:>9.2f} {:>6.2f} {:>6.1f}", c->model.bandwidth_Bps / 1e9,
                         c->model.gamma_s * 1e6, 100 * c->mre, 100 * c->max_rel);
    };
    line += cols(f.ring) + " | " + cols(f.tree) + fmt::format(" | {:<4} {}", f.best(), f.device);
    std::printf("%s\n", line.c_str());
  }
  if (!o.out.empty()) {
    if (j.contains("bandwidth_Bps"))
      std::printf(
          "%s: bandwidth_Bps %.4g, gamma_s %.4g (ring all-reduce, world %lld, campaign %s) + %zu fits\n",
          o.out.c_str(), j["bandwidth_Bps"].get<double>(), j["gamma_s"].get<double>(),
          static_cast<long long>(j["source"]["world"].get<int64_t>()),
          j["source"]["campaign"].get<std::string>().c_str(), fits.size());
    else
      std::printf("%s: %zu fits, no all-reduce fit: the file has no bandwidth_Bps/gamma_s for --comm\n",
                  o.out.c_str(), fits.size());
  }
  for (const auto& p : plots) std::printf("plot: %s\n", p.c_str());
  return 0;
}

scaledl::cli::Registrar reg_fit(
    {"comm", "fit"},
    "Fit bandwidth B and latency gamma of the collective models (ring, tree) to measured collectives in a "
    "store",
    [](CLI::App& app) {
      auto o = std::make_shared<CommFitOptions>();
      app.add_option("--db", o->db, "results store with collective rows")->required();
      app.add_option("--campaign", o->campaign, "only rows of this campaign (default: all, fitted apart)");
      app.add_option("--collective", o->collective, "only allreduce, allgather, reducescatter or sendrecv");
      app.add_option(
          "--out", o->out,
          "calibration JSON: bandwidth_Bps/gamma_s of the largest all-reduce (for train/predict --comm) "
          "+ every fit");
      app.add_option("--plot", o->plot,
                     "directory for <collective>-<campaign>.svg (gnuplot), with .dat and .gp");
      app.add_flag("--json", o->json, "print the calibration JSON instead of the table");
      return [o] { return run(*o); };
    });

// scaledl comm presets: models/fabrics/*.json from the definitions and a store of
// imported collective rows (scripts/build_fabrics.sh), and their leave-one-GPU-out.
struct CommPresetsOptions {
  std::string db;
  std::string defs;
  std::string out;  ///< directory for <name>.json ("" = none)
  std::string loo;  ///< CSV of the held-out rows ("" = no leave-one-out)
  double loo_min_bytes = 64e6;
};

int run_presets(const CommPresetsOptions& o) {
  using namespace scaledl;
  const FabricDefinitions defs = load_fabric_definitions(o.defs);
  check_output_is_not_input(o.loo, "--loo", {{"--db", o.db}, {"--defs", o.defs}});
  Store store(o.db, /*read_only=*/true);
  const auto rows = store.collectives();
  SCALEDL_CHECK(!rows.empty(), "{}: no ok collective rows (import them first: scripts/build_fabrics.sh)",
                o.db);
  const std::vector<FabricPreset> presets = build_fabric_presets(defs, rows);
  std::printf("%-24s %-11s %-8s %5s %8s | %-30s | %s\n", "fabric", "kind", "origin", "gpus", "link",
              "all-reduce bus GB/s by ranks", "across nodes");
  for (const FabricPreset& p : presets) {
    std::string ar;
    for (const FabricFit& f : p.fits)
      if (f.collective == "allreduce")
        ar += fmt::format("{}{}:{:.0f}", ar.empty() ? "" : " ", f.world, f.model.bandwidth_Bps / 1e9);
    std::printf("%-24s %-11s %-8s %5lld %8.1f | %-30s | %s\n", p.name.c_str(), to_string(p.kind),
                p.origin.c_str(), static_cast<long long>(p.gpus_per_node), p.link_gbs, ar.c_str(),
                p.inter ? fmt::format("{:.1f} GB/s ({})", p.inter->bandwidth_Bps / 1e9,
                                      p.inter_source.substr(0, p.inter_source.find(':')))
                              .c_str()
                        : "-");
  }
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    for (const FabricPreset& p : presets) write_json_file(o.out + "/" + p.name + ".json", p.to_json());
    std::printf("wrote %zu presets to %s\n", presets.size(), o.out.c_str());
  }
  if (!o.loo.empty()) {
    const auto loo = leave_one_fabric_out(defs, rows, o.loo_min_bytes);
    SCALEDL_CHECK(!loo.empty(),
                  "--loo: no fabric could be held out (each is the only measured one of its kind)");
    std::string csv = "fabric,kind,collective,world,bytes,measured_gbs,fitted_gbs,predicted_gbs\n";
    for (const FabricLooRow& r : loo)
      csv += fmt::format("{},{},{},{},{:.0f},{:.2f},{:.2f},{:.2f}\n", r.fabric, r.kind, r.collective, r.world,
                         r.bytes, r.measured_gbs, r.fitted_gbs, r.predicted_gbs);
    write_text_file_atomic(o.loo, csv);
    std::printf("\nleave-one-GPU-out (collectives): bus bandwidth of the rows >= %.0f MB, MAPE %%\n",
                o.loo_min_bytes / 1e6);
    std::printf("%-44s %5s %8s %10s\n", "group", "rows", "fitted", "held out");
    for (const FabricLooSummary& s : summarize_fabric_loo(loo))
      std::printf("%-44s %5zu %8.1f %10.1f\n", s.group.c_str(), s.rows, s.fitted_mape, s.predicted_mape);
    std::printf("rows: %s\n", o.loo.c_str());
  }
  return 0;
}

scaledl::cli::Registrar reg_presets(
    {"comm", "presets"},
    "Fit the fabric presets (models/fabrics) on imported collective rows, derive the unmeasured ones, and "
    "score them leave-one-GPU-out",
    [](CLI::App& app) {
      auto o = std::make_shared<CommPresetsOptions>();
      app.add_option("--db", o->db, "store with the imported collective rows")->required();
      app.add_option("--defs", o->defs, "fabric definitions (datasets/gpus/fabrics.json)")->required();
      app.add_option("--out", o->out, "directory for <name>.json (models/fabrics)");
      app.add_option("--loo", o->loo, "CSV of the leave-one-GPU-out rows (and print the summary)");
      app.add_option("--loo-min-bytes", o->loo_min_bytes, "smallest message scored, bytes (default 64e6)")
          ->check(CLI::Range(1.0, 1e12));
      return [o] { return run_presets(*o); };
    });

}  // namespace
