// scaledl predict MODEL.json: per-iteration and per-epoch training time of a
// model config on a device (ScaleDL Algorithm 1; see predict.hpp). The options
// fill a PredictRequest; what they do is the library's (predict_api.hpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "model_args.hpp"
#include "pipeline_args.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/predict_api.hpp"

namespace {

struct PredictOptions {
  scaledl::cli::ModelArgs args;  ///< model config and training settings (into req.args)
  scaledl::PredictRequest req;   ///< everything else of the request
  scaledl::cli::PipelineArgs
      input;            ///< --pipeline, --workers, --vcpus, --input (issue #15, docs/pipeline.md)
  bool timing = false;  ///< print load and prediction times to stderr
  bool json = false;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// --sweep/--csv: every configuration as a CSV row (or a JSON array), written a chunk at a time.
int run_many(const PredictOptions& o, const scaledl::Bundle& b,
             const std::optional<scaledl::DeviceRecord>& dflt, double load_s) {
  scaledl::RowWriter out(std::cout, o.json);
  const scaledl::SweepStats st = scaledl::predict_sweep(
      o.req, b, dflt, [&](const std::vector<scaledl::PredictRow>& rows) { out.write(rows); },
      [](size_t total) {
        if (total > scaledl::kSweepChunk)
          std::fprintf(stderr, "scaledl: %zu configurations, predicted and written %zu at a time\n", total,
                       scaledl::kSweepChunk);
      });
  out.finish();
  if (o.timing)
    std::cerr << fmt::format(
        "timing: load {:.3f} s; {} configurations: parse + layer graphs {:.3f} s, prediction "
        "{:.3f} s ({:.0f} configurations per second end to end)\n",
        load_s, st.total, st.build_s, st.pred_s, st.total / std::max(1e-9, st.build_s + st.pred_s));
  return 0;
}

/// --gpus/--tp/--pp...: the parallel composition of parallel.hpp.
int run_parallel(const PredictOptions& o, const scaledl::Bundle& b, const scaledl::DeviceRecord& dev) {
  scaledl::ParallelSingle r = scaledl::predict_parallel_single(o.req, b, dev);
  // Issue #15 (ORION): T_iter = max(T_compute, T_input); a host prepares batch x its dp/nodes replicas.
  const auto input = o.input.apply(r.r.t_iter_ms, r.model, r.settings,
                                   static_cast<double>(r.settings.batch) * r.r.plan.dp / r.par.nodes);
  if (input) {
    input->add_to(r.input);
    r.input_text = input->text();
  }
  if (o.json)
    std::cout << r.to_json().dump(2) << "\n";
  else
    r.write_report(std::cout);
  return 0;
}

/// One configuration on one device.
int run_single(const PredictOptions& o, const scaledl::Bundle& b, const scaledl::DeviceRecord& dev,
               double load_s) {
  const auto t_pred = std::chrono::steady_clock::now();
  scaledl::SinglePrediction r = scaledl::predict_single(o.req, b, dev);
  // Issue #15 (ORION): T_iter = max(T_compute, T_input); all devices on one host.
  const auto input =
      o.input.apply(r.p, r.model, r.settings, static_cast<double>(r.settings.batch * r.settings.num_devices));
  if (input) {
    input->add_to(r.input);
    r.input_text = input->text();
  }
  if (o.timing)
    std::cerr << fmt::format(
        "timing: load {:.3f} s; 1 configuration: parse + layer graph + prediction {:.3f} s\n", load_s,
        seconds_since(t_pred));
  if (o.json)
    std::cout << r.to_json(b).dump(2) << "\n";
  else
    r.write_report(std::cout, b);
  return 0;
}

int run(PredictOptions& o) {
  using namespace scaledl;
  const auto t_start = std::chrono::steady_clock::now();
  o.req.args = o.args;
  o.req.device_spec = find_device_spec(o.req.device_spec);  // a shipped sheet's name, or a file
  const PredictRequest& req = o.req;
  req.check_inputs();
  SCALEDL_CHECK(!req.many() || !o.input.given(),
                "--pipeline/--workers/--vcpus/--input: one configuration at a time");
  o.input.check();  // issue #15: a bad input-pipeline flag is named before the bundle loads
  req.check_ranges();
  const std::optional<DeviceRecord> dflt = default_device(req);
  const Bundle b = load_predict_bundle(req, dflt);
  const double load_s = seconds_since(t_start);
  if (const std::string w = stale_rates_warning(b, dflt); !w.empty())
    std::fprintf(stderr, "scaledl: warning: %s\n", w.c_str());
  if (req.par_given) {
    req.check_parallel();
    return run_parallel(o, b, *dflt);
  }
  if (req.many()) return run_many(o, b, dflt, load_s);
  return run_single(o, b, *dflt, load_s);
}

scaledl::cli::Registrar reg(
    {"predict"}, "Predict per-iteration and per-epoch training time of a model config", [](CLI::App& app) {
      auto o = std::make_shared<PredictOptions>();
      o->args.add_to(app, /*model_required=*/false);
      o->input.add_to(app);
      app.add_option("--bundle", o->req.bundle, "bundle directory (`scaledl train --out`)");
      app.add_option("--layers", o->req.layers,
                     "layer models (`scaledl train layers --out`), instead of --bundle");
      app.add_option("--graph", o->req.graph,
                     "graph model (`scaledl train graph --out` dir or .safetensors)");
      app.add_option("--device-spec", o->req.device_spec,
                     "device spec JSON (NeuSight device_configs or `scaledl probe --json`)");
      app.add_option("--db", o->req.db, "store with probed device records");
      app.add_option("--device", o->req.device, "device key in --db");
      app.add_option("--devices", o->req.devices, "data-parallel devices N (default 1)");
      auto par = [o](CLI::Option* opt) {
        opt->each([o](const std::string&) { o->req.par_given = true; });
        return opt;
      };
      par(app.add_option("--gpus", o->req.par.gpus, "GPUs N = tp x pp x dp (parallel prediction)"));
      par(app.add_option("--nodes", o->req.par.nodes, "nodes the GPUs are spread over (default 1)"));
      par(app.add_option("--tp", o->req.par.tp, "tensor-parallel ways (Megatron)"));
      par(app.add_option("--pp", o->req.par.pp, "pipeline stages (1F1B)"));
      par(app.add_option("--ep", o->req.par.ep,
                         "expert-parallel ways: the experts spread over this many of the "
                         "data-parallel GPUs (mixtures of experts)"));
      par(app.add_option("--microbatches", o->req.par.microbatches,
                         "micro-batches per iteration of one replica (--batch is split)"));
      par(app.add_option("--zero", o->req.par.zero, "ZeRO stage 0, 1, 2 or 3"));
      par(app.add_option("--cp", o->req.par.cp,
                         "context-parallel ways: each sequence split over cp GPUs, ring attention "
                         "(Megatron; gpus = tp x cp x pp x dp)"));
      par(app.add_option("--vp", o->req.par.vp,
                         "virtual pipeline stages per GPU (interleaved 1F1B: bubble (pp-1)/vp slots)"));
      par(app.add_flag("--overlap-grad-reduce", o->req.par.overlap_grad_reduce,
                       "the data-parallel gradient reduction overlaps the backward (Megatron "
                       "--overlap-grad-reduce)"));
      par(app.add_flag("--sp", o->req.par.sequence_parallel,
                       "sequence parallelism with --tp (Megatron --sequence-parallel): the TP all-reduces "
                       "become reduce-scatters + all-gathers and the norms, residual adds and dropouts run "
                       "on seq / tp tokens per GPU"));
      par(app.add_flag("--recompute", o->req.par.recompute,
                       "activation recomputation (Megatron checkpointing)"));
      app.add_option("--comm", o->req.comm, "all-reduce calibration JSON (for N > 1)");
      app.add_option("--fabric", o->req.fabric,
                     "the cluster's interconnect for --gpus: a preset name (`scaledl comm presets`, "
                     "models/fabrics) or file (default: the one the device spec names)");
      app.add_option("--samples", o->req.samples, "training samples per epoch");
      app.add_option("--iterations", o->req.iterations, "iterations per epoch");
      app.add_option("--sweep", o->req.sweeps,
                     "KEY=V1,V2,...: predict every combination (keys batch, seq, image, "
                     "dtype, optimizer, mode, devices, device_spec (a spec JSON or sheet name per "
                     "value: GPUs compared in one table), framework (kernel recipes compared), "
                     "config.<key>; repeatable); CSV output");
      app.add_option("--csv", o->req.csv,
                     "CSV of configurations (header: model and/or the --sweep keys, samples); "
                     "CSV output");
      app.add_option("--prices", o->req.prices,
                     "price table JSON for the cost of an epoch of each sweep or CSV row (schema of "
                     "models/prices.json; default: the shipped one)");
      app.add_option("--anchor", o->req.anchor,
                     "CSV of configurations measured on this device (columns as --csv plus "
                     "measured_ms): predictions are scaled by the device's bias they show "
                     "(docs/predict.md, \"Anchoring\")");
      app.add_option("--calibrate", o->req.calibrate,
                     "store with a few layer timings of this device (`bench layers` on it): "
                     "each layer kind's time is scaled by the median ratio of its timings "
                     "to the layer models' (GEMMs with dims multiples of 8, rows of 50 us "
                     "or more; docs/unseen-gpu.md, \"A short calibration benchmark\")");
      app.add_option("--host-node-us", o->req.host_node_us,
                     "the host's cost per graph node of your framework, microseconds: "
                     "each iteration (each pipeline slot with --gpus) takes at least nodes "
                     "x this (0 = none; default: the bundle's fit for a probed device, else "
                     "Megatron-LM's 70 us with --framework megatron, else none; docs/parallel.md)");
      app.add_flag("--cuda-graphs", o->req.cuda_graphs,
                   "the framework launches each iteration as CUDA graphs (NeMo, Megatron-Core with "
                   "--enable-cuda-graph): no host cost per node");
      app.add_flag("--timing", o->timing, "print load and prediction times to stderr");
      app.add_flag("--raw", o->req.raw,
                   "the models' own T_iter, without the physical bounds (roofline, "
                   "monotone in batch and seq; docs/predict.md)");
      app.add_flag("--json", o->json, "print the prediction as JSON");
      app.add_option("--headroom", o->req.headroom,
                     "fraction of device memory kept free when saying whether it fits "
                     "(default 0.10)");
      return [o] { return run(*o); };
    });

}  // namespace
