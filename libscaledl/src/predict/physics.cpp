#include "scaledl/predict/physics.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scaledl/core/error.hpp"
#include "scaledl/learn/layer_features.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

double bound_gflops(const DeviceRecord& d, DType dtype) {
  double spec = d.peak_fp32_gflops;
  if (dtype == DType::TF32) spec = std::max(spec, d.peak_tf32_gflops);
  if (dtype == DType::BF16 || dtype == DType::FP16)
    spec = std::max({spec, d.peak_tf32_gflops, d.peak_bf16_gflops});
  if (dtype == DType::FP8) spec = std::max({spec, d.peak_tf32_gflops, d.peak_bf16_gflops, d.peak_fp8_gflops});
  // A measured matmul reaches 60-90 % of the peak; without a spec, twice the
  // measured rate is a safe upper bound.
  const double r = std::max(spec, 2.0 * d.measured_gflops);
  SCALEDL_CHECK(r > 0, "device {} has no compute rate: cannot bound predictions by the roofline", d.key());
  return r;
}

double bound_bandwidth_gbs(const DeviceRecord& d) {
  const double r = std::max(d.peak_mem_bw_gbs, d.measured_bw_gbs);
  SCALEDL_CHECK(r > 0, "device {} has no memory bandwidth: cannot bound predictions by the roofline",
                d.key());
  return r;
}

double framework_host_node_ms(const TrainSettings& s, const std::string& device_kind) {
  return s.fused_kernels && device_kind != "cpu" ? kMegatronHostNodeMs : 0.0;
}

std::string host_bound_warning(double gpu_ms, double nodes, double host_ms, const std::string& kind) {
  if (host_ms > 0 || kind == "cpu" || nodes < 1 || !(gpu_ms < nodes * kEagerHostNodeMs)) return "";
  return fmt::format(
      "the layer sum is {:.1f} us per graph node, less than an eager framework's host needs ({:.0f} us "
      "per node measured for Megatron-LM, 102 for our LibTorch zoo): the host may set the time; give "
      "--host-node-us (docs/parallel.md)",
      1e3 * gpu_ms / nodes, 1e3 * kEagerHostNodeMs);
}

std::string misaligned_gemm_warning(const LayerGraph& g, const DeviceRecord& dev) {
  double slow = 0, all = 0;
  size_t count = 0;
  std::vector<std::string> names;
  for (const auto& n : g.nodes) {
    if (n.dir != Direction::Forward || layer_info(n.type).kind != LayerKind::Gemm) continue;
    const double f = n.cost.flops_fwd + n.cost.flops_bwd;
    all += f;
    if (misaligned_gemm_ms(n, dev) <= 0) continue;
    slow += f;
    ++count;
    const bool out = dim_alignment(n.dims[2], n.dtype) != GemmAlignment::Aligned;
    if (names.size() < 2)
      names.push_back(fmt::format("{} ({} {})", n.name, out ? "d_out" : "d_in", out ? n.dims[2] : n.dims[1]));
  }
  if (slow <= 0 || all <= 0) return "";
  return fmt::format(
      "{}{}: {:.1f} % of the matrix FLOP on a dimension that is no multiple of 16 bytes, which cuBLAS runs "
      "on narrow-alignment kernels that no layer model timed: costed at their measured rate at the "
      "fastest ({:.0f} FLOP per SM and clock for an odd dimension, on our H200; {:.0f} for an even one, on "
      "our H100); padding the dimension to a multiple of 8 (64 for a vocabulary) avoids it",
      fmt::join(names, ", "), count > names.size() ? fmt::format(" and {} more", count - names.size()) : "",
      100 * slow / all, kOddGemmFlopPerSmClock, kEvenGemmFlopPerSmClock);
}

namespace {
/// The distinct stages of a run: {GPU ms, nodes, how many}: one (the others none), or first,
/// middle (pp - 2) and last. No allocation: the host term's fit composes each run hundreds of times.
std::array<std::array<double, 3>, 3> run_stages(const HostRun& r) {
  if (r.pp <= 1) return {{{r.predicted_ms, r.nodes, 1.0}, {0, 0, 0}, {0, 0, 0}}};
  return {{{r.predicted_ms + r.first_ms, r.nodes + r.first_nodes, 1.0},
           {r.predicted_ms, r.nodes, static_cast<double>(r.pp - 2)},
           {r.predicted_ms + r.last_ms, r.nodes + r.last_nodes, 1.0}}};
}
}  // namespace

HostRun::Stage HostRun::longest_stage(double node_ms) const {
  Stage best;
  for (const auto& [gpu, n, count] : run_stages(*this)) {
    const double slot = phases.slot_ms(gpu, n, node_ms);
    if (count > 0 && slot > best.slot_ms) best = {gpu, n, slot};
  }
  return best;
}

double HostRun::composed_ms(double node_ms) const {
  if (pp <= 1) return slots * phases.slot_ms(predicted_ms, nodes, node_ms) + rest_ms;
  double sum = 0;
  for (const auto& [gpu, n, count] : run_stages(*this)) sum += count * phases.slot_ms(gpu, n, node_ms);
  const double longest = longest_stage(node_ms).slot_ms;
  const double others = (sum - longest) / static_cast<double>(pp - 1);
  return microbatches * longest + (slots - microbatches) * others + rest_ms;
}

HostRun graph_host_run(const GraphFeatures& g, const std::string& device, double measured_ms) {
  HostRun h;
  h.device = device;
  h.nodes = static_cast<double>(g.num_nodes);
  h.predicted_ms = g.t_sum_ms + g.t_comm_ms;
  h.measured_ms = measured_ms;
  return h;
}

std::map<std::string, double> fit_host_node_ms(const std::vector<HostRun>& runs,
                                               const std::map<std::string, DeviceRecord>& devices) {
  std::map<std::string, std::vector<const HostRun*>> by_dev;
  for (const HostRun& r : runs) {
    SCALEDL_CHECK(
        r.nodes >= 1 && r.predicted_ms > 0 && r.measured_ms > 0 && std::isfinite(r.predicted_ms) &&
            std::isfinite(r.measured_ms) && r.slots >= 1 && std::isfinite(r.slots) && r.rest_ms >= 0 &&
            std::isfinite(r.rest_ms),
        "host term: run on {} has nodes={} predicted_ms={} measured_ms={} slots={} rest_ms={} (must be "
        ">= 1, > 0, > 0, >= 1, >= 0)",
        r.device, r.nodes, r.predicted_ms, r.measured_ms, r.slots, r.rest_ms);
    auto d = devices.find(r.device);
    if (d == devices.end() || d->second.kind != "cpu") by_dev[r.device].push_back(&r);
  }
  std::map<std::string, double> out;
  for (const auto& entry : by_dev) {
    const std::string& dev = entry.first;
    const auto& rs = entry.second;  // a plain reference: clang's C++17 cannot capture a structured binding
    if (rs.size() < kMinHostRuns) continue;
    double top = 0;
    for (const HostRun* r : rs) top = std::max(top, r->measured_ms / (r->slots * r->nodes));
    auto err = [&](double d) {
      double e = 0;
      for (const HostRun* r : rs) e += std::abs(std::log(r->composed_ms(d) / r->measured_ms));
      return e;
    };
    double best = 0, best_err = err(0);
    for (int i = 1; i <= 400; ++i) {
      const double d = top * i / 400, e = err(d);
      if (e < best_err) best = d, best_err = e;
    }
    if (best > 0) out[dev] = best;
  }
  return out;
}

double iteration_roofline_ms(const LayerGraph& g, const DeviceRecord& d) {
  return roofline_ms(g, d, false);
}

double update_roofline_ms(const LayerGraph& g, const DeviceRecord& d) {
  return roofline_ms(g, d, true);
}

double roofline_ms(const LayerGraph& g, const DeviceRecord& d, bool update_only) {
  const double gbs = bound_bandwidth_gbs(d);
  const double cache_bytes = std::max(0.0, d.l2_mb) * 1e6;
  double t = 0;
  for (const LayerNode& n : g.nodes) {
    if (update_only && n.dir != Direction::Update) continue;
    const double ct = n.flops() / (bound_gflops(d, n.dtype) * 1e6);  // each node at its own dtype's peak
    const double cm = std::max(0.0, traffic_bytes(n.cost, n.dir) - cache_bytes) / (gbs * 1e6);
    t += std::max(ct, cm);
  }
  return t;
}

std::vector<LadderPoint> monotone_ladder(const ModelSpec& m, const TrainSettings& s) {
  std::vector<LadderPoint> out;
  // The grid 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^k) below v.
  auto grid_below = [](int64_t v) {
    std::vector<int64_t> g;
    for (int64_t p = 1; p < v; p *= 2) {
      g.push_back(p);
      if (p >= 2 && p + p / 2 < v) g.push_back(p + p / 2);
    }
    return g;
  };
  // Every grid point of the rectangle below (batch, seq), including the lines
  // batch = s.batch and seq = s.seq_len: along a chain of such points the
  // bound carries from one setting to the other.
  std::vector<int64_t> bs = grid_below(s.batch), qs = {s.seq_len};
  bs.push_back(s.batch);
  if (m.arch != Arch::VisionEncoder) {
    qs = grid_below(s.seq_len);
    qs.push_back(s.seq_len);
  }
  for (int64_t b : bs)
    for (int64_t q : qs) {
      if (b == s.batch && q == s.seq_len) continue;
      TrainSettings t = s;
      t.batch = b;
      t.seq_len = q;  // (T5's tgt_len follows seq_len unless set: fewer tokens either way)
      std::string label = b != s.batch ? "batch " + std::to_string(b) : "";
      if (q != s.seq_len) label += (label.empty() ? "" : ", ") + std::string("seq ") + std::to_string(q);
      out.push_back({t, label, true});
    }
  // The mode rung: an iteration with the optimizer step is no faster than the
  // same without it (plus the step's roofline, added by Bundle::predict_many),
  // and one with backward no faster than inference.
  const RunMode mode = run_mode(s);
  if (mode != RunMode::Inference) {
    TrainSettings t = s;
    set_run_mode(t, mode == RunMode::Train ? RunMode::FwdBwd : RunMode::Inference);
    out.push_back({t, mode == RunMode::Train ? "mode fwd-bwd + optimizer step" : "mode inference"});
  }
  // The devices rung: N data-parallel devices, each with the same batch, take no less time per
  // iteration than one device alone (the same work each, plus the gradient all-reduce).
  if (s.num_devices > 1) {
    TrainSettings t = s;
    t.num_devices = 1;
    out.push_back({t, "devices 1"});
  }
  return out;
}

}  // namespace scaledl
