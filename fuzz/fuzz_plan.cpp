// Benchmark plans (io/plan.cpp) as `scaledl bench layers|models --plan` reads
// them: load_plan on a file; "model" paths resolve against the plan's folder,
// which holds "models/" (a link to the repository's models/).
#include <algorithm>

#include "fuzz_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/ir/layer_graph.hpp"

using namespace scaledl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::link_models();
  const std::string path = fuzz::write_file("work/plan.json", data, size);
  fuzz::guarded([&] {
    const Plan p = load_plan(path);
    for (const auto& c : p.layers) {
      (void)c.key();
      (void)layer_cost(c.type, c.dims, c.dtype);
    }
    if (!p.layers.empty()) {
      // Invariant: the layers plan this writes (layers_plan_json) reads back the same.
      const json again = layers_plan_json(p.layers);
      Plan q;
      if (!fuzz::guarded([&] { q = parse_plan(again, "again"); }) || q.layers.size() != p.layers.size())
        fuzz::bug("parse_plan(layers_plan_json(p)) failed: " + again.dump().substr(0, 2000));
      for (size_t i = 0; i < q.layers.size(); ++i)
        if (q.layers[i].key() != p.layers[i].key()) fuzz::bug("layer key changed: " + p.layers[i].key());
    }
    for (size_t i = 0; i < p.models.size() && i < 2; ++i) {
      ModelSpec m = p.models[i].model;
      m.num_layers = std::min<int64_t>(m.num_layers, 2);
      m.num_decoder_layers = std::min<int64_t>(m.num_decoder_layers, m.num_decoder_layers ? 2 : 0);
      (void)build_layer_graph(m, p.models[i].settings).total_flops_fwd();
    }
  });
  return 0;
}
