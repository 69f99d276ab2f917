// Sequence parallelism in the layer graph (TrainSettings::sequence_shards): the kernels outside the
// tensor-parallel regions run on 1/sp of the tokens, nothing else changes.
#include <gtest/gtest.h>

#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/ir/layer_graph.hpp"

using namespace scaledl;

namespace {
ModelSpec model(const std::string& name) {
  return load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/" + name + ".json");
}
TrainSettings settings(int64_t sp) {
  TrainSettings s;
  s.batch = 2;
  s.seq_len = 64;
  s.dtype = DType::BF16;
  s.sequence_shards = sp;
  return s;
}
}  // namespace

TEST(SequenceShards, NormsResidualsAndDropoutsRunOnTheGpusShareOfTheTokens) {
  for (const char* name : {"gpt2", "qwen2-0.5b", "bert-base"}) {
    const ModelSpec m = model(name);
    const LayerGraph full = build_layer_graph(m, settings(1));
    const LayerGraph sp = build_layer_graph(m, settings(4));
    ASSERT_EQ(full.nodes.size(), sp.nodes.size()) << name;
    int shrunk = 0;
    for (size_t i = 0; i < full.nodes.size(); ++i) {
      const LayerNode &a = full.nodes[i], &b = sp.nodes[i];
      ASSERT_EQ(a.name, b.name);
      const bool outside_tp = a.block >= 0 && (a.name.find("norm") != std::string::npos ||
                                               a.name.find("residual") != std::string::npos ||
                                               a.name.find("out_dropout") != std::string::npos ||
                                               a.name.find("ffn.dropout") != std::string::npos);
      if (outside_tp && a.name.find("q_norm") == std::string::npos &&
          a.name.find("k_norm") == std::string::npos) {
        EXPECT_NEAR(b.cost.flops_fwd * 4, a.cost.flops_fwd, 1e-6 * a.cost.flops_fwd) << name << " " << a.name;
        ++shrunk;
      } else if (a.type == LayerType::Linear || a.type == LayerType::Embedding) {
        EXPECT_EQ(a.dims, b.dims) << name << " " << a.name;  // the tensor-parallel regions keep every token
      }
    }
    EXPECT_GE(shrunk, 2 * m.num_layers) << name;
  }
}

TEST(SequenceShards, StoredOnlyWhenOnAndRefusedWhereNotModelled) {
  TrainSettings s = settings(1);
  EXPECT_FALSE(s.to_json().contains("sequence_shards"));  // the keys of earlier runs stay
  s.sequence_shards = 8;
  EXPECT_EQ(parse_train_settings(s.to_json()).sequence_shards, 8);
  auto err = [](const std::string& name) {
    try {
      build_layer_graph(model(name), settings(2));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("t5-small").find("sequence parallelism of t5-small is not modelled"), std::string::npos);
  EXPECT_NE(err("mixtral-8x7b").find("mixture of experts"), std::string::npos);
  EXPECT_NE(err("vit-base").find("not modelled"), std::string::npos);
}
