// Hugging Face config.json -> ModelSpec, training settings, layer graph
// (ir/model_spec.cpp, ir/layer_graph.cpp, ir/stored_spec.cpp), read the way
// `scaledl inspect` / `predict` read MODEL.json (a file, read_json_file).
#include <algorithm>

#include "fuzz_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("config.json", data, size);
  fuzz::guarded([&] {
    const json config = read_json_file(path);
    (void)show(config);
    ModelSpec m = parse_model_config(config, path);
    TrainSettings s = settings_from_config(config, path);
    validate_settings(m, s);
    (void)parameter_count(m);
    // Invariant: what the store keeps (to_json) reads back (model_spec_from_json).
    const json stored = m.to_json();
    if (!fuzz::guarded([&] { (void)model_spec_from_json(stored, "stored"); }))
      fuzz::bug("model_spec_from_json(parse_model_config(x).to_json()) threw: " + stored.dump());
    // The graph repeats per block: a few blocks cover it and keep executions fast.
    m.num_layers = std::min<int64_t>(m.num_layers, 4);
    m.num_decoder_layers = std::min<int64_t>(m.num_decoder_layers, m.num_decoder_layers ? 4 : 0);
    const LayerGraph g = build_layer_graph(m, s);
    (void)g.total_flops_fwd();
    (void)g.to_json().dump();
  });
  return 0;
}
