// safetensors weights files (gnn/safetensors.cpp) and the graph-model loader
// on top of them (GraphPredictor::load in gnn/gnn_io.cpp: metadata JSON, config,
// normalisation tensors, weights), read from a file as `scaledl predict` does.
#include "fuzz_util.hpp"
#include "gnn/safetensors.hpp"
#include "scaledl/gnn/gnn.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("graph.safetensors", data, size);
  bool graph = false;
  fuzz::guarded([&] {
    const SafeTensors st = load_safetensors(path);
    for (const auto& [name, t] : st.tensors) (void)t.numel();
    (void)safetensors_content_sha256(st);
    graph = st.metadata.count("format") > 0;
  });
  if (graph) fuzz::guarded([&] { (void)GraphPredictor::load(path); });
  return 0;
}
