// scaledl eval parallel: the data / tensor / pipeline parallel composition
// (predict --gpus) against measured multi-GPU iterations (docs/parallel.md).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/eval/parallel_eval.hpp"
#include "scaledl/predict/parallel.hpp"

namespace {

struct EvalParallelOptions {
  std::string runs;
  std::string test_runs;
  bool json = false;
  std::optional<double> host_us;  ///< --shipped-host-node-us
  scaledl::ParallelEvalOptions e;
};

int run(const EvalParallelOptions& o) {
  using namespace scaledl;
  const auto runs = load_parallel_runs(o.runs);
  if (!o.e.out.empty()) std::filesystem::create_directories(o.e.out);
  ParallelEvalOptions e = o.e;
  if (!o.test_runs.empty()) e.test_runs = load_parallel_runs(o.test_runs);
  if (o.host_us) e.shipped_host_node_ms = host_node_ms_of_us(*o.host_us);
  const nlohmann::json rep = eval_parallel(runs, e);
  if (o.json) {
    std::printf("%s\n", rep.dump(1).c_str());
    return 0;
  }
  std::printf("%zu runs from %s on %s\n", runs.size(), o.runs.c_str(),
              rep["device"].get<std::string>().c_str());
  std::printf("%-10s %5s %10s %11s %18s %18s\n", "scheme", "runs", "raw MRE %", "raw bias %",
              "alpha-beta MRE %", "corrected MRE %");
  auto cell = [&](const char* key, const std::string& k) {
    const auto& c = rep[key];
    return c.contains(k) ? fmt::format("{:.1f} ({:.1f})", c[k]["mre"].get<double>(), c[k]["sd"].get<double>())
                         : std::string("-");
  };
  for (const auto& [k, v] : rep["raw_mre"].items())
    std::printf("%-10s %5d %10.1f %11.1f %18s %18s\n", k.c_str(), rep["count"][k].get<int>(), v.get<double>(),
                rep["raw_bias"][k].get<double>(), cell("calibrated_mre", k).c_str(),
                cell("corrected_mre", k).c_str());
  if (rep.contains("test_runs"))
    for (const auto& t : rep["test_runs"])
      std::printf(
          "test run %-22s measured %9.1f ms  raw %9.1f (%5.1f %%)  alpha-beta %9.1f (%5.1f %%)  corrected "
          "%9.1f (%5.1f %%)\n",
          t["label"].get<std::string>().c_str(), t["measured_ms"].get<double>(), t["raw_ms"].get<double>(),
          t["raw_ape"].get<double>(), t["alpha_beta_ms"].get<double>(), t["alpha_beta_ape"].get<double>(),
          t["corrected_ms"].get<double>(), t["corrected_ape"].get<double>());
  if (rep.contains("shipped")) {
    std::printf("shipped path (what `predict --gpus` prints; %s):\n",
                rep["shipped"]["collectives"].get<std::string>().c_str());
    for (const auto& [k, v] : rep["shipped"]["mre"].items())
      std::printf("  %-10s %5d MRE %5.1f %%  bias %+6.1f %%\n", k.c_str(), rep["count"][k].get<int>(),
                  v.get<double>(), rep["shipped"]["bias"][k].get<double>());
    if (rep["shipped"].contains("test_runs"))
      for (const auto& t : rep["shipped"]["test_runs"])
        std::printf("  test run %-22s measured %9.1f ms  shipped %9.1f (%5.1f %%)\n",
                    t["label"].get<std::string>().c_str(), t["measured_ms"].get<double>(),
                    t["shipped_ms"].get<double>(), t["ape"].get<double>());
  }
  std::printf("alpha %.3f, beta %.3f (mean over %d random halves)%s\n", rep["alpha"].get<double>(),
              rep["beta"].get<double>(), rep["seeds"].get<int>(),
              o.e.out.empty() ? "" : (" -> " + o.e.out).c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"eval", "parallel"},
    "Check the parallel composition (predict --gpus/--tp/--pp) against measured multi-GPU iterations",
    [](CLI::App& app) {
      auto o = std::make_shared<EvalParallelOptions>();
      app.add_option("--runs", o->runs, "CSV in vTrain's layout (datasets/vtrain/single_node_train.csv)")
          ->required();
      app.add_option("--bundle", o->e.bundle, "bundle directory")->required();
      app.add_option("--device-spec", o->e.device_spec, "the GPU's spec sheet")->required();
      app.add_option("--comm", o->e.comm,
                     "collective calibration JSON for the composition (default: the bundle's, else the GPU's "
                     "fabric preset)");
      app.add_flag("--shipped", o->e.shipped,
                   "also score what `predict --gpus` prints: anchored to one GPU's prediction, collectives "
                   "from --fabric or the GPU's preset, nothing fitted on the runs");
      app.add_option("--fabric", o->e.fabric, "fabric preset for --shipped (default: the GPU's)");
      app.add_option("--shipped-host-node-us", o->host_us,
                     "--shipped with this host cost per graph node (us) instead of predict's default (a "
                     "value fitted on other runs)");
      app.add_option("--test-runs", o->test_runs,
                     "CSV of other runs (same layout) predicted with the factors fitted on all of --runs");
      app.add_option("--seeds", o->e.seeds, "random halves for the calibrated figures")
          ->capture_default_str();
      app.add_option("--out", o->e.out, "write predictions.csv, report.md and report.json here");
      app.add_flag("--json", o->json, "print the report as JSON");
      return [o] { return run(*o); };
    });

}  // namespace
