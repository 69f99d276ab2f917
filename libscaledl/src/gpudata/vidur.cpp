// Vidur importer (gpudata.hpp; sources and mappings: docs/gpu-data.md).
//
// microsoft/vidur profiles one transformer block of sarathi-serve (vLLM-derived) layers,
// FP16, forward only under torch.inference_mode(), each operator's CUDA time in ms
// (median of 20 active steps), at every (num_tokens, tensor-parallel degree t) point:
//   <root>/profiling/compute/<gpu>/<org>/<model>/mlp.csv
// and NCCL collectives of FP16 tensors timed per rank (median of 3 active steps):
//   <root>/profiling/network/<node type>/{all_reduce,send_recv}.csv
//
// Operators (h = n_embd, f = n_expanded_embd, a = n_head, g = n_kv_head, d = h/a):
//   attn_pre_proj   linear [tokens, h] -> [(a+2g)d/t], bias = use_bias or use_qkv_bias
//   attn_post_proj  linear [tokens, h/t] -> [h], bias 0 (sarathi's RowParallelLinear adds
//                   its bias outside the timed F.linear)
//   mlp_up_proj     linear [tokens, h] -> [2f/t gated, else f/t], bias = use_bias
//   mlp_down_proj   linear [tokens, f/t] -> [h], bias 0 (as attn_post_proj)
//   input_layernorm, post_attention_layernorm
//                   rmsnorm [tokens, h] (norm rms_norm), layernorm (norm layer_norm: phi-2)
//   add             add of tokens*h elements (residual + mlp output); in a block without
//                   post_attention_layernorm (phi-2's parallel attention) it adds three
//                   tensors: skipped
//   emb             embedding [tokens] -> [tokens, h] over the vocab/t rows of one rank
//                   (VocabParallelEmbedding times only F.embedding on its shard)
//   mlp_act         gelu of tokens*f/t elements (plain MLP); SiLU-and-mul (gated MLP) is one
//                   fused kernel without a layer type of ours: skipped
//   attn_rope       skipped (no layer type of ours)
// The norm type and the biases are not in the CSV: they come from Vidur's model configs
// (data/model_configs/<org>/<model>.yml) for the models profiled at the commit below; the
// rows of another model are refused. The same (layer, dims, GPU) timed by several models or
// TP degrees is stored once, with the median of their medians.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpudata/csv_table.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/learn/neusight.hpp"  // parse_csv, csv_column

namespace scaledl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRepository = "microsoft/vidur";
constexpr const char* kCommit = "7d47513363ec447a741ac5e47241580b47724fbf";

Provenance compute_provenance() {
  return {"vidur",
          kRepository,
          kCommit,
          "MIT",
          "sarathi-serve (vLLM-derived) layers, PyTorch",
          "FP16 forward under inference_mode, Kineto CUDA time, median of 20 active steps"};
}

Provenance network_provenance() {
  return {"vidur",
          kRepository,
          kCommit,
          "MIT",
          "torch.distributed, NCCL",
          "FP16 all_reduce / send_recv, CUDA time per rank, median of 3 active steps, ms"};
}

/// The GPU of a profiling/compute/<gpu> folder (Vidur's README: A100 80GB of a DGX, A40,
/// H100 SXM of a DGX); nullptr when unknown.
const char* compute_gpu(const std::string& folder) {
  if (folder == "a100") return "NVIDIA A100-SXM4-80GB";
  if (folder == "a40") return "NVIDIA A40";
  if (folder == "h100") return "NVIDIA H100 80GB HBM3";
  return nullptr;
}

/// The GPU of a profiling/network/<node type> folder; nullptr when unknown.
const char* node_gpu(const std::string& node) {
  if (node == "a100_dgx") return "NVIDIA A100-SXM4-80GB";
  if (node == "a100_pairwise_nvlink") return "NVIDIA A100 80GB PCIe";  // Azure NC96ads_A100_v4
  if (node == "a40_pairwise_nvlink") return "NVIDIA A40";
  if (node == "h100_dgx") return "NVIDIA H100 80GB HBM3";
  if (node == "h100_pairwise_nvlink") return "NVIDIA H100 NVL";
  return nullptr;
}

/// What mlp.csv does not say about a model: Vidur's data/model_configs/<org>/<model>.yml.
struct ModelConfig {
  const char* name;  ///< "<org>/<model>", the folder under compute/<gpu>/
  bool rms_norm;     ///< norm: rms_norm (else layer_norm)
  bool use_bias;     ///< every linear has a bias
  bool qkv_bias;     ///< the QKV projection has a bias
};

constexpr ModelConfig kModels[] = {
    {"Qwen/Qwen-72B", true, false, true},
    {"codellama/CodeLlama-34b-Instruct-hf", true, false, false},
    {"internlm/internlm-20b", true, false, false},
    {"meta-llama/Llama-2-70b-hf", true, false, false},
    {"meta-llama/Llama-2-7b-hf", true, false, false},
    {"meta-llama/Meta-Llama-3-70B", true, false, false},
    {"meta-llama/Meta-Llama-3-8B", true, false, false},
    {"microsoft/phi-2", false, true, true},
};

const ModelConfig* model_config(const std::string& name) {
  for (const auto& m : kModels)
    if (name == m.name) return &m;
  return nullptr;
}

using gpudata::Table;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Sorted paths of the files named `name` under `dir` (any depth); empty when dir is absent.
std::vector<fs::path> files_named(const fs::path& dir, const std::string& name) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() == name) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// Layer rows of one shape on one GPU, gathered over models and TP degrees.
struct ShapeGroup {
  LayerMeasurement m;
  const DeviceRecord* dev = nullptr;
  std::vector<double> ms;  ///< each row's median, ms
};

/// One mlp.csv: plausible rows go into `groups` (by device and layer key); the rest is
/// refused or skipped in `imp`'s summary, one count per operator of a row.
void read_mlp_csv(const fs::path& file, const fs::path& compute_dir, GpuImport& imp,
                  std::map<std::string, ShapeGroup>& groups) {
  const Table t(file.string());
  ++imp.summary().files;
  imp.summary().rows += t.rows();
  // compute/<gpu>/<org>/<model>/mlp.csv
  std::vector<std::string> parts;
  for (const auto& p : fs::relative(file.parent_path(), compute_dir)) parts.push_back(p.string());
  SCALEDL_CHECK(parts.size() >= 2, "{}: expected profiling/compute/<gpu>/<org>/<model>/mlp.csv", t.path);
  const std::string gpu_folder = parts[0];
  std::string model = parts[1];
  for (size_t i = 2; i < parts.size(); ++i) model += "/" + parts[i];

  const int c_tokens = t.need("num_tokens"), c_tp = t.need("num_tensor_parallel_workers"),
            c_heads = t.need("n_head"), c_kv = t.need("n_kv_head"), c_h = t.need("n_embd"),
            c_f = t.need("n_expanded_embd"), c_vocab = t.need("vocab_size"),
            c_gated = t.need("use_gated_mlp");
  // The operators: every time_stats.<op>.median column.
  std::vector<std::pair<std::string, int>> ops;
  const std::string pre = "time_stats.", post = ".median";
  for (size_t c = 0; c < t.recs[0].size(); ++c) {
    const std::string& name = t.recs[0][c];
    if (name.size() > pre.size() + post.size() && name.compare(0, pre.size(), pre) == 0 &&
        name.compare(name.size() - post.size(), post.size(), post) == 0)
      ops.emplace_back(name.substr(pre.size(), name.size() - pre.size() - post.size()), static_cast<int>(c));
  }
  SCALEDL_CHECK(!ops.empty(), "{}:{}: the header has no time_stats.<op>.median column", t.path, t.lines[0]);
  // A block without post_attention_layernorm adds attention, MLP and residual at once (phi-2).
  const bool post_attn_norm = csv_column(t.recs[0], "time_stats.post_attention_layernorm.median") >= 0;

  const char* gpu = compute_gpu(gpu_folder);
  const DeviceRecord* dev = gpu ? imp.device(gpu) : nullptr;
  const ModelConfig* cfg = model_config(model);

  for (size_t r = 1; r < t.recs.size(); ++r) {
    const int64_t tokens = t.count(r, c_tokens), tp = t.count(r, c_tp), a = t.count(r, c_heads),
                  g = t.count(r, c_kv), h = t.count(r, c_h), f = t.count(r, c_f), vocab = t.count(r, c_vocab);
    const std::string& gs = t.recs[r][c_gated];
    SCALEDL_CHECK(gs == "True" || gs == "False" || gs == "true" || gs == "false" || gs == "1" || gs == "0",
                  "{}: use_gated_mlp=\"{}\" is not True or False", t.where(r), gs);
    const bool gated = gs == "True" || gs == "true" || gs == "1";
    // Why every mapped operator of this row is refused ("" = none).
    std::string row_refusal;
    if (!gpu)
      row_refusal = fmt::format("unknown Vidur GPU folder compute/{}", gpu_folder);
    else if (!dev)
      row_refusal = GpuImport::no_spec_sheet(gpu);
    else if (!cfg)
      row_refusal = fmt::format("no Vidur model config known for {} (norm type, biases)", model);
    else if (h % a || a % tp || g % tp || h % tp || f % tp || vocab % tp)
      row_refusal = "heads, hidden, FFN or vocab not divisible by the TP degree";
    for (const auto& [op, c] : ops) {
      const double ms = t.number(r, c);
      LayerMeasurement m;
      if (op == "attn_pre_proj" || op == "attn_post_proj" || op == "mlp_up_proj" || op == "mlp_down_proj") {
        m.type = LayerType::Linear;
        const int64_t d = h / a;
        const bool bias = cfg && cfg->use_bias;
        if (op == "attn_pre_proj")
          m.dims = {tokens, h, (a + 2 * g) * d / tp, (bias || (cfg && cfg->qkv_bias)) ? 1 : 0};
        else if (op == "attn_post_proj")
          m.dims = {tokens, a * d / tp, h, 0};
        else if (op == "mlp_up_proj")
          m.dims = {tokens, h, (gated ? 2 * f : f) / tp, bias ? 1 : 0};
        else
          m.dims = {tokens, f / tp, h, 0};
      } else if (op == "input_layernorm" || op == "post_attention_layernorm") {
        m.type = cfg && !cfg->rms_norm ? LayerType::LayerNorm : LayerType::RMSNorm;
        m.dims = {tokens, h};
      } else if (op == "add" && post_attn_norm) {
        m.type = LayerType::Add;
        m.dims = {tokens * h};
      } else if (op == "add") {
        imp.skip("add of three tensors (parallel attention block)");
        continue;
      } else if (op == "emb") {
        m.type = LayerType::Embedding;
        m.dims = {tokens, vocab / tp, h};
      } else if (op == "mlp_act" && !gated) {
        m.type = LayerType::GELU;
        m.dims = {tokens * (f / tp)};
      } else if (op == "mlp_act") {
        imp.skip("mlp_act (SiLU-and-mul, one fused kernel)");
        continue;
      } else {
        imp.skip(op);
        continue;
      }
      if (!row_refusal.empty()) {
        imp.refuse(row_refusal);
        continue;
      }
      m.dtype = DType::FP16;
      m.fwd.median_ms = ms;
      m.fwd.n = 20;
      m.device = dev->key();
      validate_dims(m.type, m.dims);
      if (const std::string why = implausible_layer_row(m, *dev, imp.options().tolerance); !why.empty()) {
        imp.refuse(why);
        continue;
      }
      ShapeGroup& grp = groups[m.device + " " + layer_key(m.type, m.dims, m.dtype)];
      if (grp.ms.empty()) {
        grp.m = m;
        grp.dev = dev;
      }
      grp.ms.push_back(ms);
    }
  }
}

/// The rows of one network CSV, gathered by (ranks, devices per node, bytes).
void read_network_csv(const fs::path& file, const std::string& node, const std::string& duplicate_of,
                      GpuImport& imp) {
  const Table t(file.string());
  ++imp.summary().files;
  imp.summary().rows += t.rows();
  const std::string stem = file.stem().string();  // all_reduce | send_recv
  const std::string collective = stem == "all_reduce" ? "allreduce" : "sendrecv";
  const int c_time = t.need("time_stats." + stem + ".median"), c_workers = t.need("num_workers"),
            c_size = t.need("size"), c_coll = t.need("collective"), c_dpn = t.need("devices_per_node");
  const char* gpu = node_gpu(node);
  const DeviceRecord* dev = gpu ? imp.device(gpu) : nullptr;
  std::string refusal;
  if (!duplicate_of.empty())
    refusal = fmt::format("byte-identical copy of {} (an upstream placeholder, not a measurement of {})",
                          duplicate_of, node);
  else if (!gpu)
    refusal = fmt::format("unknown Vidur node type network/{}", node);
  else if (!dev)
    refusal = GpuImport::no_spec_sheet(gpu);
  // (world, devices per node, bytes) -> medians of its rows (ranks, repeated sizes)
  std::map<std::tuple<int64_t, int64_t, double>, std::vector<double>> groups;
  for (size_t r = 1; r < t.recs.size(); ++r) {
    SCALEDL_CHECK(t.recs[r][c_coll] == stem, "{}: collective=\"{}\" in a file of {}", t.where(r),
                  t.recs[r][c_coll], stem);
    const double ms = t.number(r, c_time), bytes = t.number(r, c_size);
    const int64_t world = t.count(r, c_workers), dpn = t.count(r, c_dpn);
    if (!refusal.empty()) {
      imp.refuse(refusal);
      continue;
    }
    if (!std::isfinite(ms) || ms <= 0 || !std::isfinite(bytes) || bytes <= 0 || world < 2) {
      imp.refuse("collective: time, size or ranks not positive");
      continue;
    }
    groups[{world, dpn, bytes}].push_back(ms);
  }
  const std::string campaign = imp.options().campaign + "-" + node;
  const Provenance prov = network_provenance();
  for (const auto& [key, ms] : groups) {
    const auto& [world, dpn, bytes] = key;
    CollectiveMeasurement c;
    c.campaign = campaign;
    c.collective = collective;
    c.backend = "nccl";
    c.dtype = "fp16";
    c.world = world;
    c.nodes = (world + dpn - 1) / dpn;
    c.level = c.nodes > 1 ? "inter-node" : "intra-node";
    c.bytes = bytes;
    c.time_s = median_of(ms) / 1e3;
    // nccl-tests' bus bandwidth: all-reduce algbw x 2(n-1)/n, send/recv algbw.
    const double factor = collective == "allreduce" ? 2.0 * (world - 1) / world : 1.0;
    c.busbw_gbs = factor * bytes / c.time_s / 1e9;
    c.repeats = 3 * static_cast<int>(ms.size());
    imp.add_collective(std::move(c), *dev, prov);
  }
}

}  // namespace

GpuImportSummary import_vidur(const GpuImportOptions& opt, Store& store) {
  GpuImport imp("vidur", opt);
  const fs::path root = fs::path(opt.root) / "profiling";
  SCALEDL_CHECK(fs::is_directory(root), "{}: not a Vidur data folder (no profiling/ under it)", opt.root);
  const fs::path compute = root / "compute", network = root / "network";

  std::map<std::string, ShapeGroup> groups;
  for (const auto& f : files_named(compute, "mlp.csv")) read_mlp_csv(f, compute, imp, groups);
  const Provenance prov = compute_provenance();
  for (auto& [key, g] : groups) {
    g.m.fwd.median_ms = median_of(g.ms);
    g.m.fwd.n = 20 * static_cast<int>(g.ms.size());
    imp.add_layer(std::move(g.m), *g.dev, prov);
  }

  // Network files in name order; one whose bytes equal an earlier node type's file of the
  // same name (h100_pairwise_nvlink/send_recv.csv is a copy of a100_pairwise_nvlink's) is refused.
  std::vector<fs::path> net;
  for (const char* name : {"all_reduce.csv", "send_recv.csv"})
    for (auto& f : files_named(network, name)) net.push_back(std::move(f));
  std::sort(net.begin(), net.end());
  std::map<std::pair<std::string, std::string>, std::string> seen;  // (file name, text) -> first node/file
  for (const auto& f : net) {
    const std::string node = fs::relative(f.parent_path(), network).string();
    const std::string name = f.filename().string();
    const auto [it, fresh] =
        seen.emplace(std::make_pair(name, read_text_file(f.string())), node + "/" + name);
    read_network_csv(f, node, fresh ? "" : it->second, imp);
  }
  SCALEDL_CHECK(imp.summary().files > 0,
                "{}: no profiling/compute/**/mlp.csv and no profiling/network/*/*.csv", opt.root);
  return imp.write(store);
}

}  // namespace scaledl
