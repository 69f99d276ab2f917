// Importer of our own GPU measurements of training's kernels (gpudata.hpp; docs/gpu-data.md):
// what scripts/gpu/gpu_training_kinds.py times on a lent GPU (datasets/h200/training-kinds/, its
// README gives the GPU, the library versions and the command). PyTorch eager, CUDA events around
// back-to-back calls, the median of 5 samples per call:
//
//   kernels.csv    forward and forward+backward of one op over [tokens, hidden] (backward =
//                  their difference):
//                    layernorm              -> layernorm [tokens, hidden]
//                    rmsnorm_hf             -> rmsnorm [tokens, hidden] (Hugging Face's
//                                              LlamaRMSNorm, the eager form our rmsnorm is)
//                    gelu_tanh_4h           -> gelu [tokens x 4 hidden]
//                    dropout                -> dropout [tokens x hidden]
//                    residual_add           -> add [tokens x hidden]
//                    embedding_v<V>         -> embedding [tokens, V, hidden]
//                    cross_entropy_fp32     -> cross_entropy [tokens, V] (the `hidden` column is
//                                              the vocabulary; the logits' FP32 cast included,
//                                              as Hugging Face's loss does it)
//                  a backward is kept where the forward + backward call took 3x its GPU's
//                  fastest such call in kernels.csv or more (nearer, it waits on Python's autograd, not on
//                  kernels: the row keeps its forward alone);
//                  skipped: rmsnorm_fused (a fused RMSNorm is costed by the layernorm model,
//                  layer_predictor.cpp costed_as), swiglu_4h (silu(gate) * up: two layer types)
//   attention.csv  scaled_dot_product_attention forward and forward+backward per backend: the
//                  `default` rows (the backend SDPA picks, what Hugging Face's sdpa runs) ->
//                  flash_attention [batch, heads, kv_heads, seq, seq, head_dim, head_dim, causal];
//                  the rows of a forced backend (flash, cudnn, efficient) are skipped
//   gemm.csv       the forward layout (NT, y = x W^T) -> linear [m, k, n, no bias], BF16, and
//                  FP8 with the activation's quantisation (variant quant+gemm, as AIConfigurator's
//                  FP8 rows and the FP8 recipe's linear include it); the dgrad (NN) and wgrad
//                  (TN) layouts are skipped (a linear's backward is costed as forward GEMMs of its
//                  products: they ran within 1 % of NT at equal shapes), as are FP8 GEMMs without
//                  the quantisation
// A row whose status is not ok is skipped under its status; a GPU without a spec sheet, a time
// that is not positive (a backward at or below zero: the difference of two noisy times) or
// faster than the spec's peak is refused (implausible_layer_row).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "gpudata/csv_table.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/gpudata/gpudata.hpp"

namespace fs = std::filesystem;

namespace scaledl {
namespace {

using gpudata::Table;

Provenance provenance(const std::string& framework, const std::string& timed) {
  Provenance p;
  p.source = "training-kinds";
  p.repository = "ScaleDL (this project): scripts/gpu/gpu_training_kinds.py";
  p.commit = "bccda31 (datasets/h200/training-kinds, 2026-11-29)";
  p.license = "the project's";
  p.framework = framework;
  p.timed = timed;
  return p;
}

/// The framework line of the folder's env.txt (its JSON line: torch, cuda, cudnn), else "PyTorch".
std::string framework_of(const fs::path& root) {
  const fs::path env = root / "env.txt";
  if (!fs::exists(env)) return "PyTorch eager";
  std::istringstream in(read_text_file(env.string()));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.front() == '{') {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("torch") && j["torch"].is_string())
        return fmt::format("PyTorch {} eager{}", j["torch"].get<std::string>(),
                           j.contains("cudnn") ? fmt::format(", cuDNN {}", j["cudnn"].dump()) : "");
    }
  return "PyTorch eager";
}

/// A forward (and backward) time of a row: TimingStats with the median and the sample count.
TimingStats stats(double ms, double cv) {
  TimingStats t;
  t.median_ms = ms;
  t.cv = cv;
  t.n = 5;
  return t;
}

/// Counts row r and says whether it is measured (status ok); skips it under its status otherwise.
bool measured_row(const Table& t, size_t r, int c_st, GpuImport& imp) {
  ++imp.summary().rows;
  const std::string& st = t.recs[r][c_st];
  if (st == "ok") return true;
  imp.skip("status " + st);
  return false;
}

/// The optional number of column c (empty: NaN).
double optional_number(const Table& t, size_t r, int c) {
  return c < 0 || t.recs[r][c].empty() ? NAN : t.number(r, c);
}

/// The harness's floor of a forward + backward call on a GPU: its fastest one in kernels.csv (a residual
/// add's, whose backward launches nothing: Python's autograd.grad, about 0.06 ms on the H200).
/// A backward is kept where its call took kKeptBackward times that or more; nearer the floor the
/// call waits on Python rather than on kernels (a LayerNorm of 4,096 x 1,024: 0.105 ms for a 0.013 ms
/// forward), and the row keeps its forward alone.
constexpr double kKeptBackward = 3.0;
/// Per GPU (as the file names it).
using Floors = std::map<std::string, double>;
Floors fwdbwd_floors(const Table& t) {
  const int c_gpu = t.need("gpu"), c_st = t.need("status"), c_fb = t.need("fwdbwd_ms");
  Floors floor;
  for (size_t r = 1; r < t.recs.size(); ++r)
    if (t.recs[r][c_st] == "ok") {
      const double fb = t.number(r, c_fb);
      const auto [it, added] = floor.emplace(t.recs[r][c_gpu], fb);
      if (!added) it->second = std::min(it->second, fb);
    }
  return floor;
}

/// The floor of `gpu`'s calls; 0 (every backward kept) for a GPU kernels.csv does not time.
double floor_of(const Floors& f, const std::string& gpu) {
  const auto it = f.find(gpu);
  return it == f.end() ? 0.0 : it->second;
}

/// The backward of a row whose forward + backward call took `fwdbwd` ms, or NaN (forward alone)
/// near the harness's floor.
double kept_backward(double fwd, double fwdbwd, double floor) {
  return fwdbwd >= kKeptBackward * floor ? fwdbwd - fwd : NAN;
}

void read_kernels(const Table& t, const Floors& floors, const Provenance& prov, GpuImport& imp) {
  std::set<std::string> seen;  // an elementwise op's [t, h] and [t', h'] with t h = t' h' are one row
  const int c_gpu = t.need("gpu"), c_op = t.need("op"), c_dt = t.need("dtype"), c_t = t.need("tokens"),
            c_h = t.need("hidden"), c_st = t.need("status"), c_f = t.need("fwd_ms"),
            c_fb = t.need("fwdbwd_ms"), c_cv = t.col("fwd_cv");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    if (!measured_row(t, r, c_st, imp)) continue;
    const std::string& op = t.recs[r][c_op];
    const DType dt = parse_dtype(t.recs[r][c_dt], t.where(r) + ": dtype");
    const int64_t tokens = t.count(r, c_t), h = t.count(r, c_h);
    const double fwd = t.number(r, c_f), fwdbwd = t.number(r, c_fb);
    LayerMeasurement m;
    m.dtype = dt;
    if (op == "layernorm") {
      m.type = LayerType::LayerNorm;
      m.dims = {tokens, h};
    } else if (op == "rmsnorm_hf") {
      m.type = LayerType::RMSNorm;
      m.dims = {tokens, h};
    } else if (op == "gelu_tanh_4h") {
      m.type = LayerType::GELU;
      m.dims = {tokens * 4 * h};
    } else if (op == "dropout") {
      m.type = LayerType::Dropout;
      m.dims = {tokens * h};
    } else if (op == "residual_add") {
      m.type = LayerType::Add;
      m.dims = {tokens * h};
    } else if (op.rfind("embedding_v", 0) == 0) {
      const std::string v = op.substr(11);
      SCALEDL_CHECK(!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() < 10,
                    "{}: op={} has no vocabulary size after embedding_v", t.where(r), op);
      m.type = LayerType::Embedding;
      m.dims = {tokens, std::stoll(v), h};
    } else if (op == "cross_entropy_fp32") {
      m.type = LayerType::CrossEntropy;
      m.dims = {tokens, h};  // the hidden column holds the vocabulary
    } else if (op == "rmsnorm_fused") {
      imp.skip("rmsnorm_fused (a fused RMSNorm is costed by the layernorm model)");
      continue;
    } else if (op == "swiglu_4h") {
      imp.skip("swiglu_4h (silu(gate) * up: two layer types)");
      continue;
    } else {
      imp.skip(op);
      continue;
    }
    const DeviceRecord* dev = imp.device_or_refuse(t.recs[r][c_gpu]);
    if (!dev) continue;
    m.fwd = stats(fwd, optional_number(t, r, c_cv));
    if (const double b = kept_backward(fwd, fwdbwd, floor_of(floors, t.recs[r][c_gpu])); !std::isnan(b))
      m.bwd = stats(b, NAN);
    const std::string key = dev->key() + " " + layer_key(m.type, m.dims, m.dtype);
    if (seen.count(key)) {
      imp.skip(fmt::format("{}: the elements of an earlier row's shape (the first is kept)", op));
      continue;
    }
    if (imp.add_layer(std::move(m), *dev, prov)) seen.insert(key);
  }
}

void read_attention(const Table& t, const Floors& floors, const Provenance& prov, GpuImport& imp) {
  const int c_gpu = t.need("gpu"), c_be = t.need("backend"), c_dt = t.need("dtype"), c_b = t.need("batch"),
            c_h = t.need("heads"), c_kv = t.need("kv_heads"), c_s = t.need("seq"), c_d = t.need("head_dim"),
            c_c = t.need("causal"), c_st = t.need("status"), c_f = t.need("fwd_ms"),
            c_fb = t.need("fwdbwd_ms"), c_cv = t.col("fwd_cv");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    if (!measured_row(t, r, c_st, imp)) continue;
    const std::string& be = t.recs[r][c_be];
    if (be != "default") {
      imp.skip(fmt::format("attention backend {} (forced; SDPA's own choice is imported)", be));
      continue;
    }
    const std::string& causal = t.recs[r][c_c];
    SCALEDL_CHECK(causal == "0" || causal == "1", "{}: causal=\"{}\" is not 0 or 1", t.where(r), causal);
    const int64_t d = t.count(r, c_d), s = t.count(r, c_s);
    LayerMeasurement m;
    m.type = LayerType::FlashAttention;
    m.dtype = parse_dtype(t.recs[r][c_dt], t.where(r) + ": dtype");
    m.dims = {t.count(r, c_b), t.count(r, c_h), t.count(r, c_kv), s, s, d, d, causal == "1" ? 1 : 0};
    const double fwd = t.number(r, c_f), fwdbwd = t.number(r, c_fb);
    const DeviceRecord* dev = imp.device_or_refuse(t.recs[r][c_gpu]);
    if (!dev) continue;
    m.fwd = stats(fwd, optional_number(t, r, c_cv));
    if (const double b = kept_backward(fwd, fwdbwd, floor_of(floors, t.recs[r][c_gpu])); !std::isnan(b))
      m.bwd = stats(b, NAN);
    imp.add_layer(std::move(m), *dev, prov);
  }
}

void read_gemm(const Table& t, const Provenance& prov, GpuImport& imp) {
  const int c_gpu = t.need("gpu"), c_dt = t.need("dtype"), c_var = t.need("variant"),
            c_lay = t.need("layout"), c_m = t.need("m"), c_n = t.need("n"), c_k = t.need("k"),
            c_st = t.need("status"), c_ms = t.need("median_ms"), c_cv = t.col("cv");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    if (!measured_row(t, r, c_st, imp)) continue;
    const std::string &var = t.recs[r][c_var], &lay = t.recs[r][c_lay];
    const DType dt = parse_dtype(t.recs[r][c_dt], t.where(r) + ": dtype");
    if (lay != "NT") {
      imp.skip(fmt::format("GEMM layout {} (a linear's backward is costed as forward GEMMs)", lay));
      continue;
    }
    const bool take = (dt == DType::FP8) ? var == "quant+gemm" : var == "gemm";
    if (!take) {
      imp.skip(fmt::format("{} GEMM variant {}", to_string(dt), var));
      continue;
    }
    LayerMeasurement m;
    m.type = LayerType::Linear;
    m.dtype = dt;
    m.dims = {t.count(r, c_m), t.count(r, c_k), t.count(r, c_n), 0};
    const double ms = t.number(r, c_ms);
    const DeviceRecord* dev = imp.device_or_refuse(t.recs[r][c_gpu]);
    if (!dev) continue;
    m.fwd = stats(ms, optional_number(t, r, c_cv));
    imp.add_layer(std::move(m), *dev, prov);
  }
}

}  // namespace

GpuImportSummary import_training_kinds(const GpuImportOptions& opt, Store& store) {
  GpuImportOptions o = opt;
  if (o.campaign.empty()) o.campaign = "training-kinds";
  GpuImport imp("training-kinds", o);
  const fs::path root(opt.root);
  SCALEDL_CHECK(fs::is_directory(root), "--root={}: not a directory", opt.root);
  const std::string fw = framework_of(root);
  bool any = false;
  // Each file that is there, read by `fn`.
  auto read = [&](const char* name, const std::function<void(const Table&)>& fn) {
    if (!fs::exists(root / name)) return;
    const Table t((root / name).string());
    ++imp.summary().files;
    fn(t);
    any = true;
  };
  // The forward + backward calls' floor, from kernels.csv (attention.csv's calls are all far above
  // it); without kernels.csv no backward is dropped.
  Floors floors;
  read("kernels.csv", [&](const Table& t) {
    floors = fwdbwd_floors(t);
    read_kernels(t, floors,
                 provenance(fw,
                            "one op's forward, and forward + backward (backward = the difference), CUDA "
                            "events around back-to-back calls, median of 5 samples"),
                 imp);
  });
  read("attention.csv", [&](const Table& t) {
    read_attention(t, floors,
                   provenance(fw,
                              "scaled_dot_product_attention, SDPA's own backend, forward and forward + "
                              "backward, CUDA events, median of 5 samples"),
                   imp);
  });
  read("gemm.csv", [&](const Table& t) {
    read_gemm(t,
              provenance(fw,
                         "torch.matmul y = x W^T (NT; FP8: torch._scaled_mm with the activation's amax, "
                         "scale and cast), CUDA events around back-to-back calls, median"),
              imp);
  });
  SCALEDL_CHECK(any, "--root={}: none of kernels.csv, attention.csv, gemm.csv is there", opt.root);
  return imp.write(store);
}

}  // namespace scaledl
