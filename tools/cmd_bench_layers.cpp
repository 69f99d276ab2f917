// scaledl bench layers: time every layer config of a plan (forward and backward
// separately) and store one row per config; resumable (docs/bench.md).
#include <cstdio>
#include <memory>
#include <optional>

#include "command.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/io/store.hpp"

namespace {

struct BenchLayersOptions {
  std::string plan;                 ///< plan JSON of kind "layers"
  std::string db;                   ///< SQLite store (created when missing)
  scaledl::LayerCampaignOptions c;  ///< campaign, device, threads, timing
  bool quiet = false;               ///< no progress bar even on a terminal
  std::string shard;                ///< "i/n": run only configs k with k % n == i ("" = all)
};

int run(BenchLayersOptions o) {
  using namespace scaledl;
  const std::optional<Shard> shard =
      o.shard.empty() ? std::nullopt : std::optional<Shard>(parse_shard(o.shard));
  Plan p = load_plan(o.plan);
  SCALEDL_CHECK(p.kind == "layers",
                "{}: kind=\"{}\" but `bench layers` needs a layers plan (use `bench models`)", o.plan,
                p.kind);
  const size_t planned = p.layers.size();
  if (shard) apply_shard(p, *shard);
  o.c.timing.warmup_max = std::max(o.c.timing.warmup_max, o.c.timing.warmup_min);
  o.c.progress = cli::progress_mode(o.quiet);
  check_layer_campaign_options(o.c);  // before the store is opened: a bad option creates none
  Store store(o.db);
  LayerCampaignSummary s = run_layer_campaign(p.layers, store, o.c);
  if (shard)
    std::printf("shard %lld/%lld: %zu of the plan's %zu configs (k %% %lld == %lld)\n",
                static_cast<long long>(shard->index), static_cast<long long>(shard->count), p.layers.size(),
                planned, static_cast<long long>(shard->count), static_cast<long long>(shard->index));
  std::printf(
      "campaign %s on %s: %zu configs, %zu skipped (already stored), %zu ok, %zu unstable, %zu oom, "
      "%zu error in %.1f s -> %s\n",
      o.c.campaign.c_str(), s.device.c_str(), s.total, s.skipped, s.ok, s.unstable, s.oom, s.error, s.seconds,
      o.db.c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"bench", "layers"}, "Time the layer configs of a plan (fwd and bwd) into a store; resumable",
    [](CLI::App& app) {
      auto o = std::make_shared<BenchLayersOptions>();
      auto& t = o->c.timing;
      app.add_option("--plan", o->plan, "plan JSON of kind \"layers\"")->required();
      app.add_option("--db", o->db, "SQLite results store (created if missing)")->required();
      app.add_option("--device", o->c.device, "cpu, cuda or cuda:<i>")->capture_default_str();
      app.add_option("--campaign", o->c.campaign,
                     "campaign name (rows are keyed by campaign, config, device)")
          ->capture_default_str();
      app.add_option("--threads", o->c.threads, "LibTorch intra-op threads (0 = LibTorch default)")
          ->capture_default_str();
      app.add_option("--warmup", t.warmup_min, "minimum warm-up samples before timing (>= 0)")
          ->capture_default_str();
      app.add_option("--warmup-max", t.warmup_max,
                     "warm-up samples after which a non-settling config is timed anyway")
          ->capture_default_str();
      app.add_option("--repeats", t.repeats, "timed samples per direction (>= 1)")->capture_default_str();
      app.add_option("--min-sample-ms", t.min_sample_ms,
                     "launches per sample are raised until a sample lasts this long (ms)")
          ->capture_default_str();
      app.add_option("--max-cv", t.unstable_cv, "CV above which a row is marked \"unstable\"")
          ->capture_default_str();
      app.add_option("--max-seconds", t.max_seconds, "time budget of one direction of one config (s)")
          ->capture_default_str();
      app.add_option(
             "--mem-limit-gb", o->c.mem_limit_gb,
             "record configs whose estimated footprint exceeds this as \"oom\" without running (0 = off)")
          ->capture_default_str();
      app.add_flag("!--quick-probe", o->c.full_probe,
                   "a new device is measured with a quick probe (256^3 matmul, 16 MiB copy)");
      app.add_option(
             "--passes", o->c.passes,
             "time the whole plan this many times, one pass after another, and keep each config's median "
             "of its passes (a noisy machine's slow spells then fall on one pass; docs/bench.md)")
          ->capture_default_str();
      app.add_flag("--quiet", o->quiet, "no progress (a bar on a terminal, a line every 10 s in a log)");
      app.add_option(
          "--shard", o->shard,
          "i/n: run only the plan's configs k with k % n == i (0 <= i < n), one share of a campaign "
          "split across nodes; merge the stores with `scaledl db merge`");
      return [o] { return run(*o); };
    });

}  // namespace
