#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Communication time of data-parallel training: the ring all-reduce model of
// ScaleDL eq. 15, with its two constants calibrated from a measured all-reduce.
//
//   T_comm = 2(N-1)/N * S/B + 2(N-1) * gamma                      (ScaleDL eq. 15)
//
// Units used throughout: S in BYTES (the paper writes bits; bytes avoid a
// factor 8 everywhere), B in BYTES PER SECOND, gamma and T_comm in SECONDS.
// N = 1 gives T_comm = 0. No LibTorch: the predictor and the CLI use this too.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace scaledl {

/// One timed all-reduce: `bytes` per device reduced over `devices` ranks.
struct AllReduceSample {
  double bytes = 0;     ///< message size per device S, bytes, > 0
  int64_t devices = 2;  ///< ranks N, >= 2 (N = 1 carries no information)
  double seconds = 0;   ///< measured wall time, seconds, > 0
};

/// Fitted constants of eq. 15.
struct CommModel {
  double bandwidth_Bps = 0;  ///< B, bytes/s, > 0 (bus bandwidth of the all-reduce)
  double gamma_s = 0;        ///< per-step latency gamma, seconds, >= 0
  /// Nodes the calibration was measured on (its record: "nodes", or "source.nodes"
  /// of `comm fit --out`; the largest "nodes" of its samples); 0 = not recorded.
  int64_t nodes = 0;

  /// T_comm of eq. 15, seconds, for S = `bytes` and N = `devices` (>= 1).
  double time_s(double bytes, int64_t devices) const;
  /// {"bandwidth_Bps", "gamma_s"} (+ "nodes" when recorded).
  nlohmann::json to_json() const;
  /// Reads {"bandwidth_Bps":..,"gamma_s":..[,"nodes":..]} (or "source": {"nodes"}
  /// as `comm fit --out` writes); throws naming ctx and the key; the constants
  /// must be plausible (check_comm_plausible's bounds).
  static CommModel from_json(const nlohmann::json& j, const std::string& ctx = "comm");
};

/// Plausibility bounds of a collective model (docs/hardening.md, case 12 of
/// issue #16 and case 9 of #39): B in [1 kB/s, 100 TB/s], gamma in [0, 1] s.
/// Anything outside is a unit slip or absurd samples, not a network.
constexpr double kCommMinBandwidthBps = 1e3;
constexpr double kCommMaxBandwidthBps = 1e14;
constexpr double kCommMaxGammaS = 1.0;

/// Throws Error("<ctx>: bandwidth_Bps=... is outside ...") or ("<ctx>: gamma_s=...")
/// when a fitted or loaded model lies outside the bounds above.
void check_comm_plausible(const CommModel& m, const std::string& ctx);

/// Issue #39 case 27: the warning (one line, no prefix) when a collective model
/// measured on one node (m.nodes == 1), or one that does not record its nodes
/// (m.nodes == 0), prices collectives across `nodes` > 1 nodes, naming the
/// calibration's nodes and bandwidth and the nodes asked; "" otherwise.
std::string cross_node_comm_warning(const CommModel& m, int64_t nodes);

/// Least-squares fit of (1/B, gamma) to measured all-reduce samples.
/// Eq. 15 is linear in u = 1/B and gamma with regressors a = 2(N-1)/N * S and
/// c = 2(N-1), so the fit solves the 2x2 normal equations of
/// min sum_k ((a_k u + c_k gamma - T_k) / T_k)^2   (relative residuals, so
/// small and large messages weigh the same). The constraint gamma >= 0 is
/// enforced by refitting u alone when the free fit gives gamma < 0.
/// Throws when there are fewer than 2 samples, a sample is invalid (names its
/// index and field), the data do not determine B (e.g. one message size), or
/// the fitted constants are implausible (check_comm_plausible).
CommModel fit_comm_model(const std::vector<AllReduceSample>& samples);

/// Closed forms of one collective over N ranks, linear in 1/B and gamma:
///   T = a(N) * S/B + c(N) * gamma
/// with S = nccl-tests' "size" in bytes (collectives.hpp), so that B is
/// nccl-tests' bus bandwidth at large S:
///   allreduce, ring  a = 2(N-1)/N  c = 2(N-1)          (ScaleDL eq. 15)
///   allreduce, tree  a = 2(N-1)/N  c = 2 ceil(log2 N)  (double binary tree: a
///                    latency term per level, bandwidth as the ring's)
///   allgather / reducescatter, ring  a = (N-1)/N  c = N-1
///   sendrecv         a = 1         c = 1                (form ignored)
enum class CommForm { Ring, Tree };
const char* to_string(CommForm f);

struct CommFactors {
  double a = 0;  ///< multiplies S/B, dimensionless
  double c = 0;  ///< multiplies gamma, steps
};
/// Throws naming `collective` when it is not allreduce, allgather, reducescatter
/// or sendrecv, or when the tree form is asked of anything but allreduce.
CommFactors comm_factors(const std::string& collective, CommForm form, int64_t devices);

/// A fitted closed form and how well it reproduces the samples it was fitted on.
struct CommFit {
  CommModel model;     ///< B (bus bandwidth, bytes/s) and gamma (s)
  double mre = 0;      ///< mean |relative residual| (T_model - T) / T, dimensionless
  double max_rel = 0;  ///< largest |relative residual|, dimensionless
  size_t samples = 0;
};

/// fit_comm_model generalised: the same weighted least squares (relative
/// residuals, gamma >= 0) for any collective and form of comm_factors().
/// AllReduceSample::devices is then the ranks of that collective. Error
/// messages name `collective` and the sample's index. The constants are NOT
/// checked for plausibility here: callers do (check_comm_plausible), naming
/// what the samples came from.
CommFit fit_comm(const std::vector<AllReduceSample>& samples, const std::string& collective = "allreduce",
                 CommForm form = CommForm::Ring);

/// Reads a calibration file: either the fitted constants {"bandwidth_Bps", "gamma_s"}
/// (other keys are ignored: the output of `scaledl comm fit --out` loads) or
/// measured samples {"allreduce": [{"bytes", "devices", "seconds"[, "nodes"]}, ...]}
/// that are fitted with fit_comm_model. Throws naming the file and the key, or
/// the file and the fitted value when the fit is implausible.
CommModel load_comm_model(const std::string& path);

/// Gradient bytes S of one all-reduce: parameters x bytes per element.
double gradient_bytes(double params, int bytes_per_element);

}  // namespace scaledl
