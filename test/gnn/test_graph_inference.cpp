// The refinement's forward pass without LibTorch (graph_inference.hpp): the Eigen model
// gives LibTorch's GnnPrediction (alpha, beta, T_pred within 1e-5 relative; the
// out-of-domain distance, its column and the forward-part flag exactly) for every
// variant of the config, trained or not, from memory or from the weights file; and it
// refuses a damaged file as GraphPredictor::load does, with the same message.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "gnn/safetensors.hpp"
#include "gnn_test_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/gnn/graph_inference.hpp"

using namespace scaledl;
using namespace scaledl::test;

namespace {

constexpr double kRel = 1e-5;

void expect_same(const GnnPrediction& ref, const GnnPrediction& got, const std::string& what) {
  ASSERT_EQ(ref.alpha.size(), got.alpha.size()) << what;
  ASSERT_EQ(ref.beta.size(), got.beta.size()) << what;
  ASSERT_EQ(ref.t_pred_ms.size(), got.t_pred_ms.size()) << what;
  ASSERT_EQ(ref.ood_distance.size(), got.ood_distance.size()) << what;
  ASSERT_EQ(ref.ood_column.size(), got.ood_column.size()) << what;
  ASSERT_EQ(ref.alpha_from_forward.size(), got.alpha_from_forward.size()) << what;
  for (size_t i = 0; i < ref.alpha.size(); ++i) {
    const std::string at = what + " graph " + std::to_string(i);
    EXPECT_NEAR(got.alpha[i], ref.alpha[i], kRel * std::fabs(ref.alpha[i])) << at;
    EXPECT_NEAR(got.beta[i], ref.beta[i], kRel * std::fabs(ref.beta[i])) << at;
    EXPECT_NEAR(got.t_pred_ms[i], ref.t_pred_ms[i], kRel * std::fabs(ref.t_pred_ms[i])) << at;
    EXPECT_TRUE(std::isfinite(got.t_pred_ms[i]) && got.t_pred_ms[i] > 0) << at;
    EXPECT_EQ(got.ood_distance[i], ref.ood_distance[i]) << at;
    EXPECT_EQ(got.ood_column[i], ref.ood_column[i]) << at;
    EXPECT_EQ(got.alpha_from_forward[i], ref.alpha_from_forward[i]) << at;
  }
}

LayerGraph with_mode(LayerGraph g, RunMode m) {
  set_run_mode(g.settings, m);
  return build_layer_graph(g.model, g.settings);
}

/// Training-range graphs (inference only when `inference`) and graphs to predict: inside
/// and outside that range, fwd-bwd runs with a forward part, uncompressed, compressed, and
/// compressed with node weights of their own.
struct Sets {
  std::vector<GraphFeatures> fit, predict;
};

Sets graph_sets(bool inference) {
  Sets s;
  for (const char* model : {"bert-base.json", "gpt2.json"})
    for (int64_t batch : {2, 8})
      for (int64_t seq : {32, 128}) {
        LayerGraph g = small_graph(model, 1 + batch % 3, batch, seq, batch == 8 ? 2 : 1);
        if (inference) g = with_mode(g, RunMode::Inference);
        s.fit.push_back(labelled(g));
      }
  s.predict = s.fit;
  s.predict.push_back(labelled(small_graph("bert-base.json", 2, 4, 64, 4)));  // inside or near
  s.predict.push_back(labelled(small_graph("gpt2.json", 3, 64, 512, 8)));     // far outside
  s.predict.push_back(labelled(with_mode(small_graph("bert-base.json", 2, 4, 64), RunMode::FwdBwd)));
  s.predict.push_back(labelled(with_mode(small_graph("gpt2.json", 1, 8, 128), RunMode::Train)));
  GraphFeatures c = compress_graph(s.predict[1], 2);
  s.predict.push_back(c);
  for (size_t i = 0; i < c.node_weight.size(); ++i)
    c.node_weight[i] *= 1.f + 0.5f * static_cast<float>(i % 3);
  s.predict.push_back(c);  // weights no compression gives: the readout must use them as they are
  return s;
}

std::vector<const GraphFeatures*> ptrs(const std::vector<GraphFeatures>& v) {
  std::vector<const GraphFeatures*> p;
  for (const auto& g : v) p.push_back(&g);
  return p;
}

/// An untrained model of `cfg`, its encoder's weights spread (x2.5) so that the
/// nonlinearities (ELU's and LeakyReLU's negative sides, uneven attention) all act, and its
/// output kept within a few units (a sum over a graph's nodes is large): float32 gives an
/// output o to about 1e-7 |o|, and exp(o) then to as much relative error.
GraphPredictor untrained(const GnnConfig& cfg, const std::vector<GraphFeatures>& fit, uint64_t seed) {
  torch::manual_seed(seed);
  GraphPredictor p(cfg, Normalizer::fit(ptrs(fit), "minmax"));
  torch::NoGradGuard ng;
  for (auto& kv : p.model()->named_parameters())
    if (kv.key().rfind("encoder.", 0) == 0) kv.value().mul_(2.5);
  if (cfg.readout == "sum") p.model()->named_parameters()["head.2.weight"].mul_(0.05);
  p.model()->log_t_offset.fill_(1.7);
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void restamp(SafeTensors& st) {
  st.metadata["content_sha256"] = safetensors_content_sha256(st);
}

}  // namespace

TEST(GraphInference, WeightShapesAreThoseOfTheLibTorchModel) {
  for (const char* enc : {"transformerconv", "anee"})
    for (bool global : {true, false})
      for (const char* target : {"alpha-beta", "direct"}) {
        GnnConfig c;
        c.encoder = enc;
        c.global_branch = global;
        c.target = target;
        c.layers = 3;
        c.heads = 3;
        c.hidden = 10;
        GnnModel m(c);
        std::vector<std::pair<std::string, std::vector<int64_t>>> torch_shapes;
        for (const auto& kv : m->named_parameters())
          torch_shapes.push_back({kv.key(), kv.value().sizes().vec()});
        for (const auto& kv : m->named_buffers())
          torch_shapes.push_back({kv.key(), kv.value().sizes().vec()});
        std::sort(torch_shapes.begin(), torch_shapes.end());
        EXPECT_EQ(GraphInference::weight_shapes(c), torch_shapes) << enc << " " << global << " " << target;
      }
}

TEST(GraphInference, UntrainedModelsOfEveryVariantMatchLibTorch) {
  const Sets train_like = graph_sets(false), inference_only = graph_sets(true);
  int variants = 0, ood = 0, from_forward = 0, shrunk = 0;
  for (const char* enc : {"transformerconv", "anee"})
    for (const char* readout : {"mean", "sum"})
      for (const char* target : {"alpha-beta", "direct"})
        for (int v = 0; v < 4; ++v) {
          GnnConfig c;
          c.encoder = enc;
          c.readout = readout;
          c.target = target;
          c.global_branch = v != 1;
          c.device_memory_feature = v == 2;
          c.ood_tau = v == 3 ? 0.0 : v == 2 ? 0.4 : 1.0;
          c.alpha_bound = v == 1 ? 1.5 : v == 2 ? 40.0 : 4.0;
          c.layers = 1 + v % 3;
          c.heads = v == 2 ? 3 : 1 + v % 2;  // 3 heads of 10: d_k = 3, not hidden / heads exactly
          c.hidden = v == 2 ? 10 : 8;
          c.z_hidden = 6;
          c.mlp_hidden = 7;
          // Fitted on inference runs only, the fwd-bwd runs take their forward part's alpha.
          const Sets& s = v % 2 == 0 ? inference_only : train_like;
          const std::string what = fmt::format("{} {} {} variant {}", enc, readout, target, v);
          const GraphPredictor p = untrained(c, s.fit, 11 + v);
          const GnnPrediction ref = p.predict(s.predict);
          expect_same(ref, p.inference()->predict(s.predict), what);
          expect_same(ref, p.inference()->predict(ptrs(s.predict)), what + " (pointers)");
          // From the file, without LibTorch.
          const std::string path = ::testing::TempDir() + "/inference_variant.safetensors";
          p.save(path);
          expect_same(ref, GraphInference::load(path).predict(s.predict), what + " (file)");
          ++variants;
          for (size_t i = 0; i < ref.alpha.size(); ++i) {
            ood += ref.ood_distance[i] > 0;
            from_forward += ref.alpha_from_forward[i];
            shrunk += c.ood_tau > 0 && ref.ood_distance[i] > 0 && !ref.alpha_from_forward[i];
          }
        }
  EXPECT_EQ(variants, 32);
  EXPECT_GT(ood, 32) << "graphs outside the training range: the shrinkage is tested";
  EXPECT_GT(shrunk, 16);
  EXPECT_GT(from_forward, 8) << "runs that take their forward part's alpha";
}

TEST(GraphInference, NodeWeightsAndEmptyGraphsOfEdges) {
  // One node, no edges: the softmax has nothing to do; the readout still weighs the node.
  const Sets s = graph_sets(false);
  GraphFeatures one = compress_graph(s.predict[0], 2);
  const size_t F = node_feature_names().size();
  one.num_nodes = 1;
  one.num_edges = 0;
  one.x.resize(F);
  one.src.clear();
  one.dst.clear();
  one.e.clear();
  one.node_weight = {7.f};
  for (const char* enc : {"transformerconv", "anee"})
    for (const char* readout : {"mean", "sum"}) {
      GnnConfig c;
      c.encoder = enc;
      c.readout = readout;
      const GraphPredictor p = untrained(c, s.fit, 5);
      expect_same(p.predict(std::vector<GraphFeatures>{one}),
                  p.inference()->predict(std::vector<GraphFeatures>{one}), std::string(enc) + " " + readout);
    }
}

TEST(GraphInference, TrainedModelsMatchLibTorchFromMemoryAndFromTheirFile) {
  const Sets s = graph_sets(false);
  GnnTrainOptions o;
  o.epochs = 8;
  o.batch_size = 4;
  o.seed = 3;
  for (const char* enc : {"transformerconv", "anee"}) {
    GnnConfig c;
    c.encoder = enc;
    const GraphPredictor p = GraphPredictor::train(s.fit, c, o);
    const GnnPrediction ref = p.predict(s.predict);
    expect_same(ref, p.inference()->predict(s.predict), std::string(enc) + " trained");
    const std::string path = ::testing::TempDir() + "/inference_trained_" + enc + ".safetensors";
    p.save(path, {{"note", "trained"}});
    const GraphInference f = GraphInference::load(path);
    EXPECT_EQ(f.metadata().at("note"), "trained");
    EXPECT_EQ(f.config().to_json(), p.config().to_json());
    expect_same(ref, f.predict(s.predict), std::string(enc) + " trained, from the file");
    const GraphPredictor q = GraphPredictor::load(path);
    expect_same(q.predict(s.predict), q.inference()->predict(s.predict), std::string(enc) + " reloaded");
    EXPECT_EQ(q.inference()->metadata().at("note"), "trained");

    // A weight changed in place after the first use: the Eigen model follows it.
    GraphPredictor r = GraphPredictor::load(path);
    const auto before = r.inference();
    {
      torch::NoGradGuard ng;
      r.model()->parameters().front().mul_(1.5);
    }
    const GnnPrediction changed = r.predict(s.predict);
    EXPECT_NE(changed.t_pred_ms[0], ref.t_pred_ms[0]);
    expect_same(changed, r.inference()->predict(s.predict), std::string(enc) + " after a weight changed");
    EXPECT_NE(before, r.inference());
    EXPECT_EQ(r.inference(), r.inference()) << "built once per change";
  }
}

TEST(GraphInference, AnEnsembleGivesTheGeometricMeanOfItsMembers) {
  // Members of a bundle's refinement (train --graph-members): each predicts with its own
  // normalisation and shrinkage; the ensemble's alpha and beta are the geometric means of theirs,
  // T_pred eq. 2 of them; the out-of-domain fields are the first member's.
  const Sets s = graph_sets(false);
  GnnTrainOptions o;
  o.epochs = 6;
  o.batch_size = 4;
  GnnConfig c;
  std::vector<GnnPrediction> alone;
  std::vector<GraphInference> ms;
  for (uint64_t seed : {1, 2, 3}) {
    o.seed = seed;
    const GraphPredictor p = GraphPredictor::train(s.fit, c, o);
    const std::string path = ::testing::TempDir() + "/member_" + std::to_string(seed) + ".safetensors";
    p.save(path, {});
    ms.push_back(GraphInference::load(path));
    alone.push_back(ms.back().predict(s.predict));
  }
  GraphInference e = ms[0];
  e.add_member(ms[1], "member 2");
  e.add_member(ms[2], "member 3");
  EXPECT_EQ(e.members(), 3u);
  EXPECT_EQ(ms[0].members(), 1u);  // copies: the first member alone is unchanged
  expect_same(alone[0], ms[0].predict(s.predict), "the first member alone");
  const GnnPrediction got = e.predict(s.predict);
  bool differ = false;
  for (size_t i = 0; i < s.predict.size(); ++i) {
    const double a = std::cbrt(alone[0].alpha[i] * alone[1].alpha[i] * alone[2].alpha[i]);
    const double b = std::cbrt(alone[0].beta[i] * alone[1].beta[i] * alone[2].beta[i]);
    EXPECT_NEAR(got.alpha[i], a, 1e-9 * a) << i;
    EXPECT_NEAR(got.beta[i], b, 1e-9 * b) << i;
    EXPECT_NEAR(got.t_pred_ms[i], a * s.predict[i].t_sum_ms + b * s.predict[i].t_comm_ms,
                1e-9 * got.t_pred_ms[i]);
    EXPECT_EQ(got.ood_distance[i], alone[0].ood_distance[i]);
    EXPECT_EQ(got.ood_column[i], alone[0].ood_column[i]);
    differ = differ || std::fabs(alone[1].alpha[i] / alone[0].alpha[i] - 1) > 1e-4;
  }
  EXPECT_TRUE(differ) << "the seeds gave the same model: the test would not see the mean";
  // A member of another configuration, or an ensemble as a member: refused.
  GnnConfig other = c;
  other.hidden = 16;
  o.seed = 4;
  const std::string path = ::testing::TempDir() + "/member_other.safetensors";
  GraphPredictor::train(s.fit, other, o).save(path, {});
  EXPECT_NE(error_of([&] {
              e.add_member(GraphInference::load(path), "m.safetensors");
            }).find("m.safetensors: config "),
            std::string::npos);
  EXPECT_EQ(error_of([&] { ms[1].add_member(e, "e"); }), "e: an ensemble member is itself an ensemble");
  EXPECT_EQ(e.members(), 3u);
}

TEST(GraphInference, ShippedDefaultModelOnRealLayerGraphs) {
  const std::string path = std::string(SCALEDL_SOURCE_DIR) + "/models/bundles/default/graph.safetensors";
  const GraphPredictor p = GraphPredictor::load(path);
  const GraphInference f = GraphInference::load(path);
  GraphContext ctx;
  ctx.device = load_device_spec(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/h100-sxm.json");
  ctx.forward_part = p.alpha_from_forward_part();
  EXPECT_EQ(f.alpha_from_forward_part(), p.alpha_from_forward_part());
  std::vector<GraphFeatures> gs;
  for (const auto& [model, batch, seq, mode, devices] :
       {std::make_tuple("gpt2-large.json", 4, 1024, RunMode::FwdBwd, 1),
        std::make_tuple("gpt2-large.json", 4, 1024, RunMode::Train, 1),
        std::make_tuple("bert-base.json", 32, 128, RunMode::Train, 1),
        std::make_tuple("bert-base.json", 32, 128, RunMode::Inference, 1),
        std::make_tuple("bert-base.json", 32, 128, RunMode::Train, 8)}) {
    ModelSpec m = load_model_config(std::string(SCALEDL_SOURCE_DIR) + "/models/" + model);
    TrainSettings st;
    st.batch = batch;
    st.seq_len = seq;
    st.num_devices = devices;
    set_run_mode(st, mode);
    const LayerGraph g = build_layer_graph(m, st);
    // Roofline times of the H100 at 60 % of its peaks, plus 5 us a kernel.
    std::vector<double> t;
    for (const auto& n : g.nodes) {
      const double bytes = n.cost.in_bytes + n.cost.out_bytes + n.cost.weight_bytes;
      t.push_back(std::max(n.flops() / (0.6e9 * ctx.device.compute_gflops()),
                           bytes / (0.6e9 * ctx.device.bandwidth_gbs())) *
                      1e3 +
                  0.005);
    }
    // The bundle's graph model saw one device (no all-reduce): 8 are out of its domain.
    GraphContext c = ctx;
    if (devices > 1) c.comm = CommModel{100e9, 20e-6};
    gs.push_back(featurize(g, t, c));
  }
  const GnnPrediction ref = p.predict(gs);
  expect_same(ref, f.predict(gs), "default bundle's graph model, from its file");
  expect_same(ref, p.inference()->predict(gs), "default bundle's graph model, through GraphPredictor");
  for (size_t i = 0; i + 1 < gs.size(); ++i) {
    EXPECT_LT(ref.ood_distance[i], 0.5) << i << ": inside or near the domain, refined";
    EXPECT_GT(std::fabs(ref.alpha[i] - 1.0), 1e-3) << i;
  }
  EXPECT_GT(ref.ood_distance.back(), 1.0) << "8 devices: shrunk toward the plain sum";
}

TEST(GraphInference, RefusesADamagedFileAsGraphPredictorDoes) {
  const Sets s = graph_sets(false);
  GnnConfig c;
  const GraphPredictor p = untrained(c, s.fit, 2);
  const std::string path = ::testing::TempDir() + "/inference_damaged.safetensors";
  p.save(path);
  // Same message from both readers, naming the file and `expect`.
  auto same_refusal = [&](const std::string& file, const std::string& expect) {
    const std::string a = error_of([&] { GraphInference::load(file); });
    const std::string b = error_of([&] { GraphPredictor::load(file); });
    EXPECT_EQ(a, b) << file;
    EXPECT_NE(a.find(file), std::string::npos) << a;
    EXPECT_NE(a.find(expect), std::string::npos) << a;
  };
  std::stringstream ss;
  ss << std::ifstream(path, std::ios::binary).rdbuf();
  const std::string raw = ss.str();
  std::ofstream(path + ".cut", std::ios::binary) << raw.substr(0, raw.size() / 2);
  same_refusal(path + ".cut", "data_offsets");
  std::ofstream(path + ".head", std::ios::binary) << raw.substr(0, 5);
  same_refusal(path + ".head", "truncated");
  same_refusal(path + ".absent", "cannot open");
  same_refusal(::testing::TempDir(), "not a regular file");

  SafeTensors st = load_safetensors(path);
  auto it = st.tensors.find("model.encoder.lin_in.weight");
  ASSERT_NE(it, st.tensors.end());
  it->second.view(-1)[3] = 0.25f;  // same size, one weight changed: the checksum
  save_safetensors(path + ".w", st);
  same_refusal(path + ".w", "content_sha256 does not match");
  it->second.view(-1)[3] = INFINITY;
  restamp(st);
  save_safetensors(path + ".inf", st);
  same_refusal(path + ".inf", "NaN/Inf");

  st = load_safetensors(path);
  st.tensors.erase("model.head.2.bias");
  restamp(st);
  save_safetensors(path + ".miss", st);
  same_refusal(path + ".miss", "'model.head.2.bias' is missing");

  st = load_safetensors(path);
  st.tensors["model.head.2.bias"] = torch::zeros({3});
  restamp(st);
  save_safetensors(path + ".shape", st);
  same_refusal(path + ".shape", "has shape 3, expected 2");

  st = load_safetensors(path);
  st.tensors["model.extra"] = torch::zeros({1});
  restamp(st);
  save_safetensors(path + ".extra", st);
  same_refusal(path + ".extra", "config mismatch");

  st = load_safetensors(path);
  st.metadata["format_version"] = "2";
  restamp(st);
  save_safetensors(path + ".v2", st);
  same_refusal(path + ".v2", "__metadata__.format_version=2");

  st = load_safetensors(path);
  st.metadata["global_features"] = "[\"log_batch\"]";
  restamp(st);
  save_safetensors(path + ".feat", st);
  same_refusal(path + ".feat", "__metadata__.global_features");

  st = load_safetensors(path);
  st.tensors["norm.x_lo"] = st.tensors["norm.x_hi"] + 1;
  restamp(st);
  save_safetensors(path + ".range", st);
  same_refusal(path + ".range", "norm.x_lo");

  // Weights in memory: named in the message too.
  std::map<std::string, GraphInference::Weight> w;
  for (const auto& [name, shape] : GraphInference::weight_shapes(c)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    w[name] = {shape, std::vector<float>(n, 0.f)};
  }
  EXPECT_NO_THROW(GraphInference(c, p.normalizer(), w));
  auto w2 = w;
  w2.erase("head.0.weight");
  EXPECT_NE(error_of([&] { GraphInference(c, p.normalizer(), w2); }).find("'model.head.0.weight' is missing"),
            std::string::npos);
  w2 = w;
  w2["head.0.bias"].values[0] = NAN;
  EXPECT_NE(error_of([&] { GraphInference(c, p.normalizer(), w2); }).find("NaN/Inf"), std::string::npos);
  w2 = w;
  w2["encoder.wu.weight"] = {{2, 2}, {0, 0, 0, 0}};
  EXPECT_NE(error_of([&] { GraphInference(c, p.normalizer(), w2); }).find("config mismatch"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { GraphInference().predict(std::vector<GraphFeatures>{}); }).find("not trained or loaded"),
      std::string::npos);
}
