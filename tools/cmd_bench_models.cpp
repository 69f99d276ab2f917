// scaledl bench models: time whole training iterations (with and without the
// optimizer step) and per-node times of the zoo models of a plan; one row per
// config, resumable (docs/zoo.md).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "command.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/bench/model_bench.hpp"
#include "scaledl/bench/probe.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/progress.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/io/store.hpp"

namespace {

struct BenchModelsOptions {
  std::string plan;                 ///< plan JSON of kind "models"
  std::string db;                   ///< SQLite store (created when missing)
  std::string device = "cpu";       ///< cpu | cuda | cuda:<i>
  int threads = 0;                  ///< LibTorch + OpenBLAS threads; 0 = LibTorch's default
  bool probe = true;                ///< measure the device when the store has no record of it
  bool quiet = false;               ///< no progress bar even on a terminal
  std::string mode;                 ///< "" = each plan entry's own; train | fwd-bwd | inference for all
  std::string shard;                ///< "i/n": run only configs k with k % n == i ("" = all)
  scaledl::ModelCampaignOptions c;  ///< campaign name and timing
};

int run(const BenchModelsOptions& o) {
  using namespace scaledl;
  const std::optional<Shard> shard =
      o.shard.empty() ? std::nullopt : std::optional<Shard>(parse_shard(o.shard));
  Plan p = load_plan(o.plan);
  SCALEDL_CHECK(p.kind == "models",
                "{}: kind=\"{}\" but `bench models` needs a models plan (use `bench layers`)", o.plan,
                p.kind);
  const size_t planned = p.models.size();
  if (shard) apply_shard(p, *shard);  // by plan position, so resume keys are those of an unsharded run
  SCALEDL_CHECK(o.threads >= 0, "--threads={} must be >= 0", o.threads);
  if (!o.mode.empty()) {
    // Every entry runs in this mode (its resume key says so: optimizer_step / backward).
    const RunMode mode = parse_run_mode(o.mode, "--mode");
    for (auto& e : p.models) {
      set_run_mode(e.settings, mode);
      validate_settings(e.model, e.settings);
    }
  }
  // One thread count for every pool in the process: LibTorch's intra-op pool
  // and OpenBLAS's own, which at::set_num_threads does not reach (a model run
  // with 2 BLAS threads and a layer run with 1 measure different machines).
  set_compute_threads(o.threads > 0 ? o.threads : at::get_num_threads());
  torch::Device dev = parse_device(o.device);
  Store store(o.db);
  DeviceRecord rec = describe_device(dev);
  if (!store.device(rec.key())) {
    if (o.probe) {
      rec = probe_device(dev);
    } else {
      // Without a probe the record holds only what the spec table knows; a CPU
      // has no spec rates, and a record without them cannot be stored or read.
      SCALEDL_CHECK(
          rec.compute_gflops() > 0 && rec.bandwidth_gbs() > 0,
          "--no-probe: {} has no record in --db={} and no spec-sheet compute rate and bandwidth; run "
          "`scaledl probe --device {} --db {}` first, or drop --no-probe",
          rec.key(), o.db, o.device, o.db);
    }
  }
  Progress bar(p.models.size(), cli::progress_mode(o.quiet));
  auto t0 = std::chrono::steady_clock::now();
  ModelCampaignSummary s =
      run_model_campaign(p.models, store, dev, rec, o.c,
                         [&](size_t done, size_t, const std::string& key, const std::string& status) {
                           bar.update(done, status, key);
                         });
  bar.finish();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (shard)
    std::printf("shard %lld/%lld: %zu of the plan's %zu configs (k %% %lld == %lld)\n",
                static_cast<long long>(shard->index), static_cast<long long>(shard->count), p.models.size(),
                planned, static_cast<long long>(shard->count), static_cast<long long>(shard->index));
  std::printf(
      "campaign %s on %s: %zu configs, %zu skipped (already stored), %zu ok, %zu unstable, %zu failed "
      "in %.1f s -> %s\n",
      o.c.campaign.c_str(), rec.key().c_str(), s.total, s.skipped, s.ok, s.unstable, s.failed, secs,
      o.db.c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"bench", "models"},
    "Time whole training iterations and per-node times of the models of a plan into a store; resumable",
    [](CLI::App& app) {
      auto o = std::make_shared<BenchModelsOptions>();
      auto& b = o->c.bench;
      app.add_option("--plan", o->plan, "plan JSON of kind \"models\"")->required();
      app.add_option("--db", o->db, "SQLite results store (created if missing)")->required();
      app.add_option("--device", o->device, "cpu, cuda or cuda:<i>")->capture_default_str();
      app.add_option("--campaign", o->c.campaign,
                     "campaign name (rows are keyed by campaign, model key, device)")
          ->capture_default_str();
      app.add_option("--threads", o->threads,
                     "compute threads of LibTorch and OpenBLAS (0 = LibTorch default)")
          ->capture_default_str();
      app.add_option("--warmup", b.warmup, "warm-up iterations always run before timing (>= 0)")
          ->capture_default_str();
      app.add_option("--warmup-extra", b.warmup_extra,
                     "further warm-up iterations allowed until times settle (>= 0)")
          ->capture_default_str();
      app.add_option("--repeats", b.repeats, "timed iterations, median reported (>= 1)")
          ->capture_default_str();
      app.add_option("--probe-repeats", b.probe_repeats,
                     "instrumented iterations for per-node times, median reported (0 = none)")
          ->capture_default_str();
      app.add_option("--max-cv", b.unstable_cv, "CV above which a row is marked \"unstable\"")
          ->capture_default_str();
      app.add_option("--max-seconds", b.max_seconds, "time budget of one timed measurement (s)")
          ->capture_default_str();
      app.add_flag("!--no-probe", o->probe, "do not measure the device when the store has no record of it");
      app.add_flag("--quiet", o->quiet, "no progress (a bar on a terminal, a line every 10 s in a log)");
      app.add_option(
          "--shard", o->shard,
          "i/n: run only the plan's configs k with k % n == i (0 <= i < n), one share of a campaign "
          "split across nodes; merge the stores with `scaledl db merge`");
      app.add_option("--mode", o->mode,
                     "run every config as train (fwd + bwd + optimizer step), fwd-bwd, or inference (forward "
                     "only, no-grad, eval mode); default: each plan entry's settings");
      return [o] { return run(*o); };
    });

}  // namespace
