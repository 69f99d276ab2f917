// scaledl train: layer models + graph refinement (+ all-reduce calibration) from
// one or more stores into ONE bundle directory, the object `predict --bundle`
// loads (bundle.hpp). `train layers` and `train graph` remain for the stages alone.
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "feature_flags.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/predict/bundle.hpp"

namespace {

struct TrainOptions {
  scaledl::BundleTrainOptions b;
  std::string out;
  int threads = 1;
  bool no_graph = false;
  bool json = false;
  bool quiet = false;
};

// Long (~140 lines) for a reason: it is the command's list of options, one
// add_option per flag with its help text and check; the work is in the library.
scaledl::cli::Registrar reg(
    {"train"},
    "Train layer models + graph refinement from stores into one bundle (`train --db S --out B`); "
    "`train layers|graph` run one stage",
    [](CLI::App& app) {
      auto o = std::make_shared<TrainOptions>();
      // Not ->required(): `train layers ...` must parse without them; checked below.
      app.add_option("--db", o->b.dbs, "store(s) with layer rows and model runs (repeatable)");
      app.add_option("--memory-db", o->b.memory_dbs,
                     "store(s) whose measured peaks train the memory correction (default: --db)");
      app.add_option("--out", o->out, "bundle directory to write (replaced only when training succeeds)");
      app.add_option("--encoder", o->b.gnn.encoder, "transformerconv | anee")->capture_default_str();
      app.add_option("--folds", o->b.folds, "also k-fold CV of the refinement over the runs (0 = off)")
          ->capture_default_str();
      app.add_option("--epochs", o->b.gnn_train.epochs, "refinement epochs, >= 1")->capture_default_str();
      app.add_option("--seed", o->b.gnn_train.seed, "seed of the refinement")->capture_default_str();
      app.add_option(
             "--graph-members", o->b.graph_members,
             "refinements to train (seeds --seed, +1, ...); predict takes the geometric mean of their "
             "alpha and beta, 1..16 (docs/predict.md)")
          ->capture_default_str();
      app.add_option("--comm", o->b.comm,
                     "all-reduce calibration JSON ({bandwidth_Bps, gamma_s} or {allreduce: [...]})");
      app.add_option(
          "--in-model-db", o->b.in_model_dbs,
          "also train the layer models on the per-node times of this store's model runs (repeatable)");
      app.add_option("--crossfit-folds", o->b.crossfit_folds,
                     "with --in-model-db: folds of the runs for cross-fitted layer times, >= 2")
          ->capture_default_str();
      app.add_option("--alpha-bound", o->b.gnn.alpha_bound, "alpha, beta in (1/B, B), B > 1")
          ->capture_default_str();
      app.add_option("--ood-tau", o->b.gnn.ood_tau,
                     "out-of-domain shrinkage toward the plain sum: alpha^exp(-d/tau) (0 = off)")
          ->capture_default_str();
      app.add_option("--max-cv", o->b.max_cv,
                     "also train on runs marked unstable whose iteration CV is <= this (0 = ok rows only)")
          ->capture_default_str();
      app.add_option(
             "--layer-max-cv", o->b.layer_max_cv,
             "also train the layer models on layer rows marked unstable whose CV is <= this (0 = ok rows "
             "only; a noisy machine's rows: docs/results/cpu-zen4/README.md)")
          ->capture_default_str();
      app.add_option("--threads", o->threads, "LibTorch threads (1 = repeatable), >= 1")
          ->capture_default_str();
      scaledl::cli::add_feature_flags(app, o->b.layers);
      app.add_option("--nthread", o->b.layers.nthread, "XGBoost threads, 0 = automatic")
          ->check(CLI::Range(0, 1024))
          ->capture_default_str();
      app.add_flag(
          "--reproducible", o->b.reproducible,
          "no time, duration or build commit in the manifest: same inputs, same bytes (use --threads 1)");
      app.add_flag("--host-term", o->b.host_term,
                   "fit the host's cost per graph node of each GPU with >= 8 runs; T_sum = max(layer times, "
                   "nodes x d) "
                   "for it, in training and predict (docs/unseen-gpu.md)");
      app.add_flag(
          "--device-crossfit", o->b.device_crossfit,
          "also train the device-out refinement, on layer times from layer models without each run's own "
          "GPU; predict uses it for GPUs without layer timings in the bundle (docs/unseen-gpu.md)");
      app.add_flag("--no-graph", o->no_graph, "layer models only (no refinement: T_iter = T_sum + T_comm)");
      app.add_flag(
          "!--no-device-intervals", o->b.device_intervals,
          "do not calibrate the interval width for devices without layer timings (leave-one-device-out, "
          "one more layer model per device with runs; docs/predict.md)");
      app.add_flag("--json", o->json, "print the manifest as JSON");
      app.add_flag("--quiet", o->quiet,
                   "no progress on stderr (by default a line per stage and layer kind, and every 10 s "
                   "while the refinement trains)");
      return [o] {
        SCALEDL_CHECK(!o->b.dbs.empty(),
                      "train: --db STORE is required (or use `train layers` / `train graph`)");
        SCALEDL_CHECK(!o->out.empty(), "train: --out BUNDLE is required");
        SCALEDL_CHECK(o->threads >= 1, "--threads={} must be >= 1", o->threads);
        o->b.gnn.validate("train");
        o->b.graph = !o->no_graph;
        torch::set_num_threads(o->threads);
        if (!o->quiet) {  // progress lines, in a log as on a terminal
          const auto t0 = std::chrono::steady_clock::now();
          o->b.progress = [t0](const std::string& line) {
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::cerr << fmt::format("train: [{:6.1f} s] {}\n", s, line) << std::flush;
          };
          o->b.layers.verbose = true;  // a line per layer kind trained
        }
        o->b.command = fmt::format(
            "scaledl train --db {} --out {} --encoder {} --epochs {} --seed {}{}{}{}{}{}",
            fmt::join(o->b.dbs, " --db "), o->out, o->b.gnn.encoder, o->b.gnn_train.epochs,
            o->b.gnn_train.seed,
            o->b.graph_members > 1 ? fmt::format(" --graph-members {}", o->b.graph_members) : "",
            o->b.in_model_dbs.empty()
                ? ""
                : fmt::format(" --in-model-db {}", fmt::join(o->b.in_model_dbs, " --in-model-db ")),
            o->no_graph ? " --no-graph" : "", o->b.host_term ? " --host-term" : "",
            o->b.device_crossfit ? " --device-crossfit" : "");
        nlohmann::json m = scaledl::train_bundle(o->b, o->out);
        if (o->json) {
          std::cout << m.dump(2) << "\n";
          return 0;
        }
        const auto& t = m["training"];
        std::cout << fmt::format("bundle      {}\n", o->out)
                  << fmt::format("layer rows  {} ({} samples)\n", t["layer_rows"].get<int64_t>(),
                                 t["layer_samples"].get<int64_t>())
                  << fmt::format("model runs  {} {}\n", t["model_runs"].get<int64_t>(),
                                 t["runs_per_family"].dump());
        if (m.contains("host")) {
          if (m["host"].empty()) std::cout << "host term   none (no GPU with 8 runs whose fit beats none)\n";
          for (auto it = m["host"].begin(); it != m["host"].end(); ++it)
            std::cout << fmt::format("host term   {}: {:.1f} us per graph node ({} runs)\n", it.key(),
                                     1e3 * it.value()["node_ms"].get<double>(),
                                     it.value()["runs"].get<int64_t>());
        }
        if (m.contains("graph")) {
          const auto& r = m["graph"]["report"];
          auto pct = [](const nlohmann::json& v) { return v.is_number() ? 100 * v.get<double>() : NAN; };
          std::cout << fmt::format("refinement  {} (validation MRE {:.2f} % before, {:.2f} % after)\n",
                                   o->b.gnn.encoder, pct(r["val_mre_before"]), pct(r["val_mre"]));
          if (m["graph"].contains("intervals")) {
            const auto iv = scaledl::IntervalModel::from_json(m["graph"]["intervals"], "intervals");
            const double mid =
                std::exp(0.5 * (iv.u_lo + iv.u_hi));  // a run in the middle of the calibration range
            std::cout << fmt::format(
                "intervals   in domain, for a run of T_sum {:.3g} ms: 80 % x/÷ {:.3f}, 95 % x/÷ {:.3f} "
                "({}); widening per unit of out-of-domain distance {:.2f} (80 %), {:.2f} (95 %)\n",
                mid, iv.at(1.0, 0, 0.80, mid).hi, iv.at(1.0, 0, 0.95, mid).hi, iv.source, iv.kappa80,
                iv.kappa);
            if (iv.has_unseen())
              std::cout << fmt::format(
                  "            device without layer timings: at least 80 % x/÷ {:.3f}, 95 % x/÷ {:.3f} "
                  "(leave-one-device-out over {} devices, {} runs)\n",
                  std::exp(iv.unseen_q80), std::exp(iv.unseen_q95),
                  iv.unseen_info.value("devices", int64_t{0}), iv.unseen_info.value("runs", int64_t{0}));
          }
          if (m.contains("graph_device_out")) {
            const auto& g = m["graph_device_out"];
            const auto& r = g["report"];
            std::cout << fmt::format(
                "device-out  refinement for GPUs without layer timings: {} runs with layer times "
                "from models without their GPU, {} of GPUs without layer rows, {} left out "
                "(validation MRE {:.2f} % before, {:.2f} % after)\n",
                g["runs"]["device_out"].get<int64_t>(), g["runs"]["device_without_layer_rows"].get<int64_t>(),
                g["runs"]["left_out"].get<int64_t>(), pct(r["val_mre_before"]), pct(r["val_mre"]));
          }
          if (m["graph"].contains("cv"))
            std::cout << fmt::format("cv          {}-fold MRE {:.2f} % (inside the training distribution)\n",
                                     m["graph"]["cv"]["folds"].get<int64_t>(),
                                     100 * m["graph"]["cv"]["mre"].get<double>());
        }
        std::cout << (m.contains("seconds")
                          ? fmt::format("wrote       {} files in {:.1f} s\n", m["files"].size(),
                                        m["seconds"].get<double>())
                          : fmt::format("wrote       {} files (reproducible)\n", m["files"].size()));
        return 0;
      };
    });

}  // namespace
