// scaledl predict MODEL.json: per-iteration and per-epoch training time of a
// model config on a device (ScaleDL Algorithm 1; see predict.hpp).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "command.hpp"
#include "model_args.hpp"
#include "scaledl/bundle.hpp"
#include "scaledl/error.hpp"
#include "scaledl/gnn.hpp"
#include "scaledl/layer_graph.hpp"
#include "scaledl/layer_predictor.hpp"
#include "scaledl/predict.hpp"
#include "scaledl/store.hpp"

namespace {

struct PredictOptions {
  scaledl::cli::ModelArgs args;  ///< model config and training settings
  std::string bundle;            ///< bundle directory (`scaledl train --out`)
  std::string layers;            ///< LayerPredictor directory (`train layers --out`)
  std::string graph;             ///< graph model file or directory (`train graph --out`); "" = no refinement
  std::string device_spec;       ///< device spec JSON (NeuSight device_configs or ScaleDL format)
  std::string db;                ///< store holding probed device records
  std::string device;            ///< device key in --db (e.g. "cpu:..."); "" = its only device
  int64_t devices = 1;           ///< data-parallel devices N, >= 1
  std::string comm;              ///< all-reduce calibration JSON (needed when N > 1)
  int64_t samples = 0;           ///< training samples per epoch (0 = use --iterations)
  int64_t iterations = 0;        ///< iterations per epoch I (0 = from --samples)
  bool json = false;
};

scaledl::DeviceRecord resolve_device(const PredictOptions& o) {
  using scaledl::fail;
  if (!o.device_spec.empty()) {
    SCALEDL_CHECK(o.db.empty(), "--device-spec and --db both name a device: give one");
    return scaledl::load_device_spec(o.device_spec);
  }
  SCALEDL_CHECK(!o.db.empty(), "no device: give --device-spec FILE or --db STORE [--device KEY]");
  scaledl::Store store(o.db, /*read_only=*/true);
  if (!o.device.empty()) {
    auto d = store.device(o.device);
    SCALEDL_CHECK(d.has_value(), "--device={} is not in {} (see `scaledl db info --db {}`)", o.device, o.db, o.db);
    return *d;
  }
  auto all = store.devices();
  SCALEDL_CHECK(all.size() == 1, "--db={} holds {} devices: choose one with --device KEY", o.db, all.size());
  return all[0];
}

int run(const PredictOptions& o) {
  using namespace scaledl;
  auto [m, s] = o.args.load();
  SCALEDL_CHECK(o.devices >= 1 && o.devices <= (1 << 20), "--devices={} must be in [1, 2^20]", o.devices);
  s.num_devices = o.devices;
  SCALEDL_CHECK(o.devices == 1 || !o.comm.empty(),
                "--devices={} needs an all-reduce calibration (--comm FILE, see docs/predict.md)", o.devices);
  SCALEDL_CHECK(o.samples == 0 || o.iterations == 0, "give --samples or --iterations, not both");
  SCALEDL_CHECK(o.samples >= 0 && o.iterations >= 0, "--samples and --iterations must be >= 0");
  const DeviceRecord dev = resolve_device(o);
  SCALEDL_CHECK(!o.bundle.empty() || !o.layers.empty(), "no models: give --bundle DIR (or --layers DIR [--graph ...])");
  SCALEDL_CHECK(o.bundle.empty() || (o.layers.empty() && o.graph.empty() && o.comm.empty()),
                "--bundle={} already holds the layer, graph and comm models: drop --layers/--graph/--comm", o.bundle);
  Bundle b;
  if (!o.bundle.empty()) {
    b = load_bundle(o.bundle);
  } else {
    b.layers = LayerPredictor::load(o.layers);
    if (!o.graph.empty()) {
      std::string path = o.graph;
      if (std::filesystem::is_directory(path)) path += "/graph_model.safetensors";
      b.graph = GraphPredictor::load(path);
    }
    if (!o.comm.empty()) b.comm = load_comm_model(o.comm);
  }
  const LayerGraph g = build_layer_graph(m, s);
  const IterationPrediction p = b.predict(g, dev);
  const std::vector<std::string> outside = b.out_of_range(p);
  const int64_t iters = o.iterations ? o.iterations : (o.samples ? iterations_per_epoch(o.samples, s) : 0);
  const double epoch_s = iters * p.t_iter_ms / 1000.0;

  if (o.json) {
    nlohmann::json j = p.to_json();
    j["model"] = m.name;
    j["settings"] = s.to_json();
    j["device"] = dev.key();
    j["iterations_per_epoch"] = iters;
    j["t_epoch_s"] = iters ? nlohmann::json(epoch_s) : nlohmann::json();
    j["outside_training_range"] = outside;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("model        {} ({}), batch {} x {} device(s), {}, optimizer {}\n", m.name,
                           to_string(m.family), s.batch, s.num_devices, to_string(s.dtype),
                           s.optimizer_step ? to_string(s.optimizer) : "none")
            << fmt::format("device       {}\n", dev.key())
            << fmt::format("T_sum        {:10.3f} ms   sum of {} layer predictions{}\n", p.t_sum_ms, g.nodes.size(),
                           p.fallback_nodes ? fmt::format(" ({} by roofline fallback)", p.fallback_nodes) : "")
            << fmt::format("T_comm       {:10.3f} ms   all-reduce, eq. 15\n", p.t_comm_ms)
            << fmt::format("alpha, beta  {:.4f}, {:.4f}{}\n", p.alpha, p.beta,
                           p.refined ? "   graph refinement" : "   (no --graph: additive baseline)")
            << fmt::format("T_iter       {:10.3f} ms\n", p.t_iter_ms);
  if (iters)
    std::cout << fmt::format("T_epoch      {:10.3f} s    {} iterations\n", epoch_s, iters);
  for (const auto& w : outside)
    std::cout << fmt::format("warning      outside the bundle's training data: {} (extrapolation)\n", w);
  return 0;
}

scaledl::cli::Registrar reg({"predict"}, "Predict per-iteration and per-epoch training time of a model config",
                            [](CLI::App& app) {
                              auto o = std::make_shared<PredictOptions>();
                              o->args.add_to(app);
                              app.add_option("--bundle", o->bundle, "bundle directory (`scaledl train --out`)");
                              app.add_option("--layers", o->layers,
                                             "layer models (`scaledl train layers --out`), instead of --bundle");
                              app.add_option("--graph", o->graph,
                                             "graph model (`scaledl train graph --out` dir or .safetensors)");
                              app.add_option("--device-spec", o->device_spec,
                                             "device spec JSON (NeuSight device_configs or `scaledl probe --json`)");
                              app.add_option("--db", o->db, "store with probed device records");
                              app.add_option("--device", o->device, "device key in --db");
                              app.add_option("--devices", o->devices, "data-parallel devices N (default 1)");
                              app.add_option("--comm", o->comm, "all-reduce calibration JSON (for N > 1)");
                              app.add_option("--samples", o->samples, "training samples per epoch");
                              app.add_option("--iterations", o->iterations, "iterations per epoch");
                              app.add_flag("--json", o->json, "print the prediction as JSON");
                              return [o] { return run(*o); };
                            });

}  // namespace
