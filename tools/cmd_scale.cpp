// scaledl scale MODEL.json: predicted iteration / epoch time, speedup and
// efficiency against the GPU count, with the best (tp, pp, dp) split per count
// and the best count for a time or cost target (scale.hpp, docs/parallel.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/ranges.h>

#include "command.hpp"
#include "model_args.hpp"
#include "pipeline_args.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/gnuplot.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/core/message.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/predict_api.hpp"
#include "scaledl/predict/scale.hpp"

namespace {

struct ScaleCmdOptions {
  scaledl::cli::ModelArgs args;
  std::string bundle, device_spec, comm, fabric, gpus = "1..64", plot;
  std::string zero = "1", cp = "1", vp = "1", search, prices, price;
  bool gpus_per_node_given = false;
  bool json = false, recompute = false, recompute_selective = false, sp = false;
  scaledl::ScaleOptions s;
  scaledl::cli::PipelineArgs input;    ///< --pipeline, --workers, --vcpus, --input (issue #15)
  std::optional<double> host_node_us;  ///< --host-node-us
  bool cuda_graphs = false;            ///< --cuda-graphs
  std::string calibrate;               ///< --calibrate: store with a few layer timings of the GPU
};

std::vector<std::string> split_commas(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  for (std::string t; std::getline(ss, t, ',');) out.push_back(t);
  return out;
}

/// The layouts to search (--zero, --cp, --vp lists; --search recompute,sp; --framework a list).
void set_search(const ScaleCmdOptions& o, scaledl::ScaleOptions& so, scaledl::ModelRequest& args) {
  using namespace scaledl;
  so.zero.clear();
  for (int64_t z : parse_int_list(o.zero, "--zero", 0, 3)) so.zero.push_back(static_cast<int>(z));
  so.cp = parse_int_list(o.cp, "--cp", 1, int64_t{1} << 20);
  so.vp = parse_int_list(o.vp, "--vp", 1, 1024);
  SCALEDL_CHECK(!(o.recompute && o.recompute_selective),
                "--recompute and --recompute-selective: give one granularity (or --search recompute)");
  so.recompute = {o.recompute             ? Recompute::Full
                  : o.recompute_selective ? Recompute::Selective
                                          : Recompute::None};
  so.sequence_parallel = {o.sp};
  for (const std::string& d : split_commas(o.search)) {
    if (d == "recompute") {  // none, the attention core (where it is eager), every block
      so.recompute = {Recompute::None, Recompute::Selective, Recompute::Full};
    } else if (d == "sp") {
      so.sequence_parallel = {false, true};
    } else {
      fail(
          "--search={}: \"{}\" is not a searched dimension (recompute, sp; --zero, --cp, --vp and "
          "--framework "
          "take lists)",
          o.search, d);
    }
  }
  if (args.framework.find(',') != std::string::npos) {
    SCALEDL_CHECK(args.attention.empty(),
                  "--attention={} with several --framework={}: give the attention core of one recipe, or "
                  "search the recipes alone",
                  args.attention, args.framework);
    for (const std::string& f : split_commas(args.framework))
      so.frameworks.push_back(parse_framework(f, "--framework"));
    args.framework = to_string(so.frameworks.front());  // the settings load with the first
  }
}

/// The price of one GPU hour of each --device-spec value: --price-per-gpu-hour (one for all, or one per
/// GPU), else the --prices table or the shipped one; 0 where none says.
std::vector<std::pair<double, std::string>> prices_of(const ScaleCmdOptions& o,
                                                      const std::vector<std::string>& specs) {
  using namespace scaledl;
  std::vector<std::pair<double, std::string>> out(specs.size(), {0.0, std::string()});
  if (!o.price.empty()) {
    const auto v = split_commas(o.price);
    SCALEDL_CHECK(v.size() == 1 || v.size() == specs.size(),
                  "--price-per-gpu-hour={}: give one price, or one per --device-spec ({})", o.price,
                  specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string& t = v[v.size() == 1 ? 0 : i];
      double x = NAN;
      size_t pos = 0;
      try {
        x = std::stod(t, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      SCALEDL_CHECK(pos == t.size() && !t.empty() && std::isfinite(x) && x >= 0,
                    "--price-per-gpu-hour={} must be >= 0", t);
      out[i] = {x, x > 0 ? "--price-per-gpu-hour" : ""};
    }
    return out;
  }
  std::optional<PriceTable> table;
  if (!o.prices.empty())
    table = load_price_table(o.prices);
  else
    table = shipped_price_table();
  if (!table) return out;
  for (size_t i = 0; i < specs.size(); ++i)
    if (const GpuPrice* p = table->find(specs[i])) out[i] = {p->per_gpu_hour, table->describe(specs[i])};
  return out;
}

/// The extra layout of a point beyond tp x pp x dp x M: "cp 2, vp 2, ZeRO 3, SP, recompute, megatron"
/// (the options as layout_string names them: "SP (TP comm overlapped)" where it is).
std::string extras(const scaledl::ScalePoint& p) {
  const auto& c = p.best.plan.cfg;
  std::vector<std::string> e;
  if (c.cp > 1) e.push_back(fmt::format("cp {}", c.cp));
  if (c.vp > 1) e.push_back(fmt::format("vp {}", c.vp));
  if (c.ep > 1) e.push_back(fmt::format("ep {}", c.ep));
  if (p.best.plan.dp * c.cp > 1) e.push_back(fmt::format("ZeRO {}", c.zero));
  for (auto& o : scaledl::layout_options(c)) e.push_back(std::move(o));
  if (!p.framework.empty()) e.push_back(p.framework);
  return fmt::format("{}", fmt::join(e, ", "));
}

void print_curve(const scaledl::ScaleResult& r, const scaledl::ScaleOptions& so, double mem_gb) {
  std::printf("%6s %4s %4s %5s %4s %7s %12s %12s %9s %10s %10s %9s  %s\n", "gpus", "tp", "pp", "dp", "M",
              "batch", "T_iter_ms", "T_epoch", "speedup", "efficiency", "cost", "mem_GB", "layout");
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    std::printf("%6lld %4lld %4lld %5lld %4lld %7lld %12.2f %12s %9.2f %10.2f %10s %9.2f  %s%s\n",
                static_cast<long long>(p.gpus), static_cast<long long>(p.best.plan.cfg.tp),
                static_cast<long long>(p.best.plan.cfg.pp), static_cast<long long>(p.best.plan.dp),
                static_cast<long long>(p.best.plan.cfg.microbatches), static_cast<long long>(p.global_batch),
                p.best.t_iter_ms, p.t_epoch_s > 0 ? scaledl::human_duration(p.t_epoch_s).c_str() : "-",
                p.speedup, p.efficiency, p.cost > 0 ? fmt::format("{:.2f}", p.cost).c_str() : "-",
                p.peak_bytes / 1e9, extras(p).c_str(),
                static_cast<int64_t>(i) == r.fastest
                    ? "  <- fastest"
                    : (static_cast<int64_t>(i) == r.best_for_target ? "  <- target" : ""));
  }
  int64_t skipped = 0;
  for (const auto& p : r.points) skipped += p.skipped_memory;
  if (skipped > 0)
    std::printf("memory: %lld split(s) left out: predicted per-GPU peak above %.1f GB (%.0f %% headroom)\n",
                static_cast<long long>(skipped), mem_gb * (1 - so.headroom), 100 * so.headroom);
  for (const auto& p : r.points)
    if (p.linear_bound)
      std::printf(
          "bound: %lld GPUs predicted faster than a linear speedup over one GPU; T_iter raised to it\n",
          static_cast<long long>(p.gpus));
  for (const auto& w : r.infeasible) std::printf("not feasible: %s\n", w.c_str());
  if (!r.comm_warning.empty()) std::printf("warning: %s\n", r.comm_warning.c_str());  // issue #39 case 27
}

int run(const ScaleCmdOptions& o) {
  using namespace scaledl;
  ModelRequest args = o.args;
  ScaleOptions so = o.s;
  set_search(o, so, args);
  auto [m, s] = args.load();
  so.gpus = parse_gpu_counts(o.gpus);
  o.input.check();  // issue #15: before the bundle loads
  SCALEDL_CHECK(!o.device_spec.empty(), "--device-spec is required (the GPU of the cluster)");
  std::vector<std::string> specs = split_commas(o.device_spec);
  for (const std::string& v : specs)
    SCALEDL_CHECK(!v.empty(), "--device-spec={}: an empty name in the list", o.device_spec);
  const bool compare = specs.size() > 1;
  const auto prices = prices_of(o, specs);
  // Every GPU is looked up before the bundle loads: a misspelt name is an error, not a row.
  std::vector<std::string> spec_paths;
  std::vector<DeviceRecord> devs;
  for (const std::string& v : specs) {
    spec_paths.push_back(find_device_spec(v));  // a shipped sheet's name, or a file
    devs.push_back(load_device_spec(spec_paths.back()));
  }
  // Without --bundle, the shipped one of the GPUs (a cluster of CPUs is not scaled).
  Bundle b = load_bundle(o.bundle.empty() ? shipped_bundle_dir(devs.front().kind == "cpu") : o.bundle);
  if (!o.comm.empty()) b.comm_given = load_comm_model(o.comm);
  apply_host_options(b, o.host_node_us, o.cuda_graphs);
  const auto input = o.input.resolve(m, s);  // issue #15: the host input pipeline bounds T_iter
  if (input) so.input_ms = cli::PipelineArgs::scale_input_ms(*input);
  const bool multi = std::any_of(so.gpus.begin(), so.gpus.end(), [](int64_t n) { return n > 1; });
  std::vector<DeviceCurve> curves;
  std::vector<ScaleOptions> opts;  // per GPU: its node size and price
  std::vector<std::string> sources;
  for (size_t i = 0; i < specs.size(); ++i) {
    DeviceCurve c;
    c.name = specs[i];
    ScaleOptions di = so;
    std::string source;
    try {
      const std::string& spec_path = spec_paths[i];
      c.dev = devs[i];
      if (!o.calibrate.empty()) b.calibration = calibrate_from_store(b.layers, o.calibrate, c.dev);
      const ClusterCommChoice cc = choose_cluster_comm(b, o.fabric, spec_path, c.dev);
      // A preset's node is its NVLink domain (72 GPUs for an NVL72 rack) unless --gpus-per-node says.
      if (cc.fabric && !o.gpus_per_node_given) di.gpus_per_node = cc.fabric->gpus_per_node;
      SCALEDL_CHECK(
          !multi || cc.comm.intra.bandwidth_Bps > 0,
          "--gpus={} needs a collective model: --fabric NAME (a preset of models/fabrics; the device spec "
          "names none), --comm FILE (`scaledl comm fit`) or a bundle trained with --comm",
          o.gpus);
      di.price_per_gpu_hour = prices[i].first;
      c.price_per_gpu_hour = prices[i].first;
      c.price_source = prices[i].second;
      source = cc.source;
      c.result = scale_curve(b, m, s, di, c.dev, cc.comm);
      c.pick = pick_point(c.result, di);
    } catch (const Error& e) {
      if (!compare) throw;
      c.error = e.what();
    }
    curves.push_back(std::move(c));
    opts.push_back(di);
    sources.push_back(source);
  }
  // Compared GPU types that all failed leave nothing to plot: no files, and a line saying so.
  const bool plot = !o.plot.empty() && std::any_of(curves.begin(), curves.end(),
                                                   [](const DeviceCurve& c) { return c.error.empty(); });
  if (plot) {
    std::filesystem::create_directories(o.plot);
    std::ostringstream dat;
    std::string plots;
    if (!compare) {
      const ScaleResult& r = curves.front().result;
      dat << "# gpus speedup efficiency t_iter_ms ideal\n";
      for (const auto& p : r.points)
        dat << p.gpus << " " << p.speedup << " " << p.efficiency << " " << p.best.t_iter_ms << " " << p.gpus
            << "\n";
      write_text_file_atomic(o.plot + "/scale.dat", dat.str());
      const std::string d = gp_quote(o.plot + "/scale.dat");
      plots = fmt::format(
          "set title {}\nset xlabel 'GPUs'\nset ylabel 'speedup'\nset y2label 'efficiency'\n"
          "set logscale x 2\nset logscale y 2\nset y2range [0:1.05]\nset y2tics\nset key top left\n"
          "set grid\nplot {} using 1:5 with lines dt 2 lc rgb '#888888' title 'ideal', "
          "{} using 1:2 with linespoints lw 2 {} title 'predicted speedup', "
          "{} using 1:3 axes x1y2 with linespoints {} title 'efficiency'\n",
          gp_quote(fmt::format("{} on {} ({} scaling, global batch {})", m.name, curves.front().dev.name,
                               so.weak ? "weak" : "strong", r.points.front().global_batch)),
          d, d, gp_colour(0), d, gp_colour(1));
    } else {  // one line per GPU: time per sample against the GPU count
      dat << "# one block per GPU type: gpus ms_per_sample\n";
      std::vector<std::string> lines;
      int block = 0;
      for (const DeviceCurve& c : curves) {
        if (!c.error.empty()) continue;
        dat << "# " << c.name << "\n";
        for (const auto& p : c.result.points)
          dat << p.gpus << " " << p.best.t_iter_ms / static_cast<double>(p.global_batch) << "\n";
        dat << "\n\n";
        lines.push_back(fmt::format("{} index {} using 1:2 with linespoints lw 2 {} title {}",
                                    gp_quote(o.plot + "/scale.dat"), block, gp_colour(block),
                                    gp_quote(c.name)));
        ++block;
      }
      write_text_file_atomic(o.plot + "/scale.dat", dat.str());
      plots = fmt::format(
          "set title {}\nset xlabel 'GPUs'\nset ylabel 'ms per sample'\nset logscale x 2\nset logscale y 10\n"
          "set key top right\nset grid\nplot {}\n",
          gp_quote(fmt::format("{}: time per sample by GPU type", m.name)), fmt::join(lines, ", "));
    }
    run_gnuplot(o.plot, "scale", plots);
  }
  if (o.json) {
    auto one = [&](const DeviceCurve& c, size_t i) {
      nlohmann::json j = c.error.empty() ? c.result.to_json() : nlohmann::json::object();
      j["device"] = c.error.empty() ? nlohmann::json(c.dev.key()) : nlohmann::json(c.name);
      if (!sources[i].empty()) j["collectives"] = sources[i];
      if (c.price_per_gpu_hour > 0) {
        j["price_per_gpu_hour"] = c.price_per_gpu_hour;
        j["price_source"] = c.price_source;
      }
      if (!c.error.empty()) j["error"] = c.error;
      return j;
    };
    nlohmann::json j;
    if (!compare) {
      j = one(curves.front(), 0);
    } else {
      j["devices"] = nlohmann::json::array();
      std::vector<DeviceCurve> ranked = curves;
      rank_device_curves(ranked);
      for (size_t i = 0; i < curves.size(); ++i) j["devices"].push_back(one(curves[i], i));
      j["ranking"] = nlohmann::json::array();
      for (const DeviceCurve& c : ranked)
        if (c.pick >= 0) {
          const ScalePoint& p = c.result.points[c.pick];
          j["ranking"].push_back(
              {{"device_spec", c.name},
               {"gpus", p.gpus},
               {"layout", layout_string(p.best.plan.cfg, p.best.plan.dp)},
               {"framework", p.framework.empty() ? nlohmann::json() : nlohmann::json(p.framework)},
               {"t_iter_ms", p.best.t_iter_ms},
               {"t_epoch_s", p.t_epoch_s},
               {"cost", p.cost}});
        }
    }
    j["model"] = m.name;
    j["mode"] = so.weak ? "weak" : "strong";
    if (b.calibration) j["calibration"] = b.calibration->to_json();
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::string zeros;
  for (int z : so.zero) zeros += (zeros.empty() ? "" : ",") + std::to_string(z);
  for (size_t i = 0; i < curves.size(); ++i) {
    const DeviceCurve& c = curves[i];
    if (compare) std::printf("%s== %s\n", i ? "\n" : "", c.name.c_str());
    if (!c.error.empty()) {
      std::printf("no curve: %s\n", c.error.c_str());
      continue;
    }
    std::printf("%s on %s, %s scaling, ZeRO %s%s; best split per GPU count\n", m.name.c_str(),
                c.dev.key().c_str(), so.weak ? "weak (fixed batch per GPU)" : "strong (fixed global batch)",
                zeros.c_str(),
                o.recompute             ? ", recomputation"
                : o.recompute_selective ? ", selective recomputation"
                                        : "");
    if (b.calibration) {
      std::printf("calibrated by %lld layer timings of this GPU in %s (predict --calibrate)\n",
                  static_cast<long long>(b.calibration->rows_used()), b.calibration->source.c_str());
      if (!b.calibration->caution.empty()) std::printf("caution: %s\n", b.calibration->caution.c_str());
    }
    print_curve(c.result, opts[i], c.dev.mem_gb);
    if (input) std::printf("%s", cli::PipelineArgs::scale_table(*input, c.result).c_str());
    if (multi && !sources[i].empty()) std::printf("collectives: %s\n", sources[i].c_str());
    if (c.price_per_gpu_hour > 0)
      std::printf(
          "price: %s\n",
          c.price_source == "--price-per-gpu-hour"
              ? fmt::format("{:.2f} per GPU hour (--price-per-gpu-hour)", c.price_per_gpu_hour).c_str()
              : c.price_source.c_str());
    if (so.target_epoch_s > 0)
      std::printf(
          "%s\n",
          c.result.best_for_target >= 0
              ? fmt::format("target epoch {}: {} GPUs{}", human_duration(so.target_epoch_s),
                            c.result.points[c.result.best_for_target].gpus,
                            c.price_per_gpu_hour > 0 ? " (the cheapest that meets it)" : " (the fewest)")
                    .c_str()
              : fmt::format("target epoch {}: no GPU count meets it", human_duration(so.target_epoch_s))
                    .c_str());
  }
  if (compare) {
    std::vector<DeviceCurve> ranked = curves;
    rank_device_curves(ranked);
    const bool costed = std::all_of(ranked.begin(), ranked.end(), [](const DeviceCurve& c) {
      return c.pick < 0 || c.result.points[c.pick].cost > 0;
    });
    std::printf("\ncomparison (%s; %s)\n",
                so.target_epoch_s > 0 ? "the point meeting the target epoch per GPU type"
                : costed              ? "the cheapest epoch per GPU type"
                                      : "the fastest point per GPU type",
                costed ? "ranked by cost per epoch" : "ranked by time per sample");
    std::printf("%-22s %6s %12s %12s %10s %9s  %s\n", "device", "gpus", "T_iter_ms", "T_epoch", "cost",
                "$/GPU-h", "layout");
    for (const DeviceCurve& c : ranked) {
      if (c.pick < 0) {
        std::printf("%-22s %s\n", c.name.c_str(),
                    c.error.empty() ? "no GPU count meets the target" : "no curve (above)");
        continue;
      }
      const ScalePoint& p = c.result.points[c.pick];
      std::printf("%-22s %6lld %12.2f %12s %10s %9s  %s%s\n", c.name.c_str(), static_cast<long long>(p.gpus),
                  p.best.t_iter_ms, p.t_epoch_s > 0 ? human_duration(p.t_epoch_s).c_str() : "-",
                  p.cost > 0 ? fmt::format("{:.2f}", p.cost).c_str() : "-",
                  c.price_per_gpu_hour > 0 ? fmt::format("{:.2f}", c.price_per_gpu_hour).c_str() : "-",
                  layout_string(p.best.plan.cfg, p.best.plan.dp).c_str(),
                  p.framework.empty() ? "" : (", " + p.framework).c_str());
    }
    if (!costed)
      std::printf("cost: %s\n",
                  so.samples > 0
                      ? "some GPU types have no price (--price-per-gpu-hour A,B,... or --prices FILE)"
                      : "give --samples (an epoch's size) for the cost of an epoch");
  }
  if (plot)
    std::printf("plot: %s/scale.png, %s/scale.svg\n", o.plot.c_str(), o.plot.c_str());
  else if (!o.plot.empty())
    std::printf("plot: none written (no GPU type has a curve)\n");
  return 0;
}

scaledl::cli::Registrar reg(
    {"scale"}, "Speedup and efficiency against the GPU count, with the best tp x pp x dp split per count",
    [](CLI::App& app) {
      auto o = std::make_shared<ScaleCmdOptions>();
      o->args.add_to(app);
      // In `predict` --batch is one replica's; here it is the whole job's (or, --weak, each GPU's).
      app.get_option("--batch")->description(
          "strong scaling (default): the global batch, samples per iteration over all GPUs (--global-batch "
          "overrides it); --weak: the samples of each GPU (default 8)");
      o->input.add_to(app);
      app.add_option("--bundle", o->bundle,
                     "bundle directory (default: the shipped models/bundles/default; docs/predict.md)");
      app.add_option("--device-spec", o->device_spec,
                     "the cluster's GPU: a shipped sheet's name (`scaledl devices`) or a spec / probe JSON; "
                     "a list a,b,c compares the GPU types and ranks them by cost per epoch")
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
      app.add_flag("--cuda-graphs", o->cuda_graphs,
                   "the framework launches each iteration as CUDA graphs: no host cost per node");
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
      app.add_option("--price-per-gpu-hour", o->price,
                     "price of one GPU hour (cost per epoch): one for every --device-spec or one each "
                     "(default: the --prices table)");
      app.add_option("--prices", o->prices,
                     "a price table JSON (schema of models/prices.json; default: the shipped one, "
                     "one provider's on-demand list prices of 2026-02)");
      app.add_option("--target-epoch-s", o->s.target_epoch_s,
                     "the cheapest (or smallest) N meeting this epoch time");
      app.add_option("--zero", o->zero,
                     "ZeRO stage of the data-parallel splits, or a list to search (0,1,2,3)")
          ->capture_default_str();
      app.add_option("--cp", o->cp, "context-parallel ways to search, a list (1,2,4)")->capture_default_str();
      app.add_option("--vp", o->vp, "virtual pipeline stages per GPU to search where pp > 1, a list (1,2)")
          ->capture_default_str();
      app.add_flag("--sp", o->sp, "sequence parallelism in every split with tp > 1");
      app.add_flag("--overlap-tp-comm", o->s.overlap_tp_comm,
                   "every split with sequence parallelism overlaps its TP collectives with its GEMMs "
                   "(Megatron-Core --tp-comm-overlap)");
      app.add_flag("--overlap-grad-reduce", o->s.overlap_grad_reduce,
                   "every split overlaps its data-parallel gradient reduction with the backward");
      app.add_option("--search", o->search,
                     "dimensions to search: recompute (none, selective where the attention core is eager, "
                     "full), sp (off, on); a list; --framework takes a list of recipes to search");
      app.add_option("--headroom", o->s.headroom,
                     "fraction of GPU memory kept free: splits whose predicted peak does not fit are skipped")
          ->capture_default_str();
      app.add_flag("--recompute", o->recompute, "activation recomputation of every block in every split");
      app.add_flag("--recompute-selective", o->recompute_selective,
                   "recompute the attention core alone in every split (Megatron --recompute-granularity "
                   "selective)");
      app.add_option("--plot", o->plot, "write scale.png / scale.svg (gnuplot) into this folder");
      app.add_flag("--json", o->json, "print JSON");
      return [o] { return run(*o); };
    });

}  // namespace
