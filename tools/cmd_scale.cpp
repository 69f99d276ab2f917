// scaledl scale MODEL.json: predicted iteration / epoch time, speedup and
// efficiency against the GPU count, with the best (tp, pp, dp) split per count
// and the best count for a time or cost target (scale.hpp, docs/parallel.md).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>

#include "command.hpp"
#include "model_args.hpp"
#include "pipeline_args.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/gnuplot.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/predict_api.hpp"
#include "scaledl/predict/scale.hpp"

namespace {

struct ScaleCmdOptions {
  scaledl::cli::ModelArgs args;
  std::string bundle, device_spec, comm, fabric, gpus = "1..64", plot;
  bool gpus_per_node_given = false;
  bool json = false;
  scaledl::ScaleOptions s;
  scaledl::cli::PipelineArgs input;    ///< --pipeline, --workers, --vcpus, --input (issue #15)
  std::optional<double> host_node_us;  ///< --host-node-us
  std::string calibrate;               ///< --calibrate: store with a few layer timings of the GPU
};

int run(const ScaleCmdOptions& o) {
  using namespace scaledl;
  auto [m, s] = o.args.load();
  ScaleOptions so = o.s;
  so.gpus = parse_gpu_counts(o.gpus);
  o.input.check();  // issue #15: before the bundle loads
  SCALEDL_CHECK(!o.bundle.empty(), "--bundle is required");
  SCALEDL_CHECK(!o.device_spec.empty(), "--device-spec is required (the GPU of the cluster)");
  const std::string spec_path = find_device_spec(o.device_spec);  // a shipped sheet's name, or a file
  Bundle b = load_bundle(o.bundle);
  if (!o.comm.empty()) b.comm_given = load_comm_model(o.comm);
  if (o.host_node_us) b.host_node_ms_given = host_node_ms_of_us(*o.host_node_us);
  const DeviceRecord dev = load_device_spec(spec_path);
  if (!o.calibrate.empty()) b.calibration = calibrate_from_store(b.layers, o.calibrate, dev);
  const ClusterCommChoice cc = choose_cluster_comm(b, o.fabric, spec_path, dev);
  // A preset's node is its NVLink domain (72 GPUs for an NVL72 rack) unless --gpus-per-node says.
  if (cc.fabric && !o.gpus_per_node_given) so.gpus_per_node = cc.fabric->gpus_per_node;
  const bool multi = std::any_of(so.gpus.begin(), so.gpus.end(), [](int64_t n) { return n > 1; });
  SCALEDL_CHECK(
      !multi || cc.comm.intra.bandwidth_Bps > 0,
      "--gpus={} needs a collective model: --fabric NAME (a preset of models/fabrics; the device spec "
      "names none), --comm FILE (`scaledl comm fit`) or a bundle trained with --comm",
      o.gpus);
  const auto input = o.input.resolve(m, s);  // issue #15: the host input pipeline bounds T_iter
  if (input) so.input_ms = cli::PipelineArgs::scale_input_ms(*input);
  const ScaleResult r = scale_curve(b, m, s, so, dev, cc.comm);
  if (!o.plot.empty()) {
    std::filesystem::create_directories(o.plot);
    std::ostringstream dat;
    dat << "# gpus speedup efficiency t_iter_ms ideal\n";
    for (const auto& p : r.points)
      dat << p.gpus << " " << p.speedup << " " << p.efficiency << " " << p.best.t_iter_ms << " " << p.gpus
          << "\n";
    write_text_file_atomic(o.plot + "/scale.dat", dat.str());
    const std::string d = gp_quote(o.plot + "/scale.dat");
    run_gnuplot(
        o.plot, "scale",
        fmt::format("set title {}\nset xlabel 'GPUs'\nset ylabel 'speedup'\nset y2label 'efficiency'\n"
                    "set logscale x 2\nset logscale y 2\nset y2range [0:1.05]\nset y2tics\nset key top left\n"
                    "set grid\nplot {} using 1:5 with lines dt 2 lc rgb '#888888' title 'ideal', "
                    "{} using 1:2 with linespoints lw 2 {} title 'predicted speedup', "
                    "{} using 1:3 axes x1y2 with linespoints {} title 'efficiency'\n",
                    gp_quote(fmt::format("{} on {} ({} scaling, global batch {})", m.name, dev.name,
                                         so.weak ? "weak" : "strong", r.points.front().global_batch)),
                    d, d, gp_colour(0), d, gp_colour(1)));
  }
  if (o.json) {
    nlohmann::json j = r.to_json();
    j["model"] = m.name;
    j["device"] = dev.key();
    j["mode"] = so.weak ? "weak" : "strong";
    if (!cc.source.empty()) j["collectives"] = cc.source;
    if (b.calibration) j["calibration"] = b.calibration->to_json();
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("%s on %s, %s scaling, ZeRO %d%s; best split per GPU count\n", m.name.c_str(),
              dev.key().c_str(), so.weak ? "weak (fixed batch per GPU)" : "strong (fixed global batch)",
              so.zero, so.recompute ? ", recomputation" : "");
  if (b.calibration) {
    std::printf("calibrated by %lld layer timings of this GPU in %s (predict --calibrate)\n",
                static_cast<long long>(b.calibration->rows_used()), b.calibration->source.c_str());
    if (!b.calibration->caution.empty()) std::printf("caution: %s\n", b.calibration->caution.c_str());
  }
  std::printf("%6s %4s %4s %5s %4s %7s %12s %12s %9s %10s %10s %9s\n", "gpus", "tp", "pp", "dp", "M", "batch",
              "T_iter_ms", "T_epoch_s", "speedup", "efficiency", "cost", "mem_GB");
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    std::printf("%6lld %4lld %4lld %5lld %4lld %7lld %12.2f %12s %9.2f %10.2f %10s %9.2f%s%s\n",
                static_cast<long long>(p.gpus), static_cast<long long>(p.best.plan.cfg.tp),
                static_cast<long long>(p.best.plan.cfg.pp), static_cast<long long>(p.best.plan.dp),
                static_cast<long long>(p.best.plan.cfg.microbatches), static_cast<long long>(p.global_batch),
                p.best.t_iter_ms, p.t_epoch_s > 0 ? fmt::format("{:.1f}", p.t_epoch_s).c_str() : "-",
                p.speedup, p.efficiency, p.cost > 0 ? fmt::format("{:.2f}", p.cost).c_str() : "-",
                p.peak_bytes / 1e9,
                static_cast<int64_t>(i) == r.fastest
                    ? "  <- fastest"
                    : (static_cast<int64_t>(i) == r.best_for_target ? "  <- target" : ""),
                p.best.plan.cfg.ep > 1
                    ? fmt::format("  (experts over ep {} of the dp GPUs)", p.best.plan.cfg.ep).c_str()
                    : "");
  }
  if (input) std::printf("%s", cli::PipelineArgs::scale_table(*input, r).c_str());
  int64_t skipped = 0;
  for (const auto& p : r.points) skipped += p.skipped_memory;
  if (skipped > 0)
    std::printf("memory: %lld split(s) left out: predicted per-GPU peak above %.1f GB (%.0f %% headroom)\n",
                static_cast<long long>(skipped), dev.mem_gb * (1 - so.headroom), 100 * so.headroom);
  for (const auto& p : r.points)
    if (p.linear_bound)
      std::printf(
          "bound: %lld GPUs predicted faster than a linear speedup over one GPU; T_iter raised to it\n",
          static_cast<long long>(p.gpus));
  for (const auto& w : r.infeasible) std::printf("not feasible: %s\n", w.c_str());
  if (multi && !cc.source.empty()) std::printf("collectives: %s\n", cc.source.c_str());
  if (!r.comm_warning.empty()) std::printf("warning: %s\n", r.comm_warning.c_str());  // issue #39 case 27
  if (so.target_epoch_s > 0)
    std::printf(
        "%s\n",
        r.best_for_target >= 0
            ? fmt::format("target epoch {:.1f} s: {} GPUs{}", so.target_epoch_s,
                          r.points[r.best_for_target].gpus,
                          so.price_per_gpu_hour > 0 ? " (the cheapest that meets it)" : " (the fewest)")
                  .c_str()
            : fmt::format("target epoch {:.1f} s: no GPU count meets it", so.target_epoch_s).c_str());
  if (!o.plot.empty()) std::printf("plot: %s/scale.png, %s/scale.svg\n", o.plot.c_str(), o.plot.c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"scale"}, "Speedup and efficiency against the GPU count, with the best tp x pp x dp split per count",
    [](CLI::App& app) {
      auto o = std::make_shared<ScaleCmdOptions>();
      o->args.add_to(app);
      o->input.add_to(app);
      app.add_option("--bundle", o->bundle, "bundle directory")->required();
      app.add_option("--device-spec", o->device_spec, "the cluster's GPU (spec sheet or probe JSON)")
          ->required();
      app.add_option("--comm", o->comm, "collective calibration (`scaledl comm fit --out`)");
      app.add_option("--fabric", o->fabric,
                     "the cluster's interconnect: a preset name (models/fabrics) or file (default: the one "
                     "the device spec names)");
      app.add_option(
          "--calibrate", o->calibrate,
          "store with a few layer timings of this GPU: each layer kind scaled by their median ratio to "
          "the layer models' (as `predict --calibrate`; docs/predict.md)");
      app.add_option(
          "--host-node-us", o->host_node_us,
          "the host's cost per graph node of your framework, microseconds: each pipeline slot takes at "
          "least its nodes x this (default: the bundle's fit for a probed device, none for a spec sheet; "
          "docs/parallel.md)");
      app.add_option("--gpus", o->gpus, "GPU counts: 1..1024 (powers of two) or a list 1,2,8")
          ->capture_default_str();
      app.add_option("--gpus-per-node", o->s.gpus_per_node,
                     "GPUs per node (TP stays inside one; default: the fabric preset's, else 8)")
          ->capture_default_str()
          ->each([o](const std::string&) { o->gpus_per_node_given = true; });
      app.add_flag("--weak", o->s.weak,
                   "fixed batch per GPU (--batch per GPU) instead of a fixed global batch");
      app.add_option("--global-batch", o->s.global_batch,
                     "strong scaling: samples per iteration (default --batch)");
      app.add_option("--samples", o->s.samples, "samples per epoch (for epoch time and cost)");
      app.add_option("--price-per-gpu-hour", o->s.price_per_gpu_hour,
                     "price of one GPU hour (cost per epoch)");
      app.add_option("--target-epoch-s", o->s.target_epoch_s,
                     "the cheapest (or smallest) N meeting this epoch time");
      app.add_option("--zero", o->s.zero, "ZeRO stage of the data-parallel splits")->capture_default_str();
      app.add_option("--headroom", o->s.headroom,
                     "fraction of GPU memory kept free: splits whose predicted peak does not fit are skipped")
          ->capture_default_str();
      app.add_flag("--recompute", o->s.recompute, "activation recomputation");
      app.add_option("--plot", o->plot, "write scale.png / scale.svg (gnuplot) into this folder");
      app.add_flag("--json", o->json, "print JSON");
      return [o] { return run(*o); };
    });

}  // namespace
