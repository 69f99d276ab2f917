// scaledl eval: ScaleDL and its baselines on whole-iteration runs under the
// protocols of eval.hpp (SCALEDL_EVAL_PROTOCOLS: id, ood-family, ...); writes
// report.md, report.json, predictions.csv and gnuplot plots (docs/eval.md).
// `scaledl eval layers` evaluates the per-layer regressors alone.
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.hpp"
#include "feature_flags.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/eval/eval.hpp"

namespace {

struct EvalCmdOptions {
  scaledl::EvalOptions e;
  std::string protocol = scaledl::to_string(scaledl::Protocol::Id);  ///< parsed into e.protocol
  std::string out;
  std::string methods;
  bool no_plots = false;
  bool no_ablations = false;
  bool no_intervals = false;
  bool quiet = false;
};

/// The protocols' names, separated by `sep`.
std::string protocol_names(const char* sep) {
  std::vector<std::string> names;
  for (const scaledl::Protocol p : scaledl::all_protocols()) names.push_back(scaledl::to_string(p));
  return fmt::format("{}", fmt::join(names, sep));
}

void add_options(CLI::App& app, EvalCmdOptions& o) {
  auto& e = o.e;
  // Not ->required(): `eval layers ...` must parse without them; checked below.
  app.add_option("--db", e.dbs, "training store(s): layer rows and model runs (repeatable)");
  app.add_option("--test-db", e.test_dbs,
                 "cross-device test store(s), measured on other hardware (repeatable)");
  app.add_flag(
      "--test-layers", e.test_layers,
      "cross-device: the test store's layer rows also train the layer models (a layer campaign on the "
      "new machine; its model runs stay test-only)");
  app.add_option("--protocol", o.protocol, protocol_names(" | "))->capture_default_str();
  app.add_option("--out", o.out, "report directory (report.md, report.json, predictions.csv, plots)");
  app.add_option("--seeds", e.seeds, "repetitions with other split/initialisation seeds, >= 1")
      ->capture_default_str();
  app.add_option("--methods", o.methods,
                 "comma-separated subset of: sum, scaledl-tc, scaledl-anee, scaledl-nomlp, "
                 "dnnperf, rf-hp, mlp-acc, prenet, birnn (default all)");
  app.add_option("--sweep-campaign", e.sweep_campaign,
                 "runs of this campaign are predicted but never trained on or scored (epoch-time curves)");
  app.add_option("--epochs", e.gnn.epochs, "graph methods: epochs, >= 1")->capture_default_str();
  app.add_option("--patience", e.gnn.patience, "graph methods: early-stopping patience, >= 1")
      ->capture_default_str();
  app.add_option("--birnn-epochs", e.birnn_epochs, "BiRNN epochs, >= 1")->capture_default_str();
  app.add_option("--mlp-epochs", e.mlp_epochs, "per-layer MLP epochs, >= 1")->capture_default_str();
  app.add_option("--max-cv", e.max_cv,
                 "also use runs marked unstable whose iteration CV is <= this (0 = ok only)")
      ->capture_default_str();
  app.add_option("--layer-max-cv", e.layer_max_cv,
                 "also train the layer models on layer rows marked unstable whose CV is <= this (0 = ok rows "
                 "only; a noisy machine's rows: docs/results/cpu-zen4/README.md)")
      ->capture_default_str();
  app.add_option("--threads", e.threads, "LibTorch threads, >= 1")->capture_default_str();
  app.add_flag(
      "--host-term", e.host_term,
      "T_sum = max(layer times, nodes x d) on each GPU with >= 8 training runs, d (the host's cost per "
      "graph node) fitted on them (docs/unseen-gpu.md)");
  app.add_option_function<double>(
      "--host-node-us", [&e](double us) { e.host_node_ms = us / 1e3; },
      "the host's cost per graph node, microseconds, for every GPU without a fitted one (with "
      "--host-term: the "
      "held-out GPU), as `predict --host-node-us` gives it (docs/parallel.md)");
  app.add_flag("--probe-bandwidth", e.probe_bandwidth,
               "with --sustained-bw: every GPU as if probed, its sustained bandwidth from its own layer rows "
               "(a held-out GPU's other rows stay unseen; docs/unseen-gpu.md)");
  app.add_option("--calibrate-rows", e.calibrate_rows,
                 "leave-one-device-out or cross-device: calibrate the held-out (test) device's layer times "
                 "with this many of its own layer rows per kind (cross-device: the --test-db store's), as "
                 "`predict --calibrate` does with a short benchmark on it "
                 "(docs/unseen-gpu.md, \"A short calibration benchmark\")");
  app.add_flag(
      "--device-crossfit", e.device_crossfit,
      "leave-one-device-out: the graph methods' training runs get layer times from layer models that "
      "never saw their GPU, as the held-out GPU's runs do (docs/unseen-gpu.md)");
  app.add_flag("--in-model", e.in_model,
               "layer models also train on the node times of each split's training runs (cross-fitted)");
  app.add_option("--crossfit-folds", e.crossfit_folds, "with --in-model: cross-fitting folds, in [2, 20]")
      ->capture_default_str();
  app.add_option("--alpha-bound", e.alpha_bound, "ScaleDL methods: alpha, beta in (1/B, B), B > 1")
      ->capture_default_str();
  app.add_option("--ood-tau", e.ood_tau, "ScaleDL methods: out-of-domain shrinkage toward the sum (0 = off)")
      ->capture_default_str();
  app.add_option("--graph-members", e.graph_members,
                 "graph methods: models per split, seeds seed..seed+N-1, their alpha and beta combined as "
                 "a bundle's refinement members (`train --graph-members`; in [1, 16])")
      ->capture_default_str();
  app.add_flag("--no-intervals", o.no_intervals, "do not calibrate and score scaledl-tc's intervals");
  app.add_option(
         "--anchors", o.e.anchors,
         "leave-one-device-out: also score scaledl-tc anchored on K measured runs of the held-out GPU "
         "(method scaledl-tc+<K>anchor; docs/unseen-gpu.md)")
      ->capture_default_str();
  app.add_flag(
      "!--no-device-intervals", o.e.device_intervals,
      "leave-one-device-out: do not widen the held-out device's intervals to the device-out spread of "
      "the training devices");
  app.add_flag("--no-plots", o.no_plots, "skip the gnuplot plots");
  app.add_flag("--no-ablations", o.no_ablations, "skip the learning curve and D-optimal vs random (id)");
  scaledl::cli::add_feature_flags(app, e.layers);
  app.add_flag("--quiet", o.quiet, "no progress lines on stderr");
}

int run(EvalCmdOptions& o) {
  auto& e = o.e;
  SCALEDL_CHECK(!e.dbs.empty(), "eval: --db STORE is required (or use `eval layers`)");
  SCALEDL_CHECK(!o.out.empty(), "eval: --out DIR is required");
  e.protocol = scaledl::parse_protocol(o.protocol);
  SCALEDL_CHECK(e.threads >= 1, "--threads={} must be >= 1", e.threads);
  SCALEDL_CHECK(e.gnn.epochs >= 1, "--epochs={} must be >= 1", e.gnn.epochs);
  SCALEDL_CHECK(e.gnn.patience >= 1, "--patience={} must be >= 1", e.gnn.patience);
  SCALEDL_CHECK(e.mlp_epochs >= 1, "--mlp-epochs={} must be >= 1", e.mlp_epochs);
  if (!o.methods.empty()) {
    size_t a = 0;
    while (a <= o.methods.size()) {
      size_t b = o.methods.find(',', a);
      if (b == std::string::npos) b = o.methods.size();
      std::string m = o.methods.substr(a, b - a);
      SCALEDL_CHECK(!m.empty(), "--methods=\"{}\": empty method name", o.methods);
      e.methods.push_back(m);
      a = b + 1;
    }
  }
  e.ablations = !o.no_ablations;
  e.intervals = !o.no_intervals;
  SCALEDL_CHECK(std::isfinite(e.alpha_bound) && e.alpha_bound > 1, "--alpha-bound={} must be > 1",
                e.alpha_bound);
  SCALEDL_CHECK(std::isfinite(e.ood_tau) && e.ood_tau >= 0, "--ood-tau={} must be >= 0", e.ood_tau);
  torch::set_num_threads(e.threads);
  if (!o.quiet) e.log = [](const std::string& s) { std::cerr << s << "\n"; };
  scaledl::EvalResult r = scaledl::run_eval(e);
  scaledl::write_eval_report(r, o.out, !o.no_plots);
  std::cout << fmt::format("protocol {}: {} runs, {} seed(s); MRE % over the test runs:\n",
                           scaledl::to_string(e.protocol), r.runs.size(), e.seeds);
  for (const auto& row : r.report["summary"])
    if (row["family"] == "all")
      std::cout << fmt::format(
          "  {:14s} {:7.2f}  (p90 APE {:.1f} %, n = {})\n", row["method"].get<std::string>(),
          row["mre_pct"].is_number() ? row["mre_pct"].get<double>() : NAN,
          row["p90_pct"].is_number() ? row["p90_pct"].get<double>() : NAN, row["n"].get<int64_t>());
  if (r.report.contains("intervals"))
    for (const auto& row : r.report["intervals"])
      std::cout << fmt::format("  {} intervals: coverage {:.1f} % (80 % nominal), {:.1f} % (95 % nominal)\n",
                               row["method"].get<std::string>(), row["coverage80_pct"].get<double>(),
                               row["coverage95_pct"].get<double>());
  std::cout << "wrote " << o.out << "/report.md\n";
  return 0;
}

scaledl::cli::Registrar reg({"eval"},
                            "Evaluate ScaleDL and baselines on model runs: --protocol " +
                                protocol_names("|") + " --out DIR; `eval layers` for the layer regressors",
                            [](CLI::App& app) {
                              auto o = std::make_shared<EvalCmdOptions>();
                              add_options(app, *o);
                              return [o] { return run(*o); };
                            });

}  // namespace
