// Speed of the graph refinement (docs/gnn.md):
//   BM_GnnTrain      200 graphs of ~250 nodes, 250 epochs (target <= 60 s on the 2-core CPU VM)
//   BM_GnnInference  batched prediction, graphs/s (target >= 5,000 graphs/s)
//   BM_Scatter       scatter_sum vs LibTorch's index_add (why scatter_sum exists)
// Counters: nodes_per_graph of the layer graphs, and `compressed`: nodes per
// graph after compress_graph (what the encoder runs on; exact, see graph_batch.hpp).
// Graphs are real layer graphs (build_layer_graph) of varied model configs with
// roofline layer times and the synthetic labels of test/gnn/gnn_test_util.hpp.
// Run: build-<you>/bench/bench_gnn --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <random>

#include "../test/gnn/gnn_test_util.hpp"
#include "scaledl/gnn/gnn.hpp"

namespace {

using namespace scaledl;

/// 200 graphs: model family, depth, batch, sequence and device count drawn from a fixed seed.
const std::vector<GraphFeatures>& bench_graphs() {
  static const std::vector<GraphFeatures> g = [] {
    std::vector<GraphFeatures> v;
    std::mt19937_64 rng(42);
    const char* models[] = {"bert-base.json", "gpt2.json",        "vit-base.json", "deit-small.json",
                            "t5-small.json",  "llama-style.json", "opt-125m.json"};
    const int64_t batches[] = {1, 2, 4, 8, 16, 32};
    const int64_t seqs[] = {32, 64, 128, 256};
    const int64_t devs[] = {1, 1, 2, 4, 8};
    while (v.size() < 200) {
      const std::string m = models[rng() % 7];
      const int64_t layers = m == "t5-small.json" ? 3 + rng() % 3 : 5 + rng() % 6;
      v.push_back(
          test::labelled(test::small_graph(m, layers, batches[rng() % 6], seqs[rng() % 4], devs[rng() % 5])));
    }
    return v;
  }();
  return g;
}

double mean_nodes(const std::vector<GraphFeatures>& g, int64_t compress_rounds = 0) {
  double n = 0;
  for (const auto& x : g)
    n +=
        static_cast<double>(compress_rounds > 0 ? compress_graph(x, compress_rounds).num_nodes : x.num_nodes);
  return n / static_cast<double>(g.size());
}

void BM_GnnTrain(benchmark::State& st, const char* encoder) {
  const auto& graphs = bench_graphs();
  GnnConfig c;
  c.encoder = encoder;
  GnnTrainOptions o;
  o.epochs = st.range(0);
  o.patience = o.epochs;  // never stop early: time every epoch
  o.val_fraction = 0;
  GnnTrainReport r;
  for (auto _ : st) GraphPredictor::train(graphs, c, o, &r);
  st.counters["graphs"] = static_cast<double>(graphs.size());
  st.counters["nodes_per_graph"] = mean_nodes(graphs);
  st.counters["compressed"] = mean_nodes(graphs, c.layers);
  st.counters["epochs"] = static_cast<double>(r.epochs_run);
  st.counters["train_MRE_%"] = 100 * r.train_mre;
  st.counters["MRE_before_%"] = 100 * r.train_mre_before;
  st.counters["threads"] = torch::get_num_threads();
}

void BM_GnnInference(benchmark::State& st, const char* encoder) {
  const auto& graphs = bench_graphs();
  GnnConfig c;
  c.encoder = encoder;
  GnnTrainOptions o;
  o.epochs = 1;
  GraphPredictor p = GraphPredictor::train(graphs, c, o);
  std::vector<const GraphFeatures*> ptr;
  for (int rep = 0; rep < 10; ++rep)  // 2,000 graphs
    for (const auto& g : graphs) ptr.push_back(&g);
  const int64_t batch = st.range(0);
  for (auto _ : st) benchmark::DoNotOptimize(p.predict(ptr, batch));
  st.counters["graphs/s"] =
      benchmark::Counter(static_cast<double>(ptr.size() * st.iterations()), benchmark::Counter::kIsRate);
  st.counters["nodes_per_graph"] = mean_nodes(graphs);
  st.counters["compressed"] = mean_nodes(graphs, c.layers);
  st.counters["threads"] = torch::get_num_threads();
}

/// The scatter of messages into their destination nodes: scatter_sum
/// (index_put_ with accumulate) against LibTorch's index_add, 80k edges x 64
/// columns into 68k nodes, forward only and forward + backward.
void BM_Scatter(benchmark::State& st, bool index_add, bool backward) {
  torch::manual_seed(0);
  const int64_t N = 68000, E = 80000, H = 64;
  const torch::Tensor dst = std::get<0>(torch::randint(0, N, {E}, torch::kLong).sort());
  const torch::Tensor msg = torch::randn({E, H}).requires_grad_(backward);
  for (auto _ : st) {
    torch::Tensor out = index_add ? torch::zeros({N, H}).index_add(0, dst, msg) : scatter_sum(msg, dst, N);
    if (backward) out.sum().backward();
    benchmark::DoNotOptimize(out.data_ptr());
  }
  st.counters["threads"] = torch::get_num_threads();
}

}  // namespace

BENCHMARK_CAPTURE(BM_Scatter, scatter_sum_fwd, false, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Scatter, index_add_fwd, true, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Scatter, scatter_sum_fwd_bwd, false, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Scatter, index_add_fwd_bwd, true, true)->Unit(benchmark::kMillisecond);

// Arg = epochs: 250 is the target; 25 gives the per-epoch cost quickly on a busy machine.
BENCHMARK_CAPTURE(BM_GnnTrain, transformerconv, "transformerconv")
    ->Arg(25)
    ->Arg(250)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_GnnTrain, anee, "anee")->Arg(25)->Arg(250)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_GnnInference, transformerconv, "transformerconv")
    ->Arg(64)
    ->Arg(256)
    ->Arg(2000)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_GnnInference, anee, "anee")
    ->Arg(64)
    ->Arg(256)
    ->Arg(2000)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

BENCHMARK_MAIN();
