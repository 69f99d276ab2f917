// Speed of the per-layer predictors (docs/learn.md):
//   BM_PredictBatch         rows/s of LayerPredictor::predict_batch (features + the
//                           compiled trees of tree_forest.hpp) on 1,000,000 linear
//                           rows; target >= 1M rows/s.
//   BM_PredictBatchXgboost  the same through XGBoost's predictor
//                           (XGBoosterPredictFromDense), for comparison.
//   BM_Features             rows/s of the feature computation alone.
// The model is trained here on the committed NeuSight subset (datasets/neusight),
// with the default TrainOptions, so the tree count and depth are the shipped ones.
// SCALEDL_BENCH_TRAIN_OPTIONS='{"rounds": 100, "max_depth": 6}' (TrainOptions JSON)
// measures other settings. CPU time is the process's (all threads).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/learn/neusight.hpp"

namespace fs = std::filesystem;
using namespace scaledl;

namespace {

struct Fixture {
  LayerPredictor predictor;
  DeviceRecord dev;
  std::vector<int64_t> dims;  // [rows, 4] linear dims
  static constexpr size_t kRows = 1000000;
};

const Fixture& fixture() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    const fs::path root = fs::path(SCALEDL_SOURCE_DIR) / "datasets" / "neusight";
    const fs::path db = fs::temp_directory_path() / "scaledl_bench_learn.sqlite";
    fs::remove(db);
    {
      Store store(db.string());
      NeusightImportOptions o;
      o.root = root.string();
      import_neusight(o, store);
    }
    auto data = load_training_data({db.string()});
    TrainOptions to;
    if (const char* env = std::getenv("SCALEDL_BENCH_TRAIN_OPTIONS")) {
      try {
        to = TrainOptions::from_json(parse_json_text(env, "SCALEDL_BENCH_TRAIN_OPTIONS"),
                                     "SCALEDL_BENCH_TRAIN_OPTIONS");
      } catch (const std::exception& e) {
        std::cerr << "bench_learn: error: " << e.what() << "\n";
        std::exit(1);
      }
    }
    to.nthread = 0;  // prediction threads: hardware (predict_batch uses 1 below 16,384 rows)
    fx->predictor = LayerPredictor::train(data.rows, data.devices, to);
    std::cerr << "bench_learn: model " << fx->predictor.summary().dump() << "\n";
    fx->dev = load_device_spec((root / "device_configs" / "NVIDIA_H100_80GB_HBM3.json").string());
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<int64_t> d(1, 128);
    fx->dims.resize(Fixture::kRows * 4);
    for (size_t i = 0; i < Fixture::kRows; ++i) {
      fx->dims[4 * i] = d(rng) * 64;
      fx->dims[4 * i + 1] = d(rng) * 64;
      fx->dims[4 * i + 2] = d(rng) * 64;
      fx->dims[4 * i + 3] = 1;
    }
    return fx;
  }();
  return *f;
}

void predict(benchmark::State& state, bool compiled) {
  Fixture& f = const_cast<Fixture&>(fixture());
  f.predictor.set_compiled_trees(compiled);
  const size_t rows = static_cast<size_t>(state.range(0));
  std::vector<double> out(rows);
  for (auto _ : state) {
    f.predictor.predict_batch(LayerType::Linear, f.dims.data(), rows, DType::FP32, Direction::Forward, f.dev,
                              out.data());
    benchmark::DoNotOptimize(out.data());
  }
  f.predictor.set_compiled_trees(true);
  state.SetItemsProcessed(state.iterations() * rows);
}
void BM_PredictBatch(benchmark::State& state) {
  predict(state, true);
}
void BM_PredictBatchXgboost(benchmark::State& state) {
  predict(state, false);
}
BENCHMARK(BM_PredictBatch)
    ->Arg(1000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(3)
    ->ReportAggregatesOnly(false);
BENCHMARK(BM_PredictBatchXgboost)
    ->Arg(1000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Repetitions(3)
    ->ReportAggregatesOnly(false);

void BM_Features(benchmark::State& state) {
  const Fixture& f = fixture();
  const size_t rows = 100000;
  const size_t nf = feature_count(LayerType::Linear);
  std::vector<float> x(rows * nf);
  for (auto _ : state) {
    for (size_t i = 0; i < rows; ++i)
      layer_features_unchecked(LayerType::Linear, &f.dims[4 * i], DType::FP32, Direction::Forward, f.dev, {},
                               &x[i * nf]);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * rows);
}
BENCHMARK(BM_Features)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
