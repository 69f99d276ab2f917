#pragma once
// Needs LibTorch: yes (this header includes LibTorch's headers).
// Whole-iteration benchmarks of zoo models (docs/zoo.md).
//
// One configuration = a ModelSpec + TrainSettings on a device. bench_model()
// builds the zoo model, a synthetic batch and the optimizer, then
//   1. times the training iteration (zero_grad, forward, loss, backward,
//      optimizer step) with measure() of bench.hpp: warm-up until stable,
//      median over repeats -> ModelMeasurement::iter;
//   2. times the same without the optimizer step -> iter_noopt;
//   3. runs `probe_repeats` separate instrumented iterations with a NodeProbe
//      (zoo.hpp) -> node_times, the median per node of its own forward
//      (name) and backward (name + ".bwd") time, and "optim.step".
// The instrumented run synchronises around every node, so it never feeds the
// iteration times.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "scaledl/design/plan.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

struct ModelBenchOptions {
  int warmup = 3;             ///< warm-up iterations always run before timing, >= 0
  int warmup_extra = 20;      ///< further warm-up iterations allowed while not yet stable, >= 0
  int repeats = 10;           ///< timed iterations summarised by TimingStats, >= 1
  int probe_repeats = 3;      ///< instrumented iterations for per-node times (median), >= 0; 0 = none
  double unstable_cv = 0.10;  ///< CV above this marks the row "unstable", > 0
  double max_seconds = 120;   ///< budget of one timed measurement incl. warm-up (s), > 0
  uint64_t seed = 0;          ///< seed of parameters and the synthetic batch
};

/// Times one configuration (see the file comment). Never throws for a failed
/// run: OOM gives status "oom", any other failure "error", with the reason.
/// Bad options throw Error. `m.name` is the row's model_name.
ModelMeasurement bench_model(const ModelSpec& m, const TrainSettings& s, const torch::Device& dev,
                             const ModelBenchOptions& opt = {});

struct ModelCampaignOptions {
  std::string campaign = "default";  ///< campaign name of the rows
  ModelBenchOptions bench;
};

struct ModelCampaignSummary {
  size_t total = 0;     ///< entries in the plan
  size_t skipped = 0;   ///< already in the store (resumed)
  size_t ok = 0;        ///< status "ok"
  size_t unstable = 0;  ///< status "unstable"
  size_t failed = 0;    ///< status "oom" or "error"
};

/// Progress callback: (entries done, total, model key, status of the entry or "skip").
using ModelProgress = std::function<void(size_t, size_t, const std::string&, const std::string&)>;

/// Runs every plan entry whose model_key is not yet in `store` for
/// (campaign, device.key()), writing each row in its own transaction as soon
/// as it finishes, so a killed campaign resumes where it stopped.
/// Plans come from load_plan() (plan.hpp, kind "models").
ModelCampaignSummary run_model_campaign(const std::vector<ModelConfig>& plan, Store& store,
                                        const torch::Device& dev, const DeviceRecord& device,
                                        const ModelCampaignOptions& opt, const ModelProgress& progress = {});

/// The store key of a plan entry (model_key of its measurement row).
std::string model_plan_key(const ModelConfig& c);

}  // namespace scaledl
