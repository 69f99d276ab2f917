// scaledl predict MODEL.json: per-iteration and per-epoch training time of a
// model config on a device (ScaleDL Algorithm 1; see predict.hpp). The options
// fill a PredictRequest; what they do is the library's (predict_api.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "command.hpp"
#include "model_args.hpp"
#include "pipeline_args.hpp"
#include "predict_args.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/predict_api.hpp"
#include "sibling.hpp"

namespace {

/// A file under the system's temporary folder holding `text`, removed when this goes.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text)
      : path((std::filesystem::temp_directory_path() / fmt::format("scaledl-cpu-probe-{}.json", ::getpid()))
                 .string()) {
    scaledl::write_text_file_atomic(path, text);
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

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
  // `--device cpu` without a store: this CPU, probed now by scaledl-full (LibTorch's matmul and
  // copy, a few seconds), its record in a temporary file removed on return.
  std::unique_ptr<TempFile> probed;
  if (o.req.device == "cpu" && o.req.db.empty() && o.req.device_spec.empty()) {
    std::cerr
        << "device       this CPU, probed now (`scaledl probe --device cpu --json > cpu.json` once, then "
           "--device-spec cpu.json, skips it)\n";
    probed = std::make_unique<TempFile>(
        cli::run_sibling("scaledl-full", {"scaledl", "probe", "--device", "cpu", "--json"}));
    o.req.device_spec = probed->path;
    o.req.device.clear();
  }
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

scaledl::cli::Registrar reg({"predict"},
                            "Predict per-iteration and per-epoch training time of a model config",
                            [](CLI::App& app) {
                              auto o = std::make_shared<PredictOptions>();
                              o->args.add_to(app, /*model_required=*/false);
                              o->input.add_to(app);
                              scaledl::cli::add_request_options(app, o->req);
                              app.add_flag("--timing", o->timing,
                                           "print load and prediction times to stderr");
                              app.add_flag("--json", o->json, "print the prediction as JSON");
                              return [o] { return run(*o); };
                            });

}  // namespace
