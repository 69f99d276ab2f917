// report.md, report.json, predictions.csv and gnuplot plots of an evaluation.
// Plots are drawn by gnuplot (Debian's gnuplot-nox, scaledl/gnuplot.hpp): this
// file writes the data and the plot commands; a missing gnuplot is one clear error.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/gnuplot.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/eval/eval.hpp"

namespace fs = std::filesystem;

namespace scaledl {

namespace {

std::string fmt_pm(const nlohmann::json& row, const char* m, const char* s, int prec = 1) {
  if (!row[m].is_number()) return "–";
  const double sd = row[s].is_number() ? row[s].get<double>() : 0;
  return row["seeds"].get<int64_t>() > 1
             ? fmt::format("{:.{}f} ± {:.{}f}", row[m].get<double>(), prec, sd, prec)
             : fmt::format("{:.{}f}", row[m].get<double>(), prec);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  SCALEDL_CHECK(f.good(), "{}: cannot write", p.string());
  f << text;
  SCALEDL_CHECK(f.good(), "{}: write failed", p.string());
}

/// predictions.csv: one line per prediction (every seed, split, method and test or sweep run).
void write_predictions_csv(const EvalResult& r, const fs::path& dir) {
  std::string csv =
      "seed,split,method,model,family,device,sweep,flops,batch,seq_len,measured_ms,predicted_ms,ape_pct,"
      "lo80_ms,hi80_ms,lo95_ms,hi95_ms,ood_distance,mode,nodes\n";
  auto opt = [](double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string(); };
  for (const auto& p : r.predictions) {
    const EvalRun& run = r.runs[p.run];
    csv += fmt::format(
        "{},{},{},{},{},{},{},{:.6g},{},{},{:.6g},{:.6g},{:.4f},{},{},{},{},{},{},{}\n", p.seed, p.split,
        p.method, csv_quote(run.label), run.family, csv_quote(run.device), run.sweep ? 1 : 0, run.flops,
        run.settings.batch, tokens_per_sample(run.spec, run.settings), run.target_ms, p.pred_ms,
        100 * std::abs(p.pred_ms - run.target_ms) / run.target_ms, opt(p.lo80), opt(p.hi80), opt(p.lo95),
        opt(p.hi95), opt(p.ood_distance), to_string(run_mode(run.settings)), run.graph.num_nodes);
  }
  write_file(dir / "predictions.csv", csv);
}

/// report.md's head: the stores, the error table over all test runs and MRE per family.
std::string summary_md(const nlohmann::json& rep, const std::vector<std::string>& methods) {
  std::set<std::string> families;
  for (const auto& row : rep["summary"])
    if (row["family"] != "all") families.insert(row["family"].get<std::string>());
  std::string md = fmt::format("# scaledl eval: protocol `{}`\n\n", rep["protocol"].get<std::string>());
  md += fmt::format("Training store(s): {}", fmt::join(rep["stores"].get<std::vector<std::string>>(), ", "));
  if (!rep["test_stores"].empty())
    md += fmt::format("; test store(s): {}",
                      fmt::join(rep["test_stores"].get<std::vector<std::string>>(), ", "));
  md += fmt::format(
      ". {} runs, {} layer rows; splits: {}; {} seed(s); labels: status ok, or unstable with iter CV ≤ "
      "{}.\n\n",
      rep["runs"].get<int64_t>(), rep["layer_rows"].get<int64_t>(),
      fmt::join(rep["splits"].get<std::vector<std::string>>(), ", "), rep["seeds"].get<int>(),
      rep["max_cv"].get<double>());
  md += "Errors over the test runs (APE = |predicted − measured| / measured; mean ± sd over seeds).\n\n";
  md += "| method | n | MRE % | RMSE ms | p50 APE % | p90 APE % | bias % |\n|---|---|---|---|---|---|---|\n";
  for (const auto& m : methods)
    for (const auto& row : rep["summary"])
      if (row["method"] == m && row["family"] == "all")
        md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", m, row["n"].get<int64_t>(),
                          fmt_pm(row, "mre_pct", "mre_sd"), fmt_pm(row, "rmse_ms", "rmse_sd", 2),
                          fmt_pm(row, "p50_pct", "p50_sd"), fmt_pm(row, "p90_pct", "p90_sd"),
                          fmt_pm(row, "bias_pct", "bias_sd"));
  md += "\nMRE % per family:\n\n| method |";
  for (const auto& f : families) md += " " + f + " |";
  md += "\n|---|";
  for (size_t i = 0; i < families.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& m : methods) {
    md += "| " + m + " |";
    for (const auto& f : families) {
      std::string cell = " – |";
      for (const auto& row : rep["summary"])
        if (row["method"] == m && row["family"] == f) cell = " " + fmt_pm(row, "mre_pct", "mre_sd") + " |";
      md += cell;
    }
    md += "\n";
  }
  return md;
}

/// report.md's rest: intervals, layer times, the ablations and the wall time.
std::string details_md(const nlohmann::json& rep) {
  std::string md;
  if (rep.contains("intervals")) {
    md +=
        "\nPrediction intervals (split-conformal in log space, widened out of domain; docs/eval.md): share "
        "of "
        "the test runs whose measured T_iter lies inside; factor = median half-width of the 95 % interval "
        "(hi/lo)^(1/2); out of domain = test runs with global features outside the training range.\n\n"
        "| method | n | coverage 80 % | coverage 95 % | factor 95 % | out of domain % "
        "|\n|---|---|---|---|---|---|\n";
    for (const auto& row : rep["intervals"])
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", row["method"].get<std::string>(),
                        row["n"].get<int64_t>(), fmt_pm(row, "coverage80_pct", "coverage80_pct_sd"),
                        fmt_pm(row, "coverage95_pct", "coverage95_pct_sd"),
                        fmt_pm(row, "median_factor95", "median_factor95_sd", 3),
                        fmt_pm(row, "out_of_domain_pct", "out_of_domain_pct_sd"));
  }
  if (rep.contains("layer_times"))
    md += fmt::format(
        "\nLayer times: {}. ScaleDL methods: alpha, beta bound {}, out-of-domain shrinkage tau {}{}.\n",
        rep["layer_times"].get<std::string>(), rep["scaledl_config"]["alpha_bound"].get<double>(),
        rep["scaledl_config"]["ood_tau"].get<double>(),
        rep["scaledl_config"].value("graph_members", 1) > 1
            ? fmt::format("; {} models per graph method and split, combined as a bundle's members",
                          rep["scaledl_config"]["graph_members"].get<int>())
            : std::string());
  if (rep.contains("learning_curve")) {
    md +=
        "\nError vs number of training runs (scaledl-tc, random subsets of the id training split):\n\n"
        "| seed | fraction | training runs | MRE % | p90 APE % |\n|---|---|---|---|---|\n";
    for (const auto& row : rep["learning_curve"])
      md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} |\n", row["seed"].get<int>(),
                        row["fraction"].get<double>(), row["train_runs"].get<int64_t>(),
                        row["stats"]["mre_pct"].get<double>(), row["stats"]["p90_pct"].get<double>());
  }
  if (rep.contains("doptimal_vs_random")) {
    md +=
        "\nD-optimal vs random choice of the training runs at equal budget (scaledl-tc; Fedorov exchange on "
        "the "
        "hyperparameter vector, chosen among the measured id training runs):\n\n"
        "| seed | choice | training runs | MRE % | p90 APE % |\n|---|---|---|---|---|\n";
    for (const auto& row : rep["doptimal_vs_random"])
      md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} |\n", row["seed"].get<int>(),
                        row["choice"].get<std::string>(), row["train_runs"].get<int64_t>(),
                        row["stats"]["mre_pct"].get<double>(), row["stats"]["p90_pct"].get<double>());
  }
  md += fmt::format("\nMethods: see docs/eval.md. Wall time {:.0f} s.\n", rep["seconds"].get<double>());
  return md;
}

/// Predicted vs measured and the CDF of APE: seed 0, scored test runs (not sweep), per method.
void plot_accuracy(const EvalResult& r, const fs::path& dir, const std::vector<std::string>& methods) {
  std::map<std::string, std::vector<std::pair<double, double>>> pts;  // method -> (measured, predicted)
  for (const auto& p : r.predictions)
    if (p.seed == 0 && !r.runs[p.run].sweep) pts[p.method].push_back({r.runs[p.run].target_ms, p.pred_ms});
  std::string dat, plot_pv, plot_cdf;
  std::string cdf;
  int idx = 0;
  for (const auto& m : methods) {
    auto& v = pts[m];
    for (auto& [t, pr] : v) dat += fmt::format("{:.6g} {:.6g}\n", t, pr);
    dat += "\n\n";
    std::vector<double> ape;
    for (auto& [t, pr] : v) ape.push_back(100 * std::abs(pr - t) / t);
    std::sort(ape.begin(), ape.end());
    for (size_t i = 0; i < ape.size(); ++i)
      cdf += fmt::format("{:.6g} {:.6g}\n", std::max(ape[i], 1e-3),
                         static_cast<double>(i + 1) / static_cast<double>(ape.size()));
    cdf += "\n\n";
    plot_pv += fmt::format("{}'pred_vs_measured.dat' index {} using 1:2 with points pt 7 ps 0.5 {} title {}",
                           idx ? ", " : "", idx, gp_colour(idx), gp_quote(m));
    plot_cdf += fmt::format("{}'ape_cdf.dat' index {} using 1:2 with lines lw 2 {} title {}", idx ? ", " : "",
                            idx, gp_colour(idx), gp_quote(m));
    ++idx;
  }
  write_file(dir / "pred_vs_measured.dat", dat);
  write_file(dir / "ape_cdf.dat", cdf);
  const std::string title = r.report["protocol"].get<std::string>();
  run_gnuplot(dir.string(), "pred_vs_measured",
              fmt::format("cd {}\nset title {}\nset logscale xy\nset xlabel 'measured T_iter (ms)'\n"
                          "set ylabel 'predicted T_iter (ms)'\nset key left top\nset grid\n"
                          "plot {}, x with lines lc 'black' dt 2 title 'y = x'\n",
                          gp_quote(dir.string()),
                          gp_quote("predicted vs measured, protocol " + title + ", seed 0"), plot_pv));
  run_gnuplot(
      dir.string(), "ape_cdf",
      fmt::format("cd {}\nset title {}\nset logscale x\nset xlabel 'absolute percentage error (%)'\n"
                  "set ylabel 'fraction of test runs'\nset key right bottom\nset grid\nset yrange [0:1]\n"
                  "plot {}\n",
                  gp_quote(dir.string()), gp_quote("CDF of APE, protocol " + title + ", seed 0"), plot_cdf));
}

/// The split whose models predict the sweep: the first of seed 0 (ood-family: the one
/// holding out its family).
std::string sweep_split(const EvalResult& r) {
  std::string split;
  for (const auto& p : r.predictions)
    if (p.seed == 0 && r.runs[p.run].sweep) {
      if (split.empty()) split = p.split;
      if (p.split == "ood-family:" + r.runs[p.run].family) split = p.split;
    }
  return split;
}

/// The most frequent key of a count.
int64_t most_frequent(const std::map<int64_t, int>& m) {
  return std::max_element(m.begin(), m.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
}

/// Fig. 4: the epoch time of the sweep runs vs batch (at the most frequent sequence
/// length) or vs sequence length (at the most frequent batch), measured and per method.
/// Its report.md image line, or "" when fewer than two sweep runs lie on the curve.
std::string plot_epoch_curve(const EvalResult& r, const fs::path& dir,
                             const std::vector<std::string>& methods, const std::vector<size_t>& sweep,
                             bool vs_batch) {
  std::map<int64_t, int> seq_count, batch_count;
  for (size_t i : sweep) {
    seq_count[tokens_per_sample(r.runs[i].spec, r.runs[i].settings)]++;
    batch_count[r.runs[i].settings.batch]++;
  }
  const int64_t seq0 = most_frequent(seq_count), batch0 = most_frequent(batch_count);
  const std::string split = sweep_split(r);
  constexpr double kSamples = 100000;                      // samples per epoch of the curves
  std::map<std::string, std::map<int64_t, double>> curve;  // method or "measured" -> x -> epoch s
  for (size_t i : sweep) {
    const EvalRun& run = r.runs[i];
    const int64_t seq = tokens_per_sample(run.spec, run.settings);
    if (vs_batch ? seq != seq0 : run.settings.batch != batch0) continue;
    const int64_t x = vs_batch ? run.settings.batch : seq;
    const double iters = std::ceil(kSamples / static_cast<double>(run.settings.batch));
    curve["measured"][x] = iters * run.target_ms / 1000;
    for (const auto& p : r.predictions)
      if (p.seed == 0 && p.run == i && p.split == split) curve[p.method][x] = iters * p.pred_ms / 1000;
  }
  if (curve["measured"].size() < 2) return "";
  std::string d, plot;
  int k = 0;
  std::vector<std::string> order = {"measured"};
  order.insert(order.end(), methods.begin(), methods.end());
  const std::string stem = vs_batch ? "epoch_vs_batch" : "epoch_vs_seq";
  for (const auto& m : order) {
    for (auto& [x, y] : curve[m]) d += fmt::format("{} {:.6g}\n", x, y);
    d += "\n\n";
    plot += fmt::format("{}'{}.dat' index {} using 1:2 with {} title {}", k ? ", " : "", stem, k,
                        m == "measured" ? std::string("linespoints lw 3 pt 7 lc 'black'")
                                        : "linespoints lw 1.5 pt 6 " + gp_colour(k - 1),
                        gp_quote(m));
    ++k;
  }
  write_file(dir / (stem + ".dat"), d);
  const EvalRun& any = r.runs[sweep.front()];
  run_gnuplot(
      dir.string(), stem,
      fmt::format("cd {}\nset title {}\nset logscale xy 2\nset xlabel {}\nset ylabel 'epoch time (s), "
                  "100,000 samples'\nset key outside right\nset grid\nplot {}\n",
                  gp_quote(dir.string()),
                  gp_quote(fmt::format(
                      "{} ({} layers, hidden {}), {}; models of split {}", any.family, any.spec.num_layers,
                      any.spec.hidden,
                      vs_batch ? fmt::format("seq {}", seq0) : fmt::format("batch {}", batch0), split)),
                  gp_quote(vs_batch ? "batch size" : "sequence length (tokens per sample)"), plot));
  return fmt::format("\n![{}]({}.png)\n", stem, stem);
}

/// The plots (gnuplot) and their report.md lines.
std::string write_plots(const EvalResult& r, const fs::path& dir, const std::vector<std::string>& methods) {
  plot_accuracy(r, dir, methods);
  // Fig. 4: epoch time vs batch and vs sequence length of the sweep runs.
  std::vector<size_t> sweep;
  for (size_t i = 0; i < r.runs.size(); ++i)
    if (r.runs[i].sweep) sweep.push_back(i);
  std::string md;
  if (!sweep.empty()) {
    for (const bool vs_batch : {true, false}) md += plot_epoch_curve(r, dir, methods, sweep, vs_batch);
  } else {
    md += "\nNo sweep runs (--sweep-campaign): the epoch-time-vs-batch/sequence plots are not drawn.\n";
  }
  md += "\n![predicted vs measured](pred_vs_measured.png)\n\n![APE CDF](ape_cdf.png)\n";
  return md;
}

}  // namespace

void write_eval_report(const EvalResult& r, const std::string& out, bool plots) {
  const fs::path dir(out);
  fs::create_directories(dir);
  const auto& rep = r.report;
  write_json_file((dir / "report.json").string(), rep);
  write_predictions_csv(r, dir);
  const std::vector<std::string> methods = rep["methods"].get<std::vector<std::string>>();
  std::string md = summary_md(rep, methods) + details_md(rep);
  if (plots) md += write_plots(r, dir, methods);
  write_file(dir / "report.md", md);
}

}  // namespace scaledl
