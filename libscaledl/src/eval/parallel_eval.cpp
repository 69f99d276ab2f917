// `scaledl eval parallel` (parallel_eval.hpp, docs/parallel.md).
#include "scaledl/eval/parallel_eval.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include <fmt/ranges.h>
#include <Eigen/Dense>

#include "scaledl/comm/comm.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/parallel.hpp"
#include "scaledl/predict/physics.hpp"
#include "scaledl/predict/predict_api.hpp"

namespace scaledl {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, ',');) out.push_back(trim(f));
  return out;
}

/// Megatron pads the vocabulary to a multiple of 128 x tp.
int64_t padded_vocab(int64_t v, int64_t tp) {
  const int64_t m = 128 * tp;
  return (v + m - 1) / m * m;
}

struct Scored {
  double compute_ms = 0, comm_ms = 0, raw_ms = 0;
  std::vector<double> z;  ///< features of the learned correction
  /// ScaleDL's T = alpha x compute + beta x communication.
  double alpha_beta_ms(double alpha, double beta) const { return alpha * compute_ms + beta * comm_ms; }
  /// raw x exp(w . z).
  double corrected_ms(const Eigen::VectorXd& w) const {
    return raw_ms * std::exp(Eigen::Map<const Eigen::VectorXd>(z.data(), static_cast<int>(z.size())).dot(w));
  }
};

/// Features of the learned correction log(measured / raw) = w . z: what the
/// layer models cannot see from one isolated layer at a time — the tokens of a
/// micro-batch (GEMM efficiency grows with them, and saturates: hence the
/// second-order terms), the split degrees, the model's width and depth, the
/// number of micro-batches, the bubble and the share of communication.
std::vector<double> correction_features(const ParallelRun& r, const ParallelPrediction& p, double compute,
                                        double comm) {
  const double tok = std::log(static_cast<double>(r.micro_batch * r.seq));
  const double ltp = std::log(static_cast<double>(r.tp));
  const double lh = std::log(static_cast<double>(r.hidden));
  const double micro = static_cast<double>(r.global_batch) / static_cast<double>(r.dp * r.micro_batch);
  return {1.0,
          tok,
          ltp,
          std::log(static_cast<double>(r.pp)),
          std::log(static_cast<double>(r.dp)),
          lh,
          std::log(static_cast<double>(r.layers)),
          p.plan.bubble_fraction,
          comm / std::max(1e-9, compute + comm),
          tok * ltp,
          tok * tok,
          lh * lh,
          tok * lh,
          lh * ltp,
          ltp * ltp,
          std::log(std::max(1.0, micro))};
}

/// Ridge least squares of log(y / raw) on z over `idx` (lambda 1e-3, intercept included).
Eigen::VectorXd fit_correction(const std::vector<Scored>& s, const std::vector<double>& y,
                               const std::vector<size_t>& idx) {
  const int k = static_cast<int>(s.front().z.size());
  Eigen::MatrixXd A(static_cast<int>(idx.size()), k);
  Eigen::VectorXd t(static_cast<int>(idx.size()));
  for (size_t r = 0; r < idx.size(); ++r) {
    for (int c = 0; c < k; ++c) A(static_cast<int>(r), c) = s[idx[r]].z[static_cast<size_t>(c)];
    t(static_cast<int>(r)) = std::log(y[idx[r]] / s[idx[r]].raw_ms);
  }
  Eigen::MatrixXd G = A.transpose() * A + 1e-3 * Eigen::MatrixXd::Identity(k, k);
  return G.ldlt().solve(A.transpose() * t);
}

/// (alpha, beta) >= 0 minimising sum ((alpha c + beta k - y) / y)^2.
std::pair<double, double> fit_ab(const std::vector<Scored>& s, const std::vector<double>& y,
                                 const std::vector<size_t>& idx) {
  double scc = 0, skk = 0, sck = 0, scy = 0, sky = 0;
  for (size_t i : idx) {
    const double c = s[i].compute_ms / y[i], k = s[i].comm_ms / y[i];
    scc += c * c;
    skk += k * k;
    sck += c * k;
    scy += c;
    sky += k;
  }
  const double det = scc * skk - sck * sck;
  double a = 1, b = 1;
  if (det > 1e-12 * std::max(1.0, scc * skk)) {
    a = (scy * skk - sky * sck) / det;
    b = (sky * scc - scy * sck) / det;
  }
  if (!(det > 1e-12 * std::max(1.0, scc * skk)) || b < 0) {  // no communication to fit, or a negative factor
    b = skk > 0 ? std::max(0.0, b) : 1.0;
    a = scc > 0 ? (scy - b * sck) / scc : 1.0;
  }
  return {std::max(a, 0.0), b};
}

/// The host's cost per graph node d, ms, fitted on the runs `idx` (physics.hpp,
/// fit_host_node_ms: slots x max(GPU slot, nodes x d) + the rest); 0 when none beats no term.
double fit_host(const std::vector<ParallelPrediction>& p, const std::vector<double>& y,
                const std::vector<size_t>& idx, const std::string& device) {
  std::vector<HostRun> hr;
  for (size_t i : idx) hr.push_back(p[i].host_run(device, y[i]));
  const auto d = fit_host_node_ms(hr);
  return d.count(device) ? d.at(device) : 0.0;
}

/// Every run's prediction (predict_parallel with bundle `b` on `dev`, collectives `comm`),
/// its scored parts and its measured time.
struct ScoredRuns {
  std::vector<Scored> sc;
  std::vector<double> y;  ///< measured ms
  std::vector<ParallelPrediction> preds;
};

/// One run as predict --gpus takes it: vTrain's GPT as a GPT-2 config (its vocabulary padded
/// for tp), one replica's batch, the split.
struct RunJob {
  ModelSpec m;
  TrainSettings s;
  ParallelConfig c;
};

RunJob job_of(const ParallelRun& r) {
  const nlohmann::json cfg = {{"model_type", "gpt2"},
                              {"n_embd", r.hidden},
                              {"n_layer", r.layers},
                              {"n_head", r.heads},
                              {"vocab_size", padded_vocab(r.vocab, r.tp)},
                              {"n_positions", std::max<int64_t>(r.seq, 1024)}};
  RunJob j;
  j.m = parse_model_config(cfg, r.label);
  j.m.name = r.label;
  j.s.batch = r.global_batch / r.dp;
  j.s.seq_len = r.seq;
  j.s.dtype = r.dtype;
  // Megatron-LM's `--optimizer adam` is apex's (or Transformer Engine's) FusedAdam with
  // adam_w_mode=True, its default: Adam with decoupled weight decay, i.e. AdamW. (Until 2026-11-30
  // this said Adam, which the refinement has never seen: every run was out of its domain.)
  j.s.optimizer = OptimizerKind::AdamW;
  j.s.fused_kernels = true;    // Megatron-LM: fused scale-mask-softmax and bias-GELU, the eager core
  j.s.fused_optimizer = true;  // and its FusedAdam step
  j.s.rotary_kernels = true;   // and its fused RoPE (GPT's learnt positions: no node)
  j.c.gpus = r.gpus;
  j.c.tp = r.tp;
  j.c.pp = r.pp;
  j.c.microbatches = j.s.batch / r.micro_batch;
  j.c.recompute = r.recompute;
  return j;
}

ScoredRuns score_runs(const std::vector<ParallelRun>& rs, const Bundle& b, const DeviceRecord& dev,
                      const CommModel& comm) {
  ScoredRuns out;
  out.sc.assign(rs.size(), Scored{});
  out.y.assign(rs.size(), 0);
  out.preds.assign(rs.size(), ParallelPrediction{});
  for (size_t i = 0; i < rs.size(); ++i) {
    const ParallelRun& r = rs[i];
    const auto [m, s, c] = job_of(r);
    out.preds[i] = predict_parallel(b, m, s, c, dev, comm, comm);
    const ParallelPrediction& p = out.preds[i];
    Scored& sc = out.sc[i];
    const double slots = static_cast<double>(c.microbatches + c.pp - 1);
    sc.compute_ms = slots * (p.t_fwd_ms + p.t_bwd_ms + p.t_recompute_ms) + p.t_opt_ms;
    sc.comm_ms = slots * (p.t_tp_ms + p.t_p2p_ms) + p.t_dp_ms;
    sc.raw_ms = p.t_iter_ms;
    sc.z = correction_features(r, p, sc.compute_ms, sc.comm_ms);
    out.y[i] = r.measured_ms;
  }
  return out;
}

double ape(double pred, double meas) {
  return 100.0 * std::fabs(pred - meas) / meas;
}

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

/// {key: {"mre": mean, "sd": sample sd}} of per-seed MREs.
nlohmann::json summarize(const std::map<std::string, std::vector<double>>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    j[k] = {{"mre", mean}, {"sd", v.size() > 1 ? std::sqrt(var / (v.size() - 1)) : 0.0}};
  }
  return j;
}

/// The uncalibrated composition's MRE and bias per scheme ("all" included), and the counts.
struct RawErrors {
  std::map<std::string, std::vector<size_t>> by_scheme;  ///< scheme or "all" -> runs
  nlohmann::json raw = nlohmann::json::object(), raw_bias = nlohmann::json::object(),
                 counts = nlohmann::json::object();
};

RawErrors raw_errors(const std::vector<ParallelRun>& runs, const ScoredRuns& s) {
  RawErrors out;
  for (size_t i = 0; i < runs.size(); ++i) {
    out.by_scheme[runs[i].scheme()].push_back(i);
    out.by_scheme["all"].push_back(i);
  }
  for (const auto& [k, idx] : out.by_scheme) {
    double e = 0, bias = 0;
    for (size_t i : idx) {
      e += ape(s.sc[i].raw_ms, s.y[i]);
      bias += 100.0 * (s.sc[i].raw_ms - s.y[i]) / s.y[i];
    }
    out.raw[k] = e / idx.size();
    out.raw_bias[k] = bias / idx.size();
    out.counts[k] = idx.size();
  }
  return out;
}

/// Calibrated on a random half, scored on the other: per seed the MRE per scheme of
/// alpha-beta, the correction and the host term, and their fits; per run the mean of
/// its corrected and host-term predictions over the seeds that tested it.
struct HalvesScores {
  std::map<std::string, std::vector<double>> cal, corr, host;
  std::vector<double> alphas, betas, host_d;
  std::vector<double> cal_pred_sum, host_pred_sum;
  std::vector<int> cal_pred_n;
};

HalvesScores score_halves(const std::vector<ParallelRun>& runs, const ScoredRuns& s,
                          const std::string& device, int seeds) {
  const std::vector<Scored>& sc = s.sc;
  const std::vector<double>& y = s.y;
  HalvesScores h;
  h.cal_pred_sum.assign(runs.size(), 0);
  h.host_pred_sum.assign(runs.size(), 0);
  h.cal_pred_n.assign(runs.size(), 0);
  for (int seed = 0; seed < seeds; ++seed) {
    std::vector<size_t> order(runs.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    std::shuffle(order.begin(), order.end(), rng);
    const size_t half = order.size() / 2;
    std::vector<size_t> train(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(half));
    std::vector<bool> is_test(runs.size(), false);
    for (size_t j = half; j < order.size(); ++j) is_test[order[j]] = true;
    if (train.empty()) train = order;
    const auto [a, bt] = fit_ab(sc, y, train);
    h.alphas.push_back(a);
    h.betas.push_back(bt);
    const Eigen::VectorXd w = fit_correction(sc, y, train);
    const double d = fit_host(s.preds, y, train, device);
    h.host_d.push_back(d);
    std::map<std::string, std::pair<double, int>> acc, acc2, acc3;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!is_test[i]) continue;
      const double pr = sc[i].alpha_beta_ms(a, bt);
      const double pc = sc[i].corrected_ms(w);
      const double ph = s.preds[i].iter_ms(d);
      h.cal_pred_sum[i] += pc;
      h.host_pred_sum[i] += ph;
      ++h.cal_pred_n[i];
      for (const std::string& k : {runs[i].scheme(), std::string("all")}) {
        acc[k].first += ape(pr, y[i]);
        ++acc[k].second;
        acc2[k].first += ape(pc, y[i]);
        ++acc2[k].second;
        acc3[k].first += ape(ph, y[i]);
        ++acc3[k].second;
      }
    }
    for (const auto& [k, v] : acc) h.cal[k].push_back(v.first / v.second);
    for (const auto& [k, v] : acc2) h.corr[k].push_back(v.first / v.second);
    for (const auto& [k, v] : acc3) h.host[k].push_back(v.first / v.second);
  }
  return h;
}

/// Extrapolation: fitted on one part of the runs, scored on a part it has not
/// seen — a smaller node predicting the full one, one width predicting the other.
nlohmann::json extrapolation(const std::vector<ParallelRun>& runs, const ScoredRuns& s,
                             const std::string& device) {
  const std::vector<Scored>& sc = s.sc;
  const std::vector<double>& y = s.y;
  nlohmann::json extrap = nlohmann::json::array();
  const int64_t max_gpus = std::max_element(runs.begin(), runs.end(), [](const auto& a, const auto& b2) {
                             return a.gpus < b2.gpus;
                           })->gpus;
  std::set<int64_t> widths;
  for (const auto& r : runs) widths.insert(r.hidden);
  std::vector<std::pair<std::string, std::function<bool(const ParallelRun&)>>> splits;
  if (max_gpus > 1)
    splits.emplace_back(fmt::format("fit on < {} GPUs, test on {}", max_gpus, max_gpus),
                        [max_gpus](const ParallelRun& r) { return r.gpus < max_gpus; });
  if (widths.size() > 1)
    for (int64_t h : widths) {
      std::vector<int64_t> rest;
      for (int64_t o : widths)
        if (o != h) rest.push_back(o);
      splits.emplace_back(fmt::format("fit on hidden {}, test on hidden {}", h, fmt::join(rest, "/")),
                          [h](const ParallelRun& r) { return r.hidden == h; });
    }
  for (const auto& [name, in_fit] : splits) {
    std::vector<size_t> fit, test;
    for (size_t i = 0; i < runs.size(); ++i) (in_fit(runs[i]) ? fit : test).push_back(i);
    if (fit.size() < sc.front().z.size() || test.empty()) continue;
    const auto [a, bt] = fit_ab(sc, y, fit);
    const Eigen::VectorXd w = fit_correction(sc, y, fit);
    const double d = fit_host(s.preds, y, fit, device);
    double er = 0, eab = 0, ec = 0, eh = 0;
    for (size_t i : test) {
      er += ape(sc[i].raw_ms, y[i]);
      eab += ape(sc[i].alpha_beta_ms(a, bt), y[i]);
      ec += ape(sc[i].corrected_ms(w), y[i]);
      eh += ape(s.preds[i].iter_ms(d), y[i]);
    }
    const double n = static_cast<double>(test.size());
    extrap.push_back({{"split", name},
                      {"fit_runs", fit.size()},
                      {"test_runs", test.size()},
                      {"raw_mre", er / n},
                      {"calibrated_mre", eab / n},
                      {"corrected_mre", ec / n},
                      {"host_mre", eh / n},
                      {"host_node_ms", d}});
  }
  return extrap;
}

/// The runs of another source (`scored`) predicted with the factors fitted on all of
/// --runs (`s`): rep["test_runs"] and rep["test_runs_host_node_ms"].
void score_test_runs(const std::vector<ParallelRun>& runs, const ScoredRuns& s,
                     const std::vector<ParallelRun>& test_runs, const ScoredRuns& t,
                     const std::string& device, nlohmann::json& rep) {
  std::vector<size_t> all(runs.size());
  std::iota(all.begin(), all.end(), 0);
  const auto [a, bt] = fit_ab(s.sc, s.y, all);
  const Eigen::VectorXd w = fit_correction(s.sc, s.y, all);
  const double d = fit_host(s.preds, s.y, all, device);
  nlohmann::json arr = nlohmann::json::array();
  for (size_t i = 0; i < t.sc.size(); ++i) {
    const double ab = t.sc[i].alpha_beta_ms(a, bt), cor = t.sc[i].corrected_ms(w), ho = t.preds[i].iter_ms(d);
    arr.push_back({{"label", test_runs[i].label},
                   {"scheme", test_runs[i].scheme()},
                   {"measured_ms", t.y[i]},
                   {"raw_ms", t.sc[i].raw_ms},
                   {"raw_ape", ape(t.sc[i].raw_ms, t.y[i])},
                   {"alpha_beta_ms", ab},
                   {"alpha_beta_ape", ape(ab, t.y[i])},
                   {"corrected_ms", cor},
                   {"corrected_ape", ape(cor, t.y[i])},
                   {"host_ms", ho},
                   {"host_ape", ape(ho, t.y[i])},
                   {"prediction", t.preds[i].to_json()}});
  }
  rep["test_runs"] = arr;
  rep["test_runs_host_node_ms"] = d;
}

/// predictions.csv: every run of --runs, its parts and its mean corrected and host-term
/// predictions over the seeds that tested it.
std::string predictions_csv(const std::vector<ParallelRun>& runs, const ScoredRuns& s,
                            const HalvesScores& h) {
  std::ostringstream csv;
  csv << "label,gpus,tp,dp,pp,global_batch,micro_batch,seq,dtype,recompute,measured_ms,raw_ms,compute_ms,"
         "comm_ms,"
         "corrected_ms,host_term_ms,t_fwd_ms,t_bwd_ms,t_recompute_ms,t_tp_ms,t_p2p_ms,t_dp_ms,t_opt_ms,"
         "bubble_fraction,"
         "slot_nodes\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const auto& p = s.preds[i];
    csv << fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{},{},{:.3f},{:.3f},{:.3f},{:.3f},"
        "{:.3f},{:.3f},{:.3f},{:.4f},{:.0f}\n",
        r.label, r.gpus, r.tp, r.dp, r.pp, r.global_batch, r.micro_batch, r.seq, to_string(r.dtype),
        r.recompute ? 1 : 0, r.measured_ms, s.sc[i].raw_ms, s.sc[i].compute_ms, s.sc[i].comm_ms,
        h.cal_pred_n[i] ? fmt::format("{:.3f}", h.cal_pred_sum[i] / h.cal_pred_n[i]) : std::string(""),
        h.cal_pred_n[i] ? fmt::format("{:.3f}", h.host_pred_sum[i] / h.cal_pred_n[i]) : std::string(""),
        p.t_fwd_ms, p.t_bwd_ms, p.t_recompute_ms, p.t_tp_ms, p.t_p2p_ms, p.t_dp_ms, p.t_opt_ms,
        p.plan.bubble_fraction, p.slot_nodes);
  }
  return csv.str();
}

/// report.md's "Extrapolation" and "Other runs" tables (rep's "extrapolation", "test_runs").
std::string extra_tables_md(const nlohmann::json& rep) {
  std::ostringstream md;
  const nlohmann::json& extrap = rep["extrapolation"];
  if (!extrap.empty()) {
    md << "\nExtrapolation: alpha, beta, the correction and d fitted on one part of the runs, scored on "
          "the rest:\n\n"
          "| split | fit runs | test runs | raw MRE % | calibrated MRE % | corrected MRE % | host term MRE "
          "% (d, us) |\n"
          "|---|---|---|---|---|---|---|\n";
    for (const auto& e : extrap)
      md << fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} ({:.1f}) |\n",
                        e["split"].get<std::string>(), e["fit_runs"].get<size_t>(),
                        e["test_runs"].get<size_t>(), e["raw_mre"].get<double>(),
                        e["calibrated_mre"].get<double>(), e["corrected_mre"].get<double>(),
                        e["host_mre"].get<double>(), 1e3 * e["host_node_ms"].get<double>());
  }
  if (rep.contains("test_runs")) {
    md << fmt::format(
        "\nOther runs, with alpha, beta, the correction and d ({:.1f} us) fitted on all of the runs "
        "above:\n\n"
        "| run | measured ms | raw ms (APE %) | alpha-beta ms (APE %) | corrected ms (APE %) | host term "
        "ms (APE %) |\n"
        "|---|---|---|---|---|---|\n",
        1e3 * rep["test_runs_host_node_ms"].get<double>());
    for (const auto& t : rep["test_runs"])
      md << fmt::format(
          "| {} | {:.1f} | {:.1f} ({:.1f}) | {:.1f} ({:.1f}) | {:.1f} ({:.1f}) | {:.1f} ({:.1f}) |\n",
          t["label"].get<std::string>(), t["measured_ms"].get<double>(), t["raw_ms"].get<double>(),
          t["raw_ape"].get<double>(), t["alpha_beta_ms"].get<double>(), t["alpha_beta_ape"].get<double>(),
          t["corrected_ms"].get<double>(), t["corrected_ape"].get<double>(), t["host_ms"].get<double>(),
          t["host_ape"].get<double>());
  }
  return md.str();
}

/// report.md: what each figure is, the table per scheme, then extra_tables_md.
std::string report_md(const std::vector<ParallelRun>& runs, const ParallelEvalOptions& o,
                      const RawErrors& raw, const HalvesScores& h, const nlohmann::json& rep,
                      const CommModel& comm) {
  std::ostringstream md;
  md << fmt::format(
      "# Parallel composition vs measured iterations\n\n{} runs on {}; collective model B = {:.1f} GB/s, "
      "gamma = {:.2f} us. raw: `predict --gpus` as it is; calibrated: T = alpha x compute + beta x "
      "communication fitted on a random half, scored on the other half ({} seeds; alpha {:.3f}, beta "
      "{:.3f}); corrected: raw x exp(w . z), a ridge fit of log(measured / raw) on the micro-batch "
      "tokens, tp, pp, dp, width, depth, micro-batch count, bubble and communication share (with "
      "second-order terms of "
      "tokens, width and tp), on the same halves; host term: each slot the sum over its host phases "
      "(forward, then backward) of max(their GPU time, their nodes x d), the host's cost per graph node d "
      "fitted on the same halves (mean d {:.1f} us; `predict "
      "--host-node-us`).\n\n"
      "| scheme | runs | raw MRE % (bias %) | calibrated MRE % (sd) | corrected MRE % (sd) | host term MRE "
      "% (sd) |\n"
      "|---|---|---|---|---|---|\n",
      runs.size(), rep["device"].get<std::string>(), comm.bandwidth_Bps / 1e9, comm.gamma_s * 1e6, o.seeds,
      mean_of(h.alphas), mean_of(h.betas), 1e3 * mean_of(h.host_d));
  auto cell = [](const nlohmann::json& j, const std::string& k) {
    return j.contains(k) ? fmt::format("{:.1f} ({:.1f})", j[k]["mre"].get<double>(), j[k]["sd"].get<double>())
                         : std::string("–");
  };
  for (const auto& [k, idx] : raw.by_scheme)
    md << fmt::format("| {} | {} | {:.1f} ({:+.1f}) | {} | {} | {} |\n", k, idx.size(),
                      raw.raw[k].get<double>(), raw.raw_bias[k].get<double>(), cell(rep["calibrated_mre"], k),
                      cell(rep["corrected_mre"], k), cell(rep["host_mre"], k));
  return md.str() + extra_tables_md(rep);
}

}  // namespace

std::string ParallelRun::scheme() const {
  std::string s;
  for (auto [n, name] : {std::pair{tp, "tp"}, {dp, "dp"}, {pp, "pp"}})
    if (n > 1) s += (s.empty() ? "" : "+") + std::string(name);
  return s.empty() ? "single" : s;
}

std::vector<ParallelRun> load_parallel_runs(const std::string& path) {
  std::ifstream f(path);
  SCALEDL_CHECK(f.good(), "--runs={}: cannot read the file", path);
  std::string line;
  int ln = 0;
  std::vector<std::string> extra;  // optional columns after the 11 of vTrain
  std::vector<ParallelRun> out;
  bool header = false;
  while (std::getline(f, line)) {
    ++ln;
    if (trim(line).empty()) continue;
    if (!header) {
      auto h = split(line);
      SCALEDL_CHECK(
          h.size() >= 11 && h[0].find("GPUs") != std::string::npos,
          "{}:{}: expected vTrain's header (# GPUs, global batch, ..., iteration time (ms)), got \"{}\"",
          path, ln, line.substr(0, 80));
      extra.assign(h.begin() + 11, h.end());
      for (const auto& c : extra)
        SCALEDL_CHECK(c == "dtype" || c == "recompute" || c == "vocab" || c == "label",
                      "{}:{}: unknown column \"{}\" (optional: dtype, recompute, vocab, label)", path, ln, c);
      header = true;
      continue;
    }
    auto v = split(line);
    SCALEDL_CHECK(v.size() == 11 + extra.size(), "{}:{}: {} fields, expected {}", path, ln, v.size(),
                  11 + extra.size());
    static const char* names[] = {
        "# GPUs",   "global batch",    "micro batch",        "hidden size",      "attention heads",
        "# layers", "sequence length", "tensor parallelism", "data parallelism", "pipeline parallelism"};
    int64_t x[10];
    for (int i = 0; i < 10; ++i) {
      size_t pos = 0;
      long long n = -1;
      try {
        n = std::stoll(v[i], &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      SCALEDL_CHECK(pos == v[i].size() && n >= 1 && n <= (1LL << 30),
                    "{}:{}: {}=\"{}\" is not a positive integer", path, ln, names[i], v[i]);
      x[i] = n;
    }
    ParallelRun r;
    r.gpus = x[0], r.global_batch = x[1], r.micro_batch = x[2], r.hidden = x[3], r.heads = x[4],
    r.layers = x[5];
    r.seq = x[6], r.tp = x[7], r.dp = x[8], r.pp = x[9];
    double ms = NAN;
    try {
      ms = std::stod(v[10]);
    } catch (const std::exception&) {
    }
    SCALEDL_CHECK(std::isfinite(ms) && ms > 0, "{}:{}: iteration time (ms)=\"{}\" is not a positive number",
                  path, ln, v[10]);
    r.measured_ms = ms;
    SCALEDL_CHECK(r.gpus == r.tp * r.dp * r.pp, "{}:{}: # GPUs={} is not tp x dp x pp = {} x {} x {}", path,
                  ln, r.gpus, r.tp, r.dp, r.pp);
    SCALEDL_CHECK(r.global_batch % (r.micro_batch * r.dp) == 0,
                  "{}:{}: global batch={} is not a multiple of micro batch x dp = {} x {}", path, ln,
                  r.global_batch, r.micro_batch, r.dp);
    for (size_t i = 0; i < extra.size(); ++i) {
      const std::string& c = extra[i];
      const std::string& val = v[11 + i];
      if (c == "dtype") r.dtype = parse_dtype(val, fmt::format("{}:{}: dtype", path, ln));
      if (c == "recompute") {
        SCALEDL_CHECK(val == "0" || val == "1", "{}:{}: recompute=\"{}\" is not 0 or 1", path, ln, val);
        r.recompute = val == "1";
      }
      if (c == "vocab") {
        SCALEDL_CHECK(
            !val.empty() && val.find_first_not_of("0123456789") == std::string::npos && val.size() < 10,
            "{}:{}: vocab=\"{}\" is not a positive integer", path, ln, val);
        r.vocab = std::stoll(val);
      }
      if (c == "label") r.label = val;
    }
    if (r.label.empty()) r.label = fmt::format("gpt h{} L{}", r.hidden, r.layers);
    out.push_back(r);
  }
  SCALEDL_CHECK(!out.empty(), "{}: no runs", path);
  return out;
}

/// What `predict --gpus` prints for every run (predict_parallel_anchored with `comm` and the
/// bundle's host term for `dev`), ms; one single-GPU anchor per distinct replica.
std::vector<double> shipped_predictions(const std::vector<ParallelRun>& rs, const Bundle& b,
                                        const DeviceRecord& dev, const ClusterComm& comm) {
  std::vector<double> out(rs.size(), 0);
  std::map<std::string, SingleGpuAnchor> anchors;
  for (size_t i = 0; i < rs.size(); ++i) {
    RunJob j = job_of(rs[i]);
    const double host_ms = b.host_node_ms_for(dev, j.s);  // as `predict` takes it
    j.c.host_node_ms = host_ms;
    const std::string key = fmt::format("{}|{}|{}|{}|{}|{}", j.m.name, j.m.vocab_size, j.m.num_layers,
                                        j.s.batch, j.s.seq_len, to_string(j.s.dtype));
    auto it = anchors.find(key);
    if (it == anchors.end()) it = anchors.emplace(key, single_gpu_anchor(b, j.m, j.s, dev, host_ms)).first;
    out[i] = predict_parallel_anchored(b, j.m, j.s, j.c, dev, comm, &it->second).t_iter_ms;
  }
  return out;
}

nlohmann::json eval_parallel(const std::vector<ParallelRun>& runs, const ParallelEvalOptions& o) {
  SCALEDL_CHECK(o.seeds >= 1 && o.seeds <= 1000, "--seeds={} must be in [1, 1000]", o.seeds);
  Bundle b = load_bundle(o.bundle);
  const DeviceRecord dev = load_device_spec(o.device_spec);
  CommModel comm;
  if (!o.comm.empty())
    comm = load_comm_model(o.comm);
  else if (b.comm)
    comm = *b.comm;
  // The shipped path's collectives: --fabric, else the GPU's preset (choose_cluster_comm).
  const ClusterCommChoice shipped_comm = choose_cluster_comm(b, o.fabric, o.device_spec, dev);
  if (!(comm.bandwidth_Bps > 0) && shipped_comm.fabric) comm = shipped_comm.comm.intra;
  SCALEDL_CHECK(
      comm.bandwidth_Bps > 0,
      "no collective calibration: give --comm FILE or --fabric NAME (or a bundle trained with --comm)");
  const ScoredRuns s = score_runs(runs, b, dev, comm);
  const RawErrors raw = raw_errors(runs, s);
  // Calibrated: fit on a random half, score the other half; mean over seeds.
  const HalvesScores h = score_halves(runs, s, dev.key(), o.seeds);
  const nlohmann::json extrap = extrapolation(runs, s, dev.key());
  nlohmann::json rep = {{"runs", runs.size()},
                        {"device", dev.key()},
                        {"comm", comm.to_json()},
                        {"count", raw.counts},
                        {"raw_mre", raw.raw},
                        {"raw_bias", raw.raw_bias},
                        {"calibrated_mre", summarize(h.cal)},
                        {"corrected_mre", summarize(h.corr)},
                        {"host_mre", summarize(h.host)},
                        {"host_node_ms", mean_of(h.host_d)},
                        {"alpha", mean_of(h.alphas)},
                        {"beta", mean_of(h.betas)},
                        {"seeds", o.seeds},
                        {"extrapolation", extrap}};
  if (!o.test_runs.empty())
    score_test_runs(runs, s, o.test_runs, score_runs(o.test_runs, b, dev, comm), dev.key(), rep);
  std::vector<double> shipped;
  if (o.shipped) {
    SCALEDL_CHECK(shipped_comm.comm.intra.bandwidth_Bps > 0,
                  "--shipped: {} has no fabric preset and the bundle no calibration: give --fabric NAME",
                  dev.key());
    // A protocol's own host cost (fitted on other runs) stands for --host-node-us in every prediction.
    if (o.shipped_host_node_ms) b.host_node_ms_given = *o.shipped_host_node_ms;
    shipped = shipped_predictions(runs, b, dev, shipped_comm.comm);
    ScoredRuns as_shipped = s;
    for (size_t i = 0; i < runs.size(); ++i) as_shipped.sc[i].raw_ms = shipped[i];
    const RawErrors e = raw_errors(runs, as_shipped);
    rep["shipped"] = {{"collectives", shipped_comm.source}, {"mre", e.raw}, {"bias", e.raw_bias}};
    if (o.shipped_host_node_ms) rep["shipped"]["host_node_ms"] = *o.shipped_host_node_ms;
    if (!o.test_runs.empty()) {
      const std::vector<double> t = shipped_predictions(o.test_runs, b, dev, shipped_comm.comm);
      rep["shipped"]["test_runs"] = nlohmann::json::array();
      for (size_t i = 0; i < t.size(); ++i)
        rep["shipped"]["test_runs"].push_back({{"label", o.test_runs[i].label},
                                               {"measured_ms", o.test_runs[i].measured_ms},
                                               {"shipped_ms", t[i]},
                                               {"ape", ape(t[i], o.test_runs[i].measured_ms)}});
    }
  }
  if (!o.out.empty()) {
    write_text_file_atomic(o.out + "/predictions.csv", predictions_csv(runs, s, h));
    write_text_file_atomic(o.out + "/report.md", report_md(runs, o, raw, h, rep, comm));
    write_text_file_atomic(o.out + "/report.json", rep.dump(1) + "\n");
    if (!shipped.empty()) {
      std::string csv = "label,scheme,gpus,tp,pp,dp,measured_ms,shipped_ms\n";
      for (size_t i = 0; i < runs.size(); ++i)
        csv += fmt::format("{},{},{},{},{},{},{:.3f},{:.3f}\n", csv_field(runs[i].label), runs[i].scheme(),
                           runs[i].gpus, runs[i].tp, runs[i].pp, runs[i].dp, runs[i].measured_ms, shipped[i]);
      write_text_file_atomic(o.out + "/shipped.csv", csv);
    }
  }
  return rep;
}

}  // namespace scaledl
