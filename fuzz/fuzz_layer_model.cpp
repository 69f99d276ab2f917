// Per-layer model files as `scaledl predict --layers DIR` / bundles load them
// (learn/layer_predictor.cpp: manifest.json + <model>.json; learn/xgb.cpp:
// XGBoost JSON through the XGBoost C API; learn/tree_forest.cpp: the trees
// compiled for prediction).
//
// Input: either one XGBoost JSON model (Booster::from_buffer, TreeForest::compile,
// a prediction through each), or a directory as sections
//   "#@file manifest.json\n<text>\n#@file linear.json\n<text>..."
// written to a scratch folder and loaded with LayerPredictor::load, followed by
// a prediction of every layer type.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "fuzz_util.hpp"
#include "learn/tree_forest.hpp"
#include "learn/xgb.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/learn/layer_predictor.hpp"

using namespace scaledl;
namespace fs = std::filesystem;

namespace {

const char* kTag = "#@file ";

void one_model(const std::string& text) {
  const xgb::Booster b = xgb::Booster::from_buffer(text, "model.json");
  const size_t nf = b.num_features();
  if (nf == 0 || nf > 4096) return;
  std::vector<float> x(2 * nf, 1.0f), y(2, 0.0f);
  for (size_t i = 0; i < nf; ++i) x[nf + i] = NAN;  // a row of missing values
  b.predict_dense(x.data(), 2, nf, y.data());
  std::string why;
  if (auto f = TreeForest::compile(text, &why)) {
    if (f->num_features() == nf) f->predict(x.data(), 2, y.data());
  }
}

void directory(const std::string& text) {
  const fs::path dir = fuzz::scratch() / "layers";
  std::error_code ec;
  scaledl::remove_tree(dir, ec);
  fs::create_directories(dir);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (text.compare(pos, std::strlen(kTag), kTag) != 0 || nl == std::string::npos) break;
    std::string name = text.substr(pos + std::strlen(kTag), nl - pos - std::strlen(kTag));
    size_t next = text.find(std::string("\n") + kTag, nl);
    const size_t end = next == std::string::npos ? text.size() : next;
    // plain names only: the harness must not write outside its folder
    if (!name.empty() && name.size() <= 64 &&
        name.find_first_of(std::string("/\0", 2)) == std::string::npos && name != "." && name != "..")
      fuzz::write_file("layers/" + name, text.substr(nl + 1, end - nl - 1));
    pos = next == std::string::npos ? text.size() : next + 1;
  }
  const LayerPredictor p = LayerPredictor::load(dir.string());
  (void)p.summary();
  DeviceRecord dev;
  dev.name = "fuzz";
  dev.kind = "spec";
  dev.peak_fp32_gflops = 1000;
  dev.peak_mem_bw_gbs = 100;
  for (const auto& info : all_layer_infos()) {
    std::vector<int64_t> dims;
    for (const auto& n : info.dims) dims.push_back(n == "bias" || n == "kind" ? 1 : 8);
    const Direction d = info.type == LayerType::Optimizer ? Direction::Update : Direction::Forward;
    fuzz::guarded([&] { (void)p.predict(info.type, dims, DType::FP32, d, dev); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.compare(0, std::strlen(kTag), kTag) == 0)
    fuzz::guarded([&] { directory(text); });
  else
    fuzz::guarded([&] { one_model(text); });
  return 0;
}
