// Importer of NVIDIA AIConfigurator's per-operator GPU timings (ai-dynamo/aiconfigurator,
// Apache-2.0; the CSV copy described in ../shared/data/aiconfigurator/README.md or its
// compact subset datasets/gpus/aiconfigurator, same layout and column names).
//
// Layout read: <root>/<gpu>/*.csv with <root>/manifest.csv, and
// <root>/extra_unmerged_prs/<gpu>/*.csv with <root>/extra_unmerged_prs/manifest.csv (tables
// from unmerged pull requests: their commit and pull-request ref come from the manifest's
// `source` column, and their provenance says they are of lower confidence). A manifest row
// per table gives the GPU as the driver names it, the framework, its version and the
// kernel source; a table without one is an Error. Columns are found by header name.
//
// Mapping (docs/gpu-data.md):
//   gemm.csv  gemm_dtype,m,n,k,latency_ms -> linear tokens=m, d_in=k, d_out=n, bias=0,
//             forward only (y = x W^T, torch's nn.Linear layout), fwd median = latency_ms
//             (the collector's mean of 6 CUDA-graph replays, n = 6); bfloat16 -> bf16,
//             fp8 -> fp8 (per-tensor E4M3, the activation quantisation included), float16 ->
//             fp16; other GEMM dtypes (nvfp4, int8_wo, ...) are skipped per dtype.
//   comm_collectives.csv (nccl-tests / oneCCL, out-of-place time) -> collective rows:
//             all_reduce -> allreduce, all_gather -> allgather, reduce_scatter ->
//             reducescatter, half -> fp16, world = num_gpus, one node, intra-node,
//             bytes = message_size_bytes (the nccl-tests -b size), busbw by nccl-tests'
//             factors (comm_factors, ring: 2(n-1)/n all-reduce, (n-1)/n the others),
//             backend nccl (kernel_source NCCL) or oneccl (oneCCL, Intel B60); campaign
//             "<campaign>-<gpu folder>", one fabric per campaign for `scaledl comm fit`.
//             alltoall and int8 rows are skipped.
//   context_attention_<bf16|fp16>.csv batch_size,seq_len,num_heads,num_kv_heads,head_dim,
//             window_size,latency_ms -> flash_attention forward, batch, heads, kv_heads,
//             seq_q = seq_k = seq_len, head_dim = v_dim, causal = 1 (the prefill's fused causal
//             attention; it also writes the paged KV cache); sliding-window rows skipped.
//   generation/encoder attention (decode and encoder kernels: no layer type of ours) and
//             comm_custom_allreduce.csv (the frameworks' own all-reduce kernels): skipped.
// A malformed file (missing column, a field that is not a number) is an Error naming
// file:line and the value; a bad row of a good file (time <= 0, m/n/k <= 0, a GPU without a
// spec sheet, a time faster than the spec) is refused and counted.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "gpudata/csv_table.hpp"
#include "scaledl/comm/comm.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/learn/neusight.hpp"  // parse_csv, csv_column

namespace scaledl {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSource = "aiconfigurator";
constexpr const char* kRepository = "ai-dynamo/aiconfigurator";
constexpr const char* kCommit = "095f58a51c4ca8e61b66ec108d86f223f8d559ce";  ///< the merged data's commit
constexpr const char* kLicense = "Apache-2.0";
constexpr const char* kExtraDir = "extra_unmerged_prs";
constexpr int kGemmTimedRuns = 6;              ///< collector/helper.py::benchmark_with_power: 6 timed replays
constexpr int64_t kMaxDim = int64_t(1) << 40;  ///< validate_dims' bound on a size
/// add_collective's reason, used here too for rows refused before duplicates are resolved.
constexpr const char* kBadCollective = "collective: time, size or ranks not positive";

using gpudata::Table;

/// A field that must be an integer (negative and zero are read: rows refuse them).
int64_t parse_int(const std::string& s, const std::string& where, const char* col) {
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  SCALEDL_CHECK(!s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size(),
                "{}: {}=\"{}\" is not an integer", where, col, s);
  return v;
}

double parse_num(const std::string& s, const std::string& where, const char* col) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  SCALEDL_CHECK(!s.empty() && end == s.c_str() + s.size(), "{}: {}=\"{}\" is not a number", where, col, s);
  return v;
}

/// What a manifest row says about one table.
struct TableInfo {
  std::string device_name;    ///< GPU as the driver names it (';'-separated when several)
  std::string framework;      ///< "trtllm" | "vllm" | "sglang" | "nccl/2.27.3;..."
  std::string version;        ///< framework version
  std::string kernel_source;  ///< "bfloat16:torch_flow;fp8:torch_flow" or one name
  std::string commit;         ///< commit of the data
  std::string pull;           ///< "refs/pull/134/head" for a table of an unmerged pull request, else ""
};

/// `<dir>/manifest.csv` -> (path of the table it names, lexically normal) -> info. A
/// missing file gives nothing (its tables then lack a manifest row: an Error there).
void read_manifest(const fs::path& dir, std::map<std::string, TableInfo>& out) {
  const fs::path path = dir / "manifest.csv";
  if (!fs::exists(path)) return;
  const Table t = Table(path.string());
  const int c_file = t.need("file"), c_dev = t.need("device_name"), c_fw = t.need("framework"),
            c_ks = t.need("kernel_source");
  int c_ver = t.col("framework_version");
  if (c_ver < 0) c_ver = t.need("framework_version_field");  // extra_unmerged_prs/manifest.csv
  const int c_src = t.col("source");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    SCALEDL_CHECK(!f[c_file].empty(), "{}: file is empty", t.where(r));
    TableInfo info{f[c_dev], f[c_fw], f[c_ver], f[c_ks], kCommit, ""};
    // Pull-request tables: source = "git <commit> (refs/pull/<n>/head) <path>".
    if (c_src >= 0 && f[c_src].rfind("git ", 0) == 0) {
      const std::string& s = f[c_src];
      const size_t b = 4, e = s.find(' ', b);
      info.commit = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
      SCALEDL_CHECK(info.commit.size() == 40 &&
                        std::all_of(info.commit.begin(), info.commit.end(),
                                    [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }),
                    "{}: source=\"{}\" does not start with git <40-hex commit>", t.where(r), s);
      const size_t p = s.find('('), q = s.find(')', p == std::string::npos ? 0 : p);
      info.pull =
          p != std::string::npos && q != std::string::npos ? s.substr(p + 1, q - p - 1) : "pull request";
    }
    out[(dir / f[c_file]).lexically_normal().string()] = info;
  }
}

std::string framework_name(const std::string& f) {
  if (f == "trtllm") return "TensorRT-LLM";
  if (f == "vllm") return "vLLM";
  if (f == "sglang") return "SGLang";
  return f;
}

/// The kernel source of `dtype` in "bfloat16:torch_flow;fp8:torch_flow" ("torch_flow": all dtypes).
std::string kernel_source_of(const std::string& spec, const std::string& dtype) {
  size_t b = 0;
  while (b <= spec.size()) {
    const size_t e = std::min(spec.find(';', b), spec.size());
    const std::string item = spec.substr(b, e - b);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return item;
    if (item.substr(0, colon) == dtype) return item.substr(colon + 1);
    b = e + 1;
  }
  return "";
}

/// Provenance shared by every table: source, repository, commit, license; lower confidence
/// said in `framework` for tables of unmerged pull requests.
Provenance base_provenance(const TableInfo& info, const std::string& framework) {
  Provenance p;
  p.source = kSource;
  p.repository = kRepository;
  p.commit = info.commit;
  p.license = kLicense;
  p.framework = framework;
  if (!info.pull.empty())
    p.framework += fmt::format("; from the unmerged pull request {} (lower confidence)", info.pull);
  return p;
}

/// Device records by the name the data gives (cached; nullptr = no spec sheet).
class DeviceNames {
 public:
  explicit DeviceNames(const GpuImport& imp) : imp_(imp) {}
  /// The record of `names` (';'-separated: the first with a spec sheet).
  const DeviceRecord* find(const std::string& names) {
    const auto it = cache_.find(names);
    if (it != cache_.end()) return it->second;
    const DeviceRecord* d = nullptr;
    size_t b = 0;
    while (!d && b <= names.size()) {
      const size_t e = std::min(names.find(';', b), names.size());
      if (e > b) d = imp_.device(names.substr(b, e - b));
      b = e + 1;
    }
    return cache_[names] = d;
  }
  /// "no spec sheet for <the names, ' or ' between them>": the reason a row of `names` is refused.
  static std::string no_spec(const std::string& names) {
    std::string out;
    size_t b = 0;
    while (b <= names.size()) {
      const size_t e = std::min(names.find(';', b), names.size());
      if (e > b) out += (out.empty() ? "" : " or ") + names.substr(b, e - b);
      b = e + 1;
    }
    return GpuImport::no_spec_sheet(out.empty() ? std::string("a GPU the table does not name") : out);
  }

 private:
  const GpuImport& imp_;
  std::map<std::string, const DeviceRecord*> cache_;
};

// ---- GEMM --------------------------------------------------------------------------------

/// ScaleDL's dtype of a gemm_dtype; false for one we have not (nvfp4, int8_wo, fp8_block, ...).
bool gemm_dtype(const std::string& s, DType* d) {
  if (s == "bfloat16")
    *d = DType::BF16;
  else if (s == "fp8")
    *d = DType::FP8;
  else if (s == "float16")
    *d = DType::FP16;
  else
    return false;
  return true;
}

Provenance gemm_provenance(const TableInfo& info, const std::string& dtype) {
  const std::string fw = framework_name(info.framework);
  const std::string ks = kernel_source_of(info.kernel_source, dtype);
  Provenance p = base_provenance(
      info, fmt::format("{} {}{}", fw, info.version, ks.empty() ? "" : ", kernel source " + ks));
  const std::string operands =
      dtype == "fp8"       ? "per-tensor FP8-E4M3 weights; FP8 includes the dynamic activation quantisation"
      : dtype == "float16" ? "FP16 in and out"
                           : "BF16 in and out, FP32 accumulate";
  p.timed = fmt::format(
      "{} Linear y = x W^T (NT layout), forward, {}; CUDA-graph replay, mean of {} runs, weights "
      "cycled through up to 5 copies against L2",
      fw, operands, kGemmTimedRuns);
  return p;
}

void import_gemm(const Table& t, const TableInfo& info, GpuImport& imp, DeviceNames& devs) {
  const int c_dt = t.need("gemm_dtype"), c_m = t.need("m"), c_n = t.need("n"), c_k = t.need("k"),
            c_lat = t.need("latency_ms"), c_dev = t.col("device_name");
  std::map<std::string, Provenance> provs;  // gemm_dtype -> provenance
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    const std::string where = t.where(r);
    const int64_t m = parse_int(f[c_m], where, "m"), n = parse_int(f[c_n], where, "n"),
                  k = parse_int(f[c_k], where, "k");
    const double ms = parse_num(f[c_lat], where, "latency_ms");
    SCALEDL_CHECK(!f[c_dt].empty(), "{}: gemm_dtype is empty", where);
    DType dt = DType::BF16;
    if (!gemm_dtype(f[c_dt], &dt)) {
      imp.skip(fmt::format("GEMM {} (no dtype of ours)", f[c_dt]));
      continue;
    }
    const std::string name = c_dev >= 0 && !f[c_dev].empty() ? f[c_dev] : info.device_name;
    const DeviceRecord* dev = devs.find(name);
    if (!dev) {
      imp.refuse(DeviceNames::no_spec(name));
      continue;
    }
    if (std::min({m, n, k}) < 1 || std::max({m, n, k}) >= kMaxDim) {
      imp.refuse("GEMM m, n or k not in [1, 2^40)");
      continue;
    }
    LayerMeasurement lm;
    lm.type = LayerType::Linear;
    lm.dims = {m, k, n, 0};  // tokens, d_in, d_out, bias
    lm.dtype = dt;
    lm.fwd.median_ms = ms;
    lm.fwd.n = kGemmTimedRuns;
    auto p = provs.find(f[c_dt]);
    if (p == provs.end()) p = provs.emplace(f[c_dt], gemm_provenance(info, f[c_dt])).first;
    imp.add_layer(std::move(lm), *dev, p->second);
  }
}

// ---- context attention ---------------------------------------------------------------------

Provenance attention_provenance(const TableInfo& info, const std::string& dtype) {
  const std::string fw = framework_name(info.framework);
  const std::string ks = kernel_source_of(info.kernel_source, dtype);
  Provenance p = base_provenance(
      info, fmt::format("{} {}{}", fw, info.version, ks.empty() ? "" : ", kernel source " + ks));
  p.timed = fmt::format(
      "{} context (prefill) attention, forward: fused causal attention over fused QKV ({} in and out), "
      "writing the paged KV cache; inference kernel",
      fw, dtype == "fp16" ? "FP16" : "BF16");
  return p;
}

/// context_attention_<dtype>.csv -> flash_attention forward rows: batch, heads, kv_heads, seq_q =
/// seq_k = seq_len, head_dim = v_dim, causal. Sliding-window rows (window_size > 0) are skipped:
/// the kind has no window dim.
void import_context_attention(const Table& t, const TableInfo& info, const std::string& name, GpuImport& imp,
                              DeviceNames& devs) {
  const bool fp16 = name.find("_fp16") != std::string::npos;
  SCALEDL_CHECK(fp16 || name.find("_bf16") != std::string::npos,
                "{}: context attention of a dtype we have not (bf16 or fp16)", name);
  const int c_b = t.need("batch_size"), c_s = t.need("seq_len"), c_h = t.need("num_heads"),
            c_kv = t.need("num_kv_heads"), c_d = t.need("head_dim"), c_w = t.need("window_size"),
            c_lat = t.need("latency_ms"), c_dev = t.col("device_name");
  const Provenance prov = attention_provenance(info, fp16 ? "fp16" : "bfloat16");
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    const std::string where = t.where(r);
    const int64_t b = parse_int(f[c_b], where, "batch_size"), s = parse_int(f[c_s], where, "seq_len"),
                  h = parse_int(f[c_h], where, "num_heads"), kv = parse_int(f[c_kv], where, "num_kv_heads"),
                  d = parse_int(f[c_d], where, "head_dim"), w = parse_int(f[c_w], where, "window_size");
    const double ms = parse_num(f[c_lat], where, "latency_ms");
    if (w > 0) {
      imp.skip("context attention with a sliding window (no window dim)");
      continue;
    }
    const std::string dev_name = c_dev >= 0 && !f[c_dev].empty() ? f[c_dev] : info.device_name;
    const DeviceRecord* dev = devs.find(dev_name);
    if (!dev) {
      imp.refuse(DeviceNames::no_spec(dev_name));
      continue;
    }
    if (std::min({b, s, h, kv, d}) < 1 || std::max({b, s, h, kv, d}) >= kMaxDim || h % kv != 0) {
      imp.refuse("attention: a size not in [1, 2^40), or num_kv_heads not dividing num_heads");
      continue;
    }
    LayerMeasurement lm;
    lm.type = LayerType::FlashAttention;
    lm.dims = {b, h, kv, s, s, d, d, 1};
    lm.dtype = fp16 ? DType::FP16 : DType::BF16;
    lm.fwd.median_ms = ms;
    lm.fwd.n = 1;  // the collector's one mean per shape
    imp.add_layer(std::move(lm), *dev, prov);
  }
}

// ---- collectives -------------------------------------------------------------------------

/// One parsed row of comm_collectives.csv that maps onto a collective of ours.
struct CommRow {
  size_t line = 0;
  const DeviceRecord* dev = nullptr;
  std::string collective, backend, dtype;
  int64_t world = 0;
  double bytes = 0, ms = 0;
  std::string version, framework, folder;  ///< ccl_version_field, framework_field, source_folder
};

/// "2.29.2" -> {2, 29, 2}, "2021.17.2-5" -> {2021, 17, 2, 5}; "" -> {} (the oldest).
std::vector<long> version_parts(const std::string& v) {
  std::vector<long> out;
  size_t i = 0;
  while (i < v.size()) {
    if (std::isdigit(static_cast<unsigned char>(v[i]))) {
      size_t j = i;
      while (j < v.size() && std::isdigit(static_cast<unsigned char>(v[j]))) ++j;
      out.push_back(std::strtol(v.substr(i, j - i).c_str(), nullptr, 10));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

Provenance comm_provenance(const CommRow& c, const TableInfo& info, const std::string& op_name) {
  const std::string lib = c.backend == "oneccl" ? "oneCCL" : "NCCL";
  std::string fw = c.version.empty() ? fmt::format("{} (version not recorded in the rows{})", lib,
                                                   c.folder.empty() ? "" : "; folder " + c.folder)
                                     : fmt::format("{} {}", lib, c.version);
  if (!c.framework.empty()) fw += fmt::format(", in the {} container", c.framework);
  Provenance p = base_provenance(info, fw);
  p.timed = fmt::format(
      "{} {}_perf (nccl-tests), out-of-place time of one operation (the mean of its timed "
      "iterations), intra-node, one node; size = the -b buffer",
      lib, op_name);
  return p;
}

/// Parses the rows; refuses the bad ones and skips the collectives we have no row for.
std::vector<CommRow> read_comm_rows(const Table& t, const TableInfo& info, GpuImport& imp,
                                    DeviceNames& devs) {
  const int c_op = t.need("op_name"), c_dt = t.need("dtype"), c_n = t.need("num_gpus"),
            c_b = t.need("message_size_bytes"), c_lat = t.need("latency_ms"), c_dev = t.col("device_name"),
            c_ver = t.col("ccl_version_field"), c_fw = t.col("framework_field"),
            c_ks = t.col("kernel_source"), c_folder = t.col("source_folder");
  static const std::map<std::string, std::string> kOps = {
      {"all_reduce", "allreduce"}, {"all_gather", "allgather"}, {"reduce_scatter", "reducescatter"}};
  std::vector<CommRow> out;
  for (size_t r = 1; r < t.recs.size(); ++r) {
    const auto& f = t.recs[r];
    const std::string where = t.where(r);
    CommRow c;
    c.line = t.lines[r];
    c.world = parse_int(f[c_n], where, "num_gpus");
    c.bytes = parse_num(f[c_b], where, "message_size_bytes");
    c.ms = parse_num(f[c_lat], where, "latency_ms");
    const std::string& op = f[c_op];
    const auto o = kOps.find(op);
    SCALEDL_CHECK(o != kOps.end() || op == "alltoall",
                  "{}: op_name=\"{}\" is not all_reduce, all_gather, reduce_scatter or alltoall", where, op);
    SCALEDL_CHECK(f[c_dt] == "half" || f[c_dt] == "int8", "{}: dtype=\"{}\" is not half or int8", where,
                  f[c_dt]);
    const std::string ks = c_ks >= 0 ? f[c_ks] : info.kernel_source;
    SCALEDL_CHECK(ks == "NCCL" || ks == "oneCCL", "{}: kernel_source=\"{}\" is not NCCL or oneCCL", where,
                  ks);
    if (op == "alltoall") {
      imp.skip("alltoall");
      continue;
    }
    if (f[c_dt] == "int8") {
      imp.skip("int8 collective");
      continue;
    }
    const std::string name = c_dev >= 0 && !f[c_dev].empty() ? f[c_dev] : info.device_name;
    c.dev = devs.find(name);
    if (!c.dev) {
      imp.refuse(DeviceNames::no_spec(name));
      continue;
    }
    if (!(std::isfinite(c.ms) && c.ms > 0 && std::isfinite(c.bytes) && c.bytes > 0 && c.world >= 2)) {
      imp.refuse(kBadCollective);
      continue;
    }
    c.collective = o->second;
    c.backend = ks == "oneCCL" ? "oneccl" : "nccl";
    c.dtype = "fp16";
    if (c_ver >= 0) c.version = f[c_ver];
    if (c_fw >= 0) c.framework = f[c_fw];
    if (c_folder >= 0) c.folder = f[c_folder];
    out.push_back(std::move(c));
  }
  return out;
}

/// One row per store key: a size is timed several times in one table (NCCL versions of
/// several folders, repeated runs). Kept: the rows of the newest ccl_version_field (an
/// empty one is the oldest), and of them the one of median time (the lower middle of an
/// even count, ties by line): a time that was measured, chosen the same way every run.
/// The others are counted as skipped.
void import_collectives(const Table& t, const TableInfo& info, const std::string& folder, GpuImport& imp,
                        DeviceNames& devs) {
  const std::vector<CommRow> rows = read_comm_rows(t, info, imp, devs);
  using Key = std::tuple<std::string, std::string, std::string, std::string, int64_t, double>;
  std::map<Key, std::vector<const CommRow*>> groups;
  for (const auto& c : rows)
    groups[{c.dev->key(), c.collective, c.backend, c.dtype, c.world, c.bytes}].push_back(&c);
  static const std::map<std::string, std::string> kOpName = {
      {"allreduce", "all_reduce"}, {"allgather", "all_gather"}, {"reducescatter", "reduce_scatter"}};
  const std::string campaign = imp.options().campaign + "-" + folder;
  for (auto& [key, g] : groups) {
    std::vector<long> newest;
    for (const CommRow* c : g) newest = std::max(newest, version_parts(c->version));
    std::vector<const CommRow*> cand;
    for (const CommRow* c : g)
      if (version_parts(c->version) == newest) cand.push_back(c);
    std::sort(cand.begin(), cand.end(), [](const CommRow* a, const CommRow* b) {
      return std::tie(a->ms, a->line) < std::tie(b->ms, b->line);
    });
    const CommRow& c = *cand[(cand.size() - 1) / 2];
    for (size_t i = 1; i < g.size(); ++i)
      imp.skip("collective timed again (kept: newest version, median time)");
    CollectiveMeasurement m;
    m.campaign = campaign;
    m.collective = c.collective;
    m.backend = c.backend;
    m.level = "intra-node";
    m.dtype = c.dtype;
    m.world = c.world;
    m.nodes = 1;
    m.bytes = c.bytes;
    m.in_place = false;
    m.time_s = c.ms / 1e3;
    // nccl-tests' bus bandwidth: algbw x 2(n-1)/n (all-reduce) or (n-1)/n (all-gather, reduce-scatter).
    m.busbw_gbs = c.bytes / m.time_s / 1e9 * comm_factors(c.collective, CommForm::Ring, c.world).a;
    m.cv = NAN;  // nccl-tests prints the mean of its iterations, not their spread
    m.repeats = 0;
    imp.add_collective(std::move(m), *c.dev, comm_provenance(c, info, kOpName.at(c.collective)));
  }
}

// ---- tables ------------------------------------------------------------------------------

/// Why the rows of a table we have no layer type for are skipped; "" = a table we import.
/// Error for a file name that is no aiconfigurator table.
std::string skip_reason(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (name == "gemm.csv" || name == "comm_collectives.csv") return "";
  if (name.rfind("context_attention_", 0) == 0) return "";
  if (name == "comm_custom_allreduce.csv") return "custom all-reduce (framework kernel, not NCCL)";
  for (const char* kind : {"generation", "encoder"})
    if (name.rfind(std::string(kind) + "_attention_", 0) == 0)
      return fmt::format("{} attention (decode / encoder kernels)", kind);
  fail(
      "{}: not an aiconfigurator table (gemm.csv, comm_collectives.csv, comm_custom_allreduce.csv, "
      "context_/generation_/encoder_attention_*.csv)",
      path);
}

/// The *.csv of each GPU folder of `dir` (sorted), as (gpu folder, path); not systems/ nor
/// extra_unmerged_prs/.
std::vector<std::pair<std::string, std::string>> gpu_tables(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!fs::is_directory(dir)) return out;
  std::vector<fs::path> gpus;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename() != kExtraDir && e.path().filename() != "systems")
      gpus.push_back(e.path());
  std::sort(gpus.begin(), gpus.end());
  for (const auto& g : gpus) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(g))
      if (e.is_regular_file() && e.path().extension() == ".csv") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (auto& f : files) out.emplace_back(g.filename().string(), std::move(f));
  }
  return out;
}

}  // namespace

GpuImportSummary import_aiconfigurator(const GpuImportOptions& opt, Store& store) {
  SCALEDL_CHECK(fs::is_directory(opt.root), "--root=\"{}\" is not a folder", opt.root);
  GpuImport imp(kSource, opt);
  const fs::path root(opt.root);
  std::map<std::string, TableInfo> manifest;
  read_manifest(root, manifest);
  read_manifest(root / kExtraDir, manifest);
  auto tables = gpu_tables(root);
  for (auto& t : gpu_tables(root / kExtraDir)) tables.push_back(std::move(t));
  SCALEDL_CHECK(!tables.empty(), "{}: no <gpu>/*.csv tables (is this the aiconfigurator folder?)", opt.root);
  DeviceNames devs(imp);
  for (const auto& [folder, path] : tables) {
    const std::string why = skip_reason(path);
    const Table t = Table(path);
    const auto info = manifest.find(fs::path(path).lexically_normal().string());
    SCALEDL_CHECK(info != manifest.end(), "{}: no row of its folder's manifest.csv names this table", path);
    ++imp.summary().files;
    imp.summary().rows += t.rows();
    const std::string name = fs::path(path).filename().string();
    if (!why.empty()) {
      for (size_t r = 0; r < t.rows(); ++r) imp.skip(why);
    } else if (name == "gemm.csv") {
      import_gemm(t, info->second, imp, devs);
    } else if (name.rfind("context_attention_", 0) == 0) {
      import_context_attention(t, info->second, name, imp, devs);
    } else {
      import_collectives(t, info->second, folder, imp, devs);
    }
  }
  return imp.write(store);
}

}  // namespace scaledl
