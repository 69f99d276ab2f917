// scaledl eval layers: held-out evaluation of the per-layer regressors.
// --leave-one-out device (PreNeT §5.2): train on all GPUs but one, predict the
// held-out GPU from its spec sheet alone; with --ablation, also without the
// CT/CM roofline columns and with the plain log target. --min-ms leaves out the
// rows faster than a threshold, in training and test: the timing floor of the
// measuring host, which no spec sheet predicts (docs/unseen-gpu.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl::cli {
void add_layer_model_options(CLI::App& app, scaledl::TrainOptions& t, scaledl::CvOptions& cv);
}

namespace {

struct EvalLayersOptions {
  std::vector<std::string> dbs;
  std::vector<std::string> device_specs;
  std::string leave_one_out = "device";
  std::vector<std::string> methods = {"xgboost"};
  bool ablation = false;
  bool json = false;
  double min_ms = 0;
  std::vector<std::string> types, dtypes;
  std::string predictions;
  scaledl::CvOptions cv;
};

scaledl::cli::Registrar reg(
    {"eval", "layers"}, "Leave-one-device-out evaluation of the per-layer regressors (PreNeT §5.2)",
    [](CLI::App& app) {
      auto o = std::make_shared<EvalLayersOptions>();
      app.add_option("--db", o->dbs, "results store(s) with layer rows (repeatable)")->required();
      app.add_option("--device-spec", o->device_specs, "extra device spec JSON (repeatable)");
      app.add_option("--leave-one-out", o->leave_one_out, "what is held out: device")->capture_default_str();
      app.add_option("--methods", o->methods, "regressors: xgboost linear forest mlp")->capture_default_str();
      app.add_flag("--ablation", o->ablation,
                   "also run xgboost without CT/CM features (target log) and with target log");
      app.add_flag("--json", o->json, "print the results as JSON");
      app.add_option("--types", o->types, "evaluate only these layer types (e.g. linear bmm); default all");
      app.add_option("--dtypes", o->dtypes,
                     "evaluate only these dtypes (fp32 tf32 bf16 fp16 fp8); default all");
      app.add_option(
             "--min-ms", o->min_ms,
             "leave out rows whose time is below this (ms), in training and test: the host's timing floor")
          ->capture_default_str();
      app.add_flag(
          "--probe-bandwidth", o->cv.probe_bandwidth,
          "the held-out GPU as if probed: its sustained bandwidth from its own largest elementwise rows "
          "(with --sustained-bw; docs/unseen-gpu.md)");
      app.add_option("--predictions", o->predictions,
                     "write every held-out row's measured and predicted time (first variant) to this CSV");
      scaledl::cli::add_layer_model_options(app, o->cv.train, o->cv);
      return [o] {
        SCALEDL_CHECK(o->leave_one_out == "device", "--leave-one-out=\"{}\" is not supported (device)",
                      o->leave_one_out);
        SCALEDL_CHECK(std::isfinite(o->min_ms) && o->min_ms >= 0, "--min-ms={} must be a finite number >= 0",
                      o->min_ms);
        SCALEDL_CHECK(
            !o->cv.probe_bandwidth || o->cv.train.sustained_bw,
            "--probe-bandwidth needs --sustained-bw (the layer models' rooflines at sustained bandwidths)");
        auto data = scaledl::load_training_data(o->dbs, o->device_specs);
        auto samples = scaledl::samples_from_measurements(data.rows, data.devices);
        // --types / --dtypes: the rows trained on and scored, as a study of one kind needs.
        std::set<scaledl::LayerType> types;
        std::set<scaledl::DType> dtypes;
        for (const auto& t : o->types) types.insert(scaledl::parse_layer_type(t, "--types"));
        for (const auto& d : o->dtypes) dtypes.insert(scaledl::parse_dtype(d, "--dtypes"));
        samples.erase(std::remove_if(samples.begin(), samples.end(),
                                     [&](const scaledl::LayerSample& s) {
                                       return (!types.empty() && !types.count(s.type)) ||
                                              (!dtypes.empty() && !dtypes.count(s.dtype));
                                     }),
                      samples.end());
        SCALEDL_CHECK(!samples.empty(), "--types/--dtypes: no layer row of the store(s) is of them");
        const size_t all_rows = samples.size();
        samples.erase(std::remove_if(samples.begin(), samples.end(),
                                     [&](const scaledl::LayerSample& s) { return s.ms < o->min_ms; }),
                      samples.end());
        SCALEDL_CHECK(!samples.empty(), "--min-ms={}: all {} layer rows are faster, none is left", o->min_ms,
                      all_rows);
        if (!o->json && o->min_ms > 0)
          std::cout << fmt::format("--min-ms {}: {} of {} layer rows kept\n", o->min_ms, samples.size(),
                                   all_rows);
        struct Variant {
          std::string name;
          scaledl::CvOptions cv;
        };
        std::vector<Variant> variants;
        scaledl::CvOptions base = o->cv;
        base.leave_one_device = true;
        base.methods = o->methods;
        variants.push_back({"default", base});
        if (o->ablation) {
          scaledl::CvOptions a = base;
          a.methods = {"xgboost"};
          a.train.target = "log";
          variants.push_back({"target_log", a});
          a.train.roofline_features = false;
          variants.push_back({"no_ct_cm_log", a});
        }
        nlohmann::json out = nlohmann::json::object();
        if (!o->predictions.empty()) {  // before the folds run, not after
          std::vector<std::pair<std::string, std::string>> inputs;
          for (const auto& db : o->dbs) inputs.emplace_back("--db", db);
          for (const auto& d : o->device_specs) inputs.emplace_back("--device-spec", d);
          scaledl::check_output_is_not_input(o->predictions, "--predictions", inputs);
          const auto parent = std::filesystem::path(o->predictions).parent_path();
          SCALEDL_CHECK(parent.empty() || std::filesystem::is_directory(parent),
                        "--predictions={}: the folder {} does not exist", o->predictions, parent.string());
        }
        std::vector<scaledl::CvRowPrediction> rows;
        for (auto& v : variants) {
          auto r =
              scaledl::cross_validate(samples, data.devices, v.cv, &v == &variants.front() ? &rows : nullptr);
          out[v.name] = {{"options", v.cv.train.to_json()},
                         {"results", scaledl::cv_to_json(r)},
                         {"min_ms", o->min_ms},
                         {"rows", samples.size()},
                         {"rows_below_min_ms", all_rows - samples.size()}};
          if (!o->json)
            std::cout << fmt::format("== {} (target {}, CT/CM features {}) ==\n{}", v.name, v.cv.train.target,
                                     v.cv.train.roofline_features ? "on" : "off",
                                     scaledl::format_cv_table(r));
        }
        if (!o->predictions.empty())
          scaledl::write_text_file_atomic(o->predictions, scaledl::cv_rows_csv(rows));
        if (o->json) std::cout << out.dump(2) << "\n";
        return 0;
      };
    });

}  // namespace
