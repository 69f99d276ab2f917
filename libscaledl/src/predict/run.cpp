// One request of `predict` (predict_api.hpp): its checks, its device, its bundle, and the
// prediction of one configuration on one device or on --gpus N.
#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/gnn/graph_inference.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/physics.hpp"
#include "scaledl/predict/predict_api.hpp"

namespace scaledl {

void PredictRequest::check_inputs() const {
  SCALEDL_CHECK(sweeps.empty() || csv.empty(), "give --sweep or --csv, not both");
  SCALEDL_CHECK(many() || !args.model.empty(), "predict: MODEL.json is required (or --csv FILE)");
}

void PredictRequest::check_ranges() const {
  SCALEDL_CHECK(devices >= 1 && devices <= (1 << 20), "--devices={} must be in [1, 2^20]", devices);
  SCALEDL_CHECK(devices == 1 || !comm.empty(),
                "--devices={} needs an all-reduce calibration (--comm FILE, see docs/predict.md)", devices);
  SCALEDL_CHECK(samples == 0 || iterations == 0, "give --samples or --iterations, not both");
  SCALEDL_CHECK(samples >= 0 && iterations >= 0, "--samples and --iterations must be >= 0");
  check_headroom(headroom);
}

void PredictRequest::check_parallel() const {
  SCALEDL_CHECK(
      !many(),
      "--gpus/--tp/--pp/--cp/--vp/--ep/--microbatches/--zero/--recompute: one configuration at a time "
      "(no --sweep or --csv; `scaledl scale` sweeps GPU counts)");
  SCALEDL_CHECK(devices == 1, "give --gpus N (with --tp/--pp) or --devices N, not both");
  SCALEDL_CHECK(anchor.empty(), "--anchor={}: not with --gpus/--tp/--pp (anchor single-device predictions)",
                anchor);
  SCALEDL_CHECK(!keep_outputs,
                "--keep-outputs: not with --gpus/--tp/--pp (a parallel prediction models Megatron-LM's "
                "loop, which holds no logits)");
}

DeviceRecord resolve_device(const PredictRequest& o) {
  if (!o.device_spec.empty()) {
    SCALEDL_CHECK(o.db.empty(), "--device-spec and --db both name a device: give one");
    return load_device_spec(o.device_spec);
  }
  SCALEDL_CHECK(!(o.db.empty() && (o.device == "cpu" || o.device.rfind("cpu:", 0) == 0)),
                "--device={}: describe this CPU first (`scaledl probe --json > cpu.json`, a few seconds) and "
                "give --device-spec cpu.json; without --bundle a CPU takes models/bundles/cpu "
                "(scripts/build_cpu_bundle.sh)",
                o.device);
  SCALEDL_CHECK(!o.db.empty(), "no device: give --device-spec FILE or --db STORE [--device KEY]");
  Store store(o.db, /*read_only=*/true);
  if (!o.device.empty()) {
    auto d = store.device(o.device);
    SCALEDL_CHECK(d.has_value(), "--device={} is not in {} (see `scaledl db info --db {}`)", o.device, o.db,
                  o.db);
    return *d;
  }
  auto all = store.devices();
  SCALEDL_CHECK(all.size() == 1, "--db={} holds {} devices: choose one with --device KEY", o.db, all.size());
  return all[0];
}

std::optional<DeviceRecord> default_device(const PredictRequest& o) {
  // --sweep/--csv may name each configuration's device (device_spec); otherwise one device for all.
  const bool per_variant_device = o.many() && o.device_spec.empty() && o.db.empty();
  if (per_variant_device) return std::nullopt;
  return resolve_device(o);
}

Bundle load_predict_bundle(const PredictRequest& o, const std::optional<DeviceRecord>& dev) {
  SCALEDL_CHECK(o.bundle.empty() || (o.layers.empty() && o.graph.empty()),
                "--bundle={} already holds the layer and graph models: drop --layers/--graph", o.bundle);
  SCALEDL_CHECK(o.graph.empty() || !o.layers.empty(), "--graph={} needs --layers DIR (or give --bundle DIR)",
                o.graph);
  // Neither --bundle nor --layers: the shipped bundle of the device's kind (a CPU's is built by
  // scripts/build_cpu_bundle.sh); a sweep over spec sheets takes the GPUs' default.
  const std::string bundle =
      !o.bundle.empty() || !o.layers.empty() ? o.bundle : shipped_bundle_dir(dev && dev->kind == "cpu");
  Bundle b;
  if (!bundle.empty()) {
    b = load_bundle(bundle);
    if (!o.comm.empty()) b.comm_given = load_comm_model(o.comm);  // a calibration of this cluster, for N > 1
    if (!o.anchor.empty()) {
      // Measured runs set the device's bias; the in-domain refinement predicts
      // better once it is removed (docs/unseen-gpu.md, "A refinement for GPUs
      // without layer timings").
      b.graph_device_out.reset();
      b.intervals_device_out.reset();
    }
  } else {
    b.layers = LayerPredictor::load(o.layers);
    if (!o.graph.empty()) {
      std::string path = o.graph;
      if (std::filesystem::is_directory(path)) path += "/graph_model.safetensors";
      b.graph = GraphInference::load(path);
    }
    if (!o.comm.empty()) b.comm_given = load_comm_model(o.comm);
  }
  apply_host_options(b, o.host_node_us, o.cuda_graphs);
  if (!o.calibrate.empty()) {
    SCALEDL_CHECK(dev.has_value(),
                  "--calibrate={}: one device (--device-spec or --db), not a device_spec sweep or column",
                  o.calibrate);
    b.calibration = calibrate_from_store(b.layers, o.calibrate, *dev);
  }
  return b;
}

std::string stale_rates_warning(const Bundle& b, const std::optional<DeviceRecord>& dev) {
  // Layer models from before 2026-11-26 normalised a probed GPU's rows by its measured rates;
  // the rooflines now run at its spec peak (DeviceRecord::compute_gflops).
  if (!dev || b.layers.options().spec_rates || dev->measured_gflops <= 0 || dev->peak_fp32_gflops <= 0)
    return "";
  return fmt::format(
      "the layer models were trained before rooflines used a probed GPU's spec peak "
      "(manifest options.rates=measured): the predictions for {} differ from what they learned; retrain "
      "them (scaledl train)",
      dev->key());
}

void apply_host_options(Bundle& b, const std::optional<double>& host_node_us, bool cuda_graphs) {
  SCALEDL_CHECK(
      !cuda_graphs || !host_node_us || *host_node_us == 0,
      "--cuda-graphs with --host-node-us={}: CUDA graphs launch the iteration at once, with no host "
      "cost per node; give one of them",
      host_node_us ? *host_node_us : 0.0);
  if (host_node_us) b.host_node_ms_given = host_node_ms_of_us(*host_node_us);
  if (cuda_graphs) b.host_node_ms_given = 0.0;
}

SinglePrediction predict_single(const PredictRequest& o, const Bundle& b, const DeviceRecord& dev) {
  SinglePrediction r;
  auto [m, s] = o.args.load(&r.assumed);
  s.num_devices = o.devices;
  const LayerGraph g = build_layer_graph(m, s);
  r.p = b.predict(g, dev, !o.raw);
  r.anchor = request_anchor(o, b, dev);
  if (r.anchor) b.apply_anchor(r.p, *r.anchor);
  r.outside = b.out_of_range(r.p);
  r.host_warning =
      host_bound_warning(r.p.t_sum_ms, static_cast<double>(g.nodes.size()), r.p.host_ms, dev.kind);
  r.gemm_warning = misaligned_gemm_warning(g, dev);
  r.iterations = o.iterations ? o.iterations : (o.samples ? iterations_per_epoch(o.samples, s) : 0);
  r.memory = predict_memory(g, dev, b.memory ? &*b.memory : nullptr, o.headroom, o.keep_outputs);
  r.model = std::move(m);
  r.settings = s;
  r.device = dev;
  r.nodes = g.nodes.size();
  r.host_source = b.host_node_source(dev, r.settings);
  return r;
}

ClusterCommChoice choose_cluster_comm(const Bundle& b, const std::string& fabric,
                                      const std::string& spec_path, const DeviceRecord& dev) {
  ClusterCommChoice c;
  auto use = [&](FabricPreset p, const std::string& why) {
    c.comm = p.cluster();
    c.source = fmt::format("fabric {} ({}; {}): {}{}", p.name, why, p.origin, p.description,
                           p.inter ? "" : "; no model across nodes");
    c.fabric = std::move(p);
  };
  if (b.comm_given) {
    SCALEDL_CHECK(fabric.empty(), "--fabric={} and --comm: give one collective model, not both", fabric);
    c.comm = ClusterComm::uniform(*b.comm_given);
    c.source = "--comm: the calibration given";
    return c;
  }
  const std::vector<std::string> dirs = fabric_dirs_for_spec(spec_path);
  if (!fabric.empty()) {
    use(find_fabric(fabric, dirs, "--fabric"), "--fabric");
    return c;
  }
  if (std::optional<FabricPreset> p = default_fabric_for(dev.name, dirs)) {
    use(std::move(*p), "the preset of this GPU");
    return c;
  }
  if (b.comm) {
    c.comm = ClusterComm::uniform(*b.comm);
    c.source = "the bundle's calibration (trained with --comm)";
  }
  return c;
}

ParallelSingle predict_parallel_single(const PredictRequest& o, const Bundle& b, const DeviceRecord& dev) {
  o.check_parallel();
  ParallelSingle r;
  auto [m, s] = o.args.load(&r.assumed);
  const ClusterCommChoice cc = choose_cluster_comm(b, o.fabric, o.device_spec, dev);
  if (o.par.gpus > 1) r.comm_source = cc.source;
  r.par = o.par;
  // --host-node-us, else the bundle's fit of the device, else the framework's default
  r.par.host_node_ms = b.host_node_ms_for(dev, s);
  r.host_source = b.host_node_source(dev, s);
  // A preset's node is its NVLink / PCIe domain: more GPUs than one holds span whole nodes.
  if (cc.fabric && r.par.nodes == 1 && r.par.gpus > cc.fabric->gpus_per_node &&
      r.par.gpus % cc.fabric->gpus_per_node == 0) {
    r.par.nodes = r.par.gpus / cc.fabric->gpus_per_node;
    r.assumed.push_back(fmt::format("nodes {} of {} GPUs (the fabric's node; give --nodes)", r.par.nodes,
                                    cc.fabric->gpus_per_node));
  }
  r.r = predict_parallel_anchored(b, m, s, r.par, dev, cc.comm);
  r.host_warning = host_bound_warning(r.r.t_slot_gpu_ms, r.r.stage_nodes, r.r.t_host_ms, dev.kind);
  r.comm_warning = cross_node_comm_warning(cc.comm.inter, r.par.nodes);  // issue #39 case 27
  const ParallelPlan& p = r.r.plan;
  r.iterations =
      o.iterations ? o.iterations : (o.samples ? (o.samples + s.batch * p.dp - 1) / (s.batch * p.dp) : 0);
  // Per-GPU peak: the analytic replay of one micro-batch of the slowest stage's shard.
  r.memory = estimate_parallel_memory(build_layer_graph(p.stage, p.micro), o.par.pp, o.par.microbatches,
                                      p.dp * o.par.cp, o.par.zero, o.par.recompute, s.optimizer,
                                      memory_device_kind(dev.kind), o.par.selective_recompute);
  r.capacity_bytes = dev.mem_gb > 0 ? dev.mem_gb * 1e9 : 0;
  r.headroom = o.headroom;
  r.verdict = memory_verdict(r.memory.peak, NAN, r.capacity_bytes, o.headroom);
  r.model = std::move(m);
  r.settings = s;
  r.device = dev;
  return r;
}

}  // namespace scaledl
