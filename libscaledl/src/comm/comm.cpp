// ScaleDL eq. 15 and its least-squares calibration (see comm.hpp).
#include "scaledl/comm/comm.hpp"

#include <algorithm>
#include <cmath>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

double CommModel::time_s(double bytes, int64_t devices) const {
  SCALEDL_CHECK(devices >= 1, "comm.devices={} must be >= 1", devices);
  SCALEDL_CHECK(std::isfinite(bytes) && bytes >= 0, "comm.bytes={} must be finite and >= 0", bytes);
  if (devices == 1) return 0.0;
  SCALEDL_CHECK(bandwidth_Bps > 0, "comm.bandwidth_Bps={} must be > 0", bandwidth_Bps);
  const double n = static_cast<double>(devices);
  return 2.0 * (n - 1.0) / n * bytes / bandwidth_Bps + 2.0 * (n - 1.0) * gamma_s;
}

nlohmann::json CommModel::to_json() const {
  nlohmann::json j = {{"bandwidth_Bps", bandwidth_Bps}, {"gamma_s", gamma_s}};
  if (nodes > 0) j["nodes"] = nodes;
  return j;
}

CommModel CommModel::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected an object, got {}", ctx, show(j));
  CommModel m;
  // 1 kB/s .. 100 TB/s and at most 1 s per step: anything outside is a typo
  // (a unit slip), not a network.
  m.bandwidth_Bps = get_num_or(j, "bandwidth_Bps", ctx, 1e3, 1e14, NAN);
  SCALEDL_CHECK(!std::isnan(m.bandwidth_Bps), "{}.bandwidth_Bps is missing", ctx);
  m.gamma_s = get_num_or(j, "gamma_s", ctx, 0.0, kCommMaxGammaS, 0.0);
  // The nodes it was measured on: its own key, else the group `comm fit --out` names.
  if (j.contains("nodes"))
    m.nodes = get_int(j, "nodes", ctx, 1, 1 << 20);
  else if (j.contains("source") && j["source"].is_object() && j["source"].contains("nodes"))
    m.nodes = get_int(j["source"], "nodes", ctx + ".source", 1, 1 << 20);
  return m;
}

void check_comm_plausible(const CommModel& m, const std::string& ctx) {
  SCALEDL_CHECK(
      std::isfinite(m.bandwidth_Bps) && m.bandwidth_Bps >= kCommMinBandwidthBps &&
          m.bandwidth_Bps <= kCommMaxBandwidthBps,
      "{}: bandwidth_Bps={:g} is outside the plausible [{:g}, {:g}] B/s (a unit slip or absurd samples, not "
      "a network)",
      ctx, m.bandwidth_Bps, kCommMinBandwidthBps, kCommMaxBandwidthBps);
  SCALEDL_CHECK(
      std::isfinite(m.gamma_s) && m.gamma_s >= 0 && m.gamma_s <= kCommMaxGammaS,
      "{}: gamma_s={:g} is outside the plausible [0, {:g}] s per step (a unit slip or absurd samples, not "
      "a network)",
      ctx, m.gamma_s, kCommMaxGammaS);
}

std::string cross_node_comm_warning(const CommModel& m, int64_t nodes) {
  if (nodes <= 1 || m.nodes > 1) return "";
  const std::string what =
      fmt::format("bandwidth {:.4g} GB/s, gamma {:.3g} us", m.bandwidth_Bps / 1e9, m.gamma_s * 1e6);
  if (m.nodes == 1)
    return fmt::format(
        "the collective calibration was fitted on 1 node ({}) but prices the collectives across "
        "--nodes={}: inter-node links are usually slower than intra-node ones (NVLink); calibrate "
        "across {} nodes (`scaledl comm fit` of an inter-node nccl-tests run)",
        what, nodes, nodes);
  return fmt::format(
      "the collective calibration ({}) does not record how many nodes it was measured on, and prices "
      "the collectives across --nodes={}: if it was fitted within one node (NVLink), inter-node ones "
      "are slower; calibrate across {} nodes (`scaledl comm fit` of an inter-node nccl-tests run)",
      what, nodes, nodes);
}

const char* to_string(CommForm f) {
  return f == CommForm::Tree ? "tree" : "ring";
}

CommFactors comm_factors(const std::string& collective, CommForm form, int64_t devices) {
  SCALEDL_CHECK(devices >= 1, "{}: devices={} must be >= 1", collective, devices);
  const double n = static_cast<double>(devices);
  if (collective == "allreduce") {
    if (form == CommForm::Tree) return {2.0 * (n - 1.0) / n, 2.0 * std::ceil(std::log2(n))};
    return {2.0 * (n - 1.0) / n, 2.0 * (n - 1.0)};
  }
  SCALEDL_CHECK(form == CommForm::Ring, "the tree form is an all-reduce form; {} has the ring form only",
                collective);
  if (collective == "allgather" || collective == "reducescatter") return {(n - 1.0) / n, n - 1.0};
  if (collective == "sendrecv") return {1.0, 1.0};
  fail("collective={} is not allreduce, allgather, reducescatter or sendrecv", collective);
}

CommFit fit_comm(const std::vector<AllReduceSample>& samples, const std::string& collective, CommForm form) {
  const std::string& what = collective;
  SCALEDL_CHECK(samples.size() >= 2, "{} samples: need at least 2 (size, time) samples, got {}", what,
                samples.size());
  // Weighted normal equations with weights 1/T^2 (relative residuals).
  double saa = 0, sac = 0, scc = 0, sat = 0, sct = 0;
  std::vector<CommFactors> f(samples.size());
  for (size_t k = 0; k < samples.size(); ++k) {
    const auto& s = samples[k];
    SCALEDL_CHECK(std::isfinite(s.bytes) && s.bytes > 0, "{} sample[{}].bytes={} must be > 0", what, k,
                  s.bytes);
    SCALEDL_CHECK(s.devices >= 2, "{} sample[{}].devices={} must be >= 2", what, k, s.devices);
    SCALEDL_CHECK(std::isfinite(s.seconds) && s.seconds > 0, "{} sample[{}].seconds={} must be > 0", what, k,
                  s.seconds);
    f[k] = comm_factors(collective, form, s.devices);
    const double a = f[k].a * s.bytes, c = f[k].c;
    const double w = 1.0 / (s.seconds * s.seconds);
    saa += w * a * a;
    sac += w * a * c;
    scc += w * c * c;
    sat += w * a * s.seconds;
    sct += w * c * s.seconds;
  }
  const double det = saa * scc - sac * sac;
  double u = NAN, gamma = 0;
  if (det > 1e-12 * saa * scc) {
    u = (sat * scc - sac * sct) / det;
    gamma = (saa * sct - sac * sat) / det;
  }
  if (!(gamma >= 0) || !std::isfinite(u)) {  // constrained fit: gamma = 0
    gamma = 0;
    u = sat / saa;
  }
  SCALEDL_CHECK(std::isfinite(u) && u > 0,
                "{} samples do not determine the bandwidth (fitted 1/B={}); measure at least two "
                "message sizes",
                what, u);
  CommFit r;
  r.model = CommModel{1.0 / u, gamma};
  r.samples = samples.size();
  for (size_t k = 0; k < samples.size(); ++k) {
    const double t = f[k].a * samples[k].bytes * u + f[k].c * gamma;
    const double rel = std::fabs(t - samples[k].seconds) / samples[k].seconds;
    r.mre += rel;
    r.max_rel = std::max(r.max_rel, rel);
  }
  r.mre /= static_cast<double>(samples.size());
  return r;
}

CommModel fit_comm_model(const std::vector<AllReduceSample>& samples) {
  CommModel m = fit_comm(samples, "allreduce", CommForm::Ring).model;
  check_comm_plausible(m, fmt::format("all-reduce fit of {} samples", samples.size()));
  return m;
}

double gradient_bytes(double params, int bytes_per_element) {
  SCALEDL_CHECK(params >= 0 && std::isfinite(params), "params={} must be finite and >= 0", params);
  SCALEDL_CHECK(bytes_per_element > 0, "bytes_per_element={} must be > 0", bytes_per_element);
  return params * bytes_per_element;
}

CommModel load_comm_model(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (j.is_object() && j.contains("allreduce")) {
    SCALEDL_CHECK(j["allreduce"].is_array(), "{}: allreduce must be an array of {{bytes, devices, seconds}}",
                  path);
    std::vector<AllReduceSample> s;
    int64_t nodes = 0;
    bool all_say_nodes = true;
    for (size_t i = 0; i < j["allreduce"].size(); ++i) {
      const auto& r = j["allreduce"][i];
      const std::string ctx = fmt::format("{}: allreduce[{}]", path, i);
      s.push_back({get_num_or(r, "bytes", ctx, 0, 1e18, NAN), get_int(r, "devices", ctx, 2, 1 << 20),
                   get_num_or(r, "seconds", ctx, 0, 1e6, NAN)});
      if (r.is_object() && r.contains("nodes"))
        nodes = std::max(nodes, get_int(r, "nodes", ctx, 1, s.back().devices));
      else
        all_say_nodes = false;
    }
    CommModel m;
    try {
      m = fit_comm_model(s);
    } catch (const Error& e) {
      fail("{}: {}", path, e.what());
    }
    // Measured on one node only if every sample says so; a file-level "nodes" wins.
    m.nodes = j.contains("nodes") ? get_int(j, "nodes", path, 1, 1 << 20) : (all_say_nodes ? nodes : 0);
    return m;
  }
  return CommModel::from_json(j, path);
}

}  // namespace scaledl
