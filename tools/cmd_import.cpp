// scaledl import neusight | neusight-subset: the public NeuSight GPU measurements.
// scaledl import nccl-tests: NVIDIA nccl-tests output and vTrain's all-reduce tables.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "scaledl/comm/collectives.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/neusight.hpp"

namespace {

struct ImportOptions {
  scaledl::NeusightImportOptions ns;
  std::string db;
  bool json = false;
};

scaledl::cli::Registrar reg_import(
    {"import", "neusight"},
    "Import NeuSight GPU operator timings (ops/, ops-transformer-shapes/) into a store", [](CLI::App& app) {
      auto o = std::make_shared<ImportOptions>();
      app.add_option("--root", o->ns.root,
                     "NeuSight artifact directory (ops/, device_configs/) or datasets/neusight")
          ->required();
      app.add_option("--db", o->db, "results store (SQLite), created if missing")->required();
      app.add_option("--campaign", o->ns.campaign, "campaign name of the rows")->capture_default_str();
      app.add_flag("!--no-transformer-shapes", o->ns.transformer_shapes, "skip ops-transformer-shapes/*.csv");
      app.add_flag(
          "--traces", o->ns.traces,
          "also import the per-node traces beside the labels (labels/<GPU>/<label>.csv) as layer rows of "
          "campaign <campaign>-traces (docs/unseen-gpu.md: they do not improve the unseen-GPU results yet)");
      app.add_flag("--json", o->json, "print the summary as JSON");
      return [o] {
        scaledl::Store store(o->db);
        auto s = scaledl::import_neusight(o->ns, store);
        if (o->json) {
          std::cout << s.to_json().dump(2) << "\n";
          return 0;
        }
        std::cout << fmt::format(
            "{} files, {} rows, {} mapped, {} inserted ({} duplicates), {} devices, {:.2f} s\n", s.files,
            s.rows, s.mapped, s.inserted, s.mapped - s.inserted, s.devices, s.seconds);
        for (const auto& [t, n] : s.per_type) std::cout << fmt::format("  {:<10} {:>7} rows\n", t, n);
        for (const auto& [op, n] : s.skipped)
          std::cout << fmt::format("  skipped {:<8} {:>6} rows (no ScaleDL layer type)\n", op, n);
        if (s.labels.files) {
          std::cout << fmt::format("{} end-to-end labels: {} runs inserted (campaign {}-labels)\n",
                                   s.labels.files, s.labels.inserted, o->ns.campaign);
          for (const auto& [d, n] : s.labels.per_device)
            std::cout << fmt::format("  {:<24} {:>4} runs\n", d, n);
          for (const auto& [why, n] : s.labels.skipped)
            std::cout << fmt::format("  skipped {:>3} labels: {}\n", n, why);
        }
        if (s.traces.files) {
          std::cout << fmt::format(
              "{} per-node traces: {} timed nodes, {} mapped ({} faster than {} ms skipped), {} layer rows, "
              "{} inserted "
              "(campaign {}-traces)\n",
              s.traces.files, s.traces.nodes, s.traces.mapped, s.traces.below_floor, scaledl::kTraceMinMs,
              s.traces.rows, s.traces.inserted, o->ns.campaign);
          size_t other = 0;
          for (const auto& [k, n] : s.traces.skipped) other += n;
          std::cout << fmt::format(
              "  skipped {} nodes of kernels without a layer type of ours (views, embeddings, "
              "dropout, masks; --json lists them)\n",
              other);
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
      app.add_option("--rows-per-group", o->rows_per_group,
                     "rows per (file, op) at even latency quantiles, >= 2")
          ->capture_default_str();
      return [o] {
        size_t n = scaledl::write_neusight_subset(o->root, o->out, o->rows_per_group);
        std::cout << fmt::format("wrote {} rows to {}\n", n, o->out);
        return 0;
      };
    });

struct NcclTestsCliOptions {
  scaledl::NcclTestsImportOptions nt;
  std::vector<std::string> files;
  std::string db;
  bool json = false;
};

scaledl::cli::Registrar reg_nccl_tests(
    {"import", "nccl-tests"},
    "Import collective timings: nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
    "sendrecv_perf) or vTrain's AR_GPU<N> tables (docs/comm.md)",
    [](CLI::App& app) {
      auto o = std::make_shared<NcclTestsCliOptions>();
      app.add_option("files", o->files, "nccl-tests output files, or vTrain AR_GPU<N>_* CSV tables")
          ->required();
      app.add_option("--db", o->db, "results store (SQLite), created if missing")->required();
      app.add_option("--campaign", o->nt.campaign, "campaign name of the rows")->capture_default_str();
      auto* world =
          app.add_option("--world", o->nt.world,
                         "ranks, >= 2, where a file does not list them (its '#  Rank' lines, AR_GPU<N>)");
      auto* nodes = app.add_option("--nodes", o->nt.nodes,
                                   "nodes, >= 1 (default: hosts of the '#  Rank' lines, else 1)");
      app.add_option("--level", o->nt.level, "intra-node or inter-node (default: inter-node when nodes > 1)");
      app.add_option("--collective", o->nt.collective,
                     "allreduce, allgather, reducescatter or sendrecv, where the file does not say");
      app.add_option("--device", o->nt.device,
                     "device of the rows (default: cuda:<GPU name> of rank 0's line, else none)");
      app.add_flag("--json", o->json, "print the summary as JSON");
      return [o, world, nodes] {
        // 0 is the options' "from the file": given explicitly it is a bad value.
        SCALEDL_CHECK(!(world->count() && o->nt.world < 2),
                      "--world={} must be >= 2 (ranks of the collective)", o->nt.world);
        SCALEDL_CHECK(!(nodes->count() && o->nt.nodes < 1), "--nodes={} must be >= 1", o->nt.nodes);
        auto s = scaledl::import_nccl_tests(o->files, o->nt, o->db);
        if (o->json) {
          std::cout << s.to_json().dump(2) << "\n";
          return 0;
        }
        std::cout << fmt::format(
            "{} files, {} rows (out-of-place + in-place), {} inserted ({} already there) -> {}\n", s.files,
            s.rows, s.inserted, s.rows - s.inserted, o->db);
        // Rows whose time their own algbw/busbw columns contradict were refused (issue #39 case 10).
        for (const auto& n : s.refused.notes) std::cout << "note: " << n << "\n";
        return 0;
      };
    });

}  // namespace
