// scaledl eval memory (memory_eval.hpp).
#include "scaledl/eval/memory_eval.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sstream>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/eval/eval.hpp"

namespace scaledl {

namespace {

struct Acc {
  double sum = 0, worst = 0;
  size_t n = 0;
  void add(double ape) {
    sum += ape;
    worst = std::max(worst, ape);
    ++n;
  }
  nlohmann::json json() const {
    return {{"mre", n ? 100 * sum / static_cast<double>(n) : 0.0}, {"max", 100 * worst}, {"runs", n}};
  }
};

const std::vector<std::string> kMethods = {"analytic", "corrected", "dnnperf"};

/// The runs the protocols split (families with >= 5 runs), the sample of each, and
/// the samples of smaller families, which train every split and are never tested.
struct MemoryRuns {
  std::vector<EvalRun> runs;
  std::vector<size_t> run_sample, train_only;
  nlohmann::json untested = nlohmann::json::object();  ///< family -> runs, of the train-only ones
};

MemoryRuns memory_runs(const std::vector<MemorySample>& samples) {
  std::map<std::string, size_t> per_family;
  for (const auto& s : samples) ++per_family[s.family];
  MemoryRuns m;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (per_family[samples[i].family] < 5) {
      m.train_only.push_back(i);
      m.untested[samples[i].family] = per_family[samples[i].family];
      continue;
    }
    const auto& g = samples[i].graph;
    EvalRun r;
    r.label = g.model.name;
    r.family = samples[i].family;
    r.flops = g.total_flops_fwd() + g.total_flops_bwd() + g.total_flops_update();
    m.runs.push_back(r);
    m.run_sample.push_back(i);
  }
  return m;
}

/// Every method on every split and seed of `protocol`: its report object; one CSV line per
/// prediction into `csv`.
nlohmann::json eval_protocol(Protocol protocol, int seeds, const std::vector<MemorySample>& samples,
                             const MemoryRuns& mr, const std::vector<double>& analytic, std::ostream& csv) {
  std::map<std::string, Acc> all;
  std::map<std::string, std::map<std::string, Acc>> fam, mode;
  for (int seed = 0; seed < seeds; ++seed) {
    for (const auto& split : make_splits(mr.runs, protocol, static_cast<uint64_t>(seed))) {
      std::vector<MemorySample> train;
      for (size_t r : split.train) train.push_back(samples[mr.run_sample[r]]);
      for (size_t i : mr.train_only) train.push_back(samples[i]);
      const MemoryCorrection corr = MemoryCorrection::train(train, false, static_cast<uint64_t>(seed));
      const MemoryCorrection direct = MemoryCorrection::train(train, true, static_cast<uint64_t>(seed));
      for (size_t r : split.test) {
        const size_t i = mr.run_sample[r];
        const auto& s = samples[i];
        const std::string md = to_string(run_mode(s.graph.settings));
        for (const auto& m : kMethods) {
          const double p = m == "analytic"    ? analytic[i]
                           : m == "corrected" ? corr.predict(s.graph, s.device_kind)
                                              : direct.predict(s.graph, s.device_kind);
          const double ape = std::fabs(p / s.measured_bytes - 1);
          all[m].add(ape);
          fam[m][s.family].add(ape);
          mode[m][md].add(ape);
          csv << fmt::format("{},{},{},{},{},{},{:.0f},{:.0f},{:.5f}\n", to_string(protocol), seed, m,
                             csv_quote(s.graph.model.name), s.family, md, s.measured_bytes, p, ape);
        }
      }
    }
  }
  nlohmann::json pj = nlohmann::json::object();
  for (const auto& m : kMethods) {
    nlohmann::json f = nlohmann::json::object(), d = nlohmann::json::object();
    for (auto& [k, a] : fam[m]) f[k] = a.json();
    for (auto& [k, a] : mode[m]) d[k] = a.json();
    pj[m] = {{"all", all[m].json()}, {"per_family", f}, {"per_mode", d}};
  }
  pj["seeds"] = seeds;
  return pj;
}

/// report.md: the overall table, then per protocol the per-family and per-mode ones.
std::string memory_report_md(const MemoryEvalOptions& o, const nlohmann::json& report, size_t samples,
                             const nlohmann::json& untested) {
  std::ostringstream md;
  md << "# Peak memory: measured vs predicted\n\n"
     << fmt::format(
            "{} runs with an allocator-exact peak from {}. Mean relative error |predicted / measured - 1| "
            "in %, (worst case), test runs.\n\n",
            samples, fmt::join(o.dbs, ", "));
  if (!untested.empty()) {
    md << "Families with fewer than 5 runs train every split and are not tested:";
    for (auto& [f, n] : untested.items()) md << fmt::format(" {} ({} runs)", f, n.get<size_t>());
    md << ".\n\n";
  }
  md << "| protocol | method | MRE % | max % | test runs |\n|---|---|---|---|---|\n";
  for (const Protocol protocol : o.protocols)
    for (const auto& m : kMethods) {
      const auto& a = report["protocols"][to_string(protocol)][m]["all"];
      md << fmt::format("| {} | {} | {:.1f} | {:.1f} | {} |\n", to_string(protocol), m,
                        a["mre"].get<double>(), a["max"].get<double>(), a["runs"].get<size_t>());
    }
  for (const Protocol protocol : o.protocols) {
    const nlohmann::json& pj = report["protocols"][to_string(protocol)];
    for (const char* by : {"per_family", "per_mode"}) {
      md << fmt::format(
          "\n## {}: {} (MRE %)\n\n| {} | analytic | corrected | dnnperf | runs |\n"
          "|---|---|---|---|---|\n",
          to_string(protocol), by == std::string("per_family") ? "per family" : "per mode",
          by == std::string("per_family") ? "family" : "mode");
      for (const auto& [f, a] : pj["analytic"][by].items())
        md << fmt::format("| {} | {:.1f} | {:.1f} | {:.1f} | {} |\n", f, a["mre"].get<double>(),
                          pj["corrected"][by][f]["mre"].get<double>(),
                          pj["dnnperf"][by][f]["mre"].get<double>(), a["runs"].get<size_t>());
    }
  }
  return md.str();
}

}  // namespace

nlohmann::json eval_memory(const MemoryEvalOptions& o) {
  SCALEDL_CHECK(!o.dbs.empty(), "eval memory: give --db STORE (a store with measured peaks: bench models)");
  SCALEDL_CHECK(o.seeds >= 1 && o.seeds <= 100, "--seeds={} must be in [1, 100]", o.seeds);
  const auto samples = load_memory_samples(o.dbs);
  SCALEDL_CHECK(samples.size() >= 10, "--db={}: {} runs with a measured peak; the evaluation needs >= 10",
                o.dbs.front(), samples.size());
  // The protocols of `scaledl eval` over these runs (family, training FLOP).
  // A family with fewer than 5 runs cannot be split 80/20: its runs train
  // every split and are never tested; the report names it.
  const MemoryRuns mr = memory_runs(samples);
  SCALEDL_CHECK(mr.runs.size() >= 10,
                "--db={}: {} runs in families with >= 5 runs; the evaluation needs >= 10", o.dbs.front(),
                mr.runs.size());
  std::vector<double> analytic(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    MemoryOptions mo;
    mo.device_kind = samples[i].device_kind;
    analytic[i] = estimate_memory(samples[i].graph, mo).peak;
  }
  nlohmann::json report = {{"stores", o.dbs},
                           {"runs", samples.size()},
                           {"train_only_families", mr.untested},
                           {"protocols", nlohmann::json::object()}};
  std::ostringstream csv;
  csv << "protocol,seed,method,model,family,mode,measured_bytes,predicted_bytes,ape\n";
  for (const Protocol protocol : o.protocols) {
    // Only the random split repeats with other seeds; the others are the same for every seed.
    const int seeds = protocol_splits_are_random(protocol) ? o.seeds : 1;
    report["protocols"][to_string(protocol)] = eval_protocol(protocol, seeds, samples, mr, analytic, csv);
  }
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    write_text_file_atomic(o.out + "/predictions.csv", csv.str());
    write_text_file_atomic(o.out + "/report.json", report.dump(1) + "\n");
    write_text_file_atomic(o.out + "/report.md", memory_report_md(o, report, samples.size(), mr.untested));
  }
  return report;
}

}  // namespace scaledl
