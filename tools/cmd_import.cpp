// scaledl import neusight | neusight-subset: the public NeuSight GPU measurements.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "scaledl/neusight.hpp"
#include "scaledl/store.hpp"

namespace {

struct ImportOptions {
  scaledl::NeusightImportOptions ns;
  std::string db;
  bool json = false;
};

scaledl::cli::Registrar reg_import(
    {"import", "neusight"}, "Import NeuSight GPU operator timings (ops/, ops-transformer-shapes/) into a store",
    [](CLI::App& app) {
      auto o = std::make_shared<ImportOptions>();
      app.add_option("--root", o->ns.root, "NeuSight artifact directory (ops/, device_configs/) or datasets/neusight")
          ->required();
      app.add_option("--db", o->db, "results store (SQLite), created if missing")->required();
      app.add_option("--campaign", o->ns.campaign, "campaign name of the rows")->capture_default_str();
      app.add_flag("!--no-transformer-shapes", o->ns.transformer_shapes, "skip ops-transformer-shapes/*.csv");
      app.add_flag("--json", o->json, "print the summary as JSON");
      return [o] {
        scaledl::Store store(o->db);
        auto s = scaledl::import_neusight(o->ns, store);
        if (o->json) {
          std::cout << s.to_json().dump(2) << "\n";
          return 0;
        }
        std::cout << fmt::format("{} files, {} rows, {} mapped, {} inserted ({} duplicates), {} devices, {:.2f} s\n",
                                 s.files, s.rows, s.mapped, s.inserted, s.mapped - s.inserted, s.devices, s.seconds);
        for (const auto& [t, n] : s.per_type) std::cout << fmt::format("  {:<10} {:>7} rows\n", t, n);
        for (const auto& [op, n] : s.skipped)
          std::cout << fmt::format("  skipped {:<8} {:>6} rows (no ScaleDL layer type)\n", op, n);
        if (s.labels.files) {
          std::cout << fmt::format("{} end-to-end labels: {} runs inserted (campaign {}-labels)\n", s.labels.files,
                                   s.labels.inserted, o->ns.campaign);
          for (const auto& [d, n] : s.labels.per_device) std::cout << fmt::format("  {:<24} {:>4} runs\n", d, n);
          for (const auto& [why, n] : s.labels.skipped)
            std::cout << fmt::format("  skipped {:>3} labels: {}\n", n, why);
        }
        return 0;
      };
    });

struct SubsetOptions {
  std::string root, out;
  size_t rows_per_group = 48;
};

scaledl::cli::Registrar reg_subset(
    {"import", "neusight-subset"},
    "Write a compact stratified subset of the NeuSight artifact (as committed in datasets/neusight)",
    [](CLI::App& app) {
      auto o = std::make_shared<SubsetOptions>();
      app.add_option("--root", o->root, "NeuSight artifact directory")->required();
      app.add_option("--out", o->out, "output directory")->required();
      app.add_option("--rows-per-group", o->rows_per_group, "rows per (file, op) at even latency quantiles, >= 2")
          ->capture_default_str();
      return [o] {
        size_t n = scaledl::write_neusight_subset(o->root, o->out, o->rows_per_group);
        std::cout << fmt::format("wrote {} rows to {}\n", n, o->out);
        return 0;
      };
    });

}  // namespace
