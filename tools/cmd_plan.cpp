// scaledl plan --space SPACE.json --budget K --out PLAN.json [--existing DB]
// [--seed S] [--starts N] [--terms T] [--json]: a D-optimal set of
// K layer or model configs (Fedorov exchange, ScaleDL eq. 4-5; docs/design.md).
// The plan file is what `scaledl bench layers|models --plan` reads.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/design/space.hpp"

namespace {

struct PlanCliOptions {
  std::string space;     ///< space JSON (models/spaces/*.json)
  int budget = 0;        ///< new configs to choose, >= 1
  std::string existing;  ///< campaign store whose measured configs stay in the design
  uint64_t seed = 0;     ///< std::mt19937_64 seed
  int starts = 4;        ///< Fedorov random starts, >= 1
  int threads = 2;       ///< threads running the starts, >= 1
  std::string out;       ///< plan JSON to write
  std::string terms;     ///< overrides the space's "terms" (linear|interactions|quadratic) when set
  bool json = false;     ///< print the "design" summary as JSON
};

int run(const PlanCliOptions& o) {
  using namespace scaledl;
  check_output_is_not_input(o.out, "--out", {{"--space", o.space}, {"--existing", o.existing}});
  DesignSpace sp = load_space(o.space);
  if (!o.terms.empty()) sp.terms = parse_terms(o.terms, "--terms");
  PlanOptions po;
  po.budget = o.budget;
  po.seed = o.seed;
  po.starts = o.starts;
  po.threads = o.threads;
  po.existing = o.existing;
  std::filesystem::path od = std::filesystem::path(o.out).parent_path();
  po.plan_dir = od.empty() ? "." : od.string();
  json plan = make_plan(sp, po);
  write_json_file(o.out, plan);
  const json& d = plan["design"];
  for (const auto& t : d["types_without_candidates"])
    std::fprintf(
        stderr,
        "scaledl: warning: %s: no %s layer is planned: every combination of its dimensions is impossible "
        "(a size <= 0) or breaks a constraint\n",
        o.space.c_str(), t.get<std::string>().c_str());
  if (o.json) {
    std::printf("%s\n", d.dump(1).c_str());
    return 0;
  }
  std::printf("plan %s: %zu %s configs from %lld candidates (%s%s), %d terms (%s)\n", o.out.c_str(),
              plan["configs"].size(), sp.kind.c_str(), static_cast<long long>(d["m"].get<int64_t>()),
              d["sampled"].get<bool>() ? "sampled from a product of " : "product ",
              fmt::format("{:.0f}", d["product_size"].get<double>()).c_str(), d["p"].get<int>(),
              d["terms"].get<std::string>().c_str());
  if (d["existing"].get<int64_t>() > 0 || !o.existing.empty())
    std::printf("existing points kept: %lld (skipped, outside the space: %lld)\n",
                static_cast<long long>(d["existing"].get<int64_t>()),
                static_cast<long long>(d["existing_skipped"].get<int64_t>()));
  std::printf("log_det %.4f  d_efficiency_vs_random %s  (seed %llu, best of %d starts, %d exchanges)\n",
              d["log_det"].get<double>(),
              d["d_efficiency_vs_random"].is_null()
                  ? "inf (every random design singular)"
                  : fmt::format("{:.3f}", d["d_efficiency_vs_random"].get<double>()).c_str(),
              static_cast<unsigned long long>(o.seed), o.starts, d["exchanges"].get<int>());
  if (d["random_singular"].get<int>() > 0)
    std::printf("random reference designs singular: %d of %d\n", d["random_singular"].get<int>(),
                d["random_designs"].get<int>());
  if (!d["dropped_terms"].empty())
    std::printf(
        "dropped terms (not identifiable on this space): %s\n",
        fmt::format("{}", fmt::join(d["dropped_terms"].get<std::vector<std::string>>(), "; ")).c_str());
  return 0;
}

scaledl::cli::Registrar reg(
    {"plan"}, "Choose a D-optimal set of layer or model configs to benchmark", [](CLI::App& app) {
      auto o = std::make_shared<PlanCliOptions>();
      app.add_option("--space", o->space, "design space JSON (models/spaces/)")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("--budget,-k", o->budget, "new configs to choose, >= 1")->required();
      app.add_option("--existing", o->existing,
                     "campaign store (SQLite): its measured configs stay in the design");
      app.add_option("--seed", o->seed, "random seed (std::mt19937_64)");
      app.add_option("--starts", o->starts, "Fedorov random starts, >= 1");
      app.add_option("--threads", o->threads, "threads for the starts, >= 1");
      app.add_option("--out,-o", o->out, "plan JSON to write")->required();
      app.add_option("--terms", o->terms, "model terms, overriding the space: linear|interactions|quadratic");
      app.add_flag("--json", o->json, "print the design summary as JSON");
      return [o] { return run(*o); };
    });

}  // namespace
