// Graph refinement: features, batching, encoders (eq. 11-13, ANEE), the dual
// branch head (eq. 14), training, and the weights file.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "gnn/safetensors.hpp"
#include "gnn_test_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/gnn/gnn.hpp"

using namespace scaledl;
using namespace scaledl::test;

namespace {

std::vector<GraphFeatures> ten_graphs() {
  std::vector<GraphFeatures> v;
  const int64_t cfg[10][4] = {{1, 8, 128, 1}, {2, 4, 64, 1},  {1, 16, 32, 2},  {2, 8, 256, 4}, {1, 2, 128, 1},
                              {2, 32, 64, 2}, {1, 4, 512, 8}, {2, 16, 128, 1}, {1, 1, 64, 4},  {2, 2, 32, 1}};
  for (int i = 0; i < 10; ++i)
    v.push_back(labelled(small_graph(i % 3 == 2 ? "gpt2.json" : "bert-base.json", cfg[i][0], cfg[i][1],
                                     cfg[i][2], cfg[i][3])));
  return v;
}

const std::vector<GraphFeatures>& graphs10() {
  static const std::vector<GraphFeatures> g = ten_graphs();
  return g;
}

/// The same graph with nodes renumbered by a random permutation and edges shuffled.
GraphFeatures permuted(const GraphFeatures& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> perm(g.num_nodes);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);  // new id of old node i = perm[i]
  GraphFeatures p = g;
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size();
  for (int64_t i = 0; i < g.num_nodes; ++i)
    std::copy(g.x.begin() + i * F, g.x.begin() + (i + 1) * F, p.x.begin() + perm[i] * F);
  std::vector<int64_t> eperm(g.num_edges);
  std::iota(eperm.begin(), eperm.end(), 0);
  std::shuffle(eperm.begin(), eperm.end(), rng);
  for (int64_t k = 0; k < g.num_edges; ++k) {
    const int64_t o = eperm[k];
    p.src[k] = perm[g.src[o]];
    p.dst[k] = perm[g.dst[o]];
    std::copy(g.e.begin() + o * Fe, g.e.begin() + (o + 1) * Fe, p.e.begin() + k * Fe);
  }
  return p;
}

GraphPredictor untrained(const GnnConfig& cfg, const std::vector<GraphFeatures>& gs, uint64_t seed = 3) {
  std::vector<const GraphFeatures*> ptr;
  for (const auto& g : gs) ptr.push_back(&g);
  torch::manual_seed(seed);
  return GraphPredictor(cfg, Normalizer::fit(ptr, "minmax"));
}

/// Training on every graph (no validation split, no early stop) for `epochs`.
GnnTrainOptions fit_all(int64_t epochs, uint64_t seed) {
  GnnTrainOptions o;
  o.epochs = epochs;
  o.val_fraction = 0;
  o.patience = epochs;
  o.lr = 5e-3;
  o.seed = seed;
  return o;
}

GnnConfig config(const std::string& enc) {
  GnnConfig c;
  c.encoder = enc;
  return c;
}

}  // namespace

TEST(Features, ShapesMatchNamesAndGraph) {
  const LayerGraph g = small_graph("bert-base.json", 1, 4, 64, 2);
  const GraphFeatures f = labelled(g);
  EXPECT_EQ(f.num_nodes, static_cast<int64_t>(g.nodes.size()));
  EXPECT_EQ(f.num_edges, static_cast<int64_t>(g.edges.size()));
  EXPECT_EQ(f.x.size(), g.nodes.size() * node_feature_names().size());
  EXPECT_EQ(f.e.size(), g.edges.size() * edge_feature_names().size());
  EXPECT_EQ(f.z.size(), global_feature_names().size());
  EXPECT_GT(f.t_comm_ms, 0.0);  // 2 devices => an all-reduce
  const std::vector<double> t = roofline_ms(g);
  EXPECT_NEAR(f.t_sum_ms, std::accumulate(t.begin(), t.end(), 0.0), 1e-9);
  // Each node has exactly one type and one direction.
  const size_t F = node_feature_names().size(), T = all_layer_infos().size();
  for (int64_t i = 0; i < f.num_nodes; ++i) {
    EXPECT_FLOAT_EQ(std::accumulate(&f.x[i * F], &f.x[i * F] + T, 0.f), 1.f);
    EXPECT_FLOAT_EQ(std::accumulate(&f.x[i * F] + T, &f.x[i * F] + T + 3, 0.f), 1.f);
  }
}

TEST(Features, BadLayerTimesNameTheNode) {
  const LayerGraph g = small_graph("bert-base.json", 1, 2, 32);
  GraphContext ctx;
  ctx.device = test_device();
  std::vector<double> t = roofline_ms(g);
  t[3] = NAN;
  try {
    featurize(g, t, ctx);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(g.nodes[3].name), std::string::npos) << e.what();
  }
  t.pop_back();
  EXPECT_THROW(featurize(g, t, ctx), Error);
}

TEST(Batch, DisjointUnionShiftsNodeIds) {
  const auto& gs = graphs10();
  std::vector<const GraphFeatures*> two = {&gs[0], &gs[1]};
  GraphBatch b = collate(two, Normalizer::fit(two, "standard"));
  EXPECT_EQ(b.x.size(0), gs[0].num_nodes + gs[1].num_nodes);
  EXPECT_EQ(b.edge_index.size(1), gs[0].num_edges + gs[1].num_edges);
  EXPECT_EQ(b.batch[gs[0].num_nodes].item<int64_t>(), 1);
  EXPECT_EQ(b.edge_index[0][gs[0].num_edges].item<int64_t>(), gs[1].src[0] + gs[0].num_nodes);
  // Standardised columns have zero mean over the fitted set.
  EXPECT_LT(b.x.mean(0).abs().max().item<float>(), 1e-4);
}

namespace {

/// t_pred of an untrained model on `gs`, each graph compressed with `rounds` (0 = not compressed).
std::vector<double> predict_raw(GraphPredictor& p, const std::vector<GraphFeatures>& gs, int64_t rounds) {
  std::vector<GraphFeatures> use;
  for (const auto& g : gs) use.push_back(rounds > 0 ? compress_graph(g, rounds) : g);
  std::vector<const GraphFeatures*> ptr;
  for (const auto& g : use) ptr.push_back(&g);
  torch::NoGradGuard ng;
  torch::Tensor t = p.model()->forward(collate(ptr, p.normalizer())).t_pred.to(torch::kFloat64).contiguous();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

/// Weighted-mean node embedding of each graph (the readout before the head), [G, hidden].
torch::Tensor pooled(GraphPredictor& p, const std::vector<GraphFeatures>& gs, int64_t rounds) {
  std::vector<GraphFeatures> use;
  for (const auto& g : gs) use.push_back(rounds > 0 ? compress_graph(g, rounds) : g);
  std::vector<const GraphFeatures*> ptr;
  for (const auto& g : use) ptr.push_back(&g);
  torch::NoGradGuard ng;
  GraphBatch b = collate(ptr, p.normalizer());
  torch::Tensor h = p.model()->encoder->forward(b.x, b.edge_index, b.edge_attr) * b.node_weight.unsqueeze(1);
  torch::Tensor s = torch::zeros({b.num_graphs, h.size(1)}).index_add_(0, b.batch, h);
  return s / torch::zeros({b.num_graphs}).index_add_(0, b.batch, b.node_weight).unsqueeze(1);
}

/// max |a - b| / max |b|
double emb_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
  return m;
}

}  // namespace

TEST(Compress, RepeatedBlocksCollapseAndWeightsCountNodes) {
  const GraphFeatures g = labelled(small_graph("bert-base.json", 12, 8, 128));
  const GraphFeatures c = compress_graph(g, 2);
  EXPECT_LT(c.num_nodes * 3, g.num_nodes) << c.num_nodes << " of " << g.num_nodes;
  ASSERT_EQ(c.node_weight.size(), static_cast<size_t>(c.num_nodes));
  EXPECT_FLOAT_EQ(std::accumulate(c.node_weight.begin(), c.node_weight.end(), 0.f), g.num_nodes);
  EXPECT_EQ(c.x.size(), c.num_nodes * node_feature_names().size());
  EXPECT_EQ(c.e.size(), c.num_edges * edge_feature_names().size());
  for (int64_t k = 0; k < c.num_edges; ++k) {
    EXPECT_TRUE(c.src[k] >= 0 && c.src[k] < c.num_nodes && c.dst[k] >= 0 && c.dst[k] < c.num_nodes);
  }
  EXPECT_EQ(c.t_sum_ms, g.t_sum_ms);
  EXPECT_EQ(c.z, g.z);
  // More rounds tell more nodes apart; a 1-layer model needs fewer classes.
  EXPECT_LE(compress_graph(g, 1).num_nodes, c.num_nodes);
  EXPECT_GE(compress_graph(g, 4).num_nodes, c.num_nodes);
}

TEST(Compress, SamePredictionsAsTheWholeGraph) {
  std::vector<GraphFeatures> gs = {labelled(small_graph("bert-base.json", 12, 8, 128)),
                                   labelled(small_graph("gpt2.json", 6, 4, 64, 4)), graphs10()[3]};
  for (const char* enc : {"transformerconv", "anee"})
    for (const char* readout : {"mean", "sum"})
      for (int64_t layers : {1, 2, 3}) {
        GnnConfig c = config(enc);
        c.readout = readout;
        c.layers = layers;
        GraphPredictor p = untrained(c, gs);
        const std::vector<double> whole = predict_raw(p, gs, 0);
        // float32 sums in another order: agreement to 1e-4 relative.
        EXPECT_LT(max_rel_diff(predict_raw(p, gs, layers), whole), 1e-4)
            << enc << " " << readout << " " << layers;
        // The public predict() compresses internally and agrees too.
        EXPECT_LT(max_rel_diff(p.predict(gs).t_pred_ms, whole), 1e-4)
            << enc << " " << readout << " " << layers;
        // The graph embeddings agree as closely; with fewer rounds than layers,
        // nodes whose embeddings differ are merged and they do not.
        const torch::Tensor emb = pooled(p, gs, 0);
        EXPECT_LT(emb_diff(pooled(p, gs, layers), emb), 1e-5) << enc << " " << readout << " " << layers;
        if (layers >= 2)
          EXPECT_GT(emb_diff(pooled(p, gs, layers - 1), emb), 1e-4) << enc << " " << readout << " " << layers;
      }
}

TEST(Compress, RejectsBadInput) {
  const GraphFeatures g = graphs10()[0];
  EXPECT_THROW(compress_graph(g, 0), Error);
  const GraphFeatures c = compress_graph(g, 2);
  try {
    compress_graph(c, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already compressed"), std::string::npos) << e.what();
  }
  GraphFeatures bad = g;
  bad.dst[0] = g.num_nodes;
  try {
    compress_graph(bad, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("edge[0]"), std::string::npos) << e.what();
  }
}

TEST(Encoders, AttentionOfEachNodeSumsToOne) {
  for (const char* enc : {"transformerconv", "anee"}) {
    GraphPredictor p = untrained(config(enc), graphs10());
    std::vector<const GraphFeatures*> ptr = {&graphs10()[0], &graphs10()[3]};
    GraphBatch b = collate(ptr, p.normalizer());
    torch::NoGradGuard ng;
    p.model()->forward(b);
    const int64_t N = b.x.size(0);
    torch::Tensor dst = b.edge_index[1];
    torch::Tensor indeg = torch::zeros({N}).index_add_(0, dst, torch::ones({dst.size(0)}));
    for (int64_t l = 0; l < p.config().layers; ++l) {
      torch::Tensor w = p.model()->encoder->attention(l);
      ASSERT_EQ(w.size(0), dst.size(0)) << enc;
      torch::Tensor sums = torch::zeros({N, w.size(1)}).index_add_(0, dst, w);
      torch::Tensor has = indeg > 0;
      EXPECT_LT((sums.index({has}) - 1).abs().max().item<float>(), 1e-5) << enc << " layer " << l;
      EXPECT_EQ(sums.index({~has}).abs().sum().item<float>(), 0.f);
      EXPECT_GE(w.min().item<float>(), 0.f);
    }
  }
}

TEST(Encoders, SegmentSoftmaxIsStableForHugeScores) {
  torch::Tensor s = torch::tensor({1000.f, 990.f, -1000.f, 5.f}).view({4, 1});
  torch::Tensor dst = torch::tensor({0, 0, 1, 1}, torch::kInt64);
  torch::Tensor w = segment_softmax(s, dst, 2);
  EXPECT_TRUE(torch::isfinite(w).all().item<bool>());
  EXPECT_NEAR(w[0].item<float>() + w[1].item<float>(), 1.f, 1e-6);
  EXPECT_NEAR(w[3].item<float>(), 1.f, 1e-6);
}

TEST(Encoders, OutputInvariantToNodeAndEdgeOrder) {
  for (const char* enc : {"transformerconv", "anee"}) {
    for (const char* readout : {"mean", "sum"}) {
      GnnConfig c = config(enc);
      c.readout = readout;
      GraphPredictor p = untrained(c, graphs10());
      std::vector<GraphFeatures> a = {graphs10()[1], graphs10()[5]};
      std::vector<GraphFeatures> b = {permuted(a[0], 11), permuted(a[1], 12)};
      GnnPrediction pa = p.predict(a), pb = p.predict(b);
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(pa.t_pred_ms[i] / pb.t_pred_ms[i], 1.0, 1e-5) << enc << " " << readout;
        EXPECT_NEAR(pa.alpha[i], pb.alpha[i], 1e-5 * std::fabs(pa.alpha[i]) + 1e-6);
      }
    }
  }
}

TEST(Encoders, GradientMatchesFiniteDifferencesInDouble) {
  for (const char* enc : {"transformerconv", "anee"}) {
    GnnConfig c = config(enc);
    c.hidden = 6;
    c.heads = 2;
    c.z_hidden = 4;
    c.mlp_hidden = 5;
    const GraphFeatures g = labelled(small_graph("bert-base.json", 1, 2, 16, 2));
    GraphPredictor p = untrained(c, {g}, 5);
    GnnModel m = p.model();
    m->to(torch::kFloat64);
    GraphBatch b = collate({&g}, p.normalizer(), torch::kFloat64);
    auto loss_of = [&] { return m->forward(b).log_t_pred.sum(); };
    m->zero_grad();
    loss_of().backward();
    torch::NoGradGuard ng;
    int checked = 0;
    for (auto& kv : m->named_parameters()) {
      torch::Tensor w = kv.value();
      torch::Tensor grad = w.grad();
      ASSERT_TRUE(grad.defined()) << kv.key();
      torch::Tensor flat = w.view({-1});
      for (int64_t k : {int64_t(0), flat.numel() / 2, flat.numel() - 1}) {
        const double orig = flat[k].item<double>(), h = 1e-6;
        flat[k].fill_(orig + h);
        const double up = loss_of().item<double>();
        flat[k].fill_(orig - h);
        const double dn = loss_of().item<double>();
        flat[k].fill_(orig);
        const double fd = (up - dn) / (2 * h), an = grad.view({-1})[k].item<double>();
        EXPECT_NEAR(an, fd, 1e-6 + 1e-5 * std::fabs(fd)) << enc << " " << kv.key() << "[" << k << "]";
        ++checked;
      }
    }
    EXPECT_GT(checked, 20);
  }
}

TEST(Training, OverfitsTenGraphsBelowOnePercent) {
  GnnTrainOptions o = fit_all(400, 1);
  GnnTrainReport r;
  GraphPredictor p = GraphPredictor::train(graphs10(), config("transformerconv"), o, &r);
  EXPECT_LT(r.train_mre, 0.01) << r.to_json().dump();
  EXPECT_GT(r.train_mre_before, 0.05) << "labels should differ from T_sum + T_comm";
  std::vector<double> y;
  for (const auto& g : graphs10()) y.push_back(g.target_ms);
  EXPECT_LT(mean_relative_error(p.predict(graphs10()).t_pred_ms, y), 0.01);
  EXPECT_GT(r.mean_alpha, 0.0);
  EXPECT_GT(r.mean_beta, 0.0);
}

TEST(Training, SameSeedSamePredictions) {
  GnnTrainOptions o;
  o.epochs = 15;
  o.seed = 7;
  o.batch_size = 4;
  GnnConfig c = config("anee");
  GraphPredictor a = GraphPredictor::train(graphs10(), c, o);
  GraphPredictor b = GraphPredictor::train(graphs10(), c, o);
  GnnPrediction pa = a.predict(graphs10()), pb = b.predict(graphs10());
  for (size_t i = 0; i < pa.t_pred_ms.size(); ++i) EXPECT_DOUBLE_EQ(pa.t_pred_ms[i], pb.t_pred_ms[i]);
}

TEST(Training, DirectTargetLearns) {
  GnnTrainOptions o;
  o.epochs = 150;
  o.val_fraction = 0;
  o.loss = "mre";
  GnnConfig c = config("anee");
  c.target = "direct";
  c.readout = "sum";
  GnnTrainReport r;
  GraphPredictor p = GraphPredictor::train(graphs10(), c, o, &r);
  EXPECT_LT(r.train_mre, 0.25) << r.to_json().dump();
  GnnPrediction pr = p.predict(graphs10());
  for (double b : pr.beta) EXPECT_EQ(b, 0.0);
}

TEST(Training, CrossValidationTestsEachGraphOnceOnUnseenModels) {
  std::vector<GraphFeatures> gs = graphs10();
  GnnTrainOptions o;
  o.epochs = 150;
  o.val_fraction = 0.2;
  const GnnCvReport r = cross_validate_graphs(gs, config("anee"), o, 5);
  ASSERT_EQ(r.pred_ms.size(), gs.size());
  std::vector<int> per_fold(5, 0);
  for (size_t i = 0; i < gs.size(); ++i) {
    ASSERT_TRUE(r.fold[i] >= 0 && r.fold[i] < 5);
    ++per_fold[r.fold[i]];
    EXPECT_TRUE(std::isfinite(r.pred_ms[i]) && r.pred_ms[i] > 0);
    EXPECT_EQ(r.target_ms[i], gs[i].target_ms);
  }
  for (int c : per_fold) EXPECT_EQ(c, 2);
  EXPECT_EQ(r.fold_mre.size(), 5u);
  EXPECT_NEAR(r.mre, mean_relative_error(r.pred_ms, r.target_ms), 1e-12);
  // Held-out graphs of the synthetic set are still predicted better than T_sum + T_comm.
  EXPECT_LT(r.mre, r.mre_before);
  EXPECT_THROW(cross_validate_graphs(gs, config("anee"), o, 1), Error);
  EXPECT_THROW(cross_validate_graphs(gs, config("anee"), o, 11), Error);
}

TEST(Training, BadLabelsAndOptionsAreRefused) {
  std::vector<GraphFeatures> gs = {graphs10()[0], graphs10()[1]};
  gs[1].target_ms = NAN;
  try {
    GraphPredictor::train(gs, GnnConfig{}, GnnTrainOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph[1]"), std::string::npos) << e.what();
  }
  GnnTrainOptions o;
  o.loss = "huber";
  EXPECT_THROW(GraphPredictor::train({graphs10()[0]}, GnnConfig{}, o), Error);
  GnnConfig c;
  c.encoder = "gat";
  try {
    GraphPredictor::train({graphs10()[0]}, c, GnnTrainOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder=gat"), std::string::npos) << e.what();
  }
}

namespace {
/// Stamps a deliberately edited file with a matching checksum, so that the
/// checks behind the checksum are reached.
void restamp(SafeTensors& st) {
  st.metadata["content_sha256"] = safetensors_content_sha256(st);
}

std::string load_error(const std::string& p) {
  try {
    GraphPredictor::load(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(WeightsFile, ReloadGivesSamePredictionsAndRefusesBadFiles) {
  GnnTrainOptions o;
  o.epochs = 5;
  for (const char* enc : {"transformerconv", "anee"}) {
    GraphPredictor p = GraphPredictor::train(graphs10(), config(enc), o);
    const std::string path = ::testing::TempDir() + "/gnn_" + enc + ".safetensors";
    p.save(path, {{"note", "test"}});
    GraphPredictor q = GraphPredictor::load(path);
    EXPECT_EQ(q.config().encoder, enc);
    EXPECT_EQ(q.metadata().at("note"), "test");
    GnnPrediction a = p.predict(graphs10()), b = q.predict(graphs10());
    for (size_t i = 0; i < a.t_pred_ms.size(); ++i) EXPECT_NEAR(a.t_pred_ms[i] / b.t_pred_ms[i], 1.0, 1e-6);

    // Same size, one weight changed (the checksum catches what no shape check can),
    // and one config value changed in the metadata.
    SafeTensors st = load_safetensors(path);
    {
      auto it = std::find_if(st.tensors.begin(), st.tensors.end(),
                             [](const auto& kv) { return kv.first.rfind("model.", 0) == 0; });
      it->second.view(-1)[0] = 1e30f;
      save_safetensors(path + ".w", st);
      EXPECT_NE(load_error(path + ".w").find("content_sha256 does not match"), std::string::npos)
          << load_error(path + ".w");
      it->second.view(-1)[0] = NAN;  // re-stamped: the finite-values check behind the checksum
      restamp(st);
      save_safetensors(path + ".nan", st);
      EXPECT_NE(load_error(path + ".nan").find("NaN/Inf"), std::string::npos) << load_error(path + ".nan");
    }
    // Wrong version: rewrite the metadata through the safetensors API.
    st = load_safetensors(path);
    st.metadata["format_version"] = "1";  // before the training ranges (norm.*_lo/_hi)
    restamp(st);
    save_safetensors(path + ".v1", st);
    EXPECT_NE(load_error(path + ".v1").find("__metadata__.format_version=1"), std::string::npos)
        << load_error(path + ".v1");
    // A training range turned upside down.
    st = load_safetensors(path);
    st.tensors["norm.z_lo"] = st.tensors["norm.z_hi"] + 1;
    restamp(st);
    save_safetensors(path + ".range", st);
    EXPECT_NE(load_error(path + ".range").find("norm.z_lo"), std::string::npos)
        << load_error(path + ".range");
    // A missing weight.
    st = load_safetensors(path);
    st.tensors.erase(st.tensors.begin()->first.rfind("model.", 0) == 0 ? st.tensors.begin()->first
                                                                       : std::prev(st.tensors.end())->first);
    restamp(st);
    save_safetensors(path + ".miss", st);
    EXPECT_NE(load_error(path + ".miss").find("is missing"), std::string::npos) << load_error(path + ".miss");
    // Changed features.
    st = load_safetensors(path);
    st.metadata["node_features"] = "[\"x\"]";
    restamp(st);
    save_safetensors(path + ".feat", st);
    EXPECT_NE(load_error(path + ".feat").find("__metadata__.node_features"), std::string::npos);
    // Truncated file.
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string raw = ss.str();
    std::ofstream(path + ".cut", std::ios::binary) << raw.substr(0, raw.size() / 2);
    const std::string cut = load_error(path + ".cut");
    EXPECT_NE(cut.find(path + ".cut"), std::string::npos) << cut;
    EXPECT_NE(cut.find("data_offsets"), std::string::npos) << cut;
  }
}

namespace {
/// `p` saved to a temporary file and loaded again; its predictions of `g` are `ref`'s (1e-6).
GraphPredictor reloaded(const GraphPredictor& p, const std::string& name, const std::vector<GraphFeatures>& g,
                        const GnnPrediction& ref) {
  const std::string path = ::testing::TempDir() + "/" + name + ".safetensors";
  p.save(path);
  GraphPredictor q = GraphPredictor::load(path);
  const GnnPrediction r = q.predict(g);
  for (size_t i = 0; i < ref.t_pred_ms.size(); ++i) EXPECT_NEAR(ref.t_pred_ms[i] / r.t_pred_ms[i], 1.0, 1e-6);
  return q;
}
}  // namespace

TEST(Training, DeviceMemoryIsNoFeatureOfNewModelsAndStaysOneOfOldOnes) {
  GnnTrainOptions o;
  o.epochs = 5;
  const auto& names = global_feature_names();
  const size_t mem = std::find(names.begin(), names.end(), "log1p_dev_mem_gb") - names.begin();
  ASSERT_LT(mem, names.size());
  std::vector<GraphFeatures> g = graphs10(), h = g;
  for (auto& x : h) x.z[mem] = 123.f;  // far outside any training range
  // New models (the default): the column neither reaches the network nor sets the distance.
  GnnConfig c = config("transformerconv");
  EXPECT_FALSE(c.device_memory_feature);
  GraphPredictor p = GraphPredictor::train(graphs10(), c, o);
  GnnPrediction a = p.predict(g), b = p.predict(h);
  for (size_t i = 0; i < a.t_pred_ms.size(); ++i) {
    EXPECT_DOUBLE_EQ(a.t_pred_ms[i], b.t_pred_ms[i]);
    EXPECT_DOUBLE_EQ(a.ood_distance[i], b.ood_distance[i]);
  }
  EXPECT_FALSE(reloaded(p, "gnn_nomem", h, a).config().device_memory_feature);
  // With the feature (a model from before): a memory far outside the training range is out of domain.
  c.device_memory_feature = true;
  GraphPredictor m = GraphPredictor::train(graphs10(), c, o);
  GnnPrediction ma = m.predict(g), mb = m.predict(h);
  for (size_t i = 0; i < ma.ood_distance.size(); ++i) EXPECT_GT(mb.ood_distance[i], ma.ood_distance[i] + 1);
  // A config written before the key existed had the feature; a bad value names the key.
  EXPECT_TRUE(GnnConfig::from_json({{"encoder", "anee"}}).device_memory_feature);
  try {
    GnnConfig::from_json({{"device_memory_feature", 1}});
    ADD_FAILURE() << "a non-boolean device_memory_feature was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device_memory_feature"), std::string::npos) << e.what();
  }
}

TEST(Training, NoMlpAblationHasNoGlobalBranchAndReloads) {
  GnnTrainOptions o;
  o.epochs = 5;
  GnnConfig c = config("transformerconv");
  c.global_branch = false;
  c.ood_tau = 0;  // the out-of-domain shrinkage reads Z too; here only the network is under test
  GraphPredictor p = GraphPredictor::train(graphs10(), c, o);
  for (const auto& item : p.model()->named_parameters())
    EXPECT_EQ(item.key().find("z_mlp"), std::string::npos) << item.key();
  // Z does not reach the output: changing it changes nothing.
  std::vector<GraphFeatures> g = graphs10(), h = g;
  for (auto& x : h) std::fill(x.z.begin(), x.z.end(), 123.f);
  GnnPrediction a = p.predict(g), b = p.predict(h);
  for (size_t i = 0; i < a.alpha.size(); ++i) EXPECT_DOUBLE_EQ(a.alpha[i], b.alpha[i]);
  EXPECT_FALSE(reloaded(p, "gnn_nomlp", g, a).config().global_branch);
  // Configs written before the ablation existed have the branch.
  EXPECT_TRUE(GnnConfig::from_json({{"encoder", "anee"}}).global_branch);
  EXPECT_THROW(GnnConfig::from_json({{"global_branch", "yes"}}), Error);
}

namespace {

LayerGraph with_mode(LayerGraph g, RunMode m) {
  set_run_mode(g.settings, m);
  return build_layer_graph(g.model, g.settings);
}

/// Inference graphs of a device that runs 0.6 x the sum of its layer times.
std::vector<GraphFeatures> inference_graphs_at_0_6() {
  std::vector<GraphFeatures> v;
  for (const char* model : {"bert-base.json", "gpt2.json"})
    for (int64_t batch : {1, 2, 4, 8, 16})
      for (int64_t seq : {32, 128}) {
        GraphFeatures f =
            labelled(with_mode(small_graph(model, 1 + batch % 2, batch, seq), RunMode::Inference));
        f.target_ms = 0.6 * f.t_sum_ms;
        v.push_back(std::move(f));
      }
  return v;
}

}  // namespace

TEST(OutOfDomain, TheForwardPartIsTheForwardNodesAsAnInferenceGraph) {
  const LayerGraph g = with_mode(small_graph("bert-base.json", 2, 4, 64), RunMode::FwdBwd);
  const std::vector<double> t = roofline_ms(g);
  GraphContext ctx;
  ctx.device = test_device();
  const GraphFeatures f = featurize(g, t, ctx);
  ASSERT_TRUE(f.forward_part);
  double fwd_ms = 0;
  int64_t fwd_nodes = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].dir == Direction::Forward) fwd_ms += t[i], ++fwd_nodes;
  EXPECT_EQ(f.forward_part->num_nodes, fwd_nodes);
  EXPECT_LT(fwd_nodes, f.num_nodes);
  EXPECT_NEAR(f.forward_part->t_sum_ms, fwd_ms, 1e-9 * fwd_ms);
  const auto& names = global_feature_names();
  const size_t bwd = std::find(names.begin(), names.end(), "share_backward") - names.begin();
  EXPECT_GT(f.z[bwd], 0.3f);
  EXPECT_EQ(f.forward_part->z[bwd], 0.f);
  EXPECT_FALSE(f.forward_part->forward_part);
  // An inference graph has none; compression and the host term keep it.
  EXPECT_FALSE(featurize(with_mode(g, RunMode::Inference), roofline_ms(with_mode(g, RunMode::Inference)), ctx)
                   .forward_part);
  const GraphFeatures c = compress_graph(f, 2);
  EXPECT_EQ(c.forward_part, f.forward_part) << "carried as it is: predict compresses it when it uses it";
  GraphFeatures h = f;
  apply_host_term(h, 1e3);  // 1 s per node: the host sets T_sum of both
  EXPECT_DOUBLE_EQ(h.t_sum_ms, 1e3 * static_cast<double>(f.num_nodes));
  EXPECT_DOUBLE_EQ(h.forward_part->t_sum_ms, 1e3 * static_cast<double>(fwd_nodes));
  EXPECT_DOUBLE_EQ(f.forward_part->t_sum_ms, fwd_ms) << "the copy's part is its own";
}

TEST(OutOfDomain, AModeTheRefinementNeverSawTakesTheAlphaOfItsForwardPart) {
  GnnTrainOptions o = fit_all(120, 2);
  const std::vector<GraphFeatures> inf = inference_graphs_at_0_6();
  const GraphPredictor p = GraphPredictor::train(inf, config("transformerconv"), o);
  const GraphFeatures fb = labelled(with_mode(small_graph("bert-base.json", 2, 4, 64), RunMode::FwdBwd));
  const GraphFeatures tr = labelled(with_mode(small_graph("gpt2.json", 1, 8, 128), RunMode::Train));
  const GnnPrediction r = p.predict(std::vector<GraphFeatures>{fb, tr});
  const GnnPrediction parts =
      p.predict(std::vector<const GraphFeatures*>{fb.forward_part.get(), tr.forward_part.get()});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.alpha_from_forward[i], 1) << i;
    EXPECT_GT(r.ood_distance[i], 1.0) << "still reported out of domain";
    EXPECT_DOUBLE_EQ(r.alpha[i], parts.alpha[i]);
    EXPECT_NEAR(r.alpha[i], 0.6, 0.1) << "the device's 0.6, not the plain sum's 1";
  }
  EXPECT_DOUBLE_EQ(r.t_pred_ms[0], r.alpha[0] * fb.t_sum_ms + r.beta[0] * fb.t_comm_ms);
  // Runs of the modes it trained on keep their own alpha.
  const GnnPrediction own = p.predict(std::vector<GraphFeatures>{inf[3]});
  EXPECT_EQ(own.alpha_from_forward[0], 0);

  // Without the out-of-domain rule (ood_tau = 0), or once a run with backward
  // nodes trained it, every run has its own alpha.
  GnnConfig c0 = config("transformerconv");
  c0.ood_tau = 0;
  o.epochs = 5;
  const GnnPrediction r0 = GraphPredictor::train(inf, c0, o).predict(std::vector<GraphFeatures>{fb});
  EXPECT_EQ(r0.alpha_from_forward[0], 0);
  std::vector<GraphFeatures> with_bwd = inf;
  with_bwd.push_back(labelled(with_mode(small_graph("gpt2.json", 1, 2, 64), RunMode::FwdBwd)));
  const GnnPrediction r1 =
      GraphPredictor::train(with_bwd, config("transformerconv"), o).predict(std::vector<GraphFeatures>{fb});
  EXPECT_EQ(r1.alpha_from_forward[0], 0);
}
