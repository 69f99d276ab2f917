// scaledl train layers: fit the per-layer XGBoost regressors (ScaleDL eq. 6-7)
// on one or more result stores, report k-fold cross-validated errors against the
// baselines, and save the model directory read by LayerPredictor::load.
#include <chrono>
#include <iostream>
#include <memory>

#include <fmt/ranges.h>

#include "command.hpp"
#include "feature_flags.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace {

struct TrainLayersOptions {
  std::vector<std::string> dbs;
  std::vector<std::string> device_specs;
  std::vector<std::string> in_model_dbs;  ///< stores whose model runs' node_times become samples
  bool in_model_eval_only = false;        ///< in-model samples only as CV test rows
  std::string out;
  int folds = 5;  ///< 0 = no cross-validation
  std::vector<std::string> methods = {"xgboost", "linear", "forest", "mlp"};
  scaledl::CvOptions cv;
  bool json = false;
};

/// Options shared by `train layers` and `eval layers` (one table drives both).
void add_model_options(CLI::App& app, scaledl::TrainOptions& t, scaledl::CvOptions& cv) {
  app.add_option("--rounds", t.rounds, "XGBoost boosting rounds, >= 1")->capture_default_str();
  app.add_option("--max-depth", t.max_depth, "XGBoost tree depth, 1..20")->capture_default_str();
  app.add_option("--eta", t.eta, "XGBoost learning rate, (0, 1]")->capture_default_str();
  app.add_option("--min-child-weight", t.min_child_weight, "XGBoost min_child_weight, >= 0")
      ->capture_default_str();
  app.add_option("--subsample", t.subsample, "XGBoost row subsample per tree, (0, 1]")->capture_default_str();
  app.add_option("--colsample", t.colsample, "XGBoost colsample_bytree, (0, 1]")->capture_default_str();
  app.add_option("--target", t.target, "target transform: log | raw | log_roofline | log_roofline_floor")
      ->capture_default_str();
  app.add_flag("!--no-roofline-features", t.roofline_features, "drop the CT/CM/roofline/AI columns");
  scaledl::cli::add_feature_flags(app, t);
  app.add_option("--min-rows", t.min_rows, "fewer rows than this => roofline fallback, >= 1")
      ->capture_default_str();
  app.add_option("--nthread", t.nthread,
                 "XGBoost threads, 0 = automatic (1 below 16,384 rows, else all cores)")
      ->capture_default_str();
  app.add_option("--seed", t.seed, "XGBoost seed and fold assignment")->capture_default_str();
  app.add_option("--mlp-epochs", cv.mlp_epochs, "epochs of the MLP baseline, >= 1")->capture_default_str();
  app.add_option("--torch-device", cv.torch_device, "LibTorch device of the MLP baseline")
      ->capture_default_str();
  app.add_flag("-v,--verbose", t.verbose, "progress on stderr");
}

scaledl::cli::Registrar reg(
    {"train", "layers"}, "Train per-layer XGBoost regressors with k-fold CV against baselines",
    [](CLI::App& app) {
      auto o = std::make_shared<TrainLayersOptions>();
      app.add_option("--db", o->dbs, "results store(s) with layer rows (repeatable)")->required();
      app.add_option("--device-spec", o->device_specs, "extra device spec JSON (repeatable)");
      app.add_option("--out", o->out, "model directory to write (manifest.json + XGBoost JSON)")->required();
      app.add_option("--folds", o->folds, "k of k-fold cross-validation, 0 = skip, else >= 2")
          ->capture_default_str();
      app.add_option("--methods", o->methods, "regressors compared: xgboost linear forest mlp")
          ->capture_default_str();
      app.add_option("--in-model-db", o->in_model_dbs,
                     "also train on the per-node times (node_times) of the ok model runs of this store; "
                     "repeatable, may equal a --db");
      app.add_option("--cv-holdout", o->cv.holdout,
                     "rows: k-fold over all samples | model-runs: group k-fold over the model runs of "
                     "--in-model-db, testing their in-model samples only")
          ->capture_default_str();
      app.add_flag("--in-model-eval-only", o->in_model_eval_only,
                   "with --cv-holdout model-runs: in-model samples are only test rows, never trained on "
                   "(the saved model is trained on the isolated rows only)");
      app.add_flag("--json", o->json, "print the report as JSON");
      add_model_options(app, o->cv.train, o->cv);
      return [o] {
        using clock = std::chrono::steady_clock;
        SCALEDL_CHECK(o->folds == 0 || o->folds >= 2, "--folds={} must be 0 (skip) or >= 2", o->folds);
        SCALEDL_CHECK(o->cv.holdout == "rows" || o->cv.holdout == "model-runs",
                      "--cv-holdout={} must be rows or model-runs", o->cv.holdout);
        SCALEDL_CHECK(o->cv.holdout == "rows" || !o->in_model_dbs.empty(),
                      "--cv-holdout={} needs --in-model-db (the model runs to hold out)", o->cv.holdout);
        SCALEDL_CHECK(!o->in_model_eval_only || o->cv.holdout == "model-runs",
                      "--in-model-eval-only needs --cv-holdout model-runs (got --cv-holdout={})",
                      o->cv.holdout);
        scaledl::StagingDir stage(o->out, scaledl::LayerPredictor::output_files(), "a layer-model directory");
        auto data = scaledl::load_training_data(o->dbs, o->device_specs);
        auto samples = scaledl::samples_from_measurements(data.rows, data.devices);
        SCALEDL_CHECK(!samples.empty(), "--db: the store(s) hold no ok layer rows to train on");
        const size_t isolated = samples.size();
        scaledl::InModelStats in_stats;
        std::vector<scaledl::InModelRun> runs;
        if (!o->in_model_dbs.empty()) {
          auto in = scaledl::load_in_model_samples(o->in_model_dbs, data.devices, &in_stats, &runs);
          SCALEDL_CHECK(!in.empty(), "--in-model-db={}: no ok model run has a usable node time",
                        fmt::join(o->in_model_dbs, ","));
          samples.insert(samples.end(), in.begin(), in.end());
        }
        o->cv.in_model_train = !o->in_model_eval_only;
        nlohmann::json report = {{"samples", samples.size()}, {"isolated_samples", isolated}};
        if (!o->in_model_dbs.empty()) report["in_model"] = in_stats.to_json();
        std::vector<scaledl::CvResult> cv;
        scaledl::RunSumCv run_sums;
        double cv_s = 0;
        if (o->folds >= 2) {
          auto t0 = clock::now();
          o->cv.folds = o->folds;
          o->cv.methods = o->methods;
          o->cv.seed = o->cv.train.seed + 1;
          cv = scaledl::cross_validate(samples, data.devices, o->cv);
          cv_s = std::chrono::duration<double>(clock::now() - t0).count();
          report["cv"] = scaledl::cv_to_json(cv);
          if (o->cv.holdout == "model-runs") {
            run_sums = scaledl::cross_validate_run_sums(samples, runs, data.devices, o->cv);
            report["run_sum_cv"] = run_sums.to_json();
          }
          report["cv_seconds"] = cv_s;
        }
        auto t0 = clock::now();
        if (o->in_model_eval_only) samples.resize(isolated);  // train on the isolated rows only
        auto p = scaledl::LayerPredictor::train_samples(samples, data.devices, o->cv.train);
        const double train_s = std::chrono::duration<double>(clock::now() - t0).count();
        p.save(stage.path());
        stage.commit();
        report["train_seconds"] = train_s;
        report["model"] = p.summary();
        report["out"] = o->out;
        if (o->json) {
          std::cout << report.dump(2) << "\n";
          return 0;
        }
        if (!o->in_model_dbs.empty())
          std::cout << fmt::format(
              "in-model samples: {} from {} ok runs ({} node times, {} missing/<=0 skipped, {} qk times "
              "holding "
              "the score kernels skipped)\n",
              in_stats.samples, in_stats.runs, in_stats.node_times, in_stats.skipped_missing,
              in_stats.skipped_fused_scores);
        if (!cv.empty())
          std::cout << fmt::format(
              "{}-fold cross-validation{} ({} samples, {:.1f} s):\n{}", o->folds,
              o->cv.holdout == "model-runs"
                  ? (o->in_model_eval_only ? " over model runs, in-model rows test only" : " over model runs")
                  : "",
              report["samples"].get<size_t>(), cv_s, scaledl::format_cv_table(cv));
        if (!run_sums.runs.empty())
          std::cout << fmt::format(
              "T_sum of the {} held-out runs (xgboost, all nodes): MRE {:.2f} % vs iter.median_ms, "
              "{:.2f} % vs the sum of their node times\n",
              run_sums.runs.size(), 100 * run_sums.mre_iter, 100 * run_sums.mre_node_sum);
        std::cout << fmt::format("trained {} models on {} samples in {:.2f} s -> {}\n",
                                 p.summary()["models"].size(), samples.size(), train_s, o->out);
        auto fb = p.summary()["roofline_fallback"];
        if (!fb.empty()) std::cout << "roofline fallback (no training rows): " << fb.dump() << "\n";
        return 0;
      };
    });

}  // namespace

namespace scaledl::cli {
/// Used by cmd_eval_layers.cpp so both commands share one option table.
void add_layer_model_options(CLI::App& app, scaledl::TrainOptions& t, scaledl::CvOptions& cv) {
  add_model_options(app, t, cv);
}
}  // namespace scaledl::cli
