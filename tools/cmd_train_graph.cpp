// scaledl train graph: fit the graph refinement Omega (ScaleDL eq. 3, 14) on the
// whole-model runs of a results store. Per run: rebuild the layer graph from
// the stored ModelSpec/TrainSettings, predict t_l with the layer models
// (LayerPredictor, "train layers"), compute T_comm (eq. 15), featurize, then
// train and save DIR/graph_model.safetensors + DIR/report.json.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/in_model_samples.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/predict/graph_cv.hpp"

namespace {

/// The files of an existing `train graph --out` directory: its report.json (an object with
/// "graphs" and "result", as written below) and the other files this command writes.
std::set<std::string> graph_dir_files(const std::string& dir) {
  const std::string report = dir + "/report.json";
  SCALEDL_CHECK(std::filesystem::is_regular_file(report), "it has no report.json");
  nlohmann::json r;
  try {
    r = scaledl::read_json_file(report);
  } catch (const scaledl::Error&) {
    scaledl::fail("its report.json is not readable JSON");
  }
  SCALEDL_CHECK(r.is_object() && r.contains("graphs") && r.contains("result"),
                "its report.json is not a graph-model report");
  return {"graph_model.safetensors", "report.json", "cv.json", "cv-nested.json"};
}

struct TrainGraphOptions {
  std::vector<std::string> dbs;           ///< result stores with model runs
  std::string layers;                     ///< LayerPredictor directory
  std::string out;                        ///< output directory
  std::string comm;                       ///< CommModel JSON or {"allreduce": [{bytes, devices, seconds}]}
  int threads = 1;                        ///< LibTorch intra-op threads (1 = bit-repeatable)
  int64_t folds = 0;                      ///< > 0: k-fold cross-validation over graphs before the final fit
  std::vector<std::string> cv_layer_dbs;  ///< also a CV with per-fold layer models (graph_cv.hpp)
  bool cv_layer_cross_fit = false;        ///< NestedGraphCvInput::cross_fit
  bool json = false;
  scaledl::GnnConfig cfg;
  scaledl::GnnTrainOptions train;
};

// Long (~140 lines) for a reason: it is the command's list of options, one
// add_option per flag with its help text and check; the work is in the library.
scaledl::cli::Registrar reg(
    {"train", "graph"}, "Train the graph refinement (TransformerConv or ANEE) on whole-model runs",
    [](CLI::App& app) {
      auto o = std::make_shared<TrainGraphOptions>();
      app.add_option("--db", o->dbs, "results store(s) with model runs (repeatable)")->required();
      app.add_option("--layers", o->layers, "layer-model directory written by `train layers`")->required();
      app.add_option("--out", o->out, "output directory (graph_model.safetensors, report.json)")->required();
      app.add_option("--encoder", o->cfg.encoder, "transformerconv | anee")->capture_default_str();
      app.add_option("--target", o->cfg.target, "alpha-beta (eq. 2) | direct (DNNPerf baseline)")
          ->capture_default_str();
      app.add_option("--readout", o->cfg.readout, "mean | sum pooling of node embeddings")
          ->capture_default_str();
      app.add_option("--hidden", o->cfg.hidden, "node embedding width, >= 1")->capture_default_str();
      app.add_option("--gnn-layers", o->cfg.layers, "TransformerConv layers / ANEE rounds, >= 1")
          ->capture_default_str();
      app.add_option("--heads", o->cfg.heads, "attention heads, >= 1")->capture_default_str();
      app.add_option("--epochs", o->train.epochs, "passes over the training graphs, >= 1")
          ->capture_default_str();
      app.add_option("--lr", o->train.lr, "Adam learning rate, > 0")->capture_default_str();
      app.add_option("--batch-size", o->train.batch_size, "graphs per step, >= 1")->capture_default_str();
      app.add_option("--val-fraction", o->train.val_fraction, "held-out share for early stopping, [0, 0.9]")
          ->capture_default_str();
      app.add_option("--patience", o->train.patience, "early-stopping patience, epochs >= 1")
          ->capture_default_str();
      app.add_option("--loss", o->train.loss, "mse-log | mre")->capture_default_str();
      app.add_option("--normalization", o->train.normalization, "minmax | standard")->capture_default_str();
      app.add_option("--seed", o->train.seed, "seed of weights, split and shuffling")->capture_default_str();
      app.add_option("--comm", o->comm,
                     "all-reduce calibration JSON: {bandwidth_Bps, gamma_s} or {allreduce: [{bytes, devices, "
                     "seconds}]}; needed when a run has num_devices > 1");
      app.add_option("--threads", o->threads, "LibTorch threads (1 = repeatable), >= 1")
          ->capture_default_str();
      app.add_option("--folds", o->folds,
                     "also estimate the error by k-fold cross-validation over graphs (>= 2; 0 = off); "
                     "writes DIR/cv.json")
          ->capture_default_str();
      app.add_option("--cv-layer-db", o->cv_layer_dbs,
                     "with --folds: also a CV whose layer models are retrained in each fold on this store's "
                     "layer rows plus the node times of the training fold's runs only (for --layers trained "
                     "with --in-model-db on these runs); writes DIR/cv-nested.json (repeatable)");
      app.add_flag(
          "--cv-layer-cross-fit", o->cv_layer_cross_fit,
          "with --cv-layer-db: the training graphs of each fold get layer times from models that did "
          "not see their own node times either (cross-fitting)");
      app.add_flag("--json", o->json, "print the report as JSON");
      return [o] {
        SCALEDL_CHECK(o->threads >= 1, "--threads={} must be >= 1", o->threads);
        o->cfg.validate("train graph");
        torch::set_num_threads(o->threads);
        scaledl::StagingDir stage(o->out, graph_dir_files, "a graph-model directory");
        const scaledl::LayerPredictor lp = scaledl::LayerPredictor::load(o->layers);
        scaledl::CommModel comm;
        if (!o->comm.empty()) comm = scaledl::load_comm_model(o->comm);

        std::vector<scaledl::GraphFeatures> graphs;
        for (const auto& db : o->dbs) {
          scaledl::Store store(db, /*read_only=*/true);
          std::map<std::string, scaledl::DeviceRecord> devices;
          for (const auto& d : store.devices()) devices[d.key()] = d;
          for (const auto& run : store.models())
            graphs.push_back(scaledl::run_graph_features({db, run}, lp, devices, comm));
        }
        SCALEDL_CHECK(!graphs.empty(), "--db: the store(s) hold no ok model runs to train on");
        SCALEDL_CHECK(o->folds == 0 || (o->folds >= 2 && static_cast<size_t>(o->folds) <= graphs.size()),
                      "--folds={} must be 0 or in [2, {}] (the number of model runs)", o->folds,
                      graphs.size());
        scaledl::GnnCvReport cv;
        if (o->folds > 0) cv = scaledl::cross_validate_graphs(graphs, o->cfg, o->train, o->folds);
        SCALEDL_CHECK(!o->cv_layer_cross_fit || !o->cv_layer_dbs.empty(),
                      "--cv-layer-cross-fit needs --cv-layer-db");
        SCALEDL_CHECK(o->cv_layer_dbs.empty() || o->folds > 0, "--cv-layer-db={} needs --folds K (>= 2)",
                      o->cv_layer_dbs.front());
        scaledl::GnnCvReport nested;
        if (!o->cv_layer_dbs.empty()) {
          auto data = scaledl::load_training_data(o->cv_layer_dbs);
          scaledl::NestedGraphCvInput in;
          in.samples = scaledl::samples_from_measurements(data.rows, data.devices);
          in.devices = data.devices;
          auto im = scaledl::load_in_model_samples(o->dbs, in.devices, nullptr, &in.runs);
          in.samples.insert(in.samples.end(), im.begin(), im.end());
          SCALEDL_CHECK(in.runs.size() == graphs.size(), "--cv-layer-db: {} model runs read, {} graphs built",
                        in.runs.size(), graphs.size());
          in.layer_options = lp.options();
          in.comm = comm;
          in.cross_fit = o->cv_layer_cross_fit;
          nested = scaledl::cross_validate_graphs_nested(in, o->cfg, o->train, o->folds);
        }

        scaledl::GnnTrainReport r;
        scaledl::GraphPredictor p = scaledl::GraphPredictor::train(graphs, o->cfg, o->train, &r);

        nlohmann::json opts = o->train.to_json();
        opts["threads"] = o->threads;
        nlohmann::json report = {{"graphs", graphs.size()},
                                 {"config", o->cfg.to_json()},
                                 {"train_options", opts},
                                 {"result", r.to_json()}};
        if (!o->comm.empty()) report["comm"] = comm.to_json();
        if (o->folds > 0) {
          report["cv"] = {
              {"folds", cv.folds}, {"mre_before", cv.mre_before}, {"mre", cv.mre}, {"fold_mre", cv.fold_mre}};
          scaledl::write_json_file(stage.path() + "/cv.json", cv.to_json());
        }
        if (!o->cv_layer_dbs.empty()) {
          report["cv_nested"] = {{"folds", nested.folds},
                                 {"mre_before", nested.mre_before},
                                 {"mre", nested.mre},
                                 {"fold_mre", nested.fold_mre},
                                 {"layer_dbs", o->cv_layer_dbs},
                                 {"cross_fit", o->cv_layer_cross_fit}};
          scaledl::write_json_file(stage.path() + "/cv-nested.json", nested.to_json());
        }
        const std::string model_path = o->out + "/graph_model.safetensors";
        p.save(stage.path() + "/graph_model.safetensors", {{"train_report", report}});
        scaledl::write_json_file(stage.path() + "/report.json", report);
        stage.commit();
        if (o->json) {
          std::cout << report.dump(2) << "\n";
        } else {
          std::cout << fmt::format("graphs            {} (train {}, validation {})\n", graphs.size(),
                                   r.train_graphs, r.val_graphs)
                    << fmt::format("encoder / target  {} / {}, loss {}\n", o->cfg.encoder, o->cfg.target,
                                   o->train.loss)
                    << fmt::format("epochs            {} run, best {}, {:.1f} s\n", r.epochs_run,
                                   r.best_epoch, r.seconds)
                    << fmt::format("MRE_before_%      train {:.2f}  val {:.2f}   (T_sum + T_comm)\n",
                                   100 * r.train_mre_before, 100 * r.val_mre_before)
                    << fmt::format("MRE_after_%       train {:.2f}  val {:.2f}\n", 100 * r.train_mre,
                                   100 * r.val_mre)
                    << fmt::format("mean alpha, beta  {:.4f}, {:.4f}\n", r.mean_alpha, r.mean_beta);
          if (o->folds > 0)
            std::cout << fmt::format(
                "CV_MRE_%          before {:.2f}  after {:.2f}   ({}-fold over graphs, {:.1f} s)\n",
                100 * cv.mre_before, 100 * cv.mre, cv.folds, cv.seconds);
          if (!o->cv_layer_dbs.empty())
            std::cout << fmt::format(
                "NESTED_CV_MRE_%   before {:.2f}  after {:.2f}   (layer models retrained per fold "
                "without the test runs' node times{}, {:.1f} s)\n",
                100 * nested.mre_before, 100 * nested.mre, o->cv_layer_cross_fit ? ", cross-fitted" : "",
                nested.seconds);
          std::cout << "wrote " << model_path << "\n";
        }
        return 0;
      };
    });

}  // namespace
