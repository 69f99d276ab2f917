// The per-node traces beside the NeuSight labels as layer rows (neusight.hpp):
// kernel names, the shape mapping, merging and the launch floor, bad files, the
// committed compact traces and their equality with what the subset writer makes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "learn_test_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/neusight.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {
using scaledl::test::write_file;

const char* kHeader = "Name,op,kernel,input_shapes,output_shape,fw_latency,bw_latency\n";

const LayerMeasurement* find(const std::vector<LayerMeasurement>& v, LayerType t,
                             const std::vector<int64_t>& dims) {
  for (const auto& m : v)
    if (m.type == t && m.dims == dims) return &m;
  return nullptr;
}
}  // namespace

TEST(NeusightTraces, KernelIsTheInnermostModuleOrTheFunctionName) {
  const std::string meta =
      "{'nn_module_stack': OrderedDict([('bert', <class "
      "'transformers.models.bert.modeling_bert.BertModel'>), "
      "('bert.encoder.layer.0.attention.self.query', <class 'torch.nn.modules.linear.Linear'>)])}";
  EXPECT_EQ(neusight_trace_kernel("call_module", "bert.encoder.layer.0.attention.self.query", meta),
            "Linear");
  EXPECT_EQ(neusight_trace_kernel("call_module", "m.ln", "{}"), "m.ln");  // no module stack: the target
  EXPECT_EQ(neusight_trace_kernel("call_function", "<built-in method matmul of type object at 0x7f00>", ""),
            "matmul");
  EXPECT_EQ(neusight_trace_kernel("call_function", "<function softmax at 0x7f07df3431f0>", ""), "softmax");
  EXPECT_EQ(neusight_trace_kernel("call_function", "<built-in function add>", ""), "add");
  EXPECT_EQ(neusight_trace_kernel("call_method", "contiguous", ""), "contiguous");
}

TEST(NeusightTraces, NodesMapToLayerRowsMergedByShapeAboveTheLaunchFloor) {
  const fs::path dir = scaledl::test::temp_dir("traces_map");
  const fs::path f = dir / "bert_large-train-512-8.csv";
  write_file(
      f, std::string(kHeader) +
             "q,call_module,Linear,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",3.0,6.0\n"
             "k,call_module,Linear,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",2.0,4.0\n"
             "v,call_module,Linear,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",2.2,4.2\n"
             "c_attn,call_function,addmm,\"[[3072], [4096, 1024], [1024, 3072]]\",\"(4096, 3072)\",1.5,0\n"
             "matmul,call_function,matmul,\"[[8, 16, 512, 64], [8, 16, 64, 512]]\",\"(8, 16, 512, "
             "512)\",1.7,3.1\n"
             "truediv,call_function,truediv,\"[[8, 16, 512, 512]]\",\"(8, 16, 512, 512)\",1.1,1.0\n"
             "add_7,call_function,add,\"[[8, 16, 512, 512], [8, 1, 1, 512]]\",\"(8, 16, 512, 512)\",1.1,0.9\n"
             "softmax,call_function,softmax,\"[[8, 16, 512, 512]]\",\"(8, 16, 512, 512)\",1.2,2.0\n"
             "add_9,call_function,add,\"[[8, 512, 1024], [8, 512, 1024]]\",\"(8, 512, 1024)\",0.2,0.1\n"
             "ln,call_module,LayerNorm,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",0.2,0.4\n"
             "gelu,call_function,gelu,\"[[8, 512, 4096]]\",\"(8, 512, 4096)\",0.6,0.9\n"
             "pow_2,call_function,pow,\"[[8, 512, 4096]]\",\"(8, 512, 4096)\",0.7,1.2\n"
             "pow_1,call_function,pow,[[1]],\"(1,)\",0.01,0\n"
             "drop,call_module,Dropout,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",0.3,0.2\n"
             "view,call_method,view,\"[[8, 512, 1024]]\",\"(8, 512, 16, 64)\",0.01,0\n"
             "pooler,call_module,Linear,\"[[8, 1024]]\",\"(8, 1024)\",0.02,0.03\n"
             "size,call_method,size,\"[[8, 512]]\",\"(1,)\",0,0\n");
  NeusightTraceSummary s;
  const auto rows = read_neusight_trace(f.string(), "c-traces", "spec:G", s);
  EXPECT_EQ(s.files, 1u);
  EXPECT_EQ(s.nodes, 16u);       // the size node has no time
  EXPECT_EQ(s.mapped, 14u);      // not the scalar pow nor the view
  EXPECT_EQ(s.below_floor, 1u);  // the pooler's 20 us
  EXPECT_EQ(s.skipped.at("pow"), 1u);
  EXPECT_EQ(s.skipped.at("view"), 1u);
  ASSERT_EQ(rows.size(), 10u);  // Q, K and V are one row, and so are the two score kernels
  EXPECT_EQ(s.rows, 10u);
  const LayerMeasurement* qkv = find(rows, LayerType::Linear, {4096, 1024, 1024, 1});
  ASSERT_TRUE(qkv);
  EXPECT_DOUBLE_EQ(qkv->fwd.median_ms, 2.2);  // median of 3.0, 2.0, 2.2
  EXPECT_DOUBLE_EQ(qkv->bwd.median_ms, 4.2);
  EXPECT_EQ(qkv->fwd.n, 3);
  EXPECT_EQ(qkv->campaign, "c-traces");
  EXPECT_EQ(qkv->source, "neusight-trace");
  EXPECT_EQ(qkv->device, "spec:G");
  const LayerMeasurement* conv1d = find(rows, LayerType::Linear, {4096, 1024, 3072, 1});
  ASSERT_TRUE(conv1d);
  EXPECT_TRUE(std::isnan(conv1d->bwd.median_ms));  // no backward time
  EXPECT_TRUE(find(rows, LayerType::BMM, {128, 512, 64, 512}));
  EXPECT_TRUE(find(rows, LayerType::Softmax, {65536, 512}));
  EXPECT_TRUE(find(rows, LayerType::Pointwise, {33554432, 0}));  // the division and the broadcast mask add
  EXPECT_TRUE(find(rows, LayerType::Pointwise, {16777216, 1}));  // pow saves its input
  EXPECT_TRUE(find(rows, LayerType::Add, {4194304}));
  EXPECT_TRUE(find(rows, LayerType::LayerNorm, {4096, 1024}));
  EXPECT_TRUE(find(rows, LayerType::GELU, {16777216}));
  EXPECT_TRUE(find(rows, LayerType::Dropout, {4194304}));  // a training label: dropout is a kernel

  // In an inference label Dropout is the identity: not a layer row.
  const fs::path g = dir / "bert_large-inf-512-8.csv";
  write_file(
      g, std::string(kHeader) + "drop,call_module,Dropout,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",0.3,0\n");
  NeusightTraceSummary s2;
  EXPECT_TRUE(read_neusight_trace(g.string(), "c", "spec:G", s2).empty());
  EXPECT_EQ(s2.skipped.at("Dropout"), 1u);
  scaledl::remove_tree(dir);
}

TEST(NeusightTraces, MalformedTracesNameFileLineAndColumn) {
  const fs::path dir = scaledl::test::temp_dir("traces_bad");
  struct Case {
    std::string body, needle;
  };
  const std::vector<Case> cases = {
      {"q,call_module,Linear,\"[[8, 1024]]\",\"(8, 1024)\",fast,0\n",
       ":2: fw_latency=\"fast\" is not a time"},
      {"q,call_module,Linear,\"[[8, 1024]]\",\"(8, 1024)\",-1,0\n", ":2: fw_latency=\"-1\" is not a time"},
      {"q,call_module,Linear,\"[[8, x]]\",\"(8, 1024)\",1,0\n",
       "input_shapes=\"[[8, x]]\" is not a list of shapes"},
      {"q,call_module,Linear,\"[[8, 1024]\",\"(8, 1024)\",1,0\n", "unbalanced brackets"},
      {"q,call_module,Linear,\"[[8, 1024]]\",\"(8, 1024)\",1\n", ":2: 6 fields, header has 7"},
      {"q,call_module,Linear,\"[[0, 1024]]\",\"(0, 1024)\",1,0\n", "linear"},
  };
  for (const auto& c : cases) {
    const fs::path f = dir / "gpt2_large-inf-1024-4.csv";
    write_file(f, std::string(kHeader) + c.body);
    NeusightTraceSummary s;
    const std::string e = error_of([&] { read_neusight_trace(f.string(), "c", "spec:G", s); });
    EXPECT_NE(e.find(f.string()), std::string::npos) << e;
    EXPECT_NE(e.find(c.needle), std::string::npos) << c.needle << " in: " << e;
  }
  const fs::path h = dir / "x.csv";
  write_file(h, "Name,op,latency\nq,call_module,1\n");
  NeusightTraceSummary s;
  EXPECT_NE(error_of([&] { read_neusight_trace(h.string(), "c", "spec:G", s); }).find("not a NeuSight trace"),
            std::string::npos);
  scaledl::remove_tree(dir);
}

TEST(NeusightTraces, CommittedTracesImportAsTheirOwnCampaign) {
  const fs::path root = fs::path(SCALEDL_SOURCE_DIR) / "datasets" / "neusight";
  const std::string db = scaledl::test::fresh_store_path("traces.sqlite");
  Store store(db);
  NeusightImportOptions o;
  o.root = root.string();
  EXPECT_FALSE(o.traces);  // opt-in (--traces)
  o.traces = true;
  const auto s = import_neusight(o, store);
  EXPECT_EQ(s.traces.files, 34u);  // beside the 34 single-GPU eager labels with a trace
  EXPECT_GT(s.traces.inserted, 300u);
  EXPECT_GT(s.traces.below_floor, 0u);
  size_t traces = 0, with_bwd = 0;
  for (const auto& m : store.layers(LayerType::Linear)) {
    if (m.campaign != "neusight-traces") continue;
    ++traces;
    EXPECT_EQ(m.source, "neusight-trace");
    with_bwd += std::isfinite(m.bwd.median_ms);
  }
  EXPECT_GT(traces, 20u);
  EXPECT_GT(with_bwd, 0u);  // the V100's training labels
  // Off: the operator rows and labels alone.
  const std::string db2 = scaledl::test::fresh_store_path("notraces.sqlite");
  Store store2(db2);
  o.traces = false;
  const auto s2 = import_neusight(o, store2);
  EXPECT_EQ(s2.traces.files, 0u);
  EXPECT_EQ(s2.inserted, s.inserted);
}

TEST(NeusightTraces, SubsetWriterKeepsWhatTheImporterReads) {
  // The artifact's trace format: every torch.fx field, module classes in `meta`.
  const fs::path art = scaledl::test::temp_dir("traces_artifact");
  write_file(
      art / "device_configs" / "t4.json",
      R"({"Device":"Tesla T4","Dev_Mem":15,"Mem_Bw":320,"Num_Sm":40,"Core_Per_SM":64,"Freq":1590,"SingleFLOPs":8141,"L2Cache":4})");
  write_file(art / "labels" / "Tesla_T4" / "bert_large-inf-512-8.json",
             R"({"num_layer": 24, "e2e_latency": 694.5, "fw_latency": 694.5, "bwall_latency": 0})");
  const std::string head =
      "op,target,_input_nodes,meta,input_shapes,latency,fw_latency,bw_latency,acc_latency,output_shape,dtype,"
      "Name\n";
  write_file(
      art / "labels" / "Tesla_T4" / "bert_large-inf-512-8.csv",
      head +
          "placeholder,input_ids,{},{},[],0.0,0.0,0.0,0.0,\"(8, 512)\",torch.int64,input_ids\n"
          "call_module,bert.q,{x: None},\"{'nn_module_stack': OrderedDict([('bert', <class 'x.BertModel'>), "
          "('bert.q', <class 'torch.nn.modules.linear.Linear'>)])}\",\"[[8, 512, 1024]]\",2.2,2.2,0.0,0.0,"
          "\"(8, 512, 1024)\",torch.float32,bert_q\n"
          "call_function,<built-in method matmul of type object at 0x7f00>,{},{},"
          "\"[[8, 16, 512, 64], [8, 16, 64, 512]]\",1.7,1.7,0.0,0.0,\"(8, 16, 512, "
          "512)\",torch.float32,matmul\n");
  const fs::path out = scaledl::test::temp_dir("traces_subset");
  write_neusight_subset(art.string(), out.string(), 2);
  const fs::path compact = out / "labels" / "Tesla_T4" / "bert_large-inf-512-8.csv";
  ASSERT_TRUE(fs::exists(compact));
  std::ifstream in(compact);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "Name,op,kernel,input_shapes,output_shape,fw_latency,bw_latency");
  std::getline(in, line);
  EXPECT_EQ(line, "bert_q,call_module,Linear,\"[[8, 512, 1024]]\",\"(8, 512, 1024)\",2.2,0.0");
  NeusightTraceSummary a, b;
  const auto full = read_neusight_trace((art / "labels" / "Tesla_T4" / "bert_large-inf-512-8.csv").string(),
                                        "c", "spec:Tesla T4", a);
  const auto small = read_neusight_trace(compact.string(), "c", "spec:Tesla T4", b);
  ASSERT_EQ(full.size(), 2u);
  ASSERT_EQ(small.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(small[i].type, full[i].type);
    EXPECT_EQ(small[i].dims, full[i].dims);
    EXPECT_DOUBLE_EQ(small[i].fwd.median_ms, full[i].fwd.median_ms);
  }
  EXPECT_EQ(a.nodes, 2u);  // the placeholder has no time
  scaledl::remove_tree(art);
  scaledl::remove_tree(out);
}
