// Bundle manifests (predict/bundle_io.cpp: load_bundle, and what it calls: the layer-model
// manifest, the graph model, the interval model, the comm model), as `scaledl predict
// --bundle DIR` reads them. A bundle's manifest holds its checksums, so none of it is
// covered by them: every field must be read defensively (issue #39).
//
// Input: the text of BUNDLE/manifest.json, written into a scratch copy of a tiny bundle:
//   layers/                the layer-model folder of the seed fuzz/corpus/fuzz_layer_model/dir-linear
//   graph.safetensors      models/bundles/default/graph.safetensors (62 KB; kept loadable by this build,
//                          unlike a seed, which may predate the current features)
//   comm.json              a ring all-reduce model
// A value "@sha256" in the input's `files` object is replaced by the SHA-256 of that file of
// the tiny bundle (the seeds use it, so they reach the models whatever the seed files hold);
// any other input is written as it is.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/checksum.hpp"
#include "fuzz_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gnn/graph_batch.hpp"
#include "scaledl/predict/bundle.hpp"

using namespace scaledl;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fuzz::bug("cannot read the seed file " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The tiny bundle, written once: scratch()/bundle.
const fs::path& bundle() {
  static const fs::path dir = [] {
    const fs::path src = fs::path(SCALEDL_SOURCE_DIR) / "fuzz" / "corpus";
    // "#@file NAME\n<text>\n#@file ..." sections (fuzz_layer_model.cpp) -> layers/NAME
    const std::string text = slurp(src / "fuzz_layer_model" / "dir-linear");
    const char* tag = "#@file ";
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t nl = text.find('\n', pos);
      if (text.compare(pos, std::strlen(tag), tag) != 0 || nl == std::string::npos) break;
      const std::string name = text.substr(pos + std::strlen(tag), nl - pos - std::strlen(tag));
      const size_t next = text.find(std::string("\n") + tag, nl);
      const size_t end = next == std::string::npos ? text.size() : next;
      fuzz::write_file("bundle/layers/" + name, text.substr(nl + 1, end - nl - 1));
      pos = next == std::string::npos ? text.size() : next + 1;
    }
    fuzz::write_file("bundle/graph.safetensors", slurp(fs::path(SCALEDL_SOURCE_DIR) / "models" / "bundles" /
                                                       "default" / "graph.safetensors"));
    fuzz::write_file("bundle/comm.json", std::string("{\"bandwidth_Bps\": 2.27e11, \"gamma_s\": 5.6e-6}\n"));
    return fuzz::scratch() / "bundle";
  }();
  return dir;
}

/// The input, with "@sha256" values of `files` replaced (see the top of this file).
std::string with_checksums(const std::string& text) {
  if (text.find("\"@sha256\"") == std::string::npos) return text;
  json j;
  try {
    j = parse_json_text(text, "input");
  } catch (const Error&) {
    return text;
  }
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) return text;
  for (auto it = j["files"].begin(); it != j["files"].end(); ++it) {
    const std::string& rel = it.key();
    if (*it != "@sha256" || rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos) continue;
    const fs::path p = bundle() / rel;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) *it = sha256_file(p.string());
  }
  return j.dump(1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = bundle();
  fuzz::write_file("bundle/manifest.json",
                   with_checksums(std::string(reinterpret_cast<const char*>(data), size)));
  fuzz::guarded([&] {
    const Bundle b = load_bundle(dir.string());
    // What predict reads of it besides the models.
    (void)b.layer_rows_of("cuda:NVIDIA H100 80GB HBM3");
    (void)b.without_layer_rows("spec:Tesla T4");
    (void)b.host_node_ms_for("cuda:NVIDIA H100 80GB HBM3");
    IterationPrediction p;
    p.global_features.assign(global_feature_names().size(), 1.0f);
    (void)b.out_of_range(p);
    // Invariant: every number load_bundle accepted is finite.
    for (const auto& [k, v] : b.host_node_ms)
      if (!(v > 0 && v <= 1e3)) fuzz::bug("host." + k + ".node_ms accepted out of range");
    for (const auto& [k, r] : b.global_ranges)
      if (!(std::isfinite(r.first) && std::isfinite(r.second) && r.first <= r.second))
        fuzz::bug("training.global_feature_ranges." + k + " accepted out of range");
  });
  return 0;
}
