#pragma once
// The flags of `scaledl predict` that bind the library's PredictRequest (scaledl/predict/
// predict_api.hpp): models, device, cluster, epoch, sweeps, calibration and bounds. The model's
// flags are ModelArgs (model_args.hpp), the input pipeline's PipelineArgs (pipeline_args.hpp).
// One list for tools/cmd_predict.cpp and the Python module (python/src/module.cpp), so that
// both read the same flags with the same checks.
#include <string>

#include <CLI/CLI.hpp>

#include "scaledl/predict/predict_api.hpp"

namespace scaledl::cli {

/// Adds the request's flags to `app`; `req` must outlive the parse (the --gpus family sets
/// req.par_given when given).
inline void add_request_options(CLI::App& app, PredictRequest& req) {
  app.add_option("--bundle", req.bundle,
                 "bundle directory (`scaledl train --out`; default: the shipped one of the device's kind, "
                 "models/bundles/default or, for a CPU, models/bundles/cpu)");
  app.add_option("--layers", req.layers, "layer models (`scaledl train layers --out`), instead of --bundle");
  app.add_option("--graph", req.graph, "graph model (`scaledl train graph --out` dir or .safetensors)");
  app.add_option("--device-spec", req.device_spec,
                 "device spec JSON (NeuSight device_configs or `scaledl probe --json`)");
  app.add_option("--db", req.db, "store with probed device records");
  app.add_option("--device", req.device, "device key in --db");
  app.add_option("--devices", req.devices, "data-parallel devices N (default 1)");
  auto par = [&req](CLI::Option* opt) {
    opt->each([&req](const std::string&) { req.par_given = true; });
    return opt;
  };
  par(app.add_option("--gpus", req.par.gpus, "GPUs N = tp x pp x dp (parallel prediction)"));
  par(app.add_option("--nodes", req.par.nodes, "nodes the GPUs are spread over (default 1)"));
  par(app.add_option("--tp", req.par.tp, "tensor-parallel ways (Megatron)"));
  par(app.add_option("--pp", req.par.pp, "pipeline stages (1F1B)"));
  par(app.add_option("--ep", req.par.ep,
                     "expert-parallel ways: the experts spread over this many of the "
                     "data-parallel GPUs (mixtures of experts)"));
  par(app.add_option("--microbatches", req.par.microbatches,
                     "micro-batches per iteration of one replica (--batch is split)"));
  par(app.add_option("--zero", req.par.zero, "ZeRO stage 0, 1, 2 or 3"));
  par(app.add_option("--cp", req.par.cp,
                     "context-parallel ways: each sequence split over cp GPUs, ring attention "
                     "(Megatron; gpus = tp x cp x pp x dp)"));
  par(app.add_option("--vp", req.par.vp,
                     "virtual pipeline stages per GPU (interleaved 1F1B: bubble (pp-1)/vp slots)"));
  par(app.add_flag("--overlap-grad-reduce", req.par.overlap_grad_reduce,
                   "the data-parallel gradient reduction overlaps the backward (Megatron "
                   "--overlap-grad-reduce)"));
  par(app.add_flag("--sp", req.par.sequence_parallel,
                   "sequence parallelism with --tp (Megatron --sequence-parallel): the TP all-reduces "
                   "become reduce-scatters + all-gathers and the norms, residual adds and dropouts run "
                   "on seq / tp tokens per GPU"));
  par(app.add_flag("--overlap-tp-comm", req.par.overlap_tp_comm,
                   "with --sp: the TP all-gathers and reduce-scatters run under their GEMMs (Megatron-Core "
                   "--tp-comm-overlap, Transformer Engine's userbuffers)"));
  par(app.add_flag("--recompute", req.par.recompute,
                   "activation recomputation of every block (Megatron checkpointing, full granularity)"));
  par(app.add_flag("--recompute-selective", req.par.selective_recompute,
                   "recompute the attention core alone (Megatron --recompute-granularity selective): its "
                   "forward runs again, its scores are not kept; not with --recompute"));
  app.add_option("--comm", req.comm, "all-reduce calibration JSON (for N > 1)");
  app.add_option("--fabric", req.fabric,
                 "the cluster's interconnect for --gpus: a preset name (`scaledl comm presets`, "
                 "models/fabrics) or file (default: the one the device spec names)");
  app.add_option("--samples", req.samples, "training samples per epoch");
  app.add_option("--iterations", req.iterations, "iterations per epoch");
  app.add_option("--sweep", req.sweeps,
                 "KEY=V1,V2,...: predict every combination (keys batch, seq, image, "
                 "dtype, optimizer, mode, devices, device_spec (a spec JSON or sheet name per "
                 "value: GPUs compared in one table), framework (kernel recipes compared), "
                 "config.<key>; repeatable); CSV output");
  app.add_option("--csv", req.csv,
                 "CSV of configurations (header: model and/or the --sweep keys, samples); "
                 "CSV output");
  app.add_option("--prices", req.prices,
                 "price table JSON for the cost of an epoch of each sweep or CSV row (schema of "
                 "models/prices.json; default: the shipped one)");
  app.add_option("--anchor", req.anchor,
                 "CSV of configurations measured on this device (columns as --csv plus "
                 "measured_ms): predictions are scaled by the device's bias they show "
                 "(docs/predict.md, \"Anchoring\")");
  app.add_option("--calibrate", req.calibrate,
                 "store with a few layer timings of this device (`bench layers` on it): "
                 "each layer kind's time is scaled by the median ratio of its timings "
                 "to the layer models' (GEMMs with dims multiples of 8, rows of 50 us "
                 "or more; docs/unseen-gpu.md, \"A short calibration benchmark\")");
  app.add_option("--host-node-us", req.host_node_us,
                 "the host's cost per graph node of your framework, microseconds: "
                 "each iteration (each pipeline slot with --gpus) takes at least nodes "
                 "x this (0 = none; default: the bundle's fit for a probed device, else "
                 "Megatron-LM's 73 us with --framework megatron, else none; docs/parallel.md)");
  app.add_flag("--cuda-graphs", req.cuda_graphs,
               "the framework launches each iteration as CUDA graphs (NeMo, Megatron-Core with "
               "--enable-cuda-graph): no host cost per node");
  app.add_flag("--raw", req.raw,
               "the models' own T_iter, without the physical bounds (roofline, "
               "monotone in batch and seq; docs/predict.md)");
  app.add_option("--headroom", req.headroom,
                 "fraction of device memory kept free when saying whether it fits "
                 "(default 0.10)");
  app.add_flag("--keep-outputs", req.keep_outputs,
               "the training loop holds the model's outputs (its logits) until the backward ends, as "
               "`out = model(**batch); out.loss.backward()` does; Hugging Face's Trainer frees them "
               "first (memory only; docs/memory.md)");
}

}  // namespace scaledl::cli
