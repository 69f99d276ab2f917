// Speed of the D-optimal sampler (docs/design.md, "Speed"). Target: k = 200 of
// m = 100,000 candidates with p = 20 terms in <= 5 s on the 2-core CPU VM.
//
//   build-*/bench/bench_design --benchmark_filter=Fedorov
//
// Candidates are intercept + (p-1) uniform features in [-1, 1] (the hardest case
// for the subset rounds: no two candidates alike). Each case runs 3 repetitions;
// the mean/median/stddev/cv aggregates show the spread (trust a case whose cv is
// below 0.1; a larger cv means the machine was busy: rerun it). Counters: log_det and d_eff (vs random
// designs), exchanges and passes of the winning start.
#include <benchmark/benchmark.h>

#include <random>

#include "scaledl/design/design.hpp"
#include "scaledl/design/space.hpp"

namespace {

scaledl::FeatureMatrix random_candidates(int64_t m, int p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  scaledl::FeatureMatrix F(m, p);
  for (int64_t i = 0; i < m; ++i) {
    F(i, 0) = 1;
    for (int j = 1; j < p; ++j) F(i, j) = (rng() >> 11) * (2.0 / 9007199254740992.0) - 1;
  }
  return F;
}

/// Args: m, k, p, starts, threads[, subset (0 = default max(2048, 40 p))].
void BM_Fedorov(benchmark::State& state) {
  const int64_t m = state.range(0);
  const int k = static_cast<int>(state.range(1));
  const int p = static_cast<int>(state.range(2));
  scaledl::FeatureMatrix F = random_candidates(m, p, 1234);
  scaledl::FedorovOptions o;
  o.k = k;
  o.seed = 1;
  o.starts = static_cast<int>(state.range(3));
  o.threads = static_cast<int>(state.range(4));
  if (state.range(5) > 0) o.subset = static_cast<int>(state.range(5));
  o.keep_trace = false;
  scaledl::FedorovResult r;
  for (auto _ : state) {
    r = scaledl::fedorov_design(F, scaledl::FeatureMatrix(0, p), o);
    benchmark::DoNotOptimize(r.log_det);
  }
  state.counters["log_det"] = r.log_det;
  state.counters["d_eff"] = r.d_efficiency_vs_random;
  state.counters["exchanges"] = r.exchanges;
  state.counters["passes"] = r.passes;
}

void FedorovArgs(benchmark::internal::Benchmark* b) {
  // The target case, then one factor varied at a time around it.
  b->Args({100000, 200, 20, 4, 2, 0});
  for (int64_t m : {10000, 30000, 300000}) b->Args({m, 200, 20, 4, 2, 0});
  for (int64_t k : {50, 100, 400}) b->Args({100000, k, 20, 4, 2, 0});
  for (int64_t p : {10, 40}) b->Args({100000, 200, p, 4, 2, 0});
  b->Args({100000, 200, 20, 4, 1, 0});  // one thread
  b->Args({100000, 200, 20, 1, 1, 0});  // one start
  b->ArgNames({"m", "k", "p", "starts", "threads", "subset"});
}

BENCHMARK(BM_Fedorov)
    ->Apply(FedorovArgs)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3)
    ->UseRealTime();

/// Quality vs speed of the candidate subset of each round: exchanging over all
/// m candidates (subset = m) is the classical modified Fedorov algorithm.
BENCHMARK(BM_Fedorov)
    ->Name("BM_FedorovSubset")
    ->ArgNames({"m", "k", "p", "starts", "threads", "subset"})
    ->Args({100000, 200, 20, 4, 2, 8000})
    ->Args({100000, 200, 20, 4, 2, 100000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

/// The whole `scaledl plan` on the example spaces (enumeration, constraints,
/// encoding, exchange). Arg: budget.
void BM_PlanSpace(benchmark::State& state, const char* file) {
  scaledl::DesignSpace sp = scaledl::load_space(std::string(SCALEDL_SOURCE_DIR) + "/models/spaces/" + file);
  scaledl::PlanOptions po;
  po.budget = static_cast<int>(state.range(0));
  po.seed = 1;
  nlohmann::json plan;
  for (auto _ : state) plan = scaledl::make_plan(sp, po);
  state.counters["m"] = plan["design"]["m"].get<double>();
  state.counters["p"] = plan["design"]["p"].get<double>();
  state.counters["d_eff"] = plan["design"]["d_efficiency_vs_random"].is_null()
                                ? 0.0
                                : plan["design"]["d_efficiency_vs_random"].get<double>();
}
BENCHMARK_CAPTURE(BM_PlanSpace, layers, "layers.json")
    ->Arg(200)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanSpace, models, "models.json")
    ->Arg(64)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
