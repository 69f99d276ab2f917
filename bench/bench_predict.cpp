// Speed of prediction with a loaded bundle (docs/predict.md, issue #12 targets):
//   BM_PredictSweep   N configurations of a 12-layer BERT-base (batch x seq grid)
//                     through Bundle::predict_many: layer graphs + layer models +
//                     batched refinement + intervals; configurations per second
//                     (target >= 10,000 per second on the 2-core VM)
//   BM_PredictOne     one configuration after load (layer graph + prediction):
//                     latency (target p50 <= 2 ms; run with repetitions and read
//                     the median)
//   BM_LayerGraph     build_layer_graph alone (what a sweep pays per configuration
//                     before any model runs)
//   BM_LayerGraphLarge the same for GPT-2 large, batch 4 x 1,024, training
// The bundle is trained once at start-up from the committed CPU stores
// (datasets/cpu/, 57 runs, 20 epochs): its accuracy does not matter here, its
// size does (the same layer-model and GNN shapes as any bundle).
// Run: build/bench/bench_predict --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <mutex>

#include <torch/torch.h>

#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/predict/bundle.hpp"

namespace {

using namespace scaledl;

struct Fixture {
  Bundle bundle;
  DeviceRecord dev;
  ModelSpec bert;
};

const Fixture& fixture() {
  // Never destroyed: at exit XGBoost's own statics may already be gone, and
  // freeing the boosters then crashes (seen as "double free" after the results).
  static const Fixture* f = [] {
    torch::set_num_threads(1);
    const std::string src = SCALEDL_SOURCE_DIR;
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("scaledl_bench_bundle_" + std::to_string(getpid())))
            .string();
    BundleTrainOptions o;
    o.dbs = {src + "/datasets/cpu/layers.sqlite", src + "/datasets/cpu/models.sqlite"};
    o.gnn_train.epochs = 20;
    train_bundle(o, dir);
    auto* x = new Fixture;
    x->bundle = load_bundle(dir);
    scaledl::remove_tree(dir);
    Store st(src + "/datasets/cpu/layers.sqlite", /*read_only=*/true);
    x->dev = st.devices().at(0);
    x->bert = load_model_config(src + "/models/bert-base.json");
    return x;
  }();
  return *f;
}

std::vector<LayerGraph> grid(const ModelSpec& m, size_t n) {
  std::vector<LayerGraph> g;
  const int64_t batches[] = {1, 2, 4, 8, 16, 32, 64, 128};
  const int64_t seqs[] = {32, 64, 128, 256, 512};
  for (size_t i = 0; i < n; ++i) {
    TrainSettings s;
    s.batch = batches[i % 8];
    s.seq_len = seqs[(i / 8) % 5];
    g.push_back(build_layer_graph(m, s));
  }
  return g;
}

void BM_PredictSweep(benchmark::State& state) {
  const Fixture& f = fixture();
  const size_t n = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    std::vector<LayerGraph> g = grid(f.bert, n);
    std::vector<const LayerGraph*> p;
    for (const auto& x : g) p.push_back(&x);
    benchmark::DoNotOptimize(f.bundle.predict_many(p, f.dev, /*physics=*/state.range(1) != 0));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
// Args: configurations, physical bounds on (1) or off (0, `predict --raw`).
// Wall time: the layer part runs on several threads.
BENCHMARK(BM_PredictSweep)
    ->Args({40, 1})
    ->Args({1000, 1})
    ->Args({1000, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_PredictOne(benchmark::State& state) {
  const Fixture& f = fixture();
  TrainSettings s;
  s.batch = 8;
  s.seq_len = 128;
  for (auto _ : state) {
    const LayerGraph g = build_layer_graph(f.bert, s);
    if (state.range(0) == 2) {  // cold: the smaller configurations of the bounds predicted again
      std::lock_guard<std::mutex> lock(f.bundle.bounds_memo->mu);
      f.bundle.bounds_memo->values.clear();
    }
    benchmark::DoNotOptimize(f.bundle.predict(g, f.dev, /*physics=*/state.range(0) != 0));
  }
}
// 0: `predict --raw`; 1: physical bounds, memo warm (repeated calls in one process);
// 2: physical bounds, memo cleared every call (a lone `scaledl predict`).
BENCHMARK(BM_PredictOne)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

void BM_LayerGraph(benchmark::State& state) {
  const Fixture& f = fixture();
  TrainSettings s;
  for (auto _ : state) benchmark::DoNotOptimize(build_layer_graph(f.bert, s));
}
BENCHMARK(BM_LayerGraph)->Unit(benchmark::kMicrosecond);

// build_layer_graph of GPT-2 large (36 layers) training at batch 4 x 1,024 tokens: one of the
// ~75 graphs a lone `predict` of that configuration builds for its monotone bounds.
void BM_LayerGraphLarge(benchmark::State& state) {
  const ModelSpec m = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/gpt2-large.json");
  TrainSettings s;
  s.batch = 4;
  s.seq_len = 1024;
  for (auto _ : state) benchmark::DoNotOptimize(build_layer_graph(m, s));
}
BENCHMARK(BM_LayerGraphLarge)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
