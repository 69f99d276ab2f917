// scaledl eval memory: peak-memory predictors against measured peaks (docs/memory.md).
#include <algorithm>
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/eval/memory_eval.hpp"

namespace {

struct EvalMemoryOptions {
  scaledl::MemoryEvalOptions e;
  std::string protocol = "all";
  bool json = false;
};

int run(EvalMemoryOptions o) {
  using namespace scaledl;
  // The protocols whose splits suit the memory runs: one of them, or all.
  const std::vector<Protocol> memory_protocols = {Protocol::Id, Protocol::OodSize};
  if (o.protocol == "all") {
    o.e.protocols = memory_protocols;
  } else {
    const auto p = std::find_if(memory_protocols.begin(), memory_protocols.end(),
                                [&](Protocol q) { return o.protocol == to_string(q); });
    SCALEDL_CHECK(p != memory_protocols.end(),
                  "--protocol=\"{}\" is not a memory protocol (id, ood-size, all)", o.protocol);
    o.e.protocols = {*p};
  }
  const nlohmann::json rep = eval_memory(o.e);
  if (o.json) {
    std::printf("%s\n", rep.dump(1).c_str());
    return 0;
  }
  std::printf("%zu runs with a measured peak\n%-9s %-10s %8s %8s %6s\n", rep["runs"].get<size_t>(),
              "protocol", "method", "MRE %", "max %", "runs");
  for (const auto& [p, pj] : rep["protocols"].items())
    for (const char* m : {"analytic", "corrected", "dnnperf"}) {
      const auto& a = pj[m]["all"];
      std::printf("%-9s %-10s %8.1f %8.1f %6zu\n", p.c_str(), m, a["mre"].get<double>(),
                  a["max"].get<double>(), a["runs"].get<size_t>());
    }
  if (!o.e.out.empty()) std::printf("report: %s/report.md\n", o.e.out.c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"eval", "memory"}, "Peak-memory predictors (analytic, corrected, DNNPerf-style) against measured peaks",
    [](CLI::App& app) {
      auto o = std::make_shared<EvalMemoryOptions>();
      app.add_option("--db", o->e.dbs, "store(s) with measured peaks (bench models)")->required();
      app.add_option("--protocol", o->protocol, "id, ood-size or all")->capture_default_str();
      app.add_option("--seeds", o->e.seeds, "random id splits")->capture_default_str();
      app.add_option("--out", o->e.out, "write report.md, report.json, predictions.csv here");
      app.add_flag("--json", o->json, "print the report as JSON");
      return [o] { return run(*o); };
    });

}  // namespace
