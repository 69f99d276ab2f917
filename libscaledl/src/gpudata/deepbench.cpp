// DeepBench importer (gpudata.hpp; sources and mappings: docs/gpu-data.md).
//
// baidu-research/DeepBench's training results (results/train/*.xlsx, converted to CSV
// with every row kept): vendor-submitted kernel times in ms of 2016-2019 GPUs.
//   <root>/gemm.csv       C[M,N] = op(A)[M,K] op(B)[K,N] by cuBLAS / rocBLAS / MKL
//   <root>/allreduce.csv  all-reduce of FP32 buffers (NCCL 2.0, Baidu ring, OSU MPI, MLSL)
//   <root>/specs.csv      each workbook's Specs sheet: software versions per device
//   <root>/conv.csv, rnn.csv (optional): no layer type of ours, every row skipped
// GEMM rows become linear forward rows: N is the batch / token dimension, M and K the
// layer's output and input features, so tokens = N, d_in = K, d_out = M, bias 0. The
// transposes (forward, backward-data and backward-weight variants of one layer) stay apart
// in the campaign "<campaign>-<a_transpose><b_transpose>". Precision "Float" is FP32,
// "16 bit inputs, 16 bit multiplication, 32 bit addition" (V100 / T4 tensor cores) FP16;
// the P100's pseudo-FP16 (16-bit storage, 32-bit math) has no dtype of ours and is
// skipped, as are the rows of the Xeon Phi (a CPU).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "gpudata/csv_table.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/learn/neusight.hpp"  // parse_csv, csv_column

namespace scaledl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRepository = "baidu-research/DeepBench";
constexpr const char* kCommit = "da81ba7820739e2e506dc27f382d15be5479f98f";

using gpudata::Table;

/// "Intel Xeon Phi 7250 (CPU)": DeepBench's one CPU.
bool is_cpu(const std::string& device) {
  return device.find("(CPU)") != std::string::npos;
}

/// The software of each device from specs.csv ("CUDA 10.1.243, cuDNN 7.6.2.24, driver 418.67").
std::map<std::string, std::string> read_frameworks(const std::string& path) {
  const Table t(path);
  const int c_dev = t.need("device"), c_key = t.need("key"), c_val = t.need("value");
  // Specs keys -> how the framework string names them, in the order they are written.
  static const std::vector<std::pair<std::string, std::string>> kKeys = {
      {"CUDA Version", "CUDA"},       {"Cudnn Version", "cuDNN"},     {"Nvidia Driver", "driver"},
      {"ROCm Version", "ROCm"},       {"MIOpen Version", "MIOpen"},   {"Intel MKL Version", ""},
      {"LIBXSMM Version", "LIBXSMM"}, {"Intel MLSL Version", "MLSL"},
  };
  std::map<std::string, std::map<std::string, std::string>> kv;
  for (size_t r = 1; r < t.recs.size(); ++r) {
    std::string v = t.recs[r][c_val];
    v = v.substr(0, v.find('\n'));  // "MKL 2017.3\n(...)": the version is the first line
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    if (!v.empty() && v != "-") kv[t.recs[r][c_dev]][t.recs[r][c_key]] = v;
  }
  std::map<std::string, std::string> out;
  for (const auto& [dev, keys] : kv) {
    std::string s;
    for (const auto& [key, label] : kKeys) {
      const auto it = keys.find(key);
      if (it == keys.end()) continue;
      s += (s.empty() ? "" : ", ") + (label.empty() ? it->second : label + " " + it->second);
    }
    out[dev] = s;
  }
  return out;
}

/// The provenance of a device's rows; `what` names the timed kernels.
Provenance provenance(const std::map<std::string, std::string>& frameworks, const std::string& device,
                      const std::string& what) {
  const auto it = frameworks.find(device);
  const std::string fw =
      it != frameworks.end() && !it->second.empty() ? it->second : "not stated in DeepBench's Specs sheet";
  return {"deepbench",  kRepository, kCommit,
          "Apache-2.0", fw,          fmt::format("vendor-submitted training-kernel times ({}), ms", what)};
}

/// The BLAS a device's GEMMs ran on, from its software.
std::string blas_of(const std::map<std::string, std::string>& frameworks, const std::string& device) {
  const auto it = frameworks.find(device);
  if (it != frameworks.end() && it->second.find("ROCm") != std::string::npos) return "rocBLAS GEMM";
  return "cuBLAS GEMM";
}

void read_gemm(const std::string& path, const std::map<std::string, std::string>& frameworks,
               GpuImport& imp) {
  const Table t(path);
  ++imp.summary().files;
  imp.summary().rows += t.rows();
  const int c_dev = t.need("device"), c_prec = t.need("precision"), c_m = t.need("m"), c_n = t.need("n"),
            c_k = t.need("k"), c_ta = t.need("a_transpose"), c_tb = t.need("b_transpose"),
            c_time = t.need("time_ms");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    const int64_t m = t.count(r, c_m), n = t.count(r, c_n), k = t.count(r, c_k);
    const double ms = t.number(r, c_time);
    for (int c : {c_ta, c_tb})
      SCALEDL_CHECK(f[c] == "N" || f[c] == "T", "{}: {}=\"{}\" is not N or T", t.where(r), t.recs[0][c],
                    f[c]);
    const std::string& device = f[c_dev];
    const std::string& prec = f[c_prec];
    if (is_cpu(device)) {
      imp.skip(device + ": a CPU");
      continue;
    }
    DType dtype;
    if (prec == "Float") {
      dtype = DType::FP32;
    } else if (prec == "16 bit inputs, 16 bit multiplication, 32 bit addition") {
      dtype = DType::FP16;
    } else if (prec == "16 bit inputs, 32 bit multiplication, 32 bit addition") {
      imp.skip("P100 pseudo-FP16 (no tensor cores)");
      continue;
    } else {
      imp.refuse(fmt::format("unknown precision \"{}\"", prec));
      continue;
    }
    const DeviceRecord* dev = imp.device(device);
    if (!dev) {
      imp.refuse(GpuImport::no_spec_sheet(device));
      continue;
    }
    LayerMeasurement lm;
    lm.campaign = imp.options().campaign + "-" + f[c_ta] + f[c_tb];
    lm.type = LayerType::Linear;
    lm.dims = {n, k, m, 0};
    lm.dtype = dtype;
    lm.fwd.median_ms = ms;  // one vendor figure; repeats not recorded (n = 0)
    imp.add_layer(std::move(lm), *dev, provenance(frameworks, device, blas_of(frameworks, device)));
  }
}

/// "NCCL 2.0 MPI" -> "nccl-2-0-mpi".
std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

void read_allreduce(const std::string& path, const std::map<std::string, std::string>& frameworks,
                    GpuImport& imp) {
  const Table t(path);
  ++imp.summary().files;
  imp.summary().rows += t.rows();
  const int c_dev = t.need("device"), c_bytes = t.need("size_bytes_fp32"), c_ranks = t.need("num_ranks"),
            c_nodes = t.need("num_nodes"), c_ms = t.need("mean_ms"), c_alg = t.need("algorithm");
  // Optional: std_ms (the row's cv) and gbytes_per_s_reported (DeepBench's ranks x size / time,
  // checked against the row's own size and time).
  const int c_std = csv_column(t.recs[0], "std_ms"), c_gbs = csv_column(t.recs[0], "gbytes_per_s_reported");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    const double bytes = t.number(r, c_bytes), ms = t.number(r, c_ms);
    const int64_t world = t.count(r, c_ranks), nodes = f[c_nodes].empty() ? 1 : t.count(r, c_nodes);
    const double sd = c_std >= 0 && !f[c_std].empty() ? t.number(r, c_std) : NAN;
    const double gbs = c_gbs >= 0 && !f[c_gbs].empty() ? t.number(r, c_gbs) : NAN;
    const std::string& device = f[c_dev];
    const std::string& alg = f[c_alg];
    if (is_cpu(device)) {
      imp.skip(device + ": a CPU");
      continue;
    }
    std::string backend;
    if (alg.compare(0, 4, "NCCL") == 0)
      backend = "nccl";
    else if (alg == "Baidu RingAllReduce" || alg == "OSU Allreduce" || alg == "Intel MLSL")
      backend = "mpi";  // CUDA-aware MPI point-to-point underneath
    if (backend.empty()) {
      imp.refuse(fmt::format("unknown all-reduce algorithm \"{}\"", alg));
      continue;
    }
    const DeviceRecord* dev = imp.device(device);
    if (!dev) {
      imp.refuse(GpuImport::no_spec_sheet(device));
      continue;
    }
    if (nodes > world) {
      imp.refuse("all-reduce: more nodes than ranks");
      continue;
    }
    if (std::isfinite(gbs) && ms > 0 && bytes > 0 &&
        std::abs(gbs / (world * bytes / (ms * 1e6)) - 1) > 0.02) {
      imp.refuse("all-reduce: reported GB/s contradicts ranks x size / time by more than 2 %");
      continue;
    }
    CollectiveMeasurement c;
    c.campaign = imp.options().campaign + "-" + slug(alg);
    c.collective = "allreduce";
    c.backend = backend;
    c.dtype = "fp32";
    c.world = world;
    c.nodes = nodes;
    c.level = nodes > 1 ? "inter-node" : "intra-node";
    c.bytes = bytes;
    c.time_s = ms / 1e3;  // DeepBench gives the mean
    c.busbw_gbs = 2.0 * (world - 1) / world * bytes / c.time_s / 1e9;
    c.cv = std::isfinite(sd) && ms > 0 ? sd / ms : NAN;
    imp.add_collective(std::move(c), *dev,
                       provenance(frameworks, device, fmt::format("{} all-reduce, mean", alg)));
  }
}

/// conv.csv / rnn.csv: no layer type of ours; every row is skipped as `what`.
void skip_table(const std::string& path, const std::string& what, GpuImport& imp) {
  if (!fs::exists(path)) return;
  const Table t(path);
  ++imp.summary().files;
  imp.summary().rows += t.rows();
  for (size_t r = 1; r < t.recs.size(); ++r) imp.skip(what);
}

}  // namespace

GpuImportSummary import_deepbench(const GpuImportOptions& opt, Store& store) {
  GpuImport imp("deepbench", opt);
  const fs::path root(opt.root);
  const std::string gemm = (root / "gemm.csv").string(), specs = (root / "specs.csv").string();
  SCALEDL_CHECK(fs::exists(gemm) && fs::exists(specs),
                "{}: not a DeepBench data folder (gemm.csv and specs.csv are required)", opt.root);
  const auto frameworks = read_frameworks(specs);
  ++imp.summary().files;
  read_gemm(gemm, frameworks, imp);
  if (fs::exists(root / "allreduce.csv")) read_allreduce((root / "allreduce.csv").string(), frameworks, imp);
  skip_table((root / "conv.csv").string(), "conv", imp);
  skip_table((root / "rnn.csv").string(), "rnn", imp);
  return imp.write(store);
}

}  // namespace scaledl
